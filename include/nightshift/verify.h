/* verify.h - output commitments, challenge-response spot checks and fraud
 * proofs (exec layer). docs/PROTOCOL.md has the rules; job.h what a unit
 * is; runner.h how one unit is re-run faithfully.
 *
 * Commitment: every OUT argument, in argument order, is cut into chunks of
 * NS_COMMIT_CHUNK bytes (the last one of an argument shorter); chunk c of
 * argument a is the leaf
 *   H(0x00 || "nightshift/chunk/v2" || job_id || a (u32 BE) || c (u64 BE)
 *     || chunk bytes)
 * and the Merkle root (hash.h) over all leaves is the commitment. The
 * provider signs a result statement over job_id, the root and the number
 * of UNITS (ns_job_units; the number of leaves follows from the job).
 * Challenge: only after the root is known, the requester draws k distinct
 * units from H(root || requester secret), copies the claimed outputs into
 * buffers of its own, re-runs the drawn units on them (one buffer set, k
 * launches) and compares: a byte that changed was written by a drawn unit
 * with a value other than the claim (EXACT: bytes; ULP/ABS/REL: the
 * aligned float32 word holding it, ns_item_matches). A mismatch is
 * attributed by re-running each drawn unit alone on two fills of the
 * outputs (0x00, 0xFF): the bytes equal after both runs are the ones the
 * unit writes, with that value.
 * Fraud proof: the signed statement, a unit, an OUT argument, a byte
 * position that unit writes, the claimed chunk holding it with its Merkle
 * path, and the job descriptor: anyone with the inputs checks it by
 * re-running that unit alone on the two fills.
 *
 * Cost: committing hashes every output byte once (BLAKE2b, 16 KiB leaves,
 * spread over up to 16 threads) plus 32 bytes of tree per 16 KiB; the
 * spot check costs that root, one copy and one compare pass over the
 * outputs and k unit launches (attribution, only after a mismatch, two
 * fills, two launches and one pass per drawn unit).
 *
 * Outputs: `outputs` is indexed by argument position like ns_runner_run's;
 * outputs[i] for each OUT argument i points to args[i].size bytes (others
 * are ignored), read in place.
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

#define NS_CHUNK_TAG "nightshift/chunk/v2"   /* leaf domain, 19 bytes */
#define NS_COMMIT_CHUNK (16 * 1024)          /* output bytes per leaf */
#define NS_RESULT_TAG "nightshift/result/v1" /* statement domain, 20 bytes */
#define NS_RESULT_MSG_BYTES (20 + 2 * NS_HASH_BYTES + 8) /* statement */
#define NS_FRAUD_VERSION 2 /* first field of a packed proof */
#define NS_FRAUD_VERSION_PIPELINE 3 /* ... of a pipeline's (outs) */
/* A packed fraud proof: the descriptor, one chunk, a path, small fields. */
#define NS_MAX_FRAUD_MSG                                                       \
    (NS_MAX_JOB_MSG + NS_COMMIT_CHUNK +                                        \
     (NS_MERKLE_MAX_DEPTH + 8) * (NS_HASH_BYTES + 2) + 256)

/* Number of leaves of the job's commitment (chunks of all OUT arguments);
 * 0 for a job without units or outputs. */
uint64_t ns_commit_leaves(const ns_job_t *job);

/* The leaf holding byte pos of OUT argument arg. NS_ERR_INVAL when arg is
 * not an OUT argument or pos is beyond its size. */
int ns_commit_leaf_index(const ns_job_t *job, uint32_t arg, uint64_t pos,
                         uint64_t *leaf) NS_MUST_CHECK;

/* The leaf of chunk `chunk` of argument `arg` (the formula at the top). */
void ns_chunk_leaf(ns_hash_t leaf, const ns_hash_t job_id, uint32_t arg,
                   uint64_t chunk, const uint8_t *bytes, size_t len);

/* Merkle root over the chunks of full outputs: one hashing pass, threads
 * for outputs of 1 MiB and more, 32 bytes per leaf kept. NS_ERR_INVAL for
 * a job without units or outputs, NS_ERR_NOMEM. */
int ns_commit_root(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, ns_hash_t root) NS_MUST_CHECK;

/* The whole tree over the chunks (caller releases it with
 * ns_merkle_release); the same pass as ns_commit_root. */
int ns_commit_outputs(const ns_job_t *job, const ns_hash_t job_id,
                      uint8_t *const *outputs, ns_merkle_t *tree) NS_MUST_CHECK;

/* Merkle path of leaf `leaf` recomputed from the outputs (one pass). path
 * holds NS_MERKLE_MAX_DEPTH hashes; *depth gets the count written.
 * NS_ERR_INVAL for a leaf out of range. */
