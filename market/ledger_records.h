/* ledger_records.h - the records the ledger derives from its entries, as
 * they are stored in LMDB (internal to market/ledger*.c).
 *
 * The structs are stored byte for byte: changing a field changes the
 * on-disk format. Keys:
 *   credits   source entry id || recipient      -> ns_credit_rec_t
 *   locks     provider || award id              -> ns_lock_rec_t
 *   pjobs     provider || award id              -> ns_pjob_rec_t
 *   forks     author                            -> ns_fork_rec_t
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
