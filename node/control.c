/* control.c - the control socket: request codec and server (control.h). */
#include "nightshift/control.h"

#include "nightshift/ledger.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/node.h"
#include "nightshift/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static const char *const s_names[] = {
    [NS_CTL_STATUS] = "status",   [NS_CTL_PEERS] = "peers",
    [NS_CTL_LATENCY] = "latency", [NS_CTL_CONNECT] = "connect",
    [NS_CTL_BLOCK] = "block",     [NS_CTL_TRANSFER] = "transfer",
    [NS_CTL_STAKE] = "stake",     [NS_CTL_UNSTAKE] = "unstake",
    [NS_CTL_CANCEL] = "cancel",   [NS_CTL_SUBMIT] = "submit",
    [NS_CTL_JOB] = "job",         [NS_CTL_JOBS] = "jobs",
};
#define S_N_KINDS (sizeof s_names / sizeof s_names[0])

/* Arguments after the command name, by kind. */
static uint32_t s_nargs(ns_ctl_kind_t k)
{
    switch (k) {
    case NS_CTL_CONNECT:
    case NS_CTL_STAKE:
    case NS_CTL_UNSTAKE:
    case NS_CTL_CANCEL:
        return 1;
    case NS_CTL_BLOCK:
    case NS_CTL_TRANSFER:
    case NS_CTL_JOB:
        return 2;
    case NS_CTL_SUBMIT:
        return 5;
    default:
        return 0;
    }
}

const char *ns_ctl_name(ns_ctl_kind_t kind)
{
    return (size_t)kind < S_N_KINDS ? s_names[kind] : "?";
}

int ns_ctl_kind(const char *name, ns_ctl_kind_t *kind)
{
    for (size_t k = 0; k < S_N_KINDS; k++)
        if (strcmp(name, s_names[k]) == 0) {
            *kind = (ns_ctl_kind_t)k;
            return NS_OK;
        }
    return NS_ERR_NOTFOUND;
}

static void s_pack_paths(msgpack_packer *pk, uint32_t n,
                         const char (*paths)[NS_CTL_MAX_PATH])
{
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        if (paths[i][0])
            ns_mp_str(pk, paths[i]);
        else
            msgpack_pack_nil(pk);
}

