/* hosted.c - jobs submitted through the control socket (hosted.h). */
#include "hosted.h"

#include "nightshift/blobs.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ns_hosted {
    ns_hash_t job_id;
    ns_job_t job;
    uint8_t *packed;
    size_t packed_len;
    /* the inputs: copied into the node's blob store a budget at a time
     * (ns_hosted_copy, from the node's loop), then mapped read-only */
    ns_blobs_copy_t *copy[NS_MAX_ARGS];
    const uint8_t *mapped[NS_MAX_ARGS];
    ns_input_t inputs[NS_MAX_ARGS];
    uint64_t copy_bytes;   /* the inputs' bytes together, for the lines */
    uint64_t held_bytes;   /* ... of those the store held already */
    ns_requester_opts_t o; /* the job, for its requester */
    ns_receipt_t rc;       /* before there is a requester: JOIN or FAILED */
    uint8_t *outputs[NS_MAX_ARGS]; /* OUT arguments without a path */
    char out_path[NS_MAX_ARGS][NS_CTL_MAX_PATH];
    char source_name[128]; /* the kernel file, for the pre-flight's lines */
    /* by argument: out_path, or NULL; the requester receives the output
     * into a file beside it and renames it there once settled */
    const char *out_paths[NS_MAX_ARGS];
    ns_requester_t *req; /* owned by the node */
    uint64_t started_ms; /* mono, attached to its requester */
    uint64_t max_price;  /* micro-credits, the submitter's ceiling */
    uint64_t finished_ms;
    uint32_t n_lines; /* lines said so far; the last NS_HOSTED_LINES kept */
    char lines[NS_HOSTED_LINES][NS_CTL_LINE_MAX + 1];
};

static void s_progress(void *user, const char *line)
{
    ns_hosted_t *h = user;
    char *dst = h->lines[h->n_lines % NS_HOSTED_LINES];
    size_t n = 0;
    for (; line[n] && n < NS_CTL_LINE_MAX; n++)
        dst[n] =
            (unsigned char)line[n] < 0x20 || line[n] == 0x7f ? ' ' : line[n];
    dst[n] = '\0';
    h->n_lines++;
}

__attribute__((format(printf, 2, 3))) static void
s_progress_f(ns_hosted_t *h, const char *fmt, ...)
{
    char line[NS_CTL_LINE_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s_progress(h, line);
}

/* The job's distinct inputs (by hash) fit the store together: one must
 * not evict another. */
static int s_inputs_fit(const ns_job_t *job, const ns_blobs_t *blobs, char *err,
                        size_t errlen)
{
    uint64_t total = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < job->n_args; i++) {
        bool again = false;
        for (uint32_t k = 0; k < i && !again; k++)
            again = job->args[k].kind == NS_ARG_IN &&
                    memcmp(job->args[k].hash, job->args[i].hash,
                           NS_HASH_BYTES) == 0;
        if (job->args[i].kind == NS_ARG_IN && !again) {
            total += job->args[i].size;
            n++;
        }
    }
    /* one input too large is named by ns_blobs_copy_start */
    if (n < 2 || total <= ns_blobs_cap(blobs))
        return NS_OK;
    snprintf(err, errlen,
             "the job's inputs (%" PRIu64 " bytes together) do not fit the "
             "blob store %s (%" PRIu64 " bytes, node.input_cache_bytes)",
             total, ns_blobs_dir(blobs), ns_blobs_cap(blobs));
    return NS_ERR_TOOBIG;
}

/* The outputs' places, and a copy started for each input: a file that
 * is missing, unreadable or larger than the store is refused here. */
