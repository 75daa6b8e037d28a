/* test_devices.c - OpenCL discovery, the device list codec and the
 * datadir cache written by a forked probe.
 *
 * The cached-probe tests run first: once this process has loaded an ICD
 * (PoCL starts worker threads), a forked child may not use OpenCL again,
 * which is exactly the rule ns_devices_probe_cached documents.
 */
#include "nightshift/devices.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include "check.h"

#include <dirent.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Shared between the tests, which RUN in this order. */
static ns_devinfo_t s_cached[NS_MAX_DEVICES]; /* from the cached probe */
static uint32_t s_n_cached;

static int s_allow_no_devices(void)
{
    const char *v = getenv("NS_TEST_ALLOW_NO_DEVICES");
    return v && strcmp(v, "1") == 0;
}

/* NUL within cap, non-empty if required, printable ASCII, no edge spaces. */
static int s_clean_str(const char *s, size_t cap, int nonempty)
{
    size_t n = strnlen(s, cap + 1);
    if (n > cap || (nonempty && n == 0))
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return n == 0 || (s[0] != ' ' && s[n - 1] != ' ');
}

static void s_fake(ns_devinfo_t *d, const char *name)
{
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->vendor, sizeof d->vendor, "Test Vendor");
    d->type = NS_DEV_GPU;
    d->global_mem_bytes = 8ull << 30;
    d->max_alloc_bytes = 2ull << 30;
    d->compute_units = 40;
    d->clock_mhz = 1500;
    snprintf(d->cl_c_version, sizeof d->cl_c_version, "OpenCL C 3.0");
    d->gflops = 1234.5;
    d->gbps = 456.25;
}

static int s_write_file(const char *path, const void *data, size_t len)
{
    return ns_file_write_atomic(path, data, len, 0644);
}

/* The device count in a cache file, -1 if it does not decode. */
static long s_cache_count(const char *path)
{
    static ns_devinfo_t devs[NS_MAX_DEVICES];
    uint8_t *buf = NULL;
    size_t len = 0;
    uint32_t n = 0;
    long count = -1;
    if (ns_file_read(path, 64 * 1024, &buf, &len) == NS_OK &&
        ns_devinfo_list_decode(buf, len, devs, &n) == NS_OK)
        count = (long)n;
    free(buf);
    return count;
}

/* Entries in dir other than "." and ".." and the cache files themselves
 * (the device list and the benchmark figures its child keeps). */
static int s_stray_files(const char *dir)
{
    int stray = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            strcmp(e->d_name, "devices.msgpack") &&
            strcmp(e->d_name, "devbench.msgpack"))
            stray++;
    closedir(d);
    return stray;
}

TEST(codec_rejects)
{
    ns_devinfo_t devs[NS_MAX_DEVICES + 1];
    ns_devinfo_t back[NS_MAX_DEVICES];
    uint32_t n = 99;
    char *buf = NULL;
    size_t len = 0;

    for (uint32_t i = 0; i <= NS_MAX_DEVICES; i++)
        s_fake(&devs[i], i % 2 ? "fake gpu" : "fake cpu");

    /* Round trip of fixed values, doubles included. */
    CHECK_RC(ns_devinfo_list_encode(devs, 2, &buf, &len), NS_OK);
    CHECK_RC(ns_devinfo_list_decode((const uint8_t *)buf, len, back, &n),
             NS_OK);
    CHECK_EQ_INT(n, 2);
    CHECK(ns_devinfo_same(&devs[0], &back[0]));
    CHECK(ns_devinfo_same(&devs[1], &back[1]));

    /* Every strict prefix is rejected. */
    int accepted = 0;
    for (size_t cut = 0; cut < len; cut++)
        if (ns_devinfo_list_decode((const uint8_t *)buf, cut, back, &n) ==
            NS_OK)
            accepted++;
    CHECK_EQ_INT(accepted, 0);
    CHECK_RC(ns_devinfo_list_decode((const uint8_t *)buf, len - 1, back, &n),
             NS_ERR_TRUNCATED);
    free(buf);
    buf = NULL;

    /* NS_MAX_DEVICES is the cap on both sides. */
    CHECK_RC(ns_devinfo_list_encode(devs, NS_MAX_DEVICES + 1, &buf, &len),
             NS_ERR_TOOBIG);
    CHECK_RC(ns_devinfo_list_encode(devs, NS_MAX_DEVICES, &buf, &len), NS_OK);
    CHECK_RC(ns_devinfo_list_decode((const uint8_t *)buf, len, back, &n),
             NS_OK);
    CHECK_EQ_INT(n, NS_MAX_DEVICES);
    free(buf);

    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, NS_MAX_DEVICES + 1);
    for (uint32_t i = 0; i <= NS_MAX_DEVICES; i++)
        ns_devinfo_pack(&pk, &devs[i]);
    CHECK_RC(
        ns_devinfo_list_decode((const uint8_t *)sb.data, sb.size, back, &n),
        NS_ERR_TOOBIG);
    msgpack_sbuffer_destroy(&sb);

    /* A control character in a name is refused (names reach logs). */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 1);
    s_fake(&devs[0], "evil\nname");
    ns_devinfo_pack(&pk, &devs[0]);
    CHECK(ns_devinfo_list_decode((const uint8_t *)sb.data, sb.size, back, &n) !=
          NS_OK);
    msgpack_sbuffer_destroy(&sb);
}

