/* test_preflight.c - the requester's pre-flight on the real OpenCL device:
 * build errors name the user's file, and every kind of argument mismatch
 * gets its own one-line reason. */
#include "../check.h"

#include "nightshift/hash.h"
#include "nightshift/preflight.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
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

static int s_check(const char *src, const uint8_t *kinds, uint32_t n, char *err,
                   size_t errlen)
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
    const uint8_t k1[] = {IN,           OUT,        NS_ARG_U32, NS_ARG_F32,
                          NS_ARG_LOCAL, NS_ARG_U64, NS_ARG_I32};
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
    CHECK_RC(s_check("kernel void other(global float *o) { o[0] = 1; }", k, 1,
                     err, sizeof err),
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
         {OUT, NS_ARG_U32},
         2,
         "takes 1 arguments, the job gives 2"},
        {"kernel void k(global float *o, float4 v) { o[0] = v.x; }",
         {OUT, NS_ARG_F32},
         2,
         "vector"},
        {"kernel void k(global float *o, read_only image2d_t im) "
         "{ o[0] = 1; }",
         {OUT, IN},
         2,
         "image"},
        {"kernel void k(global float *o, uint n) { o[0] = n; }",
         {OUT, IN},
         2,
         "job passes a buffer"},
        {"kernel void k(global float *o, global float *p) { o[0] = p[0]; }",
         {OUT, NS_ARG_U32},
         2,
         "is a pointer"},
        {"kernel void k(global float *o, ulong n) { o[0] = n; }",
         {OUT, NS_ARG_U32},
         2,
         "is a ulong, but the job passes a u32"},
        {"kernel void k(global float *o, float n) { o[0] = n; }",
         {OUT, NS_ARG_F64},
         2,
         "is a float, but the job passes a f64"},
        {"kernel void k(global float *o, global float *t) { o[0] = t[0]; }",
         {OUT, NS_ARG_LOCAL},
         2,
         "__local memory"},
        {"kernel void k(global float *o, local float *t) { o[0] = t[0]; }",
         {OUT, IN},
         2,
         "__local"},
        {"kernel void k(global const float *o) { }", {OUT}, 1, "const"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc =
            s_check(cases[i].src, cases[i].kinds, cases[i].n, err, sizeof err);
        if (!CHECK_RC(rc, NS_ERR_INVAL) ||
            !CHECK(strstr(err, cases[i].needle) != NULL))
            fprintf(stderr, "case %zu: %s\n", i, err);
        CHECK(strncmp(err, "mine.cl", 7) == 0);
    }
}

/* Sample units of src's kernel `k` over n floats (in, out). */
static int s_sample(ns_runner_t *r, const char *src, uint32_t n, uint64_t local,
                    char *err, size_t errlen)
{
    ns_job_t j;
    const uint8_t kinds[] = {IN, OUT};
    s_job(&j, src, kinds, 2);
    j.global[0] = n;
    j.local[0] = local;
    static float in[4096];
    for (uint32_t i = 0; i < n; i++)
        in[i] = (float)i * 0.5f;
    j.args[0].size = n * sizeof(float);
    ns_hash(j.args[0].hash, in, n * sizeof(float));
    j.args[1].size = n * sizeof(float);
    j.args[1].item_bytes = 0;
    ns_input_t inputs[NS_MAX_ARGS] = {{in, n * sizeof(float), true}};
    err[0] = '\0';
    uint64_t unit_ns = 0;
    int rc = ns_preflight_sample(r, &j, inputs, 4, &unit_ns, err, errlen);
    if (rc == NS_OK && unit_ns > UINT64_C(1000000000)) { /* a unit: < 1 s */
        snprintf(err, errlen, "unit time %llu ns", (unsigned long long)unit_ns);
        rc = NS_ERR_STATE;
    }
    ns_job_release(&j);
    return rc;
}

