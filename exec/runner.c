/* runner.c - run one job on one OpenCL device, in this process.
 *
 * A call goes: validate the descriptor, check the inputs (length, hash),
 * check buffer sizes against the device, get the program (the runner's
 * last program, the binary cache, or a compile), create the kernel and
 * buffers, launch, read back, release. Every cl object is released on
 * every path (goto out).
 *
 * Binary cache file <cache_dir>/<hex key>.bin:
 *   "NSPROG01" | key (32) | BLAKE2b-256 of the binary (32) |
 *   binary length (u64 little-endian) | binary (CL_PROGRAM_BINARIES)
 * key = H("nightshift/program/v1" | source hash | platform | device name |
 *         device version | driver version | options), NUL-separated. A file
 * that fails any check, or whose binary the driver refuses, is ignored,
 * rebuilt from source and overwritten.
 */
#include "nightshift/runner.h"
#include "nightshift/cl.h"
#include "nightshift/hash.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <assert.h>
#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define S_CACHE_MAGIC "NSPROG01"
#define S_CACHE_MAGIC_LEN 8
#define S_CACHE_HEADER (S_CACHE_MAGIC_LEN + 2 * NS_HASH_BYTES + 8)
#define S_MAX_PROGRAM_BINARY (256u << 20) /* bytes of one cached binary */
#define S_MAX_BUILD_LOG (1u << 20)        /* bytes of build log we fetch */
#define S_LOG_LINES 12                    /* build log lines put in err */
#define S_ITEM_BATCH 256                  /* item launches per clFinish */
#define S_MAX_DIMS 16 /* work-item dimensions a device may report */
/* build options of a re-run build: the job's and three -D sizes */
#define S_MAX_OPTIONS (NS_MAX_OPTIONS + 3 * 40 + 48)

struct ns_runner {
    ns_device_t dev;          /* what ns_devices_probe said about it */
    cl_device_id device;      /* not reference-counted (root device) */
    cl_context ctx;           /* owned */
    cl_command_queue queue;   /* owned; in order, profiling on */
    char *cache_dir;          /* owned; NULL = no binary cache */
    bool host_unified;        /* device works on host memory in place */
    bool inputs_copied;       /* a pipeline's step: IN buffers are copies
                                 (a kernel's writes to them never reach
                                 the caller's memory, the claim's) */
    size_t max_wg;            /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    size_t max_item[3];       /* CL_DEVICE_MAX_WORK_ITEM_SIZES */
    uint64_t local_mem_bytes; /* CL_DEVICE_LOCAL_MEM_SIZE */
    cl_program prog;          /* program of the current call; borrowed
                                 from slot[] */
    cl_program slot[2];       /* the last two programs built or loaded
                                 (a job's full-run and re-run builds);
                                 owned */
    ns_hash_t slot_key[2];    /* their cache keys */
    bool lost;                /* the context failed: ns_runner_lost() */
    bool exact_div_sqrt;      /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
    int prelude_shift;        /* s_prelude_shift(); -1: not learnt yet */
    pthread_mutex_t lock;     /* one call at a time (a requester runs its
                                 checks on a thread of its own) */
};

/* Everything one call creates; released by s_call_release. */
typedef struct {
    cl_kernel kernel;
    cl_mem mem[NS_MAX_ARGS]; /* IN and OUT buffers by argument index */
    cl_event *events;        /* pending events of a batch */
    size_t n_events;
} s_call_t;

/* ---- runner ----------------------------------------------------------- */

/* The first three of CL_DEVICE_MAX_WORK_ITEM_SIZES (a device may report
 * more dimensions than the three a job can use). */
static cl_int s_max_item_sizes(cl_device_id dev, size_t out[3])
{
    size_t sizes[S_MAX_DIMS] = {0};
    size_t len = 0;
    cl_int e =
        clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, 0, NULL, &len);
    if (e != CL_SUCCESS)
        return e;
    if (len < 3 * sizeof(size_t) || len > sizeof sizes)
        return CL_INVALID_VALUE;
    e = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, len, sizes, NULL);
    memcpy(out, sizes, 3 * sizeof(size_t));
    return e;
}

