/* bench_exec.c - execution figures on one OpenCL device, in one run:
 *
 *   fma        the device benchmark's fp32 FMA peak and copy bandwidth
 *   sgemm      the built-in sgemm's GFLOPS at each n, next to that peak
 *   dispatch   program build cold vs from the runner's binary cache, and
 *              per-launch enqueue + finish latency of a trivial kernel
 *   verify     the provider's commitment and the requester's whole check
 *              (ns_spot_check, k units: root + re-runs) as fractions of
 *              the provider's run, for sgemm, a large vector add and the
 *              same vector add under a tolerance; the hashing rate next
 *              to the raw BLAKE2b rate of one big buffer, measured in the
 *              same run
 *   challenge  hardware challenges: labelling and integer matmul, the
 *              prover's time, its deadline and the verifier's time
 *   worker     sgemm at each n in this process (what `run` does) next to
 *              the same job through a worker process (what a provider
 *              does; its run_ms), with the worker's own build, upload,
 *              run and download and the rest (socket and copies)
 *
 * Figures only: it never passes or fails on a number. Sizes are flags;
 * the default run takes about a minute on a 2-core PoCL machine.
 *
 *   bench_exec [--device I]
 *              [--only fma,sgemm,dispatch,verify,challenge,worker]
 *              [--reps R] [--sgemm N[,N...]] [--sgemm-cols X]
 *              [--sgemm-local L] [--plain-alloc]
 *              [--launches L] [--verify-sgemm N] [--vadd ELEMENTS]
 *              [--checks K] [--label-bytes B] [--imatmul N]
 */
#include "nightshift/challenge.h"
#include "nightshift/devbench.h"
#include "nightshift/devices.h"
#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/log.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include "bench_common.h"

#include <CL/cl.h>

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_SIZES 8          /* --sgemm list */
#define S_ERR_LEN 1024         /* runner error text */
#define S_MAX_LAUNCHES 1000000 /* --launches */
#define S_RUNNER_CALLS 100     /* whole trivial jobs through the runner */

typedef struct {
    uint32_t device;
    unsigned sections; /* S_SEC_* bits */
    uint32_t reps;
    uint32_t sgemm[S_MAX_SIZES];
    uint32_t n_sgemm;
    uint32_t sgemm_local;
    uint32_t sgemm_lx;
    uint32_t launches;
    uint32_t verify_sgemm;
    uint64_t vadd;
    uint32_t checks;
    uint64_t label_bytes;
    uint32_t imatmul;
} s_opts_t;

enum {
    S_SEC_FMA = 1,
    S_SEC_SGEMM = 2,
    S_SEC_DISPATCH = 4,
    S_SEC_VERIFY = 8,
    S_SEC_CHALLENGE = 16,
    S_SEC_WORKER = 32,
    S_SEC_ALL = 63,
};

/* Shared between sections. */
static ns_device_t s_dev;
static double s_peak_gflops; /* devbench FMA figure; 0 until measured */
static double s_peak_gbps;
static char s_cache_dir[64]; /* runner binary cache for this run */

static void s_load(const char *when)
{
    double l[3];
    if (getloadavg(l, 3) == 3)
        printf("load average %s: %.2f %.2f %.2f (%ld CPUs online)\n", when,
               l[0], l[1], l[2], sysconf(_SC_NPROCESSORS_ONLN));
}

/* ---- job helpers ------------------------------------------------------ */

static void s_arg_out(ns_job_t *job, uint32_t i, uint64_t size,
                      uint32_t item_bytes)
{
    job->args[i].kind = NS_ARG_OUT;
    job->args[i].size = size;
    job->args[i].item_bytes = item_bytes;
}

static void s_arg_u32(ns_job_t *job, uint32_t i, uint32_t v)
{
    job->args[i].kind = NS_ARG_U32;
    job->args[i].v.u32 = v;
}

static int s_use_builtin(ns_job_t *job, const char *name)
{
    const ns_builtin_t *b = ns_builtin_find(name);
    if (!b) {
        fprintf(stderr, "bench_exec: no built-in kernel '%s'\n", name);
        return NS_ERR_NOTFOUND;
    }
    snprintf(job->builtin, sizeof job->builtin, "%s", b->name);
    snprintf(job->entry, sizeof job->entry, "%s", b->entry);
    ns_hash(job->source_hash, b->source, b->source_len);
    return NS_OK;
}

/* sgemm's buffers: as the worker allocates them (ns_buf_alloc: huge pages
 * for large ones), or from malloc with --plain-alloc */
static bool s_plain_alloc;

static void *s_buf(uint64_t n)
{
    return s_plain_alloc ? malloc((size_t)n) : ns_buf_alloc(n);
}

/* A square sgemm job C = A B with fresh A and B (owned by *a, *b). */
static int s_sgemm_job(ns_job_t *job, ns_input_t *inputs, float **a, float **b,
                       uint32_t n, uint32_t local_x, uint32_t local_y,
                       uint32_t checks)
{
    uint64_t elems = (uint64_t)n * n;
    ns_job_init(job);
    memset(inputs, 0, NS_MAX_ARGS * sizeof *inputs);
    *a = s_buf(elems * sizeof(float));
    *b = s_buf(elems * sizeof(float));
    if (!*a || !*b)
        return NS_ERR_NOMEM;
    ns_bench_fill_floats(*a, elems, 1);
    ns_bench_fill_floats(*b, elems, 2);
    int rc = s_use_builtin(job, "sgemm");
    if (rc != NS_OK)
        return rc;
    job->dims = 2;
    job->global[0] = n / 64;
    job->global[1] = n;
    while (n % local_y != 0) /* N a multiple of 64, not of --sgemm-local */
        local_y--;
    while ((n / 64) % local_x != 0)
        local_x--;
    job->local[0] = local_x;
    job->local[1] = local_y;
    job->n_args = 6;
    ns_bench_arg_in(job, inputs, 0, *a, elems * sizeof(float));
    ns_bench_arg_in(job, inputs, 1, *b, elems * sizeof(float));
    s_arg_out(job, 2, elems * sizeof(float), 64 * sizeof(float));
    s_arg_u32(job, 3, n);
    s_arg_u32(job, 4, n);
    s_arg_u32(job, 5, n);
    job->det = NS_DET_EXACT;
    job->item_kind = NS_ITEM_WORK_ITEM;
    job->checks = checks;
    job->work_estimate = 2 * (uint64_t)n * n * n;
    return NS_OK;
}

