/* bench_common.h - what the C benches share: seeded inputs, and an input
 * argument set on a job. */
#ifndef NS_BENCH_COMMON_H
#define NS_BENCH_COMMON_H

#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Deterministic floats in [-1, 1): xorshift64*, no libc rand state. */
static inline void ns_bench_fill_floats(float *p, uint64_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        uint64_t r = x * 0x2545f4914f6cdd1dull;
        p[i] = (float)(r >> 40) * (1.0f / 8388608.0f) - 1.0f;
    }
}

/* Argument i of job: an input of len bytes at data, hashed (as submit
 * does) and given to the runner as verified. */
static inline void ns_bench_arg_in(ns_job_t *job, ns_input_t *inputs,
                                   uint32_t i, const void *data, uint64_t len)
{
    job->args[i].kind = NS_ARG_IN;
    job->args[i].size = len;
    ns_hash(job->args[i].hash, data, (size_t)len);
    inputs[i].data = data;
    inputs[i].len = (size_t)len;
    inputs[i].verified = true;
}

/* An SGEMM job of n x n (a multiple of 64) with the given built-in
 * (sgemm or sgemm_gpu) and work-group rows local_y (lowered until it
 * divides n): A and B as inputs, C as output, exact. */
static inline int ns_bench_sgemm_job(ns_job_t *job, ns_input_t *inputs,
                                     const float *a, const float *b, uint32_t n,
                                     const char *builtin, uint32_t local_y)
{
    uint64_t elems = (uint64_t)n * n;
    const ns_builtin_t *bi = ns_builtin_find(builtin);
    if (!bi) {
        fprintf(stderr, "bench: no built-in '%s'\n", builtin);
        return NS_ERR_NOTFOUND;
    }
    ns_job_init(job);
    memset(inputs, 0, NS_MAX_ARGS * sizeof *inputs);
    snprintf(job->builtin, sizeof job->builtin, "%s", bi->name);
    snprintf(job->entry, sizeof job->entry, "%s", bi->entry);
    ns_hash(job->source_hash, bi->source, bi->source_len);
    job->dims = 2;
    job->global[0] = n / 64;
    job->global[1] = n;
    while (n % local_y != 0)
        local_y--;
    job->local[0] = 1;
    job->local[1] = local_y;
    job->n_args = 6;
    ns_bench_arg_in(job, inputs, 0, a, elems * sizeof(float));
    ns_bench_arg_in(job, inputs, 1, b, elems * sizeof(float));
    job->args[2].kind = NS_ARG_OUT;
    job->args[2].size = elems * sizeof(float);
    job->args[2].item_bytes = 64 * sizeof(float);
    for (uint32_t i = 3; i < 6; i++) {
        job->args[i].kind = NS_ARG_U32;
        job->args[i].v.u32 = n;
    }
    job->det = NS_DET_EXACT;
    job->item_kind = NS_ITEM_WORK_ITEM;
    job->work_estimate = 2 * (uint64_t)n * n * n;
    char err[1024];
    int rc = ns_job_validate(job, err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "bench: job invalid: %s\n", err);
    return rc;
}

#endif
