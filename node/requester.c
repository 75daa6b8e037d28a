/* cmd_submit.c - `nightshift submit`: a light peer that posts one job,
 * runs the reverse auction, hands the job to the winner, checks the result
 * by challenge-response and settles (or slashes and starts over).
 *
 * It is a short-lived node of its own (key, ledger, p2p on an ephemeral
 * port) so that providers can reach it directly. Its progress is kept in
 * <datadir>/jobs/<job id>/ so `submit --resume JOB` can pick the job up
 * after a crash. */
#include "cli.h"
#include "jobspec.h"
#include "nightshift/slash.h"

#include "nightshift/genesis.h"
#include "nightshift/ledger_sync.h"
#include "nightshift/log.h"
#include "nightshift/market.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define S_MAX_BIDS 64
#define S_ACCEPT_MS 5000 /* an awarded provider must accept within */
#define S_FETCH_MS 60000 /* outputs must arrive within */
#define S_WINDOW 8       /* output FETCHes in flight */
#define S_BLOB_STATEMENT 255

typedef enum {
    R_JOIN,
    R_ANNOUNCE,
    R_BIDDING,
    R_ACCEPT,
    R_RUNNING,
    R_FETCH,
    R_VERIFY,
    R_DONE,
    R_FAILED,
} s_phase_t;

static const char *const s_phase_names[] = {"join",   "announce", "bidding",
                                            "accept", "running",  "fetch",
                                            "verify", "done",     "failed"};

typedef struct {
    /* settings */
    const char *datadir;
    const char *bootstrap[NS_MAX_BOOTSTRAP];
    int n_bootstrap;
    const char *listen;
    const char *resume;
    uint64_t max_price, collateral;
    uint32_t bid_window_ms;
    uint64_t deadline_s, timeout_s;
    ns_reqs_t reqs;
    int json, tty;
    /* the job */
    ns_jobspec_t spec;
    ns_hash_t desc_id; /* ns_job_id of the descriptor */
    ns_hash_t job_id;  /* this submission: ns_ledger_job_id */
    uint8_t nonce[16];
    char job_hex[2 * NS_HASH_BYTES + 1];
    ns_buf_t packed; /* descriptor as providers fetch it */
    uint64_t n_items;
    /* the network */
    ns_identity_t *me;
    ns_genesis_t genesis;
    ns_config_t cfg;
    ns_ledger_t *ledger;
    ns_p2p_t *p2p;
    ns_ledger_sync_t *sync;
    ns_runner_t *runner;
    ns_buf_t body;
    /* the auction */
    s_phase_t phase;
    uint64_t phase_ms;
    uint32_t round;
    ns_announce_t ann;
    ns_bid_t bids[S_MAX_BIDS];
    uint64_t bid_us[S_MAX_BIDS];
    uint32_t n_bids;
    uint64_t job_seq; /* our JOB entry's seq */
    ns_bid_t winner;
    ns_hash_t award_id;
    /* outputs */
    uint8_t statement[NS_SIG_BYTES];
    uint64_t got[NS_MAX_ARGS + 1], next[NS_MAX_ARGS + 1];
    uint32_t in_flight;
    ns_check_result_t check;
    uint8_t secret[32];
    /* receipt */
    uint64_t t_start_ms, t_announce_ms, t_accept_ms, t_result_ms;
    uint64_t t_verified_ms;
    uint32_t join_peers;     /* live peers at the last look */
    uint64_t join_stable_ms; /* since when that count holds */
    uint64_t match_ms, run_ms, verify_ms;
    uint64_t price, refund;
    uint32_t slashed, cancelled;
    char error[512];
    volatile sig_atomic_t stop;
} s_req_t;

static volatile sig_atomic_t *s_stop_flag;

static void s_on_signal(int sig)
{
    (void)sig;
    if (s_stop_flag)
        *s_stop_flag = 1;
}

/* ---- progress ---------------------------------------------------------- */

static void s_say(s_req_t *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_say(s_req_t *q, const char *fmt, ...)
{
    if (q->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%6.2fs] ",
            (double)(ns_mono_ms() - q->t_start_ms) / 1000.0);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void s_phase(s_req_t *q, s_phase_t p)
{
    q->phase = p;
    q->phase_ms = ns_mono_ms();
}

static void s_fail(s_req_t *q, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_fail(s_req_t *q, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->error, sizeof q->error, fmt, ap);
    va_end(ap);
    s_phase(q, R_FAILED);
    q->stop = 1;
}

/* ---- ledger helpers ---------------------------------------------------------
 */

static int s_append(s_req_t *q, uint8_t type, ns_entry_body_t *b, ns_hash_t id)
{
    int rc = ns_ledger_sync_append(q->sync, q->me, type, b, true, id);
    if (rc != NS_OK)
        s_say(q, "ledger refused our %s entry: %s", ns_entry_type_name(type),
              ns_strerror(rc));
    return rc;
}

static void s_cancel(s_req_t *q, const ns_hash_t accept_id, bool reopen)
{
    ns_entry_body_t b;
    ns_hash_t id;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->job_id, NS_HASH_BYTES);
    if (accept_id)
        memcpy(b.ref_id, accept_id, NS_HASH_BYTES);
    b.reopen = reopen;
    b.new_deadline_ms = ns_now_ms() + q->deadline_s * 1000;
    if (s_append(q, NS_ENTRY_CANCEL, &b, id) == NS_OK)
        q->cancelled++;
    q->ann.deadline_ms = b.new_deadline_ms;
}

static void s_exclude(s_req_t *q, const uint8_t *provider)
{
    if (q->ann.n_excluded < NS_MAX_EXCLUDED)
        memcpy(q->ann.excluded[q->ann.n_excluded++], provider, NS_ID_BYTES);
}

