/* money.c - one log event for each change the market makes to the node's
 * own money: what we append, as we append it, and what others' entries do
 * to us, found by a periodic look (money.h). */
#include "nightshift/money.h"

#include "nightshift/log.h"
#include "nightshift/util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_JOBS 256 /* accepted jobs followed until they end */
#define S_SEEN 256     /* pending credits already logged */
#define S_SCAN_REFS 64 /* pending credits looked at per watch */

typedef struct {
    ns_hash_t job_id;
    ns_hash_t award_id; /* the award our ACCEPT took */
} s_job_t;

struct ns_money {
    ns_ledger_t *ledger;
    ns_hash_t network_id;
    uint8_t self[NS_ID_BYTES];
    s_job_t jobs[S_MAX_JOBS];
    uint32_t n_jobs;
    uint8_t seen[S_SEEN][NS_HASH_BYTES]; /* ring of logged credit refs */
    uint32_t seen_next;
};

static const char *s_c(char out[NS_CREDITS_TEXT], uint64_t micro)
{
    return ns_credits_fmt(out, micro);
}

static void s_job_text(char out[17], const ns_hash_t id)
{
    ns_hex(out, id, 8);
}

static void s_track(ns_money_t *m, const ns_hash_t job_id,
                    const ns_hash_t award_id)
{
    if (m->n_jobs == S_MAX_JOBS) { /* forget the oldest */
        memmove(&m->jobs[0], &m->jobs[1], sizeof m->jobs[0] * (S_MAX_JOBS - 1));
        m->n_jobs--;
    }
    memcpy(m->jobs[m->n_jobs].job_id, job_id, NS_HASH_BYTES);
    memcpy(m->jobs[m->n_jobs].award_id, award_id, NS_HASH_BYTES);
    m->n_jobs++;
}

/* Stop following job (our own CLOSE ended it: logged there). */
static void s_untrack(ns_money_t *m, const ns_hash_t job_id)
{
    for (uint32_t i = 0; i < m->n_jobs; i++)
        if (memcmp(m->jobs[i].job_id, job_id, NS_HASH_BYTES) == 0) {
            m->jobs[i] = m->jobs[--m->n_jobs];
            return;
        }
}

/* Whether we, as the provider of award_id, still wait on job. */
static bool s_live(ns_money_t *m, const ns_hash_t job_id,
                   const ns_hash_t award_id)
{
    ns_ledger_job_t lj;
    return ns_ledger_job(m->ledger, job_id, &lj) == NS_OK &&
           lj.state == NS_JOB_AWARDED &&
           memcmp(lj.award_id, award_id, NS_HASH_BYTES) == 0 &&
           memcmp(lj.provider, m->self, NS_ID_BYTES) == 0;
}

/* At start: the ACCEPTs among our latest S_SCAN_ENTRIES entries whose
 * award is still live (a job accepted longer ago has long ended). */
#define S_SCAN_ENTRIES 1024
static void s_scan_chain(ns_money_t *m)
{
    ns_account_t a;
    if (ns_ledger_account(m->ledger, m->self, &a) != NS_OK)
        return;
    uint64_t low = a.seq > S_SCAN_ENTRIES ? a.seq - S_SCAN_ENTRIES + 1 : 1;
    for (uint64_t seq = low; seq <= a.seq; seq++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        ns_entry_t e;
        ns_entry_body_t b;
        if (ns_ledger_get(m->ledger, m->self, seq, &buf, &len) != NS_OK)
            continue;
        if (ns_entry_parse(buf, len, m->network_id, &e) == NS_OK &&
            e.type == NS_ENTRY_ACCEPT &&
            ns_entry_body_decode(&e, &b) == NS_OK &&
            s_live(m, b.job_id, b.ref_id))
            s_track(m, b.job_id, b.ref_id);
        free(buf);
    }
}

ns_money_t *ns_money_new(ns_ledger_t *ledger, const ns_hash_t network_id,
                         const uint8_t self[NS_ID_BYTES])
{
    ns_money_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->ledger = ledger;
    memcpy(m->network_id, network_id, NS_HASH_BYTES);
    memcpy(m->self, self, NS_ID_BYTES);
    s_scan_chain(m);
    return m;
}

void ns_money_destroy(ns_money_t **m)
{
    if (!m || !*m)
        return;
    free(*m);
    *m = NULL;
}

