/* test_invite.c - the one-line invitation (core/invite.c): what parses,
 * what is refused and why, and format/parse round trips. */
#include "check.h"

#include "nightshift/invite.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

static char s_net[NS_ID_TEXT_LEN + 1], s_id1[NS_ID_TEXT_LEN + 1],
    s_id2[NS_ID_TEXT_LEN + 1];
static ns_hash_t s_net_bytes;

static void s_fixture(void)
{
    uint8_t pk[NS_ID_BYTES];
    for (int i = 0; i < NS_HASH_BYTES; i++)
        s_net_bytes[i] = (uint8_t)(i * 7 + 1);
    ns_base32(s_net, s_net_bytes, NS_HASH_BYTES);
    memset(pk, 0x11, sizeof pk);
    ns_id_text(s_id1, pk);
    memset(pk, 0x22, sizeof pk);
    ns_id_text(s_id2, pk);
}

TEST(parses_one_and_many)
{
    char text[NS_INVITE_MAX_LEN + 1], err[256] = "";
    ns_invite_t inv;
    snprintf(text, sizeof text, "nightshift:1:%s@%s@tcp://10.0.0.5:7000", s_net,
             s_id1);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_OK);
    CHECK_MEM(inv.network_id, s_net_bytes, NS_HASH_BYTES);
    CHECK_EQ_INT(inv.n_addrs, 1);
    snprintf(text, sizeof text,
             "nightshift:1:%s@%s@tcp://10.0.0.5:7000,%s@tcp://node.example:"
             "7001,%s@tcp://[2001:db8::1]:7002",
             s_net, s_id1, s_id2, s_id1);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_OK);
    CHECK_EQ_INT(inv.n_addrs, 3);
    char want[NS_ADDR_MAX];
    snprintf(want, sizeof want, "%s@tcp://node.example:7001", s_id2);
    CHECK_STR(inv.addrs[1], want);
}

TEST(format_round_trip)
{
    ns_invite_t inv, back;
    char text[NS_INVITE_MAX_LEN + 1], err[256];
    memset(&inv, 0, sizeof inv);
    memcpy(inv.network_id, s_net_bytes, NS_HASH_BYTES);
    CHECK_RC(ns_invite_format(&inv, text, sizeof text), NS_ERR_INVAL);
    for (int i = 0; i < NS_INVITE_MAX_ADDRS; i++)
        snprintf(inv.addrs[inv.n_addrs++], NS_ADDR_MAX,
                 "%s@tcp://host-%d.example.org:%d", i % 2 ? s_id1 : s_id2, i,
                 7000 + i);
    CHECK_RC(ns_invite_format(&inv, text, sizeof text), NS_OK);
    CHECK_RC(ns_invite_parse(text, &back, err, sizeof err), NS_OK);
    CHECK(memcmp(&inv, &back, sizeof inv) == 0);
    CHECK_RC(ns_invite_format(&inv, text, 100), NS_ERR_TOOBIG);
    /* A repeated address would not parse back: refused. */
    snprintf(inv.addrs[1], NS_ADDR_MAX, "%s", inv.addrs[0]);
    CHECK_RC(ns_invite_format(&inv, text, sizeof text), NS_ERR_INVAL);
}

TEST(refuses_malformed)
{
    static const struct {
        const char *tail; /* after "nightshift:1:<net>" unless absolute */
        const char *why;
    } cases[] = {
        {"", "followed by '@'"},
        {"@", "no bootstrap"},
        {"@ID1@tcp://1.2.3.4:7000,", "empty address"},
        {"@,ID1@tcp://1.2.3.4:7000", "empty address"},
        {"@ID1@tcp://1.2.3.4:7000,,ID2@tcp://1.2.3.4:7001", "empty address"},
        {"@ID1@tcp://1.2.3.4:7000,ID1@tcp://1.2.3.4:7000", "repeated"},
        {"@ID1@tcp://0.0.0.0:7000", "wildcard"},
        {"@ID1@tcp://*:7000", "wildcard"},
        {"@ID1@tcp://1.2.3.4:0", "not an address"},
        {"@ID1@tcp://1.2.3.4:65536", "not an address"},
        {"@ID1@udp://1.2.3.4:7000", "not an address"},
        {"@ID1tcp://1.2.3.4:7000", "not an address"},
        {"@abc@tcp://1.2.3.4:7000", "not an address"},
        {"@ID1@tcp://1.2.3.4:7000 ", "space"},
        {"@ID1@tcp://1.2.3.4:7000\n", "space"},
        {"@ID1@tcp://1.2.3.4:7000\xc3\xa9", "printable"},
    };
    char text[NS_INVITE_MAX_LEN * 2], err[256], tail[512];
    ns_invite_t inv;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* ID1, ID2 stand for valid ids. */
        const char *t = cases[i].tail;
        size_t k = 0;
        while (*t && k + NS_ID_TEXT_LEN < sizeof tail) {
            if (strncmp(t, "ID1", 3) == 0 || strncmp(t, "ID2", 3) == 0) {
                memcpy(tail + k, t[2] == '1' ? s_id1 : s_id2, NS_ID_TEXT_LEN);
                k += NS_ID_TEXT_LEN;
                t += 3;
            } else {
                tail[k++] = *t++;
            }
        }
        tail[k] = '\0';
        snprintf(text, sizeof text, "nightshift:1:%s%s", s_net, tail);
        err[0] = '\0';
        CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
        CHECK_CONTAINS(err, cases[i].why);
        CHECK(strchr(err, '\n') == NULL);
        CHECK_EQ_INT(inv.n_addrs, 0);
    }
    snprintf(text, sizeof text, "nightshift:2:%s@%s@tcp://1.2.3.4:7000", s_net,
             s_id1);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "version");
    CHECK_RC(ns_invite_parse("nightshift", &inv, err, sizeof err),
             NS_ERR_INVAL);
    CHECK_RC(ns_invite_parse("", &inv, err, sizeof err), NS_ERR_INVAL);
    /* Network id: wrong length, not base32, non-zero padding bits. */
    snprintf(text, sizeof text, "nightshift:1:%.51s@%s@tcp://1.2.3.4:7000",
             s_net, s_id1);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "network id");
    snprintf(text, sizeof text, "nightshift:1:%.51s1@%s@tcp://1.2.3.4:7000",
             s_net, s_id1);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "base32");
    /* Too many addresses. */
    size_t k = (size_t)snprintf(text, sizeof text, "nightshift:1:%s@", s_net);
    for (int i = 0; i <= NS_INVITE_MAX_ADDRS; i++)
        k +=
            (size_t)snprintf(text + k, sizeof text - k, "%s%s@tcp://1.2.3.4:%d",
                             i ? "," : "", s_id1, 7000 + i);
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "more than");
    /* Far too long: refused before anything else is read. */
    memset(text, 'a', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    CHECK_RC(ns_invite_parse(text, &inv, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "longer than");
}

TEST(wildcards)
{
    CHECK(ns_endpoint_wildcard("tcp://0.0.0.0:7000"));
    CHECK(ns_endpoint_wildcard("tcp://*:7000"));
    CHECK(ns_endpoint_wildcard("tcp://[::]:7000"));
    CHECK(!ns_endpoint_wildcard("tcp://127.0.0.1:7000"));
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    s_fixture();
    RUN(parses_one_and_many);
    RUN(format_round_trip);
    RUN(refuses_malformed);
    RUN(wildcards);
    return ns_test_finish("core_invite");
}
