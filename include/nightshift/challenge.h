/* challenge.h - hardware challenges that test a provider's device claims
 * (exec layer): global memory and bandwidth with a memory-filling
 * labelling, arithmetic throughput with an integer matrix product checked
 * by Freivalds' algorithm.
 *
 * Both follow the same pattern: the verifier sends fresh parameters and a
 * random seed and starts a clock; the prover computes on its device and
 * answers (a Merkle root over the labels, the product matrix); the verifier
 * stops the clock, then checks the answer with a small fraction of the
 * prover's work. The verdict is WRONG when the answer is not right, LATE
 * when it is right but arrived after the deadline that the claimed figures
 * (ns_devinfo_t.gbps / .gflops) imply, PASSED otherwise.
 *
 * Deadlines are roofline sums over the claim (ns_devinfo_t: type, gbps,
 * gflops): bytes moved / claimed GB/s plus work / claimed GFLOPS, where
 * each unit of work (a label, a BLAKE2b block, a multiply-accumulate) is
 * counted in flop-equivalents for the claimed device type; times
 * NS_CHAL_SLACK, plus NS_CHAL_ALLOWANCE_US for launches and transfers (the
 * caller adds the network round trip). The CPU costs are measured (PoCL on
 * a 2-core AVX-512 Xeon, then 1.5x margin); the GPU costs are estimates
 * from instruction counts (integer ops at half the FMA rate, 2x margin),
 * not yet measured on a GPU. A device that is slower than it claims by
 * more than the slack is caught; smaller exaggerations are not (the
 * figures are noisy and kernels differ).
 *
 * ---- Labelling (memory) ------------------------------------------------
 * M bytes of 64-byte labels in T = segments * steps rows of L lanes;
 * label v (row t = v / L, lane l = v % L) lives at byte 64 v. Each label
 * is 16 little-endian u32 words:
 *   label(v) = F(seed, v, prev, ref)
 *   prev = label(v - L) (the same lane, one row up), zeros for row 0
 *   ref  = zeros for row 0; else with x = prev word 0 | word 1 << 32:
 *          segment 0 (t < steps): label(r * L + l), r = (x * t) >> 64,
 *            an earlier row of the same lane;
 *          segment s >= 1: label((x * s * steps * L) >> 64), any label of
 *            an earlier segment, in any lane.
 *   F: in[i] = (prev[i] ^ K[i]) + rotl32(ref[i], 16), K = seed words 0..7,
 *      v low, v high, and the six words of NS_LABEL_K; out = ChaCha's 8
 *      rounds (4 double rounds) of in, plus in, word by word.
 * A lane is a sequential chain and its references are data-dependent, so
 * a label cannot be produced without its predecessors; from segment 1 on
 * they reach across the whole buffer, so a prover that keeps less than M
 * bytes must recompute long chains for the labels it dropped (or answer
 * wrong). The device writes M bytes and reads about M bytes at random.
 *
 * Commitment: chunks of NS_LABEL_CHUNK_BYTES (64 labels) are the leaves of
 * a hash.h Merkle tree (leaf = ns_merkle_leaf(chunk)), all hashed on the
 * device. The verifier draws k label positions from H(root || secret)
 * (ns_challenge_draw) and, for each, checks the chunks holding the label,
 * its prev and its ref against the root, the ref index against prev, and
 * the label against F: O(k) hashes, never the buffer.
 *
 * What it does not prove: a prover may trade computation for memory
 * (keep part of the labels and recompute the rest when the chain asks
 * for them); only the deadline bounds that trade. A labelling lives in
 * one buffer, so one challenge covers at most the device's largest
 * allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE, often a quarter of global
 * memory on GPUs).
 *
 * ---- Integer matrix product (throughput) ---------------------------------
 * A, B: n x n matrices of u32 entries below a prime p < 2^31, generated
 * from the seed (entry i of matrix w: mix(seed, w, i), see
 * ns_imatmul_entry); the prover returns C = A B mod p, accumulated
 * exactly (64-bit sums with a carry count, one reduction per entry). The
 * verifier generates A and B itself (O(n^2)) and runs Freivalds' check t
 * times: a random vector r mod p, A (B r) == C r. A wrong C passes one
 * round with probability at most 1/p.
 */
