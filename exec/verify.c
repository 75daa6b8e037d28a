/* verify.c - output commitments, spot checks and fraud proofs.
 *
 * The Merkle tree of hash.h (odd nodes promoted) has a property this file
 * leans on: the node at level l, index j covers exactly the items
 * [j * 2^l, min((j + 1) * 2^l, n)). So the root of an aligned block of
 * 2^c items is a node of the tree, computable on its own, and the tree
 * above those blocks is again a hash.h tree over the block roots. Large
 * outputs are therefore cut into aligned blocks hashed by a few threads;
 * a thread folds its block in chunks of S_BATCH leaves (one 32 KiB
 * buffer) and keeps the chunk roots on a stack of O(log n) hashes (the
 * partial chunk at the end folds right to left, which gives the promotion
 * rule); the block roots are combined with ns_merkle_root_of. Leaves of
 * small items and inner nodes are hashed eight at a time (s_b2_lanes).
 */
#include "nightshift/verify.h"
#include "nightshift/util.h"

#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_MAX_THREADS 16     /* hashing threads for large outputs */
#define S_PARALLEL_MIN 65536 /* items below this are hashed inline */
#define S_MIN_BLOCK_LOG2 12  /* blocks of at least 4096 items */
#define S_TAG_LEN (sizeof NS_ITEM_TAG - 1)

/* Where each item's bytes live: its slice of every OUT buffer. */
typedef struct {
    uint32_t n_out;                   /* OUT arguments */
    uint32_t arg[NS_MAX_ARGS];        /* their positions */
    uint32_t item_bytes[NS_MAX_ARGS]; /* their slice sizes */
    uint64_t bytes;                   /* one item, all slices */
    uint64_t n_items;
} s_layout_t;

static int s_layout(const ns_job_t *job, s_layout_t *l)
{
    memset(l, 0, sizeof *l);
    for (uint32_t i = 0; i < job->n_args && i < NS_MAX_ARGS; i++) {
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        l->arg[l->n_out] = i;
        l->item_bytes[l->n_out] = job->args[i].item_bytes;
        l->bytes += job->args[i].item_bytes;
        l->n_out++;
    }
    l->n_items = ns_job_items(job);
    if (l->n_out == 0 || l->n_items == 0 || l->bytes == 0 ||
        l->bytes > NS_MAX_ITEM_BYTES)
        return NS_ERR_INVAL;
    return NS_OK;
}

/* Item bytes: in place for one output, gathered into scratch otherwise. */
static const uint8_t *s_item_bytes(const s_layout_t *l, uint8_t *const *outputs,
                                   uint64_t item, uint8_t *scratch)
{
    if (l->n_out == 1)
        return outputs[l->arg[0]] + item * l->item_bytes[0];
    size_t off = 0;
    for (uint32_t o = 0; o < l->n_out; o++) {
        size_t ib = l->item_bytes[o];
        memcpy(scratch + off, outputs[l->arg[o]] + item * ib, ib);
        off += ib;
    }
    return scratch;
}

void ns_item_extract(const ns_job_t *job, uint8_t *const *outputs,
                     uint64_t item, uint8_t *out)
{
    size_t off = 0;
    for (uint32_t i = 0; i < job->n_args && i < NS_MAX_ARGS; i++) {
        if (job->args[i].kind != NS_ARG_OUT)
            continue;
        size_t ib = job->args[i].item_bytes;
        memcpy(out + off, outputs[i] + item * ib, ib);
        off += ib;
    }
}

static void s_be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

void ns_item_leaf(ns_hash_t leaf, const ns_hash_t job_id, uint64_t item,
                  const uint8_t *bytes, size_t len)
{
    /* Prefix: 0x00 || tag || job_id || item (59 bytes); a small item fits
     * the same 128-byte block, so hash it in one call. */
    uint8_t buf[128];
    const size_t pre = 1 + S_TAG_LEN + NS_HASH_BYTES + 8;
    buf[0] = 0x00;
    memcpy(buf + 1, NS_ITEM_TAG, S_TAG_LEN);
    memcpy(buf + 1 + S_TAG_LEN, job_id, NS_HASH_BYTES);
    s_be64(buf + 1 + S_TAG_LEN + NS_HASH_BYTES, item);
    if (len <= sizeof buf - pre) {
        if (len)
            memcpy(buf + pre, bytes, len);
        crypto_generichash(leaf, NS_HASH_BYTES, buf, pre + len, NULL, 0);
        return;
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, buf, pre);
    crypto_generichash_update(&st, bytes, len);
    crypto_generichash_final(&st, leaf, NS_HASH_BYTES);
}

/* ---- batched BLAKE2b ----------------------------------------------------- */

/* Leaves of small items and inner nodes are single-block BLAKE2b-256
 * messages: hash S_LANES of them at once, one message per vector lane
 * (8 x 64-bit: two AVX2 registers, one AVX-512 register), about 5x the
 * throughput of one libsodium call per message. The result is plain
 * BLAKE2b-256 (RFC 7693, no key), as the tests check against libsodium. */
#define S_LANES 8
#define S_BATCH_LOG2 10 /* hashes kept per thread while folding a chunk */
#define S_BATCH (1u << S_BATCH_LOG2)

typedef uint64_t s_v8 __attribute__((vector_size(8 * S_LANES)));

