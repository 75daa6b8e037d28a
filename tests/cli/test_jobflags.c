/* test_jobflags.c - JOB-FLAGS, the command line's job flags
 * (cli/jobflags.c).
 *
 * Every flag with good and bad values: strict numbers, missing and
 * oversized kernel files, once-only flags, the argument cap, argv left as
 * it was after a failure; a full command line finalizes into a descriptor
 * that reads back with the same id.
 */
#include "check.h"
#include "jobflags.h"

#include "nightshift/hash.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"

#include <fcntl.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --kernel's file: read and hashed, never compiled here */
static const char s_src[] = "kernel void scale(global const float *a, "
                            "global float *o) { o[0] = a[0]; }\n";

static char s_dir[64]; /* temp dir for this run's files */

/* ---- helpers ------------------------------------------------------------ */

/* A finalized job is a descriptor the network takes: it packs, reads back
 * (valid, canonical, nothing left over) and keeps its id. */
static void s_round_trip(const ns_job_t *j)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    ns_mpr_t r;
    ns_job_t back;
    ns_hash_t sent, received;
    char err[256] = "";
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ns_job_pack(&pk, j);
    ns_job_init(&back);
    ns_mpr_init(&r, sb.data, sb.size);
    if (!CHECK_RC(ns_job_read(&r, &back, err, sizeof err), NS_OK))
        fprintf(stderr, "    read said: %s\n", err);
    CHECK_RC(ns_mpr_end(&r), NS_OK);
    CHECK_RC(ns_job_id(j, sent), NS_OK);
    CHECK_RC(ns_job_id(&back, received), NS_OK);
    CHECK_MEM(sent, received, NS_HASH_BYTES);
    ns_job_release(&back);
    msgpack_sbuffer_destroy(&sb);
}

/* Write len bytes to s_dir/name; returns the path (static buffer). */
static const char *s_write_file(const char *name, const void *data, size_t len)
{
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 256, "%s/%s", s_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len))
        abort();
    fclose(f);
    return p;
}

/* argv for ns_job_parse_flag: writable copies that live until s_argv_free
 * (out_paths and in_paths borrow from them). */
static char *s_argv[80];
static int s_argc;

static void s_argv_free(void)
{
    for (int k = 0; k < s_argc; k++)
        free(s_argv[k]);
    s_argc = 0;
}

static void s_argv_set(const char *const *args)
{
    s_argv_free();
    for (; *args && s_argc < 79; args++)
        s_argv[s_argc++] = strdup(*args);
    s_argv[s_argc] = NULL;
}

/* Parse all of args (NULL-terminated) as job flags: 1 when every flag was
 * taken, 0 at the first non-job flag, else the first error. */
static int s_parse(ns_job_t *j, const char *const *args, const char **in,
                   const char **out, char *err, size_t errlen)
{
    s_argv_set(args);
    int i = 0;
    while (i < s_argc) {
        int before = i;
        int rc = ns_job_parse_flag(j, s_argc, s_argv, &i, in, out, err, errlen);
        if (rc <= 0) {
            if (i != before)
                return -100; /* must not move on failure */
            return rc;
        }
        if (i != before + 2)
            return -101;
    }
    return 1;
}

/* One flag and value on a fresh job: the rc and the error line. */
static int s_parse1(const char *flag, const char *value, char *err,
                    size_t errlen)
{
    ns_job_t j;
    ns_job_init(&j);
    const char *args[] = {flag, value, NULL};
    err[0] = '\0';
    int rc = s_parse(&j, args, NULL, NULL, err, errlen);
    ns_job_release(&j);
    return rc;
}

#define PARSE_BAD(flag, value, msg)                                            \
    do {                                                                       \
        char e_[512];                                                          \
        CHECK(s_parse1((flag), (value), e_, sizeof e_) < 0);                   \
        CHECK_CONTAINS(e_, (msg));                                             \
    } while (0)

#define PARSE_OK(flag, value)                                                  \
    do {                                                                       \
        char e_[512];                                                          \
        if (!CHECK_EQ_INT(s_parse1((flag), (value), e_, sizeof e_), 1))        \
            fprintf(stderr, "    parse said: %s\n", e_);                       \
    } while (0)

/* ---- flags -------------------------------------------------------------- */

