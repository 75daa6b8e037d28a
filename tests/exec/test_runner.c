/* test_runner.c - the built-in kernels against plain C references, item
 * re-runs against full runs, the program cache and the runner's checks,
 * on real OpenCL (PoCL in CI), once with host memory used in place and
 * once with device buffers (the discrete-GPU path).
 *
 * Exactness: every built-in is compared byte for byte, no tolerance
 * anywhere. The float kernels use only correctly rounded +, -, * and fma
 * in a fixed order, and the C references do the same operations in the
 * same order: this file is ISO C11, where GCC does not contract a * b + c
 * into an fma, and s_fmaf is a correctly rounded fma. nbody_step avoids
 * sqrt and division (a Newton rsqrt of +, -, *); mandelbrot and stencil2d
 * use no transcendental functions; nonce_sha256 is checked against
 * libsodium's SHA-256.
 */
#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/log.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"

#include "check.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ns_runner_t *s_r; /* shared runner, no cache */
static char s_tmp[PATH_MAX];
static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static uint32_t s_rand32(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng >> 16);
}

/* Uniform in [-1, 1) with a full 24-bit mantissa, so products round. */
static float s_randf(void)
{
    return (float)((int32_t)(s_rand32() & 0xffffff) - 0x800000) /
           (float)0x800000;
}

/* ---- a job with its buffers ------------------------------------------- */

typedef struct {
    ns_job_t job;
    ns_input_t in[NS_MAX_ARGS];
    uint8_t *in_data[NS_MAX_ARGS]; /* owned */
    uint8_t *out[NS_MAX_ARGS];     /* owned, full outputs */
} s_case_t;

static void s_case_builtin(s_case_t *c, const char *name, uint32_t dims,
                           uint64_t g0, uint64_t g1, uint64_t l0, uint64_t l1)
{
    memset(c, 0, sizeof *c);
    ns_job_init(&c->job);
    const ns_builtin_t *b = ns_builtin_find(name);
    if (!CHECK(b != NULL))
        return;
    snprintf(c->job.builtin, sizeof c->job.builtin, "%s", name);
    snprintf(c->job.entry, sizeof c->job.entry, "%s", b->entry);
    ns_hash(c->job.source_hash, b->source, b->source_len);
    c->job.dims = dims;
    c->job.global[0] = g0;
    c->job.local[0] = l0;
    if (dims > 1) {
        c->job.global[1] = g1;
        c->job.local[1] = l1;
    }
}

static void s_case_source(s_case_t *c, const char *src, const char *entry,
                          uint32_t dims, const uint64_t *global,
                          const uint64_t *local)
{
    memset(c, 0, sizeof *c);
    ns_job_init(&c->job);
    CHECK_RC(ns_job_set_source(&c->job, src, strlen(src)), NS_OK);
    snprintf(c->job.entry, sizeof c->job.entry, "%s", entry);
    c->job.dims = dims;
    for (uint32_t d = 0; d < dims; d++) {
        c->job.global[d] = global[d];
        c->job.local[d] = local ? local[d] : 0;
    }
}

/* Takes ownership of data (malloc'd). */
static void s_case_in(s_case_t *c, void *data, size_t len)
{
    uint32_t i = c->job.n_args++;
    ns_arg_t *a = &c->job.args[i];
    a->kind = NS_ARG_IN;
    a->size = len;
    ns_hash(a->hash, data, len);
    c->in_data[i] = data;
    c->in[i].data = data;
    c->in[i].len = len;
}

static void s_case_out(s_case_t *c, uint64_t size, uint32_t item_bytes)
{
    uint32_t i = c->job.n_args++;
    c->job.args[i].kind = NS_ARG_OUT;
    c->job.args[i].size = size;
    c->job.args[i].item_bytes = item_bytes;
}

static void s_case_u32(s_case_t *c, uint32_t v)
{
    ns_arg_t *a = &c->job.args[c->job.n_args++];
    a->kind = NS_ARG_U32;
    a->v.u32 = v;
}

static void s_case_u64(s_case_t *c, uint64_t v)
{
    ns_arg_t *a = &c->job.args[c->job.n_args++];
    a->kind = NS_ARG_U64;
    a->v.u64 = v;
}

static void s_case_f32(s_case_t *c, float v)
{
    ns_arg_t *a = &c->job.args[c->job.n_args++];
    a->kind = NS_ARG_F32;
    a->v.f32 = v;
}

static void s_case_free(s_case_t *c)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        free(c->in_data[i]);
        free(c->out[i]);
    }
    ns_job_release(&c->job);
    memset(c, 0, sizeof *c);
}

static char s_err[1024]; /* the last s_case_run's error text */
static bool s_quiet;     /* failures expected: do not print them */

/* Full run into freshly allocated outputs; NS_OK or the runner's error. */
static int s_case_run(ns_runner_t *r, s_case_t *c, ns_timings_t *t)
{
    s_err[0] = '\0';
    for (uint32_t i = 0; i < c->job.n_args; i++) {
        if (c->job.args[i].kind != NS_ARG_OUT)
            continue;
        free(c->out[i]);
        c->out[i] = malloc(c->job.args[i].size);
        if (!c->out[i])
            return NS_ERR_NOMEM;
        memset(c->out[i], 0xa5, c->job.args[i].size); /* not zero */
    }
    int rc = ns_runner_run(r, &c->job, c->in, c->out, t, s_err, sizeof s_err);
    if (rc != NS_OK && !s_quiet)
        fprintf(stderr, "run %s: %s: %s\n", c->job.entry, ns_strerror(rc),
                s_err);
    return rc;
}

