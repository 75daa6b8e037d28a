/* daemon.c - `nightshift node`: load the datadir, probe devices, start
 * p2p and the control socket, run until SIGINT/SIGTERM. */
#include "cli.h"
#include "ctl.h"
#include "opts.h"
#include "nightshift/provider.h"
#include "nightshift/slash.h"

#include "nightshift/config.h"
#include "nightshift/devices.h"
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/ledger_sync.h"
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/p2p.h"
#include "nightshift/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static volatile sig_atomic_t s_stop = 0;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

typedef struct {
    ns_p2p_t *p2p;
    bool test_network; /* genesis allows fault injection */
    ns_ledger_t *ledger;
    ns_ledger_sync_t *sync;
    ns_provider_t *provider;
    const ns_identity_t *me;
    const char *datadir;
    void *ctl;
} s_daemon_t;

/* Ledger commands from the local owner: ["stake", amount],
 * ["unstake", amount], ["transfer", to, amount]. */
static void s_ctl_ledger(s_daemon_t *d, const char *cmd, ns_mpr_t *r,
                         uint32_t nargs, msgpack_packer *pk)
{
    ns_entry_body_t b;
    uint8_t type = 0;
    memset(&b, 0, sizeof b);
    if (strcmp(cmd, "transfer") == 0 && nargs == 2) {
        type = NS_ENTRY_TRANSFER;
        ns_mpr_bin_exact(r, b.to, NS_ID_BYTES);
        ns_mpr_uint(r, &b.amount);
    } else if ((strcmp(cmd, "stake") == 0 || strcmp(cmd, "unstake") == 0) &&
               nargs == 1) {
        type = cmd[0] == 's' ? NS_ENTRY_STAKE : NS_ENTRY_UNSTAKE;
        ns_mpr_uint(r, &b.amount);
    } else if (strcmp(cmd, "claim") == 0 && nargs == 0) {
        type = NS_ENTRY_STAKE; /* a zero stake is invalid: see below */
    }
    if (ns_mpr_end(r) != NS_OK || type == 0) {
        msgpack_pack_false(pk);
        ns_mp_str(pk, "malformed ledger command");
        return;
    }
    ns_hash_t id;
    int rc = ns_ledger_sync_append(d->sync, d->me, type, &b, true, id);
    if (rc != NS_OK) {
        char why[160];
        snprintf(why, sizeof why, "%s rejected: %s (%s)", cmd, ns_strerror(rc),
                 ns_errname(rc));
        msgpack_pack_false(pk);
        ns_mp_str(pk, why);
        return;
    }
    ns_account_t a;
    char hex[2 * NS_HASH_BYTES + 1];
    ns_hex(hex, id, NS_HASH_BYTES);
    msgpack_pack_true(pk);
    msgpack_pack_map(pk, 2);
    ns_mp_str(pk, "entry");
    ns_mp_str(pk, hex);
    ns_mp_str(pk, "seq");
    msgpack_pack_uint64(
        pk, ns_ledger_account(d->ledger, ns_identity_pk(d->me), &a) == NS_OK
                ? a.seq
                : 0);
}

static void s_ctl_reply(void *sock, msgpack_sbuffer *sb)
{
    zmq_send(sock, sb->data, sb->size, 0);
}

