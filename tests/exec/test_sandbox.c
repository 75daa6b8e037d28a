/* test_sandbox.c - kernels through the worker process (worker.h): hostile
 * kernels end as clear errors with this process unaffected and the next
 * job succeeding; good jobs match the in-process runner byte for byte;
 * a hostile worker cannot corrupt the supervisor; `nightshift run` writes
 * correct output files.
 *
 * This binary is its own worker: started as `test_exec_sandbox worker
 * --fd N ...` (the default exe, /proc/self/exe) it serves jobs with
 * ns_worker_main, or, with NS_TEST_HOSTILE set, misbehaves on purpose.
 */
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <msgpack.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tmp[1024];   /* scratch directory for this run */
static char s_cache[1100]; /* program cache shared by the workers */

/* ---- kernels ------------------------------------------------------------ */

static const char s_fill_src[] =
    "__kernel void fill(__global uint *out, const uint k)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = (uint)i * 2654435761u + k;\n"
    "}\n";

static const char s_spin_src[] =
    "__kernel void spin(__global volatile uint *out)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    for (;;)\n"
    "        out[i] += 1u;\n"
    "}\n";

/* 2^45 uints = 2^47 bytes past the buffer: a non-canonical address on
 * x86-64, unmapped anywhere else. */
static const char s_far_src[] = "__kernel void far(__global uint *out)\n"
                                "{\n"
                                "    size_t i = get_global_id(0);\n"
                                "    __global volatile uint *p = out;\n"
                                "    p[i + ((size_t)1 << 45)] = 7u;\n"
                                "    out[i] = 0u;\n"
                                "}\n";

static const char s_wild_src[] =
    "__kernel void wild(__global uint *out)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    __global volatile uint *p = (__global volatile uint *)(ulong)0x40;\n"
    "    p[i] = 7u;\n"
    "    out[i] = 0u;\n"
    "}\n";

/* 16 MiB of __local: far over any device's local memory. */
static const char s_biglocal_src[] =
    "__kernel void biglocal(__global uint *out)\n"
    "{\n"
    "    __local uint big[1 << 22];\n"
    "    size_t l = get_local_id(0);\n"
    "    big[l * 4096] = (uint)l;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = big[((l + 1) % get_local_size(0)) * 4096];\n"
    "}\n";

static const char s_syntax_src[] =
    "__kernel void broken(__global uint *out)\n"
    "{\n"
    "    out[get_global_id(0)] = this is not OpenCL C;\n"
    "}\n";

/* ---- helpers ------------------------------------------------------------ */

static void s_job_src(ns_job_t *job, const char *src, const char *entry,
                      uint64_t n)
{
    ns_job_init(job);
    CHECK_RC(ns_job_set_source(job, src, strlen(src)), NS_OK);
    snprintf(job->entry, sizeof job->entry, "%s", entry);
    job->dims = 1;
    job->global[0] = n;
}

static void s_job_builtin(ns_job_t *job, const char *name, uint64_t n)
{
    const ns_builtin_t *b = ns_builtin_find(name);
    ns_job_init(job);
    if (!CHECK(b != NULL))
        return;
    snprintf(job->builtin, sizeof job->builtin, "%s", name);
    snprintf(job->entry, sizeof job->entry, "%s", b->entry);
    ns_hash(job->source_hash, b->source, b->source_len);
    job->dims = 1;
    job->global[0] = n;
}

static void s_arg_out(ns_job_t *job, uint64_t size, uint32_t item_bytes)
{
    ns_arg_t *a = &job->args[job->n_args++];
    memset(a, 0, sizeof *a);
    a->kind = NS_ARG_OUT;
    a->size = size;
    a->item_bytes = item_bytes;
}

static void s_arg_in(ns_job_t *job, const void *data, uint64_t size)
{
    ns_arg_t *a = &job->args[job->n_args++];
    memset(a, 0, sizeof *a);
    a->kind = NS_ARG_IN;
    a->size = size;
    ns_hash(a->hash, data, (size_t)size);
}

static void s_arg_u32(ns_job_t *job, uint32_t v)
{
    ns_arg_t *a = &job->args[job->n_args++];
    memset(a, 0, sizeof *a);
    a->kind = NS_ARG_U32;
    a->v.u32 = v;
}

/* fill: one OUT of n uints and the scalar k. */
static void s_fill_job(ns_job_t *job, uint64_t n, uint32_t k)
{
    s_job_src(job, s_fill_src, "fill", n);
    s_arg_out(job, n * 4, 4);
    s_arg_u32(job, k);
}

static int s_fill_ok(const uint8_t *out, uint64_t n, uint32_t k)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, out + i * 4, 4);
        if (v != (uint32_t)i * 2654435761u + k)
            return 0;
    }
    return 1;
}

static ns_worker_t *s_worker(uint32_t timeout_ms, uint64_t mem_limit)
{
    ns_worker_opts_t o;
    int rc = NS_OK;
    ns_worker_opts_init(&o);
    o.cache_dir = s_cache;
    o.timeout_ms = timeout_ms;
    o.mem_limit_bytes = mem_limit;
    ns_worker_t *w = ns_worker_new(&o, &rc);
    CHECK_RC(rc, NS_OK);
    CHECK(w != NULL);
    return w;
}

/* A small good job in w: the worker is healthy (again). */
static void s_expect_healthy(ns_worker_t *w, uint32_t k)
{
    ns_job_t job;
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    s_fill_job(&job, 1000, k);
    int rc = ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err);
    if (CHECK_RC(rc, NS_OK))
        CHECK(out[0] && s_fill_ok(out[0], 1000, k));
    else
        fprintf(stderr, "  healthy job failed: %s\n", err);
    CHECK(out[1] == NULL);
    free(out[0]);
    ns_job_release(&job);
}

/* Run job through w, expect failure rc with err containing needle. */
static void s_expect_fail(ns_worker_t *w, const ns_job_t *job, int want_rc,
                          const char *needle)
{
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    int rc = ns_worker_run(w, job, NULL, out, NULL, err, sizeof err);
    CHECK_RC(rc, want_rc);
    CHECK_CONTAINS(err, needle);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        CHECK(out[i] == NULL);
    printf("  error: %s\n", err);
}

