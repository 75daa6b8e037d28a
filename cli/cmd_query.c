/* cmd_query.c - `id`, `peers`, `status`: read-only views of a datadir and
 * of the node running on it. */
#include "cli.h"
#include "ctl.h"

#include "nightshift/config.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"
#include "nightshift/verified.h"

#include <limits.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *datadir;
    int json;
} s_query_opts_t;

static int s_parse(const char *cmd, int argc, char **argv, s_query_opts_t *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            o->json = 1;
        } else if (strcmp(argv[i], "--datadir") == 0 && i + 1 < argc) {
            o->datadir = argv[++i];
        } else {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", argv[i]);
            return 2;
        }
    }
    return ns_cli_datadir(cmd, &o->datadir, 0);
}

/* ---- reading our own node's documents (msgpack-c object API) ---------- */

static unsigned long long s_u(const msgpack_object *map, const char *key)
{
    const msgpack_object *v = ns_mp_obj_get(map, key);
    return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : 0;
}

/* A number, float or integer (amounts in credits are floats). */
static double s_f(const msgpack_object *map, const char *key)
{
    const msgpack_object *v = ns_mp_obj_get(map, key);
    if (!v)
        return 0;
    if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
        return v->via.f64;
    return v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)v->via.u64 : 0;
}

/* An amount in credits (a float in the document) as ns_credits_fmt
 * writes it: "5000000", not "5e+06". */
static char *s_credits(char out[NS_CREDITS_TEXT], const msgpack_object *map,
                       const char *key)
{
    double v = s_f(map, key);
    return ns_credits_fmt(out, v > 0 ? (uint64_t)(v * 1e6 + 0.5) : 0);
}

static void s_s(char *out, size_t cap, const msgpack_object *map,
                const char *key)
{
    const msgpack_object *v = ns_mp_obj_get(map, key);
    if (v && v->type == MSGPACK_OBJECT_STR)
        snprintf(out, cap, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    else
        snprintf(out, cap, "-");
}

/* Query, then print JSON or hand the unpacked document to render(). */
static int s_run(const char *cmd, const char *query, const s_query_opts_t *o,
                 void (*render)(const msgpack_object *doc))
{
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512];
    if (ns_ctl_query(o->datadir, query, &doc, &len, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    int rc = 0;
    if (o->json) {
        rc = ns_cli_print_json(doc, len);
    } else {
        /* Validate with the strict reader first: msgpack-c's unpacker
         * trusts container sizes. */
        char *check = NULL;
        if (ns_mp_to_json(doc, len, &check, 0) != NS_OK) {
            ns_cli_error(cmd, "malformed document from the node");
            free(doc);
            return 1;
        }
        free(check);
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, (const char *)doc, len, NULL) ==
            MSGPACK_UNPACK_SUCCESS)
            render(&up.data);
        else
            rc = 1;
        msgpack_unpacked_destroy(&up);
    }
    free(doc);
    return rc;
}

/* ---- status ------------------------------------------------------------ */

