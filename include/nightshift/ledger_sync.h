/* ledger_sync.h - the ledger on the network (market layer): entries are
 * pushed by gossip and repaired by head exchange with random peers.
 *
 * Types (docs/PROTOCOL.md, "Ledger sync"):
 *   16 ENTRY      gossiped: one encoded entry
 *   17 HEADS_REQ  direct: [start author, epoch, since] "your heads that
 *                 moved since", or [start author] (older nodes: all)
 *   18 HEADS      direct: [epoch, upto, full, [[author, seq, ctr]...],
 *                 next author or nil, digest], or the older
 *                 [[author, seq]..., next author or nil] (ledger_heads.h)
 *   19 GET        direct: [author, from seq, to seq]
 *   20 ENTRIES    direct: [author, responder's head seq, [entry...]]
 * Every NS_LEDGER_SYNC_MS a node picks a live peer whose heartbeat
 * announces a different heads digest, asks for its heads (those that
 * changed since its last exchange with that peer) and pulls the
 * ranges it lacks in batches of at most NS_SYNC_BATCH entries (chains
 * whose next entry is nowhere here first); a round that brought entries
 * starts the next as soon as its last reply is in. Ingested
 * entries are committed by the ledger's policy (ns_ledger_commit_due,
 * checked after each message and every NS_LEDGER_COMMIT_TICK_MS), and
 * before a control request reports the ledger (status). A gap seen in
 * gossip is fetched at once from the peer that showed it.
 */
#ifndef NIGHTSHIFT_LEDGER_SYNC_H
#define NIGHTSHIFT_LEDGER_SYNC_H

#include "nightshift/ledger.h"
#include "nightshift/p2p.h"

#define NS_MSG_ENTRY 16
#define NS_MSG_HEADS_REQ 17
#define NS_MSG_HEADS 18
#define NS_MSG_GET 19
#define NS_MSG_ENTRIES 20

#define NS_LEDGER_SYNC_MS 1000 /* head comparison period */
#define NS_SYNC_RANGES                                                         \
    16 /* GETs per round: each reply is up to 256 entries                      \
          ingested in one loop turn */
#define NS_SYNC_BATCH                                                          \
    256                        /* entries per ENTRIES message (and bytes       \
                                  under NS_MAX_BODY) */
#define NS_SYNC_HEADS_MAX 2048 /* (author, seq) pairs per HEADS */
#define NS_LEDGER_COMMIT_TICK_MS                                               \
    50 /* how often the commit policy is                                       \
          checked when no message comes */

typedef struct ns_ledger_sync ns_ledger_sync_t;

/* Register the message types and timers on p. Both must outlive it. */
ns_ledger_sync_t *ns_ledger_sync_new(ns_p2p_t *p, ns_ledger_t *l, int *err);
void ns_ledger_sync_destroy(ns_ledger_sync_t **s);

/* Append our own entry (durable on return) and gossip it. */
int ns_ledger_sync_append(ns_ledger_sync_t *s, const ns_identity_t *me,
                          uint8_t type, const ns_entry_body_t *body,
                          bool claim_credits, ns_hash_t id) NS_MUST_CHECK;

/* Counters for status --json: a map. */
void ns_ledger_sync_pack_status(ns_ledger_sync_t *s, msgpack_packer *pk);

#endif
