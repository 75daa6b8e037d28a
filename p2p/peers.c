/* peers.c - the peer table: who we know, whom we are connected to, who is
 * alive; and per-link limits.
 *
 * A peer enters the table from a bootstrap address, a HELLO, a PEERS
 * reply or a gossiped heartbeat, always with its own DEALER, first as an
 * unreachable entry (at most S_PENDING_MAX per direction). It becomes
 * reachable when a message arrives over that DEALER (the CURVE handshake
 * to its advertised endpoint succeeded, so the endpoint holds the key),
 * and then takes a slot of its direction: outbound (we chose it: config,
 * the operator, a reachable peer told us) or inbound (it came to us).
 * When the direction is full the lowest-scored peer there gives way to a
 * newcomer that scores higher, else the newcomer goes. It is LIVE while
 * reachable and its heartbeats arrive; after three of its own intervals
 * (bounded by NS_MAX_HB_INTERVAL_MS) without one it is dropped. An
 * entry that never becomes live is dropped after S_CONNECT_TIMEOUT_MS
 * (bootstrap addresses are retried). Unknown keys cost a budget of the
 * link and of the source address that brought them (ns_peers_admit_key).
 * See docs/PROTOCOL.md, "Peer admission and scores".
 */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <stdlib.h>
#include <string.h>

ns_peer_t *ns_peers_find(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES])
{
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (memcmp(p->peers[i].id, id, NS_ID_BYTES) == 0)
            return &p->peers[i];
    return NULL;
}

ns_peer_t *ns_peers_find_curve(ns_p2p_t *p, const uint8_t key[32])
{
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (memcmp(p->peers[i].curve_pk, key, 32) == 0)
            return &p->peers[i];
    return NULL;
}

static bool s_is_outbound(ns_peer_origin origin)
{
    return origin != NS_PEER_FROM_IN;
}

/* Entries of one direction: reachable ones (slots) or not (pending). */
static uint32_t s_count(const ns_p2p_t *p, bool outbound, bool reachable)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        n += p->peers[i].outbound == outbound &&
             p->peers[i].reachable == reachable && !p->peers[i].fixed;
    return n;
}

static uint64_t s_stake_of(const ns_p2p_t *p, const uint8_t id[NS_ID_BYTES])
{
    return p->stake_fn ? p->stake_fn(p->stake_user, id) : 0;
}

/* The oldest unreachable entry of a direction that nobody vouched for. */
static ns_peer_t *s_oldest_unvouched(ns_p2p_t *p, bool outbound)
{
    ns_peer_t *oldest = NULL;
    for (uint32_t i = 0; i < p->n_peers; i++) {
        ns_peer_t *q = &p->peers[i];
        if (q->outbound != outbound || q->reachable || q->fixed || q->vouched)
            continue;
        if (!oldest || q->added_ms < oldest->added_ms)
            oldest = q;
    }
    return oldest;
}

/* dial: open a DEALER to endpoint (else an entry that waits for the key
 * to dial us). */
static ns_peer_t *s_add(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const char *endpoint, ns_peer_origin origin,
                        bool bootstrap, bool vouched, bool dial)
{
    if (memcmp(id, p->self_id, NS_ID_BYTES) == 0)
        return NULL;
    bool fixed = origin == NS_PEER_FROM_FIXED;
    bool outbound = s_is_outbound(origin);
    uint8_t curve[32];
    if (ns_id_curve_pk(id, curve) != NS_OK || ns_tr_banned(p, curve))
        return NULL;
    /* Unreachable entries are capped per direction, so keys that answer
     * nowhere cannot take the room of real peers; fixed ones (config,
     * operator) have their own room. A vouched newcomer takes the place
     * of the oldest free key. */
    if (!fixed && s_count(p, outbound, false) >= S_PENDING_MAX) {
        ns_peer_t *junk = vouched ? s_oldest_unvouched(p, outbound) : NULL;
        if (!junk) {
            p->stats.table_full++;
            return NULL;
        }
        ns_peers_remove(p, junk, "pending_full");
    }
    if (p->n_peers >= p->peers_cap) {
        p->stats.table_full++;
        return NULL;
    }
    void *dealer = dial ? ns_tr_connect(p, curve, endpoint) : NULL;
    if (dial && !dealer)
        return NULL;
    if (dial &&
        ns_loop_add_socket(p->loop, dealer, ns_p2p_on_dealer, p) != NS_OK) {
        p->stats.table_full++; /* the loop's room was taken by others */
        ns_tr_close(&dealer);
        return NULL;
    }
    ns_peer_t *peer = &p->peers[p->n_peers++];
    memset(peer, 0, sizeof *peer);
    memcpy(peer->id, id, NS_ID_BYTES);
    memcpy(peer->curve_pk, curve, 32);
    memcpy(peer->link.key, curve, 32);
    peer->link.used = true;
    peer->link.tokens = p->cfg->rate_burst;
    peer->link.newkey_tokens = S_NEWKEY_BURST;
    snprintf(peer->endpoint, sizeof peer->endpoint, "%s", endpoint);
    peer->dealer = dealer;
    peer->bootstrap = bootstrap;
    peer->fixed = fixed;
    peer->outbound = outbound;
    peer->vouched = vouched || fixed;
    peer->stake = s_stake_of(p, id);
    peer->added_ms = ns_mono_ms();
    peer->state = NS_PEER_CONNECTING;
    p->stats.peers_added++;
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, id);
    ns_debug(NS_MOD_PEERS,
             "event=peer_added id=%s endpoint=%s bootstrap=%d outbound=%d",
             idtext, endpoint, bootstrap, outbound);
    ns_peers_send_hello(p, peer);
    return peer;
}