/* The first OUT buffer. */
static void *s_out0(const s_case_t *c)
{
    for (uint32_t i = 0; i < c->job.n_args; i++)
        if (c->job.args[i].kind == NS_ARG_OUT)
            return c->out[i];
    return NULL;
}

/* Re-run `count` random units (plus the first and the last), each alone
 * on two fills of the outputs (0x00, 0xFF): every byte it writes (equal
 * after both runs) must hold the full run's value, the property spot
 * checks and fraud proofs rest on. */
static void s_check_units(ns_runner_t *r, const s_case_t *c, uint32_t count)
{
    uint64_t n_units = ns_job_units(&c->job);
    uint8_t *a[NS_MAX_ARGS] = {0}, *b[NS_MAX_ARGS] = {0};
    uint64_t written = 0;
    char err[1024] = "";
    for (uint32_t i = 0; i < c->job.n_args; i++)
        if (c->job.args[i].kind == NS_ARG_OUT) {
            a[i] = malloc(c->job.args[i].size);
            b[i] = malloc(c->job.args[i].size);
            if (!CHECK(a[i] && b[i]))
                goto out;
        }
    for (uint32_t j = 0; j < count + 2; j++) {
        uint64_t u = j == 0 ? n_units - 1
                     : j == 1
                         ? 0
                         : ((uint64_t)s_rand32() << 32 | s_rand32()) % n_units;
        for (uint32_t i = 0; i < c->job.n_args; i++)
            if (a[i]) {
                memset(a[i], 0x00, c->job.args[i].size);
                memset(b[i], 0xff, c->job.args[i].size);
            }
        int rc = ns_runner_run_units(r, &c->job, c->in, &u, 1, a, NULL, err,
                                     sizeof err);
        if (rc == NS_OK)
            rc = ns_runner_run_units(r, &c->job, c->in, &u, 1, b, NULL, err,
                                     sizeof err);
        if (!CHECK_RC(rc, NS_OK)) {
            fprintf(stderr, "run_units %s: %s\n", c->job.entry, err);
            goto out;
        }
        uint64_t bad = 0;
        for (uint32_t i = 0; i < c->job.n_args; i++)
            for (uint64_t k = 0; a[i] && k < c->job.args[i].size; k++)
                if (a[i][k] == b[i][k]) {
                    written++;
                    bad += a[i][k] != c->out[i][k];
                }
        if (!CHECK_EQ_INT(bad, 0))
            fprintf(stderr, "  %s: unit %llu of %llu differs\n", c->job.entry,
                    (unsigned long long)u, (unsigned long long)n_units);
    }
    CHECK(written > 0);
out:
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        free(a[i]);
        free(b[i]);
    }
}

static float *s_rand_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = s_randf();
    return v;
}

/* ---- built-ins -------------------------------------------------------- */

TEST(builtins_listed)
{
    static const char *want[] = {"mandelbrot",   "montecarlo_pi", "nbody_step",
                                 "nonce_sha256", "saxpy",         "sgemm",
                                 "sgemm_gpu",    "stencil2d",     "vector_add"};
    size_t n = 0;
    const ns_builtin_t *list = ns_builtin_list(&n);
    CHECK(n >= sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ns_builtin_t *b = ns_builtin_find(want[i]);
        if (!CHECK(b != NULL)) {
            fprintf(stderr, "  missing built-in %s\n", want[i]);
            continue;
        }
        CHECK_STR(b->entry, want[i]);
        CHECK(strlen(b->summary) > 10);
        CHECK(b->source_len == strlen(b->source));
        CHECK_CONTAINS(b->source, "__kernel void");
    }
    for (size_t i = 0; i + 1 < n; i++)
        CHECK(strcmp(list[i].name, list[i + 1].name) < 0);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ns_builtin_t *b = ns_builtin_find(want[i]);
        if (b && strstr(b->source, "float"))
            CHECK_CONTAINS(b->source, "#pragma OPENCL FP_CONTRACT OFF");
    }
    CHECK(ns_builtin_find("bench_fma") == NULL); /* "Not a job kernel" */
    CHECK(ns_builtin_find("nope") == NULL);
    CHECK(ns_builtin_find("") == NULL);
}

TEST(vector_add)
{
    const uint32_t n = 1000;
    s_case_t c;
    ns_timings_t t;
    float *a = s_rand_floats(n), *b = s_rand_floats(n);
    float want[1000];
    for (uint32_t i = 0; i < n; i++)
        want[i] = a[i] + b[i];
    s_case_builtin(&c, "vector_add", 1, n, 0, 0, 0);
    s_case_in(&c, a, n * sizeof(float));
    s_case_in(&c, b, n * sizeof(float));
    s_case_out(&c, n * sizeof(float), sizeof(float));
    s_case_u32(&c, n);
    if (CHECK_RC(s_case_run(s_r, &c, &t), NS_OK)) {
        CHECK_MEM(c.out[2], want, sizeof want);
        CHECK(!t.cache_hit); /* no cache directory, first program */
        CHECK(t.build_us > 0);
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
}

TEST(saxpy)
{
    const uint32_t n = 777;
    const float alpha = 1.37f;
    s_case_t c;
    float *x = s_rand_floats(n), *y = s_rand_floats(n);
    float want[777];
    for (uint32_t i = 0; i < n; i++) {
        float p = alpha * x[i];
        want[i] = p + y[i];
    }
    s_case_builtin(&c, "saxpy", 1, n, 0, 7, 0);
    s_case_in(&c, x, n * sizeof(float));
    s_case_in(&c, y, n * sizeof(float));
    s_case_out(&c, n * sizeof(float), sizeof(float));
    s_case_f32(&c, alpha);
    s_case_u32(&c, n);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, sizeof want);
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
}

