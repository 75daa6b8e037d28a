/* slash.c - fraud proofs in SLASH entries, checked by every node. */
#include "nightshift/slash.h"

#include "nightshift/log.h"
#include "nightshift/mp.h"

#include <stdlib.h>
#include <string.h>

int ns_slash_proof_pack(const ns_fraud_proof_t *p, const ns_input_t *inputs,
                        ns_buf_t *out, bool *inline_inputs)
{
    if (inline_inputs)
        *inline_inputs = false;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, 2);
    ns_fraud_pack(&pk, p);
    size_t in_bytes = 0;
    uint32_t n_in = 0;
    for (uint32_t i = 0; i < p->job.n_args; i++)
        if (p->job.args[i].kind == NS_ARG_IN) {
            in_bytes += inputs[i].len;
            n_in++;
        }
    if (w.err == NS_OK &&
        out->len + in_bytes + 16 * n_in + 64 <= NS_MAX_PROOF) {
        msgpack_pack_array(&pk, n_in);
        for (uint32_t i = 0; i < p->job.n_args; i++)
            if (p->job.args[i].kind == NS_ARG_IN)
                ns_mp_bin(&pk, inputs[i].data, inputs[i].len);
        if (inline_inputs)
            *inline_inputs = true;
    } else {
        msgpack_pack_nil(&pk);
    }
    if (w.err == NS_OK && out->len > NS_MAX_PROOF)
        return NS_ERR_TOOBIG;
    return w.err;
}

int ns_slash_keep_inputs(ns_blobs_t *blobs, const ns_job_t *job,
                         const ns_input_t *inputs)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (job->args[i].kind != NS_ARG_IN)
            continue;
        int rc = ns_blobs_put(blobs, job->args[i].hash, inputs[i].data,
                              inputs[i].len);
        if (rc != NS_OK)
            return rc;
    }
    return NS_OK;
}

int ns_slash_keep_outputs(ns_blobs_t *blobs, const ns_fraud_proof_t *p,
                          uint8_t *const *outputs)
{
    uint32_t o = 0;
    for (uint32_t i = 0; i < p->job.n_args && o < p->n_outs; i++) {
        if (p->job.args[i].kind != NS_ARG_OUT)
            continue;
        int rc = ns_blobs_put(blobs, p->outs[o++], outputs[i],
                              (size_t)p->job.args[i].size);
        if (rc != NS_OK)
            return rc;
    }
    return NS_OK;
}

/* Inputs that did not travel in the proof (want_in), and a pipeline
 * proof's claimed buffers (its outs, into inputs[] at their OUT
 * positions): mapped from the blob store (pages of the file, not the
 * heap), or asked from peers (the SLASH's author, the requester, first)
 * into the store. mapped[i]: bytes mapped for input i, to unmap. */
static int s_inputs_by_hash(ns_slash_ctx_t *ctx, const ns_ledger_job_t *job,
                            const ns_fraud_proof_t *p, bool want_in,
                            ns_input_t *inputs, size_t *mapped,
                            uint8_t missing[NS_HASH_BYTES])
{
    uint32_t o = 0;
    for (uint32_t i = 0; i < p->job.n_args; i++) {
        const ns_arg_t *a = &p->job.args[i];
        const uint8_t *hash = a->hash;
        if (a->kind == NS_ARG_OUT && p->n_outs)
            hash = p->outs[o++]; /* a pipeline's claimed buffer */
        else if (a->kind != NS_ARG_IN || !want_in)
            continue;
        size_t len = 0;
        const uint8_t *data = NULL;
        int rc = ctx->blobs ? ns_blobs_map(ctx->blobs, hash, &data, &len)
                            : NS_ERR_NOTFOUND;
        if (rc == NS_OK) {
            inputs[i].data = data;
            inputs[i].len = len;
            mapped[i] = len;
        }
        if (rc == NS_OK && len == a->size) {
            inputs[i].verified = true; /* the store checked the hash */
            continue;
        }
        if (rc == NS_OK) /* the hash matches but not the size: forged */
            return NS_ERR_PROOF;
        memcpy(missing, hash, NS_HASH_BYTES);
        if (ctx->content && ns_content_want(ctx->content, hash, a->size,
                                            job->requester) != NS_OK)
            ns_debug(NS_MOD_MARKET, "event=slash_input_queue_full");
        return NS_ERR_MISSING;
    }
    return NS_OK;
}

