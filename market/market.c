/* market.c - market messages and the pure decisions behind them. */
#include "nightshift/market.h"
#include "nightshift/mp.h"
#include "nightshift/policy.h"
#include "nightshift/util.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define S_PACKER(b, w, pk)                                                     \
    ns_mp_writer_t w;                                                          \
    msgpack_packer pk;                                                         \
    ns_mp_writer_init(&w, &pk, (b))

/* ---- messages --------------------------------------------------------------
 */

int ns_announce_encode(const ns_announce_t *a, ns_buf_t *out)
{
    if (a->n_excluded > NS_MAX_EXCLUDED)
        return NS_ERR_TOOBIG;
    if (a->n_inputs > NS_MAX_ANN_INPUTS)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    bool draw = a->draw && a->draw != NS_DRAW_ALL;
    msgpack_pack_array(&pk, draw ? 18 : a->n_inputs ? 17 : 16);
    ns_mp_bin(&pk, a->job_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, a->desc_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, a->requester, NS_ID_BYTES);
    ns_mp_str(&pk, a->endpoint);
    msgpack_pack_array(&pk, 7);
    msgpack_pack_uint64(&pk, a->reqs.min_mem_bytes);
    msgpack_pack_uint32(&pk, a->reqs.device_type);
    msgpack_pack_uint32(&pk, a->reqs.min_cl_major);
    msgpack_pack_uint32(&pk, a->reqs.min_cl_minor);
    ns_mp_str(&pk, a->reqs.region);
    msgpack_pack_uint64(&pk, a->reqs.max_buffer_bytes);
    msgpack_pack_uint64(&pk, a->reqs.buffer_bytes);
    msgpack_pack_uint64(&pk, a->max_price);
    msgpack_pack_uint64(&pk, a->collateral);
    msgpack_pack_uint64(&pk, a->work_flops);
    msgpack_pack_uint64(&pk, a->n_items);
    msgpack_pack_uint64(&pk, a->input_bytes);
    msgpack_pack_uint32(&pk, a->bid_window_ms);
    msgpack_pack_uint64(&pk, a->deadline_ms);
    msgpack_pack_uint32(&pk, a->round);
    msgpack_pack_uint32(&pk, a->n_excluded);
    ns_mp_bin(&pk, a->excluded, (size_t)a->n_excluded * NS_ID_BYTES);
    if (a->n_inputs || draw) {
        msgpack_pack_array(&pk, a->n_inputs);
        for (uint32_t i = 0; i < a->n_inputs; i++) {
            msgpack_pack_array(&pk, 2);
            ns_mp_bin(&pk, a->inputs[i].hash, NS_HASH_BYTES);
            msgpack_pack_uint64(&pk, a->inputs[i].size);
        }
    }
    if (draw)
        msgpack_pack_uint32(&pk, a->draw);
    return w.err;
}

