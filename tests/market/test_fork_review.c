/* test_fork_review.c - review of "forks take back job entries" (the undo
 * records, the void of a forked author's entries, and the unwind of what
 * other chains built on them: market/ledger.c s_fork, s_take_back,
 * s_undo_entry, s_built_on, s_unwind).
 *
 * Goal under test (docs/PROTOCOL.md, "Forks"): whatever order a node
 * receives a set of entries in (both branches of every fork included),
 * every node ends in the same state (accounts, totals, digest, job
 * records, open credits) and the ledger conserves the genesis total and
 * opens again.
 *
 * Tests:
 *  - random_histories: random multi-account histories (transfers, stakes,
 *    claims taken in at once by colluders, job flows through SETTLE,
 *    SLASH and CANCEL, ACCEPTs and SETTLEs that do not wait for
 *    confirmation) with forks (at the head and at older seqs, several per
 *    author), a causally closed set of confirmed entries, each history
 *    delivered in many random orders to fresh ledgers; plus a "late"
 *    order where part of the confirmations arrive after everything else
 *    (ns_ledger_reconsider, as the votes module does).
 *  - confirm_hook_reads_ledger: the real confirmation hook
 *    (ledger_votes.c, ns_votes_state -> s_refresh_stake) reads the
 *    ledger; a void asks it inside its child transactions.
 *  - colluder_fork_ban_*: a colluder whose own fork proof names a voided
 *    entry.
 *
 * The seed is printed; NS_TEST_SEED=<n> repeats a run. By default the
 * random histories use seed 1 (a regression guard that cannot flake);
 * --long (or NS_LONG=1) draws a fresh seed and runs 200 histories in 40
 * orders each
 * (about 67,000 checks, several minutes).
 */
#include "check.h"
#include "ledger_fixture.h"

#include <inttypes.h>
#include <time.h>

#define NA 6
#define MAX_SET 160
#define MAX_JOBS 64
#define MAX_DEPS 40
#define MAX_UNCL 64

static uint64_t s_rng, s_seed;
static fx_t s_fx;

static uint64_t s_below(uint64_t n)
{
    return fx_below(&s_rng, n);
}

static bool s_long(void)
{
    const char *env = getenv("NS_LONG");
    return env && *env && strcmp(env, "0");
}

/* ---- the set of entries ------------------------------------------------ */

typedef struct {
    ns_buf_t raw;
    uint32_t who;
    uint64_t seq;
    uint8_t type;
    ns_hash_t id;
    bool alt;  /* the second branch of a fork (never confirmed) */
    bool conf; /* confirmed from the start */
    bool late; /* confirmed, but only after delivery */
    int32_t deps[MAX_DEPS];
    uint32_t n_deps;
} s_ent_t;

static s_ent_t s_set[MAX_SET];
static uint32_t s_n;
static ns_hash_t s_jobs[MAX_JOBS];
static uint32_t s_n_jobs;

static void s_set_free(void)
{
    for (uint32_t i = 0; i < s_n; i++)
        ns_buf_release(&s_set[i].raw);
    s_n = 0;
    s_n_jobs = 0;
}

static int32_t s_find(const ns_hash_t id)
{
    for (uint32_t i = 0; i < s_n; i++)
        if (memcmp(s_set[i].id, id, NS_HASH_BYTES) == 0)
            return (int32_t)i;
    return -1;
}

/* Confirmation: mode 0, the entries marked conf; mode 1, conf and late. */
static int s_conf_mode;

static ns_confirm_state s_conf_fn(void *u, const ns_hash_t id)
{
    (void)u;
    int32_t i = s_find(id);
    if (i < 0)
        return NS_CONFIRM_NO;
    bool yes = s_set[i].conf || (s_conf_mode == 1 && s_set[i].late);
    return yes ? NS_CONFIRM_YES : NS_CONFIRM_NO;
}

/* ---- the end state of one delivery ---------------------------------------
 */

typedef struct {
    fx_snap_t snap;
    int job_rc[MAX_JOBS];
    ns_ledger_job_t job[MAX_JOBS];
    uint32_t n_uncl[NA];
    uint8_t uncl[NA][MAX_UNCL * NS_HASH_BYTES];
} s_end_t;

static s_end_t s_first, s_this;
static bool s_trace; /* print each delivery (a failed order, run again) */

static int s_cmp_hash(const void *x, const void *y)
{
    return memcmp(x, y, NS_HASH_BYTES);
}

static void s_end_of(ns_ledger_t *l, s_end_t *end)
{
    fx_snap_of(l, &end->snap);
    for (uint32_t j = 0; j < s_n_jobs; j++) {
        memset(&end->job[j], 0, sizeof end->job[j]);
        end->job_rc[j] = ns_ledger_job(l, s_jobs[j], &end->job[j]);
    }
    for (uint32_t a = 0; a < NA; a++) {
        end->n_uncl[a] =
            ns_ledger_unclaimed_all(l, s_fx.acct[a].pk, end->uncl[a], MAX_UNCL);
        qsort(end->uncl[a], end->n_uncl[a], NS_HASH_BYTES, s_cmp_hash);
    }
}

