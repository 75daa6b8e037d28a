/* ledger_apply.h - validating and applying one entry: load the records
 * its rules need through the store, run the rules (ledger_rules.h), write
 * what they changed (internal to market/ledger*.c).
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_APPLY_H
#define NIGHTSHIFT_MARKET_LEDGER_APPLY_H

#include "ledger_store.h"

typedef struct {
    ns_lstore_t *store;
    ns_ledger_totals_t *totals; /* changed in place; the caller restores
                                   them when the entry is rejected */
    ns_slash_verifier_fn verifier;
    void *verifier_user;
    ns_hash_t missing; /* out: on NS_ERR_MISSING, the entry needed */
    bool wrote;        /* out: the entry passed every check and writing
                          began (an error then is the store's) */
    bool adopt;        /* in: e is confirmed; apply it although its author is
                          banned (the author stays banned) */
    /* NULL, or: called with the author's account before an entry that
     * passed every check; true: the caller moves the digest for it
     * later (ns_rule_digest_move), false: it is moved here. */
    bool (*defer_digest)(void *u, const ns_account_t *pre);
    void *defer_user;
} ns_lapply_t;

/* Validate the decoded entry e (encoded in buf) against its author's
 * chain and the rules, and store it with its effects, all in t. Every
 * check is done before the first write: an entry the rules reject
 * (ap->wrote false) leaves t as it was, and t goes on. An error once
 * writing began (ap->wrote true: the store's, such as NS_ERR_MAPFULL)
 * leaves partial writes, and LMDB refuses to commit t: the caller aborts
 * it. */
int ns_lapply_entry(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                    const uint8_t *buf, size_t len) NS_MUST_CHECK;

#endif
