/* test_bans.c - one ban state everywhere (issue 13, item 4).
 *
 * Whether an author is banned must depend only on the entries that prove
 * a fork (two valid signed entries at one seq), never on the order they
 * arrive in or on entries that were rejected. A set of entries, valid and
 * invalid (insufficient funds, a payment to oneself, a wrong prev, a
 * clock running backwards, a credit that is not the author's, a bad
 * signature), is delivered with duplicates in many random orders, each
 * to a fresh ledger; every ledger must end with the same ban set, the
 * same accounts and the same digest, and conserve the genesis total.
 *
 * The seed is printed; NS_TEST_SEED=<n> repeats a run. NS_LONG=1 runs
 * 500 orders per set instead of 40.
 */
#include "check.h"
#include "ledger_fixture.h"

#include <inttypes.h>
#include <time.h>

#define NA 4 /* A forks or lies, B and C take credits, D receives */
#define MAX_SET 32
#define SHORT_ORDERS 40
#define LONG_ORDERS 500

enum { A = 0, B = 1, C = 2, D = 3 };

static uint64_t s_rng, s_seed;

typedef struct {
    ns_buf_t raw[MAX_SET];
    const char *what[MAX_SET];
    uint32_t n;
} s_set_t;

static fx_t s_fx;
static s_set_t s_set;
static ns_hash_t s_v1, s_v2, s_v3; /* A's valid chain */

static void s_add(const char *what, uint32_t who, uint64_t seq,
                  const ns_hash_t prev, uint8_t type, const ns_entry_body_t *b,
                  const uint8_t *refs, uint32_t n_refs, uint64_t ts,
                  ns_hash_t id_out)
{
    ns_hash_t id;
    if (!CHECK(s_set.n < MAX_SET))
        return;
    ns_buf_t *raw = &s_set.raw[s_set.n];
    ns_buf_init(raw);
    if (!CHECK_RC(fx_make_raw(&s_fx, who, seq, prev, type, b, refs, n_refs, ts,
                              raw, id),
                  NS_OK))
        return;
    s_set.what[s_set.n++] = what;
    if (id_out)
        memcpy(id_out, id, NS_HASH_BYTES);
}

/* A's valid chain V1 (pays B), V2 (stakes), V3 (pays C); B and C take
 * their credits in; and around them the invalid entries of the report:
 * A's lies at seq 1, 2 and 3, B's claim of a credit that is C's, and a
 * copy of V2 with a broken signature. */
static void s_build(void)
{
    ns_hash_t junk, c1;
    memset(junk, 0x5a, sizeof junk);
    uint64_t t1 = fx_tick(&s_fx), t2 = fx_tick(&s_fx), t3 = fx_tick(&s_fx);
    ns_entry_body_t b;

    b = fx_transfer(s_fx.acct[B].pk, 10);
    s_add("V1", A, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, t1, s_v1);
    b = fx_amount(100);
    s_add("V2", A, 2, s_v1, NS_ENTRY_STAKE, &b, NULL, 0, t2, s_v2);
    b = fx_transfer(s_fx.acct[C].pk, 20);
    s_add("V3", A, 3, s_v2, NS_ENTRY_TRANSFER, &b, NULL, 0, t3, s_v3);

    b = fx_transfer(s_fx.acct[C].pk, 5000);
    s_add("A1 funds", A, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, t1, NULL);
    b = fx_transfer(s_fx.acct[A].pk, 5);
    s_add("A1 to self", A, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, t1 + 1,
          NULL);
    b = fx_transfer(s_fx.acct[C].pk, 5);
    s_add("A1 prev", A, 1, junk, NS_ENTRY_TRANSFER, &b, NULL, 0, t1, NULL);
    b = fx_amount(0);
    s_add("A1 not its credit", A, 1, NULL, NS_ENTRY_STAKE, &b, s_v1, 1, t1,
          NULL);
    b = fx_amount(1);
    s_add("A2 stale", A, 2, s_v1, NS_ENTRY_STAKE, &b, NULL, 0, t1 - 5, NULL);
    b = fx_amount(50);
    s_add("A2 unstake", A, 2, s_v1, NS_ENTRY_UNSTAKE, &b, NULL, 0, t2, NULL);
    b = fx_transfer(s_fx.acct[D].pk, 995);
    s_add("A2 funds", A, 2, s_v1, NS_ENTRY_TRANSFER, &b, NULL, 0, t2, NULL);
    b = fx_transfer(s_fx.acct[D].pk, 1);
    s_add("A2 prev", A, 2, junk, NS_ENTRY_TRANSFER, &b, NULL, 0, t2, NULL);
    b = fx_amount(500);
    s_add("A3 unstake", A, 3, s_v2, NS_ENTRY_UNSTAKE, &b, NULL, 0, t3, NULL);
    b = fx_amount(0);
    s_add("A3 claims V1 again", A, 3, s_v2, NS_ENTRY_STAKE, &b, s_v1, 1, t3,
          NULL);

    b = fx_amount(0);
    s_add("B1 claims V1", B, 1, NULL, NS_ENTRY_STAKE, &b, s_v1, 1,
          fx_tick(&s_fx), NULL);
    s_add("B1 claims C's credit", B, 1, NULL, NS_ENTRY_STAKE, &b, s_v3, 1,
          fx_tick(&s_fx), NULL);
    b = fx_transfer(s_fx.acct[D].pk, 5);
    s_add("C1", C, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx), c1);
    b = fx_amount(0);
    s_add("C2 claims V3", C, 2, c1, NS_ENTRY_STAKE, &b, s_v3, 1, fx_tick(&s_fx),
          NULL);

    /* V2 with one bit of its signature flipped */
    if (CHECK(s_set.n < MAX_SET)) {
        ns_buf_t *raw = &s_set.raw[s_set.n];
        ns_buf_init(raw);
        CHECK_RC(ns_buf_append(raw, s_set.raw[1].data, s_set.raw[1].len),
                 NS_OK);
        raw->data[raw->len - 3] ^= 0x01;
        s_set.what[s_set.n++] = "V2 bad signature";
    }
}