/* ---- explaining an empty auction ----------------------------------------- */

typedef struct {
    const s_req_t *q;
    uint32_t seen, qualified;
    uint32_t failing[NS_REQ_COUNT];
} s_explain_t;

static bool s_count_provider(void *u, const uint8_t *id,
                             const ns_heartbeat_t *hb)
{
    (void)id;
    s_explain_t *x = u;
    if (hb->n_devices == 0)
        return false; /* a light peer (another requester), not a provider */
    x->seen++;
    uint32_t fail = ns_reqs_check(&x->q->reqs, hb, x->q->collateral,
                                  x->q->max_price, x->q->ann.work_flops, NULL);
    if (!fail)
        x->qualified++;
    for (int b = 0; b < NS_REQ_COUNT; b++)
        if (!(fail & (1u << b)))
            x->failing[b]++;
    return false; /* visit all */
}

static void s_explain(s_req_t *q)
{
    s_explain_t x = {q, 0, 0, {0}};
    uint8_t dummy[NS_ID_BYTES];
    if (ns_p2p_pick_peer(q->p2p, s_count_provider, &x, dummy) == NS_OK)
        return; /* unreachable: the predicate never accepts */
    size_t used = (size_t)snprintf(q->error, sizeof q->error,
                                   "no provider bid on the job (%u "
                                   "providers known):",
                                   x.seen);
    for (int b = 0; b < NS_REQ_COUNT && used < sizeof q->error; b++) {
        char what[64];
        ns_reqs_describe(&q->reqs, 1u << b, q->collateral, q->max_price, what,
                         sizeof what);
        if ((1u << b) == NS_REQ_REGION && !q->reqs.region[0])
            continue;
        used += (size_t)snprintf(q->error + used, sizeof q->error - used,
                                 "%s %s: %u of %u", b ? ";" : "", what,
                                 x.failing[b], x.seen);
    }
}

/* ---- handlers ---------------------------------------------------------------
 */

static int s_on_bid(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    s_req_t *q = user;
    ns_bid_t b;
    int rc = ns_bid_decode(env->body, env->body_len, &b);
    if (rc != NS_OK)
        return rc;
    if (memcmp(b.provider, env->sender, NS_ID_BYTES) ||
        ns_bid_verify(&b, q->genesis.network_id) != NS_OK)
        return NS_ERR_SIG;
    if (q->phase != R_BIDDING || memcmp(b.job_id, q->job_id, NS_HASH_BYTES) ||
        q->n_bids == S_MAX_BIDS)
        return NS_OK;
    q->bids[q->n_bids] = b;
    q->bid_us[q->n_bids++] = ns_mono_us();
    return NS_OK;
}

static int s_on_fetch(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    s_req_t *q = user;
    ns_chunk_t c;
    int rc = ns_fetch_decode(env->body, env->body_len, &c);
    if (rc != NS_OK)
        return rc;
    if (memcmp(c.job_id, q->job_id, NS_HASH_BYTES) ||
        memcmp(env->sender, q->winner.provider, NS_ID_BYTES) ||
        (q->phase != R_ACCEPT && q->phase != R_RUNNING))
        return NS_OK;
    const uint8_t *data = NULL;
    uint64_t total = 0;
    if (c.blob == NS_BLOB_DESCRIPTOR) {
        data = q->packed.data;
        total = q->packed.len;
    } else if (c.blob >= 1 && c.blob <= q->spec.job.n_args &&
               q->spec.job.args[c.blob - 1].kind == NS_ARG_IN) {
        data = q->spec.in_bufs[c.blob - 1];
        total = q->spec.job.args[c.blob - 1].size;
    }
    if (!data || c.offset >= total)
        return NS_ERR_INVAL;
    c.total = total;
    c.data = data + c.offset;
    c.data_len = total - c.offset < c.len ? total - c.offset : c.len;
    if ((rc = ns_chunk_encode(&c, &q->body)) != NS_OK)
        return rc;
    return ns_p2p_reply(q->p2p, src, NS_MSG_MKT_CHUNK, q->body.data,
                        q->body.len);
}

static void s_fetch_outputs(s_req_t *q);

static int s_on_chunk(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    s_req_t *q = user;
    ns_chunk_t c;
    int rc = ns_chunk_decode(env->body, env->body_len, &c);
    if (rc != NS_OK)
        return rc;
    if (q->phase != R_FETCH || memcmp(c.job_id, q->job_id, NS_HASH_BYTES) ||
        memcmp(env->sender, q->winner.provider, NS_ID_BYTES))
        return NS_OK;
    uint8_t *dst = NULL;
    uint64_t total = 0;
    uint32_t slot = 0;
    if (c.blob == S_BLOB_STATEMENT) {
        dst = q->statement;
        total = NS_SIG_BYTES;
        slot = NS_MAX_ARGS;
    } else if (c.blob >= NS_BLOB_OUTPUT(0) &&
               c.blob < NS_BLOB_OUTPUT(q->spec.job.n_args) &&
               q->spec.job.args[c.blob - NS_BLOB_OUTPUT(0)].kind ==
                   NS_ARG_OUT) {
        slot = c.blob - NS_BLOB_OUTPUT(0);
        dst = q->spec.outputs[slot];
        total = q->spec.job.args[slot].size;
    }
    /* Sizes come from our descriptor, never from the provider. */
    if (!dst || c.total != total || c.data_len > total - c.offset)
        return NS_ERR_INVAL;
    memcpy(dst + c.offset, c.data, c.data_len);
    q->got[slot] += c.data_len;
    if (q->in_flight)
        q->in_flight--;
    s_fetch_outputs(q);
    return NS_OK;
}

