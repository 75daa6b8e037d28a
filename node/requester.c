/* requester.c - one job from escrow to settlement (requester.h). */
#define _GNU_SOURCE /* fallocate */
#include "nightshift/requester.h"

#include "nightshift/cancel.h"
#include "nightshift/challenger.h"
#include "nightshift/join.h"
#include "nightshift/ledger_sync.h"
#include "nightshift/log.h"
#include "nightshift/policy.h"
#include "nightshift/preflight.h"
#include "nightshift/slash.h"
#include "nightshift/transfer.h"
#include "nightshift/util.h"
#include "nightshift/verified.h"
#include "nightshift/verify.h"
#include "nightshift/worker_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Device work in the sandbox: the pre-flight (build, argument check,
 * timing, sampled units), the spot check and the check of a provider's
 * failure report run the user's kernel, so they run in a worker process
 * lent by the node's pool (worker_pool.h), never in this process: a
 * kernel that crashes, loops or exhausts memory costs the job one line,
 * and the node (or `submit`) lives on. One piece at a time per requester,
 * driven from the tick (ns_worker_collect never blocks); what the worker
 * borrows (the job, inputs, mapped outputs) nothing on the loop changes
 * or frees meanwhile: s_dw_abort comes first wherever it would. */
typedef enum {
    S_DW_NONE,
    S_DW_TIME,   /* build, argument check, timing: the job is posted on it */
    S_DW_SAMPLE, /* the sampled units' checks, during the auction */
    S_DW_CHECK,  /* the spot check */
    S_DW_REPRO,  /* a provider's failure report, tried here */
} s_dw_kind;

typedef struct {
    int kind;            /* s_dw_kind: started, its result not taken */
    int taken;           /* the kind of the result last taken */
    bool done;           /* finished: rc, err and the figures below set */
    ns_worker_t *w;      /* lent by the pool while the work is in flight */
    uint32_t limit_ms;   /* the worker's wall clock for it */
    bool deadline_bound; /* limit_ms is the job's deadline */
    int rc;
    char err[NS_WORKER_MAX_ERROR + 1];
    uint64_t unit_ns; /* TIME: a unit's time on our device */
    double gflops;    /* TIME: our device's throughput, from its worker */
    /* CHECK */
    ns_hash_t root;
    uint32_t k;
    int ro_fds[NS_MAX_ARGS]; /* read-only reopenings of the part files */
    int in_fds[NS_MAX_ARGS]; /* the inputs' blobs, read-only (-1: none;
                                opened at the first piece of work) */
    bool in_fds_open;
    uint64_t commit_us;
    /* REPRO */
    ns_failure_t fail;
    bool whole; /* the whole launch (a crash), else unit 0 */
} s_dw_t;

struct ns_requester {
    ns_requester_opts_t o;
    const ns_node_io_t *io;
    ns_ledger_t *ledger;
    ns_wpool_t *pool; /* the node's sandboxed workers (borrowed) */
    const ns_identity_t *me;
    ns_hash_t network_id;
    char job_hex[2 * NS_HASH_BYTES + 1];
    uint64_t n_items;
    ns_buf_t body;
    /* the auction */
    ns_rq_phase_t phase;
    uint64_t phase_ms;
    uint64_t chunk_ms; /* NS_RQ_FETCH: the last CHUNK taken (mono) */
    uint32_t round;
    ns_announce_t ann;
    ns_bid_t bids[NS_POLICY_MAX_BIDS];
    uint64_t bid_us[NS_POLICY_MAX_BIDS];
    uint64_t bid_held[NS_POLICY_MAX_BIDS]; /* input bytes proven held */
    int8_t bid_free[NS_POLICY_MAX_BIDS];   /* free slot when it bid: 1, 0, or
                                              -1 unknown (an older bidder) */
    /* live peers when the job was announced (s_bid_rank: whose bid's
     * arrival is a round trip) */
    uint8_t linked[NS_POLICY_MAX_BIDS][NS_ID_BYTES];
    uint32_t n_linked;
    uint32_t n_bids;
    s_dw_t dw;          /* device work in the sandbox (s_dw_start) */
    uint64_t job_seq;   /* our JOB entry's seq */
    uint64_t award_seq; /* our AWARD entry's seq (current award) */
    ns_bid_t winner;
    /* outputs */
    uint8_t statement[NS_SIG_BYTES];
    ns_fetch_t fetch; /* statement and outputs from the winner */
    /* Outputs with a path (o.out_paths) are received into a file beside
     * it, renamed there once settled; the others into o.outputs. */
    int out_fd[NS_MAX_ARGS];        /* by argument: the .part file, or -1 */
    char *out_tmp[NS_MAX_ARGS];     /* its path (PATH.<job>.part), owned */
    uint8_t *out_map[NS_MAX_ARGS];  /* NS_RQ_VERIFY: read-only mappings */
    uint8_t *out_view[NS_MAX_ARGS]; /* NS_RQ_VERIFY: the claim, by argument
                                       (a mapping or o.outputs[i]) */
    ns_hash_t *leaves;              /* the commitment's leaves (verify.h),
                                       computed as the outputs arrive */
    uint64_t n_leaves;
    ns_check_result_t check;
    uint8_t secret[32];
    /* timings */
    uint64_t t_start_ms, t_announce_ms, t_accept_ms, t_last_tick_s;
    ns_join_t join;
    bool finished;
    char last_failure[NS_MAX_FAIL_REASON + 128]; /* the last report */
    char history[600];     /* why each earlier round's provider was dropped */
    char wait_why[1024];   /* NS_RQ_WAITING: the reason last said */
    bool slash_by_ref;     /* a SLASH whose inputs peers fetch from us */
    bool posted;           /* resumed with our JOB entry in the ledger */
    bool fetch_resumed;    /* outputs taken up from part files (--resume) */
    bool refetch;          /* those did not match: fetch them whole */
    ns_challenger_t chal;  /* the winner's hardware challenge */
    ns_bid_t chal_bid;     /* the bid that wins if it passes */
    bool chal_waiting;     /* for the node's challenge lease (said once) */
    ns_failure_t repro;    /* the winner's failure report being tried */
    bool repro_pending;    /* here (s_repro_tick) */
    uint64_t done_wait_ms; /* since when we wait for them to */
    uint32_t draw_widen;   /* rounds the bidder draw was widened */
    ns_receipt_t rc;
};

static const char *const s_phase_names[] = {
    "join",    "announce", "bidding", "waiting", "challenge", "accept",
    "running", "fetch",    "verify",  "done",    "failed"};

const char *ns_rq_phase_name(ns_rq_phase_t phase)
{
    return phase <= NS_RQ_FAILED ? s_phase_names[phase] : "?";
}

/* ---- progress --------------------------------------------------------- */

static void s_say(ns_requester_t *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_say(ns_requester_t *q, const char *fmt, ...)
{
    if (!q->o.progress)
        return;
    char line[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    q->o.progress(q->o.progress_user, line);
}

static uint64_t s_mono(const ns_requester_t *q)
{
    return q->io->mono_ms(q->io->user);
}

static void s_phase(ns_requester_t *q, ns_rq_phase_t p)
{
    q->phase = p;
    q->rc.phase = p;
    q->phase_ms = s_mono(q);
}

static void s_out_close(ns_requester_t *q);

/* ---- device work in the sandbox (s_dw_t) ------------------------------- */

static void s_dw_close_ro(ns_requester_t *q)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (q->dw.ro_fds[i] >= 0) {
            close(q->dw.ro_fds[i]);
            q->dw.ro_fds[i] = -1;
        }
}

/* End the work in flight, if any (the worker killed and given back); its
 * result is never taken. */
static void s_dw_abort(ns_requester_t *q)
{
    if (q->dw.w)
        ns_wpool_give(q->pool, &q->dw.w);
    s_dw_close_ro(q);
    q->dw.kind = S_DW_NONE;
    q->dw.done = false;
}

/* A build log can be 2 KiB; the job's error line holds ~1 KiB with its
 * context. Cut it whole lines or words first, and say so. */
#define S_DW_ERR_SHOWN 700
static void s_clip(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return;
    size_t cut = max;
    while (cut > max / 2 && s[cut] != '\n' && s[cut] != ' ')
        cut--;
    if (cut <= max / 2)
        cut = max;
    snprintf(s + cut, 8, " [...]");
}

/* Submit the work of q->dw.kind to a worker of the pool; false while none
 * is free (the tick tries again). An error before anything runs is the
 * work's result. */
static bool s_dw_submit(ns_requester_t *q)
{
    s_dw_t *g = &q->dw;
    int rc = NS_OK;
    if (!q->pool) {
        g->rc = NS_ERR_STATE;
        snprintf(g->err, sizeof g->err, "no sandbox to run the kernel in");
        g->done = true;
        return true;
    }
    g->w = ns_wpool_take(q->pool, &rc);
    if (!g->w && rc == NS_ERR_RATE)
        return false;
    if (!g->w) {
        g->rc = rc;
        snprintf(g->err, sizeof g->err,
                 "cannot start a sandboxed worker for the kernel: %s",
                 ns_strerror(rc));
        g->done = true;
        return true;
    }
    const ns_job_t *job = q->o.job;
    if (!g->in_fds_open) {
        /* the inputs go to the sandbox as their blobs' descriptors where
         * the store holds them (no copy through the socket) */
        g->in_fds_open = true;
        for (uint32_t i = 0; q->o.blobs && i < job->n_args; i++) {
            uint64_t size = 0;
            if (job->args[i].kind != NS_ARG_IN ||
                ns_blobs_open_ro(q->o.blobs, job->args[i].hash, &g->in_fds[i],
                                 &size) != NS_OK)
                continue;
            if (size != job->args[i].size) {
                close(g->in_fds[i]);
                g->in_fds[i] = -1;
            }
        }
    }
    const int *in_fds = g->in_fds;
    const char *name = q->o.source_name;
    uint64_t unit = 0;
    ns_worker_set_timeout(g->w, g->limit_ms);
    switch (g->kind) {
    case S_DW_TIME:
        rc = ns_worker_submit_preflight(
            g->w, job, q->o.inputs, in_fds, NS_PF_CHECK | NS_PF_TIME,
            NS_POLICY_PREFLIGHT_UNITS, name, g->err, sizeof g->err);
        break;
    case S_DW_SAMPLE:
        rc = ns_worker_submit_preflight(g->w, job, q->o.inputs, in_fds,
                                        NS_PF_SAMPLE, NS_POLICY_PREFLIGHT_UNITS,
                                        name, g->err, sizeof g->err);
        break;
    case S_DW_CHECK:
        rc = ns_worker_submit_check(g->w, job, q->o.desc_id, q->o.inputs,
                                    in_fds, q->out_view, g->ro_fds, g->root,
                                    q->secret, g->k, g->err, sizeof g->err);
        break;
    default:
        rc = g->whole ? ns_worker_submit_files(g->w, job, q->o.inputs, in_fds,
                                               g->err, sizeof g->err)
                      : ns_worker_submit(g->w, job, q->o.inputs, &unit, 1,
                                         g->err, sizeof g->err);
        break;
    }
    if (rc != NS_OK) {
        ns_wpool_give(q->pool, &g->w);
        g->rc = rc;
        g->done = true;
    }
    return true;
}

/* Start work of the given kind within limit_ms of wall clock; the
 * pre-flight's (TIME, SAMPLE, REPRO) never past the job's deadline. */
static void s_dw_start(ns_requester_t *q, int kind, uint32_t limit_ms)
{
    s_dw_t *g = &q->dw;
    if (g->kind != S_DW_NONE)
        s_dw_abort(q);
    g->kind = kind;
    g->done = false;
    g->rc = NS_OK;
    g->err[0] = '\0';
    g->unit_ns = 0;
    g->limit_ms = limit_ms;
    g->deadline_bound = false;
    uint64_t deadline_ms = q->o.deadline_s * 1000;
    if (kind != S_DW_CHECK && deadline_ms && deadline_ms < limit_ms) {
        g->limit_ms = (uint32_t)deadline_ms;
        g->deadline_bound = true;
    }
    (void)s_dw_submit(q);
}

/* Move the work on: a free worker for work still waiting for one, the
 * worker's bytes, its result once there. */
static void s_dw_poll(ns_requester_t *q)
{
    s_dw_t *g = &q->dw;
    if (g->kind == S_DW_NONE || g->done)
        return;
    if (!g->w && !s_dw_submit(q))
        return;
    if (g->done)
        return;
    ns_worker_result_t res;
    if (ns_worker_collect(g->w, &res) != 1)
        return;
    g->rc = res.status;
    snprintf(g->err, sizeof g->err, "%s", res.status ? res.error : "");
    s_clip(g->err, S_DW_ERR_SHOWN);
    g->unit_ns = res.unit_ns;
    const ns_devinfo_t *dev = ns_worker_device(g->w);
    if (dev)
        g->gflops = dev->gflops;
    if (g->kind == S_DW_CHECK)
        q->check = res.check;
    ns_worker_result_release(&res);
    ns_wpool_give(q->pool, &g->w);
    s_dw_close_ro(q);
    g->done = true;
}

/* The kind of the work started, once it is finished (its result in q->dw
 * until the next start); S_DW_NONE while it runs or if none. */
static int s_dw_take(ns_requester_t *q)
{
    s_dw_poll(q);
    if (q->dw.kind == S_DW_NONE || !q->dw.done)
        return S_DW_NONE;
    int kind = q->dw.kind;
    q->dw.taken = kind;
    q->dw.kind = S_DW_NONE;
    q->dw.done = false;
    return kind;
}

/* The sandbox's failure as the user reads it: a crash, the time limit,
 * or what the checks found. where: "the pre-flight", "the check"... */
static void s_dw_why(const ns_requester_t *q, const char *where, char *out,
                     size_t cap)
{
    const s_dw_t *g = &q->dw;
    const char *crash = "the kernel crashed the OpenCL runtime";
    /* what ran: the build and timing, the sampled units, or a launch */
    const char *what = g->taken == S_DW_REPRO ? "run" : "sampled units";
    if (g->rc == NS_ERR_TIMEOUT && strstr(g->err, "ms limit")) {
        if (g->deadline_bound)
            snprintf(out, cap,
                     "%s's %s ran past %.1f s: this kernel cannot finish "
                     "within its deadline of %llu s",
                     where, what, g->limit_ms / 1000.0,
                     (unsigned long long)q->o.deadline_s);
        else
            snprintf(out, cap,
                     "%s's %s ran past its budget of %.0f s: this kernel is "
                     "too slow to check",
                     where, what, g->limit_ms / 1000.0);
    } else if (!strncmp(g->err, crash, strlen(crash))) {
        snprintf(out, cap, "the kernel crashed in %s%s", where,
                 g->err + strlen(crash));
    } else {
        snprintf(out, cap, "%s", g->err);
    }
}

static void s_fail(ns_requester_t *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_fail(ns_requester_t *q, const char *fmt, ...)
{
    s_dw_abort(q); /* before the files it may read are closed */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->rc.error, sizeof q->rc.error, fmt, ap);
    va_end(ap);
    s_phase(q, NS_RQ_FAILED);
    s_out_close(q);    /* no part file stays behind a failed job */
    if (q->o.verified) /* a challenge it had in flight ends here */
        ns_verified_chal_give(q->o.verified, q);
    /* a light peer whose SLASH's inputs peers still fetch from it waits
     * for them in the tick (s_inputs_taken) */
    if (!q->slash_by_ref)
        q->finished = true;
}

/* ---- ledger helpers ----------------------------------------------------- */

static int s_append(ns_requester_t *q, uint8_t type, ns_entry_body_t *b,
                    ns_hash_t id)
{
    int rc = q->io->append(q->io->user, type, b, id);
    if (rc != NS_OK)
        s_say(q, "ledger refused our %s entry: %s", ns_entry_type_name(type),
              ns_strerror(rc));
    return rc;
}

static void s_cancel(ns_requester_t *q, const ns_hash_t accept_id, bool reopen)
{
    ns_entry_body_t b;
    ns_hash_t id;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->o.job_id, NS_HASH_BYTES);
    if (accept_id)
        memcpy(b.ref_id, accept_id, NS_HASH_BYTES);
    b.reopen = reopen;
    b.new_deadline_ms = q->io->now_ms(q->io->user) + q->o.deadline_s * 1000;
    if (s_append(q, NS_ENTRY_CANCEL, &b, id) == NS_OK)
        q->rc.cancelled++;
    q->ann.deadline_ms = b.new_deadline_ms;
}

