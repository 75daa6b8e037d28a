/* test_devbench.c - the device micro-benchmark, its datadir cache, and
 * the figures ns_devices_probe_cached puts in the device list.
 *
 * probe_cached runs first: once this process has loaded an ICD (PoCL
 * starts worker threads), a forked child may not use OpenCL again.
 */
#include "nightshift/devbench.h"
#include "nightshift/devices.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include "check.h"

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Short repetitions: the cache tests measure several times. */
static const ns_devbench_opts_t s_quick = {1, 10};

static ns_device_t s_devs[NS_MAX_DEVICES];
static uint32_t s_n;

static int s_allow_no_devices(void)
{
    const char *v = getenv("NS_TEST_ALLOW_NO_DEVICES");
    return v && strcmp(v, "1") == 0;
}

static int s_good(double v)
{
    return isfinite(v) && v > 0;
}

static int s_same(const ns_devbench_t *a, const ns_devbench_t *b)
{
    return a->gflops == b->gflops && a->gbps == b->gbps &&
           a->measured_at_ms == b->measured_at_ms;
}

static void s_tmpdir(char *dir, size_t cap, const char *tag)
{
    snprintf(dir, cap, "/tmp/ns_test_devbench_%s_XXXXXX", tag);
    if (!mkdtemp(dir))
        dir[0] = '\0';
}

static void s_cache_path(char *path, size_t cap, const char *dir)
{
    if (ns_path_join(path, cap, dir, NS_DEVBENCH_CACHE_FILE) != NS_OK)
        path[0] = '\0';
}

static void s_rmdir(const char *dir)
{
    char path[512];
    s_cache_path(path, sizeof path, dir);
    unlink(path);
    if (ns_path_join(path, sizeof path, dir, "devices.msgpack") == NS_OK)
        unlink(path);
    rmdir(dir);
}

static long s_file_size(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ns_file_read(path, 1 << 20, &buf, &len) != NS_OK)
        return -1;
    free(buf);
    return (long)len;
}

static int s_read_list(const char *dir, ns_devinfo_t *devs, uint32_t *n)
{
    char path[512];
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = ns_path_join(path, sizeof path, dir, "devices.msgpack");
    if (rc == NS_OK)
        rc = ns_file_read(path, 64 * 1024, &buf, &len);
    if (rc == NS_OK)
        rc = ns_devinfo_list_decode(buf, len, devs, n);
    free(buf);
    return rc;
}

/* Runs before this process touches OpenCL. */
TEST(probe_cached)
{
    char dir[128], path[512];
    ns_devinfo_t devs[NS_MAX_DEVICES], again[NS_MAX_DEVICES];
    uint32_t n = 0, n2 = 0;

    s_tmpdir(dir, sizeof dir, "probe");
    if (!CHECK(dir[0] != '\0'))
        return;
    s_cache_path(path, sizeof path, dir);

    /* NS_DEVBENCH=0: the list, no measurement, no benchmark cache. */
    setenv("NS_DEVBENCH", "0", 1);
    CHECK_RC(ns_devices_probe_cached(dir, 60000, devs, &n), NS_OK);
    unsetenv("NS_DEVBENCH");
    CHECK(n >= 1 || s_allow_no_devices());
    for (uint32_t i = 0; i < n; i++)
        CHECK(devs[i].gflops == 0 && devs[i].gbps == 0);
    CHECK(access(path, F_OK) != 0);

    /* Measured by the child and cached. */
    CHECK_RC(ns_devices_probe_cached(dir, 60000, devs, &n), NS_OK);
    CHECK(n >= 1 || s_allow_no_devices());
    for (uint32_t i = 0; i < n; i++) {
        CHECK(s_good(devs[i].gflops));
        CHECK(s_good(devs[i].gbps));
        printf("probe_cached device %u: %.1f GFLOPS %.1f GB/s\n", i,
               devs[i].gflops, devs[i].gbps);
    }
    if (n > 0)
        CHECK(s_file_size(path) > 0);

    /* Next start: the same figures, from the cache (a new measurement
     * would not repeat the doubles bit for bit). */
    CHECK_RC(ns_devices_probe_cached(dir, 60000, again, &n2), NS_OK);
    CHECK_EQ_INT(n2, n);
    for (uint32_t i = 0; i < n && i < n2; i++)
        CHECK(again[i].gflops == devs[i].gflops &&
              again[i].gbps == devs[i].gbps);

    /* NS_DEVBENCH=0 still serves cached figures. */
    setenv("NS_DEVBENCH", "0", 1);
    CHECK_RC(ns_devices_probe_cached(dir, 60000, again, &n2), NS_OK);
    unsetenv("NS_DEVBENCH");
    CHECK_EQ_INT(n2, n);
    for (uint32_t i = 0; i < n && i < n2; i++)
        CHECK(again[i].gflops == devs[i].gflops);

    /* A zero timeout kills the child: the list is still read, no temp
     * file is left. */
    CHECK_RC(ns_devices_probe_cached(dir, 0, again, &n2), NS_OK);
    CHECK_EQ_INT(n2, n);
    CHECK_RC(s_read_list(dir, again, &n2), NS_OK);
    CHECK_EQ_INT(n2, n);
    s_rmdir(dir);
    CHECK(access(dir, F_OK) != 0); /* only the two cache files were there */
}

