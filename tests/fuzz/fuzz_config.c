/* fuzz_config.c - libFuzzer target for the node's INI settings file
 * (core/config.c). ns_config_load only takes a path, so the harness writes
 * the input to a file of its own first. Built as `fuzz_config` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_config_replay`, which ctest
 * runs over tests/fuzz/corpus/config; seeds from fuzz_config_gen_corpus.
 *
 * ns_config_load over the input on top of the defaults. On failure the
 * verdict is NS_ERR_CONFIG with "path:line: why" in err; on success every
 * setting is within its documented range and form, and ns_config_write of
 * the result writes a file that loads to the same settings (the file that
 * `nightshift init` writes must be one the node starts with).
 */
#include "nightshift/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_config: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Two files per process: the input and what ns_config_write makes of it. */
static const char *s_path(int which)
{
    static char path[2][256];
    if (!path[which][0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path[which], sizeof path[which], "%s/fuzz_config.%ld.%d",
                 dir && dir[0] ? dir : "/tmp", (long)getpid(), which);
    }
    return path[which];
}

static void s_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    S_ASSERT(f != NULL);
    S_ASSERT(fwrite(data, 1, size, f) == size);
    S_ASSERT(fclose(f) == 0);
}

/* Setting by setting (snprintf leaves old bytes after a shorter string's
 * NUL, so no memcmp of the whole struct). */
static void s_same(const ns_config_t *a, const ns_config_t *b)
{
    S_ASSERT(strcmp(a->listen, b->listen) == 0);
    S_ASSERT(strcmp(a->advertise, b->advertise) == 0);
    S_ASSERT(a->n_bootstrap == b->n_bootstrap);
    for (uint32_t i = 0; i < a->n_bootstrap; i++)
        S_ASSERT(strcmp(a->bootstrap[i], b->bootstrap[i]) == 0);
    S_ASSERT(a->heartbeat_interval_ms == b->heartbeat_interval_ms);
    S_ASSERT(a->heartbeat_peers == b->heartbeat_peers);
    S_ASSERT(a->fanout == b->fanout && a->max_peers == b->max_peers);
    S_ASSERT(a->pull_interval_ms == b->pull_interval_ms);
    S_ASSERT(a->seen_ttl_ms == b->seen_ttl_ms);
    S_ASSERT(a->max_msg_age_ms == b->max_msg_age_ms);
    S_ASSERT(a->max_msg_future_ms == b->max_msg_future_ms);
    S_ASSERT(a->rate_msgs_per_s == b->rate_msgs_per_s);
    S_ASSERT(a->rate_burst == b->rate_burst);
    S_ASSERT(strcmp(a->region, b->region) == 0);
    S_ASSERT(a->price == b->price && a->stake == b->stake);
    S_ASSERT(a->slots == b->slots && a->log_level == b->log_level);
    S_ASSERT(strcmp(a->log_debug, b->log_debug) == 0);
}

static void s_check(const ns_config_t *c)
{
    uint8_t pk[NS_ID_BYTES];
    char ep[NS_ENDPOINT_MAX];
    S_ASSERT(ns_endpoint_check(c->listen, 1) == NS_OK);
    S_ASSERT(!c->advertise[0] || ns_endpoint_check(c->advertise, 0) == NS_OK);
    S_ASSERT(c->n_bootstrap <= NS_MAX_BOOTSTRAP);
    for (uint32_t i = 0; i < c->n_bootstrap; i++)
        S_ASSERT(ns_addr_parse(c->bootstrap[i], pk, ep) == NS_OK);
    S_ASSERT(c->fanout >= 1 && c->fanout <= 64);
    S_ASSERT(c->max_peers >= 1 && c->max_peers <= 1024);
    S_ASSERT(c->slots <= 1024);
    S_ASSERT(c->log_level <= NS_LOG_DEBUG);
    size_t n = strlen(c->region);
    S_ASSERT(n >= 1 && n <= NS_MAX_REGION);
    S_ASSERT(strlen(c->log_debug) < sizeof c->log_debug);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ns_config_t cfg, again; /* 3.5 KiB each: off the stack */
    char err[512] = "";
    uint32_t debug_mask = ns_log_debug_mask;
    s_write(s_path(0), data, size);
    ns_config_defaults(&cfg);
    int rc = ns_config_load(&cfg, s_path(0), err, sizeof err);
    unlink(s_path(0));
    S_ASSERT(ns_log_debug_mask == debug_mask); /* validated, not applied */
    if (rc != NS_OK) {
        S_ASSERT(rc == NS_ERR_CONFIG || rc == NS_ERR_TOOBIG);
        S_ASSERT(err[0] != '\0');
        return 0;
    }
    s_check(&cfg);
    S_ASSERT(ns_config_write(&cfg, s_path(1)) == NS_OK);
    ns_config_defaults(&again);
    rc = ns_config_load(&again, s_path(1), err, sizeof err);
    if (rc != NS_OK)
        fprintf(stderr, "fuzz_config: the written file does not load: %s\n",
                err);
    S_ASSERT(rc == NS_OK);
    unlink(s_path(1));
    s_same(&cfg, &again);
    return 0;
}
