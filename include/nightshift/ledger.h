/* ledger.h - the signed block-lattice ledger in LMDB (market layer).
 *
 * Every account writes only its own hash-chained list of signed entries
 * {author, seq, prev, type, body, refs, timestamp, sig}. Balances, escrow,
 * stake, collateral and job state are derived deterministically from the
 * entries: every node holding the same entries computes the same state.
 * An entry's validity depends only on its author's earlier entries and on
 * entries it names explicitly (refs and ids in its body), never on arrival
 * order. Rules: docs/PROTOCOL.md, "Ledger".
 *
 * Credits from another account's entry (a TRANSFER, a SETTLE's payment, a
 * collateral release) are taken in only by listing that entry in `refs` of
 * the receiver's next entry, each once.
 *
 * Durability: ns_ledger_append and ns_ledger_commit return only after the
 * LMDB transaction is synced; what they report stored survives kill -9.
 * Entries from the network (ns_ledger_ingest) are batched: the caller
 * commits when ns_ledger_commit_due says so (NS_LEDGER_COMMIT_ENTRIES,
 * _BYTES, _MS, whichever comes first), and before it reports any of
 * them to a user.
 */
#ifndef NIGHTSHIFT_LEDGER_H
#define NIGHTSHIFT_LEDGER_H

#include "nightshift/config.h"
#include "nightshift/err.h"
#include "nightshift/genesis.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/wire.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_ENTRY_VERSION 1
#define NS_ENTRY_DOMAIN "nightshift/entry/v1"
#define NS_BID_DOMAIN "nightshift/bid/v1"
#define NS_MAX_ENTRY_BODY (64 * 1024)                 /* body bytes */
#define NS_MAX_ENTRY_BYTES (NS_MAX_ENTRY_BODY + 4096) /* encoded entry */
#define NS_MAX_REFS 32           /* credits claimed by one entry */
#define NS_MAX_PROOF (48 * 1024) /* fraud proof bytes in a SLASH */
/* The out-of-order buffer (entries waiting for their author's previous
 * entry or for an entry they name): a cap on its bytes, and one author's
 * share of it, so that one author cannot crowd the others out. */
#define NS_LEDGER_BUFFER_BYTES (64u * 1024 * 1024)
#define NS_LEDGER_BUFFER_AUTHOR_BYTES (NS_LEDGER_BUFFER_BYTES / 16)
/* The commit policy for ingested entries (ns_ledger_commit_due): a synced
 * commit costs milliseconds whatever it holds, so entries from the network
 * wait for this many, or this many bytes, or this long after the first of
 * them was stored, whichever comes first. Own appends commit at once. */
#define NS_LEDGER_COMMIT_ENTRIES 8192
#define NS_LEDGER_COMMIT_BYTES (8u * 1024 * 1024) /* encoded entries */
#define NS_LEDGER_COMMIT_MS 1000
#define NS_LEDGER_MAP_BYTES NS_DEFAULT_LEDGER_MAP_BYTES /* config.h */
/* Entries whose local arrival time is kept for the claim delay
 * (ns_ledger_set_claim_delay). */
#define NS_LEDGER_RECENT 4096

typedef enum {
    NS_ENTRY_TRANSFER = 1, /* [to, amount] free -> credit for `to` */
    NS_ENTRY_STAKE = 2,    /* [amount] free -> staked */
    NS_ENTRY_UNSTAKE = 3,  /* [amount] staked -> free */
    NS_ENTRY_JOB = 4,      /* [job_id, escrow, max_price, collateral,
                              deadline_ms, desc_id, nonce] free -> escrow;
                              job_id = ns_ledger_job_id(author, desc_id,
                              nonce) */
    NS_ENTRY_AWARD = 5,    /* [job_id, bid] picks a provider's signed bid */
    NS_ENTRY_ACCEPT = 6,   /* [job_id, award_id] staked -> collateral */
    NS_ENTRY_RESULT = 7,   /* [job_id, accept_id, root, n_items] */
    NS_ENTRY_SETTLE = 8,   /* [job_id, result_id] pays, refunds, releases */
    NS_ENTRY_SLASH = 9,    /* [job_id, result_id, proof] burns collateral */
    NS_ENTRY_CANCEL = 10,  /* [job_id, accept_id|zero, reopen, deadline] */
    NS_ENTRY_CLOSE = 11,   /* [job_id, result_id|accept_id|award_id] the
                              award's provider ends a job its requester left
                              past deadline + the genesis close window */
} ns_entry_type;
#define NS_ENTRY_TYPE_MAX 11

