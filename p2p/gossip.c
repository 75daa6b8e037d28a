/* gossip.c - the seen-cache, push forwarding and pull repair.
 *
 * Push: a fresh valid message of a gossiped type goes to `fanout` random
 * live peers other than its origin and the link it came from, among
 * those scored >= 0 (peers.c) while there are any. Heartbeats go on only
 * from live (reachable) peers, and only when they changed (p2p.c): each
 * node sends its own straight to all its peers.
 * Pull: every pull_interval_ms we send one random peer (scored >= 0 while
 * there are any) the ids of the
 * gossiped messages we hold (last S_PULL_WINDOW_MS); it sends back the ones
 * we lack, at most S_PULL_MAX_REPLY, which arrive and are checked like any
 * other message.
 */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ---- seen cache ---------------------------------------------------------- */

int ns_seen_init(ns_seen_t *s, uint32_t cap)
{
    memset(s, 0, sizeof *s);
    uint32_t index_cap = 1;
    while (index_cap < 2 * cap)
        index_cap <<= 1;
    s->ring = calloc(cap, sizeof *s->ring);
    s->index = calloc(index_cap, sizeof *s->index);
    if (!s->ring || !s->index) {
        ns_seen_release(s);
        return NS_ERR_NOMEM;
    }
    s->cap = cap;
    s->index_mask = index_cap - 1;
    randombytes_buf(s->hash_key, sizeof s->hash_key);
    return NS_OK;
}

void ns_seen_release(ns_seen_t *s)
{
    if (s->ring)
        for (uint32_t i = 0; i < s->cap; i++)
            free(s->ring[i].msg);
    free(s->ring);
    free(s->index);
    memset(s, 0, sizeof *s);
}

static uint32_t s_bucket(const ns_seen_t *s, const ns_hash_t id)
{
    uint64_t h;
    crypto_shorthash((uint8_t *)&h, id, NS_HASH_BYTES, s->hash_key);
    return (uint32_t)h & s->index_mask;
}

/* Index position holding id, or the empty slot where it would go. */
static uint32_t s_probe(const ns_seen_t *s, const ns_hash_t id, bool *found)
{
    uint32_t i = s_bucket(s, id);
    for (;;) {
        uint32_t v = s->index[i];
        if (v == 0) {
            *found = false;
            return i;
        }
        if (memcmp(s->ring[v - 1].id, id, NS_HASH_BYTES) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & s->index_mask;
    }
}

bool ns_seen_has(const ns_seen_t *s, const ns_hash_t id)
{
    bool found;
    s_probe(s, id, &found);
    return found;
}

/* Remove index slot i, shifting later members of the run back. */
static void s_index_delete(ns_seen_t *s, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & s->index_mask;
        uint32_t v = s->index[j];
        if (v == 0)
            break;
        uint32_t k = s_bucket(s, s->ring[v - 1].id);
        /* Move j back to i unless its home k lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            s->index[i] = v;
            i = j;
        }
    }
    s->index[i] = 0;
}

static void s_pop_oldest(ns_seen_t *s)
{
    ns_seen_entry_t *e = &s->ring[s->head];
    bool found;
    uint32_t slot = s_probe(s, e->id, &found);
    if (found)
        s_index_delete(s, slot);
    free(e->msg);
    memset(e, 0, sizeof *e);
    s->head = (s->head + 1) % s->cap;
    s->count--;
    if (s->bytes_head > 0)
        s->bytes_head--;
}

int ns_seen_add(ns_seen_t *s, const ns_hash_t id, uint64_t now_ms,
                const uint8_t *msg, size_t len)
{
    bool found;
    uint32_t slot = s_probe(s, id, &found);
    if (found)
        return NS_ERR_REPLAY;
    uint8_t *copy = NULL;
    if (msg) {
        copy = malloc(len);
        if (!copy)
            return NS_ERR_NOMEM;
        memcpy(copy, msg, len);
    }
    if (s->count == s->cap) {
        s_pop_oldest(s);
        s->evicted++;
        slot = s_probe(s, id, &found); /* the shift may have moved runs */
    }
    uint32_t r = (s->head + s->count) % s->cap;
    ns_seen_entry_t *e = &s->ring[r];
    memcpy(e->id, id, NS_HASH_BYTES);
    e->t_ms = now_ms;
    e->msg = copy;
    e->len = (uint32_t)len;
    s->index[slot] = r + 1;
    s->count++;
    return NS_OK;
}

void ns_seen_forget_msg(ns_seen_t *s, const ns_hash_t id)
{
    bool found;
    uint32_t slot = s_probe(s, id, &found);
    if (!found)
        return;
    ns_seen_entry_t *e = &s->ring[s->index[slot] - 1];
    free(e->msg);
    e->msg = NULL;
}

void ns_seen_expire(ns_seen_t *s, uint64_t now_ms, uint64_t ttl_ms,
                    uint64_t keep_ms)
{
    while (s->count > 0 && now_ms - s->ring[s->head].t_ms > ttl_ms)
        s_pop_oldest(s);
    while (s->bytes_head < s->count) {
        ns_seen_entry_t *e = &s->ring[(s->head + s->bytes_head) % s->cap];
        if (now_ms - e->t_ms <= keep_ms)
            break;
        free(e->msg);
        e->msg = NULL;
        s->bytes_head++;
    }
}

