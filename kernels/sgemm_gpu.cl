/* sgemm_gpu: C = A * B in fp32 (row-major), local-memory tiles for GPUs.
 *
 * Arguments, NDRange and items exactly as sgemm: A (in, M * K floats),
 *   B (in, K * N floats), C (out, M * N floats), uint M, uint N, uint K;
 *   global (N / 64, M), N a multiple of 64; item = one work-item = the row
 *   segment C[row][64x .. 64x + 63], item_bytes 256. Suggested local
 *   (1, 64) or (1, 128): a work-group is a tile of rows sharing the same
 *   64 columns. Any local size gives the same bytes.
 * Every element: c = 0.0f; for k = 0 .. K-1: c = fma(A[row][k], B[k][col],
 *   c): the same operations in the same order as sgemm, so both built-ins
 *   give the same bytes (and equal a plain C loop with fmaf on devices that
 *   keep fp32 denormals). They are separate built-ins only because their
 *   sources, hence job ids, differ.
 *
 * Per chunk of kc values of k, the work-group stages A[rows][k0 ..] (stored
 * transposed, so a warp reads consecutive words) and B[k0 ..][cols] in local
 * memory; each work-item then does 64 fma per k from its A value and a B
 * row that all work-items of a column read at once (a broadcast). The
 * copies are shared by local id, so a work-group of any size stages what
 * it needs itself; a lone work-item (the re-run of one item) reads global
 * memory directly. Only get_global_id and get_local_id/size are used
 * (global offsets are safe). Not tried on a GPU yet: tested on PoCL only.
 */
#pragma OPENCL FP_CONTRACT OFF

#define NS_SG_A_TILE 4096 /* floats of A in local memory (16 KB) */
#define NS_SG_B_TILE 1024 /* float4 of B in local memory (16 KB) */

__kernel void sgemm_gpu(__global const float *A, __global const float *B,
                        __global float *C, const uint M, const uint N,
                        const uint K)
{
    __local float at[NS_SG_A_TILE];  /* at[kk * ly + r] = A[row0 + r][k] */
    __local float4 bt[NS_SG_B_TILE]; /* bt[kk * bw + j] = B[k][col0 + 4j] */
    uint lx = (uint)get_local_size(0), ly = (uint)get_local_size(1);
    uint lsize = lx * ly;
    uint lid = (uint)(get_local_id(1) * lx + get_local_id(0));
    uint bw = lx * 16; /* float4 per B tile row */
    uint kc = min((uint)(NS_SG_B_TILE / bw), (uint)(NS_SG_A_TILE / ly));
    size_t row = get_global_id(1);
    size_t col = get_global_id(0) * 64;
    size_t row0 = row - get_local_id(1);
    size_t col0 = col - get_local_id(0) * 64;
    float16 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;

    /* Uniform over the work-group (see sgemm): a lone work-item, a group
     * that sticks out of the matrix or one too large for the tiles reads
     * straight from global memory, in bounds, without barriers. */
    bool fits =
        lsize > 1 && kc != 0 && col0 + 64 * (size_t)lx <= N && row0 + ly <= M;
    if (!fits && row < M && col + 64 <= N) {
        __global const float *a = A + row * K;
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
        barrier(CLK_LOCAL_MEM_FENCE);
        /* A: consecutive local ids read consecutive k of one row */
        for (uint i = lid; i < kn * ly; i += lsize) {
            uint r = i / kn, kk = i % kn;
            at[kk * ly + r] = A[(row0 + r) * K + k0 + kk];
        }
        /* B: consecutive local ids read consecutive float4 of one row */
        for (uint i = lid; i < kn * bw; i += lsize) {
            uint kk = i / bw, j = i % bw;
            bt[i] = vload4(j, B + (size_t)(k0 + kk) * N + col0);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __local const float4 *b = bt + get_local_id(0) * 16;
        __local const float *a = at + get_local_id(1);
        for (uint kk = 0; kk < kn; kk++) {
            float16 av = (float16)a[kk * ly];
            __local const float4 *bk = b + kk * bw;
            c0 = fma(av, (float16)(bk[0], bk[1], bk[2], bk[3]), c0);
            c1 = fma(av, (float16)(bk[4], bk[5], bk[6], bk[7]), c1);
            c2 = fma(av, (float16)(bk[8], bk[9], bk[10], bk[11]), c2);
            c3 = fma(av, (float16)(bk[12], bk[13], bk[14], bk[15]), c3);
        }
    }
    __global float *o = C + row * N + col;
    vstore16(c0, 0, o);
    vstore16(c1, 1, o);
    vstore16(c2, 2, o);
    vstore16(c3, 3, o);
}
