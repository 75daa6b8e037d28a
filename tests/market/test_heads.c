/* test_heads.c - the incremental head exchange (ledger_heads.h) between
 * two real LMDB ledgers on one genesis: A answers from its change log, B
 * asks with its per-peer cursor and pulls what it lacks, every message
 * through the real encoders and strict decoders.
 *
 * A peer that missed changes is listed exactly them (not every account),
 * and again the ones whose pull was lost; a peer whose log missed a move
 * (divergent: nothing to pull, digests differ) is listed in full after
 * NS_HEADS_DIVERGE_ROUNDS exchanges and ends identical; a restarted peer
 * (new epoch) and a requester whose heads went back fall back to a full
 * listing, then go incremental again; the old one-element request gets
 * the old full answer; the decoders refuse what is not exactly the form.
 */
#include "../check.h"
#include "ledger_fixture.h"

#include "nightshift/ledger_heads.h"

#include <stdlib.h>
#include <string.h>

enum { AUTHORS = 40, MAXSEQ = 16 };

static fx_t s_fx;
static ns_ledger_t *s_b;                  /* the requester's ledger */
static ns_heads_log_t *s_log;             /* A's change log */
static ns_heads_peers_t *s_peers;         /* B's cursors */
static ns_buf_t s_e[AUTHORS][MAXSEQ + 1]; /* A's entries, by author, seq */
static bool s_drop[AUTHORS];              /* B's pull of it is lost */

static void s_on_head_a(void *u, const uint8_t *author)
{
    if (author)
        (void)ns_heads_log_moved(*(ns_heads_log_t **)u, author);
}

static void s_on_head_b(void *u, const uint8_t *author)
{
    if (!author)
        ns_heads_peers_forget_all(u);
}

/* One more entry of author k on A. */
static void s_move(uint32_t k)
{
    ns_entry_body_t b = fx_amount(1);
    uint64_t seq = s_fx.acct[k].seq + 1;
    CHECK(seq <= MAXSEQ);
    ns_buf_init(&s_e[k][seq]);
    CHECK_RC(fx_put_to(&s_fx, s_fx.l, k, NS_ENTRY_STAKE, &b, NULL, 0, NULL,
                       &s_e[k][seq]),
             NS_OK);
    CHECK_RC(ns_ledger_commit(s_fx.l), NS_OK);
}

typedef struct {
    uint32_t pages, listed, lacked;
    bool full; /* some page was a full listing */
    bool listed_of[AUTHORS];
} s_round_t;

static int s_author_of(const uint8_t *id)
{
    for (uint32_t k = 0; k < AUTHORS; k++)
        if (memcmp(s_fx.acct[k].pk, id, NS_ID_BYTES) == 0)
            return (int)k;
    return -1;
}

/* One exchange of B with A, every page, B pulling what it lacks (but the
 * authors in s_drop) as its GETs would. */
static s_round_t s_exchange(bool since_form)
{
    s_round_t r;
    memset(&r, 0, sizeof r);
    const uint8_t *peer = s_fx.acct[0].pk; /* A's node id, for B */
    ns_heads_req_t q;
    ns_heads_peers_request(s_peers, peer, since_form, &q);
    for (bool more = true; more && r.pages < 64;) {
        ns_buf_t wire;
        ns_buf_init(&wire);
        ns_heads_req_t got;
        CHECK_RC(ns_heads_req_encode(&wire, &q), NS_OK);
        CHECK_RC(ns_heads_req_decode(wire.data, wire.len, &got), NS_OK);
        ns_heads_t h, back;
        CHECK_RC(ns_heads_answer(s_log, s_fx.l, &got, &h), NS_OK);
        CHECK_RC(ns_heads_encode(&wire, &h), NS_OK);
        ns_heads_release(&h);
        CHECK_RC(ns_heads_decode(wire.data, wire.len, &back), NS_OK);
        ns_buf_release(&wire);
        r.pages++;
        r.listed += back.n;
        r.full |= back.full;
        bool lack[NS_HEADS_MAX];
        r.lacked +=
            ns_heads_peers_answer(s_peers, s_b, peer, &back, lack, &more, &q);
        for (uint32_t i = 0; i < back.n; i++) {
            int k = s_author_of(back.items[i].id);
            if (k < 0)
                continue;
            r.listed_of[k] = true;
            if (!lack[i] || s_drop[k])
                continue;
            ns_account_t mine;
            CHECK_RC(ns_ledger_account(s_b, back.items[i].id, &mine), NS_OK);
            for (uint64_t s = mine.seq + 1; s <= back.items[i].seq; s++)
                CHECK_RC(ns_ledger_ingest(s_b, s_e[k][s].data, s_e[k][s].len,
                                          NULL, NULL),
                         NS_OK);
        }
        CHECK_RC(ns_ledger_commit(s_b), NS_OK);
        ns_heads_release(&back);
    }
    return r;
}

