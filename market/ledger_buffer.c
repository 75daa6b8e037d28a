/* ledger_buffer.c - the ledger's out-of-order buffer (ledger_buffer.h). */
#include "ledger_buffer.h"

#include <stdlib.h>
#include <string.h>

struct ns_lbuf_author {
    uint8_t id[NS_ID_BYTES];
    uint64_t bytes;                   /* cost of its items */
    uint32_t n;                       /* its items */
    ns_lbuf_item_t *lowest, *highest; /* its items by seq */
};

#define S_MAP_MIN 64 /* first size of a map, slots */

/* ---- keys ---------------------------------------------------------------- */

static uint64_t s_hash(const ns_lbuf_t *b, const uint8_t *k, size_t len)
{
    uint8_t out[crypto_shorthash_BYTES];
    crypto_shorthash(out, k, len, b->key);
    uint64_t h;
    memcpy(&h, out, sizeof h);
    return h ? h : 1; /* 0 marks an empty slot */
}

static uint64_t s_hash_seq(const ns_lbuf_t *b, const uint8_t *author,
                           uint64_t seq)
{
    uint8_t k[NS_ID_BYTES + 8];
    memcpy(k, author, NS_ID_BYTES);
    for (int i = 0; i < 8; i++)
        k[NS_ID_BYTES + i] = (uint8_t)(seq >> (8 * i));
    return s_hash(b, k, sizeof k);
}

typedef struct {
    const uint8_t *id; /* author or awaited entry id */
    uint64_t seq;
} s_key_t;

typedef bool (*s_eq_fn)(const void *v, const s_key_t *k);

static bool s_eq_seq(const void *v, const s_key_t *k)
{
    const ns_lbuf_item_t *it = v;
    return it->seq == k->seq && memcmp(it->author, k->id, NS_ID_BYTES) == 0;
}

static bool s_eq_wait(const void *v, const s_key_t *k)
{
    const ns_lbuf_item_t *it = v;
    return memcmp(it->waiting, k->id, NS_HASH_BYTES) == 0;
}

static bool s_eq_author(const void *v, const s_key_t *k)
{
    const ns_lbuf_author_t *a = v;
    return memcmp(a->id, k->id, NS_ID_BYTES) == 0;
}

/* ---- the map ------------------------------------------------------------- */

static void s_map_release(ns_lbuf_map_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static void s_map_place(ns_lbuf_map_t *m, uint64_t h, void *v)
{
    uint32_t mask = m->cap - 1, i = (uint32_t)h & mask;
    while (m->slots[i].h)
        i = (i + 1) & mask;
    m->slots[i].h = h;
    m->slots[i].v = v;
    m->n++;
}

/* Room for one more at a load of at most 1/2. */
static int s_map_reserve(ns_lbuf_map_t *m)
{
    if (m->cap && (uint64_t)(m->n + 1) * 2 <= m->cap)
        return NS_OK;
    uint32_t cap = m->cap ? m->cap * 2 : S_MAP_MIN;
    if (cap < m->cap)
        return NS_ERR_NOMEM;
    struct ns_lbuf_slot *old = m->slots;
    uint32_t old_cap = m->cap;
    if (!(m->slots = calloc(cap, sizeof *m->slots))) {
        m->slots = old;
        return NS_ERR_NOMEM;
    }
    m->cap = cap;
    m->n = 0;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].h)
            s_map_place(m, old[i].h, old[i].v);
    free(old);
    return NS_OK;
}

/* The slot of the first value matching k (eq) or equal to v (eq NULL);
 * UINT32_MAX if none. */
static uint32_t s_map_find(const ns_lbuf_map_t *m, uint64_t h, s_eq_fn eq,
                           const s_key_t *k, const void *v)
{
    if (!m->cap)
        return UINT32_MAX;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)h & mask; m->slots[i].h; i = (i + 1) & mask)
        if (m->slots[i].h == h &&
            (eq ? eq(m->slots[i].v, k) : m->slots[i].v == v))
            return i;
    return UINT32_MAX;
}