static const uint64_t s_b2_iv[8] = {
    UINT64_C(0x6a09e667f3bcc908), UINT64_C(0xbb67ae8584caa73b),
    UINT64_C(0x3c6ef372fe94f82b), UINT64_C(0xa54ff53a5f1d36f1),
    UINT64_C(0x510e527fade682d1), UINT64_C(0x9b05688c2b3e6c1f),
    UINT64_C(0x1f83d9abfb41bd6b), UINT64_C(0x5be0cd19137e2179)};

static const uint8_t s_b2_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

/* Little-endian words: one load or store on the usual hosts. */
static uint64_t s_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static void s_put_le64(uint8_t *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, sizeof v);
}

#define S_ROTR(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define S_G(a, b, c, d, x, y)                                                  \
    do {                                                                       \
        a = a + b + (x);                                                       \
        d = S_ROTR(d ^ a, 32);                                                 \
        c = c + d;                                                             \
        b = S_ROTR(b ^ c, 24);                                                 \
        a = a + b + (y);                                                       \
        d = S_ROTR(d ^ a, 16);                                                 \
        c = c + d;                                                             \
        b = S_ROTR(b ^ c, 63);                                                 \
    } while (0)

#define S_ROUND(r)                                                             \
    do {                                                                       \
        const uint8_t *z = s_b2_sigma[r];                                      \
        S_G(v[0], v[4], v[8], v[12], m[z[0]], m[z[1]]);                        \
        S_G(v[1], v[5], v[9], v[13], m[z[2]], m[z[3]]);                        \
        S_G(v[2], v[6], v[10], v[14], m[z[4]], m[z[5]]);                       \
        S_G(v[3], v[7], v[11], v[15], m[z[6]], m[z[7]]);                       \
        S_G(v[0], v[5], v[10], v[15], m[z[8]], m[z[9]]);                       \
        S_G(v[1], v[6], v[11], v[12], m[z[10]], m[z[11]]);                     \
        S_G(v[2], v[7], v[8], v[13], m[z[12]], m[z[13]]);                      \
        S_G(v[3], v[4], v[9], v[14], m[z[14]], m[z[15]]);                      \
    } while (0)

/* BLAKE2b-256 of S_LANES single-block messages, given as words:
 * m[w][l] is little-endian word w of message l (zero-padded to 128 bytes),
 * len[l] its length in bytes (<= 128). One function body, compiled for the
 * best vector unit at hand; no vector crosses a call (no ABI concerns). */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
s_b2_lanes(const uint64_t (*m_words)[S_LANES], const uint64_t *len,
           ns_hash_t *out)
{
    s_v8 m[16], v[16], t;
    const s_v8 zero = {0};
    for (int w = 0; w < 16; w++)
        memcpy(&m[w], m_words[w], sizeof m[w]);
    memcpy(&t, len, sizeof t);
    for (int i = 0; i < 8; i++)
        v[i] = v[i + 8] = zero + s_b2_iv[i];
    v[0] ^= UINT64_C(0x01010020); /* 32-byte digest, no key */
    v[12] ^= t;                   /* bytes hashed */
    v[14] = ~v[14];               /* the last block */
    s_v8 h0 = v[0], h1 = v[1], h2 = v[2], h3 = v[3];
    /* rounds written out: constant message indices */
    S_ROUND(0);
    S_ROUND(1);
    S_ROUND(2);
    S_ROUND(3);
    S_ROUND(4);
    S_ROUND(5);
    S_ROUND(6);
    S_ROUND(7);
    S_ROUND(8);
    S_ROUND(9);
    S_ROUND(10);
    S_ROUND(11);
    h0 ^= v[0] ^ v[8];
    h1 ^= v[1] ^ v[9];
    h2 ^= v[2] ^ v[10];
    h3 ^= v[3] ^ v[11];
    uint64_t words[4][S_LANES];
    memcpy(words[0], &h0, sizeof h0);
    memcpy(words[1], &h1, sizeof h1);
    memcpy(words[2], &h2, sizeof h2);
    memcpy(words[3], &h3, sizeof h3);
    for (int l = 0; l < S_LANES; l++)
        for (int w = 0; w < 4; w++)
            s_put_le64(out[l] + 8 * w, words[w][l]);
}

/* Lane l of m from a zero-padded 128-byte block. */
static void s_lane_words(uint64_t (*m)[S_LANES], int l, const uint8_t *block)
{
    for (int w = 0; w < 16; w++)
        m[w][l] = s_le64(block + 8 * w);
}

/* Per-thread room: an item gathered from several outputs, and a batch of
 * hashes being folded. */
typedef struct {
    uint8_t *scratch;  /* layout->bytes, when there are several outputs */
    ns_hash_t *hashes; /* S_BATCH */
} s_work_t;

typedef struct {
    const ns_job_t *job;
    const uint8_t *job_id;
    uint8_t *const *outputs;
    const s_layout_t *layout;
} s_ctx_t;

static int s_work_init(s_work_t *w, const s_ctx_t *c)
{
    w->scratch = NULL;
    w->hashes = malloc(S_BATCH * sizeof *w->hashes);
    if (c->layout->n_out > 1)
        w->scratch = malloc(c->layout->bytes);
    if (!w->hashes || (c->layout->n_out > 1 && !w->scratch)) {
        free(w->hashes);
        free(w->scratch);
        return NS_ERR_NOMEM;
    }
    return NS_OK;
}