#ifndef NIGHTSHIFT_CHALLENGE_H
#define NIGHTSHIFT_CHALLENGE_H

#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/mp.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NS_CHAL_PASSED = 0, /* right and in time */
    NS_CHAL_WRONG = 1,  /* the answer does not check out */
    NS_CHAL_LATE = 2,   /* right, after the deadline */
} ns_chal_verdict;

/* "passed", "wrong", "late". */
const char *ns_chal_verdict_name(int verdict);

#define NS_CHAL_SLACK 4.0          /* deadline / expected time */
#define NS_CHAL_ALLOWANCE_US 20000 /* launches, transfers, clocks */
#define NS_CHAL_MAX_OPENINGS 1024  /* label positions per challenge */

/* Work in flop-equivalents per unit, by claimed device type. */
typedef struct {
    double label;    /* one 64-byte label (its ChaCha rounds, a random read) */
    double b2_block; /* one BLAKE2b compression (leaves and tree) */
    double mac;      /* one u32 x u32 -> u64 multiply-accumulate with carry */
} ns_chal_costs_t;

/* The costs for a device type (NS_DEV_CPU measured, others estimated). */
const ns_chal_costs_t *ns_chal_costs(uint32_t devtype);

/* ---- labelling ---------------------------------------------------------- */

#define NS_LABEL_BYTES 64
#define NS_LABEL_CHUNK_LABELS 64
#define NS_LABEL_CHUNK_BYTES (NS_LABEL_BYTES * NS_LABEL_CHUNK_LABELS)
#define NS_LABEL_MIN_BYTES (UINT64_C(1) << 20) /* 1 MiB */
#define NS_LABEL_MAX_BYTES (UINT64_C(1) << 40) /* 1 TiB */
#define NS_LABEL_MAX_SEGMENTS 64
/* K words 10..15: "nightshift/label" continued, as little-endian u32. */
#define NS_LABEL_K                                                             \
    {                                                                          \
        0x6867696eu, 0x69687374u, 0x6c2f7466u, 0x6c656261u, 0x3176u, 0x0u      \
    }

typedef struct {
    uint64_t bytes;    /* M = lanes * segments * steps * 64 */
    uint32_t lanes;    /* L: a multiple of NS_LABEL_CHUNK_LABELS */
    uint32_t segments; /* S: 1..NS_LABEL_MAX_SEGMENTS */
    uint32_t steps;    /* rows per segment, >= 1 */
} ns_label_params_t;

/* Parameters for about `bytes` (rounded down to a whole number of rows):
 * lanes = the largest power of two <= 65536 that leaves at least 64 rows
 * per segment (but >= 64), segments given (0 = 4). NS_ERR_INVAL for bytes
 * outside NS_LABEL_MIN_BYTES..NS_LABEL_MAX_BYTES. */
int ns_label_params_init(ns_label_params_t *p, uint64_t bytes,
                         uint32_t segments) NS_MUST_CHECK;
/* Check explicit parameters against the rules above. */
int ns_label_params_check(const ns_label_params_t *p) NS_MUST_CHECK;

static inline uint64_t ns_label_count(const ns_label_params_t *p)
{
    return p->bytes / NS_LABEL_BYTES;
}

/* The rule F for label v (prev and ref NULL for zeros). */
void ns_label_compute(const uint8_t seed[32], uint64_t v, const uint8_t *prev,
                      const uint8_t *ref, uint8_t out[NS_LABEL_BYTES]);
/* The ref position of label v (row >= 1) given its prev label. */
uint64_t ns_label_ref(const ns_label_params_t *p, uint64_t v,
                      const uint8_t prev[NS_LABEL_BYTES]);

/* The deadline for a claim: labels written, refs read and chunks hashed
 * (3 M bytes, less the refs of segment 0) and the labels' and BLAKE2b
 * blocks' work at the claimed figures (header comment). Claims <= 0 count
 * as 1e-3 (an absurdly slow device: a deadline that always holds). */
uint64_t ns_label_deadline_claim_us(const ns_label_params_t *p,
                                    const ns_devinfo_t *claim);
/* The same for figures of a device of unknown type: the most lenient
 * (CPU) costs. */
uint64_t ns_label_deadline_us(const ns_label_params_t *p, double gbps,
                              double gflops);

