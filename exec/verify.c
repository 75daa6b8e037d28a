/* verify.c - output commitments, spot checks and fraud proofs.
 *
 * Commitment: the OUT buffers are cut into NS_COMMIT_CHUNK-byte chunks,
 * one leaf each, hashed by a few threads straight from the buffers (one
 * bandwidth-bound pass, no copy); the leaves (32 bytes per 16 KiB) make a
 * hash.h tree.
 * Spot check and fraud proofs rest on write sets: a re-run of units on
 * buffers holding the claim changes exactly the bytes that those units
 * write with a value other than the claim; a unit re-run alone on two
 * fills (0x00, 0xFF) writes a byte iff the byte is equal after both runs.
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
#include <sys/mman.h>
#include <unistd.h>

#define S_MAX_THREADS 16  /* hashing threads for large outputs */
#define S_PARALLEL_MIN 64 /* leaves (1 MiB) below this: one thread */
#define S_TASK_LEAVES 32  /* leaves a thread takes at a time */
#define S_TAG_LEN (sizeof NS_CHUNK_TAG - 1)
#define S_PREFIX (1 + S_TAG_LEN + NS_HASH_BYTES + 4 + 8) /* 64 bytes */
/* Compared bytes of file-backed outputs dropped from memory at a time. */
#define S_DROP_BYTES (4u << 20)

static void s_be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* ---- layout: which leaves cover which bytes ---------------------------- */

typedef struct {
    uint32_t n_out;                  /* OUT arguments */
    uint32_t arg[NS_MAX_ARGS];       /* their positions */
    uint64_t first[NS_MAX_ARGS + 1]; /* first leaf of each; first[n_out] =
                                        number of leaves */
    uint64_t n_units;
} s_layout_t;

static uint64_t s_chunks(uint64_t size)
{
    return (size + NS_COMMIT_CHUNK - 1) / NS_COMMIT_CHUNK;
}

static int s_layout(const ns_job_t *job, s_layout_t *l)
{
    memset(l, 0, sizeof *l);
    for (uint32_t i = 0; i < job->n_args && i < NS_MAX_ARGS; i++) {
        if (job->args[i].kind != NS_ARG_OUT || job->args[i].size == 0)
            continue;
        l->arg[l->n_out] = i;
        l->first[l->n_out + 1] =
            l->first[l->n_out] + s_chunks(job->args[i].size);
        l->n_out++;
    }
    l->n_units = ns_job_units(job);
    if (l->n_out == 0 || l->n_units == 0)
        return NS_ERR_INVAL;
    return NS_OK;
}

uint64_t ns_commit_leaves(const ns_job_t *job)
{
    s_layout_t l;
    return s_layout(job, &l) == NS_OK ? l.first[l.n_out] : 0;
}

int ns_commit_leaf_index(const ns_job_t *job, uint32_t arg, uint64_t pos,
                         uint64_t *leaf)
{
    s_layout_t l;
    if (s_layout(job, &l) != NS_OK)
        return NS_ERR_INVAL;
    for (uint32_t o = 0; o < l.n_out; o++)
        if (l.arg[o] == arg) {
            if (pos >= job->args[arg].size)
                return NS_ERR_INVAL;
            *leaf = l.first[o] + pos / NS_COMMIT_CHUNK;
            return NS_OK;
        }
    return NS_ERR_INVAL;
}

void ns_chunk_leaf(ns_hash_t leaf, const ns_hash_t job_id, uint32_t arg,
                   uint64_t chunk, const uint8_t *bytes, size_t len)
{
    uint8_t pre[S_PREFIX];
    crypto_generichash_state st;
    pre[0] = 0x00;
    memcpy(pre + 1, NS_CHUNK_TAG, S_TAG_LEN);
    memcpy(pre + 1 + S_TAG_LEN, job_id, NS_HASH_BYTES);
    pre[1 + S_TAG_LEN + NS_HASH_BYTES] = (uint8_t)(arg >> 24);
    pre[2 + S_TAG_LEN + NS_HASH_BYTES] = (uint8_t)(arg >> 16);
    pre[3 + S_TAG_LEN + NS_HASH_BYTES] = (uint8_t)(arg >> 8);
    pre[4 + S_TAG_LEN + NS_HASH_BYTES] = (uint8_t)arg;
    s_be64(pre + 5 + S_TAG_LEN + NS_HASH_BYTES, chunk);
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, pre, sizeof pre);
    crypto_generichash_update(&st, bytes, len);
    crypto_generichash_final(&st, leaf, NS_HASH_BYTES);
}

/* ---- leaves, in parallel ------------------------------------------------ */

typedef struct {
    const ns_job_t *job;
    const uint8_t *job_id;
    uint8_t *const *outputs;
    const s_layout_t *l;
    ns_hash_t *leaves;
    uint64_t n_leaves;
    atomic_uint_fast64_t next; /* next leaf to take */
} s_pool_t;

static void s_leaf_at(const s_pool_t *p, uint64_t i, uint32_t *o)
{
    while (i >= p->l->first[*o + 1])
        (*o)++;
    uint32_t arg = p->l->arg[*o];
    uint64_t chunk = i - p->l->first[*o];
    uint64_t off = chunk * NS_COMMIT_CHUNK;
    uint64_t size = p->job->args[arg].size;
    size_t len =
        size - off < NS_COMMIT_CHUNK ? (size_t)(size - off) : NS_COMMIT_CHUNK;
    ns_chunk_leaf(p->leaves[i], p->job_id, arg, chunk, p->outputs[arg] + off,
                  len);
}

