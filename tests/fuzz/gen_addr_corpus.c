/* gen_addr_corpus.c - write seed inputs for fuzz_addr into a directory.
 *
 *   fuzz_addr_gen_corpus DIR
 *
 * Seeds: an id written by ns_id_text, addresses of it with IPv4, IPv6 and
 * host name endpoints, endpoints with the edge ports (0, *, 1, 65535,
 * 65536, 000080); and the near misses: an id with non-zero padding bits,
 * lower case, one character short, an address with a second '@', an
 * endpoint at its length cap and one past it.
 */
#include "seeds.h"

#include "nightshift/identity.h"

static void s_text(const char *what, const char *text)
{
    seeds_save(what, (const uint8_t *)text, strlen(text));
}

int main(int argc, char **argv)
{
    seeds_init(argc, argv);
    ns_identity_t *me = ns_identity_generate();
    if (!me)
        seeds_die("identity", NS_ERR_NOMEM);
    char id[NS_ID_TEXT_LEN + 1], text[512];
    uint8_t pk[NS_ID_BYTES];
    char ep[NS_ENDPOINT_MAX];
    ns_id_text(id, ns_identity_pk(me));
    seeds_check(ns_id_parse(id, pk), "id");
    s_text("id", id);

    static const char *const endpoints[] = {"tcp://127.0.0.1:7946",
                                            "tcp://[::1]:65535",
                                            "tcp://node.example:1",
                                            "tcp://*:0",
                                            "tcp://h:*",
                                            "tcp://h:65536",
                                            "tcp://h:000080",
                                            "tcp://:80",
                                            "udp://h:1",
                                            "tcp://h",
                                            "tcp://a b:1",
                                            "tcp://h:-1"};
    for (size_t i = 0; i < sizeof endpoints / sizeof endpoints[0]; i++) {
        s_text(endpoints[i], endpoints[i]);
        snprintf(text, sizeof text, "%s@%s", id, endpoints[i]);
        if (i < 3)
            seeds_check(ns_addr_parse(text, pk, ep), text);
        s_text(text, text);
    }

    char hostname[NS_ENDPOINT_MAX + 1];
    size_t host_len = NS_ENDPOINT_MAX - 1 - strlen("tcp://:1");
    memset(hostname, 'h', host_len);
    hostname[host_len] = '\0';
    snprintf(text, sizeof text, "tcp://%s:1", hostname);
    seeds_check(ns_endpoint_check(text, 0), "endpoint at the cap");
    s_text("endpoint at its cap", text);
    snprintf(text, sizeof text, "tcp://%sh:1", hostname);
    s_text("endpoint one past its cap", text);
    snprintf(text, sizeof text, "%s@tcp://%s:1", id, hostname);
    s_text("address at its cap", text);

    char bad[NS_ID_TEXT_LEN + 1];
    memcpy(bad, id, sizeof bad);
    bad[NS_ID_TEXT_LEN - 1] = 'b'; /* a valid last digit is 'a' or 'q' */
    s_text("id, padding bits set", bad);
    memcpy(bad, id, sizeof bad);
    for (size_t i = 0; i < NS_ID_TEXT_LEN; i++)
        if (bad[i] >= 'a' && bad[i] <= 'z')
            bad[i] = (char)(bad[i] - 'a' + 'A');
    s_text("id, upper case", bad);
    s_text("id, one character short", id + 1);
    snprintf(text, sizeof text, "%s@%s@tcp://h:1", id, id);
    s_text("two @", text);
    ns_identity_destroy(&me);
    seeds_done();
    return 0;
}