ns_runner_t *ns_runner_new(uint32_t device_index, const char *cache_dir,
                           int *err)
{
    ns_runner_t *r = NULL;
    cl_int e = CL_SUCCESS;
    int rc = NS_ERR_NOMEM;

    r = calloc(1, sizeof *r);
    if (r)
        pthread_mutex_init(&r->lock, NULL);
    if (!r)
        goto out;
    rc = ns_cl_device_at(device_index, &r->dev, &r->device, NULL);
    if (rc != NS_OK)
        goto out;

    cl_bool unified = CL_FALSE;
    cl_device_type type = 0;
    cl_ulong local_mem = 0;
    rc = NS_ERR_OPENCL;
    if (clGetDeviceInfo(r->device, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                        sizeof r->max_wg, &r->max_wg, NULL) != CL_SUCCESS ||
        s_max_item_sizes(r->device, r->max_item) != CL_SUCCESS ||
        clGetDeviceInfo(r->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem,
                        &local_mem, NULL) != CL_SUCCESS ||
        clGetDeviceInfo(r->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) !=
            CL_SUCCESS)
        goto out;
    /* deprecated in 2.0 but still answered; CPUs share memory anyway */
    if (clGetDeviceInfo(r->device, CL_DEVICE_HOST_UNIFIED_MEMORY,
                        sizeof unified, &unified, NULL) != CL_SUCCESS)
        unified = CL_FALSE;
    r->host_unified = unified == CL_TRUE || (type & CL_DEVICE_TYPE_CPU);
    const char *copy = getenv("NS_RUNNER_COPY_BUFFERS");
    if (copy && strcmp(copy, "1") == 0)
        r->host_unified = false; /* the discrete-GPU path, for tests */
    r->local_mem_bytes = local_mem;
    r->prelude_shift = -1;
    cl_device_fp_config fp32 = 0;
    if (clGetDeviceInfo(r->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp32,
                        &fp32, NULL) == CL_SUCCESS)
        r->exact_div_sqrt = (fp32 & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;

    /* The runner picks the queue entry point by the device's version (the
     * benchmark and the challenges go by the platform's). */
    int api_major = strncmp(r->dev.device_version, "OpenCL 1.", 9) == 0 ? 1 : 2;
    rc = ns_cl_context_queue(r->device, api_major, CL_QUEUE_PROFILING_ENABLE,
                             &r->ctx, &r->queue, &e, NULL);
    if (rc != NS_OK)
        goto out;

    if (cache_dir) {
        rc = ns_mkdir_p(cache_dir, 0700);
        if (rc != NS_OK)
            goto out;
        rc = NS_ERR_NOMEM;
        r->cache_dir = strdup(cache_dir);
        if (!r->cache_dir)
            goto out;
    }
    rc = NS_OK;
out:
    if (rc != NS_OK) {
        if (rc == NS_ERR_OPENCL)
            ns_warn(NS_MOD_EXEC, "event=runner_open_failed device=%u cl_err=%d",
                    device_index, (int)e);
        ns_runner_destroy(&r);
    }
    if (err)
        *err = rc;
    return r;
}

void ns_runner_destroy(ns_runner_t **rp)
{
    if (!rp || !*rp)
        return;
    ns_runner_t *r = *rp;
    for (int i = 0; i < 2; i++)
        if (r->slot[i])
            clReleaseProgram(r->slot[i]);
    if (r->queue)
        clReleaseCommandQueue(r->queue);
    if (r->ctx)
        clReleaseContext(r->ctx);
    free(r->cache_dir);
    pthread_mutex_destroy(&r->lock);
    free(r);
    *rp = NULL;
}

const ns_device_t *ns_runner_device(const ns_runner_t *r)
{
    return &r->dev;
}

/* ---- program: memory, binary cache, compile --------------------------- */

/* Append s and its NUL to buf (cap bytes, *n used); false if it is full. */
static bool s_put(uint8_t *buf, size_t cap, size_t *n, const void *s,
                  size_t len)
{
    if (len >= cap - *n)
        return false;
    memcpy(buf + *n, s, len);
    buf[*n + len] = 0;
    *n += len + 1;
    return true;
}

static void s_program_key(const ns_runner_t *r, const ns_hash_t source_hash,
                          const char *options, ns_hash_t key)
{
    static const char tag[] = "nightshift/program/v1";
    uint8_t buf[sizeof tag + NS_HASH_BYTES + 4 * (NS_MAX_DEVICE_NAME + 1) +
                S_MAX_OPTIONS + 16];
    size_t n = 0;
    /* every part is bounded by its cap, so this cannot run out */
    bool ok =
        s_put(buf, sizeof buf, &n, tag, sizeof tag - 1) &&
        s_put(buf, sizeof buf, &n, source_hash, NS_HASH_BYTES) &&
        s_put(buf, sizeof buf, &n, r->dev.platform, strlen(r->dev.platform)) &&
        s_put(buf, sizeof buf, &n, r->dev.info.name,
              strlen(r->dev.info.name)) &&
        s_put(buf, sizeof buf, &n, r->dev.device_version,
              strlen(r->dev.device_version)) &&
        s_put(buf, sizeof buf, &n, r->dev.driver_version,
              strlen(r->dev.driver_version)) &&
        s_put(buf, sizeof buf, &n, options, strnlen(options, S_MAX_OPTIONS));
    (void)ok;
    ns_hash(key, buf, n);
}

static int s_cache_path(const ns_runner_t *r, const ns_hash_t key, char *path,
                        size_t cap)
{
    char name[2 * NS_HASH_BYTES + 8];
    ns_hex(name, key, NS_HASH_BYTES);
    strcat(name, ".bin");
    return ns_path_join(path, cap, r->cache_dir, name);
}

static void s_put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t s_get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Load and build the cached binary for key; *prog stays NULL on any
 * problem (a missing file silently, a bad one with a warning). */
static void s_cache_load(ns_runner_t *r, const ns_hash_t key,
                         const char *options, cl_program *prog)
{
    char path[PATH_MAX];
    uint8_t *buf = NULL;
    size_t len = 0;
    const char *why = NULL;
    cl_program p = NULL;
    cl_int e = CL_SUCCESS, status = CL_SUCCESS;

    *prog = NULL;
    if (s_cache_path(r, key, path, sizeof path) != NS_OK)
        return;
    int rc =
        ns_file_read(path, S_CACHE_HEADER + S_MAX_PROGRAM_BINARY, &buf, &len);
    if (rc == NS_ERR_NOTFOUND)
        return;
    if (rc != NS_OK) {
        why = "unreadable";
        goto out;
    }
    ns_hash_t h;
    if (len < S_CACHE_HEADER ||
        memcmp(buf, S_CACHE_MAGIC, S_CACHE_MAGIC_LEN) != 0 ||
        memcmp(buf + S_CACHE_MAGIC_LEN, key, NS_HASH_BYTES) != 0 ||
        s_get_u64le(buf + S_CACHE_MAGIC_LEN + 2 * NS_HASH_BYTES) !=
            len - S_CACHE_HEADER ||
        len == S_CACHE_HEADER) {
        why = "header";
        goto out;
    }
    const uint8_t *bin = buf + S_CACHE_HEADER;
    size_t bin_len = len - S_CACHE_HEADER;
    ns_hash(h, bin, bin_len);
    if (memcmp(h, buf + S_CACHE_MAGIC_LEN + NS_HASH_BYTES, NS_HASH_BYTES) !=
        0) {
        why = "checksum";
        goto out;
    }
    p = clCreateProgramWithBinary(r->ctx, 1, &r->device, &bin_len, &bin,
                                  &status, &e);
    if (!p || e != CL_SUCCESS || status != CL_SUCCESS) {
        why = "driver_refused";
        goto out;
    }
    e = clBuildProgram(p, 1, &r->device, options, NULL, NULL);
    if (e != CL_SUCCESS) {
        why = "build_failed";
        goto out;
    }
    *prog = p;
    p = NULL;
out:
    if (why)
        ns_warn(NS_MOD_EXEC,
                "event=program_cache_ignored reason=%s cl_err=%d file=%s", why,
                (int)e, path);
    if (p)
        clReleaseProgram(p);
    free(buf);
}

/* Store prog's binary for key; failures only warn (the cache is a cache). */
static void s_cache_store(ns_runner_t *r, const ns_hash_t key, cl_program prog)
{
    char path[PATH_MAX];
    size_t bin_len = 0;
    uint8_t *buf = NULL;
    const char *why = NULL;

    if (s_cache_path(r, key, path, sizeof path) != NS_OK)
        return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_len,
                         &bin_len, NULL) != CL_SUCCESS ||
        bin_len == 0 || bin_len > S_MAX_PROGRAM_BINARY) {
        why = "no_binary";
        goto out;
    }
    buf = malloc(S_CACHE_HEADER + bin_len);
    if (!buf) {
        why = "nomem";
        goto out;
    }
    unsigned char *bin = buf + S_CACHE_HEADER;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) !=
        CL_SUCCESS) {
        why = "no_binary";
        goto out;
    }
    memcpy(buf, S_CACHE_MAGIC, S_CACHE_MAGIC_LEN);
    memcpy(buf + S_CACHE_MAGIC_LEN, key, NS_HASH_BYTES);
    ns_hash(buf + S_CACHE_MAGIC_LEN + NS_HASH_BYTES, bin, bin_len);
    s_put_u64le(buf + S_CACHE_MAGIC_LEN + 2 * NS_HASH_BYTES, bin_len);
    if (ns_file_write_atomic(path, buf, S_CACHE_HEADER + bin_len, 0600) !=
        NS_OK)
        why = "write";
out:
    if (why)
        ns_warn(NS_MOD_EXEC, "event=program_cache_store_failed reason=%s", why);
    free(buf);
}

