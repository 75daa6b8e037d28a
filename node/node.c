/* node.c - a node: datadir, ledger, p2p and the market's state machines on
 * one loop (node.h). */
#include "nightshift/node.h"

#include "hosted.h"

#include "nightshift/blobs.h"
#include "nightshift/cancel.h"
#include "nightshift/content.h"
#include "nightshift/control.h"
#include "nightshift/devices.h"
#include "nightshift/genesis_serve.h"
#include "nightshift/histo.h"
#include "nightshift/http.h"
#include "nightshift/identity.h"
#include "nightshift/jobdir.h"
#include "nightshift/join.h"
#include "nightshift/ledger_sync.h"
#include "nightshift/ledger_votes.h"
#include "nightshift/log.h"
#include "nightshift/loop.h"
#include "nightshift/money.h"
#include "nightshift/policy.h"
#include "nightshift/slash.h"
#include "nightshift/util.h"
#include "nightshift/verified.h"
#include "nightshift/web.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct ns_node {
    ns_node_conf_t c;
    volatile sig_atomic_t stop;
    int lock_fd;
    ns_identity_t *me;
    ns_genesis_t genesis;
    ns_ledger_t *ledger;
    ns_p2p_t *p2p;
    ns_ledger_sync_t *sync;
    ns_votes_t *votes; /* confirmations (ledger_votes.h) */
    ns_devinfo_t devs[NS_MAX_DEVICES];
    uint32_t n_devs;
    ns_fault_t fault;
    ns_node_io_t io;
    ns_provider_t *provider;   /* full node */
    ns_worker_t *slash_worker; /* full node: SLASH re-runs */
    ns_wpool_t *pool;          /* requesters' device work (sandboxed) */
    bool own_pool;             /* made here, not the caller's */
    ns_slash_ctx_t slash_ctx;
    ns_control_t *control;   /* full node */
    ns_blobs_t *blobs;       /* inputs by hash: <datadir>/blobs */
    ns_content_t *content;   /* blobs wanted from peers */
    ns_verified_t *verified; /* challenge verdicts (verified.h) */
    ns_money_t *money;       /* logs what the market does to our money */
    struct s_wfd {           /* the provider's workers, polled */
        ns_node_t *n;
        uint32_t i;
        int fd;
    } wfd[NS_POLICY_MAX_WORKERS];
    uint32_t tick_id;     /* the provider's fast tick, 0: idle */
    uint32_t req_tick_id; /* the requesters' tick, 0: none */
    ns_requester_t *req[NS_NODE_MAX_REQUESTERS];
    bool req_counted[NS_NODE_MAX_REQUESTERS]; /* its outcome is in rq */
    uint32_t n_req;
    struct { /* outcomes of the requesters' jobs, for status and metrics */
        uint64_t done, failed;         /* jobs finished so */
        uint64_t slashed;              /* providers slashed by our checks */
        uint64_t checked_units;        /* units re-run to verify */
        ns_histo_t match, run, verify; /* receipt durations */
    } rq;
    ns_http_t *http; /* node.http: /metrics and the status page */
    ns_genesis_serve_t *genesis_serve;           /* full node: GENESIS_REQ */
    ns_hosted_t *hosted[NS_NODE_MAX_REQUESTERS]; /* submit --node jobs */
    uint32_t copy_tick_id; /* hosted jobs' inputs being copied */
    /* ns_node_join */
    ns_join_t join;
    int join_rc;
};

static int s_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return NS_ERR_INVAL;
}

/* ---- ns_node_io_t over p2p, the ledger sync and the clocks -------------- */

static int s_io_send(void *u, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                     const uint8_t *body, size_t len)
{
    ns_node_t *n = u;
    return ns_p2p_send(n->p2p, peer, type, body, len);
}

static int s_io_publish(void *u, uint8_t type, const uint8_t *body, size_t len)
{
    ns_node_t *n = u;
    return ns_p2p_publish(n->p2p, type, body, len);
}

static int s_io_dial(void *u, const uint8_t peer[NS_ID_BYTES],
                     const char *endpoint)
{
    ns_node_t *n = u;
    char addr[NS_ADDR_MAX], idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, peer);
    snprintf(addr, sizeof addr, "%s@%s", idtext, endpoint);
    return ns_p2p_connect(n->p2p, addr);
}

static int s_io_append(void *u, uint8_t type, const ns_entry_body_t *b,
                       ns_hash_t id)
{
    return ns_node_append(u, type, b, id);
}

static void s_io_set_offer(void *u, uint64_t stake, uint32_t free_slots)
{
    ns_node_t *n = u;
    ns_p2p_set_offer(n->p2p, stake, free_slots);
}

static bool s_io_visit(void *u, ns_peer_visit_fn fn, void *fu)
{
    ns_node_t *n = u;
    uint8_t id[NS_ID_BYTES];
    return ns_p2p_pick_peer(n->p2p, fn, fu, id) == NS_OK;
}

static bool s_io_visit_heard(void *u, ns_peer_visit_fn fn, void *fu)
{
    ns_node_t *n = u;
    return ns_p2p_visit_heard(n->p2p, fn, fu);
}

static uint32_t s_io_live(void *u)
{
    ns_node_t *n = u;
    return ns_p2p_live_peers(n->p2p);
}

static uint32_t s_io_unheard(void *u)
{
    ns_node_t *n = u;
    return ns_p2p_unheard_peers(n->p2p, NS_POLICY_UNHEARD_MS);
}

static uint64_t s_io_now(void *u)
{
    (void)u;
    return ns_now_ms();
}

static void s_io_explain_join(void *u, char *out, size_t cap)
{
    ns_node_t *n = u;
    ns_join_explain(n->c.cfg, n->genesis.network_id, out, cap);
}

static uint64_t s_io_mono(void *u)
{
    (void)u;
    return ns_mono_ms();
}

static const char *s_io_contact(void *u)
{
    ns_node_t *n = u;
    return ns_p2p_contact(n->p2p);
}

/* ---- market messages: to the requester that owns the job, else the
 * provider ---------------------------------------------------------------- */

