/* test_committee.c - confirmation by a bounded committee
 * (ledger_votes.c; docs/PROTOCOL.md, "Committee").
 *
 * The draw itself (ns_votes_draw): the same stake in any order gives the
 * same committee and seed, a small network is everyone by stake, seats
 * go to accounts about in proportion to their stake. Then two nodes (two
 * p2p contexts, two real LMDB ledgers fed the same entries in different
 * orders) with 24 staked accounts and 4 seats: both draw the same
 * committee; VOTE envelopes signed by the fixture's accounts are fed to
 * the p2p's ingest as if they came from a link: a vote from a staked
 * account off the committee is dropped, a forged one is refused, votes
 * in any order and repeated confirm exactly when more than half of the
 * seats voted, one VOTE of many ids confirms them all, and a stake that
 * moves mid-epoch changes the committee only at the next epoch.
 */
#include "check.h"
#include "ledger_fixture.h"

#include "nightshift/config.h"
#include "nightshift/ledger_votes.h"
#include "nightshift/mp.h"
#include "nightshift/p2p.h"
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <time.h>

enum { NS = 24, SELF = NS, BIG = NS + 1, NA = NS + 2, SEATS = 4 };
#define EPOCH_MS 3000 /* long enough for a test under load, short to wait */
#define SETTLE_MS 200

static fx_t s_fx;
static ns_config_t s_cfg;
static ns_identity_t *s_me;
static ns_p2p_t *s_p[2];
static ns_ledger_t *s_l2; /* the second node's ledger */
static ns_votes_t *s_v[2];
static uint64_t s_ts;
static uint64_t s_rng;

static void s_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Until just after an epoch's committee is settled: a test that must
 * stay with one committee has the rest of the epoch. */
static void s_epoch_start(void)
{
    uint64_t in = ns_now_ms() % EPOCH_MS;
    s_sleep_ms(EPOCH_MS - in + SETTLE_MS + 20);
}

/* A VOTE envelope from account `who` for the n ids, ingested by node k;
 * with `flip`, a byte of its body is changed after signing (a forgery). */
static int s_vote_to(int k, uint32_t who, const uint8_t *ids, uint32_t n,
                     bool flip)
{
    ns_buf_t body, env;
    ns_buf_init(&body);
    ns_buf_init(&env);
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, &body);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        ns_mp_bin(&pk, ids + (size_t)i * NS_HASH_BYTES, NS_HASH_BYTES);
    int rc = w.err;
    if (rc == NS_OK)
        rc = ns_envelope_encode(s_fx.acct[who].id, NS_MSG_VOTE, ++s_ts,
                                body.data, body.len, &env, NULL);
    if (rc == NS_OK && flip) {
        /* the last id's last byte: inside the signed body */
        for (size_t i = 0; i + body.len <= env.len; i++)
            if (memcmp(env.data + i, body.data, body.len) == 0) {
                env.data[i + body.len - 1] ^= 1;
                break;
            }
    }
    uint8_t link[32];
    if (rc == NS_OK)
        rc = ns_id_curve_pk(s_fx.acct[who].pk, link);
    if (rc == NS_OK)
        rc = ns_p2p_ingest(s_p[k], link, env.data, env.len);
    ns_buf_release(&body);
    ns_buf_release(&env);
    return rc;
}

static int s_vote(uint32_t who, const uint8_t *ids, uint32_t n)
{
    return s_vote_to(0, who, ids, n, false);
}

static void s_fresh_id(ns_hash_t out)
{
    uint64_t x = fx_below(&s_rng, UINT64_MAX);
    ns_hash(out, &x, sizeof x);
}

/* The committee a node sits with now: each account's weight on it. */
static uint64_t s_members(ns_votes_t *v, uint64_t w[NA])
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < NA; i++)
        total += (w[i] = ns_votes_member_weight(v, s_fx.acct[i].pk));
    return total;
}

/* ---- the draw ---------------------------------------------------------- */

