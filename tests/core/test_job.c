/* test_job.c - the job descriptor: validation rules, msgpack form, job id.
 *
 * Every validation rule is tried failing (with its message) next to the
 * passing case; the decoder gets every prefix, every flipped byte,
 * non-canonical forms, over-cap lengths and wrong versions. The command
 * line's flags are tested in tests/cli/test_jobflags.c.
 */
#include "check.h"

#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <math.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char s_src[] =
    "kernel void scale(global const float *a, global float *o, uint n)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    o[i] = a[i] * 2.0f;\n"
    "}\n";

/* ---- helpers ------------------------------------------------------------ */

#define EXPECT_OK(job)                                                         \
    do {                                                                       \
        char e_[512] = "";                                                     \
        if (!CHECK_RC(ns_job_validate((job), e_, sizeof e_), NS_OK))           \
            fprintf(stderr, "    validate said: %s\n", e_);                    \
    } while (0)

#define EXPECT_BAD(job, rc, msg)                                               \
    do {                                                                       \
        char e_[512] = "";                                                     \
        CHECK_RC(ns_job_validate((job), e_, sizeof e_), (rc));                 \
        CHECK_CONTAINS(e_, (msg));                                             \
    } while (0)

static ns_arg_t *s_add(ns_job_t *j, uint8_t kind)
{
    ns_arg_t *a = &j->args[j->n_args++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    return a;
}

static void s_add_in(ns_job_t *j, uint64_t size, uint8_t seed)
{
    ns_arg_t *a = s_add(j, NS_ARG_IN);
    a->size = size;
    memset(a->hash, seed, NS_HASH_BYTES);
}

static void s_add_out(ns_job_t *j, uint64_t size, uint32_t item_bytes)
{
    ns_arg_t *a = s_add(j, NS_ARG_OUT);
    a->size = size;
    a->item_bytes = item_bytes;
}

/* A valid 1-D source job: in (64 bytes), out (16 items x 4), u32. */
static void s_source_job(ns_job_t *j)
{
    ns_job_init(j);
    if (ns_job_set_source(j, s_src, strlen(s_src)) != NS_OK)
        abort();
    strcpy(j->entry, "scale");
    j->dims = 1;
    j->global[0] = 16;
    s_add_in(j, 64, 0x11);
    s_add_out(j, 64, 4);
    s_add(j, NS_ARG_U32)->v.u32 = 16;
}

/* A valid 2-D built-in job with local sizes and work-group items. */
static void s_builtin_job(ns_job_t *j)
{
    ns_job_init(j);
    strcpy(j->builtin, "sgemm");
    memset(j->source_hash, 0x5a, NS_HASH_BYTES);
    strcpy(j->entry, "sgemm_tiled");
    strcpy(j->options, "-cl-std=CL1.2 -D TILE=16");
    j->dims = 2;
    j->global[0] = 64;
    j->global[1] = 32;
    j->local[0] = 16;
    j->local[1] = 16;
    j->item_kind = NS_ITEM_WORK_GROUP; /* 4 x 2 = 8 groups */
    s_add_in(j, 4096, 0x22);
    s_add_in(j, 4096, 0x33);
    s_add_out(j, 8 * 1024, 1024);
    s_add(j, NS_ARG_LOCAL)->size = 16 * 16 * 4;
    s_add(j, NS_ARG_U32)->v.u32 = 64;
    j->det = NS_DET_ULP;
    j->tol = 4;
    j->checks = 16;
    j->work_estimate = 2ull * 64 * 32 * 64;
}

static int s_pack(const ns_job_t *j, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    ns_job_pack(&pk, j);
    return sb->data ? NS_OK : NS_ERR_NOMEM;
}

/* Exactly len bytes in their own allocation, so ASan sees over-reads. */
static uint8_t *s_dup(const void *p, size_t len)
{
    uint8_t *d = malloc(len ? len : 1);
    if (d && len)
        memcpy(d, p, len);
    return d;
}

/* Decode a whole buffer (read + end); job must be initialised. */
static int s_decode(const void *buf, size_t len, ns_job_t *j, char *err,
                    size_t errlen)
{
    uint8_t *copy = s_dup(buf, len);
    ns_mpr_t r;
    ns_mpr_init(&r, copy, len);
    int rc = ns_job_read(&r, j, err, errlen);
    if (rc == NS_OK)
        rc = ns_mpr_end(&r);
    free(copy);
    return rc;
}

static bool s_job_eq(const ns_job_t *a, const ns_job_t *b)
{
    if (strcmp(a->builtin, b->builtin) || a->source_len != b->source_len ||
        (a->source_len && memcmp(a->source, b->source, a->source_len)) ||
        memcmp(a->source_hash, b->source_hash, NS_HASH_BYTES) ||
        strcmp(a->entry, b->entry) || strcmp(a->options, b->options) ||
        a->dims != b->dims || memcmp(a->global, b->global, sizeof a->global) ||
        memcmp(a->local, b->local, sizeof a->local) || a->n_args != b->n_args ||
        a->det != b->det || memcmp(&a->tol, &b->tol, sizeof a->tol) ||
        a->item_kind != b->item_kind || a->checks != b->checks ||
        a->work_estimate != b->work_estimate || a->shard_dim != b->shard_dim ||
        a->shard_first != b->shard_first || a->shard_rows != b->shard_rows)
        return false;
    for (uint32_t k = 0; k < a->n_args; k++) {
        const ns_arg_t *x = &a->args[k], *y = &b->args[k];
        if (x->kind != y->kind || x->size != y->size ||
            x->item_bytes != y->item_bytes ||
            memcmp(x->hash, y->hash, NS_HASH_BYTES) ||
            memcmp(&x->v, &y->v, sizeof x->v))
            return false;
    }
    return true;
}

/* Pack, decode, compare, and check the id survives the trip. */
static void s_round_trip(const ns_job_t *j)
{
    msgpack_sbuffer sb;
    ns_job_t back;
    char err[256] = "";
    ns_hash_t id1, id2;
    ns_job_init(&back);
    if (!CHECK_RC(s_pack(j, &sb), NS_OK))
        return;
    CHECK(sb.size <= NS_MAX_JOB_MSG);
    if (!CHECK_RC(s_decode(sb.data, sb.size, &back, err, sizeof err), NS_OK))
        fprintf(stderr, "    read said: %s\n", err);
    CHECK(s_job_eq(j, &back));
    CHECK_RC(ns_job_id(j, id1), NS_OK);
    CHECK_RC(ns_job_id(&back, id2), NS_OK);
    CHECK_MEM(id1, id2, NS_HASH_BYTES);
    /* id = H(domain || exact packed bytes) */
    ns_hash2(id2, NS_JOB_DOMAIN, strlen(NS_JOB_DOMAIN), sb.data, sb.size);
    CHECK_MEM(id1, id2, NS_HASH_BYTES);
    ns_job_release(&back);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- round trips -------------------------------------------------------- */

TEST(round_trip_source_all_kinds)
{
    ns_job_t j;
    s_source_job(&j);
    EXPECT_OK(&j);
    s_add(&j, NS_ARG_I32)->v.i32 = INT32_MIN;
    s_add(&j, NS_ARG_I32)->v.i32 = -1;
    s_add(&j, NS_ARG_I32)->v.i32 = 200;
    s_add(&j, NS_ARG_U64)->v.u64 = UINT64_MAX;
    s_add(&j, NS_ARG_U64)->v.u64 = 0;
    s_add(&j, NS_ARG_I64)->v.i64 = INT64_MIN;
    s_add(&j, NS_ARG_I64)->v.i64 = INT64_MAX;
    s_add(&j, NS_ARG_F32)->v.f32 = 1.5f;
    s_add(&j, NS_ARG_F32)->v.f32 = -0.0f;
    /* a signalling NaN must keep its exact bits */
    uint32_t snan = 0x7fa00001u;
    memcpy(&s_add(&j, NS_ARG_F32)->v.f32, &snan, 4);
    s_add(&j, NS_ARG_F64)->v.f64 = 3.141592653589793;
    s_add(&j, NS_ARG_F64)->v.f64 = -1e300;
    s_add(&j, NS_ARG_LOCAL)->size = 256;
    s_add(&j, NS_ARG_U32)->v.u32 = UINT32_MAX;
    EXPECT_OK(&j);
    s_round_trip(&j);

    ns_job_t back;
    msgpack_sbuffer sb;
    ns_job_init(&back);
    CHECK_RC(s_pack(&j, &sb), NS_OK);
    CHECK_RC(s_decode(sb.data, sb.size, &back, NULL, 0), NS_OK);
    CHECK(memcmp(&back.args[12].v.f32, &snan, 4) == 0);
    CHECK(signbit(back.args[11].v.f32));
    CHECK_EQ_INT(back.args[3].v.i32, INT32_MIN);
    CHECK(back.args[8].v.i64 == INT64_MIN);
    msgpack_sbuffer_destroy(&sb);
    ns_job_release(&back);
    ns_job_release(&j);
}

TEST(round_trip_builtin_dims)
{
    ns_job_t j;
    s_builtin_job(&j);
    EXPECT_OK(&j);
    CHECK_EQ_INT(ns_job_items(&j), 8);
    CHECK_EQ_INT(ns_job_item_bytes(&j), 1024);
    CHECK_EQ_INT(ns_job_checks(&j), 16);
    s_round_trip(&j);

    /* 1-D, no local */
    ns_job_t one;
    s_source_job(&one);
    CHECK_EQ_INT(ns_job_items(&one), 16);
    CHECK_EQ_INT(ns_job_checks(&one), NS_JOB_DEFAULT_CHECKS);
    s_round_trip(&one);

    /* 3-D, local given, work-item items */
    ns_job_t three = one;
    three.dims = 3;
    three.global[0] = 4;
    three.global[1] = 2;
    three.global[2] = 2;
    three.local[0] = 2;
    three.local[1] = 2;
    three.local[2] = 1;
    three.det = NS_DET_REL;
    three.tol = 1e-6;
    three.work_estimate = 12345678901234ull;
    three.checks = NS_MAX_CHECKS;
    EXPECT_OK(&three);
    s_round_trip(&three);
    /* work-group items over 3 dims: 2 x 1 x 2 groups */
    three.item_kind = NS_ITEM_WORK_GROUP;
    three.args[1].size = 4 * 4;
    EXPECT_OK(&three);
    CHECK_EQ_INT(ns_job_items(&three), 4);
    s_round_trip(&three);
    /* ABS tolerance */
    three.det = NS_DET_ABS;
    three.tol = 0.25;
    s_round_trip(&three);
    ns_job_release(&one);
    ns_job_release(&j);
}

TEST(job_id)
{
    ns_job_t j, k;
    ns_hash_t a, b;
    s_source_job(&j);
    CHECK_RC(ns_job_id(&j, a), NS_OK);
    CHECK_RC(ns_job_id(&j, b), NS_OK);
    CHECK_MEM(a, b, NS_HASH_BYTES);
    k = j;
    k.checks = 7;
    CHECK_RC(ns_job_id(&k, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    k = j;
    k.args[2].v.u32 = 17;
    CHECK_RC(ns_job_id(&k, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    k = j;
    strcpy(k.options, "-w");
    CHECK_RC(ns_job_id(&k, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    /* an invalid job has no id */
    k = j;
    k.dims = 0;
    CHECK_RC(ns_job_id(&k, b), NS_ERR_INVAL);
    ns_job_release(&j);
}

/* ---- validation, rule by rule ---------------------------------------- */

TEST(validate_kernel)
{
    ns_job_t base, j;
    s_source_job(&base);
    EXPECT_OK(&base);

    j = base;
    j.source = NULL;
    j.source_len = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "kernel: none given");
    strcpy(j.builtin, "vector_add");
    EXPECT_OK(&j); /* builtin with its hash set */
    memset(j.source_hash, 0, NS_HASH_BYTES);
    EXPECT_BAD(&j, NS_ERR_INVAL, "source_hash: not set for builtin");
    memset(j.source_hash, 1, NS_HASH_BYTES);
    strcpy(j.builtin, "Vector-Add");
    EXPECT_BAD(&j, NS_ERR_INVAL, "builtin 'Vector-Add': name must be");
    memset(j.builtin, 'a', sizeof j.builtin); /* no NUL */
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "builtin: name longer than 31");
    memset(j.builtin, 0, sizeof j.builtin);
    memset(j.builtin, 'a', NS_MAX_BUILTIN);
    EXPECT_OK(&j);

    j = base;
    strcpy(j.builtin, "sgemm");
    EXPECT_BAD(&j, NS_ERR_INVAL, "both builtin 'sgemm' and source");

    j = base;
    j.source_hash[3] ^= 1;
    EXPECT_BAD(&j, NS_ERR_INVAL, "source_hash: does not match");

    /* NUL inside the source */
    ns_job_t n;
    ns_job_init(&n);
    n = base;
    n.source = NULL;
    char with_nul[] = "kernel void k() {}\0 junk";
    CHECK_RC(ns_job_set_source(&n, with_nul, sizeof with_nul), NS_OK);
    EXPECT_BAD(&n, NS_ERR_INVAL, "source: NUL byte at offset 18");
    ns_job_release(&n);

    /* set_source caps before allocating */
    ns_job_init(&n);
    CHECK_RC(ns_job_set_source(&n, s_src, 0), NS_ERR_INVAL);
    uint8_t *big = malloc(NS_MAX_SOURCE + 1);
    if (!CHECK(big != NULL))
        return;
    memset(big, ' ', NS_MAX_SOURCE + 1);
    CHECK_RC(ns_job_set_source(&n, big, NS_MAX_SOURCE + 1), NS_ERR_TOOBIG);
    CHECK(n.source == NULL);
    CHECK_RC(ns_job_set_source(&n, big, NS_MAX_SOURCE), NS_OK);
    n.dims = 1;
    n.global[0] = 1;
    strcpy(n.entry, "k");
    s_add_out(&n, 4, 4);
    EXPECT_OK(&n); /* exactly the cap */
    ns_job_release(&n);

    /* a source over the cap set by hand */
    j = base;
    j.source = big;
    j.source_len = NS_MAX_SOURCE + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "source: 1048577 bytes, over the");
    j.source_len = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "source: empty");
    free(big);
    ns_job_release(&base);
}

TEST(validate_entry)
{
    ns_job_t base, j;
    s_source_job(&base);
    j = base;
    j.entry[0] = '\0';
    EXPECT_BAD(&j, NS_ERR_INVAL, "entry: missing");
    strcpy(j.entry, "1scale");
    EXPECT_BAD(&j, NS_ERR_INVAL, "entry '1scale': not a C identifier");
    strcpy(j.entry, "sc-ale");
    EXPECT_BAD(&j, NS_ERR_INVAL, "entry 'sc-ale': not a C identifier");
    strcpy(j.entry, "a\nb");
    EXPECT_BAD(&j, NS_ERR_INVAL, "entry '(unprintable)'");
    strcpy(j.entry, "_Scale_2");
    EXPECT_OK(&j);
    memset(j.entry, 'x', NS_MAX_ENTRY);
    j.entry[NS_MAX_ENTRY] = '\0';
    EXPECT_OK(&j);
    j.entry[NS_MAX_ENTRY] = 'x';
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "entry: longer than 63");
    ns_job_release(&base);
}

TEST(validate_ndrange)
{
    ns_job_t base, j;
    s_source_job(&base);

    j = base;
    j.dims = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "dims = 0: must be 1..3");
    j.dims = 4;
    EXPECT_BAD(&j, NS_ERR_INVAL, "dims = 4: must be 1..3");

    j = base;
    j.global[0] = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "global[0] = 0: must be >= 1");
    j = base;
    j.dims = 2;
    j.global[1] = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "global[1] = 0: must be >= 1");
    j.global[1] = 1;
    EXPECT_OK(&j);
    j.global[2] = 5;
    EXPECT_BAD(&j, NS_ERR_INVAL, "global[2] = 5: must be 0 beyond dims = 2");

    /* product caps, overflow-checked */
    j = base;
    j.args[1].item_bytes = 1;
    j.dims = 2;
    j.global[0] = UINT64_C(1) << 16;
    j.global[1] = UINT64_C(1) << 16; /* exactly 2^32 */
    j.args[1].size = UINT64_C(1) << 32;
    EXPECT_OK(&j);
    CHECK(ns_job_items(&j) == UINT64_C(1) << 32);
    j.global[1]++;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "global: more than 4294967296");
    CHECK_EQ_INT(ns_job_items(&j), 0);
    j.global[0] = UINT64_MAX;
    j.global[1] = UINT64_MAX; /* would wrap */
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "global: more than");
    j.dims = 3;
    j.global[0] = UINT64_C(1) << 32;
    j.global[1] = UINT64_C(1) << 32;
    j.global[2] = UINT64_C(1) << 32; /* 2^96 */
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "global: more than");

    /* local */
    j = base;
    j.local[0] = 3;
    EXPECT_BAD(&j, NS_ERR_INVAL, "local[0] = 3 does not divide global[0] = 16");
    j.local[0] = 32;
    EXPECT_BAD(&j, NS_ERR_INVAL, "does not divide");
    j.local[0] = 8;
    EXPECT_OK(&j);
    j.local[1] = 1;
    EXPECT_BAD(&j, NS_ERR_INVAL, "local[1] = 1: must be 0 beyond dims = 1");
    j = base;
    j.dims = 2;
    j.global[1] = 4;
    j.args[1].size = 64 * 4;
    j.local[0] = 4;
    EXPECT_BAD(&j, NS_ERR_INVAL, "local[1] = 0: give every dimension or none");
    j.local[1] = 4;
    EXPECT_OK(&j);
    j.global[0] = 2048;
    j.args[1].size = 2048 * 4 * 4;
    j.local[0] = 512;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "local: more than 1024 work-items");
    j.local[0] = 256;
    EXPECT_OK(&j);
    j.local[0] = UINT64_MAX; /* does not divide, never multiplied */
    EXPECT_BAD(&j, NS_ERR_INVAL, "does not divide");

    /* item kind */
    j = base;
    j.item_kind = NS_ITEM_WORK_GROUP;
    EXPECT_BAD(&j, NS_ERR_INVAL, "item_kind = group: needs local sizes");
    j.local[0] = 4;
    EXPECT_OK(&j); /* item_bytes no longer has to divide the size */
    CHECK_EQ_INT(ns_job_units(&j), ns_job_items(&j));
    j.args[1].item_bytes = 16;
    EXPECT_OK(&j);
    /* units are groups whenever there is a local size */
    j.item_kind = NS_ITEM_WORK_ITEM;
    CHECK_EQ_INT(ns_job_units(&j), j.global[0] / 4);
    j.item_kind = NS_ITEM_WORK_GROUP;
    j.item_kind = 2;
    EXPECT_BAD(&j, NS_ERR_INVAL, "item_kind = 2: must be 0 (item) or 1");
    ns_job_release(&base);
}

