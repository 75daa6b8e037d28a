/* gen_fraud_corpus.c - write seed inputs for fuzz_fraud into a directory.
 *
 *   fuzz_fraud_gen_corpus DIR
 *
 * Seeds: fraud proofs built by ns_fraud_build over every job of seeds.h
 * (outputs made up in memory, the result statement signed by a fresh key)
 * for the first, a middle and the last item, packed by ns_fraud_pack and
 * read back before they are saved; then proofs whose signature or claimed
 * bytes were changed after signing, and mutants of the first (truncated,
 * a trailing byte, the path's last byte flipped, version 2); proofs of
 * version 3 over the pipelines of seeds.h (s_pipe_proofs).
 */
#include "seeds.h"

#include "nightshift/identity.h"
#include "nightshift/verify.h"

static ns_job_t s_job;
static ns_fraud_proof_t s_p, s_back;

static void s_save_proof(const char *what, const ns_fraud_proof_t *p,
                         bool reads, bool mutants)
{
    ns_buf_t b;
    ns_mp_writer_t w;
    msgpack_packer pk;
    char err[256];
    ns_buf_init(&b);
    ns_mp_writer_init(&w, &pk, &b);
    ns_fraud_pack(&pk, p);
    seeds_check(w.err, "pack proof");
    if (reads) {
        ns_mpr_t r;
        ns_mpr_init(&r, b.data, b.len);
        if (ns_fraud_read(&r, &s_back, err, sizeof err) != NS_OK) {
            fprintf(stderr, "%s: %s does not read back: %s\n", seeds_g.prog,
                    what, err);
            exit(1);
        }
        ns_fraud_release(&s_back);
    }
    if (mutants)
        seeds_save_mutants(what, b.data, b.len, 1, 2);
    else
        seeds_save(what, b.data, b.len);
    ns_buf_release(&b);
}

/* Version 3 proofs: every pipeline of seeds.h, the first and a middle
 * unit of every step, accused over the first buffer that step writes
 * (outs present exactly when the step reads an earlier step's buffer);
 * mutants of the first proof of a step that needs outs. */
static void s_pipe_proofs(ns_identity_t *id)
{
    uint8_t *outputs[NS_MAX_ARGS];
    const char *name;
    char what[200];
    for (int v = 0; v < SEEDS_N_PIPES; v++) {
        ns_hash_t job_id, root;
        uint8_t sig[NS_SIG_BYTES];
        seeds_pipe(&s_job, v, &name);
        memset(outputs, 0, sizeof outputs);
        for (uint32_t k = 0; k < s_job.n_args; k++) {
            if (s_job.args[k].kind != NS_ARG_OUT)
                continue;
            outputs[k] = malloc(s_job.args[k].size);
            if (!outputs[k])
                seeds_die("malloc", NS_ERR_NOMEM);
            for (uint64_t i = 0; i < s_job.args[k].size; i++)
                outputs[k][i] = (uint8_t)(i * 17 + k);
        }
        seeds_check(ns_job_id(&s_job, job_id), "job id");
        seeds_check(ns_commit_root(&s_job, job_id, outputs, root), "root");
        ns_result_sign(id, job_id, root, ns_job_units(&s_job), sig);
        for (uint32_t s = 0; s < s_job.n_steps; s++) {
            uint32_t out = 0;
            while (out < s_job.n_args && (s_job.args[out].kind != NS_ARG_OUT ||
                                          ns_job_writer(&s_job, out) != s))
                out++;
            if (out == s_job.n_args)
                seeds_die("a step that writes nothing", NS_ERR_INVAL);
            uint64_t first = ns_job_step_first(&s_job, s);
            uint64_t n = ns_job_step_units(&s_job, s);
            uint64_t size = s_job.args[out].size;
            for (int i = 0; i < 2; i++) {
                uint64_t k = i == 0 ? 0 : n / 2;
                if (i > 0 && k == 0)
                    continue;
                uint64_t pos = size * k / n;
                seeds_check(ns_fraud_build(&s_p, &s_job, job_id,
                                           ns_identity_pk(id), sig, NULL,
                                           outputs, first + k, out, pos),
                            "build pipeline proof");
                if (memcmp(s_p.root, root, NS_HASH_BYTES) != 0)
                    seeds_die("pipeline proof root is not the committed root",
                              NS_ERR_PROOF);
                snprintf(what, sizeof what,
                         "proof v3, %s, step %u unit %llu arg %u, %u outs",
                         name, s, (unsigned long long)(first + k), out,
                         s_p.n_outs);
                s_save_proof(what, &s_p, true, i == 0 && s_p.n_outs && v == 0);
                ns_fraud_release(&s_p);
            }
        }
        for (uint32_t k = 0; k < s_job.n_args; k++)
            free(outputs[k]);
    }
}

