/* seeds.h - what the seed generators (gen_*_corpus.c) share: writing a
 * seed named by its hash, and a set of valid job descriptors that between
 * them use every argument kind, determinism class, item kind and NDRange
 * shape (the job and fraud generators both pack them).
 *
 * Seeds are named by the hex of the first 20 bytes of their BLAKE2b-256,
 * so running a generator twice only adds what differs (signatures made
 * with a fresh key).
 */
#ifndef NIGHTSHIFT_TESTS_FUZZ_SEEDS_H
#define NIGHTSHIFT_TESTS_FUZZ_SEEDS_H

#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEEDS_N_JOBS 7 /* seeds_job variants */

static struct {
    const char *prog;
    const char *dir;
    int written;
} seeds_g;

static inline void seeds_die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", seeds_g.prog, what, ns_strerror(rc));
    exit(1);
}

static inline void seeds_check(int rc, const char *what)
{
    if (rc != NS_OK)
        seeds_die(what, rc);
}

/* argv: PROG DIR. Creates DIR. */
static inline void seeds_init(int argc, char **argv)
{
    seeds_g.prog = argv[0];
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        exit(2);
    }
    seeds_g.dir = argv[1];
    if (sodium_init() < 0)
        seeds_die("sodium_init", NS_ERR_CRYPTO);
    seeds_check(ns_mkdir_p(seeds_g.dir, 0755), seeds_g.dir);
}

static inline void seeds_save(const char *what, const uint8_t *data, size_t len)
{
    ns_hash_t h;
    char hex[2 * NS_HASH_BYTES + 1], path[4096];
    ns_hash(h, data, len);
    ns_hex(hex, h, 20);
    snprintf(path, sizeof path, "%s/%s", seeds_g.dir, hex);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        seeds_die(path, NS_ERR_IO);
    printf("%s %7zu bytes  %s\n", hex, len, what);
    seeds_g.written++;
}

/* The seed, then: cut in half, one trailing byte, the last byte flipped,
 * and the byte at `at` set to `value` (a version or a count). */
static inline void seeds_save_mutants(const char *name, const uint8_t *data,
                                      size_t len, size_t at, uint8_t value)
{
    char what[160];
    uint8_t *m = malloc(len + 1);
    if (!m)
        seeds_die("malloc", NS_ERR_NOMEM);
    seeds_save(name, data, len);
    snprintf(what, sizeof what, "%s, truncated", name);
    seeds_save(what, data, len / 2);
    memcpy(m, data, len);
    m[len] = 0xc0;
    snprintf(what, sizeof what, "%s, trailing byte", name);
    seeds_save(what, m, len + 1);
    m[len - 1] ^= 0x01;
    snprintf(what, sizeof what, "%s, last byte flipped", name);
    seeds_save(what, m, len);
    m[len - 1] ^= 0x01;
    if (at < len) {
        m[at] = value;
        snprintf(what, sizeof what, "%s, byte %zu = 0x%02x", name, at, value);
        seeds_save(what, m, len);
    }
    free(m);
}

static inline void seeds_done(void)
{
    printf("%s: %d files in %s\n", seeds_g.prog, seeds_g.written, seeds_g.dir);
}

static inline void seeds_arg(ns_job_t *j, uint8_t kind, uint64_t size,
                             uint32_t item_bytes)
{
    ns_arg_t *a = &j->args[j->n_args++];
    a->kind = kind;
    a->size = size;
    a->item_bytes = item_bytes;
    if (kind == NS_ARG_IN)
        ns_hash(a->hash, &j->n_args, sizeof j->n_args);
}

static inline void seeds_source(ns_job_t *j, const char *text)
{
    seeds_check(ns_job_set_source(j, text, strlen(text)), "set source");
}

/* Valid job number v (0..SEEDS_N_JOBS-1) into an initialised j; a short
 * description in *name. Items: 1024, 4, 8, 24, 1, 5, 3. */