static double s_ms_since(uint64_t t0_us)
{
    return (double)(ns_mono_us() - t0_us) / 1000.0;
}

/* ---- good jobs ---------------------------------------------------------- */

TEST(vector_add_matches_runner)
{
    const uint32_t n = (1u << 16) + 3;
    size_t bytes = (size_t)n * 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    uint8_t *local_out = calloc(1, bytes);
    uint8_t *wout[NS_MAX_ARGS] = {NULL};
    uint8_t *lout[NS_MAX_ARGS] = {NULL};
    ns_input_t in[NS_MAX_ARGS];
    ns_timings_t t;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    ns_job_t job;
    int rc = NS_OK;

    if (!CHECK(a && b && local_out))
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.37f - 1000.0f;
        b[i] = 1.0f / (float)(i + 1);
    }
    memset(in, 0, sizeof in);
    s_job_builtin(&job, "vector_add", n);
    s_arg_in(&job, a, bytes);
    s_arg_in(&job, b, bytes);
    s_arg_out(&job, bytes, 4);
    s_arg_u32(&job, n);
    in[0] = (ns_input_t){.data = a, .len = bytes};
    in[1] = (ns_input_t){.data = b, .len = bytes};
    if (!CHECK_RC(ns_job_validate(&job, err, sizeof err), NS_OK)) {
        fprintf(stderr, "  %s\n", err);
        goto out;
    }

    ns_runner_t *runner = ns_runner_new(0, s_cache, &rc);
    if (!CHECK(runner != NULL))
        goto out;
    lout[2] = local_out;
    CHECK_RC(ns_runner_run(runner, &job, in, lout, &t, err, sizeof err), NS_OK);

    ns_worker_t *w = s_worker(0, 0);
    if (!w) {
        ns_runner_destroy(&runner);
        goto out;
    }
    rc = ns_worker_run(w, &job, in, wout, &t, err, sizeof err);
    if (CHECK_RC(rc, NS_OK)) {
        CHECK(wout[0] == NULL && wout[1] == NULL && wout[3] == NULL);
        if (CHECK(wout[2] != NULL))
            CHECK_MEM(wout[2], local_out, bytes);
        float c5;
        memcpy(&c5, wout[2] + 5 * 4, 4);
        CHECK(c5 == a[5] + b[5]);
        printf("  worker: build %.3f ms%s, run %.3f ms\n",
               (double)t.build_us / 1000, t.cache_hit ? " (cache hit)" : "",
               (double)t.run_us / 1000);
    } else {
        fprintf(stderr, "  %s\n", err);
    }
    /* Units: the worker's outputs match the runner's on zero-filled
     * buffers, and the full run where the units wrote. */
    uint64_t items[] = {0, 5, n - 1, 17, 5};
    uint32_t n_items = sizeof items / sizeof items[0];
    uint8_t *iw[NS_MAX_ARGS] = {NULL}, *il[NS_MAX_ARGS] = {NULL};
    rc = ns_worker_run_units(w, &job, in, items, n_items, iw, NULL, err,
                             sizeof err);
    if (CHECK_RC(rc, NS_OK) && CHECK(iw[2] != NULL)) {
        il[2] = calloc(1, bytes);
        CHECK_RC(ns_runner_run_units(runner, &job, in, items, n_items, il, NULL,
                                     err, sizeof err),
                 NS_OK);
        CHECK_MEM(iw[2], il[2], bytes);
        for (uint32_t k = 0; k < n_items && wout[2]; k++)
            CHECK_MEM(iw[2] + 4 * items[k], wout[2] + 4 * items[k], 4);
        CHECK(iw[2][4 * 6] == 0 && iw[2][4 * 6 + 3] == 0); /* not run */
    } else {
        fprintf(stderr, "  %s\n", err);
    }
    free(iw[2]);
    free(il[2]);
    /* Fraud proofs, checked in the worker: a faked unit is fraud, an
     * honest one is not. */
    if (wout[2]) {
        ns_identity_t *prov = ns_identity_generate();
        ns_hash_t id, root;
        uint8_t sig[NS_SIG_BYTES];
        ns_fraud_proof_t p;
        CHECK_RC(ns_job_id(&job, id), NS_OK);
        wout[2][4 * 9] ^= 0x40;
        CHECK_RC(ns_commit_root(&job, id, wout, root), NS_OK);
        ns_result_sign(prov, id, root, n, sig);
        for (int honest = 0; honest < 2; honest++) {
            uint64_t unit = honest ? 10 : 9;
            if (!CHECK_RC(ns_fraud_build(&p, &job, id, ns_identity_pk(prov),
                                         sig, NULL, wout, unit, 2, 4 * unit),
                          NS_OK))
                break;
            CHECK_RC(ns_worker_check_fraud(w, &p, in, err, sizeof err),
                     honest ? NS_ERR_PROOF : NS_OK);
            CHECK_CONTAINS(err, honest ? "no fraud" : "fraud");
            ns_fraud_release(&p);
        }
        wout[2][4 * 9] ^= 0x40;
        ns_identity_destroy(&prov);
    }
    /* A unit out of range, a wrong input length: refused up front. */
    uint64_t bad = n;
    CHECK_RC(
        ns_worker_run_units(w, &job, in, &bad, 1, iw, NULL, err, sizeof err),
        NS_ERR_INVAL);
    uint8_t *unused[NS_MAX_ARGS] = {NULL};
    in[1].len = bytes - 1;
    CHECK_RC(ns_worker_run(w, &job, in, unused, NULL, err, sizeof err),
             NS_ERR_INVAL);
    CHECK(unused[2] == NULL);
    CHECK_CONTAINS(err, "arg 1");
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.starts, 1);
    CHECK_EQ_INT(st.crashes, 0);
    ns_worker_destroy(&w);
    CHECK(w == NULL);
    ns_worker_destroy(&w); /* idempotent */
    ns_runner_destroy(&runner);
out:
    free(wout[2]);
    free(a);
    free(b);
    free(local_out);
    ns_job_release(&job);
}

/* ---- hostile kernels ---------------------------------------------------- */