TEST(stencil2d)
{
    const uint32_t w = 37, h = 23;
    s_case_t c;
    float *in = s_rand_floats(w * h), *wt = s_rand_floats(9);
    float *want = malloc(w * h * sizeof *want);
    if (!CHECK(in && wt && want))
        return;
    for (long y = 0; y < h; y++)
        for (long x = 0; x < w; x++) {
            float acc = 0.0f;
            for (int dy = -1; dy <= 1; dy++) {
                long yy = y + dy < 0 ? 0 : y + dy >= h ? h - 1 : y + dy;
                for (int dx = -1; dx <= 1; dx++) {
                    long xx = x + dx < 0 ? 0 : x + dx >= w ? w - 1 : x + dx;
                    float p = wt[(dy + 1) * 3 + dx + 1] * in[yy * w + xx];
                    acc = acc + p;
                }
            }
            want[y * w + x] = acc;
        }
    s_case_builtin(&c, "stencil2d", 2, w, h, 0, 0);
    s_case_in(&c, in, w * h * sizeof(float));
    s_case_in(&c, wt, 9 * sizeof(float));
    s_case_out(&c, w * h * sizeof(float), sizeof(float));
    s_case_u32(&c, w);
    s_case_u32(&c, h);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, w * h * sizeof(float));
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
    free(want);
}

TEST(mandelbrot)
{
    const uint32_t w = 64, h = 48, max_iter = 300;
    const float x0 = -2.1f, y0 = -1.2f, dx = 3.0f / 64, dy = 2.4f / 48;
    s_case_t c;
    uint32_t want[64 * 48];
    uint32_t escaped = 0, bounded = 0;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            float cr = x0 + (float)x * dx, ci = y0 + (float)y * dy;
            float zr = 0.0f, zi = 0.0f;
            uint32_t n = 0;
            while (n < max_iter) {
                float zr2 = zr * zr, zi2 = zi * zi;
                if (zr2 + zi2 > 4.0f)
                    break;
                float t = 2.0f * zr;
                float p = t * zi;
                zi = p + ci;
                float d = zr2 - zi2;
                zr = d + cr;
                n++;
            }
            want[y * w + x] = n;
            escaped += n < max_iter;
            bounded += n == max_iter;
        }
    CHECK(escaped > 0 && bounded > 0); /* the view has both */
    s_case_builtin(&c, "mandelbrot", 2, w, h, 8, 8);
    s_case_out(&c, sizeof want, 4);
    s_case_u32(&c, w);
    s_case_u32(&c, h);
    s_case_f32(&c, x0);
    s_case_f32(&c, y0);
    s_case_f32(&c, dx);
    s_case_f32(&c, dy);
    s_case_u32(&c, max_iter);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, sizeof want);
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
}

static float s_rsqrt(float x)
{
    float h = 0.5f * x, y;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = 0x5f375a86u - (u >> 1);
    memcpy(&y, &u, sizeof y);
    for (int i = 0; i < 3; i++) {
        float t = y * y;
        t = h * t;
        t = 1.5f - t;
        y = y * t;
    }
    return y;
}

TEST(nbody_step)
{
    enum { N = 100 };
    const float dt = 0.01f, eps2 = 0.0025f;
    s_case_t c;
    float *pos = malloc(N * 4 * sizeof *pos),
          *vel = malloc(N * 4 * sizeof *vel);
    float want_p[N * 4], want_v[N * 4];
    if (!CHECK(pos && vel))
        return;
    for (int i = 0; i < N * 4; i++) {
        pos[i] = s_randf();
        vel[i] = s_randf() * 0.1f;
    }
    for (int i = 0; i < N; i++)
        pos[4 * i + 3] = 0.75f + 0.25f * pos[4 * i + 3]; /* mass > 0 */
    for (int i = 0; i < N; i++) {
        const float *p = pos + 4 * i;
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        for (int j = 0; j < N; j++) {
            const float *q = pos + 4 * j;
            float dx = q[0] - p[0], dy = q[1] - p[1], dz = q[2] - p[2];
            float xx = dx * dx, yy = dy * dy, zz = dz * dz;
            float r2 = xx + yy;
            r2 = r2 + zz;
            r2 = r2 + eps2;
            float inv = s_rsqrt(r2);
            float s = inv * inv;
            s = s * inv;
            s = q[3] * s;
            float fx = dx * s, fy = dy * s, fz = dz * s;
            ax = ax + fx;
            ay = ay + fy;
            az = az + fz;
        }
        float *wv = want_v + 4 * i, *wp = want_p + 4 * i;
        float t;
        t = ax * dt;
        wv[0] = vel[4 * i] + t;
        t = ay * dt;
        wv[1] = vel[4 * i + 1] + t;
        t = az * dt;
        wv[2] = vel[4 * i + 2] + t;
        wv[3] = vel[4 * i + 3];
        for (int k = 0; k < 3; k++) {
            t = wv[k] * dt;
            wp[k] = p[k] + t;
        }
        wp[3] = p[3];
    }
    s_case_builtin(&c, "nbody_step", 1, N, 0, 0, 0);
    s_case_in(&c, pos, sizeof want_p);
    s_case_in(&c, vel, sizeof want_v);
    s_case_out(&c, sizeof want_p, 16);
    s_case_out(&c, sizeof want_v, 16);
    s_case_u32(&c, N);
    s_case_f32(&c, dt);
    s_case_f32(&c, eps2);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(c.out[2], want_p, sizeof want_p);
        CHECK_MEM(c.out[3], want_v, sizeof want_v);
        s_check_units(s_r, &c, 30); /* items of two output buffers */
    }
    s_case_free(&c);
}