static inline void seeds_job(ns_job_t *j, int v, const char **name)
{
    char err[256];
    ns_job_release(j);
    j->dims = 1;
    switch (v) {
    case 0:
        *name = "builtin vector_add, 1024 items, exact";
        snprintf(j->builtin, sizeof j->builtin, "vector_add");
        ns_hash(j->source_hash, "vector_add", 10);
        snprintf(j->entry, sizeof j->entry, "vector_add");
        j->global[0] = 1024;
        seeds_arg(j, NS_ARG_IN, 4096, 0);
        seeds_arg(j, NS_ARG_IN, 4096, 0);
        seeds_arg(j, NS_ARG_OUT, 4096, 4);
        seeds_arg(j, NS_ARG_U32, 0, 0);
        j->args[3].v.u32 = 1024;
        break;
    case 1:
        *name = "source saxpy, local 64, work groups, ulp 4, options";
        seeds_source(j, "__kernel void saxpy(float a, __global const float "
                        "*x, __global float *y)\n{ size_t i = "
                        "get_global_id(0); y[i] = a * x[i] + y[i]; }\n");
        snprintf(j->entry, sizeof j->entry, "saxpy");
        snprintf(j->options, sizeof j->options, "-cl-std=CL1.2 -DN=256 -w");
        j->global[0] = 256;
        j->local[0] = 64;
        j->item_kind = NS_ITEM_WORK_GROUP;
        seeds_arg(j, NS_ARG_F32, 0, 0);
        j->args[0].v.f32 = 2.5f;
        seeds_arg(j, NS_ARG_IN, 1024, 0);
        seeds_arg(j, NS_ARG_OUT, 4 * 256, 256);
        j->det = NS_DET_ULP;
        j->tol = 4;
        break;
    case 2:
        *name = "2-D 16x8 local 4x4 groups, every scalar kind, abs";
        seeds_source(j, "__kernel void k(__local float *l, int a, long b,\n"
                        " ulong c, double d, __global float *o) {}\n");
        snprintf(j->entry, sizeof j->entry, "k");
        snprintf(j->options, sizeof j->options,
                 "-D FOO=1.5 -cl-mad-enable -cl-std=CL2.0");
        j->dims = 2;
        j->global[0] = 16;
        j->global[1] = 8;
        j->local[0] = 4;
        j->local[1] = 4;
        j->item_kind = NS_ITEM_WORK_GROUP;
        seeds_arg(j, NS_ARG_LOCAL, 256, 0);
        seeds_arg(j, NS_ARG_I32, 0, 0);
        j->args[1].v.i32 = -5;
        seeds_arg(j, NS_ARG_I64, 0, 0);
        j->args[2].v.i64 = INT64_MIN + 1;
        seeds_arg(j, NS_ARG_U64, 0, 0);
        j->args[3].v.u64 = UINT64_MAX;
        seeds_arg(j, NS_ARG_F64, 0, 0);
        j->args[4].v.f64 = -0.125;
        seeds_arg(j, NS_ARG_OUT, 8 * 16, 16);
        j->det = NS_DET_ABS;
        j->tol = 1e-3;
        j->work_estimate = 1000000;
        break;
    case 3:
        *name = "3-D 4x3x2, two outputs, rel, checks 100";
        snprintf(j->builtin, sizeof j->builtin, "stencil3");
        ns_hash(j->source_hash, "stencil3", 8);
        snprintf(j->entry, sizeof j->entry, "stencil_3d");
        snprintf(j->options, sizeof j->options,
                 "-cl-fast-relaxed-math -DX -cl-opt-disable");
        j->dims = 3;
        j->global[0] = 4;
        j->global[1] = 3;
        j->global[2] = 2;
        seeds_arg(j, NS_ARG_OUT, 24 * 8, 8);
        seeds_arg(j, NS_ARG_IN, 1, 0);
        seeds_arg(j, NS_ARG_OUT, 24 * 4, 4);
        j->det = NS_DET_REL;
        j->tol = 0.01;
        j->checks = 100;
        j->work_estimate = UINT64_C(1) << 40;
        break;
    case 4:
        *name = "one item";
        snprintf(j->builtin, sizeof j->builtin, "one");
        ns_hash(j->source_hash, "one", 3);
        snprintf(j->entry, sizeof j->entry, "one");
        j->global[0] = 1;
        seeds_arg(j, NS_ARG_OUT, 3, 3);
        break;
    case 5:
        *name = "5 items (an odd tree), checks 1";
        snprintf(j->builtin, sizeof j->builtin, "mandelbrot");
        ns_hash(j->source_hash, "mandelbrot", 10);
        snprintf(j->entry, sizeof j->entry, "mandelbrot");
        j->global[0] = 5;
        seeds_arg(j, NS_ARG_OUT, 5 * 4, 4);
        seeds_arg(j, NS_ARG_F32, 0, 0);
        j->args[1].v.f32 = -0.0f;
        j->checks = 1;
        break;
    default:
        *name = "3 items, Werror, 32 arguments";
        seeds_source(j, "__kernel void many() {}");
        snprintf(j->entry, sizeof j->entry, "many");
        snprintf(j->options, sizeof j->options, "-Werror -cl-std=CL3.0");
        j->global[0] = 3;
        seeds_arg(j, NS_ARG_OUT, 3 * 2, 2);
        while (j->n_args < NS_MAX_ARGS) {
            seeds_arg(j, NS_ARG_U32, 0, 0);
            j->args[j->n_args - 1].v.u32 = j->n_args;
        }
        break;
    }
    int rc = ns_job_validate(j, err, sizeof err);
    if (rc != NS_OK) {
        fprintf(stderr, "%s: job %d: %s\n", seeds_g.prog, v, err);
        exit(1);
    }
}

