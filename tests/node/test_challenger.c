/* test_challenger.c - the requester's side of a hardware challenge
 * (challenger.h) against a scripted provider: a provider that stays busy
 * is passed over without a verdict; one that answers an error is WRONG;
 * one that never answers is LATE after its retries. */
#include "check.h"

#include "nightshift/challenger.h"
#include "nightshift/market.h"
#include "nightshift/policy.h"

#include <sodium.h>
#include <string.h>

static uint8_t s_provider[NS_ID_BYTES];
static uint32_t s_sent; /* CHAL messages sent to the provider */
static ns_chal_msg_t s_last;

static int s_send(void *u, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                  const uint8_t *body, size_t len)
{
    (void)u;
    if (memcmp(peer, s_provider, NS_ID_BYTES) == 0 && type == NS_MSG_MKT_CHAL &&
        ns_chal_msg_decode(body, len, &s_last) == NS_OK)
        s_sent++;
    return NS_OK;
}

static const ns_node_io_t s_io = {.send = s_send};

/* The provider's CHAL_DONE for the last challenge sent, with status. */
static int s_answer(ns_challenger_t *c, int32_t status, uint64_t now)
{
    ns_chal_done_t d;
    memset(&d, 0, sizeof d);
    memcpy(d.nonce, s_last.nonce, NS_HASH_BYTES);
    d.status = status;
    ns_buf_t b;
    ns_buf_init(&b);
    int rc = ns_chal_done_encode(&d, &b);
    if (rc == NS_OK) {
        ns_node_msg_t m = {
            NS_MSG_MKT_CHAL_DONE, s_provider, b.data, b.len, NULL, NULL};
        rc = ns_challenger_on_msg(c, &s_io, &m, now);
    }
    ns_buf_release(&b);
    return rc;
}

static int s_start(ns_challenger_t *c, uint64_t now)
{
    ns_devinfo_t claim;
    memset(&claim, 0, sizeof claim);
    claim.type = NS_DEV_CPU;
    claim.gbps = 10;
    claim.gflops = 100;
    claim.max_alloc_bytes = UINT64_C(1) << 30;
    s_sent = 0;
    return ns_challenger_start(c, &s_io, s_provider, 0, &claim,
                               NS_LABEL_MIN_BYTES, 64, 1000, now);
}

TEST(a_provider_that_stays_busy_gets_no_verdict)
{
    ns_challenger_t c;
    ns_challenger_init(&c);
    uint64_t now = 1000;
    CHECK_RC(s_start(&c, now), NS_OK);
    CHECK_EQ_INT(s_sent, 1);
    char why[160] = "";
    int v = NS_CHALLENGER_PENDING;
    /* busy every time it is asked: asked again every BUSY_RETRY_MS */
    for (int i = 0; i < 200 && v == NS_CHALLENGER_PENDING; i++) {
        CHECK_RC(s_answer(&c, NS_ERR_STATE, now), NS_OK);
        now += NS_CHALLENGER_BUSY_RETRY_MS;
        v = ns_challenger_tick(&c, &s_io, now, why, sizeof why);
        now += 1;
        if (v == NS_CHALLENGER_PENDING)
            v = ns_challenger_tick(&c, &s_io, now, why, sizeof why);
    }
    CHECK_EQ_INT(v, NS_CHALLENGER_BUSY); /* not WRONG: it lied about nothing */
    CHECK_EQ_INT(s_sent, NS_CHALLENGER_BUSY_RETRIES + 1);
    CHECK(strstr(why, "busy") != NULL);
    CHECK(!c.active);
    ns_challenger_release(&c);
}

TEST(busy_then_free_runs_the_challenge)
{
    ns_challenger_t c;
    ns_challenger_init(&c);
    uint64_t now = 5000;
    char why[160] = "";
    CHECK_RC(s_start(&c, now), NS_OK);
    CHECK_RC(s_answer(&c, NS_ERR_STATE, now), NS_OK);
    CHECK_EQ_INT(ns_challenger_tick(&c, &s_io, now, why, sizeof why),
                 NS_CHALLENGER_PENDING);
    CHECK_EQ_INT(s_sent, 1); /* not at once */
    now += NS_CHALLENGER_BUSY_RETRY_MS;
    CHECK_EQ_INT(ns_challenger_tick(&c, &s_io, now, why, sizeof why),
                 NS_CHALLENGER_PENDING);
    CHECK_EQ_INT(s_sent, 2); /* asked again a moment later */
    CHECK(c.active);
    ns_challenger_release(&c);
}

TEST(an_error_answer_is_wrong_and_silence_is_late)
{
    ns_challenger_t c;
    ns_challenger_init(&c);
    uint64_t now = 9000;
    char why[160] = "";
    CHECK_RC(s_start(&c, now), NS_OK);
    CHECK_RC(s_answer(&c, NS_ERR_OPENCL, now + 5), NS_OK);
    CHECK_EQ_INT(ns_challenger_tick(&c, &s_io, now + 6, why, sizeof why),
                 NS_CHAL_WRONG);
    CHECK(strstr(why, "could not run") != NULL);
    /* no answer at all: late, after its fresh tries */
    CHECK_RC(s_start(&c, now), NS_OK);
    int v = NS_CHALLENGER_PENDING;
    for (int i = 0; i < 100 && v == NS_CHALLENGER_PENDING; i++) {
        now += NS_POLICY_CHAL_MAX_WAIT_MS / 4 + 1;
        v = ns_challenger_tick(&c, &s_io, now, why, sizeof why);
    }
    CHECK_EQ_INT(v, NS_CHAL_LATE);
    CHECK_EQ_INT(s_sent, NS_CHALLENGER_LATE_RETRIES + 1);
    ns_challenger_release(&c);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    randombytes_buf(s_provider, sizeof s_provider);
    RUN(a_provider_that_stays_busy_gets_no_verdict);
    RUN(busy_then_free_runs_the_challenge);
    RUN(an_error_answer_is_wrong_and_silence_is_late);
    return ns_test_finish("node_challenger");
}
