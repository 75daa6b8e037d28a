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
 *
 * Cost: committing hashes every item once: two single-block BLAKE2b
 * compressions per item of up to 69 bytes (its leaf and its share of the
 * inner nodes), computed eight at a time in vector lanes and spread over
 * up to 16 threads for large outputs (about 90 ns of CPU per small item on
 * an AVX-512 core with GCC -O2). ns_commit_root and ns_commit_path need
 * O(log n) hashes plus a 32 KiB batch per thread: a 64M-item output costs
 * no copy and no per-item allocation. Only ns_commit_outputs keeps the
 * whole tree (64 bytes per item) for a caller that opens many items.
 *
 * Outputs: `outputs` is indexed by argument position like ns_runner_run's;
 * outputs[i] for each OUT argument i points to args[i].size bytes (others
 * are ignored). Item i's bytes are its slices of every OUT buffer in
 * argument order (job.h), read in place.
 */
#ifndef NIGHTSHIFT_VERIFY_H
#define NIGHTSHIFT_VERIFY_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/mp.h"
#include "nightshift/runner.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_ITEM_TAG "nightshift/item/v1"     /* leaf domain, 18 bytes */
#define NS_RESULT_TAG "nightshift/result/v1" /* statement domain, 20 bytes */
#define NS_RESULT_MSG_BYTES (20 + 2 * NS_HASH_BYTES + 8) /* statement */
#define NS_FRAUD_VERSION 1 /* first field of a packed proof */
/* A packed fraud proof: the descriptor, one item's bytes, a path. */
#define NS_MAX_FRAUD_MSG                                                       \
    (NS_MAX_JOB_MSG + NS_MAX_ITEM_BYTES +                                      \
     (NS_MERKLE_MAX_DEPTH + 8) * (NS_HASH_BYTES + 2) + 256)

/* Copy item `item`'s output bytes (ns_job_item_bytes) out of the full
 * output buffers. */
void ns_item_extract(const ns_job_t *job, uint8_t *const *outputs,
                     uint64_t item, uint8_t *out);

/* The commitment leaf of one item (the formula at the top). */
void ns_item_leaf(ns_hash_t leaf, const ns_hash_t job_id, uint64_t item,
                  const uint8_t *bytes, size_t len);

/* Merkle root over all items of full outputs, without keeping the tree.
 * NS_ERR_INVAL for a job without items or outputs, NS_ERR_NOMEM. */
int ns_commit_root(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, ns_hash_t root) NS_MUST_CHECK;

/* The whole Merkle tree over all items (caller releases it with
 * ns_merkle_release): the same layout and root as ns_merkle_build over the
 * leaves, built in place (no copy of the leaves). 64 bytes per item. */
int ns_commit_outputs(const ns_job_t *job, const ns_hash_t job_id,
                      uint8_t *const *outputs, ns_merkle_t *tree) NS_MUST_CHECK;

/* Merkle path of one item recomputed from the outputs without a tree:
 * O(n) hashing, O(log n) memory. path holds NS_MERKLE_MAX_DEPTH hashes;
 * *depth gets the count written. NS_ERR_INVAL for an item out of range. */
int ns_commit_path(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, uint64_t item, ns_hash_t *path,
                   size_t *depth) NS_MUST_CHECK;

/* The provider's signed result statement:
 * sig over "nightshift/result/v1" || job_id || root || n_items (u64 BE).
 * ns_result_verify: NS_OK or NS_ERR_SIG. */
void ns_result_sign(const ns_identity_t *provider, const ns_hash_t job_id,
                    const ns_hash_t root, uint64_t n_items,
                    uint8_t sig[NS_SIG_BYTES]);
int ns_result_verify(const uint8_t provider[NS_ID_BYTES],
                     const ns_hash_t job_id, const ns_hash_t root,
                     uint64_t n_items,
                     const uint8_t sig[NS_SIG_BYTES]) NS_MUST_CHECK;

/* min(k, n_items) distinct indices below n_items, sorted ascending, into
 * items; all of them (0..n_items-1) if k >= n_items. The draw is
 * deterministic and uniform over all k-subsets:
 *   seed = H(root || secret)
 *   word stream: BLAKE2b-512 keyed with seed over the block counter c
 *     (u64 BE, c = 0, 1, ...), each 64-byte block read as eight u64
 *     little-endian words
 *   uniform(m): take words, reject those below 2^64 mod m, return w mod m
 *   Floyd's sampling: for j = n-k .. n-1: t = uniform(j + 1); take t,
 *     or j if t was already taken.
 * Cost O(k^2) in the worst case (sorted insertion); callers keep k at or
 * below NS_MAX_CHECKS unless k >= n_items. */
