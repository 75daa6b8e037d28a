/* verify.h - output commitments, challenge-response spot checks and fraud
 * proofs (exec layer).
 *
 * Commitment: leaf i = H(0x00 || "nightshift/item/v1" || job_id || i as
 * u64 big-endian || item i's output bytes); the provider commits the Merkle
 * root (hash.h) over all items and signs a result statement.
 * Challenge: only after the root is known, the requester draws k distinct
 * item indices from H(root || requester secret), which the provider cannot
 * predict, re-runs those items and compares them (bytes for EXACT jobs, the
 * declared tolerance otherwise).
 * Fraud proof: the signed statement, an item index, the claimed bytes and
 * their Merkle path, the job descriptor: anyone with the inputs can check
 * it by re-running that one item.
 */
#ifndef NIGHTSHIFT_VERIFY_H
#define NIGHTSHIFT_VERIFY_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <stdbool.h>
#include <stdint.h>

/* Copy item `item`'s output bytes (ns_job_item_bytes) out of the full
 * output buffers (indexed by argument position). */
void ns_item_extract(const ns_job_t *job, uint8_t *const *outputs,
                     uint64_t item, uint8_t *out);

void ns_item_leaf(ns_hash_t leaf, const ns_hash_t job_id, uint64_t item,
                  const uint8_t *bytes, size_t len);

/* Merkle tree over all items of full outputs (caller releases it). */
int ns_commit_outputs(const ns_job_t *job, const ns_hash_t job_id,
                      uint8_t *const *outputs, ns_merkle_t *tree)
    NS_MUST_CHECK;

/* The provider's signed result statement:
 * sig over "nightshift/result/v1" || job_id || root || n_items (u64 BE). */
void ns_result_sign(const ns_identity_t *provider, const ns_hash_t job_id,
                    const ns_hash_t root, uint64_t n_items,
                    uint8_t sig[NS_SIG_BYTES]);
int ns_result_verify(const uint8_t provider[NS_ID_BYTES],
                     const ns_hash_t job_id, const ns_hash_t root,
                     uint64_t n_items, const uint8_t sig[NS_SIG_BYTES])
    NS_MUST_CHECK;

/* k distinct indices below n_items (k <= n_items; all of them if k >=
 * n_items), sorted, derived from H(root || secret). */
void ns_challenge_draw(const ns_hash_t root, const uint8_t secret[32],
                       uint64_t n_items, uint32_t k, uint64_t *items);

/* Compare one item's bytes under the job's determinism class. */
bool ns_item_matches(const ns_job_t *job, const uint8_t *expected,
                     const uint8_t *claimed, size_t len);

/* Outcome of a spot check. */
typedef struct {
    uint32_t checked;    /* items re-run */
    uint32_t mismatched; /* items whose bytes did not match */
    uint64_t first_bad;  /* first mismatching item (valid if mismatched) */
    uint64_t verify_us;  /* requester's time for the whole check */
} ns_check_result_t;

/* The requester's check given the provider's full outputs: recompute the
 * root (must equal `root`, else NS_ERR_PROOF), draw k items, re-run them on
 * r, compare. */
int ns_spot_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                  const ns_input_t *inputs, uint8_t *const *outputs,
                  const ns_hash_t root, const uint8_t secret[32], uint32_t k,
                  ns_check_result_t *res, char *err, size_t errlen)
    NS_MUST_CHECK;

typedef struct {
    ns_job_t job;             /* the descriptor (owns its source) */
    ns_hash_t job_id;
    uint8_t provider[NS_ID_BYTES];
    ns_hash_t root;
    uint64_t n_items;
    uint8_t sig[NS_SIG_BYTES]; /* provider's result statement signature */
    uint64_t item;
    uint8_t *claimed;          /* the item's claimed bytes, owned */
    size_t claimed_len;
    ns_hash_t path[NS_MERKLE_MAX_DEPTH];
    size_t depth;
} ns_fraud_proof_t;

/* Build a proof for item `item` from the provider's outputs and tree. */
int ns_fraud_build(ns_fraud_proof_t *p, const ns_job_t *job,
                   const ns_hash_t job_id,
                   const uint8_t provider[NS_ID_BYTES],
                   const uint8_t sig[NS_SIG_BYTES], const ns_merkle_t *tree,
                   uint8_t *const *outputs, uint64_t item) NS_MUST_CHECK;
void ns_fraud_release(ns_fraud_proof_t *p);
void ns_fraud_pack(msgpack_packer *pk, const ns_fraud_proof_t *p);
int ns_fraud_read(ns_mpr_t *r, ns_fraud_proof_t *p, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* Check a proof: signature, Merkle path, and a re-run of the item on r
 * whose bytes do not match the claim. NS_OK = fraud proven; NS_ERR_PROOF =
 * not a valid proof (forged, or the claim was right); other errors are
 * failures to check. This is the verifier the ledger calls for SLASH. */
int ns_fraud_check(ns_runner_t *r, const ns_fraud_proof_t *p,
                   const ns_input_t *inputs, char *err, size_t errlen)
    NS_MUST_CHECK;

#endif
