/* bench_common.h - what the C benches share: seeded inputs, and an input
 * argument set on a job. */
#ifndef NS_BENCH_COMMON_H
#define NS_BENCH_COMMON_H

#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <stdint.h>

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

#endif
