/* loop.c - the event loop: zmq_poll over the ROUTER, the ZAP socket, the
 * upper layers' sockets and one DEALER per peer, and the timers. */
#include "p2p_internal.h"

#include "nightshift/util.h"

#include <errno.h>
#include <stdlib.h>

int ns_p2p_add_socket(ns_p2p_t *p, void *socket, ns_p2p_io_fn fn, void *user)
{
    if (p->n_extra >= S_MAX_EXTRA_SOCKETS)
        return NS_ERR_TOOBIG;
    p->extra[p->n_extra++] = (ns_extra_socket_t){socket, fn, user};
    return NS_OK;
}

int ns_p2p_add_timer(ns_p2p_t *p, uint32_t interval_ms, ns_p2p_timer_fn fn,
                     void *user)
{
    if (p->n_timers >= S_MAX_TIMERS || interval_ms == 0)
        return NS_ERR_TOOBIG;
    p->timers[p->n_timers++] =
        (ns_timer_t){interval_ms, ns_mono_ms() + interval_ms, fn, user};
    return NS_OK;
}

/* ---- the loop --------------------------------------------------------------
 */

static void s_maintain(ns_p2p_t *p, uint64_t now_ms)
{
    ns_peers_maintain(p, now_ms);
    ns_seen_expire(&p->seen, now_ms, p->cfg->seen_ttl_ms, S_PULL_WINDOW_MS);
}

int ns_p2p_run(ns_p2p_t *p, volatile sig_atomic_t *stop)
{
    zmq_pollitem_t *items =
        calloc(2 + S_MAX_EXTRA_SOCKETS + p->cfg->max_peers, sizeof *items);
    if (!items)
        return NS_ERR_NOMEM;
    uint64_t now = ns_mono_ms();
    /* A first heartbeat at once, so the HELLOs to the bootstrap peers carry
     * it and they see us live without waiting a whole interval; later ones
     * are jittered so nodes started together spread out. */
    ns_p2p_send_heartbeat(p);
    uint64_t next_hb = now + p->cfg->heartbeat_interval_ms -
                       ns_rand_below(p->cfg->heartbeat_interval_ms / 4 + 1);
    uint64_t next_pull = now + p->cfg->pull_interval_ms;
    uint64_t next_maint = now + 1000;
    ns_peers_maintain(p, now); /* dial bootstrap peers */
    int rc = NS_OK;

    while (!*stop) {
        int n = 0;
        items[n++] = (zmq_pollitem_t){p->router, 0, ZMQ_POLLIN, 0};
        items[n++] = (zmq_pollitem_t){p->zap, 0, ZMQ_POLLIN, 0};
        for (uint32_t i = 0; i < p->n_extra; i++)
            items[n++] = (zmq_pollitem_t){p->extra[i].socket, 0, ZMQ_POLLIN, 0};
        int first_dealer = n;
        for (uint32_t i = 0; i < p->n_peers; i++)
            items[n++] = (zmq_pollitem_t){p->peers[i].dealer, 0, ZMQ_POLLIN, 0};

        now = ns_mono_ms();
        uint64_t due = next_hb < next_pull ? next_hb : next_pull;
        if (next_maint < due)
            due = next_maint;
        for (uint32_t i = 0; i < p->n_timers; i++)
            if (p->timers[i].due_ms < due)
                due = p->timers[i].due_ms;
        long timeout = due > now ? (long)(due - now) : 0;

        if (zmq_poll(items, n, timeout) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            rc = NS_ERR_ZMQ;
            break;
        }
        if (items[1].revents & ZMQ_POLLIN)
            ns_tr_handle_zap(p);
        /* Bounded batches so one busy socket cannot starve the others. */
        if (items[0].revents & ZMQ_POLLIN)
            for (int k = 0; k < 256 && ns_p2p_recv_router(p); k++)
                ;
        for (int i = first_dealer; i < n; i++)
            if (items[i].revents & ZMQ_POLLIN)
                for (int k = 0;
                     k < 64 && ns_p2p_recv_dealer(p, items[i].socket); k++)
                    ;
        for (uint32_t i = 0; i < p->n_extra; i++)
            if (items[2 + i].revents & ZMQ_POLLIN)
                p->extra[i].fn(p->extra[i].user, p->extra[i].socket);

        now = ns_mono_ms();
        if (now >= next_hb) {
            ns_p2p_send_heartbeat(p);
            next_hb = now + p->cfg->heartbeat_interval_ms;
        }
        if (now >= next_pull) {
            ns_gossip_send_pull(p);
            next_pull = now + p->cfg->pull_interval_ms;
        }
        if (now >= next_maint) {
            s_maintain(p, now);
            next_maint = now + 1000;
        }
        for (uint32_t i = 0; i < p->n_timers; i++)
            if (now >= p->timers[i].due_ms) {
                p->timers[i].due_ms = now + p->timers[i].interval_ms;
                p->timers[i].fn(p->timers[i].user, now);
            }
    }
    free(items);
    return rc;
}
