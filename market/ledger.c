/* ledger.c - the ledger's public API: validation rules, derived state,
 * ingest, append, commit and queries over the LMDB store
 * (ledger_store.c).
 *
 * Every entry is validated and applied in a nested transaction of the
 * current batch: a rejected entry leaves no trace. ns_ledger_commit makes
 * the batch durable with one synced commit.
 */
#include "ledger_buffer.h"
#include "ledger_store.h"

#include "nightshift/ledger.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ns_ledger {
    ns_lstore_t store;
    MDB_txn *batch;            /* open write transaction, or NULL */
    bool dirty;                /* the batch holds changes */
    bool readonly;             /* opened with ns_ledger_open_readonly */
    ns_ledger_totals_t totals; /* as of the open batch */
    ns_slash_verifier_fn verifier;
    void *verifier_user;
    ns_lbuf_t pending; /* out-of-order entries */
    uint64_t rejected[NS_ERR_COUNT];
    ns_hash_t missing; /* set by validation on NS_ERR_MISSING */
};

static const ns_hash_t s_zero;

static bool s_is_zero(const ns_hash_t h)
{
    return sodium_is_zero(h, NS_HASH_BYTES);
}

/* A stored entry named by id; NS_ERR_MISSING (and l->missing) if unknown.
 * e borrows the transaction's memory. */
static int s_entry_load(MDB_txn *t, ns_ledger_t *l, const ns_hash_t id,
                        ns_entry_t *e, ns_entry_body_t *b)
{
    int rc = ns_lstore_entry_load(&l->store, t, id, e, b);
    if (rc == NS_ERR_NOTFOUND) {
        memcpy(l->missing, id, NS_HASH_BYTES);
        return NS_ERR_MISSING;
    }
    return rc;
}

static void s_digest_step(ns_hash_t digest, const uint8_t *author, uint64_t seq,
                          const ns_hash_t head)
{
    uint8_t buf[72], h[NS_HASH_BYTES];
    ns_ledger_chain_key(buf, author, seq);
    memcpy(buf + 40, head, 32);
    ns_hash(h, buf, sizeof buf);
    for (int i = 0; i < NS_HASH_BYTES; i++)
        digest[i] ^= h[i];
}

/* ---- the rules ------------------------------------------------------------
 */

/* Take in the credits listed in refs. */
static int s_apply_refs(MDB_txn *t, ns_ledger_t *l, const ns_entry_t *e,
                        ns_account_t *a)
{
    for (uint32_t i = 0; i < e->n_refs; i++) {
        const uint8_t *ref = e->refs + (size_t)i * NS_HASH_BYTES;
        for (uint32_t j = 0; j < i; j++)
            if (memcmp(ref, e->refs + (size_t)j * NS_HASH_BYTES,
                       NS_HASH_BYTES) == 0)
                return NS_ERR_CLAIMED; /* the same credit twice in one */
        ns_credit_rec_t c;
        int rc = ns_lstore_credit_get(&l->store, t, ref, e->author, &c);
        if (rc == NS_ERR_NOTFOUND) {
            const uint8_t *eb;
            size_t el;
            if (ns_lstore_entry_bytes(&l->store, t, ref, &eb, &el) ==
                NS_ERR_NOTFOUND) {
                memcpy(l->missing, ref, NS_HASH_BYTES);
                return NS_ERR_MISSING;
            }
            return NS_ERR_NOCREDIT;
        }
        if (rc != NS_OK)
            return rc;
        if (c.state == NS_CREDIT_CLAIMED)
            return NS_ERR_CLAIMED;
        c.state = NS_CREDIT_CLAIMED;
        if (a->free > UINT64_MAX - c.amount || l->totals.pending < c.amount)
            return NS_ERR_CORRUPT;
        a->free += c.amount;
        l->totals.pending -= c.amount;
        if (!s_is_zero(c.release_award)) {
            ns_lock_rec_t lock;
            rc = ns_lstore_lock_get(&l->store, t, e->author, c.release_award,
                                    &lock);
            if (rc == NS_OK && lock.state == NS_LOCK_LOCKED) {
                if (a->locked_collateral < lock.amount)
                    return NS_ERR_CORRUPT;
                a->locked_collateral -= lock.amount;
                a->staked += lock.amount;
                lock.state = NS_LOCK_RELEASED;
                rc = ns_lstore_lock_put(&l->store, t, e->author,
                                        c.release_award, &lock);
            } else if (rc == NS_ERR_NOTFOUND) {
                /* Never accepted: nothing to release, but the award is
                 * over for this provider -- a later ACCEPT of it would
                 * lock collateral nothing could ever free. */
                lock.amount = 0;
                lock.state = NS_LOCK_RELEASED;
                rc = ns_lstore_lock_put(&l->store, t, e->author,
                                        c.release_award, &lock);
            }
            if (rc != NS_OK)
                return rc;
        }
        if ((rc = ns_lstore_credit_put(&l->store, t, ref, e->author, &c)) !=
            NS_OK)
            return rc;
    }
    return NS_OK;
}