/* The first S_LOG_LINES non-empty lines of the build log into err. */
static void s_build_log(const ns_runner_t *r, cl_program prog, char *err,
                        size_t errlen)
{
    size_t size = 0;
    char *log = NULL;
    if (!err || errlen == 0)
        return;
    ns_cl_errf(err, errlen, "build failed: ");
    if (clGetProgramBuildInfo(prog, r->device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                              &size) != CL_SUCCESS ||
        size == 0)
        goto out;
    if (size > S_MAX_BUILD_LOG)
        size = S_MAX_BUILD_LOG;
    log = calloc(1, size + 1);
    if (!log || clGetProgramBuildInfo(prog, r->device, CL_PROGRAM_BUILD_LOG,
                                      size, log, NULL) != CL_SUCCESS)
        goto out;
    size_t n = strlen(err), lines = 0;
    const char *p = log;
    while (*p && lines < S_LOG_LINES && n + 1 < errlen) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > 0) {
            if (lines > 0)
                err[n++] = '\n';
            for (size_t i = 0; i < len && n + 1 < errlen; i++) {
                unsigned char c = (unsigned char)p[i];
                err[n++] = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : p[i];
            }
            lines++;
        }
        p += len + (eol ? 1 : 0);
    }
    err[n] = '\0';
out:
    free(log);
}

/* The job's source text: the built-in's embedded text or the job's own,
 * checked against job->source_hash (h gets its hash). */
static int s_job_source(const ns_job_t *job, const char **src, size_t *len,
                        ns_hash_t h, char *err, size_t errlen)
{
    if (job->builtin[0] != '\0') {
        const ns_builtin_t *b = ns_builtin_find(job->builtin);
        if (!b) {
            ns_cl_errf(err, errlen, "unknown built-in kernel '%s'",
                       job->builtin);
            return NS_ERR_NOTFOUND;
        }
        *src = b->source;
        *len = b->source_len;
    } else {
        if (!job->source || job->source_len == 0) {
            ns_cl_errf(err, errlen, "job has neither source nor built-in");
            return NS_ERR_INVAL;
        }
        *src = (const char *)job->source;
        *len = job->source_len;
    }
    ns_hash(h, *src, *len);
    if (memcmp(h, job->source_hash, NS_HASH_BYTES) == 0)
        return NS_OK;
    if (job->builtin[0] != '\0') {
        ns_cl_errf(err, errlen,
                   "built-in '%s' here differs from the job's (source hash): "
                   "another nightshift version",
                   job->builtin);
        return NS_ERR_VERSION;
    }
    ns_cl_errf(err, errlen, "source does not match its hash");
    return NS_ERR_CORRUPT;
}

/* The re-run prelude (runner.h): every index and size query returns in
 * a launch of one unit at a global offset what it returned in the full
 * launch. The helpers come before the macros, so inside them the names
 * are still the builtins; no macro's replacement names another macro.
 * NS_RERUN_G0..2 (the full launch's global sizes, 1 beyond dims) come as
 * -D options. The #line at the end keeps the user's line numbers. */
static const char s_prelude[] =
    "static inline size_t ns_rerun_global_size(uint d)\n"
    "{ return d == 0 ? (size_t)NS_RERUN_G0 : d == 1 ? (size_t)NS_RERUN_G1 :\n"
    "         d == 2 ? (size_t)NS_RERUN_G2 : (size_t)1; }\n"
    "static inline size_t ns_rerun_group_id(uint d)\n"
    "{ return get_group_id(d) + get_global_offset(d) / get_local_size(d); }\n"
    "static inline size_t ns_rerun_num_groups(uint d)\n"
    "{ return ns_rerun_global_size(d) / get_local_size(d); }\n"
    "static inline size_t ns_rerun_global_offset(uint d)\n"
    "{ return (void)d, (size_t)0; }\n"
    "static inline size_t ns_rerun_global_linear_id(void)\n"
    "{ return (get_global_id(2) * (size_t)NS_RERUN_G1 + get_global_id(1)) *\n"
    "         (size_t)NS_RERUN_G0 + get_global_id(0); }\n"
    "static inline size_t ns_rerun_group_linear_id(void)\n"
    "{ return (ns_rerun_group_id(2) * ns_rerun_num_groups(1) +\n"
    "          ns_rerun_group_id(1)) * ns_rerun_num_groups(0) +\n"
    "         ns_rerun_group_id(0); }\n"
    "#define get_global_size(d) ns_rerun_global_size(d)\n"
    "#define get_group_id(d) ns_rerun_group_id(d)\n"
    "#define get_num_groups(d) ns_rerun_num_groups(d)\n"
    "#define get_global_offset(d) ns_rerun_global_offset(d)\n"
    "#define get_global_linear_id() ns_rerun_global_linear_id()\n"
    "#define get_group_linear_id() ns_rerun_group_linear_id()\n"
    "#line 1\n";

/* A failed call may have left the device's context unusable: on NVIDIA a
 * kernel that writes out of bounds ends in CL_INVALID_COMMAND_QUEUE and
 * every later call fails, builds included. A queue that no longer
 * finishes says so on any device, and costs nothing on the happy path:
 * callers ask only after a failure. */
bool ns_runner_lost(ns_runner_t *r)
{
    if (!r)
        return false;
    pthread_mutex_lock(&r->lock);
    if (!r->lost && clFinish(r->queue) != CL_SUCCESS)
        r->lost = true;
    bool lost = r->lost;
    pthread_mutex_unlock(&r->lock);
    return lost;
}

const char *ns_runner_prelude(void)
{
    return s_prelude;
}

/* The first "LINE:COL" of a build log (0: none). */
static unsigned long s_first_line(const char *log)
{
    for (const char *p = strchr(log, ':'); p; p = strchr(p + 1, ':')) {
        char *end = NULL;
        if (!isdigit((unsigned char)p[1]))
            continue;
        unsigned long line = strtoul(p + 1, &end, 10);
        if (*end == ':' && isdigit((unsigned char)end[1]))
            return line;
    }
    return 0;
}

/* How many lines the device's log counts before the user's first line
 * of a re-run build: 0 where the prelude's #line is honoured (PoCL);
 * NVIDIA's compiler numbers on from the prelude. Learnt once, on the
 * first failed re-run build, from a probe that fails on its line 1. */
static unsigned long s_prelude_shift(ns_runner_t *r, const char *options)
{
    if (r->prelude_shift >= 0)
        return (unsigned long)r->prelude_shift;
    static const char probe[] = "ns_probe_not_a_type x;\n";
    char *text = malloc(sizeof s_prelude + sizeof probe);
    r->prelude_shift = 0;
    if (!text)
        return 0;
    memcpy(text, s_prelude, sizeof s_prelude - 1);
    memcpy(text + sizeof s_prelude - 1, probe, sizeof probe);
    const char *src = text;
    cl_int e = CL_SUCCESS;
    cl_program prog = clCreateProgramWithSource(r->ctx, 1, &src, NULL, &e);
    if (prog && clBuildProgram(prog, 1, &r->device, options, NULL, NULL) ==
                    CL_BUILD_PROGRAM_FAILURE) {
        char log[1024] = "";
        if (clGetProgramBuildInfo(prog, r->device, CL_PROGRAM_BUILD_LOG,
                                  sizeof log - 1, log, NULL) == CL_SUCCESS) {
            unsigned long first = s_first_line(log);
            if (first > 1 && first < 1000)
                r->prelude_shift = (int)(first - 1);
        }
    }
    if (prog)
        clReleaseProgram(prog);
    free(text);
    return (unsigned long)r->prelude_shift;
}

