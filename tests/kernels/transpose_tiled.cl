/* transpose_tiled.cl - matrix transpose through an 8x8 __local tile
 * (padded to 8x9 against bank conflicts).
 *
 * Exercises: 2D work-groups, a __local 2D array declared in the kernel,
 * reqd_work_group_size, get_group_id in both dimensions to place the
 * tile, and writes that land in the transposed tile: a work-group writes
 * a block of rows of out far from its own position in the NDRange.
 *
 * in is H rows x W columns (u32, row-major); out is W rows x H columns:
 * out[c*H + r] = in[r*W + c]. Global size (W, H), local (8, 8).
 *
 * JOB-FLAGS (row transpose_tiled):
 *   --kernel transpose_tiled.cl --entry transpose --global 48,24
 *   --local 8,8 --item-kind group --arg in:a.bin (24x48 u32)
 *   --arg out:4608:out.bin --arg u32:48 --arg u32:24 --tolerance exact
 */
#define T 8

__kernel __attribute__((reqd_work_group_size(T, T, 1)))
void transpose(__global const uint *in, __global uint *out, uint W, uint H)
{
    __local uint tile[T][T + 1];
    uint bx = (uint)get_group_id(0) * T, by = (uint)get_group_id(1) * T;
    uint lx = (uint)get_local_id(0), ly = (uint)get_local_id(1);
    tile[ly][lx] = in[(by + ly) * W + bx + lx];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* the tile at (bx, by) of in goes to (by, bx) of out */
    out[(bx + ly) * H + by + lx] = tile[lx][ly];
}
