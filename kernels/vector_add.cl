/* vector_add: c = a + b, element-wise over n floats.
 *
 * Arguments: a (in, n floats), b (in, n floats), c (out, n floats),
 *   uint n.
 * NDRange: global (n), any local size.
 * Item: one work-item = one element, item_bytes 4: item i owns c[i].
 * Exact: one correctly rounded addition per element.
 */
#pragma OPENCL FP_CONTRACT OFF

__kernel void vector_add(__global const float *a, __global const float *b,
                         __global float *c, const uint n)
{
    size_t i = get_global_id(0);
    if (i < n)
        c[i] = a[i] + b[i];
}
