/* test_challenge.c - hardware challenges: the labelling rule, its device
 * prover against the host reference, cheating provers (skipped work, a
 * smaller buffer, forged openings) and the Freivalds check of the integer
 * matrix product, on real OpenCL (PoCL).
 */
#include "nightshift/challenge.h"
#include "nightshift/hash.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"

#include "check.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_OPEN 64 /* openings per labelling challenge */

/* A claim with the given figures for a device type. */
static ns_devinfo_t s_claim(uint32_t type, double gbps, double gflops)
{
    ns_devinfo_t d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.gbps = gbps;
    d.gflops = gflops;
    return d;
}

static ns_chal_prover_t *s_prover;

/* ---- labelling: parameters and the rule ---------------------------------- */

TEST(label_params)
{
    ns_label_params_t p;
    CHECK_RC(ns_label_params_init(&p, 1 << 20, 0), NS_OK);
    CHECK_EQ_INT(p.bytes, 1 << 20);
    CHECK_EQ_INT(p.segments, 4);
    CHECK_EQ_INT(p.lanes, 64);
    CHECK_EQ_INT(p.steps, 64);
    CHECK_RC(ns_label_params_init(&p, UINT64_C(4) << 30, 4), NS_OK);
    CHECK_EQ_INT(p.lanes, 65536);
    CHECK_EQ_INT(p.steps, 256);
    CHECK_EQ_INT(p.bytes, UINT64_C(4) << 30);
    /* an odd size is rounded down to whole rows */
    CHECK_RC(ns_label_params_init(&p, (UINT64_C(3) << 20) + 12345, 3), NS_OK);
    CHECK(p.bytes <= (UINT64_C(3) << 20) + 12345);
    CHECK_EQ_INT(p.bytes, (uint64_t)p.lanes * p.segments * p.steps * 64);
    CHECK_RC(ns_label_params_check(&p), NS_OK);

    CHECK_RC(ns_label_params_init(&p, (1 << 20) - 1, 0), NS_ERR_INVAL);
    CHECK_RC(ns_label_params_init(&p, 1 << 20, NS_LABEL_MAX_SEGMENTS + 1),
             NS_ERR_INVAL);
    ns_label_params_t q = {
        .bytes = 1 << 20, .lanes = 96, .segments = 1, .steps = 1};
    CHECK_RC(ns_label_params_check(&q), NS_ERR_INVAL); /* bytes differ */
    q.lanes = 100; /* not a multiple of a chunk */
    q.bytes = (uint64_t)q.lanes * 64 * 2048;
    q.steps = 2048;
    CHECK_RC(ns_label_params_check(&q), NS_ERR_INVAL);
    q = (ns_label_params_t){.bytes = UINT64_C(1) << 41,
                            .lanes = 65536,
                            .segments = 64,
                            .steps = 1 << 14};
    CHECK_RC(ns_label_params_check(&q), NS_ERR_TOOBIG);
}

/* The rule, label by label: a row-0 label depends on the seed and its
 * position only; later ones on prev and ref, and refs stay in range. */