static int s_on_ignore(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)user;
    (void)env;
    (void)src;
    return NS_OK; /* gossip of other jobs: pass it on */
}

/* ---- steps
 * ------------------------------------------------------------------- */

static bool s_fetch_slot(s_req_t *q, uint32_t slot, uint32_t blob,
                         uint64_t total)
{
    while (q->in_flight < S_WINDOW && q->next[slot] < total) {
        ns_chunk_t c;
        memset(&c, 0, sizeof c);
        memcpy(c.job_id, q->job_id, NS_HASH_BYTES);
        c.blob = blob;
        c.offset = q->next[slot];
        c.len =
            (uint32_t)(total - c.offset > NS_CHUNK_BYTES ? NS_CHUNK_BYTES
                                                         : total - c.offset);
        if (ns_fetch_encode(&c, &q->body) != NS_OK ||
            ns_p2p_send(q->p2p, q->winner.provider, NS_MSG_MKT_FETCH,
                        q->body.data, q->body.len) != NS_OK)
            return false;
        q->next[slot] += c.len;
        q->in_flight++;
    }
    return q->got[slot] >= total;
}

static void s_fetch_outputs(s_req_t *q)
{
    if (!s_fetch_slot(q, NS_MAX_ARGS, S_BLOB_STATEMENT, NS_SIG_BYTES))
        return;
    for (uint32_t i = 0; i < q->spec.job.n_args; i++)
        if (q->spec.job.args[i].kind == NS_ARG_OUT &&
            !s_fetch_slot(q, i, NS_BLOB_OUTPUT(i), q->spec.job.args[i].size))
            return;
    if (q->phase == R_FETCH)
        s_phase(q, R_VERIFY);
}

static void s_announce(s_req_t *q)
{
    /* After a SLASH every node re-runs the disputed item before it reads
     * the next announcement: give bids that much longer to arrive. */
    q->ann.bid_window_ms = q->bid_window_ms + (q->slashed ? 2000 : 0);
    if (!q->t_announce_ms)
        q->t_announce_ms = ns_mono_ms();
    q->round++;
    q->ann.round = q->round;
    q->n_bids = 0;
    if (ns_announce_encode(&q->ann, &q->body) != NS_OK ||
        ns_p2p_publish(q->p2p, NS_MSG_MKT_JOB, q->body.data, q->body.len) !=
            NS_OK) {
        s_fail(q, "cannot announce the job");
        return;
    }
    s_say(q, "auction round %u: job %.16s announced, bids for %u ms", q->round,
          q->job_hex, q->ann.bid_window_ms);
    s_phase(q, R_BIDDING);
}

static void s_award(s_req_t *q)
{
    int64_t rep[S_MAX_BIDS];
    for (uint32_t i = 0; i < q->n_bids; i++) {
        ns_account_t a;
        rep[i] = ns_ledger_account(q->ledger, q->bids[i].provider, &a) == NS_OK
                     ? ns_reputation(&a)
                     : 0;
    }
    int w = ns_auction_pick(q->bids, rep, q->bid_us, q->n_bids, q->max_price,
                            &q->ann);
    if (w < 0) {
        char why[sizeof q->error];
        s_explain(q);
        snprintf(why, sizeof why, "%s", q->error);
        s_cancel(q, NULL, false);
        s_fail(q, "%s", why);
        return;
    }
    q->winner = q->bids[w];
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, q->job_id, NS_HASH_BYTES);
    b.bid = q->winner;
    if (s_append(q, NS_ENTRY_AWARD, &b, q->award_id) != NS_OK) {
        s_fail(q, "the ledger refused the award");
        return;
    }
    /* Tell the winner, with our JOB and AWARD entries. */
    ns_account_t me;
    uint8_t *je = NULL, *ae = NULL;
    size_t jl = 0, al = 0;
    if (ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me) != NS_OK ||
        ns_ledger_get(q->ledger, ns_identity_pk(q->me), q->job_seq, &je, &jl) !=
            NS_OK ||
        ns_ledger_get(q->ledger, ns_identity_pk(q->me), me.seq, &ae, &al) !=
            NS_OK) {
        free(je);
        s_fail(q, "cannot read our own entries back");
        return;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, q->job_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, je, jl);
    ns_mp_bin(&pk, ae, al);
    int rc = ns_p2p_send(q->p2p, q->winner.provider, NS_MSG_MKT_AWARDED,
                         (const uint8_t *)sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    free(je);
    free(ae);
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, q->winner.provider);
    s_say(q, "%u bids; awarded to %s at %llu credits (est. %llu ms)%s",
          q->n_bids, who, (unsigned long long)q->winner.price,
          (unsigned long long)q->winner.est_ms,
          rc == NS_OK ? "" : " (provider not reachable yet)");
    s_phase(q, R_ACCEPT);
}

static void s_restart(s_req_t *q, const char *why)
{
    char who[NS_ID_SHORT_LEN + 1];
    ns_id_short(who, q->winner.provider);
    s_say(q, "provider %s %s: excluded, new auction", who, why);
    s_exclude(q, q->winner.provider);
    memset(q->got, 0, sizeof q->got);
    memset(q->next, 0, sizeof q->next);
    q->in_flight = 0;
    s_announce(q);
}