TEST(validate_args)
{
    ns_job_t base, j;
    s_source_job(&base);

    j = base;
    j.n_args = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "args: none");
    j = base;
    j.n_args = NS_MAX_ARGS + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "n_args = 33: over the cap of 32");
    j = base;
    while (j.n_args < NS_MAX_ARGS)
        s_add(&j, NS_ARG_F32)->v.f32 = 1.0f;
    EXPECT_OK(&j); /* exactly 32 */

    j = base;
    j.args[1].kind = NS_ARG_U64;
    EXPECT_BAD(&j, NS_ERR_INVAL, "args: no out buffer");
    j.args[1].kind = 11;
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 1: kind 11 unknown");
    j.args[1].kind = NS_ARG_BUF; /* only in a pipeline's steps */
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 1: a buffer reference outside");
    j.args[1].kind = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 1: kind 0 unknown");

    j = base;
    j.args[0].size = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 0 (in): size 0: must be >= 1");
    j.args[0].size = NS_MAX_BUFFER + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "arg 0 (in): size 4294967297, over the");
    j.args[0].size = NS_MAX_BUFFER;
    EXPECT_OK(&j);

    /* OUT buffers are sizes: item_bytes need not divide them */
    j = base;
    j.global[0] = 25;
    s_add_out(&j, 100, 8);
    j.args[1].size = 25 * 4;
    EXPECT_OK(&j);
    j.args[3].size = 200;
    EXPECT_OK(&j);
    CHECK_EQ_INT(ns_job_item_bytes(&j), 12);
    CHECK_EQ_INT(ns_job_out_bytes(&j), 300);
    j.args[3].item_bytes = 0;
    EXPECT_OK(&j);
    j.args[3].size = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 3 (out): size 0: must be >= 1");
    j.args[3].size = 200;
    j.args[3].item_bytes = NS_MAX_ITEM_BYTES + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "arg 3 (out): item_bytes 1048577, over");

    /* n_items * item_bytes can exceed a buffer */
    j = base;
    j.global[0] = UINT64_C(1) << 32;
    j.args[1].item_bytes = 2;
    j.args[1].size = UINT64_C(1) << 33;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "arg 1 (out): size 8589934592, over the");

    /* no cap on the output of one unit */
    j = base;
    j.global[0] = 1;
    j.args[1].size = j.args[1].item_bytes = NS_MAX_ITEM_BYTES;
    EXPECT_OK(&j);
    s_add_out(&j, 4, 4);
    EXPECT_OK(&j);

    /* all buffers together */
    j = base;
    for (int k = 0; k < 3; k++)
        s_add_in(&j, NS_MAX_BUFFER, 1);
    EXPECT_OK(&j); /* 12 GiB + a little */
    s_add_in(&j, NS_MAX_BUFFER, 1);
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "args: in and out buffers total");

    /* local memory */
    j = base;
    ns_arg_t *l = s_add(&j, NS_ARG_LOCAL);
    l->size = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "arg 3 (local): size 0: must be 1..1048576");
    l->size = NS_MAX_LOCAL_BYTES + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "arg 3 (local): size 1048577");
    l->size = NS_MAX_LOCAL_BYTES;
    EXPECT_OK(&j);

    /* tolerances compare float32: 4-byte multiples per item */
    j = base;
    j.args[1].item_bytes = 6;
    j.args[1].size = 16 * 6;
    EXPECT_OK(&j); /* exact: any size */
    j.det = NS_DET_ULP;
    j.tol = 2;
    EXPECT_OK(&j); /* a tail of size % 4 bytes is compared exactly */
    j.args[1].item_bytes = 8;
    j.args[1].size = 16 * 8;
    EXPECT_OK(&j);
    ns_job_release(&base);
}