static int s_reply(void *ctx, uint8_t type, const uint8_t *body, size_t len)
{
    void **c = ctx; /* {p2p, src} */
    return ns_p2p_reply(c[0], c[1], type, body, len);
}

static void s_watch_worker(ns_node_t *n);
static void s_arm(ns_node_t *n);

static int s_on_market(void *user, const ns_envelope_t *env, ns_p2p_src_t *src)
{
    ns_node_t *n = user;
    void *ctx[2] = {n->p2p, src};
    ns_node_msg_t m = {env->type,     env->sender, env->body,
                       env->body_len, s_reply,     ctx};
    int rc = NS_OK;
    if (n->content && ns_content_is_ours(&m)) {
        rc = ns_content_on_msg(n->content, &m);
    } else {
        uint32_t i = 0;
        while (i < n->n_req && !ns_requester_owns(n->req[i], &m))
            i++;
        if (i < n->n_req)
            rc = ns_requester_on_msg(n->req[i], &m);
        else if (n->provider)
            rc = ns_provider_on_msg(n->provider, &m);
        /* else a light peer passes other jobs' gossip on */
    }
    if (n->provider) {
        s_watch_worker(n);
        s_arm(n);
    }
    return rc;
}

static void s_on_provider_tick(void *user, uint64_t now);

/* An entry was confirmed: the provider may accept an award now. */
static void s_on_confirmed(void *user, const ns_hash_t id)
{
    (void)id;
    ns_node_t *n = user;
    if (!n->provider)
        return;
    ns_provider_on_confirmed(n->provider, ns_mono_ms());
    s_watch_worker(n);
    s_arm(n);
}

/* The fast tick runs only while there is work: an idle node wakes for its
 * heartbeats and its claims, not 40 times a second. */
static void s_arm(ns_node_t *n)
{
    bool work = (n->provider && ns_provider_active(n->provider)) ||
                (n->content && ns_content_wanted(n->content) > 0);
    if (work && !n->tick_id) {
        if (ns_p2p_timer_start(n->p2p, NS_POLICY_PROVIDER_TICK_MS, true,
                               s_on_provider_tick, n, &n->tick_id) != NS_OK)
            n->tick_id = 0;
    } else if (!work && n->tick_id) {
        (void)ns_p2p_timer_cancel(n->p2p, n->tick_id);
        n->tick_id = 0;
    }
}

static void s_on_provider_tick(void *user, uint64_t now)
{
    ns_node_t *n = user;
    if (n->provider)
        ns_provider_tick(n->provider, now);
    ns_content_tick(n->content, now);
    if (n->provider)
        s_watch_worker(n);
    s_arm(n);
}

/* A worker's socket is readable (or writable while it wants to write):
 * move its bytes now, not at the next tick. */
static void s_on_worker_io(void *user, int fd)
{
    (void)fd;
    struct s_wfd *w = user;
    ns_node_t *n = w->n;
    ns_provider_tick(n->provider, ns_mono_ms());
    s_watch_worker(n);
    s_arm(n);
}

static bool s_worker_wants_write(void *user)
{
    struct s_wfd *w = user;
    return ns_provider_worker_wants_write(w->n->provider, w->i);
}

/* Poll the provider's worker sockets; follow them across restarts. */
static void s_watch_worker(ns_node_t *n)
{
    ns_loop_t *loop = ns_p2p_loop(n->p2p);
    uint32_t count = ns_provider_n_workers(n->provider);
    for (uint32_t i = 0; i < count && i < NS_POLICY_MAX_WORKERS; i++) {
        struct s_wfd *w = &n->wfd[i];
        int fd = ns_provider_worker_fd(n->provider, i);
        if (fd == w->fd)
            continue;
        if (w->fd >= 0)
            (void)ns_loop_remove_fd(loop, w->fd);
        w->fd = -1;
        w->n = n;
        w->i = i;
        if (fd >= 0 && ns_loop_add_fd_io(loop, fd, s_on_worker_io,
                                         s_worker_wants_write, w) == NS_OK)
            w->fd = fd;
    }
}

/* A blob arrived that a SLASH waited for: the ledger tries it again. */
static void s_on_blob(void *user, const ns_hash_t id)
{
    ns_node_t *n = user;
    ns_ledger_data_arrived(n->ledger, id);
}

static void s_on_claim_tick(void *user, uint64_t now)
{
    ns_node_t *n = user;
    ns_money_watch(n->money); /* before the claim takes the credits in */
    ns_provider_claim(n->provider);
    if (!n->tick_id) /* the slow path: bid expiry, retention, warm-up */
        s_on_provider_tick(n, now);
}

/* A requester's job is over: its receipt goes into the node's counts. */
static void s_count_outcome(ns_node_t *n, const ns_receipt_t *r)
{
    if (r->phase == NS_RQ_DONE)
        n->rq.done++;
    else
        n->rq.failed++;
    n->rq.slashed += r->slashed;
    n->rq.checked_units += r->checked;
    if (r->match_ms)
        ns_histo_add_us(&n->rq.match, r->match_ms * 1000);
    if (r->run_ms)
        ns_histo_add_us(&n->rq.run, r->run_ms * 1000);
    if (r->verify_ms)
        ns_histo_add_us(&n->rq.verify, r->verify_ms * 1000);
}

static void s_on_requester_tick(void *user, uint64_t now)
{
    ns_node_t *n = user;
    /* the clock now, not the pass's: a requester started by a timer
     * earlier in this pass (s_on_copy_tick) began after the pass did, and
     * its start must not be in the future of the now it is ticked with */
    now = ns_mono_ms();
    if (n->c.light)
        ns_content_tick(n->content, now);
    bool all_done = n->n_req > 0;
    for (uint32_t i = 0; i < n->n_req; i++) {
        ns_requester_tick(n->req[i], now);
        bool finished = ns_requester_finished(n->req[i]);
        if (finished && !n->req_counted[i]) {
            s_count_outcome(n, ns_requester_receipt(n->req[i]));
            n->req_counted[i] = true;
        }
        all_done &= finished;
    }
    if (n->c.light && all_done)
        n->stop = 1;
    if (!n->c.light && all_done && n->req_tick_id) {
        /* nothing hosted is running: sleep until the next submit */
        (void)ns_p2p_timer_cancel(n->p2p, n->req_tick_id);
        n->req_tick_id = 0;
    }
}

