/* p2p_internal.h - state shared by the files of p2p/ (not a public API). */
#ifndef NIGHTSHIFT_P2P_INTERNAL_H
#define NIGHTSHIFT_P2P_INTERNAL_H

#include "nightshift/log.h"
#include "nightshift/p2p.h"

#include <zmq.h>

#define S_MAX_LINKS 256        /* inbound connections tracked for limits */
#define S_OWN_SOCKETS 3        /* the ROUTER, ZAP and the ROUTER's monitor */
#define S_OWN_TIMERS 4         /* heartbeat, pull, maintenance, IHAVE */
#define S_MAINTAIN_MS 1000     /* peer expiry and seen-cache expiry */
#define S_ROUTER_BATCH 256     /* messages read from the ROUTER per turn */
#define S_DEALER_BATCH 64      /* and from each DEALER */
#define S_LATENCY_RING 8192    /* heartbeat latency samples kept */
#define S_SEEN_CAP 65536       /* message ids remembered (ring), at first */
/* the ring doubles, up to this, rather than forget an id before its
 * seen_ttl_ms: its size follows the message rate (docs/PROTOCOL.md,
 * "Gossip"); 2^21 ids hold 17,000 messages/s for 120 s, about 150 MB */
#define S_SEEN_MAX (1u << 21)
#define S_PULL_WINDOW_MS 30000 /* gossiped messages kept for pull repair */
#define S_PULL_MAX_REPLY 256   /* messages sent back for one PULL */
/* a PULL lists only messages signed in the last S_PULL_SINCE_MS (and
 * never asks for older ones): their bytes are still stored by the asker
 * even if they arrived late, so nothing it holds is sent back */
#define S_PULL_SINCE_MS (S_PULL_WINDOW_MS / 2)
/* Lazy push (docs/PROTOCOL.md, "Gossip"): ids of the gossip we passed on
 * are told in one IHAVE, this long after the first of them, to up to
 * S_LAZY_PEERS live peers outside the mesh; one that lacks some asks
 * with an IWANT, and does not ask again for S_IWANT_WAIT_MS (another
 * IHAVE then may). */
#define S_IHAVE_MS 500
#define S_LAZY_PEERS 4
#define S_IWANT_WAIT_MS 1000
#define S_ASKED_CAP 8192 /* ids asked for, remembered */
/* The mesh is symmetric (docs/PROTOCOL.md, "Gossip"): a peer we add is
 * told (MESH true, a graft) and adds us; one that has fanout +
 * S_MESH_EXTRA mesh peers already refuses (MESH false, a prune), and is
 * not asked again for S_MESH_BACKOFF_MS. So no node has more than
 * fanout + S_MESH_EXTRA mesh peers. */
#define S_MESH_EXTRA 2
#define S_MESH_BACKOFF_MS 30000
#define S_IWANT_MAX_BYTES (4u << 20) /* sent back for one IWANT */
/* what IWANT and PULL answers may send over one link, all together:
 * bytes per second and burst, so that neither amplifies */
#define S_ANSWER_BYTES_PER_S (1024.0 * 1024)
#define S_ANSWER_BYTES_BURST (4.0 * 1024 * 1024)
#define S_BAN_SLOTS 64         /* refused keys (wrong network) */
#define S_BAN_MS (10 * 60 * 1000)
#define S_LOG_LINES_PER_MIN 3      /* warnings per link per minute */
#define S_PEERS_REPLY 32           /* addresses in a PEERS reply */
#define S_CONNECT_TIMEOUT_MS 15000 /* a peer that never answers is dropped */

