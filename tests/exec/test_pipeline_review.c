/* test_pipeline_review.c - review findings on pipelines (reproductions). */
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
#include <sys/wait.h>
#include <unistd.h>

#define N 256

static const char s_src[] =
    "__kernel void lin(__global const float *x, __global float *h)\n"
    "{ size_t i = get_global_id(0); h[i] = x[i] * 2.0f + 1.0f; }\n"
    "__kernel void sq(__global const float *x, __global float *y)\n"
    "{ size_t i = get_global_id(0); y[i] = x[i] * x[i]; }\n";

static ns_runner_t *s_runner;

static void s_buf(ns_step_t *st, uint32_t b)
{
    st->args[st->n_args].kind = NS_ARG_BUF;
    st->args[st->n_args++].v.u32 = b;
}

/* two independent steps: h = 2x+1 (step 0), y = x*x (step 1, reads only x) */
static void s_make(ns_job_t *job, const float *x)
{
    ns_job_init(job);
    CHECK_RC(ns_job_set_source(job, s_src, sizeof s_src - 1), NS_OK);
    job->args[0].kind = NS_ARG_IN;
    job->args[0].size = N * 4;
    ns_hash(job->args[0].hash, x, N * 4);
    job->args[1].kind = NS_ARG_OUT;
    job->args[1].size = N * 4;
    job->args[2].kind = NS_ARG_OUT;
    job->args[2].size = N * 4;
    job->n_args = 3;
    job->n_steps = 2;
    job->steps = calloc(2, sizeof *job->steps);
    ns_step_t *st = &job->steps[0];
    snprintf(st->entry, sizeof st->entry, "lin");
    st->dims = 1;
    st->global[0] = N;
    s_buf(st, 0);
    s_buf(st, 1);
    st = &job->steps[1];
    snprintf(st->entry, sizeof st->entry, "sq");
    st->dims = 1;
    st->global[0] = N;
    s_buf(st, 0);
    s_buf(st, 2);
}

/* A cheat on step 1 (which reads no earlier step's buffer): the proof has
 * no outs, and ns_fraud_check must not crash on it. */
TEST(fraud_check_step_without_outs)
{
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    ns_job_t job;
    ns_hash_t id, root;
    char err[512];
    s_make(&job, x);
    CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK);
    CHECK_RC(ns_job_id(&job, id), NS_OK);
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS] = {0};
    memset(in, 0, sizeof in);
    in[0] = (ns_input_t){x, sizeof x, false};
    outs[1] = ns_buf_alloc(N * 4);
    outs[2] = ns_buf_alloc(N * 4);
    CHECK_RC(ns_runner_run(s_runner, &job, in, outs, NULL, err, sizeof err),
             NS_OK);
    ((float *)outs[2])[7] += 1.0f; /* cheat in step 1 */
    CHECK_RC(ns_commit_root(&job, id, outs, root), NS_OK);
    uint8_t secret[32];
    ns_check_result_t res;
    randombytes_buf(secret, sizeof secret);
    CHECK_RC(ns_spot_check(s_runner, &job, id, in, outs, root, secret,
                           NS_MAX_CHECKS, &res, err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(res.mismatched, 1);
    CHECK_EQ_INT(res.first_bad, N + 7);
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
    float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i;
    ns_job_t job;
    ns_hash_t id, root;
    char err[512];
    s_make(&job, x);
    CHECK_RC(ns_job_set_source(&job, s_src2, sizeof s_src2 - 1), NS_OK);
    snprintf(job.steps[1].entry, sizeof job.steps[1].entry, "mv");
    job.steps[1].args[0].v.u32 = 1; /* h, not x */
    job.args[0].size = N * 4;
    /* x is named by step 0 only: fine */
    CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK);
    CHECK_RC(ns_job_id(&job, id), NS_OK);
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *outs[NS_MAX_ARGS] = {0};
    memset(in, 0, sizeof in);
    in[0] = (ns_input_t){x, sizeof x, false};
    outs[1] = ns_buf_alloc(N * 4);
    outs[2] = ns_buf_alloc(N * 4);
    CHECK_RC(ns_runner_run(s_runner, &job, in, outs, NULL, err, sizeof err),
             NS_OK);
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
    RUN(fraud_check_step_without_outs);
    RUN(later_step_writes_earlier_buffer);
    RUN(max_descriptor_fits_job_msg);
    ns_runner_destroy(&s_runner);
    return ns_test_finish("exec_pipeline_review");
}