TEST(validate_tolerance_checks)
{
    ns_job_t base, j;
    s_source_job(&base);
    j = base;
    j.tol = 0.5;
    EXPECT_BAD(&j, NS_ERR_INVAL, "tol = 0.5: must be 0 for an exact job");
    j.tol = -0.0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "must be 0 for an exact job");
    j.tol = 0;
    EXPECT_OK(&j);

    j.det = NS_DET_ULP;
    j.tol = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "tol = 0: ulp needs an integer 1..1048576");
    j.tol = 1.5;
    EXPECT_BAD(&j, NS_ERR_INVAL, "ulp needs an integer");
    j.tol = 1048577;
    EXPECT_BAD(&j, NS_ERR_INVAL, "ulp needs an integer");
    j.tol = NAN;
    EXPECT_BAD(&j, NS_ERR_INVAL, "ulp needs an integer");
    j.tol = 1e30;
    EXPECT_BAD(&j, NS_ERR_INVAL, "ulp needs an integer");
    j.tol = 1;
    EXPECT_OK(&j);
    j.tol = 1048576;
    EXPECT_OK(&j);

    j.det = NS_DET_ABS;
    j.tol = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "tol = 0: abs needs a finite value > 0");
    j.tol = -1;
    EXPECT_BAD(&j, NS_ERR_INVAL, "abs needs a finite value > 0");
    j.tol = INFINITY;
    EXPECT_BAD(&j, NS_ERR_INVAL, "abs needs a finite value > 0");
    j.tol = NAN;
    EXPECT_BAD(&j, NS_ERR_INVAL, "abs needs a finite value > 0");
    j.tol = 1e-3;
    EXPECT_OK(&j);

    j.det = NS_DET_REL;
    j.tol = 1;
    EXPECT_BAD(&j, NS_ERR_INVAL, "tol = 1: rel needs a value in (0, 1)");
    j.tol = 0;
    EXPECT_BAD(&j, NS_ERR_INVAL, "rel needs a value in (0, 1)");
    j.tol = 0.01;
    EXPECT_OK(&j);

    j.det = 4;
    EXPECT_BAD(&j, NS_ERR_INVAL, "det = 4: unknown class");

    j = base;
    j.checks = NS_MAX_CHECKS + 1;
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "checks = 4097: over the cap of 4096");
    j.checks = NS_MAX_CHECKS;
    EXPECT_OK(&j);
    CHECK_EQ_INT(ns_job_checks(&j), NS_MAX_CHECKS);
    j.checks = 0;
    EXPECT_OK(&j);
    CHECK_EQ_INT(ns_job_checks(&j), NS_JOB_DEFAULT_CHECKS);
    ns_job_release(&base);
}

