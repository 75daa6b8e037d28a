/* softmax: softmax over each row of a float matrix.
 *
 * Arguments: x (in, ROWS x COLS floats, row-major), y (out, ROWS x COLS
 *   floats), uint COLS, uint ROWS.
 * NDRange: global (ROWS) or more (extra work-items return); any local
 *   size. Shards cut along the rows.
 * Item: work-item r owns row r of y: y[r][j] = exp(x[r][j] - m) / s with
 *   m the row's maximum and s the sum of exp(x[r][j] - m), summed in
 *   index order.
 * Not bit-exact across devices (exp): submit with a tolerance, e.g.
 *   --tolerance abs:1e-6.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void softmax(__global const float *x, __global float *y,
                      const uint cols, const uint rows)
{
    size_t r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *xr = x + r * cols;
    __global float *yr = y + r * cols;
    float m = -INFINITY;
    for (uint j = 0; j < cols; j++)
        m = fmax(m, xr[j]);
    float s = 0.0f;
    for (uint j = 0; j < cols; j++)
        s += exp(xr[j] - m);
    for (uint j = 0; j < cols; j++)
        yr[j] = exp(xr[j] - m) / s;
}