/* What one ledger ends with after a delivery order. */
typedef struct {
    bool banned[NA];
    fx_snap_t snap;
} s_end_t;

static s_end_t s_first, s_this;

/* Deliver the first n of the set, each once to three times, in a random
 * order, to a fresh ledger; what it ends with goes to end. all_settle:
 * nothing may be left waiting in the buffer. */
static bool s_run_order(uint32_t n, uint32_t k, bool all_settle, s_end_t *end)
{
    uint32_t order[MAX_SET * 3], m = fx_order(order, n, &s_rng, true);
    char name[32], dir[700];
    snprintf(name, sizeof name, "order%u", k);
    snprintf(dir, sizeof dir, "%s/%s", s_fx.root, name);
    ns_ledger_t *l = fx_open_other(&s_fx, name);
    if (!CHECK(l != NULL))
        return false;
    for (uint32_t i = 0; i < m; i++)
        (void)ns_ledger_ingest(l, s_set.raw[order[i]].data,
                               s_set.raw[order[i]].len, NULL, NULL);
    /* The buffer keeps one entry per (author, seq): a valid entry that
     * came while a lie held its place was forgotten, and ledger sync
     * fetches it again from a peer that holds it. So does this pass. */
    for (bool more = true; more;) {
        more = false;
        for (uint32_t i = 0; i < n; i++)
            more |= ns_ledger_ingest(l, s_set.raw[i].data, s_set.raw[i].len,
                                     NULL, NULL) == NS_OK;
    }
    bool ok = CHECK_RC(ns_ledger_commit(l), NS_OK);
    for (uint32_t i = 0; i < NA; i++)
        end->banned[i] = fx_acct_in(l, &s_fx, i).banned;
    fx_snap_of(l, &end->snap);
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    if (all_settle && !CHECK_EQ_INT(st.buffered, 0)) {
        ok = false;
        for (uint32_t i = 0; i < n; i++) {
            int rc = ns_ledger_ingest(l, s_set.raw[i].data, s_set.raw[i].len,
                                      NULL, NULL);
            fprintf(stderr, "  %s: %s\n", s_set.what[i], ns_errname(rc));
        }
    }
    ok &= CHECK_RC(end->snap.cons_rc, NS_OK);
    ns_ledger_close(&l);
    fx_rmrf(dir);
    return ok;
}

static uint32_t s_orders(void)
{
    const char *env = getenv("NS_LONG");
    return env && *env && strcmp(env, "0") ? LONG_ORDERS : SHORT_ORDERS;
}

/* n entries of the set in many orders: the same bans and, when
 * same_state, the same accounts and digest everywhere. */
static void s_many_orders(uint32_t n, bool same_state, const bool *want_banned)
{
    uint32_t orders = s_orders(), bad = 0;
    char why[512];
    for (uint32_t k = 0; k < orders && bad < 3; k++) {
        s_end_t *end = k == 0 ? &s_first : &s_this;
        if (!s_run_order(n, k, same_state, end)) {
            bad++;
            continue;
        }
        for (uint32_t i = 0; i < NA; i++)
            if (!CHECK_EQ_INT(end->banned[i], want_banned[i])) {
                fprintf(stderr,
                        "  order %u: account %u banned %d (seed %" PRIu64 ")\n",
                        k, i, end->banned[i], s_seed);
                bad++;
            }
        if (k > 0 && same_state &&
            !CHECK(fx_snap_same(&s_first.snap, &end->snap, why, sizeof why))) {
            fprintf(stderr, "  order %u: %s (seed %" PRIu64 ")\n", k, why,
                    s_seed);
            bad++;
        }
    }
    printf("market_bans: %u entries in %u orders\n", n, orders);
}