ns_peer_t *ns_peers_add(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const char *endpoint, ns_peer_origin origin,
                        bool bootstrap, bool vouched)
{
    if (!ns_contact_dialable(endpoint))
        return NULL;
    return s_add(p, id, endpoint, origin, bootstrap, vouched, true);
}

ns_peer_t *ns_peers_add_heard(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                              const char *contact)
{
    ns_peer_t *peer =
        s_add(p, id, contact, NS_PEER_FROM_OUT, false, false, false);
    /* "relay:<id>@...": through that relay, when it is a live peer. */
    const char *relay = peer ? ns_contact_relay(contact) : NULL;
    uint8_t rid[NS_ID_BYTES];
    char rep[NS_ENDPOINT_MAX];
    const ns_peer_t *via = relay && ns_addr_parse(relay, rid, rep) == NS_OK
                               ? ns_peers_find(p, rid)
                               : NULL;
    if (via && via->state == NS_PEER_LIVE)
        ns_relay_route_set(p, id, rid);
    return peer;
}

double ns_peer_score(const ns_p2p_t *p, const ns_peer_t *peer, uint64_t now_ms)
{
    (void)p;
    double score = 0;
    /* Long-lived: +1 per 10 s reachable, at most +10. */
    if (peer->reachable && now_ms > peer->reachable_ms) {
        double t = (double)(now_ms - peer->reachable_ms) / 10000.0;
        score += t < 10 ? t : 10;
    }
    /* Useful: first deliveries of valid gossip, at most +10. */
    double d =
        peer->deliveries < S_DELIVERY_CAP ? peer->deliveries : S_DELIVERY_CAP;
    score += 10.0 * d / S_DELIVERY_CAP;
    /* Staked in the ledger: +1 per bit of the credits staked (about
     * log2), at most +20. */
    int bits = 0;
    for (uint64_t v = peer->stake; v; v >>= 1)
        bits++;
    score += bits < 20 ? bits : 20;
    /* Invalid messages: squared, so a few mistakes cost little and a
     * stream of them sinks the peer below zero. */
    score -= peer->faults * peer->faults;
    return score;
}

/* Reachable, and a heartbeat already here: live from now on. */
static void s_make_live(ns_peer_t *peer)
{
    if (!peer->hb || peer->state == NS_PEER_LIVE)
        return;
    peer->state = NS_PEER_LIVE;
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, peer->id);
    ns_info(NS_MOD_PEERS, "event=peer_live id=%s endpoint=%s", idtext,
            peer->endpoint);
}

/* A reachable key that found no slot: its heartbeats keep coming through
 * every peer, so without this each one would be dialled again. */
static void s_remember_refused(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                               uint64_t now_ms)
{
    int slot = 0;
    for (int i = 0; i < S_REFUSED_SLOTS; i++)
        if (p->refused[i].until_ms < p->refused[slot].until_ms)
            slot = i;
    memcpy(p->refused[slot].id, id, NS_ID_BYTES);
    p->refused[slot].until_ms = now_ms + S_REFUSED_MS;
}

