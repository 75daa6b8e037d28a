/* cmd_devices.c - `nightshift devices [--json]`: the OpenCL devices this
 * machine could offer, probed and benchmarked in-process (a short-lived
 * command, so a misbehaving driver takes down only itself).
 */
#include "cli.h"

#include "nightshift/devbench.h"
#include "nightshift/devices.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* More than a heartbeat carries: the command shows everything installed. */
#define NS_CLI_MAX_DEVICES 64
_Static_assert(NS_CLI_MAX_DEVICES <= NS_MAX_DEVBENCH_ENTRIES,
               "every listed device must fit the benchmark cache");

static const char s_usage[] =
    "usage: nightshift devices [--json] [--datadir D] [--no-bench | "
    "--rebench]\n"
    "\n"
    "List every OpenCL platform and device on this machine with its\n"
    "measured fp32 FMA throughput (GFLOPS) and copy bandwidth (GB/s).\n"
    "The benchmark takes about 0.5-2 s per device.\n"
    "\n"
    "  --json       print one JSON document: a list of objects with\n"
    "               platform, name, vendor, type (cpu|gpu|accelerator|\n"
    "               other), global_mem_bytes, max_alloc_bytes,\n"
    "               compute_units, clock_mhz, opencl_c_version,\n"
    "               driver_version, device_version, fp64,\n"
    "               correctly_rounded_div_sqrt, gflops and gbps (null when\n"
    "               not measured), bench (measured|cached|none),\n"
    "               measured_at_ms (UNIX ms of the figures, null if none);\n"
    "               the table's FIGURES column says the same\n"
    "  --datadir D  use D's benchmark cache (devbench.msgpack, the one the\n"
    "               node reads): cached figures are shown, devices without\n"
    "               them are measured and the cache updated\n"
    "  --no-bench   measure nothing: cached figures with --datadir, else\n"
    "               none\n"
    "  --rebench    measure every device again (and with --datadir,\n"
    "               replace the cached figures)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Exit status: 0 when devices were listed; with --json also 0 when there\n"
    "are none (it prints []); 1 when there are none in the table form, the\n"
    "OpenCL loader fails or D is not a directory; 2 on a usage error. A\n"
    "device whose benchmark fails is listed without figures.\n";

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

static const char *s_bench_source(const ns_devbench_t *b)
{
    if (b->gflops <= 0)
        return "none";
    return b->cached ? "cached" : "measured";
}

static void s_pack_device(msgpack_packer *pk, const ns_device_t *d,
                          const ns_devbench_t *b)
{
    msgpack_pack_map(pk, 17);
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
    ns_mp_str(pk, "bench");
    ns_mp_str(pk, s_bench_source(b));
    ns_mp_str(pk, "measured_at_ms");
    if (b->gflops > 0 && b->measured_at_ms)
        msgpack_pack_uint64(pk, b->measured_at_ms);
    else
        msgpack_pack_nil(pk);
}

/* "measured now", "cached, 3.2 h ago", "-": where the figures come from,
 * so that two different GFLOPS on one device can be told apart. */
static void s_bench_when(char *out, size_t cap, const ns_devbench_t *b)
{
    if (b->gflops <= 0) {
        snprintf(out, cap, "-");
        return;
    }
    if (!b->cached) {
        snprintf(out, cap, "measured now");
        return;
    }
    uint64_t now = ns_now_ms();
    double ago_s = b->measured_at_ms && now > b->measured_at_ms
                       ? (double)(now - b->measured_at_ms) / 1000.0
                       : 0;
    if (ago_s < 120)
        snprintf(out, cap, "cached, %.0f s ago", ago_s);
    else if (ago_s < 7200)
        snprintf(out, cap, "cached, %.0f min ago", ago_s / 60);
    else if (ago_s < 172800)
        snprintf(out, cap, "cached, %.1f h ago", ago_s / 3600);
    else
        snprintf(out, cap, "cached, %.0f days ago", ago_s / 86400);
}

static int s_print_json(const ns_device_t *devs, const ns_devbench_t *bench,
                        uint32_t n)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    char *json = NULL;
    int status = 1;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        s_pack_device(&pk, &devs[i], &bench[i]);
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

