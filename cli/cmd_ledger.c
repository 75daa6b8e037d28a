/* cmd_ledger.c - `ledger` and `balance` read the datadir's LMDB ledger
 * directly (whether or not the node runs: LMDB serves several processes);
 * `transfer`, `stake`, `unstake` ask the running node to append. */
#include "cli.h"
#include "ctl.h"

#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct {
    const char *datadir;
    const char *author;
    const char *to;
    const char *positional;
    uint64_t limit;
    int json;
} s_opts_t;

static int s_parse(const char *cmd, int argc, char **argv, s_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->limit = 50;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--datadir") == 0 && v) {
            o->datadir = v;
            i++;
        } else if (strcmp(a, "--author") == 0 && v) {
            o->author = v;
            i++;
        } else if (strcmp(a, "--to") == 0 && v) {
            o->to = v;
            i++;
        } else if (strcmp(a, "--limit") == 0 && v) {
            if (ns_parse_u64(v, &o->limit) != NS_OK) {
                ns_cli_error(cmd, "bad --limit '%s'", v);
                return 2;
            }
            i++;
        } else if (a[0] != '-' && !o->positional) {
            o->positional = a;
        } else {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", a);
            return 2;
        }
    }
    return ns_cli_datadir(cmd, &o->datadir, 0);
}

static ns_ledger_t *s_open(const char *cmd, const char *datadir)
{
    char path[PATH_MAX], err[512] = "";
    ns_genesis_t g;
    if (ns_path_join(path, sizeof path, datadir, "genesis.ini") != NS_OK ||
        ns_genesis_load(path, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "no genesis in %s: %s", datadir, err);
        return NULL;
    }
    int rc;
    err[0] = '\0';
    ns_ledger_t *l = NULL;
    if (ns_path_join(path, sizeof path, datadir, "ledger") == NS_OK)
        l = ns_ledger_open_readonly(path, &g, &rc, err, sizeof err);
    if (!l)
        ns_cli_error(cmd, "%s", err);
    ns_genesis_release(&g);
    return l;
}

static int s_self_id(const char *cmd, const char *datadir, uint8_t id[32])
{
    char path[PATH_MAX];
    ns_identity_t *me = NULL;
    int rc = NS_ERR_TOOBIG;
    if (ns_path_join(path, sizeof path, datadir, "node.key") == NS_OK)
        rc = ns_identity_load(path, &me);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "cannot load %s: %s", path, ns_strerror(rc));
        return rc;
    }
    memcpy(id, ns_identity_pk(me), 32);
    ns_identity_destroy(&me);
    return NS_OK;
}

/* The account as D's ledger holds it; before the node first started on D
 * (no ledger yet), as D's genesis allots it: what a requester has to
 * spend before its first submit. Opens nothing for writing. */
static int s_account_or_genesis(const char *cmd, const char *datadir,
                                const uint8_t id[NS_ID_BYTES], ns_account_t *a,
                                bool *genesis_view)
{
    char path[PATH_MAX], err[512] = "";
    ns_genesis_t g;
    if (ns_path_join(path, sizeof path, datadir, "genesis.ini") != NS_OK ||
        ns_genesis_load(path, &g, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "no genesis in %s: %s", datadir, err);
        return 1;
    }
    int rc = NS_ERR_TOOBIG, status = 1;
    ns_ledger_t *l = NULL;
    if (ns_path_join(path, sizeof path, datadir, "ledger") == NS_OK)
        l = ns_ledger_open_readonly(path, &g, &rc, err, sizeof err);
    if (l) {
        rc = ns_ledger_account(l, id, a);
        ns_ledger_close(&l);
        if (rc != NS_OK)
            ns_cli_error(cmd, "cannot read the account: %s", ns_strerror(rc));
        else
            status = 0;
    } else if (rc == NS_ERR_NOTFOUND) {
        memset(a, 0, sizeof *a);
        memcpy(a->id, id, NS_ID_BYTES);
        for (uint32_t i = 0; i < g.n_allocs; i++)
            if (memcmp(g.allocs[i].id, id, NS_ID_BYTES) == 0)
                a->free += g.allocs[i].micro;
        *genesis_view = true;
        status = 0;
    } else {
        ns_cli_error(cmd, "%s", err);
    }
    ns_genesis_release(&g);
    return status;
}

/* ---- ledger ------------------------------------------------------------ */

typedef struct {
    msgpack_packer *pk; /* JSON mode */
    ns_table_t *t;      /* table mode */
    uint64_t shown, limit;
} s_list_t;

