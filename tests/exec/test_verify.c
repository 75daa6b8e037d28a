/* test_verify.c - output commitments, challenge draws, tolerance
 * comparisons, spot checks and fraud proofs, on real OpenCL (PoCL).
 *
 * The spot-check and fraud tests run the built-in vector_add through the
 * in-process runner: the provider's honest outputs come from
 * ns_runner_run, a cheating provider corrupts some of them afterwards.
 */
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"

#include "check.h"

#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

/* Without libm (the test links none): the next float toward +infinity,
 * for finite x, and an absolute value. */
static float s_up(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if (x == 0.0f)
        u = 1;
    else if (x > 0)
        u++;
    else
        u--;
    memcpy(&x, &u, 4);
    return x;
}

static double s_abs(double x)
{
    return x < 0 ? -x : x;
}

/* A job with one OUT argument of item_bytes per item (and optionally a
 * second one), n items: enough for the commitment code, never run. */
static void s_fake_job(ns_job_t *job, uint64_t n, uint32_t item_bytes,
                       uint32_t second_bytes)
{
    ns_job_init(job);
    snprintf(job->builtin, sizeof job->builtin, "vector_add");
    memset(job->source_hash, 0x5a, NS_HASH_BYTES);
    snprintf(job->entry, sizeof job->entry, "vector_add");
    job->dims = 1;
    job->global[0] = n;
    job->n_args = 0;
    job->args[job->n_args].kind = NS_ARG_U32;
    job->args[job->n_args++].v.u32 = 7;
    job->args[job->n_args].kind = NS_ARG_OUT;
    job->args[job->n_args].item_bytes = item_bytes;
    job->args[job->n_args++].size = n * item_bytes;
    if (second_bytes) {
        job->args[job->n_args].kind = NS_ARG_OUT;
        job->args[job->n_args].item_bytes = second_bytes;
        job->args[job->n_args++].size = n * second_bytes;
    }
}

static void s_random_outputs(const ns_job_t *job, uint8_t **outs)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        outs[i] = NULL;
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        outs[i] = malloc(job->args[i].size);
        randombytes_buf(outs[i], job->args[i].size);
    }
}

static void s_free_outputs(const ns_job_t *job, uint8_t **outs)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        free(outs[i]);
        outs[i] = NULL;
    }
}

/* The leaves by the formula, written out: 16 KiB chunks of every OUT
 * argument in argument order. *n gets their count. */
static ns_hash_t *s_leaves(const ns_job_t *job, const ns_hash_t id,
                           uint8_t **outs, uint64_t *n)
{
    uint64_t count = 0;
    for (uint32_t a = 0; a < job->n_args; a++)
        if (job->args[a].kind == NS_ARG_OUT)
            count += (job->args[a].size + 16383) / 16384;
    ns_hash_t *leaves = malloc(count * sizeof *leaves);
    uint64_t k = 0;
    for (uint32_t a = 0; a < job->n_args; a++) {
        if (job->args[a].kind != NS_ARG_OUT)
            continue;
        for (uint64_t off = 0, c = 0; off < job->args[a].size;
             off += 16384, c++) {
            uint64_t len = job->args[a].size - off;
            if (len > 16384)
                len = 16384;
            crypto_generichash_state st;
            uint8_t pre[1 + 19 + 32 + 4 + 8];
            pre[0] = 0;
            memcpy(pre + 1, "nightshift/chunk/v2", 19);
            memcpy(pre + 20, id, 32);
            for (int b = 0; b < 4; b++)
                pre[52 + b] = (uint8_t)(a >> (24 - 8 * b));
            for (int b = 0; b < 8; b++)
                pre[56 + b] = (uint8_t)(c >> (56 - 8 * b));
            crypto_generichash_init(&st, NULL, 0, 32);
            crypto_generichash_update(&st, pre, sizeof pre);
            crypto_generichash_update(&st, outs[a] + off, len);
            crypto_generichash_final(&st, leaves[k++], 32);
        }
    }
    *n = count;
    return leaves;
}

/* ---- commitments -------------------------------------------------------- */

TEST(leaf_formula)
{
    ns_hash_t id, a, b;
    uint8_t big[300];
    randombytes_buf(id, sizeof id);
    randombytes_buf(big, sizeof big);
    for (size_t len = 0; len <= sizeof big; len += 23) {
        ns_chunk_leaf(a, id, 0x01020304u, 0x0102030405060708ull, big, len);
        crypto_generichash_state st;
        uint8_t pre[64];
        pre[0] = 0;
        memcpy(pre + 1, NS_CHUNK_TAG, 19);
        memcpy(pre + 20, id, 32);
        for (int i = 0; i < 4; i++)
            pre[52 + i] = (uint8_t)(i + 1);
        for (int i = 0; i < 8; i++)
            pre[56 + i] = (uint8_t)(i + 1);
        crypto_generichash_init(&st, NULL, 0, 32);
        crypto_generichash_update(&st, pre, sizeof pre);
        crypto_generichash_update(&st, big, len);
        crypto_generichash_final(&st, b, 32);
        CHECK_MEM(a, b, NS_HASH_BYTES);
    }
    /* argument, chunk index and job id are bound */
    ns_chunk_leaf(a, id, 1, 1, big, 4);
    ns_chunk_leaf(b, id, 1, 2, big, 4);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    ns_chunk_leaf(b, id, 2, 1, big, 4);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    id[0] ^= 1;
    ns_chunk_leaf(b, id, 1, 1, big, 4);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
}