/* Admission (docs/PROTOCOL.md, "Peer admission and scores"). */
#define S_PENDING_MAX 16     /* unreachable entries per direction */
#define S_FIXED_EXTRA 8      /* operator `connect`s beyond the slots */
#define S_NEWKEY_BURST 16.0  /* unknown keys one link may introduce */
#define S_NEWKEY_PER_S 2.0   /* and its refill, keys per second */
#define S_ADDR_SLOTS 64      /* source addresses tracked (LRU) */
#define S_ADDR_BURST 64.0    /* unknown keys one source address may bring */
#define S_ADDR_PER_S 8.0     /* and its refill, keys per second */
#define S_REFUSED_SLOTS 64   /* ids that found their direction full */
#define S_REFUSED_MS 30000   /* and are not dialled again for this long */
#define S_SCORE_DECAY 0.98   /* per S_MAINTAIN_MS, deliveries and faults */
#define S_DELIVERY_CAP 100.0 /* first deliveries that count */
/* Behind a router (docs/PROTOCOL.md, "Behind a router"). */
/* a held peer's ROUTER routing id, bytes */
#define S_RID_MAX 32
/* held peers from one source address */
#define S_HELD_PER_ADDR 4
/* an endpoint that has not answered by then while its key talks over its
 * own connection: held over that connection */
#define S_HOLD_AFTER_MS 5000
/* reachable=auto: nobody dialled us this long after our first live peer:
 * we cannot be dialled */
#define S_AUTO_MS 10000
/* a key not in the table is answered over its own connection this long
 * after its last message there */
#define S_CONN_FRESH_MS 60000
/* heartbeats of held peers told in answer to one HELLO */
#define S_HELD_INTRO 8
/* relays among our live peers tried for a peer we have no way to */
#define S_RELAY_TRY 2
/* peers reached through a relay, and how long an unused route is kept */
#define S_ROUTES 64
#define S_ROUTE_MS 600000
/* what we relay: messages per second and burst for one peer, bytes per
 * second and burst for all */
#define S_RELAY_PER_S 200.0
#define S_RELAY_BURST 400.0
#define S_RELAY_BYTES_PER_S (8.0 * 1024 * 1024)
#define S_RELAY_BYTES_BURST (16.0 * 1024 * 1024)
/* ZMQ_MAXMSGSIZE (transport.c): room for CURVE's overhead and for
 * oversized envelopes to reach ingest and be counted. */
#define S_TRANSPORT_MAX_MSG (2 * NS_MAX_MSG)
/* inbound connections watched for a cut (transport.c, ns_tr_monitor):
 * beyond this many at once the oldest watch is let go */
#define S_CUT_WATCH 512
/* a link ZeroMQ closed with nothing unread yet: how long to wait for the
 * rest of a frame that was arriving */
#define S_CUT_GRACE_MS 1000
/* message types counted one by one in stats (status "by_type") */
#define S_STAT_TYPES 64

/* One connection we receive on: an inbound ROUTER client (keyed by its
 * CURVE key) or the DEALER we opened to a peer. */
typedef struct {
    uint8_t key[32]; /* CURVE public key of the remote end */
    bool used;
    double tokens;            /* token bucket, messages */
    uint64_t refill_us;       /* monotonic time of last refill */
    uint64_t last_used_ms;    /* monotonic, for LRU eviction */
    ns_ratelimit_t log_limit; /* warnings about this link */
    uint64_t rx_msgs;
    uint64_t dropped;
    double newkey_tokens;      /* unknown keys it may still introduce */
    uint64_t newkey_refill_us; /* monotonic time of last refill */
    uint8_t rid[S_RID_MAX];    /* inbound: the ROUTER routing id of its
                                  latest message, to answer it there */
    uint8_t rid_len;           /* 0: none */
    uint64_t rid_ms;           /* monotonic, when */
    uint64_t hb_answer_ms;     /* monotonic, our heartbeat last sent back
                                  over it (p2p.c, s_on_heartbeat) */
    double answer_bytes;       /* what IWANT and PULL answers may still
                                  send over it (gossip.c) */
    uint64_t answer_refill_us; /* monotonic; 0: never used, full */
} ns_link_t;

/* Unknown keys arriving over inbound connections from one IP address. */
typedef struct {
    char addr[64]; /* ZeroMQ's Peer-Address; "" = free slot */
    double tokens;
    uint64_t refill_us;    /* monotonic */
    uint64_t last_used_ms; /* monotonic, for LRU eviction */
} ns_addr_budget_t;

