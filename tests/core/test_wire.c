/* test_wire.c - the signed envelope and the p2p message bodies.
 *
 * Round trips for every message type, then hostile input: every prefix,
 * every wrong type, every cap, flipped bytes, unknown versions and types,
 * trailing bytes and container headers that claim 2^32-1 elements.
 */
#include "check.h"

#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <math.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define DOMAIN_LEN (sizeof(NS_WIRE_DOMAIN) - 1)

static ns_identity_t *s_id;     /* signs every envelope of this suite */
static ns_identity_t *s_id2;    /* someone else */
static ns_wire_types_t s_types; /* what the decoder accepts; main sets the
                                   built-in types, register_type adds one */

/* ---- helpers ------------------------------------------------------------ */

static void s_fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7u);
}

static msgpack_packer s_packer(msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    return pk;
}

static const uint8_t *s_u8(const msgpack_sbuffer *sb)
{
    return (const uint8_t *)sb->data;
}

/* Exactly len bytes in their own allocation, so that ASan sees any read
 * past the end. Caller frees. */
static uint8_t *s_dup(const uint8_t *p, size_t len)
{
    uint8_t *d = malloc(len ? len : 1);
    if (d && len)
        memcpy(d, p, len);
    return d;
}

/* What to put in one envelope field instead of the right value. */
typedef enum {
    S_RIGHT = 0,
    S_STR,    /* a str "x" */
    S_NIL,    /* nil */
    S_NEG,    /* the integer -1 */
    S_ARRAY,  /* an empty array */
    S_BOOL,   /* true */
    S_FLOAT,  /* 1.0 */
    S_SHORT,  /* a bin one byte shorter than required */
    S_LONG,   /* a bin one byte longer than required */
    S_UINT16, /* the value as a uint16 (for type: 256) */
} s_kind;

/* A raw envelope with every field under the test's control. */
typedef struct {
    uint32_t n;            /* array header count (6 for a good one) */
    uint64_t version;      /* element 0 */
    uint64_t type;         /* element 1 */
    uint64_t timestamp_ms; /* element 3 */
    const uint8_t *body;   /* element 4 (may be NULL with body_len 0) */
    size_t body_len;
    int field;   /* which element (0..5) gets `kind`; -1 for none */
    s_kind kind; /* what that element becomes */
} s_spec_t;

static void s_wrong(msgpack_packer *pk, s_kind kind)
{
    switch (kind) {
    case S_STR:
        ns_mp_str(pk, "x");
        break;
    case S_NIL:
        msgpack_pack_nil(pk);
        break;
    case S_NEG:
        msgpack_pack_int64(pk, -1);
        break;
    case S_ARRAY:
        msgpack_pack_array(pk, 0);
        break;
    case S_BOOL:
        msgpack_pack_true(pk);
        break;
    case S_FLOAT:
        msgpack_pack_double(pk, 1.0);
        break;
    default:
        break;
    }
}

static void s_bin_sized(msgpack_packer *pk, size_t n, s_kind kind)
{
    static const uint8_t zeros[128];
    if (kind == S_SHORT)
        n--;
    if (kind == S_LONG)
        n++;
    ns_mp_bin(pk, zeros, n);
}

static void s_build(msgpack_sbuffer *sb, const s_spec_t *sp)
{
    msgpack_packer pk = s_packer(sb);
    uint8_t sender[NS_ID_BYTES];
    memcpy(sender, ns_identity_pk(s_id), NS_ID_BYTES);
    msgpack_pack_array(&pk, sp->n);
    for (uint32_t i = 0; i < sp->n; i++) {
        int f = (int)i;
        s_kind k = sp->field == f ? sp->kind : S_RIGHT;
        if (k != S_RIGHT && k != S_SHORT && k != S_LONG && k != S_UINT16) {
            s_wrong(&pk, k);
            continue;
        }
        switch (f) {
        case 0:
            msgpack_pack_uint64(&pk, sp->version);
            break;
        case 1:
            if (k == S_UINT16)
                msgpack_pack_uint16(&pk, (uint16_t)sp->type);
            else
                msgpack_pack_uint64(&pk, sp->type);
            break;
        case 2:
            if (k == S_SHORT || k == S_LONG)
                s_bin_sized(&pk, NS_ID_BYTES, k);
            else
                ns_mp_bin(&pk, sender, NS_ID_BYTES);
            break;
        case 3:
            msgpack_pack_uint64(&pk, sp->timestamp_ms);
            break;
        case 4:
            ns_mp_bin(&pk, sp->body, sp->body_len);
            break;
        case 5:
            s_bin_sized(&pk, NS_SIG_BYTES, k);
            break;
        default:
            msgpack_pack_nil(&pk); /* elements past the sixth */
            break;
        }
    }
}

static s_spec_t s_good_spec(void)
{
    static const uint8_t body[] = {0x90}; /* an empty array */
    s_spec_t sp = {6,    NS_WIRE_VERSION, NS_MSG_PULL, 1700000000000ull,
                   body, sizeof body,     -1,          S_RIGHT};
    return sp;
}

static int s_decode_spec(const s_spec_t *sp)
{
    msgpack_sbuffer sb;
    ns_envelope_t env;
    s_build(&sb, sp);
    uint8_t *copy = s_dup(s_u8(&sb), sb.size);
    int rc = ns_envelope_decode(copy, sb.size, &s_types, &env);
    free(copy);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Encode body as a signed envelope of `type`, decode it, verify it, and
 * check every envelope field. Returns the decoded envelope borrowing from
 * out (caller releases out). */
static int s_seal_open(uint8_t type, const ns_buf_t *body, ns_buf_t *out,
                       ns_envelope_t *env)
{
    ns_hash_t id_enc;
    uint64_t ts = ns_now_ms();
    ns_buf_init(out);
    if (!CHECK_RC(ns_envelope_encode(s_id, type, ts, body->data, body->len, out,
                                     id_enc),
                  NS_OK))
        return 0;
    CHECK(out->len <= NS_MAX_MSG);
    if (!CHECK_RC(ns_envelope_decode(out->data, out->len, &s_types, env),
                  NS_OK))
        return 0;
    CHECK_RC(ns_envelope_verify(env), NS_OK);
    CHECK_EQ_INT(env->version, NS_WIRE_VERSION);
    CHECK_EQ_INT(env->type, type);
    CHECK_MEM(env->sender, ns_identity_pk(s_id), NS_ID_BYTES);
    CHECK(env->timestamp_ms == ts);
    CHECK_EQ_INT(env->body_len, body->len);
    if (body->len)
        CHECK_MEM(env->body, body->data, body->len);
    CHECK_MEM(env->id, id_enc, NS_HASH_BYTES);
    return 1;
}

/* Every proper prefix of a body must be NS_ERR_TRUNCATED. */
typedef int (*s_body_decoder)(const uint8_t *buf, size_t len, void *out);

static int s_dec_hello(const uint8_t *b, size_t n, void *o)
{
    return ns_hello_decode(b, n, o);
}
static int s_dec_heartbeat(const uint8_t *b, size_t n, void *o)
{
    return ns_heartbeat_decode(b, n, o);
}
static int s_dec_peers(const uint8_t *b, size_t n, void *o)
{
    return ns_peers_decode(b, n, o);
}
static int s_dec_pull(const uint8_t *b, size_t n, void *o)
{
    return ns_pull_decode(b, n, o);
}

static void s_check_prefixes(const char *what, s_body_decoder dec,
                             const uint8_t *buf, size_t len, void *scratch)
{
    size_t bad = 0;
    for (size_t k = 0; k < len; k++) {
        uint8_t *copy = s_dup(buf, k);
        int rc = dec(copy, k, scratch);
        free(copy);
        if (rc != NS_ERR_TRUNCATED) {
            if (bad++ < 5)
                ns_test_fail(__FILE__, __LINE__,
                             "%s: prefix of %zu/%zu bytes gave %d (%s)", what,
                             k, len, rc, ns_errname(rc));
        }
    }
    if (bad == 0)
        ns_test_pass();
}

/* One trailing byte after a complete body is NS_ERR_TRAILING. */
static void s_check_trailing(const char *what, s_body_decoder dec,
                             const uint8_t *buf, size_t len, void *scratch)
{
    uint8_t *copy = malloc(len + 1);
    if (!CHECK(copy != NULL))
        return;
    memcpy(copy, buf, len);
    copy[len] = 0xc0;
    int rc = dec(copy, len + 1, scratch);
    if (rc == NS_ERR_TRAILING)
        ns_test_pass();
    else
        ns_test_fail(__FILE__, __LINE__, "%s + 1 byte gave %d (%s)", what, rc,
                     ns_errname(rc));
    free(copy);
}

static void s_devinfo_fill(ns_devinfo_t *d, uint32_t i)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "Device %u \"quoted\" \\ back", i);
    snprintf(d->vendor, sizeof d->vendor, "Vendor %u", i % 3);
    d->type = i % 4;
    d->global_mem_bytes = (uint64_t)(i + 1) << 33;
    d->max_alloc_bytes = (uint64_t)(i + 1) << 31;
    d->compute_units = 8 + i;
    d->clock_mhz = 1000 + 10 * i;
    snprintf(d->cl_c_version, sizeof d->cl_c_version, "OpenCL C 1.%u", i % 3);
    d->gflops = 1234.5 + i;
    d->gbps = i == 0 ? 0.0 : 321.25 * i;
}