static int s_vadd_job(ns_job_t *job, ns_input_t *inputs, float **a, float **b,
                      uint64_t n, uint32_t checks)
{
    ns_job_init(job);
    memset(inputs, 0, NS_MAX_ARGS * sizeof *inputs);
    *a = malloc(n * sizeof(float));
    *b = malloc(n * sizeof(float));
    if (!*a || !*b)
        return NS_ERR_NOMEM;
    ns_bench_fill_floats(*a, n, 3);
    ns_bench_fill_floats(*b, n, 4);
    int rc = s_use_builtin(job, "vector_add");
    if (rc != NS_OK)
        return rc;
    job->dims = 1;
    job->global[0] = n;
    job->n_args = 4;
    ns_bench_arg_in(job, inputs, 0, *a, n * sizeof(float));
    ns_bench_arg_in(job, inputs, 1, *b, n * sizeof(float));
    s_arg_out(job, 2, n * sizeof(float), sizeof(float));
    s_arg_u32(job, 3, (uint32_t)n);
    job->det = NS_DET_EXACT;
    job->item_kind = NS_ITEM_WORK_ITEM;
    job->checks = checks;
    job->work_estimate = n;
    return NS_OK;
}

static int s_validate(const ns_job_t *job, const char *what)
{
    char err[S_ERR_LEN];
    int rc = ns_job_validate(job, err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "bench_exec: %s job invalid: %s\n", what, err);
    return rc;
}

static ns_runner_t *s_runner(const s_opts_t *o, const char *cache_dir)
{
    int err = 0;
    ns_runner_t *r = ns_runner_new(o->device, cache_dir, &err);
    if (!r)
        fprintf(stderr, "bench_exec: cannot open device %u: %s\n", o->device,
                ns_strerror(err));
    return r;
}

/* ---- fma ---------------------------------------------------------------- */

static int s_section_fma(const s_opts_t *o)
{
    (void)o;
    ns_devbench_t b;
    int rc = ns_devbench_measure(&s_dev, NULL, &b);
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: devbench failed: %s\n", ns_strerror(rc));
        return rc;
    }
    s_peak_gflops = b.gflops;
    s_peak_gbps = b.gbps;
    printf("\n== device benchmark (devbench, best of %d x %d ms)\n",
           NS_DEVBENCH_DEFAULT_REPS, NS_DEVBENCH_DEFAULT_TARGET_MS);
    printf("fp32 FMA peak      %10.1f GFLOPS  (%s, %u flops per item "
           "and iteration)\n",
           b.gflops, b.fma_kernel ? b.fma_kernel : "?", b.fma_flops_per_item);
    printf("copy bandwidth     %10.1f GB/s    (read + write)\n", b.gbps);
    printf("benchmark time     %10.0f ms      (program build included)\n",
           b.bench_us / 1e3);
    return NS_OK;
}

/* ---- sgemm -------------------------------------------------------------- */

static int s_sgemm_one(ns_runner_t *r, const s_opts_t *o, uint32_t n)
{
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    uint8_t *outputs[NS_MAX_ARGS] = {0};
    float *a = NULL, *b = NULL;
    ns_timings_t t;
    char err[S_ERR_LEN];
    uint64_t best_us = UINT64_MAX, first_build_us = 0, upload_us = 0,
             download_us = 0;

    int rc =
        s_sgemm_job(&job, inputs, &a, &b, n, o->sgemm_lx, o->sgemm_local, 1);
    if (rc == NS_OK)
        rc = s_validate(&job, "sgemm");
    if (rc != NS_OK)
        goto out;
    outputs[2] = s_buf(job.args[2].size);
    if (!outputs[2]) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    /* One untimed run: program build, PoCL's work-group compile, first
     * touch of the buffers. */
    for (uint32_t i = 0; i <= o->reps; i++) {
        memset(&t, 0, sizeof t);
        rc = ns_runner_run(r, &job, inputs, outputs, &t, err, sizeof err);
        if (rc != NS_OK) {
            fprintf(stderr, "bench_exec: sgemm %u: %s: %s\n", n,
                    ns_strerror(rc), err);
            goto out;
        }
        if (i == 0) {
            first_build_us = t.build_us;
            continue;
        }
        if (t.run_us < best_us) {
            best_us = t.run_us;
            upload_us = t.upload_us;
            download_us = t.download_us;
        }
    }
    double gflops = 2.0 * n * n * (double)n / (best_us ? best_us : 1) * 1e-3;
    printf("sgemm n=%-5u %9.1f GFLOPS  run %8.1f ms", n, gflops, best_us / 1e3);
    if (s_peak_gflops > 0)
        printf("  %5.1f%% of FMA peak", 100.0 * gflops / s_peak_gflops);
    printf("  (upload %.1f ms, download %.1f ms, first build %.1f ms)\n",
           upload_us / 1e3, download_us / 1e3, first_build_us / 1e3);
out:
    free(outputs[2]);
    free(a);
    free(b);
    ns_job_release(&job);
    return rc;
}