/* The exchange after a pull lists the pulled heads once more (B lacked
 * them when they were listed: the cursor stays before them until B is
 * seen to hold them), then nothing. */
static void s_settled(uint32_t pulled)
{
    s_round_t r = s_exchange(true);
    CHECK(!r.full);
    CHECK_EQ_INT(r.listed, pulled);
    CHECK_EQ_INT(r.lacked, 0);
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK_EQ_INT(r.listed, 0);
}

static bool s_same(void)
{
    ns_ledger_stats_t a, b;
    ns_ledger_stats(s_fx.l, &a);
    ns_ledger_stats(s_b, &b);
    return memcmp(a.digest, b.digest, NS_HASH_BYTES) == 0 &&
           a.entries == b.entries;
}

/* Changes only: the authors that moved, each once, nothing else. */
static void test_missed_changes(void)
{
    s_round_t r = s_exchange(true); /* first contact: a full listing */
    CHECK(r.full);
    CHECK_EQ_INT(r.listed, AUTHORS);
    CHECK(s_same());
    s_settled(AUTHORS);

    const uint32_t moved[] = {3, 7, 11};
    s_move(3);
    s_move(7);
    s_move(7);
    s_move(11);
    CHECK(!s_same());
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK_EQ_INT(r.listed, 3);
    for (uint32_t i = 0; i < 3; i++)
        CHECK(r.listed_of[moved[i]]);
    CHECK_EQ_INT(r.lacked, 3);
    CHECK(s_same());
    s_settled(3);
}

/* A pull that was lost: the head is listed again until B holds it. */
static void test_lost_pull(void)
{
    s_move(5);
    s_move(6);
    s_drop[5] = true;
    s_round_t r = s_exchange(true);
    CHECK_EQ_INT(r.listed, 2);
    CHECK(!s_same());
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK(r.listed_of[5]);
    CHECK_EQ_INT(r.lacked, 1);
    s_drop[5] = false;
    r = s_exchange(true);
    CHECK(r.listed_of[5]);
    CHECK(s_same());
    s_settled(2); /* 5 and 6: the cursor stayed before 5 */
}

/* A's log misses a move: no incremental answer lists it; the digests
 * differ with nothing to pull, and after NS_HEADS_DIVERGE_ROUNDS such
 * exchanges B asks a full listing and is whole again. */
static void test_divergent(void)
{
    ns_ledger_set_on_head(s_fx.l, NULL, NULL);
    s_move(9);
    ns_ledger_set_on_head(s_fx.l, s_on_head_a, &s_log);
    ns_heads_peers_stats_t st0, st;
    ns_heads_peers_stats(s_peers, &st0);
    uint32_t rounds = 0;
    s_round_t r;
    do {
        r = s_exchange(true);
        rounds++;
    } while (!r.full && rounds < 4 * NS_HEADS_DIVERGE_ROUNDS);
    CHECK_EQ_INT(rounds, NS_HEADS_DIVERGE_ROUNDS + 1);
    CHECK(r.full);
    CHECK_EQ_INT(r.listed, AUTHORS);
    CHECK_EQ_INT(r.lacked, 1);
    CHECK(s_same());
    ns_heads_peers_stats(s_peers, &st);
    CHECK_EQ_INT(st.divergent - st0.divergent, 1);
    /* The cursor stays before 9's last logged move until B is seen to
     * hold it: one more listing of the moves since, then nothing. */
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK(r.listed_of[9]);
    CHECK_EQ_INT(r.lacked, 0);
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK_EQ_INT(r.listed, 0);
}

/* A restarts (a new log, a new epoch): B's cursor names the old epoch,
 * so A lists everything; then changes only again. */
