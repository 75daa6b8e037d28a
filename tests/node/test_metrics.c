/* test_metrics.c - the Prometheus exposition of the status documents
 * (metrics.h), the duration histograms (histo.h) and node.http's address
 * parser (http.h). */
#include "../check.h"

#include "nightshift/histo.h"
#include "nightshift/http.h"
#include "nightshift/metrics.h"
#include "nightshift/mp.h"

#include <stdlib.h>
#include <string.h>

static void s_kv(msgpack_packer *pk, const char *k, uint64_t v)
{
    ns_mp_str(pk, k);
    msgpack_pack_uint64(pk, v);
}

/* A status document shaped like ns_node_pack_status's, small. */
static void s_status(ns_buf_t *b, bool provider, const char *id)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, b);
    msgpack_pack_map(&pk, provider ? 8 : 7);
    ns_mp_str(&pk, "id");
    ns_mp_str(&pk, id);
    ns_mp_str(&pk, "network");
    ns_mp_str(&pk, "testnet");
    ns_mp_str(&pk, "version");
    ns_mp_str(&pk, "0.1.0");
    s_kv(&pk, "uptime_ms", 1500);
    s_kv(&pk, "peers", 3);
    ns_mp_str(&pk, "dropped");
    msgpack_pack_map(&pk, 3);
    s_kv(&pk, "total", 7);
    s_kv(&pk, "bad_sig", 5);
    s_kv(&pk, "stale", 2);
    ns_mp_str(&pk, "ledger");
    msgpack_pack_map(&pk, 3);
    ns_mp_str(&pk, "writable");
    msgpack_pack_false(&pk);
    s_kv(&pk, "entries", 42);
    ns_mp_str(&pk, "rejected");
    msgpack_pack_map(&pk, 1);
    s_kv(&pk, "bad_prev", 4);
    if (provider) {
        ns_mp_str(&pk, "provider");
        msgpack_pack_map(&pk, 5);
        s_kv(&pk, "awards", 9);
        s_kv(&pk, "bids_lost", 2);
        s_kv(&pk, "running", 1);
        s_kv(&pk, "workers", 4);
        ns_histo_t h = {0};
        ns_histo_add_us(&h, 3000);      /* 3 ms: le 0.005 */
        ns_histo_add_us(&h, 2000000);   /* 2 s: le 2.5 */
        ns_histo_add_us(&h, 900000000); /* 15 min: only +Inf */
        ns_mp_str(&pk, "run_seconds");
        ns_histo_pack(&h, &pk);
    }
    CHECK_RC(w.err, NS_OK);
}

static void s_summary(ns_buf_t *b)
{
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, b);
    msgpack_pack_map(&pk, 3);
    s_kv(&pk, "accounts", 6);
    ns_mp_str(&pk, "staked");
    ns_mp_credits(&pk, 2500000); /* 2.5 credits */
    ns_mp_str(&pk, "conserved");
    msgpack_pack_true(&pk);
    CHECK_RC(w.err, NS_OK);
}

/* out as a NUL-terminated string (appends a NUL past len). */
static const char *s_text(ns_buf_t *out)
{
    CHECK_RC(ns_buf_append(out, "", 1), NS_OK);
    out->len--;
    return (const char *)out->data;
}

TEST(exposition_reads_the_documents)
{
    ns_buf_t st, sum, out;
    ns_buf_init(&st);
    ns_buf_init(&sum);
    ns_buf_init(&out);
    s_status(&st, true, "abc\"d\\e");
    s_summary(&sum);
    CHECK_RC(ns_metrics_render(st.data, st.len, sum.data, sum.len, &out),
             NS_OK);
    const char *t = s_text(&out);
    CHECK_CONTAINS(t, "# TYPE nightshift_peers gauge\nnightshift_peers 3\n");
    CHECK_CONTAINS(t, "nightshift_uptime_seconds 1.5\n");
    /* label values escaped */
    CHECK_CONTAINS(t, "nightshift_node_info{id=\"abc\\\"d\\\\e\",network=\""
                      "testnet\",version=\"0.1.0\"} 1\n");
    /* by reason, without the total */
    CHECK_CONTAINS(t, "# TYPE nightshift_messages_dropped_total counter\n");
    CHECK_CONTAINS(t,
                   "nightshift_messages_dropped_total{reason=\"bad_sig\"} 5\n");
    CHECK_CONTAINS(t,
                   "nightshift_messages_dropped_total{reason=\"stale\"} 2\n");
    CHECK(!strstr(t, "reason=\"total\""));
    CHECK_CONTAINS(t, "nightshift_ledger_writable 0\n");
    CHECK_CONTAINS(t, "nightshift_ledger_entries 42\n");
    CHECK_CONTAINS(t, "nightshift_ledger_entries_rejected_total{reason=\""
                      "bad_prev\"} 4\n");
    CHECK_CONTAINS(t, "nightshift_ledger_accounts 6\n");
    CHECK_CONTAINS(t, "nightshift_ledger_staked_credits 2.5\n");
    CHECK_CONTAINS(t, "nightshift_ledger_conserved 1\n");
    CHECK_CONTAINS(t, "nightshift_provider_bids_won_total 9\n");
    CHECK_CONTAINS(t, "nightshift_provider_bids_lost_total 2\n");
    CHECK_CONTAINS(t, "nightshift_device_utilisation_ratio 0.25\n");
    /* a histogram: cumulative buckets, +Inf = count, sum in seconds */
    CHECK_CONTAINS(t, "# TYPE nightshift_provider_run_seconds histogram\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_bucket{le=\"0.005\"} "
                      "1\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_bucket{le=\"1\"} 1\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_bucket{le=\"2.5\"} "
                      "2\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_bucket{le=\"600\"} "
                      "2\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_bucket{le=\"+Inf\"} "
                      "3\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_count 3\n");
    CHECK_CONTAINS(t, "nightshift_provider_run_seconds_sum 902.003\n");
    /* every sample line's family has HELP and TYPE before it */
    char *copy = strdup(t), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        char fam[128];
        size_t n = strcspn(line, "{ ");
        snprintf(fam, sizeof fam, "%.*s", (int)n, line);
        char *suffix = strstr(fam, "_bucket");
        if (!suffix)
            suffix = strstr(fam, "_count");
        if (!suffix && strstr(fam, "_seconds_sum"))
            suffix = strstr(fam, "_sum");
        if (suffix)
            *suffix = '\0';
        char help[200], type[200], sample[300];
        snprintf(sample, sizeof sample, "\n%s\n", line);
        snprintf(help, sizeof help, "# HELP %s ", fam);
        snprintf(type, sizeof type, "# TYPE %s ", fam);
        if (!CHECK(strstr(t, help) && strstr(t, type) &&
                   strstr(t, type) < strstr(t, sample)))
            fprintf(stderr, "  line: %s\n", line);
    }
    free(copy);
    ns_buf_release(&out);
    ns_buf_release(&sum);
    ns_buf_release(&st);
}