/* ---- life --------------------------------------------------------------- */

/* One node (or light peer) per datadir: an flock held for its lifetime. */
static int s_lock_datadir(ns_node_t *n, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (ns_path_join(path, sizeof path, n->c.datadir, "node.lock") != NS_OK)
        return s_err(err, errlen, "datadir path too long");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 && n->c.light)
        return s_err(err, errlen, "cannot use datadir %s: %s", n->c.datadir,
                     strerror(errno));
    if (fd < 0)
        return s_err(err, errlen,
                     "cannot write to datadir %s: %s (run `nightshift "
                     "init --datadir %s` first)",
                     n->c.datadir, strerror(errno), n->c.datadir);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return n->c.light
                   ? s_err(err, errlen,
                           "%s is in use (a node or another submit "
                           "runs on it)",
                           n->c.datadir)
                   : s_err(err, errlen, "another node is already running on %s",
                           n->c.datadir);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)len) != len) {
        close(fd);
        return s_err(err, errlen, "cannot write to datadir %s: %s",
                     n->c.datadir, strerror(errno));
    }
    n->lock_fd = fd;
    return NS_OK;
}

static int s_load(ns_node_t *n, char *err, size_t errlen)
{
    char path[PATH_MAX], why[512];
    if (ns_path_join(path, sizeof path, n->c.datadir, "node.key") != NS_OK)
        return s_err(err, errlen, "datadir path too long");
    int rc = ns_identity_load(path, &n->me);
    if (rc != NS_OK)
        return s_err(err, errlen, "cannot load key %s: %s%s", path,
                     ns_strerror(rc),
                     rc == NS_ERR_PERM       ? " (chmod 600 it)"
                     : rc == NS_ERR_NOTFOUND ? " (run `nightshift init` first)"
                                             : "");
    if (ns_path_join(path, sizeof path, n->c.datadir, "genesis.ini") != NS_OK)
        return s_err(err, errlen, "datadir path too long");
    if (ns_genesis_load(path, &n->genesis, why, sizeof why) != NS_OK)
        return s_err(err, errlen,
                     "no usable genesis: %s (run `nightshift init "
                     "--datadir %s --genesis FILE`)",
                     why, n->c.datadir);
    if (n->c.fault && ns_fault_parse(n->c.fault, &n->fault) != NS_OK)
        return s_err(err, errlen,
                     "bad --fault '%s': lazy=R, garbage, silent, fail or "
                     "slow=X",
                     n->c.fault);
    if (n->c.fault && !n->genesis.test_network)
        return s_err(err, errlen,
                     "--fault is refused: the genesis does not mark this "
                     "network as a test network");
    if (ns_path_join(path, sizeof path, n->c.datadir, "ledger") != NS_OK)
        return s_err(err, errlen, "datadir path too long");
    why[0] = '\0';
    n->ledger = ns_ledger_open_mapsize(
        path, &n->genesis, n->c.cfg->ledger_map_bytes, &rc, why, sizeof why);
    if (!n->ledger)
        return s_err(err, errlen, "%s", why);
    return NS_OK;
}

/* ns_p2p_stake_fn over our ledger: whole credits (rounded up), as the
 * peer scores count them. */
static uint64_t s_stake_of(void *u, const uint8_t id[NS_ID_BYTES])
{
    ns_node_t *n = u;
    ns_account_t acct;
    if (ns_ledger_account(n->ledger, id, &acct) != NS_OK || acct.banned)
        return 0;
    uint64_t micro = acct.staked + acct.locked_collateral;
    return micro / NS_MICRO + (micro % NS_MICRO != 0);
}

static int s_start_market(ns_node_t *n, char *err, size_t errlen)
{
    int rc;
    char path[PATH_MAX];
    if (ns_path_join(path, sizeof path, n->c.datadir, "blobs") != NS_OK ||
        !(n->blobs = ns_blobs_open(path, n->c.cfg->blob_cache_bytes, &rc)))
        return s_err(err, errlen, "cannot use %s/blobs: %s", n->c.datadir,
                     strerror(errno));
    n->content = ns_content_new(&n->io, n->blobs, s_on_blob, n, &rc);
    if (!n->content)
        return s_err(err, errlen, "out of memory");
    if (ns_path_join(path, sizeof path, n->c.datadir, "verified") != NS_OK ||
        !(n->verified = ns_verified_open(path)))
        return s_err(err, errlen, "out of memory");
    n->sync = ns_ledger_sync_new(n->p2p, n->ledger, &rc);
    if (!n->sync)
        return s_err(err, errlen, "cannot start ledger sync: %s",
                     ns_strerror(rc));
    n->votes = ns_votes_new(n->p2p, n->ledger, ns_identity_pk(n->me), &rc);
    if (!n->votes)
        return s_err(err, errlen, "cannot start ledger votes: %s",
                     ns_strerror(rc));
    ns_votes_set_on_confirmed(n->votes, s_on_confirmed, n);
    /* The peer table favours keys with stake in our ledger. */
    ns_p2p_set_stake_fn(n->p2p, s_stake_of, n);
    /* SLASH proofs are re-run before the ledger applies them, in a
     * sandboxed worker (a proof carries a stranger's kernel). */
    n->slash_ctx.worker = &n->slash_worker;
    n->slash_ctx.runner = NULL;
    n->slash_ctx.blobs = n->blobs;
    n->slash_ctx.content = n->content;
    ns_ledger_set_verifier(n->ledger, ns_slash_verify, &n->slash_ctx);
    ns_ledger_set_claim_delay(n->ledger, NS_POLICY_CLAIM_DELAY_MS);
    ns_ledger_set_close_hold(n->ledger, NS_POLICY_CLOSE_HOLD_MS);
    if (!(n->money = ns_money_new(n->ledger, n->genesis.network_id,
                                  ns_identity_pk(n->me))))
        return s_err(err, errlen, "out of memory");
    if ((rc = ns_p2p_register(n->p2p, NS_MSG_MKT_JOB, true, s_on_market, n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_BID, false, s_on_market, n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_AWARDED, false, s_on_market,
                              n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_FETCH, false, s_on_market,
                              n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_CHUNK, false, s_on_market,
                              n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_FAILED, false, s_on_market,
                              n)) ||
        (rc =
             ns_p2p_register(n->p2p, NS_MSG_MKT_CHAL, false, s_on_market, n)) ||
        (rc = ns_p2p_register(n->p2p, NS_MSG_MKT_CHAL_DONE, false, s_on_market,
                              n)))
        return s_err(err, errlen, "cannot start the market: %s",
                     ns_strerror(rc));
    if (n->c.light)
        return NS_OK;
    ns_provider_opts_t po = {n->ledger,    n->me,    n->c.cfg,
                             {0},          n->devs,  n->n_devs,
                             n->c.datadir, n->fault, n->blobs};
    memcpy(po.network_id, n->genesis.network_id, NS_HASH_BYTES);
    n->provider = ns_provider_new(&po, &n->io, &rc);
    if (!n->provider)
        return s_err(err, errlen, "cannot start the provider: %s",
                     ns_strerror(rc));
    uint32_t claim_timer = 0;
    if ((rc = ns_p2p_timer_start(n->p2p, NS_POLICY_CLAIM_MS, true,
                                 s_on_claim_tick, n, &claim_timer)))
        return s_err(err, errlen, "cannot start the provider: %s",
                     ns_strerror(rc));
    (void)ns_p2p_timer_slack(n->p2p, claim_timer, NS_POLICY_CLAIM_MS / 2);
    s_arm(n); /* the worker starts and warms at once */
    return NS_OK;
}