TEST(label_rule)
{
    ns_label_params_t p;
    uint8_t seed[32], a[64], b[64], prev[64], ref[64];
    randombytes_buf(seed, sizeof seed);
    CHECK_RC(ns_label_params_init(&p, 1 << 20, 4), NS_OK);
    ns_label_compute(seed, 5, NULL, NULL, a);
    ns_label_compute(seed, 6, NULL, NULL, b);
    CHECK(memcmp(a, b, 64) != 0);
    randombytes_buf(prev, sizeof prev);
    randombytes_buf(ref, sizeof ref);
    ns_label_compute(seed, 5000, prev, ref, a);
    ref[63] ^= 1;
    ns_label_compute(seed, 5000, prev, ref, b);
    CHECK(memcmp(a, b, 64) != 0);
    ref[63] ^= 1;
    prev[0] ^= 1;
    ns_label_compute(seed, 5000, prev, ref, b);
    CHECK(memcmp(a, b, 64) != 0);
    /* ref == prev is no shortcut: the label still depends on it */
    ns_label_compute(seed, 5000, prev, prev, a);
    prev[9] ^= 1;
    ns_label_compute(seed, 5000, prev, prev, b);
    CHECK(memcmp(a, b, 64) != 0);

    /* segment 0: an earlier row of the same lane; later: any earlier
     * segment */
    int ok = 1;
    for (int i = 0; i < 2000; i++) {
        uint64_t v =
            p.lanes + ns_rand_below((uint32_t)(ns_label_count(&p) - p.lanes));
        randombytes_buf(prev, sizeof prev);
        uint64_t r = ns_label_ref(&p, v, prev);
        uint64_t t = v / p.lanes;
        if (t < p.steps)
            ok &= r % p.lanes == v % p.lanes && r / p.lanes < t;
        else
            ok &= r < t / p.steps * p.steps * p.lanes;
    }
    CHECK(ok);
}

/* ---- labelling: honest and cheating provers on the host ------------------ */

typedef struct {
    ns_label_params_t p;
    uint8_t seed[32], secret[32];
    uint8_t *labels;
    ns_merkle_t tree;
    ns_hash_t root;
    uint64_t pos[K_OPEN];
    ns_label_opening_t *open;
} s_label_t;

static int s_label_setup(s_label_t *s, uint64_t bytes)
{
    memset(s, 0, sizeof *s);
    randombytes_buf(s->seed, sizeof s->seed);
    randombytes_buf(s->secret, sizeof s->secret);
    int rc = ns_label_params_init(&s->p, bytes, 4);
    s->labels = malloc(s->p.bytes);
    s->open = calloc(K_OPEN, sizeof *s->open);
    if (rc != NS_OK || !s->labels || !s->open)
        return NS_ERR_NOMEM;
    return ns_label_fill_host(&s->p, s->seed, s->labels);
}

/* Commit `committed`, then answer from `memory` (what the prover still
 * holds; the same buffer for an honest prover). */
static ns_chal_verdict s_label_run(s_label_t *s, const uint8_t *committed,
                                   const uint8_t *memory, char *why,
                                   size_t whylen)
{
    ns_merkle_release(&s->tree);
    if (ns_label_commit_host(&s->p, committed, &s->tree) != NS_OK)
        return NS_CHAL_WRONG;
    ns_merkle_root(&s->tree, s->root);
    ns_label_positions(&s->p, s->root, s->secret, K_OPEN, s->pos);
    if (ns_label_open_host(&s->p, memory, &s->tree, s->pos, K_OPEN, s->open) !=
        NS_OK)
        return NS_CHAL_WRONG;
    return ns_label_verify(&s->p, s->seed, s->root, s->pos, K_OPEN, s->open,
                           1000, UINT64_MAX, why, whylen);
}

static void s_label_free(s_label_t *s)
{
    free(s->labels);
    free(s->open);
    ns_merkle_release(&s->tree);
    memset(s, 0, sizeof *s);
}

