/* ledger.c - the ledger's public API: open, ingest, append, commit and
 * queries, gluing the store (ledger_store.c), the apply step and its
 * rules (ledger_apply.c, ledger_rules.c) and the out-of-order buffer
 * (ledger_buffer.c).
 *
 * Every entry is validated, every check before the first write, and
 * applied in the current batch: a rejected entry leaves no trace (a
 * store error half-way through an entry loses the batch, as a failed
 * commit does). ns_ledger_commit makes
 * the batch durable with one synced commit; ns_ledger_commit_due says
 * when a batch of ingested entries has grown or aged enough for one.
 */
#include "ledger_apply.h"
#include "ledger_buffer.h"
#include "ledger_rules.h"
#include "ledger_store.h"

#include "nightshift/ledger.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* An author whose chain moved in the open batch, and where it ended
 * before the batch. */
typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t seq;
    ns_hash_t head;
    bool used;
} s_moved_t;

struct ns_ledger {
    ns_lstore_t store;
    MDB_txn *batch;               /* open write transaction, or NULL */
    bool dirty;                   /* the batch holds changes */
    uint32_t batch_entries;       /* entries stored in the batch */
    uint64_t batch_bytes;         /* their encoded bytes */
    uint64_t batch_since_ms;      /* ns_mono_ms when the first was stored */
    bool readonly;                /* opened with ns_ledger_open_readonly */
    ns_ledger_totals_t totals;    /* as of the open batch */
    ns_ledger_totals_t committed; /* as of the last commit: what a failed
                                     commit rolls totals back to */
    ns_slash_verifier_fn verifier;
    void *verifier_user;
    ns_lbuf_t pending; /* out-of-order entries */
    uint64_t rejected[NS_ERR_COUNT];
    ns_hash_t missing;       /* set by validation on NS_ERR_MISSING */
    uint64_t claim_delay_ms; /* ns_ledger_set_claim_delay; 0: none */
    uint64_t close_ahead_ms; /* ns_ledger_set_close_hold; 0: none */
    struct {
        ns_hash_t id;
        uint64_t at_ms;         /* ns_mono_ms when stored; 0: empty */
    } recent[NS_LEDGER_RECENT]; /* the latest stored entries, a ring */
    uint32_t recent_next;
    ns_ledger_confirm_fn confirm; /* ns_ledger_set_confirm; NULL: none */
    void *confirm_user;
    ns_ledger_stored_fn on_stored;
    void *on_stored_user;
    ns_ledger_fork_fn on_fork;
    void *on_fork_user;
    ns_ledger_want_fn on_want; /* ns_ledger_set_on_want */
    void *on_want_user;
    ns_ledger_head_fn on_head; /* ns_ledger_set_on_head */
    void *on_head_user;
    /* The void's own transaction while a fork runs (a child of the batch,
     * which cannot be read while it has one): what the hooks read then
     * (the confirmation hook weighs stake), s_read_txn. */
    MDB_txn *voiding;
    uint64_t fork_proofs;   /* stored since open */
    ns_hash_t last_fork[2]; /* ids: first, second */
    /* The last commit failed (disk full, read-only, map full): nothing is
     * written until a commit or ns_ledger_probe_write succeeds. */
    int write_rc;
    char write_error[128];
    uint64_t write_failed_ms; /* ns_now_ms of the first failure */
    /* The authors whose chains the open batch moved (an open-addressing
     * set, cap a power of two, keyed by SipHash with a random key): the
     * digest is moved for each once, when it is read or committed, not
     * twice an entry. totals.digest leaves them out until then. */
    struct {
        s_moved_t *v;
        uint32_t n, cap;
        uint8_t key[crypto_shorthash_KEYBYTES];
    } moved;
};

static const ns_hash_t s_zero;

/* ---- transactions ------------------------------------------------------ */

static int s_totals_save(MDB_txn *t, ns_ledger_t *l)
{
    return ns_lstore_totals_put(&l->store, t, &l->totals);
}

static void s_write_failed(ns_ledger_t *l, int rc)
{
    if (l->write_rc == NS_OK)
        l->write_failed_ms = ns_now_ms();
    l->write_rc = rc;
    snprintf(l->write_error, sizeof l->write_error, "%s",
             l->store.last_error[0] ? l->store.last_error : ns_strerror(rc));
    /* LMDB reports a write cut short by a full disk as EIO: say what it
     * is when the filesystem has no room left. */
    const char *dir = NULL;
    struct statvfs fs;
    if (rc == NS_ERR_IO && l->store.last_rc == EIO &&
        mdb_env_get_path(l->store.env, &dir) == MDB_SUCCESS && dir &&
        statvfs(dir, &fs) == 0 && fs.f_bavail == 0)
        snprintf(l->write_error, sizeof l->write_error,
                 "No space left on device (a write cut short: EIO)");
}

static void s_write_ok(ns_ledger_t *l)
{
    if (l->write_rc == NS_OK)
        return;
    ns_info(NS_MOD_LEDGER, "event=storage_recovered after_ms=%llu was=\"%s\"",
            (unsigned long long)(ns_now_ms() - l->write_failed_ms),
            l->write_error);
    l->write_rc = NS_OK;
    l->write_error[0] = '\0';
    l->write_failed_ms = 0;
}

static int s_batch(ns_ledger_t *l)
{
    if (l->batch)
        return NS_OK;
    if (l->readonly)
        return NS_ERR_STATE;
    int rc = ns_lstore_begin(&l->store, NULL, false, &l->batch);
    if (rc != NS_OK)
        s_write_failed(l, rc);
    else
        l->store.wb_txn = l->batch; /* its puts wait in the store */
    return rc;
}

/* ---- the digest of the batch's moved chains ------------------------------ */

static uint32_t s_moved_slot(const ns_ledger_t *l, const uint8_t *id)
{
    uint8_t h[crypto_shorthash_BYTES];
    uint32_t x;
    crypto_shorthash(h, id, NS_ID_BYTES, l->moved.key);
    memcpy(&x, h, sizeof x);
    return x & (l->moved.cap - 1);
}

static s_moved_t *s_moved_find(ns_ledger_t *l, const uint8_t *id)
{
    if (!l->moved.n)
        return NULL;
    for (uint32_t i = s_moved_slot(l, id);; i = (i + 1) & (l->moved.cap - 1)) {
        s_moved_t *m = &l->moved.v[i];
        if (!m->used)
            return NULL;
        if (memcmp(m->id, id, NS_ID_BYTES) == 0)
            return m;
    }
}

/* A free slot for id, which is not in the set; NULL: no memory. */
static s_moved_t *s_moved_add(ns_ledger_t *l, const uint8_t *id)
{
    if ((l->moved.n + 1) * 2 > l->moved.cap) { /* grow: at most half full */
        uint32_t cap = l->moved.cap ? l->moved.cap * 2 : 1024;
        s_moved_t *old = l->moved.v, *v = calloc(cap, sizeof *v);
        uint32_t old_cap = l->moved.cap;
        if (!v || cap < old_cap) {
            free(v);
            return NULL;
        }
        l->moved.v = v;
        l->moved.cap = cap;
        for (uint32_t i = 0; i < old_cap; i++) {
            if (!old[i].used)
                continue;
            uint32_t k = s_moved_slot(l, old[i].id);
            while (v[k].used)
                k = (k + 1) & (cap - 1);
            v[k] = old[i];
        }
        free(old);
    }
    uint32_t k = s_moved_slot(l, id);
    while (l->moved.v[k].used)
        k = (k + 1) & (l->moved.cap - 1);
    l->moved.n++;
    return &l->moved.v[k];
}

static void s_moved_clear(ns_ledger_t *l)
{
    if (l->moved.n)
        memset(l->moved.v, 0, (size_t)l->moved.cap * sizeof *l->moved.v);
    l->moved.n = 0;
}

/* The apply step's defer_digest: the author's chain moves past pre. The
 * first move of an author in the batch keeps where its chain ended;
 * false (the apply step moves the digest itself) when there is no memory
 * for it. */
static bool s_defer_digest(void *u, const ns_account_t *pre)
{
    ns_ledger_t *l = u;
    if (s_moved_find(l, pre->id))
        return true;
    s_moved_t *m = s_moved_add(l, pre->id);
    if (!m)
        return false;
    memcpy(m->id, pre->id, NS_ID_BYTES);
    m->seq = pre->seq;
    memcpy(m->head, pre->head, NS_HASH_BYTES);
    m->used = true;
    return true;
}

/* Move totals.digest for every chain the batch moved, from where it
 * ended before the batch to where its account says it ends now, and
 * empty the set. On a read error nothing changes. */
static int s_digest_flush(ns_ledger_t *l)
{
    if (!l->moved.n)
        return NS_OK;
    if (!l->batch) { /* cannot be: the set lives in a batch */
        s_moved_clear(l);
        return NS_ERR_STATE;
    }
    ns_hash_t d;
    memcpy(d, l->totals.digest, NS_HASH_BYTES);
    for (uint32_t i = 0; i < l->moved.cap; i++) {
        const s_moved_t *m = &l->moved.v[i];
        ns_account_t now;
        if (!m->used)
            continue;
        int rc = ns_lstore_account_get(&l->store, l->batch, m->id, &now);
        if (rc != NS_OK)
            return rc;
        ns_rule_digest_move(d, m->id, m->seq, m->head, now.seq, now.head);
    }
    memcpy(l->totals.digest, d, NS_HASH_BYTES);
    s_moved_clear(l);
    return NS_OK;
}

static void s_batch_done(ns_ledger_t *l)
{
    s_moved_clear(l);
    ns_lstore_drop(&l->store);
    l->store.wb_txn = NULL;
    l->batch = NULL;
    l->dirty = false;
    l->batch_entries = 0;
    l->batch_bytes = 0;
    l->batch_since_ms = 0;
}

/* A change is in the batch: start its clock. */
static void s_dirty(ns_ledger_t *l, size_t len)
{
    if (!l->dirty)
        l->batch_since_ms = ns_mono_ms();
    l->dirty = true;
    l->batch_entries++;
    l->batch_bytes += len;
}

bool ns_ledger_commit_due(const ns_ledger_t *l, uint64_t now_ms)
{
    if (!l->batch)
        return false;
    if (!l->dirty)
        return true; /* only rejections: closing it is free, and frees
                        the write lock */
    return l->batch_entries >= NS_LEDGER_COMMIT_ENTRIES ||
           l->batch_bytes >= NS_LEDGER_COMMIT_BYTES ||
           now_ms - l->batch_since_ms >= NS_LEDGER_COMMIT_MS;
}

