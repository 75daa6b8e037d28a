/* histogram_local.cl - a 16-bin histogram of each work-group's slice,
 * counted with atomics on a __local array, one row of bins per group.
 *
 * Exercises: atomic_inc on __local memory (counts do not depend on the
 * order of the atomics, so the result is exact), a __local array
 * declared in the kernel, two barriers, per-group output rows written by
 * the first 16 work-items, get_group_id.
 *
 * bin(v) = v >> 28; out[g*16 + b] = #{ l : bin(in[g*L + l]) == b }.
 *
 * JOB-FLAGS (row histogram_local):
 *   --kernel histogram_local.cl --entry histogram --global 1536 --local 96
 *   --item-kind group --arg in:a.bin (1536 u32) --arg out:1024:out.bin
 *   --tolerance exact
 */
#define BINS 16

__kernel void histogram(__global const uint *in, __global uint *out)
{
    __local uint hist[BINS];
    size_t lid = get_local_id(0);
    if (lid < BINS)
        hist[lid] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    atomic_inc(&hist[in[get_global_id(0)] >> 28]);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < BINS)
        out[get_group_id(0) * BINS + lid] = hist[lid];
}
