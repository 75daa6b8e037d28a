/* cmd_submit.c - `nightshift submit`: parse the flags, start a light peer
 * (node/node.c) hosting one requester (node/requester.c), print its
 * progress and receipt.
 *
 * The job is kept in <datadir>/jobs/<job id>/ (node/jobdir.c) before
 * anything is posted, so `submit --resume JOB` can pick it up after a
 * crash from what the ledger says. */
#include "cli.h"
#include "ctl.h"
#include "jobspec.h"

#include "nightshift/jobdir.h"
#include "nightshift/log.h"
#include "nightshift/node.h"
#include "nightshift/policy.h"
#include "nightshift/preflight.h"
#include "nightshift/util.h"

#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    /* settings */
    const char *datadir;
    const char *bootstrap[NS_MAX_BOOTSTRAP];
    int n_bootstrap;
    const char *listen;
    const char *advertise; /* --advertise: where providers reach us */
    const char *reachable; /* --reachable yes|no|auto */
    const char *resume;
    const char *node; /* --node D: through the node running on D */
    uint64_t max_price, collateral;
    uint64_t bid_window_ms;
    uint64_t deadline_s, timeout_s;
    ns_reqs_t reqs;
    int json;
    int no_wait; /* --no-wait: fail at once when no provider can take it */
    /* the job */
    ns_jobspec_t spec;
    char out_paths[NS_MAX_ARGS][PATH_MAX]; /* --resume: from the jobdir */
    ns_buf_t packed;
    uint64_t t_start_ms;
} s_submit_t;

static ns_node_t *volatile s_node;
static volatile sig_atomic_t s_interrupted;

static void s_on_signal(int sig)
{
    s_interrupted = sig;
    if (s_node)
        ns_node_stop(s_node);
}

static void s_progress(void *user, const char *line)
{
    s_submit_t *s = user;
    if (s->json)
        return;
    fprintf(stderr, "[%6.2fs] %s\n",
            (double)(ns_mono_ms() - s->t_start_ms) / 1000.0, line);
}

static int s_deliver(void *user, char *err, size_t errlen)
{
    s_submit_t *s = user;
    return ns_jobspec_write_outputs(&s->spec, err, errlen);
}

static const char s_usage[] =
    "usage: nightshift submit --datadir D --bootstrap ID@tcp://HOST:PORT\n"
    "                         JOB-FLAGS --max-price CREDITS [--json]\n"
    "       nightshift submit --datadir D --bootstrap ADDR --resume JOB_ID\n"
    "       nightshift submit --node D JOB-FLAGS --max-price CREDITS [--json]\n"
    "\n"
    "Post one job to the network as a light peer with D's key and ledger:\n"
    "check it here first (it builds, its arguments fit the kernel, a few\n"
    "work-groups run alone the same way twice), lock the escrow, run a\n"
    "reverse auction, hand the job to the cheapest qualified provider\n"
    "(after a hardware challenge of its claimed device, once a day), check\n"
    "its result by challenge-response (k random units re-run here), then\n"
    "settle and write the outputs -- or slash the cheater with a fraud\n"
    "proof and start again without it. `nightshift cancel` ends a job.\n"
    "\n"
    "JOB-FLAGS as for `nightshift run` (--job FILE.json, or --kernel\n"
    "FILE.cl | --builtin NAME, --entry, --global, --local, --arg...,\n"
    "--tolerance, --checks K).\n"
    "Requirements and terms:\n"
    "  --max-price CREDITS   escrow; bids above it lose (required; credits,\n"
    "                        up to six decimals: a job is priced to the\n"
    "                        micro-credit)\n"
    "  --collateral C        provider's stake locked (default max-price/2)\n"
    "  --min-mem BYTES       device global memory\n"
    "  --device gpu|cpu|any  device type (default any)\n"
    "  --min-cl X.Y          OpenCL C version\n"
    "  --region R            provider region\n"
    "  --bid-window-ms N     auction length (default 300)\n"
    "  --deadline-s N        result due within (default 120)\n"
    "  --timeout-s N         give up after (default 600)\n"
    "  --listen EP           where providers reach us (default an ephemeral\n"
    "                        port on 127.0.0.1)\n"
    "  --advertise EP        the endpoint to announce when it is not the\n"
    "                        listening one (tcp://PUBLIC-IP:PORT, with\n"
    "                        --listen tcp://0.0.0.0:PORT)\n"
    "  --reachable no        behind a router (NAT): providers cannot dial\n"
    "                        us; we dial out, and a peer with node.relay=on\n"
    "                        passes bids on (yes|no|auto, default yes)\n"
    "  --node D              hand the job to the node running on datadir D\n"
    "                        (its key pays; progress streams back): no\n"
    "                        joining per job, for many jobs in a row\n"
    "  --no-wait             fail at once when no provider can take the\n"
    "                        job (default: wait for one, up to the\n"
    "                        deadline, saying why none can meanwhile)\n"
    "  --json                one JSON document: job, provider, price, refund,\n"
    "                        status (settled|failed), error, checks,\n"
    "                        timings_ms {match, run, verify, total}\n"
    "\n"
    "Exit status 0 only when the job was verified and settled; 130 when\n"
    "interrupted by SIGINT (Ctrl-C; 143 for SIGTERM), after ending the job\n"
    "cleanly.\n";

