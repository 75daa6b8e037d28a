/* test_merkle.c - BLAKE2b helpers and Merkle trees: roots, proofs and
 * forged proofs. */
#include "check.h"

#include "nightshift/hash.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LEAVES 67

/* Leaf i: the hash of its index and a few bytes, as a job output would. */
static void s_leaves(ns_hash_t *leaves, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t item[12];
        memcpy(item, &i, sizeof i < 8 ? sizeof i : 8);
        memset(item + 8, (int)(i * 13), 4);
        ns_merkle_leaf(leaves[i], item, sizeof item);
    }
}

/* The tree's definition, written out recursively for comparison: split
 * where the level-by-level build splits (largest power of two below n),
 * since an odd node is promoted unchanged at every level. */
static void s_reference_root(ns_hash_t out, const ns_hash_t *leaves, size_t n)
{
    if (n == 1) {
        memcpy(out, leaves[0], NS_HASH_BYTES);
        return;
    }
    size_t half = 1;
    while (half * 2 < n)
        half *= 2;
    ns_hash_t l, r;
    s_reference_root(l, leaves, half);
    s_reference_root(r, leaves + half, n - half);
    ns_merkle_node(out, l, r);
}

TEST(hash_primitives)
{
    ns_hash_t a, b;
    static const char abc[] = "abc";
    ns_hash(a, abc, 3);
    ns_hash2(b, "a", 1, "bc", 2);
    CHECK_MEM(a, b, NS_HASH_BYTES);
    ns_hash2(b, abc, 3, "", 0);
    CHECK_MEM(a, b, NS_HASH_BYTES);
    /* BLAKE2b-256("abc"), RFC 7693 parameters with a 32-byte output */
    static const uint8_t want[NS_HASH_BYTES] = {
        0xbd, 0xdd, 0x81, 0x3c, 0x63, 0x42, 0x39, 0x72, 0x31, 0x71, 0xef,
        0x3f, 0xee, 0x98, 0x57, 0x9b, 0x94, 0x96, 0x4e, 0x3b, 0xb1, 0xcb,
        0x3e, 0x42, 0x72, 0x62, 0xc8, 0xc0, 0x68, 0xd5, 0x23, 0x19};
    CHECK_MEM(a, want, NS_HASH_BYTES);

    /* domain separation: leaf = H(0x00 || x), node = H(0x01 || l || r) */
    uint8_t buf[1 + 2 * NS_HASH_BYTES];
    ns_hash_t leaf, node, l, r;
    buf[0] = 0x00;
    memcpy(buf + 1, abc, 3);
    ns_hash(a, buf, 4);
    ns_merkle_leaf(leaf, abc, 3);
    CHECK_MEM(leaf, a, NS_HASH_BYTES);
    ns_hash(l, "left", 4);
    ns_hash(r, "right", 5);
    buf[0] = 0x01;
    memcpy(buf + 1, l, NS_HASH_BYTES);
    memcpy(buf + 1 + NS_HASH_BYTES, r, NS_HASH_BYTES);
    ns_hash(a, buf, sizeof buf);
    ns_merkle_node(node, l, r);
    CHECK_MEM(node, a, NS_HASH_BYTES);
    /* a leaf whose bytes look like an inner node is not that node */
    ns_merkle_leaf(leaf, buf + 1, 2 * NS_HASH_BYTES);
    CHECK(memcmp(leaf, node, NS_HASH_BYTES) != 0);
    /* the output may alias an input */
    ns_hash_t alias;
    memcpy(alias, l, NS_HASH_BYTES);
    ns_merkle_node(alias, alias, r);
    CHECK_MEM(alias, node, NS_HASH_BYTES);
}

TEST(small_trees_by_hand)
{
    ns_hash_t lv[3], root, want, n01;
    ns_merkle_t t;
    s_leaves(lv, 3);
    /* one leaf: the root is the leaf */
    CHECK_RC(ns_merkle_root_of(root, lv, 1), NS_OK);
    CHECK_MEM(root, lv[0], NS_HASH_BYTES);
    /* three leaves: node(node(0, 1), 2), leaf 2 promoted */
    ns_merkle_node(n01, lv[0], lv[1]);
    ns_merkle_node(want, n01, lv[2]);
    CHECK_RC(ns_merkle_root_of(root, lv, 3), NS_OK);
    CHECK_MEM(root, want, NS_HASH_BYTES);
    if (CHECK_RC(ns_merkle_build(&t, lv, 3), NS_OK)) {
        CHECK_EQ_INT(t.n_leaves, 3);
        CHECK_EQ_INT(t.n_levels, 3);
        ns_merkle_root(&t, root);
        CHECK_MEM(root, want, NS_HASH_BYTES);
        ns_hash_t path[NS_MERKLE_MAX_DEPTH];
        size_t depth = 99;
        CHECK_RC(ns_merkle_proof(&t, 2, path, &depth), NS_OK);
        CHECK_EQ_INT(depth, 1); /* only node(0, 1): level 0 is a promotion */
        CHECK_MEM(path[0], n01, NS_HASH_BYTES);
        CHECK_RC(ns_merkle_proof(&t, 0, path, &depth), NS_OK);
        CHECK_EQ_INT(depth, 2);
        CHECK_MEM(path[0], lv[1], NS_HASH_BYTES);
        CHECK_MEM(path[1], lv[2], NS_HASH_BYTES);
        ns_merkle_release(&t);
    }
    CHECK(t.nodes == NULL && t.level_off == NULL && t.n_leaves == 0);
}

