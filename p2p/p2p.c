/* p2p.c - message ingest, the built-in p2p message types, receiving, and
 * what the p2p runs on its loop (loop.h). */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ns_p2p_src s_src_t;

static void s_on_zap(void *user, void *socket);
static void s_on_monitor(void *user, void *socket);
static void s_on_router(void *user, void *socket);

/* ---- construction ------------------------------------------------------ */

ns_p2p_t *ns_p2p_new(const ns_p2p_opts_t *opts, int *err)
{
    int rc = NS_ERR_NOMEM;
    ns_p2p_t *p = calloc(1, sizeof *p);
    if (!p)
        goto fail;
    p->cfg = opts->cfg;
    p->light = opts->light;
    p->identity = opts->identity;
    memcpy(p->self_id, ns_identity_pk(opts->identity), NS_ID_BYTES);
    ns_id_short(p->self_short, p->self_id);
    memcpy(p->network_id, opts->network_id, NS_HASH_BYTES);
    snprintf(p->network_name, sizeof p->network_name, "%s",
             opts->network_name ? opts->network_name : "?");
    p->start_ms = ns_mono_ms();
    p->strangers.tokens = p->cfg->rate_burst;
    /* Reachable peers: half the table for those we chose, half for those
     * that came to us, each direction at least one; plus room for the
     * unreachable entries of each direction and for fixed ones. */
    p->in_slots = p->cfg->max_peers / 2 ? p->cfg->max_peers / 2 : 1;
    p->out_slots =
        p->cfg->max_peers > p->in_slots ? p->cfg->max_peers - p->in_slots : 1;
    p->peers_cap = p->in_slots + p->out_slots + 2 * S_PENDING_MAX +
                   NS_MAX_BOOTSTRAP + S_FIXED_EXTRA;
    p->peers = calloc(p->peers_cap, sizeof *p->peers);
    p->curve_sk = sodium_malloc(32);
    if (!p->peers || !p->curve_sk)
        goto fail;
    if ((rc = ns_identity_curve(opts->identity, p->curve_pk, p->curve_sk)) !=
        NS_OK)
        goto fail;
    if ((rc = ns_seen_init(&p->seen, S_SEEN_CAP)) != NS_OK ||
        (rc = ns_seen_init(&p->asked, S_ASKED_CAP)) != NS_OK)
        goto fail;
    ns_seen_set_growth(&p->seen, S_SEEN_MAX, p->cfg->seen_ttl_ms);
    ns_wire_types_init(&p->types);
    ns_buf_init(&p->last_hb);
    ns_buf_init(&p->scratch);
    ns_buf_init(&p->body);

    rc = NS_ERR_NOMEM;
    p->loop = ns_loop_new(S_OWN_SOCKETS + NS_P2P_MAX_SOCKETS + p->peers_cap,
                          S_OWN_TIMERS + NS_P2P_MAX_TIMERS);
    if (!p->loop)
        goto fail;
    p->ctx = zmq_ctx_new();
    rc = NS_ERR_ZMQ;
    if (!p->ctx)
        goto fail;
    if ((rc = ns_tr_bind(p)) != NS_OK)
        goto fail;
    /* The ZAP socket first: handshakes are answered before messages; and
     * before it the ROUTER's monitor (s_on_zap reads it too). */
    if ((rc = ns_loop_add_socket(p->loop, p->monitor, s_on_monitor, p)) !=
            NS_OK ||
        (rc = ns_loop_add_socket(p->loop, p->zap, s_on_zap, p)) != NS_OK ||
        (rc = ns_loop_add_socket(p->loop, p->router, s_on_router, p)) != NS_OK)
        goto fail;

    /* Advertise: configured, else the bound endpoint (a wildcard host is
     * useless to peers, so it becomes loopback with a warning). */
    if (p->cfg->advertise[0]) {
        snprintf(p->advertise, sizeof p->advertise, "%s", p->cfg->advertise);
    } else if (strncmp(p->endpoint, "tcp://0.0.0.0:", 14) == 0) {
        snprintf(p->advertise, sizeof p->advertise, "tcp://127.0.0.1:%s",
                 p->endpoint + 14);
        if (p->cfg->reachable != NS_REACH_NO) /* else told to no one */
            ns_warn(NS_MOD_NET,
                    "event=advertise_loopback bound=%s hint=\"set "
                    "advertise= in config for other hosts\"",
                    p->endpoint);
    } else {
        snprintf(p->advertise, sizeof p->advertise, "%s", p->endpoint);
    }
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, p->self_id);
    snprintf(p->address, sizeof p->address, "%s@%s", idtext, p->advertise);
    /* node.reachable = no: we dial out only; our contact is a relay among
     * our peers once there is one, else "" (docs/PROTOCOL.md, "Behind a
     * router"). */
    p->unreachable = p->cfg->reachable == NS_REACH_NO;

    ns_heartbeat_t *hb = &p->my_hb;
    memcpy(hb->network_id, p->network_id, NS_HASH_BYTES);
    snprintf(hb->version, sizeof hb->version, "%s", NS_VERSION_STRING);
    hb->interval_ms = p->cfg->heartbeat_interval_ms;
    hb->price = p->cfg->price;
    hb->stake = p->cfg->stake;
    snprintf(hb->region, sizeof hb->region, "%s", p->cfg->region);
    hb->free_slots = p->cfg->slots;
    hb->n_devices =
        opts->n_devices < NS_MAX_DEVICES ? opts->n_devices : NS_MAX_DEVICES;
    if (hb->n_devices)
        memcpy(hb->devices, opts->devices,
               hb->n_devices * sizeof *opts->devices);
    (void)ns_relay_update_contact(p); /* hb->endpoint and flags */
    return p;
fail:
    *err = rc;
    ns_p2p_destroy(&p);
    return NULL;
}

void ns_p2p_set_close_linger(ns_p2p_t *p, uint32_t ms)
{
    p->close_linger_ms = ms;
}

void ns_p2p_destroy(ns_p2p_t **pp)
{
    if (!pp || !*pp)
        return;
    ns_p2p_t *p = *pp;
    if (p->close_linger_ms > 0) {
        /* Let what is queued (a light peer's last entries) go out: the
         * context's termination waits up to this long for it. */
        int linger = (int)p->close_linger_ms, none = 0;
        /* only to peers that answered over this link: what is queued to
         * one never reached (a stale endpoint) would hold the close for
         * the whole linger */
        for (uint32_t i = 0; p->peers && i < p->n_peers; i++)
            if (p->peers[i].dealer)
                zmq_setsockopt(p->peers[i].dealer, ZMQ_LINGER,
                               p->peers[i].reachable ? &linger : &none,
                               sizeof linger);
        if (p->router)
            zmq_setsockopt(p->router, ZMQ_LINGER, &linger, sizeof linger);
    }
    if (p->peers) {
        while (p->n_peers)
            ns_peers_remove(p, &p->peers[p->n_peers - 1], "shutdown");
        free(p->peers);
    }
    ns_tr_monitor_close(p);
    ns_tr_close(&p->router);
    ns_tr_close(&p->zap);
    ns_loop_destroy(&p->loop);
    if (p->ctx)
        zmq_ctx_term(p->ctx);
    ns_seen_release(&p->seen);
    ns_seen_release(&p->asked);
    free(p->spare_hb);
    free(p->told_hb);
    ns_buf_release(&p->last_hb);
    ns_buf_release(&p->scratch);
    ns_buf_release(&p->body);
    sodium_free(p->curve_sk);
    free(p);
    *pp = NULL;
}

const char *ns_p2p_endpoint(const ns_p2p_t *p)
{
    return p->endpoint;
}

const char *ns_p2p_address(const ns_p2p_t *p)
{
    return p->address;
}

const char *ns_p2p_contact(const ns_p2p_t *p)
{
    return p->contact;
}

bool ns_p2p_reachable(const ns_p2p_t *p)
{
    return !p->unreachable;
}

void *ns_p2p_zmq_context(ns_p2p_t *p)
{
    return p->ctx;
}

int ns_p2p_register(ns_p2p_t *p, uint8_t type, bool gossiped, ns_p2p_msg_fn fn,
                    void *user)
{
    if (type <= NS_MSG_LAST_BUILTIN || p->handlers[type].fn)
        return NS_ERR_EXISTS;
    ns_wire_types_add(&p->types, type);
    p->handlers[type] = (ns_handler_t){fn, user, gossiped};
    return NS_OK;
}

int ns_p2p_unregister(ns_p2p_t *p, uint8_t type)
{
    if (!p->handlers[type].fn)
        return NS_ERR_NOTFOUND;
    memset(&p->handlers[type], 0, sizeof p->handlers[type]);
    ns_wire_types_remove(&p->types, type);
    return NS_OK;
}

