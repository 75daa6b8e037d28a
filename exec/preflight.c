/* preflight.c - build the kernel here and check the job's arguments
 * against its signature before anything is posted (preflight.h). */
#include "nightshift/preflight.h"

#include "nightshift/cl.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"

#include <sodium.h>

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
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
         * ".cl:LINE" or is "<source>:LINE" / "<stdin>:LINE" (PoCL) or
         * "<kernel>:LINE" (NVIDIA) */
        const char *end = p;
        while (*end && !isspace((unsigned char)*end) && *end != ':' &&
               *end != '\'' && *end != '"')
            end++;
        size_t tok = (size_t)(end - p);
        bool path = (tok >= 3 && memcmp(end - 3, ".cl", 3) == 0) ||
                    (tok == 8 && memcmp(p, "<source>", 8) == 0) ||
                    (tok == 8 && memcmp(p, "<kernel>", 8) == 0) ||
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

static int s_check_kernel(cl_program prog, const ns_job_t *job,
                          const char *name, ns_preflight_t *res, char *err,
                          size_t errlen);

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
            /* the first error line is what the user needs, whole: PoCL
             * writes "error: FILE:LINE: ...", NVIDIA "FILE:LINE: error:" */
            char *line = strstr(log, "error");
            while (line && line > log && line[-1] != '\n')
                line--;
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
    rc = NS_OK;
    for (uint32_t st = 0; st < ns_job_steps(job) && rc == NS_OK; st++) {
        ns_job_t view;
        uint32_t map[NS_MAX_ARGS];
        ns_job_step_view(job, st, &view, map);
        rc = s_check_kernel(prog, &view, name, res, err, errlen);
    }
out:
    if (prog)
        clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return rc;
}

/* The marker of a passed check: <cache_dir>/checked/<key>, the key a
 * BLAKE2b of all the check depends on: the device (name, driver and
 * OpenCL versions), the program (built-in name, source hash, options)
 * and each step's entry and argument kinds. */
static int s_checked_path(const char *cache_dir, uint32_t device_index,
                          const ns_job_t *job, char *out, size_t cap)
{
    cl_device_id dev;
    int major = 1;
    if (ns_cl_device_at(device_index, NULL, &dev, &major) != NS_OK)
        return NS_ERR_NOTFOUND;
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    static const char domain[] = "nightshift/preflight-check/v1";
    crypto_generichash_update(&st, (const uint8_t *)domain, sizeof domain);
    const cl_device_info what[] = {CL_DEVICE_NAME, CL_DRIVER_VERSION,
                                   CL_DEVICE_VERSION};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
        char text[256] = "";
        (void)clGetDeviceInfo(dev, what[i], sizeof text - 1, text, NULL);
        crypto_generichash_update(&st, (const uint8_t *)text, strlen(text) + 1);
    }
    crypto_generichash_update(&st, (const uint8_t *)job->builtin,
                              strlen(job->builtin) + 1);
    crypto_generichash_update(&st, job->source_hash, NS_HASH_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)job->options,
                              strlen(job->options) + 1);
    for (uint32_t s = 0; s < ns_job_steps(job); s++) {
        ns_job_t view;
        uint32_t map[NS_MAX_ARGS];
        ns_job_step_view(job, s, &view, map);
        uint8_t kinds[NS_MAX_ARGS + 1] = {(uint8_t)view.n_args};
        for (uint32_t i = 0; i < view.n_args; i++)
            kinds[i + 1] = view.args[i].kind;
        crypto_generichash_update(&st, (const uint8_t *)view.entry,
                                  strlen(view.entry) + 1);
        crypto_generichash_update(&st, kinds, view.n_args + 1u);
    }
    ns_hash_t key;
    char hex[2 * NS_HASH_BYTES + 1], dir[PATH_MAX];
    crypto_generichash_final(&st, key, NS_HASH_BYTES);
    ns_hex(hex, key, NS_HASH_BYTES);
    if (snprintf(dir, sizeof dir, "%s/checked", cache_dir) >= (int)sizeof dir ||
        ns_mkdir_p(dir, 0700) != NS_OK ||
        snprintf(out, cap, "%s/%s", dir, hex) >= (int)cap)
        return NS_ERR_IO;
    return NS_OK;
}

