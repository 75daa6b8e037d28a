/* prover.c - the provider's side of a hardware challenge (prover.h). */
#include "nightshift/prover.h"

#include "nightshift/challenge.h"
#include "nightshift/log.h"
#include "nightshift/transfer.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <string.h>

void ns_prover_init(ns_prover_t *pv)
{
    memset(pv, 0, sizeof *pv);
    ns_buf_init(&pv->answer);
    ns_buf_init(&pv->body);
    for (int i = 0; i < NS_PROVER_SERVED; i++)
        ns_buf_init(&pv->served[i].answer);
}

void ns_prover_release(ns_prover_t *pv)
{
    ns_buf_release(&pv->answer);
    ns_buf_release(&pv->body);
    for (int i = 0; i < NS_PROVER_SERVED; i++)
        ns_buf_release(&pv->served[i].answer);
    memset(pv, 0, sizeof *pv);
}

/* The finished answer goes to a serving slot (a free one, else the
 * oldest), its buffer swapped, not copied: the next challenge may start
 * while this one's challenger fetches it. */
static void s_serve_answer(ns_prover_t *pv, uint64_t now)
{
    ns_prover_served_t *slot = &pv->served[0];
    for (int i = 0; i < NS_PROVER_SERVED; i++) {
        ns_prover_served_t *x = &pv->served[i];
        if (!x->used) {
            slot = x;
            break;
        }
        if (x->since_ms < slot->since_ms)
            slot = x;
    }
    ns_buf_t spare = slot->answer;
    slot->answer = pv->answer;
    pv->answer = spare;
    pv->answer.len = 0;
    slot->used = true;
    memcpy(slot->nonce, pv->msg.nonce, NS_HASH_BYTES);
    memcpy(slot->requester, pv->requester, NS_ID_BYTES);
    slot->since_ms = now;
}

bool ns_prover_busy(const ns_prover_t *pv)
{
    return pv->state == NS_PROVER_WARMING || pv->state == NS_PROVER_LABEL ||
           pv->state == NS_PROVER_IMATMUL;
}

void ns_prover_warm(ns_prover_t *pv, ns_worker_t *w)
{
    if (pv->warm || pv->state != NS_PROVER_IDLE || ns_worker_busy(w))
        return;
    ns_chal_request_t r;
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_LABEL;
    r.k = 1;
    randombytes_buf(r.seed, sizeof r.seed);
    char err[128];
    if (ns_label_params_init(&r.label, NS_LABEL_MIN_BYTES, 1) != NS_OK ||
        ns_worker_submit_challenge(w, &r, err, sizeof err) != NS_OK) {
        pv->warm = true; /* nothing to warm: a real one pays, once */
        return;
    }
    pv->state = NS_PROVER_WARMING;
}

static void s_done(ns_prover_t *pv, const ns_node_io_t *io, int status,
                   uint64_t now)
{
    pv->done.status = status;
    memcpy(pv->done.nonce, pv->msg.nonce, NS_HASH_BYTES);
    pv->done.answer_bytes = status == NS_OK ? pv->answer.len : 0;
    uint64_t bytes = pv->done.answer_bytes;
    if (status == NS_OK)
        s_serve_answer(pv, now); /* before CHAL_DONE: it is fetched next */
    if (ns_chal_done_encode(&pv->done, &pv->body) == NS_OK &&
        io->send(io->user, pv->requester, NS_MSG_MKT_CHAL_DONE, pv->body.data,
                 pv->body.len) != NS_OK)
        ns_debug(NS_MOD_MARKET, "event=chal_done_unsent");
    pv->state = NS_PROVER_IDLE;
    pv->since_ms = now;
    char n[17];
    ns_hex(n, pv->msg.nonce, 8);
    ns_info(NS_MOD_MARKET,
            "event=challenge_answered nonce=%s status=%s "
            "bytes=%llu",
            n, ns_errname(status), (unsigned long long)bytes);
}

static int s_submit_imatmul(ns_prover_t *pv, ns_worker_t *w)
{
    ns_chal_request_t r;
    char err[128];
    memset(&r, 0, sizeof r);
    r.kind = NS_CHAL_KIND_IMATMUL;
    r.imatmul.n = pv->msg.imatmul_n;
    r.imatmul.p = NS_IMATMUL_DEFAULT_P;
    memcpy(r.seed, pv->msg.seed, sizeof r.seed);
    int rc = ns_worker_submit_challenge(w, &r, err, sizeof err);
    if (rc == NS_OK)
        pv->state = NS_PROVER_IMATMUL;
    return rc;
}

