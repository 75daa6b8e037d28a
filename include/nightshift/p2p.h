/* p2p.h - the node's network side: transport, peer table, gossip, and the
 * single-threaded event loop that owns them.
 *
 * One ROUTER socket is bound per node (CURVE server); one DEALER per
 * outbound peer (CURVE client, server key derived from the peer's id, so
 * the handshake proves the peer holds that id's key). Every message is a
 * signed envelope (wire.h). Gossiped types are pushed to a mesh of
 * `fanout` to `fanout` + 2 peers (other than the one they came from),
 * their ids told to a few others (IHAVE/IWANT), and repaired by periodic
 * pulls.
 * See docs/PROTOCOL.md for the rules and docs/ARCHITECTURE.md for the loop.
 *
 * Threading: none. Everything runs in ns_p2p_run()'s loop; callbacks are
 * invoked from it and must not block.
 */
#ifndef NIGHTSHIFT_P2P_H
#define NIGHTSHIFT_P2P_H

#include "nightshift/config.h"
#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/loop.h"
#include "nightshift/wire.h"

#include <msgpack.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct ns_p2p ns_p2p_t;

typedef struct {
    const ns_config_t *cfg;        /* borrowed; must outlive the p2p */
    const ns_identity_t *identity; /* borrowed */
    ns_hash_t network_id;          /* hash of our genesis */
    const char *network_name;      /* for logs */
    const ns_devinfo_t *devices;   /* copied */
    uint32_t n_devices;
    bool light; /* a light peer: heartbeats say so (NS_HB_LIGHT), and
                   peers do not pass its endpoint on */
} ns_p2p_opts_t;

/* Create the context and bind the ROUTER. On failure returns NULL and sets
 * *err: NS_ERR_ADDRINUSE (port taken), NS_ERR_ADDR (cannot bind there),
 * NS_ERR_ZMQ, NS_ERR_NOMEM. */
ns_p2p_t *ns_p2p_new(const ns_p2p_opts_t *opts, int *err);
/* NULL-safe, idempotent: closes every socket and the context. Messages
 * still queued are dropped, unless ns_p2p_set_close_linger gave them up to
 * ms milliseconds to go out (destroy then waits at most that long). */
void ns_p2p_destroy(ns_p2p_t **p);
void ns_p2p_set_close_linger(ns_p2p_t *p, uint32_t ms);

/* The endpoint actually bound ("tcp://127.0.0.1:34567" for port 0) and the
 * address peers should use ("<id>@<advertised endpoint>"). */
const char *ns_p2p_endpoint(const ns_p2p_t *p);
const char *ns_p2p_address(const ns_p2p_t *p);
/* Where peers reach us now (docs/PROTOCOL.md, "Behind a router"): the
 * advertised endpoint, or, when we cannot be dialled (node.reachable),
 * "relay:<id>@<endpoint>" of a live peer that relays for us, or "" (we
 * only dial out: only the peers we dial reach us). What HELLOs,
 * heartbeats and job announcements carry. Borrowed; changes as peers
 * come and go. */
const char *ns_p2p_contact(const ns_p2p_t *p);
/* False when this node cannot be dialled (node.reachable = no, or auto
 * found that nobody dials back). */
bool ns_p2p_reachable(const ns_p2p_t *p);

/* Sockets and timers for the layers above (control socket, ledger sync,
 * the provider...), run by the p2p's loop (loop.h) besides its own ROUTER,
 * ZAP socket, one DEALER per peer and its heartbeat, pull and maintenance
 * timers. The loop has room for NS_P2P_MAX_SOCKETS sockets and
 * NS_P2P_MAX_TIMERS timers of the layers above, whatever the peer table
 * holds; going over is NS_ERR_TOOBIG. */
#define NS_P2P_MAX_SOCKETS 8
#define NS_P2P_MAX_TIMERS 16

typedef ns_loop_socket_fn ns_p2p_io_fn;
typedef ns_loop_timer_fn ns_p2p_timer_fn;

/* Call fn(user, socket) when socket is readable (borrowed: it must stay
 * open until removed or the p2p is destroyed). NS_ERR_EXISTS if it is
 * there already, NS_ERR_TOOBIG when NS_P2P_MAX_SOCKETS are. */
int ns_p2p_add_socket(ns_p2p_t *p, void *socket, ns_p2p_io_fn fn,
                      void *user) NS_MUST_CHECK;
/* Stop polling a socket added with ns_p2p_add_socket (the p2p's own
 * sockets are not removable). NS_ERR_NOTFOUND if it is not there. Safe
 * from inside any handler or timer; the socket gets no further call. */
int ns_p2p_remove_socket(ns_p2p_t *p, void *socket);

