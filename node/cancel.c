/* cancel.c - end a job: refund, release, penalise only a late provider
 * (cancel.h). */
#include "nightshift/cancel.h"

#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

int ns_cancel_job(ns_ledger_t *ledger, const ns_node_io_t *io,
                  const uint8_t me[NS_ID_BYTES], const ns_hash_t job_id,
                  ns_cancel_result_t *res, char *err, size_t errlen)
{
    ns_ledger_job_t lj;
    char hex[17];
    memset(res, 0, sizeof *res);
    ns_hex(hex, job_id, 8);
    if (ns_ledger_job(ledger, job_id, &lj) != NS_OK) {
        snprintf(err, errlen, "no job %s in this ledger", hex);
        return NS_ERR_NOTFOUND;
    }
    if (memcmp(lj.requester, me, NS_ID_BYTES)) {
        snprintf(err, errlen, "job %s was posted by another account", hex);
        return NS_ERR_PERM;
    }
    if (lj.state == NS_JOB_SETTLED || lj.state == NS_JOB_CANCELLED) {
        snprintf(err, errlen, "job %s is already %s", hex,
                 lj.state == NS_JOB_SETTLED ? "settled" : "cancelled");
        return NS_ERR_JOBSTATE;
    }
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    bool awarded = lj.state == NS_JOB_AWARDED;
    /* Past deadline + close window an award is its provider's to close
     * (docs/PROTOCOL.md, "Closing"): our CANCEL would be refused. */
    const uint64_t window = ns_ledger_close_window_ms(ledger);
    if (awarded && lj.deadline_ms <= UINT64_MAX - window &&
        io->now_ms(io->user) >= lj.deadline_ms + window) {
        snprintf(err, errlen,
                 "job %s is past its deadline and the close window (%llu s): "
                 "its provider closes it (the escrow, less the price of a "
                 "result, comes back as a credit)",
                 hex, (unsigned long long)(window / 1000));
        return NS_ERR_JOBSTATE;
    }
    /* At fault: it accepted, the deadline passed, no RESULT. */
    if (awarded && !sodium_is_zero(lj.accept_id, NS_HASH_BYTES) &&
        sodium_is_zero(lj.result_id, NS_HASH_BYTES) &&
        io->now_ms(io->user) > lj.deadline_ms) {
        memcpy(b.ref_id, lj.accept_id, NS_HASH_BYTES);
        res->penalised = true;
    }
    int rc = io->append(io->user, NS_ENTRY_CANCEL, &b, res->entry);
    if (rc != NS_OK) {
        snprintf(err, errlen, "the ledger refused the cancel: %s",
                 ns_strerror(rc));
        memset(res, 0, sizeof *res);
        return rc;
    }
    res->refund = lj.escrow;
    res->released = awarded && !sodium_is_zero(lj.accept_id, NS_HASH_BYTES);
    return NS_OK;
}

void ns_cancel_describe(const ns_cancel_result_t *res, char *out, size_t cap)
{
    char refund[NS_CREDITS_TEXT];
    if (res->unposted) {
        snprintf(out, cap,
                 "stopped before anything was posted: no credit "
                 "moved");
        return;
    }
    snprintf(out, cap, "escrow of %s credits refunded%s",
             ns_credits_fmt(refund, res->refund),
             res->penalised  ? "; the provider missed its deadline: a tenth "
                               "of its collateral burned, the rest released"
             : res->released ? "; the provider's collateral released"
                             : "");
}
