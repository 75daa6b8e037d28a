/* devices.c - OpenCL device discovery and the datadir device cache.
 *
 * ns_devices_probe() talks to the ocl-icd loader directly. The node never
 * does: ns_devices_probe_cached() runs the probe in a forked child that
 * writes <datadir>/devices.msgpack and exits, so a driver that crashes,
 * hangs or starts threads stays out of the node process. The same child
 * fills the benchmark figures (devbench.h).
 */
#include "nightshift/devices.h"
#include "nightshift/devbench.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

#define NS_DEVICES_CACHE_FILE "devices.msgpack"
/* The cache holds at most NS_MAX_DEVICES entries of a few hundred bytes. */
#define NS_MAX_DEVICES_CACHE (64 * 1024)
/* Longest string we accept from a driver query (extension lists are long). */
#define NS_MAX_CL_QUERY (64 * 1024)
/* Child exit codes, mapped to a reason in the parent's log line. */
#define S_CHILD_OK 0
#define S_CHILD_PROBE 10
#define S_CHILD_ENCODE 11
#define S_CHILD_WRITE 12

/* Copy a driver string into out[cap + 1]: printable ASCII only (control
 * and non-ASCII bytes become '?', so a clamp never splits a character and
 * the text is safe for logs, JSON and ns_mpr_str), leading and trailing
 * spaces trimmed, at most cap bytes. */
