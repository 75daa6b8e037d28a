/* test_mp.c - the strict msgpack reader and the msgpack-to-JSON renderer. */
#include "check.h"

#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <math.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define B(...) ((const uint8_t[]){__VA_ARGS__})
#define N(...) sizeof((const uint8_t[]){__VA_ARGS__})
/* A reader over an inline byte list. */
#define READER(r, ...) ns_mpr_init((r), B(__VA_ARGS__), N(__VA_ARGS__))

static int s_uint(const uint8_t *p, size_t n, uint64_t *v)
{
    ns_mpr_t r;
    ns_mpr_init(&r, p, n);
    int rc = ns_mpr_uint(&r, v);
    return rc == NS_OK ? ns_mpr_end(&r) : rc;
}

static int s_int(const uint8_t *p, size_t n, int64_t *v)
{
    ns_mpr_t r;
    ns_mpr_init(&r, p, n);
    int rc = ns_mpr_int(&r, v);
    return rc == NS_OK ? ns_mpr_end(&r) : rc;
}

#define UINT_IS(want, ...)                                                     \
    do {                                                                       \
        uint64_t v_ = 0xdeadbeef;                                              \
        if (CHECK_RC(s_uint(B(__VA_ARGS__), N(__VA_ARGS__), &v_), NS_OK))      \
            CHECK(v_ == (uint64_t)(want));                                     \
    } while (0)
#define UINT_RC(rc, ...)                                                       \
    do {                                                                       \
        uint64_t v_;                                                           \
        CHECK_RC(s_uint(B(__VA_ARGS__), N(__VA_ARGS__), &v_), (rc));           \
    } while (0)
#define INT_IS(want, ...)                                                      \
    do {                                                                       \
        int64_t v_ = 0x5a5a;                                                   \
        if (CHECK_RC(s_int(B(__VA_ARGS__), N(__VA_ARGS__), &v_), NS_OK))       \
            CHECK_EQ_INT(v_, (want));                                          \
    } while (0)
#define INT_RC(rc, ...)                                                        \
    do {                                                                       \
        int64_t v_;                                                            \
        CHECK_RC(s_int(B(__VA_ARGS__), N(__VA_ARGS__), &v_), (rc));            \
    } while (0)