static void *s_worker(void *arg)
{
    s_pool_t *p = arg;
    for (;;) {
        uint64_t lo = atomic_fetch_add(&p->next, S_TASK_LEAVES);
        if (lo >= p->n_leaves)
            break;
        uint64_t hi =
            p->n_leaves - lo > S_TASK_LEAVES ? lo + S_TASK_LEAVES : p->n_leaves;
        uint32_t o = 0;
        for (uint64_t i = lo; i < hi; i++)
            s_leaf_at(p, i, &o);
    }
    return NULL;
}

static unsigned s_threads(uint64_t n_leaves)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned t = cpus > 0 ? (unsigned)cpus : 1;
    uint64_t tasks = (n_leaves + S_TASK_LEAVES - 1) / S_TASK_LEAVES;
    if (t > S_MAX_THREADS)
        t = S_MAX_THREADS;
    if (n_leaves < S_PARALLEL_MIN)
        t = 1;
    if (t > tasks)
        t = (unsigned)tasks;
    return t ? t : 1;
}

/* Every leaf, malloc'd into *out (*n of them). The calling thread works
 * too; a thread that cannot be started only costs parallelism. */
static int s_leaves(const ns_job_t *job, const ns_hash_t job_id,
                    uint8_t *const *outputs, ns_hash_t **out, uint64_t *n)
{
    s_layout_t l;
    pthread_t tid[S_MAX_THREADS];
    *out = NULL;
    *n = 0;
    int rc = s_layout(job, &l);
    if (rc != NS_OK)
        return rc;
    uint64_t n_leaves = l.first[l.n_out];
    ns_hash_t *leaves = malloc((size_t)n_leaves * sizeof *leaves);
    if (!leaves)
        return NS_ERR_NOMEM;
    s_pool_t p = {.job = job,
                  .job_id = job_id,
                  .outputs = outputs,
                  .l = &l,
                  .leaves = leaves,
                  .n_leaves = n_leaves};
    atomic_init(&p.next, 0);
    unsigned started = 0, want = s_threads(n_leaves);
    for (unsigned i = 1; i < want; i++) {
        if (pthread_create(&tid[started], NULL, s_worker, &p) != 0)
            break;
        started++;
    }
    s_worker(&p);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    *out = leaves;
    *n = n_leaves;
    return NS_OK;
}

int ns_commit_root(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, ns_hash_t root)
{
    ns_hash_t *leaves;
    uint64_t n;
    int rc = s_leaves(job, job_id, outputs, &leaves, &n);
    if (rc != NS_OK)
        return rc;
    rc = ns_merkle_root_of(root, (const ns_hash_t *)leaves, (size_t)n);
    free(leaves);
    return rc;
}

int ns_commit_outputs(const ns_job_t *job, const ns_hash_t job_id,
                      uint8_t *const *outputs, ns_merkle_t *tree)
{
    ns_hash_t *leaves;
    uint64_t n;
    memset(tree, 0, sizeof *tree);
    int rc = s_leaves(job, job_id, outputs, &leaves, &n);
    if (rc != NS_OK)
        return rc;
    rc = ns_merkle_build(tree, (const ns_hash_t *)leaves, (size_t)n);
    free(leaves);
    return rc;
}

int ns_commit_path(const ns_job_t *job, const ns_hash_t job_id,
                   uint8_t *const *outputs, uint64_t leaf, ns_hash_t *path,
                   size_t *depth)
{
    ns_merkle_t tree;
    *depth = 0;
    if (leaf >= ns_commit_leaves(job))
        return NS_ERR_INVAL;
    int rc = ns_commit_outputs(job, job_id, outputs, &tree);
    if (rc != NS_OK)
        return rc;
    rc = ns_merkle_proof(&tree, (size_t)leaf, path, depth);
    ns_merkle_release(&tree);
    return rc;
}

/* ---- result statement ------------------------------------------------- */

static void s_statement(uint8_t msg[NS_RESULT_MSG_BYTES],
                        const ns_hash_t job_id, const ns_hash_t root,
                        uint64_t n_units)
{
    const size_t tag = sizeof NS_RESULT_TAG - 1;
    memcpy(msg, NS_RESULT_TAG, tag);
    memcpy(msg + tag, job_id, NS_HASH_BYTES);
    memcpy(msg + tag + NS_HASH_BYTES, root, NS_HASH_BYTES);
    s_be64(msg + tag + 2 * NS_HASH_BYTES, n_units);
}

void ns_result_sign(const ns_identity_t *provider, const ns_hash_t job_id,
                    const ns_hash_t root, uint64_t n_units,
                    uint8_t sig[NS_SIG_BYTES])
{
    uint8_t msg[NS_RESULT_MSG_BYTES];
    s_statement(msg, job_id, root, n_units);
    ns_identity_sign(provider, msg, sizeof msg, sig);
}

