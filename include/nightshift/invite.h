/* invite.h - the one-line invitation to a network (`nightshift invite`,
 * `nightshift init --join`; docs/PROTOCOL.md, "Invitations").
 *
 *   nightshift:1:<network id>@<ID>@tcp://HOST:PORT[,<ID>@tcp://HOST:PORT]...
 *
 * "nightshift:" and the format version 1; the network id (BLAKE2b-256 of
 * the genesis file) in the 52-character base32 text form of ids; "@"; then
 * 1..NS_INVITE_MAX_ADDRS bootstrap addresses separated by commas, each a
 * peer address as `--bootstrap` takes it. Nothing else: no spaces, no
 * empty or repeated address, no wildcard host (0.0.0.0, *, ::), at most
 * NS_INVITE_MAX_LEN characters. The parser is strict so that every
 * mistake in a pasted string is one clear line, never a guess.
 */
#ifndef NIGHTSHIFT_INVITE_H
#define NIGHTSHIFT_INVITE_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_INVITE_PREFIX "nightshift:1:"
#define NS_INVITE_MAX_ADDRS 8 /* bootstrap addresses in one invitation */
/* prefix 13 + id 52 + '@' + addresses and commas */
#define NS_INVITE_MAX_LEN (13 + 52 + 1 + NS_INVITE_MAX_ADDRS * NS_ADDR_MAX)

typedef struct {
    ns_hash_t network_id;
    uint32_t n_addrs;
    char addrs[NS_INVITE_MAX_ADDRS][NS_ADDR_MAX]; /* "<id>@tcp://h:p" */
} ns_invite_t;

/* Parse text (NUL-terminated). NS_ERR_INVAL with a one-line reason in
 * err (it quotes at most a short piece of the input). */
int ns_invite_parse(const char *text, ns_invite_t *inv, char *err,
                    size_t errlen) NS_MUST_CHECK;

/* Write the text form of inv into out[cap]. NS_ERR_INVAL when inv would
 * not parse back (no address, a bad one, a repeat), NS_ERR_TOOBIG when
 * cap is too small. */
int ns_invite_format(const ns_invite_t *inv, char *out,
                     size_t cap) NS_MUST_CHECK;

/* Whether an endpoint's host is a wildcard that nobody can dial
 * (0.0.0.0, *, ::, [::]). */
bool ns_endpoint_wildcard(const char *endpoint);

#endif