/* A full node hands its genesis file to `init --join` (genesis_serve.h):
 * the bytes that hash to the network id it runs. */
static int s_serve_genesis(ns_node_t *n, char *err, size_t errlen)
{
    char path[PATH_MAX];
    uint8_t *text = NULL;
    size_t len = 0;
    ns_hash_t h;
    int rc = NS_OK;
    if (ns_path_join(path, sizeof path, n->c.datadir, "genesis.ini") != NS_OK ||
        ns_file_read(path, NS_MAX_GENESIS_BYTES, &text, &len) != NS_OK)
        return s_err(err, errlen, "cannot read %s", path);
    ns_hash(h, text, len);
    if (memcmp(h, n->genesis.network_id, NS_HASH_BYTES) != 0)
        rc = s_err(err, errlen, "%s changed while the node started", path);
    else if (!(n->genesis_serve = ns_genesis_serve_new(n->p2p, text, len, &rc)))
        rc =
            s_err(err, errlen, "cannot serve the genesis: %s", ns_strerror(rc));
    free(text);
    return rc;
}

/* A node that found no peer through its bootstrap addresses says why,
 * once, naming each address and its cause (join.h): the probe blocks the
 * loop for up to NS_JOIN_EXPLAIN_MS, but a node alone has nothing else
 * to do. It keeps dialling them afterwards. */
static void s_on_bootstrap_check(void *user, uint64_t now)
{
    (void)now;
    ns_node_t *n = user;
    if (ns_p2p_live_peers(n->p2p) > 0)
        return;
    char why[2048];
    ns_join_explain(n->c.cfg, n->genesis.network_id, why, sizeof why);
    ns_warn(NS_MOD_NODE,
            "event=no_peers after_ms=%u detail=\"could not reach any peer: "
            "%s\"",
            NS_POLICY_JOIN_GIVEUP_MS, why);
}

/* <datadir>/jobs/: finished jobs' directories go after [jobs]
 * retention_days or beyond [jobs] max_bytes (jobdir.h). */
static void s_prune_jobs(void *user, uint64_t now)
{
    ns_node_t *n = user;
    ns_jobdir_prune_t pr;
    (void)now;
    ns_jobdir_prune(n->c.datadir, n->ledger, ns_now_ms(),
                    (uint64_t)n->c.cfg->jobs_retention_days * 86400 * 1000,
                    n->c.cfg->jobs_max_bytes, &pr);
    if (pr.removed)
        ns_info(NS_MOD_NODE,
                "event=jobs_pruned removed=%u bytes=%llu kept=%u "
                "kept_bytes=%llu",
                pr.removed, (unsigned long long)pr.removed_bytes, pr.kept,
                (unsigned long long)pr.kept_bytes);
}

static unsigned s_on_http(void *user, const char *path, ns_buf_t *body,
                          const char **content_type)
{
    return ns_web_handle(user, path, body, content_type);
}

/* node.http: /metrics and the status page on the loop; the bound address
 * goes to <datadir>/node.http (port 0 picks a free one). */
static int s_start_http(ns_node_t *n, char *err, size_t errlen)
{
    const ns_config_t *cfg = n->c.cfg;
    if (!cfg->http[0])
        return NS_OK;
    n->http = ns_http_open(ns_p2p_loop(n->p2p), cfg->http, cfg->http_public,
                           s_on_http, n, err, errlen);
    if (!n->http)
        return NS_ERR_INVAL;
    char path[PATH_MAX], line[96], host[64];
    snprintf(host, sizeof host, "%.*s",
             (int)(strrchr(cfg->http, ':') - cfg->http), cfg->http);
    int len = snprintf(line, sizeof line, "%s:%u\n", host,
                       (unsigned)ns_http_port(n->http));
    if (ns_path_join(path, sizeof path, n->c.datadir, "node.http") != NS_OK ||
        ns_file_write_atomic(path, line, (size_t)len, 0644) != NS_OK)
        return s_err(err, errlen, "cannot write %s", path);
    ns_info(NS_MOD_NODE, "event=http_listening address=%.*s", len - 1, line);
    return NS_OK;
}

/* The requesters' sandboxed workers: the caller's pool, or one of our own
 * (no process starts until a requester needs one). */
