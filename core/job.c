/* job.c - the job descriptor: validation, msgpack form, id.
 *
 * Everything here treats the descriptor as hostile: it arrives from the
 * network (ns_job_read) or from a user's command line (cli/jobflags.c),
 * and it decides how much memory a provider allocates and what its OpenCL
 * compiler sees. */
#include "nightshift/job.h"
#include "nightshift/hash.h"
#include "nightshift/mp.h"

#include <assert.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_N_FIELDS 14       /* elements of the encoded descriptor */
#define S_N_FIELDS_SHARD 17 /* ... of a shard's (version 2) */
#define S_N_FIELDS_PIPE 15  /* ... of a pipeline's (version 3) */
#define S_N_STEP_FIELDS 4   /* a step: entry, global, local, args */
#define S_TAG_F32 0xca      /* msgpack float 32 */
#define S_TAG_F64 0xcb      /* msgpack float 64 */

/* ---- small helpers ------------------------------------------------------ */

__attribute__((format(printf, 4, 5))) static int
s_fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *ns_arg_kind_name(uint8_t kind)
{
    switch (kind) {
    case NS_ARG_IN:
        return "in";
    case NS_ARG_OUT:
        return "out";
    case NS_ARG_U32:
        return "u32";
    case NS_ARG_I32:
        return "i32";
    case NS_ARG_U64:
        return "u64";
    case NS_ARG_I64:
        return "i64";
    case NS_ARG_F32:
        return "f32";
    case NS_ARG_F64:
        return "f64";
    case NS_ARG_LOCAL:
        return "local";
    case NS_ARG_BUF:
        return "buf";
    default:
        return "?";
    }
}

/* a * b without wrapping; false on overflow. */
static bool s_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b != 0 && a > UINT64_MAX / b)
        return false;
    *out = a * b;
    return true;
}

static bool s_is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool s_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool s_is_ident_char(char c)
{
    return s_is_ident_start(c) || s_is_digit(c);
}

/* A C identifier of exactly n bytes. */
static bool s_is_ident(const char *s, size_t n)
{
    if (n == 0 || !s_is_ident_start(s[0]))
        return false;
    for (size_t k = 1; k < n; k++)
        if (!s_is_ident_char(s[k]))
            return false;
    return true;
}

bool ns_job_builtin_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t k = 0; k < n; k++)
        if (!((s[k] >= 'a' && s[k] <= 'z') || s_is_digit(s[k]) || s[k] == '_'))
            return false;
    return true;
}

bool ns_job_entry_ok(const char *s, size_t n)
{
    return s_is_ident(s, n);
}

/* The text itself when every byte is printable ASCII, for error lines. */
static const char *s_show(const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (s[k] < 0x20 || s[k] > 0x7e)
            return "(unprintable)";
    return s;
}

static bool s_all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t k = 0; k < n; k++)
        acc |= p[k];
    return acc == 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

void ns_job_init(ns_job_t *job)
{
    memset(job, 0, sizeof *job);
}

void ns_job_release(ns_job_t *job)
{
    free(job->source);
    free(job->steps);
    ns_job_init(job);
}

int ns_job_copy(ns_job_t *dst, const ns_job_t *src)
{
    ns_job_release(dst);
    *dst = *src;
    dst->source = NULL;
    dst->steps = NULL;
    if (src->source_len) {
        dst->source = malloc(src->source_len);
        if (!dst->source)
            goto nomem;
        memcpy(dst->source, src->source, src->source_len);
    }
    if (src->n_steps) {
        dst->steps = malloc(src->n_steps * sizeof *dst->steps);
        if (!dst->steps)
            goto nomem;
        memcpy(dst->steps, src->steps, src->n_steps * sizeof *dst->steps);
    }
    return NS_OK;
nomem:
    free(dst->source);
    ns_job_init(dst);
    return NS_ERR_NOMEM;
}

int ns_job_set_source(ns_job_t *job, const void *src, size_t len)
{
    assert(src != NULL || len == 0);
    if (len == 0)
        return NS_ERR_INVAL;
    if (len > NS_MAX_SOURCE)
        return NS_ERR_TOOBIG;
    uint8_t *copy = malloc(len);
    if (!copy)
        return NS_ERR_NOMEM;
    memcpy(copy, src, len);
    free(job->source);
    job->source = copy;
    job->source_len = len;
    ns_hash(job->source_hash, copy, len);
    return NS_OK;
}

/* ---- validation --------------------------------------------------------- */

static int s_check_kernel(const ns_job_t *job, char *err, size_t errlen)
{
    size_t blen = strnlen(job->builtin, sizeof job->builtin);
    if (blen == sizeof job->builtin)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "builtin: name longer than %d bytes", NS_MAX_BUILTIN);
    bool has_builtin = blen > 0;
    bool has_source = job->source != NULL || job->source_len > 0;
    if (has_builtin && has_source)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "kernel: both builtin '%s' and source given; exactly "
                      "one",
                      s_show(job->builtin, blen));
    if (!has_builtin && !has_source)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "kernel: none given (source or builtin)");
    if (has_builtin) {
        if (!ns_job_builtin_ok(job->builtin, blen))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "builtin '%s': name must be [a-z0-9_]+",
                          s_show(job->builtin, blen));
        if (s_all_zero(job->source_hash, NS_HASH_BYTES))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "source_hash: not set for builtin '%s' (the hash "
                          "of its embedded source)",
                          job->builtin);
        return NS_OK;
    }
    if (job->source_len == 0)
        return s_fail(NS_ERR_INVAL, err, errlen, "source: empty");
    if (!job->source)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "source: NULL with source_len %zu", job->source_len);
    if (job->source_len > NS_MAX_SOURCE)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "source: %zu bytes, over the %d-byte cap",
                      job->source_len, NS_MAX_SOURCE);
    const uint8_t *nul = memchr(job->source, 0, job->source_len);
    if (nul)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "source: NUL byte at offset %zu",
                      (size_t)(nul - job->source));
    ns_hash_t h;
    ns_hash(h, job->source, job->source_len);
    if (sodium_memcmp(h, job->source_hash, NS_HASH_BYTES) != 0)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "source_hash: does not match the source");
    return NS_OK;
}

static int s_check_entry(const ns_job_t *job, char *err, size_t errlen)
{
    size_t n = strnlen(job->entry, sizeof job->entry);
    if (n == sizeof job->entry)
        return s_fail(NS_ERR_TOOBIG, err, errlen, "entry: longer than %d bytes",
                      NS_MAX_ENTRY);
    if (n == 0)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "entry: missing (the kernel function to run)");
    if (!ns_job_entry_ok(job->entry, n))
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "entry '%s': not a C identifier", s_show(job->entry, n));
    return NS_OK;
}