static void s_verify(s_req_t *q)
{
    ns_ledger_job_t lj;
    char err[512];
    if (ns_ledger_job(q->ledger, q->job_id, &lj) != NS_OK) {
        s_fail(q, "job vanished from the ledger");
        return;
    }
    s_say(q, "outputs received; checking %u random items of %llu",
          ns_job_checks(&q->spec.job) < q->n_items ? ns_job_checks(&q->spec.job)
                                                   : (uint32_t)q->n_items,
          (unsigned long long)q->n_items);
    randombytes_buf(q->secret, sizeof q->secret);
    int rc =
        ns_spot_check(q->runner, &q->spec.job, q->desc_id, q->spec.inputs,
                      q->spec.outputs, lj.root, q->secret,
                      ns_job_checks(&q->spec.job), &q->check, err, sizeof err);
    q->verify_ms = q->check.verify_us / 1000;
    if (rc == NS_ERR_PROOF) {
        /* The outputs are not the ones it committed to. */
        s_cancel(q, NULL, true);
        s_restart(q, "sent outputs that do not match its commitment");
        return;
    }
    if (rc != NS_OK) {
        s_fail(q, "cannot run the check on our device: %s", err);
        return;
    }
    if (q->check.mismatched == 0) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        memcpy(b.job_id, q->job_id, NS_HASH_BYTES);
        memcpy(b.ref_id, lj.result_id, NS_HASH_BYTES);
        if (s_append(q, NS_ENTRY_SETTLE, &b, id) != NS_OK) {
            s_fail(q, "the ledger refused the settlement");
            return;
        }
        q->price = lj.price;
        q->refund = lj.escrow - lj.price;
        q->t_verified_ms = ns_mono_ms();
        if (ns_jobspec_write_outputs(&q->spec, q->error, sizeof q->error) !=
            NS_OK) {
            s_fail(q, "%s", q->error);
            return;
        }
        s_say(q, "verified: %u/%u items match; settled, outputs written",
              q->check.checked, q->check.checked);
        s_phase(q, R_DONE);
        return;
    }
    /* Fraud: prove it to everyone and move on. */
    ns_fraud_proof_t proof;
    ns_buf_t packed;
    ns_buf_init(&packed);
    rc =
        ns_fraud_build(&proof, &q->spec.job, q->desc_id, q->winner.provider,
                       q->statement, NULL, q->spec.outputs, q->check.first_bad);
    if (rc == NS_OK)
        rc = ns_slash_proof_pack(&proof, q->spec.inputs, &packed);
    ns_fraud_release(&proof);
    if (rc == NS_OK) {
        ns_entry_body_t b;
        ns_hash_t id;
        memset(&b, 0, sizeof b);
        memcpy(b.job_id, q->job_id, NS_HASH_BYTES);
        memcpy(b.ref_id, lj.result_id, NS_HASH_BYTES);
        b.proof = packed.data;
        b.proof_len = packed.len;
        rc = s_append(q, NS_ENTRY_SLASH, &b, id);
    }
    ns_buf_release(&packed);
    if (rc != NS_OK) {
        /* Could not slash (the statement signature was bad, ...): at least
         * free the job for someone else. */
        s_cancel(q, NULL, true);
    } else {
        q->slashed++;
    }
    char why[128];
    snprintf(why, sizeof why, "failed the check (%u of %u items wrong)%s",
             q->check.mismatched, q->check.checked,
             rc == NS_OK ? ", slashed with a fraud proof" : "");
    s_restart(q, why);
}

static bool s_ledger_current(void *u, const uint8_t *id,
                             const ns_heartbeat_t *hb)
{
    (void)id;
    const ns_hash_t *digest = u;
    return memcmp(hb->ledger_digest, *digest, NS_HASH_BYTES) == 0;
}