void ns_ledger_uncommitted(const ns_ledger_t *l, uint32_t *entries,
                           uint64_t *bytes)
{
    *entries = l->batch_entries;
    *bytes = l->batch_bytes;
}

int ns_ledger_commit(ns_ledger_t *l)
{
    if (!l->batch)
        return NS_OK;
    if (!l->dirty) {
        /* Only rejections or duplicates: nothing to write, and a held
         * write transaction would block every other writer. */
        mdb_txn_abort(l->batch);
        s_batch_done(l);
        return NS_OK;
    }
    int rc = ns_lstore_flush(&l->store);
    if (rc == NS_OK)
        rc = s_digest_flush(l);
    if (rc == NS_OK)
        rc = s_totals_save(l->batch, l);
    if (rc != NS_OK)
        mdb_txn_abort(l->batch);
    else
        rc = ns_lstore_commit(&l->store, l->batch); /* synced */
    s_batch_done(l);
    if (rc != NS_OK) {
        /* The batch is gone: so are its entries' effects on the totals,
         * or the next commit would store totals the accounts disagree
         * with (and the ledger would not open again). */
        l->totals = l->committed;
        if (l->on_head)
            l->on_head(l->on_head_user, NULL); /* heads went back */
        ns_error(NS_MOD_LEDGER, "event=commit_failed err=%s detail=\"%s\"",
                 ns_errname(rc), l->store.last_error);
        s_write_failed(l, rc);
        return rc;
    }
    l->committed = l->totals;
    s_write_ok(l);
    return NS_OK;
}

int ns_ledger_write_state(const ns_ledger_t *l, const char **why,
                          uint64_t *since_ms)
{
    if (why)
        *why = l->write_rc != NS_OK ? l->write_error : "";
    if (since_ms)
        *since_ms = l->write_rc != NS_OK ? l->write_failed_ms : 0;
    return l->write_rc;
}

int ns_ledger_probe_write(ns_ledger_t *l)
{
    if (l->write_rc == NS_OK || l->readonly)
        return l->write_rc;
    if (l->batch) /* a batch is open: its commit is the probe */
        return ns_ledger_commit(l);
    /* Rewrite the committed totals: a real page written and synced,
     * nothing changed. */
    MDB_txn *t = NULL;
    int rc = ns_lstore_begin(&l->store, NULL, false, &t);
    if (rc == NS_OK &&
        (rc = ns_lstore_totals_put(&l->store, t, &l->committed)) != NS_OK)
        mdb_txn_abort(t);
    else if (rc == NS_OK)
        rc = ns_lstore_commit(&l->store, t);
    if (rc == NS_OK)
        s_write_ok(l);
    else
        s_write_failed(l, rc);
    return rc;
}

/* A parsed copy of a stored entry: what LMDB returns is valid only until
 * the transaction's next write. */
