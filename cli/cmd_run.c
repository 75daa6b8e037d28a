/* cmd_run.c - `nightshift run JOB-FLAGS [--json]`: run one job on a local
 * OpenCL device, no network. The job runs in a worker process (worker.h)
 * exactly as on a provider, so a kernel that crashes or loops ends with
 * an error message instead of taking this command down.
 */
#include "cli.h"
#include "jobspec.h"

#include "nightshift/job.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/preflight.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/worker.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_TIMEOUT_MS (24u * 3600u * 1000u) /* --timeout-ms cap: a day */

static const char s_usage[] =
    "usage: nightshift run JOB-FLAGS [--json] [--device N] "
    "[--timeout-ms T]\n"
    "\n"
    "Run one job on a local OpenCL device, without the network: the kernel\n"
    "is built and run in a sandboxed worker process, the outputs are\n"
    "written to their files and the timings are printed.\n"
    "\n"
    "JOB-FLAGS:\n"
    "  --job FILE.json            the whole job as a JSON file (keys and\n"
    "                             examples: docs/JOBS.md); several steps\n"
    "                             run in order (--json: an array); or:\n"
    "  --kernel FILE.cl | --builtin NAME   OpenCL C source, or a built-in\n"
    "  --entry FN                 kernel function (default: the built-in's)\n"
    "  --global X[,Y[,Z]]         NDRange\n"
    "  --local X[,Y[,Z]]          work-group size (default: the runtime's)\n"
    "  --arg KIND:VALUE           one per kernel argument, in order:\n"
    "        in:FILE              input buffer read from FILE\n"
    "        out:BYTES:FILE[:ITEM_BYTES]  output buffer written to FILE\n"
    "        u32:V i32:V u64:V i64:V f32:V f64:V   scalars\n"
    "        local:BYTES          __local memory\n"
    "  --tolerance exact|ulp:N|abs:X|rel:X   --checks K\n"
    "  --item-kind item|group  --options \"TEXT\"  --work FLOPS\n"
    "\n"
    "Options:\n"
    "  --device N       OpenCL device index from `nightshift devices` "
    "(default 0)\n"
    "  --timeout-ms T   wall-clock limit for the job (default 30000)\n"
    "  --json           print one JSON document: status (ok|failed), error,\n"
    "                   job, kernel, entry, device, items, cache_hit,\n"
    "                   timings_ms (build, upload, run, download, total) and\n"
    "                   outputs (arg, file, bytes, hash)\n"
    "  -h, --help       show this help\n"
    "\n"
    "Compiled programs are cached in $NIGHTSHIFT_CACHE, else\n"
    "$XDG_CACHE_HOME/nightshift/programs or ~/.cache/nightshift/programs.\n"
    "\n"
    "Example:\n"
    "  nightshift run --builtin vector_add --global 1024 --arg in:a.bin \\\n"
    "      --arg in:b.bin --arg out:4096:c.bin --arg u32:1024\n"
    "\n"
    "Exit status: 0 when the job ran and every output was written; 1 when\n"
    "it failed (build error, crash, timeout, missing file...); 2 on a usage\n"
    "error or a job that does not validate.\n";

typedef struct {
    ns_jobspec_t spec; /* the job, its files and buffers */
    uint32_t device;
    uint32_t timeout_ms;
    int json;
    char cache_dir[4096];
    char error[NS_WORKER_MAX_ERROR + 256];
} s_run_t;

static int s_parse_u32_flag(const char *flag, int argc, char **argv, int *i,
                            uint32_t max, uint32_t *out)
{
    uint64_t v = 0;
    if (*i + 1 >= argc) {
        ns_cli_error("run", "%s needs a value", flag);
        return 2;
    }
    const char *s = argv[*i + 1];
    if (ns_parse_u64(s, &v) != NS_OK || v > max) {
        ns_cli_error("run", "%s '%s': expected an integer 0..%" PRIu32, flag, s,
                     max);
        return 2;
    }
    *out = (uint32_t)v;
    *i += 2;
    return 0;
}

