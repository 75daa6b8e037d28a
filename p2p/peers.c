/* peers.c - the peer table: who we know, whom we are connected to, who is
 * alive; and per-link limits.
 *
 * A peer enters the table from a bootstrap address, a HELLO, a PEERS
 * reply or a gossiped heartbeat, always with its own DEALER. It is LIVE
 * while its heartbeats arrive; after three of its own intervals without
 * one it is dropped. A peer that never sends a heartbeat is dropped after
 * S_CONNECT_TIMEOUT_MS (bootstrap addresses are retried).
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

ns_peer_t *ns_peers_add(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const char *endpoint, bool bootstrap)
{
    if (memcmp(id, p->self_id, NS_ID_BYTES) == 0)
        return NULL;
    if (p->n_peers >= p->cfg->max_peers) {
        p->stats.table_full++;
        return NULL;
    }
    uint8_t curve[32];
    if (ns_id_curve_pk(id, curve) != NS_OK || ns_tr_banned(p, curve))
        return NULL;
    void *dealer = ns_tr_connect(p, curve, endpoint);
    if (!dealer)
        return NULL;
    if (ns_loop_add_socket(p->loop, dealer, ns_p2p_on_dealer, p) != NS_OK) {
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
    snprintf(peer->endpoint, sizeof peer->endpoint, "%s", endpoint);
    peer->dealer = dealer;
    peer->bootstrap = bootstrap;
    peer->added_ms = ns_mono_ms();
    peer->state = NS_PEER_CONNECTING;
    p->stats.peers_added++;
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, id);
    ns_debug(NS_MOD_PEERS, "event=peer_added id=%s endpoint=%s bootstrap=%d",
             idtext, endpoint, bootstrap);
    ns_peers_send_hello(p, peer);
    return peer;
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
    size_t idx = (size_t)(peer - p->peers);
    p->n_peers--;
    if (idx != p->n_peers)
        p->peers[idx] = p->peers[p->n_peers];
    memset(&p->peers[p->n_peers], 0, sizeof p->peers[0]);
}

void ns_peers_send_hello(ns_p2p_t *p, ns_peer_t *peer)
{
    ns_hello_t hello;
    memset(&hello, 0, sizeof hello);
    memcpy(hello.network_id, p->network_id, NS_HASH_BYTES);
    snprintf(hello.endpoint, sizeof hello.endpoint, "%s", p->advertise);
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

void ns_peers_maintain(ns_p2p_t *p, uint64_t now_ms)
{
    for (uint32_t i = 0; i < p->n_peers;) {
        ns_peer_t *peer = &p->peers[i];
        if (peer->state == NS_PEER_LIVE) {
            uint64_t limit = 3ull * peer->hb->interval_ms;
            if (now_ms - peer->last_hb_ms > limit) {
                p->stats.peers_expired++;
                ns_peers_remove(p, peer, "missed_3_heartbeats");
                continue;
            }
        } else if (now_ms - peer->added_ms > S_CONNECT_TIMEOUT_MS &&
                   !peer->bootstrap) {
            ns_peers_remove(p, peer, "no_heartbeat");
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
            ns_peers_add(p, id, ep, true);
    }
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