static int s_credit(MDB_txn *t, ns_ledger_t *l, const ns_hash_t src,
                    const uint8_t *to, uint64_t amount,
                    const ns_hash_t release_award)
{
    ns_credit_rec_t c;
    memset(&c, 0, sizeof c);
    c.amount = amount;
    if (release_award)
        memcpy(c.release_award, release_award, NS_HASH_BYTES);
    l->totals.pending += amount;
    return ns_lstore_credit_put(&l->store, t, src, to, &c);
}

static int s_job_get(MDB_txn *t, ns_ledger_t *l, const ns_hash_t job_id,
                     ns_ledger_job_t *j)
{
    int rc = ns_lstore_job_get(&l->store, t, job_id, j);
    return rc == NS_ERR_NOTFOUND ? NS_ERR_JOBSTATE : rc;
}

static int s_job_put(MDB_txn *t, ns_ledger_t *l, const ns_ledger_job_t *j)
{
    return ns_lstore_job_put(&l->store, t, j);
}

/* Load another account, apply fn's change, store it. */
static int s_other_account(MDB_txn *t, ns_ledger_t *l, const uint8_t *id,
                           ns_account_t *out)
{
    return ns_lstore_account_get(&l->store, t, id, out);
}

/* The award behind a RESULT entry: returns its job and award ids. */
static int s_result_award(MDB_txn *t, ns_ledger_t *l, const ns_hash_t result,
                          const ns_hash_t job_id, ns_entry_t *re,
                          ns_entry_body_t *rb, ns_hash_t award_id)
{
    int rc = s_entry_load(t, l, result, re, rb);
    if (rc != NS_OK)
        return rc;
    if (re->type != NS_ENTRY_RESULT || memcmp(rb->job_id, job_id, 32))
        return NS_ERR_INVAL;
    ns_entry_t ae;
    ns_entry_body_t ab;
    if ((rc = s_entry_load(t, l, rb->ref_id, &ae, &ab)) != NS_OK)
        return rc == NS_ERR_MISSING ? NS_ERR_CORRUPT : rc;
    memcpy(award_id, ab.ref_id, NS_HASH_BYTES);
    return NS_OK;
}

/* The award is over: forget what its provider wrote, so the job record
 * is the same whichever order its entries arrived in. */
static void s_job_end_award(ns_ledger_job_t *job)
{
    memset(job->award_id, 0, NS_HASH_BYTES);
    memset(job->accept_id, 0, NS_HASH_BYTES);
    memset(job->result_id, 0, NS_HASH_BYTES);
    memset(job->root, 0, NS_HASH_BYTES);
    job->n_items = 0;
}