/* Root, tree and paths against hash.h built from the formula's leaves,
 * for sizes around the block boundaries and the parallel threshold. */
TEST(commit_matches_merkle)
{
    /* n units of ib bytes (and a second output of ib2 bytes each): chunk
     * boundaries (1 byte, 16 KiB, 16 KiB + 1, several outputs) and the
     * threads (64 chunks and more) */
    static const struct {
        uint64_t n;
        uint32_t ib, ib2;
    } cases[] = {{1, 1, 0},      {1, 4, 0},         {16384, 1, 0},
                 {16385, 1, 0},  {4096, 4, 0},      {4097, 4, 0},
                 {4096, 8, 1},   {16383, 1, 16385}, {7, 4, 12},
                 {3, 16384, 1},  {65536, 16, 0},    {65537, 16, 3},
                 {131073, 4, 4}, {1 << 20, 4, 0}};
    ns_hash_t id;
    randombytes_buf(id, sizeof id);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ns_job_t job;
        uint8_t *outs[NS_MAX_ARGS] = {0};
        s_fake_job(&job, cases[c].n, cases[c].ib, cases[c].ib2);
        s_random_outputs(&job, outs);
        uint64_t nl = 0;
        ns_hash_t *leaves = s_leaves(&job, id, outs, &nl);
        ns_merkle_t want, got;
        ns_hash_t root, want_root;
        CHECK_EQ_INT(ns_commit_leaves(&job), nl);
        if (!CHECK_RC(ns_merkle_build(&want, (const ns_hash_t *)leaves, nl),
                      NS_OK))
            return;
        ns_merkle_root(&want, want_root);

        CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
        if (!CHECK_MEM(root, want_root, NS_HASH_BYTES))
            fprintf(stderr, "  case %zu\n", c);

        if (CHECK_RC(ns_commit_outputs(&job, id, outs, &got), NS_OK)) {
            CHECK_EQ_INT(got.n_leaves, want.n_leaves);
            CHECK_EQ_INT(got.n_levels, want.n_levels);
            CHECK_MEM(got.level_off, want.level_off,
                      want.n_levels * sizeof *want.level_off);
            size_t total = want.level_off[want.n_levels - 1] + 1;
            CHECK_MEM(got.nodes, want.nodes, total * NS_HASH_BYTES);
            ns_merkle_release(&got);
        }

        /* paths without a tree, at the ends and in between */
        uint64_t picks[] = {0, nl - 1, nl / 2, nl / 3};
        for (size_t k = 0; k < 4; k++) {
            ns_hash_t path[NS_MERKLE_MAX_DEPTH], wpath[NS_MERKLE_MAX_DEPTH];
            size_t depth = 99, wdepth = 0;
            CHECK_RC(ns_commit_path(&job, id, outs, picks[k], path, &depth),
                     NS_OK);
            CHECK_RC(ns_merkle_proof(&want, picks[k], wpath, &wdepth), NS_OK);
            CHECK_EQ_INT(depth, wdepth);
            CHECK_MEM(path, wpath, wdepth * NS_HASH_BYTES);
            CHECK_RC(ns_merkle_verify(root, leaves[picks[k]], picks[k], nl,
                                      path, depth),
                     NS_OK);
        }
        ns_hash_t path[NS_MERKLE_MAX_DEPTH];
        size_t depth;
        CHECK_RC(ns_commit_path(&job, id, outs, nl, path, &depth),
                 NS_ERR_INVAL);
        /* the leaf of the last byte of each output */
        uint64_t leaf = 0, first = 0;
        for (uint32_t a = 0; a < job.n_args; a++) {
            if (job.args[a].kind != NS_ARG_OUT)
                continue;
            CHECK_RC(ns_commit_leaf_index(&job, a, job.args[a].size - 1, &leaf),
                     NS_OK);
            first += (job.args[a].size + 16383) / 16384;
            CHECK_EQ_INT(leaf, first - 1);
            CHECK_RC(ns_commit_leaf_index(&job, a, job.args[a].size, &leaf),
                     NS_ERR_INVAL);
        }
        CHECK_RC(ns_commit_leaf_index(&job, 0, 0, &leaf), NS_ERR_INVAL);
        ns_merkle_release(&want);
        free(leaves);
        s_free_outputs(&job, outs);
    }
}

