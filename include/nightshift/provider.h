/* provider.h - the provider's side of the market, inside `nightshift node`:
 * bids on jobs it can run, accepts awards (collateral locked), fetches the
 * descriptor and inputs, runs the job in the sandboxed worker, commits the
 * outputs (RESULT), serves them to the requester, and takes its payment in
 * with its next entry.
 *
 * A state machine per job (BID -> FETCH -> RUN -> [HOLD] -> SERVE) driven
 * by messages (ns_provider_on_msg) and time (ns_provider_tick); it talks
 * to the world only through an ns_node_io_t, so tests can drive it with a
 * fake clock and in-memory queues. The worker runs kernels in a sandboxed
 * process; its results are collected from the tick. */
#ifndef NIGHTSHIFT_PROVIDER_H
#define NIGHTSHIFT_PROVIDER_H

#include "nightshift/blobs.h"
#include "nightshift/config.h"
#include "nightshift/devinfo.h"
#include "nightshift/ledger.h"
#include "nightshift/node_io.h"

#include <msgpack.h>

typedef struct ns_provider ns_provider_t;

/* Fault injection for test networks (`node --fault`): */
typedef struct {
    double lazy;  /* fraction of output items faked (0 = honest) */
    bool garbage; /* every output byte random */
    bool silent;  /* accepts, never returns a result */
    bool fail;    /* runs, then reports the run as crashed (FAILED) */
    double slow;  /* result held back for slow x the run time */
} ns_fault_t;

/* Parse "lazy=R", "garbage", "silent", "slow=X", "fail". */
int ns_fault_parse(const char *spec, ns_fault_t *f) NS_MUST_CHECK;

typedef struct {
    ns_ledger_t *ledger; /* borrowed: read; entries go through io->append */
    const ns_identity_t *me;
    const ns_config_t *cfg;
    ns_hash_t network_id;
    const ns_devinfo_t *devices; /* what we offer */
    uint32_t n_devices;
    const char *datadir;
    ns_fault_t fault;
    ns_blobs_t *blobs; /* inputs kept by hash (blobs.h), or NULL */
} ns_provider_opts_t;

/* Stakes what cfg->stake asks (from free credits) and announces the
 * offer. io is borrowed and must outlive the provider. NULL + *err
 * (NS_ERR_NOMEM) on failure. */
ns_provider_t *ns_provider_new(const ns_provider_opts_t *o,
                               const ns_node_io_t *io, int *err);
/* NULL-safe; kills a running worker. */
void ns_provider_destroy(ns_provider_t **p);

/* A market message (JOB, AWARDED, FETCH, CHUNK; others are ignored).
 * Returns NS_OK when taken or ignored, an error when the message is
 * malformed or breaks the protocol (the caller counts it as a drop). */
int ns_provider_on_msg(ns_provider_t *p, const ns_node_msg_t *m);

/* Advance the jobs: expire bids, start runs, collect results, release
 * held results, forget served jobs. now = io->mono_ms. Call every
 * NS_POLICY_PROVIDER_TICK_MS. */
void ns_provider_tick(ns_provider_t *p, uint64_t now);
/* An entry was just confirmed (ledger_votes.h): an award waiting on its
 * confirmation is accepted now rather than at the next tick. */
void ns_provider_on_confirmed(ns_provider_t *p, uint64_t now);

/* Whether anything needs the fast tick: a job fetching, running or held,
 * a challenge or the warm-up in the worker. An idle provider is ticked
 * only with its claims (NS_POLICY_CLAIM_MS): bids expire and served
 * outputs are forgotten at that pace. */
bool ns_provider_active(const ns_provider_t *p);

/* The provider runs up to `slots` jobs at once, one sandboxed worker each
 * (NS_POLICY_MAX_WORKERS at most, one on each device at least; worker i on
 * device i % n_devices). Worker i's descriptor (-1 while it has no
 * process) and whether it has bytes to write to it: the node polls each so
 * that inputs and outputs move at the speed of the socket, not of the
 * tick. A descriptor changes when its worker is restarted. */
uint32_t ns_provider_n_workers(const ns_provider_t *p);
int ns_provider_worker_fd(const ns_provider_t *p, uint32_t i);
bool ns_provider_worker_wants_write(const ns_provider_t *p, uint32_t i);

/* Take in payments and released collateral (a claim entry) and refresh
 * the offer. Call every NS_POLICY_CLAIM_MS. */
void ns_provider_claim(ns_provider_t *p);

/* Whether this provider cannot bid at all now (no device, no stake), with
 * why and what to do in why[cap] ("" when it can). */
bool ns_provider_not_bidding(const ns_provider_t *p, char *why, size_t cap);

/* Counters for status --json (a map): bids, awards (bids won),
 * bids_lost, jobs by phase now, run_seconds (histo.h)... */
void ns_provider_pack_status(const ns_provider_t *p, msgpack_packer *pk);
/* The jobs this provider holds (bid on, fetching, running, serving):
 * ns_provider_n_jobs maps {id, role "provider", phase, peer (the
 * requester), price (our bid, credits), age_ms (in this phase), finished
 * false}, packed one after the other (the caller packs the array): the
 * `jobs` control request. */
uint32_t ns_provider_n_jobs(const ns_provider_t *p);
void ns_provider_pack_jobs(const ns_provider_t *p, msgpack_packer *pk);

#endif
