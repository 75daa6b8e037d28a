/* test_fork_jobs.c - forks whose branches hold job entries (issue 13,
 * item 3): every ledger ends in one state, whatever order it saw the
 * entries in.
 *
 * A fork voids its author's unconfirmed entries from the forked seq on
 * (docs/PROTOCOL.md, "Forks"). Job entries (JOB to CANCEL) change records
 * outside their author's account: the job, the provider's lock and
 * record, the provider's counters, the burned total. A void takes those
 * back from each entry's undo record. What another chain built on such an
 * entry (a claim of its credit, an ACCEPT of an AWARD, a SETTLE of a
 * RESULT: colluders that did not wait for confirmation) goes back to the
 * out-of-order buffer with the rest of that chain, as on a node that saw
 * the fork first and never applied it. And what other chains did to the forked
 * author meanwhile (a SLASH of its collateral) stays, on a node that saw
 * the SLASH before the forked entry as on one that saw it after.
 *
 * Each scenario is a set of signed entries (both branches of the fork
 * included), delivered in many random orders, each entry once to three
 * times, to fresh ledgers; all must end with the same accounts, digest,
 * totals and job record, and conserve the genesis total. The seed is
 * printed; NS_TEST_SEED=<n> repeats a run; --long (or NS_LONG=1) runs 400
 * orders per scenario instead of 30.
 */
#include "check.h"
#include "ledger_fixture.h"

#include <inttypes.h>
#include <time.h>

#define NA 3
#define MAX_SET 16
#define SHORT_ORDERS 30
#define LONG_ORDERS 400

enum { R = 0, P = 1, X = 2 }; /* requester, provider, bystander */

static uint64_t s_rng, s_seed;
static fx_t s_fx;

/* Confirmation: the ids listed here are confirmed (more than half of
 * the stake voted for them); the others are not. */
static struct {
    ns_hash_t ids[4];
    uint32_t n;
} s_conf;

static ns_confirm_state s_conf_fn(void *u, const ns_hash_t id)
{
    (void)u;
    for (uint32_t i = 0; i < s_conf.n; i++)
        if (memcmp(s_conf.ids[i], id, NS_HASH_BYTES) == 0)
            return NS_CONFIRM_YES;
    return NS_CONFIRM_NO;
}

/* ---- the set of entries ------------------------------------------------ */

typedef struct {
    ns_buf_t raw[MAX_SET];
    const char *what[MAX_SET];
    uint32_t n;
} s_set_t;

static s_set_t s_set;
static ns_hash_t s_job; /* the scenario's job */

static void s_set_free(void)
{
    for (uint32_t i = 0; i < s_set.n; i++)
        ns_buf_release(&s_set.raw[i]);
    s_set.n = 0;
    s_conf.n = 0;
}

/* who's entry at seq after prev (NULL at seq 1). */
static void s_add(const char *what, uint32_t who, uint64_t seq,
                  const ns_hash_t prev, uint8_t type, const ns_entry_body_t *b,
                  const uint8_t *refs, uint32_t n_refs, ns_hash_t id_out)
{
    ns_hash_t id;
    if (!CHECK(s_set.n < MAX_SET))
        return;
    ns_buf_t *raw = &s_set.raw[s_set.n];
    ns_buf_init(raw);
    if (!CHECK_RC(fx_make_raw(&s_fx, who, seq, prev, type, b, refs, n_refs,
                              fx_tick(&s_fx), raw, id),
                  NS_OK)) {
        fprintf(stderr, "  cannot sign %s\n", what);
        return;
    }
    s_set.what[s_set.n++] = what;
    if (id_out)
        memcpy(id_out, id, NS_HASH_BYTES);
}

/* The job flow up to a RESULT: P stakes, R posts the job and awards it
 * to P, P accepts and delivers. stop: how far (1 JOB, 2 AWARD, 3 ACCEPT,
 * 4 RESULT). Ids of R's and P's entries go to r[] and p[] (by seq - 1). */