void ns_challenge_draw(const ns_hash_t root, const uint8_t secret[32],
                       uint64_t n_items, uint32_t k, uint64_t *items);

/* Compare one item's bytes under the job's determinism class.
 * EXACT: the bytes. ULP/ABS/REL: the bytes as little-endian float32
 * values (a trailing len % 4 compared as bytes), each pair compared as
 * follows: two NaNs match whatever their payloads and signs; a NaN and a
 * number do not; an infinity matches only the same infinity; -0.0 and
 * +0.0 match; otherwise ULP: the distance in representable floats (counted
 * across zero: the smallest positive and negative subnormals are 2 apart)
 * is <= tol; ABS: |a - b| <= tol; REL: |a - b| <= tol * max(|a|, |b|),
 * computed in double. */
bool ns_item_matches(const ns_job_t *job, const uint8_t *expected,
                     const uint8_t *claimed, size_t len);

/* Outcome of a spot check. */
typedef struct {
    uint32_t checked;    /* items re-run */
    uint32_t mismatched; /* items whose bytes did not match */
    uint64_t first_bad;  /* first (lowest) mismatching item, if mismatched */
    uint64_t verify_us;  /* requester's time for the whole check */
    uint64_t commit_us;  /* of which: recomputing the root */
    uint64_t rerun_us;   /* of which: re-running the items */
} ns_check_result_t;

/* The requester's check given the provider's full outputs: recompute the
 * root (must equal `root`, else NS_ERR_PROOF: the outputs are not the ones
 * committed), draw min(k, n_items) items, re-run them on r with one
 * ns_runner_run_items call, compare. NS_OK means the check ran: the
 * verdict is res->mismatched (0 = passed). NS_ERR_TOOBIG for k above
 * NS_MAX_CHECKS; runner errors are returned as they are (the check could
 * not be made). res is filled on every path. Inputs the requester hashed
 * itself may be marked verified (runner.h): the re-run then skips
 * hashing them. */
int ns_spot_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                  const ns_input_t *inputs, uint8_t *const *outputs,
                  const ns_hash_t root, const uint8_t secret[32], uint32_t k,
                  ns_check_result_t *res, char *err,
                  size_t errlen) NS_MUST_CHECK;

typedef struct {
    ns_job_t job;     /* the descriptor (owns its source) */
    ns_hash_t job_id; /* ns_job_id(job): derived, never read from the wire */
    uint8_t provider[NS_ID_BYTES];
    ns_hash_t root;
    uint64_t n_items;
    uint8_t sig[NS_SIG_BYTES]; /* provider's result statement signature */
    uint64_t item;
    uint8_t *claimed; /* the item's claimed bytes, owned */
    size_t claimed_len;
    ns_hash_t path[NS_MERKLE_MAX_DEPTH];
    size_t depth;
} ns_fraud_proof_t;

/* Build a proof for item `item` from the provider's outputs and tree; tree
 * may be NULL, then the path is recomputed from the outputs
 * (ns_commit_path, one pass) and the root derived from the path. job_id
 * must be ns_job_id(job) (NS_ERR_INVAL if not). On success p owns copies
 * of everything; on failure p is released. */
int ns_fraud_build(ns_fraud_proof_t *p, const ns_job_t *job,
                   const ns_hash_t job_id, const uint8_t provider[NS_ID_BYTES],
                   const uint8_t sig[NS_SIG_BYTES], const ns_merkle_t *tree,
                   uint8_t *const *outputs, uint64_t item) NS_MUST_CHECK;
/* NULL-safe on a zeroed or released proof; leaves p zeroed. */
void ns_fraud_release(ns_fraud_proof_t *p);

/* Wire form: [1, job, provider (bin 32), root (bin 32), n_items, sig
 * (bin 64), item, claimed (bin), path (array of bin 32)]; job is
 * ns_job_pack's form and job_id is recomputed from it on read. */
void ns_fraud_pack(msgpack_packer *pk, const ns_fraud_proof_t *p);
/* Strict: caps on every length, exact sizes, and the shape checked against
 * the descriptor (n_items, item < n_items, claimed_len = item bytes, depth
 * = the path length of that item). On failure p is released. */
int ns_fraud_read(ns_mpr_t *r, ns_fraud_proof_t *p, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* Check a proof: descriptor and job id, signature, Merkle path, and a
 * re-run of the item on r whose bytes do not match the claim. NS_OK = fraud
 * proven; NS_ERR_PROOF = not a valid proof (forged, or the claim was
 * right); other errors are failures to check (runner, inputs). This is the
 * verifier the ledger calls for SLASH. err says which step failed. */
int ns_fraud_check(ns_runner_t *r, const ns_fraud_proof_t *p,
                   const ns_input_t *inputs, char *err,
                   size_t errlen) NS_MUST_CHECK;

#endif