typedef enum {
    NS_PEER_CONNECTING = 0, /* not reachable yet, or no heartbeat yet */
    NS_PEER_LIVE = 1,       /* reachable, heartbeat within 3 intervals */
} ns_peer_state;

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint8_t curve_pk[32];
    char endpoint[NS_ENDPOINT_MAX];
    void *dealer; /* our outbound socket to it */
    ns_peer_state state;
    bool bootstrap;           /* from config/flags */
    bool fixed;               /* bootstrap or operator: never evicted */
    bool outbound;            /* we chose it (not: it dialed us) */
    bool vouched;             /* more than a free key: fixed, told by a
                                 reachable peer, introduced over its own
                                 connection, staked, or the new endpoint
                                 of a reachable or vouched peer */
    bool reachable;           /* a message came over our DEALER: the
                                 CURVE handshake to its endpoint proved
                                 the key */
    uint64_t reachable_ms;    /* monotonic, when it became reachable */
    bool held;                /* cannot be dialled: reached over the
                                 connection it opened to our ROUTER (no
                                 DEALER; reachable once held) */
    uint8_t rid[S_RID_MAX];   /* routing id of its latest connection to
                                 our ROUTER */
    uint8_t rid_len;          /* 0: none seen */
    uint64_t rid_ms;          /* monotonic, last message over it */
    char addr[64];            /* source address of that connection */
    double relay_tokens;      /* messages we may still relay for it */
    uint64_t relay_refill_us; /* monotonic time of last refill */
    uint64_t stake;           /* credits staked in our ledger */
    double deliveries;        /* first deliveries of gossip (decaying) */
    double faults;            /* invalid messages on its links (decaying) */
    uint64_t added_ms;        /* monotonic */
    uint64_t hello_ms;        /* monotonic, last HELLO we sent */
    uint64_t last_hb_ms;      /* monotonic, last fresh heartbeat */
    uint64_t last_hb_wall_ms; /* sender's timestamp of that heartbeat */
    ns_heartbeat_t *hb;       /* its latest heartbeat, owned */
    uint8_t *hb_env;          /* held: that heartbeat's envelope, owned,
                                 told to a peer that says HELLO (nobody
                                 can learn of it from PEERS) */
    uint32_t hb_env_len;
    bool hb_passed;           /* we passed one of its heartbeats on since
                                 it entered the table (p2p.c) */
    bool mesh;                /* one of our D eager-push peers (gossip.c) */
    uint64_t mesh_backoff_ms; /* monotonic: not grafted before (pruned) */
    ns_link_t link;           /* limits on what its DEALER delivers */
} ns_peer_t;

/* Seen cache: a FIFO ring of ids in arrival order with a keyed hash index
 * (linear probing, backward-shift deletion). Gossiped messages keep their
 * bytes for S_PULL_WINDOW_MS so that pulls can be answered. */
typedef struct {
    ns_hash_t id;
    uint64_t t_ms;    /* monotonic arrival */
    uint64_t wall_ms; /* gossip: its signer's timestamp; else 0 */
    uint8_t *msg;     /* raw envelope while inside the pull window */
    uint32_t len;
} ns_seen_entry_t;

typedef struct {
    ns_seen_entry_t *ring;
    uint32_t cap, head, count;
    uint32_t bytes_head; /* ring offset (from head) of oldest with msg */
    uint32_t *index;     /* ring slot + 1; 0 = empty */
    uint32_t index_mask;
    uint8_t hash_key[16]; /* siphash key: ids cannot be ground into
                             one probe run */
    uint64_t evicted;     /* ids dropped before their TTL (full) */
    uint32_t max_cap;     /* the ring may double up to this */
    uint64_t ttl_ms;      /* while its oldest id is younger than this */
} ns_seen_t;

int ns_seen_init(ns_seen_t *s, uint32_t cap) NS_MUST_CHECK;
void ns_seen_release(ns_seen_t *s);
bool ns_seen_has(const ns_seen_t *s, const ns_hash_t id);
/* Remember id; keep a copy of msg if msg != NULL. */
int ns_seen_add(ns_seen_t *s, const ns_hash_t id, uint64_t now_ms,
                const uint8_t *msg, size_t len) NS_MUST_CHECK;
