/* test_p2p.c - the seen cache against a reference model, the token bucket,
 * and every verdict of the ingest pipeline on a real node (bound ROUTER on
 * loopback, real signatures). */
#include "check.h"
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ---- seen cache -------------------------------------------------------- */

TEST(seen_matches_reference)
{
    enum { CAP = 64, IDS = 300, OPS = 20000 };
    ns_seen_t s;
    CHECK_RC(ns_seen_init(&s, CAP), NS_OK);
    /* Reference: ids in arrival order (the ring's FIFO), capped at CAP. */
    ns_hash_t ids[IDS];
    for (int i = 0; i < IDS; i++)
        randombytes_buf(ids[i], NS_HASH_BYTES);
    int fifo[CAP], head = 0, count = 0;
    uint64_t now = 1000;
    int mismatches = 0;
    for (int op = 0; op < OPS; op++) {
        int k = (int)randombytes_uniform(IDS);
        bool in_ref = false;
        for (int j = 0; j < count; j++)
            if (fifo[(head + j) % CAP] == k)
                in_ref = true;
        if (ns_seen_has(&s, ids[k]) != in_ref)
            mismatches++;
        int rc = ns_seen_add(&s, ids[k], now++, NULL, 0);
        if ((rc == NS_ERR_REPLAY) != in_ref)
            mismatches++;
        if (!in_ref) {
            if (count == CAP) {
                head = (head + 1) % CAP;
                count--;
            }
            fifo[(head + count) % CAP] = k;
            count++;
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(s.count, CAP);
    CHECK(s.evicted > 0);
    ns_seen_release(&s);
}

TEST(seen_expiry_and_stored_bytes)
{
    ns_seen_t s;
    CHECK_RC(ns_seen_init(&s, 16), NS_OK);
    ns_hash_t a, b, c;
    randombytes_buf(a, sizeof a);
    randombytes_buf(b, sizeof b);
    randombytes_buf(c, sizeof c);
    CHECK_RC(ns_seen_add(&s, a, 100, (const uint8_t *)"aa", 2), NS_OK);
    CHECK_RC(ns_seen_add(&s, b, 200, (const uint8_t *)"bbb", 3), NS_OK);
    CHECK_RC(ns_seen_add(&s, c, 300, NULL, 0), NS_OK);
    /* bytes older than 150 ms dropped, ids kept for 1000 ms */
    ns_seen_expire(&s, 320, 1000, 150);
    CHECK(ns_seen_has(&s, a));
    CHECK(s.ring[s.head].msg == NULL);
    CHECK(s.ring[(s.head + 1) % s.cap].msg != NULL);
    ns_seen_expire(&s, 1250, 1000, 150);
    CHECK(!ns_seen_has(&s, a));
    CHECK(!ns_seen_has(&s, b));
    CHECK(ns_seen_has(&s, c));
    CHECK_EQ_INT(s.count, 1);
    ns_seen_release(&s);
}

TEST(token_bucket)
{
    ns_config_t cfg;
    ns_config_defaults(&cfg);
    cfg.rate_burst = 5;
    cfg.rate_msgs_per_s = 10;
    ns_link_t link;
    memset(&link, 0, sizeof link);
    link.tokens = cfg.rate_burst;
    int allowed = 0;
    for (int i = 0; i < 20; i++)
        allowed += ns_link_allow(&cfg, &link, 1000000);
    CHECK_EQ_INT(allowed, 5);
    /* 0.5 s later: 5 more tokens */
    allowed = 0;
    for (int i = 0; i < 20; i++)
        allowed += ns_link_allow(&cfg, &link, 1500000);
    CHECK_EQ_INT(allowed, 5);
}

/* ---- ingest on a real node ---------------------------------------------- */

typedef struct {
    ns_config_t cfg;
    ns_identity_t *me, *other;
    ns_p2p_t *p;
    ns_hash_t net;
    uint8_t link[32];
} s_fix_t;

static void s_setup(s_fix_t *f, uint32_t burst)
{
    memset(f, 0, sizeof *f);
    ns_config_defaults(&f->cfg);
    snprintf(f->cfg.listen, sizeof f->cfg.listen, "tcp://127.0.0.1:0");
    f->cfg.rate_burst = burst;
    f->cfg.rate_msgs_per_s = 1;
    f->me = ns_identity_generate();
    f->other = ns_identity_generate();
    ns_hash(f->net, "test-genesis", 12);
    ns_p2p_opts_t o = {&f->cfg, f->me, {0}, "test", NULL, 0, false};
    memcpy(o.network_id, f->net, NS_HASH_BYTES);
    int err = 0;
    f->p = ns_p2p_new(&o, &err);
    CHECK(f->p != NULL);
    CHECK(ns_id_curve_pk(ns_identity_pk(f->other), f->link) == NS_OK);
}

static void s_teardown(s_fix_t *f)
{
    ns_p2p_destroy(&f->p);
    CHECK(f->p == NULL);
    ns_p2p_destroy(&f->p); /* idempotent */
    ns_identity_destroy(&f->me);
    ns_identity_destroy(&f->other);
}

/* A signed heartbeat from `who` for network `net`, sent at ts. */
static void s_heartbeat(ns_buf_t *out, const ns_identity_t *who,
                        const ns_hash_t net, uint64_t ts)
{
    ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, net, NS_HASH_BYTES);
    snprintf(hb.endpoint, sizeof hb.endpoint, "tcp://127.0.0.1:9");
    snprintf(hb.version, sizeof hb.version, "test");
    snprintf(hb.region, sizeof hb.region, "eu");
    hb.interval_ms = 1000;
    hb.sent_us = ns_now_us();
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_heartbeat_encode(&hb, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(who, NS_MSG_HEARTBEAT, ts, body.data, body.len,
                                out, NULL),
             NS_OK);
    ns_buf_release(&body);
}

TEST(ingest_verdicts)
{
    s_fix_t f;
    s_setup(&f, 1000);
    if (!f.p)
        return;
    ns_buf_t m;
    ns_buf_init(&m);
    uint64_t now = ns_now_ms();

    /* a valid heartbeat: accepted, the sender enters the table, but is
     * not live while its endpoint has not answered (nothing at :9) */
    s_heartbeat(&m, f.other, f.net, now);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->n_peers, 1);
    CHECK(!f.p->peers[0].reachable);
    CHECK_EQ_INT(ns_p2p_live_peers(f.p), 0);
    /* the same bytes again: a duplicate */
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_REPLAY);

    /* a flipped signature byte */
    s_heartbeat(&m, f.other, f.net, now + 1);
    m.data[m.len - 1] ^= 1;
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_SIG);
    /* ...does not poison the cache: the true message still gets in */
    m.data[m.len - 1] ^= 1;
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);

    /* old and future timestamps */
    s_heartbeat(&m, f.other, f.net, now - f.cfg.max_msg_age_ms - 5000);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_STALE);
    s_heartbeat(&m, f.other, f.net, now + f.cfg.max_msg_future_ms + 5000);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_STALE);

    /* another network */
    ns_hash_t other_net;
    ns_hash(other_net, "other", 5);
    s_heartbeat(&m, f.other, other_net, now + 2);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_NETWORK);
    CHECK_EQ_INT(f.p->n_peers, 0); /* and it was dropped */

    /* garbage, truncation, unknown type, unknown version */
    const uint8_t garbage[] = {0xc1, 0x00, 0xff};
    CHECK_RC(ns_p2p_ingest(f.p, f.link, garbage, sizeof garbage), NS_ERR_TYPE);
    s_heartbeat(&m, f.other, f.net, now + 3);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len / 2), NS_ERR_TRUNCATED);
    CHECK_RC(ns_envelope_encode(f.other, 200, now, (const uint8_t *)"x", 1, &m,
                                NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_MSGTYPE);
    m.data[1] = NS_WIRE_VERSION + 1; /* version byte after the array header */
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_VERSION);

    /* a message claiming to be from us */
    s_heartbeat(&m, f.me, f.net, now + 4);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_SELF);

    /* a HELLO that does not come from its sender's own connection */
    ns_hello_t hello;
    memset(&hello, 0, sizeof hello);
    memcpy(hello.network_id, f.net, NS_HASH_BYTES);
    snprintf(hello.endpoint, sizeof hello.endpoint, "tcp://127.0.0.1:9");
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_hello_encode(&hello, &body), NS_OK);
    ns_identity_t *third = ns_identity_generate();
    CHECK_RC(ns_envelope_encode(third, NS_MSG_HELLO, now, body.data, body.len,
                                &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    ns_identity_destroy(&third);
    ns_buf_release(&body);

    /* the counters say the same */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_p2p_pack_status(f.p, &pk, 0);
    char *json = NULL;
    CHECK_RC(ns_mp_to_json(sb.data, sb.size, &json, 0), NS_OK);
    if (json) {
        CHECK_CONTAINS(json, "\"bad_sig\":1");
        CHECK_CONTAINS(json, "\"stale\":2");
        CHECK_CONTAINS(json, "\"wrong_network\":1");
        CHECK_CONTAINS(json, "\"unknown_type\":1");
        CHECK_CONTAINS(json, "\"bad_version\":1");
        CHECK_CONTAINS(json, "\"truncated\":1");
        CHECK_CONTAINS(json, "\"duplicates\":1");
        CHECK_CONTAINS(json, "\"accepted\":2");
    }
    free(json);
    msgpack_sbuffer_destroy(&sb);
    ns_buf_release(&m);
    s_teardown(&f);
}

TEST(ingest_rate_limit)
{
    s_fix_t f;
    s_setup(&f, 10);
    if (!f.p)
        return;
    const uint8_t junk[] = {0x01, 0x02};
    int limited = 0;
    for (int i = 0; i < 100; i++)
        limited += ns_p2p_ingest(f.p, f.link, junk, sizeof junk) == NS_ERR_RATE;
    /* burst of 10 then about 1 per second: at least 85 refused */
    CHECK(limited >= 85);
    /* another link has its own bucket */
    uint8_t other_link[32];
    randombytes_buf(other_link, sizeof other_link);
    CHECK(ns_p2p_ingest(f.p, other_link, junk, sizeof junk) != NS_ERR_RATE);
    s_teardown(&f);
}

TEST(bind_in_use)
{
    s_fix_t f;
    s_setup(&f, 100);
    if (!f.p)
        return;
    ns_config_t cfg = f.cfg;
    snprintf(cfg.listen, sizeof cfg.listen, "%s", ns_p2p_endpoint(f.p));
    ns_p2p_opts_t o = {&cfg, f.other, {0}, "test", NULL, 0, false};
    int err = 0;
    ns_p2p_t *second = ns_p2p_new(&o, &err);
    CHECK(second == NULL);
    CHECK_RC(err, NS_ERR_ADDRINUSE);
    ns_p2p_destroy(&second);
    s_teardown(&f);
}

/* ---- the p2p on its loop ------------------------------------------------ */

static void s_on_any_socket(void *user, void *socket)
{
    (void)user;
    (void)socket;
}

static void s_on_stop_p2p(void *user, uint64_t now)
{
    (void)now;
    ns_loop_stop(ns_p2p_loop(user));
}

static void s_on_count(void *user, uint64_t now)
{
    (void)now;
    (*(int *)user)++;
}

static int s_on_msg(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)user;
    (void)env;
    (void)src;
    return NS_OK;
}

