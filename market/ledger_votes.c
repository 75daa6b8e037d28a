/* ledger_votes.c - entries confirmed by the votes of a bounded committee
 * of staked accounts (ledger_votes.h; docs/PROTOCOL.md, "Confirmation"
 * and "Committee").
 *
 * The committee is a table of at most NS_VOTE_SEATS_MAX members sorted by
 * id, read again from the ledger's accounts (one walk): within 20 ms
 * after stake moved while every staked account sits on it; else drawn
 * per epoch once stake has settled, and then left as it is until the
 * epoch ends, whatever stake does meanwhile (s_refresh_stake).
 *
 * The tally is a table of the latest NS_VOTE_TABLE entry ids voted on: a
 * ring of slots (the oldest is reused first) indexed by a chained hash of
 * the id. Each slot holds a bitmap of the members that voted (O(1) a
 * vote) and their weight. When the committee changes, every slot's bitmap
 * is carried over to the new table (its voters that are still members
 * keep their vote, with their new weight; the others drop out). What a
 * node forgets (a restart, an id pushed out of the ring, a vote from a
 * member it did not draw) it asks again: every NS_VOTE_ASK_MS, the
 * credits waiting for a confirmation ask a peer for its votes
 * (VOTE_REQ).
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

#define S_NO_SLOT UINT32_MAX
#define S_BUCKETS (2 * NS_VOTE_TABLE)
#define S_ASK_IDS 64  /* credits asked about per round */
#define S_ASK_PEERS 3 /* peers asked per round */
#define S_STAKE_MOVED_MS 20
#define S_WATCH 64        /* fork branches watched at once */
#define S_WATCH_MS 120000 /* for this long after the fork was seen */
#define S_DOMAIN "nightshift/committee/v1"

typedef struct {
    ns_hash_t id;
    uint64_t weight; /* of the members whose vote is counted */
    uint64_t voted;  /* bitmap: member i of table `gen` voted */
    uint64_t gen;    /* the committee table the bitmap indexes */
    uint32_t next;   /* in the bucket's chain */
    bool used, confirmed;
} s_slot_t;

/* A committee table and its generation (bumped at each change). */
typedef struct {
    ns_vote_member_t m[NS_VOTE_SEATS_MAX];
    uint32_t n;
    uint64_t weight; /* sum over members */
    uint64_t gen;
} s_table_t;

struct ns_votes {
    ns_p2p_t *p2p;
    ns_ledger_t *ledger;
    uint8_t self[NS_ID_BYTES];
    s_slot_t *slots;    /* NS_VOTE_TABLE */
    uint32_t *buckets;  /* S_BUCKETS heads */
    uint32_t ring;      /* the slot to reuse next */
    s_table_t cur, old; /* the committee, and the one before it */
    uint32_t seats;
    uint64_t epoch_ms;
    uint64_t epoch; /* of the last look */
    uint64_t settle_ms;
    bool drawn;        /* cur was drawn (more staked accounts than seats) */
    uint64_t frozen;   /* epoch + 1 whose draw holds until it ends; 0 */
    uint64_t moved_ms; /* ns_mono_ms of the last stake move */
    ns_hash_t seed;    /* of the last draw */
    uint64_t staked;   /* accounts holding stake at the last look */
    uint64_t total_at_ms;
    bool stake_moved;       /* a STAKE, UNSTAKE or SLASH since */
    uint64_t self_stake;    /* our weight on the committee (0: not a member) */
    ns_vote_member_t *walk; /* the accounts' stake, read by a look */
    uint32_t n_walk, cap_walk;
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
        uint64_t asked, answered, draws;
    } stats;
};

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

/* ---- the committee ------------------------------------------------------- */

/* An account's stake, as votes weigh it: staked, and what of it is
 * locked as collateral in jobs (ACCEPT moves stake there and the job's
 * end moves it back: the sum stays put while jobs run). */
static uint64_t s_weight(const ns_account_t *a)
{
    return a->staked > UINT64_MAX - a->locked_collateral
               ? UINT64_MAX
               : a->staked + a->locked_collateral;
}

static uint64_t s_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int s_by_id(const void *a, const void *b)
{
    return memcmp(((const ns_vote_member_t *)a)->id,
                  ((const ns_vote_member_t *)b)->id, NS_ID_BYTES);
}

static void s_be64(uint8_t out[8], uint64_t x)
{
    for (int i = 7; i >= 0; i--, x >>= 8)
        out[i] = (uint8_t)x;
}

