/* challenge.c - hardware challenges: memory-filling labelling and an
 * integer matrix product checked with Freivalds' algorithm (challenge.h
 * states the rules; kernels/challenge_label.cl and challenge_imatmul.cl
 * run them on the prover's device).
 */
#include "nightshift/challenge.h"
#include "nightshift/cl.h"
#include "nightshift/devices.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_B2_CHUNK_BLOCKS 33 /* blocks of 0x00 || 4096-byte chunk */

/* CPU, measured with PoCL on a 2-core AVX-512 Xeon (208 GFLOPS FMA):
 * ~560 cycles per label (the ref read misses the cache), ~540 per BLAKE2b
 * block, ~1 per multiply-accumulate, at 37 flops per cycle and core; then
 * 1.5x. GPU: instruction counts (a label ~450 u32 ops, a block 1344 u64
 * ops of ~3 u32 instructions, a multiply-accumulate ~4), an integer
 * instruction as one FMA slot (2 flops) at half rate, then 2x. */
static const ns_chal_costs_t s_costs_cpu = {30000, 30000, 60};
static const ns_chal_costs_t s_costs_gpu = {3600, 32000, 32};

const ns_chal_costs_t *ns_chal_costs(uint32_t devtype)
{
    return devtype == NS_DEV_CPU ? &s_costs_cpu : &s_costs_gpu;
}

__extension__ typedef unsigned __int128 s_u128;

const char *ns_chal_verdict_name(int verdict)
{
    switch (verdict) {
    case NS_CHAL_PASSED:
        return "passed";
    case NS_CHAL_WRONG:
        return "wrong";
    case NS_CHAL_LATE:
        return "late";
    default:
        return "unknown";
    }
}

static uint32_t s_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void s_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint64_t s_le64(const uint8_t *p)
{
    return (uint64_t)s_le32(p) | (uint64_t)s_le32(p + 4) << 32;
}

/* Seconds at a claimed rate; a claim <= 0 counts as 1e-3 units/s. */
static double s_at_rate(double work, double per_second)
{
    return work / (per_second > 0 ? per_second : 1e-3);
}

static uint64_t s_deadline(double seconds)
{
    double us = NS_CHAL_SLACK * seconds * 1e6 + NS_CHAL_ALLOWANCE_US;
    return us >= 1.8e19 ? UINT64_MAX : (uint64_t)us;
}

/* ---- labelling: parameters and the rule ------------------------------ */

int ns_label_params_check(const ns_label_params_t *p)
{
    if (p->lanes < NS_LABEL_CHUNK_LABELS ||
        p->lanes % NS_LABEL_CHUNK_LABELS != 0 || p->segments < 1 ||
        p->segments > NS_LABEL_MAX_SEGMENTS || p->steps < 1)
        return NS_ERR_INVAL;
    uint64_t rows = (uint64_t)p->segments * p->steps;
    if (rows > NS_LABEL_MAX_BYTES / NS_LABEL_BYTES / p->lanes)
        return NS_ERR_TOOBIG;
    uint64_t bytes = rows * p->lanes * NS_LABEL_BYTES;
    if (bytes != p->bytes || bytes < NS_LABEL_MIN_BYTES)
        return NS_ERR_INVAL;
    return NS_OK;
}

int ns_label_params_init(ns_label_params_t *p, uint64_t bytes,
                         uint32_t segments)
{
    memset(p, 0, sizeof *p);
    if (segments == 0)
        segments = 4;
    if (bytes < NS_LABEL_MIN_BYTES || bytes > NS_LABEL_MAX_BYTES ||
        segments > NS_LABEL_MAX_SEGMENTS)
        return NS_ERR_INVAL;
    uint32_t lanes = 65536;
    while (lanes > NS_LABEL_CHUNK_LABELS &&
           bytes / ((uint64_t)NS_LABEL_BYTES * lanes * segments) < 64)
        lanes /= 2;
    uint64_t steps = bytes / ((uint64_t)NS_LABEL_BYTES * lanes * segments);
    if (steps == 0 || steps > UINT32_MAX)
        return NS_ERR_INVAL;
    p->lanes = lanes;
    p->segments = segments;
    p->steps = (uint32_t)steps;
    p->bytes = (uint64_t)NS_LABEL_BYTES * lanes * segments * steps;
    return ns_label_params_check(p);
}

static uint32_t s_rotl(uint32_t x, unsigned n)
{
    return (x << n) | (x >> (32 - n));
}

#define S_QR(a, b, c, d)                                                       \
    do {                                                                       \
        a += b;                                                                \
        d = s_rotl(d ^ a, 16);                                                 \
        c += d;                                                                \
        b = s_rotl(b ^ c, 12);                                                 \
        a += b;                                                                \
        d = s_rotl(d ^ a, 8);                                                  \
        c += d;                                                                \
        b = s_rotl(b ^ c, 7);                                                  \
    } while (0)

void ns_label_compute(const uint8_t seed[32], uint64_t v, const uint8_t *prev,
                      const uint8_t *ref, uint8_t out[NS_LABEL_BYTES])
{
    static const uint32_t tail[6] = NS_LABEL_K;
    uint32_t k[16], in[16], x[16];
    for (int i = 0; i < 8; i++)
        k[i] = s_le32(seed + 4 * i);
    k[8] = (uint32_t)v;
    k[9] = (uint32_t)(v >> 32);
    memcpy(k + 10, tail, sizeof tail);
    for (int i = 0; i < 16; i++) {
        uint32_t pw = prev ? s_le32(prev + 4 * i) : 0;
        uint32_t rw = ref ? s_le32(ref + 4 * i) : 0;
        in[i] = (pw ^ k[i]) + s_rotl(rw, 16);
        x[i] = in[i];
    }
    for (int r = 0; r < 4; r++) {
        S_QR(x[0], x[4], x[8], x[12]);
        S_QR(x[1], x[5], x[9], x[13]);
        S_QR(x[2], x[6], x[10], x[14]);
        S_QR(x[3], x[7], x[11], x[15]);
        S_QR(x[0], x[5], x[10], x[15]);
        S_QR(x[1], x[6], x[11], x[12]);
        S_QR(x[2], x[7], x[8], x[13]);
        S_QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++)
        s_put_le32(out + 4 * i, x[i] + in[i]);
}

static uint64_t s_mulhi(uint64_t a, uint64_t b)
{
    return (uint64_t)(((s_u128)a * b) >> 64);
}

uint64_t ns_label_ref(const ns_label_params_t *p, uint64_t v,
                      const uint8_t prev[NS_LABEL_BYTES])
{
    uint64_t t = v / p->lanes, l = v % p->lanes;
    uint64_t x = s_le64(prev);
    if (t < p->steps) /* segment 0: an earlier row of this lane */
        return s_mulhi(x, t) * p->lanes + l;
    uint64_t done = t / p->steps * p->steps * p->lanes; /* finished labels */
    return s_mulhi(x, done);
}