TEST(uint_every_width)
{
    UINT_IS(0, 0x00);
    UINT_IS(127, 0x7f);
    UINT_IS(0, 0xcc, 0x00); /* wider than needed is still the value */
    UINT_IS(255, 0xcc, 0xff);
    UINT_IS(0x1234, 0xcd, 0x12, 0x34);
    UINT_IS(65535, 0xcd, 0xff, 0xff);
    UINT_IS(0x12345678, 0xce, 0x12, 0x34, 0x56, 0x78);
    UINT_IS(UINT32_MAX, 0xce, 0xff, 0xff, 0xff, 0xff);
    UINT_IS(UINT64_C(0x0102030405060708), 0xcf, 1, 2, 3, 4, 5, 6, 7, 8);
    UINT_IS(UINT64_MAX, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    /* truncated at every width */
    UINT_RC(NS_ERR_TRUNCATED, 0xcc);
    UINT_RC(NS_ERR_TRUNCATED, 0xcd, 0x12);
    UINT_RC(NS_ERR_TRUNCATED, 0xce, 0x12, 0x34, 0x56);
    UINT_RC(NS_ERR_TRUNCATED, 0xcf, 1, 2, 3, 4, 5, 6, 7);
    uint64_t v;
    CHECK_RC(s_uint(B(0), 0, &v), NS_ERR_TRUNCATED);
    /* negative numbers are not uints, even when they would fit */
    UINT_RC(NS_ERR_TYPE, 0xff);                   /* -1 */
    UINT_RC(NS_ERR_TYPE, 0xe0);                   /* -32 */
    UINT_RC(NS_ERR_TYPE, 0xd0, 0x05);             /* int8 5 */
    UINT_RC(NS_ERR_TYPE, 0xd1, 0x00, 0x05);       /* int16 5 */
    UINT_RC(NS_ERR_TYPE, 0xd2, 0x00, 0, 0, 0x05); /* int32 5 */
    UINT_RC(NS_ERR_TYPE, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x05);
    /* other types */
    UINT_RC(NS_ERR_TYPE, 0xc0);             /* nil */
    UINT_RC(NS_ERR_TYPE, 0xc3);             /* true */
    UINT_RC(NS_ERR_TYPE, 0xca, 0, 0, 0, 0); /* float 0 */
    UINT_RC(NS_ERR_TYPE, 0xa1, '1');        /* "1" */
    UINT_RC(NS_ERR_TYPE, 0xc4, 0x01, 0x01); /* bin */
    UINT_RC(NS_ERR_TYPE, 0x90);             /* [] */
    UINT_RC(NS_ERR_TYPE, 0xc1);             /* never used */
    UINT_RC(NS_ERR_TYPE, 0xd4, 0x01, 0x00); /* fixext 1 */
    UINT_RC(NS_ERR_TRAILING, 0x01, 0x02);
}

TEST(int_every_width)
{
    INT_IS(0, 0x00);
    INT_IS(127, 0x7f);
    INT_IS(-1, 0xff);
    INT_IS(-32, 0xe0);
    INT_IS(-128, 0xd0, 0x80);
    INT_IS(127, 0xd0, 0x7f);
    INT_IS(-32768, 0xd1, 0x80, 0x00);
    INT_IS(-2, 0xd1, 0xff, 0xfe);
    INT_IS(INT32_MIN, 0xd2, 0x80, 0, 0, 0);
    INT_IS(INT32_MAX, 0xd2, 0x7f, 0xff, 0xff, 0xff);
    INT_IS(INT64_MIN, 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0);
    INT_IS(-1, 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    INT_IS(INT64_MAX, 0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    /* unsigned encodings are ints too, while they fit */
    INT_IS(255, 0xcc, 0xff);
    INT_IS(65535, 0xcd, 0xff, 0xff);
    INT_IS(UINT32_MAX, 0xce, 0xff, 0xff, 0xff, 0xff);
    INT_IS(INT64_MAX, 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    INT_RC(NS_ERR_INVAL, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0);
    INT_RC(NS_ERR_INVAL, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    INT_RC(NS_ERR_TRUNCATED, 0xd0);
    INT_RC(NS_ERR_TRUNCATED, 0xd1, 0xff);
    INT_RC(NS_ERR_TRUNCATED, 0xd2, 0xff, 0xff, 0xff);
    INT_RC(NS_ERR_TRUNCATED, 0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
    INT_RC(NS_ERR_TYPE, 0xc0);
    INT_RC(NS_ERR_TYPE, 0xc2);
    INT_RC(NS_ERR_TYPE, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0);
    INT_RC(NS_ERR_TYPE, 0xa0);
}

TEST(u32_bool_f64)
{
    ns_mpr_t r;
    uint32_t u = 0;
    READER(&r, 0xce, 0xff, 0xff, 0xff, 0xff);
    CHECK_RC(ns_mpr_u32(&r, &u), NS_OK);
    CHECK(u == UINT32_MAX);
    READER(&r, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0);
    CHECK_RC(ns_mpr_u32(&r, &u), NS_ERR_TOOBIG);
    READER(&r, 0xcf, 0, 0, 0, 0, 0, 0, 0, 7); /* wide but small is fine */
    CHECK_RC(ns_mpr_u32(&r, &u), NS_OK);
    CHECK_EQ_INT(u, 7);
    READER(&r, 0xd0, 0x01);
    CHECK_RC(ns_mpr_u32(&r, &u), NS_ERR_TYPE);

    bool b = false;
    READER(&r, 0xc3, 0xc2, 0xc0, 0x01);
    CHECK_RC(ns_mpr_bool(&r, &b), NS_OK);
    CHECK(b == true);
    CHECK_RC(ns_mpr_bool(&r, &b), NS_OK);
    CHECK(b == false);
    CHECK_RC(ns_mpr_bool(&r, &b), NS_ERR_TYPE); /* nil is not false */

    double d = 0;
    READER(&r, 0xca, 0x3f, 0xc0, 0x00, 0x00); /* float32 1.5 */
    CHECK_RC(ns_mpr_f64(&r, &d), NS_OK);
    CHECK(d == 1.5);
    READER(&r, 0xcb, 0xc0, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18);
    CHECK_RC(ns_mpr_f64(&r, &d), NS_OK);
    CHECK(d == -3.141592653589793);
    READER(&r, 0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0); /* NaN reads as NaN */
    CHECK_RC(ns_mpr_f64(&r, &d), NS_OK);
    CHECK(isnan(d));
    READER(&r, 0xcb, 0x40, 0x09, 0x21);
    CHECK_RC(ns_mpr_f64(&r, &d), NS_ERR_TRUNCATED);
    READER(&r, 0xca, 0x40);
    CHECK_RC(ns_mpr_f64(&r, &d), NS_ERR_TRUNCATED);
    READER(&r, 0x01); /* an integer is not a float */
    CHECK_RC(ns_mpr_f64(&r, &d), NS_ERR_TYPE);
}

TEST(str)
{
    ns_mpr_t r;
    char out[300];
    memset(out, 'x', sizeof out);
    READER(&r, 0xa3, 'a', 'b', 'c');
    CHECK_RC(ns_mpr_str(&r, out, 3), NS_OK);
    CHECK_STR(out, "abc");
    CHECK_RC(ns_mpr_end(&r), NS_OK);
    READER(&r, 0xa0);
    CHECK_RC(ns_mpr_str(&r, out, 0), NS_OK);
    CHECK_STR(out, "");
    READER(&r, 0xd9, 0x02, 'h', 'i');
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_OK);
    CHECK_STR(out, "hi");
    READER(&r, 0xda, 0x00, 0x02, 'h', 'i');
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_OK);
    CHECK_STR(out, "hi");
    READER(&r, 0xdb, 0x00, 0x00, 0x00, 0x02, 'h', 'i');
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_OK);
    CHECK_STR(out, "hi");
    /* UTF-8 passes through */
    READER(&r, 0xa5, 0xc3, 0xa9, 0xe2, 0x82, 0xac);
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_OK);
    CHECK_STR(out, "\xc3\xa9\xe2\x82\xac");
    /* caps: exactly max is fine, one more is not */
    READER(&r, 0xa3, 'a', 'b', 'c');
    CHECK_RC(ns_mpr_str(&r, out, 2), NS_ERR_TOOBIG);
    READER(&r, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a');
    CHECK_RC(ns_mpr_str(&r, out, 200), NS_ERR_TOOBIG);
    READER(&r, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a');
    CHECK_RC(ns_mpr_str(&r, out, SIZE_MAX - 1), NS_ERR_TRUNCATED);
    /* control characters and NUL are refused: these strings reach logs */
    static const uint8_t bad[] = {0x00, 0x01, '\t', '\n',
                                  '\r', 0x1b, 0x1f, 0x7f};
    for (size_t i = 0; i < sizeof bad; i++) {
        uint8_t buf[4] = {0xa3, 'a', bad[i], 'b'};
        ns_mpr_init(&r, buf, sizeof buf);
        int rc = ns_mpr_str(&r, out, 10);
        if (rc == NS_ERR_INVAL)
            ns_test_pass();
        else
            ns_test_fail(__FILE__, __LINE__, "byte 0x%02x gave %s", bad[i],
                         ns_errname(rc));
    }
    READER(&r, 0xa2, 0x20, 0x7e); /* space and tilde are printable */
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_OK);
    /* truncated */
    READER(&r, 0xa3, 'a', 'b');
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_ERR_TRUNCATED);
    READER(&r, 0xda, 0x00);
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_ERR_TRUNCATED);
    READER(&r, 0xd9);
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_ERR_TRUNCATED);
    /* a bin is not a str */
    READER(&r, 0xc4, 0x01, 'a');
    CHECK_RC(ns_mpr_str(&r, out, 10), NS_ERR_TYPE);
}

