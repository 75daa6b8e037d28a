#include "nightshift/wire.h"
#include "nightshift/mp.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ---- type table ---------------------------------------------------------- */

void ns_wire_types_init(ns_wire_types_t *types)
{
    memset(types, 0, sizeof *types);
    for (uint8_t t = NS_MSG_HELLO; t <= NS_MSG_LAST_BUILTIN; t++)
        ns_wire_types_add(types, t);
}

void ns_wire_types_add(ns_wire_types_t *types, uint8_t type)
{
    types->bits[type / 64] |= UINT64_C(1) << (type % 64);
}

void ns_wire_types_remove(ns_wire_types_t *types, uint8_t type)
{
    types->bits[type / 64] &= ~(UINT64_C(1) << (type % 64));
}

bool ns_wire_types_has(const ns_wire_types_t *types, uint32_t type)
{
    return type < 256 && (types->bits[type / 64] >> (type % 64) & 1);
}

const char *ns_wire_type_name(uint32_t type)
{
    switch (type) {
    case NS_MSG_HELLO:
        return "hello";
    case NS_MSG_HEARTBEAT:
        return "heartbeat";
    case NS_MSG_PEERS:
        return "peers";
    case NS_MSG_PULL:
        return "pull";
    case NS_MSG_RELAY:
        return "relay";
    case NS_MSG_IHAVE:
        return "ihave";
    case NS_MSG_IWANT:
        return "iwant";
    case NS_MSG_MESH:
        return "mesh";
    default:
        return "other";
    }
}

/* ---- envelope ------------------------------------------------------------ */

static void s_message_digest(const uint8_t *signed_part, size_t len,
                             ns_hash_t id)
{
    ns_hash2(id, NS_WIRE_DOMAIN, sizeof(NS_WIRE_DOMAIN) - 1, signed_part, len);
}

/* What the signature covers: NS_WIRE_SIG_DOMAIN || id. */
static void s_sig_message(const ns_hash_t mid, uint8_t *msg)
{
    memcpy(msg, NS_WIRE_SIG_DOMAIN, sizeof(NS_WIRE_SIG_DOMAIN) - 1);
    memcpy(msg + sizeof(NS_WIRE_SIG_DOMAIN) - 1, mid, NS_HASH_BYTES);
}

static void s_sign_id(const ns_identity_t *id, const ns_hash_t mid,
                      uint8_t sig[NS_SIG_BYTES])
{
    uint8_t msg[sizeof(NS_WIRE_SIG_DOMAIN) - 1 + NS_HASH_BYTES];
    s_sig_message(mid, msg);
    ns_identity_sign(id, msg, sizeof msg, sig);
}

int ns_envelope_encode(const ns_identity_t *id, uint8_t type,
                       uint64_t timestamp_ms, const uint8_t *body,
                       size_t body_len, ns_buf_t *out, ns_hash_t id_out)
{
    if (body_len > NS_MAX_BODY)
        return NS_ERR_TOOBIG;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, 6);
    size_t start = out->len;
    msgpack_pack_uint8(&pk, NS_WIRE_VERSION);
    msgpack_pack_uint8(&pk, type);
    ns_mp_bin(&pk, ns_identity_pk(id), NS_ID_BYTES);
    msgpack_pack_uint64(&pk, timestamp_ms);
    ns_mp_bin(&pk, body, body_len);
    if (w.err != NS_OK)
        return w.err;

    /* The id: BLAKE2b-256 of domain || elements 1..5 exactly as encoded;
     * the signature is over the id (wire.h), so signing costs the same
     * for a 128 KiB CHUNK as for a heartbeat. */
    ns_hash_t mid;
    uint8_t sig[NS_SIG_BYTES];
    s_message_digest(out->data + start, out->len - start, mid);
    s_sign_id(id, mid, sig);
    if (id_out)
        memcpy(id_out, mid, NS_HASH_BYTES);
    ns_mp_bin(&pk, sig, sizeof sig);
    if (w.err == NS_OK && out->len > NS_MAX_MSG)
        return NS_ERR_TOOBIG;
    return w.err;
}