TEST(key)
{
    ns_device_t a, b;
    ns_hash_t ka, kb;

    memset(&a, 0, sizeof a);
    snprintf(a.platform, sizeof a.platform, "Test Platform");
    snprintf(a.info.name, sizeof a.info.name, "Test Device");
    snprintf(a.driver_version, sizeof a.driver_version, "1.0");
    snprintf(a.device_version, sizeof a.device_version, "OpenCL 3.0 test");
    ns_devbench_key(&a, ka);

    /* Deterministic; blind to facts that are not part of the key. */
    b = a;
    b.info.compute_units = 99;
    b.info.global_mem_bytes = 1;
    b.device_index = 3;
    ns_devbench_key(&b, kb);
    CHECK(memcmp(ka, kb, sizeof ka) == 0);

    /* Each field changes it. */
    char *fields[] = {b.platform, b.info.name, b.driver_version,
                      b.device_version};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        b = a;
        strcat(fields[i], "x"); /* the pointers are into b */
        ns_devbench_key(&b, kb);
        CHECK(memcmp(ka, kb, sizeof ka) != 0);
    }

    /* Length prefixes: moving a byte between fields changes it too. */
    b = a;
    snprintf(b.platform, sizeof b.platform, "Test PlatformT");
    snprintf(b.info.name, sizeof b.info.name, "est Device");
    ns_devbench_key(&b, kb);
    CHECK(memcmp(ka, kb, sizeof ka) != 0);
}

TEST(measure)
{
    ns_devbench_t r;
    ns_devbench_opts_t bad = {NS_MAX_DEVBENCH_REPS + 1, 0};

    CHECK_RC(ns_devices_probe(s_devs, NS_MAX_DEVICES, &s_n), NS_OK);
    CHECK(s_n >= 1 || s_allow_no_devices());
    for (uint32_t i = 0; i < s_n; i++) {
        CHECK_RC(ns_devbench_measure(&s_devs[i], NULL, &r), NS_OK);
        CHECK(s_good(r.gflops));
        CHECK(s_good(r.gbps));
        CHECK(!r.cached);
        CHECK(r.bench_us > 0);
        CHECK(r.measured_at_ms > 0);
        CHECK(r.fma_kernel != NULL);
        CHECK(r.fma_flops_per_item > 0);
        printf("device %u (%s): %.1f GFLOPS fp32 FMA (%s), %.1f GB/s copy, "
               "%.0f ms\n",
               i, s_devs[i].info.name, r.gflops,
               r.fma_kernel ? r.fma_kernel : "?", r.gbps, r.bench_us / 1e3);
    }
    if (s_n == 0)
        return;

    CHECK_RC(ns_devbench_measure(&s_devs[0], &bad, &r), NS_ERR_INVAL);
    bad.reps = 0;
    bad.target_ms = NS_MAX_DEVBENCH_TARGET_MS + 1;
    CHECK_RC(ns_devbench_measure(&s_devs[0], &bad, &r), NS_ERR_INVAL);

    ns_device_t gone = s_devs[0];
    gone.device_index = 1000;
    CHECK_RC(ns_devbench_measure(&gone, &s_quick, &r), NS_ERR_NOTFOUND);
    CHECK(r.gflops == 0 && r.gbps == 0);
    gone = s_devs[0];
    gone.platform_index = 1000;
    CHECK_RC(ns_devbench_measure(&gone, &s_quick, &r), NS_ERR_NOTFOUND);
}

