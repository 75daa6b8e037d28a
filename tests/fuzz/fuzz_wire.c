/* fuzz_wire.c - libFuzzer target for every decoder of bytes from peers:
 * the envelope, each body, the device list and the msgpack-to-JSON
 * renderer. Built with -fsanitize=fuzzer,address,undefined as `fuzz_wire`
 * (clang, NS_FUZZ=ON) and, with replay.c, as `fuzz_wire_replay`, which
 * ctest runs over tests/fuzz/corpus/wire.
 *
 * Besides "no crash, no leak" it checks what a decoder promises: borrowed
 * pointers stay inside the input, the message id is the hash of the signed
 * bytes, and decode(encode(decode(x))) == decode(x) for every body.
 */
#include "nightshift/devinfo.h"
#include "nightshift/hash.h"
#include "nightshift/mp.h"
#include "nightshift/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_wire: %s:%d: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* p[0..n) lies inside data[0..size). */
static int s_inside(const uint8_t *p, size_t n, const uint8_t *data,
                    size_t size)
{
    return p >= data && (size_t)(p - data) <= size &&
           n <= size - (size_t)(p - data);
}

/* Large structs live here, not on the stack; one input at a time. */
static ns_hello_t s_hello_m[2];
static ns_heartbeat_t s_hb_m[2];
static ns_peers_t s_peers_m[2];
static ns_devinfo_t s_devs[2][NS_MAX_DEVICES];

static void s_hello(const uint8_t *p, size_t n)
{
    ns_buf_t b;
    if (ns_hello_decode(p, n, &s_hello_m[0]) != NS_OK)
        return;
    ns_buf_init(&b);
    S_ASSERT(ns_hello_encode(&s_hello_m[0], &b) == NS_OK);
    S_ASSERT(ns_hello_decode(b.data, b.len, &s_hello_m[1]) == NS_OK);
    S_ASSERT(memcmp(&s_hello_m[0], &s_hello_m[1], sizeof s_hello_m[0]) == 0);
    ns_buf_release(&b);
}

static void s_heartbeat(const uint8_t *p, size_t n)
{
    ns_buf_t b;
    if (ns_heartbeat_decode(p, n, &s_hb_m[0]) != NS_OK)
        return;
    S_ASSERT(s_hb_m[0].n_devices <= NS_MAX_DEVICES);
    ns_buf_init(&b);
    S_ASSERT(ns_heartbeat_encode(&s_hb_m[0], &b) == NS_OK);
    S_ASSERT(ns_heartbeat_decode(b.data, b.len, &s_hb_m[1]) == NS_OK);
    S_ASSERT(memcmp(&s_hb_m[0], &s_hb_m[1], sizeof s_hb_m[0]) == 0);
    ns_buf_release(&b);
}

static void s_peers(const uint8_t *p, size_t n)
{
    ns_buf_t b;
    if (ns_peers_decode(p, n, &s_peers_m[0]) != NS_OK)
        return;
    S_ASSERT(s_peers_m[0].n <= NS_MAX_PEERS_MSG);
    ns_buf_init(&b);
    S_ASSERT(ns_peers_encode(&s_peers_m[0], &b) == NS_OK);
    S_ASSERT(ns_peers_decode(b.data, b.len, &s_peers_m[1]) == NS_OK);
    S_ASSERT(memcmp(&s_peers_m[0], &s_peers_m[1], sizeof s_peers_m[0]) == 0);
    ns_buf_release(&b);
}

static void s_pull(const uint8_t *p, size_t n)
{
    ns_pull_t m, again;
    ns_buf_t b;
    if (ns_pull_decode(p, n, &m) != NS_OK)
        return;
    S_ASSERT(m.n <= NS_MAX_PULL_IDS);
    S_ASSERT(m.n == 0 || s_inside(m.ids, (size_t)m.n * NS_HASH_BYTES, p, n));
    ns_buf_init(&b);
    S_ASSERT(ns_pull_encode_since(m.ids, m.n, m.since_ms, &b) == NS_OK);
    S_ASSERT(ns_pull_decode(b.data, b.len, &again) == NS_OK);
    S_ASSERT(again.n == m.n);
    S_ASSERT(again.since_ms == m.since_ms);
    S_ASSERT(m.n == 0 ||
             memcmp(again.ids, m.ids, (size_t)m.n * NS_HASH_BYTES) == 0);
    ns_buf_release(&b);
}

