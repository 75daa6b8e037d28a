/* sgemm: C = A * B in fp32 (row-major), tuned for CPUs such as PoCL.
 *
 * Arguments: A (in, M * K floats), B (in, K * N floats), C (out, M * N
 *   floats), uint M, uint N, uint K; all row-major.
 * NDRange: global (N / 64, M), N a multiple of 64; local (1, L) with L
 *   dividing M (64 to 256 suit PoCL, 128 best: taller groups copy B fewer
 *   times; (2, L) reuses A's rows for two column segments and is a little
 *   faster again). Any local size gives the same bytes.
 * Batched (--entry sgemm_batched): BATCH products C[b] = A[b] * B[b] in
 *   one job: A (in, BATCH x M x K), B (in, BATCH x K x N), C (out, BATCH x
 *   M x N), uint M, N, K; NDRange (N / 64, M, BATCH), local (1, L, 1);
 *   each product is exactly sgemm's, and shards cut along the batch.
 * Item: one work-item = one row segment C[row][64x .. 64x + 63],
 *   item_bytes 256; item x + (N / 64) * row owns bytes [256 * item,
 *   256 * (item + 1)) of C, which is where that segment lies in row-major C.
 *   With a local size the unit of checks is the work-group, which owns
 *   its items' segments (its first work-item computes them all, below).
 * Every element: c = 0.0f; for k = 0 .. K-1: c = fma(A[row][k], B[k][col],
 *   c). fma is correctly rounded and the order is fixed, so the result is
 *   exact: equal bit for bit to sgemm_gpu and to the same loop in C with
 *   fmaf (on devices that keep fp32 denormals).
 *
 * Why it is fast on CPUs: the unit of checks of a job with a local size
 * is the work-group, so a group may share its rows out as it likes, and
 * on a CPU (PoCL) the work-items of a group run one after the other
 * anyway. The group's first work-item computes the whole group: it copies
 * a panel of B (128 rows of 64 columns, 32 KB, L1-sized, contiguous, so
 * without the cache-set conflicts of B's power-of-two row stride), then
 * runs the group's rows over it four at a time: 16 float16 sums in
 * registers, 16 independent fma chains (enough to hide the fma latency on
 * two pipes; one row's four are not), and each B vector loaded once for
 * four rows. Partial sums wait in C between panels (stored and loaded
 * exactly); rows left over after the blocks of four go one at a time.
 * There are no barriers, so nothing is spilled per work-item. The other
 * work-items of the group return at once. B is read from memory once per
 * group, so taller groups (local (1, 64) to (1, 256)) copy it fewer
 * times. A lone work-item (the re-run of one item of a job without a local
 * size) or a group that sticks out of the matrix computes each item's own
 * segment, reading B directly. Every element sees the same fma in the same
 * order on every path, so all give the same bytes. Only get_global_id and
 * get_local_id/size are used: a re-run with a global offset sees the same
 * positions. GPU compilers (no CPU target macro) or -D NS_SGEMM_ITEMS
 * take a per-item path instead: each work-item its own segment, over a
 * panel of B the group copies together (sgemm_gpu suits GPUs better).
 */
#pragma OPENCL FP_CONTRACT OFF

/* CPU compilers (PoCL) define their target's macro; GPU compilers do not,
 * and there a group computed by one work-item would run on one lane. */
#if !defined(NS_SGEMM_ITEMS) &&                                                \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) ||       \
     defined(__arm__) || defined(__riscv) || defined(__powerpc64__))
#define NS_SG_GROUP 1
#endif

#define NS_SG_PANEL 512 /* float16 vectors of B in local memory (32 KB) */
#define NS_SG_KC 128    /* panel rows: NS_SG_PANEL / 4 */

/* one row's 64 sums (c##0 .. c##3) from or to C at o */
#define NS_SG_LOAD(c, o)                                                       \
    do {                                                                       \
        c##0 = vload16(0, o);                                                  \
        c##1 = vload16(1, o);                                                  \
        c##2 = vload16(2, o);                                                  \
        c##3 = vload16(3, o);                                                  \
    } while (0)
