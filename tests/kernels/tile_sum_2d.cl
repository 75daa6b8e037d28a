/* tile_sum_2d.cl - the sum of each 2D work-group's tile, written at the
 * group's row-major index computed with get_num_groups.
 *
 * Exercises: per-group outputs in 2D, get_num_groups(0) and
 * get_group_id(0/1) in the output address, get_local_size(0/1), a
 * reduction through a __local array declared in the kernel (32 entries:
 * local size 8x4) with barriers. u32, exact.
 *
 * out[gy*NGX + gx] = sum of in[y*W + x] over the tile (mod 2^32),
 * NGX = get_num_groups(0), W = get_global_size(0).
 *
 * JOB-FLAGS (row tile_sum_2d):
 *   --kernel tile_sum_2d.cl --entry tile_sum --global 32,24 --local 8,4
 *   --item-kind group --arg in:a.bin (24x32 u32) --arg out:96:out.bin
 *   --tolerance exact
 */
#define LX 8
#define LY 4

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void tile_sum(__global const uint *in, __global uint *out)
{
    __local uint part[LX * LY];
    uint l = (uint)(get_local_id(1) * get_local_size(0) + get_local_id(0));
    size_t W = get_global_size(0);
    part[l] = in[get_global_id(1) * W + get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = LX * LY / 2; s > 0; s >>= 1) {
        if (l < s)
            part[l] += part[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(1) * get_num_groups(0) + get_group_id(0)] = part[0];
}
