#include "nightshift/hash.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

void ns_hash(ns_hash_t out, const void *data, size_t len)
{
    crypto_generichash(out, NS_HASH_BYTES, data, len, NULL, 0);
}

void ns_hash2(ns_hash_t out, const void *a, size_t alen, const void *b,
              size_t blen)
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, a, alen);
    crypto_generichash_update(&st, b, blen);
    crypto_generichash_final(&st, out, NS_HASH_BYTES);
}

void ns_merkle_leaf(ns_hash_t out, const void *data, size_t len)
{
    static const uint8_t tag = 0x00;
    ns_hash2(out, &tag, 1, data, len);
}

void ns_merkle_node(ns_hash_t out, const ns_hash_t left, const ns_hash_t right)
{
    uint8_t buf[1 + 2 * NS_HASH_BYTES];
    buf[0] = 0x01;
    memcpy(buf + 1, left, NS_HASH_BYTES);
    memcpy(buf + 1 + NS_HASH_BYTES, right, NS_HASH_BYTES);
    ns_hash(out, buf, sizeof buf);
}

/* Hash one level (n nodes at src) into the next at dst; returns its size. */
static size_t s_level_up(ns_hash_t *dst, const ns_hash_t *src, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i + 1 < n; i += 2)
        ns_merkle_node(dst[m++], src[i], src[i + 1]);
    if (n & 1)
        memmove(dst[m++], src[n - 1], NS_HASH_BYTES);
    return m;
}

int ns_merkle_build(ns_merkle_t *t, const ns_hash_t *leaves, size_t n)
{
    memset(t, 0, sizeof *t);
    if (n == 0)
        return NS_ERR_INVAL;
    size_t levels = 1, total = n;
    for (size_t k = n; k > 1; k = (k + 1) / 2) {
        levels++;
        total += (k + 1) / 2;
    }
    if (levels > NS_MERKLE_MAX_DEPTH + 1)
        return NS_ERR_TOOBIG;
    t->nodes = malloc(total * sizeof *t->nodes);
    t->level_off = malloc(levels * sizeof *t->level_off);
    if (!t->nodes || !t->level_off) {
        ns_merkle_release(t);
        return NS_ERR_NOMEM;
    }
    memcpy(t->nodes, leaves, n * sizeof *leaves);
    size_t off = 0, k = n;
    t->level_off[0] = 0;
    for (size_t l = 1; l < levels; l++) {
        size_t next = s_level_up(t->nodes + off + k, t->nodes + off, k);
        off += k;
        k = next;
        t->level_off[l] = off;
    }
    t->n_leaves = n;
    t->n_levels = levels;
    return NS_OK;
}

void ns_merkle_release(ns_merkle_t *t)
{
    free(t->nodes);
    free(t->level_off);
    memset(t, 0, sizeof *t);
}

void ns_merkle_root(const ns_merkle_t *t, ns_hash_t root)
{
    memcpy(root, t->nodes[t->level_off[t->n_levels - 1]], NS_HASH_BYTES);
}

int ns_merkle_proof(const ns_merkle_t *t, size_t index, ns_hash_t *path,
                    size_t *depth)
{
    if (index >= t->n_leaves)
        return NS_ERR_INVAL;
    size_t d = 0, k = t->n_leaves, i = index;
    for (size_t l = 0; l + 1 < t->n_levels; l++) {
        const ns_hash_t *level = t->nodes + t->level_off[l];
        size_t sib = i ^ 1;
        if (sib < k) /* else: promoted without a sibling */
            memcpy(path[d++], level[sib], NS_HASH_BYTES);
        i >>= 1;
        k = (k + 1) / 2;
    }
    *depth = d;
    return NS_OK;
}

size_t ns_merkle_proof_len(size_t n_leaves, size_t index)
{
    size_t d = 0;
    for (size_t k = n_leaves, i = index; k > 1; k = (k + 1) / 2, i >>= 1)
        if ((i ^ 1) < k)
            d++;
    return d;
}

int ns_merkle_verify(const ns_hash_t root, const ns_hash_t leaf, size_t index,
                     size_t n_leaves, const ns_hash_t *path, size_t depth)
{
    if (index >= n_leaves || depth > NS_MERKLE_MAX_DEPTH ||
        depth != ns_merkle_proof_len(n_leaves, index))
        return NS_ERR_INVAL;
    ns_hash_t cur;
    memcpy(cur, leaf, NS_HASH_BYTES);
    size_t d = 0;
    for (size_t k = n_leaves, i = index; k > 1; k = (k + 1) / 2, i >>= 1) {
        if ((i ^ 1) >= k)
            continue; /* promoted */
        if (i & 1)
            ns_merkle_node(cur, path[d], cur);
        else
            ns_merkle_node(cur, cur, path[d]);
        d++;
    }
    return sodium_memcmp(cur, root, NS_HASH_BYTES) == 0 ? NS_OK : NS_ERR_PROOF;
}

int ns_merkle_root_of(ns_hash_t root, const ns_hash_t *leaves, size_t n)
{
    if (n == 0)
        return NS_ERR_INVAL;
    if (n == 1) {
        memcpy(root, leaves[0], NS_HASH_BYTES);
        return NS_OK;
    }
    ns_hash_t *work = malloc(((n + 1) / 2) * sizeof *work);
    if (!work)
        return NS_ERR_NOMEM;
    size_t k = s_level_up(work, leaves, n);
    while (k > 1)
        k = s_level_up(work, work, k);
    memcpy(root, work[0], NS_HASH_BYTES);
    free(work);
    return NS_OK;
}