int ns_envelope_decode(const uint8_t *buf, size_t len,
                       const ns_wire_types_t *types, ns_envelope_t *env)
{
    memset(env, 0, sizeof *env);
    if (len > NS_MAX_MSG)
        return NS_ERR_TOOBIG;
    ns_mpr_t r;
    ns_mpr_init(&r, buf, len);
    uint32_t n = 0;
    if (ns_mpr_array(&r, &n, 16) != NS_OK)
        return r.err == NS_ERR_TOOBIG ? NS_ERR_TYPE : r.err;
    if (n < 1)
        return NS_ERR_TYPE;
    const uint8_t *start = r.p;
    uint64_t version = 0, type = 0;
    if (ns_mpr_uint(&r, &version) != NS_OK)
        return r.err;
    /* The version decides the layout; check it before anything else. */
    if (version != NS_WIRE_VERSION)
        return NS_ERR_VERSION;
    if (n != 6)
        return NS_ERR_TYPE;
    if (ns_mpr_uint(&r, &type) != NS_OK)
        return r.err;
    if (type > 255 || !ns_wire_types_has(types, (uint32_t)type))
        return NS_ERR_MSGTYPE;
    ns_mpr_bin_exact(&r, env->sender, NS_ID_BYTES);
    ns_mpr_uint(&r, &env->timestamp_ms);
    ns_mpr_bin(&r, &env->body, &env->body_len, NS_MAX_BODY);
    if (r.err != NS_OK)
        return r.err;
    env->signed_part = start;
    env->signed_len = (size_t)(r.p - start);
    ns_mpr_bin_exact(&r, env->sig, NS_SIG_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    env->version = (uint8_t)version;
    env->type = (uint8_t)type;
    s_message_digest(env->signed_part, env->signed_len, env->id);
    return NS_OK;
}

int ns_envelope_verify(const ns_envelope_t *env)
{
    /* env->id is the digest of the signed bytes (ns_envelope_decode) */
    uint8_t msg[sizeof(NS_WIRE_SIG_DOMAIN) - 1 + NS_HASH_BYTES];
    s_sig_message(env->id, msg);
    return ns_sig_verify(env->sender, msg, sizeof msg, env->sig);
}

/* ---- bodies ---------------------------------------------------------- */

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

int ns_hello_encode(const ns_hello_t *m, ns_buf_t *out)
{
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, m->network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, m->endpoint);
    ns_mp_str(&pk, m->version);
    return w.err;
}

static void s_read_endpoint(ns_mpr_t *r, char *ep)
{
    if (ns_mpr_str(r, ep, NS_ENDPOINT_MAX - 1) == NS_OK &&
        ns_endpoint_check(ep, 0) != NS_OK && r->err == NS_OK)
        r->err = NS_ERR_ADDR;
}

/* Where a node says it can be reached: an endpoint, a relay, or "" (it
 * only dials out). */
static void s_read_contact(ns_mpr_t *r, char *ep)
{
    if (ns_mpr_str(r, ep, NS_ENDPOINT_MAX - 1) == NS_OK &&
        ns_contact_check(ep) != NS_OK && r->err == NS_OK)
        r->err = NS_ERR_ADDR;
}

int ns_hello_decode(const uint8_t *buf, size_t len, ns_hello_t *m)
{
    ns_mpr_t r;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 3);
    ns_mpr_bin_exact(&r, m->network_id, NS_HASH_BYTES);
    s_read_contact(&r, m->endpoint);
    ns_mpr_str(&r, m->version, NS_MAX_VERSION_STR);
    return ns_mpr_end(&r);
}

