/* ledger_sync.c - gossip of entries, head exchange and range pulls.
 *
 * Commits: entries from the network are committed by the ledger's policy
 * (ns_ledger_commit_due: enough entries or bytes, or old enough), checked
 * after every ENTRY and ENTRIES message and by a timer; our own appends
 * commit at once (and carry the batch before them along). What a control
 * request reports (status) is committed first. Peers' HEADS_REQ and GET
 * are answered from the open batch without committing it: entries are
 * signed by their authors, so serving ones we may lose in a crash misleads
 * nobody, and a commit per request would undo the batching.
 */
#include "nightshift/ledger_sync.h"
#include "nightshift/ledger_heads.h"
#include "nightshift/log.h"
#include "nightshift/policy.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

struct ns_ledger_sync {
    ns_p2p_t *p2p;
    ns_ledger_t *ledger;
    bool dirty; /* entries ingested since the last commit */
    ns_buf_t body;
    ns_buf_t entry;
    struct {
        uint64_t gossip_in, stored, buffered, rejected, duplicates;
        uint64_t heads_req_sent, heads_served, gets_sent, gets_served;
        uint64_t ranges_in, fork_proofs_sent;
        uint64_t heads_bytes_in, heads_bytes_out, heads_items_in;
    } stats;
    ns_heads_log_t *log;     /* our head moves, for peers' HEADS_REQ */
    ns_heads_peers_t *peers; /* what each peer listed to us, up to where */
    uint32_t commit_timer; /* running while entries wait, 0 otherwise */
    /* A round of range pulls: GETs not answered yet, and whether its
     * replies brought anything. A round that did starts the next at once
     * when its last reply is in, instead of waiting for the timer. */
    uint32_t gets_out;
    bool round_progress;
    uint32_t probe_timer; /* running while the ledger cannot write */
};

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

static void s_publish_summary(ns_ledger_sync_t *s)
{
    ns_ledger_stats_t st;
    ns_ledger_stats(s->ledger, &st);
    ns_p2p_set_ledger_summary(s->p2p, st.entries, st.digest);
}

static void s_watch_storage(ns_ledger_sync_t *s);
static void s_sync_round(ns_ledger_sync_t *s);

static void s_commit(ns_ledger_sync_t *s)
{
    /* Always: also closes a batch that only saw rejections. A failure is
     * logged with its cause by the ledger. */
    int rc = ns_ledger_commit(s->ledger);
    (void)rc;
    if (s->dirty)
        s_publish_summary(s);
    s->dirty = false;
    s_watch_storage(s);
}

/* While the ledger cannot write (disk full, read-only, map full), try a
 * small write every NS_POLICY_STORAGE_RETRY_MS: the node resumes by
 * itself once space is back, whether or not entries arrive. */
static void s_on_probe_timer(void *user, uint64_t now)
{
    (void)now;
    ns_ledger_sync_t *s = user;
    if (ns_ledger_probe_write(s->ledger) == NS_OK) {
        s_publish_summary(s);
        s_watch_storage(s);
    }
}

static void s_watch_storage(ns_ledger_sync_t *s)
{
    bool failing = ns_ledger_write_state(s->ledger, NULL, NULL) != NS_OK;
    if (failing && !s->probe_timer) {
        if (ns_p2p_timer_start(s->p2p, NS_POLICY_STORAGE_RETRY_MS, true,
                               s_on_probe_timer, s, &s->probe_timer) != NS_OK)
            s->probe_timer = 0;
    } else if (!failing && s->probe_timer) {
        (void)ns_p2p_timer_cancel(s->p2p, s->probe_timer);
        s->probe_timer = 0;
    }
}

static void s_on_commit_timer(void *user, uint64_t now);

/* Commit if the ledger's policy says the batch is due; keep the commit
 * timer running only while entries wait for a commit (an idle node does
 * not wake for it). */
static void s_commit_if_due(ns_ledger_sync_t *s)
{
    if (ns_ledger_commit_due(s->ledger, ns_mono_ms()))
        s_commit(s);
    uint32_t pending = 0;
    uint64_t bytes = 0;
    ns_ledger_uncommitted(s->ledger, &pending, &bytes);
    if (pending && !s->commit_timer) {
        if (ns_p2p_timer_start(s->p2p, NS_LEDGER_COMMIT_TICK_MS, true,
                               s_on_commit_timer, s, &s->commit_timer) != NS_OK)
            s->commit_timer = 0;
    } else if (!pending && s->commit_timer) {
        (void)ns_p2p_timer_cancel(s->p2p, s->commit_timer);
        s->commit_timer = 0;
    }
}

