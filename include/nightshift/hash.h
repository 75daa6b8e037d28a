/* hash.h - BLAKE2b-256 (libsodium crypto_generichash) and Merkle trees.
 *
 * Merkle tree (see docs/PROTOCOL.md, "Merkle commitments"):
 *   leaf hash  = H(0x00 || leaf bytes)          -- ns_merkle_leaf()
 *   inner node = H(0x01 || left || right)
 *   a level with an odd count promotes its last node unchanged.
 * The domain bytes keep a leaf from ever being read as an inner node.
 */
#ifndef NIGHTSHIFT_HASH_H
#define NIGHTSHIFT_HASH_H

#include "nightshift/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_HASH_BYTES 32
#define NS_MERKLE_MAX_DEPTH 48 /* up to 2^48 leaves */

typedef uint8_t ns_hash_t[NS_HASH_BYTES];

void ns_hash(ns_hash_t out, const void *data, size_t len);
/* H(a || b) without copying. */
void ns_hash2(ns_hash_t out, const void *a, size_t alen, const void *b,
              size_t blen);

void ns_merkle_leaf(ns_hash_t out, const void *data, size_t len);
void ns_merkle_node(ns_hash_t out, const ns_hash_t left, const ns_hash_t right);

/* A built tree: every level kept, so any leaf can be opened. */
typedef struct {
    size_t n_leaves;   /* number of leaves (>= 1) */
    size_t n_levels;   /* levels including leaves and root */
    ns_hash_t *nodes;  /* all levels, leaves first; owned */
    size_t *level_off; /* index of each level's first node in nodes */
} ns_merkle_t;

/* Build from n >= 1 leaf hashes (copied). Release with ns_merkle_release. */
int ns_merkle_build(ns_merkle_t *t, const ns_hash_t *leaves,
                    size_t n) NS_MUST_CHECK;
void ns_merkle_release(ns_merkle_t *t);
void ns_merkle_root(const ns_merkle_t *t, ns_hash_t root);

/* Sibling path for leaf `index` into path[NS_MERKLE_MAX_DEPTH]; *depth is
 * the number of hashes written. NS_ERR_INVAL for an index out of range. */
int ns_merkle_proof(const ns_merkle_t *t, size_t index, ns_hash_t *path,
                    size_t *depth) NS_MUST_CHECK;

/* Number of sibling hashes the proof of `index` must have in a tree of
 * n_leaves leaves (promotions skip levels). 0 for n_leaves == 0. */
size_t ns_merkle_proof_len(size_t n_leaves, size_t index);

/* Check that `leaf` is item `index` of a tree of n_leaves under `root`.
 * NS_OK, NS_ERR_PROOF if it does not verify, NS_ERR_INVAL for a shape
 * that cannot be right (index out of range, wrong depth). */
int ns_merkle_verify(const ns_hash_t root, const ns_hash_t leaf, size_t index,
                     size_t n_leaves, const ns_hash_t *path,
                     size_t depth) NS_MUST_CHECK;

/* Root directly from leaves, without keeping the tree (O(log n) memory
 * would be possible; this keeps one level, n/2 hashes). */
int ns_merkle_root_of(ns_hash_t root, const ns_hash_t *leaves,
                      size_t n) NS_MUST_CHECK;

#endif
