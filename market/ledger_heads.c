/* ledger_heads.c - incremental head exchange: the HEADS_REQ / HEADS
 * codecs, the responder's change log and the requester's per-peer
 * cursors (include/nightshift/ledger_heads.h says what and why).
 *
 * The change log is an array of authors (never shrinks: accounts are
 * never removed) threaded on a doubly linked list in the order of their
 * latest move, and an open-addressing index by SipHash of the author
 * with a random key. A move is O(1); "changes since X" walks back from
 * the newest end to the first author at or before X, then forward.
 */
#include "nightshift/ledger_heads.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define S_NIL UINT32_MAX

/* ---- messages ------------------------------------------------------------ */

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

int ns_heads_req_encode(ns_buf_t *out, const ns_heads_req_t *q)
{
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, q->since_form ? 3 : 1);
    ns_mp_bin(&pk, q->start, NS_ID_BYTES);
    if (q->since_form) {
        msgpack_pack_uint64(&pk, q->epoch);
        msgpack_pack_uint64(&pk, q->since);
    }
    return w.err;
}

int ns_heads_req_decode(const uint8_t *buf, size_t len, ns_heads_req_t *q)
{
    ns_mpr_t r;
    uint32_t n = 0;
    memset(q, 0, sizeof *q);
    ns_mpr_init(&r, buf, len);
    if (ns_mpr_array(&r, &n, 3) != NS_OK)
        return r.err;
    if (n != 1 && n != 3)
        return NS_ERR_TYPE;
    ns_mpr_bin_exact(&r, q->start, NS_ID_BYTES);
    q->since_form = n == 3;
    if (q->since_form) {
        ns_mpr_uint(&r, &q->epoch);
        ns_mpr_uint(&r, &q->since);
    }
    return ns_mpr_end(&r);
}

int ns_heads_encode(ns_buf_t *out, const ns_heads_t *h)
{
    S_PACKER(out, w, pk);
    if (h->legacy) {
        msgpack_pack_array(&pk, 2);
    } else {
        msgpack_pack_array(&pk, 6);
        msgpack_pack_uint64(&pk, h->epoch);
        msgpack_pack_uint64(&pk, h->upto);
        if (h->full)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
    }
    msgpack_pack_array(&pk, h->n);
    for (uint32_t i = 0; i < h->n; i++) {
        msgpack_pack_array(&pk, h->legacy ? 2 : 3);
        ns_mp_bin(&pk, h->items[i].id, NS_ID_BYTES);
        msgpack_pack_uint64(&pk, h->items[i].seq);
        if (!h->legacy)
            msgpack_pack_uint64(&pk, h->items[i].ctr);
    }
    if (h->has_next)
        ns_mp_bin(&pk, h->next, NS_ID_BYTES);
    else
        msgpack_pack_nil(&pk);
    if (!h->legacy)
        ns_mp_bin(&pk, h->digest, NS_HASH_BYTES);
    return w.err;
}

/* nil, or a 32-byte bin: the next author. */
static void s_read_next(ns_mpr_t *r, ns_heads_t *h)
{
    if (r->err == NS_OK && r->left >= 1 && r->p[0] == 0xc0) {
        r->p++;
        r->left--;
        h->has_next = false;
        return;
    }
    h->has_next = ns_mpr_bin_exact(r, h->next, NS_ID_BYTES) == NS_OK;
}