static bool s_recently_refused(const ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                               uint64_t now_ms)
{
    for (int i = 0; i < S_REFUSED_SLOTS; i++)
        if (p->refused[i].until_ms > now_ms &&
            memcmp(p->refused[i].id, id, NS_ID_BYTES) == 0)
            return true;
    return false;
}

bool ns_peers_reached(ns_p2p_t *p, ns_peer_t *peer)
{
    if (peer->reachable)
        return true;
    uint64_t now = ns_mono_ms();
    uint32_t slots = peer->outbound ? p->out_slots : p->in_slots;
    uint32_t used = s_count(p, peer->outbound, true);
    peer->reachable = true;
    peer->reachable_ms = now;
    if (peer->fixed || used < slots) {
        s_make_live(peer);
        return true;
    }
    /* Full: the lowest-scored peer of this direction gives way if the
     * newcomer scores higher (ties keep the incumbent: long-lived wins). */
    double mine = ns_peer_score(p, peer, now);
    uint8_t victim_id[NS_ID_BYTES];
    bool found = false;
    double worst = 0;
    for (uint32_t i = 0; i < p->n_peers; i++) {
        const ns_peer_t *q = &p->peers[i];
        if (q == peer || q->fixed || !q->reachable ||
            q->outbound != peer->outbound)
            continue;
        double sc = ns_peer_score(p, q, now);
        if (!found || sc < worst) {
            memcpy(victim_id, q->id, NS_ID_BYTES);
            found = true;
            worst = sc;
        }
    }
    if (!found || worst >= mine) {
        p->stats.table_full++;
        s_remember_refused(p, peer->id, now);
        ns_peers_remove(p, peer, "slots_full");
        return false;
    }
    /* Removing reorders the array: find ourselves again by id after. */
    uint8_t my_id[NS_ID_BYTES];
    memcpy(my_id, peer->id, NS_ID_BYTES);
    p->stats.peers_evicted++;
    ns_peers_remove(p, ns_peers_find(p, victim_id), "evicted_by_score");
    s_make_live(ns_peers_find(p, my_id));
    return true;
}

ns_peer_t *ns_peers_of_src(ns_p2p_t *p, const struct ns_p2p_src *src)
{
    if (src->peer)
        return src->peer;
    return src->key ? ns_peers_find_curve(p, src->key) : NULL;
}

static bool s_bucket_take(double *tokens, uint64_t *refill_us, double burst,
                          double per_s, uint64_t now_us)
{
    if (*refill_us == 0) {
        *refill_us = now_us;
        *tokens = burst;
    }
    *tokens += (double)(now_us - *refill_us) / 1e6 * per_s;
    *refill_us = now_us;
    if (*tokens > burst)
        *tokens = burst;
    if (*tokens < 1.0)
        return false;
    *tokens -= 1.0;
    return true;
}

static ns_addr_budget_t *s_addr_budget(ns_p2p_t *p, const char *addr,
                                       uint64_t now_ms)
{
    ns_addr_budget_t *lru = &p->addrs[0];
    for (int i = 0; i < S_ADDR_SLOTS; i++) {
        ns_addr_budget_t *a = &p->addrs[i];
        if (a->addr[0] && strcmp(a->addr, addr) == 0) {
            a->last_used_ms = now_ms;
            return a;
        }
        if (!a->addr[0] ||
            (lru->addr[0] && a->last_used_ms < lru->last_used_ms))
            lru = a;
    }
    memset(lru, 0, sizeof *lru);
    snprintf(lru->addr, sizeof lru->addr, "%s", addr);
    lru->last_used_ms = now_ms;
    return lru;
}

bool ns_peers_staked(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES])
{
    return s_stake_of(p, id) > 0;
}

bool ns_peers_admit_key(ns_p2p_t *p, const struct ns_p2p_src *src,
                        const uint8_t id[NS_ID_BYTES])
{
    uint64_t now_us = ns_mono_us();
    if (s_recently_refused(p, id, now_us / 1000))
        return false;
    /* Stake costs credits: such keys are not free to make. */
    if (ns_peers_staked(p, id))
        return true;
    ns_link_t *l = src->link;
    if (!s_bucket_take(&l->newkey_tokens, &l->newkey_refill_us, S_NEWKEY_BURST,
                       S_NEWKEY_PER_S, now_us)) {
        p->stats.newkey_limited++;
        return false;
    }
    /* Inbound connections of strangers also share their address's
     * budget: new CURVE keys are free, new addresses are not. */
    const ns_peer_t *via = ns_peers_of_src(p, src);
    if (src->rid && src->addr && (!via || !via->reachable)) {
        ns_addr_budget_t *a = s_addr_budget(p, src->addr, now_us / 1000);
        if (!s_bucket_take(&a->tokens, &a->refill_us, S_ADDR_BURST,
                           S_ADDR_PER_S, now_us)) {
            p->stats.newkey_limited++;
            return false;
        }
    }
    return true;
}

