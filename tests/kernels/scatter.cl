/* scatter.cl - out[perm[i]] = f(in[i], i): each work-item writes one u32
 * at a position given by a permutation, far from "its" slice.
 *
 * Exercises: scattered writes (a unit's write set is not a contiguous
 * slice), u32 scalar argument. The permutation is a full permutation of
 * 0..n-1, so every byte of out is written exactly once.
 *
 * out[perm[i]] = in[i] * 2654435761 + i * 40503 + salt   (mod 2^32)
 *
 * JOB-FLAGS (row scatter: work-group units):
 *   --kernel scatter.cl --entry scatter --global 1000 --local 40
 *   --item-kind group --arg in:a.bin (1000 u32) --arg in:perm.bin
 *   (1000 u32) --arg out:4000:out.bin --arg u32:12345 --tolerance exact
 * (row scatter_items: work-item units: the same without --local and
 * --item-kind, other inputs, --arg u32:777)
 */
__kernel void scatter(__global const uint *in, __global const uint *perm,
                      __global uint *out, uint salt)
{
    uint i = (uint)get_global_id(0);
    out[perm[i]] = in[i] * 2654435761u + i * 40503u + salt;
}
