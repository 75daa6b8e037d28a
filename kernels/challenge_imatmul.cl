/* challenge_imatmul: the integer matrix product of the hardware challenge
 * (include/nightshift/challenge.h), C = A * B mod p, exact.
 *
 * challenge_imatmul_fill: entry i of matrix w from the seed words k0, k1
 *   (ns_imatmul_entry on the host computes the same value).
 * challenge_imatmul: A, B, C row-major n x n u32, n a multiple of 16,
 *   p < 2^31 prime. NDRange global (n / 16, n), any local size: one
 *   work-item per row segment C[row][16 x .. 16 x + 15]. Each product is
 *   below 2^62; a sum is kept as a 64-bit word plus a count of its
 *   wrap-arounds, so no term is reduced and the result (hi 2^64 + lo) mod p
 *   is exact for any n below 2^32. As a job: item = one work-item,
 *   item_bytes 64 (the segment's place in row-major C).
 */

static ulong imm_mix(ulong z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    return z ^ (z >> 31);
}

__kernel void challenge_imatmul_fill(__global uint *m, const ulong count,
                                     const ulong k0, const ulong k1,
                                     const uint which, const uint p)
{
    ulong i = get_global_id(0);
    if (i >= count)
        return;
    ulong z = imm_mix(imm_mix(i ^ k0) ^ k1 ^ (ulong)which);
    m[i] = (uint)(((z >> 32) * (ulong)p) >> 32);
}

#define IMM_SEG 16 /* entries of C per work-item */

/* One work-item: C[row][16 x .. 16 x + 15], with row = get_global_id(1),
 * x = get_global_id(0). Sixteen 64-bit sums in a vector, one row of A
 * streamed and the matching 64 bytes of each row of B: vector code on a
 * CPU, sixteen independent chains per thread (register tiling) on a GPU,
 * where neighbouring work-items read neighbouring bytes of B. */
__kernel void challenge_imatmul(__global const uint *A, __global const uint *B,
                                __global uint *C, const uint n, const uint p)
{
    size_t x = get_global_id(0), row = get_global_id(1);
    if (x >= n / IMM_SEG || row >= n)
        return;
    __global const uint *a = A + row * n;
    __global const uint16 *b = (__global const uint16 *)(B) + x;
    size_t stride = n / IMM_SEG; /* uint16 vectors per row of B */
    ulong16 lo = (ulong16)(0);
    uint16 hi = (uint16)(0);
    for (uint k = 0; k < n; k++) {
        ulong16 prod = convert_ulong16(b[k * stride]) * (ulong)a[k];
        lo += prod;
        hi -= convert_uint16(lo < prod); /* true is -1 in a vector */
    }
    ulong pp = p;
    ulong r32 = ((ulong)1 << 32) % pp;
    ulong r64 = (r32 * r32) % pp; /* 2^64 mod p */
    ulong16 res = (convert_ulong16(hi) % pp) * r64 % pp + lo % pp;
    vstore16(convert_uint16(res % pp), 0, C + row * n + x * IMM_SEG);
}
