/* ledger_store.c - the ledger's LMDB environment and typed records.
 *
 * Nothing here knows the rules: records go in and out as they are. See
 * ledger_store.h for the databases and keys.
 */
#include "ledger_store.h"

#include "nightshift/util.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MDB_val holds a non-const pointer even for keys LMDB only reads. */
static void *s_unconst(const void *p)
{
    union {
        const void *c;
        void *v;
    } u = {p};
    return u.v;
}

#define S_LOG_LINES_PER_MIN 10 /* storage error lines */

/* Keep the cause of a storage error and say it in the log. */
static void s_note(ns_lstore_t *s, int rc, int err)
{
    s->last_rc = rc;
    snprintf(s->last_error, sizeof s->last_error, "%s", mdb_strerror(rc));
    uint32_t suppressed = s->log_limit.suppressed;
    if (!ns_ratelimit_allow(&s->log_limit, ns_mono_ms(), S_LOG_LINES_PER_MIN,
                            60000))
        return;
    s->log_limit.suppressed = 0;
    ns_error(NS_MOD_LEDGER,
             "event=storage_error err=%s code=%d detail=\"%s\" suppressed=%u",
             ns_errname(err), rc, s->last_error, suppressed);
}

int ns_lstore_rc(ns_lstore_t *s, int rc)
{
    int err;
    switch (rc) {
    case MDB_SUCCESS:
        return NS_OK;
    case MDB_NOTFOUND:
        return NS_ERR_NOTFOUND;
    case ENOMEM:
        return NS_ERR_NOMEM;
    case MDB_MAP_FULL:
        err = NS_ERR_MAPFULL;
        break;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
        err = NS_ERR_CORRUPT;
        break;
    default:
        err = NS_ERR_IO;
        break;
    }
    s_note(s, rc, err);
    return err;
}

/* ---- records of the open batch ------------------------------------------ */

_Static_assert(NS_LSTORE_KEY_MAX >= 64 && NS_LSTORE_KEY_MAX >= 40 &&
                   NS_LSTORE_KEY_MAX >= NS_HASH_BYTES,
               "keys of the buffered databases: credits, chain, entries");
_Static_assert(sizeof(((ns_lstore_t *)0)->wbuf_key) ==
                   crypto_shorthash_KEYBYTES,
               "SipHash key size");

static uint32_t s_wb_slot(const ns_lstore_t *s, const ns_lstore_wbuf_t *w,
                          const uint8_t *key)
{
    uint8_t h[crypto_shorthash_BYTES];
    uint32_t x;
    crypto_shorthash(h, key, w->klen, s->wbuf_key);
    memcpy(&x, h, sizeof x);
    return x & (w->n_slots - 1);
}

static ns_lstore_pending_t *
s_wb_find(const ns_lstore_t *s, const ns_lstore_wbuf_t *w, const uint8_t *key)
{
    if (!w->n)
        return NULL;
    for (uint32_t i = s_wb_slot(s, w, key);; i = (i + 1) & (w->n_slots - 1)) {
        uint32_t k = w->slots[i];
        if (!k)
            return NULL;
        if (memcmp(w->v[k - 1].key, key, w->klen) == 0)
            return &w->v[k - 1];
    }
}

static void s_wb_index(const ns_lstore_t *s, ns_lstore_wbuf_t *w, uint32_t k)
{
    uint32_t i = s_wb_slot(s, w, w->v[k].key);
    while (w->slots[i])
        i = (i + 1) & (w->n_slots - 1);
    w->slots[i] = k + 1;
}

/* Room for one more: v and the index grown as needed. */
static int s_wb_room(const ns_lstore_t *s, ns_lstore_wbuf_t *w)
{
    if (w->n == w->cap) {
        uint32_t cap = w->cap ? w->cap * 2 : 1024;
        ns_lstore_pending_t *v =
            cap > w->cap ? realloc(w->v, cap * sizeof *v) : NULL;
        if (!v)
            return NS_ERR_NOMEM;
        w->v = v;
        w->cap = cap;
    }
    if ((w->n + 1) * 2 > w->n_slots) {
        uint32_t n_slots = w->n_slots ? w->n_slots * 2 : 2048;
        uint32_t *slots =
            n_slots > w->n_slots ? calloc(n_slots, sizeof *slots) : NULL;
        if (!slots)
            return NS_ERR_NOMEM;
        free(w->slots);
        w->slots = slots;
        w->n_slots = n_slots;
        for (uint32_t k = 0; k < w->n; k++)
            s_wb_index(s, w, k);
    }
    return NS_OK;
}

/* Keep a copy of (key, val); put again, the last one stands, as in the
 * database. */
