/* saxpy: out = alpha * x + y, element-wise over n floats.
 *
 * Arguments: x (in, n floats), y (in, n floats), out (out, n floats),
 *   float alpha, uint n.
 * NDRange: global (n), any local size.
 * Item: one work-item = one element, item_bytes 4: item i owns out[i].
 * Exact: the product is rounded, then the sum (no fused multiply-add:
 * FP_CONTRACT is off), the same two steps as C's `p = alpha * x; p + y`.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void saxpy(__global const float *x, __global const float *y,
                    __global float *out, const float alpha, const uint n)
{
    size_t i = get_global_id(0);
    if (i < n) {
        float p = alpha * x[i];
        out[i] = p + y[i];
    }
}