void ns_p2p_set_offer(ns_p2p_t *p, uint64_t stake, uint32_t free_slots)
{
    p->my_hb.stake = stake;
    p->my_hb.free_slots = free_slots;
}

void ns_p2p_set_ledger_summary(ns_p2p_t *p, uint64_t entries,
                               const ns_hash_t digest)
{
    p->my_hb.ledger_entries = entries;
    memcpy(p->my_hb.ledger_digest, digest, NS_HASH_BYTES);
}

void ns_p2p_set_stake_fn(ns_p2p_t *p, ns_p2p_stake_fn fn, void *user)
{
    p->stake_fn = fn;
    p->stake_user = user;
}

uint32_t ns_p2p_live_peers(const ns_p2p_t *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        n += p->peers[i].state == NS_PEER_LIVE;
    return n;
}

uint32_t ns_p2p_unheard_peers(const ns_p2p_t *p, uint64_t within_ms)
{
    uint64_t now = ns_mono_ms();
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++) {
        const ns_peer_t *x = &p->peers[i];
        n += x->state != NS_PEER_LIVE && x->vouched && !x->hb &&
             now - x->added_ms < within_ms;
    }
    return n;
}

/* ---- sending ----------------------------------------------------------- */

int ns_p2p_sign(ns_p2p_t *p, uint8_t type, const uint8_t *body, size_t len,
                ns_buf_t *out, ns_hash_t id)
{
    return ns_envelope_encode(p->identity, type, ns_now_ms(), body, len, out,
                              id);
}

/* Signed with a given timestamp: the seen-cache keeps it (PULL's since). */
static int s_sign_at(ns_p2p_t *p, uint8_t type, const uint8_t *body, size_t len,
                     uint64_t ts_ms, ns_buf_t *out, ns_hash_t id)
{
    return ns_envelope_encode(p->identity, type, ts_ms, body, len, out, id);
}

int ns_p2p_publish(ns_p2p_t *p, uint8_t type, const uint8_t *body, size_t len)
{
    return ns_p2p_publish_also(p, type, body, len, NULL);
}

int ns_p2p_publish_also(ns_p2p_t *p, uint8_t type, const uint8_t *body,
                        size_t len, const uint8_t *also)
{
    ns_hash_t id;
    ns_buf_t msg;
    ns_buf_init(&msg);
    uint64_t ts = ns_now_ms();
    int rc = s_sign_at(p, type, body, len, ts, &msg, id);
    if (rc == NS_OK)
        rc = ns_seen_add_at(&p->seen, id, ns_mono_ms(), ts, msg.data, msg.len);
    if (rc == NS_OK)
        ns_gossip_forward(p, id, msg.data, msg.len, NULL, NULL);
    /* The same envelope, so that a copy that also comes by gossip is a
     * duplicate to it, dropped at the seen-cache. */
    if (also && rc == NS_OK && memcmp(also, p->self_id, NS_ID_BYTES) != 0 &&
        ns_p2p_send_raw(p, also, msg.data, msg.len) == NS_OK)
        p->stats.forwarded++;
    ns_buf_release(&msg);
    return rc;
}

/* The interval of our next heartbeats: the configured one while we send
 * them to at most heartbeat_peers peers, doubled each time the peers
 * double beyond, so that the heartbeats a node sends and receives per
 * second stay about the same however large the network (docs/PROTOCOL.md,
 * "Heartbeat interval and the number of peers"). A power-of-two multiple,
 * so that nodes that chose different ones still send on common multiples
 * of the configured interval; it comes down a step only once the peers
 * are a quarter of heartbeat_peers below the step, so a count that
 * wavers at a step does not change the heartbeat (a change is gossiped)
 * at every interval. */
static uint32_t s_hb_interval(ns_p2p_t *p)
{
    uint64_t base = p->cfg->heartbeat_interval_ms;
    uint64_t per = p->cfg->heartbeat_peers;
    if (per == 0)
        return (uint32_t)base;
    uint64_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        n += p->peers[i].reachable;
    uint64_t f = p->my_hb.interval_ms > base ? p->my_hb.interval_ms / base : 1;
    while (n > per * f && base * f * 2 <= NS_MAX_HB_INTERVAL_MS)
        f *= 2;
    while (f > 1 && n + per / 4 <= per * f / 2)
        f /= 2;
    return (uint32_t)(base * f);
}

/* Whether two heartbeats say the same, their sending time aside. Field
 * by field: decoded structs hold stale bytes past each string's end. */
static bool s_heartbeat_same(const ns_heartbeat_t *a, const ns_heartbeat_t *b)
{
    if (memcmp(a->network_id, b->network_id, NS_HASH_BYTES) != 0 ||
        strcmp(a->endpoint, b->endpoint) != 0 ||
        strcmp(a->version, b->version) != 0 ||
        a->interval_ms != b->interval_ms || a->price != b->price ||
        a->stake != b->stake || strcmp(a->region, b->region) != 0 ||
        a->free_slots != b->free_slots ||
        a->ledger_entries != b->ledger_entries ||
        memcmp(a->ledger_digest, b->ledger_digest, NS_HASH_BYTES) != 0 ||
        a->n_devices != b->n_devices || a->flags != b->flags)
        return false;
    for (uint32_t i = 0; i < a->n_devices && i < NS_MAX_DEVICES; i++)
        if (!ns_devinfo_same(&a->devices[i], &b->devices[i]))
            return false;
    return true;
}

void ns_p2p_send_heartbeat(ns_p2p_t *p)
{
    ns_hash_t id;
    uint64_t ts = ns_now_ms();
    p->my_hb.sent_us = ns_now_us();
    p->my_hb.interval_ms = s_hb_interval(p);
    if (ns_heartbeat_encode(&p->my_hb, &p->body) != NS_OK ||
        s_sign_at(p, NS_MSG_HEARTBEAT, p->body.data, p->body.len, ts,
                  &p->last_hb, id) != NS_OK) {
        ns_error(NS_MOD_GOSSIP, "event=heartbeat_encode_failed");
        return;
    }
    /* A heartbeat that says something new is gossiped on by our peers
     * and served to pulls; an unchanged one only tells our peers we are
     * alive, and goes no further (docs/PROTOCOL.md, "Gossip"). */
    bool changed = !p->told_hb || !s_heartbeat_same(p->told_hb, &p->my_hb);
    if (changed && !p->told_hb)
        p->told_hb = malloc(sizeof *p->told_hb);
    if (changed && p->told_hb)
        *p->told_hb = p->my_hb;
    if (ns_seen_add_at(&p->seen, id, ns_mono_ms(), changed ? ts : 0,
                       changed ? p->last_hb.data : NULL,
                       p->last_hb.len) != NS_OK)
        return;
    /* Straight to every reachable peer rather than to `fanout` of them:
     * each hears us first-hand every interval, so none needs a relayed
     * copy to keep us live. */
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (p->peers[i].reachable &&
            ns_peers_send(p, &p->peers[i], p->last_hb.data, p->last_hb.len) ==
                NS_OK)
            p->stats.forwarded++;
}

/* Over the connection it came on; a message fed by ns_p2p_ingest has
 * none; one that came in a RELAY goes back in one, by the same relay. */
int ns_p2p_src_send(ns_p2p_t *p, const s_src_t *src, const uint8_t *buf,
                    size_t len)
{
    if (src->relay) {
        ns_peer_t *via = ns_peers_of_src(p, src->relay);
        if (!via)
            return NS_ERR_NOTFOUND;
        return ns_relay_send(p, via, src->relay_for, buf, len);
    }
    if (src->rid)
        return ns_tr_reply(p, src->rid, src->rid_len, buf, len);
    if (src->peer)
        return ns_tr_send(p, src->peer->dealer, buf, len);
    return NS_ERR_NOTFOUND;
}

static int s_reply(ns_p2p_t *p, const s_src_t *src, const uint8_t *buf,
                   size_t len)
{
    return ns_p2p_src_send(p, src, buf, len);
}

int ns_p2p_reply(ns_p2p_t *p, ns_p2p_src_t *src, uint8_t type,
                 const uint8_t *body, size_t len)
{
    ns_buf_t msg;
    ns_buf_init(&msg);
    int rc = ns_p2p_sign(p, type, body, len, &msg, NULL);
    if (rc == NS_OK) {
        /* The handler may have dropped the peer it came from. */
        const s_src_t *link = src->relay ? src->relay : src;
        bool alive = !link->peer;
        for (uint32_t i = 0; i < p->n_peers && !alive; i++)
            alive = &p->peers[i] == link->peer;
        rc = alive ? s_reply(p, src, msg.data, msg.len) : NS_ERR_NOTFOUND;
    }
    ns_buf_release(&msg);
    return rc;
}

