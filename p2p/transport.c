/* transport.c - ZeroMQ sockets with CURVE on every link, and the ZAP
 * handler that authenticates inbound connections.
 *
 * Key choice (docs/PROTOCOL.md, "Transport keys"): the CURVE key pair is
 * derived from the Ed25519 identity (crypto_sign_ed25519_*_to_curve25519),
 * so an address "<id>@tcp://..." is enough to connect: the DEALER uses the
 * X25519 form of <id> as the server key, and the CURVE handshake succeeds
 * only if the server holds the matching secret, i.e. owns <id>.
 */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define MONITOR_ENDPOINT "inproc://nightshift.router.monitor"

static void s_common_opts(void *s)
{
    /* ZMTP pings only catch dead TCP links; liveness of peers comes from
     * our own heartbeats, so they can be rare (they wake both ends, and
     * ZeroMQ sends them on every connection whatever its traffic: at 10 s
     * with 63 peers, two connections each, about 25 pings and pongs a
     * second per node, as many as its heartbeats). TTL: the peer cuts the
     * link after this long without a byte from us; above the interval. */
    int linger = 0, hb_ivl = 60000, hb_timeout = 30000, hb_ttl = 150000;
    int handshake = 5000;
    /* ZeroMQ applies ZMQ_MAXMSGSIZE to the frame as it arrives, CURVE's
     * box and command header included, and cuts the connection over it
     * without a trace. So the transport takes more than NS_MAX_MSG: every
     * envelope up to NS_MAX_MSG reaches ingest whole, and one above it,
     * up to S_TRANSPORT_MAX_MSG, reaches it too and is counted there as
     * too_big (ns_envelope_decode). Beyond that the link is cut, which
     * bounds what one message may cost us; on inbound links the cut is
     * counted (links_cut, ns_tr_handle_monitor). */
    int64_t maxmsg = S_TRANSPORT_MAX_MSG;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_HEARTBEAT_IVL, &hb_ivl, sizeof hb_ivl);
    zmq_setsockopt(s, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof hb_timeout);
    zmq_setsockopt(s, ZMQ_HEARTBEAT_TTL, &hb_ttl, sizeof hb_ttl);
    zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
}