int ns_announce_decode(const uint8_t *buf, size_t len, ns_announce_t *a)
{
    ns_mpr_t r;
    memset(a, 0, sizeof *a);
    ns_mpr_init(&r, buf, len);
    uint32_t n_fields = 0;
    if (ns_mpr_array(&r, &n_fields, 18) == NS_OK && n_fields < 16)
        return NS_ERR_INVAL;
    ns_mpr_bin_exact(&r, a->job_id, NS_HASH_BYTES);
    ns_mpr_bin_exact(&r, a->desc_id, NS_HASH_BYTES);
    ns_mpr_bin_exact(&r, a->requester, NS_ID_BYTES);
    ns_mpr_str(&r, a->endpoint, NS_ENDPOINT_MAX - 1);
    ns_mpr_array_exact(&r, 7);
    ns_mpr_uint(&r, &a->reqs.min_mem_bytes);
    ns_mpr_u32(&r, &a->reqs.device_type);
    ns_mpr_u32(&r, &a->reqs.min_cl_major);
    ns_mpr_u32(&r, &a->reqs.min_cl_minor);
    ns_mpr_str(&r, a->reqs.region, NS_MAX_REGION);
    ns_mpr_uint(&r, &a->reqs.max_buffer_bytes);
    ns_mpr_uint(&r, &a->reqs.buffer_bytes);
    ns_mpr_uint(&r, &a->max_price);
    ns_mpr_uint(&r, &a->collateral);
    ns_mpr_uint(&r, &a->work_flops);
    ns_mpr_uint(&r, &a->n_items);
    ns_mpr_uint(&r, &a->input_bytes);
    ns_mpr_u32(&r, &a->bid_window_ms);
    ns_mpr_uint(&r, &a->deadline_ms);
    ns_mpr_u32(&r, &a->round);
    ns_mpr_u32(&r, &a->n_excluded);
    const uint8_t *ex = NULL;
    size_t ex_len = 0;
    ns_mpr_bin(&r, &ex, &ex_len, (size_t)NS_MAX_EXCLUDED * NS_ID_BYTES);
    if (n_fields >= 17 &&
        ns_mpr_array(&r, &a->n_inputs, NS_MAX_ANN_INPUTS) == NS_OK) {
        for (uint32_t i = 0; i < a->n_inputs; i++) {
            ns_mpr_array_exact(&r, 2);
            ns_mpr_bin_exact(&r, a->inputs[i].hash, NS_HASH_BYTES);
            ns_mpr_uint(&r, &a->inputs[i].size);
        }
    }
    if (n_fields == 18) {
        ns_mpr_u32(&r, &a->draw);
        if (r.err == NS_OK && a->draw == 0)
            return NS_ERR_INVAL; /* a draw of nobody */
    }
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    for (uint32_t i = 0; i < a->n_inputs; i++)
        if (a->inputs[i].size == 0)
            return NS_ERR_INVAL;
    if (ex_len != (size_t)a->n_excluded * NS_ID_BYTES ||
        a->reqs.device_type > NS_DEV_ACCEL || a->bid_window_ms > 60000 ||
        a->reqs.max_buffer_bytes > a->reqs.buffer_bytes ||
        ns_contact_check(a->endpoint) != NS_OK)
        return NS_ERR_INVAL;
    memcpy(a->excluded, ex, ex_len);
    return NS_OK;
}

#define S_DRAW_TAG "nightshift/draw/v1"

bool ns_bid_drawn(const ns_hash_t job_id, uint32_t round,
                  const uint8_t provider[NS_ID_BYTES], uint32_t draw)
{
    if (draw == 0 || draw == NS_DRAW_ALL)
        return true;
    uint8_t r[4] = {(uint8_t)(round >> 24), (uint8_t)(round >> 16),
                    (uint8_t)(round >> 8), (uint8_t)round};
    uint8_t h[8];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof h);
    crypto_generichash_update(&st, (const uint8_t *)S_DRAW_TAG,
                              sizeof S_DRAW_TAG - 1);
    crypto_generichash_update(&st, job_id, NS_HASH_BYTES);
    crypto_generichash_update(&st, r, sizeof r);
    crypto_generichash_update(&st, provider, NS_ID_BYTES);
    crypto_generichash_final(&st, h, sizeof h);
    uint32_t v = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                 (uint32_t)h[2] << 8 | h[3];
    return v < draw;
}

uint32_t ns_bid_draw_for(uint32_t qualified, uint32_t target)
{
    if (target == 0 || qualified <= target)
        return NS_DRAW_ALL;
    uint64_t d = ((uint64_t)target << 32) / qualified;
    return d == 0 ? 1 : d >= NS_DRAW_ALL ? NS_DRAW_ALL : (uint32_t)d;
}

