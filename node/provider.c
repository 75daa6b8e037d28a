/* provider.c - bids, accepts, fetches, runs, commits, serves. */
#include "nightshift/provider.h"

#include "nightshift/histo.h"
#include "nightshift/log.h"
#include "nightshift/market.h"
#include "nightshift/policy.h"
#include "nightshift/prover.h"
#include "nightshift/transfer.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_JOBS NS_POLICY_PROVIDER_JOBS

typedef enum {
    PJ_FREE = 0,
    PJ_BID,   /* bid sent, waiting for an award */
    PJ_FETCH, /* accepted: descriptor and inputs coming in */
    PJ_RUN,   /* in the worker */
    PJ_HOLD,  /* fault slow: result held back */
    PJ_SERVE, /* RESULT written: outputs served */
} s_state_t;

typedef struct {
    s_state_t state;
    ns_announce_t ann;
    ns_bid_t bid;
    uint64_t since_ms; /* monotonic, entered the state */
    ns_hash_t award_id, accept_id;
    bool have_award;        /* award_id is the ledger's award to us */
    bool award_wait;        /* AWARDED came before the ledger could show it,
                               or the stake has not confirmed it yet */
    uint64_t award_wait_ms; /* monotonic: give up waiting then */
    uint64_t confirm_ms;    /* monotonic: accept unconfirmed from then */
    ns_fetch_t fetch; /* descriptor, then the inputs, from the requester */
    /* Inputs received into the blob store (ns_blobs_partial): the locked
     * partial file while it fills, then the blob mapped read-only. */
    bool spool[NS_MAX_ARGS]; /* part_fd[i] is open */
    int part_fd[NS_MAX_ARGS];
    /* an input that is a blob, open read-only: the worker maps it from
     * this descriptor instead of reading it through its socket */
    bool file[NS_MAX_ARGS]; /* in_fd[i] is open */
    int in_fd[NS_MAX_ARGS];
    const uint8_t *mapped[NS_MAX_ARGS];
    size_t mapped_len[NS_MAX_ARGS];
    uint64_t chunk_ms; /* monotonic: the last CHUNK taken (PJ_FETCH) */
    uint32_t resumed;  /* bit i: input i started from a part file */
    bool have_job;
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    ns_worker_result_t res;
    ns_hash_t root;
    uint8_t statement[NS_SIG_BYTES];
    uint32_t kept;       /* bit i: output i put in the blob store */
    uint64_t release_ms; /* PJ_HOLD until */
    uint32_t device;     /* the offer's device the bid was for */
    int w;               /* PJ_RUN: index in workers */
} s_job_t;

/* Why an announcement got no bid from us (status "not_bid", the metric
 * nightshift_provider_not_bid_total{reason}). */
enum {
    S_NB_NOT_DRAWN, /* the job's bidder draw asked others */
    S_NB_NO_STAKE,  /* we hold no stake at all */
    S_NB_STAKE,     /* our stake is below the collateral asked */
    S_NB_DEVICE,    /* no device of ours fits (memory, type, OpenCL C,
                       buffers) */
    S_NB_REGION,    /* another region asked */
    S_NB_PRICE,     /* our price is over its ceiling */
    S_NB_BUSY,      /* every slot busy, or our storage unwritable */
    S_NB_COUNT
};
static const char *const s_nb_names[S_NB_COUNT] = {
    "not_drawn", "no_stake", "stake", "device", "region", "price", "busy"};

struct ns_provider {
    ns_provider_opts_t o;
    const ns_node_io_t *io;
    uint8_t self[NS_ID_BYTES];
    /* One worker a slot (up to NS_POLICY_MAX_WORKERS), worker i on device
     * i % n_devices, each started when first needed: jobs run at once
     * side by side, on every device. */
    ns_worker_t *workers[NS_POLICY_MAX_WORKERS];
    uint32_t n_workers;
    int prover_w; /* the worker of the challenge in progress */
    s_job_t jobs[S_MAX_JOBS];
    ns_buf_t body;
    struct {
        uint64_t announces, bids, awards, accepts, results, failed;
        uint64_t served_bytes, refused_requester, claims, table_full, closed;
        uint64_t inputs_cached, stopped, no_storage;
        uint64_t input_bytes;   /* input bytes received from requesters */
        uint64_t resumed_bytes; /* found in partial files, not fetched */
        uint64_t rewinds;       /* stalled transfers asked again */
        uint64_t refetched;     /* resumed inputs that failed, fetched whole */
        uint64_t bids_lost;     /* expired unanswered, or replaced */
        uint64_t not_bid[S_NB_COUNT]; /* announcements passed over, why */
        ns_histo_t run;         /* worker wall time of each result */
    } stats;
    bool storage_refusing; /* said so for this outage */
    ns_account_t seen;     /* our account at the last claim tick */
    bool have_seen;
    uint64_t close_ms; /* monotonic: the last look for awards to close */
    ns_hash_t close_refused[8]; /* jobs whose CLOSE the ledger refused */
    uint32_t close_refused_next;
    ns_prover_t prover; /* hardware challenges (prover.h) */
};

/* ---- fault specs -----------------------------------------------------------
 */

int ns_fault_parse(const char *spec, ns_fault_t *f)
{
    memset(f, 0, sizeof *f);
    char *end = NULL;
    if (strncmp(spec, "lazy=", 5) == 0) {
        f->lazy = strtod(spec + 5, &end);
        return *end || !(f->lazy > 0 && f->lazy <= 1) ? NS_ERR_INVAL : NS_OK;
    }
    if (strncmp(spec, "slow=", 5) == 0) {
        f->slow = strtod(spec + 5, &end);
        return *end || !(f->slow >= 1 && f->slow <= 1000) ? NS_ERR_INVAL
                                                          : NS_OK;
    }
    if (strcmp(spec, "garbage") == 0) {
        f->garbage = true;
        return NS_OK;
    }
    if (strcmp(spec, "silent") == 0) {
        f->silent = true;
        return NS_OK;
    }
    if (strcmp(spec, "fail") == 0) {
        f->fail = true;
        return NS_OK;
    }
    return NS_ERR_INVAL;
}

/* ---- helpers ----------------------------------------------------------------
 */

static void s_job_clear(s_job_t *j)
{
    ns_fetch_release(&j->fetch);
    for (int i = 0; i < NS_MAX_ARGS; i++) {
        if (j->spool[i])
            close(j->part_fd[i]);
        if (j->file[i])
            close(j->in_fd[i]);
        ns_blobs_unmap(j->mapped[i], j->mapped_len[i]);
    }
    if (j->have_job)
        ns_job_release(&j->job);
    ns_worker_result_release(&j->res);
    memset(j, 0, sizeof *j);
}

static const char *s_state_name(s_state_t st)
{
    static const char *const names[] = {"free", "bid",  "fetch",
                                        "run",  "hold", "serve"};
    return st < sizeof names / sizeof names[0] ? names[st] : "?";
}

static void s_set(ns_provider_t *p, s_job_t *j, s_state_t st)
{
    j->state = st;
    j->since_ms = p->io->mono_ms(p->io->user);
}

static s_job_t *s_find(ns_provider_t *p, const ns_hash_t job_id)
{
    for (int i = 0; i < S_MAX_JOBS; i++)
        if (p->jobs[i].state != PJ_FREE &&
            memcmp(p->jobs[i].ann.job_id, job_id, NS_HASH_BYTES) == 0)
            return &p->jobs[i];
    return NULL;
}

static uint32_t s_busy(const ns_provider_t *p)
{
    uint32_t n = 0;
    for (int i = 0; i < S_MAX_JOBS; i++)
        n += p->jobs[i].state == PJ_FETCH || p->jobs[i].state == PJ_RUN ||
             p->jobs[i].state == PJ_HOLD;
    return n;
}

static void s_job_hex(char out[17], const ns_hash_t id)
{
    ns_hex(out, id, 8);
}

static void s_update_offer(ns_provider_t *p)
{
    ns_account_t a;
    uint64_t stake = 0;
    if (ns_ledger_account(p->o.ledger, p->self, &a) == NS_OK)
        stake = a.staked;
    uint32_t busy = s_busy(p);
    bool writable = ns_ledger_write_state(p->o.ledger, NULL, NULL) == NS_OK;
    p->io->set_offer(p->io->user, stake,
                     writable && busy < p->o.cfg->slots ? p->o.cfg->slots - busy
                                                        : 0);
}