/* Empty slot i, moving later slots of its probe run back. */
static void s_map_remove_at(ns_lbuf_map_t *m, uint32_t i)
{
    uint32_t mask = m->cap - 1, j = i;
    m->n--;
    for (;;) {
        m->slots[i].h = 0;
        m->slots[i].v = NULL;
        for (;;) {
            j = (j + 1) & mask;
            if (!m->slots[j].h)
                return;
            uint32_t k = (uint32_t)m->slots[j].h & mask; /* its home */
            /* Stays if its home lies cyclically in (i, j]. */
            bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays)
                break;
        }
        m->slots[i] = m->slots[j];
        i = j;
    }
}

/* ---- items --------------------------------------------------------------- */

uint64_t ns_lbuf_cost(size_t len)
{
    return (uint64_t)len + NS_LBUF_ITEM_OVERHEAD;
}

void ns_lbuf_init(ns_lbuf_t *b, uint64_t cap_bytes, uint64_t author_cap_bytes)
{
    memset(b, 0, sizeof *b);
    b->cap_bytes = cap_bytes;
    b->author_cap_bytes =
        author_cap_bytes < cap_bytes ? author_cap_bytes : cap_bytes;
    crypto_shorthash_keygen(b->key);
}

void ns_lbuf_release(ns_lbuf_t *b)
{
    for (ns_lbuf_item_t *it = b->oldest, *next; it; it = next) {
        next = it->newer;
        free(it);
    }
    for (uint32_t i = 0; i < b->authors.cap; i++)
        if (b->authors.slots[i].h)
            free(b->authors.slots[i].v);
    s_map_release(&b->by_seq);
    s_map_release(&b->by_wait);
    s_map_release(&b->authors);
    b->oldest = b->newest = NULL;
    b->n = 0;
    b->bytes = 0;
}

static ns_lbuf_author_t *s_author(const ns_lbuf_t *b, const uint8_t *id)
{
    s_key_t k = {id, 0};
    uint32_t i = s_map_find(&b->authors, s_hash(b, id, NS_ID_BYTES),
                            s_eq_author, &k, NULL);
    return i == UINT32_MAX ? NULL : b->authors.slots[i].v;
}

/* Take it out of the lists and indexes (not freed). */
static void s_unlink(ns_lbuf_t *b, ns_lbuf_item_t *it)
{
    if (it->older)
        it->older->newer = it->newer;
    else
        b->oldest = it->newer;
    if (it->newer)
        it->newer->older = it->older;
    else
        b->newest = it->older;
    it->older = it->newer = NULL;

    ns_lbuf_author_t *a = it->who;
    if (it->lower)
        it->lower->higher = it->higher;
    else
        a->lowest = it->higher;
    if (it->higher)
        it->higher->lower = it->lower;
    else
        a->highest = it->lower;
    it->lower = it->higher = NULL;
    uint64_t cost = ns_lbuf_cost(it->len);
    a->bytes -= cost;
    if (--a->n == 0) {
        uint64_t h = s_hash(b, a->id, NS_ID_BYTES);
        s_map_remove_at(&b->authors, s_map_find(&b->authors, h, NULL, NULL, a));
        free(a);
    }
    it->who = NULL;

    uint64_t h = s_hash_seq(b, it->author, it->seq);
    s_map_remove_at(&b->by_seq, s_map_find(&b->by_seq, h, NULL, NULL, it));
    if (it->waits_for_id) {
        h = s_hash(b, it->waiting, NS_HASH_BYTES);
        s_map_remove_at(&b->by_wait,
                        s_map_find(&b->by_wait, h, NULL, NULL, it));
    }
    b->n--;
    b->bytes -= cost;
}

static void s_evict(ns_lbuf_t *b, ns_lbuf_item_t *it)
{
    s_unlink(b, it);
    free(it);
    b->evicted++;
}

static ns_lbuf_item_t *s_find(const ns_lbuf_t *b, const uint8_t *author,
                              uint64_t seq)
{
    s_key_t k = {author, seq};
    uint32_t i =
        s_map_find(&b->by_seq, s_hash_seq(b, author, seq), s_eq_seq, &k, NULL);
    return i == UINT32_MAX ? NULL : b->by_seq.slots[i].v;
}

const ns_lbuf_item_t *ns_lbuf_find(const ns_lbuf_t *b, const uint8_t *author,
                                   uint64_t seq)
{
    return s_find(b, author, seq);
}

/* Put it into its author's list by seq, looking from both ends at once:
 * a chain arriving forwards or backwards costs one step an entry. */
