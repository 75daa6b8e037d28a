/* mandelbrot: escape-time iteration counts over a width x height grid.
 *
 * Arguments: out (out, width * height uints, row-major), uint width,
 *   uint height, float x0, float y0 (the point of pixel (0, 0)), float dx,
 *   float dy (step per pixel), uint max_iter.
 * NDRange: global (width, height), any local size.
 * Item: one work-item = one pixel, item_bytes 4: item x + width * y owns
 *   out[y][x].
 * c = (x0 + x * dx, y0 + y * dy); z = 0; out = the number of steps
 *   z = z * z + c taken while |z|^2 <= 4, at most max_iter. Only rounded
 *   +, -, * (no fma, no division): exact on every conforming device.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void mandelbrot(__global uint *out, const uint width,
                         const uint height, const float x0, const float y0,
                         const float dx, const float dy, const uint max_iter)
{
    size_t x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height)
        return;
    float cr = x0 + (float)x * dx;
    float ci = y0 + (float)y * dy;
    float zr = 0.0f, zi = 0.0f;
    uint n = 0;
    while (n < max_iter) {
        float zr2 = zr * zr;
        float zi2 = zi * zi;
        if (zr2 + zi2 > 4.0f)
            break;
        float t = 2.0f * zr;
        zi = t * zi + ci;
        zr = zr2 - zi2 + cr;
        n++;
    }
    out[y * width + x] = n;
}
