/* ledger_votes.c - entries confirmed by the votes of staked accounts
 * (ledger_votes.h; docs/PROTOCOL.md, "Confirmation").
 *
 * The tally is a table of the latest NS_VOTE_TABLE entry ids voted on: a
 * ring of slots (the oldest is reused first) indexed by a chained hash of
 * the id. Each slot sums the stake of its distinct voters, weighed when
 * their vote is counted. What a node forgets (a restart, an id pushed out
 * of the ring) it asks again: every NS_VOTE_ASK_MS, the credits waiting
 * for a confirmation ask a peer for its votes (VOTE_REQ).
 *
 * A confirmation found while the ledger stores an entry (our own vote)
 * is acted on later, from the flush timer: the ledger is not re-entered
 * from its own hook.
 */
#include "nightshift/ledger_votes.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define S_PREFIX 8 /* bytes of a voter's key kept to tell voters apart */
#define S_NO_SLOT UINT32_MAX
#define S_BUCKETS (2 * NS_VOTE_TABLE)
#define S_ASK_IDS 64  /* credits asked about per round */
#define S_ASK_PEERS 3 /* peers asked per round */
#define S_STAKE_MOVED_MS 20
#define S_WATCH 64        /* fork branches watched at once */
#define S_WATCH_MS 120000 /* for this long after the fork was seen */

typedef struct {
    ns_hash_t id;
    uint64_t weight; /* stake of the distinct voters counted */
    uint32_t n, cap; /* voters */
    uint8_t *voters; /* n * S_PREFIX */
    uint32_t next;   /* in the bucket's chain */
    bool used, confirmed;
} s_slot_t;

struct ns_votes {
    ns_p2p_t *p2p;
    ns_ledger_t *ledger;
    uint8_t self[NS_ID_BYTES];
    s_slot_t *slots;   /* NS_VOTE_TABLE */
    uint32_t *buckets; /* S_BUCKETS heads */
    uint32_t ring;     /* the slot to reuse next */
    uint64_t total_stake, total_at_ms;
    bool stake_moved; /* a STAKE, UNSTAKE or SLASH since */
    uint64_t self_stake;
    ns_hash_t *outbox; /* our votes waiting for the flush */
    uint32_t n_out;
    ns_hash_t *adopt; /* ids confirmed since the adopt timer last ran */
    uint32_t n_adopt;
    uint32_t adopt_timer;
    ns_votes_confirmed_fn on_confirmed;
    void *on_confirmed_user;
    struct {
        ns_hash_t id;
        uint64_t until_ms; /* ns_mono_ms; 0: free */
    } watch[S_WATCH];      /* fork branches whose confirmation we ask */
    uint32_t flush_timer, ask_timer;
    uint64_t ask_entries; /* ledger entries at the last ask round */
    bool ask_waiting;     /* and it found ids still waiting */
    ns_buf_t body;
    struct {
        uint64_t sent, received, unstaked, counted, confirmed, adopted;
        uint64_t asked, answered;
    } stats;
};

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

/* ---- stake --------------------------------------------------------------- */

/* An account's stake, as votes weigh it: staked, and what of it is
 * locked as collateral in jobs (ACCEPT moves stake there and the job's
 * end moves it back: the sum stays put while jobs run). */
static uint64_t s_weight(const ns_account_t *a)
{
    return a->staked > UINT64_MAX - a->locked_collateral
               ? UINT64_MAX
               : a->staked + a->locked_collateral;
}

static bool s_add_stake(void *u, const ns_account_t *a)
{
    uint64_t *sum = u;
    uint64_t w = s_weight(a);
    *sum = *sum > UINT64_MAX - w ? UINT64_MAX : *sum + w;
    return true;
}

/* The sum of all stake, and ours: read again (a walk over every account)
 * at most every S_STAKE_MOVED_MS after stake moved (a STAKE, UNSTAKE or
 * SLASH stored, a fork voided entries), and at least every
 * NS_VOTE_STAKE_MS whatever happened (a failed commit rolls stake back
 * without a word). */