static void s_step(void *user, uint64_t now)
{
    s_req_t *q = user;
    if (q->stop)
        return;
    if (q->timeout_s && now - q->t_start_ms > q->timeout_s * 1000) {
        s_fail(q,
               "gave up after %llu s in phase %s (resume with --resume "
               "%s)",
               (unsigned long long)q->timeout_s, s_phase_names[q->phase],
               q->job_hex);
        return;
    }
    ns_ledger_job_t lj;
    switch (q->phase) {
    case R_JOIN: {
        /* At least one peer, and our ledger agreeing with one of them (or
         * a few seconds of sync). */
        ns_ledger_stats_t st;
        uint8_t peer[NS_ID_BYTES];
        ns_ledger_stats(q->ledger, &st);
        uint32_t live = ns_p2p_live_peers(q->p2p);
        if (live == 0) {
            if (now - q->phase_ms > 15000)
                s_fail(q, "could not reach any peer through the bootstrap "
                          "address");
            break;
        }
        /* Let peer exchange settle (no new peer for 500 ms) and the ledger
         * agree with a peer's, or give up waiting after 5 s. */
        if (live != q->join_peers) {
            q->join_peers = live;
            q->join_stable_ms = now;
        }
        bool settled = now - q->join_stable_ms >= 500;
        bool current = ns_p2p_pick_peer(q->p2p, s_ledger_current, st.digest,
                                        peer) == NS_OK;
        if ((!settled || !current) && now - q->phase_ms < 5000)
            break;
        s_say(q, "joined: %u peers, ledger at %llu entries",
              ns_p2p_live_peers(q->p2p), (unsigned long long)st.entries);
        if (q->resume) {
            s_phase(q, R_ANNOUNCE);
            if (ns_ledger_job(q->ledger, q->job_id, &lj) == NS_OK &&
                lj.state == NS_JOB_AWARDED) {
                memcpy(q->winner.provider, lj.provider, NS_ID_BYTES);
                memcpy(q->award_id, lj.award_id, NS_HASH_BYTES);
                s_phase(q, R_RUNNING);
                s_say(q, "resuming: job already awarded, waiting for its "
                         "result");
            } else if (ns_ledger_job(q->ledger, q->job_id, &lj) == NS_OK &&
                       lj.state != NS_JOB_OPEN) {
                s_fail(q, "job %.16s is already %s", q->job_hex,
                       lj.state == NS_JOB_SETTLED ? "settled" : "cancelled");
            } else if (ns_ledger_job(q->ledger, q->job_id, &lj) == NS_OK) {
                s_announce(q);
            }
            break;
        }
        s_phase(q, R_ANNOUNCE);
        break;
    }
    case R_ANNOUNCE: {
        ns_entry_body_t b;
        ns_hash_t id;
        ns_account_t me;
        memset(&b, 0, sizeof b);
        memcpy(b.job_id, q->job_id, NS_HASH_BYTES);
        b.escrow = q->max_price;
        b.max_price = q->max_price;
        b.collateral = q->collateral;
        b.deadline_ms = q->ann.deadline_ms;
        memcpy(b.desc_id, q->desc_id, NS_HASH_BYTES);
        memcpy(b.nonce, q->nonce, sizeof b.nonce);
        if (s_append(q, NS_ENTRY_JOB, &b, id) != NS_OK) {
            ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me) == NS_OK
                ? s_fail(q, "cannot lock %llu credits of escrow: %llu free",
                         (unsigned long long)q->max_price,
                         (unsigned long long)me.free)
                : s_fail(q, "cannot post the job");
            break;
        }
        if (ns_ledger_account(q->ledger, ns_identity_pk(q->me), &me) == NS_OK)
            q->job_seq = me.seq;
        s_say(q, "escrow of %llu credits locked (job entry %llu)",
              (unsigned long long)q->max_price, (unsigned long long)q->job_seq);
        s_announce(q);
        break;
    }
    case R_BIDDING:
        if (now - q->phase_ms >= q->ann.bid_window_ms)
            s_award(q);
        break;
    case R_ACCEPT:
        if (ns_ledger_job(q->ledger, q->job_id, &lj) == NS_OK &&
            !sodium_is_zero(lj.accept_id, NS_HASH_BYTES)) {
            q->t_accept_ms = now;
            q->match_ms = now - q->t_announce_ms;
            s_say(q, "accepted: collateral %llu locked; sending the job",
                  (unsigned long long)lj.collateral);
            s_phase(q, R_RUNNING);
        } else if (now - q->phase_ms > S_ACCEPT_MS) {
            s_cancel(q, NULL, true);
            s_restart(q, "did not accept in time");
        }
        break;
    case R_RUNNING:
        if (ns_ledger_job(q->ledger, q->job_id, &lj) != NS_OK)
            break;
        if (!sodium_is_zero(lj.result_id, NS_HASH_BYTES)) {
            q->t_result_ms = now;
            q->run_ms = now - (q->t_accept_ms ? q->t_accept_ms : q->phase_ms);
            s_say(q,
                  "result committed (root %02x%02x%02x%02x...); fetching "
                  "outputs",
                  lj.root[0], lj.root[1], lj.root[2], lj.root[3]);
            s_phase(q, R_FETCH);
            s_fetch_outputs(q);
        } else if (ns_now_ms() > lj.deadline_ms) {
            s_cancel(q, lj.accept_id, true);
            s_restart(q, "missed the deadline (penalty taken from its "
                         "collateral)");
        } else if (q->tty && (now - q->phase_ms) % 1000 < 10) {
            s_say(q, "running... %llu s",
                  (unsigned long long)((now - q->phase_ms) / 1000));
        }
        break;
    case R_FETCH:
        if (now - q->phase_ms > S_FETCH_MS) {
            s_cancel(q, NULL, true);
            s_restart(q, "did not deliver its outputs");
        } else {
            s_fetch_outputs(q);
        }
        break;
    case R_VERIFY:
        s_verify(q);
        break;
    case R_DONE:
        /* give gossip a moment to carry the SETTLE out */
        if (now - q->phase_ms > 300)
            q->stop = 1;
        break;
    case R_FAILED:
        q->stop = 1;
        break;
    }
}

/* ---- setup ------------------------------------------------------------------
 */

static const char s_usage[] =
    "usage: nightshift submit --datadir D --bootstrap ID@tcp://HOST:PORT\n"
    "                         JOB-FLAGS --max-price CREDITS [--json]\n"
    "       nightshift submit --datadir D --bootstrap ADDR --resume JOB_ID\n"
    "\n"
    "Post one job to the network as a light peer with D's key and ledger:\n"
    "lock the escrow, run a reverse auction, hand the job to the cheapest\n"
    "qualified provider, check its result by challenge-response (k random\n"
    "items re-run here), then settle and write the outputs -- or slash the\n"
    "cheater with a fraud proof and start again without it.\n"
    "\n"
    "JOB-FLAGS as for `nightshift run` (--kernel FILE.cl | --builtin NAME,\n"
    "--entry, --global, --local, --arg..., --tolerance, --checks K).\n"
    "Requirements and terms:\n"
    "  --max-price CREDITS   escrow; bids above it lose (required)\n"
    "  --collateral C        provider's stake locked (default max-price/2)\n"
    "  --min-mem BYTES       device global memory\n"
    "  --device gpu|cpu|any  device type (default any)\n"
    "  --min-cl X.Y          OpenCL C version\n"
    "  --region R            provider region\n"
    "  --bid-window-ms N     auction length (default 300)\n"
    "  --deadline-s N        result due within (default 120)\n"
    "  --timeout-s N         give up after (default 600)\n"
    "  --listen EP           where providers reach us (default an ephemeral\n"
    "                        port on 127.0.0.1)\n"
    "  --json                one JSON document: job, provider, price, refund,\n"
    "                        status (settled|failed), error, checks,\n"
    "                        timings_ms {match, run, verify, total}\n"
    "\n"
    "Exit status 0 only when the job was verified and settled.\n";

