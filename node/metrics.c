/* metrics.c - the status documents as Prometheus text (metrics.h). */
#include "nightshift/metrics.h"

#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    ns_buf_t *out;
    int err;
} s_out_t;

static void s_put(s_out_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_put(s_out_t *o, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (o->err == NS_OK && n > 0)
        o->err = ns_buf_append(o->out, line,
                               (size_t)n < sizeof line ? (size_t)n
                                                       : sizeof line - 1);
}

static int s_num(const msgpack_object *o, double *v)
{
    if (!o)
        return NS_ERR_NOTFOUND;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *v = (double)o->via.u64;
        return NS_OK;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *v = (double)o->via.i64;
        return NS_OK;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *v = o->via.f64;
        return NS_OK;
    case MSGPACK_OBJECT_BOOLEAN:
        *v = o->via.boolean ? 1 : 0;
        return NS_OK;
    default:
        return NS_ERR_NOTFOUND;
    }
}

/* A sample value: integers exactly, others with enough digits. */
static void s_value(s_out_t *o, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        s_put(o, "%.0f\n", v);
    else
        s_put(o, "%.15g\n", v);
}

static void s_head(s_out_t *o, const char *name, const char *type,
                   const char *help)
{
    s_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One family of one sample; scale multiplies (ms to seconds). */
static void s_one(s_out_t *o, const msgpack_object *doc, const char *path,
                  const char *name, const char *type, const char *help,
                  double scale)
{
    double v;
    if (s_num(ns_mp_obj_get(doc, path), &v) != NS_OK)
        return;
    s_head(o, name, type, help);
    s_put(o, "%s ", name);
    s_value(o, v * scale);
}

/* A map of numbers as one family, a label per key (skip: a key left out,
 * such as a "total" that is the sum of the others). */
static void s_by_key(s_out_t *o, const msgpack_object *doc, const char *path,
                     const char *name, const char *type, const char *help,
                     const char *label, const char *skip)
{
    const msgpack_object *m = ns_mp_obj_get(doc, path);
    if (!m || m->type != MSGPACK_OBJECT_MAP)
        return;
    s_head(o, name, type, help);
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        double v;
        if (k->type != MSGPACK_OBJECT_STR ||
            s_num(&m->via.map.ptr[i].val, &v) != NS_OK)
            continue;
        if (skip && k->via.str.size == strlen(skip) &&
            memcmp(k->via.str.ptr, skip, k->via.str.size) == 0)
            continue;
        s_put(o, "%s{%s=\"%.*s\"} ", name, label, (int)k->via.str.size,
              k->via.str.ptr);
        s_value(o, v);
    }
}

/* A histogram section (histo.h: le, counts cumulative, count, sum_s). */
static void s_histo(s_out_t *o, const msgpack_object *doc, const char *path,
                    const char *name, const char *help)
{
    const msgpack_object *h = ns_mp_obj_get(doc, path);
    const msgpack_object *le = ns_mp_obj_get(h, "le"),
                         *counts = ns_mp_obj_get(h, "counts");
    double count, sum;
    if (!le || !counts || le->type != MSGPACK_OBJECT_ARRAY ||
        counts->type != MSGPACK_OBJECT_ARRAY ||
        le->via.array.size != counts->via.array.size ||
        s_num(ns_mp_obj_get(h, "count"), &count) != NS_OK ||
        s_num(ns_mp_obj_get(h, "sum_s"), &sum) != NS_OK)
        return;
    s_head(o, name, "histogram", help);
    for (uint32_t i = 0; i < le->via.array.size; i++) {
        double b, c;
        if (s_num(&le->via.array.ptr[i], &b) != NS_OK ||
            s_num(&counts->via.array.ptr[i], &c) != NS_OK)
            continue;
        s_put(o, "%s_bucket{le=\"%g\"} ", name, b);
        s_value(o, c);
    }
    s_put(o, "%s_bucket{le=\"+Inf\"} ", name);
    s_value(o, count);
    s_put(o, "%s_sum ", name);
    s_value(o, sum);
    s_put(o, "%s_count ", name);
    s_value(o, count);
}