int ns_heads_decode(const uint8_t *buf, size_t len, ns_heads_t *h)
{
    ns_mpr_t r;
    uint32_t top = 0, n = 0;
    memset(h, 0, sizeof *h);
    ns_mpr_init(&r, buf, len);
    if (ns_mpr_array(&r, &top, 6) != NS_OK)
        return r.err;
    if (top != 2 && top != 6)
        return NS_ERR_TYPE;
    h->legacy = top == 2;
    h->full = h->legacy;
    if (!h->legacy) {
        ns_mpr_uint(&r, &h->epoch);
        ns_mpr_uint(&r, &h->upto);
        ns_mpr_bool(&r, &h->full);
    }
    if (ns_mpr_array(&r, &n, NS_HEADS_MAX) != NS_OK)
        return r.err;
    /* Each item takes at least 36 bytes: a count beyond what is left is
     * truncated input, refused before any allocation. */
    if ((uint64_t)n * 36 > r.left)
        return NS_ERR_TRUNCATED;
    h->items = n ? malloc((size_t)n * sizeof *h->items) : NULL;
    if (n && !h->items)
        return NS_ERR_NOMEM;
    for (uint32_t i = 0; i < n && r.err == NS_OK; i++) {
        ns_head_item_t *it = &h->items[i];
        ns_mpr_array_exact(&r, h->legacy ? 2 : 3);
        ns_mpr_bin_exact(&r, it->id, NS_ID_BYTES);
        ns_mpr_uint(&r, &it->seq);
        it->ctr = 0;
        if (!h->legacy)
            ns_mpr_uint(&r, &it->ctr);
    }
    h->n = n;
    s_read_next(&r, h);
    if (!h->legacy)
        ns_mpr_bin_exact(&r, h->digest, NS_HASH_BYTES);
    if (ns_mpr_end(&r) != NS_OK) {
        int rc = r.err;
        ns_heads_release(h);
        return rc;
    }
    return NS_OK;
}

void ns_heads_release(ns_heads_t *h)
{
    free(h->items);
    h->items = NULL;
    h->n = 0;
}

/* ---- responder: the change log ------------------------------------------- */

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t ctr;
    uint32_t prev, next; /* older, newer */
} s_node_t;

struct ns_heads_log {
    s_node_t *v;
    uint32_t n, cap;
    uint32_t *slot; /* index into v, S_NIL when empty */
    uint32_t slot_cap;
    uint32_t oldest, newest;
    uint64_t ctr, epoch;
    uint8_t key[crypto_shorthash_KEYBYTES];
};

static uint64_t s_new_epoch(void)
{
    uint64_t e = 0;
    while (e == 0) { /* 63 bits, never 0 */
        randombytes_buf(&e, sizeof e);
        e >>= 1;
    }
    return e;
}

ns_heads_log_t *ns_heads_log_new(void)
{
    ns_heads_log_t *log = calloc(1, sizeof *log);
    if (!log)
        return NULL;
    log->oldest = log->newest = S_NIL;
    log->epoch = s_new_epoch();
    randombytes_buf(log->key, sizeof log->key);
    return log;
}

void ns_heads_log_free(ns_heads_log_t **log)
{
    if (!log || !*log)
        return;
    free((*log)->v);
    free((*log)->slot);
    free(*log);
    *log = NULL;
}

static uint32_t s_hash(const ns_heads_log_t *log, const uint8_t *id)
{
    uint8_t h[crypto_shorthash_BYTES];
    uint32_t x;
    crypto_shorthash(h, id, NS_ID_BYTES, log->key);
    memcpy(&x, h, sizeof x);
    return x;
}

static uint32_t s_find(const ns_heads_log_t *log, const uint8_t *id)
{
    if (!log->slot_cap)
        return S_NIL;
    for (uint32_t k = s_hash(log, id) & (log->slot_cap - 1);;
         k = (k + 1) & (log->slot_cap - 1)) {
        uint32_t i = log->slot[k];
        if (i == S_NIL || memcmp(log->v[i].id, id, NS_ID_BYTES) == 0)
            return i;
    }
}

static void s_index(ns_heads_log_t *log, uint32_t i)
{
    uint32_t k = s_hash(log, log->v[i].id) & (log->slot_cap - 1);
    while (log->slot[k] != S_NIL)
        k = (k + 1) & (log->slot_cap - 1);
    log->slot[k] = i;
}

