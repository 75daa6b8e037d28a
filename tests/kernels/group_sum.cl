/* group_sum.cl - one 64-bit sum per work-group: a tree reduction in a
 * __local argument, written to out[get_group_id(0)] by local id 0.
 *
 * Exercises: per-group outputs (a unit writes 8 bytes, most work-items
 * write nothing), barrier in a loop, get_group_id, __local ulong
 * argument. The local size must be a power of two.
 *
 * out[g] = sum of in[g*L .. g*L+L-1] as u64, L = get_local_size(0).
 *
 * JOB-FLAGS (row group_sum):
 *   --kernel group_sum.cl --entry group_sum --global 2048 --local 128
 *   --item-kind group --arg in:a.bin (2048 u32) --arg out:128:out.bin
 *   --arg local:1024 --tolerance exact
 */
__kernel void group_sum(__global const uint *in, __global ulong *out,
                        __local ulong *part)
{
    size_t lid = get_local_id(0);
    part[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[get_group_id(0)] = part[0];
}
