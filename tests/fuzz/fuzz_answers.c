/* fuzz_answers.c - libFuzzer target for three readers of answers that
 * come from others: a SLASH entry's body (node/slash.c:
 * ns_slash_proof_read, gossiped inside a ledger entry), a provider's
 * answer to a hardware challenge (exec/challenge.c: ns_label_answer_read,
 * fetched by the requester), and the node's answer to `submit --node`'s
 * "job" query (node/control.c: ns_ctl_job_read). The first byte picks the
 * reader, the rest is its input. Built as `fuzz_answers` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_answers_replay` over
 * tests/fuzz/corpus/answers; seeds from fuzz_answers_gen_corpus.
 *
 * Besides "no crash, no leak, nothing read outside the input": what reads
 * has the shape its reader promises (inputs inside the body and of the
 * descriptor's sizes; positions below the label count and k within its
 * cap; one printable line per progress line), and a SLASH body's proof
 * packs (ns_fraud_pack) to bytes that read back to the same proof.
 */
#include "nightshift/challenge.h"
#include "nightshift/control.h"
#include "nightshift/slash.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_answers: %s:%d: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* The labelling every seed answers: 1 MiB, 2 segments. */
#define S_LABEL_BYTES (UINT64_C(1) << 20)

static ns_fraud_proof_t s_p, s_q;

static void s_pack_proof(const ns_fraud_proof_t *p, ns_buf_t *b)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, b);
    ns_fraud_pack(&pk, p);
    S_ASSERT(w.err == NS_OK);
}

/* The proof of a SLASH body that read: packed again, it reads back to
 * the same proof (the fields, the chunk, the source and a pipeline's
 * steps and outs) and packs to the same bytes. */
static void s_slash_round_trip(const ns_fraud_proof_t *p)
{
    static ns_fraud_proof_t x, y;
    ns_buf_t b1, b2;
    ns_mpr_t r;
    char err[256];
    ns_buf_init(&b1);
    ns_buf_init(&b2);
    s_pack_proof(p, &b1);
    ns_mpr_init(&r, b1.data, b1.len);
    S_ASSERT(ns_fraud_read(&r, &s_q, err, sizeof err) == NS_OK);
    S_ASSERT(ns_mpr_end(&r) == NS_OK);
    S_ASSERT(p->chunk_len == s_q.chunk_len &&
             memcmp(p->chunk, s_q.chunk, p->chunk_len) == 0);
    S_ASSERT(p->job.source_len == s_q.job.source_len &&
             (p->job.source_len == 0 ||
              memcmp(p->job.source, s_q.job.source, p->job.source_len) == 0));
    S_ASSERT(p->job.n_steps == s_q.job.n_steps &&
             (p->job.n_steps == 0 ||
              memcmp(p->job.steps, s_q.job.steps,
                     p->job.n_steps * sizeof *p->job.steps) == 0));
    x = *p;
    y = s_q;
    x.chunk = y.chunk = NULL;
    x.job.source = y.job.source = NULL;
    x.job.steps = y.job.steps = NULL;
    S_ASSERT(memcmp(&x, &y, sizeof x) == 0);
    s_pack_proof(&s_q, &b2);
    S_ASSERT(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
    ns_fraud_release(&s_q);
    ns_buf_release(&b1);
    ns_buf_release(&b2);
}
static ns_label_opening_t s_open[NS_CHAL_MAX_OPENINGS];
static uint64_t s_pos[NS_CHAL_MAX_OPENINGS];
static ns_ctl_job_t s_job;

static void s_slash(const uint8_t *d, size_t n)
{
    ns_input_t in[NS_MAX_ARGS];
    bool inl = false;
    char err[256] = "";
    if (ns_slash_proof_read(d, n, &s_p, in, &inl, err, sizeof err) != NS_OK) {
        S_ASSERT(s_p.chunk == NULL && s_p.job.source == NULL && err[0]);
        return;
    }
    for (uint32_t i = 0; i < s_p.job.n_args; i++) {
        if (!inl || s_p.job.args[i].kind != NS_ARG_IN)
            continue;
        const uint8_t *p = in[i].data;
        S_ASSERT(p >= d && (size_t)(p - d) <= n && in[i].len <= n - (p - d));
        S_ASSERT(in[i].len == s_p.job.args[i].size);
    }
    s_slash_round_trip(&s_p);
    ns_fraud_release(&s_p);
}

static void s_label(const uint8_t *d, size_t n)
{
    ns_label_params_t p;
    ns_hash_t root;
    uint32_t k = 0;
    S_ASSERT(ns_label_params_init(&p, S_LABEL_BYTES, 2) == NS_OK);
    if (ns_label_answer_read(d, n, &p, root, s_pos, &k, s_open) != NS_OK) {
        S_ASSERT(k == 0);
        return;
    }
    S_ASSERT(k >= 1 && k <= NS_CHAL_MAX_OPENINGS);
    for (uint32_t i = 0; i < k; i++)
        S_ASSERT(s_pos[i] < ns_label_count(&p));
}

static void s_ctl(const uint8_t *d, size_t n)
{
    if (ns_ctl_job_read(d, n, &s_job) != NS_OK)
        return;
    S_ASSERT(s_job.n_lines <= NS_CTL_JOB_LINES);
    for (uint32_t i = 0; i < s_job.n_lines; i++)
        for (const char *c = s_job.lines[i]; *c; c++)
            S_ASSERT((unsigned char)*c >= 0x20 && *c != 0x7f);
    S_ASSERT(s_job.phase <= NS_RQ_FAILED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (sodium_init() < 0)
        abort();
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        s_slash(data + 1, size - 1);
        break;
    case 1:
        s_label(data + 1, size - 1);
        break;
    default:
        s_ctl(data + 1, size - 1);
        break;
    }
    return 0;
}