static int s_open_pool(ns_node_t *n, char *err, size_t errlen)
{
    if (n->c.wpool) {
        n->pool = n->c.wpool;
        return NS_OK;
    }
    ns_worker_opts_t o;
    char programs[PATH_MAX];
    int rc;
    ns_worker_opts_init(&o);
    /* the provider's program cache (and the pre-flight's markers) when
     * the caller names none */
    o.cache_dir = n->c.cache_dir;
    if (!o.cache_dir && ns_path_join(programs, sizeof programs, n->c.datadir,
                                     "programs") == NS_OK)
        o.cache_dir = programs;
    n->pool = ns_wpool_new(&o, n->c.light ? 1 : NS_POLICY_RQ_WORKERS, &rc);
    if (!n->pool)
        return s_err(err, errlen, "out of memory");
    n->own_pool = true;
    return NS_OK;
}

ns_node_t *ns_node_open(const ns_node_conf_t *c, char *err, size_t errlen)
{
    ns_node_t *n = calloc(1, sizeof *n);
    if (!n) {
        s_err(err, errlen, "out of memory");
        return NULL;
    }
    n->c = *c;
    n->lock_fd = -1;
    for (uint32_t i = 0; i < NS_POLICY_MAX_WORKERS; i++)
        n->wfd[i].fd = -1;
    n->io = (ns_node_io_t){n,
                           s_io_send,
                           s_io_publish,
                           s_io_dial,
                           s_io_append,
                           s_io_set_offer,
                           s_io_visit,
                           s_io_live,
                           s_io_now,
                           s_io_mono,
                           s_io_explain_join,
                           s_io_contact,
                           s_io_unheard,
                           s_io_visit_heard};
    int rc;
    if (s_lock_datadir(n, err, errlen) != NS_OK ||
        s_load(n, err, errlen) != NS_OK)
        goto fail;
    if (s_open_pool(n, err, errlen) != NS_OK)
        goto fail;
    if (c->light) {
        /* its worker opens OpenCL while the peer joins */
        if (!c->runner_optional && (rc = ns_wpool_warm(n->pool)) != NS_OK) {
            s_err(err, errlen, "cannot start a sandboxed worker: %s",
                  ns_strerror(rc));
            goto fail;
        }
    } else if (ns_devices_probe_cached(c->datadir, 30000, n->devs,
                                       &n->n_devs) != NS_OK) {
        /* OpenCL is probed in a child before any thread exists. */
        n->n_devs = 0;
    }
    ns_p2p_opts_t po = {c->cfg,  n->me,     {0},     n->genesis.name,
                        n->devs, n->n_devs, c->light};
    memcpy(po.network_id, n->genesis.network_id, NS_HASH_BYTES);
    n->p2p = ns_p2p_new(&po, &rc);
    if (!n->p2p) {
        s_err(err, errlen, "cannot listen on %s: %s", c->cfg->listen,
              ns_strerror(rc));
        goto fail;
    }
    if (!c->light) {
        n->control = ns_control_open(n, err, errlen);
        if (!n->control)
            goto fail;
    } else {
        ns_p2p_set_close_linger(n->p2p, NS_POLICY_CLOSE_LINGER_MS);
    }
    if (s_start_market(n, err, errlen) != NS_OK)
        goto fail;
    s_prune_jobs(n, 0);
    if (!c->light && ns_p2p_add_timer(n->p2p, NS_JOBDIR_PRUNE_MS, s_prune_jobs,
                                      n) != NS_OK) {
        s_err(err, errlen, "cannot start the job directory pruning");
        goto fail;
    }
    if (!c->light && s_serve_genesis(n, err, errlen) != NS_OK)
        goto fail;
    if (!c->light && c->cfg->n_bootstrap &&
        ns_p2p_timer_start(n->p2p, NS_POLICY_JOIN_GIVEUP_MS, false,
                           s_on_bootstrap_check, n, NULL) != NS_OK) {
        s_err(err, errlen, "cannot start the bootstrap check");
        goto fail;
    }
    if (!c->light) {
        /* node.addr: where this node can be reached, for `id` and
         * scripts. */
        char path[PATH_MAX], line[NS_ADDR_MAX + 2];
        int len = snprintf(line, sizeof line, "%s\n", ns_p2p_address(n->p2p));
        if (ns_path_join(path, sizeof path, c->datadir, "node.addr") != NS_OK ||
            ns_file_write_atomic(path, line, (size_t)len, 0644) != NS_OK) {
            s_err(err, errlen, "cannot write %s", path);
            goto fail;
        }
        if (s_start_http(n, err, errlen) != NS_OK)
            goto fail;
    }
    return n;
fail:
    ns_node_close(&n);
    return NULL;
}

void ns_node_close(ns_node_t **np)
{
    if (!np || !*np)
        return;
    ns_node_t *n = *np;
    ns_http_close(&n->http);
    ns_genesis_serve_destroy(&n->genesis_serve);
    ns_control_close(&n->control);
    for (uint32_t i = 0; i < n->n_req; i++)
        ns_requester_destroy(&n->req[i]);
    for (uint32_t i = 0; i < NS_NODE_MAX_REQUESTERS; i++)
        ns_hosted_destroy(&n->hosted[i]);
    ns_provider_destroy(&n->provider);
    ns_worker_destroy(&n->slash_worker);
    ns_content_destroy(&n->content);
    ns_blobs_close(&n->blobs);
    ns_verified_close(&n->verified);
    ns_money_destroy(&n->money);
    ns_votes_destroy(&n->votes);
    ns_ledger_sync_destroy(&n->sync);
    ns_p2p_destroy(&n->p2p);
    if (n->own_pool)
        ns_wpool_destroy(&n->pool);
    ns_ledger_close(&n->ledger);
    ns_genesis_release(&n->genesis);
    ns_identity_destroy(&n->me);
    if (n->lock_fd >= 0)
        close(n->lock_fd);
    free(n);
    *np = NULL;
}