static void s_work_release(s_work_t *w)
{
    free(w->hashes);
    free(w->scratch);
}

/* Leaves of items [lo, lo + n) into out[0..n). */
static void s_hash_leaves(const s_ctx_t *c, uint64_t lo, uint64_t n,
                          uint8_t *scratch, ns_hash_t *out)
{
    const size_t pre = 1 + S_TAG_LEN + NS_HASH_BYTES + 8;
    size_t len = c->layout->bytes;
    uint64_t i = 0;
    if (pre + len <= 128) {
        uint8_t block[128];
        uint64_t m[16][S_LANES], lens[S_LANES];
        memset(block, 0, sizeof block);
        memcpy(block + 1, NS_ITEM_TAG, S_TAG_LEN);
        memcpy(block + 1 + S_TAG_LEN, c->job_id, NS_HASH_BYTES);
        for (int l = 0; l < S_LANES; l++)
            lens[l] = pre + len;
        for (; i + S_LANES <= n; i += S_LANES) {
            for (int l = 0; l < S_LANES; l++) {
                uint64_t item = lo + i + (uint64_t)l;
                s_be64(block + pre - 8, item);
                memcpy(block + pre,
                       s_item_bytes(c->layout, c->outputs, item, scratch), len);
                s_lane_words(m, l, block);
            }
            s_b2_lanes((const uint64_t(*)[S_LANES])m, lens, out + i);
        }
    }
    for (; i < n; i++)
        ns_item_leaf(out[i], c->job_id, lo + i,
                     s_item_bytes(c->layout, c->outputs, lo + i, scratch), len);
}

/* One level up: above[i] for i in [first, end) from below[0..n_below);
 * an odd last node is promoted. above may be below (in place) when first
 * is 0: a batch reads its children before it writes. */
static void s_hash_level(const ns_hash_t *below, uint64_t n_below,
                         uint64_t first, uint64_t end, ns_hash_t *above)
{
    uint8_t block[128];
    uint64_t m[16][S_LANES], lens[S_LANES];
    memset(block, 0, sizeof block);
    block[0] = 0x01;
    for (int l = 0; l < S_LANES; l++)
        lens[l] = 1 + 2 * NS_HASH_BYTES;
    uint64_t i = first;
    for (; i + S_LANES <= end && 2 * (i + S_LANES) <= n_below; i += S_LANES) {
        for (int l = 0; l < S_LANES; l++) {
            memcpy(block + 1, below[2 * (i + (uint64_t)l)], 2 * NS_HASH_BYTES);
            s_lane_words(m, l, block);
        }
        s_b2_lanes((const uint64_t(*)[S_LANES])m, lens, above + i);
    }
    for (; i < end; i++) {
        if (2 * i + 1 < n_below)
            ns_merkle_node(above[i], below[2 * i], below[2 * i + 1]);
        else
            memmove(above[i], below[2 * i], NS_HASH_BYTES);
    }
}

/* ---- subtree roots with O(log n) memory ------------------------------- */

/* A stack of subtree roots of decreasing height: push, merge equal
 * heights, fold right to left at the end (which gives the promotion
 * rule for a partial last subtree). */
#define S_PARTIAL 0xff /* height of a partial last subtree: never merged */

typedef struct {
    ns_hash_t h[64];
    uint8_t height[64];
    unsigned n;
} s_stack_t;

static void s_push(s_stack_t *s, const ns_hash_t h, uint8_t height)
{
    memcpy(s->h[s->n], h, NS_HASH_BYTES);
    s->height[s->n] = height;
    s->n++;
    while (s->n >= 2 && s->height[s->n - 1] != S_PARTIAL &&
           s->height[s->n - 1] == s->height[s->n - 2]) {
        ns_merkle_node(s->h[s->n - 2], s->h[s->n - 2], s->h[s->n - 1]);
        s->height[s->n - 2]++;
        s->n--;
    }
}

static void s_fold(s_stack_t *s, ns_hash_t root)
{
    ns_hash_t acc;
    memcpy(acc, s->h[s->n - 1], NS_HASH_BYTES);
    for (unsigned i = s->n - 1; i-- > 0;)
        ns_merkle_node(acc, s->h[i], acc);
    memcpy(root, acc, NS_HASH_BYTES);
}

/* Root of the subtree over items [lo, hi), hi > lo, lo aligned to a power
 * of two at least hi - lo (a node of the tree): chunks of S_BATCH leaves
 * folded in the thread's batch buffer, their roots on a stack. */
static void s_subtree_root(const s_ctx_t *c, uint64_t lo, uint64_t hi,
                           s_work_t *w, ns_hash_t root)
{
    s_stack_t st;
    st.n = 0;
    for (uint64_t at = lo; at < hi; at += S_BATCH) {
        uint64_t n = hi - at < S_BATCH ? hi - at : S_BATCH;
        s_hash_leaves(c, at, n, w->scratch, w->hashes);
        for (uint64_t k = n; k > 1; k = (k + 1) / 2)
            s_hash_level(w->hashes, k, 0, (k + 1) / 2, w->hashes);
        s_push(&st, w->hashes[0], n == S_BATCH ? S_BATCH_LOG2 : S_PARTIAL);
    }
    s_fold(&st, root);
}

/* ---- a tiny parallel for ----------------------------------------------- */

typedef struct s_pool s_pool_t;
typedef void (*s_task_fn)(s_pool_t *p, uint64_t task, s_work_t *w);

