/* test_close.c - CLOSE: a job its requester left is ended by its provider
 * once deadline + the genesis close window has passed (docs/PROTOCOL.md,
 * "Closing").
 *
 * One test per row of the state table (RESULT paid, ACCEPT under the
 * deadline rule, AWARD never accepted refunded, and the rows where no
 * CLOSE holds: too early, already ended, another author, a RESULT not
 * named); the requester's SETTLE, SLASH and CANCEL of the award refused
 * from deadline + window on and still taken inside it; then delivery
 * orders: a CLOSE and a late SLASH (and everything they name) in every
 * order of a random sample, each into a fresh ledger, all ending in the
 * same state with the SLASH refused; last, a requester banned for a
 * fork in the middle of a job, the fork seen before or after the CLOSE.
 *
 * NS_TEST_SEED repeats the random orders.
 */
#include "check.h"
#include "ledger_fixture.h"

#define S_CREDITS 10000
#define S_WINDOW 5000 /* close_window_ms of the test genesis */
#define S_ESCROW 500
#define S_PRICE 300
#define S_COLLATERAL 200

enum { R = 0, P = 1, Q = 2 }; /* requester, provider, bystander */

static uint64_t s_credits[FX_MAX_ACCOUNTS];

static bool s_init(fx_t *fx, const char *name, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        s_credits[i] = S_CREDITS;
    fx_close_window_ms = S_WINDOW;
    int rc = fx_init(fx, name, n, s_credits);
    if (rc != NS_OK) {
        fprintf(stderr, "fixture %s: %s (%s)\n", name, ns_strerror(rc),
                fx->err);
        fx_free(fx);
        return false;
    }
    ns_ledger_set_verifier(fx->l, fx_slash_verifier, NULL);
    return true;
}

#define PUT(fx, who, type, body, refs, n, id)                                  \
    CHECK_RC(fx_put((fx), (who), (type), (body), (refs), (n), (id)), NS_OK)
#define REFUSED(fx, who, type, body, want)                                     \
    CHECK_RC(fx_put((fx), (who), (type), (body), NULL, 0, NULL), (want))
#define CONSERVED(fx)                                                          \
    CHECK_RC(ns_ledger_check_conservation((fx)->l, NULL), NS_OK)

static ns_account_t s_acct(fx_t *fx, uint32_t who)
{
    return fx_acct_in(fx->l, fx, who);
}

static ns_ledger_job_t s_job(fx_t *fx, const ns_hash_t job_id)
{
    ns_ledger_job_t j;
    if (ns_ledger_job(fx->l, job_id, &j) != NS_OK)
        memset(&j, 0, sizeof j);
    return j;
}

/* The credit e holds for who (amount; UINT64_MAX: none). */
static uint64_t s_credit(fx_t *fx, const ns_hash_t e, uint32_t who)
{
    uint64_t amount = 0;
    bool claimed = false;
    if (ns_ledger_credit(fx->l, e, fx->acct[who].pk, &amount, &claimed) !=
        NS_OK)
        return UINT64_MAX;
    return amount;
}

/* A job of R with deadline d, awarded to P (staked 1000 first); with
 * accept, P's ACCEPT; with result, P's RESULT too. */
typedef struct {
    ns_hash_t job, award, accept, result;
    uint64_t deadline;
} s_job_t;