/* No new work while the ledger cannot write: an ACCEPT or RESULT we could
 * not store would cost the requester a round and us a penalty. Said once
 * per outage. */
static bool s_storage_ok(ns_provider_t *p)
{
    const char *why = "";
    if (ns_ledger_write_state(p->o.ledger, &why, NULL) == NS_OK) {
        p->storage_refusing = false;
        return true;
    }
    p->stats.no_storage++;
    if (!p->storage_refusing)
        ns_warn(NS_MOD_MARKET,
                "event=no_bid reason=storage detail=\"the ledger cannot "
                "write: %s\" action=\"no new work until it can\"",
                why);
    p->storage_refusing = true;
    return false;
}

/* One line of text for a log value or a failure reason: newlines and
 * other control characters become spaces, double quotes single ones. */
static void s_one_line(char *out, size_t cap, const char *in)
{
    size_t n = 0;
    for (; *in && n + 1 < cap; in++) {
        char c = *in;
        if ((unsigned char)c < 0x20 || c == 0x7f)
            c = ' ';
        else if (c == '"')
            c = '\'';
        if (c == ' ' && n > 0 && out[n - 1] == ' ')
            continue;
        out[n++] = c;
    }
    out[n] = '\0';
}

/* What kind of failure a worker's status and text describe. */
static uint32_t s_fail_kind(int status, const char *err)
{
    switch (status) {
    case NS_ERR_TIMEOUT:
        return NS_FAIL_TIMEOUT;
    case NS_ERR_NOMEM:
    case NS_ERR_TOOBIG:
        return NS_FAIL_MEMORY;
    case NS_ERR_INVAL:
    case NS_ERR_NOTFOUND:
    case NS_ERR_VERSION:
        return NS_FAIL_ARGS;
    case NS_ERR_CORRUPT:
        return NS_FAIL_INPUT;
    case NS_ERR_OPENCL:
        if (strstr(err, "build failed"))
            return NS_FAIL_BUILD;
        if (strstr(err, "clSetKernelArg") || strstr(err, "arguments"))
            return NS_FAIL_ARGS;
        if (strstr(err, "crashed"))
            return NS_FAIL_CRASH;
        return NS_FAIL_OTHER;
    default:
        return NS_FAIL_OTHER;
    }
}

/* The job failed here: log it, tell the requester at once when we had
 * accepted it (a signed FAILED), free the slot. */
static void s_fail_as(ns_provider_t *p, s_job_t *j, uint32_t kind,
                      const char *why)
{
    char jid[17];
    ns_failure_t f;
    memset(&f, 0, sizeof f);
    s_job_hex(jid, j->ann.job_id);
    s_one_line(f.reason, sizeof f.reason, why);
    bool accepted =
        j->state == PJ_FETCH || j->state == PJ_RUN || j->state == PJ_HOLD;
    int sent = NS_ERR_STATE;
    if (accepted) {
        memcpy(f.job_id, j->ann.job_id, NS_HASH_BYTES);
        memcpy(f.award_id, j->award_id, NS_HASH_BYTES);
        f.kind = kind;
        f.timestamp_ms = p->io->now_ms(p->io->user);
        ns_failure_sign(&f, p->o.me, p->o.network_id);
        sent = ns_failure_encode(&f, &p->body);
        if (sent == NS_OK)
            sent = p->io->send(p->io->user, j->ann.requester, NS_MSG_MKT_FAILED,
                               p->body.data, p->body.len);
    }
    ns_warn(NS_MOD_MARKET,
            "event=job_failed job=%s kind=%s reported=%s reason=\"%s\"", jid,
            ns_fail_kind_name(kind),
            !accepted       ? "no"
            : sent == NS_OK ? "yes"
                            : ns_errname(sent),
            f.reason);
    p->stats.failed++;
    s_job_clear(j);
    s_update_offer(p);
}

static void s_fail(ns_provider_t *p, s_job_t *j, const char *why)
{
    s_fail_as(p, j, NS_FAIL_OTHER, why);
}

/* ---- input locality (market.h) ------------------------------------------ */

typedef struct {
    int fd[NS_MAX_ANN_INPUTS];
} s_held_files_t;

static int s_held_read(void *u, uint32_t i, uint64_t off, uint8_t *buf,
                       size_t n)
{
    const s_held_files_t *f = u;
    ssize_t r = pread(f->fd[i], buf, n, (off_t)off);
    return r == (ssize_t)n ? NS_OK : NS_ERR_IO;
}

/* Which of the announced inputs our blob store holds, and the proof of it
 * (a few pieces of each, read from the files). */
static void s_held(ns_provider_t *p, const ns_announce_t *a, ns_bid_ext_t *held)
{
    if (!p->o.blobs || a->n_inputs == 0)
        return;
    s_held_files_t f;
    for (uint32_t i = 0; i < a->n_inputs; i++) {
        uint64_t size = 0;
        if (ns_blobs_open_ro(p->o.blobs, a->inputs[i].hash, &f.fd[i], &size) ==
                NS_OK &&
            size != a->inputs[i].size) {
            close(f.fd[i]);
            f.fd[i] = -1;
        }
        if (f.fd[i] >= 0)
            held->mask |= UINT32_C(1) << i;
    }
    if (held->mask && ns_held_proof(a, ns_identity_pk(p->o.me), held->mask,
                                    s_held_read, &f, held->proof) != NS_OK)
        held->mask = 0;
    for (uint32_t i = 0; i < a->n_inputs; i++)
        if (f.fd[i] >= 0)
            close(f.fd[i]);
}

/* Keep output i in the blob store by its hash, so that a job naming it
 * as an input (a pipeline's next step) finds it here and our bid for it
 * says so. Done once the requester has fetched the output's last chunk:
 * the hash and the write then overlap its spot check, not its fetch.
 * The bytes are content-addressed: a wrong output kept is only a blob
 * nobody asks for. */
static void s_keep_output(ns_provider_t *p, s_job_t *j, uint32_t i)
{
    const ns_arg_t *a = &j->job.args[i];
    if (!p->o.blobs || (j->kept >> i & 1) || !j->res.outputs[i] ||
        a->size > NS_POLICY_KEEP_OUTPUT_MAX)
        return;
    j->kept |= UINT32_C(1) << i;
    ns_hash_t id;
    int rc = ns_blobs_keep(p->o.blobs, j->res.outputs[i], a->size, id);
    if (rc != NS_OK && rc != NS_ERR_EXISTS)
        ns_debug(NS_MOD_MARKET, "event=output_keep_failed error=%s",
                 ns_strerror(rc));
}

/* ---- bidding
 * ------------------------------------------------------------------ */

static int s_pick_worker(const ns_provider_t *p, uint32_t dev);