static bool s_end_same(const s_end_t *x, const s_end_t *y, char *why,
                       size_t cap)
{
    if (!fx_snap_same(&x->snap, &y->snap, why, cap))
        return false;
    for (uint32_t j = 0; j < s_n_jobs; j++)
        if (x->job_rc[j] != y->job_rc[j] ||
            memcmp(&x->job[j], &y->job[j], sizeof x->job[j])) {
            snprintf(why, cap,
                     "job %u differs (%s/%s, state %u/%u round %u/%u)", j,
                     ns_errname(x->job_rc[j]), ns_errname(y->job_rc[j]),
                     x->job[j].state, y->job[j].state, x->job[j].round,
                     y->job[j].round);
            return false;
        }
    for (uint32_t a = 0; a < NA; a++)
        if (x->n_uncl[a] != y->n_uncl[a] ||
            memcmp(x->uncl[a], y->uncl[a], (size_t)x->n_uncl[a] * 32)) {
            snprintf(why, cap, "open credits of account %u differ (%u/%u)", a,
                     x->n_uncl[a], y->n_uncl[a]);
            return false;
        }
    return true;
}

/* Account who of the fixture in a snapshot (all 0xff: none). */
static ns_account_t s_snap_acct(const fx_snap_t *snap, uint32_t who)
{
    ns_account_t a;
    memset(&a, 0xff, sizeof a);
    for (uint32_t k = 0; k < snap->n; k++)
        if (memcmp(snap->a[k].id, s_fx.acct[who].pk, NS_ID_BYTES) == 0)
            a = snap->a[k];
    return a;
}

/* ---- delivery ------------------------------------------------------------ */

static void s_deliver_all(ns_ledger_t *l)
{
    for (bool more = true; more;) {
        more = false;
        for (uint32_t i = 0; i < s_n; i++)
            more |= ns_ledger_ingest(l, s_set[i].raw.data, s_set[i].raw.len,
                                     NULL, NULL) == NS_OK;
    }
}

/* The whole set to a fresh ledger: k == 0 in the set's order, else each
 * entry one to three times in a random order, then again in order until
 * nothing more is taken. late: deliver with the early confirmations
 * only, then confirm the late ones (ns_ledger_reconsider, random order)
 * and deliver again. Checks conservation and that the ledger reopens
 * with the same state. */
static bool s_run_order(uint32_t k, bool late, s_end_t *end, const char *sc)
{
    static uint32_t order[MAX_SET * 3];
    uint32_t m = fx_order(order, s_n, &s_rng, k > 0);
    char name[32], dir[700];
    snprintf(name, sizeof name, "order%u%s", k, late ? "l" : "");
    snprintf(dir, sizeof dir, "%s/%s", s_fx.root, name);
    fx_rmrf(dir);
    ns_ledger_t *l = fx_open_other(&s_fx, name);
    if (!CHECK(l != NULL))
        return false;
    ns_ledger_set_verifier(l, fx_slash_verifier, NULL);
    ns_ledger_set_confirm(l, s_conf_fn, NULL);
    s_conf_mode = late ? 0 : 1;
    for (uint32_t i = 0; i < m; i++) {
        int irc = ns_ledger_ingest(l, s_set[order[i]].raw.data,
                                   s_set[order[i]].raw.len, NULL, NULL);
        if (s_trace)
            fprintf(stderr, "  trace: #%u -> %s\n", order[i], ns_errname(irc));
    }
    s_deliver_all(l);
    if (late) {
        s_conf_mode = 1;
        uint32_t ids[MAX_SET], n = 0;
        for (uint32_t i = 0; i < s_n; i++)
            if (s_set[i].late)
                ids[n++] = i;
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = (uint32_t)s_below(i), t = ids[i - 1];
            ids[i - 1] = ids[j];
            ids[j] = t;
        }
        for (uint32_t i = 0; i < n; i++)
            (void)ns_ledger_reconsider(l, s_set[ids[i]].id);
        s_deliver_all(l);
    }
    bool ok = CHECK_RC(ns_ledger_commit(l), NS_OK);
    s_end_of(l, end);
    ok &= CHECK_RC(end->snap.cons_rc, NS_OK);
    if (end->snap.cons_rc != NS_OK)
        fprintf(stderr, "  %s order %u: sum %llu, genesis %llu\n", sc, k,
                (unsigned long long)end->snap.sum,
                (unsigned long long)end->snap.total);
    ns_ledger_close(&l);
    /* it opens again, in the same state */
    int rc;
    char err[256] = "";
    l = ns_ledger_open(dir, &s_fx.genesis, &rc, err, sizeof err);
    if (!CHECK(l != NULL)) {
        fprintf(stderr,
                "  %s order %u: reopen: %s (NS_TEST_SEED=%" PRIu64 ")\n", sc, k,
                err, s_seed);
        fx_rmrf(dir);
        return false;
    }
    static s_end_t again;
    char why[512];
    s_end_of(l, &again);
    if (!CHECK(s_end_same(end, &again, why, sizeof why))) {
        fprintf(stderr, "  %s order %u: after reopen: %s\n", sc, k, why);
        ok = false;
    }
    ns_ledger_close(&l);
    fx_rmrf(dir);
    return ok;
}

