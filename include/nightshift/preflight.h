/* preflight.h - what `submit` checks on the requester's own device
 * (exec layer): 1 and 2, and the timing of a few units (the work
 * estimate), before any credit moves; 3 while the job is auctioned and
 * run, its verdict before any spot check (a job that fails it is
 * cancelled: award withdrawn, escrow refunded, no one slashed).
 *
 *  1. The kernel builds (the build log names the user's file, not the
 *     runtime's temporary copy).
 *  2. The job's arguments fit the kernel's signature, read from the
 *     program itself (-cl-kernel-arg-info): the count; IN and OUT are
 *     __global (or __constant for IN) pointers, OUT not const; LOCAL a
 *     __local pointer; each scalar a private value of the size its kind
 *     says (u32/i32: 4 bytes, u64/i64: 8, f32: float, f64: double).
 *     Images, samplers, pipes and vector scalars (float4...) are refused
 *     with a one-line reason: the job format cannot carry them.
 *
 *  3. A sample of units, each re-run alone over outputs filled with 0x00,
 *     again over 0x00, over 0xFF and over 0x5A (ns_preflight_sample): a
 *     byte the unit writes has one value after every run, one it does not
 *     keeps each fill; what a unit
 *     writes must not depend on what the output held before (a kernel
 *     that reads its outputs, out[i] += ..., or adds to a total with
 *     global atomics across groups, cannot be verified unit by unit), two
 *     runs must write the same bytes (non-determinism: races, uninitialised
 *     memory), and no two units may write the same byte (the full launch
 *     would race). A shard (job.h) samples its own units, and each must
 *     write only inside its row's slice of every output (assembly takes
 *     those slices). Such kernels are refused with the reason.
 *
 * Every error is one line in err, as `submit` prints it.
 */
#ifndef NIGHTSHIFT_PREFLIGHT_H
#define NIGHTSHIFT_PREFLIGHT_H

#include "nightshift/err.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t kernel_args; /* the kernel's parameter count */
    uint64_t build_us;    /* compile on our device */
} ns_preflight_t;

/* Build the job's kernel on device device_index and check its arguments.
 * source_name names the source in messages ("mlp.cl"; NULL: the
 * built-in's name or "<source>"). NS_ERR_OPENCL: does not build (err: the
 * log's first lines, paths replaced by source_name); NS_ERR_INVAL: the
 * arguments do not fit (err says which and why); NS_ERR_NOTFOUND: no
 * such device or built-in; NS_ERR_NOMEM. */
int ns_preflight_check(uint32_t device_index, const ns_job_t *job,
                       const char *source_name, ns_preflight_t *res, char *err,
                       size_t errlen) NS_MUST_CHECK;
/* ns_preflight_check, once: a check that passed leaves a marker in
 * <cache_dir>/checked named by a hash of all it depends on (the device's
 * name and driver and OpenCL versions, the program's built-in name,
 * source hash and options, each step's entry and argument kinds), and
 * the same check again is NS_OK at once (*res zeroed). Building from
 * source costs tens of ms each time (PoCL's clang preprocesses its
 * OpenCL headers), where the runner loads the same kernel from its
 * binary cache. cache_dir NULL or "": no markers. */
int ns_preflight_check_cached(const char *cache_dir, uint32_t device_index,
                              const ns_job_t *job, const char *source_name,
                              ns_preflight_t *res, char *err,
                              size_t errlen) NS_MUST_CHECK;

/* Up to k units spread over the job (first, last, between), each run
 * alone four times as described above, on r. NS_ERR_INVAL with the
 * reason when the kernel cannot be verified unit by unit; runner errors
 * as they are. Costs 4 k unit runs and as many passes over the outputs
 * (a race found re-runs the earlier sampled units to name the one it
 * races with), and memory for two output-sized sets and two bitmaps
 * (2.25 times the outputs): each run is compared with the first as it
 * comes.
 * *unit_run_ns (may be NULL) gets the mean over the sampled units of each
 * one's fastest kernel time (0 when the runtime gave none): the job's
 * work estimate when the user gave none. */
int ns_preflight_sample(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, uint32_t k,
                        uint64_t *unit_run_ns, char *err,
                        size_t errlen) NS_MUST_CHECK;

/* The same units as ns_preflight_sample's, each run four times over
 * zeroed outputs and timed, nothing compared: *unit_run_ns as it gives
 * (the mean of each unit's fastest run), at the cost of 4 k unit runs
 * and one output-sized set, no fills or passes over the outputs. The
 * requester takes its work estimate from this and announces the job while the
 * checks of ns_preflight_sample go on (their verdict comes before any spot
 * check). Runner errors as they are (a kernel that does not build:
 * NS_ERR_OPENCL). */
int ns_preflight_time(ns_runner_t *r, const ns_job_t *job,
                      const ns_input_t *inputs, uint32_t k,
                      uint64_t *unit_run_ns, char *err,
                      size_t errlen) NS_MUST_CHECK;

/* In text, replace each path of a temporary source file as OpenCL
 * compilers write it in build logs ("/tmp/x/tempfile_AbC.cl:3:16",
 * "<source>:3:16", "input.cl:3:16") by name, keeping ":line:col". */
void ns_build_log_rename(char *text, size_t cap, const char *name);

#endif