static int s_apply_body(MDB_txn *t, ns_ledger_t *l, const ns_entry_t *e,
                        ns_account_t *a)
{
    ns_entry_body_t b;
    int rc = ns_entry_body_decode(e, &b);
    if (rc != NS_OK)
        return rc;
    ns_ledger_job_t job;
    switch (e->type) {
    case NS_ENTRY_TRANSFER:
        if (b.amount == 0 || memcmp(b.to, e->author, NS_ID_BYTES) == 0)
            return NS_ERR_INVAL;
        if (a->free < b.amount)
            return NS_ERR_FUNDS;
        a->free -= b.amount;
        return s_credit(t, l, e->id, b.to, b.amount, NULL);
    case NS_ENTRY_STAKE:
        /* A STAKE of 0 is only a way to take credits in (its refs). */
        if (b.amount == 0 && e->n_refs == 0)
            return NS_ERR_INVAL;
        if (a->free < b.amount)
            return NS_ERR_FUNDS;
        a->free -= b.amount;
        a->staked += b.amount;
        return NS_OK;
    case NS_ENTRY_UNSTAKE:
        if (b.amount == 0)
            return NS_ERR_INVAL;
        if (a->staked < b.amount) /* locked collateral is not in staked */
            return NS_ERR_FUNDS;
        a->staked -= b.amount;
        a->free += b.amount;
        return NS_OK;
    case NS_ENTRY_JOB: {
        ns_hash_t want;
        ns_ledger_job_id(want, e->author, b.desc_id, b.nonce);
        if (b.escrow == 0 || b.max_price > b.escrow ||
            b.deadline_ms <= e->timestamp_ms ||
            memcmp(want, b.job_id, NS_HASH_BYTES))
            return NS_ERR_INVAL;
        if (s_job_get(t, l, b.job_id, &job) != NS_ERR_JOBSTATE)
            return NS_ERR_JOBSTATE; /* job id already used */
        if (a->free < b.escrow)
            return NS_ERR_FUNDS;
        a->free -= b.escrow;
        a->locked_escrow += b.escrow;
        a->jobs_posted++;
        memset(&job, 0, sizeof job);
        memcpy(job.job_id, b.job_id, NS_HASH_BYTES);
        memcpy(job.requester, e->author, NS_ID_BYTES);
        job.escrow = b.escrow;
        job.max_price = b.max_price;
        job.collateral = b.collateral;
        job.deadline_ms = b.deadline_ms;
        memcpy(job.desc_id, b.desc_id, NS_HASH_BYTES);
        job.state = NS_JOB_OPEN;
        return s_job_put(t, l, &job);
    }
    case NS_ENTRY_AWARD:
        if ((rc = s_job_get(t, l, b.job_id, &job)) != NS_OK)
            return rc;
        if (memcmp(job.requester, e->author, NS_ID_BYTES) ||
            job.state != NS_JOB_OPEN)
            return NS_ERR_JOBSTATE;
        if (memcmp(b.bid.job_id, b.job_id, NS_HASH_BYTES) ||
            memcmp(b.bid.provider, e->author, NS_ID_BYTES) == 0 ||
            b.bid.price > job.max_price)
            return NS_ERR_INVAL;
        if (ns_bid_verify(&b.bid, l->store.network_id) != NS_OK)
            return NS_ERR_SIG;
        job.state = NS_JOB_AWARDED;
        job.round++;
        memcpy(job.award_id, e->id, NS_HASH_BYTES);
        memcpy(job.provider, b.bid.provider, NS_ID_BYTES);
        job.price = b.bid.price;
        memset(job.accept_id, 0, NS_HASH_BYTES);
        memset(job.result_id, 0, NS_HASH_BYTES);
        memset(job.root, 0, NS_HASH_BYTES);
        job.n_items = 0;
        return s_job_put(t, l, &job);
    case NS_ENTRY_ACCEPT: {
        ns_entry_t ae;
        ns_entry_body_t ab;
        if ((rc = s_entry_load(t, l, b.ref_id, &ae, &ab)) != NS_OK)
            return rc;
        if (ae.type != NS_ENTRY_AWARD ||
            memcmp(ab.job_id, b.job_id, NS_HASH_BYTES) ||
            memcmp(ab.bid.provider, e->author, NS_ID_BYTES))
            return NS_ERR_INVAL;
        if ((rc = s_job_get(t, l, b.job_id, &job)) != NS_OK)
            return rc;
        ns_pjob_rec_t pj;
        ns_lock_rec_t prior;
        if (ns_lstore_pjob_get(&l->store, t, e->author, b.ref_id, &pj) ==
                NS_OK ||
            ns_lstore_lock_get(&l->store, t, e->author, b.ref_id, &prior) ==
                NS_OK)
            return NS_ERR_JOBSTATE; /* accepted already, or released */
        if (a->staked < job.collateral)
            return NS_ERR_FUNDS;
        a->staked -= job.collateral;
        a->locked_collateral += job.collateral;
        ns_lock_rec_t lock = {job.collateral, NS_LOCK_LOCKED};
        memset(&pj, 0, sizeof pj);
        memcpy(pj.job_id, b.job_id, NS_HASH_BYTES);
        memcpy(pj.accept_id, e->id, NS_HASH_BYTES);
        if ((rc = ns_lstore_lock_put(&l->store, t, e->author, b.ref_id,
                                     &lock)) ||
            (rc = ns_lstore_pjob_put(&l->store, t, e->author, b.ref_id, &pj)))
            return rc;
        if (memcmp(job.award_id, b.ref_id, NS_HASH_BYTES) == 0) {
            memcpy(job.accept_id, e->id, NS_HASH_BYTES); /* for queries */
            return s_job_put(t, l, &job);
        }
        return NS_OK;
    }
    case NS_ENTRY_RESULT: {
        ns_entry_t ae;
        ns_entry_body_t ab;
        if ((rc = s_entry_load(t, l, b.ref_id, &ae, &ab)) != NS_OK)
            return rc;
        if (ae.type != NS_ENTRY_ACCEPT ||
            memcmp(ae.author, e->author, NS_ID_BYTES) ||
            memcmp(ab.job_id, b.job_id, NS_HASH_BYTES) || b.n_items == 0)
            return NS_ERR_INVAL;
        ns_pjob_rec_t pj;
        if ((rc = ns_lstore_pjob_get(&l->store, t, e->author, ab.ref_id,
                                     &pj)) != NS_OK)
            return rc == NS_ERR_NOTFOUND ? NS_ERR_JOBSTATE : rc;
        if (!s_is_zero(pj.result_id))
            return NS_ERR_JOBSTATE; /* one RESULT per accept */
        memcpy(pj.result_id, e->id, NS_HASH_BYTES);
        if ((rc = ns_lstore_pjob_put(&l->store, t, e->author, ab.ref_id, &pj)))
            return rc;
        if ((rc = s_job_get(t, l, b.job_id, &job)) != NS_OK)
            return rc;
        if (memcmp(job.award_id, ab.ref_id, NS_HASH_BYTES) == 0) {
            memcpy(job.result_id, e->id, NS_HASH_BYTES);
            memcpy(job.root, b.root, NS_HASH_BYTES);
            job.n_items = b.n_items;
            return s_job_put(t, l, &job);
        }
        return NS_OK;
    }
    case NS_ENTRY_SETTLE:
    case NS_ENTRY_SLASH: {
        ns_entry_t re;
        ns_entry_body_t rb;
        ns_hash_t award;
        if ((rc = s_result_award(t, l, b.ref_id, b.job_id, &re, &rb, award)) !=
            NS_OK)
            return rc;
        if ((rc = s_job_get(t, l, b.job_id, &job)) != NS_OK)
            return rc;
        if (memcmp(job.requester, e->author, NS_ID_BYTES) ||
            job.state != NS_JOB_AWARDED ||
            memcmp(job.award_id, award, NS_HASH_BYTES))
            return NS_ERR_JOBSTATE;
        ns_account_t prov;
        if ((rc = s_other_account(t, l, job.provider, &prov)) != NS_OK)
            return rc;
        if (e->type == NS_ENTRY_SETTLE) {
            if (a->locked_escrow < job.escrow)
                return NS_ERR_CORRUPT;
            a->locked_escrow -= job.escrow;
            a->free += job.escrow - job.price;
            a->jobs_settled_as_requester++;
            prov.jobs_settled++;
            job.state = NS_JOB_SETTLED;
            if ((rc = s_credit(t, l, e->id, job.provider, job.price, award)))
                return rc;
        } else {
            if (!l->verifier)
                return NS_ERR_STATE; /* no way to check the proof */
            if (l->verifier(l->verifier_user, &job, job.provider, rb.root,
                            rb.n_items, b.proof, b.proof_len) != NS_OK)
                return NS_ERR_PROOF;
            ns_lock_rec_t lock;
            if ((rc = ns_lstore_lock_get(&l->store, t, job.provider, award,
                                         &lock)))
                return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
            if (lock.state == NS_LOCK_LOCKED) {
                prov.locked_collateral -= lock.amount;
                l->totals.burned += lock.amount;
                lock.state = NS_LOCK_BURNED;
                if ((rc = ns_lstore_lock_put(&l->store, t, job.provider, award,
                                             &lock)))
                    return rc;
            }
            prov.jobs_slashed++;
            job.slashed++;
            job.state = NS_JOB_OPEN; /* the job moves on */
            s_job_end_award(&job);
        }
        if ((rc = ns_lstore_account_put(&l->store, t, &prov)) != NS_OK)
            return rc;
        return s_job_put(t, l, &job);
    }
    case NS_ENTRY_CANCEL: {
        if ((rc = s_job_get(t, l, b.job_id, &job)) != NS_OK)
            return rc;
        if (memcmp(job.requester, e->author, NS_ID_BYTES) ||
            (job.state != NS_JOB_OPEN && job.state != NS_JOB_AWARDED))
            return NS_ERR_JOBSTATE;
        if (b.reopen && b.new_deadline_ms <= e->timestamp_ms)
            return NS_ERR_INVAL;
        if (!s_is_zero(b.ref_id)) {
            /* The award's provider accepted and went silent: after the
             * deadline, a tenth of its collateral is burned. */
            ns_entry_t ae;
            ns_entry_body_t ab;
            if ((rc = s_entry_load(t, l, b.ref_id, &ae, &ab)) != NS_OK)
                return rc;
            if (ae.type != NS_ENTRY_ACCEPT ||
                memcmp(ab.job_id, b.job_id, NS_HASH_BYTES) ||
                job.state != NS_JOB_AWARDED ||
                memcmp(ab.ref_id, job.award_id, NS_HASH_BYTES))
                return NS_ERR_JOBSTATE;
            if (e->timestamp_ms < job.deadline_ms)
                return NS_ERR_JOBSTATE; /* deadline not reached */
            ns_lock_rec_t lock;
            if ((rc = ns_lstore_lock_get(&l->store, t, job.provider,
                                         job.award_id, &lock)))
                return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
            ns_account_t prov;
            if ((rc = s_other_account(t, l, job.provider, &prov)) != NS_OK)
                return rc;
            if (lock.state == NS_LOCK_LOCKED) {
                uint64_t penalty = lock.amount / 10;
                prov.locked_collateral -= penalty;
                lock.amount -= penalty;
                l->totals.burned += penalty;
                if ((rc = ns_lstore_lock_put(&l->store, t, job.provider,
                                             job.award_id, &lock)))
                    return rc;
            }
            prov.jobs_cancelled++;
            if ((rc = ns_lstore_account_put(&l->store, t, &prov)) != NS_OK)
                return rc;
        }
        if (job.state == NS_JOB_AWARDED &&
            (rc = s_credit(t, l, e->id, job.provider, 0, job.award_id)))
            return rc; /* releases whatever the provider locked */
        s_job_end_award(&job);
        if (b.reopen) {
            job.state = NS_JOB_OPEN;
            job.deadline_ms = b.new_deadline_ms;
        } else {
            if (a->locked_escrow < job.escrow)
                return NS_ERR_CORRUPT;
            a->locked_escrow -= job.escrow;
            a->free += job.escrow;
            job.state = NS_JOB_CANCELLED;
        }
        return s_job_put(t, l, &job);
    }
    default:
        return NS_ERR_MSGTYPE;
    }
}