int ns_votes_draw(const ns_hash_t network_id, uint64_t epoch,
                  const ns_vote_member_t *stakes, uint32_t n, uint32_t seats,
                  ns_vote_member_t *out, uint32_t *n_out, ns_hash_t seed_out)
{
    *n_out = 0;
    if (seats == 0 || seats > NS_VOTE_SEATS_MAX)
        return NS_ERR_INVAL;
    /* The staked accounts in id order: the order every node agrees on. */
    ns_vote_member_t *all = malloc(((size_t)n + 1) * sizeof *all);
    uint64_t *cum = malloc(((size_t)n + 1) * sizeof *cum);
    if (!all || !cum) {
        free(all);
        free(cum);
        return NS_ERR_NOMEM;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (stakes[i].weight > 0)
            all[k++] = stakes[i];
    qsort(all, k, sizeof *all, s_by_id);
    /* one account listed twice counts once (its first weight) */
    uint32_t m = 0;
    for (uint32_t i = 0; i < k; i++)
        if (m == 0 || memcmp(all[m - 1].id, all[i].id, NS_ID_BYTES) != 0)
            all[m++] = all[i];
    crypto_generichash_state h;
    uint8_t b8[8];
    ns_hash_t digest, seed;
    crypto_generichash_init(&h, NULL, 0, NS_HASH_BYTES);
    uint64_t total = 0;
    for (uint32_t i = 0; i < m; i++) {
        s_be64(b8, all[i].weight);
        crypto_generichash_update(&h, all[i].id, NS_ID_BYTES);
        crypto_generichash_update(&h, b8, sizeof b8);
        total = s_add(total, all[i].weight);
        cum[i] = total;
    }
    crypto_generichash_final(&h, digest, NS_HASH_BYTES);
    crypto_generichash_init(&h, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&h, (const uint8_t *)S_DOMAIN,
                              sizeof S_DOMAIN - 1);
    crypto_generichash_update(&h, network_id, NS_HASH_BYTES);
    s_be64(b8, epoch);
    crypto_generichash_update(&h, b8, sizeof b8);
    crypto_generichash_update(&h, digest, NS_HASH_BYTES);
    crypto_generichash_final(&h, seed, NS_HASH_BYTES);
    if (seed_out)
        memcpy(seed_out, seed, NS_HASH_BYTES);
    if (m <= seats) { /* a small network: everyone, by stake */
        memcpy(out, all, (size_t)m * sizeof *all);
        *n_out = m;
        free(all);
        free(cum);
        return NS_OK;
    }
    /* Seat j: x = H(seed || j) as a number below total (the top 64 bits
     * of x * total: no modulo bias worth a thought), the account whose
     * cumulative stake first exceeds it. */
    uint32_t nm = 0;
    for (uint32_t j = 0; j < seats; j++) {
        uint8_t in[NS_HASH_BYTES + 4], x[8];
        memcpy(in, seed, NS_HASH_BYTES);
        in[NS_HASH_BYTES] = (uint8_t)(j >> 24);
        in[NS_HASH_BYTES + 1] = (uint8_t)(j >> 16);
        in[NS_HASH_BYTES + 2] = (uint8_t)(j >> 8);
        in[NS_HASH_BYTES + 3] = (uint8_t)j;
        crypto_generichash(x, sizeof x, in, sizeof in, NULL, 0);
        uint64_t r = 0;
        for (int i = 0; i < 8; i++)
            r = r << 8 | x[i];
        uint64_t pick = (uint64_t)(((unsigned __int128)r * total) >> 64);
        uint32_t lo = 0, hi = m - 1; /* first i with cum[i] > pick */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cum[mid] > pick)
                hi = mid;
            else
                lo = mid + 1;
        }
        uint32_t at = nm;
        for (uint32_t i = 0; i < nm; i++)
            if (memcmp(out[i].id, all[lo].id, NS_ID_BYTES) == 0)
                at = i;
        if (at == nm) {
            memcpy(out[nm].id, all[lo].id, NS_ID_BYTES);
            out[nm++].weight = 0;
        }
        out[at].weight++;
    }
    qsort(out, nm, sizeof *out, s_by_id);
    *n_out = nm;
    free(all);
    free(cum);
    return NS_OK;
}