/* Through up to S_RELAY_TRY live peers that relay (not `skip`, the route
 * that already failed): a guess, since we do not know whom they hold, so
 * more than one; the recipient's seen-cache drops a second copy. */
static int s_send_via_relays(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                             const ns_peer_t *skip, const uint8_t *buf,
                             size_t len)
{
    int rc = NS_ERR_NOTFOUND, tried = 0;
    uint32_t start = p->n_peers ? ns_rand_below(p->n_peers) : 0;
    for (uint32_t k = 0; k < p->n_peers && tried < S_RELAY_TRY; k++) {
        ns_peer_t *q = &p->peers[(start + k) % p->n_peers];
        if (q == skip || q->state != NS_PEER_LIVE || q->held || !q->hb ||
            !(q->hb->flags & NS_HB_RELAY) ||
            memcmp(q->id, id, NS_ID_BYTES) == 0)
            continue;
        tried++;
        if (ns_relay_send(p, q, id, buf, len) == NS_OK)
            rc = NS_OK;
    }
    return rc;
}

int ns_p2p_send_raw(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                    const uint8_t *buf, size_t len)
{
    ns_peer_t *q = ns_peers_find(p, id);
    if (q && (q->reachable || q->held))
        return ns_peers_send(p, q, buf, len);
    /* Its advertised endpoint has not answered (yet): it may be behind a
     * router without knowing it, but it talks to us over a connection of
     * its own (a bid over a DEALER that reconnected after our restart
     * also comes before any HELLO). */
    const uint8_t *rid = NULL;
    size_t rid_len = 0;
    if (ns_peers_fresh_conn(p, id, &rid, &rid_len) &&
        ns_tr_reply(p, rid, rid_len, buf, len) == NS_OK)
        return NS_OK;
    ns_peer_t *via = ns_relay_route(p, id);
    if (via && ns_relay_send(p, via, id, buf, len) == NS_OK)
        return NS_OK;
    /* Our dial may still answer (a slow one): queued on our DEALER until
     * it does. It may also never answer (an endpoint behind a router):
     * the relays among our peers are tried too, and the recipient's
     * seen-cache drops a second copy. */
    int rc = q && q->dealer ? ns_peers_send(p, q, buf, len) : NS_ERR_NOTFOUND;
    if (s_send_via_relays(p, id, via, buf, len) == NS_OK)
        rc = NS_OK;
    return rc;
}

int ns_p2p_send(ns_p2p_t *p, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                const uint8_t *body, size_t len)
{
    ns_buf_t msg;
    ns_buf_init(&msg);
    int rc = ns_p2p_sign(p, type, body, len, &msg, NULL);
    if (rc == NS_OK)
        rc = ns_p2p_send_raw(p, peer, msg.data, msg.len);
    ns_buf_release(&msg);
    return rc;
}

int ns_p2p_connect(ns_p2p_t *p, const char *addr)
{
    uint8_t id[NS_ID_BYTES];
    char ep[NS_ENDPOINT_MAX];
    /* ID@relay:RELAY_ID@tcp://...: through that relay. */
    const char *at = strchr(addr, '@');
    if (at && ns_contact_relay(at + 1)) {
        char idtext[NS_ID_TEXT_LEN + 1];
        if (at - addr != NS_ID_TEXT_LEN || ns_contact_check(at + 1) != NS_OK)
            return NS_ERR_ADDR;
        memcpy(idtext, addr, NS_ID_TEXT_LEN);
        idtext[NS_ID_TEXT_LEN] = '\0';
        if (ns_id_parse(idtext, id) != NS_OK)
            return NS_ERR_ADDR;
        return ns_relay_dial(p, id, ns_contact_relay(at + 1));
    }
    int rc = ns_addr_parse(addr, id, ep);
    if (rc != NS_OK)
        return rc;
    if (memcmp(id, p->self_id, NS_ID_BYTES) == 0)
        return NS_ERR_SELF;
    if (ns_peers_find(p, id))
        return NS_ERR_EXISTS;
    uint32_t fixed = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        fixed += p->peers[i].fixed && !p->peers[i].bootstrap;
    if (fixed >= S_FIXED_EXTRA)
        return NS_ERR_TOOBIG;
    return ns_peers_add(p, id, ep, NS_PEER_FROM_FIXED, false, true)
               ? NS_OK
               : NS_ERR_TOOBIG;
}

int ns_p2p_block(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES], uint32_t ms)
{
    uint8_t curve[32];
    if (ns_id_curve_pk(id, curve) != NS_OK)
        return NS_ERR_INVAL;
    ns_tr_ban_for(p, curve, ms);
    ns_peer_t *peer = ns_peers_find(p, id);
    if (peer)
        ns_peers_remove(p, peer, "blocked");
    return NS_OK;
}

bool ns_p2p_visit_heard(ns_p2p_t *p,
                        bool (*fn)(void *u, const uint8_t id[NS_ID_BYTES],
                                   const ns_heartbeat_t *hb),
                        void *u)
{
    for (int live = 1; live >= 0; live--)
        for (uint32_t i = 0; i < p->n_peers; i++) {
            const ns_peer_t *q = &p->peers[i];
            /* an entry that never answered goes after
             * S_CONNECT_TIMEOUT_MS: its heartbeat is that recent */
            if (!q->hb || (q->state == NS_PEER_LIVE) != live)
                continue;
            if (fn(u, q->id, q->hb))
                return true;
        }
    return false;
}

int ns_p2p_pick_peer(ns_p2p_t *p,
                     bool (*want)(void *u, const uint8_t id[NS_ID_BYTES],
                                  const ns_heartbeat_t *hb),
                     void *u, uint8_t out[NS_ID_BYTES])
{
    /* Peers scored below zero (invalid messages) only when no other
     * qualifies. Each live peer is shown to want once at most (callers
     * count with it). */
    uint64_t now = ns_mono_ms();
    uint32_t n = 0, chosen = 0;
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        for (uint32_t i = 0; i < p->n_peers; i++) {
            const ns_peer_t *q = &p->peers[i];
            if (q->state != NS_PEER_LIVE ||
                (ns_peer_score(p, q, now) < 0) == (pass == 0) ||
                (want && !want(u, q->id, q->hb)))
                continue;
            /* reservoir sampling: uniform without a second pass */
            if (ns_rand_below(++n) == 0)
                chosen = i;
        }
    }
    if (n == 0)
        return NS_ERR_NOTFOUND;
    memcpy(out, p->peers[chosen].id, NS_ID_BYTES);
    return NS_OK;
}

/* ---- drops --------------------------------------------------------------- */

/* Drop reasons no honest relay causes (it checks the same before it
 * forwards); overload, clock skew and the layers' verdicts are not. */
static bool s_forged(int reason)
{
    return reason == NS_ERR_SIG || reason == NS_ERR_TOOBIG ||
           reason == NS_ERR_TRUNCATED || reason == NS_ERR_TYPE ||
           reason == NS_ERR_VERSION || reason == NS_ERR_TRAILING;
}

void ns_p2p_drop(ns_p2p_t *p, ns_link_t *link, int reason,
                 const uint8_t *sender, const char *detail)
{
    p->stats.dropped[-reason < NS_ERR_COUNT ? -reason : 0]++;
    p->stats.dropped_total++;
    ns_ratelimit_t *rl = &p->global_log;
    char keytext[17] = "-";
    if (link) {
        link->dropped++;
        rl = &link->log_limit;
        ns_hex(keytext, link->key, 8);
        /* Forged or malformed input lowers the score of the peer behind
         * the link: an honest peer relays only envelopes it verified. */
        ns_peer_t *peer =
            s_forged(reason) ? ns_peers_find_curve(p, link->key) : NULL;
        if (peer)
            peer->faults += 1.0;
    }
    if (reason == NS_ERR_REPLAY || reason == NS_ERR_NOTFOUND) {
        /* a copy that came by another path (an entry through gossip and
         * sync at once), or a request whose peer is no longer in the
         * table to be answered (dropped a moment before, after a stall):
         * normal on a healthy network, counted, not a warning */
        char sendertext[NS_ID_TEXT_LEN + 1] = "-";
        if (sender)
            ns_id_text(sendertext, sender);
        ns_debug(NS_MOD_GOSSIP,
                 "event=message_dropped reason=%s link=%s sender=%s "
                 "detail=\"%s\"",
                 ns_errname(reason), keytext, sendertext, detail ? detail : "");
        return;
    }
    uint32_t suppressed = rl->suppressed;
    if (!ns_ratelimit_allow(rl, ns_mono_ms(), S_LOG_LINES_PER_MIN, 60000))
        return;
    rl->suppressed = 0;
    char sendertext[NS_ID_TEXT_LEN + 1] = "-";
    if (sender)
        ns_id_text(sendertext, sender);
    ns_warn(NS_MOD_GOSSIP,
            "event=message_dropped reason=%s link=%s sender=%s detail=\"%s\" "
            "suppressed=%u",
            ns_errname(reason), keytext, sendertext, detail ? detail : "",
            suppressed);
}

