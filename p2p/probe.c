/* probe.c - dial bootstrap addresses, ask for the genesis, and name why an
 * address gave nothing (probe.h). */
#include "nightshift/probe.h"

#include "nightshift/genesis.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define S_TCP_CHECK_MS 500  /* our own connect() to name a failed one */
#define S_HANDSHAKE_MS 5000 /* ZMQ_HANDSHAKE_IVL of a probe */
#define S_RECONNECT_MS 200  /* ZeroMQ's reconnect interval */
#define S_MAX_FRAME (2 * NS_MAX_MSG)

typedef struct {
    ns_probe_t *pr;
    uint8_t id[NS_ID_BYTES];
    char endpoint[NS_ENDPOINT_MAX];
    void *dealer;
    void *monitor;         /* PAIR reading the dealer's socket monitor */
    bool connected;        /* TCP connected at least once */
    uint64_t connected_ms; /* monotonic, when it last connected */
    bool handshaken;       /* CURVE handshake succeeded */
    bool done;             /* verdict given; sockets closed */
    uint32_t offset;       /* next chunk asked for (fetch) */
    uint8_t *text;         /* the file so far (fetch), total bytes */
    uint32_t total;
} s_probe_t;

const char *ns_probe_cause_name(ns_probe_cause c)
{
    switch (c) {
    case NS_PROBE_OK:
        return "ok";
    case NS_PROBE_REFUSED:
        return "connection refused";
    case NS_PROBE_UNREACHABLE:
        return "unreachable";
    case NS_PROBE_TIMEOUT:
        return "timed out";
    case NS_PROBE_KEY:
        return "key mismatch";
    case NS_PROBE_DENIED:
        return "refused our key";
    case NS_PROBE_NETWORK:
        return "other network";
    case NS_PROBE_BAD:
        return "bad answer";
    case NS_PROBE_PENDING:
        break;
    }
    return "no verdict";
}

static void s_close(s_probe_t *s)
{
    if (s->dealer) {
        zmq_socket_monitor(s->dealer, NULL, 0);
        zmq_close(s->dealer);
        s->dealer = NULL;
    }
    if (s->monitor) {
        zmq_close(s->monitor);
        s->monitor = NULL;
    }
}

static void s_verdict(s_probe_t *s, ns_probe_cause c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_verdict(s_probe_t *s, ns_probe_cause c, const char *fmt, ...)
{
    if (s->done)
        return;
    s->pr->cause = c;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->pr->why, sizeof s->pr->why, fmt, ap);
    va_end(ap);
    s->done = true;
    s_close(s);
}

/* ZeroMQ says only that a connect failed and will be retried; our own
 * connect() to the same place says why. False when it connects now (a
 * race with a peer that just started: let ZeroMQ retry). */
static bool s_tcp_cause(s_probe_t *s)
{
    char host[NS_ENDPOINT_MAX];
    const char *h = s->endpoint + 6; /* after "tcp://" (ns_addr_parse) */
    const char *colon = strrchr(h, ':');
    size_t hn = (size_t)(colon - h);
    if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
        h++;
        hn -= 2;
    }
    memcpy(host, h, hn);
    host[hn] = '\0';
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int grc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (grc != 0) {
        s_verdict(s, NS_PROBE_UNREACHABLE, "cannot resolve host '%s': %s", host,
                  gai_strerror(grc));
        return true;
    }
    int err = ETIMEDOUT;
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            err = 0;
        } else if (errno != EINPROGRESS) {
            err = errno;
        } else {
            struct pollfd pfd = {fd, POLLOUT, 0};
            if (poll(&pfd, 1, S_TCP_CHECK_MS) == 1) {
                socklen_t sl = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
                    err = errno;
            }
        }
        close(fd);
    }
    freeaddrinfo(ai);
    if (err == 0 || err == ETIMEDOUT)
        return false;
    if (err == ECONNREFUSED)
        s_verdict(s, NS_PROBE_REFUSED,
                  "connection refused (nothing listens on that port)");
    else
        s_verdict(s, NS_PROBE_UNREACHABLE, "cannot connect: %s", strerror(err));
    return true;
}

