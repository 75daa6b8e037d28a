/* gossip.c - the seen-cache, push forwarding, lazy push and pull repair.
 *
 * Push: a fresh valid message of a gossiped type goes to our mesh: at
 * least `fanout` (D) live peers while there are, chosen at random and
 * kept while they stay live (scored >= 0 while there are others), never
 * to its origin or the link it came from. The mesh is symmetric: a peer
 * we add is told with a MESH graft and adds us, unless it has D +
 * S_MESH_EXTRA mesh peers already, when it answers with a prune (and we
 * do not ask it again for S_MESH_BACKOFF_MS). Each node then receives at
 * most D + S_MESH_EXTRA copies of a message however many peers it has.
 * Heartbeats go on only from live (reachable) peers, and only when they changed
 * (p2p.c): each node sends its own straight to all its peers. Lazy push: the
 * ids of what we pushed are batched for S_IHAVE_MS and told in one IHAVE to up
 * to S_LAZY_PEERS live peers outside the mesh; a peer that lacks some answers
 * with an IWANT, and we send those we still hold. An id asked for is not asked
 * again for S_IWANT_WAIT_MS. Pull: every pull_interval_ms we send one random
 * peer (scored >= 0 while there are any) the ids of the gossiped messages we
 * hold that were signed since a time `since` (at most S_PULL_SINCE_MS ago,
 * later when they would be more than NS_MAX_PULL_IDS); it sends back the ones
 * signed since then that we lack, at most S_PULL_MAX_REPLY, which arrive and
 * are checked like any other message. The list is complete from `since`, so
 * nothing we hold is sent back.
 * Seen cache: its ring doubles (up to S_SEEN_MAX) rather than forget an
 * id before seen_ttl_ms: its size follows the message rate.
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

void ns_seen_set_growth(ns_seen_t *s, uint32_t max_cap, uint64_t ttl_ms)
{
    s->max_cap = max_cap;
    s->ttl_ms = ttl_ms;
}

/* Double the ring and its index, entries kept in arrival order from slot
 * 0. NS_ERR_NOMEM leaves it as it was. */
static int s_grow(ns_seen_t *s)
{
    uint32_t cap = s->cap * 2, index_cap = (s->index_mask + 1) * 2;
    ns_seen_entry_t *ring = calloc(cap, sizeof *ring);
    uint32_t *index = calloc(index_cap, sizeof *index);
    if (!ring || !index) {
        free(ring);
        free(index);
        return NS_ERR_NOMEM;
    }
    for (uint32_t k = 0; k < s->count; k++)
        ring[k] = s->ring[(s->head + k) % s->cap];
    free(s->ring);
    free(s->index);
    s->ring = ring;
    s->index = index;
    s->cap = cap;
    s->index_mask = index_cap - 1;
    s->head = 0;
    for (uint32_t k = 0; k < s->count; k++) {
        bool found;
        uint32_t slot = s_probe(s, ring[k].id, &found);
        s->index[slot] = k + 1;
    }
    return NS_OK;
}

const ns_seen_entry_t *ns_seen_get(const ns_seen_t *s, const ns_hash_t id)
{
    bool found;
    uint32_t slot = s_probe(s, id, &found);
    return found ? &s->ring[s->index[slot] - 1] : NULL;
}

int ns_seen_add(ns_seen_t *s, const ns_hash_t id, uint64_t now_ms,
                const uint8_t *msg, size_t len)
{
    return ns_seen_add_at(s, id, now_ms, 0, msg, len);
}

