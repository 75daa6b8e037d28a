/* node.h - a node: the datadir, the ledger and its sync, p2p, and the
 * market's state machines on one event loop.
 *
 * Two shapes share this code:
 *  - a full node (`nightshift node`): its provider, the control socket,
 *    node.addr;
 *  - a light peer (`nightshift submit`): no provider and no control
 *    socket, it stops once its requesters are finished; closing it gives
 *    what it queued last NS_POLICY_CLOSE_LINGER_MS to go out.
 * Neither runs a kernel in its own process: the ledger's SLASH verifier
 * re-runs proofs in a sandboxed worker, and the requesters' pre-flights
 * and spot checks run in workers of a pool (worker_pool.h).
 * Both can host requesters (ns_node_add_requester); market messages are
 * routed to the requester whose job they name, otherwise to the provider.
 *
 * The node implements ns_node_io_t over p2p, the ledger sync and the
 * system clocks. Threading: none; ns_node_run owns the calling thread.
 */
#ifndef NIGHTSHIFT_NODE_H
#define NIGHTSHIFT_NODE_H

#include "nightshift/cancel.h"
#include "nightshift/config.h"
#include "nightshift/genesis.h"
#include "nightshift/ledger.h"
#include "nightshift/p2p.h"
#include "nightshift/provider.h"
#include "nightshift/requester.h"

#include <signal.h>

#define NS_NODE_MAX_REQUESTERS 128

typedef struct ns_node ns_node_t;

typedef struct {
    const char *datadir;
    const ns_config_t *cfg; /* borrowed; must outlive the node */
    bool light;             /* a requester-only peer (see above) */
    const char *fault;      /* full node, test networks: ns_fault_parse */
    const char *cache_dir;  /* program binaries for the sandboxed workers'
                               runners, or NULL */
    bool runner_optional;   /* light peer that checks no results
                               (cancel): no worker is started ahead */
    ns_wpool_t *wpool;      /* borrowed, must outlive the node: the
                               workers of the requesters' device work
                               (the caller's, already warm); NULL: the
                               node makes its own */
} ns_node_conf_t;

/* Lock the datadir, load key and genesis, open the ledger, start p2p and
 * the market. NULL on failure with one line in err (without the command
 * name). */
ns_node_t *ns_node_open(const ns_node_conf_t *c, char *err, size_t errlen);
/* NULL-safe: stops the worker, closes sockets, the ledger, the lock. */
void ns_node_close(ns_node_t **n);

/* Run the loop until ns_node_stop (any thread or a signal handler), or,
 * for a light peer, until every requester is finished. */
int ns_node_run(ns_node_t *n) NS_MUST_CHECK;
/* Async-signal-safe. */
void ns_node_stop(ns_node_t *n);

/* Host a requester; the node owns it (freed by ns_node_close). o->endpoint
 * may be NULL: the node's own. NULL + *err (NS_ERR_TOOBIG when
 * NS_NODE_MAX_REQUESTERS are hosted, NS_ERR_NOTFOUND without an OpenCL
 * device for the checks, NS_ERR_NOMEM). */
ns_requester_t *ns_node_add_requester(ns_node_t *n, ns_requester_opts_t *o,
                                      int *err);

/* A light peer that just started: run the loop until it has joined the
 * network (join.h). NS_ERR_TIMEOUT without a peer, NS_ERR_STATE when
 * stopped first; one line in err. */
int ns_node_join(ns_node_t *n, char *err, size_t errlen) NS_MUST_CHECK;

/* A job handed over by `submit --node` (control.h, "submit"): the node
 * reads its inputs, saves it under jobs/, runs its requester; *job_id
 * names it for ns_node_job_progress. One line in err on failure. */
struct ns_ctl_req;
int ns_node_submit(ns_node_t *n, const struct ns_ctl_req *r, ns_hash_t job_id,
                   char *err, size_t errlen) NS_MUST_CHECK;
struct ns_ctl_job;
int ns_node_job_progress(ns_node_t *n, const ns_hash_t job_id,
                         uint32_t from_line,
                         struct ns_ctl_job *j) NS_MUST_CHECK;

/* End one of our jobs (cancel.h). */
int ns_node_cancel(ns_node_t *n, const ns_hash_t job_id,
                   ns_cancel_result_t *res, char *err,
                   size_t errlen) NS_MUST_CHECK;

/* Borrowed views for the layers above. */
const ns_identity_t *ns_node_identity(const ns_node_t *n);
const ns_genesis_t *ns_node_genesis(const ns_node_t *n);
ns_ledger_t *ns_node_ledger(ns_node_t *n);
ns_p2p_t *ns_node_p2p(ns_node_t *n);
const char *ns_node_datadir(const ns_node_t *n);

/* Status document for the control socket: p2p's map with pid, datadir,
 * ledger and provider sections. */
void ns_node_pack_status(ns_node_t *n, msgpack_packer *pk);
/* The node's jobs, an array: hosted (`submit --node`) jobs first (see
 * ns_hosted_pack), then the provider's (ns_provider_pack_jobs). */
void ns_node_pack_jobs(ns_node_t *n, msgpack_packer *pk);
/* The ledger as a whole, a map: accounts, entries, and the sums over
 * every account of free, staked, escrow, collateral, with burned,
 * pending_credit, total (credits) and conserved (bool). O(accounts). */
void ns_node_pack_ledger_summary(ns_node_t *n, msgpack_packer *pk);

/* Append our own entry through the ledger sync (durable, gossiped). */
int ns_node_append(ns_node_t *n, uint8_t type, const ns_entry_body_t *b,
                   ns_hash_t id) NS_MUST_CHECK;

#endif