TEST(infinite_loop_times_out)
{
    ns_worker_t *w = s_worker(2000, 0);
    ns_job_t job;
    if (!w)
        return;
    s_job_src(&job, s_spin_src, "spin", 4);
    s_arg_out(&job, 16, 4);
    uint64_t t0 = ns_mono_us();
    s_expect_fail(w, &job, NS_ERR_TIMEOUT,
                  "the job ran past its 2000 ms limit");
    double ms = s_ms_since(t0);
    printf("  timed out after %.0f ms\n", ms);
    CHECK(ms >= 2000 && ms < 2000 + 10000);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.timeouts, 1);
    CHECK_EQ_INT(st.starts, 2); /* restarted at once */
    s_expect_healthy(w, 1);
    ns_job_release(&job);
    ns_worker_destroy(&w);
}

TEST(crashing_kernels)
{
    ns_worker_t *w = s_worker(0, 0);
    ns_job_t job;
    if (!w)
        return;
    s_job_src(&job, s_far_src, "far", 64);
    s_arg_out(&job, 256, 4);
    s_expect_fail(w, &job, NS_ERR_OPENCL,
                  "the kernel crashed the OpenCL runtime");
    ns_job_release(&job);
    s_expect_healthy(w, 2);

    s_job_src(&job, s_wild_src, "wild", 64);
    s_arg_out(&job, 256, 4);
    s_expect_fail(w, &job, NS_ERR_OPENCL,
                  "the kernel crashed the OpenCL runtime");
    ns_job_release(&job);
    s_expect_healthy(w, 3);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.crashes, 2);
    CHECK_EQ_INT(st.starts, 3);
    ns_worker_destroy(&w);
}

TEST(syntax_error_gives_build_log)
{
    ns_worker_t *w = s_worker(0, 0);
    ns_job_t job;
    if (!w)
        return;
    s_job_src(&job, s_syntax_src, "broken", 4);
    s_arg_out(&job, 16, 4);
    s_expect_fail(w, &job, NS_ERR_OPENCL, "error");
    ns_job_release(&job);
    s_expect_healthy(w, 4);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.starts, 1); /* a build error is not a crash */
    CHECK_EQ_INT(st.crashes, 0);
    ns_worker_destroy(&w);
}

TEST(too_much_memory)
{
    ns_worker_t *w = s_worker(0, 0);
    ns_job_t job;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    if (!w)
        return;
    s_expect_healthy(w, 5); /* the device is known from here on */
    ns_worker_stats_t before, after;
    ns_worker_stats(w, &before);

    /* 8 GiB output: over the job cap, refused before anything runs. */
    s_fill_job(&job, UINT64_C(2) << 30, 0);
    CHECK_RC(ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err),
             NS_ERR_TOOBIG);
    printf("  8 GiB: %s\n", err);
    CHECK(err[0] != '\0');
    ns_job_release(&job);

    /* Just over the device's largest allocation (when under the job cap):
     * refused by the supervisor, nothing sent to the worker. */
    const ns_devinfo_t *dev = ns_worker_device(w);
    if (CHECK(dev != NULL) && dev->max_alloc_bytes + 4096 <= NS_MAX_BUFFER) {
        uint64_t n = (dev->max_alloc_bytes + 4096) / 4;
        s_fill_job(&job, n, 0);
        CHECK_RC(ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err),
                 NS_ERR_TOOBIG);
        CHECK_CONTAINS(err, "largest allocation");
        printf("  over max alloc: %s\n", err);
        ns_job_release(&job);
    }
    ns_worker_stats(w, &after);
    CHECK_EQ_INT(after.jobs, before.jobs);
    CHECK_EQ_INT(after.starts, before.starts);

    /* Too much __local: a clear error from the build or the launch. */
    s_job_src(&job, s_biglocal_src, "biglocal", 64);
    job.local[0] = 16;
    s_arg_out(&job, 256, 4);
    int rc = ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err);
    CHECK(rc != NS_OK);
    CHECK(err[0] != '\0');
    printf("  16 MiB __local: %s: %s\n", ns_errname(rc), err);
    free(out[0]);
    ns_job_release(&job);
    s_expect_healthy(w, 6);
    ns_worker_destroy(&w);
}

TEST(worker_out_of_memory)
{
    /* 256 MiB of address space beyond the runtime's: a 512 MiB output
     * cannot be held. The worker says so and lives on. */
    ns_worker_t *w = s_worker(0, UINT64_C(256) << 20);
    ns_job_t job;
    if (!w)
        return;
    s_fill_job(&job, UINT64_C(128) << 20, 0);
    s_expect_fail(w, &job, NS_ERR_NOMEM, "out of memory");
    ns_job_release(&job);
    s_expect_healthy(w, 7);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.starts, 1);
    ns_worker_destroy(&w);
}

TEST(huge_source_refused)
{
    ns_worker_opts_t o;
    ns_worker_opts_init(&o);
    o.max_source_bytes = 4096;
    int rc = NS_OK;
    ns_worker_t *w = ns_worker_new(&o, &rc);
    ns_job_t job;
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    if (!CHECK(w != NULL))
        return;

    /* 10 MB: ns_job_set_source refuses it, and a job that carries it
     * anyway is refused by size before anything else looks at it. */
    size_t big = 10u * 1000 * 1000;
    char *src = malloc(big);
    if (!CHECK(src != NULL))
        goto out;
    memset(src, ' ', big);
    memcpy(src, "/* */", 5);
    ns_job_init(&job);
    CHECK_RC(ns_job_set_source(&job, src, big), NS_ERR_TOOBIG);
    s_fill_job(&job, 16, 0);
    free(job.source);
    job.source = (uint8_t *)src; /* the job owns it now */
    job.source_len = big;
    uint64_t t0 = ns_mono_us();
    CHECK_RC(ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err),
             NS_ERR_TOOBIG);
    CHECK_CONTAINS(err, "kernel source of 9.5 MiB is over the 4.0 KiB");
    printf("  refused in %.3f ms: %s\n", s_ms_since(t0), err);
    ns_job_release(&job);

    /* Over this worker's 4 KiB policy but under NS_MAX_SOURCE. */
    char *mid = malloc(5000);
    if (CHECK(mid != NULL)) {
        memset(mid, ' ', 5000);
        memcpy(mid, s_fill_src, strlen(s_fill_src));
        s_fill_job(&job, 16, 0);
        CHECK_RC(ns_job_set_source(&job, mid, 5000), NS_OK);
        CHECK_RC(ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err),
                 NS_ERR_TOOBIG);
        CHECK_CONTAINS(err, "over the 4.0 KiB limit");
        ns_job_release(&job);
        free(mid);
    }
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.jobs, 0); /* nothing reached the worker */
    CHECK_EQ_INT(st.starts, 1);
    s_expect_healthy(w, 8);
