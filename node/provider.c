/* provider.c - bids, accepts, fetches, runs, commits, serves. */
#include "nightshift/provider.h"

#include "nightshift/log.h"
#include "nightshift/market.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_JOBS 64
#define S_WINDOW 8                   /* FETCHes in flight per job */
#define S_BID_TTL_MS 30000           /* forget an unanswered bid */
#define S_RETAIN_MS (10 * 60 * 1000) /* outputs kept for the requester */
#define S_BLOB_STATEMENT 255         /* the signed result statement */

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
    /* blob 0 = descriptor, 1 + i = input i */
    uint8_t *blob[NS_MAX_ARGS + 1];
    uint64_t total[NS_MAX_ARGS + 1]; /* 0 = unknown yet */
    uint64_t got[NS_MAX_ARGS + 1];
    uint64_t next[NS_MAX_ARGS + 1];
    uint32_t in_flight;
    bool have_job;
    ns_job_t job;
    ns_input_t inputs[NS_MAX_ARGS];
    ns_worker_result_t res;
    ns_hash_t root;
    uint8_t statement[NS_SIG_BYTES];
    uint64_t release_ms; /* PJ_HOLD until */
} s_job_t;

struct ns_provider {
    ns_provider_opts_t o;
    uint8_t self[NS_ID_BYTES];
    ns_worker_t *worker;
    s_job_t jobs[S_MAX_JOBS];
    ns_buf_t body;
    struct {
        uint64_t announces, bids, awards, accepts, results, failed;
        uint64_t served_bytes, refused_requester, claims, table_full;
    } stats;
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
    return NS_ERR_INVAL;
}

/* ---- helpers ----------------------------------------------------------------
 */

static void s_job_clear(s_job_t *j)
{
    for (int i = 0; i <= NS_MAX_ARGS; i++)
        free(j->blob[i]);
    if (j->have_job)
        ns_job_release(&j->job);
    ns_worker_result_release(&j->res);
    memset(j, 0, sizeof *j);
}

static void s_set(s_job_t *j, s_state_t st)
{
    j->state = st;
    j->since_ms = ns_mono_ms();
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
    ns_p2p_set_offer(p->o.p2p, stake,
                     busy < p->o.cfg->slots ? p->o.cfg->slots - busy : 0);
}

static void s_fail(ns_provider_t *p, s_job_t *j, const char *why)
{
    char jid[17];
    s_job_hex(jid, j->ann.job_id);
    ns_warn(NS_MOD_MARKET, "event=job_failed job=%s reason=\"%s\"", jid, why);
    p->stats.failed++;
    s_job_clear(j);
    s_update_offer(p);
}

/* ---- bidding
 * ------------------------------------------------------------------ */

