/* cancel.h - ending a job its requester no longer wants (`nightshift
 * cancel`, and `submit` when it gives up): escrow refunded, the provider's
 * collateral released when it is not at fault, penalised only when it is
 * (it accepted and let the deadline pass without a RESULT).
 *
 * The decision reads only the ledger: the job's state, its accept and
 * result, its deadline against the wall clock. */
#ifndef NIGHTSHIFT_CANCEL_H
#define NIGHTSHIFT_CANCEL_H

#include "nightshift/ledger.h"
#include "nightshift/node_io.h"

typedef struct {
    uint64_t refund; /* credits back to the requester */
    bool penalised;  /* the provider missed the deadline: a tenth of its
                        collateral burned */
    bool released;   /* a provider's collateral was released */
    ns_hash_t entry; /* the CANCEL entry */
    bool unposted;   /* stopped before its JOB entry (in its pre-flight):
                        no entry, no credit moved */
} ns_cancel_result_t;

/* Cancel job_id for requester `me` through io->append. Errors, with one
 * line in err: NS_ERR_NOTFOUND (no such job in this ledger), NS_ERR_PERM
 * (another account's job), NS_ERR_JOBSTATE (already settled or cancelled,
 * or awarded and past deadline + close window: its provider's to close),
 * or the ledger's refusal. */
int ns_cancel_job(ns_ledger_t *ledger, const ns_node_io_t *io,
                  const uint8_t me[NS_ID_BYTES], const ns_hash_t job_id,
                  ns_cancel_result_t *res, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* "refunded 10 credits; provider's collateral released" */
void ns_cancel_describe(const ns_cancel_result_t *res, char *out, size_t cap);

#endif
