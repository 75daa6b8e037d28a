/* sgemm: C = A * B in fp32 (row-major), tuned for CPUs such as PoCL.
 *
 * Arguments: A (in, M * K floats), B (in, K * N floats), C (out, M * N
 *   floats), uint M, uint N, uint K; all row-major.
 * NDRange: global (N / 64, M), N a multiple of 64; local (1, L) with L
 *   dividing M (128 to 256 suit PoCL: taller groups copy B fewer times).
 *   Any local size gives the same bytes.
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
 * anyway. The group's first work-item computes the whole group, in steps
 * of 128 k (a panel) by up to four column segments: it copies the step's
 * panel of B (128 rows of 64 to 256 columns, contiguous, so without the
 * cache-set conflicts of B's power-of-two row stride), then runs the
 * group's rows over each segment four at a time: 16 float16 sums in
 * registers, 16 independent fma chains (enough to hide the fma latency on
 * two pipes; one row's four are not), and each B vector loaded once for
 * four rows. Partial sums wait between panels in local memory (one
 * contiguous block, 256 bytes a row segment, room for 1024: the cap on a
 * job's group; a larger group would keep them in C), stored and loaded
 * exactly; the last panel writes C. While it computes a block of four
 * rows it prefetches the next block's rows of A and a share of the next
 * step's rows of B, so the copy finds them in cache (on the x86 CPUs
 * measured, a prefetch into a page missing from the TLB does next to
 * nothing: large matrices want huge pages, which the worker asks for).
 * Rows left over after the blocks of four go one at a time.
 * There are no barriers, so nothing is spilled per work-item. The other
 * work-items of the group return at once. B is read from memory once per
 * group, so taller groups (local (1, 128) to (1, 256)) copy it fewer
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

#define NS_SG_PANEL 512 /* float16 vectors of one panel of B (32 KB) */
#define NS_SG_KC 128    /* panel rows: NS_SG_PANEL / 4 */
#define NS_SG_SEGS 4    /* column segments a step copies (CPU path) */
#define NS_SG_ACC 1024  /* row segments whose partial sums local keeps */

/* prefetch for reading: 3 into L1 (A's next rows), 2 into L2 (B's next
 * panel, which would push the current one out of L1) */
#if defined(__has_builtin)
#if __has_builtin(__builtin_prefetch)
#define NS_SG_PF(p, l) __builtin_prefetch((p), 0, (l))
#endif
#endif
#ifndef NS_SG_PF
#define NS_SG_PF(p, l) ((void)(p))
#endif

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
/* ... from or to local memory at q */
#define NS_SG_LLOAD(c, q)                                                      \
    do {                                                                       \
        c##0 = (q)[0];                                                         \
        c##1 = (q)[1];                                                         \
        c##2 = (q)[2];                                                         \
        c##3 = (q)[3];                                                         \
    } while (0)
#define NS_SG_LSTORE(c, q)                                                     \
    do {                                                                       \
        (q)[0] = c##0;                                                         \
        (q)[1] = c##1;                                                         \
        (q)[2] = c##2;                                                         \
        (q)[3] = c##3;                                                         \
    } while (0)
#define NS_SG_FMA(c, av, p)                                                    \
    do {                                                                       \
        c##0 = fma(av, (p)[0], c##0);                                          \
        c##1 = fma(av, (p)[1], c##1);                                          \
        c##2 = fma(av, (p)[2], c##2);                                          \
        c##3 = fma(av, (p)[3], c##3);                                          \
    } while (0)

#ifdef NS_SG_GROUP
/* Where a row segment's sums come from and go to between panels. */
#define NS_SG_ZERO 0  /* the first panel: from 0 */
#define NS_SG_LOCAL 1 /* local memory, acc */
#define NS_SG_C 2     /* C itself, at o */

/* Rows a0 .. a0 + 3 K (panel columns 0 .. kn - 1) times the panel p: one
 * block of four row segments. Prefetches A's pan floats at each of pa ..
 * pa + 3 K (the next block) and pbn rows of pbw floats of B at pb (stride
 * N) for the next step. */