static int s_wb_put(const ns_lstore_t *s, ns_lstore_wbuf_t *w,
                    const uint8_t *key, const void *val, size_t len)
{
    ns_lstore_pending_t *p = s_wb_find(s, w, key);
    if (p && p->len == len) {
        memcpy(p->val, val, len);
        return NS_OK;
    }
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return NS_ERR_NOMEM;
    memcpy(copy, val, len);
    if (p) {
        free(p->val);
        p->val = copy;
        p->len = len;
        return NS_OK;
    }
    if (s_wb_room(s, w) != NS_OK) {
        free(copy);
        return NS_ERR_NOMEM;
    }
    p = &w->v[w->n];
    memset(p->key, 0, sizeof p->key);
    memcpy(p->key, key, w->klen);
    p->val = copy;
    p->len = len;
    s_wb_index(s, w, w->n++);
    return NS_OK;
}

static void s_wb_drop(ns_lstore_wbuf_t *w)
{
    if (!w->n)
        return;
    for (uint32_t k = 0; k < w->n; k++)
        free(w->v[k].val);
    memset(w->slots, 0, (size_t)w->n_slots * sizeof *w->slots);
    w->n = 0;
}

static void s_wb_release(ns_lstore_wbuf_t *w)
{
    s_wb_drop(w);
    free(w->v);
    free(w->slots);
    w->v = NULL;
    w->slots = NULL;
    w->cap = w->n_slots = 0;
}

/* Keys are zero past klen: comparing all of them orders as LMDB does. */
static int s_wb_cmp(const void *x, const void *y)
{
    return memcmp(((const ns_lstore_pending_t *)x)->key,
                  ((const ns_lstore_pending_t *)y)->key, NS_LSTORE_KEY_MAX);
}

/* In key order through one cursor: each put starts from the leaf the
 * last one wrote, most often the same or the next. */
static int s_wb_flush(ns_lstore_t *s, MDB_txn *t, ns_lstore_wbuf_t *w,
                      MDB_dbi db)
{
    if (!w->n)
        return NS_OK;
    qsort(w->v, w->n, sizeof *w->v, s_wb_cmp);
    MDB_cursor *c = NULL;
    int rc = ns_lstore_rc(s, mdb_cursor_open(t, db, &c));
    for (uint32_t k = 0; rc == NS_OK && k < w->n; k++) {
        MDB_val key = {w->klen, w->v[k].key}, val = {w->v[k].len, w->v[k].val};
        rc = ns_lstore_rc(s, mdb_cursor_put(c, &key, &val, 0));
    }
    if (c)
        mdb_cursor_close(c);
    s_wb_drop(w);
    return rc;
}

int ns_lstore_flush(ns_lstore_t *s)
{
    MDB_txn *t = s->wb_txn;
    int rc = NS_OK;
    if (t && (rc = s_wb_flush(s, t, &s->put_entries, s->entries)) == NS_OK &&
        (rc = s_wb_flush(s, t, &s->put_chain, s->chain)) == NS_OK &&
        (rc = s_wb_flush(s, t, &s->put_accounts, s->accounts)) == NS_OK)
        rc = s_wb_flush(s, t, &s->put_credits, s->credits);
    ns_lstore_drop(s);
    return rc;
}

void ns_lstore_drop(ns_lstore_t *s)
{
    s_wb_drop(&s->put_entries);
    s_wb_drop(&s->put_chain);
    s_wb_drop(&s->put_accounts);
    s_wb_drop(&s->put_credits);
}

/* w's records, before a cursor walks its database in t. */
static int s_wb_flush_one(ns_lstore_t *s, MDB_txn *t, ns_lstore_wbuf_t *w,
                          MDB_dbi db)
{
    if (!w->n || t != s->wb_txn)
        return NS_OK;
    return s_wb_flush(s, t, w, db);
}

/* The batch's record under key, or NULL (t another transaction). */
static const ns_lstore_pending_t *s_wb_get(const ns_lstore_t *s, MDB_txn *t,
                                           const ns_lstore_wbuf_t *w,
                                           const uint8_t *key)
{
    return t && t == s->wb_txn ? s_wb_find(s, w, key) : NULL;
}

/* ---- typed get/put ------------------------------------------------------- */

static int s_get(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const void *k,
                 size_t kl, void *v, size_t vl)
{
    MDB_val key = {kl, s_unconst(k)}, val;
    int rc = mdb_get(t, db, &key, &val);
    if (rc != MDB_SUCCESS)
        return ns_lstore_rc(s, rc);
    if (val.mv_size != vl)
        return NS_ERR_CORRUPT;
    memcpy(v, val.mv_data, vl);
    return NS_OK;
}