static int s_parse(s_submit_t *q, int argc, char **argv)
{
    for (int i = 1; i < argc;) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;
#define NUM(flag, dst)                                                         \
    if (strcmp(a, flag) == 0) {                                                \
        if (!v || ns_parse_u64(v, &n) != NS_OK) {                              \
            ns_cli_error("submit", "%s needs a whole number", flag);           \
            return 2;                                                          \
        }                                                                      \
        dst = n;                                                               \
        i += 2;                                                                \
        continue;                                                              \
    }
        if (strcmp(a, "--max-price") == 0 || strcmp(a, "--collateral") == 0) {
            uint64_t *dst = a[2] == 'm' ? &q->max_price : &q->collateral;
            if (!v || ns_credits_parse(v, dst) != NS_OK) {
                ns_cli_error("submit",
                             "%s needs an amount of credits (up to six "
                             "decimals: 10, 0.5, 0.000001)",
                             a);
                return 2;
            }
            if (a[2] == 'm' && *dst == 0) {
                ns_cli_error("submit", "--max-price must be more than 0: no "
                                       "provider works for nothing");
                return 2;
            }
            i += 2;
            continue;
        }
        NUM("--min-mem", q->reqs.min_mem_bytes)
        NUM("--bid-window-ms", q->bid_window_ms)
        NUM("--deadline-s", q->deadline_s)
        NUM("--timeout-s", q->timeout_s)
#undef NUM
        if (strcmp(a, "--json") == 0) {
            q->json = 1;
            i++;
            continue;
        }
        if (strcmp(a, "--no-wait") == 0) {
            q->no_wait = 1;
            i++;
            continue;
        }
        if (v && strcmp(a, "--datadir") == 0) {
            q->datadir = v;
        } else if (v && strcmp(a, "--bootstrap") == 0) {
            if (q->n_bootstrap < NS_MAX_BOOTSTRAP)
                q->bootstrap[q->n_bootstrap++] = v;
        } else if (v && strcmp(a, "--listen") == 0) {
            q->listen = v;
        } else if (v && strcmp(a, "--advertise") == 0) {
            q->advertise = v;
        } else if (v && strcmp(a, "--reachable") == 0) {
            q->reachable = v;
        } else if (v && strcmp(a, "--resume") == 0) {
            q->resume = v;
        } else if (v && strcmp(a, "--node") == 0) {
            q->node = v;
        } else if (v && strcmp(a, "--region") == 0) {
            snprintf(q->reqs.region, sizeof q->reqs.region, "%s", v);
        } else if (v && strcmp(a, "--min-cl") == 0) {
            if (sscanf(v, "%u.%u", &q->reqs.min_cl_major,
                       &q->reqs.min_cl_minor) != 2) {
                ns_cli_error("submit", "--min-cl wants X.Y, e.g. 1.2");
                return 2;
            }
        } else if (v && strcmp(a, "--device") == 0) {
            if (strcmp(v, "gpu") == 0)
                q->reqs.device_type = NS_DEV_GPU;
            else if (strcmp(v, "cpu") == 0)
                q->reqs.device_type = NS_DEV_CPU;
            else if (strcmp(v, "any") == 0)
                q->reqs.device_type = 0;
            else {
                ns_cli_error("submit", "--device wants gpu, cpu or any");
                return 2;
            }
        } else {
            int rc = ns_jobspec_flag(&q->spec, "submit", argc, argv, &i);
            if (rc == 1)
                continue;
            if (rc == 0) {
                ns_cli_error("submit", "unknown argument '%s' (see --help)", a);
                return 2;
            }
            return -rc;
        }
        i += 2;
    }
    if (q->node && (q->datadir || q->n_bootstrap || q->resume)) {
        ns_cli_error("submit", "--node D uses that node's key, ledger and "
                               "peers: no --datadir, --bootstrap or "
                               "--resume with it");
        return 2;
    }
    if (!q->node && q->n_bootstrap == 0) {
        ns_cli_error("submit", "--datadir and --bootstrap are required, or "
                               "--node D (see --help)");
        return 2;
    }
    int rc;
    if (!q->node && (rc = ns_cli_datadir("submit", &q->datadir, 0)) != 0)
        return rc;
    struct stat st;
    if (!q->node && (stat(q->datadir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        ns_cli_error("submit",
                     "datadir %s does not exist (`nightshift init --datadir "
                     "%s --genesis FILE` makes one)",
                     q->datadir, q->datadir);
        return 2;
    }
    if (!q->resume && q->max_price == 0) {
        ns_cli_error("submit", "--max-price CREDITS is required");
        return 2;
    }
    if (q->bid_window_ms > 60000) {
        ns_cli_error("submit", "--bid-window-ms is at most 60000");
        return 2;
    }
    return 0;
}

static void s_print_receipt(s_submit_t *q, const ns_receipt_t *rc,
                            const char *job_hex)
{
    uint64_t total = ns_mono_ms() - q->t_start_ms;
    char who[NS_ID_TEXT_LEN + 1] = "";
    if (!sodium_is_zero(rc->provider, NS_ID_BYTES))
        ns_id_text(who, rc->provider);
    bool ok = rc->phase == NS_RQ_DONE;
    if (q->json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, ok ? 10 : 11);
        ns_mp_str(&pk, "job");
        ns_mp_str(&pk, job_hex);
        ns_mp_str(&pk, "provider");
        ns_mp_str(&pk, who);
        ns_mp_str(&pk, "price");
        ns_mp_credits(&pk, rc->price);
        ns_mp_str(&pk, "refund");
        ns_mp_credits(&pk, rc->refund);
        ns_mp_str(&pk, "status");
        ns_mp_str(&pk, ok ? "settled" : "failed");
        if (!ok) {
            ns_mp_str(&pk, "error");
            ns_mp_str(&pk, rc->error);
        }
        ns_mp_str(&pk, "checks");
        msgpack_pack_uint32(&pk, rc->checked);
        ns_mp_str(&pk, "rounds");
        msgpack_pack_uint32(&pk, rc->rounds);
        ns_mp_str(&pk, "slashed");
        msgpack_pack_uint32(&pk, rc->slashed);
        ns_mp_str(&pk, "cancelled");
        msgpack_pack_uint32(&pk, rc->cancelled);
        ns_mp_str(&pk, "timings_ms");
        msgpack_pack_map(&pk, 4);
        ns_mp_str(&pk, "match");
        msgpack_pack_uint64(&pk, rc->match_ms);
        ns_mp_str(&pk, "run");
        msgpack_pack_uint64(&pk, rc->run_ms);
        ns_mp_str(&pk, "verify");
        msgpack_pack_uint64(&pk, rc->verify_ms);
        ns_mp_str(&pk, "total");
        msgpack_pack_uint64(&pk, total);
        ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    if (!ok) {
        ns_cli_error("submit", "%s", rc->error);
        return;
    }
    char checks[64];
    if (rc->checked)
        snprintf(checks, sizeof checks, "%u units re-run, all matched",
                 rc->checked);
    else
        snprintf(checks, sizeof checks, "verified when it was settled");
    char price[NS_CREDITS_TEXT], refund[NS_CREDITS_TEXT];
    printf("receipt\n  job       %s\n  provider  %s\n  price     %s "
           "credits (refund %s)\n  checks    %s\n  rounds    %u "
           "(slashed %u, cancelled %u, failures reported %u)\n  timings "
           "  match %llu ms, run %llu ms, verify %llu ms, total %llu ms\n",
           job_hex, who, ns_credits_fmt(price, rc->price),
           ns_credits_fmt(refund, rc->refund), checks, rc->rounds, rc->slashed,
           rc->cancelled, rc->failures, (unsigned long long)rc->match_ms,
           (unsigned long long)rc->run_ms, (unsigned long long)rc->verify_ms,
           (unsigned long long)total);
}

/* The light peer's settings: an ephemeral port, frequent heartbeats, no
 * job slots, the bootstrap peers given. */
static int s_config(s_submit_t *q, ns_config_t *cfg)
{
    char err[256], path[PATH_MAX];
    ns_config_defaults(cfg);
    /* The datadir's [jobs] settings: how long its jobs/ keeps finished
     * jobs (pruned when the light peer opens). The rest of config.ini is
     * a node's and does not apply here. */
    ns_config_t dd;
    ns_config_defaults(&dd);
    if (ns_path_join(path, sizeof path, q->datadir, "config.ini") == NS_OK &&
        access(path, F_OK) == 0 &&
        ns_config_load(&dd, path, err, sizeof err) == NS_OK) {
        cfg->jobs_retention_days = dd.jobs_retention_days;
        cfg->jobs_max_bytes = dd.jobs_max_bytes;
    }
    snprintf(cfg->listen, sizeof cfg->listen, "%s",
             q->listen ? q->listen : "tcp://127.0.0.1:0");
    cfg->heartbeat_interval_ms = 1000;
    cfg->slots = 0;
    if (q->advertise && ns_config_set(cfg, "node", "advertise", q->advertise,
                                      err, sizeof err) != NS_OK) {
        ns_cli_error("submit", "bad --advertise '%s' (tcp://HOST:PORT)",
                     q->advertise);
        return 2;
    }
    if (q->reachable && ns_config_set(cfg, "node", "reachable", q->reachable,
                                      err, sizeof err) != NS_OK) {
        ns_cli_error("submit", "bad --reachable '%s' (yes, no or auto)",
                     q->reachable);
        return 2;
    }
    for (int i = 0; i < q->n_bootstrap; i++)
        if (ns_config_set(cfg, "node", "bootstrap", q->bootstrap[i], err,
                          sizeof err) != NS_OK) {
            ns_cli_error("submit", "bad --bootstrap '%s'", q->bootstrap[i]);
            return 2;
        }
    return 0;
}

/* The job from the flags, or from its saved copy for --resume. */
static int s_job(s_submit_t *q)
{
    if (q->resume) {
        char err[512];
        ns_hash_t id;
        if (ns_unhex(id, NS_HASH_BYTES, q->resume) != NS_OK) {
            ns_cli_error("submit", "--resume wants a job id (64 hex digits)");
            return 1;
        }
        if (ns_jobdir_load(q->datadir, q->resume, &q->spec.job, q->spec.in_bufs,
                           q->spec.inputs, q->out_paths, err,
                           sizeof err) != NS_OK) {
            ns_cli_error("submit", "%s", err);
            return 1;
        }
        for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
            q->spec.out_paths[i] = q->out_paths[i][0] ? q->out_paths[i] : NULL;
    } else {
        int status = ns_jobspec_prepare(&q->spec, "submit");
        if (status)
            return status;
        /* Before any credit moves: does it build here, do the arguments
         * fit the kernel? (--node: the node checks, on its warm runtime.) */
        if (q->node)
            goto pack;
        char err[512];
        ns_preflight_t pf;
        const char *name = q->spec.kernel_path;
        if (name && strrchr(name, '/'))
            name = strrchr(name, '/') + 1;
        int rc =
            ns_preflight_check(0, &q->spec.job, name, &pf, err, sizeof err);
        if (rc == NS_ERR_INVAL || rc == NS_ERR_OPENCL) {
            ns_cli_error("submit", "%s", err);
            return rc == NS_ERR_INVAL ? 2 : 1;
        }
        if (rc != NS_OK) {
            ns_cli_error("submit", "cannot check the job on this machine: %s",
                         err);
            return 1;
        }
    }
pack:;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, &q->packed);
    ns_job_pack(&pk, &q->spec.job);
    if (w.err != NS_OK) {
        ns_cli_error("submit", "cannot encode the job");
        return 1;
    }
    for (uint32_t i = 0; i < q->spec.job.n_args; i++)
        if (q->spec.job.args[i].kind == NS_ARG_OUT && !q->spec.outputs[i]) {
            q->spec.outputs[i] = calloc(1, q->spec.job.args[i].size);
            if (!q->spec.outputs[i]) {
                ns_cli_error("submit", "out of memory for the outputs");
                return 1;
            }
        }
    return 0;
}