/* ---- built-in message types --------------------------------------------- */

int ns_p2p_env_bytes(const ns_envelope_t *env, ns_buf_t *out)
{
    /* the six-element array around the signed bytes and the signature */
    static const uint8_t head = 0x96, sig_head[2] = {0xc4, NS_SIG_BYTES};
    out->len = 0;
    int rc = ns_buf_append(out, &head, 1);
    if (rc == NS_OK)
        rc = ns_buf_append(out, env->signed_part, env->signed_len);
    if (rc == NS_OK)
        rc = ns_buf_append(out, sig_head, 2);
    if (rc == NS_OK)
        rc = ns_buf_append(out, env->sig, NS_SIG_BYTES);
    return rc;
}

static bool s_from_sender_link(const s_src_t *src, const uint8_t *sender)
{
    uint8_t curve[32];
    return src->key && !src->relay && ns_id_curve_pk(sender, curve) == NS_OK &&
           memcmp(curve, src->key, 32) == 0;
}

bool ns_p2p_from_sender_link(const s_src_t *src, const uint8_t *sender)
{
    return s_from_sender_link(src, sender);
}

/* A key that cannot be dialled, talking over its own connection to our
 * ROUTER: held over it (docs/PROTOCOL.md, "Behind a router"). */
static ns_peer_t *s_hold(ns_p2p_t *p, const s_src_t *src, const uint8_t *sender,
                         const char *contact)
{
    if (!src->rid || !s_from_sender_link(src, sender))
        return NULL;
    ns_peer_t *peer = ns_peers_find(p, sender);
    if (!peer && !ns_peers_admit_key(p, src, sender))
        return NULL;
    return ns_peers_hold(p, sender, contact, src->rid, src->rid_len, src->addr);
}

static int s_network_mismatch(ns_p2p_t *p, const s_src_t *src,
                              const uint8_t *sender, const ns_hash_t theirs)
{
    char ours_hex[17], theirs_hex[17], idtext[NS_ID_TEXT_LEN + 1];
    ns_hex(ours_hex, p->network_id, 8);
    ns_hex(theirs_hex, theirs, 8);
    ns_id_text(idtext, sender);
    if (ns_ratelimit_allow(&src->link->log_limit, ns_mono_ms(),
                           S_LOG_LINES_PER_MIN, 60000))
        ns_warn(NS_MOD_PEERS,
                "event=peer_refused reason=wrong_network id=%s "
                "their_network=%s our_network=%s",
                idtext, theirs_hex, ours_hex);
    /* A node of another network is refused at the next handshake too. */
    if (src->rid && s_from_sender_link(src, sender))
        ns_tr_ban(p, src->key);
    ns_peer_t *peer = ns_peers_find(p, sender);
    if (peer)
        ns_peers_remove(p, peer, "wrong_network");
    return NS_ERR_NETWORK;
}

static int s_on_hello(ns_p2p_t *p, const ns_envelope_t *env, const s_src_t *src)
{
    ns_hello_t hello;
    int rc = ns_hello_decode(env->body, env->body_len, &hello);
    if (rc != NS_OK)
        return rc;
    /* A HELLO speaks only for its own inbound link. */
    if (!src->rid || !s_from_sender_link(src, env->sender))
        return NS_ERR_INVAL;
    if (sodium_memcmp(hello.network_id, p->network_id, NS_HASH_BYTES))
        return s_network_mismatch(p, src, env->sender, hello.network_id);
    p->dialled_in = true; /* someone could dial us (reachable=auto) */
    ns_peer_t *peer = ns_peers_find(p, env->sender);
    if (!ns_contact_dialable(hello.endpoint) || (peer && peer->held)) {
        /* It cannot be dialled (behind a router): kept over this
         * connection, if there is room. */
        (void)s_hold(p, src, env->sender, hello.endpoint);
    } else if (peer && strcmp(peer->endpoint, hello.endpoint) != 0) {
        ns_peer_origin origin = peer->fixed      ? NS_PEER_FROM_FIXED
                                : peer->outbound ? NS_PEER_FROM_OUT
                                                 : NS_PEER_FROM_IN;
        bool bootstrap = peer->bootstrap;
        bool vouched = peer->vouched || peer->reachable;
        ns_peers_remove(p, peer, "new_endpoint");
        ns_peers_add(p, env->sender, hello.endpoint, origin, bootstrap,
                     vouched);
    } else if (!peer && ns_peers_admit_key(p, src, env->sender)) {
        /* Over its own connection: vouched by that connection. */
        ns_peers_add(p, env->sender, hello.endpoint, NS_PEER_FROM_IN, false,
                     true);
    }

    /* Peer exchange: up to S_PEERS_REPLY random live peers. */
    ns_peers_t reply;
    memset(&reply, 0, sizeof reply);
    uint32_t start = p->n_peers ? ns_rand_below(p->n_peers) : 0;
    for (uint32_t k = 0; k < p->n_peers && reply.n < S_PEERS_REPLY; k++) {
        const ns_peer_t *q = &p->peers[(start + k) % p->n_peers];
        if (q->state != NS_PEER_LIVE || q->held ||
            !ns_contact_dialable(q->endpoint) ||
            (q->hb && (q->hb->flags & NS_HB_LIGHT)) ||
            memcmp(q->id, env->sender, NS_ID_BYTES) == 0)
            continue; /* a light peer's endpoint dies with its command */
        memcpy(reply.peers[reply.n].id, q->id, NS_ID_BYTES);
        snprintf(reply.peers[reply.n].endpoint, NS_ENDPOINT_MAX, "%s",
                 q->endpoint);
        reply.n++;
    }
    if (ns_peers_encode(&reply, &p->body) == NS_OK &&
        ns_p2p_sign(p, NS_MSG_PEERS, p->body.data, p->body.len, &p->scratch,
                    NULL) == NS_OK)
        (void)s_reply(p, src, p->scratch.data, p->scratch.len);
    if (p->last_hb.len)
        (void)s_reply(p, src, p->last_hb.data, p->last_hb.len);
    /* And those of a few peers we hold: PEERS cannot name them (they
     * cannot be dialled), yet a requester that joins should know of the
     * providers among them before its auction closes. */
    uint32_t told = 0;
    for (uint32_t k = 0; k < p->n_peers && told < S_HELD_INTRO; k++) {
        const ns_peer_t *q = &p->peers[(start + k) % p->n_peers];
        if (q->state != NS_PEER_LIVE || !q->held || !q->hb_env ||
            memcmp(q->id, env->sender, NS_ID_BYTES) == 0)
            continue;
        if (s_reply(p, src, q->hb_env, q->hb_env_len) == NS_OK)
            told++;
    }
    return NS_OK;
}

static int s_on_peers(ns_p2p_t *p, const ns_envelope_t *env, const s_src_t *src)
{
    ns_peers_t *m = malloc(sizeof *m);
    if (!m)
        return NS_ERR_NOMEM;
    int rc = ns_peers_decode(env->body, env->body_len, m);
    /* Only the answer to our HELLO, over our DEALER to a peer that is
     * thereby reachable; its addresses are our choice (outbound), each
     * new key charged to that link's budget, and the unreachable ones
     * capped (ns_peers_add). */
    if (rc == NS_OK && (!s_from_sender_link(src, env->sender) || !src->peer))
        rc = NS_ERR_INVAL;
    for (uint32_t i = 0; rc == NS_OK && i < m->n; i++) {
        if (ns_peers_find(p, m->peers[i].id))
            continue;
        if (!ns_peers_admit_key(p, src, m->peers[i].id))
            break;
        ns_peers_add(p, m->peers[i].id, m->peers[i].endpoint, NS_PEER_FROM_OUT,
                     false, true);
    }
    free(m);
    return rc;
}