static void s_flow(int stop, ns_hash_t r[4], ns_hash_t p[4])
{
    ns_entry_body_t b = fx_amount(500);
    s_add("P1 stake", P, 1, NULL, NS_ENTRY_STAKE, &b, NULL, 0, p[0]);
    b = fx_job(s_fx.acct[R].pk, 7, 500, 300, 200, fx_tick(&s_fx) + 3600000,
               s_job);
    s_add("R1 job", R, 1, NULL, NS_ENTRY_JOB, &b, NULL, 0, r[0]);
    if (stop < 2)
        return;
    b = fx_award(&s_fx, s_job, P, 250);
    s_add("R2 award", R, 2, r[0], NS_ENTRY_AWARD, &b, NULL, 0, r[1]);
    if (stop < 3)
        return;
    b = fx_ref(s_job, r[1]);
    s_add("P2 accept", P, 2, p[0], NS_ENTRY_ACCEPT, &b, NULL, 0, p[1]);
    if (stop < 4)
        return;
    b = fx_result(s_job, p[1], 16);
    s_add("P3 result", P, 3, p[1], NS_ENTRY_RESULT, &b, NULL, 0, p[2]);
}

/* ---- delivery ------------------------------------------------------------ */

typedef struct {
    fx_snap_t snap;
    int job_rc;
    ns_ledger_job_t job;
    ns_account_t a[NA];
} s_end_t;

static s_end_t s_first, s_this;

/* The whole set, each entry once to three times, in a random order (k
 * names the ledger; k == 0: in the set's order), then again in order
 * until nothing more is taken (ledger sync fetches what the buffer
 * forgot), to a fresh ledger; what it ends with goes to end. */
static bool s_run_order(uint32_t k, s_end_t *end)
{
    uint32_t order[MAX_SET * 3], m = fx_order(order, s_set.n, &s_rng, k > 0);
    char name[32], dir[700];
    snprintf(name, sizeof name, "order%u", k);
    snprintf(dir, sizeof dir, "%s/%s", s_fx.root, name);
    ns_ledger_t *l = fx_open_other(&s_fx, name);
    if (!CHECK(l != NULL))
        return false;
    ns_ledger_set_verifier(l, fx_slash_verifier, NULL);
    ns_ledger_set_confirm(l, s_conf_fn, NULL);
    for (uint32_t i = 0; i < m; i++)
        (void)ns_ledger_ingest(l, s_set.raw[order[i]].data,
                               s_set.raw[order[i]].len, NULL, NULL);
    for (bool more = true; more;) {
        more = false;
        for (uint32_t i = 0; i < s_set.n; i++)
            more |= ns_ledger_ingest(l, s_set.raw[i].data, s_set.raw[i].len,
                                     NULL, NULL) == NS_OK;
    }
    bool ok = CHECK_RC(ns_ledger_commit(l), NS_OK);
    fx_snap_of(l, &end->snap);
    memset(&end->job, 0, sizeof end->job);
    end->job_rc = ns_ledger_job(l, s_job, &end->job);
    for (uint32_t i = 0; i < NA; i++)
        end->a[i] = fx_acct_in(l, &s_fx, i);
    ok &= CHECK_RC(end->snap.cons_rc, NS_OK);
    if (end->snap.cons_rc != NS_OK)
        fprintf(stderr, "  order %u: sum %llu, genesis %llu\n", k,
                (unsigned long long)end->snap.sum,
                (unsigned long long)end->snap.total);
    ns_ledger_close(&l);
    fx_rmrf(dir);
    return ok;
}

static uint32_t s_orders(void)
{
    const char *env = getenv("NS_LONG");
    return env && *env && strcmp(env, "0") ? LONG_ORDERS : SHORT_ORDERS;
}

/* The set in many orders: one state everywhere. Returns the first
 * order's end in s_first. */
static bool s_many_orders(const char *scenario)
{
    char why[512];
    if (!s_run_order(0, &s_first))
        return false;
    for (uint32_t k = 1; k < s_orders(); k++) {
        if (!s_run_order(k, &s_this))
            return false;
        bool same = fx_snap_same(&s_first.snap, &s_this.snap, why, sizeof why);
        if (same && (s_first.job_rc != s_this.job_rc ||
                     memcmp(&s_first.job, &s_this.job, sizeof s_this.job))) {
            same = false;
            snprintf(why, sizeof why, "job records differ (%s/%s, state %u/%u)",
                     ns_errname(s_first.job_rc), ns_errname(s_this.job_rc),
                     s_first.job.state, s_this.job.state);
        }
        if (!CHECK(same)) {
            fprintf(stderr, "  %s: order %u: %s (NS_TEST_SEED=%" PRIu64 ")\n",
                    scenario, k, why, s_seed);
            return false;
        }
    }
    return true;
}

/* ---- scenarios ------------------------------------------------------------
 */

