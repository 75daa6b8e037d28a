/* http.c - the node's HTTP server, MHD driven by the loop (http.h). */
#include "nightshift/http.h"

#include "nightshift/log.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ns_http {
    ns_loop_t *loop;
    struct MHD_Daemon *d;
    int epoll_fd;   /* MHD's, polled by the loop; -1: not added */
    uint32_t timer; /* MHD's next timeout, 0: none */
    uint16_t port;  /* bound */
    ns_http_fn fn;
    void *user;
    ns_buf_t body; /* the answer being built, reused */
};

int ns_http_parse_addr(const char *host_port, uint32_t *ipv4, uint16_t *port)
{
    char host[64];
    const char *colon = strrchr(host_port, ':');
    if (!colon || colon == host_port ||
        (size_t)(colon - host_port) >= sizeof host)
        return NS_ERR_INVAL;
    memcpy(host, host_port, (size_t)(colon - host_port));
    host[colon - host_port] = '\0';
    char *end = NULL;
    if (!colon[1] || colon[1] == '-' || colon[1] == '+')
        return NS_ERR_INVAL;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (*end || p > 65535)
        return NS_ERR_INVAL;
    struct in_addr a;
    if (strcmp(host, "localhost") == 0)
        a.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &a) != 1)
        return NS_ERR_INVAL;
    *ipv4 = ntohl(a.s_addr);
    *port = (uint16_t)p;
    return NS_OK;
}

static enum MHD_Result s_send(struct MHD_Connection *c, unsigned status,
                              const void *data, size_t len,
                              const char *content_type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, (void *)(uintptr_t)data, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result s_on_request(void *cls, struct MHD_Connection *c,
                                    const char *url, const char *method,
                                    const char *version,
                                    const char *upload_data,
                                    size_t *upload_data_size, void **state)
{
    (void)version;
    (void)upload_data;
    ns_http_t *h = cls;
    static int first; /* marks a request's first call */
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        /* answered at once, its body unread: MHD then closes */
        static const char msg[] = "only GET and HEAD\n";
        return s_send(c, MHD_HTTP_METHOD_NOT_ALLOWED, msg, sizeof msg - 1,
                      "text/plain; charset=utf-8");
    }
    if (*state != &first) {
        *state = &first; /* answer on a later call, as MHD expects */
        return MHD_YES;
    }
    if (*upload_data_size) { /* a body on a GET: ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    const char *type = "text/plain; charset=utf-8";
    h->body.len = 0;
    unsigned status = h->fn(h->user, url, &h->body, &type);
    return s_send(c, status, h->body.data ? (const void *)h->body.data : "",
                  h->body.len, type);
}

static void s_rearm(ns_http_t *h);

static void s_run(ns_http_t *h)
{
    if (MHD_run(h->d) != MHD_YES)
        ns_debug(NS_MOD_NODE, "event=http_run_failed");
    s_rearm(h);
}

static void s_on_epoll(void *user, int fd)
{
    (void)fd;
    s_run(user);
}

static void s_on_timer(void *user, uint64_t now)
{
    (void)now;
    ns_http_t *h = user;
    h->timer = 0; /* a one-shot: it is over */
    s_run(h);
}

/* Wake for MHD's next timeout (idle connections, buffered work); at most
 * a second away, so that nothing waits on a missed edge for longer. */
static void s_rearm(ns_http_t *h)
{
    if (h->timer) {
        (void)ns_loop_timer_cancel(h->loop, h->timer);
        h->timer = 0;
    }
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(h->d, &ms) != MHD_YES)
        return;
    if (ns_loop_timer_start(h->loop, ms > 1000 ? 1000 : (uint32_t)ms, false,
                            s_on_timer, h, &h->timer) != NS_OK)
        h->timer = 0;
}

ns_http_t *ns_http_open(ns_loop_t *loop, const char *host_port,
                        bool allow_remote, ns_http_fn fn, void *user, char *err,
                        size_t errlen)
{
    uint32_t ip = 0;
    uint16_t port = 0;
    if (ns_http_parse_addr(host_port, &ip, &port) != NS_OK) {
        snprintf(err, errlen, "bad node.http '%s': want HOST:PORT (IPv4)",
                 host_port);
        return NULL;
    }
    if ((ip >> 24) != 127 && !allow_remote) {
        snprintf(err, errlen,
                 "node.http %s is not a loopback address: the metrics and "
                 "status page tell anyone who reaches them about this node; "
                 "set node.http_public = true to serve them there anyway",
                 host_port);
        return NULL;
    }
    ns_http_t *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->fn = fn;
    h->user = user;
    h->epoll_fd = -1;
    ns_buf_init(&h->body);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(ip);
    h->d = MHD_start_daemon(
        MHD_USE_EPOLL, port, NULL, NULL, s_on_request, h, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)NS_HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)NS_HTTP_TIMEOUT_S, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot serve HTTP on %s (in use?)", host_port);
        goto fail;
    }
    const union MHD_DaemonInfo *fd =
        MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *bp =
        MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    if (!fd || !bp) {
        snprintf(err, errlen, "cannot serve HTTP: no epoll descriptor");
        goto fail;
    }
    h->port = bp->port;
    if (ns_loop_add_fd(loop, fd->epoll_fd, s_on_epoll, h) != NS_OK) {
        snprintf(err, errlen, "cannot serve HTTP: the loop is full");
        goto fail;
    }
    h->epoll_fd = fd->epoll_fd;
    s_rearm(h);
    return h;
fail:
    ns_http_close(&h);
    return NULL;
}

void ns_http_close(ns_http_t **hp)
{
    if (!hp || !*hp)
        return;
    ns_http_t *h = *hp;
    if (h->timer)
        (void)ns_loop_timer_cancel(h->loop, h->timer);
    if (h->epoll_fd >= 0)
        (void)ns_loop_remove_fd(h->loop, h->epoll_fd);
    if (h->d)
        MHD_stop_daemon(h->d);
    ns_buf_release(&h->body);
    free(h);
    *hp = NULL;
}

uint16_t ns_http_port(const ns_http_t *h)
{
    return h->port;
}