/* The same, for a gossiped message signed at wall_ms (PULL's since). */
int ns_seen_add_at(ns_seen_t *s, const ns_hash_t id, uint64_t now_ms,
                   uint64_t wall_ms, const uint8_t *msg,
                   size_t len) NS_MUST_CHECK;
/* Let the ring double, up to max_cap ids, instead of dropping an id
 * younger than ttl_ms: its size then follows the rate (ttl x rate). */
void ns_seen_set_growth(ns_seen_t *s, uint32_t max_cap, uint64_t ttl_ms);
/* The entry of id, or NULL. */
const ns_seen_entry_t *ns_seen_get(const ns_seen_t *s, const ns_hash_t id);
/* Visit gossiped entries (wall_ms != 0) that arrived at or after
 * min_t_ms, newest first, stored bytes or not, until fn returns false. */
void ns_seen_each_since(const ns_seen_t *s, uint64_t min_t_ms,
                        bool (*fn)(void *u, const ns_seen_entry_t *e), void *u);
/* Drop the stored copy of id's bytes (it is not served to pulls). */
void ns_seen_forget_msg(ns_seen_t *s, const ns_hash_t id);
/* Forget ids older than ttl_ms and message bytes older than keep_ms. */
void ns_seen_expire(ns_seen_t *s, uint64_t now_ms, uint64_t ttl_ms,
                    uint64_t keep_ms);
/* Visit stored messages, newest first, until fn returns false. */
void ns_seen_each_stored(const ns_seen_t *s,
                         bool (*fn)(void *u, const ns_seen_entry_t *e),
                         void *u);

typedef struct {
    ns_p2p_msg_fn fn;
    void *user;
    bool gossiped;
} ns_handler_t;

struct ns_p2p {
    uint32_t close_linger_ms; /* ns_p2p_set_close_linger */
    const ns_config_t *cfg;
    const ns_identity_t *identity;
    uint8_t self_id[NS_ID_BYTES];
    char self_short[NS_ID_SHORT_LEN + 1];
    uint8_t curve_pk[32];
    uint8_t *curve_sk; /* sodium_malloc'd */
    ns_hash_t network_id;
    char network_name[64];
    char endpoint[NS_ENDPOINT_MAX];  /* bound */
    char advertise[NS_ENDPOINT_MAX]; /* told to peers */
    char address[NS_ADDR_MAX];
    uint64_t start_ms; /* monotonic */

    void *ctx;
    void *router;
    void *zap;
    void *monitor; /* the ROUTER's connection events (transport.c) */
    /* Inbound connections, each with a second descriptor of its own
     * (ns_tr_monitor): ZeroMQ cuts a link that sends a frame over
     * ZMQ_MAXMSGSIZE without saying why; what is left unread on the
     * connection once it is cut tells. */
    struct {
        int fd;            /* ZeroMQ's */
        int dup;           /* ours */
        uint64_t until_ms; /* 0: open; else ZeroMQ let go of it and the
                              rest of a frame may still come until then */
    } cut_watch[S_CUT_WATCH];
    uint32_t n_cut_watch;
    uint16_t listen_port; /* the ROUTER's, host order */
    ns_loop_t *loop;      /* polls router, zap, the DEALERs and upper layers */
    uint32_t hb_timer, pull_timer, maint_timer; /* ids while running */
    uint32_t ihave_timer; /* one-shot, while ids wait for an IHAVE */
    bool running;                               /* inside ns_p2p_run */
    bool chores_phased; /* chores rephased in the first aligned
                           heartbeat turn (p2p.c) */

