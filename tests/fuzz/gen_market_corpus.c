/* gen_market_corpus.c - write seed inputs for fuzz_market into a directory.
 *
 *   fuzz_market_gen_corpus DIR
 *
 * Seeds: JOB announcements (no exclusions, a full list, requirements set),
 * a BID signed for the fixture's network (and one whose signature does not
 * verify), AWARDED (small entries, one empty; entries at the 69 KiB cap
 * are left out to keep the corpus small),
 * FETCHes, CHUNKs (empty, middle, last), FAILED reports of every kind
 * signed for the fixture's network (and ones that do not verify, an
 * unknown kind, a reason that is too long or not one line), each encoded
 * by the real
 * encoder and decoded back before it is saved, with mutants that reach
 * the error paths (truncated, a trailing byte, last byte flipped, a
 * count changed).
 */
#include "market_fixture.h"
#include "seeds.h"

#include "nightshift/identity.h"
#include "nightshift/market.h"

static ns_announce_t s_ann, s_back;

static void s_announce(const char *name, ns_buf_t *b)
{
    seeds_check(ns_announce_encode(&s_ann, b), name);
    seeds_check(ns_announce_decode(b->data, b->len, &s_back), name);
    seeds_save_mutants(name, b->data, b->len, 0, 0x9f); /* array of 15 */
}

