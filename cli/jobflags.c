/* jobflags.c - JOB-FLAGS: a job descriptor from the command line's flags
 * (`nightshift run`, `nightshift submit`, through jobspec.c).
 *
 * Only the flags' syntax is checked here (strict numbers, one kernel, caps
 * on names); the descriptor's rules are core/job.c's, applied when the
 * caller runs ns_job_finalize. */
#include "jobflags.h"

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/util.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_NUM_MAX 24 /* longest number text we parse */

/* ---- small helpers ------------------------------------------------------ */

/* Fill err (when there is one) with the formatted line and return rc. */
__attribute__((format(printf, 4, 5))) static int
s_fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static bool s_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The n bytes at t are exactly word. */
static bool s_token_is(const char *t, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(t, word, n) == 0;
}

/* ---- command-line flags ------------------------------------------------- */

/* Decimal u64 from n bytes of s (not NUL-terminated). */
static bool s_u64n(const char *s, size_t n, uint64_t *out)
{
    char buf[S_NUM_MAX + 1];
    if (n == 0 || n > S_NUM_MAX)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return ns_parse_u64(buf, out) == NS_OK;
}

static bool s_u64(const char *s, uint64_t *out)
{
    return s_u64n(s, strlen(s), out);
}

static bool s_i64(const char *s, int64_t *out)
{
    const char *digits = s[0] == '-' ? s + 1 : s;
    if (!s_is_digit(digits[0]))
        return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

/* A finite number, the whole string (strtod syntax, no leading space). */
static bool s_f64(const char *s, double *out)
{
    if (s[0] == '\0' || s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r'))
        return false;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static bool s_f32(const char *s, float *out)
{
    if (s[0] == '\0' || s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r'))
        return false;
    errno = 0;
    char *end = NULL;
    float v = strtof(s, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* X[,Y[,Z]], each >= 1. */
static int s_parse_sizes(const char *flag, const char *v, uint64_t out[3],
                         uint32_t *dims, char *err, size_t errlen)
{
    uint64_t sizes[3] = {0, 0, 0};
    uint32_t n = 0;
    const char *p = v;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 3)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "%s '%s': at most 3 dimensions", flag, v);
        if (!s_u64n(p, len, &sizes[n]))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "%s '%s': bad number '%.*s'", flag, v, (int)len, p);
        if (sizes[n] == 0)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "%s '%s': sizes must be >= 1", flag, v);
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    memcpy(out, sizes, sizeof sizes);
    *dims = n;
    return NS_OK;
}

static int s_read_kernel(ns_job_t *job, const char *path, char *err,
                         size_t errlen)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    struct stat st;
    int rc = ns_file_read(path, NS_MAX_SOURCE, &buf, &len);
    switch (rc) {
    case NS_OK:
        break;
    case NS_ERR_NOTFOUND:
        return s_fail(rc, err, errlen, "--kernel %s: no such file", path);
    case NS_ERR_TOOBIG:
        if (stat(path, &st) == 0)
            return s_fail(rc, err, errlen,
                          "--kernel %s: kernel source is %llu bytes, over "
                          "the %d-byte cap",
                          path, (unsigned long long)st.st_size, NS_MAX_SOURCE);
        return s_fail(rc, err, errlen,
                      "--kernel %s: kernel source is over the %d-byte cap",
                      path, NS_MAX_SOURCE);
    case NS_ERR_INVAL:
        return s_fail(rc, err, errlen, "--kernel %s: not a regular file", path);
    default:
        return s_fail(rc, err, errlen, "--kernel %s: %s", path,
                      errno ? strerror(errno) : ns_strerror(rc));
    }
    if (len == 0) {
        free(buf);
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--kernel %s: the file is empty", path);
    }
    free(job->source);
    job->source = buf;
    job->source_len = len;
    ns_hash(job->source_hash, buf, len);
    return NS_OK;
}

static int s_parse_arg(ns_job_t *job, char *v, const char **in_paths,
                       const char **out_paths, char *err, size_t errlen)
{
    if (job->n_args >= NS_MAX_ARGS)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--arg '%s': more than %d arguments", v, NS_MAX_ARGS);
    char *colon = strchr(v, ':');
    if (!colon)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--arg '%s': expected KIND:VALUE", v);
    size_t kn = (size_t)(colon - v);
    ns_arg_t a;
    memset(&a, 0, sizeof a);
    /* KIND is the name core gives the kind (ns_arg_kind_name) */
    for (uint8_t k = NS_ARG_IN; k <= NS_ARG_LOCAL; k++)
        if (s_token_is(v, kn, ns_arg_kind_name(k)))
            a.kind = k;
    if (a.kind == 0)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--arg '%s': unknown kind '%.*s' (in, out, u32, i32, "
                      "u64, i64, f32, f64, local)",
                      v, (int)kn, v);
    char *val = colon + 1;
    const char *path = NULL;
    char *cut = NULL; /* out:...:ITEM_BYTES: where FILE ends */
    uint64_t u = 0;
    int64_t i = 0;
    bool ok = true;
    switch (a.kind) {
    case NS_ARG_IN:
        path = val;
        if (!*path)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--arg '%s': expected in:FILE", v);
        break;
    case NS_ARG_OUT: {
        char *c2 = strchr(val, ':');
        if (!c2 || !c2[1])
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--arg '%s': expected out:BYTES:FILE[:ITEM_BYTES]",
                          v);
        if (!s_u64n(val, (size_t)(c2 - val), &a.size))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--arg '%s': bad size '%.*s'", v, (int)(c2 - val),
                          val);
        path = c2 + 1;
        char *last = strrchr(c2 + 1, ':');
        if (last && last > path && last[1]) {
            bool digits = true;
            for (const char *d = last + 1; *d && digits; d++)
                digits = s_is_digit(*d);
            if (digits) {
                if (!s_u64(last + 1, &u) || u == 0 || u > UINT32_MAX)
                    return s_fail(NS_ERR_INVAL, err, errlen,
                                  "--arg '%s': bad item bytes '%s'", v,
                                  last + 1);
                a.item_bytes = (uint32_t)u;
                cut = last;
            }
        }
        break;
    }
    case NS_ARG_LOCAL:
        ok = s_u64(val, &a.size);
        break;
    case NS_ARG_U32:
        ok = s_u64(val, &u) && u <= UINT32_MAX;
        a.v.u32 = (uint32_t)u;
        break;
    case NS_ARG_I32:
        ok = s_i64(val, &i) && i >= INT32_MIN && i <= INT32_MAX;
        a.v.i32 = (int32_t)i;
        break;
    case NS_ARG_U64:
        ok = s_u64(val, &a.v.u64);
        break;
    case NS_ARG_I64:
        ok = s_i64(val, &a.v.i64);
        break;
    case NS_ARG_F32:
        ok = s_f32(val, &a.v.f32);
        break;
    case NS_ARG_F64:
        ok = s_f64(val, &a.v.f64);
        break;
    }
    if (!ok)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--arg '%s': bad %s value '%s'", v,
                      ns_arg_kind_name(a.kind), val);
    uint32_t k = job->n_args++;
    job->args[k] = a;
    if (cut)
        *cut = '\0'; /* only now that nothing can fail */
    if (in_paths)
        in_paths[k] = a.kind == NS_ARG_IN ? path : NULL;
    if (out_paths)
        out_paths[k] = a.kind == NS_ARG_OUT ? path : NULL;
    return NS_OK;
}