/* Validate and apply one decoded entry in transaction t. */
static int s_apply(MDB_txn *t, ns_ledger_t *l, const ns_entry_t *e,
                   const uint8_t *buf, size_t len)
{
    ns_account_t a;
    int rc = ns_lstore_account_get(&l->store, t, e->author, &a);
    if (rc != NS_OK)
        return rc;
    if (e->seq <= a.seq) {
        ns_hash_t have;
        if ((rc = ns_lstore_chain_get(&l->store, t, e->author, e->seq, have)))
            return rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : rc;
        return memcmp(have, e->id, NS_HASH_BYTES) ? NS_ERR_FORK
                                                  : NS_ERR_DUPLICATE;
    }
    if (a.banned)
        return NS_ERR_BANNED;
    if (e->seq > a.seq + 1)
        return NS_ERR_GAP;
    if (memcmp(e->prev, a.seq ? a.head : s_zero, NS_HASH_BYTES))
        return NS_ERR_PREV;
    if (e->timestamp_ms < a.head_timestamp_ms)
        return NS_ERR_STALE; /* a chain's clock never runs backwards */
    if ((rc = s_apply_refs(t, l, e, &a)) != NS_OK)
        return rc;
    if ((rc = s_apply_body(t, l, e, &a)) != NS_OK)
        return rc;
    /* The body may have changed this same account through another path
     * (it never does today: requester and provider differ); re-read the
     * counters it may have bumped on a copy is not needed. */
    if (a.seq)
        s_digest_step(l->totals.digest, e->author, a.seq, a.head);
    a.seq = e->seq;
    memcpy(a.head, e->id, NS_HASH_BYTES);
    a.head_timestamp_ms = e->timestamp_ms;
    s_digest_step(l->totals.digest, e->author, a.seq, a.head);
    if ((rc = ns_lstore_account_put(&l->store, t, &a)) ||
        (rc = ns_lstore_entry_put(&l->store, t, e->id, buf, len)) ||
        (rc = ns_lstore_chain_put(&l->store, t, e->author, e->seq, e->id)))
        return rc;
    l->totals.entries++;
    return NS_OK;
}