/* A path the node (another process, maybe another working directory)
 * can use. */
static int s_abs_path(const char *in, char *out, size_t cap, bool must_exist)
{
    char real[PATH_MAX];
    if (realpath(in, real)) {
        if (strlen(real) >= cap)
            return NS_ERR_TOOBIG;
        memcpy(out, real, strlen(real) + 1);
        return NS_OK;
    }
    if (must_exist)
        return NS_ERR_NOTFOUND;
    /* an output that does not exist yet: its directory must */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", in);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : in;
    if (slash)
        *slash = '\0';
    if (!realpath(slash ? (dir[0] ? dir : "/") : ".", real))
        return NS_ERR_NOTFOUND;
    int n = snprintf(out, cap, "%s/%s", strcmp(real, "/") ? real : "", base);
    return n > 0 && (size_t)n < cap ? NS_OK : NS_ERR_TOOBIG;
}

/* submit --node D: the node runs the requester; we poll its progress. */
static int s_submit_via_node(s_submit_t *q)
{
    ns_ctl_req_t *req = calloc(1, sizeof *req);
    char err[512], hex[2 * NS_HASH_BYTES + 1];
    int status = 1;
    if (!req)
        return 1;
    req->kind = NS_CTL_SUBMIT;
    req->terms.max_price = q->max_price;
    req->terms.no_wait = q->no_wait != 0;
    req->terms.collateral = q->collateral      ? q->collateral
                            : q->max_price / 2 ? q->max_price / 2
                                               : 1;
    req->terms.bid_window_ms = (uint32_t)q->bid_window_ms;
    req->terms.deadline_s = q->deadline_s;
    req->terms.timeout_s = q->timeout_s;
    req->terms.reqs = q->reqs;
    req->desc = q->packed.data;
    req->desc_len = q->packed.len;
    req->n_args = q->spec.job.n_args;
    if (q->spec.kernel_path) {
        const char *base = strrchr(q->spec.kernel_path, '/');
        snprintf(req->source_name, sizeof req->source_name, "%s",
                 base ? base + 1 : q->spec.kernel_path);
    }
    for (uint32_t i = 0; i < req->n_args; i++) {
        const char *in = q->spec.in_paths[i], *out = q->spec.out_paths[i];
        if ((in && s_abs_path(in, req->in_path[i], NS_CTL_MAX_PATH, true)) ||
            (out &&
             s_abs_path(out, req->out_path[i], NS_CTL_MAX_PATH, false))) {
            ns_cli_error("submit", "arg %u: '%s' is not a usable path", i,
                         in ? in : out);
            goto out;
        }
    }
    uint8_t *doc = NULL;
    size_t len = 0;
    if (ns_ctl_call(q->node, req, &doc, &len, err, sizeof err) != NS_OK) {
        /* the node's own words, without the transport's prefix */
        const char *why =
            strncmp(err, "the node refused: ", 18) == 0 ? err + 18 : err;
        ns_cli_error("submit", "%s", why);
        goto out;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, doc, len);
    ns_mpr_bin_exact(&r, req->job_id, NS_HASH_BYTES);
    int rc = ns_mpr_end(&r);
    free(doc);
    if (rc != NS_OK) {
        ns_cli_error("submit", "the node answered something else");
        goto out;
    }
    ns_hex(hex, req->job_id, NS_HASH_BYTES);
    char line[200], max[NS_CREDITS_TEXT];
    snprintf(line, sizeof line,
             "job %.16s handed to the node on %s: %llu work-items in %llu "
             "units, max price %s credits",
             hex, q->node, (unsigned long long)ns_job_work_items(&q->spec.job),
             (unsigned long long)ns_job_units(&q->spec.job),
             ns_credits_fmt(max, q->max_price));
    s_progress(q, line);
    req->kind = NS_CTL_JOB;
    req->from_line = 0;
    ns_ctl_job_t *j = calloc(1, sizeof *j);
    for (; j;) {
        if (ns_ctl_call(q->node, req, &doc, &len, err, sizeof err) != NS_OK) {
            ns_cli_error("submit",
                         "lost the node: %s (the job goes on "
                         "there; `nightshift ledger` shows it)",
                         err);
            break;
        }
        rc = ns_ctl_job_read(doc, len, j);
        free(doc);
        if (rc != NS_OK) {
            ns_cli_error("submit", "the node answered something else");
            break;
        }
        for (uint32_t i = 0; i < j->n_lines; i++)
            s_progress(q, j->lines[i]);
        req->from_line = j->next_line;
        if (j->finished) {
            s_print_receipt(q, &j->receipt, hex);
            status = j->receipt.phase == NS_RQ_DONE ? 0 : 1;
            break;
        }
        if (s_interrupted) {
            ns_cli_error("submit",
                         "interrupted; the job goes on in the node "
                         "(`nightshift cancel %s --datadir %s` "
                         "ends it)",
                         hex, q->node);
            status = 128 + s_interrupted; /* 130 for Ctrl-C */
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    free(j);
out:
    free(req);
    return status;
}

static int s_submit(s_submit_t *q)
{
    ns_config_t cfg;
    char err[512], job_hex[2 * NS_HASH_BYTES + 1];
    int status = s_job(q), rc;
    if (status)
        return status;
    if (q->node) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = s_on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        return s_submit_via_node(q);
    }
    if ((status = s_config(q, &cfg)) != 0)
        return status;
    char cache[PATH_MAX];
    ns_cache_dir(cache, sizeof cache);
    ns_node_conf_t c = {.datadir = q->datadir,
                        .cfg = &cfg,
                        .light = true,
                        .cache_dir = cache[0] ? cache : NULL};
    ns_node_t *node = ns_node_open(&c, err, sizeof err);
    if (!node) {
        ns_cli_error("submit", "%s", err);
        return 1;
    }
    ns_requester_opts_t o;
    memset(&o, 0, sizeof o);
    o.job = &q->spec.job;
    o.packed = q->packed.data;
    o.packed_len = q->packed.len;
    o.inputs = q->spec.inputs;
    o.outputs = q->spec.outputs;
    o.max_price = q->max_price;
    o.no_wait = q->no_wait != 0;
    o.collateral = q->collateral      ? q->collateral
                   : q->max_price / 2 ? q->max_price / 2
                                      : 1;
    o.bid_window_ms = (uint32_t)q->bid_window_ms;
    o.deadline_s = q->deadline_s;
    o.timeout_s = q->timeout_s;
    o.reqs = q->reqs;
    o.join = true;
    o.deliver = s_deliver;
    o.deliver_user = q;
    o.progress = s_progress;
    o.progress_user = q;
    o.progress_ticks = isatty(STDERR_FILENO);
    status = 1;
    if (ns_job_id(&q->spec.job, o.desc_id) != NS_OK) {
        ns_cli_error("submit", "cannot encode the job");
        goto out;
    }
    const uint8_t *self = ns_identity_pk(ns_node_identity(node));
    if (q->resume) {
        o.resume = true;
        if (ns_unhex(o.job_id, NS_HASH_BYTES, q->resume) != NS_OK)
            goto out; /* checked by s_job */
    } else {
        /* The same descriptor may be submitted again: the market id adds
         * our id and a random nonce. */
        randombytes_buf(o.nonce, sizeof o.nonce);
        ns_ledger_job_id(o.job_id, self, o.desc_id, o.nonce);
    }
    ns_hex(job_hex, o.job_id, NS_HASH_BYTES);
    if (!q->resume &&
        ns_jobdir_save(q->datadir, job_hex, q->packed.data, q->packed.len,
                       &q->spec.job, q->spec.inputs,
                       (const char *const *)q->spec.out_paths) != NS_OK) {
        ns_cli_error("submit", "cannot save the job under %s/jobs", q->datadir);
        goto out;
    }
    ns_requester_t *req = ns_node_add_requester(node, &o, &rc);
    if (!req) {
        ns_cli_error("submit", "cannot start the requester: %s",
                     ns_strerror(rc));
        goto out;
    }
    char line[200], max[NS_CREDITS_TEXT];
    snprintf(line, sizeof line,
             "job %.16s: %llu work-items in %llu units, max price "
             "%s credits",
             job_hex, (unsigned long long)ns_job_work_items(&q->spec.job),
             (unsigned long long)ns_job_units(&q->spec.job),
             ns_credits_fmt(max, q->max_price));
    s_progress(q, line);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    s_node = node;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = ns_node_run(node);
    s_node = NULL;
    if (!ns_requester_finished(req)) {
        char why[400];
        snprintf(why, sizeof why,
                 "interrupted in phase %s; resume with `nightshift submit "
                 "--datadir %s --bootstrap ADDR --resume %s`",
                 ns_rq_phase_name(ns_requester_receipt(req)->phase), q->datadir,
                 job_hex);
        ns_requester_stop(req, why);
    }
    s_print_receipt(q, ns_requester_receipt(req), job_hex);
    status = ns_requester_receipt(req)->phase == NS_RQ_DONE ? 0
             : s_interrupted ? 128 + s_interrupted /* 130 for Ctrl-C */
                             : 1;
out:
    ns_node_close(&node);
    return status;
}

int ns_cmd_submit(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_submit_t *q = calloc(1, sizeof *q);
    if (!q)
        return 1;
    ns_jobspec_init(&q->spec);
    ns_buf_init(&q->packed);
    q->bid_window_ms = NS_POLICY_BID_WINDOW_MS;
    q->deadline_s = NS_POLICY_DEADLINE_S;
    q->timeout_s = NS_POLICY_TIMEOUT_S;
    q->t_start_ms = ns_mono_ms();
    int status = s_parse(q, argc, argv);
    if (status == 0) {
        ns_log_threshold = NS_LOG_ERROR;
        status = s_submit(q);
    }
    ns_jobspec_release(&q->spec);
    ns_buf_release(&q->packed);
    free(q);
    return status;
}