TEST(draw_is_the_same_in_any_order)
{
    enum { N = 40 };
    ns_vote_member_t in[N], shuffled[N], a[NS_VOTE_SEATS_MAX],
        b[NS_VOTE_SEATS_MAX];
    ns_hash_t net, seed_a, seed_b;
    ns_hash(net, "net", 3);
    for (uint32_t i = 0; i < N; i++) {
        uint64_t k = i;
        ns_hash(in[i].id, &k, sizeof k);
        in[i].weight = i % 5 == 0 ? 0 : 1 + fx_below(&s_rng, 1000);
    }
    for (uint32_t trial = 0; trial < 50; trial++) {
        memcpy(shuffled, in, sizeof in);
        for (uint32_t i = N - 1; i > 0; i--) {
            uint32_t j = (uint32_t)fx_below(&s_rng, i + 1);
            ns_vote_member_t t = shuffled[i];
            shuffled[i] = shuffled[j];
            shuffled[j] = t;
        }
        uint32_t na = 0, nb = 0;
        CHECK_RC(ns_votes_draw(net, trial, in, N, 16, a, &na, seed_a), NS_OK);
        CHECK_RC(ns_votes_draw(net, trial, shuffled, N, 16, b, &nb, seed_b),
                 NS_OK);
        CHECK_EQ_INT(na, nb);
        CHECK(memcmp(a, b, na * sizeof *a) == 0);
        CHECK(memcmp(seed_a, seed_b, NS_HASH_BYTES) == 0);
        uint64_t seats = 0;
        for (uint32_t i = 0; i < na; i++) {
            seats += a[i].weight;
            if (i)
                CHECK(memcmp(a[i - 1].id, a[i].id, NS_ID_BYTES) < 0);
            bool staked = false;
            for (uint32_t j = 0; j < N; j++)
                if (memcmp(in[j].id, a[i].id, NS_ID_BYTES) == 0)
                    staked = in[j].weight > 0;
            CHECK(staked);
        }
        CHECK_EQ_INT(seats, 16);
    }
    /* another epoch, another seed; one account's stake moved: another */
    uint32_t na = 0;
    CHECK_RC(ns_votes_draw(net, 1, in, N, 16, a, &na, seed_a), NS_OK);
    CHECK_RC(ns_votes_draw(net, 2, in, N, 16, a, &na, seed_b), NS_OK);
    CHECK(memcmp(seed_a, seed_b, NS_HASH_BYTES) != 0);
    in[1].weight++;
    CHECK_RC(ns_votes_draw(net, 1, in, N, 16, a, &na, seed_b), NS_OK);
    CHECK(memcmp(seed_a, seed_b, NS_HASH_BYTES) != 0);
    CHECK_RC(ns_votes_draw(net, 1, in, N, 0, a, &na, NULL), NS_ERR_INVAL);
    CHECK_RC(ns_votes_draw(net, 1, in, N, NS_VOTE_SEATS_MAX + 1, a, &na, NULL),
             NS_ERR_INVAL);
}

TEST(small_network_is_everyone_by_stake)
{
    ns_vote_member_t in[6], out[NS_VOTE_SEATS_MAX];
    ns_hash_t net;
    ns_hash(net, "net", 3);
    for (uint32_t i = 0; i < 6; i++) {
        uint64_t k = i;
        ns_hash(in[i].id, &k, sizeof k);
        in[i].weight = i == 3 ? 0 : 100 * (i + 1);
    }
    uint32_t n = 0;
    CHECK_RC(ns_votes_draw(net, 7, in, 6, 5, out, &n, NULL), NS_OK);
    CHECK_EQ_INT(n, 5); /* five staked, five seats: everyone */
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += out[i].weight;
    CHECK_EQ_INT(sum, 100 + 200 + 300 + 500 + 600); /* by stake */
    CHECK_RC(ns_votes_draw(net, 7, in, 6, 4, out, &n, NULL), NS_OK);
    sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += out[i].weight;
    CHECK_EQ_INT(sum, 4); /* one more staked than seats: drawn, by seats */
    CHECK_RC(ns_votes_draw(net, 7, in, 0, 4, out, &n, NULL), NS_OK);
    CHECK_EQ_INT(n, 0); /* nobody stakes: nobody votes */
}

TEST(seats_follow_stake)
{
    /* one account of 20 holds half of the stake: about half the seats */
    ns_vote_member_t in[20], out[NS_VOTE_SEATS_MAX];
    ns_hash_t net;
    ns_hash(net, "net", 3);
    for (uint32_t i = 0; i < 20; i++) {
        uint64_t k = i + 100;
        ns_hash(in[i].id, &k, sizeof k);
        in[i].weight = i == 0 ? 1900 : 100;
    }
    uint64_t big = 0, all = 0;
    for (uint64_t epoch = 0; epoch < 400; epoch++) {
        uint32_t n = 0;
        CHECK_RC(ns_votes_draw(net, epoch, in, 20, 16, out, &n, NULL), NS_OK);
        for (uint32_t i = 0; i < n; i++) {
            all += out[i].weight;
            if (memcmp(out[i].id, in[0].id, NS_ID_BYTES) == 0)
                big += out[i].weight;
        }
    }
    CHECK_EQ_INT(all, 400 * 16);
    CHECK(big * 100 > all * 45 && big * 100 < all * 55);
}

/* ---- two nodes --------------------------------------------------------- */