void ns_prover_start(ns_prover_t *pv, ns_worker_t *w, const ns_node_io_t *io,
                     const ns_chal_msg_t *m, const uint8_t requester[32],
                     uint64_t max_alloc_bytes, uint64_t now)
{
    pv->msg = *m;
    memcpy(pv->requester, requester, NS_ID_BYTES);
    memset(&pv->done, 0, sizeof pv->done);
    pv->answer.len = 0;
    ns_chal_request_t r;
    char err[160];
    memset(&r, 0, sizeof r);
    memcpy(r.seed, m->seed, sizeof r.seed);
    int rc = NS_OK;
    if (m->label_bytes) {
        r.kind = NS_CHAL_KIND_LABEL;
        r.k = m->k;
        /* both sides derive the same parameters from (bytes, segments) */
        rc = ns_label_params_init(&r.label, m->label_bytes, m->label_segments);
        if (rc == NS_OK && r.label.bytes != m->label_bytes)
            rc = NS_ERR_INVAL;
        if (rc == NS_OK)
            rc = ns_chal_request_check(&r, max_alloc_bytes, err, sizeof err);
        if (rc == NS_OK)
            rc = ns_worker_submit_challenge(w, &r, err, sizeof err);
        if (rc == NS_OK)
            pv->state = NS_PROVER_LABEL;
    } else {
        rc = s_submit_imatmul(pv, w);
    }
    if (rc != NS_OK)
        s_done(pv, io, rc, now);
}

void ns_prover_tick(ns_prover_t *pv, ns_worker_t *w, const ns_node_io_t *io,
                    uint64_t now)
{
    for (int i = 0; i < NS_PROVER_SERVED; i++) {
        ns_prover_served_t *x = &pv->served[i];
        if (x->used && now - x->since_ms > NS_PROVER_KEEP_MS) {
            x->used = false;
            ns_buf_release(&x->answer); /* give the memory back */
        }
    }
    if (!ns_prover_busy(pv) || !w)
        return;
    ns_worker_result_t res;
    memset(&res, 0, sizeof res);
    int got = ns_worker_collect(w, &res);
    if (got == 0)
        return;
    int rc = got < 0 ? got : res.status;
    if (pv->state == NS_PROVER_WARMING) {
        pv->warm = true;
        pv->state = NS_PROVER_IDLE;
        ns_info(NS_MOD_MARKET, "event=challenge_programs_ready status=%s",
                ns_errname(rc));
    } else if (rc != NS_OK) {
        s_done(pv, io, rc, now);
    } else if (pv->state == NS_PROVER_LABEL) {
        memcpy(pv->done.label_root, res.chal_root, NS_HASH_BYTES);
        rc = ns_buf_append(&pv->answer, res.chal_bytes, res.chal_len);
        pv->done.label_answer_bytes = res.chal_len;
        if (rc == NS_OK && pv->msg.imatmul_n)
            rc = s_submit_imatmul(pv, w);
        if (rc != NS_OK || !pv->msg.imatmul_n)
            s_done(pv, io, rc, now);
    } else { /* IMATMUL */
        memcpy(pv->done.c_hash, res.chal_root, NS_HASH_BYTES);
        rc = ns_buf_append(&pv->answer, res.chal_bytes, res.chal_len);
        s_done(pv, io, rc, now);
    }
    ns_worker_result_release(&res);
}

int ns_prover_serve(ns_prover_t *pv, const ns_node_msg_t *m)
{
    ns_chunk_t c;
    int rc = ns_fetch_decode(m->body, m->len, &c);
    if (rc != NS_OK)
        return rc;
    const ns_prover_served_t *x = NULL;
    for (int i = 0; c.blob == NS_BLOB_CHAL && i < NS_PROVER_SERVED; i++)
        if (pv->served[i].used &&
            memcmp(c.job_id, pv->served[i].nonce, NS_HASH_BYTES) == 0 &&
            memcmp(m->sender, pv->served[i].requester, NS_ID_BYTES) == 0)
            x = &pv->served[i];
    if (!x)
        return NS_ERR_NOTFOUND;
    if ((rc = ns_transfer_serve(&c, x->answer.data, x->answer.len,
                                &pv->body)) != NS_OK)
        return rc;
    return m->reply(m->reply_ctx, NS_MSG_MKT_CHUNK, pv->body.data,
                    pv->body.len);
}
