/* bench_fma: fp32 multiply-add throughput for the device benchmark
 * (exec/devbench.c). Not a job kernel.
 *
 * Each work-item runs NS_CHAINS independent chains x = x * a + b on
 * float16 or float8 vectors, so a pipelined FMA unit always has
 * independent work. a and b are kernel arguments and every chain is
 * summed into the output, so nothing can be folded or dropped; the lanes
 * and chains start from distinct values, so none can be merged either.
 * With a = b = 0.5 every lane converges to exactly 1.0, which the host
 * checks. Flops per work-item and iteration: width * chains * 2.
 *
 * NS_BENCH_FMA (set by the host when the device reports CL_FP_FMA) picks
 * fma(), one instruction on such hardware; mad() is the fallback, which
 * some compilers (PoCL) lower to a separate multiply and add.
 */
#pragma OPENCL FP_CONTRACT OFF

#ifdef NS_BENCH_FMA
#define NS_MADD(x, a, b) fma(x, a, b)
#else
#define NS_MADD(x, a, b) mad(x, a, b)
#endif

#define NS_STEP4(x0, x1, x2, x3, a, b)                                         \
    x0 = NS_MADD(x0, a, b);                                                    \
    x1 = NS_MADD(x1, a, b);                                                    \
    x2 = NS_MADD(x2, a, b);                                                    \
    x3 = NS_MADD(x3, a, b)

/* float16 x 16 chains: 256 lanes in flight, for wide SIMD CPUs. */
__kernel void bench_fma(__global float *out, const float a, const float b,
                          const uint iters)
{
    const float16 va = (float16)(a), vb = (float16)(b);
    const float16 lane =
        (float16)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f,
                  9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f) *
        0.0625f;
    const float seed = (float)(get_global_id(0) & 255) * 0.001f;
    float16 x0 = lane + seed, x1 = x0 + 0.01f, x2 = x0 + 0.02f;
    float16 x3 = x0 + 0.03f, x4 = x0 + 0.04f, x5 = x0 + 0.05f;
    float16 x6 = x0 + 0.06f, x7 = x0 + 0.07f, x8 = x0 + 0.08f;
    float16 x9 = x0 + 0.09f, x10 = x0 + 0.10f, x11 = x0 + 0.11f;
    float16 x12 = x0 + 0.12f, x13 = x0 + 0.13f, x14 = x0 + 0.14f;
    float16 x15 = x0 + 0.15f;
    for (uint i = 0; i < iters; i++) {
        NS_STEP4(x0, x1, x2, x3, va, vb);
        NS_STEP4(x4, x5, x6, x7, va, vb);
        NS_STEP4(x8, x9, x10, x11, va, vb);
        NS_STEP4(x12, x13, x14, x15, va, vb);
    }
    float16 s = (((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))) +
                (((x8 + x9) + (x10 + x11)) + ((x12 + x13) + (x14 + x15)));
    float8 s8 = s.lo + s.hi;
    float4 s4 = s8.lo + s8.hi;
    float2 s2 = s4.lo + s4.hi;
    out[get_global_id(0)] = s2.x + s2.y;
}

/* float8 x 8 chains: 64 lanes, for GPUs (registers per work-item) and
 * 256-bit SIMD. */
__kernel void bench_fma8(__global float *out, const float a, const float b,
                         const uint iters)
{
    const float8 va = (float8)(a), vb = (float8)(b);
    const float8 lane =
        (float8)(0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f) * 0.125f;
    const float seed = (float)(get_global_id(0) & 255) * 0.001f;
    float8 x0 = lane + seed, x1 = x0 + 0.01f, x2 = x0 + 0.02f;
    float8 x3 = x0 + 0.03f, x4 = x0 + 0.04f, x5 = x0 + 0.05f;
    float8 x6 = x0 + 0.06f, x7 = x0 + 0.07f;
    for (uint i = 0; i < iters; i++) {
        NS_STEP4(x0, x1, x2, x3, va, vb);
        NS_STEP4(x4, x5, x6, x7, va, vb);
    }
    float8 s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    float4 s4 = s.lo + s.hi;
    float2 s2 = s4.lo + s4.hi;
    out[get_global_id(0)] = s2.x + s2.y;
}