static void s_setup_job(fx_t *fx, s_job_t *j, uint32_t n, bool accept,
                        bool result)
{
    ns_entry_body_t b;
    if (n == 1) {
        b = fx_amount(1000);
        PUT(fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    }
    j->deadline = fx->now + 2000;
    b = fx_job(fx->acct[R].pk, n, S_ESCROW, S_PRICE, S_COLLATERAL, j->deadline,
               j->job);
    PUT(fx, R, NS_ENTRY_JOB, &b, NULL, 0, NULL);
    b = fx_award(fx, j->job, P, S_PRICE);
    PUT(fx, R, NS_ENTRY_AWARD, &b, NULL, 0, j->award);
    if (accept) {
        b = fx_ref(j->job, j->award);
        PUT(fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, j->accept);
    }
    if (result) {
        b = fx_result(j->job, j->accept, 64);
        PUT(fx, P, NS_ENTRY_RESULT, &b, NULL, 0, j->result);
    }
}

/* The next entry is stamped at `at` (fx_make adds its tick of 10). */
static void s_clock(fx_t *fx, uint64_t at)
{
    fx->now = at - 10;
}

static ns_entry_body_t s_slash(const s_job_t *j, const uint8_t *proof)
{
    ns_entry_body_t b = fx_ref(j->job, j->result);
    b.proof = proof;
    b.proof_len = 4;
    return b;
}

static const uint8_t s_good_proof[4] = {1, 0, 0, 0};
static const uint8_t s_bad_proof[4] = {2, 0, 0, 0};

/* Row RESULT: nobody challenged it inside the window. Before deadline +
 * window nothing closes; from then on the requester's entries are late
 * and the provider's CLOSE pays it, gives the collateral back and
 * refunds the rest of the escrow to the requester by a credit. */
TEST(result_paid)
{
    fx_t fx;
    if (!s_init(&fx, "close-result", 3))
        return;
    s_job_t j;
    s_setup_job(&fx, &j, 1, true, true);
    const uint64_t at = j.deadline + S_WINDOW;
    ns_entry_body_t b = fx_ref(j.job, j.result);
    s_clock(&fx, at - 1);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE); /* too early */
    s_clock(&fx, at);
    /* late: the requester's entries for the award */
    b = fx_ref(j.job, j.result);
    REFUSED(&fx, R, NS_ENTRY_SETTLE, &b, NS_ERR_JOBSTATE);
    b = s_slash(&j, s_bad_proof); /* refused before the proof is run */
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NS_ERR_JOBSTATE);
    b = s_slash(&j, s_good_proof);
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NS_ERR_JOBSTATE);
    b = fx_cancel(j.job, j.accept, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NS_ERR_JOBSTATE);
    b = fx_cancel(j.job, NULL, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NS_ERR_JOBSTATE);
    /* not P's to close: another author, a RESULT left unnamed */
    b = fx_ref(j.job, j.result);
    REFUSED(&fx, Q, NS_ENTRY_CLOSE, &b, NS_ERR_INVAL);
    REFUSED(&fx, R, NS_ENTRY_CLOSE, &b, NS_ERR_INVAL);
    b = fx_ref(j.job, j.accept);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE);
    b = fx_ref(j.job, j.award);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE);
    ns_hash_t other;
    fx_job_id(other, 9);
    b = fx_ref(other, j.result); /* the ref is of another job */
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_INVAL);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, S_COLLATERAL);
    /* the close */
    ns_hash_t close;
    b = fx_ref(j.job, j.result);
    PUT(&fx, P, NS_ENTRY_CLOSE, &b, NULL, 0, close);
    ns_account_t p = s_acct(&fx, P), r = s_acct(&fx, R);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.staked, 1000);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000 + S_PRICE);
    CHECK_EQ_INT(p.jobs_settled, 1);
    CHECK_EQ_INT(r.locked_escrow, 0);
    CHECK_EQ_INT(r.free, S_CREDITS - S_ESCROW);
    CHECK_EQ_INT(s_credit(&fx, close, R), S_ESCROW - S_PRICE);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_SETTLED);
    CONSERVED(&fx);
    /* once: a second CLOSE, or anything of the requester's, is refused */
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE);
    b = s_slash(&j, s_good_proof);
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NS_ERR_JOBSTATE);
    /* the requester, back, takes its refund in */
    b = fx_amount(0);
    PUT(&fx, R, NS_ENTRY_STAKE, &b, close, 1, NULL);
    CHECK_EQ_INT(s_acct(&fx, R).free, S_CREDITS - S_PRICE);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* Inside the window the requester still ends the award itself: a SLASH
 * (or a SETTLE) at deadline + window - 1 holds, and no CLOSE after it. */
