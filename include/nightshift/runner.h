/* runner.h - run a job on one OpenCL device, in this process (exec layer).
 *
 * The node never calls this directly: it runs inside the sandboxed worker
 * process (worker.h). Tests, `nightshift run` (through the worker too) and
 * benchmarks use it.
 *
 * Programs are compiled once per (source hash, device, options, driver
 * version) and cached as binaries in cache_dir (one file per key, written
 * atomically; a corrupt cache file is ignored and rebuilt).
 */
#ifndef NIGHTSHIFT_RUNNER_H
#define NIGHTSHIFT_RUNNER_H

#include "nightshift/devices.h"
#include "nightshift/err.h"
#include "nightshift/job.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ns_runner ns_runner_t;

/* Input data of the IN arguments, indexed by argument position (entries for
 * other kinds are ignored). len must equal args[i].size and the content
 * must hash to args[i].hash (checked). */
typedef struct {
    const void *data;
    size_t len;
} ns_input_t;

typedef struct {
    uint64_t build_us;    /* compile or cache load */
    uint64_t upload_us;   /* inputs to the device */
    uint64_t run_us;      /* kernel execution (event profiling) */
    uint64_t download_us; /* outputs back */
    bool cache_hit;       /* program came from the binary cache */
} ns_timings_t;

/* Open device number device_index (in ns_devices_probe order). cache_dir
 * may be NULL (no binary cache). NULL on failure with *err set. */
ns_runner_t *ns_runner_new(uint32_t device_index, const char *cache_dir,
                           int *err);
void ns_runner_destroy(ns_runner_t **r);
const ns_device_t *ns_runner_device(const ns_runner_t *r);

/* Run the whole NDRange. outputs[i] (for each OUT argument i) must point to
 * args[i].size writable bytes; other entries are ignored. err gets the
 * build log's first lines on a compile error (NS_ERR_OPENCL). */
int ns_runner_run(ns_runner_t *r, const ns_job_t *job,
                  const ns_input_t *inputs, uint8_t **outputs,
                  ns_timings_t *t, char *err, size_t errlen) NS_MUST_CHECK;

/* Re-run only the given items (each one launch with a global offset) and
 * write their outputs, n * ns_job_item_bytes(job) bytes, to out in the
 * order given. */
int ns_runner_run_items(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, const uint64_t *items,
                        uint32_t n, uint8_t *out, ns_timings_t *t, char *err,
                        size_t errlen) NS_MUST_CHECK;

/* Built-in kernels embedded from the kernels folder at build time. */
typedef struct {
    const char *name;    /* e.g. "sgemm" */
    const char *entry;   /* default entry point */
    const char *source;  /* OpenCL C text */
    size_t source_len;
    const char *summary; /* one line for --help */
} ns_builtin_t;

const ns_builtin_t *ns_builtin_find(const char *name);
const ns_builtin_t *ns_builtin_list(size_t *n);

#endif
