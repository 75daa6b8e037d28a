/* bench_sandbox.c - the requester's pre-flight in its own process (as the
 * requester ran it until issue 24: ns_preflight_time then
 * ns_preflight_sample on an in-process runner) next to the same through a
 * warm sandboxed worker (ns_worker_preflight, TIME then SAMPLE, as the
 * requester runs it now), in one run, alternating, for an SGEMM and a
 * 1,024-float vector add. Figures only: it never passes or fails on a
 * number (goal, issue 24: the worker costs at most 5 % over in-process).
 *
 *   bench_sandbox [N [REPS]]
 *     N     SGEMM size, a multiple of 64 (default 2048)
 *     REPS  timed pre-flights per path and job, median (default 7)
 *   NIGHTSHIFT_BIN: the nightshift binary that serves `worker`
 *   (default: build/nightshift beside this bench's folder).
 */
#include "nightshift/job.h"
#include "nightshift/policy.h"
#include "nightshift/preflight.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/worker.h"
#include "nightshift/worker_frame.h"

#include "bench_common.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_ERR_LEN 2048
#define S_MAX_REPS 64

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double s_median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, s_cmp);
    return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

static int s_builtin_job(ns_job_t *job, const char *name)
{
    const ns_builtin_t *bi = ns_builtin_find(name);
    if (!bi) {
        fprintf(stderr, "bench_sandbox: no built-in '%s'\n", name);
        return NS_ERR_NOTFOUND;
    }
    ns_job_init(job);
    snprintf(job->builtin, sizeof job->builtin, "%s", bi->name);
    snprintf(job->entry, sizeof job->entry, "%s", bi->entry);
    ns_hash(job->source_hash, bi->source, bi->source_len);
    job->det = NS_DET_EXACT;
    job->item_kind = NS_ITEM_WORK_ITEM;
    return NS_OK;
}

static int s_vadd(ns_job_t *job, ns_input_t *in, const float *a, uint32_t n)
{
    int rc = s_builtin_job(job, "vector_add");
    if (rc != NS_OK)
        return rc;
    job->dims = 1;
    job->global[0] = n;
    job->n_args = 4;
    ns_bench_arg_in(job, in, 0, a, n * sizeof(float));
    ns_bench_arg_in(job, in, 1, a, n * sizeof(float));
    job->args[2].kind = NS_ARG_OUT;
    job->args[2].size = n * sizeof(float);
    job->args[2].item_bytes = sizeof(float);
    job->args[3].kind = NS_ARG_U32;
    job->args[3].v.u32 = n;
    return NS_OK;
}

/* One pre-flight as the requester ran it in its own process. */
static int s_inproc(ns_runner_t *r, const ns_job_t *job, const ns_input_t *in,
                    char *err)
{
    uint64_t unit_ns;
    int rc = ns_preflight_time(r, job, in, NS_POLICY_PREFLIGHT_UNITS, &unit_ns,
                               err, S_ERR_LEN);
    if (rc == NS_OK)
        rc = ns_preflight_sample(r, job, in, NS_POLICY_PREFLIGHT_UNITS, NULL,
                                 err, S_ERR_LEN);
    return rc;
}

/* The same in the sandbox, as the requester runs it now: TIME (the build
 * and argument check on their marker) then SAMPLE, two requests, the
 * inputs as read-only descriptors of their files (the requester's blobs). */
static int s_sandboxed(ns_worker_t *w, const ns_job_t *job,
                       const ns_input_t *in, const int *fds, char *err)
{
    uint64_t unit_ns;
    int rc = ns_worker_preflight(w, job, in, fds, NS_PF_CHECK | NS_PF_TIME,
                                 NS_POLICY_PREFLIGHT_UNITS, NULL, NULL,
                                 &unit_ns, err, S_ERR_LEN);
    if (rc == NS_OK)
        rc = ns_worker_preflight(w, job, in, fds, NS_PF_SAMPLE,
                                 NS_POLICY_PREFLIGHT_UNITS, NULL, NULL, NULL,
                                 err, S_ERR_LEN);
    return rc;
}

/* Each input of job into a file of dir, opened read-only, as a blob. */
static int s_input_files(const char *dir, const ns_job_t *job,
                         const ns_input_t *in, int *fds)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        fds[i] = -1;
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (job->args[i].kind != NS_ARG_IN)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/in%u", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(in[i].data, 1, in[i].len, f) != in[i].len ||
            fclose(f) != 0)
            return NS_ERR_IO;
        fds[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0)
            return NS_ERR_IO;
    }
    return NS_OK;
}