int ns_preflight_check_cached(const char *cache_dir, uint32_t device_index,
                              const ns_job_t *job, const char *source_name,
                              ns_preflight_t *res, char *err, size_t errlen)
{
    char path[PATH_MAX + 80];
    bool marked = cache_dir && cache_dir[0] &&
                  s_checked_path(cache_dir, device_index, job, path,
                                 sizeof path) == NS_OK;
    if (marked && access(path, F_OK) == 0) {
        memset(res, 0, sizeof *res);
        return NS_OK;
    }
    int rc =
        ns_preflight_check(device_index, job, source_name, res, err, errlen);
    if (rc == NS_OK && marked) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    return rc;
}

/* The kernel named by job's entry in prog, and its arguments against the
 * job's. */
static int s_check_kernel(cl_program prog, const ns_job_t *job,
                          const char *name, ns_preflight_t *res, char *err,
                          size_t errlen)
{
    cl_int e = CL_SUCCESS;
    int rc;
    cl_kernel k = clCreateKernel(prog, job->entry, &e);
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
    return rc;
}

/* ---- sampling units ------------------------------------------------------ */

#define S_SAMPLE_MAX 8  /* units sampled at most */
#define S_FILL_MID 0x5A /* the third fill, between 0x00 and 0xFF */

/* A unit's runs are compared as they come, on two output-sized sets:
 * `first` takes the run over 0x00 and stays all 0x00 between units (what
 * a unit wrote is put back to 0x00 after it), `run` takes each later run
 * in turn (0x00 again, 0xFF, 0x5A), filled before each. Bitmaps stand for
 * the rest: the bytes this unit writes (the same value after its runs
 * over 0x00 and 0xFF) and those an earlier sampled unit wrote.
 *
 * Only 64-byte blocks where a run changed a byte are looked at byte by
 * byte: each run's set is scanned once for blocks that differ from its
 * fill (s_dirty), and a byte the unit writes shows in its run over 0x00
 * or in the one over 0xFF (no value is both), so every other byte was left
 * alone by both. A unit writes a sliver of a large output: over the whole
 * output there are plain scans and fills, and the byte rules run on the
 * blocks the unit touched. */
#define S_BLOCK 64

typedef struct {
    uint8_t *first[NS_MAX_ARGS]; /* OUT i after the run over 0x00 */
    uint8_t *run[NS_MAX_ARGS];   /* OUT i after the run now */
    uint8_t *mine[NS_MAX_ARGS];  /* bit p: this unit writes byte p (set
                                    only in `cand` blocks, cleared after) */
    uint8_t *taken[NS_MAX_ARGS]; /* bit p: an earlier sampled unit does */
    uint8_t *dz[NS_MAX_ARGS];    /* block b of `first` is not all 0x00 */
    uint8_t *cand[NS_MAX_ARGS];  /* block b may hold a byte this unit
                                    writes (a scratch before that) */
    uint8_t *look[NS_MAX_ARGS];  /* cand, and the blocks the run over
                                    0x5A changed */
} s_sample_t;

#define S_BIT(map, p) ((map)[(p) >> 3] >> ((p)&7) & 1)
#define S_SET(map, p) ((map)[(p) >> 3] |= (uint8_t)(1u << ((p)&7)))

static uint64_t s_blocks(uint64_t size)
{
    return (size + S_BLOCK - 1) / S_BLOCK;
}

static void s_sample_release(const ns_job_t *job, s_sample_t *b)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        ns_buf_put(b->first[i], b->first[i] ? job->args[i].size : 0);
        ns_buf_put(b->run[i], b->run[i] ? job->args[i].size : 0);
        free(b->mine[i]);
        free(b->taken[i]);
        free(b->dz[i]);
        free(b->cand[i]);
        free(b->look[i]);
    }
    memset(b, 0, sizeof *b);
}

