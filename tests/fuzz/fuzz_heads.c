/* fuzz_heads.c - libFuzzer target for the head exchange's bodies
 * (market/ledger_heads.c): HEADS_REQ and HEADS, in both wire forms.
 * Built as `fuzz_heads` (clang, NS_FUZZ=ON) and, with replay.c, as
 * `fuzz_heads_replay`, which ctest runs over tests/fuzz/corpus/heads;
 * seeds from fuzz_heads_gen_corpus.
 *
 * The first byte picks the reader, the rest is its input:
 *   0  ns_heads_req_decode: an accepted request is one of the two forms
 *      and encodes to exactly the input (one encoding per value: the
 *      reader takes only the shortest msgpack forms the packer writes,
 *      or the round trip gives what decodes to the same request);
 *   1  ns_heads_decode: an accepted answer has at most NS_HEADS_MAX
 *      items, a legacy one is a full listing with no counters, and
 *      encode then decode gives the same answer; a refused one leaves
 *      nothing to free.
 */
#include "nightshift/ledger_heads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_heads: %s:%d: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void s_req(const uint8_t *data, size_t size)
{
    ns_heads_req_t q, back;
    if (ns_heads_req_decode(data, size, &q) != NS_OK)
        return;
    ns_buf_t b;
    ns_buf_init(&b);
    S_ASSERT(ns_heads_req_encode(&b, &q) == NS_OK);
    S_ASSERT(ns_heads_req_decode(b.data, b.len, &back) == NS_OK);
    S_ASSERT(back.since_form == q.since_form);
    S_ASSERT(memcmp(back.start, q.start, NS_ID_BYTES) == 0);
    S_ASSERT(back.epoch == q.epoch && back.since == q.since);
    S_ASSERT(q.since_form || (q.epoch == 0 && q.since == 0));
    ns_buf_release(&b);
}

static void s_heads(const uint8_t *data, size_t size)
{
    ns_heads_t h, back;
    if (ns_heads_decode(data, size, &h) != NS_OK) {
        S_ASSERT(h.items == NULL && h.n == 0);
        return;
    }
    S_ASSERT(h.n <= NS_HEADS_MAX);
    S_ASSERT(h.n == 0 || h.items != NULL);
    if (h.legacy) {
        S_ASSERT(h.full && h.epoch == 0 && h.upto == 0);
        for (uint32_t i = 0; i < h.n; i++)
            S_ASSERT(h.items[i].ctr == 0);
    }
    ns_buf_t b;
    ns_buf_init(&b);
    S_ASSERT(ns_heads_encode(&b, &h) == NS_OK);
    S_ASSERT(ns_heads_decode(b.data, b.len, &back) == NS_OK);
    S_ASSERT(back.legacy == h.legacy && back.full == h.full);
    S_ASSERT(back.epoch == h.epoch && back.upto == h.upto);
    S_ASSERT(back.n == h.n && back.has_next == h.has_next);
    S_ASSERT(!h.has_next || memcmp(back.next, h.next, NS_ID_BYTES) == 0);
    S_ASSERT(memcmp(back.digest, h.digest, NS_HASH_BYTES) == 0);
    for (uint32_t i = 0; i < h.n; i++)
        S_ASSERT(memcmp(&back.items[i], &h.items[i], sizeof h.items[i]) == 0);
    ns_heads_release(&back);
    ns_heads_release(&h);
    ns_buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] == 0)
        s_req(data + 1, size - 1);
    else if (data[0] == 1)
        s_heads(data + 1, size - 1);
    return 0;
}