uint64_t ns_label_deadline_claim_us(const ns_label_params_t *p,
                                    const ns_devinfo_t *claim)
{
    const ns_chal_costs_t *c = ns_chal_costs(claim->type);
    double m = (double)p->bytes;
    double reads = m * (double)(p->segments - 1) / p->segments;
    double moved = m + reads + m; /* labels written, refs read, hashed */
    double chunks = m / NS_LABEL_CHUNK_BYTES;
    /* per chunk: its leaf's blocks and about one node of the tree */
    double work = m / NS_LABEL_BYTES * c->label +
                  chunks * (S_B2_CHUNK_BLOCKS + 1) * c->b2_block;
    double s = s_at_rate(moved, claim->gbps * 1e9) +
               s_at_rate(work, claim->gflops * 1e9);
    return s_deadline(s);
}

/* A claim of unknown type: the CPU costs, the most lenient. */
static ns_devinfo_t s_untyped(double gbps, double gflops)
{
    ns_devinfo_t d;
    memset(&d, 0, sizeof d);
    d.type = NS_DEV_CPU;
    d.gbps = gbps;
    d.gflops = gflops;
    return d;
}

uint64_t ns_label_deadline_us(const ns_label_params_t *p, double gbps,
                              double gflops)
{
    ns_devinfo_t d = s_untyped(gbps, gflops);
    return ns_label_deadline_claim_us(p, &d);
}

void ns_label_positions(const ns_label_params_t *p, const ns_hash_t root,
                        const uint8_t secret[32], uint32_t k,
                        uint64_t *positions)
{
    if (k > NS_CHAL_MAX_OPENINGS)
        k = NS_CHAL_MAX_OPENINGS;
    ns_challenge_draw(root, secret, ns_label_count(p), k, positions);
}

/* ---- labelling: verifier ---------------------------------------------- */

/* One opened chunk: the index it must have, and its path to the root. */
static bool s_chunk_ok(const ns_label_params_t *p, const ns_hash_t root,
                       const ns_label_chunk_t *c, uint64_t label)
{
    ns_hash_t leaf;
    uint64_t n_chunks = p->bytes / NS_LABEL_CHUNK_BYTES;
    if (c->chunk != label / NS_LABEL_CHUNK_LABELS ||
        c->depth > NS_MERKLE_MAX_DEPTH)
        return false;
    ns_merkle_leaf(leaf, c->data, sizeof c->data);
    return ns_merkle_verify(root, leaf, c->chunk, n_chunks, c->path,
                            c->depth) == NS_OK;
}

static const uint8_t *s_in_chunk(const ns_label_chunk_t *c, uint64_t label)
{
    return c->data + (label % NS_LABEL_CHUNK_LABELS) * NS_LABEL_BYTES;
}

ns_chal_verdict ns_label_verify(const ns_label_params_t *p,
                                const uint8_t seed[32], const ns_hash_t root,
                                const uint64_t *positions, uint32_t k,
                                const ns_label_opening_t *openings,
                                uint64_t elapsed_us, uint64_t deadline_us,
                                char *why, size_t whylen)
{
    ns_cl_errf(why, whylen, "ok");
    if (ns_label_params_check(p) != NS_OK) {
        ns_cl_errf(why, whylen, "bad parameters");
        return NS_CHAL_WRONG;
    }
    for (uint32_t i = 0; i < k; i++) {
        const ns_label_opening_t *o = &openings[i];
        uint64_t v = positions[i];
        uint8_t want[NS_LABEL_BYTES];
        if (o->position != v || v >= ns_label_count(p)) {
            ns_cl_errf(why, whylen, "opening %u is for position %llu, not %llu",
                       i, (unsigned long long)o->position,
                       (unsigned long long)v);
            return NS_CHAL_WRONG;
        }
        if (!s_chunk_ok(p, root, &o->at, v)) {
            ns_cl_errf(why, whylen, "label %llu: chunk not under the root",
                       (unsigned long long)v);
            return NS_CHAL_WRONG;
        }
        if (v < p->lanes) {
            ns_label_compute(seed, v, NULL, NULL, want);
        } else {
            uint64_t pv = v - p->lanes;
            if (!s_chunk_ok(p, root, &o->prev, pv)) {
                ns_cl_errf(why, whylen,
                           "label %llu: prev chunk not under the root",
                           (unsigned long long)v);
                return NS_CHAL_WRONG;
            }
            const uint8_t *prev = s_in_chunk(&o->prev, pv);
            uint64_t rv = ns_label_ref(p, v, prev);
            if (!s_chunk_ok(p, root, &o->ref, rv)) {
                ns_cl_errf(why, whylen,
                           "label %llu: ref chunk not under the root",
                           (unsigned long long)v);
                return NS_CHAL_WRONG;
            }
            ns_label_compute(seed, v, prev, s_in_chunk(&o->ref, rv), want);
        }
        if (memcmp(want, s_in_chunk(&o->at, v), NS_LABEL_BYTES) != 0) {
            ns_cl_errf(why, whylen, "label %llu does not follow the rule",
                       (unsigned long long)v);
            return NS_CHAL_WRONG;
        }
    }
    if (elapsed_us > deadline_us) {
        ns_cl_errf(why, whylen, "answer after %llu us, deadline %llu us",
                   (unsigned long long)elapsed_us,
                   (unsigned long long)deadline_us);
        return NS_CHAL_LATE;
    }
    return NS_CHAL_PASSED;
}

/* ---- labelling: host reference ------------------------------------------ */

int ns_label_fill_host(const ns_label_params_t *p, const uint8_t seed[32],
                       uint8_t *labels)
{
    int rc = ns_label_params_check(p);
    if (rc != NS_OK)
        return rc;
    uint64_t n = ns_label_count(p);
    /* Row by row: the same order of dependencies as the device (a
     * segment only reads finished segments or its own lane). */
    for (uint64_t v = 0; v < n; v++) {
        uint8_t *out = labels + v * NS_LABEL_BYTES;
        if (v < p->lanes) {
            ns_label_compute(seed, v, NULL, NULL, out);
            continue;
        }
        const uint8_t *prev = labels + (v - p->lanes) * NS_LABEL_BYTES;
        uint64_t rv = ns_label_ref(p, v, prev);
        ns_label_compute(seed, v, prev, labels + rv * NS_LABEL_BYTES, out);
    }
    return NS_OK;
}

int ns_label_commit_host(const ns_label_params_t *p, const uint8_t *labels,
                         ns_merkle_t *tree)
{
    memset(tree, 0, sizeof *tree);
    int rc = ns_label_params_check(p);
    if (rc != NS_OK)
        return rc;
    uint64_t n = p->bytes / NS_LABEL_CHUNK_BYTES;
    ns_hash_t *leaves = malloc(n * sizeof *leaves);
    if (!leaves)
        return NS_ERR_NOMEM;
    for (uint64_t c = 0; c < n; c++)
        ns_merkle_leaf(leaves[c], labels + c * NS_LABEL_CHUNK_BYTES,
                       NS_LABEL_CHUNK_BYTES);
    rc = ns_merkle_build(tree, (const ns_hash_t *)leaves, n);
    free(leaves);
    return rc;
}