/* The report's sequence on two ledgers: an invalid entry at seq 1, the
 * valid one, invalid ones at seq 2, and the first invalid one again
 * (another delivery path); the other ledger sees the valid one first.
 * Neither bans A, and A's next valid entry is taken by both. */
TEST(rejected_entry_never_bans)
{
    ns_ledger_t *x = fx_open_other(&s_fx, "x"), *y = fx_open_other(&s_fx, "y");
    if (!CHECK(x && y))
        goto out;
    const ns_buf_t *r = s_set.raw;
    /* x: A1 funds, V1, A2 unstake, A2 funds, A1 funds again */
    CHECK_RC(ns_ledger_ingest(x, r[3].data, r[3].len, NULL, NULL),
             NS_ERR_FUNDS);
    CHECK_RC(ns_ledger_ingest(x, r[0].data, r[0].len, NULL, NULL), NS_OK);
    CHECK_RC(ns_ledger_ingest(x, r[8].data, r[8].len, NULL, NULL),
             NS_ERR_FUNDS);
    CHECK_RC(ns_ledger_ingest(x, r[9].data, r[9].len, NULL, NULL),
             NS_ERR_FUNDS);
    CHECK_RC(ns_ledger_ingest(x, r[3].data, r[3].len, NULL, NULL),
             NS_ERR_FUNDS);
    /* y: V1 first, then every lie at seq 1 */
    CHECK_RC(ns_ledger_ingest(y, r[0].data, r[0].len, NULL, NULL), NS_OK);
    CHECK_RC(ns_ledger_ingest(y, r[3].data, r[3].len, NULL, NULL),
             NS_ERR_FUNDS);
    CHECK_RC(ns_ledger_ingest(y, r[4].data, r[4].len, NULL, NULL),
             NS_ERR_INVAL);
    CHECK_RC(ns_ledger_ingest(y, r[5].data, r[5].len, NULL, NULL), NS_ERR_PREV);
    CHECK_RC(ns_ledger_ingest(y, r[6].data, r[6].len, NULL, NULL),
             NS_ERR_NOCREDIT);
    CHECK(!fx_acct_in(x, &s_fx, A).banned);
    CHECK(!fx_acct_in(y, &s_fx, A).banned);
    /* A's next valid entry: taken by both */
    CHECK_RC(ns_ledger_ingest(x, r[1].data, r[1].len, NULL, NULL), NS_OK);
    CHECK_RC(ns_ledger_ingest(y, r[1].data, r[1].len, NULL, NULL), NS_OK);
    /* once A's chain moved on, lies at seq 2 are still no fork */
    CHECK_RC(ns_ledger_ingest(y, r[7].data, r[7].len, NULL, NULL),
             NS_ERR_STALE);
    CHECK_RC(ns_ledger_ingest(y, r[8].data, r[8].len, NULL, NULL),
             NS_ERR_FUNDS);
    CHECK_RC(ns_ledger_ingest(y, r[10].data, r[10].len, NULL, NULL),
             NS_ERR_PREV);
    ns_ledger_stats_t sx, sy;
    ns_ledger_stats(x, &sx);
    ns_ledger_stats(y, &sy);
    CHECK_EQ_INT(sx.forks, 0);
    CHECK_EQ_INT(sy.forks, 0);
    CHECK(memcmp(sx.digest, sy.digest, NS_HASH_BYTES) == 0);
out:
    ns_ledger_close(&x);
    ns_ledger_close(&y);
}

/* A credit claimed by the author's own later entry was still open at the
 * seq a conflicting entry stands at: claiming it there is valid, so that
 * entry proves a fork; claiming it again after is no fork. */
