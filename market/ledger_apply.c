/* ledger_apply.c - one entry: load, run the rules, write back
 * (ledger_apply.h).
 */
#include "ledger_apply.h"

#include "ledger_rules.h"

#include <sodium.h>
#include <string.h>

/* Load a stored entry into r (r->rc says how it went). */
static void s_load_ref(ns_lapply_t *ap, MDB_txn *t, const ns_hash_t id,
                       ns_rule_ref_t *r)
{
    r->rc = ns_lstore_entry_load(ap->store, t, id, &r->e, &r->b);
}

/* What the refs of one entry change, held until every check of the
 * entry passed: the credits taken in, and the author's locks they
 * release (a later ref, or the body rule, reads a lock an earlier ref
 * changed: it reads it here). */
typedef struct {
    uint32_t n_credits;
    struct {
        const uint8_t *ref;
        ns_credit_rec_t credit;
    } credits[NS_MAX_REFS];
    uint32_t n_locks;
    struct {
        ns_hash_t award; /* the provider is the entry's author */
        ns_lock_rec_t lock;
    } locks[NS_MAX_REFS];
    ns_undo_release_t rel[NS_MAX_REFS]; /* locks[i] as it was before */
    bool releases; /* a credit taken in releases a lock (changed or not) */
} s_refs_t;

/* The author's lock of award as the refs left it, or NULL. */
static ns_lock_rec_t *s_refs_lock(s_refs_t *w, const uint8_t *award)
{
    for (uint32_t i = 0; i < w->n_locks; i++)
        if (memcmp(w->locks[i].award, award, NS_HASH_BYTES) == 0)
            return &w->locks[i].lock;
    return NULL;
}

/* Load the lock (provider, award), as the refs of e left it. */
static int s_lock_get(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                      s_refs_t *w, const uint8_t *provider,
                      const uint8_t *award, ns_lock_rec_t *out)
{
    ns_lock_rec_t *held = memcmp(provider, e->author, NS_ID_BYTES) == 0
                              ? s_refs_lock(w, award)
                              : NULL;
    if (!held)
        return ns_lstore_lock_get(ap->store, t, provider, award, out);
    *out = *held;
    return NS_OK;
}