static int s_parse(s_run_t *r, int argc, char **argv)
{
    for (int i = 1; i < argc;) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            r->json = 1;
            i++;
            continue;
        }
        if (strcmp(a, "--device") == 0) {
            if (s_parse_u32_flag(a, argc, argv, &i, UINT32_MAX, &r->device))
                return 2;
            continue;
        }
        if (strcmp(a, "--timeout-ms") == 0) {
            if (s_parse_u32_flag(a, argc, argv, &i, S_MAX_TIMEOUT_MS,
                                 &r->timeout_ms))
                return 2;
            if (r->timeout_ms == 0) {
                ns_cli_error("run", "--timeout-ms must be at least 1");
                return 2;
            }
            continue;
        }
        int rc = ns_jobspec_flag(&r->spec, "run", argc, argv, &i);
        if (rc == 1)
            continue;
        if (rc == 0) {
            ns_cli_error("run", "unknown argument '%s' (see --help)", a);
            return 2;
        }
        return -rc;
    }
    if (!r->spec.job.builtin[0] && !r->spec.job.source) {
        ns_cli_error("run", "no kernel: give --kernel FILE.cl or --builtin "
                            "NAME");
        return 2;
    }
    return 0;
}

/* Fill a built-in's source hash and default entry point. */

/* $NIGHTSHIFT_CACHE, $XDG_CACHE_HOME/nightshift/programs or
 * ~/.cache/nightshift/programs, created; "" (no cache) if none works. */

static const char *s_kernel_name(const s_run_t *r)
{
    if (r->spec.job.builtin[0])
        return r->spec.job.builtin;
    return r->spec.kernel_path ? r->spec.kernel_path : "(source)";
}

static double s_ms(uint64_t us)
{
    return (double)us / 1000.0;
}

static void s_pack_str_kv(msgpack_packer *pk, const char *k, const char *v)
{
    ns_mp_str(pk, k);
    ns_mp_str(pk, v);
}

static int s_print_json(const s_run_t *r, int ok, const char *job_hex,
                        const ns_devinfo_t *dev, const ns_timings_t *t,
                        uint64_t total_us)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);

    uint32_t n_out = 0;
    for (uint32_t k = 0; k < r->spec.job.n_args; k++)
        n_out += r->spec.job.args[k].kind == NS_ARG_OUT;
    const ns_job_t *job = &r->spec.job;
    msgpack_pack_map(&pk, (ok ? 11 : 9) + (job->n_steps ? 1 : 0));
    s_pack_str_kv(&pk, "status", ok ? "ok" : "failed");
    if (job->n_steps) { /* a pipeline: its steps' entries, in order */
        ns_mp_str(&pk, "steps");
        msgpack_pack_array(&pk, job->n_steps);
        for (uint32_t s = 0; s < job->n_steps; s++)
            ns_mp_str(&pk, job->steps[s].entry);
    }
    ns_mp_str(&pk, "error");
    if (ok)
        msgpack_pack_nil(&pk);
    else
        ns_mp_str(&pk, r->error);
    s_pack_str_kv(&pk, "job", job_hex);
    s_pack_str_kv(&pk, "kernel", s_kernel_name(r));
    s_pack_str_kv(&pk, "entry", r->spec.job.entry);
    ns_mp_str(&pk, "device");
    if (dev)
        ns_mp_str(&pk, dev->name);
    else
        msgpack_pack_nil(&pk);
    ns_mp_str(&pk, "items");
    msgpack_pack_uint64(&pk, ns_job_work_items(&r->spec.job));
    ns_mp_str(&pk, "units");
    msgpack_pack_uint64(&pk, ns_job_units(&r->spec.job));
    ns_mp_str(&pk, "timings_ms");
    msgpack_pack_map(&pk, 5);
    ns_mp_str(&pk, "build");
    msgpack_pack_double(&pk, s_ms(t->build_us));
    ns_mp_str(&pk, "upload");
    msgpack_pack_double(&pk, s_ms(t->upload_us));
    ns_mp_str(&pk, "run");
    msgpack_pack_double(&pk, s_ms(t->run_us));
    ns_mp_str(&pk, "download");
    msgpack_pack_double(&pk, s_ms(t->download_us));
    ns_mp_str(&pk, "total");
    msgpack_pack_double(&pk, s_ms(total_us));
    if (ok) {
        ns_mp_str(&pk, "cache_hit");
        if (t->cache_hit)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        ns_mp_str(&pk, "outputs");
        msgpack_pack_array(&pk, n_out);
        for (uint32_t k = 0; k < r->spec.job.n_args; k++) {
            const ns_arg_t *a = &r->spec.job.args[k];
            if (a->kind != NS_ARG_OUT)
                continue;
            ns_hash_t h;
            char hex[2 * NS_HASH_BYTES + 1];
            ns_hash(h, r->spec.outputs[k], a->size);
            ns_hex(hex, h, NS_HASH_BYTES);
            msgpack_pack_map(&pk, 4);
            ns_mp_str(&pk, "arg");
            msgpack_pack_uint32(&pk, k);
            bool kept = r->spec.out_paths[k] &&
                        !(job->n_steps && ns_jobspec_intermediate(&r->spec, k));
            s_pack_str_kv(&pk, "file", kept ? r->spec.out_paths[k] : "");
            ns_mp_str(&pk, "bytes");
            msgpack_pack_uint64(&pk, a->size);
            s_pack_str_kv(&pk, "hash", hex);
        }
    }
    int status = ns_cli_print_json(sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return status;
}