static int s_check_det(const ns_job_t *job, char *err, size_t errlen)
{
    double tol = job->tol;
    switch (job->det) {
    case NS_DET_EXACT:
        if (!(tol == 0 && !signbit(tol)))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "tol = %g: must be 0 for an exact job", tol);
        break;
    case NS_DET_ULP:
        /* range first, so that the cast below is defined */
        if (!(tol >= 1 && tol <= NS_MAX_ULP && tol == (double)(uint32_t)tol))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "tol = %g: ulp needs an integer 1..%u", tol,
                          NS_MAX_ULP);
        break;
    case NS_DET_ABS:
        if (!(isfinite(tol) && tol > 0))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "tol = %g: abs needs a finite value > 0", tol);
        break;
    case NS_DET_REL:
        if (!(tol > 0 && tol < 1))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "tol = %g: rel needs a value in (0, 1)", tol);
        break;
    default:
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "det = %u: unknown class (0 exact, 1 ulp, 2 abs, 3 rel)",
                      job->det);
    }
    return NS_OK;
}

/* -D NAME[=VALUE]: NAME an identifier not starting with "__" (reserved for
 * the implementation: __FAST_RELAXED_MATH__ and friends), VALUE a plain
 * token [-+]?[A-Za-z0-9_.]+ (no quotes, parentheses or spaces). */
static int s_check_define(const char *t, size_t n, char *err, size_t errlen)
{
    size_t name_len = 0;
    while (name_len < n && t[name_len] != '=')
        name_len++;
    if (!s_is_ident(t, name_len))
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "options: -D '%.*s': the name must be an identifier",
                      (int)n, t);
    if (name_len >= 2 && t[0] == '_' && t[1] == '_')
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "options: -D '%.*s': names starting with __ are "
                      "reserved",
                      (int)n, t);
    if (name_len == n)
        return NS_OK;
    const char *v = t + name_len + 1;
    size_t vn = n - name_len - 1;
    size_t k = 0;
    if (k < vn && (v[k] == '-' || v[k] == '+'))
        k++;
    if (k == vn)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "options: -D '%.*s': empty value", (int)n, t);
    for (; k < vn; k++)
        if (!(s_is_ident_char(v[k]) || v[k] == '.'))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "options: -D '%.*s': the value must be "
                          "[-+]?[A-Za-z0-9_.]+",
                          (int)n, t);
    return NS_OK;
}

static bool s_token_is(const char *t, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(t, word, n) == 0;
}

static int s_check_options(const ns_job_t *job, char *err, size_t errlen)
{
    static const char *const safe[] = {
        "-cl-std=CL1.2",
        "-cl-std=CL2.0",
        "-cl-std=CL3.0",
        "-cl-opt-disable",
        "-w",
        "-Werror",
        NULL,
    };
    /* these let the compiler change float results */
    static const char *const inexact[] = {
        "-cl-mad-enable",
        "-cl-no-signed-zeros",
        "-cl-finite-math-only",
        "-cl-fast-relaxed-math",
        "-cl-unsafe-math-optimizations",
        NULL,
    };
    const char *s = job->options;
    size_t len = strnlen(s, sizeof job->options);
    if (len == sizeof job->options)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "options: longer than %d bytes", NS_MAX_OPTIONS);
    for (size_t k = 0; k < len; k++)
        if (s[k] < 0x20 || s[k] > 0x7e)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "options: byte %zu is not printable ASCII", k);
    size_t pos = 0;
    while (pos < len) {
        if (s[pos] == ' ') {
            pos++;
            continue;
        }
        const char *t = s + pos;
        size_t n = 0;
        while (pos + n < len && t[n] != ' ')
            n++;
        pos += n;
        if (s_token_is(t, n, "-D")) {
            while (pos < len && s[pos] == ' ')
                pos++;
            const char *d = s + pos;
            size_t dn = 0;
            while (pos + dn < len && d[dn] != ' ')
                dn++;
            pos += dn;
            if (dn == 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "options: -D needs NAME[=VALUE]");
            int rc = s_check_define(d, dn, err, errlen);
            if (rc != NS_OK)
                return rc;
            continue;
        }
        if (n > 2 && t[0] == '-' && t[1] == 'D') {
            int rc = s_check_define(t + 2, n - 2, err, errlen);
            if (rc != NS_OK)
                return rc;
            continue;
        }
        bool ok = false;
        for (size_t w = 0; safe[w] && !ok; w++)
            ok = s_token_is(t, n, safe[w]);
        for (size_t w = 0; inexact[w] && !ok; w++) {
            if (!s_token_is(t, n, inexact[w]))
                continue;
            if (job->det == NS_DET_EXACT)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "options: %s changes float results; not "
                              "allowed for an exact job",
                              inexact[w]);
            ok = true;
        }
        if (!ok)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "options: '%.*s' is not on the allow-list", (int)n,
                          t);
    }
    return NS_OK;
}

/* Dims, global and local sizes, item kind; *n_units on success: the
 * work-groups when the job has a local size, else the work-items. */
static int s_check_ndrange(const ns_job_t *job, uint64_t *n_units, char *err,
                           size_t errlen)
{
    if (job->dims < 1 || job->dims > 3)
        return s_fail(NS_ERR_INVAL, err, errlen, "dims = %u: must be 1..3",
                      job->dims);
    uint64_t total = 1;
    uint32_t n_local = 0;
    for (uint32_t d = 0; d < 3; d++) {
        unsigned long long g = job->global[d], l = job->local[d];
        if (d >= job->dims) {
            if (g != 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "global[%u] = %llu: must be 0 beyond dims = %u",
                              d, g, job->dims);
            if (l != 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "local[%u] = %llu: must be 0 beyond dims = %u", d,
                              l, job->dims);
            continue;
        }
        if (g == 0)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "global[%u] = 0: must be >= 1", d);
        if (!s_mul(total, g, &total) || total > NS_MAX_WORK_ITEMS)
            return s_fail(NS_ERR_TOOBIG, err, errlen,
                          "global: more than %llu work-items in all (the "
                          "cap)",
                          (unsigned long long)NS_MAX_WORK_ITEMS);
        if (l != 0)
            n_local++;
    }
    uint64_t groups = 1, group_size = 1;
    if (n_local != 0 && n_local != job->dims) {
        for (uint32_t d = 0; d < job->dims; d++)
            if (job->local[d] == 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "local[%u] = 0: give every dimension or none", d);
    }
    for (uint32_t d = 0; d < job->dims && n_local; d++) {
        unsigned long long g = job->global[d], l = job->local[d];
        if (g % l != 0)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "local[%u] = %llu does not divide global[%u] = %llu",
                          d, l, d, g);
        /* l <= g <= 2^32 here, so neither product can wrap */
        group_size *= l;
        groups *= g / l;
        if (group_size > NS_MAX_LOCAL_ITEMS)
            return s_fail(NS_ERR_TOOBIG, err, errlen,
                          "local: more than %d work-items per group (the "
                          "cap)",
                          NS_MAX_LOCAL_ITEMS);
    }
    if (job->item_kind != NS_ITEM_WORK_ITEM &&
        job->item_kind != NS_ITEM_WORK_GROUP)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "item_kind = %u: must be 0 (item) or 1 (group)",
                      job->item_kind);
    if (job->item_kind == NS_ITEM_WORK_GROUP && n_local == 0)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "item_kind = group: needs local sizes");
    *n_units = n_local ? groups : total;
    return NS_OK;
}