static int s_row(const char *what, const char *dir, ns_runner_t *r,
                 ns_worker_t *w, const ns_job_t *job, const ns_input_t *in,
                 uint32_t reps)
{
    double a[S_MAX_REPS], b[S_MAX_REPS];
    char err[S_ERR_LEN];
    int fds[NS_MAX_ARGS];
    if (s_input_files(dir, job, in, fds) != NS_OK) {
        fprintf(stderr, "bench_sandbox: cannot write the inputs in %s\n", dir);
        return NS_ERR_IO;
    }
    int rc = NS_OK;
    for (uint32_t i = 0; i <= reps; i++) {
        uint64_t t0 = ns_mono_us();
        rc = s_inproc(r, job, in, err);
        uint64_t t1 = ns_mono_us();
        if (rc == NS_OK)
            rc = s_sandboxed(w, job, in, fds, err);
        uint64_t t2 = ns_mono_us();
        if (rc != NS_OK) {
            fprintf(stderr, "bench_sandbox: %s: %s: %s\n", what,
                    ns_strerror(rc), err);
            break;
        }
        if (i == 0)
            continue; /* builds, first touches */
        a[i - 1] = (double)(t1 - t0) / 1e3;
        b[i - 1] = (double)(t2 - t1) / 1e3;
    }
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (rc != NS_OK)
        return rc;
    double ma = s_median(a, reps), mb = s_median(b, reps);
    printf("%-26s %12.2f %12.2f %8.3fx\n", what, ma, mb, ma > 0 ? mb / ma : 0);
    return NS_OK;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 2048;
    uint32_t reps = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 7;
    if (n < 64 || n % 64 || reps < 1 || reps > S_MAX_REPS) {
        fprintf(stderr, "usage: bench_sandbox [N (multiple of 64)] [REPS "
                        "1..64]\n");
        return 2;
    }
    char exe[PATH_MAX];
    const char *env = getenv("NIGHTSHIFT_BIN");
    if (env)
        snprintf(exe, sizeof exe, "%s", env);
    else {
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[len > 0 ? len : 0] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        size_t used = strlen(exe);
        snprintf(exe + used, sizeof exe - used, "/../nightshift");
    }
    char cache[] = "/tmp/bench_sandbox-XXXXXX";
    if (!mkdtemp(cache)) {
        perror("bench_sandbox: mkdtemp");
        return 1;
    }
    int rc = NS_OK;
    ns_runner_t *r = ns_runner_new(0, cache, &rc);
    ns_worker_opts_t o;
    ns_worker_opts_init(&o);
    o.exe = exe;
    o.cache_dir = cache;
    o.timeout_ms = 600000;
    ns_worker_t *w = r ? ns_worker_new(&o, &rc) : NULL;
    if (!r || !w) {
        fprintf(stderr, "bench_sandbox: %s (worker binary %s)\n",
                ns_strerror(rc), exe);
        return 1;
    }
    uint64_t elems = (uint64_t)n * n;
    float *a = malloc(elems * sizeof *a), *b = malloc(elems * sizeof *b);
    if (!a || !b)
        return 1;
    ns_bench_fill_floats(a, elems, 1);
    ns_bench_fill_floats(b, elems, 2);
    printf("pre-flight (time + sample of %d units), medians of %u, ms\n",
           NS_POLICY_PREFLIGHT_UNITS, reps);
    printf("%-26s %12s %12s %9s\n", "job", "in-process", "sandboxed", "ratio");
    ns_job_t job;
    ns_input_t in[NS_MAX_ARGS];
    char what[64];
    memset(in, 0, sizeof in);
    snprintf(what, sizeof what, "sgemm %u", n);
    if (ns_bench_sgemm_job(&job, in, a, b, n, "sgemm", 32) == NS_OK)
        rc = s_row(what, cache, r, w, &job, in, reps);
    ns_job_release(&job);
    memset(in, 0, sizeof in);
    if (rc == NS_OK && s_vadd(&job, in, a, 1024) == NS_OK)
        rc = s_row("vector_add 1024", cache, r, w, &job, in, reps);
    ns_job_release(&job);
    ns_worker_destroy(&w);
    ns_runner_destroy(&r);
    free(a);
    free(b);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_sandbox: could not remove %s\n", cache);
    return rc == NS_OK ? 0 : 1;
}
