/* node_io.h - the seam between the market's state machines (provider,
 * requester) and the world: messages out, entries into the ledger, clocks,
 * and messages in.
 *
 * node/node.c implements it over the p2p layer, the ledger sync and the
 * system clocks; the state machines' unit tests implement it over
 * in-memory queues and a fake clock. A state machine never calls p2p or
 * reads a clock itself, so every transition can be driven by a test.
 *
 * Threading: none; everything runs on the caller's loop.
 */
#ifndef NIGHTSHIFT_NODE_IO_H
#define NIGHTSHIFT_NODE_IO_H

#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*ns_send_fn)(void *user, const uint8_t peer[NS_ID_BYTES],
                          uint8_t type, const uint8_t *body, size_t len);

/* Visits peers' latest heartbeats; return true from fn to stop. */
typedef bool (*ns_peer_visit_fn)(void *u, const uint8_t id[NS_ID_BYTES],
                                 const ns_heartbeat_t *hb);

typedef struct {
    void *user;
    /* Sign and send a direct message to a peer we are linked with.
     * NS_ERR_NOTFOUND when there is no link (dial first). */
    ns_send_fn send;
    /* Sign and gossip a message of a gossiped type. */
    int (*publish)(void *user, uint8_t type, const uint8_t *body, size_t len);
    /* Open a link to peer at endpoint ("tcp://host:port"); NS_ERR_EXISTS
     * when there is one. */
    int (*dial)(void *user, const uint8_t peer[NS_ID_BYTES],
                const char *endpoint);
    /* Append our own entry (seq, prev, signature assigned; open credits
     * claimed first) durably and hand it to the network. */
    int (*append)(void *user, uint8_t type, const ns_entry_body_t *body,
                  ns_hash_t id_out);
    /* What our heartbeats announce: staked credits and free job slots. */
    void (*set_offer)(void *user, uint64_t stake, uint32_t free_slots);
    /* Visit live peers (NULL = none known). Returns true if fn stopped. */
    bool (*visit_peers)(void *user, ns_peer_visit_fn fn, void *u);
    uint32_t (*live_peers)(void *user);
    uint64_t (*now_ms)(void *user);  /* wall clock, ms since the epoch */
    uint64_t (*mono_ms)(void *user); /* monotonic ms */
    /* Why no bootstrap peer became live: one line naming each bootstrap
     * address and its cause (join.h, ns_join_explain). Blocks for a few
     * seconds; called once, when a join gives up. NULL: not known. */
    void (*explain_join)(void *user, char *out, size_t cap);
    /* Where peers reach us now, for announcements (p2p.h,
     * ns_p2p_contact: an endpoint, a relay, or "" behind a router);
     * NULL: the endpoint the state machine was given. */
    const char *(*contact)(void *user);
    /* Peers learned of lately and not heard from yet (p2p.h,
     * ns_p2p_unheard_peers over NS_POLICY_UNHEARD_MS); NULL: none. */
    uint32_t (*unheard_peers)(void *user);
    /* Visit live peers, then the peers heard from lately whose endpoint
     * has not answered (p2p.h, ns_p2p_visit_heard: providers behind a
     * router that do not know it); NULL: visit_peers only. */
    bool (*visit_heard)(void *user, ns_peer_visit_fn fn, void *u);
} ns_node_io_t;

/* A message for a state machine: verified, from sender. reply answers
 * over the connection it came from (a FETCH is answered that way). */
typedef struct {
    uint8_t type;
    const uint8_t *sender; /* NS_ID_BYTES, the envelope's signer */
    const uint8_t *body;
    size_t len;
    int (*reply)(void *ctx, uint8_t type, const uint8_t *body, size_t len);
    void *reply_ctx;
} ns_node_msg_t;

#endif
