/* join.h - when a peer that just started can act: it has a live peer, and
 * either its ledger already holds what the caller needs (`enough`: say,
 * the free credits for the escrow) or its ledger digest equals a peer's,
 * or NS_POLICY_JOIN_MAX_MS passed. No fixed wait: a requester with the
 * credits it needs announces as soon as one peer answers. Used by the
 * light peer's requester and by `cancel`. */
#ifndef NIGHTSHIFT_JOIN_H
#define NIGHTSHIFT_JOIN_H

#include "nightshift/config.h"
#include "nightshift/ledger.h"
#include "nightshift/node_io.h"

typedef struct {
    uint64_t started_ms;
} ns_join_t;

void ns_join_start(ns_join_t *j, uint64_t now_mono_ms);
/* 1 = joined, 0 = keep waiting, NS_ERR_TIMEOUT = no peer within
 * NS_POLICY_JOIN_GIVEUP_MS. */
int ns_join_check(ns_join_t *j, ns_ledger_t *l, const ns_node_io_t *io,
                  bool enough, uint64_t now_mono_ms);

/* How long ns_join_explain waits for the bootstrap peers' answers. */
#define NS_JOIN_EXPLAIN_MS 3000

/* Why the bootstrap peers of cfg gave us nothing: dials each again on its
 * own (probe.h) and writes one line into out, "bootstrap ID@tcp://H:P:
 * connection refused (...); bootstrap ...: key mismatch ...". Blocks for
 * up to NS_JOIN_EXPLAIN_MS. */
void ns_join_explain(const ns_config_t *cfg, const ns_hash_t network_id,
                     char *out, size_t cap);

#endif