/* One opened chunk: its index, bytes and Merkle path. */
typedef struct {
    uint64_t chunk;
    uint8_t data[NS_LABEL_CHUNK_BYTES];
    ns_hash_t path[NS_MERKLE_MAX_DEPTH];
    size_t depth;
} ns_label_chunk_t;

/* The answer for one position: the chunks holding the label, its prev and
 * its ref (prev and ref unused for row 0). */
typedef struct {
    uint64_t position;
    ns_label_chunk_t at, prev, ref;
} ns_label_opening_t;

/* The positions to open: ns_challenge_draw over all labels, k <=
 * NS_CHAL_MAX_OPENINGS. */
void ns_label_positions(const ns_label_params_t *p, const ns_hash_t root,
                        const uint8_t secret[32], uint32_t k,
                        uint64_t *positions);

/* The verifier. WRONG for any opening that does not check out (position,
 * chunk index, Merkle path, ref index, label value); LATE for a right
 * answer with elapsed_us > deadline_us. why (may be NULL) says which. */
ns_chal_verdict ns_label_verify(const ns_label_params_t *p,
                                const uint8_t seed[32], const ns_hash_t root,
                                const uint64_t *positions, uint32_t k,
                                const ns_label_opening_t *openings,
                                uint64_t elapsed_us, uint64_t deadline_us,
                                char *why, size_t whylen);

/* ---- the labelling answer ------------------------------------------------
 *
 * Non-interactive (Fiat-Shamir): the prover fills and commits, draws the
 * positions itself with ns_label_positions(p, root, seed, k) and opens
 * them in the same answer. It cannot pick the positions before the root
 * is fixed, and another root costs another full labelling, which the
 * deadline bounds. The verifier recomputes the positions from the root it
 * received and its own seed, then calls ns_label_verify(secret = seed).
 *
 * Bytes (integers little-endian):
 *   root[32] | k: u32 | k openings
 *   opening: position: u64 | chunk(at) | chunk(prev) chunk(ref) unless the
 *            position is in row 0 (position < lanes)
 *   chunk:   index: u64 | depth: u8 | data[NS_LABEL_CHUNK_BYTES] |
 *            path[depth][32]
 */

/* The most bytes of one encoded chunk and of one whole answer. */
#define NS_LABEL_ANSWER_CHUNK_MAX                                              \
    (8 + 1 + NS_LABEL_CHUNK_BYTES + NS_HASH_BYTES * NS_MERKLE_MAX_DEPTH)
#define NS_LABEL_ANSWER_MAX                                                    \
    (NS_HASH_BYTES + 4 +                                                       \
     NS_CHAL_MAX_OPENINGS * (8 + 3 * NS_LABEL_ANSWER_CHUNK_MAX))

/* Encode an answer into out (ns_buf_init'ed by the caller, who releases
 * it; emptied first). The openings must be for positions[0..k), in order,
 * with the chunk indexes and path depths the reader demands.
 * NS_ERR_INVAL for bad parameters, k == 0 or an opening that does not fit
 * its position, NS_ERR_TOOBIG for k > NS_CHAL_MAX_OPENINGS, NS_ERR_NOMEM.
 * On error out is empty. */
int ns_label_answer_pack(const ns_label_params_t *p, const ns_hash_t root,
                         const uint64_t *positions, uint32_t k,
                         const ns_label_opening_t *openings,
                         ns_buf_t *out) NS_MUST_CHECK;

/* Decode an answer from a prover (hostile bytes: never reads outside
 * buf[0..len), allocates nothing). Fills root, positions[0..*k), *k and
 * openings[0..*k) (arrays of NS_CHAL_MAX_OPENINGS entries). Checks all
 * that needs no seed but leaves the hashing to ns_label_verify: exact
 * size, 1 <= k <= NS_CHAL_MAX_OPENINGS, positions below the label count,
 * every chunk index consistent with its position (ref: with the ref that
 * the opened prev label names), every path exactly as deep as the tree
 * demands for that chunk. NS_ERR_INVAL for bad parameters or an
 * inconsistent answer, NS_ERR_TRUNCATED, NS_ERR_TRAILING, NS_ERR_TOOBIG
 * (k over the cap). On error *k is 0 and the outputs are not to be used. */