static int s_open_chunk(const uint8_t *labels, const ns_merkle_t *tree,
                        uint64_t label, ns_label_chunk_t *c)
{
    c->chunk = label / NS_LABEL_CHUNK_LABELS;
    memcpy(c->data, labels + c->chunk * NS_LABEL_CHUNK_BYTES,
           NS_LABEL_CHUNK_BYTES);
    return ns_merkle_proof(tree, c->chunk, c->path, &c->depth);
}

int ns_label_open_host(const ns_label_params_t *p, const uint8_t *labels,
                       const ns_merkle_t *tree, const uint64_t *positions,
                       uint32_t k, ns_label_opening_t *out)
{
    int rc = ns_label_params_check(p);
    if (rc != NS_OK)
        return rc;
    for (uint32_t i = 0; i < k; i++) {
        uint64_t v = positions[i];
        ns_label_opening_t *o = &out[i];
        memset(o, 0, sizeof *o);
        o->position = v;
        if (v >= ns_label_count(p))
            return NS_ERR_INVAL;
        rc = s_open_chunk(labels, tree, v, &o->at);
        if (rc == NS_OK && v >= p->lanes) {
            uint64_t pv = v - p->lanes;
            rc = s_open_chunk(labels, tree, pv, &o->prev);
            uint64_t rv = ns_label_ref(p, v, labels + pv * NS_LABEL_BYTES);
            if (rc == NS_OK)
                rc = s_open_chunk(labels, tree, rv, &o->ref);
        }
        if (rc != NS_OK)
            return rc;
    }
    return NS_OK;
}

/* ---- labelling: the answer codec ----------------------------------------- */

static void s_put_le64(uint8_t *p, uint64_t v)
{
    s_put_le32(p, (uint32_t)v);
    s_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* The chunk index the opening of label `label` must carry, and its path
 * depth in a tree over all chunks. */
static bool s_chunk_shape_ok(const ns_label_params_t *p,
                             const ns_label_chunk_t *c, uint64_t label)
{
    uint64_t n_chunks = p->bytes / NS_LABEL_CHUNK_BYTES;
    uint64_t want = label / NS_LABEL_CHUNK_LABELS;
    return c->chunk == want &&
           c->depth == ns_merkle_proof_len((size_t)n_chunks, (size_t)want);
}

/* The label that the ref chunk of an opening must hold (row >= 1). */
static uint64_t s_opening_ref(const ns_label_params_t *p,
                              const ns_label_opening_t *o)
{
    uint64_t pv = o->position - p->lanes;
    return ns_label_ref(p, o->position, s_in_chunk(&o->prev, pv));
}

static int s_pack_chunk(ns_buf_t *out, const ns_label_chunk_t *c)
{
    uint8_t head[9];
    s_put_le64(head, c->chunk);
    head[8] = (uint8_t)c->depth;
    int rc = ns_buf_append(out, head, sizeof head);
    if (rc == NS_OK)
        rc = ns_buf_append(out, c->data, sizeof c->data);
    if (rc == NS_OK && c->depth > 0)
        rc = ns_buf_append(out, c->path, c->depth * NS_HASH_BYTES);
    return rc;
}

int ns_label_answer_pack(const ns_label_params_t *p, const ns_hash_t root,
                         const uint64_t *positions, uint32_t k,
                         const ns_label_opening_t *openings, ns_buf_t *out)
{
    uint8_t head[NS_HASH_BYTES + 4];
    int rc = NS_OK;
    out->len = 0;
    if (ns_label_params_check(p) != NS_OK || k == 0)
        return NS_ERR_INVAL;
    if (k > NS_CHAL_MAX_OPENINGS)
        return NS_ERR_TOOBIG;
    for (uint32_t i = 0; i < k; i++) {
        const ns_label_opening_t *o = &openings[i];
        uint64_t v = positions[i];
        if (o->position != v || v >= ns_label_count(p) ||
            !s_chunk_shape_ok(p, &o->at, v))
            return NS_ERR_INVAL;
        if (v >= p->lanes &&
            (!s_chunk_shape_ok(p, &o->prev, v - p->lanes) ||
             !s_chunk_shape_ok(p, &o->ref, s_opening_ref(p, o))))
            return NS_ERR_INVAL;
    }
    memcpy(head, root, NS_HASH_BYTES);
    s_put_le32(head + NS_HASH_BYTES, k);
    rc = ns_buf_append(out, head, sizeof head);
    for (uint32_t i = 0; i < k && rc == NS_OK; i++) {
        const ns_label_opening_t *o = &openings[i];
        uint8_t pos[8];
        s_put_le64(pos, o->position);
        rc = ns_buf_append(out, pos, sizeof pos);
        if (rc == NS_OK)
            rc = s_pack_chunk(out, &o->at);
        if (rc == NS_OK && o->position >= p->lanes)
            rc = s_pack_chunk(out, &o->prev);
        if (rc == NS_OK && o->position >= p->lanes)
            rc = s_pack_chunk(out, &o->ref);
    }
    if (rc != NS_OK)
        out->len = 0;
    return rc;
}

/* A cursor over hostile bytes: every take is checked against what
 * remains. */
typedef struct {
    const uint8_t *p;
    size_t left;
} s_cursor_t;

static bool s_take(s_cursor_t *c, void *out, size_t n)
{
    if (n > c->left)
        return false;
    memcpy(out, c->p, n);
    c->p += n;
    c->left -= n;
    return true;
}

/* One chunk that must hold label `label`. */
static int s_read_chunk_at(s_cursor_t *cur, const ns_label_params_t *p,
                           uint64_t label, ns_label_chunk_t *c)
{
    uint8_t head[9];
    if (!s_take(cur, head, sizeof head))
        return NS_ERR_TRUNCATED;
    c->chunk = s_le64(head);
    c->depth = head[8];
    /* the depth is checked before it sizes the path read: the tree's
     * depth is at most NS_MERKLE_MAX_DEPTH, path's capacity */
    if (!s_chunk_shape_ok(p, c, label))
        return NS_ERR_INVAL;
    if (!s_take(cur, c->data, sizeof c->data) ||
        !s_take(cur, c->path, c->depth * NS_HASH_BYTES))
        return NS_ERR_TRUNCATED;
    return NS_OK;
}

int ns_label_answer_read(const uint8_t *buf, size_t len,
                         const ns_label_params_t *p, ns_hash_t root,
                         uint64_t *positions, uint32_t *k,
                         ns_label_opening_t *openings)
{
    s_cursor_t cur = {buf, len};
    uint8_t head[NS_HASH_BYTES + 4];
    uint32_t n = 0;
    int rc = NS_OK;
    *k = 0;
    if (ns_label_params_check(p) != NS_OK)
        return NS_ERR_INVAL;
    if (!s_take(&cur, head, sizeof head))
        return NS_ERR_TRUNCATED;
    memcpy(root, head, NS_HASH_BYTES);
    n = s_le32(head + NS_HASH_BYTES);
    if (n == 0)
        return NS_ERR_INVAL;
    if (n > NS_CHAL_MAX_OPENINGS)
        return NS_ERR_TOOBIG;
    for (uint32_t i = 0; i < n && rc == NS_OK; i++) {
        ns_label_opening_t *o = &openings[i];
        uint8_t pos[8];
        memset(o, 0, sizeof *o);
        if (!s_take(&cur, pos, sizeof pos)) {
            rc = NS_ERR_TRUNCATED;
            break;
        }
        uint64_t v = s_le64(pos);
        o->position = positions[i] = v;
        if (v >= ns_label_count(p)) {
            rc = NS_ERR_INVAL;
            break;
        }
        rc = s_read_chunk_at(&cur, p, v, &o->at);
        if (rc == NS_OK && v >= p->lanes)
            rc = s_read_chunk_at(&cur, p, v - p->lanes, &o->prev);
        /* the ref index comes from the prev label just read */
        if (rc == NS_OK && v >= p->lanes)
            rc = s_read_chunk_at(&cur, p, s_opening_ref(p, o), &o->ref);
    }
    if (rc == NS_OK && cur.left != 0)
        rc = NS_ERR_TRAILING;
    if (rc == NS_OK)
        *k = n;
    return rc;
}

/* ---- integer matrix product ------------------------------------------- */

static uint64_t s_mulmod(uint64_t a, uint64_t b, uint64_t m)
{
    return (uint64_t)((s_u128)a * b % m);
}

static uint64_t s_powmod(uint64_t b, uint64_t e, uint64_t m)
{
    uint64_t r = 1 % m;
    b %= m;
    while (e) {
        if (e & 1)
            r = s_mulmod(r, b, m);
        b = s_mulmod(b, b, m);
        e >>= 1;
    }
    return r;
}

/* Deterministic Miller-Rabin for 32-bit n (bases 2, 7, 61). */
static bool s_is_prime(uint32_t n)
{
    if (n < 2)
        return false;
    for (uint32_t q = 2; q < 8; q++)
        if (n % q == 0)
            return n == q;
    uint32_t d = n - 1, s = 0;
    while ((d & 1) == 0) {
        d >>= 1;
        s++;
    }
    static const uint32_t bases[] = {2, 7, 61};
    for (size_t i = 0; i < 3; i++) {
        uint64_t a = bases[i] % n;
        if (a == 0)
            continue;
        uint64_t x = s_powmod(a, d, n);
        if (x == 1 || x == n - 1)
            continue;
        bool composite = true;
        for (uint32_t r = 1; r < s && composite; r++) {
            x = s_mulmod(x, x, n);
            if (x == n - 1)
                composite = false;
        }
        if (composite)
            return false;
    }
    return true;
}

int ns_imatmul_params_check(const ns_imatmul_params_t *p)
{
    if (p->n == 0 || p->n % NS_IMATMUL_TILE != 0 || p->n > NS_IMATMUL_MAX_N)
        return NS_ERR_INVAL;
    if (p->p < 3 || p->p >= (UINT32_C(1) << 31) || !s_is_prime(p->p))
        return NS_ERR_INVAL;
    return NS_OK;
}

static uint64_t s_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint32_t ns_imatmul_entry(const ns_imatmul_params_t *p, uint32_t w, uint64_t i)
{
    uint64_t k0 = s_le64(p->seed), k1 = s_le64(p->seed + 8);
    uint64_t z = s_mix(s_mix(i ^ k0) ^ k1 ^ w);
    return (uint32_t)(((z >> 32) * p->p) >> 32);
}

void ns_imatmul_fill(const ns_imatmul_params_t *p, uint32_t *a, uint32_t *b)
{
    uint64_t nn = (uint64_t)p->n * p->n;
    for (uint64_t i = 0; i < nn; i++) {
        a[i] = ns_imatmul_entry(p, 0, i);
        b[i] = ns_imatmul_entry(p, 1, i);
    }
}

void ns_imatmul_host(const ns_imatmul_params_t *p, const uint32_t *a,
                     const uint32_t *b, uint32_t *c)
{
    uint32_t n = p->n;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++) {
            s_u128 acc = 0;
            for (uint32_t k = 0; k < n; k++)
                acc += (uint64_t)a[(size_t)i * n + k] * b[(size_t)k * n + j];
            c[(size_t)i * n + j] = (uint32_t)(acc % p->p);
        }
}