/* ---- transactions ------------------------------------------------------ */

static int s_totals_save(MDB_txn *t, ns_ledger_t *l)
{
    return ns_lstore_totals_put(&l->store, t, &l->totals);
}

static int s_batch(ns_ledger_t *l)
{
    if (l->batch)
        return NS_OK;
    if (l->readonly)
        return NS_ERR_STATE;
    return ns_lstore_begin(&l->store, NULL, false, &l->batch);
}

int ns_ledger_commit(ns_ledger_t *l)
{
    if (!l->batch)
        return NS_OK;
    if (!l->dirty) {
        /* Only rejections or duplicates: nothing to write, and a held
         * write transaction would block every other writer. */
        mdb_txn_abort(l->batch);
        l->batch = NULL;
        return NS_OK;
    }
    l->dirty = false;
    int rc = s_totals_save(l->batch, l);
    if (rc != NS_OK) {
        mdb_txn_abort(l->batch);
        l->batch = NULL;
        return rc;
    }
    rc = ns_lstore_commit(&l->store, l->batch); /* synced */
    l->batch = NULL;
    return rc;
}

/* One entry in a child transaction of the batch. */
static int s_store(ns_ledger_t *l, const uint8_t *buf, size_t len,
                   const ns_entry_t *e)
{
    int rc = s_batch(l);
    if (rc != NS_OK)
        return rc;
    MDB_txn *child = NULL;
    if ((rc = ns_lstore_begin(&l->store, l->batch, false, &child)) != NS_OK)
        return rc;
    ns_ledger_totals_t saved = l->totals;
    rc = s_apply(child, l, e, buf, len);
    if (rc == NS_ERR_FORK) {
        /* Keep the proof and ban the author, whatever else happens. */
        ns_ledger_totals_t keep = l->totals;
        l->totals = saved;
        (void)keep;
        ns_account_t a;
        ns_fork_rec_t f;
        memset(&f, 0, sizeof f);
        f.seq = e->seq;
        if (ns_lstore_chain_get(&l->store, child, e->author, e->seq, f.first) ==
                NS_OK &&
            ns_lstore_account_get(&l->store, child, e->author, &a) == NS_OK) {
            memcpy(f.second, e->id, 32);
            bool first_fork = !a.banned;
            a.banned = true;
            if (ns_lstore_account_put(&l->store, child, &a) == NS_OK &&
                ns_lstore_fork_put(&l->store, child, e->author, &f, buf, len) ==
                    NS_OK &&
                ns_lstore_commit(&l->store, child) == NS_OK) {
                l->dirty = true;
                if (first_fork)
                    l->totals.forks++;
                return NS_ERR_FORK;
            }
        }
        mdb_txn_abort(child);
        return NS_ERR_FORK;
    }
    if (rc != NS_OK) {
        mdb_txn_abort(child);
        l->totals = saved;
        return rc;
    }
    if ((rc = ns_lstore_commit(&l->store, child)) != NS_OK)
        l->totals = saved;
    else
        l->dirty = true;
    return rc;
}