static int s_entry_copy(ns_ledger_t *l, MDB_txn *t, const ns_hash_t id,
                        uint8_t **copy, size_t *copy_len, ns_entry_t *e,
                        ns_entry_body_t *b)
{
    const uint8_t *buf;
    size_t len;
    int rc = ns_lstore_entry_bytes(&l->store, t, id, &buf, &len);
    if (rc != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
    if (!(*copy = malloc(len)))
        return NS_ERR_NOMEM;
    memcpy(*copy, buf, len);
    *copy_len = len;
    if (ns_entry_parse(*copy, len, l->store.network_id, e) != NS_OK ||
        ns_entry_body_decode(e, b) != NS_OK)
        return NS_ERR_CORRUPT;
    return NS_OK;
}

/* Whether the stake voted for entry id (ns_ledger_set_confirm). */
static bool s_confirmed(const ns_ledger_t *l, const ns_hash_t id)
{
    return l->confirm && l->confirm(l->confirm_user, id) == NS_CONFIRM_YES;
}

/* One void (a fork's), across every chain it takes entries back from
 * (docs/PROTOCOL.md, "Forks"). */
#define S_VOID_BUDGET 256 /* entries of other chains one void takes back */
#define S_VOID_DEPTH 8    /* chains deep */
#define S_VOID_SCAN 4096  /* entries read looking for who built on one */
typedef struct {
    const uint8_t *forked; /* the forked author */
    /* Accounts whose locks moved: their locked_collateral is summed from
     * their locks again once the void is done. */
    uint8_t touched[2 * NS_MAX_REFS + 8][NS_ID_BYTES];
    uint32_t n_touched;
    bool full;
    uint32_t budget, depth;
    /* Entries of other chains taken back, in chain order per chain: into
     * the out-of-order buffer once the void commits, the first of each
     * chain waiting for the voided entry it named, the rest for it. */
    struct s_later {
        uint8_t *bytes;
        size_t len;
        ns_hash_t missing;
        bool has_missing;
    } * later;
    uint32_t n_later, cap_later;
    /* every entry taken back (the forked author's and the others'): a
     * fork proof that named one proves nothing now (s_unfork_named) */
    ns_hash_t *gone;
    uint32_t n_gone, cap_gone;
} s_void_t;

static void s_touch(s_void_t *v, const uint8_t *id)
{
    for (uint32_t i = 0; i < v->n_touched; i++)
        if (memcmp(v->touched[i], id, NS_ID_BYTES) == 0)
            return;
    if (v->n_touched == sizeof v->touched / sizeof v->touched[0]) {
        v->full = true;
        return;
    }
    memcpy(v->touched[v->n_touched++], id, NS_ID_BYTES);
}

static void s_void_release(s_void_t *v)
{
    for (uint32_t i = 0; i < v->n_later; i++)
        free(v->later[i].bytes);
    free(v->later);
    v->later = NULL;
    v->n_later = v->cap_later = 0;
    free(v->gone);
    v->gone = NULL;
    v->n_gone = v->cap_gone = 0;
}

static int s_gone_add(s_void_t *v, const ns_hash_t id)
{
    if (v->n_gone == v->cap_gone) {
        uint32_t cap = v->cap_gone ? 2 * v->cap_gone : 16;
        ns_hash_t *grown = realloc(v->gone, cap * sizeof *grown);
        if (!grown)
            return NS_ERR_NOMEM;
        v->gone = grown;
        v->cap_gone = cap;
    }
    memcpy(v->gone[v->n_gone++], id, NS_HASH_BYTES);
    return NS_OK;
}

/* Keep a copy of an entry taken back from another chain (takes buf). */
static int s_later_add(s_void_t *v, uint8_t *buf, size_t len,
                       const uint8_t *missing)
{
    if (v->n_later == v->cap_later) {
        uint32_t cap = v->cap_later ? 2 * v->cap_later : 16;
        struct s_later *grown = realloc(v->later, cap * sizeof *grown);
        if (!grown) {
            free(buf);
            return NS_ERR_NOMEM;
        }
        v->later = grown;
        v->cap_later = cap;
    }
    struct s_later *x = &v->later[v->n_later++];
    x->bytes = buf;
    x->len = len;
    x->has_missing = missing != NULL;
    if (missing)
        memcpy(x->missing, missing, NS_HASH_BYTES);
    return NS_OK;
}

static int s_unwind(ns_ledger_t *l, MDB_txn *t, const uint8_t *author,
                    uint64_t from, const ns_hash_t cause, s_void_t *v);

/* A record an entry wrote, taken back: it must still be what the entry
 * left (`post`), or someone built on it since (NS_ERR_STATE). */
#define S_UNDO_CHECK(rc, now, post)                                            \
    ((rc) == NS_ERR_NOTFOUND                ? NS_ERR_STATE                     \
     : (rc) != NS_OK                        ? (rc)                             \
     : memcmp(&(now), &(post), sizeof(now)) ? NS_ERR_STATE                     \
                                            : NS_OK)

/* A job put back in AWARDED state (a SLASH or CANCEL taken back): what
 * its provider wrote for the award (accept, result, root) is read again
 * from the provider's record, for the provider's entries may have come
 * before or after the entry taken back, depending on the node. */
static int s_job_refresh(ns_ledger_t *l, MDB_txn *t, ns_ledger_job_t *j)
{
    ns_pjob_rec_t pj;
    memset(j->accept_id, 0, NS_HASH_BYTES);
    memset(j->result_id, 0, NS_HASH_BYTES);
    memset(j->root, 0, NS_HASH_BYTES);
    j->n_items = 0;
    if (j->state != NS_JOB_AWARDED)
        return NS_OK;
    int rc = ns_lstore_pjob_get(&l->store, t, j->provider, j->award_id, &pj);
    if (rc == NS_ERR_NOTFOUND)
        return NS_OK;
    if (rc != NS_OK)
        return rc;
    memcpy(j->accept_id, pj.accept_id, NS_HASH_BYTES);
    if (sodium_is_zero(pj.result_id, NS_HASH_BYTES))
        return NS_OK;
    ns_entry_t e;
    ns_entry_body_t b;
    if ((rc = ns_lstore_entry_load(&l->store, t, pj.result_id, &e, &b)) !=
        NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
    memcpy(j->result_id, pj.result_id, NS_HASH_BYTES);
    memcpy(j->root, b.root, NS_HASH_BYTES);
    j->n_items = b.n_items;
    return NS_OK;
}

/* The entry of author's chain from its head down that names id in its
 * refs (*seq: its seq; 0 if none within S_VOID_SCAN entries). */
static int s_find_claim(ns_ledger_t *l, MDB_txn *t, const uint8_t *author,
                        const ns_hash_t id, uint64_t *seq)
{
    ns_account_t a;
    *seq = 0;
    int rc = ns_lstore_account_get(&l->store, t, author, &a);
    for (uint64_t s = a.seq; rc == NS_OK && s > 0 && a.seq - s < S_VOID_SCAN;
         s--) {
        ns_hash_t x;
        ns_entry_t e;
        /* the top of a chain this void is taking back is gone already
         * (its account is rewound only at the end) */
        if ((rc = ns_lstore_chain_get(&l->store, t, author, s, x)) ==
            NS_ERR_NOTFOUND) {
            rc = NS_OK;
            continue;
        }
        if (rc != NS_OK ||
            (rc = ns_lstore_entry_load(&l->store, t, x, &e, NULL)) != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
        for (uint32_t i = 0; i < e.n_refs; i++)
            if (memcmp(e.refs + (size_t)i * NS_HASH_BYTES, id, NS_HASH_BYTES) ==
                0) {
                *seq = s;
                return NS_OK;
            }
    }
    return rc;
}

/* The requester's entry past its AWARD award_seq that names id (a
 * SETTLE or SLASH of a RESULT, a CANCEL of an ACCEPT): *seq, 0 if none. */
static int s_find_judge(ns_ledger_t *l, MDB_txn *t, const uint8_t *requester,
                        uint64_t award_seq, const ns_hash_t id, uint64_t *seq)
{
    ns_account_t a;
    *seq = 0;
    int rc = ns_lstore_account_get(&l->store, t, requester, &a);
    for (uint64_t s = award_seq + 1;
         rc == NS_OK && s <= a.seq && s - award_seq <= S_VOID_SCAN; s++) {
        ns_hash_t x;
        ns_entry_t e;
        ns_entry_body_t b;
        /* past the part of the chain this void took back already */
        if ((rc = ns_lstore_chain_get(&l->store, t, requester, s, x)) ==
            NS_ERR_NOTFOUND)
            return NS_OK;
        if (rc != NS_OK ||
            (rc = ns_lstore_entry_load(&l->store, t, x, &e, &b)) != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
        if ((e.type == NS_ENTRY_SETTLE || e.type == NS_ENTRY_SLASH ||
             e.type == NS_ENTRY_CANCEL) &&
            memcmp(b.ref_id, id, NS_HASH_BYTES) == 0) {
            *seq = s;
            return NS_OK;
        }
    }
    return rc;
}

/* Other chains' entries built on e go back to the buffer first (e is
 * about to be taken back: they would name what is not there):
 *  - the claim of e's credit (its recipient's entry from there on);
 *  - the ACCEPT of e, an AWARD (the provider's chain from its ACCEPT);
 *  - the requester's SETTLE or SLASH of e, a RESULT, or CANCEL of e, an
 *    ACCEPT (the requester's chain from there).
 * Each goes with everything after it on its chain (s_unwind). */
static int s_built_on(ns_ledger_t *l, MDB_txn *t, const ns_entry_t *e,
                      const ns_entry_body_t *b, const ns_undo_rec_t *u,
                      s_void_t *v)
{
    ns_lstore_t *st = &l->store;
    uint64_t seq = 0;
    int rc = NS_OK;
    if (u->flags & NS_UNDO_CREDIT) {
        ns_credit_rec_t c;
        rc = ns_lstore_credit_get(st, t, e->id, u->credit_to, &c);
        if (rc == NS_OK && c.state == NS_CREDIT_CLAIMED &&
            (rc = s_find_claim(l, t, u->credit_to, e->id, &seq)) == NS_OK) {
            if (seq == 0)
                return NS_ERR_STATE;
            rc = s_unwind(l, t, u->credit_to, seq, e->id, v);
        }
        if (rc != NS_OK && rc != NS_ERR_NOTFOUND)
            return rc;
        rc = NS_OK;
    }
    if (e->type == NS_ENTRY_AWARD) {
        ns_pjob_rec_t pj;
        ns_entry_t acc;
        rc = ns_lstore_pjob_get(st, t, b->bid.provider, e->id, &pj);
        if (rc == NS_ERR_NOTFOUND)
            return NS_OK;
        if (rc == NS_OK && (rc = ns_lstore_entry_load(st, t, pj.accept_id, &acc,
                                                      NULL)) == NS_OK)
            rc = s_unwind(l, t, b->bid.provider, acc.seq, e->id, v);
        return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
    }
    if (e->type != NS_ENTRY_ACCEPT && e->type != NS_ENTRY_RESULT)
        return rc;
    /* e's award: the ACCEPT's ref, or the ACCEPT's behind a RESULT */
    ns_entry_t acc, award;
    ns_entry_body_t ab;
    ns_ledger_job_t job;
    const uint8_t *award_id = b->ref_id;
    if (e->type == NS_ENTRY_RESULT) {
        if ((rc = ns_lstore_entry_load(st, t, b->ref_id, &acc, &ab)) != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
        award_id = ab.ref_id;
    }
    if ((rc = ns_lstore_entry_load(st, t, award_id, &award, NULL)) != NS_OK ||
        (rc = ns_lstore_job_get(st, t, b->job_id, &job)) != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
    if ((rc = s_find_judge(l, t, job.requester, award.seq, e->id, &seq)) !=
            NS_OK ||
        seq == 0)
        return rc;
    return s_unwind(l, t, job.requester, seq, e->id, v);
}

/* What a CLOSE (undo record u) did to accounts besides its author's own
 * chain state: the requester's escrow is locked again, and the author's
 * counter as a provider goes back (the rewind keeps counters as they
 * are stored). */
static int s_undo_close(ns_ledger_t *l, MDB_txn *t, const ns_entry_t *e,
                        const ns_undo_rec_t *u)
{
    ns_lstore_t *st = &l->store;
    ns_account_t r, p;
    int rc = ns_lstore_account_get(st, t, u->job_pre.requester, &r);
    if (rc != NS_OK)
        return rc;
    if (r.locked_escrow > UINT64_MAX - u->job_pre.escrow)
        return NS_ERR_CORRUPT;
    r.locked_escrow += u->job_pre.escrow;
    if ((rc = ns_lstore_account_put(st, t, &r)) != NS_OK ||
        (rc = ns_lstore_account_get(st, t, e->author, &p)) != NS_OK)
        return rc;
    if (u->job_post.state == NS_JOB_SETTLED && p.jobs_settled)
        p.jobs_settled--;
    else if (u->job_post.state == NS_JOB_CANCELLED &&
             (u->flags & NS_UNDO_LOCK_NEW) == 0 && p.jobs_cancelled)
        p.jobs_cancelled--;
    return ns_lstore_account_put(st, t, &p);
}

/* Take back entry e (body b), the last one on its author's chain: what it
 * changed outside its author's account goes back to what it was before
 * (its undo record, ledger_records.h): the credit it made (unless taken
 * in), the job, lock and provider's record it wrote, the provider's
 * counters and the burned total it moved, and the credits it took in
 * (open again, their released locks locked again). What another chain
 * built on it (a claim of its credit, an ACCEPT of an AWARD, a SETTLE,
 * SLASH or CANCEL after an ACCEPT or RESULT) is taken back first, from
 * that entry to that chain's head (s_built_on). NS_ERR_STATE when that
 * cannot be done (a confirmed entry, more than the void's budget), or
 * when e was stored before undo records were kept. Writes in t only. */
static int s_undo_entry(ns_ledger_t *l, MDB_txn *t, const ns_entry_t *e,
                        const ns_entry_body_t *b, s_void_t *v)
{
    ns_lstore_t *st = &l->store;
    ns_undo_rec_t u;
    ns_undo_release_t rel[NS_MAX_REFS];
    int rc = ns_lstore_undo_get(st, t, e->id, &u, rel, NS_MAX_REFS);
    const bool have_rec = rc == NS_OK;
    if (rc == NS_ERR_NOTFOUND) {
        if (e->type >= NS_ENTRY_JOB)
            return NS_ERR_STATE; /* stored before undo records */
        memset(&u, 0, sizeof u);
    } else if (rc != NS_OK) {
        return rc;
    }
    if (e->type == NS_ENTRY_TRANSFER) { /* its credit, from its body */
        u.flags |= NS_UNDO_CREDIT;
        memcpy(u.credit_to, b->to, NS_ID_BYTES);
    }
    /* what other chains built on it goes first, back to the buffer */
    if ((rc = s_built_on(l, t, e, b, &u, v)) != NS_OK)
        return rc;
    if (u.flags & NS_UNDO_CREDIT) {
        ns_credit_rec_t c;
        rc = ns_lstore_credit_get(st, t, e->id, u.credit_to, &c);
        if (rc == NS_OK) {
            if (c.state != NS_CREDIT_OPEN || l->totals.pending < c.amount)
                return NS_ERR_STATE; /* taken in: not ours to undo */
            l->totals.pending -= c.amount;
            rc = ns_lstore_credit_del(st, t, e->id, u.credit_to);
        }
        if (rc != NS_OK && rc != NS_ERR_NOTFOUND)
            return rc;
    }
    if (e->type == NS_ENTRY_AWARD) {
        /* accepted (or its release claimed): the provider's chain names
         * it */
        ns_lock_rec_t k;
        ns_pjob_rec_t pj;
        rc = ns_lstore_lock_get(st, t, b->bid.provider, e->id, &k);
        if (rc == NS_OK)
            return NS_ERR_STATE;
        if (rc == NS_ERR_NOTFOUND)
            rc = ns_lstore_pjob_get(st, t, b->bid.provider, e->id, &pj);
        if (rc == NS_OK)
            return NS_ERR_STATE;
        if (rc != NS_ERR_NOTFOUND)
            return rc;
    }
    /* A provider's ACCEPT or RESULT wrote the job only for the award it
     * belongs to, and only what the provider's record says (accept,
     * result): that is read again once the record is back (below), for
     * the job may have been withdrawn, or put back, since. */
    const bool provider_entry =
        e->type == NS_ENTRY_ACCEPT || e->type == NS_ENTRY_RESULT;
    if ((u.flags & NS_UNDO_JOB) && !provider_entry) {
        ns_ledger_job_t now;
        rc = ns_lstore_job_get(st, t, u.job_post.job_id, &now);
        if ((rc = S_UNDO_CHECK(rc, now, u.job_post)) != NS_OK)
            return rc;
        if (!(u.flags & NS_UNDO_JOB_NEW) &&
            (e->type == NS_ENTRY_SLASH || e->type == NS_ENTRY_CANCEL) &&
            (rc = s_job_refresh(l, t, &u.job_pre)) != NS_OK)
            return rc;
        rc = (u.flags & NS_UNDO_JOB_NEW)
                 ? ns_lstore_job_del(st, t, u.job_post.job_id)
                 : ns_lstore_job_put(st, t, &u.job_pre);
        if (rc != NS_OK)
            return rc;
    }
    if (u.flags & NS_UNDO_LOCK) {
        ns_lock_rec_t now;
        rc = ns_lstore_lock_get(st, t, u.key_provider, u.key_award, &now);
        if ((rc = S_UNDO_CHECK(rc, now, u.lock_post)) != NS_OK)
            return rc;
        rc = (u.flags & NS_UNDO_LOCK_NEW)
                 ? ns_lstore_lock_del(st, t, u.key_provider, u.key_award)
                 : ns_lstore_lock_put(st, t, u.key_provider, u.key_award,
                                      &u.lock_pre);
        if (rc != NS_OK)
            return rc;
        s_touch(v, u.key_provider);
    }
    if (u.flags & NS_UNDO_PJOB) {
        ns_pjob_rec_t now;
        rc = ns_lstore_pjob_get(st, t, u.key_provider, u.key_award, &now);
        if ((rc = S_UNDO_CHECK(rc, now, u.pjob_post)) != NS_OK)
            return rc;
        rc = (u.flags & NS_UNDO_PJOB_NEW)
                 ? ns_lstore_pjob_del(st, t, u.key_provider, u.key_award)
                 : ns_lstore_pjob_put(st, t, u.key_provider, u.key_award,
                                      &u.pjob_pre);
        if (rc != NS_OK)
            return rc;
    }
    if (provider_entry) {
        ns_ledger_job_t j;
        rc = ns_lstore_job_get(st, t, b->job_id, &j);
        if (rc == NS_OK && j.state == NS_JOB_AWARDED &&
            memcmp(j.award_id, u.key_award, NS_HASH_BYTES) == 0 &&
            (rc = s_job_refresh(l, t, &j)) == NS_OK)
            rc = ns_lstore_job_put(st, t, &j);
        if (rc != NS_OK && rc != NS_ERR_NOTFOUND)
            return rc;
    }
    if (u.flags & NS_UNDO_PROV) {
        ns_account_t p;
        if ((rc = ns_lstore_account_get(st, t, u.prov, &p)) != NS_OK)
            return rc;
        if (p.jobs_settled < u.d_settled || p.jobs_slashed < u.d_slashed ||
            p.jobs_cancelled < u.d_cancelled)
            return NS_ERR_CORRUPT;
        p.jobs_settled -= u.d_settled;
        p.jobs_slashed -= u.d_slashed;
        p.jobs_cancelled -= u.d_cancelled;
        if ((rc = ns_lstore_account_put(st, t, &p)) != NS_OK)
            return rc;
        s_touch(v, u.prov);
    }
    if (e->type == NS_ENTRY_CLOSE && (u.flags & NS_UNDO_JOB) &&
        (rc = s_undo_close(l, t, e, &u)) != NS_OK)
        return rc;
    if (l->totals.burned < u.burned)
        return NS_ERR_CORRUPT;
    l->totals.burned -= u.burned;
    /* the credits it took in are open again, the locks they released
     * locked again (each lock once: two refs may release one award) */
    bool restored[NS_MAX_REFS] = {false};
    for (uint32_t i = 0; i < e->n_refs; i++) {
        const uint8_t *ref = e->refs + (size_t)i * NS_HASH_BYTES;
        ns_credit_rec_t c;
        if ((rc = ns_lstore_credit_get(st, t, ref, e->author, &c)) != NS_OK)
            return rc;
        if (!sodium_is_zero(c.release_award, NS_HASH_BYTES)) {
            uint32_t k = 0;
            while (k < u.n_released &&
                   memcmp(rel[k].award, c.release_award, NS_HASH_BYTES))
                k++;
            /* none: the claim left the lock as it was (released or
             * burned already), or it was stored before undo records */
            if (k == u.n_released && !have_rec)
                return NS_ERR_STATE;
            if (k < u.n_released && !restored[k]) {
                restored[k] = true;
                rc = rel[k].pre.state == 0
                         ? ns_lstore_lock_del(st, t, e->author, rel[k].award)
                         : ns_lstore_lock_put(st, t, e->author, rel[k].award,
                                              &rel[k].pre);
                if (rc != NS_OK)
                    return rc;
            }
        }
        if (l->totals.pending > UINT64_MAX - c.amount)
            return NS_ERR_CORRUPT;
        c.state = NS_CREDIT_OPEN;
        l->totals.pending += c.amount;
        if ((rc = ns_lstore_credit_put(st, t, ref, e->author, &c)) != NS_OK)
            return rc;
    }
    return ns_lstore_undo_del(st, t, e->id);
}

/* An account's locked_collateral summed again from its locks (what a
 * void moved: the lock records are the truth, and every rule moves the
 * two together). */
static int s_relock(ns_ledger_t *l, MDB_txn *t, const uint8_t *id)
{
    ns_account_t p;
    uint64_t sum;
    int rc = ns_lstore_account_get(&l->store, t, id, &p);
    if (rc == NS_OK)
        rc = ns_lstore_locked_sum(&l->store, t, id, &sum);
    if (rc != NS_OK || p.locked_collateral == sum)
        return rc;
    p.locked_collateral = sum;
    return ns_lstore_account_put(&l->store, t, &p);
}

/* Take author a's entries from seq `from` to its head back, the last
 * first (s_undo_entry); forked: into forkentries as the fork's proof,
 * banned; otherwise (an author that built on a forked one's entries,
 * cause: the entry it named) kept in v for the buffer. Then a goes back
 * to what its own entries made it before `from` (the stored pre-state),
 * keeping what other chains did to it meanwhile (a SLASH or a penalty
 * on its collateral, its counters as a provider). A confirmed entry of
 * another chain is never taken back (NS_ERR_STATE). */
static int s_take_back(ns_ledger_t *l, MDB_txn *t, ns_account_t *a,
                       uint64_t from, bool forked, const ns_hash_t cause,
                       s_void_t *v)
{
    ns_account_t pre;
    int rc = ns_lstore_prestate_get(&l->store, t, a->id, from, &pre);
    for (uint64_t seq = a->seq; rc == NS_OK && seq >= from && seq > 0; seq--) {
        ns_hash_t id;
        ns_entry_t e;
        ns_entry_body_t b;
        uint8_t *copy = NULL;
        size_t len = 0;
        if ((rc = ns_lstore_chain_get(&l->store, t, a->id, seq, id)) != NS_OK)
            break;
        if (!forked && (s_confirmed(l, id) || v->budget == 0)) {
            rc = NS_ERR_STATE;
            break;
        }
        if (!forked)
            v->budget--;
        rc = s_entry_copy(l, t, id, &copy, &len, &e, &b);
        if (rc == NS_OK)
            rc = s_undo_entry(l, t, &e, &b, v);
        if (rc == NS_OK)
            rc = s_gone_add(v, id);
        if (rc == NS_OK)
            rc = forked ? ns_lstore_entry_void(&l->store, t, a->id, seq, id)
                        : ns_lstore_entry_forget(&l->store, t, a->id, seq, id);
        if (rc == NS_OK && !forked) {
            rc = s_later_add(v, copy, len, seq == from ? cause : NULL);
            copy = NULL;
        }
        free(copy);
    }
    /* the account as the undone entries of other chains left it (a SETTLE
     * taken back takes its counter back) */
    uint64_t locked = 0, escrow = 0;
    bool banned = a->banned;
    if (rc == NS_OK)
        rc = ns_lstore_account_get(&l->store, t, a->id, a);
    a->banned |= banned;
    if (rc == NS_OK)
        rc = ns_lstore_locked_sum(&l->store, t, a->id, &locked);
    if (rc == NS_OK)
        rc = ns_lstore_escrow_sum(&l->store, t, a->id, &escrow);
    if (rc == NS_OK)
        ns_rule_rewind(a, &pre, locked, escrow, forked, &l->totals);
    return rc;
}

/* Author's entries from seq `from` on built on an entry a fork takes
 * back (cause): they go back to the out-of-order buffer, to wait for it
 * as they would on a node that saw the fork first (docs/PROTOCOL.md,
 * "Forks"). */
static int s_unwind(ns_ledger_t *l, MDB_txn *t, const uint8_t *author,
                    uint64_t from, const ns_hash_t cause, s_void_t *v)
{
    ns_account_t a;
    if (memcmp(author, v->forked, NS_ID_BYTES) == 0 || v->depth >= S_VOID_DEPTH)
        return NS_ERR_STATE;
    int rc = ns_lstore_account_get(&l->store, t, author, &a);
    if (rc != NS_OK || from > a.seq)
        return rc;
    v->depth++;
    rc = s_take_back(l, t, &a, from, false, cause, v);
    v->depth--;
    if (rc == NS_OK)
        rc = ns_lstore_account_put(&l->store, t, &a);
    return rc;
}

/* A fork at seq `from` voids the forked author's entries from there to
 * its head, whichever branch they are on (docs/PROTOCOL.md, "Forks"),
 * and what other chains built on them goes back to the buffer. a: the
 * author's account, rewound here (banned). NS_ERR_STATE when an entry
 * cannot be taken back: the caller keeps the chains as they are. */
static int s_void_from(ns_ledger_t *l, MDB_txn *t, ns_account_t *a,
                       uint64_t from, s_void_t *v)
{
    int rc = s_take_back(l, t, a, from, true, NULL, v);
    if (rc == NS_OK && v->full)
        rc = NS_ERR_STATE; /* more accounts than one void may move */
    for (uint32_t i = 0; rc == NS_OK && i < v->n_touched; i++)
        if (memcmp(v->touched[i], a->id, NS_ID_BYTES))
            rc = s_relock(l, t, v->touched[i]);
    return rc;
}

/* The batch holds partial writes of an entry (the store failed while
 * writing it): LMDB will not commit it. It is aborted as a failed commit
 * is: the batch's entries are gone from memory and disk alike (sync
 * brings the network's back), nothing it held was reported durable. */
static void s_batch_lost(ns_ledger_t *l, int rc)
{
    mdb_txn_abort(l->batch);
    uint32_t lost = l->batch_entries;
    s_batch_done(l);
    l->totals = l->committed;
    if (l->on_head)
        l->on_head(l->on_head_user, NULL); /* heads went back */
    ns_error(NS_MOD_LEDGER, "event=batch_lost err=%s entries=%u detail=\"%s\"",
             ns_errname(rc), lost, l->store.last_error);
}

static void s_buffer(ns_ledger_t *l, const uint8_t *buf, size_t len,
                     const ns_entry_t *e, int why);

/* The entries of other chains a void took back wait in the buffer again,
 * as on a node that saw the fork first: the first of each chain for the
 * voided entry it named, the others for it (sync fetches what the buffer
 * cannot keep). Releases v. */
static void s_rebuffer(ns_ledger_t *l, s_void_t *v)
{
    for (uint32_t i = 0; i < v->n_later; i++) {
        ns_entry_t e;
        const struct s_later *x = &v->later[i];
        if (ns_entry_parse(x->bytes, x->len, l->store.network_id, &e) != NS_OK)
            continue;
        if (x->has_missing)
            memcpy(l->missing, x->missing, NS_HASH_BYTES);
        s_buffer(l, x->bytes, x->len, &e,
                 x->has_missing ? NS_ERR_MISSING : NS_ERR_GAP);
    }
    if (v->n_later)
        ns_info(NS_MOD_LEDGER, "event=fork_unwound entries=%u", v->n_later);
    s_void_release(v);
}

/* s_unfork_named: the authors whose fork proof named an entry gone. */
typedef struct {
    ns_ledger_t *l;
    const s_void_t *v;
    const uint8_t *skip; /* the author just forked */
    uint8_t who[8][NS_ID_BYTES];
    uint32_t n;
} s_unfork_t;

static bool s_names_gone(const s_void_t *v, const uint8_t *buf, size_t len,
                         const uint8_t *network_id)
{
    ns_entry_t e;
    ns_entry_body_t b;
    if (ns_entry_parse(buf, len, network_id, &e) != NS_OK)
        return false;
    bool body = ns_entry_body_decode(&e, &b) == NS_OK;
    for (uint32_t g = 0; g < v->n_gone; g++) {
        for (uint32_t i = 0; i < e.n_refs; i++)
            if (memcmp(e.refs + (size_t)i * NS_HASH_BYTES, v->gone[g],
                       NS_HASH_BYTES) == 0)
                return true;
        if (body && e.type >= NS_ENTRY_ACCEPT &&
            memcmp(b.ref_id, v->gone[g], NS_HASH_BYTES) == 0)
            return true;
    }
    return false;
}

static bool s_proof_names_gone(void *u, const uint8_t *author,
                               const ns_fork_rec_t *f)
{
    s_unfork_t *x = u;
    if (memcmp(author, x->skip, NS_ID_BYTES) == 0)
        return true;
    /* the chain below the fork went back to the buffer (a void of another
     * chain's unwound it): neither entry stands at its place now */
    ns_account_t a;
    if (ns_lstore_account_get(&x->l->store, x->l->batch, author, &a) == NS_OK &&
        a.seq + 1 < f->seq) {
        memcpy(x->who[x->n++], author, NS_ID_BYTES);
        return x->n < 8;
    }
    const uint8_t *ids[2] = {f->first, f->second};
    for (int k = 0; k < 2; k++) {
        const uint8_t *buf;
        size_t len;
        if ((ns_lstore_entry_bytes(&x->l->store, x->l->batch, ids[k], &buf,
                                   &len) == NS_OK ||
             ns_lstore_fork_entry_bytes(&x->l->store, x->l->batch, ids[k], &buf,
                                        &len) == NS_OK) &&
            s_names_gone(x->v, buf, len, x->l->store.network_id)) {
            memcpy(x->who[x->n++], author, NS_ID_BYTES);
            return x->n < 8;
        }
    }
    return true;
}

/* One author's entries kept in forkentries, copied out. */
typedef struct {
    uint8_t *bytes;
    size_t len;
    uint64_t seq;
    ns_hash_t id;
} s_kept_entry_t;

typedef struct {
    const uint8_t *author;
    const uint8_t *network_id;
    s_kept_entry_t *e;
    uint32_t n, cap;
    bool nomem;
} s_kept_t;

static bool s_collect_kept(void *u, const uint8_t *id, const uint8_t *buf,
                           size_t len)
{
    s_kept_t *k = u;
    ns_entry_t e;
    if (ns_entry_parse(buf, len, k->network_id, &e) != NS_OK ||
        memcmp(e.author, k->author, NS_ID_BYTES))
        return true;
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? 2 * k->cap : 8;
        s_kept_entry_t *grown = realloc(k->e, cap * sizeof *grown);
        if (!grown) {
            k->nomem = true;
            return false;
        }
        k->e = grown;
        k->cap = cap;
    }
    s_kept_entry_t *x = &k->e[k->n];
    if (!(x->bytes = malloc(len))) {
        k->nomem = true;
        return false;
    }
    memcpy(x->bytes, buf, len);
    x->len = len;
    x->seq = e.seq;
    memcpy(x->id, id, NS_HASH_BYTES);
    k->n++;
    return true;
}

static int s_ingest_one(ns_ledger_t *l, const uint8_t *buf, size_t len,
                        uint8_t *missing_author, uint64_t *missing_seq,
                        ns_entry_t *e);

/* Take author's fork record, ban and kept entries away (one transaction):
 * k's entries, copied out first. */
static int s_unban(ns_ledger_t *l, const uint8_t *author, const s_kept_t *k)
{
    MDB_txn *t = NULL;
    ns_account_t a;
    int rc = ns_lstore_begin(&l->store, l->batch, false, &t);
    if (rc != NS_OK)
        return rc;
    if ((rc = ns_lstore_account_get(&l->store, t, author, &a)) == NS_OK) {
        a.banned = false;
        rc = ns_lstore_account_put(&l->store, t, &a);
    }
    if (rc == NS_OK)
        rc = ns_lstore_fork_del(&l->store, t, author);
    for (uint32_t j = 0; rc == NS_OK && j < k->n; j++)
        rc = ns_lstore_fork_entry_del(&l->store, t, k->e[j].id);
    if (rc == NS_OK)
        return ns_lstore_commit(&l->store, t);
    mdb_txn_abort(t);
    return rc;
}

/* A fork proof is two valid entries at one seq. One that named an entry
 * a void has just taken back is not valid now: on a node that saw the
 * void first it waited in the buffer and proved nothing (docs/PROTOCOL.md,
 * "Forks"). So its author is banned no more: its fork record goes, and
 * each of its entries kept as proof or voided goes through ingest again,
 * lowest seq first (what is valid applies, what names the voided entry
 * waits, a fork that still holds is found again). */
static void s_unfork_named(ns_ledger_t *l, const s_void_t *v,
                           const uint8_t *forked)
{
    if (v->n_gone == 0)
        return;
    s_unfork_t x = {l, v, forked, {{0}}, 0};
    ns_lstore_each_fork(&l->store, l->batch, s_proof_names_gone, &x);
    for (uint32_t i = 0; i < x.n; i++) {
        s_kept_t k = {x.who[i], l->store.network_id, NULL, 0, 0, false};
        ns_lstore_each_fork_entry(&l->store, l->batch, s_collect_kept, &k);
        int rc = k.nomem ? NS_ERR_NOMEM : s_unban(l, x.who[i], &k);
        if (rc == NS_OK) {
            if (l->totals.forks)
                l->totals.forks--;
            char who[2 * NS_ID_BYTES + 1];
            ns_hex(who, x.who[i], NS_ID_BYTES);
            ns_info(NS_MOD_LEDGER, "event=fork_unproven author=%s entries=%u",
                    who, k.n);
            for (uint32_t a1 = 1; a1 < k.n; a1++)
                for (uint32_t b1 = a1; b1 > 0 && k.e[b1 - 1].seq > k.e[b1].seq;
                     b1--) {
                    s_kept_entry_t tmp = k.e[b1];
                    k.e[b1] = k.e[b1 - 1];
                    k.e[b1 - 1] = tmp;
                }
            for (uint32_t j = 0; j < k.n; j++) {
                ns_entry_t e;
                (void)s_ingest_one(l, k.e[j].bytes, k.e[j].len, NULL, NULL, &e);
            }
        }
        for (uint32_t j = 0; j < k.n; j++)
            free(k.e[j].bytes);
        free(k.e);
    }
}

/* e proved its author forked (NS_ERR_FORK from the apply step, which
 * wrote nothing): keep the proof and ban the author, in a child
 * transaction of the batch (forks are rare; the void may stop half-way
 * and is then taken back). NS_ERR_FORK. */
static int s_fork(ns_ledger_t *l, const uint8_t *buf, size_t len,
                  const ns_entry_t *e)
{
    /* What follows moves the digest as it goes, and works in child
     * transactions, which see only what the batch itself holds (a fork
     * is rare). A store error here loses the batch, as in s_store. */
    int frc = ns_lstore_flush(&l->store);
    if (frc == NS_OK)
        frc = s_digest_flush(l);
    if (frc != NS_OK) {
        s_batch_lost(l, frc);
        return frc;
    }
    if (l->on_head) /* the void may take chains back */
        l->on_head(l->on_head_user, NULL);
    ns_ledger_totals_t saved = l->totals;
    /* Entries the stake voted for stay (docs/PROTOCOL.md,
     * "Confirmation"): the void starts past them. Asked before the child
     * transaction opens (the hook reads the ledger). */
    uint64_t from = e->seq;
    ns_account_t now;
    ns_hash_t at;
    if (ns_lstore_account_get(&l->store, l->batch, e->author, &now) != NS_OK)
        return NS_ERR_FORK;
    while (from <= now.seq &&
           ns_lstore_chain_get(&l->store, l->batch, e->author, from, at) ==
               NS_OK &&
           s_confirmed(l, at))
        from++;
    MDB_txn *child = NULL;
    if (ns_lstore_begin(&l->store, l->batch, false, &child) != NS_OK)
        return NS_ERR_FORK;
    ns_account_t a;
    ns_fork_rec_t f;
    memset(&f, 0, sizeof f);
    f.seq = e->seq;
    if (ns_lstore_chain_get(&l->store, child, e->author, e->seq, f.first) ==
            NS_OK &&
        ns_lstore_account_get(&l->store, child, e->author, &a) == NS_OK) {
        memcpy(f.second, e->id, 32);
        bool first_fork = !a.banned;
        bool new_proof = !ns_lstore_fork_entry_known(&l->store, child, e->id);
        a.banned = true;
        /* Void the author's entries from the forked seq on, in a
         * transaction of its own: what cannot be undone stays. */
        ns_ledger_totals_t before_void = l->totals;
        ns_account_t kept = a;
        uint64_t head_seq = a.seq;
        MDB_txn *undo = NULL;
        s_void_t v;
        memset(&v, 0, sizeof v);
        v.forked = e->author;
        v.budget = S_VOID_BUDGET;
        int vrc = from > a.seq
                      ? NS_OK
                      : ns_lstore_begin(&l->store, child, false, &undo);
        if (vrc == NS_OK && undo) {
            l->voiding = undo;
            vrc = s_void_from(l, undo, &a, from, &v);
            l->voiding = NULL;
            if (vrc == NS_OK)
                vrc = ns_lstore_commit(&l->store, undo);
            else
                mdb_txn_abort(undo);
        }
        if (vrc != NS_OK) {
            l->totals = before_void;
            a = kept;
            s_void_release(&v);
        }
        if (ns_lstore_account_put(&l->store, child, &a) == NS_OK &&
            ns_lstore_fork_put(&l->store, child, e->author, &f, buf, len) ==
                NS_OK &&
            ns_lstore_commit(&l->store, child) == NS_OK) {
            s_dirty(l, len);
            s_unfork_named(l, &v, e->author);
            s_rebuffer(l, &v);
            if (new_proof) { /* not a proof we had already */
                l->fork_proofs++;
                memcpy(l->last_fork[0], f.first, NS_HASH_BYTES);
                memcpy(l->last_fork[1], f.second, NS_HASH_BYTES);
            }
            if (l->on_fork)
                l->on_fork(l->on_fork_user, f.first, f.second);
            if (first_fork) {
                l->totals.forks++;
                char who[2 * NS_ID_BYTES + 1], one[2 * NS_HASH_BYTES + 1],
                    two[2 * NS_HASH_BYTES + 1];
                ns_hex(who, e->author, NS_ID_BYTES);
                ns_hex(one, f.first, NS_HASH_BYTES);
                ns_hex(two, f.second, NS_HASH_BYTES);
                ns_warn(NS_MOD_LEDGER,
                        "event=fork_detected author=%s seq=%llu "
                        "first=%s second=%s action=author_banned",
                        who, (unsigned long long)e->seq, one, two);
            }
            if (vrc == NS_OK)
                ns_info(NS_MOD_LEDGER,
                        "event=fork_voided seq=%llu entries=%llu "
                        "confirmed_kept=%llu",
                        (unsigned long long)e->seq,
                        (unsigned long long)(head_seq - a.seq),
                        (unsigned long long)(from - e->seq));
            else
                ns_warn(NS_MOD_LEDGER,
                        "event=fork_kept seq=%llu head=%llu why=%s",
                        (unsigned long long)e->seq,
                        (unsigned long long)head_seq, ns_errname(vrc));
            return NS_ERR_FORK;
        }
        s_void_release(&v);
    }
    mdb_txn_abort(child);
    l->totals = saved;
    return NS_ERR_FORK;
}

static void s_stored(ns_ledger_t *l, const ns_entry_t *e, size_t len)
{
    s_dirty(l, len);
    if (l->claim_delay_ms) {
        memcpy(l->recent[l->recent_next].id, e->id, NS_HASH_BYTES);
        l->recent[l->recent_next].at_ms = ns_mono_ms();
        l->recent_next = (l->recent_next + 1) % NS_LEDGER_RECENT;
    }
    if (l->on_stored)
        l->on_stored(l->on_stored_user, e);
    if (l->on_head)
        l->on_head(l->on_head_user, e->author);
    /* When each entry reached this node, for bench/bench_wan.py's entry
     * reach (log.debug=ledger; the line's ts against the author's). */
    if (ns_log_enabled(NS_LOG_DEBUG, NS_MOD_LEDGER)) {
        char hex[17];
        ns_hex(hex, e->id, 8);
        ns_debug(NS_MOD_LEDGER,
                 "event=entry_stored id=%s type=%u "
                 "author_ms=%llu",
                 hex, (unsigned)e->type, (unsigned long long)e->timestamp_ms);
    }
}

/* e, confirmed, is an entry of a banned author (why: NS_ERR_BANNED) or at
 * a seq its chain holds another (NS_ERR_FORK: s_fork has voided what was
 * not confirmed there). It goes on the chain in place of the voided
 * entries: the branch the stake voted for wins. Returns NS_OK, or why it
 * cannot go yet (NS_ERR_GAP, NS_ERR_MISSING: it waits), or `why`. */
static int s_adopt(ns_ledger_t *l, const uint8_t *buf, size_t len,
                   const ns_entry_t *e, int why)
{
    ns_ledger_totals_t saved = l->totals;
    ns_lapply_t ap = {&l->store, &l->totals, l->verifier, l->verifier_user,
                      {0},       false,      true,        s_defer_digest,
                      l};
    int rc = ns_lapply_entry(&ap, l->batch, e, buf, len);
    if (rc == NS_OK) {
        s_stored(l, e, len);
        char who[2 * NS_ID_BYTES + 1];
        ns_hex(who, e->author, NS_ID_BYTES);
        ns_info(NS_MOD_LEDGER, "event=fork_adopted author=%s seq=%llu", who,
                (unsigned long long)e->seq);
        return NS_OK;
    }
    l->totals = saved;
    if (ap.wrote) {
        s_batch_lost(l, rc);
        return rc;
    }
    if (rc == NS_ERR_MISSING) {
        memcpy(l->missing, ap.missing, NS_HASH_BYTES);
        return rc;
    }
    return rc == NS_ERR_GAP ? rc : why;
}

/* One entry, straight into the batch: the apply step checks everything
 * before it writes, so a rejected entry leaves the batch as it was. */
static int s_store(ns_ledger_t *l, const uint8_t *buf, size_t len,
                   const ns_entry_t *e)
{
    /* A CLOSE stamped ahead of our clock is not taken yet: sync brings it
     * again once it is due (ns_ledger_set_close_hold). */
    if (l->close_ahead_ms && e->type == NS_ENTRY_CLOSE &&
        e->timestamp_ms > ns_now_ms() + l->close_ahead_ms)
        return NS_ERR_STALE;
    int rc = s_batch(l);
    if (rc != NS_OK)
        return rc;
    ns_ledger_totals_t saved = l->totals;
    ns_lapply_t ap = {&l->store, &l->totals, l->verifier, l->verifier_user,
                      {0},       false,      false,       s_defer_digest,
                      l};
    rc = ns_lapply_entry(&ap, l->batch, e, buf, len);
    if (rc == NS_OK) {
        s_stored(l, e, len);
        return NS_OK;
    }
    l->totals = saved;
    if (ap.wrote) {
        s_batch_lost(l, rc);
        return rc;
    }
    if (rc == NS_ERR_MISSING)
        memcpy(l->missing, ap.missing, NS_HASH_BYTES);
    if (rc == NS_ERR_FORK)
        rc = s_fork(l, buf, len, e);
    if ((rc == NS_ERR_FORK || rc == NS_ERR_BANNED) && s_confirmed(l, e->id))
        return s_adopt(l, buf, len, e, rc);
    return rc;
}

/* ---- out-of-order buffer ------------------------------------------------ */

/* A stored entry whose waiters are still to be retried. */
typedef struct {
    uint8_t author[NS_ID_BYTES];
    uint64_t seq;
    ns_hash_t id;
} s_stored_t;

typedef struct {
    s_stored_t *v;
    size_t n, cap;
} s_stack_t;

static bool s_push(s_stack_t *st, const ns_entry_t *e)
{
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        s_stored_t *grown = realloc(st->v, cap * sizeof *grown);
        if (!grown)
            return false;
        st->v = grown;
        st->cap = cap;
    }
    s_stored_t *x = &st->v[st->n++];
    memcpy(x->author, e->author, NS_ID_BYTES);
    x->seq = e->seq;
    memcpy(x->id, e->id, NS_HASH_BYTES);
    return true;
}

static void s_buffer(ns_ledger_t *l, const uint8_t *buf, size_t len,
                     const ns_entry_t *e, int why)
{
    int rc = ns_lbuf_add(&l->pending, buf, len, e,
                         why == NS_ERR_MISSING ? l->missing : NULL);
    if (rc == NS_ERR_NOMEM)
        ns_warn(NS_MOD_LEDGER, "event=buffer_nomem");
}

/* After storing e, retry what waited for it: its author's next entry and
 * entries that named it, and in turn what waited for those. A loop over a
 * stack, not recursion: a chain delivered backwards can hold as many
 * entries as the buffer's bytes allow. What is taken out was verified
 * when it was buffered, so it is parsed without a second signature check;
 * one that still cannot apply goes back to the buffer, waiting for what
 * it lacks now. */
static void s_pending_retry(ns_ledger_t *l, const ns_entry_t *stored)
{
    if (l->pending.n == 0)
        return;
    s_stack_t st = {NULL, 0, 0};
    if (!s_push(&st, stored))
        return;
    while (st.n > 0) {
        s_stored_t x = st.v[--st.n];
        ns_lbuf_item_t *it = ns_lbuf_take(&l->pending, x.author, x.seq, x.id);
        while (it) {
            ns_lbuf_item_t *next = it->newer;
            ns_entry_t e;
            int rc =
                ns_entry_parse(it->bytes, it->len, l->store.network_id, &e);
            if (rc == NS_OK)
                rc = s_store(l, it->bytes, it->len, &e);
            if (rc == NS_OK) {
                if (!s_push(&st, &e))
                    ns_warn(NS_MOD_LEDGER, "event=retry_nomem");
            } else if (rc == NS_ERR_GAP || rc == NS_ERR_MISSING) {
                s_buffer(l, it->bytes, it->len, &e, rc);
            } else if (rc != NS_ERR_DUPLICATE) {
                l->rejected[-rc < NS_ERR_COUNT ? -rc : 0]++;
            }
            free(it);
            it = next;
        }
    }
    free(st.v);
}

static int s_ingest_one(ns_ledger_t *l, const uint8_t *buf, size_t len,
                        uint8_t *missing_author, uint64_t *missing_seq,
                        ns_entry_t *e)
{
    int rc = ns_entry_decode(buf, len, l->store.network_id, e);
    if (rc == NS_OK)
        rc = s_store(l, buf, len, e);
    if (rc == NS_OK) {
        s_pending_retry(l, e);
        return NS_OK;
    }
    if (rc == NS_ERR_GAP || rc == NS_ERR_MISSING) {
        s_buffer(l, buf, len, e, rc);
        if (missing_author && rc == NS_ERR_GAP) {
            ns_account_t a;
            memcpy(missing_author, e->author, 32);
            if (missing_seq && ns_ledger_account(l, e->author, &a) == NS_OK)
                *missing_seq = a.seq + 1;
        }
        return rc;
    }
    if (rc != NS_ERR_DUPLICATE)
        l->rejected[-rc < NS_ERR_COUNT ? -rc : 0]++;
    return rc;
}

bool ns_ledger_is_buffered(const ns_ledger_t *l,
                           const uint8_t author[NS_ID_BYTES], uint64_t seq)
{
    return ns_lbuf_find(&l->pending, author, seq) != NULL;
}

uint64_t ns_ledger_buffered_through(ns_ledger_t *l,
                                    const uint8_t author[NS_ID_BYTES])
{
    ns_account_t a;
    if (ns_ledger_account(l, author, &a) != NS_OK)
        return 0;
    uint64_t s = a.seq;
    if (l->pending.bytes > l->pending.cap_bytes / 2)
        return s; /* leave the rest of the room to what is asked anyway */
    while (s < UINT64_MAX && ns_lbuf_find(&l->pending, author, s + 1))
        s++;
    return s;
}

int ns_ledger_ingest(ns_ledger_t *l, const uint8_t *buf, size_t len,
                     uint8_t *missing_author, uint64_t *missing_seq)
{
    ns_entry_t e;
    return s_ingest_one(l, buf, len, missing_author, missing_seq, &e);
}

int ns_ledger_append(ns_ledger_t *l, const ns_identity_t *me, uint8_t type,
                     const ns_entry_body_t *body, const uint8_t *refs,
                     uint32_t n_refs, ns_buf_t *out, ns_hash_t id)
{
    ns_account_t a;
    ns_buf_t bb;
    ns_buf_init(&bb);
    int rc = ns_ledger_account(l, ns_identity_pk(me), &a);
    if (rc == NS_OK)
        rc = ns_entry_body_encode(type, body, &bb);
    if (rc != NS_OK) {
        ns_buf_release(&bb);
        return rc;
    }
    uint64_t ts = ns_now_ms();
    if (ts < a.head_timestamp_ms)
        ts = a.head_timestamp_ms;
    rc = ns_entry_encode(me, l->store.network_id, a.seq + 1,
                         a.seq ? a.head : s_zero, type, bb.data, bb.len, refs,
                         n_refs, ts, out, id);
    ns_buf_release(&bb);
    if (rc != NS_OK)
        return rc;
    ns_entry_t e;
    if ((rc = ns_entry_decode(out->data, out->len, l->store.network_id, &e)) !=
        NS_OK)
        return rc;
    if ((rc = s_store(l, out->data, out->len, &e)) != NS_OK) {
        l->rejected[-rc < NS_ERR_COUNT ? -rc : 0]++;
        return rc;
    }
    rc = ns_ledger_commit(l);
    if (rc == NS_OK)
        s_pending_retry(l, &e);
    return rc;
}

/* ---- open / close ----------------------------------------------------- */

static int s_read_txn(ns_ledger_t *l, MDB_txn **t, bool *own)
{
    if (l->voiding) { /* a hook, from inside a fork's void */
        *t = l->voiding;
        *own = false;
        return NS_OK;
    }
    if (l->batch) {
        *t = l->batch;
        *own = false;
        return NS_OK;
    }
    *own = true;
    return ns_lstore_begin(&l->store, NULL, true, t);
}

static void s_read_done(MDB_txn *t, bool own)
{
    if (own)
        mdb_txn_abort(t);
}

int ns_ledger_check_conservation(ns_ledger_t *l, uint64_t *sum)
{
    /* One transaction for the accounts and the totals, so a reader in
     * another process never mixes two states of a writing node. */
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_ledger_totals_t totals = l->totals;
    if (own && ns_lstore_totals_get(&l->store, t, &totals) != NS_OK)
        rc = NS_ERR_CORRUPT;
    uint64_t s = 0;
    if (rc == NS_OK)
        rc = ns_lstore_sum_accounts(&l->store, t, &s);
    s_read_done(t, own);
    s += totals.pending + totals.burned;
    if (sum)
        *sum = s;
    if (rc == NS_OK && s != totals.total)
        rc = NS_ERR_CORRUPT;
    return rc;
}

static ns_ledger_t *s_open(const char *dir, const ns_genesis_t *g,
                           bool readonly, uint64_t map_bytes, int *rc,
                           char *err, size_t errlen);

ns_ledger_t *ns_ledger_open(const char *dir, const ns_genesis_t *g, int *rc,
                            char *err, size_t errlen)
{
    return s_open(dir, g, false, NS_LEDGER_MAP_BYTES, rc, err, errlen);
}

ns_ledger_t *ns_ledger_open_mapsize(const char *dir, const ns_genesis_t *g,
                                    uint64_t map_bytes, int *rc, char *err,
                                    size_t errlen)
{
    return s_open(dir, g, false, map_bytes ? map_bytes : NS_LEDGER_MAP_BYTES,
                  rc, err, errlen);
}

ns_ledger_t *ns_ledger_open_readonly(const char *dir, const ns_genesis_t *g,
                                     int *rc, char *err, size_t errlen)
{
    return s_open(dir, g, true, NS_LEDGER_MAP_BYTES, rc, err, errlen);
}

static ns_ledger_t *s_open(const char *dir, const ns_genesis_t *g,
                           bool readonly, uint64_t map_bytes, int *rc,
                           char *err, size_t errlen)
{
    ns_ledger_t *l = calloc(1, sizeof *l);
    MDB_txn *t = NULL;
    int r = NS_ERR_NOMEM;
    if (!l)
        goto fail;
    ns_lbuf_init(&l->pending, NS_LEDGER_BUFFER_BYTES,
                 NS_LEDGER_BUFFER_AUTHOR_BYTES);
    memcpy(l->store.network_id, g->network_id, NS_HASH_BYTES);
    l->store.close_window_ms = ns_genesis_close_window_ms(g);
    l->readonly = readonly;
    crypto_shorthash_keygen(l->moved.key);
    char datafile[PATH_MAX];
    if (readonly &&
        (ns_path_join(datafile, sizeof datafile, dir, "data.mdb") != NS_OK ||
         access(datafile, R_OK) != 0)) {
        r = NS_ERR_NOTFOUND;
        snprintf(err, errlen,
                 "no ledger in %s yet (it is created when the "
                 "node first starts)",
                 dir);
        goto fail;
    }
    if (!readonly && (r = ns_mkdir_p(dir, 0700)) != NS_OK) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        goto fail;
    }
    if ((r = ns_lstore_open(&l->store, dir, readonly, map_bytes, &t, err,
                            errlen)) != NS_OK)
        goto fail;
    ns_hash_t stored;
    r = ns_lstore_network_get(&l->store, t, stored);
    if (r == NS_ERR_NOTFOUND && !readonly) {
        /* A new ledger: the genesis allocations are the first state. */
        memset(&l->totals, 0, sizeof l->totals);
        for (uint32_t i = 0; i < g->n_allocs; i++) {
            ns_account_t a;
            ns_rule_genesis(g, i, &a);
            if ((r = ns_lstore_account_put(&l->store, t, &a)) != NS_OK)
                goto fail;
        }
        l->totals.total = g->total_micro;
        if ((r = ns_lstore_network_put(&l->store, t, g->network_id)) != NS_OK ||
            (r = s_totals_save(t, l)) != NS_OK)
            goto fail;
    } else if (r != NS_OK) {
        snprintf(err, errlen, "ledger %s is corrupt: no readable network id",
                 dir);
        goto fail;
    } else {
        if (memcmp(stored, g->network_id, NS_HASH_BYTES)) {
            r = NS_ERR_NETWORK;
            snprintf(err, errlen,
                     "ledger %s belongs to another network (genesis "
                     "changed?)",
                     dir);
            goto fail;
        }
        if ((r = ns_lstore_totals_get(&l->store, t, &l->totals)) != NS_OK) {
            snprintf(err, errlen, "ledger %s is corrupt: totals unreadable",
                     dir);
            r = NS_ERR_CORRUPT;
            goto fail;
        }
    }
    r = ns_lstore_commit(&l->store, t);
    t = NULL;
    if (r != NS_OK) {
        snprintf(err, errlen, "ledger %s: %s", dir, l->store.last_error);
        goto fail;
    }
    uint64_t sum = 0;
    if (l->totals.total != g->total_micro ||
        ns_ledger_check_conservation(l, &sum) != NS_OK) {
        r = NS_ERR_CORRUPT;
        snprintf(err, errlen,
                 "ledger %s is corrupt: balances sum to %llu, genesis total "
                 "is %llu; refusing to serve wrong balances",
                 dir, (unsigned long long)sum,
                 (unsigned long long)g->total_micro);
        goto fail;
    }
    l->committed = l->totals;
    *rc = NS_OK;
    return l;
fail:
    if (t)
        mdb_txn_abort(t);
    *rc = r;
    if (err && !err[0])
        snprintf(err, errlen, "%s", ns_strerror(r));
    ns_ledger_close(&l);
    return NULL;
}

void ns_ledger_close(ns_ledger_t **pl)
{
    if (!pl || !*pl)
        return;
    ns_ledger_t *l = *pl;
    int rc;
    if (l->batch && (rc = ns_ledger_commit(l)) != NS_OK)
        ns_error(NS_MOD_LEDGER,
                 "event=final_commit_failed err=%s detail=\"%s\"",
                 ns_errname(rc), l->store.last_error);
    ns_lbuf_release(&l->pending);
    ns_lstore_close(&l->store);
    free(l->moved.v);
    free(l);
    *pl = NULL;
}

const char *ns_ledger_last_error(const ns_ledger_t *l)
{
    return l->store.last_error;
}

void ns_ledger_data_arrived(ns_ledger_t *l, const ns_hash_t id)
{
    /* what waits for id (a SLASH waiting for its input): retried like the
     * waiters of an entry that arrives (no author chain involved) */
    static const uint8_t none[NS_ID_BYTES];
    ns_entry_t e;
    memset(&e, 0, sizeof e);
    memcpy(e.author, none, NS_ID_BYTES);
    e.seq = UINT64_MAX; /* no author's seq + 1 matches */
    memcpy(e.id, id, NS_HASH_BYTES);
    s_pending_retry(l, &e);
    if (ns_ledger_commit(l) != NS_OK)
        ns_warn(NS_MOD_LEDGER, "event=commit_failed after=data_arrived");
}

void ns_ledger_set_verifier(ns_ledger_t *l, ns_slash_verifier_fn fn, void *user)
{
    l->verifier = fn;
    l->verifier_user = user;
}

/* ---- queries --------------------------------------------------------------
 */

int ns_ledger_account(ns_ledger_t *l, const uint8_t id[NS_ID_BYTES],
                      ns_account_t *out)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    rc = ns_lstore_account_get(&l->store, t, id, out);
    s_read_done(t, own);
    return rc;
}

int ns_ledger_job(ns_ledger_t *l, const ns_hash_t job_id, ns_ledger_job_t *out)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    rc = ns_lstore_job_get(&l->store, t, job_id, out);
    s_read_done(t, own);
    return rc;
}

uint64_t ns_ledger_close_window_ms(const ns_ledger_t *l)
{
    return l->store.close_window_ms;
}

typedef struct {
    ns_ledger_t *l;
    MDB_txn *t;
    const uint8_t *provider;
    uint64_t now_ms;
    ns_ledger_closable_t *out;
    uint32_t n, max;
} s_closable_t;

static bool s_closable_one(void *u, const ns_ledger_job_t *j)
{
    s_closable_t *c = u;
    if (j->state != NS_JOB_AWARDED ||
        memcmp(j->provider, c->provider, NS_ID_BYTES) ||
        ns_rule_close_at(j, c->l->store.close_window_ms) > c->now_ms)
        return true;
    ns_ledger_closable_t *o = &c->out[c->n];
    ns_pjob_rec_t pj;
    ns_lock_rec_t k;
    int rc =
        ns_lstore_pjob_get(&c->l->store, c->t, c->provider, j->award_id, &pj);
    memcpy(o->job_id, j->job_id, NS_HASH_BYTES);
    if (rc == NS_OK && !sodium_is_zero(pj.result_id, NS_HASH_BYTES)) {
        memcpy(o->ref_id, pj.result_id, NS_HASH_BYTES);
        o->row = NS_ENTRY_RESULT;
    } else if (rc == NS_OK) {
        memcpy(o->ref_id, pj.accept_id, NS_HASH_BYTES);
        o->row = NS_ENTRY_ACCEPT;
    } else if (rc == NS_ERR_NOTFOUND &&
               ns_lstore_lock_get(&c->l->store, c->t, c->provider, j->award_id,
                                  &k) == NS_ERR_NOTFOUND) {
        memcpy(o->ref_id, j->award_id, NS_HASH_BYTES);
        o->row = NS_ENTRY_AWARD;
    } else {
        return true;
    }
    return ++c->n < c->max;
}

uint32_t ns_ledger_closable(ns_ledger_t *l, const uint8_t provider[NS_ID_BYTES],
                            uint64_t now_ms, ns_ledger_closable_t *out,
                            uint32_t max)
{
    MDB_txn *t;
    bool own;
    if (max == 0 || s_read_txn(l, &t, &own) != NS_OK)
        return 0;
    s_closable_t c = {l, t, provider, now_ms, out, 0, max};
    ns_lstore_each_job(&l->store, t, s_closable_one, &c);
    s_read_done(t, own);
    return c.n;
}

int ns_ledger_credit(ns_ledger_t *l, const ns_hash_t ref,
                     const uint8_t to[NS_ID_BYTES], uint64_t *amount,
                     bool *claimed)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_credit_rec_t c;
    rc = ns_lstore_credit_get(&l->store, t, ref, to, &c);
    if (rc == NS_OK) {
        *amount = c.amount;
        *claimed = c.state == NS_CREDIT_CLAIMED;
    }
    s_read_done(t, own);
    return rc;
}

