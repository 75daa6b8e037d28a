/* preflight.c - build the kernel here and check the job's arguments
 * against its signature before anything is posted (preflight.h). */
#include "nightshift/preflight.h"

#include "nightshift/cl.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_LOG_BYTES 4096 /* build log kept for the message */

/* Is text[i..] a ":digits" run? Returns its length (0 if not). */
static size_t s_colon_digits(const char *t)
{
    size_t n = 0;
    if (t[0] != ':' || !isdigit((unsigned char)t[1]))
        return 0;
    n = 1;
    while (isdigit((unsigned char)t[n]))
        n++;
    return n;
}

void ns_build_log_rename(char *text, size_t cap, const char *name)
{
    char *out = malloc(cap);
    if (!out || cap == 0) {
        free(out);
        return;
    }
    size_t o = 0, nlen = strlen(name);
    const char *p = text;
    while (*p && o + 1 < cap) {
        /* a token that starts at a word boundary and ends in
         * ".cl:LINE" or is "<source>:LINE" / "<stdin>:LINE" */
        const char *end = p;
        while (*end && !isspace((unsigned char)*end) && *end != ':' &&
               *end != '\'' && *end != '"')
            end++;
        size_t tok = (size_t)(end - p);
        bool path = (tok >= 3 && memcmp(end - 3, ".cl", 3) == 0) ||
                    (tok == 8 && memcmp(p, "<source>", 8) == 0) ||
                    (tok == 7 && memcmp(p, "<stdin>", 7) == 0);
        if (tok && path && s_colon_digits(end)) {
            for (size_t i = 0; i < nlen && o + 1 < cap; i++)
                out[o++] = name[i];
            p = end;
            continue;
        }
        if (tok == 0)
            tok = 1;
        for (size_t i = 0; i < tok && o + 1 < cap; i++)
            out[o++] = p[i];
        p += tok;
    }
    out[o] = '\0';
    memcpy(text, out, o + 1);
    free(out);
}

/* Scalar kinds: the OpenCL type names that carry them. */
static bool s_scalar_fits(uint8_t kind, const char *type)
{
    static const struct {
        uint8_t kind;
        const char *names[4];
    } map[] = {
        {NS_ARG_U32, {"uint", "unsigned int", "int", NULL}},
        {NS_ARG_I32, {"int", "uint", "unsigned int", NULL}},
        {NS_ARG_U64, {"ulong", "unsigned long", "long", "size_t"}},
        {NS_ARG_I64, {"long", "ulong", "unsigned long", "size_t"}},
        {NS_ARG_F32, {"float", NULL, NULL, NULL}},
        {NS_ARG_F64, {"double", NULL, NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].kind == kind)
            for (int k = 0; k < 4 && map[i].names[k]; k++)
                if (strcmp(type, map[i].names[k]) == 0)
                    return true;
    return false;
}

/* What the kernel's parameter is, for messages: "a float4 (a vector)". */
static const char *s_unsupported(const char *type)
{
    if (strncmp(type, "image", 5) == 0)
        return "an image: images are not supported, pass the pixels in a "
               "buffer";
    if (strcmp(type, "sampler_t") == 0)
        return "a sampler: samplers are not supported";
    if (strncmp(type, "pipe", 4) == 0 || strstr(type, "queue_t") ||
        strstr(type, "event_t"))
        return "a pipe, queue or event: not supported";
    size_t n = strlen(type);
    if (n && isdigit((unsigned char)type[n - 1]) && !strchr(type, '*'))
        return "a vector value: pass vectors in a buffer";
    if (strncmp(type, "struct", 6) == 0 || strncmp(type, "union", 5) == 0)
        return "a struct passed by value: pass it in a buffer";
    return NULL;
}

static int s_check_arg(const ns_job_t *job, cl_kernel k, uint32_t i,
                       const char *src, char *err, size_t errlen)
{
    cl_kernel_arg_address_qualifier aq = 0;
    cl_kernel_arg_type_qualifier tq = 0;
    char type[128] = "", name[128] = "";
    if (clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof aq,
                           &aq, NULL) != CL_SUCCESS ||
        clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof type - 1, type,
                           NULL) != CL_SUCCESS)
        return NS_OK; /* no argument info from this driver: run decides */
    (void)clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq,
                             NULL);
    (void)clGetKernelArgInfo(k, i, CL_KERNEL_ARG_NAME, sizeof name - 1, name,
                             NULL);
    const ns_arg_t *a = &job->args[i];
    const char *kind = ns_arg_kind_name(a->kind);
    const char *why = s_unsupported(type);
    bool ptr = strchr(type, '*') != NULL;
    char what[320] = "";
    if (why) {
        snprintf(what, sizeof what, "is %s", why);
    } else if (a->kind == NS_ARG_IN || a->kind == NS_ARG_OUT) {
        if (!ptr ||
            (aq != CL_KERNEL_ARG_ADDRESS_GLOBAL &&
             !(a->kind == NS_ARG_IN && aq == CL_KERNEL_ARG_ADDRESS_CONSTANT)))
            snprintf(what, sizeof what,
                     "is a %s%s, but the job passes a buffer (%s)",
                     aq == CL_KERNEL_ARG_ADDRESS_LOCAL ? "__local " : "", type,
                     kind);
        else if (a->kind == NS_ARG_OUT && (tq & CL_KERNEL_ARG_TYPE_CONST))
            snprintf(what, sizeof what,
                     "is const, but the job reads it back as an output");
    } else if (a->kind == NS_ARG_LOCAL) {
        if (!ptr || aq != CL_KERNEL_ARG_ADDRESS_LOCAL)
            snprintf(what, sizeof what,
                     "is a %s, but the job passes __local memory (local)",
                     type);
    } else if (ptr) {
        snprintf(what, sizeof what,
                 "is a pointer (%s), but the job passes a %s value", type,
                 kind);
    } else if (!s_scalar_fits(a->kind, type)) {
        snprintf(what, sizeof what, "is a %s, but the job passes a %s value",
                 type, kind);
    }
    if (!what[0])
        return NS_OK;
    ns_cl_errf(err, errlen, "%s: argument %u%s%s%s of kernel '%s' %s", src, i,
               name[0] ? " ('" : "", name, name[0] ? "')" : "", job->entry,
               what);
    return NS_ERR_INVAL;
}

