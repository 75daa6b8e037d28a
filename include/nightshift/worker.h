/* worker.h - the sandbox: kernels are compiled and run in a worker process
 * that the caller supervises and restarts, never in the caller (exec
 * layer).
 *
 * A worker is `<exe> worker --fd N ...` (the `nightshift` binary itself by
 * default) started with posix_spawn, so it is safe in a process that has
 * ZeroMQ threads. Before it opens OpenCL it sets RLIMIT_CORE 0, asks to be
 * killed when its parent dies, raises its own oom_score_adj (the kernel's
 * OOM killer takes the worker, not the node) and closes every inherited
 * descriptor but its socket; after opening the device it caps its address
 * space (RLIMIT_AS) at what the runtime took plus mem_limit_bytes.
 *
 * A kernel that crashes the runtime, loops, or exhausts memory ends the
 * worker, never the caller: the job gets one clear error line ("the kernel
 * crashed the OpenCL runtime (signal 11)", "the job ran past its 30000 ms
 * limit") and the next job starts a fresh worker.
 *
 * Protocol: frames over an AF_UNIX stream socketpair, a u32 big-endian
 * length and a msgpack head, bulk data raw after it; the message kinds,
 * caps and codecs are in worker_frame.h.
 * The supervisor treats everything from the worker as hostile: exact types
 * and counts, status a known ns_err, error text at most NS_WORKER_MAX_ERROR
 * bytes (control characters other than newline and tab replaced), no byte
 * outside a reply. A violation kills the worker and fails the job with
 * NS_ERR_CORRUPT.
 *
 * Threads: one thread drives a worker. The worker is killed if the thread
 * that started it exits (PR_SET_PDEATHSIG follows the thread), so create
 * and use it from the event loop thread.
 */
#ifndef NIGHTSHIFT_WORKER_H
#define NIGHTSHIFT_WORKER_H

#include "nightshift/challenge.h"
#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"
#include "nightshift/verify.h"
#include "nightshift/worker_frame.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_WORKER_DEFAULT_TIMEOUT_MS 30000 /* one job, wall clock */
#define NS_WORKER_DEFAULT_START_MS 30000   /* start-up up to HELLO */
#define NS_WORKER_MEM_UNLIMITED UINT64_MAX /* no RLIMIT_AS */

typedef struct {
    const char *exe;           /* binary with a `worker` subcommand;
                                  NULL = /proc/self/exe */
    uint32_t device_index;     /* in ns_devices_probe order */
    const char *cache_dir;     /* program binary cache; NULL = none */
    uint64_t mem_limit_bytes;  /* address space the worker may map beyond
                                  what its OpenCL runtime took at start-up;
                                  0 = this machine's physical memory,
                                  NS_WORKER_MEM_UNLIMITED = no limit */
    uint32_t timeout_ms;       /* wall clock per job, from submit (or from
                                  HELLO when the worker was starting) to
                                  the last output byte; 0 = default */
    uint32_t start_timeout_ms; /* spawn to HELLO; 0 = default */
    size_t max_source_bytes;   /* 1..NS_MAX_SOURCE; 0 = NS_MAX_SOURCE */
    uint32_t self_check;       /* after a RUN: re-run this many units of
                                  every step on a copy of the outputs
                                  (ns_self_check) and fail the RUN with
                                  NS_ERR_PROOF when they do not write what
                                  the launch wrote; 0 = no check, at most
                                  NS_MAX_CHECKS */
} ns_worker_opts_t;

/* Zeroes o: every field at its default. */
void ns_worker_opts_init(ns_worker_opts_t *o);

typedef struct ns_worker ns_worker_t;

/* Start a worker process now (its runtime starts in the background; the
 * first job waits for it). Options are copied. NULL with *err set:
 * NS_ERR_INVAL for a bad option, NS_ERR_IO if the process cannot be
 * spawned, NS_ERR_NOMEM. */
ns_worker_t *ns_worker_new(const ns_worker_opts_t *o, int *err);

/* Stop the worker (SIGKILL if a job is running, else EOF and a short
 * grace period) and free everything. NULL-safe; clears *w. */
void ns_worker_destroy(ns_worker_t **w);

/* The worker's device, from its last HELLO; NULL until one arrived. */
const ns_devinfo_t *ns_worker_device(const ns_worker_t *w);

/* ---- blocking ---------------------------------------------------------- */