static void s_heartbeat_fill(ns_heartbeat_t *m, uint32_t n_devices)
{
    memset(m, 0, sizeof *m);
    s_fill(m->network_id, NS_HASH_BYTES, 11);
    snprintf(m->endpoint, sizeof m->endpoint, "tcp://192.168.1.20:7946");
    snprintf(m->version, sizeof m->version, "0.1.0-test");
    m->interval_ms = 5000;
    m->sent_us = UINT64_C(1763700000123456);
    m->price = UINT64_MAX; /* every width must survive */
    m->stake = 0;
    snprintf(m->region, sizeof m->region, "eu-west");
    m->free_slots = UINT32_MAX;
    m->ledger_entries = 70000;
    s_fill(m->ledger_digest, NS_HASH_BYTES, 99);
    m->n_devices = n_devices;
    for (uint32_t i = 0; i < n_devices; i++)
        s_devinfo_fill(&m->devices[i], i);
    if (n_devices > 0) {
        /* names and versions at their caps */
        memset(m->devices[0].name, 'n', NS_MAX_DEVICE_NAME);
        m->devices[0].name[NS_MAX_DEVICE_NAME] = '\0';
        memset(m->devices[0].cl_c_version, 'v', NS_MAX_CL_VERSION);
        m->devices[0].cl_c_version[NS_MAX_CL_VERSION] = '\0';
    }
}

static void s_devinfo_equal(const ns_devinfo_t *a, const ns_devinfo_t *b)
{
    CHECK_STR(a->name, b->name);
    CHECK_STR(a->vendor, b->vendor);
    CHECK_EQ_INT(a->type, b->type);
    CHECK(a->global_mem_bytes == b->global_mem_bytes);
    CHECK(a->max_alloc_bytes == b->max_alloc_bytes);
    CHECK_EQ_INT(a->compute_units, b->compute_units);
    CHECK_EQ_INT(a->clock_mhz, b->clock_mhz);
    CHECK_STR(a->cl_c_version, b->cl_c_version);
    CHECK(a->gflops == b->gflops);
    CHECK(a->gbps == b->gbps);
}

static void s_heartbeat_equal(const ns_heartbeat_t *a, const ns_heartbeat_t *b)
{
    CHECK_MEM(a->network_id, b->network_id, NS_HASH_BYTES);
    CHECK_STR(a->endpoint, b->endpoint);
    CHECK_STR(a->version, b->version);
    CHECK_EQ_INT(a->interval_ms, b->interval_ms);
    CHECK(a->sent_us == b->sent_us);
    CHECK(a->price == b->price);
    CHECK(a->stake == b->stake);
    CHECK_STR(a->region, b->region);
    CHECK(a->free_slots == b->free_slots);
    CHECK(a->ledger_entries == b->ledger_entries);
    CHECK_MEM(a->ledger_digest, b->ledger_digest, NS_HASH_BYTES);
    if (!CHECK_EQ_INT(a->n_devices, b->n_devices))
        return;
    for (uint32_t i = 0; i < a->n_devices; i++)
        s_devinfo_equal(&a->devices[i], &b->devices[i]);
}

/* A heartbeat body written field by field, so that a test can declare any
 * number of devices and put any value in any field. */
typedef struct {
    uint32_t n_fields;       /* 12 for a good body */
    uint32_t declared;       /* device count in the array header */
    uint32_t written;        /* devices actually packed */
    uint64_t interval_ms;    /* any width */
    const ns_devinfo_t *dev; /* packed `written` times */
} s_hb_spec_t;

static void s_pack_heartbeat(msgpack_sbuffer *sb, const ns_heartbeat_t *m,
                             const s_hb_spec_t *sp)
{
    msgpack_packer pk = s_packer(sb);
    msgpack_pack_array(&pk, sp->n_fields);
    ns_mp_bin(&pk, m->network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, m->endpoint);
    ns_mp_str(&pk, m->version);
    msgpack_pack_uint64(&pk, sp->interval_ms);
    msgpack_pack_uint64(&pk, m->sent_us);
    msgpack_pack_uint64(&pk, m->price);
    msgpack_pack_uint64(&pk, m->stake);
    ns_mp_str(&pk, m->region);
    msgpack_pack_uint32(&pk, m->free_slots);
    msgpack_pack_uint64(&pk, m->ledger_entries);
    ns_mp_bin(&pk, m->ledger_digest, NS_HASH_BYTES);
    if (sp->n_fields < 12)
        return;
    msgpack_pack_array(&pk, sp->declared);
    for (uint32_t i = 0; i < sp->written; i++)
        ns_devinfo_pack(&pk, sp->dev);
    for (uint32_t i = 12; i < sp->n_fields; i++)
        msgpack_pack_nil(&pk);
}