static int s_send_get(ns_ledger_sync_t *s, const uint8_t *peer,
                      const uint8_t *author, uint64_t from, uint64_t to)
{
    S_PACKER(&s->body, w, pk);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, author, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, from);
    msgpack_pack_uint64(&pk, to);
    if (w.err != NS_OK)
        return w.err;
    s->stats.gets_sent++;
    int rc = ns_p2p_send(s->p2p, peer, NS_MSG_GET, s->body.data, s->body.len);
    if (rc == NS_OK)
        s->gets_out++;
    return rc;
}

/* A fork proof was just stored: publish both entries again, in order, in
 * envelopes of our own. Gossip passes on the envelope that brought the
 * proof too, but a node that refused that very envelope when it came
 * alone (a market entry wrong at a free seq) has it in its seen-cache and
 * would drop it: it would never ban the author that every other node
 * bans. A node that holds neither entry gets the one that held the seq
 * first. Each node does this once per fork (the proof is stored once). */
static void s_pass_fork_on(ns_ledger_sync_t *s)
{
    ns_hash_t ids[2];
    (void)ns_ledger_fork_proofs(s->ledger, ids[0], ids[1]);
    for (int i = 0; i < 2; i++) {
        uint8_t *e = NULL;
        size_t n = 0;
        if (ns_ledger_entry_copy(s->ledger, ids[i], &e, &n) == NS_OK &&
            ns_p2p_publish(s->p2p, NS_MSG_ENTRY, e, n) == NS_OK)
            s->stats.fork_proofs_sent++;
        free(e);
    }
}

/* Ingest one entry; on a gap, ask `from_peer` for the missing range. */
static int s_take(ns_ledger_sync_t *s, const uint8_t *buf, size_t len,
                  const uint8_t *from_peer)
{
    uint8_t author[NS_ID_BYTES];
    uint64_t want = 0;
    uint64_t proofs = ns_ledger_fork_proofs(s->ledger, NULL, NULL);
    int rc = ns_ledger_ingest(s->ledger, buf, len, author, &want);
    if (ns_ledger_fork_proofs(s->ledger, NULL, NULL) != proofs)
        s_pass_fork_on(s);
    switch (rc) {
    case NS_OK:
        s->stats.stored++;
        s->dirty = true;
        return NS_OK;
    case NS_ERR_GAP:
        s->stats.buffered++;
        if (from_peer && want)
            (void)s_send_get(s, from_peer, author, want, want + NS_SYNC_BATCH);
        return NS_OK;
    case NS_ERR_MISSING:
        s->stats.buffered++;
        return NS_OK;
    case NS_ERR_DUPLICATE:
        s->stats.duplicates++;
        return NS_ERR_REPLAY;
    case NS_ERR_FORK:
        s->dirty = true; /* logged by the ledger, with the author */
        return NS_OK;    /* spread it: every node must learn of the fork */
    default:
        s->stats.rejected++;
        return rc;
    }
}

/* ---- handlers ------------------------------------------------------------ */

static int s_on_entry(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_ledger_sync_t *s = user;
    s->stats.gossip_in++;
    int rc = s_take(s, env->body, env->body_len, env->sender);
    s_commit_if_due(s);
    return rc;
}

/* A peer's HEADS_REQ: changes since the counter it names when it names
 * our epoch, else a listing by author (ledger_heads.h). */
static int s_on_heads_req(void *user, const ns_envelope_t *env,
                          ns_p2p_src_t *src)
{
    ns_ledger_sync_t *s = user;
    ns_heads_req_t q;
    ns_heads_t h;
    int rc = ns_heads_req_decode(env->body, env->body_len, &q);
    if (rc != NS_OK)
        return rc;
    rc = ns_heads_answer(s->log, s->ledger, &q, &h);
    if (rc == NS_OK)
        rc = ns_heads_encode(&s->body, &h);
    ns_heads_release(&h);
    if (rc != NS_OK)
        return rc;
    s->stats.heads_served++;
    s->stats.heads_bytes_out += s->body.len;
    return ns_p2p_reply(s->p2p, src, NS_MSG_HEADS, s->body.data, s->body.len);
}