static void s_refresh_stake(ns_votes_t *v)
{
    uint64_t now = ns_mono_ms();
    uint64_t age = now - v->total_at_ms;
    if (v->total_at_ms &&
        (v->stake_moved ? age < S_STAKE_MOVED_MS : age < NS_VOTE_STAKE_MS))
        return;
    v->stake_moved = false;
    uint64_t sum = 0;
    ns_ledger_each_account(v->ledger, s_add_stake, &sum);
    v->total_stake = sum;
    ns_account_t me;
    v->self_stake =
        ns_ledger_account(v->ledger, v->self, &me) == NS_OK ? s_weight(&me) : 0;
    v->total_at_ms = now;
}

static bool s_quorum(const ns_votes_t *v, uint64_t weight)
{
    uint64_t t = v->total_stake; /* more than half: 2 * weight > t */
    return t > 0 && (weight >= t || weight > t - weight);
}

/* ---- the tally ----------------------------------------------------------- */

static uint32_t s_bucket(const ns_hash_t id)
{
    uint32_t h;
    memcpy(&h, id, sizeof h); /* ids are hashes: any 4 bytes will do */
    return h % S_BUCKETS;
}

static s_slot_t *s_find(ns_votes_t *v, const ns_hash_t id)
{
    for (uint32_t i = v->buckets[s_bucket(id)]; i != S_NO_SLOT;
         i = v->slots[i].next)
        if (memcmp(v->slots[i].id, id, NS_HASH_BYTES) == 0)
            return &v->slots[i];
    return NULL;
}

/* A slot for id: found, or the oldest one reused. */
static s_slot_t *s_slot(ns_votes_t *v, const ns_hash_t id)
{
    s_slot_t *s = s_find(v, id);
    if (s)
        return s;
    uint32_t i = v->ring;
    v->ring = (v->ring + 1) % NS_VOTE_TABLE;
    s = &v->slots[i];
    if (s->used) { /* unlink it from its chain */
        uint32_t *p = &v->buckets[s_bucket(s->id)];
        while (*p != S_NO_SLOT && *p != i)
            p = &v->slots[*p].next;
        if (*p == i)
            *p = s->next;
    }
    uint8_t *voters = s->voters;
    uint32_t cap = s->cap;
    memset(s, 0, sizeof *s);
    s->voters = voters;
    s->cap = cap;
    memcpy(s->id, id, NS_HASH_BYTES);
    s->used = true;
    uint32_t b = s_bucket(id);
    s->next = v->buckets[b];
    v->buckets[b] = i;
    return s;
}

static void s_queue_adopt(ns_votes_t *v, const ns_hash_t id);

/* Count voter's vote (its stake: stake) for id. */
static void s_count(ns_votes_t *v, const uint8_t voter[NS_ID_BYTES],
                    uint64_t stake, const ns_hash_t id)
{
    s_slot_t *s = s_slot(v, id);
    for (uint32_t i = 0; i < s->n; i++)
        if (memcmp(s->voters + (size_t)i * S_PREFIX, voter, S_PREFIX) == 0)
            return;
    if (s->n == NS_VOTE_VOTERS)
        return;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        if (cap > NS_VOTE_VOTERS)
            cap = NS_VOTE_VOTERS;
        uint8_t *grown = realloc(s->voters, (size_t)cap * S_PREFIX);
        if (!grown)
            return;
        s->voters = grown;
        s->cap = cap;
    }
    memcpy(s->voters + (size_t)s->n++ * S_PREFIX, voter, S_PREFIX);
    s->weight = s->weight > UINT64_MAX - stake ? UINT64_MAX : s->weight + stake;
    v->stats.counted++;
    if (!s->confirmed && s_quorum(v, s->weight)) {
        s->confirmed = true;
        v->stats.confirmed++;
        s_queue_adopt(v, id);
        if (ns_log_enabled(NS_LOG_DEBUG, NS_MOD_LEDGER)) {
            char hex[17]; /* for bench/bench_wan.py's confirm_ms */
            ns_hex(hex, id, 8);
            ns_debug(NS_MOD_LEDGER, "event=entry_confirmed id=%s", hex);
        }
    }
}