/* ---- out-of-order buffer ------------------------------------------------ */

static int s_ingest_one(ns_ledger_t *l, const uint8_t *buf, size_t len,
                        uint8_t *missing_author, uint64_t *missing_seq,
                        ns_entry_t *e);

/* After storing e, retry what waited for it: its author's next entry and
 * entries that named it. Each waiting entry is tried once per call; one
 * that still cannot apply goes back to the buffer (no loop), one that
 * applies retries its own waiters in turn. */
static void s_pending_retry(ns_ledger_t *l, const ns_entry_t *stored)
{
    ns_lbuf_item_t *take = NULL;
    uint32_t n = ns_lbuf_take(&l->pending, stored->author, stored->seq,
                              stored->id, &take);
    for (uint32_t k = 0; k < n; k++) {
        ns_entry_t e;
        s_ingest_one(l, take[k].bytes, take[k].len, NULL, NULL, &e);
        free(take[k].bytes);
    }
    free(take);
}

static int s_ingest_one(ns_ledger_t *l, const uint8_t *buf, size_t len,
                        uint8_t *missing_author, uint64_t *missing_seq,
                        ns_entry_t *e)
{
    int rc = ns_entry_decode(buf, len, l->store.network_id, e);
    if (rc == NS_OK)
        rc = s_store(l, buf, len, e);
    if (rc == NS_OK) {
        s_pending_retry(l, e);
        return NS_OK;
    }
    if (rc == NS_ERR_GAP || rc == NS_ERR_MISSING) {
        ns_lbuf_add(&l->pending, buf, len, e,
                    rc == NS_ERR_MISSING ? l->missing : NULL);
        if (missing_author && rc == NS_ERR_GAP) {
            ns_account_t a;
            memcpy(missing_author, e->author, 32);
            if (missing_seq && ns_ledger_account(l, e->author, &a) == NS_OK)
                *missing_seq = a.seq + 1;
        }
        return rc;
    }
    if (rc != NS_ERR_DUPLICATE)
        l->rejected[-rc < NS_ERR_COUNT ? -rc : 0]++;
    return rc;
}

int ns_ledger_ingest(ns_ledger_t *l, const uint8_t *buf, size_t len,
                     uint8_t *missing_author, uint64_t *missing_seq)
{
    ns_entry_t e;
    return s_ingest_one(l, buf, len, missing_author, missing_seq, &e);
}

int ns_ledger_append(ns_ledger_t *l, const ns_identity_t *me, uint8_t type,
                     const ns_entry_body_t *body, const uint8_t *refs,
                     uint32_t n_refs, ns_buf_t *out, ns_hash_t id)
{
    ns_account_t a;
    ns_buf_t bb;
    ns_buf_init(&bb);
    int rc = ns_ledger_account(l, ns_identity_pk(me), &a);
    if (rc == NS_OK)
        rc = ns_entry_body_encode(type, body, &bb);
    if (rc != NS_OK) {
        ns_buf_release(&bb);
        return rc;
    }
    uint64_t ts = ns_now_ms();
    if (ts < a.head_timestamp_ms)
        ts = a.head_timestamp_ms;
    rc = ns_entry_encode(me, l->store.network_id, a.seq + 1,
                         a.seq ? a.head : s_zero, type, bb.data, bb.len, refs,
                         n_refs, ts, out, id);
    ns_buf_release(&bb);
    if (rc != NS_OK)
        return rc;
    ns_entry_t e;
    if ((rc = ns_entry_decode(out->data, out->len, l->store.network_id, &e)) !=
        NS_OK)
        return rc;
    if ((rc = s_store(l, out->data, out->len, &e)) != NS_OK) {
        l->rejected[-rc < NS_ERR_COUNT ? -rc : 0]++;
        return rc;
    }
    rc = ns_ledger_commit(l);
    if (rc == NS_OK)
        s_pending_retry(l, &e);
    return rc;
}

/* ---- open / close ----------------------------------------------------- */

static int s_read_txn(ns_ledger_t *l, MDB_txn **t, bool *own)
{
    if (l->batch) {
        *t = l->batch;
        *own = false;
        return NS_OK;
    }
    *own = true;
    return ns_lstore_begin(&l->store, NULL, true, t);
}