/* The set in n orders (and, when the set has late confirmations, as many
 * again with them late): one state everywhere. */
static bool s_many_orders(const char *sc, uint32_t n)
{
    char why[512];
    if (!s_run_order(0, false, &s_first, sc))
        return false;
    bool any_late = false;
    for (uint32_t i = 0; i < s_n; i++)
        any_late |= s_set[i].late;
    for (uint32_t k = 1; k < n * (any_late ? 2 : 1); k++) {
        bool late = k >= n;
        uint64_t rng = s_rng;
        if (!s_run_order(k, late, &s_this, sc))
            return false;
        if (!CHECK(s_end_same(&s_first, &s_this, why, sizeof why))) {
            fprintf(stderr, "  %s: order %u%s: %s (NS_TEST_SEED=%" PRIu64 ")\n",
                    sc, k, late ? " (late confirmations)" : "", why, s_seed);
            if (getenv("NS_REVIEW_TRACE")) { /* that order again, traced */
                s_rng = rng;
                s_trace = true;
                (void)s_run_order(k, late, &s_this, sc);
                s_trace = false;
            }
            return false;
        }
    }
    return true;
}

/* ---- building entries ---------------------------------------------------- */

/* who's entry at seq after prev, at ts, into the set (not into any
 * ledger). Returns its index, or -1. */
static int32_t s_add_raw(uint32_t who, uint64_t seq, const ns_hash_t prev,
                         uint8_t type, const ns_entry_body_t *b,
                         const uint8_t *refs, uint32_t n_refs, uint64_t ts)
{
    if (s_n == MAX_SET)
        return -1;
    s_ent_t *x = &s_set[s_n];
    memset(x, 0, sizeof *x);
    ns_buf_init(&x->raw);
    if (fx_make_raw(&s_fx, who, seq, prev, type, b, refs, n_refs, ts, &x->raw,
                    x->id) != NS_OK) {
        ns_buf_release(&x->raw);
        return -1;
    }
    x->who = who;
    x->seq = seq;
    x->type = type;
    return (int32_t)s_n++;
}

static void s_dep(s_ent_t *x, const ns_hash_t id)
{
    int32_t d = s_find(id);
    if (d >= 0 && x->n_deps < MAX_DEPS)
        x->deps[x->n_deps++] = d;
}

/* The deps of set entry i: its prev (the main branch's entry at seq - 1)
 * and every entry it names. */
static void s_deps(int32_t i, const ns_hash_t prev, const ns_entry_body_t *b,
                   const uint8_t *refs, uint32_t n_refs)
{
    s_ent_t *x = &s_set[i];
    if (prev)
        s_dep(x, prev);
    for (uint32_t r = 0; r < n_refs; r++)
        s_dep(x, refs + (size_t)r * NS_HASH_BYTES);
    if (x->type >= NS_ENTRY_ACCEPT && !sodium_is_zero(b->ref_id, 32))
        s_dep(x, b->ref_id);
}

/* ---- random histories ------------------------------------------------------
 */

/* The generator: the main branch of every chain goes through s_fx.l (the
 * oracle of what is valid); second branches are signed and kept, never
 * given to it. */
typedef struct {
    ns_hash_t ids[256];    /* main branch, by seq - 1 */
    uint64_t ts[256];      /* their timestamps */
    ns_account_t pre[256]; /* the account before each */
    uint32_t forks;
} s_chain_t;

static s_chain_t s_chain[NA];
static uint32_t s_job_no;

/* Try who's next main entry on the oracle: into the set when it takes
 * it. */
