/* ledger_records.h - the records the ledger derives from its entries, as
 * they are stored in LMDB (internal to market/ledger*.c).
 *
 * The structs are stored byte for byte: changing a field changes the
 * on-disk format. Keys:
 *   credits   source entry id || recipient      -> ns_credit_rec_t
 *   locks     provider || award id              -> ns_lock_rec_t
 *   pjobs     provider || award id              -> ns_pjob_rec_t
 *   forks     author                            -> ns_fork_rec_t
 *   undo      entry id                          -> ns_undo_rec_t (+ its
 *                                                  released locks)
 *   meta      "totals"                          -> ns_ledger_totals_t
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_RECORDS_H
#define NIGHTSHIFT_MARKET_LEDGER_RECORDS_H

#include "nightshift/ledger.h"

#include <stdint.h>
#include <string.h>

enum { NS_CREDIT_OPEN = 0, NS_CREDIT_CLAIMED = 1 };
enum { NS_LOCK_LOCKED = 1, NS_LOCK_RELEASED = 2, NS_LOCK_BURNED = 3 };

typedef struct {
    uint64_t amount;         /* free credits */
    ns_hash_t release_award; /* zero, or: release the lock of this award */
    uint8_t state;           /* NS_CREDIT_* */
} ns_credit_rec_t;

typedef struct {
    uint64_t amount; /* collateral still locked (after penalties) */
    uint8_t state;   /* NS_LOCK_* */
} ns_lock_rec_t;

typedef struct {
    ns_hash_t job_id;
    ns_hash_t accept_id;
    ns_hash_t result_id; /* zero until RESULT */
} ns_pjob_rec_t;

typedef struct {
    uint64_t seq;
    ns_hash_t first, second; /* the two entry ids */
} ns_fork_rec_t;

/* What an entry changed outside its author's account, as it was before
 * and after, so that a fork can take the entry back (ledger.c, s_void):
 * written for job entries (JOB to CANCEL) and for entries whose refs
 * release a lock; other entries need none (their credit is found from
 * the body). A record another entry changed since (its current value is
 * not `post`) means someone built on the entry: it is not taken back. */
enum {
    NS_UNDO_JOB = 1u << 0,      /* job_pre / job_post */
    NS_UNDO_JOB_NEW = 1u << 1,  /* the entry created the job */
    NS_UNDO_LOCK = 1u << 2,     /* lock (key_provider, key_award) */
    NS_UNDO_LOCK_NEW = 1u << 3, /* ... created by the entry */
    NS_UNDO_PJOB = 1u << 4,     /* pjob (key_provider, key_award) */
    NS_UNDO_PJOB_NEW = 1u << 5, /* ... created by the entry */
    NS_UNDO_CREDIT = 1u << 6,   /* a credit (entry id, credit_to) */
    NS_UNDO_PROV = 1u << 7,     /* counters of account prov moved */
};

typedef struct {
    ns_hash_t award;   /* the lock (entry's author, award) */
    ns_lock_rec_t pre; /* before the claim; amount 0 and state 0: none */
} ns_undo_release_t;

typedef struct {
    uint32_t flags; /* NS_UNDO_* */
    uint32_t n_released;
    ns_ledger_job_t job_pre, job_post;
    uint8_t key_provider[NS_ID_BYTES];
    ns_hash_t key_award;
    ns_lock_rec_t lock_pre, lock_post;
    ns_pjob_rec_t pjob_pre, pjob_post;
    uint8_t credit_to[NS_ID_BYTES];
    uint8_t prov[NS_ID_BYTES];
    uint32_t d_settled, d_slashed, d_cancelled; /* added to prov */
    uint64_t burned;                            /* added to totals.burned */
    /* followed by n_released ns_undo_release_t */
} ns_undo_rec_t;

typedef struct {
    uint64_t total, burned, pending, entries, forks;
    ns_hash_t digest;
} ns_ledger_totals_t;

/* author || seq (u64 big-endian): the chain key, also hashed into the
 * digest. */
static inline void ns_ledger_chain_key(uint8_t out[40], const uint8_t *author,
                                       uint64_t seq)
{
    memcpy(out, author, 32);
    for (int i = 0; i < 8; i++)
        out[32 + i] = (uint8_t)(seq >> (56 - 8 * i));
}

#endif
