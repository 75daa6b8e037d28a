/* entry.c - ledger entries and their bodies on the wire. */
#include "nightshift/ledger.h"
#include "nightshift/mp.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

const char *ns_entry_type_name(uint32_t type)
{
    static const char *const names[] = {
        "?",      "transfer", "stake",  "unstake", "job",    "award",
        "accept", "result",   "settle", "slash",   "cancel", "close"};
    return type <= NS_ENTRY_TYPE_MAX ? names[type] : "unknown";
}

/* domain || network id || part, hashed (id) or signed. */
static uint8_t *s_preimage(const ns_hash_t network_id, const uint8_t *part,
                           size_t len, size_t *out_len)
{
    size_t dl = sizeof(NS_ENTRY_DOMAIN) - 1;
    uint8_t *m = malloc(dl + NS_HASH_BYTES + len);
    if (!m)
        return NULL;
    memcpy(m, NS_ENTRY_DOMAIN, dl);
    memcpy(m + dl, network_id, NS_HASH_BYTES);
    memcpy(m + dl + NS_HASH_BYTES, part, len);
    *out_len = dl + NS_HASH_BYTES + len;
    return m;
}

int ns_entry_encode(const ns_identity_t *author, const ns_hash_t network_id,
                    uint64_t seq, const ns_hash_t prev, uint8_t type,
                    const uint8_t *body, size_t body_len, const uint8_t *refs,
                    uint32_t n_refs, uint64_t timestamp_ms, ns_buf_t *out,
                    ns_hash_t id)
{
    if (body_len > NS_MAX_ENTRY_BODY || n_refs > NS_MAX_REFS)
        return NS_ERR_TOOBIG;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, 9);
    size_t start = out->len;
    msgpack_pack_uint8(&pk, NS_ENTRY_VERSION);
    ns_mp_bin(&pk, ns_identity_pk(author), NS_ID_BYTES);
    msgpack_pack_uint64(&pk, seq);
    ns_mp_bin(&pk, prev, NS_HASH_BYTES);
    msgpack_pack_uint8(&pk, type);
    ns_mp_bin(&pk, body, body_len);
    ns_mp_bin(&pk, refs, (size_t)n_refs * NS_HASH_BYTES);
    msgpack_pack_uint64(&pk, timestamp_ms);
    if (w.err != NS_OK)
        return w.err;
    size_t n = 0;
    uint8_t *m =
        s_preimage(network_id, out->data + start, out->len - start, &n);
    if (!m)
        return NS_ERR_NOMEM;
    uint8_t sig[NS_SIG_BYTES];
    ns_identity_sign(author, m, n, sig);
    ns_hash(id, m, n);
    free(m);
    ns_mp_bin(&pk, sig, sizeof sig);
    return w.err;
}

static int s_decode(const uint8_t *buf, size_t len, const ns_hash_t network_id,
                    ns_entry_t *e, bool verify)
{
    memset(e, 0, sizeof *e);
    if (len > NS_MAX_ENTRY_BYTES)
        return NS_ERR_TOOBIG;
    ns_mpr_t r;
    ns_mpr_init(&r, buf, len);
    uint32_t n = 0;
    if (ns_mpr_array(&r, &n, 16) != NS_OK)
        return r.err == NS_ERR_TOOBIG ? NS_ERR_TYPE : r.err;
    const uint8_t *start = r.p;
    uint64_t version = 0, type = 0;
    if (n < 1 || ns_mpr_uint(&r, &version) != NS_OK)
        return r.err ? r.err : NS_ERR_TYPE;
    if (version != NS_ENTRY_VERSION)
        return NS_ERR_VERSION;
    if (n != 9)
        return NS_ERR_TYPE;
    ns_mpr_bin_exact(&r, e->author, NS_ID_BYTES);
    ns_mpr_uint(&r, &e->seq);
    ns_mpr_bin_exact(&r, e->prev, NS_HASH_BYTES);
    ns_mpr_uint(&r, &type);
    ns_mpr_bin(&r, &e->body, &e->body_len, NS_MAX_ENTRY_BODY);
    size_t refs_len = 0;
    ns_mpr_bin(&r, &e->refs, &refs_len, (size_t)NS_MAX_REFS * NS_HASH_BYTES);
    ns_mpr_uint(&r, &e->timestamp_ms);
    if (r.err != NS_OK)
        return r.err;
    const uint8_t *end = r.p;
    ns_mpr_bin_exact(&r, e->sig, NS_SIG_BYTES);
    if (ns_mpr_end(&r) != NS_OK)
        return r.err;
    if (type < 1 || type > NS_ENTRY_TYPE_MAX)
        return NS_ERR_MSGTYPE;
    if (refs_len % NS_HASH_BYTES || e->seq == 0)
        return NS_ERR_TYPE;
    e->type = (uint8_t)type;
    e->n_refs = (uint32_t)(refs_len / NS_HASH_BYTES);
    size_t m_len = 0;
    uint8_t *m = s_preimage(network_id, start, (size_t)(end - start), &m_len);
    if (!m)
        return NS_ERR_NOMEM;
    ns_hash(e->id, m, m_len);
    int rc = verify ? ns_sig_verify(e->author, m, m_len, e->sig) : NS_OK;
    free(m);
    return rc;
}

