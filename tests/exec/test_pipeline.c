/* test_pipeline.c - pipelines (job.h "Pipelines"): the version 3
 * descriptor, a run of every step on one runner, the spot check of each
 * step over the committed intermediates, and fraud proofs for a step
 * that reads an earlier step's buffer, on real OpenCL (PoCL).
 *
 * The pipeline: h = 2x + 1 (step 1), y = h * h (step 2), and per-group
 * sums of y in __local memory (step 3, a reduction's first half). */
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"
#include "nightshift/runner.h"
#include "nightshift/verify.h"

#include "check.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1024   /* elements */
#define GROUP 64 /* step 3's work-group */
#define B_X 0    /* buffers */
#define B_H 1
#define B_Y 2
#define B_PART 3

static const char s_src[] =
    "__kernel void lin(__global const float *x, __global float *h, uint n)\n"
    "{ size_t i = get_global_id(0); if (i < n) h[i] = x[i] * 2.0f + 1.0f; }\n"
    "__kernel void sq(__global const float *h, __global float *y)\n"
    "{ size_t i = get_global_id(0); y[i] = h[i] * h[i]; }\n"
    "__kernel void psum(__global const float *y, __global float *part,\n"
    "                   __local float *t)\n"
    "{\n"
    "    size_t l = get_local_id(0), g = get_group_id(0);\n"
    "    t[l] = y[get_global_id(0)];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {\n"
    "        if (l < s) t[l] += t[l + s];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (l == 0) part[g] = t[0];\n"
    "}\n";

static ns_runner_t *s_runner;

static void s_buf(ns_step_t *st, uint32_t b)
{
    st->args[st->n_args].kind = NS_ARG_BUF;
    st->args[st->n_args++].v.u32 = b;
}

/* The three-step pipeline over x (its hash given). */
static void s_make(ns_job_t *job, const float *x)
{
    ns_job_init(job);
    CHECK_RC(ns_job_set_source(job, s_src, sizeof s_src - 1), NS_OK);
    job->args[B_X].kind = NS_ARG_IN;
    job->args[B_X].size = N * 4;
    ns_hash(job->args[B_X].hash, x, N * 4);
    job->args[B_H].kind = NS_ARG_OUT;
    job->args[B_H].size = N * 4;
    job->args[B_Y].kind = NS_ARG_OUT;
    job->args[B_Y].size = N * 4;
    job->args[B_PART].kind = NS_ARG_OUT;
    job->args[B_PART].size = N / GROUP * 4;
    job->n_args = 4;
    job->n_steps = 3;
    job->steps = calloc(3, sizeof *job->steps);
    ns_step_t *st = &job->steps[0];
    snprintf(st->entry, sizeof st->entry, "lin");
    st->dims = 1;
    st->global[0] = N;
    s_buf(st, B_X);
    s_buf(st, B_H);
    st->args[st->n_args].kind = NS_ARG_U32;
    st->args[st->n_args++].v.u32 = N;
    st = &job->steps[1];
    snprintf(st->entry, sizeof st->entry, "sq");
    st->dims = 1;
    st->global[0] = N;
    s_buf(st, B_H);
    s_buf(st, B_Y);
    st = &job->steps[2];
    snprintf(st->entry, sizeof st->entry, "psum");
    st->dims = 1;
    st->global[0] = N;
    st->local[0] = GROUP;
    s_buf(st, B_Y);
    s_buf(st, B_PART);
    st->args[st->n_args].kind = NS_ARG_LOCAL;
    st->args[st->n_args++].size = GROUP * 4;
}

