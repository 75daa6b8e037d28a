/* cmd_cancel.c - `nightshift cancel JOB`: end one of your jobs, through
 * the node running on the datadir or as a light peer. */
#include "cli.h"
#include "ctl.h"

#include "nightshift/config.h"
#include "nightshift/log.h"
#include "nightshift/node.h"
#include "nightshift/policy.h"
#include "nightshift/util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char s_usage[] =
    "usage: nightshift cancel JOB_ID --datadir D [--bootstrap ADDR]... "
    "[--json]\n"
    "\n"
    "End one of your jobs: its escrow is refunded; a provider that had\n"
    "accepted it gets its collateral back, or loses a tenth of it when it\n"
    "let the deadline pass without a result. JOB_ID is the 64-hex id that\n"
    "`submit` printed.\n"
    "\n"
    "With a node running on D the node does it; otherwise D's key and\n"
    "ledger join the network as a light peer through --bootstrap (as\n"
    "`submit` does), record the cancel and pass it on.\n"
    "\n"
    "  --datadir D        the requester's datadir (its key posted the job)\n"
    "  --bootstrap ADDR   ID@tcp://HOST:PORT of a peer, when no node runs on\n"
    "                     D (repeatable)\n"
    "  --json             {\"job\", \"cancelled\": true, \"outcome\"}\n";

static void s_print(int json, const char *job, const char *what)
{
    if (json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 3);
        ns_mp_str(&pk, "job");
        ns_mp_str(&pk, job);
        ns_mp_str(&pk, "cancelled");
        msgpack_pack_true(&pk);
        ns_mp_str(&pk, "outcome");
        ns_mp_str(&pk, what);
        ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    } else {
        printf("job %.16s cancelled: %s\n", job, what);
    }
}

/* Through the node on datadir: its answer is the outcome. */
static int s_via_node(const char *datadir, const ns_hash_t job, int json,
                      const char *hex)
{
    ns_ctl_req_t req;
    memset(&req, 0, sizeof req);
    req.kind = NS_CTL_CANCEL;
    memcpy(req.job_id, job, NS_HASH_BYTES);
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512], what[400] = "";
    if (ns_ctl_call(datadir, &req, &doc, &len, err, sizeof err) != NS_OK) {
        ns_cli_error("cancel", "%s", err);
        return 1;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, doc, len);
    int rc = ns_mpr_str(&r, what, sizeof what - 1);
    free(doc);
    if (rc != NS_OK) {
        ns_cli_error("cancel", "the node answered something else");
        return 1;
    }
    s_print(json, hex, what);
    return 0;
}

static int s_as_light_peer(const char *datadir, const char *const *boot,
                           int n_boot, const ns_hash_t job, int json,
                           const char *hex)
{
    ns_config_t cfg;
    char err[512];
    ns_config_defaults(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "tcp://127.0.0.1:0");
    cfg.heartbeat_interval_ms = 1000;
    cfg.slots = 0;
    for (int i = 0; i < n_boot; i++)
        if (ns_config_set(&cfg, "node", "bootstrap", boot[i], err,
                          sizeof err) != NS_OK) {
            ns_cli_error("cancel", "bad --bootstrap '%s'", boot[i]);
            return 2;
        }
    ns_node_conf_t c = {.datadir = datadir,
                        .cfg = &cfg,
                        .light = true,
                        .runner_optional = true};
    ns_node_t *node = ns_node_open(&c, err, sizeof err);
    if (!node) {
        ns_cli_error("cancel", "%s", err);
        return 1;
    }
    int status = 1;
    ns_cancel_result_t res;
    char what[300];
    if (ns_node_join(node, err, sizeof err) != NS_OK ||
        ns_node_cancel(node, job, &res, err, sizeof err) != NS_OK) {
        ns_cli_error("cancel", "%s", err);
        goto out;
    }
    /* the entry goes out while the node closes (its close linger) */
    ns_cancel_describe(&res, what, sizeof what);
    s_print(json, hex, what);
    status = 0;
out:
    ns_node_close(&node);
    return status;
}

/* A job id, or a unique prefix (8+ hex digits) of one of the jobs this
 * datadir submitted (<datadir>/jobs/). Returns an exit status. */
static int s_resolve(const char *datadir, const char *in,
                     char full[2 * NS_HASH_BYTES + 1])
{
    size_t n = strlen(in);
    if (n == 2 * NS_HASH_BYTES) {
        memcpy(full, in, n + 1);
        return 0;
    }
    if (n < 8 || n > 2 * NS_HASH_BYTES || strspn(in, "0123456789abcdef") != n) {
        ns_cli_error("cancel",
                     "'%s' is not a job id (64 hex digits, or a prefix of "
                     "8 or more)",
                     in);
        return 2;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/jobs", datadir);
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strlen(e->d_name) == 2 * NS_HASH_BYTES &&
            strncmp(e->d_name, in, n) == 0 && found++ == 0)
            memcpy(full, e->d_name, 2 * NS_HASH_BYTES + 1);
    if (d)
        closedir(d);
    if (found == 1)
        return 0;
    if (found)
        ns_cli_error("cancel", "'%s' matches %d jobs: give more digits", in,
                     found);
    else
        ns_cli_error("cancel", "no job starting with '%s' in %s/jobs", in,
                     datadir);
    return 2;
}

int ns_cmd_cancel(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    const char *datadir = NULL, *hex = NULL, *boot[NS_MAX_BOOTSTRAP];
    int n_boot = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--datadir") == 0 && i + 1 < argc)
            datadir = argv[++i];
        else if (strcmp(argv[i], "--bootstrap") == 0 && i + 1 < argc) {
            if (n_boot < NS_MAX_BOOTSTRAP)
                boot[n_boot++] = argv[i + 1];
            i++;
        } else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (!hex && argv[i][0] != '-')
            hex = argv[i];
        else {
            ns_cli_error("cancel", "unknown argument '%s' (see --help)",
                         argv[i]);
            return 2;
        }
    }
    ns_hash_t job;
    char full[2 * NS_HASH_BYTES + 1];
    if (hex && !datadir && ns_cli_datadir("cancel", &datadir, 0) != 0)
        return 2;
    if (!datadir || !hex) {
        ns_cli_error("cancel", "expected JOB_ID --datadir D (see --help)");
        return 2;
    }
    int status = s_resolve(datadir, hex, full);
    if (status)
        return status;
    hex = full;
    if (ns_unhex(job, NS_HASH_BYTES, hex) != NS_OK) {
        ns_cli_error("cancel", "'%s' is not a job id (64 hex digits)", hex);
        return 2;
    }
    ns_log_threshold = NS_LOG_ERROR;
    char ep[4200];
    struct stat st;
    if (ns_ctl_endpoint(datadir, ep, sizeof ep) == NS_OK &&
        stat(ep + 6, &st) == 0)
        return s_via_node(datadir, job, json, hex);
    if (n_boot == 0) {
        ns_cli_error("cancel",
                     "no node is running on %s: give --bootstrap ADDR to "
                     "cancel as a light peer",
                     datadir);
        return 2;
    }
    return s_as_light_peer(datadir, boot, n_boot, job, json, hex);
}