out:
    ns_worker_destroy(&w);
}

/* ---- the non-blocking API ------------------------------------------------ */

/* Poll like an event loop until a result; count the wake-ups. */
static int s_loop(ns_worker_t *w, ns_worker_result_t *res, int *wakeups,
                  int *saw_write)
{
    *wakeups = 0;
    for (;;) {
        if (ns_worker_collect(w, res) == 1)
            return 1;
        int fd = ns_worker_fd(w);
        if (!CHECK(fd >= 0))
            return 0;
        struct pollfd p = {fd, POLLIN, 0};
        if (ns_worker_wants_write(w)) {
            p.events |= POLLOUT;
            *saw_write = 1;
        }
        int timeout = ns_worker_timeout_ms(w);
        CHECK(timeout >= -1);
        if (poll(&p, 1, timeout) < 0 && errno != EINTR)
            return 0;
        (*wakeups)++;
        if (*wakeups > 1000000)
            return 0;
    }
}

TEST(non_blocking)
{
    const uint32_t n = 4u << 20; /* 16 MiB per input: several slices */
    size_t bytes = (size_t)n * 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    ns_input_t in[NS_MAX_ARGS];
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    ns_job_t job;
    int wakeups = 0, saw_write = 0;

    memset(&res, 0, sizeof res);
    ns_worker_t *w = s_worker(3000, 0);
    if (!CHECK(a && b) || !w)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = (float)(i / 1000);
    }
    memset(in, 0, sizeof in);
    in[0] = (ns_input_t){.data = a, .len = bytes};
    in[1] = (ns_input_t){.data = b, .len = bytes};
    s_job_builtin(&job, "vector_add", n);
    s_arg_in(&job, a, bytes);
    s_arg_in(&job, b, bytes);
    s_arg_out(&job, bytes, 4);
    s_arg_u32(&job, n);

    CHECK(!ns_worker_busy(w));
    CHECK(ns_worker_timeout_ms(w) >= 0); /* starting: start-up deadline */
    CHECK_RC(ns_worker_submit(w, &job, in, NULL, 0, err, sizeof err), NS_OK);
    CHECK(ns_worker_busy(w));
    CHECK_RC(ns_worker_submit(w, &job, in, NULL, 0, err, sizeof err),
             NS_ERR_STATE);
    uint8_t *dummy[NS_MAX_ARGS] = {NULL};
    uint64_t item = 0;
    CHECK_RC(ns_worker_run_units(w, &job, in, &item, 1, dummy, NULL, err,
                                 sizeof err),
             NS_ERR_STATE);
    uint64_t t0 = ns_mono_us();
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write))) {
        printf("  16 MiB x 2 in, 16 MiB out: %d wake-ups, %.1f ms\n", wakeups,
               s_ms_since(t0));
        CHECK(wakeups > 2);
        CHECK(saw_write);
        if (CHECK_RC(res.status, NS_OK) && CHECK(res.outputs[2] != NULL)) {
            int ok = 1;
            const float *c = (const float *)res.outputs[2];
            for (uint32_t i = 0; i < n && ok; i++)
                ok = c[i] == a[i] + b[i];
            CHECK(ok);
        } else {
            fprintf(stderr, "  %s\n", res.error);
        }
        CHECK(res.wall_us > 0);
    }
    ns_worker_result_release(&res);
    ns_worker_result_release(&res); /* idempotent */
    CHECK(!ns_worker_busy(w));
    CHECK_EQ_INT(ns_worker_timeout_ms(w), -1);

    /* Items, non-blocking. */
    uint64_t items[] = {3, 4000000};
    CHECK_RC(ns_worker_submit(w, &job, in, items, 2, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write)) &&
        CHECK_RC(res.status, NS_OK) && CHECK(res.outputs[2] != NULL)) {
        const float *v = (const float *)res.outputs[2];
        CHECK(v[3] == a[3] + b[3]);
        CHECK(v[4000000] == a[4000000] + b[4000000]);
        CHECK(v[5] == 0.0f); /* not re-run: the zero fill */
    }
    ns_worker_result_release(&res);
    ns_job_release(&job);

    /* A loop, non-blocking: the deadline is the poll timeout. */
    s_job_src(&job, s_spin_src, "spin", 4);
    s_arg_out(&job, 16, 4);
    CHECK_RC(ns_worker_submit(w, &job, NULL, NULL, 0, err, sizeof err), NS_OK);
    t0 = ns_mono_us();
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write))) {
        CHECK_RC(res.status, NS_ERR_TIMEOUT);
        CHECK_CONTAINS(res.error, "3000 ms limit");
        printf("  spin: %d wake-ups in %.0f ms\n", wakeups, s_ms_since(t0));
        CHECK(wakeups < 100); /* slept in poll, did not spin */
    }
    ns_worker_result_release(&res);

    /* Cancel: the loop is abandoned, the next job runs. */
    CHECK_RC(ns_worker_submit(w, &job, NULL, NULL, 0, err, sizeof err), NS_OK);
    usleep(300 * 1000);
    CHECK_EQ_INT(ns_worker_collect(w, &res), 0);
    ns_worker_cancel(w);
    CHECK(!ns_worker_busy(w));
    ns_job_release(&job);
    s_expect_healthy(w, 9);
    /* Destroy with a job in flight kills the worker. */
    s_job_src(&job, s_spin_src, "spin", 4);
    s_arg_out(&job, 16, 4);
    CHECK_RC(ns_worker_submit(w, &job, NULL, NULL, 0, err, sizeof err), NS_OK);
    ns_job_release(&job);
out:
    ns_worker_destroy(&w);
    free(a);
    free(b);
}