static void test_restarted(void)
{
    uint64_t old = ns_heads_log_epoch(s_log);
    ns_heads_log_free(&s_log);
    s_log = ns_heads_log_new();
    CHECK(s_log != NULL);
    CHECK(ns_heads_log_epoch(s_log) != old);
    s_move(12);
    s_round_t r = s_exchange(true);
    CHECK(r.full);
    CHECK_EQ_INT(r.listed, AUTHORS);
    CHECK_EQ_INT(r.lacked, 1);
    CHECK(s_same());
    s_settled(1); /* 12 moved in the new log */
    s_move(13);
    r = s_exchange(true);
    CHECK_EQ_INT(r.listed, 1);
    CHECK(r.listed_of[13]);
    CHECK(s_same());
    s_settled(1);

    /* B restarts: no cursor, a full listing. */
    ns_heads_peers_free(&s_peers);
    s_peers = ns_heads_peers_new();
    ns_ledger_set_on_head(s_b, s_on_head_b, s_peers);
    r = s_exchange(true);
    CHECK(r.full);
    r = s_exchange(true);
    CHECK(!r.full);

    /* B's heads went back: every cursor is dropped. */
    ns_heads_peers_forget_all(s_peers);
    r = s_exchange(true);
    CHECK(r.full);
    CHECK_EQ_INT(r.listed, AUTHORS);
}

/* An answer nobody asked for (late, repeated, unsolicited) has its heads
 * pulled but moves no cursor and asks no further page. */
static void test_unasked(void)
{
    s_round_t r = s_exchange(true);
    CHECK(!r.full);
    ns_heads_req_t q = {.since_form = true}; /* epoch 0: a full listing */
    ns_heads_t h;
    CHECK_RC(ns_heads_answer(s_log, s_fx.l, &q, &h), NS_OK);
    CHECK(h.full && h.n == AUTHORS);
    h.has_next = true; /* as if more pages followed */
    s_move(15);
    bool lack[NS_HEADS_MAX], more = true;
    ns_heads_req_t next;
    CHECK_EQ_INT(ns_heads_peers_answer(s_peers, s_b, s_fx.acct[0].pk, &h, lack,
                                       &more, &next),
                 0);
    CHECK(!more);
    ns_heads_release(&h);
    r = s_exchange(true);
    CHECK(!r.full);
    CHECK_EQ_INT(r.listed, 1);
    CHECK(r.listed_of[15]);
    s_settled(1);
}

/* A node that asks in the old form gets the old full answer. */
static void test_old_form(void)
{
    s_move(14);
    s_round_t r = s_exchange(false);
    CHECK(r.full);
    CHECK_EQ_INT(r.listed, AUTHORS);
    CHECK(s_same());
    ns_heads_req_t q;
    memset(&q, 0, sizeof q);
    ns_heads_t h;
    CHECK_RC(ns_heads_answer(s_log, s_fx.l, &q, &h), NS_OK);
    CHECK(h.legacy);
    ns_buf_t w;
    ns_buf_init(&w);
    CHECK_RC(ns_heads_encode(&w, &h), NS_OK);
    /* [[[author, seq]...], nil]: 2 elements, pairs */
    CHECK_EQ_INT(w.data[0], 0x92);
    CHECK_EQ_INT(w.data[w.len - 1], 0xc0);
    ns_heads_release(&h);
    ns_buf_release(&w);
}