TEST(nonce_sha256)
{
    enum { N = 300 };
    const uint64_t base = 0xfffffffffffffff0ull - 100; /* wraps */
    s_case_t c;
    uint8_t *prefix = malloc(32);
    uint8_t want[N * 8];
    if (!CHECK(prefix))
        return;
    for (int i = 0; i < 32; i++)
        prefix[i] = (uint8_t)(i * 37 + 11);
    for (uint64_t g = 0; g < N; g++) {
        uint8_t msg[40], h[crypto_hash_sha256_BYTES];
        uint64_t nonce = base + g;
        memcpy(msg, prefix, 32);
        for (int k = 0; k < 8; k++)
            msg[32 + k] = (uint8_t)(nonce >> (8 * k));
        crypto_hash_sha256(h, msg, sizeof msg);
        memcpy(want + 8 * g, h, 8);
    }
    s_case_builtin(&c, "nonce_sha256", 1, N, 0, 0, 0);
    s_case_in(&c, prefix, 32);
    s_case_out(&c, sizeof want, 8);
    s_case_u64(&c, base);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, sizeof want);
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
}

TEST(montecarlo_pi)
{
    enum { N = 256 };
    const uint64_t seed = 12345;
    const uint32_t samples = 1000;
    s_case_t c;
    uint32_t want[N];
    uint64_t inside = 0;
    for (uint64_t g = 0; g < N; g++) {
        uint32_t count = 0;
        for (uint32_t i = 0; i < samples; i++) {
            uint64_t z = seed + (g * samples + i + 1) * 0x9e3779b97f4a7c15ull;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z = z ^ (z >> 31);
            uint64_t x = z >> 40, y = (z >> 16) & 0xffffff;
            count += x * x + y * y < (1ull << 48);
        }
        want[g] = count;
        inside += count;
    }
    double pi = 4.0 * (double)inside / ((double)N * samples);
    CHECK(pi > M_PI - 0.02 && pi < M_PI + 0.02);
    s_case_builtin(&c, "montecarlo_pi", 1, N, 0, 64, 0);
    s_case_out(&c, sizeof want, 4);
    s_case_u64(&c, seed);
    s_case_u32(&c, samples);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, sizeof want);
        s_check_units(s_r, &c, 30);
    }
    s_case_free(&c);
}

/* fmaf without libm (the test binaries do not link -lm), as musl does it:
 * the product of two floats is exact in double, the double sum is rounded
 * once, and rounding that to float again is wrong only when it lands
 * exactly halfway between two floats while inexact; then it is nudged
 * toward the true value. Round-to-nearest and normal results, as here. */
static float s_fmaf(float x, float y, float z)
{
    double xy = (double)x * y, r = xy + z, err;
    uint64_t u;
    memcpy(&u, &r, sizeof u);
    if ((u & 0x1fffffff) != 0x10000000 || (r - xy == z && r - z == xy))
        return (float)r;
    bool neg = u >> 63;
    err = neg == (z > xy) ? xy - r + z : z - r + xy;
    if (neg == (err < 0))
        u++;
    else
        u--;
    memcpy(&r, &u, sizeof r);
    return (float)r;
}

/* C = A * B with one fma per k in increasing order, as both kernels. */
static float *s_sgemm_ref(const float *a, const float *b, uint32_t m,
                          uint32_t n, uint32_t k)
{
    float *c = malloc((size_t)m * n * sizeof *c);
    for (uint32_t i = 0; c && i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (uint32_t q = 0; q < k; q++)
                s = s_fmaf(a[(size_t)i * k + q], b[(size_t)q * n + j], s);
            c[(size_t)i * n + j] = s;
        }
    return c;
}

static void s_sgemm_case(s_case_t *c, const char *name, const float *a,
                         const float *b, uint32_t m, uint32_t n, uint32_t k,
                         uint64_t l0, uint64_t l1)
{
    float *ac = malloc((size_t)m * k * sizeof *ac);
    float *bc = malloc((size_t)k * n * sizeof *bc);
    memcpy(ac, a, (size_t)m * k * sizeof *ac);
    memcpy(bc, b, (size_t)k * n * sizeof *bc);
    s_case_builtin(c, name, 2, n / 64, m, l0, l1);
    s_case_in(c, ac, (size_t)m * k * sizeof *ac);
    s_case_in(c, bc, (size_t)k * n * sizeof *bc);
    s_case_out(c, (uint64_t)m * n * sizeof(float), 64 * sizeof(float));
    s_case_u32(c, m);
    s_case_u32(c, n);
    s_case_u32(c, k);
}

