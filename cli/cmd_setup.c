/* cmd_setup.c - `init` (a datadir: key, genesis, config) and `genesis`. */
#include "cli.h"
#include "opts.h"

#include "nightshift/config.h"
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/invite.h"
#include "nightshift/mp.h"
#include "nightshift/probe.h"
#include "nightshift/util.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How long `init --join` waits for a bootstrap peer's genesis. */
#define S_JOIN_TIMEOUT_MS 10000

static const char s_init_usage[] =
    "usage: nightshift init --datadir D [--genesis FILE] [--listen "
    "tcp://IP:PORT]\n"
    "                       [--bootstrap ID@tcp://IP:PORT]... [--set "
    "S.K=V]... [--json]\n"
    "       nightshift init --join INVITATION [--datadir D] [--listen ...] "
    "[--set S.K=V]...\n"
    "\n"
    "Create or update a datadir: an Ed25519 identity in D/node.key (mode "
    "0600,\n"
    "kept if it exists), the network's genesis in D/genesis.ini, and the\n"
    "settings in D/config.ini. Prints the node id and the address to hand\n"
    "out for --bootstrap: ID@ the advertise endpoint when it is set\n"
    "(--set node.advertise=tcp://HOST:PORT), else ID@ the listen one, with\n"
    "a note when that is 0.0.0.0 (no address others can dial).\n"
    "D defaults to $NIGHTSHIFT_DATADIR, else $XDG_DATA_HOME/nightshift, else\n"
    "~/.local/share/nightshift.\n"
    "\n"
    "--join INVITATION (the line `nightshift invite` prints on a machine of\n"
    "the network: nightshift:1:NETWORK_ID@ID@tcp://HOST:PORT[,...]) makes a\n"
    "new datadir D for that network: it asks the bootstrap peers for the\n"
    "genesis over CURVE (10 s at most), checks its hash against the network\n"
    "id, and writes the key, the genesis and the bootstrap addresses. On\n"
    "any failure it says which address failed and why (connection refused,\n"
    "timed out, key mismatch, other network) and leaves no datadir behind.\n"
    "D must not exist or be empty.\n";

static int s_init_join(ns_node_opts_t *o);

/* The map `init --json` prints, opened for `extra` more keys after its
 * own: note (when there is one), id, address, datadir, created. */
static void s_pack_identity(msgpack_packer *pk, uint32_t extra,
                            const char *note, const char *idtext,
                            const char *addr, const char *datadir, bool created)
{
    msgpack_pack_map(pk, extra + (note ? 5 : 4));
    if (note) {
        ns_mp_str(pk, "note");
        ns_mp_str(pk, note);
    }
    ns_mp_str(pk, "id");
    ns_mp_str(pk, idtext);
    ns_mp_str(pk, "address");
    ns_mp_str(pk, addr);
    ns_mp_str(pk, "datadir");
    ns_mp_str(pk, datadir);
    ns_mp_str(pk, "created");
    if (created)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

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
    if (o.join)
        return s_init_join(&o);
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
        s_pack_identity(&pk, 0, note, idtext, addr, o.datadir, created);
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

/* ---- init --join ---------------------------------------------------------
 */

/* 1 when path does not exist, 0 when it is an empty directory, -1 when it
 * holds something (or is not a directory). */
static int s_fresh(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? 1 : -1;
    if (!S_ISDIR(st.st_mode))
        return -1;
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rc = -1;
    closedir(d);
    return rc;
}

/* Remove a directory this run made, and what it put there. */
static void s_remove_made(const char *dir)
{
    DIR *d = opendir(dir);
    char path[PATH_MAX];
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                ns_path_join(path, sizeof path, dir, e->d_name) == NS_OK)
                unlink(path);
        closedir(d);
    }
    rmdir(dir);
}

/* The new datadir, whole: made under a temporary name next to it, then
 * renamed into place, so a failure (or a signal) leaves no half-made
 * datadir where the node would look. */