static int s_put(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const void *k,
                 size_t kl, const void *v, size_t vl)
{
    MDB_val key = {kl, s_unconst(k)}, val = {vl, s_unconst(v)};
    return ns_lstore_rc(s, mdb_put(t, db, &key, &val, 0));
}

static int s_del(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const void *k,
                 size_t kl);

static void s_key2(uint8_t out[64], const uint8_t *a, const uint8_t *b)
{
    memcpy(out, a, 32);
    memcpy(out + 32, b, 32);
}

int ns_lstore_account_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *id,
                          ns_account_t *a)
{
    const ns_lstore_pending_t *p = s_wb_get(s, t, &s->put_accounts, id);
    if (p) {
        if (p->len != sizeof *a)
            return NS_ERR_CORRUPT;
        memcpy(a, p->val, sizeof *a);
        return NS_OK;
    }
    int rc = s_get(s, t, s->accounts, id, NS_ID_BYTES, a, sizeof *a);
    if (rc == NS_ERR_NOTFOUND) {
        memset(a, 0, sizeof *a);
        memcpy(a->id, id, NS_ID_BYTES);
        return NS_OK; /* a new account: all zero */
    }
    return rc;
}

int ns_lstore_account_put(ns_lstore_t *s, MDB_txn *t, const ns_account_t *a)
{
    if (t && t == s->wb_txn)
        return s_wb_put(s, &s->put_accounts, a->id, a, sizeof *a);
    return s_put(s, t, s->accounts, a->id, NS_ID_BYTES, a, sizeof *a);
}

int ns_lstore_job_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t job_id,
                      ns_ledger_job_t *j)
{
    return s_get(s, t, s->jobs, job_id, NS_HASH_BYTES, j, sizeof *j);
}

int ns_lstore_job_put(ns_lstore_t *s, MDB_txn *t, const ns_ledger_job_t *j)
{
    return s_put(s, t, s->jobs, j->job_id, NS_HASH_BYTES, j, sizeof *j);
}

/* Records keyed by two 32-byte ids (credits, locks, pjobs). */
static int s_get2(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const uint8_t *a,
                  const uint8_t *b, void *v, size_t vl)
{
    uint8_t key[64];
    s_key2(key, a, b);
    return s_get(s, t, db, key, sizeof key, v, vl);
}

static int s_put2(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const uint8_t *a,
                  const uint8_t *b, const void *v, size_t vl)
{
    uint8_t key[64];
    s_key2(key, a, b);
    return s_put(s, t, db, key, sizeof key, v, vl);
}

int ns_lstore_credit_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to, ns_credit_rec_t *c)
{
    uint8_t key[64];
    s_key2(key, src, to);
    const ns_lstore_pending_t *p = s_wb_get(s, t, &s->put_credits, key);
    if (p) {
        if (p->len != sizeof *c)
            return NS_ERR_CORRUPT;
        memcpy(c, p->val, sizeof *c);
        return NS_OK;
    }
    return s_get(s, t, s->credits, key, sizeof key, c, sizeof *c);
}

int ns_lstore_credit_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to, const ns_credit_rec_t *c)
{
    uint8_t key[64];
    s_key2(key, src, to);
    if (t && t == s->wb_txn)
        return s_wb_put(s, &s->put_credits, key, c, sizeof *c);
    return s_put(s, t, s->credits, key, sizeof key, c, sizeof *c);
}

int ns_lstore_lock_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, ns_lock_rec_t *k)
{
    return s_get2(s, t, s->locks, provider, award, k, sizeof *k);
}

int ns_lstore_lock_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, const ns_lock_rec_t *k)
{
    return s_put2(s, t, s->locks, provider, award, k, sizeof *k);
}

int ns_lstore_pjob_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, ns_pjob_rec_t *p)
{
    return s_get2(s, t, s->pjobs, provider, award, p, sizeof *p);
}

int ns_lstore_pjob_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award, const ns_pjob_rec_t *p)
{
    return s_put2(s, t, s->pjobs, provider, award, p, sizeof *p);
}

int ns_lstore_lock_del(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award)
{
    uint8_t key[64];
    s_key2(key, provider, award);
    return s_del(s, t, s->locks, key, sizeof key);
}

int ns_lstore_pjob_del(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                       const ns_hash_t award)
{
    uint8_t key[64];
    s_key2(key, provider, award);
    return s_del(s, t, s->pjobs, key, sizeof key);
}