int ns_result_verify(const uint8_t provider[NS_ID_BYTES],
                     const ns_hash_t job_id, const ns_hash_t root,
                     uint64_t n_units, const uint8_t sig[NS_SIG_BYTES])
{
    uint8_t msg[NS_RESULT_MSG_BYTES];
    s_statement(msg, job_id, root, n_units);
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
                       uint64_t n_units, uint32_t k, uint64_t *items)
{
    if (k >= n_units) {
        for (uint64_t i = 0; i < n_units; i++)
            items[i] = i;
        return;
    }
    s_drbg_t g;
    ns_hash2(g.key, root, NS_HASH_BYTES, secret, 32);
    g.counter = 0;
    g.used = 8;
    size_t have = 0;
    for (uint64_t j = n_units - k; j < n_units; j++) {
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

/* ---- write sets -------------------------------------------------------- */

/* Full-size copies of the OUT buffers for re-runs (aligned, so a device
 * that shares host memory uses them in place), or private mappings of the
 * files holding the claim (copy on write: only the pages a re-run writes
 * take memory of their own). */
typedef struct {
    uint8_t *b[NS_MAX_ARGS];    /* by argument position; NULL for others */
    size_t mapped[NS_MAX_ARGS]; /* bytes mapped (b is a mapping), or 0 */
    uint64_t got[NS_MAX_ARGS];  /* else the size it was taken for
                                   (ns_buf_get) */
} s_bufs_t;

static void s_bufs_free(s_bufs_t *s)
{
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        if (s->mapped[i])
            munmap(s->b[i], s->mapped[i]);
        else
            ns_buf_put(s->b[i], s->got[i]);
    }
    memset(s, 0, sizeof *s);
}

static int s_bufs_alloc(const s_layout_t *l, const ns_job_t *job, s_bufs_t *s)
{
    memset(s, 0, sizeof *s);
    for (uint32_t o = 0; o < l->n_out; o++) {
        uint64_t size = job->args[l->arg[o]].size;
        s->b[l->arg[o]] = ns_buf_get(size);
        s->got[l->arg[o]] = size;
        if (!s->b[l->arg[o]]) {
            s_bufs_free(s);
            return NS_ERR_NOMEM;
        }
    }
    return NS_OK;
}

/* Buffers holding the claim: a private mapping of fds[arg] where there is
 * one, else a heap copy of outputs[arg]. */
static int s_bufs_claim(const s_layout_t *l, const ns_job_t *job,
                        uint8_t *const *outputs, const int *fds, s_bufs_t *s)
{
    memset(s, 0, sizeof *s);
    for (uint32_t o = 0; o < l->n_out; o++) {
        uint32_t arg = l->arg[o];
        size_t size = (size_t)job->args[arg].size;
        if (fds && fds[arg] >= 0) {
            void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE,
                           fds[arg], 0);
            if (m == MAP_FAILED) {
                s_bufs_free(s);
                return NS_ERR_IO;
            }
            s->b[arg] = m;
            s->mapped[arg] = size;
            continue;
        }
        s->b[arg] = ns_buf_get(size);
        s->got[arg] = size;
        if (!s->b[arg]) {
            s_bufs_free(s);
            return NS_ERR_NOMEM;
        }
        memcpy(s->b[arg], outputs[arg], size);
    }
    return NS_OK;
}

static void s_bufs_fill(const s_layout_t *l, const ns_job_t *job, s_bufs_t *s,
                        int byte)
{
    for (uint32_t o = 0; o < l->n_out; o++)
        memset(s->b[l->arg[o]], byte, (size_t)job->args[l->arg[o]].size);
}

/* The bytes compared for position pos of a buffer of size bytes: its
 * aligned float32 word under a tolerance (when the word lies inside the
 * buffer), else the byte itself. */
static void s_span(const ns_job_t *job, uint64_t size, uint64_t pos,
                   uint64_t *at, size_t *len)
{
    uint64_t w = pos & ~(uint64_t)3;
    if (job->det != NS_DET_EXACT && size - w >= 4) {
        *at = w;
        *len = 4;
    } else {
        *at = pos;
        *len = 1;
    }
}

/* Whether a unit's write of a span matches the claim: a and b are the
 * span after the unit ran alone on the 0x00 and on the 0xFF fill; the
 * bytes it wrote (equal in both) replace the claim's, the others keep
 * the claim's value. */
static bool s_write_matches(const ns_job_t *job, const uint8_t *a,
                            const uint8_t *b, const uint8_t *claim, size_t len)
{
    uint8_t redo[4];
    for (size_t j = 0; j < len; j++)
        redo[j] = a[j] == b[j] ? a[j] : claim[j];
    return ns_item_matches(job, redo, claim, len);
}

/* Drop [at, at + len) of a file mapping from memory (page-aligned at):
 * what is read again comes back from the file; a private mapping's own
 * pages are gone. */
static void s_drop(const uint8_t *base, uint64_t at, uint64_t len)
{
    (void)madvise((void *)(uintptr_t)(base + at), (size_t)len, MADV_DONTNEED);
}

/* Spans where the batch re-run (w: the claim with the drawn units' writes
 * on top) differs from the claim beyond the tolerance. Where the claim is
 * a file (fds[arg] >= 0, claim[arg] a mapping of it), both mappings are
 * dropped from memory window by window as the compare moves on, so the
 * pass never holds more than S_DROP_BYTES of them; w then no longer holds
 * the re-run's writes. */
static uint64_t s_batch_changes(const ns_job_t *job, const s_layout_t *l,
                                const s_bufs_t *w, uint8_t *const *claim,
                                const int *fds)
{
    uint64_t bad = 0;
    for (uint32_t o = 0; o < l->n_out; o++) {
        uint32_t arg = l->arg[o];
        uint64_t size = job->args[arg].size;
        const uint8_t *x = w->b[arg], *c = claim[arg];
        bool drop = fds && fds[arg] >= 0 && w->mapped[arg];
        for (uint64_t blk = 0; blk < size; blk += 4096) {
            if (drop && blk && blk % S_DROP_BYTES == 0) {
                s_drop(x, blk - S_DROP_BYTES, S_DROP_BYTES);
                s_drop(c, blk - S_DROP_BYTES, S_DROP_BYTES);
            }
            uint64_t end = size - blk > 4096 ? blk + 4096 : size;
            if (memcmp(x + blk, c + blk, (size_t)(end - blk)) == 0)
                continue;
            for (uint64_t i = blk; i < end; i++) {
                if (x[i] == c[i])
                    continue;
                uint64_t at;
                size_t len;
                s_span(job, size, i, &at, &len);
                if (!ns_item_matches(job, x + at, c + at, len))
                    bad++;
                i = at + len - 1;
            }
        }
        if (drop) {
            uint64_t tail = size - size % S_DROP_BYTES;
            if (tail == size && size)
                tail -= S_DROP_BYTES;
            s_drop(x, tail, size - tail);
            s_drop(c, tail, size - tail);
        }
    }
    return bad;
}

