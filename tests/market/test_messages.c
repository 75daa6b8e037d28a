/* test_messages.c - every market message's codec (market.h): a round trip
 * of a full message, each cap at its limit and one past it, and
 * truncated input at every length. */
#include "../check.h"

#include "nightshift/identity.h"
#include "nightshift/market.h"
#include "nightshift/policy.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* Every proper prefix of an encoded message must be refused. */
static bool s_prefixes_refused(int (*dec)(const uint8_t *, size_t, void *),
                               const ns_buf_t *b, void *out)
{
    for (size_t n = 0; n < b->len; n++)
        if (dec(b->data, n, out) == NS_OK)
            return false;
    return true;
}

static int s_dec_announce(const uint8_t *p, size_t n, void *o)
{
    return ns_announce_decode(p, n, o);
}
static int s_dec_bid(const uint8_t *p, size_t n, void *o)
{
    return ns_bid_decode(p, n, o, NULL);
}
static int s_dec_fetch(const uint8_t *p, size_t n, void *o)
{
    return ns_fetch_decode(p, n, o);
}
static int s_dec_chunk(const uint8_t *p, size_t n, void *o)
{
    return ns_chunk_decode(p, n, o);
}
static int s_dec_awarded(const uint8_t *p, size_t n, void *o)
{
    return ns_awarded_decode(p, n, o);
}

static void s_announce(ns_announce_t *a)
{
    memset(a, 0, sizeof *a);
    randombytes_buf(a->job_id, sizeof a->job_id);
    randombytes_buf(a->desc_id, sizeof a->desc_id);
    randombytes_buf(a->requester, sizeof a->requester);
    snprintf(a->endpoint, sizeof a->endpoint, "tcp://127.0.0.1:4567");
    a->reqs.min_mem_bytes = UINT64_C(16) << 30;
    a->reqs.device_type = NS_DEV_GPU;
    a->reqs.min_cl_major = 1;
    a->reqs.min_cl_minor = 2;
    snprintf(a->reqs.region, sizeof a->reqs.region, "eu-west");
    a->reqs.max_buffer_bytes = UINT64_C(3) << 30;
    a->reqs.buffer_bytes = UINT64_C(5) << 30;
    a->max_price = 100;
    a->collateral = 50;
    a->work_flops = UINT64_C(1) << 40;
    a->n_items = 1 << 20;
    a->input_bytes = 12345;
    a->bid_window_ms = 300;
    a->deadline_ms = UINT64_C(1800000000000);
    a->round = 3;
    a->n_excluded = 2;
    randombytes_buf(a->excluded, 2 * NS_ID_BYTES);
}

TEST(announce_round_trip_and_caps)
{
    ns_announce_t a, b;
    ns_buf_t buf;
    ns_buf_init(&buf);
    s_announce(&a);
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(s_prefixes_refused(s_dec_announce, &buf, &b));
    /* the exclusion list at its cap, and one past it */
    a.n_excluded = NS_MAX_EXCLUDED;
    randombytes_buf(a.excluded, sizeof a.excluded);
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    a.n_excluded = NS_MAX_EXCLUDED + 1;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_ERR_TOOBIG);
    /* the inputs it names (17 fields), at the cap, past it, of size 0 */
    s_announce(&a);
    a.n_inputs = NS_MAX_ANN_INPUTS;
    for (uint32_t i = 0; i < a.n_inputs; i++) {
        randombytes_buf(a.inputs[i].hash, NS_HASH_BYTES);
        a.inputs[i].size = (uint64_t)i * 100003 + 1;
    }
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(s_prefixes_refused(s_dec_announce, &buf, &b));
    a.n_inputs = NS_MAX_ANN_INPUTS + 1;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_ERR_TOOBIG);
    a.n_inputs = 2;
    a.inputs[1].size = 0;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    /* a window over the cap, an endpoint that is not one */
    s_announce(&a);
    a.bid_window_ms = 60001;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    /* a largest buffer bigger than all of them together */
    s_announce(&a);
    a.reqs.max_buffer_bytes = a.reqs.buffer_bytes + 1;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    s_announce(&a);
    snprintf(a.endpoint, sizeof a.endpoint, "not an endpoint");
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    ns_buf_release(&buf);
}

