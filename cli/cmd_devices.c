/* cmd_devices.c - `nightshift devices [--json]`: the OpenCL devices this
 * machine could offer, probed in-process (a short-lived command, so a
 * misbehaving driver takes down only itself).
 */
#include "cli.h"

#include "nightshift/devices.h"
#include "nightshift/mp.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* More than a heartbeat carries: the command shows everything installed. */
#define NS_CLI_MAX_DEVICES 64

static const char s_usage[] =
    "usage: nightshift devices [--json]\n"
    "\n"
    "List every OpenCL platform and device on this machine.\n"
    "\n"
    "  --json     print one JSON document: a list of objects with platform,\n"
    "             name, vendor, type (cpu|gpu|accelerator|other),\n"
    "             global_mem_bytes, max_alloc_bytes, compute_units,\n"
    "             clock_mhz, opencl_c_version, driver_version,\n"
    "             device_version, fp64, correctly_rounded_div_sqrt, gflops\n"
    "             and gbps (null until the benchmark has measured them)\n"
    "  -h, --help show this help\n"
    "\n"
    "Exit status: 0 when devices were listed; with --json also 0 when there\n"
    "are none (it prints []); 1 when there are none in the table form or\n"
    "the OpenCL loader fails; 2 on a usage error.\n";

static const char s_no_devices[] =
    "no OpenCL devices found: install pocl-opencl-icd or your GPU vendor's "
    "ICD";

static void s_mp_measured(msgpack_packer *pk, double v)
{
    if (v > 0)
        msgpack_pack_double(pk, v);
    else
        msgpack_pack_nil(pk);
}

static void s_pack_device(msgpack_packer *pk, const ns_device_t *d)
{
    msgpack_pack_map(pk, 15);
    ns_mp_str(pk, "platform");
    ns_mp_str(pk, d->platform);
    ns_mp_str(pk, "name");
    ns_mp_str(pk, d->info.name);
    ns_mp_str(pk, "vendor");
    ns_mp_str(pk, d->info.vendor);
    ns_mp_str(pk, "type");
    ns_mp_str(pk, ns_devtype_name(d->info.type));
    ns_mp_str(pk, "global_mem_bytes");
    msgpack_pack_uint64(pk, d->info.global_mem_bytes);
    ns_mp_str(pk, "max_alloc_bytes");
    msgpack_pack_uint64(pk, d->info.max_alloc_bytes);
    ns_mp_str(pk, "compute_units");
    msgpack_pack_uint32(pk, d->info.compute_units);
    ns_mp_str(pk, "clock_mhz");
    msgpack_pack_uint32(pk, d->info.clock_mhz);
    ns_mp_str(pk, "opencl_c_version");
    ns_mp_str(pk, d->info.cl_c_version);
    ns_mp_str(pk, "driver_version");
    ns_mp_str(pk, d->driver_version);
    ns_mp_str(pk, "device_version");
    ns_mp_str(pk, d->device_version);
    ns_mp_str(pk, "fp64");
    if (d->fp64)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    ns_mp_str(pk, "correctly_rounded_div_sqrt");
    if (d->correctly_rounded_div_sqrt)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    ns_mp_str(pk, "gflops");
    s_mp_measured(pk, d->info.gflops);
    ns_mp_str(pk, "gbps");
    s_mp_measured(pk, d->info.gbps);
}

static int s_print_json(const ns_device_t *devs, uint32_t n)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    char *json = NULL;
    int status = 1;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        s_pack_device(&pk, &devs[i]);
    int rc = ns_mp_to_json(sb.data, sb.size, &json, 1);
    if (rc != NS_OK) {
        ns_cli_error("devices", "cannot render JSON: %s", ns_strerror(rc));
        goto out;
    }
    printf("%s\n", json);
    status = 0;
out:
    free(json);
    msgpack_sbuffer_destroy(&sb);
    return status;
}

/* "OpenCL C 1.2 PoCL" -> "1.2 PoCL": the column header says the rest. */
static const char *s_short_cl_c(const char *v)
{
    static const char prefix[] = "OpenCL C ";
    if (strncmp(v, prefix, sizeof prefix - 1) == 0)
        return v + sizeof prefix - 1;
    return v[0] ? v : "-";
}

static void s_print_table(const ns_device_t *devs, uint32_t n)
{
    static const char *const headers[] = {
        "#",      "PLATFORM",  "DEVICE",   "TYPE", "CUS",    "CLOCK",
        "MEMORY", "MAX ALLOC", "OPENCL C", "FP64", "GFLOPS", "GB/S"};
    ns_table_t t;
    ns_table_init(&t, 12, headers);
    for (uint32_t i = 0; i < n; i++) {
        const ns_device_t *d = &devs[i];
        char idx[16], cus[16], clock[24], mem[32], alloc[32], gflops[32],
            gbps[32];
        snprintf(idx, sizeof idx, "%u", i);
        snprintf(cus, sizeof cus, "%u", d->info.compute_units);
        if (d->info.clock_mhz)
            snprintf(clock, sizeof clock, "%u MHz", d->info.clock_mhz);
        else
            snprintf(clock, sizeof clock, "-");
        ns_fmt_bytes(mem, sizeof mem, d->info.global_mem_bytes);
        ns_fmt_bytes(alloc, sizeof alloc, d->info.max_alloc_bytes);
        if (d->info.gflops > 0)
            snprintf(gflops, sizeof gflops, "%.1f", d->info.gflops);
        else
            snprintf(gflops, sizeof gflops, "-");
        if (d->info.gbps > 0)
            snprintf(gbps, sizeof gbps, "%.1f", d->info.gbps);
        else
            snprintf(gbps, sizeof gbps, "-");
        const char *cells[] = {idx,
                               d->platform[0] ? d->platform : "-",
                               d->info.name,
                               ns_devtype_name(d->info.type),
                               cus,
                               clock,
                               mem,
                               alloc,
                               s_short_cl_c(d->info.cl_c_version),
                               d->fp64 ? "yes" : "no",
                               gflops,
                               gbps};
        ns_table_row(&t, cells);
    }
    ns_table_print(&t, stdout);
    ns_table_release(&t);
}

int ns_cmd_devices(int argc, char **argv)
{
    ns_device_t *devs = NULL;
    uint32_t n = 0;
    int json = 0;
    int status = 1;

    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            ns_cli_error("devices", "unknown argument '%s' (see --help)",
                         argv[i]);
            return 2;
        }
    }

    devs = calloc(NS_CLI_MAX_DEVICES, sizeof *devs);
    if (!devs) {
        ns_cli_error("devices", "%s", ns_strerror(NS_ERR_NOMEM));
        goto out;
    }
    int rc = ns_devices_probe(devs, NS_CLI_MAX_DEVICES, &n);
    if (rc != NS_OK) {
        ns_cli_error("devices", "OpenCL device discovery failed: %s",
                     ns_strerror(rc));
        goto out;
    }
    if (json) {
        if (n == 0) /* a hint on stderr; stdout stays one JSON document */
            ns_cli_error("devices", "%s", s_no_devices);
        status = s_print_json(devs, n);
        goto out;
    }
    if (n == 0) {
        ns_cli_error("devices", "%s", s_no_devices);
        goto out;
    }
    s_print_table(devs, n);
    status = 0;
out:
    free(devs);
    return status;
}