static void s_on_event(s_probe_t *s)
{
    zmq_msg_t head, addr;
    zmq_msg_init(&head);
    zmq_msg_init(&addr);
    if (zmq_msg_recv(&head, s->monitor, ZMQ_DONTWAIT) < 0)
        goto out;
    bool two = zmq_msg_more(&head) &&
               zmq_msg_recv(&addr, s->monitor, ZMQ_DONTWAIT) >= 0;
    if (!two || zmq_msg_size(&head) != 6)
        goto out;
    uint16_t event;
    uint32_t value;
    memcpy(&event, zmq_msg_data(&head), 2);
    memcpy(&value, (uint8_t *)zmq_msg_data(&head) + 2, 4);
    switch (event) {
    case ZMQ_EVENT_CONNECTED:
        s->connected = true;
        s->connected_ms = ns_mono_ms();
        break;
    case ZMQ_EVENT_CONNECT_RETRIED:
        if (!s->connected)
            (void)s_tcp_cause(s);
        break;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        s->handshaken = true;
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        /* ZAP's status code: the peer knows our throwaway key no more
         * than any other, so it refuses every stranger. */
        s_verdict(s, NS_PROBE_DENIED,
                  "the peer refused our key (ZAP status %u)", value);
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        /* The server could not open our CURVE HELLO, sealed to the key of
         * the id we dialled: whoever listens there is not that node (or
         * not a nightshift node at all). */
        if (s->handshaken)
            break;
        /* libzmq reports its own handshake timeout the same way. */
        if (ns_mono_ms() - s->connected_ms + 250 >= S_HANDSHAKE_MS)
            s_verdict(s, NS_PROBE_TIMEOUT,
                      "timed out: connected, but the CURVE handshake did not "
                      "finish in %d s (not a nightshift node?)",
                      S_HANDSHAKE_MS / 1000);
        else
            s_verdict(s, NS_PROBE_KEY,
                      "key mismatch: the CURVE handshake failed, so whoever "
                      "listens there does not hold the key of this id (or "
                      "is not a nightshift node)");
        break;
    default:
        break;
    }
out:
    zmq_msg_close(&addr);
    zmq_msg_close(&head);
}

static int s_ask(s_probe_t *s, const ns_identity_t *me, ns_buf_t *body,
                 ns_buf_t *env)
{
    int rc = ns_genesis_req_encode(s->offset, body);
    if (rc == NS_OK)
        rc = ns_envelope_encode(me, NS_MSG_GENESIS_REQ, ns_now_ms(), body->data,
                                body->len, env, NULL);
    if (rc == NS_OK &&
        zmq_send(s->dealer, env->data, env->len, ZMQ_DONTWAIT) != (int)env->len)
        rc = NS_ERR_IO;
    return rc;
}