struct s_pool {
    s_task_fn fn;
    const s_ctx_t *ctx;
    void *out;               /* task results */
    const uint64_t *level_n; /* tree tasks: nodes per level */
    uint64_t n_tasks;
    uint64_t lo, hi;           /* item range */
    unsigned block_log2;       /* items per task, log2 */
    atomic_uint_fast64_t next; /* next task to take */
};

static void *s_worker(void *arg)
{
    s_pool_t *p = arg;
    s_work_t w;
    if (s_work_init(&w, p->ctx) != NS_OK)
        return NULL; /* the other threads take its share */
    for (;;) {
        uint64_t t = atomic_fetch_add(&p->next, 1);
        if (t >= p->n_tasks)
            break;
        p->fn(p, t, &w);
    }
    s_work_release(&w);
    return NULL;
}

static unsigned s_threads(uint64_t n_tasks)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned t = cpus > 0 ? (unsigned)cpus : 1;
    if (t > S_MAX_THREADS)
        t = S_MAX_THREADS;
    if (t > n_tasks)
        t = (unsigned)n_tasks;
    return t ? t : 1;
}

/* Run every task; the calling thread works too. A thread that cannot be
 * started only costs parallelism. If a worker fails to get its memory,
 * the others still finish every task; only when none could is it an
 * error. */
static int s_pool_run(s_pool_t *p)
{
    pthread_t tid[S_MAX_THREADS];
    unsigned started = 0, want = s_threads(p->n_tasks);
    atomic_init(&p->next, 0);
    for (unsigned i = 1; i < want; i++) {
        if (pthread_create(&tid[started], NULL, s_worker, p) != 0)
            break;
        started++;
    }
    s_worker(p);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    return atomic_load(&p->next) >= p->n_tasks ? NS_OK : NS_ERR_NOMEM;
}

/* Block size (log2) for n items: enough blocks to keep every thread busy,
 * no fewer than 2^S_MIN_BLOCK_LOG2 items each. */
static unsigned s_block_log2(uint64_t n)
{
    uint64_t target = n / (S_MAX_THREADS * 8);
    unsigned c = S_MIN_BLOCK_LOG2;
    while (c < 62 && (UINT64_C(1) << c) < target)
        c++;
    return c;
}

/* Block t of the pool's range: [lo + t 2^b, min(lo + (t + 1) 2^b, hi)). */
static void s_block(const s_pool_t *p, uint64_t t, uint64_t *lo, uint64_t *hi)
{
    uint64_t size = UINT64_C(1) << p->block_log2;
    *lo = p->lo + (t << p->block_log2);
    *hi = p->hi - *lo > size ? *lo + size : p->hi;
}

static void s_root_task(s_pool_t *p, uint64_t t, s_work_t *w)
{
    uint64_t lo, hi;
    s_block(p, t, &lo, &hi);
    s_subtree_root(p->ctx, lo, hi, w, ((ns_hash_t *)p->out)[t]);
}

/* Root of the items [lo, hi), a node of the tree: lo is a multiple of a
 * power of two >= hi - lo. Small ranges inline, large ones as aligned
 * blocks in parallel (a block size below that power divides lo). */
static int s_range_root(const s_ctx_t *c, uint64_t lo, uint64_t hi,
                        ns_hash_t root)
{
    uint64_t n = hi - lo;
    if (n < S_PARALLEL_MIN || s_threads(2) < 2) {
        s_work_t w;
        if (s_work_init(&w, c) != NS_OK)
            return NS_ERR_NOMEM;
        s_subtree_root(c, lo, hi, &w, root);
        s_work_release(&w);
        return NS_OK;
    }
    unsigned b = s_block_log2(n);
    uint64_t n_blocks = ((n - 1) >> b) + 1;
    ns_hash_t *blocks = malloc(n_blocks * sizeof *blocks);
    if (!blocks)
        return NS_ERR_NOMEM;
    s_pool_t p = {.fn = s_root_task,
                  .ctx = c,
                  .out = blocks,
                  .n_tasks = n_blocks,
                  .lo = lo,
                  .hi = hi,
                  .block_log2 = b};
    int rc = s_pool_run(&p);
    if (rc == NS_OK)
        rc = ns_merkle_root_of(root, (const ns_hash_t *)blocks, n_blocks);
    free(blocks);
    return rc;
}

int ns_commit_root(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, ns_hash_t root)
{
    s_layout_t l;
    int rc = s_layout(job, &l);
    if (rc != NS_OK)
        return rc;
    s_ctx_t c = {job, job_id, outputs, &l};
    return s_range_root(&c, 0, l.n_items, root);
}

/* ---- the whole tree, in place ------------------------------------------ */

/* Block t: its leaves, then its part of every level up to its root. */
static void s_tree_task(s_pool_t *p, uint64_t t, s_work_t *w)
{
    ns_merkle_t *tree = p->out;
    uint64_t lo, hi;
    s_block(p, t, &lo, &hi);
    s_hash_leaves(p->ctx, lo, hi - lo, w->scratch, tree->nodes + lo);
    for (size_t l = 1; l <= p->block_log2 && l < tree->n_levels; l++) {
        uint64_t first = t << (p->block_log2 - l);
        uint64_t end = (t + 1) << (p->block_log2 - l);
        if (end > p->level_n[l])
            end = p->level_n[l];
        s_hash_level(tree->nodes + tree->level_off[l - 1], p->level_n[l - 1],
                     first, end, tree->nodes + tree->level_off[l]);
    }
}