void ns_votes_set_on_confirmed(ns_votes_t *v, ns_votes_confirmed_fn fn,
                               void *user)
{
    v->on_confirmed = fn;
    v->on_confirmed_user = user;
}

ns_confirm_state ns_votes_state(ns_votes_t *v, const ns_hash_t id)
{
    s_refresh_stake(v);
    if (v->total_stake == 0)
        return NS_CONFIRM_NONE;
    s_slot_t *s = s_find(v, id);
    if (!s)
        return NS_CONFIRM_NO;
    if (!s->confirmed && s_quorum(v, s->weight))
        s->confirmed = true; /* stake left the network since */
    return s->confirmed ? NS_CONFIRM_YES : NS_CONFIRM_NO;
}

static ns_confirm_state s_confirm_hook(void *u, const ns_hash_t id)
{
    return ns_votes_state(u, id);
}

/* ---- our votes ----------------------------------------------------------- */

static void s_on_flush(void *user, uint64_t now);

static void s_arm_flush(ns_votes_t *v)
{
    if (!v->flush_timer &&
        ns_p2p_timer_start(v->p2p, NS_VOTE_FLUSH_MS, false, s_on_flush, v,
                           &v->flush_timer) != NS_OK)
        v->flush_timer = 0;
}

/* Our votes on an entry somebody waits on (a provider its AWARD, a
 * requester its RESULT) go out now, not at the next batch. */
static void s_flush_soon(ns_votes_t *v)
{
    if (v->flush_timer) {
        (void)ns_p2p_timer_cancel(v->p2p, v->flush_timer);
        v->flush_timer = 0;
    }
    if (ns_p2p_timer_start(v->p2p, 0, false, s_on_flush, v, &v->flush_timer) !=
        NS_OK)
        v->flush_timer = 0;
}

/* Entries just confirmed: those a fork voided here go back in place, and
 * whoever waits on a confirmation hears of it, once this loop turn's
 * messages are in (not from inside the tally). */
static void s_on_adopt(void *user, uint64_t now)
{
    (void)now;
    ns_votes_t *v = user;
    v->adopt_timer = 0;
    uint32_t n = v->n_adopt;
    v->n_adopt = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ns_ledger_reconsider(v->ledger, v->adopt[i]) == NS_OK)
            v->stats.adopted++;
    for (uint32_t i = 0; v->on_confirmed && i < n; i++)
        v->on_confirmed(v->on_confirmed_user, v->adopt[i]);
}

static void s_queue_adopt(ns_votes_t *v, const ns_hash_t id)
{
    if (v->n_adopt < NS_VOTE_IDS_MAX)
        memcpy(v->adopt[v->n_adopt++], id, NS_HASH_BYTES);
    if (!v->adopt_timer && ns_p2p_timer_start(v->p2p, 0, false, s_on_adopt, v,
                                              &v->adopt_timer) != NS_OK)
        v->adopt_timer = 0;
}

/* The ledger stored e: our vote, when we hold stake. */
static void s_on_stored(void *u, const ns_entry_t *e)
{
    ns_votes_t *v = u;
    if (e->type == NS_ENTRY_STAKE || e->type == NS_ENTRY_UNSTAKE ||
        e->type == NS_ENTRY_SLASH)
        v->stake_moved = true; /* weigh again, soon */
    /* Old entries (a catch-up) are not voted for unasked: their credits
     * were taken in long ago, or ask (VOTE_REQ) when they are. */
    uint64_t now = ns_now_ms();
    if (e->timestamp_ms < now && now - e->timestamp_ms > NS_VOTE_RECENT_MS)
        return;
    s_refresh_stake(v);
    if (v->self_stake == 0)
        return;
    s_count(v, v->self, v->self_stake, e->id);
    if (v->n_out == NS_VOTE_IDS_MAX) /* a full batch: out it goes now */
        s_on_flush(v, 0);
    memcpy(v->outbox[v->n_out++], e->id, NS_HASH_BYTES);
    if (e->type == NS_ENTRY_AWARD || e->type == NS_ENTRY_RESULT)
        s_flush_soon(v); /* a provider, a requester waits on it */
    else
        s_arm_flush(v);
}

