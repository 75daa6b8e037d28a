/* test_rules.c - every validation rule of the ledger, the refused case and
 * the accepted one beside it, the job flow from JOB to SETTLE / SLASH /
 * CANCEL, forks, and what survives a close and reopen.
 *
 * Each test has its own ledger in a fresh mkdtemp directory and a genesis
 * built in memory from generated identities. A refused entry must come
 * back with its specific ns_err and leave the derived state exactly as it
 * was: every account, stats.entries, the digest and conservation.
 */
#include "check.h"
#include "ledger_fixture.h"

#include "nightshift/mp.h"

#include <lmdb.h>
#include <msgpack.h>

#define S_CREDITS 10000

static uint64_t s_credits[FX_MAX_ACCOUNTS];

static bool s_init(fx_t *fx, const char *name, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        s_credits[i] = S_CREDITS;
    int rc = fx_init(fx, name, n, s_credits);
    if (rc != NS_OK) {
        fprintf(stderr, "fixture %s: %s (%s)\n", name, ns_strerror(rc),
                fx->err);
        fx_free(fx);
        return false;
    }
    return true;
}

/* Snapshots are large: two static ones, one test at a time. */
static fx_snap_t s_before, s_after;

/* The ledger's state now equals s_before (and still conserves). */
static bool s_unchanged(fx_t *fx, const char *what)
{
    char why[512];
    fx_snap_of(fx->l, &s_after);
    if (!fx_snap_same(&s_before, &s_after, why, sizeof why)) {
        fprintf(stderr, "  %s changed the ledger: %s\n", what, why);
        return false;
    }
    if (s_after.cons_rc != NS_OK) {
        fprintf(stderr, "  %s: conservation broken (sum %llu)\n", what,
                (unsigned long long)s_after.sum);
        return false;
    }
    return true;
}

/* Ingest bytes that must be refused with want, leaving no trace (and
 * counting the refusal under its reason). */
static bool s_refused_bytes(fx_t *fx, const uint8_t *buf, size_t len, int want,
                            const char *what)
{
    ns_ledger_stats_t st0, st1;
    fx_snap_of(fx->l, &s_before);
    ns_ledger_stats(fx->l, &st0);
    int rc = ns_ledger_ingest(fx->l, buf, len, NULL, NULL);
    ns_ledger_stats(fx->l, &st1);
    bool ok = true;
    if (rc != want) {
        fprintf(stderr, "  %s: got %s, want %s\n", what, ns_errname(rc),
                ns_errname(want));
        ok = false;
    }
    if (!s_unchanged(fx, what))
        ok = false;
    if (want != NS_ERR_DUPLICATE && want != NS_ERR_GAP &&
        want != NS_ERR_MISSING && -want < NS_ERR_COUNT &&
        st1.rejected[-want] != st0.rejected[-want] + 1) {
        fprintf(stderr, "  %s: rejected[%s] not counted\n", what,
                ns_errname(want));
        ok = false;
    }
    if (st1.buffered != st0.buffered &&
        (want != NS_ERR_GAP && want != NS_ERR_MISSING)) {
        fprintf(stderr, "  %s: buffered a refused entry\n", what);
        ok = false;
    }
    return ok;
}

/* who's next entry must be refused with want and change nothing. */
static bool s_refused(fx_t *fx, uint32_t who, uint8_t type,
                      const ns_entry_body_t *b, const uint8_t *refs,
                      uint32_t n_refs, int want)
{
    ns_buf_t out;
    ns_hash_t id;
    uint64_t ts;
    char what[64];
    ns_buf_init(&out);
    snprintf(what, sizeof what, "%s by account %u", ns_entry_type_name(type),
             who);
    bool ok = fx_make(fx, who, type, b, refs, n_refs, &out, id, &ts) == NS_OK &&
              s_refused_bytes(fx, out.data, out.len, want, what);
    ns_buf_release(&out);
    return ok;
}

#define REFUSED(fx, who, type, body, refs, n, want)                            \
    CHECK(s_refused((fx), (who), (type), (body), (refs), (n), (want)))

/* who's next entry must be stored. */
#define PUT(fx, who, type, body, refs, n, id)                                  \
    CHECK_RC(fx_put((fx), (who), (type), (body), (refs), (n), (id)), NS_OK)

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

static ns_ledger_stats_t s_stats(fx_t *fx)
{
    ns_ledger_stats_t st;
    ns_ledger_stats(fx->l, &st);
    return st;
}

/* ---- raw entries: any field, any shape ---------------------------------- */

typedef struct {
    uint32_t n_fields; /* 9 for a well-formed entry */
    uint64_t version;
    uint64_t seq;
    const uint8_t *prev; /* NULL: zero */
    uint64_t type;
    const uint8_t *body;
    size_t body_len;
    const uint8_t *refs;
    size_t refs_len;
    uint64_t ts;
} s_raw_t;

/* Encode r as an entry signed by who the way entry.c signs (domain ||
 * network id || the fields before the signature). */
static int s_raw(fx_t *fx, uint32_t who, const s_raw_t *r, ns_buf_t *out)
{
    static const ns_hash_t zero;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, r->n_fields);
    size_t start = out->len;
    msgpack_pack_uint64(&pk, r->version);
    ns_mp_bin(&pk, fx->acct[who].pk, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, r->seq);
    ns_mp_bin(&pk, r->prev ? r->prev : zero, NS_HASH_BYTES);
    msgpack_pack_uint64(&pk, r->type);
    ns_mp_bin(&pk, r->body, r->body_len);
    ns_mp_bin(&pk, r->refs, r->refs_len);
    msgpack_pack_uint64(&pk, r->ts);
    if (w.err != NS_OK)
        return w.err;
    size_t dl = sizeof(NS_ENTRY_DOMAIN) - 1, part = out->len - start;
    uint8_t *m = malloc(dl + NS_HASH_BYTES + part);
    if (!m)
        return NS_ERR_NOMEM;
    memcpy(m, NS_ENTRY_DOMAIN, dl);
    memcpy(m + dl, fx->genesis.network_id, NS_HASH_BYTES);
    memcpy(m + dl + NS_HASH_BYTES, out->data + start, part);
    uint8_t sig[NS_SIG_BYTES];
    ns_identity_sign(fx->acct[who].id, m, dl + NS_HASH_BYTES + part, sig);
    free(m);
    ns_mp_bin(&pk, sig, sizeof sig);
    return w.err;
}

/* A well-formed raw entry for who's next seq. */
static s_raw_t s_raw_next(fx_t *fx, uint32_t who, uint64_t type,
                          const uint8_t *body, size_t body_len)
{
    s_raw_t r;
    memset(&r, 0, sizeof r);
    r.n_fields = 9;
    r.version = NS_ENTRY_VERSION;
    r.seq = fx->acct[who].seq + 1;
    r.prev = fx->acct[who].seq ? fx->acct[who].head : NULL;
    r.type = type;
    r.body = body;
    r.body_len = body_len;
    r.ts = fx_tick(fx);
    return r;
}

/* ---- slash verifiers ------------------------------------------------------
 */

typedef struct {
    int answer; /* what the verifier says */
    int calls;
    ns_hash_t job_id;
    uint8_t provider[NS_ID_BYTES];
    ns_hash_t root;
    uint64_t n_items;
    uint8_t proof[64];
    size_t proof_len;
    ns_hash_t missing; /* answer NS_ERR_MISSING: the data it waits for */
} s_verifier_t;

static int s_verify(void *user, const ns_ledger_job_t *job,
                    const uint8_t *provider, const ns_hash_t root,
                    uint64_t n_items, const uint8_t *proof, size_t len,
                    uint8_t missing[NS_HASH_BYTES])
{
    s_verifier_t *v = user;
    v->calls++;
    memcpy(v->job_id, job->job_id, NS_HASH_BYTES);
    memcpy(v->provider, provider, NS_ID_BYTES);
    memcpy(v->root, root, NS_HASH_BYTES);
    v->n_items = n_items;
    v->proof_len = len;
    memcpy(v->proof, proof, len < sizeof v->proof ? len : sizeof v->proof);
    if (v->answer == NS_ERR_MISSING)
        memcpy(missing, v->missing, NS_HASH_BYTES);
    return v->answer;
}

/* ==== plain balances =======================================================
 */

TEST(transfer)
{
    fx_t fx;
    if (!s_init(&fx, "transfer", 3))
        return;
    ns_entry_body_t b = fx_transfer(fx.acct[1].pk, 0);
    REFUSED(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_transfer(fx.acct[0].pk, 10);
    REFUSED(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_transfer(fx.acct[1].pk, S_CREDITS + 1);
    REFUSED(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_transfer(fx.acct[1].pk, UINT64_MAX);
    REFUSED(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_ERR_FUNDS);

    ns_hash_t t;
    b = fx_transfer(fx.acct[1].pk, S_CREDITS); /* all of it */
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t);
    CHECK_EQ_INT(s_acct(&fx, 0).free, 0);
    CHECK_EQ_INT(s_acct(&fx, 0).seq, 1);
    CHECK_EQ_INT(s_acct(&fx, 1).free, S_CREDITS); /* not taken in yet */
    CHECK_EQ_INT(s_stats(&fx).pending_credit, S_CREDITS);
    CHECK_EQ_INT(s_stats(&fx).entries, 1);
    uint64_t amount = 0;
    bool claimed = true;
    CHECK_RC(ns_ledger_credit(fx.l, t, fx.acct[1].pk, &amount, &claimed),
             NS_OK);
    CHECK_EQ_INT(amount, S_CREDITS);
    CHECK(!claimed);
    CHECK_RC(ns_ledger_credit(fx.l, t, fx.acct[2].pk, &amount, &claimed),
             NS_ERR_NOTFOUND);
    uint8_t ids[4 * NS_HASH_BYTES];
    CHECK_EQ_INT(ns_ledger_unclaimed(fx.l, fx.acct[1].pk, ids, 4), 1);
    CHECK_MEM(ids, t, NS_HASH_BYTES);
    CHECK_EQ_INT(ns_ledger_unclaimed(fx.l, fx.acct[2].pk, ids, 4), 0);
    b = fx_transfer(fx.acct[1].pk, 1); /* nothing left */
    REFUSED(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_ERR_FUNDS);

    /* a transfer to an id outside the genesis makes a new account */
    uint8_t stranger[NS_ID_BYTES];
    memset(stranger, 0x5a, sizeof stranger);
    b = fx_transfer(stranger, 5);
    PUT(&fx, 2, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(stake_unstake)
{
    fx_t fx;
    if (!s_init(&fx, "stake", 2))
        return;
    ns_entry_body_t b = fx_amount(0);
    REFUSED(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_amount(S_CREDITS + 1);
    REFUSED(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(1);
    REFUSED(&fx, 0, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(600);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, 0).free, S_CREDITS - 600);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 600);
    b = fx_amount(0);
    REFUSED(&fx, 0, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_amount(601);
    REFUSED(&fx, 0, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(S_CREDITS - 600 + 1); /* free after the stake, plus one */
    REFUSED(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(100);
    PUT(&fx, 0, NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, 0).free, S_CREDITS - 500);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 500);
    b = fx_amount(500);
    PUT(&fx, 0, NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 0);
    CHECK_EQ_INT(s_acct(&fx, 0).free, S_CREDITS);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(job_escrow)
{
    fx_t fx;
    if (!s_init(&fx, "job", 2))
        return;
    ns_hash_t j;
    const uint8_t *r = fx.acct[0].pk;
    uint64_t far = FX_T0_MS + 1000000;
    ns_entry_body_t b = fx_job(r, 1, 0, 0, 0, far, j);
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 1, 100, 101, 0, far, j); /* max price over the escrow */
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 1, 100, 50, 10, fx.now + 10, j); /* deadline == its ts */
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 1, 100, 50, 10, far, j); /* a job id not its own */
    b.job_id[7] ^= 1;
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 1, 100, 50, 10, far, j);
    b.nonce[0] ^= 1;
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(fx.acct[1].pk, 1, 100, 50, 10, far, j); /* 1's job id */
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 1, S_CREDITS + 1, 50, 10, far, j);
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_FUNDS);
    ns_ledger_job_t job;
    CHECK_RC(ns_ledger_job(fx.l, j, &job), NS_ERR_NOTFOUND);

    b = fx_job(r, 1, S_CREDITS, 50, 10, far, j);
    PUT(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NULL);
    ns_account_t a = s_acct(&fx, 0);
    CHECK_EQ_INT(a.free, 0);
    CHECK_EQ_INT(a.locked_escrow, S_CREDITS);
    CHECK_EQ_INT(a.jobs_posted, 1);
    job = s_job(&fx, j);
    CHECK_EQ_INT(job.state, NS_JOB_OPEN);
    CHECK_MEM(job.requester, fx.acct[0].pk, NS_ID_BYTES);
    CHECK_MEM(job.desc_id, b.desc_id, NS_HASH_BYTES);
    CHECK_EQ_INT(job.escrow, S_CREDITS);
    CHECK_EQ_INT(job.max_price, 50);
    CHECK_EQ_INT(job.collateral, 10);
    CHECK_EQ_INT(job.deadline_ms, far);
    CHECK_EQ_INT(job.round, 0);
    /* the same job again (same descriptor and nonce) */
    b = fx_job(r, 1, 1, 1, 1, far, j);
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* another account cannot post under that id */
    b.escrow = 10;
    REFUSED(&fx, 1, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_job(r, 2, 1, 1, 1, far, j); /* nothing left to lock */
    REFUSED(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, NS_ERR_FUNDS);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* ==== the chain =============================================================
 */

TEST(bad_signature)
{
    fx_t fx;
    if (!s_init(&fx, "sig", 2))
        return;
    ns_buf_t e;
    ns_hash_t id;
    uint64_t ts;
    ns_buf_init(&e);
    ns_entry_body_t b = fx_amount(77);
    if (!CHECK_RC(fx_make(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, &e, id, &ts),
                  NS_OK))
        return;
    /* the signature's last byte, the amount inside the body, the author */
    size_t spots[3] = {e.len - 1, 0, 5};
    for (size_t i = 0; i < e.len; i++)
        if (e.data[i] == 77) /* positive fixint amount, inside the body */
            spots[1] = i;
    CHECK(spots[1] != 0);
    for (int k = 0; k < 3; k++) {
        e.data[spots[k]] ^= 0x01;
        CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_SIG, "flipped"));
        e.data[spots[k]] ^= 0x01;
    }
    /* signed for another network */
    ns_buf_t other;
    ns_buf_init(&other);
    ns_hash_t net, oid;
    memcpy(net, fx.genesis.network_id, NS_HASH_BYTES);
    net[0] ^= 1;
    ns_buf_t body;
    ns_buf_init(&body);
    CHECK_RC(ns_entry_body_encode(NS_ENTRY_STAKE, &b, &body), NS_OK);
    static const ns_hash_t zero;
    CHECK_RC(ns_entry_encode(fx.acct[0].id, net, 1, zero, NS_ENTRY_STAKE,
                             body.data, body.len, NULL, 0, ts, &other, oid),
             NS_OK);
    CHECK(s_refused_bytes(&fx, other.data, other.len, NS_ERR_SIG,
                          "other network"));
    /* and the untouched entry is fine */
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 77);
    ns_buf_release(&body);
    ns_buf_release(&other);
    ns_buf_release(&e);
    fx_free(&fx);
}