/* A decoded entry; body and refs borrow from the encoded bytes. */
typedef struct {
    uint8_t author[NS_ID_BYTES];
    uint64_t seq;   /* 1, 2, ... */
    ns_hash_t prev; /* id of seq - 1; zero for seq 1 */
    uint8_t type;   /* ns_entry_type */
    const uint8_t *body;
    size_t body_len;
    uint32_t n_refs;
    const uint8_t *refs; /* n_refs * 32 bytes */
    uint64_t timestamp_ms;
    uint8_t sig[NS_SIG_BYTES];
    ns_hash_t id; /* H(domain || network_id || signed part) */
} ns_entry_t;

/* A provider's signed bid, embedded in AWARD. */
typedef struct {
    uint8_t provider[NS_ID_BYTES];
    ns_hash_t job_id;
    uint64_t price;  /* micro-credits */
    uint64_t est_ms; /* estimated run time */
    uint64_t timestamp_ms;
    uint8_t sig[NS_SIG_BYTES]; /* over NS_BID_DOMAIN || network || fields */
} ns_bid_t;

/* Typed view of a body (which fields are set depends on the type). */
typedef struct {
    uint8_t to[NS_ID_BYTES]; /* TRANSFER */
    uint64_t amount;         /* TRANSFER, STAKE, UNSTAKE */
    ns_hash_t job_id;        /* job entries */
    uint64_t escrow, max_price, collateral, deadline_ms; /* JOB */
    ns_hash_t desc_id;    /* JOB: hash of the job descriptor (job.h) */
    uint8_t nonce[16];    /* JOB: makes each submission's id unique */
    ns_bid_t bid;         /* AWARD */
    ns_hash_t ref_id;     /* ACCEPT: award; RESULT: accept; SETTLE,
                             SLASH: result; CANCEL: accept or zero;
                             CLOSE: result, accept or award */
    ns_hash_t root;       /* RESULT */
    uint64_t n_items;     /* RESULT */
    const uint8_t *proof; /* SLASH, borrowed */
    size_t proof_len;
    bool reopen;              /* CANCEL */
    uint64_t new_deadline_ms; /* CANCEL with reopen */
} ns_entry_body_t;

/* Encode and sign an entry (seq, prev set by the caller). */
int ns_entry_encode(const ns_identity_t *author, const ns_hash_t network_id,
                    uint64_t seq, const ns_hash_t prev, uint8_t type,
                    const uint8_t *body, size_t body_len, const uint8_t *refs,
                    uint32_t n_refs, uint64_t timestamp_ms, ns_buf_t *out,
                    ns_hash_t id) NS_MUST_CHECK;
/* Strict decode and id, without the signature check: only for entries
 * read back from our own store, which were verified when stored. */
int ns_entry_parse(const uint8_t *buf, size_t len, const ns_hash_t network_id,
                   ns_entry_t *e) NS_MUST_CHECK;
/* Strict decode, id computed, signature checked. entry borrows buf. */
int ns_entry_decode(const uint8_t *buf, size_t len, const ns_hash_t network_id,
                    ns_entry_t *e) NS_MUST_CHECK;
int ns_entry_body_decode(const ns_entry_t *e, ns_entry_body_t *b) NS_MUST_CHECK;
int ns_entry_body_encode(uint8_t type, const ns_entry_body_t *b,
                         ns_buf_t *out) NS_MUST_CHECK;
const char *ns_entry_type_name(uint32_t type);

/* A job's id: H("nightshift/jobid/v1" || requester || desc_id || nonce).
 * Binding the requester makes a JOB's validity independent of other
 * accounts' entries (nobody can take another's job id first). */
void ns_ledger_job_id(ns_hash_t out, const uint8_t requester[NS_ID_BYTES],
                      const ns_hash_t desc_id, const uint8_t nonce[16]);

void ns_bid_sign(ns_bid_t *bid, const ns_identity_t *provider,
                 const ns_hash_t network_id);
int ns_bid_verify(const ns_bid_t *bid,
                  const ns_hash_t network_id) NS_MUST_CHECK;

/* ---- the store -------------------------------------------------------- */

