/* topk: the K largest values of each row and their column indices.
 *
 * Arguments: x (in, ROWS x COLS floats), val (out, ROWS x K floats), idx
 *   (out, ROWS x K uints), uint COLS, uint K (1..64, <= COLS), uint ROWS.
 * NDRange: global (ROWS) or more (extra work-items return); any local
 *   size. Shards cut along the rows.
 * Item: work-item r owns row r of val and idx: the K largest values in
 *   descending order, ties to the lower column; NaNs are never taken
 *   (a row with fewer than K numbers pads with -INFINITY and index
 *   0xFFFFFFFF). Exact.
 */
#define NS_TOPK_MAX 64

__kernel void topk(__global const float *x, __global float *val,
                   __global uint *idx, const uint cols, const uint k,
                   const uint rows)
{
    size_t r = get_global_id(0);
    if (r >= rows || k == 0 || k > NS_TOPK_MAX)
        return;
    float v[NS_TOPK_MAX];
    uint ix[NS_TOPK_MAX];
    for (uint i = 0; i < k; i++) {
        v[i] = -INFINITY;
        ix[i] = 0xFFFFFFFFu;
    }
    __global const float *xr = x + r * cols;
    for (uint j = 0; j < cols; j++) {
        float e = xr[j];
        /* a free place, or strictly larger than the last one kept: ties
         * keep the lower column */
        bool room = ix[k - 1] == 0xFFFFFFFFu;
        if (isnan(e) || !(room || e > v[k - 1]))
            continue;
        uint p = k - 1;
        while (p > 0 && (e > v[p - 1] || ix[p - 1] == 0xFFFFFFFFu)) {
            v[p] = v[p - 1];
            ix[p] = ix[p - 1];
            p--;
        }
        v[p] = e;
        ix[p] = j;
    }
    for (uint i = 0; i < k; i++) {
        val[r * k + i] = v[i];
        idx[r * k + i] = ix[i];
    }
}