uint64_t ns_imatmul_deadline_claim_us(const ns_imatmul_params_t *p,
                                      const ns_devinfo_t *claim)
{
    const ns_chal_costs_t *c = ns_chal_costs(claim->type);
    double n = p->n;
    double moved = 12.0 * n * n; /* A, B written; C read back */
    double s = s_at_rate(moved, claim->gbps * 1e9) +
               s_at_rate(n * n * n * c->mac, claim->gflops * 1e9);
    return s_deadline(s);
}

uint64_t ns_imatmul_deadline_us(const ns_imatmul_params_t *p, double gbps,
                                double gflops)
{
    ns_devinfo_t d = s_untyped(gbps, gflops);
    return ns_imatmul_deadline_claim_us(p, &d);
}

/* y[r][i] = sum_j M[i][j] x[r][j] mod p for every round r, where M is
 * matrix w of the challenge (regenerated, never stored) or c. One pass
 * over the matrix serves every round. */
static void s_matvec(const ns_imatmul_params_t *p, uint32_t w,
                     const uint32_t *c, const uint64_t *x, uint64_t *y,
                     uint32_t rounds)
{
    uint32_t n = p->n;
    s_u128 acc[NS_IMATMUL_MAX_ROUNDS];
    for (uint32_t i = 0; i < n; i++) {
        memset(acc, 0, sizeof acc);
        for (uint32_t j = 0; j < n; j++) {
            uint64_t idx = (uint64_t)i * n + j;
            uint64_t m = c ? c[idx] : ns_imatmul_entry(p, w, idx);
            for (uint32_t r = 0; r < rounds; r++)
                acc[r] += m * x[(size_t)r * n + j];
        }
        for (uint32_t r = 0; r < rounds; r++)
            y[(size_t)r * n + i] = (uint64_t)(acc[r] % p->p);
    }
}