/* One request on the control socket: answer it, whatever it is. */
static void s_on_ctl(void *user, void *sock)
{
    s_daemon_t *d = user;
    char query[32] = "";
    uint8_t buf[256];
    int n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT);
    if (n < 0)
        return;
    int more = 0;
    size_t ml = sizeof more;
    zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
    while (more) { /* REP must consume the whole request */
        zmq_recv(sock, buf, sizeof buf, 0);
        zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &ml);
        n = -1;
    }
    ns_mpr_t r;
    uint32_t nargs = 0;
    ns_mpr_init(&r, buf, n > 0 && (size_t)n <= sizeof buf ? (size_t)n : 0);
    if (r.left && (r.p[0] & 0xf0) == 0x90) {
        ns_mpr_array(&r, &nargs, 8);
        if (nargs > 0)
            nargs--;
    }
    ns_mpr_str(&r, query, sizeof query - 1);
    if (nargs == 0)
        ns_mpr_end(&r);

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 2);
    if (r.err != NS_OK) {
        msgpack_pack_false(&pk);
        ns_mp_str(&pk, "malformed request");
    } else if (strcmp(query, "status") == 0) {
        msgpack_pack_true(&pk);
        ns_p2p_pack_status(d->p2p, &pk, 4);
        ns_mp_str(&pk, "pid");
        msgpack_pack_int64(&pk, (int64_t)getpid());
        ns_mp_str(&pk, "datadir");
        ns_mp_str(&pk, d->datadir);
        ns_mp_str(&pk, "ledger");
        ns_ledger_sync_pack_status(d->sync, &pk);
        ns_mp_str(&pk, "provider");
        ns_provider_pack_status(d->provider, &pk);
    } else if (strcmp(query, "peers") == 0) {
        msgpack_pack_true(&pk);
        ns_p2p_pack_peers(d->p2p, &pk);
    } else if (strcmp(query, "latency") == 0) {
        msgpack_pack_true(&pk);
        ns_p2p_pack_latency(d->p2p, &pk);
    } else if (strcmp(query, "connect") == 0 && nargs == 1) {
        char addr[NS_ADDR_MAX];
        ns_mpr_str(&r, addr, sizeof addr - 1);
        int rc = ns_mpr_end(&r) == NS_OK ? ns_p2p_connect(d->p2p, addr)
                                         : NS_ERR_INVAL;
        if (rc == NS_OK) {
            msgpack_pack_true(&pk);
            ns_mp_str(&pk, "dialling");
        } else {
            msgpack_pack_false(&pk);
            ns_mp_str(&pk, ns_strerror(rc));
        }
    } else if (strcmp(query, "block") == 0 && nargs == 2) {
        uint8_t peer[NS_ID_BYTES];
        uint64_t ms = 0;
        ns_mpr_bin_exact(&r, peer, NS_ID_BYTES);
        ns_mpr_uint(&r, &ms);
        int rc = ns_mpr_end(&r) != NS_OK || ms > 3600000 ? NS_ERR_INVAL
                 : !d->test_network                      ? NS_ERR_STATE
                                    : ns_p2p_block(d->p2p, peer, (uint32_t)ms);
        if (rc == NS_OK) {
            msgpack_pack_true(&pk);
            ns_mp_str(&pk, "blocked");
        } else {
            msgpack_pack_false(&pk);
            ns_mp_str(&pk, rc == NS_ERR_STATE
                               ? "block is for test networks only"
                               : ns_strerror(rc));
        }
    } else if (strcmp(query, "transfer") == 0 || strcmp(query, "stake") == 0 ||
               strcmp(query, "unstake") == 0) {
        s_ctl_ledger(d, query, &r, nargs, &pk);
    } else {
        msgpack_pack_false(&pk);
        ns_mp_str(&pk, "unknown query");
    }
    s_ctl_reply(sock, &sb);
    msgpack_sbuffer_destroy(&sb);
}

/* One node per datadir: an flock held for the process lifetime. */
static int s_lock_datadir(const char *datadir, int *fd_out)
{
    char path[PATH_MAX];
    if (ns_path_join(path, sizeof path, datadir, "node.lock") != NS_OK)
        return NS_ERR_TOOBIG;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == EACCES || errno == EROFS ? NS_ERR_PERM : NS_ERR_IO;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return NS_ERR_EXISTS;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || write(fd, pid, (size_t)len) != len) {
        close(fd);
        return NS_ERR_IO;
    }
    *fd_out = fd;
    return NS_OK;
}

static const char s_usage[] =
    "usage: nightshift node --datadir D [--listen tcp://IP:PORT]\n"
    "                       [--bootstrap ID@tcp://IP:PORT]... [--config "
    "FILE]\n"
    "                       [--set SECTION.KEY=VALUE]... [--log-level L]\n"
    "                       [--debug MODULES]\n"
    "\n"
    "Run a node: join the network through the bootstrap peers, gossip\n"
    "heartbeats, and answer `nightshift peers|status` on the control "
    "socket\n"
    "<datadir>/control.sock. Settings come from <datadir>/config.ini, then\n"
    "--config FILE, then flags. Stop with SIGINT or SIGTERM.\n"
    "\n"
    "  --listen EP        bind endpoint (port 0 = any free port)\n"
    "  --bootstrap ADDR   a peer to join through (repeatable; replaces the\n"
    "                     config's list)\n"
    "  --set S.K=V        any config setting, e.g. "
    "node.heartbeat_interval_ms=500\n"
    "  --log-level L      error|warn|info|debug (default info)\n"
    "  --debug MODULES    debug lines for modules: "
    "net,peers,gossip,node,ctl,market,all\n"
    "  --fault F          test networks only: lazy=R (fake a fraction R of\n"
    "                     the output items), garbage, silent (accept, never\n"
    "                     return), slow=X (hold results X times the run)\n";

