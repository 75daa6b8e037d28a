/* fuzz_join.c - libFuzzer target for what `init --join` reads from people
 * and peers: the invitation text (core/invite.c) and the GENESIS_REQ and
 * GENESIS bodies (core/genesis.c). Built as `fuzz_join` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_join_replay`, which ctest runs
 * over tests/fuzz/corpus/join; seeds from fuzz_join_gen_corpus.
 *
 * The first byte picks the reader, the rest is its input:
 *   0  ns_invite_parse (NUL-terminated): on success every address parses,
 *      none is repeated or a wildcard, and ns_invite_format of what parsed
 *      writes text that parses to the same invitation; on failure the
 *      reason is one non-empty line and nothing is left filled in;
 *   1  ns_genesis_req_decode: an accepted offset is aligned and under the
 *      cap, and encodes to what decodes to it again;
 *   2  ns_genesis_chunk_decode: an accepted chunk keeps the size rules
 *      (offset < total <= cap, length fixed by both) and its bytes lie in
 *      the input; encode then decode gives the same chunk.
 */
#include "nightshift/genesis.h"
#include "nightshift/invite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_join: %s:%d: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void s_invite(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    S_ASSERT(text);
    memcpy(text, data, size);
    text[size] = '\0';
    ns_invite_t inv, back;
    char err[256] = "", out[NS_INVITE_MAX_LEN + 1];
    int rc = ns_invite_parse(text, &inv, err, sizeof err);
    if (rc != NS_OK) {
        S_ASSERT(rc == NS_ERR_INVAL);
        S_ASSERT(err[0] != '\0' && !strchr(err, '\n'));
        S_ASSERT(inv.n_addrs == 0);
        free(text);
        return;
    }
    S_ASSERT(inv.n_addrs >= 1 && inv.n_addrs <= NS_INVITE_MAX_ADDRS);
    for (uint32_t i = 0; i < inv.n_addrs; i++) {
        uint8_t pk[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        S_ASSERT(ns_addr_parse(inv.addrs[i], pk, ep) == NS_OK);
        S_ASSERT(!ns_endpoint_wildcard(ep));
        for (uint32_t j = 0; j < i; j++)
            S_ASSERT(strcmp(inv.addrs[i], inv.addrs[j]) != 0);
    }
    S_ASSERT(ns_invite_format(&inv, out, sizeof out) == NS_OK);
    S_ASSERT(strcmp(out, text) == 0); /* one text per invitation */
    S_ASSERT(ns_invite_parse(out, &back, err, sizeof err) == NS_OK);
    S_ASSERT(memcmp(&inv, &back, sizeof inv) == 0);
    free(text);
}

static void s_req(const uint8_t *data, size_t size)
{
    uint32_t offset = 1;
    if (ns_genesis_req_decode(data, size, &offset) != NS_OK) {
        S_ASSERT(offset == 0);
        return;
    }
    S_ASSERT(offset < NS_MAX_GENESIS_BYTES && offset % NS_GENESIS_CHUNK == 0);
    ns_buf_t b;
    ns_buf_init(&b);
    uint32_t again = 1;
    S_ASSERT(ns_genesis_req_encode(offset, &b) == NS_OK);
    S_ASSERT(ns_genesis_req_decode(b.data, b.len, &again) == NS_OK);
    S_ASSERT(again == offset);
    ns_buf_release(&b);
}

static void s_chunk(const uint8_t *data, size_t size)
{
    ns_genesis_chunk_t c, d;
    if (ns_genesis_chunk_decode(data, size, &c) != NS_OK) {
        S_ASSERT(c.bytes == NULL && c.len == 0 && c.total == 0);
        return;
    }
    S_ASSERT(c.total >= 1 && c.total <= NS_MAX_GENESIS_BYTES);
    S_ASSERT(c.offset < c.total && c.offset % NS_GENESIS_CHUNK == 0);
    uint32_t left = c.total - c.offset;
    S_ASSERT(c.len == (left < NS_GENESIS_CHUNK ? left : NS_GENESIS_CHUNK));
    S_ASSERT(c.bytes >= data && c.bytes + c.len <= data + size);
    ns_buf_t b;
    ns_buf_init(&b);
    S_ASSERT(ns_genesis_chunk_encode(&c, &b) == NS_OK);
    S_ASSERT(ns_genesis_chunk_decode(b.data, b.len, &d) == NS_OK);
    S_ASSERT(d.total == c.total && d.offset == c.offset && d.len == c.len);
    S_ASSERT(memcmp(d.network_id, c.network_id, NS_HASH_BYTES) == 0);
    S_ASSERT(memcmp(d.bytes, c.bytes, c.len) == 0);
    ns_buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        s_invite(data + 1, size - 1);
        break;
    case 1:
        s_req(data + 1, size - 1);
        break;
    default:
        s_chunk(data + 1, size - 1);
        break;
    }
    return 0;
}