static int s_on_job(ns_provider_t *p, const ns_node_msg_t *m)
{
    ns_announce_t a;
    int rc = ns_announce_decode(m->body, m->len, &a);
    if (rc != NS_OK)
        return rc;
    if (memcmp(a.requester, m->sender, NS_ID_BYTES))
        return NS_ERR_INVAL; /* only the requester announces its job */
    p->stats.announces++;
    s_job_t *old = s_find(p, a.job_id);
    if (old && old->state == PJ_BID && old->ann.round < a.round) {
        s_job_clear(old); /* a new round: bid again */
        p->stats.bids_lost++;
    } else if (old)
        return NS_OK;
    if (memcmp(a.requester, p->self, NS_ID_BYTES) == 0 ||
        a.deadline_ms <= p->io->now_ms(p->io->user) || p->o.n_devices == 0)
        return NS_OK;
    for (uint32_t e = 0; e < a.n_excluded; e++)
        if (memcmp(a.excluded[e], p->self, NS_ID_BYTES) == 0)
            return NS_OK;
    /* asked only when drawn (market.h, "bids from a bounded set") */
    if (!ns_bid_drawn(a.job_id, a.round, p->self, a.draw)) {
        p->stats.not_bid[S_NB_NOT_DRAWN]++;
        return NS_OK;
    }
    if (s_busy(p) >= p->o.cfg->slots || !s_storage_ok(p)) {
        p->stats.not_bid[S_NB_BUSY]++;
        return NS_OK;
    }
    ns_account_t req, me;
    if (ns_ledger_account(p->o.ledger, a.requester, &req) != NS_OK ||
        ns_ledger_account(p->o.ledger, p->self, &me) != NS_OK)
        return NS_OK;
    if (!ns_requester_acceptable(&req)) {
        p->stats.refused_requester++;
        char jid[17], who[NS_ID_SHORT_LEN + 1];
        s_job_hex(jid, a.job_id);
        ns_id_short(who, a.requester);
        ns_info(NS_MOD_MARKET,
                "event=refused_requester job=%s requester=%s reason=\"%s\" "
                "posted=%u settled=%u",
                jid, who,
                req.banned ? "banned" : "posts jobs and does not settle them",
                req.jobs_posted, req.jobs_settled_as_requester);
        return NS_OK;
    }
    /* load pricing: each busy slot adds load_price_pct to the price */
    uint64_t price = p->o.cfg->price + p->o.cfg->price *
                                           p->o.cfg->load_price_pct *
                                           s_busy(p) / 100;
    ns_offer_t offer = {p->o.devices,    p->o.n_devices, price, me.staked, 1,
                        p->o.cfg->region};
    uint32_t dev = 0;
    uint32_t miss = ns_reqs_check(&a.reqs, &offer, a.collateral, a.max_price,
                                  a.work_flops, &dev);
    if (miss) {
        int why = (miss & NS_REQ_STAKE)
                      ? (me.staked ? S_NB_STAKE : S_NB_NO_STAKE)
                  : (miss & NS_REQ_REGION) ? S_NB_REGION
                  : (miss & NS_REQ_PRICE)  ? S_NB_PRICE
                  : (miss & NS_REQ_SLOTS)  ? S_NB_BUSY
                                           : S_NB_DEVICE;
        p->stats.not_bid[why]++;
        return NS_OK;
    }
    /* Of the devices that qualify, one with a free worker: several jobs
     * spread over several devices. */
    for (uint32_t d = 0; d < p->o.n_devices; d++) {
        ns_offer_t one = offer;
        one.devices = &p->o.devices[d];
        one.n_devices = 1;
        if (s_pick_worker(p, d) >= 0 &&
            ns_reqs_check(&a.reqs, &one, a.collateral, a.max_price,
                          a.work_flops, NULL) == 0) {
            dev = d;
            break;
        }
    }
    /* what we are now, for the requester's near-ties: free (a fresher
     * word than our last heartbeat) and holding some of its inputs */
    ns_bid_ext_t ext;
    memset(&ext, 0, sizeof ext);
    ext.present = true;
    ext.free_slots =
        p->o.cfg->slots > s_busy(p) ? p->o.cfg->slots - s_busy(p) : 0;
    s_held(p, &a, &ext);
    s_job_t *j = NULL, *oldest_bid = NULL;
    for (int i = 0; i < S_MAX_JOBS && !j; i++) {
        if (p->jobs[i].state == PJ_FREE)
            j = &p->jobs[i];
        else if (p->jobs[i].state == PJ_BID &&
                 (!oldest_bid || p->jobs[i].since_ms < oldest_bid->since_ms))
            oldest_bid = &p->jobs[i];
    }
    if (!j && oldest_bid) { /* an unanswered bid is the cheapest to drop */
        s_job_clear(oldest_bid);
        p->stats.bids_lost++;
        j = oldest_bid;
    }
    if (!j) {
        p->stats.table_full++;
        ns_warn(NS_MOD_MARKET, "event=no_bid reason=job_table_full size=%d",
                S_MAX_JOBS);
        return NS_OK;
    }
    memset(j, 0, sizeof *j);
    j->ann = a;
    j->device = dev;
    memcpy(j->bid.job_id, a.job_id, NS_HASH_BYTES);
    j->bid.price = ns_price_quote(price, a.work_flops, p->o.devices[dev].gflops,
                                  &j->bid.est_ms);
    j->bid.timestamp_ms = p->io->now_ms(p->io->user);
    ns_bid_sign(&j->bid, p->o.me, p->o.network_id);
    rc = p->io->dial(p->io->user, a.requester, a.endpoint);
    (void)rc; /* NS_ERR_EXISTS is fine; a failed dial fails the send */
    if (ns_bid_encode(&j->bid, &ext, &p->body) != NS_OK ||
        p->io->send(p->io->user, a.requester, NS_MSG_MKT_BID, p->body.data,
                    p->body.len) != NS_OK) {
        memset(j, 0, sizeof *j);
        return NS_OK;
    }
    s_set(p, j, PJ_BID);
    p->stats.bids++;
    char jid[17];
    s_job_hex(jid, a.job_id);
    ns_info(NS_MOD_MARKET,
            "event=bid job=%s price=%llu est_ms=%llu free=%u held_bytes=%llu",
            jid, (unsigned long long)j->bid.price,
            (unsigned long long)j->bid.est_ms, ext.free_slots,
            (unsigned long long)ns_held_bytes(&a, ext.mask));
    return NS_OK;
}

/* ---- award -> accept -> fetch -------------------------------------------- */

static void s_start_run(ns_provider_t *p, s_job_t *j);

static void s_fetch_more(ns_provider_t *p, s_job_t *j)
{
    if (ns_fetch_pump(&j->fetch, p->io->send, p->io->user) != NS_OK)
        ns_debug(NS_MOD_MARKET, "event=fetch_send_failed");
}

/* A requester that forked its chain (banned) may void its AWARD: the job
 * is given up (true). */
static bool s_requester_forked(ns_provider_t *p, s_job_t *j)
{
    ns_account_t req;
    if (ns_ledger_account(p->o.ledger, j->ann.requester, &req) != NS_OK ||
        !req.banned)
        return false;
    j->award_wait = false;
    s_fail(p, j, "its requester forked its chain: award not accepted");
    return true;
}

/* Whether to accept the AWARD award_id now: once the stake confirmed it
 * (docs/PROTOCOL.md, "Confirmation"; at once where nobody can vote), so
 * that a requester forking its chain can never void an AWARD our ACCEPT
 * names and leave our chain stuck behind it on part of the network. Not
 * at all when the requester forked (banned); unconfirmed after
 * NS_POLICY_CONFIRM_WAIT_MS (the stake offline), anyway. */
static bool s_award_confirmed(ns_provider_t *p, s_job_t *j,
                              const ns_hash_t award_id, uint64_t now)
{
    if (ns_ledger_confirmation(p->o.ledger, award_id) != NS_CONFIRM_NO)
        return true;
    if (s_requester_forked(p, j))
        return false;
    if (!j->confirm_ms)
        j->confirm_ms = now + NS_POLICY_CONFIRM_WAIT_MS;
    if (now < j->confirm_ms) {
        j->award_wait = true; /* the tick asks again */
        return false;
    }
    char jid[17];
    s_job_hex(jid, j->ann.job_id);
    ns_warn(NS_MOD_MARKET,
            "event=award_unconfirmed job=%s waited_ms=%u action=accept", jid,
            NS_POLICY_CONFIRM_WAIT_MS);
    return true;
}

/* Accept the award once the ledger shows it, waiting for it a moment
 * (NS_POLICY_AWARD_WAIT_MS) when the requester's chain is behind here,
 * and for the stake to confirm it. */
static void s_try_accept(ns_provider_t *p, s_job_t *j, uint64_t now)
{
    int rc;
    ns_ledger_job_t lj;
    if (ns_ledger_job(p->o.ledger, j->ann.job_id, &lj) != NS_OK ||
        lj.state != NS_JOB_AWARDED ||
        memcmp(lj.provider, p->self, NS_ID_BYTES)) {
        /* The requester's chain may lack entries we have not had yet (a
         * provider that just joined, several jobs of one requester in a
         * row): gossip and sync bring them within moments. Or a fork of
         * the requester's voided the AWARD. */
        if (s_requester_forked(p, j))
            return;
        if (!j->award_wait || !j->award_wait_ms) {
            j->award_wait = true;
            j->award_wait_ms = now + NS_POLICY_AWARD_WAIT_MS;
        } else if (now >= j->award_wait_ms) {
            j->award_wait = false;
            s_fail(p, j, "award not in the ledger");
        }
        return;
    }
    if (!s_award_confirmed(p, j, lj.award_id, now))
        return;
    j->award_wait = false;
    p->stats.awards++;
    memcpy(j->award_id, lj.award_id, NS_HASH_BYTES);
    j->have_award = true;
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, j->ann.job_id, NS_HASH_BYTES);
    memcpy(b.ref_id, lj.award_id, NS_HASH_BYTES);
    rc = p->io->append(p->io->user, NS_ENTRY_ACCEPT, &b, j->accept_id);
    if (rc != NS_OK) {
        char why[96];
        snprintf(why, sizeof why, "accept refused by the ledger: %s",
                 ns_errname(rc));
        s_fail(p, j, why);
        return;
    }
    p->stats.accepts++;
    s_set(p, j, PJ_FETCH);
    s_update_offer(p);
    char jid[17];
    s_job_hex(jid, j->ann.job_id);
    ns_info(NS_MOD_MARKET, "event=accepted job=%s price=%llu collateral=%llu",
            jid, (unsigned long long)lj.price,
            (unsigned long long)lj.collateral);
    ns_fetch_init(&j->fetch, j->ann.job_id, j->ann.requester,
                  NS_POLICY_FETCH_WINDOW);
    j->chunk_ms = now;
    if (ns_fetch_add(&j->fetch, NS_BLOB_DESCRIPTOR, NULL, 0, NS_MAX_JOB_MSG) !=
        NS_OK) {
        s_fail(p, j, "out of memory");
        return;
    }
    s_fetch_more(p, j);
    return;
}

