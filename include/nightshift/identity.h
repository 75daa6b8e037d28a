/* identity.h - a node's Ed25519 key pair and the text forms of node ids.
 *
 * The node id is the Ed25519 public key (32 bytes). Its text form is
 * RFC 4648 base32, lower case, unpadded: 52 characters, one text per key.
 * A peer address is "<id>@<zmq endpoint>", e.g. "abcd...@tcp://127.0.0.1:7000".
 *
 * The key file <datadir>/node.key holds the 32-byte seed as
 * "nightshift-key-v1 <64 hex digits>\n", mode 0600. A key file that group
 * or others can read is refused (NS_ERR_PERM), like ssh does.
 */
#ifndef NIGHTSHIFT_IDENTITY_H
#define NIGHTSHIFT_IDENTITY_H

#include "nightshift/err.h"

#include <stddef.h>
#include <stdint.h>

#define NS_ID_BYTES 32
#define NS_SIG_BYTES 64
#define NS_ID_TEXT_LEN 52   /* base32 of 32 bytes */
#define NS_ID_SHORT_LEN 10  /* first characters, for tables */
#define NS_ENDPOINT_MAX 128 /* "tcp://host:port" incl. NUL */
#define NS_ADDR_MAX (NS_ID_TEXT_LEN + 1 + NS_ENDPOINT_MAX)

typedef struct ns_identity ns_identity_t;

/* A fresh random identity; NULL on failure. */
ns_identity_t *ns_identity_generate(void);
/* Save to path, created with O_EXCL and mode 0600 (never overwrites). */
int ns_identity_save(const ns_identity_t *id, const char *path) NS_MUST_CHECK;
/* Load from path: NS_ERR_NOTFOUND, NS_ERR_PERM (group/other can read it),
 * NS_ERR_CORRUPT (not a key file), NS_ERR_IO. */
int ns_identity_load(const char *path, ns_identity_t **out) NS_MUST_CHECK;
/* NULL-safe, idempotent; wipes the secret and sets *id to NULL. */
void ns_identity_destroy(ns_identity_t **id);

const uint8_t *ns_identity_pk(const ns_identity_t *id);
void ns_identity_sign(const ns_identity_t *id, const uint8_t *msg, size_t len,
                      uint8_t sig[NS_SIG_BYTES]);
/* CURVE (X25519) key pair derived from the Ed25519 key (see PROTOCOL.md). */
int ns_identity_curve(const ns_identity_t *id, uint8_t pub[32],
                      uint8_t sec[32]) NS_MUST_CHECK;

/* X25519 public key of a peer id, for CURVE's server key. NS_ERR_CRYPTO
 * for a point that is not a valid Ed25519 key. */
int ns_id_curve_pk(const uint8_t pk[NS_ID_BYTES],
                   uint8_t out[32]) NS_MUST_CHECK;

int ns_sig_verify(const uint8_t pk[NS_ID_BYTES], const uint8_t *msg, size_t len,
                  const uint8_t sig[NS_SIG_BYTES]) NS_MUST_CHECK;
/* Signatures ns_sig_verify has checked in this process, for the status
 * document's messages.sig_verifies (any thread). */
uint64_t ns_sig_verifies(void);

void ns_id_text(char out[NS_ID_TEXT_LEN + 1], const uint8_t pk[NS_ID_BYTES]);
int ns_id_parse(const char *text, uint8_t pk[NS_ID_BYTES]) NS_MUST_CHECK;
void ns_id_short(char out[NS_ID_SHORT_LEN + 1], const uint8_t pk[NS_ID_BYTES]);

/* "<id>@tcp://host:port" -> pk and endpoint. Only tcp:// endpoints with a
 * numeric port are accepted. */
int ns_addr_parse(const char *addr, uint8_t pk[NS_ID_BYTES],
                  char endpoint[NS_ENDPOINT_MAX]) NS_MUST_CHECK;
/* Validate a "tcp://host:port" endpoint (port 1..65535, or 0 / "*" when
 * allow_any_port). */
int ns_endpoint_check(const char *endpoint, int allow_any_port) NS_MUST_CHECK;
/* A contact: where a node says it can be reached (docs/PROTOCOL.md,
 * "Behind a router"). One of: an endpoint "tcp://host:port"; "" (it
 * cannot be dialled: it only dials out); "relay:<id>@tcp://host:port"
 * (through the reachable peer <id> that relays for it). NS_ERR_ADDR
 * otherwise. */
#define NS_RELAY_PREFIX "relay:"
int ns_contact_check(const char *contact) NS_MUST_CHECK;
/* The relay's address in a "relay:" contact, or NULL for another form. */
const char *ns_contact_relay(const char *contact);

#endif