int ns_commit_path(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, uint64_t leaf, ns_hash_t *path,
                   size_t *depth) NS_MUST_CHECK;

/* The provider's signed result statement:
 * sig over "nightshift/result/v1" || job_id || root || n_units (u64 BE),
 * n_units = ns_job_units(job) (the RESULT entry's n_items field).
 * ns_result_verify: NS_OK or NS_ERR_SIG. */
void ns_result_sign(const ns_identity_t *provider, const ns_hash_t job_id,
                    const ns_hash_t root, uint64_t n_units,
                    uint8_t sig[NS_SIG_BYTES]);
int ns_result_verify(const uint8_t provider[NS_ID_BYTES],
                     const ns_hash_t job_id, const ns_hash_t root,
                     uint64_t n_units,
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

/* Compare bytes under the job's determinism class.
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
    uint32_t checked;    /* units re-run */
    uint32_t mismatched; /* drawn units that write a value other than the
                            claim (attributed by their runs alone) */
    uint64_t first_bad;  /* first (lowest) such unit, if mismatched */
    uint32_t bad_arg;    /* an OUT argument and byte position where */
    uint64_t bad_pos;    /*   first_bad's write differs from the claim */
    uint64_t changed;    /* places (bytes, or float32 words under a
                            tolerance) the batched re-run changed beyond
                            the tolerance; > 0 with mismatched 0 only for
                            kernels that read their outputs or whose units
                            overlap (err says so) */
    uint64_t verify_us;  /* requester's time for the whole check */
    uint64_t commit_us;  /* of which: recomputing the root */
    uint64_t rerun_us;   /* of which: re-running (and attributing) units:
                            the copy, the launches, the compare */
    uint64_t launch_us;  /* device time of the batch's unit launches
                            (event profiling), part of rerun_us */
} ns_check_result_t;

/* The requester's check given the provider's full outputs: recompute the
 * root (must equal `root`, else NS_ERR_PROOF: the outputs are not the ones
 * committed), draw min(k, n_units) units (of the shard: job.h), re-run
 * them in one batch on a copy of the claim (ns_runner_run_units), compare,
 * and on a mismatch
 * attribute it to units. NS_OK means the check ran: the verdict is
 * res->mismatched (0 = passed). NS_ERR_TOOBIG for k above NS_MAX_CHECKS;
 * runner errors are returned as they are (the check could not be made).
 * res is filled on every path. Inputs the requester hashed itself may be
 * marked verified (runner.h): the re-run then skips hashing them. Memory:
 * one copy of the outputs, two after a mismatch. */
int ns_spot_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                  const ns_input_t *inputs, uint8_t *const *outputs,
                  const ns_hash_t root, const uint8_t secret[32], uint32_t k,
                  ns_check_result_t *res, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* The provider's own check before it commits (a requester could frame an
 * honest provider with a kernel that no check passes: one that reads its
 * outputs, races or depends on the launch): ns_spot_check of its own
 * outputs without a root, k units (of every step) drawn from a fresh
 * random secret. NS_OK means the check ran: res->mismatched or
 * res->changed non-zero means the outputs would fail any requester's
 * check (err says which unit). Memory: one copy of the outputs. */
int ns_self_check(ns_runner_t *r, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t *const *outputs, uint32_t k, ns_check_result_t *res,
                  char *err, size_t errlen) NS_MUST_CHECK;

/* ns_spot_check for outputs received into files (the requester's fetch):
 * root is the committed root, which the caller computed from these very
 * bytes as they arrived (ns_fetch_add_output's leaves) and compared with
 * the commitment; it is not recomputed. fds, by argument position: -1, or
 * the file (readable, at least args[i].size bytes) that outputs[i] is a
 * MAP_SHARED read-only mapping of. The re-run's copy of such an output is
 * a private mapping of its file (only the pages the drawn units write take
 * memory), and the compare drops both mappings from memory window by
 * window (madvise): the check holds a few MiB of the outputs, not all of
 * them, on a device that shares host memory (on one with memory of its
 * own the runner moves the whole buffer through the mapping once). After
 * a mismatch, attribution takes full-size buffers as ns_spot_check does.
 * NS_ERR_IO when a file cannot be mapped; otherwise as ns_spot_check. */
int ns_spot_check_files(ns_runner_t *r, const ns_job_t *job,
                        const ns_hash_t job_id, const ns_input_t *inputs,
                        uint8_t *const *outputs, const int *fds,
                        const ns_hash_t root, const uint8_t secret[32],
                        uint32_t k, ns_check_result_t *res, char *err,
                        size_t errlen) NS_MUST_CHECK;