TEST(sgemm)
{
    /* K = 301: several 128-row panels of B and a remainder of k; odd
     * local sizes take other panel widths, rows left over after the
     * blocks of four (6, 2) and the no-panel path */
    const uint32_t m = 48, n = 192, k = 301;
    static const uint64_t locals[][2] = {{1, 16}, {0, 0}, {3, 8}, {1, 48},
                                         {1, 1},  {1, 6}, {3, 2}};
    static const char *names[] = {"sgemm", "sgemm_gpu"};
    float *a = s_rand_floats((size_t)m * k), *b = s_rand_floats((size_t)k * n);
    float *want = s_sgemm_ref(a, b, m, n, k);
    if (!CHECK(a && b && want))
        return;
    for (size_t v = 0; v < 2; v++)
        for (size_t l = 0; l < sizeof locals / sizeof locals[0]; l++) {
            s_case_t c;
            s_sgemm_case(&c, names[v], a, b, m, n, k, locals[l][0],
                         locals[l][1]);
            if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK) &&
                !CHECK_MEM(s_out0(&c), want, (size_t)m * n * sizeof(float)))
                fprintf(stderr, "  %s local (%llu, %llu) differs\n", names[v],
                        (unsigned long long)locals[l][0],
                        (unsigned long long)locals[l][1]);
            if (l == 0)
                s_check_units(s_r, &c, 40);
            s_case_free(&c);
        }
    /* sgemm's per-item path, the one GPUs take, forced on this device */
    for (size_t l = 0; l < sizeof locals / sizeof locals[0]; l++) {
        s_case_t c;
        s_sgemm_case(&c, "sgemm", a, b, m, n, k, locals[l][0], locals[l][1]);
        snprintf(c.job.options, sizeof c.job.options, "-D NS_SGEMM_ITEMS");
        if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK) &&
            !CHECK_MEM(s_out0(&c), want, (size_t)m * n * sizeof(float)))
            fprintf(stderr,
                    "  sgemm -D NS_SGEMM_ITEMS local (%llu, %llu) "
                    "differs\n",
                    (unsigned long long)locals[l][0],
                    (unsigned long long)locals[l][1]);
        if (l == 0)
            s_check_units(s_r, &c, 40);
        s_case_free(&c);
    }
    free(a);
    free(b);
    free(want);
}

/* sgemm's CPU path with wide groups: six column segments take two steps
 * a panel (four, then two), partial sums of up to 1024 row segments (the
 * cap on a group) wait in local memory, and 11 rows leave three after the
 * blocks of four; each also with the ITEMS path. */
TEST(sgemm_wide)
{
    const uint32_t m = 176, n = 384, k = 301;
    static const uint64_t locals[][2] = {{6, 8}, {6, 16}, {2, 16}, {3, 11}};
    float *a = s_rand_floats((size_t)m * k), *b = s_rand_floats((size_t)k * n);
    float *want = s_sgemm_ref(a, b, m, n, k);
    if (!CHECK(a && b && want))
        return;
    for (int items = 0; items < 2; items++)
        for (size_t l = 0; l < sizeof locals / sizeof locals[0]; l++) {
            s_case_t c;
            s_sgemm_case(&c, "sgemm", a, b, m, n, k, locals[l][0],
                         locals[l][1]);
            if (items)
                snprintf(c.job.options, sizeof c.job.options,
                         "-D NS_SGEMM_ITEMS");
            if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK) &&
                !CHECK_MEM(s_out0(&c), want, (size_t)m * n * sizeof(float)))
                fprintf(stderr, "  sgemm%s local (%llu, %llu) differs\n",
                        items ? " -D NS_SGEMM_ITEMS" : "",
                        (unsigned long long)locals[l][0],
                        (unsigned long long)locals[l][1]);
            if (l == 0 || l == 1)
                s_check_units(s_r, &c, 6);
            s_case_free(&c);
        }
    free(a);
    free(b);
    free(want);
}

/* ---- item re-runs of custom kernels ----------------------------------- */

/* A work-group item: each group reverses its chunk through local memory,
 * so only a re-run of the whole group gives the right bytes. */
static const char s_src_reverse[] =
    "__kernel void rev(__global const uint *in, __global uint *out,\n"
    "                  __local uint *tmp)\n"
    "{\n"
    "    size_t l = get_local_id(0), n = get_local_size(0);\n"
    "    size_t base = get_global_id(0) - l;\n"
    "    tmp[l] = in[base + l] * 3u + (uint)base;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[base + l] = tmp[n - 1 - l];\n"
    "}\n";

TEST(items_work_group)
{
    enum { N = 1024, L = 32 };
    const uint64_t global[1] = {N}, local[1] = {L};
    s_case_t c;
    uint32_t *in = malloc(N * sizeof *in);
    uint32_t want[N];
    if (!CHECK(in))
        return;
    for (uint32_t i = 0; i < N; i++)
        in[i] = s_rand32();
    for (uint32_t i = 0; i < N; i++) {
        uint32_t base = i / L * L, l = i % L;
        want[i] = in[base + (L - 1 - l)] * 3u + base;
    }
    s_case_source(&c, s_src_reverse, "rev", 1, global, local);
    c.job.item_kind = NS_ITEM_WORK_GROUP;
    s_case_in(&c, in, sizeof want);
    s_case_out(&c, sizeof want, L * 4);
    c.job.args[c.job.n_args].kind = NS_ARG_LOCAL;
    c.job.args[c.job.n_args++].size = L * 4;
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        CHECK_MEM(s_out0(&c), want, sizeof want);
        CHECK_EQ_INT(ns_job_units(&c.job), N / L);
        s_check_units(s_r, &c, 10);
    }
    s_case_free(&c);
}

