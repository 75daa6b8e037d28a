/* test_market_sm.c - the requester and provider state machines (node/)
 * driven by a fake monotonic clock and in-memory message queues, each
 * party on its own real LMDB ledger, kernels on the real OpenCL device in
 * the real sandboxed worker (this binary answers `worker`).
 *
 * The "network" delivers every queued message in order; a party's ledger
 * append is ingested by every other party's ledger at once (gossip without
 * delay). Filters drop chosen messages to make a provider miss an award.
 *
 * Scenarios: award -> accept -> result -> settle; accept timeout (the
 * award is lost, the job goes to the next bidder); slash (a lazy provider
 * is caught, slashed and the job completed by another); cancel (no bid:
 * escrow refunded); deadline (a silent provider pays the penalty);
 * resume (a new requester picks the job up from the ledger).
 */
#include "../check.h"
#include "../market/ledger_fixture.h"

#include "nightshift/log.h"
#include "nightshift/market.h"
#include "nightshift/policy.h"
#include "nightshift/provider.h"
#include "nightshift/requester.h"
#include "nightshift/runner.h"
#include "nightshift/slash.h"
#include "nightshift/verified.h"
#include "nightshift/worker.h"
#include "nightshift/worker_pool.h"

#include <time.h>

#define W_PARTIES 3 /* 0 = requester, 1 and 2 = providers */
#define W_N 1024    /* floats in the vector_add job */

typedef struct s_world s_world_t;

typedef struct s_msg {
    uint8_t type;
    uint32_t from, to;
    uint8_t *body;
    size_t len;
    struct s_msg *next;
} s_msg_t;

typedef struct {
    s_world_t *w;
    uint32_t idx;
    ns_ledger_t *ledger;
    ns_node_io_t io;
    ns_provider_t *provider;
    ns_requester_t *requester;
    ns_config_t cfg;
    ns_fault_t fault;
    uint32_t drop_awarded; /* AWARDED messages to drop on the way in */
    uint32_t drop_chunks;  /* CHUNK messages to drop on the way in */
    bool offline;          /* receives nothing */
    uint32_t free_slots;   /* last announced */
    ns_devinfo_t dev;      /* the device it claims */
} s_party_t;

struct s_world {
    fx_t fx;
    uint64_t mono;
    s_party_t p[W_PARTIES];
    s_msg_t *head, *tail;
    ns_wpool_t *pool; /* the requester's sandbox (this binary's `worker`) */
    ns_worker_t *slash_worker;
    ns_slash_ctx_t slash;
    ns_devinfo_t dev;
    /* the job */
    ns_job_t job;
    ns_buf_t packed;
    float a[W_N], b[W_N], want[W_N];
    ns_input_t inputs[NS_MAX_ARGS];
    uint8_t *outputs[NS_MAX_ARGS];
    char lines[64][160];
    uint32_t n_lines;
};

static s_world_t *s_w;
/* When set, the job is this source (vector_add's signature) instead of the
 * built-in. */
static const char *s_source;
static bool s_no_preflight;       /* the next world's requester skips it */
static bool s_liar;               /* provider 1 claims an impossible device */
static bool s_small_alloc;        /* providers allocate 1 KiB at most */
static bool s_wait = false;       /* the requester waits for a provider */
static uint32_t s_bid_target;     /* the next requester's (0: policy) */
static uint8_t s_nonce;           /* the next job's nonce (another id) */
static ns_verified_t *s_verified; /* the next requester challenges */

/* ---- the fake network --------------------------------------------------- */

static uint32_t s_who(s_world_t *w, const uint8_t id[NS_ID_BYTES])
{
    for (uint32_t i = 0; i < W_PARTIES; i++)
        if (memcmp(w->fx.acct[i].pk, id, NS_ID_BYTES) == 0)
            return i;
    return UINT32_MAX;
}

static int s_enqueue(s_world_t *w, uint32_t from, uint32_t to, uint8_t type,
                     const uint8_t *body, size_t len)
{
    s_msg_t *m = calloc(1, sizeof *m);
    if (!m || !(m->body = malloc(len ? len : 1))) {
        free(m);
        return NS_ERR_NOMEM;
    }
    memcpy(m->body, body, len);
    m->len = len;
    m->type = type;
    m->from = from;
    m->to = to;
    if (w->tail)
        w->tail->next = m;
    else
        w->head = m;
    w->tail = m;
    return NS_OK;
}

static int s_send(void *u, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                  const uint8_t *body, size_t len)
{
    s_party_t *p = u;
    uint32_t to = s_who(p->w, peer);
    if (to == UINT32_MAX)
        return NS_ERR_NOTFOUND;
    return s_enqueue(p->w, p->idx, to, type, body, len);
}

static int s_publish(void *u, uint8_t type, const uint8_t *body, size_t len)
{
    s_party_t *p = u;
    for (uint32_t i = 0; i < W_PARTIES; i++)
        if (i != p->idx) {
            int rc = s_enqueue(p->w, p->idx, i, type, body, len);
            if (rc != NS_OK)
                return rc;
        }
    return NS_OK;
}

static int s_dial(void *u, const uint8_t peer[NS_ID_BYTES], const char *ep)
{
    (void)u;
    (void)peer;
    (void)ep;
    return NS_OK;
}

/* Append to our ledger (claiming open credits, as the sync does), then
 * every other ledger ingests the entry: gossip without delay. */
static int s_append(void *u, uint8_t type, const ns_entry_body_t *b,
                    ns_hash_t id)
{
    s_party_t *p = u;
    s_world_t *w = p->w;
    uint8_t refs[NS_MAX_REFS * NS_HASH_BYTES];
    ns_buf_t entry;
    ns_buf_init(&entry);
    const ns_identity_t *me = w->fx.acct[p->idx].id;
    uint32_t n_refs =
        ns_ledger_unclaimed(p->ledger, ns_identity_pk(me), refs, NS_MAX_REFS);
    int rc = ns_ledger_append(p->ledger, me, type, b, refs, n_refs, &entry, id);
    for (uint32_t i = 0; rc == NS_OK && i < W_PARTIES; i++) {
        if (i == p->idx)
            continue;
        int in =
            ns_ledger_ingest(w->p[i].ledger, entry.data, entry.len, NULL, NULL);
        if (in != NS_OK && in != NS_ERR_DUPLICATE)
            fprintf(stderr, "party %u refused a %s of party %u: %s\n", i,
                    ns_entry_type_name(type), p->idx, ns_errname(in));
        if (ns_ledger_commit(w->p[i].ledger) != NS_OK)
            rc = NS_ERR_IO;
    }
    ns_buf_release(&entry);
    return rc;
}

