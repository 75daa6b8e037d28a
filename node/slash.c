/* slash.c - fraud proofs in SLASH entries, checked by every node. */
#include "nightshift/slash.h"

#include "nightshift/log.h"
#include "nightshift/mp.h"

#include <stdlib.h>
#include <string.h>

int ns_slash_proof_pack(const ns_fraud_proof_t *p, const ns_input_t *inputs,
                        ns_buf_t *out)
{
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
    } else {
        msgpack_pack_nil(&pk);
    }
    if (w.err == NS_OK && out->len > NS_MAX_PROOF)
        return NS_ERR_TOOBIG;
    return w.err;
}

int ns_slash_verify(void *user, const ns_ledger_job_t *job,
                    const uint8_t *provider, const ns_hash_t root,
                    uint64_t n_items, const uint8_t *proof, size_t len)
{
    ns_slash_ctx_t *ctx = user;
    ns_fraud_proof_t p;
    ns_mpr_t r;
    char err[256];
    ns_input_t inputs[NS_MAX_ARGS];
    memset(&p, 0, sizeof p);
    memset(inputs, 0, sizeof inputs);
    if (ctx->reran)
        *ctx->reran = false;
    ns_mpr_init(&r, proof, len);
    if (ns_mpr_array_exact(&r, 2) != NS_OK ||
        ns_fraud_read(&r, &p, err, sizeof err) != NS_OK)
        return NS_ERR_PROOF;
    int rc = NS_ERR_PROOF;
    /* The proof must be about this job's RESULT on record. */
    if (memcmp(p.job_id, job->desc_id, NS_HASH_BYTES) ||
        memcmp(p.provider, provider, NS_ID_BYTES) ||
        memcmp(p.root, root, NS_HASH_BYTES) || p.n_units != n_items)
        goto out;
    bool have_inputs = false;
    if (r.left && r.p[0] == 0xc0) {
        r.p++;
        r.left--;
    } else {
        uint32_t n = 0;
        ns_mpr_array(&r, &n, NS_MAX_ARGS);
        uint32_t k = 0;
        for (uint32_t i = 0; i < p.job.n_args && r.err == NS_OK; i++) {
            if (p.job.args[i].kind != NS_ARG_IN)
                continue;
            const uint8_t *d = NULL;
            size_t dl = 0;
            if (k++ >= n || ns_mpr_bin(&r, &d, &dl, NS_MAX_PROOF) != NS_OK)
                break;
            inputs[i].data = d;
            inputs[i].len = dl;
        }
        have_inputs = r.err == NS_OK && k == n;
    }
    if (ns_mpr_end(&r) != NS_OK)
        goto out;
    if (ns_fraud_verify_claim(&p, err, sizeof err) != NS_OK)
        goto out;
    if (!have_inputs) {
        /* Inputs too large to carry: structure and signatures only. */
        ns_warn(NS_MOD_MARKET, "event=slash_checked_without_rerun "
                               "reason=inputs_not_in_proof");
        rc = NS_OK;
        goto out;
    }
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
    ns_fraud_release(&p);
    return rc;
}