TEST(validate_options)
{
    static const char *const good[] = {
        "",
        "   ",
        "-cl-std=CL1.2",
        "-cl-std=CL2.0",
        "-cl-std=CL3.0",
        "-w",
        "-Werror",
        "-cl-opt-disable",
        "-D N",
        "-DN",
        "-D N=1024",
        "-DALPHA=0.5f",
        "-D NEG=-1",
        "-D X=+2.5e3",
        "-D _lower_9=abc_DEF",
        "  -cl-std=CL1.2   -D TILE=16 -w  ",
        NULL,
    };
    static const struct {
        const char *options;
        const char *msg;
    } bad[] = {
        {"-I /etc", "options: '-I' is not on the allow-list"},
        {"-I/usr/include", "'-I/usr/include' is not on the allow-list"},
        {"-cl-std=CL9.9", "'-cl-std=CL9.9' is not on the allow-list"},
        {"-cl-denorms-are-zero", "not on the allow-list"},
        {"-O3", "'-O3' is not on the allow-list"},
        {"/tmp/x.h", "'/tmp/x.h' is not on the allow-list"},
        {"-D", "options: -D needs NAME[=VALUE]"},
        {"-D   ", "options: -D needs NAME[=VALUE]"},
        {"-D 9X", "-D '9X': the name must be an identifier"},
        {"-D X-Y", "-D 'X-Y': the name must be an identifier"},
        {"-D =3", "the name must be an identifier"},
        {"-D __FAST_RELAXED_MATH__", "names starting with __ are reserved"},
        {"-D X=", "-D 'X=': empty value"},
        {"-D X=-", "-D 'X=-': empty value"},
        {"-D X=$(rm)", "the value must be [-+]?[A-Za-z0-9_.]+"},
        {"-D X=\"s\"", "the value must be"},
        {"-D X=a=b", "the value must be"},
        {"-w\t-Werror", "options: byte 2 is not printable ASCII"},
        {"-Dé", "not printable ASCII"},
        {NULL, NULL},
    };
    static const char *const inexact[] = {
        "-cl-mad-enable",
        "-cl-no-signed-zeros",
        "-cl-finite-math-only",
        "-cl-fast-relaxed-math",
        "-cl-unsafe-math-optimizations",
        NULL,
    };
    ns_job_t base, j;
    s_source_job(&base);
    for (size_t k = 0; good[k]; k++) {
        j = base;
        strcpy(j.options, good[k]);
        EXPECT_OK(&j);
    }
    for (size_t k = 0; bad[k].options; k++) {
        j = base;
        strcpy(j.options, bad[k].options);
        EXPECT_BAD(&j, NS_ERR_INVAL, bad[k].msg);
    }
    for (size_t k = 0; inexact[k]; k++) {
        char want[128];
        j = base;
        snprintf(j.options, sizeof j.options, "-cl-std=CL1.2 %s", inexact[k]);
        snprintf(want, sizeof want,
                 "options: %s changes float results; not allowed for an "
                 "exact job",
                 inexact[k]);
        EXPECT_BAD(&j, NS_ERR_INVAL, want);
        j.det = NS_DET_ULP;
        j.tol = 2;
        EXPECT_OK(&j);
        j.det = NS_DET_REL;
        j.tol = 1e-5;
        EXPECT_OK(&j);
    }
    /* all 255 bytes used, then no NUL at all */
    j = base;
    memset(j.options, 'w', NS_MAX_OPTIONS);
    j.options[0] = '-';
    j.options[NS_MAX_OPTIONS] = '\0';
    EXPECT_BAD(&j, NS_ERR_INVAL, "is not on the allow-list");
    for (size_t k = 0; k + 3 <= NS_MAX_OPTIONS; k += 3)
        memcpy(j.options + k, "-w ", 3);
    EXPECT_OK(&j);
    j.options[NS_MAX_OPTIONS] = 'w';
    EXPECT_BAD(&j, NS_ERR_TOOBIG, "options: longer than 255 bytes");
    ns_job_release(&base);
}