/* ---- a hostile worker --------------------------------------------------- */

static int s_hostile_write(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t r = write(fd, b, n);
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

static int s_hostile_frame(int fd, const msgpack_sbuffer *sb)
{
    uint8_t len[4] = {(uint8_t)(sb->size >> 24), (uint8_t)(sb->size >> 16),
                      (uint8_t)(sb->size >> 8), (uint8_t)sb->size};
    if (s_hostile_write(fd, len, 4) != 0)
        return -1;
    return s_hostile_write(fd, sb->data, sb->size);
}

static void s_pack_hello(msgpack_packer *pk)
{
    ns_devinfo_t dev;
    memset(&dev, 0, sizeof dev);
    msgpack_pack_array(pk, 5);
    msgpack_pack_uint32(pk, NS_WORKER_MSG_HELLO);
    msgpack_pack_uint32(pk, NS_WORKER_PROTOCOL);
    msgpack_pack_int(pk, 0);
    ns_mp_bin(pk, "", 0);
    ns_devinfo_pack(pk, &dev);
}

static void s_pack_result(msgpack_packer *pk, int64_t status, const char *error)
{
    msgpack_pack_array(pk, 4);
    msgpack_pack_uint32(pk, NS_WORKER_MSG_RESULT);
    msgpack_pack_int64(pk, status);
    ns_mp_bin(pk, error, strlen(error));
    msgpack_pack_array(pk, 5);
    for (int i = 0; i < 4; i++)
        msgpack_pack_uint64(pk, 1000);
    msgpack_pack_false(pk);
}

/* The worker side of the hostile tests: jobs without inputs only. */
static int s_hostile_main(const char *mode, int argc, char **argv)
{
    int fd = -1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--fd") == 0)
            fd = atoi(argv[i + 1]);
    if (fd < 0)
        return 2;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (strcmp(mode, "garbage-hello") == 0) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_str(&pk, 3);
        msgpack_pack_str_body(&pk, "hi!", 3);
        msgpack_pack_nil(&pk);
        s_hostile_frame(fd, &sb);
        pause();
        return 0;
    }
    s_pack_hello(&pk);
    s_hostile_frame(fd, &sb);
    msgpack_sbuffer_clear(&sb);
    /* read one request head (no inputs follow: the tests send none) */
    uint8_t len[4];
    ssize_t got = 0;
    while (got < 4) {
        ssize_t r = read(fd, len + got, (size_t)(4 - got));
        if (r <= 0)
            return 0;
        got += r;
    }
    size_t hl = (size_t)len[0] << 24 | (size_t)len[1] << 16 |
                (size_t)len[2] << 8 | len[3];
    uint8_t *head = malloc(hl);
    for (size_t g = 0; head && g < hl;) {
        ssize_t r = read(fd, head + g, hl - g);
        if (r <= 0)
            return 0;
        g += (size_t)r;
    }
    free(head);
    if (strcmp(mode, "huge-frame") == 0) {
        uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
        s_hostile_write(fd, huge, 4);
    } else if (strcmp(mode, "bad-status") == 0) {
        s_pack_result(&pk, -12345, "made up");
        s_hostile_frame(fd, &sb);
    } else if (strcmp(mode, "trailing") == 0) {
        s_pack_result(&pk, 0, "");
        msgpack_pack_nil(&pk); /* one value too many in the frame */
        s_hostile_frame(fd, &sb);
    } else if (strcmp(mode, "short-output") == 0) {
        s_pack_result(&pk, 0, "");
        s_hostile_frame(fd, &sb);
        uint8_t some[10] = {0};
        s_hostile_write(fd, some, sizeof some);
        msgpack_sbuffer_destroy(&sb);
        return 0; /* EOF in the middle of the outputs */
    } else if (strcmp(mode, "extra-output") == 0) {
        s_pack_result(&pk, 0, "ok\x01\x1b[31mred\xff");
        s_hostile_frame(fd, &sb);
        uint8_t data[16 + 5];
        memset(data, 0xab, sizeof data);
        s_hostile_write(fd, data, sizeof data); /* 5 bytes too many */
    } else if (strcmp(mode, "bad-error") == 0) {
        char long_error[NS_WORKER_MAX_ERROR + 2];
        memset(long_error, 'x', sizeof long_error - 1);
        long_error[sizeof long_error - 1] = '\0';
        s_pack_result(&pk, NS_ERR_OPENCL, long_error);
        s_hostile_frame(fd, &sb);
    }
    msgpack_sbuffer_destroy(&sb);
    pause(); /* until SIGKILL */
    return 0;
}

static void s_hostile_case(const char *mode, int want_rc, const char *needle)
{
    setenv("NS_TEST_HOSTILE", mode, 1);
    ns_worker_t *w = s_worker(5000, 0);
    unsetenv("NS_TEST_HOSTILE");
    ns_job_t job;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    int wakeups = 0, saw_write = 0;
    if (!w)
        return;
    s_job_src(&job, s_fill_src, "fill", 4);
    s_arg_out(&job, 16, 4);
    s_arg_u32(&job, 0);
    memset(&res, 0, sizeof res);
    uint64_t t0 = ns_mono_us();
    CHECK_RC(ns_worker_submit(w, &job, NULL, NULL, 0, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write))) {
        CHECK_RC(res.status, want_rc);
        CHECK_CONTAINS(res.error, needle);
        CHECK(res.outputs[0] == NULL);
        printf("  %s: %s (%.0f ms)\n", mode, res.error, s_ms_since(t0));
    }
    ns_worker_result_release(&res);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    if (want_rc == NS_ERR_CORRUPT)
        CHECK_EQ_INT(st.protocol, 1);
    /* the next worker is a real one (the variable is gone) */
    s_expect_healthy(w, 10);
    ns_job_release(&job);
    ns_worker_destroy(&w);
}

/* Inputs the worker maps from files it is handed (ns_worker_submit_files)
 * give what the same bytes through the socket give; one from memory
 * beside them still goes through it; a file of the wrong size fails that
 * job with a reason and the next job runs. The caller's descriptors stay
 * open (the supervisor sends its own duplicates). */
