/* bench_fill.h - seeded benchmark inputs, the same in every C bench. */
#ifndef NS_BENCH_FILL_H
#define NS_BENCH_FILL_H

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

#endif
