/* challenger.c - the requester's side of a hardware challenge
 * (challenger.h). */
#include "nightshift/challenger.h"

#include "nightshift/policy.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ns_challenger_init(ns_challenger_t *c)
{
    memset(c, 0, sizeof *c);
    ns_buf_init(&c->body);
}

void ns_challenger_release(ns_challenger_t *c)
{
    if (c->fetching)
        ns_fetch_release(&c->fetch);
    ns_buf_release(&c->body);
    memset(c, 0, sizeof *c);
}

int ns_challenger_start(ns_challenger_t *c, const ns_node_io_t *io,
                        const uint8_t provider[NS_ID_BYTES], uint32_t device,
                        const ns_devinfo_t *claim, uint64_t label_bytes,
                        uint32_t imatmul_n, uint32_t allowance_ms,
                        uint64_t now_ms)
{
    if (c->fetching)
        ns_fetch_release(&c->fetch);
    ns_buf_t body = c->body;
    uint32_t late = c->active ? c->late_retries : 0;
    memset(c, 0, sizeof *c);
    c->body = body; /* busy_retries start at 0 */
    c->late_retries = late;
    c->allowance_ms = allowance_ms;
    c->device = device;
    c->claim = *claim;
    c->want_label_bytes = label_bytes;
    uint64_t cap =
        claim->max_alloc_bytes ? claim->max_alloc_bytes : NS_LABEL_MIN_BYTES;
    if (label_bytes > cap)
        label_bytes = cap;
    if (label_bytes < NS_LABEL_MIN_BYTES)
        label_bytes = NS_LABEL_MIN_BYTES;
    int rc = ns_label_params_init(&c->label, label_bytes, 4);
    if (rc != NS_OK)
        return rc;
    c->imatmul.n = imatmul_n;
    c->imatmul.p = NS_IMATMUL_DEFAULT_P;
    randombytes_buf(c->imatmul.seed, sizeof c->imatmul.seed);
    if (imatmul_n && (rc = ns_imatmul_params_check(&c->imatmul)) != NS_OK)
        return rc;
    randombytes_buf(c->msg.nonce, NS_HASH_BYTES);
    memcpy(c->msg.seed, c->imatmul.seed, sizeof c->msg.seed);
    c->msg.device = device;
    c->msg.label_bytes = c->label.bytes;
    c->msg.label_segments = c->label.segments;
    c->msg.k = NS_POLICY_CHAL_OPENINGS;
    c->msg.imatmul_n = imatmul_n;
    randombytes_buf(c->secret, sizeof c->secret);
    memcpy(c->provider, provider, NS_ID_BYTES);
    c->deadline_us =
        ns_label_deadline_claim_us(&c->label, claim) +
        (imatmul_n ? ns_imatmul_deadline_claim_us(&c->imatmul, claim) : 0);
    if ((rc = ns_chal_msg_encode(&c->msg, &c->body)) != NS_OK ||
        (rc = io->send(io->user, provider, NS_MSG_MKT_CHAL, c->body.data,
                       c->body.len)) != NS_OK)
        return rc;
    c->sent_ms = now_ms;
    c->active = true;
    return NS_OK;
}

bool ns_challenger_owns(const ns_challenger_t *c, const ns_node_msg_t *m)
{
    if (!c->active)
        return false;
    if (m->type == NS_MSG_MKT_CHAL_DONE) {
        ns_chal_done_t d;
        return ns_chal_done_decode(m->body, m->len, &d) == NS_OK &&
               memcmp(d.nonce, c->msg.nonce, NS_HASH_BYTES) == 0;
    }
    if (m->type == NS_MSG_MKT_CHUNK) {
        ns_chunk_t ch;
        return ns_chunk_decode(m->body, m->len, &ch) == NS_OK &&
               ch.blob == NS_BLOB_CHAL &&
               memcmp(ch.job_id, c->msg.nonce, NS_HASH_BYTES) == 0;
    }
    return false;
}