static int s_pack_read(const ns_job_t *in, ns_job_t *out, char *err,
                       size_t errlen)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_job_pack(&pk, in);
    ns_mpr_t r;
    ns_mpr_init(&r, sb.data, sb.size);
    int rc = ns_job_read(&r, out, err, errlen);
    if (rc == NS_OK)
        rc = ns_mpr_end(&r);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int s_proof_round_trip(const ns_fraud_proof_t *in, ns_fraud_proof_t *out,
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

TEST(descriptor)
{
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i / 8.0f;
    ns_job_t job, back, bad;
    ns_hash_t id, id2;
    char err[256];
    ns_job_init(&back);
    ns_job_init(&bad);
    s_make(&job, x);
    CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK);
    CHECK_EQ_INT(ns_job_steps(&job), 3);
    CHECK_EQ_INT(ns_job_units(&job), N + N + N / GROUP);
    CHECK_EQ_INT(ns_job_step_first(&job, 2), 2 * N);
    CHECK_EQ_INT(ns_job_unit_step(&job, N - 1), 0);
    CHECK_EQ_INT(ns_job_unit_step(&job, N), 1);
    CHECK_EQ_INT(ns_job_unit_step(&job, 2 * N + 3), 2);
    CHECK_EQ_INT(ns_job_writer(&job, B_Y), 1);
    CHECK_EQ_INT(ns_job_rows(&job), 0);
    CHECK_RC(ns_job_shardable(&job, 2, 0, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "pipeline");

    /* the view of step 2: h is read (an input without a hash) */
    ns_job_t view;
    uint32_t map[NS_MAX_ARGS];
    ns_job_step_view(&job, 1, &view, map);
    CHECK_EQ_INT(view.n_args, 2);
    CHECK_EQ_INT(view.args[0].kind, NS_ARG_IN);
    CHECK_EQ_INT(view.args[1].kind, NS_ARG_OUT);
    CHECK_EQ_INT(map[0], B_H);
    CHECK_EQ_INT(map[1], B_Y);

    /* msgpack round trip: version 3, the same id */
    CHECK_RC(s_pack_read(&job, &back, err, sizeof err), NS_OK);
    CHECK_RC(ns_job_id(&job, id), NS_OK);
    CHECK_RC(ns_job_id(&back, id2), NS_OK);
    CHECK_MEM(id, id2, NS_HASH_BYTES);
    CHECK_EQ_INT(back.n_steps, 3);
    CHECK_STR(back.steps[2].entry, "psum");

    /* broken pipelines, each one line naming what is wrong */
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.steps[1].args[0].v.u32 = 9;
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "step 1 arg 0: buffer 9");
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.steps[1].args[1].v.u32 = B_H; /* h twice */
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "named twice");
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.steps[2].args[1].v.u32 = B_H; /* psum writes nothing of its own */
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "step 2");
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.n_steps = 2; /* nothing names part */
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "buffer 3: no step names it");
    bad.n_steps = 3;
    bad.args[0].kind = NS_ARG_U32;
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    snprintf(bad.entry, sizeof bad.entry, "lin");
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.steps[0].args[0].kind = NS_ARG_IN; /* steps name buffers */
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_INVAL);
    CHECK_RC(ns_job_copy(&bad, &job), NS_OK);
    bad.n_steps = NS_MAX_STEPS + 1;
    CHECK_RC(ns_job_validate(&bad, err, sizeof err), NS_ERR_TOOBIG);
    bad.n_steps = 3;

    /* a buffer reference at the top of a job of one launch */
    ns_job_t one;
    ns_job_init(&one);
    snprintf(one.builtin, sizeof one.builtin, "x");
    memset(one.source_hash, 1, NS_HASH_BYTES);
    snprintf(one.entry, sizeof one.entry, "x");
    one.dims = 1;
    one.global[0] = 4;
    one.args[0].kind = NS_ARG_OUT;
    one.args[0].size = 16;
    one.args[1].kind = NS_ARG_BUF;
    one.n_args = 2;
    CHECK_RC(ns_job_validate(&one, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "outside a pipeline");

    ns_job_release(&bad);
    ns_job_release(&back);
    ns_job_release(&job);
}

typedef struct {
    ns_job_t job;
    ns_hash_t id;
    float x[N];
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS];
} s_run_t;

static void s_run(s_run_t *v)
{
    char err[512];
    memset(v, 0, sizeof *v);
    for (int i = 0; i < N; i++)
        v->x[i] = (float)(i % 97) / 4.0f - 3.0f;
    s_make(&v->job, v->x);
    CHECK_RC(ns_job_id(&v->job, v->id), NS_OK);
    v->in[B_X] = (ns_input_t){v->x, sizeof v->x, false};
    for (uint32_t b = 1; b < 4; b++)
        v->outs[b] = ns_buf_alloc(v->job.args[b].size);
    ns_timings_t t;
    CHECK_RC(
        ns_runner_run(s_runner, &v->job, v->in, v->outs, &t, err, sizeof err),
        NS_OK);
}