int ns_tr_bind(ns_p2p_t *p)
{
    int rc = NS_ERR_ZMQ;
    /* The ZAP handler must exist before the first handshake. */
    p->zap = zmq_socket(p->ctx, ZMQ_REP);
    if (!p->zap || zmq_bind(p->zap, ZAP_ENDPOINT) != 0)
        return NS_ERR_ZMQ;
    int linger = 0;
    zmq_setsockopt(p->zap, ZMQ_LINGER, &linger, sizeof linger);

    p->router = zmq_socket(p->ctx, ZMQ_ROUTER);
    if (!p->router)
        return NS_ERR_ZMQ;
    s_common_opts(p->router);
    int one = 1, rcvhwm = 10000, sndhwm = 1000;
    zmq_setsockopt(p->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(p->router, ZMQ_RCVHWM, &rcvhwm, sizeof rcvhwm);
    zmq_setsockopt(p->router, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    zmq_setsockopt(p->router, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(p->router, ZMQ_CURVE_SECRETKEY, p->curve_sk, 32);
    zmq_setsockopt(p->router, ZMQ_ZAP_DOMAIN, "nightshift", 10);

    /* "tcp://host:0" means any free port; ZeroMQ spells that "*". */
    char ep[NS_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "%s", p->cfg->listen);
    size_t n = strlen(ep);
    if (n >= 2 && strcmp(ep + n - 2, ":0") == 0)
        ep[n - 1] = '*';
    if (zmq_bind(p->router, ep) != 0) {
        int e = zmq_errno();
        rc = e == EADDRINUSE ? NS_ERR_ADDRINUSE
             : (e == EADDRNOTAVAIL || e == ENODEV || e == EINVAL) ? NS_ERR_ADDR
                                                                  : NS_ERR_ZMQ;
        /* The caller reports it; this line is for debugging only. */
        ns_debug(NS_MOD_NET, "event=bind_failed endpoint=%s error=\"%s\"",
                 p->cfg->listen, zmq_strerror(e));
        return rc;
    }
    size_t len = sizeof p->endpoint;
    if (zmq_getsockopt(p->router, ZMQ_LAST_ENDPOINT, p->endpoint, &len) != 0)
        return NS_ERR_ZMQ;
    const char *colon = strrchr(p->endpoint, ':');
    p->listen_port = colon ? (uint16_t)strtoul(colon + 1, NULL, 10) : 0;

    /* The ROUTER's connection events: which inbound link was cut. */
    if (zmq_socket_monitor(p->router, MONITOR_ENDPOINT,
                           ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
        return NS_ERR_ZMQ;
    p->monitor = zmq_socket(p->ctx, ZMQ_PAIR);
    if (!p->monitor)
        return NS_ERR_ZMQ;
    zmq_setsockopt(p->monitor, ZMQ_LINGER, &linger, sizeof linger);
    /* No high-water mark on the way to us: ZeroMQ's I/O thread sends
     * the events and would wait for room. The loop reads them each turn. */
    int unlimited = 0;
    zmq_setsockopt(p->monitor, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
    if (zmq_connect(p->monitor, MONITOR_ENDPOINT) != 0)
        return NS_ERR_ZMQ;
    return NS_OK;
}

/* ---- links cut mid-message --------------------------------------------
 *
 * ZeroMQ cuts a connection whose frame is over ZMQ_MAXMSGSIZE as soon as
 * it has read the frame's header, and says no more than for any other
 * close (ZMQ_EVENT_DISCONNECTED). So each inbound connection gets a second
 * descriptor here when it is accepted. Once ZeroMQ has let go of it, the
 * rest of the frame is still on its way: bytes waiting on our descriptor,
 * at once or within S_CUT_GRACE_MS, mean the link was cut while a message
 * was arriving (a frame over the cap, or one ZeroMQ could not decode). A
 * peer that closed reads as end of file, a link that timed out stays
 * silent: neither is counted. Our descriptor keeps the TCP connection
 * open until then. */

static void s_watch_drop(ns_p2p_t *p, uint32_t i)
{
    close(p->cut_watch[i].dup);
    p->cut_watch[i] = p->cut_watch[--p->n_cut_watch];
}

/* The open (not yet let go of) connection on ZeroMQ's descriptor fd. */
static int s_watch_find(const ns_p2p_t *p, int fd)
{
    for (uint32_t i = 0; i < p->n_cut_watch; i++)
        if (p->cut_watch[i].fd == fd && p->cut_watch[i].until_ms == 0)
            return (int)i;
    return -1;
}

static void s_watch_accepted(ns_p2p_t *p, int fd)
{
    int i = s_watch_find(p, fd);
    if (i >= 0) /* the descriptor was closed and reused meanwhile */
        s_watch_drop(p, (uint32_t)i);
    /* By now ZeroMQ may have closed fd and something else taken its
     * number: watch it only if it is still a TCP connection to our
     * listening port. */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 ||
        type != SOCK_STREAM ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    uint16_t port = ss.ss_family == AF_INET
                        ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                    : ss.ss_family == AF_INET6
                        ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                        : 0;
    if (!port || port != p->listen_port)
        return;
    if (p->n_cut_watch == S_CUT_WATCH)
        s_watch_drop(p, 0); /* the oldest, roughly: let it go */
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup < 0)
        return;
    /* Our descriptors must never be what stops ZeroMQ accepting: none
     * in the top quarter of the descriptor limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)dup >= rl.rlim_cur - rl.rlim_cur / 4) {
        close(dup);
        return;
    }
    p->cut_watch[p->n_cut_watch].fd = fd;
    p->cut_watch[p->n_cut_watch].dup = dup;
    p->cut_watch[p->n_cut_watch].until_ms = 0;
    p->n_cut_watch++;
}

/* 1: bytes wait on it; 0: end of file or an error; -1: nothing yet. */
static int s_watch_peek(int dup)
{
    char c;
    ssize_t n = recv(dup, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return -1;
    return 0;
}

static void s_watch_cut(ns_p2p_t *p)
{
    p->stats.links_cut++;
    if (ns_ratelimit_allow(&p->global_log, ns_mono_ms(), S_LOG_LINES_PER_MIN,
                           60000))
        ns_warn(NS_MOD_NET,
                "event=link_cut reason=\"a frame over %d bytes, or one the "
                "transport could not decode\" links_cut=%llu",
                S_TRANSPORT_MAX_MSG, (unsigned long long)p->stats.links_cut);
}

static void s_watch_disconnected(ns_p2p_t *p, int fd)
{
    int i = s_watch_find(p, fd);
    if (i < 0)
        return;
    int r = s_watch_peek(p->cut_watch[i].dup);
    if (r > 0)
        s_watch_cut(p);
    if (r >= 0)
        s_watch_drop(p, (uint32_t)i);
    else /* nothing unread yet: the rest of a frame may be on its way */
        p->cut_watch[i].until_ms = ns_mono_ms() + S_CUT_GRACE_MS;
}

void ns_tr_monitor_tick(ns_p2p_t *p)
{
    uint64_t now = ns_mono_ms();
    for (uint32_t i = 0; i < p->n_cut_watch;) {
        if (p->cut_watch[i].until_ms == 0) {
            i++;
            continue;
        }
        int r = s_watch_peek(p->cut_watch[i].dup);
        if (r > 0)
            s_watch_cut(p);
        if (r >= 0 || now >= p->cut_watch[i].until_ms)
            s_watch_drop(p, i); /* the next one moved to i */
        else
            i++;
    }
}

void ns_tr_handle_monitor(ns_p2p_t *p)
{
    for (int k = 0; k < 256; k++) {
        /* two frames: event (u16) and value (u32), then the endpoint */
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, p->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        bool ok = zmq_msg_size(&ev) == 6;
        if (ok) {
            const uint8_t *d = zmq_msg_data(&ev);
            memcpy(&event, d, 2);
            memcpy(&value, d + 2, 4);
        }
        while (zmq_msg_more(&ev)) { /* the endpoint, unused */
            zmq_msg_init(&addr);
            int more = zmq_msg_recv(&addr, p->monitor, ZMQ_DONTWAIT) >= 0 &&
                       zmq_msg_more(&addr);
            zmq_msg_close(&addr);
            if (!more)
                break;
        }
        zmq_msg_close(&ev);
        if (!ok)
            continue;
        if (event == ZMQ_EVENT_ACCEPTED)
            s_watch_accepted(p, (int)value);
        else if (event == ZMQ_EVENT_DISCONNECTED)
            s_watch_disconnected(p, (int)value);
    }
}

void ns_tr_monitor_close(ns_p2p_t *p)
{
    if (p->router && p->monitor)
        zmq_socket_monitor(p->router, NULL, 0);
    ns_tr_close(&p->monitor);
    while (p->n_cut_watch)
        s_watch_drop(p, p->n_cut_watch - 1);
}

void *ns_tr_connect(ns_p2p_t *p, const uint8_t peer_curve_pk[32],
                    const char *endpoint)
{
    void *s = zmq_socket(p->ctx, ZMQ_DEALER);
    if (!s)
        return NULL;
    s_common_opts(s);
    int reconnect = 200, reconnect_max = 10000, hwm = 1000;
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect);
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &reconnect_max,
                   sizeof reconnect_max);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, peer_curve_pk, 32);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, p->curve_pk, 32);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, p->curve_sk, 32);
    if (zmq_connect(s, endpoint) != 0) {
        ns_warn(NS_MOD_NET, "event=connect_failed endpoint=%s error=\"%s\"",
                endpoint, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

void ns_tr_close(void **socket)
{
    if (socket && *socket) {
        zmq_close(*socket);
        *socket = NULL;
    }
}

/* Count a send and say how it went: with ROUTER_MANDATORY an unknown
 * routing id is EHOSTUNREACH (the connection is gone); a full queue is
 * EAGAIN (ZMQ_DONTWAIT). */
static int s_sent(ns_p2p_t *p, bool ok, const uint8_t *buf, size_t len)
{
    if (!ok) {
        p->stats.send_failed++;
        return zmq_errno() == EHOSTUNREACH ? NS_ERR_NOTFOUND : NS_ERR_IO;
    }
    p->stats.tx_msgs++;
    p->stats.tx_bytes += len;
    p->stats.tx_type[ns_tr_stat_type(buf, len)]++;
    return NS_OK;
}

uint32_t ns_tr_stat_type(const uint8_t *buf, size_t len)
{
    /* [version, type, ...]: a fixarray of 6, the version a positive
     * fixint, the type a positive fixint or 0xcc and one byte (wire.c) */
    uint32_t t = S_STAT_TYPES - 1;
    if (len >= 3 && buf[0] == 0x96 && buf[1] < 0x80) {
        if (buf[2] < 0x80)
            t = buf[2];
        else if (buf[2] == 0xcc && len >= 4)
            t = buf[3];
    }
    return t < S_STAT_TYPES ? t : S_STAT_TYPES - 1;
}

int ns_tr_send(ns_p2p_t *p, void *dealer, const uint8_t *buf, size_t len)
{
    return s_sent(p, zmq_send(dealer, buf, len, ZMQ_DONTWAIT) == (int)len, buf,
                  len);
}

int ns_tr_reply(ns_p2p_t *p, const uint8_t *rid, size_t rid_len,
                const uint8_t *buf, size_t len)
{
    /* The routing frame is where ROUTER decides; once it is taken, the
     * payload goes into the same pipe. */
    bool ok = zmq_send(p->router, rid, rid_len, ZMQ_DONTWAIT | ZMQ_SNDMORE) ==
                  (int)rid_len &&
              zmq_send(p->router, buf, len, ZMQ_DONTWAIT) == (int)len;
    return s_sent(p, ok, buf, len);
}

void ns_tr_ban(ns_p2p_t *p, const uint8_t key[32])
{
    ns_tr_ban_for(p, key, S_BAN_MS);
}

void ns_tr_ban_for(ns_p2p_t *p, const uint8_t key[32], uint64_t ms)
{
    uint64_t now = ns_mono_ms();
    int slot = 0;
    for (int i = 0; i < S_BAN_SLOTS; i++) {
        if (memcmp(p->bans[i].key, key, 32) == 0) {
            slot = i;
            break;
        }
        if (p->bans[i].until_ms < p->bans[slot].until_ms)
            slot = i;
    }
    memcpy(p->bans[slot].key, key, 32);
    p->bans[slot].until_ms = now + ms;
}

bool ns_tr_banned(ns_p2p_t *p, const uint8_t key[32])
{
    uint64_t now = ns_mono_ms();
    for (int i = 0; i < S_BAN_SLOTS; i++)
        if (p->bans[i].until_ms > now && memcmp(p->bans[i].key, key, 32) == 0)
            return true;
    return false;
}

/* ZAP (RFC 27): every CURVE handshake on our ROUTER asks here. We accept
 * any client key that is not banned and hand it back as the User-Id, so
 * each inbound message can be tied to the key of its connection. */
void ns_tr_handle_zap(ns_p2p_t *p)
{
    zmq_msg_t frames[8];
    int n = 0, more = 1;
    while (more && n < 8) {
        zmq_msg_init(&frames[n]);
        if (zmq_msg_recv(&frames[n], p->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frames[n]);
            break;
        }
        more = zmq_msg_more(&frames[n]);
        n++;
    }
    while (more) { /* drain an oversized request */
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        if (zmq_msg_recv(&extra, p->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&extra);
            break;
        }
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }
    if (n < 6) {
        for (int i = 0; i < n; i++)
            zmq_msg_close(&frames[i]);
        return; /* REP cannot answer a broken request; libzmq never sends
                   one */
    }
    const char *status = "400", *text = "refused";
    char user[65] = "";
    if (n == 7 && zmq_msg_size(&frames[5]) == 5 &&
        memcmp(zmq_msg_data(&frames[5]), "CURVE", 5) == 0 &&
        zmq_msg_size(&frames[6]) == 32) {
        const uint8_t *key = zmq_msg_data(&frames[6]);
        if (ns_tr_banned(p, key)) {
            text = "banned";
        } else {
            status = "200";
            text = "OK";
            ns_hex(user, key, 32);
        }
    }
    zmq_send(p->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(p->zap, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]),
             ZMQ_SNDMORE);
    zmq_send(p->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(p->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(p->zap, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(p->zap, "", 0, 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&frames[i]);
}