static void s_summary(const ns_entry_t *e, char *out, size_t cap)
{
    ns_entry_body_t b;
    char who[NS_ID_SHORT_LEN + 1], jid[17], x[NS_CREDITS_TEXT],
        y[NS_CREDITS_TEXT];
    if (ns_entry_body_decode(e, &b) != NS_OK) {
        snprintf(out, cap, "(undecodable body)");
        return;
    }
    ns_hex(jid, b.job_id, 8);
    switch (e->type) {
    case NS_ENTRY_TRANSFER:
        ns_id_short(who, b.to);
        snprintf(out, cap, "%s to %s", ns_credits_fmt(x, b.amount), who);
        break;
    case NS_ENTRY_STAKE:
    case NS_ENTRY_UNSTAKE:
        snprintf(out, cap, "%s", ns_credits_fmt(x, b.amount));
        break;
    case NS_ENTRY_JOB:
        snprintf(out, cap, "job %s escrow %s max %s", jid,
                 ns_credits_fmt(x, b.escrow), ns_credits_fmt(y, b.max_price));
        break;
    case NS_ENTRY_AWARD:
        ns_id_short(who, b.bid.provider);
        snprintf(out, cap, "job %s to %s at %s", jid, who,
                 ns_credits_fmt(x, b.bid.price));
        break;
    default:
        snprintf(out, cap, "job %s", jid);
        break;
    }
}

static bool s_list_entry(void *u, const ns_entry_t *e)
{
    s_list_t *L = u;
    if (L->shown >= L->limit)
        return false;
    L->shown++;
    char author[NS_ID_TEXT_LEN + 1], id[2 * NS_HASH_BYTES + 1], summary[160];
    ns_id_text(author, e->author);
    ns_hex(id, e->id, NS_HASH_BYTES);
    s_summary(e, summary, sizeof summary);
    if (L->pk) {
        msgpack_pack_map(L->pk, 7);
        ns_mp_str(L->pk, "id");
        ns_mp_str(L->pk, id);
        ns_mp_str(L->pk, "author");
        ns_mp_str(L->pk, author);
        ns_mp_str(L->pk, "seq");
        msgpack_pack_uint64(L->pk, e->seq);
        ns_mp_str(L->pk, "type");
        ns_mp_str(L->pk, ns_entry_type_name(e->type));
        ns_mp_str(L->pk, "timestamp_ms");
        msgpack_pack_uint64(L->pk, e->timestamp_ms);
        ns_mp_str(L->pk, "refs");
        msgpack_pack_uint32(L->pk, e->n_refs);
        ns_mp_str(L->pk, "summary");
        ns_mp_str(L->pk, summary);
    } else {
        char seq[24], refs[12];
        author[NS_ID_SHORT_LEN] = '\0';
        id[16] = '\0';
        snprintf(seq, sizeof seq, "%llu", (unsigned long long)e->seq);
        snprintf(refs, sizeof refs, "%u", e->n_refs);
        const char *const row[] = {author, seq,     ns_entry_type_name(e->type),
                                   refs,   summary, id};
        ns_table_row(L->t, row);
    }
    return true;
}

static bool s_count(void *u, const ns_entry_t *e)
{
    (void)e;
    (*(uint64_t *)u)++;
    return true;
}

static const char s_ledger_usage[] =
    "usage: nightshift ledger --datadir D [--json] [--author ID] [--limit "
    "N]\n"
    "\n"
    "List the ledger entries stored in D (by author, then seq), at most N\n"
    "(default 50), with a summary of balances and the conservation check.\n"
    "ID: a whole id, or the 10-character short id tables show.\n"
    "Reads the datadir's LMDB directly; the node need not run.\n";

