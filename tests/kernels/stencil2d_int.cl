/* stencil2d_int.cl - a 5-point integer stencil on a 2D grid, zero outside
 * the grid; the grid size comes from get_global_size, not from arguments.
 *
 * Exercises: 2D NDRange with 2D work-groups (a group's items are not one
 * contiguous run of the row-major output), get_global_size(0/1) used for
 * bounds and addressing, neighbours read across work-group borders, an
 * i32 scalar argument. i32 arithmetic, exact.
 *
 * out[y*W + x] = c*in[y][x] - in[y-1][x] - in[y+1][x] - in[y][x-1]
 *                - in[y][x+1]   (missing neighbours count as 0; c = -3
 *                in the test; wraps mod 2^32 like the device)
 *
 * JOB-FLAGS (row stencil2d_int):
 *   --kernel stencil2d_int.cl --entry stencil5 --global 50,20 --local 10,4
 *   --item-kind group --arg in:a.bin (20x50 i32) --arg out:4000:out.bin
 *   --arg i32:-3 --tolerance exact
 */
__kernel void stencil5(__global const int *in, __global int *out, int c)
{
    int x = (int)get_global_id(0), y = (int)get_global_id(1);
    int W = (int)get_global_size(0), H = (int)get_global_size(1);
    uint v = (uint)c * (uint)in[y * W + x];
    if (y > 0)
        v -= (uint)in[(y - 1) * W + x];
    if (y + 1 < H)
        v -= (uint)in[(y + 1) * W + x];
    if (x > 0)
        v -= (uint)in[y * W + x - 1];
    if (x + 1 < W)
        v -= (uint)in[y * W + x + 1];
    out[y * W + x] = (int)v;
}