typedef struct ns_ledger ns_ledger_t;

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t free;              /* spendable, micro-credits (every ledger
                                   amount is in micro-credits) */
    uint64_t staked;            /* staked, not locked */
    uint64_t locked_escrow;     /* escrow of open jobs */
    uint64_t locked_collateral; /* collateral of accepted jobs */
    uint64_t seq;               /* head seq (0: no entries) */
    ns_hash_t head;             /* head id */
    uint64_t head_timestamp_ms;
    bool banned; /* forked its chain */
    uint32_t jobs_posted, jobs_settled_as_requester;
    uint32_t jobs_settled, jobs_slashed, jobs_cancelled; /* as provider */
} ns_account_t;

typedef enum {
    NS_JOB_OPEN = 1,      /* escrow locked, no live award */
    NS_JOB_AWARDED = 2,   /* an award is live */
    NS_JOB_SETTLED = 3,   /* paid; closed */
    NS_JOB_CANCELLED = 4, /* refunded; closed */
} ns_job_state;

/* A job as its requester's chain defines it, plus what the current
 * award's provider has written. */
typedef struct {
    ns_hash_t job_id;
    uint8_t requester[NS_ID_BYTES];
    uint64_t escrow, max_price, collateral, deadline_ms;
    ns_hash_t desc_id;  /* the descriptor's id: commitments and fraud
                           proofs are about it */
    uint8_t state;      /* ns_job_state */
    uint32_t round;     /* awards so far */
    ns_hash_t award_id; /* current award (zero if none) */
    uint8_t provider[NS_ID_BYTES];
    uint64_t price;
    ns_hash_t accept_id; /* current award's ACCEPT, if seen */
    ns_hash_t result_id; /* current award's RESULT, if seen */
    ns_hash_t root;
    uint64_t n_items;
    uint32_t slashed; /* providers slashed on this job */
} ns_ledger_job_t;

/* The exec layer's fraud-proof check, supplied at start-up so that the
 * ledger does not depend on exec. NS_OK = proof valid (fraud shown);
 * NS_ERR_MISSING = data the check needs is not here yet: its hash in
 * missing, and the SLASH waits in the out-of-order buffer until
 * ns_ledger_data_arrived names that hash; any other error = not a proof
 * (the SLASH is rejected). */
typedef int (*ns_slash_verifier_fn)(void *user, const ns_ledger_job_t *job,
                                    const uint8_t *provider,
                                    const ns_hash_t root, uint64_t n_items,
                                    const uint8_t *proof, size_t len,
                                    uint8_t missing[NS_HASH_BYTES]);

/* Open (or create from the genesis) the ledger in dir. Checks the stored
 * network id and the conservation invariant; a mismatch or LMDB
 * corruption is NS_ERR_CORRUPT with a reason in err. */
ns_ledger_t *ns_ledger_open(const char *dir, const ns_genesis_t *genesis,
                            int *rc, char *err, size_t errlen);
/* For readers in other processes (the CLI): no writes, never blocks the
 * node's writer. NS_ERR_NOTFOUND if the node never created the ledger. */
ns_ledger_t *ns_ledger_open_readonly(const char *dir,
                                     const ns_genesis_t *genesis, int *rc,
                                     char *err, size_t errlen);
/* ns_ledger_open with an LMDB map of map_bytes instead of
 * NS_LEDGER_MAP_BYTES (0: that default). The map caps the ledger's size:
 * when it is full, writes fail with NS_ERR_MAPFULL and change nothing. */
ns_ledger_t *ns_ledger_open_mapsize(const char *dir,
                                    const ns_genesis_t *genesis,
                                    uint64_t map_bytes, int *rc, char *err,
                                    size_t errlen);
void ns_ledger_close(ns_ledger_t **l);
/* The cause of the last storage error a call on l met (LMDB's or the
 * OS's text, e.g. "No space left on device", "MDB_MAP_FULL: Environment
 * mapsize limit reached"), behind NS_ERR_IO, NS_ERR_MAPFULL or an LMDB
 * NS_ERR_CORRUPT; "" if none. Borrowed: valid until the next call on l.
 * Also logged (module ledger, event=storage_error). */
const char *ns_ledger_last_error(const ns_ledger_t *l);
void ns_ledger_set_verifier(ns_ledger_t *l, ns_slash_verifier_fn fn,
                            void *user);
/* The network id the ledger was opened with (its genesis's hash):
 * NS_HASH_BYTES, borrowed for the ledger's lifetime. */
