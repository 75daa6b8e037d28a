/* stencil2d: 3x3 convolution of a width x height image, edges clamped.
 *
 * Arguments: in (in, width * height floats, row-major), w (in, 9 floats:
 *   the 3x3 weights, row-major, w[4] the centre), out (out, width * height
 *   floats, row-major), uint width, uint height.
 * NDRange: global (width, height), any local size.
 * Item: one work-item = one pixel, item_bytes 4: item x + width * y owns
 *   out[y][x] (row-major, as the items are numbered).
 * out[y][x] = sum over dy = -1..1, then dx = -1..1 (that order) of
 *   w[dy + 1][dx + 1] * in[clamp(y + dy)][clamp(x + dx)], starting from
 *   0.0f; each product and each sum rounded (no fma). Exact.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void stencil2d(__global const float *in, __global const float *w,
                        __global float *out, const uint width,
                        const uint height)
{
    long x = (long)get_global_id(0), y = (long)get_global_id(1);
    if (x >= (long)width || y >= (long)height)
        return;
    float acc = 0.0f;
    for (int dy = -1; dy <= 1; dy++) {
        long yy = clamp(y + dy, 0L, (long)height - 1);
        for (int dx = -1; dx <= 1; dx++) {
            long xx = clamp(x + dx, 0L, (long)width - 1);
            float p = w[(dy + 1) * 3 + dx + 1] * in[yy * (long)width + xx];
            acc = acc + p;
        }
    }
    out[y * (long)width + x] = acc;
}