int ns_node_run(ns_node_t *n)
{
    if (!n->c.light) {
        char net[17];
        ns_hex(net, n->genesis.network_id, 8);
        ns_info(NS_MOD_NODE,
                "event=started address=%s network=%s network_id=%s "
                "devices=%u pid=%d",
                ns_p2p_address(n->p2p), n->genesis.name, net, n->n_devs,
                (int)getpid());
    }
    /* a light peer runs again for its next requesters (a pipeline's
     * next step) once the last ones finished and stopped it */
    if (n->c.light)
        n->stop = 0;
    return ns_p2p_run(n->p2p, &n->stop);
}

void ns_node_stop(ns_node_t *n)
{
    n->stop = 1;
}

ns_requester_t *ns_node_add_requester(ns_node_t *n, ns_requester_opts_t *o,
                                      int *err)
{
    if (n->n_req >= NS_NODE_MAX_REQUESTERS) {
        *err = NS_ERR_TOOBIG;
        return NULL;
    }
    if (!o->endpoint)
        o->endpoint = ns_p2p_contact(n->p2p);
    o->blobs = n->blobs;
    o->verified = n->verified;
    if (!n->req_tick_id &&
        (*err = ns_p2p_timer_start(n->p2p, NS_POLICY_REQUESTER_TICK_MS, true,
                                   s_on_requester_tick, n, &n->req_tick_id)) !=
            NS_OK) {
        n->req_tick_id = 0;
        return NULL;
    }
    ns_requester_t *q = ns_requester_new(o, &n->io, n->ledger, n->pool, n->me,
                                         n->genesis.network_id, err);
    if (q) {
        n->req_counted[n->n_req] = false;
        n->req[n->n_req++] = q;
    }
    return q;
}

static void s_on_join_tick(void *user, uint64_t now)
{
    ns_node_t *n = user;
    n->join_rc = ns_join_check(&n->join, n->ledger, &n->io, false, now);
    if (n->join_rc != 0)
        n->stop = 1;
}

int ns_node_join(ns_node_t *n, char *err, size_t errlen)
{
    uint32_t id;
    ns_join_start(&n->join, ns_mono_ms());
    n->join_rc = 0;
    int rc = ns_p2p_timer_start(n->p2p, 20, true, s_on_join_tick, n, &id);
    if (rc != NS_OK) {
        snprintf(err, errlen, "cannot start: %s", ns_strerror(rc));
        return rc;
    }
    n->stop = 0;
    rc = ns_p2p_run(n->p2p, &n->stop);
    (void)ns_p2p_timer_cancel(n->p2p, id);
    if (rc == NS_OK && n->join_rc == NS_ERR_TIMEOUT) {
        char why[1024];
        ns_join_explain(n->c.cfg, n->genesis.network_id, why, sizeof why);
        snprintf(err, errlen, "could not reach any peer: %s", why);
        return NS_ERR_TIMEOUT;
    }
    if (rc == NS_OK && n->join_rc != 1) {
        snprintf(err, errlen, "interrupted");
        return NS_ERR_STATE;
    }
    n->stop = 0;
    return rc;
}

int ns_node_cancel(ns_node_t *n, const ns_hash_t job_id,
                   ns_cancel_result_t *res, char *err, size_t errlen)
{
    /* A hosted job not posted yet (its inputs being copied, its
     * pre-flight in the sandbox) ends here: nothing is in the ledger. */
    ns_ledger_job_t lj;
    memset(res, 0, sizeof *res);
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++) {
        ns_hosted_t *h = n->hosted[i];
        if (!h || memcmp(ns_hosted_job_id(h), job_id, NS_HASH_BYTES) ||
            ns_ledger_job(n->ledger, job_id, &lj) == NS_OK)
            continue;
        ns_requester_t *q = ns_hosted_requester(h);
        if (q && ns_requester_finished(q))
            break; /* over already: the ledger's answer below */
        if (q)
            ns_requester_stop(q, "cancelled (nightshift cancel) before "
                                 "anything was posted: no credit moved");
        else
            ns_hosted_fail(h, "cancelled (nightshift cancel) before "
                              "anything was posted: no credit moved");
        char hex[2 * NS_HASH_BYTES + 1];
        ns_hex(hex, job_id, NS_HASH_BYTES);
        res->unposted = true;
        ns_info(NS_MOD_MARKET, "event=job_cancelled_unposted job=%.16s", hex);
        return NS_OK;
    }
    return ns_cancel_job(n->ledger, &n->io, ns_identity_pk(n->me), job_id, res,
                         err, errlen);
}

/* Forget a requester (its hosted job is gone). */
static void s_remove_requester(ns_node_t *n, ns_requester_t *q)
{
    for (uint32_t i = 0; i < n->n_req; i++)
        if (n->req[i] == q) {
            if (!n->req_counted[i] && ns_requester_finished(q))
                s_count_outcome(n, ns_requester_receipt(q));
            ns_requester_destroy(&n->req[i]);
            n->req[i] = n->req[--n->n_req];
            n->req_counted[i] = n->req_counted[n->n_req];
            n->req[n->n_req] = NULL;
            return;
        }
}

/* A free slot for a hosted job: an empty one, or the one finished
 * longest ago (its submitter has read it or gone). */
static int s_hosted_slot(ns_node_t *n)
{
    int best = -1;
    uint64_t now = ns_mono_ms(), oldest = UINT64_MAX;
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++) {
        if (!n->hosted[i])
            return i;
        uint64_t f = ns_hosted_finished_ms(n->hosted[i], now);
        if (f && f < oldest) {
            oldest = f;
            best = i;
        }
    }
    if (best >= 0) {
        s_remove_requester(n, ns_hosted_requester(n->hosted[best]));
        ns_hosted_destroy(&n->hosted[best]);
    }
    return best;
}

/* A hosted job whose inputs are in the store: saved for --resume, then
 * its requester. */