const uint8_t *ns_ledger_network_id(const ns_ledger_t *l);
/* Confirmation of entries by the votes of staked accounts
 * (ledger_votes.c; docs/PROTOCOL.md, "Confirmation"). */
typedef enum {
    NS_CONFIRM_NONE = 0, /* nobody can vote: no account holds stake */
    NS_CONFIRM_NO = 1,   /* not (yet) voted by more than half the stake */
    NS_CONFIRM_YES = 2,  /* voted by more than half of all stake */
} ns_confirm_state;
typedef ns_confirm_state (*ns_ledger_confirm_fn)(void *u, const ns_hash_t id);
/* With it set: a credit is offered for claims only once its source entry
 * is confirmed (YES; with NONE, the claim delay and the ban alone
 * decide); a fork keeps its author's confirmed entries and voids only
 * the rest; and a confirmed entry of a banned author is applied in
 * place of an unconfirmed one (the branch the stake voted for wins). */
void ns_ledger_set_confirm(ns_ledger_t *l, ns_ledger_confirm_fn fn, void *user);
/* Whether the stake voted for entry id: the confirmation hook's answer,
 * NS_CONFIRM_NONE without one. On NS_CONFIRM_NO the want hook (the votes
 * module) hears of it, to ask peers for their votes on id while the
 * caller waits (a provider's AWARD, a requester's RESULT). */
ns_confirm_state ns_ledger_confirmation(ns_ledger_t *l, const ns_hash_t id);
typedef void (*ns_ledger_want_fn)(void *u, const ns_hash_t id);
void ns_ledger_set_on_want(ns_ledger_t *l, ns_ledger_want_fn fn, void *user);
/* Called once for each entry stored (ingested, retried or appended),
 * inside the batch: what ledger_votes.c votes for. */
typedef void (*ns_ledger_stored_fn)(void *u, const ns_entry_t *e);
void ns_ledger_set_on_stored(ns_ledger_t *l, ns_ledger_stored_fn fn,
                             void *user);
/* Called for each fork proof stored, with the two entries' ids (the one
 * on the chain then, the other): whose confirmation to look for. */
typedef void (*ns_ledger_fork_fn)(void *u, const ns_hash_t first,
                                  const ns_hash_t second);
void ns_ledger_set_on_fork(ns_ledger_t *l, ns_ledger_fork_fn fn, void *user);
/* Called with the author of each entry stored (its chain's head moved),
 * inside the batch, after the stored hook; with NULL when heads may have
 * gone back (a batch lost or a commit failed, a fork's void): what the
 * incremental head exchange lists (ledger_heads.h). */
typedef void (*ns_ledger_head_fn)(void *u, const uint8_t *author);
void ns_ledger_set_on_head(ns_ledger_t *l, ns_ledger_head_fn fn, void *user);
/* id was just confirmed: if a fork voided it (or holds it as proof), put
 * it back in place of its author's unconfirmed entries. NS_OK when
 * applied, NS_ERR_NOTFOUND when it is not a voided entry here, or why
 * it cannot be applied (NS_ERR_GAP / NS_ERR_MISSING: it waits). */
int ns_ledger_reconsider(ns_ledger_t *l, const ns_hash_t id);
/* Whether id is an entry on its author's chain here (not voided). */
bool ns_ledger_holds(ns_ledger_t *l, const ns_hash_t id);
/* A copy of the bytes of entry id, on a chain or kept as a fork's proof
 * or a voided entry (malloc'd; caller frees). NS_ERR_NOTFOUND. */
int ns_ledger_entry_copy(ns_ledger_t *l, const ns_hash_t id, uint8_t **buf,
                         size_t *len) NS_MUST_CHECK;
/* Fork proofs stored since the ledger was opened (each second entry
 * counted once, however often it comes again), and the two ids of the
 * last one (the entry that held the seq, the one that proved the fork):
 * what a node passes on in envelopes of its own, so that a node whose
 * gossip layer has seen the proof's envelope (having refused it when it
 * came alone) still learns of the fork. */
uint64_t ns_ledger_fork_proofs(const ns_ledger_t *l, ns_hash_t first,
                               ns_hash_t second);
/* Up to max credits for `to` not yet taken in, whatever their state of
 * confirmation (ids): what to ask votes for. */
uint32_t ns_ledger_unclaimed_all(ns_ledger_t *l, const uint8_t to[NS_ID_BYTES],
                                 uint8_t *ids, uint32_t max);
