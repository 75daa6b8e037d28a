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
    [NS_CTL_STATUS] = "status",     [NS_CTL_PEERS] = "peers",
    [NS_CTL_LATENCY] = "latency",   [NS_CTL_CONNECT] = "connect",
    [NS_CTL_BLOCK] = "block",       [NS_CTL_TRANSFER] = "transfer",
    [NS_CTL_STAKE] = "stake",       [NS_CTL_UNSTAKE] = "unstake",
    [NS_CTL_CANCEL] = "cancel",
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
        return 2;
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
    if (rd.left && ((rd.p[0] & 0xf0) == 0x90 || rd.p[0] == 0xdc ||
                    rd.p[0] == 0xdd)) {
        if (ns_mpr_array(&rd, &n, 3) != NS_OK || n == 0)
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
    default:
        break;
    }
    if (ns_mpr_end(&rd) != NS_OK)
        return NS_ERR_INVAL;
    if (r->kind == NS_CTL_BLOCK && r->ms > NS_CTL_MAX_BLOCK_MS)
        return NS_ERR_INVAL;
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

/* ---- server --------------------------------------------------------------- */

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
    if (rc != NS_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s rejected: %s (%s)", ns_ctl_name(r->kind),
                 ns_strerror(rc), ns_errname(rc));
        s_fail(pk, why);
        return;
    }
    ns_account_t a;
    char hex[2 * NS_HASH_BYTES + 1];
    ns_hex(hex, id, NS_HASH_BYTES);
    msgpack_pack_true(pk);
    msgpack_pack_map(pk, 2);
    ns_mp_str(pk, "entry");
    ns_mp_str(pk, hex);
    ns_mp_str(pk, "seq");
    msgpack_pack_uint64(pk, ns_ledger_account(ns_node_ledger(n),
                                              ns_identity_pk(ns_node_identity(
                                                  n)),
                                              &a) == NS_OK
                                ? a.seq
                                : 0);
}

void ns_control_handle(ns_node_t *n, const uint8_t *req, size_t len,
                       ns_buf_t *reply)
{
    ns_ctl_req_t r;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, reply);
    msgpack_pack_array(&pk, 2);
    int rc = ns_ctl_req_read(req, len, &r);
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
    }
}

/* One request on the socket: answer it, whatever it is. */
static void s_on_request(void *user, void *sock)
{
    ns_control_t *c = user;
    uint8_t buf[NS_CTL_MAX_REQUEST];
    int len = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT);
    if (len < 0)
        return;
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
    while (more) { /* REP must consume the whole request */
        zmq_recv(sock, buf, sizeof buf, 0);
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
        len = -1;
    }
    /* A truncated (over-long) or multi-frame request reads as malformed. */
    size_t n = len > 0 && (size_t)len <= sizeof buf ? (size_t)len : 0;
    ns_control_handle(c->node, buf, n, &c->reply);
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
    if (ns_ctl_endpoint(ns_node_datadir(n), c->endpoint,
                        sizeof c->endpoint) != NS_OK) {
        snprintf(err, errlen, "datadir path too long for a control socket");
        goto fail;
    }
    unlink(c->endpoint + 6);
    c->sock = zmq_socket(ns_p2p_zmq_context(ns_node_p2p(n)), ZMQ_REP);
    mode_t old_mask = umask(077);
    int bound = c->sock ? zmq_bind(c->sock, c->endpoint) : -1;
    umask(old_mask);
    if (bound != 0) {
        snprintf(err, errlen, "cannot bind control socket %s: %s",
                 c->endpoint, zmq_strerror(zmq_errno()));
        c->endpoint[0] = '\0'; /* not ours to remove */
        goto fail;
    }
    int linger = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (ns_p2p_add_socket(ns_node_p2p(n), c->sock, s_on_request, c) !=
        NS_OK) {
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