static void s_exclude(ns_requester_t *q, const uint8_t *provider)
{
    if (q->ann.n_excluded < NS_MAX_EXCLUDED)
        memcpy(q->ann.excluded[q->ann.n_excluded++], provider, NS_ID_BYTES);
}

/* ---- explaining an empty auction ---------------------------------------- */

typedef struct {
    const ns_requester_t *q;
    uint32_t seen, qualified, excluded, qualified_excluded;
    uint32_t failing[NS_REQ_COUNT];
    bool drawn; /* s_count_qualified: only those the draw asks to bid */
} s_explain_t;

static bool s_is_excluded(const ns_announce_t *a, const uint8_t *id)
{
    for (uint32_t e = 0; e < a->n_excluded; e++)
        if (memcmp(a->excluded[e], id, NS_ID_BYTES) == 0)
            return true;
    return false;
}

static bool s_count_provider(void *u, const uint8_t *id,
                             const ns_heartbeat_t *hb)
{
    s_explain_t *x = u;
    if (hb->n_devices == 0)
        return false; /* a light peer (another requester), not a provider */
    x->seen++;
    ns_offer_t offer;
    ns_offer_from_heartbeat(&offer, hb);
    uint32_t fail =
        ns_reqs_check(&x->q->o.reqs, &offer, x->q->o.collateral,
                      x->q->o.max_price, x->q->ann.work_flops, NULL);
    bool excluded = s_is_excluded(&x->q->ann, id);
    x->excluded += excluded;
    if (!fail) {
        x->qualified++;
        x->qualified_excluded += excluded;
    }
    for (int b = 0; b < NS_REQ_COUNT; b++)
        if (!(fail & (1u << b)))
            x->failing[b]++;
    return false; /* visit all */
}

static void s_explain(ns_requester_t *q, char *out, size_t cap)
{
    s_explain_t x = {q, 0, 0, 0, 0, {0}, false};
    q->io->visit_peers(q->io->user, s_count_provider, &x);
    size_t used;
    if ((x.seen && x.excluded == x.seen) ||
        (x.qualified && x.qualified_excluded == x.qualified))
        used = (size_t)snprintf(out, cap,
                                "no provider left to try: %u of the %u "
                                "providers known failed this job and are "
                                "excluded:",
                                x.excluded, x.seen);
    else
        used = (size_t)snprintf(out, cap,
                                "no provider bid on the job (%u "
                                "providers known):",
                                x.seen);
    for (int b = 0; b < NS_REQ_COUNT && used < cap; b++) {
        char what[64];
        ns_reqs_describe(&q->o.reqs, 1u << b, q->o.collateral, q->o.max_price,
                         what, sizeof what);
        if (((1u << b) == NS_REQ_REGION && !q->o.reqs.region[0]) ||
            ((1u << b) == NS_REQ_BUFFERS && !q->o.reqs.buffer_bytes))
            continue;
        used += (size_t)snprintf(out + used, cap - used, "%s %s: %u of %u",
                                 b ? ";" : "", what, x.failing[b], x.seen);
    }
    if (q->history[0] && used < cap)
        snprintf(out + used, cap - used, "; earlier rounds: %.300s",
                 q->history);
}

/* Providers we know of (their heartbeats) that qualify for the job and
 * are not excluded: when all of them have bid, the auction can close. */
static bool s_count_qualified(void *u, const uint8_t *id,
                              const ns_heartbeat_t *hb)
{
    s_explain_t *x = u;
    const ns_announce_t *a = &x->q->ann;
    if (s_is_excluded(a, id) ||
        (x->drawn && !ns_bid_drawn(a->job_id, a->round, id, a->draw)))
        return false;
    ns_offer_t offer;
    ns_offer_from_heartbeat(&offer, hb);
    if (hb->n_devices && ns_reqs_check(&a->reqs, &offer, a->collateral,
                                       a->max_price, a->work_flops, NULL) == 0)
        x->qualified++;
    return false;
}

/* Live peers, then those heard of whose endpoint has not answered
 * (node_io.h, visit_heard): a provider behind a router counts, and is
 * challenged, like any. */
static bool s_visit_heard(ns_requester_t *q, ns_peer_visit_fn fn, void *u)
{
    return q->io->visit_heard ? q->io->visit_heard(q->io->user, fn, u)
                              : q->io->visit_peers(q->io->user, fn, u);
}

/* Of them, those the announcement's draw asks to bid. */
static uint32_t s_drawn_known(ns_requester_t *q)
{
    s_explain_t x = {q, 0, 0, 0, 0, {0}, true};
    s_visit_heard(q, s_count_qualified, &x);
    return x.qualified;
}

static uint32_t s_qualified_known(ns_requester_t *q)
{
    s_explain_t x = {q, 0, 0, 0, 0, {0}, false};
    s_visit_heard(q, s_count_qualified, &x);
    return x.qualified;
}

/* ---- messages ----------------------------------------------------------- */

/* Bytes of announced input i at off (ns_held_read_fn): our own copy. */
static int s_held_read(void *u, uint32_t i, uint64_t off, uint8_t *buf,
                       size_t n)
{
    const ns_requester_t *q = u;
    const ns_job_t *job = q->o.job;
    for (uint32_t a = 0; a < job->n_args; a++)
        if (job->args[a].kind == NS_ARG_IN && q->o.inputs[a].data &&
            memcmp(job->args[a].hash, q->ann.inputs[i].hash, NS_HASH_BYTES) ==
                0 &&
            off + n <= job->args[a].size) {
            memcpy(buf, (const uint8_t *)q->o.inputs[a].data + off, n);
            return NS_OK;
        }
    return NS_ERR_NOTFOUND;
}

/* The input bytes a bid proved it holds: 0 for none, or for a proof
 * that does not check (logged: a bidder that claims what it lacks). */
static uint64_t s_held_checked(ns_requester_t *q, const ns_bid_t *b,
                               const ns_bid_ext_t *held)
{
    if (!held->mask)
        return 0;
    ns_hash_t want;
    if (ns_held_proof(&q->ann, b->provider, held->mask, s_held_read, q, want) ==
            NS_OK &&
        sodium_memcmp(want, held->proof, NS_HASH_BYTES) == 0)
        return ns_held_bytes(&q->ann, held->mask);
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, b->provider);
    ns_warn(NS_MOD_MARKET, "event=held_proof_bad provider=%s mask=%#x", who,
            held->mask);
    return 0;
}

static int s_on_bid(ns_requester_t *q, const ns_node_msg_t *m)
{
    ns_bid_t b;
    ns_bid_ext_t ext;
    int rc = ns_bid_decode(m->body, m->len, &b, &ext);
    if (rc != NS_OK)
        return rc;
    /* a bid from a provider the draw did not ask costs no signature
     * check (market.h, "bids from a bounded set") */
    if (memcmp(b.job_id, q->o.job_id, NS_HASH_BYTES) == 0 &&
        !ns_bid_drawn(b.job_id, q->ann.round, b.provider, q->ann.draw))
        return NS_OK;
    if (memcmp(b.provider, m->sender, NS_ID_BYTES) ||
        ns_bid_verify(&b, q->network_id) != NS_OK)
        return NS_ERR_SIG;
    if (q->phase != NS_RQ_BIDDING ||
        memcmp(b.job_id, q->o.job_id, NS_HASH_BYTES) ||
        q->n_bids == NS_POLICY_MAX_BIDS)
        return NS_OK;
    q->bids[q->n_bids] = b;
    q->bid_held[q->n_bids] = s_held_checked(q, &b, &ext);
    q->bid_free[q->n_bids] = ext.present ? ext.free_slots > 0 : -1;
    q->bid_us[q->n_bids++] = s_mono(q) * 1000;
    return NS_OK;
}