static int s_section_sgemm(const s_opts_t *o)
{
    printf("\n== sgemm (built-in, local (%u, %u), best of %u runs; kernel "
           "time from event profiling)\n",
           o->sgemm_lx, o->sgemm_local, o->reps);
    ns_runner_t *r = s_runner(o, s_cache_dir);
    if (!r)
        return NS_ERR_OPENCL;
    int rc = NS_OK;
    for (uint32_t i = 0; i < o->n_sgemm && rc == NS_OK; i++)
        rc = s_sgemm_one(r, o, o->sgemm[i]);
    ns_runner_destroy(&r);
    return rc;
}

/* ---- dispatch ----------------------------------------------------------- */

/* A source no cache has seen: PoCL keeps its own kernel cache, so a
 * constant text would not be a cold build after the first run. */
static void s_nop_source(char *out, size_t cap)
{
    uint8_t nonce[16];
    char hex[33];
    randombytes_buf(nonce, sizeof nonce);
    ns_hex(hex, nonce, sizeof nonce);
    snprintf(out, cap,
             "/* bench_exec nonce %s */\n"
             "__kernel void nop(__global uint *out)\n"
             "{\n"
             "    out[get_global_id(0)] = (uint)get_global_id(0);\n"
             "}\n",
             hex);
}

static int s_nop_job(ns_job_t *job, const char *src)
{
    ns_job_init(job);
    int rc = ns_job_set_source(job, src, strlen(src));
    if (rc != NS_OK)
        return rc;
    snprintf(job->entry, sizeof job->entry, "nop");
    job->dims = 1;
    job->global[0] = 64;
    job->n_args = 1;
    s_arg_out(job, 0, 64 * sizeof(uint32_t), sizeof(uint32_t));
    job->det = NS_DET_EXACT;
    job->checks = 1;
    return s_validate(job, "nop");
}

static int s_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Raw OpenCL: enqueue + clFinish of a trivial kernel, one at a time. */
static int s_launch_latency(const s_opts_t *o, const char *src)
{
    cl_platform_id plats[16];
    cl_device_id devs[64];
    cl_uint np = 0, nd = 0;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    cl_program prog = NULL;
    cl_kernel k = NULL;
    cl_mem buf = NULL;
    uint64_t *lat = NULL;
    cl_int cl = CL_SUCCESS;
    int rc = NS_ERR_OPENCL;

    if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS ||
        s_dev.platform_index >= np ||
        clGetDeviceIDs(plats[s_dev.platform_index], CL_DEVICE_TYPE_ALL, 64,
                       devs, &nd) != CL_SUCCESS ||
        s_dev.device_index >= nd)
        goto out;
    cl_device_id dev = devs[s_dev.device_index];
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &cl);
    if (!ctx)
        goto out;
    q = clCreateCommandQueue(ctx, dev, 0, &cl);
    if (!q)
        goto out;
    prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &cl);
    if (!prog || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS)
        goto out;
    k = clCreateKernel(prog, "nop", &cl);
    buf = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, 64 * sizeof(uint32_t), NULL,
                         &cl);
    if (!k || !buf || clSetKernelArg(k, 0, sizeof buf, &buf) != CL_SUCCESS)
        goto out;
    lat = calloc(o->launches, sizeof *lat);
    if (!lat) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    size_t global = 64;
    for (uint32_t i = 0; i < 10; i++) /* warm-up: lazy compile */
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL,
                                   NULL) != CL_SUCCESS ||
            clFinish(q) != CL_SUCCESS)
            goto out;
    uint64_t total0 = ns_mono_us();
    for (uint32_t i = 0; i < o->launches; i++) {
        uint64_t t0 = ns_mono_us();
        if (clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL,
                                   NULL) != CL_SUCCESS ||
            clFinish(q) != CL_SUCCESS)
            goto out;
        lat[i] = ns_mono_us() - t0;
    }
    uint64_t total = ns_mono_us() - total0;
    qsort(lat, o->launches, sizeof *lat, s_cmp_u64);
    printf("launch+finish      %8.1f us mean, %llu us median, %llu us p99 "
           "(%u launches of 64 work-items, raw OpenCL)\n",
           (double)total / o->launches,
           (unsigned long long)lat[o->launches / 2],
           (unsigned long long)lat[(size_t)(o->launches * 0.99)], o->launches);
    rc = NS_OK;
out:
    if (rc == NS_ERR_OPENCL)
        fprintf(stderr, "bench_exec: raw OpenCL launch test failed (%d)\n",
                (int)cl);
    free(lat);
    if (buf)
        clReleaseMemObject(buf);
    if (k)
        clReleaseKernel(k);
    if (prog)
        clReleaseProgram(prog);
    if (q)
        clReleaseCommandQueue(q);
    if (ctx)
        clReleaseContext(ctx);
    return rc;
}