static int s_hb_decode_spec(const s_hb_spec_t *sp)
{
    static ns_heartbeat_t m, out;
    msgpack_sbuffer sb;
    s_heartbeat_fill(&m, 0);
    s_pack_heartbeat(&sb, &m, sp);
    uint8_t *copy = s_dup(s_u8(&sb), sb.size);
    int rc = ns_heartbeat_decode(copy, sb.size, &out);
    free(copy);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* ---- type registry ---------------------------------------------------- */

TEST(type_table)
{
    ns_wire_types_t types;
    memset(&types, 0xff, sizeof types);
    ns_wire_types_init(&types);
    CHECK(ns_wire_types_has(&types, NS_MSG_HELLO));
    CHECK(ns_wire_types_has(&types, NS_MSG_HEARTBEAT));
    CHECK(ns_wire_types_has(&types, NS_MSG_PEERS));
    CHECK(ns_wire_types_has(&types, NS_MSG_PULL));
    CHECK(ns_wire_types_has(&types, NS_MSG_RELAY));
    CHECK(!ns_wire_types_has(&types, 0));
    CHECK(ns_wire_types_has(&types, NS_MSG_IHAVE));
    CHECK(ns_wire_types_has(&types, NS_MSG_IWANT));
    CHECK(ns_wire_types_has(&types, NS_MSG_MESH));
    CHECK(!ns_wire_types_has(&types, 9));
    CHECK(!ns_wire_types_has(&types, 200));
    CHECK(!ns_wire_types_has(&types, 255));
    CHECK(!ns_wire_types_has(&types, 256));
    CHECK(!ns_wire_types_has(&types, UINT32_MAX));
    /* every bit on its own: 63, 64 and 255 sit at word edges */
    const uint8_t edges[] = {9, 63, 64, 127, 128, 255};
    for (size_t i = 0; i < sizeof edges; i++) {
        ns_wire_types_add(&types, edges[i]);
        CHECK(ns_wire_types_has(&types, edges[i]));
        CHECK(!ns_wire_types_has(&types, (uint32_t)edges[i] + 256));
        ns_wire_types_remove(&types, edges[i]);
        CHECK(!ns_wire_types_has(&types, edges[i]));
    }
    ns_wire_types_remove(&types, NS_MSG_PULL);
    CHECK(!ns_wire_types_has(&types, NS_MSG_PULL));
    CHECK(ns_wire_types_has(&types, NS_MSG_PEERS));
    CHECK_STR(ns_wire_type_name(NS_MSG_HELLO), "hello");
    CHECK_STR(ns_wire_type_name(NS_MSG_HEARTBEAT), "heartbeat");
    CHECK_STR(ns_wire_type_name(NS_MSG_PEERS), "peers");
    CHECK_STR(ns_wire_type_name(NS_MSG_PULL), "pull");
    CHECK_STR(ns_wire_type_name(200), "other");
    CHECK_STR(ns_wire_type_name(UINT32_MAX), "other");
}

TEST(buf)
{
    ns_buf_t b;
    ns_buf_init(&b);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    CHECK_RC(ns_buf_append(&b, "", 0), NS_OK);
    uint8_t chunk[1000];
    s_fill(chunk, sizeof chunk, 3);
    for (int i = 0; i < 100; i++)
        CHECK_RC(ns_buf_append(&b, chunk, sizeof chunk), NS_OK);
    CHECK_EQ_INT(b.len, 100000);
    CHECK(b.cap >= b.len);
    CHECK_MEM(b.data + 99000, chunk, sizeof chunk);
    CHECK_RC(ns_buf_append(&b, chunk, SIZE_MAX - 10), NS_ERR_TOOBIG);
    CHECK_EQ_INT(b.len, 100000);
    ns_buf_release(&b);
    CHECK(b.data == NULL && b.len == 0);
    ns_buf_release(&b); /* twice is fine */
}

/* ---- round trips -------------------------------------------------------- */

TEST(hello_round_trip)
{
    ns_hello_t m, got;
    ns_buf_t body, env_buf;
    ns_envelope_t env;
    memset(&m, 0, sizeof m);
    s_fill(m.network_id, NS_HASH_BYTES, 1);
    snprintf(m.endpoint, sizeof m.endpoint, "tcp://127.0.0.1:7946");
    snprintf(m.version, sizeof m.version, "0.1.0");
    ns_buf_init(&body);
    if (!CHECK_RC(ns_hello_encode(&m, &body), NS_OK))
        return;
    CHECK_RC(ns_hello_decode(body.data, body.len, &got), NS_OK);
    CHECK_MEM(got.network_id, m.network_id, NS_HASH_BYTES);
    CHECK_STR(got.endpoint, m.endpoint);
    CHECK_STR(got.version, m.version);

    if (s_seal_open(NS_MSG_HELLO, &body, &env_buf, &env)) {
        memset(&got, 0xaa, sizeof got);
        CHECK_RC(ns_hello_decode(env.body, env.body_len, &got), NS_OK);
        CHECK_MEM(got.network_id, m.network_id, NS_HASH_BYTES);
        CHECK_STR(got.endpoint, m.endpoint);
        CHECK_STR(got.version, m.version);
    }
    ns_buf_release(&env_buf);

    /* endpoint and version at their caps */
    memset(m.endpoint, 0, sizeof m.endpoint);
    memcpy(m.endpoint, "tcp://", 6);
    memset(m.endpoint + 6, 'h', NS_ENDPOINT_MAX - 1 - 6 - 5);
    memcpy(m.endpoint + NS_ENDPOINT_MAX - 1 - 5, ":7000", 5);
    CHECK_EQ_INT(strlen(m.endpoint), NS_ENDPOINT_MAX - 1);
    memset(m.version, 'v', NS_MAX_VERSION_STR);
    m.version[NS_MAX_VERSION_STR] = '\0';
    CHECK_RC(ns_hello_encode(&m, &body), NS_OK);
    CHECK_RC(ns_hello_decode(body.data, body.len, &got), NS_OK);
    CHECK_STR(got.endpoint, m.endpoint);
    CHECK_STR(got.version, m.version);
    ns_buf_release(&body);
}

static void s_heartbeat_round_trip(uint32_t n_devices)
{
    static ns_heartbeat_t m, got;
    ns_buf_t body, env_buf;
    ns_envelope_t env;
    s_heartbeat_fill(&m, n_devices);
    ns_buf_init(&body);
    if (!CHECK_RC(ns_heartbeat_encode(&m, &body), NS_OK))
        return;
    CHECK_RC(ns_heartbeat_decode(body.data, body.len, &got), NS_OK);
    s_heartbeat_equal(&m, &got);
    if (s_seal_open(NS_MSG_HEARTBEAT, &body, &env_buf, &env)) {
        CHECK_RC(ns_heartbeat_decode(env.body, env.body_len, &got), NS_OK);
        s_heartbeat_equal(&m, &got);
    }
    ns_buf_release(&env_buf);
    ns_buf_release(&body);
}

TEST(heartbeat_round_trip_no_devices)
{
    s_heartbeat_round_trip(0);
}

TEST(heartbeat_round_trip_max_devices)
{
    s_heartbeat_round_trip(NS_MAX_DEVICES);
}

/* Behind a router: contacts that cannot be dialled, the relay flag as an
 * optional 13th element (absent when 0, so 12-element readers still read
 * every other heartbeat), and the RELAY body. */
TEST(contact_flags_and_relay)
{
    static ns_heartbeat_t m, got;
    ns_buf_t body;
    ns_buf_init(&body);
    s_heartbeat_fill(&m, 1);
    const char *contacts[] = {
        "",
        "relay:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@tcp://"
        "10.0.0.1:7946",
    };
    for (size_t i = 0; i < 2; i++) {
        snprintf(m.endpoint, sizeof m.endpoint, "%s", contacts[i]);
        m.flags = (uint32_t)i * NS_HB_RELAY;
        CHECK_RC(ns_heartbeat_encode(&m, &body), NS_OK);
        CHECK_EQ_INT(body.data[0], 0x90 | (12 + (int)i));
        CHECK_RC(ns_heartbeat_decode(body.data, body.len, &got), NS_OK);
        CHECK_STR(got.endpoint, contacts[i]);
        CHECK_EQ_INT(got.flags, m.flags);
        body.len = 0;
    }
    CHECK_RC(ns_contact_check("relay:x@tcp://1.2.3.4:5"), NS_ERR_ADDR);
    CHECK(ns_contact_relay("relay:abc") != NULL);
    CHECK(ns_contact_relay("tcp://1.2.3.4:5") == NULL);
    /* 14 elements or 11: refused */
    uint8_t *raw = NULL;
    CHECK_RC(ns_heartbeat_encode(&m, &body), NS_OK);
    raw = body.data;
    raw[0] = 0x90 | 14;
    CHECK(ns_heartbeat_decode(body.data, body.len, &got) != NS_OK);
    raw[0] = 0x90 | 11;
    CHECK(ns_heartbeat_decode(body.data, body.len, &got) != NS_OK);
    body.len = 0;

    uint8_t env[40];
    s_fill(env, sizeof env, 9);
    ns_relay_t r = {{0}, env, sizeof env}, back;
    s_fill(r.to, NS_ID_BYTES, 3);
    CHECK_RC(ns_relay_encode(&r, &body), NS_OK);
    CHECK_RC(ns_relay_decode(body.data, body.len, &back), NS_OK);
    CHECK_MEM(back.to, r.to, NS_ID_BYTES);
    CHECK_EQ_INT(back.env_len, sizeof env);
    CHECK_MEM(back.env, env, sizeof env);
    CHECK_RC(ns_relay_decode(body.data, body.len - 1, &back), NS_ERR_TRUNCATED);
    r.env_len = 0;
    CHECK_RC(ns_relay_encode(&r, &body), NS_ERR_TOOBIG);
    r.env_len = NS_MAX_RELAYED + 1;
    CHECK_RC(ns_relay_encode(&r, &body), NS_ERR_TOOBIG);
    ns_buf_release(&body);
}

static void s_peers_fill(ns_peers_t *m, uint32_t n)
{
    memset(m, 0, sizeof *m);
    m->n = n;
    for (uint32_t i = 0; i < n; i++) {
        s_fill(m->peers[i].id, NS_ID_BYTES, (uint8_t)(i * 3));
        snprintf(m->peers[i].endpoint, sizeof m->peers[i].endpoint,
                 "tcp://10.0.%u.%u:%u", i / 250, i % 250, 7000 + i);
    }
}

static void s_peers_round_trip(uint32_t n)
{
    static ns_peers_t m, got;
    ns_buf_t body, env_buf;
    ns_envelope_t env;
    s_peers_fill(&m, n);
    ns_buf_init(&body);
    if (!CHECK_RC(ns_peers_encode(&m, &body), NS_OK))
        return;
    CHECK_RC(ns_peers_decode(body.data, body.len, &got), NS_OK);
    if (s_seal_open(NS_MSG_PEERS, &body, &env_buf, &env)) {
        memset(&got, 0xaa, sizeof got);
        CHECK_RC(ns_peers_decode(env.body, env.body_len, &got), NS_OK);
    }
    if (CHECK_EQ_INT(got.n, n)) {
        for (uint32_t i = 0; i < n; i++) {
            CHECK_MEM(got.peers[i].id, m.peers[i].id, NS_ID_BYTES);
            CHECK_STR(got.peers[i].endpoint, m.peers[i].endpoint);
        }
    }
    ns_buf_release(&env_buf);
    ns_buf_release(&body);
}

TEST(peers_round_trip_empty)
{
    s_peers_round_trip(0);
}

TEST(peers_round_trip_max)
{
    s_peers_round_trip(NS_MAX_PEERS_MSG);
}

static void s_pull_round_trip(uint32_t n)
{
    ns_buf_t body, env_buf;
    ns_envelope_t env;
    ns_pull_t got;
    uint8_t *ids = malloc((size_t)n * NS_HASH_BYTES + 1);
    if (!CHECK(ids != NULL))
        return;
    s_fill(ids, (size_t)n * NS_HASH_BYTES, (uint8_t)n);
    ns_buf_init(&body);
    if (!CHECK_RC(ns_pull_encode(ids, n, &body), NS_OK))
        goto out;
    CHECK_RC(ns_pull_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.n, n);
    if (s_seal_open(NS_MSG_PULL, &body, &env_buf, &env)) {
        CHECK_RC(ns_pull_decode(env.body, env.body_len, &got), NS_OK);
        if (CHECK_EQ_INT(got.n, n) && n) {
            CHECK_MEM(got.ids, ids, (size_t)n * NS_HASH_BYTES);
            /* borrowed from the envelope buffer, not copied */
            CHECK(got.ids >= env_buf.data &&
                  got.ids < env_buf.data + env_buf.len);
        }
    }
    ns_buf_release(&env_buf);
out:
    ns_buf_release(&body);
    free(ids);
}

TEST(pull_round_trip)
{
    s_pull_round_trip(0);
    s_pull_round_trip(1);
    s_pull_round_trip(5);
    s_pull_round_trip(NS_MAX_PULL_IDS);
}

/* ---- envelope ------------------------------------------------------------ */

TEST(envelope_id)
{
    uint8_t body[100];
    ns_buf_t a, b;
    ns_hash_t id_a, id_a2, id_b, want;
    ns_envelope_t env, env2;
    s_fill(body, sizeof body, 5);
    ns_buf_init(&a);
    ns_buf_init(&b);
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1000, body, sizeof body, &a,
                                id_a),
             NS_OK);
    /* the same message again: same bytes (Ed25519 is deterministic) */
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1000, body, sizeof body, &b,
                                id_a2),
             NS_OK);
    CHECK_MEM(id_a, id_a2, NS_HASH_BYTES);
    if (CHECK_EQ_INT(a.len, b.len))
        CHECK_MEM(a.data, b.data, a.len);
    /* id_out may be NULL */
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1000, body, sizeof body, &b,
                                NULL),
             NS_OK);

    if (!CHECK_RC(ns_envelope_decode(a.data, a.len, &s_types, &env), NS_OK))
        goto out;
    CHECK_MEM(env.id, id_a, NS_HASH_BYTES);
    CHECK_RC(ns_envelope_decode(a.data, a.len, &s_types, &env2), NS_OK);
    CHECK_MEM(env2.id, env.id, NS_HASH_BYTES);
    /* signed part: elements 1..5 exactly as on the wire */
    CHECK(env.signed_part == a.data + 1);
    CHECK_EQ_INT(env.signed_len, a.len - 1 - 2 - NS_SIG_BYTES);
    CHECK(env.body == a.data + a.len - 2 - NS_SIG_BYTES - sizeof body);
    /* id = BLAKE2b-256(domain || signed bytes) */
    ns_hash2(want, NS_WIRE_DOMAIN, DOMAIN_LEN, env.signed_part, env.signed_len);
    CHECK_MEM(env.id, want, NS_HASH_BYTES);
    /* ... and the signature is over sig domain || id */
    {
        uint8_t msg[sizeof(NS_WIRE_SIG_DOMAIN) - 1 + NS_HASH_BYTES];
        memcpy(msg, NS_WIRE_SIG_DOMAIN, sizeof(NS_WIRE_SIG_DOMAIN) - 1);
        memcpy(msg + sizeof(NS_WIRE_SIG_DOMAIN) - 1, want, NS_HASH_BYTES);
        CHECK_RC(ns_sig_verify(env.sender, msg, sizeof msg, env.sig), NS_OK);
    }

    /* anything signed changes the id */
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1001, body, sizeof body, &b,
                                id_b),
             NS_OK);
    CHECK(memcmp(id_a, id_b, NS_HASH_BYTES) != 0);
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PEERS, 1000, body, sizeof body, &b,
                                id_b),
             NS_OK);
    CHECK(memcmp(id_a, id_b, NS_HASH_BYTES) != 0);
    CHECK_RC(ns_envelope_encode(s_id2, NS_MSG_PULL, 1000, body, sizeof body, &b,
                                id_b),
             NS_OK);
    CHECK(memcmp(id_a, id_b, NS_HASH_BYTES) != 0);