/* A label value: \, " and newline escaped. */
static void s_label(char *out, size_t cap, const msgpack_object *o)
{
    size_t n = 0;
    if (o && o->type == MSGPACK_OBJECT_STR)
        for (uint32_t i = 0; i < o->via.str.size && n + 3 < cap; i++) {
            char c = o->via.str.ptr[i];
            if (c == '\\' || c == '"' || c == '\n') {
                out[n++] = '\\';
                c = c == '\n' ? 'n' : c;
            }
            out[n++] = c;
        }
    out[n] = '\0';
}

static void s_node(s_out_t *o, const msgpack_object *st)
{
    char id[128], net[128], ver[64];
    s_label(id, sizeof id, ns_mp_obj_get(st, "id"));
    s_label(net, sizeof net, ns_mp_obj_get(st, "network"));
    s_label(ver, sizeof ver, ns_mp_obj_get(st, "version"));
    s_head(o, "nightshift_node_info", "gauge",
           "The node's id, network and version (value 1).");
    s_put(o,
          "nightshift_node_info{id=\"%s\",network=\"%s\",version=\"%s\"} 1\n",
          id, net, ver);
    s_one(o, st, "uptime_ms", "nightshift_uptime_seconds", "gauge",
          "Seconds since the node started.", 1e-3);
    s_one(o, st, "peers", "nightshift_peers", "gauge",
          "Live peers in the peer table.", 1);
    s_one(o, st, "peers_connecting", "nightshift_peers_connecting", "gauge",
          "Peers dialled, not yet heard from.", 1);
    static const struct {
        const char *key, *name, *help;
    } msgs[] = {
        {"rx", "nightshift_messages_received_total", "Messages received."},
        {"tx", "nightshift_messages_sent_total", "Messages sent."},
        {"rx_bytes", "nightshift_received_bytes_total", "Bytes received."},
        {"tx_bytes", "nightshift_sent_bytes_total", "Bytes sent."},
        {"accepted", "nightshift_messages_accepted_total",
         "Messages accepted (valid, new)."},
        {"duplicates", "nightshift_messages_duplicate_total",
         "Messages already seen."},
        {"sig_verifies", "nightshift_signature_checks_total",
         "Signatures checked (envelopes, entries, bids, votes)."},
        {"forwarded", "nightshift_messages_forwarded_total",
         "Gossip messages passed on."},
        {"send_failed", "nightshift_send_failures_total", "Sends that failed."},
        {"peers_added", "nightshift_peers_added_total",
         "Peers added to the table."},
        {"peers_expired", "nightshift_peers_expired_total",
         "Peers dropped for silence."},
        {"peers_evicted", "nightshift_peers_evicted_total",
         "Peers replaced by better ones."},
        {"links_cut", "nightshift_links_cut_total",
         "Inbound links cut mid-message (a frame over the transport's cap)."},
    };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "messages.%s", msgs[i].key);
        s_one(o, st, path, msgs[i].name, "counter", msgs[i].help, 1);
    }
    s_by_key(o, st, "dropped", "nightshift_messages_dropped_total", "counter",
             "Messages dropped, by reason.", "reason", "total");
}

static void s_ledger(s_out_t *o, const msgpack_object *st,
                     const msgpack_object *sum)
{
    s_one(o, st, "ledger.writable", "nightshift_ledger_writable", "gauge",
          "1 while the ledger can write, 0 during a storage fault.", 1);
    s_one(o, st, "ledger.entries", "nightshift_ledger_entries", "gauge",
          "Entries stored in the ledger.", 1);
    s_one(o, st, "ledger.stored", "nightshift_ledger_commits_total", "counter",
          "Entries from peers stored (committed) by the sync.", 1);
    s_one(o, st, "ledger.gossip_in", "nightshift_ledger_gossip_entries_total",
          "counter", "Ledger entries received by gossip.", 1);
    s_one(o, st, "ledger.ranges_in", "nightshift_ledger_ranges_total",
          "counter", "Ledger ranges received in catch-up.", 1);
    s_one(o, st, "ledger.forks", "nightshift_ledger_forks", "gauge",
          "Fork proofs stored.", 1);
    s_one(o, st, "ledger.buffered", "nightshift_ledger_buffered_entries",
          "gauge", "Out-of-order entries waiting for their predecessors.", 1);
    s_by_key(o, st, "ledger.rejected",
             "nightshift_ledger_entries_rejected_total", "counter",
             "Ledger entries rejected, by reason.", "reason", NULL);
    s_one(o, sum, "accounts", "nightshift_ledger_accounts", "gauge",
          "Accounts in the ledger.", 1);
    static const struct {
        const char *key, *name, *help;
    } sums[] = {
        {"total", "nightshift_ledger_total_credits",
         "Credits in the genesis (the conserved total)."},
        {"free", "nightshift_ledger_free_credits",
         "Spendable credits over all accounts."},
        {"staked", "nightshift_ledger_staked_credits",
         "Staked credits over all accounts."},
        {"escrow", "nightshift_ledger_escrow_credits",
         "Credits in the escrow of open jobs."},
        {"collateral", "nightshift_ledger_collateral_credits",
         "Collateral locked by accepted jobs."},
        {"burned", "nightshift_ledger_burned_credits",
         "Credits burned by slashing and penalties."},
        {"pending_credit", "nightshift_ledger_pending_credits",
         "Credits paid, not yet claimed."},
        {"conserved", "nightshift_ledger_conserved",
         "1 when the sums over every account equal the genesis total."},
    };
    for (size_t i = 0; i < sizeof sums / sizeof sums[0]; i++)
        s_one(o, sum, sums[i].key, sums[i].name, "gauge", sums[i].help, 1);
}

