/* fuzz_market.c - libFuzzer target for the market's messages
 * (market/market.c): JOB announcements, BIDs, AWARDED, FETCH, CHUNK,
 * FAILED, CHAL and CHAL_DONE bodies, the bytes a peer puts inside a signed
 * envelope. Built as `fuzz_market` (clang, NS_FUZZ=ON) and, with replay.c, as
 * `fuzz_market_replay`, which ctest runs over tests/fuzz/corpus/market; seeds
 * from fuzz_market_gen_corpus.
 *
 * Every decoder runs on the whole input (each wants its own array length,
 * so at most one accepts it). Besides "no crash, no leak": what decodes
 * keeps the decoder's caps, borrowed bytes stay inside the input, a bid's
 * and a failure report's signature checks answer OK or SIG, and
 * decode(encode(x)) == x with encode(decode(encode(x))) == encode(x), byte for
 * byte.
 */
#include "market_fixture.h"

#include "nightshift/market.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_market: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Encode m, decode it into again, encode that: equal fields, equal bytes.
 * enc/dec are a message's codec pair, same compares two values. */
#define S_ROUND_TRIP(enc, dec, m, again, same)                                 \
    do {                                                                       \
        ns_buf_t b1, b2;                                                       \
        ns_buf_init(&b1);                                                      \
        ns_buf_init(&b2);                                                      \
        S_ASSERT(enc(m, &b1) == NS_OK);                                        \
        S_ASSERT(dec(b1.data, b1.len, again) == NS_OK);                        \
        S_ASSERT(same(m, again));                                              \
        S_ASSERT(enc(again, &b2) == NS_OK);                                    \
        S_ASSERT(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);   \
        ns_buf_release(&b1);                                                   \
        ns_buf_release(&b2);                                                   \
    } while (0)

/* p[0..n) lies inside data[0..size). */
static bool s_inside(const uint8_t *p, size_t n, const uint8_t *data,
                     size_t size)
{
    return p >= data && (size_t)(p - data) <= size &&
           n <= size - (size_t)(p - data);
}

static bool s_same_announce(const ns_announce_t *a, const ns_announce_t *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

typedef struct {
    ns_bid_t bid;
    ns_bid_ext_t held;
} s_bid_msg_t;

static bool s_same_bid(const s_bid_msg_t *a, const s_bid_msg_t *b)
{
    return memcmp(&a->bid, &b->bid, sizeof a->bid) == 0 &&
           memcmp(&a->held, &b->held, sizeof a->held) == 0;
}

static int s_bid_encode(const s_bid_msg_t *m, ns_buf_t *out)
{
    return ns_bid_encode(&m->bid, &m->held, out);
}

static int s_bid_decode(const uint8_t *data, size_t size, s_bid_msg_t *m)
{
    return ns_bid_decode(data, size, &m->bid, &m->held);
}

static bool s_same_chunk(const ns_chunk_t *a, const ns_chunk_t *b)
{
    return memcmp(a->job_id, b->job_id, NS_HASH_BYTES) == 0 &&
           a->blob == b->blob && a->offset == b->offset &&
           a->total == b->total && a->len == b->len &&
           a->data_len == b->data_len &&
           (a->data_len == 0 || memcmp(a->data, b->data, a->data_len) == 0);
}

static bool s_same_awarded(const ns_awarded_t *a, const ns_awarded_t *b)
{
    return memcmp(a->job_id, b->job_id, NS_HASH_BYTES) == 0 &&
           a->job_entry_len == b->job_entry_len &&
           memcmp(a->job_entry, b->job_entry, a->job_entry_len) == 0 &&
           a->award_entry_len == b->award_entry_len &&
           memcmp(a->award_entry, b->award_entry, a->award_entry_len) == 0;
}

static bool s_same_failure(const ns_failure_t *a, const ns_failure_t *b)
{
    return memcmp(a, b, sizeof *a) == 0; /* the decoder zeroes it first */
}

static ns_announce_t s_ann[2]; /* 1.2 KiB each: off the stack */

static void s_announce(const uint8_t *data, size_t size)
{
    if (ns_announce_decode(data, size, &s_ann[0]) != NS_OK)
        return;
    S_ASSERT(s_ann[0].n_excluded <= NS_MAX_EXCLUDED);
    S_ASSERT(s_ann[0].reqs.device_type <= NS_DEV_ACCEL);
    S_ASSERT(s_ann[0].bid_window_ms <= 60000);
    S_ASSERT(memchr(s_ann[0].endpoint, 0, sizeof s_ann[0].endpoint) != NULL);
    S_ASSERT(memchr(s_ann[0].reqs.region, 0, sizeof s_ann[0].reqs.region));
    S_ROUND_TRIP(ns_announce_encode, ns_announce_decode, &s_ann[0], &s_ann[1],
                 s_same_announce);
}

static void s_bid(const uint8_t *data, size_t size)
{
    s_bid_msg_t b, again;
    if (s_bid_decode(data, size, &b) != NS_OK)
        return;
    ns_hash_t net;
    fuzz_market_network(net);
    int rc = ns_bid_verify(&b.bid, net);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_SIG);
    S_ROUND_TRIP(s_bid_encode, s_bid_decode, &b, &again, s_same_bid);
    S_ASSERT(ns_bid_verify(&again.bid, net) == rc);
}

