/* montecarlo_pi: points inside the quarter circle, per work-item.
 *
 * Arguments: out (out, one uint per work-item), ulong seed, uint samples.
 * NDRange: global (count), any local size.
 * Item: one work-item, item_bytes 4: item g owns out[g], the number of its
 *   `samples` points (x, y) in [0, 2^24)^2 with x^2 + y^2 < 2^48.
 * Point i of work-item g comes from a counter-based generator: z =
 *   splitmix64(seed + (g * samples + i + 1) * 0x9e3779b97f4a7c15), x = the
 *   top 24 bits of z, y = bits 16..39. Integer only: exact, and any
 *   sub-range gives the same counts. pi ~= 4 * sum(out) / (count *
 *   samples).
 */

__kernel void montecarlo_pi(__global uint *out, const ulong seed,
                            const uint samples)
{
    ulong g = (ulong)get_global_id(0);
    ulong ctr = g * (ulong)samples;
    uint inside = 0;
    for (uint i = 0; i < samples; i++) {
        ulong z = seed + (ctr + i + 1) * 0x9e3779b97f4a7c15UL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
        z = z ^ (z >> 31);
        ulong x = z >> 40, y = (z >> 16) & 0xffffffUL;
        inside += (x * x + y * y < (1UL << 48)) ? 1u : 0u;
    }
    out[g] = inside;
}
