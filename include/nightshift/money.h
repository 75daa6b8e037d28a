/* money.h - one log event for every change the market makes to the node's
 * own money (node/money.c).
 *
 * What the node writes itself is logged as it is appended: transfers out,
 * stake and unstake, credits claimed, escrow locked (JOB), collateral
 * locked (ACCEPT), a job paid for (SETTLE: price and refund), a provider
 * slashed by our proof (SLASH), escrow refunded (CANCEL). What others'
 * entries do to us is found by ns_money_watch: a credit arrived (a
 * transfer in or a payment, pending until claimed) and a job we accepted
 * settled (paid) or ended otherwise. A slash or penalty of our collateral
 * is logged by the provider (event=slashed, event=penalised).
 *
 * Events are at info level, module market, amounts in credits:
 *   event=transfer_out to=ID amount=C free=C
 *   event=stake amount=C staked=C          event=unstake amount=C staked=C
 *   event=credits_claimed count=N amount=C free=C staked=C
 *   event=escrow_locked job=J escrow=C collateral=C
 *   event=collateral_locked job=J collateral=C price=C
 *   event=job_paid job=J provider=ID price=C refund=C
 *   event=provider_slashed job=J provider=ID collateral_burned=C
 *   event=escrow_refunded job=J amount=C     event=job_reopened job=J
 *   event=credit_received ref=R amount=C
 *   event=paid job=J requester=ID price=C
 *   event=award_ended job=J state=open|awarded|cancelled|settled
 */
#ifndef NIGHTSHIFT_MONEY_H
#define NIGHTSHIFT_MONEY_H

#include "nightshift/hash.h"
#include "nightshift/ledger.h"

typedef struct ns_money ns_money_t;

/* Watch the account self of ledger; the jobs it accepted and still
 * serves are found in its own chain. NULL when out of memory. */
ns_money_t *ns_money_new(ns_ledger_t *ledger, const ns_hash_t network_id,
                         const uint8_t self[NS_ID_BYTES]);
void ns_money_destroy(ns_money_t **m);

/* Our entry of type with body b (id) was appended: log what it did. */
void ns_money_own(ns_money_t *m, uint8_t type, const ns_entry_body_t *b,
                  const ns_hash_t id);

/* Log what others' entries did since the last call: credits for us, jobs
 * we accepted now settled or ended. Call periodically, before claiming. */
void ns_money_watch(ns_money_t *m);

#endif