int ns_lstore_locked_sum(ns_lstore_t *s, MDB_txn *t, const uint8_t *provider,
                         uint64_t *sum)
{
    MDB_cursor *c = NULL;
    uint8_t first[64];
    *sum = 0;
    memcpy(first, provider, NS_ID_BYTES);
    memset(first + NS_ID_BYTES, 0, 32);
    int mrc = mdb_cursor_open(t, s->locks, &c);
    if (mrc != MDB_SUCCESS)
        return ns_lstore_rc(s, mrc);
    MDB_val k = {sizeof first, first}, v;
    for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == MDB_SUCCESS;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 64 || memcmp(k.mv_data, provider, NS_ID_BYTES))
            break;
        ns_lock_rec_t lk;
        if (v.mv_size != sizeof lk) {
            mdb_cursor_close(c);
            return NS_ERR_CORRUPT;
        }
        memcpy(&lk, v.mv_data, sizeof lk);
        if (lk.state == NS_LOCK_LOCKED)
            *sum += lk.amount;
    }
    mdb_cursor_close(c);
    return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? NS_OK
                                                     : ns_lstore_rc(s, mrc);
}

int ns_lstore_escrow_sum(ns_lstore_t *s, MDB_txn *t, const uint8_t *requester,
                         uint64_t *sum)
{
    MDB_cursor *c = NULL;
    *sum = 0;
    int mrc = mdb_cursor_open(t, s->jobs, &c);
    if (mrc != MDB_SUCCESS)
        return ns_lstore_rc(s, mrc);
    MDB_val k, v;
    for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        ns_ledger_job_t j;
        if (v.mv_size != sizeof j) {
            mdb_cursor_close(c);
            return NS_ERR_CORRUPT;
        }
        memcpy(&j, v.mv_data, sizeof j);
        if ((j.state == NS_JOB_OPEN || j.state == NS_JOB_AWARDED) &&
            memcmp(j.requester, requester, NS_ID_BYTES) == 0)
            *sum += j.escrow;
    }
    mdb_cursor_close(c);
    return mrc == MDB_SUCCESS || mrc == MDB_NOTFOUND ? NS_OK
                                                     : ns_lstore_rc(s, mrc);
}

void ns_lstore_each_job(ns_lstore_t *s, MDB_txn *t,
                        bool (*fn)(void *u, const ns_ledger_job_t *j), void *u)
{
    MDB_cursor *c = NULL;
    if (mdb_cursor_open(t, s->jobs, &c) != MDB_SUCCESS)
        return;
    MDB_val k, v;
    for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        ns_ledger_job_t j;
        if (v.mv_size != sizeof j)
            break;
        memcpy(&j, v.mv_data, sizeof j);
        if (!fn(u, &j))
            break;
    }
    mdb_cursor_close(c);
}

int ns_lstore_undo_get(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                       ns_undo_rec_t *u, ns_undo_release_t *rel, uint32_t max)
{
    if (!s->has_undo)
        return NS_ERR_NOTFOUND;
    MDB_val key = {NS_HASH_BYTES, s_unconst(id)}, val;
    int rc = mdb_get(t, s->undo, &key, &val);
    if (rc != MDB_SUCCESS)
        return ns_lstore_rc(s, rc);
    if (val.mv_size < sizeof *u)
        return NS_ERR_CORRUPT;
    memcpy(u, val.mv_data, sizeof *u);
    if (u->n_released > max || u->n_released > NS_MAX_REFS ||
        val.mv_size != sizeof *u + u->n_released * sizeof *rel)
        return NS_ERR_CORRUPT;
    if (u->n_released)
        memcpy(rel, (const uint8_t *)val.mv_data + sizeof *u,
               u->n_released * sizeof *rel);
    return NS_OK;
}

int ns_lstore_undo_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                       const ns_undo_rec_t *u, const ns_undo_release_t *rel)
{
    if (!s->has_undo || u->n_released > NS_MAX_REFS)
        return NS_ERR_STATE;
    uint8_t buf[sizeof *u + NS_MAX_REFS * sizeof *rel];
    memcpy(buf, u, sizeof *u);
    if (u->n_released)
        memcpy(buf + sizeof *u, rel, u->n_released * sizeof *rel);
    return s_put(s, t, s->undo, id, NS_HASH_BYTES, buf,
                 sizeof *u + u->n_released * sizeof *rel);
}

int ns_lstore_undo_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id)
{
    return s->has_undo ? s_del(s, t, s->undo, id, NS_HASH_BYTES) : NS_OK;
}

/* A chain record: the entry id, then the author's account before it (a
 * ledger written before the two were one record holds the id alone, and
 * the account in prestate). */
#define S_CHAIN_OLD NS_HASH_BYTES
#define S_CHAIN_REC (NS_HASH_BYTES + sizeof(ns_account_t))