TEST(bin)
{
    ns_mpr_t r;
    const uint8_t *p = NULL;
    size_t n = 99;
    static const uint8_t in[] = {0xc4, 0x03, 1, 2, 3, 0xc5, 0x00, 0x01, 9,
                                 0xc6, 0,    0, 0, 2, 7,    8,    0xc4, 0x00};
    ns_mpr_init(&r, in, sizeof in);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 3), NS_OK);
    CHECK_EQ_INT(n, 3);
    CHECK(p == in + 2); /* borrowed, not copied */
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 1), NS_OK);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(p[0], 9);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 2), NS_OK);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(p[1], 8);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 0), NS_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_RC(ns_mpr_end(&r), NS_OK);

    READER(&r, 0xc4, 0x03, 1, 2, 3);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 2), NS_ERR_TOOBIG);
    /* the cap is checked before the bytes are looked for */
    READER(&r, 0xc6, 0xff, 0xff, 0xff, 0xff);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 1024), NS_ERR_TOOBIG);
    READER(&r, 0xc6, 0xff, 0xff, 0xff, 0xff);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, SIZE_MAX), NS_ERR_TRUNCATED);
    READER(&r, 0xc5, 0x01);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 1024), NS_ERR_TRUNCATED);
    READER(&r, 0xc4, 0x02, 1);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 1024), NS_ERR_TRUNCATED);
    READER(&r, 0xa1, 'a');
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 1024), NS_ERR_TYPE);

    uint8_t out[4] = {0};
    READER(&r, 0xc4, 0x04, 1, 2, 3, 4);
    CHECK_RC(ns_mpr_bin_exact(&r, out, 4), NS_OK);
    CHECK_MEM(out, B(1, 2, 3, 4), 4);
    READER(&r, 0xc4, 0x03, 1, 2, 3);
    CHECK_RC(ns_mpr_bin_exact(&r, out, 4), NS_ERR_TYPE);
    READER(&r, 0xc4, 0x05, 1, 2, 3, 4, 5);
    CHECK_RC(ns_mpr_bin_exact(&r, out, 4), NS_ERR_TOOBIG);
}

