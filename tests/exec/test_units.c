/* test_units.c - launch-faithful re-execution and write-set verification
 * over a corpus of kernels that the old per-item slices could not verify:
 * __local memory and barriers, group queries in 1, 2 and 3 dimensions,
 * per-group partial sums, a scatter, a tiled transpose, a float kernel
 * under a tolerance. On real OpenCL (PoCL).
 *
 * For every kernel: each unit re-run alone writes exactly its part of the
 * full run (and the units together write all of it); the spot check
 * passes honest outputs and catches one faked unit when k covers every
 * unit; a fraud proof built from the faked unit verifies and one against
 * honest outputs is rejected.
 */
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"
#include "nightshift/verify.h"

#include "check.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ns_runner_t *s_r;

/* ---- the corpus --------------------------------------------------------- */

static const char s_src[] =
    /* each group's slice reversed through a __local array */
    "__kernel void rev_local(__global const uint *in, __global uint *out)\n"
    "{\n"
    "    __local uint tile[64];\n"
    "    size_t l = get_local_id(0), n = get_local_size(0);\n"
    "    tile[l] = in[get_global_id(0)];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_group_id(0) * n + l] = tile[n - 1 - l] + get_group_id(0);\n"
    "}\n"
    /* the same through a __local argument */
    "__kernel void rev_arg(__global const uint *in, __global uint *out,\n"
    "                      __local uint *tile)\n"
    "{\n"
    "    size_t l = get_local_id(0), n = get_local_size(0);\n"
    "    tile[l] = in[get_global_id(0)];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tile[n - 1 - l];\n"
    "}\n"
    /* what every index and size query says, 12 ulongs per work-item */
    "__kernel void queries(__global ulong *out)\n"
    "{\n"
    "    size_t i = get_global_id(0) + get_global_size(0) *\n"
    "               (get_global_id(1) + get_global_size(1) *\n"
    "                get_global_id(2));\n"
    "    __global ulong *o = out + 12 * i;\n"
    "    for (uint d = 0; d < 3; d++) {\n"
    "        o[d] = get_group_id(d) | (ulong)get_num_groups(d) << 20 |\n"
    "               (ulong)get_local_id(d) << 40;\n"
    "        o[3 + d] = get_global_size(d) | (ulong)get_local_size(d) << 32;\n"
    "        o[6 + d] = get_global_offset(d) + 7 * get_global_id(d);\n"
    "    }\n"
    "    o[9] = get_work_dim();\n"
    "    o[10] = i;\n"
    "    o[11] = get_num_groups(0) * get_num_groups(1) * get_num_groups(2);\n"
    "}\n"
    /* one partial sum per group, at out[get_group_id(0)] */
    "__kernel void psum(__global const uint *in, __global uint *out,\n"
    "                   __local uint *acc)\n"
    "{\n"
    "    size_t l = get_local_id(0);\n"
    "    acc[l] = in[get_global_id(0)];\n"
    "    for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        if (l < s)\n"
    "            acc[l] += acc[l + s];\n"
    "    }\n"
    "    if (l == 0)\n"
    "        out[get_group_id(0)] = acc[0];\n"
    "}\n"
    /* a scatter through a permutation */
    "__kernel void scatter(__global const uint *perm, __global uint *out)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    out[perm[i]] = (uint)i * 2654435761u;\n"
    "}\n"
    /* a tiled transpose of a W x H matrix (W = global 0) */
    "__kernel void transpose(__global const float *in, __global float *out)\n"
    "{\n"
    "    __local float tile[8][9];\n"
    "    size_t w = get_global_size(0), h = get_global_size(1);\n"
    "    size_t gx = get_group_id(0) * 8, gy = get_group_id(1) * 8;\n"
    "    size_t lx = get_local_id(0), ly = get_local_id(1);\n"
    "    tile[ly][lx] = in[(gy + ly) * w + gx + lx];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[(gx + ly) * h + gy + lx] = tile[lx][ly];\n"
    "}\n"
    /* float arithmetic under a tolerance, a group-wide mean subtracted */
    "__kernel void centered(__global const float *in, __global float *out,\n"
    "                       __local float *acc)\n"
    "{\n"
    "    size_t l = get_local_id(0), n = get_local_size(0);\n"
    "    float x = sin(in[get_global_id(0)]) * 1.5f;\n"
    "    acc[l] = x;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    float m = 0.0f;\n"
    "    for (size_t k = 0; k < n; k++)\n"
    "        m += acc[k];\n"
    "    out[get_global_id(0)] = x - m / (float)n;\n"
    "}\n";