out:
    ns_buf_release(&a);
    ns_buf_release(&b);
}

TEST(envelope_timestamps_and_empty_body)
{
    static const uint64_t stamps[] = {0,     127,        128,       65535,
                                      65536, UINT32_MAX, UINT64_MAX};
    ns_buf_t b;
    ns_envelope_t env;
    ns_buf_init(&b);
    for (size_t i = 0; i < sizeof stamps / sizeof *stamps; i++) {
        CHECK_RC(ns_envelope_encode(s_id, NS_MSG_HELLO, stamps[i], NULL, 0, &b,
                                    NULL),
                 NS_OK);
        if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env),
                     NS_OK)) {
            CHECK(env.timestamp_ms == stamps[i]);
            CHECK_EQ_INT(env.body_len, 0);
            CHECK_RC(ns_envelope_verify(&env), NS_OK);
        }
    }
    ns_buf_release(&b);
}

TEST(envelope_body_caps)
{
    uint8_t *body = calloc(1, NS_MAX_BODY + 1);
    ns_buf_t b;
    ns_envelope_t env;
    if (!CHECK(body != NULL))
        return;
    ns_buf_init(&b);
    /* the largest body fits in the largest message */
    if (CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1, body, NS_MAX_BODY, &b,
                                    NULL),
                 NS_OK)) {
        CHECK(b.len <= NS_MAX_MSG);
        CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK);
        CHECK_RC(ns_envelope_verify(&env), NS_OK);
    }
    /* with a timestamp of today (9 bytes) it is exactly NS_MAX_MSG */
    if (CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, ns_now_ms(), body,
                                    NS_MAX_BODY, &b, NULL),
                 NS_OK)) {
        CHECK_EQ_INT(b.len, NS_MAX_MSG);
        CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK);
    }
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1, body, NS_MAX_BODY + 1, &b,
                                NULL),
             NS_ERR_TOOBIG);

    /* a body bin one byte over the cap, in a message under NS_MAX_MSG */
    s_spec_t sp = s_good_spec();
    sp.body = body;
    sp.body_len = NS_MAX_BODY + 1;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_TOOBIG);

    /* a body bin32 header claiming 4 GiB, nothing after it */
    uint8_t hdr[64];
    size_t n = 0;
    hdr[n++] = 0x96;
    hdr[n++] = NS_WIRE_VERSION;
    hdr[n++] = NS_MSG_PULL;
    hdr[n++] = 0xc4;
    hdr[n++] = NS_ID_BYTES;
    memcpy(hdr + n, ns_identity_pk(s_id), NS_ID_BYTES);
    n += NS_ID_BYTES;
    hdr[n++] = 0x01; /* timestamp */
    hdr[n++] = 0xc6;
    memset(hdr + n, 0xff, 4);
    n += 4;
    CHECK_RC(ns_envelope_decode(hdr, n, &s_types, &env), NS_ERR_TOOBIG);

    /* a whole message one byte over NS_MAX_MSG, whatever it holds */
    uint8_t *big = calloc(1, NS_MAX_MSG + 1);
    if (CHECK(big != NULL)) {
        CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PULL, 1, body, 10, &b, NULL),
                 NS_OK);
        memcpy(big, b.data, b.len);
        CHECK_RC(ns_envelope_decode(big, NS_MAX_MSG + 1, &s_types, &env),
                 NS_ERR_TOOBIG);
        CHECK_RC(ns_envelope_decode(big, NS_MAX_MSG, &s_types, &env),
                 NS_ERR_TRAILING);
        free(big);
    }
    ns_buf_release(&b);
    free(body);
}

