/* test_property.c - thousands of random ledger operations against a model.
 *
 * A few dozen accounts make random entries, valid and invalid: transfers,
 * stakes, unstakes, claims, jobs through award, accept, result, settle,
 * slash and cancel, the provider's close once deadline + window passed
 * (and the requester's entries that come too late for it), plus garbage
 * bytes, mutated and replayed entries,
 * chain errors (stale, wrong prev, gaps, missing refs) and the odd fork.
 * A small model of the rules predicts the outcome of every operation
 * (NS_OK or the specific error) and the resulting balances; after every
 * operation the ledger must match the model, conserve the genesis total
 * and have no balance that wrapped below zero.
 *
 * Then determinism: the valid entries go to a second ledger in a random
 * causally valid order (every entry after what it names) and to a third
 * in windows shuffled at random (out of order, with duplicates, so entries
 * wait in the buffer); all three must agree on every account, the stats,
 * the digest, every job and every credit. Last, the first ledger is
 * reopened and must be unchanged.
 *
 * The seed is printed; NS_TEST_SEED=<n> repeats a run exactly (keys, job
 * ids and timestamps all derive from it). NS_TEST_OPS=<n> changes the
 * number of operations (default 4000).
 */
#include "check.h"
#include "ledger_fixture.h"

#include <inttypes.h>
#include <time.h>

#define NA 24 /* accounts */
#define DEFAULT_OPS 4000
#define MAX_LOG 16384
#define MAX_JOBS 4096
#define MAX_AWARDS 4096
#define MAX_CREDITS 16384
#define MAX_FORKS 8
#define WINDOW 24 /* entries shuffled together for the third ledger */
/* The genesis close window: short beside the run (4,000 entries, 10 ms
 * apart) so that many awards pass deadline + window. */
#define CLOSE_WINDOW_MS 2000

/* ---- seeded randomness (splitmix64) ------------------------------------- */

static uint64_t s_rng;