/* Room for one more author: the array and an index at most half full. */
static int s_grow(ns_heads_log_t *log)
{
    if (log->n == log->cap) {
        uint32_t cap = log->cap ? log->cap * 2 : 256;
        s_node_t *v = cap > log->cap ? realloc(log->v, cap * sizeof *v) : NULL;
        if (!v)
            return NS_ERR_NOMEM;
        log->v = v;
        log->cap = cap;
    }
    if ((log->n + 1) * 2 > log->slot_cap) {
        uint32_t cap = log->slot_cap ? log->slot_cap * 2 : 1024;
        uint32_t *slot =
            cap > log->slot_cap ? malloc(cap * sizeof *slot) : NULL;
        if (!slot)
            return NS_ERR_NOMEM;
        memset(slot, 0xff, cap * sizeof *slot); /* S_NIL */
        free(log->slot);
        log->slot = slot;
        log->slot_cap = cap;
        for (uint32_t i = 0; i < log->n; i++)
            s_index(log, i);
    }
    return NS_OK;
}

static void s_unlink(ns_heads_log_t *log, uint32_t i)
{
    s_node_t *x = &log->v[i];
    if (x->prev != S_NIL)
        log->v[x->prev].next = x->next;
    else
        log->oldest = x->next;
    if (x->next != S_NIL)
        log->v[x->next].prev = x->prev;
    else
        log->newest = x->prev;
}

int ns_heads_log_moved(ns_heads_log_t *log, const uint8_t author[NS_ID_BYTES])
{
    uint32_t i = s_find(log, author);
    if (i == S_NIL) {
        if (s_grow(log) != NS_OK) {
            /* A move we cannot record: no peer may trust the log. */
            log->epoch = s_new_epoch();
            return NS_ERR_NOMEM;
        }
        i = log->n++;
        memcpy(log->v[i].id, author, NS_ID_BYTES);
        s_index(log, i);
    } else {
        s_unlink(log, i);
    }
    s_node_t *x = &log->v[i];
    x->ctr = ++log->ctr;
    x->prev = log->newest;
    x->next = S_NIL;
    if (log->newest != S_NIL)
        log->v[log->newest].next = i;
    else
        log->oldest = i;
    log->newest = i;
    return NS_OK;
}

uint64_t ns_heads_log_epoch(const ns_heads_log_t *log)
{
    return log->epoch;
}

uint64_t ns_heads_log_ctr(const ns_heads_log_t *log)
{
    return log->ctr;
}

uint64_t ns_heads_log_ctr_of(const ns_heads_log_t *log,
                             const uint8_t author[NS_ID_BYTES])
{
    uint32_t i = s_find(log, author);
    return i == S_NIL ? 0 : log->v[i].ctr;
}

typedef struct {
    const ns_heads_log_t *log;
    const uint8_t *start;
    ns_heads_t *h;
} s_full_t;

static bool s_collect(void *u, const ns_account_t *a)
{
    s_full_t *c = u;
    if (a->seq == 0 || memcmp(a->id, c->start, NS_ID_BYTES) < 0)
        return true;
    if (c->h->n == NS_HEADS_MAX) {
        c->h->has_next = true;
        memcpy(c->h->next, a->id, NS_ID_BYTES);
        return false;
    }
    ns_head_item_t *it = &c->h->items[c->h->n++];
    memcpy(it->id, a->id, NS_ID_BYTES);
    it->seq = a->seq;
    it->ctr = c->log ? ns_heads_log_ctr_of(c->log, a->id) : 0;
    return true;
}

