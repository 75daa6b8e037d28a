/* test_votes.c - confirmation by the votes of staked accounts
 * (ledger_votes.c; docs/PROTOCOL.md, "Confirmation"), through a real p2p
 * context and a real LMDB ledger: VOTE envelopes signed by the fixture's
 * accounts are fed to the p2p's ingest as if they came from a link.
 *
 * A and B stake half of all stake each; C holds none. An entry is
 * confirmed only with more than half: A alone is not enough, A and B
 * are. A vote from C (no stake) is dropped; a second vote of one account
 * counts once; malformed VOTE bodies are refused whole; a credit is
 * offered for a claim only once its source is confirmed. When C stakes
 * too, the committee changes and the votes already counted carry over.
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

enum { A = 0, B = 1, C = 2, NA = 3 };

static fx_t s_fx;
static ns_config_t s_cfg;
static ns_identity_t *s_me;
static ns_p2p_t *s_p;
static ns_votes_t *s_v;
static uint64_t s_ts;

/* A VOTE envelope from account `who` with body `body`, ingested. */
static int s_send_body(uint32_t who, const ns_buf_t *body)
{
    ns_buf_t env;
    ns_buf_init(&env);
    int rc = ns_envelope_encode(s_fx.acct[who].id, NS_MSG_VOTE, ++s_ts,
                                body->data, body->len, &env, NULL);
    uint8_t link[32];
    if (rc == NS_OK)
        rc = ns_id_curve_pk(s_fx.acct[who].pk, link);
    if (rc == NS_OK)
        rc = ns_p2p_ingest(s_p, link, env.data, env.len);
    ns_buf_release(&env);
    return rc;
}

/* A well-formed VOTE from who for the n ids. */
static int s_vote(uint32_t who, const uint8_t *ids, uint32_t n)
{
    ns_buf_t body;
    ns_buf_init(&body);
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, &body);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        ns_mp_bin(&pk, ids + (size_t)i * NS_HASH_BYTES, NS_HASH_BYTES);
    int rc = w.err == NS_OK ? s_send_body(who, &body) : w.err;
    ns_buf_release(&body);
    return rc;
}

TEST(nobody_can_vote_without_stake)
{
    ns_hash_t any;
    ns_hash(any, "any", 3);
    CHECK_EQ_INT(ns_votes_state(s_v, any), NS_CONFIRM_NONE);
}

TEST(more_than_half_of_the_stake_confirms)
{
    ns_hash_t stake_a, stake_b, pay;
    ns_entry_body_t b = fx_amount(450);
    CHECK_RC(fx_put(&s_fx, A, NS_ENTRY_STAKE, &b, NULL, 0, stake_a), NS_OK);
    CHECK_RC(fx_put(&s_fx, B, NS_ENTRY_STAKE, &b, NULL, 0, stake_b), NS_OK);
    b = fx_transfer(s_fx.acct[C].pk, 10);
    CHECK_RC(fx_put(&s_fx, A, NS_ENTRY_TRANSFER, &b, NULL, 0, pay), NS_OK);
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
    /* stake has moved: the votes module weighs again within 20 ms */
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint8_t ids[4 * NS_HASH_BYTES];
    CHECK_EQ_INT(ns_votes_state(s_v, pay), NS_CONFIRM_NO);
    CHECK_EQ_INT(ns_ledger_unclaimed(s_fx.l, s_fx.acct[C].pk, ids, 4), 0);

    /* C holds no stake: dropped (quietly, not passed on) */
    CHECK_RC(s_vote(C, pay, 1), NS_ERR_NOTFOUND);
    CHECK_EQ_INT(ns_votes_state(s_v, pay), NS_CONFIRM_NO);
    /* A: exactly half, not more */
    CHECK_RC(s_vote(A, pay, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, pay), NS_CONFIRM_NO);
    /* A again: one account counts once */
    CHECK_RC(s_vote(A, pay, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, pay), NS_CONFIRM_NO);
    CHECK_EQ_INT(ns_ledger_unclaimed(s_fx.l, s_fx.acct[C].pk, ids, 4), 0);
    /* B as well: confirmed, and C's credit is offered */
    CHECK_RC(s_vote(B, pay, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, pay), NS_CONFIRM_YES);
    CHECK_EQ_INT(ns_ledger_unclaimed(s_fx.l, s_fx.acct[C].pk, ids, 4), 1);
    CHECK(memcmp(ids, pay, NS_HASH_BYTES) == 0);
    /* an id nobody holds can be confirmed too (its entry may come later) */
    ns_hash_t later;
    ns_hash(later, "later", 5);
    CHECK_RC(s_vote(A, later, 1), NS_OK);
    CHECK_RC(s_vote(B, later, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, later), NS_CONFIRM_YES);
}