static void s_free(s_run_t *v)
{
    for (uint32_t b = 0; b < NS_MAX_ARGS; b++)
        free(v->outs[b]);
    ns_job_release(&v->job);
}

TEST(run_and_check)
{
    static s_run_t v;
    char err[512];
    s_run(&v);
    const float *h = (const float *)v.outs[B_H];
    const float *y = (const float *)v.outs[B_Y];
    const float *part = (const float *)v.outs[B_PART];
    for (int i = 0; i < N; i++) {
        float want = v.x[i] * 2.0f + 1.0f;
        if (h[i] != want || y[i] != want * want) {
            CHECK(h[i] == want && y[i] == want * want);
            break;
        }
    }
    double sum = 0, want = 0;
    for (int g = 0; g < N / GROUP; g++)
        sum += part[g];
    for (int i = 0; i < N; i++)
        want += (double)y[i];
    CHECK(sum > want - 1e-2 * want && sum < want + 1e-2 * want);

    /* every unit of every step re-run: the honest claim passes */
    ns_hash_t root;
    uint8_t secret[32];
    ns_check_result_t res;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, N + N + N / GROUP);
    CHECK_EQ_INT(res.mismatched, 0);
    CHECK_EQ_INT(res.changed, 0);

    /* k = 2: two units of each step, whatever their sizes */
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           2, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.checked, 6);
    CHECK_EQ_INT(res.mismatched, 0);
    s_free(&v);
}

/* A provider that faked one unit of step `step` and computed the later
 * steps from its fake (so only that step is wrong): the check blames
 * exactly that unit, and the proof convinces a checker holding only what
 * the proof names. */
static void s_cheat(uint32_t step)
{
    static s_run_t v;
    char err[512];
    s_run(&v);
    float *h = (float *)v.outs[B_H], *y = (float *)v.outs[B_Y];
    float *part = (float *)v.outs[B_PART];
    uint64_t bad_unit;
    if (step == 0) {
        h[5] += 1.0f; /* and y, part follow the fake h */
        y[5] = h[5] * h[5];
        bad_unit = 5;
    } else if (step == 1) {
        y[700] += 1.0f;
        bad_unit = N + 700;
    } else {
        part[3] += 1.0f;
        bad_unit = 2 * N + 3;
    }
    if (step < 2) {
        /* part follows y: re-run the whole of step 3 on the claim */
        uint64_t units[N / GROUP];
        for (uint32_t g = 0; g < N / GROUP; g++)
            units[g] = 2 * N + g;
        CHECK_RC(ns_runner_run_units(s_runner, &v.job, v.in, units, N / GROUP,
                                     v.outs, NULL, err, sizeof err),
                 NS_OK);
    }
    ns_hash_t root;
    uint8_t secret[32];
    ns_check_result_t res;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    CHECK_RC(ns_spot_check(s_runner, &v.job, v.id, v.in, v.outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, bad_unit);
    CHECK_EQ_INT(ns_job_writer(&v.job, res.bad_arg), step);

    ns_identity_t *prov = ns_identity_generate();
    uint8_t sig[NS_SIG_BYTES];
    uint64_t n_units = ns_job_units(&v.job);
    ns_result_sign(prov, v.id, root, n_units, sig);
    ns_fraud_proof_t p, q;
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, NULL,
                            v.outs, res.first_bad, res.bad_arg, res.bad_pos),
             NS_OK);
    CHECK_EQ_INT(p.n_outs, step == 0 ? 0 : 3);
    CHECK_RC(s_proof_round_trip(&p, &q, err, sizeof err), NS_OK);
    CHECK_EQ_INT(q.n_outs, p.n_outs);

    /* the checker's inputs: x, and the claimed buffers the outs name */
    ns_input_t in[NS_MAX_ARGS];
    memset(in, 0, sizeof in);
    in[B_X] = v.in[B_X];
    if (q.n_outs) {
        for (uint32_t b = 1; b < 4; b++) {
            ns_hash_t hh;
            ns_hash(hh, v.outs[b], v.job.args[b].size);
            CHECK_MEM(hh, q.outs[b - 1], NS_HASH_BYTES);
            in[b] = (ns_input_t){v.outs[b], v.job.args[b].size, true};
        }
    }
    CHECK_RC(ns_fraud_check(s_runner, &q, in, err, sizeof err), NS_OK);
    CHECK_CONTAINS(err, "fraud");
    if (q.n_outs) {
        /* buffers other than the committed ones prove nothing */
        uint8_t *other = malloc(N * 4);
        memcpy(other, v.outs[B_H], N * 4);
        other[0] ^= 1;
        in[B_H].data = other;
        CHECK_RC(ns_fraud_check(s_runner, &q, in, err, sizeof err),
                 NS_ERR_PROOF);
        CHECK_CONTAINS(err, "not the committed");
        in[B_H].data = NULL; /* and missing ones cannot be checked */
        CHECK(ns_fraud_check(s_runner, &q, in, err, sizeof err) != NS_OK);
        free(other);
    }
    /* a proof version that does not fit the descriptor is refused */
    ns_fraud_release(&q);
    /* a proof naming a unit of another step than the buffer's writer */
    p.unit = step == 0 ? N + 1 : 1;
    CHECK(s_proof_round_trip(&p, &q, err, sizeof err) != NS_OK);
    ns_fraud_release(&p);
    ns_identity_destroy(&prov);
    s_free(&v);
}