static int s_make_datadir(const char *cmd, const char *datadir_arg,
                          const ns_config_t *cfg, const uint8_t *genesis,
                          size_t genesis_len, ns_identity_t **idp)
{
    char parent_buf[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX];
    char datadir[PATH_MAX];
    int rc;
    /* "D/" names D: the temporary directory goes next to it. */
    snprintf(datadir, sizeof datadir, "%s", datadir_arg);
    for (size_t n = strlen(datadir); n > 1 && datadir[n - 1] == '/'; n--)
        datadir[n - 1] = '\0';
    snprintf(parent_buf, sizeof parent_buf, "%s", datadir);
    const char *parent = dirname(parent_buf);
    if ((rc = ns_mkdir_p(parent, 0700)) != NS_OK) {
        ns_cli_error(cmd, "cannot create %s: %s", parent,
                     rc == NS_ERR_TOOBIG ? "path too long" : strerror(errno));
        return 1;
    }
    if (snprintf(tmp, sizeof tmp, "%s.join-XXXXXX", datadir) >=
            (int)sizeof tmp ||
        !mkdtemp(tmp)) {
        ns_cli_error(cmd, "cannot create a directory next to %s: %s", datadir,
                     strerror(errno));
        return 1;
    }
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    int exit_code = 1;
    *idp = ns_identity_generate();
    if (!*idp) {
        ns_cli_error(cmd, "cannot make a key: out of memory");
        goto out;
    }
    const char *step = "node.key";
    if (ns_path_join(path, sizeof path, tmp, "node.key") != NS_OK ||
        (rc = ns_identity_save(*idp, path)) != NS_OK)
        goto fail;
    step = "genesis.ini";
    if (ns_path_join(path, sizeof path, tmp, "genesis.ini") != NS_OK ||
        (rc = ns_file_write_atomic(path, genesis, genesis_len, 0644)) != NS_OK)
        goto fail;
    step = "config.ini";
    if (ns_path_join(path, sizeof path, tmp, "config.ini") != NS_OK ||
        (rc = ns_config_write(cfg, path)) != NS_OK)
        goto fail;
    /* Over an empty directory too: rename(2) replaces one. */
    if (rename(tmp, datadir) != 0) {
        ns_cli_error(cmd, "cannot move the new datadir to %s: %s", datadir,
                     strerror(errno));
        goto out;
    }
    exit_code = 0;
    goto out;
fail:
    ns_cli_error(cmd, "cannot write %s in %s: %s", step, tmp, ns_strerror(rc));
out:
    if (exit_code != 0)
        s_remove_made(tmp);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return exit_code;
}

/* How to run this binary again: "nightshift" when that name on PATH is
 * this very file, else its absolute path (build/nightshift). */
static void s_self(char *out, size_t cap)
{
    char self[PATH_MAX], cand[PATH_MAX], real[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    snprintf(out, cap, "nightshift");
    if (n <= 0)
        return;
    self[n] = '\0';
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len && len < sizeof cand - 12) {
            snprintf(cand, sizeof cand, "%.*s/nightshift", (int)len, path);
            if (realpath(cand, real) && strcmp(real, self) == 0)
                return;
            if (access(cand, X_OK) == 0)
                break; /* another nightshift comes first on PATH */
        }
        path += len + (path[len] == ':');
    }
    snprintf(out, cap, "%s", self);
}

/* text as one shell word: as it is when it is plain, else in single
 * quotes (a quote inside written '\''). */
static void s_shell_word(char *out, size_t cap, const char *text)
{
    if (!strpbrk(text, " \t'\"\\$`!*?[]{}()<>|&;~#")) {
        snprintf(out, cap, "%s", text);
        return;
    }
    size_t k = 0;
    if (cap < 3)
        return;
    out[k++] = '\'';
    for (const char *c = text; *c && k + 6 < cap; c++) {
        if (*c == '\'') {
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = *c;
        }
    }
    out[k++] = '\'';
    out[k] = '\0';
}

/* The probe's verdicts in one line: "bootstrap A: why; bootstrap B: why". */
static void s_causes(char *out, size_t cap, const ns_probe_t *pr, uint32_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && k < cap; i++) {
        int w = snprintf(out + k, cap - k, "%sbootstrap %s: %s", i ? "; " : "",
                         pr[i].addr, pr[i].why[0] ? pr[i].why : "no answer");
        if (w < 0)
            break;
        k += (size_t)w;
    }
}