TEST(array)
{
    ns_mpr_t r;
    uint32_t n = 99;
    READER(&r, 0x90);
    CHECK_RC(ns_mpr_array(&r, &n, 0), NS_OK);
    CHECK_EQ_INT(n, 0);
    READER(&r, 0x92, 0x01, 0x02);
    CHECK_RC(ns_mpr_array(&r, &n, 2), NS_OK);
    CHECK_EQ_INT(n, 2);
    READER(&r, 0x92, 0x01, 0x02);
    CHECK_RC(ns_mpr_array(&r, &n, 1), NS_ERR_TOOBIG);
    READER(&r, 0xdc, 0x00, 0x02, 0x01, 0x02);
    CHECK_RC(ns_mpr_array(&r, &n, 10), NS_OK);
    CHECK_EQ_INT(n, 2);
    READER(&r, 0xdd, 0x00, 0x00, 0x00, 0x02, 0x01, 0x02);
    CHECK_RC(ns_mpr_array(&r, &n, 10), NS_OK);
    CHECK_EQ_INT(n, 2);
    /* 2^32-1 elements claimed: over any cap, and more than the bytes left
     * (every element takes one byte at least) */
    READER(&r, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01);
    CHECK_RC(ns_mpr_array(&r, &n, 1000), NS_ERR_TOOBIG);
    READER(&r, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x01);
    CHECK_RC(ns_mpr_array(&r, &n, UINT32_MAX), NS_ERR_TRUNCATED);
    READER(&r, 0xdc, 0xff, 0xff);
    CHECK_RC(ns_mpr_array(&r, &n, UINT32_MAX), NS_ERR_TRUNCATED);
    READER(&r, 0x93, 0x01, 0x02);
    CHECK_RC(ns_mpr_array(&r, &n, 10), NS_ERR_TRUNCATED);
    READER(&r, 0xdd, 0x00, 0x00);
    CHECK_RC(ns_mpr_array(&r, &n, 10), NS_ERR_TRUNCATED);
    READER(&r, 0x80); /* a map is not an array */
    CHECK_RC(ns_mpr_array(&r, &n, 10), NS_ERR_TYPE);

    READER(&r, 0x92, 0x01, 0x02);
    CHECK_RC(ns_mpr_array_exact(&r, 2), NS_OK);
    READER(&r, 0x92, 0x01, 0x02);
    CHECK_RC(ns_mpr_array_exact(&r, 3), NS_ERR_TYPE);
    READER(&r, 0x92, 0x01, 0x02);
    CHECK_RC(ns_mpr_array_exact(&r, 1), NS_ERR_TYPE);
}