/* Runs before this process touches OpenCL. */
TEST(probe_cached)
{
    ns_devinfo_t *fresh = s_cached;
    char dir[] = "/tmp/ns_test_devices_XXXXXX";
    char path[256];
    uint32_t n = 0, n2 = 0;
    ns_devinfo_t devs[NS_MAX_DEVICES];

    if (!CHECK(mkdtemp(dir) != NULL))
        return;
    CHECK_RC(ns_path_join(path, sizeof path, dir, "devices.msgpack"), NS_OK);

    /* 1. A fresh probe writes the cache and returns its content. */
    CHECK_RC(ns_devices_probe_cached(dir, 60000, fresh, &n), NS_OK);
    CHECK(n >= 1 || s_allow_no_devices());
    CHECK(n <= NS_MAX_DEVICES);
    CHECK_EQ_INT(s_cache_count(path), n);
    CHECK(access(path, F_OK) == 0);

    /* 2. Garbage in the cache is replaced by the next probe. */
    static const uint8_t garbage[] = {0xc1, 0xff, 0x00, 0x92, 0xde,
                                      0xad, 0xbe, 0xef, 0x13, 0x37};
    CHECK_RC(s_write_file(path, garbage, sizeof garbage), NS_OK);
    CHECK_RC(ns_devices_probe_cached(dir, 60000, devs, &n2), NS_OK);
    CHECK_EQ_INT(n2, n);
    for (uint32_t i = 0; i < n2 && i < n; i++)
        CHECK(ns_devinfo_same(&devs[i], &fresh[i]));
    CHECK_EQ_INT(s_cache_count(path), n);

    /* 3. A child that cannot write (file size limit) falls back to the
     * old cache, here a recognisable fake; garbage falls back to none.
     * An empty list encodes to one byte and would fit, so this needs a
     * device. */
    if (n >= 1) {
        ns_devinfo_t fake;
        char *buf = NULL;
        size_t len = 0;
        struct rlimit old, lim;
        s_fake(&fake, "cached fake device");
        CHECK_RC(ns_devinfo_list_encode(&fake, 1, &buf, &len), NS_OK);
        CHECK_RC(s_write_file(path, buf, len), NS_OK);
        free(buf);

        CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
        lim = old;
        lim.rlim_cur = 1;
        void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
        /* The expected warnings would hit the same limit on a file stderr. */
        ns_log_level old_level = ns_log_threshold;
        ns_log_threshold = NS_LOG_ERROR;
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        CHECK_RC(ns_devices_probe_cached(dir, 60000, devs, &n2), NS_OK);
        CHECK_EQ_INT(n2, 1);
        CHECK_STR(devs[0].name, "cached fake device");

        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
        CHECK_RC(s_write_file(path, garbage, sizeof garbage), NS_OK);
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        n2 = 77;
        CHECK_RC(ns_devices_probe_cached(dir, 60000, devs, &n2), NS_OK);
        CHECK_EQ_INT(n2, 0);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
        signal(SIGXFSZ, old_xfsz);
        ns_log_threshold = old_level;
        CHECK(s_stray_files(dir) == 0);
    }

    /* 4. A zero timeout kills the child at once: the answer is the fresh
     * list if it won the race, else the old cache; never a stray file. */
    {
        char *buf = NULL;
        size_t len = 0;
        CHECK_RC(ns_devinfo_list_encode(fresh, n, &buf, &len), NS_OK);
        CHECK_RC(s_write_file(path, buf, len), NS_OK);
        free(buf);
    }
    CHECK_RC(ns_devices_probe_cached(dir, 0, devs, &n2), NS_OK);
    CHECK_EQ_INT(n2, n);
    CHECK(s_stray_files(dir) == 0);

    /* 5. No datadir and no cache: zero devices, still NS_OK. */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/does/not/exist", dir);
    n2 = 77;
    CHECK_RC(ns_devices_probe_cached(missing, 60000, devs, &n2), NS_OK);
    CHECK_EQ_INT(n2, 0);

    unlink(path);
    CHECK_RC(ns_path_join(path, sizeof path, dir, "devbench.msgpack"), NS_OK);
    unlink(path);
    CHECK(rmdir(dir) == 0);
    s_n_cached = n;
}