/* ---- hostile encodings -------------------------------------------------- */

TEST(read_every_prefix_and_flip)
{
    ns_job_t j, back;
    msgpack_sbuffer sb;
    char err[256];
    s_builtin_job(&j);
    s_add(&j, NS_ARG_F32)->v.f32 = 2.5f;
    s_add(&j, NS_ARG_F64)->v.f64 = -2.5;
    s_add(&j, NS_ARG_I64)->v.i64 = -70000;
    ns_job_init(&back);
    if (!CHECK_RC(s_pack(&j, &sb), NS_OK))
        return;
    /* every proper prefix fails, none crashes or leaks */
    size_t fails = 0;
    for (size_t n = 0; n < sb.size; n++) {
        err[0] = '\0';
        int rc = s_decode(sb.data, n, &back, err, sizeof err);
        fails += rc != NS_OK;
        if (rc == NS_OK)
            fprintf(stderr, "    prefix %zu decoded\n", n);
        CHECK(back.source == NULL && back.n_args == 0);
    }
    CHECK_EQ_INT(fails, sb.size);
    /* a flipped byte is either rejected or still a valid job */
    for (size_t n = 0; n < sb.size; n++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t *m = s_dup(sb.data, sb.size);
            m[n] ^= (uint8_t)(1u << bit);
            if (s_decode(m, sb.size, &back, NULL, 0) == NS_OK) {
                CHECK_RC(ns_job_validate(&back, NULL, 0), NS_OK);
                ns_job_release(&back);
            }
            free(m);
        }
    }
    /* trailing bytes: the descriptor reads, the caller's end check fails */
    uint8_t *t = malloc(sb.size + 1);
    memcpy(t, sb.data, sb.size);
    t[sb.size] = 0xc0;
    CHECK_RC(s_decode(t, sb.size + 1, &back, NULL, 0), NS_ERR_TRAILING);
    ns_job_release(&back);
    free(t);
    /* garbage */
    uint8_t junk[512];
    for (int round = 0; round < 200; round++) {
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] = (uint8_t)ns_rand_below(256);
        junk[0] = 0x9e; /* array of 14 */
        junk[1] = 0x01; /* version 1 */
        CHECK(s_decode(junk, 2 + ns_rand_below(510), &back, NULL, 0) != NS_OK);
    }
    CHECK_RC(s_decode("", 0, &back, err, sizeof err), NS_ERR_TRUNCATED);
    CHECK_CONTAINS(err, "job descriptor:");
    msgpack_sbuffer_destroy(&sb);
    ns_job_release(&j);
}