/* Every "LINE:COL" in err with LINE > shift becomes LINE - shift. */
static void s_unshift_lines(char *err, unsigned long shift)
{
    if (!err || shift == 0)
        return;
    size_t len = strlen(err);
    for (char *p = strchr(err, ':'); p; p = strchr(p + 1, ':')) {
        char *end = NULL;
        if (!isdigit((unsigned char)p[1]))
            continue;
        unsigned long line = strtoul(p + 1, &end, 10);
        if (*end != ':' || !isdigit((unsigned char)end[1]) || line <= shift)
            continue;
        char num[24];
        int n = snprintf(num, sizeof num, "%lu", line - shift);
        size_t old = (size_t)(end - (p + 1));
        /* the new number is never longer than the old */
        memmove(p + 1 + n, end, len - (size_t)(end - err) + 1);
        memcpy(p + 1, num, (size_t)n);
        len -= old - (size_t)n;
        p = p + n; /* on to the ':' after the number */
    }
}

/* The program for this job (the full run's, or with rerun the re-run
 * build's) into r->prog: one of the two kept, loaded from the cache or
 * compiled. */
static int s_program(ns_runner_t *r, const ns_job_t *job, bool rerun,
                     ns_timings_t *t, char *err, size_t errlen)
{
    const char *src = NULL;
    size_t len = 0;
    ns_hash_t source_hash, key;
    cl_program prog = NULL;
    cl_int e = CL_SUCCESS;
    uint64_t t0 = ns_mono_us();
    char options[S_MAX_OPTIONS + 1];
    char *text = NULL;

    int rc = s_job_source(job, &src, &len, source_hash, err, errlen);
    if (rc != NS_OK)
        return rc;
    /* An exact job's bytes must not depend on the device: OpenCL lets a
     * device divide and take square roots within 2.5 and 3 ulp unless
     * asked for the correctly rounded ones (NVIDIA's differ from PoCL's
     * without it: bench/cross_device.py). */
    const char *exact = job->det == NS_DET_EXACT && r->exact_div_sqrt
                            ? "-cl-fp32-correctly-rounded-divide-sqrt"
                            : "";
    snprintf(options, sizeof options, "%s%s%s", job->options,
             job->options[0] && exact[0] ? " " : "", exact);
    if (rerun) {
        uint64_t g[3];
        for (uint32_t d = 0; d < 3; d++)
            g[d] = d < job->dims ? job->global[d] : 1;
        size_t n = strlen(options);
        snprintf(options + n, sizeof options - n,
                 "%s-D NS_RERUN_G0=%llu -D NS_RERUN_G1=%llu "
                 "-D NS_RERUN_G2=%llu",
                 n ? " " : "", (unsigned long long)g[0],
                 (unsigned long long)g[1], (unsigned long long)g[2]);
        text = malloc(sizeof s_prelude - 1 + len);
        if (!text)
            return NS_ERR_NOMEM;
        memcpy(text, s_prelude, sizeof s_prelude - 1);
        memcpy(text + sizeof s_prelude - 1, src, len);
        src = text;
        len += sizeof s_prelude - 1;
        ns_hash(source_hash, src, len);
    }
    s_program_key(r, source_hash, options, key);
    for (int i = 0; i < 2; i++) {
        if (r->slot[i] && memcmp(key, r->slot_key[i], NS_HASH_BYTES) == 0) {
            r->prog = r->slot[i];
            t->cache_hit = true;
            goto out;
        }
    }
    if (r->cache_dir)
        s_cache_load(r, key, options, &prog);
    if (prog) {
        t->cache_hit = true;
    } else {
        prog = clCreateProgramWithSource(r->ctx, 1, &src, &len, &e);
        if (!prog) {
            rc = ns_cl_fail(err, errlen, "clCreateProgramWithSource", e);
            goto out;
        }
        e = clBuildProgram(prog, 1, &r->device, options, NULL, NULL);
        if (e != CL_SUCCESS) {
            if (e == CL_BUILD_PROGRAM_FAILURE) {
                s_build_log(r, prog, err, errlen);
                if (rerun)
                    s_unshift_lines(err, s_prelude_shift(r, options));
            } else
                ns_cl_fail(err, errlen, "clBuildProgram", e);
            ns_info(NS_MOD_EXEC, "event=build_failed cl_err=%d rerun=%d",
                    (int)e, (int)rerun);
            rc = NS_ERR_OPENCL;
            goto out;
        }
        if (r->cache_dir)
            s_cache_store(r, key, prog);
    }
    /* the older slot goes; the newer moves to slot 1 */
    if (r->slot[0])
        clReleaseProgram(r->slot[0]);
    r->slot[0] = r->slot[1];
    memcpy(r->slot_key[0], r->slot_key[1], NS_HASH_BYTES);
    r->slot[1] = prog;
    memcpy(r->slot_key[1], key, NS_HASH_BYTES);
    r->prog = prog;
    prog = NULL;
out:
    if (prog)
        clReleaseProgram(prog);
    free(text);
    t->build_us = ns_mono_us() - t0;
    return rc;
}

/* ---- checks before anything is allocated ------------------------------ */

static int s_check_inputs(const ns_job_t *job, const ns_input_t *inputs,
                          char *err, size_t errlen)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        const ns_arg_t *a = &job->args[i];
        if (a->kind != NS_ARG_IN)
            continue;
        if (!inputs || (inputs[i].len > 0 && !inputs[i].data)) {
            ns_cl_errf(err, errlen, "arg %u: no input data", i);
            return NS_ERR_INVAL;
        }
        if ((uint64_t)inputs[i].len != a->size) {
            ns_cl_errf(err, errlen,
                       "arg %u: input is %zu bytes, the job says %llu", i,
                       inputs[i].len, (unsigned long long)a->size);
            return NS_ERR_INVAL;
        }
        if (inputs[i].verified)
            continue;
        ns_hash_t h;
        ns_hash(h, inputs[i].data, inputs[i].len);
        if (memcmp(h, a->hash, NS_HASH_BYTES) != 0) {
            ns_cl_errf(err, errlen, "arg %u: input does not match its hash", i);
            return NS_ERR_CORRUPT;
        }
    }
    return NS_OK;
}

static int s_check_memory(const ns_runner_t *r, const ns_job_t *job, char *err,
                          size_t errlen)
{
    uint64_t total = 0;
    uint64_t max_alloc = r->dev.info.max_alloc_bytes; /* 0: unknown */
    uint64_t global = r->dev.info.global_mem_bytes;   /* 0: unknown */
    for (uint32_t i = 0; i < job->n_args; i++) {
        const ns_arg_t *a = &job->args[i];
        if (a->kind != NS_ARG_IN && a->kind != NS_ARG_OUT)
            continue;
        if (max_alloc != 0 && a->size > max_alloc) {
            ns_cl_errf(err, errlen,
                       "arg %u: buffer of %llu bytes is over the device's "
                       "largest allocation (%llu bytes)",
                       i, (unsigned long long)a->size,
                       (unsigned long long)max_alloc);
            return NS_ERR_TOOBIG;
        }
        total += a->size; /* each <= NS_MAX_BUFFER: no overflow */
    }
    if (global != 0 && total > global) {
        ns_cl_errf(err, errlen,
                   "buffers total %llu bytes, over the device's global memory "
                   "(%llu bytes)",
                   (unsigned long long)total, (unsigned long long)global);
        return NS_ERR_TOOBIG;
    }
    return NS_OK;
}

