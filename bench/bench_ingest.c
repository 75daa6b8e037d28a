/* bench_ingest.c - signed-message ingest rate on one core, next to the raw
 * Ed25519 verify rate measured on the same messages in the same run.
 *
 * Ingest = everything a node does with a fresh gossiped heartbeat: rate
 * limit, strict envelope decode, freshness, seen-cache lookup, signature,
 * seen-cache insert with a stored copy, body decode, peer-table update and
 * forwarding to `fanout` peers. Prints figures only.
 *
 *   bench_ingest [MESSAGES] [SENDERS]
 */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    uint32_t n_msgs = argc > 1 ? (uint32_t)atoi(argv[1]) : 20000;
    uint32_t n_senders = argc > 2 ? (uint32_t)atoi(argv[2]) : 32;
    if (sodium_init() < 0 || n_msgs == 0 || n_senders == 0)
        return 1;
    ns_log_threshold = NS_LOG_ERROR;

    ns_config_t cfg;
    ns_config_defaults(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "tcp://127.0.0.1:0");
    cfg.rate_burst = 1000000000; /* measure the pipeline, not the limiter */
    cfg.rate_msgs_per_s = 1000000;
    ns_identity_t *me = ns_identity_generate();
    ns_hash_t net;
    ns_hash(net, "bench", 5);
    ns_p2p_opts_t o = {&cfg, me, {0}, "bench", NULL, 0, false};
    memcpy(o.network_id, net, NS_HASH_BYTES);
    int err = 0;
    ns_p2p_t *p = ns_p2p_new(&o, &err);
    if (!p) {
        fprintf(stderr, "bench_ingest: %s\n", ns_strerror(err));
        return 1;
    }

    /* Pre-build the messages: n_senders nodes, heartbeats with one device. */
    ns_identity_t **senders = calloc(n_senders, sizeof *senders);
    uint8_t(*links)[32] = calloc(n_senders, 32);
    ns_buf_t *msgs = calloc(n_msgs, sizeof *msgs);
    ns_envelope_t *envs = calloc(n_msgs, sizeof *envs);
    uint8_t **signed_msgs = calloc(n_msgs, sizeof *signed_msgs);
    size_t *signed_lens = calloc(n_msgs, sizeof *signed_lens);
    for (uint32_t s = 0; s < n_senders; s++) {
        senders[s] = ns_identity_generate();
        if (ns_id_curve_pk(ns_identity_pk(senders[s]), links[s]) != NS_OK)
            return 1;
    }
    ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, net, NS_HASH_BYTES);
    snprintf(hb.version, sizeof hb.version, "bench");
    snprintf(hb.region, sizeof hb.region, "local");
    hb.interval_ms = 5000;
    hb.n_devices = 1;
    snprintf(hb.devices[0].name, sizeof hb.devices[0].name, "bench device");
    snprintf(hb.devices[0].vendor, sizeof hb.devices[0].vendor, "bench");
    snprintf(hb.devices[0].cl_c_version, sizeof hb.devices[0].cl_c_version,
             "OpenCL C 1.2");
    hb.devices[0].type = NS_DEV_GPU;
    ns_buf_t body;
    ns_buf_init(&body);
    ns_wire_types_t types;
    ns_wire_types_init(&types);
    uint64_t t0 = ns_now_ms();
    size_t total_bytes = 0;
    for (uint32_t i = 0; i < n_msgs; i++) {
        uint32_t s = i % n_senders;
        snprintf(hb.endpoint, sizeof hb.endpoint, "tcp://127.0.0.1:%u",
                 20000 + s);
        hb.sent_us = ns_now_us();
        ns_buf_init(&msgs[i]);
        if (ns_heartbeat_encode(&hb, &body) != NS_OK ||
            ns_envelope_encode(senders[s], NS_MSG_HEARTBEAT, t0 + i / n_senders,
                               body.data, body.len, &msgs[i], NULL) != NS_OK ||
            ns_envelope_decode(msgs[i].data, msgs[i].len, &types, &envs[i]) !=
                NS_OK)
            return 1;
        /* the exact bytes a verifier checks: sig domain || message id */
        size_t dl = sizeof(NS_WIRE_SIG_DOMAIN) - 1;
        signed_lens[i] = dl + NS_HASH_BYTES;
        signed_msgs[i] = malloc(signed_lens[i]);
        memcpy(signed_msgs[i], NS_WIRE_SIG_DOMAIN, dl);
        memcpy(signed_msgs[i] + dl, envs[i].id, NS_HASH_BYTES);
        total_bytes += msgs[i].len;
    }

    /* Interleave the two measurements in small rounds over the same
     * messages, so that noise from other processes hits both alike. */
    uint32_t ok = 0, accepted = 0;
    uint64_t verify_us = 0, ingest_us = 0;
    const uint32_t round = 500;
    for (uint32_t start = 0; start < n_msgs; start += round) {
        uint32_t end = start + round < n_msgs ? start + round : n_msgs;
        uint64_t v0 = ns_mono_us();
        for (uint32_t i = start; i < end; i++)
            ok += crypto_sign_verify_detached(envs[i].sig, signed_msgs[i],
                                              signed_lens[i],
                                              envs[i].sender) == 0;
        uint64_t v1 = ns_mono_us();
        for (uint32_t i = start; i < end; i++)
            accepted += ns_p2p_ingest(p, links[i % n_senders], msgs[i].data,
                                      msgs[i].len) == NS_OK;
        uint64_t i1 = ns_mono_us();
        verify_us += v1 - v0;
        ingest_us += i1 - v1;
    }
    uint64_t v0 = 0, v1 = verify_us, i0 = 0, i1 = ingest_us;

    double verify_rate = n_msgs / ((double)(v1 - v0) / 1e6);
    double ingest_rate = n_msgs / ((double)(i1 - i0) / 1e6);
    printf("ingest benchmark: %u heartbeats from %u senders, %.0f bytes "
           "each, one core\n",
           n_msgs, n_senders, (double)total_bytes / n_msgs);
    printf("  raw Ed25519 verify   %9.0f msg/s  (%u/%u valid)\n", verify_rate,
           ok, n_msgs);
    printf("  full node ingest     %9.0f msg/s  (%u/%u accepted)\n",
           ingest_rate, accepted, n_msgs);
    printf("  ingest / verify      %9.1f %%    (goal >= 85 %%)\n",
           100.0 * ingest_rate / verify_rate);
    printf("  per message          %9.2f us ingest, %.2f us verify, %.2f us "
           "other work\n",
           (double)(i1 - i0) / n_msgs, (double)(v1 - v0) / n_msgs,
           ((double)(i1 - i0) - (double)(v1 - v0)) / n_msgs);

    /* A 128 KiB CHUNK's envelope, signed and checked as wire version 2
     * does (over the message id) next to version 1's way (Ed25519 over
     * the whole signed bytes), same body, same run. */
    {
        static uint8_t chunk[128 * 1024], sig[NS_SIG_BYTES];
        randombytes_buf(chunk, sizeof chunk);
        const uint32_t reps = 200;
        ns_buf_t m;
        ns_envelope_t e;
        ns_buf_init(&m);
        uint64_t a0 = ns_mono_us();
        for (uint32_t r = 0; r < reps; r++) {
            m.len = 0;
            if (ns_envelope_encode(senders[0], NS_MSG_HEARTBEAT, t0, chunk,
                                   sizeof chunk, &m, NULL) != NS_OK ||
                ns_envelope_decode(m.data, m.len, &types, &e) != NS_OK ||
                ns_envelope_verify(&e) != NS_OK)
                return 1;
        }
        uint64_t a1 = ns_mono_us();
        /* version 1: the id's hash on both sides, Ed25519 over the bytes */
        size_t dl = sizeof(NS_WIRE_DOMAIN) - 1, sl = e.signed_len;
        uint8_t *whole = malloc(dl + sl);
        if (!whole)
            return 1;
        memcpy(whole, NS_WIRE_DOMAIN, dl);
        memcpy(whole + dl, e.signed_part, sl);
        ns_hash_t h;
        for (uint32_t r = 0; r < reps; r++) {
            ns_hash(h, whole, dl + sl);
            ns_identity_sign(senders[0], whole, dl + sl, sig);
            ns_hash(h, whole, dl + sl);
            if (ns_sig_verify(ns_identity_pk(senders[0]), whole, dl + sl,
                              sig) != NS_OK)
                return 1;
        }
        uint64_t a2 = ns_mono_us();
        printf("  128 KiB CHUNK        %9.3f ms encode + decode + verify "
               "(wire v2: signs the id); v1's hash + sign + hash + verify "
               "of the bytes %.3f ms\n",
               (double)(a1 - a0) / reps / 1000.0,
               (double)(a2 - a1) / reps / 1000.0);
        free(whole);
        ns_buf_release(&m);
    }

    for (uint32_t i = 0; i < n_msgs; i++) {
        ns_buf_release(&msgs[i]);
        free(signed_msgs[i]);
    }
    for (uint32_t s = 0; s < n_senders; s++)
        ns_identity_destroy(&senders[s]);
    free(senders);
    free(links);
    free(msgs);
    free(envs);
    free(signed_msgs);
    free(signed_lens);
    ns_buf_release(&body);
    ns_p2p_destroy(&p);
    ns_identity_destroy(&me);
    return accepted == n_msgs ? 0 : 1;
}