TEST(inputs_from_files)
{
    const uint32_t n = 1u << 20;
    size_t bytes = (size_t)n * 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    ns_input_t in[NS_MAX_ARGS];
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1] = "", path[1200];
    ns_job_t job;
    int wakeups = 0, saw_write = 0, fds[NS_MAX_ARGS];

    memset(&res, 0, sizeof res);
    for (int i = 0; i < NS_MAX_ARGS; i++)
        fds[i] = -1;
    ns_worker_t *w = s_worker(3000, 0);
    if (!CHECK(a && b) || !w)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)(i % 977);
        b[i] = (float)(i / 977);
    }
    snprintf(path, sizeof path, "%s/in-a.bin", s_tmp);
    int fa = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (!CHECK(fa >= 0) || !CHECK(write(fa, a, bytes) == (ssize_t)bytes))
        goto out;
    int fr = open(path, O_RDONLY | O_CLOEXEC); /* what goes to the worker */
    if (!CHECK(fr >= 0))
        goto out;
    memset(in, 0, sizeof in);
    in[0] = (ns_input_t){.data = a, .len = bytes, .verified = true};
    in[1] = (ns_input_t){.data = b, .len = bytes, .verified = true};
    s_job_builtin(&job, "vector_add", n);
    s_arg_in(&job, a, bytes);
    s_arg_in(&job, b, bytes);
    s_arg_out(&job, bytes, 4);
    s_arg_u32(&job, n);

    fds[0] = fr; /* a from its file, b through the socket */
    CHECK_RC(ns_worker_submit_files(w, &job, in, fds, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write)) &&
        CHECK_RC(res.status, NS_OK) && CHECK(res.outputs[2] != NULL)) {
        int ok = 1;
        const float *c = (const float *)res.outputs[2];
        for (uint32_t i = 0; i < n && ok; i++)
            ok = c[i] == a[i] + b[i];
        CHECK(ok);
    } else {
        fprintf(stderr, "  %s\n", res.error);
    }
    ns_worker_result_release(&res);
    CHECK(fcntl(fr, F_GETFD) >= 0); /* still ours */

    /* the file one float short: that job fails, saying why */
    CHECK(ftruncate(fa, (off_t)bytes - 4) == 0);
    CHECK_RC(ns_worker_submit_files(w, &job, in, fds, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write))) {
        CHECK_RC(res.status, NS_ERR_INVAL);
        CHECK(strstr(res.error, "input arg 0") != NULL);
    }
    ns_worker_result_release(&res);
    /* a writable descriptor never reaches the worker (it could write the
     * file): that input goes through the socket, so the short file does
     * not matter */
    fds[0] = fa;
    CHECK_RC(ns_worker_submit_files(w, &job, in, fds, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write)))
        CHECK_RC(res.status, NS_OK);
    ns_worker_result_release(&res);
    /* and the worker goes on: the same job from memory */
    CHECK_RC(ns_worker_submit(w, &job, in, NULL, 0, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write)))
        CHECK_RC(res.status, NS_OK);
    ns_worker_result_release(&res);
    ns_job_release(&job);

    /* a kernel that writes its input (undefined, not caught on PoCL):
     * from a file as from the socket, it runs on pages of its own, and the
     * file keeps its bytes */
    static const char wr_src[] =
        "__kernel void wr(__global float *a, __global float *o)\n"
        "{ size_t i = get_global_id(0); a[i] = -1.0f; o[i] = 2.0f; }\n";
    CHECK(ftruncate(fa, 0) == 0 && pwrite(fa, a, 4096, 0) == 4096);
    s_job_src(&job, wr_src, "wr", 1024);
    s_arg_in(&job, a, 4096);
    s_arg_out(&job, 4096, 4);
    in[0].len = 4096;
    fds[0] = fr;
    CHECK_RC(ns_worker_submit_files(w, &job, in, fds, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write))) {
        CHECK_RC(res.status, NS_OK);
        if (res.status != NS_OK)
            fprintf(stderr, "  %s\n", res.error);
    }
    ns_worker_result_release(&res);
    float back[1024];
    CHECK(pread(fr, back, sizeof back, 0) == (ssize_t)sizeof back &&
          memcmp(back, a, sizeof back) == 0);
    ns_job_release(&job);
    close(fr);
    close(fa);
out:
    ns_worker_destroy(&w);
    free(a);
    free(b);
}

TEST(hostile_worker)
{
    s_hostile_case("garbage-hello", NS_ERR_CORRUPT, "malformed HELLO");
    s_hostile_case("huge-frame", NS_ERR_CORRUPT, "a frame of 4294967295");
    s_hostile_case("bad-status", NS_ERR_CORRUPT, "unknown status -12345");
    s_hostile_case("trailing", NS_ERR_CORRUPT, "malformed RESULT");
    s_hostile_case("bad-error", NS_ERR_CORRUPT, "malformed RESULT");
    s_hostile_case("short-output", NS_ERR_OPENCL, "crashed");

    /* Correct outputs plus 5 bytes: the job is delivered (with sanitized
     * text nobody asked for), the extra bytes kill that worker. */
    setenv("NS_TEST_HOSTILE", "extra-output", 1);
    ns_worker_t *w = s_worker(5000, 0);
    unsetenv("NS_TEST_HOSTILE");
    ns_job_t job;
    ns_worker_result_t res;
    char err[NS_WORKER_MAX_ERROR + 1];
    int wakeups = 0, saw_write = 0;
    if (!w)
        return;
    memset(&res, 0, sizeof res);
    s_job_src(&job, s_fill_src, "fill", 4);
    s_arg_out(&job, 16, 4);
    s_arg_u32(&job, 0);
    CHECK_RC(ns_worker_submit(w, &job, NULL, NULL, 0, err, sizeof err), NS_OK);
    if (CHECK(s_loop(w, &res, &wakeups, &saw_write)) &&
        CHECK_RC(res.status, NS_OK) && CHECK(res.outputs[0] != NULL)) {
        CHECK(res.outputs[0][0] == 0xab && res.outputs[0][15] == 0xab);
        CHECK_STR(res.error, "ok??[31mred?");
    }
    ns_worker_result_release(&res);
    usleep(100 * 1000);
    CHECK_EQ_INT(ns_worker_collect(w, &res), 0);
    ns_worker_stats_t st;
    ns_worker_stats(w, &st);
    CHECK_EQ_INT(st.protocol, 1);
    s_expect_healthy(w, 11);
    ns_job_release(&job);
    ns_worker_destroy(&w);
}