static int s_on_awarded(ns_provider_t *p, const ns_node_msg_t *m)
{
    ns_awarded_t aw;
    int rc = ns_awarded_decode(m->body, m->len, &aw);
    if (rc != NS_OK)
        return rc;
    s_job_t *j = s_find(p, aw.job_id);
    if (!j || j->state != PJ_BID ||
        memcmp(m->sender, j->ann.requester, NS_ID_BYTES))
        return NS_OK; /* not ours any more, or not from its requester */
    /* The requester's JOB and AWARD entries, in case gossip is behind. */
    (void)ns_ledger_ingest(p->o.ledger, aw.job_entry, aw.job_entry_len, NULL,
                           NULL);
    (void)ns_ledger_ingest(p->o.ledger, aw.award_entry, aw.award_entry_len,
                           NULL, NULL);
    if (ns_ledger_commit(p->o.ledger) != NS_OK)
        return NS_ERR_IO;
    s_try_accept(p, j, p->io->mono_ms(p->io->user));
    return NS_OK;
}

/* The input descriptors s_keep_file kept: a job in SERVE (outputs kept
 * up to NS_POLICY_RETAIN_MS) would otherwise hold them for minutes, two
 * a job. */
static void s_drop_files(s_job_t *j)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        if (j->file[i]) {
            close(j->in_fd[i]);
            j->file[i] = false;
        }
}

/* Input i of j is blob hash in the store: keep it open read-only for
 * the worker (ns_worker_submit_files); without it, it goes through the
 * worker's socket. */
static void s_keep_file(ns_provider_t *p, s_job_t *j, uint32_t i)
{
    int fd = -1;
    uint64_t size = 0;
    if (j->file[i] ||
        ns_blobs_open_ro(p->o.blobs, j->job.args[i].hash, &fd, &size) != NS_OK)
        return;
    if (size != j->job.args[i].size) {
        close(fd);
        return;
    }
    j->in_fd[i] = fd;
    j->file[i] = true;
}

/* The descriptor is here: check it and queue the inputs. */
static int s_descriptor_done(ns_provider_t *p, s_job_t *j)
{
    char err[256];
    const ns_fetch_blob_t *d = ns_fetch_blob(&j->fetch, NS_BLOB_DESCRIPTOR);
    ns_mpr_t r;
    ns_hash_t id;
    ns_mpr_init(&r, d->data, d->total);
    if (ns_job_read(&r, &j->job, err, sizeof err) != NS_OK ||
        ns_mpr_end(&r) != NS_OK) {
        s_fail(p, j, "descriptor does not decode");
        return NS_ERR_INVAL;
    }
    j->have_job = true;
    if (ns_job_id(&j->job, id) != NS_OK ||
        memcmp(id, j->ann.desc_id, NS_HASH_BYTES)) {
        s_fail(p, j, "descriptor does not hash to the job id");
        return NS_ERR_INVAL;
    }
    for (uint32_t i = 0; i < j->job.n_args; i++) {
        const ns_arg_t *a = &j->job.args[i];
        if (a->kind != NS_ARG_IN)
            continue;
        /* an input we hold already (the same weights for many jobs) is
         * not fetched again; it is mapped, not read into the heap */
        const uint8_t *data = NULL;
        size_t len = 0;
        if (p->o.blobs &&
            ns_blobs_map(p->o.blobs, a->hash, &data, &len) == NS_OK) {
            if (len == a->size) {
                j->mapped[i] = data;
                j->mapped_len[i] = len;
                j->inputs[i].data = data;
                j->inputs[i].len = len;
                j->inputs[i].verified = true; /* the store checked it */
                p->stats.inputs_cached++;
                s_keep_file(p, j, i);
                continue;
            }
            ns_blobs_unmap(data, len);
        }
        /* received into the store as it arrives, hashed on the way,
         * resumed from what a cut transfer left */
        int fd = -1, rc = p->o.blobs ? ns_blobs_partial(p->o.blobs, a->hash,
                                                        a->size, &fd)
                                     : NS_ERR_NOTFOUND;
        if (rc == NS_OK) {
            rc = ns_fetch_add_file(&j->fetch, NS_BLOB_INPUT(i), fd, a->size,
                                   a->hash);
            if (rc == NS_OK) {
                j->spool[i] = true;
                j->part_fd[i] = fd;
                const ns_fetch_blob_t *fb =
                    ns_fetch_blob(&j->fetch, NS_BLOB_INPUT(i));
                if (fb->resumed) {
                    j->resumed |= 1u << i;
                    char jid[17];
                    s_job_hex(jid, j->ann.job_id);
                    p->stats.resumed_bytes += fb->resumed;
                    ns_info(NS_MOD_MARKET,
                            "event=input_resumed job=%s arg=%u have=%llu "
                            "size=%llu",
                            jid, i, (unsigned long long)fb->resumed,
                            (unsigned long long)a->size);
                }
                continue;
            }
            close(fd);
        }
        if (rc == NS_ERR_IO)
            ns_warn(NS_MOD_MARKET,
                    "event=input_spool_failed arg=%u error=\"cannot write "
                    "to the blob store (%s)\" action=in_memory",
                    i, strerror(errno));
        if (ns_fetch_add(&j->fetch, NS_BLOB_INPUT(i), NULL, a->size, 0) !=
            NS_OK) {
            s_fail(p, j, "out of memory for inputs");
            return NS_ERR_NOMEM;
        }
    }
    return NS_OK;
}

/* Input blob b is complete: check it against the descriptor's hash. */
static int s_input_done(ns_provider_t *p, s_job_t *j, uint32_t arg)
{
    const ns_fetch_blob_t *in = ns_fetch_blob(&j->fetch, NS_BLOB_INPUT(arg));
    if (j->spool[arg]) {
        /* hashed as it arrived (the transfer refused it otherwise): make
         * it the blob, and hand the worker its pages from the file */
        if (ns_blobs_complete(p->o.blobs, j->job.args[arg].hash, in->total) !=
            NS_OK)
            ns_warn(NS_MOD_MARKET, "event=input_cache_failed error=rename");
        else
            s_keep_file(p, j, arg);
        const uint8_t *m = NULL;
        int rc = ns_blobs_map_fd(j->part_fd[arg], in->total, &m);
        close(j->part_fd[arg]);
        j->spool[arg] = false;
        for (uint32_t k = 0; k < j->fetch.n_blobs; k++)
            if (j->fetch.blobs[k].blob == NS_BLOB_INPUT(arg))
                j->fetch.blobs[k].fd = -1; /* closed: never touched again */
        if (rc != NS_OK) {
            s_fail(p, j, "cannot map the received input");
            return rc;
        }
        j->mapped[arg] = m;
        j->mapped_len[arg] = in->total;
        j->inputs[arg].data = m;
        j->inputs[arg].len = in->total;
        j->inputs[arg].verified = true;
        return NS_OK;
    }
    ns_hash_t h;
    ns_hash(h, in->data, in->total);
    if (memcmp(h, j->job.args[arg].hash, NS_HASH_BYTES)) {
        s_fail_as(p, j, NS_FAIL_INPUT, "input does not match its hash");
        return NS_ERR_CORRUPT;
    }
    j->inputs[arg].data = in->data;
    j->inputs[arg].len = in->total;
    j->inputs[arg].verified = true;
    /* kept for the next job that names it (bounded store, LRU) */
    if (p->o.blobs) {
        int rc = ns_blobs_put(p->o.blobs, j->job.args[arg].hash, in->data,
                              in->total);
        if (rc != NS_OK && rc != NS_ERR_TOOBIG)
            ns_warn(NS_MOD_MARKET, "event=input_cache_failed error=%s",
                    ns_errname(rc));
    }
    return NS_OK;
}