void ns_peers_remove(ns_p2p_t *p, ns_peer_t *peer, const char *why)
{
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, peer->id);
    if (peer->state == NS_PEER_LIVE)
        ns_info(NS_MOD_PEERS, "event=peer_dropped id=%s reason=%s", idtext,
                why);
    else
        ns_debug(NS_MOD_PEERS, "event=peer_dropped id=%s reason=%s", idtext,
                 why);
    (void)ns_loop_remove_socket(p->loop, peer->dealer);
    ns_tr_close(&peer->dealer);
    free(peer->hb);
    free(peer->hb_env);
    size_t idx = (size_t)(peer - p->peers);
    p->n_peers--;
    if (idx != p->n_peers)
        p->peers[idx] = p->peers[p->n_peers];
    memset(&p->peers[p->n_peers], 0, sizeof p->peers[0]);
}

bool ns_contact_dialable(const char *contact)
{
    return strncmp(contact, "tcp://", 6) == 0;
}

int ns_peers_send(ns_p2p_t *p, ns_peer_t *peer, const uint8_t *buf, size_t len)
{
    if (!peer->held)
        return ns_tr_send(p, peer->dealer, buf, len);
    if (!peer->rid_len) {
        p->stats.send_failed++;
        return NS_ERR_NOTFOUND;
    }
    return ns_tr_reply(p, peer->rid, peer->rid_len, buf, len);
}

bool ns_peers_fresh_conn(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                         const uint8_t **rid, size_t *rid_len)
{
    uint64_t now = ns_mono_ms();
    const ns_peer_t *peer = ns_peers_find(p, id);
    if (peer && peer->rid_len && now - peer->rid_ms <= S_CONN_FRESH_MS) {
        *rid = peer->rid;
        *rid_len = peer->rid_len;
        return true;
    }
    uint8_t curve[32];
    const ns_link_t *link =
        ns_id_curve_pk(id, curve) == NS_OK ? ns_link_find(p, curve) : NULL;
    if (link && link->rid_len && now - link->rid_ms <= S_CONN_FRESH_MS) {
        *rid = link->rid;
        *rid_len = link->rid_len;
        return true;
    }
    return false;
}

void ns_peers_note_conn(ns_p2p_t *p, const uint8_t key[32], const uint8_t *rid,
                        size_t rid_len, const char *addr)
{
    ns_peer_t *peer = ns_peers_find_curve(p, key);
    if (!peer || !rid || rid_len == 0 || rid_len > S_RID_MAX)
        return;
    memcpy(peer->rid, rid, rid_len);
    peer->rid_len = (uint8_t)rid_len;
    peer->rid_ms = ns_mono_ms();
    if (addr)
        snprintf(peer->addr, sizeof peer->addr, "%s", addr);
}