static int s_sample_alloc(const ns_job_t *job, s_sample_t *b)
{
    memset(b, 0, sizeof *b);
    for (uint32_t i = 0; i < job->n_args; i++) {
        uint64_t size = job->args[i].size, nb = s_blocks(size) / 8 + 1;
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        if (!(b->first[i] = ns_buf_get(size)) ||
            !(b->run[i] = ns_buf_get(size)) ||
            !(b->mine[i] = calloc(1, size / 8 + 1)) ||
            !(b->taken[i] = calloc(1, size / 8 + 1)) ||
            !(b->dz[i] = calloc(1, nb)) || !(b->cand[i] = calloc(1, nb)) ||
            !(b->look[i] = calloc(1, nb))) {
            s_sample_release(job, b);
            return NS_ERR_NOMEM;
        }
        memset(b->first[i], 0x00, size);
    }
    return NS_OK;
}

static void s_fill(const ns_job_t *job, uint8_t **out, int byte)
{
    for (uint32_t i = 0; i < job->n_args; i++)
        if (out[i])
            memset(out[i], byte, job->args[i].size);
}

/* Set in map the 64-byte blocks of buf (size bytes) that hold a byte
 * other than fill: one read of buf, eight words a block. */
static void s_dirty(const uint8_t *buf, uint64_t size, uint8_t fill,
                    uint8_t *map)
{
    const uint64_t f8 = UINT64_C(0x0101010101010101) * fill;
    uint64_t full = size / S_BLOCK;
    for (uint64_t blk = 0; blk < full; blk++) {
        const uint8_t *q = buf + blk * S_BLOCK;
        uint64_t x = 0;
        for (int w = 0; w < S_BLOCK / 8; w++) {
            uint64_t v;
            memcpy(&v, q + 8 * w, 8);
            x |= v ^ f8;
        }
        if (x)
            S_SET(map, blk);
    }
    for (uint64_t p = full * S_BLOCK; p < size; p++)
        if (buf[p] != fill) {
            S_SET(map, full);
            break;
        }
}

/* The bytes [lo, hi) of block blk of an output of size bytes. */
static void s_block_range(uint64_t blk, uint64_t size, uint64_t *lo,
                          uint64_t *hi)
{
    *lo = blk * S_BLOCK;
    *hi = *lo + S_BLOCK < size ? *lo + S_BLOCK : size;
}

/* A byte of an output: the first one found wrong, in argument order. */
typedef struct {
    bool found;
    uint32_t arg;
    uint64_t pos;
} s_at_t;

static bool s_before(const s_at_t *at, uint32_t arg, uint64_t pos)
{
    return !at->found || arg < at->arg || (arg == at->arg && pos < at->pos);
}

/* After the two runs over 0x00: the first argument whose two runs
 * differ, or UINT32_MAX. Blocks that neither run changed are 0x00 in
 * both. Sets dz from `first` (cand holds the other run's blocks). */
static uint32_t s_after_zeros(const ns_job_t *job, s_sample_t *b)
{
    uint32_t differs = UINT32_MAX;
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (!b->first[i])
            continue;
        uint64_t size = job->args[i].size, nb = s_blocks(size);
        s_dirty(b->first[i], size, 0x00, b->dz[i]);
        memset(b->cand[i], 0, nb / 8 + 1);
        s_dirty(b->run[i], size, 0x00, b->cand[i]);
        if (differs != UINT32_MAX)
            continue;
        if (memcmp(b->dz[i], b->cand[i], nb / 8 + 1)) {
            differs = i;
            continue;
        }
        for (uint64_t blk = 0; blk < nb; blk++) {
            uint64_t lo, hi;
            if (!S_BIT(b->dz[i], blk))
                continue;
            s_block_range(blk, size, &lo, &hi);
            if (memcmp(b->first[i] + lo, b->run[i] + lo, hi - lo)) {
                differs = i;
                break;
            }
        }
    }
    return differs;
}