int ns_commit_outputs(const ns_job_t *job, const ns_hash_t job_id,
                      uint8_t *const *outputs, ns_merkle_t *tree)
{
    s_layout_t l;
    uint64_t level_n[NS_MERKLE_MAX_DEPTH + 2];
    memset(tree, 0, sizeof *tree);
    int rc = s_layout(job, &l);
    if (rc != NS_OK)
        return rc;
    uint64_t n = l.n_items, total = 0;
    size_t levels = 0;
    for (uint64_t k = n;; k = (k + 1) / 2) {
        if (levels == NS_MERKLE_MAX_DEPTH + 1)
            return NS_ERR_TOOBIG;
        level_n[levels++] = k;
        total += k;
        if (k == 1)
            break;
    }
    if (total > SIZE_MAX / NS_HASH_BYTES)
        return NS_ERR_TOOBIG;
    tree->nodes = malloc((size_t)total * NS_HASH_BYTES);
    tree->level_off = malloc(levels * sizeof *tree->level_off);
    if (!tree->nodes || !tree->level_off) {
        ns_merkle_release(tree);
        return NS_ERR_NOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < levels; i++) {
        tree->level_off[i] = off;
        off += level_n[i];
    }
    tree->n_leaves = n;
    tree->n_levels = levels;

    unsigned b = 0;
    if (n < S_PARALLEL_MIN)
        while ((UINT64_C(1) << b) < n)
            b++; /* one block */
    else
        b = s_block_log2(n);
    s_ctx_t c = {job, job_id, outputs, &l};
    s_pool_t p = {.fn = s_tree_task,
                  .ctx = &c,
                  .out = tree,
                  .level_n = level_n,
                  .n_tasks = ((n - 1) >> b) + 1,
                  .lo = 0,
                  .hi = n,
                  .block_log2 = b};
    rc = s_pool_run(&p);
    if (rc != NS_OK) {
        ns_merkle_release(tree);
        return rc;
    }
    for (size_t lv = (size_t)b + 1; lv < levels; lv++)
        s_hash_level(tree->nodes + tree->level_off[lv - 1], level_n[lv - 1], 0,
                     level_n[lv], tree->nodes + tree->level_off[lv]);
    return NS_OK;
}

int ns_commit_path(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, uint64_t item, ns_hash_t *path,
                   size_t *depth)
{
    s_layout_t l;
    *depth = 0;
    int rc = s_layout(job, &l);
    if (rc != NS_OK)
        return rc;
    if (item >= l.n_items)
        return NS_ERR_INVAL;
    s_ctx_t c = {job, job_id, outputs, &l};
    size_t d = 0;
    /* Level lv: this item's node is item >> lv; its sibling covers the
     * items [sib << lv, min((sib + 1) << lv, n)). */
    unsigned lv = 0;
    for (uint64_t k = l.n_items; k > 1; k = (k + 1) / 2, lv++) {
        uint64_t sib = (item >> lv) ^ 1;
        if (sib >= k)
            continue; /* promoted */
        uint64_t lo = sib << lv;
        uint64_t hi = l.n_items - lo > (UINT64_C(1) << lv)
                          ? lo + (UINT64_C(1) << lv)
                          : l.n_items;
        rc = s_range_root(&c, lo, hi, path[d++]);
        if (rc != NS_OK)
            return rc;
    }
    *depth = d;
    return NS_OK;
}

/* ---- result statement ------------------------------------------------- */

static void s_statement(uint8_t msg[NS_RESULT_MSG_BYTES],
                        const ns_hash_t job_id, const ns_hash_t root,
                        uint64_t n_items)
{
    const size_t tag = sizeof NS_RESULT_TAG - 1;
    memcpy(msg, NS_RESULT_TAG, tag);
    memcpy(msg + tag, job_id, NS_HASH_BYTES);
    memcpy(msg + tag + NS_HASH_BYTES, root, NS_HASH_BYTES);
    s_be64(msg + tag + 2 * NS_HASH_BYTES, n_items);
}

void ns_result_sign(const ns_identity_t *provider, const ns_hash_t job_id,
                    const ns_hash_t root, uint64_t n_items,
                    uint8_t sig[NS_SIG_BYTES])
{
    uint8_t msg[NS_RESULT_MSG_BYTES];
    s_statement(msg, job_id, root, n_items);
    ns_identity_sign(provider, msg, sizeof msg, sig);
}

int ns_result_verify(const uint8_t provider[NS_ID_BYTES],
                     const ns_hash_t job_id, const ns_hash_t root,
                     uint64_t n_items, const uint8_t sig[NS_SIG_BYTES])
{
    uint8_t msg[NS_RESULT_MSG_BYTES];
    s_statement(msg, job_id, root, n_items);
    return ns_sig_verify(provider, msg, sizeof msg, sig) == NS_OK ? NS_OK
                                                                  : NS_ERR_SIG;
}

/* ---- challenge draw ---------------------------------------------------- */

typedef struct {
    uint8_t key[NS_HASH_BYTES];
    uint64_t counter; /* next block */
    uint64_t words[8];
    unsigned used; /* words consumed from the current block */
} s_drbg_t;

