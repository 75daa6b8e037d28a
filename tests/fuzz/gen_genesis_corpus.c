/* gen_genesis_corpus.c - write seed inputs for fuzz_genesis into a
 * directory.
 *
 *   fuzz_genesis_gen_corpus DIR
 *
 * Seeds: genesis files written by ns_genesis_write (each parsed back
 * before it is saved): no allocations, a test network with three, one
 * account holding the whole supply, 80 accounts (more than one realloc);
 * and by hand: a repeated account, a supply one credit over the cap, a
 * name with a space, an unknown key and section, a missing name, comments
 * and CRLF line ends, a continuation line, a NUL byte, a name that
 * starts with ';' (the writer cannot write it).
 */
#include "seeds.h"

#include "nightshift/genesis.h"
#include "nightshift/identity.h"

#include <unistd.h>

static char s_tmp[4096];

static void s_write(const char *what, const char *name, bool test,
                    uint64_t created_ms, const ns_alloc_t *allocs, uint32_t n)
{
    uint8_t *text = NULL;
    size_t len = 0;
    ns_genesis_t g;
    char err[256];
    seeds_check(ns_genesis_write(s_tmp, name, test, created_ms, allocs, n),
                what);
    seeds_check(ns_file_read(s_tmp, NS_MAX_GENESIS_BYTES, &text, &len), what);
    unlink(s_tmp);
    if (ns_genesis_parse(text, len, &g, err, sizeof err) != NS_OK) {
        fprintf(stderr, "%s: %s: %s\n", seeds_g.prog, what, err);
        exit(1);
    }
    ns_genesis_release(&g);
    seeds_save(what, text, len);
    free(text);
}

static void s_raw(const char *what, const char *text, size_t len)
{
    seeds_save(what, (const uint8_t *)text, len);
}

int main(int argc, char **argv)
{
    seeds_init(argc, argv);
    snprintf(s_tmp, sizeof s_tmp, "%s/.genesis.tmp", seeds_g.dir);
    static ns_alloc_t allocs[80];
    for (uint32_t i = 0; i < 80; i++) {
        ns_hash(allocs[i].id, &i, sizeof i); /* any 32 bytes have a text */
        allocs[i].micro = 1000 + i;
    }
    s_write("no allocations", "empty", false, 0, NULL, 0);
    s_write("test network, 3 accounts", "local-testnet", true,
            UINT64_C(1763700000000), allocs, 3);
    ns_alloc_t all = allocs[0];
    all.micro = NS_MAX_SUPPLY;
    s_write("one account with the whole supply", "x", false, UINT64_MAX, &all,
            1);
    s_write("80 accounts",
            "a-network-name-of-sixty-four-characters-"
            "exactly-0123456789abcdef",
            true, 1, allocs, 80);

    char id0[NS_ID_TEXT_LEN + 1], id1[NS_ID_TEXT_LEN + 1], text[1024];
    ns_id_text(id0, allocs[0].id);
    ns_id_text(id1, allocs[1].id);
    int n =
        snprintf(text, sizeof text,
                 "[network]\nname = n\n[alloc]\n%s = 1\n%s = 2\n", id0, id0);
    s_raw("an account listed twice", text, (size_t)n);
    n = snprintf(text, sizeof text,
                 "[network]\nname = n\n[alloc]\n%s = %llu\n%s = 1\n", id0,
                 (unsigned long long)NS_MAX_SUPPLY, id1);
    s_raw("one credit over the supply cap", text, (size_t)n);
    n = snprintf(text, sizeof text,
                 "; comment\r\n[network]\r\nname=crlf ; inline\r\n"
                 "test_network=false\r\n# another\r\n[alloc]\r\n%s=7\r\n",
                 id1);
    s_raw("comments and CRLF", text, (size_t)n);
    s_raw("a name with a space", "[network]\nname = two words\n", 27);
    s_raw("unknown key", "[network]\nname = n\nowner = me\n", 30);
    s_raw("unknown section", "[network]\nname = n\n[extra]\nk = v\n", 33);
    s_raw("no name", "[network]\ntest_network = true\n", 30);
    s_raw("a continuation line", "[network]\nname = n\n  more\n", 26);
    s_raw("test_network = yes", "[network]\nname = n\ntest_network = yes\n",
          38);
    s_raw("created_ms too big",
          "[network]\nname = n\ncreated_ms = 18446744073709551616\n", 52);
    s_raw("a NUL byte", "[network]\nname = n\0\n", 20);
    s_raw("a key without a section", "name = n\n", 9);
    s_raw("a name that starts with ';'", "[network]\nname=;x\n", 18);
    seeds_done();
    return 0;
}