TEST(sampled_units_refuse_what_cannot_be_checked)
{
    char err[512];
    int rc;
    ns_runner_t *r = ns_runner_new(0, NULL, &rc);
    if (!CHECK(r != NULL))
        return;
    /* fine: one slice per unit, per-group outputs, a scatter */
    CHECK_RC(s_sample(r,
                      "kernel void k(global const float *a, global float "
                      "*o) { size_t i = get_global_id(0); o[i] = a[i] * "
                      "2; }",
                      1024, 0, err, sizeof err),
             NS_OK);
    CHECK_RC(s_sample(r,
                      "kernel void k(global const float *a, global float "
                      "*o) { if (get_local_id(0) == 0) "
                      "o[get_group_id(0)] = a[get_global_id(0)]; }",
                      1024, 64, err, sizeof err),
             NS_OK);
    CHECK_RC(s_sample(r,
                      "kernel void k(global const float *a, global float "
                      "*o) { size_t i = get_global_id(0); "
                      "o[(i * 7) % 1024] = a[i]; }",
                      1024, 0, err, sizeof err),
             NS_OK);
    /* a float output read and written back */
    rc = s_sample(r,
                  "kernel void k(global const float *a, global float *o) "
                  "{ size_t i = get_global_id(0); o[i] += a[i]; }",
                  1024, 0, err, sizeof err);
    CHECK_RC(rc, NS_ERR_INVAL);
    CHECK(strstr(err, "reads its outputs") != NULL);
    /* a total across work-groups with global atomics */
    rc = s_sample(r,
                  "kernel void k(global const float *a, global float *o) "
                  "{ atomic_inc((global volatile uint *)o); }",
                  1024, 64, err, sizeof err);
    CHECK_RC(rc, NS_ERR_INVAL);
    CHECK(strstr(err, "across work-groups") != NULL);
    /* every unit writes the same byte */
    rc = s_sample(r,
                  "kernel void k(global const float *a, global float *o) "
                  "{ o[0] = 1.0f; o[get_global_id(0)] = a[0]; }",
                  1024, 0, err, sizeof err);
    CHECK_RC(rc, NS_ERR_INVAL);
    CHECK(strstr(err, "both write") != NULL);
    if (err[0])
        fprintf(stderr, "    last: %s\n", err);
    ns_runner_destroy(&r);
}

/* A job over src's kernel `k`: one float input and n_out float outputs
 * of n items each; a shard (job.h) of `of` when of > 1. */
static int s_sample_job(ns_runner_t *r, const char *src, uint32_t n,
                        uint32_t n_out, uint32_t shard, uint32_t of, char *err,
                        size_t errlen)
{
    ns_job_t whole, part;
    uint8_t kinds[3] = {IN, OUT, OUT};
    s_job(&whole, src, kinds, 1 + n_out);
    ns_job_init(&part);
    whole.global[0] = n;
    float *in = calloc(n, sizeof *in);
    for (uint32_t i = 0; in && i < n; i++)
        in[i] = (float)i * 0.5f + 1.0f;
    for (uint32_t i = 0; i < 1 + n_out; i++) {
        whole.args[i].size = n * sizeof(float);
        whole.args[i].item_bytes = 0;
    }
    ns_hash(whole.args[0].hash, in, n * sizeof(float));
    const ns_job_t *j = &whole;
    if (of > 1) {
        if (ns_job_make_shard(&part, &whole, shard, of, 0) != NS_OK)
            fprintf(stderr, "make_shard failed\n");
        j = &part;
    }
    ns_input_t inputs[NS_MAX_ARGS] = {
        {(const uint8_t *)in, n * sizeof(float), true}};
    err[0] = '\0';
    int rc = in ? ns_preflight_sample(r, j, inputs, 4, NULL, err, errlen)
                : NS_ERR_NOMEM;
    ns_job_release(&part);
    ns_job_release(&whole);
    free(in);
    return rc;
}

#define S_READS(unit, byte, arg)                                               \
    "unit " unit " of kernel 'k' writes byte " byte " of argument " arg        \
    " from what the output held before (it reads its outputs, e.g. out[i] "    \
    "+= ..., or adds to a total across work-groups): its units cannot be "     \
    "checked one by one"
#define S_RACE(a, b, byte, arg)                                                \
    "units " a " and " b " of kernel 'k' both write byte " byte                \
    " of argument " arg ": in the full launch they race, so the result is "    \
    "not defined"