void ns_seen_each_stored(const ns_seen_t *s,
                         bool (*fn)(void *u, const ns_seen_entry_t *e), void *u)
{
    for (uint32_t k = s->count; k > s->bytes_head; k--) {
        const ns_seen_entry_t *e = &s->ring[(s->head + k - 1) % s->cap];
        if (e->msg && !fn(u, e))
            return;
    }
}

/* ---- push ------------------------------------------------------------------
 */

void ns_gossip_forward(ns_p2p_t *p, const uint8_t *buf, size_t len,
                       const uint8_t except_id[NS_ID_BYTES],
                       const uint8_t *except_link_key)
{
    uint32_t cand[1024], n = 0;
    uint64_t now = ns_mono_ms();
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        for (uint32_t i = 0; i < p->n_peers && n < 1024; i++) {
            const ns_peer_t *peer = &p->peers[i];
            if (peer->state != NS_PEER_LIVE)
                continue;
            if (except_id && memcmp(peer->id, except_id, NS_ID_BYTES) == 0)
                continue;
            if (except_link_key &&
                memcmp(peer->curve_pk, except_link_key, 32) == 0)
                continue;
            if (pass == 0 && ns_peer_score(p, peer, now) < 0)
                continue; /* only when nobody else is there */
            cand[n++] = i;
        }
    }
    uint32_t k = p->cfg->fanout < n ? p->cfg->fanout : n;
    for (uint32_t i = 0; i < k; i++) { /* partial Fisher-Yates */
        uint32_t j = i + ns_rand_below(n - i);
        uint32_t t = cand[i];
        cand[i] = cand[j];
        cand[j] = t;
        if (ns_peers_send(p, &p->peers[cand[i]], buf, len) == NS_OK)
            p->stats.forwarded++;
    }
}

/* ---- pull ------------------------------------------------------------------
 */

typedef struct {
    uint8_t *ids;
    uint32_t n;
} s_collect_t;

static bool s_collect(void *u, const ns_seen_entry_t *e)
{
    s_collect_t *c = u;
    memcpy(c->ids + (size_t)c->n * NS_HASH_BYTES, e->id, NS_HASH_BYTES);
    return ++c->n < NS_MAX_PULL_IDS;
}

void ns_gossip_send_pull(ns_p2p_t *p)
{
    uint8_t id[NS_ID_BYTES];
    if (ns_p2p_pick_peer(p, NULL, NULL, id) != NS_OK)
        return;
    ns_peer_t *peer = ns_peers_find(p, id);
    s_collect_t c = {malloc((size_t)NS_MAX_PULL_IDS * NS_HASH_BYTES), 0};
    if (!c.ids)
        return;
    ns_seen_each_stored(&p->seen, s_collect, &c);
    if (ns_pull_encode(c.ids, c.n, &p->body) == NS_OK &&
        ns_p2p_sign(p, NS_MSG_PULL, p->body.data, p->body.len, &p->scratch,
                    NULL) == NS_OK)
        (void)ns_peers_send(p, peer, p->scratch.data, p->scratch.len);
    free(c.ids);
}

typedef struct {
    ns_p2p_t *p;
    const ns_pull_t *pull;
    const struct ns_p2p_src *src;
    uint32_t sent;
} s_answer_t;

static int s_cmp_id(const void *a, const void *b)
{
    return memcmp(a, b, NS_HASH_BYTES);
}

static bool s_answer(void *u, const ns_seen_entry_t *e)
{
    s_answer_t *a = u;
    /* The ids were sorted by ns_gossip_answer_pull. An empty PULL (an
     * idle node holds nothing to list) has no array: bsearch must not
     * see its NULL. */
    if (a->pull->n &&
        bsearch(e->id, a->pull->ids, a->pull->n, NS_HASH_BYTES, s_cmp_id))
        return true;
    if (ns_p2p_src_send(a->p, a->src, e->msg, e->len) != NS_OK)
        return false;
    return ++a->sent < S_PULL_MAX_REPLY;
}

void ns_gossip_answer_pull(ns_p2p_t *p, const ns_pull_t *pull,
                           const struct ns_p2p_src *src)
{
    /* Sort a copy so each lookup is a binary search. */
    uint8_t *sorted = NULL;
    if (pull->n) {
        sorted = malloc((size_t)pull->n * NS_HASH_BYTES);
        if (!sorted)
            return;
        memcpy(sorted, pull->ids, (size_t)pull->n * NS_HASH_BYTES);
        qsort(sorted, pull->n, NS_HASH_BYTES, s_cmp_id);
    }
    ns_pull_t view = {pull->n, sorted};
    s_answer_t a = {p, &view, src, 0};
    ns_seen_each_stored(&p->seen, s_answer, &a);
    if (a.sent)
        ns_debug(NS_MOD_GOSSIP, "event=pull_answered sent=%u", a.sent);
    free(sorted);
}