void ns_ctl_terms_pack(msgpack_packer *pk, const ns_ctl_terms_t *t)
{
    msgpack_pack_array(pk, 11);
    msgpack_pack_uint64(pk, t->max_price);
    msgpack_pack_uint64(pk, t->collateral);
    msgpack_pack_uint32(pk, t->bid_window_ms);
    msgpack_pack_uint64(pk, t->deadline_s);
    msgpack_pack_uint64(pk, t->timeout_s);
    msgpack_pack_uint64(pk, t->reqs.min_mem_bytes);
    msgpack_pack_uint32(pk, t->reqs.device_type);
    msgpack_pack_uint32(pk, t->reqs.min_cl_major);
    msgpack_pack_uint32(pk, t->reqs.min_cl_minor);
    ns_mp_str(pk, t->reqs.region);
    if (t->no_wait)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

static void s_pack_submit(msgpack_packer *pk, const ns_ctl_req_t *r)
{
    ns_ctl_terms_pack(pk, &r->terms);
    ns_mp_bin(pk, r->desc, r->desc_len);
    s_pack_paths(pk, r->n_args, r->in_path);
    s_pack_paths(pk, r->n_args, r->out_path);
    ns_mp_str(pk, r->source_name);
}

/* nil or a str of at most NS_CTL_MAX_PATH - 1 bytes. */
static void s_read_paths(ns_mpr_t *rd, uint32_t want,
                         char (*paths)[NS_CTL_MAX_PATH])
{
    uint32_t n = 0;
    if (ns_mpr_array(rd, &n, NS_MAX_ARGS) != NS_OK)
        return;
    if (n != want) {
        rd->err = NS_ERR_INVAL;
        return;
    }
    for (uint32_t i = 0; i < n && rd->err == NS_OK; i++) {
        if (rd->left && rd->p[0] == 0xc0) {
            rd->p++;
            rd->left--;
            paths[i][0] = '\0';
        } else {
            ns_mpr_str(rd, paths[i], NS_CTL_MAX_PATH - 1);
            if (rd->err == NS_OK && paths[i][0] != '/')
                rd->err = NS_ERR_INVAL; /* absolute paths only */
        }
    }
}

void ns_ctl_terms_read(ns_mpr_t *rd, ns_ctl_terms_t *t)
{
    ns_mpr_array_exact(rd, 11);
    ns_mpr_uint(rd, &t->max_price);
    ns_mpr_uint(rd, &t->collateral);
    ns_mpr_u32(rd, &t->bid_window_ms);
    ns_mpr_uint(rd, &t->deadline_s);
    ns_mpr_uint(rd, &t->timeout_s);
    ns_mpr_uint(rd, &t->reqs.min_mem_bytes);
    ns_mpr_u32(rd, &t->reqs.device_type);
    ns_mpr_u32(rd, &t->reqs.min_cl_major);
    ns_mpr_u32(rd, &t->reqs.min_cl_minor);
    ns_mpr_str(rd, t->reqs.region, NS_MAX_REGION);
    ns_mpr_bool(rd, &t->no_wait);
}

static void s_read_submit(ns_mpr_t *rd, ns_ctl_req_t *r)
{
    ns_ctl_terms_read(rd, &r->terms);
    ns_mpr_bin(rd, &r->desc, &r->desc_len, NS_MAX_JOB_MSG);
    uint32_t n = 0;
    /* both path arrays have the descriptor's argument count: peek it */
    if (rd->err == NS_OK && rd->left && (rd->p[0] & 0xf0) == 0x90)
        n = rd->p[0] & 0x0f;
    else if (rd->err == NS_OK && rd->left >= 3 && rd->p[0] == 0xdc)
        n = (uint32_t)rd->p[1] << 8 | rd->p[2];
    r->n_args = n;
    s_read_paths(rd, n, r->in_path);
    s_read_paths(rd, n, r->out_path);
    ns_mpr_str(rd, r->source_name, sizeof r->source_name - 1);
}

int ns_ctl_req_pack(const ns_ctl_req_t *r, ns_buf_t *out)
{
    if ((size_t)r->kind >= S_N_KINDS)
        return NS_ERR_INVAL;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    uint32_t n = s_nargs(r->kind);
    if (n)
        msgpack_pack_array(&pk, 1 + n);
    ns_mp_str(&pk, s_names[r->kind]);
    switch (r->kind) {
    case NS_CTL_CONNECT:
        ns_mp_str(&pk, r->addr);
        break;
    case NS_CTL_BLOCK:
        ns_mp_bin(&pk, r->peer, NS_ID_BYTES);
        msgpack_pack_uint64(&pk, r->ms);
        break;
    case NS_CTL_TRANSFER:
        ns_mp_bin(&pk, r->peer, NS_ID_BYTES);
        msgpack_pack_uint64(&pk, r->amount);
        break;
    case NS_CTL_STAKE:
    case NS_CTL_UNSTAKE:
        msgpack_pack_uint64(&pk, r->amount);
        break;
    case NS_CTL_CANCEL:
        ns_mp_bin(&pk, r->job_id, NS_HASH_BYTES);
        break;
    case NS_CTL_JOB:
        ns_mp_bin(&pk, r->job_id, NS_HASH_BYTES);
        msgpack_pack_uint32(&pk, r->from_line);
        break;
    case NS_CTL_SUBMIT:
        s_pack_submit(&pk, r);
        break;
    default:
        break;
    }
    return w.err;
}

int ns_ctl_req_read(const uint8_t *buf, size_t len, ns_ctl_req_t *r)
{
    ns_mpr_t rd;
    char name[16] = "";
    uint32_t n = 0;
    memset(r, 0, sizeof *r);
    if (len > NS_CTL_MAX_REQUEST)
        return NS_ERR_INVAL;
    ns_mpr_init(&rd, buf, len);
    if (rd.left &&
        ((rd.p[0] & 0xf0) == 0x90 || rd.p[0] == 0xdc || rd.p[0] == 0xdd)) {
        if (ns_mpr_array(&rd, &n, 6) != NS_OK || n == 0)
            return NS_ERR_INVAL;
        n--;
    }
    if (ns_mpr_str(&rd, name, sizeof name - 1) != NS_OK)
        return NS_ERR_INVAL;
    if (ns_ctl_kind(name, &r->kind) != NS_OK)
        return NS_ERR_NOTFOUND;
    if (n != s_nargs(r->kind))
        return NS_ERR_INVAL;
    switch (r->kind) {
    case NS_CTL_CONNECT:
        ns_mpr_str(&rd, r->addr, sizeof r->addr - 1);
        break;
    case NS_CTL_BLOCK:
        ns_mpr_bin_exact(&rd, r->peer, NS_ID_BYTES);
        ns_mpr_uint(&rd, &r->ms);
        break;
    case NS_CTL_TRANSFER:
        ns_mpr_bin_exact(&rd, r->peer, NS_ID_BYTES);
        ns_mpr_uint(&rd, &r->amount);
        break;
    case NS_CTL_STAKE:
    case NS_CTL_UNSTAKE:
        ns_mpr_uint(&rd, &r->amount);
        break;
    case NS_CTL_CANCEL:
        ns_mpr_bin_exact(&rd, r->job_id, NS_HASH_BYTES);
        break;
    case NS_CTL_JOB:
        ns_mpr_bin_exact(&rd, r->job_id, NS_HASH_BYTES);
        ns_mpr_u32(&rd, &r->from_line);
        break;
    case NS_CTL_SUBMIT:
        s_read_submit(&rd, r);
        break;
    default:
        break;
    }
    if (ns_mpr_end(&rd) != NS_OK)
        return NS_ERR_INVAL;
    if (r->kind == NS_CTL_SUBMIT &&
        (r->terms.bid_window_ms > 60000 || r->terms.reqs.device_type > 3 ||
         r->desc_len == 0))
        return NS_ERR_INVAL;
    if (r->kind == NS_CTL_BLOCK && r->ms > NS_CTL_MAX_BLOCK_MS)
        return NS_ERR_INVAL;
    return NS_OK;
}

/* ---- the answer to "job" ---------------------------------------------- */

void ns_ctl_job_pack(msgpack_packer *pk, const ns_ctl_job_t *j)
{
    msgpack_pack_array(pk, 5);
    msgpack_pack_uint32(pk, j->phase);
    if (j->finished)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
    msgpack_pack_uint32(pk, j->next_line);
    msgpack_pack_array(pk, j->n_lines);
    for (uint32_t i = 0; i < j->n_lines; i++)
        ns_mp_str(pk, j->lines[i]);
    const ns_receipt_t *r = &j->receipt;
    msgpack_pack_array(pk, 14);
    msgpack_pack_uint32(pk, r->phase);
    ns_mp_bin(pk, r->provider, NS_ID_BYTES);
    msgpack_pack_uint64(pk, r->price);
    msgpack_pack_uint64(pk, r->refund);
    msgpack_pack_uint32(pk, r->checked);
    msgpack_pack_uint32(pk, r->rounds);
    msgpack_pack_uint32(pk, r->slashed);
    msgpack_pack_uint32(pk, r->cancelled);
    msgpack_pack_uint32(pk, r->failures);
    msgpack_pack_uint64(pk, r->match_ms);
    msgpack_pack_uint64(pk, r->run_ms);
    msgpack_pack_uint64(pk, r->verify_ms);
    ns_mp_str(pk, r->error);
    msgpack_pack_uint64(pk, 0); /* reserved */
}

int ns_ctl_job_read(const uint8_t *buf, size_t len, ns_ctl_job_t *j)
{
    ns_mpr_t rd;
    memset(j, 0, sizeof *j);
    ns_mpr_init(&rd, buf, len);
    ns_mpr_array_exact(&rd, 5);
    ns_mpr_u32(&rd, &j->phase);
    ns_mpr_bool(&rd, &j->finished);
    ns_mpr_u32(&rd, &j->next_line);
    ns_mpr_array(&rd, &j->n_lines, NS_CTL_JOB_LINES);
    for (uint32_t i = 0; i < j->n_lines && rd.err == NS_OK; i++)
        ns_mpr_str(&rd, j->lines[i], NS_CTL_LINE_MAX);
    ns_receipt_t *r = &j->receipt;
    uint32_t phase = 0;
    uint64_t reserved = 0;
    ns_mpr_array_exact(&rd, 14);
    ns_mpr_u32(&rd, &phase);
    ns_mpr_bin_exact(&rd, r->provider, NS_ID_BYTES);
    ns_mpr_uint(&rd, &r->price);
    ns_mpr_uint(&rd, &r->refund);
    ns_mpr_u32(&rd, &r->checked);
    ns_mpr_u32(&rd, &r->rounds);
    ns_mpr_u32(&rd, &r->slashed);
    ns_mpr_u32(&rd, &r->cancelled);
    ns_mpr_u32(&rd, &r->failures);
    ns_mpr_uint(&rd, &r->match_ms);
    ns_mpr_uint(&rd, &r->run_ms);
    ns_mpr_uint(&rd, &r->verify_ms);
    ns_mpr_str(&rd, r->error, sizeof r->error - 1);
    ns_mpr_uint(&rd, &reserved);
    if (ns_mpr_end(&rd) != NS_OK)
        return NS_ERR_INVAL;
    if (j->phase > NS_RQ_FAILED || phase > NS_RQ_FAILED)
        return NS_ERR_INVAL;
    r->phase = (ns_rq_phase_t)phase;
    return NS_OK;
}

int ns_ctl_endpoint(const char *datadir, char *out, size_t cap)
{
    char real[PATH_MAX];
    const char *dir = realpath(datadir, real) ? real : datadir;
    int n = snprintf(out, cap, "ipc://%s/%s", dir, NS_CTL_SOCK);
    /* sun_path holds 107 characters. */
    if (n < 0 || (size_t)n >= cap || strlen(out) - 6 > 107)
        return NS_ERR_TOOBIG;
    return NS_OK;
}

/* ---- server ---------------------------------------------------------------
 */

struct ns_control {
    ns_node_t *node;
    void *sock;
    char endpoint[PATH_MAX + 16];
    ns_buf_t reply;
};

static void s_fail(msgpack_packer *pk, const char *why)
{
    msgpack_pack_false(pk);
    ns_mp_str(pk, why);
}

/* transfer / stake / unstake from the local owner. */
static void s_ledger(ns_node_t *n, const ns_ctl_req_t *r, msgpack_packer *pk)
{
    ns_entry_body_t b;
    uint8_t type = r->kind == NS_CTL_TRANSFER ? NS_ENTRY_TRANSFER
                   : r->kind == NS_CTL_STAKE  ? NS_ENTRY_STAKE
                                              : NS_ENTRY_UNSTAKE;
    memset(&b, 0, sizeof b);
    memcpy(b.to, r->peer, NS_ID_BYTES);
    b.amount = r->amount;
    ns_hash_t id;
    int rc = ns_node_append(n, type, &b, id);
    const char *cause = "";
    if (rc != NS_OK &&
        ns_ledger_write_state(ns_node_ledger(n), &cause, NULL) != NS_OK) {
        char why[300];
        snprintf(why, sizeof why,
                 "%s not stored: the ledger cannot write (%s); nothing "
                 "was sent, try again once the node can write",
                 ns_ctl_name(r->kind), cause);
        s_fail(pk, why);
        return;
    }
    ns_account_t a;
    if (rc == NS_ERR_FUNDS &&
        ns_ledger_account(ns_node_ledger(n),
                          ns_identity_pk(ns_node_identity(n)), &a) == NS_OK) {
        /* Say what there is, not only that it is too little. */
        char why[300], x[NS_CREDITS_TEXT], y[NS_CREDITS_TEXT];
        if (r->kind == NS_CTL_UNSTAKE)
            snprintf(why, sizeof why,
                     "unstake rejected: only %s credits are staked (%s "
                     "locked as collateral) (%s)",
                     ns_credits_fmt(x, a.staked),
                     ns_credits_fmt(y, a.locked_collateral), ns_errname(rc));
        else
            snprintf(why, sizeof why,
                     "%s rejected: only %s credits are free (%s staked) "
                     "(%s)",
                     ns_ctl_name(r->kind), ns_credits_fmt(x, a.free),
                     ns_credits_fmt(y, a.staked), ns_errname(rc));
        s_fail(pk, why);
        return;
    }
    if (rc != NS_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s rejected: %s (%s)", ns_ctl_name(r->kind),
                 ns_strerror(rc), ns_errname(rc));
        s_fail(pk, why);
        return;
    }
    char hex[2 * NS_HASH_BYTES + 1];
    ns_hex(hex, id, NS_HASH_BYTES);
    msgpack_pack_true(pk);
    msgpack_pack_map(pk, 2);
    ns_mp_str(pk, "entry");
    ns_mp_str(pk, hex);
    ns_mp_str(pk, "seq");
    msgpack_pack_uint64(
        pk, ns_ledger_account(ns_node_ledger(n),
                              ns_identity_pk(ns_node_identity(n)), &a) == NS_OK
                ? a.seq
                : 0);
}

