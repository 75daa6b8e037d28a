/* ledger_rules.c - one pure function per entry type (ledger_rules.h). */
#include "ledger_rules.h"

#include <sodium.h>
#include <string.h>

static const ns_hash_t s_zero;

static bool s_is_zero(const ns_hash_t h)
{
    return sodium_is_zero(h, NS_HASH_BYTES);
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

/* ---- chains and credits -------------------------------------------------- */

void ns_rule_genesis(const ns_genesis_t *g, uint32_t i, ns_account_t *a)
{
    memset(a, 0, sizeof *a);
    memcpy(a->id, g->allocs[i].id, NS_ID_BYTES);
    a->free = g->allocs[i].micro;
}

int ns_rule_chain(const ns_account_t *a, const ns_entry_t *e,
                  const ns_hash_t have)
{
    if (e->seq <= a->seq)
        return memcmp(have, e->id, NS_HASH_BYTES) ? NS_ERR_FORK
                                                  : NS_ERR_DUPLICATE;
    if (a->banned)
        return NS_ERR_BANNED;
    if (e->seq > a->seq + 1)
        return NS_ERR_GAP;
    if (memcmp(e->prev, a->seq ? a->head : s_zero, NS_HASH_BYTES))
        return NS_ERR_PREV;
    if (e->timestamp_ms < a->head_timestamp_ms)
        return NS_ERR_STALE; /* a chain's clock never runs backwards */
    return NS_OK;
}

void ns_rule_advance(ns_account_t *a, const ns_entry_t *e,
                     ns_ledger_totals_t *totals, bool digest)
{
    if (digest && a->seq)
        s_digest_step(totals->digest, e->author, a->seq, a->head);
    a->seq = e->seq;
    memcpy(a->head, e->id, NS_HASH_BYTES);
    a->head_timestamp_ms = e->timestamp_ms;
    if (digest)
        s_digest_step(totals->digest, e->author, a->seq, a->head);
    totals->entries++;
}

void ns_rule_digest_move(ns_hash_t digest, const uint8_t *author,
                         uint64_t from_seq, const ns_hash_t from_head,
                         uint64_t to_seq, const ns_hash_t to_head)
{
    if (from_seq == to_seq &&
        (from_seq == 0 || memcmp(from_head, to_head, NS_HASH_BYTES) == 0))
        return;
    if (from_seq)
        s_digest_step(digest, author, from_seq, from_head);
    if (to_seq)
        s_digest_step(digest, author, to_seq, to_head);
}

void ns_rule_rewind(ns_account_t *a, const ns_account_t *pre,
                    uint64_t locked_collateral, uint64_t locked_escrow,
                    bool ban, ns_ledger_totals_t *totals)
{
    if (a->seq)
        s_digest_step(totals->digest, a->id, a->seq, a->head);
    if (pre->seq)
        s_digest_step(totals->digest, a->id, pre->seq, pre->head);
    if (totals->entries >= a->seq - pre->seq)
        totals->entries -= a->seq - pre->seq;
    /* what other chains did to the account stays: they may have done it
     * before or after the pre-state was taken, depending on the order a
     * node saw the entries in */
    const uint32_t settled = a->jobs_settled, slashed = a->jobs_slashed,
                   cancelled = a->jobs_cancelled;
    const bool banned = a->banned;
    *a = *pre;
    a->jobs_settled = settled;
    a->jobs_slashed = slashed;
    a->jobs_cancelled = cancelled;
    a->locked_collateral = locked_collateral;
    a->locked_escrow = locked_escrow;
    a->banned = ban || banned;
}

int ns_rule_ref_distinct(const ns_entry_t *e, uint32_t i)
{
    const uint8_t *ref = e->refs + (size_t)i * NS_HASH_BYTES;
    for (uint32_t j = 0; j < i; j++)
        if (memcmp(ref, e->refs + (size_t)j * NS_HASH_BYTES, NS_HASH_BYTES) ==
            0)
            return NS_ERR_CLAIMED; /* the same credit twice in one */
    return NS_OK;
}

int ns_rule_claim(ns_account_t *a, ns_ledger_totals_t *totals,
                  ns_rule_claim_t *c)
{
    c->put_lock = false;
    if (c->credit_rc == NS_ERR_NOTFOUND)
        return c->ref_known ? NS_ERR_NOCREDIT : NS_ERR_MISSING;
    if (c->credit_rc != NS_OK)
        return c->credit_rc;
    if (c->credit.state == NS_CREDIT_CLAIMED)
        return NS_ERR_CLAIMED;
    c->credit.state = NS_CREDIT_CLAIMED;
    if (a->free > UINT64_MAX - c->credit.amount ||
        totals->pending < c->credit.amount)
        return NS_ERR_CORRUPT;
    a->free += c->credit.amount;
    totals->pending -= c->credit.amount;
    if (s_is_zero(c->credit.release_award))
        return NS_OK;
    if (c->lock_rc == NS_OK && c->lock.state == NS_LOCK_LOCKED) {
        if (a->locked_collateral < c->lock.amount)
            return NS_ERR_CORRUPT;
        a->locked_collateral -= c->lock.amount;
        a->staked += c->lock.amount;
        c->lock.state = NS_LOCK_RELEASED;
        c->put_lock = true;
    } else if (c->lock_rc == NS_ERR_NOTFOUND) {
        /* Never accepted: nothing to release, but the award is over for
         * this provider -- a later ACCEPT of it would lock collateral
         * nothing could ever free. */
        c->lock.amount = 0;
        c->lock.state = NS_LOCK_RELEASED;
        c->put_lock = true;
    } else if (c->lock_rc != NS_OK) {
        return c->lock_rc;
    }
    return NS_OK;
}

/* ---- helpers of the body rules ------------------------------------------- */

/* A new credit from this entry for `to`. */
static void s_credit(ns_rule_io_t *io, const uint8_t *to, uint64_t amount,
                     const ns_hash_t release_award)
{
    memset(&io->credit, 0, sizeof io->credit);
    memcpy(io->credit_to, to, NS_ID_BYTES);
    io->credit.amount = amount;
    if (release_award)
        memcpy(io->credit.release_award, release_award, NS_HASH_BYTES);
    io->totals->pending += amount;
    io->put_credit = true;
}

/* The entry b->ref_id names must be known. */
static int s_ref(ns_rule_io_t *io)
{
    if (io->ref.rc == NS_ERR_NOTFOUND) {
        memcpy(io->missing, io->b->ref_id, NS_HASH_BYTES);
        return NS_ERR_MISSING;
    }
    return io->ref.rc;
}

/* The job b->job_id must exist. */
static int s_job(const ns_rule_io_t *io)
{
    return io->job_rc == NS_ERR_NOTFOUND ? NS_ERR_JOBSTATE : io->job_rc;
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

uint64_t ns_rule_close_at(const ns_ledger_job_t *job, uint64_t window_ms)
{
    if (window_ms == 0)
        window_ms = NS_GENESIS_CLOSE_WINDOW_MS;
    return job->deadline_ms > UINT64_MAX - window_ms
               ? UINT64_MAX
               : job->deadline_ms + window_ms;
}

/* An award past deadline + window is its provider's to close (CLOSE):
 * the requester's SETTLE, SLASH or CANCEL of it comes too late. Both
 * sides read the same two numbers, the job's deadline and the entry's
 * own timestamp, so every node draws the line in the same place. */
static bool s_late(const ns_rule_io_t *io)
{
    return io->e->timestamp_ms >=
           ns_rule_close_at(&io->job, io->close_window_ms);
}

/* ---- the body rules ------------------------------------------------------ */

int ns_rule_transfer(ns_rule_io_t *io)
{
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    if (b->amount == 0 || memcmp(b->to, io->e->author, NS_ID_BYTES) == 0)
        return NS_ERR_INVAL;
    if (a->free < b->amount)
        return NS_ERR_FUNDS;
    a->free -= b->amount;
    s_credit(io, b->to, b->amount, NULL);
    return NS_OK;
}

int ns_rule_stake(ns_rule_io_t *io)
{
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    /* A STAKE of 0 is only a way to take credits in (its refs). */
    if (b->amount == 0 && io->e->n_refs == 0)
        return NS_ERR_INVAL;
    if (a->free < b->amount)
        return NS_ERR_FUNDS;
    a->free -= b->amount;
    a->staked += b->amount;
    return NS_OK;
}

int ns_rule_unstake(ns_rule_io_t *io)
{
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    if (b->amount == 0)
        return NS_ERR_INVAL;
    if (a->staked < b->amount) /* locked collateral is not in staked */
        return NS_ERR_FUNDS;
    a->staked -= b->amount;
    a->free += b->amount;
    return NS_OK;
}

int ns_rule_job(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    ns_ledger_job_t *job = &io->job;
    ns_hash_t want;
    ns_ledger_job_id(want, e->author, b->desc_id, b->nonce);
    if (b->escrow == 0 || b->max_price > b->escrow ||
        b->deadline_ms <= e->timestamp_ms ||
        memcmp(want, b->job_id, NS_HASH_BYTES))
        return NS_ERR_INVAL;
    if (io->job_rc != NS_ERR_NOTFOUND)
        return NS_ERR_JOBSTATE; /* job id already used */
    if (a->free < b->escrow)
        return NS_ERR_FUNDS;
    a->free -= b->escrow;
    a->locked_escrow += b->escrow;
    a->jobs_posted++;
    memset(job, 0, sizeof *job);
    memcpy(job->job_id, b->job_id, NS_HASH_BYTES);
    memcpy(job->requester, e->author, NS_ID_BYTES);
    job->escrow = b->escrow;
    job->max_price = b->max_price;
    job->collateral = b->collateral;
    job->deadline_ms = b->deadline_ms;
    memcpy(job->desc_id, b->desc_id, NS_HASH_BYTES);
    job->state = NS_JOB_OPEN;
    io->put_job = true;
    return NS_OK;
}

int ns_rule_award(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_ledger_job_t *job = &io->job;
    int rc = s_job(io);
    if (rc != NS_OK)
        return rc;
    if (memcmp(job->requester, e->author, NS_ID_BYTES) ||
        job->state != NS_JOB_OPEN)
        return NS_ERR_JOBSTATE;
    if (memcmp(b->bid.job_id, b->job_id, NS_HASH_BYTES) ||
        memcmp(b->bid.provider, e->author, NS_ID_BYTES) == 0 ||
        b->bid.price > job->max_price)
        return NS_ERR_INVAL;
    if (ns_bid_verify(&b->bid, io->network_id) != NS_OK)
        return NS_ERR_SIG;
    job->state = NS_JOB_AWARDED;
    job->round++;
    memcpy(job->award_id, e->id, NS_HASH_BYTES);
    memcpy(job->provider, b->bid.provider, NS_ID_BYTES);
    job->price = b->bid.price;
    memset(job->accept_id, 0, NS_HASH_BYTES);
    memset(job->result_id, 0, NS_HASH_BYTES);
    memset(job->root, 0, NS_HASH_BYTES);
    job->n_items = 0;
    io->put_job = true;
    return NS_OK;
}

int ns_rule_accept(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    ns_ledger_job_t *job = &io->job;
    int rc = s_ref(io);
    if (rc != NS_OK)
        return rc;
    if (io->ref.e.type != NS_ENTRY_AWARD ||
        memcmp(io->ref.b.job_id, b->job_id, NS_HASH_BYTES) ||
        memcmp(io->ref.b.bid.provider, e->author, NS_ID_BYTES))
        return NS_ERR_INVAL;
    if ((rc = s_job(io)) != NS_OK)
        return rc;
    if (io->pjob_rc == NS_OK || io->lock_rc == NS_OK)
        return NS_ERR_JOBSTATE; /* accepted already, or released */
    if (a->staked < job->collateral)
        return NS_ERR_FUNDS;
    a->staked -= job->collateral;
    a->locked_collateral += job->collateral;
    io->lock.amount = job->collateral;
    io->lock.state = NS_LOCK_LOCKED;
    memset(&io->pjob, 0, sizeof io->pjob);
    memcpy(io->pjob.job_id, b->job_id, NS_HASH_BYTES);
    memcpy(io->pjob.accept_id, e->id, NS_HASH_BYTES);
    io->put_lock = io->put_pjob = true;
    if (memcmp(job->award_id, b->ref_id, NS_HASH_BYTES) == 0) {
        memcpy(job->accept_id, e->id, NS_HASH_BYTES); /* for queries */
        io->put_job = true;
    }
    return NS_OK;
}

int ns_rule_result(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_ledger_job_t *job = &io->job;
    int rc = s_ref(io);
    if (rc != NS_OK)
        return rc;
    if (io->ref.e.type != NS_ENTRY_ACCEPT ||
        memcmp(io->ref.e.author, e->author, NS_ID_BYTES) ||
        memcmp(io->ref.b.job_id, b->job_id, NS_HASH_BYTES) || b->n_items == 0)
        return NS_ERR_INVAL;
    if (io->pjob_rc != NS_OK)
        return io->pjob_rc == NS_ERR_NOTFOUND ? NS_ERR_JOBSTATE : io->pjob_rc;
    if (!s_is_zero(io->pjob.result_id))
        return NS_ERR_JOBSTATE; /* one RESULT per accept */
    memcpy(io->pjob.result_id, e->id, NS_HASH_BYTES);
    io->put_pjob = true;
    if ((rc = s_job(io)) != NS_OK)
        return rc;
    if (memcmp(job->award_id, io->ref.b.ref_id, NS_HASH_BYTES) == 0) {
        memcpy(job->result_id, e->id, NS_HASH_BYTES);
        memcpy(job->root, b->root, NS_HASH_BYTES);
        job->n_items = b->n_items;
        io->put_job = true;
    }
    return NS_OK;
}

/* What SETTLE and SLASH check first: ref is a RESULT of this job whose
 * award is the job's live one, and the job is the author's. */
static int s_settle_check(ns_rule_io_t *io)
{
    const ns_entry_body_t *b = io->b;
    ns_ledger_job_t *job = &io->job;
    int rc = s_ref(io);
    if (rc != NS_OK)
        return rc;
    if (io->ref.e.type != NS_ENTRY_RESULT ||
        memcmp(io->ref.b.job_id, b->job_id, 32))
        return NS_ERR_INVAL;
    if (io->accept.rc != NS_OK) /* a stored RESULT names a stored ACCEPT */
        return io->accept.rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT
                                                : io->accept.rc;
    if ((rc = s_job(io)) != NS_OK)
        return rc;
    if (memcmp(job->requester, io->e->author, NS_ID_BYTES) ||
        job->state != NS_JOB_AWARDED ||
        memcmp(job->award_id, io->accept.b.ref_id, NS_HASH_BYTES) || s_late(io))
        return NS_ERR_JOBSTATE;
    if (io->prov_rc != NS_OK)
        return io->prov_rc;
    io->put_prov = io->put_job = true;
    return NS_OK;
}

int ns_rule_settle(ns_rule_io_t *io)
{
    ns_account_t *a = io->author;
    ns_ledger_job_t *job = &io->job;
    int rc = s_settle_check(io);
    if (rc != NS_OK)
        return rc;
    if (a->locked_escrow < job->escrow)
        return NS_ERR_CORRUPT;
    a->locked_escrow -= job->escrow;
    a->free += job->escrow - job->price;
    a->jobs_settled_as_requester++;
    io->prov.jobs_settled++;
    job->state = NS_JOB_SETTLED;
    s_credit(io, job->provider, job->price, io->accept.b.ref_id);
    return NS_OK;
}

int ns_rule_slash(ns_rule_io_t *io)
{
    const ns_entry_body_t *b = io->b;
    ns_ledger_job_t *job = &io->job;
    int rc = s_settle_check(io);
    if (rc != NS_OK)
        return rc;
    if (!io->verifier)
        return NS_ERR_STATE; /* no way to check the proof */
    rc = io->verifier(io->verifier_user, job, job->provider, io->ref.b.root,
                      io->ref.b.n_items, b->proof, b->proof_len, io->missing);
    if (rc == NS_ERR_MISSING)
        return NS_ERR_MISSING; /* waits for the data, then tried again */
    if (rc != NS_OK)
        return NS_ERR_PROOF;
    if (io->lock_rc != NS_OK)
        return io->lock_rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT : io->lock_rc;
    if (io->lock.state == NS_LOCK_LOCKED) {
        io->prov.locked_collateral -= io->lock.amount;
        io->totals->burned += io->lock.amount;
        io->lock.state = NS_LOCK_BURNED;
        io->put_lock = true;
    }
    io->prov.jobs_slashed++;
    job->slashed++;
    job->state = NS_JOB_OPEN; /* the job moves on */
    s_job_end_award(job);
    return NS_OK;
}

int ns_rule_cancel(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    ns_ledger_job_t *job = &io->job;
    int rc = s_job(io);
    if (rc != NS_OK)
        return rc;
    if (memcmp(job->requester, e->author, NS_ID_BYTES) ||
        (job->state != NS_JOB_OPEN && job->state != NS_JOB_AWARDED))
        return NS_ERR_JOBSTATE;
    if (b->reopen && b->new_deadline_ms <= e->timestamp_ms)
        return NS_ERR_INVAL;
    if (job->state == NS_JOB_AWARDED && s_late(io))
        return NS_ERR_JOBSTATE; /* the provider's to close now */
    if (!s_is_zero(b->ref_id)) {
        /* The award's provider accepted and went silent: after the
         * deadline, a tenth of its collateral is burned. */
        if ((rc = s_ref(io)) != NS_OK)
            return rc;
        if (io->ref.e.type != NS_ENTRY_ACCEPT ||
            memcmp(io->ref.b.job_id, b->job_id, NS_HASH_BYTES) ||
            job->state != NS_JOB_AWARDED ||
            memcmp(io->ref.b.ref_id, job->award_id, NS_HASH_BYTES))
            return NS_ERR_JOBSTATE;
        if (e->timestamp_ms < job->deadline_ms)
            return NS_ERR_JOBSTATE; /* deadline not reached */
        if (io->lock_rc != NS_OK)
            return io->lock_rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT
                                                  : io->lock_rc;
        if (io->prov_rc != NS_OK)
            return io->prov_rc;
        if (io->lock.state == NS_LOCK_LOCKED) {
            uint64_t penalty = io->lock.amount / 10;
            io->prov.locked_collateral -= penalty;
            io->lock.amount -= penalty;
            io->totals->burned += penalty;
            io->put_lock = true;
        }
        io->prov.jobs_cancelled++;
        io->put_prov = true;
    }
    if (job->state == NS_JOB_AWARDED) /* releases what the provider locked */
        s_credit(io, job->provider, 0, job->award_id);
    s_job_end_award(job);
    if (b->reopen) {
        job->state = NS_JOB_OPEN;
        job->deadline_ms = b->new_deadline_ms;
    } else {
        if (a->locked_escrow < job->escrow)
            return NS_ERR_CORRUPT;
        a->locked_escrow -= job->escrow;
        a->free += job->escrow;
        job->state = NS_JOB_CANCELLED;
    }
    io->put_job = true;
    return NS_OK;
}

int ns_rule_close(ns_rule_io_t *io)
{
    const ns_entry_t *e = io->e;
    const ns_entry_body_t *b = io->b;
    ns_account_t *a = io->author;
    ns_ledger_job_t *job = &io->job;
    int rc = s_ref(io);
    if (rc != NS_OK)
        return rc;
    /* ref is the author's own RESULT or ACCEPT of the award, or the AWARD
     * that names the author */
    const uint8_t *award = NULL;
    const uint8_t type = io->ref.e.type;
    if (memcmp(io->ref.b.job_id, b->job_id, NS_HASH_BYTES))
        return NS_ERR_INVAL;
    if (type == NS_ENTRY_RESULT) {
        if (io->accept.rc != NS_OK) /* a stored RESULT names a stored ACCEPT */
            return io->accept.rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT
                                                    : io->accept.rc;
        award = io->accept.b.ref_id;
    } else if (type == NS_ENTRY_ACCEPT) {
        award = io->ref.b.ref_id;
    } else if (type == NS_ENTRY_AWARD) {
        award = io->ref.e.id;
    } else {
        return NS_ERR_INVAL;
    }
    const uint8_t *provider =
        type == NS_ENTRY_AWARD ? io->ref.b.bid.provider : io->ref.e.author;
    if (memcmp(provider, e->author, NS_ID_BYTES))
        return NS_ERR_INVAL;
    if ((rc = s_job(io)) != NS_OK)
        return rc;
    if (job->state != NS_JOB_AWARDED ||
        memcmp(job->award_id, award, NS_HASH_BYTES) || !s_late(io))
        return NS_ERR_JOBSTATE; /* ended already, or not the provider's yet */
    /* The row is the author's own record of the award, which only its
     * own chain writes: the RESULT once there is one, else the ACCEPT,
     * else the AWARD (never accepted). */
    if (type == NS_ENTRY_AWARD) {
        if (io->pjob_rc != NS_ERR_NOTFOUND || io->lock_rc != NS_ERR_NOTFOUND)
            return io->pjob_rc == NS_OK || io->lock_rc == NS_OK
                       ? NS_ERR_JOBSTATE
                       : (io->pjob_rc != NS_ERR_NOTFOUND ? io->pjob_rc
                                                         : io->lock_rc);
    } else {
        if (io->pjob_rc != NS_OK)
            return io->pjob_rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT
                                                  : io->pjob_rc;
        const uint8_t *want =
            type == NS_ENTRY_RESULT ? io->pjob.result_id : io->pjob.accept_id;
        if (memcmp(want, io->ref.e.id, NS_HASH_BYTES) ||
            (type == NS_ENTRY_ACCEPT && !s_is_zero(io->pjob.result_id)))
            return NS_ERR_JOBSTATE; /* a RESULT is there: name it */
        if (io->lock_rc != NS_OK)
            return io->lock_rc == NS_ERR_NOTFOUND ? NS_ERR_CORRUPT
                                                  : io->lock_rc;
    }
    if (io->req_rc != NS_OK)
        return io->req_rc;
    if (io->req.locked_escrow < job->escrow || job->price > job->escrow)
        return NS_ERR_CORRUPT;
    uint64_t refund = job->escrow;
    if (type == NS_ENTRY_RESULT) {
        /* a RESULT nobody challenged in time: paid, collateral back */
        if (io->lock.state == NS_LOCK_LOCKED) {
            if (a->locked_collateral < io->lock.amount)
                return NS_ERR_CORRUPT;
            a->locked_collateral -= io->lock.amount;
            a->staked += io->lock.amount;
            io->lock.state = NS_LOCK_RELEASED;
        }
        if (a->free > UINT64_MAX - job->price)
            return NS_ERR_CORRUPT;
        a->free += job->price;
        refund -= job->price;
        a->jobs_settled++;
        job->state = NS_JOB_SETTLED;
    } else if (type == NS_ENTRY_ACCEPT) {
        /* accepted, no RESULT: the deadline rule of CANCEL, a tenth of
         * the collateral burned */
        if (io->lock.state == NS_LOCK_LOCKED) {
            const uint64_t penalty = io->lock.amount / 10;
            if (a->locked_collateral < io->lock.amount)
                return NS_ERR_CORRUPT;
            a->locked_collateral -= io->lock.amount;
            a->staked += io->lock.amount - penalty;
            io->totals->burned += penalty;
            io->lock.amount -= penalty;
            io->lock.state = NS_LOCK_RELEASED;
        }
        a->jobs_cancelled++;
        job->state = NS_JOB_CANCELLED;
        s_job_end_award(job);
    } else {
        /* never accepted: nothing was locked, and nothing may be now */
        io->lock.amount = 0;
        io->lock.state = NS_LOCK_RELEASED;
        job->state = NS_JOB_CANCELLED;
        s_job_end_award(job);
    }
    io->req.locked_escrow -= job->escrow;
    s_credit(io, job->requester, refund, NULL);
    io->put_lock = io->put_req = io->put_job = true;
    return NS_OK;
}

int ns_rule_body(ns_rule_io_t *io)
{
    switch (io->e->type) {
    case NS_ENTRY_TRANSFER:
        return ns_rule_transfer(io);
    case NS_ENTRY_STAKE:
        return ns_rule_stake(io);
    case NS_ENTRY_UNSTAKE:
        return ns_rule_unstake(io);
    case NS_ENTRY_JOB:
        return ns_rule_job(io);
    case NS_ENTRY_AWARD:
        return ns_rule_award(io);
    case NS_ENTRY_ACCEPT:
        return ns_rule_accept(io);
    case NS_ENTRY_RESULT:
        return ns_rule_result(io);
    case NS_ENTRY_SETTLE:
        return ns_rule_settle(io);
    case NS_ENTRY_SLASH:
        return ns_rule_slash(io);
    case NS_ENTRY_CANCEL:
        return ns_rule_cancel(io);
    case NS_ENTRY_CLOSE:
        return ns_rule_close(io);
    default:
        return NS_ERR_MSGTYPE;
    }
}