TEST(flags_full_command_line)
{
    float in[64];
    for (int k = 0; k < 64; k++)
        in[k] = (float)k;
    const char *in_path = s_write_file("in.bin", in, sizeof in);
    const char *cl_path = s_write_file("scale.cl", s_src, strlen(s_src));
    const char *args[] = {"--kernel",    cl_path,
                          "--entry",     "scale",
                          "--global",    "8,8",
                          "--local",     "4,4",
                          "--arg",       NULL /* in: */,
                          "--arg",       "out:256:out.bin",
                          "--arg",       "out:512:we:ird:8",
                          "--arg",       "u32:4294967295",
                          "--arg",       "i32:-2147483648",
                          "--arg",       "u64:18446744073709551615",
                          "--arg",       "i64:-9223372036854775808",
                          "--arg",       "f32:0.1",
                          "--arg",       "f64:-1e300",
                          "--arg",       "local:1024",
                          "--arg",       "f32:0x1p-3",
                          "--tolerance", "ulp:3",
                          "--checks",    "99",
                          "--options",   "-cl-std=CL1.2 -D N=64",
                          "--work",      "1000000",
                          "--item-kind", "item",
                          NULL};
    char in_arg[300];
    snprintf(in_arg, sizeof in_arg, "in:%s", in_path);
    args[9] = in_arg;
    const char *in_paths[NS_MAX_ARGS] = {0}, *out_paths[NS_MAX_ARGS] = {0};
    char err[512] = "";
    ns_job_t j;
    ns_job_init(&j);
    if (!CHECK_EQ_INT(s_parse(&j, args, in_paths, out_paths, err, sizeof err),
                      1))
        fprintf(stderr, "    parse said: %s\n", err);
    CHECK_EQ_INT(j.dims, 2);
    CHECK(j.global[0] == 8 && j.global[1] == 8 && j.global[2] == 0);
    CHECK(j.local[0] == 4 && j.local[1] == 4);
    CHECK_EQ_INT(j.n_args, 11);
    CHECK_STR(in_paths[0], in_path);
    CHECK(out_paths[0] == NULL && in_paths[1] == NULL);
    CHECK_STR(out_paths[1], "out.bin");
    CHECK_STR(out_paths[2], "we:ird"); /* the last :8 was item bytes */
    CHECK_EQ_INT(j.args[2].item_bytes, 8);
    CHECK_EQ_INT(j.args[1].item_bytes, 0); /* until finalize */
    CHECK(j.args[3].v.u32 == UINT32_MAX);
    CHECK_EQ_INT(j.args[4].v.i32, INT32_MIN);
    CHECK(j.args[5].v.u64 == UINT64_MAX);
    CHECK(j.args[6].v.i64 == INT64_MIN);
    CHECK(j.args[7].v.f32 == 0.1f);
    CHECK(j.args[8].v.f64 == -1e300);
    CHECK(j.args[9].kind == NS_ARG_LOCAL && j.args[9].size == 1024);
    CHECK(j.args[10].v.f32 == 0.125f);
    CHECK(j.det == NS_DET_ULP && j.tol == 3);
    CHECK_EQ_INT(j.checks, 99);
    CHECK_STR(j.options, "-cl-std=CL1.2 -D N=64");
    CHECK(j.work_estimate == 1000000);
    CHECK_EQ_INT(j.source_len, strlen(s_src));
    ns_hash_t h;
    ns_hash(h, s_src, strlen(s_src));
    CHECK_MEM(h, j.source_hash, NS_HASH_BYTES);

    /* inputs are the caller's: finalize refuses until they are filled */
    CHECK_RC(ns_job_finalize(&j, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "arg 0 (in): size 0: must be >= 1");
    CHECK_EQ_INT(j.args[1].item_bytes, 64); /* filled: 256 bytes / 4 groups */
    j.args[0].size = sizeof in;
    ns_hash(j.args[0].hash, in, sizeof in);
    if (!CHECK_RC(ns_job_finalize(&j, err, sizeof err), NS_OK))
        fprintf(stderr, "    finalize said: %s\n", err);
    s_round_trip(&j);

    /* work-group items: item bytes over 4 groups */
    ns_job_t g = j;
    g.item_kind = NS_ITEM_WORK_GROUP;
    g.args[1].item_bytes = 0;
    g.args[2].item_bytes = 128;
    CHECK_RC(ns_job_finalize(&g, err, sizeof err), NS_OK);
    CHECK_EQ_INT(g.args[1].item_bytes, 64);
    g.args[1].item_bytes = 0;
    g.args[1].size = 250;
    CHECK_RC(ns_job_finalize(&g, err, sizeof err), NS_OK);
    CHECK_EQ_INT(g.args[1].item_bytes, 0); /* does not divide: left 0 */
    g.args[1].size = 0;
    CHECK_RC(ns_job_finalize(&g, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "arg 1 (out): size 0: must be >= 1");
    g.args[1].size = 4 * (NS_MAX_ITEM_BYTES + 4);
    CHECK_RC(ns_job_finalize(&g, err, sizeof err), NS_OK);
    CHECK_EQ_INT(g.args[1].item_bytes, 0); /* over the cap: left 0 */
    g.dims = 0;
    CHECK_RC(ns_job_finalize(&g, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "dims = 0");
    ns_job_release(&j);
    s_argv_free();
}

TEST(flags_builtin_and_others)
{
    const char *args[] = {
        "--builtin",   "vector_add", "--global",  "1024",  "--arg",
        "in:a.bin",    "--arg",      "in:b.bin",  "--arg", "out:4096:c.bin",
        "--tolerance", "abs:1e-6",   "--min-mem", "1G",    NULL};
    const char *in_paths[NS_MAX_ARGS], *out_paths[NS_MAX_ARGS];
    char err[512] = "";
    ns_job_t j;
    ns_job_init(&j);
    /* stops at --min-mem: not a job flag */
    CHECK_EQ_INT(s_parse(&j, args, in_paths, out_paths, err, sizeof err), 0);
    CHECK_STR(s_argv[12], "--min-mem");
    CHECK_STR(j.builtin, "vector_add");
    CHECK(j.source == NULL);
    CHECK(j.det == NS_DET_ABS && j.tol == 1e-6);
    CHECK_STR(in_paths[0], "a.bin");
    CHECK_STR(in_paths[1], "b.bin");
    CHECK_STR(out_paths[2], "c.bin");
    /* the caller fills the built-in's hash and entry, and the inputs */
    CHECK_RC(ns_job_finalize(&j, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "source_hash: not set for builtin 'vector_add'");
    memset(j.source_hash, 7, NS_HASH_BYTES);
    CHECK_RC(ns_job_finalize(&j, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "entry: missing");
    strcpy(j.entry, "vector_add");
    j.args[0].size = j.args[1].size = 4096;
    if (!CHECK_RC(ns_job_finalize(&j, err, sizeof err), NS_OK))
        fprintf(stderr, "    finalize said: %s\n", err);
    s_round_trip(&j);
    ns_job_release(&j);
    s_argv_free();
}

TEST(flags_kernel_file)
{
    char err[512];
    char path[256];
    snprintf(path, sizeof path, "%s/missing.cl", s_dir);
    PARSE_BAD("--kernel", path, "no such file");
    CHECK_RC(s_parse1("--kernel", path, err, sizeof err), NS_ERR_NOTFOUND);

    /* 10 MB: refused from its size, never read */
    snprintf(path, sizeof path, "%s/big.cl", s_dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (!CHECK(fd >= 0) || !CHECK(ftruncate(fd, 10485760) == 0))
        return;
    close(fd);
    CHECK_RC(s_parse1("--kernel", path, err, sizeof err), NS_ERR_TOOBIG);
    CHECK_CONTAINS(err,
                   "kernel source is 10485760 bytes, over the 1048576-byte "
                   "cap");
    /* one byte over and exactly at the cap */
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && ftruncate(fd, NS_MAX_SOURCE + 1) == 0);
    close(fd);
    CHECK_RC(s_parse1("--kernel", path, err, sizeof err), NS_ERR_TOOBIG);
    CHECK_CONTAINS(err, "kernel source is 1048577 bytes");
    char *text = malloc(NS_MAX_SOURCE);
    memset(text, ' ', NS_MAX_SOURCE);
    s_write_file("big.cl", text, NS_MAX_SOURCE);
    free(text);
    PARSE_OK("--kernel", path);

    const char *empty = s_write_file("empty.cl", "", 0);
    PARSE_BAD("--kernel", empty, "the file is empty");
    PARSE_BAD("--kernel", s_dir, "not a regular file");

    /* one kernel only */
    const char *cl = s_write_file("k.cl", s_src, strlen(s_src));
    const char *twice[] = {"--kernel", cl, "--kernel", cl, NULL};
    const char *both[] = {"--kernel", cl, "--builtin", "sgemm", NULL};
    const char *both2[] = {"--builtin", "sgemm", "--kernel", cl, NULL};
    ns_job_t j;
    ns_job_init(&j);
    CHECK_RC(s_parse(&j, twice, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--kernel: a kernel is already given");
    ns_job_release(&j);
    CHECK_RC(s_parse(&j, both, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--builtin: a kernel is already given");
    ns_job_release(&j);
    CHECK_RC(s_parse(&j, both2, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--kernel: a kernel is already given");
    ns_job_release(&j);
    s_argv_free();
}

TEST(flags_bad_values)
{
    char err[512];
    /* missing values */
    ns_job_t j;
    ns_job_init(&j);
    const char *alone[] = {"--global", NULL};
    CHECK_RC(s_parse(&j, alone, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--global needs a value");
    const char *flagval[] = {"--entry", "--global", "4", NULL};
    CHECK_RC(s_parse(&j, flagval, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--entry needs a value (got '--global')");
    ns_job_release(&j);

    PARSE_OK("--global", "1,2,3");
    PARSE_OK("--global", "4294967296");
    PARSE_BAD("--global", "4,,2", "--global '4,,2': bad number ''");
    PARSE_BAD("--global", "", "bad number ''");
    PARSE_BAD("--global", "4,", "bad number ''");
    PARSE_BAD("--global", "0", "--global '0': sizes must be >= 1");
    PARSE_BAD("--global", "1,2,3,4", "at most 3 dimensions");
    PARSE_BAD("--global", "18446744073709551616", "bad number");
    PARSE_BAD("--global", "-4", "bad number '-4'");
    PARSE_BAD("--global", "4x", "bad number '4x'");
    PARSE_BAD("--global", " 4", "bad number");
    PARSE_BAD("--global", "+4", "bad number");
    PARSE_BAD("--local", "0,4", "--local '0,4': sizes must be >= 1");
    PARSE_BAD("--entry", "1x", "--entry '1x': not a C identifier");
    PARSE_BAD("--entry",
              "a123456789012345678901234567890123456789012345678901234567890"
              "123",
              "--entry: name longer than 63 bytes");
    PARSE_BAD("--builtin", "SGEMM", "--builtin 'SGEMM': name must be");
    PARSE_BAD("--builtin", "a23456789012345678901234567890123",
              "--builtin: name longer than 31 bytes");

    PARSE_OK("--arg", "u32:0");
    PARSE_BAD("--arg", "u32:4294967296", "--arg 'u32:4294967296': bad u32");
    PARSE_BAD("--arg", "u32:-1", "bad u32 value '-1'");
    PARSE_BAD("--arg", "u32: 5", "bad u32 value");
    PARSE_BAD("--arg", "u32:0x10", "bad u32 value");
    PARSE_BAD("--arg", "u32:", "bad u32 value ''");
    PARSE_OK("--arg", "i32:2147483647");
    PARSE_BAD("--arg", "i32:2147483648", "bad i32 value");
    PARSE_BAD("--arg", "i32:-2147483649", "bad i32 value");
    PARSE_BAD("--arg", "i32:+5", "bad i32 value");
    PARSE_BAD("--arg", "i32:-", "bad i32 value");
    PARSE_BAD("--arg", "i32:5 ", "bad i32 value");
    PARSE_BAD("--arg", "u64:18446744073709551616", "bad u64 value");
    PARSE_BAD("--arg", "i64:9223372036854775808", "bad i64 value");
    PARSE_OK("--arg", "f32:-3.5e-3");
    PARSE_BAD("--arg", "f32:abc", "bad f32 value 'abc'");
    PARSE_BAD("--arg", "f32:1e39", "bad f32 value");
    PARSE_BAD("--arg", "f32:nan", "bad f32 value");
    PARSE_BAD("--arg", "f32:1.0f", "bad f32 value");
    PARSE_BAD("--arg", "f64:inf", "bad f64 value");
    PARSE_BAD("--arg", "f64:1e999", "bad f64 value");
    PARSE_BAD("--arg", "f64: 1", "bad f64 value");
    PARSE_BAD("--arg", "local:x", "bad local value 'x'");
    PARSE_BAD("--arg", "foo:1", "--arg 'foo:1': unknown kind 'foo'");
    PARSE_BAD("--arg", "IN:a.bin", "unknown kind 'IN'");
    PARSE_BAD("--arg", "u32", "--arg 'u32': expected KIND:VALUE");
    PARSE_BAD("--arg", "in:", "expected in:FILE");
    PARSE_BAD("--arg", "out:64", "expected out:BYTES:FILE[:ITEM_BYTES]");
    PARSE_BAD("--arg", "out:64:", "expected out:BYTES:FILE");
    PARSE_BAD("--arg", "out:x:f.bin", "bad size 'x'");
    PARSE_BAD("--arg", "out::f.bin", "bad size ''");
    PARSE_BAD("--arg", "out:64:f.bin:0", "bad item bytes '0'");
    PARSE_BAD("--arg", "out:64:f.bin:4294967296", "bad item bytes");
    PARSE_OK("--arg", "out:64:f.bin:x"); /* a file named f.bin:x */

    PARSE_OK("--tolerance", "exact");
    PARSE_OK("--tolerance", "rel:0.001");
    PARSE_BAD("--tolerance", "ulp:0", "ulp needs an integer 1..1048576");
    PARSE_BAD("--tolerance", "ulp:1048577", "ulp needs an integer");
    PARSE_BAD("--tolerance", "ulp:1.5", "ulp needs an integer");
    PARSE_BAD("--tolerance", "abs:0", "abs needs a finite number > 0");
    PARSE_BAD("--tolerance", "abs:-1", "abs needs");
    PARSE_BAD("--tolerance", "abs:inf", "abs needs");
    PARSE_BAD("--tolerance", "rel:1", "rel needs a number in (0, 1)");
    PARSE_BAD("--tolerance", "loose", "expected exact, ulp:N, abs:X or rel:X");
    PARSE_OK("--checks", "0");
    PARSE_OK("--checks", "4096");
    PARSE_BAD("--checks", "4097", "--checks 4097: over the cap of 4096");
    PARSE_BAD("--checks", "-1", "--checks '-1': not a number");
    PARSE_BAD("--checks", "99999999999999999999999", "not a number");
    PARSE_OK("--item-kind", "group");
    PARSE_BAD("--item-kind", "wavefront", "expected item or group");
    PARSE_BAD("--work", "1e12", "--work '1e12': not a number of flops");

    char longopt[NS_MAX_OPTIONS + 2];
    memset(longopt, 'w', sizeof longopt - 1);
    longopt[sizeof longopt - 1] = '\0';
    PARSE_BAD("--options", longopt, "--options: 256 bytes, over the 255");
    longopt[NS_MAX_OPTIONS] = '\0';
    PARSE_OK("--options", longopt); /* the allow-list is validate's */

    /* once-only flags */
    const char *g2[] = {"--global", "4", "--global", "8", NULL};
    const char *l2[] = {"--local", "4", "--local", "8", NULL};
    const char *e2[] = {"--entry", "a", "--entry", "b", NULL};
    ns_job_init(&j);
    CHECK_RC(s_parse(&j, g2, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--global given twice");
    ns_job_release(&j);
    CHECK_RC(s_parse(&j, l2, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--local given twice");
    ns_job_release(&j);
    CHECK_RC(s_parse(&j, e2, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "--entry given twice");
    ns_job_release(&j);

    /* 33 arguments */
    const char *many[2 * (NS_MAX_ARGS + 1) + 1];
    for (int k = 0; k <= NS_MAX_ARGS; k++) {
        many[2 * k] = "--arg";
        many[2 * k + 1] = "u32:1";
    }
    many[2 * (NS_MAX_ARGS + 1)] = NULL;
    CHECK_RC(s_parse(&j, many, NULL, NULL, err, sizeof err), NS_ERR_INVAL);
    CHECK_CONTAINS(err, "more than 32 arguments");
    CHECK_EQ_INT(j.n_args, NS_MAX_ARGS);
    ns_job_release(&j);

    /* a failed out:...:ITEM_BYTES leaves argv as it was */
    const char *badout[] = {"--arg", "out:x:f.bin:8", NULL};
    CHECK(s_parse(&j, badout, NULL, NULL, err, sizeof err) < 0);
    CHECK_STR(s_argv[1], "out:x:f.bin:8");
    CHECK_EQ_INT(j.n_args, 0);
    ns_job_release(&j);
    s_argv_free();
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    snprintf(s_dir, sizeof s_dir, "/tmp/ns_test_jobflags.XXXXXX");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(flags_full_command_line);
    RUN(flags_builtin_and_others);
    RUN(flags_kernel_file);
    RUN(flags_bad_values);

    static const char *const files[] = {"in.bin",   "scale.cl", "big.cl",
                                        "empty.cl", "k.cl",     NULL};
    for (size_t k = 0; files[k]; k++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", s_dir, files[k]);
        unlink(p);
    }
    rmdir(s_dir);
    return ns_test_finish("cli_jobflags");
}
