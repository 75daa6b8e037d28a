/* test_control.c - the control socket's request codec (control.h): every
 * request round-trips, the str form of argument-less queries reads, and
 * malformed or unknown requests get their own verdicts. */
#include "../check.h"

#include "nightshift/control.h"

#include <sodium.h>
#include <string.h>

TEST(every_request_round_trips)
{
    ns_buf_t b;
    ns_buf_init(&b);
    static ns_ctl_req_t r, back;
    static const uint8_t desc[300] = {0x93, 1, 2, 3};
    for (int k = NS_CTL_STATUS; k <= NS_CTL_JOBS; k++) {
        memset(&r, 0, sizeof r);
        r.kind = (ns_ctl_kind_t)k;
        if (k == NS_CTL_CONNECT)
            snprintf(r.addr, sizeof r.addr, "abc@tcp://127.0.0.1:9");
        if (k == NS_CTL_BLOCK || k == NS_CTL_TRANSFER)
            randombytes_buf(r.peer, sizeof r.peer);
        if (k == NS_CTL_BLOCK)
            r.ms = 1234;
        if (k >= NS_CTL_TRANSFER && k <= NS_CTL_UNSTAKE)
            r.amount = 77;
        if (k == NS_CTL_CANCEL || k == NS_CTL_JOB)
            randombytes_buf(r.job_id, sizeof r.job_id);
        if (k == NS_CTL_JOB)
            r.from_line = 17;
        if (k == NS_CTL_SUBMIT) {
            r.terms.max_price = 10;
            r.terms.collateral = 5;
            r.terms.bid_window_ms = 20;
            r.terms.no_wait = true;
            r.terms.deadline_s = 60;
            r.terms.timeout_s = 600;
            r.terms.reqs.min_mem_bytes = 1 << 30;
            r.terms.reqs.device_type = 2;
            snprintf(r.terms.reqs.region, sizeof r.terms.reqs.region, "eu");
            r.desc = desc;
            r.desc_len = sizeof desc;
            r.n_args = 3;
            snprintf(r.in_path[0], NS_CTL_MAX_PATH, "/tmp/a.bin");
            snprintf(r.out_path[2], NS_CTL_MAX_PATH, "/tmp/c.bin");
            snprintf(r.source_name, sizeof r.source_name, "mlp.cl");
        }
        CHECK_RC(ns_ctl_req_pack(&r, &b), NS_OK);
        CHECK_RC(ns_ctl_req_read(b.data, b.len, &back), NS_OK);
        if (k == NS_CTL_SUBMIT) {
            CHECK(back.desc_len == sizeof desc &&
                  memcmp(back.desc, desc, sizeof desc) == 0);
            back.desc = r.desc; /* borrowed from the buffer */
        }
        CHECK(memcmp(&r, &back, sizeof r) == 0);
        ns_ctl_kind_t kind;
        CHECK_RC(ns_ctl_kind(ns_ctl_name(r.kind), &kind), NS_OK);
        CHECK_EQ_INT(kind, k);
        for (size_t n = 0; n < b.len; n++)
            CHECK(ns_ctl_req_read(b.data, n, &back) != NS_OK);
    }
    ns_buf_release(&b);
}

static int s_read(const char *bytes, size_t len)
{
    ns_ctl_req_t r;
    return ns_ctl_req_read((const uint8_t *)bytes, len, &r);
}

TEST(job_answer_round_trips)
{
    static ns_ctl_job_t j, back;
    memset(&j, 0, sizeof j);
    j.phase = NS_RQ_DONE;
    j.finished = true;
    j.next_line = 12;
    j.n_lines = 2;
    snprintf(j.lines[0], sizeof j.lines[0], "escrow of 10 credits locked");
    snprintf(j.lines[1], sizeof j.lines[1], "settled");
    j.receipt.phase = NS_RQ_DONE;
    randombytes_buf(j.receipt.provider, NS_ID_BYTES);
    j.receipt.price = 3;
    j.receipt.refund = 7;
    j.receipt.checked = 64;
    j.receipt.rounds = 2;
    j.receipt.failures = 1;
    j.receipt.run_ms = 99;
    snprintf(j.receipt.error, sizeof j.receipt.error, "none");
    ns_buf_t b;
    ns_buf_init(&b);
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, &b);
    ns_ctl_job_pack(&pk, &j);
    CHECK_RC(w.err, NS_OK);
    CHECK_RC(ns_ctl_job_read(b.data, b.len, &back), NS_OK);
    CHECK(memcmp(&j, &back, sizeof j) == 0);
    for (size_t n = 0; n < b.len; n++)
        CHECK(ns_ctl_job_read(b.data, n, &back) != NS_OK);
    ns_buf_release(&b);
}

TEST(bad_requests_have_their_verdicts)
{
    /* "status" as a bare str and as a one-element array */
    CHECK_RC(s_read("\xa6status", 7), NS_OK);
    CHECK_RC(s_read("\x91\xa6status", 8), NS_OK);
    CHECK_RC(s_read("\xa4"
                    "nope",
                    5),
             NS_ERR_NOTFOUND);
    CHECK_RC(s_read("", 0), NS_ERR_INVAL);
    CHECK_RC(s_read("\x90", 1), NS_ERR_INVAL);               /* empty array */
    CHECK_RC(s_read("\x05", 1), NS_ERR_INVAL);               /* not a str */
    CHECK_RC(s_read("\x92\xa6status\x01", 9), NS_ERR_INVAL); /* extra arg */
    CHECK_RC(s_read("\x91\xa5stake", 7), NS_ERR_INVAL);      /* missing */
    CHECK_RC(s_read("\x92\xa5stake\xa1x", 9), NS_ERR_INVAL); /* wrong type */
    CHECK_RC(s_read("\xa6status\xc0", 8), NS_ERR_INVAL);     /* trailing */
    /* a block longer than an hour */
    ns_ctl_req_t r;
    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_BLOCK;
    r.ms = NS_CTL_MAX_BLOCK_MS + 1;
    ns_buf_t b;
    ns_buf_init(&b);
    CHECK_RC(ns_ctl_req_pack(&r, &b), NS_OK);
    CHECK_RC(ns_ctl_req_read(b.data, b.len, &r), NS_ERR_INVAL);
    ns_buf_release(&b);
    /* over the request cap */
    static char big[NS_CTL_MAX_REQUEST + 1];
    CHECK_RC(s_read(big, sizeof big), NS_ERR_INVAL);
    /* a submit with a relative path */
    static ns_ctl_req_t s;
    memset(&s, 0, sizeof s);
    s.kind = NS_CTL_SUBMIT;
    s.desc = (const uint8_t *)"x";
    s.desc_len = 1;
    s.n_args = 1;
    snprintf(s.in_path[0], NS_CTL_MAX_PATH, "relative.bin");
    ns_buf_init(&b);
    CHECK_RC(ns_ctl_req_pack(&s, &b), NS_OK);
    CHECK_RC(ns_ctl_req_read(b.data, b.len, &s), NS_ERR_INVAL);
    ns_buf_release(&b);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(every_request_round_trips);
    RUN(job_answer_round_trips);
    RUN(bad_requests_have_their_verdicts);
    return ns_test_finish("node_control");
}