/* Run the whole NDRange in the worker, waiting up to the start-up and job
 * limits. On NS_OK outputs[i] is, for each OUT argument i, a malloc'd
 * buffer of args[i].size bytes that the caller frees; other entries are
 * set to NULL (outputs has job->n_args entries). inputs as for
 * ns_runner_run. t may be NULL. On failure nothing is allocated and err
 * gets one line: the build log's first lines (NS_ERR_OPENCL), "the job ran
 * past its N ms limit" (NS_ERR_TIMEOUT), "the kernel crashed the OpenCL
 * runtime (signal 11)" (NS_ERR_OPENCL), an out-of-memory report
 * (NS_ERR_NOMEM), a size over a limit (NS_ERR_TOOBIG), a validation error
 * (NS_ERR_INVAL)... NS_ERR_STATE while a submitted job is in flight. */
int ns_worker_run(ns_worker_t *w, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t **outputs, ns_timings_t *t, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* Re-run only the given units (1..NS_WORKER_MAX_ITEMS, each below
 * ns_job_units) as ns_runner_run_units does, on zero-filled output
 * buffers; outputs as for ns_worker_run (malloc'd full-size OUT buffers:
 * what the units did not write is 0). */
int ns_worker_run_units(ns_worker_t *w, const ns_job_t *job,
                        const ns_input_t *inputs, const uint64_t *units,
                        uint32_t n, uint8_t **outputs, ns_timings_t *t,
                        char *err, size_t errlen) NS_MUST_CHECK;

/* Check a fraud proof in the worker (ns_fraud_check there, against
 * inputs of the proof's descriptor), waiting up to the limits. NS_OK =
 * fraud proven, NS_ERR_PROOF = not a valid proof (err says why), other
 * errors: the check could not be made (the worker's errors as for
 * ns_worker_run). */
int ns_worker_check_fraud(ns_worker_t *w, const ns_fraud_proof_t *p,
                          const ns_input_t *inputs, char *err,
                          size_t errlen) NS_MUST_CHECK;

/* (ns_worker_run_challenge, blocking too, follows ns_worker_result_t.) */

/* ---- non-blocking, for an event loop ----------------------------------
 *
 *   ns_worker_submit(w, job, inputs, NULL, 0, err, sizeof err);
 *   for (;;) {
 *       zmq_pollitem_t it = {NULL, ns_worker_fd(w),
 *           ZMQ_POLLIN | (ns_worker_wants_write(w) ? ZMQ_POLLOUT : 0), 0};
 *       zmq_poll(&it, 1, ns_worker_timeout_ms(w));  (with other items)
 *       if (ns_worker_collect(w, &res) == 1) break;  (res.status...)
 *   }
 *
 * The descriptor changes when the worker restarts: read it before every
 * poll. Call ns_worker_collect whenever it is ready or the timeout ran
 * out, also with no job in flight (it reads the worker's HELLO and notices
 * a worker that died while idle). One call moves at most
 * NS_WORKER_IO_SLICE bytes, so big transfers never stall the loop. */

#define NS_WORKER_IO_SLICE (8u << 20) /* bytes per collect call */

typedef struct {
    int status;                          /* NS_OK or the job's error */
    char error[NS_WORKER_MAX_ERROR + 1]; /* one line, or build log lines */
    uint8_t *outputs[NS_MAX_ARGS];       /* RUN, ITEMS: OUT buffers,
                                            malloc'd */
    ns_timings_t timings;                /* from the worker (zero on failure) */
    uint64_t wall_us;                    /* submit to result, this side */
    /* CHALLENGE (ns_worker_submit_challenge), status NS_OK only: */
    uint8_t *chal_bytes;     /* malloc'd answer: label: ns_label_answer_pack
                                bytes (read them with ns_label_answer_read);
                                imatmul: C, n * n little-endian u32 */
    size_t chal_len;         /* bytes in chal_bytes */
    ns_hash_t chal_root;     /* label: the Merkle root (also the answer's first
                                32 bytes); imatmul: ns_hash(chal_bytes) */
    uint64_t chal_device_us; /* the worker's prover wall time, microseconds
                                (label: fill, commit and open; imatmul:
                                generate, multiply, read back) */
    /* PREFLIGHT (ns_worker_submit_preflight), status NS_OK only: */
    uint64_t unit_ns;     /* TIME (or SAMPLE alone): a unit's time */
    uint32_t kernel_args; /* CHECK: the kernel's parameter count */
    uint64_t pf_build_us; /* CHECK: the build on the worker's device */
    /* CHECK (ns_worker_submit_check): the spot check's outcome, filled
     * whatever the status (as ns_spot_check_files fills it) */
    ns_check_result_t check;
} ns_worker_result_t;

/* Free the buffers of a result and zero it (NULL-safe, idempotent). A
 * caller that keeps a buffer sets its pointer to NULL first. */
void ns_worker_result_release(ns_worker_result_t *res);

/* Queue one job: the whole NDRange (items NULL, n 0) or the given units
 * (on zero-filled outputs, as ns_worker_run_units).
 * The job is copied; inputs are borrowed until ns_worker_collect returns
 * its result (or ns_worker_cancel / ns_worker_destroy). Problems found
 * before anything is sent (a job in flight: NS_ERR_STATE; the checks of
 * ns_worker_run) are returned here with err set; later ones arrive through
 * ns_worker_collect. */
int ns_worker_submit(ns_worker_t *w, const ns_job_t *job,
                     const ns_input_t *inputs, const uint64_t *items,
                     uint32_t n, char *err, size_t errlen) NS_MUST_CHECK;
/* ns_worker_submit of the whole NDRange, where each IN buffer i with
 * fds[i] >= 0 goes to the worker as that descriptor (duplicated here; the
 * caller keeps its own) instead of through the socket: a file of exactly
 * the buffer's size whose bytes are inputs[i]'s (a blob the caller
 * checked), mapped read-only by the worker. A descriptor not open
 * read-only (O_RDONLY) never reaches the worker: that input goes through
 * the socket. */
int ns_worker_submit_files(ns_worker_t *w, const ns_job_t *job,
                           const ns_input_t *inputs, const int *fds, char *err,
                           size_t errlen) NS_MUST_CHECK;
/* Queue a fraud proof check (ns_worker_check_fraud); the proof is packed
 * here, inputs are borrowed as for ns_worker_submit. The result's status
 * is the verdict; it has no outputs. */
int ns_worker_submit_fraud(ns_worker_t *w, const ns_fraud_proof_t *p,
                           const ns_input_t *inputs, char *err,
                           size_t errlen) NS_MUST_CHECK;

/* Queue the requester's pre-flight of its own job (preflight.h) in the
 * worker, so that a kernel that crashes, hangs or exhausts memory costs
 * the job, never the node or the command: what (NS_PF_* bits of
 * worker_frame.h) runs ns_preflight_check_cached (with the worker's
 * cache_dir; name as source_name), ns_preflight_time and
 * ns_preflight_sample over k units, in that order, stopping at the first
 * error. Inputs and fds as for ns_worker_submit_files. The result: status
 * and error as those calls give them (a crash or the time limit as for a
 * RUN), unit_ns, kernel_args and pf_build_us. */
int ns_worker_submit_preflight(ns_worker_t *w, const ns_job_t *job,
                               const ns_input_t *inputs, const int *fds,
                               uint32_t what, uint32_t k, const char *name,
                               char *err, size_t errlen) NS_MUST_CHECK;
/* Queue the requester's spot check (ns_spot_check_files) of a provider's
 * claimed outputs in the worker: claims[i] for every OUT argument i
 * (borrowed until the result), claim_fds[i] (may be NULL) -1 or a file
 * whose bytes are claims[i] (passed as a descriptor when it is open
 * read-only, else the bytes go through the socket). root is the committed
 * root the caller computed from these bytes; secret and k the draw. The
 * result's status: NS_OK when the check ran (the verdict in res.check),
 * else why it could not. */
int ns_worker_submit_check(ns_worker_t *w, const ns_job_t *job,
                           const ns_hash_t desc_id, const ns_input_t *inputs,
                           const int *fds, uint8_t *const *claims,
                           const int *claim_fds, const ns_hash_t root,
                           const uint8_t secret[32], uint32_t k, char *err,
                           size_t errlen) NS_MUST_CHECK;
/* Blocking: ns_worker_submit_preflight and wait for its result (within
 * the worker's limits). *stop (may be NULL) is read between polls (at
 * most every 100 ms): once it is non-zero the pre-flight is abandoned
 * (the worker killed) and NS_ERR_INTR returned. On NS_OK *unit_ns (may be
 * NULL) gets the result's unit_ns. */
int ns_worker_preflight(ns_worker_t *w, const ns_job_t *job,
                        const ns_input_t *inputs, const int *fds, uint32_t what,
                        uint32_t k, const char *name, const volatile int *stop,
                        uint64_t *unit_ns, char *err,
                        size_t errlen) NS_MUST_CHECK;

/* Queue a hardware challenge (ns_worker_run_challenge); the request is
 * copied and packed here. Its result arrives through ns_worker_collect:
 * status, error and the chal_* fields of ns_worker_result_t (outputs and
 * timings stay empty). The supervisor checks the answer's shape before it
 * delivers it (imatmul: exactly 4 n^2 bytes hashing to chal_root; label:
 * at most NS_LABEL_ANSWER_MAX bytes starting with chal_root) and treats
 * a mismatch as a protocol violation (NS_ERR_CORRUPT); whether the answer
 * is right is the verifier's to judge (ns_label_answer_read and
 * ns_label_verify, ns_imatmul_verify). Errors before anything is sent as
 * for ns_worker_run_challenge, and NS_ERR_STATE while a job is in
 * flight. */
int ns_worker_submit_challenge(ns_worker_t *w, const ns_chal_request_t *req,
                               char *err, size_t errlen) NS_MUST_CHECK;

/* Blocking: run a hardware challenge (challenge.h) in the worker, waiting up to
 * the start-up and job limits (the job limit, timeout_ms, also bounds the
 * challenge: size it for the labelling asked for). The worker's prover is
 * created at its first challenge (the challenge programs built and warmed
 * up: seconds, counted in that challenge's wall time, not in its
 * device_us) and kept for the next ones; a provider may run a small
 * challenge first to have it ready. On NS_OK *res holds the answer
 * (chal_bytes, chal_len, chal_root, chal_device_us; see
 * ns_worker_result_t) and the caller releases it with
 * ns_worker_result_release; on failure *res is zeroed and err gets one
 * line: NS_ERR_INVAL / NS_ERR_TOOBIG for a request that
 * ns_chal_request_check refuses (against the device's largest allocation
 * once the worker has said HELLO; refused before anything runs), the
 * prover's errors (NS_ERR_OPENCL...), and those of ns_worker_run. */
int ns_worker_run_challenge(ns_worker_t *w, const ns_chal_request_t *req,
                            ns_worker_result_t *res, char *err,
                            size_t errlen) NS_MUST_CHECK;

/* The socket to poll for reading (always) and for writing (while
 * ns_worker_wants_write); -1 while no worker process exists. */
int ns_worker_fd(const ns_worker_t *w);
bool ns_worker_wants_write(const ns_worker_t *w);
/* Milliseconds until the next deadline (job or start-up), -1 if none. */
int ns_worker_timeout_ms(const ns_worker_t *w);
/* True between a successful submit and its result. */
bool ns_worker_busy(const ns_worker_t *w);

/* Move data, enforce deadlines, restart a dead worker. Returns 1 and fills
 * *res (release it) when the submitted job has finished, successfully or
 * not; 0 otherwise. Never blocks for long (a dead worker is reaped with a
 * grace period of a few ms before SIGKILL). */
int ns_worker_collect(ns_worker_t *w, ns_worker_result_t *res);

/* The wall-clock limit of the next submission only (a provider gives each
 * job what is left of its deadline); later ones go back to
 * ns_worker_opts_t's timeout_ms. 0 = that default. */
void ns_worker_set_timeout(ns_worker_t *w, uint32_t timeout_ms);

/* Abandon the job in flight (killing the worker if it is running it; a
 * fresh one starts). No-op when idle. */
void ns_worker_cancel(ns_worker_t *w);

typedef struct {
    uint64_t starts;   /* worker processes spawned */
    uint64_t jobs;     /* results delivered */
    uint64_t failed;   /* results with an error */
    uint64_t crashes;  /* workers that died during a job */
    uint64_t timeouts; /* jobs killed at their deadline */
    uint64_t protocol; /* workers killed for a protocol violation */
} ns_worker_stats_t;

void ns_worker_stats(const ns_worker_t *w, ns_worker_stats_t *out);

/* ---- the worker side --------------------------------------------------- */

/* Entry point of `nightshift worker` (argv[0] = "worker"): --fd N
 * [--device I] [--cache-dir D] [--mem-limit BYTES|unlimited]
 * [--max-source BYTES] [--parent PID]. Serves requests until EOF on the
 * socket; returns the process exit status (0 after EOF, 1 if the device
 * cannot be opened, 2 on a usage error, 3 on a protocol violation,
 * NS_WORKER_EXIT_LOST when a job left the device's context unusable:
 * ns_runner_lost). */
#define NS_WORKER_EXIT_LOST 4
int ns_worker_main(int argc, char **argv);

#endif
