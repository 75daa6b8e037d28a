/* ledger_buffer.h - entries that arrived before what they need: ahead of
 * their author's head (seq_gap), or naming an entry not yet known
 * (missing_dep) (internal to market/ledger*.c).
 *
 * Indexed both ways a stored entry looks for its waiters: by (author, seq)
 * for the author's next entry, and by the awaited entry's id for entries
 * that name it. Both indexes are hash maps keyed with SipHash under a
 * random key, so entries chosen to collide cost no more than others.
 *
 * Capped in bytes, not in entries (each entry costs its length plus
 * NS_LBUF_ITEM_OVERHEAD): at most cap_bytes in all and author_cap_bytes per
 * author (NS_LEDGER_BUFFER_BYTES and NS_LEDGER_BUFFER_AUTHOR_BYTES in a
 * ledger). Over its author's share, that author's entry farthest ahead
 * (highest seq) goes, or the new one is refused when it is the farthest;
 * over the total, the oldest arrival of any author goes. What goes is
 * forgotten: ledger sync fetches it again. One entry per (author, seq).
 */
#ifndef NIGHTSHIFT_MARKET_LEDGER_BUFFER_H
#define NIGHTSHIFT_MARKET_LEDGER_BUFFER_H

#include "nightshift/ledger.h"

#include <sodium.h>
#include <stddef.h>
#include <stdint.h>

/* Bookkeeping bytes charged per entry on top of its length: the item, its
 * three index slots, the allocator's header. */
#define NS_LBUF_ITEM_OVERHEAD 192

typedef struct ns_lbuf_author ns_lbuf_author_t;
typedef struct ns_lbuf_item ns_lbuf_item_t;

struct ns_lbuf_item {
    ns_lbuf_item_t *older, *newer;  /* arrival order, all authors; in a list
                                       from ns_lbuf_take, newer is the next */
    ns_lbuf_item_t *lower, *higher; /* the same author's items by seq */
    ns_lbuf_author_t *who;          /* the author's record */
    uint8_t author[NS_ID_BYTES];
    uint64_t seq;
    bool waits_for_id; /* missing_dep: waiting names the entry */
    ns_hash_t waiting; /* awaited entry id (zero: the author's seq - 1) */
    size_t len;
    uint8_t bytes[]; /* the encoded entry (its signature was checked) */
};

/* An open-addressing hash map of pointers (linear probing, backward-shift
 * deletion); the key is read from the value. */
typedef struct {
    struct ns_lbuf_slot {
        uint64_t h; /* 0: empty */
        void *v;
    } * slots;
    uint32_t cap; /* power of two, or 0 */
    uint32_t n;
} ns_lbuf_map_t;

typedef struct {
    ns_lbuf_map_t by_seq;            /* (author, seq) -> item */
    ns_lbuf_map_t by_wait;           /* awaited id -> item (several per id) */
    ns_lbuf_map_t authors;           /* author -> ns_lbuf_author_t */
    ns_lbuf_item_t *oldest, *newest; /* arrival order */
    uint32_t n;                      /* entries waiting now */
    uint64_t bytes;                  /* their cost, <= cap_bytes */
    uint64_t cap_bytes;              /* all authors */
    uint64_t author_cap_bytes;       /* one author's share */
    uint64_t evicted;                /* entries forgotten or refused */
    uint8_t key[crypto_shorthash_KEYBYTES]; /* SipHash key, random */
} ns_lbuf_t;

/* What an entry of len bytes counts against the caps. */
uint64_t ns_lbuf_cost(size_t len);

/* An empty buffer with those caps (author_cap_bytes <= cap_bytes). */
void ns_lbuf_init(ns_lbuf_t *b, uint64_t cap_bytes, uint64_t author_cap_bytes);
void ns_lbuf_release(ns_lbuf_t *b);

/* Keep a copy of the entry e (encoded in buf, signature checked), waiting
 * for the entry `waiting`, or for its author's previous entry when
 * waiting is NULL. NS_OK: kept (others may have been evicted for it);
 * NS_ERR_DUPLICATE: (author, seq) already waits; NS_ERR_TOOBIG: refused,
 * over its author's share and farther ahead than what that author has
 * waiting; NS_ERR_NOMEM. */
int ns_lbuf_add(ns_lbuf_t *b, const uint8_t *buf, size_t len,
                const ns_entry_t *e, const ns_hash_t waiting);

/* Take out what waited for the entry (author, seq, id) just stored: the
 * author's entry seq + 1 if it waits for that gap, and every entry naming
 * id. Returns them as a list linked by `newer` (NULL when none), no
 * longer in the buffer; the caller frees each item with free(). */
ns_lbuf_item_t *ns_lbuf_take(ns_lbuf_t *b, const uint8_t *author, uint64_t seq,
                             const ns_hash_t id);

/* The entry waiting at (author, seq), or NULL; borrowed. */
const ns_lbuf_item_t *ns_lbuf_find(const ns_lbuf_t *b, const uint8_t *author,
                                   uint64_t seq);

#endif