/* The bidder draw (issue 27: bids from a bounded set): on the wire with
 * or without inputs, never "nobody"; everyone drawn at NS_DRAW_ALL; each
 * provider drawn for its share of jobs, none starved; a job asks about
 * the target whatever the number that qualify. */
TEST(announce_draw)
{
    ns_announce_t a, b;
    ns_buf_t buf;
    ns_buf_init(&buf);
    s_announce(&a);
    a.draw = ns_bid_draw_for(10000, 32);
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(s_prefixes_refused(s_dec_announce, &buf, &b));
    a.n_inputs = 1;
    randombytes_buf(a.inputs[0].hash, NS_HASH_BYTES);
    a.inputs[0].size = 7;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    /* everyone: the field stays off the wire (older providers read it) */
    s_announce(&a);
    a.draw = NS_DRAW_ALL;
    CHECK_RC(ns_announce_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_announce_decode(buf.data, buf.len, &b), NS_OK);
    CHECK_EQ_INT(b.draw, 0);
    CHECK(ns_bid_draw_for(32, 32) == NS_DRAW_ALL);
    CHECK(ns_bid_draw_for(5, 32) == NS_DRAW_ALL);
    CHECK(ns_bid_draw_for(64, 0) == NS_DRAW_ALL);
    CHECK(ns_bid_draw_for(UINT32_MAX, 1) >= 1);

    /* 2,000 providers, 500 jobs of 2 rounds, a target of 32 */
    enum { P = 2000, J = 500 };
    static uint8_t ids[P][NS_ID_BYTES];
    static uint32_t drawn[P];
    randombytes_buf(ids, sizeof ids);
    memset(drawn, 0, sizeof drawn);
    uint32_t draw = ns_bid_draw_for(P, 32), min_job = P, max_job = 0;
    for (uint32_t j = 0; j < J; j++) {
        ns_hash_t job;
        randombytes_buf(job, sizeof job);
        for (uint32_t round = 1; round <= 2; round++) {
            uint32_t n = 0;
            for (uint32_t p = 0; p < P; p++)
                if (ns_bid_drawn(job, round, ids[p], draw)) {
                    drawn[p]++;
                    n++;
                }
            min_job = n < min_job ? n : min_job;
            max_job = n > max_job ? n : max_job;
            CHECK(ns_bid_drawn(job, round, ids[0], NS_DRAW_ALL));
            CHECK(ns_bid_drawn(job, round, ids[0], 0));
        }
    }
    /* per job: 32 expected (binomial, sd 5.6) */
    CHECK(min_job >= 8 && max_job <= 64);
    /* per provider: 1,000 draws at 1/62.5 each, 16 expected (sd 4) */
    uint32_t starved = 0, most = 0;
    for (uint32_t p = 0; p < P; p++) {
        starved += drawn[p] == 0;
        most = drawn[p] > most ? drawn[p] : most;
    }
    CHECK_EQ_INT(starved, 0);
    CHECK(most <= 48);
    ns_buf_release(&buf);
}