TEST(claimed_later_still_proves_fork)
{
    ns_ledger_t *l = fx_open_other(&s_fx, "claims");
    if (!CHECK(l != NULL))
        return;
    const ns_buf_t *r = s_set.raw;
    /* C1, then V1..V3, then C2 claims V3 */
    CHECK_RC(ns_ledger_ingest(l, r[15].data, r[15].len, NULL, NULL), NS_OK);
    for (int i = 0; i < 3; i++)
        CHECK_RC(ns_ledger_ingest(l, r[i].data, r[i].len, NULL, NULL), NS_OK);
    CHECK_RC(ns_ledger_ingest(l, r[16].data, r[16].len, NULL, NULL), NS_OK);
    /* C at seq 2 claiming V3 again, with another body: a valid entry at
     * seq 2 (V3 was open before it), so a fork */
    ns_hash_t c1, id;
    uint8_t *buf = NULL;
    size_t len = 0;
    ns_entry_t e;
    if (!CHECK_RC(ns_ledger_get(l, s_fx.acct[C].pk, 1, &buf, &len), NS_OK) ||
        !CHECK_RC(ns_entry_decode(buf, len, s_fx.genesis.network_id, &e),
                  NS_OK)) {
        free(buf);
        ns_ledger_close(&l);
        return;
    }
    memcpy(c1, e.id, NS_HASH_BYTES);
    free(buf);
    ns_buf_t raw;
    ns_buf_init(&raw);
    ns_entry_body_t b = fx_amount(3);
    CHECK_RC(fx_make_raw(&s_fx, C, 2, c1, NS_ENTRY_STAKE, &b, s_v3, 1,
                         fx_tick(&s_fx), &raw, id),
             NS_OK);
    /* first: a claim of a credit C never had is no fork */
    ns_buf_t bad;
    ns_buf_init(&bad);
    CHECK_RC(fx_make_raw(&s_fx, C, 2, c1, NS_ENTRY_STAKE, &b, s_v1, 1,
                         fx_tick(&s_fx), &bad, id),
             NS_OK);
    CHECK_RC(ns_ledger_ingest(l, bad.data, bad.len, NULL, NULL),
             NS_ERR_NOCREDIT);
    CHECK(!fx_acct_in(l, &s_fx, C).banned);
    uint8_t ids[4 * NS_HASH_BYTES];
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[D].pk, ids, 4), 1); /* C1 */
    CHECK_RC(ns_ledger_ingest(l, raw.data, raw.len, NULL, NULL), NS_ERR_FORK);
    CHECK(fx_acct_in(l, &s_fx, C).banned);
    /* C1's credit for D stays, but a banned author's credits are not
     * offered for claims */
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[D].pk, ids, 4), 0);
    ns_buf_release(&raw);
    ns_buf_release(&bad);
    CHECK_RC(ns_ledger_commit(l), NS_OK);
    CHECK_RC(ns_ledger_check_conservation(l, NULL), NS_OK);
    ns_ledger_close(&l);
}

/* Valid and invalid entries, no fork among them: nobody is banned and
 * every order ends in the same state. */
TEST(many_orders_no_fork_same_state)
{
    static const bool none[NA];
    s_many_orders(s_set.n, true, none);
}

/* The same plus a second valid entry of A at seq 2: A is banned in every
 * order (which of its branches a ledger keeps is item 3's matter). */
TEST(many_orders_real_fork_same_bans)
{
    static const bool only_a[NA] = {true, false, false, false};
    ns_entry_body_t b = fx_transfer(s_fx.acct[D].pk, 7);
    s_add("A2 second valid", A, 2, s_v1, NS_ENTRY_TRANSFER, &b, NULL, 0,
          s_fx.now + 1, NULL);
    s_many_orders(s_set.n, false, only_a);
}

static void s_set_free(void)
{
    for (uint32_t i = 0; i < s_set.n; i++)
        ns_buf_release(&s_set.raw[i]);
    s_set.n = 0;
}

/* Issue 13, item 3: A pays B (taken in), then signs two TRANSFERs at
 * seq 2, to C and to D, and goes on with a third entry on the first
 * branch; lies at seq 2 and 3 around them, and C's and D's own entries.
 * Whatever order a ledger sees them in, A ends banned at its account of
 * before seq 2, both branches void, and every ledger holds the same
 * state and digest. */
static void s_build_fork(ns_hash_t t1, ns_hash_t t2)
{
    ns_hash_t v1, a3;
    uint64_t ts1 = fx_tick(&s_fx), ts2 = fx_tick(&s_fx);
    ns_entry_body_t b = fx_transfer(s_fx.acct[B].pk, 10);
    s_set_free();
    s_add("V1", A, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, ts1, v1);
    b = fx_amount(0);
    s_add("B1 claims V1", B, 1, NULL, NS_ENTRY_STAKE, &b, v1, 1, fx_tick(&s_fx),
          NULL);
    b = fx_transfer(s_fx.acct[C].pk, 7);
    s_add("T1 to C", A, 2, v1, NS_ENTRY_TRANSFER, &b, NULL, 0, ts2, t1);
    b = fx_transfer(s_fx.acct[D].pk, 9);
    s_add("T2 to D", A, 2, v1, NS_ENTRY_TRANSFER, &b, NULL, 0, ts2 + 1, t2);
    b = fx_amount(5);
    s_add("A3 after T1", A, 3, t1, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx),
          a3);
    b = fx_transfer(s_fx.acct[D].pk, 5000);
    s_add("A2 funds", A, 2, v1, NS_ENTRY_TRANSFER, &b, NULL, 0, ts2, NULL);
    b = fx_amount(500);
    s_add("A3 unstake", A, 3, t1, NS_ENTRY_UNSTAKE, &b, NULL, 0, fx_tick(&s_fx),
          NULL);
    b = fx_transfer(s_fx.acct[B].pk, 3);
    s_add("C1", C, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx),
          NULL);
    b = fx_amount(10);
    s_add("D1", D, 1, NULL, NS_ENTRY_STAKE, &b, NULL, 0, fx_tick(&s_fx), NULL);
}