int ns_preflight_check(uint32_t device_index, const ns_job_t *job,
                       const char *source_name, ns_preflight_t *res, char *err,
                       size_t errlen)
{
    memset(res, 0, sizeof *res);
    const char *src = job->source ? (const char *)job->source : NULL;
    size_t src_len = job->source_len;
    if (job->builtin[0]) {
        const ns_builtin_t *b = ns_builtin_find(job->builtin);
        if (!b) {
            ns_cl_errf(err, errlen, "no built-in kernel '%s'", job->builtin);
            return NS_ERR_NOTFOUND;
        }
        src = b->source;
        src_len = b->source_len;
    }
    const char *name = source_name       ? source_name
                       : job->builtin[0] ? job->builtin
                                         : "<source>";
    cl_device_id dev;
    int major = 1;
    int rc = ns_cl_device_at(device_index, NULL, &dev, &major);
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "no OpenCL device %u to check the job on",
                   device_index);
        return rc;
    }
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    cl_program prog = NULL;
    cl_kernel k = NULL;
    cl_int e = CL_SUCCESS;
    const char *call = "";
    if (ns_cl_context_queue(dev, major, 0, &ctx, &q, &e, &call) != NS_OK)
        return ns_cl_fail(err, errlen, call, e);
    char opts[NS_MAX_OPTIONS + 32];
    snprintf(opts, sizeof opts, "%s -cl-kernel-arg-info", job->options);
    uint64_t t0 = ns_mono_us();
    prog = clCreateProgramWithSource(ctx, 1, &src, &src_len, &e);
    if (!prog) {
        rc = ns_cl_fail(err, errlen, "clCreateProgramWithSource", e);
        goto out;
    }
    /* Some compilers (PoCL's clang) also print diagnostics on stderr; the
     * build log below says it once, with the user's file name. */
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0)
        dup2(null, STDERR_FILENO);
    e = clBuildProgram(prog, 1, &dev, opts, NULL, NULL);
    if (saved >= 0 && null >= 0)
        dup2(saved, STDERR_FILENO);
    if (saved >= 0)
        close(saved);
    if (null >= 0)
        close(null);
    res->build_us = ns_mono_us() - t0;
    if (e != CL_SUCCESS) {
        char *log = calloc(1, S_LOG_BYTES + 1);
        size_t got = 0;
        if (log)
            (void)clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG,
                                        S_LOG_BYTES, log, &got);
        if (log) {
            log[S_LOG_BYTES] = '\0';
            ns_build_log_rename(log, S_LOG_BYTES + 1, name);
            /* the first error line is what the user needs */
            char *line = strstr(log, "error");
            char *eol = line ? strchr(line, '\n') : NULL;
            if (eol)
                *eol = '\0';
            ns_cl_errf(err, errlen, "%s does not build: %s", name,
                       line ? line : log);
        } else {
            ns_cl_errf(err, errlen, "%s does not build", name);
        }
        free(log);
        rc = NS_ERR_OPENCL;
        goto out;
    }
    k = clCreateKernel(prog, job->entry, &e);
    if (!k) {
        ns_cl_errf(err, errlen, "%s has no kernel named '%s'", name,
                   job->entry);
        rc = NS_ERR_INVAL;
        goto out;
    }
    cl_uint n = 0;
    if ((e = clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof n, &n, NULL)) !=
        CL_SUCCESS) {
        rc = ns_cl_fail(err, errlen, "clGetKernelInfo", e);
        goto out;
    }
    res->kernel_args = n;
    if (n != job->n_args) {
        ns_cl_errf(err, errlen,
                   "%s: kernel '%s' takes %u arguments, the job gives %u", name,
                   job->entry, n, job->n_args);
        rc = NS_ERR_INVAL;
        goto out;
    }
    rc = NS_OK;
    for (uint32_t i = 0; i < n && rc == NS_OK; i++)
        rc = s_check_arg(job, k, i, name, err, errlen);