TEST(wrong_prev)
{
    fx_t fx;
    if (!s_init(&fx, "prev", 2))
        return;
    ns_entry_body_t b = fx_amount(1);
    ns_buf_t e;
    ns_hash_t id, junk;
    ns_buf_init(&e);
    memset(junk, 0xab, sizeof junk);
    /* seq 1 must have a zero prev */
    CHECK_RC(fx_make_raw(&fx, 0, 1, junk, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &e, id),
             NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_PREV, "seq 1 prev"));
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    /* seq 2 must name seq 1 */
    CHECK_RC(fx_make_raw(&fx, 0, 2, junk, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &e, id),
             NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_PREV, "seq 2 prev"));
    static const ns_hash_t zero;
    CHECK_RC(fx_make_raw(&fx, 0, 2, zero, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &e, id),
             NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_PREV, "zero prev"));
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, 0).seq, 2);
    ns_buf_release(&e);
    fx_free(&fx);
}

TEST(seq_gap_buffered)
{
    fx_t fx;
    if (!s_init(&fx, "gap", 2))
        return;
    ns_buf_t e[3];
    ns_hash_t id[3];
    uint64_t ts[3];
    ns_hash_t prev;
    memset(prev, 0, sizeof prev);
    for (int i = 0; i < 3; i++) {
        ns_entry_body_t b = fx_amount((uint64_t)(10 + i));
        ns_buf_init(&e[i]);
        ts[i] = fx_tick(&fx);
        CHECK_RC(fx_make_raw(&fx, 0, (uint64_t)i + 1, prev, NS_ENTRY_STAKE, &b,
                             NULL, 0, ts[i], &e[i], id[i]),
                 NS_OK);
        memcpy(prev, id[i], NS_HASH_BYTES);
    }
    fx_snap_of(fx.l, &s_before);
    uint8_t who[NS_ID_BYTES] = {0};
    uint64_t seq = 99;
    CHECK_RC(ns_ledger_ingest(fx.l, e[2].data, e[2].len, who, &seq),
             NS_ERR_GAP);
    CHECK_MEM(who, fx.acct[0].pk, NS_ID_BYTES);
    CHECK_EQ_INT(seq, 1);
    CHECK_EQ_INT(s_stats(&fx).buffered, 1);
    CHECK(s_unchanged(&fx, "gap"));
    /* the same entry again is not buffered twice */
    CHECK_RC(ns_ledger_ingest(fx.l, e[2].data, e[2].len, NULL, NULL),
             NS_ERR_GAP);
    CHECK_EQ_INT(s_stats(&fx).buffered, 1);
    CHECK_RC(ns_ledger_ingest(fx.l, e[1].data, e[1].len, who, &seq),
             NS_ERR_GAP);
    CHECK_EQ_INT(seq, 1);
    CHECK_EQ_INT(s_stats(&fx).buffered, 2);
    CHECK(s_unchanged(&fx, "second gap"));
    /* the gap arrives: everything waiting is applied, in order */
    CHECK_RC(ns_ledger_ingest(fx.l, e[0].data, e[0].len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_stats(&fx).buffered, 0);
    CHECK_EQ_INT(s_stats(&fx).entries, 3);
    ns_account_t a = s_acct(&fx, 0);
    CHECK_EQ_INT(a.seq, 3);
    CHECK_MEM(a.head, id[2], NS_HASH_BYTES);
    CHECK_EQ_INT(a.staked, 10 + 11 + 12);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    CONSERVED(&fx);
    for (int i = 0; i < 3; i++)
        ns_buf_release(&e[i]);
    fx_free(&fx);
}

/* A chain twice as long as the old 4096-entry buffer, delivered
 * backwards: every entry waits (well under one author's share of
 * NS_LEDGER_BUFFER_BYTES), and the first one sets off one cascade that
 * applies them all, in a loop rather than a recursion as deep as the
 * chain. */
TEST(gap_cascade_long_chain)
{
    enum { N = 2 * 4096 + 10 };
    fx_t fx;
    if (!s_init(&fx, "cascade", 2))
        return;
    ns_buf_t *e = calloc(N, sizeof *e);
    if (!CHECK(e != NULL))
        return;
    ns_hash_t prev;
    memset(prev, 0, sizeof prev);
    uint64_t bytes = 0;
    for (int i = 0; i < N; i++) {
        ns_entry_body_t b = fx_amount(1);
        ns_hash_t id;
        ns_buf_init(&e[i]);
        if (fx_make_raw(&fx, 0, (uint64_t)i + 1, prev, NS_ENTRY_STAKE, &b, NULL,
                        0, fx_tick(&fx), &e[i], id) != NS_OK)
            break;
        memcpy(prev, id, NS_HASH_BYTES);
        bytes += e[i].len;
    }
    CHECK(bytes + (uint64_t)N * 192 < NS_LEDGER_BUFFER_AUTHOR_BYTES);
    int gaps = 0;
    for (int i = N - 1; i >= 1; i--)
        gaps += ns_ledger_ingest(fx.l, e[i].data, e[i].len, NULL, NULL) ==
                NS_ERR_GAP;
    CHECK_EQ_INT(gaps, N - 1);
    CHECK_EQ_INT(s_stats(&fx).buffered, N - 1);
    CHECK_EQ_INT(s_stats(&fx).buffer_evicted, 0);
    CHECK_EQ_INT(s_stats(&fx).entries, 0);
    /* a copy of one that waits is not kept twice */
    CHECK_RC(ns_ledger_ingest(fx.l, e[5].data, e[5].len, NULL, NULL),
             NS_ERR_GAP);
    CHECK_EQ_INT(s_stats(&fx).buffered, N - 1);
    CHECK_RC(ns_ledger_ingest(fx.l, e[0].data, e[0].len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_stats(&fx).buffered, 0);
    CHECK_EQ_INT(s_stats(&fx).buffered_bytes, 0);
    CHECK_EQ_INT(s_acct(&fx, 0).seq, N);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, N);
    CHECK_EQ_INT(s_stats(&fx).entries, N);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    CONSERVED(&fx);
    for (int i = 0; i < N; i++)
        ns_buf_release(&e[i]);
    free(e);
    fx_free(&fx);
}

TEST(timestamp_backwards)
{
    fx_t fx;
    if (!s_init(&fx, "stale", 2))
        return;
    ns_entry_body_t b = fx_amount(1);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    uint64_t t1 = fx.acct[0].ts;
    ns_buf_t e;
    ns_hash_t id;
    ns_buf_init(&e);
    CHECK_RC(fx_make_raw(&fx, 0, 2, fx.acct[0].head, NS_ENTRY_STAKE, &b, NULL,
                         0, t1 - 1, &e, id),
             NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_STALE, "backwards"));
    CHECK_RC(fx_make_raw(&fx, 0, 2, fx.acct[0].head, NS_ENTRY_STAKE, &b, NULL,
                         0, t1, &e, id),
             NS_OK); /* the same millisecond is fine */
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_acct(&fx, 0).seq, 2);
    CHECK_EQ_INT(s_acct(&fx, 0).head_timestamp_ms, t1);
    ns_buf_release(&e);
    fx_free(&fx);
}

TEST(duplicate)
{
    fx_t fx;
    if (!s_init(&fx, "dup", 2))
        return;
    ns_buf_t first, second;
    ns_buf_init(&first);
    ns_buf_init(&second);
    ns_entry_body_t b = fx_amount(5);
    CHECK_RC(fx_put_to(&fx, fx.l, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL, &first),
             NS_OK);
    CHECK_RC(
        fx_put_to(&fx, fx.l, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL, &second),
        NS_OK);
    CHECK(s_refused_bytes(&fx, second.data, second.len, NS_ERR_DUPLICATE,
                          "head again"));
    CHECK(s_refused_bytes(&fx, first.data, first.len, NS_ERR_DUPLICATE,
                          "older entry again"));
    CHECK_EQ_INT(s_stats(&fx).entries, 2);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 10);
    CHECK_EQ_INT(s_stats(&fx).forks, 0);
    ns_buf_release(&first);
    ns_buf_release(&second);
    fx_free(&fx);
}

/* ==== decoding limits ========================================================
 */

