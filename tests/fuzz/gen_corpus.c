/* gen_corpus.c - write seed inputs for fuzz_wire into a directory.
 *
 *   fuzz_wire_gen_corpus DIR
 *
 * Seeds: a valid signed envelope of every message type (signed with a
 * fresh key), the bare bodies, a device list, and mutated messages that
 * reach each error path of the decoders (truncated, wrong version, unknown
 * type, trailing byte, flipped signature, huge container headers, deep
 * nesting). Each file is named by the hex of the first 20 bytes of its
 * BLAKE2b-256, so running it twice only adds the signed messages again.
 */
#include "nightshift/devinfo.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_dir;
static int s_written;
static int s_failed;

static void s_save(const char *what, const uint8_t *data, size_t len)
{
    ns_hash_t h;
    char hex[2 * NS_HASH_BYTES + 1], path[4096];
    ns_hash(h, data, len);
    ns_hex(hex, h, 20);
    snprintf(path, sizeof path, "%s/%s", s_dir, hex);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "gen_corpus: cannot write %s\n", path);
        s_failed = 1;
        return;
    }
    printf("%s %6zu bytes  %s\n", hex, len, what);
    s_written++;
}

static void s_save_buf(const char *what, const ns_buf_t *b)
{
    s_save(what, b->data, b->len);
}

static void s_check(int rc, const char *what)
{
    if (rc != NS_OK) {
        fprintf(stderr, "gen_corpus: %s: %s\n", what, ns_strerror(rc));
        exit(1);
    }
}

static void s_devinfo(ns_devinfo_t *d, uint32_t i)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "gfx%u", 900 + i);
    snprintf(d->vendor, sizeof d->vendor, "Vendor \"%u\"", i);
    d->type = i % 4;
    d->global_mem_bytes = (uint64_t)8 << 30;
    d->max_alloc_bytes = (uint64_t)2 << 30;
    d->compute_units = 60 + i;
    d->clock_mhz = 1800;
    snprintf(d->cl_c_version, sizeof d->cl_c_version, "OpenCL C 1.2");
    d->gflops = 12000.5;
    d->gbps = 450.0;
}