TEST(loop_sockets_timers_handlers)
{
    s_fix_t f;
    s_setup(&f, 100);
    if (!f.p)
        return;
    /* the upper layers' share of sockets, and the p2p's own are not
     * theirs to remove */
    void *ctx = ns_p2p_zmq_context(f.p);
    void *socks[NS_P2P_MAX_SOCKETS + 1];
    for (int i = 0; i <= NS_P2P_MAX_SOCKETS; i++) {
        socks[i] = zmq_socket(ctx, ZMQ_PAIR);
        int linger = 0;
        zmq_setsockopt(socks[i], ZMQ_LINGER, &linger, sizeof linger);
    }
    for (int i = 0; i < NS_P2P_MAX_SOCKETS; i++)
        CHECK_RC(ns_p2p_add_socket(f.p, socks[i], s_on_any_socket, NULL),
                 NS_OK);
    CHECK_RC(ns_p2p_add_socket(f.p, socks[NS_P2P_MAX_SOCKETS], s_on_any_socket,
                               NULL),
             NS_ERR_TOOBIG);
    CHECK_RC(ns_p2p_remove_socket(f.p, socks[0]), NS_OK);
    CHECK_RC(ns_p2p_remove_socket(f.p, socks[0]), NS_ERR_NOTFOUND);
    CHECK_RC(ns_p2p_add_socket(f.p, socks[NS_P2P_MAX_SOCKETS], s_on_any_socket,
                               NULL),
             NS_OK);
    CHECK_RC(ns_p2p_remove_socket(f.p, f.p->router), NS_ERR_NOTFOUND);
    CHECK_RC(ns_p2p_remove_socket(f.p, f.p->zap), NS_ERR_NOTFOUND);
    for (int i = 1; i <= NS_P2P_MAX_SOCKETS; i++)
        CHECK_RC(ns_p2p_remove_socket(f.p, socks[i]), NS_OK);
    for (int i = 0; i <= NS_P2P_MAX_SOCKETS; i++)
        zmq_close(socks[i]);

    /* timers: the share, cancel, and a run that a timer stops */
    uint32_t ids[NS_P2P_MAX_TIMERS];
    int count = 0;
    for (int i = 0; i < NS_P2P_MAX_TIMERS; i++)
        CHECK_RC(
            ns_p2p_timer_start(f.p, 100000, true, s_on_count, &count, &ids[i]),
            NS_OK);
    CHECK_RC(ns_p2p_add_timer(f.p, 100000, s_on_count, &count), NS_ERR_TOOBIG);
    for (int i = 0; i < NS_P2P_MAX_TIMERS; i++)
        CHECK_RC(ns_p2p_timer_cancel(f.p, ids[i]), NS_OK);
    CHECK_RC(ns_p2p_timer_cancel(f.p, ids[0]), NS_ERR_NOTFOUND);
    CHECK_RC(ns_p2p_add_timer(f.p, 0, s_on_count, &count), NS_ERR_INVAL);
    CHECK_RC(ns_p2p_add_timer(f.p, 5, s_on_count, &count), NS_OK);
    CHECK_RC(ns_p2p_timer_start(f.p, 60, false, s_on_stop_p2p, f.p, NULL),
             NS_OK);
    volatile sig_atomic_t stop = 0;
    CHECK_RC(ns_p2p_run(f.p, &stop), NS_OK);
    CHECK(count >= 3);
    /* the p2p's own timers are gone after the run: only ours is left */
    CHECK_EQ_INT(ns_loop_timers(ns_p2p_loop(f.p)), 1);

    /* handlers: a registered type is known, an unregistered one not */
    ns_buf_t m;
    ns_buf_init(&m);
    CHECK_RC(ns_p2p_register(f.p, 150, false, s_on_msg, NULL), NS_OK);
    CHECK_RC(ns_p2p_register(f.p, 150, false, s_on_msg, NULL), NS_ERR_EXISTS);
    CHECK_RC(ns_p2p_register(f.p, NS_MSG_PULL, false, s_on_msg, NULL),
             NS_ERR_EXISTS);
    CHECK_RC(ns_envelope_encode(f.other, 150, ns_now_ms(), (const uint8_t *)"x",
                                1, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_RC(ns_p2p_unregister(f.p, 150), NS_OK);
    CHECK_RC(ns_p2p_unregister(f.p, 150), NS_ERR_NOTFOUND);
    CHECK_RC(ns_p2p_unregister(f.p, NS_MSG_HELLO), NS_ERR_NOTFOUND);
    CHECK_RC(ns_envelope_encode(f.other, 150, ns_now_ms() + 1,
                                (const uint8_t *)"x", 1, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_MSGTYPE);
    CHECK_RC(ns_p2p_register(f.p, 150, true, s_on_msg, NULL), NS_OK);
    ns_buf_release(&m);
    s_teardown(&f);
}

/* ---- replies report their send ------------------------------------------ */

#define S_REPLY_BODY (200 * 1024) /* bytes: a few fill the socket buffers */

typedef struct {
    ns_p2p_t *p;
    uint8_t *body;
    int first_rc, last_rc; /* first and last verdicts of ns_p2p_reply */
    int sent;              /* replies that returned NS_OK */
    bool timed_out;
} s_replier_t;

/* Reply until a send fails: the client never reads, so the queue fills. */
static int s_on_ask(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)env;
    s_replier_t *r = user;
    for (int i = 0; i < 10000; i++) {
        r->last_rc = ns_p2p_reply(r->p, src, 151, r->body, S_REPLY_BODY);
        if (i == 0)
            r->first_rc = r->last_rc;
        if (r->last_rc != NS_OK)
            break;
        r->sent++;
    }
    ns_loop_stop(ns_p2p_loop(r->p));
    return NS_OK;
}

static void s_on_reply_guard(void *user, uint64_t now)
{
    (void)now;
    s_replier_t *r = user;
    r->timed_out = true;
    ns_loop_stop(ns_p2p_loop(r->p));
}

/* A client of the node's ROUTER with other's keys, reading at most one
 * message into its own queue. */
static void *s_client(void *ctx, const s_fix_t *f)
{
    uint8_t pub[32], server[32];
    uint8_t *sec = sodium_malloc(32);
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0, hwm = 1;
    if (!sec || !s || ns_identity_curve(f->other, pub, sec) != NS_OK ||
        ns_id_curve_pk(ns_identity_pk(f->me), server) != NS_OK) {
        if (s)
            zmq_close(s);
        sodium_free(sec);
        return NULL;
    }
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server, 32);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 32);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 32);
    sodium_free(sec);
    if (zmq_connect(s, ns_p2p_endpoint(f->p)) != 0) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* A heartbeat from `who` advertising endpoint with the given interval. */
