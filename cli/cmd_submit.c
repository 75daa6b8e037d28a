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
#include "shards.h"

#include "nightshift/blobs.h"
#include "nightshift/jobdir.h"
#include "nightshift/log.h"
#include "nightshift/node.h"
#include "nightshift/policy.h"
#include "nightshift/util.h"
#include "nightshift/worker_frame.h"
#include "nightshift/worker_pool.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct s_submit {
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
    bool steps_apart;     /* --steps-apart: a pipeline's steps as jobs of their
                             own, one after the other */
    int fault_fork_award; /* --fault fork-award (test networks) */
    int fault_no_preflight; /* --fault no-preflight (test networks) */
    /* the job */
    ns_blobs_t *store; /* light peer: <datadir>/blobs, the inputs' copies */
    ns_wpool_t *pool;  /* where the job's kernel runs here: sandboxed
                          workers (the light peer's requesters use them
                          too), never this process */
    int in_fds[NS_MAX_ARGS]; /* the inputs' blobs, read-only, or -1 */
    ns_jobspec_t spec;
    char out_paths[NS_MAX_ARGS][PATH_MAX]; /* --resume: from the jobdir */
    ns_buf_t packed;
    uint64_t t_start_ms;
    int json_docs; /* --json documents printed (a pipeline's array) */
    /* --shards N > 1: the shards, each run by its own requester */
    ns_shardset_t set;
    struct s_shard_ctx {
        struct s_submit *q;
        uint32_t i;
        ns_requester_t *req;             /* light peer */
        ns_hash_t job_id;                /* market id */
        char tmp[NS_MAX_ARGS][PATH_MAX]; /* --node: its output files */
        ns_ctl_job_t *ctl;               /* --node: its last report */
        uint32_t from_line;
        bool finished;
    } ctx[NS_MAX_SHARDS];
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
    "--tolerance, --checks K). A job file of several steps is a pipeline:\n"
    "one job that one provider runs step after step, its intermediates\n"
    "kept there but for what the check of each step needs. With --shards\n"
    "each step is a job of its own instead, sharded, posted once the step\n"
    "before settled (--max-price is each step's escrow; --json prints an\n"
    "array).\n"
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
    "  --shards N            cut the job into N shards along global[0]\n"
    "                        (rows), run side by side by N providers, each\n"
    "                        checked and paid on its own (max-price and\n"
    "                        collateral are split evenly); a shard that\n"
    "                        fails moves on alone; the outputs are\n"
    "                        assembled in row order (docs/JOBS.md)\n"
    "  --steps-apart         a pipeline's steps as jobs of their own, one\n"
    "                        after the other, each with its own auction\n"
    "                        and provider (as --shards runs them)\n"
    "  --no-wait             fail at once when no provider can take the\n"
    "                        job (default: wait for one, up to the\n"
    "                        deadline, saying why none can meanwhile)\n"
    "  --fault no-preflight  test networks only: post the job without\n"
    "                        sampling its units first (a requester that\n"
    "                        sends a kernel no check can pass)\n"
    "  --fault fork-award    test networks only: fork our chain at the\n"
    "                        award (a TRANSFER at its seq, sent to half of\n"
    "                        the peers), to test fork resolution\n"
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
        if (strcmp(a, "--steps-apart") == 0) {
            q->steps_apart = true;
            i++;
            continue;
        }
        if (strcmp(a, "--no-wait") == 0) {
            q->no_wait = 1;
            i++;
            continue;
        }
        if (v && strcmp(a, "--fault") == 0) {
            if (strcmp(v, "fork-award") == 0) {
                q->fault_fork_award = 1;
            } else if (strcmp(v, "no-preflight") == 0) {
                q->fault_no_preflight = 1;
            } else {
                ns_cli_error("submit", "--fault: fork-award or no-preflight");
                return 2;
            }
        } else if (v && strcmp(a, "--datadir") == 0) {
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
    if (q->fault_no_preflight && q->node) {
        ns_cli_error("submit", "--fault no-preflight: a light peer's job "
                               "only (not --node)");
        return 2;
    }
    if (q->fault_fork_award && q->node) {
        ns_cli_error("submit", "--fault fork-award: a light peer's job only "
                               "(not with --node)");
        return 2;
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
    if (q->deadline_s > NS_POLICY_MAX_DEADLINE_S ||
        q->timeout_s > NS_POLICY_MAX_DEADLINE_S) {
        ns_cli_error("submit",
                     "--deadline-s and --timeout-s are at most %llu "
                     "(a year)",
                     (unsigned long long)NS_POLICY_MAX_DEADLINE_S);
        return 2;
    }
    if (q->bid_window_ms > 60000) {
        ns_cli_error("submit", "--bid-window-ms is at most 60000");
        return 2;
    }
    return 0;
}

/* The outcome keys of a receipt (--json): status, error when it failed,
 * checks, rounds, slashed, cancelled: 5 or 6 map entries. */
static void s_pack_outcome(msgpack_packer *pk, const ns_receipt_t *rc)
{
    bool ok = rc->phase == NS_RQ_DONE;
    ns_mp_str(pk, "status");
    ns_mp_str(pk, ok ? "settled" : "failed");
    if (!ok) {
        ns_mp_str(pk, "error");
        ns_mp_str(pk, rc->error);
    }
    ns_mp_str(pk, "checks");
    msgpack_pack_uint32(pk, rc->checked);
    ns_mp_str(pk, "rounds");
    msgpack_pack_uint32(pk, rc->rounds);
    ns_mp_str(pk, "slashed");
    msgpack_pack_uint32(pk, rc->slashed);
    ns_mp_str(pk, "cancelled");
    msgpack_pack_uint32(pk, rc->cancelled);
}

/* A pipeline's --json output is an array of its steps' documents. */
static void s_json_next(s_submit_t *q)
{
    if (ns_jobspec_steps(&q->spec) > 1)
        fputs(q->json_docs++ ? ",\n" : "[\n", stdout);
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
        s_json_next(q);
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
        s_pack_outcome(&pk, rc);
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
/* The datadir's config.ini (defaults where it has none or it does not
 * read: the node on that datadir says why). */
static void s_datadir_config(const s_submit_t *q, ns_config_t *dd)
{
    char err[256], path[PATH_MAX];
    ns_config_defaults(dd);
    if (ns_path_join(path, sizeof path, q->datadir, "config.ini") == NS_OK &&
        access(path, F_OK) == 0 &&
        ns_config_load(dd, path, err, sizeof err) != NS_OK)
        ns_config_defaults(dd);
}

static int s_config(s_submit_t *q, ns_config_t *cfg)
{
    char err[256];
    ns_config_defaults(cfg);
    /* The datadir's [jobs] settings: how long its jobs/ keeps finished
     * jobs (pruned when the light peer opens), and the cap of its blob
     * store (where the inputs are). The rest of config.ini is a node's
     * and does not apply here. */
    ns_config_t dd;
    s_datadir_config(q, &dd);
    cfg->jobs_retention_days = dd.jobs_retention_days;
    cfg->jobs_max_bytes = dd.jobs_max_bytes;
    cfg->blob_cache_bytes = dd.blob_cache_bytes;
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

/* What is left of --timeout-s (0: none given): it bounds the whole
 * command, its checks here and the requester's wait alike. */
static uint64_t s_left_s(const s_submit_t *q)
{
    if (!q->timeout_s)
        return 0;
    uint64_t spent = (ns_mono_ms() - q->t_start_ms) / 1000;
    return q->timeout_s > spent ? q->timeout_s - spent : 1;
}

/* ---- the sandbox ---------------------------------------------------------
 * The job's kernel never runs in this process: its build, its argument
 * check and the shards' sampled units run in a sandboxed worker (exec/
 * worker.h), which the light peer's requesters then use, warm. */

static int s_pool(s_submit_t *q, char *err, size_t errlen)
{
    if (q->pool)
        return NS_OK;
    char cache[PATH_MAX];
    int rc;
    ns_worker_opts_t o;
    ns_cache_dir(cache, sizeof cache); /* a check passed once: at once */
    ns_worker_opts_init(&o);
    o.cache_dir = cache[0] ? cache : NULL;
    /* shards' requesters check side by side */
    q->pool = ns_wpool_new(&o, q->spec.shards > 1 ? 2 : 1, &rc);
    if (!q->pool)
        snprintf(err, errlen, "cannot make a sandbox: %s", ns_strerror(rc));
    return q->pool ? NS_OK : rc;
}

/* Run the pre-flight's parts in what (NS_PF_*) over k units of job in a
 * sandboxed worker, within the pre-flight's budget and the job's
 * deadline; Ctrl-C ends it (NS_ERR_INTR). err: one line for the user. */
static int s_sandbox(s_submit_t *q, const ns_job_t *job, uint32_t what,
                     uint32_t k, char *err, size_t errlen)
{
    int rc = s_pool(q, err, errlen);
    if (rc != NS_OK)
        return rc;
    ns_worker_t *w = ns_wpool_take(q->pool, &rc);
    if (!w) {
        snprintf(err, errlen, "cannot start a sandboxed worker: %s",
                 ns_strerror(rc));
        return rc;
    }
    /* the inputs go as their blobs' descriptors where the store has them */
    for (uint32_t i = 0; q->store && i < job->n_args; i++) {
        uint64_t size = 0;
        if (q->in_fds[i] >= 0 || job->args[i].kind != NS_ARG_IN ||
            ns_blobs_open_ro(q->store, job->args[i].hash, &q->in_fds[i],
                             &size) != NS_OK)
            continue;
        if (size != job->args[i].size) {
            close(q->in_fds[i]);
            q->in_fds[i] = -1;
        }
    }
    uint64_t limit = NS_POLICY_PREFLIGHT_BUDGET_MS;
    bool by_deadline = q->deadline_s && q->deadline_s * 1000 < limit;
    bool by_timeout = false;
    if (by_deadline)
        limit = q->deadline_s * 1000;
    uint64_t spent = ns_mono_ms() - q->t_start_ms, left = 1;
    if (q->timeout_s && q->timeout_s * 1000 > spent)
        left = q->timeout_s * 1000 - spent;
    if (q->timeout_s && left < limit) { /* what is left of --timeout-s */
        limit = left;
        by_deadline = false;
        by_timeout = true;
    }
    const char *name = q->spec.kernel_path;
    if (name && strrchr(name, '/'))
        name = strrchr(name, '/') + 1;
    char why[NS_WORKER_MAX_ERROR + 1];
    ns_worker_set_timeout(w, (uint32_t)limit);
    rc = ns_worker_preflight(w, job, q->spec.inputs, q->in_fds, what, k, name,
                             (const volatile int *)&s_interrupted, NULL, why,
                             sizeof why);
    ns_wpool_give(q->pool, &w);
    const char *crash = "the kernel crashed the OpenCL runtime";
    const char *part = what == NS_PF_CHECK ? "building the kernel"
                                           : "the pre-flight's sampled units";
    if (rc == NS_ERR_TIMEOUT && strstr(why, "ms limit") && by_deadline)
        snprintf(err, errlen,
                 "%s ran past %.1f s: this kernel cannot finish within its "
                 "deadline of %llu s",
                 part, (double)limit / 1000.0,
                 (unsigned long long)q->deadline_s);
    else if (rc == NS_ERR_TIMEOUT && strstr(why, "ms limit"))
        snprintf(err, errlen, "%s ran past %s of %.0f s", part,
                 by_timeout ? "--timeout-s" : "the pre-flight's budget",
                 (double)limit / 1000.0);
    else if (rc != NS_OK && !strncmp(why, crash, strlen(crash)))
        snprintf(err, errlen, "the kernel crashed in the pre-flight%s",
                 why + strlen(crash));
    else
        snprintf(err, errlen, "%s", why);
    return rc;
}

/* ns_shardset_init's sampler: a shard's units in the sandbox. A machine
 * without an OpenCL device (a client of a node) skips the sample, as the
 * cut was always made without one there. */
static int s_shard_sample(void *user, const ns_job_t *shard, char *err,
                          size_t errlen)
{
    int rc = s_sandbox(user, shard, NS_PF_SAMPLE, 2, err, errlen);
    if (rc != NS_OK && rc != NS_ERR_INTR &&
        (strstr(err, "cannot open OpenCL device") ||
         strstr(err, "while opening OpenCL device") ||
         strstr(err, "did not open OpenCL device")))
        return NS_OK;
    return rc;
}

/* --resume: the terms saved with the job (jobdir.h) where the command
 * line gave none, so that the job is announced again as it was first
 * (a GPU job stays a GPU job). */
static void s_take_terms(s_submit_t *q, const ns_ctl_terms_t *t)
{
    static const ns_reqs_t none;
    if (!q->max_price)
        q->max_price = t->max_price;
    if (!q->collateral)
        q->collateral = t->collateral;
    if (!memcmp(&q->reqs, &none, sizeof none))
        q->reqs = t->reqs;
    if (q->bid_window_ms == NS_POLICY_BID_WINDOW_MS)
        q->bid_window_ms = t->bid_window_ms;
    if (q->deadline_s == NS_POLICY_DEADLINE_S)
        q->deadline_s = t->deadline_s;
    if (!q->no_wait)
        q->no_wait = t->no_wait;
}

/* The job from the flags, or from its saved copy for --resume. */
static int s_job(s_submit_t *q, bool prepared)
{
    if (prepared) {
        if (q->node)
            goto pack;
        goto check;
    }
    if (q->resume) {
        char err[512];
        ns_hash_t id;
        if (ns_unhex(id, NS_HASH_BYTES, q->resume) != NS_OK) {
            ns_cli_error("submit", "--resume wants a job id (64 hex digits)");
            return 1;
        }
        if (ns_jobdir_load(q->datadir, q->resume, &q->spec.job, q->store,
                           q->spec.mapped, q->spec.inputs, q->out_paths, err,
                           sizeof err) != NS_OK) {
            ns_cli_error("submit", "%s", err);
            return 1;
        }
        for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
            q->spec.mapped_len[i] =
                q->spec.mapped[i] ? q->spec.inputs[i].len : 0;
        for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
            q->spec.out_paths[i] = q->out_paths[i][0] ? q->out_paths[i] : NULL;
        ns_ctl_terms_t t;
        int trc = ns_jobdir_load_terms(q->datadir, q->resume, &t);
        if (trc == NS_OK)
            s_take_terms(q, &t);
        else if (trc != NS_ERR_NOTFOUND)
            ns_cli_error("submit",
                         "warning: the job's saved terms do not read (%s); "
                         "give its --device, --min-mem and --region again",
                         ns_strerror(trc));
    } else {
        q->spec.as_pipeline = !q->steps_apart; /* its steps: one award */
        int status = ns_jobspec_prepare(&q->spec, "submit");
        if (status)
            return status;
        /* a pipeline's intermediates go nowhere: the requester (this one,
         * or the node's) takes them into temporary files of its own, so
         * nothing of them depends on this process or its directory */
        for (uint32_t i = 0; q->spec.job.n_steps && i < q->spec.job.n_args; i++)
            if (ns_jobspec_intermediate(&q->spec, i))
                q->spec.out_paths[i] = NULL;
        /* Before any credit moves: does it build here, do the arguments
         * fit the kernel? (--node: the node checks, on its warm runtime.) */
        if (q->node)
            goto pack;
    check:;
        char err[NS_WORKER_MAX_ERROR + 64];
        /* in the sandbox: a compiler that crashes or hangs costs a line */
        int rc = s_sandbox(q, &q->spec.job, NS_PF_CHECK, 0, err, sizeof err);
        if (rc == NS_ERR_INTR)
            return 128 + s_interrupted;
        if (rc == NS_ERR_INVAL || rc == NS_ERR_OPENCL || rc == NS_ERR_TIMEOUT) {
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
    if (q->spec.shards > 1 && q->fault_fork_award) {
        ns_cli_error("submit", "--fault fork-award: a whole job only (not "
                               "shards)");
        return 2;
    }
    if (q->spec.shards > 1) {
        char err[512];
        if (q->resume) {
            ns_cli_error("submit", "--resume continues one job, not shards");
            return 2;
        }
        /* which dimension to cut: the units must keep to their rows'
         * slices, tried here on our own device (in the sandbox) */
        int rc = ns_shardset_init(&q->set, &q->spec.job, q->spec.shards,
                                  s_shard_sample, q, err, sizeof err);
        if (rc == NS_ERR_INTR)
            return 128 + s_interrupted;
        if (rc != NS_OK) {
            ns_cli_error("submit", "%s", err);
            return rc == NS_ERR_INVAL || rc == NS_ERR_TOOBIG ? 2 : 1;
        }
    }
    /* Outputs with a file are received into it (the requester's .part
     * file, renamed once settled), but a sharded job's, assembled here;
     * a pipeline's intermediates into the requester's temporary files. */
    for (uint32_t i = 0; i < q->spec.job.n_args; i++)
        if (q->spec.job.args[i].kind == NS_ARG_OUT && !q->spec.outputs[i] &&
            (q->set.n > 1 || (!q->spec.out_paths[i] && !q->spec.job.n_steps))) {
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

/* A SUBMIT request's terms, split over n jobs (1: the whole job). */
static void s_ctl_terms(const s_submit_t *q, ns_ctl_req_t *req, uint32_t n)
{
    uint64_t collateral = q->collateral      ? q->collateral
                          : q->max_price / 2 ? q->max_price / 2
                                             : 1;
    req->kind = NS_CTL_SUBMIT;
    req->terms.max_price = q->max_price / n ? q->max_price / n : 1;
    req->terms.collateral = collateral / n ? collateral / n : 1;
    req->terms.no_wait = q->no_wait != 0;
    req->terms.bid_window_ms = (uint32_t)q->bid_window_ms;
    req->terms.deadline_s = q->deadline_s;
    req->terms.timeout_s = s_left_s(q);
    req->terms.reqs = q->reqs;
}

/* Hand a SUBMIT to the node; its answer is the job's market id. what
 * prefixes errors ("" or "shard 2: "). 0, or 1 with the error printed. */
static int s_ctl_submit(const s_submit_t *q, ns_ctl_req_t *req,
                        ns_hash_t job_id, const char *what)
{
    char err[512];
    uint8_t *doc = NULL;
    size_t len = 0;
    if (s_interrupted) { /* Ctrl-C while the inputs were hashed */
        ns_cli_error("submit", "interrupted before the job was handed to "
                               "the node: nothing was posted");
        return 1;
    }
    if (ns_ctl_call(q->node, req, &doc, &len, err, sizeof err) != NS_OK) {
        /* the node's own words, without the transport's prefix */
        const char *why =
            strncmp(err, "the node refused: ", 18) == 0 ? err + 18 : err;
        ns_cli_error("submit", "%s%s", what, why);
        return 1;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, doc, len);
    ns_mpr_bin_exact(&r, job_id, NS_HASH_BYTES);
    int rc = ns_mpr_end(&r);
    free(doc);
    if (rc != NS_OK) {
        ns_cli_error("submit", "the node answered something else");
        return 1;
    }
    return 0;
}

/* One look at a job in the node: its progress lines since *from_line go
 * to say(user, line), *from_line moves on, *j is its last report. NS_OK,
 * or an error with err set (the node is gone or answered nonsense). */
static int s_ctl_poll(const s_submit_t *q, ns_ctl_req_t *req,
                      const ns_hash_t job_id, uint32_t *from_line,
                      ns_ctl_job_t *j, void (*say)(void *, const char *),
                      void *user, char *err, size_t errlen)
{
    uint8_t *doc = NULL;
    size_t len = 0;
    memset(req, 0, sizeof *req);
    req->kind = NS_CTL_JOB;
    memcpy(req->job_id, job_id, NS_HASH_BYTES);
    req->from_line = *from_line;
    if (ns_ctl_call(q->node, req, &doc, &len, err, errlen) != NS_OK)
        return NS_ERR_IO;
    int rc = ns_ctl_job_read(doc, len, j);
    free(doc);
    if (rc != NS_OK) {
        snprintf(err, errlen, "the node answered something else");
        return rc;
    }
    for (uint32_t i = 0; i < j->n_lines; i++)
        say(user, j->lines[i]);
    *from_line = j->next_line;
    return NS_OK;
}

/* submit --node D: the node runs the requester; we poll its progress. */
static int s_submit_via_node(s_submit_t *q)
{
    ns_ctl_req_t *req = calloc(1, sizeof *req);
    char err[512], hex[2 * NS_HASH_BYTES + 1];
    int status = 1;
    if (!req)
        return 1;
    s_ctl_terms(q, req, 1);
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
    if (s_ctl_submit(q, req, req->job_id, ""))
        goto out;
    ns_hex(hex, req->job_id, NS_HASH_BYTES);
    char line[200], max[NS_CREDITS_TEXT];
    snprintf(line, sizeof line,
             "job %.16s handed to the node on %s: %llu work-items in %llu "
             "units, max price %s credits",
             hex, q->node, (unsigned long long)ns_job_work_items(&q->spec.job),
             (unsigned long long)ns_job_units(&q->spec.job),
             ns_credits_fmt(max, q->max_price));
    s_progress(q, line);
    ns_hash_t id;
    memcpy(id, req->job_id, NS_HASH_BYTES);
    uint32_t from_line = 0;
    ns_ctl_job_t *j = calloc(1, sizeof *j);
    for (; j;) {
        if (s_ctl_poll(q, req, id, &from_line, j, s_progress, q, err,
                       sizeof err) != NS_OK) {
            ns_cli_error("submit",
                         "lost the node: %s (the job goes on there; "
                         "`nightshift jobs --datadir %s` shows it)",
                         err, q->node);
            break;
        }
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

/* ---- shards: one job over many providers (job.h, "Shards") ------------- */

static bool s_shard_busy(ns_rq_phase_t p)
{
    return p == NS_RQ_CHALLENGE || p == NS_RQ_ACCEPT || p == NS_RQ_RUNNING ||
           p == NS_RQ_FETCH || p == NS_RQ_VERIFY;
}

/* Whether another shard's requester has this provider at work now. */
static bool s_sibling_holds(void *user, const uint8_t provider[NS_ID_BYTES])
{
    struct s_shard_ctx *c = user;
    for (uint32_t x = 0; x < c->q->set.n; x++) {
        ns_requester_t *r = c->q->ctx[x].req;
        if (x == c->i || !r)
            continue;
        const ns_receipt_t *rc = ns_requester_receipt(r);
        if (s_shard_busy(rc->phase) &&
            memcmp(rc->provider, provider, NS_ID_BYTES) == 0)
            return true;
    }
    return false;
}

static void s_shard_progress(void *user, const char *line)
{
    struct s_shard_ctx *c = user;
    char l[600];
    snprintf(l, sizeof l, "shard %u/%u: %s", c->i + 1, c->q->set.n, line);
    s_progress(c->q, l);
}

/* A shard is verified and settled: its rows go into the whole outputs;
 * the last one writes the files. */
static int s_shard_deliver(void *user, char *err, size_t errlen)
{
    struct s_shard_ctx *c = user;
    s_submit_t *q = c->q;
    if (ns_shardset_assemble(&q->set, c->i, q->spec.outputs) < q->set.n)
        return NS_OK;
    return ns_jobspec_write_outputs(&q->spec, err, errlen);
}

/* Receipt of a sharded job: a line per shard, then the totals. */
static void s_print_shard_receipts(s_submit_t *q, const ns_receipt_t **rc,
                                   const ns_hash_t *ids)
{
    uint64_t total = ns_mono_ms() - q->t_start_ms, price = 0, refund = 0;
    uint32_t n = q->set.n, ok = 0;
    for (uint32_t i = 0; i < n; i++) {
        ok += rc[i]->phase == NS_RQ_DONE;
        price += rc[i]->price;
        refund += rc[i]->refund;
    }
    char p[NS_CREDITS_TEXT], r[NS_CREDITS_TEXT];
    if (q->json) {
        s_json_next(q);
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 5);
        ns_mp_str(&pk, "status");
        ns_mp_str(&pk, ok == n ? "settled" : "failed");
        ns_mp_str(&pk, "price");
        ns_mp_credits(&pk, price);
        ns_mp_str(&pk, "refund");
        ns_mp_credits(&pk, refund);
        ns_mp_str(&pk, "timings_ms");
        msgpack_pack_map(&pk, 1);
        ns_mp_str(&pk, "total");
        msgpack_pack_uint64(&pk, total);
        ns_mp_str(&pk, "shards");
        msgpack_pack_array(&pk, n);
        for (uint32_t i = 0; i < n; i++) {
            const ns_job_t *j = &q->set.shard[i].job;
            char hex[2 * NS_HASH_BYTES + 1], who[NS_ID_TEXT_LEN + 1] = "";
            ns_hex(hex, ids[i], NS_HASH_BYTES);
            if (!sodium_is_zero(rc[i]->provider, NS_ID_BYTES))
                ns_id_text(who, rc[i]->provider);
            bool done = rc[i]->phase == NS_RQ_DONE;
            msgpack_pack_map(&pk, done ? 12 : 13);
            ns_mp_str(&pk, "shard");
            msgpack_pack_uint32(&pk, i);
            ns_mp_str(&pk, "rows");
            msgpack_pack_array(&pk, 2);
            msgpack_pack_uint64(&pk, j->shard_first);
            msgpack_pack_uint64(&pk, j->shard_first + j->shard_rows);
            ns_mp_str(&pk, "job");
            ns_mp_str(&pk, hex);
            ns_mp_str(&pk, "provider");
            ns_mp_str(&pk, who);
            ns_mp_str(&pk, "price");
            ns_mp_credits(&pk, rc[i]->price);
            s_pack_outcome(&pk, rc[i]);
            ns_mp_str(&pk, "run_ms");
            msgpack_pack_uint64(&pk, rc[i]->run_ms);
            ns_mp_str(&pk, "verify_ms");
            msgpack_pack_uint64(&pk, rc[i]->verify_ms);
        }
        ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        if (rc[i]->phase != NS_RQ_DONE)
            ns_cli_error("submit", "shard %u/%u: %s", i + 1, n, rc[i]->error);
    if (ok != n) {
        ns_cli_error("submit",
                     "%u of %u shards settled (those are paid, the others "
                     "refunded); the outputs were not written",
                     ok, n);
        return;
    }
    printf("receipt (%u shards)\n", n);
    for (uint32_t i = 0; i < n; i++) {
        const ns_job_t *j = &q->set.shard[i].job;
        char hex[2 * NS_HASH_BYTES + 1], who[NS_ID_TEXT_LEN + 1] = "";
        ns_hex(hex, ids[i], NS_HASH_BYTES);
        ns_id_text(who, rc[i]->provider);
        printf("  shard %u  rows %llu..%llu  job %.16s  provider %.16s  "
               "price %s  run %llu ms  checks %u  rounds %u\n",
               i + 1, (unsigned long long)j->shard_first,
               (unsigned long long)(j->shard_first + j->shard_rows - 1), hex,
               who, ns_credits_fmt(p, rc[i]->price),
               (unsigned long long)rc[i]->run_ms, rc[i]->checked,
               rc[i]->rounds);
    }
    printf("  price     %s credits (refund %s)\n  total     %llu ms\n",
           ns_credits_fmt(p, price), ns_credits_fmt(r, refund),
           (unsigned long long)total);
}

/* Each shard's share of the terms: at least one micro-credit. */
static uint64_t s_share(uint64_t amount, uint32_t n)
{
    return amount / n ? amount / n : 1;
}

/* The light peer runs one requester per shard, side by side. */
static int s_submit_shards(s_submit_t *q, ns_node_t *node)
{
    const ns_receipt_t *rc[NS_MAX_SHARDS];
    ns_hash_t ids[NS_MAX_SHARDS];
    uint32_t n = q->set.n;
    const uint8_t *self = ns_identity_pk(ns_node_identity(node));
    uint64_t collateral = q->collateral      ? q->collateral
                          : q->max_price / 2 ? q->max_price / 2
                                             : 1;
    ns_requester_opts_t *o = calloc(n, sizeof *o);
    if (!o)
        return 1;
    for (uint32_t i = 0; i < n; i++) {
        ns_shard_t *h = &q->set.shard[i];
        struct s_shard_ctx *c = &q->ctx[i];
        c->q = q;
        c->i = i;
        o[i].job = &h->job;
        o[i].packed = h->packed.data;
        o[i].packed_len = h->packed.len;
        o[i].inputs = q->spec.inputs;
        o[i].outputs = h->outputs;
        o[i].max_price = s_share(q->max_price, n);
        o[i].collateral = s_share(collateral, n);
        o[i].no_wait = q->no_wait != 0;
        o[i].bid_window_ms = (uint32_t)q->bid_window_ms;
        o[i].deadline_s = q->deadline_s;
        o[i].timeout_s = s_left_s(q);
        o[i].reqs = q->reqs;
        o[i].join = true;
        o[i].deliver = s_shard_deliver;
        o[i].deliver_user = c;
        o[i].progress = s_shard_progress;
        o[i].progress_user = c;
        o[i].sibling_holds = s_sibling_holds;
        o[i].sibling_user = c;
        if (ns_job_id(&h->job, o[i].desc_id) != NS_OK) {
            ns_cli_error("submit", "cannot encode shard %u", i + 1);
            free(o);
            return 1;
        }
        randombytes_buf(o[i].nonce, sizeof o[i].nonce);
        ns_ledger_job_id(o[i].job_id, self, o[i].desc_id, o[i].nonce);
        memcpy(ids[i], o[i].job_id, NS_HASH_BYTES);
    }
    char line[200], max[NS_CREDITS_TEXT];
    snprintf(line, sizeof line,
             "%u shards of %llu rows in all: %llu work-items in %llu units, "
             "max price %s credits",
             n, (unsigned long long)ns_job_rows(&q->spec.job),
             (unsigned long long)ns_job_work_items(&q->spec.job),
             (unsigned long long)ns_job_units(&q->spec.job),
             ns_credits_fmt(max, q->max_price));
    s_progress(q, line);
    int status = 1, err = 0;
    if (s_interrupted) { /* Ctrl-C before the peer ran: nothing posted */
        ns_cli_error("submit", "interrupted before anything was posted");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        q->ctx[i].req = ns_node_add_requester(node, &o[i], &err);
        if (!q->ctx[i].req) {
            ns_cli_error("submit", "cannot start shard %u: %s", i + 1,
                         ns_strerror(err));
            for (uint32_t x = 0; x < i; x++)
                ns_requester_stop(q->ctx[x].req, "the submit failed");
            goto out;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    s_node = node;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (ns_node_run(node) != NS_OK)
        ns_cli_error("submit", "the node stopped with an error");
    s_node = NULL;
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!ns_requester_finished(q->ctx[i].req))
            ns_requester_stop(q->ctx[i].req, "interrupted");
        rc[i] = ns_requester_receipt(q->ctx[i].req);
        ok += rc[i]->phase == NS_RQ_DONE;
    }
    s_print_shard_receipts(q, rc, ids);
    status = ok == n         ? 0
             : s_interrupted ? 128 + s_interrupted /* 130 for Ctrl-C */
                             : 1;
out:
    free(o);
    return status;
}

/* Exactly size bytes of the file at path into buf. */
static int s_read_exact(const char *path, uint8_t *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NS_ERR_IO;
    size_t got = fread(buf, 1, size, f);
    int extra = fgetc(f);
    fclose(f);
    return got == size && extra == EOF ? NS_OK : NS_ERR_IO;
}

/* submit --node D --shards N: each shard is its own job in the node,
 * writing its outputs to files of its own beside the user's; when every
 * shard is settled, their rows are assembled into the user's files. */
static int s_submit_shards_via_node(s_submit_t *q)
{
    uint32_t n = q->set.n;
    int status = 1;
    char err[512];
    const ns_receipt_t *rc[NS_MAX_SHARDS];
    ns_hash_t ids[NS_MAX_SHARDS];
    ns_ctl_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return 1;
    uint32_t started = 0;
    for (uint32_t i = 0; i < n; i++) {
        ns_shard_t *h = &q->set.shard[i];
        struct s_shard_ctx *c = &q->ctx[i];
        c->q = q;
        c->i = i;
        c->ctl = calloc(1, sizeof *c->ctl);
        if (!c->ctl)
            goto out;
        memset(req, 0, sizeof *req);
        s_ctl_terms(q, req, n);
        req->desc = h->packed.data;
        req->desc_len = h->packed.len;
        req->n_args = h->job.n_args;
        for (uint32_t k = 0; k < req->n_args; k++) {
            const char *in = q->spec.in_paths[k], *out = q->spec.out_paths[k];
            char tmp[PATH_MAX];
            if (out) {
                snprintf(tmp, sizeof tmp, "%s.shard%u-%ld", out, i + 1,
                         (long)getpid());
                if (s_abs_path(tmp, c->tmp[k], sizeof c->tmp[k], false) ||
                    strlen(c->tmp[k]) >= NS_CTL_MAX_PATH) {
                    ns_cli_error("submit", "arg %u: '%s' is not a usable path",
                                 k, out);
                    goto out;
                }
                memcpy(req->out_path[k], c->tmp[k], strlen(c->tmp[k]) + 1);
            }
            if (in && s_abs_path(in, req->in_path[k], NS_CTL_MAX_PATH, true)) {
                ns_cli_error("submit", "arg %u: '%s' is not a usable path", k,
                             in);
                goto out;
            }
        }
        char what[32];
        snprintf(what, sizeof what, "shard %u: ", i + 1);
        if (s_ctl_submit(q, req, c->job_id, what))
            goto out;
        memcpy(ids[i], c->job_id, NS_HASH_BYTES);
        started++;
    }
    char line[200], max[NS_CREDITS_TEXT];
    snprintf(line, sizeof line,
             "%u shards handed to the node on %s: %llu rows, %llu units, max "
             "price %s credits",
             n, q->node, (unsigned long long)ns_job_rows(&q->spec.job),
             (unsigned long long)ns_job_units(&q->spec.job),
             ns_credits_fmt(max, q->max_price));
    s_progress(q, line);
    for (uint32_t left = n; left > 0;) {
        for (uint32_t i = 0; i < n; i++) {
            struct s_shard_ctx *c = &q->ctx[i];
            if (c->finished)
                continue;
            if (s_ctl_poll(q, req, c->job_id, &c->from_line, c->ctl,
                           s_shard_progress, c, err, sizeof err) != NS_OK) {
                ns_cli_error("submit",
                             "lost the node: %s (the shards go on there; "
                             "`nightshift jobs --datadir %s` shows them)",
                             err, q->node);
                goto out;
            }
            if (c->ctl->finished) {
                c->finished = true;
                left--;
            }
        }
        if (s_interrupted) {
            ns_cli_error("submit",
                         "interrupted; the shards go on in the node "
                         "(`nightshift cancel JOB --datadir %s` ends one)",
                         q->node);
            status = 128 + s_interrupted;
            goto out;
        }
        if (left) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    /* every shard is finished: assemble what settled */
    uint32_t ok = 0;
    for (uint32_t i = 0; i < n; i++) {
        rc[i] = &q->ctx[i].ctl->receipt;
        ok += rc[i]->phase == NS_RQ_DONE;
    }
    for (uint32_t i = 0; i < n && ok == n; i++) {
        ns_shard_t *h = &q->set.shard[i];
        for (uint32_t k = 0; k < h->job.n_args; k++) {
            if (h->job.args[k].kind != NS_ARG_OUT || !q->ctx[i].tmp[k][0])
                continue;
            if (s_read_exact(q->ctx[i].tmp[k], h->outputs[k],
                             (size_t)h->job.args[k].size) != NS_OK) {
                ns_cli_error("submit",
                             "shard %u: cannot read its output %s (%llu "
                             "bytes expected)",
                             i + 1, q->ctx[i].tmp[k],
                             (unsigned long long)h->job.args[k].size);
                goto out;
            }
        }
        ns_shardset_assemble(&q->set, i, q->spec.outputs);
    }
    if (ok == n && ns_jobspec_write_outputs(&q->spec, err, sizeof err) != 0) {
        ns_cli_error("submit", "%s", err);
        goto out;
    }
    s_print_shard_receipts(q, rc, ids);
    status = ok == n ? 0 : 1;
out:
    for (uint32_t i = 0; i < n; i++) {
        /* interrupted, the node still writes them: left for the user */
        for (uint32_t k = 0; k < NS_MAX_ARGS && !s_interrupted; k++)
            if (q->ctx[i].tmp[k][0] && i < started)
                unlink(q->ctx[i].tmp[k]);
        free(q->ctx[i].ctl);
        q->ctx[i].ctl = NULL;
    }
    free(req);
    return status;
}

/* The light peer runs one whole job (not shards) to its end. */
static int s_submit_one(s_submit_t *q, ns_node_t *node)
{
    char job_hex[2 * NS_HASH_BYTES + 1];
    int status, rc;
    ns_requester_opts_t o;
    memset(&o, 0, sizeof o);
    o.job = &q->spec.job;
    o.packed = q->packed.data;
    o.packed_len = q->packed.len;
    o.inputs = q->spec.inputs;
    o.outputs = q->spec.outputs;
    o.out_paths = q->spec.out_paths; /* written by the requester */
    o.max_price = q->max_price;
    o.no_wait = q->no_wait != 0;
    o.fault_fork_award = q->fault_fork_award != 0;
    o.no_preflight = q->fault_no_preflight != 0;
    if ((o.fault_fork_award || o.no_preflight) &&
        !ns_node_genesis(node)->test_network) {
        ns_cli_error("submit", "--fault is refused: the genesis does not mark "
                               "this network as a test network");
        return 2;
    }
    o.collateral = q->collateral      ? q->collateral
                   : q->max_price / 2 ? q->max_price / 2
                                      : 1;
    o.bid_window_ms = (uint32_t)q->bid_window_ms;
    o.deadline_s = q->deadline_s;
    o.timeout_s = s_left_s(q);
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
        return status;
    }
    const uint8_t *self = ns_identity_pk(ns_node_identity(node));
    if (q->resume) {
        o.resume = true;
        if (ns_unhex(o.job_id, NS_HASH_BYTES, q->resume) != NS_OK)
            return status; /* checked by s_job */
    } else {
        /* The same descriptor may be submitted again: the market id adds
         * our id and a random nonce. */
        randombytes_buf(o.nonce, sizeof o.nonce);
        ns_ledger_job_id(o.job_id, self, o.desc_id, o.nonce);
    }
    ns_hex(job_hex, o.job_id, NS_HASH_BYTES);
    if (!q->resume &&
        ns_jobdir_save(q->datadir, job_hex, q->packed.data, q->packed.len,
                       &q->spec.job, q->store,
                       (const char *const *)q->spec.out_paths) != NS_OK) {
        ns_cli_error("submit", "cannot save the job under %s/jobs", q->datadir);
        return status;
    }
    ns_ctl_terms_t terms = {o.max_price,  o.collateral, o.bid_window_ms,
                            o.deadline_s, o.timeout_s,  o.reqs,
                            o.no_wait};
    if (!q->resume &&
        ns_jobdir_save_terms(q->datadir, job_hex, &terms) != NS_OK) {
        ns_cli_error("submit", "cannot save the job's terms under %s/jobs",
                     q->datadir);
        return status;
    }
    if (s_interrupted) { /* Ctrl-C before the peer ran: nothing posted */
        ns_cli_error("submit", "interrupted before anything was posted");
        return 128 + s_interrupted;
    }
    ns_requester_t *req = ns_node_add_requester(node, &o, &rc);
    if (!req) {
        ns_cli_error("submit", "cannot start the requester: %s",
                     ns_strerror(rc));
        return status;
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
    return status;
}

/* After a pipeline's step: the next one, prepared and checked (true), or
 * none (false; *status set on an error). */
static bool s_next_step(s_submit_t *q, int *status)
{
    int steps = ns_jobspec_steps(&q->spec);
    if (*status != 0 || s_interrupted)
        return false;
    int rc = ns_jobspec_next_step(&q->spec, "submit");
    if (rc != 0) {
        *status = rc == -1 ? 0 : rc;
        return false;
    }
    ns_buf_release(&q->packed);
    ns_buf_init(&q->packed);
    ns_shardset_release(&q->set);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) /* this step's inputs */
        if (q->in_fds[i] >= 0) {
            close(q->in_fds[i]);
            q->in_fds[i] = -1;
        }
    memset(q->ctx, 0, sizeof q->ctx);
    if ((*status = s_job(q, true)) != 0)
        return false;
    char line[200];
    snprintf(line, sizeof line, "step %d/%d: %s", q->spec.step + 1, steps,
             q->spec.job.entry);
    s_progress(q, line);
    return true;
}

/* The light peer's inputs go into its datadir's blob store, which must
 * take them before anything is posted; submit --node maps the files only
 * to hash them (the node stores them). 0, or an exit status with the
 * error printed. */
static int s_open_store(s_submit_t *q)
{
    char path[PATH_MAX];
    ns_config_t dd;
    int rc = 0;
    if (q->node) {
        q->spec.map_inputs = true;
        return 0;
    }
    s_datadir_config(q, &dd);
    if (ns_path_join(path, sizeof path, q->datadir, "blobs") != NS_OK ||
        !(q->store = ns_blobs_open(path, dd.blob_cache_bytes, &rc))) {
        ns_cli_error("submit", "cannot use the blob store %s/blobs: %s",
                     q->datadir, strerror(errno));
        return 1;
    }
    q->spec.store = q->store;
    return 0;
}

static int s_submit(s_submit_t *q)
{
    ns_config_t cfg;
    char err[512];
    /* Ctrl-C and SIGTERM end the command in every phase, the pre-flight's
     * checks in the sandbox included */
    struct sigaction sa0;
    memset(&sa0, 0, sizeof sa0);
    sa0.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa0, NULL);
    sigaction(SIGTERM, &sa0, NULL);
    int status = s_open_store(q);
    if (status)
        return status;
    status = s_job(q, false);
    int steps = ns_jobspec_steps(&q->spec);
    if (status)
        return status;
    if (steps > 1) {
        char line[256];
        snprintf(line, sizeof line,
                 "a pipeline of %d steps, each a job of its own in order "
                 "(docs/JOBS.md); step 1/%d: %s",
                 steps, steps, q->spec.job.entry);
        s_progress(q, line);
    } else if (q->spec.job.n_steps) {
        char line[256];
        snprintf(line, sizeof line,
                 "a pipeline of %u steps as one job: one provider runs them "
                 "all, every step is checked (docs/JOBS.md)",
                 q->spec.job.n_steps);
        s_progress(q, line);
    }
    if (q->node) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = s_on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        do
            status = q->set.n > 1 ? s_submit_shards_via_node(q)
                                  : s_submit_via_node(q);
        while (s_next_step(q, &status));
        goto json_end;
    }
    if ((status = s_config(q, &cfg)) != 0)
        return status;
    char cache[PATH_MAX];
    ns_cache_dir(cache, sizeof cache);
    ns_node_conf_t c = {.datadir = q->datadir,
                        .cfg = &cfg,
                        .light = true,
                        .cache_dir = cache[0] ? cache : NULL};
    if (s_pool(q, err, sizeof err) != NS_OK) {
        ns_cli_error("submit", "%s", err);
        return 1;
    }
    c.wpool = q->pool; /* warm: it checked the job */
    ns_node_t *node = ns_node_open(&c, err, sizeof err);
    if (!node) {
        ns_cli_error("submit", "%s", err);
        return 1;
    }
    do
        status =
            q->set.n > 1 ? s_submit_shards(q, node) : s_submit_one(q, node);
    while (s_next_step(q, &status));
    ns_node_close(&node);
json_end:
    if (q->json_docs)
        fputs("]\n", stdout);
    if (s_interrupted && status == 1)
        status = 128 + s_interrupted; /* 130 for Ctrl-C */
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
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        q->in_fds[i] = -1;
    q->bid_window_ms = NS_POLICY_BID_WINDOW_MS;
    q->deadline_s = NS_POLICY_DEADLINE_S;
    q->timeout_s = NS_POLICY_TIMEOUT_S;
    q->t_start_ms = ns_mono_ms();
    int status = s_parse(q, argc, argv);
    if (status == 0) {
        ns_log_threshold = NS_LOG_ERROR;
        status = s_submit(q);
    }
    ns_shardset_release(&q->set);
    ns_wpool_destroy(&q->pool);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (q->in_fds[i] >= 0)
            close(q->in_fds[i]);
    ns_jobspec_release(&q->spec);
    ns_blobs_close(&q->store);
    ns_buf_release(&q->packed);
    free(q);
    return status;
}