static int s_check_args(const ns_job_t *job, char *err, size_t errlen)
{
    if (job->n_args == 0)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "args: none (at least one out buffer is needed)");
    if (job->n_args > NS_MAX_ARGS)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "n_args = %u: over the cap of %d", job->n_args,
                      NS_MAX_ARGS);
    uint64_t buffers = 0;
    bool has_out = false;
    for (uint32_t k = 0; k < job->n_args; k++) {
        const ns_arg_t *a = &job->args[k];
        unsigned long long size = a->size;
        switch (a->kind) {
        case NS_ARG_IN:
            if (size == 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "arg %u (in): size 0: must be >= 1", k);
            if (size > NS_MAX_BUFFER)
                return s_fail(NS_ERR_TOOBIG, err, errlen,
                              "arg %u (in): size %llu, over the %llu-byte "
                              "buffer cap",
                              k, size, (unsigned long long)NS_MAX_BUFFER);
            buffers += size;
            break;
        case NS_ARG_OUT:
            /* item_bytes is kept for the wire format; what a unit owns is
             * what it writes (docs/PROTOCOL.md, "Units"), not a slice */
            if (size == 0)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "arg %u (out): size 0: must be >= 1", k);
            if (size > NS_MAX_BUFFER)
                return s_fail(NS_ERR_TOOBIG, err, errlen,
                              "arg %u (out): size %llu, over the %llu-byte "
                              "buffer cap",
                              k, size, (unsigned long long)NS_MAX_BUFFER);
            if (a->item_bytes > NS_MAX_ITEM_BYTES)
                return s_fail(NS_ERR_TOOBIG, err, errlen,
                              "arg %u (out): item_bytes %u, over the cap of "
                              "%d",
                              k, a->item_bytes, NS_MAX_ITEM_BYTES);
            buffers += size;
            has_out = true;
            break;
        case NS_ARG_LOCAL:
            if (size == 0 || size > NS_MAX_LOCAL_BYTES)
                return s_fail(size ? NS_ERR_TOOBIG : NS_ERR_INVAL, err, errlen,
                              "arg %u (local): size %llu: must be 1..%d", k,
                              size, NS_MAX_LOCAL_BYTES);
            break;
        case NS_ARG_U32:
        case NS_ARG_I32:
        case NS_ARG_U64:
        case NS_ARG_I64:
        case NS_ARG_F32:
        case NS_ARG_F64:
            break; /* any value is a valid scalar */
        case NS_ARG_BUF:
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "arg %u: a buffer reference outside a pipeline "
                          "step",
                          k);
        default:
            return s_fail(NS_ERR_INVAL, err, errlen, "arg %u: kind %u unknown",
                          k, a->kind);
        }
    }
    /* each buffer <= 4 GiB and at most 32 of them: the sums cannot wrap */
    if (!has_out)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "args: no out buffer (at least one is needed)");
    if (buffers > NS_MAX_JOB_BYTES)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "args: in and out buffers total %llu bytes, over the "
                      "%llu-byte cap",
                      (unsigned long long)buffers,
                      (unsigned long long)NS_MAX_JOB_BYTES);
    return NS_OK;
}

/* Units along dimension d of the grid; the NDRange is valid. */
static uint64_t s_extent(const ns_job_t *job, uint32_t d)
{
    if (d >= job->dims)
        return 1;
    return job->local[d] ? job->global[d] / job->local[d] : job->global[d];
}

/* Rows: units along the shard dimension. */
static uint64_t s_rows(const ns_job_t *job)
{
    return s_extent(job, job->shard_dim);
}

/* Units before dimension d in the numbering (x fastest). */
static uint64_t s_stride(const ns_job_t *job, uint32_t d)
{
    uint64_t st = 1;
    for (uint32_t e = 0; e < d; e++)
        st *= s_extent(job, e);
    return st;
}

static int s_check_shard(const ns_job_t *job, char *err, size_t errlen)
{
    if (job->shard_rows == 0) {
        if (job->shard_first != 0 || job->shard_dim != 0)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "shard_first = %llu, shard_dim = %u without "
                          "shard_rows",
                          (unsigned long long)job->shard_first, job->shard_dim);
        return NS_OK;
    }
    if (job->shard_dim >= job->dims)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "shard_dim = %u: must be below dims = %u", job->shard_dim,
                      job->dims);
    uint64_t rows = s_rows(job);
    if (job->shard_first >= rows || job->shard_rows > rows - job->shard_first)
        return s_fail(
            NS_ERR_INVAL, err, errlen,
            "shard rows %llu..%llu: the job has %llu rows",
            (unsigned long long)job->shard_first,
            (unsigned long long)(job->shard_first + job->shard_rows - 1),
            (unsigned long long)rows);
    return NS_OK;
}

/* ---- pipelines ---------------------------------------------------------- */

uint32_t ns_job_steps(const ns_job_t *job)
{
    return job->n_steps ? job->n_steps : 1;
}

uint32_t ns_job_writer(const ns_job_t *job, uint32_t b)
{
    for (uint32_t s = 0; s < job->n_steps; s++)
        for (uint32_t i = 0; i < job->steps[s].n_args; i++)
            if (job->steps[s].args[i].kind == NS_ARG_BUF &&
                job->steps[s].args[i].v.u32 == b)
                return s;
    return 0;
}

/* The writer of every buffer (NS_JOB_NO_BUF for one no step names), in
 * one pass over the steps. */