int ns_heads_answer(ns_heads_log_t *log, ns_ledger_t *l,
                    const ns_heads_req_t *q, ns_heads_t *h)
{
    memset(h, 0, sizeof *h);
    h->legacy = !q->since_form;
    h->epoch = log->epoch;
    h->upto = log->ctr;
    h->full = h->legacy || q->epoch != log->epoch || q->since > log->ctr;
    h->items = malloc(NS_HEADS_MAX * sizeof *h->items);
    if (!h->items)
        return NS_ERR_NOMEM;
    if (h->full) {
        s_full_t c = {h->legacy ? NULL : log, q->start, h};
        ns_ledger_each_account(l, s_collect, &c);
    } else {
        /* Back from the newest move to the first at or before since,
         * then forward: the oldest changes first, so that a page that
         * ends early ends at a counter the next page starts from. */
        uint32_t i = log->newest, first = S_NIL;
        while (i != S_NIL && log->v[i].ctr > q->since) {
            first = i;
            i = log->v[i].prev;
        }
        for (i = first; i != S_NIL; i = log->v[i].next) {
            const s_node_t *x = &log->v[i];
            ns_account_t a;
            if (h->n == NS_HEADS_MAX) {
                h->has_next = true;
                memcpy(h->next, x->id, NS_ID_BYTES);
                h->upto = h->items[h->n - 1].ctr;
                break;
            }
            if (ns_ledger_account(l, x->id, &a) != NS_OK || a.seq == 0)
                continue; /* went back to nothing: nothing to pull */
            ns_head_item_t *it = &h->items[h->n++];
            memcpy(it->id, x->id, NS_ID_BYTES);
            it->seq = a.seq;
            it->ctr = x->ctr;
        }
    }
    if (!h->legacy) {
        ns_ledger_stats_t st;
        ns_ledger_stats(l, &st);
        memcpy(h->digest, st.digest, NS_HASH_BYTES);
    }
    return NS_OK;
}

/* ---- requester: a cursor per peer ---------------------------------------- */

typedef struct {
    uint8_t id[NS_ID_BYTES];
    bool used;
    uint64_t stamp; /* last use, for eviction */
    uint64_t epoch; /* 0: list in full next time */
    uint64_t since; /* we hold every head it had at this counter */
    uint64_t asked; /* the since of the page asked last */
    /* the exchange under way */
    bool open;          /* asked, last page not in yet */
    bool full;          /* a full listing */
    bool broken;        /* it listed a head we lack that never moved */
    bool based;         /* base is set */
    uint64_t base, low; /* full: its counter at the first page; the
                           lowest counter - 1 of a head we lack */
    uint32_t lacked;    /* heads it is ahead on, this exchange */
    uint32_t streak, threshold;
} s_peer_t;

struct ns_heads_peers {
    s_peer_t v[NS_HEADS_PEERS];
    uint64_t clock;
    ns_heads_peers_stats_t st;
};

ns_heads_peers_t *ns_heads_peers_new(void)
{
    return calloc(1, sizeof(ns_heads_peers_t));
}

void ns_heads_peers_free(ns_heads_peers_t **ps)
{
    if (!ps)
        return;
    free(*ps);
    *ps = NULL;
}

/* peer's entry, made (in the least recently used slot) if new. */
static s_peer_t *s_peer(ns_heads_peers_t *ps, const uint8_t *id)
{
    s_peer_t *lru = &ps->v[0];
    for (uint32_t i = 0; i < NS_HEADS_PEERS; i++) {
        s_peer_t *p = &ps->v[i];
        if (p->used && memcmp(p->id, id, NS_ID_BYTES) == 0) {
            p->stamp = ++ps->clock;
            return p;
        }
        if (!p->used || (lru->used && p->stamp < lru->stamp))
            lru = p;
    }
    memset(lru, 0, sizeof *lru);
    lru->used = true;
    memcpy(lru->id, id, NS_ID_BYTES);
    lru->threshold = NS_HEADS_DIVERGE_ROUNDS;
    lru->stamp = ++ps->clock;
    return lru;
}

void ns_heads_peers_request(ns_heads_peers_t *ps,
                            const uint8_t peer[NS_ID_BYTES], bool since_form,
                            ns_heads_req_t *q)
{
    s_peer_t *p = s_peer(ps, peer);
    memset(q, 0, sizeof *q);
    q->since_form = since_form;
    p->lacked = 0;
    p->open = true;
    p->full = !since_form || p->epoch == 0;
    p->broken = false;
    p->based = false;
    p->low = UINT64_MAX;
    if (!p->full) {
        q->epoch = p->epoch;
        q->since = p->since;
        p->asked = p->since;
        ps->st.incremental++;
    } else {
        ps->st.full++;
    }
}

/* The last page of an exchange is in: nothing to pull and digests still
 * different counts toward a full listing. */