static void s_fetch(const uint8_t *data, size_t size)
{
    ns_chunk_t c, again;
    if (ns_fetch_decode(data, size, &c) != NS_OK)
        return;
    S_ASSERT(c.len >= 1 && c.len <= NS_CHUNK_BYTES);
    S_ASSERT(c.data == NULL && c.data_len == 0 && c.total == 0);
    S_ROUND_TRIP(ns_fetch_encode, ns_fetch_decode, &c, &again, s_same_chunk);
}

static void s_chunk(const uint8_t *data, size_t size)
{
    ns_chunk_t c, again;
    if (ns_chunk_decode(data, size, &c) != NS_OK)
        return;
    S_ASSERT(c.data_len <= NS_CHUNK_BYTES && c.len == 0);
    S_ASSERT(c.offset <= c.total && c.data_len <= c.total - c.offset);
    S_ASSERT(c.data_len == 0 || s_inside(c.data, c.data_len, data, size));
    S_ROUND_TRIP(ns_chunk_encode, ns_chunk_decode, &c, &again, s_same_chunk);
}

static void s_awarded(const uint8_t *data, size_t size)
{
    ns_awarded_t a, again;
    if (ns_awarded_decode(data, size, &a) != NS_OK)
        return;
    S_ASSERT(a.job_entry_len >= 1 && a.job_entry_len <= NS_MAX_ENTRY_BYTES);
    S_ASSERT(a.award_entry_len >= 1 && a.award_entry_len <= NS_MAX_ENTRY_BYTES);
    S_ASSERT(s_inside(a.job_entry, a.job_entry_len, data, size));
    S_ASSERT(s_inside(a.award_entry, a.award_entry_len, data, size));
    S_ROUND_TRIP(ns_awarded_encode, ns_awarded_decode, &a, &again,
                 s_same_awarded);
}

static void s_failure(const uint8_t *data, size_t size)
{
    ns_failure_t f, again;
    if (ns_failure_decode(data, size, &f) != NS_OK)
        return;
    S_ASSERT(f.kind <= NS_FAIL_KIND_MAX);
    S_ASSERT(strcmp(ns_fail_kind_name(f.kind), "?") != 0);
    size_t n = strnlen(f.reason, sizeof f.reason);
    S_ASSERT(n <= NS_MAX_FAIL_REASON);
    for (size_t i = 0; i < n; i++)
        S_ASSERT((unsigned char)f.reason[i] >= 0x20 && f.reason[i] != 0x7f);
    ns_hash_t net;
    fuzz_market_network(net);
    int rc = ns_failure_verify(&f, net);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_SIG);
    S_ROUND_TRIP(ns_failure_encode, ns_failure_decode, &f, &again,
                 s_same_failure);
    S_ASSERT(ns_failure_verify(&again, net) == rc);
}

static bool s_same_chal(const ns_chal_msg_t *a, const ns_chal_msg_t *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static bool s_same_done(const ns_chal_done_t *a, const ns_chal_done_t *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void s_chal(const uint8_t *data, size_t size)
{
    ns_chal_msg_t c, again;
    memset(&c, 0, sizeof c);
    memset(&again, 0, sizeof again);
    if (ns_chal_msg_decode(data, size, &c) == NS_OK) {
        S_ASSERT(c.label_bytes <= NS_CHAL_MAX_LABEL_BYTES &&
                 c.imatmul_n <= NS_CHAL_MAX_IMATMUL_N &&
                 (c.label_bytes || c.imatmul_n));
        S_ROUND_TRIP(ns_chal_msg_encode, ns_chal_msg_decode, &c, &again,
                     s_same_chal);
    }
    ns_chal_done_t d, d2;
    memset(&d, 0, sizeof d);
    memset(&d2, 0, sizeof d2);
    if (ns_chal_done_decode(data, size, &d) == NS_OK) {
        S_ASSERT(d.status <= 0 && d.label_answer_bytes <= d.answer_bytes);
        S_ROUND_TRIP(ns_chal_done_encode, ns_chal_done_decode, &d, &d2,
                     s_same_done);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (sodium_init() < 0)
        abort();
    s_chal(data, size);
    s_announce(data, size);
    s_bid(data, size);
    s_awarded(data, size);
    s_fetch(data, size);
    s_chunk(data, size);
    s_failure(data, size);
    return 0;
}
