/* worker_frame.c - the one codec of each message between the sandbox
 * worker and its supervisor (worker_frame.h).
 */
#include "nightshift/worker_frame.h"
#include "nightshift/mp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint32_t ns_worker_frame_len(const uint8_t p[NS_WORKER_FRAME_LEN])
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* A frame under construction: 4 bytes reserved for the length. */
static void s_frame_begin(msgpack_sbuffer *sb, msgpack_packer *pk)
{
    static const char zero[NS_WORKER_FRAME_LEN] = {0, 0, 0, 0};
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
    msgpack_sbuffer_write(sb, zero, sizeof zero);
}

static void s_frame_end(msgpack_sbuffer *sb)
{
    s_put_be32((uint8_t *)sb->data, (uint32_t)(sb->size - NS_WORKER_FRAME_LEN));
}

void ns_worker_hello_pack(msgpack_sbuffer *sb, int status, const char *error,
                          const ns_devinfo_t *dev)
{
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, 5);
    msgpack_pack_uint32(&pk, NS_WORKER_MSG_HELLO);
    msgpack_pack_uint32(&pk, NS_WORKER_PROTOCOL);
    msgpack_pack_int(&pk, status);
    ns_mp_bin(&pk, error, strnlen(error, NS_WORKER_MAX_ERROR));
    ns_devinfo_pack(&pk, dev);
    s_frame_end(sb);
}

int ns_worker_hello_read(const uint8_t *head, size_t len, ns_worker_hello_t *h)
{
    ns_mpr_t r;
    memset(h, 0, sizeof *h);
    ns_mpr_init(&r, head, len);
    ns_mpr_array_exact(&r, 5);
    ns_mpr_u32(&r, &h->type);
    ns_mpr_u32(&r, &h->protocol);
    ns_mpr_int(&r, &h->status);
    ns_mpr_bin(&r, &h->error, &h->error_len, NS_WORKER_MAX_ERROR);
    ns_devinfo_read(&r, &h->dev);
    return ns_mpr_end(&r);
}

int ns_worker_request_pack(msgpack_sbuffer *sb, const ns_job_t *job,
                           const uint64_t *items, uint32_t n, bool verified,
                           uint32_t files)
{
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, files ? 5 : 4);
    msgpack_pack_uint32(&pk, items ? NS_WORKER_MSG_ITEMS : NS_WORKER_MSG_RUN);
    ns_job_pack(&pk, job);
    msgpack_pack_array(&pk, items ? n : 0);
    for (uint32_t i = 0; items && i < n; i++)
        msgpack_pack_uint64(&pk, items[i]);
    if (verified)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    if (files)
        msgpack_pack_uint32(&pk, files);
    if (!sb->data || sb->size - NS_WORKER_FRAME_LEN > NS_WORKER_MAX_REQUEST) {
        msgpack_sbuffer_destroy(sb);
        return NS_ERR_TOOBIG;
    }
    s_frame_end(sb);
    return NS_OK;
}

int ns_worker_request_pack_extra(msgpack_sbuffer *sb, uint32_t type,
                                 const ns_job_t *job, bool verified,
                                 uint32_t files, const ns_worker_extra_t *x)
{
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint32(&pk, type);
    ns_job_pack(&pk, job);
    msgpack_pack_array(&pk, 0);
    if (verified)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    msgpack_pack_uint32(&pk, files);
    if (type == NS_WORKER_MSG_PREFLIGHT) {
        msgpack_pack_array(&pk, 3);
        msgpack_pack_uint32(&pk, x->what);
        msgpack_pack_uint32(&pk, x->k);
        ns_mp_bin(&pk, x->name, strnlen(x->name, sizeof x->name - 1));
    } else {
        msgpack_pack_array(&pk, 5);
        ns_mp_bin(&pk, x->desc_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, x->root, NS_HASH_BYTES);
        ns_mp_bin(&pk, x->secret, sizeof x->secret);
        msgpack_pack_uint32(&pk, x->k);
        msgpack_pack_uint32(&pk, x->outfiles);
    }
    if (!sb->data || sb->size - NS_WORKER_FRAME_LEN > NS_WORKER_MAX_REQUEST) {
        msgpack_sbuffer_destroy(sb);
        return NS_ERR_TOOBIG;
    }
    s_frame_end(sb);
    return NS_OK;
}