static void s_sanitize(char *out, size_t cap, const char *in, size_t in_len)
{
    size_t start = 0, n = 0;
    while (start < in_len && (in[start] == ' ' || in[start] == '\t'))
        start++;
    for (size_t i = start; i < in_len && in[i] != '\0' && n < cap; i++) {
        unsigned char c = (unsigned char)in[i];
        out[n++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

/* Query a string parameter of any size; *out is malloc'd and NUL-ended. */
typedef cl_int (*s_info_fn)(void *obj, cl_uint param, size_t size, void *val,
                            size_t *size_ret);

static cl_int s_platform_info(void *obj, cl_uint param, size_t size, void *val,
                              size_t *size_ret)
{
    return clGetPlatformInfo((cl_platform_id)obj, param, size, val, size_ret);
}

static cl_int s_device_info(void *obj, cl_uint param, size_t size, void *val,
                            size_t *size_ret)
{
    return clGetDeviceInfo((cl_device_id)obj, param, size, val, size_ret);
}

static int s_query_str(s_info_fn fn, void *obj, cl_uint param, char **out)
{
    size_t size = 0;
    *out = NULL;
    if (fn(obj, param, 0, NULL, &size) != CL_SUCCESS)
        return NS_ERR_OPENCL;
    if (size > NS_MAX_CL_QUERY)
        return NS_ERR_TOOBIG;
    char *s = calloc(1, size + 1);
    if (!s)
        return NS_ERR_NOMEM;
    if (size > 0 && fn(obj, param, size, s, NULL) != CL_SUCCESS) {
        free(s);
        return NS_ERR_OPENCL;
    }
    s[size] = '\0';
    *out = s;
    return NS_OK;
}

/* A string field: sanitized into out[cap + 1], "" when the query fails. */
static void s_query_field(s_info_fn fn, void *obj, cl_uint param, char *out,
                          size_t cap)
{
    char *s = NULL;
    out[0] = '\0';
    if (s_query_str(fn, obj, param, &s) == NS_OK)
        s_sanitize(out, cap, s, strlen(s));
    free(s);
}

static int s_has_extension(cl_device_id dev, const char *name)
{
    char *ext = NULL;
    int found = 0;
    if (s_query_str(s_device_info, dev, CL_DEVICE_EXTENSIONS, &ext) != NS_OK)
        return 0;
    size_t len = strlen(name);
    for (const char *p = ext; (p = strstr(p, name)) != NULL; p += len) {
        int starts = p == ext || p[-1] == ' ';
        int ends = p[len] == '\0' || p[len] == ' ';
        if (starts && ends) {
            found = 1;
            break;
        }
    }
    free(ext);
    return found;
}

static uint32_t s_devtype(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return NS_DEV_GPU;
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return NS_DEV_ACCEL;
    if (t & CL_DEVICE_TYPE_CPU)
        return NS_DEV_CPU;
    return NS_DEV_OTHER;
}

/* Fill one entry. Numeric queries that fail leave 0: a device with odd
 * answers is still listed, and callers filter on the figures. */
static void s_fill_device(cl_device_id dev, const char *platform,
                          ns_device_t *d)
{
    cl_device_type type = 0;
    cl_ulong global_mem = 0, max_alloc = 0;
    cl_uint units = 0, clock = 0;
    cl_device_fp_config fp32 = 0, fp64 = 0;

    memset(d, 0, sizeof *d);
    s_query_field(s_device_info, dev, CL_DEVICE_NAME, d->info.name,
                  NS_MAX_DEVICE_NAME);
    if (d->info.name[0] == '\0')
        strcpy(d->info.name, "unknown");
    s_query_field(s_device_info, dev, CL_DEVICE_VENDOR, d->info.vendor,
                  NS_MAX_DEVICE_NAME);
    s_query_field(s_device_info, dev, CL_DEVICE_OPENCL_C_VERSION,
                  d->info.cl_c_version, NS_MAX_CL_VERSION);
    s_query_field(s_device_info, dev, CL_DRIVER_VERSION, d->driver_version,
                  NS_MAX_DEVICE_NAME);
    s_query_field(s_device_info, dev, CL_DEVICE_VERSION, d->device_version,
                  NS_MAX_DEVICE_NAME);
    memcpy(d->platform, platform, sizeof d->platform);

    if (clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) !=
        CL_SUCCESS)
        type = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem,
                        &global_mem, NULL) != CL_SUCCESS)
        global_mem = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                        &max_alloc, NULL) != CL_SUCCESS)
        max_alloc = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                        NULL) != CL_SUCCESS)
        units = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof clock,
                        &clock, NULL) != CL_SUCCESS)
        clock = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp32, &fp32,
                        NULL) != CL_SUCCESS)
        fp32 = 0;
    /* Before OpenCL 1.2 the query may fail on devices without doubles. */
    if (clGetDeviceInfo(dev, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof fp64, &fp64,
                        NULL) != CL_SUCCESS)
        fp64 = 0;

    d->info.type = s_devtype(type);
    d->info.global_mem_bytes = global_mem;
    d->info.max_alloc_bytes = max_alloc;
    d->info.compute_units = units;
    d->info.clock_mhz = clock;
    d->info.gflops = 0; /* filled by the benchmark, not by discovery */
    d->info.gbps = 0;
    d->fp64 = fp64 != 0 || s_has_extension(dev, "cl_khr_fp64");
    d->correctly_rounded_div_sqrt =
        (fp32 & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
}

/* Append the devices of one platform to out[*n..max). Per-platform
 * failures are logged and skipped so one broken ICD hides only itself. */
static void s_probe_platform(cl_platform_id plat, uint32_t pi, ns_device_t *out,
                             uint32_t max, uint32_t *n)
{
    char platform[NS_MAX_DEVICE_NAME + 1];
    cl_device_id *devs = NULL;
    cl_uint nd = 0;

    s_query_field(s_platform_info, plat, CL_PLATFORM_NAME, platform,
                  NS_MAX_DEVICE_NAME);
    cl_int cl = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (cl == CL_DEVICE_NOT_FOUND || (cl == CL_SUCCESS && nd == 0))
        goto out;
    if (cl != CL_SUCCESS) {
        ns_warn(NS_MOD_EXEC,
                "event=platform_skipped platform=%u reason=get_device_ids "
                "cl_err=%d",
                pi, (int)cl);
        goto out;
    }
    devs = calloc(nd, sizeof *devs);
    if (!devs)
        goto out;
    cl = clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, nd, devs, &nd);
    if (cl != CL_SUCCESS) {
        ns_warn(NS_MOD_EXEC,
                "event=platform_skipped platform=%u reason=get_device_ids "
                "cl_err=%d",
                pi, (int)cl);
        goto out;
    }
    for (cl_uint di = 0; di < nd; di++) {
        if (*n >= max) {
            ns_warn(NS_MOD_EXEC,
                    "event=devices_truncated max=%u platform=%u skipped=%u",
                    max, pi, (unsigned)(nd - di));
            break;
        }
        s_fill_device(devs[di], platform, &out[*n]);
        out[*n].platform_index = pi;
        out[*n].device_index = di;
        (*n)++;
    }