static void s_writers(const ns_job_t *job, uint32_t w[NS_MAX_ARGS])
{
    for (uint32_t b = 0; b < NS_MAX_ARGS; b++)
        w[b] = NS_JOB_NO_BUF;
    for (uint32_t s = job->n_steps; s-- > 0;)
        for (uint32_t i = 0; i < job->steps[s].n_args && i < NS_MAX_ARGS; i++)
            if (job->steps[s].args[i].kind == NS_ARG_BUF &&
                job->steps[s].args[i].v.u32 < NS_MAX_ARGS)
                w[job->steps[s].args[i].v.u32] = s;
}

void ns_job_step_view(const ns_job_t *job, uint32_t s, ns_job_t *view,
                      uint32_t map[NS_MAX_ARGS])
{
    *view = *job;
    view->steps = NULL;
    view->n_steps = 0;
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        map[i] = job->n_steps == 0 && i < job->n_args &&
                         (job->args[i].kind == NS_ARG_IN ||
                          job->args[i].kind == NS_ARG_OUT)
                     ? i
                     : NS_JOB_NO_BUF;
    if (job->n_steps == 0)
        return;
    assert(s < job->n_steps);
    const ns_step_t *st = &job->steps[s];
    memcpy(view->entry, st->entry, sizeof view->entry);
    view->dims = st->dims;
    memcpy(view->global, st->global, sizeof view->global);
    memcpy(view->local, st->local, sizeof view->local);
    view->item_kind = NS_ITEM_WORK_ITEM;
    view->work_estimate = 0;
    view->n_args = st->n_args;
    memset(view->args, 0, sizeof view->args);
    uint32_t writer[NS_MAX_ARGS];
    s_writers(job, writer);
    for (uint32_t i = 0; i < st->n_args && i < NS_MAX_ARGS; i++) {
        const ns_arg_t *a = &st->args[i];
        if (a->kind != NS_ARG_BUF) {
            view->args[i] = *a;
            continue;
        }
        uint32_t b = a->v.u32;
        if (b >= job->n_args) { /* not valid: left for validation */
            view->args[i] = *a;
            continue;
        }
        map[i] = b;
        view->args[i] = job->args[b];
        if (job->args[b].kind == NS_ARG_OUT && writer[b] != s) {
            /* written by an earlier step: read here, never hashed */
            view->args[i].kind = NS_ARG_IN;
            view->args[i].item_bytes = 0;
            memset(view->args[i].hash, 0, NS_HASH_BYTES);
        }
    }
}

static int s_check_ndrange(const ns_job_t *job, uint64_t *n_units, char *err,
                           size_t errlen);
static int s_check_args(const ns_job_t *job, char *err, size_t errlen);
static int s_check_entry(const ns_job_t *job, char *err, size_t errlen);

/* The rules of "Pipelines" (job.h); the kernel, det and options are
 * checked by the caller. *n_units gets the sum over the steps. */
static int s_check_pipeline(const ns_job_t *job, uint64_t *n_units, char *err,
                            size_t errlen)
{
    if (job->n_steps > NS_MAX_STEPS)
        return s_fail(NS_ERR_TOOBIG, err, errlen,
                      "steps: %u, over the cap of %d", job->n_steps,
                      NS_MAX_STEPS);
    if (!job->steps)
        return s_fail(NS_ERR_INVAL, err, errlen, "steps: NULL");
    if (job->entry[0] || job->dims || job->local[0] || job->global[0] ||
        job->shard_rows || job->shard_first || job->shard_dim || job->item_kind)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "pipeline: entry, global, local, shard and item_kind "
                      "belong to its steps");
    int rc = s_check_args(job, err, errlen);
    if (rc != NS_OK)
        return rc;
    for (uint32_t k = 0; k < job->n_args; k++)
        if (job->args[k].kind != NS_ARG_IN && job->args[k].kind != NS_ARG_OUT)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "buffer %u: a pipeline's buffers are in or out (its "
                          "steps take the scalars)",
                          k);
    uint32_t named = 0; /* bit k: buffer k named by some step */
    uint64_t total = 0;
    for (uint32_t s = 0; s < job->n_steps; s++) {
        const ns_step_t *st = &job->steps[s];
        uint32_t here = 0;
        if (st->n_args > NS_MAX_ARGS)
            return s_fail(NS_ERR_TOOBIG, err, errlen,
                          "step %u: %u args, over the cap of %d", s, st->n_args,
                          NS_MAX_ARGS);
        for (uint32_t i = 0; i < st->n_args; i++) {
            const ns_arg_t *a = &st->args[i];
            if (a->kind == NS_ARG_IN || a->kind == NS_ARG_OUT)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "step %u arg %u: a buffer is named by its "
                              "index (buf)",
                              s, i);
            if (a->kind != NS_ARG_BUF)
                continue;
            if (a->v.u32 >= job->n_args)
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "step %u arg %u: buffer %u: the job has %u", s, i,
                              a->v.u32, job->n_args);
            if (here & (UINT32_C(1) << a->v.u32))
                return s_fail(NS_ERR_INVAL, err, errlen,
                              "step %u arg %u: buffer %u named twice in one "
                              "step",
                              s, i, a->v.u32);
            here |= UINT32_C(1) << a->v.u32;
        }
        named |= here;
        ns_job_t view;
        uint32_t map[NS_MAX_ARGS];
        ns_job_step_view(job, s, &view, map);
        uint64_t n = 0;
        char why[200];
        rc = s_check_entry(&view, why, sizeof why);
        if (rc == NS_OK)
            rc = s_check_ndrange(&view, &n, why, sizeof why);
        if (rc == NS_OK)
            rc = s_check_args(&view, why, sizeof why);
        if (rc != NS_OK)
            return s_fail(rc, err, errlen, "step %u: %s", s, why);
        total += n; /* each <= 2^32, at most 16 */
    }
    for (uint32_t k = 0; k < job->n_args; k++)
        if (!(named & (UINT32_C(1) << k)))
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "buffer %u: no step names it", k);
    *n_units = total;
    return NS_OK;
}

uint64_t ns_job_step_units(const ns_job_t *job, uint32_t s)
{
    if (job->n_steps == 0)
        return ns_job_units(job);
    ns_job_t view;
    uint32_t map[NS_MAX_ARGS];
    uint64_t n = 0;
    ns_job_step_view(job, s, &view, map);
    return s_check_ndrange(&view, &n, NULL, 0) == NS_OK ? n : 0;
}

uint64_t ns_job_step_first(const ns_job_t *job, uint32_t s)
{
    uint64_t first = 0;
    for (uint32_t t = 0; t < s && t < job->n_steps; t++)
        first += ns_job_step_units(job, t);
    return first;
}

