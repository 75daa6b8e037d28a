/* test_preflight.c - the requester's pre-flight on the real OpenCL device:
 * build errors name the user's file, and every kind of argument mismatch
 * gets its own one-line reason. */
#include "../check.h"

#include "nightshift/preflight.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

/* A job over src's kernel `k` with the given argument kinds. */
static void s_job(ns_job_t *j, const char *src, const uint8_t *kinds,
                  uint32_t n)
{
    ns_job_init(j);
    if (ns_job_set_source(j, src, strlen(src)) != NS_OK)
        fprintf(stderr, "set_source failed\n");
    snprintf(j->entry, sizeof j->entry, "k");
    j->dims = 1;
    j->global[0] = 16;
    j->n_args = n;
    for (uint32_t i = 0; i < n; i++) {
        j->args[i].kind = kinds[i];
        j->args[i].size = kinds[i] == NS_ARG_LOCAL ? 64 : 64;
        j->args[i].item_bytes = 4;
    }
}

static int s_check(const char *src, const uint8_t *kinds, uint32_t n,
                   char *err, size_t errlen)
{
    ns_job_t j;
    ns_preflight_t res;
    s_job(&j, src, kinds, n);
    err[0] = '\0';
    int rc = ns_preflight_check(0, &j, "mine.cl", &res, err, errlen);
    ns_job_release(&j);
    return rc;
}

#define IN NS_ARG_IN
#define OUT NS_ARG_OUT

TEST(good_kernels_pass)
{
    char err[512];
    const uint8_t k1[] = {IN, OUT, NS_ARG_U32, NS_ARG_F32, NS_ARG_LOCAL,
                          NS_ARG_U64, NS_ARG_I32};
    CHECK_RC(s_check("kernel void k(global const float *a, global float *o, "
                     "uint n, float s, local float *t, ulong m, int q)"
                     "{ o[get_global_id(0)] = a[0] * s + n + m + q + t[0]; }",
                     k1, 7, err, sizeof err),
             NS_OK);
    const uint8_t k2[] = {IN, OUT};
    CHECK_RC(s_check("kernel void k(constant float *a, global float *o)"
                     "{ o[get_global_id(0)] = a[0]; }",
                     k2, 2, err, sizeof err),
             NS_OK);
    if (err[0])
        fprintf(stderr, "%s\n", err);
}

TEST(build_errors_name_the_users_file)
{
    char err[512];
    const uint8_t k[] = {OUT};
    CHECK_RC(s_check("kernel void k(global float *o)\n{\n  o[0] = 1.0f +;\n}\n",
                     k, 1, err, sizeof err),
             NS_ERR_OPENCL);
    CHECK(strstr(err, "mine.cl does not build") != NULL);
    CHECK(strstr(err, "mine.cl:3:") != NULL);
    CHECK(strstr(err, "tempfile") == NULL && strstr(err, "/tmp") == NULL &&
          strstr(err, ".cache") == NULL);
    CHECK(strchr(err, '\n') == NULL);
    CHECK_RC(s_check("kernel void other(global float *o) { o[0] = 1; }", k,
                     1, err, sizeof err),
             NS_ERR_INVAL);
    CHECK(strstr(err, "no kernel named 'k'") != NULL);
}

TEST(argument_mismatches_are_named)
{
    char err[512];
    struct {
        const char *src;
        uint8_t kinds[3];
        uint32_t n;
        const char *needle;
    } cases[] = {
        {"kernel void k(global float *o) { o[0] = 1; }",
         {OUT, NS_ARG_U32}, 2, "takes 1 arguments, the job gives 2"},
        {"kernel void k(global float *o, float4 v) { o[0] = v.x; }",
         {OUT, NS_ARG_F32}, 2, "vector"},
        {"kernel void k(global float *o, read_only image2d_t im) "
         "{ o[0] = 1; }",
         {OUT, IN}, 2, "image"},
        {"kernel void k(global float *o, uint n) { o[0] = n; }",
         {OUT, IN}, 2, "job passes a buffer"},
        {"kernel void k(global float *o, global float *p) { o[0] = p[0]; }",
         {OUT, NS_ARG_U32}, 2, "is a pointer"},
        {"kernel void k(global float *o, ulong n) { o[0] = n; }",
         {OUT, NS_ARG_U32}, 2, "is a ulong, but the job passes a u32"},
        {"kernel void k(global float *o, float n) { o[0] = n; }",
         {OUT, NS_ARG_F64}, 2, "is a float, but the job passes a f64"},
        {"kernel void k(global float *o, global float *t) { o[0] = t[0]; }",
         {OUT, NS_ARG_LOCAL}, 2, "__local memory"},
        {"kernel void k(global float *o, local float *t) { o[0] = t[0]; }",
         {OUT, IN}, 2, "__local"},
        {"kernel void k(global const float *o) { }", {OUT}, 1, "const"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = s_check(cases[i].src, cases[i].kinds, cases[i].n, err,
                         sizeof err);
        if (!CHECK_RC(rc, NS_ERR_INVAL) ||
            !CHECK(strstr(err, cases[i].needle) != NULL))
            fprintf(stderr, "case %zu: %s\n", i, err);
        CHECK(strncmp(err, "mine.cl", 7) == 0);
    }
}

TEST(log_rename)
{
    char t[256];
    snprintf(t, sizeof t,
             "error: /root/.cache/pocl/kcache/tempfile_iGa1OV.cl:3:16: "
             "expected expression\n<source>:4:1: note: here");
    ns_build_log_rename(t, sizeof t, "mlp.cl");
    CHECK(strcmp(t, "error: mlp.cl:3:16: expected expression\nmlp.cl:4:1: "
                    "note: here") == 0);
    snprintf(t, sizeof t, "file.cl without position, a.cl:x");
    ns_build_log_rename(t, sizeof t, "mlp.cl");
    CHECK(strcmp(t, "file.cl without position, a.cl:x") == 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(good_kernels_pass);
    RUN(build_errors_name_the_users_file);
    RUN(argument_mismatches_are_named);
    RUN(log_rename);
    return ns_test_finish("exec_preflight");
}