TEST(envelope_every_prefix_truncated)
{
    uint8_t body[40];
    ns_buf_t b;
    ns_envelope_t env;
    s_fill(body, sizeof body, 9);
    ns_buf_init(&b);
    if (!CHECK_RC(ns_envelope_encode(s_id, NS_MSG_PEERS, ns_now_ms(), body,
                                     sizeof body, &b, NULL),
                  NS_OK))
        return;
    size_t bad = 0;
    for (size_t k = 0; k < b.len; k++) {
        uint8_t *copy = s_dup(b.data, k);
        int rc = ns_envelope_decode(copy, k, &s_types, &env);
        free(copy);
        if (rc != NS_ERR_TRUNCATED && bad++ < 5)
            ns_test_fail(__FILE__, __LINE__,
                         "prefix of %zu/%zu bytes gave %d (%s)", k, b.len, rc,
                         ns_errname(rc));
    }
    if (bad == 0)
        ns_test_pass();
    ns_buf_release(&b);
}

TEST(envelope_trailing)
{
    ns_buf_t b;
    ns_envelope_t env;
    ns_buf_init(&b);
    CHECK_RC(ns_envelope_encode(s_id, NS_MSG_HELLO, 5, NULL, 0, &b, NULL),
             NS_OK);
    uint8_t zero = 0;
    CHECK_RC(ns_buf_append(&b, &zero, 1), NS_OK);
    CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env),
             NS_ERR_TRAILING);
    ns_buf_release(&b);
}

TEST(envelope_wrong_types)
{
    s_spec_t sp = s_good_spec();
    CHECK_RC(s_decode_spec(&sp), NS_OK);

    static const s_kind wrong[] = {S_STR,   S_NIL,  S_NEG,
                                   S_ARRAY, S_BOOL, S_FLOAT};
    for (int field = 0; field < 6; field++) {
        for (size_t k = 0; k < sizeof wrong / sizeof *wrong; k++) {
            sp = s_good_spec();
            sp.field = field;
            sp.kind = wrong[k];
            int rc = s_decode_spec(&sp);
            if (rc == NS_ERR_TYPE)
                ns_test_pass();
            else
                ns_test_fail(__FILE__, __LINE__,
                             "element %d as kind %d gave %d (%s)", field,
                             (int)wrong[k], rc, ns_errname(rc));
        }
    }
    /* fixed-size bins of the wrong size */
    sp = s_good_spec();
    sp.field = 2;
    sp.kind = S_SHORT;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_TYPE);
    sp.kind = S_LONG;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_TOOBIG);
    sp.field = 5;
    sp.kind = S_SHORT;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_TYPE);
    sp.kind = S_LONG;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_TOOBIG);

    /* wrong element counts */
    static const uint32_t counts[] = {0, 1, 2, 5, 7, 15};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        sp = s_good_spec();
        sp.n = counts[i];
        int rc = s_decode_spec(&sp);
        if (rc == NS_ERR_TYPE)
            ns_test_pass();
        else
            ns_test_fail(__FILE__, __LINE__, "%u elements gave %d (%s)",
                         counts[i], rc, ns_errname(rc));
    }

    /* not an array at all */
    static const uint8_t map[] = {0x80};
    static const uint8_t nil[] = {0xc0};
    static const uint8_t str[] = {0xa1, 'x'};
    static const uint8_t bin[] = {0xc4, 0x00};
    ns_envelope_t env;
    CHECK_RC(ns_envelope_decode(map, sizeof map, &s_types, &env), NS_ERR_TYPE);
    CHECK_RC(ns_envelope_decode(nil, sizeof nil, &s_types, &env), NS_ERR_TYPE);
    CHECK_RC(ns_envelope_decode(str, sizeof str, &s_types, &env), NS_ERR_TYPE);
    CHECK_RC(ns_envelope_decode(bin, sizeof bin, &s_types, &env), NS_ERR_TYPE);
    CHECK_RC(ns_envelope_decode(map, 0, &s_types, &env), NS_ERR_TRUNCATED);
}

TEST(envelope_version_and_type)
{
    s_spec_t sp = s_good_spec();
    sp.version = NS_WIRE_VERSION + 1;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_VERSION);
    sp.version = NS_WIRE_VERSION - 1; /* version 1 signed the bytes */
    CHECK_RC(s_decode_spec(&sp), NS_ERR_VERSION);
    sp.version = 0;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_VERSION);
    sp.version = UINT64_MAX;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_VERSION);
    /* the version decides the layout: checked before the element count */
    sp.version = NS_WIRE_VERSION + 1;
    sp.n = 3;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_VERSION);

    sp = s_good_spec();
    sp.type = 200;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    sp.type = 0;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    sp.type = NS_MSG_LAST_BUILTIN + 1;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    sp.type = 256 + NS_MSG_HELLO; /* must not wrap to HELLO */
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    sp.field = 1;
    sp.kind = S_UINT16;
    sp.type = NS_MSG_HELLO; /* a wider encoding of a known type is fine */
    CHECK_RC(s_decode_spec(&sp), NS_OK);
    sp.type = 256 + NS_MSG_HELLO;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    sp.type = UINT64_MAX;
    sp.kind = S_RIGHT;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);

    /* a properly signed message of an unknown type is still refused */
    ns_buf_t b;
    ns_envelope_t env;
    ns_buf_init(&b);
    CHECK_RC(ns_envelope_encode(s_id, 200, 1, NULL, 0, &b, NULL), NS_OK);
    CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_ERR_MSGTYPE);
    ns_buf_release(&b);
}

