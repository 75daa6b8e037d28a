/* join.c - has a peer that just started joined the network (join.h). */
#include "nightshift/join.h"

#include "nightshift/policy.h"

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
