/* index_queries.cl - every work-item writes what each index query
 * returns, for dimensions 0, 1 and 2 whatever the work dimension.
 *
 * Exercises: get_global_id, get_local_id, get_group_id, get_num_groups,
 * get_global_size, get_local_size, get_global_offset (for each of the 3
 * dimensions) and get_work_dim. A re-run of a unit must see exactly what
 * the full launch saw (same local size, group ids and sizes of the whole
 * NDRange, offset 0). Queries beyond the work dimension return the
 * OpenCL defaults (ids and offset 0, sizes and counts 1).
 *
 * Each work-item writes 24 u32 at out[24 * L], L its row-major linear
 * index (x fastest):
 *   [0..2] global id   [3..5] local id     [6..8] group id
 *   [9..11] num groups [12..14] global size [15..17] local size
 *   [18..20] global offset  [21] work dim  [22] L  [23] 0x4e534958
 *
 * JOB-FLAGS (rows index_1d, index_2d, index_3d):
 *   1D: --kernel index_queries.cl --entry index_queries --global 96
 *       --local 32 --item-kind group --arg out:9216:out.bin
 *       --tolerance exact
 *   2D: ... --global 12,10 --local 4,5 --item-kind group
 *       --arg out:11520:out.bin --tolerance exact
 *   3D: ... --global 8,6,4 --local 2,3,2 --item-kind group
 *       --arg out:18432:out.bin --tolerance exact
 */
__kernel void index_queries(__global uint *out)
{
    size_t x = get_global_id(0) - get_global_offset(0);
    size_t y = get_global_id(1) - get_global_offset(1);
    size_t z = get_global_id(2) - get_global_offset(2);
    size_t L = (z * get_global_size(1) + y) * get_global_size(0) + x;
    __global uint *o = out + 24 * L;
    for (uint d = 0; d < 3; d++) {
        o[0 + d] = (uint)get_global_id(d);
        o[3 + d] = (uint)get_local_id(d);
        o[6 + d] = (uint)get_group_id(d);
        o[9 + d] = (uint)get_num_groups(d);
        o[12 + d] = (uint)get_global_size(d);
        o[15 + d] = (uint)get_local_size(d);
        o[18 + d] = (uint)get_global_offset(d);
    }
    o[21] = get_work_dim();
    o[22] = (uint)L;
    o[23] = 0x4e534958u; /* "NSIX" */
}