/* The first position a unit wrote (a: after its run on the 0x00 fill, b:
 * on the 0xFF fill) with a value that does not match the claim. Unwritten
 * bytes differ by 0xFF, so eight bytes at a time are skipped when their
 * XOR is all ones. */
static bool s_unit_wrong(const ns_job_t *job, const s_layout_t *l,
                         uint64_t unit, const s_bufs_t *a, const s_bufs_t *b,
                         uint8_t *const *claim, uint32_t *bad_arg,
                         uint64_t *bad_pos)
{
    uint32_t step = job->n_steps ? ns_job_unit_step(job, unit) : 0;
    for (uint32_t o = 0; o < l->n_out; o++) {
        uint32_t arg = l->arg[o];
        if (job->n_steps && ns_job_writer(job, arg) != step)
            continue; /* another step's buffer: this unit only reads it */
        uint64_t size = job->args[arg].size;
        const uint8_t *x = a->b[arg], *y = b->b[arg], *c = claim[arg];
        for (uint64_t i = 0; i < size; i++) {
            if (i % 8 == 0 && size - i >= 8) {
                uint64_t u, v;
                memcpy(&u, x + i, 8);
                memcpy(&v, y + i, 8);
                if ((u ^ v) == UINT64_MAX) {
                    i += 7;
                    continue;
                }
            }
            if (x[i] != y[i])
                continue;
            uint64_t at;
            size_t len;
            s_span(job, size, i, &at, &len);
            if (!s_write_matches(job, x + at, y + at, c + at, len)) {
                *bad_arg = arg;
                *bad_pos = i;
                return true;
            }
            i = at + len - 1;
        }
    }
    return false;
}

/* A pipeline's unit alone: the buffers its step writes get the fill, the
 * ones it reads from earlier steps the claim (claim[arg]). */
static void s_bufs_fill_step(const s_layout_t *l, const ns_job_t *job,
                             s_bufs_t *s, int byte, uint64_t unit,
                             const uint8_t *const *claim)
{
    uint32_t step = ns_job_unit_step(job, unit);
    for (uint32_t o = 0; o < l->n_out; o++) {
        uint32_t arg = l->arg[o];
        size_t size = (size_t)job->args[arg].size;
        uint32_t w = ns_job_writer(job, arg);
        if (w == step)
            memset(s->b[arg], byte, size);
        else if (w < step && claim[arg]) /* NULL: a proof without outs,
                                           whose step reads none of them */
            memcpy(s->b[arg], claim[arg], size);
    }
}

/* Re-run one unit alone on the two fills: a on 0x00, b on 0xFF. claim:
 * a pipeline's claimed buffers (by argument), NULL for a job of one
 * launch. */
static int s_alone(ns_runner_t *r, const ns_job_t *job, const s_layout_t *l,
                   const ns_input_t *inputs, uint64_t unit,
                   const uint8_t *const *claim, s_bufs_t *a, s_bufs_t *b,
                   char *err, size_t errlen)
{
    if (job->n_steps) {
        s_bufs_fill_step(l, job, a, 0x00, unit, claim);
        s_bufs_fill_step(l, job, b, 0xff, unit, claim);
    } else {
        s_bufs_fill(l, job, a, 0x00);
        s_bufs_fill(l, job, b, 0xff);
    }
    int rc =
        ns_runner_run_units(r, job, inputs, &unit, 1, a->b, NULL, err, errlen);
    if (rc == NS_OK)
        rc = ns_runner_run_units(r, job, inputs, &unit, 1, b->b, NULL, err,
                                 errlen);
    return rc;
}

/* ---- spot check -------------------------------------------------------- */

/* Both spot checks: fds NULL (outputs in memory, root recomputed) or by
 * argument (the root already computed by the caller as the bytes came). */