static void s_set_offer(void *u, uint64_t stake, uint32_t free_slots)
{
    s_party_t *p = u;
    (void)stake;
    p->free_slots = free_slots;
}

static bool s_visit(void *u, ns_peer_visit_fn fn, void *fu)
{
    s_party_t *p = u;
    ns_heartbeat_t *hb = calloc(1, sizeof *hb);
    bool stop = false;
    for (uint32_t i = 0; hb && i < W_PARTIES && !stop; i++) {
        if (i == p->idx)
            continue;
        memset(hb, 0, sizeof *hb);
        if (p->w->p[i].provider) {
            hb->n_devices = 1;
            hb->devices[0] = p->w->p[i].dev;
            hb->free_slots = p->w->p[i].free_slots;
            hb->price = p->w->p[i].cfg.price;
            hb->stake = UINT64_C(1) << 40; /* micro-credits: any collateral */
        }
        stop = fn(fu, p->w->fx.acct[i].pk, hb);
    }
    free(hb);
    return stop;
}

static uint32_t s_live(void *u)
{
    (void)u;
    return W_PARTIES - 1;
}

static uint64_t s_now(void *u)
{
    (void)u;
    return ns_now_ms();
}

static uint64_t s_mono(void *u)
{
    s_party_t *p = u;
    return p->w->mono;
}

typedef struct {
    s_world_t *w;
    uint32_t self, peer;
} s_reply_ctx_t;

static int s_reply(void *ctx, uint8_t type, const uint8_t *body, size_t len)
{
    s_reply_ctx_t *c = ctx;
    return s_enqueue(c->w, c->self, c->peer, type, body, len);
}

/* Deliver every queued message (and those they cause). */
static void s_deliver(s_world_t *w)
{
    while (w->head) {
        s_msg_t *m = w->head;
        w->head = m->next;
        if (!w->head)
            w->tail = NULL;
        s_party_t *to = &w->p[m->to];
        bool drop = to->offline;
        if (!drop && m->type == NS_MSG_MKT_AWARDED && to->drop_awarded) {
            to->drop_awarded--;
            drop = true;
        }
        if (!drop && m->type == NS_MSG_MKT_CHUNK && to->drop_chunks) {
            to->drop_chunks--;
            drop = true;
        }
        if (!drop) {
            s_reply_ctx_t ctx = {w, m->to, m->from};
            ns_node_msg_t nm = {m->type, w->fx.acct[m->from].pk,
                                m->body, m->len,
                                s_reply, &ctx};
            if (to->requester && ns_requester_owns(to->requester, &nm))
                (void)ns_requester_on_msg(to->requester, &nm);
            else if (to->provider)
                (void)ns_provider_on_msg(to->provider, &nm);
        }
        free(m->body);
        free(m);
    }
}

/* One step: deliver, tick everybody at the fake time, let real time pass a
 * little for the worker. The fake clock waits while a requester's device
 * work runs on its thread (in real time, as in a node). */
static bool s_busy(s_world_t *w)
{
    for (uint32_t i = 0; i < W_PARTIES; i++)
        if (w->p[i].requester && ns_requester_busy(w->p[i].requester))
            return true;
    return false;
}

