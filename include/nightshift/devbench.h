/* devbench.h - a short per-device micro-benchmark (exec layer): fp32 FMA
 * throughput and copy bandwidth, the figures a node's heartbeat carries
 * (ns_devinfo_t.gflops and .gbps).
 *
 * FMA: chains of fma() (mad() where the device has no fused multiply-add)
 * on float16 and float8 vectors, many independent chains per work-item;
 * every kernel variant is timed and the best figure kept, so a CPU with
 * wide vector registers and a GPU with few registers per work-item are
 * both measured on the variant that suits them. The operands are kernel
 * arguments and every chain reaches the output, which is checked, so the
 * compiler can neither fold nor drop the work.
 * Copy: out[i] = in[i] over float4 buffers of up to 64 MiB (CPU) or
 * 256 MiB (others); bandwidth counts bytes read plus bytes written.
 * Times come from OpenCL event profiling; each figure is the best of a few
 * repetitions of about target_ms each. About 0.5 s per device on PoCL
 * once its kernel cache is warm, under 2 s cold.
 *
 * The cache, <datadir>/devbench.msgpack, maps a device key to its figures
 * and is written atomically; a missing or corrupt cache or a new key (new
 * driver, new device, changed benchmark kernels) means a new measurement.
 * Identical devices share a key and so share figures.
 *
 * Measuring loads the OpenCL driver into the calling process: the node
 * never calls this itself but through ns_devices_probe_cached's child.
 */
#ifndef NIGHTSHIFT_DEVBENCH_H
#define NIGHTSHIFT_DEVBENCH_H

#include "nightshift/devices.h"
#include "nightshift/err.h"
#include "nightshift/hash.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_DEVBENCH_CACHE_FILE "devbench.msgpack"
#define NS_MAX_DEVBENCH_ENTRIES 64        /* devices kept in the cache */
#define NS_MAX_DEVBENCH_CACHE (16 * 1024) /* cache file bytes */
#define NS_DEVBENCH_DEFAULT_REPS 5        /* timed repetitions */
#define NS_DEVBENCH_DEFAULT_TARGET_MS 25  /* device time per repetition */
#define NS_MAX_DEVBENCH_REPS 100
#define NS_MAX_DEVBENCH_TARGET_MS 10000

/* Tuning; a NULL pointer or zero fields mean the defaults above. */
typedef struct {
    uint32_t reps;      /* timed repetitions of each figure, best kept */
    uint32_t target_ms; /* device time one repetition should take, ms */
} ns_devbench_opts_t;

typedef struct {
    double gflops;           /* fp32 FMA throughput, GFLOP/s; 0 = none */
    double gbps;             /* copy bandwidth (read + write), GB/s */
    uint64_t measured_at_ms; /* wall clock (UNIX ms) of the measurement */
    uint64_t bench_us;       /* wall time the measurement took; 0 if cached */
    bool cached;             /* figures read from the cache, not measured */
    const char *fma_kernel;  /* winning FMA kernel (static text); NULL
                                when cached */
    uint32_t fma_flops_per_item; /* flops per work-item and iteration of
                                    the winning kernel; 0 when cached */
} ns_devbench_t;

/* Flags for ns_devbench_cached. */
#define NS_DEVBENCH_REFRESH 1u    /* measure even where the cache has figures */
#define NS_DEVBENCH_CACHE_ONLY 2u /* never measure: figures 0 where missing */

/* The cache key of a device: BLAKE2b-256 over a domain tag, the platform
 * name, device name, driver version and device version (each length-
 * prefixed), and the text of the benchmark kernels. */
void ns_devbench_key(const ns_device_t *dev, ns_hash_t key);

/* Measure device dev (found by its platform_index and device_index, as
 * filled by ns_devices_probe) in this process. opts may be NULL. On
 * success out has finite figures > 0. NS_ERR_NOTFOUND if the device is
 * gone, NS_ERR_OPENCL for a driver failure or a kernel whose output is
 * wrong, NS_ERR_NOMEM, NS_ERR_INVAL for opts out of range. */
int ns_devbench_measure(const ns_device_t *dev, const ns_devbench_opts_t *opts,
                        ns_devbench_t *out) NS_MUST_CHECK;

/* Figures for devs[0..n) (n <= NS_MAX_DEVBENCH_ENTRIES) into out[0..n):
 * from <datadir>/devbench.msgpack where it holds the device's key,
 * measured otherwise (see flags); then the cache is rewritten if anything
 * was measured. datadir NULL: no cache, every device is measured (unless
 * NS_DEVBENCH_CACHE_ONLY). A device that fails to measure gets zero
 * figures and a warning; a cache that cannot be read is measured over and
 * one that cannot be written is logged, neither is an error. Returns
 * NS_ERR_INVAL for bad arguments, NS_ERR_TOOBIG for a datadir path too
 * long, else NS_OK. */
int ns_devbench_cached(const char *datadir, const ns_device_t *devs, uint32_t n,
                       unsigned flags, const ns_devbench_opts_t *opts,
                       ns_devbench_t *out) NS_MUST_CHECK;

#endif