#define SEEDS_N_PIPES 3 /* seeds_pipe variants */

static inline void seeds_step_buf(ns_step_t *st, uint32_t b)
{
    st->args[st->n_args].kind = NS_ARG_BUF;
    st->args[st->n_args++].v.u32 = b;
}

static inline ns_step_t *seeds_step(ns_job_t *j, const char *entry,
                                    uint32_t dims, uint64_t g0, uint64_t g1,
                                    uint64_t l0, uint64_t l1)
{
    ns_step_t *st = &j->steps[j->n_steps++];
    snprintf(st->entry, sizeof st->entry, "%s", entry);
    st->dims = dims;
    st->global[0] = g0;
    st->local[0] = l0;
    if (dims > 1) {
        st->global[1] = g1;
        st->local[1] = l1;
    }
    return st;
}

/* Valid pipeline number v (0..SEEDS_N_PIPES-1), descriptor version 3,
 * into an initialised j:
 *   0: test_pipeline.c's three steps over x, h, y, part (1024 floats,
 *      groups of 64 in step 3 with a __local scratch), exact;
 *   1: two steps over three buffers, step 1 2-D 8x4 with local 4x2,
 *      every scalar kind on the steps, ulp 2, options, a built-in;
 *   2: two steps over four buffers (two inputs), step 1 reads an input
 *      and step 0's output, rel, checks 3, 5 items per step. */