static int s_chain_rec(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                       uint64_t seq, MDB_val *val)
{
    uint8_t ck[40];
    ns_ledger_chain_key(ck, author, seq);
    const ns_lstore_pending_t *p = s_wb_get(s, t, &s->put_chain, ck);
    if (p) {
        val->mv_size = p->len;
        val->mv_data = p->val;
        return NS_OK;
    }
    MDB_val key = {sizeof ck, ck};
    int rc = mdb_get(t, s->chain, &key, val);
    if (rc != MDB_SUCCESS)
        return ns_lstore_rc(s, rc);
    if (val->mv_size != S_CHAIN_OLD && val->mv_size != S_CHAIN_REC)
        return NS_ERR_CORRUPT;
    return NS_OK;
}

int ns_lstore_chain_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                        uint64_t seq, ns_hash_t id)
{
    MDB_val val;
    int rc = s_chain_rec(s, t, author, seq, &val);
    if (rc == NS_OK)
        memcpy(id, val.mv_data, NS_HASH_BYTES);
    return rc;
}

int ns_lstore_chain_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                        uint64_t seq, const ns_hash_t id,
                        const ns_account_t *pre)
{
    uint8_t ck[40], rec[S_CHAIN_REC];
    ns_ledger_chain_key(ck, author, seq);
    memcpy(rec, id, NS_HASH_BYTES);
    memcpy(rec + NS_HASH_BYTES, pre, sizeof *pre);
    if (t && t == s->wb_txn)
        return s_wb_put(s, &s->put_chain, ck, rec, sizeof rec);
    return s_put(s, t, s->chain, ck, sizeof ck, rec, sizeof rec);
}

static int s_del(ns_lstore_t *s, MDB_txn *t, MDB_dbi db, const void *k,
                 size_t kl)
{
    MDB_val key = {kl, s_unconst(k)};
    int rc = mdb_del(t, db, &key, NULL);
    return rc == MDB_NOTFOUND ? NS_OK : ns_lstore_rc(s, rc);
}

int ns_lstore_credit_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t src,
                         const uint8_t *to)
{
    if (s->put_credits.n)
        return NS_ERR_STATE; /* ns_lstore_flush first */
    uint8_t key[64];
    s_key2(key, src, to);
    return s_del(s, t, s->credits, key, sizeof key);
}

int ns_lstore_job_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t job_id)
{
    return s_del(s, t, s->jobs, job_id, NS_HASH_BYTES);
}

int ns_lstore_entry_forget(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                           uint64_t seq, const ns_hash_t id)
{
    uint8_t ck[40];
    if (s->put_entries.n || s->put_chain.n || s->put_credits.n)
        return NS_ERR_STATE; /* ns_lstore_flush first */
    ns_ledger_chain_key(ck, author, seq);
    int rc = s_del(s, t, s->entries, id, NS_HASH_BYTES);
    if (rc == NS_OK)
        rc = s_del(s, t, s->chain, ck, sizeof ck);
    if (rc == NS_OK)
        rc = s_del(s, t, s->prestate, ck, sizeof ck);
    return rc;
}

int ns_lstore_entry_void(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                         uint64_t seq, const ns_hash_t id)
{
    const uint8_t *buf = NULL;
    size_t len = 0;
    if (s->put_entries.n || s->put_chain.n || s->put_credits.n)
        return NS_ERR_STATE; /* ns_lstore_flush first */
    uint8_t *copy = NULL; /* buf is in the map: not valid across a put */
    int rc = ns_lstore_entry_bytes(s, t, id, &buf, &len);
    if (rc == NS_OK && !(copy = malloc(len)))
        rc = NS_ERR_NOMEM;
    if (rc == NS_OK) {
        memcpy(copy, buf, len);
        rc = s_put(s, t, s->forkentries, id, NS_HASH_BYTES, copy, len);
    }
    free(copy);
    return rc == NS_OK ? ns_lstore_entry_forget(s, t, author, seq, id) : rc;
}

int ns_lstore_fork_entry_bytes(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                               const uint8_t **buf, size_t *len)
{
    MDB_val key = {NS_HASH_BYTES, s_unconst(id)}, val;
    int rc = mdb_get(t, s->forkentries, &key, &val);
    if (rc != MDB_SUCCESS)
        return ns_lstore_rc(s, rc);
    *buf = val.mv_data;
    *len = val.mv_size;
    return NS_OK;
}

bool ns_lstore_fork_entry_known(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id)
{
    MDB_val key = {NS_HASH_BYTES, s_unconst(id)}, val;
    return mdb_get(t, s->forkentries, &key, &val) == MDB_SUCCESS;
}