/* Three dimensions: item numbering x fastest, then y, then z. pos3 writes
 * one slice per work-item, pos3g one contiguous slice per work-group
 * (group-major), so both item kinds can be re-run. */
static const char s_src_3d[] =
    "__kernel void pos3(__global ulong *out, uint gx, uint gy)\n"
    "{\n"
    "    size_t x = get_global_id(0), y = get_global_id(1),\n"
    "           z = get_global_id(2);\n"
    "    size_t i = x + gx * (y + gy * z);\n"
    "    out[2 * i] = x | y << 16 | z << 32;\n"
    "    out[2 * i + 1] = i * 0x9e3779b97f4a7c15UL;\n"
    "}\n"
    "__kernel void pos3g(__global ulong *out, uint gx, uint gy)\n"
    "{\n"
    "    size_t x = get_global_id(0), y = get_global_id(1),\n"
    "           z = get_global_id(2);\n"
    "    size_t lx = get_local_size(0), ly = get_local_size(1),\n"
    "           lz = get_local_size(2);\n"
    "    size_t g = x / lx + gx / lx * (y / ly + gy / ly * (z / lz));\n"
    "    size_t l = x % lx + lx * (y % ly + ly * (z % lz));\n"
    "    size_t i = g * lx * ly * lz + l;\n"
    "    out[2 * i] = x | y << 16 | z << 32;\n"
    "    out[2 * i + 1] = i * 0x9e3779b97f4a7c15UL;\n"
    "}\n";

TEST(items_3d)
{
    const uint64_t global[3] = {6, 5, 4}, local[3] = {3, 5, 2};
    s_case_t c;
    s_case_source(&c, s_src_3d, "pos3", 3, global, local);
    s_case_out(&c, 6 * 5 * 4 * 16, 16);
    s_case_u32(&c, 6);
    s_case_u32(&c, 5);
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        const uint64_t *o = s_out0(&c);
        for (uint64_t z = 0, i = 0; z < 4; z++)
            for (uint64_t y = 0; y < 5; y++)
                for (uint64_t x = 0; x < 6; x++, i++)
                    CHECK(o[2 * i] == (x | y << 16 | z << 32));
        s_check_units(s_r, &c, 20);
    }
    /* 2 x 1 x 2 work-groups of 3 x 5 x 2, 480 bytes each */
    snprintf(c.job.entry, sizeof c.job.entry, "pos3g");
    c.job.item_kind = NS_ITEM_WORK_GROUP;
    c.job.args[0].item_bytes = 3 * 5 * 2 * 16;
    if (CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK)) {
        const uint64_t *o = s_out0(&c);
        /* group 1 is x 3..5, y 0..4, z 0..1; its first work-item (3, 0, 0) */
        CHECK(o[2 * 30] == 3);
        CHECK_EQ_INT(ns_job_units(&c.job), 4);
        s_check_units(s_r, &c, 6);
    }
    s_case_free(&c);
}

TEST(items_out_of_range)
{
    s_case_t c;
    uint64_t units[2] = {0, 10};
    uint8_t out[64];
    uint8_t *outs[NS_MAX_ARGS] = {out};
    char err[256] = "";
    s_case_builtin(&c, "montecarlo_pi", 1, 10, 0, 0, 0);
    s_case_out(&c, 40, 4);
    s_case_u64(&c, 1);
    s_case_u32(&c, 10);
    CHECK_RC(ns_runner_run_units(s_r, &c.job, c.in, units, 2, outs, NULL, err,
                                 sizeof err),
             NS_ERR_INVAL);
    CHECK_CONTAINS(err, "unit 10");
    /* no buffer for an output */
    outs[0] = NULL;
    CHECK_RC(ns_runner_run_units(s_r, &c.job, c.in, units, 1, outs, NULL, err,
                                 sizeof err),
             NS_ERR_INVAL);
    s_case_free(&c);
}

/* ---- program cache ---------------------------------------------------- */