/* After the run over 0xFF: the blocks that may hold a byte the unit
 * writes (changed over 0x00 or over 0xFF) go to cand; in them, mark the
 * bytes that kept their value of the run over 0x00 (written); the first
 * byte that is neither that nor left at both fills goes to bad (what the
 * run over 0x5A finds can only come earlier, s_after_mid). A byte the
 * unit writes has one value after every run; one it does not keeps each
 * fill. */
static void s_after_ones(const ns_job_t *job, s_sample_t *b, s_at_t *bad)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (!b->first[i])
            continue;
        uint64_t size = job->args[i].size, nb = s_blocks(size);
        memcpy(b->cand[i], b->dz[i], nb / 8 + 1);
        s_dirty(b->run[i], size, 0xFF, b->cand[i]);
        for (uint64_t blk = 0; blk < nb && !bad->found; blk++) {
            uint64_t lo, hi;
            if (!S_BIT(b->cand[i], blk))
                continue;
            s_block_range(blk, size, &lo, &hi);
            for (uint64_t p = lo; p < hi; p++) {
                uint8_t z = b->first[i][p], o = b->run[i][p];
                if (z == o) {
                    S_SET(b->mine[i], p);
                } else if (z != 0x00 || o != 0xFF) {
                    *bad = (s_at_t){true, i, p};
                    break;
                }
            }
        }
    }
}

/* After the run over 0x5A: a written byte must keep its value, one left
 * alone must hold the fill; the first that does not, if it comes before
 * bad, is bad. A block outside cand that this run left all 0x5A is right
 * (0x00 over 0x00, nothing written there). */
static void s_after_mid(const ns_job_t *job, s_sample_t *b, s_at_t *bad)
{
    for (uint32_t i = 0; i < job->n_args && s_before(bad, i, 0); i++) {
        if (!b->first[i])
            continue;
        uint64_t size = job->args[i].size, nb = s_blocks(size);
        memcpy(b->look[i], b->cand[i], nb / 8 + 1);
        s_dirty(b->run[i], size, S_FILL_MID, b->look[i]);
        for (uint64_t blk = 0; blk < nb; blk++) {
            uint64_t lo, hi;
            if (!S_BIT(b->look[i], blk))
                continue;
            s_block_range(blk, size, &lo, &hi);
            if (!s_before(bad, i, lo))
                break;
            for (uint64_t p = lo; p < hi && s_before(bad, i, p); p++) {
                uint8_t z = b->first[i][p], m = b->run[i][p];
                if (S_BIT(b->mine[i], p) ? m != z
                                         : z != 0x00 || m != S_FILL_MID) {
                    *bad = (s_at_t){true, i, p};
                    break;
                }
            }
        }
    }
}

/* Back to the state before a unit: `first` all 0x00, no byte mine. */
static void s_unit_undo(const ns_job_t *job, s_sample_t *b)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (!b->first[i])
            continue;
        uint64_t size = job->args[i].size, nb = s_blocks(size);
        for (uint64_t blk = 0; blk < nb; blk++) {
            uint64_t lo, hi;
            s_block_range(blk, size, &lo, &hi);
            if (S_BIT(b->dz[i], blk))
                memset(b->first[i] + lo, 0x00, hi - lo);
            if (S_BIT(b->cand[i], blk)) /* lo is a multiple of 8 */
                memset(b->mine[i] + lo / 8, 0, (hi - lo + 7) / 8);
        }
        memset(b->dz[i], 0, nb / 8 + 1);
    }
}

/* How many of n units are sampled when k are asked for. */
static uint32_t s_units_sampled(uint32_t k, uint64_t n)
{
    if (k > S_SAMPLE_MAX)
        k = S_SAMPLE_MAX;
    return k > n ? (uint32_t)n : k;
}

/* The unit of sample s out of k over the job's n units. */
static uint64_t s_sampled_unit(const ns_job_t *job, uint64_t n, uint32_t k,
                               uint32_t s)
{
    return ns_job_shard_unit(job, k == 1 ? 0 : (n - 1) * s / (k - 1));
}