static bool s_has_local(const ns_job_t *job)
{
    for (uint32_t d = 0; d < job->dims; d++)
        if (job->local[d] != 0)
            return true;
    return false;
}

/* ---- kernel and buffers ----------------------------------------------- */

static void s_call_release_events(s_call_t *c)
{
    for (size_t i = 0; i < c->n_events; i++)
        if (c->events[i])
            clReleaseEvent(c->events[i]);
    c->n_events = 0;
}

static void s_call_release(ns_runner_t *r, s_call_t *c)
{
    /* nothing may still use the buffers or the caller's memory */
    clFinish(r->queue);
    s_call_release_events(c);
    free(c->events);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (c->mem[i])
            clReleaseMemObject(c->mem[i]);
    if (c->kernel)
        clReleaseKernel(c->kernel);
    memset(c, 0, sizeof *c);
}

/* Kernel of the job's entry point, its argument count and the local sizes
 * checked against device and kernel. */
static int s_kernel(ns_runner_t *r, const ns_job_t *job, s_call_t *c, char *err,
                    size_t errlen)
{
    cl_int e = CL_SUCCESS;
    cl_uint n_args = 0;
    size_t kernel_wg = 0;
    cl_ulong kernel_local = 0;

    c->kernel = clCreateKernel(r->prog, job->entry, &e);
    if (!c->kernel) {
        if (e == CL_INVALID_KERNEL_NAME) {
            ns_cl_errf(err, errlen, "no kernel '%s' in the program",
                       job->entry);
            return NS_ERR_INVAL;
        }
        return ns_cl_fail(err, errlen, "clCreateKernel", e);
    }
    e = clGetKernelInfo(c->kernel, CL_KERNEL_NUM_ARGS, sizeof n_args, &n_args,
                        NULL);
    if (e != CL_SUCCESS)
        return ns_cl_fail(err, errlen, "clGetKernelInfo", e);
    if (n_args != job->n_args) {
        ns_cl_errf(err, errlen,
                   "kernel '%s' takes %u arguments, the job gives %u",
                   job->entry, (unsigned)n_args, job->n_args);
        return NS_ERR_INVAL;
    }
    e = clGetKernelWorkGroupInfo(c->kernel, r->device,
                                 CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_wg,
                                 &kernel_wg, NULL);
    if (e == CL_SUCCESS)
        e = clGetKernelWorkGroupInfo(c->kernel, r->device,
                                     CL_KERNEL_LOCAL_MEM_SIZE,
                                     sizeof kernel_local, &kernel_local, NULL);
    if (e != CL_SUCCESS)
        return ns_cl_fail(err, errlen, "clGetKernelWorkGroupInfo", e);
    if (s_has_local(job)) {
        uint64_t product = 1;
        for (uint32_t d = 0; d < job->dims; d++) {
            if (job->local[d] > r->max_item[d]) {
                ns_cl_errf(err, errlen,
                           "local[%u] = %llu is over the device's limit %zu", d,
                           (unsigned long long)job->local[d], r->max_item[d]);
                return NS_ERR_TOOBIG;
            }
            product *= job->local[d]; /* validated: <= NS_MAX_LOCAL_ITEMS */
        }
        size_t limit = kernel_wg < r->max_wg ? kernel_wg : r->max_wg;
        if (product > limit) {
            ns_cl_errf(err, errlen,
                       "work-group of %llu work-items is over the limit of %zu "
                       "for this kernel on this device",
                       (unsigned long long)product, limit);
            return NS_ERR_TOOBIG;
        }
    }
    uint64_t local = kernel_local;
    for (uint32_t i = 0; i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_LOCAL)
            local += job->args[i].size;
    if (local > r->local_mem_bytes) {
        ns_cl_errf(
            err, errlen,
            "kernel needs %llu bytes of local memory, the device has %llu",
            (unsigned long long)local, (unsigned long long)r->local_mem_bytes);
        return NS_ERR_TOOBIG;
    }
    return NS_OK;
}

/* Microseconds between an event's START and END, 0 if unknown. */
static uint64_t s_event_us(cl_event ev)
{
    cl_ulong s = 0, f = 0;
    if (!ev ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s,
                                NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof f, &f,
                                NULL) != CL_SUCCESS ||
        f < s)
        return 0;
    return (f - s) / 1000;
}

/* One IN buffer: the caller's memory in place on host-unified devices,
 * else a device buffer written now (its transfer time added to *write_us). */
static int s_input_buffer(ns_runner_t *r, const ns_input_t *in, size_t size,
                          cl_mem *mem, uint64_t *write_us, char *err,
                          size_t errlen)
{
    cl_int e = CL_SUCCESS;
    cl_event ev = NULL;
    if (r->host_unified && r->inputs_copied) {
        *mem = clCreateBuffer(r->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              size, (void *)(uintptr_t)in->data, &e);
        return *mem ? NS_OK
                    : ns_cl_fail(err, errlen, "clCreateBuffer (input)", e);
    }
    if (r->host_unified) {
        /* read in place, no copy: data outlives the call */
        *mem = clCreateBuffer(r->ctx, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR,
                              size, (void *)(uintptr_t)in->data, &e);
        return *mem ? NS_OK
                    : ns_cl_fail(err, errlen, "clCreateBuffer (input)", e);
    }
    *mem = clCreateBuffer(r->ctx, CL_MEM_READ_ONLY, size, NULL, &e);
    if (!*mem)
        return ns_cl_fail(err, errlen, "clCreateBuffer (input)", e);
    e = clEnqueueWriteBuffer(r->queue, *mem, CL_TRUE, 0, size, in->data, 0,
                             NULL, &ev);
    if (ev) {
        *write_us += s_event_us(ev);
        clReleaseEvent(ev);
    }
    return e == CL_SUCCESS ? NS_OK
                           : ns_cl_fail(err, errlen, "clEnqueueWriteBuffer", e);
}

/* Buffers and kernel arguments. Output buffers wrap outputs on
 * host-unified devices, else are the device's own; with units (run_units)
 * they are read-write and start with the content of outputs. */