static void s_heartbeat_ep(ns_buf_t *out, const ns_identity_t *who,
                           const ns_hash_t net, uint64_t ts,
                           uint32_t interval_ms, const char *endpoint)
{
    ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, net, NS_HASH_BYTES);
    snprintf(hb.endpoint, sizeof hb.endpoint, "%s", endpoint);
    snprintf(hb.version, sizeof hb.version, "test");
    hb.interval_ms = interval_ms;
    hb.sent_us = ns_now_us();
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_heartbeat_encode(&hb, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(who, NS_MSG_HEARTBEAT, ts, body.data, body.len,
                                out, NULL),
             NS_OK);
    ns_buf_release(&body);
}

/* The same at tcp://127.0.0.1:9 (nothing listens there). */
static void s_heartbeat_ivl(ns_buf_t *out, const ns_identity_t *who,
                            const ns_hash_t net, uint64_t ts,
                            uint32_t interval_ms)
{
    s_heartbeat_ep(out, who, net, ts, interval_ms, "tcp://127.0.0.1:9");
}

static uint64_t s_stake_every_other(void *u, const uint8_t id[NS_ID_BYTES])
{
    (void)u;
    return id[0] & 1 ? 1000 : 0;
}

/* Keys that cost nothing cannot fill the table: an interval out of
 * bounds is refused, one link brings at most S_NEWKEY_BURST unknown keys
 * at once, unreachable entries are capped per direction, none of them is
 * live; staked keys are not charged to the link. */