static int s_prepare_args(ns_hosted_t *h, const ns_ctl_req_t *r,
                          ns_blobs_t *blobs, char *err, size_t errlen)
{
    int fits = s_inputs_fit(&h->job, blobs, err, errlen);
    if (fits != NS_OK)
        return fits;
    for (uint32_t i = 0; i < h->job.n_args; i++) {
        const ns_arg_t *a = &h->job.args[i];
        if (a->kind == NS_ARG_OUT) {
            snprintf(h->out_path[i], NS_CTL_MAX_PATH, "%s", r->out_path[i]);
            if (h->out_path[i][0])
                h->out_paths[i] = h->out_path[i];
            /* else kept nowhere (a pipeline's intermediate): the
             * requester takes it into a temporary file of its own */
            continue;
        }
        if (a->kind != NS_ARG_IN)
            continue;
        /* an input the store holds already (the same weights for many
         * jobs): its stored copy, checked against the hash as it is
         * mapped, and no copy of the file */
        size_t len = 0;
        if (a->size <= ns_blobs_cap(blobs) && ns_blobs_has(blobs, a->hash) &&
            ns_blobs_map(blobs, a->hash, &h->mapped[i], &len) == NS_OK) {
            if (len == a->size) {
                h->inputs[i].data = h->mapped[i];
                h->inputs[i].len = len;
                h->inputs[i].verified = true;
                h->held_bytes += a->size;
                continue;
            }
            ns_blobs_unmap(h->mapped[i], len);
            h->mapped[i] = NULL;
        }
        /* the node's own copy, made in pieces: what the job serves and
         * checks stays what was submitted, whatever happens to the file */
        char why[NS_CTL_MAX_PATH + 200];
        int rc = NS_ERR_NOTFOUND;
        if (r->in_path[i][0])
            h->copy[i] = ns_blobs_copy_start(blobs, r->in_path[i], a->size, &rc,
                                             why, sizeof why);
        if (!h->copy[i]) {
            snprintf(err, errlen, "arg %u: %s", i,
                     r->in_path[i][0] ? why : "no input file given");
            return rc;
        }
        h->copy_bytes += a->size;
    }
    return NS_OK;
}

bool ns_hosted_copying(const ns_hosted_t *h)
{
    if (h->rc.phase == NS_RQ_FAILED)
        return false;
    for (uint32_t i = 0; i < h->job.n_args; i++)
        if (h->copy[i])
            return true;
    return false;
}

void ns_hosted_fail(ns_hosted_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->rc.error, sizeof h->rc.error, fmt, ap);
    va_end(ap);
    h->rc.phase = NS_RQ_FAILED;
    for (uint32_t i = 0; i < h->job.n_args; i++)
        ns_blobs_copy_free(&h->copy[i]);
    s_progress(h, h->rc.error);
}

int ns_hosted_copy(ns_hosted_t *h, uint64_t budget, bool *ready)
{
    char why[NS_CTL_MAX_PATH + 200];
    *ready = false;
    for (uint32_t i = 0; i < h->job.n_args && budget; i++) {
        const ns_arg_t *a = &h->job.args[i];
        bool done = false;
        if (!h->copy[i])
            continue;
        uint64_t before = ns_blobs_copy_bytes(h->copy[i]);
        int rc = ns_blobs_copy_step(h->copy[i], budget, &done, why, sizeof why);
        uint64_t moved = ns_blobs_copy_bytes(h->copy[i]) - before;
        budget -= moved < budget ? moved : budget;
        ns_hash_t id;
        uint64_t size = 0;
        if (rc == NS_OK && done)
            rc = ns_blobs_copy_map(h->copy[i], id, &h->mapped[i], &size, why,
                                   sizeof why);
        if (rc == NS_OK && done &&
            (size != a->size || memcmp(id, a->hash, NS_HASH_BYTES))) {
            snprintf(why, sizeof why,
                     "the input file changed since the job was made (size or "
                     "hash differs)");
            ns_blobs_unmap(h->mapped[i], (size_t)size);
            h->mapped[i] = NULL;
            rc = NS_ERR_CORRUPT;
        }
        if (rc != NS_OK) {
            ns_hosted_fail(h, "arg %u: %s", i, why);
            return rc;
        }
        if (!done)
            return NS_OK; /* the budget is spent */
        ns_blobs_copy_free(&h->copy[i]);
        h->inputs[i].data = h->mapped[i];
        h->inputs[i].len = (size_t)size;
        h->inputs[i].verified = true;
    }
    *ready = !ns_hosted_copying(h) && h->rc.phase != NS_RQ_FAILED;
    if (*ready && h->copy_bytes)
        s_progress_f(h, "inputs copied into the node's blob store (%.1f MiB)",
                     (double)h->copy_bytes / (1 << 20));
    return NS_OK;
}