TEST(empty_input)
{
    ns_hash_t lv[1], root;
    ns_merkle_t t;
    s_leaves(lv, 1);
    CHECK_RC(ns_merkle_root_of(root, lv, 0), NS_ERR_INVAL);
    CHECK_RC(ns_merkle_build(&t, lv, 0), NS_ERR_INVAL);
    CHECK(t.nodes == NULL);
    ns_merkle_release(&t); /* harmless after a failed build */
    CHECK_EQ_INT(ns_merkle_proof_len(0, 0), 0);
    CHECK_EQ_INT(ns_merkle_proof_len(1, 0), 0);
    ns_hash_t path[1];
    CHECK_RC(ns_merkle_verify(root, lv[0], 0, 0, path, 0), NS_ERR_INVAL);
}

/* Every proof of a tree of n leaves verifies; every forgery fails. */
static void s_check_tree(size_t n)
{
    ns_hash_t leaves[MAX_LEAVES], built, direct, ref;
    ns_hash_t path[NS_MERKLE_MAX_DEPTH + 2], bad[NS_MERKLE_MAX_DEPTH + 2];
    ns_merkle_t t;
    s_leaves(leaves, n);
    if (!CHECK_RC(ns_merkle_build(&t, leaves, n), NS_OK))
        return;
    ns_merkle_root(&t, built);
    CHECK_RC(ns_merkle_root_of(direct, leaves, n), NS_OK);
    s_reference_root(ref, leaves, n);
    if (memcmp(built, direct, NS_HASH_BYTES) != 0)
        ns_test_fail(__FILE__, __LINE__, "built root != root_of for n=%zu", n);
    else if (memcmp(built, ref, NS_HASH_BYTES) != 0)
        ns_test_fail(__FILE__, __LINE__, "built root != reference for n=%zu",
                     n);
    else
        ns_test_pass();

    size_t failures = 0;
#define EXPECT(expr, want)                                                     \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ != (want) && failures++ < 10)                                  \
            ns_test_fail(__FILE__, __LINE__, "n=%zu i=%zu: %s gave %s", n, i,  \
                         #expr, ns_errname(rc_));                              \
    } while (0)

    for (size_t i = 0; i < n; i++) {
        size_t depth = 0;
        EXPECT(ns_merkle_proof(&t, i, path, &depth), NS_OK);
        if (depth != ns_merkle_proof_len(n, i) && failures++ < 10)
            ns_test_fail(__FILE__, __LINE__, "n=%zu i=%zu: depth %zu != %zu", n,
                         i, depth, ns_merkle_proof_len(n, i));
        EXPECT(ns_merkle_verify(built, leaves[i], i, n, path, depth), NS_OK);

        /* wrong leaf: another item's, or one bit off */
        ns_hash_t leaf;
        memcpy(leaf, leaves[i], NS_HASH_BYTES);
        leaf[31] ^= 1;
        EXPECT(ns_merkle_verify(built, leaf, i, n, path, depth), NS_ERR_PROOF);
        if (n > 1)
            EXPECT(
                ns_merkle_verify(built, leaves[(i + 1) % n], i, n, path, depth),
                NS_ERR_PROOF);
        /* wrong root */
        ns_hash_t root2;
        memcpy(root2, built, NS_HASH_BYTES);
        root2[0] ^= 0x80;
        EXPECT(ns_merkle_verify(root2, leaves[i], i, n, path, depth),
               NS_ERR_PROOF);
        /* wrong index: the proof of i claimed for every other index */
        for (size_t j = 0; j < n; j++) {
            if (j == i)
                continue;
            int rc = ns_merkle_verify(built, leaves[i], j, n, path, depth);
            int want = ns_merkle_proof_len(n, j) == depth ? NS_ERR_PROOF
                                                          : NS_ERR_INVAL;
            if (rc != want && failures++ < 10)
                ns_test_fail(__FILE__, __LINE__,
                             "n=%zu: proof of %zu claimed for %zu gave %s", n,
                             i, j, ns_errname(rc));
        }
        /* wrong sibling: each hash of the path, one bit off */
        for (size_t d = 0; d < depth; d++) {
            memcpy(bad, path, depth * sizeof *path);
            bad[d][d % NS_HASH_BYTES] ^= 0x01;
            EXPECT(ns_merkle_verify(built, leaves[i], i, n, bad, depth),
                   NS_ERR_PROOF);
        }
        /* swapped siblings */
        if (depth >= 2) {
            memcpy(bad, path, depth * sizeof *path);
            memcpy(bad[0], path[1], NS_HASH_BYTES);
            memcpy(bad[1], path[0], NS_HASH_BYTES);
            EXPECT(ns_merkle_verify(built, leaves[i], i, n, bad, depth),
                   NS_ERR_PROOF);
        }
        /* wrong depth: one hash short, one hash extra, absurd */
        if (depth > 0)
            EXPECT(ns_merkle_verify(built, leaves[i], i, n, path, depth - 1),
                   NS_ERR_INVAL);
        memcpy(bad, path, depth * sizeof *path);
        memcpy(bad[depth], leaves[i], NS_HASH_BYTES);
        EXPECT(ns_merkle_verify(built, leaves[i], i, n, bad, depth + 1),
               NS_ERR_INVAL);
        EXPECT(ns_merkle_verify(built, leaves[i], i, n, path, SIZE_MAX),
               NS_ERR_INVAL);
    }
    /* index >= n */
    for (size_t i = n; i < n + 3; i++) {
        size_t depth = 0;
        EXPECT(ns_merkle_proof(&t, i, path, &depth), NS_ERR_INVAL);
        EXPECT(ns_merkle_verify(built, leaves[0], i, n, path, 0), NS_ERR_INVAL);
    }
    size_t i = SIZE_MAX;
    EXPECT(ns_merkle_verify(built, leaves[0], i, n, path, 0), NS_ERR_INVAL);
#undef EXPECT
    if (failures == 0)
        ns_test_pass();
    ns_merkle_release(&t);
}

