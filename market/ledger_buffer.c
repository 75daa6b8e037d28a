/* ledger_buffer.c - the ledger's out-of-order buffer (ledger_buffer.h). */
#include "ledger_buffer.h"

#include <stdlib.h>
#include <string.h>

static const ns_hash_t s_zero;

int ns_lbuf_init(ns_lbuf_t *b)
{
    b->n = 0;
    b->items = calloc(NS_LEDGER_PENDING_MAX, sizeof *b->items);
    return b->items ? NS_OK : NS_ERR_NOMEM;
}

void ns_lbuf_release(ns_lbuf_t *b)
{
    if (b->items) {
        for (uint32_t i = 0; i < b->n; i++)
            free(b->items[i].bytes);
        free(b->items);
    }
    b->items = NULL;
    b->n = 0;
}

void ns_lbuf_add(ns_lbuf_t *b, const uint8_t *buf, size_t len,
                 const ns_entry_t *e, const ns_hash_t waiting)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (memcmp(b->items[i].author, e->author, 32) == 0 &&
            b->items[i].seq == e->seq)
            return; /* already waiting */
    if (b->n == NS_LEDGER_PENDING_MAX) {
        /* Full: forget the oldest; sync will fetch it again. */
        free(b->items[0].bytes);
        memmove(&b->items[0], &b->items[1], (b->n - 1) * sizeof b->items[0]);
        b->n--;
    }
    ns_lbuf_item_t *p = &b->items[b->n];
    p->bytes = malloc(len);
    if (!p->bytes)
        return;
    memcpy(p->bytes, buf, len);
    p->len = len;
    memcpy(p->author, e->author, 32);
    p->seq = e->seq;
    memcpy(p->waiting, waiting ? waiting : s_zero, 32);
    b->n++;
}

uint32_t ns_lbuf_take(ns_lbuf_t *b, const uint8_t *author, uint64_t seq,
                      const ns_hash_t id, ns_lbuf_item_t **out)
{
    ns_lbuf_item_t *take = NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n;) {
        ns_lbuf_item_t *p = &b->items[i];
        bool next = memcmp(p->author, author, 32) == 0 && p->seq == seq + 1;
        bool dep = memcmp(p->waiting, id, 32) == 0;
        if (!next && !dep) {
            i++;
            continue;
        }
        ns_lbuf_item_t *grown = realloc(take, (n + 1) * sizeof *take);
        if (!grown)
            break;
        take = grown;
        take[n++] = *p;
        memmove(p, p + 1, (b->n - i - 1) * sizeof *p);
        b->n--;
    }
    *out = take;
    return n;
}
