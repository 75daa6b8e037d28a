/* content.c - blobs fetched from peers by content hash (content.h). */
#include "nightshift/content.h"

#include "nightshift/log.h"
#include "nightshift/market.h"
#include "nightshift/policy.h"
#include "nightshift/transfer.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    bool used;
    ns_hash_t id;
    uint64_t size; /* bytes, from the descriptor that names it */
    int fd;        /* its partial file in the store, or -1: in memory */
    bool no_spool; /* the store could not take it: in memory */
    uint8_t hint[NS_ID_BYTES];
    bool have_hint;
    ns_fetch_t fetch; /* from the current peer */
    bool fetching;
    uint64_t started_ms, progress_ms;
    uint64_t got; /* bytes at the last look */
    uint32_t tries;
} s_want_t;

struct ns_content {
    const ns_node_io_t *io;
    ns_blobs_t *blobs;
    ns_content_done_fn done;
    void *user;
    s_want_t want[NS_CONTENT_MAX_WANTED];
    ns_buf_t body;
    uint8_t *chunk; /* one chunk read from the store to serve */
};

ns_content_t *ns_content_new(const ns_node_io_t *io, ns_blobs_t *blobs,
                             ns_content_done_fn done, void *user, int *err)
{
    ns_content_t *c = calloc(1, sizeof *c);
    if (!c) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    c->io = io;
    c->blobs = blobs;
    c->done = done;
    c->user = user;
    ns_buf_init(&c->body);
    return c;
}