static int s_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                   const ns_input_t *inputs, uint8_t *const *outputs,
                   const int *fds, const ns_hash_t root,
                   const uint8_t secret[32], uint32_t k, ns_check_result_t *res,
                   char *err, size_t errlen)
{
    uint64_t t0 = ns_mono_us();
    uint64_t *units = NULL;
    s_bufs_t w, f;
    ns_hash_t got;
    s_layout_t l;
    memset(res, 0, sizeof *res);
    memset(&w, 0, sizeof w);
    memset(&f, 0, sizeof f);
    if (err && errlen)
        err[0] = '\0';

    int rc = s_layout(job, &l);
    if (rc != NS_OK) {
        snprintf(err, errlen, "job has no units or no outputs");
        goto out;
    }
    if (k > NS_MAX_CHECKS) {
        snprintf(err, errlen, "%u checks: at most %d", k, NS_MAX_CHECKS);
        rc = NS_ERR_TOOBIG;
        goto out;
    }
    if (fds || !job_id)
        memcpy(got, root, NS_HASH_BYTES); /* the caller's, from the bytes
                                              (or a self-check's: none) */
    else
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
    /* a shard's units only (all of them for a whole job); k of each step
     * of a pipeline */
    uint64_t pool = ns_job_shard_units(job);
    uint32_t n = 0;
    for (uint32_t st = 0; st < ns_job_steps(job); st++) {
        uint64_t in_step = job->n_steps ? ns_job_step_units(job, st) : pool;
        n += (uint64_t)k < in_step ? k : (uint32_t)in_step;
    }
    if (n == 0)
        goto out;
    units = malloc((size_t)n * sizeof *units);
    uint64_t t1 = ns_mono_us();
    /* One batch on a copy of the claim: what changes was written by a
     * drawn unit with a value other than the claim. */
    rc = units ? s_bufs_claim(&l, job, outputs, fds, &w) : NS_ERR_NOMEM;
    if (rc != NS_OK) {
        snprintf(err, errlen, "%s for %u checks",
                 rc == NS_ERR_IO ? "cannot map the outputs" : "out of memory",
                 n);
        goto out;
    }
    if (job->n_steps) {
        /* each step its own draw, from a secret of its own; the last
         * step's units first, as the runner re-runs them */
        uint32_t at = 0;
        for (uint32_t st = job->n_steps; st-- > 0;) {
            uint8_t sub[32];
            uint8_t seed[36];
            memcpy(seed, secret, 32);
            seed[32] = (uint8_t)(st >> 24);
            seed[33] = (uint8_t)(st >> 16);
            seed[34] = (uint8_t)(st >> 8);
            seed[35] = (uint8_t)st;
            crypto_generichash(sub, sizeof sub, seed, sizeof seed, NULL, 0);
            uint64_t in_step = ns_job_step_units(job, st);
            uint32_t m = (uint64_t)k < in_step ? k : (uint32_t)in_step;
            uint64_t first = ns_job_step_first(job, st);
            ns_challenge_draw(root, sub, in_step, m, units + at);
            for (uint32_t j = 0; j < m; j++)
                units[at + j] += first;
            at += m;
        }
    } else {
        ns_challenge_draw(root, secret, pool, n, units);
        for (uint32_t j = 0; j < n; j++)
            units[j] = ns_job_shard_unit(job, units[j]);
    }

    ns_timings_t t;
    rc = ns_runner_run_units(r, job, inputs, units, n, w.b, &t, err, errlen);
    if (rc != NS_OK)
        goto out;
    res->launch_us = t.run_us;
    res->checked = n;
    res->changed = s_batch_changes(job, &l, &w, outputs, fds);
    if (res->changed > 0) {
        /* Attribution: each drawn unit alone on the two fills (a
         * pipeline's reading the claim of earlier steps). */
        rc = s_bufs_alloc(&l, job, &f);
        if (rc != NS_OK)
            goto out;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t arg = 0;
            uint64_t pos = 0;
            rc = s_alone(r, job, &l, inputs, units[j],
                         (const uint8_t *const *)outputs, &w, &f, err, errlen);
            if (rc != NS_OK)
                goto out;
            if (!s_unit_wrong(job, &l, units[j], &w, &f, outputs, &arg, &pos))
                continue;
            if (res->mismatched++ == 0) {
                res->first_bad = units[j];
                res->bad_arg = arg;
                res->bad_pos = pos;
            }
        }
    }
    res->rerun_us = ns_mono_us() - t1;
    if (res->mismatched)
        snprintf(err, errlen,
                 "%u of %u units do not match (first: unit %llu, arg %u, "
                 "byte %llu)",
                 res->mismatched, n, (unsigned long long)res->first_bad,
                 res->bad_arg, (unsigned long long)res->bad_pos);
    else if (res->changed)
        snprintf(err, errlen,
                 "%llu places changed in the re-run that no unit alone "
                 "writes (the kernel reads its outputs, or units overlap)",
                 (unsigned long long)res->changed);
out:
    res->verify_us = ns_mono_us() - t0;
    free(units);
    s_bufs_free(&w);
    s_bufs_free(&f);
    return rc;
}

int ns_self_check(ns_runner_t *r, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t *const *outputs, uint32_t k, ns_check_result_t *res,
                  char *err, size_t errlen)
{
    ns_hash_t none;
    uint8_t secret[32];
    memset(none, 0, sizeof none);
    randombytes_buf(secret, sizeof secret);
    return s_check(r, job, NULL, inputs, outputs, NULL, none, secret, k, res,
                   err, errlen);
}

int ns_spot_check(ns_runner_t *r, const ns_job_t *job, const ns_hash_t job_id,
                  const ns_input_t *inputs, uint8_t *const *outputs,
                  const ns_hash_t root, const uint8_t secret[32], uint32_t k,
                  ns_check_result_t *res, char *err, size_t errlen)
{
    return s_check(r, job, job_id, inputs, outputs, NULL, root, secret, k, res,
                   err, errlen);
}

int ns_spot_check_files(ns_runner_t *r, const ns_job_t *job,
                        const ns_hash_t job_id, const ns_input_t *inputs,
                        uint8_t *const *outputs, const int *fds,
                        const ns_hash_t root, const uint8_t secret[32],
                        uint32_t k, ns_check_result_t *res, char *err,
                        size_t errlen)
{
    return s_check(r, job, job_id, inputs, outputs, fds, root, secret, k, res,
                   err, errlen);
}

/* ---- fraud proofs ------------------------------------------------------ */