int ns_label_answer_read(const uint8_t *buf, size_t len,
                         const ns_label_params_t *p, ns_hash_t root,
                         uint64_t *positions, uint32_t *k,
                         ns_label_opening_t *openings) NS_MUST_CHECK;

/* Host reference (small M; tests, cheaters and cross-checks): fill
 * `labels` (p->bytes) by the rule, build the Merkle tree over its chunks
 * (release with ns_merkle_release), open positions from them. */
int ns_label_fill_host(const ns_label_params_t *p, const uint8_t seed[32],
                       uint8_t *labels) NS_MUST_CHECK;
int ns_label_commit_host(const ns_label_params_t *p, const uint8_t *labels,
                         ns_merkle_t *tree) NS_MUST_CHECK;
int ns_label_open_host(const ns_label_params_t *p, const uint8_t *labels,
                       const ns_merkle_t *tree, const uint64_t *positions,
                       uint32_t k, ns_label_opening_t *out) NS_MUST_CHECK;

/* ---- integer matrix product --------------------------------------------- */

#define NS_IMATMUL_TILE 16 /* n is a multiple of this */
#define NS_IMATMUL_MAX_N 32768
#define NS_IMATMUL_DEFAULT_P 2147483647u /* 2^31 - 1, a Mersenne prime */
#define NS_IMATMUL_MAX_ROUNDS 16

typedef struct {
    uint32_t n;       /* matrix order, multiple of NS_IMATMUL_TILE */
    uint32_t p;       /* prime modulus, 3 <= p < 2^31 */
    uint8_t seed[32]; /* fresh per challenge */
} ns_imatmul_params_t;

/* n and p acceptable (p tested for primality). */
int ns_imatmul_params_check(const ns_imatmul_params_t *p) NS_MUST_CHECK;

/* Entry i (row-major) of matrix w (0 = A, 1 = B): with k0, k1 the first
 * two little-endian u64 words of the seed, z = mix(mix(i ^ k0) ^ k1 ^ w)
 * (mix = SplitMix64's finalizer) and the entry is ((z >> 32) * p) >> 32. */
uint32_t ns_imatmul_entry(const ns_imatmul_params_t *p, uint32_t w, uint64_t i);
/* Both matrices, n * n entries each (the verifier's side, O(n^2)). */
void ns_imatmul_fill(const ns_imatmul_params_t *p, uint32_t *a, uint32_t *b);
/* C = A B mod p on the host: O(n^3), for small n in tests. */
void ns_imatmul_host(const ns_imatmul_params_t *p, const uint32_t *a,
                     const uint32_t *b, uint32_t *c);

/* The deadline for a claim: n^3 multiply-accumulates and 12 n^2 bytes
 * moved (A and B written on the device, C read back) at the claimed
 * figures (header comment). */
uint64_t ns_imatmul_deadline_claim_us(const ns_imatmul_params_t *p,
                                      const ns_devinfo_t *claim);
/* The same for figures of a device of unknown type (CPU costs). */
uint64_t ns_imatmul_deadline_us(const ns_imatmul_params_t *p, double gbps,
                                double gflops);

/* Freivalds with `rounds` (1..NS_IMATMUL_MAX_ROUNDS) random vectors, r_j
 * uniform below p from a ChaCha20 stream keyed with H(secret || round),
 * and the entries of C checked to be below p: *verdict is WRONG, LATE or
 * PASSED and why (may be NULL) says which. O(rounds n^2) time, O(rounds
 * n) memory (A and B regenerated row by row). NS_ERR_INVAL for bad
 * parameters,
 * NS_ERR_NOMEM (then *verdict is WRONG: nothing was shown). */
int ns_imatmul_verify(const ns_imatmul_params_t *p, const uint32_t *c,
                      const uint8_t secret[32], uint32_t rounds,
                      uint64_t elapsed_us, uint64_t deadline_us,
                      ns_chal_verdict *verdict, char *why,
                      size_t whylen) NS_MUST_CHECK;

/* ---- the prover on an OpenCL device ------------------------------------- */

typedef struct ns_chal_prover ns_chal_prover_t;

/* Open device number device_index (ns_devices_probe order) and build both
 * challenge programs (untimed: do it before challenges arrive). NULL on
 * failure with *err set and errbuf saying why. */