/* Which of the sampled units before s writes byte pos of output arg: each
 * runs again over 0x00 and 0xFF into b's sets (it passed its checks: a
 * byte it writes keeps one value). UINT32_MAX when none does (the runner
 * failed). For the message of a race only: the bitmap of taken bytes does
 * not say whose they are. */
static uint32_t s_writer(ns_runner_t *r, const ns_job_t *job,
                         const ns_input_t *inputs, s_sample_t *b, uint64_t n,
                         uint32_t k, uint32_t s, uint32_t arg, uint64_t pos)
{
    char err[256];
    for (uint32_t t = 0; t < s; t++) {
        uint64_t unit = s_sampled_unit(job, n, k, t);
        s_fill(job, b->first, 0x00);
        s_fill(job, b->run, 0xFF);
        if (ns_runner_run_units(r, job, inputs, &unit, 1, b->first, NULL, err,
                                sizeof err) != NS_OK ||
            ns_runner_run_units(r, job, inputs, &unit, 1, b->run, NULL, err,
                                sizeof err) != NS_OK)
            return UINT32_MAX;
        if (b->first[arg][pos] == b->run[arg][pos])
            return t;
    }
    return UINT32_MAX;
}

/* The bytes sample s writes (its runs agreed): inside its row's slice of
 * every output for a shard, and none an earlier sampled unit writes;
 * they are taken from now on. */