TEST(absent_sections_are_left_out)
{
    ns_buf_t st, sum, out;
    ns_buf_init(&st);
    ns_buf_init(&sum);
    ns_buf_init(&out);
    s_status(&st, false, "x");
    s_summary(&sum);
    CHECK_RC(ns_metrics_render(st.data, st.len, sum.data, sum.len, &out),
             NS_OK);
    const char *t = s_text(&out);
    CHECK(!strstr(t, "nightshift_provider_"));
    CHECK(!strstr(t, "nightshift_device_utilisation_ratio"));
    CHECK(!strstr(t, "nightshift_messages_received_total")); /* no map */
    CHECK_CONTAINS(t, "nightshift_peers 3\n");
    ns_buf_release(&out);
    ns_buf_release(&sum);
    ns_buf_release(&st);
}

TEST(malformed_documents)
{
    ns_buf_t out;
    ns_buf_init(&out);
    static const uint8_t arr[] = {0x91, 0x01}, map[] = {0x80};
    CHECK_RC(ns_metrics_render(arr, sizeof arr, map, sizeof map, &out),
             NS_ERR_INVAL);
    CHECK_RC(ns_metrics_render(map, sizeof map, arr, sizeof arr, &out),
             NS_ERR_INVAL);
    CHECK_RC(ns_metrics_render(map, 0, map, sizeof map, &out), NS_ERR_INVAL);
    static const uint8_t cut[] = {0x81, 0xa2, 'i'}; /* a truncated map */
    CHECK_RC(ns_metrics_render(cut, sizeof cut, map, sizeof map, &out),
             NS_ERR_INVAL);
    CHECK_RC(ns_metrics_render(map, sizeof map, map, sizeof map, &out), NS_OK);
    ns_buf_release(&out);
}

TEST(histogram_bounds)
{
    ns_histo_t h = {0};
    ns_histo_add_us(&h, 5000); /* exactly 5 ms: in the first bucket */
    ns_histo_add_us(&h, 5001);
    ns_histo_add_us(&h, 0);
    CHECK_EQ_INT(h.counts[0], 2);
    CHECK_EQ_INT(h.counts[1], 1);
    CHECK_EQ_INT(h.count, 3);
    CHECK(h.sum_us == 10001);
    for (int i = 1; i < NS_HISTO_BUCKETS; i++)
        CHECK(ns_histo_bounds_s[i] > ns_histo_bounds_s[i - 1]);
}

TEST(http_addresses)
{
    uint32_t ip = 0;
    uint16_t port = 0;
    CHECK_RC(ns_http_parse_addr("127.0.0.1:9464", &ip, &port), NS_OK);
    CHECK(ip == 0x7f000001u && port == 9464);
    CHECK_RC(ns_http_parse_addr("localhost:0", &ip, &port), NS_OK);
    CHECK(ip == 0x7f000001u && port == 0);
    CHECK_RC(ns_http_parse_addr("10.1.2.3:65535", &ip, &port), NS_OK);
    CHECK(ip == 0x0a010203u && port == 65535);
    static const char *const bad[] = {"",
                                      "9464",
                                      ":9464",
                                      "127.0.0.1:",
                                      "127.0.0.1",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:-1",
                                      "127.0.0.1:+1",
                                      "host:80",
                                      "[::1]:80",
                                      "1.2.3:80",
                                      "127.0.0.1:80x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_RC(ns_http_parse_addr(bad[i], &ip, &port), NS_ERR_INVAL);
}

int main(void)
{
    RUN(exposition_reads_the_documents);
    RUN(absent_sections_are_left_out);
    RUN(malformed_documents);
    RUN(histogram_bounds);
    RUN(http_addresses);
    return ns_test_finish("node_metrics");
}