/* The refs of our entry id (our head, just appended): credits claimed. */
static void s_log_claims(ns_money_t *m, const ns_account_t *a)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    ns_entry_t e;
    if (ns_ledger_get(m->ledger, m->self, a->seq, &buf, &len) != NS_OK)
        return;
    if (ns_entry_parse(buf, len, m->network_id, &e) == NS_OK && e.n_refs) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < e.n_refs; i++) {
            uint64_t amount = 0;
            bool claimed = false;
            if (ns_ledger_credit(m->ledger, e.refs + (size_t)i * NS_HASH_BYTES,
                                 m->self, &amount, &claimed) == NS_OK)
                sum += amount;
        }
        char c1[NS_CREDITS_TEXT], c2[NS_CREDITS_TEXT], c3[NS_CREDITS_TEXT];
        ns_info(NS_MOD_MARKET,
                "event=credits_claimed count=%u amount=%s free=%s staked=%s",
                e.n_refs, s_c(c1, sum), s_c(c2, a->free), s_c(c3, a->staked));
    }
    free(buf);
}

void ns_money_own(ns_money_t *m, uint8_t type, const ns_entry_body_t *b,
                  const ns_hash_t id)
{
    (void)id;
    if (!m)
        return;
    ns_account_t a;
    ns_ledger_job_t lj;
    char c1[NS_CREDITS_TEXT], c2[NS_CREDITS_TEXT], c3[NS_CREDITS_TEXT];
    char who[NS_ID_SHORT_LEN + 1], jid[17];
    if (ns_ledger_account(m->ledger, m->self, &a) != NS_OK)
        memset(&a, 0, sizeof a);
    bool have_job = false;
    switch (type) {
    case NS_ENTRY_JOB:
    case NS_ENTRY_ACCEPT:
    case NS_ENTRY_SETTLE:
    case NS_ENTRY_SLASH:
    case NS_ENTRY_CANCEL:
    case NS_ENTRY_CLOSE:
        have_job = ns_ledger_job(m->ledger, b->job_id, &lj) == NS_OK;
        s_job_text(jid, b->job_id);
        break;
    default:
        break;
    }
    switch (type) {
    case NS_ENTRY_TRANSFER:
        ns_id_short(who, b->to);
        ns_info(NS_MOD_MARKET, "event=transfer_out to=%s amount=%s free=%s",
                who, s_c(c1, b->amount), s_c(c2, a.free));
        break;
    case NS_ENTRY_STAKE:
        if (b->amount)
            ns_info(NS_MOD_MARKET, "event=stake amount=%s staked=%s",
                    s_c(c1, b->amount), s_c(c2, a.staked));
        break;
    case NS_ENTRY_UNSTAKE:
        ns_info(NS_MOD_MARKET, "event=unstake amount=%s staked=%s",
                s_c(c1, b->amount), s_c(c2, a.staked));
        break;
    case NS_ENTRY_JOB:
        ns_info(NS_MOD_MARKET,
                "event=escrow_locked job=%s escrow=%s collateral=%s free=%s",
                jid, s_c(c1, b->escrow), s_c(c2, b->collateral),
                s_c(c3, a.free));
        break;
    case NS_ENTRY_ACCEPT:
        if (have_job) {
            ns_id_short(who, lj.requester);
            ns_info(NS_MOD_MARKET,
                    "event=collateral_locked job=%s requester=%s "
                    "collateral=%s price=%s",
                    jid, who, s_c(c1, lj.collateral), s_c(c2, lj.price));
            s_track(m, b->job_id, b->ref_id);
        }
        break;
    case NS_ENTRY_SETTLE:
        if (have_job) {
            ns_id_short(who, lj.provider);
            ns_info(NS_MOD_MARKET,
                    "event=job_paid job=%s provider=%s price=%s refund=%s "
                    "free=%s",
                    jid, who, s_c(c1, lj.price),
                    s_c(c2, lj.escrow >= lj.price ? lj.escrow - lj.price : 0),
                    s_c(c3, a.free));
        }
        break;
    case NS_ENTRY_SLASH:
        if (have_job) /* the award ended: lj.provider is cleared */
            ns_info(NS_MOD_MARKET,
                    "event=provider_slashed job=%s collateral_burned=%s "
                    "escrow=%s reason=\"our fraud proof was accepted; the "
                    "job is open again\"",
                    jid, s_c(c1, lj.collateral), s_c(c2, lj.escrow));
        break;
    case NS_ENTRY_CANCEL:
        if (have_job && lj.state == NS_JOB_CANCELLED)
            ns_info(NS_MOD_MARKET,
                    "event=escrow_refunded job=%s amount=%s free=%s", jid,
                    s_c(c1, lj.escrow), s_c(c2, a.free));
        else if (have_job)
            ns_info(NS_MOD_MARKET,
                    "event=job_reopened job=%s escrow=%s reason=\"the award "
                    "ended; the escrow stays locked\"",
                    jid, s_c(c1, lj.escrow));
        break;
    case NS_ENTRY_CLOSE:
        /* ours: the requester left the job past deadline + window */
        if (have_job) {
            ns_id_short(who, lj.requester);
            if (lj.state == NS_JOB_SETTLED)
                ns_info(NS_MOD_MARKET,
                        "event=job_closed job=%s requester=%s price=%s "
                        "staked=%s free=%s reason=\"no settlement by "
                        "deadline + close window: paid from the escrow, our "
                        "collateral back\"",
                        jid, who, s_c(c1, lj.price), s_c(c2, a.staked),
                        s_c(c3, a.free));
            else
                ns_info(NS_MOD_MARKET,
                        "event=job_closed job=%s requester=%s staked=%s "
                        "reason=\"no result of ours by the deadline: the "
                        "escrow goes back to the requester, our collateral "
                        "(less a tenth, if we had accepted) to our stake\"",
                        jid, who, s_c(c1, a.staked));
            s_untrack(m, b->job_id);
        }
        break;
    default: /* AWARD, RESULT: no money moves */
        break;
    }
    s_log_claims(m, &a); /* any entry takes in the credits waiting */
}