TEST(envelope_flipped_bytes)
{
    uint8_t body[50];
    ns_buf_t b;
    ns_envelope_t env;
    ns_hash_t id0;
    s_fill(body, sizeof body, 77);
    ns_buf_init(&b);
    if (!CHECK_RC(ns_envelope_encode(s_id, NS_MSG_HEARTBEAT, ns_now_ms(), body,
                                     sizeof body, &b, id0),
                  NS_OK))
        return;
    const size_t sig_off = b.len - NS_SIG_BYTES;
    const size_t body_off = sig_off - 2 - sizeof body;
    const size_t sender_off = 5;

    /* a flipped byte of the signature, body, sender or timestamp decodes
     * but does not verify; any change to the signed part changes the id */
    for (size_t i = 0; i < NS_SIG_BYTES; i++) {
        b.data[sig_off + i] ^= 0x01;
        if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK))
            CHECK_RC(ns_envelope_verify(&env), NS_ERR_SIG);
        b.data[sig_off + i] ^= 0x01;
    }
    for (size_t i = 0; i < sizeof body; i++) {
        b.data[body_off + i] ^= 0x80;
        if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env),
                     NS_OK)) {
            CHECK_RC(ns_envelope_verify(&env), NS_ERR_SIG);
            CHECK(memcmp(env.id, id0, NS_HASH_BYTES) != 0);
        }
        b.data[body_off + i] ^= 0x80;
    }
    for (size_t i = 0; i < NS_ID_BYTES; i++) {
        b.data[sender_off + i] ^= 0x04;
        if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK))
            CHECK_RC(ns_envelope_verify(&env), NS_ERR_SIG);
        b.data[sender_off + i] ^= 0x04;
    }
    /* timestamp: 0xcf and 8 bytes after the sender */
    for (size_t i = 0; i < 8; i++) {
        b.data[sender_off + NS_ID_BYTES + 1 + i] ^= 0x10;
        if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK))
            CHECK_RC(ns_envelope_verify(&env), NS_ERR_SIG);
        b.data[sender_off + NS_ID_BYTES + 1 + i] ^= 0x10;
    }
    /* another key's id as sender */
    memcpy(b.data + sender_off, ns_identity_pk(s_id2), NS_ID_BYTES);
    if (CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK))
        CHECK_RC(ns_envelope_verify(&env), NS_ERR_SIG);
    memcpy(b.data + sender_off, ns_identity_pk(s_id), NS_ID_BYTES);
    CHECK_RC(ns_envelope_decode(b.data, b.len, &s_types, &env), NS_OK);
    CHECK_RC(ns_envelope_verify(&env), NS_OK);

    /* every byte, several masks: decode may fail (any error, no crash) but
     * never yields a message that verifies */
    static const uint8_t masks[] = {0x01, 0x02, 0x10, 0x80, 0xff};
    size_t forged = 0;
    for (size_t i = 0; i < b.len; i++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            b.data[i] ^= masks[m];
            uint8_t *copy = s_dup(b.data, b.len);
            if (ns_envelope_decode(copy, b.len, &s_types, &env) == NS_OK &&
                ns_envelope_verify(&env) == NS_OK)
                forged++;
            free(copy);
            b.data[i] ^= masks[m];
        }
    }
    CHECK_EQ_INT(forged, 0);
    ns_buf_release(&b);
}

TEST(envelope_huge_array_header)
{
    /* 2^32-1 elements claimed by a 5-byte header: refused, nothing
     * allocated for them (ASan would report a huge allocation) */
    uint8_t buf[16] = {0xdd, 0xff, 0xff, 0xff, 0xff, NS_WIRE_VERSION};
    ns_envelope_t env;
    CHECK_RC(ns_envelope_decode(buf, sizeof buf, &s_types, &env), NS_ERR_TYPE);
    CHECK_RC(ns_envelope_decode(buf, 5, &s_types, &env), NS_ERR_TYPE);
    buf[0] = 0xdc; /* array16 of 65535 */
    CHECK_RC(ns_envelope_decode(buf, sizeof buf, &s_types, &env), NS_ERR_TYPE);
    /* array32 that claims exactly 6 is just a wide header */
    msgpack_sbuffer sb;
    s_spec_t sp = s_good_spec();
    s_build(&sb, &sp);
    uint8_t *wide = malloc(sb.size + 4);
    if (CHECK(wide != NULL)) {
        wide[0] = 0xdd;
        wide[1] = wide[2] = wide[3] = 0;
        wide[4] = 6;
        memcpy(wide + 5, s_u8(&sb) + 1, sb.size - 1);
        CHECK_RC(ns_envelope_decode(wide, sb.size + 4, &s_types, &env), NS_OK);
        free(wide);
    }
    msgpack_sbuffer_destroy(&sb);
}

/* ---- bodies: hostile input ---------------------------------------------- */

TEST(hello_bad_input)
{
    static ns_hello_t m, got;
    ns_buf_t body;
    memset(&m, 0, sizeof m);
    s_fill(m.network_id, NS_HASH_BYTES, 1);
    snprintf(m.endpoint, sizeof m.endpoint, "tcp://127.0.0.1:7946");
    snprintf(m.version, sizeof m.version, "0.1.0");
    ns_buf_init(&body);
    if (!CHECK_RC(ns_hello_encode(&m, &body), NS_OK))
        return;
    s_check_prefixes("hello", s_dec_hello, body.data, body.len, &got);
    s_check_trailing("hello", s_dec_hello, body.data, body.len, &got);

    msgpack_sbuffer sb;
    msgpack_packer pk;
    /* four fields */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 4);
    ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, m.endpoint);
    ns_mp_str(&pk, m.version);
    ns_mp_str(&pk, "extra");
    CHECK_RC(ns_hello_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* network id as a str */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 3);
    ns_mp_str(&pk, "0123456789abcdef0123456789abcdef");
    ns_mp_str(&pk, m.endpoint);
    ns_mp_str(&pk, m.version);
    CHECK_RC(ns_hello_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* endpoint as a bin */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, m.endpoint, strlen(m.endpoint));
    ns_mp_str(&pk, m.version);
    CHECK_RC(ns_hello_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* network id of 31 bytes */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES - 1);
    ns_mp_str(&pk, m.endpoint);
    ns_mp_str(&pk, m.version);
    CHECK_RC(ns_hello_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);

    /* a version one over its cap; control characters; a bad endpoint */
    char longv[NS_MAX_VERSION_STR + 2];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    static const struct {
        const char *endpoint, *version;
        int want;
    } cases[] = {
        {"tcp://127.0.0.1:7946", NULL, NS_ERR_TOOBIG},
        {"tcp://127.0.0.1:7946", "0.1\n", NS_ERR_INVAL},
        {"tcp://127.0.0.1:7946", "0.1\x1b[31m", NS_ERR_INVAL},
        {"tcp://127.0.0.1:7946", "0.1\x7f", NS_ERR_INVAL},
        {"udp://127.0.0.1:7946", "0.1", NS_ERR_ADDR},
        {"tcp://127.0.0.1:0", "0.1", NS_ERR_ADDR},
        {"tcp://127.0.0.1:70000", "0.1", NS_ERR_ADDR},
        {"tcp://127.0.0.1", "0.1", NS_ERR_ADDR},
        {"relay:", "0.1", NS_ERR_ADDR},
        {"relay:tcp://127.0.0.1:7946", "0.1", NS_ERR_ADDR},
        {"tcp://host\t:1", "0.1", NS_ERR_INVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pk = s_packer(&sb);
        msgpack_pack_array(&pk, 3);
        ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES);
        ns_mp_str(&pk, cases[i].endpoint);
        ns_mp_str(&pk, cases[i].version ? cases[i].version : longv);
        int rc = ns_hello_decode(s_u8(&sb), sb.size, &got);
        if (rc == cases[i].want)
            ns_test_pass();
        else
            ns_test_fail(__FILE__, __LINE__,
                         "hello case %zu (%s): got %d (%s), want %s", i,
                         cases[i].endpoint, rc, ns_errname(rc),
                         ns_errname(cases[i].want));
        msgpack_sbuffer_destroy(&sb);
    }
    /* an endpoint one over its cap */
    char longep[NS_ENDPOINT_MAX + 1];
    memset(longep, 'h', sizeof longep - 1);
    memcpy(longep, "tcp://", 6);
    memcpy(longep + sizeof longep - 1 - 5, ":7000", 5);
    longep[sizeof longep - 1] = '\0';
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, longep);
    ns_mp_str(&pk, "0.1");
    CHECK_RC(ns_hello_decode(s_u8(&sb), sb.size, &got), NS_ERR_TOOBIG);
    msgpack_sbuffer_destroy(&sb);
    ns_buf_release(&body);
}