static int s_section_dispatch(const s_opts_t *o)
{
    char src[512], dir[64], err[S_ERR_LEN];
    ns_job_t job;
    uint8_t *outputs[NS_MAX_ARGS] = {0};
    uint32_t out_words[64];
    ns_runner_t *r = NULL;
    ns_timings_t t;
    int rc;

    printf("\n== dispatch (a trivial kernel: 64 work-items, one store "
           "each)\n");
    snprintf(dir, sizeof dir, "/tmp/ns_bench_exec_dispatch_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return NS_ERR_IO;
    }
    s_nop_source(src, sizeof src);
    ns_job_init(&job);
    rc = s_nop_job(&job, src);
    if (rc != NS_OK)
        goto out;
    outputs[0] = (uint8_t *)out_words;

    /* Cold: a source nobody compiled, an empty binary cache. */
    r = s_runner(o, dir);
    if (!r) {
        rc = NS_ERR_OPENCL;
        goto out;
    }
    const char *labels[] = {"cold build", "same runner again",
                            "new runner, binary cache"};
    for (int step = 0; step < 3; step++) {
        if (step == 2) {
            ns_runner_destroy(&r);
            r = s_runner(o, dir);
            if (!r) {
                rc = NS_ERR_OPENCL;
                goto out;
            }
        }
        memset(&t, 0, sizeof t);
        uint64_t t0 = ns_mono_us();
        rc = ns_runner_run(r, &job, NULL, outputs, &t, err, sizeof err);
        uint64_t wall = ns_mono_us() - t0;
        if (rc != NS_OK) {
            fprintf(stderr, "bench_exec: nop: %s: %s\n", ns_strerror(rc), err);
            goto out;
        }
        printf("%-26s build %8.2f ms  cache_hit=%d  whole job %8.2f ms\n",
               labels[step], t.build_us / 1e3, (int)t.cache_hit, wall / 1e3);
    }

    /* Whole jobs through the runner with the program at hand. */
    uint64_t t0 = ns_mono_us();
    for (uint32_t i = 0; i < S_RUNNER_CALLS; i++) {
        rc = ns_runner_run(r, &job, NULL, outputs, &t, err, sizeof err);
        if (rc != NS_OK) {
            fprintf(stderr, "bench_exec: nop: %s: %s\n", ns_strerror(rc), err);
            goto out;
        }
    }
    printf("runner job         %8.1f us per ns_runner_run (mean of %u; "
           "buffers, launch, read-back)\n",
           (double)(ns_mono_us() - t0) / S_RUNNER_CALLS, S_RUNNER_CALLS);
    ns_runner_destroy(&r);
    rc = s_launch_latency(o, src);
out:
    ns_runner_destroy(&r);
    ns_job_release(&job);
    /* the runner's cache files, then the directory */
    DIR *d = opendir(dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            char path[512];
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                ns_path_join(path, sizeof path, dir, e->d_name) == NS_OK)
                unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    return rc;
}

/* ---- verify ------------------------------------------------------------- */

static int s_verify_one(ns_runner_t *r, const s_opts_t *o, const char *what,
                        ns_job_t *job, const ns_input_t *inputs, uint32_t out)
{
    uint8_t *outputs[NS_MAX_ARGS] = {0};
    ns_hash_t job_id, root;
    uint8_t secret[32];
    ns_timings_t t;
    ns_check_result_t res;
    char err[S_ERR_LEN];
    int rc;

    rc = s_validate(job, what);
    if (rc == NS_OK)
        rc = ns_job_id(job, job_id);
    if (rc != NS_OK)
        return rc;
    outputs[out] = malloc((size_t)job->args[out].size);
    if (!outputs[out])
        return NS_ERR_NOMEM;

    /* Provider: the run (best of reps after an untimed warm-up) and its
     * commitment. */
    memset(&t, 0, sizeof t);
    for (uint32_t i = 0; i <= o->reps; i++) {
        ns_timings_t ti;
        memset(&ti, 0, sizeof ti);
        rc = ns_runner_run(r, job, inputs, outputs, &ti, err, sizeof err);
        if (rc != NS_OK) {
            fprintf(stderr, "bench_exec: %s: %s: %s\n", what, ns_strerror(rc),
                    err);
            goto out;
        }
        if (i == 1 || (i > 1 && ti.run_us < t.run_us))
            t = ti;
    }
    uint64_t bytes = ns_job_out_bytes(job);
    uint64_t c0 = ns_mono_us();
    rc = ns_commit_root(job, job_id, outputs, root);
    uint64_t commit_us = ns_mono_us() - c0;
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: %s: commit: %s\n", what, ns_strerror(rc));
        goto out;
    }
    /* the reference: plain BLAKE2b-256 of the whole output, one call */
    ns_hash_t raw_hash;
    c0 = ns_mono_us();
    ns_hash(raw_hash, outputs[out], (size_t)job->args[out].size);
    uint64_t raw_us = ns_mono_us() - c0;

    /* Requester: recompute the root, draw k units, re-run them. The first
     * check also compiles the re-run build (once per job, cached; a
     * requester can build it while the provider runs): reported apart,
     * the figures are the second check's. */
    uint64_t first_us = 0;
    for (int pass = 0; pass < 2; pass++) {
        randombytes_buf(secret, sizeof secret);
        rc = ns_spot_check(r, job, job_id, inputs, outputs, root, secret,
                           o->checks, &res, err, sizeof err);
        if (rc != NS_OK)
            break;
        if (pass == 0)
            first_us = res.verify_us;
    }
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: %s: spot check: %s: %s\n", what,
                ns_strerror(rc), err);
        goto out;
    }
    double run = (double)(t.run_us ? t.run_us : 1);
    double gb = (double)bytes / 1e9;