TEST(commit_binds_bytes)
{
    ns_job_t job;
    uint8_t *outs[NS_MAX_ARGS] = {0};
    ns_hash_t id, a, b;
    randombytes_buf(id, sizeof id);
    s_fake_job(&job, 1000, 4, 0);
    s_random_outputs(&job, outs);
    CHECK_RC(ns_commit_root(&job, id, outs, a), NS_OK);
    outs[1][4 * 777 + 2] ^= 0x10;
    CHECK_RC(ns_commit_root(&job, id, outs, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    outs[1][4 * 777 + 2] ^= 0x10;
    id[5] ^= 1; /* another job, same bytes */
    CHECK_RC(ns_commit_root(&job, id, outs, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    s_free_outputs(&job, outs);

    ns_job_t none;
    ns_job_init(&none);
    CHECK_RC(ns_commit_root(&none, id, outs, a), NS_ERR_INVAL);
}

TEST(result_statement)
{
    ns_identity_t *prov = ns_identity_generate();
    ns_identity_t *other = ns_identity_generate();
    if (!CHECK(prov && other))
        return;
    ns_hash_t id, root;
    uint8_t sig[NS_SIG_BYTES];
    randombytes_buf(id, sizeof id);
    randombytes_buf(root, sizeof root);
    ns_result_sign(prov, id, root, 1234, sig);
    const uint8_t *pk = ns_identity_pk(prov);
    CHECK_RC(ns_result_verify(pk, id, root, 1234, sig), NS_OK);
    CHECK_RC(ns_result_verify(pk, id, root, 1235, sig), NS_ERR_SIG);
    CHECK_RC(ns_result_verify(ns_identity_pk(other), id, root, 1234, sig),
             NS_ERR_SIG);
    root[0] ^= 1;
    CHECK_RC(ns_result_verify(pk, id, root, 1234, sig), NS_ERR_SIG);
    root[0] ^= 1;
    id[31] ^= 1;
    CHECK_RC(ns_result_verify(pk, id, root, 1234, sig), NS_ERR_SIG);
    id[31] ^= 1;
    sig[10] ^= 1;
    CHECK_RC(ns_result_verify(pk, id, root, 1234, sig), NS_ERR_SIG);
    ns_identity_destroy(&prov);
    ns_identity_destroy(&other);
}

/* ---- challenge draw ----------------------------------------------------- */

TEST(draw_shape)
{
    ns_hash_t root;
    uint8_t secret[32];
    uint64_t a[NS_MAX_CHECKS], b[NS_MAX_CHECKS];
    randombytes_buf(root, sizeof root);
    randombytes_buf(secret, sizeof secret);
    static const uint64_t ns[] = {1,  2,    3,          64,
                                  65, 1000, 1ull << 40, UINT64_MAX};
    static const uint32_t ks[] = {0, 1, 2, 63, 64, 500, NS_MAX_CHECKS};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
            uint64_t n = ns[i];
            uint32_t k = ks[j];
            uint64_t m = k < n ? k : n;
            ns_challenge_draw(root, secret, n, k, a);
            ns_challenge_draw(root, secret, n, k, b);
            CHECK_MEM(a, b, m * sizeof *a); /* deterministic */
            int ok = 1;
            for (uint64_t x = 0; x < m; x++) {
                if (a[x] >= n || (x > 0 && a[x] <= a[x - 1]))
                    ok = 0; /* in range, sorted, distinct */
                if (k >= n && a[x] != x)
                    ok = 0; /* all items */
            }
            CHECK(ok);
        }
    /* another secret or another root: another draw */
    ns_challenge_draw(root, secret, 1ull << 40, 64, a);
    secret[0] ^= 1;
    ns_challenge_draw(root, secret, 1ull << 40, 64, b);
    CHECK(memcmp(a, b, 64 * sizeof *a) != 0);
    secret[0] ^= 1;
    root[0] ^= 1;
    ns_challenge_draw(root, secret, 1ull << 40, 64, b);
    CHECK(memcmp(a, b, 64 * sizeof *a) != 0);
}

/* Uniform: every index equally likely, and the chance that a draw misses
 * a set of m bad items is the hypergeometric C(n - m, k) / C(n, k). */
TEST(draw_uniform)
{
    enum { N = 20, K = 5, TRIALS = 20000 };
    unsigned count[N] = {0};
    ns_hash_t root;
    uint8_t secret[32];
    uint64_t pick[K];
    randombytes_buf(root, sizeof root);
    for (unsigned t = 0; t < TRIALS; t++) {
        randombytes_buf(secret, sizeof secret);
        ns_challenge_draw(root, secret, N, K, pick);
        for (unsigned i = 0; i < K; i++)
            count[pick[i]]++;
    }
    /* expected TRIALS * K / N = 5000 each, sd ~ 61: allow 6 sd */
    double chi2 = 0;
    for (unsigned i = 0; i < N; i++) {
        double e = (double)TRIALS * K / N;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        CHECK((count[i] - e) * (count[i] - e) < 36 * e);
    }
    CHECK(chi2 < 60); /* 19 degrees of freedom: p < 1e-5 */

    /* detection of 10% bad items at k = 16 over many secrets */
    enum { N2 = 4096, BAD = 410, K2 = 16, T2 = 4000 };
    static uint8_t bad[N2];
    uint64_t pick2[K2];
    uint64_t placed = 0;
    memset(bad, 0, sizeof bad);
    while (placed < BAD) {
        uint32_t i = ns_rand_below(N2);
        if (!bad[i]) {
            bad[i] = 1;
            placed++;
        }
    }
    unsigned caught = 0;
    for (unsigned t = 0; t < T2; t++) {
        randombytes_buf(secret, sizeof secret);
        ns_challenge_draw(root, secret, N2, K2, pick2);
        int hit = 0;
        for (unsigned i = 0; i < K2; i++)
            hit |= bad[pick2[i]];
        caught += (unsigned)hit;
    }
    double miss = 1;
    for (unsigned i = 0; i < K2; i++)
        miss *= (double)(N2 - BAD - i) / (N2 - i);
    double want = (1 - miss) * T2, var = T2 * miss * (1 - miss);
    if (!CHECK((caught - want) * (caught - want) < 25 * var))
        fprintf(stderr, "  caught %u of %u, expected %.1f\n", caught, T2, want);
}

/* ---- comparisons -------------------------------------------------------- */

static int s_cmp(uint8_t det, double tol, float a, float b)
{
    ns_job_t job;
    ns_job_init(&job);
    job.det = det;
    job.tol = tol;
    uint8_t x[4], y[4];
    memcpy(x, &a, 4);
    memcpy(y, &b, 4);
    return ns_item_matches(&job, x, y, 4);
}

static float s_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TEST(tolerance_edges)
{
    float one = 1.0f, next = s_up(1.0f);
    float n3 = s_up(s_up(next)); /* 3 ulp above */
    float nan1 = s_bits(0x7fc00000u), nan2 = s_bits(0xffc00001u);
    float inf = INFINITY, big = FLT_MAX;
    float den = s_bits(1), mden = s_bits(0x80000001u);

    /* EXACT: bytes */
    CHECK(s_cmp(NS_DET_EXACT, 0, one, one));
    CHECK(!s_cmp(NS_DET_EXACT, 0, one, next));
    CHECK(!s_cmp(NS_DET_EXACT, 0, 0.0f, -0.0f));
    CHECK(!s_cmp(NS_DET_EXACT, 0, nan1, nan2));

    /* ULP: N matches, N + 1 does not */
    CHECK(s_cmp(NS_DET_ULP, 3, one, n3));
    CHECK(s_cmp(NS_DET_ULP, 3, n3, one));
    CHECK(!s_cmp(NS_DET_ULP, 2, one, n3));
    CHECK(s_cmp(NS_DET_ULP, 1, one, next));
    CHECK(!s_cmp(NS_DET_ULP, 1, one, s_up(next)));
    /* across zero: the smallest subnormals are 2 apart; 0 and -0 are 0 */
    CHECK(s_cmp(NS_DET_ULP, 2, den, mden));
    CHECK(!s_cmp(NS_DET_ULP, 1, den, mden));
    CHECK(s_cmp(NS_DET_ULP, 1, den, -0.0f));
    CHECK(s_cmp(NS_DET_ULP, 1, 0.0f, -0.0f));
    CHECK(s_cmp(NS_DET_ULP, 1, -0.0f, 0.0f));
    CHECK(!s_cmp(NS_DET_ULP, 1, -1.0f, 1.0f));
    /* the largest finite float is 1 ulp from infinity, and still apart */
    CHECK(!s_cmp(NS_DET_ULP, 4, big, inf));
    CHECK(s_cmp(NS_DET_ULP, 1, inf, inf));
    CHECK(!s_cmp(NS_DET_ULP, 1e6, inf, -inf));
    /* NaN matches NaN only */
    CHECK(s_cmp(NS_DET_ULP, 1, nan1, nan2));
    CHECK(!s_cmp(NS_DET_ULP, 1e6, nan1, one));
    CHECK(!s_cmp(NS_DET_ULP, 1e6, inf, nan1));

    /* ABS: |a - b| <= tol, both sides of the boundary */
    CHECK(s_cmp(NS_DET_ABS, 0.5, 1.0f, 1.5f));
    CHECK(s_cmp(NS_DET_ABS, 0.5, 1.5f, 1.0f));
    CHECK(!s_cmp(NS_DET_ABS, 0.4999999, 1.0f, 1.5f));
    CHECK(s_cmp(NS_DET_ABS, 0.25, -0.125f, 0.125f));
    CHECK(!s_cmp(NS_DET_ABS, 0.2499, -0.125f, 0.125f));
    CHECK(s_cmp(NS_DET_ABS, 1e-30, 0.0f, -0.0f));
    CHECK(!s_cmp(NS_DET_ABS, 1e30, big, inf));
    CHECK(s_cmp(NS_DET_ABS, 1e-3, -inf, -inf));
    CHECK(!s_cmp(NS_DET_ABS, 1e30, inf, -inf));
    CHECK(s_cmp(NS_DET_ABS, 1e-3, nan1, nan2));
    CHECK(!s_cmp(NS_DET_ABS, 1e30, nan1, 0.0f));

    /* REL: |a - b| <= tol * max(|a|, |b|) */
    CHECK(s_cmp(NS_DET_REL, 0.25, 4.0f, 3.0f)); /* 1 <= 0.25 * 4 */
    CHECK(!s_cmp(NS_DET_REL, 0.2499, 4.0f, 3.0f));
    CHECK(s_cmp(NS_DET_REL, 0.5, -2.0f, -1.0f)); /* 1 <= 0.5 * 2 */
    CHECK(!s_cmp(NS_DET_REL, 0.4999, -2.0f, -1.0f));
    CHECK(s_cmp(NS_DET_REL, 1e-6, 0.0f, -0.0f)); /* 0 <= 0 */
    CHECK(!s_cmp(NS_DET_REL, 0.5, 0.0f, den));   /* tol < 1: never */
    CHECK(!s_cmp(NS_DET_REL, 0.9, inf, big));    /* inf <= 0.9 * inf? no */
    CHECK(s_cmp(NS_DET_REL, 0.1, inf, inf));
    CHECK(!s_cmp(NS_DET_REL, 0.9, 1.0f, nan1));
    CHECK(s_cmp(NS_DET_REL, 0.1, nan2, nan1));

    /* whole items: every value must match; a multi-value item */
    ns_job_t job;
    ns_job_init(&job);
    job.det = NS_DET_ULP;
    job.tol = 1;
    float xa[3] = {1.0f, 2.0f, 3.0f}, xb[3] = {1.0f, 2.0f, 3.0f};
    CHECK(ns_item_matches(&job, (uint8_t *)xa, (uint8_t *)xb, sizeof xa));
    xb[2] = s_up(3.0f);
    CHECK(ns_item_matches(&job, (uint8_t *)xa, (uint8_t *)xb, sizeof xa));
    xb[2] = s_up(xb[2]);
    CHECK(!ns_item_matches(&job, (uint8_t *)xa, (uint8_t *)xb, sizeof xa));
}

/* ---- fraud proof codec (no OpenCL) ------------------------------------- */

static int s_pack_read(const ns_fraud_proof_t *in, ns_fraud_proof_t *out,
                       char *err, size_t errlen)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_fraud_pack(&pk, in);
    ns_mpr_t r;
    ns_mpr_init(&r, sb.data, sb.size);
    int rc = ns_fraud_read(&r, out, err, errlen);
    if (rc == NS_OK)
        rc = ns_mpr_end(&r);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

TEST(fraud_codec)
{
    ns_job_t job;
    uint8_t *outs[NS_MAX_ARGS] = {0};
    ns_hash_t id;
    ns_merkle_t tree;
    ns_fraud_proof_t p, q;
    uint8_t prov[NS_ID_BYTES], sig[NS_SIG_BYTES];
    char err[256];
    s_fake_job(&job, 300, 4, 8);
    s_random_outputs(&job, outs);
    randombytes_buf(prov, sizeof prov);
    randombytes_buf(sig, sizeof sig);
    if (!CHECK_RC(ns_job_id(&job, id), NS_OK))
        return;
    if (!CHECK_RC(ns_commit_outputs(&job, id, outs, &tree), NS_OK))
        return;
    /* arg 2 (the second output) is 300 x 8 bytes: one chunk of 2400 */
    CHECK_RC(ns_fraud_build(&p, &job, id, prov, sig, &tree, outs, 123, 2, 1001),
             NS_OK);
    CHECK_EQ_INT(p.chunk_len, 2400);
    CHECK_EQ_INT(p.n_units, 300);
    CHECK_MEM(p.chunk, outs[2], 2400);
    /* the same proof without a tree */
    CHECK_RC(ns_fraud_build(&q, &job, id, prov, sig, NULL, outs, 123, 2, 1001),
             NS_OK);
    CHECK_MEM(q.root, p.root, NS_HASH_BYTES);
    CHECK_EQ_INT(q.depth, p.depth);
    CHECK_MEM(q.path, p.path, p.depth * NS_HASH_BYTES);
    ns_fraud_release(&q);

    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_OK);
    CHECK_MEM(q.job_id, p.job_id, NS_HASH_BYTES);
    CHECK_MEM(q.provider, p.provider, NS_ID_BYTES);
    CHECK_MEM(q.root, p.root, NS_HASH_BYTES);
    CHECK_MEM(q.sig, p.sig, NS_SIG_BYTES);
    CHECK_EQ_INT(q.unit, 123);
    CHECK_EQ_INT(q.arg, 2);
    CHECK_EQ_INT(q.pos, 1001);
    CHECK_EQ_INT(q.n_units, 300);
    CHECK_EQ_INT(q.chunk_len, 2400);
    CHECK_MEM(q.chunk, p.chunk, 2400);
    CHECK_EQ_INT(q.depth, p.depth);
    CHECK_MEM(q.path, p.path, p.depth * NS_HASH_BYTES);
    ns_fraud_release(&q);

    /* shapes that do not fit the descriptor are rejected on read */
    p.unit = 300;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.unit = 123;
    p.n_units = 301;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.n_units = 300;
    p.chunk_len = 2399;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.chunk_len = 2400;
    p.arg = 0; /* a scalar, not an output */
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.arg = 1; /* the first output: 1200 bytes */
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.arg = 2;
    p.pos = 2400;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.pos = 1001;
    p.depth--;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_ERR_INVAL);
    p.depth++;
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_OK);
    ns_fraud_release(&q);

    /* truncations and a trailing byte */
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_fraud_pack(&pk, &p);
    int all_bad = 1;
    for (size_t cut = 0; cut < sb.size; cut += 1 + cut / 16) {
        ns_mpr_t r;
        ns_mpr_init(&r, sb.data, cut);
        if (ns_fraud_read(&r, &q, err, sizeof err) == NS_OK)
            all_bad = 0;
        if (q.chunk || q.job.source)
            all_bad = 0; /* released on failure */
    }
    CHECK(all_bad);
    /* a version we do not know */
    ((uint8_t *)sb.data)[1] = 1; /* the per-item proofs of v1 */
    ns_mpr_t r;
    ns_mpr_init(&r, sb.data, sb.size);
    CHECK_RC(ns_fraud_read(&r, &q, err, sizeof err), NS_ERR_VERSION);
    msgpack_sbuffer_destroy(&sb);

    /* a job id that is not the descriptor's is refused by build */
    id[0] ^= 1;
    CHECK_RC(ns_fraud_build(&q, &job, id, prov, sig, &tree, outs, 1, 2, 0),
             NS_ERR_INVAL);
    id[0] ^= 1;
    CHECK_RC(ns_fraud_build(&q, &job, id, prov, sig, &tree, outs, 300, 2, 0),
             NS_ERR_INVAL);
    CHECK_RC(ns_fraud_build(&q, &job, id, prov, sig, &tree, outs, 1, 2, 2400),
             NS_ERR_INVAL);
    CHECK_RC(ns_fraud_build(&q, &job, id, prov, sig, &tree, outs, 1, 0, 0),
             NS_ERR_INVAL);
    ns_fraud_release(&q);
    ns_fraud_release(&p);
    ns_fraud_release(&p); /* idempotent */
    ns_merkle_release(&tree);
    s_free_outputs(&job, outs);
}

