/* gen_answers_corpus.c - seeds for fuzz_answers: SLASH bodies (a proof of
 * each sample job and pipeline (version 3, the accused unit the first of
 * the step writing the last buffer) with its inputs inline and by hash), honest
 * labelling answers for the 1 MiB labelling the harness reads, and answers to
 * the control socket's "job" query. The first byte of each seed picks the
 * reader (0 slash, 1 label, 2 job). */
#include "seeds.h"

#include "nightshift/challenge.h"
#include "nightshift/control.h"
#include "nightshift/identity.h"
#include "nightshift/slash.h"

static ns_job_t s_job;
static ns_fraud_proof_t s_p;
static ns_label_opening_t s_open[NS_CHAL_MAX_OPENINGS];
static uint64_t s_pos[NS_CHAL_MAX_OPENINGS];
static ns_ctl_job_t s_reply;

static void s_save_tagged(const char *what, uint8_t tag, const ns_buf_t *b,
                          bool mutants)
{
    ns_buf_t t;
    ns_buf_init(&t);
    seeds_check(ns_buf_append(&t, &tag, 1), "tag");
    seeds_check(ns_buf_append(&t, b->data, b->len), "seed");
    if (mutants)
        seeds_save_mutants(what, t.data, t.len, 1, 2);
    else
        seeds_save(what, t.data, t.len);
    ns_buf_release(&t);
}

static void s_slash_seeds(void)
{
    ns_identity_t *id = ns_identity_generate();
    const char *name;
    char what[160];
    if (!id)
        seeds_die("identity", NS_ERR_NOMEM);
    for (int v = 0; v < SEEDS_N_JOBS + SEEDS_N_PIPES; v++) {
        uint8_t *outputs[NS_MAX_ARGS] = {0}, *in_bufs[NS_MAX_ARGS] = {0};
        ns_input_t inputs[NS_MAX_ARGS];
        memset(inputs, 0, sizeof inputs);
        ns_hash_t job_id, root;
        uint8_t sig[NS_SIG_BYTES];
        if (v < SEEDS_N_JOBS)
            seeds_job(&s_job, v, &name);
        else
            seeds_pipe(&s_job, v - SEEDS_N_JOBS, &name);
        uint32_t out = 0;
        for (uint32_t k = 0; k < s_job.n_args; k++) {
            uint64_t size = s_job.args[k].size;
            if (s_job.args[k].kind == NS_ARG_OUT) {
                outputs[k] = calloc(1, size);
                out = k;
            } else if (s_job.args[k].kind == NS_ARG_IN) {
                in_bufs[k] = calloc(1, size);
                inputs[k].data = in_bufs[k];
                inputs[k].len = size;
            }
        }
        seeds_check(ns_job_id(&s_job, job_id), "job id");
        seeds_check(ns_commit_root(&s_job, job_id, outputs, root), "root");
        ns_result_sign(id, job_id, root, ns_job_units(&s_job), sig);
        seeds_check(
            ns_fraud_build(
                &s_p, &s_job, job_id, ns_identity_pk(id), sig, NULL, outputs,
                ns_job_step_first(&s_job, ns_job_writer(&s_job, out)), out, 0),
            "proof");
        ns_buf_t b;
        ns_buf_init(&b);
        bool inl = false;
        if (ns_slash_proof_pack(&s_p, inputs, &b, &inl) == NS_OK) {
            snprintf(what, sizeof what, "slash body, %s, inputs %s", name,
                     inl ? "inline" : "by hash");
            s_save_tagged(what, 0, &b, v < 2 || v == SEEDS_N_JOBS);
        }
        ns_buf_release(&b);
        ns_fraud_release(&s_p);
        for (uint32_t k = 0; k < NS_MAX_ARGS; k++) {
            free(outputs[k]);
            free(in_bufs[k]);
        }
    }
    ns_job_release(&s_job);
    ns_identity_destroy(&id);
}

static void s_label_seeds(void)
{
    ns_label_params_t p;
    uint8_t seed[32] = {7};
    seeds_check(ns_label_params_init(&p, UINT64_C(1) << 20, 2), "params");
    uint8_t *labels = malloc(p.bytes);
    ns_merkle_t tree;
    if (!labels)
        seeds_die("labels", NS_ERR_NOMEM);
    seeds_check(ns_label_fill_host(&p, seed, labels), "fill");
    seeds_check(ns_label_commit_host(&p, labels, &tree), "commit");
    ns_hash_t root;
    ns_merkle_root(&tree, root);
    for (uint32_t k = 1; k <= 4; k *= 2) {
        ns_label_positions(&p, root, seed, k, s_pos);
        seeds_check(ns_label_open_host(&p, labels, &tree, s_pos, k, s_open),
                    "open");
        ns_buf_t b;
        ns_buf_init(&b);
        seeds_check(ns_label_answer_pack(&p, root, s_pos, k, s_open, &b),
                    "answer");
        char what[64];
        snprintf(what, sizeof what, "labelling answer, %u openings", k);
        s_save_tagged(what, 1, &b, k == 1);
        ns_buf_release(&b);
    }
    ns_merkle_release(&tree);
    free(labels);
}

static void s_job_seeds(void)
{
    ns_buf_t b;
    ns_mp_writer_t w;
    msgpack_packer pk;
    memset(&s_reply, 0, sizeof s_reply);
    s_reply.phase = NS_RQ_RUNNING;
    s_reply.next_line = 3;
    s_reply.n_lines = 2;
    snprintf(s_reply.lines[0], sizeof s_reply.lines[0], "escrow locked");
    snprintf(s_reply.lines[1], sizeof s_reply.lines[1], "awarded");
    ns_buf_init(&b);
    ns_mp_writer_init(&w, &pk, &b);
    ns_ctl_job_pack(&pk, &s_reply);
    seeds_check(w.err, "job reply");
    s_save_tagged("job reply, running", 2, &b, true);
    s_reply.finished = true;
    s_reply.phase = s_reply.receipt.phase = NS_RQ_DONE;
    s_reply.receipt.price = 3;
    ns_mp_writer_init(&w, &pk, &b);
    ns_ctl_job_pack(&pk, &s_reply);
    s_save_tagged("job reply, settled", 2, &b, false);
    ns_buf_release(&b);
}

int main(int argc, char **argv)
{
    seeds_init(argc, argv);
    s_slash_seeds();
    s_label_seeds();
    s_job_seeds();
    seeds_done();
    return 0;
}