int ns_cmd_ledger(int argc, char **argv)
{
    const char *cmd = "ledger";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_ledger_usage, stdout);
        return 0;
    }
    s_opts_t o;
    int rc = s_parse(cmd, argc, argv, &o);
    if (rc)
        return rc;
    uint8_t author[NS_ID_BYTES];
    if (o.author && (rc = ns_cli_resolve_id(cmd, o.datadir, "--author",
                                            o.author, author)) != 0)
        return rc;
    ns_ledger_t *l = s_open(cmd, o.datadir);
    if (!l)
        return 1;
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    uint64_t sum = 0;
    int conserved = ns_ledger_check_conservation(l, &sum) == NS_OK;
    uint64_t total_entries = 0;
    ns_ledger_each_entry(l, o.author ? author : NULL, s_count, &total_entries);
    if (o.json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 7);
        ns_mp_str(&pk, "entries");
        msgpack_pack_uint64(&pk, st.entries);
        ns_mp_str(&pk, "accounts");
        msgpack_pack_uint64(&pk, st.accounts);
        ns_mp_str(&pk, "total");
        ns_mp_credits(&pk, st.total);
        ns_mp_str(&pk, "burned");
        ns_mp_credits(&pk, st.burned);
        ns_mp_str(&pk, "pending_credit");
        ns_mp_credits(&pk, st.pending_credit);
        ns_mp_str(&pk, "conserved");
        if (conserved)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        ns_mp_str(&pk, "list");
        uint64_t n = total_entries < o.limit ? total_entries : o.limit;
        msgpack_pack_array(&pk, (uint32_t)n);
        s_list_t L = {&pk, NULL, 0, n};
        ns_ledger_each_entry(l, o.author ? author : NULL, s_list_entry, &L);
        rc = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
    } else {
        static const char *const headers[] = {"AUTHOR", "SEQ",     "TYPE",
                                              "REFS",   "SUMMARY", "ID"};
        ns_table_t t;
        ns_table_init(&t, 6, headers);
        s_list_t L = {NULL, &t, 0, o.limit};
        ns_ledger_each_entry(l, o.author ? author : NULL, s_list_entry, &L);
        char total[NS_CREDITS_TEXT], pending[NS_CREDITS_TEXT],
            burned[NS_CREDITS_TEXT];
        printf("%llu entries, %llu accounts; total %s credits = balances + "
               "%s pending + %s burned: %s\n",
               (unsigned long long)st.entries, (unsigned long long)st.accounts,
               ns_credits_fmt(total, st.total),
               ns_credits_fmt(pending, st.pending_credit),
               ns_credits_fmt(burned, st.burned),
               conserved ? "conserved" : "NOT CONSERVED");
        if (t.nrows)
            ns_table_print(&t, stdout);
        if (total_entries > L.shown)
            printf("(%llu more; --limit N)\n",
                   (unsigned long long)(total_entries - L.shown));
        ns_table_release(&t);
        rc = 0;
    }
    ns_ledger_close(&l);
    return rc ? rc : (conserved ? 0 : 1);
}

/* ---- balance ---------------------------------------------------------------
 */

static const char s_balance_usage[] =
    "usage: nightshift balance --datadir D [ID] [--json]\n"
    "\n"
    "Balance of account ID (default: the datadir's own; the 10-character\n"
    "short id tables show will do when it names one known account) in D's\n"
    "ledger, or before any node started on D, in its genesis (genesis_view\n"
    "in --json):\n"
    "free, staked, locked (escrow + collateral), in credits (to the\n"
    "micro-credit). --json gives id, free, staked, locked and the parts,\n"
    "as decimal numbers of credits.\n";

int ns_cmd_balance(int argc, char **argv)
{
    const char *cmd = "balance";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_balance_usage, stdout);
        return 0;
    }
    s_opts_t o;
    int rc = s_parse(cmd, argc, argv, &o);
    if (rc)
        return rc;
    uint8_t id[NS_ID_BYTES];
    if (o.positional) {
        if ((rc = ns_cli_resolve_id(cmd, o.datadir, "ID", o.positional, id)) !=
            0)
            return rc;
    } else if (s_self_id(cmd, o.datadir, id) != NS_OK) {
        return 1;
    }
    ns_account_t a;
    bool genesis_view = false;
    if ((rc = s_account_or_genesis(cmd, o.datadir, id, &a, &genesis_view)) != 0)
        return rc;
    char text[NS_ID_TEXT_LEN + 1];
    ns_id_text(text, id);
    if (o.json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 14);
        ns_mp_str(&pk, "id");
        ns_mp_str(&pk, text);
        ns_mp_str(&pk, "genesis_view");
        if (genesis_view)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        ns_mp_str(&pk, "jobs_posted");
        msgpack_pack_uint32(&pk, a.jobs_posted);
        ns_mp_str(&pk, "jobs_settled_as_requester");
        msgpack_pack_uint32(&pk, a.jobs_settled_as_requester);
        ns_mp_str(&pk, "jobs_settled");
        msgpack_pack_uint32(&pk, a.jobs_settled);
        ns_mp_str(&pk, "jobs_slashed");
        msgpack_pack_uint32(&pk, a.jobs_slashed);
        ns_mp_str(&pk, "jobs_cancelled");
        msgpack_pack_uint32(&pk, a.jobs_cancelled);
        ns_mp_str(&pk, "free");
        ns_mp_credits(&pk, a.free);
        ns_mp_str(&pk, "staked");
        ns_mp_credits(&pk, a.staked);
        ns_mp_str(&pk, "locked");
        ns_mp_credits(&pk, a.locked_escrow + a.locked_collateral);
        ns_mp_str(&pk, "locked_escrow");
        ns_mp_credits(&pk, a.locked_escrow);
        ns_mp_str(&pk, "locked_collateral");
        ns_mp_credits(&pk, a.locked_collateral);
        ns_mp_str(&pk, "seq");
        msgpack_pack_uint64(&pk, a.seq);
        ns_mp_str(&pk, "banned");
        if (a.banned)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        rc = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return rc;
    }
    char f[NS_CREDITS_TEXT], st[NS_CREDITS_TEXT], lk[NS_CREDITS_TEXT],
        le[NS_CREDITS_TEXT], lc[NS_CREDITS_TEXT];
    printf("account  %s%s\nfree     %s credits\nstaked   %s credits\nlocked  "
           " %s credits (escrow %s, collateral %s)\nentries  %llu\n",
           text, a.banned ? " (BANNED: forked its chain)" : "",
           ns_credits_fmt(f, a.free), ns_credits_fmt(st, a.staked),
           ns_credits_fmt(lk, a.locked_escrow + a.locked_collateral),
           ns_credits_fmt(le, a.locked_escrow),
           ns_credits_fmt(lc, a.locked_collateral), (unsigned long long)a.seq);
    if (genesis_view)
        printf("(from the genesis: no node has started on %s yet, so no\n"
               "ledger; the genesis allocation is what there is to spend)\n",
               o.datadir);
    return 0;
}

