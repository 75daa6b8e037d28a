/* reduce_sum: the sum of each work-group's share of a float array.
 *
 * Arguments: x (in, floats), out (out, one float per work-group), uint N
 *   (elements of x; the rest of the NDRange adds 0), local (L floats:
 *   --arg local:4L).
 * NDRange: global (G x L) with L a power of two <= 1024 (the local size,
 *   required); work-group g sums x[g L .. g L + L) by a fixed tree in
 *   local memory, so every device adds in the same order.
 * Item: work-group g owns out[g]. A whole array's sum is two steps of a
 *   pipeline (docs/JOBS.md): these partials, then one work-group over
 *   them (G <= 1024), or more steps for more partials.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void reduce_sum(__global const float *x, __global float *out,
                         const uint n, __local float *tmp)
{
    uint l = (uint)get_local_id(0), size = (uint)get_local_size(0);
    size_t i = get_global_id(0);
    tmp[l] = i < n ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = size / 2; s > 0; s >>= 1) {
        if (l < s)
            tmp[l] += tmp[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(0)] = tmp[0];
}