int ns_heartbeat_encode(const ns_heartbeat_t *m, ns_buf_t *out)
{
    if (m->n_devices > NS_MAX_DEVICES)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, m->flags ? 13 : 12);
    ns_mp_bin(&pk, m->network_id, NS_HASH_BYTES);
    ns_mp_str(&pk, m->endpoint);
    ns_mp_str(&pk, m->version);
    msgpack_pack_uint32(&pk, m->interval_ms);
    msgpack_pack_uint64(&pk, m->sent_us);
    msgpack_pack_uint64(&pk, m->price);
    msgpack_pack_uint64(&pk, m->stake);
    ns_mp_str(&pk, m->region);
    msgpack_pack_uint32(&pk, m->free_slots);
    msgpack_pack_uint64(&pk, m->ledger_entries);
    ns_mp_bin(&pk, m->ledger_digest, NS_HASH_BYTES);
    msgpack_pack_array(&pk, m->n_devices);
    for (uint32_t i = 0; i < m->n_devices; i++)
        ns_devinfo_pack(&pk, &m->devices[i]);
    if (m->flags)
        msgpack_pack_uint32(&pk, m->flags);
    return w.err;
}

int ns_heartbeat_decode(const uint8_t *buf, size_t len, ns_heartbeat_t *m)
{
    ns_mpr_t r;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    uint32_t n = 0;
    ns_mpr_array(&r, &n, 13);
    if (r.err == NS_OK && n < 12)
        r.err = NS_ERR_TYPE;
    ns_mpr_bin_exact(&r, m->network_id, NS_HASH_BYTES);
    s_read_contact(&r, m->endpoint);
    ns_mpr_str(&r, m->version, NS_MAX_VERSION_STR);
    ns_mpr_u32(&r, &m->interval_ms);
    ns_mpr_uint(&r, &m->sent_us);
    ns_mpr_uint(&r, &m->price);
    ns_mpr_uint(&r, &m->stake);
    ns_mpr_str(&r, m->region, NS_MAX_REGION);
    ns_mpr_u32(&r, &m->free_slots);
    ns_mpr_uint(&r, &m->ledger_entries);
    ns_mpr_bin_exact(&r, m->ledger_digest, NS_HASH_BYTES);
    ns_mpr_array(&r, &m->n_devices, NS_MAX_DEVICES);
    for (uint32_t i = 0; i < m->n_devices && r.err == NS_OK; i++)
        ns_devinfo_read(&r, &m->devices[i]);
    if (n == 13)
        ns_mpr_u32(&r, &m->flags);
    if (r.err == NS_OK && (m->interval_ms < NS_MIN_HB_INTERVAL_MS ||
                           m->interval_ms > NS_MAX_HB_INTERVAL_MS))
        r.err = NS_ERR_INVAL;
    return ns_mpr_end(&r);
}

int ns_peers_encode(const ns_peers_t *m, ns_buf_t *out)
{
    if (m->n > NS_MAX_PEERS_MSG)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, m->n);
    for (uint32_t i = 0; i < m->n; i++) {
        msgpack_pack_array(&pk, 2);
        ns_mp_bin(&pk, m->peers[i].id, NS_ID_BYTES);
        ns_mp_str(&pk, m->peers[i].endpoint);
    }
    return w.err;
}

int ns_peers_decode(const uint8_t *buf, size_t len, ns_peers_t *m)
{
    ns_mpr_t r;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array(&r, &m->n, NS_MAX_PEERS_MSG);
    for (uint32_t i = 0; i < m->n && r.err == NS_OK; i++) {
        ns_mpr_array_exact(&r, 2);
        ns_mpr_bin_exact(&r, m->peers[i].id, NS_ID_BYTES);
        s_read_endpoint(&r, m->peers[i].endpoint);
    }
    return ns_mpr_end(&r);
}

int ns_pull_encode(const uint8_t *ids, uint32_t n, ns_buf_t *out)
{
    if (n > NS_MAX_PULL_IDS)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    /* One bin of n*32 bytes: compact, and a single length check. */
    ns_mp_bin(&pk, ids, (size_t)n * NS_HASH_BYTES);
    return w.err;
}

int ns_pull_encode_since(const uint8_t *ids, uint32_t n, uint64_t since_ms,
                         ns_buf_t *out)
{
    if (since_ms == 0)
        return ns_pull_encode(ids, n, out);
    if (n > NS_MAX_PULL_IDS)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint64(&pk, since_ms);
    ns_mp_bin(&pk, ids, (size_t)n * NS_HASH_BYTES);
    return w.err;
}

