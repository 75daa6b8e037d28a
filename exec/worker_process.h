/* worker_process.h - starting, killing and collecting sandbox worker
 * processes, for the supervisor (exec/worker_supervisor.c); private to
 * exec/.
 *
 * The supervisor owns the state machine; these functions only deal with
 * the process: posix_spawn over a socketpair (never a bare fork: the
 * caller has ZeroMQ threads), waitpid with a grace period, SIGKILL, and a
 * short list of killed workers still to be reaped so that a process stuck
 * in a driver call never blocks the caller's loop.
 */
#ifndef NIGHTSHIFT_EXEC_WORKER_PROCESS_H
#define NIGHTSHIFT_EXEC_WORKER_PROCESS_H

#include "nightshift/worker.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NS_WORKER_MAX_REAPING 16 /* killed workers not yet reaped */

/* Killed workers that had not exited yet, reaped later. Zero it to init. */
typedef struct {
    pid_t pids[NS_WORKER_MAX_REAPING];
    uint32_t n;
} ns_worker_reaper_t;

/* Start `<o->exe> worker --fd N --device ... --parent <our pid>` with
 * posix_spawn, its stdin and stdout on /dev/null, every signal at its
 * default and unblocked, our log level and exec debugging passed on.
 * o->exe must be set (the supervisor's copy). On NS_OK *pid is the child
 * and *fd our end of the socketpair (non-blocking, close-on-exec; the
 * caller closes it). NS_ERR_IO with err saying why otherwise (nothing
 * left behind). */
int ns_worker_process_spawn(const ns_worker_opts_t *o, pid_t *pid, int *fd,
                            char *err, size_t errlen) NS_MUST_CHECK;

/* Collect pid: wait up to grace_ms for it to exit by itself, then SIGKILL
 * it; one that does not die at once goes to rp and is reaped later. True
 * with *st filled when its wait status is known. */
bool ns_worker_process_reap(pid_t pid, unsigned grace_ms,
                            ns_worker_reaper_t *rp, int *st);

/* Reap what exited of rp (all of it, waiting, when block). */
void ns_worker_reaper_poll(ns_worker_reaper_t *rp, bool block);

/* "signal 11", "exit status 3" for a wait status, into out[cap]. */
void ns_worker_describe_status(char *out, size_t cap, int st);

#endif