TEST(sybil_admission)
{
    s_fix_t f;
    s_setup(&f, 100000);
    if (!f.p)
        return;
    ns_buf_t m;
    ns_buf_init(&m);
    uint64_t now = ns_now_ms();

    s_heartbeat_ivl(&m, f.other, f.net, now, NS_MAX_HB_INTERVAL_MS + 1);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    s_heartbeat_ivl(&m, f.other, f.net, now + 1, NS_MIN_HB_INTERVAL_MS - 1);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    CHECK_EQ_INT(f.p->n_peers, 0);

    /* 200 fresh keys over one link, an hour apart: a handful enter */
    for (int i = 0; i < 200; i++) {
        ns_identity_t *k = ns_identity_generate();
        s_heartbeat_ivl(&m, k, f.net, now, NS_MAX_HB_INTERVAL_MS);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
        ns_identity_destroy(&k);
    }
    CHECK(f.p->n_peers <= (uint32_t)S_NEWKEY_BURST + 1);
    CHECK(f.p->n_peers <= S_PENDING_MAX);
    CHECK(f.p->stats.newkey_limited >= 200 - (uint32_t)S_NEWKEY_BURST - 1);
    CHECK_EQ_INT(ns_p2p_live_peers(f.p), 0);
    uint8_t any[NS_ID_BYTES];
    CHECK_RC(ns_p2p_pick_peer(f.p, NULL, NULL, any), NS_ERR_NOTFOUND);

    /* another link: its own budget, but the same cap on unreachable
     * entries of that direction */
    uint8_t link2[32];
    memset(link2, 0x77, sizeof link2);
    for (int i = 0; i < 40; i++) {
        ns_identity_t *k = ns_identity_generate();
        s_heartbeat_ivl(&m, k, f.net, now, 1000);
        CHECK_RC(ns_p2p_ingest(f.p, link2, m.data, m.len), NS_OK);
        ns_identity_destroy(&k);
    }
    CHECK_EQ_INT(f.p->n_peers, S_PENDING_MAX);

    /* a free key does not vouch for itself by moving its endpoint */
    ns_peer_t *first = &f.p->peers[0];
    CHECK(!first->vouched);
    ns_identity_t *mover = ns_identity_generate();
    while (f.p->n_peers)
        ns_peers_remove(f.p, &f.p->peers[f.p->n_peers - 1], "test");
    ns_link_t *l3 = ns_link_get(f.p,
                                (const uint8_t *)"0123456789abcdef"
                                                 "0123456789abcdef",
                                ns_mono_ms());
    CHECK(l3 != NULL);
    s_heartbeat_ep(&m, mover, f.net, now, 1000, "tcp://127.0.0.1:9");
    CHECK_RC(ns_p2p_ingest(f.p, l3->key, m.data, m.len), NS_OK);
    s_heartbeat_ep(&m, mover, f.net, now + 1, 1000, "tcp://127.0.0.1:8");
    CHECK_RC(ns_p2p_ingest(f.p, l3->key, m.data, m.len), NS_OK);
    ns_peer_t *moved = ns_peers_find(f.p, ns_identity_pk(mover));
    CHECK(moved && !moved->vouched &&
          strcmp(moved->endpoint, "tcp://127.0.0.1:8") == 0);
    ns_identity_destroy(&mover);

    /* staked keys are not charged to the (spent) link budget */
    while (f.p->n_peers)
        ns_peers_remove(f.p, &f.p->peers[f.p->n_peers - 1], "test");
    ns_p2p_set_stake_fn(f.p, s_stake_every_other, NULL);
    uint32_t staked_in = 0;
    for (int i = 0; i < 40 && staked_in < 4; i++) {
        ns_identity_t *k = ns_identity_generate();
        s_heartbeat_ivl(&m, k, f.net, now, 1000);
        uint32_t before = f.p->n_peers;
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
        if (ns_identity_pk(k)[0] & 1) {
            CHECK_EQ_INT(f.p->n_peers, before + 1);
            staked_in++;
        }
        ns_identity_destroy(&k);
    }
    CHECK_EQ_INT(staked_in, 4);
    ns_buf_release(&m);
    s_teardown(&f);
}

/* Scores: long-lived, useful and staked peers score higher; invalid
 * messages sink a peer below zero. */
TEST(peer_score)
{
    s_fix_t f;
    s_setup(&f, 100);
    if (!f.p)
        return;
    ns_peer_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    uint64_t now = 1000000;
    a.reachable = b.reachable = true;
    a.reachable_ms = b.reachable_ms = now;
    CHECK(ns_peer_score(f.p, &a, now) == 0);
    a.reachable_ms = now - 50000; /* 50 s */
    CHECK(ns_peer_score(f.p, &a, now) > ns_peer_score(f.p, &b, now));
    b.stake = 1u << 15;
    CHECK(ns_peer_score(f.p, &b, now) > ns_peer_score(f.p, &a, now));
    a.deliveries = 1e9; /* capped */
    CHECK(ns_peer_score(f.p, &a, now) <= 20.0);
    a.faults = 6;
    CHECK(ns_peer_score(f.p, &a, now) < 0);
    s_teardown(&f);
}

static bool s_count_visit(void *u, const uint8_t id[NS_ID_BYTES],
                          const ns_heartbeat_t *hb)
{
    (void)id;
    (void)hb;
    (*(int *)u)++;
    return false;
}

static bool s_want_any(void *u, const uint8_t id[NS_ID_BYTES],
                       const ns_heartbeat_t *hb)
{
    (void)u;
    (void)id;
    (void)hb;
    return true;
}

/* pick_peer prefers peers scored >= 0 and shows each live peer to `want`
 * once (the market counts providers with it). */
TEST(pick_peer_scored)
{
    s_fix_t f;
    s_setup(&f, 1000);
    if (!f.p)
        return;
    ns_buf_t m;
    ns_buf_init(&m);
    ns_identity_t *k[2] = {ns_identity_generate(), ns_identity_generate()};
    for (int i = 0; i < 2; i++) {
        s_heartbeat_ivl(&m, k[i], f.net, ns_now_ms(), 1000);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    }
    CHECK_EQ_INT(f.p->n_peers, 2);
    for (uint32_t i = 0; i < f.p->n_peers; i++) { /* as if they answered */
        CHECK(ns_peers_reached(f.p, &f.p->peers[i]));
        CHECK(f.p->peers[i].state == NS_PEER_LIVE);
    }
    f.p->peers[0].faults = 10; /* forged messages: score < 0 */
    int visits = 0;
    uint8_t got[NS_ID_BYTES];
    CHECK_RC(ns_p2p_pick_peer(f.p, s_count_visit, &visits, got),
             NS_ERR_NOTFOUND);
    CHECK_EQ_INT(visits, 2);
    for (int t = 0; t < 20; t++) {
        CHECK_RC(ns_p2p_pick_peer(f.p, s_want_any, NULL, got), NS_OK);
        CHECK(memcmp(got, f.p->peers[1].id, NS_ID_BYTES) == 0);
    }
    f.p->peers[1].faults = 10; /* nobody scores >= 0: any live one */
    CHECK_RC(ns_p2p_pick_peer(f.p, NULL, NULL, got), NS_OK);
    ns_identity_destroy(&k[0]);
    ns_identity_destroy(&k[1]);
    ns_buf_release(&m);
    s_teardown(&f);
}

static const uint8_t *s_staked_id;

static uint64_t s_stake_one(void *u, const uint8_t id[NS_ID_BYTES])
{
    (void)u;
    return s_staked_id && memcmp(id, s_staked_id, NS_ID_BYTES) == 0 ? 5000 : 0;
}