ns_hosted_t *ns_hosted_new(const ns_ctl_req_t *r, const uint8_t me[32],
                           ns_blobs_t *blobs, uint64_t now_ms, char *err,
                           size_t errlen)
{
    ns_hosted_t *h = calloc(1, sizeof *h);
    char why[256];
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ns_job_init(&h->job);
    ns_mpr_t rd;
    ns_mpr_init(&rd, r->desc, r->desc_len);
    if (ns_job_read(&rd, &h->job, why, sizeof why) != NS_OK ||
        ns_mpr_end(&rd) != NS_OK) {
        snprintf(err, errlen, "the job does not read: %s", why);
        goto fail;
    }
    if (ns_job_validate(&h->job, why, sizeof why) != NS_OK) {
        snprintf(err, errlen, "invalid job: %s", why);
        goto fail;
    }
    if (r->n_args != h->job.n_args) {
        snprintf(err, errlen, "%u paths for %u arguments", r->n_args,
                 h->job.n_args);
        goto fail;
    }
    h->packed = malloc(r->desc_len);
    if (!h->packed) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    memcpy(h->packed, r->desc, r->desc_len);
    h->packed_len = r->desc_len;
    if (s_prepare_args(h, r, blobs, err, errlen) != NS_OK)
        goto fail;
    if (h->held_bytes)
        s_progress_f(h, "%.1f MiB of inputs already in the node's blob store",
                     (double)h->held_bytes / (1 << 20));
    h->started_ms = now_ms;
    h->rc.phase = NS_RQ_JOIN;
    ns_requester_opts_t *o = &h->o;
    o->job = &h->job;
    o->packed = h->packed;
    o->packed_len = h->packed_len;
    o->inputs = h->inputs;
    o->outputs = h->outputs;
    o->out_paths = h->out_paths;
    o->scratch_dir = ns_blobs_dir(blobs); /* the node's own, private */
    snprintf(h->source_name, sizeof h->source_name, "%s", r->source_name);
    o->source_name = h->source_name[0] ? h->source_name : NULL;
    if (ns_job_id(&h->job, o->desc_id) != NS_OK) {
        snprintf(err, errlen, "cannot encode the job");
        goto fail;
    }
    randombytes_buf(o->nonce, sizeof o->nonce);
    ns_ledger_job_id(o->job_id, me, o->desc_id, o->nonce);
    memcpy(h->job_id, o->job_id, NS_HASH_BYTES);
    o->max_price = r->terms.max_price;
    h->max_price = r->terms.max_price;
    o->collateral = r->terms.collateral;
    o->bid_window_ms = r->terms.bid_window_ms;
    o->deadline_s = r->terms.deadline_s;
    o->timeout_s = r->terms.timeout_s;
    o->reqs = r->terms.reqs;
    o->no_wait = r->terms.no_wait;
    o->join = false; /* the node is part of the network already */
    o->progress = s_progress;
    o->progress_user = h;
    o->progress_ticks = true;
    return h;
fail:
    ns_hosted_destroy(&h);
    return NULL;
}

void ns_hosted_destroy(ns_hosted_t **hp)
{
    if (!hp || !*hp)
        return;
    ns_hosted_t *h = *hp;
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        ns_blobs_copy_free(&h->copy[i]);
        ns_blobs_unmap(h->mapped[i], h->inputs[i].len);
        free(h->outputs[i]);
    }
    free(h->packed);
    ns_job_release(&h->job);
    free(h);
    *hp = NULL;
}