static int s_parse(s_req_t *q, int argc, char **argv)
{
    for (int i = 1; i < argc;) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n = 0;
#define NUM(flag, dst)                                                         \
    if (strcmp(a, flag) == 0) {                                                \
        if (!v || ns_parse_u64(v, &n) != NS_OK) {                              \
            ns_cli_error("submit", "%s needs a whole number", flag);           \
            return 2;                                                          \
        }                                                                      \
        dst = n;                                                               \
        i += 2;                                                                \
        continue;                                                              \
    }
        NUM("--max-price", q->max_price)
        NUM("--collateral", q->collateral)
        NUM("--min-mem", q->reqs.min_mem_bytes)
        NUM("--bid-window-ms", q->bid_window_ms)
        NUM("--deadline-s", q->deadline_s)
        NUM("--timeout-s", q->timeout_s)
#undef NUM
        if (strcmp(a, "--json") == 0) {
            q->json = 1;
            i++;
            continue;
        }
        if (v && strcmp(a, "--datadir") == 0) {
            q->datadir = v;
        } else if (v && strcmp(a, "--bootstrap") == 0) {
            if (q->n_bootstrap < NS_MAX_BOOTSTRAP)
                q->bootstrap[q->n_bootstrap++] = v;
        } else if (v && strcmp(a, "--listen") == 0) {
            q->listen = v;
        } else if (v && strcmp(a, "--resume") == 0) {
            q->resume = v;
        } else if (v && strcmp(a, "--region") == 0) {
            snprintf(q->reqs.region, sizeof q->reqs.region, "%s", v);
        } else if (v && strcmp(a, "--min-cl") == 0) {
            if (sscanf(v, "%u.%u", &q->reqs.min_cl_major,
                       &q->reqs.min_cl_minor) != 2) {
                ns_cli_error("submit", "--min-cl wants X.Y, e.g. 1.2");
                return 2;
            }
        } else if (v && strcmp(a, "--device") == 0) {
            if (strcmp(v, "gpu") == 0)
                q->reqs.device_type = NS_DEV_GPU;
            else if (strcmp(v, "cpu") == 0)
                q->reqs.device_type = NS_DEV_CPU;
            else if (strcmp(v, "any") == 0)
                q->reqs.device_type = 0;
            else {
                ns_cli_error("submit", "--device wants gpu, cpu or any");
                return 2;
            }
        } else {
            int rc = ns_jobspec_flag(&q->spec, "submit", argc, argv, &i);
            if (rc == 1)
                continue;
            if (rc == 0) {
                ns_cli_error("submit", "unknown argument '%s' (see --help)", a);
                return 2;
            }
            return -rc;
        }
        i += 2;
    }
    if (!q->datadir || q->n_bootstrap == 0) {
        ns_cli_error("submit", "--datadir and --bootstrap are required (see "
                               "--help)");
        return 2;
    }
    if (!q->resume && q->max_price == 0) {
        ns_cli_error("submit", "--max-price CREDITS is required");
        return 2;
    }
    return 0;
}

/* <datadir>/jobs/<job>/{job.msgpack, in<i>.bin, out<i>.path, terms}:
 * enough to resume after a crash. */
static int s_save(s_req_t *q)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/jobs/%s", q->datadir, q->job_hex);
    if (ns_mkdir_p(dir, 0700) != NS_OK)
        return NS_ERR_IO;
    snprintf(path, sizeof path, "%s/job.msgpack", dir);
    int rc = ns_file_write_atomic(path, q->packed.data, q->packed.len, 0600);
    for (uint32_t i = 0; rc == NS_OK && i < q->spec.job.n_args; i++) {
        if (q->spec.job.args[i].kind == NS_ARG_IN) {
            snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
            rc = ns_file_write_atomic(path, q->spec.in_bufs[i],
                                      q->spec.job.args[i].size, 0600);
        } else if (q->spec.job.args[i].kind == NS_ARG_OUT &&
                   q->spec.out_paths[i]) {
            char real[PATH_MAX];
            const char *p = realpath(q->spec.out_paths[i], real)
                                ? real
                                : q->spec.out_paths[i];
            snprintf(path, sizeof path, "%s/out%u.path", dir, i);
            rc = ns_file_write_atomic(path, p, strlen(p), 0600);
        }
    }
    return rc;
}

static int s_load(s_req_t *q)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], err[256];
    static char out_paths[NS_MAX_ARGS][PATH_MAX];
    snprintf(dir, sizeof dir, "%s/jobs/%s", q->datadir, q->resume);
    snprintf(path, sizeof path, "%s/job.msgpack", dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ns_file_read(path, NS_MAX_JOB_MSG, &buf, &len) != NS_OK) {
        ns_cli_error("submit", "no saved job %s in %s/jobs", q->resume,
                     q->datadir);
        return 1;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, buf, len);
    int rc = ns_job_read(&r, &q->spec.job, err, sizeof err);
    free(buf);
    if (rc != NS_OK) {
        ns_cli_error("submit", "saved job is unreadable: %s", err);
        return 1;
    }
    for (uint32_t i = 0; i < q->spec.job.n_args; i++) {
        if (q->spec.job.args[i].kind == NS_ARG_IN) {
            snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
            if (ns_file_read(path, NS_MAX_BUFFER, &q->spec.in_bufs[i], &len) !=
                NS_OK)
                return 1;
            q->spec.inputs[i].data = q->spec.in_bufs[i];
            q->spec.inputs[i].len = len;
        } else if (q->spec.job.args[i].kind == NS_ARG_OUT) {
            uint8_t *p = NULL;
            snprintf(path, sizeof path, "%s/out%u.path", dir, i);
            if (ns_file_read(path, PATH_MAX - 1, &p, &len) == NS_OK) {
                snprintf(out_paths[i], PATH_MAX, "%s", (char *)p);
                q->spec.out_paths[i] = out_paths[i];
                free(p);
            }
        }
    }
    return 0;
}