int ns_imatmul_verify(const ns_imatmul_params_t *p, const uint32_t *c,
                      const uint8_t secret[32], uint32_t rounds,
                      uint64_t elapsed_us, uint64_t deadline_us,
                      ns_chal_verdict *verdict, char *why, size_t whylen)
{
    uint64_t *r = NULL, *br = NULL, *abr = NULL, *cr = NULL;
    int rc = NS_OK;
    *verdict = NS_CHAL_WRONG;
    ns_cl_errf(why, whylen, "ok");
    if (ns_imatmul_params_check(p) != NS_OK || rounds < 1 ||
        rounds > NS_IMATMUL_MAX_ROUNDS) {
        ns_cl_errf(why, whylen, "bad parameters");
        return NS_ERR_INVAL;
    }
    size_t n = p->n, nn = n * n;
    for (size_t i = 0; i < nn; i++)
        if (c[i] >= p->p) {
            ns_cl_errf(why, whylen, "entry %zu is not reduced mod p", i);
            return NS_OK;
        }
    r = malloc(rounds * n * sizeof *r);
    br = malloc(rounds * n * sizeof *br);
    abr = malloc(rounds * n * sizeof *abr);
    cr = malloc(rounds * n * sizeof *cr);
    uint8_t *stream = malloc(n * 8);
    if (!r || !br || !abr || !cr || !stream) {
        ns_cl_errf(why, whylen, "out of memory");
        rc = NS_ERR_NOMEM;
        goto out;
    }
    for (uint32_t k = 0; k < rounds; k++) {
        uint8_t ctr[4], key[randombytes_SEEDBYTES];
        ctr[0] = (uint8_t)(k >> 24);
        ctr[1] = (uint8_t)(k >> 16);
        ctr[2] = (uint8_t)(k >> 8);
        ctr[3] = (uint8_t)k;
        ns_hash2(key, secret, 32, ctr, sizeof ctr);
        randombytes_buf_deterministic(stream, n * 8, key);
        /* 2^64 mod p < 2^31: a bias below 2^-32, irrelevant here */
        for (size_t j = 0; j < n; j++)
            r[k * n + j] = s_le64(stream + 8 * j) % p->p;
        sodium_memzero(key, sizeof key);
    }
    s_matvec(p, 1, NULL, r, br, rounds);   /* B r */
    s_matvec(p, 0, NULL, br, abr, rounds); /* A (B r) */
    s_matvec(p, 0, c, r, cr, rounds);      /* C r */
    for (uint32_t k = 0; k < rounds; k++)
        for (size_t i = 0; i < n; i++)
            if (abr[k * n + i] != cr[k * n + i]) {
                ns_cl_errf(why, whylen, "round %u: row %zu of C r differs", k,
                           i);
                goto out;
            }
    if (elapsed_us > deadline_us) {
        *verdict = NS_CHAL_LATE;
        ns_cl_errf(why, whylen, "answer after %llu us, deadline %llu us",
                   (unsigned long long)elapsed_us,
                   (unsigned long long)deadline_us);
    } else {
        *verdict = NS_CHAL_PASSED;
    }
out:
    free(r);
    free(br);
    free(abr);
    free(cr);
    free(stream);
    return rc;
}

/* ---- the prover on an OpenCL device ----------------------------------- */

#define S_MAX_LOG 400 /* build log bytes kept in err */
/* Work-group size of the 1-D kernels: fixed, so that a driver that
 * specialises kernels per launch shape (PoCL) compiles them once, in the
 * warm-up of ns_chal_prover_new, never inside a timed proof. Lanes are a
 * multiple of it; other global sizes are rounded up to it. */
#define S_WG 64

struct ns_chal_prover {
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue queue;
    cl_program label_prog, imm_prog;
    cl_kernel k_label, k_leaves, k_nodes, k_fill, k_mm;
    cl_ulong max_alloc;  /* largest buffer */
    cl_ulong global_mem; /* all buffers */
    /* the last labelling, kept for ns_label_open */
    cl_mem labels, tree;
    ns_label_params_t params;
    bool proved;
    ns_merkle_t host_tree; /* downloaded at the first open */
    uint64_t level_n[NS_MERKLE_MAX_DEPTH + 2];
    size_t level_off[NS_MERKLE_MAX_DEPTH + 2];
    size_t levels;
    uint64_t tree_nodes;
};

/* The challenge keeps its own wording for a failed call ("what failed
 * (OpenCL error N)"), which ns_cl_fail words otherwise. */
static int s_cl_fail(char *err, size_t errlen, const char *what, cl_int cl)
{
    ns_cl_errf(err, errlen, "%s failed (OpenCL error %d)", what, (int)cl);
    return NS_ERR_OPENCL;
}

/* Build one embedded kernel file; err gets the log's first bytes. */
static int s_build(ns_chal_prover_t *pr, const char *name, cl_program *prog,
                   char *err, size_t errlen)
{
    const ns_builtin_t *b = ns_builtin_find(name);
    cl_int cl = CL_SUCCESS;
    if (!b) {
        ns_cl_errf(err, errlen, "kernel %s is not embedded", name);
        return NS_ERR_NOTFOUND;
    }
    const char *text = b->source;
    size_t len = b->source_len;
    *prog = clCreateProgramWithSource(pr->ctx, 1, &text, &len, &cl);
    if (!*prog)
        return s_cl_fail(err, errlen, "clCreateProgramWithSource", cl);
    cl = clBuildProgram(*prog, 1, &pr->dev, "", NULL, NULL);
    if (cl != CL_SUCCESS) {
        char log[S_MAX_LOG + 1];
        size_t size = 0;
        memset(log, 0, sizeof log);
        if (clGetProgramBuildInfo(*prog, pr->dev, CL_PROGRAM_BUILD_LOG,
                                  S_MAX_LOG, log, &size) != CL_SUCCESS)
            log[0] = '\0';
        for (size_t i = 0; log[i]; i++)
            if ((unsigned char)log[i] < 0x20 || (unsigned char)log[i] >= 0x7f)
                log[i] = ' ';
        ns_cl_errf(err, errlen, "building %s: %s", name, log);
        return NS_ERR_OPENCL;
    }
    return NS_OK;
}

static cl_kernel s_kernel(cl_program prog, const char *name, int *rc)
{
    cl_int cl = CL_SUCCESS;
    cl_kernel k = clCreateKernel(prog, name, &cl);
    if (!k)
        *rc = NS_ERR_OPENCL;
    return k;
}

static void s_release_label(ns_chal_prover_t *pr)
{
    if (pr->labels)
        clReleaseMemObject(pr->labels);
    if (pr->tree)
        clReleaseMemObject(pr->tree);
    pr->labels = pr->tree = NULL;
    ns_merkle_release(&pr->host_tree);
    pr->proved = false;
}

void ns_chal_prover_destroy(ns_chal_prover_t **pp)
{
    if (!pp || !*pp)
        return;
    ns_chal_prover_t *pr = *pp;
    s_release_label(pr);
    cl_kernel ks[] = {pr->k_label, pr->k_leaves, pr->k_nodes, pr->k_fill,
                      pr->k_mm};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        if (ks[i])
            clReleaseKernel(ks[i]);
    if (pr->label_prog)
        clReleaseProgram(pr->label_prog);
    if (pr->imm_prog)
        clReleaseProgram(pr->imm_prog);
    if (pr->queue)
        clReleaseCommandQueue(pr->queue);
    if (pr->ctx)
        clReleaseContext(pr->ctx);
    free(pr);
    *pp = NULL;
}

static int s_warm_up(ns_chal_prover_t *pr, char *err, size_t errlen);