int ns_bid_encode(const ns_bid_t *b, const ns_bid_ext_t *ext, ns_buf_t *out)
{
    bool with_ext = ext && ext->present;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, with_ext ? 9 : 6);
    ns_mp_bin(&pk, b->provider, NS_ID_BYTES);
    ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
    msgpack_pack_uint64(&pk, b->price);
    msgpack_pack_uint64(&pk, b->est_ms);
    msgpack_pack_uint64(&pk, b->timestamp_ms);
    ns_mp_bin(&pk, b->sig, NS_SIG_BYTES);
    if (with_ext) {
        msgpack_pack_uint32(&pk, ext->free_slots);
        msgpack_pack_uint32(&pk, ext->mask);
        ns_mp_bin(&pk, ext->proof, NS_HASH_BYTES);
    }
    return w.err;
}

int ns_bid_decode(const uint8_t *buf, size_t len, ns_bid_t *b,
                  ns_bid_ext_t *ext)
{
    ns_mpr_t r;
    ns_bid_ext_t h;
    memset(b, 0, sizeof *b);
    memset(&h, 0, sizeof h);
    if (ext)
        memset(ext, 0, sizeof *ext);
    ns_mpr_init(&r, buf, len);
    uint32_t n_fields = 0;
    if (ns_mpr_array(&r, &n_fields, 9) == NS_OK && n_fields != 6 &&
        n_fields != 9)
        return NS_ERR_INVAL;
    ns_mpr_bin_exact(&r, b->provider, NS_ID_BYTES);
    ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
    ns_mpr_uint(&r, &b->price);
    ns_mpr_uint(&r, &b->est_ms);
    ns_mpr_uint(&r, &b->timestamp_ms);
    ns_mpr_bin_exact(&r, b->sig, NS_SIG_BYTES);
    if (n_fields == 9) {
        h.present = true;
        ns_mpr_u32(&r, &h.free_slots);
        ns_mpr_u32(&r, &h.mask);
        ns_mpr_bin_exact(&r, h.proof, NS_HASH_BYTES);
    }
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (ext)
        *ext = h;
    return NS_OK;
}

/* ---- input locality ------------------------------------------------------
 */

static void s_be32(uint8_t out[4], uint32_t v)
{
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
}

/* A hash state over tag || job id || provider || u32 BE word. */
static void s_held_begin(crypto_generichash_state *st, const ns_announce_t *a,
                         const uint8_t provider[NS_ID_BYTES], uint32_t word)
{
    uint8_t be[4];
    crypto_generichash_init(st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(st, (const uint8_t *)NS_HELD_TAG,
                              sizeof NS_HELD_TAG - 1);
    crypto_generichash_update(st, a->job_id, NS_HASH_BYTES);
    crypto_generichash_update(st, provider, NS_ID_BYTES);
    s_be32(be, word);
    crypto_generichash_update(st, be, 4);
}

/* Offset of piece j of input i (market.h). */
static uint64_t s_held_offset(const ns_announce_t *a,
                              const uint8_t provider[NS_ID_BYTES], uint32_t i,
                              uint32_t j, uint64_t span)
{
    crypto_generichash_state st;
    uint8_t be[4], h[NS_HASH_BYTES];
    s_held_begin(&st, a, provider, i);
    s_be32(be, j);
    crypto_generichash_update(&st, be, 4);
    crypto_generichash_final(&st, h, NS_HASH_BYTES);
    uint64_t x = 0;
    for (int k = 7; k >= 0; k--)
        x = x << 8 | h[k];
    return x % span;
}

int ns_held_proof(const ns_announce_t *a, const uint8_t provider[NS_ID_BYTES],
                  uint32_t mask, ns_held_read_fn read, void *user,
                  ns_hash_t proof)
{
    if (a->n_inputs < 32 && (mask >> a->n_inputs) != 0)
        return NS_ERR_INVAL;
    crypto_generichash_state st;
    uint8_t piece[NS_HELD_PIECE_BYTES];
    s_held_begin(&st, a, provider, mask);
    for (uint32_t i = 0; i < a->n_inputs; i++) {
        if (!(mask & UINT32_C(1) << i))
            continue;
        uint64_t size = a->inputs[i].size;
        size_t n =
            size < NS_HELD_PIECE_BYTES ? (size_t)size : NS_HELD_PIECE_BYTES;
        for (uint32_t j = 0; j < NS_HELD_PIECES; j++) {
            uint64_t off = s_held_offset(a, provider, i, j, size - n + 1);
            int rc = read(user, i, off, piece, n);
            if (rc != NS_OK)
                return rc;
            crypto_generichash_update(&st, piece, n);
        }
    }
    crypto_generichash_final(&st, proof, NS_HASH_BYTES);
    return NS_OK;
}

uint64_t ns_held_bytes(const ns_announce_t *a, uint32_t mask)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < a->n_inputs && i < 32; i++)
        if (mask & UINT32_C(1) << i)
            sum += a->inputs[i].size;
    return sum;
}

