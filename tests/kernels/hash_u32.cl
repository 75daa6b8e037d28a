/* hash_u32.cl - an integer hash (murmur3 fmix32 rounds) of each input
 * word, its index and a 64-bit seed, into two outputs of different
 * widths.
 *
 * Exercises: no local size (units are work-items), two OUT buffers (u32
 * and u8: 1 byte per item, a size that is not a multiple of 4), a u64
 * scalar argument, exact integer results.
 *
 * h = fmix(in[i] ^ lo(seed)); 4 times: h = fmix(h + hi(seed) + i*0x9e3779b9)
 * h32[i] = h;  h8[i] = (h >> 24) ^ (i & 0xff)
 *
 * JOB-FLAGS (row hash_u32):
 *   --kernel hash_u32.cl --entry hash --global 1536
 *   --arg in:a.bin (1536 u32) --arg out:6144:h32.bin --arg out:1536:h8.bin
 *   --arg u64:81985529216486895 (0x0123456789abcdef) --tolerance exact
 *   --checks 32
 */
uint fmix(uint h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

__kernel void hash(__global const uint *in, __global uint *h32,
                   __global uchar *h8, ulong seed)
{
    uint i = (uint)get_global_id(0);
    uint h = fmix(in[i] ^ (uint)seed);
    for (int r = 0; r < 4; r++)
        h = fmix(h + (uint)(seed >> 32) + i * 0x9e3779b9u);
    h32[i] = h;
    h8[i] = (uchar)((h >> 24) ^ (i & 0xffu));
}
