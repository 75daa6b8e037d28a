/* sgemm: C = A * B in fp32 (row-major), tuned for CPUs such as PoCL.
 *
 * Arguments: A (in, M * K floats), B (in, K * N floats), C (out, M * N
 *   floats), uint M, uint N, uint K; all row-major.
 * NDRange: global (N / 64, M), N a multiple of 64; local (1, L) with L
 *   dividing M (64 to 256 suit PoCL: taller groups copy B fewer times).
 *   Any local size gives the same bytes.
 * Batched (--entry sgemm_batched): BATCH products C[b] = A[b] * B[b] in
 *   one job: A (in, BATCH x M x K), B (in, BATCH x K x N), C (out, BATCH x
 *   M x N), uint M, N, K; NDRange (N / 64, M, BATCH), local (1, L, 1);
 *   each product is exactly sgemm's, and shards cut along the batch.
 * Item: one work-item = one row segment C[row][64x .. 64x + 63],
 *   item_bytes 256; item x + (N / 64) * row owns bytes [256 * item,
 *   256 * (item + 1)) of C, which is where that segment lies in row-major C.
 * Every element: c = 0.0f; for k = 0 .. K-1: c = fma(A[row][k], B[k][col],
 *   c). fma is correctly rounded and the order is fixed, so the result is
 *   exact: equal bit for bit to sgemm_gpu and to the same loop in C with
 *   fmaf (on devices that keep fp32 denormals).
 *
 * Why it is fast on CPUs: a work-item keeps its 64 sums in four float16
 * registers and streams its row of A; the work-group copies a panel of B
 * (up to 128 rows of its columns, 32 KB, L1-sized) into local memory, so
 * B is read from memory once per work-group, not once per row, and the
 * fma read it from L1 without the cache-set conflicts of B's power-of-two
 * row stride. Work-items share the copy by local id, so any group size
 * works; a lone work-item (the re-run of one item) reads B directly.
 * Only get_global_id and get_local_id/size are used: a re-run with a
 * global offset sees the same positions.
 */
#pragma OPENCL FP_CONTRACT OFF

#define NS_SG_PANEL 512 /* float16 vectors of B in local memory (32 KB) */

static inline void ns_sgemm(__global const float *A, __global const float *B,
                            __global float *C, const uint M, const uint N,
                            const uint K, __local float16 *panel)
{
    uint lx = (uint)get_local_size(0);
    uint lsize = lx * (uint)get_local_size(1);
    uint lid = (uint)(get_local_id(1) * lx + get_local_id(0));
    uint pw = lx * 4; /* panel row width in float16: the group's columns */
    uint kc = NS_SG_PANEL / pw; /* panel rows per chunk; 0 if lx > 128 */
    size_t row = get_global_id(1);
    size_t col = get_global_id(0) * 64;
    size_t col0 = col - get_local_id(0) * 64; /* the group's first column */
    __global const float *a = A + row * K;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;

    /* Uniform over the work-group, so the barriers below are reached by
     * all or none. A lone work-item (the re-run of one item) reads B
     * directly: a panel would only add a copy. A group that sticks out of
     * the matrix (an NDRange not matching M and N) reads only in bounds and
     * leaves its stray items 0. */
    size_t row0 = row - get_local_id(1);
    bool fits = lsize > 1 && kc != 0 && col0 + 64 * (size_t)lx <= N &&
                row0 + get_local_size(1) <= M;
    if (!fits && row < M && col + 64 <= N) {
        /* straight from global memory, no panel */
        __global const float *b = B + col;
        for (uint k = 0; k < K; k++) {
            float16 av = (float16)a[k];
            __global const float *bk = b + (size_t)k * N;
            c0 = fma(av, vload16(0, bk), c0);
            c1 = fma(av, vload16(1, bk), c1);
            c2 = fma(av, vload16(2, bk), c2);
            c3 = fma(av, vload16(3, bk), c3);
        }
    }
    for (uint k0 = 0; fits && k0 < K; k0 += kc) {
        uint kn = min(kc, K - k0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous panel is consumed */
        /* Each work-item copies one contiguous run of the panel: on a CPU
         * the work-items of a group run one after the other, so the panel
         * is read row by row, in order (an interleaved share per
         * work-item would jump between rows at every load). Vector i is
         * row i / pw, vector i % pw. */
        uint n = kn * pw, run = (n + lsize - 1) / lsize;
        uint i = min(lid * run, n), end = min(i + run, n);
        uint kk = i / pw, v = i % pw;
        for (; i < end; i++) {
            panel[i] = vload16(0, B + (size_t)(k0 + kk) * N + col0 + 16 * v);
            if (++v == pw) {
                v = 0;
                kk++;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __local const float16 *p = panel + get_local_id(0) * 4;
        __global const float *ak = a + k0;
        uint k = 0;
        for (; k + 4 <= kn; k += 4) {
            float4 a4 = vload4(0, ak + k);
            float16 av = (float16)a4.s0;
            c0 = fma(av, p[0], c0);
            c1 = fma(av, p[1], c1);
            c2 = fma(av, p[2], c2);
            c3 = fma(av, p[3], c3);
            p += pw;
            av = (float16)a4.s1;
            c0 = fma(av, p[0], c0);
            c1 = fma(av, p[1], c1);
            c2 = fma(av, p[2], c2);
            c3 = fma(av, p[3], c3);
            p += pw;
            av = (float16)a4.s2;
            c0 = fma(av, p[0], c0);
            c1 = fma(av, p[1], c1);
            c2 = fma(av, p[2], c2);
            c3 = fma(av, p[3], c3);
            p += pw;
            av = (float16)a4.s3;
            c0 = fma(av, p[0], c0);
            c1 = fma(av, p[1], c1);
            c2 = fma(av, p[2], c2);
            c3 = fma(av, p[3], c3);
            p += pw;
        }
        for (; k < kn; k++) {
            float16 av = (float16)ak[k];
            c0 = fma(av, p[0], c0);
            c1 = fma(av, p[1], c1);
            c2 = fma(av, p[2], c2);
            c3 = fma(av, p[3], c3);
            p += pw;
        }
    }
    __global float *o = C + row * N + col;
    vstore16(c0, 0, o);
    vstore16(c1, 1, o);
    vstore16(c2, 2, o);
    vstore16(c3, 3, o);
}

__kernel void sgemm(__global const float *A, __global const float *B,
                    __global float *C, const uint M, const uint N, const uint K)
{
    __local float16 panel[NS_SG_PANEL];
    ns_sgemm(A, B, C, M, N, K, panel);
}

/* sgemm_batched: matrix b is global id 2 (see the top). */
__kernel void sgemm_batched(__global const float *A, __global const float *B,
                            __global float *C, const uint M, const uint N,
                            const uint K)
{
    __local float16 panel[NS_SG_PANEL];
    size_t b = get_global_id(2);
    ns_sgemm(A + b * M * K, B + b * K * N, C + b * M * N, M, N, K, panel);
}