TEST(requester_inside_window)
{
    fx_t fx;
    if (!s_init(&fx, "close-inside", 3))
        return;
    s_job_t j, k;
    s_setup_job(&fx, &j, 1, true, true);
    s_setup_job(&fx, &k, 2, true, true);
    s_clock(&fx, j.deadline + S_WINDOW - 20);
    ns_entry_body_t b = s_slash(&j, s_good_proof);
    PUT(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NULL);
    s_clock(&fx, k.deadline + S_WINDOW - 1);
    b = fx_ref(k.job, k.result);
    PUT(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_OPEN);
    CHECK_EQ_INT(s_job(&fx, k.job).state, NS_JOB_SETTLED);
    s_clock(&fx, k.deadline + S_WINDOW + 1000);
    b = fx_ref(j.job, j.result);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE);
    b = fx_ref(k.job, k.result);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE);
    CHECK_EQ_INT(s_acct(&fx, P).jobs_slashed, 1);
    CHECK_EQ_INT(s_acct(&fx, P).jobs_settled, 1);
    /* an OPEN job (slashed) is no one's to close: its requester cancels it
     * whenever it likes */
    b = fx_cancel(j.job, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 0);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* Row ACCEPT: accepted, no RESULT: the deadline rule of CANCEL, a tenth
 * of the collateral burned, the rest back to the stake, the escrow back
 * to the requester. */
TEST(accept_penalised)
{
    fx_t fx;
    if (!s_init(&fx, "close-accept", 3))
        return;
    s_job_t j;
    s_setup_job(&fx, &j, 1, true, false);
    s_clock(&fx, j.deadline + S_WINDOW);
    ns_entry_body_t b = fx_ref(j.job, j.award);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_JOBSTATE); /* accepted */
    ns_hash_t close;
    b = fx_ref(j.job, j.accept);
    PUT(&fx, P, NS_ENTRY_CLOSE, &b, NULL, 0, close);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.staked, 1000 - S_COLLATERAL / 10);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000);
    CHECK_EQ_INT(p.jobs_cancelled, 1);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 0);
    CHECK_EQ_INT(s_credit(&fx, close, R), S_ESCROW);
    ns_ledger_stats_t st;
    ns_ledger_stats(fx.l, &st);
    CHECK_EQ_INT(st.burned, S_COLLATERAL / 10);
    ns_ledger_job_t job = s_job(&fx, j.job);
    CHECK_EQ_INT(job.state, NS_JOB_CANCELLED);
    CHECK(sodium_is_zero(job.award_id, NS_HASH_BYTES));
    /* a RESULT now changes nothing of the job */
    b = fx_result(j.job, j.accept, 64);
    PUT(&fx, P, NS_ENTRY_RESULT, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_CANCELLED);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* Row AWARD: never accepted: the escrow goes back, nothing was locked,
 * and the award can no longer be accepted. */
TEST(award_refunded)
{
    fx_t fx;
    if (!s_init(&fx, "close-award", 3))
        return;
    s_job_t j;
    s_setup_job(&fx, &j, 1, false, false);
    s_clock(&fx, j.deadline + S_WINDOW);
    ns_hash_t close;
    ns_entry_body_t b = fx_ref(j.job, j.award);
    REFUSED(&fx, Q, NS_ENTRY_CLOSE, &b, NS_ERR_INVAL); /* not its award */
    PUT(&fx, P, NS_ENTRY_CLOSE, &b, NULL, 0, close);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 0);
    CHECK_EQ_INT(s_credit(&fx, close, R), S_ESCROW);
    CHECK_EQ_INT(s_acct(&fx, P).staked, 1000);
    CHECK_EQ_INT(s_acct(&fx, P).jobs_cancelled, 0);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_CANCELLED);
    b = fx_ref(j.job, j.award);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NS_ERR_JOBSTATE);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 0);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* What the provider's node asks each tick: its awards past deadline +
 * window, each with the entry its record says a CLOSE names; CLOSEs made
 * from the answer all hold, and then nothing is left to close. */
