/* ledger_heads.h - incremental head exchange (market layer): what
 * HEADS_REQ and HEADS carry, and the state on either side that lets a
 * node list only the heads that changed since its last exchange with a
 * peer (docs/PROTOCOL.md, "Sync").
 *
 * Responder: a change log, one counter per node process (its epoch, a
 * random number drawn at start) that counts head moves; each author sits
 * once in a list ordered by the counter of its latest move. "Changes
 * since X" walks that list from its newest end: the cost is the number
 * of authors that moved after X, not the number of accounts.
 *
 * Requester: per peer, the epoch and the counter up to which it holds
 * every head the peer listed (advanced only past heads it holds, so a
 * range pull that was lost is asked again), and a streak of exchanges
 * that found nothing to pull while the peer's ledger digest still
 * differed from ours: a peer that stays divergent that way is listed in
 * full again (with a backoff, so that two nodes that differ for good, a
 * fork each saw first on its side, do not list every account every
 * round). A peer whose epoch changed (it restarted), a request without
 * an epoch, and our own heads going back (ns_ledger_set_on_head with
 * NULL) all fall back to a full listing by author, as before this rule.
 *
 * Wire forms (msgpack):
 *   HEADS_REQ  [start author bin(32)]                         (full, old)
 *              [start author bin(32), epoch uint, since uint] (this rule)
 *   HEADS      [[[author, seq]...] (<= 2048), next author or nil]    (old)
 *              [epoch uint, upto uint, full bool,
 *               [[author bin(32), seq uint, ctr uint]...] (<= 2048),
 *               next author bin(32) or nil, digest bin(32)]  (this rule)
 * The 3-element request is sent only to peers whose heartbeat carries
 * NS_HB_HEADS_SINCE; a node answers in the form it was asked in.
 */
#ifndef NIGHTSHIFT_LEDGER_HEADS_H
#define NIGHTSHIFT_LEDGER_HEADS_H

#include "nightshift/ledger.h"
#include "nightshift/mp.h"

#define NS_HEADS_MAX 2048  /* heads per HEADS message */
#define NS_HEADS_PEERS 128 /* peers a requester keeps a cursor for (LRU) */
#define NS_HEADS_DIVERGE_ROUNDS                                                \
    8 /* exchanges in a row with nothing to pull and                           \
         digests still different before a full listing */
#define NS_HEADS_DIVERGE_MAX                                                   \
    1024 /* the backoff's cap on that number, after                            \
            full listings that found nothing */

/* ---- messages ------------------------------------------------------------ */

typedef struct {
    uint8_t start[NS_ID_BYTES]; /* full listing: from this author on */
    bool since_form;            /* the 3-element form of this rule */
    uint64_t epoch;             /* the responder's, as we last heard it;
                                   0: none (a full listing) */
    uint64_t since;             /* changes after this counter */
} ns_heads_req_t;

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t seq;
    uint64_t ctr; /* the responder's counter of its latest move; 0 in the
                     old form and for authors that did not move since the
                     responder started */
} ns_head_item_t;

typedef struct {
    bool legacy;          /* the old 2-element form (a full listing) */
    bool full;            /* by author from the request's start, not changes */
    uint64_t epoch, upto; /* the responder's epoch and its counter:
                             everything moved up to upto is listed (in
                             this page and those before it) */
    uint32_t n;
    ns_head_item_t *items; /* malloc'd by the decoder / the answer */
    bool has_next;
    uint8_t next[NS_ID_BYTES]; /* full: the next page's start author;
                                  changes: more follow past upto */
    ns_hash_t digest;          /* the responder's heads digest */
} ns_heads_t;

int ns_heads_req_encode(ns_buf_t *out, const ns_heads_req_t *q) NS_MUST_CHECK;
/* Strict: 1 or 3 elements of exact types, nothing after. NS_ERR_* of the
 * reader (TYPE, TRUNCATED, TRAILING, TOOBIG). */
int ns_heads_req_decode(const uint8_t *buf, size_t len,
                        ns_heads_req_t *q) NS_MUST_CHECK;
int ns_heads_encode(ns_buf_t *out, const ns_heads_t *h) NS_MUST_CHECK;
/* Strict: either form, at most NS_HEADS_MAX items, exact types, nothing
 * after. On NS_OK h->items is malloc'd (NULL when n == 0); on an error
 * nothing is left to free. */
int ns_heads_decode(const uint8_t *buf, size_t len,
                    ns_heads_t *h) NS_MUST_CHECK;
void ns_heads_release(ns_heads_t *h);

/* ---- responder: the change log -------------------------------------------
 */

typedef struct ns_heads_log ns_heads_log_t;

/* An empty log with a random non-zero epoch. NULL: no memory. */
ns_heads_log_t *ns_heads_log_new(void);
void ns_heads_log_free(ns_heads_log_t **log);
/* author's head moved: NS_OK, NS_ERR_NOMEM (then the epoch changes, so
 * that no peer trusts a log that missed a move). */
int ns_heads_log_moved(ns_heads_log_t *log, const uint8_t author[NS_ID_BYTES]);
uint64_t ns_heads_log_epoch(const ns_heads_log_t *log);
uint64_t ns_heads_log_ctr(const ns_heads_log_t *log);
/* The counter of author's latest move, 0 if it did not move. */
uint64_t ns_heads_log_ctr_of(const ns_heads_log_t *log,
                             const uint8_t author[NS_ID_BYTES]);

/* The answer to q from ledger l: in the form q was asked in; changes
 * since q->since when q carries this log's epoch and a counter it has
 * reached, else a full listing from q->start. h->items is malloc'd
 * (ns_heads_release). NS_ERR_NOMEM. */
int ns_heads_answer(ns_heads_log_t *log, ns_ledger_t *l,
                    const ns_heads_req_t *q, ns_heads_t *h) NS_MUST_CHECK;

/* ---- requester: a cursor per peer ----------------------------------------
 */

typedef struct ns_heads_peers ns_heads_peers_t;

ns_heads_peers_t *ns_heads_peers_new(void);
void ns_heads_peers_free(ns_heads_peers_t **ps);
/* The first request of an exchange with peer (since_form: the peer
 * announces NS_HB_HEADS_SINCE). */
void ns_heads_peers_request(ns_heads_peers_t *ps,
                            const uint8_t peer[NS_ID_BYTES], bool since_form,
                            ns_heads_req_t *q);
/* Take peer's answer h: lack[i] (caller's array of h->n) says whether
 * the peer is ahead of ledger l on item i; the cursor moves; *more and
 * *next say whether to ask the next page and with what. Returns how many
 * items the peer is ahead on. */
uint32_t ns_heads_peers_answer(ns_heads_peers_t *ps, ns_ledger_t *l,
                               const uint8_t peer[NS_ID_BYTES],
                               const ns_heads_t *h, bool *lack, bool *more,
                               ns_heads_req_t *next);
/* Our heads went back (ns_ledger_set_on_head with NULL): what we held
 * may be gone, so every peer lists in full next time. */
void ns_heads_peers_forget_all(ns_heads_peers_t *ps);

typedef struct {
    uint64_t full, incremental; /* exchanges begun, by kind */
    uint64_t divergent;         /* full listings the streak asked for */
} ns_heads_peers_stats_t;
void ns_heads_peers_stats(const ns_heads_peers_t *ps,
                          ns_heads_peers_stats_t *st);

#endif
