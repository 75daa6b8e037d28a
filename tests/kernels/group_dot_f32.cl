/* group_dot_f32.cl - a float dot product per work-group (tree reduction
 * of a[i]*b[i] in a __local argument), one float per group.
 *
 * Exercises: float per-group outputs, --tolerance ulp:N against a
 * reference summed in another order, barrier in a loop, get_group_id,
 * __local float argument. Inputs are in [0.5, 1.5), so the sum has no
 * cancellation and the tree order costs a few ulp at most.
 *
 * out[g] = sum_{l<L} a[g*L+l] * b[g*L+l]
 *
 * JOB-FLAGS (row group_dot_f32):
 *   --kernel group_dot_f32.cl --entry group_dot --global 1024 --local 64
 *   --item-kind group --arg in:a.bin (1024 f32) --arg in:b.bin (1024 f32)
 *   --arg out:64:out.bin --arg local:256 --tolerance ulp:16
 */
__kernel void group_dot(__global const float *a, __global const float *b,
                        __global float *out, __local float *part)
{
    size_t lid = get_local_id(0), gid = get_global_id(0);
    part[lid] = a[gid] * b[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s)
            part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[get_group_id(0)] = part[0];
}