TEST(heartbeat_bad_input)
{
    static ns_heartbeat_t m, got;
    ns_buf_t body;
    s_heartbeat_fill(&m, 3);
    ns_buf_init(&body);
    if (!CHECK_RC(ns_heartbeat_encode(&m, &body), NS_OK))
        return;
    s_check_prefixes("heartbeat", s_dec_heartbeat, body.data, body.len, &got);
    s_check_trailing("heartbeat", s_dec_heartbeat, body.data, body.len, &got);
    ns_buf_release(&body);

    ns_devinfo_t dev;
    s_devinfo_fill(&dev, 1);
    s_hb_spec_t sp = {12, 2, 2, 5000, &dev};
    CHECK_RC(s_hb_decode_spec(&sp), NS_OK);
    /* one device more than the cap */
    m.n_devices = NS_MAX_DEVICES + 1;
    CHECK_RC(ns_heartbeat_encode(&m, &body), NS_ERR_TOOBIG);
    ns_buf_release(&body);
    sp.declared = sp.written = NS_MAX_DEVICES;
    CHECK_RC(s_hb_decode_spec(&sp), NS_OK);
    sp.declared = sp.written = NS_MAX_DEVICES + 1;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TOOBIG);
    /* 2^32-1 devices claimed, none there */
    sp.declared = UINT32_MAX;
    sp.written = 0;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TOOBIG);
    /* fewer devices than declared */
    sp.declared = 3;
    sp.written = 2;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TRUNCATED);
    /* more devices than declared */
    sp.declared = 1;
    sp.written = 2;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TRAILING);
    /* field counts */
    sp.declared = sp.written = 1;
    sp.n_fields = 11;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TYPE);
    sp.n_fields = 13;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TYPE);
    sp.n_fields = 12;
    /* interval: bounds and width */
    sp.interval_ms = 99;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    sp.interval_ms = 100;
    CHECK_RC(s_hb_decode_spec(&sp), NS_OK);
    sp.interval_ms = NS_MAX_HB_INTERVAL_MS;
    CHECK_RC(s_hb_decode_spec(&sp), NS_OK);
    sp.interval_ms = NS_MAX_HB_INTERVAL_MS + 1; /* an hour is refused */
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    sp.interval_ms = UINT64_C(1) << 32; /* not a u32 */
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_TOOBIG);
    sp.interval_ms = 5000;

    /* devices with values out of range */
    ns_devinfo_t bad = dev;
    bad.type = NS_DEV_ACCEL + 1;
    sp.dev = &bad;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    bad = dev;
    bad.gflops = -1.0;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    bad.gflops = NAN;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    bad.gflops = 1e9;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    bad = dev;
    bad.gbps = INFINITY;
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    bad = dev;
    snprintf(bad.name, sizeof bad.name, "gpu\r\n");
    CHECK_RC(s_hb_decode_spec(&sp), NS_ERR_INVAL);
    sp.dev = &dev;

    /* wrong types in the top-level fields: region as a bin, digest short */
    msgpack_sbuffer sb;
    msgpack_packer pk = s_packer(&sb);
    msgpack_pack_array(&pk, 12);
    ns_mp_bin(&pk, m.network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, m.endpoint);
    ns_mp_str(&pk, m.version);
    msgpack_pack_uint32(&pk, 5000);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_int64(&pk, -5); /* price */
    msgpack_pack_uint64(&pk, 1);
    ns_mp_str(&pk, "r");
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_uint64(&pk, 1);
    ns_mp_bin(&pk, m.ledger_digest, NS_HASH_BYTES);
    msgpack_pack_array(&pk, 0);
    CHECK_RC(ns_heartbeat_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);

    /* the device list on its own (devices.msgpack) */
    ns_devinfo_t devs[NS_MAX_DEVICES];
    uint32_t n = 0;
    char *list = NULL;
    size_t list_len = 0;
    for (uint32_t i = 0; i < NS_MAX_DEVICES; i++)
        s_devinfo_fill(&devs[i], i);
    CHECK_RC(ns_devinfo_list_encode(devs, NS_MAX_DEVICES + 1, &list, &list_len),
             NS_ERR_TOOBIG);
    if (CHECK_RC(ns_devinfo_list_encode(devs, NS_MAX_DEVICES, &list, &list_len),
                 NS_OK)) {
        static ns_devinfo_t back[NS_MAX_DEVICES];
        CHECK_RC(
            ns_devinfo_list_decode((const uint8_t *)list, list_len, back, &n),
            NS_OK);
        if (CHECK_EQ_INT(n, NS_MAX_DEVICES))
            for (uint32_t i = 0; i < n; i++)
                s_devinfo_equal(&devs[i], &back[i]);
        free(list);
    }
    static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
    CHECK_RC(ns_devinfo_list_decode(huge, sizeof huge, devs, &n),
             NS_ERR_TOOBIG);
}

TEST(peers_bad_input)
{
    static ns_peers_t m, got;
    ns_buf_t body;
    s_peers_fill(&m, 3);
    ns_buf_init(&body);
    if (!CHECK_RC(ns_peers_encode(&m, &body), NS_OK))
        return;
    s_check_prefixes("peers", s_dec_peers, body.data, body.len, &got);
    s_check_trailing("peers", s_dec_peers, body.data, body.len, &got);

    s_peers_fill(&m, NS_MAX_PEERS_MSG);
    m.n = NS_MAX_PEERS_MSG + 1;
    CHECK_RC(ns_peers_encode(&m, &body), NS_ERR_TOOBIG);

    msgpack_sbuffer sb;
    msgpack_packer pk;
    /* 65 well-formed peers */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, NS_MAX_PEERS_MSG + 1);
    for (uint32_t i = 0; i <= NS_MAX_PEERS_MSG; i++) {
        msgpack_pack_array(&pk, 2);
        ns_mp_bin(&pk, m.peers[0].id, NS_ID_BYTES);
        ns_mp_str(&pk, "tcp://10.0.0.1:7000");
    }
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_TOOBIG);
    msgpack_sbuffer_destroy(&sb);
    /* 2^32-1 claimed */
    static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x92};
    CHECK_RC(ns_peers_decode(huge, sizeof huge, &got), NS_ERR_TOOBIG);
    /* an entry of three fields */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, m.peers[0].id, NS_ID_BYTES);
    ns_mp_str(&pk, "tcp://10.0.0.1:7000");
    msgpack_pack_nil(&pk);
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* an entry that is a map; an id of 31 bytes; an id as text */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 0);
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, m.peers[0].id, NS_ID_BYTES - 1);
    ns_mp_str(&pk, "tcp://10.0.0.1:7000");
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 2);
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, m.peers[0].id);
    ns_mp_str(&pk, idtext);
    ns_mp_str(&pk, "tcp://10.0.0.1:7000");
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* a bad endpoint */
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, m.peers[0].id, NS_ID_BYTES);
    ns_mp_str(&pk, "ipc:///tmp/x");
    CHECK_RC(ns_peers_decode(s_u8(&sb), sb.size, &got), NS_ERR_ADDR);
    msgpack_sbuffer_destroy(&sb);
    /* not an array */
    static const uint8_t map[] = {0x80};
    CHECK_RC(ns_peers_decode(map, sizeof map, &got), NS_ERR_TYPE);
    ns_buf_release(&body);
}

TEST(pull_bad_input)
{
    ns_pull_t got;
    ns_buf_t body;
    uint8_t *ids = calloc(NS_MAX_PULL_IDS + 1, NS_HASH_BYTES);
    if (!CHECK(ids != NULL))
        return;
    ns_buf_init(&body);
    CHECK_RC(ns_pull_encode(ids, NS_MAX_PULL_IDS + 1, &body), NS_ERR_TOOBIG);
    CHECK_RC(ns_pull_encode(ids, 3, &body), NS_OK);
    s_check_prefixes("pull", s_dec_pull, body.data, body.len, &got);
    s_check_trailing("pull", s_dec_pull, body.data, body.len, &got);

    msgpack_sbuffer sb;
    msgpack_packer pk;
    /* one id more than the cap */
    pk = s_packer(&sb);
    ns_mp_bin(&pk, ids, (size_t)(NS_MAX_PULL_IDS + 1) * NS_HASH_BYTES);
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TOOBIG);
    msgpack_sbuffer_destroy(&sb);
    /* not a whole number of ids */
    pk = s_packer(&sb);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES + 1);
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* a str, an array of bins */
    pk = s_packer(&sb);
    ns_mp_str(&pk, "0123456789abcdef0123456789abcdef");
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES);
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    /* a bin32 header claiming 4 GiB */
    static const uint8_t huge[] = {0xc6, 0xff, 0xff, 0xff, 0xff, 0x00};
    CHECK_RC(ns_pull_decode(huge, sizeof huge, &got), NS_ERR_TOOBIG);
    CHECK_RC(ns_pull_decode(huge, 0, &got), NS_ERR_TRUNCATED);
    ns_buf_release(&body);
    free(ids);
}