static void s_print_table(const ns_device_t *devs, const ns_devbench_t *bench,
                          uint32_t n)
{
    static const char *const headers[] = {
        "#",         "PLATFORM", "DEVICE", "TYPE",   "CUS",  "CLOCK",  "MEMORY",
        "MAX ALLOC", "OPENCL C", "FP64",   "GFLOPS", "GB/S", "FIGURES"};
    ns_table_t t;
    ns_table_init(&t, 13, headers);
    for (uint32_t i = 0; i < n; i++) {
        const ns_device_t *d = &devs[i];
        char idx[16], cus[16], clock[24], mem[32], alloc[32], gflops[32],
            gbps[32], when[48];
        snprintf(idx, sizeof idx, "%u", i);
        s_bench_when(when, sizeof when, &bench[i]);
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
                               gbps,
                               when};
        ns_table_row(&t, cells);
    }
    ns_table_print(&t, stdout);
    ns_table_release(&t);
}

/* Fill the figures of devs from the benchmark (or its cache). */
static int s_bench(const char *datadir, int no_bench, int rebench,
                   ns_device_t *devs, ns_devbench_t *bench, uint32_t n)
{
    unsigned flags = 0;
    if (no_bench && !datadir)
        return NS_OK; /* nothing to read, nothing to run */
    if (no_bench)
        flags = NS_DEVBENCH_CACHE_ONLY;
    else if (rebench)
        flags = NS_DEVBENCH_REFRESH;
    /* The figures are the output; the per-device info lines are noise. A
     * failed measurement still warns. */
    ns_log_level old = ns_log_threshold;
    if (ns_log_threshold > NS_LOG_WARN)
        ns_log_threshold = NS_LOG_WARN;
    int rc = ns_devbench_cached(datadir, devs, n, flags, NULL, bench);
    ns_log_threshold = old;
    if (rc != NS_OK)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        devs[i].info.gflops = bench[i].gflops;
        devs[i].info.gbps = bench[i].gbps;
    }
    return NS_OK;
}

int ns_cmd_devices(int argc, char **argv)
{
    ns_device_t *devs = NULL;
    ns_devbench_t *bench = NULL;
    const char *datadir = NULL;
    uint32_t n = 0;
    int json = 0, no_bench = 0, rebench = 0;
    int status = 1;
    struct stat st;

    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--no-bench") == 0) {
            no_bench = 1;
        } else if (strcmp(argv[i], "--rebench") == 0) {
            rebench = 1;
        } else if (strcmp(argv[i], "--datadir") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0') {
                ns_cli_error("devices", "--datadir needs a directory");
                return 2;
            }
            datadir = argv[++i];
        } else {
            ns_cli_error("devices", "unknown argument '%s' (see --help)",
                         argv[i]);
            return 2;
        }
    }
    if (no_bench && rebench) {
        ns_cli_error("devices", "--no-bench and --rebench exclude each other");
        return 2;
    }
    if (datadir && (stat(datadir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        ns_cli_error("devices", "datadir '%s' is not a directory", datadir);
        return 1;
    }

    devs = calloc(NS_CLI_MAX_DEVICES, sizeof *devs);
    bench = calloc(NS_CLI_MAX_DEVICES, sizeof *bench);
    if (!devs || !bench) {
        ns_cli_error("devices", "%s", ns_strerror(NS_ERR_NOMEM));
        goto out;
    }
    int rc = ns_devices_probe(devs, NS_CLI_MAX_DEVICES, &n);
    if (rc != NS_OK) {
        ns_cli_error("devices", "OpenCL device discovery failed: %s",
                     ns_strerror(rc));
        goto out;
    }
    rc = s_bench(datadir, no_bench, rebench, devs, bench, n);
    if (rc != NS_OK) {
        ns_cli_error("devices", "benchmark failed: %s", ns_strerror(rc));
        goto out;
    }
    if (json) {
        if (n == 0) /* a hint on stderr; stdout stays one JSON document */
            ns_cli_error("devices", "%s", s_no_devices);
        status = s_print_json(devs, bench, n);
        goto out;
    }
    if (n == 0) {
        ns_cli_error("devices", "%s", s_no_devices);
        goto out;
    }
    s_print_table(devs, bench, n);
    status = 0;
out:
    free(bench);
    free(devs);
    return status;
}