int ns_seen_add_at(ns_seen_t *s, const ns_hash_t id, uint64_t now_ms,
                   uint64_t wall_ms, const uint8_t *msg, size_t len)
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
    if (s->count == s->cap && s->cap < s->max_cap &&
        now_ms - s->ring[s->head].t_ms < s->ttl_ms) {
        if (s_grow(s) == NS_OK)
            slot = s_probe(s, id, &found);
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
    e->wall_ms = wall_ms;
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

void ns_seen_each_since(const ns_seen_t *s, uint64_t min_t_ms,
                        bool (*fn)(void *u, const ns_seen_entry_t *e), void *u)
{
    for (uint32_t k = s->count; k > 0; k--) {
        const ns_seen_entry_t *e = &s->ring[(s->head + k - 1) % s->cap];
        if (e->t_ms < min_t_ms)
            return;
        if (e->wall_ms && !fn(u, e))
            return;
    }
}

/* ---- push ------------------------------------------------------------------
 */

static void s_on_ihave_timer(void *user, uint64_t now_ms)
{
    (void)now_ms;
    ns_p2p_t *p = user;
    p->ihave_timer = 0;
    ns_gossip_flush_ihave(p);
}

/* A live peer that may carry gossip: scored >= 0 on the first pass, any
 * on the second (only when nobody else is there). */
static bool s_gossip_peer(const ns_p2p_t *p, const ns_peer_t *peer, int pass,
                          uint64_t now)
{
    return peer->state == NS_PEER_LIVE &&
           (pass == 1 || ns_peer_score(p, peer, now) >= 0);
}

/* Tell a peer it is in our mesh (graft) or not (prune). */
static void s_send_mesh(ns_p2p_t *p, ns_peer_t *peer, bool graft)
{
    ns_buf_t msg;
    ns_buf_init(&msg);
    if (ns_mesh_encode(graft, &p->body) == NS_OK &&
        ns_p2p_sign(p, NS_MSG_MESH, p->body.data, p->body.len, &msg, NULL) ==
            NS_OK)
        (void)ns_peers_send(p, peer, msg.data, msg.len);
    ns_buf_release(&msg);
}

static uint32_t s_mesh_count(const ns_p2p_t *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        n += p->peers[i].mesh;
    return n;
}

void ns_gossip_mesh_fill(ns_p2p_t *p)
{
    uint64_t now = ns_mono_ms();
    uint32_t d = p->cfg->fanout, hi = d + S_MESH_EXTRA, in = 0, good = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        good += s_gossip_peer(p, &p->peers[i], 0, now);
    for (uint32_t i = 0; i < p->n_peers; i++) {
        ns_peer_t *peer = &p->peers[i];
        if (peer->mesh && peer->state != NS_PEER_LIVE) {
            peer->mesh = false; /* it will not hear a prune */
        } else if (peer->mesh &&
                   (in >= hi || /* fanout lowered */
                    (good > in && !s_gossip_peer(p, peer, 0, now)))) {
            /* a peer scored < 0 leaves while better ones are there */
            peer->mesh = false;
            s_send_mesh(p, peer, false);
        }
        in += peer->mesh;
    }
    uint32_t cand[1024];
    for (int pass = 0; pass < 2 && in < d; pass++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < p->n_peers && n < 1024; i++)
            if (!p->peers[i].mesh && now >= p->peers[i].mesh_backoff_ms &&
                s_gossip_peer(p, &p->peers[i], pass, now))
                cand[n++] = i;
        while (n > 0 && in < d) {
            uint32_t j = ns_rand_below(n);
            ns_peer_t *peer = &p->peers[cand[j]];
            peer->mesh = true;
            s_send_mesh(p, peer, true);
            cand[j] = cand[--n];
            in++;
        }
    }
}

void ns_gossip_on_mesh(ns_p2p_t *p, const uint8_t sender[NS_ID_BYTES],
                       bool graft)
{
    ns_peer_t *peer = ns_peers_find(p, sender);
    if (!peer)
        return;
    uint64_t now = ns_mono_ms();
    if (!graft) {
        peer->mesh = false;
        peer->mesh_backoff_ms = now + S_MESH_BACKOFF_MS;
        return;
    }
    if (peer->mesh)
        return;
    if (peer->state == NS_PEER_LIVE &&
        s_mesh_count(p) < p->cfg->fanout + S_MESH_EXTRA &&
        ns_peer_score(p, peer, now) >= 0)
        peer->mesh = true;
    else
        s_send_mesh(p, peer, false);
}

void ns_gossip_forward(ns_p2p_t *p, const ns_hash_t id, const uint8_t *buf,
                       size_t len, const uint8_t except_id[NS_ID_BYTES],
                       const uint8_t *except_link_key)
{
    ns_gossip_mesh_fill(p);
    /* Our own message (no origin to spare) goes to every live peer, not
     * just the mesh (gossipsub's flood publish): a node that just joined,
     * whose grafts are not answered yet or were refused (a light peer
     * that is not live on its bootstrap yet), reaches the network at
     * once, not an IHAVE later (a job's announcement would miss its
     * bid window). Cost: our own rate x live peers. */
    bool own = !except_id && !except_link_key;
    uint64_t now = ns_mono_ms();
    bool any_good = false;
    for (uint32_t i = 0; own && i < p->n_peers && !any_good; i++)
        any_good = s_gossip_peer(p, &p->peers[i], 0, now);
    for (uint32_t i = 0; i < p->n_peers; i++) {
        ns_peer_t *peer = &p->peers[i];
        if (!peer->mesh &&
            !(own && s_gossip_peer(p, peer, any_good ? 0 : 1, now)))
            continue;
        if (except_id && memcmp(peer->id, except_id, NS_ID_BYTES) == 0)
            continue;
        if (except_link_key && memcmp(peer->curve_pk, except_link_key, 32) == 0)
            continue;
        if (ns_peers_send(p, peer, buf, len) == NS_OK)
            p->stats.forwarded++;
    }
    /* and its id to the others, lazily */
    if (p->ihave_n == NS_MAX_IHAVE_IDS)
        ns_gossip_flush_ihave(p);
    memcpy(p->ihave_ids + (size_t)p->ihave_n * NS_HASH_BYTES, id,
           NS_HASH_BYTES);
    p->ihave_n++;
    /* no timer (not running, or the loop is full): the next flush or
     * forward sends them */
    if (!p->ihave_timer && p->loop &&
        ns_loop_timer_start(p->loop, S_IHAVE_MS, false, s_on_ihave_timer, p,
                            &p->ihave_timer) != NS_OK)
        p->ihave_timer = 0;
}