static int s_pack_ids(ns_buf_t *b, const ns_hash_t *ids, uint32_t n)
{
    S_PACKER(b, w, pk);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++)
        ns_mp_bin(&pk, ids[i], NS_HASH_BYTES);
    return w.err;
}

static void s_on_flush(void *user, uint64_t now)
{
    (void)now;
    ns_votes_t *v = user;
    v->flush_timer = 0;
    if (v->n_out > 0 && s_pack_ids(&v->body, v->outbox, v->n_out) == NS_OK &&
        ns_p2p_publish(v->p2p, NS_MSG_VOTE, v->body.data, v->body.len) == NS_OK)
        v->stats.sent += v->n_out;
    v->n_out = 0;
}

/* ---- messages ------------------------------------------------------------ */

/* ids of a VOTE or VOTE_REQ body into out (NS_VOTE_IDS_MAX). */
static int s_read_ids(const ns_envelope_t *env, ns_hash_t *out, uint32_t *n)
{
    ns_mpr_t r;
    ns_mpr_init(&r, env->body, env->body_len);
    ns_mpr_array(&r, n, NS_VOTE_IDS_MAX);
    for (uint32_t i = 0; i < *n && r.err == NS_OK; i++)
        ns_mpr_bin_exact(&r, out[i], NS_HASH_BYTES);
    return ns_mpr_end(&r);
}

static int s_on_vote(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_votes_t *v = user;
    ns_hash_t ids[NS_VOTE_IDS_MAX];
    uint32_t n = 0;
    int rc = s_read_ids(env, ids, &n);
    if (rc != NS_OK)
        return rc;
    ns_account_t voter;
    if (ns_ledger_account(v->ledger, env->sender, &voter) != NS_OK ||
        s_weight(&voter) == 0) {
        /* Dropped, not passed on; quietly: the voter's stake may just not
         * be here yet (its votes are asked again when needed). */
        v->stats.unstaked++;
        return NS_ERR_NOTFOUND;
    }
    s_refresh_stake(v);
    v->stats.received += n;
    for (uint32_t i = 0; i < n; i++)
        s_count(v, env->sender, s_weight(&voter), ids[i]);
    return NS_OK;
}

static int s_on_vote_req(void *user, const ns_envelope_t *env,
                         ns_p2p_src_t *src)
{
    ns_votes_t *v = user;
    ns_hash_t ids[NS_VOTE_IDS_MAX];
    uint32_t n = 0, held = 0;
    int rc = s_read_ids(env, ids, &n);
    if (rc != NS_OK)
        return rc;
    s_refresh_stake(v);
    if (v->self_stake == 0)
        return NS_OK; /* our vote counts for nothing */
    for (uint32_t i = 0; i < n; i++)
        if (ns_ledger_holds(v->ledger, ids[i]))
            memcpy(ids[held++], ids[i], NS_HASH_BYTES);
    if (held == 0)
        return NS_OK;
    v->stats.answered += held;
    if ((rc = s_pack_ids(&v->body, ids, held)) != NS_OK)
        return rc;
    /* Published (gossip passes it on, and knows it as ours when it comes
     * back) and sent straight to the asker as well. */
    (void)src;
    return ns_p2p_publish_also(v->p2p, NS_MSG_VOTE, v->body.data, v->body.len,
                               env->sender);
}

/* Ask for votes on id every round for a while (S_WATCH_MS more from
 * now), until it is decided. */
static void s_watch(ns_votes_t *v, const ns_hash_t id, uint64_t now)
{
    uint32_t slot = 0;
    for (uint32_t i = 0; i < S_WATCH; i++) {
        if (v->watch[i].until_ms &&
            memcmp(v->watch[i].id, id, NS_HASH_BYTES) == 0) {
            slot = i; /* watched already: for longer now */
            break;
        }
        if (v->watch[i].until_ms < v->watch[slot].until_ms)
            slot = i; /* a free one, or the one given up soonest */
    }
    memcpy(v->watch[slot].id, id, NS_HASH_BYTES);
    v->watch[slot].until_ms = now + S_WATCH_MS;
}