TEST(sticky_error)
{
    ns_mpr_t r;
    uint64_t v = 42;
    char s[8];
    /* [ "x", 1, 2 ] read as [uint, uint, uint] */
    READER(&r, 0x93, 0xa1, 'x', 0x01, 0x02);
    CHECK_RC(ns_mpr_array_exact(&r, 3), NS_OK);
    CHECK_RC(ns_mpr_uint(&r, &v), NS_ERR_TYPE);
    const uint8_t *where = r.p;
    size_t left = r.left;
    /* a valid read afterwards still reports the first error, reads
     * nothing and writes nothing */
    v = 42;
    CHECK_RC(ns_mpr_uint(&r, &v), NS_ERR_TYPE);
    CHECK(v == 42);
    CHECK_RC(ns_mpr_str(&r, s, 7), NS_ERR_TYPE);
    CHECK(r.p == where && r.left == left);
    CHECK_RC(ns_mpr_end(&r), NS_ERR_TYPE);
    CHECK_EQ_INT(r.err, NS_ERR_TYPE);
    /* the first error wins over later different ones */
    READER(&r, 0xcc);
    CHECK_RC(ns_mpr_uint(&r, &v), NS_ERR_TRUNCATED);
    uint32_t n;
    CHECK_RC(ns_mpr_array(&r, &n, 0), NS_ERR_TRUNCATED);
    /* end: trailing bytes */
    READER(&r, 0x01, 0x02);
    CHECK_RC(ns_mpr_uint(&r, &v), NS_OK);
    CHECK_RC(ns_mpr_end(&r), NS_ERR_TRAILING);
    CHECK_RC(ns_mpr_uint(&r, &v), NS_ERR_TRAILING); /* sticky too */
    ns_mpr_init(&r, NULL, 0);
    CHECK_RC(ns_mpr_end(&r), NS_OK);
}

TEST(writers)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_mp_str(&pk, "hello");
    ns_mp_str(&pk, "");
    ns_mp_bin(&pk, "\x00\x01\x02", 3);
    ns_mp_bin(&pk, NULL, 0);
    static char big[70000];
    memset(big, 'z', sizeof big - 1);
    ns_mp_str(&pk, big);
    ns_mpr_t r;
    ns_mpr_init(&r, sb.data, sb.size);
    static char out[sizeof big];
    const uint8_t *p;
    size_t n;
    CHECK_RC(ns_mpr_str(&r, out, 5), NS_OK);
    CHECK_STR(out, "hello");
    CHECK_RC(ns_mpr_str(&r, out, 5), NS_OK);
    CHECK_STR(out, "");
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 3), NS_OK);
    CHECK(n == 3 && p[2] == 2);
    CHECK_RC(ns_mpr_bin(&r, &p, &n, 3), NS_OK);
    CHECK_EQ_INT(n, 0);
    CHECK_RC(ns_mpr_str(&r, out, sizeof big - 1), NS_OK); /* str32 */
    CHECK_EQ_INT(strlen(out), sizeof big - 1);
    CHECK_RC(ns_mpr_end(&r), NS_OK);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- JSON --------------------------------------------------------------- */

static void s_json_is(const msgpack_sbuffer *sb, int pretty, const char *want,
                      int line)
{
    char *json = NULL;
    int rc = ns_mp_to_json(sb->data, sb->size, &json, pretty);
    if (rc != NS_OK) {
        ns_test_fail(__FILE__, line, "ns_mp_to_json gave %s", ns_errname(rc));
        return;
    }
    if (json && strcmp(json, want) == 0)
        ns_test_pass();
    else
        ns_test_fail(__FILE__, line, "json\n  got:  %s\n  want: %s",
                     json ? json : "(null)", want);
    free(json);
}

static int s_json_rc(const uint8_t *p, size_t n)
{
    char *json = NULL;
    int rc = ns_mp_to_json(p, n, &json, 0);
    if (rc == NS_OK)
        free(json);
    return rc;
}

