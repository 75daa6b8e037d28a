/* provider.h - the provider's side of the market, inside `nightshift node`:
 * bids on jobs it can run, accepts awards (collateral locked), fetches the
 * descriptor and inputs, runs the job in the sandboxed worker, commits the
 * outputs (RESULT), serves them to the requester, and takes its payment in
 * with its next entry. */
#ifndef NIGHTSHIFT_PROVIDER_H
#define NIGHTSHIFT_PROVIDER_H

#include "nightshift/config.h"
#include "nightshift/ledger_sync.h"
#include "nightshift/p2p.h"

typedef struct ns_provider ns_provider_t;

/* Fault injection for test networks (`node --fault`): */
typedef struct {
    double lazy;  /* fraction of output items faked (0 = honest) */
    bool garbage; /* every output byte random */
    bool silent;  /* accepts, never returns a result */
    double slow;  /* result held back for slow x the run time */
} ns_fault_t;

/* Parse "lazy=R", "garbage", "silent", "slow=X". */
int ns_fault_parse(const char *spec, ns_fault_t *f) NS_MUST_CHECK;

typedef struct {
    ns_p2p_t *p2p;
    ns_ledger_t *ledger;
    ns_ledger_sync_t *sync;
    const ns_identity_t *me;
    const ns_config_t *cfg;
    ns_hash_t network_id;
    const ns_devinfo_t *devices; /* what we offer */
    uint32_t n_devices;
    const char *datadir;
    ns_fault_t fault;
} ns_provider_opts_t;

ns_provider_t *ns_provider_new(const ns_provider_opts_t *o, int *err);
void ns_provider_destroy(ns_provider_t **p);

/* Counters for status --json (a map). */
void ns_provider_pack_status(const ns_provider_t *p, msgpack_packer *pk);

#endif