/* *relay: whether to gossip it on (only heartbeats of live peers). */
static int s_on_heartbeat(ns_p2p_t *p, const ns_envelope_t *env,
                          const s_src_t *src, bool *relay)
{
    *relay = false;
    /* Decode into the spare buffer (the previous heartbeat a peer gave
     * up), so the hot path does not allocate. */
    ns_heartbeat_t *hb = p->spare_hb ? p->spare_hb : malloc(sizeof *hb);
    p->spare_hb = NULL;
    if (!hb)
        return NS_ERR_NOMEM;
    int rc = ns_heartbeat_decode(env->body, env->body_len, hb);
    if (rc != NS_OK)
        goto out;
    if (sodium_memcmp(hb->network_id, p->network_id, NS_HASH_BYTES)) {
        rc = s_network_mismatch(p, src, env->sender, hb->network_id);
        goto out;
    }
    ns_peer_t *peer = ns_peers_find(p, env->sender);
    bool dialable = ns_contact_dialable(hb->endpoint);
    if (!dialable || (peer && peer->held)) {
        /* Behind a router: held when it comes over its own connection;
         * told by others, it cannot be dialled and is not added. An entry
         * we have keeps its endpoint. */
        if (!peer || !peer->held)
            peer = s_hold(p, src, env->sender, hb->endpoint);
        if (!peer && !dialable)
            peer = ns_peers_find(p, env->sender);
        /* Told by a reachable peer (the held peers it tells us with the
         * answer to our HELLO): an entry we do not dial, so that a
         * requester knows of the provider before its auction closes. */
        const ns_peer_t *via = peer ? NULL : ns_peers_of_src(p, src);
        if (!peer && !dialable && via && via->reachable &&
            ns_peers_admit_key(p, src, env->sender))
            peer = ns_peers_add_heard(p, env->sender, hb->endpoint);
    } else if (peer && strcmp(peer->endpoint, hb->endpoint) != 0) {
        ns_peer_origin origin = peer->fixed      ? NS_PEER_FROM_FIXED
                                : peer->outbound ? NS_PEER_FROM_OUT
                                                 : NS_PEER_FROM_IN;
        /* A free key cannot vouch for itself by moving. */
        bool bootstrap = peer->bootstrap;
        bool vouched = peer->vouched || peer->reachable;
        ns_peers_remove(p, peer, "new_endpoint");
        peer = ns_peers_add(p, env->sender, hb->endpoint, origin, bootstrap,
                            vouched);
    } else if (!peer && ns_peers_admit_key(p, src, env->sender)) {
        /* Told by a reachable peer: our choice to dial. Brought by a
         * stranger or by the key itself: it came to us. */
        const ns_peer_t *via = ns_peers_of_src(p, src);
        bool told = via && via->reachable;
        bool itself = src->rid && s_from_sender_link(src, env->sender);
        peer = ns_peers_add(p, env->sender, hb->endpoint,
                            told ? NS_PEER_FROM_OUT : NS_PEER_FROM_IN, false,
                            told || itself || ns_peers_staked(p, env->sender));
    }
    /* It sends us its heartbeats over its own connection, but it is no
     * reachable peer of ours (refused a slot, or its endpoint has not
     * answered yet), so ours do not go to it: answer with ours, at most
     * twice per our interval, or it would drop us. */
    if ((!peer || !peer->reachable) && src->rid && p->last_hb.len &&
        s_from_sender_link(src, env->sender)) {
        uint64_t now_ms = ns_mono_ms();
        if (now_ms - src->link->hb_answer_ms >= p->my_hb.interval_ms / 2) {
            src->link->hb_answer_ms = now_ms;
            (void)s_reply(p, src, p->last_hb.data, p->last_hb.len);
        }
    }
    if (!peer || env->timestamp_ms <= peer->last_hb_wall_ms)
        goto out; /* not admitted, or an older heartbeat arriving late */
    if (peer->state != NS_PEER_LIVE && peer->reachable) {
        char idtext[NS_ID_TEXT_LEN + 1];
        ns_id_text(idtext, env->sender);
        ns_info(NS_MOD_PEERS, "event=peer_live id=%s endpoint=%s", idtext,
                hb->endpoint);
    }
    /* Live only once reachable (ns_peers_reached makes it live then). */
    if (peer->reachable)
        peer->state = NS_PEER_LIVE;
    bool relay_news = peer->state == NS_PEER_LIVE && p->unreachable &&
                      (hb->flags & NS_HB_RELAY) &&
                      !(peer->hb && (peer->hb->flags & NS_HB_RELAY));
    /* Passed on only when it says something new: a sender that sends
     * each heartbeat to all its peers (NS_HB_DIRECT) needs no relays to
     * stay live, only its changes do. The first one we can pass on is
     * news too: peers learn of a node that just joined from the heartbeat
     * its first live peers relay. */
    bool news = !peer->hb_passed || !peer->hb || !(hb->flags & NS_HB_DIRECT) ||
                !s_heartbeat_same(peer->hb, hb);
    *relay = peer->state == NS_PEER_LIVE && news;
    if (*relay)
        peer->hb_passed = true;
    /* Propagation samples from live peers only: keys that answer nowhere
     * would make the figure theirs. */
    uint64_t now_us = ns_now_us();
    if (peer->state == NS_PEER_LIVE && hb->sent_us <= now_us &&
        now_us - hb->sent_us < UINT32_MAX)
        p->latency_us[p->latency_n++ % S_LATENCY_RING] =
            (uint32_t)(now_us - hb->sent_us);
    peer->last_hb_ms = ns_mono_ms();
    peer->last_hb_wall_ms = env->timestamp_ms;
    ns_heartbeat_t *old = peer->hb;
    peer->hb = hb;
    hb = old;
    if (peer->held && peer->state == NS_PEER_LIVE &&
        ns_p2p_env_bytes(env, &p->scratch) == NS_OK) {
        uint8_t *copy = realloc(peer->hb_env, p->scratch.len);
        if (copy) {
            memcpy(copy, p->scratch.data, p->scratch.len);
            peer->hb_env = copy;
            peer->hb_env_len = (uint32_t)p->scratch.len;
        }
    }
    /* A relay among our peers: our contact can name it at once (a light
     * peer announces its job as soon as it has a peer). */
    if (relay_news && ns_relay_update_contact(p) && p->running)
        ns_p2p_send_heartbeat(p);
out:
    if (p->spare_hb)
        free(hb);
    else
        p->spare_hb = hb;
    return rc;
}

static int s_on_pull(ns_p2p_t *p, const ns_envelope_t *env, const s_src_t *src)
{
    ns_pull_t pull;
    int rc = ns_pull_decode(env->body, env->body_len, &pull);
    if (rc != NS_OK)
        return rc;
    /* Over the sender's own link: its connection to us, or (when it
     * holds us because we cannot be dialled) our DEALER to it. */
    if (!s_from_sender_link(src, env->sender) || (!src->rid && !src->peer))
        return NS_ERR_INVAL;
    ns_gossip_answer_pull(p, &pull, src);
    return NS_OK;
}

/* IHAVE and IWANT: over the sender's own link, as a PULL. */
static int s_on_ihave(ns_p2p_t *p, const ns_envelope_t *env, const s_src_t *src,
                      bool want)
{
    ns_ids_t m;
    int rc = want ? ns_iwant_decode(env->body, env->body_len, &m)
                  : ns_ihave_decode(env->body, env->body_len, &m);
    if (rc != NS_OK)
        return rc;
    if (!s_from_sender_link(src, env->sender) || (!src->rid && !src->peer))
        return NS_ERR_INVAL;
    if (want)
        ns_gossip_on_iwant(p, &m, src);
    else
        ns_gossip_on_ihave(p, &m, src);
    return NS_OK;
}

static int s_on_mesh(ns_p2p_t *p, const ns_envelope_t *env, const s_src_t *src)
{
    bool graft;
    int rc = ns_mesh_decode(env->body, env->body_len, &graft);
    if (rc != NS_OK)
        return rc;
    if (!s_from_sender_link(src, env->sender) || (!src->rid && !src->peer))
        return NS_ERR_INVAL;
    ns_gossip_on_mesh(p, env->sender, graft);
    return NS_OK;
}

/* ---- ingest ------------------------------------------------------------- */