    ns_peer_t *peers; /* array of peers_cap */
    uint32_t n_peers;
    uint32_t peers_cap;           /* slots + pending + fixed extra */
    uint32_t out_slots, in_slots; /* reachable peers per direction */
    ns_p2p_stake_fn stake_fn;     /* ns_p2p_set_stake_fn */
    void *stake_user;
    ns_addr_budget_t addrs[S_ADDR_SLOTS];
    struct {
        uint8_t id[NS_ID_BYTES];
        uint64_t until_ms;      /* monotonic */
    } refused[S_REFUSED_SLOTS]; /* reachable, but no slot: no redial
                                   for every relayed heartbeat */
    ns_link_t links[S_MAX_LINKS];
    ns_link_t strangers; /* shared bucket of inbound links that are not
                            live peers */
    struct {
        uint8_t key[32];
        uint64_t until_ms;
    } bans[S_BAN_SLOTS];

    /* Behind a router */
    bool light;                    /* ns_p2p_opts_t.light */
    bool unreachable;              /* we cannot be dialled (node.reachable = no,
                                      or auto found so): our contact is a relay
                                      or "" */
    bool dialled_in;               /* a HELLO came to our ROUTER (auto) */
    uint64_t first_live_ms;        /* monotonic, our first live peer (auto) */
    char contact[NS_ENDPOINT_MAX]; /* what HELLOs, heartbeats and
                                      announcements say now */
    struct {
        uint8_t id[NS_ID_BYTES];  /* a peer we reach through a relay */
        uint8_t via[NS_ID_BYTES]; /* the relay, one of our peers */
        uint64_t used_ms;         /* monotonic; 0 = free */
    } routes[S_ROUTES];
    double relay_bytes;       /* bytes we may still relay (all peers) */
    uint64_t relay_refill_us; /* monotonic */

    ns_seen_t seen;
    ns_seen_t asked; /* ids we sent an IWANT for lately (lazy push) */
    uint8_t ihave_ids[NS_MAX_IHAVE_IDS * NS_HASH_BYTES]; /* to tell */
    uint32_t ihave_n;
    ns_handler_t handlers[256];
    ns_wire_types_t types; /* built-in types + those with a handler */

    ns_heartbeat_t my_hb;     /* what we announce; its interval_ms is
                                 the one we keep now (s_hb_interval) */
    ns_heartbeat_t *spare_hb; /* decode buffer reused across heartbeats */
    ns_buf_t last_hb;         /* our last heartbeat envelope */
    ns_heartbeat_t *told_hb;  /* what our last changed heartbeat said
                                 (sent_us aside); NULL before the first */
    ns_buf_t scratch;         /* encode buffer */
    ns_buf_t body;            /* body encode buffer */

    uint32_t latency_us[S_LATENCY_RING];
    uint32_t latency_n; /* samples written since the last read */

    struct {
        uint64_t rx_msgs, rx_bytes, tx_msgs, tx_bytes;
        uint64_t accepted, duplicates, forwarded, send_failed;
        uint64_t peers_added, peers_expired, table_full;
        uint64_t newkey_limited; /* unknown keys over a link/addr budget */
        uint64_t peers_evicted;  /* for a better-scored newcomer */
        uint64_t relayed;        /* messages we relayed for others */
        uint64_t relayed_bytes;
        uint64_t relay_refused; /* asked to relay and did not */
        uint64_t via_relay;     /* messages that reached us by a relay */
        uint64_t links_cut;     /* inbound links cut mid-message */
        uint64_t dropped[NS_ERR_COUNT]; /* by -ns_err */
        /* by envelope type (read from the frame's first bytes, so that
         * undecodable frames count too; S_STAT_TYPES - 1 holds the rest):
         * received, of them duplicates, and sent */
        uint64_t rx_type[S_STAT_TYPES], dup_type[S_STAT_TYPES];
        uint64_t tx_type[S_STAT_TYPES];
        uint64_t dropped_total;
        /* lazy push and pull repair (docs/PROTOCOL.md, "Gossip") */
        uint64_t ihave_sent, ihave_ids_sent, ihave_rx;
        uint64_t iwant_sent, iwant_ids_sent, iwant_served;
        uint64_t pull_served;
        uint64_t answers_limited; /* IWANT/PULL answers cut by the budget */
    } stats;
    ns_ratelimit_t global_log; /* warnings from links we cannot name */
};