static int s_send_heads_req(ns_ledger_sync_t *s, const uint8_t *peer,
                            const ns_heads_req_t *q)
{
    int rc = ns_heads_req_encode(&s->body, q);
    if (rc != NS_OK)
        return rc;
    s->stats.heads_req_sent++;
    return ns_p2p_send(s->p2p, peer, NS_MSG_HEADS_REQ, s->body.data,
                       s->body.len);
}

static int s_on_heads(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_ledger_sync_t *s = user;
    ns_heads_t h;
    int rc = ns_heads_decode(env->body, env->body_len, &h);
    if (rc != NS_OK)
        return rc;
    s->stats.heads_bytes_in += env->body_len;
    s->stats.heads_items_in += h.n;
    bool *lack = h.n ? malloc(h.n * sizeof *lack) : NULL;
    if (h.n && !lack) {
        ns_heads_release(&h);
        return NS_ERR_NOMEM;
    }
    bool more = false;
    ns_heads_req_t next;
    uint32_t n = h.n;
    (void)ns_heads_peers_answer(s->peers, s->ledger, env->sender, &h, lack,
                                &more, &next);
    /* At most 64 ranges are asked per round, from a random place in the
     * list, so that authors whose entries wait on other authors' entries
     * cannot keep the rest from ever being asked. Two passes: first the
     * chains whose next entry is nowhere here (only a pull brings it, and
     * what waits in the buffer may wait for it), then those whose next
     * entry waits on another chain. */
    uint32_t gets = 0, start = n ? ns_rand_below(n) : 0;
    for (uint32_t k = 0; k < 2 * n && gets < NS_SYNC_RANGES; k++) {
        uint32_t i = (start + k) % n;
        const ns_head_item_t *it = &h.items[i];
        ns_account_t mine;
        /* A banned author's chain too: the entries the stake voted for
         * go on it (docs/PROTOCOL.md, "Confirmation"). */
        if (!lack[i] || ns_ledger_account(s->ledger, it->id, &mine) != NS_OK ||
            it->seq <= mine.seq)
            continue;
        bool waits = ns_ledger_is_buffered(s->ledger, it->id, mine.seq + 1);
        if (waits != (k >= n))
            continue; /* not this pass */
        /* From past what already waits in the buffer, unless all of it
         * does: then from the head, in case what it waits for is ours
         * to fetch again. */
        uint64_t from = ns_ledger_buffered_through(s->ledger, it->id);
        if (from >= it->seq)
            from = mine.seq;
        uint64_t to =
            it->seq < from + NS_SYNC_BATCH ? it->seq : from + NS_SYNC_BATCH;
        if (s_send_get(s, env->sender, it->id, from + 1, to) == NS_OK)
            gets++;
    }
    free(lack);
    ns_heads_release(&h);
    if (more)
        (void)s_send_heads_req(s, env->sender, &next);
    return NS_OK;
}

static int s_on_get(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    ns_ledger_sync_t *s = user;
    ns_mpr_t r;
    uint8_t author[NS_ID_BYTES];
    uint64_t from = 0, to = 0;
    ns_mpr_init(&r, env->body, env->body_len);
    ns_mpr_array_exact(&r, 3);
    ns_mpr_bin_exact(&r, author, NS_ID_BYTES);
    ns_mpr_uint(&r, &from);
    ns_mpr_uint(&r, &to);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (from == 0 || to < from)
        return NS_ERR_INVAL;
    ns_account_t a;
    if (ns_ledger_account(s->ledger, author, &a) != NS_OK)
        return NS_ERR_IO;
    if (to > a.seq)
        to = a.seq;
    if (to - from + 1 > NS_SYNC_BATCH)
        to = from + NS_SYNC_BATCH - 1;
    /* Entries up to the body cap, in order. */
    ns_buf_t list;
    ns_buf_init(&list);
    msgpack_packer lp;
    ns_mp_writer_t lw;
    ns_mp_writer_init(&lw, &lp, &list);
    uint32_t count = 0;
    size_t budget = NS_MAX_BODY - 1024;
    for (uint64_t q = from; q <= to && from <= a.seq; q++) {
        uint8_t *e = NULL;
        size_t len = 0;
        if (ns_ledger_get(s->ledger, author, q, &e, &len) != NS_OK)
            break;
        if (list.len + len + 8 > budget) {
            free(e);
            break;
        }
        ns_mp_bin(&lp, e, len);
        free(e);
        if (lw.err != NS_OK)
            break;
        count++;
    }
    S_PACKER(&s->body, w, pk);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, author, NS_ID_BYTES);
    msgpack_pack_uint64(&pk, a.seq);
    msgpack_pack_array(&pk, count);
    int rc = w.err;
    if (rc == NS_OK)
        rc = ns_buf_append(&s->body, list.data, list.len);
    ns_buf_release(&list);
    if (rc != NS_OK)
        return rc;
    s->stats.gets_served++;
    return ns_p2p_reply(s->p2p, src, NS_MSG_ENTRIES, s->body.data, s->body.len);
}