static uint64_t s_drbg_next(s_drbg_t *g)
{
    if (g->used == 8) {
        uint8_t ctr[8], block[64];
        s_be64(ctr, g->counter++);
        crypto_generichash(block, sizeof block, ctr, sizeof ctr, g->key,
                           sizeof g->key);
        for (unsigned i = 0; i < 8; i++) {
            uint64_t w = 0;
            for (int b = 7; b >= 0; b--)
                w = (w << 8) | block[8 * i + (unsigned)b];
            g->words[i] = w;
        }
        g->used = 0;
    }
    return g->words[g->used++];
}

/* Uniform below m (m >= 1) by rejection. */
static uint64_t s_uniform(s_drbg_t *g, uint64_t m)
{
    uint64_t threshold = (0 - m) % m; /* 2^64 mod m */
    for (;;) {
        uint64_t w = s_drbg_next(g);
        if (w >= threshold)
            return w % m;
    }
}

/* Index of the first element >= v in sorted a[0..n). */
static size_t s_lower_bound(const uint64_t *a, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ns_challenge_draw(const ns_hash_t root, const uint8_t secret[32],
                       uint64_t n_items, uint32_t k, uint64_t *items)
{
    if (k >= n_items) {
        for (uint64_t i = 0; i < n_items; i++)
            items[i] = i;
        return;
    }
    s_drbg_t g;
    ns_hash2(g.key, root, NS_HASH_BYTES, secret, 32);
    g.counter = 0;
    g.used = 8;
    size_t have = 0;
    for (uint64_t j = n_items - k; j < n_items; j++) {
        uint64_t t = s_uniform(&g, j + 1);
        size_t pos = s_lower_bound(items, have, t);
        if (pos < have && items[pos] == t) {
            items[have++] = j; /* j exceeds everything taken so far */
            continue;
        }
        memmove(items + pos + 1, items + pos, (have - pos) * sizeof *items);
        items[pos] = t;
        have++;
    }
    sodium_memzero(&g, sizeof g);
}

/* ---- comparisons ------------------------------------------------------- */

static float s_f32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Position on the line of floats: -0.0 and +0.0 are both 0. */
static int64_t s_ordinal(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    int64_t mag = (int64_t)(u & 0x7fffffffu);
    return (u & 0x80000000u) ? -mag : mag;
}

static bool s_float_matches(uint8_t det, double tol, float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    switch (det) {
    case NS_DET_ULP: {
        int64_t d = s_ordinal(a) - s_ordinal(b);
        if (d < 0)
            d = -d;
        return (double)d <= tol;
    }
    case NS_DET_ABS:
        return fabs((double)a - (double)b) <= tol;
    case NS_DET_REL: {
        double fa = fabs((double)a), fb = fabs((double)b);
        return fabs((double)a - (double)b) <= tol * (fa > fb ? fa : fb);
    }
    default:
        return false;
    }
}

bool ns_item_matches(const ns_job_t *job, const uint8_t *expected,
                     const uint8_t *claimed, size_t len)
{
    if (job->det == NS_DET_EXACT)
        return memcmp(expected, claimed, len) == 0;
    if (job->det != NS_DET_ULP && job->det != NS_DET_ABS &&
        job->det != NS_DET_REL)
        return false;
    size_t whole = len - len % 4;
    for (size_t i = 0; i < whole; i += 4)
        if (!s_float_matches(job->det, job->tol, s_f32(expected + i),
                             s_f32(claimed + i)))
            return false;
    return memcmp(expected + whole, claimed + whole, len - whole) == 0;
}

/* ---- spot check -------------------------------------------------------- */

int ns_spot_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                  const ns_input_t *inputs, uint8_t *const *outputs,
                  const ns_hash_t root, const uint8_t secret[32], uint32_t k,
                  ns_check_result_t *res, char *err, size_t errlen)
{
    uint64_t t0 = ns_mono_us();
    uint64_t *items = NULL;
    uint8_t *redo = NULL, *claim = NULL;
    ns_hash_t got;
    s_layout_t l;
    memset(res, 0, sizeof *res);
    if (err && errlen)
        err[0] = '\0';

    int rc = s_layout(job, &l);
    if (rc != NS_OK) {
        snprintf(err, errlen, "job has no items or no outputs");
        goto out;
    }
    if (k > NS_MAX_CHECKS) {
        snprintf(err, errlen, "%u checks: at most %d", k, NS_MAX_CHECKS);
        rc = NS_ERR_TOOBIG;
        goto out;
    }
    rc = ns_commit_root(job, job_id, outputs, got);
    res->commit_us = ns_mono_us() - t0;
    if (rc != NS_OK) {
        snprintf(err, errlen, "recomputing the root: %s", ns_strerror(rc));
        goto out;
    }
    if (sodium_memcmp(got, root, NS_HASH_BYTES) != 0) {
        snprintf(err, errlen, "outputs do not match the committed root");
        rc = NS_ERR_PROOF;
        goto out;
    }
    uint32_t n = k;
    if ((uint64_t)n > l.n_items)
        n = (uint32_t)l.n_items;
    if (n == 0)
        goto out;
    items = malloc((size_t)n * sizeof *items);
    redo = malloc((size_t)n * l.bytes);
    claim = malloc(l.bytes);
    if (!items || !redo || !claim) {
        rc = NS_ERR_NOMEM;
        snprintf(err, errlen, "out of memory for %u checks", n);
        goto out;
    }
    ns_challenge_draw(root, secret, l.n_items, n, items);
    ns_timings_t t;
    uint64_t t1 = ns_mono_us();
    rc = ns_runner_run_items(r, job, inputs, items, n, redo, &t, err, errlen);
    res->rerun_us = ns_mono_us() - t1;
    if (rc != NS_OK)
        goto out;
    res->checked = n;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *c = s_item_bytes(&l, outputs, items[i], claim);
        if (ns_item_matches(job, redo + (size_t)i * l.bytes, c, l.bytes))
            continue;
        if (res->mismatched++ == 0)
            res->first_bad = items[i];
    }
    if (res->mismatched)
        snprintf(err, errlen, "%u of %u items do not match (first: %llu)",
                 res->mismatched, n, (unsigned long long)res->first_bad);