out:
    if (k)
        clReleaseKernel(k);
    if (prog)
        clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return rc;
}

/* ---- sampling units ------------------------------------------------------ */

#define S_SAMPLE_MAX 8 /* units sampled at most */

typedef struct {
    uint8_t *out[NS_MAX_ARGS]; /* full-size output buffers */
} s_bufs_t;

static void s_bufs_release(const ns_job_t *job, s_bufs_t *b)
{
    for (uint32_t i = 0; i < job->n_args; i++)
        free(b->out[i]);
    memset(b, 0, sizeof *b);
}

static int s_bufs_alloc(const ns_job_t *job, s_bufs_t *b)
{
    memset(b, 0, sizeof *b);
    for (uint32_t i = 0; i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_OUT &&
            !(b->out[i] = malloc(job->args[i].size))) {
            s_bufs_release(job, b);
            return NS_ERR_NOMEM;
        }
    return NS_OK;
}

static void s_fill(const ns_job_t *job, s_bufs_t *b, int byte)
{
    for (uint32_t i = 0; i < job->n_args; i++)
        if (b->out[i])
            memset(b->out[i], byte, job->args[i].size);
}

#define S_FILL_MID 0x5A /* the third fill, between 0x00 and 0xFF */

/* The first byte whose value after the run depends on the old content:
 * it changed from its fill in some run, but the three runs (fills 0x00,
 * 0xFF, 0x5A) do not agree on it. A byte the unit writes has the same
 * value after all three; one it leaves alone keeps each fill. */
static bool s_depends(const ns_job_t *job, const s_bufs_t *zero,
                      const s_bufs_t *ones, const s_bufs_t *mid, uint32_t *arg,
                      uint64_t *pos)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (!zero->out[i])
            continue;
        for (uint64_t p = 0; p < job->args[i].size; p++) {
            uint8_t z = zero->out[i][p], o = ones->out[i][p],
                    m = mid->out[i][p];
            bool written = z == o && o == m;
            bool untouched = z == 0x00 && o == 0xFF && m == S_FILL_MID;
            if (!written && !untouched) {
                *arg = i;
                *pos = p;
                return true;
            }
        }
    }
    return false;
}

