/* join.h - when a peer that just started is part of the network: it has
 * a live peer, the peer count has held for NS_POLICY_JOIN_STABLE_MS and
 * its ledger digest equals a peer's (or NS_POLICY_JOIN_MAX_MS passed).
 * Used by the light peer's requester and by `cancel`. */
#ifndef NIGHTSHIFT_JOIN_H
#define NIGHTSHIFT_JOIN_H

#include "nightshift/ledger.h"
#include "nightshift/node_io.h"

typedef struct {
    uint64_t started_ms;
    uint32_t peers;        /* live peers at the last look */
    uint64_t stable_ms;    /* since when that count holds */
} ns_join_t;

void ns_join_start(ns_join_t *j, uint64_t now_mono_ms);
/* 1 = joined, 0 = keep waiting, NS_ERR_TIMEOUT = no peer within
 * NS_POLICY_JOIN_GIVEUP_MS. */
int ns_join_check(ns_join_t *j, ns_ledger_t *l, const ns_node_io_t *io,
                  uint64_t now_mono_ms);

#endif