ns_requester_opts_t *ns_hosted_opts(ns_hosted_t *h)
{
    return &h->o;
}

void ns_hosted_attach(ns_hosted_t *h, ns_requester_t *q)
{
    h->req = q;
}

/* The requester's receipt, or the job's own before it has one. */
static const ns_receipt_t *s_receipt(const ns_hosted_t *h)
{
    return h->req ? ns_requester_receipt(h->req) : &h->rc;
}

static bool s_finished(const ns_hosted_t *h)
{
    return h->req ? ns_requester_finished(h->req) : h->rc.phase == NS_RQ_FAILED;
}

void ns_hosted_pack(ns_hosted_t *h, uint64_t now_ms, msgpack_packer *pk)
{
    const ns_receipt_t *r = s_receipt(h);
    char hex[2 * NS_HASH_BYTES + 1], peer[NS_ID_TEXT_LEN + 1];
    static const uint8_t zero[NS_ID_BYTES];
    bool has_provider = memcmp(r->provider, zero, NS_ID_BYTES) != 0;
    uint64_t done = ns_hosted_finished_ms(h, now_ms);
    ns_hex(hex, h->job_id, NS_HASH_BYTES);
    msgpack_pack_map(pk, 10);
    ns_mp_str(pk, "id");
    ns_mp_str(pk, hex);
    ns_mp_str(pk, "role");
    ns_mp_str(pk, "requester");
    ns_mp_str(pk, "phase");
    ns_mp_str(pk, ns_rq_phase_name(r->phase));
    ns_mp_str(pk, "peer"); /* the provider, once one won */
    if (has_provider) {
        ns_id_text(peer, r->provider);
        ns_mp_str(pk, peer);
    } else {
        msgpack_pack_nil(pk);
    }
    ns_mp_str(pk, "price"); /* settled price, else the ceiling */
    ns_mp_credits(pk, r->price ? r->price : h->max_price);
    ns_mp_str(pk, "age_ms");
    msgpack_pack_uint64(pk, now_ms - h->started_ms);
    ns_mp_str(pk, "finished");
    if (done)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    ns_mp_str(pk, "rounds");
    msgpack_pack_uint32(pk, r->rounds);
    ns_mp_str(pk, "checked");
    msgpack_pack_uint32(pk, r->checked);
    ns_mp_str(pk, "error");
    ns_mp_str(pk, r->phase == NS_RQ_FAILED ? r->error : "");
}

ns_requester_t *ns_hosted_requester(const ns_hosted_t *h)
{
    return h->req;
}

const uint8_t *ns_hosted_job_id(const ns_hosted_t *h)
{
    return h->job_id;
}

uint64_t ns_hosted_finished_ms(ns_hosted_t *h, uint64_t now_ms)
{
    if (!h->finished_ms && s_finished(h))
        h->finished_ms = now_ms ? now_ms : 1;
    return h->finished_ms;
}

void ns_hosted_progress(const ns_hosted_t *h, uint32_t from, ns_ctl_job_t *j)
{
    memset(j, 0, sizeof *j);
    const ns_receipt_t *r = s_receipt(h);
    j->phase = r->phase;
    j->finished = s_finished(h);
    uint32_t oldest =
        h->n_lines > NS_HOSTED_LINES ? h->n_lines - NS_HOSTED_LINES : 0;
    if (from < oldest)
        from = oldest;
    while (from < h->n_lines && j->n_lines < NS_CTL_JOB_LINES) {
        snprintf(j->lines[j->n_lines++], NS_CTL_LINE_MAX + 1, "%s",
                 h->lines[from % NS_HOSTED_LINES]);
        from++;
    }
    j->next_line = from;
    if (j->finished && from == h->n_lines) {
        j->receipt = *r;
        for (char *c = j->receipt.error; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = ' ';
    } else {
        j->finished = false; /* the submitter reads every line first */
    }
}