static void s_read_done(MDB_txn *t, bool own)
{
    if (own)
        mdb_txn_abort(t);
}

int ns_ledger_check_conservation(ns_ledger_t *l, uint64_t *sum)
{
    /* One transaction for the accounts and the totals, so a reader in
     * another process never mixes two states of a writing node. */
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_ledger_totals_t totals = l->totals;
    if (own && ns_lstore_totals_get(&l->store, t, &totals) != NS_OK)
        rc = NS_ERR_CORRUPT;
    uint64_t s = 0;
    if (rc == NS_OK)
        rc = ns_lstore_sum_accounts(&l->store, t, &s);
    s_read_done(t, own);
    s += totals.pending + totals.burned;
    if (sum)
        *sum = s;
    if (rc == NS_OK && s != totals.total)
        rc = NS_ERR_CORRUPT;
    return rc;
}

static ns_ledger_t *s_open(const char *dir, const ns_genesis_t *g,
                           bool readonly, int *rc, char *err, size_t errlen);

ns_ledger_t *ns_ledger_open(const char *dir, const ns_genesis_t *g, int *rc,
                            char *err, size_t errlen)
{
    return s_open(dir, g, false, rc, err, errlen);
}

ns_ledger_t *ns_ledger_open_readonly(const char *dir, const ns_genesis_t *g,
                                     int *rc, char *err, size_t errlen)
{
    return s_open(dir, g, true, rc, err, errlen);
}

static ns_ledger_t *s_open(const char *dir, const ns_genesis_t *g,
                           bool readonly, int *rc, char *err, size_t errlen)
{
    ns_ledger_t *l = calloc(1, sizeof *l);
    MDB_txn *t = NULL;
    int r = NS_ERR_NOMEM;
    if (!l)
        goto fail;
    if ((r = ns_lbuf_init(&l->pending)) != NS_OK)
        goto fail;
    memcpy(l->store.network_id, g->network_id, NS_HASH_BYTES);
    l->readonly = readonly;
    char datafile[PATH_MAX];
    if (readonly &&
        (ns_path_join(datafile, sizeof datafile, dir, "data.mdb") != NS_OK ||
         access(datafile, R_OK) != 0)) {
        r = NS_ERR_NOTFOUND;
        snprintf(err, errlen,
                 "no ledger in %s yet (it is created when the "
                 "node first starts)",
                 dir);
        goto fail;
    }
    if (!readonly && (r = ns_mkdir_p(dir, 0700)) != NS_OK) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        goto fail;
    }
    if ((r = ns_lstore_open(&l->store, dir, readonly, NS_LEDGER_MAP_BYTES, &t,
                            err, errlen)) != NS_OK)
        goto fail;
    ns_hash_t stored;
    r = ns_lstore_network_get(&l->store, t, stored);
    if (r == NS_ERR_NOTFOUND && !readonly) {
        /* A new ledger: the genesis allocations are the first state. */
        memset(&l->totals, 0, sizeof l->totals);
        for (uint32_t i = 0; i < g->n_allocs; i++) {
            ns_account_t a;
            memset(&a, 0, sizeof a);
            memcpy(a.id, g->allocs[i].id, NS_ID_BYTES);
            a.free = g->allocs[i].credits;
            if ((r = ns_lstore_account_put(&l->store, t, &a)) != NS_OK)
                goto fail;
        }
        l->totals.total = g->total_credits;
        if ((r = ns_lstore_network_put(&l->store, t, g->network_id)) != NS_OK ||
            (r = s_totals_save(t, l)) != NS_OK)
            goto fail;
    } else if (r != NS_OK) {
        snprintf(err, errlen, "ledger %s is corrupt: no readable network id",
                 dir);
        goto fail;
    } else {
        if (memcmp(stored, g->network_id, NS_HASH_BYTES)) {
            r = NS_ERR_NETWORK;
            snprintf(err, errlen,
                     "ledger %s belongs to another network (genesis "
                     "changed?)",
                     dir);
            goto fail;
        }
        if ((r = ns_lstore_totals_get(&l->store, t, &l->totals)) != NS_OK) {
            snprintf(err, errlen, "ledger %s is corrupt: totals unreadable",
                     dir);
            r = NS_ERR_CORRUPT;
            goto fail;
        }
    }
    int mrc = mdb_txn_commit(t);
    t = NULL;
    if (mrc != MDB_SUCCESS) {
        r = ns_lstore_rc(&l->store, mrc);
        snprintf(err, errlen, "ledger %s: %s", dir, mdb_strerror(mrc));
        goto fail;
    }
    uint64_t sum = 0;
    if (l->totals.total != g->total_credits ||
        ns_ledger_check_conservation(l, &sum) != NS_OK) {
        r = NS_ERR_CORRUPT;
        snprintf(err, errlen,
                 "ledger %s is corrupt: balances sum to %llu, genesis total "
                 "is %llu; refusing to serve wrong balances",
                 dir, (unsigned long long)sum,
                 (unsigned long long)g->total_credits);
        goto fail;
    }
    *rc = NS_OK;
    return l;