int ns_challenger_on_msg(ns_challenger_t *c, const ns_node_io_t *io,
                         const ns_node_msg_t *m, uint64_t now_ms)
{
    if (memcmp(m->sender, c->provider, NS_ID_BYTES))
        return NS_OK;
    if (m->type == NS_MSG_MKT_CHAL_DONE) {
        if (c->done)
            return NS_OK;
        int rc = ns_chal_done_decode(m->body, m->len, &c->answer);
        if (rc != NS_OK)
            return rc;
        c->done = true;
        c->elapsed_us = (now_ms - c->sent_ms) * 1000;
        if (c->answer.status != NS_OK || c->answer.answer_bytes == 0)
            return NS_OK; /* the verdict comes from the tick */
        ns_fetch_init(&c->fetch, c->msg.nonce, c->provider,
                      NS_POLICY_FETCH_WINDOW);
        c->fetching = true;
        if ((rc = ns_fetch_add(&c->fetch, NS_BLOB_CHAL, NULL,
                               c->answer.answer_bytes, 0)) != NS_OK)
            return rc;
        return ns_fetch_pump(&c->fetch, io->send, io->user);
    }
    ns_chunk_t ch;
    int rc = ns_chunk_decode(m->body, m->len, &ch), done = -1;
    if (rc != NS_OK || !c->fetching)
        return rc;
    rc = ns_fetch_on_chunk(&c->fetch, &ch, &done);
    if (rc != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_OK : rc;
    if (done < 0 && ns_fetch_pump(&c->fetch, io->send, io->user) != NS_OK)
        return NS_OK; /* the tick times it out */
    return NS_OK;
}

/* The fetched answer: the labelling's openings, then C. */
static int s_check(ns_challenger_t *c, char *why, size_t whylen)
{
    const ns_fetch_blob_t *b = ns_fetch_blob(&c->fetch, NS_BLOB_CHAL);
    const uint8_t *label = b->data;
    size_t label_len = (size_t)c->answer.label_answer_bytes;
    const uint8_t *cw = b->data + label_len;
    size_t c_len = (size_t)(b->total - label_len);
    uint64_t deadline = c->deadline_us + (uint64_t)c->allowance_ms * 1000;
    ns_chal_verdict v = NS_CHAL_PASSED;
    if (c->msg.label_bytes) {
        static ns_label_opening_t open[NS_CHAL_MAX_OPENINGS];
        static uint64_t got[NS_CHAL_MAX_OPENINGS], want[NS_CHAL_MAX_OPENINGS];
        ns_hash_t root;
        uint32_t k = 0;
        if (ns_label_answer_read(label, label_len, &c->label, root, got, &k,
                                 open) != NS_OK ||
            k != c->msg.k ||
            memcmp(root, c->answer.label_root, NS_HASH_BYTES)) {
            snprintf(why, whylen, "the labelling's answer does not read");
            return NS_CHAL_WRONG;
        }
        /* positions drawn from the root it committed to */
        ns_label_positions(&c->label, root, c->msg.seed, k, want);
        if (memcmp(got, want, k * sizeof *got)) {
            snprintf(why, whylen, "the labelling opened other positions");
            return NS_CHAL_WRONG;
        }
        v = ns_label_verify(&c->label, c->msg.seed, root, want, k, open,
                            c->elapsed_us, deadline, why, whylen);
        if (v != NS_CHAL_PASSED)
            return (int)v;
    }
    if (c->msg.imatmul_n) {
        uint64_t n = c->msg.imatmul_n;
        ns_hash_t h;
        ns_hash(h, cw, c_len);
        if (c_len != n * n * 4 || memcmp(h, c->answer.c_hash, NS_HASH_BYTES)) {
            snprintf(why, whylen, "the product is not the one committed");
            return NS_CHAL_WRONG;
        }
        uint32_t *cm = malloc(c_len);
        if (!cm) {
            snprintf(why, whylen, "out of memory");
            return NS_CHAL_WRONG;
        }
        memcpy(cm, cw, c_len);
        if (ns_imatmul_verify(&c->imatmul, cm, c->secret, 2, c->elapsed_us,
                              deadline, &v, why, whylen) != NS_OK)
            v = NS_CHAL_WRONG;
        free(cm);
    }
    return (int)v;
}

int ns_challenger_tick(ns_challenger_t *c, const ns_node_io_t *io,
                       uint64_t now_ms, char *why, size_t whylen)
{
    if (!c->active)
        return NS_CHALLENGER_PENDING;
    /* an answer that never comes is late at the latest after
     * NS_POLICY_CHAL_MAX_WAIT_MS, whatever the claim (unknown figures give
     * no deadline at all) */
    uint64_t limit_ms = c->deadline_us / 1000 + c->allowance_ms;
    if (limit_ms > NS_POLICY_CHAL_MAX_WAIT_MS)
        limit_ms = NS_POLICY_CHAL_MAX_WAIT_MS;
    int verdict = NS_CHALLENGER_PENDING;
    if (!c->done) {
        if (now_ms - c->sent_ms > limit_ms) {
            snprintf(why, whylen, "no answer within %llu ms",
                     (unsigned long long)limit_ms);
            verdict = NS_CHAL_LATE;
        }
    } else if (c->answer.status == NS_ERR_STATE &&
               c->busy_retries < NS_CHALLENGER_BUSY_RETRIES) {
        /* busy: ask again in a moment, the clock starting afresh */
        if (!c->busy_ms)
            c->busy_ms = now_ms;
        if (now_ms - c->busy_ms >= NS_CHALLENGER_BUSY_RETRY_MS) {
            c->busy_retries++;
            c->busy_ms = 0;
            c->done = false;
            if (ns_chal_msg_encode(&c->msg, &c->body) != NS_OK ||
                io->send(io->user, c->provider, NS_MSG_MKT_CHAL, c->body.data,
                         c->body.len) != NS_OK) {
                snprintf(why, whylen, "it cannot be reached");
                verdict = NS_CHAL_WRONG;
            }
            c->sent_ms = now_ms;
        }
    } else if (c->answer.status == NS_ERR_STATE) {
        snprintf(why, whylen, "it stayed busy through %u tries",
                 c->busy_retries + 1);
        verdict = NS_CHALLENGER_BUSY;
    } else if (c->answer.status != NS_OK || c->answer.answer_bytes == 0) {
        snprintf(why, whylen, "it could not run the challenge: %s",
                 ns_strerror(c->answer.status));
        verdict = NS_CHAL_WRONG;
    } else if (ns_fetch_done(&c->fetch)) {
        verdict = s_check(c, why, whylen);
    } else if (now_ms - c->sent_ms > limit_ms + NS_POLICY_CHAL_FETCH_MS) {
        snprintf(why, whylen, "its answer did not arrive");
        verdict = NS_CHAL_WRONG;
    }
    if (verdict == NS_CHAL_LATE &&
        c->late_retries < NS_CHALLENGER_LATE_RETRIES) {
        /* once more, afresh: momentary load is not a lie */
        uint32_t tries = c->late_retries + 1;
        uint8_t provider[NS_ID_BYTES];
        ns_devinfo_t claim = c->claim;
        memcpy(provider, c->provider, NS_ID_BYTES);
        c->active = true;
        c->late_retries = tries;
        if (ns_challenger_start(c, io, provider, c->device, &claim,
                                c->want_label_bytes, c->msg.imatmul_n,
                                c->allowance_ms, now_ms) == NS_OK)
            return NS_CHALLENGER_PENDING;
    }
    if (verdict != NS_CHALLENGER_PENDING)
        c->active = false;
    return verdict;
}