TEST(unknown_type)
{
    fx_t fx;
    if (!s_init(&fx, "type", 2))
        return;
    ns_entry_body_t b = fx_amount(5);
    ns_buf_t body, e;
    ns_buf_init(&body);
    ns_buf_init(&e);
    CHECK_RC(ns_entry_body_encode(NS_ENTRY_STAKE, &b, &body), NS_OK);
    const uint64_t types[] = {0,         NS_ENTRY_TYPE_MAX + 1, 200, 255, 256,
                              UINT64_MAX};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        s_raw_t r = s_raw_next(&fx, 0, types[i], body.data, body.len);
        CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
        CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_MSGTYPE,
                              "unknown type"));
    }
    /* encoding refuses a body for a type it does not know */
    ns_buf_t none;
    ns_buf_init(&none);
    CHECK_RC(ns_entry_body_encode(NS_ENTRY_TYPE_MAX + 1, &b, &none),
             NS_ERR_MSGTYPE);
    ns_buf_release(&none);
    /* the same raw builder with a known type is accepted (so the refusals
     * above are about the type, not the builder) */
    s_raw_t r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, body.data, body.len);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 5);
    ns_entry_t de;
    CHECK_RC(ns_entry_decode(e.data, e.len, fx.genesis.network_id, &de), NS_OK);
    fx_advance(&fx, 0, de.id, r.ts);
    /* an unknown entry version */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, body.data, body.len);
    r.version = NS_ENTRY_VERSION + 1;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_VERSION, "version"));
    ns_buf_release(&body);
    ns_buf_release(&e);
    fx_free(&fx);
}

TEST(malformed_bodies)
{
    fx_t fx;
    if (!s_init(&fx, "body", 2))
        return;
    ns_buf_t e;
    ns_buf_init(&e);
    /* a STAKE body [amount, extra] */
    const uint8_t two[] = {0x92, 0x05, 0x05};
    s_raw_t r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, two, sizeof two);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TYPE, "two fields"));
    /* trailing byte after a good body */
    const uint8_t trail[] = {0x91, 0x05, 0x00};
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, trail, sizeof trail);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TRAILING, "trailing"));
    /* a negative amount */
    const uint8_t neg[] = {0x91, 0xff};
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, neg, sizeof neg);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TYPE, "negative"));
    /* an empty body */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, NULL, 0);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TRUNCATED, "empty"));
    /* refs whose length is not a multiple of 32 */
    const uint8_t ok[] = {0x91, 0x05};
    uint8_t refs[40] = {0};
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    r.refs = refs;
    r.refs_len = 33;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TYPE, "refs of 33"));
    /* seq 0 */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    r.seq = 0;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TYPE, "seq 0"));
    /* eight and ten fields */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    r.n_fields = 10;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TYPE, "ten fields"));
    /* truncated anywhere */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    int bad = 0;
    for (size_t n = 0; n < e.len; n++) {
        ns_entry_t de;
        int rc = ns_entry_decode(e.data, n, fx.genesis.network_id, &de);
        bad += rc == NS_OK;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len - 1, NULL, NULL),
             NS_ERR_TRUNCATED);
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len, NULL, NULL), NS_OK);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 5);
    ns_buf_release(&e);
    fx_free(&fx);
}

TEST(oversized)
{
    fx_t fx;
    if (!s_init(&fx, "big", 2))
        return;
    ns_buf_t e;
    ns_hash_t id;
    static const ns_hash_t zero;
    ns_buf_init(&e);
    /* a body one byte over the cap */
    size_t blen = NS_MAX_ENTRY_BODY + 1;
    uint8_t *big = calloc(1, NS_MAX_ENTRY_BYTES + 1);
    if (!CHECK(big != NULL))
        return;
    CHECK_RC(ns_entry_encode(fx.acct[0].id, fx.genesis.network_id, 1, zero,
                             NS_ENTRY_STAKE, big, blen, NULL, 0, 1, &e, id),
             NS_ERR_TOOBIG);
    s_raw_t r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, big, blen);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TOOBIG, "big body"));
    /* an entry over NS_MAX_ENTRY_BYTES as a whole */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, big, NS_MAX_ENTRY_BYTES);
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TOOBIG, "big entry"));
    /* too many refs */
    uint8_t refs[(NS_MAX_REFS + 1) * NS_HASH_BYTES];
    for (size_t i = 0; i < sizeof refs; i++)
        refs[i] = (uint8_t)i;
    const uint8_t ok[] = {0x91, 0x05};
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    r.refs = refs;
    r.refs_len = sizeof refs;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    CHECK(s_refused_bytes(&fx, e.data, e.len, NS_ERR_TOOBIG, "33 refs"));
    ns_entry_body_t b = fx_amount(1);
    ns_hash_t eid;
    uint64_t ts;
    CHECK_RC(fx_make(&fx, 0, NS_ENTRY_STAKE, &b, refs, NS_MAX_REFS + 1, &e, eid,
                     &ts),
             NS_ERR_TOOBIG);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[0].id, NS_ENTRY_STAKE, &b, refs,
                              NS_MAX_REFS + 1, &e, eid),
             NS_ERR_TOOBIG);
    /* a SLASH proof over NS_MAX_PROOF does not encode */
    ns_entry_body_t sb;
    memset(&sb, 0, sizeof sb);
    sb.proof = big;
    sb.proof_len = NS_MAX_PROOF + 1;
    CHECK_RC(ns_entry_body_encode(NS_ENTRY_SLASH, &sb, &e), NS_ERR_TOOBIG);
    /* 32 refs (the cap) decode; here they name nothing known */
    r = s_raw_next(&fx, 0, NS_ENTRY_STAKE, ok, sizeof ok);
    r.refs = refs;
    r.refs_len = NS_MAX_REFS * NS_HASH_BYTES;
    CHECK_RC(s_raw(&fx, 0, &r, &e), NS_OK);
    ns_entry_t de;
    CHECK_RC(ns_entry_decode(e.data, e.len, fx.genesis.network_id, &de), NS_OK);
    CHECK_EQ_INT(de.n_refs, NS_MAX_REFS);
    CHECK_EQ_INT(s_stats(&fx).entries, 0);
    CONSERVED(&fx);
    free(big);
    ns_buf_release(&e);
    fx_free(&fx);
}

/* ==== credits ===============================================================
 */

TEST(credit_claims)
{
    fx_t fx;
    if (!s_init(&fx, "claims", 3))
        return;
    ns_hash_t t, s;
    ns_entry_body_t b = fx_transfer(fx.acct[1].pk, 300);
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t);
    uint8_t twice[2 * NS_HASH_BYTES];
    memcpy(twice, t, NS_HASH_BYTES);
    memcpy(twice + NS_HASH_BYTES, t, NS_HASH_BYTES);
    b = fx_amount(1);
    /* the same credit twice in one entry */
    REFUSED(&fx, 1, NS_ENTRY_STAKE, &b, twice, 2, NS_ERR_CLAIMED);
    /* a ref holding no credit for this author */
    REFUSED(&fx, 2, NS_ENTRY_STAKE, &b, t, 1, NS_ERR_NOCREDIT);
    PUT(&fx, 2, NS_ENTRY_STAKE, &b, NULL, 0, s);
    REFUSED(&fx, 1, NS_ENTRY_STAKE, &b, s, 1, NS_ERR_NOCREDIT);
    REFUSED(&fx, 2, NS_ENTRY_STAKE, &b, s, 1, NS_ERR_NOCREDIT);
    /* taken in once */
    PUT(&fx, 1, NS_ENTRY_STAKE, &b, t, 1, NULL);
    ns_account_t a = s_acct(&fx, 1);
    CHECK_EQ_INT(a.free, S_CREDITS + 300 - 1);
    CHECK_EQ_INT(a.staked, 1);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 0);
    uint64_t amount = 0;
    bool claimed = false;
    CHECK_RC(ns_ledger_credit(fx.l, t, fx.acct[1].pk, &amount, &claimed),
             NS_OK);
    CHECK(claimed);
    uint8_t ids[NS_HASH_BYTES];
    CHECK_EQ_INT(ns_ledger_unclaimed(fx.l, fx.acct[1].pk, ids, 1), 0);
    /* and never again */
    REFUSED(&fx, 1, NS_ENTRY_STAKE, &b, t, 1, NS_ERR_CLAIMED);
    /* a STAKE of 0 only takes credits in */
    ns_hash_t t3;
    b = fx_transfer(fx.acct[2].pk, 60);
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t3);
    uint64_t free2 = s_acct(&fx, 2).free, staked2 = s_acct(&fx, 2).staked;
    b = fx_amount(0);
    REFUSED(&fx, 2, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_INVAL);
    PUT(&fx, 2, NS_ENTRY_STAKE, &b, t3, 1, NULL);
    CHECK_EQ_INT(s_acct(&fx, 2).free, free2 + 60);
    CHECK_EQ_INT(s_acct(&fx, 2).staked, staked2);
    /* a claim can pay for the entry that makes it: free 0 + credit */
    ns_hash_t t2;
    b = fx_transfer(fx.acct[1].pk, 50);
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t2);
    uint64_t all = s_acct(&fx, 1).free;
    b = fx_amount(all + 51);
    REFUSED(&fx, 1, NS_ENTRY_STAKE, &b, t2, 1, NS_ERR_FUNDS);
    b = fx_amount(all + 50);
    PUT(&fx, 1, NS_ENTRY_STAKE, &b, t2, 1, NULL);
    CHECK_EQ_INT(s_acct(&fx, 1).free, 0);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(missing_ref_buffered)
{
    fx_t fx;
    if (!s_init(&fx, "missing", 3))
        return;
    /* account 0's transfer to 1, not yet delivered */
    ns_buf_t t, c;
    ns_hash_t tid, cid;
    uint64_t tts, cts;
    ns_buf_init(&t);
    ns_buf_init(&c);
    ns_entry_body_t b = fx_transfer(fx.acct[1].pk, 400);
    CHECK_RC(fx_make(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, &t, tid, &tts),
             NS_OK);
    b = fx_amount(S_CREDITS + 400); /* only possible with the credit */
    CHECK_RC(fx_make(&fx, 1, NS_ENTRY_STAKE, &b, tid, 1, &c, cid, &cts), NS_OK);
    fx_snap_of(fx.l, &s_before);
    CHECK_RC(ns_ledger_ingest(fx.l, c.data, c.len, NULL, NULL), NS_ERR_MISSING);
    CHECK_EQ_INT(s_stats(&fx).buffered, 1);
    CHECK(s_unchanged(&fx, "missing"));
    /* the transfer arrives; the claim that waited for it is applied */
    CHECK_RC(ns_ledger_ingest(fx.l, t.data, t.len, NULL, NULL), NS_OK);
    fx_advance(&fx, 0, tid, tts);
    fx_advance(&fx, 1, cid, cts);
    CHECK_EQ_INT(s_stats(&fx).buffered, 0);
    ns_account_t a = s_acct(&fx, 1);
    CHECK_EQ_INT(a.seq, 1);
    CHECK_EQ_INT(a.staked, S_CREDITS + 400);
    CHECK_EQ_INT(a.free, 0);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 0);
    CHECK_EQ_INT(s_stats(&fx).entries, 2);
    /* an ACCEPT of an award nobody has seen waits too */
    ns_hash_t award;
    memset(award, 0x77, sizeof award);
    ns_hash_t j;
    fx_job_id(j, 9);
    ns_entry_body_t ab = fx_ref(j, award);
    fx_snap_of(fx.l, &s_before);
    CHECK_RC(fx_put(&fx, 2, NS_ENTRY_ACCEPT, &ab, NULL, 0, NULL),
             NS_ERR_MISSING);
    CHECK_EQ_INT(s_stats(&fx).buffered, 1);
    CHECK(s_unchanged(&fx, "accept of an unknown award"));
    CONSERVED(&fx);
    ns_buf_release(&t);
    ns_buf_release(&c);
    fx_free(&fx);
}

/* ==== the job flow ===========================================================
 */