static inline void seeds_pipe(ns_job_t *j, int v, const char **name)
{
    char err[256];
    ns_step_t *st;
    ns_job_release(j);
    j->steps = calloc(3, sizeof *j->steps);
    if (!j->steps)
        seeds_die("calloc", NS_ERR_NOMEM);
    switch (v) {
    case 0:
        *name = "pipeline lin/sq/psum, 3 steps over 4 buffers, exact";
        seeds_source(j, "__kernel void lin(__global const float *x, __global "
                        "float *h, uint n) {}\n__kernel void sq(__global const "
                        "float *h, __global float *y) {}\n__kernel void "
                        "psum(__global const float *y, __global float *part, "
                        "__local float *t) {}\n");
        seeds_arg(j, NS_ARG_IN, 4096, 0);
        seeds_arg(j, NS_ARG_OUT, 4096, 0);
        seeds_arg(j, NS_ARG_OUT, 4096, 0);
        seeds_arg(j, NS_ARG_OUT, 64, 0);
        st = seeds_step(j, "lin", 1, 1024, 0, 0, 0);
        seeds_step_buf(st, 0);
        seeds_step_buf(st, 1);
        st->args[st->n_args].kind = NS_ARG_U32;
        st->args[st->n_args++].v.u32 = 1024;
        st = seeds_step(j, "sq", 1, 1024, 0, 0, 0);
        seeds_step_buf(st, 1);
        seeds_step_buf(st, 2);
        st = seeds_step(j, "psum", 1, 1024, 0, 64, 0);
        seeds_step_buf(st, 2);
        seeds_step_buf(st, 3);
        st->args[st->n_args].kind = NS_ARG_LOCAL;
        st->args[st->n_args++].size = 256;
        break;
    case 1:
        *name = "pipeline built-in, 2 steps over 3 buffers, 2-D, ulp 2";
        snprintf(j->builtin, sizeof j->builtin, "pipe2");
        ns_hash(j->source_hash, "pipe2", 5);
        snprintf(j->options, sizeof j->options, "-cl-std=CL1.2 -DN=32 -w");
        seeds_arg(j, NS_ARG_IN, 128, 0);
        seeds_arg(j, NS_ARG_OUT, 128, 0);
        seeds_arg(j, NS_ARG_OUT, 32 * 8, 0);
        st = seeds_step(j, "a", 1, 32, 0, 0, 0);
        st->args[st->n_args].kind = NS_ARG_F32;
        st->args[st->n_args++].v.f32 = -1.5f;
        seeds_step_buf(st, 0);
        seeds_step_buf(st, 1);
        st->args[st->n_args].kind = NS_ARG_I64;
        st->args[st->n_args++].v.i64 = INT64_MIN;
        st = seeds_step(j, "b_2d", 2, 8, 4, 4, 2);
        seeds_step_buf(st, 1);
        st->args[st->n_args].kind = NS_ARG_F64;
        st->args[st->n_args++].v.f64 = 0.25;
        st->args[st->n_args].kind = NS_ARG_I32;
        st->args[st->n_args++].v.i32 = -7;
        st->args[st->n_args].kind = NS_ARG_U64;
        st->args[st->n_args++].v.u64 = UINT64_MAX;
        seeds_step_buf(st, 2);
        j->det = NS_DET_ULP;
        j->tol = 2;
        break;
    default:
        *name = "pipeline, 2 steps over 4 buffers, two inputs, rel, checks 3";
        seeds_source(j, "__kernel void f(__global const uchar *a, __global "
                        "uchar *b) {}\n__kernel void g(__global const uchar "
                        "*c, __global const uchar *b, __global uchar *d) {}\n");
        seeds_arg(j, NS_ARG_IN, 5, 0);
        seeds_arg(j, NS_ARG_IN, 7, 0);
        seeds_arg(j, NS_ARG_OUT, 5, 0);
        seeds_arg(j, NS_ARG_OUT, 20, 0);
        st = seeds_step(j, "f", 1, 5, 0, 0, 0);
        seeds_step_buf(st, 0);
        seeds_step_buf(st, 2);
        st = seeds_step(j, "g", 1, 5, 0, 0, 0);
        seeds_step_buf(st, 1);
        seeds_step_buf(st, 2);
        seeds_step_buf(st, 3);
        j->det = NS_DET_REL;
        j->tol = 0.001;
        j->checks = 3;
        j->work_estimate = 12345;
        break;
    }
    int rc = ns_job_validate(j, err, sizeof err);
    if (rc != NS_OK) {
        fprintf(stderr, "%s: pipeline %d: %s\n", seeds_g.prog, v, err);
        exit(1);
    }
}

/* The packed descriptor of j into b. */
static inline void seeds_pack_job(const ns_job_t *j, ns_buf_t *b)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, b);
    ns_job_pack(&pk, j);
    seeds_check(w.err, "pack job");
}

#endif