void ns_ledger_set_claim_delay(ns_ledger_t *l, uint64_t ms)
{
    l->claim_delay_ms = ms;
}

void ns_ledger_set_close_hold(ns_ledger_t *l, uint64_t ms)
{
    l->close_ahead_ms = ms;
}

/* Whether src was stored less than the claim delay ago. */
static bool s_too_recent(const ns_ledger_t *l, const uint8_t *src)
{
    uint64_t now = ns_mono_ms();
    for (uint32_t i = 0; i < NS_LEDGER_RECENT; i++)
        if (l->recent[i].at_ms &&
            now - l->recent[i].at_ms < l->claim_delay_ms &&
            memcmp(l->recent[i].id, src, NS_HASH_BYTES) == 0)
            return true;
    return false;
}

/* Whether a credit from src waits (docs/PROTOCOL.md, "Confirmation"):
 * confirmed, it is safe, whoever made it; not yet confirmed, it waits;
 * where nobody can vote (no stake), the ban and the claim delay decide. */
static bool s_claim_later(void *u, const uint8_t *src, bool by_banned)
{
    const ns_ledger_t *l = u;
    ns_confirm_state st =
        l->confirm ? l->confirm(l->confirm_user, src) : NS_CONFIRM_NONE;
    if (st != NS_CONFIRM_NONE)
        return st != NS_CONFIRM_YES;
    return by_banned || (l->claim_delay_ms && s_too_recent(l, src));
}