int ns_fetch_encode(const ns_chunk_t *c, ns_buf_t *out)
{
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 4);
    ns_mp_bin(&pk, c->job_id, NS_HASH_BYTES);
    msgpack_pack_uint32(&pk, c->blob);
    msgpack_pack_uint64(&pk, c->offset);
    msgpack_pack_uint32(&pk, c->len);
    return w.err;
}

int ns_fetch_decode(const uint8_t *buf, size_t len, ns_chunk_t *c)
{
    ns_mpr_t r;
    memset(c, 0, sizeof *c);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 4);
    ns_mpr_bin_exact(&r, c->job_id, NS_HASH_BYTES);
    ns_mpr_u32(&r, &c->blob);
    ns_mpr_uint(&r, &c->offset);
    ns_mpr_u32(&r, &c->len);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    return c->len == 0 || c->len > NS_CHUNK_BYTES ? NS_ERR_INVAL : NS_OK;
}

int ns_chunk_encode(const ns_chunk_t *c, ns_buf_t *out)
{
    if (c->data_len > NS_CHUNK_BYTES)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 5);
    ns_mp_bin(&pk, c->job_id, NS_HASH_BYTES);
    msgpack_pack_uint32(&pk, c->blob);
    msgpack_pack_uint64(&pk, c->offset);
    msgpack_pack_uint64(&pk, c->total);
    ns_mp_bin(&pk, c->data, c->data_len);
    return w.err;
}

int ns_chunk_decode(const uint8_t *buf, size_t len, ns_chunk_t *c)
{
    ns_mpr_t r;
    memset(c, 0, sizeof *c);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 5);
    ns_mpr_bin_exact(&r, c->job_id, NS_HASH_BYTES);
    ns_mpr_u32(&r, &c->blob);
    ns_mpr_uint(&r, &c->offset);
    ns_mpr_uint(&r, &c->total);
    ns_mpr_bin(&r, &c->data, &c->data_len, NS_CHUNK_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (c->offset > c->total || c->data_len > c->total - c->offset)
        return NS_ERR_INVAL;
    return NS_OK;
}

int ns_awarded_encode(const ns_awarded_t *a, ns_buf_t *out)
{
    if (a->job_entry_len > NS_MAX_ENTRY_BYTES ||
        a->award_entry_len > NS_MAX_ENTRY_BYTES)
        return NS_ERR_TOOBIG;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 3);
    ns_mp_bin(&pk, a->job_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, a->job_entry, a->job_entry_len);
    ns_mp_bin(&pk, a->award_entry, a->award_entry_len);
    return w.err;
}

int ns_awarded_decode(const uint8_t *buf, size_t len, ns_awarded_t *a)
{
    ns_mpr_t r;
    memset(a, 0, sizeof *a);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 3);
    ns_mpr_bin_exact(&r, a->job_id, NS_HASH_BYTES);
    ns_mpr_bin(&r, &a->job_entry, &a->job_entry_len, NS_MAX_ENTRY_BYTES);
    ns_mpr_bin(&r, &a->award_entry, &a->award_entry_len, NS_MAX_ENTRY_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    return a->job_entry_len && a->award_entry_len ? NS_OK : NS_ERR_INVAL;
}