/* P is slashed (its collateral burned), then forks with two TRANSFERs.
 * A node that stored P's TRANSFER before the SLASH kept an account
 * before it whose collateral was still locked; the void must not bring
 * that collateral back (it is burned): conservation would fail there. */
TEST(slashed_provider_forks)
{
    ns_hash_t r[4], p[4], x;
    s_set_free();
    s_flow(4, r, p);
    ns_entry_body_t b = fx_ref(s_job, p[2]);
    static const uint8_t proof[] = {1, 2, 3};
    b.proof = proof;
    b.proof_len = sizeof proof;
    s_add("R3 slash", R, 3, r[1], NS_ENTRY_SLASH, &b, NULL, 0, NULL);
    b = fx_transfer(s_fx.acct[X].pk, 10);
    s_add("P4 to X", P, 4, p[2], NS_ENTRY_TRANSFER, &b, NULL, 0, x);
    b = fx_transfer(s_fx.acct[X].pk, 20);
    s_add("P4' to X", P, 4, p[2], NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    if (!s_many_orders("slashed provider forks"))
        return;
    const ns_account_t *pa = &s_first.a[P];
    CHECK(pa->banned);
    CHECK_EQ_INT(pa->seq, 3);
    CHECK_EQ_INT(pa->locked_collateral, 0);
    CHECK_EQ_INT(pa->staked, 300);
    CHECK_EQ_INT(pa->jobs_slashed, 1);
    CHECK_EQ_INT(s_first.snap.burned, 200);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_OPEN);
}

/* R forks at its AWARD: an AWARD to P on one branch, a TRANSFER on the
 * other, nobody accepted. Before, a node that saw the AWARD first kept
 * it (a job entry could not be undone), one that saw the TRANSFER first
 * voided it: two states for ever, and P, had it accepted, stuck on the
 * second. Now the AWARD is taken back too: the job is open again. */
static void s_award_fork(int confirmed) /* -1 neither, 0 AWARD, 1 TRANSFER */
{
    ns_hash_t r[4], p[4], pay;
    s_set_free();
    s_flow(2, r, p);
    ns_entry_body_t b = fx_transfer(s_fx.acct[X].pk, 50);
    s_add("R2' to X", R, 2, r[0], NS_ENTRY_TRANSFER, &b, NULL, 0, pay);
    memcpy(s_conf.ids[0], r[0], NS_HASH_BYTES);
    memcpy(s_conf.ids[1], p[0], NS_HASH_BYTES);
    s_conf.n = 2;
    if (confirmed >= 0)
        memcpy(s_conf.ids[s_conf.n++], confirmed == 0 ? r[1] : pay,
               NS_HASH_BYTES);
    char name[64];
    snprintf(name, sizeof name, "award fork (confirmed %d)", confirmed);
    if (!s_many_orders(name))
        return;
    const ns_account_t *ra = &s_first.a[R];
    CHECK(ra->banned);
    CHECK_EQ_INT(ra->seq, confirmed < 0 ? 1 : 2);
    CHECK_EQ_INT(ra->locked_escrow, 500);
    CHECK_RC(s_first.job_rc, NS_OK);
    CHECK_EQ_INT(s_first.job.state,
                 confirmed == 0 ? NS_JOB_AWARDED : NS_JOB_OPEN);
    CHECK_EQ_INT(s_first.job.round, confirmed == 0 ? 1 : 0);
    CHECK_EQ_INT(s_first.snap.pending, confirmed == 1 ? 50 : 0);
}

TEST(award_fork_resolves)
{
    s_award_fork(-1);
    s_award_fork(0);
    s_award_fork(1);
}

/* R settles P's RESULT on one branch and pays X on the other; P has not
 * taken its pay in (it waits for the SETTLE's confirmation). The SETTLE
 * is taken back: the escrow locked again, the job awarded with its
 * RESULT, P's counter and credit gone. */
TEST(settle_fork_resolves)
{
    ns_hash_t r[4], p[4];
    s_set_free();
    s_flow(4, r, p);
    ns_entry_body_t b = fx_ref(s_job, p[2]);
    s_add("R3 settle", R, 3, r[1], NS_ENTRY_SETTLE, &b, NULL, 0, NULL);
    b = fx_transfer(s_fx.acct[X].pk, 40);
    s_add("R3' to X", R, 3, r[1], NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    if (!s_many_orders("settle fork"))
        return;
    CHECK(s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 2);
    CHECK_EQ_INT(s_first.a[R].locked_escrow, 500);
    CHECK_EQ_INT(s_first.a[P].jobs_settled, 0);
    CHECK_EQ_INT(s_first.a[P].locked_collateral, 200);
    CHECK_EQ_INT(s_first.snap.pending, 0);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_AWARDED);
    CHECK(memcmp(s_first.job.result_id, p[2], NS_HASH_BYTES) == 0);
}