static bool s_seen(ns_money_t *m, const uint8_t *ref)
{
    for (uint32_t i = 0; i < S_SEEN; i++)
        if (memcmp(m->seen[i], ref, NS_HASH_BYTES) == 0)
            return true;
    return false;
}

void ns_money_watch(ns_money_t *m)
{
    if (!m)
        return;
    char c1[NS_CREDITS_TEXT], who[NS_ID_SHORT_LEN + 1], jid[17];
    /* accepted jobs that ended since the last look */
    for (uint32_t i = 0; i < m->n_jobs;) {
        s_job_t *j = &m->jobs[i];
        ns_ledger_job_t lj;
        if (ns_ledger_job(m->ledger, j->job_id, &lj) != NS_OK) {
            i++;
            continue;
        }
        if (lj.state == NS_JOB_AWARDED &&
            memcmp(lj.award_id, j->award_id, NS_HASH_BYTES) == 0) {
            i++; /* still ours */
            continue;
        }
        s_job_text(jid, j->job_id);
        if (lj.state == NS_JOB_SETTLED &&
            memcmp(lj.award_id, j->award_id, NS_HASH_BYTES) == 0) {
            ns_id_short(who, lj.requester);
            ns_info(NS_MOD_MARKET,
                    "event=paid job=%s requester=%s price=%s "
                    "reason=\"the requester settled: the price and our "
                    "collateral come in with the next claim\"",
                    jid, who, s_c(c1, lj.price));
        } else {
            static const char *const st[] = {"?", "open", "awarded", "settled",
                                             "cancelled"};
            ns_info(NS_MOD_MARKET,
                    "event=award_ended job=%s state=%s reason=\"the job "
                    "moved on without paying us (cancelled, slashed or "
                    "re-awarded)\"",
                    jid, lj.state <= NS_JOB_CANCELLED ? st[lj.state] : "?");
        }
        m->jobs[i] = m->jobs[--m->n_jobs];
    }
    /* credits for us that no claim took in yet */
    uint8_t refs[S_SCAN_REFS * NS_HASH_BYTES];
    uint32_t n = ns_ledger_unclaimed(m->ledger, m->self, refs, S_SCAN_REFS);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *ref = refs + (size_t)i * NS_HASH_BYTES;
        uint64_t amount = 0;
        bool claimed = false;
        if (s_seen(m, ref) ||
            ns_ledger_credit(m->ledger, ref, m->self, &amount, &claimed) !=
                NS_OK ||
            claimed)
            continue;
        memcpy(m->seen[m->seen_next], ref, NS_HASH_BYTES);
        m->seen_next = (m->seen_next + 1) % S_SEEN;
        if (!amount) /* a collateral release: logged with the job */
            continue;
        char rtext[17];
        ns_hex(rtext, ref, 8);
        ns_info(NS_MOD_MARKET,
                "event=credit_received ref=%s amount=%s reason=\"a transfer "
                "or a payment to us, taken in by the next claim\"",
                rtext, s_c(c1, amount));
    }
}