static const char *const s_fail_names[] = {
    "other", "build", "arguments", "crash", "timeout", "memory", "input"};

const char *ns_fail_kind_name(uint32_t kind)
{
    return kind <= NS_FAIL_KIND_MAX ? s_fail_names[kind] : "?";
}

bool ns_fail_kind_is_jobs(uint32_t kind)
{
    return kind == NS_FAIL_BUILD || kind == NS_FAIL_ARGS;
}

#define S_FAILED_TAG "nightshift/failed/v1"

static void s_failure_digest(const ns_failure_t *f, const ns_hash_t network,
                             ns_hash_t digest)
{
    crypto_generichash_state st;
    uint8_t be[12];
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)S_FAILED_TAG,
                              sizeof S_FAILED_TAG - 1);
    crypto_generichash_update(&st, network, NS_HASH_BYTES);
    crypto_generichash_update(&st, f->job_id, NS_HASH_BYTES);
    crypto_generichash_update(&st, f->award_id, NS_HASH_BYTES);
    for (int i = 0; i < 4; i++)
        be[i] = (uint8_t)(f->kind >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        be[4 + i] = (uint8_t)(f->timestamp_ms >> (56 - 8 * i));
    crypto_generichash_update(&st, be, sizeof be);
    crypto_generichash_update(&st, (const uint8_t *)f->reason,
                              strlen(f->reason));
    crypto_generichash_final(&st, digest, NS_HASH_BYTES);
}

void ns_failure_sign(ns_failure_t *f, const ns_identity_t *provider,
                     const ns_hash_t network_id)
{
    ns_hash_t d;
    memcpy(f->provider, ns_identity_pk(provider), NS_ID_BYTES);
    s_failure_digest(f, network_id, d);
    ns_identity_sign(provider, d, NS_HASH_BYTES, f->sig);
}

int ns_failure_verify(const ns_failure_t *f, const ns_hash_t network_id)
{
    ns_hash_t d;
    s_failure_digest(f, network_id, d);
    return ns_sig_verify(f->provider, d, NS_HASH_BYTES, f->sig);
}

int ns_failure_encode(const ns_failure_t *f, ns_buf_t *out)
{
    if (f->kind > NS_FAIL_KIND_MAX ||
        strnlen(f->reason, sizeof f->reason) > NS_MAX_FAIL_REASON)
        return NS_ERR_INVAL;
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 7);
    ns_mp_bin(&pk, f->job_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, f->award_id, NS_HASH_BYTES);
    ns_mp_bin(&pk, f->provider, NS_ID_BYTES);
    msgpack_pack_uint32(&pk, f->kind);
    msgpack_pack_uint64(&pk, f->timestamp_ms);
    ns_mp_str(&pk, f->reason);
    ns_mp_bin(&pk, f->sig, NS_SIG_BYTES);
    return w.err;
}

int ns_failure_decode(const uint8_t *buf, size_t len, ns_failure_t *f)
{
    ns_mpr_t r;
    memset(f, 0, sizeof *f);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 7);
    ns_mpr_bin_exact(&r, f->job_id, NS_HASH_BYTES);
    ns_mpr_bin_exact(&r, f->award_id, NS_HASH_BYTES);
    ns_mpr_bin_exact(&r, f->provider, NS_ID_BYTES);
    ns_mpr_u32(&r, &f->kind);
    ns_mpr_uint(&r, &f->timestamp_ms);
    ns_mpr_str(&r, f->reason, NS_MAX_FAIL_REASON);
    ns_mpr_bin_exact(&r, f->sig, NS_SIG_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (f->kind > NS_FAIL_KIND_MAX)
        return NS_ERR_INVAL;
    for (const char *c = f->reason; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return NS_ERR_INVAL; /* one printable line */
    return NS_OK;
}

int ns_chal_msg_encode(const ns_chal_msg_t *c, ns_buf_t *out)
{
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 7);
    ns_mp_bin(&pk, c->nonce, NS_HASH_BYTES);
    msgpack_pack_uint32(&pk, c->device);
    msgpack_pack_uint64(&pk, c->label_bytes);
    msgpack_pack_uint32(&pk, c->label_segments);
    msgpack_pack_uint32(&pk, c->k);
    msgpack_pack_uint32(&pk, c->imatmul_n);
    ns_mp_bin(&pk, c->seed, sizeof c->seed);
    return w.err;
}