TEST(label_host_honest_and_forged)
{
    s_label_t s;
    char why[200];
    if (!CHECK_RC(s_label_setup(&s, 2 << 20), NS_OK))
        return;
    CHECK_EQ_INT(s_label_run(&s, s.labels, s.labels, why, sizeof why),
                 NS_CHAL_PASSED);
    /* the positions come from the root: distinct, sorted */
    int ok = 1;
    for (int i = 1; i < K_OPEN; i++)
        ok &= s.pos[i] > s.pos[i - 1];
    CHECK(ok);

    /* right answer, too late; the deadline itself is inclusive */
    ns_devinfo_t claim = s_claim(NS_DEV_GPU, 10, 100);
    uint64_t dl = ns_label_deadline_claim_us(&s.p, &claim);
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open,
                                 dl + 1, dl, why, sizeof why),
                 NS_CHAL_LATE);
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open,
                                 dl, dl, why, sizeof why),
                 NS_CHAL_PASSED);

    /* forged openings: another seed, a wrong position, a broken path, a
     * changed byte in an opened chunk, another root */
    uint8_t seed2[32];
    memcpy(seed2, s.seed, 32);
    seed2[0] ^= 1;
    CHECK_EQ_INT(ns_label_verify(&s.p, seed2, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    s.open[5].position++;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    s.open[5].position--;
    s.open[9].at.path[0][0] ^= 1;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    CHECK_CONTAINS(why, "root");
    s.open[9].at.path[0][0] ^= 1;
    int last = K_OPEN - 1; /* beyond row 0: has a prev and a ref */
    CHECK(s.pos[last] >= s.p.lanes);
    s.open[last].ref.data[100] ^= 1;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    s.open[last].ref.data[100] ^= 1;
    /* a ref chunk from elsewhere, with a valid path */
    ns_label_chunk_t keep = s.open[last].ref;
    s.open[last].ref = s.open[last].prev;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    s.open[last].ref = keep;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, s.root, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_PASSED);
    ns_hash_t other;
    memcpy(other, s.root, sizeof other);
    other[1] ^= 1;
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, other, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);
    s_label_free(&s);
}

/* Skipped work: the last segment (or every other lane of it) is filled
 * with junk instead of labels; the junk is committed consistently. */
TEST(label_host_skipped_work)
{
    s_label_t s;
    char why[200];
    if (!CHECK_RC(s_label_setup(&s, 2 << 20), NS_OK))
        return;
    uint64_t row = (uint64_t)s.p.lanes * NS_LABEL_BYTES;
    uint64_t seg = row * s.p.steps;
    uint8_t *cheat = malloc(s.p.bytes);
    memcpy(cheat, s.labels, s.p.bytes);
    randombytes_buf(cheat + 3 * seg, seg);
    unsigned wrong = 0;
    for (int t = 0; t < 20; t++) {
        randombytes_buf(s.secret, sizeof s.secret);
        wrong +=
            s_label_run(&s, cheat, cheat, why, sizeof why) == NS_CHAL_WRONG;
    }
    CHECK_EQ_INT(wrong, 20); /* miss chance (3/4)^64 per try */

    /* labels of the last segment computed, but from zero refs (the prover
     * skipped the reads) */
    memcpy(cheat, s.labels, s.p.bytes);
    for (uint64_t v = 3 * seg / 64; v < s.p.bytes / 64; v++)
        ns_label_compute(s.seed, v, cheat + (v - s.p.lanes) * 64, NULL,
                         cheat + v * 64);
    CHECK_EQ_INT(s_label_run(&s, cheat, cheat, why, sizeof why), NS_CHAL_WRONG);
    free(cheat);
    s_label_free(&s);
}

/* A smaller buffer: the prover keeps only half the labels (slot v mod
 * n/2), so refs into overwritten slots read newer labels, and openings of
 * early positions can only be answered from what the slots now hold. */
TEST(label_host_half_buffer)
{
    s_label_t s;
    char why[200];
    if (!CHECK_RC(s_label_setup(&s, 2 << 20), NS_OK))
        return;
    uint64_t n = ns_label_count(&s.p), h = n / 2;
    uint8_t *slots = malloc(h * 64), *produced = malloc(s.p.bytes);
    uint8_t *memory = malloc(s.p.bytes);
    for (uint64_t v = 0; v < n; v++) {
        uint8_t *out = produced + v * 64;
        if (v < s.p.lanes) {
            ns_label_compute(s.seed, v, NULL, NULL, out);
        } else {
            const uint8_t *prev = slots + ((v - s.p.lanes) % h) * 64;
            uint64_t r = ns_label_ref(&s.p, v, prev);
            ns_label_compute(s.seed, v, prev, slots + (r % h) * 64, out);
        }
        memcpy(slots + (v % h) * 64, out, 64);
    }
    for (uint64_t v = 0; v < n; v++)
        memcpy(memory + v * 64, slots + (v % h) * 64, 64);
    /* it is not the labelling, and it cannot answer */
    CHECK(memcmp(produced, s.labels, s.p.bytes) != 0);
    unsigned wrong = 0;
    for (int t = 0; t < 20; t++) {
        randombytes_buf(s.secret, sizeof s.secret);
        wrong +=
            s_label_run(&s, produced, memory, why, sizeof why) == NS_CHAL_WRONG;
    }
    CHECK_EQ_INT(wrong, 20);
    /* even answering from the committed labels (as if it had kept them)
     * fails: those labels were computed from overwritten refs */
    CHECK_EQ_INT(s_label_run(&s, produced, produced, why, sizeof why),
                 NS_CHAL_WRONG);
    CHECK_CONTAINS(why, "rule");
    free(slots);
    free(produced);
    free(memory);
    s_label_free(&s);
}