static void s_render_status(const msgpack_object *d)
{
    char id[80], addr[NS_ADDR_MAX], net[80], netid[80], ver[40];
    s_s(id, sizeof id, d, "id");
    s_s(addr, sizeof addr, d, "address");
    s_s(net, sizeof net, d, "network");
    s_s(netid, sizeof netid, d, "network_id");
    s_s(ver, sizeof ver, d, "version");
    const msgpack_object *m = ns_mp_obj_get(d, "messages");
    const msgpack_object *dr = ns_mp_obj_get(d, "dropped");
    printf("node      %s (pid %llu, nightshift %s)\n", id, s_u(d, "pid"), ver);
    printf("address   %s\n", addr);
    printf("network   %s (%.16s)\n", net, netid);
    printf("uptime    %.1f s\n", (double)s_u(d, "uptime_ms") / 1000.0);
    printf("peers     %llu live, %llu connecting\n", s_u(d, "peers"),
           s_u(d, "peers_connecting"));
    printf("messages  rx %llu (%llu bytes), tx %llu (%llu bytes), accepted "
           "%llu, duplicates %llu, forwarded %llu\n",
           s_u(m, "rx"), s_u(m, "rx_bytes"), s_u(m, "tx"), s_u(m, "tx_bytes"),
           s_u(m, "accepted"), s_u(m, "duplicates"), s_u(m, "forwarded"));
    printf("dropped   %llu", s_u(dr, "total"));
    if (dr && dr->type == MSGPACK_OBJECT_MAP)
        for (uint32_t i = 0; i < dr->via.map.size; i++) {
            const msgpack_object_kv *kv = &dr->via.map.ptr[i];
            if (kv->key.type != MSGPACK_OBJECT_STR ||
                kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                kv->val.via.u64 == 0 ||
                (kv->key.via.str.size == 5 &&
                 memcmp(kv->key.via.str.ptr, "total", 5) == 0))
                continue;
            printf(" %.*s=%llu", (int)kv->key.via.str.size, kv->key.via.str.ptr,
                   (unsigned long long)kv->val.via.u64);
        }
    printf("\n");
    const msgpack_object *l = ns_mp_obj_get(d, "ledger");
    if (l && l->type == MSGPACK_OBJECT_MAP) {
        char digest[80];
        s_s(digest, sizeof digest, l, "digest");
        char total[NS_CREDITS_TEXT], burned[NS_CREDITS_TEXT];
        printf("ledger    %llu entries, %llu accounts, total %s credits, "
               "burned %s, digest %.16s\n",
               s_u(l, "entries"), s_u(l, "accounts"),
               s_credits(total, l, "total"), s_credits(burned, l, "burned"),
               digest);
        const msgpack_object *se = ns_mp_obj_get(l, "storage_error");
        if (se && se->type == MSGPACK_OBJECT_MAP) {
            char detail[160];
            s_s(detail, sizeof detail, se, "detail");
            printf("storage   CANNOT WRITE: %s (no new work until it can; "
                   "retried every second)\n",
                   detail);
        }
    }
    const msgpack_object *p = ns_mp_obj_get(d, "provider");
    if (p && p->type == MSGPACK_OBJECT_MAP)
        printf("provider  %llu busy, %llu bids, %llu awards, %llu results, "
               "%llu failed, %llu stopped\n",
               s_u(p, "busy"), s_u(p, "bids"), s_u(p, "awards"),
               s_u(p, "results"), s_u(p, "failed"), s_u(p, "stopped"));
    const msgpack_object *nb = p && p->type == MSGPACK_OBJECT_MAP
                                   ? ns_mp_obj_get(p, "not_bidding")
                                   : NULL;
    if (nb && nb->type == MSGPACK_OBJECT_STR)
        printf("bidding   NO: %.*s\n", (int)nb->via.str.size, nb->via.str.ptr);
}

static const char s_status_usage[] =
    "usage: nightshift status --datadir D [--json]\n"
    "\n"
    "Ask the node running on D for its state: identity, network, uptime,\n"
    "peer count, message counters and every drop reason "
    "(dropped.<reason>).\n";

int ns_cmd_status(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_status_usage, stdout);
        return 0;
    }
    s_query_opts_t o;
    int rc = s_parse("status", argc, argv, &o);
    return rc ? rc : s_run("status", "status", &o, s_render_status);
}

/* ---- peers -----------------------------------------------------------------
 */

/* This datadir's hardware-challenge verdicts, for the CHALLENGE column. */
static ns_verified_t *s_peers_verified;

static void s_render_peers(const msgpack_object *d)
{
    static const char *const headers[] = {
        "ID",       "ROLE",  "ENDPOINT", "SEEN",      "REGION", "PRICE CR/H",
        "STAKE CR", "SLOTS", "DEVICES",  "CHALLENGE", "VERSION"};
    ns_table_t t;
    ns_table_init(&t, 11, headers);
    if (d->type != MSGPACK_OBJECT_ARRAY)
        return;
    for (uint32_t i = 0; i < d->via.array.size; i++) {
        const msgpack_object *p = &d->via.array.ptr[i];
        char id[80], ep[NS_ENDPOINT_MAX], seen[32], region[40], price[32],
            stake[32], slots[16], devs[160], ver[40];
        s_s(id, sizeof id, p, "id");
        uint8_t pk[NS_ID_BYTES];
        const char *chal =
            ns_id_parse(id, pk) == NS_OK
                ? ns_verified_name(ns_verified_get(s_peers_verified, pk, NULL))
                : "-";
        id[NS_ID_SHORT_LEN] = '\0';
        s_s(ep, sizeof ep, p, "endpoint");
        snprintf(seen, sizeof seen, "%.1fs ago",
                 (double)s_u(p, "last_seen_ms") / 1000.0);
        s_s(region, sizeof region, p, "region");
        /* price: micro-credits per device-second, shown per hour */
        char amount[NS_CREDITS_TEXT];
        snprintf(price, sizeof price, "%s",
                 ns_credits_fmt(amount, s_u(p, "price") * 3600));
        snprintf(stake, sizeof stake, "%s", s_credits(amount, p, "stake"));
        snprintf(slots, sizeof slots, "%llu", s_u(p, "free_slots"));
        s_s(ver, sizeof ver, p, "version");
        devs[0] = '\0';
        const msgpack_object *dl = ns_mp_obj_get(p, "devices");
        if (dl && dl->type == MSGPACK_OBJECT_ARRAY) {
            for (uint32_t k = 0; k < dl->via.array.size; k++) {
                char type[16];
                s_s(type, sizeof type, &dl->via.array.ptr[k], "type");
                size_t used = strlen(devs);
                snprintf(devs + used, sizeof devs - used, "%s%s", k ? "," : "",
                         type);
            }
        }
        char role[16];
        s_s(role, sizeof role, p, "role");
        if (!devs[0]) {
            /* A requester offers nothing: no price, no slots. */
            snprintf(devs, sizeof devs, "none");
            snprintf(role, sizeof role, "requester");
            snprintf(price, sizeof price, "-");
            snprintf(slots, sizeof slots, "-");
        }
        const char *const row[] = {id,    role,  ep,   seen, region, price,
                                   stake, slots, devs, chal, ver};
        ns_table_row(&t, row);
    }
    printf("%u peers\n", d->via.array.size);
    if (t.nrows)
        ns_table_print(&t, stdout);
    ns_table_release(&t);
}