out:
    res->verify_us = ns_mono_us() - t0;
    free(items);
    free(redo);
    free(claim);
    return rc;
}

/* ---- fraud proofs ------------------------------------------------------ */

void ns_fraud_release(ns_fraud_proof_t *p)
{
    if (!p)
        return;
    ns_job_release(&p->job);
    free(p->claimed);
    memset(p, 0, sizeof *p);
}

/* Deep copy of a descriptor. */
static int s_job_copy(ns_job_t *dst, const ns_job_t *src)
{
    *dst = *src;
    dst->source = NULL;
    dst->source_len = 0;
    if (!src->source)
        return NS_OK;
    int rc = ns_job_set_source(dst, src->source, src->source_len);
    if (rc != NS_OK)
        return rc;
    /* whatever set_source derives, keep the descriptor as it was */
    memcpy(dst->source_hash, src->source_hash, NS_HASH_BYTES);
    return NS_OK;
}

/* The root a proof's claim and path lead to (hash.h's verify walk): no
 * second pass over the outputs. */
static void s_root_from_path(ns_fraud_proof_t *p, uint64_t n)
{
    ns_hash_t cur;
    size_t d = 0;
    ns_item_leaf(cur, p->job_id, p->item, p->claimed, p->claimed_len);
    for (uint64_t k = n, i = p->item; k > 1; k = (k + 1) / 2, i >>= 1) {
        if ((i ^ 1) >= k)
            continue; /* promoted */
        if (i & 1)
            ns_merkle_node(cur, p->path[d], cur);
        else
            ns_merkle_node(cur, cur, p->path[d]);
        d++;
    }
    memcpy(p->root, cur, NS_HASH_BYTES);
}

int ns_fraud_build(ns_fraud_proof_t *p, const ns_job_t *job,
                   const ns_hash_t job_id, const uint8_t provider[NS_ID_BYTES],
                   const uint8_t sig[NS_SIG_BYTES], const ns_merkle_t *tree,
                   uint8_t *const *outputs, uint64_t item)
{
    s_layout_t l;
    ns_hash_t id;
    memset(p, 0, sizeof *p);
    ns_job_init(&p->job);
    int rc = s_layout(job, &l);
    if (rc != NS_OK || item >= l.n_items ||
        (tree && tree->n_leaves != l.n_items)) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    rc = ns_job_id(job, id);
    if (rc != NS_OK)
        goto out;
    if (memcmp(id, job_id, NS_HASH_BYTES) != 0) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    rc = s_job_copy(&p->job, job);
    if (rc != NS_OK)
        goto out;
    memcpy(p->job_id, job_id, NS_HASH_BYTES);
    memcpy(p->provider, provider, NS_ID_BYTES);
    memcpy(p->sig, sig, NS_SIG_BYTES);
    p->n_items = l.n_items;
    p->item = item;
    p->claimed_len = l.bytes;
    p->claimed = malloc(l.bytes);
    if (!p->claimed) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    ns_item_extract(job, outputs, item, p->claimed);
    if (tree) {
        rc = ns_merkle_proof(tree, item, p->path, &p->depth);
        if (rc == NS_OK)
            ns_merkle_root(tree, p->root);
    } else {
        rc = ns_commit_path(job, job_id, outputs, item, p->path, &p->depth);
        if (rc == NS_OK)
            s_root_from_path(p, l.n_items);
    }
out:
    if (rc != NS_OK)
        ns_fraud_release(p);
    return rc;
}

void ns_fraud_pack(msgpack_packer *pk, const ns_fraud_proof_t *p)
{
    msgpack_pack_array(pk, 9);
    msgpack_pack_uint8(pk, NS_FRAUD_VERSION);
    ns_job_pack(pk, &p->job);
    ns_mp_bin(pk, p->provider, NS_ID_BYTES);
    ns_mp_bin(pk, p->root, NS_HASH_BYTES);
    msgpack_pack_uint64(pk, p->n_items);
    ns_mp_bin(pk, p->sig, NS_SIG_BYTES);
    msgpack_pack_uint64(pk, p->item);
    ns_mp_bin(pk, p->claimed, p->claimed_len);
    msgpack_pack_array(pk, (uint32_t)p->depth);
    for (size_t i = 0; i < p->depth; i++)
        ns_mp_bin(pk, p->path[i], NS_HASH_BYTES);
}