int main(int argc, char **argv)
{
    uint8_t *outputs[NS_MAX_ARGS];
    const char *name;
    char what[200];
    seeds_init(argc, argv);
    ns_identity_t *id = ns_identity_generate();
    if (!id)
        seeds_die("identity", NS_ERR_NOMEM);
    for (int v = 0; v < SEEDS_N_JOBS; v++) {
        ns_hash_t job_id, root;
        uint8_t sig[NS_SIG_BYTES];
        seeds_job(&s_job, v, &name);
        memset(outputs, 0, sizeof outputs);
        for (uint32_t k = 0; k < s_job.n_args; k++) {
            if (s_job.args[k].kind != NS_ARG_OUT)
                continue;
            outputs[k] = malloc(s_job.args[k].size);
            if (!outputs[k])
                seeds_die("malloc", NS_ERR_NOMEM);
            for (uint64_t i = 0; i < s_job.args[k].size; i++)
                outputs[k][i] = (uint8_t)(i * 31 + k);
        }
        seeds_check(ns_job_id(&s_job, job_id), "job id");
        seeds_check(ns_commit_root(&s_job, job_id, outputs, root), "root");
        uint64_t n = ns_job_units(&s_job);
        ns_result_sign(id, job_id, root, n, sig);
        uint64_t items[3] = {0, n / 2, n - 1};
        uint32_t out = 0;
        while (s_job.args[out].kind != NS_ARG_OUT)
            out++;
        uint64_t size = s_job.args[out].size;
        for (int i = 0; i < 3; i++) {
            if (i > 0 && items[i] == items[i - 1])
                continue;
            /* the unit's position, spread over the output's bytes */
            uint64_t pos = size * items[i] / (n ? n : 1);
            seeds_check(ns_fraud_build(&s_p, &s_job, job_id, ns_identity_pk(id),
                                       sig, NULL, outputs, items[i], out, pos),
                        "build proof");
            if (memcmp(s_p.root, root, NS_HASH_BYTES) != 0)
                seeds_die("proof root is not the committed root", NS_ERR_PROOF);
            snprintf(what, sizeof what, "proof, %s, unit %llu", name,
                     (unsigned long long)items[i]);
            s_save_proof(what, &s_p, true, v == 0 && i == 0);
            if (v == 1 && i == 0) {
                s_p.sig[0] ^= 0x01;
                snprintf(what, sizeof what, "%s, signature flipped", name);
                s_save_proof(what, &s_p, true, false);
                s_p.sig[0] ^= 0x01;
                s_p.chunk[0] ^= 0x01;
                snprintf(what, sizeof what, "%s, claim changed", name);
                s_save_proof(what, &s_p, true, false);
                s_p.unit = n; /* out of range: read rejects it */
                snprintf(what, sizeof what, "%s, unit out of range", name);
                s_save_proof(what, &s_p, false, false);
            }
            ns_fraud_release(&s_p);
        }
        for (uint32_t k = 0; k < s_job.n_args; k++)
            free(outputs[k]);
    }
    s_pipe_proofs(id);
    ns_job_release(&s_job);
    ns_identity_destroy(&id);
    seeds_done();
    return 0;
}