static bool s_claim_any(void *u, const uint8_t *src, bool by_banned)
{
    (void)u;
    (void)src;
    (void)by_banned;
    return false;
}

static uint32_t
s_unclaimed(ns_ledger_t *l, const uint8_t *to, uint8_t *ids, uint32_t max,
            bool (*skip)(void *u, const uint8_t *src, bool by_banned))
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return 0;
    uint32_t n = ns_lstore_unclaimed(&l->store, t, to, ids, max, skip, l);
    s_read_done(t, own);
    return n;
}

uint32_t ns_ledger_unclaimed(ns_ledger_t *l, const uint8_t to[NS_ID_BYTES],
                             uint8_t *ids, uint32_t max)
{
    return s_unclaimed(l, to, ids, max, s_claim_later);
}

uint32_t ns_ledger_unclaimed_all(ns_ledger_t *l, const uint8_t to[NS_ID_BYTES],
                                 uint8_t *ids, uint32_t max)
{
    return s_unclaimed(l, to, ids, max, s_claim_any);
}

const uint8_t *ns_ledger_network_id(const ns_ledger_t *l)
{
    return l->store.network_id;
}

void ns_ledger_set_confirm(ns_ledger_t *l, ns_ledger_confirm_fn fn, void *user)
{
    l->confirm = fn;
    l->confirm_user = user;
}

