/* fuzz_job.c - libFuzzer target for the job descriptor (core/job.c), the
 * bytes a provider receives as blob 0 and a requester reads back from a
 * fraud proof. Built as `fuzz_job` (clang, NS_FUZZ=ON) and, with
 * replay.c, as `fuzz_job_replay`, which ctest runs over
 * tests/fuzz/corpus/job; seeds from fuzz_job_gen_corpus.
 *
 * ns_job_read over the input; what it promises is checked: on failure the
 * job is released, r.err set and err says why; on success the job
 * validates, ns_job_pack writes exactly the bytes read (canonical form),
 * the id is the hash of those bytes, and reading the packed bytes gives
 * the same descriptor.
 */
#include "nightshift/job.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_job: %s:%d: %s\n", __FILE__, __LINE__,       \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Large structs live here, not on the stack; one input at a time. */
static ns_job_t s_job[2];

/* Everything but the source and steps pointers is equal, and what they
 * point at is. */
static void s_same_job(const ns_job_t *a, const ns_job_t *b)
{
    ns_job_t x = *a, y = *b;
    S_ASSERT(x.source_len == y.source_len);
    S_ASSERT(x.source_len == 0 ||
             memcmp(x.source, y.source, x.source_len) == 0);
    S_ASSERT(x.n_steps == y.n_steps);
    S_ASSERT(x.n_steps == 0 ||
             memcmp(x.steps, y.steps, x.n_steps * sizeof *x.steps) == 0);
    x.source = y.source = NULL;
    x.steps = y.steps = NULL;
    S_ASSERT(memcmp(&x, &y, sizeof x) == 0);
}

static void s_round_trip(const uint8_t *read, size_t read_len)
{
    char err[256];
    ns_hash_t id, want;
    ns_buf_t b;
    ns_mp_writer_t w;
    msgpack_packer pk;
    S_ASSERT(ns_job_validate(&s_job[0], err, sizeof err) == NS_OK);
    S_ASSERT(ns_job_items(&s_job[0]) >= 1);
    S_ASSERT(ns_job_units(&s_job[0]) >= 1 && ns_job_out_bytes(&s_job[0]) >= 1);
    S_ASSERT(ns_job_checks(&s_job[0]) >= 1);
    ns_buf_init(&b);
    ns_mp_writer_init(&w, &pk, &b);
    ns_job_pack(&pk, &s_job[0]);
    S_ASSERT(w.err == NS_OK);
    S_ASSERT(b.len == read_len && memcmp(b.data, read, read_len) == 0);
    S_ASSERT(ns_job_id(&s_job[0], id) == NS_OK);
    ns_hash2(want, NS_JOB_DOMAIN, sizeof(NS_JOB_DOMAIN) - 1, read, read_len);
    S_ASSERT(memcmp(id, want, NS_HASH_BYTES) == 0);
    ns_mpr_t r;
    ns_mpr_init(&r, b.data, b.len);
    S_ASSERT(ns_job_read(&r, &s_job[1], err, sizeof err) == NS_OK);
    S_ASSERT(ns_mpr_end(&r) == NS_OK);
    s_same_job(&s_job[0], &s_job[1]);
    ns_job_release(&s_job[1]);
    ns_buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    ns_mpr_t r;
    if (sodium_init() < 0)
        abort();
    ns_mpr_init(&r, data, size);
    int rc = ns_job_read(&r, &s_job[0], err, sizeof err);
    if (rc != NS_OK) {
        S_ASSERT(r.err != NS_OK && err[0] != '\0');
        S_ASSERT(s_job[0].source == NULL && s_job[0].source_len == 0);
        return 0;
    }
    S_ASSERT(r.err == NS_OK && r.left <= size);
    s_round_trip(data, size - r.left);
    ns_job_release(&s_job[0]);
    return 0;
}
