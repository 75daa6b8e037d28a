/* transfer.c - blobs over FETCH/CHUNK: one implementation for both the
 * requester and the provider (transfer.h). */
#include "nightshift/transfer.h"

#include "nightshift/verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        ns_fetch_blob_t *b = &f->blobs[i];
        /* a cut transfer leaves only its verified prefix to resume from:
         * no chunk beyond a hole is mistaken for received */
        if (b->fd >= 0 && b->got < b->total)
            (void)ftruncate(b->fd,
                            (off_t)(b->hashed - b->hashed % NS_CHUNK_BYTES));
        if (f->blobs[i].owned)
            free(f->blobs[i].data);
        free(f->blobs[i].seen);
        free(f->blobs[i].hs);
    }
    ns_buf_release(&f->body);
    memset(f, 0, sizeof *f);
}

static uint64_t s_n_chunks(uint64_t total)
{
    return (total + NS_CHUNK_BYTES - 1) / NS_CHUNK_BYTES;
}

static bool s_seen(const ns_fetch_blob_t *b, uint64_t k)
{
    return b->seen && (b->seen[k / 8] & (1u << (k % 8)));
}

static uint64_t s_chunk_len(const ns_fetch_blob_t *b, uint64_t off)
{
    return b->total - off < NS_CHUNK_BYTES ? b->total - off : NS_CHUNK_BYTES;
}

/* A CHUNK holds whole commitment leaves (but for a blob's last). */
_Static_assert(NS_CHUNK_BYTES % NS_COMMIT_CHUNK == 0,
               "fetch chunks must hold whole leaves");

static bool s_hashing(const ns_fetch_blob_t *b)
{
    return b->check || b->fd >= 0 || b->leaves;
}

/* The leaves of len bytes at b->hashed (a leaf boundary). */
static void s_leaves(ns_fetch_blob_t *b, const uint8_t *p, uint64_t len)
{
    for (uint64_t j = 0; j < len; j += NS_COMMIT_CHUNK) {
        uint64_t c = (b->hashed + j) / NS_COMMIT_CHUNK;
        size_t n =
            len - j < NS_COMMIT_CHUNK ? (size_t)(len - j) : NS_COMMIT_CHUNK;
        ns_chunk_leaf(b->leaves[c], b->leaf_job, b->arg, c, p + j, n);
    }
}

/* Nothing received: bitmap, counters, hash state and file emptied. */
static void s_blob_reset(ns_fetch_blob_t *b)
{
    b->next = b->got = b->hashed = b->resumed = 0;
    if (b->seen)
        memset(b->seen, 0, s_n_chunks(b->total) / 8 + 1);
    if (b->hs)
        crypto_generichash_init(b->hs, NULL, 0, NS_HASH_BYTES);
    if (b->fd >= 0)
        (void)ftruncate(b->fd, 0);
}

static int s_pread_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NS_ERR_IO;
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return NS_OK;
}

static int s_pwrite_all(int fd, const uint8_t *buf, size_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NS_ERR_IO;
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return NS_OK;
}

/* Feed the hash every received chunk that extends the hashed prefix:
 * `fresh` (the chunk just received, when it is the next one) from memory,
 * the ones that came early from the blob's memory or read back from its
 * file, one chunk at a time. */
static int s_advance(ns_fetch_blob_t *b, const ns_chunk_t *fresh)
{
    uint8_t *buf = NULL;
    int rc = NS_OK;
    while (b->hashed < b->total && s_seen(b, b->hashed / NS_CHUNK_BYTES)) {
        uint64_t len = s_chunk_len(b, b->hashed);
        const uint8_t *p;
        if (fresh && fresh->offset == b->hashed) {
            p = fresh->data;
        } else if (b->fd < 0) {
            p = b->data + b->hashed;
        } else {
            if (!buf && !(buf = malloc(NS_CHUNK_BYTES))) {
                rc = NS_ERR_NOMEM;
                break;
            }
            if ((rc = s_pread_all(b->fd, buf, len, b->hashed)) != NS_OK)
                break;
            p = buf;
        }
        if (b->hs)
            crypto_generichash_update(b->hs, p, len);
        if (b->leaves)
            s_leaves(b, p, len);
        b->hashed += len;
    }
    free(buf);
    return rc;
}