/* P forks at its ACCEPT (an ACCEPT on one branch, an UNSTAKE on the
 * other): the ACCEPT is taken back, collateral and all; the job is
 * awarded and not accepted. */
TEST(accept_fork_resolves)
{
    ns_hash_t r[4], p[4];
    s_set_free();
    s_flow(3, r, p);
    ns_entry_body_t b = fx_amount(100);
    s_add("P2' unstake", P, 2, p[0], NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    if (!s_many_orders("accept fork"))
        return;
    const ns_account_t *pa = &s_first.a[P];
    CHECK(pa->banned);
    CHECK_EQ_INT(pa->seq, 1);
    CHECK_EQ_INT(pa->staked, 500);
    CHECK_EQ_INT(pa->locked_collateral, 0);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_AWARDED);
    CHECK(sodium_is_zero(s_first.job.accept_id, NS_HASH_BYTES));
}

/* R forks at a CANCEL that released P's award (a credit P has not
 * claimed) and a TRANSFER: the CANCEL is taken back, the job awarded
 * again; P's later claim of the voided credit waits. */
TEST(cancel_fork_resolves)
{
    ns_hash_t r[4], p[4];
    s_set_free();
    s_flow(3, r, p);
    ns_entry_body_t b = fx_cancel(s_job, NULL, false, 0);
    s_add("R3 cancel", R, 3, r[1], NS_ENTRY_CANCEL, &b, NULL, 0, NULL);
    b = fx_transfer(s_fx.acct[X].pk, 5);
    s_add("R3' to X", R, 3, r[1], NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    if (!s_many_orders("cancel fork"))
        return;
    CHECK(s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 2);
    CHECK_EQ_INT(s_first.a[R].locked_escrow, 500);
    CHECK_EQ_INT(s_first.a[P].locked_collateral, 200);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_AWARDED);
}

/* Colluders: P accepted R's AWARD without waiting for its confirmation,
 * then went on (RESULT, a payment to X). The void takes R's AWARD back
 * and P's entries from its ACCEPT on go back to the buffer, waiting for
 * the AWARD: on a node that saw the fork first they never applied. One
 * state in every order: R at its JOB, P at its stake, the job open. */