/* The winner fetches the descriptor and the inputs. */
static int s_on_fetch(ns_requester_t *q, const ns_node_msg_t *m)
{
    ns_chunk_t c;
    int rc = ns_fetch_decode(m->body, m->len, &c);
    if (rc != NS_OK)
        return rc;
    if (memcmp(c.job_id, q->o.job_id, NS_HASH_BYTES) ||
        memcmp(m->sender, q->winner.provider, NS_ID_BYTES) ||
        (q->phase != NS_RQ_ACCEPT && q->phase != NS_RQ_RUNNING))
        return NS_OK;
    const ns_job_t *job = q->o.job;
    const uint8_t *data = NULL;
    uint64_t total = 0;
    if (c.blob == NS_BLOB_DESCRIPTOR) {
        data = q->o.packed;
        total = q->o.packed_len;
    } else if (c.blob >= NS_BLOB_INPUT(0) &&
               c.blob < NS_BLOB_INPUT(job->n_args) &&
               job->args[c.blob - NS_BLOB_INPUT(0)].kind == NS_ARG_IN) {
        data = q->o.inputs[c.blob - NS_BLOB_INPUT(0)].data;
        total = job->args[c.blob - NS_BLOB_INPUT(0)].size;
    }
    if ((rc = ns_transfer_serve(&c, data, total, &q->body)) != NS_OK)
        return rc;
    return m->reply(m->reply_ctx, NS_MSG_MKT_CHUNK, q->body.data, q->body.len);
}

static void s_fetch_outputs(ns_requester_t *q)
{
    if (ns_fetch_pump(&q->fetch, q->io->send, q->io->user) != NS_OK)
        ns_debug(NS_MOD_MARKET, "event=fetch_send_failed");
    if (q->phase == NS_RQ_FETCH && ns_fetch_done(&q->fetch))
        s_phase(q, NS_RQ_VERIFY);
}

/* Statement and outputs; sizes come from our descriptor, never from the
 * provider. */
static int s_on_chunk(ns_requester_t *q, const ns_node_msg_t *m)
{
    ns_chunk_t c;
    int rc = ns_chunk_decode(m->body, m->len, &c), done = -1;
    if (rc != NS_OK)
        return rc;
    if (q->phase != NS_RQ_FETCH ||
        memcmp(m->sender, q->winner.provider, NS_ID_BYTES))
        return NS_OK;
    rc = ns_fetch_on_chunk(&q->fetch, &c, &done);
    if (rc == NS_ERR_DUPLICATE)
        return NS_OK; /* a late answer to a FETCH asked again: harmless */
    if (rc == NS_ERR_IO) {
        /* our disk, not the provider: full, or the file went away */
        int e = errno;
        uint32_t i = c.blob - NS_BLOB_OUTPUT(0);
        s_fail(q, "cannot write the outputs to '%s': %s",
               c.blob >= NS_BLOB_OUTPUT(0) && i < NS_MAX_ARGS && q->out_tmp[i]
                   ? q->out_tmp[i]
                   : "?",
               strerror(e));
        return NS_OK;
    }
    if (rc != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_OK : rc;
    q->chunk_ms = q->io->mono_ms(q->io->user);
    s_fetch_outputs(q);
    return NS_OK;
}

static void s_restart(ns_requester_t *q, const char *why);
static void s_repro_done(ns_requester_t *q, const ns_failure_t *f,
                         bool reproduced);

/* The winner says the job failed on its side. A failure the job itself
 * may cause (it does not build, its arguments do not fit, it crashed the
 * runtime) is tried here first, in our sandbox (s_repro_done): one that
 * fails here too ends the job at once as ours (escrow refunded,
 * collateral released, nobody excluded or penalised). Anything else moves
 * the job to the next bidder (collateral released: the provider told us
 * at once). Tried once the sandbox is free (the pre-flight's checks may
 * still run): the failure waits in q->repro meanwhile. */
static void s_provider_failed(ns_requester_t *q, const ns_failure_t *f)
{
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, f->provider);
    q->rc.failures++;
    snprintf(q->last_failure, sizeof q->last_failure,
             "provider %s reported %s: %s", who, ns_fail_kind_name(f->kind),
             f->reason);
    if (ns_fail_kind_is_jobs(f->kind) || f->kind == NS_FAIL_CRASH) {
        q->repro = *f;
        q->repro_pending = true;
        s_say(q, "%s; trying the job in our sandbox", q->last_failure);
        return;
    }
    s_repro_done(q, f, false);
}

/* The provider's failure f, tried here (s_provider_failed): reproduced
 * (the job's own: it ends) or not (the provider's: the next bidder). */
static void s_repro_done(ns_requester_t *q, const ns_failure_t *f,
                         bool reproduced)
{
    if (reproduced) {
        char why[sizeof q->dw.err + 64], who[NS_ID_SHORT_LEN + 1];
        s_dw_why(q, "our sandbox", why, sizeof why);
        ns_id_short(who, f->provider);
        s_cancel(q, NULL, false);
        s_fail(q,
               "the job fails here too, so it is the job's own and no "
               "provider is at fault (provider %s reported %s): %s",
               who, ns_fail_kind_name(f->kind), why);
        return;
    }
    s_cancel(q, NULL, true);
    /* its reputation with us: one that fails often is passed over */
    (void)ns_verified_note_failure(q->o.verified, f->provider,
                                   q->io->now_ms(q->io->user),
                                   NS_POLICY_FAIL_WINDOW_MS);
    char why[sizeof q->last_failure + 32];
    snprintf(why, sizeof why, "reported a failure (%s: %s)",
             ns_fail_kind_name(f->kind), f->reason);
    s_restart(q, why);
}

/* Whether our sandbox's run failed as the provider said: a crash as a
 * crash, a build or arguments that do not fit as the build's or the
 * arguments' error. Anything else (our time limit, our memory, a worker
 * that could not start) proves nothing: the provider's report stands as
 * its own failure, as before. */
static bool s_reproduced(const ns_requester_t *q)
{
    const char *crash = "the kernel crashed the OpenCL runtime";
    int rc = q->dw.rc;
    if (q->repro.kind == NS_FAIL_CRASH)
        return rc == NS_ERR_OPENCL && !strncmp(q->dw.err, crash, strlen(crash));
    return rc == NS_ERR_INVAL ||
           (rc == NS_ERR_OPENCL && strncmp(q->dw.err, crash, strlen(crash)));
}

/* A failure waiting for the sandbox (s_provider_failed): tried once it is
 * free, taken when done, dropped when the job has moved on. */
static void s_repro_tick(ns_requester_t *q)
{
    bool live = (q->phase == NS_RQ_ACCEPT || q->phase == NS_RQ_RUNNING) &&
                !memcmp(q->repro.provider, q->winner.provider, NS_ID_BYTES);
    if (q->dw.kind == S_DW_REPRO) {
        if (!live) {
            s_dw_abort(q);
            q->repro_pending = false;
        } else if (s_dw_take(q) == S_DW_REPRO) {
            q->repro_pending = false;
            s_repro_done(q, &q->repro, s_reproduced(q));
        }
        return;
    }
    if (!q->repro_pending)
        return;
    if (!live) {
        q->repro_pending = false;
        return;
    }
    if (q->dw.kind != S_DW_NONE)
        return; /* the pre-flight's checks first */
    /* the reported failure: a build or its arguments show on unit 0; a
     * crash may be on any unit, so the whole launch (within the
     * pre-flight's budget: a crash shows early) */
    q->dw.whole = q->repro.kind == NS_FAIL_CRASH;
    s_dw_start(q, S_DW_REPRO, NS_POLICY_PREFLIGHT_BUDGET_MS);
}

static int s_on_failed(ns_requester_t *q, const ns_node_msg_t *m)
{
    ns_failure_t f;
    int rc = ns_failure_decode(m->body, m->len, &f);
    if (rc != NS_OK)
        return rc;
    if (memcmp(f.provider, m->sender, NS_ID_BYTES) ||
        ns_failure_verify(&f, q->network_id) != NS_OK)
        return NS_ERR_SIG;
    ns_ledger_job_t lj;
    if ((q->phase != NS_RQ_ACCEPT && q->phase != NS_RQ_RUNNING) ||
        q->repro_pending || memcmp(f.job_id, q->o.job_id, NS_HASH_BYTES) ||
        memcmp(f.provider, q->winner.provider, NS_ID_BYTES) ||
        ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK ||
        memcmp(lj.award_id, f.award_id, NS_HASH_BYTES))
        return NS_OK; /* about an earlier round, or late */
    s_provider_failed(q, &f);
    return NS_OK;
}

bool ns_requester_owns(const ns_requester_t *q, const ns_node_msg_t *m)
{
    if (ns_challenger_owns(&q->chal, m))
        return true;
    /* Every message a requester takes starts [job_id (bin 32), ...] or,
     * for a BID, [provider, job_id, ...]: decode to be sure. */
    ns_chunk_t c;
    ns_bid_t b;
    switch (m->type) {
    case NS_MSG_MKT_BID:
        return ns_bid_decode(m->body, m->len, &b, NULL) == NS_OK &&
               memcmp(b.job_id, q->o.job_id, NS_HASH_BYTES) == 0;
    case NS_MSG_MKT_FETCH:
        return ns_fetch_decode(m->body, m->len, &c) == NS_OK &&
               memcmp(c.job_id, q->o.job_id, NS_HASH_BYTES) == 0;
    case NS_MSG_MKT_CHUNK:
        return ns_chunk_decode(m->body, m->len, &c) == NS_OK &&
               memcmp(c.job_id, q->o.job_id, NS_HASH_BYTES) == 0;
    case NS_MSG_MKT_FAILED: {
        ns_failure_t f;
        return ns_failure_decode(m->body, m->len, &f) == NS_OK &&
               memcmp(f.job_id, q->o.job_id, NS_HASH_BYTES) == 0;
    }
    default:
        return false;
    }
}

int ns_requester_on_msg(ns_requester_t *q, const ns_node_msg_t *m)
{
    /* No wait for device work in flight: it runs in ANNOUNCE and VERIFY,
     * where the handlers below take nothing (a BID only while BIDDING, a
     * CHUNK while FETCH, a FAILED while ACCEPT or RUNNING, the challenger
     * while CHALLENGE), and serving a FETCH reads only what stays. */
    if (q->phase == NS_RQ_CHALLENGE && ns_challenger_owns(&q->chal, m))
        return ns_challenger_on_msg(&q->chal, q->io, m, s_mono(q));
    switch (m->type) {
    case NS_MSG_MKT_BID:
        return s_on_bid(q, m);
    case NS_MSG_MKT_FETCH:
        return s_on_fetch(q, m);
    case NS_MSG_MKT_CHUNK:
        return s_on_chunk(q, m);
    case NS_MSG_MKT_FAILED:
        return s_on_failed(q, m);
    default:
        return NS_OK;
    }
}

/* ---- steps -------------------------------------------------------------- */

static bool s_note_linked(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    (void)hb;
    ns_requester_t *q = u;
    if (q->n_linked == NS_POLICY_MAX_BIDS)
        return true;
    memcpy(q->linked[q->n_linked++], id, NS_ID_BYTES);
    return false;
}

static bool s_was_linked(const ns_requester_t *q, const uint8_t *id)
{
    for (uint32_t i = 0; i < q->n_linked; i++)
        if (memcmp(q->linked[i], id, NS_ID_BYTES) == 0)
            return true;
    return false;
}

static void s_announce(ns_requester_t *q)
{
    q->ann.bid_window_ms =
        q->o.bid_window_ms + (q->rc.slashed ? NS_POLICY_SLASH_BID_EXTRA_MS : 0);
    if (!q->t_announce_ms)
        q->t_announce_ms = s_mono(q);
    q->round++;
    q->rc.rounds = q->round;
    q->ann.round = q->round;
    q->n_bids = 0;
    q->n_linked = 0;
    /* a few tens of bidders however many qualify, drawn afresh each round
     * (wider after a round without a usable bid) */
    uint64_t target = q->o.bid_target ? q->o.bid_target : NS_POLICY_BID_TARGET;
    for (uint32_t i = 0; i < q->draw_widen && target < UINT32_MAX; i++)
        target *= 4;
    q->ann.draw =
        ns_bid_draw_for(s_qualified_known(q),
                        target > UINT32_MAX ? UINT32_MAX : (uint32_t)target);
    q->io->visit_peers(q->io->user, s_note_linked, q);
    if (q->io->contact) /* behind a router it follows our relay */
        snprintf(q->ann.endpoint, sizeof q->ann.endpoint, "%s",
                 q->io->contact(q->io->user));
    if (ns_announce_encode(&q->ann, &q->body) != NS_OK ||
        q->io->publish(q->io->user, NS_MSG_MKT_JOB, q->body.data,
                       q->body.len) != NS_OK) {
        s_fail(q, "cannot announce the job");
        return;
    }
    if (q->ann.draw && q->ann.draw != NS_DRAW_ALL)
        s_say(q,
              "auction round %u: job %.16s announced, %u of the %u qualified "
              "providers known drawn to bid, bids for %u ms",
              q->round, q->job_hex, s_drawn_known(q), s_qualified_known(q),
              q->ann.bid_window_ms);
    else
        s_say(q, "auction round %u: job %.16s announced, bids for %u ms",
              q->round, q->job_hex, q->ann.bid_window_ms);
    s_phase(q, NS_RQ_BIDDING);
}