int ns_cmd_node(int argc, char **argv)
{
    const char *cmd = "node";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    ns_node_opts_t o;
    char err[512];
    int rc = ns_node_opts_parse(argc, argv, &o, err, sizeof err);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "%s (see --help)", err);
        return 2;
    }
    if (!o.datadir) {
        ns_cli_error(cmd, "--datadir is required (see --help)");
        return 2;
    }
    int exit_code = 1, lock_fd = -1;
    ns_identity_t *id = NULL;
    ns_genesis_t genesis;
    ns_p2p_t *p2p = NULL;
    ns_ledger_t *ledger = NULL;
    ns_ledger_sync_t *sync = NULL;
    ns_provider_t *provider = NULL;
    ns_worker_t *slash_worker = NULL;
    void *ctl = NULL;
    char path[PATH_MAX], ctl_ep[PATH_MAX + 16];
    ctl_ep[0] = '\0';
    memset(&genesis, 0, sizeof genesis);

    ns_config_t cfg;
    if (ns_node_config(&o, &cfg, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    ns_log_threshold = cfg.log_level;
    if (cfg.log_debug[0] && ns_log_set_debug(cfg.log_debug) != NS_OK) {
        ns_cli_error(cmd, "unknown module in debug list '%s'", cfg.log_debug);
        return 2;
    }

    rc = s_lock_datadir(o.datadir, &lock_fd);
    if (rc == NS_ERR_EXISTS) {
        ns_cli_error(cmd, "another node is already running on %s", o.datadir);
        goto out;
    } else if (rc != NS_OK) {
        ns_cli_error(cmd,
                     "cannot write to datadir %s: %s (run `nightshift "
                     "init --datadir %s` first)",
                     o.datadir,
                     rc == NS_ERR_TOOBIG ? "path too long" : strerror(errno),
                     o.datadir);
        goto out;
    }
    if (ns_path_join(path, sizeof path, o.datadir, "node.key") != NS_OK)
        goto out;
    rc = ns_identity_load(path, &id);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "cannot load key %s: %s%s", path, ns_strerror(rc),
                     rc == NS_ERR_PERM       ? " (chmod 600 it)"
                     : rc == NS_ERR_NOTFOUND ? " (run `nightshift init` first)"
                                             : "");
        goto out;
    }
    if (ns_path_join(path, sizeof path, o.datadir, "genesis.ini") != NS_OK)
        goto out;
    if (ns_genesis_load(path, &genesis, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd,
                     "no usable genesis: %s (run `nightshift init "
                     "--datadir %s --genesis FILE`)",
                     err, o.datadir);
        goto out;
    }

    ns_fault_t fault;
    memset(&fault, 0, sizeof fault);
    if (o.fault && ns_fault_parse(o.fault, &fault) != NS_OK) {
        ns_cli_error(cmd,
                     "bad --fault '%s': lazy=R, garbage, silent or "
                     "slow=X",
                     o.fault);
        goto out;
    }
    if (o.fault && !genesis.test_network) {
        ns_cli_error(cmd, "--fault is refused: the genesis does not mark "
                          "this network as a test network");
        goto out;
    }

    /* The ledger: opened and checked before we join the network. */
    if (ns_path_join(path, sizeof path, o.datadir, "ledger") != NS_OK)
        goto out;
    err[0] = '\0';
    ledger = ns_ledger_open(path, &genesis, &rc, err, sizeof err);
    if (!ledger) {
        ns_cli_error(cmd, "%s", err);
        goto out;
    }

    /* OpenCL is probed in a child before any thread exists. */
    ns_devinfo_t devs[NS_MAX_DEVICES];
    uint32_t n_devs = 0;
    if (ns_devices_probe_cached(o.datadir, 30000, devs, &n_devs) != NS_OK)
        n_devs = 0;

    ns_p2p_opts_t popts = {&cfg, id, {0}, genesis.name, devs, n_devs};
    memcpy(popts.network_id, genesis.network_id, NS_HASH_BYTES);
    p2p = ns_p2p_new(&popts, &rc);
    if (!p2p) {
        ns_cli_error(cmd, "cannot listen on %s: %s", cfg.listen,
                     ns_strerror(rc));
        goto out;
    }

    /* Control socket, owner-only. A stale socket of a crashed node is
     * replaced: the datadir lock says no live node owns it. */
    if (ns_ctl_endpoint(o.datadir, ctl_ep, sizeof ctl_ep) != NS_OK) {
        ns_cli_error(cmd, "datadir path too long for a control socket");
        goto out;
    }
    unlink(ctl_ep + 6);
    ctl = zmq_socket(ns_p2p_zmq_context(p2p), ZMQ_REP);
    mode_t old_mask = umask(077);
    int bound = ctl ? zmq_bind(ctl, ctl_ep) : -1;
    umask(old_mask);
    if (bound != 0) {
        ns_cli_error(cmd, "cannot bind control socket %s: %s", ctl_ep,
                     zmq_strerror(zmq_errno()));
        goto out;
    }
    int linger = 0;
    zmq_setsockopt(ctl, ZMQ_LINGER, &linger, sizeof linger);
    sync = ns_ledger_sync_new(p2p, ledger, &rc);
    if (!sync) {
        ns_cli_error(cmd, "cannot start ledger sync: %s", ns_strerror(rc));
        goto out;
    }
    ns_slash_ctx_t slash_ctx = {&slash_worker, NULL, NULL};
    ns_ledger_set_verifier(ledger, ns_slash_verify, &slash_ctx);
    ns_provider_opts_t po = {p2p, ledger, sync,   id,        &cfg,
                             {0}, devs,   n_devs, o.datadir, fault};
    memcpy(po.network_id, genesis.network_id, NS_HASH_BYTES);
    provider = ns_provider_new(&po, &rc);
    if (!provider) {
        ns_cli_error(cmd, "cannot start the provider: %s", ns_strerror(rc));
        goto out;
    }
    s_daemon_t d = {
        p2p, genesis.test_network, ledger, sync, provider, id, o.datadir, ctl};
    if (ns_p2p_add_socket(p2p, ctl, s_on_ctl, &d) != NS_OK)
        goto out;

    /* node.addr: where this node can be reached, for `id` and scripts. */
    const char *addr = ns_p2p_address(p2p);
    char line[NS_ADDR_MAX + 2];
    int len = snprintf(line, sizeof line, "%s\n", addr);
    if (ns_path_join(path, sizeof path, o.datadir, "node.addr") != NS_OK ||
        ns_file_write_atomic(path, line, (size_t)len, 0644) != NS_OK) {
        ns_cli_error(cmd, "cannot write %s", path);
        goto out;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    char net[17];
    ns_hex(net, genesis.network_id, 8);
    ns_info(NS_MOD_NODE,
            "event=started address=%s network=%s network_id=%s devices=%u "
            "pid=%d",
            addr, genesis.name, net, n_devs, (int)getpid());
    rc = ns_p2p_run(p2p, &s_stop);
    if (rc != NS_OK) {
        ns_error(NS_MOD_NODE, "event=loop_failed error=\"%s\"",
                 ns_strerror(rc));
        goto out;
    }
    ns_info(NS_MOD_NODE, "event=stopped reason=signal");
    exit_code = 0;
out:
    if (ctl)
        zmq_close(ctl);
    if (ctl_ep[0])
        unlink(ctl_ep + 6);
    ns_provider_destroy(&provider);
    ns_worker_destroy(&slash_worker);
    ns_ledger_sync_destroy(&sync);
    ns_p2p_destroy(&p2p);
    ns_ledger_close(&ledger);
    ns_genesis_release(&genesis);
    ns_identity_destroy(&id);
    if (lock_fd >= 0)
        close(lock_fd);
    return exit_code;
}
