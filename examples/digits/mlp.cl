/* mlp.cl - batch inference of a two-layer perceptron, one row per
 * work-item: y[r] = W2 relu(W1 x[r] + b1) + b2.
 *
 * Arguments: x (in, rows x d_in floats), w1 (in, d_in x d_h, row-major:
 *   w1[k * d_h + j]), b1 (in, d_h), w2 (in, d_h x d_out), b2 (in, d_out),
 *   y (out, rows x d_out floats), uint d_in, uint d_h (<= 128),
 *   uint d_out, uint rows.
 * NDRange: global (rows) or more; work-item r owns y[r * d_out ..
 *   (r + 1) * d_out), so the job can be cut into shards along dimension
 *   0 (docs/JOBS.md). Sums run in index order without contraction, so
 *   every device gives the same logits up to float rounding of the
 *   device's own arithmetic (checked within a tolerance).
 */
#pragma OPENCL FP_CONTRACT OFF

#define MLP_MAX_H 128

__kernel void mlp(__global const float *x, __global const float *w1,
                  __global const float *b1, __global const float *w2,
                  __global const float *b2, __global float *y, const uint d_in,
                  const uint d_h, const uint d_out, const uint rows)
{
    size_t r = get_global_id(0);
    if (r >= rows || d_h > MLP_MAX_H)
        return;
    float h[MLP_MAX_H];
    __global const float *xr = x + r * d_in;
    for (uint j = 0; j < d_h; j++) {
        float acc = b1[j];
        for (uint k = 0; k < d_in; k++)
            acc += xr[k] * w1[k * d_h + j];
        h[j] = acc > 0.0f ? acc : 0.0f;
    }
    for (uint o = 0; o < d_out; o++) {
        float acc = b2[o];
        for (uint j = 0; j < d_h; j++)
            acc += h[j] * w2[j * d_out + o];
        y[r * d_out + o] = acc;
    }
}

/* The same network as two steps of a pipeline (docs/JOBS.md
 * "Pipelines"): dense(x, w1, b1, h, d_in, d_h, 1) then
 * dense(h, w2, b2, y, d_h, d_out, 0), one work-item per output value
 * (global (rows, d_out) of its layer), summed in the order mlp() sums. */
__kernel void dense(__global const float *x, __global const float *w,
                    __global const float *b, __global float *y,
                    const uint d_in, const uint d_out, const uint relu)
{
    size_t r = get_global_id(0), o = get_global_id(1);
    float acc = b[o];
    for (uint k = 0; k < d_in; k++)
        acc += x[r * d_in + k] * w[k * d_out + o];
    y[r * d_out + o] = relu && !(acc > 0.0f) ? 0.0f : acc;
}