TEST(bid_round_trip)
{
    ns_bid_t a, b;
    ns_buf_t buf;
    ns_buf_init(&buf);
    memset(&a, 0, sizeof a);
    randombytes_buf(&a, sizeof a);
    CHECK_RC(ns_bid_encode(&a, NULL, &buf), NS_OK);
    ns_bid_ext_t h;
    memset(&h, 0xee, sizeof h);
    CHECK_RC(ns_bid_decode(buf.data, buf.len, &b, &h), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(!h.present && h.mask == 0); /* an older bidder: nothing said */
    CHECK(s_prefixes_refused(s_dec_bid, &buf, &b));
    /* trailing bytes are refused */
    CHECK_RC(ns_buf_append(&buf, "\xc0", 1), NS_OK);
    CHECK(ns_bid_decode(buf.data, buf.len, &b, NULL) != NS_OK);
    /* with what it holds: [6 fields, mask, proof] */
    ns_bid_ext_t held = {.present = true, .free_slots = 3, .mask = 6}, back;
    randombytes_buf(held.proof, sizeof held.proof);
    buf.len = 0;
    CHECK_RC(ns_bid_encode(&a, &held, &buf), NS_OK);
    CHECK_RC(ns_bid_decode(buf.data, buf.len, &b, &back), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    CHECK(back.present && back.free_slots == 3 && back.mask == 6 &&
          memcmp(back.proof, held.proof, 32) == 0);
    CHECK(s_prefixes_refused(s_dec_bid, &buf, &b));
    ns_buf_release(&buf);
}

/* Input bytes for the possession proofs below: input i is bytes i*7+k. */
static int s_read_input(void *u, uint32_t i, uint64_t off, uint8_t *buf,
                        size_t n)
{
    const uint64_t *flip = u; /* a byte that differs, or UINT64_MAX */
    for (size_t k = 0; k < n; k++)
        buf[k] = (uint8_t)(i * 7 + off + k) ^ (off + k == *flip ? 1 : 0);
    return NS_OK;
}

TEST(held_proof_binds_job_provider_mask_and_bytes)
{
    ns_announce_t a;
    memset(&a, 0, sizeof a);
    randombytes_buf(a.job_id, sizeof a.job_id);
    a.n_inputs = 3;
    a.inputs[0].size = 100; /* shorter than a piece: the whole input */
    a.inputs[1].size = UINT64_C(1) << 30;
    a.inputs[2].size = 4096;
    uint8_t prov[32], other[32];
    randombytes_buf(prov, sizeof prov);
    randombytes_buf(other, sizeof other);
    uint64_t none = UINT64_MAX;
    ns_hash_t p1, p2;
    CHECK_RC(ns_held_proof(&a, prov, 3, s_read_input, &none, p1), NS_OK);
    CHECK_RC(ns_held_proof(&a, prov, 3, s_read_input, &none, p2), NS_OK);
    CHECK(memcmp(p1, p2, 32) == 0); /* deterministic */
    CHECK_RC(ns_held_proof(&a, other, 3, s_read_input, &none, p2), NS_OK);
    CHECK(memcmp(p1, p2, 32) != 0); /* bound to the provider */
    CHECK_RC(ns_held_proof(&a, prov, 1, s_read_input, &none, p2), NS_OK);
    CHECK(memcmp(p1, p2, 32) != 0); /* and to the mask */
    a.job_id[0] ^= 1;
    CHECK_RC(ns_held_proof(&a, prov, 3, s_read_input, &none, p2), NS_OK);
    CHECK(memcmp(p1, p2, 32) != 0); /* and to the job */
    a.job_id[0] ^= 1;
    /* input 0 is read whole: any byte of it changes the proof */
    uint64_t flip = 57;
    CHECK_RC(ns_held_proof(&a, prov, 1, s_read_input, &flip, p2), NS_OK);
    CHECK_RC(ns_held_proof(&a, prov, 1, s_read_input, &none, p1), NS_OK);
    CHECK(memcmp(p1, p2, 32) != 0);
    /* a mask beyond the announced inputs is refused */
    CHECK_RC(ns_held_proof(&a, prov, 8, s_read_input, &none, p2), NS_ERR_INVAL);
    CHECK(ns_held_bytes(&a, 5) == 4196);
    CHECK(ns_held_bytes(&a, 0) == 0);
}

TEST(fetch_and_chunk_round_trip_and_caps)
{
    ns_chunk_t f, g;
    ns_buf_t buf;
    ns_buf_init(&buf);
    memset(&f, 0, sizeof f);
    randombytes_buf(f.job_id, sizeof f.job_id);
    f.blob = NS_BLOB_OUTPUT(3);
    f.offset = 5 * (uint64_t)NS_CHUNK_BYTES;
    f.len = NS_CHUNK_BYTES;
    CHECK_RC(ns_fetch_encode(&f, &buf), NS_OK);
    CHECK_RC(ns_fetch_decode(buf.data, buf.len, &g), NS_OK);
    CHECK(memcmp(g.job_id, f.job_id, NS_HASH_BYTES) == 0 && g.blob == f.blob &&
          g.offset == f.offset && g.len == f.len);
    CHECK(s_prefixes_refused(s_dec_fetch, &buf, &g));
    f.len = NS_CHUNK_BYTES + 1; /* asks for more than a chunk */
    CHECK_RC(ns_fetch_encode(&f, &buf), NS_OK);
    CHECK_RC(ns_fetch_decode(buf.data, buf.len, &g), NS_ERR_INVAL);
    f.len = 0;
    CHECK_RC(ns_fetch_encode(&f, &buf), NS_OK);
    CHECK_RC(ns_fetch_decode(buf.data, buf.len, &g), NS_ERR_INVAL);

    uint8_t *data = malloc(NS_CHUNK_BYTES + 1);
    randombytes_buf(data, NS_CHUNK_BYTES + 1);
    ns_chunk_t c = f;
    c.total = 10 * (uint64_t)NS_CHUNK_BYTES;
    c.data = data;
    c.data_len = NS_CHUNK_BYTES;
    CHECK_RC(ns_chunk_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chunk_decode(buf.data, buf.len, &g), NS_OK);
    CHECK(g.total == c.total && g.offset == c.offset &&
          g.data_len == c.data_len && memcmp(g.data, data, c.data_len) == 0);
    CHECK(s_prefixes_refused(s_dec_chunk, &buf, &g));
    c.data_len = NS_CHUNK_BYTES + 1;
    CHECK_RC(ns_chunk_encode(&c, &buf), NS_ERR_TOOBIG);
    /* bytes past the blob's end */
    c.data_len = NS_CHUNK_BYTES;
    c.total = c.offset + NS_CHUNK_BYTES - 1;
    CHECK_RC(ns_chunk_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chunk_decode(buf.data, buf.len, &g), NS_ERR_INVAL);
    c.offset = c.total + 1;
    c.data_len = 0;
    CHECK_RC(ns_chunk_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chunk_decode(buf.data, buf.len, &g), NS_ERR_INVAL);
    free(data);
    ns_buf_release(&buf);
}

TEST(awarded_round_trip_and_caps)
{
    uint8_t je[300], ae[500];
    randombytes_buf(je, sizeof je);
    randombytes_buf(ae, sizeof ae);
    ns_awarded_t a = {{0}, je, sizeof je, ae, sizeof ae}, b;
    randombytes_buf(a.job_id, sizeof a.job_id);
    ns_buf_t buf;
    ns_buf_init(&buf);
    CHECK_RC(ns_awarded_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_awarded_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(a.job_id, b.job_id, NS_HASH_BYTES) == 0);
    CHECK(b.job_entry_len == sizeof je &&
          memcmp(b.job_entry, je, sizeof je) == 0);
    CHECK(b.award_entry_len == sizeof ae &&
          memcmp(b.award_entry, ae, sizeof ae) == 0);
    CHECK(s_prefixes_refused(s_dec_awarded, &buf, &b));
    /* empty entries, and entries over the ledger's cap */
    a.job_entry_len = 0;
    CHECK_RC(ns_awarded_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_awarded_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    uint8_t *big = calloc(1, NS_MAX_ENTRY_BYTES + 1);
    a.job_entry = big;
    a.job_entry_len = NS_MAX_ENTRY_BYTES + 1;
    CHECK_RC(ns_awarded_encode(&a, &buf), NS_ERR_TOOBIG);
    a.job_entry_len = NS_MAX_ENTRY_BYTES;
    CHECK_RC(ns_awarded_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_awarded_decode(buf.data, buf.len, &b), NS_OK);
    free(big);
    ns_buf_release(&buf);
}

static int s_dec_failure(const uint8_t *p, size_t n, void *o)
{
    return ns_failure_decode(p, n, o);
}

TEST(failure_round_trip_signature_and_caps)
{
    ns_identity_t *id = ns_identity_generate();
    ns_hash_t net = {1, 2, 3};
    ns_failure_t f, g;
    memset(&f, 0, sizeof f);
    randombytes_buf(f.job_id, sizeof f.job_id);
    randombytes_buf(f.award_id, sizeof f.award_id);
    f.kind = NS_FAIL_BUILD;
    f.timestamp_ms = 1800000000000;
    snprintf(f.reason, sizeof f.reason, "build failed: <source>:3:17: error");
    ns_failure_sign(&f, id, net);
    CHECK_RC(ns_failure_verify(&f, net), NS_OK);
    ns_buf_t buf;
    ns_buf_init(&buf);
    CHECK_RC(ns_failure_encode(&f, &buf), NS_OK);
    CHECK_RC(ns_failure_decode(buf.data, buf.len, &g), NS_OK);
    CHECK(memcmp(&f, &g, sizeof f) == 0);
    CHECK_RC(ns_failure_verify(&g, net), NS_OK);
    CHECK(s_prefixes_refused(s_dec_failure, &buf, &g));
    /* every signed field counts */
    g.kind = NS_FAIL_CRASH;
    CHECK_RC(ns_failure_verify(&g, net), NS_ERR_SIG);
    g = f;
    g.reason[0] = 'B';
    CHECK_RC(ns_failure_verify(&g, net), NS_ERR_SIG);
    ns_hash_t other = {9};
    CHECK_RC(ns_failure_verify(&f, other), NS_ERR_SIG);
    /* an unknown kind; a reason with a newline; the longest reason */
    g = f;
    g.kind = NS_FAIL_KIND_MAX + 1;
    CHECK_RC(ns_failure_encode(&g, &buf), NS_ERR_INVAL);
    g = f;
    g.reason[3] = '\n';
    CHECK_RC(ns_failure_encode(&g, &buf), NS_OK);
    CHECK_RC(ns_failure_decode(buf.data, buf.len, &g), NS_ERR_INVAL);
    g = f;
    memset(g.reason, 'x', NS_MAX_FAIL_REASON);
    g.reason[NS_MAX_FAIL_REASON] = '\0';
    CHECK_RC(ns_failure_encode(&g, &buf), NS_OK);
    CHECK_RC(ns_failure_decode(buf.data, buf.len, &f), NS_OK);
    CHECK(ns_fail_kind_is_jobs(NS_FAIL_BUILD) &&
          ns_fail_kind_is_jobs(NS_FAIL_ARGS) &&
          !ns_fail_kind_is_jobs(NS_FAIL_CRASH));
    ns_buf_release(&buf);
    ns_identity_destroy(&id);
}

TEST(challenge_messages_round_trip_and_caps)
{
    ns_chal_msg_t c, d;
    memset(&c, 0, sizeof c);
    randombytes_buf(c.nonce, sizeof c.nonce);
    randombytes_buf(c.seed, sizeof c.seed);
    c.device = 1;
    c.label_bytes = 16 << 20;
    c.label_segments = 4;
    c.k = 16;
    c.imatmul_n = 256;
    ns_buf_t buf;
    ns_buf_init(&buf);
    CHECK_RC(ns_chal_msg_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chal_msg_decode(buf.data, buf.len, &d), NS_OK);
    CHECK(memcmp(&c, &d, sizeof c) == 0);
    for (size_t n = 0; n < buf.len; n++)
        CHECK(ns_chal_msg_decode(buf.data, n, &d) != NS_OK);
    c.imatmul_n = NS_CHAL_MAX_IMATMUL_N + 1; /* over the cap */
    CHECK_RC(ns_chal_msg_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chal_msg_decode(buf.data, buf.len, &d), NS_ERR_INVAL);
    c.imatmul_n = 0;
    c.label_bytes = 0; /* asks for nothing */
    CHECK_RC(ns_chal_msg_encode(&c, &buf), NS_OK);
    CHECK_RC(ns_chal_msg_decode(buf.data, buf.len, &d), NS_ERR_INVAL);

    ns_chal_done_t a, b;
    memset(&a, 0, sizeof a);
    randombytes_buf(a.nonce, sizeof a.nonce);
    randombytes_buf(a.label_root, sizeof a.label_root);
    randombytes_buf(a.c_hash, sizeof a.c_hash);
    a.answer_bytes = 300000;
    a.label_answer_bytes = 40000;
    CHECK_RC(ns_chal_done_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_chal_done_decode(buf.data, buf.len, &b), NS_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    a.status = NS_ERR_STATE;
    CHECK_RC(ns_chal_done_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_chal_done_decode(buf.data, buf.len, &b), NS_OK);
    CHECK_EQ_INT(b.status, NS_ERR_STATE);
    a.status = 5; /* not an error code */
    CHECK_RC(ns_chal_done_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_chal_done_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    a.status = 0;
    a.label_answer_bytes = a.answer_bytes + 1; /* parts bigger than all */
    CHECK_RC(ns_chal_done_encode(&a, &buf), NS_OK);
    CHECK_RC(ns_chal_done_decode(buf.data, buf.len, &b), NS_ERR_INVAL);
    ns_buf_release(&buf);
}

TEST(offer_requirements)
{
    ns_devinfo_t dev[2];
    memset(dev, 0, sizeof dev);
    dev[0].type = NS_DEV_CPU;
    dev[0].global_mem_bytes = UINT64_C(8) << 30;
    dev[0].gflops = 100;
    snprintf(dev[0].cl_c_version, sizeof dev[0].cl_c_version, "OpenCL C 1.2");
    dev[1] = dev[0];
    dev[1].type = NS_DEV_GPU;
    dev[1].global_mem_bytes = UINT64_C(24) << 30;
    ns_offer_t o = {dev, 2, 1000, 100, 1, "eu"};
    ns_reqs_t r;
    memset(&r, 0, sizeof r);
    uint32_t d = 9;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, &d), 0);
    r.min_mem_bytes = UINT64_C(16) << 30;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, &d), 0);
    CHECK_EQ_INT(d, 1); /* the device that qualifies */
    r.device_type = NS_DEV_CPU;
    CHECK(ns_reqs_check(&r, &o, 50, 10, 1000, &d) != 0);
    memset(&r, 0, sizeof r);
    snprintf(r.region, sizeof r.region, "us");
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, NULL), NS_REQ_REGION);
    r.region[0] = '\0';
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 101, 10, 1000, NULL), NS_REQ_STAKE);
    o.free_slots = 0;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, NULL), NS_REQ_SLOTS);
    o.free_slots = 1;
    /* buffers: the largest within max_alloc, all of them within memory;
     * the GPU allocates 6 GiB at a time, the CPU 2 GiB */
    dev[0].max_alloc_bytes = UINT64_C(2) << 30;
    dev[1].max_alloc_bytes = UINT64_C(6) << 30;
    r.max_buffer_bytes = UINT64_C(4) << 30;
    r.buffer_bytes = UINT64_C(12) << 30;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, &d), 0);
    CHECK_EQ_INT(d, 1);
    r.max_buffer_bytes = UINT64_C(7) << 30;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, NULL), NS_REQ_BUFFERS);
    r.max_buffer_bytes = UINT64_C(1) << 30;
    r.buffer_bytes = UINT64_C(25) << 30;
    CHECK_EQ_INT(ns_reqs_check(&r, &o, 50, 10, 1000, NULL), NS_REQ_BUFFERS);
    memset(&r, 0, sizeof r);
    /* the heartbeat view of an offer is the same offer */
    ns_heartbeat_t *hb = calloc(1, sizeof *hb);
    hb->n_devices = 2;
    memcpy(hb->devices, dev, sizeof dev);
    hb->price = 1000;
    hb->stake = 100;
    hb->free_slots = 1;
    ns_offer_t h;
    ns_offer_from_heartbeat(&h, hb);
    CHECK_EQ_INT(ns_reqs_check(&r, &h, 50, 10, 1000, NULL), 0);
    free(hb);
}