/* Data with this hash (a SLASH's input) is here now: retry the entries
 * that waited for it. */
void ns_ledger_data_arrived(ns_ledger_t *l, const ns_hash_t id);

/* Append our own entry: assigns seq and prev, signs, validates, stores
 * durably. The encoded entry (to gossip) goes to out, its id to id.
 * Storage failures: NS_ERR_MAPFULL (map full), NS_ERR_IO (cause in
 * ns_ledger_last_error); nothing is stored then. */
int ns_ledger_append(ns_ledger_t *l, const ns_identity_t *me, uint8_t type,
                     const ns_entry_body_t *body, const uint8_t *refs,
                     uint32_t n_refs, ns_buf_t *out,
                     ns_hash_t id) NS_MUST_CHECK;

/* Take an entry from the network. NS_OK = stored (durable once
 * ns_ledger_commit returns; entries are batched), NS_ERR_GAP or
 * NS_ERR_MISSING = buffered until what it needs arrives (*missing_author,
 * *missing_seq name the gap to fetch when not NULL), NS_ERR_DUPLICATE,
 * NS_ERR_FORK (a valid second entry at a used seq: proof stored, author
 * banned, its entries from that seq on voided where they can be; see
 * docs/PROTOCOL.md, "Forks"), or the rule it breaks. */
int ns_ledger_ingest(ns_ledger_t *l, const uint8_t *buf, size_t len,
                     uint8_t *missing_author, uint64_t *missing_seq);
/* Make everything ingested so far durable (one synced LMDB commit).
 * NS_ERR_MAPFULL or NS_ERR_IO (see ns_ledger_last_error) when it fails;
 * what the batch held is then gone (totals rolled back with it). */
int ns_ledger_commit(ns_ledger_t *l) NS_MUST_CHECK;
/* Whether the ledger can write: NS_OK, or the error of the last failed
 * commit (NS_ERR_IO with ENOSPC/EROFS/EIO's text, NS_ERR_MAPFULL) until a
 * commit or probe succeeds. *why (borrowed, "" when writable) and
 * *since_ms (wall clock of the first failure, 0) may be NULL. A node
 * takes no new work while it cannot write. */
int ns_ledger_write_state(const ns_ledger_t *l, const char **why,
                          uint64_t *since_ms);
/* After a failed commit: try one small synced write (the committed totals
 * again; an open batch is committed instead) and return the new state.
 * NS_OK at once when nothing failed. */
int ns_ledger_probe_write(ns_ledger_t *l) NS_MUST_CHECK;
/* Whether the uncommitted batch should be committed now: it holds at
 * least NS_LEDGER_COMMIT_ENTRIES entries or NS_LEDGER_COMMIT_BYTES bytes,
 * or its first entry was stored NS_LEDGER_COMMIT_MS or more before
 * now_ms (ns_mono_ms). False when nothing is uncommitted. */
bool ns_ledger_commit_due(const ns_ledger_t *l, uint64_t now_ms);
/* How far author's chain is in hand: the highest seq s such that each of
 * its entries from its head + 1 to s is stored or waits in the
 * out-of-order buffer (its head seq when the next one does not wait, or
 * when the buffer is over half full). Range pulls go on from there while
 * the chain waits on other authors' entries. */
uint64_t ns_ledger_buffered_through(ns_ledger_t *l,
                                    const uint8_t author[NS_ID_BYTES]);
/* Whether author's entry at seq waits in the out-of-order buffer. */
bool ns_ledger_is_buffered(const ns_ledger_t *l,
                           const uint8_t author[NS_ID_BYTES], uint64_t seq);
/* Entries and bytes stored since the last commit. */
void ns_ledger_uncommitted(const ns_ledger_t *l, uint32_t *entries,
                           uint64_t *bytes);

int ns_ledger_account(ns_ledger_t *l, const uint8_t id[NS_ID_BYTES],
                      ns_account_t *out) NS_MUST_CHECK;
int ns_ledger_job(ns_ledger_t *l, const ns_hash_t job_id,
                  ns_ledger_job_t *out) NS_MUST_CHECK;
/* The genesis close window this ledger applies (docs/PROTOCOL.md,
 * "Closing"). */
uint64_t ns_ledger_close_window_ms(const ns_ledger_t *l);
/* A job whose award its provider may close, and the entry its CLOSE
 * names: the provider's RESULT of the award, else its ACCEPT, else the
 * AWARD (never accepted). */
