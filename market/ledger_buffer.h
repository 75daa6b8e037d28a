/* ledger_buffer.h - entries that arrived before what they need: ahead of
 * their author's head, or naming an entry not yet known (internal to
 * market/ledger*.c).
 *
 * At most NS_LEDGER_PENDING_MAX entries wait; when full, the oldest is
 * forgotten (ledger sync fetches it again). One entry per (author, seq).
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_BUFFER_H
#define NIGHTSHIFT_MARKET_LEDGER_BUFFER_H

#include "nightshift/ledger.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *bytes; /* the encoded entry, owned */
    size_t len;
    uint8_t author[NS_ID_BYTES];
    uint64_t seq;
    ns_hash_t waiting; /* missing dependency id (zero: waiting for gap) */
} ns_lbuf_item_t;

typedef struct {
    ns_lbuf_item_t *items; /* NS_LEDGER_PENDING_MAX slots, oldest first */
    uint32_t n;            /* waiting now */
} ns_lbuf_t;

/* NS_ERR_NOMEM if the slots cannot be allocated. */
int ns_lbuf_init(ns_lbuf_t *b) NS_MUST_CHECK;
void ns_lbuf_release(ns_lbuf_t *b);

/* Keep a copy of the entry e (encoded in buf), waiting for the entry
 * `waiting`, or for its author's previous entry when waiting is NULL.
 * Best effort: nothing is kept when out of memory. */
void ns_lbuf_add(ns_lbuf_t *b, const uint8_t *buf, size_t len,
                 const ns_entry_t *e, const ns_hash_t waiting);

/* Take out what waited for the entry (author, seq, id) just stored: the
 * author's entry seq + 1 and the entries naming id. *out (malloc'd, NULL
 * when none) holds them in buffer order; the caller frees each bytes and
 * the array. Returns how many. */
uint32_t ns_lbuf_take(ns_lbuf_t *b, const uint8_t *author, uint64_t seq,
                      const ns_hash_t id, ns_lbuf_item_t **out);

#endif