TEST(trees_1_to_67)
{
    for (size_t n = 1; n <= MAX_LEAVES; n++)
        s_check_tree(n);
}

TEST(different_leaves_different_roots)
{
    ns_hash_t leaves[MAX_LEAVES], a, b;
    s_leaves(leaves, MAX_LEAVES);
    CHECK_RC(ns_merkle_root_of(a, leaves, MAX_LEAVES), NS_OK);
    /* order matters */
    ns_hash_t tmp;
    memcpy(tmp, leaves[3], NS_HASH_BYTES);
    memcpy(leaves[3], leaves[4], NS_HASH_BYTES);
    memcpy(leaves[4], tmp, NS_HASH_BYTES);
    CHECK_RC(ns_merkle_root_of(b, leaves, MAX_LEAVES), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
    /* one more leaf that equals the promoted last one still changes it */
    s_leaves(leaves, MAX_LEAVES);
    CHECK_RC(ns_merkle_root_of(a, leaves, 5), NS_OK);
    memcpy(leaves[5], leaves[4], NS_HASH_BYTES);
    CHECK_RC(ns_merkle_root_of(b, leaves, 6), NS_OK);
    CHECK(memcmp(a, b, NS_HASH_BYTES) != 0);
}

TEST(large_tree)
{
    const size_t n = 100003;
    ns_hash_t *leaves = malloc(n * sizeof *leaves);
    ns_hash_t built, direct, path[NS_MERKLE_MAX_DEPTH];
    ns_merkle_t t;
    if (!CHECK(leaves != NULL))
        return;
    s_leaves(leaves, n);
    if (CHECK_RC(ns_merkle_build(&t, leaves, n), NS_OK)) {
        ns_merkle_root(&t, built);
        CHECK_RC(ns_merkle_root_of(direct, leaves, n), NS_OK);
        CHECK_MEM(built, direct, NS_HASH_BYTES);
        size_t ok = 0, tried = 0;
        for (size_t i = 0; i < n; i += 997) {
            size_t depth = 0;
            tried++;
            if (ns_merkle_proof(&t, i, path, &depth) == NS_OK && depth <= 17 &&
                ns_merkle_verify(built, leaves[i], i, n, path, depth) == NS_OK)
                ok++;
        }
        size_t depth = 0;
        CHECK_RC(ns_merkle_proof(&t, n - 1, path, &depth), NS_OK);
        CHECK_RC(ns_merkle_verify(built, leaves[n - 1], n - 1, n, path, depth),
                 NS_OK);
        CHECK_EQ_INT(ok, tried);
        ns_merkle_release(&t);
    }
    free(leaves);
}

int main(void)
{
    RUN(hash_primitives);
    RUN(small_trees_by_hand);
    RUN(empty_input);
    RUN(trees_1_to_67);
    RUN(different_leaves_different_roots);
    RUN(large_tree);
    return ns_test_finish("core_merkle");
}