void ns_ledger_set_on_stored(ns_ledger_t *l, ns_ledger_stored_fn fn, void *user)
{
    l->on_stored = fn;
    l->on_stored_user = user;
}

ns_confirm_state ns_ledger_confirmation(ns_ledger_t *l, const ns_hash_t id)
{
    ns_confirm_state st =
        l->confirm ? l->confirm(l->confirm_user, id) : NS_CONFIRM_NONE;
    if (st == NS_CONFIRM_NO && l->on_want)
        l->on_want(l->on_want_user, id);
    return st;
}

void ns_ledger_set_on_want(ns_ledger_t *l, ns_ledger_want_fn fn, void *user)
{
    l->on_want = fn;
    l->on_want_user = user;
}

void ns_ledger_set_on_fork(ns_ledger_t *l, ns_ledger_fork_fn fn, void *user)
{
    l->on_fork = fn;
    l->on_fork_user = user;
}

void ns_ledger_set_on_head(ns_ledger_t *l, ns_ledger_head_fn fn, void *user)
{
    l->on_head = fn;
    l->on_head_user = user;
}

bool ns_ledger_holds(ns_ledger_t *l, const ns_hash_t id)
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return false;
    const uint8_t *buf;
    size_t len;
    bool held = ns_lstore_entry_bytes(&l->store, t, id, &buf, &len) == NS_OK;
    s_read_done(t, own);
    return held;
}