static int s_ingest(ns_p2p_t *p, s_src_t *src, const uint8_t *buf, size_t len)
{
    uint64_t now_ms = ns_now_ms();
    ns_envelope_t env;
    uint32_t stat_type = ns_tr_stat_type(buf, len);
    p->stats.rx_msgs++;
    p->stats.rx_bytes += len;
    p->stats.rx_type[stat_type]++;
    src->link->rx_msgs++;

    uint64_t now_us = ns_mono_us();
    if (!ns_link_allow(p->cfg, src->link, now_us)) {
        ns_p2p_drop(p, src->link, NS_ERR_RATE, NULL, "per-link limit");
        return NS_ERR_RATE;
    }
    /* Inbound links that are not live peers also share one bucket: a
     * flooder cannot buy a fresh burst with every new CURVE key. */
    if (src->rid) {
        ns_peer_t *known = ns_peers_find_curve(p, src->key);
        if ((!known || known->state != NS_PEER_LIVE) &&
            !ns_link_allow(p->cfg, &p->strangers, now_us)) {
            ns_p2p_drop(p, src->link, NS_ERR_RATE, NULL, "strangers limit");
            return NS_ERR_RATE;
        }
    }
    int rc = ns_envelope_decode(buf, len, &p->types, &env);
    if (rc != NS_OK) {
        ns_p2p_drop(p, src->link, rc, NULL, "envelope");
        return rc;
    }
    if (env.timestamp_ms + p->cfg->max_msg_age_ms < now_ms ||
        env.timestamp_ms > now_ms + p->cfg->max_msg_future_ms) {
        ns_p2p_drop(p, src->link, NS_ERR_STALE, env.sender, "timestamp");
        return NS_ERR_STALE;
    }
    if (ns_seen_has(&p->seen, env.id)) {
        p->stats.duplicates++; /* normal in gossip; cheap to drop */
        p->stats.dup_type[stat_type]++;
        return NS_ERR_REPLAY;
    }
    if (memcmp(env.sender, p->self_id, NS_ID_BYTES) == 0) {
        /* Our own id with an id we never produced: forged or replayed
         * from a previous run. */
        ns_p2p_drop(p, src->link, NS_ERR_SELF, env.sender, "own id");
        return NS_ERR_SELF;
    }
    if ((rc = ns_envelope_verify(&env)) != NS_OK) {
        ns_p2p_drop(p, src->link, rc, env.sender, ns_wire_type_name(env.type));
        return rc;
    }
    const ns_handler_t *h = &p->handlers[env.type];
    bool gossiped = env.type == NS_MSG_HEARTBEAT || h->gossiped;
    bool relay = gossiped;
    /* Remember the id before handling: a handler may forward or answer. */
    if ((rc = ns_seen_add_at(&p->seen, env.id, ns_mono_ms(),
                             gossiped ? env.timestamp_ms : 0,
                             gossiped ? buf : NULL, len)) != NS_OK)
        return rc;
    switch (env.type) {
    case NS_MSG_HELLO:
        rc = s_on_hello(p, &env, src);
        break;
    case NS_MSG_HEARTBEAT:
        rc = s_on_heartbeat(p, &env, src, &relay);
        break;
    case NS_MSG_PEERS:
        rc = s_on_peers(p, &env, src);
        break;
    case NS_MSG_PULL:
        rc = s_on_pull(p, &env, src);
        break;
    case NS_MSG_IHAVE:
    case NS_MSG_IWANT:
        rc = s_on_ihave(p, &env, src, env.type == NS_MSG_IWANT);
        break;
    case NS_MSG_MESH:
        rc = s_on_mesh(p, &env, src);
        break;
    case NS_MSG_RELAY:
        rc = ns_relay_on_msg(p, &env, src);
        break;
    default:
        rc = h->fn ? h->fn(h->user, &env, src) : NS_ERR_MSGTYPE;
        break;
    }
    if (rc != NS_OK) {
        if (rc != NS_ERR_NETWORK)
            ns_p2p_drop(p, src->link, rc, env.sender,
                        ns_wire_type_name(env.type));
        else {
            p->stats.dropped[-rc]++;
            p->stats.dropped_total++;
        }
        return rc;
    }
    p->stats.accepted++;
    if (gossiped) {
        /* A first delivery of valid gossip: the peer behind the link is
         * useful (the handler may have reordered the table). */
        ns_peer_t *from = src->key ? ns_peers_find_curve(p, src->key) : NULL;
        if (from)
            from->deliveries += 1.0;
    }
    if (relay)
        ns_gossip_forward(p, env.id, buf, len, env.sender, src->key);
    else if (gossiped)
        ns_seen_forget_msg(&p->seen, env.id); /* nor served to pulls */
    return NS_OK;
}

int ns_p2p_ingest(ns_p2p_t *p, const uint8_t link_key[32], const uint8_t *buf,
                  size_t len)
{
    s_src_t src = {ns_link_get(p, link_key, ns_mono_ms()),
                   link_key,
                   NULL,
                   0,
                   NULL,
                   NULL,
                   NULL,
                   NULL};
    return s_ingest(p, &src, buf, len);
}

int ns_p2p_ingest_src(ns_p2p_t *p, s_src_t *src, const uint8_t *buf, size_t len)
{
    return s_ingest(p, src, buf, len);
}

/* ---- receiving ------------------------------------------------------------
 */

static void s_drain_more(void *socket)
{
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, socket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return;
        }
        more = zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
}

/* One message from the ROUTER: [routing id][payload]. false when empty. */
static bool s_recv_router(ns_p2p_t *p)
{
    zmq_msg_t rid, payload;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, p->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return false;
    }
    if (!zmq_msg_more(&rid)) {
        zmq_msg_close(&rid);
        return true;
    }
    zmq_msg_init(&payload);
    if (zmq_msg_recv(&payload, p->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&payload);
        zmq_msg_close(&rid);
        return true;
    }
    uint8_t key[32] = {0};
    const char *user = zmq_msg_gets(&payload, "User-Id");
    if (!user || ns_unhex(key, sizeof key, user) != NS_OK)
        memset(key, 0, sizeof key);
    s_src_t src = {ns_link_get(p, key, ns_mono_ms()),
                   key,
                   zmq_msg_data(&rid),
                   zmq_msg_size(&rid),
                   zmq_msg_gets(&payload, "Peer-Address"),
                   NULL,
                   NULL,
                   NULL};
    if (!ns_tr_banned(p, key)) {
        ns_peers_note_conn(p, key, src.rid, src.rid_len, src.addr);
        if (src.rid_len <= S_RID_MAX) { /* where to answer this key */
            memcpy(src.link->rid, src.rid, src.rid_len);
            src.link->rid_len = (uint8_t)src.rid_len;
            src.link->rid_ms = ns_mono_ms();
        }
    }
    if (ns_tr_banned(p, key)) {
        /* Refused at the next handshake; until then, ignored. */
        if (zmq_msg_more(&payload))
            s_drain_more(p->router);
    } else if (zmq_msg_more(&payload)) {
        s_drain_more(p->router);
        p->stats.rx_msgs++;
        ns_p2p_drop(p, src.link, NS_ERR_TYPE, NULL, "multipart message");
    } else {
        s_ingest(p, &src, zmq_msg_data(&payload), zmq_msg_size(&payload));
    }
    zmq_msg_close(&payload);
    zmq_msg_close(&rid);
    return true;
}

/* One message from a DEALER. false when empty. */
static bool s_recv_dealer(ns_p2p_t *p, void *dealer)
{
    ns_peer_t *peer = NULL;
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (p->peers[i].dealer == dealer)
            peer = &p->peers[i];
    if (!peer)
        return false; /* removed while handling an earlier message */
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, dealer, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return false;
    }
    /* Something came back over our connection to its endpoint: the CURVE
     * handshake there proved the key. It may not get a slot. */
    if (!peer->reachable && !ns_peers_reached(p, peer)) {
        zmq_msg_close(&m);
        return false; /* removed: its socket is closed */
    }
    peer = NULL; /* the table may have been reordered */
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (p->peers[i].dealer == dealer)
            peer = &p->peers[i];
    uint8_t key[32];
    memcpy(key, peer->curve_pk, 32);
    s_src_t src = {&peer->link, key, NULL, 0, NULL, peer, NULL, NULL};
    if (zmq_msg_more(&m)) {
        s_drain_more(dealer);
        p->stats.rx_msgs++;
        ns_p2p_drop(p, src.link, NS_ERR_TYPE, NULL, "multipart message");
    } else {
        /* The handler may remove this peer; src.link then dangles, so
         * copy it out first and count on the copy. */
        ns_link_t link = peer->link;
        src.link = &link;
        s_ingest(p, &src, zmq_msg_data(&m), zmq_msg_size(&m));
        ns_peer_t *still = NULL;
        for (uint32_t i = 0; i < p->n_peers; i++)
            if (p->peers[i].dealer == dealer)
                still = &p->peers[i];
        if (still)
            still->link = link;
    }
    zmq_msg_close(&m);
    return true;
}

/* ---- on the loop ---------------------------------------------------------
 */

/* Bounded batches so one busy socket cannot starve the others. */
static void s_on_router(void *user, void *socket)
{
    (void)socket;
    for (int k = 0; k < S_ROUTER_BATCH && s_recv_router(user); k++)
        ;
}

void ns_p2p_on_dealer(void *user, void *dealer)
{
    for (int k = 0; k < S_DEALER_BATCH && s_recv_dealer(user, dealer); k++)
        ;
}

static void s_on_zap(void *user, void *socket)
{
    (void)socket;
    /* A connection's ACCEPTED event is posted before its ZAP request:
     * read it first, so that the connection is watched for a cut
     * (ns_tr_handle_monitor) before its handshake can finish and a frame
     * can arrive. */
    ns_tr_handle_monitor(user);
    ns_tr_handle_zap(user);
}