/* A fork: both branches' first entries are watched, so that the votes a
 * partition kept from us are asked for once it heals. */
static void s_on_fork(void *u, const ns_hash_t first, const ns_hash_t second)
{
    ns_votes_t *v = u;
    v->stake_moved = true; /* the void may have undone a STAKE */
    uint64_t now = ns_mono_ms();
    s_watch(v, first, now);
    s_watch(v, second, now);
}

/* A provider waits on an AWARD, a requester on a RESULT: their votes are
 * asked for too, in case some were missed. */
static void s_on_want(void *u, const ns_hash_t id)
{
    s_watch(u, id, ns_mono_ms());
}

/* Credits of ours that wait for a confirmation we may have missed (a
 * restart, a vote pushed out of the table), and fork branches: ask a few
 * peers. */
static void s_on_ask(void *user, uint64_t now)
{
    (void)now;
    ns_votes_t *v = user;
    /* The scan reads every credit: only when the ledger moved, or when
     * the last one found credits still waiting. */
    ns_ledger_stats_t st;
    ns_ledger_stats(v->ledger, &st);
    uint8_t refs[S_ASK_IDS * NS_HASH_BYTES];
    uint32_t n = 0;
    if (v->ask_waiting || st.entries != v->ask_entries)
        n = ns_ledger_unclaimed_all(v->ledger, v->self, refs, S_ASK_IDS);
    v->ask_entries = st.entries;
    ns_hash_t ask[S_ASK_IDS + S_WATCH];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ns_votes_state(v, refs + (size_t)i * NS_HASH_BYTES) ==
            NS_CONFIRM_NO)
            memcpy(ask[k++], refs + (size_t)i * NS_HASH_BYTES, NS_HASH_BYTES);
    uint64_t at = ns_mono_ms();
    for (uint32_t i = 0; i < S_WATCH; i++) {
        if (!v->watch[i].until_ms)
            continue;
        if (at > v->watch[i].until_ms ||
            ns_votes_state(v, v->watch[i].id) != NS_CONFIRM_NO)
            v->watch[i].until_ms = 0; /* decided, or given up */
        else
            memcpy(ask[k++], v->watch[i].id, NS_HASH_BYTES);
    }
    v->ask_waiting = k > 0;
    if (k == 0 || s_pack_ids(&v->body, ask, k) != NS_OK)
        return;
    /* A few peers a round: enough stake answers within a round or two
     * on a small network, without asking everyone on a big one. */
    uint8_t peers[S_ASK_PEERS][NS_ID_BYTES];
    uint32_t np = 0;
    for (uint32_t tries = 0; tries < 2 * S_ASK_PEERS && np < S_ASK_PEERS;
         tries++) {
        uint8_t peer[NS_ID_BYTES];
        if (ns_p2p_pick_peer(v->p2p, NULL, NULL, peer) != NS_OK)
            break;
        bool seen = false;
        for (uint32_t j = 0; j < np && !seen; j++)
            seen = memcmp(peers[j], peer, NS_ID_BYTES) == 0;
        if (seen)
            continue;
        memcpy(peers[np++], peer, NS_ID_BYTES);
        if (ns_p2p_send(v->p2p, peer, NS_MSG_VOTE_REQ, v->body.data,
                        v->body.len) == NS_OK)
            v->stats.asked += k;
    }
    /* Our own vote, if we hold stake now and did not when they came. */
    if (v->self_stake > 0)
        for (uint32_t i = 0; i < k; i++)
            if (ns_ledger_holds(v->ledger, ask[i])) {
                s_count(v, v->self, v->self_stake, ask[i]);
                if (v->n_out == NS_VOTE_IDS_MAX)
                    s_on_flush(v, 0);
                memcpy(v->outbox[v->n_out++], ask[i], NS_HASH_BYTES);
                s_arm_flush(v);
            }
}

/* ---- public -------------------------------------------------------------- */