static void s_print_human(const s_run_t *r, const char *job_hex,
                          const ns_devinfo_t *dev, const ns_timings_t *t,
                          uint64_t total_us)
{
    char entry[NS_MAX_STEPS * (NS_MAX_ENTRY + 3) + 1];
    const ns_job_t *job = &r->spec.job;
    snprintf(entry, sizeof entry, "%s", job->entry);
    for (size_t s = 0, n = 0; s < job->n_steps && n < sizeof entry; s++)
        n += (size_t)snprintf(entry + n, sizeof entry - n, "%s%s", /* steps */
                              s ? " > " : "", job->steps[s].entry);
    printf("ran %s (%s) on %s: %" PRIu64 " work-items in %" PRIu64
           " units, job %.16s\n",
           s_kernel_name(r), entry, dev ? dev->name : "?",
           ns_job_work_items(job), ns_job_units(job), job_hex);
    printf("  build    %10.3f ms%s\n", s_ms(t->build_us),
           t->cache_hit ? "  (program cache hit)" : "");
    printf("  upload   %10.3f ms\n", s_ms(t->upload_us));
    printf("  run      %10.3f ms\n", s_ms(t->run_us));
    printf("  download %10.3f ms\n", s_ms(t->download_us));
    printf("  total    %10.3f ms  (worker start-up included)\n",
           s_ms(total_us));
    for (uint32_t k = 0; k < r->spec.job.n_args; k++) {
        const ns_arg_t *a = &r->spec.job.args[k];
        if (a->kind == NS_ARG_OUT && r->spec.out_paths[k] &&
            !(job->n_steps && ns_jobspec_intermediate(&r->spec, k)))
            printf("  wrote %s (%" PRIu64 " bytes)\n", r->spec.out_paths[k],
                   a->size);
    }
}

/* --help: the usage and the built-ins; with --builtin NAME, that
 * built-in's own text (its arguments, NDRange and what a unit owns). */
static int s_help(int argc, char **argv)
{
    size_t n = 0;
    const ns_builtin_t *all = ns_builtin_list(&n);
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--builtin") != 0)
            continue;
        const ns_builtin_t *b = ns_builtin_find(argv[i + 1]);
        if (!b) {
            ns_cli_error("run",
                         "unknown built-in '%s' (`nightshift run "
                         "--help` lists them)",
                         argv[i + 1]);
            return 2;
        }
        /* the top comment, without its markers */
        const char *p = b->source, *end = strstr(p, "*/");
        if (strncmp(p, "/*", 2) != 0 || !end)
            end = p;
        else
            p += 2;
        printf("built-in %s (entry %s)\n\n", b->name, b->entry);
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            const char *q = p;
            while (q < p + len && (*q == ' ' || *q == '*'))
                q++;
            if (q == p + len && p == b->source + 2)
                ; /* the opening line is empty */
            else
                printf("  %.*s\n", (int)(p + len - q), q);
            p += len + (nl ? 1 : 0);
        }
        return 0;
    }
    fputs(s_usage, stdout);
    printf("\nBuilt-ins (`nightshift run --builtin NAME --help` gives each "
           "one's arguments):\n");
    for (size_t k = 0; k < n; k++)
        printf("  %-16s %s\n", all[k].name, all[k].summary);
    return 0;
}