/* The old form (a bare bin) or [since_ms uint > 0, bin]: the first byte
 * tells which (a fixarray of 2 is 0x92, never a bin's marker). */
int ns_pull_decode(const uint8_t *buf, size_t len, ns_pull_t *m)
{
    ns_mpr_t r;
    size_t n = 0;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    bool since = len > 0 && buf[0] == 0x92;
    if (since) {
        ns_mpr_array_exact(&r, 2);
        ns_mpr_uint(&r, &m->since_ms);
    }
    ns_mpr_bin(&r, &m->ids, &n, (size_t)NS_MAX_PULL_IDS * NS_HASH_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (n % NS_HASH_BYTES || (since && m->since_ms == 0))
        return NS_ERR_TYPE;
    m->n = (uint32_t)(n / NS_HASH_BYTES);
    return NS_OK;
}

/* ---- ihave / iwant ------------------------------------------------------ */

static int s_ids_encode(const uint8_t *ids, uint32_t n, uint32_t cap,
                        ns_buf_t *out)
{
    if (n == 0 || n > cap)
        return n ? NS_ERR_TOOBIG : NS_ERR_INVAL;
    S_PACKER(out, w, pk);
    ns_mp_bin(&pk, ids, (size_t)n * NS_HASH_BYTES);
    return w.err;
}

static int s_ids_decode(const uint8_t *buf, size_t len, uint32_t cap,
                        ns_ids_t *m)
{
    ns_mpr_t r;
    size_t n = 0;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    ns_mpr_bin(&r, &m->ids, &n, (size_t)cap * NS_HASH_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (n == 0 || n % NS_HASH_BYTES) {
        m->ids = NULL;
        return NS_ERR_TYPE;
    }
    m->n = (uint32_t)(n / NS_HASH_BYTES);
    return NS_OK;
}

int ns_ihave_encode(const uint8_t *ids, uint32_t n, ns_buf_t *out)
{
    return s_ids_encode(ids, n, NS_MAX_IHAVE_IDS, out);
}

int ns_ihave_decode(const uint8_t *buf, size_t len, ns_ids_t *m)
{
    return s_ids_decode(buf, len, NS_MAX_IHAVE_IDS, m);
}

int ns_iwant_encode(const uint8_t *ids, uint32_t n, ns_buf_t *out)
{
    return s_ids_encode(ids, n, NS_MAX_IWANT_IDS, out);
}

int ns_iwant_decode(const uint8_t *buf, size_t len, ns_ids_t *m)
{
    return s_ids_decode(buf, len, NS_MAX_IWANT_IDS, m);
}

/* ---- mesh ---------------------------------------------------------------- */

int ns_mesh_encode(bool graft, ns_buf_t *out)
{
    S_PACKER(out, w, pk);
    if (graft)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    return w.err;
}

int ns_mesh_decode(const uint8_t *buf, size_t len, bool *graft)
{
    ns_mpr_t r;
    *graft = false;
    ns_mpr_init(&r, buf, len);
    ns_mpr_bool(&r, graft);
    if (ns_mpr_end(&r) != NS_OK) {
        *graft = false;
        return r.err;
    }
    return NS_OK;
}

/* ---- devinfo ------------------------------------------------------------ */

const char *ns_devtype_name(uint32_t type)
{
    switch (type) {
    case NS_DEV_CPU:
        return "cpu";
    case NS_DEV_GPU:
        return "gpu";
    case NS_DEV_ACCEL:
        return "accelerator";
    default:
        return "other";
    }
}

bool ns_devinfo_same(const ns_devinfo_t *a, const ns_devinfo_t *b)
{
    return strcmp(a->name, b->name) == 0 && strcmp(a->vendor, b->vendor) == 0 &&
           a->type == b->type && a->global_mem_bytes == b->global_mem_bytes &&
           a->max_alloc_bytes == b->max_alloc_bytes &&
           a->compute_units == b->compute_units &&
           a->clock_mhz == b->clock_mhz &&
           strcmp(a->cl_c_version, b->cl_c_version) == 0 &&
           memcmp(&a->gflops, &b->gflops, sizeof a->gflops) == 0 &&
           memcmp(&a->gbps, &b->gbps, sizeof a->gbps) == 0;
}

void ns_devinfo_pack(msgpack_packer *pk, const ns_devinfo_t *d)
{
    msgpack_pack_array(pk, 10);
    ns_mp_str(pk, d->name);
    ns_mp_str(pk, d->vendor);
    msgpack_pack_uint32(pk, d->type);
    msgpack_pack_uint64(pk, d->global_mem_bytes);
    msgpack_pack_uint64(pk, d->max_alloc_bytes);
    msgpack_pack_uint32(pk, d->compute_units);
    msgpack_pack_uint32(pk, d->clock_mhz);
    ns_mp_str(pk, d->cl_c_version);
    msgpack_pack_double(pk, d->gflops);
    msgpack_pack_double(pk, d->gbps);
}

int ns_devinfo_read(ns_mpr_t *r, ns_devinfo_t *d)
{
    memset(d, 0, sizeof *d);
    ns_mpr_array_exact(r, 10);
    ns_mpr_str(r, d->name, NS_MAX_DEVICE_NAME);
    ns_mpr_str(r, d->vendor, NS_MAX_DEVICE_NAME);
    ns_mpr_u32(r, &d->type);
    ns_mpr_uint(r, &d->global_mem_bytes);
    ns_mpr_uint(r, &d->max_alloc_bytes);
    ns_mpr_u32(r, &d->compute_units);
    ns_mpr_u32(r, &d->clock_mhz);
    ns_mpr_str(r, d->cl_c_version, NS_MAX_CL_VERSION);
    ns_mpr_f64(r, &d->gflops);
    ns_mpr_f64(r, &d->gbps);
    if (r->err == NS_OK &&
        (d->type > NS_DEV_ACCEL || !(d->gflops >= 0 && d->gflops < 1e9) ||
         !(d->gbps >= 0 && d->gbps < 1e9)))
        r->err = NS_ERR_INVAL;
    return r->err;
}

int ns_devinfo_list_encode(const ns_devinfo_t *devs, uint32_t n, char **buf,
                           size_t *len)
{
    if (n > NS_MAX_DEVICES)
        return NS_ERR_TOOBIG;
    ns_buf_t b;
    ns_buf_init(&b);
    S_PACKER(&b, w, pk);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        ns_devinfo_pack(&pk, &devs[i]);
    if (w.err != NS_OK) {
        ns_buf_release(&b);
        return w.err;
    }
    *buf = (char *)b.data;
    *len = b.len;
    return NS_OK;
}

int ns_devinfo_list_decode(const uint8_t *buf, size_t len, ns_devinfo_t *devs,
                           uint32_t *n)
{
    ns_mpr_t r;
    ns_mpr_init(&r, buf, len);
    ns_mpr_array(&r, n, NS_MAX_DEVICES);
    for (uint32_t i = 0; i < *n && r.err == NS_OK; i++)
        ns_devinfo_read(&r, &devs[i]);
    if (ns_mpr_end(&r) != NS_OK)
        *n = 0; /* never a half-filled list */
    return r.err;
}

int ns_relay_encode(const ns_relay_t *m, ns_buf_t *out)
{
    if (m->env_len == 0 || m->env_len > NS_MAX_RELAYED)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, m->to, NS_ID_BYTES);
    ns_mp_bin(&pk, m->env, m->env_len);
    return w.err;
}

int ns_relay_decode(const uint8_t *buf, size_t len, ns_relay_t *m)
{
    ns_mpr_t r;
    memset(m, 0, sizeof *m);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 2);
    ns_mpr_bin_exact(&r, m->to, NS_ID_BYTES);
    size_t n = 0;
    ns_mpr_bin(&r, &m->env, &n, NS_MAX_RELAYED);
    m->env_len = n;
    if (r.err == NS_OK && n == 0)
        r.err = NS_ERR_INVAL;
    return ns_mpr_end(&r);
}