TEST(json_nested)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 4);
    ns_mp_str(&pk, "a");
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_int8(&pk, -2);
    msgpack_pack_true(&pk);
    msgpack_pack_false(&pk);
    msgpack_pack_nil(&pk);
    ns_mp_str(&pk, "q\"uote\\back/slash");
    ns_mp_str(&pk, "b");
    ns_mp_bin(&pk, "\xde\xad\x00\xff", 4);
    ns_mp_str(&pk, "c");
    msgpack_pack_map(&pk, 2);
    ns_mp_str(&pk, "d");
    msgpack_pack_double(&pk, 1.5);
    ns_mp_str(&pk, "e");
    msgpack_pack_array(&pk, 0);
    ns_mp_str(&pk, "with \"quotes\"");
    msgpack_pack_map(&pk, 0);
    s_json_is(&sb, 0,
              "{\"a\":[1,-2,true,false,null,\"q\\\"uote\\\\back/slash\"],"
              "\"b\":\"dead00ff\",\"c\":{\"d\":1.5,\"e\":[]},"
              "\"with \\\"quotes\\\"\":{}}",
              __LINE__);
    msgpack_sbuffer_destroy(&sb);

    /* pretty: two spaces per level */
    msgpack_sbuffer_init(&sb);
    msgpack_pack_map(&pk, 1);
    ns_mp_str(&pk, "k");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint8(&pk, 1);
    msgpack_pack_map(&pk, 1);
    ns_mp_str(&pk, "x");
    msgpack_pack_nil(&pk);
    s_json_is(&sb, 1,
              "{\n  \"k\": [\n    1,\n    {\n      \"x\": null\n    }\n  ]\n}",
              __LINE__);
    msgpack_sbuffer_destroy(&sb);
}

TEST(json_scalars)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 8);
    msgpack_pack_uint64(&pk, UINT64_MAX);
    msgpack_pack_int64(&pk, INT64_MIN);
    msgpack_pack_int64(&pk, -32);
    msgpack_pack_float(&pk, 0.25f);
    msgpack_pack_double(&pk, NAN);
    msgpack_pack_double(&pk, -INFINITY);
    msgpack_pack_double(&pk, 1e300);
    ns_mp_bin(&pk, NULL, 0);
    s_json_is(&sb, 0,
              "[18446744073709551615,-9223372036854775808,-32,0.25,null,"
              "null,1e+300,\"\"]",
              __LINE__);
    msgpack_sbuffer_destroy(&sb);

    /* control characters in strings are escaped, not passed through */
    msgpack_sbuffer_init(&sb);
    msgpack_pack_str(&pk, 5);
    msgpack_pack_str_body(&pk, "a\nb\x01\x00", 5);
    s_json_is(&sb, 0, "\"a\\u000ab\\u0001\\u0000\"", __LINE__);
    msgpack_sbuffer_destroy(&sb);

    /* a bare scalar */
    msgpack_sbuffer_init(&sb);
    msgpack_pack_uint8(&pk, 7);
    s_json_is(&sb, 1, "7", __LINE__);
    msgpack_sbuffer_destroy(&sb);
}

TEST(json_bad_input)
{
    CHECK_RC(s_json_rc(B(0), 0), NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0x01, 0x02), 2), NS_ERR_TRAILING);
    CHECK_RC(s_json_rc(B(0xc1), 1), NS_ERR_TYPE);
    CHECK_RC(s_json_rc(B(0xd4, 0x01, 0x00), 3), NS_ERR_TYPE); /* ext */
    CHECK_RC(s_json_rc(B(0x81, 0x01, 0x02), 3), NS_ERR_TYPE); /* int key */
    CHECK_RC(s_json_rc(B(0x81, 0xc0, 0x02), 3), NS_ERR_TYPE); /* nil key */
    CHECK_RC(s_json_rc(B(0x92, 0x01), 2), NS_ERR_TRUNCATED);  /* [1, */
    CHECK_RC(s_json_rc(B(0x81, 0xa1, 'k'), 3), NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xa5, 'a', 'b'), 3), NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xc4, 0x05, 'a'), 3), NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xcd, 0x01), 2), NS_ERR_TRUNCATED);
    /* huge container headers: refused before anything is allocated */
    CHECK_RC(s_json_rc(B(0xdd, 0xff, 0xff, 0xff, 0xff, 0x01), 6),
             NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0, 0x01), 7),
             NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xc6, 0xff, 0xff, 0xff, 0xff, 0x01), 6),
             NS_ERR_TRUNCATED);
    CHECK_RC(s_json_rc(B(0xdb, 0xff, 0xff, 0xff, 0xff, 0x61), 6),
             NS_ERR_TRUNCATED);

    /* depth <= 32: a scalar inside 32 nested arrays is fine, inside 33 it
     * is not, and 100000 do not blow the stack */
    static uint8_t deep[100001];
    memset(deep, 0x91, sizeof deep);
    deep[32] = 0x01;
    CHECK_RC(s_json_rc(deep, 33), NS_OK);
    memset(deep, 0x91, sizeof deep);
    deep[33] = 0x01;
    CHECK_RC(s_json_rc(deep, 34), NS_ERR_TOOBIG);
    memset(deep, 0x91, sizeof deep);
    deep[sizeof deep - 1] = 0x01;
    CHECK_RC(s_json_rc(deep, sizeof deep), NS_ERR_TOOBIG);
    /* the same with maps */
    memset(deep, 0, sizeof deep);
    size_t n = 0;
    for (int i = 0; i < 40; i++) {
        deep[n++] = 0x81;
        deep[n++] = 0xa1;
        deep[n++] = 'k';
    }
    deep[n++] = 0xc0;
    CHECK_RC(s_json_rc(deep, n), NS_ERR_TOOBIG);
}