static int s_on_chunk(ns_provider_t *p, const ns_node_msg_t *m)
{
    ns_chunk_t c;
    int rc = ns_chunk_decode(m->body, m->len, &c), done = -1;
    if (rc != NS_OK)
        return rc;
    s_job_t *j = s_find(p, c.job_id);
    if (!j || j->state != PJ_FETCH ||
        memcmp(m->sender, j->ann.requester, NS_ID_BYTES))
        return NS_OK;
    rc = ns_fetch_on_chunk(&j->fetch, &c, &done);
    if (rc == NS_ERR_DUPLICATE)
        return NS_OK; /* a late answer to a FETCH asked again: harmless */
    if (rc == NS_OK || rc == NS_ERR_CORRUPT) { /* the bytes came */
        j->chunk_ms = p->io->mono_ms(p->io->user);
        if (c.blob != NS_BLOB_DESCRIPTOR)
            p->stats.input_bytes += c.data_len;
    }
    if (rc == NS_ERR_CORRUPT) {
        /* The part file was emptied: a wrong prefix is never resumed. When
         * the transfer had started from one (a disk fault, an earlier
         * sender that lied), the fault may be ours: fetch it whole once
         * more. A whole transfer that does not hash right is the
         * requester's. */
        uint32_t arg = c.blob - NS_BLOB_INPUT(0);
        if (c.blob >= NS_BLOB_INPUT(0) && arg < NS_MAX_ARGS &&
            (j->resumed & (1u << arg))) {
            char jid[17];
            s_job_hex(jid, j->ann.job_id);
            j->resumed &= ~(1u << arg);
            p->stats.refetched++;
            ns_warn(NS_MOD_MARKET,
                    "event=input_refetched job=%s arg=%u reason=\"the input "
                    "resumed from a part file does not match its hash\"",
                    jid, arg);
            s_fetch_more(p, j);
            return NS_OK;
        }
        s_fail_as(p, j, NS_FAIL_INPUT, "input does not match its hash");
        return NS_OK;
    }
    if (rc == NS_ERR_IO) {
        char why[160];
        snprintf(why, sizeof why,
                 "cannot write the input to the blob store: %s",
                 strerror(errno));
        s_fail_as(p, j, NS_FAIL_INPUT, why);
        return NS_OK;
    }
    if (rc == NS_ERR_TOOBIG) {
        s_fail_as(p, j, NS_FAIL_INPUT, "descriptor size out of range");
        return rc;
    }
    if (rc == NS_ERR_NOMEM) {
        s_fail_as(p, j, NS_FAIL_MEMORY, "out of memory for inputs");
        return rc;
    }
    if (rc != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_OK : rc;
    if (done >= 0) {
        uint32_t blob = j->fetch.blobs[done].blob;
        rc = blob == NS_BLOB_DESCRIPTOR ? s_descriptor_done(p, j)
                                        : s_input_done(p, j, blob - 1);
        if (rc != NS_OK)
            return NS_OK; /* the job failed, with its reason */
    }
    if (ns_fetch_done(&j->fetch)) {
        s_start_run(p, j);
        return NS_OK;
    }
    s_fetch_more(p, j);
    return NS_OK;
}

/* ---- run
 * --------------------------------------------------------------------- */

/* Worker i, started if it is not yet. */
static int s_worker(ns_provider_t *p, uint32_t i)
{
    if (p->workers[i])
        return NS_OK;
    ns_worker_opts_t o;
    char cache[PATH_MAX];
    ns_worker_opts_init(&o);
    if (ns_path_join(cache, sizeof cache, p->o.datadir, "programs") == NS_OK)
        o.cache_dir = cache;
    o.timeout_ms = NS_POLICY_WORKER_TIMEOUT_MS;
    o.self_check = NS_POLICY_SELF_CHECK_UNITS;
    o.device_index = p->o.n_devices ? i % p->o.n_devices : 0;
    int rc = NS_OK;
    p->workers[i] = ns_worker_new(&o, &rc);
    return p->workers[i] ? NS_OK : rc;
}

static bool s_worker_free(const ns_provider_t *p, uint32_t i)
{
    return !p->workers[i] ||
           (!ns_worker_busy(p->workers[i]) &&
            !(ns_prover_busy(&p->prover) && p->prover_w == (int)i));
}

/* A free worker on device dev (the job qualified for it at the bid);
 * -1 when all of that device's slots are taken. */
static int s_pick_worker(const ns_provider_t *p, uint32_t dev)
{
    for (uint32_t i = 0; i < p->n_workers; i++)
        if (s_worker_free(p, i) &&
            (!p->o.n_devices || i % p->o.n_devices == dev))
            return (int)i;
    return -1;
}

static void s_start_run(ns_provider_t *p, s_job_t *j)
{
    char err[256];
    int w = s_pick_worker(p, j->device);
    if (w < 0)
        return; /* ns_provider_tick starts it when a worker frees up */
    if (s_worker(p, (uint32_t)w) != NS_OK) {
        s_fail(p, j, "cannot start the worker");
        return;
    }
    ns_worker_t *worker = p->workers[w];
    /* The run may take what is left of the job's deadline, less the time
     * to commit and serve the outputs: a kernel that never ends holds the
     * slot no longer than the requester waits for it. */
    uint64_t now = p->io->now_ms(p->io->user);
    uint64_t left = j->ann.deadline_ms > now ? j->ann.deadline_ms - now : 0;
    uint64_t margin = left / 10 < NS_POLICY_RUN_MARGIN_MS
                          ? left / 10
                          : NS_POLICY_RUN_MARGIN_MS;
    uint64_t limit = left - margin;
    if (limit < NS_POLICY_RUN_MIN_MS) {
        s_fail_as(p, j, NS_FAIL_TIMEOUT,
                  "too little time left before the deadline to run the job");
        return;
    }
    ns_worker_set_timeout(worker, limit < NS_POLICY_WORKER_TIMEOUT_MS
                                      ? (uint32_t)limit
                                      : NS_POLICY_WORKER_TIMEOUT_MS);
    int fds[NS_MAX_ARGS];
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        fds[i] = j->file[i] ? j->in_fd[i] : -1;
    int rc = ns_worker_submit_files(worker, &j->job, j->inputs, fds, err,
                                    sizeof err);
    if (rc != NS_OK) {
        s_fail_as(p, j, s_fail_kind(rc, err), err);
        return;
    }
    j->w = w;
    s_set(p, j, PJ_RUN);
}

/* The fault injection of test networks, applied to honest outputs. */
static void s_apply_fault(ns_provider_t *p, s_job_t *j)
{
    const ns_fault_t *f = &p->o.fault;
    for (uint32_t i = 0; i < j->job.n_args; i++) {
        const ns_arg_t *a = &j->job.args[i];
        if (a->kind != NS_ARG_OUT || !j->res.outputs[i])
            continue;
        if (f->garbage) {
            randombytes_buf(j->res.outputs[i], a->size);
        } else if (f->lazy > 0) {
            /* a lazy provider skips a fraction of its work: that share
             * of the 4-byte words of every output is junk instead of
             * computed (per word, so that a job of few large units has
             * wrong units too) */
            uint64_t x = ((uint64_t)randombytes_random() << 32) |
                         randombytes_random() | 1;
            uint64_t cut = (uint64_t)(f->lazy * 4294967296.0);
            for (uint64_t w = 0; w < a->size; w += 4) {
                x ^= x >> 12; /* xorshift64*: fast, test networks only */
                x ^= x << 25;
                x ^= x >> 27;
                if (((x * UINT64_C(0x2545F4914F6CDD1D)) >> 32) < cut)
                    memset(j->res.outputs[i] + w, 0xA5,
                           a->size - w < 4 ? (size_t)(a->size - w) : 4);
            }
        }
    }
}

static void s_finish(ns_provider_t *p, s_job_t *j)
{
    char jid[17];
    s_job_hex(jid, j->ann.job_id);
    if (ns_commit_root(&j->job, j->ann.desc_id, j->res.outputs, j->root) !=
        NS_OK) {
        s_fail(p, j, "cannot commit the outputs");
        return;
    }
    ns_result_sign(p->o.me, j->ann.desc_id, j->root, ns_job_items(&j->job),
                   j->statement);
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, j->ann.job_id, NS_HASH_BYTES);
    memcpy(b.ref_id, j->accept_id, NS_HASH_BYTES);
    memcpy(b.root, j->root, NS_HASH_BYTES);
    b.n_items = ns_job_items(&j->job);
    ns_hash_t id;
    int rc = p->io->append(p->io->user, NS_ENTRY_RESULT, &b, id);
    if (rc != NS_OK) {
        s_fail(p, j, "result refused by the ledger");
        return;
    }
    p->stats.results++;
    ns_histo_add_us(&p->stats.run, j->res.wall_us);
    s_set(p, j, PJ_SERVE);
    s_update_offer(p);
    const ns_timings_t *t = &j->res.timings;
    ns_info(NS_MOD_MARKET,
            "event=result job=%s items=%llu run_ms=%.1f build_ms=%.1f "
            "upload_ms=%.1f kernel_ms=%.1f download_ms=%.1f fault=%s",
            jid, (unsigned long long)b.n_items, (double)j->res.wall_us / 1000.0,
            (double)t->build_us / 1000.0, (double)t->upload_us / 1000.0,
            (double)t->run_us / 1000.0, (double)t->download_us / 1000.0,
            p->o.fault.garbage    ? "garbage"
            : p->o.fault.lazy > 0 ? "lazy"
                                  : "none");
}