/* IHAVE and IWANT: 1..cap ids inside the input, and a round trip. */
static void s_ids(const uint8_t *p, size_t n, bool want)
{
    ns_ids_t m, again;
    ns_buf_t b;
    uint32_t cap = want ? NS_MAX_IWANT_IDS : NS_MAX_IHAVE_IDS;
    int rc = want ? ns_iwant_decode(p, n, &m) : ns_ihave_decode(p, n, &m);
    if (rc != NS_OK)
        return;
    S_ASSERT(m.n >= 1 && m.n <= cap);
    S_ASSERT(s_inside(m.ids, (size_t)m.n * NS_HASH_BYTES, p, n));
    ns_buf_init(&b);
    S_ASSERT((want ? ns_iwant_encode(m.ids, m.n, &b)
                   : ns_ihave_encode(m.ids, m.n, &b)) == NS_OK);
    S_ASSERT((want ? ns_iwant_decode(b.data, b.len, &again)
                   : ns_ihave_decode(b.data, b.len, &again)) == NS_OK);
    S_ASSERT(again.n == m.n);
    S_ASSERT(memcmp(again.ids, m.ids, (size_t)m.n * NS_HASH_BYTES) == 0);
    ns_buf_release(&b);
}

/* MESH: a bool, and a round trip. */
static void s_mesh(const uint8_t *p, size_t n)
{
    bool graft, again;
    ns_buf_t b;
    if (ns_mesh_decode(p, n, &graft) != NS_OK)
        return;
    ns_buf_init(&b);
    S_ASSERT(ns_mesh_encode(graft, &b) == NS_OK);
    S_ASSERT(ns_mesh_decode(b.data, b.len, &again) == NS_OK);
    S_ASSERT(again == graft);
    S_ASSERT(b.len == n);
    ns_buf_release(&b);
}

static void s_devinfo_list(const uint8_t *p, size_t n)
{
    uint32_t count = 0, count2 = 0;
    char *enc = NULL;
    size_t enc_len = 0;
    memset(s_devs, 0, sizeof s_devs);
    if (ns_devinfo_list_decode(p, n, s_devs[0], &count) != NS_OK)
        return;
    S_ASSERT(count <= NS_MAX_DEVICES);
    S_ASSERT(ns_devinfo_list_encode(s_devs[0], count, &enc, &enc_len) == NS_OK);
    S_ASSERT(ns_devinfo_list_decode((const uint8_t *)enc, enc_len, s_devs[1],
                                    &count2) == NS_OK);
    S_ASSERT(count2 == count);
    S_ASSERT(memcmp(s_devs[0], s_devs[1], count * sizeof s_devs[0][0]) == 0);
    free(enc);
}

static void s_body(uint8_t type, const uint8_t *p, size_t n)
{
    switch (type) {
    case NS_MSG_HELLO:
        s_hello(p, n);
        break;
    case NS_MSG_HEARTBEAT:
        s_heartbeat(p, n);
        break;
    case NS_MSG_PEERS:
        s_peers(p, n);
        break;
    case NS_MSG_PULL:
        s_pull(p, n);
        break;
    case NS_MSG_RELAY:
        break; /* its body (an envelope inside) is not decoded here */
    case NS_MSG_IHAVE:
        s_ids(p, n, false);
        break;
    case NS_MSG_IWANT:
        s_ids(p, n, true);
        break;
    case NS_MSG_MESH:
        s_mesh(p, n);
        break;
    default:
        S_ASSERT(!"decoded an envelope of an unknown type");
    }
}

static void s_envelope(const uint8_t *data, size_t size)
{
    ns_envelope_t env;
    ns_wire_types_t types;
    ns_wire_types_init(&types);
    if (ns_envelope_decode(data, size, &types, &env) != NS_OK)
        return;
    S_ASSERT(size <= NS_MAX_MSG);
    S_ASSERT(env.version == NS_WIRE_VERSION);
    S_ASSERT(ns_wire_types_has(&types, env.type));
    S_ASSERT(env.body_len <= NS_MAX_BODY);
    S_ASSERT(s_inside(env.signed_part, env.signed_len, data, size));
    S_ASSERT(env.body_len == 0 ||
             s_inside(env.body, env.body_len, env.signed_part, env.signed_len));
    ns_hash_t id;
    ns_hash2(id, NS_WIRE_DOMAIN, sizeof(NS_WIRE_DOMAIN) - 1, env.signed_part,
             env.signed_len);
    S_ASSERT(memcmp(id, env.id, NS_HASH_BYTES) == 0);
    int rc = ns_envelope_verify(&env);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_SIG);
    s_body(env.type, env.body, env.body_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_envelope(data, size);
    /* every body decoder on the raw bytes too: bodies arrive inside
     * envelopes whose signature any peer can produce */
    s_hello(data, size);
    s_heartbeat(data, size);
    s_peers(data, size);
    s_pull(data, size);
    s_ids(data, size, false);
    s_ids(data, size, true);
    s_mesh(data, size);
    s_devinfo_list(data, size);
    char *json = NULL;
    if (ns_mp_to_json(data, size, &json, (int)(size & 1)) == NS_OK) {
        S_ASSERT(json != NULL);
        free(json);
    }
    return 0;
}