int ns_chal_msg_decode(const uint8_t *buf, size_t len, ns_chal_msg_t *c)
{
    ns_mpr_t r;
    memset(c, 0, sizeof *c);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 7);
    ns_mpr_bin_exact(&r, c->nonce, NS_HASH_BYTES);
    ns_mpr_u32(&r, &c->device);
    ns_mpr_uint(&r, &c->label_bytes);
    ns_mpr_u32(&r, &c->label_segments);
    ns_mpr_u32(&r, &c->k);
    ns_mpr_u32(&r, &c->imatmul_n);
    ns_mpr_bin_exact(&r, c->seed, sizeof c->seed);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (c->device >= NS_MAX_DEVICES ||
        c->label_bytes > NS_CHAL_MAX_LABEL_BYTES ||
        c->imatmul_n > NS_CHAL_MAX_IMATMUL_N || c->k > 1024 ||
        c->label_segments > 64 || (!c->label_bytes && !c->imatmul_n))
        return NS_ERR_INVAL;
    return NS_OK;
}

int ns_chal_done_encode(const ns_chal_done_t *d, ns_buf_t *out)
{
    S_PACKER(out, w, pk);
    msgpack_pack_array(&pk, 6);
    ns_mp_bin(&pk, d->nonce, NS_HASH_BYTES);
    msgpack_pack_int32(&pk, d->status);
    ns_mp_bin(&pk, d->label_root, NS_HASH_BYTES);
    ns_mp_bin(&pk, d->c_hash, NS_HASH_BYTES);
    msgpack_pack_uint64(&pk, d->answer_bytes);
    msgpack_pack_uint64(&pk, d->label_answer_bytes);
    return w.err;
}

int ns_chal_done_decode(const uint8_t *buf, size_t len, ns_chal_done_t *d)
{
    ns_mpr_t r;
    int64_t status = 0;
    memset(d, 0, sizeof *d);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 6);
    ns_mpr_bin_exact(&r, d->nonce, NS_HASH_BYTES);
    ns_mpr_int(&r, &status);
    ns_mpr_bin_exact(&r, d->label_root, NS_HASH_BYTES);
    ns_mpr_bin_exact(&r, d->c_hash, NS_HASH_BYTES);
    ns_mpr_uint(&r, &d->answer_bytes);
    ns_mpr_uint(&r, &d->label_answer_bytes);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (status > 0 || status < -1000 ||
        d->label_answer_bytes > d->answer_bytes ||
        d->answer_bytes > (UINT64_C(64) << 20))
        return NS_ERR_INVAL;
    d->status = (int32_t)status;
    return NS_OK;
}

/* ---- offers and decisions ----------------------------------------------- */

void ns_offer_from_heartbeat(ns_offer_t *o, const ns_heartbeat_t *hb)
{
    o->devices = hb->devices;
    o->n_devices = hb->n_devices;
    o->price = hb->price;
    o->stake = hb->stake;
    o->free_slots = hb->free_slots;
    o->region = hb->region;
}

static void s_cl_version(const char *text, uint32_t *major, uint32_t *minor)
{
    unsigned a = 0, b = 0;
    *major = *minor = 0;
    if (sscanf(text, "OpenCL C %u.%u", &a, &b) == 2) {
        *major = a;
        *minor = b;
    }
}