TEST(bad_exe_and_device)
{
    ns_worker_opts_t o;
    int rc = NS_OK;
    ns_worker_opts_init(&o);
    o.exe = "/nonexistent/nightshift";
    CHECK(ns_worker_new(&o, &rc) == NULL);
    CHECK_RC(rc, NS_ERR_IO);

    ns_worker_opts_init(&o);
    o.device_index = 999;
    ns_worker_t *w = ns_worker_new(&o, &rc);
    if (!CHECK(w != NULL))
        return;
    ns_job_t job;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    s_fill_job(&job, 4, 0);
    rc = ns_worker_run(w, &job, NULL, out, NULL, err, sizeof err);
    CHECK(rc != NS_OK);
    CHECK_CONTAINS(err, "device 999");
    printf("  device 999: %s\n", err);
    CHECK(ns_worker_device(w) == NULL);
    CHECK_EQ_INT(ns_worker_fd(w), -1); /* not respawned in a loop */
    ns_job_release(&job);
    ns_worker_destroy(&w);
}

/* ---- `nightshift run` ---------------------------------------------------- */

static int s_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int s_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *s_slurp(const char *path, size_t *len)
{
    uint8_t *buf = NULL;
    size_t n = 0;
    if (ns_file_read(path, 1u << 26, &buf, &n) != NS_OK)
        return NULL;
    char *s = realloc(buf, n + 1);
    if (!s) {
        free(buf);
        return NULL;
    }
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

TEST(cli_run)
{
    char bin[2048], d[1100];
    const char *env = getenv("NIGHTSHIFT_BIN");
    if (env && env[0])
        snprintf(bin, sizeof bin, "%s", env);
    else /* tests/exec -> the build directory's nightshift */
        snprintf(bin, sizeof bin, "%s/../../nightshift", s_tmp);
    snprintf(d, sizeof d, "%s/cli", s_tmp);
    if (!CHECK(access(bin, X_OK) == 0)) {
        fprintf(stderr, "  no nightshift binary at %s (set NIGHTSHIFT_BIN)\n",
                bin);
        return;
    }
    CHECK_RC(ns_mkdir_p(d, 0700), NS_OK);

    const uint32_t n = 1000;
    float a[1000], b[1000];
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)i * 1.5f;
        b[i] = 1.0f / (float)(i + 3);
    }
    char pa[1200], pb[1200], pc[1200], pj[1200], pe[1200], pk[1200];
    snprintf(pa, sizeof pa, "%s/a.bin", d);
    snprintf(pb, sizeof pb, "%s/b.bin", d);
    snprintf(pc, sizeof pc, "%s/c.bin", d);
    snprintf(pj, sizeof pj, "%s/out.json", d);
    snprintf(pe, sizeof pe, "%s/err.txt", d);
    snprintf(pk, sizeof pk, "%s/spin.cl", d);
    CHECK_RC(ns_file_write_atomic(pa, a, sizeof a, 0644), NS_OK);
    CHECK_RC(ns_file_write_atomic(pb, b, sizeof b, 0644), NS_OK);
    CHECK_RC(ns_file_write_atomic(pk, s_spin_src, strlen(s_spin_src), 0644),
             NS_OK);
    unlink(pc);

    uint64_t t0 = ns_mono_us();
    int rc = s_sh("NIGHTSHIFT_CACHE='%s/cli-cache' '%s' run --builtin "
                  "vector_add --global 1000 --arg 'in:%s' --arg 'in:%s' "
                  "--arg 'out:4000:%s' --arg u32:1000 > '%s' 2> '%s'",
                  s_tmp, bin, pa, pb, pc, pj, pe);
    printf("  nightshift run: %.0f ms\n", s_ms_since(t0));
    CHECK_EQ_INT(rc, 0);
    size_t len = 0;
    char *c = s_slurp(pc, &len);
    if (CHECK(c != NULL) && CHECK_EQ_INT(len, sizeof a)) {
        int ok = 1;
        for (uint32_t i = 0; i < n && ok; i++) {
            float v;
            memcpy(&v, c + 4 * i, 4);
            ok = v == a[i] + b[i];
        }
        CHECK(ok);
    }
    free(c);
    char *text = s_slurp(pj, NULL);
    CHECK_CONTAINS(text, "build");
    CHECK_CONTAINS(text, "wrote");
    free(text);

    /* Again with --json: the program now comes from the cache. */
    rc = s_sh("NIGHTSHIFT_CACHE='%s/cli-cache' '%s' run --json --builtin "
              "vector_add --global 1000 --arg 'in:%s' --arg 'in:%s' "
              "--arg 'out:4000:%s' --arg u32:1000 > '%s' 2> '%s'",
              s_tmp, bin, pa, pb, pc, pj, pe);
    CHECK_EQ_INT(rc, 0);
    text = s_slurp(pj, NULL);
    CHECK_CONTAINS(text, "\"status\": \"ok\"");
    CHECK_CONTAINS(text, "\"cache_hit\": true");
    CHECK_CONTAINS(text, "\"timings_ms\"");
    CHECK(text && text[0] == '{');
    free(text);

    /* Failures: exit 1 or 2 with one clear line on stderr. */
    rc = s_sh("'%s' run --builtin vector_add --global 1000 --arg "
              "'in:%s/missing.bin' --arg 'in:%s' --arg 'out:4000:%s' "
              "--arg u32:1000 > /dev/null 2> '%s'",
              bin, d, pb, pc, pe);
    CHECK_EQ_INT(rc, 1);
    text = s_slurp(pe, NULL);
    CHECK_CONTAINS(text, "not found");
    free(text);
    rc = s_sh("'%s' run --builtin vector_add --global 1000 --bogus "
              "> /dev/null 2> '%s'",
              bin, pe);
    CHECK_EQ_INT(rc, 2);
    text = s_slurp(pe, NULL);
    CHECK_CONTAINS(text, "--bogus");
    free(text);
    rc = s_sh("'%s' run --builtin vector_add --global 1000 --local 3 "
              "--arg 'in:%s' --arg 'in:%s' --arg 'out:4000:%s' --arg u32:1000 "
              "> /dev/null 2> '%s'",
              bin, pa, pb, pc, pe);
    CHECK_EQ_INT(rc, 2);
    text = s_slurp(pe, NULL);
    CHECK_CONTAINS(text, "invalid job");
    free(text);
    t0 = ns_mono_us();
    rc = s_sh("NIGHTSHIFT_CACHE='%s/cli-cache' '%s' run --json --kernel '%s' "
              "--entry spin --global 4 --arg 'out:16:%s' --timeout-ms 1500 > "
              "'%s' 2> '%s'",
              s_tmp, bin, pk, pc, pj, pe);
    printf("  nightshift run (spin, 1500 ms limit): %.0f ms\n", s_ms_since(t0));
    CHECK_EQ_INT(rc, 1);
    text = s_slurp(pe, NULL);
    CHECK_CONTAINS(text, "ran past its 1500 ms limit");
    free(text);
    text = s_slurp(pj, NULL);
    CHECK_CONTAINS(text, "\"status\": \"failed\"");
    free(text);
}