int ns_lstore_prestate_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                           uint64_t seq, ns_account_t *a)
{
    MDB_val val;
    int rc = s_chain_rec(s, t, author, seq, &val);
    if (rc == NS_OK && val.mv_size == S_CHAIN_REC) {
        memcpy(a, (const uint8_t *)val.mv_data + NS_HASH_BYTES, sizeof *a);
        return NS_OK;
    }
    if (rc != NS_OK && rc != NS_ERR_NOTFOUND)
        return rc;
    uint8_t ck[40]; /* stored by an older version */
    ns_ledger_chain_key(ck, author, seq);
    return s_get(s, t, s->prestate, ck, sizeof ck, a, sizeof *a);
}

int ns_lstore_entry_bytes(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                          const uint8_t **buf, size_t *len)
{
    const ns_lstore_pending_t *p = s_wb_get(s, t, &s->put_entries, id);
    if (p) {
        *buf = p->val;
        *len = p->len;
        return NS_OK;
    }
    MDB_val key = {NS_HASH_BYTES, s_unconst(id)}, val;
    int rc = mdb_get(t, s->entries, &key, &val);
    if (rc != MDB_SUCCESS)
        return ns_lstore_rc(s, rc);
    *buf = val.mv_data;
    *len = val.mv_size;
    return NS_OK;
}

int ns_lstore_entry_load(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                         ns_entry_t *e, ns_entry_body_t *b)
{
    const uint8_t *buf = NULL;
    size_t len = 0;
    int rc = ns_lstore_entry_bytes(s, t, id, &buf, &len);
    if (rc != NS_OK)
        return rc;
    /* Verified when it was stored: no second signature check. */
    rc = ns_entry_parse(buf, len, s->network_id, e);
    if (rc == NS_OK && b)
        rc = ns_entry_body_decode(e, b);
    return rc == NS_OK ? NS_OK : NS_ERR_CORRUPT;
}

int ns_lstore_entry_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id,
                        const uint8_t *buf, size_t len)
{
    if (t && t == s->wb_txn)
        return s_wb_put(s, &s->put_entries, id, buf, len);
    return s_put(s, t, s->entries, id, NS_HASH_BYTES, buf, len);
}

void ns_lstore_each_fork(ns_lstore_t *s, MDB_txn *t,
                         bool (*fn)(void *u, const uint8_t *author,
                                    const ns_fork_rec_t *f),
                         void *u)
{
    MDB_cursor *c = NULL;
    if (mdb_cursor_open(t, s->forks, &c) != MDB_SUCCESS)
        return;
    MDB_val k, v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        ns_fork_rec_t f;
        if (k.mv_size != NS_ID_BYTES || v.mv_size != sizeof f)
            continue;
        memcpy(&f, v.mv_data, sizeof f);
        if (!fn(u, k.mv_data, &f))
            break;
    }
    mdb_cursor_close(c);
}

void ns_lstore_each_fork_entry(ns_lstore_t *s, MDB_txn *t,
                               bool (*fn)(void *u, const uint8_t *id,
                                          const uint8_t *buf, size_t len),
                               void *u)
{
    MDB_cursor *c = NULL;
    if (mdb_cursor_open(t, s->forkentries, &c) != MDB_SUCCESS)
        return;
    MDB_val k, v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == MDB_SUCCESS;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
        if (k.mv_size == NS_HASH_BYTES &&
            !fn(u, k.mv_data, v.mv_data, v.mv_size))
            break;
    mdb_cursor_close(c);
}

int ns_lstore_fork_del(ns_lstore_t *s, MDB_txn *t, const uint8_t *author)
{
    return s_del(s, t, s->forks, author, NS_ID_BYTES);
}

int ns_lstore_fork_entry_del(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id)
{
    return s_del(s, t, s->forkentries, id, NS_HASH_BYTES);
}

int ns_lstore_fork_get(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                       ns_fork_rec_t *f)
{
    return s_get(s, t, s->forks, author, 32, f, sizeof *f);
}

int ns_lstore_fork_put(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                       const ns_fork_rec_t *f, const uint8_t *buf, size_t len)
{
    int rc = s_put(s, t, s->forks, author, 32, f, sizeof *f);
    if (rc == NS_OK)
        rc = s_put(s, t, s->forkentries, f->second, 32, buf, len);
    return rc;
}

int ns_lstore_network_get(ns_lstore_t *s, MDB_txn *t, ns_hash_t id)
{
    return s_get(s, t, s->meta, "network_id", 10, id, NS_HASH_BYTES);
}

int ns_lstore_network_put(ns_lstore_t *s, MDB_txn *t, const ns_hash_t id)
{
    return s_put(s, t, s->meta, "network_id", 10, id, NS_HASH_BYTES);
}

