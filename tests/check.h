/* check.h - the assertions shared by every test binary.
 *
 * No framework, no dependency beyond libc (CHECK_RC also names the codes
 * with ns_errname(), from ns_core, which every test links). A failed check
 * prints `file:line: test: what (values)` on stderr and the test goes on,
 * so one run reports every failure.
 *
 *   TEST(envelope_round_trip)
 *   {
 *       CHECK(ok);
 *       CHECK_EQ_INT(n, 3);
 *       CHECK_RC(ns_thing(x), NS_ERR_TOOBIG);
 *   }
 *
 *   int main(void)
 *   {
 *       RUN(envelope_round_trip);
 *       return ns_test_finish("core_wire");
 *   }
 *
 * ns_test_finish() prints exactly one closing line on stdout,
 * `<suite>: N passed, M failed` (N and M count checks), and returns 0 only
 * when nothing failed.
 *
 * The counters are per translation unit: write each test binary as one .c
 * file (helpers in other files may return values for it to check).
 */
#ifndef NIGHTSHIFT_TESTS_CHECK_H
#define NIGHTSHIFT_TESTS_CHECK_H

#include "nightshift/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    unsigned long passed; /* checks that held */
    unsigned long failed; /* checks that did not */
    const char *test;     /* name of the running TEST, for messages */
} ns_test_state_t;

static inline ns_test_state_t *ns_test_state(void)
{
    static ns_test_state_t state = {0, 0, "-"};
    return &state;
}

static inline void ns_test_pass(void)
{
    ns_test_state()->passed++;
}

__attribute__((format(printf, 3, 4))) static inline void
ns_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    ns_test_state()->failed++;
    fprintf(stderr, "%s:%d: %s: ", file, line, ns_test_state()->test);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

/* Run one TEST; when it failed, name it and say how many checks failed. */
static inline void ns_test_run(const char *name, void (*fn)(void))
{
    unsigned long before = ns_test_state()->failed;
    ns_test_state()->test = name;
    fn();
    unsigned long failed = ns_test_state()->failed - before;
    if (failed)
        fprintf(stderr, "FAIL %s (%lu checks)\n", name, failed);
    ns_test_state()->test = "-";
}

static inline int ns_test_finish(const char *suite)
{
    const ns_test_state_t *s = ns_test_state();
    printf("%s: %lu passed, %lu failed\n", suite, s->passed, s->failed);
    fflush(stdout);
    return s->failed ? 1 : 0;
}

#define TEST(name) static void test_##name(void)
#define RUN(name) ns_test_run(#name, test_##name)

/* A check returns whether it held, so a test can stop before a crash:
 *   if (!CHECK(p != NULL)) return; */
#define CHECK(cond)                                                            \
    __extension__({                                                            \
        int ns_ok_ = (cond) ? 1 : 0;                                           \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);       \
        ns_ok_;                                                                \
    })

#define CHECK_EQ_INT(a, b)                                                     \
    __extension__({                                                            \
        long long ns_a_ = (long long)(a), ns_b_ = (long long)(b);              \
        int ns_ok_ = ns_a_ == ns_b_;                                           \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__, "%s == %s failed: %lld != %lld",  \
                         #a, #b, ns_a_, ns_b_);                                \
        ns_ok_;                                                                \
    })

#define CHECK_RC(expr, expected)                                               \
    __extension__({                                                            \
        int ns_got_ = (int)(expr), ns_want_ = (int)(expected);                 \
        int ns_ok_ = ns_got_ == ns_want_;                                      \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__,                                   \
                         "%s returned %d (%s), expected %d (%s)", #expr,       \
                         ns_got_, ns_errname(ns_got_), ns_want_,               \
                         ns_errname(ns_want_));                                \
        ns_ok_;                                                                \
    })

/* n bytes of a and b equal. */
#define CHECK_MEM(a, b, n)                                                     \
    __extension__({                                                            \
        int ns_ok_ = memcmp((a), (b), (n)) == 0;                               \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__, "%s and %s differ (%zu bytes)",   \
                         #a, #b, (size_t)(n));                                 \
        ns_ok_;                                                                \
    })

#define CHECK_STR(a, b)                                                        \
    __extension__({                                                            \
        const char *ns_sa_ = (a), *ns_sb_ = (b);                               \
        int ns_ok_ = ns_sa_ && ns_sb_ && strcmp(ns_sa_, ns_sb_) == 0;          \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__,                                   \
                         "%s == %s failed: \"%s\" != "                         \
                         "\"%s\"",                                             \
                         #a, #b, ns_sa_ ? ns_sa_ : "(null)",                   \
                         ns_sb_ ? ns_sb_ : "(null)");                          \
        ns_ok_;                                                                \
    })

/* haystack contains needle. */
#define CHECK_CONTAINS(haystack, needle)                                       \
    __extension__({                                                            \
        const char *ns_h_ = (haystack), *ns_n_ = (needle);                     \
        int ns_ok_ = ns_h_ && ns_n_ && strstr(ns_h_, ns_n_) != NULL;           \
        if (ns_ok_)                                                            \
            ns_test_pass();                                                    \
        else                                                                   \
            ns_test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", \
                         ns_h_ ? ns_h_ : "(null)", ns_n_ ? ns_n_ : "(null)");  \
        ns_ok_;                                                                \
    })

#endif