TEST(closable_names_each_row)
{
    fx_t fx;
    if (!s_init(&fx, "close-closable", 3))
        return;
    s_job_t j[3];
    s_setup_job(&fx, &j[0], 1, true, true);
    s_setup_job(&fx, &j[1], 2, true, false);
    s_setup_job(&fx, &j[2], 3, false, false);
    const uint8_t *want[3] = {j[0].result, j[1].accept, j[2].award};
    const uint8_t rows[3] = {NS_ENTRY_RESULT, NS_ENTRY_ACCEPT, NS_ENTRY_AWARD};
    ns_ledger_closable_t c[8];
    const uint64_t last = j[2].deadline + S_WINDOW;
    CHECK_EQ_INT(ns_ledger_closable(fx.l, fx.acct[P].pk, j[0].deadline, c, 8),
                 0);
    CHECK_EQ_INT(ns_ledger_closable(fx.l, fx.acct[Q].pk, last, c, 8), 0);
    CHECK_EQ_INT(ns_ledger_closable(fx.l, fx.acct[P].pk, last, c, 1), 1);
    uint32_t n = ns_ledger_closable(fx.l, fx.acct[P].pk, last, c, 8);
    CHECK_EQ_INT(n, 3);
    s_clock(&fx, last);
    for (uint32_t i = 0; i < n; i++) {
        int k = -1;
        for (int x = 0; x < 3; x++)
            if (memcmp(c[i].job_id, j[x].job, NS_HASH_BYTES) == 0)
                k = x;
        if (!CHECK(k >= 0))
            continue;
        CHECK_MEM(c[i].ref_id, want[k], NS_HASH_BYTES);
        CHECK_EQ_INT(c[i].row, rows[k]);
        ns_entry_body_t b = fx_ref(c[i].job_id, c[i].ref_id);
        PUT(&fx, P, NS_ENTRY_CLOSE, &b, NULL, 0, NULL);
    }
    CHECK_EQ_INT(ns_ledger_closable(fx.l, fx.acct[P].pk, last + 1000, c, 8), 0);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 0);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 0);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* A node that holds CLOSEs stamped ahead of its clock (the node's
 * policy, ns_ledger_set_close_hold) refuses one a provider stamped in the
 * future to cut the window short, stores nothing, and takes the
 * requester's SLASH inside the window; a CLOSE that is due applies. */
TEST(close_ahead_of_the_clock_waits)
{
    fx_t fx;
    if (!s_init(&fx, "close-hold", 3))
        return;
    ns_ledger_set_close_hold(fx.l, 2000);
    fx.now = ns_now_ms() - 100000; /* the jobs are in the past */
    s_job_t j, k;
    s_setup_job(&fx, &j, 1, true, true);
    s_setup_job(&fx, &k, 2, true, true);
    ns_ledger_stats_t st0, st1;
    ns_ledger_stats(fx.l, &st0);
    s_clock(&fx, ns_now_ms() + 60000); /* deadline + window is long past */
    ns_entry_body_t b = fx_ref(j.job, j.result);
    REFUSED(&fx, P, NS_ENTRY_CLOSE, &b, NS_ERR_STALE);
    ns_ledger_stats(fx.l, &st1);
    CHECK_EQ_INT(st1.entries, st0.entries);
    CHECK_EQ_INT(st1.buffered, st0.buffered);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_AWARDED);
    /* the requester's SLASH, stamped inside the window, comes first */
    s_clock(&fx, j.deadline + S_WINDOW - 1);
    b = s_slash(&j, s_good_proof);
    PUT(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_job(&fx, j.job).state, NS_JOB_OPEN);
    /* a CLOSE that is due applies */
    s_clock(&fx, ns_now_ms() - 1000);
    b = fx_ref(k.job, k.result);
    PUT(&fx, P, NS_ENTRY_CLOSE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_job(&fx, k.job).state, NS_JOB_SETTLED);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* ---- delivery orders --------------------------------------------------- */

#define S_ORDERS 40
#define S_MAX_E 16

typedef struct {
    ns_buf_t e[S_MAX_E];
    uint32_t n;
    int want_late; /* index of the late SLASH: refused everywhere */
} s_set_t;

/* Sign who's next entry into the set (the chain advances: the entry is
 * valid where it comes). */
static void s_add(fx_t *fx, s_set_t *s, uint32_t who, uint8_t type,
                  const ns_entry_body_t *b, const uint8_t *refs, uint32_t n,
                  ns_hash_t id, bool advance)
{
    ns_hash_t eid;
    uint64_t ts;
    ns_buf_init(&s->e[s->n]);
    CHECK_RC(fx_make(fx, who, type, b, refs, n, &s->e[s->n], eid, &ts), NS_OK);
    if (advance)
        fx_advance(fx, who, eid, ts);
    if (id)
        memcpy(id, eid, NS_HASH_BYTES);
    s->n++;
}

/* Feed the set to l in order[]; what waits is retried by the ledger as
 * its dependencies come. */
static void s_feed(ns_ledger_t *l, const s_set_t *s, const uint32_t *order,
                   uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const ns_buf_t *e = &s->e[order[i]];
        (void)ns_ledger_ingest(l, e->data, e->len, NULL, NULL);
    }
    CHECK_RC(ns_ledger_commit(l), NS_OK);
}