static void s_settle(ns_heads_peers_t *ps, ns_ledger_t *l, s_peer_t *p,
                     const ns_heads_t *h)
{
    if (p->lacked) {
        if (p->full)
            p->threshold = NS_HEADS_DIVERGE_ROUNDS; /* it found something */
        p->streak = 0;
        return;
    }
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    if (memcmp(st.digest, h->digest, NS_HASH_BYTES) == 0) {
        p->streak = 0;
        p->threshold = NS_HEADS_DIVERGE_ROUNDS;
        return;
    }
    if (++p->streak < p->threshold)
        return;
    /* Different for that long with nothing to pull: a head we missed
     * (a pull lost for good, a log that missed a move) would stay
     * missed, so list it all once; if that finds nothing either, the
     * next one waits twice as long. */
    p->streak = 0;
    p->threshold = p->threshold * 2 > NS_HEADS_DIVERGE_MAX
                       ? NS_HEADS_DIVERGE_MAX
                       : p->threshold * 2;
    p->epoch = 0;
    ps->st.divergent++;
}

uint32_t ns_heads_peers_answer(ns_heads_peers_t *ps, ns_ledger_t *l,
                               const uint8_t peer[NS_ID_BYTES],
                               const ns_heads_t *h, bool *lack, bool *more,
                               ns_heads_req_t *next)
{
    s_peer_t *p = s_peer(ps, peer);
    uint32_t ahead = 0;
    uint64_t low = UINT64_MAX;
    bool broken = false;
    for (uint32_t i = 0; i < h->n; i++) {
        ns_account_t mine;
        const ns_head_item_t *it = &h->items[i];
        /* a read error: nothing to pull now, as before this rule */
        lack[i] =
            ns_ledger_account(l, it->id, &mine) == NS_OK && it->seq > mine.seq;
        if (!lack[i])
            continue;
        ahead++;
        if (it->ctr == 0)
            broken = true;
        else if (it->ctr - 1 < low)
            low = it->ctr - 1;
    }
    p->lacked += ahead;
    memset(next, 0, sizeof *next);
    *more = h->has_next;
    if (h->legacy) { /* an old node: no cursor, full listings */
        memcpy(next->start, h->next, NS_ID_BYTES);
        return ahead;
    }
    next->since_form = true;
    if (!p->open) {
        /* Not asked (late, repeated or unsolicited): its heads are
         * pulled, but it moves no cursor and asks no more pages. */
        *more = false;
        return ahead;
    }
    if (!*more)
        p->open = false;
    if (h->full) {
        if (!p->full) { /* asked for changes, got a listing: it restarted */
            p->full = true;
            p->low = UINT64_MAX;
            p->broken = false;
            p->based = false;
        }
        if (!p->based) { /* the first page: moves after it come later */
            p->base = h->upto;
            p->based = true;
        }
        p->broken |= broken;
        if (low < p->low)
            p->low = low;
        if (*more) {
            memcpy(next->start, h->next, NS_ID_BYTES);
            return ahead;
        }
        /* Done: we hold what it listed up to its counter at the first
         * page, less the heads we lack; one that never moved there has
         * no counter to come back to, so the next exchange lists all. */
        if (p->broken) {
            p->epoch = 0;
        } else {
            p->epoch = h->epoch;
            p->since = p->low < p->base ? p->low : p->base;
        }
        p->full = false;
        s_settle(ps, l, p, h);
        return ahead;
    }
    /* Changes since asked. */
    if (h->epoch == p->epoch && p->asked == p->since) {
        uint64_t upto = low < h->upto ? low : h->upto;
        if (upto > p->since)
            p->since = upto;
    }
    if (*more) {
        next->epoch = h->epoch;
        next->since = h->upto;
        p->asked = h->upto;
        return ahead;
    }
    s_settle(ps, l, p, h);
    return ahead;
}

void ns_heads_peers_forget_all(ns_heads_peers_t *ps)
{
    for (uint32_t i = 0; i < NS_HEADS_PEERS; i++)
        ps->v[i].epoch = 0;
}

void ns_heads_peers_stats(const ns_heads_peers_t *ps,
                          ns_heads_peers_stats_t *st)
{
    *st = ps->st;
}
