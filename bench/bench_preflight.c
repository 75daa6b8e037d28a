/* bench_preflight.c - the requester's pre-flight (ns_preflight_sample) of
 * an sgemm job, on the runner's own memory path and on the discrete-GPU
 * path (NS_RUNNER_COPY_BUFFERS=1: device buffers, copies both ways), in
 * one run, the figures next to each other.
 *
 * The pre-flight re-runs each sampled unit four times on the caller's
 * full-size buffers, so on a discrete device its cost is the buffer
 * traffic, not the kernel: the full job's run is printed next to it.
 * On a GPU both rows take the copy path (the device is not host-unified).
 *
 * Figures only: it never passes or fails on a number.
 *
 *   bench_preflight [N [K [REPS [BUILTIN [LOCAL_Y]]]]]
 *     N        matrix size, a multiple of 64 (default 1024)
 *     K        units sampled (default 8, the pre-flight's most)
 *     REPS     timed pre-flights per path, best and mean (default 3)
 *     BUILTIN  sgemm_gpu (default) or sgemm
 *     LOCAL_Y  work-group rows, local = (1, LOCAL_Y) (default 64)
 *   NS_BENCH_DEVICE=I picks the OpenCL device (default 0).
 */
#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/preflight.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"

#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_ERR_LEN 1024

typedef struct {
    const char *name; /* what the row says */
    const char *copy; /* NS_RUNNER_COPY_BUFFERS, NULL: unset */
    double best_ms, mean_ms, full_ms;
    uint64_t unit_ns;
} s_path_t;

/* One path: a runner opened under its environment, one untimed pre-flight
 * (builds, first touch), then reps timed ones and one full run. */
static int s_measure(s_path_t *p, uint32_t device, const char *cache,
                     const ns_job_t *job, const ns_input_t *inputs,
                     uint8_t **outputs, uint32_t k, uint32_t reps)
{
    char err[S_ERR_LEN];
    int rc = NS_OK;
    if (p->copy)
        setenv("NS_RUNNER_COPY_BUFFERS", p->copy, 1);
    else
        unsetenv("NS_RUNNER_COPY_BUFFERS");
    ns_runner_t *r = ns_runner_new(device, cache, &rc);
    if (!r) {
        fprintf(stderr, "bench_preflight: cannot open device %u: %s\n", device,
                ns_strerror(rc));
        return rc;
    }
    double sum = 0;
    p->best_ms = 0;
    for (uint32_t i = 0; i <= reps; i++) {
        uint64_t t0 = ns_mono_us();
        rc = ns_preflight_sample(r, job, inputs, k, &p->unit_ns, err,
                                 sizeof err);
        double ms = (double)(ns_mono_us() - t0) / 1e3;
        if (rc != NS_OK) {
            fprintf(stderr, "bench_preflight: %s: pre-flight: %s: %s\n",
                    p->name, ns_strerror(rc), err);
            goto out;
        }
        if (i == 0)
            continue; /* builds the re-run program, touches the buffers */
        sum += ms;
        if (i == 1 || ms < p->best_ms)
            p->best_ms = ms;
    }
    p->mean_ms = reps ? sum / reps : 0;
    ns_timings_t t;
    for (int i = 0; i < 2; i++) { /* the second: program already built */
        uint64_t t0 = ns_mono_us();
        rc = ns_runner_run(r, job, inputs, outputs, &t, err, sizeof err);
        p->full_ms = (double)(ns_mono_us() - t0) / 1e3;
        if (rc != NS_OK) {
            fprintf(stderr, "bench_preflight: %s: full run: %s: %s\n", p->name,
                    ns_strerror(rc), err);
            goto out;
        }
    }
out:
    ns_runner_destroy(&r);
    return rc;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1024;
    uint32_t k = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 8;
    uint32_t reps = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 3;
    const char *builtin = argc > 4 ? argv[4] : "sgemm_gpu";
    uint32_t local_y = argc > 5 ? (uint32_t)strtoul(argv[5], NULL, 10) : 64;
    const char *dev_env = getenv("NS_BENCH_DEVICE");
    uint32_t device = dev_env ? (uint32_t)strtoul(dev_env, NULL, 10) : 0;
    if (n < 64 || n % 64 != 0 || k == 0 || reps == 0 || local_y == 0) {
        fprintf(stderr, "usage: bench_preflight [N (multiple of 64) [K [REPS "
                        "[BUILTIN [LOCAL_Y]]]]]\n");
        return 2;
    }
    const char *saved = getenv("NS_RUNNER_COPY_BUFFERS");
    char *saved_copy = saved ? strdup(saved) : NULL;
    uint64_t elems = (uint64_t)n * n;
    float *a = ns_buf_alloc(elems * sizeof(float));
    float *b = ns_buf_alloc(elems * sizeof(float));
    uint8_t *outputs[NS_MAX_ARGS] = {0};
    outputs[2] = ns_buf_alloc(elems * sizeof(float));
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    ns_job_init(&job);
    int rc = NS_ERR_NOMEM;
    if (!a || !b || !outputs[2])
        goto out;
    ns_bench_fill_floats(a, elems, 1);
    ns_bench_fill_floats(b, elems, 2);
    rc = ns_bench_sgemm_job(&job, inputs, a, b, n, builtin, local_y);
    if (rc != NS_OK)
        goto out;

    s_path_t paths[2] = {
        {.name = "runner default", .copy = NULL},
        {.name = "COPY_BUFFERS=1", .copy = "1"},
    };
    for (int i = 0; i < 2 && rc == NS_OK; i++)
        rc = s_measure(&paths[i], device, NULL, &job, inputs, outputs, k, reps);
    if (rc != NS_OK)
        goto out;
    double mib = (double)elems * sizeof(float) / (1 << 20);
    printf("pre-flight of %s n=%u (inputs 2 x %.0f MiB, output %.0f MiB), "
           "%u units x 4 runs, best/mean of %u, device %u\n",
           builtin, n, mib, mib, k, reps, device);
    printf("%-16s %12s %12s %14s %14s\n", "path", "best ms", "mean ms",
           "full run ms", "unit run us");
    for (int i = 0; i < 2; i++)
        printf("%-16s %12.1f %12.1f %14.1f %14.1f\n", paths[i].name,
               paths[i].best_ms, paths[i].mean_ms, paths[i].full_ms,
               (double)paths[i].unit_ns / 1e3);
    printf("copy / default   %12.2fx\n",
           paths[0].best_ms > 0 ? paths[1].best_ms / paths[0].best_ms : 0.0);
out:
    if (saved_copy)
        setenv("NS_RUNNER_COPY_BUFFERS", saved_copy, 1);
    free(saved_copy);
    ns_job_release(&job);
    free(outputs[2]);
    free(a);
    free(b);
    return rc == NS_OK ? 0 : 1;
}