static int s_buffers(ns_runner_t *r, const ns_job_t *job,
                     const ns_input_t *inputs, uint8_t **outputs, bool units,
                     s_call_t *c, ns_timings_t *t, char *err, size_t errlen)
{
    cl_int e = CL_SUCCESS;
    uint64_t t0 = ns_mono_us();
    uint64_t write_us = 0;
    int rc = NS_OK;

    for (uint32_t i = 0; i < job->n_args; i++) {
        const ns_arg_t *a = &job->args[i];
        const void *val = NULL;
        size_t size = 0;
        switch (a->kind) {
        case NS_ARG_IN:
            /* a NULL buffer for an empty input (clCreateBuffer refuses 0) */
            if (a->size > 0) {
                rc = s_input_buffer(r, &inputs[i], (size_t)a->size, &c->mem[i],
                                    &write_us, err, errlen);
                if (rc != NS_OK)
                    goto out;
            }
            val = &c->mem[i];
            size = sizeof(cl_mem);
            break;
        case NS_ARG_OUT: {
            cl_mem_flags f = units ? CL_MEM_READ_WRITE : CL_MEM_WRITE_ONLY;
            if (r->host_unified)
                c->mem[i] = clCreateBuffer(r->ctx, f | CL_MEM_USE_HOST_PTR,
                                           (size_t)a->size, outputs[i], &e);
            else if (units)
                c->mem[i] = clCreateBuffer(r->ctx, f | CL_MEM_COPY_HOST_PTR,
                                           (size_t)a->size, outputs[i], &e);
            else
                c->mem[i] =
                    clCreateBuffer(r->ctx, f, (size_t)a->size, NULL, &e);
            if (!c->mem[i]) {
                rc = ns_cl_fail(err, errlen, "clCreateBuffer (output)", e);
                goto out;
            }
            val = &c->mem[i];
            size = sizeof(cl_mem);
            break;
        }
        case NS_ARG_U32:
            val = &a->v.u32;
            size = sizeof a->v.u32;
            break;
        case NS_ARG_I32:
            val = &a->v.i32;
            size = sizeof a->v.i32;
            break;
        case NS_ARG_U64:
            val = &a->v.u64;
            size = sizeof a->v.u64;
            break;
        case NS_ARG_I64:
            val = &a->v.i64;
            size = sizeof a->v.i64;
            break;
        case NS_ARG_F32:
            val = &a->v.f32;
            size = sizeof a->v.f32;
            break;
        case NS_ARG_F64:
            val = &a->v.f64;
            size = sizeof a->v.f64;
            break;
        case NS_ARG_LOCAL:
            val = NULL;
            size = (size_t)a->size;
            break;
        default:
            ns_cl_errf(err, errlen, "arg %u: unknown kind %u", i, a->kind);
            rc = NS_ERR_INVAL;
            goto out;
        }
        e = clSetKernelArg(c->kernel, i, size, val);
        if (e != CL_SUCCESS) {
            char what[48];
            snprintf(what, sizeof what, "arg %u: clSetKernelArg", i);
            rc = ns_cl_fail(err, errlen, what, e);
            goto out;
        }
    }
out:
    t->upload_us = ns_mono_us() - t0;
    if (write_us > t->upload_us)
        t->upload_us = write_us;
    return rc;
}

/* A command's final status: negative if it failed on the device. */
static cl_int s_event_status(cl_event ev)
{
    cl_int st = CL_COMPLETE;
    if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st,
                       NULL) != CL_SUCCESS)
        return CL_INVALID_EVENT;
    return st;
}

static int s_check_outputs(const ns_job_t *job, uint8_t **outputs, char *err,
                           size_t errlen)
{
    for (uint32_t i = 0; i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_OUT && (!outputs || !outputs[i])) {
            ns_cl_errf(err, errlen, "arg %u: no output buffer", i);
            return NS_ERR_INVAL;
        }
    return NS_OK;
}

/* Common first steps of both calls. */
static int s_prepare(ns_runner_t *r, const ns_job_t *job,
                     const ns_input_t *inputs, bool rerun, ns_timings_t *t,
                     char *err, size_t errlen)
{
    /* cheap checks first: hashing the inputs costs the most */
    int rc = ns_job_validate(job, err, errlen);
    if (rc != NS_OK)
        return rc;
    rc = s_check_memory(r, job, err, errlen);
    if (rc != NS_OK)
        return rc;
    rc = s_check_inputs(job, inputs, err, errlen);
    if (rc != NS_OK)
        return rc;
    return s_program(r, job, rerun, t, err, errlen);
}

/* Queue the read-back of every OUT buffer into outputs (a map and unmap
 * where the device wrote them in place), one event each in c. */
static int s_read_back(ns_runner_t *r, const ns_job_t *job, uint8_t **outputs,
                       s_call_t *c, char *err, size_t errlen)
{
    cl_int e = CL_SUCCESS;
    for (uint32_t i = 0; i < job->n_args; i++) {
        size_t size = (size_t)job->args[i].size;
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        if (r->host_unified) {
            /* the device wrote outputs[i] in place; mapping syncs it */
            void *p = clEnqueueMapBuffer(r->queue, c->mem[i], CL_FALSE,
                                         CL_MAP_READ, 0, size, 0, NULL,
                                         &c->events[c->n_events++], &e);
            if (!p) {
                return ns_cl_fail(err, errlen, "clEnqueueMapBuffer", e);
            }
            e = clEnqueueUnmapMemObject(r->queue, c->mem[i], p, 0, NULL, NULL);
            if (e != CL_SUCCESS) {
                return ns_cl_fail(err, errlen, "clEnqueueUnmapMemObject", e);
            }
        } else {
            e = clEnqueueReadBuffer(r->queue, c->mem[i], CL_FALSE, 0, size,
                                    outputs[i], 0, NULL,
                                    &c->events[c->n_events++]);
            if (e != CL_SUCCESS) {
                return ns_cl_fail(err, errlen, "clEnqueueReadBuffer", e);
            }
        }
    }
    return NS_OK;
}

static int s_run(ns_runner_t *r, const ns_job_t *job, const ns_input_t *inputs,
                 uint8_t **outputs, ns_timings_t *t, char *err, size_t errlen)
{
    ns_timings_t tt;
    s_call_t c;
    cl_int e = CL_SUCCESS;
    size_t global[3], local[3];

    assert(r && job);
    memset(&tt, 0, sizeof tt);
    memset(&c, 0, sizeof c);
    if (err && errlen)
        err[0] = '\0';
    /* A shard runs its rows from the re-run build, at an offset, on
     * outputs that start as zeros (job.h, "Shards"). */
    bool shard = job->shard_rows != 0;
    int rc = s_prepare(r, job, inputs, shard, &tt, err, errlen);
    if (rc != NS_OK)
        goto out;
    rc = s_check_outputs(job, outputs, err, errlen);
    if (rc != NS_OK)
        goto out;
    rc = s_kernel(r, job, &c, err, errlen);
    if (rc != NS_OK)
        goto out;
    for (uint32_t i = 0; shard && i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_OUT)
            memset(outputs[i], 0, (size_t)job->args[i].size);
    rc = s_buffers(r, job, inputs, outputs, shard, &c, &tt, err, errlen);
    if (rc != NS_OK)
        goto out;

    c.events = calloc(1 + job->n_args, sizeof *c.events);
    if (!c.events) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    size_t offset[3] = {0, 0, 0};
    for (uint32_t d = 0; d < job->dims; d++) {
        global[d] = (size_t)job->global[d];
        local[d] = (size_t)job->local[d];
    }
    if (shard) {
        uint32_t d = job->shard_dim;
        size_t row = s_has_local(job) ? local[d] : 1;
        offset[d] = (size_t)job->shard_first * row;
        global[d] = (size_t)job->shard_rows * row;
    }
    e = clEnqueueNDRangeKernel(
        r->queue, c.kernel, job->dims, shard ? offset : NULL, global,
        s_has_local(job) ? local : NULL, 0, NULL, &c.events[c.n_events++]);
    if (e != CL_SUCCESS) {
        rc = ns_cl_fail(err, errlen, "clEnqueueNDRangeKernel", e);
        goto out;
    }
    rc = s_read_back(r, job, outputs, &c, err, errlen);
    if (rc != NS_OK)
        goto out;
    e = clFinish(r->queue);
    if (e != CL_SUCCESS) {
        rc = ns_cl_fail(err, errlen, "clFinish", e);
        goto out;
    }
    for (size_t j = 0; j < c.n_events; j++) {
        cl_int st = s_event_status(c.events[j]);
        if (st < 0) {
            rc = ns_cl_fail(err, errlen, j == 0 ? "kernel" : "read back", st);
            goto out;
        }
        if (j == 0)
            tt.run_us += s_event_us(c.events[j]);
        else
            tt.download_us += s_event_us(c.events[j]);
    }
out:
    s_call_release(r, &c);
    if (t)
        *t = tt;
    return rc;
}