static int s_on_entries(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    (void)src;
    ns_ledger_sync_t *s = user;
    ns_mpr_t r;
    uint8_t author[NS_ID_BYTES];
    uint64_t their_head = 0;
    uint32_t n = 0;
    ns_mpr_init(&r, env->body, env->body_len);
    ns_mpr_array_exact(&r, 3);
    ns_mpr_bin_exact(&r, author, NS_ID_BYTES);
    ns_mpr_uint(&r, &their_head);
    ns_mpr_array(&r, &n, NS_SYNC_BATCH);
    ns_account_t before, mine;
    if (r.err != NS_OK || ns_ledger_account(s->ledger, author, &before))
        before.seq = 0;
    uint64_t had =
        r.err == NS_OK ? ns_ledger_buffered_through(s->ledger, author) : 0;
    for (uint32_t i = 0; i < n && r.err == NS_OK; i++) {
        const uint8_t *e = NULL;
        size_t len = 0;
        if (ns_mpr_bin(&r, &e, &len, NS_MAX_ENTRY_BYTES) == NS_OK)
            (void)s_take(s, e, len, NULL);
    }
    s_commit_if_due(s);
    if (s->gets_out > 0)
        s->gets_out--;
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    s->stats.ranges_in++;
    /* Continue while this author's chain advances or more of it waits in
     * the buffer: an author whose next entry waits on another author's
     * entry is pulled on past it (up to half the buffer), so that the
     * rest of the chain is in hand when that entry comes. A reply that
     * adds nothing ends it; the next round asks again. */
    if (n > 0 && ns_ledger_account(s->ledger, author, &mine) == NS_OK &&
        !mine.banned) {
        uint64_t through = ns_ledger_buffered_through(s->ledger, author);
        bool moved = mine.seq > before.seq || through > had;
        s->round_progress |= moved;
        if (through < their_head && moved)
            (void)s_send_get(s, env->sender, author, through + 1,
                             through + NS_SYNC_BATCH);
    }
    if (s->gets_out == 0 && s->round_progress)
        s_sync_round(s); /* the last reply of a round that moved */
    return NS_OK;
}

/* ---- timers -------------------------------------------------------------- */

static bool s_digest_differs(void *u, const uint8_t *id,
                             const ns_heartbeat_t *hb)
{
    (void)id;
    const ns_hash_t *mine = u;
    return memcmp(hb->ledger_digest, *mine, NS_HASH_BYTES) != 0;
}

/* The same, among peers that list changes since a counter. */
static bool s_digest_differs_since(void *u, const uint8_t *id,
                                   const ns_heartbeat_t *hb)
{
    return (hb->flags & NS_HB_HEADS_SINCE) && s_digest_differs(u, id, hb);
}

static void s_sync_round(ns_ledger_sync_t *s)
{
    s->gets_out = 0; /* a reply lost in the last round must not stall us */
    s->round_progress = false;
    ns_ledger_stats_t st;
    ns_ledger_stats(s->ledger, &st);
    uint8_t peer[NS_ID_BYTES];
    ns_heads_req_t q;
    /* Peers that list only what changed first; an older node lists all */
    bool since = ns_p2p_pick_peer(s->p2p, s_digest_differs_since, st.digest,
                                  peer) == NS_OK;
    if (since ||
        ns_p2p_pick_peer(s->p2p, s_digest_differs, st.digest, peer) == NS_OK) {
        ns_heads_peers_request(s->peers, peer, since, &q);
        (void)s_send_heads_req(s, peer, &q);
    }
}

static void s_on_sync_timer(void *user, uint64_t now)
{
    (void)now;
    ns_ledger_sync_t *s = user;
    s_commit_if_due(s);
    s_sync_round(s);
}

static void s_on_commit_timer(void *user, uint64_t now)
{
    (void)now;
    s_commit_if_due(user);
}

/* The ledger's head hook: a move goes in the log peers are answered
 * from; heads going back mean we may no longer hold what peers listed. */