/* A malloc'd copy of n bytes of the map (read transactions end). */
static int s_copy_out(const uint8_t *stored, size_t n, uint8_t **buf,
                      size_t *len)
{
    *buf = malloc(n ? n : 1);
    if (!*buf)
        return NS_ERR_NOMEM;
    memcpy(*buf, stored, n);
    *len = n;
    return NS_OK;
}

int ns_ledger_entry_copy(ns_ledger_t *l, const ns_hash_t id, uint8_t **buf,
                         size_t *len)
{
    MDB_txn *t;
    bool own;
    *buf = NULL;
    *len = 0;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    const uint8_t *stored;
    size_t n;
    rc = ns_lstore_entry_bytes(&l->store, t, id, &stored, &n);
    if (rc != NS_OK)
        rc = ns_lstore_fork_entry_bytes(&l->store, t, id, &stored, &n);
    if (rc == NS_OK)
        rc = s_copy_out(stored, n, buf, len);
    s_read_done(t, own);
    return rc;
}

uint64_t ns_ledger_fork_proofs(const ns_ledger_t *l, ns_hash_t first,
                               ns_hash_t second)
{
    if (first)
        memcpy(first, l->last_fork[0], NS_HASH_BYTES);
    if (second)
        memcpy(second, l->last_fork[1], NS_HASH_BYTES);
    return l->fork_proofs;
}

