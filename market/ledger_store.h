/* ledger_store.h - the ledger's LMDB environment and typed get/put of each
 * record kind (internal to market/ledger*.c).
 *
 * Databases (one LMDB environment in <datadir>/ledger):
 *   entries   id -> encoded entry
 *   chain     author || seq (u64 BE) -> id || ns_account_t: the entry,
 *             and its author's account just before it (fork proofs are
 *             checked against it, ledger_apply.c); one record, so that
 *             an entry costs one insert less
 *   accounts  author -> ns_account_t
 *   credits, locks, pjobs, forks, meta: see ledger_records.h
 *   jobs      job id -> ns_ledger_job_t (requester's side)
 *   forkentries: id -> encoded entry (the second of a fork, and the
 *             entries a fork voided)
 *   undo      entry id -> ns_undo_rec_t and its released locks: what a
 *             job entry changed outside its author's account (forks
 *             take it back)
 *   prestate  author || seq (u64 BE) -> ns_account_t: the account
 *             before an entry, in ledgers written before chain held it
 *             (read, never written)
 *   meta      "network_id", "totals"
 * Every call works in the transaction it is given and returns ns_err;
 * LMDB codes are mapped by ns_lstore_rc, which remembers the text of the
 * last storage error.
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_STORE_H
#define NIGHTSHIFT_MARKET_LEDGER_STORE_H

#include "ledger_records.h"

#include "nightshift/ledger.h"
#include "nightshift/log.h"

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A record put in the open batch, not yet in its database. */
#define NS_LSTORE_KEY_MAX 64 /* the largest key buffered: a credit's */
typedef struct {
    uint8_t key[NS_LSTORE_KEY_MAX]; /* zero past the database's key size */
    uint8_t *val;                   /* malloc'd copy */
    size_t len;
} ns_lstore_pending_t;

/* The records put in one database in the open batch: v in arrival
 * order, slots an open-addressing index into it (i + 1, 0 empty). */
typedef struct {
    size_t klen; /* the database's key size */
    ns_lstore_pending_t *v;
    uint32_t n, cap;
    uint32_t *slots;
    uint32_t n_slots; /* a power of two, at least 2 n */
} ns_lstore_wbuf_t;

typedef struct {
    MDB_env *env;
    MDB_dbi entries, chain, accounts, credits, locks, pjobs, jobs, forks,
        forkentries, prestate, meta, undo;
    bool has_undo; /* false: a read-only view of a ledger without it */
    ns_hash_t network_id;     /* entries are parsed for this network */
    uint64_t close_window_ms; /* the genesis close window (CLOSE, and the
                                 requester's last moment to end an award) */
    int last_rc;              /* LMDB or errno code of the last storage error */
    char last_error[128];     /* its text (mdb_strerror); "" if none */
    ns_ratelimit_t log_limit; /* storage error log lines */
    /* Entries, chain records, accounts and credits put in the batch (the
     * write transaction wb_txn, set by the ledger; NULL: none), kept here
     * and written to their databases in key order by ns_lstore_flush (put
     * one by one as entries come, an entry's id or a credit's source is
     * random and lands on a leaf of its own, and each author's chain
     * record on its author's leaf: far from the last put either way; an
     * account is put again with each of its author's entries). Gets in
     * wb_txn read them here first; puts in any other transaction (the
     * child transactions of a fork, which come after a flush) go
     * straight to LMDB. Indexed by SipHash with a random key. */
    MDB_txn *wb_txn;
    ns_lstore_wbuf_t put_entries, put_chain, put_accounts, put_credits;
    uint8_t wbuf_key[16];
} ns_lstore_t;

/* LMDB (or errno) code -> ns_err: MDB_MAP_FULL is NS_ERR_MAPFULL, other
 * failures of LMDB or the OS NS_ERR_IO or NS_ERR_CORRUPT, whose code and
 * text are kept in last_rc, last_error and logged (rate-limited). */
int ns_lstore_rc(ns_lstore_t *s, int mdb_rc);

/* Create and open the environment in dir and its databases in a new
 * transaction *t (write, or read-only when readonly), which the caller
 * commits with ns_lstore_commit or aborts. Failures say why in err. */
int ns_lstore_open(ns_lstore_t *s, const char *dir, bool readonly,
                   uint64_t map_bytes, MDB_txn **t, char *err,
                   size_t errlen) NS_MUST_CHECK;
void ns_lstore_close(ns_lstore_t *s);
/* A transaction: parent NULL or a write transaction to nest in. */
int ns_lstore_begin(ns_lstore_t *s, MDB_txn *parent, bool readonly,
                    MDB_txn **t) NS_MUST_CHECK;