static void s_print_receipt(s_req_t *q)
{
    uint64_t total = ns_mono_ms() - q->t_start_ms;
    char who[NS_ID_TEXT_LEN + 1] = "";
    if (!sodium_is_zero(q->winner.provider, NS_ID_BYTES))
        ns_id_text(who, q->winner.provider);
    bool ok = q->phase == R_DONE;
    if (q->json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, ok ? 10 : 11);
        ns_mp_str(&pk, "job");
        ns_mp_str(&pk, q->job_hex);
        ns_mp_str(&pk, "provider");
        ns_mp_str(&pk, who);
        ns_mp_str(&pk, "price");
        msgpack_pack_uint64(&pk, q->price);
        ns_mp_str(&pk, "refund");
        msgpack_pack_uint64(&pk, q->refund);
        ns_mp_str(&pk, "status");
        ns_mp_str(&pk, ok ? "settled" : "failed");
        if (!ok) {
            ns_mp_str(&pk, "error");
            ns_mp_str(&pk, q->error);
        }
        ns_mp_str(&pk, "checks");
        msgpack_pack_uint32(&pk, q->check.checked);
        ns_mp_str(&pk, "rounds");
        msgpack_pack_uint32(&pk, q->round);
        ns_mp_str(&pk, "slashed");
        msgpack_pack_uint32(&pk, q->slashed);
        ns_mp_str(&pk, "cancelled");
        msgpack_pack_uint32(&pk, q->cancelled);
        ns_mp_str(&pk, "timings_ms");
        msgpack_pack_map(&pk, 4);
        ns_mp_str(&pk, "match");
        msgpack_pack_uint64(&pk, q->match_ms);
        ns_mp_str(&pk, "run");
        msgpack_pack_uint64(&pk, q->run_ms);
        ns_mp_str(&pk, "verify");
        msgpack_pack_uint64(&pk, q->verify_ms);
        ns_mp_str(&pk, "total");
        msgpack_pack_uint64(&pk, total);
        ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return;
    }
    if (!ok) {
        ns_cli_error("submit", "%s", q->error);
        return;
    }
    printf("receipt\n  job       %s\n  provider  %s\n  price     %llu "
           "credits (refund %llu)\n  checks    %u items re-run, all "
           "matched\n  rounds    %u (slashed %u, cancelled %u)\n  timings "
           "  match %llu ms, run %llu ms, verify %llu ms, total %llu ms\n",
           q->job_hex, who, (unsigned long long)q->price,
           (unsigned long long)q->refund, q->check.checked, q->round,
           q->slashed, q->cancelled, (unsigned long long)q->match_ms,
           (unsigned long long)q->run_ms, (unsigned long long)q->verify_ms,
           (unsigned long long)total);
}

