/* main.c - the `nightshift` command: dispatch to subcommands. */
#include "cli.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} s_cmds[] = {
    {"init", ns_cmd_init, "create a datadir: identity, genesis, settings"},
    {"node", ns_cmd_node, "run a node"},
    {"id", ns_cmd_id, "print the node id and address of a datadir"},
    {"peers", ns_cmd_peers, "list the live peers of a running node"},
    {"status", ns_cmd_status, "show a running node's state and counters"},
    {"devices", ns_cmd_devices, "list this machine's OpenCL devices"},
    {"genesis", ns_cmd_genesis, "write a genesis file for a new network"},
    {"config", ns_cmd_config, "print the effective settings and defaults"},
    {"run", ns_cmd_run, "run one job on a local OpenCL device, no network"},
    {"worker", ns_cmd_worker, "(internal) the sandboxed kernel process"},
    {"ledger", ns_cmd_ledger, "list ledger entries and the conservation check"},
    {"balance", ns_cmd_balance, "show an account's free, staked and locked"},
    {"transfer", ns_cmd_transfer, "send credits to another account"},
    {"stake", ns_cmd_stake, "stake credits (collateral for jobs)"},
    {"unstake", ns_cmd_unstake, "release stake that is not locked"},
    {"submit", ns_cmd_submit, "post a job to the network and verify it"},
    {"cancel", ns_cmd_cancel, "end one of your jobs: escrow refunded"},
    {"jobs", ns_cmd_jobs, "list a running node's jobs, or one in detail"},
    {"connect", ns_cmd_connect, "make a running node dial a peer now"},
    {"block", ns_cmd_block, "test networks: cut traffic with a peer"},
    {"version", ns_cmd_version, "print the version, build and libraries"},
    {"help", NULL, "describe a command: `help CMD` is `CMD --help`"},
};
#define N_CMDS (sizeof s_cmds / sizeof s_cmds[0])

static void s_usage(FILE *out)
{
    fprintf(out, "usage: nightshift <command> [options]\n\n"
                 "Nightshift: a peer-to-peer market for GPU compute.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < N_CMDS; i++)
        fprintf(out, "  %-9s %s\n", s_cmds[i].name, s_cmds[i].summary);
    fprintf(out, "\n`nightshift help <command>` (or `nightshift <command> "
                 "--help`)\ndescribes each one. `nightshift version` prints "
                 "the version.\n"
                 "Every --flag VALUE may also be written --flag=VALUE.\n"
                 "Without --datadir, commands use $NIGHTSHIFT_DATADIR, else\n"
                 "$XDG_DATA_HOME/nightshift (~/.local/share/nightshift).\n");
}

/* --flag=VALUE becomes --flag VALUE, here and only here, so that every
 * subcommand's parser accepts both spellings. A bare "--" ends the
 * flags: what follows is left as it is. The new vector points into the
 * old strings, and into copies of the flag names that *names holds (NULL
 * when none): free both with s_split_free. NULL when out of memory. */
static char **s_split_eq_flags(int argc, char **argv, int *new_argc,
                               char ***names)
{
    char **out = calloc((size_t)argc * 2 + 1, sizeof *out);
    char **owned = calloc((size_t)argc + 1, sizeof *owned);
    int n = 0, n_owned = 0;
    bool flags = true;
    if (!out || !owned) {
        free(out);
        free(owned);
        return NULL;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (flags && strcmp(a, "--") == 0)
            flags = false;
        if (!flags || strncmp(a, "--", 2) != 0 || !eq || eq == a + 2) {
            out[n++] = argv[i];
            continue;
        }
        char *name = strndup(a, (size_t)(eq - a));
        if (!name) {
            for (int k = 0; k < n_owned; k++)
                free(owned[k]);
            free(owned);
            free(out);
            return NULL;
        }
        owned[n_owned++] = name;
        out[n++] = name;
        out[n++] = argv[i] + (eq - a) + 1;
    }
    out[n] = NULL;
    *new_argc = n;
    *names = owned;
    return out;
}

static void s_split_free(char **args, char **names)
{
    for (size_t k = 0; names && names[k]; k++)
        free(names[k]);
    free(names);
    free(args);
}

/* `help` lists the commands; `help CMD` is `CMD --help`. */
static int s_help(int argc, char **argv)
{
    if (argc < 3) {
        s_usage(stdout);
        return 0;
    }
    if (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 ||
        strcmp(argv[2], "help") == 0) {
        fputs("usage: nightshift help [COMMAND]\n"
              "\n"
              "With COMMAND: describe it, as `nightshift COMMAND --help` "
              "does.\n"
              "Alone: list the commands.\n",
              stdout);
        return 0;
    }
    if (argc > 3) {
        fprintf(stderr, "nightshift help: one command at a time "
                        "(usage: nightshift help [COMMAND])\n");
        return 2;
    }
    for (size_t i = 0; i < N_CMDS; i++) {
        if (s_cmds[i].fn && strcmp(argv[2], s_cmds[i].name) == 0) {
            char help[] = "--help";
            char *args[] = {argv[2], help, NULL};
            return s_cmds[i].fn(2, args);
        }
    }
    fprintf(stderr, "nightshift help: unknown command '%s'\n\n", argv[2]);
    s_usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        s_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0)
        return s_help(argc, argv);
    if (strcmp(argv[1], "--version") == 0) {
        printf("nightshift %s (%s, %s)\n", NS_VERSION_STRING, ns_build_revision,
               ns_build_type);
        return 0;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "nightshift: libsodium failed to initialise\n");
        return 1;
    }
    for (size_t i = 0; i < N_CMDS; i++) {
        if (!s_cmds[i].fn || strcmp(argv[1], s_cmds[i].name) != 0)
            continue;
        if (s_cmds[i].fn == ns_cmd_worker) /* internal: its own protocol */
            return s_cmds[i].fn(argc - 1, argv + 1);
        int n = 0;
        char **names = NULL;
        char **args = s_split_eq_flags(argc - 1, argv + 1, &n, &names);
        if (!args) {
            fprintf(stderr, "nightshift: out of memory\n");
            return 1;
        }
        int rc = s_cmds[i].fn(n, args);
        s_split_free(args, names);
        return rc;
    }
    fprintf(stderr, "nightshift: unknown command '%s'\n\n", argv[1]);
    s_usage(stderr);
    return 2;
}