typedef struct {
    ns_hash_t job_id, ref_id;
    uint8_t row; /* NS_ENTRY_RESULT, NS_ENTRY_ACCEPT or NS_ENTRY_AWARD */
} ns_ledger_closable_t;
/* Up to max jobs awarded to provider whose deadline + close window is at
 * or before now_ms. now_ms is the caller's wall clock: it says when to
 * post a CLOSE, never whether one holds (the rule reads the CLOSE's own
 * timestamp). A scan of every job: for a periodic tick. */
uint32_t ns_ledger_closable(ns_ledger_t *l, const uint8_t provider[NS_ID_BYTES],
                            uint64_t now_ms, ns_ledger_closable_t *out,
                            uint32_t max);
/* Credit that `ref` holds for `to`: amount, and whether taken in. */
int ns_ledger_credit(ns_ledger_t *l, const ns_hash_t ref,
                     const uint8_t to[NS_ID_BYTES], uint64_t *amount,
                     bool *claimed) NS_MUST_CHECK;
/* Up to max unclaimed credits for `to` (ids), for the next entry's refs
 * (docs/PROTOCOL.md, "Forks" and "Confirmation"): with a confirmation
 * hook, only credits whose source entry is confirmed; where nobody can
 * vote (NS_CONFIRM_NONE) or without the hook, credits made by a banned
 * author are left out and, with a claim delay set, those whose source
 * entry this ledger stored less than that delay ago. */
uint32_t ns_ledger_unclaimed(ns_ledger_t *l, const uint8_t to[NS_ID_BYTES],
                             uint8_t *ids, uint32_t max);
/* Offer a credit for claims only once its source entry has been stored
 * here for ms (0, the default: at once), so that a fork of its author is
 * known before the credit is taken in. Remembered for the latest
 * NS_LEDGER_RECENT entries stored since the ledger opened; older ones
 * count as old enough. */
void ns_ledger_set_claim_delay(ns_ledger_t *l, uint64_t ms);
/* Refuse, for now (NS_ERR_STALE, nothing stored), a CLOSE stamped more
 * than ms ahead of this node's wall clock; range pulls bring it again
 * once it is due. A delivery policy, not a rule: every node applies the
 * CLOSE in the end, but an honest requester's SETTLE or SLASH stamped
 * inside the window, which comes before the CLOSE's time, applies first
 * here and the early CLOSE is then refused (docs/PROTOCOL.md, "Closing").
 * 0, the default: none. */
void ns_ledger_set_close_hold(ns_ledger_t *l, uint64_t ms);

/* Encoded entry of (author, seq): *buf malloc'd. */
int ns_ledger_get(ns_ledger_t *l, const uint8_t author[NS_ID_BYTES],
                  uint64_t seq, uint8_t **buf, size_t *len) NS_MUST_CHECK;
/* Visit accounts (by id order) / entries of one author (seq order) /
 * all entries; stop when fn returns false. */
void ns_ledger_each_account(ns_ledger_t *l,
                            bool (*fn)(void *u, const ns_account_t *a),
                            void *u);
void ns_ledger_each_entry(ns_ledger_t *l, const uint8_t *author_or_null,
                          bool (*fn)(void *u, const ns_entry_t *e), void *u);

typedef struct {
    uint64_t entries; /* stored */
    uint64_t accounts;
    uint64_t total;          /* genesis total */
    uint64_t burned;         /* slashed and penalties */
    uint64_t pending_credit; /* credits not yet taken in */
    uint64_t forks;          /* fork proofs stored */
    uint32_t buffered;       /* out-of-order entries waiting */
    uint64_t buffered_bytes; /* their cost against NS_LEDGER_BUFFER_BYTES */
    uint64_t buffer_evicted; /* forgotten or refused by the buffer's caps */
    ns_hash_t digest;        /* XOR of H(author, seq, head) over authors */
    uint64_t rejected[NS_ERR_COUNT]; /* by -reason */
} ns_ledger_stats_t;
void ns_ledger_stats(ns_ledger_t *l, ns_ledger_stats_t *s);

/* Sum of every account's free + staked + locked + pending + burned; must
 * equal the genesis total (the invariant tests check everywhere). */
int ns_ledger_check_conservation(ns_ledger_t *l, uint64_t *sum) NS_MUST_CHECK;

#endif
