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
    for (int k = NS_CTL_STATUS; k <= NS_CTL_CANCEL; k++) {
        ns_ctl_req_t r, back;
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
        if (k == NS_CTL_CANCEL)
            randombytes_buf(r.job_id, sizeof r.job_id);
        CHECK_RC(ns_ctl_req_pack(&r, &b), NS_OK);
        CHECK_RC(ns_ctl_req_read(b.data, b.len, &back), NS_OK);
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

TEST(bad_requests_have_their_verdicts)
{
    /* "status" as a bare str and as a one-element array */
    CHECK_RC(s_read("\xa6status", 7), NS_OK);
    CHECK_RC(s_read("\x91\xa6status", 8), NS_OK);
    CHECK_RC(s_read("\xa4" "nope", 5), NS_ERR_NOTFOUND);
    CHECK_RC(s_read("", 0), NS_ERR_INVAL);
    CHECK_RC(s_read("\x90", 1), NS_ERR_INVAL);     /* empty array */
    CHECK_RC(s_read("\x05", 1), NS_ERR_INVAL);     /* not a str */
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
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(every_request_round_trips);
    RUN(bad_requests_have_their_verdicts);
    return ns_test_finish("node_control");
}