typedef struct {
    ns_job_t job;     /* the descriptor (owns its source) */
    ns_hash_t job_id; /* ns_job_id(job): derived, never read from the wire */
    uint8_t provider[NS_ID_BYTES];
    ns_hash_t root;
    uint64_t n_units;          /* as signed in the statement */
    uint8_t sig[NS_SIG_BYTES]; /* provider's result statement signature */
    uint64_t unit;             /* the unit accused */
    uint32_t arg;              /* an OUT argument (position) */
    uint64_t pos;              /* a byte of arg that unit writes */
    uint8_t *chunk;            /* the claimed chunk holding pos (chunk
                                  pos / NS_COMMIT_CHUNK of arg), owned */
    size_t chunk_len;
    ns_hash_t path[NS_MERKLE_MAX_DEPTH]; /* the chunk's leaf to the root */
    size_t depth;
    /* A pipeline whose accused step reads buffers that earlier steps
     * wrote: the content hash of every OUT buffer, in argument order
     * (n_outs = their count; 0 otherwise). A checker fetches them by hash
     * and recomputes the committed root from them before the re-run. */
    uint32_t n_outs;
    ns_hash_t outs[NS_MAX_ARGS];
} ns_fraud_proof_t;

/* Build a proof that unit `unit` writes byte `pos` of OUT argument `arg`
 * otherwise than the provider's outputs claim (the spot check's first_bad,
 * bad_arg, bad_pos). tree may be NULL, then the path is recomputed from
 * the outputs (ns_commit_path) and the root derived from the path. job_id
 * must be ns_job_id(job) and the position must exist (NS_ERR_INVAL if
 * not). Whether the claim is wrong is not checked here. On success p owns
 * copies of everything; on failure p is released. */
int ns_fraud_build(ns_fraud_proof_t *p, const ns_job_t *job,
                   const ns_hash_t job_id, const uint8_t provider[NS_ID_BYTES],
                   const uint8_t sig[NS_SIG_BYTES], const ns_merkle_t *tree,
                   uint8_t *const *outputs, uint64_t unit, uint32_t arg,
                   uint64_t pos) NS_MUST_CHECK;
/* NULL-safe on a zeroed or released proof; leaves p zeroed. */
void ns_fraud_release(ns_fraud_proof_t *p);

/* Wire form: [2, job, provider (bin 32), root (bin 32), n_units, sig
 * (bin 64), unit, arg, pos, chunk (bin), path (array of bin 32)]; job is
 * ns_job_pack's form and job_id is recomputed from it on read. A
 * pipeline's proof is version 3, with a twelfth element: outs (array of
 * bin 32, empty when the accused step reads no earlier step's buffer). */
void ns_fraud_pack(msgpack_packer *pk, const ns_fraud_proof_t *p);
/* Strict: caps on every length, exact sizes, and the shape checked against
 * the descriptor (n_units = ns_job_units, unit < n_units and in the
 * shard, arg an OUT
 * argument, pos inside it, chunk_len = the length of that chunk, depth =
 * the path length of its leaf). On failure p is released. */
int ns_fraud_read(ns_mpr_t *r, ns_fraud_proof_t *p, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* The checks that need no re-run: descriptor and job id, shape, the
 * statement's signature, the chunk's Merkle path. NS_OK, NS_ERR_PROOF
 * (err says which step failed). */
int ns_fraud_verify_claim(const ns_fraud_proof_t *p, char *err,
                          size_t errlen) NS_MUST_CHECK;

/* Whether unit u of a pipeline reads a buffer an earlier step wrote (so
 * its proof needs outs); false for a job of one launch. */
bool ns_fraud_needs_outs(const ns_job_t *job, uint64_t u);

/* Check a proof: ns_fraud_verify_claim, then unit re-run alone on r on
 * full-size output buffers filled with 0x00 and with 0xFF: byte pos must
 * be equal after both runs (the unit writes it) and that value must not
 * match the claim (under the tolerance, for the aligned float32 word with
 * the unit's written bytes in place of the claim's). NS_OK = fraud
 * proven; NS_ERR_PROOF = not a valid proof (forged, or the claim was
 * right, or the unit does not write there); other errors are failures to
 * check (runner, inputs). With outs (a pipeline), inputs[i] of every OUT
 * argument i holds that buffer's claimed content: the root is recomputed
 * from them (NS_ERR_PROOF when it differs), and the step's re-run reads
 * them. This is the verifier the ledger calls for SLASH
 * (through the sandboxed worker on full nodes: worker.h). */
int ns_fraud_check(ns_runner_t *r, const ns_fraud_proof_t *p,
                   const ns_input_t *inputs, char *err,
                   size_t errlen) NS_MUST_CHECK;

#endif