/* Load what the body rule of e's type reads (ledger_rules.h). */
static void s_load(ns_lapply_t *ap, MDB_txn *t, s_refs_t *w, ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_lstore_t *s = ap->store;
    switch (e->type) {
    case NS_ENTRY_JOB:
    case NS_ENTRY_AWARD:
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        break;
    case NS_ENTRY_ACCEPT:
        s_load_ref(ap, t, b->ref_id, &io->ref);
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        memcpy(io->key_provider, e->author, NS_ID_BYTES);
        memcpy(io->key_award, b->ref_id, NS_HASH_BYTES);
        io->pjob_rc = ns_lstore_pjob_get(s, t, e->author, b->ref_id, &io->pjob);
        io->lock_rc = s_lock_get(ap, t, e, w, e->author, b->ref_id, &io->lock);
        break;
    case NS_ENTRY_RESULT:
        s_load_ref(ap, t, b->ref_id, &io->ref);
        if (io->ref.rc == NS_OK) {
            memcpy(io->key_provider, e->author, NS_ID_BYTES);
            memcpy(io->key_award, io->ref.b.ref_id, NS_HASH_BYTES);
            io->pjob_rc =
                ns_lstore_pjob_get(s, t, e->author, io->key_award, &io->pjob);
        }
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        break;
    case NS_ENTRY_SETTLE:
    case NS_ENTRY_SLASH:
        s_load_ref(ap, t, b->ref_id, &io->ref);
        if (io->ref.rc == NS_OK)
            s_load_ref(ap, t, io->ref.b.ref_id, &io->accept);
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        if (io->job_rc != NS_OK)
            break;
        io->prov_rc = ns_lstore_account_get(s, t, io->job.provider, &io->prov);
        if (e->type == NS_ENTRY_SLASH && io->ref.rc == NS_OK &&
            io->accept.rc == NS_OK) {
            memcpy(io->key_provider, io->job.provider, NS_ID_BYTES);
            memcpy(io->key_award, io->accept.b.ref_id, NS_HASH_BYTES);
            io->lock_rc = s_lock_get(ap, t, e, w, io->key_provider,
                                     io->key_award, &io->lock);
        }
        break;
    case NS_ENTRY_CANCEL:
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        if (sodium_is_zero(b->ref_id, NS_HASH_BYTES) || io->job_rc != NS_OK)
            break;
        s_load_ref(ap, t, b->ref_id, &io->ref);
        memcpy(io->key_provider, io->job.provider, NS_ID_BYTES);
        memcpy(io->key_award, io->job.award_id, NS_HASH_BYTES);
        io->lock_rc =
            s_lock_get(ap, t, e, w, io->key_provider, io->key_award, &io->lock);
        io->prov_rc = ns_lstore_account_get(s, t, io->job.provider, &io->prov);
        break;
    case NS_ENTRY_CLOSE:
        s_load_ref(ap, t, b->ref_id, &io->ref);
        if (io->ref.rc == NS_OK && io->ref.e.type == NS_ENTRY_RESULT)
            s_load_ref(ap, t, io->ref.b.ref_id, &io->accept);
        io->job_rc = ns_lstore_job_get(s, t, b->job_id, &io->job);
        if (io->job_rc == NS_OK)
            io->req_rc =
                ns_lstore_account_get(s, t, io->job.requester, &io->req);
        if (io->ref.rc != NS_OK)
            break;
        /* the award the ref stands for; the rule checks the rest */
        memcpy(io->key_provider, e->author, NS_ID_BYTES);
        if (io->ref.e.type == NS_ENTRY_AWARD)
            memcpy(io->key_award, io->ref.e.id, NS_HASH_BYTES);
        else if (io->ref.e.type == NS_ENTRY_ACCEPT)
            memcpy(io->key_award, io->ref.b.ref_id, NS_HASH_BYTES);
        else if (io->accept.rc == NS_OK)
            memcpy(io->key_award, io->accept.b.ref_id, NS_HASH_BYTES);
        else
            break;
        io->pjob_rc =
            ns_lstore_pjob_get(s, t, e->author, io->key_award, &io->pjob);
        io->lock_rc =
            s_lock_get(ap, t, e, w, e->author, io->key_award, &io->lock);
        break;
    default:
        break;
    }
}

/* Write back what the refs and the body rule changed: the refs' first,
 * so that the body's lock, when it is one of theirs, is the last. */
static int s_write(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                   const s_refs_t *w, const ns_rule_io_t *io)
{
    ns_lstore_t *s = ap->store;
    int rc = NS_OK;
    for (uint32_t i = 0; i < w->n_locks; i++)
        if ((rc = ns_lstore_lock_put(s, t, e->author, w->locks[i].award,
                                     &w->locks[i].lock)) != NS_OK)
            return rc;
    for (uint32_t i = 0; i < w->n_credits; i++)
        if ((rc = ns_lstore_credit_put(s, t, w->credits[i].ref, e->author,
                                       &w->credits[i].credit)) != NS_OK)
            return rc;
    if (io->put_credit &&
        (rc = ns_lstore_credit_put(s, t, io->e->id, io->credit_to,
                                   &io->credit)) != NS_OK)
        return rc;
    if (io->put_lock && (rc = ns_lstore_lock_put(s, t, io->key_provider,
                                                 io->key_award, &io->lock)))
        return rc;
    if (io->put_pjob && (rc = ns_lstore_pjob_put(s, t, io->key_provider,
                                                 io->key_award, &io->pjob)))
        return rc;
    if (io->put_prov && (rc = ns_lstore_account_put(s, t, &io->prov)))
        return rc;
    if (io->put_req && (rc = ns_lstore_account_put(s, t, &io->req)))
        return rc;
    if (io->put_job)
        rc = ns_lstore_job_put(s, t, &io->job);
    return rc;
}

/* Take in the credits listed in e's refs, one after the other (a credit
 * may release a lock a later one reads), into w: nothing is written. */