/* ---- lazy push ---------------------------------------------------------- */

void ns_gossip_flush_ihave(ns_p2p_t *p)
{
    uint32_t n_ids = p->ihave_n;
    p->ihave_n = 0;
    if (n_ids == 0)
        return;
    uint64_t now = ns_mono_ms();
    uint32_t cand[1024], n = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++)
        for (uint32_t i = 0; i < p->n_peers && n < 1024; i++)
            if (!p->peers[i].mesh && s_gossip_peer(p, &p->peers[i], pass, now))
                cand[n++] = i;
    if (n == 0)
        return;
    if (ns_ihave_encode(p->ihave_ids, n_ids, &p->body) != NS_OK ||
        ns_p2p_sign(p, NS_MSG_IHAVE, p->body.data, p->body.len, &p->scratch,
                    NULL) != NS_OK)
        return;
    uint32_t k = S_LAZY_PEERS < n ? S_LAZY_PEERS : n;
    for (uint32_t i = 0; i < k; i++) { /* partial Fisher-Yates */
        uint32_t j = i + ns_rand_below(n - i);
        uint32_t t = cand[i];
        cand[i] = cand[j];
        cand[j] = t;
        if (ns_peers_send(p, &p->peers[cand[i]], p->scratch.data,
                          p->scratch.len) == NS_OK) {
            p->stats.ihave_sent++;
            p->stats.ihave_ids_sent += n_ids;
        }
    }
}

void ns_gossip_on_ihave(ns_p2p_t *p, const ns_ids_t *m,
                        const struct ns_p2p_src *src)
{
    uint8_t want[NS_MAX_IWANT_IDS * NS_HASH_BYTES];
    uint32_t n = 0;
    uint64_t now = ns_mono_ms();
    p->stats.ihave_rx++;
    for (uint32_t i = 0; i < m->n && n < NS_MAX_IWANT_IDS; i++) {
        const uint8_t *id = m->ids + (size_t)i * NS_HASH_BYTES;
        if (ns_seen_has(&p->seen, id) || ns_seen_has(&p->asked, id))
            continue;
        if (ns_seen_add(&p->asked, id, now, NULL, 0) != NS_OK)
            continue;
        memcpy(want + (size_t)n * NS_HASH_BYTES, id, NS_HASH_BYTES);
        n++;
    }
    if (n == 0)
        return;
    ns_buf_t msg;
    ns_buf_init(&msg);
    if (ns_iwant_encode(want, n, &p->body) == NS_OK &&
        ns_p2p_sign(p, NS_MSG_IWANT, p->body.data, p->body.len, &msg, NULL) ==
            NS_OK &&
        ns_p2p_src_send(p, src, msg.data, msg.len) == NS_OK) {
        p->stats.iwant_sent++;
        p->stats.iwant_ids_sent += n;
    }
    ns_buf_release(&msg);
}

/* May an answer of `bytes` (to an IWANT or a PULL) go over the link? A
 * token bucket per link (S_ANSWER_BYTES_PER_S, burst
 * S_ANSWER_BYTES_BURST): a peer cannot make us send more than that by
 * asking again and again for what it could ask once. */
static bool s_answer_allow(ns_p2p_t *p, ns_link_t *link, size_t bytes)
{
    if (!link)
        return true; /* fed by ns_p2p_ingest: no connection to answer */
    uint64_t now = ns_mono_us();
    if (link->answer_refill_us == 0)
        link->answer_bytes = S_ANSWER_BYTES_BURST;
    else
        link->answer_bytes +=
            (double)(now - link->answer_refill_us) / 1e6 * S_ANSWER_BYTES_PER_S;
    if (link->answer_bytes > S_ANSWER_BYTES_BURST)
        link->answer_bytes = S_ANSWER_BYTES_BURST;
    link->answer_refill_us = now;
    if (link->answer_bytes < (double)bytes) {
        p->stats.answers_limited++;
        return false;
    }
    link->answer_bytes -= (double)bytes;
    return true;
}