static int s_parse_tolerance(ns_job_t *job, const char *v, char *err,
                             size_t errlen)
{
    uint64_t u = 0;
    double x = 0;
    if (strcmp(v, "exact") == 0) {
        job->det = NS_DET_EXACT;
        job->tol = 0;
    } else if (strncmp(v, "ulp:", 4) == 0) {
        if (!s_u64(v + 4, &u) || u < 1 || u > NS_MAX_ULP)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--tolerance '%s': ulp needs an integer 1..%u", v,
                          NS_MAX_ULP);
        job->det = NS_DET_ULP;
        job->tol = (double)u;
    } else if (strncmp(v, "abs:", 4) == 0) {
        if (!s_f64(v + 4, &x) || !(x > 0))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--tolerance '%s': abs needs a finite number > 0", v);
        job->det = NS_DET_ABS;
        job->tol = x;
    } else if (strncmp(v, "rel:", 4) == 0) {
        if (!s_f64(v + 4, &x) || !(x > 0 && x < 1))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--tolerance '%s': rel needs a number in (0, 1)", v);
        job->det = NS_DET_REL;
        job->tol = x;
    } else {
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "--tolerance '%s': expected exact, ulp:N, abs:X or "
                      "rel:X",
                      v);
    }
    return NS_OK;
}