/* Every order of the two branches (and the lies) ends in one state. */
TEST(many_orders_fork_converges)
{
    static const bool only_a[NA] = {true, false, false, false};
    ns_hash_t t1, t2;
    s_build_fork(t1, t2);
    s_many_orders(s_set.n, true, only_a);
    /* and that state: A as before seq 2, banned; no credit from either
     * branch; B's taken-in credit kept */
    ns_ledger_t *l = fx_open_other(&s_fx, "fork_end");
    if (!CHECK(l != NULL))
        return;
    for (uint32_t i = 0; i < s_set.n; i++)
        (void)ns_ledger_ingest(l, s_set.raw[i].data, s_set.raw[i].len, NULL,
                               NULL);
    ns_account_t a = fx_acct_in(l, &s_fx, A), b = fx_acct_in(l, &s_fx, B);
    CHECK(a.banned);
    CHECK_EQ_INT(a.seq, 1);
    CHECK_EQ_INT(a.free, 990);
    CHECK_EQ_INT(a.staked, 0);
    CHECK_EQ_INT(b.free, 110); /* C1 pays B 3, not taken in */
    uint64_t amount;
    bool claimed;
    CHECK_RC(ns_ledger_credit(l, t1, s_fx.acct[C].pk, &amount, &claimed),
             NS_ERR_NOTFOUND);
    CHECK_RC(ns_ledger_credit(l, t2, s_fx.acct[D].pk, &amount, &claimed),
             NS_ERR_NOTFOUND);
    uint8_t ids[4 * NS_HASH_BYTES];
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[C].pk, ids, 4), 0);
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[D].pk, ids, 4), 0);
    /* C claiming its voided credit waits (the stake may still vote the
     * voided entry back in place: docs/PROTOCOL.md, "Confirmation"); C's
     * chain goes on with another entry at seq 2 */
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    CHECK_EQ_INT(st.buffered, 0);
    CHECK_EQ_INT(st.pending_credit, 3);
    uint8_t *buf = NULL;
    size_t len = 0;
    ns_entry_t e;
    if (CHECK_RC(ns_ledger_get(l, s_fx.acct[C].pk, 1, &buf, &len), NS_OK) &&
        CHECK_RC(ns_entry_decode(buf, len, s_fx.genesis.network_id, &e),
                 NS_OK)) {
        ns_buf_t raw;
        ns_hash_t id;
        ns_entry_body_t body = fx_amount(0);
        ns_buf_init(&raw);
        CHECK_RC(fx_make_raw(&s_fx, C, 2, e.id, NS_ENTRY_STAKE, &body, t1, 1,
                             fx_tick(&s_fx), &raw, id),
                 NS_OK);
        CHECK_RC(ns_ledger_ingest(l, raw.data, raw.len, NULL, NULL),
                 NS_ERR_MISSING);
        raw.len = 0;
        body = fx_amount(20);
        CHECK_RC(fx_make_raw(&s_fx, C, 2, e.id, NS_ENTRY_STAKE, &body, NULL, 0,
                             fx_tick(&s_fx), &raw, id),
                 NS_OK);
        CHECK_RC(ns_ledger_ingest(l, raw.data, raw.len, NULL, NULL), NS_OK);
        CHECK(!fx_acct_in(l, &s_fx, C).banned);
        ns_buf_release(&raw);
    }
    free(buf);
    CHECK_RC(ns_ledger_commit(l), NS_OK);
    CHECK_RC(ns_ledger_check_conservation(l, NULL), NS_OK);
    ns_ledger_close(&l);
}

/* The id of account who's entry at seq in l (a check fails if none). */
static bool s_entry_id(ns_ledger_t *l, uint32_t who, uint64_t seq,
                       ns_hash_t out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    ns_entry_t e;
    bool ok =
        CHECK_RC(ns_ledger_get(l, s_fx.acct[who].pk, seq, &buf, &len), NS_OK) &&
        CHECK_RC(ns_entry_decode(buf, len, s_fx.genesis.network_id, &e), NS_OK);
    if (ok)
        memcpy(out, e.id, NS_HASH_BYTES);
    free(buf);
    return ok;
}

/* s_build_fork's set to n ledgers: the first `split` get A's V1 and T1
 * (and A's entry after it), the others V1 and T2; then each gets the
 * whole set in order (gossip). */