TEST(cache)
{
    char dir[128], path[512];
    ns_devbench_t first, hit, r;

    if (s_n == 0)
        return;
    s_tmpdir(dir, sizeof dir, "cache");
    if (!CHECK(dir[0] != '\0'))
        return;
    s_cache_path(path, sizeof path, dir);

    /* Cache only, nothing cached: zero figures, no file. */
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, NS_DEVBENCH_CACHE_ONLY,
                                &s_quick, &r),
             NS_OK);
    CHECK(r.gflops == 0 && r.gbps == 0 && !r.cached);
    CHECK(access(path, F_OK) != 0);

    /* Missing cache: measured, then written. */
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &first), NS_OK);
    CHECK(!first.cached);
    CHECK(first.bench_us > 0);
    CHECK(s_good(first.gflops) && s_good(first.gbps));
    CHECK(s_file_size(path) > 0);

    /* Hit: the same numbers without running anything. */
    uint64_t t0 = ns_mono_us();
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &hit), NS_OK);
    uint64_t hit_us = ns_mono_us() - t0;
    CHECK(hit.cached);
    CHECK_EQ_INT(hit.bench_us, 0);
    CHECK(hit.fma_kernel == NULL);
    CHECK(s_same(&hit, &first));
    printf("cache: measured in %llu us, hit in %llu us\n",
           (unsigned long long)first.bench_us, (unsigned long long)hit_us);
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, NS_DEVBENCH_CACHE_ONLY,
                                &s_quick, &hit),
             NS_OK);
    CHECK(hit.cached && s_same(&hit, &first));

    /* Refresh: measured again although cached, and the cache follows. */
    CHECK_RC(
        ns_devbench_cached(dir, s_devs, 1, NS_DEVBENCH_REFRESH, &s_quick, &r),
        NS_OK);
    CHECK(!r.cached && r.bench_us > 0 && s_good(r.gflops));
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &hit), NS_OK);
    CHECK(hit.cached && s_same(&hit, &r));
    first = r;

    /* No datadir: always measured, nothing written anywhere. */
    CHECK_RC(ns_devbench_cached(NULL, s_devs, 1, 0, &s_quick, &r), NS_OK);
    CHECK(!r.cached && s_good(r.gflops));

    /* Bad arguments. */
    CHECK_RC(ns_devbench_cached(dir, s_devs, NS_MAX_DEVBENCH_ENTRIES + 1, 0,
                                NULL, &r),
             NS_ERR_INVAL);
    CHECK_RC(ns_devbench_cached(dir, NULL, 1, 0, NULL, &r), NS_ERR_INVAL);
    CHECK_RC(ns_devbench_cached(dir, s_devs, 0, 0, NULL, NULL), NS_OK);
    s_rmdir(dir);
}

/* Each way of spoiling the cache file leads to a new measurement and a
 * good file again. */