static int s_on_job(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_provider_t *p = user;
    ns_announce_t a;
    int rc = ns_announce_decode(env->body, env->body_len, &a);
    if (rc != NS_OK)
        return rc;
    if (memcmp(a.requester, env->sender, NS_ID_BYTES))
        return NS_ERR_INVAL; /* only the requester announces its job */
    p->stats.announces++;
    s_job_t *old = s_find(p, a.job_id);
    if (old && old->state == PJ_BID && old->ann.round < a.round)
        s_job_clear(old); /* a new round: bid again */
    else if (old)
        return NS_OK;
    if (memcmp(a.requester, p->self, NS_ID_BYTES) == 0 ||
        a.deadline_ms <= ns_now_ms() || p->o.n_devices == 0)
        return NS_OK;
    for (uint32_t e = 0; e < a.n_excluded; e++)
        if (memcmp(a.excluded[e], p->self, NS_ID_BYTES) == 0)
            return NS_OK;
    if (s_busy(p) >= p->o.cfg->slots)
        return NS_OK;
    /* Requesters that post and never settle are refused. */
    ns_account_t req, me;
    if (ns_ledger_account(p->o.ledger, a.requester, &req) != NS_OK ||
        ns_ledger_account(p->o.ledger, p->self, &me) != NS_OK)
        return NS_OK;
    if (req.banned || (req.jobs_posted >= 5 &&
                       2 * req.jobs_settled_as_requester < req.jobs_posted)) {
        p->stats.refused_requester++;
        return NS_OK;
    }
    ns_heartbeat_t *hb = calloc(1, sizeof *hb);
    if (!hb)
        return NS_ERR_NOMEM;
    hb->n_devices = p->o.n_devices;
    memcpy(hb->devices, p->o.devices, p->o.n_devices * sizeof *p->o.devices);
    hb->price = p->o.cfg->price;
    hb->stake = me.staked;
    hb->free_slots = 1;
    snprintf(hb->region, sizeof hb->region, "%s", p->o.cfg->region);
    uint32_t dev = 0;
    uint32_t fail = ns_reqs_check(&a.reqs, hb, a.collateral, a.max_price,
                                  a.work_flops, &dev);
    free(hb);
    if (fail)
        return NS_OK;
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
    memcpy(j->bid.job_id, a.job_id, NS_HASH_BYTES);
    j->bid.price = ns_price_quote(p->o.cfg->price, a.work_flops,
                                  p->o.devices[dev].gflops, &j->bid.est_ms);
    j->bid.timestamp_ms = ns_now_ms();
    ns_bid_sign(&j->bid, p->o.me, p->o.network_id);
    char addr[NS_ADDR_MAX], idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, a.requester);
    snprintf(addr, sizeof addr, "%s@%s", idtext, a.endpoint);
    rc = ns_p2p_connect(p->o.p2p, addr); /* NS_ERR_EXISTS is fine */
    (void)rc;
    if (ns_bid_encode(&j->bid, &p->body) != NS_OK ||
        ns_p2p_send(p->o.p2p, a.requester, NS_MSG_MKT_BID, p->body.data,
                    p->body.len) != NS_OK) {
        memset(j, 0, sizeof *j);
        return NS_OK;
    }
    s_set(j, PJ_BID);
    p->stats.bids++;
    char jid[17];
    s_job_hex(jid, a.job_id);
    ns_info(NS_MOD_MARKET, "event=bid job=%s price=%llu est_ms=%llu", jid,
            (unsigned long long)j->bid.price,
            (unsigned long long)j->bid.est_ms);
    return NS_OK;
}

/* ---- award -> accept -> fetch -------------------------------------------- */

static void s_fetch_more(ns_provider_t *p, s_job_t *j);