typedef struct {
    ns_job_t job;
    ns_hash_t id;
    void *in_data[NS_MAX_ARGS];
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *out[NS_MAX_ARGS];
} s_case_t;

static void s_setup(s_case_t *c, const char *entry, uint32_t dims,
                    const uint64_t *global, const uint64_t *local)
{
    memset(c, 0, sizeof *c);
    ns_job_init(&c->job);
    if (ns_job_set_source(&c->job, s_src, sizeof s_src - 1) != NS_OK)
        abort();
    snprintf(c->job.entry, sizeof c->job.entry, "%s", entry);
    c->job.dims = dims;
    for (uint32_t d = 0; d < dims; d++) {
        c->job.global[d] = global[d];
        c->job.local[d] = local ? local[d] : 0;
    }
}

static void s_in(s_case_t *c, void *data, size_t len)
{
    uint32_t i = c->job.n_args++;
    c->job.args[i].kind = NS_ARG_IN;
    c->job.args[i].size = len;
    ns_hash(c->job.args[i].hash, data, len);
    c->in_data[i] = data;
    c->in[i] = (ns_input_t){.data = data, .len = len};
}

static void s_out(s_case_t *c, uint64_t size)
{
    uint32_t i = c->job.n_args++;
    c->job.args[i].kind = NS_ARG_OUT;
    c->job.args[i].size = size;
}

static void s_local(s_case_t *c, uint64_t size)
{
    uint32_t i = c->job.n_args++;
    c->job.args[i].kind = NS_ARG_LOCAL;
    c->job.args[i].size = size;
}

static void s_free(s_case_t *c)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        free(c->in_data[i]);
        free(c->out[i]);
    }
    ns_job_release(&c->job);
}

/* Validate, id, full run. */
static int s_run(s_case_t *c)
{
    char err[1024];
    int rc = ns_job_validate(&c->job, err, sizeof err);
    if (rc == NS_OK)
        rc = ns_job_id(&c->job, c->id);
    for (uint32_t i = 0; rc == NS_OK && i < c->job.n_args; i++)
        if (c->job.args[i].kind == NS_ARG_OUT)
            c->out[i] = calloc(1, c->job.args[i].size);
    if (rc == NS_OK)
        rc = ns_runner_run(s_r, &c->job, c->in, c->out, NULL, err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "  %s: %s\n", c->job.entry, err);
    return rc;
}

/* ---- the properties ----------------------------------------------------- */

/* Every unit alone on the 0x00 and the 0xFF fill: the bytes it writes
 * (equal after both) hold the full run's values, and the units together
 * write every byte exactly once. *unit_of gets, for the first OUT
 * argument, which unit wrote each byte. */
static void s_check_faithful(s_case_t *c, uint64_t **unit_of)
{
    uint64_t n = ns_job_units(&c->job);
    uint8_t *a[NS_MAX_ARGS] = {0}, *b[NS_MAX_ARGS] = {0};
    uint32_t *count[NS_MAX_ARGS] = {0};
    char err[1024];
    uint32_t first = NS_MAX_ARGS;
    uint64_t wrong = 0, missing = 0, twice = 0;
    for (uint32_t i = 0; i < c->job.n_args; i++)
        if (c->job.args[i].kind == NS_ARG_OUT) {
            a[i] = malloc(c->job.args[i].size);
            b[i] = malloc(c->job.args[i].size);
            count[i] = calloc(c->job.args[i].size, sizeof *count[i]);
            if (first == NS_MAX_ARGS)
                first = i;
        }
    *unit_of = calloc(c->job.args[first].size, sizeof **unit_of);
    for (uint64_t u = 0; u < n; u++) {
        for (uint32_t i = 0; i < c->job.n_args; i++)
            if (a[i]) {
                memset(a[i], 0x00, c->job.args[i].size);
                memset(b[i], 0xff, c->job.args[i].size);
            }
        int rc = ns_runner_run_units(s_r, &c->job, c->in, &u, 1, a, NULL, err,
                                     sizeof err);
        if (rc == NS_OK)
            rc = ns_runner_run_units(s_r, &c->job, c->in, &u, 1, b, NULL, err,
                                     sizeof err);
        if (!CHECK_RC(rc, NS_OK)) {
            fprintf(stderr, "  %s unit %llu: %s\n", c->job.entry,
                    (unsigned long long)u, err);
            break;
        }
        for (uint32_t i = 0; i < c->job.n_args; i++)
            for (uint64_t k = 0; a[i] && k < c->job.args[i].size; k++) {
                if (a[i][k] != b[i][k])
                    continue;
                count[i][k]++;
                wrong += a[i][k] != c->out[i][k];
                if (i == first)
                    (*unit_of)[k] = u;
            }
    }
    for (uint32_t i = 0; i < c->job.n_args; i++)
        for (uint64_t k = 0; count[i] && k < c->job.args[i].size; k++) {
            missing += count[i][k] == 0;
            twice += count[i][k] > 1;
        }
    if (!CHECK_EQ_INT(wrong, 0) || !CHECK_EQ_INT(missing, 0) ||
        !CHECK_EQ_INT(twice, 0))
        fprintf(stderr, "  %s: %llu units\n", c->job.entry,
                (unsigned long long)n);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        free(a[i]);
        free(b[i]);
        free(count[i]);
    }
}

