/* slash.h - the SLASH verifier the ledger calls (ns_slash_verifier_fn),
 * built from exec's fraud-proof checks, and the proof's wire form.
 *
 * A SLASH proof is msgpack [fraud proof (ns_fraud_pack), inputs] where
 * inputs is an array with one bin per IN argument when they fit in
 * NS_MAX_PROOF, else nil. With inputs, every node re-runs the item in its
 * sandboxed worker; without, nodes check the signature, the Merkle path
 * and that the proof matches the RESULT on record, and trust the
 * requester for the re-run (docs/PROTOCOL.md, "Slashing").
 */
#ifndef NIGHTSHIFT_SLASH_H
#define NIGHTSHIFT_SLASH_H

#include "nightshift/ledger.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

typedef struct {
    ns_worker_t **worker; /* lazily started worker (node), or NULL */
    ns_runner_t *runner;  /* in-process runner (requester), or NULL */
    bool *reran;          /* set when the item was re-run */
} ns_slash_ctx_t;

/* Pack a proof and, when they fit, the inputs. */
int ns_slash_proof_pack(const ns_fraud_proof_t *p, const ns_input_t *inputs,
                        ns_buf_t *out) NS_MUST_CHECK;

/* ns_slash_verifier_fn: user is an ns_slash_ctx_t. */
int ns_slash_verify(void *user, const ns_ledger_job_t *job,
                    const uint8_t *provider, const ns_hash_t root,
                    uint64_t n_items, const uint8_t *proof, size_t len);

#endif