uint32_t ns_job_unit_step(const ns_job_t *job, uint64_t u)
{
    for (uint32_t s = 0; s + 1 < job->n_steps; s++) {
        uint64_t n = ns_job_step_units(job, s);
        if (u < n)
            return s;
        u -= n;
    }
    return job->n_steps ? job->n_steps - 1 : 0;
}

int ns_job_validate(const ns_job_t *job, char *err, size_t errlen)
{
    uint64_t n_units = 0;
    if (job->n_steps) {
        int rc = s_check_kernel(job, err, errlen);
        if (rc == NS_OK)
            rc = s_check_det(job, err, errlen);
        if (rc == NS_OK)
            rc = s_check_options(job, err, errlen);
        if (rc == NS_OK)
            rc = s_check_pipeline(job, &n_units, err, errlen);
        if (rc == NS_OK && job->checks > NS_MAX_CHECKS)
            rc = s_fail(NS_ERR_TOOBIG, err, errlen,
                        "checks = %u: over the cap of %d", job->checks,
                        NS_MAX_CHECKS);
        if (rc == NS_OK && err && errlen)
            err[0] = '\0';
        return rc;
    }
    int rc = s_check_kernel(job, err, errlen);
    if (rc == NS_OK)
        rc = s_check_entry(job, err, errlen);
    if (rc == NS_OK)
        rc = s_check_det(job, err, errlen);
    if (rc == NS_OK)
        rc = s_check_options(job, err, errlen);
    if (rc == NS_OK)
        rc = s_check_ndrange(job, &n_units, err, errlen);
    if (rc == NS_OK)
        rc = s_check_args(job, err, errlen);
    if (rc == NS_OK)
        rc = s_check_shard(job, err, errlen);
    if (rc == NS_OK && job->checks > NS_MAX_CHECKS)
        rc = s_fail(NS_ERR_TOOBIG, err, errlen,
                    "checks = %u: over the cap of %d", job->checks,
                    NS_MAX_CHECKS);
    if (rc == NS_OK && err && errlen)
        err[0] = '\0';
    return rc;
}

uint64_t ns_job_units(const ns_job_t *job)
{
    uint64_t n = 0;
    if (job->n_steps) {
        if (job->n_steps > NS_MAX_STEPS || !job->steps)
            return 0;
        for (uint32_t s = 0; s < job->n_steps; s++) {
            uint64_t k = ns_job_step_units(job, s);
            if (k == 0)
                return 0;
            n += k;
        }
        return n;
    }
    return s_check_ndrange(job, &n, NULL, 0) == NS_OK ? n : 0;
}

uint64_t ns_job_rows(const ns_job_t *job)
{
    return job->n_steps == 0 && ns_job_units(job) ? s_rows(job) : 0;
}

uint64_t ns_job_shard_units(const ns_job_t *job)
{
    uint64_t n = ns_job_units(job);
    if (n == 0 || job->shard_rows == 0)
        return n;
    return n / s_rows(job) * job->shard_rows;
}

uint64_t ns_job_shard_unit(const ns_job_t *job, uint64_t i)
{
    if (job->shard_rows == 0)
        return i;
    /* i numbers the shard's sub-grid (x fastest): split it around the
     * shard dimension, move the row, join again in the whole grid */
    uint64_t st = s_stride(job, job->shard_dim);
    uint64_t below = i % st, rest = i / st;
    uint64_t row = rest % job->shard_rows, above = rest / job->shard_rows;
    return (above * s_rows(job) + job->shard_first + row) * st + below;
}

uint64_t ns_job_unit_row(const ns_job_t *job, uint64_t u)
{
    return u / s_stride(job, job->shard_dim) % s_rows(job);
}

bool ns_job_unit_in_shard(const ns_job_t *job, uint64_t u)
{
    if (job->n_steps)
        return u < ns_job_units(job);
    if (ns_job_rows(job) == 0 || u >= ns_job_units(job))
        return false;
    if (job->shard_rows == 0)
        return true;
    uint64_t row = ns_job_unit_row(job, u);
    return row >= job->shard_first && row - job->shard_first < job->shard_rows;
}

int ns_job_shardable(const ns_job_t *job, uint32_t n, uint32_t dim, char *err,
                     size_t errlen)
{
    if (job->shard_rows)
        return s_fail(NS_ERR_INVAL, err, errlen, "the job is a shard already");
    if (job->n_steps)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "a pipeline of %u steps runs on one provider: it "
                      "cannot be cut into shards",
                      job->n_steps);
    if (ns_job_units(job) == 0 || dim >= job->dims)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "no dimension %u to cut into shards", dim);
    uint64_t rows = s_extent(job, dim);
    if (n < 1 || n > NS_MAX_SHARDS)
        return s_fail(NS_ERR_TOOBIG, err, errlen, "shards = %u: must be 1..%d",
                      n, NS_MAX_SHARDS);
    if (n > rows)
        return s_fail(NS_ERR_INVAL, err, errlen,
                      "shards = %u: more shards than rows (global[%u]%s = "
                      "%llu rows)",
                      n, dim, job->local[dim] ? " / local" : "",
                      (unsigned long long)rows);
    for (uint32_t k = 0; k < job->n_args; k++)
        if (job->args[k].kind == NS_ARG_OUT && job->args[k].size % rows)
            return s_fail(NS_ERR_INVAL, err, errlen,
                          "arg %u (out): %llu bytes is not a multiple of the "
                          "%llu rows along global[%u], so it cannot be cut "
                          "into shards",
                          k, (unsigned long long)job->args[k].size,
                          (unsigned long long)rows, dim);
    if (err && errlen)
        err[0] = '\0';
    return NS_OK;
}

int ns_job_make_shard(ns_job_t *dst, const ns_job_t *src, uint32_t i,
                      uint32_t n, uint32_t dim)
{
    uint64_t rows = s_extent(src, dim);
    assert(n >= 1 && i < n && rows >= n && dim < src->dims && !src->n_steps);
    if (src->n_steps) /* NDEBUG: never share (and double free) steps */
        return NS_ERR_INVAL;
    ns_job_release(dst);
    *dst = *src;
    dst->source = NULL;
    dst->source_len = 0;
    if (src->source) {
        int rc = ns_job_set_source(dst, src->source, src->source_len);
        if (rc != NS_OK) {
            ns_job_init(dst);
            return rc;
        }
        memcpy(dst->source_hash, src->source_hash, NS_HASH_BYTES);
    }
    /* rows * (i + 1) <= 2^32 * 64: no overflow */
    dst->shard_dim = dim;
    dst->shard_first = rows * i / n;
    dst->shard_rows = rows * (i + 1) / n - dst->shard_first;
    /* the estimate follows the share of the work */
    dst->work_estimate = (uint64_t)((double)src->work_estimate *
                                    (double)dst->shard_rows / (double)rows);
    return NS_OK;
}