/* Spot checks with k = every unit, honest and with one faked unit, and
 * fraud proofs both ways. The fake: byte `at` of the first OUT argument,
 * written by unit_of[at], xor-ed with `flip` (a change the tolerance does
 * not forgive). */
static void s_check_verify(s_case_t *c, const uint64_t *unit_of, uint64_t at,
                           uint8_t flip)
{
    uint64_t n = ns_job_units(&c->job);
    uint32_t arg = 0;
    while (c->job.args[arg].kind != NS_ARG_OUT)
        arg++;
    ns_identity_t *prov = ns_identity_generate();
    ns_hash_t root;
    uint8_t secret[32], sig[NS_SIG_BYTES];
    ns_check_result_t res;
    ns_fraud_proof_t p;
    char err[1024];
    randombytes_buf(secret, sizeof secret);
    if (!CHECK(prov && n <= NS_MAX_CHECKS))
        goto out;

    /* honest */
    CHECK_RC(ns_commit_root(&c->job, c->id, c->out, root), NS_OK);
    ns_result_sign(prov, c->id, root, n, sig);
    CHECK_RC(ns_spot_check(s_r, &c->job, c->id, c->in, c->out, root, secret,
                           (uint32_t)n, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, n);
    if (!CHECK_EQ_INT(res.mismatched, 0) || !CHECK_EQ_INT(res.changed, 0))
        fprintf(stderr, "  %s honest: %s\n", c->job.entry, err);
    /* a proof against honest outputs is not one */
    CHECK_RC(ns_fraud_build(&p, &c->job, c->id, ns_identity_pk(prov), sig, NULL,
                            c->out, unit_of[at], arg, at),
             NS_OK);
    CHECK_RC(ns_fraud_check(s_r, &p, c->in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "no fraud");
    ns_fraud_release(&p);

    /* one faked unit, committed and signed */
    c->out[arg][at] ^= flip;
    CHECK_RC(ns_commit_root(&c->job, c->id, c->out, root), NS_OK);
    ns_result_sign(prov, c->id, root, n, sig);
    CHECK_RC(ns_spot_check(s_r, &c->job, c->id, c->in, c->out, root, secret,
                           (uint32_t)n, &res, err, sizeof err),
             NS_OK);
    if (!CHECK_EQ_INT(res.mismatched, 1) ||
        !CHECK_EQ_INT(res.first_bad, unit_of[at]) ||
        !CHECK_EQ_INT(res.bad_arg, arg))
        fprintf(stderr, "  %s faked: %s\n", c->job.entry, err);
    if (CHECK_RC(ns_fraud_build(&p, &c->job, c->id, ns_identity_pk(prov), sig,
                                NULL, c->out, res.first_bad, res.bad_arg,
                                res.bad_pos),
                 NS_OK)) {
        if (!CHECK_RC(ns_fraud_check(s_r, &p, c->in, err, sizeof err), NS_OK))
            fprintf(stderr, "  %s proof: %s\n", c->job.entry, err);
        /* the right byte, the wrong unit */
        p.unit = (p.unit + 1) % n;
        CHECK_RC(ns_fraud_check(s_r, &p, c->in, err, sizeof err),
                 n > 1 ? NS_ERR_PROOF : NS_OK);
        ns_fraud_release(&p);
    }
    c->out[arg][at] ^= flip;
out:
    ns_identity_destroy(&prov);
}

static void s_check_all(s_case_t *c, uint64_t at, uint8_t flip)
{
    uint64_t *unit_of = NULL;
    if (!CHECK_RC(s_run(c), NS_OK))
        return;
    s_check_faithful(c, &unit_of);
    if (unit_of)
        s_check_verify(c, unit_of, at, flip);
    free(unit_of);
}

static uint32_t *s_words(size_t n, uint32_t seed)
{
    uint32_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)(i * 2654435761u) ^ seed;
    return v;
}

/* ---- tests ------------------------------------------------------------- */

TEST(local_reversal)
{
    enum { N = 1024, L = 64 };
    uint64_t g[1] = {N}, l[1] = {L};
    s_case_t c;
    s_setup(&c, "rev_local", 1, g, l);
    s_in(&c, s_words(N, 1), N * 4);
    s_out(&c, N * 4);
    if (CHECK_RC(s_run(&c), NS_OK)) {
        const uint32_t *in = c.in_data[0], *o = (const uint32_t *)c.out[1];
        CHECK(o[70] == in[64 + 63 - 6] + 1); /* group 1, its reversal */
    }
    free(c.out[1]);
    c.out[1] = NULL;
    s_check_all(&c, 4 * 200 + 1, 0x10);
    s_free(&c);

    s_setup(&c, "rev_arg", 1, g, l);
    s_in(&c, s_words(N, 2), N * 4);
    s_out(&c, N * 4);
    s_local(&c, L * 4);
    s_check_all(&c, 4 * 1000, 0x01);
    s_free(&c);
}

/* The queries in 1, 2 and 3 dimensions, and what the full run saw. */
TEST(group_queries)
{
    static const struct {
        uint32_t dims;
        uint64_t g[3], l[3];
    } cases[] = {{1, {96, 0, 0}, {16, 0, 0}},
                 {2, {12, 10, 0}, {4, 5, 0}},
                 {3, {6, 4, 6}, {3, 2, 2}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        s_case_t c;
        uint64_t items = 1;
        s_setup(&c, "queries", cases[k].dims, cases[k].g, cases[k].l);
        for (uint32_t d = 0; d < cases[k].dims; d++)
            items *= cases[k].g[d];
        s_out(&c, items * 12 * 8);
        if (CHECK_RC(s_run(&c), NS_OK)) {
            /* the last work-item's view, from the full run */
            const uint64_t *o = (const uint64_t *)c.out[0] + 12 * (items - 1);
            for (uint32_t d = 0; d < 3; d++) {
                uint64_t g = d < cases[k].dims ? cases[k].g[d] : 1;
                uint64_t l = d < cases[k].dims ? cases[k].l[d] : 1;
                CHECK_EQ_INT(o[d] & 0xfffff, g / l - 1);
                CHECK_EQ_INT(o[3 + d], g | l << 32);
                CHECK_EQ_INT(o[6 + d], 7 * (g - 1));
            }
            CHECK_EQ_INT(o[9], cases[k].dims);
            CHECK_EQ_INT(o[10], items - 1);
        }
        free(c.out[0]);
        c.out[0] = NULL;
        s_check_all(&c, 8 * 12 * (items / 2) + 3, 0x04);
        s_free(&c);
    }
}

TEST(partial_sums)
{
    enum { N = 2048, L = 32 };
    uint64_t g[1] = {N}, l[1] = {L};
    s_case_t c;
    s_setup(&c, "psum", 1, g, l);
    s_in(&c, s_words(N, 3), N * 4);
    s_out(&c, N / L * 4); /* one word per group: no slice of N items */
    s_local(&c, L * 4);
    if (CHECK_RC(s_run(&c), NS_OK)) {
        const uint32_t *in = c.in_data[0], *o = (const uint32_t *)c.out[1];
        uint32_t want = 0;
        for (uint32_t i = 5 * L; i < 6 * L; i++)
            want += in[i];
        CHECK(o[5] == want);
    }
    free(c.out[1]);
    c.out[1] = NULL;
    s_check_all(&c, 4 * 17 + 2, 0x80);
    s_free(&c);
}

TEST(scatter)
{
    enum { N = 512 };
    uint64_t g[1] = {N};
    s_case_t c;
    uint32_t *perm = malloc(N * sizeof *perm);
    for (uint32_t i = 0; i < N; i++)
        perm[i] = (i * 197u + 31u) % N; /* 197 is prime to 512 */
    s_setup(&c, "scatter", 1, g, NULL);
    s_in(&c, perm, N * 4);
    s_out(&c, N * 4);
    s_check_all(&c, 4 * 300, 0x02);
    s_free(&c);
}

TEST(transpose)
{
    enum { W = 48, H = 32 };
    uint64_t g[2] = {W, H}, l[2] = {8, 8};
    s_case_t c;
    float *m = malloc(W * H * sizeof *m);
    for (uint32_t i = 0; i < W * H; i++)
        m[i] = (float)i * 0.5f;
    s_setup(&c, "transpose", 2, g, l);
    s_in(&c, m, W * H * 4);
    s_out(&c, W * H * 4);
    if (CHECK_RC(s_run(&c), NS_OK)) {
        const float *o = (const float *)c.out[1];
        CHECK(o[5 * H + 7] == m[7 * W + 5]); /* out[x][y] = in[y][x] */
    }
    free(c.out[1]);
    c.out[1] = NULL;
    s_check_all(&c, 4 * 1111 + 3, 0x20);
    s_free(&c);
}

TEST(float_tolerance)
{
    enum { N = 1024, L = 16 };
    uint64_t g[1] = {N}, l[1] = {L};
    s_case_t c;
    float *in = malloc(N * sizeof *in);
    for (uint32_t i = 0; i < N; i++)
        in[i] = (float)i * 0.01f - 3.0f;
    s_setup(&c, "centered", 1, g, l);
    c.job.det = NS_DET_ULP;
    c.job.tol = 4;
    s_in(&c, in, N * 4);
    s_out(&c, N * 4);
    s_local(&c, L * 4);
    /* the exponent's low bit of float 333: far beyond 4 ulp */
    s_check_all(&c, 4 * 333 + 2, 0x80);
    /* a change within the tolerance passes */
    if (c.out[1]) {
        ns_hash_t root;
        uint8_t secret[32] = {3};
        ns_check_result_t res;
        char err[256];
        c.out[1][4 * 333] ^= 0x01; /* 1 ulp */
        CHECK_RC(ns_commit_root(&c.job, c.id, c.out, root), NS_OK);
        CHECK_RC(ns_spot_check(s_r, &c.job, c.id, c.in, c.out, root, secret,
                               (uint32_t)ns_job_units(&c.job), &res, err,
                               sizeof err),
                 NS_OK);
        CHECK_EQ_INT(res.mismatched, 0);
        CHECK_EQ_INT(res.changed, 0);
    }
    s_free(&c);
}

/* Build errors keep the user's line numbers behind the prelude. */
TEST(prelude_line_numbers)
{
    static const char bad[] = "__kernel void k(__global uint *o)\n"
                              "{\n"
                              "    o[0] = undefined_thing;\n"
                              "}\n";
    s_case_t c;
    uint64_t g[1] = {4}, l[1] = {4}, u = 0;
    uint8_t buf[16];
    uint8_t *outs[NS_MAX_ARGS] = {buf};
    char err[2048] = "";
    s_setup(&c, "k", 1, g, l);
    if (!CHECK_RC(ns_job_set_source(&c.job, bad, sizeof bad - 1), NS_OK))
        return;
    s_out(&c, 16);
    CHECK_RC(ns_runner_run_units(s_r, &c.job, NULL, &u, 1, outs, NULL, err,
                                 sizeof err),
             NS_ERR_OPENCL);
    CHECK_CONTAINS(err, ":3:");
    CHECK(strstr(ns_runner_prelude(), "#line 1\n") != NULL);
    s_free(&c);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    int err = 0;
    s_r = ns_runner_new(0, NULL, &err);
    if (!s_r && getenv("NS_TEST_ALLOW_NO_DEVICES")) {
        printf("no OpenCL device: unit tests skipped\n");
    } else if (CHECK(s_r != NULL)) {
        RUN(local_reversal);
        RUN(group_queries);
        RUN(partial_sums);
        RUN(scatter);
        RUN(transpose);
        RUN(float_tolerance);
        RUN(prelude_line_numbers);
        ns_runner_destroy(&s_r);
    }
    return ns_test_finish("exec_units");
}