static int s_on_awarded(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_provider_t *p = user;
    ns_mpr_t r;
    ns_hash_t job_id;
    const uint8_t *je = NULL, *ae = NULL;
    size_t jl = 0, al = 0;
    ns_mpr_init(&r, env->body, env->body_len);
    ns_mpr_array_exact(&r, 3);
    ns_mpr_bin_exact(&r, job_id, NS_HASH_BYTES);
    ns_mpr_bin(&r, &je, &jl, NS_MAX_ENTRY_BYTES);
    ns_mpr_bin(&r, &ae, &al, NS_MAX_ENTRY_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    s_job_t *j = s_find(p, job_id);
    if (!j || j->state != PJ_BID ||
        memcmp(env->sender, j->ann.requester, NS_ID_BYTES))
        return NS_OK; /* not ours any more, or not from its requester */
    /* The requester's JOB and AWARD entries, in case gossip is behind. */
    (void)ns_ledger_ingest(p->o.ledger, je, jl, NULL, NULL);
    (void)ns_ledger_ingest(p->o.ledger, ae, al, NULL, NULL);
    if (ns_ledger_commit(p->o.ledger) != NS_OK)
        return NS_ERR_IO;
    ns_ledger_job_t lj;
    if (ns_ledger_job(p->o.ledger, job_id, &lj) != NS_OK ||
        lj.state != NS_JOB_AWARDED ||
        memcmp(lj.provider, p->self, NS_ID_BYTES)) {
        s_fail(p, j, "award not in the ledger");
        return NS_OK;
    }
    p->stats.awards++;
    memcpy(j->award_id, lj.award_id, NS_HASH_BYTES);
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    memcpy(b.ref_id, lj.award_id, NS_HASH_BYTES);
    int rc = ns_ledger_sync_append(p->o.sync, p->o.me, NS_ENTRY_ACCEPT, &b,
                                   true, j->accept_id);
    if (rc != NS_OK) {
        char why[96];
        snprintf(why, sizeof why, "accept refused by the ledger: %s",
                 ns_errname(rc));
        s_fail(p, j, why);
        return NS_OK;
    }
    p->stats.accepts++;
    s_set(j, PJ_FETCH);
    s_update_offer(p);
    char jid[17];
    s_job_hex(jid, job_id);
    ns_info(NS_MOD_MARKET, "event=accepted job=%s price=%llu collateral=%llu",
            jid, (unsigned long long)lj.price,
            (unsigned long long)lj.collateral);
    s_fetch_more(p, j);
    return NS_OK;
}

static void s_fetch_more(ns_provider_t *p, s_job_t *j)
{
    /* blob order: descriptor, then each input in argument order */
    for (uint32_t b = 0; b <= NS_MAX_ARGS && j->in_flight < S_WINDOW; b++) {
        if (b > 0 && (!j->have_job || b - 1 >= j->job.n_args ||
                      j->job.args[b - 1].kind != NS_ARG_IN))
            continue;
        if (b == 0 && j->have_job)
            continue;
        uint64_t total = j->total[b];
        if (total == 0 && j->next[b] > 0)
            return; /* first chunk of the descriptor still on its way */
        while (j->in_flight < S_WINDOW && (total == 0 || j->next[b] < total)) {
            ns_chunk_t c;
            memset(&c, 0, sizeof c);
            memcpy(c.job_id, j->ann.job_id, NS_HASH_BYTES);
            c.blob = b;
            c.offset = j->next[b];
            c.len = (uint32_t)(total == 0 || total - c.offset > NS_CHUNK_BYTES
                                   ? NS_CHUNK_BYTES
                                   : total - c.offset);
            if (ns_fetch_encode(&c, &p->body) != NS_OK ||
                ns_p2p_send(p->o.p2p, j->ann.requester, NS_MSG_MKT_FETCH,
                            p->body.data, p->body.len) != NS_OK)
                return;
            j->next[b] += c.len;
            j->in_flight++;
            if (total == 0)
                return;
        }
        if (j->got[b] < j->total[b] || j->total[b] == 0)
            return; /* finish this blob before the next */
    }
}

static void s_start_run(ns_provider_t *p, s_job_t *j);

/* All of blob b is here: check it. */
static int s_blob_done(ns_provider_t *p, s_job_t *j, uint32_t b)
{
    char err[256];
    if (b == 0) {
        ns_mpr_t r;
        ns_hash_t id;
        ns_mpr_init(&r, j->blob[0], j->total[0]);
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
            if (j->job.args[i].kind != NS_ARG_IN)
                continue;
            j->total[1 + i] = j->job.args[i].size;
            j->blob[1 + i] = malloc(j->job.args[i].size);
            if (!j->blob[1 + i]) {
                s_fail(p, j, "out of memory for inputs");
                return NS_ERR_NOMEM;
            }
        }
    } else {
        ns_hash_t h;
        ns_hash(h, j->blob[b], j->total[b]);
        if (memcmp(h, j->job.args[b - 1].hash, NS_HASH_BYTES)) {
            s_fail(p, j, "input does not match its hash");
            return NS_ERR_CORRUPT;
        }
        j->inputs[b - 1].data = j->blob[b];
        j->inputs[b - 1].len = j->total[b];
        j->inputs[b - 1].verified = true;
    }
    for (uint32_t i = 0; i < j->job.n_args; i++)
        if (j->job.args[i].kind == NS_ARG_IN && j->got[1 + i] < j->total[1 + i])
            return NS_OK;
    s_start_run(p, j);
    return NS_OK;
}

static int s_on_chunk(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_provider_t *p = user;
    ns_chunk_t c;
    int rc = ns_chunk_decode(env->body, env->body_len, &c);
    if (rc != NS_OK)
        return rc;
    s_job_t *j = s_find(p, c.job_id);
    if (!j || j->state != PJ_FETCH ||
        memcmp(env->sender, j->ann.requester, NS_ID_BYTES) ||
        c.blob > NS_MAX_ARGS)
        return NS_OK;
    uint32_t b = c.blob;
    if (j->in_flight)
        j->in_flight--;
    if (b == 0 && j->total[0] == 0) {
        if (c.total == 0 || c.total > NS_MAX_JOB_MSG) {
            s_fail(p, j, "descriptor size out of range");
            return NS_ERR_TOOBIG;
        }
        j->total[0] = c.total;
        j->blob[0] = malloc(c.total);
        if (!j->blob[0]) {
            s_fail(p, j, "out of memory");
            return NS_ERR_NOMEM;
        }
    }
    if (!j->blob[b] || c.total != j->total[b] ||
        c.data_len > j->total[b] - c.offset)
        return NS_ERR_INVAL;
    memcpy(j->blob[b] + c.offset, c.data, c.data_len);
    j->got[b] += c.data_len;
    if (j->got[b] >= j->total[b] && s_blob_done(p, j, b) != NS_OK)
        return NS_OK;
    if (j->state == PJ_FETCH)
        s_fetch_more(p, j);
    return NS_OK;
}