#define S_GBPS(us) ((us) ? gb / ((double)(us) / 1e6) : 0.0)
    printf("%-20s units %llu, %llu leaves, %.1f MB out; provider run %.1f ms "
           "(upload %.1f, download %.1f)\n",
           what, (unsigned long long)ns_job_units(job),
           (unsigned long long)ns_commit_leaves(job), (double)bytes / 1e6,
           t.run_us / 1e3, t.upload_us / 1e3, t.download_us / 1e3);
    printf("%-20s provider commit %.1f ms = %.2f%% of run; %.2f GB/s (raw "
           "BLAKE2b, one buffer, this run: %.2f GB/s; %.0f%%)\n",
           "", commit_us / 1e3, 100.0 * (double)commit_us / run,
           S_GBPS(commit_us), S_GBPS(raw_us),
           raw_us ? 100.0 * (double)raw_us / (double)(commit_us ? commit_us : 1)
                  : 0.0);
    printf("%-20s requester k=%u: whole check %.1f ms = %.2f%% of run: root "
           "%.1f ms (%.2f GB/s, %.0f%% of raw), re-runs %.1f ms = %.2f%% of "
           "run; mismatched %u\n",
           "", res.checked, res.verify_us / 1e3,
           100.0 * (double)res.verify_us / run, res.commit_us / 1e3,
           S_GBPS(res.commit_us),
           res.commit_us ? 100.0 * (double)raw_us / (double)res.commit_us : 0.0,
           res.rerun_us / 1e3, 100.0 * (double)res.rerun_us / run,
           res.mismatched);
    printf("%-20s unit launches (device time) %.2f ms = %.3f%% of run; first "
           "check, with the re-run build: %.1f ms\n",
           "", res.launch_us / 1e3, 100.0 * (double)res.launch_us / run,
           first_us / 1e3);
#undef S_GBPS
out:
    free(outputs[out]);
    return rc;
}

static int s_section_verify(const s_opts_t *o)
{
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    float *a = NULL, *b = NULL;
    char what[64];
    int rc;

    printf("\n== verification (provider runs and commits; requester "
           "ns_spot_check with k = %u units)\n",
           o->checks);
    ns_runner_t *r = s_runner(o, s_cache_dir);
    if (!r)
        return NS_ERR_OPENCL;
    ns_job_init(&job);
    rc = s_sgemm_job(&job, inputs, &a, &b, o->verify_sgemm, o->sgemm_lx,
                     o->sgemm_local, o->checks);
    snprintf(what, sizeof what, "sgemm n=%u", o->verify_sgemm);
    if (rc == NS_OK)
        rc = s_verify_one(r, o, what, &job, inputs, 2);
    ns_job_release(&job);
    free(a);
    free(b);
    a = b = NULL;
    if (rc != NS_OK)
        goto out;

    /* the vector add exact, then under a tolerance (ulp:4) */
    for (int tol = 0; tol < 2 && rc == NS_OK; tol++) {
        ns_job_init(&job);
        rc = s_vadd_job(&job, inputs, &a, &b, o->vadd, o->checks);
        if (tol) {
            job.det = NS_DET_ULP;
            job.tol = 4;
        }
        snprintf(what, sizeof what, "vector_add %lluM%s",
                 (unsigned long long)(o->vadd >> 20), tol ? " ulp:4" : "");
        if (rc == NS_OK)
            rc = s_verify_one(r, o, what, &job, inputs, 2);
        ns_job_release(&job);
        free(a);
        free(b);
        a = b = NULL;
    }
out:
    ns_runner_destroy(&r);
    return rc;
}

/* ---- challenge ---------------------------------------------------------- */

static int s_chal_label(ns_chal_prover_t *pr, const s_opts_t *o)
{
    ns_label_params_t p;
    uint8_t seed[32], secret[32];
    ns_hash_t root;
    uint64_t positions[NS_CHAL_MAX_OPENINGS];
    ns_label_opening_t *open = NULL;
    uint32_t k =
        o->checks < NS_CHAL_MAX_OPENINGS ? o->checks : NS_CHAL_MAX_OPENINGS;
    uint64_t device_us = 0;
    char err[S_ERR_LEN], why[256];

    int rc = ns_label_params_init(&p, o->label_bytes, 0);
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: label bytes %llu: %s\n",
                (unsigned long long)o->label_bytes, ns_strerror(rc));
        return rc;
    }
    open = calloc(k, sizeof *open);
    if (!open)
        return NS_ERR_NOMEM;
    randombytes_buf(seed, sizeof seed);
    randombytes_buf(secret, sizeof secret);
    uint64_t t0 = ns_mono_us();
    rc = ns_label_prove(pr, &p, seed, root, &device_us, err, sizeof err);
    uint64_t prove_us = ns_mono_us() - t0;
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: label prove: %s: %s\n", ns_strerror(rc),
                err);
        goto out;
    }
    ns_label_positions(&p, root, secret, k, positions);
    t0 = ns_mono_us();
    rc = ns_label_open(pr, positions, k, open, err, sizeof err);
    uint64_t open_us = ns_mono_us() - t0;
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: label open: %s: %s\n", ns_strerror(rc),
                err);
        goto out;
    }
    uint64_t deadline = ns_label_deadline_us(&p, s_peak_gbps, s_peak_gflops);
    t0 = ns_mono_us();
    ns_chal_verdict v = ns_label_verify(&p, seed, root, positions, k, open,
                                        prove_us, deadline, why, sizeof why);
    uint64_t verify_us = ns_mono_us() - t0;
    printf("labelling %4llu MiB  prove %.1f ms (device %.1f ms), deadline "
           "%.1f ms at the devbench figures; open k=%u %.1f ms; verify "
           "%.2f ms (%.3f%% of prove); outcome %s\n",
           (unsigned long long)(p.bytes >> 20), prove_us / 1e3, device_us / 1e3,
           deadline / 1e3, k, open_us / 1e3, verify_us / 1e3,
           100.0 * verify_us / (prove_us ? prove_us : 1),
           ns_chal_verdict_name(v));
out:
    free(open);
    return rc;
}