ns_peer_t *ns_peers_hold(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                         const char *contact, const uint8_t *rid,
                         size_t rid_len, const char *addr)
{
    if (memcmp(id, p->self_id, NS_ID_BYTES) == 0 || !rid || rid_len == 0 ||
        rid_len > S_RID_MAX)
        return NULL;
    ns_peer_t *peer = ns_peers_find(p, id);
    if (peer && peer->held)
        return peer;
    uint8_t curve[32];
    if (ns_id_curve_pk(id, curve) != NS_OK || ns_tr_banned(p, curve))
        return NULL;
    /* Connections cost an address each, keys cost nothing: a few held
     * peers per address, so one host cannot fill the inbound slots. */
    uint32_t same = 0;
    for (uint32_t i = 0; addr && addr[0] && i < p->n_peers; i++)
        same += p->peers[i].held && strcmp(p->peers[i].addr, addr) == 0;
    if (same >= S_HELD_PER_ADDR) {
        p->stats.table_full++;
        return NULL;
    }
    if (peer)
        ns_peers_remove(p, peer, "held_over_its_connection");
    if (p->n_peers >= p->peers_cap) {
        p->stats.table_full++;
        return NULL;
    }
    peer = &p->peers[p->n_peers++];
    memset(peer, 0, sizeof *peer);
    memcpy(peer->id, id, NS_ID_BYTES);
    memcpy(peer->curve_pk, curve, 32);
    memcpy(peer->link.key, curve, 32);
    peer->link.used = true;
    peer->link.tokens = p->cfg->rate_burst;
    peer->link.newkey_tokens = S_NEWKEY_BURST;
    snprintf(peer->endpoint, sizeof peer->endpoint, "%s", contact);
    peer->held = true;
    peer->outbound = false; /* it came to us */
    peer->vouched = true;   /* over its own connection */
    peer->stake = s_stake_of(p, id);
    peer->added_ms = ns_mono_ms();
    memcpy(peer->rid, rid, rid_len);
    peer->rid_len = (uint8_t)rid_len;
    peer->rid_ms = peer->added_ms;
    if (addr)
        snprintf(peer->addr, sizeof peer->addr, "%s", addr);
    peer->state = NS_PEER_CONNECTING;
    p->stats.peers_added++;
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, id);
    ns_debug(NS_MOD_PEERS, "event=peer_held id=%s contact=\"%s\" addr=%s",
             idtext, contact, addr ? addr : "-");
    /* The CURVE handshake of its connection proved the key. */
    if (!ns_peers_reached(p, peer))
        return NULL;
    return ns_peers_find(p, id);
}

void ns_peers_send_hello(ns_p2p_t *p, ns_peer_t *peer)
{
    if (peer->held || !peer->dealer)
        return; /* it dials us; we cannot dial it */
    ns_hello_t hello;
    memset(&hello, 0, sizeof hello);
    memcpy(hello.network_id, p->network_id, NS_HASH_BYTES);
    snprintf(hello.endpoint, sizeof hello.endpoint, "%s", p->contact);
    snprintf(hello.version, sizeof hello.version, "%s", NS_VERSION_STRING);
    if (ns_hello_encode(&hello, &p->body) != NS_OK ||
        ns_p2p_sign(p, NS_MSG_HELLO, p->body.data, p->body.len, &p->scratch,
                    NULL) != NS_OK)
        return;
    (void)ns_tr_send(p, peer->dealer, p->scratch.data, p->scratch.len);
    /* Our latest heartbeat too, so the peer sees us live at once. */
    if (p->last_hb.len)
        (void)ns_tr_send(p, peer->dealer, p->last_hb.data, p->last_hb.len);
    peer->hello_ms = ns_mono_ms();
}

/* reachable=auto: nobody came to our ROUTER in S_AUTO_MS after our first
 * live peer, so nobody can: we dial out only from now on. */
static void s_auto_reachable(ns_p2p_t *p, uint64_t now_ms)
{
    if (p->cfg->reachable != NS_REACH_AUTO || p->unreachable || p->dialled_in)
        return;
    if (!p->first_live_ms) {
        if (ns_p2p_live_peers(p))
            p->first_live_ms = now_ms;
        return;
    }
    if (now_ms - p->first_live_ms < S_AUTO_MS)
        return;
    p->unreachable = true;
    ns_info(NS_MOD_NET,
            "event=unreachable_detected advertise=%s hint=\"no peer dialled "
            "us back: dialling out only (node.reachable=auto)\"",
            p->advertise);
}