/* ---- serving outputs ------------------------------------------------------
 */

static int s_on_fetch(ns_provider_t *p, const ns_node_msg_t *m)
{
    ns_chunk_t c;
    int rc = ns_fetch_decode(m->body, m->len, &c);
    if (rc != NS_OK)
        return rc;
    s_job_t *j = s_find(p, c.job_id);
    if (!j || j->state != PJ_SERVE ||
        memcmp(m->sender, j->ann.requester, NS_ID_BYTES))
        return NS_OK;
    const uint8_t *data = NULL;
    uint64_t total = 0;
    if (c.blob == NS_BLOB_STATEMENT) {
        data = j->statement;
        total = NS_SIG_BYTES;
    } else if (c.blob >= NS_BLOB_OUTPUT(0) &&
               c.blob < NS_BLOB_OUTPUT(j->job.n_args) &&
               j->job.args[c.blob - NS_BLOB_OUTPUT(0)].kind == NS_ARG_OUT) {
        uint32_t i = c.blob - NS_BLOB_OUTPUT(0);
        data = j->res.outputs[i];
        total = j->job.args[i].size;
    }
    if ((rc = ns_transfer_serve(&c, data, total, &p->body)) != NS_OK)
        return rc;
    p->stats.served_bytes +=
        c.len < total - c.offset ? c.len : total - c.offset;
    rc = m->reply(m->reply_ctx, NS_MSG_MKT_CHUNK, p->body.data, p->body.len);
    if (c.blob >= NS_BLOB_OUTPUT(0) && data && c.offset + c.len >= total)
        s_keep_output(p, j, c.blob - NS_BLOB_OUTPUT(0)); /* the last chunk */
    return rc;
}

/* ---- timer
 * ------------------------------------------------------------------- */

/* Whether the ledger still holds our award of this job: a CANCEL, a SLASH
 * or a new award ends it, and with it every reason to go on working. */
static bool s_award_live(ns_provider_t *p, const s_job_t *j)
{
    ns_ledger_job_t lj;
    if (!j->have_award ||
        ns_ledger_job(p->o.ledger, j->ann.job_id, &lj) != NS_OK)
        return true; /* nothing to judge by */
    return lj.state == NS_JOB_AWARDED &&
           memcmp(lj.award_id, j->award_id, NS_HASH_BYTES) == 0;
}

/* Stop the work of a job whose award is over, the run in the worker
 * included, and free its slot. */
static void s_stop(ns_provider_t *p, s_job_t *j)
{
    char jid[17];
    s_job_hex(jid, j->ann.job_id);
    ns_info(NS_MOD_MARKET,
            "event=run_stopped job=%s phase=%s reason=\"the award is no "
            "longer live in the ledger (cancelled, slashed or re-awarded)\"",
            jid, s_state_name(j->state));
    if (j->state == PJ_RUN && p->workers[j->w])
        ns_worker_cancel(p->workers[j->w]);
    p->stats.stopped++;
    s_job_clear(j);
}

void ns_provider_tick(ns_provider_t *p, uint64_t now)
{
    if (p->workers[p->prover_w])
        ns_prover_tick(&p->prover, p->workers[p->prover_w], p->io, now);
    if (p->workers[0])
        ns_prover_warm(&p->prover, p->workers[0]);
    else if (p->o.n_devices && !p->prover.warm && s_worker(p, 0) != NS_OK)
        p->prover.warm = true; /* no worker: challenges will say so */
    for (int i = 0; i < S_MAX_JOBS; i++) {
        s_job_t *j = &p->jobs[i];
        if ((j->state == PJ_FETCH || j->state == PJ_RUN ||
             j->state == PJ_HOLD) &&
            !s_award_live(p, j)) {
            s_stop(p, j);
            continue;
        }
        switch (j->state) {
        case PJ_BID:
            if (j->award_wait)
                s_try_accept(p, j, now);
            else if (now - j->since_ms > NS_POLICY_BID_TTL_MS) {
                s_job_clear(j);
                p->stats.bids_lost++;
            }
            break;
        case PJ_FETCH:
            if (j->have_job && ns_fetch_done(&j->fetch))
                s_start_run(p, j);
            if (j->state == PJ_FETCH && j->fetch.in_flight &&
                now - j->chunk_ms > NS_POLICY_FETCH_STALL_MS) {
                /* the requester stopped answering (a dropped connection,
                 * a restart): ask again from the first missing chunk */
                ns_fetch_rewind(&j->fetch);
                j->chunk_ms = now;
                p->stats.rewinds++;
                s_fetch_more(p, j);
            }
            if (j->state == PJ_FETCH &&
                p->io->now_ms(p->io->user) > j->ann.deadline_ms)
                s_fail(p, j, "deadline passed while fetching inputs");
            break;
        case PJ_RUN: {
            int got = ns_worker_collect(p->workers[j->w], &j->res);
            if (got <= 0)
                break;
            s_drop_files(j); /* the worker is done with them */
            if (j->res.status != NS_OK) {
                s_fail_as(p, j, s_fail_kind(j->res.status, j->res.error),
                          j->res.error);
                break;
            }
            if (p->o.fault.fail) {
                s_fail_as(p, j, NS_FAIL_CRASH,
                          "fault injection: the run is reported as crashed");
                break;
            }
            if (p->o.fault.silent) {
                ns_warn(NS_MOD_MARKET, "event=fault_silent action=no_result");
                s_job_clear(j);
                break;
            }
            s_apply_fault(p, j);
            if (p->o.fault.slow > 1) {
                j->release_ms =
                    now + (uint64_t)((p->o.fault.slow - 1) *
                                     (double)j->res.wall_us / 1000.0);
                s_set(p, j, PJ_HOLD);
                break;
            }
            s_finish(p, j);
            break;
        }
        case PJ_HOLD:
            if (now >= j->release_ms)
                s_finish(p, j);
            break;
        case PJ_SERVE: {
            /* Keep outputs while the requester may still need them: until
             * it settles or moves the job on (or the retention ends). */
            ns_ledger_job_t lj;
            bool over =
                ns_ledger_job(p->o.ledger, j->ann.job_id, &lj) == NS_OK &&
                (lj.state != NS_JOB_AWARDED ||
                 memcmp(lj.award_id, j->award_id, NS_HASH_BYTES));
            if ((over && now - j->since_ms > NS_POLICY_RETAIN_AFTER_MS) ||
                now - j->since_ms > NS_POLICY_RETAIN_MS)
                s_job_clear(j);
            break;
        }
        default:
            break;
        }
    }
}

/* Log what the ledger did to us since the last look: a SLASH burned our
 * collateral, a CANCEL after the deadline took a penalty. */