/* ---- with OpenCL: spot checks and fraud proofs -------------------------- */

static ns_runner_t *s_runner;

typedef struct {
    ns_job_t job;
    ns_hash_t id;
    float *a, *b;
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS];
} s_vadd_t;

/* vector_add over n floats, run honestly on the runner. */
static int s_vadd_setup(s_vadd_t *v, uint32_t n, uint8_t det, double tol)
{
    char err[256];
    memset(v, 0, sizeof *v);
    const ns_builtin_t *b = ns_builtin_find("vector_add");
    if (!b)
        return NS_ERR_NOTFOUND;
    ns_job_t *j = &v->job;
    ns_job_init(j);
    snprintf(j->builtin, sizeof j->builtin, "vector_add");
    ns_hash(j->source_hash, b->source, b->source_len);
    snprintf(j->entry, sizeof j->entry, "%s", b->entry);
    j->dims = 1;
    j->global[0] = n;
    j->det = det;
    j->tol = tol;
    v->a = malloc(n * sizeof(float));
    v->b = malloc(n * sizeof(float));
    for (uint32_t i = 0; i < n; i++) {
        v->a[i] = (float)i * 0.37f - 11.0f;
        v->b[i] = 1.0f / (float)(i + 1);
    }
    j->n_args = 4;
    j->args[0].kind = NS_ARG_IN;
    j->args[0].size = n * sizeof(float);
    ns_hash(j->args[0].hash, v->a, n * sizeof(float));
    j->args[1].kind = NS_ARG_IN;
    j->args[1].size = n * sizeof(float);
    ns_hash(j->args[1].hash, v->b, n * sizeof(float));
    j->args[2].kind = NS_ARG_OUT;
    j->args[2].size = n * sizeof(float);
    j->args[3].kind = NS_ARG_U32;
    j->args[3].v.u32 = n;
    int rc = ns_job_validate(j, err, sizeof err);
    if (rc != NS_OK) {
        fprintf(stderr, "vadd job: %s\n", err);
        return rc;
    }
    rc = ns_job_id(j, v->id);
    if (rc != NS_OK)
        return rc;
    v->in[0] = (ns_input_t){.data = v->a, .len = n * sizeof(float)};
    v->in[1] = (ns_input_t){.data = v->b, .len = n * sizeof(float)};
    v->outs[2] = malloc(n * sizeof(float));
    ns_timings_t t;
    rc = ns_runner_run(s_runner, j, v->in, v->outs, &t, err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "vadd run: %s\n", err);
    return rc;
}

