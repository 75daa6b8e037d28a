/* web.c - /metrics, /status.json and the status page (web.h). */
#include "nightshift/web.h"

#include "nightshift/metrics.h"
#include "nightshift/node.h"
#include "nightshift/p2p.h"

#include <stdlib.h>
#include <string.h>

extern const char ns_web_status_html[];
extern const size_t ns_web_status_html_len;

/* The documents of status --json and the ledger summary, packed. */
static int s_metrics(struct ns_node *n, ns_buf_t *body)
{
    ns_buf_t st, sum;
    ns_mp_writer_t w1, w2;
    msgpack_packer pk1, pk2;
    ns_buf_init(&st);
    ns_buf_init(&sum);
    ns_mp_writer_init(&w1, &pk1, &st);
    ns_node_pack_status(n, &pk1);
    ns_mp_writer_init(&w2, &pk2, &sum);
    ns_node_pack_ledger_summary(n, &pk2);
    int rc = w1.err ? w1.err : w2.err;
    if (rc == NS_OK)
        rc = ns_metrics_render(st.data, st.len, sum.data, sum.len, body);
    ns_buf_release(&sum);
    ns_buf_release(&st);
    return rc;
}

static int s_status_json(struct ns_node *n, ns_buf_t *body)
{
    ns_buf_t doc;
    ns_mp_writer_t w;
    msgpack_packer pk;
    char *json = NULL;
    ns_buf_init(&doc);
    ns_mp_writer_init(&w, &pk, &doc);
    msgpack_pack_map(&pk, 4);
    ns_mp_str(&pk, "status");
    ns_node_pack_status(n, &pk);
    ns_mp_str(&pk, "peers");
    ns_p2p_pack_peers(ns_node_p2p(n), &pk);
    ns_mp_str(&pk, "jobs");
    ns_node_pack_jobs(n, &pk);
    ns_mp_str(&pk, "ledger");
    ns_node_pack_ledger_summary(n, &pk);
    int rc = w.err;
    if (rc == NS_OK)
        rc = ns_mp_to_json(doc.data, doc.len, &json, 0);
    if (rc == NS_OK)
        rc = ns_buf_append(body, json, strlen(json));
    free(json);
    ns_buf_release(&doc);
    return rc;
}

unsigned ns_web_handle(struct ns_node *n, const char *path, ns_buf_t *body,
                       const char **content_type)
{
    int rc;
    if (strcmp(path, "/metrics") == 0) {
        *content_type = "text/plain; version=0.0.4; charset=utf-8";
        rc = s_metrics(n, body);
    } else if (strcmp(path, "/status.json") == 0) {
        *content_type = "application/json";
        rc = s_status_json(n, body);
    } else if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        *content_type = "text/html; charset=utf-8";
        rc = ns_buf_append(body, ns_web_status_html, ns_web_status_html_len);
    } else {
        *content_type = "text/plain; charset=utf-8";
        static const char msg[] = "not found: try /, /metrics, /status.json\n";
        body->len = 0;
        return ns_buf_append(body, msg, sizeof msg - 1) == NS_OK ? 404 : 500;
    }
    if (rc != NS_OK) {
        static const char msg[] = "cannot build the document\n";
        *content_type = "text/plain; charset=utf-8";
        body->len = 0;
        if (ns_buf_append(body, msg, sizeof msg - 1) != NS_OK)
            body->len = 0; /* an empty 500 then */
        return 500;
    }
    return 200;
}