/* What to write differently from ns_job_pack, for hostile encodings. */
typedef struct {
    uint64_t version;  /* 0 = right */
    int extra_field;   /* a 15th element */
    int extra_args;    /* copies of the last argument beyond n_args */
    int wide_checks;   /* checks as a uint64 (not minimal) */
    int f32_as_f64;    /* f32 scalars written as float64 */
    int tol_as_f32;    /* tol written as float32 */
    int local_dims;    /* local array length (when >= 0 given) */
    int arg_len_plus;  /* one more element in each argument array */
    uint64_t src_len;  /* source bin length claimed (0 = right) */
    int str_entry_bin; /* entry as bin instead of str */
} s_mut_t;

static void s_pack_arg_mut(msgpack_packer *pk, const ns_arg_t *a,
                           const s_mut_t *m)
{
    uint32_t n = a->kind == NS_ARG_IN || a->kind == NS_ARG_OUT ? 3 : 2;
    msgpack_pack_array(pk, n + (m->arg_len_plus ? 1 : 0));
    msgpack_pack_uint8(pk, a->kind);
    switch (a->kind) {
    case NS_ARG_IN:
        msgpack_pack_uint64(pk, a->size);
        ns_mp_bin(pk, a->hash, NS_HASH_BYTES);
        break;
    case NS_ARG_OUT:
        msgpack_pack_uint64(pk, a->size);
        msgpack_pack_uint32(pk, a->item_bytes);
        break;
    case NS_ARG_LOCAL:
        msgpack_pack_uint64(pk, a->size);
        break;
    case NS_ARG_U32:
        msgpack_pack_uint32(pk, a->v.u32);
        break;
    case NS_ARG_I32:
        msgpack_pack_int32(pk, a->v.i32);
        break;
    case NS_ARG_U64:
        msgpack_pack_uint64(pk, a->v.u64);
        break;
    case NS_ARG_I64:
        msgpack_pack_int64(pk, a->v.i64);
        break;
    case NS_ARG_F32:
        if (m->f32_as_f64)
            msgpack_pack_double(pk, a->v.f32);
        else
            msgpack_pack_float(pk, a->v.f32);
        break;
    case NS_ARG_F64:
        msgpack_pack_double(pk, a->v.f64);
        break;
    }
    if (m->arg_len_plus)
        msgpack_pack_nil(pk);
}