static uint64_t s_rand(void)
{
    uint64_t z = (s_rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t s_below(uint64_t n)
{
    return n ? s_rand() % n : 0;
}

static bool s_chance(unsigned per_mille)
{
    return s_below(1000) < per_mille;
}

/* ---- the model ------------------------------------------------------------
 */

enum { LOCK_NONE = 0, LOCK_LOCKED = 1, LOCK_RELEASED = 2, LOCK_BURNED = 3 };

typedef struct {
    uint64_t free, staked, lesc, lcol;
    bool banned;
    uint32_t posted, settled_req, settled, slashed, cancelled;
} m_acct_t;

typedef struct {
    ns_hash_t id;
    uint32_t requester;
    uint64_t escrow, max_price, collateral, deadline;
    int state;
    int award; /* current award (index), -1 */
    uint32_t round, slashed;
} m_job_t;

typedef struct {
    ns_hash_t id;
    uint32_t job, provider;
    uint64_t price;
    bool accepted;
    ns_hash_t accept_id;
    uint64_t lock;
    int lock_state;
    bool has_result;
    ns_hash_t result_id;
} m_award_t;

typedef struct {
    ns_hash_t src;
    uint32_t to;
    uint64_t amount;
    int release; /* award index whose lock it releases, -1 */
    bool claimed;
} m_credit_t;

typedef struct {
    m_acct_t a[NA];
    m_job_t job[MAX_JOBS];
    uint32_t n_jobs;
    m_award_t award[MAX_AWARDS];
    uint32_t n_awards;
    m_credit_t credit[MAX_CREDITS];
    uint32_t n_credits;
    uint64_t burned, pending, entries, forks;
} m_model_t;

static m_model_t M;

/* ---- the log of valid entries (for the other two ledgers) -----------------
 */

typedef struct {
    uint8_t *bytes;
    size_t len;
    ns_hash_t id;
    uint32_t who;
    uint32_t n_deps;
    int32_t deps[NS_MAX_REFS + 2]; /* log indexes it names */
    bool voided;                   /* taken back by a fork (g_fork) */
} s_log_t;

static s_log_t s_log[MAX_LOG];
static uint32_t s_n_log;
static int32_t s_last[NA]; /* each account's last log index */
static ns_buf_t s_forks[MAX_FORKS];
static uint32_t s_n_forks;

/* id -> log index (open addressing; ids are hashes). */
#define ID_SLOTS (2 * MAX_LOG)
static int32_t s_slot[ID_SLOTS];

static uint32_t s_slot_of(const ns_hash_t id)
{
    uint32_t h;
    memcpy(&h, id, 4);
    return h % ID_SLOTS;
}

static void s_index(int32_t i)
{
    uint32_t k = s_slot_of(s_log[i].id);
    while (s_slot[k] >= 0)
        k = (k + 1) % ID_SLOTS;
    s_slot[k] = i;
}

static int32_t s_lookup(const ns_hash_t id)
{
    for (uint32_t k = s_slot_of(id); s_slot[k] >= 0; k = (k + 1) % ID_SLOTS)
        if (memcmp(s_log[s_slot[k]].id, id, NS_HASH_BYTES) == 0)
            return s_slot[k];
    return -1;
}

/* ---- state ------------------------------------------------------------------
 */

static fx_t s_fx;
static uint64_t s_seed;
static uint32_t s_op_no;
static const char *s_op_name = "-";
static bool s_failed; /* stop at the first mismatch: one clear report */
static uint32_t s_job_counter;
static uint64_t s_total;
static uint32_t s_count_ok, s_count_refused;
static uint32_t s_kind_ok[NS_ENTRY_TYPE_MAX + 1];

__attribute__((format(printf, 1, 2))) static void s_fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "market_property: seed %" PRIu64 " op %u (%s): ", s_seed,
            s_op_no, s_op_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    s_failed = true;
}

/* The ledger against the model: accounts, stats, conservation, no wrap. */
static bool s_check_model(const ns_hash_t digest_before)
{
    ns_ledger_t *l = s_fx.l;
    for (uint32_t i = 0; i < NA; i++) {
        ns_account_t a;
        const m_acct_t *m = &M.a[i];
        if (ns_ledger_account(l, s_fx.acct[i].pk, &a) != NS_OK) {
            s_fail("account %u unreadable", i);
            return false;
        }
        if (a.free > s_total || a.staked > s_total ||
            a.locked_escrow > s_total || a.locked_collateral > s_total) {
            s_fail("account %u wrapped: free %" PRIu64 " staked %" PRIu64
                   " escrow %" PRIu64 " collateral %" PRIu64,
                   i, a.free, a.staked, a.locked_escrow, a.locked_collateral);
            return false;
        }
        if (a.free != m->free || a.staked != m->staked ||
            a.locked_escrow != m->lesc || a.locked_collateral != m->lcol ||
            a.banned != m->banned || a.seq != s_fx.acct[i].seq ||
            (a.seq && memcmp(a.head, s_fx.acct[i].head, NS_HASH_BYTES)) ||
            a.jobs_posted != m->posted ||
            a.jobs_settled_as_requester != m->settled_req ||
            a.jobs_settled != m->settled || a.jobs_slashed != m->slashed ||
            a.jobs_cancelled != m->cancelled) {
            s_fail("account %u: ledger free %" PRIu64 " staked %" PRIu64
                   " escrow %" PRIu64 " collateral %" PRIu64 " seq %" PRIu64
                   " banned %d counters %u/%u/%u/%u/%u; "
                   "model free %" PRIu64 " staked %" PRIu64 " escrow %" PRIu64
                   " collateral %" PRIu64 " seq %" PRIu64
                   " banned %d counters %u/%u/%u/%u/%u",
                   i, a.free, a.staked, a.locked_escrow, a.locked_collateral,
                   a.seq, a.banned, a.jobs_posted, a.jobs_settled_as_requester,
                   a.jobs_settled, a.jobs_slashed, a.jobs_cancelled, m->free,
                   m->staked, m->lesc, m->lcol, s_fx.acct[i].seq, m->banned,
                   m->posted, m->settled_req, m->settled, m->slashed,
                   m->cancelled);
            return false;
        }
    }
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    if (st.entries != M.entries || st.burned != M.burned ||
        st.pending_credit != M.pending || st.forks != M.forks ||
        st.total != s_total) {
        s_fail("stats: ledger entries %" PRIu64 " burned %" PRIu64
               " pending %" PRIu64 " forks %" PRIu64 "; model %" PRIu64
               " %" PRIu64 " %" PRIu64 " %" PRIu64,
               st.entries, st.burned, st.pending_credit, st.forks, M.entries,
               M.burned, M.pending, M.forks);
        return false;
    }
    if (digest_before && memcmp(st.digest, digest_before, NS_HASH_BYTES)) {
        s_fail("a refused entry changed the digest");
        return false;
    }
    uint64_t sum = 0;
    int rc = ns_ledger_check_conservation(l, &sum);
    if (rc != NS_OK || sum != s_total) {
        s_fail("conservation: %s, sum %" PRIu64 " total %" PRIu64,
               ns_errname(rc), sum, s_total);
        return false;
    }
    return true;
}

/* ---- operations
 * --------------------------------------------------------------- */

typedef struct {
    uint32_t who;
    uint8_t type;
    ns_entry_body_t body;
    uint8_t proof[8];
    uint8_t refs[NS_MAX_REFS * NS_HASH_BYTES];
    uint32_t n_refs;
    int claim[NS_MAX_REFS]; /* model credit of each ref (valid claims) */
    int want;
    /* body target for the model: job, award indexes */
    int job, award;
    bool cancel_with_accept;
} s_op_t;

static void s_op_init(s_op_t *op, uint32_t who, uint8_t type, int want)
{
    memset(op, 0, sizeof *op);
    op->who = who;
    op->type = type;
    op->want = want;
    op->job = -1;
    op->award = -1;
}

static uint64_t s_next_ts(void)
{
    return s_fx.now + 10; /* what fx_make will stamp */
}

/* The next entry comes at or after deadline + window of job j: its
 * award is the provider's to close. */
static bool s_late(const m_job_t *j)
{
    return s_next_ts() >= j->deadline + CLOSE_WINDOW_MS;
}

static bool s_active(uint32_t i)
{
    return !M.a[i].banned;
}

static int s_pick_active(void)
{
    for (int tries = 0; tries < 64; tries++) {
        uint32_t i = (uint32_t)s_below(NA);
        if (s_active(i))
            return (int)i;
    }
    return -1;
}

/* Attach up to max of who's unclaimed credits (valid claims). */
static void s_add_claims(s_op_t *op, uint32_t max)
{
    int cand[64];
    uint32_t n = 0;
    for (uint32_t c = 0; c < M.n_credits && n < 64; c++) {
        uint32_t k = (uint32_t)s_below(M.n_credits); /* random probes */
        (void)c;
        const m_credit_t *cr = &M.credit[k];
        bool dup = false;
        for (uint32_t j = 0; j < n; j++)
            dup |= cand[j] == (int)k;
        if (!dup && cr->to == op->who && !cr->claimed)
            cand[n++] = (int)k;
    }
    /* and a full scan now and then, so old credits get taken in */
    if (n == 0 && s_chance(300))
        for (uint32_t k = 0; k < M.n_credits && n < 64; k++)
            if (M.credit[k].to == op->who && !M.credit[k].claimed)
                cand[n++] = (int)k;
    uint32_t take = n < max ? n : max;
    for (uint32_t i = 0; i < take && op->n_refs < NS_MAX_REFS; i++) {
        op->claim[op->n_refs] = cand[i];
        memcpy(op->refs + (size_t)op->n_refs * NS_HASH_BYTES,
               M.credit[cand[i]].src, NS_HASH_BYTES);
        op->n_refs++;
    }
}

/* who's balances once op's claims are taken in. */
static m_acct_t s_after_claims(const s_op_t *op)
{
    m_acct_t a = M.a[op->who];
    for (uint32_t i = 0; i < op->n_refs; i++) {
        const m_credit_t *c = &M.credit[op->claim[i]];
        a.free += c->amount;
        if (c->release >= 0 && M.award[c->release].lock_state == LOCK_LOCKED &&
            M.award[c->release].provider == op->who) {
            a.lcol -= M.award[c->release].lock;
            a.staked += M.award[c->release].lock;
        }
    }
    return a;
}

static int s_add_credit(const ns_hash_t src, uint32_t to, uint64_t amount,
                        int release)
{
    if (M.n_credits == MAX_CREDITS)
        return -1;
    m_credit_t *c = &M.credit[M.n_credits];
    memcpy(c->src, src, NS_HASH_BYTES);
    c->to = to;
    c->amount = amount;
    c->release = release;
    c->claimed = false;
    M.pending += amount;
    return (int)M.n_credits++;
}

/* The model takes a stored entry. */
static void s_model_apply(const s_op_t *op, const ns_hash_t id)
{
    m_acct_t *a = &M.a[op->who];
    for (uint32_t i = 0; i < op->n_refs; i++) {
        m_credit_t *c = &M.credit[op->claim[i]];
        c->claimed = true;
        a->free += c->amount;
        M.pending -= c->amount;
        if (c->release >= 0) {
            m_award_t *aw = &M.award[c->release];
            if (aw->provider == op->who && aw->lock_state == LOCK_LOCKED) {
                a->lcol -= aw->lock;
                a->staked += aw->lock;
                aw->lock_state = LOCK_RELEASED;
            } else if (aw->provider == op->who && aw->lock_state == LOCK_NONE) {
                /* released before any accept: the award is closed to it */
                aw->lock_state = LOCK_RELEASED;
            }
        }
    }
    const ns_entry_body_t *b = &op->body;
    m_job_t *job = op->job >= 0 ? &M.job[op->job] : NULL;
    m_award_t *aw = op->award >= 0 ? &M.award[op->award] : NULL;
    switch (op->type) {
    case NS_ENTRY_TRANSFER:
        a->free -= b->amount;
        for (uint32_t i = 0; i < NA; i++)
            if (memcmp(s_fx.acct[i].pk, b->to, NS_ID_BYTES) == 0)
                s_add_credit(id, i, b->amount, -1);
        break;
    case NS_ENTRY_STAKE:
        a->free -= b->amount;
        a->staked += b->amount;
        break;
    case NS_ENTRY_UNSTAKE:
        a->staked -= b->amount;
        a->free += b->amount;
        break;
    case NS_ENTRY_JOB: {
        a->free -= b->escrow;
        a->lesc += b->escrow;
        a->posted++;
        m_job_t *j = &M.job[M.n_jobs++];
        memset(j, 0, sizeof *j);
        memcpy(j->id, b->job_id, NS_HASH_BYTES);
        j->requester = op->who;
        j->escrow = b->escrow;
        j->max_price = b->max_price;
        j->collateral = b->collateral;
        j->deadline = b->deadline_ms;
        j->state = NS_JOB_OPEN;
        j->award = -1;
        break;
    }
    case NS_ENTRY_AWARD: {
        m_award_t *n = &M.award[M.n_awards];
        memset(n, 0, sizeof *n);
        memcpy(n->id, id, NS_HASH_BYTES);
        n->job = (uint32_t)op->job;
        for (uint32_t i = 0; i < NA; i++)
            if (memcmp(s_fx.acct[i].pk, b->bid.provider, NS_ID_BYTES) == 0)
                n->provider = i;
        n->price = b->bid.price;
        job->state = NS_JOB_AWARDED;
        job->round++;
        job->award = (int)M.n_awards++;
        break;
    }
    case NS_ENTRY_ACCEPT:
        aw->accepted = true;
        memcpy(aw->accept_id, id, NS_HASH_BYTES);
        aw->lock = job->collateral;
        aw->lock_state = LOCK_LOCKED;
        a->staked -= job->collateral;
        a->lcol += job->collateral;
        break;
    case NS_ENTRY_RESULT:
        aw->has_result = true;
        memcpy(aw->result_id, id, NS_HASH_BYTES);
        break;
    case NS_ENTRY_SETTLE: {
        m_acct_t *p = &M.a[aw->provider];
        a->lesc -= job->escrow;
        a->free += job->escrow - aw->price;
        a->settled_req++;
        p->settled++;
        job->state = NS_JOB_SETTLED;
        s_add_credit(id, aw->provider, aw->price, op->award);
        break;
    }
    case NS_ENTRY_SLASH: {
        m_acct_t *p = &M.a[aw->provider];
        if (aw->lock_state == LOCK_LOCKED) {
            p->lcol -= aw->lock;
            M.burned += aw->lock;
            aw->lock_state = LOCK_BURNED;
        }
        p->slashed++;
        job->slashed++;
        job->state = NS_JOB_OPEN;
        job->award = -1;
        break;
    }
    case NS_ENTRY_CLOSE: {
        /* the provider (a) closes its award: ts past deadline + window */
        m_acct_t *r = &M.a[job->requester];
        uint64_t refund = job->escrow;
        r->lesc -= job->escrow;
        if (aw->has_result) {
            if (aw->lock_state == LOCK_LOCKED) {
                a->lcol -= aw->lock;
                a->staked += aw->lock;
                aw->lock_state = LOCK_RELEASED;
            }
            a->free += aw->price;
            refund -= aw->price;
            a->settled++;
            job->state = NS_JOB_SETTLED;
        } else if (aw->accepted) {
            if (aw->lock_state == LOCK_LOCKED) {
                uint64_t penalty = aw->lock / 10;
                a->lcol -= aw->lock;
                a->staked += aw->lock - penalty;
                M.burned += penalty;
                aw->lock -= penalty;
                aw->lock_state = LOCK_RELEASED;
            }
            a->cancelled++;
            job->state = NS_JOB_CANCELLED;
            job->award = -1;
        } else {
            aw->lock = 0;
            aw->lock_state = LOCK_RELEASED;
            job->state = NS_JOB_CANCELLED;
            job->award = -1;
        }
        s_add_credit(id, job->requester, refund, -1);
        break;
    }
    case NS_ENTRY_CANCEL:
        if (op->cancel_with_accept) {
            m_acct_t *p = &M.a[aw->provider];
            if (aw->lock_state == LOCK_LOCKED) {
                uint64_t penalty = aw->lock / 10;
                p->lcol -= penalty;
                aw->lock -= penalty;
                M.burned += penalty;
            }
            p->cancelled++;
        }
        if (job->state == NS_JOB_AWARDED)
            s_add_credit(id, M.award[job->award].provider, 0, job->award);
        job->award = -1;
        if (b->reopen) {
            job->state = NS_JOB_OPEN;
            job->deadline = b->new_deadline_ms;
        } else {
            a->lesc -= job->escrow;
            a->free += job->escrow;
            job->state = NS_JOB_CANCELLED;
        }
        break;
    default:
        break;
    }
    M.entries++;
}

/* Log a stored entry with what it names. */
static void s_log_add(const s_op_t *op, const ns_buf_t *raw, const ns_hash_t id)
{
    if (s_n_log == MAX_LOG) {
        s_fail("log full");
        return;
    }
    s_log_t *e = &s_log[s_n_log];
    e->bytes = malloc(raw->len);
    if (!e->bytes) {
        s_fail("out of memory");
        return;
    }
    memcpy(e->bytes, raw->data, raw->len);
    e->len = raw->len;
    memcpy(e->id, id, NS_HASH_BYTES);
    e->who = op->who;
    e->n_deps = 0;
    if (s_last[op->who] >= 0)
        e->deps[e->n_deps++] = s_last[op->who];
    for (uint32_t i = 0; i < op->n_refs; i++) {
        int32_t d = s_lookup(op->refs + (size_t)i * NS_HASH_BYTES);
        if (d >= 0)
            e->deps[e->n_deps++] = d;
    }
    bool named = op->type == NS_ENTRY_ACCEPT || op->type == NS_ENTRY_RESULT ||
                 op->type == NS_ENTRY_SETTLE || op->type == NS_ENTRY_SLASH ||
                 op->type == NS_ENTRY_CLOSE ||
                 (op->type == NS_ENTRY_CANCEL && op->cancel_with_accept);
    if (named) {
        int32_t d = s_lookup(op->body.ref_id);
        if (d < 0)
            s_fail("a stored %s names an entry not in the log",
                   ns_entry_type_name(op->type));
        else
            e->deps[e->n_deps++] = d;
    }
    s_last[op->who] = (int32_t)s_n_log;
    s_index((int32_t)s_n_log);
    s_n_log++;
}

static void s_snap_save(void);

/* Sign op as who's next entry, ingest it, check the outcome and the
 * state against the model. */
static void s_exec(s_op_t *op)
{
    ns_buf_t raw;
    ns_hash_t id, digest;
    uint64_t ts;
    ns_ledger_stats_t st;
    ns_buf_init(&raw);
    if (op->type == NS_ENTRY_SLASH) {
        op->body.proof = op->proof;
        op->body.proof_len = sizeof op->proof;
    }
    int rc = fx_make(&s_fx, op->who, op->type, &op->body, op->refs, op->n_refs,
                     &raw, id, &ts);
    if (rc != NS_OK) {
        s_fail("cannot sign: %s", ns_errname(rc));
        ns_buf_release(&raw);
        return;
    }
    ns_ledger_stats(s_fx.l, &st);
    memcpy(digest, st.digest, NS_HASH_BYTES);
    rc = ns_ledger_ingest(s_fx.l, raw.data, raw.len, NULL, NULL);
    if (!CHECK_RC(rc, op->want)) {
        s_fail("%s by %u with %u refs: got %s, want %s",
               ns_entry_type_name(op->type), op->who, op->n_refs,
               ns_errname(rc), ns_errname(op->want));
    } else if (rc == NS_OK) {
        fx_advance(&s_fx, op->who, id, ts);
        s_snap_save();
        s_model_apply(op, id);
        s_log_add(op, &raw, id);
        s_count_ok++;
        s_kind_ok[op->type]++;
        CHECK(s_check_model(NULL));
    } else {
        s_count_refused++;
        CHECK(s_check_model(digest));
    }
    ns_buf_release(&raw);
}

/* Bytes that must not change anything: rc must be want (or, with
 * want == 0, any refusal that does not buffer). */
static void s_exec_bytes(const uint8_t *buf, size_t len, int want)
{
    ns_ledger_stats_t st;
    ns_hash_t digest;
    ns_ledger_stats(s_fx.l, &st);
    memcpy(digest, st.digest, NS_HASH_BYTES);
    uint32_t buffered = st.buffered;
    int rc = ns_ledger_ingest(s_fx.l, buf, len, NULL, NULL);
    ns_ledger_stats(s_fx.l, &st);
    if (!CHECK(want
                   ? rc == want
                   : (rc != NS_OK && rc != NS_ERR_GAP && rc != NS_ERR_MISSING &&
                      rc != NS_ERR_DUPLICATE && rc != NS_ERR_FORK)))
        s_fail("%zu bytes: got %s, want %s", len, ns_errname(rc),
               want ? ns_errname(want) : "a refusal");
    if (!CHECK(rc == NS_ERR_GAP || rc == NS_ERR_MISSING ||
               st.buffered == buffered))
        s_fail("a refused entry (%s) was buffered", ns_errname(rc));
    s_count_refused++;
    CHECK(s_check_model(rc == NS_ERR_FORK ? NULL : digest));
}

/* ---- generators: each builds one operation or returns false
 * ------------------ */

static bool g_transfer(bool valid)
{
    int who = s_pick_active();
    if (who < 0)
        return false;
    s_op_t op;
    uint32_t to = (uint32_t)s_below(NA - 1);
    if (to >= (uint32_t)who)
        to++;
    if (valid) {
        s_op_init(&op, (uint32_t)who, NS_ENTRY_TRANSFER, NS_OK);
        if (s_chance(300))
            s_add_claims(&op, 1 + (uint32_t)s_below(4));
        m_acct_t a = s_after_claims(&op);
        if (a.free == 0)
            return false;
        op.body = fx_transfer(s_fx.acct[to].pk,
                              1 + s_below(a.free < 5000 ? a.free : 5000));
    } else {
        s_op_init(&op, (uint32_t)who, NS_ENTRY_TRANSFER, NS_ERR_FUNDS);
        uint64_t amount = M.a[who].free + 1 + s_below(1000);
        switch (s_below(3)) {
        case 0:
            op.body = fx_transfer(s_fx.acct[to].pk, amount);
            break;
        case 1:
            op.want = NS_ERR_INVAL; /* to self */
            op.body = fx_transfer(s_fx.acct[who].pk, 1);
            break;
        default:
            op.want = NS_ERR_INVAL; /* nothing */
            op.body = fx_transfer(s_fx.acct[to].pk, 0);
        }
    }
    s_exec(&op);
    return true;
}

static bool g_stake(bool stake, bool valid)
{
    int who = s_pick_active();
    if (who < 0)
        return false;
    s_op_t op;
    uint8_t type = stake ? NS_ENTRY_STAKE : NS_ENTRY_UNSTAKE;
    s_op_init(&op, (uint32_t)who, type, valid ? NS_OK : NS_ERR_FUNDS);
    if (valid && s_chance(300))
        s_add_claims(&op, 1 + (uint32_t)s_below(4));
    m_acct_t a = s_after_claims(&op);
    uint64_t have = stake ? a.free : a.staked;
    if (valid) {
        if (have == 0)
            return false;
        uint64_t cap = stake ? 3000 : have;
        op.body = fx_amount(1 + s_below(have < cap ? have : cap));
    } else {
        op.body = fx_amount(have + 1 + s_below(100));
    }
    s_exec(&op);
    return true;
}

/* Take credits in (a STAKE of 0 or 1, or an UNSTAKE of 1, carries the
 * refs). */
static bool g_claim(void)
{
    int who = s_pick_active();
    if (who < 0)
        return false;
    s_op_t op;
    s_op_init(&op, (uint32_t)who, NS_ENTRY_STAKE, NS_OK);
    s_add_claims(&op, 1 + (uint32_t)s_below(NS_MAX_REFS));
    if (op.n_refs == 0)
        return false;
    m_acct_t a = s_after_claims(&op);
    if (s_chance(300)) {
        op.body = fx_amount(0); /* a STAKE of 0 only takes credits in */
    } else if (a.free >= 1) {
        op.body = fx_amount(1);
    } else if (a.staked >= 1) {
        op.type = NS_ENTRY_UNSTAKE;
        op.body = fx_amount(1);
    } else {
        return false;
    }
    s_exec(&op);
    return true;
}

/* Claims that must fail: twice in one entry, already taken, no credit. */
static bool g_bad_claim(void)
{
    int who = s_pick_active();
    if (who < 0 || M.n_credits == 0)
        return false;
    s_op_t op;
    s_op_init(&op, (uint32_t)who, NS_ENTRY_STAKE, NS_ERR_CLAIMED);
    op.body = fx_amount(1);
    uint32_t k = (uint32_t)s_below(M.n_credits);
    const m_credit_t *c = &M.credit[k];
    switch (s_below(3)) {
    case 0: /* the same credit twice (after a valid first use) */
        if (c->to != (uint32_t)who || c->claimed)
            return false;
        memcpy(op.refs, c->src, NS_HASH_BYTES);
        memcpy(op.refs + NS_HASH_BYTES, c->src, NS_HASH_BYTES);
        op.n_refs = 2;
        break;
    case 1: /* taken in already */
        if (c->to != (uint32_t)who || !c->claimed)
            return false;
        memcpy(op.refs, c->src, NS_HASH_BYTES);
        op.n_refs = 1;
        break;
    default: { /* an entry holding no credit for who */
        if (s_n_log == 0)
            return false;
        const s_log_t *e = &s_log[s_below(s_n_log)];
        if (e->voided) /* a claim of it waits: it may come back */
            return false;
        for (uint32_t i = 0; i < M.n_credits; i++)
            if (M.credit[i].to == (uint32_t)who &&
                memcmp(M.credit[i].src, e->id, NS_HASH_BYTES) == 0)
                return false;
        memcpy(op.refs, e->id, NS_HASH_BYTES);
        op.n_refs = 1;
        op.want = NS_ERR_NOCREDIT;
    }
    }
    s_exec(&op);
    return true;
}

static bool g_job(bool valid)
{
    int who = s_pick_active();
    if (who < 0 || M.n_jobs == MAX_JOBS)
        return false;
    s_op_t op;
    s_op_init(&op, (uint32_t)who, NS_ENTRY_JOB, NS_OK);
    const uint8_t *pk = s_fx.acct[who].pk;
    uint32_t n = s_job_counter++;
    uint64_t deadline = s_next_ts() + 1 + s_below(4000);
    if (valid) {
        if (s_chance(300))
            s_add_claims(&op, 1 + (uint32_t)s_below(4));
        m_acct_t a = s_after_claims(&op);
        if (a.free == 0)
            return false;
        uint64_t escrow = 1 + s_below(a.free < 3000 ? a.free : 3000);
        op.body = fx_job(pk, n, escrow, s_below(escrow + 1), s_below(400),
                         deadline, NULL);
    } else {
        switch (s_below(4)) {
        case 0:
            op.want = NS_ERR_FUNDS;
            op.body = fx_job(pk, n, M.a[who].free + 1 + s_below(500), 1, 1,
                             deadline, NULL);
            break;
        case 1:
            op.want = NS_ERR_INVAL; /* max price over the escrow */
            op.body = fx_job(pk, n, 10, 11 + s_below(10), 1, deadline, NULL);
            break;
        case 2:
            op.want = NS_ERR_INVAL; /* deadline not after the entry */
            op.body = fx_job(pk, n, 10, 5, 1, s_next_ts() - s_below(50), NULL);
            break;
        default: /* a job id that is not the requester's */
            op.want = NS_ERR_INVAL;
            op.body = fx_job(s_fx.acct[(who + 1) % NA].pk, n, 10, 5, 1,
                             deadline, NULL);
        }
    }
    s_exec(&op);
    return true;
}

/* A random job whose requester is active, in one of two states. */
static int s_pick_job(int state_a, int state_b)
{
    if (M.n_jobs == 0)
        return -1;
    for (int tries = 0; tries < 64; tries++) {
        uint32_t k = (uint32_t)s_below(M.n_jobs);
        /* favour recent jobs: most old ones are closed */
        if (s_chance(700) && M.n_jobs > 32)
            k = M.n_jobs - 1 - (uint32_t)s_below(32);
        const m_job_t *j = &M.job[k];
        if ((j->state == state_a || j->state == state_b) &&
            s_active(j->requester))
            return (int)k;
    }
    return -1;
}

static bool g_award(bool valid)
{
    int jk = s_pick_job(NS_JOB_OPEN, valid ? NS_JOB_OPEN : NS_JOB_AWARDED);
    if (jk < 0 || M.n_awards == MAX_AWARDS)
        return false;
    const m_job_t *j = &M.job[jk];
    uint32_t prov = (uint32_t)s_below(NA - 1);
    if (prov >= j->requester)
        prov++;
    s_op_t op;
    s_op_init(&op, j->requester, NS_ENTRY_AWARD, NS_OK);
    op.job = jk;
    uint64_t price = s_below(j->max_price + 1);
    op.body = fx_award(&s_fx, j->id, prov, price);
    if (valid) {
        if (s_chance(200))
            s_add_claims(&op, 1 + (uint32_t)s_below(3));
    } else if (j->state == NS_JOB_AWARDED) {
        op.want = NS_ERR_JOBSTATE;
    } else {
        switch (s_below(3)) {
        case 0: /* forged: the bid changed after signing */
            op.want = NS_ERR_SIG;
            op.body.bid.est_ms++;
            break;
        case 1: /* over the job's max price */
            op.want = NS_ERR_INVAL;
            op.body =
                fx_award(&s_fx, j->id, prov, j->max_price + 1 + s_below(100));
            break;
        default: { /* by someone who is not the requester */
            int other = s_pick_active();
            if (other < 0 || (uint32_t)other == j->requester)
                return false;
            op.who = (uint32_t)other;
            op.want = NS_ERR_JOBSTATE;
        }
        }
    }
    s_exec(&op);
    return true;
}

/* An award by its index whose provider is active, with a filter. */
static int s_pick_award(bool accepted, bool has_result, bool current)
{
    if (M.n_awards == 0)
        return -1;
    for (int tries = 0; tries < 64; tries++) {
        uint32_t k = (uint32_t)s_below(M.n_awards);
        if (s_chance(700) && M.n_awards > 32)
            k = M.n_awards - 1 - (uint32_t)s_below(32);
        const m_award_t *a = &M.award[k];
        const m_job_t *j = &M.job[a->job];
        if (a->accepted != accepted || a->has_result != has_result)
            continue;
        if (current && j->award != (int)k)
            continue;
        return (int)k;
    }
    return -1;
}

static bool g_accept(bool again)
{
    int ak = s_pick_award(again, false, !s_chance(100));
    if (ak < 0)
        return false;
    const m_award_t *aw = &M.award[ak];
    if (!s_active(aw->provider))
        return false;
    s_op_t op;
    s_op_init(&op, aw->provider, NS_ENTRY_ACCEPT, NS_OK);
    op.job = (int)aw->job;
    op.award = ak;
    op.body = fx_ref(M.job[aw->job].id, aw->id);
    if (again || aw->lock_state != LOCK_NONE) {
        op.want = NS_ERR_JOBSTATE;
    } else {
        if (s_chance(300))
            s_add_claims(&op, 1 + (uint32_t)s_below(4));
        m_acct_t a = s_after_claims(&op);
        bool released = false; /* a claim in this entry closes the award */
        for (uint32_t i = 0; i < op.n_refs; i++)
            released |= M.credit[op.claim[i]].release == ak;
        if (released)
            op.want = NS_ERR_JOBSTATE;
        else if (a.staked < M.job[aw->job].collateral)
            op.want = NS_ERR_FUNDS;
    }
    s_exec(&op);
    return true;
}

static bool g_result(void)
{
    int ak = s_pick_award(true, false, !s_chance(100));
    if (ak < 0)
        return false;
    const m_award_t *aw = &M.award[ak];
    if (!s_active(aw->provider))
        return false;
    s_op_t op;
    s_op_init(&op, aw->provider, NS_ENTRY_RESULT, NS_OK);
    op.job = (int)aw->job;
    op.award = ak;
    op.body = fx_result(M.job[aw->job].id, aw->accept_id, 1 + s_below(4096));
    if (s_chance(200))
        s_add_claims(&op, 1 + (uint32_t)s_below(3));
    s_exec(&op);
    return true;
}

/* SETTLE or SLASH of a current award with a result. */
static bool g_close(bool slash)
{
    int ak = s_pick_award(true, true, true);
    if (ak < 0)
        return false;
    const m_award_t *aw = &M.award[ak];
    const m_job_t *j = &M.job[aw->job];
    if (!s_active(j->requester) || j->state != NS_JOB_AWARDED)
        return false;
    s_op_t op;
    s_op_init(&op, j->requester, slash ? NS_ENTRY_SLASH : NS_ENTRY_SETTLE,
              NS_OK);
    op.job = (int)aw->job;
    op.award = ak;
    op.body = fx_ref(j->id, aw->result_id);
    if (slash) {
        op.proof[0] = s_chance(700) ? 1 : 2;
        if (op.proof[0] != 1)
            op.want = NS_ERR_PROOF;
    }
    if (s_late(j)) /* the provider's to close: checked before the proof */
        op.want = NS_ERR_JOBSTATE;
    if (s_chance(200))
        s_add_claims(&op, 1 + (uint32_t)s_below(3));
    s_exec(&op);
    return true;
}

static bool g_cancel(void)
{
    int jk = s_pick_job(NS_JOB_OPEN, NS_JOB_AWARDED);
    if (jk < 0)
        return false;
    const m_job_t *j = &M.job[jk];
    s_op_t op;
    s_op_init(&op, j->requester, NS_ENTRY_CANCEL, NS_OK);
    op.job = jk;
    op.award = j->award;
    bool reopen = s_chance(400);
    uint64_t ts = s_next_ts();
    uint64_t deadline = reopen ? ts + 1 + s_below(4000) : 0;
    const m_award_t *aw = j->award >= 0 ? &M.award[j->award] : NULL;
    if (aw && aw->accepted && s_chance(600)) {
        op.body = fx_cancel(j->id, aw->accept_id, reopen, deadline);
        op.cancel_with_accept = true;
        if (ts < j->deadline)
            op.want = NS_ERR_JOBSTATE; /* the provider still has time */
    } else {
        op.body = fx_cancel(j->id, NULL, reopen, deadline);
    }
    if (j->state == NS_JOB_AWARDED && s_late(j))
        op.want = NS_ERR_JOBSTATE; /* the provider's to close now */
    if (reopen && s_chance(100)) {
        op.body.new_deadline_ms = ts - s_below(10);
        op.want = NS_ERR_INVAL;
    }
    s_exec(&op);
    return true;
}

/* The provider's CLOSE of its current award, naming the row its own
 * record says (RESULT, else ACCEPT, else AWARD), or now and then a wrong
 * one; refused before deadline + window. */
static bool g_pclose(void)
{
    int ak = -1;
    for (int tries = 0; tries < 64 && ak < 0; tries++) {
        int k = s_pick_award(s_chance(700), s_chance(500), true);
        if (k >= 0 && M.job[M.award[k].job].state == NS_JOB_AWARDED)
            ak = k;
    }
    if (ak < 0)
        return false;
    const m_award_t *aw = &M.award[ak];
    const m_job_t *j = &M.job[aw->job];
    if (!s_active(aw->provider))
        return false;
    s_op_t op;
    s_op_init(&op, aw->provider, NS_ENTRY_CLOSE, NS_OK);
    op.job = (int)aw->job;
    op.award = ak;
    const uint8_t *ref = aw->has_result ? aw->result_id
                         : aw->accepted ? aw->accept_id
                                        : aw->id;
    if (aw->has_result && s_chance(100)) {
        ref = aw->accept_id; /* a RESULT is there: it must be named */
        op.want = NS_ERR_JOBSTATE;
    } else if (!s_late(j)) {
        op.want = NS_ERR_JOBSTATE; /* not the provider's yet */
    }
    op.body = fx_ref(j->id, ref);
    if (s_chance(200))
        s_add_claims(&op, 1 + (uint32_t)s_below(3));
    if (op.want == NS_OK) {
        for (uint32_t i = 0; i < op.n_refs; i++)
            if (M.credit[op.claim[i]].release == ak)
                op.want = NS_ERR_JOBSTATE; /* cannot happen: award live */
    }
    s_exec(&op);
    return true;
}

/* ---- refusals that are not about the rules of one type
 * ------------------------ */

static bool g_garbage(void)
{
    uint8_t buf[300];
    size_t len = (size_t)s_below(sizeof buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)s_rand();
    if (len && s_chance(500))
        buf[0] = 0x99; /* a 9-element array, to get further in */
    s_exec_bytes(buf, len, 0);
    return true;
}

static bool g_mutate(void)
{
    if (s_n_log == 0)
        return false;
    const s_log_t *e = &s_log[s_below(s_n_log)];
    uint8_t *copy = malloc(e->len);
    if (!copy)
        return false;
    memcpy(copy, e->bytes, e->len);
    size_t at = (size_t)s_below(e->len);
    copy[at] ^= (uint8_t)(1 + s_below(255));
    size_t len = s_chance(200) ? (size_t)s_below(e->len) : e->len;
    s_exec_bytes(copy, len, 0);
    free(copy);
    return true;
}

static bool g_replay(void)
{
    if (s_n_log == 0)
        return false;
    const s_log_t *e = &s_log[s_below(s_n_log)];
    s_exec_bytes(e->bytes, e->len,
                 e->voided ? NS_ERR_BANNED : NS_ERR_DUPLICATE);
    return true;
}

/* Chain errors: stale clock, wrong prev, a gap, an unknown ref. */
static bool g_chain_error(void)
{
    int who = s_pick_active();
    if (who < 0)
        return false;
    fx_acct_t *a = &s_fx.acct[who];
    ns_entry_body_t b = fx_amount(1);
    ns_buf_t raw;
    ns_hash_t id, junk;
    int want;
    ns_buf_init(&raw);
    for (int i = 0; i < NS_HASH_BYTES; i++)
        junk[i] = (uint8_t)s_rand();
    int rc;
    switch (s_below(4)) {
    case 0:
        if (a->seq == 0)
            goto out;
        want = NS_ERR_STALE;
        rc = fx_make_raw(&s_fx, (uint32_t)who, a->seq + 1, a->head,
                         NS_ENTRY_STAKE, &b, NULL, 0, a->ts - 1 - s_below(9),
                         &raw, id);
        break;
    case 1:
        want = NS_ERR_PREV;
        rc = fx_make_raw(&s_fx, (uint32_t)who, a->seq + 1, junk, NS_ENTRY_STAKE,
                         &b, NULL, 0, fx_tick(&s_fx), &raw, id);
        break;
    case 2: /* buffered; when the gap fills its prev is wrong: dropped */
        want = NS_ERR_GAP;
        rc = fx_make_raw(&s_fx, (uint32_t)who, a->seq + 2, junk, NS_ENTRY_STAKE,
                         &b, NULL, 0, fx_tick(&s_fx), &raw, id);
        break;
    default: /* waits for an entry that never comes */
        want = NS_ERR_MISSING;
        rc = fx_make_raw(&s_fx, (uint32_t)who, a->seq + 1,
                         a->seq ? a->head : NULL, NS_ENTRY_STAKE, &b, junk, 1,
                         fx_tick(&s_fx), &raw, id);
    }
    if (rc == NS_OK)
        s_exec_bytes(raw.data, raw.len, want);
out:
    ns_buf_release(&raw);
    return true;
}

/* The model as it was before the last stored entry (s_snap_of: its log
 * index), so that a fork of that entry can take the model back too: the
 * used part of each table. */
static m_model_t s_snap;
static int32_t s_snap_of = -1;

/* The used part of each table of src into dst. */
static void s_model_copy(m_model_t *dst, const m_model_t *src)
{
    memcpy(dst->a, src->a, sizeof src->a);
    memcpy(dst->job, src->job, src->n_jobs * sizeof src->job[0]);
    memcpy(dst->award, src->award, src->n_awards * sizeof src->award[0]);
    memcpy(dst->credit, src->credit, src->n_credits * sizeof src->credit[0]);
    dst->n_jobs = src->n_jobs;
    dst->n_awards = src->n_awards;
    dst->n_credits = src->n_credits;
    dst->burned = src->burned;
    dst->pending = src->pending;
    dst->entries = src->entries;
    dst->forks = src->forks;
}

static void s_snap_save(void)
{
    s_model_copy(&s_snap, &M);
    s_snap_of = (int32_t)s_n_log;
}

static void s_snap_restore(void)
{
    s_model_copy(&M, &s_snap);
    s_snap_of = -1;
}

/* A second entry at the seq of the last entry stored: its author's own,
 * signed again one ms later (a valid entry at that place, so a fork
 * proof). Nothing built on it yet, so the void takes it back whole,
 * whatever its type (test_fork_jobs.c tests forks that others built on,
 * and many delivery orders): the model goes back to before it, the author
 * banned. */
static bool g_fork(void)
{
    if (s_n_log == 0 || s_snap_of != (int32_t)s_n_log - 1 ||
        s_n_forks == MAX_FORKS)
        return false;
    uint32_t who = s_log[s_n_log - 1].who;
    uint64_t seq = s_fx.acct[who].seq;
    ns_entry_t e;
    if (M.a[who].banned ||
        ns_entry_decode(s_log[s_n_log - 1].bytes, s_log[s_n_log - 1].len,
                        s_fx.genesis.network_id, &e) != NS_OK ||
        e.seq != seq)
        return false;
    ns_buf_t *raw = &s_forks[s_n_forks];
    ns_hash_t id;
    ns_buf_init(raw);
    if (ns_entry_encode(s_fx.acct[who].id, s_fx.genesis.network_id, seq, e.prev,
                        e.type, e.body, e.body_len, e.refs, e.n_refs,
                        e.timestamp_ms + 1, raw, id) != NS_OK)
        return false;
    s_n_forks++;
    if (getenv("NS_DEBUG_FORK"))
        fprintf(stderr, "fork of %s by %u at seq %llu, %u refs\n",
                ns_entry_type_name(e.type), who, (unsigned long long)seq,
                e.n_refs);
    s_log[s_n_log - 1].voided = true;
    s_snap_restore();
    M.a[who].banned = true;
    M.forks++;
    /* its chain ends one entry earlier now */
    s_fx.acct[who].seq = seq - 1;
    memcpy(s_fx.acct[who].head, e.prev, NS_HASH_BYTES);
    s_exec_bytes(raw->data, raw->len, NS_ERR_FORK);
    fx_sync(&s_fx, who);
    return true;
}

static bool g_banned(void)
{
    for (uint32_t i = 0; i < NA; i++)
        if (M.a[i].banned) {
            s_op_t op;
            s_op_init(&op, i, NS_ENTRY_STAKE, NS_ERR_BANNED);
            op.body = fx_amount(1);
            s_exec(&op);
            return true;
        }
    return false;
}

/* ---- the run
 * ----------------------------------------------------------------- */

typedef struct {
    const char *name;
    unsigned weight;
} s_kind_t;

enum {
    K_TRANSFER,
    K_TRANSFER_BAD,
    K_STAKE,
    K_STAKE_BAD,
    K_UNSTAKE,
    K_UNSTAKE_BAD,
    K_CLAIM,
    K_CLAIM_BAD,
    K_JOB,
    K_JOB_BAD,
    K_AWARD,
    K_AWARD_BAD,
    K_ACCEPT,
    K_ACCEPT_AGAIN,
    K_RESULT,
    K_SETTLE,
    K_SLASH,
    K_CANCEL,
    K_CLOSE,
    K_GARBAGE,
    K_MUTATE,
    K_REPLAY,
    K_CHAIN,
    K_FORK,
    K_BANNED,
    K_COUNT
};

static const s_kind_t s_kinds[K_COUNT] = {
    [K_TRANSFER] = {"transfer", 90},
    [K_TRANSFER_BAD] = {"bad transfer", 15},
    [K_STAKE] = {"stake", 60},
    [K_STAKE_BAD] = {"bad stake", 10},
    [K_UNSTAKE] = {"unstake", 25},
    [K_UNSTAKE_BAD] = {"bad unstake", 10},
    [K_CLAIM] = {"claim", 60},
    [K_CLAIM_BAD] = {"bad claim", 20},
    [K_JOB] = {"job", 70},
    [K_JOB_BAD] = {"bad job", 10},
    [K_AWARD] = {"award", 80},
    [K_AWARD_BAD] = {"bad award", 15},
    [K_ACCEPT] = {"accept", 80},
    [K_ACCEPT_AGAIN] = {"second accept", 8},
    [K_RESULT] = {"result", 70},
    [K_SETTLE] = {"settle", 50},
    [K_SLASH] = {"slash", 15},
    [K_CANCEL] = {"cancel", 35},
    [K_CLOSE] = {"close", 30},
    [K_GARBAGE] = {"garbage", 15},
    [K_MUTATE] = {"mutated", 20},
    [K_REPLAY] = {"replay", 15},
    [K_CHAIN] = {"chain error", 20},
    [K_FORK] = {"fork", 1},
    [K_BANNED] = {"banned author", 3},
};

static bool s_run_kind(int k)
{
    switch (k) {
    case K_TRANSFER:
        return g_transfer(true);
    case K_TRANSFER_BAD:
        return g_transfer(false);
    case K_STAKE:
        return g_stake(true, true);
    case K_STAKE_BAD:
        return g_stake(true, false);
    case K_UNSTAKE:
        return g_stake(false, true);
    case K_UNSTAKE_BAD:
        return g_stake(false, false);
    case K_CLAIM:
        return g_claim();
    case K_CLAIM_BAD:
        return g_bad_claim();
    case K_JOB:
        return g_job(true);
    case K_JOB_BAD:
        return g_job(false);
    case K_AWARD:
        return g_award(true);
    case K_AWARD_BAD:
        return g_award(false);
    case K_ACCEPT:
        return g_accept(false);
    case K_ACCEPT_AGAIN:
        return g_accept(true);
    case K_RESULT:
        return g_result();
    case K_SETTLE:
        return g_close(false);
    case K_SLASH:
        return g_close(true);
    case K_CANCEL:
        return g_cancel();
    case K_CLOSE:
        return g_pclose();
    case K_GARBAGE:
        return g_garbage();
    case K_MUTATE:
        return g_mutate();
    case K_REPLAY:
        return g_replay();
    case K_CHAIN:
        return g_chain_error();
    case K_FORK:
        return g_fork();
    default:
        return g_banned();
    }
}

static int s_pick_kind(void)
{
    unsigned total = 0;
    for (int k = 0; k < K_COUNT; k++)
        total += s_kinds[k].weight;
    unsigned r = (unsigned)s_below(total);
    for (int k = 0; k < K_COUNT; k++) {
        if (r < s_kinds[k].weight)
            return k;
        r -= s_kinds[k].weight;
    }
    return 0;
}

static bool s_setup(void)
{
    uint64_t credits[NA];
    for (uint32_t i = 0; i < NA; i++)
        credits[i] = 2000 + s_below(30000);
    fx_close_window_ms = CLOSE_WINDOW_MS;
    int rc = fx_init_seeded(&s_fx, "property", NA, credits, &s_seed);
    if (rc != NS_OK) {
        fprintf(stderr, "fixture: %s (%s)\n", ns_strerror(rc), s_fx.err);
        return false;
    }
    ns_ledger_set_verifier(s_fx.l, fx_slash_verifier, NULL);
    memset(&M, 0, sizeof M);
    s_total = 0;
    for (uint32_t i = 0; i < NA; i++) {
        M.a[i].free = credits[i];
        s_total += credits[i];
        s_last[i] = -1;
    }
    for (uint32_t i = 0; i < ID_SLOTS; i++)
        s_slot[i] = -1;
    return true;
}

TEST(random_operations)
{
    if (!s_setup())
        return;
    const char *env = getenv("NS_TEST_OPS");
    uint32_t n_ops =
        env && *env ? (uint32_t)strtoul(env, NULL, 10) : DEFAULT_OPS;
    uint32_t kind_runs[K_COUNT] = {0};
    CHECK(s_check_model(NULL));
    for (s_op_no = 0; s_op_no < n_ops && !s_failed; s_op_no++) {
        int k = s_pick_kind();
        s_op_name = s_kinds[k].name;
        for (int tries = 0; tries < 8 && !s_run_kind(k); tries++) {
            k = s_pick_kind();
            s_op_name = s_kinds[k].name;
        }
        kind_runs[k]++;
        if (s_op_no % 512 == 511 && !CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK))
            break;
    }
    CHECK(!s_failed);
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
    s_op_name = "end";
    CHECK(s_check_model(NULL));
    printf("market_property: %u operations, %u stored, %u refused, "
           "%u forks, %u jobs, %u awards, %" PRIu64 " burned\n",
           s_op_no, s_count_ok, s_count_refused, s_n_forks, M.n_jobs,
           M.n_awards, M.burned);
    printf("market_property: stored by type:");
    for (int t = 1; t <= NS_ENTRY_TYPE_MAX; t++)
        printf(" %s %u", ns_entry_type_name((uint32_t)t), s_kind_ok[t]);
    printf("\n");
    /* the run must have exercised every kind of entry */
    for (int t = 1; t <= NS_ENTRY_TYPE_MAX && n_ops >= DEFAULT_OPS; t++)
        if (!CHECK(s_kind_ok[t] > 0))
            fprintf(stderr, "  no %s was stored\n",
                    ns_entry_type_name((uint32_t)t));
    /* credits the model knows, as the ledger reports them */
    uint32_t bad = 0;
    for (uint32_t i = 0; i < M.n_credits; i++) {
        uint64_t amount = 0;
        bool claimed = false;
        if (ns_ledger_credit(s_fx.l, M.credit[i].src,
                             s_fx.acct[M.credit[i].to].pk, &amount,
                             &claimed) != NS_OK ||
            amount != M.credit[i].amount || claimed != M.credit[i].claimed)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    uint8_t *ids = malloc((size_t)MAX_CREDITS * NS_HASH_BYTES);
    if (ids) {
        for (uint32_t i = 0; i < NA; i++) {
            uint32_t want = 0;
            for (uint32_t c = 0; c < M.n_credits; c++) {
                /* a banned author's credits are not offered for claims */
                int32_t src = s_lookup(M.credit[c].src);
                want += M.credit[c].to == i && !M.credit[c].claimed &&
                        !(src >= 0 && M.a[s_log[src].who].banned);
            }
            CHECK_EQ_INT(
                ns_ledger_unclaimed(s_fx.l, s_fx.acct[i].pk, ids, MAX_CREDITS),
                want);
        }
        free(ids);
    }
}

/* ---- determinism
 * ------------------------------------------------------------- */

static fx_snap_t s_snap1, s_snap2;

/* Same accounts, stats, digest, jobs and credits as the first ledger. */
static void s_compare(ns_ledger_t *l, const char *what)
{
    char why[512];
    fx_snap_of(s_fx.l, &s_snap1);
    fx_snap_of(l, &s_snap2);
    if (!CHECK(fx_snap_same(&s_snap1, &s_snap2, why, sizeof why)))
        fprintf(stderr, "  %s: %s (seed %" PRIu64 ")\n", what, why, s_seed);
    CHECK_RC(s_snap2.cons_rc, NS_OK);
    uint32_t jobs_differ = 0, credits_differ = 0;
    for (uint32_t i = 0; i < M.n_jobs; i++) {
        ns_ledger_job_t x, y;
        if (ns_ledger_job(s_fx.l, M.job[i].id, &x) != NS_OK ||
            ns_ledger_job(l, M.job[i].id, &y) != NS_OK) {
            jobs_differ++;
            continue;
        }
        bool differ =
            x.state != y.state || x.round != y.round ||
            memcmp(x.award_id, y.award_id, NS_HASH_BYTES) ||
            memcmp(x.accept_id, y.accept_id, NS_HASH_BYTES) ||
            memcmp(x.result_id, y.result_id, NS_HASH_BYTES) ||
            memcmp(x.root, y.root, NS_HASH_BYTES) || x.n_items != y.n_items ||
            memcmp(x.desc_id, y.desc_id, NS_HASH_BYTES) ||
            memcmp(x.requester, y.requester, NS_ID_BYTES) ||
            memcmp(x.provider, y.provider, NS_ID_BYTES) || x.price != y.price ||
            x.escrow != y.escrow || x.max_price != y.max_price ||
            x.collateral != y.collateral || x.deadline_ms != y.deadline_ms ||
            x.slashed != y.slashed;
        if (differ && jobs_differ++ < 3)
            fprintf(stderr,
                    "  %s: job %u: state %u/%u round %u/%u accept %d/%d "
                    "result %d/%d deadline %llu/%llu\n",
                    what, i, x.state, y.state, x.round, y.round,
                    !sodium_is_zero(x.accept_id, NS_HASH_BYTES),
                    !sodium_is_zero(y.accept_id, NS_HASH_BYTES),
                    !sodium_is_zero(x.result_id, NS_HASH_BYTES),
                    !sodium_is_zero(y.result_id, NS_HASH_BYTES),
                    (unsigned long long)x.deadline_ms,
                    (unsigned long long)y.deadline_ms);
    }
    for (uint32_t i = 0; i < M.n_credits; i++) {
        uint64_t a1 = 0, a2 = 0;
        bool c1 = false, c2 = false;
        const uint8_t *to = s_fx.acct[M.credit[i].to].pk;
        if (ns_ledger_credit(s_fx.l, M.credit[i].src, to, &a1, &c1) != NS_OK ||
            ns_ledger_credit(l, M.credit[i].src, to, &a2, &c2) != NS_OK ||
            a1 != a2 || c1 != c2)
            credits_differ++;
    }
    if (!CHECK_EQ_INT(jobs_differ, 0))
        fprintf(stderr, "  %s: jobs differ\n", what);
    if (!CHECK_EQ_INT(credits_differ, 0))
        fprintf(stderr, "  %s: credits differ\n", what);
}

static void s_feed_forks(ns_ledger_t *l)
{
    for (uint32_t i = 0; i < s_n_forks; i++)
        CHECK_RC(
            ns_ledger_ingest(l, s_forks[i].data, s_forks[i].len, NULL, NULL),
            NS_ERR_FORK);
}

/* The valid entries in a random order in which every entry comes after
 * all it names (its author's previous entry, its refs, its body's id). */
TEST(any_causal_order_same_state)
{
    if (s_failed || s_n_log == 0)
        return;
    ns_ledger_t *l = fx_open_other(&s_fx, "causal");
    if (!CHECK(l != NULL))
        return;
    ns_ledger_set_verifier(l, fx_slash_verifier, NULL);
    uint32_t *indeg = calloc(s_n_log, sizeof *indeg);
    uint32_t *n_child = calloc(s_n_log, sizeof *n_child);
    uint32_t *off = calloc(s_n_log + 1, sizeof *off);
    uint32_t *child = NULL, *ready = calloc(s_n_log, sizeof *ready);
    uint32_t n_edges = 0;
    for (uint32_t i = 0; i < s_n_log; i++)
        n_edges += s_log[i].n_deps;
    child = calloc(n_edges + 1, sizeof *child);
    if (!CHECK(indeg && n_child && off && child && ready))
        goto out;
    for (uint32_t i = 0; i < s_n_log; i++)
        for (uint32_t d = 0; d < s_log[i].n_deps; d++) {
            n_child[s_log[i].deps[d]]++;
            indeg[i]++;
        }
    for (uint32_t i = 0; i < s_n_log; i++)
        off[i + 1] = off[i] + n_child[i];
    memset(n_child, 0, s_n_log * sizeof *n_child);
    for (uint32_t i = 0; i < s_n_log; i++)
        for (uint32_t d = 0; d < s_log[i].n_deps; d++) {
            uint32_t p = (uint32_t)s_log[i].deps[d];
            child[off[p] + n_child[p]++] = i;
        }
    uint32_t n_ready = 0, done = 0, not_ok = 0, moved = 0;
    for (uint32_t i = 0; i < s_n_log; i++)
        if (indeg[i] == 0)
            ready[n_ready++] = i;
    while (n_ready) {
        uint32_t pick = (uint32_t)s_below(n_ready);
        uint32_t i = ready[pick];
        ready[pick] = ready[--n_ready];
        moved += i != done;
        int rc = ns_ledger_ingest(l, s_log[i].bytes, s_log[i].len, NULL, NULL);
        if (rc != NS_OK && not_ok++ < 5)
            fprintf(stderr,
                    "  causal order: entry %u (%s) refused: %s (seed "
                    "%" PRIu64 ")\n",
                    i, ns_entry_type_name(s_log[i].bytes[0]), ns_errname(rc),
                    s_seed);
        done++;
        for (uint32_t c = off[i]; c < off[i + 1]; c++)
            if (--indeg[child[c]] == 0)
                ready[n_ready++] = child[c];
    }
    CHECK_EQ_INT(done, s_n_log);
    CHECK_EQ_INT(not_ok, 0);
    CHECK(moved > s_n_log / 2); /* the order really differs */
    s_feed_forks(l);
    CHECK_RC(ns_ledger_commit(l), NS_OK);
    s_compare(l, "causal order");
out:
    free(indeg);
    free(n_child);
    free(off);
    free(child);
    free(ready);
    ns_ledger_close(&l);
}

/* The valid entries in windows shuffled at random, with duplicates:
 * entries arrive before what they need, wait, and are applied when it
 * comes. */
TEST(shuffled_windows_same_state)
{
    if (s_failed || s_n_log == 0)
        return;
    ns_ledger_t *l = fx_open_other(&s_fx, "shuffled");
    if (!CHECK(l != NULL))
        return;
    ns_ledger_set_verifier(l, fx_slash_verifier, NULL);
    uint32_t *order = calloc(s_n_log, sizeof *order);
    if (!CHECK(order != NULL)) {
        ns_ledger_close(&l);
        return;
    }
    for (uint32_t i = 0; i < s_n_log; i++)
        order[i] = i;
    uint32_t waited = 0, refused = 0, max_buffered = 0;
    for (uint32_t w = 0; w < s_n_log; w += WINDOW) {
        uint32_t n = s_n_log - w < WINDOW ? s_n_log - w : WINDOW;
        for (uint32_t i = n - 1; i > 0; i--) {
            uint32_t j = (uint32_t)s_below(i + 1), t = order[w + i];
            order[w + i] = order[w + j];
            order[w + j] = t;
        }
        for (uint32_t i = 0; i < n; i++) {
            const s_log_t *e = &s_log[order[w + i]];
            int rc = ns_ledger_ingest(l, e->bytes, e->len, NULL, NULL);
            waited += rc == NS_ERR_GAP || rc == NS_ERR_MISSING;
            ns_ledger_stats_t st;
            ns_ledger_stats(l, &st);
            if (st.buffered > max_buffered)
                max_buffered = st.buffered;
            if (rc != NS_OK && rc != NS_ERR_GAP && rc != NS_ERR_MISSING &&
                rc != NS_ERR_DUPLICATE && refused++ < 5)
                fprintf(stderr,
                        "  shuffled: entry %u refused: %s (seed %" PRIu64 ")\n",
                        order[w + i], ns_errname(rc), s_seed);
            if (s_chance(50)) { /* a duplicate delivery */
                const s_log_t *d = &s_log[order[w + (uint32_t)s_below(i + 1)]];
                (void)ns_ledger_ingest(l, d->bytes, d->len, NULL, NULL);
            }
        }
        if (w % (WINDOW * 64) == 0)
            CHECK_RC(ns_ledger_commit(l), NS_OK);
    }
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    CHECK_EQ_INT(refused, 0);
    CHECK_EQ_INT(st.buffered, 0);
    CHECK(waited > 0); /* the shuffle made entries wait */
    printf("market_property: shuffled delivery: %u waited, at most %u "
           "buffered\n",
           waited, max_buffered);
    s_feed_forks(l);
    CHECK_RC(ns_ledger_commit(l), NS_OK);
    s_compare(l, "shuffled windows");
    free(order);
    ns_ledger_close(&l);
}

TEST(reopen_after_random_operations)
{
    if (s_failed)
        return;
    static fx_snap_t before, after;
    char why[512];
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
    fx_snap_of(s_fx.l, &before);
    ns_ledger_close(&s_fx.l);
    int rc;
    s_fx.l =
        ns_ledger_open(s_fx.dir, &s_fx.genesis, &rc, s_fx.err, sizeof s_fx.err);
    if (!CHECK(s_fx.l != NULL)) {
        fprintf(stderr, "  reopen: %s: %s\n", ns_errname(rc), s_fx.err);
        return;
    }
    fx_snap_of(s_fx.l, &after);
    if (!CHECK(fx_snap_same(&before, &after, why, sizeof why)))
        fprintf(stderr, "  after reopen: %s\n", why);
    ns_ledger_set_verifier(s_fx.l, fx_slash_verifier, NULL);
    s_op_name = "after reopen";
    CHECK(s_check_model(NULL));
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    s_seed = fx_seed("market_property");
    s_rng = s_seed;
    RUN(random_operations);
    RUN(any_causal_order_same_state);
    RUN(shuffled_windows_same_state);
    RUN(reopen_after_random_operations);
    for (uint32_t i = 0; i < s_n_log; i++)
        free(s_log[i].bytes);
    for (uint32_t i = 0; i < s_n_forks; i++)
        ns_buf_release(&s_forks[i]);
    fx_free(&s_fx);
    return ns_test_finish("market_property");
}