enum { R = 0, P = 1, Q = 2, X = 3 }; /* requester, providers, bystander */

/* A job of R: escrow 500, max price 300, collateral 200. */
static void s_post(fx_t *fx, ns_hash_t j, uint32_t n, uint64_t deadline_ms)
{
    ns_entry_body_t b =
        fx_job(fx->acct[R].pk, n, 500, 300, 200, deadline_ms, j);
    PUT(fx, R, NS_ENTRY_JOB, &b, NULL, 0, NULL);
}

TEST(award_rules)
{
    fx_t fx;
    if (!s_init(&fx, "award", 4))
        return;
    ns_hash_t j, other, award;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    fx_job_id(other, 2);
    /* forged: P signed 250, the award says 200 */
    ns_entry_body_t b = fx_award(&fx, j, P, 250);
    b.bid.price = 200;
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_SIG);
    /* forged: Q signed, the bid names P */
    b = fx_award(&fx, j, Q, 250);
    memcpy(b.bid.provider, fx.acct[P].pk, NS_ID_BYTES);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_SIG);
    /* a bid signed on another network */
    b = fx_award(&fx, j, P, 250);
    ns_hash_t net;
    memcpy(net, fx.genesis.network_id, NS_HASH_BYTES);
    net[5] ^= 0x10;
    ns_bid_sign(&b.bid, fx.acct[P].id, net);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_SIG);
    CHECK_RC(ns_bid_verify(&b.bid, net), NS_OK);
    /* price over max_price (validly signed) */
    b = fx_award(&fx, j, P, 301);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_INVAL);
    /* the bid is for another job */
    b = fx_award(&fx, other, P, 250);
    memcpy(b.job_id, j, NS_HASH_BYTES);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_INVAL);
    /* the requester's own bid */
    b = fx_award(&fx, j, R, 250);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_INVAL);
    /* a job that does not exist */
    b = fx_award(&fx, other, P, 250);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* another account awards R's job */
    b = fx_award(&fx, j, P, 250);
    REFUSED(&fx, X, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* the valid one, at exactly max_price */
    b = fx_award(&fx, j, P, 300);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    ns_ledger_job_t job = s_job(&fx, j);
    CHECK_EQ_INT(job.state, NS_JOB_AWARDED);
    CHECK_EQ_INT(job.round, 1);
    CHECK_MEM(job.award_id, award, NS_HASH_BYTES);
    CHECK_MEM(job.provider, fx.acct[P].pk, NS_ID_BYTES);
    CHECK_EQ_INT(job.price, 300);
    /* no second award while one is live */
    b = fx_award(&fx, j, Q, 100);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* awards move nothing */
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 500);
    CHECK_EQ_INT(s_acct(&fx, R).free, S_CREDITS - 500);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(accept_rules)
{
    fx_t fx;
    if (!s_init(&fx, "accept", 4))
        return;
    ns_hash_t j, j2, award, award2, accept, stake;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    s_post(&fx, j2, 2, FX_T0_MS + 1000000);
    ns_entry_body_t b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    b = fx_award(&fx, j2, Q, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award2);
    /* P has no stake yet: the collateral cannot be locked */
    b = fx_ref(j, award);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(199);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    b = fx_ref(j, award);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(801);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, stake);
    /* not the bid's provider */
    b = fx_amount(1000);
    PUT(&fx, Q, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    b = fx_ref(j, award);
    REFUSED(&fx, Q, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_INVAL);
    /* names something that is not an award, or another job */
    b = fx_ref(j, stake);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_ref(j2, award);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_INVAL);
    /* accepted: collateral moves from stake to locked */
    b = fx_ref(j, award);
    PUT(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept);
    ns_account_t a = s_acct(&fx, P);
    CHECK_EQ_INT(a.staked, 800);
    CHECK_EQ_INT(a.locked_collateral, 200);
    CHECK_EQ_INT(a.free, S_CREDITS - 1000);
    CHECK_MEM(s_job(&fx, j).accept_id, accept, NS_HASH_BYTES);
    /* a second ACCEPT of the same award */
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* locked collateral cannot be unstaked */
    b = fx_amount(801);
    REFUSED(&fx, P, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(800);
    PUT(&fx, P, NS_ENTRY_UNSTAKE, &b, NULL, 0, NULL);
    a = s_acct(&fx, P);
    CHECK_EQ_INT(a.staked, 0);
    CHECK_EQ_INT(a.locked_collateral, 200);
    b = fx_amount(1);
    REFUSED(&fx, P, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_ERR_FUNDS);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* JOB, AWARD, ACCEPT, RESULT for R's job n with provider P at price.
 * Leaves the ids in the arguments. */
static bool s_run_to_result(fx_t *fx, uint32_t n, uint32_t prov, uint64_t price,
                            ns_hash_t j, ns_hash_t award, ns_hash_t accept,
                            ns_hash_t result)
{
    s_post(fx, j, n, fx->now + 1000000);
    ns_entry_body_t b = fx_award(fx, j, prov, price);
    bool ok = fx_put(fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award) == NS_OK;
    b = fx_ref(j, award);
    ok = ok && fx_put(fx, prov, NS_ENTRY_ACCEPT, &b, NULL, 0, accept) == NS_OK;
    b = fx_result(j, accept, 64);
    ok = ok && fx_put(fx, prov, NS_ENTRY_RESULT, &b, NULL, 0, result) == NS_OK;
    return ok;
}

TEST(settle_flow)
{
    fx_t fx;
    if (!s_init(&fx, "settle", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, accept, result, settle, stake;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    b = fx_ref(j, award);
    PUT(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept);
    /* SETTLE before any RESULT: nothing to settle */
    b = fx_ref(j, accept);
    REFUSED(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_INVAL);
    /* RESULT rules: zero items, not an accept, someone else's accept */
    b = fx_result(j, accept, 0);
    REFUSED(&fx, P, NS_ENTRY_RESULT, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_result(j, award, 64);
    REFUSED(&fx, P, NS_ENTRY_RESULT, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_result(j, accept, 64);
    REFUSED(&fx, Q, NS_ENTRY_RESULT, &b, NULL, 0, NS_ERR_INVAL);
    PUT(&fx, P, NS_ENTRY_RESULT, &b, NULL, 0, result);
    ns_ledger_job_t job = s_job(&fx, j);
    CHECK_MEM(job.result_id, result, NS_HASH_BYTES);
    CHECK_EQ_INT(job.n_items, 64);
    CHECK_MEM(job.root, b.root, NS_HASH_BYTES);
    REFUSED(&fx, P, NS_ENTRY_RESULT, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* only the requester settles */
    b = fx_ref(j, result);
    REFUSED(&fx, X, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_JOBSTATE);
    REFUSED(&fx, P, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_JOBSTATE);
    uint64_t burned = s_stats(&fx).burned;
    PUT(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, settle);
    ns_account_t r = s_acct(&fx, R);
    CHECK_EQ_INT(r.locked_escrow, 0);
    CHECK_EQ_INT(r.free, S_CREDITS - 250); /* refunded escrow - price */
    CHECK_EQ_INT(r.jobs_settled_as_requester, 1);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.jobs_settled, 1);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000); /* not paid until it claims */
    CHECK_EQ_INT(p.locked_collateral, 200);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 250);
    CHECK_EQ_INT(s_stats(&fx).burned, burned);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_SETTLED);
    uint64_t amount = 0;
    bool claimed = true;
    CHECK_RC(ns_ledger_credit(fx.l, settle, fx.acct[P].pk, &amount, &claimed),
             NS_OK);
    CHECK_EQ_INT(amount, 250);
    CHECK(!claimed);
    /* settled once */
    REFUSED(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_JOBSTATE);
    b = fx_cancel(j, NULL, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* the provider takes the payment in: paid, collateral back to stake */
    b = fx_amount(1);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, settle, 1, stake);
    p = s_acct(&fx, P);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000 + 250 - 1);
    CHECK_EQ_INT(p.staked, 1000 + 1);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 0);
    REFUSED(&fx, P, NS_ENTRY_STAKE, &b, settle, 1, NS_ERR_CLAIMED);
    /* a second job through s_run_to_result settles the same way */
    ns_hash_t j2, aw2, ac2, re2;
    CHECK(s_run_to_result(&fx, 2, P, 100, j2, aw2, ac2, re2));
    b = fx_ref(j2, result); /* the RESULT of another job */
    REFUSED(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_INVAL);
    b = fx_ref(j2, re2);
    PUT(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, R).free, S_CREDITS - 250 - 100);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* A SLASH whose check needs data that is not here yet (an input by
 * hash) waits in the buffer, changes nothing, and applies once the data
 * arrives; other data does not wake it. */
TEST(slash_waits_for_its_inputs)
{
    fx_t fx;
    if (!s_init(&fx, "slashwait", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, accept, result;
    if (!CHECK(s_run_to_result(&fx, 1, P, 250, j, award, accept, result)))
        goto out;
    s_verifier_t v;
    memset(&v, 0, sizeof v);
    v.answer = NS_ERR_MISSING;
    memset(v.missing, 0x42, NS_HASH_BYTES);
    ns_ledger_set_verifier(fx.l, s_verify, &v);
    const uint8_t proof[] = "unit 3 by reference";
    b = fx_ref(j, result);
    b.proof = proof;
    b.proof_len = sizeof proof;
    ns_buf_t e;
    ns_buf_init(&e);
    ns_hash_t id;
    uint64_t ts;
    CHECK_RC(fx_make(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, &e, id, &ts), NS_OK);
    CHECK_RC(ns_ledger_ingest(fx.l, e.data, e.len, NULL, NULL), NS_ERR_MISSING);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_AWARDED);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 200);
    /* other data: still waiting */
    v.answer = NS_OK;
    ns_hash_t other;
    memset(other, 0x43, NS_HASH_BYTES);
    ns_ledger_data_arrived(fx.l, other);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_AWARDED);
    /* its data: applied */
    ns_ledger_data_arrived(fx.l, v.missing);
    fx_advance(&fx, R, id, ts);
    ns_ledger_job_t job = s_job(&fx, j);
    CHECK_EQ_INT(job.state, NS_JOB_OPEN);
    CHECK_EQ_INT(job.slashed, 1);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 0);
    CHECK_EQ_INT(s_acct(&fx, P).jobs_slashed, 1);
    CHECK_EQ_INT(s_stats(&fx).burned, 200);
    CONSERVED(&fx);
    ns_buf_release(&e);
out:
    fx_free(&fx);
}