static void s_on_head(void *user, const uint8_t *author)
{
    ns_ledger_sync_t *s = user;
    if (author)
        (void)ns_heads_log_moved(s->log, author);
    else
        ns_heads_peers_forget_all(s->peers);
}

/* ---- public ---------------------------------------------------------------
 */

ns_ledger_sync_t *ns_ledger_sync_new(ns_p2p_t *p, ns_ledger_t *l, int *err)
{
    ns_ledger_sync_t *s = calloc(1, sizeof *s);
    if (!s) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    s->p2p = p;
    s->ledger = l;
    ns_buf_init(&s->body);
    ns_buf_init(&s->entry);
    s->log = ns_heads_log_new();
    s->peers = ns_heads_peers_new();
    if (!s->log || !s->peers) {
        *err = NS_ERR_NOMEM;
        ns_ledger_sync_destroy(&s);
        return NULL;
    }
    ns_ledger_set_on_head(l, s_on_head, s);
    int rc;
    uint32_t sync_timer = 0;
    if ((rc = ns_p2p_register(p, NS_MSG_ENTRY, true, s_on_entry, s)) ||
        (rc = ns_p2p_register(p, NS_MSG_HEADS_REQ, false, s_on_heads_req, s)) ||
        (rc = ns_p2p_register(p, NS_MSG_HEADS, false, s_on_heads, s)) ||
        (rc = ns_p2p_register(p, NS_MSG_GET, false, s_on_get, s)) ||
        (rc = ns_p2p_register(p, NS_MSG_ENTRIES, false, s_on_entries, s)) ||
        (rc = ns_p2p_timer_start(p, NS_LEDGER_SYNC_MS, true, s_on_sync_timer, s,
                                 &sync_timer))) {
        *err = rc;
        ns_ledger_sync_destroy(&s);
        return NULL;
    }
    /* a chore: it shares the wakeups of the heartbeat and of traffic */
    (void)ns_p2p_timer_slack(p, sync_timer, NS_LEDGER_SYNC_MS / 2);
    s_publish_summary(s);
    return s;
}

void ns_ledger_sync_destroy(ns_ledger_sync_t **ps)
{
    if (!ps || !*ps)
        return;
    s_commit(*ps);
    if ((*ps)->commit_timer)
        (void)ns_p2p_timer_cancel((*ps)->p2p, (*ps)->commit_timer);
    if ((*ps)->probe_timer)
        (void)ns_p2p_timer_cancel((*ps)->p2p, (*ps)->probe_timer);
    ns_ledger_set_on_head((*ps)->ledger, NULL, NULL);
    ns_heads_log_free(&(*ps)->log);
    ns_heads_peers_free(&(*ps)->peers);
    ns_buf_release(&(*ps)->body);
    ns_buf_release(&(*ps)->entry);
    free(*ps);
    *ps = NULL;
}

/* The other party of the job a job entry of ours is about (the provider
 * of an AWARD, SETTLE, SLASH or CANCEL; the requester of an ACCEPT or
 * RESULT): it waits on the entry, and gossip to fanout random peers may
 * reach it only at the next sync round (a requester that just joined is
 * a live peer of few nodes yet). */
static bool s_other_party(ns_ledger_sync_t *s, const ns_identity_t *me,
                          uint8_t type, const ns_entry_body_t *b,
                          uint8_t party[NS_ID_BYTES])
{
    ns_ledger_job_t j;
    if (type != NS_ENTRY_AWARD && type != NS_ENTRY_ACCEPT &&
        type != NS_ENTRY_RESULT && type != NS_ENTRY_SETTLE &&
        type != NS_ENTRY_SLASH && type != NS_ENTRY_CANCEL &&
        type != NS_ENTRY_CLOSE)
        return false;
    if (ns_ledger_job(s->ledger, b->job_id, &j) != NS_OK)
        return false;
    const uint8_t *other =
        memcmp(j.requester, ns_identity_pk(me), NS_ID_BYTES) == 0 ? j.provider
                                                                  : j.requester;
    if (sodium_is_zero(other, NS_ID_BYTES) ||
        memcmp(other, ns_identity_pk(me), NS_ID_BYTES) == 0)
        return false;
    memcpy(party, other, NS_ID_BYTES);
    return true;
}