/* Tell the winner, with our JOB and AWARD entries. */
static int s_send_awarded(ns_requester_t *q)
{
    ns_account_t me;
    uint8_t *je = NULL, *ae = NULL;
    size_t jl = 0, al = 0;
    const uint8_t *self = ns_identity_pk(q->me);
    int rc = ns_ledger_account(q->ledger, self, &me);
    if (rc == NS_OK)
        rc = ns_ledger_get(q->ledger, self, q->job_seq, &je, &jl);
    if (rc == NS_OK)
        rc = ns_ledger_get(q->ledger, self,
                           q->award_seq ? q->award_seq : me.seq, &ae, &al);
    if (rc != NS_OK) {
        free(je);
        return NS_ERR_CORRUPT;
    }
    ns_awarded_t aw = {{0}, je, jl, ae, al};
    memcpy(aw.job_id, q->o.job_id, NS_HASH_BYTES);
    rc = ns_awarded_encode(&aw, &q->body);
    if (rc == NS_OK)
        rc = q->io->send(q->io->user, q->winner.provider, NS_MSG_MKT_AWARDED,
                         q->body.data, q->body.len);
    free(je);
    free(ae);
    return rc;
}

static const char *s_out_path(const ns_requester_t *q, uint32_t i)
{
    const ns_arg_t *a = &q->o.job->args[i];
    return q->o.out_paths && a->kind == NS_ARG_OUT && a->size
               ? q->o.out_paths[i]
               : NULL;
}

static void s_out_unmap(ns_requester_t *q)
{
    if (q->dw.kind == S_DW_CHECK)
        s_dw_abort(q); /* the check reads the mapped outputs */
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (q->out_map[i]) {
            munmap(q->out_map[i], (size_t)q->o.job->args[i].size);
            q->out_map[i] = NULL;
        }
}

/* Which RESULT an output's part file holds bytes of: PATH.<job>.part.from
 * (the RESULT id in hex), written when its fetch starts, so that `submit
 * --resume` takes the part up only for the same result (the job may have
 * moved on to another provider since). */
static void s_from_path(const ns_requester_t *q, uint32_t i, char *out,
                        size_t cap)
{
    snprintf(out, cap, "%s.from", q->out_tmp[i]);
}

static bool s_part_is_from(const ns_requester_t *q, uint32_t i,
                           const ns_hash_t result)
{
    char path[PATH_MAX], hex[2 * NS_HASH_BYTES + 1], got[2 * NS_HASH_BYTES + 2];
    s_from_path(q, i, path, sizeof path);
    ns_hex(hex, result, NS_HASH_BYTES);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool same = fgets(got, sizeof got, f) && strcmp(got, hex) == 0;
    fclose(f);
    return same;
}

/* Not synced: a mark lost in a crash only means no resume, and a part
 * that does not hold what its mark says is fetched whole again. */
static void s_part_mark(const ns_requester_t *q, uint32_t i,
                        const ns_hash_t result)
{
    char path[PATH_MAX], hex[2 * NS_HASH_BYTES + 1];
    s_from_path(q, i, path, sizeof path);
    ns_hex(hex, result, NS_HASH_BYTES);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, hex, strlen(hex)) == (ssize_t)strlen(hex);
    if (fd >= 0)
        close(fd);
    if (!ok)
        ns_debug(NS_MOD_MARKET, "event=part_mark_failed path=\"%s\"", path);
}

static void s_part_unmark(const ns_requester_t *q, uint32_t i)
{
    char path[PATH_MAX];
    s_from_path(q, i, path, sizeof path);
    (void)unlink(path);
}

/* The .part files closed, and removed unless they were renamed into
 * place (delivered). */
static void s_out_close(ns_requester_t *q)
{
    ns_fetch_release(&q->fetch); /* it writes to the fds: done first */
    s_out_unmap(q);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        if (q->out_fd[i] >= 0)
            close(q->out_fd[i]);
        q->out_fd[i] = -1;
        if (q->out_tmp[i]) {
            (void)unlink(q->out_tmp[i]);
            s_part_unmark(q, i);
        }
        free(q->out_tmp[i]);
        q->out_tmp[i] = NULL;
    }
}

/* The .part file of OUT argument i (PATH.<job 16 hex>.part), open;
 * emptied, unless keep (a resumed job: s_start_fetch decides). */
static int s_out_open(ns_requester_t *q, uint32_t i, bool keep, char *err,
                      size_t errlen)
{
    const char *path = s_out_path(q, i);
    if (q->out_fd[i] >= 0)
        return NS_OK;
    size_t cap = strlen(path) + 32;
    q->out_tmp[i] = malloc(cap);
    if (!q->out_tmp[i]) {
        snprintf(err, errlen, "arg %u: out of memory", i);
        return NS_ERR_NOMEM;
    }
    snprintf(q->out_tmp[i], cap, "%s.%.16s.part", path, q->job_hex);
    q->out_fd[i] =
        open(q->out_tmp[i], O_RDWR | O_CREAT | (keep ? 0 : O_TRUNC) | O_CLOEXEC,
             0600);
    if (q->out_fd[i] < 0) {
        snprintf(err, errlen, "arg %u: cannot write the output '%s': %s", i,
                 path, strerror(errno));
        free(q->out_tmp[i]);
        q->out_tmp[i] = NULL;
        return NS_ERR_IO;
    }
    return NS_OK;
}

/* The unnamed temporary file of an output that goes nowhere (no path,
 * no buffer: a pipeline's intermediate): open, and gone when closed, so
 * nothing of it outlives the job, whatever happens to the process. */
static int s_out_scratch(ns_requester_t *q, uint32_t i, char *err,
                         size_t errlen)
{
    if (q->out_fd[i] >= 0)
        return NS_OK;
    const char *dir = q->o.scratch_dir;
    if (!dir || !dir[0])
        dir = getenv("TMPDIR");
    if (!dir || !dir[0])
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR ||
                   errno == EINVAL)) { /* no O_TMPFILE there */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/nightshift-out.XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd >= 0)
            (void)unlink(path);
    }
    if (fd < 0) {
        snprintf(err, errlen,
                 "arg %u: cannot make a temporary file in %s for an "
                 "intermediate output: %s",
                 i, dir, strerror(errno));
        return NS_ERR_IO;
    }
    q->out_fd[i] = fd;
    return NS_OK;
}

static void s_start_fetch(ns_requester_t *q)
{
    const ns_job_t *job = q->o.job;
    char err[PATH_MAX + 128] = "";
    ns_fetch_release(&q->fetch);
    ns_fetch_init(&q->fetch, q->o.job_id, q->winner.provider,
                  NS_POLICY_FETCH_WINDOW);
    q->chunk_ms = q->io->mono_ms(q->io->user);
    if (!q->leaves) {
        q->n_leaves = ns_commit_leaves(job);
        q->leaves = calloc(q->n_leaves ? q->n_leaves : 1, sizeof *q->leaves);
    }
    int rc = q->leaves ? ns_fetch_add(&q->fetch, NS_BLOB_STATEMENT,
                                      q->statement, NS_SIG_BYTES, 0)
                       : NS_ERR_NOMEM;
    /* A resumed job takes up the part files of a fetch that was cut, when
     * they hold this very result's bytes (once: a prefix that does not
     * hash right is fetched whole again, s_verify). */
    ns_ledger_job_t lj;
    bool resume = q->o.resume && !q->refetch &&
                  ns_ledger_job(q->ledger, q->o.job_id, &lj) == NS_OK;
    uint64_t resumed = 0;
    q->fetch_resumed = false;
    for (uint32_t i = 0; rc == NS_OK && i < job->n_args; i++) {
        const ns_arg_t *a = &job->args[i];
        uint64_t leaf = 0;
        if (a->kind != NS_ARG_OUT)
            continue;
        if (!a->size || ns_commit_leaf_index(job, i, 0, &leaf) != NS_OK) {
            rc = ns_fetch_add(&q->fetch, NS_BLOB_OUTPUT(i), q->o.outputs[i],
                              a->size, 0);
            continue;
        }
        bool keep = false;
        if (s_out_path(q, i)) {
            rc = s_out_open(q, i, resume, err, sizeof err);
            keep = rc == NS_OK && resume && s_part_is_from(q, i, lj.result_id);
        } else if (!q->o.outputs || !q->o.outputs[i]) {
            rc = s_out_scratch(q, i, err, sizeof err);
        }
        if (rc == NS_OK)
            rc = ns_fetch_add_output(&q->fetch, NS_BLOB_OUTPUT(i), q->out_fd[i],
                                     q->o.outputs[i], a->size, i, q->o.desc_id,
                                     q->leaves + leaf, keep);
        if (rc == NS_OK && q->out_fd[i] >= 0) {
            const ns_fetch_blob_t *fb =
                ns_fetch_blob(&q->fetch, NS_BLOB_OUTPUT(i));
            resumed += fb ? fb->resumed : 0;
            /* worth resuming: outputs of several chunks */
            if (!keep && q->out_tmp[i] &&
                a->size > 4 * (uint64_t)NS_CHUNK_BYTES &&
                ns_ledger_job(q->ledger, q->o.job_id, &lj) == NS_OK)
                s_part_mark(q, i, lj.result_id);
        }
        /* the room on disk now, not a disk full half-way */
        if (rc == NS_OK && q->out_fd[i] >= 0 &&
            fallocate(q->out_fd[i], FALLOC_FL_KEEP_SIZE, 0, (off_t)a->size) &&
            errno != EOPNOTSUPP && errno != ENOSYS) {
            snprintf(
                err, sizeof err, "arg %u: no room for %llu bytes in '%s': %s",
                i, (unsigned long long)a->size, q->out_tmp[i], strerror(errno));
            rc = NS_ERR_IO;
        }
    }
    if (rc != NS_OK) {
        s_fail(q, "cannot fetch the outputs: %s",
               err[0] ? err : ns_strerror(rc));
        return;
    }
    if (resumed) {
        q->fetch_resumed = true;
        s_say(q, "resuming the outputs: %llu bytes already here",
              (unsigned long long)resumed);
    }
}

/* Award the job to bid (AWARD entry, AWARDED message). */
/* ns_requester_opts_t.fault_fork_award: each other live peer but the
 * winner gets, straight, one of the two entries at the award's seq in
 * turn (the TRANSFER first: two of three). */
typedef struct {
    ns_requester_t *q;
    const ns_buf_t *entry[2];
    uint32_t i, sent[2];
} s_fork_t;

static bool s_fork_send(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    (void)hb;
    s_fork_t *f = u;
    if (memcmp(id, f->q->winner.provider, NS_ID_BYTES) == 0)
        return false;
    uint32_t k = f->i++ % 2;
    if (f->q->io->send(f->q->io->user, id, NS_MSG_ENTRY, f->entry[k]->data,
                       f->entry[k]->len) == NS_OK)
        f->sent[k]++;
    return false;
}

/* The award of a requester forking its chain (test networks): the AWARD
 * signed here and taken into our ledger without gossip, the winner told
 * (AWARDED, which carries it), then a TRANSFER at the same seq to half of
 * the other peers and the AWARD to the rest, straight: the network splits
 * on which one it holds first, as when an attacker injects two entries
 * at two nodes at once. NS_OK, or why not (the AWARDED's send). */