TEST(probe)
{
    const ns_devinfo_t *cached = s_cached;
    uint32_t n_cached = s_n_cached;
    static ns_device_t devs[NS_MAX_DEVICES];
    ns_devinfo_t infos[NS_MAX_DEVICES], back[NS_MAX_DEVICES];
    uint32_t n = 99, nb = 0;
    char *buf = NULL;
    size_t len = 0;

    CHECK_RC(ns_devices_probe(devs, NS_MAX_DEVICES, &n), NS_OK);
    CHECK(n >= 1 || s_allow_no_devices());
    CHECK(n <= NS_MAX_DEVICES);
    CHECK_EQ_INT(n, n_cached);
    for (uint32_t i = 0; i < n; i++) {
        const ns_device_t *d = &devs[i];
        CHECK(s_clean_str(d->info.name, NS_MAX_DEVICE_NAME, 1));
        CHECK(s_clean_str(d->info.vendor, NS_MAX_DEVICE_NAME, 0));
        CHECK(s_clean_str(d->info.cl_c_version, NS_MAX_CL_VERSION, 1));
        CHECK(strncmp(d->info.cl_c_version, "OpenCL C ", 9) == 0);
        CHECK(s_clean_str(d->platform, NS_MAX_DEVICE_NAME, 1));
        CHECK(s_clean_str(d->driver_version, NS_MAX_DEVICE_NAME, 0));
        CHECK(s_clean_str(d->device_version, NS_MAX_DEVICE_NAME, 1));
        CHECK(d->info.type <= NS_DEV_ACCEL);
        CHECK(d->info.global_mem_bytes > 0);
        CHECK(d->info.max_alloc_bytes > 0);
        CHECK(d->info.max_alloc_bytes <= d->info.global_mem_bytes);
        CHECK(d->info.compute_units > 0);
        CHECK(d->info.gflops == 0 && d->info.gbps == 0);
        CHECK(d->fp64 == 0 || d->fp64 == 1);
        CHECK(d->correctly_rounded_div_sqrt == 0 ||
              d->correctly_rounded_div_sqrt == 1);
        if (i < n_cached) {
            /* The cached list also has the child's benchmark figures
             * (unless NS_DEVBENCH=0 turned the benchmark off). */
            ns_devinfo_t c = cached[i];
            const char *bench = getenv("NS_DEVBENCH");
            if (!bench || strcmp(bench, "0") != 0)
                CHECK(c.gflops > 0 && c.gbps > 0);
            c.gflops = 0;
            c.gbps = 0;
            CHECK(ns_devinfo_same(&d->info, &c));
        }
        printf("device %u: %s | %s | %s | %s | %u CU | %u MHz | fp64=%d\n", i,
               d->platform, d->info.name, ns_devtype_name(d->info.type),
               d->info.cl_c_version, d->info.compute_units, d->info.clock_mhz,
               d->fp64);
        infos[i] = d->info;
        infos[i].gflops = 100.0 + i; /* exercise the doubles too */
        infos[i].gbps = 0.5 * i;
    }

    /* The probe's own output survives the cache codec unchanged. */
    CHECK_RC(ns_devinfo_list_encode(infos, n, &buf, &len), NS_OK);
    CHECK_RC(ns_devinfo_list_decode((const uint8_t *)buf, len, back, &nb),
             NS_OK);
    CHECK_EQ_INT(nb, n);
    for (uint32_t i = 0; i < n && i < nb; i++)
        CHECK(ns_devinfo_same(&infos[i], &back[i]));
    free(buf);

    /* max bounds what is written. */
    uint32_t n0 = 99;
    CHECK_RC(ns_devices_probe(devs, 0, &n0), NS_OK);
    CHECK_EQ_INT(n0, 0);
}

int main(void)
{
    RUN(codec_rejects);
    RUN(probe_cached); /* first: no ICD loaded in this process yet */
    RUN(probe);
    return ns_test_finish("exec_devices");
}
