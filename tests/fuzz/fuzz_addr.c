/* fuzz_addr.c - libFuzzer target for the text forms of identities and
 * endpoints (core/identity.c): node ids in genesis files and commands,
 * "ID@tcp://host:port" addresses in configs, control requests and peer
 * lists, endpoints in settings. Built as `fuzz_addr` (clang, NS_FUZZ=ON)
 * and, with replay.c, as `fuzz_addr_replay`, which ctest runs over
 * tests/fuzz/corpus/addr; seeds from fuzz_addr_gen_corpus.
 *
 * The input, NUL-terminated (text after an inner NUL is not seen, as in C
 * callers), goes to ns_id_parse, ns_endpoint_check (both modes) and
 * ns_addr_parse. What they accept keeps their contracts: an id has one
 * text (ns_id_text of what parsed is the input), an endpoint any port
 * accepts is one "any port" accepts too and is tcp:// under its cap, an
 * address is the id's text, '@' and an endpoint that checks, and the
 * endpoint handed back is that text.
 */
#include "nightshift/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_addr: %s:%d: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static void s_id(const char *text)
{
    uint8_t pk[NS_ID_BYTES];
    char back[NS_ID_TEXT_LEN + 1];
    int rc = ns_id_parse(text, pk);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_ADDR);
    if (rc != NS_OK)
        return;
    ns_id_text(back, pk);
    S_ASSERT(strcmp(back, text) == 0);
}

static void s_endpoint(const char *text)
{
    int strict = ns_endpoint_check(text, 0);
    int any = ns_endpoint_check(text, 1);
    S_ASSERT(strict == NS_OK || strict == NS_ERR_ADDR);
    S_ASSERT(any == NS_OK || any == NS_ERR_ADDR);
    if (any != NS_OK) {
        S_ASSERT(strict != NS_OK);
        return;
    }
    S_ASSERT(strncmp(text, "tcp://", 6) == 0);
    S_ASSERT(strlen(text) < NS_ENDPOINT_MAX);
    const char *colon = strrchr(text + 6, ':');
    S_ASSERT(colon != NULL && colon > text + 6);
    for (const char *c = text + 6; c < colon; c++)
        S_ASSERT(*c > ' ' && *c <= '~' && *c != '/' && *c != '@');
    if (strict == NS_OK) {
        unsigned long port = strtoul(colon + 1, NULL, 10);
        S_ASSERT(port >= 1 && port <= 65535);
    }
}

static void s_addr(const char *text)
{
    uint8_t pk[NS_ID_BYTES], again[NS_ID_BYTES];
    char ep[NS_ENDPOINT_MAX];
    int rc = ns_addr_parse(text, pk, ep);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_ADDR);
    if (rc != NS_OK)
        return;
    char id[NS_ID_TEXT_LEN + 1];
    ns_id_text(id, pk);
    S_ASSERT(strncmp(text, id, NS_ID_TEXT_LEN) == 0);
    S_ASSERT(text[NS_ID_TEXT_LEN] == '@');
    S_ASSERT(strcmp(ep, text + NS_ID_TEXT_LEN + 1) == 0);
    S_ASSERT(ns_endpoint_check(ep, 0) == NS_OK);
    S_ASSERT(ns_id_parse(id, again) == NS_OK);
    S_ASSERT(memcmp(again, pk, NS_ID_BYTES) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    S_ASSERT(text != NULL);
    if (size)
        memcpy(text, data, size);
    text[size] = '\0';
    s_id(text);
    s_endpoint(text);
    s_addr(text);
    free(text);
    return 0;
}