static void s_insert_by_seq(ns_lbuf_author_t *a, ns_lbuf_item_t *it)
{
    ns_lbuf_item_t *lo = a->lowest, *hi = a->highest;
    ns_lbuf_item_t *after = NULL; /* insert after this one (NULL: first) */
    while (lo && hi) {
        if (hi->seq < it->seq) {
            after = hi;
            break;
        }
        if (lo->seq > it->seq) {
            after = lo->lower;
            break;
        }
        lo = lo->higher;
        hi = hi->lower;
    }
    it->lower = after;
    it->higher = after ? after->higher : a->lowest;
    if (it->lower)
        it->lower->higher = it;
    else
        a->lowest = it;
    if (it->higher)
        it->higher->lower = it;
    else
        a->highest = it;
}

int ns_lbuf_add(ns_lbuf_t *b, const uint8_t *buf, size_t len,
                const ns_entry_t *e, const ns_hash_t waiting)
{
    if (s_find(b, e->author, e->seq))
        return NS_ERR_DUPLICATE;
    uint64_t cost = ns_lbuf_cost(len);
    if (cost > b->author_cap_bytes) {
        b->evicted++;
        return NS_ERR_TOOBIG;
    }
    /* The author's share: what is nearest its head stays. */
    ns_lbuf_author_t *a = s_author(b, e->author);
    while (a && a->bytes + cost > b->author_cap_bytes) {
        if (a->highest->seq < e->seq) {
            b->evicted++;
            return NS_ERR_TOOBIG;
        }
        bool last = a->n == 1;
        s_evict(b, a->highest);
        if (last)
            a = NULL; /* freed with its last item */
    }
    /* The total: the oldest arrival goes. */
    while (b->oldest && b->bytes + cost > b->cap_bytes)
        s_evict(b, b->oldest);
    if (s_map_reserve(&b->by_seq) != NS_OK ||
        (waiting && s_map_reserve(&b->by_wait) != NS_OK) ||
        s_map_reserve(&b->authors) != NS_OK)
        return NS_ERR_NOMEM;
    ns_lbuf_item_t *it = malloc(sizeof *it + len);
    if (!it)
        return NS_ERR_NOMEM;
    a = s_author(b, e->author);
    if (!a) {
        if (!(a = calloc(1, sizeof *a))) {
            free(it);
            return NS_ERR_NOMEM;
        }
        memcpy(a->id, e->author, NS_ID_BYTES);
        s_map_place(&b->authors, s_hash(b, a->id, NS_ID_BYTES), a);
    }
    memset(it, 0, sizeof *it);
    memcpy(it->bytes, buf, len);
    it->len = len;
    memcpy(it->author, e->author, NS_ID_BYTES);
    it->seq = e->seq;
    it->waits_for_id = waiting != NULL;
    if (waiting)
        memcpy(it->waiting, waiting, NS_HASH_BYTES);
    it->who = a;
    s_insert_by_seq(a, it);
    a->n++;
    a->bytes += cost;
    it->older = b->newest;
    if (b->newest)
        b->newest->newer = it;
    else
        b->oldest = it;
    b->newest = it;
    s_map_place(&b->by_seq, s_hash_seq(b, it->author, it->seq), it);
    if (waiting)
        s_map_place(&b->by_wait, s_hash(b, waiting, NS_HASH_BYTES), it);
    b->n++;
    b->bytes += cost;
    return NS_OK;
}

ns_lbuf_item_t *ns_lbuf_take(ns_lbuf_t *b, const uint8_t *author, uint64_t seq,
                             const ns_hash_t id)
{
    ns_lbuf_item_t *head = NULL, **tail = &head;
    if (b->n == 0)
        return NULL;
    ns_lbuf_item_t *next = s_find(b, author, seq + 1);
    if (next && !next->waits_for_id) {
        s_unlink(b, next);
        *tail = next;
        tail = &next->newer;
    }
    uint64_t h = s_hash(b, id, NS_HASH_BYTES);
    s_key_t k = {id, 0};
    uint32_t i;
    while ((i = s_map_find(&b->by_wait, h, s_eq_wait, &k, NULL)) !=
           UINT32_MAX) {
        ns_lbuf_item_t *it = b->by_wait.slots[i].v;
        s_unlink(b, it);
        *tail = it;
        tail = &it->newer;
    }
    return head;
}