int ns_ledger_sync_append(ns_ledger_sync_t *s, const ns_identity_t *me,
                          uint8_t type, const ns_entry_body_t *body,
                          bool claim_credits, ns_hash_t id)
{
    uint8_t refs[NS_MAX_REFS * NS_HASH_BYTES];
    uint32_t n_refs = 0;
    if (claim_credits)
        n_refs = ns_ledger_unclaimed(s->ledger, ns_identity_pk(me), refs,
                                     NS_MAX_REFS);
    /* The append commits the whole batch, ingested entries included. */
    int rc = ns_ledger_append(s->ledger, me, type, body, refs, n_refs,
                              &s->entry, id);
    if (rc != NS_OK) {
        s_watch_storage(s);
        return rc;
    }
    s->dirty = false;
    s_publish_summary(s);
    s_watch_storage(s);
    uint8_t party[NS_ID_BYTES];
    bool direct = s_other_party(s, me, type, body, party);
    return ns_p2p_publish_also(s->p2p, NS_MSG_ENTRY, s->entry.data,
                               s->entry.len, direct ? party : NULL);
}

static void s_kv(msgpack_packer *pk, const char *k, uint64_t v)
{
    ns_mp_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

void ns_ledger_sync_pack_status(ns_ledger_sync_t *s, msgpack_packer *pk)
{
    s_commit(s);
    ns_ledger_stats_t st;
    ns_ledger_stats(s->ledger, &st);
    char digest[2 * NS_HASH_BYTES + 1];
    ns_hex(digest, st.digest, NS_HASH_BYTES);
    static const int reasons[] = {
        NS_ERR_SIG,      NS_ERR_PREV,   NS_ERR_FUNDS,    NS_ERR_CLAIMED,
        NS_ERR_NOCREDIT, NS_ERR_BANNED, NS_ERR_JOBSTATE, NS_ERR_INVAL,
        NS_ERR_MSGTYPE,  NS_ERR_TYPE,   NS_ERR_TOOBIG,   NS_ERR_TRUNCATED,
        NS_ERR_VERSION,  NS_ERR_PROOF,  NS_ERR_STALE,    NS_ERR_STATE,
        NS_ERR_TRAILING};
    size_t nr = sizeof reasons / sizeof reasons[0];
    const char *why = "";
    uint64_t since = 0;
    bool writable = ns_ledger_write_state(s->ledger, &why, &since) == NS_OK;
    ns_heads_peers_stats_t hs;
    ns_heads_peers_stats(s->peers, &hs);
    msgpack_pack_map(pk, 16);
    ns_mp_str(pk, "writable");
    if (writable)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    ns_mp_str(pk, "storage_error");
    if (writable) {
        msgpack_pack_nil(pk);
    } else {
        msgpack_pack_map(pk, 2);
        ns_mp_str(pk, "detail");
        ns_mp_str(pk, why);
        s_kv(pk, "since_ms", since);
    }
    s_kv(pk, "entries", st.entries);
    s_kv(pk, "accounts", st.accounts);
    ns_mp_str(pk, "total");
    ns_mp_credits(pk, st.total);
    ns_mp_str(pk, "burned");
    ns_mp_credits(pk, st.burned);
    ns_mp_str(pk, "pending_credit");
    ns_mp_credits(pk, st.pending_credit);
    s_kv(pk, "forks", st.forks);
    s_kv(pk, "buffered", st.buffered);
    ns_mp_str(pk, "digest");
    ns_mp_str(pk, digest);
    s_kv(pk, "gossip_in", s->stats.gossip_in);
    s_kv(pk, "stored", s->stats.stored);
    s_kv(pk, "ranges_in", s->stats.ranges_in);
    s_kv(pk, "fork_proofs_sent", s->stats.fork_proofs_sent);
    /* head exchange (docs/PROTOCOL.md, "Sync"): HEADS body bytes both
     * ways, heads received, exchanges by kind */
    ns_mp_str(pk, "heads");
    msgpack_pack_map(pk, 8);
    s_kv(pk, "bytes_in", s->stats.heads_bytes_in);
    s_kv(pk, "bytes_out", s->stats.heads_bytes_out);
    s_kv(pk, "items_in", s->stats.heads_items_in);
    s_kv(pk, "requests_sent", s->stats.heads_req_sent);
    s_kv(pk, "served", s->stats.heads_served);
    s_kv(pk, "full", hs.full);
    s_kv(pk, "incremental", hs.incremental);
    s_kv(pk, "divergent", hs.divergent);
    ns_mp_str(pk, "rejected");
    msgpack_pack_map(pk, (uint32_t)nr);
    for (size_t i = 0; i < nr; i++)
        s_kv(pk, ns_errname(reasons[i]), st.rejected[-reasons[i]]);
}