void ns_fraud_release(ns_fraud_proof_t *p)
{
    if (!p)
        return;
    ns_job_release(&p->job);
    free(p->chunk);
    memset(p, 0, sizeof *p);
}

/* The proof's claimed chunk: where it starts in its argument, its
 * length, its leaf. NS_ERR_INVAL when the shape does not fit the job. */
static int s_proof_shape(const ns_fraud_proof_t *p, uint64_t *chunk_off,
                         size_t *chunk_len, uint64_t *leaf, uint64_t *n_leaves)
{
    const ns_job_t *job = &p->job;
    if (p->n_units != ns_job_units(job) || p->unit >= p->n_units ||
        !ns_job_unit_in_shard(job, p->unit) || p->arg >= job->n_args ||
        job->args[p->arg].kind != NS_ARG_OUT ||
        p->pos >= job->args[p->arg].size ||
        ns_commit_leaf_index(job, p->arg, p->pos, leaf) != NS_OK)
        return NS_ERR_INVAL;
    /* a pipeline's unit writes only its step's buffers, and the outs are
     * there exactly when its step reads an earlier step's */
    if (job->n_steps &&
        ns_job_writer(job, p->arg) != ns_job_unit_step(job, p->unit))
        return NS_ERR_INVAL;
    uint32_t want_outs = 0;
    if (ns_fraud_needs_outs(job, p->unit))
        for (uint32_t i = 0; i < job->n_args; i++)
            want_outs += job->args[i].kind == NS_ARG_OUT;
    if (p->n_outs != want_outs)
        return NS_ERR_INVAL;
    uint64_t size = job->args[p->arg].size;
    *chunk_off = p->pos / NS_COMMIT_CHUNK * NS_COMMIT_CHUNK;
    *chunk_len = size - *chunk_off < NS_COMMIT_CHUNK
                     ? (size_t)(size - *chunk_off)
                     : NS_COMMIT_CHUNK;
    *n_leaves = ns_commit_leaves(job);
    if (p->depth != ns_merkle_proof_len((size_t)*n_leaves, (size_t)*leaf))
        return NS_ERR_INVAL;
    return NS_OK;
}

bool ns_fraud_needs_outs(const ns_job_t *job, uint64_t u)
{
    if (!job->n_steps || u >= ns_job_units(job))
        return false;
    ns_job_t view;
    uint32_t map[NS_MAX_ARGS];
    ns_job_step_view(job, ns_job_unit_step(job, u), &view, map);
    for (uint32_t i = 0; i < view.n_args; i++)
        if (map[i] != NS_JOB_NO_BUF && view.args[i].kind == NS_ARG_IN &&
            job->args[map[i]].kind == NS_ARG_OUT)
            return true;
    return false;
}