static void s_step(s_world_t *w, uint64_t advance_ms)
{
    s_deliver(w);
    if (s_busy(w))
        advance_ms = 0;
    w->mono += advance_ms;
    for (uint32_t i = 0; i < W_PARTIES; i++) {
        if (w->p[i].provider) {
            ns_provider_tick(w->p[i].provider, w->mono);
            if (w->mono % NS_POLICY_CLAIM_MS < advance_ms)
                ns_provider_claim(w->p[i].provider);
        }
        if (w->p[i].requester)
            ns_requester_tick(w->p[i].requester, w->mono);
    }
    s_deliver(w);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* Run until the requester is finished or max_steps of 5 ms pass (steps
 * while a requester's device work runs do not count: the fake clock
 * waits for it, s_step). */
static bool s_run(s_world_t *w, uint32_t max_steps)
{
    for (uint32_t i = 0; i < max_steps;) {
        if (ns_requester_finished(w->p[0].requester))
            return true;
        bool busy = s_busy(w);
        s_step(w, 5);
        i += !busy;
    }
    return ns_requester_finished(w->p[0].requester);
}

/* Step until the requester has awarded its first round (its pre-flight,
 * on a thread of its own, takes real time first). */
static void s_until_awarded(s_world_t *w)
{
    for (int i = 0; i < 4000 && ns_requester_receipt(w->p[0].requester)->phase <
                                    NS_RQ_ACCEPT;
         i++)
        s_step(w, 5);
}

/* ---- set-up ------------------------------------------------------------- */

static void s_progress(void *u, const char *line)
{
    s_world_t *w = u;
    if (w->n_lines < 64)
        snprintf(w->lines[w->n_lines++], sizeof w->lines[0], "%s", line);
}

static bool s_said(s_world_t *w, const char *needle)
{
    for (uint32_t i = 0; i < w->n_lines; i++)
        if (strstr(w->lines[i], needle))
            return true;
    return false;
}

static void s_job_setup(s_world_t *w)
{
    const ns_builtin_t *b = ns_builtin_find("vector_add");
    ns_job_t *j = &w->job;
    ns_job_init(j);
    if (s_source) {
        if (ns_job_set_source(j, s_source, strlen(s_source)) != NS_OK)
            fprintf(stderr, "bad test source\n");
        snprintf(j->entry, sizeof j->entry, "broken");
    } else {
        snprintf(j->builtin, sizeof j->builtin, "vector_add");
        ns_hash(j->source_hash, b->source, b->source_len);
        snprintf(j->entry, sizeof j->entry, "%s", b->entry);
    }
    j->dims = 1;
    j->global[0] = W_N;
    /* a given estimate: not the pre-flight's measure, which on a slow
     * machine could price the job beyond these tests' tiny max price */
    j->work_estimate = W_N * 1000;
    for (uint32_t i = 0; i < W_N; i++) {
        w->a[i] = (float)i * 0.25f - 3.0f;
        w->b[i] = 1.0f / (float)(i + 1);
        w->want[i] = w->a[i] + w->b[i];
    }
    j->n_args = 4;
    j->args[0].kind = NS_ARG_IN;
    j->args[0].size = sizeof w->a;
    ns_hash(j->args[0].hash, w->a, sizeof w->a);
    j->args[1].kind = NS_ARG_IN;
    j->args[1].size = sizeof w->b;
    ns_hash(j->args[1].hash, w->b, sizeof w->b);
    j->args[2].kind = NS_ARG_OUT;
    j->args[2].size = sizeof w->want;
    j->args[2].item_bytes = sizeof(float);
    j->args[3].kind = NS_ARG_U32;
    j->args[3].v.u32 = W_N;
    w->inputs[0] =
        (ns_input_t){.data = (const uint8_t *)w->a, .len = sizeof w->a};
    w->inputs[1] =
        (ns_input_t){.data = (const uint8_t *)w->b, .len = sizeof w->b};
    w->outputs[2] = calloc(1, sizeof w->want);
    ns_buf_init(&w->packed);
    ns_mp_writer_t wr;
    msgpack_packer pk;
    ns_mp_writer_init(&wr, &pk, &w->packed);
    ns_job_pack(&pk, j);
}

static ns_requester_opts_t s_req_opts(s_world_t *w, const uint8_t nonce[16])
{
    ns_requester_opts_t o;
    memset(&o, 0, sizeof o);
    o.job = &w->job;
    o.packed = w->packed.data;
    o.packed_len = w->packed.len;
    o.inputs = w->inputs;
    o.outputs = w->outputs;
    if (ns_job_id(&w->job, o.desc_id) != NS_OK)
        fprintf(stderr, "job id failed\n");
    memcpy(o.nonce, nonce, 16);
    ns_ledger_job_id(o.job_id, w->fx.acct[0].pk, o.desc_id, nonce);
    o.max_price = 10;
    o.collateral = 50;
    o.bid_window_ms = 50;
    o.deadline_s = 60;
    o.timeout_s = 600;
    o.endpoint = "tcp://127.0.0.1:1";
    o.progress = s_progress;
    o.progress_user = w;
    return o;
}

/* The requester cut (destroyed as a crash would leave it) and started
 * again with --resume on the same job; false if it cannot be made. */
static bool s_resume_requester(s_world_t *w)
{
    ns_requester_destroy(&w->p[0].requester);
    uint8_t nonce[16] = {1};
    ns_requester_opts_t o = s_req_opts(w, nonce);
    o.resume = true;
    int rc;
    w->p[0].requester =
        ns_requester_new(&o, &w->p[0].io, w->p[0].ledger, w->pool,
                         w->fx.acct[0].id, w->fx.genesis.network_id, &rc);
    return w->p[0].requester != NULL;
}

/* Providers 1 and 2 with the given faults; the requester's job on top. */
static s_world_t *s_world(const ns_fault_t *f1, const ns_fault_t *f2,
                          uint32_t deadline_s)
{
    s_world_t *w = calloc(1, sizeof *w);
    uint64_t credits[W_PARTIES] = {1000, 1000, 1000};
    if (!w || fx_init(&w->fx, "sm", W_PARTIES, credits) != NS_OK)
        return NULL;
    int rc;
    ns_worker_opts_t wo;
    ns_worker_opts_init(&wo);
    w->pool = ns_wpool_new(&wo, 1, &rc);
    if (!w->pool) {
        fprintf(stderr, "no worker pool: %s\n", ns_strerror(rc));
        return NULL;
    }
    w->slash = (ns_slash_ctx_t){.worker = &w->slash_worker};
    w->dev.type = NS_DEV_CPU;
    w->dev.global_mem_bytes = UINT64_C(1) << 30;
    w->dev.gflops = 1;
    w->dev.gbps = 0.05; /* modest claims: deadlines even a sanitizer meets */
    w->dev.max_alloc_bytes = UINT64_C(256) << 20;
    snprintf(w->dev.cl_c_version, sizeof w->dev.cl_c_version, "OpenCL C 1.2");
    s_job_setup(w);
    for (uint32_t i = 0; i < W_PARTIES; i++) {
        s_party_t *p = &w->p[i];
        char name[16];
        snprintf(name, sizeof name, "p%u", i);
        p->w = w;
        p->idx = i;
        p->ledger = i == 0 ? w->fx.l : fx_open_other(&w->fx, name);
        ns_ledger_set_verifier(p->ledger, ns_slash_verify, &w->slash);
        p->io = (ns_node_io_t){
            p,      s_send, s_publish, s_dial, s_append, s_set_offer, s_visit,
            s_live, s_now,  s_mono,    NULL,   NULL,     NULL,        NULL};
        ns_config_defaults(&p->cfg);
        p->cfg.slots = 1;
        p->cfg.stake = 100;
        p->dev = w->dev;
        if (s_small_alloc)
            p->dev.max_alloc_bytes = 1024;
        if (s_liar && i == 1) { /* claims a device far beyond its own */
            p->dev.gflops = 1e9;
            p->dev.gbps = 1e9;
        }
    }
    const ns_fault_t *faults[W_PARTIES] = {NULL, f1, f2};
    for (uint32_t i = 1; i < W_PARTIES; i++) {
        s_party_t *p = &w->p[i];
        if (faults[i])
            p->fault = *faults[i];
        ns_provider_opts_t po = {p->ledger,  w->fx.acct[i].id, &p->cfg,
                                 {0},        &p->dev,          1,
                                 w->fx.root, p->fault,         NULL};
        memcpy(po.network_id, w->fx.genesis.network_id, NS_HASH_BYTES);
        p->provider = ns_provider_new(&po, &p->io, &rc);
        if (!p->provider)
            return NULL;
    }
    uint8_t nonce[16] = {1, s_nonce};
    ns_requester_opts_t o = s_req_opts(w, nonce);
    o.deadline_s = deadline_s;
    o.no_preflight = s_no_preflight;
    o.no_wait = !s_wait; /* today's tests: an empty auction fails at once */
    o.bid_target = s_bid_target;
    o.verified = s_verified;
    o.chal_allowance_ms = 20; /* the liar's work takes longer than this */
    w->p[0].requester =
        ns_requester_new(&o, &w->p[0].io, w->p[0].ledger, w->pool,
                         w->fx.acct[0].id, w->fx.genesis.network_id, &rc);
    return w->p[0].requester ? w : NULL;
}

static void s_world_free(s_world_t *w)
{
    if (!w)
        return;
    while (w->head) {
        s_msg_t *m = w->head;
        w->head = m->next;
        free(m->body);
        free(m);
    }
    for (uint32_t i = 0; i < W_PARTIES; i++) {
        ns_requester_destroy(&w->p[i].requester);
        ns_provider_destroy(&w->p[i].provider);
        if (i > 0)
            ns_ledger_close(&w->p[i].ledger);
    }
    ns_wpool_destroy(&w->pool);
    ns_worker_destroy(&w->slash_worker);
    ns_job_release(&w->job);
    ns_buf_release(&w->packed);
    free(w->outputs[2]);
    fx_free(&w->fx);
    free(w);
}

static ns_account_t s_acct(s_world_t *w, uint32_t ledger, uint32_t who)
{
    ns_account_t a;
    memset(&a, 0, sizeof a);
    if (ns_ledger_account(w->p[ledger].ledger, w->fx.acct[who].pk, &a) != NS_OK)
        fprintf(stderr, "no account %u in ledger %u\n", who, ledger);
    return a;
}

static uint8_t s_job_state(s_world_t *w, uint32_t ledger)
{
    ns_ledger_job_t lj;
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    (void)r;
    uint8_t nonce[16] = {1};
    ns_hash_t desc, id;
    if (ns_job_id(&w->job, desc) != NS_OK)
        return 0;
    ns_ledger_job_id(id, w->fx.acct[0].pk, desc, nonce);
    return ns_ledger_job(w->p[ledger].ledger, id, &lj) == NS_OK ? lj.state : 0;
}

/* Every party's ledger agrees on the totals (conservation). */
static bool s_conserved(s_world_t *w)
{
    for (uint32_t i = 0; i < W_PARTIES; i++) {
        uint64_t sum = 0;
        if (ns_ledger_check_conservation(w->p[i].ledger, &sum) != NS_OK) {
            fprintf(stderr, "ledger %u: balances sum to %llu\n", i,
                    (unsigned long long)sum);
            return false;
        }
    }
    return true;
}

/* ---- scenarios ---------------------------------------------------------- */

TEST(award_accept_result_settle)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    /* provider 2 is busy elsewhere: one bid, so the winner is known */
    w->p[2].offline = true;
    ns_account_t r0 = s_acct(w, 0, 0), p0 = s_acct(w, 0, 1);
    CHECK(s_run(w, 20000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->rounds, 1);
    CHECK_EQ_INT(r->slashed, 0);
    CHECK(memcmp(r->provider, w->fx.acct[1].pk, NS_ID_BYTES) == 0);
    CHECK(r->checked > 0);
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    for (uint32_t l = 0; l < W_PARTIES; l++)
        CHECK_EQ_INT(s_job_state(w, l), NS_JOB_SETTLED);
    /* the provider takes its pay in with its next claim */
    for (int i = 0; i < 500; i++)
        s_step(w, 5);
    ns_account_t r1 = s_acct(w, 1, 0), p1 = s_acct(w, 2, 1);
    CHECK_EQ_INT(r1.free + r1.locked_escrow, r0.free - r->price);
    CHECK_EQ_INT(r1.locked_escrow, 0);
    CHECK_EQ_INT(p1.free + p1.staked + p1.locked_collateral,
                 p0.free + p0.staked + r->price);
    CHECK_EQ_INT(p1.locked_collateral, 0);
    CHECK_EQ_INT(p1.jobs_settled, 1);
    CHECK(s_said(w, "settled"));
    CHECK(s_conserved(w));
    s_world_free(w);
}

/* Bids from a bounded set (issue 27): asked for one bidder of the two
 * that qualify, the requester announces a draw of half of them; a round
 * where the drawn one cannot take the job (or none is drawn) is announced
 * again with a wider draw instead of failing (no_wait is on), and the job
 * settles. Run over several jobs, so that both outcomes of the draw
 * come up. */
TEST(bidder_draw_asks_a_share_and_widens)
{
    uint32_t widened = 0, first_round = 0;
    for (uint8_t k = 0; k < 6; k++) {
        s_bid_target = 1;
        s_nonce = k;
        s_world_t *w = s_world(NULL, NULL, 60);
        s_bid_target = 0;
        s_nonce = 0;
        if (!CHECK(w != NULL))
            return;
        w->p[2].offline = true; /* drawn or not, it never bids */
        CHECK(s_run(w, 20000));
        const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
        CHECK_EQ_INT(r->phase, NS_RQ_DONE);
        CHECK(memcmp(r->provider, w->fx.acct[1].pk, NS_ID_BYTES) == 0);
        widened += s_said(w, "asking more");
        first_round += r->rounds == 1;
        CHECK(s_conserved(w));
        s_world_free(w);
    }
    /* each job settled in its first round (its one provider drawn) or
     * after a wider draw (it was not: half the time), never failed */
    CHECK(widened + first_round == 6);
}

/* A CHUNK lost on its way (a dropped connection), to the provider (the
 * descriptor) and to the requester (the statement): each side asks again
 * from its first missing chunk after NS_POLICY_FETCH_STALL_MS instead of
 * waiting for a deadline, and the job settles in its first round. */
TEST(lost_chunks_are_asked_again)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    w->p[1].drop_chunks = 1;
    w->p[0].drop_chunks = 1;
    CHECK(s_run(w, 20000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->rounds, 1);
    CHECK_EQ_INT(r->cancelled, 0);
    CHECK_EQ_INT(w->p[1].drop_chunks, 0);
    CHECK_EQ_INT(w->p[0].drop_chunks, 0);
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    s_world_free(w);
}

TEST(accept_timeout_moves_on)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    /* provider 1 never hears of its award; provider 2 only bids in the
     * second round (it is offline for the first) */
    w->p[1].drop_awarded = 1;
    w->p[2].offline = true;
    for (int i = 0; i < 40 && w->p[1].drop_awarded != 0; i++)
        s_step(w, 5);
    /* run past the bid window and the award; then provider 2 comes up */
    s_until_awarded(w);
    for (int i = 0; i < 40; i++)
        s_step(w, 5);
    w->p[2].offline = false;
    CHECK(s_run(w, 40000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->rounds, 2);
    CHECK_EQ_INT(r->cancelled, 1);
    CHECK(memcmp(r->provider, w->fx.acct[2].pk, NS_ID_BYTES) == 0);
    CHECK(s_said(w, "did not accept in time"));
    /* provider 1 never accepted: nothing of its stake moved */
    ns_account_t p1 = s_acct(w, 0, 1);
    CHECK_EQ_INT(p1.locked_collateral, 0);
    CHECK_EQ_INT(p1.jobs_slashed, 0);
    CHECK_EQ_INT(p1.free + p1.staked, 1000);
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(lazy_provider_slashed_job_completed_elsewhere)
{
    ns_fault_t lazy = {.lazy = 1.0};
    s_world_t *w = s_world(&lazy, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true; /* the lazy one wins the first round */
    /* up for the second round: before the first one's provider fails
     * (the round that follows closes without it otherwise) */
    s_until_awarded(w);
    w->p[2].offline = false;
    CHECK(s_run(w, 60000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->slashed, 1);
    CHECK_EQ_INT(r->rounds, 2);
    CHECK(memcmp(r->provider, w->fx.acct[2].pk, NS_ID_BYTES) == 0);
    CHECK(s_said(w, "slashed with a fraud proof"));
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    /* every ledger burned the cheater's collateral */
    for (uint32_t l = 0; l < W_PARTIES; l++) {
        ns_account_t p = s_acct(w, l, 1);
        CHECK_EQ_INT(p.jobs_slashed, 1);
        CHECK_EQ_INT(p.locked_collateral, 0);
        CHECK_EQ_INT(p.free + p.staked, 1000 - 50);
    }
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(no_bid_cancels_and_refunds)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[1].offline = w->p[2].offline = true;
    CHECK(s_run(w, 2000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    CHECK(strstr(r->error, "no provider bid") != NULL);
    CHECK(strstr(r->error, "2 providers known") != NULL);
    ns_account_t a = s_acct(w, 0, 0);
    CHECK_EQ_INT(a.locked_escrow, 0);
    CHECK_EQ_INT(a.free, 1000);
    for (uint32_t l = 0; l < W_PARTIES; l++)
        CHECK_EQ_INT(s_job_state(w, l), NS_JOB_CANCELLED);
    CHECK(s_conserved(w));
    s_world_free(w);
}

/* The job's 4 KiB buffers do not fit a device that allocates 1 KiB at
 * most: nobody bids (rather than accepting and failing in turn), and the
 * error says which requirement nobody met. */
TEST(buffers_beyond_the_largest_allocation_get_no_bid)
{
    s_small_alloc = true;
    s_world_t *w = s_world(NULL, NULL, 60);
    s_small_alloc = false;
    if (!CHECK(w != NULL))
        return;
    CHECK(s_run(w, 2000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    CHECK(strstr(r->error, "no provider bid") != NULL);
    CHECK(strstr(r->error, "buffers that fit (largest 0.0 MiB, all 0.0 MiB): "
                           "0 of 2") != NULL);
    for (uint32_t l = 0; l < W_PARTIES; l++)
        CHECK_EQ_INT(s_job_state(w, l), NS_JOB_CANCELLED);
    CHECK(s_conserved(w));
    s_world_free(w);
}

/* No provider can take the job yet: the requester waits (saying why),
 * announces again, and the job settles once a provider is back. */
TEST(waits_for_a_provider_then_settles)
{
    s_wait = true;
    s_world_t *w = s_world(NULL, NULL, 60);
    s_wait = false;
    if (!CHECK(w != NULL))
        return;
    w->p[1].offline = w->p[2].offline = true;
    for (int i = 0; i < 600; i++) /* 3 s: three announcements or so */
        s_step(w, 5);
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_WAITING);
    CHECK(s_said(w, "waiting for a provider"));
    CHECK(s_said(w, "no provider bid"));
    CHECK_EQ_INT(s_job_state(w, 0), NS_JOB_OPEN); /* escrow stays locked */
    w->p[1].offline = false; /* heard of at the next announcement */
    CHECK(s_run(w, 4000));
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK(r->rounds >= 2);
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(deadline_penalises_silent_provider)
{
    ns_fault_t silent = {.silent = true};
    s_world_t *w = s_world(&silent, NULL, 1);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true; /* only the silent one bids */
    /* the deadline is wall-clock time: let a real second pass */
    uint64_t until = ns_now_ms() + 1300;
    while (ns_now_ms() < until && !ns_requester_finished(w->p[0].requester))
        s_step(w, 5);
    CHECK(s_run(w, 4000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK(s_said(w, "missed the deadline"));
    CHECK_EQ_INT(r->cancelled, 2); /* the late provider, the empty round */
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    /* the empty second round says what happened in the first */
    CHECK(strstr(r->error, "earlier rounds: 1:") != NULL &&
          strstr(r->error, "missed the deadline") != NULL);
    for (int i = 0; i < 500; i++) /* the provider claims what is released */
        s_step(w, 5);
    ns_account_t p = s_acct(w, 0, 1), req = s_acct(w, 0, 0);
    CHECK_EQ_INT(p.jobs_cancelled, 1);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.free + p.staked, 1000 - 50 / 10); /* a tenth burned */
    CHECK_EQ_INT(req.locked_escrow, 0);
    CHECK_EQ_INT(req.free, 1000);
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(resume_picks_the_job_up)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    /* run until the job is accepted, then the requester "crashes" */
    for (int i = 0; i < 2000 && ns_requester_receipt(w->p[0].requester)->phase <
                                    NS_RQ_RUNNING;
         i++)
        s_step(w, 5);
    CHECK_EQ_INT(ns_requester_receipt(w->p[0].requester)->phase, NS_RQ_RUNNING);
    memset(w->outputs[2], 0, sizeof w->want);
    if (!CHECK(s_resume_requester(w)))
        return;
    CHECK(s_run(w, 20000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK(s_said(w, "resuming"));
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    CHECK_EQ_INT(s_job_state(w, 1), NS_JOB_SETTLED);
    /* a settled job cannot be resumed again */
    if (!CHECK(s_resume_requester(w)))
        return;
    CHECK(s_run(w, 10));
    r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE); /* its receipt, from the ledger */
    CHECK(memcmp(r->provider, w->fx.acct[1].pk, NS_ID_BYTES) == 0);
    CHECK(r->price > 0 && r->price + r->refund == 10);
    CHECK(s_said(w, "settled before"));
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(provider_failure_moves_on_without_penalty)
{
    ns_fault_t fail = {.fail = true};
    s_world_t *w = s_world(&fail, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true; /* the failing one wins the first round */
    /* up for the second round: before the first one's provider fails
     * (the round that follows closes without it otherwise) */
    s_until_awarded(w);
    w->p[2].offline = false;
    CHECK(s_run(w, 40000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->failures, 1);
    CHECK_EQ_INT(r->rounds, 2);
    CHECK_EQ_INT(r->slashed, 0);
    CHECK(memcmp(r->provider, w->fx.acct[2].pk, NS_ID_BYTES) == 0);
    CHECK(s_said(w, "reported a failure (crash"));
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    for (int i = 0; i < 500; i++)
        s_step(w, 5);
    ns_account_t p = s_acct(w, 0, 1);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.free + p.staked, 1000); /* it told us at once */
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(broken_kernel_ends_the_job_at_once)
{
    s_source = "kernel void broken(global const float *a, global const "
               "float *b,\n global float *c, uint n)\n{\n  c[0] = a[0] + "
               ";\n}\n";
    s_no_preflight = true; /* as if it built here and not there */
    s_world_t *w = s_world(NULL, NULL, 60);
    s_source = NULL;
    s_no_preflight = false;
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    /* award, accept, fetch, build in the worker: the failure comes back
     * as soon as the build fails, long before the 60 s deadline */
    CHECK(s_run(w, 20000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    CHECK_EQ_INT(r->failures, 1);
    CHECK_EQ_INT(r->rounds, 1);
    CHECK(strstr(r->error, "build") != NULL);
    CHECK(strstr(r->error, "here too") != NULL);
    for (int i = 0; i < 500; i++)
        s_step(w, 5);
    ns_account_t req = s_acct(w, 0, 0), p = s_acct(w, 0, 1);
    CHECK_EQ_INT(req.free, 1000); /* escrow refunded */
    CHECK_EQ_INT(req.locked_escrow, 0);
    CHECK_EQ_INT(p.free + p.staked, 1000); /* no penalty */
    CHECK_EQ_INT(p.locked_collateral, 0);
    for (uint32_t l = 0; l < W_PARTIES; l++)
        CHECK_EQ_INT(s_job_state(w, l), NS_JOB_CANCELLED);
    CHECK(s_conserved(w));
    s_world_free(w);
}

/* A kernel whose units cannot be checked alone ends the job with the
 * pre-flight's reason, and nobody pays for it: refused before the JOB
 * entry when the sample's verdict is in by then, else cancelled (any
 * award withdrawn, escrow back, the provider's collateral released, no
 * slash) before any spot check. */
static void s_refused_or_cancelled(s_world_t *w)
{
    for (int i = 0; i < 500; i++) /* released collateral: claimed */
        s_step(w, 5);
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    CHECK(strstr(r->error, "reads its outputs") != NULL);
    CHECK_EQ_INT(r->slashed, 0);
    ns_account_t req = s_acct(w, 0, 0);
    CHECK_EQ_INT(req.free, 1000);
    CHECK_EQ_INT(req.locked_escrow, 0);
    for (uint32_t i = 1; i < W_PARTIES; i++) {
        ns_account_t p = s_acct(w, 0, i);
        CHECK_EQ_INT(p.free + p.staked, 1000); /* no penalty */
        CHECK_EQ_INT(p.locked_collateral, 0);
    }
    int st = s_job_state(w, 0);
    CHECK(st == 0 || st == NS_JOB_CANCELLED);
    CHECK(st != 0 || req.seq == 0); /* refused: nothing posted */
    CHECK(s_conserved(w));
}

TEST(preflight_refuses_a_kernel_that_reads_its_outputs)
{
    /* a kernel that adds into its output: units cannot be checked alone */
    s_source = "kernel void broken(global const float *a, global const "
               "float *b, global float *c, uint n)\n{ size_t i = "
               "get_global_id(0); c[i] += a[i] + b[i]; }\n";
    s_world_t *w = s_world(NULL, NULL, 60);
    s_source = NULL;
    if (!CHECK(w != NULL))
        return;
    CHECK(s_run(w, 100));
    s_refused_or_cancelled(w);
    s_world_free(w);
}

/* The same kernel, slow enough that its sample's checks end well after
 * the timing runs: the job is announced (and may be awarded and run)
 * before the verdict, which still ends it before any spot check. */
TEST(preflight_verdict_after_the_announcement_cancels)
{
    s_source = "kernel void broken(global const float *a, global const "
               "float *b, global float *c, uint n)\n{ size_t i = "
               "get_global_id(0); float x = a[i];\n"
               "for (uint k = 0; k < n * 4096u; k++) x = x * 0.999f + b[i];\n"
               "c[i] += x; }\n";
    s_world_t *w = s_world(NULL, NULL, 60);
    s_source = NULL;
    if (!CHECK(w != NULL))
        return;
    CHECK(s_run(w, 400));
    s_refused_or_cancelled(w);
    CHECK_EQ_INT(s_job_state(w, 0), NS_JOB_CANCELLED); /* it was posted */
    CHECK(ns_requester_receipt(w->p[0].requester)->rounds >= 1);
    s_world_free(w);
}

/* The same slow kernel, the requester cut while the job runs and its
 * sample's verdict is not in yet: `submit --resume` picks the awarded job
 * up, and the verdict still comes before any spot check (the resumed
 * requester takes the sample again): cancelled, nobody slashed. */
TEST(resume_before_the_preflight_verdict_still_takes_it)
{
    s_source = "kernel void broken(global const float *a, global const "
               "float *b, global float *c, uint n)\n{ size_t i = "
               "get_global_id(0); float x = a[i];\n"
               "for (uint k = 0; k < n * 4096u; k++) x = x * 0.999f + b[i];\n"
               "c[i] += x; }\n";
    s_world_t *w = s_world(NULL, NULL, 60);
    s_source = NULL;
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    bool cut = false;
    for (int i = 0; i < 20000 && !ns_requester_finished(w->p[0].requester);
         i++) {
        if (ns_requester_receipt(w->p[0].requester)->phase >= NS_RQ_ACCEPT &&
            ns_requester_busy(w->p[0].requester)) {
            cut = true;
            break;
        }
        s_step(w, 5);
    }
    if (!cut) {
        fprintf(stderr, "  (the verdict came before the award: not cut)\n");
        s_world_free(w);
        return;
    }
    if (!CHECK(s_resume_requester(w)))
        return;
    CHECK(s_run(w, 40000));
    CHECK(s_said(w, "resuming"));
    s_refused_or_cancelled(w);
    CHECK_EQ_INT(s_job_state(w, 0), NS_JOB_CANCELLED);
    s_world_free(w);
}

TEST(forged_failure_is_ignored)
{
    s_world_t *w = s_world(NULL, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    for (int i = 0; i < 3000 && ns_requester_receipt(w->p[0].requester)->phase <
                                    NS_RQ_RUNNING;
         i++)
        s_step(w, 5);
    /* provider 2 (not the winner) claims the job failed, signed by
     * itself; then a FAILED from the winner's id signed by another key */
    ns_ledger_job_t lj;
    uint8_t nonce[16] = {1};
    ns_requester_opts_t o = s_req_opts(w, nonce);
    CHECK_RC(ns_ledger_job(w->p[0].ledger, o.job_id, &lj), NS_OK);
    ns_failure_t f;
    memset(&f, 0, sizeof f);
    memcpy(f.job_id, o.job_id, NS_HASH_BYTES);
    memcpy(f.award_id, lj.award_id, NS_HASH_BYTES);
    f.kind = NS_FAIL_BUILD;
    snprintf(f.reason, sizeof f.reason, "forged");
    ns_failure_sign(&f, w->fx.acct[2].id, w->fx.genesis.network_id);
    ns_buf_t b;
    ns_buf_init(&b);
    CHECK_RC(ns_failure_encode(&f, &b), NS_OK);
    ns_node_msg_t m = {
        NS_MSG_MKT_FAILED, w->fx.acct[2].pk, b.data, b.len, NULL, NULL};
    CHECK_RC(ns_requester_on_msg(w->p[0].requester, &m), NS_OK);
    m.sender = w->fx.acct[1].pk; /* the winner's id, another's signature */
    CHECK_RC(ns_requester_on_msg(w->p[0].requester, &m), NS_ERR_SIG);
    ns_buf_release(&b);
    CHECK(s_run(w, 20000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_DONE);
    CHECK_EQ_INT(r->failures, 0);
    s_world_free(w);
}

TEST(giving_up_cancels_and_releases)
{
    ns_fault_t silent = {.silent = true};
    s_world_t *w = s_world(&silent, NULL, 60);
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true;
    for (int i = 0; i < 3000 && ns_requester_receipt(w->p[0].requester)->phase <
                                    NS_RQ_RUNNING;
         i++)
        s_step(w, 5);
    CHECK_EQ_INT(ns_requester_receipt(w->p[0].requester)->phase, NS_RQ_RUNNING);
    /* --timeout-s 600 runs out on the fake clock, long before the
     * deadline: the job ends, nothing stays locked, nobody is penalised */
    s_step(w, 600 * 1000);
    CHECK(s_run(w, 10));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    CHECK_EQ_INT(r->phase, NS_RQ_FAILED);
    CHECK(strstr(r->error, "gave up") != NULL);
    CHECK(strstr(r->error, "refunded") != NULL);
    CHECK(strstr(r->error, "collateral released") != NULL);
    for (int i = 0; i < 500; i++)
        s_step(w, 5);
    ns_account_t req = s_acct(w, 0, 0), p = s_acct(w, 0, 1);
    CHECK_EQ_INT(req.free, 1000);
    CHECK_EQ_INT(req.locked_escrow, 0);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.free + p.staked, 1000);
    CHECK_EQ_INT(s_job_state(w, 2), NS_JOB_CANCELLED);
    CHECK(s_conserved(w));
    s_world_free(w);
}

TEST(hardware_challenges_before_the_award)
{
    char path[600];
    snprintf(path, sizeof path, "/tmp/ns-test-verified-%d", (int)getpid());
    unlink(path);
    s_verified = ns_verified_open(path);
    s_liar = true; /* provider 1: cheap, and claims a device it is not */
    s_world_t *w = s_world(NULL, NULL, 60);
    s_liar = false;
    if (!CHECK(w != NULL && s_verified != NULL))
        return;
    /* dearer (5 micro-credits for the job against 1, not a near-tie):
     * the liar wins */
    w->p[2].cfg.price = 5000;
    /* the providers warm their challenge programs meanwhile: a busy
     * provider is asked again */
    CHECK(s_run(w, 60000));
    const ns_receipt_t *r = ns_requester_receipt(w->p[0].requester);
    if (!CHECK_EQ_INT(r->phase, NS_RQ_DONE))
        for (uint32_t i = 0; i < w->n_lines; i++)
            fprintf(stderr, "    %s\n", w->lines[i]);
    CHECK(memcmp(r->provider, w->fx.acct[2].pk, NS_ID_BYTES) == 0);
    CHECK(s_said(w, "challenging"));
    CHECK(s_said(w, "failed its hardware challenge"));
    CHECK(s_said(w, "passed its hardware challenge"));
    CHECK_EQ_INT(ns_verified_get(s_verified, w->fx.acct[1].pk, NULL),
                 NS_VERIFIED_FAILED);
    CHECK_EQ_INT(ns_verified_get(s_verified, w->fx.acct[2].pk, NULL),
                 NS_VERIFIED_PASSED);
    CHECK(memcmp(w->outputs[2], w->want, sizeof w->want) == 0);
    /* remembered across restarts: the file holds the verdicts */
    ns_verified_close(&s_verified);
    ns_verified_t *again = ns_verified_open(path);
    CHECK_EQ_INT(ns_verified_get(again, w->fx.acct[1].pk, NULL),
                 NS_VERIFIED_FAILED);
    ns_verified_close(&again);
    unlink(path);
    /* nobody lost stake: failing a challenge costs a job, not credits */
    ns_account_t p1 = s_acct(w, 0, 1);
    CHECK_EQ_INT(p1.free + p1.staked + p1.locked_collateral, 1000);
    s_world_free(w);
}

/* The job's record in ledger l (zero when there is none). */
static ns_ledger_job_t s_ljob(s_world_t *w, uint32_t l)
{
    ns_ledger_job_t lj;
    uint8_t nonce[16] = {1};
    ns_hash_t desc, id;
    memset(&lj, 0, sizeof lj);
    if (ns_job_id(&w->job, desc) == NS_OK) {
        ns_ledger_job_id(id, w->fx.acct[0].pk, desc, nonce);
        if (ns_ledger_job(w->p[l].ledger, id, &lj) != NS_OK)
            memset(&lj, 0, sizeof lj);
    }
    return lj;
}

/* The requester vanishes once the provider's RESULT is in the ledger
 * (it never got the outputs, so it never settled). Past deadline + close
 * window (1 s here) + NS_POLICY_CLOSE_MARGIN_MS the provider closes the
 * job by itself: paid, its collateral back, the rest of the escrow a
 * credit for the requester, the same on every ledger. */
TEST(requester_gone_provider_closes)
{
    fx_close_window_ms = 1000;
    s_world_t *w = s_world(NULL, NULL, 3);
    fx_close_window_ms = 0;
    if (!CHECK(w != NULL))
        return;
    w->p[2].offline = true; /* one bid: the winner is provider 1 */
    ns_account_t r0 = s_acct(w, 0, 0), p0 = s_acct(w, 1, 1);
    for (int i = 0;
         i < 20000 && sodium_is_zero(s_ljob(w, 1).accept_id, NS_HASH_BYTES);
         i++)
        s_step(w, 5);
    w->p[0].drop_chunks = UINT32_MAX; /* the outputs never reach it */
    for (int i = 0;
         i < 20000 && sodium_is_zero(s_ljob(w, 1).result_id, NS_HASH_BYTES);
         i++)
        s_step(w, 5);
    if (!CHECK(!sodium_is_zero(s_ljob(w, 1).result_id, NS_HASH_BYTES))) {
        s_world_free(w);
        return;
    }
    ns_requester_destroy(&w->p[0].requester);
    w->p[0].offline = true;
    const ns_ledger_job_t lj = s_ljob(w, 1);
    CHECK_EQ_INT(lj.state, NS_JOB_AWARDED);
    CHECK_EQ_INT(s_acct(w, 1, 1).locked_collateral, 50);
    /* wall clock: deadline + window + margin + a close tick */
    uint64_t until = lj.deadline_ms + 1000 + NS_POLICY_CLOSE_MARGIN_MS +
                     NS_POLICY_CLOSE_TICK_MS + 2000;
    while (ns_now_ms() < until && s_ljob(w, 1).state == NS_JOB_AWARDED)
        s_step(w, 5);
    CHECK(ns_now_ms() >= lj.deadline_ms + 1000); /* never before */
    for (uint32_t l = 0; l < W_PARTIES; l++) {
        CHECK_EQ_INT(s_ljob(w, l).state, NS_JOB_SETTLED);
        ns_account_t p = s_acct(w, l, 1), r = s_acct(w, l, 0);
        CHECK_EQ_INT(p.locked_collateral, 0);
        CHECK_EQ_INT(p.free + p.staked, p0.free + p0.staked + lj.price);
        CHECK_EQ_INT(p.jobs_settled, 1);
        CHECK_EQ_INT(r.locked_escrow, 0);
        CHECK_EQ_INT(r.free, r0.free - lj.escrow); /* the rest: a credit */
    }
    CHECK(s_conserved(w));
    s_world_free(w);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "worker") == 0) {
        if (sodium_init() < 0)
            return 1;
        return ns_worker_main(argc - 1, argv + 1);
    }
    if (sodium_init() < 0)
        return 1;
    ns_log_threshold = NS_LOG_ERROR;
    RUN(award_accept_result_settle);
    RUN(bidder_draw_asks_a_share_and_widens);
    RUN(lost_chunks_are_asked_again);
    RUN(accept_timeout_moves_on);
    RUN(lazy_provider_slashed_job_completed_elsewhere);
    RUN(no_bid_cancels_and_refunds);
    RUN(buffers_beyond_the_largest_allocation_get_no_bid);
    RUN(waits_for_a_provider_then_settles);
    RUN(deadline_penalises_silent_provider);
    RUN(resume_picks_the_job_up);
    RUN(provider_failure_moves_on_without_penalty);
    RUN(broken_kernel_ends_the_job_at_once);
    RUN(preflight_refuses_a_kernel_that_reads_its_outputs);
    RUN(preflight_verdict_after_the_announcement_cancels);
    RUN(resume_before_the_preflight_verdict_still_takes_it);
    RUN(forged_failure_is_ignored);
    RUN(giving_up_cancels_and_releases);
    RUN(hardware_challenges_before_the_award);
    RUN(requester_gone_provider_closes);
    (void)s_w;
    return ns_test_finish("node_market_sm");
}