/* The layout of docs/PROTOCOL.md "Job descriptor", written by hand. */
static void s_pack_mut(msgpack_sbuffer *sb, const ns_job_t *j, const s_mut_t *m)
{
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 14 + (m->extra_field ? 1 : 0));
    msgpack_pack_uint64(&pk, m->version ? m->version : NS_JOB_VERSION);
    msgpack_pack_str(&pk, strlen(j->builtin));
    msgpack_pack_str_body(&pk, j->builtin, strlen(j->builtin));
    if (m->src_len) {
        /* claim src_len bytes, give what we have */
        msgpack_pack_bin(&pk, m->src_len);
        msgpack_pack_bin_body(&pk, j->source, j->source_len);
    } else {
        msgpack_pack_bin(&pk, j->source_len);
        if (j->source_len)
            msgpack_pack_bin_body(&pk, j->source, j->source_len);
    }
    ns_mp_bin(&pk, j->source_hash, NS_HASH_BYTES);
    if (m->str_entry_bin)
        ns_mp_bin(&pk, j->entry, strlen(j->entry));
    else
        ns_mp_str(&pk, j->entry);
    ns_mp_str(&pk, j->options);
    msgpack_pack_array(&pk, j->dims);
    for (uint32_t d = 0; d < j->dims; d++)
        msgpack_pack_uint64(&pk, j->global[d]);
    uint32_t nl = j->local[0] ? j->dims : 0;
    if (m->local_dims >= 0)
        nl = (uint32_t)m->local_dims;
    msgpack_pack_array(&pk, nl);
    for (uint32_t d = 0; d < nl; d++)
        msgpack_pack_uint64(&pk, j->local[d] ? j->local[d] : 1);
    msgpack_pack_array(&pk, j->n_args + (uint32_t)m->extra_args);
    for (uint32_t k = 0; k < j->n_args; k++)
        s_pack_arg_mut(&pk, &j->args[k], m);
    for (int k = 0; k < m->extra_args; k++)
        s_pack_arg_mut(&pk, &j->args[j->n_args - 1], m);
    msgpack_pack_uint8(&pk, j->det);
    if (m->tol_as_f32)
        msgpack_pack_float(&pk, (float)j->tol);
    else
        msgpack_pack_double(&pk, j->tol);
    msgpack_pack_uint8(&pk, j->item_kind);
    if (m->wide_checks) {
        uint8_t wide[9] = {0xcf};
        for (int k = 0; k < 8; k++)
            wide[1 + k] = (uint8_t)((uint64_t)j->checks >> (56 - 8 * k));
        msgpack_sbuffer_write(sb, (const char *)wide, sizeof wide);
    } else {
        msgpack_pack_uint32(&pk, j->checks);
    }
    msgpack_pack_uint64(&pk, j->work_estimate);
    if (m->extra_field)
        msgpack_pack_nil(&pk);
}

#define READ_BAD(job, mut, rc, msg)                                            \
    do {                                                                       \
        msgpack_sbuffer sb_;                                                   \
        ns_job_t back_;                                                        \
        char e_[512] = "";                                                     \
        ns_job_init(&back_);                                                   \
        s_pack_mut(&sb_, (job), (mut));                                        \
        CHECK_RC(s_decode(sb_.data, sb_.size, &back_, e_, sizeof e_), (rc));   \
        CHECK_CONTAINS(e_, (msg));                                             \
        CHECK(back_.source == NULL);                                           \
        msgpack_sbuffer_destroy(&sb_);                                         \
    } while (0)

TEST(read_strict)
{
    ns_job_t j;
    msgpack_sbuffer sb, mine;
    s_builtin_job(&j);
    s_add(&j, NS_ARG_F32)->v.f32 = 0.1f;
    s_mut_t right = {.local_dims = -1};
    /* the hand-written layout is the real one */
    s_pack_mut(&mine, &j, &right);
    CHECK_RC(s_pack(&j, &sb), NS_OK);
    CHECK_EQ_INT(mine.size, sb.size);
    CHECK(mine.size == sb.size && memcmp(mine.data, sb.data, sb.size) == 0);
    msgpack_sbuffer_destroy(&mine);
    msgpack_sbuffer_destroy(&sb);

    s_mut_t m = right;
    m.version = 4;
    READ_BAD(&j, &m, NS_ERR_VERSION, "job descriptor: version:");
    m = right;
    m.version = NS_JOB_VERSION_PIPELINE; /* a pipeline's, with 14 fields */
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: version:");
    m = right;
    m.version = NS_JOB_VERSION_SHARD; /* a shard's, with 14 fields */
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: version:");
    m = right;
    m.extra_field = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: version:");
    m = right;
    m.extra_args = NS_MAX_ARGS + 1 - (int)j.n_args; /* 33 arguments */
    READ_BAD(&j, &m, NS_ERR_TOOBIG, "job descriptor: args:");
    m.extra_args = NS_MAX_ARGS - (int)j.n_args; /* 32: fine */
    {
        msgpack_sbuffer ok;
        ns_job_t back;
        ns_job_init(&back);
        s_pack_mut(&ok, &j, &m);
        CHECK_RC(s_decode(ok.data, ok.size, &back, NULL, 0), NS_OK);
        CHECK_EQ_INT(back.n_args, NS_MAX_ARGS);
        ns_job_release(&back);
        msgpack_sbuffer_destroy(&ok);
    }
    m = right;
    m.wide_checks = 1;
    READ_BAD(&j, &m, NS_ERR_INVAL, "not in canonical form");
    m = right;
    m.f32_as_f64 = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "args[5]");
    m = right;
    m.tol_as_f32 = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: tol:");
    m = right;
    m.local_dims = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: local:");
    m = right;
    m.arg_len_plus = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "args[0]");
    m = right;
    m.str_entry_bin = 1;
    READ_BAD(&j, &m, NS_ERR_TYPE, "job descriptor: entry:");

    /* semantic errors come from validate, with its message */
    ns_job_t k = j;
    k.global[0] = 63; /* local 16 does not divide */
    READ_BAD(&k, &right, NS_ERR_INVAL, "local[0] = 16 does not divide");
    k = j;
    k.args[0].kind = 12;
    READ_BAD(&k, &right, NS_ERR_INVAL, "args[0]");
    k = j;
    strcpy(k.options, "-cl-fast-relaxed-math");
    k.det = NS_DET_EXACT;
    k.tol = 0;
    k.args[2].item_bytes = 1024;
    READ_BAD(&k, &right, NS_ERR_INVAL, "-cl-fast-relaxed-math changes float");

    /* a source over the cap is refused from its length field */
    ns_job_t s;
    s_source_job(&s);
    uint8_t *big = calloc(1, NS_MAX_SOURCE + 1);
    memset(big, ' ', NS_MAX_SOURCE + 1);
    ns_job_t sb_job = s;
    sb_job.source = big;
    sb_job.source_len = NS_MAX_SOURCE + 1;
    READ_BAD(&sb_job, &right, NS_ERR_TOOBIG, "job descriptor: source:");
    sb_job.source_len = NS_MAX_SOURCE; /* hash now wrong */
    READ_BAD(&sb_job, &right, NS_ERR_INVAL, "source_hash: does not match");
    ns_hash(sb_job.source_hash, big, NS_MAX_SOURCE);
    s_round_trip(&sb_job);
    /* a length that claims more than there is */
    m = right;
    m.src_len = UINT32_MAX;
    READ_BAD(&s, &m, NS_ERR_TOOBIG, "job descriptor: source:");
    m.src_len = s.source_len + 1;
    READ_BAD(&s, &m, NS_ERR_TYPE, "job descriptor:");
    free(big);

    /* read releases what the job held before */
    ns_job_t reuse;
    s_source_job(&reuse);
    CHECK_RC(s_pack(&j, &sb), NS_OK);
    CHECK_RC(s_decode(sb.data, sb.size, &reuse, NULL, 0), NS_OK);
    CHECK(reuse.source == NULL && strcmp(reuse.builtin, "sgemm") == 0);
    msgpack_sbuffer_destroy(&sb);
    ns_job_release(&reuse);
    ns_job_release(&s);
    ns_job_release(&j);
}