int ns_lstore_totals_get(ns_lstore_t *s, MDB_txn *t, ns_ledger_totals_t *tot)
{
    return s_get(s, t, s->meta, "totals", 6, tot, sizeof *tot);
}

int ns_lstore_totals_put(ns_lstore_t *s, MDB_txn *t,
                         const ns_ledger_totals_t *tot)
{
    return s_put(s, t, s->meta, "totals", 6, tot, sizeof *tot);
}

/* ---- environment and transactions --------------------------------------- */

int ns_lstore_open(ns_lstore_t *s, const char *dir, bool readonly,
                   uint64_t map_bytes, MDB_txn **t, char *err, size_t errlen)
{
    int r;
    *t = NULL;
    crypto_shorthash_keygen(s->wbuf_key);
    s->put_entries.klen = NS_HASH_BYTES;
    s->put_chain.klen = 40;
    s->put_accounts.klen = NS_ID_BYTES;
    s->put_credits.klen = 64;
    if ((r = ns_lstore_rc(s, mdb_env_create(&s->env))) != NS_OK)
        return r;
    mdb_env_set_maxdbs(s->env, 16);
    mdb_env_set_mapsize(s->env, map_bytes);
    int mrc = mdb_env_open(s->env, dir, MDB_NOTLS | (readonly ? MDB_RDONLY : 0),
                           0600);
    if (mrc != MDB_SUCCESS) {
        r = ns_lstore_rc(s, mrc);
        snprintf(err, errlen, "cannot open ledger %s: %s", dir,
                 mdb_strerror(mrc));
        return r;
    }
    if ((mrc = mdb_txn_begin(s->env, NULL, readonly ? MDB_RDONLY : 0, t)) !=
        MDB_SUCCESS) {
        *t = NULL;
        r = ns_lstore_rc(s, mrc);
        snprintf(err, errlen, "ledger %s: %s", dir, mdb_strerror(mrc));
        return r;
    }
    struct {
        const char *name;
        MDB_dbi *dbi;
    } dbs[] = {{"entries", &s->entries},
               {"chain", &s->chain},
               {"accounts", &s->accounts},
               {"credits", &s->credits},
               {"locks", &s->locks},
               {"pjobs", &s->pjobs},
               {"jobs", &s->jobs},
               {"forks", &s->forks},
               {"forkentries", &s->forkentries},
               {"prestate", &s->prestate},
               {"meta", &s->meta}};
    for (size_t i = 0; i < sizeof dbs / sizeof dbs[0]; i++)
        if ((mrc = mdb_dbi_open(*t, dbs[i].name, readonly ? 0 : MDB_CREATE,
                                dbs[i].dbi)) != MDB_SUCCESS) {
            r = ns_lstore_rc(s, mrc);
            snprintf(err, errlen, "ledger %s: database %s: %s", dir,
                     dbs[i].name, mdb_strerror(mrc));
            return r;
        }
    /* undo came later: a read-only view of an older ledger goes without
     * (it never voids anything) */
    mrc = mdb_dbi_open(*t, "undo", readonly ? 0 : MDB_CREATE, &s->undo);
    s->has_undo = mrc == MDB_SUCCESS;
    if (mrc != MDB_SUCCESS && !(readonly && mrc == MDB_NOTFOUND)) {
        r = ns_lstore_rc(s, mrc);
        snprintf(err, errlen, "ledger %s: database undo: %s", dir,
                 mdb_strerror(mrc));
        return r;
    }
    return NS_OK;
}

void ns_lstore_close(ns_lstore_t *s)
{
    s_wb_release(&s->put_entries);
    s_wb_release(&s->put_chain);
    s_wb_release(&s->put_accounts);
    s_wb_release(&s->put_credits);
    if (s->env)
        mdb_env_close(s->env);
    s->env = NULL;
}

int ns_lstore_begin(ns_lstore_t *s, MDB_txn *parent, bool readonly, MDB_txn **t)
{
    return ns_lstore_rc(
        s, mdb_txn_begin(s->env, parent, readonly ? MDB_RDONLY : 0, t));
}

int ns_lstore_commit(ns_lstore_t *s, MDB_txn *t)
{
    return ns_lstore_rc(s, mdb_txn_commit(t)); /* synced: no MDB_NOSYNC */
}

/* ---- queries --------------------------------------------------------------
 */