static void s_hosted_start(ns_node_t *n, ns_hosted_t *h)
{
    ns_requester_opts_t *o = ns_hosted_opts(h);
    char hex[2 * NS_HASH_BYTES + 1];
    int rc;
    ns_hex(hex, o->job_id, NS_HASH_BYTES);
    if ((rc = ns_jobdir_save(n->c.datadir, hex, o->packed, o->packed_len,
                             o->job, n->blobs, NULL)) != NS_OK) {
        ns_hosted_fail(h, "cannot save the job under %s/jobs: %s", n->c.datadir,
                       ns_strerror(rc));
        return;
    }
    /* its terms too: a resume announces it with the same requirements */
    ns_ctl_terms_t t = {o->max_price,  o->collateral, o->bid_window_ms,
                        o->deadline_s, o->timeout_s,  o->reqs,
                        o->no_wait};
    if (ns_jobdir_save_terms(n->c.datadir, hex, &t) != NS_OK)
        ns_warn(NS_MOD_NODE, "event=jobdir_terms_failed job=%.16s", hex);
    ns_requester_t *q = ns_node_add_requester(n, o, &rc);
    if (!q) {
        ns_hosted_fail(h, "cannot start the requester: %s", ns_strerror(rc));
        return;
    }
    ns_hosted_attach(h, q);
}

/* Bytes of hosted jobs' inputs copied into the store a turn of the loop
 * (about 10 ms of disk): the loop answers its peers between turns. */
#define S_COPY_BYTES (UINT64_C(8) << 20)

/* Hosted jobs' inputs into the store, S_COPY_BYTES a turn; the timer
 * stops when none is left to copy. */
static void s_on_copy_tick(void *user, uint64_t now)
{
    ns_node_t *n = user;
    uint64_t budget = S_COPY_BYTES;
    bool more = false;
    (void)now;
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++) {
        ns_hosted_t *h = n->hosted[i];
        bool ready = false;
        if (!h || !ns_hosted_copying(h))
            continue;
        if (budget && ns_hosted_copy(h, budget, &ready) == NS_OK && ready)
            s_hosted_start(n, h);
        budget = 0; /* one job a turn: the first gets in first */
        more |= ns_hosted_copying(h);
    }
    if (!more) {
        (void)ns_p2p_timer_cancel(n->p2p, n->copy_tick_id);
        n->copy_tick_id = 0;
    }
}

int ns_node_submit(ns_node_t *n, const ns_ctl_req_t *r, ns_hash_t job_id,
                   char *err, size_t errlen)
{
    int slot = s_hosted_slot(n), rc;
    const char *why = "";
    if ((rc = ns_ledger_write_state(n->ledger, &why, NULL)) != NS_OK) {
        snprintf(err, errlen,
                 "the node takes no new jobs while its ledger cannot write "
                 "(%s: %s); it resumes by itself once it can",
                 n->c.datadir, why);
        return rc;
    }
    if (slot < 0) {
        snprintf(err, errlen, "%d jobs are running on this node already",
                 NS_NODE_MAX_REQUESTERS);
        return NS_ERR_TOOBIG;
    }
    ns_hosted_t *h = ns_hosted_new(r, ns_identity_pk(n->me), n->blobs,
                                   ns_mono_ms(), err, errlen);
    if (!h)
        return NS_ERR_INVAL;
    ns_requester_opts_t *o = ns_hosted_opts(h);
    /* The pre-flight (preflight.h) is the requester's first step, in a
     * sandboxed worker: its build, argument check and sampled units run
     * the user's kernel, which must never run in the node. */
    n->hosted[slot] = h;
    memcpy(job_id, o->job_id, NS_HASH_BYTES);
    if (!ns_hosted_copying(h)) { /* no inputs to copy: it starts now */
        s_hosted_start(n, h);
        return NS_OK;
    }
    /* The inputs are copied into the store from the loop, a budget at a
     * time (s_on_copy_tick), so that the node keeps answering its peers;
     * the requester starts once they are in. */
    if (!n->copy_tick_id &&
        (rc = ns_p2p_timer_start(n->p2p, 1, true, s_on_copy_tick, n,
                                 &n->copy_tick_id)) != NS_OK) {
        n->copy_tick_id = 0;
        snprintf(err, errlen, "cannot start the job: %s", ns_strerror(rc));
        n->hosted[slot] = NULL;
        ns_hosted_destroy(&h);
        return rc;
    }
    return NS_OK;
}

int ns_node_job_progress(ns_node_t *n, const ns_hash_t job_id,
                         uint32_t from_line, ns_ctl_job_t *j)
{
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++)
        if (n->hosted[i] && memcmp(ns_hosted_job_id(n->hosted[i]), job_id,
                                   NS_HASH_BYTES) == 0) {
            ns_hosted_progress(n->hosted[i], from_line, j);
            return NS_OK;
        }
    return NS_ERR_NOTFOUND;
}

const ns_identity_t *ns_node_identity(const ns_node_t *n)
{
    return n->me;
}

const ns_genesis_t *ns_node_genesis(const ns_node_t *n)
{
    return &n->genesis;
}

ns_ledger_t *ns_node_ledger(ns_node_t *n)
{
    return n->ledger;
}

ns_p2p_t *ns_node_p2p(ns_node_t *n)
{
    return n->p2p;
}

const char *ns_node_datadir(const ns_node_t *n)
{
    return n->c.datadir;
}

int ns_node_append(ns_node_t *n, uint8_t type, const ns_entry_body_t *b,
                   ns_hash_t id)
{
    int rc = ns_ledger_sync_append(n->sync, n->me, type, b, true, id);
    if (rc == NS_OK)
        ns_money_own(n->money, type, b, id);
    return rc;
}