static void s_handle(ns_node_t *n, ns_ctl_req_t *rp, const uint8_t *req,
                     size_t len, msgpack_packer *pkp);

void ns_control_handle(ns_node_t *n, const uint8_t *req, size_t len,
                       ns_buf_t *reply)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, reply);
    msgpack_pack_array(&pk, 2);
    ns_ctl_req_t *rp = calloc(1, sizeof *rp);
    if (!rp) {
        s_fail(&pk, "out of memory");
        return;
    }
    s_handle(n, rp, req, len, &pk);
    free(rp);
}

static void s_handle(ns_node_t *n, ns_ctl_req_t *rp, const uint8_t *req,
                     size_t len, msgpack_packer *pkp)
{
#define r (*rp)
#define pk (*pkp)
    int rc = ns_ctl_req_read(req, len, rp);
    if (rc == NS_ERR_NOTFOUND) {
        s_fail(&pk, "unknown query");
        return;
    }
    if (rc != NS_OK) {
        s_fail(&pk, "malformed request");
        return;
    }
    ns_p2p_t *p2p = ns_node_p2p(n);
    switch (r.kind) {
    case NS_CTL_STATUS:
        msgpack_pack_true(&pk);
        ns_node_pack_status(n, &pk);
        break;
    case NS_CTL_PEERS:
        msgpack_pack_true(&pk);
        ns_p2p_pack_peers(p2p, &pk);
        break;
    case NS_CTL_JOBS:
        msgpack_pack_true(&pk);
        ns_node_pack_jobs(n, &pk);
        break;
    case NS_CTL_LATENCY:
        msgpack_pack_true(&pk);
        ns_p2p_pack_latency(p2p, &pk);
        break;
    case NS_CTL_CONNECT:
        rc = ns_p2p_connect(p2p, r.addr);
        if (rc != NS_OK) {
            s_fail(&pk, ns_strerror(rc));
            break;
        }
        msgpack_pack_true(&pk);
        ns_mp_str(&pk, "dialling");
        break;
    case NS_CTL_BLOCK:
        if (!ns_node_genesis(n)->test_network) {
            s_fail(&pk, "block is for test networks only");
            break;
        }
        rc = ns_p2p_block(p2p, r.peer, (uint32_t)r.ms);
        if (rc != NS_OK) {
            s_fail(&pk, ns_strerror(rc));
            break;
        }
        msgpack_pack_true(&pk);
        ns_mp_str(&pk, "blocked");
        break;
    case NS_CTL_TRANSFER:
    case NS_CTL_STAKE:
    case NS_CTL_UNSTAKE:
        s_ledger(n, &r, &pk);
        break;
    case NS_CTL_CANCEL: {
        ns_cancel_result_t res;
        char err[256], what[300];
        if (ns_node_cancel(n, r.job_id, &res, err, sizeof err) != NS_OK) {
            s_fail(&pk, err);
            break;
        }
        ns_cancel_describe(&res, what, sizeof what);
        msgpack_pack_true(&pk);
        ns_mp_str(&pk, what);
        break;
    }
    case NS_CTL_SUBMIT: {
        ns_hash_t id;
        char err[512];
        if (ns_node_submit(n, rp, id, err, sizeof err) != NS_OK) {
            s_fail(&pk, err);
            break;
        }
        msgpack_pack_true(&pk);
        ns_mp_bin(&pk, id, NS_HASH_BYTES);
        break;
    }
    case NS_CTL_JOB: {
        ns_ctl_job_t j;
        if (ns_node_job_progress(n, r.job_id, r.from_line, &j) != NS_OK) {
            s_fail(&pk, "no such job on this node");
            break;
        }
        msgpack_pack_true(&pk);
        ns_ctl_job_pack(&pk, &j);
        break;
    }
    }
#undef r
#undef pk
}