static fx_snap_t s_ref_snap, s_other;

/* A job through RESULT, then past deadline + window both the provider's
 * CLOSE and a SLASH the requester signed late (valid proof), and after
 * each another entry of its author: in any order (a random sample of
 * permutations, with repeats), every ledger ends with the CLOSE applied,
 * the SLASH refused and the same state. */
TEST(close_and_late_slash_any_order)
{
    fx_t fx;
    if (!s_init(&fx, "close-orders", 3))
        return;
    uint64_t seed = fx_seed("market_close");
    s_set_t s = {.n = 0};
    ns_hash_t job, award, accept, result, close;
    ns_entry_body_t b = fx_amount(1000);
    s_add(&fx, &s, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL, true);
    uint64_t deadline = fx.now + 1000;
    b = fx_job(fx.acct[R].pk, 1, S_ESCROW, S_PRICE, S_COLLATERAL, deadline,
               job);
    s_add(&fx, &s, R, NS_ENTRY_JOB, &b, NULL, 0, NULL, true);
    b = fx_award(&fx, job, P, S_PRICE);
    s_add(&fx, &s, R, NS_ENTRY_AWARD, &b, NULL, 0, award, true);
    b = fx_ref(job, award);
    s_add(&fx, &s, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept, true);
    b = fx_result(job, accept, 64);
    s_add(&fx, &s, P, NS_ENTRY_RESULT, &b, NULL, 0, result, true);
    s_clock(&fx, deadline + S_WINDOW + 100);
    b = fx_ref(job, result);
    b.proof = s_good_proof;
    b.proof_len = sizeof s_good_proof;
    s.want_late = (int)s.n;
    s_add(&fx, &s, R, NS_ENTRY_SLASH, &b, NULL, 0, NULL, true);
    b = fx_ref(job, result);
    s_add(&fx, &s, P, NS_ENTRY_CLOSE, &b, NULL, 0, close, true);
    b = fx_amount(1); /* P builds on the CLOSE */
    s_add(&fx, &s, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL, true);
    /* R goes on after its SLASH: that waits behind it, everywhere */
    b = fx_transfer(fx.acct[Q].pk, 5);
    s_add(&fx, &s, R, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL, true);
    /* the reference: every entry in the order it was made */
    uint32_t order[3 * S_MAX_E];
    for (uint32_t i = 0; i < s.n; i++)
        order[i] = i;
    s_feed(fx.l, &s, order, s.n);
    fx_snap_of(fx.l, &s_ref_snap);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.jobs_slashed, 0);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000 + S_PRICE - 1);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 0);
    CHECK_EQ_INT(s_job(&fx, job).state, NS_JOB_SETTLED);
    CHECK_EQ_INT(s_ref_snap.cons_rc, NS_OK);
    ns_ledger_stats_t st;
    ns_ledger_stats(fx.l, &st);
    CHECK_EQ_INT(st.burned, 0);
    CHECK_EQ_INT(st.entries, s.n - 2); /* the late SLASH, what follows it */
    /* both orders of the two, then random ones with repeats */
    uint64_t rng = seed;
    uint32_t worst = 0;
    for (uint32_t k = 0; k < S_ORDERS; k++) {
        uint32_t m;
        if (k < 2) {
            m = s.n;
            for (uint32_t i = 0; i < m; i++)
                order[i] = i;
            if (k == 1) { /* the SLASH after the CLOSE */
                order[s.want_late] = s.want_late + 1;
                order[s.want_late + 1] = s.want_late;
            }
        } else {
            m = fx_order(order, s.n, &rng, true);
        }
        char name[32];
        snprintf(name, sizeof name, "order%u", k);
        ns_ledger_t *l = fx_open_other(&fx, name);
        if (!CHECK(l != NULL))
            break;
        ns_ledger_set_verifier(l, fx_slash_verifier, NULL);
        s_feed(l, &s, order, m);
        /* what was buffered before its dependencies came is in by now */
        fx_snap_of(l, &s_other);
        char why[512];
        if (!CHECK(fx_snap_same(&s_ref_snap, &s_other, why, sizeof why)))
            fprintf(stderr, "  order %u (seed %llu): %s\n", k,
                    (unsigned long long)seed, why);
        ns_ledger_stats(l, &st);
        if (st.buffered > worst)
            worst = st.buffered;
        ns_ledger_close(&l);
    }
    printf("market_close: %u orders, at most %u left waiting (the late "
           "SLASH's successors)\n",
           S_ORDERS, worst);
    for (uint32_t i = 0; i < s.n; i++)
        ns_buf_release(&s.e[i]);
    fx_free(&fx);
}