/* A repeating timer, every interval_ms (> 0, else NS_ERR_INVAL), that
 * cannot be cancelled: ns_p2p_timer_start(p, interval_ms, true, fn, user,
 * NULL). */
int ns_p2p_add_timer(ns_p2p_t *p, uint32_t interval_ms, ns_p2p_timer_fn fn,
                     void *user) NS_MUST_CHECK;
/* Start a one-shot or repeating timer (ns_loop_timer_start); *id (may be
 * NULL) gets its id for ns_p2p_timer_cancel. NS_ERR_TOOBIG when
 * NS_P2P_MAX_TIMERS are running. */
int ns_p2p_timer_start(ns_p2p_t *p, uint32_t interval_ms, bool repeat,
                       ns_p2p_timer_fn fn, void *user,
                       uint32_t *id) NS_MUST_CHECK;
/* Cancel a timer started with ns_p2p_timer_start; safe from inside any
 * callback, the timer's own included. NS_ERR_NOTFOUND if it is not
 * running (or is one of the p2p's own). */
int ns_p2p_timer_cancel(ns_p2p_t *p, uint32_t id);
/* Let a periodic chore run early in a turn that runs anyway
 * (ns_loop_timer_slack), so that an idle node wakes for its heartbeats,
 * not for each chore. */
int ns_p2p_timer_slack(ns_p2p_t *p, uint32_t id, uint32_t slack_ms);

/* The loop itself, for what the calls above do not cover (plain file
 * descriptors: ns_loop_add_fd). What is added to it directly shares the
 * room of NS_P2P_MAX_SOCKETS and NS_P2P_MAX_TIMERS; more would take the
 * room of the peers' DEALERs. Borrowed: it lives as long as the p2p. */
ns_loop_t *ns_p2p_loop(ns_p2p_t *p);

/* The ZeroMQ context, for the layers above to create their sockets in. */
void *ns_p2p_zmq_context(ns_p2p_t *p);

/* Where a message came from, valid only during the handler call: pass it
 * to ns_p2p_reply to answer over the same connection. */
typedef struct ns_p2p_src ns_p2p_src_t;

/* Handlers for message types registered by the layers above. The envelope
 * is verified and fresh when the handler runs. Return NS_OK to accept (a
 * gossiped type is then forwarded); an error drops it and is counted. */
typedef int (*ns_p2p_msg_fn)(void *user, const ns_envelope_t *env,
                             ns_p2p_src_t *src);

/* Sign and send a direct message back over the connection it came from,
 * without waiting. NS_OK once the message is queued there;
 * NS_ERR_NOTFOUND when that connection is gone (its peer was dropped, or
 * the ROUTER no longer has the route) or there is none (a message fed
 * with ns_p2p_ingest); NS_ERR_IO when its send queue is full or the send
 * failed. Failed sends are counted in the status's send_failed. */
int ns_p2p_reply(ns_p2p_t *p, ns_p2p_src_t *src, uint8_t type,
                 const uint8_t *body, size_t len) NS_MUST_CHECK;

/* Sign and send a direct message to one peer of the table: over our
 * DEALER, or over its own connection to us when it cannot be dialled, or
 * wrapped in a RELAY through the relay it was reached by (a route that
 * ns_p2p_connect to a "relay:" contact or a relayed message made).
 * NS_ERR_NOTFOUND if there is no way, NS_ERR_IO as for ns_p2p_reply. */
int ns_p2p_send(ns_p2p_t *p, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                const uint8_t *body, size_t len) NS_MUST_CHECK;

/* Dial an address now (operators' `connect`). NS_ERR_EXISTS if known.
 * "ID@relay:RELAY_ID@tcp://HOST:PORT" (a contact of a node behind a
 * router) dials the relay if needed and reaches ID through it. */
int ns_p2p_connect(ns_p2p_t *p, const char *addr) NS_MUST_CHECK;

/* Cut all traffic with a peer for ms milliseconds: dropped from the table,
 * its connections refused and its messages ignored. For partition tests
 * on test networks (the daemon refuses it otherwise). */
int ns_p2p_block(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                 uint32_t ms) NS_MUST_CHECK;

/* Visit each live peer's latest heartbeat, then those of the entries in
 * the table that are not live: keys whose advertised endpoint has not
 * answered (yet; such an entry goes after 15 s) that we heard of from a
 * peer holding them or over their own connection (a provider behind a
 * router that does not know it). Their heartbeats
 * are signed by them however they came, so a requester can count them
 * and hold them to their claims. True when fn stopped. */
bool ns_p2p_visit_heard(ns_p2p_t *p,
                        bool (*fn)(void *u, const uint8_t id[NS_ID_BYTES],
                                   const ns_heartbeat_t *hb),
                        void *u);

