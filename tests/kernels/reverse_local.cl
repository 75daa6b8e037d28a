/* reverse_local.cl - reverse each work-group's slice through a __local
 * argument and a barrier.
 *
 * Exercises: a __local buffer passed as an argument (--arg local:BYTES),
 * barrier(CLK_LOCAL_MEM_FENCE), get_local_id/get_local_size. A unit (one
 * work-group) reads only its own slice of `in`, and item i's value comes
 * from another work-item of the same group, so the unit must be re-run
 * with the job's local size.
 *
 * out[g*L + l] = in[g*L + (L-1-l)], L = get_local_size(0).
 *
 * JOB-FLAGS (tests/integration/test_kernel_corpus.py, row reverse_local):
 *   --kernel reverse_local.cl --entry reverse_groups --global 960
 *   --local 64 --item-kind group --arg in:a.bin (960 u32)
 *   --arg out:3840:out.bin --arg local:256 --tolerance exact
 */
__kernel void reverse_groups(__global const uint *in, __global uint *out,
                             __local uint *tmp)
{
    size_t lid = get_local_id(0);
    size_t L = get_local_size(0);
    size_t gid = get_global_id(0);
    tmp[lid] = in[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    out[gid] = tmp[L - 1 - lid];
}