TEST(every_node_draws_the_same_committee)
{
    s_epoch_start(); /* one committee throughout */
    uint64_t w0[NA], w1[NA];
    uint64_t t0 = s_members(s_v[0], w0), t1 = s_members(s_v[1], w1);
    CHECK_EQ_INT(t0, SEATS);
    CHECK_EQ_INT(t1, SEATS);
    CHECK(memcmp(w0, w1, sizeof w0) == 0);
    CHECK_EQ_INT(w0[SELF], 0);
    /* and it is the draw of the stake both hold */
    ns_vote_member_t in[NA], out[NS_VOTE_SEATS_MAX];
    for (uint32_t i = 0; i < NA; i++) {
        memcpy(in[i].id, s_fx.acct[i].pk, NS_ID_BYTES);
        in[i].weight = i < NS ? 100 : 0;
    }
    uint32_t n = 0;
    CHECK_RC(ns_votes_draw(s_fx.genesis.network_id, ns_now_ms() / EPOCH_MS, in,
                           NA, SEATS, out, &n, NULL),
             NS_OK);
    for (uint32_t i = 0; i < n; i++) {
        int at = -1;
        for (uint32_t j = 0; j < NA; j++)
            if (memcmp(s_fx.acct[j].pk, out[i].id, NS_ID_BYTES) == 0)
                at = (int)j;
        CHECK(at >= 0 && w0[at] == out[i].weight);
    }
}

TEST(off_committee_and_forged_votes_are_ignored)
{
    s_epoch_start(); /* one committee throughout */
    uint64_t w[NA];
    s_members(s_v[0], w);
    ns_hash_t id;
    s_fresh_id(id);
    uint32_t outsider = NA;
    for (uint32_t i = 0; i < NS && outsider == NA; i++)
        if (w[i] == 0)
            outsider = i;
    if (!CHECK(outsider < NA))
        return;
    /* staked, but not drawn: dropped, not passed on */
    CHECK_RC(s_vote(outsider, id, 1), NS_ERR_NOTFOUND);
    /* every member, forged (the body changed after signing): refused */
    for (uint32_t i = 0; i < NS; i++)
        if (w[i])
            CHECK(s_vote_to(0, i, id, 1, true) != NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v[0], id), NS_CONFIRM_NO);
}

TEST(votes_in_any_order_confirm_alike)
{
    s_epoch_start(); /* one committee throughout */
    uint64_t w[NA];
    uint64_t total = s_members(s_v[0], w);
    uint32_t members[NA], nm = 0;
    for (uint32_t i = 0; i < NS; i++)
        if (w[i])
            members[nm++] = i;
    for (uint32_t trial = 0; trial < 40; trial++) {
        ns_hash_t id;
        s_fresh_id(id);
        /* a random subset of members votes, each one to three times, and
         * some outsiders too, shuffled; to both nodes in other orders */
        uint32_t order[3 * NA], n = 0;
        uint64_t yes = 0;
        for (uint32_t i = 0; i < nm; i++)
            if (fx_below(&s_rng, 2)) {
                yes += w[members[i]];
                for (uint64_t r = 0; r <= fx_below(&s_rng, 3); r++)
                    order[n++] = members[i];
            }
        for (uint32_t i = 0; i < NS; i++)
            if (!w[i] && fx_below(&s_rng, 4) == 0)
                order[n++] = i;
        for (int k = 0; k < 2; k++) {
            for (uint32_t i = n; i > 1; i--) {
                uint32_t j = (uint32_t)fx_below(&s_rng, i);
                uint32_t t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
            }
            for (uint32_t i = 0; i < n; i++)
                (void)s_vote_to(k, order[i], id, 1, false);
        }
        ns_confirm_state want =
            2 * yes > total ? NS_CONFIRM_YES : NS_CONFIRM_NO;
        CHECK_EQ_INT(ns_votes_state(s_v[0], id), want);
        CHECK_EQ_INT(ns_votes_state(s_v[1], id), want);
    }
}

TEST(one_vote_message_covers_many_entries)
{
    s_epoch_start(); /* one committee throughout */
    uint64_t w[NA];
    s_members(s_v[0], w);
    enum { K = 200 };
    uint8_t *ids = malloc((size_t)K * NS_HASH_BYTES);
    if (!CHECK(ids != NULL))
        return;
    for (uint32_t i = 0; i < K; i++)
        s_fresh_id(ids + (size_t)i * NS_HASH_BYTES);
    /* every member: one VOTE each, of all K ids */
    for (uint32_t i = 0; i < NS; i++)
        if (w[i])
            CHECK_RC(s_vote(i, ids, K), NS_OK);
    uint32_t yes = 0;
    for (uint32_t i = 0; i < K; i++)
        yes += ns_votes_state(s_v[0], ids + (size_t)i * NS_HASH_BYTES) ==
               NS_CONFIRM_YES;
    CHECK_EQ_INT(yes, K);
    free(ids);
}