int ns_entry_parse(const uint8_t *buf, size_t len, const ns_hash_t network_id,
                   ns_entry_t *e)
{
    return s_decode(buf, len, network_id, e, false);
}

int ns_entry_decode(const uint8_t *buf, size_t len, const ns_hash_t network_id,
                    ns_entry_t *e)
{
    return s_decode(buf, len, network_id, e, true);
}

void ns_ledger_job_id(ns_hash_t out, const uint8_t requester[NS_ID_BYTES],
                      const ns_hash_t desc_id, const uint8_t nonce[16])
{
    static const char tag[] = "nightshift/jobid/v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NS_HASH_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)tag, sizeof tag - 1);
    crypto_generichash_update(&st, requester, NS_ID_BYTES);
    crypto_generichash_update(&st, desc_id, NS_HASH_BYTES);
    crypto_generichash_update(&st, nonce, 16);
    crypto_generichash_final(&st, out, NS_HASH_BYTES);
}

/* ---- bids ------------------------------------------------------------- */

static void s_bid_digest(const ns_bid_t *b, const ns_hash_t network_id,
                         uint8_t *msg, size_t *len)
{
    size_t dl = sizeof(NS_BID_DOMAIN) - 1, o = 0;
    memcpy(msg, NS_BID_DOMAIN, dl);
    o += dl;
    memcpy(msg + o, network_id, NS_HASH_BYTES);
    o += NS_HASH_BYTES;
    memcpy(msg + o, b->provider, NS_ID_BYTES);
    o += NS_ID_BYTES;
    memcpy(msg + o, b->job_id, NS_HASH_BYTES);
    o += NS_HASH_BYTES;
    uint64_t v[3] = {b->price, b->est_ms, b->timestamp_ms};
    for (int i = 0; i < 3; i++)
        for (int k = 7; k >= 0; k--)
            msg[o++] = (uint8_t)(v[i] >> (8 * k));
    *len = o;
}

void ns_bid_sign(ns_bid_t *bid, const ns_identity_t *provider,
                 const ns_hash_t network_id)
{
    uint8_t msg[160];
    size_t len;
    memcpy(bid->provider, ns_identity_pk(provider), NS_ID_BYTES);
    s_bid_digest(bid, network_id, msg, &len);
    ns_identity_sign(provider, msg, len, bid->sig);
}

int ns_bid_verify(const ns_bid_t *bid, const ns_hash_t network_id)
{
    uint8_t msg[160];
    size_t len;
    s_bid_digest(bid, network_id, msg, &len);
    return ns_sig_verify(bid->provider, msg, len, bid->sig);
}

static void s_pack_bid(msgpack_packer *pk, const ns_bid_t *b)
{
    msgpack_pack_array(pk, 6);
    ns_mp_bin(pk, b->provider, NS_ID_BYTES);
    ns_mp_bin(pk, b->job_id, NS_HASH_BYTES);
    msgpack_pack_uint64(pk, b->price);
    msgpack_pack_uint64(pk, b->est_ms);
    msgpack_pack_uint64(pk, b->timestamp_ms);
    ns_mp_bin(pk, b->sig, NS_SIG_BYTES);
}

static void s_read_bid(ns_mpr_t *r, ns_bid_t *b)
{
    ns_mpr_array_exact(r, 6);
    ns_mpr_bin_exact(r, b->provider, NS_ID_BYTES);
    ns_mpr_bin_exact(r, b->job_id, NS_HASH_BYTES);
    ns_mpr_uint(r, &b->price);
    ns_mpr_uint(r, &b->est_ms);
    ns_mpr_uint(r, &b->timestamp_ms);
    ns_mpr_bin_exact(r, b->sig, NS_SIG_BYTES);
}

/* ---- bodies ------------------------------------------------------------ */

