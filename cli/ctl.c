#include "ctl.h"

#include "nightshift/err.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

int ns_ctl_call(const char *datadir, const ns_ctl_req_t *req, uint8_t **doc,
                size_t *len, char *err, size_t errlen)
{
    ns_buf_t b;
    ns_buf_init(&b);
    int rc = ns_ctl_req_pack(req, &b);
    if (rc != NS_OK)
        snprintf(err, errlen, "cannot encode the request: %s", ns_strerror(rc));
    else
        rc = ns_ctl_request(datadir, b.data, b.len, doc, len, err, errlen);
    ns_buf_release(&b);
    return rc;
}

int ns_ctl_query(const char *datadir, const char *query, uint8_t **doc,
                 size_t *len, char *err, size_t errlen)
{
    ns_ctl_req_t req;
    memset(&req, 0, sizeof req);
    if (ns_ctl_kind(query, &req.kind) != NS_OK) {
        snprintf(err, errlen, "unknown query '%s'", query);
        return NS_ERR_INVAL;
    }
    return ns_ctl_call(datadir, &req, doc, len, err, errlen);
}

int ns_ctl_request(const char *datadir, const void *req, size_t req_len,
                   uint8_t **doc, size_t *len, char *err, size_t errlen)
{
    char ep[PATH_MAX + 16];
    int rc = NS_ERR_IO;
    void *ctx = NULL, *sock = NULL;
    zmq_msg_t reply;
    zmq_msg_init(&reply);
    if (ns_ctl_endpoint(datadir, ep, sizeof ep) != NS_OK) {
        snprintf(err, errlen, "datadir path too long for a control socket");
        return NS_ERR_TOOBIG;
    }
    struct stat st;
    if (stat(ep + 6, &st) != 0) {
        snprintf(err, errlen,
                 "no node is running on %s (start it with `nightshift node "
                 "--datadir %s`)",
                 datadir, datadir);
        return NS_ERR_NOTFOUND;
    }
    /* A socket file with nobody listening (a node killed with SIGKILL):
     * ZeroMQ would wait for the full timeout, a plain connect says at
     * once. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof sun);
        sun.sun_family = AF_UNIX;
        size_t plen = strlen(ep + 6); /* <= 107: ns_ctl_endpoint checked */
        memcpy(sun.sun_path, ep + 6,
               plen < sizeof sun.sun_path ? plen : sizeof sun.sun_path - 1);
        int refused =
            connect(probe, (struct sockaddr *)&sun, sizeof sun) != 0 &&
            errno == ECONNREFUSED;
        close(probe);
        if (refused) {
            snprintf(err, errlen,
                     "no node is running on %s (stale control.sock left by a "
                     "node that did not shut down cleanly)",
                     datadir);
            return NS_ERR_NOTFOUND;
        }
    }
    ctx = zmq_ctx_new();
    sock = ctx ? zmq_socket(ctx, ZMQ_REQ) : NULL;
    if (!sock) {
        snprintf(err, errlen, "zmq: %s", zmq_strerror(zmq_errno()));
        goto out;
    }
    int linger = 0, timeout = NS_CTL_TIMEOUT_MS;
    int64_t maxmsg = NS_CTL_MAX_REPLY;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zmq_connect(sock, ep) != 0) {
        snprintf(err, errlen, "cannot connect to %s: %s", ep,
                 zmq_strerror(zmq_errno()));
        goto out;
    }
    /* a signal (Ctrl-C, which the caller handles after this call)
     * interrupts the wait: wait on, it is not the node's silence */
    int sent, got = -1;
    while ((sent = zmq_send(sock, req, req_len, 0)) < 0 && zmq_errno() == EINTR)
        ;
    while (sent >= 0 && (got = zmq_msg_recv(&reply, sock, 0)) < 0 &&
           zmq_errno() == EINTR)
        ;
    if (sent < 0 || got < 0) {
        rc = NS_ERR_TIMEOUT;
        snprintf(err, errlen,
                 "the node on %s did not answer within %d ms (stale "
                 "control.sock from a crashed node?)",
                 datadir, NS_CTL_TIMEOUT_MS);
        goto out;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, zmq_msg_data(&reply), zmq_msg_size(&reply));
    bool ok = false;
    ns_mpr_array_exact(&r, 2);
    ns_mpr_bool(&r, &ok);
    if (r.err != NS_OK) {
        rc = NS_ERR_CORRUPT;
        snprintf(err, errlen, "malformed reply from the node");
        goto out;
    }
    if (!ok) {
        char why[256] = "unknown error";
        ns_mpr_str(&r, why, sizeof why - 1);
        snprintf(err, errlen, "the node refused: %s", why);
        rc = NS_ERR_INVAL;
        goto out;
    }
    *len = r.left;
    *doc = malloc(r.left ? r.left : 1);
    if (!*doc) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    memcpy(*doc, r.p, r.left);
    rc = NS_OK;
out:
    zmq_msg_close(&reply);
    if (sock)
        zmq_close(sock);
    if (ctx)
        zmq_ctx_term(ctx);
    return rc;
}