static bool s_has_kernel(const ns_job_t *job)
{
    return job->source != NULL || job->builtin[0] != '\0';
}

int ns_job_parse_flag(ns_job_t *job, int argc, char **argv, int *i,
                      const char **in_paths, const char **out_paths, char *err,
                      size_t errlen)
{
    static const char *const flags[] = {
        "--kernel",    "--builtin", "--entry",     "--global",
        "--local",     "--arg",     "--tolerance", "--checks",
        "--item-kind", "--options", "--work",      NULL,
    };
    assert(*i >= 0 && *i < argc);
    const char *flag = argv[*i];
    size_t f = 0;
    while (flags[f] && strcmp(flags[f], flag) != 0)
        f++;
    if (!flags[f])
        return 0;
    if (*i + 1 >= argc)
        return s_fail(NS_ERR_INVAL, err, errlen, "%s needs a value", flag);
    char *v = argv[*i + 1];
    if (strncmp(v, "--", 2) == 0)
        return s_fail(NS_ERR_INVAL, err, errlen, "%s needs a value (got '%s')",
                      flag, v);
    size_t vlen = strlen(v);
    uint64_t u = 0;
    int rc = NS_OK;

    if (strcmp(flag, "--kernel") == 0) {
        if (s_has_kernel(job))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--kernel: a kernel is already given (one "
                          "--kernel or --builtin)");
        rc = s_read_kernel(job, v, err, errlen);
    } else if (strcmp(flag, "--builtin") == 0) {
        if (s_has_kernel(job))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--builtin: a kernel is already given (one "
                          "--kernel or --builtin)");
        if (vlen > NS_MAX_BUILTIN)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--builtin: name longer than %d bytes",
                          NS_MAX_BUILTIN);
        if (!ns_job_builtin_ok(v, vlen))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--builtin '%s': name must be [a-z0-9_]+", v);
        memcpy(job->builtin, v, vlen + 1);
    } else if (strcmp(flag, "--entry") == 0) {
        if (job->entry[0])
            return s_fail(NS_ERR_INVAL, err, errlen, "--entry given twice");
        if (vlen > NS_MAX_ENTRY)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--entry: name longer than %d bytes", NS_MAX_ENTRY);
        if (!ns_job_entry_ok(v, vlen))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--entry '%s': not a C identifier", v);
        memcpy(job->entry, v, vlen + 1);
    } else if (strcmp(flag, "--global") == 0) {
        if (job->dims)
            return s_fail(NS_ERR_INVAL, err, errlen, "--global given twice");
        rc = s_parse_sizes(flag, v, job->global, &job->dims, err, errlen);
    } else if (strcmp(flag, "--local") == 0) {
        uint32_t dims = 0;
        if (job->local[0])
            return s_fail(NS_ERR_INVAL, err, errlen, "--local given twice");
        rc = s_parse_sizes(flag, v, job->local, &dims, err, errlen);
    } else if (strcmp(flag, "--arg") == 0) {
        rc = s_parse_arg(job, v, in_paths, out_paths, err, errlen);
    } else if (strcmp(flag, "--tolerance") == 0) {
        rc = s_parse_tolerance(job, v, err, errlen);
    } else if (strcmp(flag, "--checks") == 0) {
        if (!s_u64(v, &u))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--checks '%s': not a number", v);
        if (u > NS_MAX_CHECKS)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--checks %s: over the cap of %d", v, NS_MAX_CHECKS);
        job->checks = (uint32_t)u;
    } else if (strcmp(flag, "--item-kind") == 0) {
        if (strcmp(v, "item") == 0)
            job->item_kind = NS_ITEM_WORK_ITEM;
        else if (strcmp(v, "group") == 0)
            job->item_kind = NS_ITEM_WORK_GROUP;
        else
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--item-kind '%s': expected item or group", v);
    } else if (strcmp(flag, "--options") == 0) {
        if (vlen > NS_MAX_OPTIONS)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--options: %zu bytes, over the %d-byte cap", vlen,
                          NS_MAX_OPTIONS);
        memcpy(job->options, v, vlen + 1);
    } else { /* --work */
        if (!s_u64(v, &job->work_estimate))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "--work '%s': not a number of flops", v);
    }
    if (rc != NS_OK)
        return rc;
    *i += 2;
    return 1;
}
