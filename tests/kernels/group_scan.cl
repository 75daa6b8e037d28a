/* group_scan.cl - inclusive prefix sum of each work-group's slice
 * (Hillis-Steele) in a __local array declared inside the kernel.
 *
 * Exercises: a __local array declared in the kernel body (no local
 * argument), reqd_work_group_size (a re-run with any other local size
 * cannot even launch), log2(128) = 7 barriers in a loop. u32 arithmetic
 * wraps, so the result is exact.
 *
 * out[g*128 + l] = in[g*128] + ... + in[g*128 + l]   (mod 2^32)
 *
 * JOB-FLAGS (row group_scan):
 *   --kernel group_scan.cl --entry group_scan --global 640 --local 128
 *   --item-kind group --arg in:a.bin (640 u32) --arg out:2560:out.bin
 *   --tolerance exact
 */
#define GROUP 128

__kernel __attribute__((reqd_work_group_size(GROUP, 1, 1)))
void group_scan(__global const uint *in, __global uint *out)
{
    __local uint buf[2][GROUP];
    uint lid = (uint)get_local_id(0);
    size_t gid = get_global_id(0);
    int cur = 0;
    buf[0][lid] = in[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = 1; off < GROUP; off <<= 1) {
        uint v = buf[cur][lid];
        if (lid >= off)
            v += buf[cur][lid - off];
        buf[1 - cur][lid] = v;
        cur = 1 - cur;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[gid] = buf[cur][lid];
}
