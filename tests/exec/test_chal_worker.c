/* test_chal_worker.c - hardware challenges through the sandboxed worker
 * (worker.h, challenge.h): the labelling answer's codec (round trip,
 * truncated, inconsistent and mutated answers, read from exact-size heap
 * copies so that a sanitizer build catches any read out of bounds); a
 * label and an imatmul challenge answered by a real worker and checked by
 * the verifier (tampered answers WRONG); over-cap requests refused before
 * anything runs; a worker whose answer does not match its root is a
 * protocol violation.
 *
 * This binary is its own worker: started as `test_exec_chal_worker worker
 * --fd N ...` it serves with ns_worker_main, or, with NS_TEST_HOSTILE
 * set, answers challenges with lies.
 */
#include "nightshift/challenge.h"
#include "nightshift/log.h"
#include "nightshift/util.h"
#include "nightshift/worker.h"
#include "nightshift/worker_frame.h"

#include "check.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_cache[1100]; /* program cache shared by the workers */

/* ---- helpers ------------------------------------------------------------ */

static ns_label_opening_t *s_openings(void)
{
    ns_label_opening_t *o = calloc(NS_CHAL_MAX_OPENINGS, sizeof *o);
    CHECK(o != NULL);
    return o;
}

/* Read an answer from an exact-size heap copy (ASan sees any overrun). */
static int s_read_copy(const uint8_t *buf, size_t len,
                       const ns_label_params_t *p, ns_hash_t root,
                       uint64_t *positions, uint32_t *k,
                       ns_label_opening_t *openings)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return NS_ERR_NOMEM;
    if (len)
        memcpy(copy, buf, len);
    int rc = ns_label_answer_read(copy, len, p, root, positions, k, openings);
    free(copy);
    return rc;
}

/* The verifier's side of a label answer: read it, recompute the positions
 * from its root and the seed, verify. WRONG also for an answer that does
 * not read. */
static ns_chal_verdict s_judge(const uint8_t *buf, size_t len,
                               const ns_label_params_t *p,
                               const uint8_t seed[32], uint32_t want_k,
                               ns_label_opening_t *openings, char *why,
                               size_t whylen)
{
    ns_hash_t root;
    uint64_t got[NS_CHAL_MAX_OPENINGS], want[NS_CHAL_MAX_OPENINGS];
    uint32_t k = 0;
    if (s_read_copy(buf, len, p, root, got, &k, openings) != NS_OK ||
        k != want_k) {
        snprintf(why, whylen, "does not read");
        return NS_CHAL_WRONG;
    }
    ns_label_positions(p, root, seed, k, want);
    return ns_label_verify(p, seed, root, want, k, openings, 0,
                           UINT64_C(600000000), why, whylen);
}

/* A host-made answer for k positions drawn from the root and seed. */
static void s_host_answer(const ns_label_params_t *p, const uint8_t seed[32],
                          uint32_t k, ns_buf_t *out, ns_hash_t root)
{
    uint8_t *labels = malloc(p->bytes);
    ns_merkle_t tree;
    uint64_t positions[NS_CHAL_MAX_OPENINGS];
    ns_label_opening_t *o = s_openings();
    CHECK(labels != NULL);
    CHECK_RC(ns_label_fill_host(p, seed, labels), NS_OK);
    CHECK_RC(ns_label_commit_host(p, labels, &tree), NS_OK);
    ns_merkle_root(&tree, root);
    ns_label_positions(p, root, seed, k, positions);
    CHECK_RC(ns_label_open_host(p, labels, &tree, positions, k, o), NS_OK);
    CHECK_RC(ns_label_answer_pack(p, root, positions, k, o, out), NS_OK);
    ns_merkle_release(&tree);
    free(labels);
    free(o);
}

static ns_worker_t *s_worker(void)
{
    ns_worker_opts_t o;
    int rc = NS_OK;
    ns_worker_opts_init(&o);
    o.cache_dir = s_cache;
    o.timeout_ms = 120000; /* the first challenge builds the programs */
    ns_worker_t *w = ns_worker_new(&o, &rc);
    CHECK_RC(rc, NS_OK);
    CHECK(w != NULL);
    return w;
}

/* ---- the codec ---------------------------------------------------------- */

