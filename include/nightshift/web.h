/* web.h - what the node serves on node.http (http.h): the routes.
 *
 *   GET /metrics      Prometheus text exposition (metrics.h)
 *   GET /status.json  {"status": status --json, "peers": peers --json,
 *                      "jobs": jobs --json, "ledger": the ledger summary}
 *   GET /             the status page: HTML and JS embedded in the
 *                     binary, no external assets; it fetches status.json
 *                     every 1.5 s
 * Anything else is 404.
 */
#ifndef NIGHTSHIFT_WEB_H
#define NIGHTSHIFT_WEB_H

#include "nightshift/mp.h"

struct ns_node;

/* An ns_http_fn over a node: fills body and *content_type, returns the
 * HTTP status (500 when a document cannot be built). */
unsigned ns_web_handle(struct ns_node *n, const char *path, ns_buf_t *body,
                       const char **content_type);

#endif