static void s_deliver_split(ns_ledger_t **l, uint32_t n, uint32_t split)
{
    /* 0 V1, 1 B1, 2 T1, 3 T2, 4 A3 after T1 */
    for (uint32_t i = 0; i < n; i++) {
        static const int mine[2][3] = {{0, 2, 4}, {0, 3, -1}};
        const int *m = mine[i < split ? 0 : 1];
        for (int k = 0; k < 3 && m[k] >= 0; k++)
            CHECK_RC(ns_ledger_ingest(l[i], s_set.raw[m[k]].data,
                                      s_set.raw[m[k]].len, NULL, NULL),
                     NS_OK);
    }
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < s_set.n; k++)
            (void)ns_ledger_ingest(l[i], s_set.raw[k].data, s_set.raw[k].len,
                                   NULL, NULL);
}

/* The report's injection at a 2/2 and a 3/1 split: four ledgers, the
 * first `split` of them get A's V1 and T1 (and A's entry after it), the
 * others V1 and T2; then each gets what the others hold (gossip). All
 * four end in one state, A voided from seq 2, and C's and D's chains go
 * on everywhere. */
static void s_split(uint32_t split)
{
    enum { N = 4 };
    ns_hash_t t1, t2;
    s_build_fork(t1, t2);
    ns_ledger_t *l[N] = {NULL};
    char name[32];
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "split%u_%u", split, i);
        l[i] = fx_open_other(&s_fx, name);
        if (!CHECK(l[i] != NULL))
            goto out;
    }
    s_deliver_split(l, N, split);
    /* C and D go on: their next entries are taken everywhere */
    ns_buf_t c2, d2;
    ns_buf_init(&c2);
    ns_buf_init(&d2);
    ns_hash_t cid, did, id;
    if (!s_entry_id(l[0], C, 1, cid) || !s_entry_id(l[0], D, 1, did))
        goto out;
    ns_entry_body_t b = fx_transfer(s_fx.acct[B].pk, 1);
    CHECK_RC(fx_make_raw(&s_fx, C, 2, cid, NS_ENTRY_TRANSFER, &b, NULL, 0,
                         fx_tick(&s_fx), &c2, id),
             NS_OK);
    b = fx_amount(1);
    CHECK_RC(fx_make_raw(&s_fx, D, 2, did, NS_ENTRY_UNSTAKE, &b, NULL, 0,
                         fx_tick(&s_fx), &d2, id),
             NS_OK);
    char why[512];
    for (uint32_t i = 0; i < N; i++) {
        CHECK_RC(ns_ledger_ingest(l[i], c2.data, c2.len, NULL, NULL), NS_OK);
        CHECK_RC(ns_ledger_ingest(l[i], d2.data, d2.len, NULL, NULL), NS_OK);
        CHECK_RC(ns_ledger_commit(l[i]), NS_OK);
        s_end_t *end = i == 0 ? &s_first : &s_this;
        fx_snap_of(l[i], &end->snap);
        CHECK_RC(end->snap.cons_rc, NS_OK);
        ns_account_t a = fx_acct_in(l[i], &s_fx, A);
        CHECK(a.banned);
        CHECK_EQ_INT(a.seq, 1);
        if (i > 0 &&
            !CHECK(fx_snap_same(&s_first.snap, &end->snap, why, sizeof why)))
            fprintf(stderr, "  split %u/%u: ledger %u: %s\n", split, N - split,
                    i, why);
    }
    ns_buf_release(&c2);
    ns_buf_release(&d2);
out:
    for (uint32_t i = 0; i < N; i++)
        ns_ledger_close(&l[i]);
}

TEST(split_2_2_converges)
{
    s_split(2);
}

TEST(split_3_1_converges)
{
    s_split(3);
}

/* Confirmation (docs/PROTOCOL.md, "Confirmation"): the votes module says
 * which entries more than half the stake voted for; here a set of ids. */
static struct {
    const uint8_t *ids[4];
    uint32_t n;
    bool on; /* false: nothing is confirmed yet */
} s_conf;

static ns_confirm_state s_conf_fn(void *u, const ns_hash_t id)
{
    (void)u;
    for (uint32_t i = 0; s_conf.on && i < s_conf.n; i++)
        if (memcmp(s_conf.ids[i], id, NS_HASH_BYTES) == 0)
            return NS_CONFIRM_YES;
    return NS_CONFIRM_NO;
}

/* The stake voted for V1 and T1 (A's payment to C), not for T2 or A3.
 * Four ledgers see the two branches split as in s_split; with `late`, the
 * confirmation comes only after every ledger saw the fork (they void
 * both branches, then put T1 back: ns_ledger_reconsider). Every ledger
 * ends with A banned at T1, A3 and T2 void, C's credit from T1 offered
 * and accepted, D's claim of T2 waiting: one state everywhere. */
