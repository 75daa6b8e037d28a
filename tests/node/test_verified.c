/* test_verified.c - the table of challenge verdicts and failure counts
 * (verified.h): verdicts and counts survive a reopen, the failure window
 * ends, a damaged file starts empty, the table forgets its oldest entry
 * when full. */
#include "../check.h"

#include "nightshift/verified.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

TEST(verdicts_and_failures_persist)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/ns-test-verified-unit-%d", (int)getpid());
    unlink(path);
    uint8_t a[NS_ID_BYTES], b[NS_ID_BYTES];
    randombytes_buf(a, sizeof a);
    randombytes_buf(b, sizeof b);
    ns_verified_t *v = ns_verified_open(path);
    if (!CHECK(v != NULL))
        return;
    CHECK_EQ_INT(ns_verified_get(v, a, NULL), NS_VERIFIED_NONE);
    ns_verified_put(v, a, NS_VERIFIED_FAILED, 1000, "late:\nno answer");
    ns_verified_put(v, b, NS_VERIFIED_PASSED, 2000, "passed");
    CHECK_EQ_INT(ns_verified_note_failure(v, b, 5000, 100), 1);
    CHECK_EQ_INT(ns_verified_note_failure(v, b, 5050, 100), 2);
    CHECK_EQ_INT(ns_verified_failures(v, b, 5099, 100), 2);
    CHECK_EQ_INT(ns_verified_failures(v, b, 5101, 100), 0); /* window over */
    CHECK_EQ_INT(ns_verified_note_failure(v, b, 5200, 100), 1);
    ns_verified_close(&v);
    v = ns_verified_open(path);
    uint64_t at = 0;
    CHECK_EQ_INT(ns_verified_get(v, a, &at), NS_VERIFIED_FAILED);
    CHECK_EQ_INT(at, 1000);
    CHECK_EQ_INT(ns_verified_get(v, b, NULL), NS_VERIFIED_PASSED);
    CHECK_EQ_INT(ns_verified_failures(v, b, 5250, 100), 1);
    CHECK(strcmp(ns_verified_name(NS_VERIFIED_FAILED), "failed") == 0);
    ns_verified_close(&v);
    /* a damaged file: an empty table, not an error */
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("not msgpack", f);
        fclose(f);
    }
    v = ns_verified_open(path);
    CHECK(v != NULL);
    CHECK_EQ_INT(ns_verified_get(v, a, NULL), NS_VERIFIED_NONE);
    ns_verified_close(&v);
    unlink(path);
}

TEST(full_table_forgets_the_oldest)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/ns-test-verified-full-%d", (int)getpid());
    unlink(path);
    ns_verified_t *v = ns_verified_open(path);
    if (!CHECK(v != NULL))
        return;
    uint8_t first[NS_ID_BYTES], id[NS_ID_BYTES];
    randombytes_buf(first, sizeof first);
    ns_verified_put(v, first, NS_VERIFIED_PASSED, 1, "oldest");
    for (uint32_t i = 1; i < NS_VERIFIED_MAX; i++) {
        randombytes_buf(id, sizeof id);
        ns_verified_put(v, id, NS_VERIFIED_PASSED, 10 + i, "");
        if (i % 512 == 0)
            unlink(path); /* the saves are not what this test times */
    }
    CHECK_EQ_INT(ns_verified_get(v, first, NULL), NS_VERIFIED_PASSED);
    randombytes_buf(id, sizeof id);
    ns_verified_put(v, id, NS_VERIFIED_FAILED, 999999, "newest");
    CHECK_EQ_INT(ns_verified_get(v, first, NULL), NS_VERIFIED_NONE);
    CHECK_EQ_INT(ns_verified_get(v, id, NULL), NS_VERIFIED_FAILED);
    ns_verified_close(&v);
    unlink(path);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(verdicts_and_failures_persist);
    RUN(full_table_forgets_the_oldest);
    return ns_test_finish("node_verified");
}
