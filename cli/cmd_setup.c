/* cmd_setup.c - `init` (a datadir: key, genesis, config) and `genesis`. */
#include "cli.h"
#include "opts.h"

#include "nightshift/config.h"
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char s_init_usage[] =
    "usage: nightshift init --datadir D [--genesis FILE] [--listen "
    "tcp://IP:PORT]\n"
    "                       [--bootstrap ID@tcp://IP:PORT]... [--set "
    "S.K=V]... [--json]\n"
    "\n"
    "Create or update a datadir: an Ed25519 identity in D/node.key (mode "
    "0600,\n"
    "kept if it exists), the network's genesis in D/genesis.ini, and the\n"
    "settings in D/config.ini. Prints the node id and the address to hand\n"
    "out for --bootstrap: ID@ the advertise endpoint when it is set\n"
    "(--set node.advertise=tcp://HOST:PORT), else ID@ the listen one, with\n"
    "a note when that is 0.0.0.0 (no address others can dial).\n"
    "D defaults to $NIGHTSHIFT_DATADIR, else $XDG_DATA_HOME/nightshift, else\n"
    "~/.local/share/nightshift.\n";

int ns_cmd_init(int argc, char **argv)
{
    const char *cmd = "init";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_init_usage, stdout);
        return 0;
    }
    ns_node_opts_t o;
    char err[512], path[PATH_MAX];
    if (ns_node_opts_parse(argc, argv, &o, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s (see --help)", err);
        return 2;
    }
    int rc = ns_cli_datadir(cmd, &o.datadir, 1);
    if (rc)
        return rc;
    rc = ns_mkdir_p(o.datadir, 0700);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "cannot create datadir %s: %s", o.datadir,
                     rc == NS_ERR_TOOBIG ? "path too long" : strerror(errno));
        return 1;
    }
    /* Settings first: a bad flag must not leave a half-made datadir. */
    ns_config_t cfg;
    if (ns_node_config(&o, &cfg, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    ns_genesis_t g;
    memset(&g, 0, sizeof g);
    if (o.genesis && ns_genesis_load(o.genesis, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "bad genesis: %s", err);
        return 1;
    }

    int exit_code = 1, created = 0;
    ns_identity_t *id = NULL;
    uint8_t *text = NULL;
    if (ns_path_join(path, sizeof path, o.datadir, "node.key") != NS_OK)
        goto out;
    rc = ns_identity_load(path, &id);
    if (rc == NS_ERR_NOTFOUND) {
        id = ns_identity_generate();
        if (!id || (rc = ns_identity_save(id, path)) != NS_OK) {
            ns_cli_error(cmd, "cannot write %s: %s", path, ns_strerror(rc));
            goto out;
        }
        created = 1;
    } else if (rc != NS_OK) {
        ns_cli_error(cmd, "existing key %s is unusable: %s", path,
                     ns_strerror(rc));
        goto out;
    }
    if (o.genesis) {
        size_t len = 0;
        if (ns_file_read(o.genesis, NS_MAX_GENESIS_BYTES, &text, &len) != NS_OK)
            goto out;
        if (ns_path_join(path, sizeof path, o.datadir, "genesis.ini") !=
                NS_OK ||
            (rc = ns_file_write_atomic(path, text, len, 0644)) != NS_OK) {
            ns_cli_error(cmd, "cannot write %s: %s", path, ns_strerror(rc));
            goto out;
        }
    }
    if (ns_path_join(path, sizeof path, o.datadir, "config.ini") != NS_OK ||
        (rc = ns_config_write(&cfg, path)) != NS_OK) {
        ns_cli_error(cmd, "cannot write %s: %s", path, ns_strerror(rc));
        goto out;
    }
    char idtext[NS_ID_TEXT_LEN + 1], addr[NS_ADDR_MAX];
    ns_id_text(idtext, ns_identity_pk(id));
    const char *note = ns_cli_address(&cfg, idtext, addr, sizeof addr);
    if (o.json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, note ? 5 : 4);
        if (note) {
            ns_mp_str(&pk, "note");
            ns_mp_str(&pk, note);
        }
        ns_mp_str(&pk, "id");
        ns_mp_str(&pk, idtext);
        ns_mp_str(&pk, "address");
        ns_mp_str(&pk, addr);
        ns_mp_str(&pk, "datadir");
        ns_mp_str(&pk, o.datadir);
        ns_mp_str(&pk, "created");
        if (created)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    } else {
        printf("%s identity %s\naddress  %s\ndatadir  %s\n",
               created ? "created" : "kept   ", idtext, addr, o.datadir);
        if (note)
            printf("note     %s\n", note);
        if (o.genesis)
            printf("network  %s (%s genesis)\n", g.name,
                   g.test_network ? "test" : "production");
    }
    exit_code = 0;
out:
    free(text);
    ns_genesis_release(&g);
    ns_identity_destroy(&id);
    return exit_code;
}

