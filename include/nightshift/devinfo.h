/* devinfo.h - what a node says about one compute device in its heartbeat.
 *
 * This is the wire-level summary shared by exec/ (which fills it from
 * OpenCL) and p2p/ (which gossips it); it lives in core so that neither
 * layer depends on the other.
 */
#ifndef NIGHTSHIFT_DEVINFO_H
#define NIGHTSHIFT_DEVINFO_H

#include "nightshift/err.h"

#include "nightshift/mp.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_DEVICES 16      /* devices in one heartbeat */
#define NS_MAX_DEVICE_NAME 128 /* device and vendor names, bytes */
#define NS_MAX_CL_VERSION 64   /* "OpenCL C 1.2 ..." */

typedef enum {
    NS_DEV_OTHER = 0,
    NS_DEV_CPU = 1,
    NS_DEV_GPU = 2,
    NS_DEV_ACCEL = 3,
} ns_devtype;

typedef struct {
    char name[NS_MAX_DEVICE_NAME + 1];
    char vendor[NS_MAX_DEVICE_NAME + 1];
    uint32_t type; /* ns_devtype */
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes;
    uint32_t compute_units;
    uint32_t clock_mhz;
    char cl_c_version[NS_MAX_CL_VERSION + 1]; /* OpenCL C version string */
    double gflops; /* measured fp32 FMA throughput; 0 = not yet */
    double gbps;   /* measured copy bandwidth, GB/s; 0 = not yet */
} ns_devinfo_t;

const char *ns_devtype_name(uint32_t type);

/* Fixed 10-element array, in field order. */
void ns_devinfo_pack(msgpack_packer *pk, const ns_devinfo_t *d);

/* Whether two devices are described alike, field by field (decoded
 * structs hold stale bytes past each string's end, so not memcmp); the
 * figures compared bit for bit. */
bool ns_devinfo_same(const ns_devinfo_t *a, const ns_devinfo_t *b);

/* Read one device (the 10-element array); strict, sticky errors. */
int ns_devinfo_read(ns_mpr_t *r, ns_devinfo_t *d);

/* A device list as a standalone msgpack array (the datadir cache file
 * devices.msgpack written by exec/ and read by the node). */
int ns_devinfo_list_encode(const ns_devinfo_t *devs, uint32_t n, char **buf,
                           size_t *len) NS_MUST_CHECK;
int ns_devinfo_list_decode(const uint8_t *buf, size_t len, ns_devinfo_t *devs,
                           uint32_t *n) NS_MUST_CHECK;

#endif