static int s_count_bin(const char *dir, char *path, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0) {
            n++;
            snprintf(path, cap, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return n;
}

static void s_make_saxpy(s_case_t *c, uint32_t n)
{
    s_case_builtin(c, "saxpy", 1, n, 0, 0, 0);
    s_case_in(c, s_rand_floats(n), n * sizeof(float));
    s_case_in(c, s_rand_floats(n), n * sizeof(float));
    s_case_out(c, n * sizeof(float), 4);
    s_case_f32(c, -0.75f);
    s_case_u32(c, n);
}

TEST(program_cache)
{
    char dir[PATH_MAX + 16], bin[PATH_MAX + 300] = "";
    int err = 0;
    ns_timings_t t;
    s_case_t c;
    float first[256];
    snprintf(dir, sizeof dir, "%s/cache", s_tmp);
    s_make_saxpy(&c, 256);

    /* a fresh directory: compiled, stored */
    ns_runner_t *r1 = ns_runner_new(0, dir, &err);
    if (!CHECK(r1 != NULL))
        goto out;
    if (CHECK_RC(s_case_run(r1, &c, &t), NS_OK)) {
        CHECK(!t.cache_hit);
        memcpy(first, s_out0(&c), sizeof first);
    }
    CHECK_EQ_INT(s_count_bin(dir, bin, sizeof bin), 1);
    /* the same runner again: its last program */
    if (CHECK_RC(s_case_run(r1, &c, &t), NS_OK))
        CHECK(t.cache_hit);
    ns_runner_destroy(&r1);
    CHECK(r1 == NULL);
    ns_runner_destroy(&r1); /* idempotent */

    /* a second runner: from the file */
    ns_runner_t *r2 = ns_runner_new(0, dir, &err);
    if (CHECK(r2 != NULL) && CHECK_RC(s_case_run(r2, &c, &t), NS_OK)) {
        CHECK(t.cache_hit);
        CHECK_MEM(s_out0(&c), first, sizeof first);
        s_check_units(r2, &c, 10);
        /* the re-run build is a program of its own, cached too */
        CHECK_EQ_INT(s_count_bin(dir, bin + 0, 0), 2);
    }
    ns_runner_destroy(&r2);

    /* corrupt the binary (one byte, then a truncation): ignored, rebuilt,
     * the file rewritten so the next runner hits again */
    for (int round = 0; round < 2; round++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (!CHECK_RC(ns_file_read(bin, 256u << 20, &buf, &len), NS_OK))
            break;
        if (round == 0)
            buf[len / 2] ^= 0x40;
        else
            len = len / 3;
        CHECK_RC(ns_file_write_atomic(bin, buf, len, 0600), NS_OK);
        free(buf);
        ns_runner_t *r3 = ns_runner_new(0, dir, &err);
        if (CHECK(r3 != NULL) && CHECK_RC(s_case_run(r3, &c, &t), NS_OK)) {
            CHECK(!t.cache_hit);
            CHECK_MEM(s_out0(&c), first, sizeof first);
        }
        ns_runner_destroy(&r3);
        ns_runner_t *r4 = ns_runner_new(0, dir, &err);
        if (CHECK(r4 != NULL) && CHECK_RC(s_case_run(r4, &c, &t), NS_OK))
            CHECK(t.cache_hit);
        ns_runner_destroy(&r4);
    }

    /* other build options: another key, another file */
    snprintf(c.job.options, sizeof c.job.options, "-D NS_UNUSED=1");
    ns_runner_t *r5 = ns_runner_new(0, dir, &err);
    if (CHECK(r5 != NULL) && CHECK_RC(s_case_run(r5, &c, &t), NS_OK)) {
        CHECK(!t.cache_hit);
        CHECK_MEM(s_out0(&c), first, sizeof first);
    }
    ns_runner_destroy(&r5);
    CHECK_EQ_INT(s_count_bin(dir, bin, sizeof bin), 3);
out:
    s_case_free(&c);
}

/* ---- errors ------------------------------------------------------------ */

TEST(build_error)
{
    static const char src[] = "__kernel void f(__global float *o)\n"
                              "{\n"
                              "    o[get_global_id(0)] = ;\n"
                              "}\n";
    const uint64_t global[1] = {16};
    s_case_t c;
    char err[512] = "";
    uint8_t *outputs[1] = {NULL};
    uint8_t out[64];
    s_case_source(&c, src, "f", 1, global, NULL);
    s_case_out(&c, 64, 4);
    outputs[0] = out;
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, outputs, NULL, err, sizeof err),
             NS_ERR_OPENCL);
    CHECK_CONTAINS(err, "build failed");
    CHECK_CONTAINS(err, "error");
    CHECK_CONTAINS(err, "expected expression");
    s_case_free(&c);
}

TEST(bad_jobs)
{
    s_case_t c;
    char err[512] = "";
    float *x;

    /* input modified after the job was made: rejected before any run */
    s_quiet = true;
    s_make_saxpy(&c, 64);
    x = (float *)c.in_data[0];
    x[5] += 1.0f;
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_ERR_CORRUPT);
    CHECK_CONTAINS(s_err, "arg 0: input does not match its hash");
    c.in[0].verified = true; /* the caller vouches: no hash */
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK);
    c.in[0].verified = false;
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_ERR_CORRUPT);
    x[5] -= 1.0f;
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK);
    c.in[1].len = 60; /* shorter than the descriptor says */
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_ERR_INVAL);
    CHECK_CONTAINS(s_err, "arg 1: input is 60 bytes, the job says 256");
    c.in[1].len = 64 * sizeof(float);
    s_quiet = false;

    /* wrong entry point, wrong argument count */
    snprintf(c.job.entry, sizeof c.job.entry, "vector_add");
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, c.out, NULL, err, sizeof err),
             NS_ERR_INVAL);
    CHECK_CONTAINS(err, "no kernel 'vector_add'");
    snprintf(c.job.entry, sizeof c.job.entry, "saxpy");
    c.job.n_args--;
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, c.out, NULL, err, sizeof err),
             NS_ERR_INVAL);
    CHECK_CONTAINS(err, "takes 5 arguments");
    c.job.n_args++;

    /* built-in text differs from the job's hash: another version */
    c.job.source_hash[0] ^= 1;
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, c.out, NULL, err, sizeof err),
             NS_ERR_VERSION);
    c.job.source_hash[0] ^= 1;
    snprintf(c.job.builtin, sizeof c.job.builtin, "no_such_kernel");
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, c.out, NULL, err, sizeof err),
             NS_ERR_NOTFOUND);
    snprintf(c.job.builtin, sizeof c.job.builtin, "saxpy");

    /* an invalid descriptor never reaches OpenCL */
    c.job.global[0] = 0;
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, c.out, NULL, err, sizeof err),
             NS_ERR_INVAL);
    c.job.global[0] = 64;
    CHECK_RC(s_case_run(s_r, &c, NULL), NS_OK);
    s_case_free(&c);
}