TEST(answer_codec)
{
    ns_label_params_t p;
    uint8_t seed[32];
    ns_hash_t root, root2;
    ns_buf_t buf;
    uint64_t pos[NS_CHAL_MAX_OPENINGS];
    uint32_t k = 0;
    char why[256];
    ns_label_opening_t *o = s_openings();
    const uint32_t K = 16;

    ns_buf_init(&buf);
    randombytes_buf(seed, sizeof seed);
    CHECK_RC(ns_label_params_init(&p, NS_LABEL_MIN_BYTES, 0), NS_OK);
    s_host_answer(&p, seed, K, &buf, root);
    CHECK(buf.len > NS_HASH_BYTES + 4);
    CHECK(buf.len <= NS_LABEL_ANSWER_MAX);

    /* round trip, and the verifier passes it */
    CHECK_RC(s_read_copy(buf.data, buf.len, &p, root2, pos, &k, o), NS_OK);
    CHECK_EQ_INT(k, K);
    CHECK_MEM(root, root2, NS_HASH_BYTES);
    CHECK_EQ_INT(s_judge(buf.data, buf.len, &p, seed, K, o, why, sizeof why),
                 NS_CHAL_PASSED);
    ns_buf_t again;
    ns_buf_init(&again);
    CHECK_RC(ns_label_answer_pack(&p, root2, pos, k, o, &again), NS_OK);
    CHECK(again.len == buf.len && memcmp(again.data, buf.data, buf.len) == 0);

    /* every truncation is refused, and so is a trailing byte */
    bool all_refused = true;
    for (size_t len = 0; len < buf.len; len += len < 256 ? 1 : 61)
        if (s_read_copy(buf.data, len, &p, root2, pos, &k, o) == NS_OK ||
            k != 0)
            all_refused = false;
    CHECK(all_refused);
    CHECK_RC(s_read_copy(buf.data, buf.len - 1, &p, root2, pos, &k, o),
             NS_ERR_TRUNCATED);
    CHECK_RC(ns_buf_append(&again, "x", 1), NS_OK);
    CHECK_RC(s_read_copy(again.data, again.len, &p, root2, pos, &k, o),
             NS_ERR_TRAILING);

    /* inconsistent: k 0 and over the cap, a position past the end, a
     * chunk index that is not the position's, a path of the wrong depth */
    uint8_t *bad = malloc(buf.len);
    CHECK(bad != NULL);
    const size_t k_off = NS_HASH_BYTES, first = NS_HASH_BYTES + 4;
    memcpy(bad, buf.data, buf.len);
    memset(bad + k_off, 0, 4);
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_INVAL);
    bad[k_off] = (NS_CHAL_MAX_OPENINGS + 1) & 0xff;
    bad[k_off + 1] = (NS_CHAL_MAX_OPENINGS + 1) >> 8;
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_TOOBIG);
    memcpy(bad, buf.data, buf.len);
    bad[first + 7] = 0x80; /* position's high byte */
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_INVAL);
    memcpy(bad, buf.data, buf.len);
    bad[first + 8] ^= 1; /* the at chunk's index */
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_INVAL);
    memcpy(bad, buf.data, buf.len);
    bad[first + 16] += 1; /* the at chunk's depth */
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_INVAL);
    memcpy(bad, buf.data, buf.len);
    bad[first + 16] = 255; /* a depth that would overrun path[] */
    CHECK_RC(s_read_copy(bad, buf.len, &p, root2, pos, &k, o), NS_ERR_INVAL);
    /* bad parameters */
    ns_label_params_t q = p;
    q.steps++;
    CHECK_RC(s_read_copy(buf.data, buf.len, &q, root2, pos, &k, o),
             NS_ERR_INVAL);

    /* the packer refuses what the reader would */
    CHECK_RC(ns_label_answer_pack(&p, root, pos, 0, o, &again), NS_ERR_INVAL);
    CHECK(again.len == 0);
    CHECK_RC(ns_label_answer_pack(&p, root, pos, NS_CHAL_MAX_OPENINGS + 1, o,
                                  &again),
             NS_ERR_TOOBIG);
    CHECK_RC(s_read_copy(buf.data, buf.len, &p, root2, pos, &k, o), NS_OK);
    o[0].at.depth++;
    CHECK_RC(ns_label_answer_pack(&p, root, pos, k, o, &again), NS_ERR_INVAL);
    o[0].at.depth--;
    pos[1] ^= 1;
    CHECK_RC(ns_label_answer_pack(&p, root, pos, k, o, &again), NS_ERR_INVAL);

    /* hostile bytes: random mutations never read out of bounds, and what
     * still reads never passes unless it is the answer itself */
    uint32_t passed_mutants = 0, read_mutants = 0;
    for (int round = 0; round < 3000; round++) {
        size_t len = buf.len;
        memcpy(bad, buf.data, buf.len);
        uint32_t flips = 1 + randombytes_uniform(4);
        for (uint32_t f = 0; f < flips; f++) {
            /* half the flips in the first opening's header bytes */
            size_t at = randombytes_uniform(2)
                            ? first + randombytes_uniform(24)
                            : randombytes_uniform((uint32_t)buf.len);
            bad[at] ^= (uint8_t)(1 + randombytes_uniform(255));
        }
        if (round % 5 == 0)
            len = randombytes_uniform((uint32_t)buf.len);
        if (len == buf.len && memcmp(bad, buf.data, len) == 0)
            continue;
        if (s_read_copy(bad, len, &p, root2, pos, &k, o) == NS_OK)
            read_mutants++;
        if (s_judge(bad, len, &p, seed, K, o, why, sizeof why) ==
            NS_CHAL_PASSED)
            passed_mutants++;
    }
    CHECK_EQ_INT(passed_mutants, 0);
    CHECK(read_mutants > 0); /* flipped data bytes still read */
    /* garbage of every small size */
    for (size_t len = 0; len < 600; len++) {
        randombytes_buf(bad, len);
        if (len >= first) { /* a plausible k, to reach the openings */
            memset(bad + k_off, 0, 4);
            bad[k_off] = 1;
        }
        CHECK(s_read_copy(bad, len, &p, root2, pos, &k, o) != NS_OK);
    }
    free(bad);
    ns_buf_release(&again);
    ns_buf_release(&buf);
    free(o);
}