/* A random live peer whose latest heartbeat satisfies want (NULL = any),
 * among those with a score >= 0 when there are any (docs/PROTOCOL.md,
 * "Peer admission and scores"). NS_ERR_NOTFOUND if none. */
int ns_p2p_pick_peer(ns_p2p_t *p,
                     bool (*want)(void *u, const uint8_t id[NS_ID_BYTES],
                                  const ns_heartbeat_t *hb),
                     void *u, uint8_t out[NS_ID_BYTES]) NS_MUST_CHECK;
/* Handle messages of a type of the layers above (> NS_MSG_PULL): until
 * then they are refused as unknown (NS_ERR_MSGTYPE). gossiped: accepted
 * ones are forwarded and kept for pull repair. NS_ERR_EXISTS if the type
 * is built in or has a handler. */
int ns_p2p_register(ns_p2p_t *p, uint8_t type, bool gossiped, ns_p2p_msg_fn fn,
                    void *user) NS_MUST_CHECK;
/* Remove the handler of a type: its messages are unknown again. Safe from
 * inside any handler, that type's own included. NS_ERR_NOTFOUND if it has
 * none (the built-in types never have one). */
int ns_p2p_unregister(ns_p2p_t *p, uint8_t type);

/* Sign and gossip a message of a gossiped type to our mesh peers. */
int ns_p2p_publish(ns_p2p_t *p, uint8_t type, const uint8_t *body,
                   size_t len) NS_MUST_CHECK;
/* The same, and the same message straight to peer `also` (NULL: none;
 * not in the table: gossip alone) whatever gossip picked: the party that
 * waits on it gets it in one hop. */
int ns_p2p_publish_also(ns_p2p_t *p, uint8_t type, const uint8_t *body,
                        size_t len, const uint8_t *also) NS_MUST_CHECK;

/* Send a first heartbeat, dial the bootstrap peers, then run the loop
 * until *stop becomes non-zero (or ns_loop_stop(ns_p2p_loop(p))). The
 * p2p's own timers run only inside this call. NS_OK when stopped,
 * NS_ERR_ZMQ when polling fails, NS_ERR_TOOBIG if its timers find no
 * room, NS_ERR_STATE when called from inside the loop. */
int ns_p2p_run(ns_p2p_t *p, volatile sig_atomic_t *stop) NS_MUST_CHECK;

/* Feed one raw message as if it came from an inbound link with the given
 * 32-byte link key (the CURVE key of the sending connection). Used by the
 * loop, tests and benchmarks. Returns the verdict: NS_OK (accepted),
 * NS_ERR_REPLAY (duplicate) or the reason it was dropped. */
int ns_p2p_ingest(ns_p2p_t *p, const uint8_t link_key[32], const uint8_t *buf,
                  size_t len);

/* Update what our heartbeats announce: stake (credits staked in the
 * ledger) and free job slots. */
void ns_p2p_set_offer(ns_p2p_t *p, uint64_t stake, uint32_t free_slots);

/* Update what our heartbeats announce. */
void ns_p2p_set_ledger_summary(ns_p2p_t *p, uint64_t entries,
                               const ns_hash_t digest);

/* Documents for the control socket (msgpack maps/arrays). The status map
 * gets n_extra more entries that the caller packs right after the call. */
void ns_p2p_pack_status(const ns_p2p_t *p, msgpack_packer *pk,
                        uint32_t n_extra);
void ns_p2p_pack_peers(const ns_p2p_t *p, msgpack_packer *pk);
/* Heartbeat propagation samples (microseconds from origin send to first
 * receipt here) of live peers' heartbeats, collected since the last call;
 * the ring is then cleared. */
void ns_p2p_pack_latency(ns_p2p_t *p, msgpack_packer *pk);

/* Credits an id has staked, as our ledger says (0 if none or unknown).
 * Called from the loop; must not block. */
typedef uint64_t (*ns_p2p_stake_fn)(void *user, const uint8_t id[NS_ID_BYTES]);
/* Let the peer table see stake (the layers above own the ledger): staked
 * keys introduce themselves without using a link's budget of unknown
 * keys and score higher (docs/PROTOCOL.md, "Peer admission and scores").
 * fn NULL: no stake is known (the default). */
void ns_p2p_set_stake_fn(ns_p2p_t *p, ns_p2p_stake_fn fn, void *user);

/* Number of peers we have a live heartbeat from (reachable ones only). */
uint32_t ns_p2p_live_peers(const ns_p2p_t *p);
/* Peers we learned of in the last within_ms, from someone we trust (a
 * bootstrap, a reachable peer's list, a staked key), that we have not
 * heard a heartbeat from yet: a node that just joined does not know yet
 * what they offer. */
uint32_t ns_p2p_unheard_peers(const ns_p2p_t *p, uint64_t within_ms);

#endif
