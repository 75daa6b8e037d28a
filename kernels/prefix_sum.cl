/* prefix_sum: inclusive prefix sums (cumsum) of a float array, by blocks.
 *
 * prefix_sum: x (in, floats), y (out, one float per element of the
 *   NDRange), sums (out, one float per work-group), uint N, local (L
 *   floats: --arg local:4L). NDRange (G x L), local (L), L a power of two
 *   <= 1024. y[i] is the sum of x over i's block up to i; sums[g] the
 *   block's total. Elements at N and beyond count as 0.
 * prefix_sum_add (--entry prefix_sum_add): y (in, the blocks' sums from
 *   prefix_sum), offsets (in, the inclusive prefix sums of the blocks'
 *   totals), z (out, as y), uint N. NDRange (G x L), local (L): z[i] =
 *   y[i] + offsets[g - 1] (block 0 unchanged).
 * A whole cumsum is a pipeline of three steps (docs/JOBS.md): prefix_sum
 *   over x, prefix_sum over the sums (one work-group, G <= 1024), then
 *   prefix_sum_add. Each block adds by a fixed tree (Hillis-Steele), so
 *   every device adds in the same order.
 * Item: a work-group owns its block of y and z and its sums[g].
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void prefix_sum(__global const float *x, __global float *y,
                         __global float *sums, const uint n, __local float *tmp)
{
    uint l = (uint)get_local_id(0), size = (uint)get_local_size(0);
    size_t i = get_global_id(0);
    tmp[l] = i < n ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = 1; off < size; off <<= 1) {
        float add = l >= off ? tmp[l - off] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        tmp[l] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    y[i] = tmp[l];
    if (l == size - 1)
        sums[get_group_id(0)] = tmp[l];
}

__kernel void prefix_sum_add(__global const float *y,
                             __global const float *offsets, __global float *z,
                             const uint n)
{
    size_t i = get_global_id(0), g = get_group_id(0);
    (void)n;
    z[i] = g == 0 ? y[i] : y[i] + offsets[g - 1];
}
