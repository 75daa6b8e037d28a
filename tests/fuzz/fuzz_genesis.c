/* fuzz_genesis.c - libFuzzer target for the genesis file (core/genesis.c),
 * which a node operator copies from whoever started the network. Built as
 * `fuzz_genesis` (clang, NS_FUZZ=ON) and, with replay.c, as
 * `fuzz_genesis_replay`, which ctest runs over tests/fuzz/corpus/genesis;
 * seeds from fuzz_genesis_gen_corpus.
 *
 * ns_genesis_parse over the input. On failure err says why and nothing is
 * left allocated; on success the network id is the hash of the exact
 * bytes, the name is 1..64 printable characters, the allocations are
 * distinct accounts under the caps that sum to total_micro, and
 * ns_genesis_write of what was parsed writes a file that loads to the
 * same name, flags and allocations (or refuses a name that starts with
 * ';', which it cannot write so that it reads back).
 */
#include "nightshift/genesis.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_genesis: %s:%d: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Where the round trip writes: one file per process, removed after use. */
static const char *s_path(void)
{
    static char path[256];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_genesis.%ld",
                 dir && dir[0] ? dir : "/tmp", (long)getpid());
    }
    return path;
}

static void s_check(const uint8_t *data, size_t size, const ns_genesis_t *g)
{
    ns_hash_t id;
    ns_hash(id, data, size);
    S_ASSERT(memcmp(id, g->network_id, NS_HASH_BYTES) == 0);
    size_t n = strlen(g->name);
    S_ASSERT(n >= 1 && n <= NS_MAX_NETWORK_NAME);
    for (size_t i = 0; i < n; i++)
        S_ASSERT(g->name[i] > ' ' && g->name[i] <= '~');
    S_ASSERT(g->n_allocs <= NS_MAX_GENESIS_ALLOCS);
    S_ASSERT((g->allocs != NULL) == (g->n_allocs > 0));
    uint64_t sum = 0;
    for (uint32_t i = 0; i < g->n_allocs; i++) {
        S_ASSERT(g->allocs[i].micro <= NS_MAX_SUPPLY - sum);
        sum += g->allocs[i].micro;
        for (uint32_t j = 0; j < i; j++)
            S_ASSERT(memcmp(g->allocs[i].id, g->allocs[j].id, NS_ID_BYTES));
    }
    S_ASSERT(sum == g->total_micro && sum <= NS_MAX_SUPPLY);
}

static void s_round_trip(const ns_genesis_t *g)
{
    ns_genesis_t again;
    char err[256] = "";
    const char *path = s_path();
    int rc =
        ns_genesis_write_window(path, g->name, g->test_network, g->created_ms,
                                g->close_window_ms, g->allocs, g->n_allocs);
    /* "name = ;x" reads as an empty name (inih's inline comment needs a
     * space before it), so the writer, which checks its text with the
     * parser, refuses the names "name=;x" gave; nothing else. */
    if (rc == NS_ERR_INVAL && g->name[0] == ';')
        return;
    S_ASSERT(rc == NS_OK);
    rc = ns_genesis_load(path, &again, err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "fuzz_genesis: reload: %s\n", err);
    S_ASSERT(rc == NS_OK);
    unlink(path);
    S_ASSERT(strcmp(again.name, g->name) == 0);
    S_ASSERT(again.test_network == g->test_network);
    S_ASSERT(again.created_ms == g->created_ms);
    S_ASSERT(again.close_window_ms == g->close_window_ms);
    S_ASSERT(again.n_allocs == g->n_allocs);
    S_ASSERT(again.total_micro == g->total_micro);
    S_ASSERT(g->n_allocs == 0 || memcmp(again.allocs, g->allocs,
                                        g->n_allocs * sizeof *g->allocs) == 0);
    ns_genesis_release(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ns_genesis_t g;
    char err[256] = "";
    if (sodium_init() < 0)
        abort();
    int rc = ns_genesis_parse(data, size, &g, err, sizeof err);
    if (rc != NS_OK) {
        S_ASSERT(err[0] != '\0');
        S_ASSERT(g.allocs == NULL && g.n_allocs == 0);
        return 0;
    }
    s_check(data, size, &g);
    s_round_trip(&g);
    ns_genesis_release(&g);
    return 0;
}