TEST(stake_moves_the_committee_only_at_the_epoch)
{
    s_epoch_start();
    uint64_t epoch = ns_now_ms() / EPOCH_MS;
    uint64_t before[NA], mid[NA], after[NA];
    s_members(s_v[0], before); /* drawn and frozen for the epoch */
    CHECK_EQ_INT(before[BIG], 0);
    /* BIG stakes nineteen times all the rest: mid-epoch, nothing moves */
    ns_entry_body_t b = fx_amount(45600);
    CHECK_RC(fx_put(&s_fx, BIG, NS_ENTRY_STAKE, &b, NULL, 0, NULL), NS_OK);
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
    s_sleep_ms(50);
    s_members(s_v[0], mid);
    CHECK(memcmp(before, mid, sizeof mid) == 0);
    CHECK_EQ_INT(ns_now_ms() / EPOCH_MS, epoch); /* still the same epoch */
    /* the next epoch draws from it: BIG holds 95 % of the stake, so a
     * seat of the four at least (all four miss it with a chance of 6e-6) */
    s_epoch_start();
    uint64_t total = s_members(s_v[0], after);
    CHECK_EQ_INT(total, SEATS);
    CHECK(after[BIG] > 0);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    s_rng = fx_seed("market_committee");
    uint64_t credits[NA];
    for (uint32_t i = 0; i < NA; i++)
        credits[i] = i == BIG ? 100000 : 1000;
    if (fx_init(&s_fx, "committee", NA, credits) != NS_OK) {
        fprintf(stderr, "fixture: %s\n", s_fx.err);
        return 1;
    }
    RUN(draw_is_the_same_in_any_order);
    RUN(small_network_is_everyone_by_stake);
    RUN(seats_follow_stake);

    /* two nodes: the same stake entries, in two orders of authors */
    s_l2 = fx_open_other(&s_fx, "second");
    if (!s_l2) {
        fprintf(stderr, "second ledger: %s\n", s_fx.err);
        return 1;
    }
    for (uint32_t k = 0; k < NS; k++) {
        ns_buf_t raw;
        ns_buf_init(&raw);
        ns_entry_body_t b = fx_amount(100);
        if (fx_put_to(&s_fx, s_fx.l, k, NS_ENTRY_STAKE, &b, NULL, 0, NULL,
                      &raw) != NS_OK)
            return 1;
        ns_buf_release(&raw);
    }
    for (uint32_t k = NS; k-- > 0;) {
        uint8_t *buf;
        size_t len;
        if (ns_ledger_get(s_fx.l, s_fx.acct[k].pk, 1, &buf, &len) != NS_OK ||
            ns_ledger_ingest(s_l2, buf, len, NULL, NULL) != NS_OK)
            return 1;
        free(buf);
    }
    if (ns_ledger_commit(s_fx.l) != NS_OK || ns_ledger_commit(s_l2) != NS_OK)
        return 1;

    ns_config_defaults(&s_cfg);
    snprintf(s_cfg.listen, sizeof s_cfg.listen, "tcp://127.0.0.1:0");
    s_me = ns_identity_generate();
    int err = 0;
    for (int k = 0; k < 2; k++) {
        ns_p2p_opts_t o = {&s_cfg, s_me, {0}, "committee", NULL, 0, false};
        memcpy(o.network_id, s_fx.genesis.network_id, NS_HASH_BYTES);
        s_p[k] = ns_p2p_new(&o, &err);
        if (s_p[k])
            s_v[k] = ns_votes_new(s_p[k], k ? s_l2 : s_fx.l, s_fx.acct[SELF].pk,
                                  &err);
        if (!s_p[k] || !s_v[k]) {
            fprintf(stderr, "setup: %s\n", ns_strerror(err));
            return 1;
        }
        ns_votes_set_committee(s_v[k], SEATS, EPOCH_MS, SETTLE_MS);
    }
    s_ts = ns_now_ms();
    RUN(every_node_draws_the_same_committee);
    RUN(off_committee_and_forged_votes_are_ignored);
    RUN(votes_in_any_order_confirm_alike);
    RUN(one_vote_message_covers_many_entries);
    RUN(stake_moves_the_committee_only_at_the_epoch);
    for (int k = 0; k < 2; k++) {
        ns_votes_destroy(&s_v[k]);
        ns_p2p_destroy(&s_p[k]);
    }
    ns_ledger_close(&s_l2);
    ns_identity_destroy(&s_me);
    fx_free(&s_fx);
    return ns_test_finish("market_committee");
}