/* Where a message came from, and how to answer it (ns_p2p_src_t). */
struct ns_p2p_src {
    ns_link_t *link;
    const uint8_t *key; /* CURVE key of the connection */
    const uint8_t *rid; /* ROUTER routing id, or NULL */
    size_t rid_len;
    const char *addr; /* source IP of a ROUTER connection, or NULL */
    ns_peer_t *peer;  /* set when it came on our DEALER to this peer */
    /* Set when it came inside a RELAY: answers go back wrapped, to
     * relay_for, over the connection the RELAY came on. */
    const struct ns_p2p_src *relay;
    const uint8_t *relay_for;
};

/* transport.c */
int ns_tr_bind(ns_p2p_t *p) NS_MUST_CHECK;
void *ns_tr_connect(ns_p2p_t *p, const uint8_t peer_curve_pk[32],
                    const char *endpoint);
void ns_tr_close(void **socket);
/* Send one frame on a DEALER, or reply on the ROUTER to a routing id,
 * without waiting. NS_ERR_NOTFOUND when the ROUTER has no such connection
 * (any more), NS_ERR_IO when the queue is full or the send failed; each
 * failure is counted in stats.send_failed. */
int ns_tr_send(ns_p2p_t *p, void *dealer, const uint8_t *buf, size_t len);
/* The envelope type of a frame for the per-type counters, from its first
 * bytes without decoding it; S_STAT_TYPES - 1 when it is not readable or
 * out of range. */
uint32_t ns_tr_stat_type(const uint8_t *buf, size_t len);
int ns_tr_reply(ns_p2p_t *p, const uint8_t *rid, size_t rid_len,
                const uint8_t *buf, size_t len);
void ns_tr_handle_zap(ns_p2p_t *p);
/* The ROUTER's monitor (created by ns_tr_bind): read its events, count
 * the links cut mid-message (stats.links_cut). */
void ns_tr_handle_monitor(ns_p2p_t *p);
/* Settle the watched links ZeroMQ let go of (maintenance timer). */
void ns_tr_monitor_tick(ns_p2p_t *p);
/* Stop the monitor and let go of every watched connection. */
void ns_tr_monitor_close(ns_p2p_t *p);
void ns_tr_ban(ns_p2p_t *p, const uint8_t key[32]);
void ns_tr_ban_for(ns_p2p_t *p, const uint8_t key[32], uint64_t ms);
bool ns_tr_banned(ns_p2p_t *p, const uint8_t key[32]);

/* peers.c */
ns_peer_t *ns_peers_find(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES]);
ns_peer_t *ns_peers_find_curve(ns_p2p_t *p, const uint8_t key[32]);
/* How a peer came to be known: from config or the operator (fixed), by
 * a reachable peer or our own choice (outbound), or by a connection to us
 * (inbound). */
typedef enum {
    NS_PEER_FROM_FIXED = 0,
    NS_PEER_FROM_OUT = 1,
    NS_PEER_FROM_IN = 2,
} ns_peer_origin;
/* Add a peer and open its DEALER; NULL if the id is ours or invalid, or
 * the unreachable entries of its direction are S_PENDING_MAX already and
 * none of them can give way (a vouched newcomer replaces the oldest
 * entry that is not). */
ns_peer_t *ns_peers_add(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const char *endpoint, ns_peer_origin origin,
                        bool bootstrap, bool vouched);
/* A key that cannot be dialled, told by a reachable peer (one that holds
 * it, answering our HELLO): an outbound entry with no DEALER, vouched
 * by nobody (it gives way to any vouched newcomer), that counts
 * as heard of (ns_p2p_visit_heard) until the key dials us (held then) or
 * S_CONNECT_TIMEOUT_MS pass; a "relay:" contact whose relay is a live
 * peer also makes the route. NULL as ns_peers_add. */
ns_peer_t *ns_peers_add_heard(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                              const char *contact);
/* A message came over the peer's DEALER: it is reachable. Takes a slot of
 * its direction, evicting the lowest-scored peer there if the newcomer
 * scores higher; false (and the peer is removed) when it does not get
 * one. The peers array may be reordered. */