int ns_entry_body_encode(uint8_t type, const ns_entry_body_t *b, ns_buf_t *out)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    switch (type) {
    case NS_ENTRY_TRANSFER:
        msgpack_pack_array(&pk, 2);
        ns_mp_bin(&pk, b->to, NS_ID_BYTES);
        msgpack_pack_uint64(&pk, b->amount);
        break;
    case NS_ENTRY_STAKE:
    case NS_ENTRY_UNSTAKE:
        msgpack_pack_array(&pk, 1);
        msgpack_pack_uint64(&pk, b->amount);
        break;
    case NS_ENTRY_JOB:
        msgpack_pack_array(&pk, 7);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        msgpack_pack_uint64(&pk, b->escrow);
        msgpack_pack_uint64(&pk, b->max_price);
        msgpack_pack_uint64(&pk, b->collateral);
        msgpack_pack_uint64(&pk, b->deadline_ms);
        ns_mp_bin(&pk, b->desc_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->nonce, sizeof b->nonce);
        break;
    case NS_ENTRY_AWARD:
        msgpack_pack_array(&pk, 2);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        s_pack_bid(&pk, &b->bid);
        break;
    case NS_ENTRY_ACCEPT:
    case NS_ENTRY_SETTLE:
    case NS_ENTRY_CLOSE:
        msgpack_pack_array(&pk, 2);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->ref_id, NS_HASH_BYTES);
        break;
    case NS_ENTRY_RESULT:
        msgpack_pack_array(&pk, 4);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->ref_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->root, NS_HASH_BYTES);
        msgpack_pack_uint64(&pk, b->n_items);
        break;
    case NS_ENTRY_SLASH:
        if (b->proof_len > NS_MAX_PROOF)
            return NS_ERR_TOOBIG;
        msgpack_pack_array(&pk, 3);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->ref_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->proof, b->proof_len);
        break;
    case NS_ENTRY_CANCEL:
        msgpack_pack_array(&pk, 4);
        ns_mp_bin(&pk, b->job_id, NS_HASH_BYTES);
        ns_mp_bin(&pk, b->ref_id, NS_HASH_BYTES);
        if (b->reopen)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        msgpack_pack_uint64(&pk, b->new_deadline_ms);
        break;
    default:
        return NS_ERR_MSGTYPE;
    }
    return w.err;
}

int ns_entry_body_decode(const ns_entry_t *e, ns_entry_body_t *b)
{
    ns_mpr_t r;
    memset(b, 0, sizeof *b);
    ns_mpr_init(&r, e->body, e->body_len);
    switch (e->type) {
    case NS_ENTRY_TRANSFER:
        ns_mpr_array_exact(&r, 2);
        ns_mpr_bin_exact(&r, b->to, NS_ID_BYTES);
        ns_mpr_uint(&r, &b->amount);
        break;
    case NS_ENTRY_STAKE:
    case NS_ENTRY_UNSTAKE:
        ns_mpr_array_exact(&r, 1);
        ns_mpr_uint(&r, &b->amount);
        break;
    case NS_ENTRY_JOB:
        ns_mpr_array_exact(&r, 7);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        ns_mpr_uint(&r, &b->escrow);
        ns_mpr_uint(&r, &b->max_price);
        ns_mpr_uint(&r, &b->collateral);
        ns_mpr_uint(&r, &b->deadline_ms);
        ns_mpr_bin_exact(&r, b->desc_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->nonce, sizeof b->nonce);
        break;
    case NS_ENTRY_AWARD:
        ns_mpr_array_exact(&r, 2);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        s_read_bid(&r, &b->bid);
        break;
    case NS_ENTRY_ACCEPT:
    case NS_ENTRY_SETTLE:
    case NS_ENTRY_CLOSE:
        ns_mpr_array_exact(&r, 2);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->ref_id, NS_HASH_BYTES);
        break;
    case NS_ENTRY_RESULT:
        ns_mpr_array_exact(&r, 4);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->ref_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->root, NS_HASH_BYTES);
        ns_mpr_uint(&r, &b->n_items);
        break;
    case NS_ENTRY_SLASH:
        ns_mpr_array_exact(&r, 3);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->ref_id, NS_HASH_BYTES);
        ns_mpr_bin(&r, &b->proof, &b->proof_len, NS_MAX_PROOF);
        break;
    case NS_ENTRY_CANCEL:
        ns_mpr_array_exact(&r, 4);
        ns_mpr_bin_exact(&r, b->job_id, NS_HASH_BYTES);
        ns_mpr_bin_exact(&r, b->ref_id, NS_HASH_BYTES);
        ns_mpr_bool(&r, &b->reopen);
        ns_mpr_uint(&r, &b->new_deadline_ms);
        break;
    default:
        return NS_ERR_MSGTYPE;
    }
    return ns_mpr_end(&r);
}
