/* cmd_config.c - `nightshift config`: the settings a node on the datadir
 * would run with, each with its default and where its value came from. */
#include "cli.h"
#include "opts.h"

#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <limits.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

static const char s_usage[] =
    "usage: nightshift config [--datadir D] [--config FILE] [--listen EP]\n"
    "                         [--bootstrap ADDR]... [--set S.K=V]... [--json]\n"
    "\n"
    "Print the effective settings of a node on D, as `nightshift node` with\n"
    "the same flags would build them: defaults, then D/config.ini, then\n"
    "--config FILE, then flags. Each setting shows its value, its default\n"
    "and its source (default, config.ini, --config, flag). --json gives a\n"
    "list of {section, key, value, default, source, about} and the datadir.\n"
    "D defaults to $NIGHTSHIFT_DATADIR, else $XDG_DATA_HOME/nightshift, else\n"
    "~/.local/share/nightshift.\n";

int ns_cmd_config(int argc, char **argv)
{
    const char *cmd = "config";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    ns_node_opts_t o;
    char err[512];
    if (ns_node_opts_parse(argc, argv, &o, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s (see --help)", err);
        return 2;
    }
    int rc = ns_cli_datadir(cmd, &o.datadir, 0);
    if (rc)
        return rc;
    /* The same build in stages: a setting's source is the last stage
     * that changed it. */
    ns_node_opts_t stage_ini = {.datadir = o.datadir};
    ns_node_opts_t stage_file = {.datadir = o.datadir,
                                 .config_file = o.config_file};
    static ns_config_t cfg[4];
    static const char *const source[4] = {"default", "config.ini", "--config",
                                          "flag"};
    ns_config_defaults(&cfg[0]);
    if (ns_node_config(&stage_ini, &cfg[1], err, sizeof err) != NS_OK ||
        ns_node_config(&stage_file, &cfg[2], err, sizeof err) != NS_OK ||
        ns_node_config(&o, &cfg[3], err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    msgpack_sbuffer sb;
    msgpack_packer pk;
    ns_table_t t;
    static const char *const headers[] = {"SETTING", "VALUE", "DEFAULT",
                                          "SOURCE"};
    if (o.json) {
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        ns_mp_str(&pk, "datadir");
        ns_mp_str(&pk, o.datadir);
        ns_mp_str(&pk, "settings");
        msgpack_pack_array(&pk, (uint32_t)ns_config_n_keys);
    } else {
        ns_table_init(&t, 4, headers);
    }
    for (size_t i = 0; i < ns_config_n_keys; i++) {
        const ns_config_key_t *k = &ns_config_keys[i];
        char val[4][NS_MAX_BOOTSTRAP * NS_ADDR_MAX], name[128];
        int src = 0;
        for (int s = 0; s < 4; s++) {
            if (ns_config_get(&cfg[s], k->section, k->key, val[s],
                              sizeof val[s]) != NS_OK)
                snprintf(val[s], sizeof val[s], "?");
            if (s && strcmp(val[s], val[s - 1]) != 0)
                src = s;
        }
        if (o.json) {
            msgpack_pack_map(&pk, 6);
            ns_mp_str(&pk, "section");
            ns_mp_str(&pk, k->section);
            ns_mp_str(&pk, "key");
            ns_mp_str(&pk, k->key);
            ns_mp_str(&pk, "value");
            ns_mp_str(&pk, val[3]);
            ns_mp_str(&pk, "default");
            ns_mp_str(&pk, val[0]);
            ns_mp_str(&pk, "source");
            ns_mp_str(&pk, source[src]);
            ns_mp_str(&pk, "about");
            ns_mp_str(&pk, k->about);
        } else {
            snprintf(name, sizeof name, "%s.%s", k->section, k->key);
            const char *const row[] = {name, val[3][0] ? val[3] : "-",
                                       val[0][0] ? val[0] : "-", source[src]};
            ns_table_row(&t, row);
        }
    }
    if (o.json) {
        rc = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return rc;
    }
    printf("datadir %s\n", o.datadir);
    ns_table_print(&t, stdout);
    ns_table_release(&t);
    return 0;
}