bool ns_peers_reached(ns_p2p_t *p, ns_peer_t *peer);
/* The gossipsub-style score (docs/PROTOCOL.md). */
double ns_peer_score(const ns_p2p_t *p, const ns_peer_t *peer, uint64_t now_ms);
/* May this source introduce one more unknown key? Charges the link's and
 * (inbound, not from a reachable peer) the source address's budget;
 * keys staked in the ledger are free. */
bool ns_peers_admit_key(ns_p2p_t *p, const struct ns_p2p_src *src,
                        const uint8_t id[NS_ID_BYTES]);
/* Whether our ledger has stake for id (ns_p2p_set_stake_fn). */
bool ns_peers_staked(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES]);
/* The peer of the link a message came on, if any. */
ns_peer_t *ns_peers_of_src(ns_p2p_t *p, const struct ns_p2p_src *src);
void ns_peers_remove(ns_p2p_t *p, ns_peer_t *peer, const char *why);
/* Keep a peer that cannot be dialled over the connection it opened to
 * our ROUTER (its key proved by that connection's CURVE handshake): an
 * inbound slot like any, at most S_HELD_PER_ADDR from one address. An
 * entry it already has is converted. NULL when it finds no room (the
 * peers array may be reordered). */
ns_peer_t *ns_peers_hold(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                         const char *contact, const uint8_t *rid,
                         size_t rid_len, const char *addr);
/* A message came over a ROUTER connection with this CURVE key: remember
 * its routing id for the peer (if any) so that we can answer it. */
void ns_peers_note_conn(ns_p2p_t *p, const uint8_t key[32], const uint8_t *rid,
                        size_t rid_len, const char *addr);
/* Send raw bytes to a peer: over our DEALER, or over its connection to our
 * ROUTER when held. As ns_tr_send. */
int ns_peers_send(ns_p2p_t *p, ns_peer_t *peer, const uint8_t *buf, size_t len);
/* The routing id of the connection the key of `id` opened to our ROUTER,
 * when a message came over it in the last S_CONN_FRESH_MS (the peer's
 * entry first, else the key's inbound link); false when there is none. */
bool ns_peers_fresh_conn(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                         const uint8_t **rid, size_t *rid_len);
/* Send a signed envelope to a peer by the best way we have
 * (docs/PROTOCOL.md, "Behind a router"): our DEALER once it answered, or
 * its connection when we hold it; else the connection it opened to us
 * lately, the relay it was reached by; else both our DEALER (queued
 * until its endpoint answers, if ever) and up to S_RELAY_TRY relays among
 * our live peers.
 * NS_ERR_NOTFOUND when there is no way at all. */
int ns_p2p_send_raw(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                    const uint8_t *buf, size_t len);
/* Whether a contact can be dialled (a tcp:// endpoint). */
bool ns_contact_dialable(const char *contact);
void ns_peers_send_hello(ns_p2p_t *p, ns_peer_t *peer);
/* Expire silent peers, retry bootstrap peers. */
void ns_peers_maintain(ns_p2p_t *p, uint64_t now_ms);
ns_link_t *ns_link_get(ns_p2p_t *p, const uint8_t key[32], uint64_t now_ms);
/* The inbound link of a key, or NULL (nothing is made). */
const ns_link_t *ns_link_find(const ns_p2p_t *p, const uint8_t key[32]);
/* Token bucket: true if one more message may pass. */
bool ns_link_allow(const ns_config_t *cfg, ns_link_t *link, uint64_t now_us);

/* gossip.c */
/* Forward raw bytes to our mesh (fanout = D to D + S_MESH_EXTRA live
 * peers), never to
 * `except_a` (the origin) or the peer behind `except_link` (where it came
 * from), and queue its id for the next IHAVE to peers outside the mesh. */
void ns_gossip_forward(ns_p2p_t *p, const ns_hash_t id, const uint8_t *buf,
                       size_t len, const uint8_t except_id[NS_ID_BYTES],
                       const uint8_t *except_link_key);