/* Launch origin and size of unit idx (runner.h): one work-group of the
 * job's local size at its origin, or one work-item. */
static void s_unit_range(const ns_job_t *job, bool group, uint64_t idx,
                         size_t *offset, size_t *size)
{
    for (uint32_t d = 0; d < job->dims; d++) {
        uint64_t unit = group ? job->local[d] : 1;
        uint64_t count = job->global[d] / unit;
        offset[d] = (size_t)(idx % count * unit);
        size[d] = (size_t)unit;
        idx /= count;
    }
}

static int s_run_units(ns_runner_t *r, const ns_job_t *job,
                       const ns_input_t *inputs, const uint64_t *units,
                       uint32_t n, uint8_t **outputs, ns_timings_t *t,
                       char *err, size_t errlen)
{
    ns_timings_t tt;
    s_call_t c;
    cl_int e = CL_SUCCESS;
    uint32_t n_out = 0;

    assert(r && job && (n == 0 || units));
    memset(&tt, 0, sizeof tt);
    memset(&c, 0, sizeof c);
    if (err && errlen)
        err[0] = '\0';
    int rc = s_prepare(r, job, inputs, true, &tt, err, errlen);
    if (rc != NS_OK)
        goto out;
    rc = s_check_outputs(job, outputs, err, errlen);
    if (rc != NS_OK)
        goto out;
    uint64_t n_units = ns_job_units(job);
    for (uint32_t j = 0; j < n; j++)
        if (units[j] >= n_units) {
            ns_cl_errf(err, errlen, "unit %llu out of range (%llu units)",
                       (unsigned long long)units[j],
                       (unsigned long long)n_units);
            rc = NS_ERR_INVAL;
            goto out;
        }
    for (uint32_t i = 0; i < job->n_args; i++)
        n_out += job->args[i].kind == NS_ARG_OUT;
    rc = s_kernel(r, job, &c, err, errlen);
    if (rc != NS_OK)
        goto out;
    rc = s_buffers(r, job, inputs, outputs, true, &c, &tt, err, errlen);
    if (rc != NS_OK)
        goto out;
    c.events = calloc((size_t)S_ITEM_BATCH + n_out, sizeof *c.events);
    if (!c.events) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    bool group = s_has_local(job);
    /* Batches of launches, one clFinish each (the queue is in order). */
    for (uint32_t b0 = 0; b0 < n; b0 += S_ITEM_BATCH) {
        uint32_t b1 = n - b0 < S_ITEM_BATCH ? n : b0 + S_ITEM_BATCH;
        for (uint32_t j = b0; j < b1; j++) {
            size_t offset[3], size[3];
            s_unit_range(job, group, units[j], offset, size);
            e = clEnqueueNDRangeKernel(r->queue, c.kernel, job->dims, offset,
                                       size, size, 0, NULL,
                                       &c.events[c.n_events++]);
            if (e != CL_SUCCESS) {
                rc = ns_cl_fail(err, errlen, "clEnqueueNDRangeKernel", e);
                goto out;
            }
        }
        bool last = b1 == n;
        if (last) {
            rc = s_read_back(r, job, outputs, &c, err, errlen);
            if (rc != NS_OK)
                goto out;
        }
        e = clFinish(r->queue);
        if (e != CL_SUCCESS) {
            rc = ns_cl_fail(err, errlen, "clFinish", e);
            goto out;
        }
        uint32_t launches = b1 - b0;
        for (size_t k = 0; k < c.n_events; k++) {
            cl_int st = s_event_status(c.events[k]);
            bool launch = k < launches;
            if (st < 0) {
                rc = ns_cl_fail(err, errlen, launch ? "kernel" : "read back",
                                st);
                goto out;
            }
            if (launch)
                tt.run_us += s_event_us(c.events[k]);
            else
                tt.download_us += s_event_us(c.events[k]);
        }
        s_call_release_events(&c);
    }
    if (n == 0) {
        rc = s_read_back(r, job, outputs, &c, err, errlen);
        if (rc == NS_OK && (e = clFinish(r->queue)) != CL_SUCCESS)
            rc = ns_cl_fail(err, errlen, "clFinish", e);
    }
out:
    s_call_release(r, &c);
    if (t)
        *t = tt;
    return rc;
}

void *ns_buf_alloc(uint64_t n)
{
    const uint64_t page = 4096, huge = UINT64_C(2) << 20;
    uint64_t align = n >= NS_BUF_HUGE_MIN ? huge : page;
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - huge)
        return NULL;
    size_t size = (size_t)((n + align - 1) / align * align);
    void *p = aligned_alloc((size_t)align, size);
#ifdef MADV_HUGEPAGE
    if (p && align == huge)
        (void)madvise(p, size, MADV_HUGEPAGE); /* advice only */
#endif
    return p;
}

/* The kept buffers (ns_buf_get): at most S_KEEP, S_KEEP_BYTES together,
 * each as large as the request it served (rounded by ns_buf_alloc, not
 * recorded). */
#define S_KEEP 8
#define S_KEEP_BYTES (UINT64_C(256) << 20)

static struct {
    pthread_mutex_t lock;
    void *p[S_KEEP];
    uint64_t cap[S_KEEP];
} s_kept = {PTHREAD_MUTEX_INITIALIZER, {NULL}, {0}};