fail:
    if (t)
        mdb_txn_abort(t);
    *rc = r;
    if (err && !err[0])
        snprintf(err, errlen, "%s", ns_strerror(r));
    ns_ledger_close(&l);
    return NULL;
}

void ns_ledger_close(ns_ledger_t **pl)
{
    if (!pl || !*pl)
        return;
    ns_ledger_t *l = *pl;
    if (l->batch && ns_ledger_commit(l) != NS_OK)
        ns_error(NS_MOD_LEDGER, "event=final_commit_failed");
    ns_lbuf_release(&l->pending);
    ns_lstore_close(&l->store);
    free(l);
    *pl = NULL;
}

void ns_ledger_set_verifier(ns_ledger_t *l, ns_slash_verifier_fn fn, void *user)
{
    l->verifier = fn;
    l->verifier_user = user;
}

/* ---- queries --------------------------------------------------------------
 */

int ns_ledger_account(ns_ledger_t *l, const uint8_t id[NS_ID_BYTES],
                      ns_account_t *out)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    rc = ns_lstore_account_get(&l->store, t, id, out);
    s_read_done(t, own);
    return rc;
}

int ns_ledger_job(ns_ledger_t *l, const ns_hash_t job_id, ns_ledger_job_t *out)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    rc = ns_lstore_job_get(&l->store, t, job_id, out);
    s_read_done(t, own);
    return rc;
}

int ns_ledger_credit(ns_ledger_t *l, const ns_hash_t ref,
                     const uint8_t to[NS_ID_BYTES], uint64_t *amount,
                     bool *claimed)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_credit_rec_t c;
    rc = ns_lstore_credit_get(&l->store, t, ref, to, &c);
    if (rc == NS_OK) {
        *amount = c.amount;
        *claimed = c.state == NS_CREDIT_CLAIMED;
    }
    s_read_done(t, own);
    return rc;
}

uint32_t ns_ledger_unclaimed(ns_ledger_t *l, const uint8_t to[NS_ID_BYTES],
                             uint8_t *ids, uint32_t max)
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return 0;
    uint32_t n = ns_lstore_unclaimed(&l->store, t, to, ids, max);
    s_read_done(t, own);
    return n;
}

int ns_ledger_get(ns_ledger_t *l, const uint8_t author[NS_ID_BYTES],
                  uint64_t seq, uint8_t **buf, size_t *len)
{
    MDB_txn *t;
    bool own;
    int rc = s_read_txn(l, &t, &own);
    if (rc != NS_OK)
        return rc;
    ns_hash_t id;
    const uint8_t *stored;
    size_t n;
    rc = ns_lstore_chain_get(&l->store, t, author, seq, id);
    if (rc == NS_OK)
        rc = ns_lstore_entry_bytes(&l->store, t, id, &stored, &n);
    if (rc == NS_OK) {
        *buf = malloc(n);
        if (!*buf)
            rc = NS_ERR_NOMEM;
        else {
            memcpy(*buf, stored, n);
            *len = n;
        }
    }
    s_read_done(t, own);
    return rc;
}

void ns_ledger_each_account(ns_ledger_t *l,
                            bool (*fn)(void *u, const ns_account_t *a), void *u)
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return;
    ns_lstore_each_account(&l->store, t, fn, u);
    s_read_done(t, own);
}

void ns_ledger_each_entry(ns_ledger_t *l, const uint8_t *author,
                          bool (*fn)(void *u, const ns_entry_t *e), void *u)
{
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) != NS_OK)
        return;
    ns_lstore_each_entry(&l->store, t, author, fn, u);
    s_read_done(t, own);
}

void ns_ledger_stats(ns_ledger_t *l, ns_ledger_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (l->readonly) { /* another process writes: read the latest */
        MDB_txn *t;
        if (ns_lstore_begin(&l->store, NULL, true, &t) == NS_OK) {
            if (ns_lstore_totals_get(&l->store, t, &l->totals) != NS_OK)
                memset(&l->totals, 0, sizeof l->totals);
            mdb_txn_abort(t);
        }
    }
    s->entries = l->totals.entries;
    s->total = l->totals.total;
    s->burned = l->totals.burned;
    s->pending_credit = l->totals.pending;
    s->forks = l->totals.forks;
    s->buffered = l->pending.n;
    memcpy(s->digest, l->totals.digest, NS_HASH_BYTES);
    memcpy(s->rejected, l->rejected, sizeof s->rejected);
    MDB_txn *t;
    bool own;
    if (s_read_txn(l, &t, &own) == NS_OK) {
        uint64_t n;
        if (ns_lstore_count_accounts(&l->store, t, &n) == NS_OK)
            s->accounts = n;
        s_read_done(t, own);
    }
}