static void s_watch_account(ns_provider_t *p)
{
    ns_account_t a;
    if (ns_ledger_account(p->o.ledger, p->self, &a) != NS_OK)
        return;
    if (p->have_seen && a.jobs_slashed > p->seen.jobs_slashed)
        ns_warn(NS_MOD_MARKET,
                "event=slashed count=%u total=%u staked=%llu "
                "reason=\"a requester proved a wrong result with a fraud "
                "proof; the job's collateral is burned\"",
                a.jobs_slashed - p->seen.jobs_slashed, a.jobs_slashed,
                (unsigned long long)a.staked);
    if (p->have_seen && a.jobs_cancelled > p->seen.jobs_cancelled)
        ns_warn(NS_MOD_MARKET,
                "event=penalised count=%u total=%u staked=%llu "
                "reason=\"the deadline passed without our result; a tenth "
                "of the collateral is burned\"",
                a.jobs_cancelled - p->seen.jobs_cancelled, a.jobs_cancelled,
                (unsigned long long)a.staked);
    p->seen = a;
    p->have_seen = true;
}

static bool s_close_refused(const ns_provider_t *p, const ns_hash_t job_id)
{
    for (uint32_t i = 0; i < 8; i++)
        if (memcmp(p->close_refused[i], job_id, NS_HASH_BYTES) == 0)
            return true;
    return false;
}

/* Close the awards of ours that their requester left (docs/PROTOCOL.md,
 * "Closing"): the ledger names each job whose deadline + close window
 * has passed by our clock less NS_POLICY_CLOSE_MARGIN_MS, with the entry
 * our record of the award says (our RESULT: paid; our ACCEPT: the
 * deadline rule; the AWARD, never accepted: the escrow back). The rule
 * itself reads only the CLOSE's timestamp and the job's deadline. */
static void s_close_left(ns_provider_t *p)
{
    uint64_t mono = ns_mono_ms();
    /* The look reads every job record of the ledger: every tick only
     * while we hold collateral (an accepted award may be ours to close),
     * else once a minute (an award never accepted: the escrow's return,
     * which its requester can also CANCEL). */
    ns_account_t me;
    uint64_t every = ns_ledger_account(p->o.ledger, p->self, &me) == NS_OK &&
                             me.locked_collateral
                         ? NS_POLICY_CLOSE_TICK_MS
                         : NS_POLICY_CLOSE_IDLE_MS;
    if (p->close_ms && mono - p->close_ms < every)
        return;
    p->close_ms = mono;
    uint64_t now = p->io->now_ms(p->io->user);
    if (now < NS_POLICY_CLOSE_MARGIN_MS)
        return;
    ns_ledger_closable_t c[8];
    uint32_t n = ns_ledger_closable(p->o.ledger, p->self,
                                    now - NS_POLICY_CLOSE_MARGIN_MS, c, 8);
    for (uint32_t i = 0; i < n; i++) {
        ns_ledger_job_t lj;
        ns_account_t req;
        if (s_close_refused(p, c[i].job_id))
            continue;
        /* An entry of the requester that waits here (a SLASH whose inputs
         * are still being fetched for its re-run) may end the award inside
         * the window: close only once it is in, as on the nodes that have
         * it already. */
        if (ns_ledger_job(p->o.ledger, c[i].job_id, &lj) != NS_OK ||
            ns_ledger_account(p->o.ledger, lj.requester, &req) != NS_OK ||
            ns_ledger_buffered_through(p->o.ledger, lj.requester) > req.seq)
            continue;
        ns_entry_body_t b;
        ns_hash_t id;
        char jid[17];
        memset(&b, 0, sizeof b);
        memcpy(b.job_id, c[i].job_id, NS_HASH_BYTES);
        memcpy(b.ref_id, c[i].ref_id, NS_HASH_BYTES);
        s_job_hex(jid, c[i].job_id);
        int rc = p->io->append(p->io->user, NS_ENTRY_CLOSE, &b, id);
        if (rc == NS_OK) {
            p->stats.closed++;
            ns_info(NS_MOD_MARKET, "event=closed job=%s row=%s", jid,
                    ns_entry_type_name(c[i].row));
        } else {
            memcpy(p->close_refused[p->close_refused_next], c[i].job_id,
                   NS_HASH_BYTES);
            p->close_refused_next = (p->close_refused_next + 1) % 8;
            ns_warn(NS_MOD_MARKET, "event=close_refused job=%s row=%s err=%s",
                    jid, ns_entry_type_name(c[i].row), ns_errname(rc));
        }
    }
}

void ns_provider_claim(ns_provider_t *p)
{
    s_watch_account(p);
    if (ns_ledger_write_state(p->o.ledger, NULL, NULL) == NS_OK)
        s_close_left(p);
    uint8_t ref[NS_HASH_BYTES];
    if (ns_ledger_write_state(p->o.ledger, NULL, NULL) == NS_OK &&
        ns_ledger_unclaimed(p->o.ledger, p->self, ref, 1) > 0) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        if (p->io->append(p->io->user, NS_ENTRY_STAKE, &b, id) == NS_OK)
            p->stats.claims++;
    }
    s_update_offer(p);
}

/* A requester we bid to wants our device claims proven. One challenge at
 * a time, only from requesters with a live bid of ours (nobody else can
 * make us burn the device), only when the worker is free. */
static int s_on_chal(ns_provider_t *p, const ns_node_msg_t *m)
{
    ns_chal_msg_t c;
    int rc = ns_chal_msg_decode(m->body, m->len, &c);
    if (rc != NS_OK)
        return rc;
    uint64_t now = p->io->mono_ms(p->io->user);
    bool bid = false;
    for (int i = 0; i < S_MAX_JOBS; i++)
        if (p->jobs[i].state == PJ_BID &&
            memcmp(p->jobs[i].ann.requester, m->sender, NS_ID_BYTES) == 0) {
            bid = true;
            p->jobs[i].since_ms = now; /* a challenged bid stays alive */
        }
    if (!bid)
        return NS_OK;
    /* a free worker on the claimed device */
    int w = c.device < p->o.n_devices && !ns_prover_busy(&p->prover)
                ? s_pick_worker(p, c.device)
                : -1;
    if (w < 0 || s_worker(p, (uint32_t)w) != NS_OK) {
        ns_chal_done_t d;
        memset(&d, 0, sizeof d);
        memcpy(d.nonce, c.nonce, NS_HASH_BYTES);
        d.status = c.device >= p->o.n_devices ? NS_ERR_INVAL : NS_ERR_STATE;
        if (ns_chal_done_encode(&d, &p->body) == NS_OK)
            return p->io->send(p->io->user, m->sender, NS_MSG_MKT_CHAL_DONE,
                               p->body.data, p->body.len);
        return NS_OK;
    }
    char jid[17];
    ns_hex(jid, c.nonce, 8);
    ns_info(NS_MOD_MARKET,
            "event=challenged nonce=%s label_bytes=%llu imatmul_n=%u", jid,
            (unsigned long long)c.label_bytes, c.imatmul_n);
    p->prover_w = w;
    ns_prover_start(&p->prover, p->workers[w], p->io, &c, m->sender,
                    p->o.devices[c.device].max_alloc_bytes, now);
    return NS_OK;
}

void ns_provider_on_confirmed(ns_provider_t *p, uint64_t now)
{
    for (int i = 0; i < S_MAX_JOBS; i++)
        if (p->jobs[i].state == PJ_BID && p->jobs[i].award_wait)
            s_try_accept(p, &p->jobs[i], now);
}

bool ns_provider_active(const ns_provider_t *p)
{
    if (ns_prover_busy(&p->prover))
        return true;
    for (uint32_t i = 0; i < p->n_workers; i++)
        if (p->workers[i] && ns_worker_busy(p->workers[i]))
            return true;
    if (p->o.n_devices && !p->prover.warm)
        return true; /* the worker starts and warms its programs */
    for (int i = 0; i < S_MAX_JOBS; i++)
        if (p->jobs[i].state == PJ_FETCH || p->jobs[i].state == PJ_RUN ||
            p->jobs[i].state == PJ_HOLD ||
            (p->jobs[i].state == PJ_BID && p->jobs[i].award_wait))
            return true;
    return false;
}

uint32_t ns_provider_n_workers(const ns_provider_t *p)
{
    return p->n_workers;
}

int ns_provider_worker_fd(const ns_provider_t *p, uint32_t i)
{
    return i < p->n_workers && p->workers[i] ? ns_worker_fd(p->workers[i]) : -1;
}

bool ns_provider_worker_wants_write(const ns_provider_t *p, uint32_t i)
{
    return i < p->n_workers && p->workers[i] &&
           ns_worker_wants_write(p->workers[i]);
}

