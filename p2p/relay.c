/* relay.c - nodes behind a router: our contact, routes through relays,
 * and the RELAY message (docs/PROTOCOL.md, "Behind a router").
 *
 * A node that cannot be dialled opens every link itself; the nodes it
 * dials keep it over that connection (peers.c, ns_peers_hold). Two such
 * nodes reach each other through a reachable peer that relays
 * (node.relay = on, the default): the sender wraps its signed envelope
 * in a RELAY [to, envelope] to the relay, which passes the RELAY on
 * unchanged to `to` over its link there; `to` unwraps it and takes the
 * envelope as if it came from its signer, answering the same way back. A
 * relay passes on only from a key in its table to a live peer or a key
 * that talks to it over its own connection (behind a router without
 * knowing it, not held yet), only what the sender sent over its own
 * connection, and within a per-sender message budget and a byte budget
 * for everyone.
 */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <stdio.h>
#include <string.h>

bool ns_relay_update_contact(ns_p2p_t *p)
{
    char next[NS_ENDPOINT_MAX];
    if (!p->unreachable) {
        snprintf(next, sizeof next, "%s", p->advertise);
    } else {
        /* The relay we named while it stays live, else the first live
         * one: a contact that flips would strand announcements. */
        const char *cur = ns_contact_relay(p->contact);
        const ns_peer_t *best = NULL;
        for (uint32_t i = 0; i < p->n_peers; i++) {
            const ns_peer_t *q = &p->peers[i];
            if (q->state != NS_PEER_LIVE || q->held || !q->hb ||
                !(q->hb->flags & NS_HB_RELAY) ||
                !ns_contact_dialable(q->endpoint))
                continue;
            char idtext[NS_ID_TEXT_LEN + 1];
            ns_id_text(idtext, q->id);
            if (cur && strncmp(cur, idtext, NS_ID_TEXT_LEN) == 0) {
                best = q;
                break;
            }
            if (!best)
                best = q;
        }
        next[0] = '\0';
        if (best) {
            char idtext[NS_ID_TEXT_LEN + 1];
            ns_id_text(idtext, best->id);
            int w = snprintf(next, sizeof next, "%s%s@%s", NS_RELAY_PREFIX,
                             idtext, best->endpoint);
            if (w < 0 || (size_t)w >= sizeof next)
                next[0] = '\0';
        }
    }
    /* A light peer's endpoint lives as long as one command: no relay. */
    uint32_t flags =
        NS_HB_DIRECT | NS_HB_HEADS_SINCE |
        (p->cfg->relay && !p->unreachable && !p->light ? NS_HB_RELAY : 0) |
        (p->light ? NS_HB_LIGHT : 0);
    if (strcmp(next, p->contact) == 0 && flags == p->my_hb.flags)
        return false;
    snprintf(p->contact, sizeof p->contact, "%s", next);
    snprintf(p->my_hb.endpoint, sizeof p->my_hb.endpoint, "%s", next);
    p->my_hb.flags = flags;
    ns_info(NS_MOD_NET, "event=contact contact=\"%s\" reachable=%d relay=%d",
            next, !p->unreachable, (flags & NS_HB_RELAY) != 0);
    return true;
}

void ns_relay_route_set(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const uint8_t via[NS_ID_BYTES])
{
    uint64_t now = ns_mono_ms();
    int slot = 0;
    for (int i = 0; i < S_ROUTES; i++) {
        if (p->routes[i].used_ms &&
            memcmp(p->routes[i].id, id, NS_ID_BYTES) == 0) {
            slot = i;
            break;
        }
        if (p->routes[i].used_ms < p->routes[slot].used_ms)
            slot = i; /* a free one (0), else the least recently used */
    }
    memcpy(p->routes[slot].id, id, NS_ID_BYTES);
    memcpy(p->routes[slot].via, via, NS_ID_BYTES);
    p->routes[slot].used_ms = now ? now : 1;
}