static void s_confirmed_split(uint32_t split, bool late)
{
    enum { N = 4 };
    ns_hash_t t1, t2, v1;
    s_build_fork(t1, t2);
    ns_entry_t e;
    if (!CHECK_RC(ns_entry_decode(s_set.raw[0].data, s_set.raw[0].len,
                                  s_fx.genesis.network_id, &e),
                  NS_OK))
        return;
    memcpy(v1, e.id, NS_HASH_BYTES);
    s_conf.ids[0] = v1;
    s_conf.ids[1] = t1;
    s_conf.n = 2;
    s_conf.on = !late;
    ns_ledger_t *l[N] = {NULL};
    char name[48], why[512];
    ns_buf_t c2, d2;
    ns_buf_init(&c2);
    ns_buf_init(&d2);
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "conf%u_%d_%u", split, late, i);
        l[i] = fx_open_other(&s_fx, name);
        if (!CHECK(l[i] != NULL))
            goto out;
        ns_ledger_set_confirm(l[i], s_conf_fn, NULL);
    }
    s_deliver_split(l, N, split);
    if (late) {
        s_conf.on = true;
        for (uint32_t i = 0; i < N; i++)
            CHECK_RC(ns_ledger_reconsider(l[i], t1), NS_OK);
    }
    /* C takes T1's credit in; D claims T2's, which waits everywhere */
    ns_hash_t cid, did, id;
    if (!s_entry_id(l[0], C, 1, cid) || !s_entry_id(l[0], D, 1, did))
        goto out;
    ns_entry_body_t b = fx_amount(0);
    CHECK_RC(fx_make_raw(&s_fx, C, 2, cid, NS_ENTRY_STAKE, &b, t1, 1,
                         fx_tick(&s_fx), &c2, id),
             NS_OK);
    CHECK_RC(fx_make_raw(&s_fx, D, 2, did, NS_ENTRY_STAKE, &b, t2, 1,
                         fx_tick(&s_fx), &d2, id),
             NS_OK);
    for (uint32_t i = 0; i < N; i++) {
        uint8_t ids[4 * NS_HASH_BYTES];
        CHECK_EQ_INT(ns_ledger_unclaimed(l[i], s_fx.acct[C].pk, ids, 4), 1);
        CHECK_EQ_INT(ns_ledger_unclaimed(l[i], s_fx.acct[D].pk, ids, 4), 0);
        CHECK_RC(ns_ledger_ingest(l[i], c2.data, c2.len, NULL, NULL), NS_OK);
        CHECK_RC(ns_ledger_ingest(l[i], d2.data, d2.len, NULL, NULL),
                 NS_ERR_MISSING);
        CHECK_RC(ns_ledger_commit(l[i]), NS_OK);
        s_end_t *end = i == 0 ? &s_first : &s_this;
        fx_snap_of(l[i], &end->snap);
        CHECK_RC(end->snap.cons_rc, NS_OK);
        ns_account_t a = fx_acct_in(l[i], &s_fx, A);
        CHECK(a.banned);
        CHECK_EQ_INT(a.seq, 2);
        CHECK(memcmp(a.head, t1, NS_HASH_BYTES) == 0);
        CHECK_EQ_INT(fx_acct_in(l[i], &s_fx, C).free, 104); /* 100 - 3 + 7 */
        if (i > 0 &&
            !CHECK(fx_snap_same(&s_first.snap, &end->snap, why, sizeof why)))
            fprintf(stderr, "  confirmed split %u/%u%s: ledger %u: %s\n", split,
                    N - split, late ? " (late)" : "", i, why);
    }
out:
    ns_buf_release(&c2);
    ns_buf_release(&d2);
    s_conf.on = false;
    for (uint32_t i = 0; i < N; i++)
        ns_ledger_close(&l[i]);
}

TEST(confirmed_branch_wins)
{
    s_confirmed_split(2, false);
    s_confirmed_split(3, false);
    s_confirmed_split(1, false);
}

TEST(confirmed_after_the_fork_is_put_back)
{
    s_confirmed_split(2, true);
    s_confirmed_split(3, true);
    s_confirmed_split(1, true);
}

/* A forks with a JOB (escrow locked, never awarded) on one branch and a
 * TRANSFER of the same funds on the other: in either order, and with
 * either branch confirmed or neither, every ledger ends in one state,
 * with no job record left from a voided JOB. */