static inline void ns_sg_block4(__global const float *a0, size_t K, uint kn,
                                __local const float16 *p, uint from, uint to,
                                __local float16 *acc, __global float *o,
                                size_t N, __global const float *pa, uint pan,
                                __global const float *pb, uint pbn, uint pbw)
{
    float16 c00, c01, c02, c03, c10, c11, c12, c13;
    float16 c20, c21, c22, c23, c30, c31, c32, c33;
    __global const float *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;

    if (from == NS_SG_ZERO) {
        c00 = c01 = c02 = c03 = 0.0f;
        c10 = c11 = c12 = c13 = 0.0f;
        c20 = c21 = c22 = c23 = 0.0f;
        c30 = c31 = c32 = c33 = 0.0f;
    } else if (from == NS_SG_LOCAL) {
        NS_SG_LLOAD(c0, acc);
        NS_SG_LLOAD(c1, acc + 4);
        NS_SG_LLOAD(c2, acc + 8);
        NS_SG_LLOAD(c3, acc + 12);
    } else {
        NS_SG_LOAD(c0, o);
        NS_SG_LOAD(c1, o + N);
        NS_SG_LOAD(c2, o + 2 * N);
        NS_SG_LOAD(c3, o + 3 * N);
    }
    for (uint i = 0; i < pan; i += 16) {
        NS_SG_PF(pa + i, 3);
        NS_SG_PF(pa + K + i, 3);
        NS_SG_PF(pa + 2 * K + i, 3);
        NS_SG_PF(pa + 3 * K + i, 3);
    }
    for (uint i = 0; i < pbn; i++)
        for (uint q = 0; q < pbw; q += 16)
            NS_SG_PF(pb + i * N + q, 2);
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
    if (to == NS_SG_LOCAL) {
        NS_SG_LSTORE(c0, acc);
        NS_SG_LSTORE(c1, acc + 4);
        NS_SG_LSTORE(c2, acc + 8);
        NS_SG_LSTORE(c3, acc + 12);
    } else {
        NS_SG_STORE(c0, o);
        NS_SG_STORE(c1, o + N);
        NS_SG_STORE(c2, o + 2 * N);
        NS_SG_STORE(c3, o + 3 * N);
    }
}

/* The group's rows row0 .. row0 + ly - 1 times its columns col0 .. col0 +
 * 64 lx - 1, all by one work-item (see the top). panel holds NS_SG_SEGS
 * panels, accs NS_SG_ACC row segments. */
