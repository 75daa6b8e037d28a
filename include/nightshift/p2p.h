/* p2p.h - the node's network side: transport, peer table, gossip, and the
 * single-threaded event loop that owns them.
 *
 * One ROUTER socket is bound per node (CURVE server); one DEALER per
 * outbound peer (CURVE client, server key derived from the peer's id, so
 * the handshake proves the peer holds that id's key). Every message is a
 * signed envelope (wire.h). Gossiped types are pushed to `fanout` random
 * peers other than the one they came from and repaired by periodic pulls.
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
} ns_p2p_opts_t;

/* Create the context and bind the ROUTER. On failure returns NULL and sets
 * *err: NS_ERR_ADDRINUSE (port taken), NS_ERR_ADDR (cannot bind there),
 * NS_ERR_ZMQ, NS_ERR_NOMEM. */
ns_p2p_t *ns_p2p_new(const ns_p2p_opts_t *opts, int *err);
/* NULL-safe, idempotent: closes every socket and the context. */
void ns_p2p_destroy(ns_p2p_t **p);

/* The endpoint actually bound ("tcp://127.0.0.1:34567" for port 0) and the
 * address peers should use ("<id>@<advertised endpoint>"). */
const char *ns_p2p_endpoint(const ns_p2p_t *p);
const char *ns_p2p_address(const ns_p2p_t *p);

/* Extra sockets and timers for the layers above (control socket, ledger
 * sync...). fn runs when socket is readable / when the timer is due. */
typedef void (*ns_p2p_io_fn)(void *user, void *socket);
typedef void (*ns_p2p_timer_fn)(void *user, uint64_t now_mono_ms);
int ns_p2p_add_socket(ns_p2p_t *p, void *socket, ns_p2p_io_fn fn,
                      void *user) NS_MUST_CHECK;
int ns_p2p_add_timer(ns_p2p_t *p, uint32_t interval_ms, ns_p2p_timer_fn fn,
                     void *user) NS_MUST_CHECK;

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

/* Sign and send a direct message back over the connection it came from. */
int ns_p2p_reply(ns_p2p_t *p, ns_p2p_src_t *src, uint8_t type,
                 const uint8_t *body, size_t len) NS_MUST_CHECK;

/* Sign and send a direct message to one peer of the table.
 * NS_ERR_NOTFOUND if it is not there. */
int ns_p2p_send(ns_p2p_t *p, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                const uint8_t *body, size_t len) NS_MUST_CHECK;

/* Dial an address now (operators' `connect`). NS_ERR_EXISTS if known. */
int ns_p2p_connect(ns_p2p_t *p, const char *addr) NS_MUST_CHECK;

/* Cut all traffic with a peer for ms milliseconds: dropped from the table,
 * its connections refused and its messages ignored. For partition tests
 * on test networks (the daemon refuses it otherwise). */
int ns_p2p_block(ns_p2p_t *p, const uint8_t id[NS_ID_BYTES],
                 uint32_t ms) NS_MUST_CHECK;

/* A random live peer whose latest heartbeat satisfies want (NULL = any).
 * NS_ERR_NOTFOUND if none. */
int ns_p2p_pick_peer(ns_p2p_t *p,
                     bool (*want)(void *u, const uint8_t id[NS_ID_BYTES],
                                  const ns_heartbeat_t *hb),
                     void *u, uint8_t out[NS_ID_BYTES]) NS_MUST_CHECK;
int ns_p2p_register(ns_p2p_t *p, uint8_t type, bool gossiped, ns_p2p_msg_fn fn,
                    void *user) NS_MUST_CHECK;

/* Sign and gossip a message of a gossiped type to fanout peers. */
int ns_p2p_publish(ns_p2p_t *p, uint8_t type, const uint8_t *body,
                   size_t len) NS_MUST_CHECK;

/* Run the loop until *stop becomes non-zero. */
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
 * receipt here) collected since the last call; the ring is then cleared. */
void ns_p2p_pack_latency(ns_p2p_t *p, msgpack_packer *pk);

/* Number of peers we have a live heartbeat from. */
uint32_t ns_p2p_live_peers(const ns_p2p_t *p);

#endif