TEST(frames)
{
    ns_chal_request_t r, back;
    msgpack_sbuffer sb;
    uint32_t type = 0;
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_LABEL;
    CHECK_RC(ns_label_params_init(&r.label, 4u << 20, 0), NS_OK);
    randombytes_buf(r.seed, sizeof r.seed);
    r.k = 77;
    ns_worker_chal_pack(&sb, &r);
    const uint8_t *head = (const uint8_t *)sb.data + NS_WORKER_FRAME_LEN;
    size_t len = sb.size - NS_WORKER_FRAME_LEN;
    CHECK_EQ_INT(ns_worker_frame_len((const uint8_t *)sb.data), len);
    CHECK_RC(ns_worker_frame_type(head, len, &type), NS_OK);
    CHECK_EQ_INT(type, NS_WORKER_MSG_CHALLENGE);
    CHECK_RC(ns_worker_chal_read(head, len, &back), NS_OK);
    CHECK(memcmp(&r, &back, sizeof r) == 0);
    for (size_t cut = 0; cut < len; cut++)
        CHECK(ns_worker_chal_read(head, cut, &back) != NS_OK);
    msgpack_sbuffer_destroy(&sb);

    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_IMATMUL;
    r.imatmul.n = 128;
    r.imatmul.p = NS_IMATMUL_DEFAULT_P;
    r.k = 5; /* ignored for imatmul: sent as 0 */
    ns_worker_chal_pack(&sb, &r);
    head = (const uint8_t *)sb.data + NS_WORKER_FRAME_LEN;
    len = sb.size - NS_WORKER_FRAME_LEN;
    CHECK_RC(ns_worker_chal_read(head, len, &back), NS_OK);
    CHECK(back.kind == r.kind && back.imatmul.n == 128 && back.k == 0 &&
          back.imatmul.p == r.imatmul.p);
    /* the RUN/ITEMS/FRAUD reader does not take it */
    msgpack_sbuffer_destroy(&sb);
    r.kind = 9;
    ns_worker_chal_pack(&sb, &r);
    head = (const uint8_t *)sb.data + NS_WORKER_FRAME_LEN;
    len = sb.size - NS_WORKER_FRAME_LEN;
    CHECK_RC(ns_worker_chal_read(head, len, &back), NS_ERR_INVAL);
    msgpack_sbuffer_destroy(&sb);

    ns_worker_chal_reply_t rep;
    ns_hash_t root;
    randombytes_buf(root, sizeof root);
    ns_worker_chal_result_pack(&sb, NS_OK, "", root, 1234, 4096);
    head = (const uint8_t *)sb.data + NS_WORKER_FRAME_LEN;
    len = sb.size - NS_WORKER_FRAME_LEN;
    CHECK_RC(ns_worker_chal_result_read(head, len, &rep), NS_OK);
    CHECK(rep.type == NS_WORKER_MSG_CHAL_RESULT && rep.status == NS_OK &&
          rep.device_us == 1234 && rep.answer_len == 4096 &&
          memcmp(rep.root, root, sizeof root) == 0);
    CHECK(ns_worker_result_read(head, len, &(ns_worker_reply_t){0}) != NS_OK);
    for (size_t cut = 0; cut < len; cut++)
        CHECK(ns_worker_chal_result_read(head, cut, &rep) != NS_OK);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- through a real worker ---------------------------------------------- */

static ns_worker_t *s_w; /* shared by the worker tests: one prover build */

TEST(label_challenge)
{
    ns_chal_request_t r;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "", why[256];
    ns_label_opening_t *o = s_openings();
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_LABEL;
    CHECK_RC(ns_label_params_init(&r.label, 4u << 20, 0), NS_OK);
    randombytes_buf(r.seed, sizeof r.seed);
    r.k = 64;
    int rc = ns_worker_run_challenge(s_w, &r, &res, err, sizeof err);
    if (!CHECK_RC(rc, NS_OK)) {
        fprintf(stderr, "  label challenge: %s\n", err);
        free(o);
        return;
    }
    CHECK(res.chal_len > 0 && res.chal_bytes != NULL);
    CHECK(res.chal_device_us > 0);
    CHECK_MEM(res.chal_bytes, res.chal_root, NS_HASH_BYTES);

    /* the device's root is the host reference's */
    ns_buf_t host;
    ns_hash_t host_root;
    ns_buf_init(&host);
    s_host_answer(&r.label, r.seed, r.k, &host, host_root);
    CHECK_MEM(host_root, res.chal_root, NS_HASH_BYTES);
    CHECK(host.len == res.chal_len &&
          memcmp(host.data, res.chal_bytes, host.len) == 0);
    ns_buf_release(&host);

    /* the verifier: read, recompute the positions, PASSED */
    ns_hash_t root;
    uint64_t pos[NS_CHAL_MAX_OPENINGS], want[NS_CHAL_MAX_OPENINGS];
    uint32_t k = 0;
    CHECK_RC(
        s_read_copy(res.chal_bytes, res.chal_len, &r.label, root, pos, &k, o),
        NS_OK);
    CHECK_EQ_INT(k, r.k);
    ns_label_positions(&r.label, root, r.seed, k, want);
    CHECK(memcmp(pos, want, k * sizeof *pos) == 0);
    uint64_t deadline = ns_label_deadline_us(&r.label, 0.5, 1.0); /* slow */
    CHECK_EQ_INT(ns_label_verify(&r.label, r.seed, root, want, k, o,
                                 res.chal_device_us, deadline, why, sizeof why),
                 NS_CHAL_PASSED);
    /* a late answer is LATE */
    CHECK_EQ_INT(ns_label_verify(&r.label, r.seed, root, want, k, o, 2, 1, why,
                                 sizeof why),
                 NS_CHAL_LATE);

    /* tampered: a byte of the first opened chunk (its label's own bytes) */
    uint8_t *bad = malloc(res.chal_len);
    CHECK(bad != NULL);
    memcpy(bad, res.chal_bytes, res.chal_len);
    size_t at_data = NS_HASH_BYTES + 4 + 8 + 9;
    bad[at_data + (pos[0] % NS_LABEL_CHUNK_LABELS) * NS_LABEL_BYTES] ^= 0x01;
    CHECK_EQ_INT(
        s_judge(bad, res.chal_len, &r.label, r.seed, r.k, o, why, sizeof why),
        NS_CHAL_WRONG);
    CHECK_CONTAINS(why, "label");
    /* another byte of that chunk (not the label): the chunk's hash */
    memcpy(bad, res.chal_bytes, res.chal_len);
    bad[at_data + ((pos[0] + 1) % NS_LABEL_CHUNK_LABELS) * NS_LABEL_BYTES] ^=
        0x80;
    CHECK_EQ_INT(
        s_judge(bad, res.chal_len, &r.label, r.seed, r.k, o, why, sizeof why),
        NS_CHAL_WRONG);
    /* a wrong root: other positions, and nothing opens under it */
    memcpy(bad, res.chal_bytes, res.chal_len);
    bad[3] ^= 0x10;
    CHECK_EQ_INT(
        s_judge(bad, res.chal_len, &r.label, r.seed, r.k, o, why, sizeof why),
        NS_CHAL_WRONG);
    ns_hash_t wrong;
    memcpy(wrong, root, sizeof wrong);
    wrong[0] ^= 1;
    CHECK_RC(
        s_read_copy(res.chal_bytes, res.chal_len, &r.label, root, pos, &k, o),
        NS_OK);
    CHECK_EQ_INT(ns_label_verify(&r.label, r.seed, wrong, want, k, o, 0,
                                 deadline, why, sizeof why),
                 NS_CHAL_WRONG);
    /* another seed: the verifier's positions are not the ones opened */
    uint8_t seed2[32];
    memcpy(seed2, r.seed, sizeof seed2);
    seed2[0] ^= 1;
    CHECK_EQ_INT(s_judge(res.chal_bytes, res.chal_len, &r.label, seed2, r.k, o,
                         why, sizeof why),
                 NS_CHAL_WRONG);
    free(bad);
    ns_worker_result_release(&res);
    CHECK(res.chal_bytes == NULL && res.chal_len == 0);
    ns_worker_result_release(&res); /* idempotent */
    free(o);
}

TEST(imatmul_challenge)
{
    ns_chal_request_t r;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "", why[256];
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_IMATMUL;
    r.imatmul.n = 128;
    r.imatmul.p = NS_IMATMUL_DEFAULT_P;
    randombytes_buf(r.seed, sizeof r.seed);
    int rc = ns_worker_run_challenge(s_w, &r, &res, err, sizeof err);
    if (!CHECK_RC(rc, NS_OK)) {
        fprintf(stderr, "  imatmul challenge: %s\n", err);
        return;
    }
    const size_t nn = 128 * 128;
    CHECK_EQ_INT(res.chal_len, nn * 4);
    ns_hash_t h;
    ns_hash(h, res.chal_bytes, res.chal_len);
    CHECK_MEM(h, res.chal_root, NS_HASH_BYTES);

    uint32_t *c = malloc(nn * 4), *a = malloc(nn * 4), *b = malloc(nn * 4),
             *ref = malloc(nn * 4);
    CHECK(c && a && b && ref);
    for (size_t i = 0; i < nn; i++) {
        const uint8_t *q = res.chal_bytes + 4 * i;
        c[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
               (uint32_t)q[3] << 24;
    }
    ns_imatmul_params_t ip = {.n = 128, .p = r.imatmul.p};
    memcpy(ip.seed, r.seed, sizeof ip.seed);
    ns_imatmul_fill(&ip, a, b);
    ns_imatmul_host(&ip, a, b, ref);
    CHECK(memcmp(c, ref, nn * 4) == 0);

    uint8_t secret[32];
    ns_chal_verdict v = NS_CHAL_WRONG;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_imatmul_verify(&ip, c, secret, 4, res.chal_device_us,
                               UINT64_C(600000000), &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_PASSED);
    c[nn / 2 + 7] = (c[nn / 2 + 7] + 1) % ip.p; /* a flipped word */
    CHECK_RC(ns_imatmul_verify(&ip, c, secret, 4, res.chal_device_us,
                               UINT64_C(600000000), &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_WRONG);
    free(c);
    free(a);
    free(b);
    free(ref);
    ns_worker_result_release(&res);
}

/* Over-cap requests fail at submit, before anything is sent. */
static void s_expect_refused(ns_worker_t *w, const ns_chal_request_t *r,
                             int want_rc, const char *needle)
{
    ns_worker_stats_t before, after;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    ns_worker_stats(w, &before);
    CHECK_RC(ns_worker_submit_challenge(w, r, err, sizeof err), want_rc);
    CHECK_CONTAINS(err, needle);
    CHECK(!ns_worker_busy(w));
    CHECK_RC(ns_worker_run_challenge(w, r, &res, err, sizeof err), want_rc);
    CHECK(res.chal_bytes == NULL && res.chal_len == 0);
    ns_worker_stats(w, &after);
    CHECK(after.jobs == before.jobs && after.starts == before.starts);
}

TEST(over_cap_refused)
{
    const ns_devinfo_t *dev = ns_worker_device(s_w);
    ns_chal_request_t r;
    CHECK(dev != NULL && dev->max_alloc_bytes > 0);
    if (!dev)
        return;
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_LABEL;
    r.k = 8;
    uint64_t big = dev->max_alloc_bytes + (UINT64_C(64) << 20);
    if (big <= NS_LABEL_MAX_BYTES) {
        CHECK_RC(ns_label_params_init(&r.label, big, 0), NS_OK);
        CHECK(r.label.bytes > dev->max_alloc_bytes);
        s_expect_refused(s_w, &r, NS_ERR_TOOBIG, "largest allocation");
    }
    CHECK_RC(ns_label_params_init(&r.label, 2u << 20, 0), NS_OK);
    r.k = NS_CHAL_MAX_OPENINGS + 1;
    s_expect_refused(s_w, &r, NS_ERR_TOOBIG, "openings");
    r.k = 0;
    s_expect_refused(s_w, &r, NS_ERR_INVAL, "openings");
    r.k = 8;
    r.label.steps++;
    s_expect_refused(s_w, &r, NS_ERR_INVAL, "labelling parameters");

    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_IMATMUL;
    r.imatmul.n = 2 * NS_CHAL_REQUEST_MAX_N;
    r.imatmul.p = NS_IMATMUL_DEFAULT_P;
    s_expect_refused(s_w, &r, NS_ERR_TOOBIG, "matrix order");
    r.imatmul.n = 100; /* not a multiple of the tile */
    s_expect_refused(s_w, &r, NS_ERR_INVAL, "matrix parameters");
    r.imatmul.n = 128;
    r.imatmul.p = 1000; /* not prime */
    s_expect_refused(s_w, &r, NS_ERR_INVAL, "matrix parameters");
    r.kind = 3;
    s_expect_refused(s_w, &r, NS_ERR_INVAL, "kind");

    /* a fresh worker does not know its device at submit: the request is
     * refused at dispatch, when HELLO says how big a buffer may be */
    if (big <= NS_LABEL_MAX_BYTES) {
        ns_worker_t *w = s_worker();
        ns_worker_result_t res;
        char err[NS_WORKER_MAX_ERROR + 1] = "";
        memset(&r, 0, sizeof r);
        r.kind = NS_CHAL_KIND_LABEL;
        r.k = 8;
        CHECK_RC(ns_label_params_init(&r.label, big, 0), NS_OK);
        uint64_t t0 = ns_mono_us();
        CHECK_RC(ns_worker_run_challenge(w, &r, &res, err, sizeof err),
                 NS_ERR_TOOBIG);
        CHECK_CONTAINS(err, "largest allocation");
        CHECK(ns_mono_us() - t0 < UINT64_C(60000000));
        ns_worker_destroy(&w);
    }
}

/* The worker keeps serving kernels and challenges after a refusal. */
TEST(worker_still_serves)
{
    ns_chal_request_t r;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_IMATMUL;
    r.imatmul.n = 64;
    r.imatmul.p = 65521;
    randombytes_buf(r.seed, sizeof r.seed);
    CHECK_RC(ns_worker_run_challenge(s_w, &r, &res, err, sizeof err), NS_OK);
    CHECK_EQ_INT(res.chal_len, 64 * 64 * 4);
    ns_worker_result_release(&res);
    ns_worker_stats_t st;
    ns_worker_stats(s_w, &st);
    CHECK_EQ_INT(st.crashes, 0);
    CHECK_EQ_INT(st.protocol, 0);
    CHECK_EQ_INT(st.starts, 1); /* one worker, one prover, all along */
}

/* ---- a lying worker ----------------------------------------------------- */

static int s_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t r = write(fd, b, n);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* HELLO, then for each request: read it, answer with mode's lie. */
static int s_hostile_main(const char *mode, int argc, char **argv)
{
    int fd = -1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--fd") == 0)
            fd = atoi(argv[i + 1]);
    if (fd < 0)
        return 2;
    ns_devinfo_t dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "liar");
    msgpack_sbuffer sb;
    ns_worker_hello_pack(&sb, NS_OK, "", &dev);
    if (s_write_all(fd, sb.data, sb.size) != 0)
        return 1;
    msgpack_sbuffer_destroy(&sb);
    for (;;) {
        uint8_t lenbuf[4], head[4096];
        if (read(fd, lenbuf, 4) != 4)
            return 0;
        uint32_t len = ns_worker_frame_len(lenbuf);
        if (len > sizeof head || read(fd, head, len) != (ssize_t)len)
            return 3;
        ns_hash_t root;
        uint8_t answer[64];
        memset(root, 0x22, sizeof root);
        memset(answer, 0x11, sizeof answer);
        if (strcmp(mode, "badroot") == 0) {
            ns_worker_chal_result_pack(&sb, NS_OK, "", root, 10, sizeof answer);
            s_write_all(fd, sb.data, sb.size);
            s_write_all(fd, answer, sizeof answer);
        } else { /* "huge": an answer over the cap */
            ns_worker_chal_result_pack(&sb, NS_OK, "", root, 10,
                                       NS_LABEL_ANSWER_MAX + 1);
            s_write_all(fd, sb.data, sb.size);
        }
        msgpack_sbuffer_destroy(&sb);
    }
}

TEST(lying_worker)
{
    const char *modes[] = {"badroot", "huge"};
    const char *needles[] = {"does not match its root", "an answer of"};
    for (size_t i = 0; i < 2; i++) {
        setenv("NS_TEST_HOSTILE", modes[i], 1);
        ns_worker_t *w = s_worker();
        unsetenv("NS_TEST_HOSTILE");
        ns_chal_request_t r;
        ns_worker_result_t res;
        char err[NS_WORKER_MAX_ERROR + 1] = "";
        memset(&r, 0, sizeof r);
        r.kind = NS_CHAL_KIND_LABEL;
        r.k = 4;
        CHECK_RC(ns_label_params_init(&r.label, 1u << 20, 0), NS_OK);
        CHECK_RC(ns_worker_run_challenge(w, &r, &res, err, sizeof err),
                 NS_ERR_CORRUPT);
        CHECK_CONTAINS(err, needles[i]);
        CHECK(res.chal_bytes == NULL);
        ns_worker_stats_t st;
        ns_worker_stats(w, &st);
        CHECK_EQ_INT(st.protocol, 1);
        ns_worker_destroy(&w);
    }
}

#define TIMED(name)                                                            \
    do {                                                                       \
        uint64_t t0_ = ns_mono_us();                                           \
        RUN(name);                                                             \
        printf("%s: %.0f ms\n", #name, (double)(ns_mono_us() - t0_) / 1e3);    \
        fflush(stdout);                                                        \
    } while (0)

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "worker") == 0) {
        const char *hostile = getenv("NS_TEST_HOSTILE");
        if (hostile && hostile[0])
            return s_hostile_main(hostile, argc - 1, argv + 1);
        if (sodium_init() < 0)
            return 1;
        return ns_worker_main(argc - 1, argv + 1);
    }
    if (sodium_init() < 0)
        return 1;
    ns_log_threshold = NS_LOG_ERROR; /* expected warnings: violations */
    const char *tmp = getenv("NS_TEST_TMP");
    snprintf(s_cache, sizeof s_cache, "%s/chal-worker-cache",
             tmp && tmp[0] ? tmp : "/tmp");
    if (ns_mkdir_p(s_cache, 0700) != NS_OK) {
        fprintf(stderr, "cannot create %s\n", s_cache);
        return 1;
    }
    TIMED(answer_codec);
    TIMED(frames);
    s_w = s_worker();
    TIMED(label_challenge);
    TIMED(imatmul_challenge);
    TIMED(over_cap_refused);
    TIMED(worker_still_serves);
    ns_worker_destroy(&s_w);
    TIMED(lying_worker);
    return ns_test_finish("exec_chal_worker");
}