static void s_vadd_free(s_vadd_t *v)
{
    free(v->a);
    free(v->b);
    free(v->outs[2]);
    ns_job_release(&v->job);
    memset(v, 0, sizeof *v);
}

static float *s_out(s_vadd_t *v)
{
    return (float *)v->outs[2];
}

TEST(spot_check_honest)
{
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32];
    ns_check_result_t res;
    char err[256];
    if (!CHECK_RC(s_vadd_setup(&v, 10000, NS_DET_EXACT, 0), NS_OK))
        return;
    /* the kernel really computed a + b */
    CHECK(s_out(&v)[9999] == v.a[9999] + v.b[9999]);
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           64, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 64);
    CHECK_EQ_INT(res.mismatched, 0);
    CHECK(res.verify_us >= res.commit_us + res.rerun_us);
    /* k = 0 checks nothing but still the root */
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           0, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 0);
    s_vadd_free(&v);
}

TEST(spot_check_root_mismatch)
{
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32] = {1};
    ns_check_result_t res;
    char err[256];
    if (!CHECK_RC(s_vadd_setup(&v, 5000, NS_DET_EXACT, 0), NS_OK))
        return;
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    /* the outputs sent are not the ones committed */
    s_out(&v)[4321] += 1.0f;
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           64, &res, err, sizeof err),
             NS_ERR_PROOF);
    CHECK_CONTAINS(err, "root");
    CHECK_EQ_INT(res.checked, 0);
    s_vadd_free(&v);
}