TEST(requester_acceptance_rule)
{
    ns_account_t a;
    memset(&a, 0, sizeof a);
    CHECK(ns_requester_acceptable(&a));
    a.jobs_posted = 4; /* within the grace */
    CHECK(ns_requester_acceptable(&a));
    a.jobs_posted = 10;
    a.jobs_settled_as_requester = 4;
    CHECK(!ns_requester_acceptable(&a));
    a.jobs_settled_as_requester = 5;
    CHECK(ns_requester_acceptable(&a));
    a.banned = true;
    CHECK(!ns_requester_acceptable(&a));
}

/* The auction: price first; near-ties to a free provider, then standing,
 * then round trip, then a hash that spreads equal providers over jobs. */
TEST(auction_ranks_and_spreads)
{
    enum { P = 8 };
    ns_bid_t bids[P];
    ns_bid_rank_t rank[P];
    ns_announce_t a;
    memset(bids, 0, sizeof bids);
    memset(rank, 0, sizeof rank);
    memset(&a, 0, sizeof a);
    for (int i = 0; i < P; i++) {
        bids[i].provider[0] = (uint8_t)(i + 1);
        bids[i].price = 1000;
        rank[i].free = true;
        rank[i].arrival_us = 1000000 + (uint64_t)i * 100; /* one bucket */
        rank[i].linked = true;
    }
    /* a cheaper bid (beyond 1%) wins whatever else */
    bids[5].price = 980;
    rank[5].free = false;
    rank[5].standing = -20;
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 5);
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 979, &a), -1); /* max price */
    /* within 1%: the busy one loses to a free one */
    bids[5].price = 995;
    rank[5].standing = 0;
    CHECK(ns_auction_pick(bids, rank, P, 1000, &a) != 5);
    /* among the free ones, the one holding more of the inputs, even
     * against a better standing; the busy one holding them still loses */
    for (int i = 0; i < P; i++)
        rank[i].standing = i == 3 ? 0 : -2;
    rank[2].held_bytes = 3 * NS_POLICY_HELD_BUCKET_BYTES;
    rank[4].held_bytes = 2 * NS_POLICY_HELD_BUCKET_BYTES + 5;
    rank[5].held_bytes = 9 * NS_POLICY_HELD_BUCKET_BYTES;
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 2);
    /* less than a bucket is not worth a tie (small jobs keep spreading) */
    rank[2].held_bytes = NS_POLICY_HELD_BUCKET_BYTES - 1;
    rank[4].held_bytes = 0;
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 3);
    rank[2].held_bytes = rank[4].held_bytes = rank[5].held_bytes = 0;
    /* then the better standing */
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 3);
    /* then the earlier round trip, by buckets */
    for (int i = 0; i < P; i++)
        rank[i].standing = 0;
    rank[6].arrival_us = 1000000 - NS_POLICY_RTT_BUCKET_US;
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 6);
    /* but only between bidders linked to us before the announcement: a
     * bid over a link made for it also waited for the handshake, and the
     * bootstrap of a light peer would win every tie */
    rank[0].arrival_us = 1000000 - 3 * NS_POLICY_RTT_BUCKET_US;
    rank[0].linked = true;
    for (int i = 1; i < P; i++)
        rank[i].linked = false;
    uint32_t first = 0;
    for (uint32_t j = 0; j < 100; j++) {
        memcpy(a.job_id, &j, sizeof j);
        first += ns_auction_pick(bids, rank, P, 1000, &a) == 0;
    }
    CHECK(first < 40); /* about 1 in 8, not every time */
    rank[0].arrival_us = 1000000;
    memset(a.job_id, 0, sizeof a.job_id);
    for (int i = 0; i < P; i++)
        rank[i].linked = true;
    CHECK_EQ_INT(ns_auction_pick(bids, rank, P, 1000, &a), 6);
    /* excluded providers never win */
    a.n_excluded = 1;
    memcpy(a.excluded[0], bids[6].provider, NS_ID_BYTES);
    CHECK(ns_auction_pick(bids, rank, P, 1000, &a) != 6);
    a.n_excluded = 0;
    /* all equal: each wins its share over many jobs, not one all */
    rank[6].arrival_us = 1000000;
    bids[5].price = 1000;
    rank[5].free = true;
    uint32_t wins[P] = {0};
    for (uint32_t j = 0; j < 800; j++) {
        memset(a.job_id, 0, sizeof a.job_id);
        memcpy(a.job_id, &j, sizeof j);
        int w = ns_auction_pick(bids, rank, P, 1000, &a);
        if (w >= 0)
            wins[w]++;
    }
    for (int i = 0; i < P; i++)
        CHECK(wins[i] >= 60 && wins[i] <= 140); /* 100 each on average */
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(announce_round_trip_and_caps);
    RUN(announce_draw);
    RUN(bid_round_trip);
    RUN(held_proof_binds_job_provider_mask_and_bytes);
    RUN(fetch_and_chunk_round_trip_and_caps);
    RUN(awarded_round_trip_and_caps);
    RUN(failure_round_trip_signature_and_caps);
    RUN(challenge_messages_round_trip_and_caps);
    RUN(offer_requirements);
    RUN(requester_acceptance_rule);
    RUN(auction_ranks_and_spreads);
    return ns_test_finish("market_messages");
}