static int s_chal_imatmul(ns_chal_prover_t *pr, const s_opts_t *o)
{
    ns_imatmul_params_t p;
    uint8_t secret[32];
    uint32_t *c = NULL;
    uint64_t device_us = 0;
    ns_chal_verdict v = NS_CHAL_WRONG;
    char err[S_ERR_LEN], why[256];
    const uint32_t rounds = 2;

    p.n = o->imatmul;
    p.p = NS_IMATMUL_DEFAULT_P;
    randombytes_buf(p.seed, sizeof p.seed);
    randombytes_buf(secret, sizeof secret);
    int rc = ns_imatmul_params_check(&p);
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: imatmul n=%u: %s\n", p.n, ns_strerror(rc));
        return rc;
    }
    c = malloc((size_t)p.n * p.n * sizeof *c);
    if (!c)
        return NS_ERR_NOMEM;
    uint64_t t0 = ns_mono_us();
    rc = ns_imatmul_prove(pr, &p, c, &device_us, err, sizeof err);
    uint64_t prove_us = ns_mono_us() - t0;
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: imatmul prove: %s: %s\n", ns_strerror(rc),
                err);
        goto out;
    }
    uint64_t deadline = ns_imatmul_deadline_us(&p, s_peak_gbps, s_peak_gflops);
    t0 = ns_mono_us();
    rc = ns_imatmul_verify(&p, c, secret, rounds, prove_us, deadline, &v, why,
                           sizeof why);
    uint64_t verify_us = ns_mono_us() - t0;
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: imatmul verify: %s\n", ns_strerror(rc));
        goto out;
    }
    double gops =
        2.0 * p.n * (double)p.n * p.n / (prove_us ? prove_us : 1) * 1e-3;
    printf("imatmul n=%-5u    prove %.1f ms (device %.1f ms, %.2f G int "
           "ops/s counting 2 n^3), deadline %.1f ms; Freivalds x%u verify "
           "%.2f ms (%.3f%% of prove); outcome %s\n",
           p.n, prove_us / 1e3, device_us / 1e3, gops, deadline / 1e3, rounds,
           verify_us / 1e3, 100.0 * verify_us / (prove_us ? prove_us : 1),
           ns_chal_verdict_name(v));
out:
    free(c);
    return rc;
}

/* ---- worker -------------------------------------------------------------- */

/* One job through a worker process (what a provider does: inputs over the
 * worker's socket, the run, outputs back), driven by poll as the node's
 * loop does. */
static int s_worker_job(ns_worker_t *w, const ns_job_t *job,
                        const ns_input_t *inputs, ns_worker_result_t *res)
{
    char err[S_ERR_LEN];
    int rc = ns_worker_submit(w, job, inputs, NULL, 0, err, sizeof err);
    if (rc != NS_OK) {
        fprintf(stderr, "bench_exec: worker: %s: %s\n", ns_strerror(rc), err);
        return rc;
    }
    for (;;) {
        struct pollfd pf = {
            ns_worker_fd(w),
            (short)(POLLIN | (ns_worker_wants_write(w) ? POLLOUT : 0)), 0};
        int ms = ns_worker_timeout_ms(w);
        if (pf.fd >= 0)
            (void)poll(&pf, 1, ms < 0 || ms > 100 ? 100 : ms);
        if (ns_worker_collect(w, res))
            break;
    }
    if (res->status != NS_OK)
        fprintf(stderr, "bench_exec: worker: %s: %s\n",
                ns_strerror(res->status), res->error);
    return res->status;
}

static int s_worker_one(ns_runner_t *r, ns_worker_t *w, const s_opts_t *o,
                        uint32_t n)
{
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    uint8_t *outputs[NS_MAX_ARGS] = {0};
    float *a = NULL, *b = NULL;
    ns_timings_t t, bt = {0}, wt = {0};
    char err[S_ERR_LEN];
    uint64_t best_run = UINT64_MAX, best_wall = UINT64_MAX,
             best_local = UINT64_MAX;
    int rc =
        s_sgemm_job(&job, inputs, &a, &b, n, o->sgemm_lx, o->sgemm_local, 1);
    if (rc == NS_OK && !(outputs[2] = s_buf(job.args[2].size)))
        rc = NS_ERR_NOMEM;
    /* in this process: the whole ns_runner_run (what `run` times) */
    for (uint32_t i = 0; rc == NS_OK && i <= o->reps; i++) {
        memset(&t, 0, sizeof t);
        uint64_t t0 = ns_now_us();
        rc = ns_runner_run(r, &job, inputs, outputs, &t, err, sizeof err);
        uint64_t us = ns_now_us() - t0;
        if (rc != NS_OK)
            fprintf(stderr, "bench_exec: sgemm %u: %s: %s\n", n,
                    ns_strerror(rc), err);
        else if (i > 0 && us < best_local) {
            best_local = us;
            bt = t;
        }
    }
    /* through the worker: submit to result, and the worker's own timings */
    for (uint32_t i = 0; rc == NS_OK && i <= o->reps; i++) {
        ns_worker_result_t res;
        memset(&res, 0, sizeof res);
        rc = s_worker_job(w, &job, inputs, &res);
        if (rc == NS_OK && i > 0 && res.wall_us < best_wall) {
            best_wall = res.wall_us;
            wt = res.timings;
        }
        if (rc == NS_OK && i > 0 && res.timings.run_us < best_run)
            best_run = res.timings.run_us;
        ns_worker_result_release(&res);
    }
    if (rc == NS_OK) {
        uint64_t in_w = wt.build_us + wt.upload_us + wt.run_us + wt.download_us;
        printf("sgemm n=%-5u in-process %8.1f ms (build %.1f, upload %.1f, "
               "run %.1f, download %.1f)\n",
               n, best_local / 1e3, bt.build_us / 1e3, bt.upload_us / 1e3,
               bt.run_us / 1e3, bt.download_us / 1e3);
        printf("             worker     %8.1f ms (build %.1f, upload %.1f, "
               "run %.1f, download %.1f; socket and copies %.1f)  %.2fx\n",
               best_wall / 1e3, wt.build_us / 1e3, wt.upload_us / 1e3,
               wt.run_us / 1e3, wt.download_us / 1e3,
               (best_wall > in_w ? best_wall - in_w : 0) / 1e3,
               (double)best_wall / (double)(best_local ? best_local : 1));
    }
    free(outputs[2]);
    free(a);
    free(b);
    ns_job_release(&job);
    return rc;
}

