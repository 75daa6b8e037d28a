/* genesis_serve.c - a node answers GENESIS_REQ from its stored genesis
 * (genesis.h, docs/PROTOCOL.md "Genesis transfer"), so that
 * `init --join` needs no file passed by hand. Anyone may ask: the file is
 * public. Each answer is one chunk, sent back over the connection the
 * request came on. A request of ~150 bytes buys up to 128 KiB, so besides
 * the per-link and strangers' message limits the answers share one budget
 * of bytes (S_SERVE_*): a stranger asking in a loop costs the node at most
 * that upload, and a genesis of the largest size still goes out to a few
 * joiners at once. */
#include "nightshift/genesis_serve.h"

#include "nightshift/genesis.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <stdlib.h>
#include <string.h>

#define S_SERVE_BYTES_PER_S (1024.0 * 1024) /* answer bytes, refill */
#define S_SERVE_BURST (4.0 * 1024 * 1024)   /* and bucket size */

struct ns_genesis_serve {
    ns_p2p_t *p2p;
    ns_hash_t network_id;
    uint8_t *text; /* the genesis file, total bytes */
    uint32_t total;
    ns_buf_t body;      /* encode buffer */
    double tokens;      /* answer bytes we may still send */
    uint64_t refill_us; /* monotonic time of the last refill */
};

static int s_on_request(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    ns_genesis_serve_t *g = user;
    uint32_t offset;
    int rc = ns_genesis_req_decode(env->body, env->body_len, &offset);
    if (rc != NS_OK)
        return rc;
    if (offset >= g->total)
        return NS_ERR_INVAL;
    ns_genesis_chunk_t c;
    ns_genesis_chunk_at(g->network_id, g->text, g->total, offset, &c);
    uint64_t now = ns_mono_us();
    g->tokens += (double)(now - g->refill_us) / 1e6 * S_SERVE_BYTES_PER_S;
    if (g->tokens > S_SERVE_BURST)
        g->tokens = S_SERVE_BURST;
    g->refill_us = now;
    if (g->tokens < c.len)
        return NS_ERR_RATE; /* counted as rate_limited; asked again later */
    g->tokens -= c.len;
    if ((rc = ns_genesis_chunk_encode(&c, &g->body)) != NS_OK)
        return rc;
    /* A requester that went away is no fault of the message (the send
     * failure is counted by the p2p). */
    if (ns_p2p_reply(g->p2p, src, NS_MSG_GENESIS, g->body.data, g->body.len) !=
        NS_OK)
        ns_debug(NS_MOD_NET, "event=genesis_reply_failed");
    return NS_OK;
}

ns_genesis_serve_t *ns_genesis_serve_new(ns_p2p_t *p2p, const uint8_t *text,
                                         size_t len, int *err)
{
    ns_genesis_serve_t *g = NULL;
    *err = NS_ERR_INVAL;
    if (len == 0 || len > NS_MAX_GENESIS_BYTES)
        return NULL;
    *err = NS_ERR_NOMEM;
    if (!(g = calloc(1, sizeof *g)) || !(g->text = malloc(len)))
        goto fail;
    memcpy(g->text, text, len);
    g->total = (uint32_t)len;
    g->p2p = p2p;
    ns_hash(g->network_id, text, len);
    ns_buf_init(&g->body);
    g->tokens = S_SERVE_BURST;
    g->refill_us = ns_mono_us();
    if ((*err = ns_p2p_register(p2p, NS_MSG_GENESIS_REQ, false, s_on_request,
                                g)) != NS_OK)
        goto fail;
    *err = NS_OK;
    return g;
fail:
    if (g)
        free(g->text);
    free(g);
    return NULL;
}

void ns_genesis_serve_destroy(ns_genesis_serve_t **gp)
{
    if (!gp || !*gp)
        return;
    ns_genesis_serve_t *g = *gp;
    (void)ns_p2p_unregister(g->p2p, NS_MSG_GENESIS_REQ);
    ns_buf_release(&g->body);
    free(g->text);
    free(g);
    *gp = NULL;
}