out:
    /* Root devices from clGetDeviceIDs are not reference-counted (and
     * clReleaseDevice is absent before OpenCL 1.2): nothing to release. */
    free(devs);
}

int ns_devices_probe(ns_device_t *out, uint32_t max, uint32_t *n_out)
{
    int rc = NS_OK;
    cl_platform_id *plats = NULL;
    cl_uint np = 0;

    *n_out = 0;
    cl_int cl = clGetPlatformIDs(0, NULL, &np);
    if (cl == CL_PLATFORM_NOT_FOUND_KHR || (cl == CL_SUCCESS && np == 0))
        goto out; /* no ICD installed: zero devices, not an error */
    if (cl != CL_SUCCESS) {
        ns_warn(NS_MOD_EXEC, "event=opencl_loader_failed cl_err=%d", (int)cl);
        rc = NS_ERR_OPENCL;
        goto out;
    }
    plats = calloc(np, sizeof *plats);
    if (!plats) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    cl = clGetPlatformIDs(np, plats, &np);
    if (cl != CL_SUCCESS) {
        ns_warn(NS_MOD_EXEC, "event=opencl_loader_failed cl_err=%d", (int)cl);
        rc = NS_ERR_OPENCL;
        goto out;
    }
    for (cl_uint pi = 0; pi < np; pi++)
        s_probe_platform(plats[pi], pi, out, max, n_out);
out:
    free(plats); /* platform ids are not reference-counted objects */
    return rc;
}

/* ---- cached probe in a child process ---------------------------------- */

/* Encode devs with their figures and write the cache file; exits the
 * child on failure. */
static void s_child_write(const char *path, const ns_device_t *devs,
                          const ns_devbench_t *bench, uint32_t n)
{
    ns_devinfo_t infos[NS_MAX_DEVICES];
    char *buf = NULL;
    size_t len = 0;

    for (uint32_t i = 0; i < n; i++) {
        infos[i] = devs[i].info;
        infos[i].gflops = bench[i].gflops;
        infos[i].gbps = bench[i].gbps;
    }
    if (ns_devinfo_list_encode(infos, n, &buf, &len) != NS_OK)
        _exit(S_CHILD_ENCODE);
    int rc = ns_file_write_atomic(path, buf, len, 0644);
    free(buf);
    if (rc != NS_OK)
        _exit(S_CHILD_WRITE);
}

/* NS_DEVBENCH=0 in the environment: figures from the benchmark cache only,
 * never a new measurement (test networks starting many nodes at once). */
static int s_bench_disabled(void)
{
    const char *v = getenv("NS_DEVBENCH");
    return v && strcmp(v, "0") == 0;
}

static void s_child(const char *datadir, const char *path)
    __attribute__((noreturn));

static void s_child(const char *datadir, const char *path)
{
    ns_device_t devs[NS_MAX_DEVICES];
    ns_devbench_t bench[NS_MAX_DEVICES];
    uint32_t n = 0, missing = 0;

    if (ns_devices_probe(devs, NS_MAX_DEVICES, &n) != NS_OK)
        _exit(S_CHILD_PROBE);
    /* First the list with the cached figures, so that a benchmark which
     * outlasts the parent's timeout still leaves a fresh device list. */
    if (ns_devbench_cached(datadir, devs, n, NS_DEVBENCH_CACHE_ONLY, NULL,
                           bench) != NS_OK)
        memset(bench, 0, sizeof bench);
    s_child_write(path, devs, bench, n);
    for (uint32_t i = 0; i < n; i++)
        if (bench[i].gflops <= 0)
            missing++;
    if (missing > 0 && !s_bench_disabled() &&
        ns_devbench_cached(datadir, devs, n, 0, NULL, bench) == NS_OK)
        s_child_write(path, devs, bench, n);
    /* _exit: no atexit handlers, no flush of the parent's stdio buffers. */
    _exit(S_CHILD_OK);
}