void *ns_buf_get(uint64_t n)
{
    void *drop[S_KEEP] = {NULL}, *p = NULL;
    pthread_mutex_lock(&s_kept.lock);
    /* the same size only: what a buffer is put back with is then its
     * size, and the pool's byte cap holds */
    int best = -1;
    for (int i = 0; i < S_KEEP && best < 0; i++)
        if (s_kept.p[i] && s_kept.cap[i] == n)
            best = i;
    if (best >= 0) {
        p = s_kept.p[best];
        s_kept.p[best] = NULL;
    } else {
        /* none fits: let every kept one go before a new one is made */
        for (int i = 0; i < S_KEEP; i++) {
            drop[i] = s_kept.p[i];
            s_kept.p[i] = NULL;
        }
    }
    pthread_mutex_unlock(&s_kept.lock);
    for (int i = 0; i < S_KEEP; i++)
        free(drop[i]);
    return p ? p : ns_buf_alloc(n);
}

void ns_buf_put(void *p, uint64_t n)
{
    if (!p)
        return;
    pthread_mutex_lock(&s_kept.lock);
    uint64_t kept = 0;
    for (int i = 0; i < S_KEEP; i++)
        kept += s_kept.p[i] ? s_kept.cap[i] : 0;
    for (int i = 0; i < S_KEEP && p && kept + n <= S_KEEP_BYTES; i++)
        if (!s_kept.p[i]) {
            s_kept.p[i] = p;
            s_kept.cap[i] = n;
            p = NULL;
        }
    pthread_mutex_unlock(&s_kept.lock);
    free(p); /* no room */
}

/* ---- pipelines (job.h) --------------------------------------------------- */

/* Step s's view of a pipeline's buffers: its inputs (the job's, and the
 * outputs of earlier steps it reads) and the outputs it writes. */
static void s_step_io(const ns_job_t *job, const ns_job_t *view,
                      const uint32_t *map, const ns_input_t *inputs,
                      uint8_t **outputs, ns_input_t *in_v, uint8_t **out_v)
{
    memset(in_v, 0, NS_MAX_ARGS * sizeof *in_v);
    memset(out_v, 0, NS_MAX_ARGS * sizeof *out_v);
    for (uint32_t i = 0; i < view->n_args; i++) {
        uint32_t b = map[i];
        if (b == NS_JOB_NO_BUF)
            continue;
        if (view->args[i].kind == NS_ARG_OUT)
            out_v[i] = outputs[b];
        else if (job->args[b].kind == NS_ARG_IN)
            in_v[i] = inputs[b];
        else /* an earlier step's output, read as it is */
            in_v[i] = (ns_input_t){outputs[b], (size_t)job->args[b].size, true};
    }
}

static void s_timings_add(ns_timings_t *sum, const ns_timings_t *t)
{
    sum->build_us += t->build_us;
    sum->upload_us += t->upload_us;
    sum->run_us += t->run_us;
    sum->download_us += t->download_us;
    sum->cache_hit = sum->cache_hit && t->cache_hit;
}

/* Every step in order; a failure names its step. */
static int s_run_pipeline(ns_runner_t *r, const ns_job_t *job,
                          const ns_input_t *inputs, uint8_t **outputs,
                          ns_timings_t *t, char *err, size_t errlen)
{
    ns_timings_t sum = {.cache_hit = true}, one;
    ns_input_t in_v[NS_MAX_ARGS];
    uint8_t *out_v[NS_MAX_ARGS];
    uint32_t map[NS_MAX_ARGS];
    ns_job_t view;
    char why[512];
    int rc = ns_job_validate(job, err, errlen);
    for (uint32_t s = 0; s < job->n_steps && rc == NS_OK; s++) {
        ns_job_step_view(job, s, &view, map);
        s_step_io(job, &view, map, inputs, outputs, in_v, out_v);
        rc = s_run(r, &view, in_v, out_v, &one, why, sizeof why);
        s_timings_add(&sum, &one);
        if (rc != NS_OK && err && errlen)
            snprintf(err, errlen, "step %u (%s): %s", s + 1, view.entry, why);
    }
    if (t)
        *t = sum;
    return rc;
}

/* The units of each step, the last step first: a unit reads the outputs
 * of earlier steps as the caller's buffers hold them before any unit of
 * those steps runs again (a re-run of the claim reads the claim). */
static int s_run_pipeline_units(ns_runner_t *r, const ns_job_t *job,
                                const ns_input_t *inputs, const uint64_t *units,
                                uint32_t n, uint8_t **outputs, ns_timings_t *t,
                                char *err, size_t errlen)
{
    ns_timings_t sum = {.cache_hit = true}, one;
    ns_input_t in_v[NS_MAX_ARGS];
    uint8_t *out_v[NS_MAX_ARGS];
    uint32_t map[NS_MAX_ARGS];
    ns_job_t view;
    char why[512];
    int rc = ns_job_validate(job, err, errlen);
    if (rc != NS_OK)
        return rc;
    uint64_t total = ns_job_units(job);
    for (uint32_t j = 0; j < n; j++)
        if (units[j] >= total) {
            if (err && errlen)
                snprintf(err, errlen, "unit %llu: the pipeline has %llu",
                         (unsigned long long)units[j],
                         (unsigned long long)total);
            return NS_ERR_INVAL;
        }
    uint64_t *mine = n ? malloc((size_t)n * sizeof *mine) : NULL;
    if (n && !mine)
        return NS_ERR_NOMEM;
    for (uint32_t s = job->n_steps; s-- > 0 && rc == NS_OK;) {
        uint64_t first = ns_job_step_first(job, s);
        uint64_t count = ns_job_step_units(job, s);
        uint32_t k = 0;
        for (uint32_t j = 0; j < n; j++)
            if (units[j] >= first && units[j] - first < count)
                mine[k++] = units[j] - first;
        if (k == 0)
            continue;
        ns_job_step_view(job, s, &view, map);
        s_step_io(job, &view, map, inputs, outputs, in_v, out_v);
        rc = s_run_units(r, &view, in_v, mine, k, out_v, &one, why, sizeof why);
        s_timings_add(&sum, &one);
        if (rc != NS_OK && err && errlen)
            snprintf(err, errlen, "step %u (%s): %s", s + 1, view.entry, why);
    }
    free(mine);
    if (t)
        *t = sum;
    return rc;
}

int ns_runner_run(ns_runner_t *r, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t **outputs, ns_timings_t *t, char *err, size_t errlen)
{
    assert(r);
    pthread_mutex_lock(&r->lock);
    r->inputs_copied = job->n_steps != 0;
    int rc = job->n_steps
                 ? s_run_pipeline(r, job, inputs, outputs, t, err, errlen)
                 : s_run(r, job, inputs, outputs, t, err, errlen);
    r->inputs_copied = false;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int ns_runner_run_units(ns_runner_t *r, const ns_job_t *job,
                        const ns_input_t *inputs, const uint64_t *units,
                        uint32_t n, uint8_t **outputs, ns_timings_t *t,
                        char *err, size_t errlen)
{
    assert(r);
    pthread_mutex_lock(&r->lock);
    r->inputs_copied = job->n_steps != 0;
    int rc = job->n_steps ? s_run_pipeline_units(r, job, inputs, units, n,
                                                 outputs, t, err, errlen)
                          : s_run_units(r, job, inputs, units, n, outputs, t,
                                        err, errlen);
    r->inputs_copied = false;
    pthread_mutex_unlock(&r->lock);
    return rc;
}