TEST(malformed_votes_are_refused_whole)
{
    ns_hash_t target;
    ns_hash(target, "target", 6);
    ns_buf_t body;
    ns_buf_init(&body);
    ns_mp_writer_t w;
    msgpack_packer pk;

    /* not an array */
    ns_mp_writer_init(&w, &pk, &body);
    ns_mp_bin(&pk, target, NS_HASH_BYTES);
    CHECK(s_send_body(A, &body) != NS_OK);
    /* an id of 31 bytes after a good one */
    body.len = 0;
    ns_mp_writer_init(&w, &pk, &body);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, target, NS_HASH_BYTES);
    ns_mp_bin(&pk, target, NS_HASH_BYTES - 1);
    CHECK(s_send_body(A, &body) != NS_OK);
    /* a good id, then a trailing byte */
    body.len = 0;
    ns_mp_writer_init(&w, &pk, &body);
    msgpack_pack_array(&pk, 1);
    ns_mp_bin(&pk, target, NS_HASH_BYTES);
    msgpack_pack_nil(&pk);
    CHECK(s_send_body(A, &body) != NS_OK);
    /* more ids than a VOTE may hold */
    body.len = 0;
    ns_mp_writer_init(&w, &pk, &body);
    msgpack_pack_array(&pk, NS_VOTE_IDS_MAX + 1);
    for (uint32_t i = 0; i <= NS_VOTE_IDS_MAX; i++)
        ns_mp_bin(&pk, target, NS_HASH_BYTES);
    CHECK(s_send_body(A, &body) != NS_OK);
    ns_buf_release(&body);
    /* none of them counted: B's vote alone is still half */
    CHECK_RC(s_vote(B, target, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, target), NS_CONFIRM_NO);
    /* the cap itself is fine */
    uint8_t *many = malloc((size_t)NS_VOTE_IDS_MAX * NS_HASH_BYTES);
    if (!CHECK(many != NULL))
        return;
    for (uint32_t i = 0; i < NS_VOTE_IDS_MAX; i++) {
        uint32_t k = i + 1000;
        ns_hash(many + (size_t)i * NS_HASH_BYTES, &k, sizeof k);
    }
    CHECK_RC(s_vote(A, many, NS_VOTE_IDS_MAX), NS_OK);
    CHECK_RC(s_vote(B, many, NS_VOTE_IDS_MAX), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, many + (size_t)(NS_VOTE_IDS_MAX - 1) *
                                                NS_HASH_BYTES),
                 NS_CONFIRM_YES);
    free(many);
}

TEST(a_vote_outlives_a_committee_change)
{
    ns_hash_t x;
    ns_hash(x, "carried", 7);
    CHECK_RC(s_vote(A, x, 1), NS_OK); /* 450 of 900: not more than half */
    CHECK_EQ_INT(ns_votes_state(s_v, x), NS_CONFIRM_NO);
    /* C stakes: the committee is a new table, of 1000 */
    ns_entry_body_t b = fx_amount(100);
    CHECK_RC(fx_put(&s_fx, C, NS_ENTRY_STAKE, &b, NULL, 0, NULL), NS_OK);
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_EQ_INT(ns_votes_member_weight(s_v, s_fx.acct[C].pk), 100);
    CHECK_EQ_INT(ns_votes_state(s_v, x), NS_CONFIRM_NO);
    /* A's vote was carried over: with B's, 900 of 1000 */
    CHECK_RC(s_vote(B, x, 1), NS_OK);
    CHECK_EQ_INT(ns_votes_state(s_v, x), NS_CONFIRM_YES);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    static const uint64_t credits[NA] = {1000, 1000, 1000};
    if (fx_init(&s_fx, "votes", NA, credits) != NS_OK) {
        fprintf(stderr, "fixture: %s\n", s_fx.err);
        return 1;
    }
    ns_config_defaults(&s_cfg);
    snprintf(s_cfg.listen, sizeof s_cfg.listen, "tcp://127.0.0.1:0");
    s_me = ns_identity_generate();
    ns_p2p_opts_t o = {&s_cfg, s_me, {0}, "votes", NULL, 0, false};
    memcpy(o.network_id, s_fx.genesis.network_id, NS_HASH_BYTES);
    int err = 0;
    s_p = ns_p2p_new(&o, &err);
    if (s_p)
        s_v = ns_votes_new(s_p, s_fx.l, s_fx.acct[C].pk, &err);
    if (!s_p || !s_v) {
        fprintf(stderr, "setup: %s\n", ns_strerror(err));
        return 1;
    }
    s_ts = ns_now_ms();
    RUN(nobody_can_vote_without_stake);
    RUN(more_than_half_of_the_stake_confirms);
    RUN(malformed_votes_are_refused_whole);
    RUN(a_vote_outlives_a_committee_change);
    ns_votes_destroy(&s_v);
    ns_p2p_destroy(&s_p);
    ns_identity_destroy(&s_me);
    fx_free(&s_fx);
    return ns_test_finish("market_votes");
}
