/* cmd_node.c - `nightshift node`: parse the flags, run a node (node/). */
#include "cli.h"
#include "opts.h"

#include "nightshift/log.h"
#include "nightshift/node.h"

#include "nightshift/util.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static ns_node_t *volatile s_node;

static void s_on_signal(int sig)
{
    (void)sig;
    if (s_node)
        ns_node_stop(s_node);
}

/* SIGHUP: logrotate moved the log file away; log to a new one. */
static void s_on_hup(int sig)
{
    (void)sig;
    ns_log_reopen();
}

static const char s_usage[] =
    "usage: nightshift node --datadir D [--listen tcp://IP:PORT]\n"
    "                       [--bootstrap ID@tcp://IP:PORT]... [--config "
    "FILE]\n"
    "                       [--set SECTION.KEY=VALUE]... [--log-level L]\n"
    "                       [--debug MODULES] [--log-file FILE]\n"
    "\n"
    "Run a node: join the network through the bootstrap peers, gossip\n"
    "heartbeats, and answer `nightshift peers|status` on the control "
    "socket\n"
    "<datadir>/control.sock. Settings come from <datadir>/config.ini, then\n"
    "--config FILE, then flags (every setting: docs/CONFIG.md). Stop with\n"
    "SIGINT or SIGTERM; SIGHUP reopens the log file.\n"
    "\n"
    "  --listen EP        bind endpoint (port 0 = any free port)\n"
    "  --bootstrap ADDR   a peer to join through (repeatable; replaces the\n"
    "                     config's list)\n"
    "  --set S.K=V        any config setting, e.g. "
    "node.heartbeat_interval_ms=500\n"
    "  --log-level L      error|warn|info|debug (default info)\n"
    "  --debug MODULES    debug lines for modules: "
    "net,peers,gossip,node,ctl,market,all\n"
    "  --log-file FILE    append the log to FILE instead of stderr (setting\n"
    "                     log.file, relative to the datadir there); SIGHUP\n"
    "                     reopens it, for logrotate\n"
    "  --fault F          test networks only: lazy=R (fake a fraction R of\n"
    "                     the output items), garbage, silent (accept, never\n"
    "                     return), slow=X (hold results X times the run),\n"
    "                     fail (report every run as crashed)\n";

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
    if ((rc = ns_cli_datadir(cmd, &o.datadir, 0)) != 0)
        return rc;
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
    if (cfg.log_file[0]) {
        char path[PATH_MAX];
        if (cfg.log_file[0] != '/' &&
            ns_path_join(path, sizeof path, o.datadir, cfg.log_file) != NS_OK) {
            ns_cli_error(cmd, "log file path too long");
            return 1;
        }
        if (cfg.log_file[0] == '/')
            snprintf(path, sizeof path, "%s", cfg.log_file);
        if (ns_log_open_file(path) != NS_OK) {
            ns_cli_error(cmd, "cannot open the log file %s: %s", path,
                         strerror(errno));
            return 1;
        }
    }
    ns_node_conf_t c = {.datadir = o.datadir, .cfg = &cfg, .fault = o.fault};
    ns_node_t *node = ns_node_open(&c, err, sizeof err);
    if (!node) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    s_node = node;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = s_on_hup;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int exit_code = 0;
    rc = ns_node_run(node);
    if (rc != NS_OK) {
        ns_error(NS_MOD_NODE, "event=loop_failed error=\"%s\"",
                 ns_strerror(rc));
        exit_code = 1;
    } else {
        ns_info(NS_MOD_NODE, "event=stopped reason=signal");
    }
    s_node = NULL;
    ns_node_close(&node);
    return exit_code;
}