/* Commit t (synced); t is gone whatever the result. */
int ns_lstore_commit(ns_lstore_t *s, MDB_txn *t) NS_MUST_CHECK;

/* An account; one never written reads as new and all zero. */
int ns_lstore_account_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *id,
                          ns_account_t *a) NS_MUST_CHECK;
int ns_lstore_account_put(ns_lstore_t *s, MDB_txn *t,
                          const ns_account_t *a) NS_MUST_CHECK;
/* The others: NS_ERR_NOTFOUND when absent. */
int ns_lstore_job_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t job_id,
                      ns_ledger_job_t *j) NS_MUST_CHECK;
int ns_lstore_job_put(ns_lstore_t *s, MDB_txn *t,
                      const ns_ledger_job_t *j) NS_MUST_CHECK;
/* Forget a job (its JOB entry was voided by a fork before any award). */
int ns_lstore_job_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t job_id);
int ns_lstore_credit_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to, ns_credit_rec_t *c) NS_MUST_CHECK;
int ns_lstore_credit_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to,
                         const ns_credit_rec_t *c) NS_MUST_CHECK;
int ns_lstore_lock_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, ns_lock_rec_t *k) NS_MUST_CHECK;
int ns_lstore_lock_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award,
                       const ns_lock_rec_t *k) NS_MUST_CHECK;
int ns_lstore_pjob_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, ns_pjob_rec_t *p) NS_MUST_CHECK;
int ns_lstore_pjob_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award,
                       const ns_pjob_rec_t *p) NS_MUST_CHECK;
int ns_lstore_lock_del(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award) NS_MUST_CHECK;
int ns_lstore_pjob_del(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award) NS_MUST_CHECK;
/* Sum of the amounts of provider's locks still LOCKED: its
 * locked_collateral (every change to one changes the other). */
int ns_lstore_locked_sum(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                         uint64_t *sum) NS_MUST_CHECK;
/* The escrow of requester's jobs still open or awarded: what its
 * locked_escrow holds (every rule moves the two together). A scan of
 * every job: only a fork's rewind asks. */
int ns_lstore_escrow_sum(ns_lstore_t *s, MDB_txn *t, const uint8_t *requester,
                         uint64_t *sum) NS_MUST_CHECK;
/* Visit every job (by id) until fn returns false. */
void ns_lstore_each_job(ns_lstore_t *s, MDB_txn *t,
                        bool (*fn)(void *u, const ns_ledger_job_t *j), void *u);
/* The undo record of entry id (ledger_records.h): u and up to max
 * released locks into rel (*n_rel: how many). NS_ERR_NOTFOUND when the
 * entry has none. */
int ns_lstore_undo_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                       ns_undo_rec_t *u, ns_undo_release_t *rel,
                       uint32_t max) NS_MUST_CHECK;
int ns_lstore_undo_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                       const ns_undo_rec_t *u,
                       const ns_undo_release_t *rel) NS_MUST_CHECK;
int ns_lstore_undo_del(ns_lstore_t *s, MDB_txn *t,
                       const ns_hash_t id) NS_MUST_CHECK;
/* Id of the entry (author, seq). */
int ns_lstore_chain_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                        uint64_t seq, ns_hash_t id) NS_MUST_CHECK;
/* pre: author's account just before the entry at seq. */
int ns_lstore_chain_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                        uint64_t seq, const ns_hash_t id,
                        const ns_account_t *pre) NS_MUST_CHECK;
/* Encoded entry by id: *buf points into t's memory. */
/* Forget what an entry stored: its credit for `to`, its chain slot and
 * pre-state, its bytes (kept in forkentries instead, as the proof of why
 * it went). For undoing a forked author's entries (ledger.c). */
int ns_lstore_credit_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to) NS_MUST_CHECK;
int ns_lstore_entry_void(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                         uint64_t seq, const ns_hash_t id) NS_MUST_CHECK;
/* The same without the proof: the entry's bytes, chain slot and
 * pre-state are gone (an entry of another chain that a void takes back
 * with what it built on: it waits in the out-of-order buffer again). */
int ns_lstore_entry_forget(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                           uint64_t seq, const ns_hash_t id) NS_MUST_CHECK;
/* Whether id is an entry voided by a fork or kept as a fork's proof. */
bool ns_lstore_fork_entry_known(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id);
/* The author's account as it was before its entry at seq was applied
 * (NS_ERR_NOTFOUND for entries stored before this record existed). */