TEST(slash_flow)
{
    fx_t fx;
    if (!s_init(&fx, "slash", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, accept, result, award2;
    if (!CHECK(s_run_to_result(&fx, 1, P, 250, j, award, accept, result)))
        goto out;
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 200);
    const uint8_t proof[] = "item 7: got 0x01, the kernel gives 0x02";
    b = fx_ref(j, result);
    b.proof = proof;
    b.proof_len = sizeof proof;
    /* no verifier: the proof cannot be checked */
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_STATE);
    /* a verifier that refuses the proof */
    s_verifier_t v;
    memset(&v, 0, sizeof v);
    v.answer = NS_ERR_PROOF;
    ns_ledger_set_verifier(fx.l, s_verify, &v);
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_PROOF);
    CHECK_EQ_INT(v.calls, 1);
    v.answer = NS_ERR_INVAL; /* any failure is a refusal */
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_PROOF);
    /* only the requester slashes (checked before the verifier runs) */
    v.answer = NS_OK;
    v.calls = 0;
    REFUSED(&fx, X, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_JOBSTATE);
    CHECK_EQ_INT(v.calls, 0);
    /* a verifier that accepts: collateral burned, job open again */
    PUT(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NULL);
    CHECK_EQ_INT(v.calls, 1);
    CHECK_MEM(v.job_id, j, NS_HASH_BYTES);
    CHECK_MEM(v.provider, fx.acct[P].pk, NS_ID_BYTES);
    ns_entry_body_t rb = fx_result(j, accept, 64);
    CHECK_MEM(v.root, rb.root, NS_HASH_BYTES);
    CHECK_EQ_INT(v.n_items, 64);
    CHECK_EQ_INT(v.proof_len, sizeof proof);
    CHECK_MEM(v.proof, proof, sizeof proof);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.staked, 800);
    CHECK_EQ_INT(p.jobs_slashed, 1);
    CHECK_EQ_INT(s_stats(&fx).burned, 200);
    ns_account_t r = s_acct(&fx, R);
    CHECK_EQ_INT(r.locked_escrow, 500); /* the job goes on */
    ns_ledger_job_t job = s_job(&fx, j);
    CHECK_EQ_INT(job.state, NS_JOB_OPEN);
    CHECK_EQ_INT(job.slashed, 1);
    static const ns_hash_t zero;
    CHECK_MEM(job.award_id, zero, NS_HASH_BYTES);
    CONSERVED(&fx);
    /* nothing more for that result: no settle, no second slash */
    REFUSED(&fx, R, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_JOBSTATE);
    b = fx_ref(j, result);
    REFUSED(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* the job is awarded again, to Q, which has no stake yet */
    b = fx_award(&fx, j, Q, 200);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award2);
    CHECK_EQ_INT(s_job(&fx, j).round, 2);
    b = fx_ref(j, award2);
    REFUSED(&fx, Q, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_ERR_FUNDS);
    b = fx_amount(200);
    PUT(&fx, Q, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    b = fx_ref(j, award2);
    PUT(&fx, Q, NS_ENTRY_ACCEPT, &b, NULL, 0, NULL);
    CHECK_EQ_INT(s_acct(&fx, Q).locked_collateral, 200);
    /* verifier removed: no slash possible any more */
    ns_ledger_set_verifier(fx.l, NULL, NULL);
    CONSERVED(&fx);
out:
    fx_free(&fx);
}

TEST(cancel_before_award)
{
    fx_t fx;
    if (!s_init(&fx, "cancel", 4))
        return;
    ns_hash_t j;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    ns_entry_body_t b = fx_cancel(j, NULL, false, 0);
    REFUSED(&fx, X, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    b = fx_cancel(j, NULL, true, fx.now); /* reopen into the past */
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_INVAL);
    ns_hash_t nojob;
    fx_job_id(nojob, 77);
    b = fx_cancel(nojob, NULL, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    uint64_t pending = s_stats(&fx).pending_credit;
    b = fx_cancel(j, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NULL);
    ns_account_t r = s_acct(&fx, R);
    CHECK_EQ_INT(r.free, S_CREDITS);
    CHECK_EQ_INT(r.locked_escrow, 0);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_CANCELLED);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, pending);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    b = fx_award(&fx, j, P, 100);
    REFUSED(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, NS_ERR_JOBSTATE);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(cancel_after_deadline_penalty)
{
    fx_t fx;
    if (!s_init(&fx, "penalty", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    uint64_t deadline = fx.now + 5000;
    ns_hash_t j, award, accept, cancel, other, oaward, oaccept;
    s_post(&fx, j, 1, deadline);
    b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    b = fx_ref(j, award);
    PUT(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept);
    /* an accept of another job, and something that is not an accept */
    s_post(&fx, other, 2, deadline);
    b = fx_award(&fx, other, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, oaward);
    b = fx_ref(other, oaward);
    PUT(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, oaccept);
    CHECK(fx.now < deadline);
    /* before the deadline the provider still has time */
    b = fx_cancel(j, accept, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    fx.now = deadline; /* the next entry is after the deadline */
    b = fx_cancel(j, oaccept, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    b = fx_cancel(j, award, false, 0);
    REFUSED(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE);
    /* after it: a tenth of the collateral burned, the escrow refunded */
    b = fx_cancel(j, accept, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, cancel);
    ns_account_t r = s_acct(&fx, R);
    CHECK_EQ_INT(r.locked_escrow, 500); /* the other job's */
    CHECK_EQ_INT(r.free, S_CREDITS - 500);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 400 - 20);
    CHECK_EQ_INT(p.staked, 600);
    CHECK_EQ_INT(p.jobs_cancelled, 1);
    CHECK_EQ_INT(s_stats(&fx).burned, 20);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_CANCELLED);
    CONSERVED(&fx);
    /* the rest comes back to the stake when the provider claims */
    uint64_t amount = 99;
    bool claimed = true;
    CHECK_RC(ns_ledger_credit(fx.l, cancel, fx.acct[P].pk, &amount, &claimed),
             NS_OK);
    CHECK_EQ_INT(amount, 0);
    CHECK(!claimed);
    b = fx_amount(1);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, cancel, 1, NULL);
    p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 200);
    CHECK_EQ_INT(p.staked, 600 + 180 + 1);
    CHECK_EQ_INT(p.free, S_CREDITS - 1000 - 1);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(cancel_unaccepted_award)
{
    fx_t fx;
    if (!s_init(&fx, "unaccepted", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, cancel;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    /* nobody accepted: cancel without naming an accept, full refund */
    b = fx_cancel(j, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, cancel);
    ns_account_t r = s_acct(&fx, R);
    CHECK_EQ_INT(r.free, S_CREDITS);
    CHECK_EQ_INT(r.locked_escrow, 0);
    CHECK_EQ_INT(s_stats(&fx).burned, 0);
    CHECK_EQ_INT(s_acct(&fx, P).jobs_cancelled, 0);
    /* the provider may take the (empty) release in; nothing moves */
    ns_account_t p0 = s_acct(&fx, P);
    b = fx_amount(1);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, cancel, 1, NULL);
    ns_account_t p = s_acct(&fx, P);
    CHECK_EQ_INT(p.staked, p0.staked + 1);
    CHECK_EQ_INT(p.free, p0.free - 1);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CONSERVED(&fx);

    /* an accepted award cancelled without naming the accept: the whole
     * collateral is released when the provider claims (no penalty) */
    ns_hash_t j2, aw2, ac2, c2;
    s_post(&fx, j2, 2, FX_T0_MS + 1000000);
    b = fx_award(&fx, j2, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, aw2);
    b = fx_ref(j2, aw2);
    PUT(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, ac2);
    b = fx_cancel(j2, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, c2);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 200);
    b = fx_amount(1);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, c2, 1, NULL);
    p = s_acct(&fx, P);
    CHECK_EQ_INT(p.locked_collateral, 0);
    CHECK_EQ_INT(p.staked, 1000 + 2);
    CHECK_EQ_INT(s_stats(&fx).burned, 0);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* The provider takes in the release of a cancelled award before it ever
 * accepted it, then accepts that award. Both entries are on its own chain,
 * so the ledger knows the award is over; the ACCEPT must either be
 * refused or its collateral still be releasable, never locked for good. */
TEST(accept_after_release_claimed)
{
    fx_t fx;
    if (!s_init(&fx, "lateaccept", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, cancel;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    b = fx_cancel(j, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, cancel);
    b = fx_amount(0);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, cancel, 1, NULL); /* release taken */
    b = fx_ref(j, award);
    int rc = fx_put(&fx, P, NS_ENTRY_ACCEPT, &b, NULL, 0, NULL);
    ns_account_t p = s_acct(&fx, P);
    CONSERVED(&fx);
    /* nothing can release a lock of this award any more: no SETTLE (the
     * job is cancelled) and its only release credit is claimed */
    if (!CHECK(rc != NS_OK || p.locked_collateral == 0))
        fprintf(stderr,
                "LEDGER BUG: market/ledger.c s_apply_body NS_ENTRY_ACCEPT "
                "accepts an award whose release credit (the CANCEL's) its "
                "author already took in (s_apply_refs found no lock: "
                "\"never accepted: nothing was locked\"), so %llu "
                "collateral is locked for good (staked %llu, locked "
                "%llu). Expected the ACCEPT refused (e.g. "
                "NS_ERR_JOBSTATE: record the award as released when its "
                "release is claimed without a lock) - both entries are "
                "on the provider's own chain, so the rule stays "
                "order-independent.\n",
                (unsigned long long)p.locked_collateral,
                (unsigned long long)p.staked,
                (unsigned long long)p.locked_collateral);
    fx_free(&fx);
}

/* The rules check everything before they write (no child transaction
 * takes a rejected entry back): an entry whose first refs are good and
 * whose later ref or body fails leaves every credit open; an entry that
 * takes in the release of a lock and reads that lock in its body sees it
 * as its refs left it. */
TEST(rejected_after_good_refs)
{
    fx_t fx;
    if (!s_init(&fx, "goodrefs", 4))
        return;
    ns_hash_t t1, t2, s;
    ns_entry_body_t b = fx_transfer(fx.acct[X].pk, 300);
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t1);
    b = fx_transfer(fx.acct[X].pk, 50);
    PUT(&fx, 0, NS_ENTRY_TRANSFER, &b, NULL, 0, t2);
    b = fx_amount(1);
    PUT(&fx, Q, NS_ENTRY_STAKE, &b, NULL, 0, s);
    uint8_t refs[3 * NS_HASH_BYTES];
    memcpy(refs, t1, NS_HASH_BYTES);
    memcpy(refs + NS_HASH_BYTES, t2, NS_HASH_BYTES);
    memcpy(refs + 2 * NS_HASH_BYTES, s, NS_HASH_BYTES);
    /* the third ref holds no credit for X */
    REFUSED(&fx, X, NS_ENTRY_STAKE, &b, refs, 3, NS_ERR_NOCREDIT);
    /* the second repeats the first */
    uint8_t twice[2 * NS_HASH_BYTES];
    memcpy(twice, t2, NS_HASH_BYTES);
    memcpy(twice + NS_HASH_BYTES, t2, NS_HASH_BYTES);
    REFUSED(&fx, X, NS_ENTRY_STAKE, &b, twice, 2, NS_ERR_CLAIMED);
    /* both good, the body not */
    uint64_t all = s_acct(&fx, X).free;
    b = fx_amount(all + 351);
    REFUSED(&fx, X, NS_ENTRY_STAKE, &b, refs, 2, NS_ERR_FUNDS);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 350);
    b = fx_amount(all + 350);
    PUT(&fx, X, NS_ENTRY_STAKE, &b, refs, 2, NULL);
    CHECK_EQ_INT(s_acct(&fx, X).free, 0);
    CHECK_EQ_INT(s_stats(&fx).pending_credit, 0);
    CONSERVED(&fx);

    /* P takes in the CANCEL's release of an award and ACCEPTs that award
     * in the same entry: the body reads the lock the ref released */
    b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, cancel;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    b = fx_cancel(j, NULL, false, 0);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, cancel);
    ns_account_t before = s_acct(&fx, P);
    b = fx_ref(j, award);
    REFUSED(&fx, P, NS_ENTRY_ACCEPT, &b, cancel, 1, NS_ERR_JOBSTATE);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, before.locked_collateral);
    CONSERVED(&fx);
    fx_free(&fx);
}

TEST(cancel_reopen)
{
    fx_t fx;
    if (!s_init(&fx, "reopen", 4))
        return;
    ns_hash_t j, award, award2;
    s_post(&fx, j, 1, FX_T0_MS + 1000000);
    ns_entry_body_t b = fx_award(&fx, j, P, 250);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award);
    uint64_t deadline = fx.now + 777777;
    b = fx_cancel(j, NULL, true, deadline);
    PUT(&fx, R, NS_ENTRY_CANCEL, &b, NULL, 0, NULL);
    ns_ledger_job_t job = s_job(&fx, j);
    CHECK_EQ_INT(job.state, NS_JOB_OPEN);
    CHECK_EQ_INT(job.deadline_ms, deadline);
    CHECK_EQ_INT(s_acct(&fx, R).locked_escrow, 500);
    b = fx_award(&fx, j, Q, 200);
    PUT(&fx, R, NS_ENTRY_AWARD, &b, NULL, 0, award2);
    job = s_job(&fx, j);
    CHECK_EQ_INT(job.round, 2);
    CHECK_MEM(job.provider, fx.acct[Q].pk, NS_ID_BYTES);
    CHECK_EQ_INT(job.price, 200);
    CONSERVED(&fx);
    fx_free(&fx);
}