/* ---- labelling on the device ------------------------------------------- */

TEST(label_device)
{
    s_label_t s;
    char why[200], err[400];
    ns_hash_t root;
    uint64_t device_us = 0;
    if (!CHECK_RC(s_label_setup(&s, 8 << 20), NS_OK))
        return;
    if (!CHECK_RC(ns_label_prove(s_prover, &s.p, s.seed, root, &device_us, err,
                                 sizeof err),
                  NS_OK)) {
        fprintf(stderr, "  %s\n", err);
        s_label_free(&s);
        return;
    }
    /* the device computed exactly the reference labelling */
    CHECK_RC(ns_label_commit_host(&s.p, s.labels, &s.tree), NS_OK);
    ns_merkle_root(&s.tree, s.root);
    CHECK_MEM(root, s.root, NS_HASH_BYTES);

    uint64_t t0 = ns_mono_us();
    ns_label_positions(&s.p, root, s.secret, K_OPEN, s.pos);
    CHECK_RC(ns_label_open(s_prover, s.pos, K_OPEN, s.open, err, sizeof err),
             NS_OK);
    uint64_t open_us = ns_mono_us() - t0;
    t0 = ns_mono_us();
    /* generous claims: a deadline no honest PoCL run misses */
    ns_devinfo_t slow = s_claim(NS_DEV_CPU, 0.05, 0.5);
    uint64_t dl = ns_label_deadline_claim_us(&s.p, &slow);
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, root, s.pos, K_OPEN, s.open,
                                 device_us, dl, why, sizeof why),
                 NS_CHAL_PASSED);
    uint64_t verify_us = ns_mono_us() - t0;
    /* absurd claims: the same right answer is late */
    ns_devinfo_t fast = s_claim(NS_DEV_GPU, 1e6, 1e9);
    uint64_t tight = ns_label_deadline_claim_us(&s.p, &fast);
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, root, s.pos, K_OPEN, s.open,
                                 tight + 1, tight, why, sizeof why),
                 NS_CHAL_LATE);
    printf("labelling %llu MiB: prove %llu us, open %llu us, verify %llu us "
           "(k = %d); deadline at 0.05 GB/s, 0.5 GFLOPS: %llu us\n",
           (unsigned long long)(s.p.bytes >> 20), (unsigned long long)device_us,
           (unsigned long long)open_us, (unsigned long long)verify_us, K_OPEN,
           (unsigned long long)dl);

    /* another labelling replaces the first; the openings change with it */
    uint8_t seed2[32];
    memcpy(seed2, s.seed, 32);
    seed2[31] ^= 0x80;
    ns_hash_t root2;
    CHECK_RC(
        ns_label_prove(s_prover, &s.p, seed2, root2, NULL, err, sizeof err),
        NS_OK);
    CHECK(memcmp(root, root2, NS_HASH_BYTES) != 0);
    CHECK_RC(ns_label_open(s_prover, s.pos, K_OPEN, s.open, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(ns_label_verify(&s.p, seed2, root2, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_PASSED);
    CHECK_EQ_INT(ns_label_verify(&s.p, s.seed, root2, s.pos, K_OPEN, s.open, 0,
                                 dl, why, sizeof why),
                 NS_CHAL_WRONG);

    /* a labelling larger than the device can hold */
    ns_label_params_t huge;
    CHECK_RC(ns_label_params_init(&huge, NS_LABEL_MAX_BYTES, 4), NS_OK);
    CHECK_RC(
        ns_label_prove(s_prover, &huge, s.seed, root, NULL, err, sizeof err),
        NS_ERR_TOOBIG);
    CHECK_RC(ns_label_open(s_prover, s.pos, 1, s.open, err, sizeof err),
             NS_ERR_STATE);
    s_label_free(&s);
}

/* Deadlines follow the claim: faster claims, shorter deadlines; a CPU is
 * given more time per unit of work than a GPU with the same figures; no
 * claim at all never makes an honest prover late. */
TEST(deadlines)
{
    ns_label_params_t lp;
    ns_imatmul_params_t ip = {.n = 1024, .p = NS_IMATMUL_DEFAULT_P};
    CHECK_RC(ns_label_params_init(&lp, UINT64_C(1) << 30, 4), NS_OK);
    ns_devinfo_t gpu = s_claim(NS_DEV_GPU, 1000, 50000);
    ns_devinfo_t gpu2 = s_claim(NS_DEV_GPU, 2000, 100000);
    ns_devinfo_t cpu = s_claim(NS_DEV_CPU, 1000, 50000);
    ns_devinfo_t none = s_claim(NS_DEV_GPU, 0, 0);
    uint64_t g = ns_label_deadline_claim_us(&lp, &gpu);
    uint64_t g2 = ns_label_deadline_claim_us(&lp, &gpu2);
    CHECK(g2 < g && g2 > NS_CHAL_ALLOWANCE_US);
    /* twice the figures: the work part halves */
    CHECK(g2 - NS_CHAL_ALLOWANCE_US <= (g - NS_CHAL_ALLOWANCE_US) / 2 + 1);
    CHECK(ns_label_deadline_claim_us(&lp, &cpu) > g);
    CHECK(ns_label_deadline_claim_us(&lp, &none) > UINT64_C(1000000000000));
    /* the bandwidth term alone: 3 GiB less a quarter at 1000 GB/s */
    ns_devinfo_t bw_only = s_claim(NS_DEV_GPU, 1000, 1e30);
    double moved = (3.0 - 0.25) * (double)(UINT64_C(1) << 30);
    CHECK_EQ_INT(
        ns_label_deadline_claim_us(&lp, &bw_only),
        (uint64_t)(NS_CHAL_SLACK * moved / 1e6 + NS_CHAL_ALLOWANCE_US));
    uint64_t m = ns_imatmul_deadline_claim_us(&ip, &gpu);
    CHECK(ns_imatmul_deadline_claim_us(&ip, &gpu2) < m);
    CHECK(ns_imatmul_deadline_claim_us(&ip, &cpu) > m);
    double mac_s =
        1024.0 * 1024 * 1024 * ns_chal_costs(NS_DEV_GPU)->mac / 50000e9;
    double io_s = 12.0 * 1024 * 1024 / 1000e9;
    CHECK_EQ_INT(m, (uint64_t)(NS_CHAL_SLACK * (mac_s + io_s) * 1e6 +
                               NS_CHAL_ALLOWANCE_US));
    /* figures of an unknown type: the lenient CPU costs */
    CHECK_EQ_INT(ns_imatmul_deadline_us(&ip, 1000, 50000),
                 ns_imatmul_deadline_claim_us(&ip, &cpu));
    CHECK_EQ_INT(ns_label_deadline_us(&lp, 1000, 50000),
                 ns_label_deadline_claim_us(&lp, &cpu));
}

/* ---- integer matrix product ---------------------------------------------- */

TEST(imatmul_params)
{
    ns_imatmul_params_t p = {.n = 64, .p = NS_IMATMUL_DEFAULT_P};
    CHECK_RC(ns_imatmul_params_check(&p), NS_OK);
    static const uint32_t primes[] = {3,     5,           7,          11,
                                      65537, 2147483629u, 2147483647u};
    static const uint32_t composites[] = {
        0,           1,           4,
        9,           25,          65535,
        2147483641u, 2147483645u, 25326001u /* 2,3,5-pseudoprime */,
        3215031751u};
    for (size_t i = 0; i < sizeof primes / sizeof primes[0]; i++) {
        p.p = primes[i];
        CHECK_RC(ns_imatmul_params_check(&p), NS_OK);
    }
    for (size_t i = 0; i < sizeof composites / sizeof composites[0]; i++) {
        p.p = composites[i];
        CHECK_RC(ns_imatmul_params_check(&p), NS_ERR_INVAL);
    }
    p.p = 2; /* prime, but below 3 */
    CHECK_RC(ns_imatmul_params_check(&p), NS_ERR_INVAL);
    p.p = NS_IMATMUL_DEFAULT_P;
    p.n = 60;
    CHECK_RC(ns_imatmul_params_check(&p), NS_ERR_INVAL);
    p.n = 0;
    CHECK_RC(ns_imatmul_params_check(&p), NS_ERR_INVAL);
}

/* Freivalds on the host reference: right, one wrong entry, skipped rows,
 * an unreduced entry, late. */
TEST(imatmul_freivalds_host)
{
    ns_imatmul_params_t p = {.n = 48, .p = NS_IMATMUL_DEFAULT_P};
    uint8_t secret[32];
    char why[200];
    ns_chal_verdict v;
    randombytes_buf(p.seed, sizeof p.seed);
    size_t nn = (size_t)p.n * p.n;
    uint32_t *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4);
    ns_imatmul_fill(&p, a, b);
    ns_imatmul_host(&p, a, b, c);
    /* spot values by a direct sum */
    uint64_t acc = 0;
    for (uint32_t k = 0; k < p.n; k++)
        acc = (acc + (uint64_t)a[3 * p.n + k] * b[k * p.n + 5]) % p.p;
    CHECK_EQ_INT(c[3 * p.n + 5], acc);
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 2, 10, 100, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_PASSED);
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 2, 101, 100, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_LATE);

    /* one wrong entry, many secrets, one round each: always caught */
    size_t victim = ns_rand_below((uint32_t)nn);
    c[victim] = (c[victim] + 1) % p.p;
    unsigned caught = 0;
    for (int t = 0; t < 200; t++) {
        randombytes_buf(secret, sizeof secret);
        CHECK_RC(
            ns_imatmul_verify(&p, c, secret, 1, 0, 100, &v, why, sizeof why),
            NS_OK);
        caught += v == NS_CHAL_WRONG;
    }
    CHECK_EQ_INT(caught, 200);
    c[victim] = (c[victim] + p.p - 1) % p.p;

    /* rows skipped (left zero) */
    memset(c + nn / 2, 0, nn / 2 * 4);
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 1, 0, 100, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_WRONG);
    ns_imatmul_host(&p, a, b, c);
    /* the same value, not reduced */
    c[7] += p.p;
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 1, 0, 100, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_WRONG);
    c[7] -= p.p;
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 0, 0, 100, &v, why, sizeof why),
             NS_ERR_INVAL);

    /* Freivalds' bound is tight: with p = 3 a single wrong entry escapes a
     * round exactly when r_j = 0, one time in three */
    ns_imatmul_params_t small = {.n = 16, .p = 3};
    memcpy(small.seed, p.seed, 32);
    size_t sn = 16 * 16;
    ns_imatmul_fill(&small, a, b);
    ns_imatmul_host(&small, a, b, c);
    c[17] = (c[17] + 1) % 3;
    unsigned escaped = 0;
    for (int t = 0; t < 3000; t++) {
        randombytes_buf(secret, sizeof secret);
        CHECK_RC(ns_imatmul_verify(&small, c, secret, 1, 0, 100, &v, why,
                                   sizeof why),
                 NS_OK);
        escaped += v == NS_CHAL_PASSED;
    }
    /* 1000 expected, sd ~ 26 */
    CHECK(escaped > 850 && escaped < 1150);
    (void)sn;
    free(a);
    free(b);
    free(c);
}