/* Remove ns_file_write_atomic's temp file for <datadir>/name, left behind
 * when the child was killed mid-write. */
static void s_unlink_temp(const char *datadir, const char *name, pid_t pid)
{
    char path[PATH_MAX], tmp[PATH_MAX];
    if (ns_path_join(path, sizeof path, datadir, name) == NS_OK &&
        snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)pid) <
            (int)sizeof tmp)
        unlink(tmp);
}

static void s_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Wait for the child; NULL if it exited 0, else a logfmt-safe reason. */
static const char *s_wait_child(pid_t pid, uint32_t timeout_ms,
                                const char *datadir, int *detail)
{
    uint64_t deadline = ns_mono_ms() + timeout_ms;
    uint64_t nap_ms = 1;
    int status = 0;
    *detail = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *detail = errno;
            return "waitpid"; /* e.g. SIGCHLD ignored: already reaped */
        }
        uint64_t now = ns_mono_ms();
        if (now >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            s_unlink_temp(datadir, NS_DEVICES_CACHE_FILE, pid);
            s_unlink_temp(datadir, NS_DEVBENCH_CACHE_FILE, pid);
            *detail = (int)timeout_ms;
            return "timeout";
        }
        s_sleep_ms(nap_ms < deadline - now ? nap_ms : deadline - now);
        if (nap_ms < 20)
            nap_ms *= 2;
    }
    if (WIFSIGNALED(status)) {
        *detail = WTERMSIG(status);
        return "signal";
    }
    if (!WIFEXITED(status)) {
        *detail = status;
        return "status";
    }
    *detail = WEXITSTATUS(status);
    switch (WEXITSTATUS(status)) {
    case S_CHILD_OK:
        return NULL;
    case S_CHILD_PROBE:
        return "opencl";
    case S_CHILD_ENCODE:
        return "encode";
    case S_CHILD_WRITE:
        return "write";
    default:
        return "exit";
    }
}

static int s_read_cache(const char *path, ns_devinfo_t *devs, uint32_t *n)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    *n = 0;
    int rc = ns_file_read(path, NS_MAX_DEVICES_CACHE, &buf, &len);
    if (rc != NS_OK)
        goto out;
    rc = ns_devinfo_list_decode(buf, len, devs, n);
out:
    if (rc != NS_OK) {
        *n = 0; /* the decoder may have stored a count it then rejected */
        memset(devs, 0, NS_MAX_DEVICES * sizeof *devs);
    }
    free(buf);
    return rc;
}

int ns_devices_probe_cached(const char *datadir, uint32_t timeout_ms,
                            ns_devinfo_t *devs, uint32_t *n)
{
    char path[PATH_MAX];
    const char *reason = NULL;
    int detail = 0;

    *n = 0;
    int rc = ns_path_join(path, sizeof path, datadir, NS_DEVICES_CACHE_FILE);
    if (rc != NS_OK)
        return rc;

    pid_t pid = fork();
    if (pid == 0)
        s_child(datadir, path);
    if (pid < 0) {
        reason = "fork";
        detail = errno;
    } else {
        reason = s_wait_child(pid, timeout_ms, datadir, &detail);
    }

    rc = s_read_cache(path, devs, n);
    if (reason == NULL && rc == NS_OK)
        return NS_OK;
    if (reason == NULL)
        reason = "cache_unreadable"; /* the child said it wrote the file */
    if (rc == NS_OK)
        ns_warn(NS_MOD_EXEC,
                "event=device_probe_failed reason=%s detail=%d "
                "fallback=cache devices=%u",
                reason, detail, *n);
    else
        ns_warn(NS_MOD_EXEC,
                "event=device_probe_failed reason=%s detail=%d fallback=none "
                "cache_err=%s",
                reason, detail, ns_errname(rc));
    return NS_OK;
}
