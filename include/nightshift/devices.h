/* devices.h - OpenCL device discovery (exec layer).
 *
 * Enumerates every platform and device through the ocl-icd loader and fills
 * the wire summary (ns_devinfo_t). Nodes do not load OpenCL themselves:
 * the daemon probes in a child process and reads the cache file, so a
 * broken driver cannot take the node down and the ICD's memory stays out of
 * the node (see docs/ARCHITECTURE.md).
 */
#ifndef NIGHTSHIFT_DEVICES_H
#define NIGHTSHIFT_DEVICES_H

#include "nightshift/devinfo.h"
#include "nightshift/err.h"

#include <stdint.h>

/* Extra facts shown by `nightshift devices` that the heartbeat omits. */
typedef struct {
    ns_devinfo_t info;
    char platform[NS_MAX_DEVICE_NAME + 1]; /* platform name */
    char driver_version[NS_MAX_DEVICE_NAME + 1];
    char device_version[NS_MAX_DEVICE_NAME + 1]; /* "OpenCL 3.0 PoCL..." */
    int fp64;                       /* cl_khr_fp64 or double_fp_config != 0 */
    int correctly_rounded_div_sqrt; /* CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT */
    uint32_t platform_index;        /* position in clGetPlatformIDs */
    uint32_t device_index;          /* position within its platform */
} ns_device_t;

/* Query all platforms and devices, at most max. n_out gets the count
 * found (0 with NS_OK when there is no platform at all). NS_ERR_OPENCL
 * only for a loader failure other than "no platform". */
int ns_devices_probe(ns_device_t *out, uint32_t max,
                     uint32_t *n_out) NS_MUST_CHECK;

/* Probe in a forked child that writes <datadir>/devices.msgpack, wait up
 * to timeout_ms, then read the file back into devs (NS_MAX_DEVICES).
 * Falls back to the existing cache file if the child fails. Call before
 * any threads exist (before the ZeroMQ context).
 * The child also fills gflops and gbps from the device benchmark
 * (devbench.h): from <datadir>/devbench.msgpack when it has the device's
 * key, else measured (about 0.5-2 s per device) and cached. It writes the
 * list once with the cached figures before measuring, so a timeout during
 * the benchmark still leaves the fresh list (figures 0 where unmeasured).
 * NS_DEVBENCH=0 in the environment skips new measurements. */
int ns_devices_probe_cached(const char *datadir, uint32_t timeout_ms,
                            ns_devinfo_t *devs, uint32_t *n) NS_MUST_CHECK;

#endif