/* The node's own ledger account: what it holds and earned with. */
static void s_pack_account(ns_node_t *n, msgpack_packer *pk)
{
    ns_account_t a;
    if (ns_ledger_account(n->ledger, ns_identity_pk(n->me), &a) != NS_OK)
        memset(&a, 0, sizeof a);
    msgpack_pack_map(pk, 9);
    ns_mp_str(pk, "free");
    ns_mp_credits(pk, a.free);
    ns_mp_str(pk, "staked");
    ns_mp_credits(pk, a.staked);
    ns_mp_str(pk, "locked_escrow");
    ns_mp_credits(pk, a.locked_escrow);
    ns_mp_str(pk, "locked_collateral");
    ns_mp_credits(pk, a.locked_collateral);
    ns_mp_str(pk, "jobs_posted");
    msgpack_pack_uint32(pk, a.jobs_posted);
    ns_mp_str(pk, "jobs_settled_as_requester");
    msgpack_pack_uint32(pk, a.jobs_settled_as_requester);
    ns_mp_str(pk, "jobs_settled");
    msgpack_pack_uint32(pk, a.jobs_settled);
    ns_mp_str(pk, "jobs_slashed");
    msgpack_pack_uint32(pk, a.jobs_slashed);
    ns_mp_str(pk, "jobs_cancelled");
    msgpack_pack_uint32(pk, a.jobs_cancelled);
}

/* The jobs this node posts through `submit --node`: in flight by phase,
 * finished by outcome, and their durations. */
static void s_pack_requests(ns_node_t *n, msgpack_packer *pk)
{
    uint64_t by_phase[NS_RQ_FAILED + 1] = {0};
    for (uint32_t i = 0; i < n->n_req; i++)
        if (!ns_requester_finished(n->req[i]))
            by_phase[ns_requester_receipt(n->req[i])->phase]++;
    msgpack_pack_map(pk, 8);
    ns_mp_str(pk, "in_flight"); /* by phase */
    msgpack_pack_map(pk, NS_RQ_VERIFY + 1);
    for (int p = NS_RQ_JOIN; p <= NS_RQ_VERIFY; p++) {
        ns_mp_str(pk, ns_rq_phase_name((ns_rq_phase_t)p));
        msgpack_pack_uint64(pk, by_phase[p]);
    }
    ns_mp_str(pk, "done");
    msgpack_pack_uint64(pk, n->rq.done);
    ns_mp_str(pk, "failed");
    msgpack_pack_uint64(pk, n->rq.failed);
    ns_mp_str(pk, "slashed");
    msgpack_pack_uint64(pk, n->rq.slashed);
    ns_mp_str(pk, "checked_units");
    msgpack_pack_uint64(pk, n->rq.checked_units);
    ns_mp_str(pk, "match_seconds");
    ns_histo_pack(&n->rq.match, pk);
    ns_mp_str(pk, "run_seconds");
    ns_histo_pack(&n->rq.run, pk);
    ns_mp_str(pk, "verify_seconds");
    ns_histo_pack(&n->rq.verify, pk);
}

void ns_node_pack_status(ns_node_t *n, msgpack_packer *pk)
{
    ns_p2p_pack_status(n->p2p, pk, n->provider ? 8 : 7);
    ns_mp_str(pk, "pid");
    msgpack_pack_int64(pk, (int64_t)getpid());
    ns_mp_str(pk, "datadir");
    ns_mp_str(pk, n->c.datadir);
    ns_mp_str(pk, "http"); /* node.http as bound, nil when off */
    if (n->http) {
        char addr[96];
        snprintf(addr, sizeof addr, "%.*s:%u",
                 (int)(strrchr(n->c.cfg->http, ':') - n->c.cfg->http),
                 n->c.cfg->http, (unsigned)ns_http_port(n->http));
        ns_mp_str(pk, addr);
    } else {
        msgpack_pack_nil(pk);
    }
    ns_mp_str(pk, "ledger");
    ns_ledger_sync_pack_status(n->sync, pk);
    ns_mp_str(pk, "votes");
    ns_votes_pack_status(n->votes, pk);
    ns_mp_str(pk, "account");
    s_pack_account(n, pk);
    ns_mp_str(pk, "requests");
    s_pack_requests(n, pk);
    if (n->provider) {
        ns_mp_str(pk, "provider");
        ns_provider_pack_status(n->provider, pk);
    }
}

void ns_node_pack_jobs(ns_node_t *n, msgpack_packer *pk)
{
    uint64_t now = ns_mono_ms();
    uint32_t count = n->provider ? ns_provider_n_jobs(n->provider) : 0;
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++)
        count += n->hosted[i] != NULL;
    msgpack_pack_array(pk, count);
    for (int i = 0; i < NS_NODE_MAX_REQUESTERS; i++)
        if (n->hosted[i])
            ns_hosted_pack(n->hosted[i], now, pk);
    if (n->provider)
        ns_provider_pack_jobs(n->provider, pk);
}

struct s_sum {
    uint64_t free, staked, escrow, collateral;
};

static bool s_sum_account(void *u, const ns_account_t *a)
{
    struct s_sum *s = u;
    s->free += a->free;
    s->staked += a->staked;
    s->escrow += a->locked_escrow;
    s->collateral += a->locked_collateral;
    return true;
}

void ns_node_pack_ledger_summary(ns_node_t *n, msgpack_packer *pk)
{
    struct s_sum sum = {0};
    ns_ledger_stats_t st;
    uint64_t total = 0;
    ns_ledger_stats(n->ledger, &st);
    ns_ledger_each_account(n->ledger, s_sum_account, &sum);
    bool conserved = ns_ledger_check_conservation(n->ledger, &total) == NS_OK;
    msgpack_pack_map(pk, 10);
    ns_mp_str(pk, "accounts");
    msgpack_pack_uint64(pk, st.accounts);
    ns_mp_str(pk, "entries");
    msgpack_pack_uint64(pk, st.entries);
    ns_mp_str(pk, "free");
    ns_mp_credits(pk, sum.free);
    ns_mp_str(pk, "staked");
    ns_mp_credits(pk, sum.staked);
    ns_mp_str(pk, "escrow");
    ns_mp_credits(pk, sum.escrow);
    ns_mp_str(pk, "collateral");
    ns_mp_credits(pk, sum.collateral);
    ns_mp_str(pk, "burned");
    ns_mp_credits(pk, st.burned);
    ns_mp_str(pk, "pending_credit");
    ns_mp_credits(pk, st.pending_credit);
    ns_mp_str(pk, "total");
    ns_mp_credits(pk, st.total);
    ns_mp_str(pk, "conserved");
    if (conserved)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}