/* A provider that fakes 10% of the items and commits to its fake output:
 * the root matches, the draw finds it with probability ~ 1 - 0.9^k. */
TEST(spot_check_catches_ten_percent)
{
    enum { N = 4096, TRIALS = 60 };
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32];
    ns_check_result_t res;
    char err[256];
    if (!CHECK_RC(s_vadd_setup(&v, N, NS_DET_EXACT, 0), NS_OK))
        return;
    uint32_t bad = 0;
    for (uint32_t i = 0; i < N; i++)
        if (ns_rand_below(10) == 0) {
            s_out(&v)[i] = 0.0f; /* skipped: whatever was in memory */
            bad++;
        }
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    unsigned caught = 0, mism = 0;
    for (unsigned t = 0; t < TRIALS; t++) {
        randombytes_buf(secret, sizeof secret);
        if (!CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root,
                                    secret, 64, &res, err, sizeof err),
                      NS_OK))
            break;
        caught += res.mismatched > 0;
        mism += res.mismatched;
        if (res.mismatched) {
            CHECK(s_out(&v)[res.first_bad] == 0.0f);
            CHECK_EQ_INT(res.bad_arg, 2);
            CHECK_EQ_INT(res.bad_pos / 4, res.first_bad);
        }
    }
    /* miss chance per trial ~ 0.9^64 = 0.0012: expect 60 of 60, allow 58 */
    CHECK(caught >= TRIALS - 2);
    /* about 6.4 bad items among 64 checks */
    double mean = (double)mism / TRIALS, want = 64.0 * bad / N;
    CHECK(s_abs(mean - want) < 2.0);
    printf("10%% faked (%u of %u items), k = 64: caught %u of %u, "
           "%.2f bad per check (expected %.2f)\n",
           bad, N, caught, TRIALS, mean, want);
    s_vadd_free(&v);
}