static bool s_try(uint32_t who, uint8_t type, const ns_entry_body_t *b,
                  const uint8_t *refs, uint32_t n_refs)
{
    fx_acct_t *a = &s_fx.acct[who];
    if (a->seq >= 255 || s_n == MAX_SET)
        return false;
    ns_account_t pre = fx_acct_in(s_fx.l, &s_fx, who);
    uint64_t ts = fx_tick(&s_fx);
    static const ns_hash_t zero;
    int32_t i = s_add_raw(who, a->seq + 1, a->seq ? a->head : zero, type, b,
                          refs, n_refs, ts);
    if (i < 0)
        return false;
    if (ns_ledger_ingest(s_fx.l, s_set[i].raw.data, s_set[i].raw.len, NULL,
                         NULL) != NS_OK) {
        ns_buf_release(&s_set[i].raw);
        s_n--;
        return false;
    }
    memcpy(s_chain[who].ids[a->seq], s_set[i].id, NS_HASH_BYTES);
    s_chain[who].ts[a->seq] = ts;
    s_chain[who].pre[a->seq] = pre;
    s_deps(i, a->seq ? a->head : NULL, b, refs, n_refs);
    fx_advance(&s_fx, who, s_set[i].id, ts);
    if (type == NS_ENTRY_JOB && s_n_jobs < MAX_JOBS)
        memcpy(s_jobs[s_n_jobs++], b->job_id, NS_HASH_BYTES);
    return true;
}

/* A second branch for who at seq (1 .. head + 1): a small STAKE, UNSTAKE
 * or TRANSFER valid against the account before that seq. */
static void s_fork_at(uint32_t who, uint64_t seq)
{
    s_chain_t *c = &s_chain[who];
    ns_account_t pre = seq <= s_fx.acct[who].seq
                           ? c->pre[seq - 1]
                           : fx_acct_in(s_fx.l, &s_fx, who);
    ns_entry_body_t b;
    uint8_t type;
    uint64_t pick = s_below(3);
    if (pick == 0 && pre.free >= 3) {
        type = NS_ENTRY_STAKE;
        b = fx_amount(1 + s_below(3));
    } else if (pick == 1 && pre.staked >= 2) {
        type = NS_ENTRY_UNSTAKE;
        b = fx_amount(1 + s_below(2));
    } else if (pre.free >= 1) {
        uint32_t to = (uint32_t)s_below(NA - 1);
        to += to >= who;
        type = NS_ENTRY_TRANSFER;
        b = fx_transfer(s_fx.acct[to].pk, 1);
    } else {
        return;
    }
    uint64_t ts = seq > 1 ? c->ts[seq - 2] + 1 : FX_T0_MS + 1;
    if (seq > s_fx.acct[who].seq)
        ts = fx_tick(&s_fx);
    int32_t i = s_add_raw(who, seq, seq > 1 ? c->ids[seq - 2] : NULL, type, &b,
                          NULL, 0, ts);
    if (i < 0)
        return;
    s_set[i].alt = true;
    if (seq > 1)
        s_dep(&s_set[i], c->ids[seq - 2]);
    c->forks++;
}

static void s_claims(uint32_t who, uint8_t *refs, uint32_t *n, uint32_t max)
{
    uint8_t ids[16 * NS_HASH_BYTES];
    uint32_t k = ns_ledger_unclaimed_all(s_fx.l, s_fx.acct[who].pk, ids, 16);
    *n = 0;
    for (uint32_t i = 0; i < k && *n < max; i++)
        if (s_below(3))
            memcpy(refs + (size_t)(*n)++ * NS_HASH_BYTES,
                   ids + (size_t)i * NS_HASH_BYTES, NS_HASH_BYTES);
}