/* ==== forks =================================================================
 */

TEST(fork_bans_author)
{
    fx_t fx;
    if (!s_init(&fx, "fork", 3))
        return;
    ns_entry_body_t b = fx_amount(10);
    ns_buf_t first, twin, e;
    ns_hash_t id1, id2;
    ns_buf_init(&first);
    ns_buf_init(&twin);
    ns_buf_init(&e);
    CHECK_RC(fx_put_to(&fx, fx.l, 0, NS_ENTRY_STAKE, &b, NULL, 0, id1, &first),
             NS_OK);
    b = fx_amount(20);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    /* another seq 2: a fork */
    b = fx_amount(30);
    CHECK_RC(fx_make_raw(&fx, 0, 2, id1, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &twin, id2),
             NS_OK);
    fx_snap_of(fx.l, &s_before);
    CHECK_RC(ns_ledger_ingest(fx.l, twin.data, twin.len, NULL, NULL),
             NS_ERR_FORK);
    ns_ledger_stats_t st = s_stats(&fx);
    CHECK_EQ_INT(st.forks, 1);
    CHECK_EQ_INT(st.entries, s_before.entries - 1);
    ns_account_t a = s_acct(&fx, 0);
    CHECK(a.banned);
    /* both branches of seq 2 are void: the author is as before seq 2 */
    CHECK_EQ_INT(a.seq, 1);
    CHECK_EQ_INT(a.staked, 10);
    CONSERVED(&fx);
    /* later entries of the author are refused */
    b = fx_amount(1);
    REFUSED(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_BANNED);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[0].id, NS_ENTRY_STAKE, &b, NULL, 0,
                              &e, id2),
             NS_ERR_BANNED);
    /* a second proof of the same author is still one fork */
    b = fx_amount(40);
    CHECK_RC(fx_make_raw(&fx, 0, 1, NULL, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &twin, id2),
             NS_OK);
    CHECK_RC(ns_ledger_ingest(fx.l, twin.data, twin.len, NULL, NULL),
             NS_ERR_FORK);
    CHECK_EQ_INT(s_stats(&fx).forks, 1);
    /* ... that voids its chain from seq 1: its old entries are refused
     * as a banned author's, not counted as forks again */
    CHECK_EQ_INT(s_acct(&fx, 0).seq, 0);
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 0);
    CHECK_RC(ns_ledger_ingest(fx.l, first.data, first.len, NULL, NULL),
             NS_ERR_BANNED);
    /* others are not affected; credits to the banned account are allowed
     * but it can never take them in */
    b = fx_transfer(fx.acct[0].pk, 5);
    PUT(&fx, 1, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    CHECK(!s_acct(&fx, 1).banned);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    CONSERVED(&fx);
    /* the ban survives a reopen */
    ns_ledger_close(&fx.l);
    int rc;
    fx.l = ns_ledger_open(fx.dir, &fx.genesis, &rc, fx.err, sizeof fx.err);
    if (CHECK(fx.l != NULL)) {
        CHECK(s_acct(&fx, 0).banned);
        CHECK_EQ_INT(s_stats(&fx).forks, 1);
        b = fx_amount(1);
        REFUSED(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_BANNED);
    }
    ns_buf_release(&first);
    ns_buf_release(&twin);
    ns_buf_release(&e);
    fx_free(&fx);
}

/* ==== persistence ============================================================
 */

static bool s_reopen(fx_t *fx)
{
    int rc;
    ns_ledger_close(&fx->l);
    fx->err[0] = '\0';
    fx->l = ns_ledger_open(fx->dir, &fx->genesis, &rc, fx->err, sizeof fx->err);
    if (!fx->l)
        fprintf(stderr, "  reopen: %s: %s\n", ns_errname(rc), fx->err);
    return fx->l != NULL;
}

TEST(reopen_same_state)
{
    fx_t fx;
    if (!s_init(&fx, "reopen", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_hash_t j, award, accept, result, settle, j2, a2, c2, r2, t;
    CHECK(s_run_to_result(&fx, 1, P, 250, j, award, accept, result));
    b = fx_ref(j, result);
    PUT(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, settle);
    CHECK(s_run_to_result(&fx, 2, P, 100, j2, a2, c2, r2));
    b = fx_transfer(fx.acct[X].pk, 123);
    PUT(&fx, Q, NS_ENTRY_TRANSFER, &b, NULL, 0, t);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    /* one more, only ingested: close must make it durable */
    b = fx_amount(7);
    PUT(&fx, X, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    static fx_snap_t before;
    fx_snap_of(fx.l, &before);
    ns_ledger_job_t job_before = s_job(&fx, j2);
    uint8_t *e1 = NULL, *e2 = NULL;
    size_t n1 = 0, n2 = 0;
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[R].pk, 2, &e1, &n1), NS_OK);
    if (!CHECK(s_reopen(&fx)))
        goto out;
    char why[512];
    fx_snap_of(fx.l, &s_after);
    if (!CHECK(fx_snap_same(&before, &s_after, why, sizeof why)))
        fprintf(stderr, "  after reopen: %s\n", why);
    CHECK_EQ_INT(s_after.cons_rc, NS_OK);
    CHECK_EQ_INT(s_after.entries, 12);
    ns_ledger_job_t job_after = s_job(&fx, j2);
    CHECK_MEM(&job_before, &job_after, sizeof job_after);
    CHECK_EQ_INT(s_job(&fx, j).state, NS_JOB_SETTLED);
    uint64_t amount = 0;
    bool claimed = true;
    CHECK_RC(ns_ledger_credit(fx.l, settle, fx.acct[P].pk, &amount, &claimed),
             NS_OK);
    CHECK_EQ_INT(amount, 250);
    CHECK(!claimed);
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[R].pk, 2, &e2, &n2), NS_OK);
    CHECK(e1 && e2 && n1 == n2 && memcmp(e1, e2, n1) == 0);
    /* the chains go on where they were */
    b = fx_ref(j2, r2);
    PUT(&fx, R, NS_ENTRY_SETTLE, &b, NULL, 0, NULL);
    b = fx_amount(1);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, settle, 1, NULL);
    CHECK_EQ_INT(s_acct(&fx, P).locked_collateral, 200);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    CONSERVED(&fx);
    /* read-only opening of the same files sees the same state (the
     * writer is closed first: LMDB must not be opened twice by one
     * process) */
    static fx_snap_t a, c;
    fx_snap_of(fx.l, &a);
    ns_ledger_close(&fx.l);
    int rc;
    ns_ledger_t *ro = ns_ledger_open_readonly(fx.dir, &fx.genesis, &rc, fx.err,
                                              sizeof fx.err);
    if (CHECK(ro != NULL)) {
        fx_snap_of(ro, &c);
        CHECK(fx_snap_same(&a, &c, NULL, 0));
        ns_entry_body_t sb = fx_amount(1);
        ns_buf_t e;
        ns_hash_t id;
        ns_buf_init(&e);
        CHECK_RC(ns_ledger_append(ro, fx.acct[X].id, NS_ENTRY_STAKE, &sb, NULL,
                                  0, &e, id),
                 NS_ERR_STATE);
        ns_buf_release(&e);
        ns_ledger_close(&ro);
    }
out:
    free(e1);
    free(e2);
    fx_free(&fx);
}

TEST(readonly_without_ledger)
{
    char dir[512];
    ns_genesis_t g;
    char err[256] = "";
    int rc = 0;
    if (!CHECK_RC(fx_mkdtemp(dir, sizeof dir, "ro"), NS_OK))
        return;
    uint8_t id[NS_ID_BYTES];
    uint64_t credits = 5;
    memset(id, 3, sizeof id);
    char *text = fx_genesis_text("ro", id, &credits, 1);
    if (!CHECK(text != NULL))
        return;
    CHECK_RC(ns_genesis_parse((const uint8_t *)text, strlen(text), &g, err,
                              sizeof err),
             NS_OK);
    free(text);
    ns_ledger_t *l = ns_ledger_open_readonly(dir, &g, &rc, err, sizeof err);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_NOTFOUND);
    CHECK(err[0] != '\0');
    ns_ledger_close(&l);
    ns_ledger_close(&l); /* NULL-safe */
    ns_genesis_release(&g);
    fx_rmrf(dir);
}

/* Open the ledger's LMDB directly and let fn change it. */
static bool s_tamper(const char *dir, const char *db,
                     bool (*fn)(MDB_txn *t, MDB_dbi dbi, void *u), void *u)
{
    MDB_env *env = NULL;
    MDB_txn *t = NULL;
    MDB_dbi dbi;
    bool ok = mdb_env_create(&env) == MDB_SUCCESS &&
              mdb_env_set_maxdbs(env, 16) == MDB_SUCCESS &&
              mdb_env_set_mapsize(env, NS_LEDGER_MAP_BYTES) == MDB_SUCCESS &&
              mdb_env_open(env, dir, MDB_NOTLS, 0600) == MDB_SUCCESS &&
              mdb_txn_begin(env, NULL, 0, &t) == MDB_SUCCESS &&
              mdb_dbi_open(t, db, 0, &dbi) == MDB_SUCCESS && fn(t, dbi, u);
    if (t) {
        if (ok)
            ok = mdb_txn_commit(t) == MDB_SUCCESS;
        else
            mdb_txn_abort(t);
    }
    if (env)
        mdb_env_close(env);
    return ok;
}

typedef struct {
    uint8_t saved[512];
    size_t saved_len;
    size_t offset; /* which u64 to change */
    int64_t delta;
    size_t new_len; /* 0: keep the length */
} s_totals_edit_t;

/* "totals" in meta: remember it, then add delta to the u64 at offset. */
static bool s_edit_totals(MDB_txn *t, MDB_dbi dbi, void *u)
{
    s_totals_edit_t *ed = u;
    char key[] = "totals";
    MDB_val k = {6, key}, v;
    if (mdb_get(t, dbi, &k, &v) != MDB_SUCCESS || v.mv_size > 512 ||
        v.mv_size < ed->offset + 8)
        return false;
    memcpy(ed->saved, v.mv_data, v.mv_size);
    ed->saved_len = v.mv_size;
    uint8_t buf[512];
    memcpy(buf, v.mv_data, v.mv_size);
    uint64_t x;
    memcpy(&x, buf + ed->offset, 8);
    x += (uint64_t)ed->delta;
    memcpy(buf + ed->offset, &x, 8);
    MDB_val nv = {ed->new_len ? ed->new_len : v.mv_size, buf};
    return mdb_put(t, dbi, &k, &nv, 0) == MDB_SUCCESS;
}

static bool s_restore_totals(MDB_txn *t, MDB_dbi dbi, void *u)
{
    s_totals_edit_t *ed = u;
    char key[] = "totals";
    MDB_val k = {6, key}, v = {ed->saved_len, ed->saved};
    return mdb_put(t, dbi, &k, &v, 0) == MDB_SUCCESS;
}

/* One account's free balance + delta (accounts: id -> ns_account_t). */
typedef struct {
    uint8_t id[NS_ID_BYTES];
    int64_t delta;
} s_account_edit_t;

static bool s_edit_account(MDB_txn *t, MDB_dbi dbi, void *u)
{
    s_account_edit_t *ed = u;
    MDB_val k = {NS_ID_BYTES, ed->id}, v;
    ns_account_t a;
    if (mdb_get(t, dbi, &k, &v) != MDB_SUCCESS || v.mv_size != sizeof a)
        return false;
    memcpy(&a, v.mv_data, sizeof a);
    a.free += (uint64_t)ed->delta;
    MDB_val nv = {sizeof a, &a};
    return mdb_put(t, dbi, &k, &nv, 0) == MDB_SUCCESS;
}