static const char s_genesis_usage[] =
    "usage: nightshift genesis --out FILE --alloc ID=CREDITS... [--name "
    "NAME]\n"
    "                          [--production] [--json]\n"
    "\n"
    "Write a genesis file for a new network: every node of that network\n"
    "holds the identical file, and its BLAKE2b-256 hash is the network id.\n"
    "Test networks (the default) allow fault injection; --production does "
    "not.\n"
    "At least one --alloc is required. --json prints path, name,\n"
    "network_id, test_network, accounts and total (credits).\n";

int ns_cmd_genesis(int argc, char **argv)
{
    const char *cmd = "genesis";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_genesis_usage, stdout);
        return 0;
    }
    const char *out = NULL, *name = "nightshift-testnet";
    bool test = true;
    int json = 0;
    ns_alloc_t *allocs = calloc((size_t)argc, sizeof *allocs);
    uint32_t n = 0;
    int exit_code = 2;
    if (!allocs)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--production") == 0) {
            test = false;
            continue;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        if (!v) {
            ns_cli_error(cmd, "%s needs a value (see --help)", argv[i]);
            goto out;
        }
        if (strcmp(argv[i], "--out") == 0) {
            out = v;
        } else if (strcmp(argv[i], "--name") == 0) {
            name = v;
        } else if (strcmp(argv[i], "--alloc") == 0) {
            const char *eq = strchr(v, '=');
            char idtext[NS_ID_TEXT_LEN + 1];
            if (!eq || eq - v != NS_ID_TEXT_LEN) {
                ns_cli_error(cmd, "bad --alloc '%s': expected ID=CREDITS", v);
                goto out;
            }
            memcpy(idtext, v, NS_ID_TEXT_LEN);
            idtext[NS_ID_TEXT_LEN] = '\0';
            if (ns_id_parse(idtext, allocs[n].id) != NS_OK ||
                ns_credits_parse(eq + 1, &allocs[n].micro) != NS_OK) {
                ns_cli_error(cmd,
                             "bad --alloc '%s': expected ID=CREDITS (credits, "
                             "up to six decimals)",
                             v);
                goto out;
            }
            n++;
        } else {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", argv[i]);
            goto out;
        }
        i++;
    }
    if (!out) {
        ns_cli_error(cmd, "--out is required (see --help)");
        goto out;
    }
    if (n == 0) {
        /* A network nobody holds credits in cannot post or pay a job. */
        ns_cli_error(cmd, "at least one --alloc ID=CREDITS is required: a "
                          "genesis with no accounts has no credits to spend "
                          "(see --help)");
        goto out;
    }
    exit_code = 1;
    int rc = ns_genesis_write(out, name, test, ns_now_ms(), allocs, n);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "cannot write %s: %s", out, ns_strerror(rc));
        goto out;
    }
    /* Read it back through the strict parser: what we wrote must load. */
    ns_genesis_t g;
    char err[256];
    if (ns_genesis_load(out, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "the written genesis does not validate: %s", err);
        unlink(out);
        goto out;
    }
    char net[2 * NS_HASH_BYTES + 1];
    ns_hex(net, g.network_id, NS_HASH_BYTES);
    char total[NS_CREDITS_TEXT];
    if (json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 6);
        ns_mp_str(&pk, "path");
        ns_mp_str(&pk, out);
        ns_mp_str(&pk, "name");
        ns_mp_str(&pk, g.name);
        ns_mp_str(&pk, "network_id");
        ns_mp_str(&pk, net);
        ns_mp_str(&pk, "test_network");
        if (g.test_network)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        ns_mp_str(&pk, "accounts");
        msgpack_pack_uint32(&pk, g.n_allocs);
        ns_mp_str(&pk, "total");
        ns_mp_credits(&pk, g.total_micro);
        int prc = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        ns_genesis_release(&g);
        exit_code = prc;
        goto out;
    }
    printf("wrote %s: network %s, %u accounts, %s credits, id %s\n", out,
           g.name, g.n_allocs, ns_credits_fmt(total, g.total_micro), net);
    ns_genesis_release(&g);
    exit_code = 0;
out:
    free(allocs);
    return exit_code;
}
