/* fuzz_fraud.c - libFuzzer target for packed fraud proofs (exec/verify.c):
 * the bytes of a SLASH entry's proof, gossiped by anyone and read from a
 * file by `nightshift slash`. Built as `fuzz_fraud` (clang, NS_FUZZ=ON)
 * and, with replay.c, as `fuzz_fraud_replay`, which ctest runs over
 * tests/fuzz/corpus/fraud; seeds from fuzz_fraud_gen_corpus.
 *
 * ns_fraud_read over the input; on failure the proof is released and err
 * says why. What reads has the shape the descriptor gives it, its job id
 * is ns_job_id of the descriptor, pack(read(pack(p))) == pack(p) with the
 * same fields, and it goes through the steps of ns_fraud_check that need
 * no device (ns_fraud_verify_claim: the result signature and the Merkle
 * path of the claimed chunk: OK, SIG or PROOF). The re-run of the unit
 * needs OpenCL and is left out; ns_item_matches is checked on the claimed
 * chunk against itself.
 */
#include "nightshift/verify.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_fraud: %s:%d: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Large structs live here, not on the stack; one input at a time. */
static ns_fraud_proof_t s_p[2];

static void s_pack(const ns_fraud_proof_t *p, ns_buf_t *b)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, b);
    ns_fraud_pack(&pk, p);
    S_ASSERT(w.err == NS_OK);
}

/* Equal fields, owned bytes (chunk, source, a pipeline's steps) compared
 * by content. */
static void s_same(const ns_fraud_proof_t *a, const ns_fraud_proof_t *b)
{
    static ns_fraud_proof_t x, y;
    S_ASSERT(a->chunk_len == b->chunk_len &&
             memcmp(a->chunk, b->chunk, a->chunk_len) == 0);
    S_ASSERT(a->job.source_len == b->job.source_len &&
             (a->job.source_len == 0 ||
              memcmp(a->job.source, b->job.source, a->job.source_len) == 0));
    S_ASSERT(a->job.n_steps == b->job.n_steps &&
             (a->job.n_steps == 0 ||
              memcmp(a->job.steps, b->job.steps,
                     a->job.n_steps * sizeof *a->job.steps) == 0));
    x = *a;
    y = *b;
    x.chunk = y.chunk = NULL;
    x.job.source = y.job.source = NULL;
    x.job.steps = y.job.steps = NULL;
    S_ASSERT(memcmp(&x, &y, sizeof x) == 0);
}

static void s_checks(const ns_fraud_proof_t *p)
{
    ns_hash_t id;
    uint64_t leaf = 0;
    char err[256];
    S_ASSERT(p->n_units == ns_job_units(&p->job) && p->unit < p->n_units);
    S_ASSERT(p->arg < p->job.n_args && p->job.args[p->arg].kind == NS_ARG_OUT &&
             p->pos < p->job.args[p->arg].size);
    S_ASSERT(ns_commit_leaf_index(&p->job, p->arg, p->pos, &leaf) == NS_OK);
    S_ASSERT(p->chunk != NULL && p->chunk_len >= 1 &&
             p->chunk_len <= NS_COMMIT_CHUNK);
    S_ASSERT(p->depth == ns_merkle_proof_len(ns_commit_leaves(&p->job), leaf));
    S_ASSERT(ns_job_id(&p->job, id) == NS_OK);
    S_ASSERT(memcmp(id, p->job_id, NS_HASH_BYTES) == 0);
    int rc = ns_fraud_verify_claim(p, err, sizeof err);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_SIG || rc == NS_ERR_PROOF);
    S_ASSERT(ns_item_matches(&p->job, p->chunk, p->chunk, p->chunk_len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    ns_buf_t b1, b2;
    ns_mpr_t r;
    if (sodium_init() < 0)
        abort();
    ns_mpr_init(&r, data, size);
    int rc = ns_fraud_read(&r, &s_p[0], err, sizeof err);
    if (rc != NS_OK) {
        S_ASSERT(r.err != NS_OK && (err[0] != '\0' || rc == NS_ERR_NOMEM));
        S_ASSERT(s_p[0].chunk == NULL && s_p[0].job.source == NULL);
        return 0;
    }
    s_checks(&s_p[0]);
    ns_buf_init(&b1);
    ns_buf_init(&b2);
    s_pack(&s_p[0], &b1);
    ns_mpr_init(&r, b1.data, b1.len);
    S_ASSERT(ns_fraud_read(&r, &s_p[1], err, sizeof err) == NS_OK);
    S_ASSERT(ns_mpr_end(&r) == NS_OK);
    s_same(&s_p[0], &s_p[1]);
    s_pack(&s_p[1], &b2);
    S_ASSERT(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
    ns_buf_release(&b1);
    ns_buf_release(&b2);
    ns_fraud_release(&s_p[0]);
    ns_fraud_release(&s_p[1]);
    return 0;
}