int main(int argc, char **argv)
{
    ns_buf_t b;
    ns_hash_t net;
    seeds_init(argc, argv);
    ns_buf_init(&b);
    fuzz_market_network(net);
    ns_identity_t *id = ns_identity_generate();
    if (!id)
        seeds_die("identity", NS_ERR_NOMEM);

    /* JOB */
    ns_hash(s_ann.job_id, "job", 3);
    ns_hash(s_ann.desc_id, "descriptor", 10);
    memcpy(s_ann.requester, ns_identity_pk(id), NS_ID_BYTES);
    snprintf(s_ann.endpoint, sizeof s_ann.endpoint, "tcp://127.0.0.1:7946");
    s_ann.max_price = 5000;
    s_ann.collateral = 1000;
    s_ann.work_flops = UINT64_C(1) << 33;
    s_ann.n_items = 1 << 20;
    s_ann.input_bytes = 4 << 20;
    s_ann.bid_window_ms = 1500;
    s_ann.deadline_ms = UINT64_C(1800000000000);
    s_ann.round = 1;
    s_announce("announce, round 1", &b);
    s_ann.reqs.min_mem_bytes = UINT64_C(16) << 30;
    s_ann.reqs.device_type = NS_DEV_GPU;
    s_ann.reqs.min_cl_major = 3;
    s_ann.reqs.min_cl_minor = 0;
    snprintf(s_ann.reqs.region, sizeof s_ann.reqs.region, "eu-west");
    snprintf(s_ann.endpoint, sizeof s_ann.endpoint, "tcp://[::1]:7000");
    s_ann.round = 3;
    s_ann.n_excluded = NS_MAX_EXCLUDED;
    for (uint32_t i = 0; i < NS_MAX_EXCLUDED; i++)
        ns_hash(s_ann.excluded[i], &i, sizeof i);
    s_announce("announce, round 3, requirements, 16 excluded", &b);
    s_ann.n_excluded = 2;
    s_ann.bid_window_ms = 60000;
    s_ann.reqs.device_type = NS_DEV_ACCEL;
    s_announce("announce, 2 excluded, longest window", &b);
    s_ann.n_inputs = 3;
    for (uint32_t i = 0; i < s_ann.n_inputs; i++) {
        ns_hash(s_ann.inputs[i].hash, &i, sizeof i);
        s_ann.inputs[i].size = (UINT64_C(1) << (10 + 4 * i)) + i;
    }
    s_announce("announce naming 3 inputs", &b);
    s_ann.draw = ns_bid_draw_for(10000, 32);
    s_announce("announce naming 3 inputs, 32 of 10,000 drawn", &b);
    s_ann.n_inputs = 0;
    s_announce("announce, no inputs, a draw", &b);
    s_ann.draw = 0;

    /* BID */
    ns_bid_t bid, bid_back;
    memset(&bid, 0, sizeof bid);
    memcpy(bid.job_id, s_ann.job_id, NS_HASH_BYTES);
    bid.price = 4200;
    bid.est_ms = 2500;
    bid.timestamp_ms = UINT64_C(1800000000123);
    ns_bid_sign(&bid, id, net);
    seeds_check(ns_bid_verify(&bid, net), "bid verify");
    seeds_check(ns_bid_encode(&bid, NULL, &b), "bid");
    seeds_check(ns_bid_decode(b.data, b.len, &bid_back, NULL), "bid");
    seeds_save_mutants("bid, signed", b.data, b.len, 0, 0x95);
    ns_bid_ext_t held = {.present = true, .free_slots = 1, .mask = 5};
    memset(held.proof, 0x3c, NS_HASH_BYTES);
    seeds_check(ns_bid_encode(&bid, &held, &b), "bid, held");
    seeds_save_mutants("bid, holding inputs 0 and 2", b.data, b.len, 0, 0x98);
    bid.price = 1;
    seeds_check(ns_bid_encode(&bid, NULL, &b), "bid");
    seeds_save("bid, price changed after signing", b.data, b.len);

    /* AWARDED: the entries are opaque bytes here (the ledger checks them) */
    static uint8_t entry[400];
    for (size_t i = 0; i < sizeof entry; i++)
        entry[i] = (uint8_t)(i * 13 + 1);
    ns_awarded_t aw, aw_back;
    memcpy(aw.job_id, s_ann.job_id, NS_HASH_BYTES);
    aw.job_entry = entry;
    aw.job_entry_len = 180;
    aw.award_entry = entry + 200;
    aw.award_entry_len = 150;
    seeds_check(ns_awarded_encode(&aw, &b), "awarded");
    seeds_check(ns_awarded_decode(b.data, b.len, &aw_back), "awarded");
    seeds_save_mutants("awarded, small entries", b.data, b.len, 0, 0x94);
    aw.job_entry_len = 1;
    aw.award_entry_len = 1;
    seeds_check(ns_awarded_encode(&aw, &b), "awarded");
    seeds_check(ns_awarded_decode(b.data, b.len, &aw_back), "awarded");
    seeds_save("awarded, one-byte entries", b.data, b.len);
    aw.award_entry_len = 0;
    seeds_check(ns_awarded_encode(&aw, &b), "awarded");
    seeds_save("awarded, empty award entry", b.data, b.len);

    /* FETCH */
    ns_chunk_t c, c_back;
    memset(&c, 0, sizeof c);
    memcpy(c.job_id, s_ann.job_id, NS_HASH_BYTES);
    c.blob = NS_BLOB_DESCRIPTOR;
    c.len = NS_CHUNK_BYTES;
    seeds_check(ns_fetch_encode(&c, &b), "fetch");
    seeds_check(ns_fetch_decode(b.data, b.len, &c_back), "fetch");
    seeds_save_mutants("fetch descriptor", b.data, b.len, 0, 0x95);
    c.blob = NS_BLOB_OUTPUT(3);
    c.offset = UINT64_C(5) << 30;
    c.len = 1;
    seeds_check(ns_fetch_encode(&c, &b), "fetch");
    seeds_save("fetch output 3 at 5 GiB, 1 byte", b.data, b.len);
    c.len = NS_CHUNK_BYTES + 1;
    seeds_check(ns_fetch_encode(&c, &b), "fetch");
    seeds_save("fetch over the chunk size", b.data, b.len);

    /* CHUNK */
    static uint8_t bytes[300];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 7);
    memset(&c, 0, sizeof c);
    memcpy(c.job_id, s_ann.job_id, NS_HASH_BYTES);
    c.blob = NS_BLOB_INPUT(0);
    c.total = 1000;
    c.offset = 100;
    c.data = bytes;
    c.data_len = sizeof bytes;
    seeds_check(ns_chunk_encode(&c, &b), "chunk");
    seeds_check(ns_chunk_decode(b.data, b.len, &c_back), "chunk");
    seeds_save_mutants("chunk, 300 bytes in the middle", b.data, b.len, 0,
                       0x94);
    c.offset = 700;
    seeds_check(ns_chunk_encode(&c, &b), "chunk");
    seeds_check(ns_chunk_decode(b.data, b.len, &c_back), "chunk");
    seeds_save("chunk, the last 300 bytes", b.data, b.len);
    c.offset = 701;
    seeds_check(ns_chunk_encode(&c, &b), "chunk");
    seeds_save("chunk, one byte past the end", b.data, b.len);
    c.offset = c.total = 0;
    c.data_len = 0;
    seeds_check(ns_chunk_encode(&c, &b), "chunk");
    seeds_check(ns_chunk_decode(b.data, b.len, &c_back), "chunk");
    seeds_save("chunk, empty blob", b.data, b.len);

    /* FAILED */
    ns_failure_t f, f_back;
    memset(&f, 0, sizeof f);
    memcpy(f.job_id, s_ann.job_id, NS_HASH_BYTES);
    ns_hash(f.award_id, "award", 5);
    f.timestamp_ms = UINT64_C(1800000000456);
    for (uint32_t k = 0; k <= NS_FAIL_KIND_MAX; k++) {
        char what[96];
        f.kind = k;
        snprintf(f.reason, sizeof f.reason, "%s: error %u on line %u",
                 ns_fail_kind_name(k), k * 7, k + 1);
        ns_failure_sign(&f, id, net);
        seeds_check(ns_failure_verify(&f, net), "failure verify");
        seeds_check(ns_failure_encode(&f, &b), "failure");
        seeds_check(ns_failure_decode(b.data, b.len, &f_back), "failure");
        snprintf(what, sizeof what, "failure %s, signed", ns_fail_kind_name(k));
        if (k == NS_FAIL_BUILD) /* array of 6 */
            seeds_save_mutants(what, b.data, b.len, 0, 0x96);
        else
            seeds_save(what, b.data, b.len);
    }
    f.kind = NS_FAIL_TIMEOUT;
    f.reason[0] = '\0';
    ns_failure_sign(&f, id, net);
    seeds_check(ns_failure_encode(&f, &b), "failure");
    seeds_check(ns_failure_decode(b.data, b.len, &f_back), "failure");
    seeds_save("failure, empty reason", b.data, b.len);
    memset(f.reason, 'x', NS_MAX_FAIL_REASON);
    f.reason[NS_MAX_FAIL_REASON] = '\0';
    ns_failure_sign(&f, id, net);
    seeds_check(ns_failure_encode(&f, &b), "failure");
    seeds_check(ns_failure_decode(b.data, b.len, &f_back), "failure");
    seeds_save("failure, longest reason", b.data, b.len);
    f.timestamp_ms++;
    seeds_check(ns_failure_encode(&f, &b), "failure");
    seeds_save("failure, timestamp changed after signing", b.data, b.len);
    snprintf(f.reason, sizeof f.reason, "two\nlines");
    seeds_check(ns_failure_encode(&f, &b), "failure");
    seeds_save("failure, reason with a newline", b.data, b.len);
    {
        ns_chal_msg_t cm;
        memset(&cm, 0, sizeof cm);
        memset(cm.nonce, 0x11, sizeof cm.nonce);
        memset(cm.seed, 0x22, sizeof cm.seed);
        cm.label_bytes = 16u << 20;
        cm.label_segments = 4;
        cm.k = 16;
        cm.imatmul_n = 256;
        seeds_check(ns_chal_msg_encode(&cm, &b), "chal");
        seeds_save_mutants("chal, labelling and product", b.data, b.len, 0,
                           0x97);
        cm.label_bytes = 0;
        seeds_check(ns_chal_msg_encode(&cm, &b), "chal");
        seeds_save("chal, product only", b.data, b.len);
        ns_chal_done_t d;
        memset(&d, 0, sizeof d);
        memset(d.nonce, 0x11, sizeof d.nonce);
        d.answer_bytes = 300000;
        d.label_answer_bytes = 40000;
        seeds_check(ns_chal_done_encode(&d, &b), "chal done");
        seeds_save_mutants("chal done", b.data, b.len, 0, 0x96);
        d.status = NS_ERR_STATE;
        d.answer_bytes = d.label_answer_bytes = 0;
        seeds_check(ns_chal_done_encode(&d, &b), "chal done");
        seeds_save("chal done, busy", b.data, b.len);
    }
    /* the encoder refuses an unknown kind: patch the packed one, the
     * fixint after the array header and three bin 8 of 32 bytes */
    f.kind = NS_FAIL_INPUT;
    f.reason[0] = '\0';
    seeds_check(ns_failure_encode(&f, &b), "failure");
    size_t kind_at = 1 + 3 * (2 + NS_HASH_BYTES);
    if (b.data[kind_at] != NS_FAIL_INPUT)
        seeds_die("failure kind offset", NS_ERR_INVAL);
    b.data[kind_at] = NS_FAIL_KIND_MAX + 1;
    seeds_save("failure, unknown kind", b.data, b.len);

    ns_identity_destroy(&id);
    ns_buf_release(&b);
    seeds_done();
    return 0;
}