/* PREFLIGHT's and CHECK's sixth element. */
static void s_extra_read(ns_mpr_t *r, uint32_t type, ns_worker_extra_t *x,
                         char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    if (type == NS_WORKER_MSG_PREFLIGHT) {
        const uint8_t *name = NULL;
        size_t name_len = 0;
        ns_mpr_array_exact(r, 3);
        ns_mpr_u32(r, &x->what);
        ns_mpr_u32(r, &x->k);
        ns_mpr_bin(r, &name, &name_len, sizeof x->name - 1);
        if (r->err == NS_OK && name_len)
            memcpy(x->name, name, name_len);
        if (r->err == NS_OK &&
            (x->what & ~(NS_PF_CHECK | NS_PF_TIME | NS_PF_SAMPLE))) {
            snprintf(err, errlen, "a pre-flight of unknown parts %#x", x->what);
            r->err = NS_ERR_INVAL;
        }
    } else {
        ns_mpr_array_exact(r, 5);
        ns_mpr_bin_exact(r, x->desc_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(r, x->root, NS_HASH_BYTES);
        ns_mpr_bin_exact(r, x->secret, sizeof x->secret);
        ns_mpr_u32(r, &x->k);
        ns_mpr_u32(r, &x->outfiles);
    }
    if (r->err == NS_OK && x->k > NS_MAX_CHECKS) {
        snprintf(err, errlen, "%" PRIu32 " units, over %d", x->k,
                 NS_MAX_CHECKS);
        r->err = NS_ERR_INVAL;
    }
}

int ns_worker_fraud_pack(msgpack_sbuffer *sb, const ns_fraud_proof_t *p,
                         bool verified)
{
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint32(&pk, NS_WORKER_MSG_FRAUD);
    ns_fraud_pack(&pk, p);
    if (verified)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    if (!sb->data || sb->size - NS_WORKER_FRAME_LEN > NS_WORKER_MAX_REQUEST) {
        msgpack_sbuffer_destroy(sb);
        return NS_ERR_TOOBIG;
    }
    s_frame_end(sb);
    return NS_OK;
}

int ns_worker_request_read(const uint8_t *head, size_t len,
                           ns_worker_request_t *q, char *err, size_t errlen)
{
    ns_mpr_t r;
    q->type = 0;
    q->items = NULL;
    q->n_items = 0;
    q->verified = false;
    q->files = 0;
    ns_mpr_init(&r, head, len);
    uint32_t n = 0;
    ns_mpr_array(&r, &n, 6);
    ns_mpr_u32(&r, &q->type);
    bool extra =
        q->type == NS_WORKER_MSG_PREFLIGHT || q->type == NS_WORKER_MSG_CHECK;
    if (r.err == NS_OK && q->type == NS_WORKER_MSG_FRAUD && n == 3) {
        if (ns_fraud_read(&r, &q->proof, err, errlen) != NS_OK &&
            r.err == NS_OK)
            r.err = NS_ERR_INVAL;
        ns_mpr_bool(&r, &q->verified);
        return ns_mpr_end(&r);
    }
    if (r.err == NS_OK && (extra ? n != 6 : n != 4 && n != 5))
        r.err = NS_ERR_TYPE;
    if (r.err == NS_OK && q->type != NS_WORKER_MSG_RUN &&
        q->type != NS_WORKER_MSG_ITEMS && q->type != NS_WORKER_MSG_FRAUD &&
        !extra)
        r.err = NS_ERR_MSGTYPE;
    if (r.err == NS_OK && q->type == NS_WORKER_MSG_FRAUD)
        r.err = NS_ERR_TYPE;
    if (r.err == NS_OK && ns_job_read(&r, &q->job, err, errlen) != NS_OK &&
        r.err == NS_OK)
        r.err = NS_ERR_INVAL;
    ns_mpr_array(&r, &q->n_items, NS_WORKER_MAX_ITEMS);
    if (r.err == NS_OK && q->n_items > 0) {
        q->items = calloc(q->n_items, sizeof *q->items);
        if (!q->items)
            r.err = NS_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < q->n_items && r.err == NS_OK; i++)
        ns_mpr_uint(&r, &q->items[i]);
    ns_mpr_bool(&r, &q->verified);
    if (n >= 5)
        ns_mpr_u32(&r, &q->files);
    if (extra)
        s_extra_read(&r, q->type, &q->x, err, errlen);
    if (r.err == NS_OK && extra && q->n_items) {
        snprintf(err, errlen, "a %s request with items",
                 ns_worker_mode_name((int)q->type));
        r.err = NS_ERR_INVAL;
    }
    /* descriptors stand for IN buffers only (CHECK's outfiles: OUT) */
    for (uint32_t i = 0; r.err == NS_OK && i < 32; i++)
        if (((q->files >> i & 1) &&
             (i >= q->job.n_args || q->job.args[i].kind != NS_ARG_IN)) ||
            ((q->x.outfiles >> i & 1) &&
             (i >= q->job.n_args || q->job.args[i].kind != NS_ARG_OUT))) {
            snprintf(err, errlen,
                     "a descriptor for arg %" PRIu32 ", not a buffer of "
                     "that kind",
                     i);
            r.err = NS_ERR_INVAL;
        }
    return ns_mpr_end(&r);
}

void ns_worker_result_pack(msgpack_sbuffer *sb, int status, const char *error,
                           const ns_timings_t *t)
{
    ns_worker_result_pack_extra(sb, status, error, t, NULL, 0);
}

void ns_worker_result_pack_extra(msgpack_sbuffer *sb, int status,
                                 const char *error, const ns_timings_t *t,
                                 const uint64_t *extra, uint32_t n)
{
    msgpack_packer pk;
    if (n > NS_WORKER_MAX_EXTRA)
        n = NS_WORKER_MAX_EXTRA;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, extra ? 5 : 4);
    msgpack_pack_uint32(&pk, NS_WORKER_MSG_RESULT);
    msgpack_pack_int(&pk, status);
    ns_mp_bin(&pk, error, strnlen(error, NS_WORKER_MAX_ERROR));
    msgpack_pack_array(&pk, 5);
    msgpack_pack_uint64(&pk, t->build_us);
    msgpack_pack_uint64(&pk, t->upload_us);
    msgpack_pack_uint64(&pk, t->run_us);
    msgpack_pack_uint64(&pk, t->download_us);
    if (t->cache_hit)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
    if (extra) {
        msgpack_pack_array(&pk, n);
        for (uint32_t i = 0; i < n; i++)
            msgpack_pack_uint64(&pk, extra[i]);
    }
    s_frame_end(sb);
}