int ns_cmd_submit(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_req_t *q = calloc(1, sizeof *q);
    if (!q)
        return 1;
    ns_jobspec_init(&q->spec);
    ns_buf_init(&q->packed);
    ns_buf_init(&q->body);
    q->bid_window_ms = 300;
    q->deadline_s = 120;
    q->timeout_s = 600;
    q->tty = isatty(STDERR_FILENO);
    q->t_start_ms = ns_mono_ms();
    int status = s_parse(q, argc, argv), rc = NS_OK, lock_fd = -1;
    char path[PATH_MAX], err[512] = "";
    if (status)
        goto out;
    status = 1;
    ns_log_threshold = NS_LOG_ERROR;
    if (q->resume) {
        if (s_load(q))
            goto out;
    } else if ((status = ns_jobspec_prepare(&q->spec, "submit")) != 0) {
        goto out;
    }
    status = 1;
    if (q->collateral == 0)
        q->collateral = q->max_price / 2 ? q->max_price / 2 : 1;
    {
        msgpack_packer pk;
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        ns_job_pack(&pk, &q->spec.job);
        rc = ns_buf_append(&q->packed, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    }
    if (rc != NS_OK || ns_job_id(&q->spec.job, q->desc_id) != NS_OK) {
        ns_cli_error("submit", "cannot encode the job");
        goto out;
    }
    if (q->resume) {
        if (ns_unhex(q->job_id, NS_HASH_BYTES, q->resume) != NS_OK) {
            ns_cli_error("submit", "--resume wants a job id (64 hex digits)");
            goto out;
        }
    } else {
        /* The same descriptor may be submitted again: the market id adds
         * our id and a random nonce (ns_ledger_job_id), set once the key
         * is loaded. */
        randombytes_buf(q->nonce, sizeof q->nonce);
    }
    q->n_items = ns_job_items(&q->spec.job);
    for (uint32_t i = 0; i < q->spec.job.n_args; i++)
        if (q->spec.job.args[i].kind == NS_ARG_OUT && !q->spec.outputs[i]) {
            q->spec.outputs[i] = calloc(1, q->spec.job.args[i].size);
            if (!q->spec.outputs[i]) {
                ns_cli_error("submit", "out of memory for the outputs");
                goto out;
            }
        }

    /* One requester per datadir at a time (and not beside its node). */
    snprintf(path, sizeof path, "%s/node.lock", q->datadir);
    lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        ns_cli_error("submit",
                     "%s is in use (a node or another submit runs "
                     "on it)",
                     q->datadir);
        goto out;
    }
    snprintf(path, sizeof path, "%s/node.key", q->datadir);
    if ((rc = ns_identity_load(path, &q->me)) != NS_OK) {
        ns_cli_error("submit", "cannot load %s: %s", path, ns_strerror(rc));
        goto out;
    }
    snprintf(path, sizeof path, "%s/genesis.ini", q->datadir);
    if (ns_genesis_load(path, &q->genesis, err, sizeof err) != NS_OK) {
        ns_cli_error("submit", "no genesis: %s", err);
        goto out;
    }
    if (!q->resume)
        ns_ledger_job_id(q->job_id, ns_identity_pk(q->me), q->desc_id,
                         q->nonce);
    ns_hex(q->job_hex, q->job_id, NS_HASH_BYTES);
    if (!q->resume && s_save(q) != NS_OK) {
        ns_cli_error("submit", "cannot save the job under %s/jobs", q->datadir);
        goto out;
    }
    snprintf(path, sizeof path, "%s/ledger", q->datadir);
    q->ledger = ns_ledger_open(path, &q->genesis, &rc, err, sizeof err);
    if (!q->ledger) {
        ns_cli_error("submit", "%s", err);
        goto out;
    }
    char cache[PATH_MAX];
    ns_cache_dir(cache, sizeof cache);
    q->runner = ns_runner_new(0, cache[0] ? cache : NULL, &rc);
    if (!q->runner) {
        ns_cli_error("submit", "no OpenCL device to check results on: %s",
                     ns_strerror(rc));
        goto out;
    }
    ns_slash_ctx_t slash = {NULL, q->runner, NULL};
    ns_ledger_set_verifier(q->ledger, ns_slash_verify, &slash);

    ns_config_defaults(&q->cfg);
    snprintf(q->cfg.listen, sizeof q->cfg.listen, "%s",
             q->listen ? q->listen : "tcp://127.0.0.1:0");
    q->cfg.heartbeat_interval_ms = 1000;
    q->cfg.slots = 0;
    for (int i = 0; i < q->n_bootstrap; i++)
        if (ns_config_set(&q->cfg, "node", "bootstrap", q->bootstrap[i], err,
                          sizeof err) != NS_OK) {
            ns_cli_error("submit", "bad --bootstrap '%s'", q->bootstrap[i]);
            goto out;
        }
    ns_p2p_opts_t po = {&q->cfg, q->me, {0}, q->genesis.name, NULL, 0};
    memcpy(po.network_id, q->genesis.network_id, NS_HASH_BYTES);
    q->p2p = ns_p2p_new(&po, &rc);
    if (!q->p2p) {
        ns_cli_error("submit", "cannot listen on %s: %s", q->cfg.listen,
                     ns_strerror(rc));
        goto out;
    }
    q->sync = ns_ledger_sync_new(q->p2p, q->ledger, &rc);
    if (!q->sync ||
        ns_p2p_register(q->p2p, NS_MSG_MKT_JOB, true, s_on_ignore, q) ||
        ns_p2p_register(q->p2p, NS_MSG_MKT_BID, false, s_on_bid, q) ||
        ns_p2p_register(q->p2p, NS_MSG_MKT_FETCH, false, s_on_fetch, q) ||
        ns_p2p_register(q->p2p, NS_MSG_MKT_CHUNK, false, s_on_chunk, q) ||
        ns_p2p_add_timer(q->p2p, 5, s_step, q)) {
        ns_cli_error("submit", "cannot start the market");
        goto out;
    }

    /* The announcement, fixed for the whole job except round/excluded. */
    memcpy(q->ann.job_id, q->job_id, NS_HASH_BYTES);
    memcpy(q->ann.desc_id, q->desc_id, NS_HASH_BYTES);
    memcpy(q->ann.requester, ns_identity_pk(q->me), NS_ID_BYTES);
    snprintf(q->ann.endpoint, sizeof q->ann.endpoint, "%s",
             strchr(ns_p2p_address(q->p2p), '@') + 1);
    q->ann.reqs = q->reqs;
    q->ann.max_price = q->max_price;
    q->ann.collateral = q->collateral;
    q->ann.work_flops = q->spec.job.work_estimate ? q->spec.job.work_estimate
                                                  : q->n_items * 1000;
    q->ann.n_items = q->n_items;
    for (uint32_t i = 0; i < q->spec.job.n_args; i++)
        if (q->spec.job.args[i].kind == NS_ARG_IN)
            q->ann.input_bytes += q->spec.job.args[i].size;
    q->ann.bid_window_ms = q->bid_window_ms;
    q->ann.deadline_ms = ns_now_ms() + q->deadline_s * 1000;
    if (q->resume) {
        ns_ledger_job_t lj;
        if (ns_ledger_job(q->ledger, q->job_id, &lj) == NS_OK) {
            q->ann.deadline_ms = lj.deadline_ms;
            q->max_price = q->ann.max_price = lj.max_price;
            q->collateral = q->ann.collateral = lj.collateral;
        }
    }

    s_say(q, "job %.16s: %llu items, max price %llu credits", q->job_hex,
          (unsigned long long)q->n_items, (unsigned long long)q->max_price);
    s_phase(q, R_JOIN);
    s_stop_flag = &q->stop;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = ns_p2p_run(q->p2p, &q->stop);
    if (q->phase != R_DONE && q->phase != R_FAILED)
        snprintf(q->error, sizeof q->error,
                 "interrupted in phase %s; resume with `nightshift submit "
                 "--datadir %s --bootstrap ADDR --resume %s`",
                 s_phase_names[q->phase], q->datadir, q->job_hex);
    s_print_receipt(q);
    status = q->phase == R_DONE ? 0 : 1;
out:
    s_stop_flag = NULL;
    ns_ledger_sync_destroy(&q->sync);
    ns_p2p_destroy(&q->p2p);
    ns_runner_destroy(&q->runner);
    ns_ledger_close(&q->ledger);
    ns_genesis_release(&q->genesis);
    ns_identity_destroy(&q->me);
    ns_jobspec_release(&q->spec);
    ns_buf_release(&q->packed);
    ns_buf_release(&q->body);
    if (lock_fd >= 0)
        close(lock_fd);
    free(q);
    return status;
}