int ns_preflight_sample(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, uint32_t k,
                        uint64_t *unit_run_ns, char *err, size_t errlen)
{
    uint64_t best_sum_us = 0; /* over units: each one's fastest run */
    uint32_t timed = 0;
    if (unit_run_ns)
        *unit_run_ns = 0;
    uint64_t n = ns_job_shard_units(job); /* a shard samples its own */
    uint64_t rows = ns_job_rows(job);
    if (n == 0)
        return NS_ERR_INVAL;
    if (k > S_SAMPLE_MAX)
        k = S_SAMPLE_MAX;
    if (k > n)
        k = (uint32_t)n;
    s_bufs_t zero, again, ones, mid;
    uint8_t *owner[NS_MAX_ARGS];
    memset(owner, 0, sizeof owner);
    int rc = s_bufs_alloc(job, &zero);
    if (rc == NS_OK && (rc = s_bufs_alloc(job, &again)) != NS_OK)
        s_bufs_release(job, &zero);
    if (rc == NS_OK && (rc = s_bufs_alloc(job, &ones)) != NS_OK) {
        s_bufs_release(job, &zero);
        s_bufs_release(job, &again);
    }
    if (rc == NS_OK && (rc = s_bufs_alloc(job, &mid)) != NS_OK) {
        s_bufs_release(job, &zero);
        s_bufs_release(job, &again);
        s_bufs_release(job, &ones);
    }
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "out of memory for the pre-flight");
        return rc;
    }
    /* which sampled unit wrote each byte: one bit-free byte map per
     * output, unit index + 1 (k <= 8) */
    for (uint32_t i = 0; i < job->n_args && rc == NS_OK; i++)
        if (zero.out[i] && !(owner[i] = calloc(1, job->args[i].size)))
            rc = NS_ERR_NOMEM;
    for (uint32_t s = 0; s < k && rc == NS_OK; s++) {
        uint64_t unit =
            ns_job_shard_unit(job, k == 1 ? 0 : (n - 1) * s / (k - 1));
        s_fill(job, &zero, 0x00);
        s_fill(job, &again, 0x00);
        s_fill(job, &ones, 0xFF);
        s_fill(job, &mid, S_FILL_MID);
        ns_timings_t t[4];
        memset(t, 0, sizeof t);
        if ((rc = ns_runner_run_units(r, job, inputs, &unit, 1, zero.out, &t[0],
                                      err, errlen)) != NS_OK ||
            (rc = ns_runner_run_units(r, job, inputs, &unit, 1, again.out,
                                      &t[1], err, errlen)) != NS_OK ||
            (rc = ns_runner_run_units(r, job, inputs, &unit, 1, ones.out, &t[2],
                                      err, errlen)) != NS_OK ||
            (rc = ns_runner_run_units(r, job, inputs, &unit, 1, mid.out, &t[3],
                                      err, errlen)) != NS_OK)
            break;
        uint64_t best = t[0].run_us;
        for (int x = 1; x < 4; x++)
            if (t[x].run_us < best)
                best = t[x].run_us;
        best_sum_us += best;
        timed++;
        uint32_t arg = 0;
        uint64_t pos = 0;
        for (uint32_t i = 0; i < job->n_args && rc == NS_OK; i++)
            if (zero.out[i] &&
                memcmp(zero.out[i], again.out[i], job->args[i].size)) {
                ns_cl_errf(err, errlen,
                           "unit %llu of kernel '%s' wrote other bytes to "
                           "argument %u in a second identical run: the "
                           "kernel is not deterministic (a race, or memory "
                           "it reads before writing), so its results "
                           "cannot be checked",
                           (unsigned long long)unit, job->entry, i);
                rc = NS_ERR_INVAL;
            }
        if (rc == NS_OK && s_depends(job, &zero, &ones, &mid, &arg, &pos)) {
            ns_cl_errf(err, errlen,
                       "unit %llu of kernel '%s' writes byte %llu of "
                       "argument %u from what the output held before (it "
                       "reads its outputs, e.g. out[i] += ..., or adds to "
                       "a total across work-groups): its units cannot be "
                       "checked one by one",
                       (unsigned long long)unit, job->entry,
                       (unsigned long long)pos, arg);
            rc = NS_ERR_INVAL;
        }
        /* bytes this unit writes: the same value over every fill */
        for (uint32_t i = 0; i < job->n_args && rc == NS_OK; i++) {
            if (!zero.out[i])
                continue;
            for (uint64_t p = 0; p < job->args[i].size; p++) {
                if (zero.out[i][p] != ones.out[i][p] ||
                    ones.out[i][p] != mid.out[i][p])
                    continue;
                uint64_t size = job->args[i].size,
                         row = ns_job_unit_row(job, unit);
                if (job->shard_rows &&
                    (p < size * row / rows || p >= size * (row + 1) / rows)) {
                    ns_cl_errf(
                        err, errlen,
                        "unit %llu of kernel '%s' (row %llu) writes "
                        "byte %llu of argument %u, outside its row's "
                        "slice (bytes %llu..%llu): a job cut into "
                        "shards needs each row's outputs (row = the "
                        "unit's index along global[%u]) in its own "
                        "slice of every output",
                        (unsigned long long)unit, job->entry,
                        (unsigned long long)row, (unsigned long long)p, i,
                        (unsigned long long)(size * row / rows),
                        (unsigned long long)(size * (row + 1) / rows - 1),
                        job->shard_dim);
                    rc = NS_ERR_INVAL;
                    break;
                }
                if (owner[i][p]) {
                    ns_cl_errf(
                        err, errlen,
                        "units %llu and %llu of kernel '%s' both write byte "
                        "%llu of argument %u: in the full launch they race, "
                        "so the result is not defined",
                        (unsigned long long)ns_job_shard_unit(
                            job,
                            (n - 1) * (owner[i][p] - 1) / (k > 1 ? k - 1 : 1)),
                        (unsigned long long)unit, job->entry,
                        (unsigned long long)p, i);
                    rc = NS_ERR_INVAL;
                    break;
                }
                owner[i][p] = (uint8_t)(s + 1);
            }
        }
    }
    if (rc == NS_OK && unit_run_ns && timed)
        *unit_run_ns = best_sum_us * 1000 / timed;
    for (uint32_t i = 0; i < job->n_args; i++)
        free(owner[i]);
    s_bufs_release(job, &zero);
    s_bufs_release(job, &again);
    s_bufs_release(job, &ones);
    s_bufs_release(job, &mid);
    return rc;
}