static int s_apply_refs(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                        ns_account_t *a, s_refs_t *w)
{
    for (uint32_t i = 0; i < e->n_refs; i++) {
        const uint8_t *ref = e->refs + (size_t)i * NS_HASH_BYTES;
        int rc = ns_rule_ref_distinct(e, i);
        if (rc != NS_OK)
            return rc;
        ns_rule_claim_t c;
        memset(&c, 0, sizeof c);
        c.credit_rc =
            ns_lstore_credit_get(ap->store, t, ref, e->author, &c.credit);
        if (c.credit_rc == NS_ERR_NOTFOUND) {
            const uint8_t *buf;
            size_t len;
            /* An entry a fork voided is not known: a claim of its credit
             * waits, as the stake may still vote it back in place
             * (docs/PROTOCOL.md, "Confirmation"). */
            c.ref_known = ns_lstore_entry_bytes(ap->store, t, ref, &buf,
                                                &len) != NS_ERR_NOTFOUND;
        } else if (c.credit_rc == NS_OK &&
                   !sodium_is_zero(c.credit.release_award, NS_HASH_BYTES)) {
            c.lock_rc = s_lock_get(ap, t, e, w, e->author,
                                   c.credit.release_award, &c.lock);
            w->releases = true;
        }
        ns_lock_rec_t before;
        memset(&before, 0, sizeof before); /* none */
        if (c.lock_rc == NS_OK)
            before = c.lock;
        rc = ns_rule_claim(a, ap->totals, &c);
        if (rc == NS_ERR_MISSING)
            memcpy(ap->missing, ref, NS_HASH_BYTES);
        if (rc != NS_OK)
            return rc;
        if (c.put_lock) {
            ns_lock_rec_t *held = s_refs_lock(w, c.credit.release_award);
            if (!held) {
                held = &w->locks[w->n_locks].lock;
                memcpy(w->locks[w->n_locks].award, c.credit.release_award,
                       NS_HASH_BYTES);
                memcpy(w->rel[w->n_locks].award, c.credit.release_award,
                       NS_HASH_BYTES);
                w->rel[w->n_locks++].pre = before;
            }
            *held = c.lock;
        }
        w->credits[w->n_credits].ref = ref;
        w->credits[w->n_credits++].credit = c.credit;
    }
    return NS_OK;
}

static int s_body_rule(ns_lapply_t *ap, ns_rule_io_t *io)
{
    int rc = ns_rule_body(io);
    if (rc == NS_ERR_MISSING)
        memcpy(ap->missing, io->missing, NS_HASH_BYTES);
    return rc;
}

/* Run the body rule of e into io (b: its decoded body): nothing is
 * written. */
static int s_apply_body(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                        ns_account_t *a, s_refs_t *w, ns_entry_body_t *b,
                        ns_rule_io_t *io, ns_undo_rec_t *u)
{
    int rc = ns_entry_body_decode(e, b);
    if (rc != NS_OK)
        return rc;
    memset(io, 0, sizeof *io);
    io->e = e;
    io->b = b;
    io->network_id = ap->store->network_id;
    io->verifier = ap->verifier;
    io->verifier_user = ap->verifier_user;
    io->close_window_ms = ap->store->close_window_ms;
    io->author = a;
    io->totals = ap->totals;
    io->ref.rc = io->accept.rc = NS_ERR_NOTFOUND;
    io->job_rc = io->prov_rc = io->lock_rc = io->pjob_rc = io->req_rc =
        NS_ERR_NOTFOUND;
    s_load(ap, t, w, io);
    /* A job entry: what the rule may change outside the author's account,
     * as it was (the undo record; other entries need none, and the ingest
     * of transfers copies nothing more) */
    if (e->type < NS_ENTRY_JOB)
        return s_body_rule(ap, io);
    memset(u, 0, sizeof *u);
    u->job_pre = io->job;
    u->lock_pre = io->lock;
    u->pjob_pre = io->pjob;
    const uint32_t settled = io->prov.jobs_settled,
                   slashed = io->prov.jobs_slashed,
                   cancelled = io->prov.jobs_cancelled;
    const uint64_t locked = io->prov.locked_collateral,
                   burned = ap->totals->burned;
    if ((rc = s_body_rule(ap, io)) != NS_OK)
        return rc;
    if (io->put_job) {
        u->flags |= NS_UNDO_JOB | (io->job_rc == NS_OK ? 0 : NS_UNDO_JOB_NEW);
        u->job_post = io->job;
    }
    memcpy(u->key_provider, io->key_provider, NS_ID_BYTES);
    memcpy(u->key_award, io->key_award, NS_HASH_BYTES);
    if (io->put_lock) {
        u->flags |=
            NS_UNDO_LOCK | (io->lock_rc == NS_OK ? 0 : NS_UNDO_LOCK_NEW);
        u->lock_post = io->lock;
    }
    if (io->put_pjob) {
        u->flags |=
            NS_UNDO_PJOB | (io->pjob_rc == NS_OK ? 0 : NS_UNDO_PJOB_NEW);
        u->pjob_post = io->pjob;
    }
    if (io->put_credit) {
        u->flags |= NS_UNDO_CREDIT;
        memcpy(u->credit_to, io->credit_to, NS_ID_BYTES);
    }
    if (io->put_prov || io->prov.locked_collateral != locked) {
        u->flags |= NS_UNDO_PROV;
        memcpy(u->prov, io->prov.id, NS_ID_BYTES);
        u->d_settled = io->prov.jobs_settled - settled;
        u->d_slashed = io->prov.jobs_slashed - slashed;
        u->d_cancelled = io->prov.jobs_cancelled - cancelled;
    }
    u->burned = ap->totals->burned - burned;
    return NS_OK;
}