static void s_on_monitor(void *user, void *socket)
{
    (void)socket;
    ns_tr_handle_monitor(user);
}

ns_loop_t *ns_p2p_loop(ns_p2p_t *p)
{
    return p->loop;
}

static bool s_own_socket(const ns_p2p_t *p, const void *socket)
{
    if (socket == p->router || socket == p->zap)
        return true;
    for (uint32_t i = 0; i < p->n_peers; i++)
        if (p->peers[i].dealer == socket)
            return true;
    return false;
}

int ns_p2p_add_socket(ns_p2p_t *p, void *socket, ns_p2p_io_fn fn, void *user)
{
    /* held peers have no DEALER on the loop */
    uint32_t dealers = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        dealers += p->peers[i].dealer != NULL;
    uint32_t theirs = ns_loop_sockets(p->loop) - S_OWN_SOCKETS - dealers;
    if (theirs >= NS_P2P_MAX_SOCKETS)
        return NS_ERR_TOOBIG;
    return ns_loop_add_socket(p->loop, socket, fn, user);
}

int ns_p2p_remove_socket(ns_p2p_t *p, void *socket)
{
    if (s_own_socket(p, socket))
        return NS_ERR_NOTFOUND;
    return ns_loop_remove_socket(p->loop, socket);
}

static bool s_own_timer(const ns_p2p_t *p, uint32_t id)
{
    return id && (id == p->hb_timer || id == p->pull_timer ||
                  id == p->maint_timer || id == p->ihave_timer);
}

int ns_p2p_timer_start(ns_p2p_t *p, uint32_t interval_ms, bool repeat,
                       ns_p2p_timer_fn fn, void *user, uint32_t *id)
{
    uint32_t own = s_own_timer(p, p->hb_timer) + s_own_timer(p, p->pull_timer) +
                   s_own_timer(p, p->maint_timer) +
                   s_own_timer(p, p->ihave_timer);
    if (ns_loop_timers(p->loop) - own >= NS_P2P_MAX_TIMERS)
        return NS_ERR_TOOBIG;
    return ns_loop_timer_start(p->loop, interval_ms, repeat, fn, user, id);
}

int ns_p2p_add_timer(ns_p2p_t *p, uint32_t interval_ms, ns_p2p_timer_fn fn,
                     void *user)
{
    return ns_p2p_timer_start(p, interval_ms, true, fn, user, NULL);
}

int ns_p2p_timer_cancel(ns_p2p_t *p, uint32_t id)
{
    if (s_own_timer(p, id))
        return NS_ERR_NOTFOUND;
    return ns_loop_timer_cancel(p->loop, id);
}

int ns_p2p_timer_slack(ns_p2p_t *p, uint32_t id, uint32_t slack_ms)
{
    if (s_own_timer(p, id))
        return NS_ERR_NOTFOUND;
    return ns_loop_timer_slack(p->loop, id, slack_ms);
}

/* Time to our next heartbeat: the next multiple of the interval on the
 * wall clock, at least a quarter interval away. Nodes with the same
 * interval then send together, so a node's peers' heartbeats arrive in
 * one burst and it wakes once for them rather than once per peer (about
 * 40 % less idle CPU on 24 nodes, bench_idle). The interval is the one
 * our last heartbeat announced (s_hb_interval). */
static uint32_t s_hb_delay(const ns_p2p_t *p)
{
    uint32_t ivl = p->my_hb.interval_ms;
    uint32_t d = ivl - (uint32_t)(ns_now_ms() % ivl);
    return d < ivl / 4 ? d + ivl : d;
}

/* A one-shot timer that starts the next one, on the next multiple of
 * the interval (s_hb_delay). */
static void s_on_heartbeat_timer(void *user, uint64_t now_ms);

/* The next heartbeat, with a little slack: when a chore wakes us a few
 * milliseconds before it (clocks round differently), it runs in that
 * turn rather than in one of its own. */
static int s_start_heartbeat_timer(ns_p2p_t *p)
{
    int rc = ns_loop_timer_start(p->loop, s_hb_delay(p), false,
                                 s_on_heartbeat_timer, p, &p->hb_timer);
    if (rc == NS_OK)
        (void)ns_loop_timer_slack(p->loop, p->hb_timer,
                                  p->my_hb.interval_ms / 16);
    return rc;
}

static void s_on_pull_timer(void *user, uint64_t now_ms);
static void s_on_maintain_timer(void *user, uint64_t now_ms);

/* Pulls and table upkeep are chores: they run in the turns of the
 * heartbeat (or of traffic) rather than waking an idle node apart. Their
 * slack reaches back from their due time only, so they are rephased in
 * the first heartbeat turn (ns_loop_timers_rephase): they are then due at
 * or just after the later ones. */
static int s_start_chores(ns_p2p_t *p)
{
    int rc = ns_loop_timer_start(p->loop, p->cfg->pull_interval_ms, true,
                                 s_on_pull_timer, p, &p->pull_timer);
    if (rc == NS_OK)
        rc = ns_loop_timer_start(p->loop, S_MAINTAIN_MS, true,
                                 s_on_maintain_timer, p, &p->maint_timer);
    if (rc == NS_OK)
        (void)ns_loop_timer_slack(p->loop, p->pull_timer,
                                  p->cfg->pull_interval_ms / 2);
    if (rc == NS_OK)
        (void)ns_loop_timer_slack(p->loop, p->maint_timer, S_MAINTAIN_MS / 2);
    return rc;
}

static void s_on_heartbeat_timer(void *user, uint64_t now_ms)
{
    (void)now_ms;
    ns_p2p_t *p = user;
    ns_p2p_send_heartbeat(p);
    p->hb_timer = 0;
    if (s_start_heartbeat_timer(p) != NS_OK)
        ns_warn(NS_MOD_NET, "event=heartbeat_timer_failed");
    if (!p->chores_phased) {
        /* ours and the layers' (ledger sync, claims): started before
         * the first aligned heartbeat, they may fall due just before
         * its turns and wake the node apart */
        ns_loop_timers_rephase(p->loop);
        p->chores_phased = true;
    }
}

static void s_on_pull_timer(void *user, uint64_t now_ms)
{
    (void)now_ms;
    ns_gossip_send_pull(user);
}

static void s_on_maintain_timer(void *user, uint64_t now_ms)
{
    ns_p2p_t *p = user;
    ns_peers_maintain(p, now_ms);
    ns_seen_expire(&p->seen, now_ms, p->cfg->seen_ttl_ms, S_PULL_WINDOW_MS);
    ns_seen_expire(&p->asked, now_ms, S_IWANT_WAIT_MS, 0);
    ns_gossip_mesh_fill(p);
    ns_tr_monitor_tick(p);
}

static void s_cancel_own_timers(ns_p2p_t *p)
{
    uint32_t *ids[] = {&p->hb_timer, &p->pull_timer, &p->maint_timer,
                       &p->ihave_timer};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (*ids[i])
            (void)ns_loop_timer_cancel(p->loop, *ids[i]);
        *ids[i] = 0;
    }
}

int ns_p2p_run(ns_p2p_t *p, volatile sig_atomic_t *stop)
{
    if (p->running)
        return NS_ERR_STATE;
    p->running = true;
    /* A first heartbeat at once, so the HELLOs to the bootstrap peers carry
     * it and they see us live without waiting a whole interval; later ones
     * on multiples of the interval (s_hb_delay). */
    ns_p2p_send_heartbeat(p);
    p->chores_phased = false;
    int rc = s_start_heartbeat_timer(p);
    if (rc == NS_OK)
        rc = s_start_chores(p);
    ns_peers_maintain(p, ns_mono_ms()); /* dial bootstrap peers */
    if (rc == NS_OK)
        rc = ns_loop_run(p->loop, stop);
    s_cancel_own_timers(p);
    p->running = false;
    return rc;
}

/* ---- documents for the control socket ---------------------------------- */

static void s_kv_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
    ns_mp_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

static void s_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    ns_mp_str(pk, k);
    ns_mp_str(pk, v);
}