#define NS_SG_STORE(c, o)                                                      \
    do {                                                                       \
        vstore16(c##0, 0, o);                                                  \
        vstore16(c##1, 1, o);                                                  \
        vstore16(c##2, 2, o);                                                  \
        vstore16(c##3, 3, o);                                                  \
    } while (0)
#define NS_SG_FMA(c, av, p)                                                    \
    do {                                                                       \
        c##0 = fma(av, (p)[0], c##0);                                          \
        c##1 = fma(av, (p)[1], c##1);                                          \
        c##2 = fma(av, (p)[2], c##2);                                          \
        c##3 = fma(av, (p)[3], c##3);                                          \
    } while (0)

/* The group's rows row0 .. row0 + ly - 1 times its columns col0 .. col0 +
 * 64 lx - 1, all by one work-item (see the top). */
static inline void ns_sgemm_group(__global const float *A,
                                  __global const float *B, __global float *C,
                                  const uint N, const uint K, size_t row0,
                                  uint ly, size_t col0, uint lx,
                                  __local float16 *panel)
{
    float16 c00, c01, c02, c03, c10, c11, c12, c13;
    float16 c20, c21, c22, c23, c30, c31, c32, c33;

    /* panels outer, column segments inner: the group's rows of A for one
     * panel stay in cache for all its column segments */
    for (uint k0 = 0; k0 == 0 || k0 < K; k0 += NS_SG_KC) {
        uint kn = K > k0 ? min((uint)NS_SG_KC, K - k0) : 0;
        for (uint j = 0; j < lx; j++) {
            size_t col = col0 + 64 * (size_t)j;
            /* B[k0 .. k0 + kn - 1][col .. col + 63], rows contiguous: the
             * fma below read it from L1, without the cache-set conflicts
             * of B's power-of-two row stride */
            for (uint i = 0; i < kn; i++) {
                __global const float *b = B + (size_t)(k0 + i) * N + col;
                panel[4 * i] = vload16(0, b);
                panel[4 * i + 1] = vload16(1, b);
                panel[4 * i + 2] = vload16(2, b);
                panel[4 * i + 3] = vload16(3, b);
            }
            /* rows four at a time, then one at a time; the partial sums
             * wait in C between panels (stored and loaded exactly) */
            for (uint y = 0; y < ly;) {
                size_t r = row0 + y;
                __global const float *a0 = A + r * K + k0;
                __global float *o = C + r * N + col;
                if (y + 4 <= ly) {
                    __global const float *a1 = a0 + K, *a2 = a1 + K;
                    __global const float *a3 = a2 + K;
                    if (k0 == 0) {
                        c00 = c01 = c02 = c03 = 0.0f;
                        c10 = c11 = c12 = c13 = 0.0f;
                        c20 = c21 = c22 = c23 = 0.0f;
                        c30 = c31 = c32 = c33 = 0.0f;
                    } else {
                        NS_SG_LOAD(c0, o);
                        NS_SG_LOAD(c1, o + N);
                        NS_SG_LOAD(c2, o + 2 * (size_t)N);
                        NS_SG_LOAD(c3, o + 3 * (size_t)N);
                    }
                    __local const float16 *p = panel;
                    for (uint k = 0; k < kn; k++, p += 4) {
                        float16 b0 = p[0], b1 = p[1], b2 = p[2], b3 = p[3];
                        float16 av = (float16)a0[k];
                        c00 = fma(av, b0, c00);
                        c01 = fma(av, b1, c01);
                        c02 = fma(av, b2, c02);
                        c03 = fma(av, b3, c03);
                        av = (float16)a1[k];
                        c10 = fma(av, b0, c10);
                        c11 = fma(av, b1, c11);
                        c12 = fma(av, b2, c12);
                        c13 = fma(av, b3, c13);
                        av = (float16)a2[k];
                        c20 = fma(av, b0, c20);
                        c21 = fma(av, b1, c21);
                        c22 = fma(av, b2, c22);
                        c23 = fma(av, b3, c23);
                        av = (float16)a3[k];
                        c30 = fma(av, b0, c30);
                        c31 = fma(av, b1, c31);
                        c32 = fma(av, b2, c32);
                        c33 = fma(av, b3, c33);
                    }
                    NS_SG_STORE(c0, o);
                    NS_SG_STORE(c1, o + N);
                    NS_SG_STORE(c2, o + 2 * (size_t)N);
                    NS_SG_STORE(c3, o + 3 * (size_t)N);
                    y += 4;
                } else {
                    if (k0 == 0)
                        c00 = c01 = c02 = c03 = 0.0f;
                    else
                        NS_SG_LOAD(c0, o);
                    __local const float16 *p = panel;
                    for (uint k = 0; k < kn; k++, p += 4)
                        NS_SG_FMA(c0, (float16)a0[k], p);
                    NS_SG_STORE(c0, o);
                    y++;
                }
            }
        }
    }
}

#ifndef NS_SG_GROUP
/* Per item (GPUs): the group copies a panel of B together (each work-item
 * one contiguous run of it), then each work-item runs its own row over
 * it. */
static inline void ns_sgemm_items(__global const float *A,
                                  __global const float *B, __global float *C,
                                  const uint N, const uint K, size_t row,
                                  size_t col, size_t col0,
                                  __local float16 *panel)
{
    uint lx = (uint)get_local_size(0);
    uint lsize = lx * (uint)get_local_size(1);
    uint lid = (uint)(get_local_id(1) * lx + get_local_id(0));
    uint pw = lx * 4; /* panel row width in float16: the group's columns */
    uint kc = NS_SG_PANEL / pw; /* panel rows per chunk */
    __global const float *a = A + row * K;
    float16 c00 = 0.0f, c01 = 0.0f, c02 = 0.0f, c03 = 0.0f;

    if (kc == 0) { /* more than 128 column segments: B directly */
        __global const float *b = B + col;
        for (uint k = 0; k < K; k++) {
            __global const float *bk = b + (size_t)k * N;
            float16 av = (float16)a[k];
            c00 = fma(av, vload16(0, bk), c00);
            c01 = fma(av, vload16(1, bk), c01);
            c02 = fma(av, vload16(2, bk), c02);
            c03 = fma(av, vload16(3, bk), c03);
        }
    }
    for (uint k0 = 0; kc != 0 && k0 < K; k0 += kc) {
        uint kn = min(kc, K - k0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous panel is consumed */
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
        for (uint k = 0; k < kn; k++, p += pw)
            NS_SG_FMA(c0, (float16)a[k0 + k], p);
    }
    __global float *o = C + row * N + col;
    NS_SG_STORE(c0, o);
}
#endif

static inline void ns_sgemm(__global const float *A, __global const float *B,
                            __global float *C, const uint M, const uint N,
                            const uint K, __local float16 *panel)
{
    uint lx = (uint)get_local_size(0), ly = (uint)get_local_size(1);
    size_t row = get_global_id(1);
    size_t col = get_global_id(0) * 64;
    size_t col0 = col - get_local_id(0) * 64; /* the group's first column */
    size_t row0 = row - get_local_id(1);      /* the group's first row */

    /* Uniform over the work-group. A group that fits the matrix is
     * computed whole by its first work-item; a lone work-item (the re-run
     * of one item) or a group that sticks out of the matrix (an NDRange not
     * matching M and N) computes each item's own segment, in bounds only,
     * reading B directly. */
    bool fits = lx * ly > 1 && col0 + 64 * (size_t)lx <= N && row0 + ly <= M;
#ifdef NS_SG_GROUP
    if (fits) {
        if (get_local_id(0) == 0 && get_local_id(1) == 0)
            ns_sgemm_group(A, B, C, N, K, row0, ly, col0, lx, panel);
        return;
    }
#else
    if (fits) {
        ns_sgemm_items(A, B, C, N, K, row, col, col0, panel);
        return;
    }
#endif
    if (row >= M || col + 64 > N)
        return;
    __global const float *a0 = A + row * K;
    __global const float *b = B + col;
    float16 c00 = 0.0f, c01 = 0.0f, c02 = 0.0f, c03 = 0.0f;
    for (uint k = 0; k < K; k++) {
        __global const float *bk = b + (size_t)k * N;
        float16 av = (float16)a0[k];
        c00 = fma(av, vload16(0, bk), c00);
        c01 = fma(av, vload16(1, bk), c01);
        c02 = fma(av, vload16(2, bk), c02);
        c03 = fma(av, vload16(3, bk), c03);
    }
    __global float *o = C + row * N + col;
    NS_SG_STORE(c0, o);
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