/* The requester forks in the middle of the job (after its AWARD) and is
 * banned: its chain can never end the award. Past deadline + window the
 * provider closes it, whether a node saw the fork before the CLOSE or
 * after: both end in the same state, the provider paid, its collateral
 * back, the requester's refund a credit it cannot take in while banned. */
TEST(banned_requester)
{
    fx_t fx;
    if (!s_init(&fx, "close-banned", 3))
        return;
    s_set_t s = {.n = 0};
    ns_hash_t job, award, accept, result;
    ns_entry_body_t b = fx_amount(1000);
    s_add(&fx, &s, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL, true);
    uint64_t deadline = fx.now + 1000;
    b = fx_job(fx.acct[R].pk, 1, S_ESCROW, S_PRICE, S_COLLATERAL, deadline,
               job);
    s_add(&fx, &s, R, NS_ENTRY_JOB, &b, NULL, 0, NULL, true);
    b = fx_award(&fx, job, P, S_PRICE);
    s_add(&fx, &s, R, NS_ENTRY_AWARD, &b, NULL, 0, award, true);
    b = fx_ref(job, award);
    s_add(&fx, &s, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept, true);
    b = fx_result(job, accept, 64);
    s_add(&fx, &s, P, NS_ENTRY_RESULT, &b, NULL, 0, result, true);
    /* the fork: two transfers at R's next seq */
    const uint32_t fork_at = s.n;
    b = fx_transfer(fx.acct[Q].pk, 7);
    s_add(&fx, &s, R, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL, false);
    b = fx_transfer(fx.acct[Q].pk, 8);
    s_add(&fx, &s, R, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL, false);
    s_clock(&fx, deadline + S_WINDOW);
    const uint32_t close_at = s.n;
    ns_hash_t close;
    b = fx_ref(job, result);
    s_add(&fx, &s, P, NS_ENTRY_CLOSE, &b, NULL, 0, close, true);
    /* fork, then CLOSE; CLOSE, then fork */
    uint32_t first[S_MAX_E], second[S_MAX_E];
    for (uint32_t i = 0; i < s.n; i++)
        first[i] = i;
    for (uint32_t i = 0; i < fork_at; i++)
        second[i] = i;
    second[fork_at] = close_at;
    second[fork_at + 1] = fork_at;
    second[fork_at + 2] = fork_at + 1;
    s_feed(fx.l, &s, first, s.n);
    ns_ledger_t *l = fx_open_other(&fx, "close-first");
    if (!CHECK(l != NULL)) {
        fx_free(&fx);
        return;
    }
    s_feed(l, &s, second, s.n);
    ns_account_t r = s_acct(&fx, R), p = s_acct(&fx, P);
    CHECK(r.banned);
    CHECK(fx_acct_in(l, &fx, R).banned);
    CHECK_EQ_INT(r.locked_escrow, 0);
    CHECK_EQ_INT(r.free, S_CREDITS - S_ESCROW);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000 + S_PRICE);
    CHECK_EQ_INT(s_credit(&fx, close, R), S_ESCROW - S_PRICE);
    fx_snap_of(fx.l, &s_ref_snap);
    fx_snap_of(l, &s_other);
    char why[512];
    if (!CHECK(fx_snap_same(&s_ref_snap, &s_other, why, sizeof why)))
        fprintf(stderr, "  fork before / after the CLOSE: %s\n", why);
    CHECK_EQ_INT(s_ref_snap.cons_rc, NS_OK);
    ns_ledger_close(&l);
    for (uint32_t i = 0; i < s.n; i++)
        ns_buf_release(&s.e[i]);
    fx_free(&fx);
}

int main(void)
{
    RUN(result_paid);
    RUN(requester_inside_window);
    RUN(accept_penalised);
    RUN(award_refunded);
    RUN(close_ahead_of_the_clock_waits);
    RUN(closable_names_each_row);
    RUN(close_and_late_slash_any_order);
    RUN(banned_requester);
    return ns_test_finish("market_close");
}