ns_chal_prover_t *ns_chal_prover_new(uint32_t device_index, int *err,
                                     char *errbuf, size_t errlen)
{
    ns_chal_prover_t *pr = calloc(1, sizeof *pr);
    cl_int cl = CL_SUCCESS;
    cl_bool little = CL_FALSE;
    int major = 1, rc;
    ns_cl_errf(errbuf, errlen, "ok");
    if (!pr) {
        rc = NS_ERR_NOMEM;
        goto fail;
    }
    rc = ns_cl_device_at(device_index, NULL, &pr->dev, &major);
    if (rc != NS_OK) {
        ns_cl_errf(errbuf, errlen, "no OpenCL device %u", device_index);
        goto fail;
    }
    if (clGetDeviceInfo(pr->dev, CL_DEVICE_ENDIAN_LITTLE, sizeof little,
                        &little, NULL) != CL_SUCCESS ||
        !little) {
        ns_cl_errf(errbuf, errlen, "device is not little-endian");
        rc = NS_ERR_OPENCL;
        goto fail;
    }
    if (clGetDeviceInfo(pr->dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE,
                        sizeof pr->max_alloc, &pr->max_alloc,
                        NULL) != CL_SUCCESS ||
        clGetDeviceInfo(pr->dev, CL_DEVICE_GLOBAL_MEM_SIZE,
                        sizeof pr->global_mem, &pr->global_mem,
                        NULL) != CL_SUCCESS) {
        rc = s_cl_fail(errbuf, errlen, "clGetDeviceInfo", cl);
        goto fail;
    }
    const char *call = NULL;
    if (ns_cl_context_queue(pr->dev, major, 0, &pr->ctx, &pr->queue, &cl,
                            &call) != NS_OK) {
        rc = s_cl_fail(errbuf, errlen, call, cl);
        goto fail;
    }
    rc = s_build(pr, "challenge_label", &pr->label_prog, errbuf, errlen);
    if (rc == NS_OK)
        rc = s_build(pr, "challenge_imatmul", &pr->imm_prog, errbuf, errlen);
    if (rc != NS_OK)
        goto fail;
    pr->k_label = s_kernel(pr->label_prog, "challenge_label", &rc);
    pr->k_leaves = s_kernel(pr->label_prog, "challenge_label_leaves", &rc);
    pr->k_nodes = s_kernel(pr->label_prog, "challenge_label_nodes", &rc);
    pr->k_fill = s_kernel(pr->imm_prog, "challenge_imatmul_fill", &rc);
    pr->k_mm = s_kernel(pr->imm_prog, "challenge_imatmul", &rc);
    if (rc != NS_OK) {
        ns_cl_errf(errbuf, errlen, "clCreateKernel failed");
        goto fail;
    }
    rc = s_warm_up(pr, errbuf, errlen);
    if (rc != NS_OK)
        goto fail;
    *err = NS_OK;
    return pr;
fail:
    ns_chal_prover_destroy(&pr);
    *err = rc;
    return NULL;
}

static size_t s_round_up(uint64_t n, size_t to)
{
    return (size_t)((n + to - 1) / to * to);
}

/* Set kernel arguments in order; sizes and pointers in pairs. */
static cl_int s_args(cl_kernel k, unsigned n, const size_t *sizes,
                     const void *const *vals)
{
    for (unsigned i = 0; i < n; i++) {
        cl_int cl = clSetKernelArg(k, i, sizes[i], vals[i]);
        if (cl != CL_SUCCESS)
            return cl;
    }
    return CL_SUCCESS;
}

int ns_label_prove(ns_chal_prover_t *pr, const ns_label_params_t *p,
                   const uint8_t seed[32], ns_hash_t root, uint64_t *device_us,
                   char *err, size_t errlen)
{
    uint64_t t0 = ns_mono_us();
    cl_int cl = CL_SUCCESS;
    ns_cl_errf(err, errlen, "ok");
    s_release_label(pr);
    int rc = ns_label_params_check(p);
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "bad labelling parameters");
        return rc;
    }
    uint64_t n_chunks = p->bytes / NS_LABEL_CHUNK_BYTES;
    pr->levels = 0;
    pr->tree_nodes = 0;
    for (uint64_t k = n_chunks;; k = (k + 1) / 2) {
        pr->level_off[pr->levels] = (size_t)pr->tree_nodes;
        pr->level_n[pr->levels++] = k;
        pr->tree_nodes += k;
        if (k == 1)
            break;
    }
    uint64_t tree_bytes = pr->tree_nodes * NS_HASH_BYTES;
    if (p->bytes > pr->max_alloc || tree_bytes > pr->max_alloc ||
        p->bytes + tree_bytes > pr->global_mem) {
        ns_cl_errf(err, errlen, "%llu bytes of labels do not fit the device",
                   (unsigned long long)p->bytes);
        return NS_ERR_TOOBIG;
    }
    pr->labels =
        clCreateBuffer(pr->ctx, CL_MEM_READ_WRITE, (size_t)p->bytes, NULL, &cl);
    if (!pr->labels) {
        rc = s_cl_fail(err, errlen, "clCreateBuffer(labels)", cl);
        goto fail;
    }
    pr->tree = clCreateBuffer(pr->ctx, CL_MEM_READ_WRITE, (size_t)tree_bytes,
                              NULL, &cl);
    if (!pr->tree) {
        rc = s_cl_fail(err, errlen, "clCreateBuffer(tree)", cl);
        goto fail;
    }

    cl_uint8 seed_words;
    for (int i = 0; i < 8; i++)
        seed_words.s[i] = s_le32(seed + 4 * i);
    cl_ulong lanes = p->lanes;
    cl_uint steps = p->steps;
    size_t global = p->lanes, local = S_WG;
    for (cl_uint s = 0; s < p->segments; s++) {
        const size_t sz[] = {sizeof(cl_mem), sizeof seed_words, sizeof lanes,
                             sizeof steps, sizeof s};
        const void *const val[] = {&pr->labels, &seed_words, &lanes, &steps,
                                   &s};
        cl = s_args(pr->k_label, 5, sz, val);
        if (cl == CL_SUCCESS)
            cl = clEnqueueNDRangeKernel(pr->queue, pr->k_label, 1, NULL,
                                        &global, &local, 0, NULL, NULL);
        if (cl != CL_SUCCESS) {
            rc = s_cl_fail(err, errlen, "challenge_label", cl);
            goto fail;
        }
    }
    cl_ulong chunks = n_chunks;
    {
        const size_t sz[] = {sizeof(cl_mem), sizeof(cl_mem), sizeof chunks};
        const void *const val[] = {&pr->labels, &pr->tree, &chunks};
        global = s_round_up(n_chunks, S_WG);
        cl = s_args(pr->k_leaves, 3, sz, val);
        if (cl == CL_SUCCESS)
            cl = clEnqueueNDRangeKernel(pr->queue, pr->k_leaves, 1, NULL,
                                        &global, &local, 0, NULL, NULL);
        if (cl != CL_SUCCESS) {
            rc = s_cl_fail(err, errlen, "challenge_label_leaves", cl);
            goto fail;
        }
    }
    for (size_t l = 1; l < pr->levels; l++) {
        cl_ulong below = pr->level_off[l - 1], n_below = pr->level_n[l - 1];
        cl_ulong above = pr->level_off[l];
        const size_t sz[] = {sizeof(cl_mem), sizeof below, sizeof n_below,
                             sizeof above};
        const void *const val[] = {&pr->tree, &below, &n_below, &above};
        global = s_round_up(pr->level_n[l], S_WG);
        cl = s_args(pr->k_nodes, 4, sz, val);
        if (cl == CL_SUCCESS)
            cl = clEnqueueNDRangeKernel(pr->queue, pr->k_nodes, 1, NULL,
                                        &global, &local, 0, NULL, NULL);
        if (cl != CL_SUCCESS) {
            rc = s_cl_fail(err, errlen, "challenge_label_nodes", cl);
            goto fail;
        }
    }
    cl = clEnqueueReadBuffer(pr->queue, pr->tree, CL_TRUE,
                             (size_t)(pr->tree_nodes - 1) * NS_HASH_BYTES,
                             NS_HASH_BYTES, root, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        rc = s_cl_fail(err, errlen, "reading the root", cl);
        goto fail;
    }
    pr->params = *p;
    pr->proved = true;
    if (device_us)
        *device_us = ns_mono_us() - t0;
    return NS_OK;