int ns_fraud_read(ns_mpr_t *r, ns_fraud_proof_t *p, char *err, size_t errlen)
{
    uint64_t version = 0;
    uint32_t depth = 0;
    const uint8_t *claimed = NULL;
    size_t claimed_len = 0;
    int rc;
    memset(p, 0, sizeof *p);
    ns_job_init(&p->job);
    if (err && errlen)
        err[0] = '\0';

    ns_mpr_array_exact(r, 9);
    ns_mpr_uint(r, &version);
    if (r->err == NS_OK && version != NS_FRAUD_VERSION) {
        snprintf(err, errlen, "fraud proof version %llu unknown",
                 (unsigned long long)version);
        r->err = NS_ERR_VERSION;
        goto out;
    }
    if (r->err != NS_OK)
        goto bad;
    rc = ns_job_read(r, &p->job, err, errlen);
    if (rc != NS_OK) {
        if (r->err == NS_OK)
            r->err = rc;
        goto out; /* err names the descriptor field */
    }
    ns_mpr_bin_exact(r, p->provider, NS_ID_BYTES);
    ns_mpr_bin_exact(r, p->root, NS_HASH_BYTES);
    ns_mpr_uint(r, &p->n_items);
    ns_mpr_bin_exact(r, p->sig, NS_SIG_BYTES);
    ns_mpr_uint(r, &p->item);
    ns_mpr_bin(r, &claimed, &claimed_len, NS_MAX_ITEM_BYTES);
    ns_mpr_array(r, &depth, NS_MERKLE_MAX_DEPTH);
    for (uint32_t i = 0; i < depth && r->err == NS_OK; i++)
        ns_mpr_bin_exact(r, p->path[i], NS_HASH_BYTES);
    if (r->err != NS_OK)
        goto bad;
    p->depth = depth;

    /* the shape must fit the descriptor */
    if (p->n_items != ns_job_items(&p->job) || p->item >= p->n_items ||
        claimed_len != ns_job_item_bytes(&p->job) ||
        p->depth != ns_merkle_proof_len(p->n_items, p->item)) {
        snprintf(err, errlen,
                 "fraud proof shape: item %llu of %llu, %zu bytes, depth %zu "
                 "do not fit the job",
                 (unsigned long long)p->item, (unsigned long long)p->n_items,
                 claimed_len, p->depth);
        r->err = NS_ERR_INVAL;
        goto out;
    }
    rc = ns_job_id(&p->job, p->job_id);
    if (rc != NS_OK) {
        snprintf(err, errlen, "fraud proof: job id: %s", ns_strerror(rc));
        r->err = rc;
        goto out;
    }
    p->claimed = malloc(claimed_len ? claimed_len : 1);
    if (!p->claimed) {
        r->err = NS_ERR_NOMEM;
        goto out;
    }
    memcpy(p->claimed, claimed, claimed_len);
    p->claimed_len = claimed_len;
    return NS_OK;
bad:
    snprintf(err, errlen, "malformed fraud proof: %s", ns_strerror(r->err));
out:
    ns_fraud_release(p);
    return r->err != NS_OK ? r->err : NS_ERR_INVAL;
}

int ns_fraud_check(ns_runner_t *r, const ns_fraud_proof_t *p,
                   const ns_input_t *inputs, char *err, size_t errlen)
{
    ns_hash_t id, leaf;
    uint8_t *redo = NULL;
    if (err && errlen)
        err[0] = '\0';
    int rc = ns_job_validate(&p->job, err, errlen);
    if (rc != NS_OK) {
        rc = NS_ERR_PROOF;
        goto out;
    }
    rc = ns_job_id(&p->job, id);
    if (rc != NS_OK) {
        snprintf(err, errlen, "job id: %s", ns_strerror(rc));
        goto out;
    }
    if (memcmp(id, p->job_id, NS_HASH_BYTES) != 0) {
        snprintf(err, errlen, "job id does not match the descriptor");
        rc = NS_ERR_PROOF;
        goto out;
    }
    if (p->n_items != ns_job_items(&p->job) || p->item >= p->n_items ||
        !p->claimed || p->claimed_len != ns_job_item_bytes(&p->job) ||
        p->depth > NS_MERKLE_MAX_DEPTH) {
        snprintf(err, errlen, "item, count or size do not fit the job");
        rc = NS_ERR_PROOF;
        goto out;
    }
    if (ns_result_verify(p->provider, p->job_id, p->root, p->n_items, p->sig) !=
        NS_OK) {
        snprintf(err, errlen, "result signature does not verify");
        rc = NS_ERR_PROOF;
        goto out;
    }
    ns_item_leaf(leaf, p->job_id, p->item, p->claimed, p->claimed_len);
    if (ns_merkle_verify(p->root, leaf, p->item, p->n_items, p->path,
                         p->depth) != NS_OK) {
        snprintf(err, errlen, "claimed bytes are not item %llu of the root",
                 (unsigned long long)p->item);
        rc = NS_ERR_PROOF;
        goto out;
    }
    redo = malloc(p->claimed_len);
    if (!redo) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    ns_timings_t t;
    rc = ns_runner_run_items(r, &p->job, inputs, &p->item, 1, redo, &t, err,
                             errlen);
    if (rc != NS_OK)
        goto out;
    if (ns_item_matches(&p->job, redo, p->claimed, p->claimed_len)) {
        snprintf(err, errlen, "item %llu is correct: no fraud",
                 (unsigned long long)p->item);
        rc = NS_ERR_PROOF;
        goto out;
    }
    snprintf(err, errlen, "item %llu does not match its re-run: fraud",
             (unsigned long long)p->item);
out:
    free(redo);
    return rc;
}