/* One random step of account who on its main branch. */
static void s_step(uint32_t who)
{
    ns_account_t a = fx_acct_in(s_fx.l, &s_fx, who);
    uint8_t refs[4 * NS_HASH_BYTES];
    uint32_t n_refs = 0;
    ns_entry_body_t b;
    uint32_t other = (uint32_t)s_below(NA - 1);
    other += other >= who;
    /* colluders take credits in at once, with any entry */
    if (s_below(3) == 0)
        s_claims(who, refs, &n_refs, 3);
    switch (s_below(12)) {
    case 0:
    case 1:
        if (a.free < 2)
            break;
        b = fx_transfer(s_fx.acct[other].pk, 1 + s_below(a.free / 4 + 1));
        (void)s_try(who, NS_ENTRY_TRANSFER, &b, refs, n_refs);
        return;
    case 2:
        b = fx_amount(n_refs && s_below(2) ? 0 : 1 + s_below(a.free / 3 + 1));
        (void)s_try(who, NS_ENTRY_STAKE, &b, refs, n_refs);
        return;
    case 3:
        if (a.staked == 0)
            break;
        b = fx_amount(1 + s_below(a.staked));
        (void)s_try(who, NS_ENTRY_UNSTAKE, &b, refs, n_refs);
        return;
    case 4: { /* JOB */
        uint64_t escrow = 20 + s_below(200);
        if (a.free < escrow)
            break;
        uint64_t dl = s_below(3) ? 3600000 : 40 + s_below(60);
        b = fx_job(s_fx.acct[who].pk, s_job_no++, escrow,
                   escrow / 2 + s_below(escrow / 2 + 1), 10 + s_below(150),
                   s_fx.now + dl, NULL);
        (void)s_try(who, NS_ENTRY_JOB, &b, refs, n_refs);
        return;
    }
    default:
        break;
    }
    /* job steps: look at the jobs as the oracle has them */
    uint32_t start = (uint32_t)s_below(s_n_jobs + 1);
    for (uint32_t jj = 0; jj < s_n_jobs; jj++) {
        uint32_t j = (start + jj) % s_n_jobs;
        ns_ledger_job_t job;
        if (ns_ledger_job(s_fx.l, s_jobs[j], &job) != NS_OK)
            continue;
        bool mine = memcmp(job.requester, s_fx.acct[who].pk, 32) == 0;
        bool prov = job.state == NS_JOB_AWARDED &&
                    memcmp(job.provider, s_fx.acct[who].pk, 32) == 0;
        if (mine && job.state == NS_JOB_OPEN && s_below(4)) {
            uint32_t p = other;
            b = fx_award(&s_fx, s_jobs[j], p, job.max_price / 2 + 1);
            if (s_try(who, NS_ENTRY_AWARD, &b, refs, n_refs))
                return;
        }
        if (prov && sodium_is_zero(job.accept_id, 32)) {
            if (a.staked < job.collateral) { /* stake for it */
                b = fx_amount(job.collateral - a.staked);
                if (!s_try(who, NS_ENTRY_STAKE, &b, refs, n_refs))
                    continue;
                return;
            }
            b = fx_ref(s_jobs[j], job.award_id);
            if (s_try(who, NS_ENTRY_ACCEPT, &b, refs, n_refs))
                return;
        }
        if (prov && !sodium_is_zero(job.accept_id, 32) &&
            sodium_is_zero(job.result_id, 32)) {
            b = fx_result(s_jobs[j], job.accept_id, 1 + s_below(16));
            if (s_try(who, NS_ENTRY_RESULT, &b, refs, n_refs))
                return;
        }
        if (mine && job.state == NS_JOB_AWARDED &&
            !sodium_is_zero(job.result_id, 32) && s_below(4)) {
            static const uint8_t proof[] = {1, 7};
            b = fx_ref(s_jobs[j], job.result_id);
            uint8_t type = NS_ENTRY_SETTLE;
            if (s_below(3) == 0) {
                b.proof = proof;
                b.proof_len = sizeof proof;
                type = NS_ENTRY_SLASH;
            }
            if (s_try(who, type, &b, refs, n_refs))
                return;
        }
        if (mine && (job.state == NS_JOB_OPEN || job.state == NS_JOB_AWARDED) &&
            s_below(5) == 0) {
            bool with_accept = job.state == NS_JOB_AWARDED &&
                               !sodium_is_zero(job.accept_id, 32) &&
                               s_fx.now + 10 >= job.deadline_ms;
            bool reopen = s_below(2);
            b = fx_cancel(s_jobs[j], with_accept ? job.accept_id : NULL, reopen,
                          s_fx.now + 3600000);
            if (s_try(who, NS_ENTRY_CANCEL, &b, refs, n_refs))
                return;
        }
    }
    if (n_refs) { /* at least take the credits in */
        b = fx_amount(0);
        (void)s_try(who, NS_ENTRY_STAKE, &b, refs, n_refs);
    }
}

/* Confirm a random causally closed part of the main branches: an entry
 * only when every entry it depends on is; second branches never. late:
 * of those, a closed part is confirmed from the start, the rest only
 * after delivery. */
static void s_confirm_some(unsigned per_mille, bool late)
{
    for (uint32_t i = 0; i < s_n; i++) {
        s_ent_t *x = &s_set[i];
        x->conf = x->late = false;
        if (x->alt || s_below(1000) >= per_mille)
            continue;
        bool all = true, all_early = true;
        for (uint32_t d = 0; d < x->n_deps; d++) {
            const s_ent_t *y = &s_set[x->deps[d]];
            all &= y->conf || y->late;
            all_early &= y->conf;
        }
        if (!all)
            continue;
        if (late && (!all_early || s_below(2)))
            x->late = true;
        else
            x->conf = true;
    }
}

/* NS_REVIEW_DUMP=1: the set, one line an entry (to read a failure). */
static void s_dump(void)
{
    static const char *names[] = {"?",      "TRANSFER", "STAKE",  "UNSTAKE",
                                  "JOB",    "AWARD",    "ACCEPT", "RESULT",
                                  "SETTLE", "SLASH",    "CANCEL"};
    for (uint32_t i = 0; i < s_n; i++) {
        const s_ent_t *x = &s_set[i];
        char id[9];
        ns_hex(id, x->id, 4);
        fprintf(stderr, "  #%u %c%llu %s %s%s%s%s deps:", i, 'A' + x->who,
                (unsigned long long)x->seq, id,
                names[x->type <= 10 ? x->type : 0], x->alt ? " ALT" : "",
                x->conf ? " conf" : "", x->late ? " late" : "");
        for (uint32_t d = 0; d < x->n_deps; d++)
            fprintf(stderr, " #%d", x->deps[d]);
        fputc('\n', stderr);
    }
}