ns_chal_prover_t *ns_chal_prover_new(uint32_t device_index, int *err,
                                     char *errbuf, size_t errlen);
void ns_chal_prover_destroy(ns_chal_prover_t **p);

/* Fill and commit on the device; the labels stay there for
 * ns_label_open until the next ns_label_prove or destroy. NS_ERR_TOOBIG
 * when p->bytes exceeds the device's largest buffer. *device_us (may be
 * NULL) gets the prover's own wall time. */
int ns_label_prove(ns_chal_prover_t *pr, const ns_label_params_t *p,
                   const uint8_t seed[32], ns_hash_t root, uint64_t *device_us,
                   char *err, size_t errlen) NS_MUST_CHECK;
/* Open positions of the last ns_label_prove (k <= NS_CHAL_MAX_OPENINGS). */
int ns_label_open(ns_chal_prover_t *pr, const uint64_t *positions, uint32_t k,
                  ns_label_opening_t *out, char *err,
                  size_t errlen) NS_MUST_CHECK;

/* The whole non-interactive labelling answer in one call: ns_label_prove,
 * positions from ns_label_positions(p, root, seed, k), ns_label_open,
 * ns_label_answer_pack into out (ns_buf_init'ed by the caller). k is
 * 1..NS_CHAL_MAX_OPENINGS. *device_us (may be NULL) gets the wall time of
 * all of it. Errors of those calls; err says why. */
int ns_label_prove_answer(ns_chal_prover_t *pr, const ns_label_params_t *p,
                          const uint8_t seed[32], uint32_t k, ns_hash_t root,
                          uint64_t *device_us, ns_buf_t *out, char *err,
                          size_t errlen) NS_MUST_CHECK;

/* Generate A and B on the device, multiply, read C (n * n words) back. */
int ns_imatmul_prove(ns_chal_prover_t *pr, const ns_imatmul_params_t *p,
                     uint32_t *c, uint64_t *device_us, char *err,
                     size_t errlen) NS_MUST_CHECK;

/* ---- a challenge request, as the sandbox worker runs it --------------- */

#define NS_CHAL_KIND_LABEL 1
#define NS_CHAL_KIND_IMATMUL 2
/* Largest matrix order through the worker: C is 16 MiB. */
#define NS_CHAL_REQUEST_MAX_N 2048
/* The most answer bytes of any request: a label answer, or C. */
#define NS_CHAL_MAX_ANSWER                                                     \
    (NS_LABEL_ANSWER_MAX > 4u * NS_CHAL_REQUEST_MAX_N * NS_CHAL_REQUEST_MAX_N  \
         ? NS_LABEL_ANSWER_MAX                                                 \
         : 4u * NS_CHAL_REQUEST_MAX_N * NS_CHAL_REQUEST_MAX_N)

typedef struct {
    uint32_t kind;           /* NS_CHAL_KIND_LABEL or NS_CHAL_KIND_IMATMUL */
    ns_label_params_t label; /* LABEL: the labelling */
    struct {
        uint32_t n; /* IMATMUL: matrix order, multiple of NS_IMATMUL_TILE,
                       at most NS_CHAL_REQUEST_MAX_N */
        uint32_t p; /* IMATMUL: prime modulus */
    } imatmul;
    uint8_t seed[32]; /* fresh per challenge; LABEL: also the Fiat-Shamir
                         secret of the positions */
    uint32_t k;       /* LABEL: openings, 1..NS_CHAL_MAX_OPENINGS;
                         IMATMUL: ignored (sent as 0) */
} ns_chal_request_t;

/* Check a request against the rules and caps above and a device whose
 * largest allocation is max_alloc_bytes (0 = unknown: not checked).
 * NS_ERR_INVAL (unknown kind, bad parameters, k == 0), NS_ERR_TOOBIG (k,
 * n, or a buffer over the device's largest allocation); err says which. */
int ns_chal_request_check(const ns_chal_request_t *r, uint64_t max_alloc_bytes,
                          char *err, size_t errlen) NS_MUST_CHECK;

/* The answer's size for an IMATMUL request: n * n little-endian u32. */
static inline uint64_t ns_chal_imatmul_answer_bytes(uint32_t n)
{
    return (uint64_t)n * n * 4;
}

#endif