int ns_worker_result_read(const uint8_t *head, size_t len,
                          ns_worker_reply_t *out)
{
    ns_mpr_t r;
    memset(out, 0, sizeof *out);
    uint32_t n = 0;
    ns_mpr_init(&r, head, len);
    ns_mpr_array(&r, &n, 5);
    if (r.err == NS_OK && n < 4)
        r.err = NS_ERR_TYPE;
    ns_mpr_u32(&r, &out->type);
    ns_mpr_int(&r, &out->status);
    ns_mpr_bin(&r, &out->error, &out->error_len, NS_WORKER_MAX_ERROR);
    ns_mpr_array_exact(&r, 5);
    ns_mpr_uint(&r, &out->timings.build_us);
    ns_mpr_uint(&r, &out->timings.upload_us);
    ns_mpr_uint(&r, &out->timings.run_us);
    ns_mpr_uint(&r, &out->timings.download_us);
    ns_mpr_bool(&r, &out->timings.cache_hit);
    if (n == 5) {
        ns_mpr_array(&r, &out->n_extra, NS_WORKER_MAX_EXTRA);
        for (uint32_t i = 0; i < out->n_extra && r.err == NS_OK; i++)
            ns_mpr_uint(&r, &out->extra[i]);
    }
    return ns_mpr_end(&r);
}

int ns_worker_frame_type(const uint8_t *head, size_t len, uint32_t *type)
{
    ns_mpr_t r;
    uint32_t n = 0;
    *type = 0;
    ns_mpr_init(&r, head, len);
    ns_mpr_array(&r, &n, 16);
    if (r.err == NS_OK && n == 0)
        r.err = NS_ERR_TYPE;
    ns_mpr_u32(&r, type);
    return r.err;
}

void ns_worker_chal_pack(msgpack_sbuffer *sb, const ns_chal_request_t *r)
{
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, 5);
    msgpack_pack_uint32(&pk, NS_WORKER_MSG_CHALLENGE);
    msgpack_pack_uint32(&pk, r->kind);
    if (r->kind == NS_CHAL_KIND_LABEL) {
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint64(&pk, r->label.bytes);
        msgpack_pack_uint32(&pk, r->label.lanes);
        msgpack_pack_uint32(&pk, r->label.segments);
        msgpack_pack_uint32(&pk, r->label.steps);
    } else if (r->kind == NS_CHAL_KIND_IMATMUL) {
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint32(&pk, r->imatmul.n);
        msgpack_pack_uint32(&pk, r->imatmul.p);
    } else {
        msgpack_pack_array(&pk, 0);
    }
    ns_mp_bin(&pk, r->seed, sizeof r->seed);
    msgpack_pack_uint32(&pk, r->kind == NS_CHAL_KIND_LABEL ? r->k : 0);
    s_frame_end(sb);
}