static int s_fault_award(ns_requester_t *q, const ns_entry_body_t *award,
                         ns_hash_t award_id)
{
    static const ns_hash_t zero;
    ns_account_t me;
    ns_entry_body_t pay;
    ns_buf_t body, e[2];
    ns_hash_t id;
    ns_buf_init(&body);
    ns_buf_init(&e[0]);
    ns_buf_init(&e[1]);
    memset(&pay, 0, sizeof pay);
    memcpy(pay.to, q->winner.provider, NS_ID_BYTES);
    pay.amount = 1;
    uint64_t now = q->io->now_ms(q->io->user);
    int rc = ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me);
    const uint8_t *prev = me.seq ? me.head : zero;
    if (rc == NS_OK)
        rc = ns_entry_body_encode(NS_ENTRY_TRANSFER, &pay, &body);
    if (rc == NS_OK)
        rc = ns_entry_encode(q->me, q->network_id, me.seq + 1, prev,
                             NS_ENTRY_TRANSFER, body.data, body.len, NULL, 0,
                             now, &e[0], id);
    body.len = 0;
    if (rc == NS_OK)
        rc = ns_entry_body_encode(NS_ENTRY_AWARD, award, &body);
    if (rc == NS_OK)
        rc = ns_entry_encode(q->me, q->network_id, me.seq + 1, prev,
                             NS_ENTRY_AWARD, body.data, body.len, NULL, 0, now,
                             &e[1], award_id);
    if (rc == NS_OK)
        rc = ns_ledger_ingest(q->ledger, e[1].data, e[1].len, NULL, NULL);
    if (rc == NS_OK)
        rc = ns_ledger_commit(q->ledger);
    if (rc == NS_OK) {
        int sent = s_send_awarded(q);
        s_fork_t f = {q, {&e[0], &e[1]}, 0, {0, 0}};
        q->io->visit_peers(q->io->user, s_fork_send, &f);
        ns_warn(NS_MOD_MARKET,
                "event=fault_fork_award job=%.16s seq=%llu transfer_to=%u "
                "award_to=%u",
                q->job_hex, (unsigned long long)(me.seq + 1), f.sent[0],
                f.sent[1] + (sent == NS_OK));
        rc = sent == NS_ERR_CORRUPT ? NS_ERR_STATE : sent;
    } else {
        rc = NS_ERR_STATE;
    }
    ns_buf_release(&body);
    ns_buf_release(&e[0]);
    ns_buf_release(&e[1]);
    return rc;
}

static void s_award_to(ns_requester_t *q, const ns_bid_t *bid)
{
    q->winner = *bid;
    memcpy(q->rc.provider, q->winner.provider, NS_ID_BYTES);
    ns_entry_body_t b;
    ns_hash_t award_id;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->o.job_id, NS_HASH_BYTES);
    b.bid = q->winner;
    int rc;
    if (q->o.fault_fork_award) {
        if ((rc = s_fault_award(q, &b, award_id)) == NS_ERR_STATE) {
            s_fail(q, "the ledger refused the award");
            return;
        }
    } else {
        if (s_append(q, NS_ENTRY_AWARD, &b, award_id) != NS_OK) {
            s_fail(q, "the ledger refused the award");
            return;
        }
        ns_account_t me;
        q->award_seq =
            ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me) == NS_OK
                ? me.seq
                : 0;
        rc = s_send_awarded(q);
    }
    if (rc == NS_ERR_CORRUPT) {
        s_fail(q, "cannot read our own entries back");
        return;
    }
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, q->winner.provider);
    char price[NS_CREDITS_TEXT];
    s_say(q, "%u bids; awarded to %s at %s credits (est. %llu ms)%s", q->n_bids,
          who, ns_credits_fmt(price, q->winner.price),
          (unsigned long long)q->winner.est_ms,
          rc == NS_OK ? "" : " (provider not reachable yet)");
    s_phase(q, NS_RQ_ACCEPT);
}

/* The device a provider claims for our job, from its heartbeat. */
typedef struct {
    const ns_requester_t *q;
    const uint8_t *id;
    bool found;
    uint32_t device;
    ns_devinfo_t claim;
} s_claim_t;

static bool s_find_claim(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    s_claim_t *c = u;
    if (memcmp(id, c->id, NS_ID_BYTES) || hb->n_devices == 0)
        return false;
    ns_offer_t offer;
    ns_offer_from_heartbeat(&offer, hb);
    uint32_t dev = 0;
    (void)ns_reqs_check(&c->q->ann.reqs, &offer, c->q->ann.collateral,
                        c->q->ann.max_price, c->q->ann.work_flops, &dev);
    c->device = dev < hb->n_devices ? dev : 0;
    c->claim = hb->devices[c->device];
    c->found = true;
    return true;
}

static void s_note_dropped(ns_requester_t *q, const uint8_t *who_id,
                           const char *why)
{
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, who_id);
    size_t used = strlen(q->history);
    if (used + 8 < sizeof q->history)
        snprintf(q->history + used, sizeof q->history - used, "%s%u: %s %s",
                 used ? "; " : "", q->round, who, why);
    s_say(q, "provider %s %s: excluded", who, why);
    s_exclude(q, who_id);
}

/* Before bid wins: 1 = award it, 0 = a challenge started, -1 = it is
 * excluded (failed a challenge lately): pick again. */
static int s_vet(ns_requester_t *q, const ns_bid_t *bid, uint64_t now)
{
    if (!q->o.verified)
        return 1;
    uint64_t at = 0, wall = q->io->now_ms(q->io->user);
    uint32_t fails = ns_verified_failures(q->o.verified, bid->provider, wall,
                                          NS_POLICY_FAIL_WINDOW_MS);
    if (fails >= NS_POLICY_FAIL_EXCLUDE) {
        char why[96];
        snprintf(why, sizeof why, "failed %u jobs of ours lately", fails);
        s_note_dropped(q, bid->provider, why);
        return -1;
    }
    uint8_t st = ns_verified_get(q->o.verified, bid->provider, &at);
    if (st == NS_VERIFIED_PASSED && wall - at < NS_POLICY_CHAL_VALID_MS)
        return 1;
    if (st == NS_VERIFIED_FAILED && wall - at < NS_POLICY_CHAL_RETRY_MS) {
        s_note_dropped(q, bid->provider, "failed a hardware challenge lately");
        return -1;
    }
    s_claim_t c;
    memset(&c, 0, sizeof c);
    c.q = q;
    c.id = bid->provider;
    /* Not live here, a provider that cannot be dialled (and does not
     * know it) is held to its claims all the same: its heartbeat is
     * signed however it came. */
    s_visit_heard(q, s_find_claim, &c);
    if (!c.found)
        return 1; /* no heartbeat: no claim to hold it to */
    /* one challenge at a time in this node (verified.h): wait our turn */
    if (!ns_verified_chal_take(q->o.verified, q, wall,
                               NS_POLICY_CHAL_LEASE_MS)) {
        if (!q->chal_waiting)
            s_say(q, "waiting for another hardware challenge of this node "
                     "to end");
        q->chal_waiting = true;
        return 2;
    }
    q->chal_waiting = false;
    uint64_t label = q->o.reqs.min_mem_bytes / 4;
    double by_rate = c.claim.gbps * 1e9 * NS_POLICY_CHAL_LABEL_MS / 1000.0;
    if (by_rate > (double)label)
        label = by_rate > 1e18 ? UINT64_MAX : (uint64_t)by_rate;
    if (label < NS_POLICY_CHAL_LABEL_BYTES)
        label = NS_POLICY_CHAL_LABEL_BYTES;
    if (label > NS_POLICY_CHAL_LABEL_MAX_BYTES)
        label = NS_POLICY_CHAL_LABEL_MAX_BYTES;
    if (ns_challenger_start(&q->chal, q->io, bid->provider, c.device, &c.claim,
                            label, NS_POLICY_CHAL_IMATMUL_N,
                            q->o.chal_allowance_ms
                                ? q->o.chal_allowance_ms
                                : NS_POLICY_CHAL_ALLOWANCE_MS,
                            now) != NS_OK) {
        ns_verified_chal_give(q->o.verified, q);
        s_note_dropped(q, bid->provider, "could not be challenged");
        return -1;
    }
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, bid->provider);
    s_say(q,
          "challenging %s's claimed device (%s): labelling %llu MiB, "
          "product of order %u",
          who, c.claim.name, (unsigned long long)(q->chal.label.bytes >> 20),
          NS_POLICY_CHAL_IMATMUL_N);
    q->chal_bid = *bid;
    s_phase(q, NS_RQ_CHALLENGE);
    return 0;
}

/* The bidders' free slots, from their heartbeats. */
typedef struct {
    const ns_requester_t *q;
    ns_bid_rank_t *rank;
} s_free_t;

/* A bidder is free unless its last heartbeat said it had no free slot: a
 * light peer that joined a moment ago has heard few heartbeats, and must
 * not prefer the few providers it heard of (its bootstrap) for that. */
static bool s_mark_free(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    s_free_t *f = u;
    for (uint32_t i = 0; i < f->q->n_bids; i++)
        if (memcmp(f->q->bids[i].provider, id, NS_ID_BYTES) == 0)
            f->rank[i].free = hb->free_slots > 0;
    return false;
}

/* No bid: wait for a provider that can take the job (one joining, a busy
 * one becoming free), up to the deadline, saying why none can while the
 * reason changes. False when the job should fail now instead. */
static bool s_wait(ns_requester_t *q, const char *why)
{
    uint64_t wall = q->io->now_ms(q->io->user);
    if (q->o.no_wait || wall + NS_POLICY_RUN_MIN_MS >= q->ann.deadline_ms)
        return false;
    if (strcmp(why, q->wait_why) != 0) {
        snprintf(q->wait_why, sizeof q->wait_why, "%s", why);
        s_say(q,
              "waiting for a provider, up to the deadline (%llu s left; "
              "--no-wait fails instead): %s",
              (unsigned long long)((q->ann.deadline_ms - wall) / 1000), why);
    }
    s_phase(q, NS_RQ_WAITING);
    return true;
}

static void s_award(ns_requester_t *q)
{
    ns_bid_rank_t rank[NS_POLICY_MAX_BIDS];
    memset(rank, 0, sizeof rank);
    for (uint32_t i = 0; i < q->n_bids; i++) {
        ns_account_t a;
        rank[i].standing =
            ns_ledger_account(q->ledger, q->bids[i].provider, &a) == NS_OK
                ? ns_standing(&a)
                : 0;
        rank[i].arrival_us = q->bid_us[i];
        rank[i].linked = s_was_linked(q, q->bids[i].provider);
        rank[i].held_bytes = q->bid_held[i];
        rank[i].free = true; /* until a heartbeat says otherwise */
    }
    s_free_t f = {q, rank};
    q->io->visit_peers(q->io->user, s_mark_free, &f);
    /* what a bid said of itself is fresher than any heartbeat */
    for (uint32_t i = 0; i < q->n_bids; i++)
        if (q->bid_free[i] >= 0)
            rank[i].free = q->bid_free[i] == 1;
    /* a provider that holds another shard of the job counts as busy */
    for (uint32_t i = 0; q->o.sibling_holds && i < q->n_bids; i++)
        if (q->o.sibling_holds(q->o.sibling_user, q->bids[i].provider))
            rank[i].free = false;
    for (;;) {
        int w =
            ns_auction_pick(q->bids, rank, q->n_bids, q->o.max_price, &q->ann);
        if (w < 0 && q->ann.draw && q->ann.draw != NS_DRAW_ALL) {
            /* none of the drawn could or would: ask more of them */
            q->draw_widen++;
            s_say(q, "no usable bid from the %u providers drawn; asking more",
                  s_drawn_known(q));
            s_announce(q);
            return;
        }
        if (w < 0) {
            char why[sizeof q->rc.error];
            s_explain(q, why, sizeof why);
            if (s_wait(q, why))
                return;
            s_cancel(q, NULL, false);
            s_fail(q, "%s", why);
            return;
        }
        int v = s_vet(q, &q->bids[w], s_mono(q));
        if (v == 1)
            s_award_to(q, &q->bids[w]);
        if (v >= 0)
            return; /* 2: our turn to challenge comes at a later tick */
    }
}