TEST(corrupt)
{
    char dir[128], path[512];
    ns_devbench_t good, r;
    ns_hash_t key;
    uint8_t *buf = NULL;
    size_t len = 0;

    if (s_n == 0)
        return;
    s_tmpdir(dir, sizeof dir, "corrupt");
    if (!CHECK(dir[0] != '\0'))
        return;
    s_cache_path(path, sizeof path, dir);
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &good), NS_OK);
    CHECK(!good.cached);
    CHECK_RC(ns_file_read(path, NS_MAX_DEVBENCH_CACHE, &buf, &len), NS_OK);
    ns_devbench_key(&s_devs[0], key);

    /* Spoilt copies: garbage, a truncation, a trailing byte, an unknown
     * version, NaN, zero and negative figures under the right key. */
    enum { N_BAD = 7 };
    msgpack_sbuffer bad[N_BAD];
    for (int i = 0; i < N_BAD; i++)
        msgpack_sbuffer_init(&bad[i]);
    static const uint8_t garbage[] = {0xc1, 0xff, 0x00, 0x92, 0xde, 0xad};
    msgpack_sbuffer_write(&bad[0], (const char *)garbage, sizeof garbage);
    if (len > 1) {
        msgpack_sbuffer_write(&bad[1], (const char *)buf, len - 1);
        msgpack_sbuffer_write(&bad[2], (const char *)buf, len);
        msgpack_sbuffer_write(&bad[2], "\0", 1);
    }
    const double figures[][2] = {{1, 1}, {NAN, 1}, {0, 1}, {1, -1}};
    for (int i = 0; i < 4; i++) {
        msgpack_packer pk;
        msgpack_packer_init(&pk, &bad[3 + i], msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint32(&pk, i == 0 ? 2 : 1); /* [3]: version 2 */
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 4);
        ns_mp_bin(&pk, key, sizeof key);
        msgpack_pack_double(&pk, figures[i][0]);
        msgpack_pack_double(&pk, figures[i][1]);
        msgpack_pack_uint64(&pk, 1);
    }

    /* The expected warnings are not interesting here. */
    ns_log_level old_level = ns_log_threshold;
    ns_log_threshold = NS_LOG_ERROR;
    for (int i = 0; i < N_BAD; i++) {
        CHECK_RC(ns_file_write_atomic(path, bad[i].data, bad[i].size, 0644),
                 NS_OK);
        CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &r), NS_OK);
        if (!CHECK(!r.cached))
            fprintf(stderr, "spoilt cache %d was accepted\n", i);
        CHECK(s_good(r.gflops) && s_good(r.gbps));
        CHECK_RC(ns_devbench_cached(dir, s_devs, 1, NS_DEVBENCH_CACHE_ONLY,
                                    &s_quick, &good),
                 NS_OK);
        CHECK(good.cached && s_same(&good, &r)); /* rewritten */
        msgpack_sbuffer_destroy(&bad[i]);
    }
    ns_log_threshold = old_level;
    free(buf);
    s_rmdir(dir);
}

/* A new driver or device version is a new key: measured again, and the
 * old device's entry is kept beside it. */
TEST(changed_key)
{
    char dir[128];
    ns_devbench_t orig, r;

    if (s_n == 0)
        return;
    s_tmpdir(dir, sizeof dir, "key");
    if (!CHECK(dir[0] != '\0'))
        return;
    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &orig), NS_OK);
    CHECK(!orig.cached);

    ns_device_t upgraded = s_devs[0];
    upgraded.driver_version[0] ^= 1; /* "3.1" -> "2.1" */
    CHECK_RC(ns_devbench_cached(dir, &upgraded, 1, 0, &s_quick, &r), NS_OK);
    CHECK(!r.cached && r.bench_us > 0 && s_good(r.gflops));
    CHECK_RC(ns_devbench_cached(dir, &upgraded, 1, 0, &s_quick, &r), NS_OK);
    CHECK(r.cached);

    upgraded = s_devs[0];
    upgraded.device_version[sizeof upgraded.device_version - 2] = '\0';
    upgraded.device_version[strlen(upgraded.device_version) - 1] ^= 1;
    CHECK_RC(ns_devbench_cached(dir, &upgraded, 1, 0, &s_quick, &r), NS_OK);
    CHECK(!r.cached);

    CHECK_RC(ns_devbench_cached(dir, s_devs, 1, 0, &s_quick, &r), NS_OK);
    CHECK(r.cached && s_same(&r, &orig));

    /* Two identical devices in one call: measured once. */
    ns_device_t pair[2] = {s_devs[0], s_devs[0]};
    ns_devbench_t both[2];
    snprintf(pair[0].platform, sizeof pair[0].platform, "twin platform");
    pair[1] = pair[0];
    CHECK_RC(ns_devbench_cached(dir, pair, 2, 0, &s_quick, both), NS_OK);
    CHECK(!both[0].cached && both[1].cached);
    CHECK(both[0].gflops == both[1].gflops);
    s_rmdir(dir);
}

int main(void)
{
    RUN(probe_cached); /* first: no ICD loaded in this process yet */
    RUN(key);
    RUN(measure);
    RUN(cache);
    RUN(corrupt);
    RUN(changed_key);
    return ns_test_finish("exec_devbench");
}