/* Each refusal's exact words (the unit, the argument, the byte: the first
 * byte in argument order that breaks the rule the earliest check makes),
 * the same as the pre-flight that kept four full-size output sets and a
 * byte map gave. */
TEST(sampled_refusals_name_the_same_unit_and_byte)
{
    static const struct {
        const char *src;
        uint32_t n_out, shard, of;
        const char *want; /* "" for NS_OK */
    } cases[] = {
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); o[i] = 0.0f; }",
         1, 0, 1, ""},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); o[i] = as_float(0xffffffffu); }",
         1, 0, 1, ""},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); o[i] += a[i]; }",
         1, 0, 1, S_READS("0", "2", "1")},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); if (o[i] == 0.0f) o[i] = 1.0f; }",
         1, 0, 1, S_READS("0", "2", "1")},
        {"kernel void k(global const float *a, global float *o) "
         "{ o[0] = 1.0f; o[get_global_id(0)] = a[0]; }",
         1, 0, 1, S_RACE("0", "341", "0", "1")},
        {"kernel void k(global const float *a, global float *o, "
         "global float *p) { size_t i = get_global_id(0); o[i] = a[i]; "
         "p[i & 1] = a[0]; }",
         2, 0, 1, S_RACE("0", "682", "0", "2")},
        /* a byte only the 0x5A fill shows before one only 0xFF shows */
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); "
         "o[i] = o[i] == as_float(0x5a5a5a5au) ? 2.0f : 1.0f; "
         "if (i < 512) o[i + 512] = o[i + 512] == 0.0f ? 1.0f : 3.0f; }",
         1, 0, 1, S_READS("0", "2", "1")},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); "
         "if (i < 512) o[i + 512] = o[i + 512] == as_float(0x5a5a5a5au) ? "
         "2.0f : 1.0f; o[i] = o[i] == 0.0f ? 1.0f : 3.0f; }",
         1, 0, 1, S_READS("0", "2", "1")},
        {"kernel void k(global const float *a, global float *o, "
         "global float *p) { size_t i = get_global_id(0); o[0] = a[i]; "
         "p[i] += 1.0f; }",
         2, 0, 1, S_READS("0", "2", "2")},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); o[1023 - i] = a[i]; }",
         1, 0, 2,
         "unit 0 of kernel 'k' (row 0) writes byte 4092 of argument 1, "
         "outside its row's slice (bytes 0..3): a job cut into shards needs "
         "each row's outputs (row = the unit's index along global[0]) in its "
         "own slice of every output"},
        {"kernel void k(global const float *a, global float *o) "
         "{ size_t i = get_global_id(0); o[i] = a[i]; }",
         1, 1, 2, ""},
    };
    char err[512];
    int rc;
    ns_runner_t *r = ns_runner_new(0, NULL, &rc);
    if (!CHECK(r != NULL))
        return;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rc = s_sample_job(r, cases[c].src, 1024, cases[c].n_out, cases[c].shard,
                          cases[c].of, err, sizeof err);
        if (!cases[c].want[0])
            CHECK_RC(rc, NS_OK);
        else if (CHECK_RC(rc, NS_ERR_INVAL) &&
                 !CHECK(strcmp(err, cases[c].want) == 0))
            fprintf(stderr, "  case %zu: %s\n  want: %s\n", c, err,
                    cases[c].want);
    }
    ns_runner_destroy(&r);
}

/* KiB of key ("VmHWM", "VmRSS") in /proc/self/status; 0 if absent. */
static long s_status_kib(const char *key)
{
    char line[256];
    long v = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
            v = atol(line + strlen(key) + 1);
    if (f)
        fclose(f);
    return v;
}

/* The pre-flight over a 64 MiB output takes two output-sized sets and
 * two bitmaps (2.25 times the output), not four sets and a byte map
 * (4 to 5 times: +255 MiB here): the peak resident memory of the call, from a
 * reset VmHWM. */