/* Slots per direction: inbound newcomers never take an outbound slot; a
 * full direction keeps its incumbent against an equal newcomer (which is
 * not redialled for a while) and gives way to a higher-scored (staked)
 * one. */
TEST(slots_and_eviction)
{
    s_fix_t f;
    memset(&f, 0, sizeof f);
    ns_config_defaults(&f.cfg);
    snprintf(f.cfg.listen, sizeof f.cfg.listen, "tcp://127.0.0.1:0");
    f.cfg.max_peers = 2; /* one slot each way */
    f.me = ns_identity_generate();
    f.other = ns_identity_generate();
    ns_hash(f.net, "test-genesis", 12);
    ns_p2p_opts_t o = {&f.cfg, f.me, {0}, "test", NULL, 0, false};
    memcpy(o.network_id, f.net, NS_HASH_BYTES);
    int err = 0;
    f.p = ns_p2p_new(&o, &err);
    if (!CHECK(f.p != NULL))
        return;
    CHECK_EQ_INT(f.p->in_slots, 1);
    CHECK_EQ_INT(f.p->out_slots, 1);
    ns_identity_t *k[4];
    for (int i = 0; i < 4; i++)
        k[i] = ns_identity_generate();
    ns_buf_t m;
    ns_buf_init(&m);

    /* k0: outbound (as told by a reachable peer), reachable */
    ns_peer_t *out =
        ns_peers_add(f.p, ns_identity_pk(k[0]), "tcp://127.0.0.1:9",
                     NS_PEER_FROM_OUT, false, true);
    CHECK(out && ns_peers_reached(f.p, out));
    /* k1, k2: inbound (a stranger's link) */
    for (int i = 1; i <= 2; i++) {
        s_heartbeat_ivl(&m, k[i], f.net, ns_now_ms(), 1000);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    }
    CHECK_EQ_INT(f.p->n_peers, 3);
    ns_peer_t *in1 = ns_peers_find(f.p, ns_identity_pk(k[1]));
    CHECK(in1 && !in1->outbound && ns_peers_reached(f.p, in1));
    /* k2 scores no higher than k1: refused, and not taken back soon */
    ns_peer_t *in2 = ns_peers_find(f.p, ns_identity_pk(k[2]));
    CHECK(in2 && !ns_peers_reached(f.p, in2));
    CHECK(ns_peers_find(f.p, ns_identity_pk(k[2])) == NULL);
    s_heartbeat_ivl(&m, k[2], f.net, ns_now_ms() + 1, 1000);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK(ns_peers_find(f.p, ns_identity_pk(k[2])) == NULL);
    /* k3 is staked: it displaces k1, never the outbound k0 */
    s_staked_id = ns_identity_pk(k[3]);
    ns_p2p_set_stake_fn(f.p, s_stake_one, NULL);
    s_heartbeat_ivl(&m, k[3], f.net, ns_now_ms(), 1000);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    ns_peer_t *in3 = ns_peers_find(f.p, ns_identity_pk(k[3]));
    CHECK(in3 && ns_peers_reached(f.p, in3));
    CHECK(ns_peers_find(f.p, ns_identity_pk(k[1])) == NULL);
    CHECK(ns_peers_find(f.p, ns_identity_pk(k[0])) != NULL);
    CHECK_EQ_INT(f.p->stats.peers_evicted, 1);
    s_staked_id = NULL;
    for (int i = 0; i < 4; i++)
        ns_identity_destroy(&k[i]);
    ns_buf_release(&m);
    s_teardown(&f);
}