int ns_slash_proof_read(const uint8_t *buf, size_t len, ns_fraud_proof_t *p,
                        ns_input_t *inputs, bool *inline_inputs, char *err,
                        size_t errlen)
{
    ns_mpr_t r;
    memset(p, 0, sizeof *p);
    memset(inputs, 0, NS_MAX_ARGS * sizeof *inputs);
    *inline_inputs = false;
    ns_mpr_init(&r, buf, len);
    if (ns_mpr_array_exact(&r, 2) != NS_OK) {
        snprintf(err, errlen, "not a SLASH proof: [proof, inputs]");
        return NS_ERR_INVAL;
    }
    int rc = ns_fraud_read(&r, p, err, errlen);
    if (rc != NS_OK)
        return rc;
    if (r.left && r.p[0] == 0xc0) { /* nil: the inputs go by hash */
        r.p++;
        r.left--;
    } else {
        uint32_t n = 0, n_in = 0, k = 0;
        for (uint32_t i = 0; i < p->job.n_args; i++)
            n_in += p->job.args[i].kind == NS_ARG_IN;
        ns_mpr_array(&r, &n, NS_MAX_ARGS);
        if (r.err == NS_OK && n != n_in)
            r.err = NS_ERR_INVAL; /* one bin per input, exactly */
        for (uint32_t i = 0; i < p->job.n_args && r.err == NS_OK; i++) {
            if (p->job.args[i].kind != NS_ARG_IN)
                continue;
            const uint8_t *d = NULL;
            size_t dl = 0;
            if (ns_mpr_bin(&r, &d, &dl, NS_MAX_PROOF) == NS_OK &&
                dl != p->job.args[i].size)
                r.err = NS_ERR_INVAL;
            inputs[i].data = d;
            inputs[i].len = dl;
            k++;
        }
        *inline_inputs = r.err == NS_OK && k == n_in;
    }
    if (ns_mpr_end(&r) != NS_OK) {
        snprintf(err, errlen, "malformed inputs in the SLASH proof");
        ns_fraud_release(p);
        memset(inputs, 0, NS_MAX_ARGS * sizeof *inputs);
        *inline_inputs = false;
        return r.err ? r.err : NS_ERR_INVAL;
    }
    return NS_OK;
}

int ns_slash_verify(void *user, const ns_ledger_job_t *job,
                    const uint8_t *provider, const ns_hash_t root,
                    uint64_t n_items, const uint8_t *proof, size_t len,
                    uint8_t missing[NS_HASH_BYTES])
{
    ns_slash_ctx_t *ctx = user;
    ns_fraud_proof_t p;
    char err[256];
    ns_input_t inputs[NS_MAX_ARGS];
    size_t mapped[NS_MAX_ARGS];
    memset(&p, 0, sizeof p);
    memset(inputs, 0, sizeof inputs);
    memset(mapped, 0, sizeof mapped);
    if (ctx->reran)
        *ctx->reran = false;
    bool have_inputs = false;
    if (ns_slash_proof_read(proof, len, &p, inputs, &have_inputs, err,
                            sizeof err) != NS_OK)
        return NS_ERR_PROOF;
    int rc = NS_ERR_PROOF;
    /* The proof must be about this job's RESULT on record. */
    if (memcmp(p.job_id, job->desc_id, NS_HASH_BYTES) ||
        memcmp(p.provider, provider, NS_ID_BYTES) ||
        memcmp(p.root, root, NS_HASH_BYTES) || p.n_units != n_items)
        goto out;
    if (ns_fraud_verify_claim(&p, err, sizeof err) != NS_OK)
        goto out;
    if ((!have_inputs || p.n_outs) &&
        (rc = s_inputs_by_hash(ctx, job, &p, !have_inputs, inputs, mapped,
                               missing)) != NS_OK)
        goto out;
    rc = NS_ERR_PROOF;
    if (ctx->runner) {
        rc = ns_fraud_check(ctx->runner, &p, inputs, err, sizeof err);
    } else if (ctx->worker) {
        if (!*ctx->worker) {
            ns_worker_opts_t o;
            ns_worker_opts_init(&o);
            *ctx->worker = ns_worker_new(&o, &rc);
            if (!*ctx->worker)
                goto out;
        }
        /* the sandbox re-runs the unit: a proof carries a stranger's
         * kernel */
        rc = ns_worker_check_fraud(*ctx->worker, &p, inputs, err, sizeof err);
    }
    if (ctx->reran)
        *ctx->reran = true;
out:
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (mapped[i])
            ns_blobs_unmap(inputs[i].data, mapped[i]);
    ns_fraud_release(&p);
    return rc;
}