int ns_lstore_sum_accounts(ns_lstore_t *s, MDB_txn *t, uint64_t *sum)
{
    MDB_cursor *c = NULL;
    *sum = 0;
    int rc = s_wb_flush_one(s, t, &s->put_accounts, s->accounts);
    if (rc != NS_OK)
        return rc;
    if (mdb_cursor_open(t, s->accounts, &c) == MDB_SUCCESS) {
        MDB_val k, v;
        int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
        while (mrc == MDB_SUCCESS) {
            ns_account_t a;
            if (v.mv_size != sizeof a) {
                rc = NS_ERR_CORRUPT;
                break;
            }
            memcpy(&a, v.mv_data, sizeof a);
            *sum += a.free + a.staked + a.locked_escrow + a.locked_collateral;
            mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
        }
        mdb_cursor_close(c);
    }
    return rc;
}

int ns_lstore_count_accounts(ns_lstore_t *s, MDB_txn *t, uint64_t *n)
{
    MDB_stat st;
    int rc = s_wb_flush_one(s, t, &s->put_accounts, s->accounts);
    if (rc != NS_OK)
        return rc;
    rc = ns_lstore_rc(s, mdb_stat(t, s->accounts, &st));
    if (rc == NS_OK)
        *n = st.ms_entries;
    return rc;
}

uint32_t ns_lstore_unclaimed(
    ns_lstore_t *s, MDB_txn *t, const uint8_t *to, uint8_t *ids, uint32_t max,
    bool (*skip)(void *u, const uint8_t *src, bool by_banned), void *u)
{
    MDB_cursor *c = NULL;
    uint32_t n = 0;
    if (s_wb_flush_one(s, t, &s->put_credits, s->credits) != NS_OK)
        return 0;
    if (mdb_cursor_open(t, s->credits, &c) == MDB_SUCCESS) {
        MDB_val k, v;
        int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
        /* Credits are keyed by source first: a full scan. Fine at this
         * scale; an index by recipient is the next step. */
        while (rc == MDB_SUCCESS && n < max) {
            ns_credit_rec_t cr;
            if (k.mv_size == 64 && v.mv_size == sizeof cr &&
                memcmp((uint8_t *)k.mv_data + 32, to, 32) == 0) {
                memcpy(&cr, v.mv_data, sizeof cr);
                ns_entry_t src;
                ns_account_t by = {0};
                bool banned =
                    ns_lstore_entry_load(s, t, k.mv_data, &src, NULL) ==
                        NS_OK &&
                    ns_lstore_account_get(s, t, src.author, &by) == NS_OK &&
                    by.banned;
                if (cr.state == NS_CREDIT_OPEN &&
                    (skip ? !skip(u, k.mv_data, banned) : !banned))
                    memcpy(ids + (size_t)32 * n++, k.mv_data, 32);
            }
            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
        }
        mdb_cursor_close(c);
    }
    return n;
}

void ns_lstore_each_account(ns_lstore_t *s, MDB_txn *t,
                            bool (*fn)(void *u, const ns_account_t *a), void *u)
{
    MDB_cursor *c = NULL;
    if (s_wb_flush_one(s, t, &s->put_accounts, s->accounts) != NS_OK)
        return;
    if (mdb_cursor_open(t, s->accounts, &c) == MDB_SUCCESS) {
        MDB_val k, v;
        int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
        while (rc == MDB_SUCCESS) {
            ns_account_t a;
            if (v.mv_size == sizeof a) {
                memcpy(&a, v.mv_data, sizeof a);
                if (!fn(u, &a))
                    break;
            }
            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
        }
        mdb_cursor_close(c);
    }
}

void ns_lstore_each_entry(ns_lstore_t *s, MDB_txn *t, const uint8_t *author,
                          bool (*fn)(void *u, const ns_entry_t *e), void *u)
{
    MDB_cursor *c = NULL;
    if (s_wb_flush_one(s, t, &s->put_chain, s->chain) != NS_OK)
        return;
    if (mdb_cursor_open(t, s->chain, &c) == MDB_SUCCESS) {
        MDB_val k, v;
        uint8_t start[40] = {0};
        if (author)
            ns_ledger_chain_key(start, author, 0);
        k.mv_size = sizeof start;
        k.mv_data = start;
        int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        while (rc == MDB_SUCCESS) {
            if (author && memcmp(k.mv_data, author, 32))
                break;
            ns_hash_t id;
            const uint8_t *buf = NULL;
            size_t len = 0;
            ns_entry_t e;
            memcpy(id, v.mv_data, NS_HASH_BYTES);
            if (ns_lstore_entry_bytes(s, t, id, &buf, &len) == NS_OK &&
                ns_entry_parse(buf, len, s->network_id, &e) == NS_OK &&
                !fn(u, &e))
                break;
            rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
        }
        mdb_cursor_close(c);
    }
}