static int s_claim(ns_runner_t *r, const ns_job_t *job,
                   const ns_input_t *inputs, s_sample_t *b, uint64_t n,
                   uint32_t k, uint32_t s, char *err, size_t errlen)
{
    uint64_t unit = s_sampled_unit(job, n, k, s), rows = ns_job_rows(job);
    for (uint32_t i = 0; i < job->n_args; i++) {
        if (!b->first[i])
            continue;
        uint64_t size = job->args[i].size, row = ns_job_unit_row(job, unit);
        for (uint64_t p = 0; p < size; p++) {
            if ((p & 63) == 0 && size - p >= 64) {
                uint64_t m64;
                memcpy(&m64, b->mine[i] + (p >> 3), 8);
                if (!m64) {
                    p += 63; /* none of these 64 */
                    continue;
                }
            }
            if (!b->mine[i][p >> 3]) {
                p |= 7; /* none of these 8 */
                continue;
            }
            if (!S_BIT(b->mine[i], p))
                continue;
            if (job->shard_rows &&
                (p < size * row / rows || p >= size * (row + 1) / rows)) {
                ns_cl_errf(err, errlen,
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
                return NS_ERR_INVAL;
            }
            if (S_BIT(b->taken[i], p)) {
                uint32_t t = s_writer(r, job, inputs, b, n, k, s, i, p);
                char other[64] = "an earlier sampled unit";
                if (t != UINT32_MAX)
                    snprintf(other, sizeof other, "%llu",
                             (unsigned long long)s_sampled_unit(job, n, k, t));
                ns_cl_errf(err, errlen,
                           "units %s and %llu of kernel '%s' both write byte "
                           "%llu of argument %u: in the full launch they "
                           "race, so the result is not defined",
                           other, (unsigned long long)unit, job->entry,
                           (unsigned long long)p, i);
                return NS_ERR_INVAL;
            }
            S_SET(b->taken[i], p);
        }
    }
    return NS_OK;
}

/* What is done to each sampled job (a whole job, or a pipeline's step):
 * s_sample_one or s_time_one. */
typedef int (*s_step_fn)(ns_runner_t *r, const ns_job_t *job,
                         const ns_input_t *inputs, uint32_t k,
                         uint64_t *unit_run_ns, char *err, size_t errlen);

static int s_sample_one(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, uint32_t k,
                        uint64_t *unit_run_ns, char *err, size_t errlen);
static int s_time_one(ns_runner_t *r, const ns_job_t *job,
                      const ns_input_t *inputs, uint32_t k,
                      uint64_t *unit_run_ns, char *err, size_t errlen);

/* one over the job; over a pipeline, each step that reads only the
 * job's inputs as a job of its own (its view); one that reads an earlier
 * step's buffer is not sampled (the requester does not have it before
 * the run). A pipeline's *unit_run_ns is the mean over all its units, the
 * unsampled steps counted at the sampled ones' mean. */
static int s_sample_pipeline(ns_runner_t *r, const ns_job_t *job,
                             const ns_input_t *inputs, uint32_t k,
                             s_step_fn one, uint64_t *unit_run_ns, char *err,
                             size_t errlen)
{
    if (!job->n_steps)
        return one(r, job, inputs, k, unit_run_ns, err, errlen);
    double ns_sum = 0, units_sampled = 0;
    for (uint32_t s = 0; s < job->n_steps; s++) {
        ns_job_t view;
        uint32_t map[NS_MAX_ARGS];
        ns_input_t in_v[NS_MAX_ARGS];
        bool reads_earlier = false;
        ns_job_step_view(job, s, &view, map);
        memset(in_v, 0, sizeof in_v);
        for (uint32_t i = 0; i < view.n_args; i++) {
            if (map[i] == NS_JOB_NO_BUF || view.args[i].kind != NS_ARG_IN)
                continue;
            if (job->args[map[i]].kind == NS_ARG_OUT)
                reads_earlier = true;
            else
                in_v[i] = inputs[map[i]];
        }
        if (reads_earlier)
            continue;
        uint64_t ns = 0;
        char why[512];
        int rc = one(r, &view, in_v, k, &ns, why, sizeof why);
        if (rc != NS_OK) {
            snprintf(err, errlen, "step %u (%s): %s", s + 1, view.entry, why);
            return rc;
        }
        double n = (double)ns_job_step_units(job, s);
        ns_sum += (double)ns * n;
        units_sampled += n;
    }
    if (unit_run_ns)
        *unit_run_ns =
            units_sampled > 0 ? (uint64_t)(ns_sum / units_sampled) : 0;
    return NS_OK;
}

int ns_preflight_sample(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, uint32_t k,
                        uint64_t *unit_run_ns, char *err, size_t errlen)
{
    return s_sample_pipeline(r, job, inputs, k, s_sample_one, unit_run_ns, err,
                             errlen);
}

int ns_preflight_time(ns_runner_t *r, const ns_job_t *job,
                      const ns_input_t *inputs, uint32_t k,
                      uint64_t *unit_run_ns, char *err, size_t errlen)
{
    return s_sample_pipeline(r, job, inputs, k, s_time_one, unit_run_ns, err,
                             errlen);
}

/* The units s_sample_one samples, each run S_TIMED_RUNS times over
 * zeroed outputs, the fastest run of each counting (as the sample's four
 * runs did: a single run of a tiny unit is mostly noise, and a loaded
 * machine once priced such a job 100 times over its budget); nothing is
 * compared. */
#define S_TIMED_RUNS 4
static int s_time_one(ns_runner_t *r, const ns_job_t *job,
                      const ns_input_t *inputs, uint32_t k,
                      uint64_t *unit_run_ns, char *err, size_t errlen)
{
    uint8_t *out[NS_MAX_ARGS] = {NULL};
    uint64_t sum_us = 0, n = ns_job_shard_units(job);
    int rc = NS_OK;
    if (unit_run_ns)
        *unit_run_ns = 0;
    if (n == 0)
        return NS_ERR_INVAL;
    k = s_units_sampled(k, n);
    for (uint32_t i = 0; i < job->n_args && rc == NS_OK; i++) {
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        if (!(out[i] = ns_buf_get(job->args[i].size))) {
            ns_cl_errf(err, errlen, "out of memory for the pre-flight");
            rc = NS_ERR_NOMEM;
        } else {
            memset(out[i], 0, job->args[i].size);
        }
    }
    for (uint32_t s = 0; s < k && rc == NS_OK; s++) {
        uint64_t unit = s_sampled_unit(job, n, k, s), best = UINT64_MAX;
        for (int x = 0; x < S_TIMED_RUNS && rc == NS_OK; x++) {
            ns_timings_t t;
            memset(&t, 0, sizeof t);
            rc = ns_runner_run_units(r, job, inputs, &unit, 1, out, &t, err,
                                     errlen);
            if (rc == NS_OK && t.run_us < best)
                best = t.run_us;
        }
        if (rc == NS_OK)
            sum_us += best;
    }
    if (rc == NS_OK && unit_run_ns)
        *unit_run_ns = sum_us * 1000 / k;
    for (uint32_t i = 0; i < job->n_args; i++)
        ns_buf_put(out[i], out[i] ? job->args[i].size : 0);
    return rc;
}

static int s_sample_one(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, uint32_t k,
                        uint64_t *unit_run_ns, char *err, size_t errlen)
{
    uint64_t best_sum_us = 0; /* over units: each one's fastest run */
    uint32_t timed = 0;
    if (unit_run_ns)
        *unit_run_ns = 0;
    uint64_t n = ns_job_shard_units(job); /* a shard samples its own */
    if (n == 0)
        return NS_ERR_INVAL;
    k = s_units_sampled(k, n);
    s_sample_t b;
    int rc = s_sample_alloc(job, &b);
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "out of memory for the pre-flight");
        return rc;
    }
    for (uint32_t s = 0; s < k && rc == NS_OK; s++) {
        uint64_t unit = s_sampled_unit(job, n, k, s);
        ns_timings_t t[4];
        memset(t, 0, sizeof t);
        /* the four runs, each compared with the first as it comes; a
         * runner error in any of them is what is reported */
        uint32_t differs = UINT32_MAX; /* the second run: first such arg */
        s_at_t bad = {false, 0, 0};
        s_fill(job, b.run, 0x00); /* b.first is all 0x00 already */
        if ((rc = ns_runner_run_units(r, job, inputs, &unit, 1, b.first, &t[0],
                                      err, errlen)) != NS_OK ||
            (rc = ns_runner_run_units(r, job, inputs, &unit, 1, b.run, &t[1],
                                      err, errlen)) != NS_OK)
            break;
        differs = s_after_zeros(job, &b);
        s_fill(job, b.run, 0xFF);
        if ((rc = ns_runner_run_units(r, job, inputs, &unit, 1, b.run, &t[2],
                                      err, errlen)) != NS_OK)
            break;
        s_after_ones(job, &b, &bad);
        s_fill(job, b.run, S_FILL_MID);
        if ((rc = ns_runner_run_units(r, job, inputs, &unit, 1, b.run, &t[3],
                                      err, errlen)) != NS_OK)
            break;
        s_after_mid(job, &b, &bad);
        uint64_t best = t[0].run_us;
        for (int x = 1; x < 4; x++)
            if (t[x].run_us < best)
                best = t[x].run_us;
        best_sum_us += best;
        timed++;
        if (differs != UINT32_MAX) {
            ns_cl_errf(err, errlen,
                       "unit %llu of kernel '%s' wrote other bytes to "
                       "argument %u in a second identical run: the "
                       "kernel is not deterministic (a race, or memory "
                       "it reads before writing), so its results "
                       "cannot be checked",
                       (unsigned long long)unit, job->entry, differs);
            rc = NS_ERR_INVAL;
        } else if (bad.found) {
            ns_cl_errf(err, errlen,
                       "unit %llu of kernel '%s' writes byte %llu of "
                       "argument %u from what the output held before (it "
                       "reads its outputs, e.g. out[i] += ..., or adds to "
                       "a total across work-groups): its units cannot be "
                       "checked one by one",
                       (unsigned long long)unit, job->entry,
                       (unsigned long long)bad.pos, bad.arg);
            rc = NS_ERR_INVAL;
        } else {
            rc = s_claim(r, job, inputs, &b, n, k, s, err, errlen);
            s_unit_undo(job, &b);
        }
    }
    if (rc == NS_OK && unit_run_ns && timed)
        *unit_run_ns = best_sum_us * 1000 / timed;
    s_sample_release(job, &b);
    return rc;
}