static void s_account(s_out_t *o, const msgpack_object *st)
{
    s_one(o, st, "account.free", "nightshift_account_free_credits", "gauge",
          "This node's spendable credits.", 1);
    s_one(o, st, "account.staked", "nightshift_account_staked_credits", "gauge",
          "This node's stake.", 1);
    s_one(o, st, "account.locked_escrow", "nightshift_account_escrow_credits",
          "gauge", "This node's credits in the escrow of its jobs.", 1);
    s_one(o, st, "account.locked_collateral",
          "nightshift_account_collateral_credits", "gauge",
          "This node's collateral locked by jobs it runs.", 1);
    s_one(o, st, "account.jobs_settled",
          "nightshift_provider_jobs_settled_total", "counter",
          "Jobs this node ran and was paid for (the ledger's count).", 1);
    s_one(o, st, "account.jobs_slashed",
          "nightshift_provider_jobs_slashed_total", "counter",
          "Jobs this node was slashed for.", 1);
    s_one(o, st, "account.jobs_cancelled",
          "nightshift_provider_jobs_cancelled_total", "counter",
          "Jobs cancelled for want of this node's result (penalised).", 1);
    s_one(o, st, "account.jobs_posted",
          "nightshift_requester_jobs_posted_total", "counter",
          "Jobs this node posted (the ledger's count).", 1);
}

static void s_provider(s_out_t *o, const msgpack_object *st)
{
    const msgpack_object *p = ns_mp_obj_get(st, "provider");
    if (!p)
        return;
    static const struct {
        const char *key, *name, *help;
    } c[] = {
        {"announces_seen", "nightshift_provider_announces_total",
         "Job announcements seen."},
        {"bids", "nightshift_provider_bids_total", "Bids sent."},
        {"awards", "nightshift_provider_bids_won_total",
         "Bids won (awards to this node)."},
        {"bids_lost", "nightshift_provider_bids_lost_total",
         "Bids not won (expired unanswered or replaced)."},
        {"accepts", "nightshift_provider_accepts_total", "Awards accepted."},
        {"results", "nightshift_provider_results_total", "Results committed."},
        {"failed", "nightshift_provider_failures_total",
         "Jobs this node reported as failed."},
        {"stopped", "nightshift_provider_stopped_total",
         "Jobs stopped because their award ended."},
        {"served_bytes", "nightshift_provider_served_bytes_total",
         "Output bytes served to requesters."},
        {"refused_requesters", "nightshift_provider_refused_requesters_total",
         "Announcements refused for the requester's standing."},
        {"claims", "nightshift_provider_claims_total",
         "Claim entries written (payments taken in)."},
        {"closed", "nightshift_provider_closed_total",
         "CLOSE entries written (awards their requester left)."},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "provider.%s", c[i].key);
        s_one(o, st, path, c[i].name, "counter", c[i].help, 1);
    }
    s_by_key(o, st, "provider.jobs", "nightshift_provider_jobs", "gauge",
             "Jobs held now, by phase.", "phase", NULL);
    s_by_key(o, st, "provider.not_bid", "nightshift_provider_not_bid_total",
             "counter",
             "Job announcements this node did not bid on, by reason "
             "(not_drawn, no_stake, stake, device, region, price, busy).",
             "reason", NULL);
    s_one(o, st, "provider.workers", "nightshift_provider_workers", "gauge",
          "Workers (one per slot) started.", 1);
    s_one(o, st, "provider.running", "nightshift_provider_workers_busy",
          "gauge", "Workers running a job now.", 1);
    double busy, workers;
    if (s_num(ns_mp_obj_get(p, "running"), &busy) == NS_OK &&
        s_num(ns_mp_obj_get(p, "workers"), &workers) == NS_OK) {
        s_head(o, "nightshift_device_utilisation_ratio", "gauge",
               "Busy workers over workers (0 with none).");
        s_put(o, "nightshift_device_utilisation_ratio ");
        s_value(o, workers > 0 ? busy / workers : 0);
    }
    s_histo(o, st, "provider.run_seconds", "nightshift_provider_run_seconds",
            "Worker run time of each committed result.");
}

