/* main.c - the `nightshift` command: dispatch to subcommands. */
#include "cli.h"

#include <sodium.h>
#include <stdio.h>
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
};

static void s_usage(FILE *out)
{
    fprintf(out, "usage: nightshift <command> [options]\n\n"
                 "Nightshift: a peer-to-peer market for GPU compute.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof s_cmds / sizeof s_cmds[0]; i++)
        fprintf(out, "  %-9s %s\n", s_cmds[i].name, s_cmds[i].summary);
    fprintf(out, "\n`nightshift <command> --help` describes each one.\n"
                 "`nightshift --version` prints the version.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        s_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("nightshift %s\n", NS_VERSION_STRING);
        return 0;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, "nightshift: libsodium failed to initialise\n");
        return 1;
    }
    for (size_t i = 0; i < sizeof s_cmds / sizeof s_cmds[0]; i++)
        if (strcmp(argv[1], s_cmds[i].name) == 0)
            return s_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "nightshift: unknown command '%s'\n\n", argv[1]);
    s_usage(stderr);
    return 2;
}
