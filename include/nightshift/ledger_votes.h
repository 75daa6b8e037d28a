/* ledger_votes.h - confirmation of ledger entries by the votes of a
 * bounded committee of staked accounts (market layer; docs/PROTOCOL.md,
 * "Confirmation" and "Committee").
 *
 * The committee: while at most NS_VOTE_SEATS accounts hold stake, every
 * one of them, weighed by its stake as it stands (a small network works
 * as it always did). With more, NS_VOTE_SEATS seats drawn per epoch
 * (NS_VOTE_EPOCH_MS of wall clock) by stake, with replacement, from a
 * seed every node derives from the epoch and the stake it holds
 * (ns_votes_draw), once that stake has settled (NS_VOTE_SETTLE_MS): each
 * member weighs its seats, and a later stake change counts from the next
 * epoch. Only members vote; a vote from anyone else is dropped and not
 * passed on, so the votes a node receives per entry are bounded by the
 * seats, not by the number of staked accounts.
 *
 * A member votes for every entry it stores: the first entry it saw at
 * that place of its author's chain (it never stores two). An entry is
 * confirmed once members holding more than half of the committee's
 * weight have voted for it. Honest voters vote once per place, so two
 * entries at one place cannot both be confirmed: a credit whose source
 * is confirmed can no longer be forked away, and that is the only kind a
 * node takes in (ns_ledger_set_confirm).
 *
 * Types:
 *   21 VOTE      gossiped: [[entry id]...]  ids the sender holds, batched
 *                per window; counted only from a committee member
 *   22 VOTE_REQ  direct: [[entry id]...]   "your votes on these, please";
 *                a member publishes a VOTE of those it holds (and sends
 *                it to the asker as well)
 */
#ifndef NIGHTSHIFT_LEDGER_VOTES_H
#define NIGHTSHIFT_LEDGER_VOTES_H

#include "nightshift/ledger.h"
#include "nightshift/p2p.h"

#define NS_MSG_VOTE 21
#define NS_MSG_VOTE_REQ 22

#define NS_VOTE_IDS_MAX 256 /* ids per VOTE or VOTE_REQ */
/* Our votes go out in one VOTE per this window (at once with an AWARD or
 * a RESULT, which a provider or a requester waits on). */
#define NS_VOTE_FLUSH_MS 500
#define NS_VOTE_TABLE 8192  /* ids tallied at once (the oldest go first) */
#define NS_VOTE_SEATS 16    /* seats of a drawn committee */
#define NS_VOTE_SEATS_MAX 64 /* members a committee can hold (a bitmap) */
/* A drawn committee serves one epoch: epoch = wall clock ms / this. */
#define NS_VOTE_EPOCH_MS 60000
/* It is drawn from the stake as it stands this long into the epoch, once
 * stake has stood still this long (at the latest three times this in). */
#define NS_VOTE_SETTLE_MS 5000
#define NS_VOTE_ASK_MS 1000 /* how often credits waiting on a vote ask */
#define NS_VOTE_STAKE_MS                                                       \
    60000 /* the sum of all stake is read again at                             \
             least this often (and soon after stake                            \
             moves) */
#define NS_VOTE_RECENT_MS                                                      \
    600000 /* entries older than this (by their                                \
              timestamp) get a vote only when asked */

typedef struct ns_votes ns_votes_t;

/* An account and its weight: stake in, committee weight out. */
typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t weight;
} ns_vote_member_t;

/* The committee of an epoch from the stake of n accounts (any order;
 * those with no stake are left out) into out (room for seats, at most
 * NS_VOTE_SEATS_MAX), sorted by id; its size in *n_out. With at most
 * seats accounts holding stake: all of them, with their stake. Else
 * seats draws with replacement, each picks an account with a chance
 * equal to its share of the stake, and a member's weight is the number
 * of seats it drew. The draws come from seed = H("nightshift/committee/v1"
 * || network_id || epoch || H(each staked account's id and stake, in id
 * order)), written to seed_out when not NULL: every node holding the
 * same stake draws the same committee, and no one knows an epoch's
 * draw before the stake it is drawn from is fixed. The same inputs in
 * any order give the same committee. NS_ERR_NOMEM, NS_ERR_INVAL. */
int ns_votes_draw(const ns_hash_t network_id, uint64_t epoch,
                  const ns_vote_member_t *stakes, uint32_t n, uint32_t seats,
                  ns_vote_member_t *out, uint32_t *n_out,
                  ns_hash_t seed_out) NS_MUST_CHECK;

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

/* Tests: the seats of a drawn committee (default NS_VOTE_SEATS, at most
 * NS_VOTE_SEATS_MAX), the epoch length and the settle time in ms
 * (defaults NS_VOTE_EPOCH_MS, NS_VOTE_SETTLE_MS; settle at most a third
 * of the epoch). Every node of a network must use the same. The
 * committee is drawn again at the next look. */
void ns_votes_set_committee(ns_votes_t *v, uint32_t seats, uint64_t epoch_ms,
                            uint64_t settle_ms);
/* Whether account id sits on the committee now, and its weight there
 * (0: not a member). */
uint64_t ns_votes_member_weight(ns_votes_t *v, const uint8_t id[NS_ID_BYTES]);

/* Counters for status --json: a map. */
void ns_votes_pack_status(ns_votes_t *v, msgpack_packer *pk);

#endif