static int s_init_join(ns_node_opts_t *o)
{
    const char *cmd = "init";
    char err[512];
    if (o->genesis) {
        ns_cli_error(cmd, "--join fetches the genesis from the network: "
                          "leave out --genesis (see --help)");
        return 2;
    }
    ns_invite_t inv;
    if (ns_invite_parse(o->join, &inv, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 2;
    }
    int fresh = s_fresh(o->datadir);
    if (fresh < 0) {
        ns_cli_error(cmd,
                     "%s exists and is not an empty directory: --join makes a "
                     "new datadir (choose another --datadir)",
                     o->datadir);
        return 1;
    }
    /* Settings before any traffic: a bad flag costs no round trip. The
     * invitation's addresses come first, then any --bootstrap. */
    ns_config_t cfg;
    if (ns_node_config(o, &cfg, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    ns_config_t flags = cfg;
    cfg.n_bootstrap = 0;
    for (uint32_t i = 0; i < inv.n_addrs; i++)
        if (ns_config_set(&cfg, "node", "bootstrap", inv.addrs[i], err,
                          sizeof err) != NS_OK) {
            ns_cli_error(cmd, "%s", err);
            return 1;
        }
    for (uint32_t i = 0; i < flags.n_bootstrap; i++) {
        bool dup = false;
        for (uint32_t k = 0; k < cfg.n_bootstrap; k++)
            dup = dup || strcmp(cfg.bootstrap[k], flags.bootstrap[i]) == 0;
        if (!dup && ns_config_set(&cfg, "node", "bootstrap", flags.bootstrap[i],
                                  err, sizeof err) != NS_OK) {
            ns_cli_error(cmd, "%s", err);
            return 1;
        }
    }

    ns_probe_t pr[NS_INVITE_MAX_ADDRS];
    memset(pr, 0, sizeof pr);
    for (uint32_t i = 0; i < inv.n_addrs; i++)
        snprintf(pr[i].addr, sizeof pr[i].addr, "%s", inv.addrs[i]);
    uint8_t *text = NULL;
    size_t len = 0;
    uint32_t winner = 0;
    int rc = ns_probe_run(pr, inv.n_addrs, inv.network_id, S_JOIN_TIMEOUT_MS,
                          &text, &len, &winner);
    if (rc != NS_OK) {
        char causes[4096];
        s_causes(causes, sizeof causes, pr, inv.n_addrs);
        ns_cli_error(cmd, "cannot join: %s",
                     causes[0] ? causes : ns_strerror(rc));
        return 1;
    }
    ns_genesis_t g;
    if (ns_genesis_parse(text, len, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd,
                     "cannot join: bootstrap %s: its genesis does not "
                     "load: %s",
                     pr[winner].addr, err);
        free(text);
        return 1;
    }
    ns_identity_t *id = NULL;
    int exit_code = s_make_datadir(cmd, o->datadir, &cfg, text, len, &id);
    free(text);
    if (exit_code != 0)
        goto out;

    char idtext[NS_ID_TEXT_LEN + 1], addr[NS_ADDR_MAX];
    char net[2 * NS_HASH_BYTES + 1];
    ns_hex(net, g.network_id, NS_HASH_BYTES);
    ns_id_text(idtext, ns_identity_pk(id));
    const char *note = ns_cli_address(&cfg, idtext, addr, sizeof addr);
    char next[4 * PATH_MAX + 64], self[PATH_MAX], self_word[2 * PATH_MAX],
        dir_word[2 * PATH_MAX];
    s_self(self, sizeof self);
    s_shell_word(self_word, sizeof self_word, self);
    s_shell_word(dir_word, sizeof dir_word, o->datadir);
    snprintf(next, sizeof next, "%s node --datadir %s", self_word, dir_word);
    if (o->json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        s_pack_identity(&pk, 4, note, idtext, addr, o->datadir, true);
        ns_mp_str(&pk, "network");
        ns_mp_str(&pk, g.name);
        ns_mp_str(&pk, "network_id");
        ns_mp_str(&pk, net);
        ns_mp_str(&pk, "genesis_from");
        ns_mp_str(&pk, pr[winner].addr);
        ns_mp_str(&pk, "next");
        ns_mp_str(&pk, next);
        exit_code = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    } else {
        printf("created  identity %s\naddress  %s\ndatadir  %s\n", idtext, addr,
               o->datadir);
        if (note)
            printf("note     %s\n", note);
        printf("network  %s (%s genesis, id %.16s), from %s\n", g.name,
               g.test_network ? "test" : "production", net, pr[winner].addr);
        printf("ready: start the node with\n  %s\n", next);
    }
out:
    ns_genesis_release(&g);
    ns_identity_destroy(&id);
    return exit_code;
}

static const char s_genesis_usage[] =
    "usage: nightshift genesis --out FILE --alloc ID=CREDITS... [--name "
    "NAME]\n"
    "                          [--close-window-s S] [--production] "
    "[--json]\n"
    "\n"
    "Write a genesis file for a new network: every node of that network\n"
    "holds the identical file, and its BLAKE2b-256 hash is the network id.\n"
    "Test networks (the default) allow fault injection; --production does "
    "not.\n"
    "--close-window-s: how long after a job's deadline its requester may\n"
    "still settle, slash or cancel an award before the provider may close\n"
    "it (default 600; 1 to 604800).\n"
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
    uint64_t window_ms = 0; /* the default */
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
        } else if (strcmp(argv[i], "--close-window-s") == 0) {
            uint64_t s;
            if (ns_parse_u64(v, &s) != NS_OK || s == 0 ||
                s > NS_GENESIS_CLOSE_WINDOW_MAX_MS / 1000) {
                ns_cli_error(
                    cmd, "bad --close-window-s '%s': seconds, 1 to %llu", v,
                    (unsigned long long)(NS_GENESIS_CLOSE_WINDOW_MAX_MS /
                                         1000));
                goto out;
            }
            window_ms = s * 1000;
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
    int rc = ns_genesis_write_window(out, name, test, ns_now_ms(), window_ms,
                                     allocs, n);
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
