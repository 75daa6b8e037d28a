/* http.h - a small read-only HTTP server on a node's event loop, for
 * /metrics and the status page (libmicrohttpd).
 *
 * Threading: none of its own. The daemon runs in MHD's epoll mode
 * without an internal thread: its one epoll descriptor is polled by the
 * loop (loop.h) and MHD_run is called from the loop when it is readable
 * or when MHD's own timeout is due (a one-shot loop timer). Requests are
 * therefore answered on the loop's thread, between two handlers, and the
 * page handler reads the node's state directly: no lock, no snapshot,
 * no state a second thread could see half-written. The price: a slow
 * page handler delays the loop, so handlers only pack what `status`
 * packs (microseconds to a few milliseconds).
 *
 * Only GET and HEAD; at most NS_HTTP_MAX_CONNECTIONS connections, each
 * closed after NS_HTTP_TIMEOUT_S idle seconds.
 */
#ifndef NIGHTSHIFT_HTTP_H
#define NIGHTSHIFT_HTTP_H

#include "nightshift/err.h"
#include "nightshift/loop.h"
#include "nightshift/mp.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_HTTP_MAX_CONNECTIONS 16
#define NS_HTTP_TIMEOUT_S 10

typedef struct ns_http ns_http_t;

/* Answer a GET of path (without the query string): fill body (empty on
 * entry) and *content_type (a static string); return the HTTP status
 * (200, 404...). */
typedef unsigned (*ns_http_fn)(void *user, const char *path, ns_buf_t *body,
                               const char **content_type);

/* Listen on host_port ("127.0.0.1:9464"; port 0 = any free one: see
 * ns_http_port) and serve on loop. A host that is not a loopback address
 * is refused unless allow_remote. NULL with one line in err. */
ns_http_t *ns_http_open(ns_loop_t *loop, const char *host_port,
                        bool allow_remote, ns_http_fn fn, void *user, char *err,
                        size_t errlen);
/* NULL-safe, idempotent; stops the daemon, closes its connections. */
void ns_http_close(ns_http_t **h);
/* The bound port. */
uint16_t ns_http_port(const ns_http_t *h);

/* Parse "A.B.C.D:PORT" or "localhost:PORT" (IPv4). NS_ERR_INVAL if it
 * is neither. */
int ns_http_parse_addr(const char *host_port, uint32_t *ipv4_host_order,
                       uint16_t *port) NS_MUST_CHECK;

#endif
