/* nbody_step: one time step of an n-body system with softened gravity.
 *
 * Arguments: pos (in, n float4: x, y, z, mass), vel (in, n float4: vx,
 *   vy, vz, unused), pos_out (out, n float4), vel_out (out, n float4),
 *   uint n, float dt, float eps2 (softening length squared, > 0).
 * NDRange: global (n), any local size.
 * Item: one work-item = one body i, item_bytes 16 in each output: item i
 *   owns pos_out[i] and vel_out[i] (item output 32 bytes).
 * For j = 0..n-1 in that order (j = i adds exactly zero):
 *   d = pos[j] - pos[i]; r2 = ((dx*dx + dy*dy) + dz*dz) + eps2;
 *   s = mass_j * (inv * inv) * inv with inv = ns_rsqrt(r2); a += d * s.
 * Then v' = v + a * dt, p' = p + v' * dt (semi-implicit Euler); the mass
 * and vel.w are copied. ns_rsqrt is a fixed bit-trick guess refined by
 * three Newton steps of rounded +, -, *: native rsqrt and sqrt are not
 * correctly rounded on every device, this is exact everywhere (its
 * relative error vs. the true 1/sqrt is about 2e-7).
 */
#pragma OPENCL FP_CONTRACT OFF

static float ns_rsqrt(float x)
{
    float h = 0.5f * x;
    float y = as_float(0x5f375a86u - (as_uint(x) >> 1));
    for (int i = 0; i < 3; i++) {
        float t = y * y;
        t = h * t;
        t = 1.5f - t;
        y = y * t;
    }
    return y;
}

__kernel void nbody_step(__global const float4 *pos, __global const float4 *vel,
                         __global float4 *pos_out, __global float4 *vel_out,
                         const uint n, const float dt, const float eps2)
{
    size_t i = get_global_id(0);
    if (i >= n)
        return;
    float4 p = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (uint j = 0; j < n; j++) {
        float4 q = pos[j];
        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
        float r2 = dx * dx + dy * dy;
        r2 = r2 + dz * dz;
        r2 = r2 + eps2;
        float inv = ns_rsqrt(r2);
        float s = inv * inv;
        s = s * inv;
        s = q.w * s;
        ax = ax + dx * s;
        ay = ay + dy * s;
        az = az + dz * s;
    }
    float4 v = vel[i];
    v.x = v.x + ax * dt;
    v.y = v.y + ay * dt;
    v.z = v.z + az * dt;
    p.x = p.x + v.x * dt;
    p.y = p.y + v.y * dt;
    p.z = p.z + v.z * dt;
    pos_out[i] = p;
    vel_out[i] = v;
}