void ns_p2p_pack_status(const ns_p2p_t *p, msgpack_packer *pk, uint32_t n_extra)
{
    char idtext[NS_ID_TEXT_LEN + 1], net[2 * NS_HASH_BYTES + 1];
    ns_id_text(idtext, p->self_id);
    ns_hex(net, p->network_id, NS_HASH_BYTES);
    msgpack_pack_map(pk, 13 + n_extra);
    s_kv_str(pk, "id", idtext);
    s_kv_str(pk, "address", p->address);
    /* Behind a router: whether peers can dial us, and what we tell them
     * (the endpoint, "relay:ID@endpoint", or "" when we only dial out). */
    ns_mp_str(pk, "reachable");
    msgpack_pack_uint8(pk, !p->unreachable);
    s_kv_str(pk, "contact", p->contact);
    s_kv_str(pk, "endpoint", p->endpoint);
    s_kv_str(pk, "network", p->network_name);
    s_kv_str(pk, "network_id", net);
    s_kv_str(pk, "version", NS_VERSION_STRING);
    s_kv_u64(pk, "uptime_ms", ns_mono_ms() - p->start_ms);
    s_kv_u64(pk, "peers", ns_p2p_live_peers(p));
    s_kv_u64(pk, "peers_connecting", p->n_peers - ns_p2p_live_peers(p));

    ns_mp_str(pk, "messages");
    msgpack_pack_map(pk, 31);
    s_kv_u64(pk, "rx", p->stats.rx_msgs);
    s_kv_u64(pk, "rx_bytes", p->stats.rx_bytes);
    s_kv_u64(pk, "tx", p->stats.tx_msgs);
    s_kv_u64(pk, "tx_bytes", p->stats.tx_bytes);
    s_kv_u64(pk, "accepted", p->stats.accepted);
    s_kv_u64(pk, "duplicates", p->stats.duplicates);
    s_kv_u64(pk, "forwarded", p->stats.forwarded);
    s_kv_u64(pk, "send_failed", p->stats.send_failed);
    s_kv_u64(pk, "peers_added", p->stats.peers_added);
    s_kv_u64(pk, "peers_expired", p->stats.peers_expired);
    s_kv_u64(pk, "peer_table_full", p->stats.table_full);
    s_kv_u64(pk, "new_keys_limited", p->stats.newkey_limited);
    s_kv_u64(pk, "peers_evicted", p->stats.peers_evicted);
    s_kv_u64(pk, "relayed", p->stats.relayed);
    s_kv_u64(pk, "relayed_bytes", p->stats.relayed_bytes);
    s_kv_u64(pk, "relay_refused", p->stats.relay_refused);
    s_kv_u64(pk, "via_relay", p->stats.via_relay);
    s_kv_u64(pk, "links_cut", p->stats.links_cut);
    s_kv_u64(pk, "seen_cache", p->seen.count);
    s_kv_u64(pk, "seen_evicted", p->seen.evicted);
    s_kv_u64(pk, "seen_cap", p->seen.cap);
    s_kv_u64(pk, "ihave_sent", p->stats.ihave_sent);
    s_kv_u64(pk, "ihave_ids_sent", p->stats.ihave_ids_sent);
    s_kv_u64(pk, "ihave_rx", p->stats.ihave_rx);
    s_kv_u64(pk, "iwant_sent", p->stats.iwant_sent);
    s_kv_u64(pk, "iwant_ids_sent", p->stats.iwant_ids_sent);
    s_kv_u64(pk, "iwant_served", p->stats.iwant_served);
    s_kv_u64(pk, "pull_served", p->stats.pull_served);
    s_kv_u64(pk, "answers_limited", p->stats.answers_limited);
    /* signatures checked by this process (envelopes, entries, bids...) */
    s_kv_u64(pk, "sig_verifies", ns_sig_verifies());
    /* by envelope type number (wire.h and the layers' headers; the last
     * one counts the types beyond and unreadable frames): [received,
     * of them duplicates, sent], types with any traffic only */
    uint32_t n_types = 0;
    for (uint32_t t = 0; t < S_STAT_TYPES; t++)
        n_types += p->stats.rx_type[t] || p->stats.tx_type[t];
    ns_mp_str(pk, "by_type");
    msgpack_pack_map(pk, n_types);
    for (uint32_t t = 0; t < S_STAT_TYPES; t++) {
        if (!p->stats.rx_type[t] && !p->stats.tx_type[t])
            continue;
        char key[8];
        snprintf(key, sizeof key, "%u", t);
        ns_mp_str(pk, key);
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint64(pk, p->stats.rx_type[t]);
        msgpack_pack_uint64(pk, p->stats.dup_type[t]);
        msgpack_pack_uint64(pk, p->stats.tx_type[t]);
    }

    /* Every drop reason, zero or not, so scripts can rely on the keys. */
    static const int reasons[] = {
        NS_ERR_TOOBIG,  NS_ERR_TRUNCATED, NS_ERR_TYPE,   NS_ERR_VERSION,
        NS_ERR_MSGTYPE, NS_ERR_SIG,       NS_ERR_STALE,  NS_ERR_NETWORK,
        NS_ERR_RATE,    NS_ERR_TRAILING,  NS_ERR_INVAL,  NS_ERR_ADDR,
        NS_ERR_SELF,    NS_ERR_NOMEM,     NS_ERR_REPLAY,
    };
    size_t nr = sizeof reasons / sizeof reasons[0];
    /* and "other": what the layers above refused for reasons of their
     * own, so that the named reasons always add up to the total */
    uint64_t named = 0;
    for (size_t i = 0; i < nr; i++)
        named += p->stats.dropped[-reasons[i]];
    ns_mp_str(pk, "dropped");
    msgpack_pack_map(pk, (uint32_t)nr + 2);
    s_kv_u64(pk, "total", p->stats.dropped_total);
    for (size_t i = 0; i < nr; i++)
        s_kv_u64(pk, ns_errname(reasons[i]), p->stats.dropped[-reasons[i]]);
    s_kv_u64(pk, "other",
             p->stats.dropped_total > named ? p->stats.dropped_total - named
                                            : 0);
}

void ns_p2p_pack_peers(const ns_p2p_t *p, msgpack_packer *pk)
{
    uint64_t now = ns_mono_ms();
    msgpack_pack_array(pk, ns_p2p_live_peers(p));
    for (uint32_t i = 0; i < p->n_peers; i++) {
        const ns_peer_t *peer = &p->peers[i];
        if (peer->state != NS_PEER_LIVE)
            continue;
        const ns_heartbeat_t *hb = peer->hb;
        char idtext[NS_ID_TEXT_LEN + 1];
        ns_id_text(idtext, peer->id);
        msgpack_pack_map(pk, 17);
        s_kv_str(pk, "id", idtext);
        /* No devices: a requester (a light peer running `submit`, or a
         * node offering nothing); its price is no offer. */
        s_kv_str(pk, "role", hb->n_devices ? "provider" : "requester");
        s_kv_str(pk, "endpoint", peer->endpoint);
        s_kv_str(pk, "direction", peer->outbound ? "out" : "in");
        s_kv_u64(pk, "fixed", peer->fixed);
        /* held: it cannot be dialled; we reach it over its connection */
        s_kv_u64(pk, "held", peer->held);
        ns_mp_str(pk, "score");
        msgpack_pack_double(pk, ns_peer_score(p, peer, now));
        s_kv_u64(pk, "ledger_stake", peer->stake);
        s_kv_u64(pk, "last_seen_ms", now - peer->last_hb_ms);
        /* its heartbeat interval (it grows with its peers): it is dropped
         * after three of them without one */
        s_kv_u64(pk, "interval_ms", hb->interval_ms);
        s_kv_str(pk, "version", hb->version);
        s_kv_str(pk, "region", hb->region);
        s_kv_u64(pk, "price", hb->price);
        ns_mp_str(pk, "stake");
        ns_mp_credits(pk, hb->stake);
        s_kv_u64(pk, "free_slots", hb->free_slots);
        s_kv_u64(pk, "ledger_entries", hb->ledger_entries);
        ns_mp_str(pk, "devices");
        msgpack_pack_array(pk, hb->n_devices);
        for (uint32_t d = 0; d < hb->n_devices; d++) {
            const ns_devinfo_t *dev = &hb->devices[d];
            msgpack_pack_map(pk, 9);
            s_kv_str(pk, "name", dev->name);
            s_kv_str(pk, "vendor", dev->vendor);
            s_kv_str(pk, "type", ns_devtype_name(dev->type));
            s_kv_u64(pk, "global_mem_bytes", dev->global_mem_bytes);
            s_kv_u64(pk, "compute_units", dev->compute_units);
            s_kv_u64(pk, "clock_mhz", dev->clock_mhz);
            s_kv_str(pk, "opencl_c_version", dev->cl_c_version);
            ns_mp_str(pk, "gflops");
            msgpack_pack_double(pk, dev->gflops);
            ns_mp_str(pk, "gbps");
            msgpack_pack_double(pk, dev->gbps);
        }
    }
}

void ns_p2p_pack_latency(ns_p2p_t *p, msgpack_packer *pk)
{
    uint32_t n = p->latency_n < S_LATENCY_RING ? p->latency_n : S_LATENCY_RING;
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint32(pk, p->latency_us[i]);
    p->latency_n = 0;
}