static void s_drop(s_want_t *w)
{
    /* a cut transfer keeps its verified prefix in the part file: the
     * next want of the same blob resumes from it */
    if (w->fetching)
        ns_fetch_release(&w->fetch);
    if (w->used && w->fd >= 0)
        close(w->fd);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

void ns_content_destroy(ns_content_t **cp)
{
    if (!cp || !*cp)
        return;
    ns_content_t *c = *cp;
    for (int i = 0; i < NS_CONTENT_MAX_WANTED; i++)
        s_drop(&c->want[i]);
    ns_buf_release(&c->body);
    free(c->chunk);
    free(c);
    *cp = NULL;
}

uint32_t ns_content_wanted(const ns_content_t *c)
{
    uint32_t n = 0;
    for (int i = 0; i < NS_CONTENT_MAX_WANTED; i++)
        n += c->want[i].used;
    return n;
}

int ns_content_want(ns_content_t *c, const ns_hash_t id, uint64_t size,
                    const uint8_t *hint)
{
    if (size == 0 || size > NS_MAX_BUFFER)
        return NS_ERR_INVAL;
    if (ns_blobs_has(c->blobs, id))
        return NS_OK;
    s_want_t *free_slot = NULL;
    for (int i = 0; i < NS_CONTENT_MAX_WANTED; i++) {
        if (c->want[i].used && memcmp(c->want[i].id, id, NS_HASH_BYTES) == 0)
            return NS_OK;
        if (!c->want[i].used && !free_slot)
            free_slot = &c->want[i];
    }
    if (!free_slot)
        return NS_ERR_TOOBIG;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = true;
    free_slot->fd = -1;
    free_slot->size = size;
    memcpy(free_slot->id, id, NS_HASH_BYTES);
    if (hint) {
        memcpy(free_slot->hint, hint, NS_ID_BYTES);
        free_slot->have_hint = true;
    }
    free_slot->started_ms = c->io->mono_ms(c->io->user);
    char hex[17];
    ns_hex(hex, id, 8);
    ns_info(NS_MOD_NODE, "event=blob_wanted blob=%s", hex);
    return NS_OK;
}

bool ns_content_is_ours(const ns_node_msg_t *m)
{
    ns_chunk_t ch;
    if (m->type == NS_MSG_MKT_FETCH)
        return ns_fetch_decode(m->body, m->len, &ch) == NS_OK &&
               ch.blob == NS_BLOB_CONTENT;
    if (m->type == NS_MSG_MKT_CHUNK)
        return ns_chunk_decode(m->body, m->len, &ch) == NS_OK &&
               ch.blob == NS_BLOB_CONTENT;
    return false;
}

/* A random live peer other than `not` (NULL: any). */
typedef struct {
    uint32_t seen, pick;
    const uint8_t * not ;
    uint8_t out[NS_ID_BYTES];
    bool found;
} s_pick_t;

static bool s_pick(void *u, const uint8_t id[NS_ID_BYTES],
                   const ns_heartbeat_t *hb)
{
    (void)hb;
    s_pick_t *p = u;
    if (p->not &&memcmp(id, p->not, NS_ID_BYTES) == 0)
        return false;
    /* reservoir sampling over the visit */
    if (randombytes_uniform(++p->seen) == 0) {
        memcpy(p->out, id, NS_ID_BYTES);
        p->found = true;
    }
    return false;
}

static void s_start(ns_content_t *c, s_want_t *w, uint64_t now)
{
    uint8_t peer[NS_ID_BYTES];
    if (w->have_hint && w->tries == 0) {
        memcpy(peer, w->hint, NS_ID_BYTES);
    } else {
        s_pick_t p = {0, 0, w->fetching ? w->fetch.peer : NULL, {0}, false};
        c->io->visit_peers(c->io->user, s_pick, &p);
        if (!p.found)
            return; /* nobody to ask now */
        memcpy(peer, p.out, NS_ID_BYTES);
    }
    if (w->fetching)
        ns_fetch_release(&w->fetch);
    char hex[17];
    ns_hex(hex, w->id, 8);
    /* into the store's part file as it arrives (resumed from what a cut
     * transfer left there), hashed on the way; in memory only when the
     * store cannot take it */
    if (w->fd < 0 && !w->no_spool) {
        int rc = ns_blobs_partial(c->blobs, w->id, w->size, &w->fd);
        if (rc != NS_OK) {
            w->fd = -1;
            w->no_spool = true;
            ns_warn(NS_MOD_NODE,
                    "event=blob_spool_failed blob=%s error=%s action=memory",
                    hex, ns_errname(rc));
        }
    }
    ns_fetch_init(&w->fetch, w->id, peer, NS_POLICY_FETCH_WINDOW);
    int rc = w->fd >= 0 ? ns_fetch_add_file(&w->fetch, NS_BLOB_CONTENT, w->fd,
                                            w->size, w->id)
                        : ns_fetch_add(&w->fetch, NS_BLOB_CONTENT, NULL,
                                       w->size, w->size);
    if (rc == NS_OK && w->fd >= 0 && w->fetch.blobs[0].resumed)
        ns_info(NS_MOD_NODE, "event=blob_resumed blob=%s bytes=%llu", hex,
                (unsigned long long)w->fetch.blobs[0].resumed);
    if (rc != NS_OK) {
        ns_fetch_release(&w->fetch);
        w->fetching = false;
        return;
    }
    w->fetching = true;
    w->tries++;
    w->progress_ms = now;
    w->got = 0;
}

int ns_content_on_msg(ns_content_t *c, const ns_node_msg_t *m)
{
    ns_chunk_t ch;
    if (m->type == NS_MSG_MKT_FETCH) {
        int rc = ns_fetch_decode(m->body, m->len, &ch);
        if (rc != NS_OK)
            return rc;
        /* one chunk read from the store's file, unchecked: the asker
         * checks the whole against the hash */
        if (!c->chunk && !(c->chunk = malloc(NS_CHUNK_BYTES)))
            return NS_ERR_NOMEM;
        size_t got = 0;
        uint64_t total = 0;
        rc = ns_blobs_read(c->blobs, ch.job_id, ch.offset, c->chunk,
                           ch.len < NS_CHUNK_BYTES ? ch.len : NS_CHUNK_BYTES,
                           &got, &total);
        if (rc == NS_ERR_INVAL)
            return rc; /* past the end */
        if (rc != NS_OK)
            return NS_OK; /* not ours to answer */
        ns_chunk_t out = ch;
        out.total = total;
        out.data = c->chunk;
        out.data_len = got;
        if ((rc = ns_chunk_encode(&out, &c->body)) != NS_OK)
            return rc;
        return m->reply(m->reply_ctx, NS_MSG_MKT_CHUNK, c->body.data,
                        c->body.len);
    }
    int rc = ns_chunk_decode(m->body, m->len, &ch);
    if (rc != NS_OK)
        return rc;
    for (int i = 0; i < NS_CONTENT_MAX_WANTED; i++) {
        s_want_t *w = &c->want[i];
        if (!w->used || !w->fetching ||
            memcmp(w->id, ch.job_id, NS_HASH_BYTES) ||
            memcmp(m->sender, w->fetch.peer, NS_ID_BYTES))
            continue;
        int done = -1;
        char hex[17];
        ns_hex(hex, w->id, 8);
        rc = ns_fetch_on_chunk(&w->fetch, &ch, &done);
        if (rc == NS_ERR_DUPLICATE)
            return NS_OK; /* an answer to a FETCH asked again */
        if (rc == NS_ERR_CORRUPT) {
            /* the whole does not hash right (the part file is emptied):
             * the peer sent other bytes, ask someone else */
            ns_warn(NS_MOD_NODE, "event=blob_mismatch blob=%s", hex);
            s_start(c, w, c->io->mono_ms(c->io->user));
            return NS_ERR_CORRUPT;
        }
        if (rc == NS_ERR_IO && w->fd >= 0) {
            /* our disk (full, gone): in memory from the start */
            ns_warn(NS_MOD_NODE,
                    "event=blob_spool_failed blob=%s error=%s action=memory",
                    hex, ns_errname(rc));
            ns_fetch_release(&w->fetch);
            w->fetching = false;
            close(w->fd);
            w->fd = -1;
            ns_blobs_discard(c->blobs, w->id);
            w->no_spool = true;
            w->tries = 0;
            s_start(c, w, c->io->mono_ms(c->io->user));
            return NS_OK;
        }
        if (rc != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_OK : rc;
        if (done < 0) {
            if (ns_fetch_pump(&w->fetch, c->io->send, c->io->user) != NS_OK)
                w->progress_ms = 0; /* the link is gone: another peer */
            return NS_OK;
        }
        const ns_fetch_blob_t *b = ns_fetch_blob(&w->fetch, NS_BLOB_CONTENT);
        ns_hash_t id;
        uint64_t total = b->total;
        memcpy(id, w->id, NS_HASH_BYTES);
        /* a part file checked as it arrived: renamed into place */
        rc = w->fd >= 0 ? ns_blobs_complete(c->blobs, id, total)
                        : ns_blobs_put(c->blobs, id, b->data, b->total);
        if (rc == NS_ERR_CORRUPT) {
            ns_warn(NS_MOD_NODE, "event=blob_mismatch blob=%s", hex);
            s_start(c, w, c->io->mono_ms(c->io->user));
            return NS_ERR_CORRUPT;
        }
        bool spooled = w->fd >= 0;
        s_drop(w);
        if (rc != NS_OK) {
            ns_warn(NS_MOD_NODE, "event=blob_store_failed blob=%s error=%s",
                    hex, ns_errname(rc));
            return NS_OK;
        }
        ns_info(NS_MOD_NODE, "event=blob_fetched blob=%s bytes=%llu via=%s",
                hex, (unsigned long long)total, spooled ? "file" : "memory");
        c->done(c->user, id);
        return NS_OK;
    }
    return NS_OK;
}

void ns_content_tick(ns_content_t *c, uint64_t now)
{
    for (int i = 0; i < NS_CONTENT_MAX_WANTED; i++) {
        s_want_t *w = &c->want[i];
        if (!w->used)
            continue;
        if (now - w->started_ms > NS_CONTENT_GIVEUP_MS) {
            s_drop(w);
            continue;
        }
        if (!w->fetching) {
            s_start(c, w, now);
        } else {
            const ns_fetch_blob_t *b =
                ns_fetch_blob(&w->fetch, NS_BLOB_CONTENT);
            uint64_t got = b ? b->got : 0;
            if (got != w->got) {
                w->got = got;
                w->progress_ms = now;
            } else if (now - w->progress_ms > NS_CONTENT_STALL_MS) {
                s_start(c, w, now); /* this peer has nothing: another */
            }
        }
        if (w->fetching &&
            ns_fetch_pump(&w->fetch, c->io->send, c->io->user) != NS_OK)
            w->progress_ms = 0; /* the link is gone: another peer */
    }
}
