/* bench_copy: device memory copy bandwidth for the device benchmark
 * (exec/devbench.c). Not a job kernel. One float4 per work-item: 16-byte
 * accesses, contiguous across neighbouring work-items. */
__kernel void bench_copy(__global const float4 *in, __global float4 *out)
{
    const size_t i = get_global_id(0);
    out[i] = in[i];
}
