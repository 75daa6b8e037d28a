/* join.c - has a peer that just started joined the network (join.h). */
#include "nightshift/join.h"

#include "nightshift/policy.h"
#include "nightshift/probe.h"

#include <stdio.h>
#include <string.h>

void ns_join_start(ns_join_t *j, uint64_t now)
{
    memset(j, 0, sizeof *j);
    j->started_ms = now;
}

static bool s_same_digest(void *u, const uint8_t *id, const ns_heartbeat_t *hb)
{
    (void)id;
    const ns_hash_t *digest = u;
    return memcmp(hb->ledger_digest, *digest, NS_HASH_BYTES) == 0;
}

int ns_join_check(ns_join_t *j, ns_ledger_t *l, const ns_node_io_t *io,
                  bool enough, uint64_t now)
{
    uint32_t live = io->live_peers(io->user);
    if (live == 0)
        return now - j->started_ms > NS_POLICY_JOIN_GIVEUP_MS ? NS_ERR_TIMEOUT
                                                              : 0;
    if (enough || now - j->started_ms >= NS_POLICY_JOIN_MAX_MS)
        return 1;
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    return io->visit_peers(io->user, s_same_digest, st.digest) ? 1 : 0;
}

void ns_join_explain(const ns_config_t *cfg, const ns_hash_t network_id,
                     char *out, size_t cap)
{
    ns_probe_t pr[NS_PROBE_MAX];
    uint32_t n =
        cfg->n_bootstrap < NS_PROBE_MAX ? cfg->n_bootstrap : NS_PROBE_MAX;
    if (n == 0) {
        snprintf(out, cap,
                 "no bootstrap address is set (--bootstrap, or "
                 "bootstrap in config.ini)");
        return;
    }
    memset(pr, 0, sizeof pr);
    for (uint32_t i = 0; i < n; i++)
        snprintf(pr[i].addr, sizeof pr[i].addr, "%s", cfg->bootstrap[i]);
    int rc =
        ns_probe_run(pr, n, network_id, NS_JOIN_EXPLAIN_MS, NULL, NULL, NULL);
    size_t k = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && k < cap; i++) {
        const char *why = pr[i].why[0] ? pr[i].why : ns_strerror(rc);
        /* It answers a stranger now, yet did not take us as a peer. */
        if (pr[i].cause == NS_PROBE_OK)
            why = "answers on this network now, but did not take this "
                  "node as a peer in time (its peer table full, or our key "
                  "refused there?)";
        int w = snprintf(out + k, cap - k, "%sbootstrap %s: %s", i ? "; " : "",
                         pr[i].addr, why);
        if (w < 0)
            break;
        k += (size_t)w;
    }
}