ns_peer_t *ns_relay_route(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES])
{
    for (int i = 0; i < S_ROUTES; i++) {
        if (!p->routes[i].used_ms ||
            memcmp(p->routes[i].id, id, NS_ID_BYTES) != 0)
            continue;
        ns_peer_t *via = ns_peers_find(p, p->routes[i].via);
        if (via)
            p->routes[i].used_ms = ns_mono_ms();
        return via;
    }
    return NULL;
}

void ns_relay_expire(ns_p2p_t *p, uint64_t now_ms)
{
    for (int i = 0; i < S_ROUTES; i++)
        if (p->routes[i].used_ms && now_ms - p->routes[i].used_ms > S_ROUTE_MS)
            memset(&p->routes[i], 0, sizeof p->routes[i]);
}

int ns_relay_dial(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                  const char *relay_addr)
{
    if (memcmp(id, p->self_id, NS_ID_BYTES) == 0)
        return NS_ERR_SELF;
    const ns_peer_t *direct = ns_peers_find(p, id);
    if (direct && direct->reachable)
        return NS_ERR_EXISTS; /* it dialled us: no relay needed */
    uint8_t rid[NS_ID_BYTES];
    char rep[NS_ENDPOINT_MAX];
    int rc = ns_addr_parse(relay_addr, rid, rep);
    if (rc != NS_OK)
        return rc;
    if (memcmp(rid, p->self_id, NS_ID_BYTES) == 0)
        return NS_ERR_NOTFOUND; /* we are its relay, and do not hold it */
    if (!ns_peers_find(p, rid)) {
        rc = ns_p2p_connect(p, relay_addr);
        if (rc != NS_OK && rc != NS_ERR_EXISTS)
            return rc;
    }
    ns_relay_route_set(p, id, rid);
    return NS_OK;
}

int ns_relay_send(ns_p2p_t *p, ns_peer_t *via, const uint8_t to[NS_ID_BYTES],
                  const uint8_t *env, size_t len)
{
    ns_relay_t r = {{0}, env, len};
    memcpy(r.to, to, NS_ID_BYTES);
    ns_buf_t body, msg;
    ns_buf_init(&body);
    ns_buf_init(&msg);
    int rc = ns_relay_encode(&r, &body);
    if (rc == NS_OK)
        rc = ns_p2p_sign(p, NS_MSG_RELAY, body.data, body.len, &msg, NULL);
    if (rc == NS_OK)
        rc = ns_peers_send(p, via, msg.data, msg.len);
    ns_buf_release(&body);
    ns_buf_release(&msg);
    return rc;
}

static bool s_bucket(double *tokens, uint64_t *refill_us, double burst,
                     double per_s, double cost, uint64_t now_us)
{
    if (*refill_us == 0) {
        *refill_us = now_us;
        *tokens = burst;
    }
    *tokens += (double)(now_us - *refill_us) / 1e6 * per_s;
    *refill_us = now_us;
    if (*tokens > burst)
        *tokens = burst;
    if (*tokens < cost)
        return false;
    *tokens -= cost;
    return true;
}

/* For us: the envelope inside is taken as if it came from its signer,
 * and answers to it go back the same way. */
static int s_deliver(ns_p2p_t *p, const ns_envelope_t *outer,
                     const ns_relay_t *r, struct ns_p2p_src *src)
{
    ns_peer_t *via = ns_peers_of_src(p, src);
    if (!via || !via->reachable)
        return NS_ERR_INVAL; /* only from a peer of ours */
    ns_envelope_t inner;
    int rc = ns_envelope_decode(r->env, r->env_len, &p->types, &inner);
    if (rc != NS_OK)
        return rc;
    /* What a relay carries: the RELAY's signer's own direct messages of
     * the layers above; never membership (HELLO, HEARTBEAT, PEERS, PULL),
     * gossip or another RELAY. */
    if (memcmp(inner.sender, outer->sender, NS_ID_BYTES) != 0 ||
        inner.type <= NS_MSG_LAST_BUILTIN || !p->handlers[inner.type].fn ||
        p->handlers[inner.type].gossiped)
        return NS_ERR_INVAL;
    uint8_t curve[32];
    if (ns_id_curve_pk(inner.sender, curve) != NS_OK)
        return NS_ERR_INVAL;
    ns_relay_route_set(p, inner.sender, via->id);
    p->stats.via_relay++;
    /* Its own link entry: rate and log limits per signer, whatever the
     * relay. The RELAY was verified; the envelope inside is verified by
     * the ingest like any other. */
    struct ns_p2p_src in = {ns_link_get(p, curve, ns_mono_ms()),
                            curve,
                            NULL,
                            0,
                            NULL,
                            NULL,
                            src,
                            inner.sender};
    rc = ns_p2p_ingest_src(p, &in, r->env, r->env_len);
    /* The inner verdict is counted there; a duplicate is no fault of the
     * RELAY. */
    return NS_OK;
}