ns_votes_t *ns_votes_new(ns_p2p_t *p, ns_ledger_t *l,
                         const uint8_t self[NS_ID_BYTES], int *err)
{
    ns_votes_t *v = calloc(1, sizeof *v);
    if (!v || !(v->slots = calloc(NS_VOTE_TABLE, sizeof *v->slots)) ||
        !(v->buckets = malloc(S_BUCKETS * sizeof *v->buckets)) ||
        !(v->outbox = malloc(NS_VOTE_IDS_MAX * sizeof *v->outbox)) ||
        !(v->adopt = malloc(NS_VOTE_IDS_MAX * sizeof *v->adopt))) {
        *err = NS_ERR_NOMEM;
        ns_votes_destroy(&v);
        return NULL;
    }
    for (uint32_t i = 0; i < S_BUCKETS; i++)
        v->buckets[i] = S_NO_SLOT;
    v->p2p = p;
    v->ledger = l;
    memcpy(v->self, self, NS_ID_BYTES);
    ns_buf_init(&v->body);
    int rc;
    if ((rc = ns_p2p_register(p, NS_MSG_VOTE, true, s_on_vote, v)) ||
        (rc = ns_p2p_register(p, NS_MSG_VOTE_REQ, false, s_on_vote_req, v)) ||
        (rc = ns_p2p_timer_start(p, NS_VOTE_ASK_MS, true, s_on_ask, v,
                                 &v->ask_timer))) {
        *err = rc;
        ns_votes_destroy(&v);
        return NULL;
    }
    (void)ns_p2p_timer_slack(p, v->ask_timer, NS_VOTE_ASK_MS / 2);
    ns_ledger_set_confirm(l, s_confirm_hook, v);
    ns_ledger_set_on_stored(l, s_on_stored, v);
    ns_ledger_set_on_fork(l, s_on_fork, v);
    ns_ledger_set_on_want(l, s_on_want, v);
    return v;
}

void ns_votes_destroy(ns_votes_t **pv)
{
    if (!pv || !*pv)
        return;
    ns_votes_t *v = *pv;
    if (v->ledger) {
        ns_ledger_set_confirm(v->ledger, NULL, NULL);
        ns_ledger_set_on_stored(v->ledger, NULL, NULL);
        ns_ledger_set_on_fork(v->ledger, NULL, NULL);
        ns_ledger_set_on_want(v->ledger, NULL, NULL);
    }
    if (v->p2p) {
        (void)ns_p2p_unregister(v->p2p, NS_MSG_VOTE);
        (void)ns_p2p_unregister(v->p2p, NS_MSG_VOTE_REQ);
        if (v->flush_timer)
            (void)ns_p2p_timer_cancel(v->p2p, v->flush_timer);
        if (v->adopt_timer)
            (void)ns_p2p_timer_cancel(v->p2p, v->adopt_timer);
        if (v->ask_timer)
            (void)ns_p2p_timer_cancel(v->p2p, v->ask_timer);
    }
    if (v->slots)
        for (uint32_t i = 0; i < NS_VOTE_TABLE; i++)
            free(v->slots[i].voters);
    free(v->slots);
    free(v->buckets);
    free(v->outbox);
    free(v->adopt);
    ns_buf_release(&v->body);
    free(v);
    *pv = NULL;
}

static void s_kv(msgpack_packer *pk, const char *k, uint64_t val)
{
    ns_mp_str(pk, k);
    msgpack_pack_uint64(pk, val);
}

void ns_votes_pack_status(ns_votes_t *v, msgpack_packer *pk)
{
    s_refresh_stake(v);
    msgpack_pack_map(pk, 10);
    s_kv(pk, "total_stake", v->total_stake);
    s_kv(pk, "our_stake", v->self_stake);
    s_kv(pk, "sent", v->stats.sent);
    s_kv(pk, "received", v->stats.received);
    s_kv(pk, "from_unstaked", v->stats.unstaked);
    s_kv(pk, "counted", v->stats.counted);
    s_kv(pk, "confirmed", v->stats.confirmed);
    s_kv(pk, "adopted", v->stats.adopted);
    s_kv(pk, "asked", v->stats.asked);
    s_kv(pk, "answered", v->stats.answered);
}