fail:
    s_release_label(pr);
    return rc;
}

/* The tree as an ns_merkle_t on the host (once per labelling). */
static int s_download_tree(ns_chal_prover_t *pr, char *err, size_t errlen)
{
    ns_merkle_t *t = &pr->host_tree;
    if (t->nodes)
        return NS_OK;
    t->nodes = malloc((size_t)pr->tree_nodes * NS_HASH_BYTES);
    t->level_off = malloc(pr->levels * sizeof *t->level_off);
    if (!t->nodes || !t->level_off) {
        ns_merkle_release(t);
        return NS_ERR_NOMEM;
    }
    memcpy(t->level_off, pr->level_off, pr->levels * sizeof *t->level_off);
    t->n_leaves = (size_t)pr->level_n[0];
    t->n_levels = pr->levels;
    cl_int cl = clEnqueueReadBuffer(pr->queue, pr->tree, CL_TRUE, 0,
                                    (size_t)pr->tree_nodes * NS_HASH_BYTES,
                                    t->nodes, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        ns_merkle_release(t);
        return s_cl_fail(err, errlen, "reading the tree", cl);
    }
    return NS_OK;
}

/* Queue the read of the chunk holding label v into c (path filled too). */
static cl_int s_read_chunk(ns_chal_prover_t *pr, uint64_t v,
                           ns_label_chunk_t *c)
{
    c->chunk = v / NS_LABEL_CHUNK_LABELS;
    if (ns_merkle_proof(&pr->host_tree, c->chunk, c->path, &c->depth) != NS_OK)
        return CL_INVALID_VALUE;
    return clEnqueueReadBuffer(pr->queue, pr->labels, CL_FALSE,
                               (size_t)c->chunk * NS_LABEL_CHUNK_BYTES,
                               NS_LABEL_CHUNK_BYTES, c->data, 0, NULL, NULL);
}

int ns_label_open(ns_chal_prover_t *pr, const uint64_t *positions, uint32_t k,
                  ns_label_opening_t *out, char *err, size_t errlen)
{
    const ns_label_params_t *p = &pr->params;
    cl_int cl = CL_SUCCESS;
    ns_cl_errf(err, errlen, "ok");
    if (!pr->proved) {
        ns_cl_errf(err, errlen, "nothing proved yet");
        return NS_ERR_STATE;
    }
    if (k > NS_CHAL_MAX_OPENINGS)
        return NS_ERR_TOOBIG;
    int rc = s_download_tree(pr, err, errlen);
    if (rc != NS_OK)
        return rc;
    /* the labels and their predecessors, then the refs they name */
    for (uint32_t i = 0; i < k && cl == CL_SUCCESS; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].position = positions[i];
        if (positions[i] >= ns_label_count(p))
            return NS_ERR_INVAL;
        cl = s_read_chunk(pr, positions[i], &out[i].at);
        if (cl == CL_SUCCESS && positions[i] >= p->lanes)
            cl = s_read_chunk(pr, positions[i] - p->lanes, &out[i].prev);
    }
    if (cl == CL_SUCCESS)
        cl = clFinish(pr->queue);
    for (uint32_t i = 0; i < k && cl == CL_SUCCESS; i++) {
        uint64_t v = positions[i];
        if (v < p->lanes)
            continue;
        uint64_t rv =
            ns_label_ref(p, v, s_in_chunk(&out[i].prev, v - p->lanes));
        cl = s_read_chunk(pr, rv, &out[i].ref);
    }
    if (cl == CL_SUCCESS)
        cl = clFinish(pr->queue);
    if (cl != CL_SUCCESS) {
        clFinish(pr->queue); /* no read may still target out */
        return s_cl_fail(err, errlen, "reading chunks", cl);
    }
    return NS_OK;
}

int ns_imatmul_prove(ns_chal_prover_t *pr, const ns_imatmul_params_t *p,
                     uint32_t *c, uint64_t *device_us, char *err, size_t errlen)
{
    uint64_t t0 = ns_mono_us();
    cl_mem a = NULL, b = NULL, cm = NULL;
    cl_int cl = CL_SUCCESS;
    int rc = ns_imatmul_params_check(p);
    ns_cl_errf(err, errlen, "ok");
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "bad matrix parameters");
        return rc;
    }
    size_t nn = (size_t)p->n * p->n, bytes = nn * sizeof(uint32_t);
    if (bytes > pr->max_alloc || 3 * (uint64_t)bytes > pr->global_mem) {
        ns_cl_errf(err, errlen, "three %zu-byte matrices do not fit the device",
                   bytes);
        return NS_ERR_TOOBIG;
    }
    a = clCreateBuffer(pr->ctx, CL_MEM_READ_WRITE, bytes, NULL, &cl);
    if (a)
        b = clCreateBuffer(pr->ctx, CL_MEM_READ_WRITE, bytes, NULL, &cl);
    if (b)
        cm = clCreateBuffer(pr->ctx, CL_MEM_WRITE_ONLY, bytes, NULL, &cl);
    if (!cm) {
        rc = s_cl_fail(err, errlen, "clCreateBuffer", cl);
        goto out;
    }
    cl_ulong count = nn, k0 = s_le64(p->seed), k1 = s_le64(p->seed + 8);
    cl_uint mod = p->p, n = p->n;
    for (cl_uint w = 0; w < 2 && cl == CL_SUCCESS; w++) {
        const size_t sz[] = {sizeof(cl_mem), sizeof count, sizeof k0,
                             sizeof k1,      sizeof w,     sizeof mod};
        const void *const val[] = {w ? &b : &a, &count, &k0, &k1, &w, &mod};
        size_t global = s_round_up(nn, S_WG), local = S_WG;
        cl = s_args(pr->k_fill, 6, sz, val);
        if (cl == CL_SUCCESS)
            cl = clEnqueueNDRangeKernel(pr->queue, pr->k_fill, 1, NULL, &global,
                                        &local, 0, NULL, NULL);
    }
    if (cl == CL_SUCCESS) {
        const size_t sz[] = {sizeof(cl_mem), sizeof(cl_mem), sizeof(cl_mem),
                             sizeof n, sizeof mod};
        const void *const val[] = {&a, &b, &cm, &n, &mod};
        /* (16, 16) work-groups whenever n is a multiple of 256, the shape
         * the warm-up compiled; narrower ones for other n */
        const size_t global[2] = {p->n / NS_IMATMUL_TILE, p->n};
        size_t local[2] = {16, 16};
        while (global[0] % local[0] != 0)
            local[0] /= 2;
        cl = s_args(pr->k_mm, 5, sz, val);
        if (cl == CL_SUCCESS)
            cl = clEnqueueNDRangeKernel(pr->queue, pr->k_mm, 2, NULL, global,
                                        local, 0, NULL, NULL);
    }
    if (cl == CL_SUCCESS)
        cl = clEnqueueReadBuffer(pr->queue, cm, CL_TRUE, 0, bytes, c, 0, NULL,
                                 NULL);
    if (cl != CL_SUCCESS) {
        clFinish(pr->queue);
        rc = s_cl_fail(err, errlen, "challenge_imatmul", cl);
        goto out;
    }
    if (device_us)
        *device_us = ns_mono_us() - t0;