TEST(imatmul_device)
{
    ns_imatmul_params_t p = {.n = 256, .p = NS_IMATMUL_DEFAULT_P};
    uint8_t secret[32];
    char why[200], err[400];
    ns_chal_verdict v;
    uint64_t device_us = 0;
    randombytes_buf(p.seed, sizeof p.seed);
    randombytes_buf(secret, sizeof secret);
    size_t nn = (size_t)p.n * p.n;
    uint32_t *a = malloc(nn * 4), *b = malloc(nn * 4), *c = malloc(nn * 4);
    uint32_t *want = malloc(nn * 4);
    if (!CHECK_RC(
            ns_imatmul_prove(s_prover, &p, c, &device_us, err, sizeof err),
            NS_OK))
        fprintf(stderr, "  %s\n", err);
    /* the device's A, B and exact product match the host's */
    ns_imatmul_fill(&p, a, b);
    ns_imatmul_host(&p, a, b, want);
    CHECK_MEM(c, want, nn * 4);

    uint64_t t0 = ns_mono_us();
    ns_devinfo_t slow = s_claim(NS_DEV_CPU, 0.05, 0.5);
    uint64_t dl = ns_imatmul_deadline_claim_us(&p, &slow);
    CHECK_RC(
        ns_imatmul_verify(&p, c, secret, 2, device_us, dl, &v, why, sizeof why),
        NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_PASSED);
    uint64_t verify_us = ns_mono_us() - t0;
    printf("imatmul n = %u: prove %llu us, verify %llu us (2 rounds); "
           "deadline at 0.05 GB/s, 0.5 GFLOPS: %llu us\n",
           p.n, (unsigned long long)device_us, (unsigned long long)verify_us,
           (unsigned long long)dl);
    ns_devinfo_t fast = s_claim(NS_DEV_GPU, 1e6, 1e9);
    uint64_t tight = ns_imatmul_deadline_claim_us(&p, &fast);
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 2, tight + 1, tight, &v, why,
                               sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_LATE);

    /* a prover that computed only the first 3/4 of the product */
    memset(c + nn * 3 / 4, 0, nn / 4 * 4);
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 1, 0, dl, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_WRONG);
    /* a matrix made for another seed */
    memcpy(c, want, nn * 4);
    p.seed[0] ^= 1;
    CHECK_RC(ns_imatmul_verify(&p, c, secret, 1, 0, dl, &v, why, sizeof why),
             NS_OK);
    CHECK_EQ_INT(v, NS_CHAL_WRONG);
    p.seed[0] ^= 1;
    /* an order that is not a multiple of 256 (narrower work-groups) */
    ns_imatmul_params_t odd = {.n = 48, .p = 65537};
    memcpy(odd.seed, p.seed, 32);
    CHECK_RC(ns_imatmul_prove(s_prover, &odd, c, NULL, err, sizeof err), NS_OK);
    ns_imatmul_fill(&odd, a, b);
    ns_imatmul_host(&odd, a, b, want);
    CHECK_MEM(c, want, 48 * 48 * 4);
    /* parameters the prover must refuse */
    p.n = 250;
    CHECK_RC(ns_imatmul_prove(s_prover, &p, c, NULL, err, sizeof err),
             NS_ERR_INVAL);
    free(a);
    free(b);
    free(c);
    free(want);
}