TEST(cheat_step_1)
{
    s_cheat(0);
}

TEST(cheat_step_2)
{
    s_cheat(1);
}

TEST(cheat_step_3)
{
    s_cheat(2);
}

/* An honest claim: a proof built against it shows no fraud. */
TEST(honest_proof_refused)
{
    static s_run_t v;
    char err[512];
    s_run(&v);
    ns_hash_t root;
    CHECK_RC(ns_commit_root(&v.job, v.id, v.outs, root), NS_OK);
    ns_identity_t *prov = ns_identity_generate();
    uint8_t sig[NS_SIG_BYTES];
    ns_result_sign(prov, v.id, root, ns_job_units(&v.job), sig);
    ns_fraud_proof_t p;
    CHECK_RC(ns_fraud_build(&p, &v.job, v.id, ns_identity_pk(prov), sig, NULL,
                            v.outs, N + 10, B_Y, 40),
             NS_OK);
    ns_input_t in[NS_MAX_ARGS];
    memset(in, 0, sizeof in);
    in[B_X] = v.in[B_X];
    for (uint32_t b = 1; b < 4; b++)
        in[b] = (ns_input_t){v.outs[b], v.job.args[b].size, true};
    CHECK_RC(ns_fraud_check(s_runner, &p, in, err, sizeof err), NS_ERR_PROOF);
    CHECK_CONTAINS(err, "as claimed");
    ns_fraud_release(&p);
    ns_identity_destroy(&prov);
    s_free(&v);
}

/* ---- review findings (reproductions of bugs fixed) ----------------------- */

#define NR 256 /* elements of these pipelines */

static const char s_src_two[] =
    "__kernel void lin(__global const float *x, __global float *h)\n"
    "{ size_t i = get_global_id(0); h[i] = x[i] * 2.0f + 1.0f; }\n"
    "__kernel void sq(__global const float *x, __global float *y)\n"
    "{ size_t i = get_global_id(0); y[i] = x[i] * x[i]; }\n";

/* two independent steps: h = 2x+1 (step 0), y = x*x (step 1, reads only x) */
static void s_make_two(ns_job_t *job, const float *x)
{
    ns_job_init(job);
    CHECK_RC(ns_job_set_source(job, s_src_two, sizeof s_src_two - 1), NS_OK);
    job->args[0].kind = NS_ARG_IN;
    job->args[0].size = NR * 4;
    ns_hash(job->args[0].hash, x, NR * 4);
    job->args[1].kind = NS_ARG_OUT;
    job->args[1].size = NR * 4;
    job->args[2].kind = NS_ARG_OUT;
    job->args[2].size = NR * 4;
    job->n_args = 3;
    job->n_steps = 2;
    job->steps = calloc(2, sizeof *job->steps);
    ns_step_t *st = &job->steps[0];
    snprintf(st->entry, sizeof st->entry, "lin");
    st->dims = 1;
    st->global[0] = NR;
    s_buf(st, 0);
    s_buf(st, 1);
    st = &job->steps[1];
    snprintf(st->entry, sizeof st->entry, "sq");
    st->dims = 1;
    st->global[0] = NR;
    s_buf(st, 0);
    s_buf(st, 2);
}

