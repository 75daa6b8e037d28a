/* transfer.c - blobs over FETCH/CHUNK: one implementation for both the
 * requester and the provider (transfer.h). */
#include "nightshift/transfer.h"

#include <stdlib.h>
#include <string.h>

void ns_fetch_init(ns_fetch_t *f, const ns_hash_t job_id,
                   const uint8_t peer[NS_ID_BYTES], uint32_t window)
{
    memset(f, 0, sizeof *f);
    memcpy(f->job_id, job_id, NS_HASH_BYTES);
    memcpy(f->peer, peer, NS_ID_BYTES);
    f->window = window ? window : 1;
    ns_buf_init(&f->body);
}

void ns_fetch_release(ns_fetch_t *f)
{
    for (uint32_t i = 0; i < f->n_blobs; i++) {
        if (f->blobs[i].owned)
            free(f->blobs[i].data);
        free(f->blobs[i].seen);
    }
    ns_buf_release(&f->body);
    memset(f, 0, sizeof *f);
}

static uint64_t s_n_chunks(uint64_t total)
{
    return (total + NS_CHUNK_BYTES - 1) / NS_CHUNK_BYTES;
}

/* Size known: the destination and the bitmap of chunks. */
static int s_blob_size(ns_fetch_blob_t *b, uint64_t total)
{
    b->total = total;
    b->seen = calloc(s_n_chunks(total) / 8 + 1, 1);
    if (!b->seen)
        return NS_ERR_NOMEM;
    if (!b->data) {
        b->data = malloc(total ? total : 1);
        if (!b->data)
            return NS_ERR_NOMEM;
        b->owned = true;
    }
    return NS_OK;
}

int ns_fetch_add(ns_fetch_t *f, uint32_t blob, uint8_t *data, uint64_t total,
                 uint64_t max)
{
    if (f->n_blobs >= NS_FETCH_MAX_BLOBS)
        return NS_ERR_TOOBIG;
    ns_fetch_blob_t *b = &f->blobs[f->n_blobs];
    memset(b, 0, sizeof *b);
    b->blob = blob;
    b->data = data;
    b->max = total ? total : max;
    if (total) {
        int rc = s_blob_size(b, total);
        if (rc != NS_OK) {
            if (b->owned)
                free(b->data);
            free(b->seen);
            memset(b, 0, sizeof *b);
            return rc;
        }
    }
    f->n_blobs++;
    return NS_OK;
}

int ns_fetch_pump(ns_fetch_t *f, ns_send_fn send, void *user)
{
    /* In order: a blob's FETCHes go out only once the previous blob is
     * complete, so a learnt size is known before its chunks are asked. */
    while (f->cur < f->n_blobs && f->blobs[f->cur].total &&
           f->blobs[f->cur].got >= f->blobs[f->cur].total)
        f->cur++;
    if (f->cur >= f->n_blobs)
        return NS_OK;
    ns_fetch_blob_t *b = &f->blobs[f->cur];
    while (f->in_flight < f->window) {
        if (b->total == 0 && b->next > 0)
            return NS_OK; /* the first chunk, with the size, is on its way */
        if (b->total && b->next >= b->total)
            return NS_OK;
        ns_chunk_t c;
        memset(&c, 0, sizeof c);
        memcpy(c.job_id, f->job_id, NS_HASH_BYTES);
        c.blob = b->blob;
        c.offset = b->next;
        c.len = (uint32_t)(b->total == 0 || b->total - c.offset > NS_CHUNK_BYTES
                               ? NS_CHUNK_BYTES
                               : b->total - c.offset);
        int rc = ns_fetch_encode(&c, &f->body);
        if (rc == NS_OK)
            rc = send(user, f->peer, NS_MSG_MKT_FETCH, f->body.data,
                      f->body.len);
        if (rc != NS_OK)
            return rc;
        b->next += c.len;
        f->in_flight++;
    }
    return NS_OK;
}

int ns_fetch_on_chunk(ns_fetch_t *f, const ns_chunk_t *c, int *done_blob)
{
    *done_blob = -1;
    if (memcmp(c->job_id, f->job_id, NS_HASH_BYTES))
        return NS_ERR_NOTFOUND;
    uint32_t i = 0;
    while (i < f->n_blobs && f->blobs[i].blob != c->blob)
        i++;
    if (i == f->n_blobs)
        return NS_ERR_NOTFOUND;
    ns_fetch_blob_t *b = &f->blobs[i];
    /* Only chunks we asked for: on a boundary, below what was asked. */
    if (c->offset % NS_CHUNK_BYTES || c->offset >= b->next)
        return NS_ERR_INVAL;
    if (b->total == 0) {
        if (c->total == 0 || c->total > b->max)
            return NS_ERR_TOOBIG;
        int rc = s_blob_size(b, c->total);
        if (rc != NS_OK)
            return rc;
    }
    if (c->total != b->total)
        return NS_ERR_INVAL;
    uint64_t want = b->total - c->offset < NS_CHUNK_BYTES ? b->total - c->offset
                                                          : NS_CHUNK_BYTES;
    uint64_t k = c->offset / NS_CHUNK_BYTES;
    if (c->data_len != want || (b->seen[k / 8] & (1u << (k % 8))))
        return NS_ERR_INVAL;
    b->seen[k / 8] |= (uint8_t)(1u << (k % 8));
    memcpy(b->data + c->offset, c->data, c->data_len);
    b->got += c->data_len;
    if (f->in_flight)
        f->in_flight--;
    if (b->got == b->total)
        *done_blob = (int)i;
    return NS_OK;
}

bool ns_fetch_done(const ns_fetch_t *f)
{
    for (uint32_t i = 0; i < f->n_blobs; i++)
        if (f->blobs[i].total == 0 || f->blobs[i].got < f->blobs[i].total)
            return false;
    return true;
}

void ns_fetch_restart(ns_fetch_t *f)
{
    for (uint32_t i = 0; i < f->n_blobs; i++) {
        ns_fetch_blob_t *b = &f->blobs[i];
        b->next = b->got = 0;
        if (b->seen)
            memset(b->seen, 0, s_n_chunks(b->total) / 8 + 1);
    }
    f->cur = 0;
    f->in_flight = 0;
}

const ns_fetch_blob_t *ns_fetch_blob(const ns_fetch_t *f, uint32_t blob)
{
    for (uint32_t i = 0; i < f->n_blobs; i++)
        if (f->blobs[i].blob == blob)
            return &f->blobs[i];
    return NULL;
}

int ns_transfer_serve(const ns_chunk_t *fetch, const uint8_t *data,
                      uint64_t total, ns_buf_t *out)
{
    if (!data || fetch->offset >= total)
        return NS_ERR_INVAL;
    ns_chunk_t c = *fetch;
    c.total = total;
    c.data = data + c.offset;
    c.data_len = total - c.offset < c.len ? total - c.offset : c.len;
    return ns_chunk_encode(&c, out);
}