/* The decoders take exactly the two forms. */
static void test_strict(void)
{
    ns_heads_req_t q;
    ns_heads_t h;
    ns_buf_t w;
    msgpack_packer pk;
    ns_mp_writer_t mw;
    ns_buf_init(&w);
    uint8_t id[NS_ID_BYTES] = {1};

    /* requests: 2 elements, a short bin, a negative since, trailing */
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, id, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, 1);
    CHECK(ns_heads_req_decode(w.data, w.len, &q) != NS_OK);
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 1);
    ns_mp_bin(&pk, id, NS_ID_BYTES - 1);
    CHECK(ns_heads_req_decode(w.data, w.len, &q) != NS_OK);
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, id, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_int64(&pk, -1);
    CHECK(ns_heads_req_decode(w.data, w.len, &q) != NS_OK);
    q = (ns_heads_req_t){.since_form = true, .epoch = 5, .since = 9};
    CHECK_RC(ns_heads_req_encode(&w, &q), NS_OK);
    CHECK_RC(ns_heads_req_decode(w.data, w.len, &q), NS_OK);
    CHECK(q.since_form && q.epoch == 5 && q.since == 9);
    CHECK_RC(ns_buf_append(&w, "\xc0", 1), NS_OK);
    CHECK_RC(ns_heads_req_decode(w.data, w.len, &q), NS_ERR_TRAILING);

    /* answers: over the cap, a str for a bin, a 2-element item in the new
     * form, a count larger than the bytes, a round trip */
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_array(&pk, NS_HEADS_MAX + 1);
    CHECK_RC(ns_heads_decode(w.data, w.len, &h), NS_ERR_TOOBIG);
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_str(&pk, NS_ID_BYTES);
    msgpack_pack_str_body(&pk, id, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_nil(&pk);
    CHECK(ns_heads_decode(w.data, w.len, &h) != NS_OK);
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_uint64(&pk, 2);
    msgpack_pack_false(&pk);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_array(&pk, 2);
    ns_mp_bin(&pk, id, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_nil(&pk);
    ns_mp_bin(&pk, id, NS_HASH_BYTES);
    CHECK(ns_heads_decode(w.data, w.len, &h) != NS_OK);
    ns_mp_writer_init(&mw, &pk, &w);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_uint64(&pk, 2);
    msgpack_pack_false(&pk);
    msgpack_pack_array(&pk, 1000);
    CHECK_RC(ns_heads_decode(w.data, w.len, &h), NS_ERR_TRUNCATED);

    ns_head_item_t item = {{7}, 3, 4};
    ns_heads_t out = {.epoch = 11,
                      .upto = 12,
                      .full = false,
                      .n = 1,
                      .items = &item,
                      .has_next = true};
    memcpy(out.next, id, NS_ID_BYTES);
    CHECK_RC(ns_heads_encode(&w, &out), NS_OK);
    CHECK_RC(ns_heads_decode(w.data, w.len, &h), NS_OK);
    CHECK(!h.legacy && !h.full && h.epoch == 11 && h.upto == 12);
    CHECK(h.n == 1 && h.items[0].seq == 3 && h.items[0].ctr == 4);
    CHECK(h.has_next && memcmp(h.next, id, NS_ID_BYTES) == 0);
    ns_heads_release(&h);
    for (size_t cut = 0; cut < w.len; cut++)
        CHECK(ns_heads_decode(w.data, cut, &h) != NS_OK);
    ns_buf_release(&w);
}

/* The log alone: moves keep one place per author, in counter order, and
 * a page of changes ends where the next starts. */
static void test_log(void)
{
    ns_heads_log_t *log = ns_heads_log_new();
    CHECK(log != NULL);
    uint8_t id[NS_ID_BYTES] = {0};
    for (uint32_t i = 0; i < 5000; i++) {
        memcpy(id, &i, sizeof i);
        CHECK_RC(ns_heads_log_moved(log, id), NS_OK);
    }
    uint32_t zero = 0;
    memcpy(id, &zero, sizeof zero);
    CHECK_RC(ns_heads_log_moved(log, id), NS_OK);
    CHECK_EQ_INT(ns_heads_log_ctr(log), 5001);
    CHECK_EQ_INT(ns_heads_log_ctr_of(log, id), 5001);
    uint32_t one = 1;
    memcpy(id, &one, sizeof one);
    CHECK_EQ_INT(ns_heads_log_ctr_of(log, id), 2);
    id[31] = 1;
    CHECK_EQ_INT(ns_heads_log_ctr_of(log, id), 0);
    ns_heads_log_free(&log);
    CHECK(log == NULL);
}

int main(void)
{
    uint64_t credits[AUTHORS];
    for (uint32_t i = 0; i < AUTHORS; i++)
        credits[i] = 1000000;
    CHECK_RC(fx_init(&s_fx, "heads", AUTHORS, credits), NS_OK);
    s_b = fx_open_other(&s_fx, "b");
    CHECK(s_b != NULL);
    s_log = ns_heads_log_new();
    s_peers = ns_heads_peers_new();
    CHECK(s_log && s_peers);
    ns_ledger_set_on_head(s_fx.l, s_on_head_a, &s_log);
    ns_ledger_set_on_head(s_b, s_on_head_b, s_peers);
    for (uint32_t k = 0; k < AUTHORS; k++)
        s_move(k);

    test_missed_changes();
    test_lost_pull();
    test_divergent();
    test_restarted();
    test_unasked();
    test_old_form();
    test_strict();
    test_log();

    ns_ledger_close(&s_b);
    ns_heads_log_free(&s_log);
    ns_heads_peers_free(&s_peers);
    for (uint32_t k = 0; k < AUTHORS; k++)
        for (uint32_t s = 0; s <= MAXSEQ; s++)
            ns_buf_release(&s_e[k][s]);
    fx_free(&s_fx);
    return ns_test_finish("market_heads");
}