/* The root a proof's chunk and path lead to (hash.h's verify walk). */
static void s_root_from_path(ns_fraud_proof_t *p, uint64_t leaf, uint64_t n)
{
    ns_hash_t cur;
    size_t d = 0;
    ns_chunk_leaf(cur, p->job_id, p->arg, p->pos / NS_COMMIT_CHUNK, p->chunk,
                  p->chunk_len);
    for (uint64_t k = n, i = leaf; k > 1; k = (k + 1) / 2, i >>= 1) {
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
                   uint8_t *const *outputs, uint64_t unit, uint32_t arg,
                   uint64_t pos)
{
    ns_hash_t id;
    uint64_t chunk_off = 0, leaf = 0, n_leaves = 0;
    size_t chunk_len = 0;
    memset(p, 0, sizeof *p);
    ns_job_init(&p->job);
    int rc = ns_job_id(job, id);
    if (rc != NS_OK)
        goto out;
    if (memcmp(id, job_id, NS_HASH_BYTES) != 0) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    rc = ns_job_copy(&p->job, job);
    if (rc != NS_OK)
        goto out;
    memcpy(p->job_id, job_id, NS_HASH_BYTES);
    memcpy(p->provider, provider, NS_ID_BYTES);
    memcpy(p->sig, sig, NS_SIG_BYTES);
    p->n_units = ns_job_units(job);
    p->unit = unit;
    p->arg = arg;
    p->pos = pos;
    if (ns_commit_leaf_index(job, arg, pos, &leaf) != NS_OK ||
        unit >= p->n_units) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    n_leaves = ns_commit_leaves(job);
    p->depth = ns_merkle_proof_len((size_t)n_leaves, (size_t)leaf);
    if (ns_fraud_needs_outs(job, unit))
        for (uint32_t i = 0; i < job->n_args; i++)
            if (job->args[i].kind == NS_ARG_OUT)
                ns_hash(p->outs[p->n_outs++], outputs[i],
                        (size_t)job->args[i].size);
    rc = s_proof_shape(p, &chunk_off, &chunk_len, &leaf, &n_leaves);
    if (rc != NS_OK || (tree && tree->n_leaves != n_leaves)) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    p->chunk = malloc(chunk_len);
    if (!p->chunk) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    p->chunk_len = chunk_len;
    memcpy(p->chunk, outputs[arg] + chunk_off, chunk_len);
    if (tree) {
        rc = ns_merkle_proof(tree, (size_t)leaf, p->path, &p->depth);
        if (rc == NS_OK)
            ns_merkle_root(tree, p->root);
    } else {
        rc = ns_commit_path(job, job_id, outputs, leaf, p->path, &p->depth);
        if (rc == NS_OK)
            s_root_from_path(p, leaf, n_leaves);
    }
out:
    if (rc != NS_OK)
        ns_fraud_release(p);
    return rc;
}

void ns_fraud_pack(msgpack_packer *pk, const ns_fraud_proof_t *p)
{
    bool pipe = p->job.n_steps != 0;
    msgpack_pack_array(pk, pipe ? 12 : 11);
    msgpack_pack_uint8(pk, pipe ? NS_FRAUD_VERSION_PIPELINE : NS_FRAUD_VERSION);
    ns_job_pack(pk, &p->job);
    ns_mp_bin(pk, p->provider, NS_ID_BYTES);
    ns_mp_bin(pk, p->root, NS_HASH_BYTES);
    msgpack_pack_uint64(pk, p->n_units);
    ns_mp_bin(pk, p->sig, NS_SIG_BYTES);
    msgpack_pack_uint64(pk, p->unit);
    msgpack_pack_uint32(pk, p->arg);
    msgpack_pack_uint64(pk, p->pos);
    ns_mp_bin(pk, p->chunk, p->chunk_len);
    msgpack_pack_array(pk, (uint32_t)p->depth);
    for (size_t i = 0; i < p->depth; i++)
        ns_mp_bin(pk, p->path[i], NS_HASH_BYTES);
    if (pipe) {
        msgpack_pack_array(pk, p->n_outs);
        for (uint32_t i = 0; i < p->n_outs; i++)
            ns_mp_bin(pk, p->outs[i], NS_HASH_BYTES);
    }
}

int ns_fraud_read(ns_mpr_t *r, ns_fraud_proof_t *p, char *err, size_t errlen)
{
    uint64_t version = 0, chunk_off = 0, leaf = 0, n_leaves = 0;
    uint32_t depth = 0;
    const uint8_t *chunk = NULL;
    size_t chunk_len = 0, want_len = 0;
    int rc;
    memset(p, 0, sizeof *p);
    ns_job_init(&p->job);
    if (err && errlen)
        err[0] = '\0';

    uint32_t fields = 0;
    ns_mpr_array(r, &fields, 12);
    ns_mpr_uint(r, &version);
    if (r->err == NS_OK && version != NS_FRAUD_VERSION &&
        version != NS_FRAUD_VERSION_PIPELINE) {
        snprintf(err, errlen, "fraud proof version %llu unknown",
                 (unsigned long long)version);
        r->err = NS_ERR_VERSION;
        goto out;
    }
    if (r->err == NS_OK &&
        fields != (version == NS_FRAUD_VERSION_PIPELINE ? 12u : 11u))
        r->err = NS_ERR_TYPE;
    if (r->err != NS_OK)
        goto bad;
    rc = ns_job_read(r, &p->job, err, errlen);
    if (rc != NS_OK) {
        if (r->err == NS_OK)
            r->err = rc;
        goto out; /* err names the descriptor field */
    }
    if ((version == NS_FRAUD_VERSION_PIPELINE) != (p->job.n_steps != 0)) {
        snprintf(err, errlen, "fraud proof version %llu for a %s",
                 (unsigned long long)version,
                 p->job.n_steps ? "pipeline" : "job of one launch");
        r->err = NS_ERR_INVAL;
        goto out;
    }
    ns_mpr_bin_exact(r, p->provider, NS_ID_BYTES);
    ns_mpr_bin_exact(r, p->root, NS_HASH_BYTES);
    ns_mpr_uint(r, &p->n_units);
    ns_mpr_bin_exact(r, p->sig, NS_SIG_BYTES);
    ns_mpr_uint(r, &p->unit);
    ns_mpr_u32(r, &p->arg);
    ns_mpr_uint(r, &p->pos);
    ns_mpr_bin(r, &chunk, &chunk_len, NS_COMMIT_CHUNK);
    ns_mpr_array(r, &depth, NS_MERKLE_MAX_DEPTH);
    for (uint32_t i = 0; i < depth && r->err == NS_OK; i++)
        ns_mpr_bin_exact(r, p->path[i], NS_HASH_BYTES);
    if (version == NS_FRAUD_VERSION_PIPELINE) {
        ns_mpr_array(r, &p->n_outs, NS_MAX_ARGS);
        for (uint32_t i = 0; i < p->n_outs && r->err == NS_OK; i++)
            ns_mpr_bin_exact(r, p->outs[i], NS_HASH_BYTES);
    }
    if (r->err != NS_OK)
        goto bad;
    p->depth = depth;

    /* the shape must fit the descriptor */
    if (s_proof_shape(p, &chunk_off, &want_len, &leaf, &n_leaves) != NS_OK ||
        chunk_len != want_len) {
        snprintf(err, errlen,
                 "fraud proof shape: unit %llu of %llu, arg %u, byte %llu, "
                 "%zu-byte chunk, depth %zu do not fit the job",
                 (unsigned long long)p->unit, (unsigned long long)p->n_units,
                 p->arg, (unsigned long long)p->pos, chunk_len, p->depth);
        r->err = NS_ERR_INVAL;
        goto out;
    }
    rc = ns_job_id(&p->job, p->job_id);
    if (rc != NS_OK) {
        snprintf(err, errlen, "fraud proof: job id: %s", ns_strerror(rc));
        r->err = rc;
        goto out;
    }
    p->chunk = malloc(chunk_len);
    if (!p->chunk) {
        r->err = NS_ERR_NOMEM;
        goto out;
    }
    memcpy(p->chunk, chunk, chunk_len);
    p->chunk_len = chunk_len;
    return NS_OK;
bad:
    snprintf(err, errlen, "malformed fraud proof: %s", ns_strerror(r->err));
out:
    ns_fraud_release(p);
    return r->err != NS_OK ? r->err : NS_ERR_INVAL;
}

int ns_fraud_verify_claim(const ns_fraud_proof_t *p, char *err, size_t errlen)
{
    ns_hash_t id, leaf_hash;
    uint64_t chunk_off = 0, leaf = 0, n_leaves = 0;
    size_t chunk_len = 0;
    if (err && errlen)
        err[0] = '\0';
    if (ns_job_validate(&p->job, err, errlen) != NS_OK)
        return NS_ERR_PROOF;
    int rc = ns_job_id(&p->job, id);
    if (rc != NS_OK) {
        snprintf(err, errlen, "job id: %s", ns_strerror(rc));
        return rc;
    }
    if (memcmp(id, p->job_id, NS_HASH_BYTES) != 0) {
        snprintf(err, errlen, "job id does not match the descriptor");
        return NS_ERR_PROOF;
    }
    if (p->depth > NS_MERKLE_MAX_DEPTH || !p->chunk ||
        s_proof_shape(p, &chunk_off, &chunk_len, &leaf, &n_leaves) != NS_OK ||
        p->chunk_len != chunk_len) {
        snprintf(err, errlen, "unit, position or chunk do not fit the job");
        return NS_ERR_PROOF;
    }
    if (ns_result_verify(p->provider, p->job_id, p->root, p->n_units, p->sig) !=
        NS_OK) {
        snprintf(err, errlen, "result signature does not verify");
        return NS_ERR_PROOF;
    }
    ns_chunk_leaf(leaf_hash, p->job_id, p->arg, p->pos / NS_COMMIT_CHUNK,
                  p->chunk, p->chunk_len);
    if (ns_merkle_verify(p->root, leaf_hash, (size_t)leaf, (size_t)n_leaves,
                         (const ns_hash_t *)p->path, p->depth) != NS_OK) {
        snprintf(err, errlen, "the chunk is not leaf %llu of the root",
                 (unsigned long long)leaf);
        return NS_ERR_PROOF;
    }
    return NS_OK;
}

int ns_fraud_check(ns_runner_t *r, const ns_fraud_proof_t *p,
                   const ns_input_t *inputs, char *err, size_t errlen)
{
    s_bufs_t a, b;
    s_layout_t l;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    int rc = ns_fraud_verify_claim(p, err, errlen);
    if (rc != NS_OK)
        return rc;
    rc = s_layout(&p->job, &l);
    if (rc == NS_OK)
        rc = s_bufs_alloc(&l, &p->job, &a);
    if (rc == NS_OK)
        rc = s_bufs_alloc(&l, &p->job, &b);
    if (rc != NS_OK)
        goto out;
    /* a pipeline's step reading earlier steps' buffers: the claimed
     * buffers (fetched by their hashes) must be the committed ones */
    const uint8_t *claim[NS_MAX_ARGS] = {0};
    uint8_t *claim_rw[NS_MAX_ARGS] = {0}; /* the same, for ns_commit_root
                                             (which only reads them) */
    if (p->n_outs) {
        for (uint32_t i = 0; i < p->job.n_args; i++) {
            if (p->job.args[i].kind != NS_ARG_OUT)
                continue;
            if (!inputs[i].data || inputs[i].len != p->job.args[i].size) {
                snprintf(err, errlen,
                         "arg %u (out): the claimed buffer is "
                         "not given",
                         i);
                rc = NS_ERR_INVAL;
                goto out;
            }
            claim[i] = inputs[i].data;
            memcpy(&claim_rw[i], &claim[i], sizeof claim_rw[i]);
        }
        ns_hash_t got;
        rc = ns_commit_root(&p->job, p->job_id, claim_rw, got);
        if (rc != NS_OK)
            goto out;
        if (sodium_memcmp(got, p->root, NS_HASH_BYTES) != 0) {
            snprintf(err, errlen,
                     "the buffers of the proof's outs are not the committed "
                     "ones");
            rc = NS_ERR_PROOF;
            goto out;
        }
    }
    rc = s_alone(r, &p->job, &l, inputs, p->unit, claim, &a, &b, err, errlen);
    if (rc != NS_OK)
        goto out;
    const uint8_t *x = a.b[p->arg], *y = b.b[p->arg];
    uint64_t size = p->job.args[p->arg].size;
    uint64_t chunk_off = p->pos / NS_COMMIT_CHUNK * NS_COMMIT_CHUNK;
    if (x[p->pos] != y[p->pos]) {
        snprintf(err, errlen, "unit %llu does not write byte %llu of arg %u",
                 (unsigned long long)p->unit, (unsigned long long)p->pos,
                 p->arg);
        rc = NS_ERR_PROOF;
        goto out;
    }
    uint64_t at;
    size_t len;
    s_span(&p->job, size, p->pos, &at, &len);
    /* a word never crosses a chunk: chunks start at multiples of 4 */
    if (s_write_matches(&p->job, x + at, y + at, p->chunk + (at - chunk_off),
                        len)) {
        snprintf(err, errlen,
                 "unit %llu writes byte %llu of arg %u as claimed: no fraud",
                 (unsigned long long)p->unit, (unsigned long long)p->pos,
                 p->arg);
        rc = NS_ERR_PROOF;
        goto out;
    }
    snprintf(err, errlen,
             "unit %llu writes byte %llu of arg %u otherwise than claimed: "
             "fraud",
             (unsigned long long)p->unit, (unsigned long long)p->pos, p->arg);
out:
    s_bufs_free(&a);
    s_bufs_free(&b);
    return rc;
}