TEST(reply_reports_send_failure)
{
    s_fix_t f;
    s_setup(&f, 100);
    if (!f.p)
        return;
    /* a routing id the ROUTER does not know (ROUTER_MANDATORY) */
    struct ns_p2p_src gone = {ns_link_get(f.p, f.link, ns_mono_ms()),
                              f.link,
                              (const uint8_t *)"\0gone",
                              5,
                              NULL,
                              NULL,
                              NULL,
                              NULL};
    CHECK_RC(ns_p2p_reply(f.p, &gone, 151, (const uint8_t *)"x", 1),
             NS_ERR_NOTFOUND);
    CHECK_EQ_INT(f.p->stats.send_failed, 1);
    /* no connection at all (as for ns_p2p_ingest) */
    struct ns_p2p_src none = {gone.link, f.link, NULL, 0,
                              NULL,      NULL,   NULL, NULL};
    CHECK_RC(ns_p2p_reply(f.p, &none, 151, (const uint8_t *)"x", 1),
             NS_ERR_NOTFOUND);

    /* a real client that stops reading: replies succeed, then the queue
     * is full and the reply says so. A one-message pipe on our side. */
    int hwm = 1;
    CHECK(zmq_setsockopt(f.p->router, ZMQ_SNDHWM, &hwm, sizeof hwm) == 0);
    s_replier_t r = {f.p, calloc(1, S_REPLY_BODY), 1, 1, 0, false};
    void *ctx = zmq_ctx_new();
    void *client = s_client(ctx, &f);
    CHECK(r.body && client);
    ns_buf_t m;
    ns_buf_init(&m);
    CHECK_RC(ns_p2p_register(f.p, 150, false, s_on_ask, &r), NS_OK);
    CHECK_RC(ns_envelope_encode(f.other, 150, ns_now_ms(), (const uint8_t *)"?",
                                1, &m, NULL),
             NS_OK);
    if (r.body && client && zmq_send(client, m.data, m.len, 0) == (int)m.len) {
        CHECK_RC(
            ns_p2p_timer_start(f.p, 10000, false, s_on_reply_guard, &r, NULL),
            NS_OK);
        volatile sig_atomic_t stop = 0;
        CHECK_RC(ns_p2p_run(f.p, &stop), NS_OK);
        CHECK(!r.timed_out);
        CHECK_RC(r.first_rc, NS_OK);
        CHECK_RC(r.last_rc, NS_ERR_IO);
        CHECK(r.sent >= 1);
        /* what was reported sent does arrive */
        int timeout = 5000;
        zmq_setsockopt(client, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
        zmq_msg_t got;
        zmq_msg_init(&got);
        CHECK(zmq_msg_recv(&got, client, 0) > S_REPLY_BODY);
        zmq_msg_close(&got);
    }
    ns_buf_release(&m);
    if (client)
        zmq_close(client);
    zmq_ctx_term(ctx);
    free(r.body);
    s_teardown(&f);
}

/* RELAY (docs/PROTOCOL.md, "Behind a router"): what a node passes on and
 * what it takes, judged before any byte moves. */
static void s_relay_msg(ns_buf_t *out, const ns_identity_t *who,
                        const uint8_t to[NS_ID_BYTES], uint8_t inner_type)
{
    ns_buf_t inner, body;
    ns_buf_init(&inner);
    ns_buf_init(&body);
    CHECK_RC(ns_envelope_encode(who, inner_type, ns_now_ms(),
                                (const uint8_t *)"x", 1, &inner, NULL),
             NS_OK);
    ns_relay_t r = {{0}, inner.data, inner.len};
    memcpy(r.to, to, NS_ID_BYTES);
    CHECK_RC(ns_relay_encode(&r, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(who, NS_MSG_RELAY, ns_now_ms(), body.data,
                                body.len, out, NULL),
             NS_OK);
    ns_buf_release(&inner);
    ns_buf_release(&body);
}

static int s_direct_handler(void *u, const ns_envelope_t *env,
                            ns_p2p_src_t *src)
{
    (void)env;
    (void)src;
    (*(int *)u)++;
    return NS_OK;
}

TEST(relay_rules)
{
    s_fix_t f;
    s_setup(&f, 100000);
    if (!f.p)
        return;
    int delivered = 0;
    CHECK_RC(ns_p2p_register(f.p, 150, false, s_direct_handler, &delivered),
             NS_OK);
    CHECK_RC(
        ns_p2p_register(f.p, NS_MSG_RELAY, false, s_direct_handler, &delivered),
        NS_ERR_EXISTS); /* built in */
    ns_buf_t m;
    ns_buf_init(&m);
    uint8_t nobody[NS_ID_BYTES];
    memset(nobody, 7, sizeof nobody);

    /* Not relaying (node.relay = off; on by default): refused, counted. */
    f.cfg.relay = false;
    s_relay_msg(&m, f.other, nobody, 150);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    CHECK_EQ_INT(f.p->stats.relay_refused, 1);
    /* Relaying, but the signer is not in our table: refused. */
    f.cfg.relay = true;
    nobody[0]++; /* another message (the first is in the seen-cache) */
    s_relay_msg(&m, f.other, nobody, 150);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    CHECK_EQ_INT(f.p->stats.relay_refused, 2);
    CHECK_EQ_INT(f.p->stats.relayed, 0);

    /* For us, but not from a reachable peer of ours: not taken. */
    s_relay_msg(&m, f.other, ns_identity_pk(f.me), 150);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_ERR_INVAL);
    CHECK_EQ_INT(delivered, 0);
    CHECK_EQ_INT(f.p->stats.via_relay, 0);

    /* Malformed bodies: an empty envelope, a short id. */
    uint8_t bad[] = {0x92, 0xc4, 0x01, 0x00, 0xc4, 0x00};
    ns_buf_t env;
    ns_buf_init(&env);
    CHECK_RC(ns_envelope_encode(f.other, NS_MSG_RELAY, ns_now_ms(), bad,
                                sizeof bad, &env, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, env.data, env.len), NS_ERR_TYPE);
    ns_buf_release(&env);
    ns_buf_release(&m);
    s_teardown(&f);
}

/* A heartbeat from `who` with the given flags and price (interval 1 s,
 * at tcp://127.0.0.1:9). */
static void s_heartbeat_offer(ns_buf_t *out, const ns_identity_t *who,
                              const ns_hash_t net, uint64_t ts, uint32_t flags,
                              uint64_t price)
{
    ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, net, NS_HASH_BYTES);
    snprintf(hb.endpoint, sizeof hb.endpoint, "tcp://127.0.0.1:9");
    snprintf(hb.version, sizeof hb.version, "test");
    hb.interval_ms = 1000;
    hb.sent_us = ns_now_us(); /* differs every time: not "news" */
    hb.price = price;
    hb.flags = flags;
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_heartbeat_encode(&hb, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(who, NS_MSG_HEARTBEAT, ts, body.data, body.len,
                                out, NULL),
             NS_OK);
    ns_buf_release(&body);
}

static bool s_count_stored(void *u, const ns_seen_entry_t *e)
{
    (void)e;
    (*(uint32_t *)u)++;
    return true;
}

static uint32_t s_stored(const ns_p2p_t *p)
{
    uint32_t n = 0;
    ns_seen_each_stored(&p->seen, s_count_stored, &n);
    return n;
}

/* Idle gossip (docs/PROTOCOL.md, "Gossip"): a heartbeat goes straight to
 * every reachable peer; one that says nothing new (NS_HB_DIRECT, same
 * content, and one of the sender's was passed on already) is neither
 * passed on nor kept for pulls, a changed one is both; a sender without the
 * flag (an older node) is relayed as before; a key that sends its heartbeats
 * over its own connection but is no reachable peer of ours gets ours back
 * there, at most twice per interval. */
TEST(heartbeat_news_only)
{
    s_fix_t f;
    s_setup(&f, 100000);
    if (!f.p)
        return;
    ns_buf_t m;
    ns_buf_init(&m);
    ns_identity_t *k[3];
    for (int i = 0; i < 3; i++)
        k[i] = ns_identity_generate();
    uint64_t t = ns_now_ms();
    for (int i = 0; i < 2; i++) {
        s_heartbeat_offer(&m, k[i], f.net, t, NS_HB_DIRECT, 7);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    }
    CHECK_EQ_INT(f.p->n_peers, 2);
    for (uint32_t i = 0; i < f.p->n_peers; i++) /* as if they answered */
        CHECK(ns_peers_reached(f.p, &f.p->peers[i]));
    CHECK_EQ_INT(ns_p2p_live_peers(f.p), 2);

    /* ours: to both peers each time, kept for pulls only when new */
    uint64_t fwd = f.p->stats.forwarded;
    uint32_t stored = s_stored(f.p);
    ns_p2p_send_heartbeat(f.p);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 2);
    CHECK_EQ_INT(s_stored(f.p), stored + 1);
    ns_p2p_send_heartbeat(f.p);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 4);
    CHECK_EQ_INT(s_stored(f.p), stored + 1);
    ns_p2p_set_offer(f.p, 0, 3); /* free slots changed */
    ns_p2p_send_heartbeat(f.p);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 6);
    CHECK_EQ_INT(s_stored(f.p), stored + 2);

    /* the first heartbeat of each that we can pass on is news, though
     * unchanged: others learn of a new node from it */
    fwd = f.p->stats.forwarded;
    for (int i = 0; i < 2; i++) {
        s_heartbeat_offer(&m, k[i], f.net, t + 1, NS_HB_DIRECT, 7);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    }
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 2);

    /* k0's: unchanged, not passed on; changed, passed on to k1 */
    fwd = f.p->stats.forwarded;
    stored = s_stored(f.p);
    s_heartbeat_offer(&m, k[0], f.net, t + 2, NS_HB_DIRECT, 7);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd);
    CHECK_EQ_INT(s_stored(f.p), stored);
    s_heartbeat_offer(&m, k[0], f.net, t + 3, NS_HB_DIRECT, 8);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 1);
    CHECK_EQ_INT(s_stored(f.p), stored + 1);
    /* a sender without the flag: relayed even when unchanged */
    s_heartbeat_offer(&m, k[0], f.net, t + 4, 0, 8);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    s_heartbeat_offer(&m, k[0], f.net, t + 5, 0, 8);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.forwarded, fwd + 3);

    /* k2 over its own connection (a routing id the ROUTER does not know,
     * so each answer shows as a failed send): answered once, not again
     * within half an interval */
    uint8_t key2[32];
    CHECK(ns_id_curve_pk(ns_identity_pk(k[2]), key2) == NS_OK);
    struct ns_p2p_src own = {ns_link_get(f.p, key2, ns_mono_ms()),
                             key2,
                             (const uint8_t *)"\0k2",
                             3,
                             NULL,
                             NULL,
                             NULL,
                             NULL};
    uint64_t failed = f.p->stats.send_failed;
    s_heartbeat_offer(&m, k[2], f.net, t, NS_HB_DIRECT, 7);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    s_heartbeat_offer(&m, k[2], f.net, t + 1, NS_HB_DIRECT, 7);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    /* the same key relayed by another link: no answer */
    own.link->hb_answer_ms = 0;
    s_heartbeat_offer(&m, k[2], f.net, t + 2, NS_HB_DIRECT, 7);
    CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);

    for (int i = 0; i < 3; i++)
        ns_identity_destroy(&k[i]);
    ns_buf_release(&m);
    s_teardown(&f);
}