uint64_t ns_job_items(const ns_job_t *job)
{
    return ns_job_units(job);
}

uint64_t ns_job_work_items(const ns_job_t *job)
{
    if (ns_job_units(job) == 0)
        return 0; /* validates dims and overflow */
    if (job->n_steps) {
        uint64_t sum = 0;
        for (uint32_t s = 0; s < job->n_steps; s++) {
            uint64_t n = 1;
            for (uint32_t d = 0; d < job->steps[s].dims; d++)
                n *= job->steps[s].global[d];
            sum += n;
        }
        return sum;
    }
    uint64_t n = 1;
    for (uint32_t d = 0; d < job->dims; d++)
        n *= job->global[d];
    return n;
}

uint64_t ns_job_out_bytes(const ns_job_t *job)
{
    uint64_t sum = 0;
    uint32_t n = job->n_args < NS_MAX_ARGS ? job->n_args : NS_MAX_ARGS;
    for (uint32_t k = 0; k < n; k++)
        if (job->args[k].kind == NS_ARG_OUT)
            sum += job->args[k].size;
    return sum;
}

uint64_t ns_job_item_bytes(const ns_job_t *job)
{
    uint64_t sum = 0;
    uint32_t n = job->n_args < NS_MAX_ARGS ? job->n_args : NS_MAX_ARGS;
    for (uint32_t k = 0; k < n; k++)
        if (job->args[k].kind == NS_ARG_OUT)
            sum += job->args[k].item_bytes;
    return sum;
}

uint32_t ns_job_checks(const ns_job_t *job)
{
    return job->checks ? job->checks : NS_JOB_DEFAULT_CHECKS;
}

/* ---- msgpack ------------------------------------------------------------ */

/* A str from a fixed char array that may lack its NUL. */
static void s_pack_strn(msgpack_packer *pk, const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    msgpack_pack_str(pk, n);
    if (n)
        msgpack_pack_str_body(pk, s, n);
}

static void s_pack_arg(msgpack_packer *pk, const ns_arg_t *a)
{
    switch (a->kind) {
    case NS_ARG_IN:
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_uint64(pk, a->size);
        ns_mp_bin(pk, a->hash, NS_HASH_BYTES);
        break;
    case NS_ARG_OUT:
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_uint64(pk, a->size);
        msgpack_pack_uint32(pk, a->item_bytes);
        break;
    case NS_ARG_LOCAL:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_uint64(pk, a->size);
        break;
    case NS_ARG_BUF:
    case NS_ARG_U32:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_uint32(pk, a->v.u32);
        break;
    case NS_ARG_I32:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_int32(pk, a->v.i32);
        break;
    case NS_ARG_U64:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_uint64(pk, a->v.u64);
        break;
    case NS_ARG_I64:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_int64(pk, a->v.i64);
        break;
    case NS_ARG_F32:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_float(pk, a->v.f32);
        break;
    case NS_ARG_F64:
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint8(pk, a->kind);
        msgpack_pack_double(pk, a->v.f64);
        break;
    default: /* not a valid job; written so that read rejects it */
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint8(pk, a->kind);
        break;
    }
}

/* global and local as the descriptor writes them */
static void s_pack_ndrange(msgpack_packer *pk, uint32_t dims,
                           const uint64_t *global, const uint64_t *local)
{
    bool has_local = false;
    for (uint32_t d = 0; d < dims; d++)
        has_local = has_local || local[d] != 0;
    msgpack_pack_array(pk, dims);
    for (uint32_t d = 0; d < dims; d++)
        msgpack_pack_uint64(pk, global[d]);
    msgpack_pack_array(pk, has_local ? dims : 0);
    for (uint32_t d = 0; d < dims && has_local; d++)
        msgpack_pack_uint64(pk, local[d]);
}

void ns_job_pack(msgpack_packer *pk, const ns_job_t *job)
{
    assert(job->dims <= 3 && job->n_args <= NS_MAX_ARGS);
    assert(job->n_steps <= NS_MAX_STEPS);
    bool shard = job->shard_rows != 0, pipe = job->n_steps != 0;
    msgpack_pack_array(pk, pipe    ? S_N_FIELDS_PIPE
                           : shard ? S_N_FIELDS_SHARD
                                   : S_N_FIELDS);
    msgpack_pack_uint8(pk, pipe    ? NS_JOB_VERSION_PIPELINE
                           : shard ? NS_JOB_VERSION_SHARD
                                   : NS_JOB_VERSION);
    s_pack_strn(pk, job->builtin, sizeof job->builtin);
    msgpack_pack_bin(pk, job->source_len);
    if (job->source_len)
        msgpack_pack_bin_body(pk, job->source, job->source_len);
    ns_mp_bin(pk, job->source_hash, NS_HASH_BYTES);
    s_pack_strn(pk, job->entry, sizeof job->entry);
    s_pack_strn(pk, job->options, sizeof job->options);
    s_pack_ndrange(pk, job->dims, job->global, job->local);
    msgpack_pack_array(pk, job->n_args);
    for (uint32_t k = 0; k < job->n_args; k++)
        s_pack_arg(pk, &job->args[k]);
    msgpack_pack_uint8(pk, job->det);
    msgpack_pack_double(pk, job->tol);
    msgpack_pack_uint8(pk, job->item_kind);
    msgpack_pack_uint32(pk, job->checks);
    msgpack_pack_uint64(pk, job->work_estimate);
    if (shard) {
        msgpack_pack_uint32(pk, job->shard_dim);
        msgpack_pack_uint64(pk, job->shard_first);
        msgpack_pack_uint64(pk, job->shard_rows);
    }
    if (pipe) {
        msgpack_pack_array(pk, job->n_steps);
        for (uint32_t s = 0; s < job->n_steps; s++) {
            const ns_step_t *st = &job->steps[s];
            assert(st->dims <= 3 && st->n_args <= NS_MAX_ARGS);
            msgpack_pack_array(pk, S_N_STEP_FIELDS);
            s_pack_strn(pk, st->entry, sizeof st->entry);
            s_pack_ndrange(pk, st->dims, st->global, st->local);
            msgpack_pack_array(pk, st->n_args);
            for (uint32_t k = 0; k < st->n_args; k++)
                s_pack_arg(pk, &st->args[k]);
        }
    }
}