/* PULL's since form: [since_ms > 0, bin]; 0 writes the old bare bin. */
TEST(pull_since)
{
    ns_pull_t got;
    ns_buf_t body;
    uint8_t ids[3 * NS_HASH_BYTES];
    s_fill(ids, sizeof ids, 9);
    ns_buf_init(&body);
    CHECK_RC(ns_pull_encode_since(ids, 3, 1234, &body), NS_OK);
    CHECK_RC(ns_pull_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.n, 3);
    CHECK_EQ_INT(got.since_ms, 1234);
    CHECK_MEM(got.ids, ids, sizeof ids);
    s_check_prefixes("pull since", s_dec_pull, body.data, body.len, &got);
    s_check_trailing("pull since", s_dec_pull, body.data, body.len, &got);
    CHECK_RC(ns_pull_encode_since(ids, 0, 1234, &body), NS_OK);
    CHECK_RC(ns_pull_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.n, 0);
    CHECK_EQ_INT(got.since_ms, 1234);
    CHECK_RC(ns_pull_encode_since(ids, 2, 0, &body), NS_OK);
    CHECK_EQ_INT(body.data[0] == 0x92, 0); /* the old form */
    CHECK_RC(ns_pull_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.since_ms, 0);
    /* since 0 written as an array, a signed since, a str for the ids */
    msgpack_sbuffer sb;
    msgpack_packer pk = s_packer(&sb);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 0);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES);
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int64(&pk, -5);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES);
    CHECK(ns_pull_decode(s_u8(&sb), sb.size, &got) != NS_OK);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, 7);
    ns_mp_str(&pk, "0123456789abcdef0123456789abcdef");
    CHECK_RC(ns_pull_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    ns_buf_release(&body);
}

static int s_dec_ihave(const uint8_t *b, size_t n, void *o)
{
    return ns_ihave_decode(b, n, o);
}

/* IHAVE and IWANT: 1..cap ids, both ways; nothing else. */
TEST(ihave_iwant)
{
    ns_ids_t got;
    ns_buf_t body;
    uint8_t *ids = calloc(NS_MAX_IHAVE_IDS + 1, NS_HASH_BYTES);
    if (!CHECK(ids != NULL))
        return;
    s_fill(ids, (size_t)(NS_MAX_IHAVE_IDS + 1) * NS_HASH_BYTES, 3);
    ns_buf_init(&body);
    CHECK_RC(ns_ihave_encode(ids, 0, &body), NS_ERR_INVAL);
    CHECK_RC(ns_iwant_encode(ids, 0, &body), NS_ERR_INVAL);
    CHECK_RC(ns_ihave_encode(ids, NS_MAX_IHAVE_IDS + 1, &body), NS_ERR_TOOBIG);
    CHECK_RC(ns_iwant_encode(ids, NS_MAX_IWANT_IDS + 1, &body), NS_ERR_TOOBIG);
    CHECK_RC(ns_ihave_encode(ids, NS_MAX_IHAVE_IDS, &body), NS_OK);
    CHECK_RC(ns_ihave_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.n, NS_MAX_IHAVE_IDS);
    CHECK_MEM(got.ids, ids, (size_t)NS_MAX_IHAVE_IDS * NS_HASH_BYTES);
    CHECK_RC(ns_iwant_encode(ids, 2, &body), NS_OK);
    CHECK_RC(ns_iwant_decode(body.data, body.len, &got), NS_OK);
    CHECK_EQ_INT(got.n, 2);
    CHECK_MEM(got.ids, ids, 2 * NS_HASH_BYTES);
    s_check_prefixes("ihave", s_dec_ihave, body.data, body.len, &got);
    s_check_trailing("ihave", s_dec_ihave, body.data, body.len, &got);
    msgpack_sbuffer sb;
    /* over the cap, empty, not whole ids, an array */
    msgpack_packer pk = s_packer(&sb);
    ns_mp_bin(&pk, ids, (size_t)(NS_MAX_IHAVE_IDS + 1) * NS_HASH_BYTES);
    CHECK_RC(ns_ihave_decode(s_u8(&sb), sb.size, &got), NS_ERR_TOOBIG);
    CHECK_RC(ns_iwant_decode(s_u8(&sb), sb.size, &got), NS_ERR_TOOBIG);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    ns_mp_bin(&pk, ids, 0);
    CHECK_RC(ns_ihave_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    CHECK_RC(ns_iwant_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES - 1);
    CHECK_RC(ns_ihave_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    pk = s_packer(&sb);
    msgpack_pack_array(&pk, 1);
    ns_mp_bin(&pk, ids, NS_HASH_BYTES);
    CHECK_RC(ns_iwant_decode(s_u8(&sb), sb.size, &got), NS_ERR_TYPE);
    msgpack_sbuffer_destroy(&sb);
    ns_buf_release(&body);
    free(ids);
}

static int s_dec_mesh(const uint8_t *b, size_t n, void *o)
{
    return ns_mesh_decode(b, n, o);
}

/* MESH: one bool, both ways; nothing else. */
TEST(mesh_body)
{
    bool got = false;
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_mesh_encode(true, &body), NS_OK);
    CHECK_RC(ns_mesh_decode(body.data, body.len, &got), NS_OK);
    CHECK(got);
    s_check_prefixes("mesh", s_dec_mesh, body.data, body.len, &got);
    s_check_trailing("mesh", s_dec_mesh, body.data, body.len, &got);
    CHECK_RC(ns_mesh_encode(false, &body), NS_OK);
    CHECK_RC(ns_mesh_decode(body.data, body.len, &got), NS_OK);
    CHECK(!got);
    static const uint8_t one[] = {0x01}, nil[] = {0xc0}, arr[] = {0x91, 0xc3};
    CHECK(ns_mesh_decode(one, sizeof one, &got) != NS_OK);
    CHECK(ns_mesh_decode(nil, sizeof nil, &got) != NS_OK);
    CHECK(ns_mesh_decode(arr, sizeof arr, &got) != NS_OK);
    CHECK(!got);
    ns_buf_release(&body);
}

/* A type the caller adds is accepted by the decoder given that table, and
 * only by it: a second table knows nothing of it. */
TEST(register_type)
{
    s_spec_t sp = s_good_spec();
    sp.type = 201;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    ns_wire_types_t before = s_types;
    ns_wire_types_add(&s_types, 201);
    CHECK_RC(s_decode_spec(&sp), NS_OK);
    sp.type = 200;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
    s_types = before;
    sp.type = 201;
    CHECK_RC(s_decode_spec(&sp), NS_ERR_MSGTYPE);
}

int main(void)
{
    /* Core never calls sodium_init() and ns_identity_generate() aborts
     * without it (reported; test_identity checks it on its own). */
    if (sodium_init() < 0)
        return 1;
    s_id = ns_identity_generate();
    s_id2 = ns_identity_generate();
    if (!s_id || !s_id2) {
        fprintf(stderr, "cannot generate identities\n");
        return 1;
    }
    ns_wire_types_init(&s_types);
    RUN(type_table);
    RUN(buf);
    RUN(hello_round_trip);
    RUN(heartbeat_round_trip_no_devices);
    RUN(contact_flags_and_relay);
    RUN(heartbeat_round_trip_max_devices);
    RUN(peers_round_trip_empty);
    RUN(peers_round_trip_max);
    RUN(pull_round_trip);
    RUN(envelope_id);
    RUN(envelope_timestamps_and_empty_body);
    RUN(envelope_body_caps);
    RUN(envelope_every_prefix_truncated);
    RUN(envelope_trailing);
    RUN(envelope_wrong_types);
    RUN(envelope_version_and_type);
    RUN(envelope_flipped_bytes);
    RUN(envelope_huge_array_header);
    RUN(hello_bad_input);
    RUN(heartbeat_bad_input);
    RUN(peers_bad_input);
    RUN(pull_bad_input);
    RUN(pull_since);
    RUN(ihave_iwant);
    RUN(mesh_body);
    RUN(register_type);
    ns_identity_destroy(&s_id);
    ns_identity_destroy(&s_id2);
    return ns_test_finish("core_wire");
}