out:
    if (a)
        clReleaseMemObject(a);
    if (b)
        clReleaseMemObject(b);
    if (cm)
        clReleaseMemObject(cm);
    return rc;
}

/* One smallest run of each challenge, so that lazy per-launch compilation
 * happens here and not in a timed proof. */
static int s_warm_up(ns_chal_prover_t *pr, char *err, size_t errlen)
{
    ns_label_params_t lp;
    ns_imatmul_params_t ip = {.n = 256, .p = 3};
    uint8_t seed[32] = {0};
    ns_hash_t root;
    uint32_t *c = malloc(256 * 256 * sizeof *c);
    if (!c)
        return NS_ERR_NOMEM;
    int rc = ns_label_params_init(&lp, NS_LABEL_MIN_BYTES, 0);
    if (rc == NS_OK)
        rc = ns_label_prove(pr, &lp, seed, root, NULL, err, errlen);
    s_release_label(pr);
    if (rc == NS_OK)
        rc = ns_imatmul_prove(pr, &ip, c, NULL, err, errlen);
    free(c);
    return rc;
}

int ns_label_prove_answer(ns_chal_prover_t *pr, const ns_label_params_t *p,
                          const uint8_t seed[32], uint32_t k, ns_hash_t root,
                          uint64_t *device_us, ns_buf_t *out, char *err,
                          size_t errlen)
{
    uint64_t t0 = ns_mono_us();
    uint64_t *positions = NULL;
    ns_label_opening_t *openings = NULL;
    int rc = NS_OK;
    ns_cl_errf(err, errlen, "ok");
    out->len = 0;
    if (k == 0 || k > NS_CHAL_MAX_OPENINGS) {
        ns_cl_errf(err, errlen, "%u openings: must be 1..%d", k,
                   NS_CHAL_MAX_OPENINGS);
        return k == 0 ? NS_ERR_INVAL : NS_ERR_TOOBIG;
    }
    rc = ns_label_prove(pr, p, seed, root, NULL, err, errlen);
    if (rc != NS_OK)
        goto out;
    positions = calloc(k, sizeof *positions);
    openings = calloc(k, sizeof *openings);
    if (!positions || !openings) {
        ns_cl_errf(err, errlen, "no memory for %u openings", k);
        rc = NS_ERR_NOMEM;
        goto out;
    }
    /* Fiat-Shamir: the positions follow from the root just committed */
    ns_label_positions(p, root, seed, k, positions);
    rc = ns_label_open(pr, positions, k, openings, err, errlen);
    if (rc != NS_OK)
        goto out;
    rc = ns_label_answer_pack(p, root, positions, k, openings, out);
    if (rc != NS_OK) {
        ns_cl_errf(err, errlen, "packing the answer: %s", ns_strerror(rc));
        goto out;
    }
    if (device_us)
        *device_us = ns_mono_us() - t0;
out:
    free(openings);
    free(positions);
    return rc;
}

/* ---- a challenge request ------------------------------------------------ */

int ns_chal_request_check(const ns_chal_request_t *r, uint64_t max_alloc_bytes,
                          char *err, size_t errlen)
{
    int rc;
    ns_cl_errf(err, errlen, "ok");
    if (r->kind == NS_CHAL_KIND_LABEL) {
        rc = ns_label_params_check(&r->label);
        if (rc != NS_OK) {
            ns_cl_errf(err, errlen,
                       "bad labelling parameters (bytes %llu, lanes %u, "
                       "segments %u, steps %u)",
                       (unsigned long long)r->label.bytes, r->label.lanes,
                       r->label.segments, r->label.steps);
            return rc;
        }
        if (r->k == 0 || r->k > NS_CHAL_MAX_OPENINGS) {
            ns_cl_errf(err, errlen, "%u openings: must be 1..%d", r->k,
                       NS_CHAL_MAX_OPENINGS);
            return r->k == 0 ? NS_ERR_INVAL : NS_ERR_TOOBIG;
        }
        if (max_alloc_bytes && r->label.bytes > max_alloc_bytes) {
            ns_cl_errf(err, errlen,
                       "a labelling of %llu bytes is over the device's "
                       "largest allocation (%llu bytes)",
                       (unsigned long long)r->label.bytes,
                       (unsigned long long)max_alloc_bytes);
            return NS_ERR_TOOBIG;
        }
        return NS_OK;
    }
    if (r->kind == NS_CHAL_KIND_IMATMUL) {
        ns_imatmul_params_t ip = {.n = r->imatmul.n, .p = r->imatmul.p};
        if (r->imatmul.n > NS_CHAL_REQUEST_MAX_N) {
            ns_cl_errf(err, errlen, "matrix order %u is over %d", r->imatmul.n,
                       NS_CHAL_REQUEST_MAX_N);
            return NS_ERR_TOOBIG;
        }
        if (ns_imatmul_params_check(&ip) != NS_OK) {
            ns_cl_errf(err, errlen, "bad matrix parameters (n %u, p %u)",
                       r->imatmul.n, r->imatmul.p);
            return NS_ERR_INVAL;
        }
        uint64_t bytes = ns_chal_imatmul_answer_bytes(r->imatmul.n);
        if (max_alloc_bytes && bytes > max_alloc_bytes) {
            ns_cl_errf(err, errlen,
                       "a %llu-byte matrix is over the device's largest "
                       "allocation (%llu bytes)",
                       (unsigned long long)bytes,
                       (unsigned long long)max_alloc_bytes);
            return NS_ERR_TOOBIG;
        }
        return NS_OK;
    }
    ns_cl_errf(err, errlen, "unknown challenge kind %u", r->kind);
    return NS_ERR_INVAL;
}