int ns_cmd_run(int argc, char **argv)
{
    s_run_t *r = NULL;
    ns_worker_t *w = NULL;
    ns_timings_t t;
    char job_hex[2 * NS_HASH_BYTES + 1] = "";
    int status = 1;

    if (ns_cli_wants_help(argc, argv))
        return s_help(argc, argv);
    /* The error line says what went wrong; the supervisor's warnings
     * (worker crashed, timed out) would only repeat it. */
    ns_log_threshold = NS_LOG_ERROR;
    memset(&t, 0, sizeof t);
    r = calloc(1, sizeof *r);
    if (!r) {
        ns_cli_error("run", "%s", ns_strerror(NS_ERR_NOMEM));
        return 1;
    }
    ns_jobspec_init(&r->spec);
    r->spec.as_pipeline = true; /* a job file's steps: one run, as submit */
    status = s_parse(r, argc, argv);
    if (status == 0)
        status = ns_jobspec_prepare(&r->spec, "run");
    if (status != 0)
        goto out;
    int rc = NS_OK, steps = ns_jobspec_steps(&r->spec);
    ns_cache_dir(r->cache_dir, sizeof r->cache_dir);
    ns_worker_opts_t o;
    ns_worker_opts_init(&o);
    o.device_index = r->device;
    o.cache_dir = r->cache_dir[0] ? r->cache_dir : NULL;
    o.timeout_ms = r->timeout_ms;
    w = ns_worker_new(&o, &rc);
    if (!w) {
        ns_cli_error("run", "cannot start the worker process: %s",
                     ns_strerror(rc));
        status = 1;
        goto out;
    }
    /* A pipeline runs in one request (its steps in order on one device);
     * a sharded one (a job file with "shards") step by step, each step's
     * outputs written before the next reads them, and --json prints an
     * array of the steps' documents. */
    if (r->json && steps > 1)
        fputs("[\n", stdout);
    for (int step = 0;; step++) {
        ns_hash_t id;
        if (ns_job_id(&r->spec.job, id) == NS_OK)
            ns_hex(job_hex, id, NS_HASH_BYTES);
        if (steps > 1 && !r->json)
            printf("step %d/%d: %s\n", step + 1, steps, r->spec.job.entry);
        uint64_t t0 = ns_mono_us();
        rc = ns_worker_run(w, &r->spec.job, r->spec.inputs, r->spec.outputs, &t,
                           r->error, sizeof r->error);
        uint64_t total_us = ns_mono_us() - t0;
        if (rc != NS_OK && r->spec.kernel_path) { /* the user's file name */
            const char *base = strrchr(r->spec.kernel_path, '/');
            ns_build_log_rename(r->error, sizeof r->error,
                                base ? base + 1 : r->spec.kernel_path);
        }
        if (rc == NS_OK)
            rc = ns_jobspec_write_outputs(&r->spec, r->error, sizeof r->error);
        const ns_devinfo_t *dev = ns_worker_device(w);
        if (r->json && step > 0)
            fputs(",\n", stdout);
        if (rc != NS_OK) {
            if (steps > 1)
                ns_cli_error("run", "step %d/%d: %s", step + 1, steps,
                             r->error);
            else
                ns_cli_error("run", "%s", r->error);
            if (r->json)
                s_print_json(r, 0, job_hex, dev, &t, total_us);
            status = 1;
            break;
        }
        if (r->json)
            status = s_print_json(r, 1, job_hex, dev, &t, total_us);
        else {
            s_print_human(r, job_hex, dev, &t, total_us);
            status = 0;
        }
        if (status != 0 ||
            (status = ns_jobspec_next_step(&r->spec, "run")) != 0)
            break;
    }
    if (status == -1)
        status = 0; /* no step left */
    if (r->json && steps > 1)
        fputs("]\n", stdout);
out:
    ns_worker_destroy(&w);
    if (r) {
        ns_jobspec_release(&r->spec);
        free(r);
    }
    return status;
}
