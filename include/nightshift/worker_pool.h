/* worker_pool.h - sandboxed workers kept warm for the device work that is
 * not a provider's run: the requester's pre-flight and spot checks, the
 * check of a provider's crash report (exec layer).
 *
 * User code never runs in a node's own process nor in `submit`: a kernel
 * that crashes, loops or exhausts memory there would take the node (its
 * provider, its other jobs, its ledger writer) or the command with it.
 * Each piece of such work goes to a worker of this pool instead, lent for
 * that piece and given back afterwards; an idle worker is kept (its
 * OpenCL runtime open, its programs built), so a small job pays no
 * start-up. At most `max` workers exist at once; a borrower that finds
 * none free tries again on its next tick.
 *
 * Threads: as for worker.h, create and use a pool from one thread (the
 * event loop's).
 */
#ifndef NIGHTSHIFT_WORKER_POOL_H
#define NIGHTSHIFT_WORKER_POOL_H

#include "nightshift/worker.h"

#include <stdint.h>

typedef struct ns_wpool ns_wpool_t;

/* A pool of at most max (1..NS_WPOOL_MAX) workers with options o (copied;
 * timeout_ms is each lent worker's default limit). No process starts
 * here. NULL with *err: NS_ERR_INVAL, NS_ERR_NOMEM. */
#define NS_WPOOL_MAX 8
ns_wpool_t *ns_wpool_new(const ns_worker_opts_t *o, uint32_t max, int *err);

/* Every worker stopped (killed if one is busy: a borrower's work ends
 * with it), everything freed. NULL-safe; clears *p. */
void ns_wpool_destroy(ns_wpool_t **p);

/* Start one worker now if none is idle, so that its runtime opens while
 * the caller does other things (a light peer joining). NS_OK, or why the
 * process could not be spawned. */
int ns_wpool_warm(ns_wpool_t *p);

/* An idle worker, lent until ns_wpool_give (started here when none is
 * idle and fewer than max exist). NULL when all max are lent (*err
 * NS_ERR_RATE: try again later) or one cannot be spawned (*err as
 * ns_worker_new's). */
ns_worker_t *ns_wpool_take(ns_wpool_t *p, int *err);

/* Back to the pool. A worker with work in flight has it cancelled (the
 * process killed, a fresh one started) first. NULL-safe; clears *w. */
void ns_wpool_give(ns_wpool_t *p, ns_worker_t **w);

/* Workers that exist, and how many are lent. */
uint32_t ns_wpool_size(const ns_wpool_t *p);
uint32_t ns_wpool_lent(const ns_wpool_t *p);

#endif