int ns_worker_chal_read(const uint8_t *head, size_t len, ns_chal_request_t *q)
{
    ns_mpr_t r;
    uint32_t type = 0;
    memset(q, 0, sizeof *q);
    ns_mpr_init(&r, head, len);
    ns_mpr_array_exact(&r, 5);
    ns_mpr_u32(&r, &type);
    if (r.err == NS_OK && type != NS_WORKER_MSG_CHALLENGE)
        r.err = NS_ERR_MSGTYPE;
    ns_mpr_u32(&r, &q->kind);
    if (r.err == NS_OK && q->kind == NS_CHAL_KIND_LABEL) {
        ns_mpr_array_exact(&r, 4);
        ns_mpr_uint(&r, &q->label.bytes);
        ns_mpr_u32(&r, &q->label.lanes);
        ns_mpr_u32(&r, &q->label.segments);
        ns_mpr_u32(&r, &q->label.steps);
    } else if (r.err == NS_OK && q->kind == NS_CHAL_KIND_IMATMUL) {
        ns_mpr_array_exact(&r, 2);
        ns_mpr_u32(&r, &q->imatmul.n);
        ns_mpr_u32(&r, &q->imatmul.p);
    } else if (r.err == NS_OK) {
        r.err = NS_ERR_INVAL;
    }
    ns_mpr_bin_exact(&r, q->seed, sizeof q->seed);
    ns_mpr_u32(&r, &q->k);
    if (r.err == NS_OK && q->kind == NS_CHAL_KIND_IMATMUL && q->k != 0)
        r.err = NS_ERR_INVAL;
    return ns_mpr_end(&r);
}

void ns_worker_chal_result_pack(msgpack_sbuffer *sb, int status,
                                const char *error, const ns_hash_t root,
                                uint64_t device_us, uint64_t answer_len)
{
    static const ns_hash_t zero;
    msgpack_packer pk;
    s_frame_begin(sb, &pk);
    msgpack_pack_array(&pk, 6);
    msgpack_pack_uint32(&pk, NS_WORKER_MSG_CHAL_RESULT);
    msgpack_pack_int(&pk, status);
    ns_mp_bin(&pk, error, strnlen(error, NS_WORKER_MAX_ERROR));
    ns_mp_bin(&pk, root ? root : zero, NS_HASH_BYTES);
    msgpack_pack_uint64(&pk, device_us);
    msgpack_pack_uint64(&pk, answer_len);
    s_frame_end(sb);
}

int ns_worker_chal_result_read(const uint8_t *head, size_t len,
                               ns_worker_chal_reply_t *out)
{
    ns_mpr_t r;
    memset(out, 0, sizeof *out);
    ns_mpr_init(&r, head, len);
    ns_mpr_array_exact(&r, 6);
    ns_mpr_u32(&r, &out->type);
    ns_mpr_int(&r, &out->status);
    ns_mpr_bin(&r, &out->error, &out->error_len, NS_WORKER_MAX_ERROR);
    ns_mpr_bin_exact(&r, out->root, NS_HASH_BYTES);
    ns_mpr_uint(&r, &out->device_us);
    ns_mpr_uint(&r, &out->answer_len);
    return ns_mpr_end(&r);
}

void ns_worker_fmt_bytes(char *out, size_t cap, uint64_t b)
{
    if (b >= (UINT64_C(1) << 30))
        snprintf(out, cap, "%.1f GiB", (double)b / (double)(1u << 30));
    else if (b >= (UINT64_C(1) << 20))
        snprintf(out, cap, "%.1f MiB", (double)b / (double)(1u << 20));
    else if (b >= 1024)
        snprintf(out, cap, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(out, cap, "%" PRIu64 " bytes", b);
}

const char *ns_worker_mode_name(int type)
{
    return type == NS_WORKER_MSG_ITEMS       ? "items"
           : type == NS_WORKER_MSG_FRAUD     ? "fraud"
           : type == NS_WORKER_MSG_CHALLENGE ? "challenge"
           : type == NS_WORKER_MSG_PREFLIGHT ? "preflight"
           : type == NS_WORKER_MSG_CHECK     ? "check"
                                             : "run";
}
