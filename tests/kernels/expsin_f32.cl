/* expsin_f32.cl - a float sum of exp and sin terms per work-item, which
 * differs from an exact reference in its last bits and so needs a
 * tolerance.
 *
 * Exercises: float math built-ins (exp, sin), an f32 and a u32 scalar
 * argument, --tolerance rel:X, no local size (units are work-items).
 * Every term is positive (1.5 + sin >= 0.5), so the relative error of the
 * sum stays near that of one term (a few 1e-7).
 *
 * v = x[i] * scale;  out[i] = sum_{k<terms} exp(-v*k/16) * (1.5 + sin(v + k))
 *
 * JOB-FLAGS (row expsin_f32):
 *   --kernel expsin_f32.cl --entry expsin --global 700
 *   --arg in:a.bin (700 f32 in [0, 1)) --arg out:2800:out.bin
 *   --arg f32:2.5 --arg u32:16 --tolerance rel:1e-5
 */
__kernel void expsin(__global const float *x, __global float *out,
                     float scale, uint terms)
{
    size_t i = get_global_id(0);
    float v = x[i] * scale;
    float s = 0.0f;
    for (uint k = 0; k < terms; k++) {
        float fk = (float)k;
        s += exp(-v * fk * 0.0625f) * (1.5f + sin(v + fk));
    }
    out[i] = s;
}