uint64_t ns_price_quote(uint64_t price_micro_per_s, uint64_t work_flops,
                        double device_gflops, uint64_t *est_ms)
{
    double gflops = device_gflops > 0.1 ? device_gflops : 1.0;
    double seconds = (double)work_flops / (gflops * 1e9);
    if (est_ms)
        *est_ms = (uint64_t)ceil(seconds * 1000.0) + 1;
    double micro = ceil(seconds * (double)price_micro_per_s);
    if (micro >= 1.8e19)
        return UINT64_MAX;
    return micro < 1 ? 1 : (uint64_t)micro;
}

uint32_t ns_reqs_check(const ns_reqs_t *r, const ns_offer_t *o,
                       uint64_t collateral, uint64_t max_price,
                       uint64_t work_flops, uint32_t *device)
{
    uint32_t best_fail = ~0u;
    for (uint32_t d = 0; d < o->n_devices; d++) {
        const ns_devinfo_t *dev = &o->devices[d];
        uint32_t fail = 0, maj, min;
        if (dev->global_mem_bytes < r->min_mem_bytes)
            fail |= NS_REQ_MEMORY;
        if (r->device_type && dev->type != r->device_type)
            fail |= NS_REQ_DEVICE_TYPE;
        s_cl_version(dev->cl_c_version, &maj, &min);
        if (maj < r->min_cl_major ||
            (maj == r->min_cl_major && min < r->min_cl_minor))
            fail |= NS_REQ_CL_VERSION;
        if (dev->max_alloc_bytes < r->max_buffer_bytes ||
            dev->global_mem_bytes < r->buffer_bytes)
            fail |= NS_REQ_BUFFERS;
        if (ns_price_quote(o->price, work_flops, dev->gflops, NULL) > max_price)
            fail |= NS_REQ_PRICE;
        if (__builtin_popcount(fail) < __builtin_popcount(best_fail)) {
            best_fail = fail;
            if (device)
                *device = d;
        }
    }
    if (best_fail == ~0u)
        best_fail = NS_REQ_MEMORY | NS_REQ_DEVICE_TYPE; /* no device */
    if (r->region[0] && strcmp(r->region, o->region ? o->region : "") != 0)
        best_fail |= NS_REQ_REGION;
    if (o->stake < collateral)
        best_fail |= NS_REQ_STAKE;
    if (o->free_slots == 0)
        best_fail |= NS_REQ_SLOTS;
    return best_fail;
}

void ns_reqs_describe(const ns_reqs_t *r, uint32_t bit, uint64_t collateral,
                      uint64_t max_price, char *out, size_t cap)
{
    static const char *const types[] = {"any", "cpu", "gpu", "accelerator"};
    char amount[NS_CREDITS_TEXT];
    switch (bit) {
    case NS_REQ_MEMORY:
        snprintf(out, cap, "memory >= %.1f GiB",
                 (double)r->min_mem_bytes / (1024.0 * 1024 * 1024));
        break;
    case NS_REQ_DEVICE_TYPE:
        snprintf(out, cap, "device type %s",
                 types[r->device_type < 4 ? r->device_type : 0]);
        break;
    case NS_REQ_CL_VERSION:
        snprintf(out, cap, "OpenCL C >= %u.%u", r->min_cl_major,
                 r->min_cl_minor);
        break;
    case NS_REQ_REGION:
        snprintf(out, cap, "region %s", r->region);
        break;
    case NS_REQ_STAKE:
        snprintf(out, cap, "stake >= %s", ns_credits_fmt(amount, collateral));
        break;
    case NS_REQ_PRICE:
        snprintf(out, cap, "price <= %s", ns_credits_fmt(amount, max_price));
        break;
    case NS_REQ_SLOTS:
        snprintf(out, cap, "a free slot");
        break;
    case NS_REQ_BUFFERS:
        snprintf(out, cap, "buffers that fit (largest %.1f MiB, all %.1f MiB)",
                 (double)r->max_buffer_bytes / (1024.0 * 1024),
                 (double)r->buffer_bytes / (1024.0 * 1024));
        break;
    default:
        snprintf(out, cap, "?");
    }
}