void ns_gossip_on_iwant(ns_p2p_t *p, const ns_ids_t *m,
                        const struct ns_p2p_src *src)
{
    /* One probe per id: an id we do not hold (any more) costs nothing
     * else, and what goes back is at most the list's cap of messages and
     * S_IWANT_MAX_BYTES. */
    size_t bytes = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        const ns_seen_entry_t *e =
            ns_seen_get(&p->seen, m->ids + (size_t)i * NS_HASH_BYTES);
        if (!e || !e->msg || !e->wall_ms)
            continue;
        if (bytes + e->len > S_IWANT_MAX_BYTES ||
            !s_answer_allow(p, src->link, e->len))
            break;
        if (ns_p2p_src_send(p, src, e->msg, e->len) != NS_OK)
            break;
        bytes += e->len;
        p->stats.iwant_served++;
    }
}

/* ---- pull ------------------------------------------------------------------
 */

typedef struct {
    uint8_t id[NS_HASH_BYTES];
    uint64_t wall_ms;
} s_held_t;

typedef struct {
    s_held_t *v;
    uint32_t n, cap;
    uint64_t since;
} s_collect_t;

static bool s_collect(void *u, const ns_seen_entry_t *e)
{
    s_collect_t *c = u;
    if (e->wall_ms < c->since)
        return true;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? c->cap * 2 : 4096;
        s_held_t *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        c->v = v;
        c->cap = cap;
    }
    memcpy(c->v[c->n].id, e->id, NS_HASH_BYTES);
    c->v[c->n].wall_ms = e->wall_ms;
    c->n++;
    return true;
}

static int s_cmp_newest(const void *a, const void *b)
{
    uint64_t x = ((const s_held_t *)a)->wall_ms;
    uint64_t y = ((const s_held_t *)b)->wall_ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void ns_gossip_send_pull(ns_p2p_t *p)
{
    uint8_t id[NS_ID_BYTES];
    if (ns_p2p_pick_peer(p, NULL, NULL, id) != NS_OK)
        return;
    ns_peer_t *peer = ns_peers_find(p, id);
    uint64_t now = ns_mono_ms();
    /* Every gossiped id we hold that was signed since `since`, whether
     * its bytes are stored or not; if they are too many for one PULL,
     * since moves up past the newest one left out. */
    s_collect_t c = {NULL, 0, 0, ns_now_ms() - S_PULL_SINCE_MS};
    ns_seen_each_since(&p->seen,
                       now > S_PULL_WINDOW_MS ? now - S_PULL_WINDOW_MS : 0,
                       s_collect, &c);
    uint32_t n = c.n;
    if (n > NS_MAX_PULL_IDS) {
        qsort(c.v, n, sizeof *c.v, s_cmp_newest);
        c.since = c.v[NS_MAX_PULL_IDS].wall_ms + 1;
        while (n > 0 && c.v[n - 1].wall_ms < c.since)
            n--;
    }
    uint8_t *ids = malloc((size_t)(n ? n : 1) * NS_HASH_BYTES);
    if (!ids) {
        free(c.v);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        memcpy(ids + (size_t)i * NS_HASH_BYTES, c.v[i].id, NS_HASH_BYTES);
    if (ns_pull_encode_since(ids, n, c.since, &p->body) == NS_OK &&
        ns_p2p_sign(p, NS_MSG_PULL, p->body.data, p->body.len, &p->scratch,
                    NULL) == NS_OK)
        (void)ns_peers_send(p, peer, p->scratch.data, p->scratch.len);
    free(ids);
    free(c.v);
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
    /* signed before the asker's list is complete: it may hold it */
    if (a->pull->since_ms && e->wall_ms < a->pull->since_ms)
        return true;
    /* The ids were sorted by ns_gossip_answer_pull. An empty PULL (an
     * idle node holds nothing to list) has no array: bsearch must not
     * see its NULL. */
    if (a->pull->n &&
        bsearch(e->id, a->pull->ids, a->pull->n, NS_HASH_BYTES, s_cmp_id))
        return true;
    if (!s_answer_allow(a->p, a->src->link, e->len) ||
        ns_p2p_src_send(a->p, a->src, e->msg, e->len) != NS_OK)
        return false;
    a->p->stats.pull_served++;
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
    ns_pull_t view = {pull->n, sorted, pull->since_ms};
    s_answer_t a = {p, &view, src, 0};
    ns_seen_each_stored(&p->seen, s_answer, &a);
    if (a.sent)
        ns_debug(NS_MOD_GOSSIP, "event=pull_answered sent=%u", a.sent);
    free(sorted);
}