/* Run a pipeline of s_make_two's shape over x: its id, inputs and
 * outputs (outs[1], outs[2]: the caller frees them). */
static void s_run_two(const ns_job_t *job, const float *x, ns_hash_t id,
                      ns_input_t *in, uint8_t **outs)
{
    char err[512];
    CHECK_RC(ns_job_id(job, id), NS_OK);
    memset(in, 0, NS_MAX_ARGS * sizeof *in);
    in[0] = (ns_input_t){x, NR * 4, false};
    outs[1] = ns_buf_alloc(NR * 4);
    outs[2] = ns_buf_alloc(NR * 4);
    CHECK_RC(ns_runner_run(s_runner, job, in, outs, NULL, err, sizeof err),
             NS_OK);
}

/* A cheat on step 1 (which reads no earlier step's buffer): the proof has
 * no outs, and ns_fraud_check must not crash on it. */
TEST(fraud_check_step_without_outs)
{
    float x[NR];
    for (int i = 0; i < NR; i++)
        x[i] = (float)i;
    ns_job_t job;
    ns_hash_t id, root;
    char err[512];
    s_make_two(&job, x);
    CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK);
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS] = {0};
    s_run_two(&job, x, id, in, outs);
    ((float *)outs[2])[7] += 1.0f; /* cheat in step 1 */
    CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
    uint8_t secret[32];
    ns_check_result_t res;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_spot_check(s_runner, &job, id, in, outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, NR + 7);
    ns_identity_t *prov = ns_identity_generate();
    uint8_t sig[NS_SIG_BYTES];
    ns_result_sign(prov, id, root, ns_job_units(&job), sig);
    ns_fraud_proof_t p;
    CHECK_RC(ns_fraud_build(&p, &job, id, ns_identity_pk(prov), sig, NULL, outs,
                            res.first_bad, res.bad_arg, res.bad_pos),
             NS_OK);
    CHECK_EQ_INT(p.n_outs, 0);
    /* a checker holds x only (no outs named) */
    ns_input_t cin[NS_MAX_ARGS];
    memset(cin, 0, sizeof cin);
    cin[0] = in[0];
    /* (before the fix: SIGSEGV in s_bufs_fill_step, memcpy from NULL) */
    CHECK_RC(ns_fraud_check(s_runner, &p, cin, err, sizeof err), NS_OK);
    CHECK_CONTAINS(err, "fraud");
    ns_fraud_release(&p);
    ns_identity_destroy(&prov);
    free(outs[1]);
    free(outs[2]);
    ns_job_release(&job);
}

static const char s_src2[] =
    "__kernel void lin(__global const float *x, __global float *h)\n"
    "{ size_t i = get_global_id(0); h[i] = x[i] * 2.0f + 1.0f; }\n"
    "__kernel void mv(__global float *h, __global float *y)\n"
    "{ size_t i = get_global_id(0); y[i] = h[i]; h[i] = 0.0f; }\n";

/* A later step that writes into the buffer an earlier step wrote (which
 * its view calls IN): on a host-unified device the write lands in the
 * committed buffer, so the honest claim fails step 0's check (and a fraud
 * proof against the honest provider convinces every checker). */
