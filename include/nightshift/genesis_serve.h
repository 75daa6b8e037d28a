/* genesis_serve.h - answer GENESIS_REQ (genesis.h) from the node's stored
 * genesis file, for `init --join` (docs/PROTOCOL.md "Genesis transfer"). */
#ifndef NIGHTSHIFT_GENESIS_SERVE_H
#define NIGHTSHIFT_GENESIS_SERVE_H

#include "nightshift/p2p.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ns_genesis_serve ns_genesis_serve_t;

/* Copy the genesis file text[0..len) (its hash is the network id) and
 * register the GENESIS_REQ handler on p2p. NULL and *err on failure:
 * NS_ERR_INVAL (empty or over NS_MAX_GENESIS_BYTES), NS_ERR_NOMEM,
 * NS_ERR_EXISTS (the type has a handler already). */
ns_genesis_serve_t *ns_genesis_serve_new(ns_p2p_t *p2p, const uint8_t *text,
                                         size_t len, int *err);
/* NULL-safe, idempotent: unregisters the handler and frees. Call before
 * the p2p is destroyed. */
void ns_genesis_serve_destroy(ns_genesis_serve_t **g);

#endif