/* Amounts: credits in, micro-credits in the ledger, credits out. */
TEST(credits_parse_and_format)
{
    static const struct {
        const char *text;
        uint64_t micro;
    } ok[] = {{"0", 0},
              {"1", 1000000},
              {"12.5", 12500000},
              {"0.000001", 1},
              {"0.25", 250000},
              {"1000000", UINT64_C(1000000000000)},
              {"18446744073709.551615", UINT64_MAX}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t v = 7;
        CHECK_RC(ns_credits_parse(ok[i].text, &v), NS_OK);
        CHECK(v == ok[i].micro);
    }
    static const char *const bad[] = {"",     "-1",  "+1",        " 1",
                                      "1 ",   "1.",  ".5",        "1e6",
                                      "0x10", "1,5", "1.0000001", "abc"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 7;
        CHECK_RC(ns_credits_parse(bad[i], &v), NS_ERR_INVAL);
        CHECK(v == 7);
    }
    uint64_t v;
    CHECK_RC(ns_credits_parse("18446744073709.551616", &v), NS_ERR_TOOBIG);
    CHECK_RC(ns_credits_parse("99999999999999999999", &v), NS_ERR_TOOBIG);
    char out[NS_CREDITS_TEXT];
    CHECK_STR(ns_credits_fmt(out, 0), "0");
    CHECK_STR(ns_credits_fmt(out, 12500000), "12.5");
    CHECK_STR(ns_credits_fmt(out, 1), "0.000001");
    CHECK_STR(ns_credits_fmt(out, UINT64_C(1000000000000)), "1000000");
    CHECK_STR(ns_credits_fmt(out, UINT64_MAX), "18446744073709.551615");
    /* a round trip through the text */
    for (uint64_t m = 0; m < 3000000; m += 999983) {
        CHECK_RC(ns_credits_parse(ns_credits_fmt(out, m), &v), NS_OK);
        CHECK(v == m);
    }
}

/* ns_mp_credits: a float64 of credits that JSON shows as a plain
 * decimal, exact to the micro-credit. */
TEST(json_credits)
{
    static const struct {
        uint64_t micro;
        const char *json;
    } cases[] = {{0, "0"},
                 {1, "0.000001"},
                 {12500000, "12.5"},
                 {UINT64_C(1000000000000), "1000000"},
                 {UINT64_C(999999999998), "999999.999998"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        ns_mp_credits(&pk, cases[i].micro);
        char *json = NULL;
        if (CHECK_RC(ns_mp_to_json(sb.data, sb.size, &json, 0), NS_OK))
            CHECK_STR(json, cases[i].json);
        free(json);
        msgpack_sbuffer_destroy(&sb);
    }
}

int main(void)
{
    RUN(uint_every_width);
    RUN(int_every_width);
    RUN(u32_bool_f64);
    RUN(str);
    RUN(bin);
    RUN(array);
    RUN(sticky_error);
    RUN(writers);
    RUN(json_nested);
    RUN(json_scalars);
    RUN(json_bad_input);
    RUN(credits_parse_and_format);
    RUN(json_credits);
    return ns_test_finish("core_mp");
}
