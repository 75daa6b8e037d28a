/* ledger_rules.h - the ledger's rules, one pure function per entry type
 * (internal to market/ledger*.c). Rules: docs/PROTOCOL.md, "Ledger".
 *
 * A rule reads the records the apply step (ledger_apply.c) loaded for it
 * and changes them in place, saying which ones to write back; it never
 * touches LMDB. Each loaded record comes with the ns_err its load
 * returned (NS_OK, NS_ERR_NOTFOUND or a storage error): a rule reports
 * it at the point where the check needing that record stands, so the
 * error an entry gets does not depend on what was loaded up front.
 * On an error the apply step writes nothing (the entry's transaction is
 * aborted and the totals restored).
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_RULES_H
#define NIGHTSHIFT_MARKET_LEDGER_RULES_H

#include "ledger_records.h"

#include "nightshift/genesis.h"
#include "nightshift/ledger.h"

#include <stdbool.h>
#include <stdint.h>

/* A stored entry named by another (body ids), decoded with its body. */
typedef struct {
    int rc; /* its load; NS_ERR_NOTFOUND: not known yet */
    ns_entry_t e;
    ns_entry_body_t b;
} ns_rule_ref_t;

/* What a body rule works on. The apply step loads, for the entry's type:
 *   JOB, AWARD        job
 *   ACCEPT            ref (the AWARD), job, lock and pjob of (author,
 *                     award)
 *   RESULT            ref (the ACCEPT), pjob of (author, award), job
 *   SETTLE, SLASH     ref (the RESULT), accept (its ACCEPT), job, prov;
 *                     SLASH: lock of (provider, award)
 *   CANCEL            job; with an accept id: ref (the ACCEPT), lock of
 *                     (provider, award), prov
 *   CLOSE             ref (the RESULT, ACCEPT or AWARD), accept (behind a
 *                     RESULT), lock and pjob of (author, award), job, req
 * A record that depends on another is loaded only when that one loaded. */
typedef struct {
    /* in */
    const ns_entry_t *e;
    const ns_entry_body_t *b;
    const uint8_t *network_id;     /* bids in AWARD are signed for it */
    ns_slash_verifier_fn verifier; /* SLASH's fraud-proof check or NULL */
    void *verifier_user;
    uint64_t close_window_ms; /* the genesis's; 0: the default */
    /* in/out */
    ns_account_t *author;       /* e's author, refs already taken in */
    ns_ledger_totals_t *totals; /* pending and burned credits */
    ns_rule_ref_t ref;          /* the entry b->ref_id names */
    ns_rule_ref_t accept;       /* SETTLE, SLASH: the ACCEPT behind ref */
    int job_rc;
    ns_ledger_job_t job; /* b->job_id */
    int prov_rc;
    ns_account_t prov; /* the job's provider */
    int req_rc;
    ns_account_t req; /* CLOSE: the job's requester */
    int lock_rc;
    ns_lock_rec_t lock; /* key: key_provider, key_award */
    int pjob_rc;
    ns_pjob_rec_t pjob;                /* same key */
    uint8_t key_provider[NS_ID_BYTES]; /* set by the apply step */
    ns_hash_t key_award;               /* set by the apply step */
    /* out: what to write back */
    bool put_job, put_prov, put_req, put_lock, put_pjob, put_credit;
    ns_credit_rec_t credit;         /* a new credit from e (e->id, to) */
    uint8_t credit_to[NS_ID_BYTES]; /* its recipient */
    ns_hash_t missing;              /* on NS_ERR_MISSING: the id needed */
} ns_rule_io_t;

/* A genesis allocation as the account it starts. */
void ns_rule_genesis(const ns_genesis_t *g, uint32_t i, ns_account_t *a);

/* Where e stands on its author's chain a: NS_OK when it is the next
 * entry; otherwise NS_ERR_DUPLICATE or NS_ERR_FORK (have: the id stored
 * at e->seq, needed when e->seq <= a->seq), BANNED, GAP, PREV or STALE. */
int ns_rule_chain(const ns_account_t *a, const ns_entry_t *e,
                  const ns_hash_t have);
/* e becomes its author's head; the digest follows unless digest is
 * false (the caller then moves it with ns_rule_digest_move, once for all
 * the entries of a batch). */
void ns_rule_advance(ns_account_t *a, const ns_entry_t *e,
                     ns_ledger_totals_t *totals, bool digest);
/* The digest of a chain of author that ended at (from_seq, from_head)
 * and now ends at (to_seq, to_head) (seq 0: no entries). */
void ns_rule_digest_move(ns_hash_t digest, const uint8_t *author,
                         uint64_t from_seq, const ns_hash_t from_head,
                         uint64_t to_seq, const ns_hash_t to_head);

/* An author goes back to pre, its account just before a seq (banned
 * when ban: a forked author; kept as it is otherwise: an author whose
 * entries built on a forked one's); the digest follows (its chain now
 * ends at pre's head).
 * What only other chains change stays as it is now (its counters as a
 * provider); locked_collateral is the sum of its locks still locked
 * (a SLASH or a penalty of another chain may have taken part of it
 * after the pre-state was taken, or before: nodes differ), and
 * locked_escrow the escrow of its jobs still open or awarded (a CLOSE
 * of another chain may have ended one, before or after). */
void ns_rule_rewind(ns_account_t *a, const ns_account_t *pre,
                    uint64_t locked_collateral, uint64_t locked_escrow,
                    bool ban, ns_ledger_totals_t *totals);

/* Taking in the credit e->refs[i] (ref) for its author. */
typedef struct {
    int credit_rc; /* load of the credit (ref, author) */
    ns_credit_rec_t credit;
    bool ref_known; /* credit missing: whether ref is a stored entry */
    int lock_rc;    /* credit releases an award: load of the author's lock */
    ns_lock_rec_t lock;
    bool put_lock; /* out: write the lock back (the credit always) */
} ns_rule_claim_t;

/* NS_ERR_CLAIMED if refs[i] repeats an earlier ref of e. */
int ns_rule_ref_distinct(const ns_entry_t *e, uint32_t i);
int ns_rule_claim(ns_account_t *a, ns_ledger_totals_t *totals,
                  ns_rule_claim_t *c);

/* The body rules; ns_rule_body picks by e->type. */
int ns_rule_transfer(ns_rule_io_t *io);
int ns_rule_stake(ns_rule_io_t *io);
int ns_rule_unstake(ns_rule_io_t *io);
int ns_rule_job(ns_rule_io_t *io);
int ns_rule_award(ns_rule_io_t *io);
int ns_rule_accept(ns_rule_io_t *io);
int ns_rule_result(ns_rule_io_t *io);
int ns_rule_settle(ns_rule_io_t *io);
int ns_rule_slash(ns_rule_io_t *io);
int ns_rule_cancel(ns_rule_io_t *io);
int ns_rule_close(ns_rule_io_t *io);
int ns_rule_body(ns_rule_io_t *io);

/* When an award of job stops being its requester's to end and becomes
 * its provider's to close: the job's deadline plus the close window
 * (window 0: the default), saturated. */
uint64_t ns_rule_close_at(const ns_ledger_job_t *job, uint64_t window_ms);

#endif