TEST(later_step_writes_earlier_buffer)
{
    float x[NR];
    for (int i = 0; i < NR; i++)
        x[i] = (float)i;
    ns_job_t job;
    ns_hash_t id, root;
    char err[512];
    s_make_two(&job, x);
    CHECK_RC(ns_job_set_source(&job, s_src2, sizeof s_src2 - 1), NS_OK);
    snprintf(job.steps[1].entry, sizeof job.steps[1].entry, "mv");
    job.steps[1].args[0].v.u32 = 1; /* h, not x */
    job.args[0].size = NR * 4;
    /* x is named by step 0 only: fine */
    CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK);
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS] = {0};
    s_run_two(&job, x, id, in, outs);
    fprintf(stderr, "honest run: h[5] = %g (step 0 wrote %g)\n",
            ((float *)outs[1])[5], x[5] * 2 + 1);
    CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
    uint8_t secret[32];
    ns_check_result_t res;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_spot_check(s_runner, &job, id, in, outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    fprintf(stderr, "spot check of the honest run: mismatched %u (%s)\n",
            res.mismatched, err);
    CHECK_EQ_INT(res.mismatched, 0);
    free(outs[1]);
    free(outs[2]);
    ns_job_release(&job);
}

static int s_size_write(void *data, const char *buf, size_t len)
{
    (void)buf;
    *(size_t *)data += len;
    return 0;
}

/* The largest valid pipeline descriptor, without its source, must fit the
 * 8192 bytes NS_MAX_JOB_MSG leaves beside a source of NS_MAX_SOURCE. */
TEST(max_descriptor_fits_job_msg)
{
    ns_job_t job;
    char err[256];
    ns_job_init(&job);
    snprintf(job.builtin, sizeof job.builtin, "x");
    memset(job.source_hash, 7, NS_HASH_BYTES);
    for (int o = 0; o + 3 <= NS_MAX_OPTIONS; o += 3)
        memcpy(job.options + o, "-w ", 3);
    job.options[NS_MAX_OPTIONS - 1] = 0;
    job.tol = 1048576;
    job.det = 1;
    job.checks = 1000;
    job.work_estimate = UINT64_MAX;
    job.n_args = NS_MAX_ARGS;
    for (uint32_t b = 0; b < NS_MAX_ARGS; b++) {
        job.args[b].kind = b < NS_MAX_STEPS ? NS_ARG_OUT : NS_ARG_IN;
        job.args[b].size = 1ull << 20;
        job.args[b].item_bytes = 100000;
        memset(job.args[b].hash, b < NS_MAX_STEPS ? 0 : 9, NS_HASH_BYTES);
    }
    job.n_steps = NS_MAX_STEPS;
    job.steps = calloc(NS_MAX_STEPS, sizeof *job.steps);
    for (uint32_t s = 0; s < NS_MAX_STEPS; s++) {
        ns_step_t *st = &job.steps[s];
        memset(st->entry, 'e', NS_MAX_ENTRY);
        st->dims = 3;
        st->global[0] = st->global[1] = st->global[2] = 1ull << 10;
        st->local[0] = st->local[1] = 1ull << 5;
        st->local[2] = 1;
        s_buf(st, s);                /* its out */
        s_buf(st, NS_MAX_STEPS + s); /* an input */
        while (st->n_args < NS_MAX_ARGS) {
            st->args[st->n_args].kind = NS_ARG_F64;
            st->args[st->n_args++].v.f64 = 0.1;
        }
    }
    int rc = ns_job_validate(&job, err, sizeof err);
    fprintf(stderr, "validate: %d %s\n", rc, err);
    size_t n = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &n, s_size_write);
    ns_job_pack(&pk, &job);
    fprintf(stderr, "descriptor without source: %zu bytes (room: 8192)\n", n);
    CHECK(rc != NS_OK || n <= 8192);
    ns_job_release(&job);
}

int main(void)
{
    int rc = NS_OK;
    if (sodium_init() < 0)
        return 1;
    s_runner = ns_runner_new(0, NULL, &rc);
    if (!s_runner) {
        fprintf(stderr, "no OpenCL device: %s\n", ns_strerror(rc));
        return 1;
    }
    RUN(descriptor);
    RUN(run_and_check);
    RUN(cheat_step_1);
    RUN(cheat_step_2);
    RUN(cheat_step_3);
    RUN(honest_proof_refused);
    RUN(fraud_check_step_without_outs);
    RUN(later_step_writes_earlier_buffer);
    RUN(max_descriptor_fits_job_msg);
    ns_runner_destroy(&s_runner);
    return ns_test_finish("exec_pipeline");
}