int ns_relay_on_msg(ns_p2p_t *p, const ns_envelope_t *env,
                    struct ns_p2p_src *src)
{
    ns_relay_t r;
    int rc = ns_relay_decode(env->body, env->body_len, &r);
    if (rc != NS_OK)
        return rc;
    if (src->relay)
        return NS_ERR_INVAL; /* no RELAY inside a RELAY */
    if (memcmp(r.to, p->self_id, NS_ID_BYTES) == 0)
        return s_deliver(p, env, &r, src);
    /* Pass it on: only when we relay, and we can be dialled (a relay is
     * a meeting point), only what its signer sent over its own link. */
    /* Signer and recipient: live peers, or keys in our table that talk
     * to us over a connection of their own while their advertised
     * endpoint has not answered (behind a router without knowing it:
     * held only after S_HOLD_AFTER_MS, ns_peers_maintain). */
    ns_peer_t *from = ns_peers_find(p, env->sender);
    ns_peer_t *to = ns_peers_find(p, r.to);
    const uint8_t *to_rid = NULL;
    size_t to_rid_len = 0;
    bool to_live = to && to->state == NS_PEER_LIVE;
    const char *why = NULL;
    if (!p->cfg->relay || p->unreachable || p->light)
        why = "not_relaying";
    else if (!ns_p2p_from_sender_link(src, env->sender) || !from)
        why = "sender_not_a_peer";
    else if (!to ||
             (!to_live && !ns_peers_fresh_conn(p, r.to, &to_rid, &to_rid_len)))
        why = "recipient_not_a_peer";
    if (!why) {
        uint64_t now_us = ns_mono_us();
        size_t bytes = 0;
        /* the RELAY as it came: envelope overhead plus its body */
        bytes = env->body_len + NS_ENVELOPE_OVERHEAD;
        if (!s_bucket(&from->relay_tokens, &from->relay_refill_us,
                      S_RELAY_BURST, S_RELAY_PER_S, 1.0, now_us) ||
            !s_bucket(&p->relay_bytes, &p->relay_refill_us, S_RELAY_BYTES_BURST,
                      S_RELAY_BYTES_PER_S, (double)bytes, now_us))
            why = "relay_rate";
    }
    if (why) {
        p->stats.relay_refused++;
        char a[NS_ID_TEXT_LEN + 1];
        ns_id_text(a, env->sender);
        ns_debug(NS_MOD_NET, "event=relay_refused from=%s reason=%s", a, why);
        /* A recipient we do not know is a sender's guess that missed
         * (p2p.c, ns_p2p_send_raw tries a few relays): no warning. */
        return strcmp(why, "recipient_not_a_peer") == 0 ? NS_ERR_NOTFOUND
                                                        : NS_ERR_INVAL;
    }
    /* Re-sign nothing: the RELAY goes on as its signer made it. */
    ns_buf_t msg;
    ns_buf_init(&msg);
    rc = ns_p2p_env_bytes(env, &msg);
    if (rc == NS_OK)
        rc = to_live ? ns_peers_send(p, to, msg.data, msg.len)
                     : ns_tr_reply(p, to_rid, to_rid_len, msg.data, msg.len);
    ns_buf_release(&msg);
    if (rc == NS_OK) {
        p->stats.relayed++;
        p->stats.relayed_bytes += env->body_len;
    }
    return NS_OK;
}