/* A fresh oracle ledger per history (the fixture's own, reopened). */
static bool s_history(uint32_t h, uint32_t steps, uint32_t orders)
{
    s_set_free();
    memset(s_chain, 0, sizeof s_chain);
    ns_ledger_close(&s_fx.l);
    fx_rmrf(s_fx.dir);
    int rc;
    s_fx.l =
        ns_ledger_open(s_fx.dir, &s_fx.genesis, &rc, s_fx.err, sizeof s_fx.err);
    if (!CHECK(s_fx.l != NULL))
        return false;
    ns_ledger_set_verifier(s_fx.l, fx_slash_verifier, NULL);
    for (uint32_t i = 0; i < NA; i++) {
        s_fx.acct[i].seq = 0;
        memset(s_fx.acct[i].head, 0, NS_HASH_BYTES);
        s_fx.acct[i].ts = 0;
    }
    /* a few authors fork, one of them more than once */
    for (uint32_t s = 0; s < steps && s_n < MAX_SET - 4; s++) {
        uint32_t who = (uint32_t)s_below(NA);
        if (s_below(14) == 0 && s_chain[who].forks < 2 && who < NA - 2) {
            uint64_t head = s_fx.acct[who].seq;
            uint64_t seq = head && s_below(2) ? 1 + s_below(head) : head + 1;
            s_fork_at(who, seq);
        }
        s_step(who);
    }
    /* every forker whose second branch is past its head moves on, so
     * that the fork is a fork */
    for (uint32_t who = 0; who < NA; who++)
        for (uint32_t t = 0; t < 3; t++)
            s_step(who);
    char sc[64];
    snprintf(sc, sizeof sc, "history %u (%u entries)", h, s_n);
    uint64_t mode = s_below(4);
    s_confirm_some(mode == 0 ? 0 : mode == 1 ? 300 : 800, s_below(2));
    bool ok = s_many_orders(sc, orders);
    if (!ok)
        s_dump();
    return ok;
}

TEST(random_histories)
{
    uint32_t histories = s_long() ? 200 : 12;
    uint32_t orders = s_long() ? 40 : 8;
    uint32_t failed = 0; /* go on past a failure: report a few */
    for (uint32_t h = 0; h < histories && failed < 3; h++)
        failed += !s_history(h, 45, orders);
}

/* ---- the confirmation hook reads the ledger ------------------------------ */

/* A hook as ledger_votes.c's: ns_votes_state -> s_refresh_stake reads
 * every account (ns_ledger_each_account) and its own account
 * (ns_ledger_account) when its sum of stake is stale (every minute, and
 * 20 ms after a STAKE, UNSTAKE or SLASH), and says NS_CONFIRM_NONE while
 * that sum is 0. Here: every call reads; failures are counted. */
static ns_ledger_t *s_hook_l;
static uint32_t s_hook_calls, s_hook_failed;
static int s_hook_rc;

static bool s_sum_stake(void *u, const ns_account_t *a)
{
    *(uint64_t *)u += a->staked + a->locked_collateral;
    return true;
}

static ns_confirm_state s_reading_hook(void *u, const ns_hash_t id)
{
    (void)u;
    ns_account_t me;
    uint64_t total = 0;
    s_hook_calls++;
    ns_ledger_each_account(s_hook_l, s_sum_stake, &total);
    int rc = ns_ledger_account(s_hook_l, s_fx.acct[1].pk, &me);
    if (rc != NS_OK || total == 0) {
        s_hook_failed++;
        s_hook_rc = rc;
    }
    (void)id;
    return total == 0 ? NS_CONFIRM_NONE : NS_CONFIRM_NO;
}

/* R forks at its AWARD; P accepted it at once. Delivered with the AWARD's
 * branch first: the void takes P's ACCEPT back (s_unwind), asking the
 * hook whether it is confirmed from inside the void's child transaction
 * (ledger.c s_take_back), where the batch cannot be read. */
