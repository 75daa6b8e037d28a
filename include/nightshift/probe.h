/* probe.h - dial bootstrap addresses on our own, ask each for its genesis
 * (GENESIS_REQ, genesis.h), and say for each what happened: the answer,
 * or why there was none (refused, unreachable, timed out, key mismatch,
 * our key refused, another network, a malformed answer).
 *
 * Used by `init --join` to fetch a network's genesis, and when a node or
 * a light peer cannot reach any bootstrap peer, to tell the user why
 * (join.h). Each call dials with a fresh throwaway key (so a ban of the
 * node's own key elsewhere does not hide the cause) in a ZeroMQ context
 * of its own, watches each connection with libzmq's socket monitor
 * (connected, retried, handshake failed or succeeded), and blocks until it
 * has what it wants or timeout_ms passes. No threads, nothing kept.
 */
#ifndef NIGHTSHIFT_PROBE_H
#define NIGHTSHIFT_PROBE_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_PROBE_MAX 16 /* addresses one call dials */

typedef enum {
    NS_PROBE_PENDING = 0, /* no verdict (the call stopped before one) */
    NS_PROBE_OK,          /* answered for the network asked about */
    NS_PROBE_REFUSED,     /* TCP: connection refused */
    NS_PROBE_UNREACHABLE, /* TCP: no route, or the host does not resolve */
    NS_PROBE_TIMEOUT,     /* no connection, handshake or answer in time */
    NS_PROBE_KEY,         /* CURVE handshake failed: not the key of ID */
    NS_PROBE_DENIED,      /* the peer refused our key (its ZAP said no) */
    NS_PROBE_NETWORK,     /* answered: another network's genesis */
    NS_PROBE_BAD,         /* answered with something malformed */
} ns_probe_cause;

typedef struct {
    char addr[NS_ADDR_MAX]; /* in: "<id>@tcp://HOST:PORT" */
    ns_probe_cause cause;   /* out */
    char why[192];          /* out: the cause in one line, for people */
    ns_hash_t network_id;   /* out: the peer's, when OK or NETWORK */
} ns_probe_t;

/* Dial pr[0..n) at once and ask each for its genesis.
 *
 * text == NULL (diagnose): every address gets a verdict from its first
 * answer (OK when its network id is want, else NETWORK) or from how its
 * connection failed; the call returns NS_OK when each has one or
 * timeout_ms passed (those without one: TIMEOUT, with how far they got).
 *
 * text != NULL (fetch): the call returns NS_OK as soon as one address
 * delivered a whole genesis file whose hash is want: *text (malloc'd,
 * caller frees), *len, *winner = its index; the others keep what they had
 * by then. NS_ERR_NOTFOUND when every address failed, NS_ERR_TIMEOUT when
 * timeout_ms passed first (each address has its verdict either way).
 *
 * NS_ERR_INVAL for n == 0, n > NS_PROBE_MAX or an address that does not
 * parse (its why says so), NS_ERR_ZMQ / NS_ERR_NOMEM when the sockets
 * cannot be made. */
int ns_probe_run(ns_probe_t *pr, uint32_t n, const ns_hash_t want,
                 uint32_t timeout_ms, uint8_t **text, size_t *len,
                 uint32_t *winner) NS_MUST_CHECK;

/* "ok", "connection refused", "unreachable", "timed out", "key mismatch",
 * "refused our key", "other network", "bad answer"; "no verdict". */
const char *ns_probe_cause_name(ns_probe_cause c);

#endif