void ns_peers_maintain(ns_p2p_t *p, uint64_t now_ms)
{
    /* Entries whose endpoint never answered but whose key talks to us
     * over its own connection (behind NAT, advertising its private
     * address): held over that connection. Collected first: holding
     * reorders the table. */
    uint8_t hold[8][NS_ID_BYTES];
    uint32_t n_hold = 0;
    for (uint32_t i = 0; i < p->n_peers && n_hold < 8; i++) {
        const ns_peer_t *q = &p->peers[i];
        if (!q->reachable && !q->held && !q->fixed && q->rid_len &&
            now_ms - q->added_ms >= S_HOLD_AFTER_MS &&
            now_ms - q->rid_ms < S_CONNECT_TIMEOUT_MS)
            memcpy(hold[n_hold++], q->id, NS_ID_BYTES);
    }
    for (uint32_t k = 0; k < n_hold; k++) {
        ns_peer_t *q = ns_peers_find(p, hold[k]);
        if (!q)
            continue;
        char contact[NS_ENDPOINT_MAX], addr[64];
        uint8_t rid[S_RID_MAX];
        size_t rid_len = q->rid_len;
        snprintf(contact, sizeof contact, "%s", q->endpoint);
        snprintf(addr, sizeof addr, "%s", q->addr);
        memcpy(rid, q->rid, rid_len);
        (void)ns_peers_hold(p, hold[k], contact, rid, rid_len, addr);
    }
    s_auto_reachable(p, now_ms);
    for (uint32_t i = 0; i < p->n_peers;) {
        ns_peer_t *peer = &p->peers[i];
        peer->deliveries *= S_SCORE_DECAY;
        peer->faults *= S_SCORE_DECAY;
        peer->stake = s_stake_of(p, peer->id);
        if (peer->state == NS_PEER_LIVE) {
            /* interval_ms is bounded by the decoder (wire.h). Three of
             * its intervals, or of ours when they are longer: a peer that
             * has no slot for us only answers our heartbeats (p2p.c,
             * s_on_heartbeat), so it is heard once per our interval,
             * however short its own (intervals differ with the peers,
             * s_hb_interval). */
            uint64_t ivl = peer->hb->interval_ms > p->my_hb.interval_ms
                               ? peer->hb->interval_ms
                               : p->my_hb.interval_ms;
            uint64_t limit = 3ull * ivl;
            if (now_ms - peer->last_hb_ms > limit) {
                p->stats.peers_expired++;
                ns_peers_remove(p, peer, "missed_3_heartbeats");
                continue;
            }
        } else if (now_ms - peer->added_ms > S_CONNECT_TIMEOUT_MS &&
                   !peer->bootstrap) {
            ns_peers_remove(p, peer,
                            peer->reachable ? "no_heartbeat" : "unreachable");
            continue;
        } else if (now_ms - peer->hello_ms > p->cfg->heartbeat_interval_ms) {
            ns_peers_send_hello(p, peer); /* still waiting: try again */
        }
        i++;
    }
    /* Bootstrap addresses come back whenever they are missing. */
    for (uint32_t b = 0; b < p->cfg->n_bootstrap; b++) {
        uint8_t id[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        if (ns_addr_parse(p->cfg->bootstrap[b], id, ep) != NS_OK)
            continue;
        if (!ns_peers_find(p, id))
            ns_peers_add(p, id, ep, NS_PEER_FROM_FIXED, true, true);
    }
    ns_relay_expire(p, now_ms);
    if (ns_relay_update_contact(p) && p->running)
        ns_p2p_send_heartbeat(p);
}

const ns_link_t *ns_link_find(const ns_p2p_t *p, const uint8_t key[32])
{
    for (int i = 0; i < S_MAX_LINKS; i++)
        if (p->links[i].used && memcmp(p->links[i].key, key, 32) == 0)
            return &p->links[i];
    return NULL;
}

ns_link_t *ns_link_get(ns_p2p_t *p, const uint8_t key[32], uint64_t now_ms)
{
    ns_link_t *lru = &p->links[0];
    for (int i = 0; i < S_MAX_LINKS; i++) {
        ns_link_t *l = &p->links[i];
        if (l->used && memcmp(l->key, key, 32) == 0) {
            l->last_used_ms = now_ms;
            return l;
        }
        if (!l->used || (lru->used && l->last_used_ms < lru->last_used_ms))
            lru = l;
    }
    /* New link (or evict the least recently used): a fresh bucket. */
    memset(lru, 0, sizeof *lru);
    memcpy(lru->key, key, 32);
    lru->used = true;
    lru->tokens = p->cfg->rate_burst;
    lru->refill_us = ns_mono_us();
    lru->newkey_tokens = S_NEWKEY_BURST;
    lru->newkey_refill_us = lru->refill_us;
    lru->last_used_ms = now_ms;
    return lru;
}

bool ns_link_allow(const ns_config_t *cfg, ns_link_t *link, uint64_t now_us)
{
    if (link->refill_us == 0)
        link->refill_us = now_us;
    double elapsed_s = (double)(now_us - link->refill_us) / 1e6;
    link->refill_us = now_us;
    link->tokens += elapsed_s * cfg->rate_msgs_per_s;
    if (link->tokens > cfg->rate_burst)
        link->tokens = cfg->rate_burst;
    if (link->tokens < 1.0)
        return false;
    link->tokens -= 1.0;
    return true;
}