int ns_lstore_prestate_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                           uint64_t seq, ns_account_t *a) NS_MUST_CHECK;
int ns_lstore_entry_bytes(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                          const uint8_t **buf, size_t *len) NS_MUST_CHECK;
/* Decode a stored entry (verified when stored: no signature check) and,
 * if b, its body. e borrows t's memory. NS_ERR_CORRUPT if unreadable. */
int ns_lstore_entry_load(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                         ns_entry_t *e, ns_entry_body_t *b) NS_MUST_CHECK;
/* Store an entry's bytes in t (in wb_txn: kept in memory until
 * ns_lstore_flush writes them into it; ns_lstore_entry_bytes and
 * ns_lstore_entry_load find them meanwhile). */
int ns_lstore_entry_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                        const uint8_t *buf, size_t len) NS_MUST_CHECK;
/* Write the kept records into wb_txn in key order and forget them (also
 * on an error: the transaction is then lost, and so are they). Before it
 * commits and before a child transaction of it is begun; the queries
 * that walk a database with a cursor flush that database's first. */
int ns_lstore_flush(ns_lstore_t *s) NS_MUST_CHECK;
/* Forget the kept records (t aborted). */
void ns_lstore_drop(ns_lstore_t *s);
/* Every fork record (author, record) / every entry kept in forkentries
 * (id, bytes in t's memory), until fn returns false. */
void ns_lstore_each_fork(ns_lstore_t *s, MDB_txn *t,
                         bool (*fn)(void *u, const uint8_t *author,
                                    const ns_fork_rec_t *f),
                         void *u);
void ns_lstore_each_fork_entry(ns_lstore_t *s, MDB_txn *t,
                               bool (*fn)(void *u, const uint8_t *id,
                                          const uint8_t *buf, size_t len),
                               void *u);
/* Forget a fork record / an entry kept in forkentries. */
int ns_lstore_fork_del(ns_lstore_t *s, MDB_txn *t,
                       const uint8_t *author) NS_MUST_CHECK;
int ns_lstore_fork_entry_del(ns_lstore_t *s, MDB_txn *t,
                             const ns_hash_t id) NS_MUST_CHECK;
/* The author's fork record (the seq it forked at). NS_ERR_NOTFOUND. */
int ns_lstore_fork_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                       ns_fork_rec_t *f) NS_MUST_CHECK;
int ns_lstore_fork_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                       const ns_fork_rec_t *f, const uint8_t *buf,
                       size_t len) NS_MUST_CHECK;
int ns_lstore_network_get(ns_lstore_t *s, MDB_txn *t,
                          ns_hash_t id) NS_MUST_CHECK;
int ns_lstore_network_put(ns_lstore_t *s, MDB_txn *t,
                          const ns_hash_t id) NS_MUST_CHECK;
int ns_lstore_totals_get(ns_lstore_t *s, MDB_txn *t,
                         ns_ledger_totals_t *tot) NS_MUST_CHECK;
int ns_lstore_totals_put(ns_lstore_t *s, MDB_txn *t,
                         const ns_ledger_totals_t *tot) NS_MUST_CHECK;

/* ---- queries ----------------------------------------------------------- */

/* Sum of free + staked + locked over all accounts. */
int ns_lstore_sum_accounts(ns_lstore_t *s, MDB_txn *t,
                           uint64_t *sum) NS_MUST_CHECK;
int ns_lstore_count_accounts(ns_lstore_t *s, MDB_txn *t,
                             uint64_t *n) NS_MUST_CHECK;
/* Up to max ids of open credits for `to`, but those skip says to leave
 * for later (told whether the source's author is banned). Without skip,
 * credits made by an author now banned are left out (a forked author's
 * credits may be voided, or held on another branch by other nodes, and a
 * claim of one would stall the claimant's chain there: docs/PROTOCOL.md,
 * "Forks"). */
uint32_t ns_lstore_unclaimed(
    ns_lstore_t *s, MDB_txn *t, const uint8_t *to, uint8_t *ids, uint32_t max,
    bool (*skip)(void *u, const uint8_t *src, bool by_banned), void *u);
/* The bytes of an entry kept in forkentries (voided, or a fork's proof). */
int ns_lstore_fork_entry_bytes(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                               const uint8_t **buf, size_t *len);
void ns_lstore_each_account(ns_lstore_t *s, MDB_txn *t,
                            bool (*fn)(void *u, const ns_account_t *a),
                            void *u);
void ns_lstore_each_entry(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                          bool (*fn)(void *u, const ns_entry_t *e), void *u);

#endif