/* Outputs in a file (the requester's fetch): the check re-runs on a
 * private mapping of it and drops the mappings window by window; the
 * verdicts are those of ns_spot_check, the file is left as it was, and the
 * claim's mapping still reads the claim. 12 MiB: three drop windows. */
TEST(spot_check_files)
{
    enum { N = 3 << 20 };
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32];
    ns_check_result_t res;
    char err[256], path[256];
    if (!CHECK_RC(s_vadd_setup(&v, N, NS_DET_EXACT, 0), NS_OK))
        return;
    size_t size = (size_t)N * sizeof(float);
    snprintf(path, sizeof path, "%s/ns_spot_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    /* every 10th item faked; the claim is committed as it is */
    for (uint32_t i = 0; i < N; i += 10)
        s_out(&v)[i] = -1.0f;
    CHECK(write(fd, v.outs[2], size) == (ssize_t)size);
    uint8_t *claim = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(claim != MAP_FAILED);
    uint8_t *outs[NS_MAX_ARGS] = {0};
    int fds[NS_MAX_ARGS];
    for (int i = 0; i < NS_MAX_ARGS; i++)
        fds[i] = -1;
    outs[2] = claim;
    fds[2] = fd;
    CHECK_RC(ns_commit_root(&v.job, v.id, outs, root), NS_OK);
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_spot_check_files(s_runner, &v.job, v.id, v.in, outs, fds, root,
                                 secret, 64, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 64);
    CHECK(res.mismatched > 0);
    CHECK_EQ_INT(res.first_bad % 10, 0);
    CHECK_EQ_INT(res.bad_arg, 2);
    /* the re-run wrote to its private copy only */
    CHECK(memcmp(claim, v.outs[2], size) == 0);
    uint8_t *back = malloc(size);
    CHECK(pread(fd, back, size, 0) == (ssize_t)size);
    CHECK(memcmp(back, v.outs[2], size) == 0);
    /* the same file honest: passes */
    for (uint32_t i = 0; i < N; i += 10)
        s_out(&v)[i] = v.a[i] + v.b[i];
    CHECK(pwrite(fd, v.outs[2], size, 0) == (ssize_t)size);
    CHECK_RC(ns_commit_root(&v.job, v.id, outs, root), NS_OK);
    CHECK_RC(ns_spot_check_files(s_runner, &v.job, v.id, v.in, outs, fds, root,
                                 secret, 64, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 64);
    CHECK_EQ_INT(res.mismatched, 0);
    CHECK_EQ_INT(res.changed, 0);
    /* a file that cannot be mapped: an I/O error, not a verdict */
    int bad[NS_MAX_ARGS];
    memcpy(bad, fds, sizeof bad);
    bad[2] = open("/dev/null", O_RDONLY);
    CHECK_RC(ns_spot_check_files(s_runner, &v.job, v.id, v.in, outs, bad, root,
                                 secret, 64, &res, err, sizeof err),
             NS_ERR_IO);
    close(bad[2]);
    free(back);
    munmap(claim, size);
    close(fd);
    unlink(path);
    s_vadd_free(&v);
}

TEST(spot_check_single_item_full_k)
{
    enum { N = 300 };
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32] = {7};
    ns_check_result_t res;
    char err[256];
    if (!CHECK_RC(s_vadd_setup(&v, N, NS_DET_EXACT, 0), NS_OK))
        return;
    uint32_t victim = 1 + ns_rand_below(N - 1);
    uint32_t u;
    memcpy(&u, &s_out(&v)[victim], 4);
    u ^= 1; /* one bit of one item */
    memcpy(&s_out(&v)[victim], &u, 4);
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           N, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, N);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, victim);
    CHECK_EQ_INT(res.bad_pos, 4 * victim);
    CHECK_EQ_INT(res.bad_arg, 2);
    /* k beyond the item count is capped; beyond NS_MAX_CHECKS refused */
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, N);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           NS_MAX_CHECKS + 1, &res, err, sizeof err),
             NS_ERR_TOOBIG);
    s_vadd_free(&v);
}

/* A TOL job: an output 1 ulp off passes at ulp:1 and fails at ulp:1 when
 * it is 2 ulp off. */
TEST(spot_check_tolerance)
{
    enum { N = 200 };
    s_vadd_t v;
    ns_hash_t root;
    uint8_t secret[32] = {9};
    ns_check_result_t res;
    char err[256];
    if (!CHECK_RC(s_vadd_setup(&v, N, NS_DET_ULP, 1), NS_OK))
        return;
    for (uint32_t i = 0; i < N; i += 2)
        s_out(&v)[i] = s_up(s_out(&v)[i]);
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           N, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 0);
    s_out(&v)[50] = s_up(s_out(&v)[50]); /* now 2 ulp */
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           N, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, 50);
    CHECK_EQ_INT(res.bad_pos / 4, 50);
    s_vadd_free(&v);
}