/* The nightshift binary next to bench/ (its `worker` subcommand). */
static void s_nightshift_exe(char *out, size_t cap)
{
    const char *env = getenv("NIGHTSHIFT_BIN");
    if (env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(out, cap, "%s/../nightshift", self);
}

static int s_section_worker(const s_opts_t *o)
{
    char exe[PATH_MAX + 16];
    s_nightshift_exe(exe, sizeof exe);
    printf("\n== worker: sgemm in this process vs through a worker process "
           "(%s), best of %u; the provider's run_ms is the worker's wall\n",
           exe, o->reps);
    ns_runner_t *r = s_runner(o, s_cache_dir);
    if (!r)
        return NS_ERR_OPENCL;
    ns_worker_opts_t wo;
    ns_worker_opts_init(&wo);
    wo.exe = exe;
    wo.device_index = o->device;
    wo.timeout_ms = 600000;
    int rc = NS_OK;
    ns_worker_t *w = ns_worker_new(&wo, &rc);
    if (!w)
        fprintf(stderr, "bench_exec: cannot start a worker (%s)\n", exe);
    for (uint32_t i = 0; w && i < o->n_sgemm && rc == NS_OK; i++)
        rc = s_worker_one(r, w, o, o->sgemm[i]);
    ns_worker_destroy(&w);
    ns_runner_destroy(&r);
    return rc;
}

static int s_section_challenge(const s_opts_t *o)
{
    int err = 0;
    char errbuf[S_ERR_LEN];

    printf("\n== hardware challenges (times include transfers; deadlines "
           "from the devbench figures)\n");
    uint64_t t0 = ns_mono_us();
    ns_chal_prover_t *pr =
        ns_chal_prover_new(o->device, &err, errbuf, sizeof errbuf);
    if (!pr) {
        fprintf(stderr, "bench_exec: challenge prover: %s: %s\n",
                ns_strerror(err), errbuf);
        return err ? err : NS_ERR_OPENCL;
    }
    printf("prover setup       %.1f ms (both programs built)\n",
           (ns_mono_us() - t0) / 1e3);
    int rc = s_chal_label(pr, o);
    if (rc == NS_OK)
        rc = s_chal_imatmul(pr, o);
    ns_chal_prover_destroy(&pr);
    return rc;
}

/* ---- main --------------------------------------------------------------- */

static const char s_usage[] =
    "usage: bench_exec [options]\n"
    "  --device I           device index in `nightshift devices` order "
    "(0)\n"
    "  --only LIST          sections: fma,sgemm,dispatch,verify,challenge,\n"
    "                       worker (all)\n"
    "  --reps R             timed runs of sgemm and of the provider's\n"
    "                       jobs, best kept (3)\n"
    "  --sgemm N[,N...]     sgemm sizes, multiples of 64 (1024,2048)\n"
    "  --sgemm-cols X       sgemm work-group columns of 64 (1; less where\n"
    "                       N / 64 is not a multiple)\n"
    "  --plain-alloc        sgemm buffers from malloc, not as the worker\n"
    "                       allocates them (huge pages for large ones)\n"
    "  --sgemm-local L      sgemm work-group rows (128; less where N is\n"
    "                       not a multiple)\n"
    "  --launches L         trivial-kernel launches timed (2000)\n"
    "  --verify-sgemm N     sgemm size for the verification figures (2048)\n"
    "  --vadd ELEMENTS      vector_add size for verification (67108864)\n"
    "  --checks K           spot checks / label openings (64)\n"
    "  --label-bytes B      labelling challenge size (67108864)\n"
    "  --imatmul N          integer matmul challenge order (512)\n";

static int s_u64_flag(const char *flag, const char *v, uint64_t lo, uint64_t hi,
                      uint64_t *out)
{
    if (!v || ns_parse_u64(v, out) != NS_OK || *out < lo || *out > hi) {
        fprintf(stderr, "bench_exec: %s wants a number in %llu..%llu\n", flag,
                (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    return 0;
}

static int s_parse_sections(const char *v, unsigned *out)
{
    static const char *const names[] = {"fma",    "sgemm",     "dispatch",
                                        "verify", "challenge", "worker"};
    char buf[128];
    *out = 0;
    if (!v || strlen(v) >= sizeof buf)
        return -1;
    strcpy(buf, v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < 6 && strcmp(tok, names[i]) != 0)
            i++;
        if (i == 6)
            return -1;
        *out |= 1u << i;
    }
    return *out ? 0 : -1;
}

static int s_parse_sizes(const char *v, s_opts_t *o)
{
    char buf[128];
    o->n_sgemm = 0;
    if (!v || strlen(v) >= sizeof buf)
        return -1;
    strcpy(buf, v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        uint64_t n = 0;
        if (o->n_sgemm == S_MAX_SIZES || ns_parse_u64(tok, &n) != NS_OK ||
            n < 64 || n > 16384 || n % 64)
            return -1;
        o->sgemm[o->n_sgemm++] = (uint32_t)n;
    }
    return o->n_sgemm ? 0 : -1;
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->sections = S_SEC_ALL;
    o->reps = 3;
    o->sgemm[0] = 1024;
    o->sgemm[1] = 2048;
    o->n_sgemm = 2;
    o->sgemm_local = 128;
    o->sgemm_lx = 1;
    o->launches = 2000;
    o->verify_sgemm = 2048;
    o->vadd = UINT64_C(64) << 20;
    o->checks = 64;
    o->label_bytes = UINT64_C(64) << 20;
    o->imatmul = 512;
    /* every flag but --help and --plain-alloc takes a value: two arguments
     * a turn */
    for (int i = 1; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            fputs(s_usage, stdout);
            exit(0);
        } else if (strcmp(f, "--only") == 0) {
            if (s_parse_sections(v, &o->sections) != 0) {
                fprintf(stderr, "bench_exec: bad --only list\n");
                return -1;
            }
        } else if (strcmp(f, "--sgemm") == 0) {
            if (s_parse_sizes(v, o) != 0) {
                fprintf(stderr, "bench_exec: --sgemm wants multiples of 64 "
                                "in 64..16384, comma-separated\n");
                return -1;
            }
        } else if (strcmp(f, "--device") == 0) {
            if (s_u64_flag(f, v, 0, 1000, &x))
                return -1;
            o->device = (uint32_t)x;
        } else if (strcmp(f, "--reps") == 0) {
            if (s_u64_flag(f, v, 1, 1000, &x))
                return -1;
            o->reps = (uint32_t)x;
        } else if (strcmp(f, "--sgemm-local") == 0) {
            if (s_u64_flag(f, v, 1, 1024, &x))
                return -1;
            o->sgemm_local = (uint32_t)x;
        } else if (strcmp(f, "--plain-alloc") == 0) {
            s_plain_alloc = true;
            i--; /* no value */
        } else if (strcmp(f, "--sgemm-cols") == 0) {
            if (s_u64_flag(f, v, 1, 256, &x))
                return -1;
            o->sgemm_lx = (uint32_t)x;
        } else if (strcmp(f, "--launches") == 0) {
            if (s_u64_flag(f, v, 1, S_MAX_LAUNCHES, &x))
                return -1;
            o->launches = (uint32_t)x;
        } else if (strcmp(f, "--verify-sgemm") == 0) {
            if (s_u64_flag(f, v, 64, 16384, &x) || x % 64) {
                fprintf(stderr, "bench_exec: --verify-sgemm: a multiple of "
                                "64\n");
                return -1;
            }
            o->verify_sgemm = (uint32_t)x;
        } else if (strcmp(f, "--vadd") == 0) {
            if (s_u64_flag(f, v, 1, UINT32_MAX, &x))
                return -1;
            o->vadd = x;
        } else if (strcmp(f, "--checks") == 0) {
            if (s_u64_flag(f, v, 1, NS_MAX_CHECKS, &x))
                return -1;
            o->checks = (uint32_t)x;
        } else if (strcmp(f, "--label-bytes") == 0) {
            if (s_u64_flag(f, v, NS_LABEL_MIN_BYTES, NS_LABEL_MAX_BYTES, &x))
                return -1;
            o->label_bytes = x;
        } else if (strcmp(f, "--imatmul") == 0) {
            if (s_u64_flag(f, v, NS_IMATMUL_TILE, NS_IMATMUL_MAX_N, &x))
                return -1;
            o->imatmul = (uint32_t)x;
        } else {
            fprintf(stderr, "bench_exec: unknown argument '%s'\n%s", f,
                    s_usage);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    s_opts_t o;
    ns_device_t devs[NS_MAX_DEVICES];
    uint32_t n = 0;
    int rc = NS_OK, failed = 0;

    if (s_parse(argc, argv, &o) != 0)
        return 2;
    if (sodium_init() < 0) {
        fprintf(stderr, "bench_exec: libsodium failed to initialise\n");
        return 1;
    }
    ns_log_threshold = NS_LOG_WARN;
    rc = ns_devices_probe(devs, NS_MAX_DEVICES, &n);
    if (rc != NS_OK || o.device >= n) {
        fprintf(stderr, "bench_exec: no OpenCL device %u (%u found)\n",
                o.device, n);
        return 1;
    }
    s_dev = devs[o.device];
    snprintf(s_cache_dir, sizeof s_cache_dir, "/tmp/ns_bench_exec_XXXXXX");
    if (!mkdtemp(s_cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    printf("bench_exec: device %u: %s | %s | %s | %u CUs | %u MHz\n", o.device,
           s_dev.platform, s_dev.info.name, ns_devtype_name(s_dev.info.type),
           s_dev.info.compute_units, s_dev.info.clock_mhz);
    s_load("at start");
    uint64_t t0 = ns_mono_us();

    /* The later sections compare with, or derive deadlines from, the FMA
     * figure: measure it whenever any of them runs. */
    if (o.sections & (S_SEC_FMA | S_SEC_SGEMM | S_SEC_CHALLENGE))
        failed |= s_section_fma(&o) != NS_OK;
    if (o.sections & S_SEC_SGEMM)
        failed |= s_section_sgemm(&o) != NS_OK;
    if (o.sections & S_SEC_DISPATCH)
        failed |= s_section_dispatch(&o) != NS_OK;
    if (o.sections & S_SEC_VERIFY)
        failed |= s_section_verify(&o) != NS_OK;
    if (o.sections & S_SEC_CHALLENGE)
        failed |= s_section_challenge(&o) != NS_OK;
    if (o.sections & S_SEC_WORKER)
        failed |= s_section_worker(&o) != NS_OK;

    printf("\ntotal %.1f s\n", (ns_mono_us() - t0) / 1e6);
    s_load("at end");
    /* the runner's binary cache of this run */
    DIR *d = opendir(s_cache_dir);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            char path[512];
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                ns_path_join(path, sizeof path, s_cache_dir, e->d_name) ==
                    NS_OK)
                unlink(path);
        }
        closedir(d);
    }
    rmdir(s_cache_dir);
    /* Exit status says whether every section could run, not how fast. */
    return failed ? 1 : 0;
}