static ns_ledger_t *s_try_open(fx_t *fx, const ns_genesis_t *g, int *rc)
{
    fx->err[0] = '\0';
    return ns_ledger_open(fx->dir, g, rc, fx->err, sizeof fx->err);
}

TEST(tampered_ledger_refused)
{
    fx_t fx;
    if (!s_init(&fx, "tamper", 4))
        return;
    ns_entry_body_t b = fx_amount(1000);
    PUT(&fx, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    b = fx_transfer(fx.acct[Q].pk, 300);
    PUT(&fx, R, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    ns_ledger_close(&fx.l);
    int rc = 0;
    ns_ledger_t *l;

    /* meta "totals": the burned counter (second u64) raised by one */
    s_totals_edit_t ed;
    memset(&ed, 0, sizeof ed);
    ed.offset = 8;
    ed.delta = 1;
    if (!CHECK(s_tamper(fx.dir, "meta", s_edit_totals, &ed)))
        goto out;
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_CORRUPT);
    CHECK_CONTAINS(fx.err, "corrupt");
    CHECK_CONTAINS(fx.err, "genesis total");
    ns_ledger_close(&l);
    /* the pending counter (third u64) lowered by one */
    CHECK(s_tamper(fx.dir, "meta", s_restore_totals, &ed));
    ed.offset = 16;
    ed.delta = -1;
    CHECK(s_tamper(fx.dir, "meta", s_edit_totals, &ed));
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_CORRUPT);
    CHECK_CONTAINS(fx.err, "corrupt");
    ns_ledger_close(&l);
    /* the genesis total itself */
    CHECK(s_tamper(fx.dir, "meta", s_restore_totals, &ed));
    ed.offset = 0;
    ed.delta = 1000;
    CHECK(s_tamper(fx.dir, "meta", s_edit_totals, &ed));
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_CORRUPT);
    CHECK_CONTAINS(fx.err, "corrupt");
    ns_ledger_close(&l);
    /* a record of the wrong size */
    CHECK(s_tamper(fx.dir, "meta", s_restore_totals, &ed));
    ed.offset = 0;
    ed.delta = 0;
    ed.new_len = 8;
    CHECK(s_tamper(fx.dir, "meta", s_edit_totals, &ed));
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_CORRUPT);
    CHECK_CONTAINS(fx.err, "totals");
    ns_ledger_close(&l);
    /* restored: it opens again, with its state */
    CHECK(s_tamper(fx.dir, "meta", s_restore_totals, &ed));
    l = s_try_open(&fx, &fx.genesis, &rc);
    if (CHECK(l != NULL)) {
        CHECK_EQ_INT(fx_acct_in(l, &fx, P).staked, 1000);
        CHECK_RC(ns_ledger_check_conservation(l, NULL), NS_OK);
        ns_ledger_close(&l);
    }
    /* an account's balance changed behind the ledger's back */
    s_account_edit_t ae;
    memcpy(ae.id, fx.acct[X].pk, NS_ID_BYTES);
    ae.delta = 1;
    CHECK(s_tamper(fx.dir, "accounts", s_edit_account, &ae));
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_CORRUPT);
    CHECK_CONTAINS(fx.err, "corrupt");
    ns_ledger_close(&l);
    ae.delta = -1;
    CHECK(s_tamper(fx.dir, "accounts", s_edit_account, &ae));
    l = s_try_open(&fx, &fx.genesis, &rc);
    CHECK(l != NULL);
    ns_ledger_close(&l);
out:
    fx_free(&fx);
}

/* Rewrite every chain record as an older version stored it: the id
 * alone, the account before the entry in prestate. */
static bool s_chain_to_old(MDB_txn *t, MDB_dbi chain, void *u)
{
    (void)u;
    MDB_dbi pre;
    MDB_cursor *c = NULL;
    MDB_val k, v;
    if (mdb_dbi_open(t, "prestate", 0, &pre) != MDB_SUCCESS ||
        mdb_cursor_open(t, chain, &c) != MDB_SUCCESS)
        return false;
    bool ok = true;
    int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
    for (; ok && rc == MDB_SUCCESS; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint8_t rec[NS_HASH_BYTES + sizeof(ns_account_t)];
        if (v.mv_size != sizeof rec)
            return false;
        memcpy(rec, v.mv_data, sizeof rec);
        MDB_val id = {NS_HASH_BYTES, rec};
        MDB_val acct = {sizeof(ns_account_t), rec + NS_HASH_BYTES};
        ok = mdb_put(t, pre, &k, &acct, 0) == MDB_SUCCESS &&
             mdb_cursor_put(c, &k, &id, MDB_CURRENT) == MDB_SUCCESS;
    }
    mdb_cursor_close(c);
    return ok && rc == MDB_NOTFOUND;
}

/* A ledger written before chain records held the account before each
 * entry still reads, and still proves and voids a fork. */
TEST(old_chain_records)
{
    fx_t fx;
    if (!s_init(&fx, "oldchain", 3))
        return;
    ns_entry_body_t b = fx_amount(10);
    ns_hash_t id1, id2;
    ns_buf_t twin;
    ns_buf_init(&twin);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, id1);
    b = fx_amount(20);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_ledger_close(&fx.l);
    CHECK(s_tamper(fx.dir, "chain", s_chain_to_old, NULL));
    int rc;
    fx.l = ns_ledger_open(fx.dir, &fx.genesis, &rc, fx.err, sizeof fx.err);
    CHECK_RC(rc, NS_OK);
    if (!fx.l) {
        fx_free(&fx);
        return;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[0].pk, 1, &buf, &len), NS_OK);
    free(buf);
    /* another seq 2, valid against the stored account before seq 2 */
    b = fx_amount(30);
    CHECK_RC(fx_make_raw(&fx, 0, 2, id1, NS_ENTRY_STAKE, &b, NULL, 0,
                         fx_tick(&fx), &twin, id2),
             NS_OK);
    CHECK_RC(ns_ledger_ingest(fx.l, twin.data, twin.len, NULL, NULL),
             NS_ERR_FORK);
    ns_account_t a = s_acct(&fx, 0);
    CHECK(a.banned);
    CHECK_EQ_INT(a.seq, 1); /* seq 2 voided from the old pre-state */
    CHECK_EQ_INT(a.staked, 10);
    CONSERVED(&fx);
    ns_buf_release(&twin);
    fx_free(&fx);
}

TEST(other_genesis_refused)
{
    fx_t fx;
    if (!s_init(&fx, "othergen", 2))
        return;
    ns_entry_body_t b = fx_amount(10);
    PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    ns_ledger_close(&fx.l);
    /* same accounts, same total, another name: another network */
    uint8_t ids[2 * NS_ID_BYTES];
    uint64_t credits[2] = {S_CREDITS, S_CREDITS};
    memcpy(ids, fx.acct[0].pk, NS_ID_BYTES);
    memcpy(ids + NS_ID_BYTES, fx.acct[1].pk, NS_ID_BYTES);
    char *text = fx_genesis_text("othergen2", ids, credits, 2);
    ns_genesis_t g;
    char err[256];
    if (!CHECK(text != NULL) ||
        !CHECK_RC(ns_genesis_parse((const uint8_t *)text, strlen(text), &g, err,
                                   sizeof err),
                  NS_OK)) {
        free(text);
        fx_free(&fx);
        return;
    }
    free(text);
    int rc = 0;
    ns_ledger_t *l = s_try_open(&fx, &g, &rc);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_NETWORK);
    CHECK_CONTAINS(fx.err, "another network");
    ns_ledger_close(&l);
    l = ns_ledger_open_readonly(fx.dir, &g, &rc, fx.err, sizeof fx.err);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_NETWORK);
    ns_ledger_close(&l);
    /* and the right one still opens it */
    CHECK(s_reopen(&fx));
    CHECK_EQ_INT(s_acct(&fx, 0).staked, 10);
    ns_genesis_release(&g);
    fx_free(&fx);
}

/* ==== the append API and a second ledger ====================================
 */

TEST(append_and_replicate)
{
    fx_t fx;
    if (!s_init(&fx, "append", 3))
        return;
    ns_ledger_t *other = fx_open_other(&fx, "other");
    if (!CHECK(other != NULL)) {
        fx_free(&fx);
        return;
    }
    ns_buf_t out;
    ns_hash_t id, t;
    ns_buf_init(&out);
    ns_entry_body_t b = fx_transfer(fx.acct[1].pk, 42);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[0].id, NS_ENTRY_TRANSFER, &b, NULL,
                              0, &out, t),
             NS_OK);
    CHECK_RC(ns_ledger_ingest(other, out.data, out.len, NULL, NULL), NS_OK);
    b = fx_amount(42);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[1].id, NS_ENTRY_STAKE, &b, t, 1,
                              &out, id),
             NS_OK);
    ns_entry_t e;
    CHECK_RC(ns_entry_decode(out.data, out.len, fx.genesis.network_id, &e),
             NS_OK);
    CHECK_EQ_INT(e.seq, 1);
    CHECK_EQ_INT(e.n_refs, 1);
    CHECK_MEM(e.id, id, NS_HASH_BYTES);
    CHECK_RC(ns_ledger_ingest(other, out.data, out.len, NULL, NULL), NS_OK);
    b = fx_amount(2);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[1].id, NS_ENTRY_UNSTAKE, &b, NULL,
                              0, &out, id),
             NS_OK);
    CHECK_RC(ns_entry_decode(out.data, out.len, fx.genesis.network_id, &e),
             NS_OK);
    CHECK_EQ_INT(e.seq, 2);
    CHECK_RC(ns_ledger_ingest(other, out.data, out.len, NULL, NULL), NS_OK);
    /* a refused append leaves no entry */
    b = fx_amount(S_CREDITS * 10);
    CHECK_RC(ns_ledger_append(fx.l, fx.acct[2].id, NS_ENTRY_STAKE, &b, NULL, 0,
                              &out, id),
             NS_ERR_FUNDS);
    CHECK_EQ_INT(fx_acct_in(fx.l, &fx, 2).seq, 0);
    CHECK_RC(ns_ledger_commit(other), NS_OK);
    static fx_snap_t a, c;
    fx_snap_of(fx.l, &a);
    fx_snap_of(other, &c);
    char why[512];
    if (!CHECK(fx_snap_same(&a, &c, why, sizeof why)))
        fprintf(stderr, "  replica: %s\n", why);
    CHECK_EQ_INT(fx_acct_in(other, &fx, 1).staked, 40);
    ns_ledger_close(&other);
    ns_buf_release(&out);
    fx_free(&fx);
}

/* ==== queries
 * ================================================================= */

typedef struct {
    uint32_t n, stop_after;
    uint64_t last_seq;
    bool in_order;
    const uint8_t *author;
    bool right_author;
} s_visit_t;

static bool s_visit_entry(void *u, const ns_entry_t *e)
{
    s_visit_t *v = u;
    v->n++;
    if (v->author) {
        v->in_order &= e->seq == v->last_seq + 1;
        v->right_author &= memcmp(e->author, v->author, NS_ID_BYTES) == 0;
    }
    v->last_seq = e->seq;
    return v->n != v->stop_after;
}

static bool s_visit_account(void *u, const ns_account_t *a)
{
    s_visit_t *v = u;
    (void)a;
    v->n++;
    return v->n != v->stop_after;
}