static inline void ns_sgemm_group(__global const float *A,
                                  __global const float *B, __global float *C,
                                  const uint N, const uint K, size_t row0,
                                  uint ly, size_t col0, uint lx,
                                  __local float16 *panel, __local float16 *accs)
{
    float16 c00, c01, c02, c03;
    bool use_acc = ly * lx <= NS_SG_ACC;

    /* panels outer, column segments inner: the group's rows of A for one
     * panel stay in cache for all its column segments */
    for (uint k0 = 0; k0 == 0 || k0 < K; k0 += NS_SG_KC) {
        uint kn = K > k0 ? min((uint)NS_SG_KC, K - k0) : 0;
        uint from = k0 == 0 ? NS_SG_ZERO : use_acc ? NS_SG_LOCAL : NS_SG_C;
        uint to = k0 + NS_SG_KC >= K || !use_acc ? NS_SG_C : NS_SG_LOCAL;
        for (uint j0 = 0; j0 < lx; j0 += NS_SG_SEGS) {
            uint nj = min((uint)NS_SG_SEGS, lx - j0);
            size_t cj = col0 + 64 * (size_t)j0;
            /* B[k0 .. k0 + kn - 1][cj .. cj + 64 nj - 1] as nj panels of
             * kn rows of 64, each contiguous */
            for (uint i = 0; i < kn; i++) {
                __global const float *b = B + (size_t)(k0 + i) * N + cj;
                for (uint j = 0; j < nj; j++) {
                    __local float16 *d = panel + (j * NS_SG_KC + i) * 4;
                    d[0] = vload16(4 * j, b);
                    d[1] = vload16(4 * j + 1, b);
                    d[2] = vload16(4 * j + 2, b);
                    d[3] = vload16(4 * j + 3, b);
                }
            }
            /* the next step, whose rows of B the blocks prefetch a share
             * each: (k0, j0 + SEGS) or (k0 + KC, 0) */
            bool same = j0 + NS_SG_SEGS < lx;
            uint nk0 = same ? k0 : k0 + NS_SG_KC;
            size_t ncj = same ? cj + 64 * NS_SG_SEGS : col0;
            uint nnj = min((uint)NS_SG_SEGS, same ? lx - j0 - NS_SG_SEGS : lx);
            uint nkn = K > nk0 ? min((uint)NS_SG_KC, K - nk0) : 0;
            uint nblk = nj * (ly / 4);
            uint per = nblk ? (nkn + nblk - 1) / nblk : 0, pb0 = 0;
            for (uint j = 0; j < nj; j++) {
                size_t col = cj + 64 * (size_t)j;
                __local const float16 *pj = panel + j * NS_SG_PANEL;
                __local float16 *aj = accs + (size_t)(j0 + j) * ly * 4;
                uint y = 0;
                for (; y + 4 <= ly; y += 4) {
                    size_t r = row0 + y;
                    /* the next block: four rows down, the first four for
                     * the next segment, or of the next panel */
                    __global const float *pa = A + row0 * K + k0;
                    uint pan = kn;
                    if (y + 8 <= ly) {
                        pa = A + (r + 4) * K + k0;
                    } else if (j + 1 == nj && !same) {
                        pa = A + row0 * K + (nkn ? nk0 : 0);
                        pan = nkn;
                    }
                    uint pb1 = min(nkn, pb0 + per);
                    ns_sg_block4(A + r * K + k0, K, kn, pj, from, to,
                                 aj + y * 4, C + r * N + col, N, pa, pan,
                                 B + (size_t)(nk0 + pb0) * N + ncj, pb1 - pb0,
                                 64 * nnj);
                    pb0 = pb1;
                }
                for (; y < ly; y++) {
                    size_t r = row0 + y;
                    __global const float *a0 = A + r * K + k0;
                    __global float *o = C + r * N + col;
                    __local float16 *q = aj + y * 4;
                    if (from == NS_SG_ZERO)
                        c00 = c01 = c02 = c03 = 0.0f;
                    else if (from == NS_SG_LOCAL)
                        NS_SG_LLOAD(c0, q);
                    else
                        NS_SG_LOAD(c0, o);
                    __local const float16 *p = pj;
                    for (uint k = 0; k < kn; k++, p += 4)
                        NS_SG_FMA(c0, (float16)a0[k], p);
                    if (to == NS_SG_LOCAL)
                        NS_SG_LSTORE(c0, q);
                    else
                        NS_SG_STORE(c0, o);
                }
            }
        }
    }
}
#endif

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
                            const uint K, __local float16 *panel,
                            __local float16 *accs)
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
            ns_sgemm_group(A, B, C, N, K, row0, ly, col0, lx, panel, accs);
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

/* local memory: the CPU path's panels and partial sums (384 KB; PoCL
 * gives 2 MB or more), one panel (32 KB) on GPUs */
#ifdef NS_SG_GROUP
#define NS_SG_LOCALS                                                           \
    __local float16 panel[NS_SG_PANEL * NS_SG_SEGS];                           \
    __local float16 accs[NS_SG_ACC * 4]
#else
#define NS_SG_LOCALS                                                           \
    __local float16 panel[NS_SG_PANEL];                                        \
    __local float16 *accs = 0
#endif

__kernel void sgemm(__global const float *A, __global const float *B,
                    __global float *C, const uint M, const uint N, const uint K)
{
    NS_SG_LOCALS;
    ns_sgemm(A, B, C, M, N, K, panel, accs);
}

/* sgemm_batched: matrix b is global id 2 (see the top). */
__kernel void sgemm_batched(__global const float *A, __global const float *B,
                            __global float *C, const uint M, const uint N,
                            const uint K)
{
    NS_SG_LOCALS;
    size_t b = get_global_id(2);
    ns_sgemm(A + b * M * K, B + b * K * N, C + b * M * N, M, N, K, panel, accs);
}