/* The winner's challenge went one way or the other. */
static void s_challenged(ns_requester_t *q, uint64_t now)
{
    char why[160] = "";
    int v = ns_challenger_tick(&q->chal, q->io, now, why, sizeof why);
    if (v == NS_CHALLENGER_PENDING)
        return;
    ns_verified_chal_give(q->o.verified, q);
    uint64_t wall = q->io->now_ms(q->io->user);
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, q->chal_bid.provider);
    if (v == NS_CHALLENGER_BUSY) {
        /* not a false claim: only not now. Its bid is out of this
         * auction; it may bid again and be challenged in a later one. */
        s_say(q,
              "%s could not run its hardware challenge now (%s): the "
              "next bid",
              who, why);
        for (uint32_t i = 0; i < q->n_bids; i++)
            if (memcmp(q->bids[i].provider, q->chal_bid.provider,
                       NS_ID_BYTES) == 0)
                q->bids[i].price = UINT64_MAX; /* over any max price */
        s_phase(q, NS_RQ_BIDDING);
        s_award(q);
        return;
    }
    if (v == NS_CHAL_PASSED) {
        ns_verified_put(q->o.verified, q->chal_bid.provider, NS_VERIFIED_PASSED,
                        wall, "passed");
        s_say(q, "%s passed its hardware challenge", who);
        s_award_to(q, &q->chal_bid);
        return;
    }
    char what[200];
    snprintf(what, sizeof what, "failed its hardware challenge (%s: %s)",
             ns_chal_verdict_name(v), why);
    ns_verified_put(q->o.verified, q->chal_bid.provider, NS_VERIFIED_FAILED,
                    wall, what);
    s_note_dropped(q, q->chal_bid.provider, what);
    s_phase(q, NS_RQ_BIDDING);
    s_award(q); /* the next bid */
}

static void s_restart(ns_requester_t *q, const char *why)
{
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, q->winner.provider);
    /* kept for the final error: an empty auction later says why */
    size_t used = strlen(q->history);
    if (used + 8 < sizeof q->history)
        snprintf(q->history + used, sizeof q->history - used, "%s%u: %s %s",
                 used ? "; " : "", q->round, who, why);
    s_say(q, "provider %s %s: excluded, new auction", who, why);
    s_exclude(q, q->winner.provider);
    ns_fetch_release(&q->fetch);
    s_announce(q);
}

static void s_settle(ns_requester_t *q, const ns_ledger_job_t *lj)
{
    ns_entry_body_t b;
    ns_hash_t id;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->o.job_id, NS_HASH_BYTES);
    memcpy(b.ref_id, lj->result_id, NS_HASH_BYTES);
    if (s_append(q, NS_ENTRY_SETTLE, &b, id) != NS_OK) {
        s_fail(q, "the ledger refused the settlement");
        return;
    }
    q->rc.price = lj->price;
    q->rc.refund = lj->escrow - lj->price;
    for (uint32_t i = 0; i < q->o.job->n_args; i++) {
        if (q->out_fd[i] < 0 || !q->out_tmp[i])
            continue; /* in memory, or an intermediate: kept nowhere */
        if (ns_file_commit(q->out_fd[i], q->out_tmp[i], s_out_path(q, i),
                           0644) != NS_OK) {
            s_fail(q, "arg %u: cannot write '%s': %s", i, s_out_path(q, i),
                   strerror(errno));
            return;
        }
        s_part_unmark(q, i);
        free(q->out_tmp[i]); /* renamed: nothing to remove */
        q->out_tmp[i] = NULL;
    }
    if (q->o.deliver && q->o.deliver(q->o.deliver_user, q->rc.error,
                                     sizeof q->rc.error) != NS_OK) {
        s_fail(q, "%s", q->rc.error);
        return;
    }
    s_say(q, "verified: %u/%u units match; settled, outputs written",
          q->check.checked, q->check.checked);
    s_phase(q, NS_RQ_DONE);
}

/* Fraud: prove it to everyone and move on. */
static void s_slash(ns_requester_t *q, const ns_ledger_job_t *lj)
{
    ns_fraud_proof_t proof;
    ns_buf_t packed;
    ns_merkle_t tree;
    ns_buf_init(&packed);
    memset(&proof, 0, sizeof proof);
    /* the tree from the leaves taken as the outputs arrived */
    int rc = ns_merkle_build(&tree, (const ns_hash_t *)q->leaves,
                             (size_t)q->n_leaves);
    if (rc == NS_OK) {
        rc =
            ns_fraud_build(&proof, q->o.job, q->o.desc_id, q->winner.provider,
                           q->statement, &tree, q->out_view, q->check.first_bad,
                           q->check.bad_arg, q->check.bad_pos);
        ns_merkle_release(&tree);
    }
    bool inline_inputs = false;
    if (rc == NS_OK)
        rc = ns_slash_proof_pack(&proof, q->o.inputs, &packed, &inline_inputs);
    if (rc == NS_OK && !inline_inputs) {
        /* too large for the entry: every node fetches them by hash, from
         * us first */
        rc = q->o.blobs
                 ? ns_slash_keep_inputs(q->o.blobs, q->o.job, q->o.inputs)
                 : NS_ERR_STATE;
        if (rc == NS_OK)
            q->slash_by_ref = true;
    }
    if (rc == NS_OK && proof.n_outs) {
        /* a pipeline's step that read earlier steps' buffers: every node
         * fetches the claimed buffers by hash, from us first */
        rc = q->o.blobs ? ns_slash_keep_outputs(q->o.blobs, &proof, q->out_view)
                        : NS_ERR_STATE;
        if (rc == NS_OK)
            q->slash_by_ref = true;
    }
    ns_fraud_release(&proof);
    if (rc == NS_OK) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        memcpy(b.job_id, q->o.job_id, NS_HASH_BYTES);
        memcpy(b.ref_id, lj->result_id, NS_HASH_BYTES);
        b.proof = packed.data;
        b.proof_len = packed.len;
        rc = s_append(q, NS_ENTRY_SLASH, &b, id);
    }
    ns_buf_release(&packed);
    if (rc != NS_OK) {
        /* Could not slash (the statement signature was bad, ...): at least
         * free the job for someone else. */
        s_cancel(q, NULL, true);
    } else {
        q->rc.slashed++;
    }
    char why[128];
    snprintf(why, sizeof why, "failed the check (%u of %u units wrong)%s",
             q->check.mismatched, q->check.checked,
             rc == NS_OK ? ", slashed with a fraud proof" : "");
    s_restart(q, why);
}

static void s_checked(ns_requester_t *q, int rc, const char *err,
                      uint64_t commit_us);

static void s_verify(ns_requester_t *q)
{
    ns_ledger_job_t lj;
    char err[512];
    if (ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK) {
        s_fail(q, "job vanished from the ledger");
        return;
    }
    uint32_t k = ns_job_checks(q->o.job);
    uint64_t pool = ns_job_shard_units(q->o.job); /* a shard's own */
    if (q->o.job->n_steps)
        s_say(q,
              "outputs received; checking up to %u random units of each "
              "of its %u steps (%llu units in all)",
              k, q->o.job->n_steps, (unsigned long long)pool);
    else
        s_say(q, "outputs received; checking %u random units of %llu",
              k < pool ? k : (uint32_t)pool, (unsigned long long)pool);
    randombytes_buf(q->secret, sizeof q->secret);
    uint64_t t0 = ns_mono_us();
    /* the root from the leaves taken as the bytes arrived: no second pass
     * over the outputs */
    ns_hash_t root;
    int rc = ns_merkle_root_of(root, (const ns_hash_t *)q->leaves,
                               (size_t)q->n_leaves);
    if (rc == NS_OK && sodium_memcmp(root, lj.root, NS_HASH_BYTES) != 0)
        rc = NS_ERR_PROOF;
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        const ns_arg_t *a = &q->o.job->args[i];
        q->out_view[i] =
            q->o.outputs && i < q->o.job->n_args && a->kind == NS_ARG_OUT
                ? q->o.outputs[i]
                : NULL;
        if (rc != NS_OK || q->out_fd[i] < 0)
            continue;
        void *m =
            mmap(NULL, (size_t)a->size, PROT_READ, MAP_SHARED, q->out_fd[i], 0);
        if (m == MAP_FAILED) {
            snprintf(err, sizeof err, "cannot map '%s': %s",
                     q->out_tmp[i] ? q->out_tmp[i] : "(intermediate)",
                     strerror(errno));
            rc = NS_ERR_IO;
            continue;
        }
        q->out_map[i] = q->out_view[i] = m;
    }
    uint64_t commit_us = ns_mono_us() - t0;
    if (rc == NS_OK) {
        /* the re-runs, in the sandbox: taken in a later tick. The worker
         * maps each part file itself, through a read-only reopening (the
         * part file is ours and writable). */
        s_dw_abort(q);
        for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
            char self[64];
            snprintf(self, sizeof self, "/proc/self/fd/%d", q->out_fd[i]);
            if (q->out_map[i])
                q->dw.ro_fds[i] = open(self, O_RDONLY | O_CLOEXEC);
        }
        q->dw.k = k;
        memcpy(q->dw.root, lj.root, NS_HASH_BYTES);
        q->dw.commit_us = commit_us;
        s_dw_start(q, S_DW_CHECK, NS_POLICY_CHECK_LIMIT_MS);
        if (s_dw_take(q) == S_DW_CHECK) /* failed to start: else later */
            s_checked(q, q->dw.rc, q->dw.err, q->dw.commit_us);
        return;
    }
    s_checked(q, rc, err, commit_us);
}

/* The check's outcome (rc, err): settle, slash, fetch again or fail. */
static void s_checked(ns_requester_t *q, int rc, const char *err,
                      uint64_t commit_us)
{
    ns_ledger_job_t lj;
    if (ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK) {
        s_out_unmap(q);
        s_fail(q, "job vanished from the ledger");
        return;
    }
    q->check.commit_us += commit_us;
    q->check.verify_us += commit_us;
    q->rc.verify_ms = q->check.verify_us / 1000;
    q->rc.checked = q->check.checked;
    if (rc != NS_OK || q->check.mismatched == 0)
        s_out_unmap(q); /* a SLASH reads its chunk from them */
    if (rc == NS_ERR_PROOF && q->fetch_resumed) {
        /* The part files we took up may be what is wrong (a disk that
         * lost a write): the whole outputs once more before judging. */
        ns_warn(NS_MOD_MARKET, "event=outputs_refetched job=%.16s", q->job_hex);
        s_say(q, "the outputs taken up from part files do not match the "
                 "commitment: fetching them whole again");
        q->refetch = true;
        s_phase(q, NS_RQ_FETCH);
        s_start_fetch(q);
        return;
    }
    if (rc == NS_ERR_PROOF) {
        /* The outputs are not the ones it committed to. */
        s_cancel(q, NULL, true);
        s_restart(q, "sent outputs that do not match its commitment");
        return;
    }
    if (rc != NS_OK) {
        s_fail(q, "cannot run the check on our device: %s", err);
        return;
    }
    if (q->check.mismatched == 0) {
        s_settle(q, &lj);
    } else {
        s_slash(q, &lj);
        s_out_unmap(q);
    }
}

/* Whether to check, then settle or slash, the RESULT now: once the
 * stake confirmed it (docs/PROTOCOL.md, "Confirmation"; at once where
 * nobody can vote), so that a provider forking its chain can never void
 * the RESULT our SETTLE or SLASH names and leave our chain stuck behind
 * it on part of the network. A provider that forked meanwhile (banned)
 * is cancelled and the job moves on; unconfirmed after
 * NS_POLICY_CONFIRM_WAIT_MS (the stake offline), anyway. */
static bool s_result_confirmed(ns_requester_t *q, uint64_t now)
{
    ns_ledger_job_t lj;
    if (ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK ||
        ns_ledger_confirmation(q->ledger, lj.result_id) != NS_CONFIRM_NO)
        return true; /* s_verify says what is wrong with the job */
    ns_account_t prov;
    if (ns_ledger_account(q->ledger, q->winner.provider, &prov) == NS_OK &&
        prov.banned) {
        s_cancel(q, NULL, true);
        s_restart(q, "forked its chain");
        return false;
    }
    if (now - q->phase_ms < NS_POLICY_CONFIRM_WAIT_MS)
        return false;
    ns_warn(NS_MOD_MARKET,
            "event=result_unconfirmed job=%.16s waited_ms=%u action=check",
            q->job_hex, NS_POLICY_CONFIRM_WAIT_MS);
    return true;
}

/* At least one peer, and our ledger agreeing with one of them (or a few
 * seconds of sync). */
