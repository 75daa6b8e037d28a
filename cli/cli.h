/* cli.h - the `nightshift` subcommands and their shared helpers.
 *
 * Each subcommand is `int ns_cmd_<name>(int argc, char **argv)` with argv[0]
 * the subcommand name; it returns the process exit status (0 = success,
 * 1 = failure, 2 = usage error) and prints one clear line on stderr on
 * failure. `--help` prints usage on stdout and returns 0. `--json` prints
 * exactly one JSON document on stdout.
 */
#ifndef NIGHTSHIFT_CLI_H
#define NIGHTSHIFT_CLI_H

#include "nightshift/config.h"

#include <stddef.h>
#include <stdio.h>

int ns_cmd_init(int argc, char **argv);
int ns_cmd_node(int argc, char **argv);
int ns_cmd_id(int argc, char **argv);
int ns_cmd_peers(int argc, char **argv);
int ns_cmd_status(int argc, char **argv);
int ns_cmd_devices(int argc, char **argv);
int ns_cmd_genesis(int argc, char **argv);
int ns_cmd_run(int argc, char **argv);
int ns_cmd_worker(int argc, char **argv); /* internal: the sandbox */
int ns_cmd_ledger(int argc, char **argv);
int ns_cmd_balance(int argc, char **argv);
int ns_cmd_transfer(int argc, char **argv);
int ns_cmd_stake(int argc, char **argv);
int ns_cmd_unstake(int argc, char **argv);
int ns_cmd_connect(int argc, char **argv);
int ns_cmd_submit(int argc, char **argv);
int ns_cmd_cancel(int argc, char **argv);
int ns_cmd_jobs(int argc, char **argv);
int ns_cmd_block(int argc, char **argv);
int ns_cmd_config(int argc, char **argv);
int ns_cmd_version(int argc, char **argv);

/* The source revision ("3064fa1c2b0e", "-dirty" when the tree had
 * changes, "unknown" outside git) and CMAKE_BUILD_TYPE of this binary:
 * generated at build time by dist/version.cmake. */
extern const char ns_build_revision[];
extern const char ns_build_type[];

/* The datadir a command works on: *datadir when --datadir was given, else
 * $NIGHTSHIFT_DATADIR, else $XDG_DATA_HOME/nightshift, else
 * ~/.local/share/nightshift. The default (not a given or environment
 * one) must exist unless may_create (init): otherwise one error line
 * naming it and 2 (usage). Returns 0 with *datadir set, or an exit
 * status. */
int ns_cli_datadir(const char *cmd, const char **datadir, int may_create);

/* The address to hand out for a node with settings cfg: ID@advertise
 * when advertise is set, else ID@listen. Returns NULL, or a note to show
 * when that address cannot be dialled from elsewhere (a wildcard listen
 * host and no advertise). */
const char *ns_cli_address(const ns_config_t *cfg, const char *idtext,
                           char *out, size_t cap);

/* Resolve an account id given in full (52 characters) or as a unique
 * prefix of at least NS_ID_SHORT_LEN characters (the short ids tables
 * show) among the accounts of datadir's genesis and ledger and the
 * peers of the node running on it. 0 with id filled; else one error
 * line ("not a node id", "unknown" or "ambiguous") and 2. what names
 * the argument in the error ("--to", "ID"). */
int ns_cli_resolve_id(const char *cmd, const char *datadir, const char *what,
                      const char *text, unsigned char id[32]);
/* Print "nightshift <cmd>: <message>" on stderr. */
void ns_cli_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* True if argv has --help or -h anywhere. */
int ns_cli_wants_help(int argc, char **argv);

/* A plain text table: columns sized to their widest cell. */
#define NS_TABLE_MAX_COLS 16
typedef struct {
    int ncols;
    const char *headers[NS_TABLE_MAX_COLS];
    char **cells; /* nrows * ncols strings, owned */
    size_t nrows;
    size_t cap_rows;
} ns_table_t;

void ns_table_init(ns_table_t *t, int ncols, const char *const *headers);
/* Add a row of exactly ncols cells (copied). */
void ns_table_row(ns_table_t *t, const char *const *cells);
void ns_table_print(const ns_table_t *t, FILE *out);
void ns_table_release(ns_table_t *t);

/* Print a msgpack document as pretty JSON on stdout; 0 or 1 (exit code). */
int ns_cli_print_json(const void *msgpack, size_t len);

/* "12.0 GiB", "512 MiB" */
void ns_fmt_bytes(char *out, size_t cap, unsigned long long bytes);

#endif
