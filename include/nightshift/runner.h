/* runner.h - run a job on one OpenCL device, in this process (exec layer).
 *
 * The node never calls this directly: it runs inside the sandboxed worker
 * process (worker.h). Tests, `nightshift run` (through the worker too) and
 * benchmarks use it.
 *
 * Programs are compiled once per (source hash, device, options, driver
 * version) and cached as binaries in cache_dir (one file per key, written
 * atomically; a corrupt cache file is ignored and rebuilt). The last two
 * programs are also kept in memory (a job's full-run build and its
 * re-run build), so repeated runs of one job skip even the cache file.
 *
 * Memory: on devices that share host memory (CPUs, integrated GPUs) input
 * and full-run output buffers wrap the caller's memory (CL_MEM_USE_HOST_PTR,
 * no copies); elsewhere inputs are written to and outputs read from device
 * buffers. run_units works on the caller's full-size output buffers too
 * (in place, or copied to the device and back).
 * NS_RUNNER_COPY_BUFFERS=1 in the environment (read by ns_runner_new)
 * forces device buffers everywhere: the discrete-GPU path, for tests.
 *
 * Calls on one runner from several threads take turns (a lock held for
 * each ns_runner_run, ns_runner_run_units and ns_runner_lost).
 *
 * Errors of ns_runner_run and ns_runner_run_units, err saying why in one
 * line (a build failure: "build failed: " and the first lines of the log):
 *   NS_ERR_INVAL     the descriptor fails ns_job_validate, an input's length
 *                    differs from its argument's size, the entry point is
 *                    missing or takes another number of arguments, a unit
 *                    index is out of range, an OUT buffer missing
 *   NS_ERR_CORRUPT   an input or the source does not match its hash
 *   NS_ERR_VERSION   a built-in's embedded text differs from the job's
 *                    source hash (the two sides run other versions)
 *   NS_ERR_NOTFOUND  no built-in of that name
 *   NS_ERR_TOOBIG    a buffer over the device's largest allocation, all
 *                    buffers over its global memory, local memory or a local
 *                    size over the device's or kernel's limits
 *   NS_ERR_OPENCL    build failure (err: the first lines of the build log)
 *                    or a failing OpenCL call (err names it and the code)
 *   NS_ERR_NOMEM
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
 * must hash to args[i].hash (checked, unless verified). data is only read,
 * and must stay unchanged during the call (the device may read it in
 * place). */
typedef struct {
    const void *data;
    size_t len;
    bool verified; /* the caller already knows data hashes to args[i].hash
                      (it hashed it itself, e.g. the requester who built the
                      job): skip the hash, which costs more than a spot
                      check (BLAKE2b ~1 GB/s vs. a few items) */
} ns_input_t;

typedef struct {
    uint64_t build_us;    /* compile or cache load (wall clock) */
    uint64_t upload_us;   /* inputs to the device: buffer set-up (wall
                             clock) plus write commands (events) */
    uint64_t run_us;      /* kernel execution, summed over launches (event
                             profiling) */
    uint64_t download_us; /* outputs back (read or map commands, events) */
    bool cache_hit;       /* program came from the binary cache (file or
                             the runner's last program), not a compile */
} ns_timings_t;

/* Open device number device_index (in ns_devices_probe order): context
 * and an in-order queue with profiling. cache_dir may be NULL (no binary
 * cache); it is created (0700) if missing. NULL on failure with *err set:
 * NS_ERR_NOTFOUND (no such device), NS_ERR_OPENCL, NS_ERR_IO, NS_ERR_NOMEM.
 * Once a process has used OpenCL it must not fork and use it in the child
 * (devices.h). */
ns_runner_t *ns_runner_new(uint32_t device_index, const char *cache_dir,
                           int *err);
void ns_runner_destroy(ns_runner_t **r);
const ns_device_t *ns_runner_device(const ns_runner_t *r);

/* After a call failed: has the device's context stopped working (a kernel
 * that faulted on a GPU poisons it, and every later call fails)? Such a
 * runner only fails from then on: the worker process that holds it exits
 * so that the next job gets a new one. */
bool ns_runner_lost(ns_runner_t *r);