static const char s_src_noop[] =
    "__kernel void noop(__global uint *a, __global uint *b,\n"
    "                   __global uint *c, __global uint *d,\n"
    "                   __global uint *e, __global uint *f)\n"
    "{\n"
    "}\n";

TEST(too_big)
{
    const ns_device_t *dev = ns_runner_device(s_r);
    uint64_t max_alloc = dev->info.max_alloc_bytes;
    uint64_t global_mem = dev->info.global_mem_bytes;
    uint64_t items = max_alloc / 4 + 16; /* one buffer just over the cap */
    char err[512] = "";
    uint8_t *outputs[NS_MAX_ARGS] = {NULL};
    s_case_t c;

    if (items * 4 > NS_MAX_BUFFER || max_alloc == 0) {
        printf("too_big: device allocates %llu bytes at once, more than a "
               "job may ask; skipped\n",
               (unsigned long long)max_alloc);
        return;
    }
    const uint64_t global[1] = {items};
    s_case_source(&c, s_src_noop, "noop", 1, global, NULL);
    for (int i = 0; i < 6; i++)
        s_case_out(&c, items * 4, 4);
    CHECK_RC(ns_runner_run(s_r, &c.job, c.in, outputs, NULL, err, sizeof err),
             NS_ERR_TOOBIG);
    CHECK_CONTAINS(err, "largest allocation");

    /* each under the cap, all together over global memory */
    uint64_t per = max_alloc / 4 * 4;
    if (per * 6 > global_mem && per * 6 <= NS_MAX_JOB_BYTES) {
        c.job.global[0] = per / 4;
        for (int i = 0; i < 6; i++)
            c.job.args[i].size = per;
        CHECK_RC(
            ns_runner_run(s_r, &c.job, c.in, outputs, NULL, err, sizeof err),
            NS_ERR_TOOBIG);
        CHECK_CONTAINS(err, "global memory");
    }
    s_case_free(&c);
}

TEST(too_big_local)
{
    char err[512] = "";
    uint8_t out[256];
    uint8_t *outputs[NS_MAX_ARGS] = {out};

    /* local memory: 16 MB of __local arguments, more than any device has */
    static const char src_local[] =
        "#define L(n) __local uint *n\n"
        "__kernel void loc(__global uint *o, L(a), L(b), L(c), L(d), L(e),\n"
        "                  L(f), L(g), L(h), L(i), L(j), L(k), L(l), L(m),\n"
        "                  L(n), L(p), L(q))\n"
        "{\n"
        "    o[get_global_id(0)] = 1;\n"
        "}\n";
    const uint64_t one[1] = {64};
    s_case_t l;
    s_case_source(&l, src_local, "loc", 1, one, NULL);
    s_case_out(&l, sizeof out, 4);
    for (int i = 0; i < 16; i++) {
        l.job.args[l.job.n_args].kind = NS_ARG_LOCAL;
        l.job.args[l.job.n_args++].size = NS_MAX_LOCAL_BYTES;
    }
    CHECK_RC(ns_runner_run(s_r, &l.job, l.in, outputs, NULL, err, sizeof err),
             NS_ERR_TOOBIG);
    CHECK_CONTAINS(err, "local memory");
    for (int i = 1; i <= 16; i++) /* the same with 1 KB each runs */
        l.job.args[i].size = 1024;
    CHECK_RC(ns_runner_run(s_r, &l.job, l.in, outputs, NULL, err, sizeof err),
             NS_OK);
    s_case_free(&l);
}

int main(void)
{
    int err = 0;
    const char *base = getenv("NS_TEST_TMP");
    ns_log_threshold = NS_LOG_ERROR;
    if (sodium_init() < 0)
        return 1;
    snprintf(s_tmp, sizeof s_tmp, "%s/runner.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(s_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(builtins_listed);
    s_r = ns_runner_new(0, NULL, &err);
    if (!s_r) {
        const char *v = getenv("NS_TEST_ALLOW_NO_DEVICES");
        if (v && strcmp(v, "1") == 0) {
            printf("no OpenCL device (%s): device tests skipped\n",
                   ns_strerror(err));
            return ns_test_finish("exec_runner");
        }
        CHECK_RC(err, NS_OK);
        return ns_test_finish("exec_runner");
    }
    RUN(vector_add);
    RUN(saxpy);
    RUN(stencil2d);
    RUN(mandelbrot);
    RUN(nbody_step);
    RUN(nonce_sha256);
    RUN(montecarlo_pi);
    RUN(sgemm);
    RUN(sgemm_wide);
    RUN(items_work_group);
    RUN(items_3d);
    RUN(items_out_of_range);
    RUN(program_cache);
    RUN(build_error);
    RUN(bad_jobs);
    RUN(too_big);
    RUN(too_big_local);
    ns_runner_destroy(&s_r);

    /* again with device buffers written and read back, as on a discrete
     * GPU, instead of host memory used in place */
    setenv("NS_RUNNER_COPY_BUFFERS", "1", 1);
    s_r = ns_runner_new(0, NULL, &err);
    unsetenv("NS_RUNNER_COPY_BUFFERS");
    if (CHECK(s_r != NULL)) {
        RUN(vector_add);
        RUN(nbody_step);
        RUN(sgemm);
        RUN(items_work_group);
        RUN(bad_jobs);
    }
    ns_runner_destroy(&s_r);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_tmp);
    return ns_test_finish("exec_runner");
}