/* ---- shards ------------------------------------------------------------- */

TEST(shards)
{
    ns_job_t j, sh;
    char err[256] = "";
    s_builtin_job(&j); /* groups: 4 along x, 2 along y */
    ns_job_init(&sh);
    CHECK_EQ_INT(ns_job_rows(&j), 4);
    /* along y (dim 1): 2 rows, so at most 2 shards */
    CHECK_RC(ns_job_shardable(&j, 2, 1, err, sizeof err), NS_OK);
    CHECK_RC(ns_job_shardable(&j, 3, 1, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "more shards than rows");
    CHECK_RC(ns_job_shardable(&j, 65, 0, err, sizeof err), NS_ERR_TOOBIG);
    CHECK_RC(ns_job_shardable(&j, 2, 2, err, sizeof err), NS_ERR_INVAL);
    j.args[2].size = 8 * 1024 + 2; /* out: not a multiple of 4 rows */
    CHECK_RC(ns_job_shardable(&j, 2, 0, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "not a multiple");
    j.args[2].size = 8 * 1024;

    /* shard 1 of 3 along x: rows [1, 2) of 4; units 1 and 5 */
    CHECK_RC(ns_job_make_shard(&sh, &j, 1, 3, 0), NS_OK);
    CHECK_EQ_INT(sh.shard_dim, 0);
    CHECK_EQ_INT(sh.shard_first, 1);
    CHECK_EQ_INT(sh.shard_rows, 1);
    EXPECT_OK(&sh);
    CHECK_EQ_INT(ns_job_units(&sh), 8);
    CHECK_EQ_INT(ns_job_shard_units(&sh), 2);
    CHECK_EQ_INT(ns_job_shard_unit(&sh, 0), 1);
    CHECK_EQ_INT(ns_job_shard_unit(&sh, 1), 5);
    for (uint64_t u = 0; u < 9; u++)
        CHECK(ns_job_unit_in_shard(&sh, u) == (u == 1 || u == 5));
    s_round_trip(&sh); /* version 2, 17 fields */
    ns_hash_t a, b;
    CHECK_RC(ns_job_id(&j, a), NS_OK);
    CHECK_RC(ns_job_id(&sh, b), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);

    /* shard 1 of 2 along y: units 4..7, every shard unit maps inside */
    CHECK_RC(ns_job_make_shard(&sh, &j, 1, 2, 1), NS_OK);
    CHECK_EQ_INT(ns_job_shard_units(&sh), 4);
    for (uint64_t i = 0; i < 4; i++) {
        CHECK_EQ_INT(ns_job_shard_unit(&sh, i), 4 + i);
        CHECK(ns_job_unit_in_shard(&sh, ns_job_shard_unit(&sh, i)));
    }
    s_round_trip(&sh);

    /* a shard's fields are checked */
    sh.shard_rows = 2; /* rows 1..2 of 2 */
    EXPECT_BAD(&sh, NS_ERR_INVAL, "the job has 2 rows");
    sh.shard_rows = 1;
    sh.shard_dim = 2;
    EXPECT_BAD(&sh, NS_ERR_INVAL, "shard_dim = 2");
    j.shard_first = 1; /* without rows */
    EXPECT_BAD(&j, NS_ERR_INVAL, "without shard_rows");
    j.shard_first = 0;
    /* a whole job still packs as version 1 */
    msgpack_sbuffer sb;
    CHECK_RC(s_pack(&j, &sb), NS_OK);
    CHECK_EQ_INT((uint8_t)sb.data[1], NS_JOB_VERSION);
    msgpack_sbuffer_destroy(&sb);
    ns_job_release(&sh);
    ns_job_release(&j);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(round_trip_source_all_kinds);
    RUN(round_trip_builtin_dims);
    RUN(job_id);
    RUN(validate_kernel);
    RUN(validate_entry);
    RUN(validate_ndrange);
    RUN(validate_args);
    RUN(validate_tolerance_checks);
    RUN(validate_options);
    RUN(read_every_prefix_and_flip);
    RUN(read_strict);
    RUN(shards);
    return ns_test_finish("core_job");
}