int ns_provider_on_msg(ns_provider_t *p, const ns_node_msg_t *m)
{
    if (m->type == NS_MSG_MKT_FETCH &&
        ns_prover_serve(&p->prover, m) != NS_ERR_NOTFOUND)
        return NS_OK;
    switch (m->type) {
    case NS_MSG_MKT_CHAL:
        return s_on_chal(p, m);
    case NS_MSG_MKT_JOB:
        return s_on_job(p, m);
    case NS_MSG_MKT_AWARDED:
        return s_on_awarded(p, m);
    case NS_MSG_MKT_FETCH:
        return s_on_fetch(p, m);
    case NS_MSG_MKT_CHUNK:
        return s_on_chunk(p, m);
    default:
        return NS_OK; /* not a provider's message */
    }
}

/* ---- life -------------------------------------------------------------------
 */

ns_provider_t *ns_provider_new(const ns_provider_opts_t *o,
                               const ns_node_io_t *io, int *err)
{
    ns_provider_t *p = calloc(1, sizeof *p);
    if (!p) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    p->o = *o;
    p->io = io;
    memcpy(p->self, ns_identity_pk(o->me), NS_ID_BYTES);
    ns_buf_init(&p->body);
    ns_prover_init(&p->prover);
    /* a worker a slot, and one on each device at least */
    p->n_workers = o->cfg->slots > o->n_devices ? o->cfg->slots : o->n_devices;
    if (p->n_workers < 1)
        p->n_workers = 1;
    if (p->n_workers > NS_POLICY_MAX_WORKERS)
        p->n_workers = NS_POLICY_MAX_WORKERS;
    /* What the ledger held of us at start: a slash or penalty after this
     * is logged (s_watch_account), even before the first claim tick. */
    s_watch_account(p);
    /* Stake what the settings ask, from free credits. */
    ns_account_t a;
    if (o->cfg->stake && ns_ledger_account(o->ledger, p->self, &a) == NS_OK &&
        a.staked < o->cfg->stake) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        b.amount = o->cfg->stake - a.staked;
        if (b.amount > a.free)
            b.amount = a.free;
        /* logged by node/money.c (event=stake) */
        if (b.amount)
            (void)io->append(io->user, NS_ENTRY_STAKE, &b, id);
    }
    /* A provider that cannot bid says so, and what to do (FIRST-USE M6):
     * a warning when its settings ask for a stake it could not make (no
     * free credits yet), a note when none is asked (a node that only
     * requests: nothing is wrong) */
    char why[320];
    if (ns_provider_not_bidding(p, why, sizeof why)) {
        if (o->cfg->stake)
            ns_warn(NS_MOD_MARKET,
                    "event=not_bidding reason=\"%s\" node.stake=%llu", why,
                    (unsigned long long)o->cfg->stake);
        else
            ns_info(NS_MOD_MARKET, "event=not_bidding reason=\"%s\"", why);
    }
    s_update_offer(p);
    return p;
}

void ns_provider_destroy(ns_provider_t **pp)
{
    if (!pp || !*pp)
        return;
    ns_provider_t *p = *pp;
    for (int i = 0; i < S_MAX_JOBS; i++)
        s_job_clear(&p->jobs[i]);
    for (uint32_t i = 0; i < NS_POLICY_MAX_WORKERS; i++)
        ns_worker_destroy(&p->workers[i]);
    ns_prover_release(&p->prover);
    ns_buf_release(&p->body);
    free(p);
    *pp = NULL;
}

static const char *const s_state_names[] = {
    [PJ_FREE] = "free", [PJ_BID] = "bid",   [PJ_FETCH] = "fetch",
    [PJ_RUN] = "run",   [PJ_HOLD] = "hold", [PJ_SERVE] = "serve",
};

bool ns_provider_not_bidding(const ns_provider_t *p, char *why, size_t cap)
{
    ns_account_t a;
    if (p->o.n_devices == 0) {
        snprintf(why, cap,
                 "no OpenCL device: this node cannot run jobs (`nightshift "
                 "devices` lists what it finds)");
        return true;
    }
    if (ns_ledger_account(p->o.ledger, p->self, &a) != NS_OK || !a.staked) {
        snprintf(why, cap,
                 "no stake: this node will not bid until it stakes credits "
                 "(a job asks a collateral out of the stake); get credits "
                 "from a funded account (`nightshift transfer`) and stake "
                 "them with `nightshift stake CREDITS --datadir D`");
        return true;
    }
    why[0] = '\0';
    return false;
}

void ns_provider_pack_status(const ns_provider_t *p, msgpack_packer *pk)
{
    char why[320];
    bool not_bidding = ns_provider_not_bidding(p, why, sizeof why);
    msgpack_pack_map(pk, 26);
    ns_mp_str(pk, "not_bidding"); /* why it cannot bid at all, or nil */
    if (not_bidding)
        ns_mp_str(pk, why);
    else
        msgpack_pack_nil(pk);
    ns_mp_str(pk, "not_bid"); /* announcements passed over, by reason */
    msgpack_pack_map(pk, S_NB_COUNT);
    for (int i = 0; i < S_NB_COUNT; i++) {
        ns_mp_str(pk, s_nb_names[i]);
        msgpack_pack_uint64(pk, p->stats.not_bid[i]);
    }
#define KV(k, v)                                                               \
    ns_mp_str(pk, k);                                                          \
    msgpack_pack_uint64(pk, v)
    KV("announces_seen", p->stats.announces);
    KV("bids", p->stats.bids);
    KV("awards", p->stats.awards);
    KV("bids_lost", p->stats.bids_lost);
    KV("accepts", p->stats.accepts);
    KV("results", p->stats.results);
    KV("failed", p->stats.failed);
    KV("served_bytes", p->stats.served_bytes);
    KV("refused_requesters", p->stats.refused_requester);
    KV("claims", p->stats.claims);
    KV("closed", p->stats.closed);
    KV("table_full", p->stats.table_full);
    KV("busy", s_busy(p));
    uint64_t by_state[PJ_SERVE + 1] = {0};
    for (int i = 0; i < S_MAX_JOBS; i++)
        by_state[p->jobs[i].state]++;
    KV("running", by_state[PJ_RUN]);
    KV("workers", p->n_workers);
    KV("inputs_cached", p->stats.inputs_cached);
    KV("stopped", p->stats.stopped);
    KV("refused_no_storage", p->stats.no_storage);
    KV("input_bytes", p->stats.input_bytes);
    KV("input_resumed_bytes", p->stats.resumed_bytes);
    KV("input_rewinds", p->stats.rewinds);
    KV("input_refetched", p->stats.refetched);
    ns_mp_str(pk, "jobs"); /* by phase, now */
    msgpack_pack_map(pk, PJ_SERVE);
    for (int st = PJ_BID; st <= PJ_SERVE; st++) {
        KV(s_state_names[st], by_state[st]);
    }
    ns_mp_str(pk, "run_seconds");
    ns_histo_pack(&p->stats.run, pk);
#undef KV
}

uint32_t ns_provider_n_jobs(const ns_provider_t *p)
{
    uint32_t n = 0;
    for (int i = 0; i < S_MAX_JOBS; i++)
        n += p->jobs[i].state != PJ_FREE;
    return n;
}

void ns_provider_pack_jobs(const ns_provider_t *p, msgpack_packer *pk)
{
    uint64_t now = p->io->mono_ms(p->io->user);
    for (int i = 0; i < S_MAX_JOBS; i++) {
        const s_job_t *j = &p->jobs[i];
        if (j->state == PJ_FREE)
            continue;
        char hex[2 * NS_HASH_BYTES + 1], peer[NS_ID_TEXT_LEN + 1];
        ns_hex(hex, j->ann.job_id, NS_HASH_BYTES);
        ns_id_text(peer, j->ann.requester);
        msgpack_pack_map(pk, 7);
        ns_mp_str(pk, "id");
        ns_mp_str(pk, hex);
        ns_mp_str(pk, "role");
        ns_mp_str(pk, "provider");
        ns_mp_str(pk, "phase");
        ns_mp_str(pk, s_state_names[j->state]);
        ns_mp_str(pk, "peer"); /* the requester */
        ns_mp_str(pk, peer);
        ns_mp_str(pk, "price"); /* our bid */
        ns_mp_credits(pk, j->bid.price);
        ns_mp_str(pk, "age_ms"); /* in this phase for */
        msgpack_pack_uint64(pk, now - j->since_ms);
        ns_mp_str(pk, "finished");
        msgpack_pack_false(pk);
    }
}