/* One answer. Returns true when the whole genesis is in s->text. */
static bool s_on_answer(s_probe_t *s, const uint8_t *want, bool fetch,
                        const ns_identity_t *me, ns_buf_t *body, ns_buf_t *env)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    bool complete = false;
    if (zmq_msg_recv(&m, s->dealer, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return false;
    }
    s->handshaken = true;
    ns_wire_types_t types = {{0}};
    ns_wire_types_add(&types, NS_MSG_GENESIS);
    ns_envelope_t e;
    ns_genesis_chunk_t c;
    int rc = zmq_msg_more(&m)
                 ? NS_ERR_TYPE
                 : ns_envelope_decode(zmq_msg_data(&m), zmq_msg_size(&m),
                                      &types, &e);
    if (rc == NS_OK && memcmp(e.sender, s->id, NS_ID_BYTES) != 0)
        rc = NS_ERR_INVAL;
    if (rc == NS_OK)
        rc = ns_envelope_verify(&e);
    if (rc == NS_OK)
        rc = ns_genesis_chunk_decode(e.body, e.body_len, &c);
    if (rc != NS_OK) {
        s_verdict(s, NS_PROBE_BAD,
                  "malformed answer to the genesis request: "
                  "%s",
                  ns_strerror(rc));
        goto out;
    }
    memcpy(s->pr->network_id, c.network_id, NS_HASH_BYTES);
    if (memcmp(c.network_id, want, NS_HASH_BYTES) != 0) {
        char theirs[17], ours[17];
        ns_hex(theirs, c.network_id, 8);
        ns_hex(ours, want, 8);
        s_verdict(s, NS_PROBE_NETWORK,
                  "other network: the peer is on network %s..., not %s...",
                  theirs, ours);
        goto out;
    }
    if (!fetch) {
        s_verdict(s, NS_PROBE_OK, "answers, on this network");
        goto out;
    }
    if (!s->text) {
        if (c.offset != 0 || !(s->text = malloc(c.total))) {
            s_verdict(s, NS_PROBE_BAD, "answered a chunk out of order");
            goto out;
        }
        s->total = c.total;
    }
    if (c.total != s->total || c.offset != s->offset) {
        s_verdict(s, NS_PROBE_BAD, "answered a chunk out of order");
        goto out;
    }
    memcpy(s->text + c.offset, c.bytes, c.len);
    s->offset += c.len;
    if (s->offset < s->total) {
        if (s_ask(s, me, body, env) != NS_OK)
            s_verdict(s, NS_PROBE_BAD, "cannot ask for the next chunk");
        goto out;
    }
    ns_hash_t h;
    ns_hash(h, s->text, s->total);
    if (memcmp(h, want, NS_HASH_BYTES) != 0) {
        s_verdict(s, NS_PROBE_BAD,
                  "its genesis file does not hash to the network id it "
                  "claims");
        goto out;
    }
    s_verdict(s, NS_PROBE_OK, "sent the genesis (%u bytes)", s->total);
    complete = true;
out:
    zmq_msg_close(&m);
    return complete;
}