/* Index of id in table t, or -1: a binary search (members are sorted). */
static int s_member(const s_table_t *t, const uint8_t id[NS_ID_BYTES])
{
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = memcmp(t->m[mid].id, id, NS_ID_BYTES);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static void s_carry(ns_votes_t *v, s_slot_t *s);

static bool s_add_stake(void *u, const ns_account_t *a)
{
    ns_votes_t *v = u;
    uint64_t w = s_weight(a);
    if (w == 0)
        return true;
    if (v->n_walk == v->cap_walk) {
        uint32_t cap = v->cap_walk ? 2 * v->cap_walk : 64;
        ns_vote_member_t *g = realloc(v->walk, (size_t)cap * sizeof *g);
        if (!g)
            return false; /* the walk so far; the next look reads again */
        v->walk = g;
        v->cap_walk = cap;
    }
    memcpy(v->walk[v->n_walk].id, a->id, NS_ID_BYTES);
    v->walk[v->n_walk++].weight = w;
    return true;
}

/* The committee, looked at again (a walk over every account):
 * - while every staked account sits on it (a small network): within
 *   S_STAKE_MOVED_MS after stake moved (a STAKE, UNSTAKE or SLASH stored,
 *   a fork voided entries), and it follows stake as it stands;
 * - with more: drawn for the epoch from the stake as it stands once the
 *   epoch is settle_ms old and stake has stood still for settle_ms (at
 *   the latest 3 settle_ms into the epoch), so that the stake entries of
 *   the epoch's first moments, and those still on their way when it
 *   began, are in every node's draw; then frozen until the epoch ends,
 *   whatever stake does. Until it freezes, the draw follows stake (the
 *   same draw when nothing moves);
 * - in any case at a new epoch and at least every NS_VOTE_STAKE_MS (a
 *   failed commit rolls stake back without a word; a network that
 *   shrank to the seats). */
static void s_refresh_stake(ns_votes_t *v)
{
    uint64_t now = ns_mono_ms();
    uint64_t age = now - v->total_at_ms;
    uint64_t wall = ns_now_ms();
    uint64_t epoch = wall / v->epoch_ms, into = wall % v->epoch_ms;
    bool frozen = v->frozen == epoch + 1;
    bool settled = into >= v->settle_ms && (now - v->moved_ms >= v->settle_ms ||
                                            into >= 3 * v->settle_ms);
    if (v->total_at_ms && epoch == v->epoch && age < NS_VOTE_STAKE_MS &&
        (frozen || ((!v->stake_moved || age < S_STAKE_MOVED_MS) &&
                    !(v->drawn && settled))))
        return;
    v->stake_moved = false;
    v->total_at_ms = now;
    v->n_walk = 0;
    ns_ledger_each_account(v->ledger, s_add_stake, v);
    v->staked = v->n_walk;
    v->epoch = epoch;
    if (frozen && v->n_walk > v->seats)
        return;
    s_table_t next = {0};
    if (ns_votes_draw(ns_ledger_network_id(v->ledger), epoch, v->walk,
                      v->n_walk, v->seats, next.m, &next.n, v->seed) != NS_OK)
        return; /* out of memory: the committee as it was */
    v->drawn = v->n_walk > v->seats;
    v->frozen = v->drawn && settled ? epoch + 1 : 0;
    v->stats.draws += v->frozen != 0;
    for (uint32_t i = 0; i < next.n; i++)
        next.weight = s_add(next.weight, next.m[i].weight);
    int me = s_member(&next, v->self);
    v->self_stake = me < 0 ? 0 : next.m[me].weight;
    if (next.n == v->cur.n && next.weight == v->cur.weight &&
        memcmp(next.m, v->cur.m, (size_t)next.n * sizeof *next.m) == 0)
        return; /* the same committee: slots stay as they are */
    next.gen = v->cur.gen + 1;
    v->old = v->cur;
    v->cur = next;
    /* Every slot carried over now (rare: a stake move, a new epoch), so
     * that none is ever two tables behind. */
    for (uint32_t i = 0; i < NS_VOTE_TABLE; i++)
        if (v->slots[i].used)
            s_carry(v, &v->slots[i]);
}

static bool s_quorum(const ns_votes_t *v, uint64_t weight)
{
    uint64_t t = v->cur.weight; /* more than half: 2 * weight > t */
    return t > 0 && (weight >= t || weight > t - weight);
}

/* ---- the tally ----------------------------------------------------------- */

static uint32_t s_bucket(const ns_hash_t id)
{
    uint32_t h;
    memcpy(&h, id, sizeof h); /* ids are hashes: any 4 bytes will do */
    return h % S_BUCKETS;
}

/* s's votes carried over to the current committee: those of members of
 * the table before it that are still members (weighed as now); votes
 * counted under an older table are forgotten (asked again). */
static void s_carry(ns_votes_t *v, s_slot_t *s)
{
    if (s->gen == v->cur.gen)
        return;
    uint64_t voted = 0, weight = 0;
    if (s->gen == v->old.gen)
        for (uint32_t i = 0; i < v->old.n; i++) {
            if (!(s->voted >> i & 1))
                continue;
            int j = s_member(&v->cur, v->old.m[i].id);
            if (j >= 0) {
                voted |= UINT64_C(1) << j;
                weight = s_add(weight, v->cur.m[j].weight);
            }
        }
    s->voted = voted;
    s->weight = weight;
    s->gen = v->cur.gen;
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
    memset(s, 0, sizeof *s);
    s->gen = v->cur.gen;
    memcpy(s->id, id, NS_HASH_BYTES);
    s->used = true;
    uint32_t b = s_bucket(id);
    s->next = v->buckets[b];
    v->buckets[b] = i;
    return s;
}

static void s_queue_adopt(ns_votes_t *v, const ns_hash_t id);

/* Count voter's vote for id, if it sits on the committee: once per
 * member (a bit of the slot's bitmap), weighed by its committee weight. */
static void s_count(ns_votes_t *v, const uint8_t voter[NS_ID_BYTES],
                    const ns_hash_t id)
{
    int i = s_member(&v->cur, voter);
    if (i < 0)
        return;
    s_slot_t *s = s_slot(v, id);
    s_carry(v, s);
    uint64_t bit = UINT64_C(1) << i;
    if (s->voted & bit)
        return;
    s->voted |= bit;
    s->weight = s_add(s->weight, v->cur.m[i].weight);
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
    if (v->cur.weight == 0)
        return NS_CONFIRM_NONE;
    s_slot_t *s = s_find(v, id);
    if (!s)
        return NS_CONFIRM_NO;
    s_carry(v, s);
    if (!s->confirmed && s_quorum(v, s->weight))
        s->confirmed = true; /* stake left the committee since */
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
    /* A STAKE of nothing is a provider's claim (its refs: payments, and
     * collateral released back to stake): the weight stays. */
    ns_entry_body_t b;
    if (e->type == NS_ENTRY_UNSTAKE || e->type == NS_ENTRY_SLASH ||
        (e->type == NS_ENTRY_STAKE &&
         (ns_entry_body_decode(e, &b) != NS_OK || b.amount > 0))) {
        v->stake_moved = true; /* weigh again, soon */
        v->moved_ms = ns_mono_ms();
    }
    /* Old entries (a catch-up) are not voted for unasked: their credits
     * were taken in long ago, or ask (VOTE_REQ) when they are. */
    uint64_t now = ns_now_ms();
    if (e->timestamp_ms < now && now - e->timestamp_ms > NS_VOTE_RECENT_MS)
        return;
    s_refresh_stake(v);
    if (v->self_stake == 0)
        return;
    s_count(v, v->self, e->id);
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
    s_refresh_stake(v);
    if (s_member(&v->cur, env->sender) < 0) {
        /* Not on the committee: dropped, not passed on; quietly (the
         * voter's stake may just not be here yet: its votes are asked
         * again when needed). */
        v->stats.unstaked++;
        return NS_ERR_NOTFOUND;
    }
    v->stats.received += n;
    for (uint32_t i = 0; i < n; i++)
        s_count(v, env->sender, ids[i]);
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
        return NS_OK; /* not on the committee: our vote counts for nothing */
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
    v->moved_ms = now;
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
                s_count(v, v->self, ask[i]);
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
    v->seats = NS_VOTE_SEATS;
    v->epoch_ms = NS_VOTE_EPOCH_MS;
    v->settle_ms = NS_VOTE_SETTLE_MS;
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
    free(v->slots);
    free(v->walk);
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

void ns_votes_set_committee(ns_votes_t *v, uint32_t seats, uint64_t epoch_ms,
                            uint64_t settle_ms)
{
    if (seats >= 1 && seats <= NS_VOTE_SEATS_MAX)
        v->seats = seats;
    if (epoch_ms > 0)
        v->epoch_ms = epoch_ms;
    v->settle_ms = settle_ms < v->epoch_ms / 3 ? settle_ms : v->epoch_ms / 3;
    v->total_at_ms = 0; /* look again */
    v->frozen = 0;
}

uint64_t ns_votes_member_weight(ns_votes_t *v, const uint8_t id[NS_ID_BYTES])
{
    s_refresh_stake(v);
    int i = s_member(&v->cur, id);
    return i < 0 ? 0 : v->cur.m[i].weight;
}

void ns_votes_pack_status(ns_votes_t *v, msgpack_packer *pk)
{
    s_refresh_stake(v);
    msgpack_pack_map(pk, 15);
    /* the committee's weight: all stake while every staked account sits
     * on it, else its seats */
    s_kv(pk, "total_stake", v->cur.weight);
    s_kv(pk, "committee", v->cur.n);
    s_kv(pk, "staked_accounts", v->staked);
    s_kv(pk, "epoch", v->epoch);
    ns_mp_str(pk, "drawn"); /* frozen for this epoch */
    if (v->frozen)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    s_kv(pk, "our_stake", v->self_stake);
    s_kv(pk, "sent", v->stats.sent);
    s_kv(pk, "received", v->stats.received);
    s_kv(pk, "from_unstaked", v->stats.unstaked);
    s_kv(pk, "counted", v->stats.counted);
    s_kv(pk, "confirmed", v->stats.confirmed);
    s_kv(pk, "adopted", v->stats.adopted);
    s_kv(pk, "asked", v->stats.asked);
    s_kv(pk, "answered", v->stats.answered);
    s_kv(pk, "draws", v->stats.draws);
}