static void s_job_fork(int confirmed) /* -1 neither, 0 the JOB, 1 the pay */
{
    enum { N = 2 };
    ns_hash_t v1, job_e, pay_e, job_id;
    uint64_t ts = fx_tick(&s_fx);
    ns_entry_body_t b = fx_transfer(s_fx.acct[B].pk, 10);
    s_set_free();
    s_add("V1", A, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0, ts, v1);
    b = fx_job(s_fx.acct[A].pk, 77, 900, 100, 0, fx_tick(&s_fx) + 3600000,
               job_id);
    s_add("JOB", A, 2, v1, NS_ENTRY_JOB, &b, NULL, 0, fx_tick(&s_fx), job_e);
    b = fx_transfer(s_fx.acct[C].pk, 900);
    s_add("PAY", A, 2, v1, NS_ENTRY_TRANSFER, &b, NULL, 0, fx_tick(&s_fx),
          pay_e);
    s_conf.ids[0] = v1;
    s_conf.ids[1] = confirmed == 0 ? job_e : pay_e;
    s_conf.n = confirmed < 0 ? 1 : 2;
    s_conf.on = true;
    ns_ledger_t *l[N] = {NULL};
    char name[48], why[512];
    for (uint32_t i = 0; i < N; i++) {
        snprintf(name, sizeof name, "jobfork%d_%u", confirmed, i);
        l[i] = fx_open_other(&s_fx, name);
        if (!CHECK(l[i] != NULL))
            goto out;
        ns_ledger_set_confirm(l[i], s_conf_fn, NULL);
        /* ledger 0: V1, JOB, PAY; ledger 1: V1, PAY, JOB */
        static const int order[N][3] = {{0, 1, 2}, {0, 2, 1}};
        for (int k = 0; k < 3; k++)
            (void)ns_ledger_ingest(l[i], s_set.raw[order[i][k]].data,
                                   s_set.raw[order[i][k]].len, NULL, NULL);
        CHECK_RC(ns_ledger_commit(l[i]), NS_OK);
        s_end_t *end = i == 0 ? &s_first : &s_this;
        fx_snap_of(l[i], &end->snap);
        CHECK_RC(end->snap.cons_rc, NS_OK);
        ns_account_t a = fx_acct_in(l[i], &s_fx, A);
        ns_ledger_job_t j;
        CHECK(a.banned);
        CHECK_EQ_INT(a.seq, confirmed < 0 ? 1 : 2);
        CHECK_EQ_INT(a.locked_escrow, confirmed == 0 ? 900 : 0);
        CHECK_RC(ns_ledger_job(l[i], job_id, &j),
                 confirmed == 0 ? NS_OK : NS_ERR_NOTFOUND);
        if (i > 0 &&
            !CHECK(fx_snap_same(&s_first.snap, &end->snap, why, sizeof why)))
            fprintf(stderr, "  job fork (confirmed %d): %s\n", confirmed, why);
    }
out:
    s_conf.on = false;
    for (uint32_t i = 0; i < N; i++)
        ns_ledger_close(&l[i]);
}

TEST(fork_with_an_unawarded_job_resolves)
{
    s_job_fork(-1);
    s_job_fork(0);
    s_job_fork(1);
}

/* With a claim delay, a credit is offered only once its source entry has
 * been here that long. */
TEST(claim_delay)
{
    ns_ledger_t *l = fx_open_other(&s_fx, "delay");
    if (!CHECK(l != NULL))
        return;
    ns_ledger_set_claim_delay(l, 300);
    uint8_t ids[4 * NS_HASH_BYTES];
    ns_buf_t raw;
    ns_hash_t id;
    ns_buf_init(&raw);
    ns_entry_body_t b = fx_transfer(s_fx.acct[B].pk, 4);
    CHECK_RC(fx_make_raw(&s_fx, D, 1, NULL, NS_ENTRY_TRANSFER, &b, NULL, 0,
                         fx_tick(&s_fx), &raw, id),
             NS_OK);
    CHECK_RC(ns_ledger_ingest(l, raw.data, raw.len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[B].pk, ids, 4), 0);
    struct timespec ts = {0, 350 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_EQ_INT(ns_ledger_unclaimed(l, s_fx.acct[B].pk, ids, 4), 1);
    ns_buf_release(&raw);
    ns_ledger_close(&l);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    s_seed = fx_seed("market_bans");
    s_rng = s_seed;
    static const uint64_t credits[NA] = {1000, 100, 100, 100};
    if (fx_init(&s_fx, "bans", NA, credits) != NS_OK) {
        fprintf(stderr, "fixture: %s\n", s_fx.err);
        return 1;
    }
    s_build();
    RUN(rejected_entry_never_bans);
    RUN(claimed_later_still_proves_fork);
    RUN(many_orders_no_fork_same_state);
    RUN(many_orders_real_fork_same_bans);
    RUN(many_orders_fork_converges);
    RUN(split_2_2_converges);
    RUN(split_3_1_converges);
    RUN(claim_delay);
    RUN(confirmed_branch_wins);
    RUN(confirmed_after_the_fork_is_put_back);
    RUN(fork_with_an_unawarded_job_resolves);
    s_set_free();
    fx_free(&s_fx);
    return ns_test_finish("market_bans");
}
