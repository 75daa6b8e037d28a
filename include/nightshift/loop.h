/* loop.h - a single-threaded event loop: readable ZeroMQ sockets, readable
 * file descriptors and timers, in the manner of CZMQ's zloop.
 *
 * Each turn polls every registered socket and descriptor with zmq_poll,
 * waiting at most until the earliest timer is due (and never longer than
 * NS_LOOP_MAX_WAIT_MS), then calls the handler of each readable one and
 * then each timer that is due, earliest due first (ties: the one started
 * first). A handler is called once per turn; draining a socket in bounded
 * batches is the handler's business.
 *
 * Everything may be changed from inside a handler or a timer:
 *   - a socket or descriptor removed in a turn gets no further call, even
 *     if the poll reported it readable;
 *   - one added in a turn is first polled in the next one;
 *   - a timer cancelled in a turn does not run, its own callback included
 *     (a repeating timer may cancel itself);
 *   - a timer started in a turn first runs in a later turn, even with a
 *     zero delay.
 *
 * Caps are fixed when the loop is created; going over one is
 * NS_ERR_TOOBIG and a warning in the log, never a reallocation.
 *
 * Threading: none. A loop belongs to the thread that runs it; no call is
 * safe from another thread. The stop flag passed to ns_loop_run may be set
 * from a signal handler.
 */
#ifndef NIGHTSHIFT_LOOP_H
#define NIGHTSHIFT_LOOP_H

#include "nightshift/err.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_LOOP_MAX_SOCKETS 4096 /* ceiling on max_sockets (sockets + fds) */
#define NS_LOOP_MAX_TIMERS 1024  /* ceiling on max_timers */
#define NS_LOOP_MAX_WAIT_MS                                                    \
    1000 /* longest poll: a stop flag set by a                                 \
            signal between two turns is seen                                   \
            within this time */

typedef struct ns_loop ns_loop_t;

/* Called when socket (a ZeroMQ socket) is readable. */
typedef void (*ns_loop_socket_fn)(void *user, void *socket);
/* Called when fd is readable, at end of file, or in error (read it to
 * find out which). */
typedef void (*ns_loop_fd_fn)(void *user, int fd);
/* Called when a timer is due; now_mono_ms is the monotonic clock
 * (ns_mono_ms) of the turn. */
typedef void (*ns_loop_timer_fn)(void *user, uint64_t now_mono_ms);

/* A loop with room for max_sockets sockets and descriptors together and
 * max_timers timers (1 .. NS_LOOP_MAX_SOCKETS, 1 .. NS_LOOP_MAX_TIMERS).
 * NULL when a cap is out of range or memory runs out. */
ns_loop_t *ns_loop_new(uint32_t max_sockets, uint32_t max_timers);
/* NULL-safe, idempotent; sets *loop to NULL. Closes nothing: the sockets
 * and descriptors still belong to whoever added them. Must not be called
 * from inside the loop's own handlers. */
void ns_loop_destroy(ns_loop_t **loop);

/* Poll a ZeroMQ socket (borrowed: it must stay open until removed) and
 * call fn(user, socket) when it is readable. NS_ERR_EXISTS if it is
 * already there, NS_ERR_TOOBIG when the loop is full. */
int ns_loop_add_socket(ns_loop_t *loop, void *socket, ns_loop_socket_fn fn,
                       void *user) NS_MUST_CHECK;
/* Stop polling it. NS_ERR_NOTFOUND if it is not there. */
int ns_loop_remove_socket(ns_loop_t *loop, void *socket);

/* The same for a plain file descriptor (a pipe, an AF_UNIX socket...);
 * NS_ERR_INVAL for a negative fd. */
int ns_loop_add_fd(ns_loop_t *loop, int fd, ns_loop_fd_fn fn,
                   void *user) NS_MUST_CHECK;
int ns_loop_remove_fd(ns_loop_t *loop, int fd);
/* A descriptor that is also polled for writing whenever wants_write(user)
 * says so (asked before each poll): fn runs when it is readable or, then,
 * writable. For a pipe to a child that both reads and writes. */
typedef bool (*ns_loop_want_fn)(void *user);
int ns_loop_add_fd_io(ns_loop_t *loop, int fd, ns_loop_fd_fn fn,
                      ns_loop_want_fn wants_write, void *user) NS_MUST_CHECK;

/* Sockets and descriptors registered now. */
uint32_t ns_loop_sockets(const ns_loop_t *loop);

/* Start a timer due interval_ms from now: one-shot (repeat false: it runs
 * once and its id is then free) or repeating (runs every interval_ms,
 * counted from the end of the turn in which it last ran, so a slow turn
 * delays it rather than bunching calls). *id gets its id, never 0, not
 * reused by this loop for 2^32 - 1 starts. NS_ERR_INVAL for a repeating
 * timer of 0 ms, NS_ERR_TOOBIG when max_timers are running. */
int ns_loop_timer_start(ns_loop_t *loop, uint32_t interval_ms, bool repeat,
                        ns_loop_timer_fn fn, void *user,
                        uint32_t *id) NS_MUST_CHECK;
/* Cancel a timer: it will not run again. NS_ERR_NOTFOUND if there is no
 * such timer (never started, already cancelled, or a one-shot that has
 * run or is running). */
int ns_loop_timer_cancel(ns_loop_t *loop, uint32_t id);

/* Let timer id run up to slack_ms before it is due, in a turn that runs
 * anyway (woken by a socket or by another timer): it never wakes the loop
 * before its time, so the periodic chores of an idle process share the
 * wakeups of its heartbeat instead of each waking it. 0 (the default):
 * exactly when due; a repeating timer's slack is capped at half its
 * interval. NS_ERR_NOTFOUND if there is no such timer. */
int ns_loop_timer_slack(ns_loop_t *loop, uint32_t id, uint32_t slack_ms);

/* Restart every repeating timer that has slack (a chore) from now: each is
 * next due one interval after this moment. Called in the turn of the
 * loop's periodic event (the p2p's heartbeat, which keeps to wall-clock
 * multiples of its interval): chores then fall due at or just after its
 * later turns and run in them, where their slack, which reaches back
 * only, would not catch an event a little after them. */
void ns_loop_timers_rephase(ns_loop_t *loop);

/* Timers running now. */
uint32_t ns_loop_timers(const ns_loop_t *loop);

/* Run turns until *stop becomes non-zero (stop may be NULL) or
 * ns_loop_stop is called. NS_OK when stopped, NS_ERR_ZMQ when zmq_poll
 * fails for another reason than a signal (EINTR). Not reentrant:
 * NS_ERR_STATE when called from inside the loop's own handlers. */
int ns_loop_run(ns_loop_t *loop, volatile sig_atomic_t *stop) NS_MUST_CHECK;
/* Make ns_loop_run return as soon as the running handler or timer
 * returns; the rest of the turn is left for the next run. Outside a run
 * it does nothing. */
void ns_loop_stop(ns_loop_t *loop);

#endif