/* Whether one of author's stored entries from seq on lists ref: a credit
 * claimed there was still open before seq. */
static int s_claimed_from(ns_lapply_t *ap, MDB_txn *t, const uint8_t *author,
                          uint64_t seq, uint64_t head, const uint8_t *ref)
{
    for (uint64_t s = seq; s <= head; s++) {
        ns_hash_t id;
        ns_entry_t x;
        int rc = ns_lstore_chain_get(ap->store, t, author, s, id);
        if (rc == NS_OK)
            rc = ns_lstore_entry_load(ap->store, t, id, &x, NULL);
        if (rc != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
        for (uint32_t i = 0; i < x.n_refs; i++)
            if (memcmp(x.refs + (size_t)i * NS_HASH_BYTES, ref,
                       NS_HASH_BYTES) == 0)
                return NS_OK;
    }
    return NS_ERR_CLAIMED;
}

/* e differs from the entry stored at its seq. It proves a fork only if it
 * is itself a valid entry at that place (docs/PROTOCOL.md, "Forks"):
 * checked against its author's account as it was before that seq (the
 * stored pre-state), the credits it claims as they were then (open, or
 * claimed by the author's entries from that seq on), and the body rules
 * that read only the author's account (TRANSFER, STAKE, UNSTAKE, JOB).
 * The other job entries are checked for form only: what they read (a
 * job's state) moves on with other chains and is not kept per seq.
 * NS_ERR_FORK, or why e is not a valid entry (NS_ERR_MISSING: a credit it
 * names is not here yet; it waits like any entry). Writes nothing. */
static int s_fork_check(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                        const ns_account_t *now)
{
    ns_account_t pre;
    int rc = ns_lstore_prestate_get(ap->store, t, e->author, e->seq, &pre);
    if (rc == NS_ERR_NOTFOUND)
        return NS_ERR_FORK; /* stored before pre-states were kept */
    if (rc != NS_OK)
        return rc;
    pre.banned = false;
    if ((rc = ns_rule_chain(&pre, e, NULL)) != NS_OK)
        return rc;
    for (uint32_t i = 0; i < e->n_refs; i++) {
        const uint8_t *ref = e->refs + (size_t)i * NS_HASH_BYTES;
        ns_credit_rec_t c;
        if ((rc = ns_rule_ref_distinct(e, i)) != NS_OK)
            return rc;
        rc = ns_lstore_credit_get(ap->store, t, ref, e->author, &c);
        if (rc == NS_ERR_NOTFOUND) {
            const uint8_t *b;
            size_t n;
            if (ns_lstore_entry_bytes(ap->store, t, ref, &b, &n) !=
                NS_ERR_NOTFOUND)
                return NS_ERR_NOCREDIT;
            memcpy(ap->missing, ref, NS_HASH_BYTES);
            return NS_ERR_MISSING;
        }
        if (rc != NS_OK)
            return rc;
        if (c.state == NS_CREDIT_CLAIMED &&
            (rc = s_claimed_from(ap, t, e->author, e->seq, now->seq, ref)) !=
                NS_OK)
            return rc;
        if (pre.free > UINT64_MAX - c.amount)
            return NS_ERR_CORRUPT;
        pre.free += c.amount;
    }
    ns_entry_body_t b;
    if ((rc = ns_entry_body_decode(e, &b)) != NS_OK)
        return rc;
    ns_ledger_totals_t scratch = *ap->totals;
    ns_rule_io_t io;
    memset(&io, 0, sizeof io);
    io.e = e;
    io.b = &b;
    io.network_id = ap->store->network_id;
    io.author = &pre;
    io.totals = &scratch;
    io.job_rc = NS_ERR_NOTFOUND; /* JOB: its id binds author and nonce */
    switch (e->type) {
    case NS_ENTRY_TRANSFER:
    case NS_ENTRY_STAKE:
    case NS_ENTRY_UNSTAKE:
    case NS_ENTRY_JOB:
        rc = ns_rule_body(&io);
        break;
    default:
        rc = e->type <= NS_ENTRY_TYPE_MAX ? NS_OK : NS_ERR_MSGTYPE;
        break;
    }
    return rc == NS_OK ? NS_ERR_FORK : rc;
}

int ns_lapply_entry(ns_lapply_t *ap, MDB_txn *t, const ns_entry_t *e,
                    const uint8_t *buf, size_t len)
{
    ns_account_t a;
    ns_hash_t have = {0};
    ap->wrote = false;
    int rc = ns_lstore_account_get(ap->store, t, e->author, &a);
    if (rc != NS_OK)
        return rc;
    if (e->seq <= a.seq &&
        (rc = ns_lstore_chain_get(ap->store, t, e->author, e->seq, have)))
        return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
    const bool banned = a.banned;
    ns_fork_rec_t fork;
    if (ap->adopt)
        a.banned = false; /* the stake voted for e: it goes on the chain */
    else if (a.banned && e->seq == a.seq + 1 &&
             ns_lstore_fork_get(ap->store, t, e->author, &fork) == NS_OK &&
             e->seq < fork.seq)
        a.banned = false; /* below its fork: its history, which a void of
                             another chain's sent back to the buffer */
    if ((rc = ns_rule_chain(&a, e, have)) != NS_OK) {
        a.banned = banned;
        return rc == NS_ERR_FORK ? s_fork_check(ap, t, e, &a) : rc;
    }
    /* Every check first, reading only: a rejected entry writes nothing,
     * so the batch needs no child transaction to take it back. */
    const ns_account_t pre = a;
    s_refs_t w;
    ns_entry_body_t b;
    ns_rule_io_t io;
    ns_undo_rec_t u;
    w.n_credits = w.n_locks = 0;
    w.releases = false;
    if ((rc = s_apply_refs(ap, t, e, &a, &w)) != NS_OK ||
        (rc = s_apply_body(ap, t, e, &a, &w, &b, &io, &u)) != NS_OK)
        return rc;
    u.n_released = w.n_locks;
    bool deferred = ap->defer_digest && ap->defer_digest(ap->defer_user, &pre);
    ns_rule_advance(&a, e, ap->totals, !deferred);
    a.banned = banned;
    ap->wrote = true;
    if ((rc = s_write(ap, t, e, &w, &io)) ||
        (rc = ns_lstore_account_put(ap->store, t, &a)) ||
        (rc = ns_lstore_entry_put(ap->store, t, e->id, buf, len)) ||
        (rc =
             ns_lstore_chain_put(ap->store, t, e->author, e->seq, e->id, &pre)))
        return rc;
    /* what a fork needs to take the entry back (ledger.c) */
    if (e->type < NS_ENTRY_JOB && w.releases) {
        memset(&u, 0, sizeof u);
        u.n_released = w.n_locks;
    }
    if ((e->type >= NS_ENTRY_JOB || w.releases) &&
        (rc = ns_lstore_undo_put(ap->store, t, e->id, &u, w.rel)) != NS_OK)
        return rc;
    return NS_OK;
}