/* ---- transfer / stake / unstake ---------------------------------------- */

static int s_append(const char *cmd, const char *datadir, const char *to,
                    uint64_t amount, int json)
{
    ns_ctl_req_t req;
    memset(&req, 0, sizeof req);
    if (ns_ctl_kind(cmd, &req.kind) != NS_OK)
        return 2;
    if (to && req.kind != NS_CTL_TRANSFER) {
        ns_cli_error(cmd,
                     "--to is for transfer only: %s acts on D's own "
                     "account (usage: nightshift %s --datadir D AMOUNT)",
                     cmd, cmd);
        return 2;
    }
    int rc;
    if (to && (rc = ns_cli_resolve_id(cmd, datadir, "--to", to, req.peer)) != 0)
        return rc;
    req.amount = amount;
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512];
    rc = ns_ctl_call(datadir, &req, &doc, &len, err, sizeof err);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    if (json) {
        rc = ns_cli_print_json(doc, len);
    } else {
        char *j = NULL;
        if (ns_mp_to_json(doc, len, &j, 0) == NS_OK)
            printf("%s stored and gossiped: %s\n", cmd, j);
        free(j);
    }
    free(doc);
    return rc;
}

static const char s_amount_usage[] =
    "--datadir D [--to ID] AMOUNT [--json]\n"
    "\n"
    "  transfer --datadir D --to ID AMOUNT   send credits to account ID\n"
    "  stake    --datadir D AMOUNT           stake free credits\n"
    "  unstake  --datadir D AMOUNT           release unlocked stake\n"
    "\n"
    "AMOUNT is in credits, up to six decimals (12, 0.5, 0.000001: the\n"
    "ledger counts micro-credits). Ask the node running on D to append an\n"
    "entry to its own chain (credits waiting for it are taken in with the\n"
    "same entry), store it durably and gossip it. Unstake releases only\n"
    "stake not locked as collateral. --to is for transfer only; its ID may\n"
    "be the 10-character short id tables show when it names one known\n"
    "account or peer.\n";

static int s_amount_cmd(const char *cmd, int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        printf("usage: nightshift %s %s", cmd, s_amount_usage);
        return 0;
    }
    s_opts_t o;
    int rc = s_parse(cmd, argc, argv, &o);
    if (rc)
        return rc;
    uint64_t amount;
    if (!o.positional || ns_credits_parse(o.positional, &amount) != NS_OK ||
        amount == 0) {
        ns_cli_error(cmd, "AMOUNT must be a positive number of credits (up "
                          "to six decimals: 12, 0.5, 0.000001)");
        return 2;
    }
    if (strcmp(cmd, "transfer") == 0 && !o.to) {
        ns_cli_error(cmd, "--to ID is required");
        return 2;
    }
    return s_append(cmd, o.datadir, o.to, amount, o.json);
}

int ns_cmd_transfer(int argc, char **argv)
{
    return s_amount_cmd("transfer", argc, argv);
}

int ns_cmd_stake(int argc, char **argv)
{
    return s_amount_cmd("stake", argc, argv);
}

int ns_cmd_unstake(int argc, char **argv)
{
    return s_amount_cmd("unstake", argc, argv);
}