/* The seen cache grows rather than forget an id before its TTL (its
 * size follows the rate), and evicts as before once at its maximum or
 * when the oldest id is past the TTL anyway. */
TEST(seen_grows_with_rate)
{
    ns_seen_t s;
    CHECK_RC(ns_seen_init(&s, 16), NS_OK);
    ns_seen_set_growth(&s, 64, 1000);
    ns_hash_t ids[100];
    for (int i = 0; i < 100; i++)
        randombytes_buf(ids[i], NS_HASH_BYTES);
    for (int i = 0; i < 64; i++)
        CHECK_RC(ns_seen_add_at(&s, ids[i], 100 + i, 5000 + i, NULL, 0), NS_OK);
    CHECK_EQ_INT(s.cap, 64);
    CHECK_EQ_INT(s.evicted, 0);
    for (int i = 0; i < 64; i++) {
        const ns_seen_entry_t *e = ns_seen_get(&s, ids[i]);
        if (CHECK(e != NULL))
            CHECK_EQ_INT(e->wall_ms, 5000 + i);
    }
    /* at its maximum: the oldest goes */
    CHECK_RC(ns_seen_add(&s, ids[64], 200, NULL, 0), NS_OK);
    CHECK_EQ_INT(s.cap, 64);
    CHECK_EQ_INT(s.evicted, 1);
    CHECK(!ns_seen_has(&s, ids[0]));
    CHECK(ns_seen_has(&s, ids[1]) && ns_seen_has(&s, ids[64]));
    ns_seen_release(&s);
    /* full of ids past the TTL: no growth */
    CHECK_RC(ns_seen_init(&s, 16), NS_OK);
    ns_seen_set_growth(&s, 64, 1000);
    for (int i = 0; i < 17; i++)
        CHECK_RC(ns_seen_add(&s, ids[i], i < 16 ? 100 : 5000, NULL, 0), NS_OK);
    CHECK_EQ_INT(s.cap, 16);
    CHECK_EQ_INT(s.evicted, 1);
    ns_seen_release(&s);
}

/* Lazy push (docs/PROTOCOL.md, "Gossip"): an IHAVE gets an IWANT for the
 * ids we lack and have not asked for lately, nothing for the rest; an
 * IWANT gets what we hold of it and nothing for ids we do not hold; both
 * only over the sender's own link. A PULL complete from `since` gets
 * nothing signed before. Answers go to a routing id the ROUTER does not
 * know, so each shows as a failed send. */