TEST(sample_memory_is_two_output_sets)
{
#if defined(__SANITIZE_ADDRESS__)
    return; /* ASan's allocator and quarantine would count */
#endif
    const uint64_t n = UINT64_C(16) << 20, out = n * sizeof(float);
    int rc;
    ns_runner_t *r = ns_runner_new(0, NULL, &rc);
    if (!CHECK(r != NULL))
        return;
    ns_job_t j;
    const uint8_t kinds[] = {IN, OUT};
    s_job(&j,
          "kernel void k(global const float *a, global float *o) "
          "{ size_t i = get_global_id(0); o[i] = a[i & 1023u]; }",
          kinds, 2);
    j.global[0] = n;
    static float in[1024];
    j.args[0].size = sizeof in;
    ns_hash(j.args[0].hash, in, sizeof in);
    j.args[1].size = out;
    j.args[1].item_bytes = 0;
    ns_input_t inputs[NS_MAX_ARGS] = {{(const uint8_t *)in, sizeof in, true}};
    char err[512] = "";
    /* warm: the kernel built, the runtime's own memory in place */
    CHECK_RC(ns_preflight_sample(r, &j, inputs, 1, NULL, err, sizeof err),
             NS_OK);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool reset = f && fputs("5", f) >= 0;
    if (f)
        reset = fclose(f) == 0 && reset;
    long before = s_status_kib("VmRSS");
    CHECK_RC(ns_preflight_sample(r, &j, inputs, 4, NULL, err, sizeof err),
             NS_OK);
    long grew_mib = (s_status_kib("VmHWM") - before) >> 10;
    fprintf(stderr, "    pre-flight of a %llu MiB output: +%ld MiB\n",
            (unsigned long long)(out >> 20), grew_mib);
    if (reset)
        CHECK(grew_mib < (long)(out >> 20) * 5 / 2);
    ns_job_release(&j);
    ns_runner_destroy(&r);
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
    snprintf(t, sizeof t, "<kernel>:3:29: error: use of undeclared");
    ns_build_log_rename(t, sizeof t, "mlp.cl");
    CHECK(strcmp(t, "mlp.cl:3:29: error: use of undeclared") == 0);
    snprintf(t, sizeof t, "file.cl without position, a.cl:x");
    ns_build_log_rename(t, sizeof t, "mlp.cl");
    CHECK(strcmp(t, "file.cl without position, a.cl:x") == 0);
}

/* A check that passed leaves a marker and is not built again; a failed
 * one leaves none; another argument kind is another check. */
TEST(a_passed_check_is_remembered)
{
    char dir[] = "/tmp/ns-preflight-cache-XXXXXX", err[512] = "";
    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    ns_job_t j;
    ns_preflight_t res;
    const uint8_t ok[] = {IN, OUT}, bad[] = {OUT, OUT};
    const char *src = "kernel void k(global const float *a, global float *o)"
                      "{ o[get_global_id(0)] = a[0]; }";
    s_job(&j, src, ok, 2);
    CHECK_RC(
        ns_preflight_check_cached(dir, 0, &j, "mine.cl", &res, err, sizeof err),
        NS_OK);
    CHECK(res.kernel_args == 2); /* built and checked */
    CHECK_RC(
        ns_preflight_check_cached(dir, 0, &j, "mine.cl", &res, err, sizeof err),
        NS_OK);
    CHECK(res.kernel_args == 0); /* the marker: not built again */
    ns_job_release(&j);
    s_job(&j, src, bad, 2); /* an OUT for a const pointer: refused */
    for (int k = 0; k < 2; k++) {
        CHECK_RC(ns_preflight_check_cached(dir, 0, &j, "mine.cl", &res, err,
                                           sizeof err),
                 NS_ERR_INVAL);
        CHECK(strstr(err, "argument 0") != NULL);
    }
    ns_job_release(&j);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(a_passed_check_is_remembered);
    RUN(good_kernels_pass);
    RUN(build_errors_name_the_users_file);
    RUN(argument_mismatches_are_named);
    RUN(sampled_units_refuse_what_cannot_be_checked);
    RUN(sampled_refusals_name_the_same_unit_and_byte);
    RUN(sample_memory_is_two_output_sets);
    RUN(log_rename);
    return ns_test_finish("exec_preflight");
}
