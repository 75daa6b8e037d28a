/* ledger_votes.h - confirmation of ledger entries by the votes of staked
 * accounts (market layer; docs/PROTOCOL.md, "Confirmation").
 *
 * A node whose account holds stake votes for every entry it stores: the
 * first entry it saw at that place of its author's chain (it never stores
 * two). An entry is confirmed once accounts holding more than half of
 * all stake have voted for it. Honest voters vote once per place, so two
 * entries at one place cannot both be confirmed: a credit whose source
 * is confirmed can no longer be forked away, and that is the only kind a
 * node takes in (ns_ledger_set_confirm).
 *
 * Types:
 *   21 VOTE      gossiped: [[entry id]...]  ids the sender holds; counted
 *                only from an account with stake in our ledger
 *   22 VOTE_REQ  direct: [[entry id]...]   "your votes on these, please";
 *                a staked node publishes a VOTE of those it holds (and
 *                sends it to the asker as well)
 */
#ifndef NIGHTSHIFT_LEDGER_VOTES_H
#define NIGHTSHIFT_LEDGER_VOTES_H

#include "nightshift/ledger.h"
#include "nightshift/p2p.h"

#define NS_MSG_VOTE 21
#define NS_MSG_VOTE_REQ 22

#define NS_VOTE_IDS_MAX 256 /* ids per VOTE or VOTE_REQ */
#define NS_VOTE_FLUSH_MS 20 /* our votes go out in batches this often */
#define NS_VOTE_TABLE 8192  /* ids tallied at once (the oldest go first) */
#define NS_VOTE_VOTERS 1024 /* voters counted per id */
#define NS_VOTE_ASK_MS 1000 /* how often credits waiting on a vote ask */
#define NS_VOTE_STAKE_MS                                                       \
    60000 /* the sum of all stake is read again at                             \
             least this often (and soon after stake                            \
             moves) */
#define NS_VOTE_RECENT_MS                                                      \
    600000 /* entries older than this (by their                                \
              timestamp) get a vote only when asked */

typedef struct ns_votes ns_votes_t;

/* Register the message types and timers on p and set the ledger's
 * confirmation and stored hooks. self: our account (we vote while it
 * holds stake). p and l must outlive it. */
ns_votes_t *ns_votes_new(ns_p2p_t *p, ns_ledger_t *l,
                         const uint8_t self[NS_ID_BYTES], int *err);
/* Unhooks the ledger. NULL-safe. */
void ns_votes_destroy(ns_votes_t **v);

ns_confirm_state ns_votes_state(ns_votes_t *v, const ns_hash_t id);

/* fn(user, id) for each entry once it is confirmed here, soon after (a
 * zero-delay timer: never from inside a message), so that who waits on
 * a confirmation (a provider its AWARD) need not poll. NULL: none. */
typedef void (*ns_votes_confirmed_fn)(void *user, const ns_hash_t id);
void ns_votes_set_on_confirmed(ns_votes_t *v, ns_votes_confirmed_fn fn,
                               void *user);

/* Counters for status --json: a map. */
void ns_votes_pack_status(ns_votes_t *v, msgpack_packer *pk);

#endif