static void s_requests(s_out_t *o, const msgpack_object *st)
{
    if (!ns_mp_obj_get(st, "requests"))
        return;
    s_by_key(o, st, "requests.in_flight", "nightshift_requester_jobs", "gauge",
             "Hosted (submit --node) jobs in flight, by phase.", "phase", NULL);
    double done = 0, failed = 0;
    if (s_num(ns_mp_obj_get(st, "requests.done"), &done) == NS_OK &&
        s_num(ns_mp_obj_get(st, "requests.failed"), &failed) == NS_OK) {
        s_head(o, "nightshift_requester_jobs_finished_total", "counter",
               "Hosted jobs finished, by outcome.");
        s_put(o, "nightshift_requester_jobs_finished_total{outcome=\"done\"} ");
        s_value(o, done);
        s_put(o,
              "nightshift_requester_jobs_finished_total{outcome=\"failed\"} ");
        s_value(o, failed);
    }
    double slashed;
    if (s_num(ns_mp_obj_get(st, "requests.slashed"), &slashed) == NS_OK) {
        s_head(o, "nightshift_requester_verifications_total", "counter",
               "Verification outcomes of hosted jobs: results accepted, "
               "providers slashed.");
        s_put(o, "nightshift_requester_verifications_total"
                 "{outcome=\"passed\"} ");
        s_value(o, done);
        s_put(o, "nightshift_requester_verifications_total"
                 "{outcome=\"slashed\"} ");
        s_value(o, slashed);
    }
    s_one(o, st, "requests.checked_units",
          "nightshift_requester_checked_units_total", "counter",
          "Work units re-run to verify results.", 1);
    s_histo(o, st, "requests.match_seconds",
            "nightshift_requester_match_seconds",
            "Announcement to accepted award, per hosted job.");
    s_histo(o, st, "requests.run_seconds", "nightshift_requester_run_seconds",
            "Accepted award to result, per hosted job.");
    s_histo(o, st, "requests.verify_seconds",
            "nightshift_requester_verify_seconds",
            "Result to verified, per hosted job.");
}

int ns_metrics_render(const uint8_t *status, size_t status_len,
                      const uint8_t *summary, size_t summary_len, ns_buf_t *out)
{
    msgpack_unpacked st, sum;
    msgpack_unpacked_init(&st);
    msgpack_unpacked_init(&sum);
    s_out_t o = {out, NS_OK};
    size_t off = 0, off2 = 0;
    if (msgpack_unpack_next(&st, (const char *)status, status_len, &off) !=
            MSGPACK_UNPACK_SUCCESS ||
        msgpack_unpack_next(&sum, (const char *)summary, summary_len, &off2) !=
            MSGPACK_UNPACK_SUCCESS ||
        st.data.type != MSGPACK_OBJECT_MAP ||
        sum.data.type != MSGPACK_OBJECT_MAP) {
        o.err = NS_ERR_INVAL;
        goto out;
    }
    s_node(&o, &st.data);
    s_ledger(&o, &st.data, &sum.data);
    s_account(&o, &st.data);
    s_provider(&o, &st.data);
    s_requests(&o, &st.data);
out:
    msgpack_unpacked_destroy(&sum);
    msgpack_unpacked_destroy(&st);
    return o.err;
}