static int s_open(void *ctx, s_probe_t *s, uint32_t i, const uint8_t *my_pk,
                  const uint8_t *my_sk)
{
    uint8_t server[32];
    char mon[64];
    if (ns_id_curve_pk(s->id, server) != NS_OK) {
        s_verdict(s, NS_PROBE_KEY, "the id is not a valid public key");
        return NS_OK;
    }
    s->dealer = zmq_socket(ctx, ZMQ_DEALER);
    s->monitor = zmq_socket(ctx, ZMQ_PAIR);
    if (!s->dealer || !s->monitor)
        return NS_ERR_ZMQ;
    int linger = 0, reconnect = S_RECONNECT_MS, handshake = S_HANDSHAKE_MS;
    int64_t maxmsg = S_MAX_FRAME;
    zmq_setsockopt(s->dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s->monitor, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s->dealer, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect);
    zmq_setsockopt(s->dealer, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake);
    zmq_setsockopt(s->dealer, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(s->dealer, ZMQ_CURVE_SERVERKEY, server, 32);
    zmq_setsockopt(s->dealer, ZMQ_CURVE_PUBLICKEY, my_pk, 32);
    zmq_setsockopt(s->dealer, ZMQ_CURVE_SECRETKEY, my_sk, 32);
    snprintf(mon, sizeof mon, "inproc://ns-probe-%u", i);
    if (zmq_socket_monitor(s->dealer, mon,
                           ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED |
                               ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
        zmq_connect(s->monitor, mon) != 0)
        return NS_ERR_ZMQ;
    if (zmq_connect(s->dealer, s->endpoint) != 0) {
        s_verdict(s, NS_PROBE_UNREACHABLE, "cannot dial: %s",
                  zmq_strerror(zmq_errno()));
        return NS_OK;
    }
    return NS_OK;
}

int ns_probe_run(ns_probe_t *pr, uint32_t n, const ns_hash_t want,
                 uint32_t timeout_ms, uint8_t **text, size_t *len,
                 uint32_t *winner)
{
    if (n == 0 || n > NS_PROBE_MAX)
        return NS_ERR_INVAL;
    s_probe_t s[NS_PROBE_MAX];
    memset(s, 0, sizeof s);
    int rc = NS_OK;
    for (uint32_t i = 0; i < n; i++) {
        s[i].pr = &pr[i];
        pr[i].cause = NS_PROBE_PENDING;
        pr[i].why[0] = '\0';
        memset(pr[i].network_id, 0, NS_HASH_BYTES);
        if (ns_addr_parse(pr[i].addr, s[i].id, s[i].endpoint) != NS_OK) {
            snprintf(pr[i].why, sizeof pr[i].why,
                     "not an address ID@tcp://HOST:PORT");
            rc = NS_ERR_INVAL;
        }
    }
    if (rc != NS_OK)
        return rc;
    bool fetch = text != NULL;
    if (fetch)
        *text = NULL;
    ns_identity_t *me = ns_identity_generate();
    uint8_t my_pk[32], *my_sk = sodium_malloc(32);
    void *ctx = zmq_ctx_new();
    ns_buf_t body, env;
    ns_buf_init(&body);
    ns_buf_init(&env);
    rc = NS_ERR_NOMEM;
    if (!me || !my_sk || !ctx)
        goto out;
    if ((rc = ns_identity_curve(me, my_pk, my_sk)) != NS_OK)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        if ((rc = s_open(ctx, &s[i], i, my_pk, my_sk)) != NS_OK)
            goto out;
        /* Queued until the connection is up (ZMQ_IMMEDIATE is off). */
        if (!s[i].done && s_ask(&s[i], me, &body, &env) != NS_OK)
            s_verdict(&s[i], NS_PROBE_BAD, "cannot send the request");
    }
    uint64_t deadline = ns_mono_ms() + timeout_ms;
    int found = -1;
    while (found < 0) {
        zmq_pollitem_t items[2 * NS_PROBE_MAX];
        uint32_t who[2 * NS_PROBE_MAX], k = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (s[i].done)
                continue;
            items[k] = (zmq_pollitem_t){s[i].monitor, 0, ZMQ_POLLIN, 0};
            who[k++] = i;
            items[k] = (zmq_pollitem_t){s[i].dealer, 0, ZMQ_POLLIN, 0};
            who[k++] = i;
        }
        uint64_t now = ns_mono_ms();
        if (k == 0 || now >= deadline)
            break;
        if (zmq_poll(items, (int)k, (long)(deadline - now)) < 0) {
            if (zmq_errno() == EINTR)
                break; /* the caller's signal: it decides */
            rc = NS_ERR_ZMQ;
            goto out;
        }
        for (uint32_t j = 0; j < k && found < 0; j++) {
            s_probe_t *p = &s[who[j]];
            if (p->done || !(items[j].revents & ZMQ_POLLIN))
                continue;
            if (j % 2 == 0)
                s_on_event(p);
            else if (s_on_answer(p, want, fetch, me, &body, &env))
                found = (int)who[j];
        }
    }
    for (uint32_t i = 0; i < n && found < 0; i++) {
        if (s[i].done)
            continue;
        double sec = timeout_ms / 1000.0;
        if (!s[i].connected)
            s_verdict(&s[i], NS_PROBE_TIMEOUT,
                      "timed out: no TCP connection in %.0f s (a firewall, or "
                      "the host is down?)",
                      sec);
        else if (!s[i].handshaken)
            s_verdict(&s[i], NS_PROBE_TIMEOUT,
                      "timed out: connected, but the CURVE handshake did not "
                      "finish in %.0f s",
                      sec);
        else
            s_verdict(&s[i], NS_PROBE_TIMEOUT,
                      "timed out: connected, but no answer to the genesis "
                      "request in %.0f s (an older nightshift?)",
                      sec);
    }
    if (!fetch) {
        rc = NS_OK;
    } else if (found >= 0) {
        *text = s[found].text;
        s[found].text = NULL;
        *len = s[found].total;
        *winner = (uint32_t)found;
        rc = NS_OK;
    } else {
        rc = NS_ERR_NOTFOUND;
        for (uint32_t i = 0; i < n; i++)
            if (pr[i].cause == NS_PROBE_TIMEOUT)
                rc = NS_ERR_TIMEOUT;
    }
out:
    for (uint32_t i = 0; i < n; i++) {
        s_close(&s[i]);
        free(s[i].text);
    }
    if (ctx)
        zmq_ctx_term(ctx);
    ns_buf_release(&env);
    ns_buf_release(&body);
    if (my_sk)
        sodium_free(my_sk);
    ns_identity_destroy(&me);
    return rc;
}