TEST(confirm_hook_reads_ledger)
{
    enum { R = 0, P = 1, X = 2 };
    s_set_free();
    static const ns_hash_t zero;
    ns_hash_t job, r1, r2, p1, p2;
    ns_entry_body_t b = fx_amount(500);
    int32_t i =
        s_add_raw(P, 1, zero, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(p1, s_set[i].id, 32);
    b = fx_job(s_fx.acct[R].pk, 9001, 500, 300, 200, s_fx.now + 3600000, job);
    i = s_add_raw(R, 1, zero, NS_ENTRY_JOB, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(r1, s_set[i].id, 32);
    b = fx_award(&s_fx, job, P, 250);
    i = s_add_raw(R, 2, r1, NS_ENTRY_AWARD, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(r2, s_set[i].id, 32);
    b = fx_ref(job, r2);
    i = s_add_raw(P, 2, p1, NS_ENTRY_ACCEPT, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(p2, s_set[i].id, 32);
    b = fx_transfer(s_fx.acct[X].pk, 50);
    (void)s_add_raw(R, 2, r1, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    if (!CHECK_EQ_INT(s_n, 5))
        return;

    char dir[700];
    snprintf(dir, sizeof dir, "%s/hook", s_fx.root);
    fx_rmrf(dir);
    s_hook_l = fx_open_other(&s_fx, "hook");
    if (!CHECK(s_hook_l != NULL))
        return;
    ns_ledger_set_confirm(s_hook_l, s_reading_hook, NULL);
    for (uint32_t k = 0; k < 4; k++)
        CHECK_RC(ns_ledger_ingest(s_hook_l, s_set[k].raw.data, s_set[k].raw.len,
                                  NULL, NULL),
                 NS_OK);
    /* every read so far worked: P holds stake */
    CHECK_EQ_INT(s_hook_failed, 0);
    uint32_t before = s_hook_calls;
    CHECK_RC(ns_ledger_ingest(s_hook_l, s_set[4].raw.data, s_set[4].raw.len,
                              NULL, NULL),
             NS_ERR_FORK);
    CHECK(s_hook_calls > before); /* asked about P's ACCEPT in the void */
    if (!CHECK_EQ_INT(s_hook_failed, 0))
        fprintf(stderr,
                "  the hook could not read the ledger during the void "
                "(%u of %u calls; last rc %s): ns_votes would cache a total "
                "stake of 0 and answer NS_CONFIRM_NONE for a minute\n",
                s_hook_failed, s_hook_calls - before, ns_errname(s_hook_rc));
    /* the void went on: P's ACCEPT waits again */
    ns_account_t pa = fx_acct_in(s_hook_l, &s_fx, P);
    CHECK_EQ_INT(pa.seq, 1);
    CHECK_RC(ns_ledger_commit(s_hook_l), NS_OK);
    ns_ledger_close(&s_hook_l);
    fx_rmrf(dir);
    s_set_free();
}

/* R awards its job to P and goes on (R3 pays X); P accepts at once. R
 * forks at its AWARD (R2', a TRANSFER). The void takes R3, then R2 back
 * and with R2 P's ACCEPT (s_built_on -> s_find_judge: does R's chain
 * name the ACCEPT?). s_find_judge scans R's chain up to the seq of R's
 * stored account, which the void has not moved yet, while R3's chain
 * record is gone already: NS_ERR_NOTFOUND -> NS_ERR_CORRUPT, the void is
 * given up (event=fork_kept why=corrupt) on a node that saw the AWARD's
 * branch first, and the chains stay: R at 3, P's ACCEPT applied, the job
 * awarded. A node that saw R2' first: R at 1, P waiting, the job open. */
TEST(award_fork_with_later_entry)
{
    enum { R = 0, P = 1, X = 2 };
    static const ns_hash_t zero;
    s_set_free();
    ns_hash_t job, r1, r2, p1;
    ns_entry_body_t b = fx_amount(500);
    int32_t i =
        s_add_raw(P, 1, zero, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(p1, s_set[i].id, 32);
    b = fx_job(s_fx.acct[R].pk, 9002, 500, 300, 200, s_fx.now + 3600000, job);
    i = s_add_raw(R, 1, zero, NS_ENTRY_JOB, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(r1, s_set[i].id, 32);
    memcpy(s_jobs[s_n_jobs++], job, NS_HASH_BYTES);
    b = fx_award(&s_fx, job, P, 250);
    i = s_add_raw(R, 2, r1, NS_ENTRY_AWARD, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(r2, s_set[i].id, 32);
    b = fx_transfer(s_fx.acct[X].pk, 7);
    (void)s_add_raw(R, 3, r2, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    b = fx_ref(job, r2);
    (void)s_add_raw(P, 2, p1, NS_ENTRY_ACCEPT, &b, NULL, 0, fx_tick(&s_fx));
    b = fx_transfer(s_fx.acct[X].pk, 50);
    (void)s_add_raw(R, 2, r1, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    if (!CHECK_EQ_INT(s_n, 6))
        return;
    if (!s_many_orders("award fork with a later entry", s_long() ? 200 : 30))
        return;
    ns_account_t ra = s_snap_acct(&s_first.snap, R),
                 pa = s_snap_acct(&s_first.snap, P);
    CHECK(ra.banned);
    CHECK_EQ_INT(ra.seq, 1);
    CHECK_EQ_INT(pa.seq, 1);
    CHECK_EQ_INT(pa.locked_collateral, 0);
    CHECK_EQ_INT(s_first.job[0].state, NS_JOB_OPEN);
}

/* F pays X (F1) and forks (F1'); X took F1's credit in at once (X1) and
 * later forked itself (X2 / X2'). F1 is confirmed, but on some nodes
 * only after everything arrived (the votes were late): there the void of
 * F1 unwinds X1 into the buffer, and when F1 is confirmed and adopted
 * (ns_ledger_reconsider) X1 is retried: X is banned by then, and X1,
 * unconfirmed, is refused (NS_ERR_BANNED), although it is below X's fork.
 * On a node that had F1's votes in time X1 stays: X at 1 there, at 0
 * here. */
TEST(readopted_entry_banned_colluder)
{
    enum { F = 0, X = 1, Y = 2 };
    static const ns_hash_t zero;
    s_set_free();
    ns_hash_t f1, x1;
    ns_entry_body_t b = fx_transfer(s_fx.acct[X].pk, 50);
    int32_t i =
        s_add_raw(F, 1, zero, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(f1, s_set[i].id, 32);
    s_set[i].late = true; /* confirmed, late on some nodes */
    b = fx_amount(0);
    i = s_add_raw(X, 1, zero, NS_ENTRY_STAKE, &b, f1, 1, fx_tick(&s_fx));
    memcpy(x1, s_set[i].id, 32);
    b = fx_transfer(s_fx.acct[Y].pk, 5);
    (void)s_add_raw(X, 2, x1, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    b = fx_amount(7);
    (void)s_add_raw(X, 2, x1, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx));
    b = fx_amount(10);
    (void)s_add_raw(F, 1, zero, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx));
    if (!CHECK_EQ_INT(s_n, 5))
        return;
    if (!s_many_orders("readopted entry, banned colluder", s_long() ? 100 : 20))
        return;
    ns_account_t xa = s_snap_acct(&s_first.snap, X);
    CHECK(xa.banned);
    CHECK_EQ_INT(xa.seq, 1);
}

/* ---- a colluder's own fork names a voided entry -------------------------- */

/* F pays X (F1) and forks (F1', a STAKE). X took F1's credit in at once
 * (X1) and forks too: X1' pays Y. Whether X is banned depends on the
 * order: X1 proves X's fork only while F1 is on the chain. A node that
 * saw X's two entries before F's fork bans X and voids X1'... or X1
 * (whichever it held first); one that saw F's fork first keeps X1 waiting
 * on F1 (missing_dep) and X1' on X's chain, X not banned. */
static void s_colluder_fork(bool x_alt_first)
{
    enum { F = 0, X = 1, Y = 2 };
    static const ns_hash_t zero;
    s_set_free();
    ns_hash_t f1;
    ns_entry_body_t b = fx_transfer(s_fx.acct[X].pk, 50);
    int32_t i =
        s_add_raw(F, 1, zero, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    memcpy(f1, s_set[i].id, 32);
    b = fx_amount(0);
    (void)s_add_raw(X, 1, zero, NS_ENTRY_STAKE, &b, f1, 1, fx_tick(&s_fx));
    b = fx_transfer(s_fx.acct[Y].pk, 5);
    (void)s_add_raw(X, 1, zero, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx));
    b = fx_amount(10);
    (void)s_add_raw(F, 1, zero, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx));
    if (!CHECK_EQ_INT(s_n, 4))
        return;
    if (x_alt_first) { /* X1' before X1 in the set's order */
        s_ent_t t = s_set[1];
        s_set[1] = s_set[2];
        s_set[2] = t;
    }
    s_many_orders(x_alt_first ? "colluder fork (X1' first)"
                              : "colluder fork (X1 first)",
                  s_long() ? 200 : 40);
}

TEST(colluder_fork_ban_x1_first)
{
    s_colluder_fork(false);
}

TEST(colluder_fork_ban_x1_alt_first)
{
    s_colluder_fork(true);
}

int main(int argc, char **argv)
{
    if (sodium_init() < 0)
        return 1;
    if (argc > 1 && strcmp(argv[1], "--long") == 0)
        setenv("NS_LONG", "1", 1); /* the long form, by hand */
    if (!getenv("NS_TEST_SEED") && !s_long())
        setenv("NS_TEST_SEED", "1", 0);
    s_seed = fx_seed("market_fork_review");
    s_rng = s_seed;
    static const uint64_t credits[NA] = {1000, 1000, 1000, 600, 600, 300};
    if (fx_init_seeded(&s_fx, "forkreview", NA, credits, &s_seed) != NS_OK) {
        fprintf(stderr, "fixture: %s\n", s_fx.err);
        return 1;
    }
    RUN(confirm_hook_reads_ledger);
    RUN(award_fork_with_later_entry);
    RUN(readopted_entry_banned_colluder);
    RUN(colluder_fork_ban_x1_first);
    RUN(colluder_fork_ban_x1_alt_first);
    RUN(random_histories);
    s_set_free();
    fx_free(&s_fx);
    return ns_test_finish("market_fork_review");
}