static void s_join(ns_requester_t *q, uint64_t now)
{
    /* A new job needs only our free credits for the escrow, which our own
     * ledger knows; a resumed one needs the job's state from the peers. */
    ns_account_t me;
    bool enough =
        !q->o.resume &&
        ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me) == NS_OK &&
        me.free >= q->o.max_price;
    int rc = ns_join_check(&q->join, q->ledger, q->io, enough, now);
    if (rc == NS_ERR_TIMEOUT) {
        char why[1024] = "";
        if (q->io->explain_join)
            q->io->explain_join(q->io->user, why, sizeof why);
        if (why[0])
            s_fail(q, "could not reach any peer: %s", why);
        else
            s_fail(q, "could not reach any peer through the bootstrap "
                      "address");
        return;
    }
    if (rc != 1)
        return;
    ns_ledger_stats_t st;
    ns_ledger_stats(q->ledger, &st);
    s_say(q, "joined: %u peers, ledger at %llu entries",
          q->io->live_peers(q->io->user), (unsigned long long)st.entries);
    s_phase(q, NS_RQ_ANNOUNCE);
}

/* A job that may be on record already: pick it up where the ledger says. */
/* The seq of our latest entry of this type for this job, looked up in
 * our own chain from the head down (a resumed requester did not write
 * it); 0 if not within the last S_RESUME_SCAN entries. */
#define S_RESUME_SCAN 4096
static uint64_t s_find_own(ns_requester_t *q, uint8_t type)
{
    ns_account_t me;
    const uint8_t *self = ns_identity_pk(q->me);
    if (ns_ledger_account(q->ledger, self, &me) != NS_OK)
        return 0;
    for (uint64_t seq = me.seq; seq >= 1 && me.seq - seq < S_RESUME_SCAN;
         seq--) {
        uint8_t *buf = NULL;
        size_t len = 0;
        ns_entry_t e;
        ns_entry_body_t b;
        if (ns_ledger_get(q->ledger, self, seq, &buf, &len) != NS_OK)
            break;
        bool hit = ns_entry_parse(buf, len, q->network_id, &e) == NS_OK &&
                   e.type == type && ns_entry_body_decode(&e, &b) == NS_OK &&
                   memcmp(b.job_id, q->o.job_id, NS_HASH_BYTES) == 0;
        free(buf);
        if (hit)
            return seq;
    }
    return 0;
}

/* An awarded job picked up again: the job is posted on the pre-flight's
 * timing, so the requester that was cut may never have had the verdict of
 * its checks. Take them again: ns_requester_tick takes the verdict (a job
 * that fails them is cancelled), and VERIFY waits for it. */
static void s_resume_sample(ns_requester_t *q)
{
    if (!q->o.no_preflight)
        s_dw_start(q, S_DW_SAMPLE, NS_POLICY_PREFLIGHT_BUDGET_MS);
}

/* --resume, once the ledger is caught up: the job's terms and our own
 * entries from the ledger, then on from where the job stands. */
static void s_resume(ns_requester_t *q)
{
    ns_ledger_job_t lj;
    if (ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK) {
        s_phase(q, NS_RQ_ANNOUNCE); /* never posted */
        return;
    }
    q->ann.deadline_ms = lj.deadline_ms;
    q->o.max_price = q->ann.max_price = lj.max_price;
    q->o.collateral = q->ann.collateral = lj.collateral;
    q->rc.rounds = lj.round;
    if (lj.state == NS_JOB_OPEN || lj.state == NS_JOB_AWARDED)
        q->job_seq = s_find_own(q, NS_ENTRY_JOB);
    if (lj.state == NS_JOB_AWARDED &&
        sodium_is_zero(lj.accept_id, NS_HASH_BYTES)) {
        /* cut between our AWARD and the provider's ACCEPT: it may never
         * have had the AWARDED message; send it again and wait as after
         * an award (not accepted in time: cancel, a new round) */
        memcpy(q->winner.provider, lj.provider, NS_ID_BYTES);
        memcpy(q->rc.provider, lj.provider, NS_ID_BYTES);
        q->award_seq = s_find_own(q, NS_ENTRY_AWARD);
        if (!q->job_seq || !q->award_seq ||
            s_send_awarded(q) == NS_ERR_CORRUPT) {
            s_fail(q, "cannot read our own entries back");
            return;
        }
        s_say(q, "resuming: job awarded, not accepted yet: award sent again");
        s_phase(q, NS_RQ_ACCEPT);
        s_resume_sample(q);
    } else if (lj.state == NS_JOB_AWARDED) {
        memcpy(q->winner.provider, lj.provider, NS_ID_BYTES);
        memcpy(q->rc.provider, lj.provider, NS_ID_BYTES);
        q->award_seq = s_find_own(q, NS_ENTRY_AWARD);
        s_phase(q, NS_RQ_RUNNING);
        s_say(q, "resuming: job already awarded, waiting for its result");
        s_resume_sample(q);
    } else if (lj.state == NS_JOB_SETTLED && !s_find_own(q, NS_ENTRY_SETTLE)) {
        /* not our SETTLE: its provider CLOSEd it past deadline + window
         * (docs/PROTOCOL.md, "Closing"); its outputs never came here */
        char price[NS_CREDITS_TEXT], refund[NS_CREDITS_TEXT];
        memcpy(q->rc.provider, lj.provider, NS_ID_BYTES);
        s_fail(q,
               "job %.16s was closed by its provider past its deadline and "
               "the close window: paid %s credits for a result not checked "
               "here, the other %s credits of the escrow come back as a "
               "credit; no outputs were written",
               q->job_hex, ns_credits_fmt(price, lj.price),
               ns_credits_fmt(refund, lj.escrow - lj.price));
    } else if (lj.state == NS_JOB_SETTLED) {
        memcpy(q->rc.provider, lj.provider, NS_ID_BYTES);
        q->rc.price = lj.price;
        q->rc.refund = lj.escrow - lj.price;
        q->rc.rounds = lj.round;
        q->rc.slashed = lj.slashed;
        s_say(q, "job %.16s was settled before: its receipt", q->job_hex);
        s_phase(q, NS_RQ_DONE);
        q->finished = true;
    } else if (lj.state != NS_JOB_OPEN) {
        s_fail(q, "job %.16s is already cancelled", q->job_hex);
    } else if (!q->job_seq) {
        s_fail(q, "cannot read our own entries back");
    } else {
        /* the estimate again (on the thread), then s_post announces
         * without posting: our JOB entry is in */
        s_say(q, "resuming: job posted, not awarded yet: a new auction");
        q->posted = true;
        s_phase(q, NS_RQ_ANNOUNCE);
        if (q->o.no_preflight)
            s_announce(q);
        else
            s_dw_start(q, S_DW_TIME, NS_POLICY_PREFLIGHT_BUDGET_MS);
    }
}

/* The work estimate from the pre-flight sample's time a unit (when the
 * job came without --work). */
static void s_take_estimate(ns_requester_t *q, uint64_t unit_ns)
{
    /* No --work: the sampled units' time on our device, times the units,
     * at our device's throughput, is the work providers price. */
    if (!q->o.job->work_estimate && unit_ns) {
        double gflops =
            q->dw.gflops > 0.1 ? q->dw.gflops : NS_POLICY_REF_GFLOPS;
        double flops = (double)unit_ns * 1e-9 *
                       (double)ns_job_shard_units(q->o.job) * gflops * 1e9;
        q->ann.work_flops = flops < 1 ? 1 : (uint64_t)flops;
        s_say(q,
              "work estimate from the pre-flight: %.3g GFLOP (%.1f us a "
              "unit here)",
              flops / 1e9, (double)unit_ns / 1000.0);
    }
}

/* The pre-flight's checks found nothing against the job. */
static void s_sample_passed(ns_requester_t *q)
{
    s_say(q, "pre-flight checks passed: its sampled units can be checked "
             "one by one");
}

static void s_post(ns_requester_t *q)
{
    ns_entry_body_t b;
    ns_hash_t id;
    ns_account_t me;
    const uint8_t *self = ns_identity_pk(q->me);
    /* Before any credit moves: does the kernel build and run here (in
     * the sandbox), how long does a unit take, and can the outputs be
     * written where they go (their part files, kept for the fetch; opened
     * once the kernel is known to fit the device, so that a job too large
     * for it reserves no disk)? Whether it can be checked unit by unit
     * (the sample's other runs) is known while the auction and the run go
     * on: ns_requester_tick takes that verdict, and a job that cannot be
     * checked is cancelled before any spot check. */
    char err[PATH_MAX + 128];
    if (q->dw.kind == S_DW_TIME) {
        if (s_dw_take(q) != S_DW_TIME)
            return; /* still building and timing */
        if (q->dw.rc != NS_OK) {
            char why[sizeof q->dw.err + 64];
            s_dw_why(q, "the pre-flight", why, sizeof why);
            s_fail(q, "%s", why);
            return;
        }
        s_take_estimate(q, q->dw.unit_ns);
        /* the checks go on during the auction and the run; their
         * verdict comes before any spot check */
        s_dw_start(q, S_DW_SAMPLE, NS_POLICY_PREFLIGHT_BUDGET_MS);
        if (q->posted) { /* resumed: the JOB entry is in already */
            s_announce(q);
            return;
        }
    } else if (!q->o.no_preflight) {
        s_say(q,
              "pre-flight: building the kernel and timing %u units in "
              "the sandbox",
              NS_POLICY_PREFLIGHT_UNITS);
        s_dw_start(q, S_DW_TIME, NS_POLICY_PREFLIGHT_BUDGET_MS);
        if (q->dw.done) /* it could not start */
            s_post(q);
        return;
    }
    for (uint32_t i = 0; i < q->o.job->n_args; i++)
        if (s_out_path(q, i) &&
            s_out_open(q, i, false, err, sizeof err) != NS_OK) {
            s_fail(q, "%s", err);
            return;
        }
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->o.job_id, NS_HASH_BYTES);
    b.escrow = q->o.max_price;
    b.max_price = q->o.max_price;
    b.collateral = q->o.collateral;
    b.deadline_ms = q->ann.deadline_ms;
    memcpy(b.desc_id, q->o.desc_id, NS_HASH_BYTES);
    memcpy(b.nonce, q->o.nonce, sizeof b.nonce);
    if (s_append(q, NS_ENTRY_JOB, &b, id) != NS_OK) {
        char want[NS_CREDITS_TEXT], have[NS_CREDITS_TEXT];
        if (ns_ledger_account(q->ledger, self, &me) == NS_OK)
            s_fail(q, "cannot lock %s credits of escrow: %s free",
                   ns_credits_fmt(want, q->o.max_price),
                   ns_credits_fmt(have, me.free));
        else
            s_fail(q, "cannot post the job");
        return;
    }
    if (ns_ledger_account(q->ledger, self, &me) == NS_OK)
        q->job_seq = me.seq;
    char escrow[NS_CREDITS_TEXT];
    s_say(q, "escrow of %s credits locked (job entry %llu)",
          ns_credits_fmt(escrow, q->o.max_price),
          (unsigned long long)q->job_seq);
    s_announce(q);
}

static void s_running(ns_requester_t *q, uint64_t now)
{
    ns_ledger_job_t lj;
    if (ns_ledger_job(q->ledger, q->o.job_id, &lj) != NS_OK)
        return;
    if (!sodium_is_zero(lj.result_id, NS_HASH_BYTES)) {
        q->rc.run_ms = now - (q->t_accept_ms ? q->t_accept_ms : q->phase_ms);
        s_say(q,
              "result committed (root %02x%02x%02x%02x...); fetching "
              "outputs",
              lj.root[0], lj.root[1], lj.root[2], lj.root[3]);
        s_phase(q, NS_RQ_FETCH);
        s_start_fetch(q);
        if (q->phase == NS_RQ_FETCH)
            s_fetch_outputs(q);
    } else if (q->io->now_ms(q->io->user) > lj.deadline_ms) {
        s_cancel(q, lj.accept_id, true);
        s_restart(q, "missed the deadline (penalty taken from its "
                     "collateral)");
    } else if (q->o.progress_ticks &&
               (now - q->phase_ms) / 1000 != q->t_last_tick_s) {
        q->t_last_tick_s = (now - q->phase_ms) / 1000;
        s_say(q, "running... %llu s", (unsigned long long)q->t_last_tick_s);
    }
}