TEST(lazy_push_and_pull_since)
{
    s_fix_t f;
    s_setup(&f, 100000);
    if (!f.p)
        return;
    ns_identity_t *k = ns_identity_generate();
    uint8_t key[32];
    CHECK(ns_id_curve_pk(ns_identity_pk(k), key) == NS_OK);
    struct ns_p2p_src own = {ns_link_get(f.p, key, ns_mono_ms()),
                             key,
                             (const uint8_t *)"\0kk",
                             3,
                             NULL,
                             NULL,
                             NULL,
                             NULL};
    uint64_t now = ns_mono_ms(), wall = ns_now_ms();
    ns_hash_t held, held_old, lack, lack2;
    randombytes_buf(held, sizeof held);
    randombytes_buf(held_old, sizeof held_old);
    randombytes_buf(lack, sizeof lack);
    randombytes_buf(lack2, sizeof lack2);
    CHECK_RC(
        ns_seen_add_at(&f.p->seen, held, now, wall, (const uint8_t *)"held", 4),
        NS_OK);
    CHECK_RC(ns_seen_add_at(&f.p->seen, held_old, now, wall - 20000,
                            (const uint8_t *)"old", 3),
             NS_OK);
    ns_buf_t body, m;
    ns_buf_init(&body);
    ns_buf_init(&m);
    uint8_t ids[3 * NS_HASH_BYTES];
    memcpy(ids, held, NS_HASH_BYTES);
    memcpy(ids + NS_HASH_BYTES, lack, NS_HASH_BYTES);

    /* IHAVE {held, lack}: one IWANT, for lack */
    uint64_t failed = f.p->stats.send_failed;
    CHECK_RC(ns_ihave_encode(ids, 2, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IHAVE, ns_now_ms(), body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    CHECK(ns_seen_has(&f.p->asked, lack));
    CHECK(!ns_seen_has(&f.p->asked, held));
    /* again (another IHAVE of the same ids): asked already, no IWANT */
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IHAVE, ns_now_ms() + 1, body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    /* not over the sender's own link: refused */
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IHAVE, ns_now_ms() + 2, body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, key, m.data, m.len), NS_ERR_INVAL);

    /* IWANT {lack, lack2}: nothing held, nothing sent */
    memcpy(ids, lack, NS_HASH_BYTES);
    memcpy(ids + NS_HASH_BYTES, lack2, NS_HASH_BYTES);
    CHECK_RC(ns_iwant_encode(ids, 2, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IWANT, ns_now_ms(), body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    /* IWANT {lack, held, lack2}: held only */
    memcpy(ids + NS_HASH_BYTES, held, NS_HASH_BYTES);
    memcpy(ids + 2 * NS_HASH_BYTES, lack2, NS_HASH_BYTES);
    CHECK_RC(ns_iwant_encode(ids, 3, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IWANT, ns_now_ms(), body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 2);

    /* PULL complete from wall - 10 s listing nothing: held is sent,
     * held_old (signed before) is not; the old form sends both */
    failed = f.p->stats.send_failed;
    CHECK_RC(ns_pull_encode_since(ids, 0, wall - 10000, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_PULL, ns_now_ms(), body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    /* listing held: nothing */
    memcpy(ids, held, NS_HASH_BYTES);
    CHECK_RC(ns_pull_encode_since(ids, 1, wall - 10000, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_PULL, ns_now_ms() + 1, body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);

    /* the link's answer budget spent (a second of it short, so that the
     * refill until the check does not cover the 4 bytes): an IWANT for
     * held sends nothing */
    own.link->answer_bytes = -S_ANSWER_BYTES_PER_S;
    own.link->answer_refill_us = ns_mono_us();
    CHECK_RC(ns_iwant_encode(held, 1, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k, NS_MSG_IWANT, ns_now_ms() + 3, body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
    CHECK_EQ_INT(f.p->stats.send_failed, failed + 1);
    CHECK_EQ_INT(f.p->stats.answers_limited, 1);
    ns_buf_release(&body);
    ns_buf_release(&m);
    ns_identity_destroy(&k);
    s_teardown(&f);
}

static uint32_t s_mesh_peers(const ns_p2p_t *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_peers; i++)
        n += p->peers[i].mesh;
    return n;
}

/* The mesh (docs/PROTOCOL.md, "Gossip"): filled to fanout from the live
 * peers; a graft is taken while we have fewer than fanout + S_MESH_EXTRA
 * mesh peers and refused beyond, so the degree is bounded; a prune
 * removes the peer and keeps it out for S_MESH_BACKOFF_MS; MESH only over
 * the sender's own link. */
TEST(mesh_degree_bounded)
{
    s_fix_t f;
    s_setup(&f, 100000);
    if (!f.p)
        return;
    f.cfg.fanout = 1;
    enum { K = 5 };
    ns_identity_t *k[K];
    uint8_t key[K][32];
    ns_buf_t m, body;
    ns_buf_init(&m);
    ns_buf_init(&body);
    uint64_t t = ns_now_ms();
    for (int i = 0; i < K; i++) {
        k[i] = ns_identity_generate();
        CHECK(ns_id_curve_pk(ns_identity_pk(k[i]), key[i]) == NS_OK);
        s_heartbeat_offer(&m, k[i], f.net, t, NS_HB_DIRECT, 7);
        CHECK_RC(ns_p2p_ingest(f.p, f.link, m.data, m.len), NS_OK);
    }
    CHECK_EQ_INT(f.p->n_peers, K);
    for (uint32_t i = 0; i < f.p->n_peers; i++)
        CHECK(ns_peers_reached(f.p, &f.p->peers[i]));
    CHECK_EQ_INT(ns_p2p_live_peers(f.p), K);
    ns_gossip_mesh_fill(f.p);
    CHECK_EQ_INT(s_mesh_peers(f.p), 1);

    /* grafts from the others: taken up to 1 + S_MESH_EXTRA, then not */
    uint32_t taken = 0;
    for (int i = 0; i < K; i++) {
        ns_peer_t *peer = ns_peers_find(f.p, ns_identity_pk(k[i]));
        if (!CHECK(peer != NULL) || peer->mesh)
            continue;
        struct ns_p2p_src own = {ns_link_get(f.p, key[i], ns_mono_ms()),
                                 key[i],
                                 (const uint8_t *)"\0km",
                                 3,
                                 NULL,
                                 NULL,
                                 NULL,
                                 NULL};
        CHECK_RC(ns_mesh_encode(true, &body), NS_OK);
        CHECK_RC(ns_envelope_encode(k[i], NS_MSG_MESH, ns_now_ms(), body.data,
                                    body.len, &m, NULL),
                 NS_OK);
        CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
        taken += peer->mesh;
    }
    CHECK_EQ_INT(taken, S_MESH_EXTRA);
    CHECK_EQ_INT(s_mesh_peers(f.p), 1 + S_MESH_EXTRA);

    /* a prune from each mesh peer: out, and not grafted again soon */
    for (int i = 0; i < K; i++) {
        ns_peer_t *peer = ns_peers_find(f.p, ns_identity_pk(k[i]));
        if (!peer || !peer->mesh)
            continue;
        struct ns_p2p_src own = {ns_link_get(f.p, key[i], ns_mono_ms()),
                                 key[i],
                                 (const uint8_t *)"\0km",
                                 3,
                                 NULL,
                                 NULL,
                                 NULL,
                                 NULL};
        CHECK_RC(ns_mesh_encode(false, &body), NS_OK);
        CHECK_RC(ns_envelope_encode(k[i], NS_MSG_MESH, ns_now_ms(), body.data,
                                    body.len, &m, NULL),
                 NS_OK);
        CHECK_RC(ns_p2p_ingest_src(f.p, &own, m.data, m.len), NS_OK);
        CHECK(!peer->mesh);
        CHECK(peer->mesh_backoff_ms > ns_mono_ms());
    }
    CHECK_EQ_INT(s_mesh_peers(f.p), 0);
    ns_gossip_mesh_fill(f.p); /* from the two never pruned */
    CHECK_EQ_INT(s_mesh_peers(f.p), 1);
    for (uint32_t i = 0; i < f.p->n_peers; i++)
        if (f.p->peers[i].mesh)
            CHECK(f.p->peers[i].mesh_backoff_ms == 0);

    /* not over the sender's own link: refused */
    CHECK_RC(ns_mesh_encode(true, &body), NS_OK);
    CHECK_RC(ns_envelope_encode(k[0], NS_MSG_MESH, ns_now_ms() + 1, body.data,
                                body.len, &m, NULL),
             NS_OK);
    CHECK_RC(ns_p2p_ingest(f.p, key[0], m.data, m.len), NS_ERR_INVAL);
    ns_buf_release(&m);
    ns_buf_release(&body);
    for (int i = 0; i < K; i++)
        ns_identity_destroy(&k[i]);
    s_teardown(&f);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    ns_log_threshold = NS_LOG_ERROR;
    RUN(seen_matches_reference);
    RUN(seen_expiry_and_stored_bytes);
    RUN(token_bucket);
    RUN(ingest_verdicts);
    RUN(ingest_rate_limit);
    RUN(bind_in_use);
    RUN(loop_sockets_timers_handlers);
    RUN(sybil_admission);
    RUN(peer_score);
    RUN(pick_peer_scored);
    RUN(slots_and_eviction);
    RUN(reply_reports_send_failure);
    RUN(relay_rules);
    RUN(heartbeat_news_only);
    RUN(seen_grows_with_rate);
    RUN(lazy_push_and_pull_since);
    RUN(mesh_degree_bounded);
    return ns_test_finish("p2p");
}