/* Envelope of `type` around body, then a few mutations of it. */
static void s_envelope_and_mutants(const ns_identity_t *id, uint8_t type,
                                   const ns_buf_t *body, const char *name,
                                   int mutate)
{
    ns_buf_t env;
    char what[128];
    ns_buf_init(&env);
    s_check(ns_envelope_encode(id, type, ns_now_ms(), body->data, body->len,
                               &env, NULL),
            name);
    snprintf(what, sizeof what, "envelope %s", name);
    s_save_buf(what, &env);
    snprintf(what, sizeof what, "body %s", name);
    s_save_buf(what, body);
    if (!mutate) {
        ns_buf_release(&env);
        return;
    }
    uint8_t *m = malloc(env.len + 1);
    if (!m)
        exit(1);
    /* truncated in the middle */
    snprintf(what, sizeof what, "envelope %s truncated", name);
    s_save(what, env.data, env.len / 2);
    /* version 2 (the version is the fixint after the array header) */
    memcpy(m, env.data, env.len);
    m[1] = 2;
    snprintf(what, sizeof what, "envelope %s version 2", name);
    s_save(what, m, env.len);
    /* one trailing byte */
    memcpy(m, env.data, env.len);
    m[env.len] = 0xc0;
    snprintf(what, sizeof what, "envelope %s trailing byte", name);
    s_save(what, m, env.len + 1);
    /* flipped signature byte */
    memcpy(m, env.data, env.len);
    m[env.len - 1] ^= 0x01;
    snprintf(what, sizeof what, "envelope %s flipped signature", name);
    s_save(what, m, env.len);
    free(m);
    ns_buf_release(&env);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    s_dir = argv[1];
    if (sodium_init() < 0 || ns_mkdir_p(s_dir, 0755) != NS_OK) {
        fprintf(stderr, "gen_corpus: cannot initialise or create %s\n", s_dir);
        return 1;
    }
    ns_identity_t *id = ns_identity_generate();
    if (!id)
        return 1;
    ns_buf_t body;
    ns_buf_init(&body);

    /* HELLO */
    ns_hello_t hello;
    memset(&hello, 0, sizeof hello);
    ns_hash(hello.network_id, "genesis", 7);
    snprintf(hello.endpoint, sizeof hello.endpoint, "tcp://127.0.0.1:7946");
    snprintf(hello.version, sizeof hello.version, "0.1.0");
    s_check(ns_hello_encode(&hello, &body), "hello");
    s_envelope_and_mutants(id, NS_MSG_HELLO, &body, "hello", 1);

    /* HEARTBEAT with 0 and 2 devices */
    static ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, hello.network_id, NS_HASH_BYTES);
    snprintf(hb.endpoint, sizeof hb.endpoint, "tcp://[::1]:7000");
    snprintf(hb.version, sizeof hb.version, "0.1.0");
    hb.interval_ms = 5000;
    hb.sent_us = ns_now_us();
    hb.price = 1000;
    hb.stake = 50;
    snprintf(hb.region, sizeof hb.region, "local");
    hb.free_slots = 1;
    hb.ledger_entries = 12;
    ns_hash(hb.ledger_digest, "heads", 5);
    s_check(ns_heartbeat_encode(&hb, &body), "heartbeat 0");
    s_envelope_and_mutants(id, NS_MSG_HEARTBEAT, &body, "heartbeat 0 devices",
                           0);
    hb.n_devices = 2;
    s_devinfo(&hb.devices[0], 0);
    s_devinfo(&hb.devices[1], 1);
    s_check(ns_heartbeat_encode(&hb, &body), "heartbeat 2");
    s_envelope_and_mutants(id, NS_MSG_HEARTBEAT, &body, "heartbeat 2 devices",
                           1);

    /* PEERS with 0 and 3 entries */
    static ns_peers_t peers;
    memset(&peers, 0, sizeof peers);
    s_check(ns_peers_encode(&peers, &body), "peers 0");
    s_envelope_and_mutants(id, NS_MSG_PEERS, &body, "peers 0", 0);
    peers.n = 3;
    for (uint32_t i = 0; i < peers.n; i++) {
        randombytes_buf(peers.peers[i].id, NS_ID_BYTES);
        snprintf(peers.peers[i].endpoint, sizeof peers.peers[i].endpoint,
                 "tcp://10.0.0.%u:%u", i + 1, 7000 + i);
    }
    s_check(ns_peers_encode(&peers, &body), "peers 3");
    s_envelope_and_mutants(id, NS_MSG_PEERS, &body, "peers 3", 1);

    /* PULL with 0 and 3 ids */
    uint8_t ids[3 * NS_HASH_BYTES];
    randombytes_buf(ids, sizeof ids);
    s_check(ns_pull_encode(ids, 0, &body), "pull 0");
    s_envelope_and_mutants(id, NS_MSG_PULL, &body, "pull 0", 0);
    s_check(ns_pull_encode(ids, 3, &body), "pull 3");
    s_envelope_and_mutants(id, NS_MSG_PULL, &body, "pull 3", 1);
    s_check(ns_pull_encode_since(ids, 3, 1700000000000ull, &body),
            "pull since 3");
    s_envelope_and_mutants(id, NS_MSG_PULL, &body, "pull since 3", 1);

    /* IHAVE and IWANT with 1 and 3 ids */
    s_check(ns_ihave_encode(ids, 1, &body), "ihave 1");
    s_envelope_and_mutants(id, NS_MSG_IHAVE, &body, "ihave 1", 0);
    s_check(ns_ihave_encode(ids, 3, &body), "ihave 3");
    s_envelope_and_mutants(id, NS_MSG_IHAVE, &body, "ihave 3", 1);
    s_check(ns_iwant_encode(ids, 3, &body), "iwant 3");
    s_envelope_and_mutants(id, NS_MSG_IWANT, &body, "iwant 3", 1);

    /* MESH graft and prune */
    s_check(ns_mesh_encode(true, &body), "mesh graft");
    s_envelope_and_mutants(id, NS_MSG_MESH, &body, "mesh graft", 1);
    s_check(ns_mesh_encode(false, &body), "mesh prune");
    s_envelope_and_mutants(id, NS_MSG_MESH, &body, "mesh prune", 0);

    /* a signed message of an unknown type */
    ns_buf_t env;
    ns_buf_init(&env);
    s_check(ns_envelope_encode(id, 200, 1, body.data, body.len, &env, NULL),
            "type 200");
    s_save_buf("envelope type 200", &env);
    ns_buf_release(&env);

    /* a device list (devices.msgpack) */
    char *list = NULL;
    size_t list_len = 0;
    s_check(ns_devinfo_list_encode(hb.devices, 2, &list, &list_len),
            "device list");
    s_save("device list", (const uint8_t *)list, list_len);
    free(list);

    /* container headers that claim far more than the input holds */
    static const uint8_t huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff,
                                       0xff, 0xa1, 'k',  0x01};
    static const uint8_t huge_bin[] = {0xc6, 0xff, 0xff, 0xff, 0xff, 0x00};
    static const uint8_t huge_str[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
    s_save("array32 of 2^32-1", huge_array, sizeof huge_array);
    s_save("map32 of 2^32-1", huge_map, sizeof huge_map);
    s_save("bin32 of 4 GiB", huge_bin, sizeof huge_bin);
    s_save("str32 of 4 GiB", huge_str, sizeof huge_str);

    /* JSON shapes: nested maps and arrays, strings with quotes and
     * control bytes, bin, floats, negative numbers; an ext */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    ns_mp_str(&pk, "peers");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_map(&pk, 2);
    ns_mp_str(&pk, "id");
    ns_mp_bin(&pk, ids, 8);
    ns_mp_str(&pk, "say \"hi\"\\");
    msgpack_pack_double(&pk, -1.25);
    msgpack_pack_int64(&pk, INT64_MIN);
    ns_mp_str(&pk, "flags");
    msgpack_pack_array(&pk, 3);
    msgpack_pack_true(&pk);
    msgpack_pack_nil(&pk);
    msgpack_pack_float(&pk, 3.5f);
    msgpack_pack_str(&pk, 3);
    msgpack_pack_str_body(&pk, "a\nb", 3);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    s_save("json-ish nested map", (const uint8_t *)sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    msgpack_sbuffer_init(&sb);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_ext(&pk, 1, 5);
    msgpack_pack_ext_body(&pk, "x", 1);
    s_save("array with an ext value", (const uint8_t *)sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);

    uint8_t deep[40];
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0xc0;
    s_save("40 nested arrays", deep, sizeof deep);

    ns_buf_release(&body);
    ns_identity_destroy(&id);
    fprintf(stderr, "gen_corpus: %d files in %s\n", s_written, s_dir);
    return s_failed;
}