/* Keep the mesh: drop peers that are not live (or, with a prune, scored
 * < 0 while others are there), fill up to fanout from the live peers out
 * of their backoff, with a graft to each. */
void ns_gossip_mesh_fill(ns_p2p_t *p);
/* A MESH from a peer over its own link: a graft (added while we have
 * room, else answered with a prune) or a prune (removed, not grafted
 * again for S_MESH_BACKOFF_MS). */
void ns_gossip_on_mesh(ns_p2p_t *p, const uint8_t sender[NS_ID_BYTES],
                       bool graft);
/* The IHAVE timer: tell the queued ids to up to S_LAZY_PEERS peers
 * outside the mesh. */
void ns_gossip_flush_ihave(ns_p2p_t *p);
/* An IHAVE or IWANT from the sender's own link (checked by the caller). */
void ns_gossip_on_ihave(ns_p2p_t *p, const ns_ids_t *m,
                        const struct ns_p2p_src *src);
void ns_gossip_on_iwant(ns_p2p_t *p, const ns_ids_t *m,
                        const struct ns_p2p_src *src);
void ns_gossip_send_pull(ns_p2p_t *p);
void ns_gossip_answer_pull(ns_p2p_t *p, const ns_pull_t *pull,
                           const struct ns_p2p_src *src);

/* relay.c (docs/PROTOCOL.md, "Behind a router") */
/* Our contact now: the advertised endpoint, or when we cannot be dialled
 * a relay among our live peers ("relay:<id>@<endpoint>"), or "". Our
 * heartbeat follows; true when it changed. */
bool ns_relay_update_contact(ns_p2p_t *p);
/* A peer reached through a relay: remember (or refresh) the route. */
void ns_relay_route_set(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                        const uint8_t via[NS_ID_BYTES]);
/* The relay peer for id, or NULL. */
ns_peer_t *ns_relay_route(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES]);
/* Dial id at a "relay:" contact: the relay is added if needed and the
 * route remembered. */
int ns_relay_dial(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                  const char *relay_addr);
/* Send a signed envelope to `to` wrapped in a RELAY through `via`. */
int ns_relay_send(ns_p2p_t *p, ns_peer_t *via, const uint8_t to[NS_ID_BYTES],
                  const uint8_t *env, size_t len);
/* The RELAY handler: deliver to us, or pass on when we relay. */
int ns_relay_on_msg(ns_p2p_t *p, const ns_envelope_t *env,
                    struct ns_p2p_src *src);
void ns_relay_expire(ns_p2p_t *p, uint64_t now_ms);

/* p2p.c */
int ns_p2p_sign(ns_p2p_t *p, uint8_t type, const uint8_t *body, size_t len,
                ns_buf_t *out, ns_hash_t id) NS_MUST_CHECK;
/* Count a drop and log it at most a few times per link per minute. */
void ns_p2p_drop(ns_p2p_t *p, ns_link_t *link, int reason,
                 const uint8_t *sender, const char *detail);
/* Sign our heartbeat, remember it and send it to every reachable peer
 * (kept for pulls only when its content changed). */
void ns_p2p_send_heartbeat(ns_p2p_t *p);
/* Answer over the connection a message came on (wrapped in a RELAY when
 * it came in one). */
int ns_p2p_src_send(ns_p2p_t *p, const struct ns_p2p_src *src,
                    const uint8_t *buf, size_t len);
/* Ingest from a given source (a relayed envelope). */
int ns_p2p_ingest_src(ns_p2p_t *p, struct ns_p2p_src *src, const uint8_t *buf,
                      size_t len);
/* The bytes of a verified envelope as its signer made them (to pass it
 * on unchanged). */
int ns_p2p_env_bytes(const ns_envelope_t *env, ns_buf_t *out);
/* Whether the source's link is the sender's own connection. */
bool ns_p2p_from_sender_link(const struct ns_p2p_src *src,
                             const uint8_t *sender);
/* Loop handler of a peer's DEALER (user = the p2p). */
void ns_p2p_on_dealer(void *user, void *dealer);

#endif