TEST(queries)
{
    fx_t fx;
    if (!s_init(&fx, "queries", 3))
        return;
    ns_entry_body_t b;
    ns_hash_t t;
    for (int i = 0; i < 5; i++) {
        b = fx_amount(1);
        PUT(&fx, 0, NS_ENTRY_STAKE, &b, NULL, 0, NULL);
    }
    b = fx_transfer(fx.acct[0].pk, 9);
    PUT(&fx, 1, NS_ENTRY_TRANSFER, &b, NULL, 0, t);
    b = fx_transfer(fx.acct[0].pk, 8);
    PUT(&fx, 2, NS_ENTRY_TRANSFER, &b, NULL, 0, NULL);
    /* one author's entries, in seq order */
    s_visit_t v = {0, 0, 0, true, fx.acct[0].pk, true};
    ns_ledger_each_entry(fx.l, fx.acct[0].pk, s_visit_entry, &v);
    CHECK_EQ_INT(v.n, 5);
    CHECK(v.in_order);
    CHECK(v.right_author);
    /* every entry; and stopping early */
    s_visit_t all = {0, 0, 0, true, NULL, true};
    ns_ledger_each_entry(fx.l, NULL, s_visit_entry, &all);
    CHECK_EQ_INT(all.n, 7);
    s_visit_t some = {0, 3, 0, true, NULL, true};
    ns_ledger_each_entry(fx.l, NULL, s_visit_entry, &some);
    CHECK_EQ_INT(some.n, 3);
    s_visit_t none = {0, 0, 0, true, fx.acct[2].pk, true};
    uint8_t nobody[NS_ID_BYTES];
    memset(nobody, 0xee, sizeof nobody);
    none.author = nobody;
    ns_ledger_each_entry(fx.l, nobody, s_visit_entry, &none);
    CHECK_EQ_INT(none.n, 0);
    /* accounts */
    s_visit_t acc = {0, 0, 0, true, NULL, true};
    ns_ledger_each_account(fx.l, s_visit_account, &acc);
    CHECK_EQ_INT(acc.n, 3);
    CHECK_EQ_INT(s_stats(&fx).accounts, 3);
    s_visit_t acc1 = {0, 1, 0, true, NULL, true};
    ns_ledger_each_account(fx.l, s_visit_account, &acc1);
    CHECK_EQ_INT(acc1.n, 1);
    /* an id the ledger never saw: an empty account */
    ns_account_t a;
    CHECK_RC(ns_ledger_account(fx.l, nobody, &a), NS_OK);
    CHECK_EQ_INT(a.free + a.staked + a.locked_escrow + a.locked_collateral, 0);
    CHECK_EQ_INT(a.seq, 0);
    CHECK_MEM(a.id, nobody, NS_ID_BYTES);
    /* entries by author and seq */
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[0].pk, 6, &buf, &len),
             NS_ERR_NOTFOUND);
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[0].pk, 0, &buf, &len),
             NS_ERR_NOTFOUND);
    CHECK_RC(ns_ledger_get(fx.l, fx.acct[1].pk, 1, &buf, &len), NS_OK);
    ns_entry_t e;
    if (CHECK(buf != NULL)) {
        CHECK_RC(ns_entry_decode(buf, len, fx.genesis.network_id, &e), NS_OK);
        CHECK_MEM(e.id, t, NS_HASH_BYTES);
        free(buf);
    }
    /* unclaimed credits, at most max */
    uint8_t ids[2 * NS_HASH_BYTES];
    CHECK_EQ_INT(ns_ledger_unclaimed(fx.l, fx.acct[0].pk, ids, 2), 2);
    CHECK_EQ_INT(ns_ledger_unclaimed(fx.l, fx.acct[0].pk, ids, 1), 1);
    ns_ledger_job_t job;
    ns_hash_t nojob;
    fx_job_id(nojob, 5);
    CHECK_RC(ns_ledger_job(fx.l, nojob, &job), NS_ERR_NOTFOUND);
    fx_free(&fx);
}

/* ==== order independence
 * ====================================================== */

/* Two requesters post a JOB with the same job id. If that were valid for
 * both, whichever a node saw first would win, and two nodes that got the
 * two entries in other orders would disagree on balances. The job id is
 * bound to its requester (ns_ledger_job_id), so the copy is refused
 * whatever the order and both nodes agree. */
TEST(job_id_reuse_order_independent)
{
    fx_t fx;
    if (!s_init(&fx, "jobid", 3))
        return;
    ns_ledger_t *l2 = fx_open_other(&fx, "second");
    if (!CHECK(l2 != NULL)) {
        fx_free(&fx);
        return;
    }
    ns_hash_t j, id0, id1;
    uint64_t ts0, ts1;
    ns_buf_t e0, e1;
    ns_buf_init(&e0);
    ns_buf_init(&e1);
    ns_entry_body_t b =
        fx_job(fx.acct[0].pk, 1, 100, 50, 10, FX_T0_MS + 1000000, j);
    CHECK_RC(fx_make(&fx, 0, NS_ENTRY_JOB, &b, NULL, 0, &e0, id0, &ts0), NS_OK);
    b.escrow = 200; /* account 1 copies the job id */
    CHECK_RC(fx_make(&fx, 1, NS_ENTRY_JOB, &b, NULL, 0, &e1, id1, &ts1), NS_OK);
    int a0 = ns_ledger_ingest(fx.l, e0.data, e0.len, NULL, NULL);
    int a1 = ns_ledger_ingest(fx.l, e1.data, e1.len, NULL, NULL);
    int b1 = ns_ledger_ingest(l2, e1.data, e1.len, NULL, NULL);
    int b0 = ns_ledger_ingest(l2, e0.data, e0.len, NULL, NULL);
    CHECK_RC(a0, NS_OK);
    CHECK_RC(b0, NS_OK);
    CHECK_RC(a1, NS_ERR_INVAL);
    CHECK_RC(b1, NS_ERR_INVAL);
    static fx_snap_t s1, s2;
    fx_snap_of(fx.l, &s1);
    fx_snap_of(l2, &s2);
    char why[512];
    if (!CHECK(fx_snap_same(&s1, &s2, why, sizeof why)))
        fprintf(stderr,
                "LEDGER BUG: market/ledger.c s_apply_body NS_ENTRY_JOB: a "
                "JOB's validity depends on another author's JOB with the "
                "same job id: ledger A got account 0's JOB then account "
                "1's (%s, %s), ledger B the other order (%s, %s); their "
                "states differ: %s. Expected the same state in both "
                "orders.\n",
                ns_errname(a0), ns_errname(a1), ns_errname(b1), ns_errname(b0),
                why);
    ns_ledger_job_t x, y;
    CHECK_RC(ns_ledger_job(fx.l, j, &x), NS_OK);
    CHECK_RC(ns_ledger_job(l2, j, &y), NS_OK);
    CHECK_MEM(x.requester, fx.acct[0].pk, NS_ID_BYTES);
    CHECK_MEM(y.requester, fx.acct[0].pk, NS_ID_BYTES);
    CHECK_RC(ns_ledger_check_conservation(fx.l, NULL), NS_OK);
    CHECK_RC(ns_ledger_check_conservation(l2, NULL), NS_OK);
    ns_buf_release(&e0);
    ns_buf_release(&e1);
    ns_ledger_close(&l2);
    fx_free(&fx);
}

/* An ACCEPT and the requester's CANCEL of that award reach two nodes in
 * different orders: both orders are causally valid (neither names the
 * other), so the job record must come out the same. */
TEST(job_record_order_independent)
{
    fx_t fx;
    if (!s_init(&fx, "jobrec", 4))
        return;
    ns_ledger_t *l2 = fx_open_other(&fx, "second");
    if (!CHECK(l2 != NULL)) {
        fx_free(&fx);
        return;
    }
    ns_buf_t raw[5];
    for (int i = 0; i < 5; i++)
        ns_buf_init(&raw[i]);
    ns_hash_t j, award, accept;
    ns_entry_body_t b = fx_amount(1000);
    CHECK_RC(
        fx_put_to(&fx, fx.l, P, NS_ENTRY_STAKE, &b, NULL, 0, NULL, &raw[0]),
        NS_OK);
    b = fx_job(fx.acct[R].pk, 1, 500, 300, 200, FX_T0_MS + 1000000, j);
    CHECK_RC(fx_put_to(&fx, fx.l, R, NS_ENTRY_JOB, &b, NULL, 0, NULL, &raw[1]),
             NS_OK);
    b = fx_award(&fx, j, P, 250);
    CHECK_RC(
        fx_put_to(&fx, fx.l, R, NS_ENTRY_AWARD, &b, NULL, 0, award, &raw[2]),
        NS_OK);
    b = fx_ref(j, award);
    CHECK_RC(
        fx_put_to(&fx, fx.l, P, NS_ENTRY_ACCEPT, &b, NULL, 0, accept, &raw[3]),
        NS_OK);
    b = fx_cancel(j, NULL, false, 0);
    CHECK_RC(
        fx_put_to(&fx, fx.l, R, NS_ENTRY_CANCEL, &b, NULL, 0, NULL, &raw[4]),
        NS_OK);
    /* the second node: the cancel before the accept */
    const int order[5] = {0, 1, 2, 4, 3};
    for (int i = 0; i < 5; i++)
        CHECK_RC(ns_ledger_ingest(l2, raw[order[i]].data, raw[order[i]].len,
                                  NULL, NULL),
                 NS_OK);
    static fx_snap_t s1, s2;
    fx_snap_of(fx.l, &s1);
    fx_snap_of(l2, &s2);
    CHECK(fx_snap_same(&s1, &s2, NULL, 0));
    ns_ledger_job_t x, y;
    CHECK_RC(ns_ledger_job(fx.l, j, &x), NS_OK);
    CHECK_RC(ns_ledger_job(l2, j, &y), NS_OK);
    if (!CHECK(memcmp(x.accept_id, y.accept_id, NS_HASH_BYTES) == 0))
        fprintf(stderr,
                "LEDGER BUG: market/ledger.c s_apply_body NS_ENTRY_ACCEPT "
                "sets job.accept_id only when the award is still current "
                "when the ACCEPT arrives, and NS_ENTRY_CANCEL/SLASH never "
                "clear accept_id/result_id: after JOB, AWARD, ACCEPT, "
                "CANCEL the node that saw ACCEPT before CANCEL reports "
                "accept_id = the accept, the node that saw CANCEL first "
                "reports zero. Expected ns_ledger_job to be the same for "
                "the same entries (clear accept_id/result_id/root/n_items "
                "when the award ends).\n");
    CHECK_EQ_INT(x.state, y.state);
    CHECK_MEM(x.award_id, y.award_id, NS_HASH_BYTES);
    for (int i = 0; i < 5; i++)
        ns_buf_release(&raw[i]);
    ns_ledger_close(&l2);
    fx_free(&fx);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(transfer);
    RUN(stake_unstake);
    RUN(job_escrow);
    RUN(bad_signature);
    RUN(wrong_prev);
    RUN(seq_gap_buffered);
    RUN(gap_cascade_long_chain);
    RUN(timestamp_backwards);
    RUN(duplicate);
    RUN(unknown_type);
    RUN(malformed_bodies);
    RUN(oversized);
    RUN(credit_claims);
    RUN(missing_ref_buffered);
    RUN(award_rules);
    RUN(accept_rules);
    RUN(settle_flow);
    RUN(slash_flow);
    RUN(slash_waits_for_its_inputs);
    RUN(cancel_before_award);
    RUN(cancel_after_deadline_penalty);
    RUN(cancel_unaccepted_award);
    RUN(rejected_after_good_refs);
    RUN(cancel_reopen);
    RUN(accept_after_release_claimed);
    RUN(fork_bans_author);
    RUN(old_chain_records);
    RUN(reopen_same_state);
    RUN(readonly_without_ledger);
    RUN(tampered_ledger_refused);
    RUN(other_genesis_refused);
    RUN(append_and_replicate);
    RUN(queries);
    RUN(job_id_reuse_order_independent);
    RUN(job_record_order_independent);
    return ns_test_finish("market_rules");
}