TEST(fraud_proofs)
{
    /* 80000 bytes: 5 chunks; BAD's float in chunk 3 at OFF */
    enum { N = 20000, BAD = 12345, OFF = 4 * BAD - 3 * 16384 };
    s_vadd_t v;
    ns_merkle_t tree;
    ns_hash_t root;
    uint8_t sig[NS_SIG_BYTES];
    ns_fraud_proof_t p, q;
    char err[256];
    ns_identity_t *prov = ns_identity_generate();
    if (!CHECK(prov) || !CHECK_RC(s_vadd_setup(&v, N, NS_DET_EXACT, 0), NS_OK))
        return;
    float honest = s_out(&v)[BAD];
    s_out(&v)[BAD] = 42.0f;
    CHECK_RC(ns_commit_outputs(&v.job, v.id, v.outs, &tree), NS_OK);
    ns_merkle_root(&tree, root);
    ns_result_sign(prov, v.id, root, N, sig);

    /* a true proof, also after the wire */
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, &tree,
                            v.outs, BAD, 2, 4 * (BAD)),
             NS_OK);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_OK);
    CHECK_RC(s_pack_read(&p, &q, err, sizeof err), NS_OK);
    CHECK_RC(ns_fraud_check(s_runner, &q, v.in, err, sizeof err), NS_OK);
    ns_fraud_release(&q);

    /* the claim replaced by the honest bytes: not what was committed */
    memcpy(p.chunk + OFF, &honest, 4);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "not leaf");
    memcpy(p.chunk + OFF, &s_out(&v)[BAD], 4);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_OK);

    /* a path that does not lead to the root */
    p.path[2][7] ^= 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.path[2][7] ^= 1;
    p.depth--;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.depth++;

    /* the same chunk and path under another unit: it does not write
     * that byte; and a byte of the right unit that is claimed right */
    p.unit = BAD + 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "does not write");
    p.unit = N;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.unit = BAD + 1;
    p.pos = 4 * (BAD + 1);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "no fraud");
    p.unit = BAD;
    p.pos = 4 * BAD + 3;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_OK);
    p.pos = 4 * BAD;

    /* signatures: tampered, another provider, another count or root */
    p.sig[3] ^= 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "signature");
    p.sig[3] ^= 1;
    p.provider[0] ^= 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.provider[0] ^= 1;
    p.n_units = N - 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.n_units = N;
    p.root[0] ^= 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    p.root[0] ^= 1;

    /* a descriptor that is not the signed job */
    p.job.args[3].v.u32 = N - 1;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "job id");
    p.job.args[3].v.u32 = N;
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_OK);
    ns_fraud_release(&p);

    /* a proof against an item the provider got right */
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, &tree,
                            v.outs, BAD - 1, 2, 4 * (BAD - 1)),
             NS_OK);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "no fraud");
    ns_fraud_release(&p);

    /* an honest provider: no item yields a proof (path built without a
     * tree this time) */
    s_out(&v)[BAD] = honest;
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    ns_result_sign(prov, v.id, root, N, sig);
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, NULL,
                            v.outs, BAD, 2, 4 * (BAD)),
             NS_OK);
    CHECK_MEM(p.root, root, NS_HASH_BYTES);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    /* ... even with a claim that is wrong but was never signed */
    float lie = 42.0f;
    memcpy(p.chunk + OFF, &lie, 4);
    CHECK_RC(ns_fraud_check(s_runner, &p, v.in, err, sizeof err), NS_ERR_PROOF);
    ns_fraud_release(&p);

    /* inputs that are not the job's cannot prove anything */
    s_out(&v)[BAD] = 42.0f;
    ns_merkle_root(&tree, root);
    ns_result_sign(prov, v.id, root, N, sig);
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, &tree,
                            v.outs, BAD, 2, 4 * (BAD)),
             NS_OK);
    v.a[BAD] += 1.0f;
    int rc = ns_fraud_check(s_runner, &p, v.in, err, sizeof err);
    CHECK(rc != NS_OK && rc != NS_ERR_PROOF);
    v.a[BAD] -= 1.0f;
    ns_fraud_release(&p);

    ns_merkle_release(&tree);
    ns_identity_destroy(&prov);
    s_vadd_free(&v);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(leaf_formula);
    RUN(commit_matches_merkle);
    RUN(commit_binds_bytes);
    RUN(result_statement);
    RUN(draw_shape);
    RUN(draw_uniform);
    RUN(tolerance_edges);
    RUN(fraud_codec);

    int err = 0;
    s_runner = ns_runner_new(0, NULL, &err);
    if (!s_runner && getenv("NS_TEST_ALLOW_NO_DEVICES")) {
        printf("no OpenCL device: runner tests skipped\n");
    } else if (CHECK(s_runner != NULL)) {
        RUN(spot_check_honest);
        RUN(spot_check_root_mismatch);
        RUN(spot_check_catches_ten_percent);
        RUN(spot_check_files);
        RUN(spot_check_single_item_full_k);
        RUN(spot_check_tolerance);
        RUN(fraud_proofs);
        ns_runner_destroy(&s_runner);
    }
    return ns_test_finish("exec_verify");
}