static const char s_peers_usage[] =
    "usage: nightshift peers --datadir D [--json]\n"
    "\n"
    "List the live peers of the node running on D: id, role (provider, or\n"
    "requester: a light peer or a node with no devices, shown with no\n"
    "price or slots), endpoint, time since\n"
    "its last heartbeat, region, price (credits per device-hour; --json:\n"
    "micro-credits per device-second), stake (credits), free slots, devices, "
    "and how the peer did in a hardware\n"
    "challenge of this datadir (passed, failed, - for never). --json\n"
    "gives a list of objects with id,\n"
    "endpoint, last_seen_ms, devices and the rest.\n";

int ns_cmd_peers(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_peers_usage, stdout);
        return 0;
    }
    s_query_opts_t o;
    int rc = s_parse("peers", argc, argv, &o);
    if (rc)
        return rc;
    char path[4200];
    snprintf(path, sizeof path, "%s/verified", o.datadir);
    s_peers_verified = ns_verified_open(path);
    rc = s_run("peers", "peers", &o, s_render_peers);
    ns_verified_close(&s_peers_verified);
    return rc;
}

/* ---- id -------------------------------------------------------------------
 */

static const char s_id_usage[] =
    "usage: nightshift id --datadir D [--json]\n"
    "\n"
    "Print the node id of datadir D and its address (ID@ENDPOINT) for\n"
    "--bootstrap. The address is the running node's (D/node.addr) when it\n"
    "has started, else the configured advertise endpoint, else the listen\n"
    "one; a note on stderr says when it is 0.0.0.0 (not dialable).\n";