TEST(accepted_award_unwinds)
{
    ns_hash_t r[4], p[4];
    s_set_free();
    s_flow(4, r, p);
    ns_entry_body_t b = fx_transfer(s_fx.acct[X].pk, 7);
    s_add("P4 to X", P, 4, p[2], NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    b = fx_transfer(s_fx.acct[X].pk, 50);
    s_add("R2' to X", R, 2, r[0], NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    if (!s_many_orders("accepted award"))
        return;
    CHECK(s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 1);
    CHECK(!s_first.a[P].banned);
    CHECK_EQ_INT(s_first.a[P].seq, 1);
    CHECK_EQ_INT(s_first.a[P].staked, 500);
    CHECK_EQ_INT(s_first.a[P].locked_collateral, 0);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_OPEN);
    CHECK_EQ_INT(s_first.snap.pending, 0);
}

/* Colluders the other way: P forks at its RESULT (a RESULT, and an
 * UNSTAKE), and R settled the RESULT at once, then took X's payment in.
 * R's SETTLE and what follows go back to the buffer; P's pay never was. */
TEST(settled_result_unwinds)
{
    ns_hash_t r[4], p[4], xpay, settle;
    s_set_free();
    s_flow(4, r, p);
    ns_entry_body_t b = fx_amount(10);
    s_add("P3' unstake", P, 3, p[1], NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    b = fx_ref(s_job, p[2]);
    s_add("R3 settle", R, 3, r[1], NS_ENTRY_SETTLE, &b, NULL, 0, settle);
    b = fx_transfer(s_fx.acct[R].pk, 3);
    s_add("X1 pays R", X, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, xpay);
    b = fx_amount(0);
    s_add("R4 takes X's pay", R, 4, settle, NS_ENTRY_STAKE, &b, xpay, 1, NULL);
    if (!s_many_orders("settled result"))
        return;
    CHECK(s_first.a[P].banned);
    CHECK_EQ_INT(s_first.a[P].seq, 2);
    CHECK(!s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 2);
    CHECK_EQ_INT(s_first.a[R].locked_escrow, 500);
    CHECK_EQ_INT(s_first.a[P].jobs_settled, 0);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_AWARDED);
    CHECK_EQ_INT(s_first.snap.pending, 3); /* X's pay, not taken in */
}

/* An honest requester withdraws the award from a provider that went
 * silent (a CANCEL naming no ACCEPT), and the provider forks at its
 * ACCEPT. The CANCEL does not build on the ACCEPT: it stays on R's chain
 * in every order (it must never wait on what a fork voided), the ACCEPT
 * is taken back. */
TEST(withdrawn_award_then_accept_fork)
{
    ns_hash_t r[4], p[4];
    s_set_free();
    s_flow(3, r, p);
    ns_entry_body_t b = fx_cancel(s_job, NULL, false, 0);
    s_add("R3 cancel", R, 3, r[1], NS_ENTRY_CANCEL, &b, NULL, 0, NULL);
    b = fx_amount(100);
    s_add("P2' unstake", P, 2, p[0], NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    if (!s_many_orders("withdrawn award"))
        return;
    CHECK(!s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 3);
    CHECK_EQ_INT(s_first.a[R].locked_escrow, 0);
    CHECK(s_first.a[P].banned);
    CHECK_EQ_INT(s_first.a[P].seq, 1);
    CHECK_EQ_INT(s_first.a[P].staked, 500);
    CHECK_EQ_INT(s_first.a[P].locked_collateral, 0);
    CHECK_EQ_INT(s_first.job.state, NS_JOB_CANCELLED);
}

/* A chain of colluders: R pays X on one branch, X takes it in at once and
 * pays P, who takes that in at once too. Both go back to the buffer. */
TEST(claims_unwind_in_chain)
{
    ns_hash_t r1, pay, x1, x2;
    s_set_free();
    ns_entry_body_t b = fx_transfer(s_fx.acct[P].pk, 1);
    s_add("R1 to P", R, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, r1);
    b = fx_transfer(s_fx.acct[X].pk, 40);
    s_add("R2 to X", R, 2, r1, NS_ENTRY_TRANSFER, &b, NULL, 0, pay);
    b = fx_amount(30);
    s_add("R2' stake", R, 2, r1, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    b = fx_transfer(s_fx.acct[P].pk, 120);
    s_add("X1 to P, with R's pay", X, 1, NULL, NS_ENTRY_TRANSFER, &b, pay, 1,
          x1);
    b = fx_amount(0);
    s_add("P1 takes X's pay", P, 1, NULL, NS_ENTRY_STAKE, &b, x1, 1, NULL);
    b = fx_transfer(s_fx.acct[R].pk, 2);
    s_add("X2", X, 2, x1, NS_ENTRY_TRANSFER, &b, NULL, 0, x2);
    if (!s_many_orders("claims in a chain"))
        return;
    CHECK(s_first.a[R].banned);
    CHECK_EQ_INT(s_first.a[R].seq, 1);
    CHECK_EQ_INT(s_first.a[X].seq, 0);
    CHECK_EQ_INT(s_first.a[P].seq, 0);
    CHECK_EQ_INT(s_first.a[X].free, 100);
    CHECK_EQ_INT(s_first.snap.pending, 1); /* R1's, never claimed */
}

int main(int argc, char **argv)
{
    if (sodium_init() < 0)
        return 1;
    if (argc > 1 && strcmp(argv[1], "--long") == 0)
        setenv("NS_LONG", "1", 1); /* the long form, by hand */
    s_seed = fx_seed("market_fork_jobs");
    s_rng = s_seed;
    static const uint64_t credits[NA] = {1000, 1000, 100};
    if (fx_init(&s_fx, "forkjobs", NA, credits) != NS_OK) {
        fprintf(stderr, "fixture: %s\n", s_fx.err);
        return 1;
    }
    RUN(slashed_provider_forks);
    RUN(award_fork_resolves);
    RUN(settle_fork_resolves);
    RUN(accept_fork_resolves);
    RUN(cancel_fork_resolves);
    RUN(accepted_award_unwinds);
    RUN(settled_result_unwinds);
    RUN(claims_unwind_in_chain);
    RUN(withdrawn_award_then_accept_fork);
    s_set_free();
    fx_free(&s_fx);
    return ns_test_finish("market_fork_jobs");
}