/* ---- run
 * --------------------------------------------------------------------- */

static int s_worker(ns_provider_t *p)
{
    if (p->worker)
        return NS_OK;
    ns_worker_opts_t o;
    char cache[PATH_MAX];
    ns_worker_opts_init(&o);
    if (ns_path_join(cache, sizeof cache, p->o.datadir, "programs") == NS_OK)
        o.cache_dir = cache;
    o.timeout_ms = 10 * 60 * 1000;
    int rc = NS_OK;
    p->worker = ns_worker_new(&o, &rc);
    return p->worker ? NS_OK : rc;
}

static void s_start_run(ns_provider_t *p, s_job_t *j)
{
    char err[256];
    if (s_worker(p) != NS_OK) {
        s_fail(p, j, "cannot start the worker");
        return;
    }
    if (ns_worker_busy(p->worker))
        return; /* s_on_timer starts it when the worker frees up */
    int rc = ns_worker_submit(p->worker, &j->job, j->inputs, NULL, 0, err,
                              sizeof err);
    if (rc != NS_OK) {
        s_fail(p, j, err);
        return;
    }
    s_set(j, PJ_RUN);
}

/* The fault injection of test networks, applied to honest outputs. */
static void s_apply_fault(ns_provider_t *p, s_job_t *j)
{
    const ns_fault_t *f = &p->o.fault;
    uint64_t n = ns_job_items(&j->job);
    for (uint32_t i = 0; i < j->job.n_args; i++) {
        const ns_arg_t *a = &j->job.args[i];
        if (a->kind != NS_ARG_OUT || !j->res.outputs[i])
            continue;
        if (f->garbage) {
            randombytes_buf(j->res.outputs[i], a->size);
        } else if (f->lazy > 0) {
            /* a lazy provider skips a fraction of the items: their bytes
             * are left as zero instead of computed */
            for (uint64_t it = 0; it < n; it++)
                if (randombytes_uniform(1000000) <
                    (uint32_t)(f->lazy * 1000000))
                    memset(j->res.outputs[i] + it * a->item_bytes, 0xA5,
                           a->item_bytes);
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
    int rc = ns_ledger_sync_append(p->o.sync, p->o.me, NS_ENTRY_RESULT, &b,
                                   true, id);
    if (rc != NS_OK) {
        s_fail(p, j, "result refused by the ledger");
        return;
    }
    p->stats.results++;
    s_set(j, PJ_SERVE);
    s_update_offer(p);
    ns_info(NS_MOD_MARKET,
            "event=result job=%s items=%llu run_ms=%.1f fault=%s", jid,
            (unsigned long long)b.n_items, (double)j->res.wall_us / 1000.0,
            p->o.fault.garbage    ? "garbage"
            : p->o.fault.lazy > 0 ? "lazy"
                                  : "none");
}

/* ---- serving outputs ------------------------------------------------------
 */

static int s_on_fetch(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    ns_provider_t *p = user;
    ns_chunk_t c;
    int rc = ns_fetch_decode(env->body, env->body_len, &c);
    if (rc != NS_OK)
        return rc;
    s_job_t *j = s_find(p, c.job_id);
    if (!j || j->state != PJ_SERVE ||
        memcmp(env->sender, j->ann.requester, NS_ID_BYTES))
        return NS_OK; /* the requester's own FETCH handler is elsewhere */
    const uint8_t *data = NULL;
    uint64_t total = 0;
    if (c.blob == S_BLOB_STATEMENT) {
        data = j->statement;
        total = NS_SIG_BYTES;
    } else if (c.blob >= NS_BLOB_OUTPUT(0) &&
               c.blob < NS_BLOB_OUTPUT(j->job.n_args) &&
               j->job.args[c.blob - NS_BLOB_OUTPUT(0)].kind == NS_ARG_OUT) {
        uint32_t i = c.blob - NS_BLOB_OUTPUT(0);
        data = j->res.outputs[i];
        total = j->job.args[i].size;
    }
    if (!data || c.offset >= total)
        return NS_ERR_INVAL;
    c.total = total;
    c.data = data + c.offset;
    c.data_len = total - c.offset < c.len ? total - c.offset : c.len;
    if ((rc = ns_chunk_encode(&c, &p->body)) != NS_OK)
        return rc;
    p->stats.served_bytes += c.data_len;
    return ns_p2p_reply(p->o.p2p, src, NS_MSG_MKT_CHUNK, p->body.data,
                        p->body.len);
}

/* ---- timer
 * ------------------------------------------------------------------- */

static void s_on_timer(void *user, uint64_t now)
{
    ns_provider_t *p = user;
    for (int i = 0; i < S_MAX_JOBS; i++) {
        s_job_t *j = &p->jobs[i];
        switch (j->state) {
        case PJ_BID:
            if (now - j->since_ms > S_BID_TTL_MS)
                s_job_clear(j);
            break;
        case PJ_FETCH:
            if (j->have_job && p->worker && !ns_worker_busy(p->worker)) {
                bool all = true;
                for (uint32_t k = 0; k < j->job.n_args; k++)
                    if (j->job.args[k].kind == NS_ARG_IN &&
                        j->got[1 + k] < j->total[1 + k])
                        all = false;
                if (all)
                    s_start_run(p, j);
            }
            if (ns_now_ms() > j->ann.deadline_ms)
                s_fail(p, j, "deadline passed while fetching inputs");
            break;
        case PJ_RUN: {
            int got = ns_worker_collect(p->worker, &j->res);
            if (got <= 0)
                break;
            if (j->res.status != NS_OK) {
                s_fail(p, j, j->res.error);
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
                s_set(j, PJ_HOLD);
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
            if ((over && now - j->since_ms > 5000) ||
                now - j->since_ms > S_RETAIN_MS)
                s_job_clear(j);
            break;
        }
        default:
            break;
        }
    }
}

/* Take in payments and released collateral with a claim entry. */
static void s_on_claim_timer(void *user, uint64_t now)
{
    (void)now;
    ns_provider_t *p = user;
    uint8_t ref[NS_HASH_BYTES];
    if (ns_ledger_unclaimed(p->o.ledger, p->self, ref, 1) > 0) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        if (ns_ledger_sync_append(p->o.sync, p->o.me, NS_ENTRY_STAKE, &b, true,
                                  id) == NS_OK)
            p->stats.claims++;
    }
    s_update_offer(p);
}

/* ---- life -------------------------------------------------------------------
 */

ns_provider_t *ns_provider_new(const ns_provider_opts_t *o, int *err)
{
    ns_provider_t *p = calloc(1, sizeof *p);
    if (!p) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    p->o = *o;
    memcpy(p->self, ns_identity_pk(o->me), NS_ID_BYTES);
    ns_buf_init(&p->body);
    int rc;
    if ((rc = ns_p2p_register(o->p2p, NS_MSG_MKT_JOB, true, s_on_job, p)) ||
        (rc = ns_p2p_register(o->p2p, NS_MSG_MKT_AWARDED, false, s_on_awarded,
                              p)) ||
        (rc =
             ns_p2p_register(o->p2p, NS_MSG_MKT_FETCH, false, s_on_fetch, p)) ||
        (rc =
             ns_p2p_register(o->p2p, NS_MSG_MKT_CHUNK, false, s_on_chunk, p)) ||
        (rc = ns_p2p_add_timer(o->p2p, 25, s_on_timer, p)) ||
        (rc = ns_p2p_add_timer(o->p2p, 2000, s_on_claim_timer, p))) {
        *err = rc;
        ns_provider_destroy(&p);
        return NULL;
    }
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
        if (b.amount && ns_ledger_sync_append(o->sync, o->me, NS_ENTRY_STAKE,
                                              &b, true, id) == NS_OK)
            ns_info(NS_MOD_MARKET, "event=staked amount=%llu",
                    (unsigned long long)b.amount);
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
    ns_worker_destroy(&p->worker);
    ns_buf_release(&p->body);
    free(p);
    *pp = NULL;
}

void ns_provider_pack_status(const ns_provider_t *p, msgpack_packer *pk)
{
    msgpack_pack_map(pk, 11);
#define KV(k, v)                                                               \
    ns_mp_str(pk, k);                                                          \
    msgpack_pack_uint64(pk, v)
    KV("announces_seen", p->stats.announces);
    KV("bids", p->stats.bids);
    KV("awards", p->stats.awards);
    KV("accepts", p->stats.accepts);
    KV("results", p->stats.results);
    KV("failed", p->stats.failed);
    KV("served_bytes", p->stats.served_bytes);
    KV("refused_requesters", p->stats.refused_requester);
    KV("claims", p->stats.claims);
    KV("table_full", p->stats.table_full);
    KV("busy", s_busy(p));
#undef KV
}