/* ---- the provider's self-check ------------------------------------------ */

/* Kernels no requester's check can pass: the provider's worker refuses
 * their outputs (NS_ERR_PROOF) instead of signing them, and passes honest
 * ones. */
static const char s_reads_out_src[] =
    "__kernel void acc(__global const uint *in, __global uint *out)\n"
    "{ size_t i = get_global_id(0); out[i] += in[i]; }\n";
/* each work-item takes the next free slot: a permutation in the launch,
 * slot 0 for every unit re-run alone */
static const char s_scatter_src[] =
    "__kernel void take(__global uint *out, __global volatile uint *next)\n"
    "{ out[atomic_inc(next) % get_global_size(0)] =\n"
    "      (uint)get_global_id(0) + 1u; }\n";

TEST(self_check)
{
    ns_worker_opts_t o;
    int rc = NS_OK;
    ns_worker_opts_init(&o);
    o.cache_dir = s_cache;
    o.self_check = 4;
    ns_worker_t *w = ns_worker_new(&o, &rc);
    if (!CHECK(w != NULL))
        return;
    /* honest jobs pass, outputs unchanged */
    s_expect_healthy(w, 7);

    uint32_t in[4096];
    for (uint32_t i = 0; i < 4096; i++)
        in[i] = i * 3 + 1;
    ns_job_t job;
    s_job_src(&job, s_reads_out_src, "acc", 4096);
    s_arg_in(&job, in, sizeof in);
    s_arg_out(&job, sizeof in, 4);
    ns_input_t inputs[NS_MAX_ARGS] = {{in, sizeof in, true}};
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    rc = ns_worker_run(w, &job, inputs, out, NULL, err, sizeof err);
    CHECK_RC(rc, NS_ERR_PROOF);
    CHECK_CONTAINS(err, "cannot be verified");
    CHECK(out[1] == NULL);
    printf("  reads its outputs: %s\n", err);
    ns_job_release(&job);

    s_job_src(&job, s_scatter_src, "take", 4096);
    s_arg_out(&job, 4096 * 4, 4);
    s_arg_out(&job, 4, 0);
    s_expect_fail(w, &job, NS_ERR_PROOF, "cannot be verified");
    ns_job_release(&job);
    s_expect_healthy(w, 9); /* and the worker goes on */
    ns_worker_destroy(&w);

    /* without the option (nightshift run) such a kernel just runs */
    w = s_worker(0, 0);
    s_job_src(&job, s_reads_out_src, "acc", 4096);
    s_arg_in(&job, in, sizeof in);
    s_arg_out(&job, sizeof in, 4);
    rc = ns_worker_run(w, &job, inputs, out, NULL, err, sizeof err);
    CHECK_RC(rc, NS_OK);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        free(out[i]);
    ns_job_release(&job);
    ns_worker_destroy(&w);
}

/* ---- main --------------------------------------------------------------- */

#define TIMED(name)                                                            \
    do {                                                                       \
        uint64_t t0_ = ns_mono_us();                                           \
        RUN(name);                                                             \
        printf("%s: %.0f ms\n", #name, s_ms_since(t0_));                       \
        fflush(stdout);                                                        \
    } while (0)

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "worker") == 0) {
        const char *hostile = getenv("NS_TEST_HOSTILE");
        if (hostile && hostile[0])
            return s_hostile_main(hostile, argc - 1, argv + 1);
        if (sodium_init() < 0)
            return 1;
        return ns_worker_main(argc - 1, argv + 1);
    }
    if (sodium_init() < 0)
        return 1;
#if defined(__SANITIZE_ADDRESS__)
    /* An ASan worker aborts when malloc fails unless told otherwise; the
     * out-of-memory test wants the NULL a normal build gets. */
    char asan[1024];
    const char *prev = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%sallocator_may_return_null=1",
             prev ? prev : "", prev && prev[0] ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
#endif
    ns_log_threshold = NS_LOG_ERROR; /* expected warnings: crashes... */
    const char *tmp = getenv("NS_TEST_TMP");
    snprintf(s_tmp, sizeof s_tmp, "%s", tmp && tmp[0] ? tmp : "/tmp");
    snprintf(s_cache, sizeof s_cache, "%s/sandbox-cache", s_tmp);
    if (ns_mkdir_p(s_cache, 0700) != NS_OK) {
        fprintf(stderr, "cannot create %s\n", s_cache);
        return 1;
    }

    TIMED(vector_add_matches_runner);
    TIMED(huge_source_refused);
    TIMED(syntax_error_gives_build_log);
    TIMED(infinite_loop_times_out);
    TIMED(crashing_kernels);
    TIMED(too_much_memory);
    TIMED(worker_out_of_memory);
    TIMED(non_blocking);
    TIMED(inputs_from_files);
    TIMED(hostile_worker);
    TIMED(bad_exe_and_device);
    TIMED(self_check);
    TIMED(cli_run);
    return ns_test_finish("exec_sandbox");
}