/* One request on the socket: answer it, whatever it is. */
static void s_on_request(void *user, void *sock)
{
    ns_control_t *c = user;
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return;
    }
    bool multi = zmq_msg_more(&msg);
    while (zmq_msg_more(&msg)) { /* REP must consume the whole request */
        zmq_msg_close(&msg);
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, 0) < 0)
            break;
    }
    /* An over-long (MAXMSGSIZE drops it) or multi-frame request reads as
     * malformed. */
    size_t n = multi ? 0 : zmq_msg_size(&msg);
    ns_control_handle(c->node, zmq_msg_data(&msg), n, &c->reply);
    zmq_msg_close(&msg);
    if (zmq_send(sock, c->reply.data, c->reply.len, 0) < 0)
        ns_debug(NS_MOD_CTL, "event=reply_failed error=\"%s\"",
                 zmq_strerror(zmq_errno()));
}

ns_control_t *ns_control_open(ns_node_t *n, char *err, size_t errlen)
{
    ns_control_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->node = n;
    ns_buf_init(&c->reply);
    if (ns_ctl_endpoint(ns_node_datadir(n), c->endpoint, sizeof c->endpoint) !=
        NS_OK) {
        snprintf(err, errlen, "datadir path too long for a control socket");
        goto fail;
    }
    unlink(c->endpoint + 6);
    c->sock = zmq_socket(ns_p2p_zmq_context(ns_node_p2p(n)), ZMQ_REP);
    mode_t old_mask = umask(077);
    int bound = c->sock ? zmq_bind(c->sock, c->endpoint) : -1;
    umask(old_mask);
    if (bound != 0) {
        snprintf(err, errlen, "cannot bind control socket %s: %s", c->endpoint,
                 zmq_strerror(zmq_errno()));
        c->endpoint[0] = '\0'; /* not ours to remove */
        goto fail;
    }
    int linger = 0;
    int64_t maxmsg = NS_CTL_MAX_REQUEST;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (ns_p2p_add_socket(ns_node_p2p(n), c->sock, s_on_request, c) != NS_OK) {
        snprintf(err, errlen, "cannot serve the control socket");
        goto fail;
    }
    return c;
fail:
    ns_control_close(&c);
    return NULL;
}

void ns_control_close(ns_control_t **cp)
{
    if (!cp || !*cp)
        return;
    ns_control_t *c = *cp;
    if (c->sock)
        zmq_close(c->sock);
    if (c->endpoint[0])
        unlink(c->endpoint + 6);
    ns_buf_release(&c->reply);
    free(c);
    *cp = NULL;
}
