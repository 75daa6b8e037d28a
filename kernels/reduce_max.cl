/* reduce_max: the maximum of each work-group's share of a float array.
 *
 * Arguments: x (in, floats), out (out, one float per work-group), uint N
 *   (elements of x; the rest of the NDRange counts as -INFINITY), local
 *   (L floats: --arg local:4L).
 * NDRange: global (G x L) with L a power of two <= 1024 (the local size,
 *   required).
 * Item: work-group g owns out[g] = max of x[g L .. g L + L) (fmax: NaNs
 *   are skipped). Exact. A whole array's maximum is two steps of a
 *   pipeline, as for reduce_sum.
 */
__kernel void reduce_max(__global const float *x, __global float *out,
                         const uint n, __local float *tmp)
{
    uint l = (uint)get_local_id(0), size = (uint)get_local_size(0);
    size_t i = get_global_id(0);
    tmp[l] = i < n ? x[i] : -INFINITY;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = size / 2; s > 0; s >>= 1) {
        if (l < s)
            tmp[l] = fmax(tmp[l], tmp[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(0)] = tmp[0];
}
