/* resolve.c - what a command works on when the user leaves it implicit
 * or short: the default datadir, and the 10-character ids tables show. */
#include "cli.h"
#include "ctl.h"

#include "nightshift/config.h"
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <limits.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ns_cli_datadir(const char *cmd, const char **datadir, int may_create)
{
    static char path[PATH_MAX];
    if (*datadir)
        return 0;
    const char *env = getenv("NIGHTSHIFT_DATADIR");
    if (env && env[0]) {
        *datadir = env;
        return 0;
    }
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    int n = -1;
    if (xdg && xdg[0] == '/')
        n = snprintf(path, sizeof path, "%s/nightshift", xdg);
    else if (home && home[0])
        n = snprintf(path, sizeof path, "%s/.local/share/nightshift", home);
    if (n < 0 || (size_t)n >= sizeof path) {
        ns_cli_error(cmd, "--datadir is required (no NIGHTSHIFT_DATADIR, "
                          "XDG_DATA_HOME or HOME to find a default; see "
                          "--help)");
        return 2;
    }
    struct stat st;
    if (!may_create && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        ns_cli_error(cmd,
                     "no --datadir given, NIGHTSHIFT_DATADIR is not set and "
                     "the default datadir %s does not exist (`nightshift "
                     "init` creates it; see --help)",
                     path);
        return 2;
    }
    *datadir = path;
    return 0;
}

/* ---- short ids ------------------------------------------------------------
 */

typedef struct {
    const char *prefix;
    size_t len;
    uint8_t found[NS_ID_BYTES];
    unsigned matches; /* distinct ids matching */
} s_match_t;

static void s_consider(s_match_t *m, const uint8_t id[NS_ID_BYTES])
{
    char text[NS_ID_TEXT_LEN + 1];
    ns_id_text(text, id);
    if (strncmp(text, m->prefix, m->len) != 0)
        return;
    if (m->matches && memcmp(m->found, id, NS_ID_BYTES) == 0)
        return; /* the same account seen from another source */
    if (!m->matches)
        memcpy(m->found, id, NS_ID_BYTES);
    m->matches++;
}

static bool s_account(void *u, const ns_account_t *a)
{
    s_consider(u, a->id);
    return true;
}

/* The peers of the node running on datadir, when one runs. */
static void s_peers(s_match_t *m, const char *datadir)
{
    char ep[PATH_MAX + 16], err[256];
    struct stat st;
    if (ns_ctl_endpoint(datadir, ep, sizeof ep) != NS_OK ||
        stat(ep + 6, &st) != 0)
        return;
    uint8_t *doc = NULL;
    size_t len = 0;
    if (ns_ctl_query(datadir, "peers", &doc, &len, err, sizeof err) != NS_OK)
        return;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)doc, len, NULL) ==
            MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t i = 0; i < up.data.via.array.size; i++) {
            const msgpack_object *p = &up.data.via.array.ptr[i];
            if (p->type != MSGPACK_OBJECT_MAP)
                continue;
            for (uint32_t k = 0; k < p->via.map.size; k++) {
                const msgpack_object *key = &p->via.map.ptr[k].key;
                const msgpack_object *val = &p->via.map.ptr[k].val;
                char text[NS_ID_TEXT_LEN + 1];
                uint8_t id[NS_ID_BYTES];
                if (key->type != MSGPACK_OBJECT_STR || key->via.str.size != 2 ||
                    memcmp(key->via.str.ptr, "id", 2) != 0 ||
                    val->type != MSGPACK_OBJECT_STR ||
                    val->via.str.size != NS_ID_TEXT_LEN)
                    continue;
                memcpy(text, val->via.str.ptr, NS_ID_TEXT_LEN);
                text[NS_ID_TEXT_LEN] = '\0';
                if (ns_id_parse(text, id) == NS_OK)
                    s_consider(m, id);
            }
        }
    }
    msgpack_unpacked_destroy(&up);
    free(doc);
}

int ns_cli_resolve_id(const char *cmd, const char *datadir, const char *what,
                      const char *text, unsigned char id[32])
{
    if (ns_id_parse(text, id) == NS_OK)
        return 0;
    if (strlen(text) != NS_ID_SHORT_LEN) {
        ns_cli_error(cmd,
                     "%s '%s' is not a node id (52 characters, or the "
                     "%d-character short id tables show)",
                     what, text, NS_ID_SHORT_LEN);
        return 2;
    }
    s_match_t m = {.prefix = text, .len = NS_ID_SHORT_LEN};
    char path[PATH_MAX], err[256];
    ns_genesis_t g;
    if (datadir &&
        ns_path_join(path, sizeof path, datadir, "genesis.ini") == NS_OK &&
        ns_genesis_load(path, &g, err, sizeof err) == NS_OK) {
        for (uint32_t i = 0; i < g.n_allocs; i++)
            s_consider(&m, g.allocs[i].id);
        int rc;
        ns_ledger_t *l = NULL;
        if (ns_path_join(path, sizeof path, datadir, "ledger") == NS_OK)
            l = ns_ledger_open_readonly(path, &g, &rc, err, sizeof err);
        if (l) {
            ns_ledger_each_account(l, s_account, &m);
            ns_ledger_close(&l);
        }
        ns_genesis_release(&g);
    }
    if (datadir)
        s_peers(&m, datadir);
    if (m.matches != 1) {
        ns_cli_error(cmd,
                     "%s '%s' is %s: give the whole 52-character id "
                     "(`nightshift ledger --json` and `peers --json` show "
                     "them)",
                     what, text,
                     m.matches ? "ambiguous (several known accounts start "
                                 "with it)"
                               : "unknown (no known account or peer starts "
                                 "with it)");
        return 2;
    }
    memcpy(id, m.found, NS_ID_BYTES);
    return 0;
}

/* ---- the address to hand out ----------------------------------------------
 */

const char *ns_cli_address(const ns_config_t *cfg, const char *idtext,
                           char *out, size_t cap)
{
    if (cfg->reachable == NS_REACH_NO) {
        snprintf(out, cap, "%s@%s", idtext,
                 cfg->advertise[0] ? cfg->advertise : cfg->listen);
        return "node.reachable = no: peers cannot dial this node (it dials "
               "out only); hand out a reachable peer's address for "
               "--bootstrap";
    }
    if (cfg->advertise[0]) {
        snprintf(out, cap, "%s@%s", idtext, cfg->advertise);
        return NULL;
    }
    snprintf(out, cap, "%s@%s", idtext, cfg->listen);
    if (strncmp(cfg->listen, "tcp://0.0.0.0:", 14) == 0 ||
        strncmp(cfg->listen, "tcp://*:", 8) == 0)
        return "listening on all interfaces (0.0.0.0) with no advertise "
               "address: others cannot dial this address; replace 0.0.0.0 "
               "with this machine's reachable IP, or set --set "
               "node.advertise=tcp://HOST:PORT";
    return NULL;
}