/* Size known: the destination and the bitmap of chunks. */
static int s_blob_size(ns_fetch_blob_t *b, uint64_t total)
{
    b->total = total;
    b->seen = calloc(s_n_chunks(total) / 8 + 1, 1);
    if (!b->seen)
        return NS_ERR_NOMEM;
    if (b->check) {
        b->hs = aligned_alloc(64, (sizeof *b->hs + 63) / 64 * 64);
        if (!b->hs)
            return NS_ERR_NOMEM;
        crypto_generichash_init(b->hs, NULL, 0, NS_HASH_BYTES);
    }
    if (!b->data && b->fd < 0) {
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
    b->fd = -1;
    b->blob = blob;
    b->data = data;
    b->max = total ? total : max;
    if (total) {
        int rc = s_blob_size(b, total);
        if (rc != NS_OK) {
            if (b->owned)
                free(b->data);
            free(b->seen);
            free(b->hs);
            memset(b, 0, sizeof *b);
            return rc;
        }
    }
    f->n_blobs++;
    return NS_OK;
}

/* Resume from the whole chunks already in b's file (its size rounded down
 * to NS_CHUNK_BYTES, the last chunk always fetched again, so that
 * completion and its checks come with a CHUNK): they count as received,
 * are hashed from the file, and are not asked for. */
static int s_resume_file(ns_fetch_blob_t *b)
{
    struct stat st;
    if (fstat(b->fd, &st) != 0)
        return NS_ERR_IO;
    uint64_t have =
        (uint64_t)st.st_size < b->total ? (uint64_t)st.st_size : b->total - 1;
    have -= have % NS_CHUNK_BYTES;
    for (uint64_t k = 0; k < have / NS_CHUNK_BYTES; k++)
        b->seen[k / 8] |= (uint8_t)(1u << (k % 8));
    int rc = s_advance(b, NULL);
    if (rc == NS_OK)
        b->next = b->got = b->resumed = have;
    return rc;
}

int ns_fetch_add_file(ns_fetch_t *f, uint32_t blob, int fd, uint64_t total,
                      const ns_hash_t want)
{
    if (fd < 0 || total == 0)
        return NS_ERR_INVAL;
    if (f->n_blobs >= NS_FETCH_MAX_BLOBS)
        return NS_ERR_TOOBIG;
    ns_fetch_blob_t *b = &f->blobs[f->n_blobs];
    memset(b, 0, sizeof *b);
    b->blob = blob;
    b->fd = fd;
    b->max = total;
    b->check = true;
    memcpy(b->want, want, NS_HASH_BYTES);
    int rc = s_blob_size(b, total);
    if (rc == NS_OK)
        rc = s_resume_file(b);
    if (rc != NS_OK) {
        free(b->seen);
        free(b->hs);
        memset(b, 0, sizeof *b);
        return rc;
    }
    f->n_blobs++;
    return NS_OK;
}

int ns_fetch_add_output(ns_fetch_t *f, uint32_t blob, int fd, uint8_t *data,
                        uint64_t total, uint32_t arg, const ns_hash_t job_id,
                        ns_hash_t *leaves, bool resume)
{
    if (total == 0 || !leaves || (fd < 0 && !data))
        return NS_ERR_INVAL;
    if (f->n_blobs >= NS_FETCH_MAX_BLOBS)
        return NS_ERR_TOOBIG;
    if (fd >= 0 && !resume && ftruncate(fd, 0) != 0)
        return NS_ERR_IO;
    ns_fetch_blob_t *b = &f->blobs[f->n_blobs];
    memset(b, 0, sizeof *b);
    b->blob = blob;
    b->fd = fd;
    b->data = fd >= 0 ? NULL : data;
    b->max = total;
    b->leaves = leaves;
    b->arg = arg;
    memcpy(b->leaf_job, job_id, NS_HASH_BYTES);
    int rc = s_blob_size(b, total);
    if (rc == NS_OK && fd >= 0 && resume)
        rc = s_resume_file(b);
    if (rc != NS_OK) {
        free(b->seen);
        memset(b, 0, sizeof *b);
        return rc;
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
        while (b->total && b->next < b->total &&
               s_seen(b, b->next / NS_CHUNK_BYTES))
            b->next += s_chunk_len(b, b->next); /* received before a rewind */
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
    if (c->data_len != want)
        return NS_ERR_INVAL;
    if (b->seen[k / 8] & (1u << (k % 8)))
        return NS_ERR_DUPLICATE; /* nothing written twice */
    if (b->fd >= 0) {
        int rc = s_pwrite_all(b->fd, c->data, c->data_len, c->offset);
        if (rc != NS_OK)
            return rc; /* not counted: asked again after a rewind */
    } else {
        memcpy(b->data + c->offset, c->data, c->data_len);
    }
    b->seen[k / 8] |= (uint8_t)(1u << (k % 8));
    b->got += c->data_len;
    if (f->in_flight)
        f->in_flight--;
    if (s_hashing(b)) {
        int rc = s_advance(b, c);
        if (rc != NS_OK)
            return rc;
    }
    if (b->got == b->total) {
        if (b->check) {
            ns_hash_t h;
            crypto_generichash_final(b->hs, h, NS_HASH_BYTES);
            if (b->hashed != b->total ||
                sodium_memcmp(h, b->want, NS_HASH_BYTES)) {
                s_blob_reset(b);
                if (f->cur > i)
                    f->cur = i;
                return NS_ERR_CORRUPT;
            }
        }
        *done_blob = (int)i;
    }
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
        s_blob_reset(b);
    }
    f->cur = 0;
    f->in_flight = 0;
}

void ns_fetch_rewind(ns_fetch_t *f)
{
    for (uint32_t i = 0; i < f->n_blobs; i++) {
        ns_fetch_blob_t *b = &f->blobs[i];
        if (!b->total) {
            b->next = 0; /* the size was never learnt: ask again */
            continue;
        }
        uint64_t k = 0;
        while (k * NS_CHUNK_BYTES < b->total && s_seen(b, k))
            k++;
        b->next = k * NS_CHUNK_BYTES < b->total ? k * NS_CHUNK_BYTES : b->total;
    }
    f->in_flight = 0;
}

uint64_t ns_fetch_hashed(const ns_fetch_t *f, uint32_t blob)
{
    const ns_fetch_blob_t *b = ns_fetch_blob(f, blob);
    return b ? b->hashed : 0;
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