/* Reading: the field being read, for the error line. */
typedef struct {
    ns_mpr_t *r;
    char what[32];
} s_rd_t;

static void s_at(s_rd_t *c, const char *fmt, unsigned k)
{
    if (c->r->err == NS_OK)
        snprintf(c->what, sizeof c->what, fmt, k);
}

static void s_rd_fail(s_rd_t *c, int err)
{
    if (c->r->err == NS_OK)
        c->r->err = err;
}

/* A float of exactly the given msgpack tag; f32 bits are kept as they are
 * (a detour through double would quiet a signalling NaN). */
static void s_read_float(s_rd_t *c, uint8_t tag, void *out)
{
    ns_mpr_t *r = c->r;
    if (r->err != NS_OK)
        return;
    if (r->left < 1) {
        s_rd_fail(c, NS_ERR_TRUNCATED);
        return;
    }
    if (r->p[0] != tag) {
        s_rd_fail(c, NS_ERR_TYPE);
        return;
    }
    if (tag == S_TAG_F64) {
        (void)ns_mpr_f64(r, out);
        return;
    }
    if (r->left < 5) {
        s_rd_fail(c, NS_ERR_TRUNCATED);
        return;
    }
    uint32_t bits = (uint32_t)r->p[1] << 24 | (uint32_t)r->p[2] << 16 |
                    (uint32_t)r->p[3] << 8 | r->p[4];
    memcpy(out, &bits, sizeof bits);
    r->p += 5;
    r->left -= 5;
}

static void s_read_u8(s_rd_t *c, uint8_t *out)
{
    uint64_t v = 0;
    if (ns_mpr_uint(c->r, &v) != NS_OK)
        return;
    if (v > UINT8_MAX) {
        s_rd_fail(c, NS_ERR_INVAL);
        return;
    }
    *out = (uint8_t)v;
}

static void s_read_arg(s_rd_t *c, ns_arg_t *a)
{
    ns_mpr_t *r = c->r;
    uint32_t n = 0;
    int64_t i = 0;
    /* any count reads, so that a wrong one is a type error like below */
    if (ns_mpr_array(r, &n, UINT32_MAX) != NS_OK)
        return;
    if (n == 0) {
        s_rd_fail(c, NS_ERR_TYPE);
        return;
    }
    s_read_u8(c, &a->kind);
    if (r->err != NS_OK)
        return;
    uint32_t want = a->kind == NS_ARG_IN || a->kind == NS_ARG_OUT ? 3 : 2;
    if (a->kind < NS_ARG_IN || a->kind > NS_ARG_BUF) {
        s_rd_fail(c, NS_ERR_INVAL);
        return;
    }
    if (n != want) {
        s_rd_fail(c, NS_ERR_TYPE);
        return;
    }
    switch (a->kind) {
    case NS_ARG_IN:
        ns_mpr_uint(r, &a->size);
        ns_mpr_bin_exact(r, a->hash, NS_HASH_BYTES);
        break;
    case NS_ARG_OUT:
        ns_mpr_uint(r, &a->size);
        ns_mpr_u32(r, &a->item_bytes);
        break;
    case NS_ARG_LOCAL:
        ns_mpr_uint(r, &a->size);
        break;
    case NS_ARG_BUF:
    case NS_ARG_U32:
        ns_mpr_u32(r, &a->v.u32);
        break;
    case NS_ARG_I32:
        if (ns_mpr_int(r, &i) != NS_OK)
            break;
        if (i < INT32_MIN || i > INT32_MAX) {
            s_rd_fail(c, NS_ERR_INVAL);
            return;
        }
        a->v.i32 = (int32_t)i;
        break;
    case NS_ARG_U64:
        ns_mpr_uint(r, &a->v.u64);
        break;
    case NS_ARG_I64:
        ns_mpr_int(r, &a->v.i64);
        break;
    case NS_ARG_F32:
        s_read_float(c, S_TAG_F32, &a->v.f32);
        break;
    case NS_ARG_F64:
        s_read_float(c, S_TAG_F64, &a->v.f64);
        break;
    }
}

/* global and local: dims entries, local none or dims of them. */
static void s_read_ndrange(s_rd_t *c, uint32_t *dims, uint64_t *global,
                           uint64_t *local)
{
    ns_mpr_t *r = c->r;
    uint32_t n_local = 0;
    s_at(c, "global", 0);
    ns_mpr_array(r, dims, 3);
    for (uint32_t d = 0; d < *dims && r->err == NS_OK; d++)
        ns_mpr_uint(r, &global[d]);
    s_at(c, "local", 0);
    if (ns_mpr_array(r, &n_local, 3) == NS_OK && n_local != 0 &&
        n_local != *dims)
        s_rd_fail(c, NS_ERR_TYPE);
    for (uint32_t d = 0; d < n_local && r->err == NS_OK; d++)
        ns_mpr_uint(r, &local[d]);
}

static void s_read_step(s_rd_t *c, uint32_t s, ns_step_t *st)
{
    ns_mpr_t *r = c->r;
    uint32_t n = 0;
    s_at(c, "steps[%u]", s);
    if (ns_mpr_array(r, &n, 64) == NS_OK && n != S_N_STEP_FIELDS)
        s_rd_fail(c, NS_ERR_TYPE);
    s_at(c, "steps[%u].entry", s);
    ns_mpr_str(r, st->entry, NS_MAX_ENTRY);
    if (r->err != NS_OK)
        return;
    s_read_ndrange(c, &st->dims, st->global, st->local);
    s_at(c, "steps[%u].args", s);
    ns_mpr_array(r, &st->n_args, NS_MAX_ARGS);
    for (uint32_t k = 0; k < st->n_args && r->err == NS_OK; k++) {
        s_at(c, "steps[%u].args", s); /* the step's number says enough */
        s_read_arg(c, &st->args[k]);
    }
}

/* The canonical check: ns_job_pack writes into this and it compares. */
typedef struct {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool differs;
} s_cmp_t;

static int s_cmp_write(void *data, const char *buf, size_t len)
{
    s_cmp_t *c = data;
    if (c->differs || len > c->len - c->pos ||
        (len && memcmp(c->p + c->pos, buf, len) != 0)) {
        c->differs = true;
        return -1;
    }
    c->pos += len;
    return 0;
}