/* The challenge kernels are built-ins like any other: challenge_imatmul
 * runs as an ordinary job (an item is a 16-entry row segment) and passes
 * a spot check, re-run item by item at a global offset. */
TEST(builtins_as_jobs)
{
    const ns_builtin_t *lb = ns_builtin_find("challenge_label");
    const ns_builtin_t *mb = ns_builtin_find("challenge_imatmul");
    if (!CHECK(lb && mb))
        return;
    CHECK_STR(lb->entry, "challenge_label");
    CHECK_STR(mb->entry, "challenge_imatmul");
    CHECK(lb->summary[0] != '\0' && mb->summary[0] != '\0');

    enum { N = 64 };
    ns_imatmul_params_t p = {.n = N, .p = NS_IMATMUL_DEFAULT_P};
    randombytes_buf(p.seed, sizeof p.seed);
    static uint32_t a[N * N], b[N * N], c[N * N], want[N * N];
    ns_imatmul_fill(&p, a, b);
    ns_imatmul_host(&p, a, b, want);
    ns_job_t job;
    char err[400];
    ns_job_init(&job);
    snprintf(job.builtin, sizeof job.builtin, "challenge_imatmul");
    ns_hash(job.source_hash, mb->source, mb->source_len);
    snprintf(job.entry, sizeof job.entry, "%s", mb->entry);
    job.dims = 2;
    job.global[0] = N / 16;
    job.global[1] = N;
    job.n_args = 5;
    job.args[0] = (ns_arg_t){.kind = NS_ARG_IN, .size = sizeof a};
    ns_hash(job.args[0].hash, a, sizeof a);
    job.args[1] = (ns_arg_t){.kind = NS_ARG_IN, .size = sizeof b};
    ns_hash(job.args[1].hash, b, sizeof b);
    job.args[2] =
        (ns_arg_t){.kind = NS_ARG_OUT, .size = sizeof c, .item_bytes = 64};
    job.args[3] = (ns_arg_t){.kind = NS_ARG_U32, .v.u32 = N};
    job.args[4] = (ns_arg_t){.kind = NS_ARG_U32, .v.u32 = p.p};
    if (!CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK)) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    int rc = 0;
    ns_runner_t *r = ns_runner_new(0, NULL, &rc);
    if (!CHECK(r != NULL))
        return;
    ns_input_t in[NS_MAX_ARGS] = {{.data = a, .len = sizeof a},
                                  {.data = b, .len = sizeof b}};
    uint8_t *outs[NS_MAX_ARGS] = {0};
    outs[2] = (uint8_t *)c;
    ns_hash_t id, root;
    uint8_t secret[32] = {3};
    ns_check_result_t res;
    CHECK_RC(ns_runner_run(r, &job, in, outs, NULL, err, sizeof err), NS_OK);
    CHECK_MEM(c, want, sizeof c);
    CHECK_RC(ns_job_id(&job, id), NS_OK);
    CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
    CHECK_RC(ns_spot_check(r, &job, id, in, outs, root, secret, 32, &res, err,
                           sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 32);
    CHECK_EQ_INT(res.mismatched, 0);
    c[N * 7 + 33] ^= 1; /* one entry of item 7 * 4 + 2 */
    CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
    CHECK_RC(ns_spot_check(r, &job, id, in, outs, root, secret, N * N / 16,
                           &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, 7 * 4 + 2);
    ns_runner_destroy(&r);
    ns_job_release(&job);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(label_params);
    RUN(label_rule);
    RUN(label_host_honest_and_forged);
    RUN(label_host_skipped_work);
    RUN(label_host_half_buffer);
    RUN(deadlines);
    RUN(imatmul_params);
    RUN(imatmul_freivalds_host);

    int err = 0;
    char errbuf[400];
    s_prover = ns_chal_prover_new(0, &err, errbuf, sizeof errbuf);
    if (!s_prover && getenv("NS_TEST_ALLOW_NO_DEVICES")) {
        printf("no OpenCL device: device tests skipped (%s)\n", errbuf);
    } else if (CHECK(s_prover != NULL)) {
        RUN(label_device);
        RUN(imatmul_device);
        RUN(builtins_as_jobs);
        ns_chal_prover_destroy(&s_prover);
        ns_chal_prover_destroy(&s_prover); /* idempotent */
    } else {
        fprintf(stderr, "prover: %s (%s)\n", errbuf, ns_strerror(err));
    }
    return ns_test_finish("exec_challenge");
}