int64_t ns_reputation(const ns_account_t *a)
{
    if (a->banned)
        return INT64_MIN / 2;
    return (int64_t)a->jobs_settled - 10 * (int64_t)a->jobs_slashed -
           2 * (int64_t)a->jobs_cancelled;
}

bool ns_requester_acceptable(const ns_account_t *a)
{
    if (a->banned)
        return false;
    return a->jobs_posted < NS_POLICY_REQUESTER_GRACE_JOBS ||
           a->jobs_settled_as_requester * NS_POLICY_REQUESTER_SETTLE_DIV >=
               a->jobs_posted;
}

int64_t ns_standing(const ns_account_t *a)
{
    if (a->banned)
        return INT64_MIN / 2;
    return -10 * (int64_t)a->jobs_slashed - 2 * (int64_t)a->jobs_cancelled;
}

/* Whether bid i beats bid b among near-equal prices. */
static bool s_tie_better(const ns_bid_t *bids, const ns_bid_rank_t *rank,
                         uint32_t i, uint32_t b, const ns_announce_t *a)
{
    if (rank[i].free != rank[b].free)
        return rank[i].free;
    uint64_t held_i = rank[i].held_bytes / NS_POLICY_HELD_BUCKET_BYTES;
    uint64_t held_b = rank[b].held_bytes / NS_POLICY_HELD_BUCKET_BYTES;
    if (held_i != held_b)
        return held_i > held_b;
    if (rank[i].standing != rank[b].standing)
        return rank[i].standing > rank[b].standing;
    /* A bid over a link made for it waited for the handshake too: its
     * arrival is no round trip, and a light peer's bootstrap, linked
     * before anyone else, would win every tie. */
    uint64_t ti = rank[i].arrival_us / NS_POLICY_RTT_BUCKET_US;
    uint64_t tb = rank[b].arrival_us / NS_POLICY_RTT_BUCKET_US;
    if (rank[i].linked && rank[b].linked && ti != tb)
        return ti < tb;
    uint8_t in[NS_HASH_BYTES + NS_ID_BYTES];
    ns_hash_t hi, hb;
    memcpy(in, a->job_id, NS_HASH_BYTES);
    memcpy(in + NS_HASH_BYTES, bids[i].provider, NS_ID_BYTES);
    ns_hash(hi, in, sizeof in);
    memcpy(in + NS_HASH_BYTES, bids[b].provider, NS_ID_BYTES);
    ns_hash(hb, in, sizeof in);
    return memcmp(hi, hb, NS_HASH_BYTES) < 0;
}

int ns_auction_pick(const ns_bid_t *bids, const ns_bid_rank_t *rank, uint32_t n,
                    uint64_t max_price, const ns_announce_t *a)
{
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (bids[i].price > max_price)
            continue;
        bool excluded = false;
        for (uint32_t e = 0; e < a->n_excluded; e++)
            excluded |=
                memcmp(a->excluded[e], bids[i].provider, NS_ID_BYTES) == 0;
        if (excluded)
            continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        const ns_bid_t *b = &bids[best];
        /* near-tie: within 1% of the cheaper one */
        uint64_t lo = b->price < bids[i].price ? b->price : bids[i].price;
        uint64_t diff = b->price > bids[i].price ? b->price - bids[i].price
                                                 : bids[i].price - b->price;
        if (diff * 100 > lo) {
            if (bids[i].price < b->price)
                best = (int)i;
        } else if (s_tie_better(bids, rank, i, (uint32_t)best, a)) {
            best = (int)i;
        }
    }
    return best;
}