int ns_job_read(ns_mpr_t *r, ns_job_t *job, char *err, size_t errlen)
{
    s_rd_t c = {r, "descriptor"};
    const uint8_t *start = r->p;
    const uint8_t *src = NULL;
    size_t src_len = 0;
    uint32_t n = 0;
    uint64_t version = 0;
    int rc;

    ns_job_release(job);
    if (ns_mpr_array(r, &n, 64) == NS_OK && n == 0)
        s_rd_fail(&c, NS_ERR_TYPE);
    s_at(&c, "version", 0);
    /* the version decides the layout: check it before anything else */
    if (ns_mpr_uint(r, &version) == NS_OK && version != NS_JOB_VERSION &&
        version != NS_JOB_VERSION_SHARD && version != NS_JOB_VERSION_PIPELINE)
        s_rd_fail(&c, NS_ERR_VERSION);
    if (r->err == NS_OK &&
        n != (version == NS_JOB_VERSION         ? S_N_FIELDS
              : version == NS_JOB_VERSION_SHARD ? S_N_FIELDS_SHARD
                                                : S_N_FIELDS_PIPE))
        s_rd_fail(&c, NS_ERR_TYPE);
    s_at(&c, "builtin", 0);
    ns_mpr_str(r, job->builtin, NS_MAX_BUILTIN);
    s_at(&c, "source", 0);
    ns_mpr_bin(r, &src, &src_len, NS_MAX_SOURCE);
    s_at(&c, "source_hash", 0);
    ns_mpr_bin_exact(r, job->source_hash, NS_HASH_BYTES);
    s_at(&c, "entry", 0);
    ns_mpr_str(r, job->entry, NS_MAX_ENTRY);
    s_at(&c, "options", 0);
    ns_mpr_str(r, job->options, NS_MAX_OPTIONS);
    s_read_ndrange(&c, &job->dims, job->global, job->local);
    s_at(&c, "args", 0);
    ns_mpr_array(r, &job->n_args, NS_MAX_ARGS);
    for (uint32_t k = 0; k < job->n_args && r->err == NS_OK; k++) {
        s_at(&c, "args[%u]", k);
        s_read_arg(&c, &job->args[k]);
    }
    s_at(&c, "det", 0);
    s_read_u8(&c, &job->det);
    s_at(&c, "tol", 0);
    s_read_float(&c, S_TAG_F64, &job->tol);
    s_at(&c, "item_kind", 0);
    s_read_u8(&c, &job->item_kind);
    s_at(&c, "checks", 0);
    ns_mpr_u32(r, &job->checks);
    s_at(&c, "work_estimate", 0);
    ns_mpr_uint(r, &job->work_estimate);
    if (version == NS_JOB_VERSION_SHARD && r->err == NS_OK) {
        s_at(&c, "shard_dim", 0);
        ns_mpr_u32(r, &job->shard_dim);
        s_at(&c, "shard_first", 0);
        ns_mpr_uint(r, &job->shard_first);
        s_at(&c, "shard_rows", 0);
        /* version 2 is a shard: rows >= 1 (else the canonical check
         * fails, as version 1 would be written) */
        ns_mpr_uint(r, &job->shard_rows);
    }
    if (version == NS_JOB_VERSION_PIPELINE && r->err == NS_OK) {
        s_at(&c, "steps", 0);
        if (ns_mpr_array(r, &job->n_steps, NS_MAX_STEPS) == NS_OK &&
            job->n_steps == 0)
            s_rd_fail(&c, NS_ERR_INVAL);
        if (r->err == NS_OK) {
            job->steps = calloc(job->n_steps, sizeof *job->steps);
            if (!job->steps)
                s_rd_fail(&c, NS_ERR_NOMEM);
        }
        for (uint32_t s = 0; s < job->n_steps && r->err == NS_OK; s++)
            s_read_step(&c, s, &job->steps[s]);
    }
    if (r->err != NS_OK) {
        rc = s_fail(r->err, err, errlen, "job descriptor: %s: %s", c.what,
                    ns_strerror(r->err));
        goto fail;
    }

    if (src_len) {
        /* a copy, keeping the hash as received for validate to compare */
        job->source = malloc(src_len);
        if (!job->source) {
            rc = s_fail(NS_ERR_NOMEM, err, errlen, "job descriptor: %s",
                        ns_strerror(NS_ERR_NOMEM));
            goto fail;
        }
        memcpy(job->source, src, src_len);
        job->source_len = src_len;
    }
    rc = ns_job_validate(job, err, errlen);
    if (rc != NS_OK)
        goto fail;

    s_cmp_t cmp = {start, (size_t)(r->p - start), 0, false};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &cmp, s_cmp_write);
    ns_job_pack(&pk, job);
    if (cmp.differs || cmp.pos != cmp.len) {
        rc = s_fail(NS_ERR_INVAL, err, errlen,
                    "job descriptor: not in canonical form");
        goto fail;
    }
    return NS_OK;

fail:
    if (r->err == NS_OK)
        r->err = rc;
    ns_job_release(job);
    return rc;
}

static int s_hash_write(void *data, const char *buf, size_t len)
{
    crypto_generichash_update(data, (const unsigned char *)buf, len);
    return 0;
}

int ns_job_id(const ns_job_t *job, ns_hash_t id)
{
    int rc = ns_job_validate(job, NULL, 0);
    if (rc != NS_OK)
        return rc;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)NS_JOB_DOMAIN,
                              sizeof(NS_JOB_DOMAIN) - 1);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &st, s_hash_write);
    ns_job_pack(&pk, job);
    crypto_generichash_final(&st, id, NS_HASH_BYTES);
    return NS_OK;
}

int ns_job_finalize(ns_job_t *job, char *err, size_t errlen)
{
    if (job->n_steps) /* item_bytes stay 0: units differ by step */
        return ns_job_validate(job, err, errlen);
    uint64_t n_units = 0;
    int rc = s_check_ndrange(job, &n_units, err, errlen);
    if (rc != NS_OK)
        return rc;
    /* item_bytes only informs (a unit owns what it writes): filled in
     * when the size divides into units, left 0 otherwise */
    uint32_t n = job->n_args < NS_MAX_ARGS ? job->n_args : NS_MAX_ARGS;
    for (uint32_t k = 0; k < n; k++) {
        ns_arg_t *a = &job->args[k];
        if (a->kind != NS_ARG_OUT || a->item_bytes != 0)
            continue;
        if (a->size != 0 && a->size % n_units == 0 &&
            a->size / n_units <= NS_MAX_ITEM_BYTES)
            a->item_bytes = (uint32_t)(a->size / n_units);
    }
    return ns_job_validate(job, err, errlen);
}