/* --timeout-s ran out: end the job so nothing stays locked. */
static void s_give_up(ns_requester_t *q)
{
    char err[256], what[300] = "nothing was posted";
    ns_cancel_result_t res;
    const char *phase = ns_rq_phase_name(q->phase);
    int rc = ns_cancel_job(q->ledger, q->io, ns_identity_pk(q->me), q->o.job_id,
                           &res, err, sizeof err);
    if (rc == NS_OK)
        ns_cancel_describe(&res, what, sizeof what);
    else if (rc != NS_ERR_NOTFOUND)
        snprintf(what, sizeof what, "%s", err);
    s_fail(q, "gave up after %llu s in phase %s; job cancelled: %s",
           (unsigned long long)q->o.timeout_s, phase, what);
}

static bool s_same_digest(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    (void)id;
    const ns_hash_t *digest = u;
    return memcmp(hb->ledger_digest, *digest, NS_HASH_BYTES) == 0;
}

static bool s_inputs_taken(ns_requester_t *q, uint64_t now)
{
    if (!q->slash_by_ref || !q->o.join)
        return true; /* a running node stays up to serve them anyway */
    if (!q->done_wait_ms) {
        q->done_wait_ms = now;
        s_say(q, "waiting for a peer to take the SLASH's inputs (by hash)");
    }
    ns_ledger_stats_t st;
    ns_ledger_stats(q->ledger, &st);
    if (q->io->visit_peers(q->io->user, s_same_digest, st.digest))
        return true;
    return now - q->done_wait_ms > NS_POLICY_SLASH_DATA_WAIT_MS;
}

void ns_requester_tick(ns_requester_t *q, uint64_t now)
{
    if (q->finished)
        return;
    if (q->o.timeout_s && now - q->t_start_ms > q->o.timeout_s * 1000) {
        s_give_up(q);
        return;
    }
    ns_ledger_job_t lj;
    /* Cancelled from outside (`nightshift cancel`, or the same account
     * elsewhere): nothing more to wait for, whatever the phase. */
    if (q->phase >= NS_RQ_BIDDING && q->phase <= NS_RQ_VERIFY &&
        ns_ledger_job(q->ledger, q->o.job_id, &lj) == NS_OK &&
        lj.state == NS_JOB_CANCELLED) {
        s_fail(q, "job %.16s was cancelled (its escrow is refunded)",
               q->job_hex);
        return;
    }
    /* The pre-flight's checks, on since the job was announced (s_post):
     * a kernel that cannot be checked unit by unit ends the job (any
     * award withdrawn, escrow back) before a spot check could blame its
     * provider for it. */
    if (q->dw.kind == S_DW_SAMPLE && q->phase > NS_RQ_ANNOUNCE &&
        q->phase < NS_RQ_DONE && s_dw_take(q) == S_DW_SAMPLE) {
        if (q->dw.rc != NS_OK) {
            char why[sizeof q->dw.err + 64];
            s_dw_why(q, "the pre-flight", why, sizeof why);
            s_cancel(q, NULL, false);
            s_fail(q, "%s", why);
            return;
        }
        s_sample_passed(q);
    }
    if (q->repro_pending || q->dw.kind == S_DW_REPRO) {
        s_repro_tick(q);
        if (q->finished || q->phase == NS_RQ_FAILED)
            return;
    }
    switch (q->phase) {
    case NS_RQ_JOIN:
        s_join(q, now);
        if (q->phase == NS_RQ_ANNOUNCE && q->o.resume)
            s_resume(q);
        break;
    case NS_RQ_ANNOUNCE:
        s_post(q);
        break;
    case NS_RQ_BIDDING:
        /* early once every qualified provider we know has bid (and we
         * have heard from every peer we learned of lately), except
         * after a SLASH: that window is long on purpose, every node
         * re-runs the proof before it reads the announcement */
        if (now - q->phase_ms >= q->ann.bid_window_ms ||
            (q->n_bids > 0 && q->ann.bid_window_ms == q->o.bid_window_ms &&
             q->n_bids >= s_drawn_known(q) &&
             (!q->io->unheard_peers || q->io->unheard_peers(q->io->user) == 0)))
            s_award(q);
        break;
    case NS_RQ_WAITING:
        /* announce again once a provider we know qualifies (its heartbeat
         * says so), at most every NS_POLICY_QUEUE_RETRY_MS, and now and
         * then anyway: one may have joined that we have not heard of */
        if (now - q->phase_ms >= NS_POLICY_QUEUE_RETRY_MS &&
            (s_qualified_known(q) > 0 ||
             now - q->phase_ms >= NS_POLICY_QUEUE_POLL_MS))
            s_announce(q);
        else if (q->io->now_ms(q->io->user) + NS_POLICY_RUN_MIN_MS >=
                 q->ann.deadline_ms)
            s_award(q); /* no bids: fails with the reason */
        break;
    case NS_RQ_CHALLENGE:
        s_challenged(q, now);
        break;
    case NS_RQ_ACCEPT:
        if (ns_ledger_job(q->ledger, q->o.job_id, &lj) == NS_OK &&
            !sodium_is_zero(lj.accept_id, NS_HASH_BYTES)) {
            q->t_accept_ms = now;
            q->rc.match_ms = now - q->t_announce_ms;
            char coll[NS_CREDITS_TEXT];
            s_say(q, "accepted: collateral %s credits locked; sending the job",
                  ns_credits_fmt(coll, lj.collateral));
            s_phase(q, NS_RQ_RUNNING);
        } else if (now - q->phase_ms > NS_POLICY_ACCEPT_MS) {
            s_cancel(q, NULL, true);
            s_restart(q, "did not accept in time");
        }
        break;
    case NS_RQ_RUNNING:
        s_running(q, now);
        break;
    case NS_RQ_FETCH:
        if (now - q->phase_ms > NS_POLICY_FETCH_MS) {
            s_cancel(q, NULL, true);
            s_restart(q, "did not deliver its outputs");
        } else {
            if (q->fetch.in_flight &&
                now - q->chunk_ms > NS_POLICY_FETCH_STALL_MS) {
                /* the provider stopped answering (a dropped connection):
                 * ask again from the first missing chunk, keep the rest */
                ns_fetch_rewind(&q->fetch);
                q->chunk_ms = now;
                ns_debug(NS_MOD_MARKET, "event=fetch_rewind job=%.16s",
                         q->job_hex);
            }
            s_fetch_outputs(q);
        }
        break;
    case NS_RQ_VERIFY:
        if (q->dw.kind == S_DW_CHECK) {
            if (s_dw_take(q) == S_DW_CHECK)
                s_checked(q, q->dw.rc, q->dw.err, q->dw.commit_us);
        } else if (q->dw.kind == S_DW_NONE && /* the pre-flight's verdict */
                   s_result_confirmed(q, now)) {
            s_verify(q);
        }
        break;
    case NS_RQ_DONE:
    case NS_RQ_FAILED:
        /* the SETTLE is durable and handed over; a light peer that
         * slashed with inputs by reference stays until a peer has taken
         * the SLASH (fetched them) */
        if (s_inputs_taken(q, now))
            q->finished = true;
        break;
    }
}

/* ---- life --------------------------------------------------------------- */

ns_requester_t *ns_requester_new(const ns_requester_opts_t *o,
                                 const ns_node_io_t *io, ns_ledger_t *ledger,
                                 ns_wpool_t *pool, const ns_identity_t *me,
                                 const ns_hash_t network_id, int *err)
{
    ns_requester_t *q = calloc(1, sizeof *q);
    if (!q) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    q->o = *o;
    /* no deadline or limit past a year: their milliseconds fit */
    if (q->o.deadline_s > NS_POLICY_MAX_DEADLINE_S)
        q->o.deadline_s = NS_POLICY_MAX_DEADLINE_S;
    if (q->o.timeout_s > NS_POLICY_MAX_DEADLINE_S)
        q->o.timeout_s = NS_POLICY_MAX_DEADLINE_S;
    o = &q->o;
    q->io = io;
    q->ledger = ledger;
    q->pool = pool;
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        q->dw.ro_fds[i] = q->dw.in_fds[i] = -1;
    q->me = me;
    memcpy(q->network_id, network_id, NS_HASH_BYTES);
    ns_buf_init(&q->body);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        q->out_fd[i] = -1;
    ns_challenger_init(&q->chal);
    ns_hex(q->job_hex, o->job_id, NS_HASH_BYTES);
    q->n_items = ns_job_items(o->job);
    q->t_start_ms = io->mono_ms(io->user);

    /* The announcement, fixed for the whole job except round/excluded. */
    memcpy(q->ann.job_id, o->job_id, NS_HASH_BYTES);
    memcpy(q->ann.desc_id, o->desc_id, NS_HASH_BYTES);
    memcpy(q->ann.requester, ns_identity_pk(me), NS_ID_BYTES);
    snprintf(q->ann.endpoint, sizeof q->ann.endpoint, "%s", o->endpoint);
    /* What the buffers need of a device comes from the job, whatever the
     * caller asked: a provider must not accept what it cannot allocate. */
    q->o.reqs.buffer_bytes = q->o.reqs.max_buffer_bytes = 0;
    for (uint32_t i = 0; i < o->job->n_args; i++) {
        const ns_arg_t *a = &o->job->args[i];
        if (a->kind != NS_ARG_IN && a->kind != NS_ARG_OUT)
            continue;
        q->o.reqs.buffer_bytes += a->size;
        if (a->size > q->o.reqs.max_buffer_bytes)
            q->o.reqs.max_buffer_bytes = a->size;
    }
    q->ann.reqs = q->o.reqs;
    q->ann.max_price = o->max_price;
    q->ann.collateral = o->collateral;
    q->ann.work_flops =
        o->job->work_estimate ? o->job->work_estimate : q->n_items * 1000;
    q->ann.n_items = q->n_items;
    for (uint32_t i = 0; i < o->job->n_args; i++) {
        const ns_arg_t *a = &o->job->args[i];
        if (a->kind != NS_ARG_IN)
            continue;
        q->ann.input_bytes += a->size;
        /* named by content, once each: a bidder that holds one says so */
        uint32_t k = 0;
        while (k < q->ann.n_inputs &&
               memcmp(q->ann.inputs[k].hash, a->hash, NS_HASH_BYTES))
            k++;
        if (k == q->ann.n_inputs && k < NS_MAX_ANN_INPUTS) {
            memcpy(q->ann.inputs[k].hash, a->hash, NS_HASH_BYTES);
            q->ann.inputs[k].size = a->size;
            q->ann.n_inputs++;
        }
    }
    q->ann.bid_window_ms = o->bid_window_ms;
    q->ann.deadline_ms = io->now_ms(io->user) + o->deadline_s * 1000;
    if (o->resume) {
        ns_ledger_job_t lj;
        if (ns_ledger_job(ledger, o->job_id, &lj) == NS_OK) {
            q->ann.deadline_ms = lj.deadline_ms;
            q->o.max_price = q->ann.max_price = lj.max_price;
            q->o.collateral = q->ann.collateral = lj.collateral;
        }
    }
    s_phase(q, NS_RQ_JOIN);
    ns_join_start(&q->join, q->t_start_ms);
    if (!o->join) {
        s_phase(q, NS_RQ_ANNOUNCE);
        if (o->resume)
            s_resume(q);
    }
    return q;
}

void ns_requester_destroy(ns_requester_t **qp)
{
    if (!qp || !*qp)
        return;
    ns_requester_t *q = *qp;
    s_dw_abort(q);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (q->dw.in_fds[i] >= 0)
            close(q->dw.in_fds[i]);
    ns_fetch_release(&q->fetch);
    s_out_close(q);
    free(q->leaves);
    ns_challenger_release(&q->chal);
    ns_buf_release(&q->body);
    free(q);
    *qp = NULL;
}

bool ns_requester_busy(const ns_requester_t *q)
{
    return q->dw.kind != S_DW_NONE && !q->dw.done;
}

bool ns_requester_finished(const ns_requester_t *q)
{
    return q->finished;
}

void ns_requester_stop(ns_requester_t *q, const char *why)
{
    if (q->phase != NS_RQ_DONE && q->phase != NS_RQ_FAILED)
        s_fail(q, "%s", why);
    q->finished = true;
}

const ns_receipt_t *ns_requester_receipt(const ns_requester_t *q)
{
    return &q->rc;
}