int ns_ledger_reconsider(ns_ledger_t *l, const ns_hash_t id)
{
    if (l->readonly)
        return NS_ERR_STATE;
    int rc = s_batch(l);
    if (rc != NS_OK)
        return rc;
    const uint8_t *buf;
    size_t len;
    if (ns_lstore_entry_bytes(&l->store, l->batch, id, &buf, &len) == NS_OK)
        return NS_ERR_DUPLICATE; /* on the chain already */
    if ((rc = ns_lstore_fork_entry_bytes(&l->store, l->batch, id, &buf,
                                         &len)) != NS_OK)
        return rc;
    uint8_t *copy = malloc(len); /* buf lives in the map: not across puts */
    if (!copy)
        return NS_ERR_NOMEM;
    memcpy(copy, buf, len);
    ns_entry_t e;
    rc = s_ingest_one(l, copy, len, NULL, NULL, &e);
    free(copy);
    return rc;
}

int ns_ledger_get(ns_ledger_t *l, const uint8_t author[NS_ID_BYTES],
                  uint64_t seq, uint8_t **buf, size_t *len)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_hash_t id;
    const uint8_t *stored;
    size_t n;
    rc = ns_lstore_chain_get(&l->store, t, author, seq, id);
    if (rc == NS_OK)
        rc = ns_lstore_entry_bytes(&l->store, t, id, &stored, &n);
    if (rc == NS_OK)
        rc = s_copy_out(stored, n, buf, len);
    s_read_done(t, own);
    return rc;
}

void ns_ledger_each_account(ns_ledger_t *l,
                            bool (*fn)(void *u, const ns_account_t *a), void *u)
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return;
    ns_lstore_each_account(&l->store, t, fn, u);
    s_read_done(t, own);
}

void ns_ledger_each_entry(ns_ledger_t *l, const uint8_t *author,
                          bool (*fn)(void *u, const ns_entry_t *e), void *u)
{
    MDB_txn *t;
    bool own;

    if (s_read_txn(l, &t, &own) != NS_OK)
        return;
    ns_lstore_each_entry(&l->store, t, author, fn, u);
    s_read_done(t, own);
}

void ns_ledger_stats(ns_ledger_t *l, ns_ledger_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (l->readonly) { /* another process writes: read the latest */
        MDB_txn *t;
        if (ns_lstore_begin(&l->store, NULL, true, &t) == NS_OK) {
            if (ns_lstore_totals_get(&l->store, t, &l->totals) != NS_OK)
                memset(&l->totals, 0, sizeof l->totals);
            mdb_txn_abort(t);
        }
    }
    s->entries = l->totals.entries;
    s->total = l->totals.total;
    s->burned = l->totals.burned;
    s->pending_credit = l->totals.pending;
    s->forks = l->totals.forks;
    /* a read error leaves the moves of the open batch out; its commit
     * fails on the same error */
    (void)s_digest_flush(l);
    s->buffered = l->pending.n;
    s->buffered_bytes = l->pending.bytes;
    s->buffer_evicted = l->pending.evicted;
    memcpy(s->digest, l->totals.digest, NS_HASH_BYTES);
    memcpy(s->rejected, l->rejected, sizeof s->rejected);
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) == NS_OK) {
        uint64_t n;
        if (ns_lstore_count_accounts(&l->store, t, &n) == NS_OK)
            s->accounts = n;
        s_read_done(t, own);
    }
}
