/* gen_join_corpus.c - write seed inputs for fuzz_join into a directory.
 *
 *   fuzz_join_gen_corpus DIR
 *
 * Seeds (first byte = the reader): invitations with one and with the
 * most addresses (IPv4, IPv6, host names) and near misses (a wildcard
 * host, a repeat, a trailing comma, version 2); GENESIS_REQ for the
 * first and a later chunk; GENESIS chunks of a small file, the
 * last chunk of a 2.5-chunk file, and one whose length disagrees with
 * its total.
 */
#include "seeds.h"

#include "nightshift/genesis.h"
#include "nightshift/invite.h"

static void s_seed(const char *what, uint8_t kind, const void *data, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    if (!buf)
        seeds_die(what, NS_ERR_NOMEM);
    buf[0] = kind;
    memcpy(buf + 1, data, len);
    seeds_save(what, buf, len + 1);
    free(buf);
}

int main(int argc, char **argv)
{
    seeds_init(argc, argv);
    ns_invite_t inv;
    memset(&inv, 0, sizeof inv);
    randombytes_buf(inv.network_id, NS_HASH_BYTES);
    char text[NS_INVITE_MAX_LEN + 1], id[NS_ID_TEXT_LEN + 1];
    static const char *const hosts[] = {"127.0.0.1",
                                        "[2001:db8::7]",
                                        "node-a.example.org",
                                        "10.1.2.3",
                                        "198.51.100.20",
                                        "h",
                                        "[::1]",
                                        "x.y"};
    for (int i = 0; i < NS_INVITE_MAX_ADDRS; i++) {
        uint8_t pk[NS_ID_BYTES];
        randombytes_buf(pk, sizeof pk);
        ns_id_text(id, pk);
        snprintf(inv.addrs[i], NS_ADDR_MAX, "%s@tcp://%s:%d", id, hosts[i],
                 7000 + i * 1111);
    }
    inv.n_addrs = 1;
    seeds_check(ns_invite_format(&inv, text, sizeof text), "invite 1");
    s_seed("invite, one address", 0, text, strlen(text));
    inv.n_addrs = NS_INVITE_MAX_ADDRS;
    seeds_check(ns_invite_format(&inv, text, sizeof text), "invite 8");
    s_seed("invite, eight addresses", 0, text, strlen(text));
    char bad[NS_INVITE_MAX_LEN + 64];
    snprintf(bad, sizeof bad, "%s,", text);
    s_seed("invite, trailing comma", 0, bad, strlen(bad));
    inv.n_addrs = 2;
    seeds_check(ns_invite_format(&inv, text, sizeof text), "invite 2");
    /* text is short here (two addresses): the repeat fits */
    size_t used = (size_t)snprintf(bad, sizeof bad, "%s,", text);
    if (used < sizeof bad)
        memcpy(bad + used, inv.addrs[0],
               strnlen(inv.addrs[0], sizeof bad - used - 1) + 1);
    bad[sizeof bad - 1] = '\0';
    s_seed("invite, repeated", 0, bad, strlen(bad));
    snprintf(bad, sizeof bad, "%.65s@%.52s@tcp://0.0.0.0:7000", text,
             inv.addrs[0]);
    s_seed("invite, wildcard", 0, bad, strlen(bad));
    snprintf(bad, sizeof bad, "nightshift:2:%s", text + 13);
    s_seed("invite, version 2", 0, bad, strlen(bad));

    ns_buf_t b;
    ns_buf_init(&b);
    seeds_check(ns_genesis_req_encode(0, &b), "req 0");
    s_seed("genesis req 0", 1, b.data, b.len);
    seeds_check(ns_genesis_req_encode(NS_GENESIS_CHUNK * 7, &b), "req 7");
    s_seed("genesis req 7", 1, b.data, b.len);

    uint32_t total = NS_GENESIS_CHUNK * 2 + 1000;
    uint8_t *file = malloc(total);
    if (!file)
        seeds_die("file", NS_ERR_NOMEM);
    for (uint32_t i = 0; i < total; i++)
        file[i] = (uint8_t)("[network]\nname = x\n"[i % 19]);
    ns_hash_t net;
    ns_hash(net, file, total);
    ns_genesis_chunk_t c;
    ns_genesis_chunk_at(net, file, 200, 0, &c);
    seeds_check(ns_genesis_chunk_encode(&c, &b), "small chunk");
    s_seed("genesis chunk, small file", 2, b.data, b.len);
    ns_genesis_chunk_at(net, file, total, NS_GENESIS_CHUNK * 2, &c);
    seeds_check(ns_genesis_chunk_encode(&c, &b), "last chunk");
    s_seed("genesis chunk, last of three", 2, b.data, b.len);
    /* A short length for its total: the decoder must refuse it. */
    b.data[b.len - 1 - 999 - 2] = 0; /* in the bin header's length */
    s_seed("genesis chunk, length off", 2, b.data, b.len);
    free(file);
    ns_buf_release(&b);
    seeds_done();
    return 0;
}