int ns_cmd_id(int argc, char **argv)
{
    const char *cmd = "id";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_id_usage, stdout);
        return 0;
    }
    s_query_opts_t o;
    int rc = s_parse(cmd, argc, argv, &o);
    if (rc)
        return rc;
    char path[PATH_MAX], err[256];
    ns_identity_t *id = NULL;
    if (ns_path_join(path, sizeof path, o.datadir, "node.key") != NS_OK)
        return 1;
    rc = ns_identity_load(path, &id);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "cannot load %s: %s", path, ns_strerror(rc));
        return 1;
    }
    char idtext[NS_ID_TEXT_LEN + 1], addr[NS_ADDR_MAX] = "";
    ns_id_text(idtext, ns_identity_pk(id));
    ns_identity_destroy(&id);

    /* The running node's address if it wrote one for this key. */
    uint8_t *text = NULL;
    size_t len = 0;
    if (ns_path_join(path, sizeof path, o.datadir, "node.addr") == NS_OK &&
        ns_file_read(path, NS_ADDR_MAX, &text, &len) == NS_OK) {
        uint8_t pk[NS_ID_BYTES], mine[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        text[strcspn((char *)text, "\n")] = '\0';
        if (ns_addr_parse((char *)text, pk, ep) == NS_OK &&
            ns_id_parse(idtext, mine) == NS_OK &&
            memcmp(pk, mine, NS_ID_BYTES) == 0)
            snprintf(addr, sizeof addr, "%s", (char *)text);
        free(text);
    }
    ns_config_t cfg;
    ns_config_defaults(&cfg);
    if (ns_path_join(path, sizeof path, o.datadir, "config.ini") == NS_OK &&
        access(path, F_OK) == 0 &&
        ns_config_load(&cfg, path, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    char configured[NS_ADDR_MAX];
    const char *note =
        ns_cli_address(&cfg, idtext, configured, sizeof configured);
    if (!addr[0])
        snprintf(addr, sizeof addr, "%s", configured);
    else if (cfg.reachable == NS_REACH_NO ||
             (!cfg.advertise[0] && strstr(addr, "@tcp://0.0.0.0:")))
        note = ns_cli_address(&cfg, idtext, configured, sizeof configured);
    else
        note = NULL;
    if (o.json) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, note ? 3 : 2);
        ns_mp_str(&pk, "id");
        ns_mp_str(&pk, idtext);
        ns_mp_str(&pk, "address");
        ns_mp_str(&pk, addr);
        if (note) {
            ns_mp_str(&pk, "note");
            ns_mp_str(&pk, note);
        }
        rc = ns_cli_print_json(sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return rc;
    }
    printf("%s\n%s\n", idtext, addr);
    if (note)
        fprintf(stderr, "note: %s\n", note);
    return 0;
}

/* ---- connect / block ------------------------------------------------------
 */

static int s_send_cmd(const char *cmd, const char *datadir,
                      const ns_ctl_req_t *req)
{
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512];
    if (ns_ctl_call(datadir, req, &doc, &len, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return 1;
    }
    char *json = NULL;
    if (ns_mp_to_json(doc, len, &json, 0) == NS_OK)
        printf("%s\n", json);
    free(json);
    free(doc);
    return 0;
}

static const char s_connect_usage[] =
    "usage: nightshift connect --datadir D ID@tcp://HOST:PORT\n"
    "\n"
    "Ask the node running on D to dial a peer now (it then learns the rest\n"
    "of that network by peer exchange).\n";

int ns_cmd_connect(int argc, char **argv)
{
    const char *cmd = "connect";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_connect_usage, stdout);
        return 0;
    }
    const char *datadir = NULL, *addr = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--datadir") == 0 && i + 1 < argc)
            datadir = argv[++i];
        else if (!addr && argv[i][0] != '-')
            addr = argv[i];
        else {
            ns_cli_error(cmd, "expected --datadir D ADDRESS (see --help)");
            return 2;
        }
    }
    if (!addr) {
        ns_cli_error(cmd, "expected --datadir D ADDRESS (see --help)");
        return 2;
    }
    uint8_t pk[NS_ID_BYTES];
    char ep[NS_ENDPOINT_MAX];
    if (ns_addr_parse(addr, pk, ep) != NS_OK) {
        ns_cli_error(cmd, "bad address '%s': expected ID@tcp://HOST:PORT",
                     addr);
        return 2;
    }
    int rc = ns_cli_datadir(cmd, &datadir, 0);
    if (rc)
        return rc;
    ns_ctl_req_t req;
    memset(&req, 0, sizeof req);
    req.kind = NS_CTL_CONNECT;
    snprintf(req.addr, sizeof req.addr, "%s", addr);
    return s_send_cmd(cmd, datadir, &req);
}

static const char s_block_usage[] =
    "usage: nightshift block --datadir D ID [--ms MILLISECONDS]\n"
    "\n"
    "Test networks only: the node running on D cuts all traffic with peer\n"
    "ID for the given time (default 10000 ms), as if the network between\n"
    "them were partitioned.\n";

int ns_cmd_block(int argc, char **argv)
{
    const char *cmd = "block";
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_block_usage, stdout);
        return 0;
    }
    const char *datadir = NULL, *idtext = NULL;
    uint64_t ms = 10000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--datadir") == 0 && i + 1 < argc)
            datadir = argv[++i];
        else if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) {
            if (ns_parse_u64(argv[++i], &ms) != NS_OK) {
                ns_cli_error(cmd, "bad --ms '%s'", argv[i]);
                return 2;
            }
        } else if (!idtext && argv[i][0] != '-')
            idtext = argv[i];
        else {
            ns_cli_error(cmd, "unknown argument '%s' (see --help)", argv[i]);
            return 2;
        }
    }
    uint8_t id[NS_ID_BYTES];
    if (!idtext) {
        ns_cli_error(cmd, "expected --datadir D ID (see --help)");
        return 2;
    }
    int rc = ns_cli_datadir(cmd, &datadir, 0);
    if (rc || (rc = ns_cli_resolve_id(cmd, datadir, "ID", idtext, id)) != 0)
        return rc;
    ns_ctl_req_t req;
    memset(&req, 0, sizeof req);
    req.kind = NS_CTL_BLOCK;
    memcpy(req.peer, id, NS_ID_BYTES);
    req.ms = ms;
    return s_send_cmd(cmd, datadir, &req);
}