/* Run the whole NDRange. outputs[i] (for each OUT argument i) must point to
 * args[i].size writable bytes; other entries are ignored. err gets the
 * build log's first lines on a compile error (NS_ERR_OPENCL). t may be
 * NULL. */
int ns_runner_run(ns_runner_t *r, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t **outputs, ns_timings_t *t, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* Launch-faithful re-execution: run only the given units (job.h: a
 * work-group when the job has a local size, else a work-item), one launch
 * each, in the order given, on the caller's full-size output buffers:
 * outputs[i] (args[i].size bytes for each OUT argument i) is the buffer's
 * content before the first launch and gets its content after the last.
 * Bytes no launched unit writes keep their value. Units may repeat.
 *
 * Unit u is launched with the job's dims, a global offset at its origin,
 * a global size of one unit and the job's local size (1 per dimension
 * without one), from a build of the job's source behind the prelude of
 * ns_runner_prelude() with -D NS_RERUN_G0/G1/G2 = the full launch's
 * global sizes (1 beyond dims). So get_global_size, get_num_groups,
 * get_group_id, get_global_offset (0), get_global_linear_id and
 * get_group_linear_id return what they return in the full launch, and
 * get_global_id, get_local_id, get_local_size, get_enqueued_local_size,
 * get_local_linear_id and get_work_dim need no help. Barriers and
 * __local memory see the whole group. Without a local size the full
 * launch's group shape is the runtime's choice: a kernel that depends on
 * it cannot be re-run faithfully (the re-run uses groups of one).
 * The re-run build is compiled once per job and cached like other
 * programs. t may be NULL. */
int ns_runner_run_units(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, const uint64_t *units,
                        uint32_t n, uint8_t **outputs, ns_timings_t *t,
                        char *err, size_t errlen) NS_MUST_CHECK;

/* Memory for a job buffer that a host-unified device (PoCL) wraps in place
 * (CL_MEM_USE_HOST_PTR): n bytes (at least 1), page-aligned (PoCL copies a
 * misaligned host pointer). From NS_BUF_HUGE_MIN bytes up it is 2 MiB
 * aligned and asks the kernel for transparent huge pages
 * (madvise(MADV_HUGEPAGE); a no-op where THP is off): a kernel that
 * strides across rows of a large matrix (sgemm reading B) touches a new
 * 4 KiB page a row and misses the TLB on each, where its prefetches do
 * next to nothing (docs/ARCHITECTURE.md, the sandbox worker). Free with
 * free(). NULL when out of memory. */
#define NS_BUF_HUGE_MIN (UINT64_C(4) << 20)
void *ns_buf_alloc(uint64_t n);

/* ns_buf_alloc's memory, kept for the next user (thread-safe, one pool
 * per process): a fresh buffer costs its pages, which the kernel zeroes
 * on their first touch (an SGEMM 2048's 48 MiB in the worker: a third of
 * its kernel time on the 2-core test VM), and the same job shapes come
 * again and again. ns_buf_get(n) takes a kept buffer of n bytes (its
 * contents: whatever its last user left), and when none is kept frees
 * every kept one before it allocates, so
 * that what is kept never stands beside a new allocation (a worker's
 * RLIMIT_AS). ns_buf_put(p, n) gives back a buffer of ns_buf_get(n) (8
 * kept at most, 256 MiB together; freed beyond). NULL-safe. */
void *ns_buf_get(uint64_t n);
void ns_buf_put(void *p, uint64_t n);

/* The prelude text of re-run builds (static, NUL-terminated). */
const char *ns_runner_prelude(void);

/* Built-in kernels embedded from the kernels folder at build time. */
typedef struct {
    const char *name;   /* e.g. "sgemm" */
    const char *entry;  /* default entry point */
    const char *source; /* OpenCL C text */
    size_t source_len;
    const char *summary; /* one line for --help */
} ns_builtin_t;

/* A built-in by name (the kernels/ file stem), NULL if unknown. The entry
 * point has the same name; the summary is the first line of the file's top
 * comment. Entries are static: never freed. */
const ns_builtin_t *ns_builtin_find(const char *name);
/* All built-ins (sorted by name); *n gets the count. */
const ns_builtin_t *ns_builtin_list(size_t *n);

#endif
