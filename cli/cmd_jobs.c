/* cmd_jobs.c - `jobs`: the jobs of a running node (those it posts through
 * `submit --node` and those it bids on or runs as a provider), and one
 * job in detail. */
#include "cli.h"
#include "ctl.h"

#include "nightshift/identity.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <ctype.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char s_usage[] =
    "usage: nightshift jobs --datadir D [--json] [--watch] [JOB_ID]\n"
    "\n"
    "List the jobs of the node running on D: those it posts (submit --node;\n"
    "role requester) and those it bids on, runs or serves (role provider),\n"
    "with their phase, the other party (PEER: the provider, or the\n"
    "requester), the price in credits (the settled price, the ceiling\n"
    "before that, or our bid) and the age (a provider's job: time in its\n"
    "phase). JOB_ID (a unique prefix will do) shows one job in detail,\n"
    "with the progress lines and receipt of a hosted job.\n"
    "  --json    the node's document: a list of objects with id, role,\n"
    "            phase, peer, price, age_ms, finished and the rest\n"
    "  --watch   print it again every second until interrupted\n";

typedef struct {
    const char *datadir, *job;
    int json, watch;
} s_opts_t;

/* A field as text ("-" when absent or nil). */
static void s_text(char *out, size_t cap, const msgpack_object *map,
                   const char *key)
{
    const msgpack_object *v = ns_mp_obj_get(map, key);
    if (!v)
        snprintf(out, cap, "-");
    else if (v->type == MSGPACK_OBJECT_STR)
        snprintf(out, cap, "%.*s", (int)v->via.str.size, v->via.str.ptr);
    else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        snprintf(out, cap, "%llu", (unsigned long long)v->via.u64);
    else if (v->type == MSGPACK_OBJECT_FLOAT64 ||
             v->type == MSGPACK_OBJECT_FLOAT32)
        snprintf(out, cap, "%.6f", v->via.f64);
    else if (v->type == MSGPACK_OBJECT_BOOLEAN)
        snprintf(out, cap, "%s", v->via.boolean ? "yes" : "no");
    else
        snprintf(out, cap, "-");
}

static void s_age(char *out, size_t cap, const msgpack_object *j)
{
    const msgpack_object *v = ns_mp_obj_get(j, "age_ms");
    unsigned long long s =
        v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 / 1000 : 0;
    if (s < 120)
        snprintf(out, cap, "%llus", s);
    else if (s < 7200)
        snprintf(out, cap, "%llum", s / 60);
    else
        snprintf(out, cap, "%lluh", s / 3600);
}

/* "12.5" from 12.500000; credits keep up to 6 decimals. */
static void s_price(char *out, size_t cap, const msgpack_object *j)
{
    s_text(out, cap, j, "price");
    if (strchr(out, '.')) {
        size_t n = strlen(out);
        while (n > 1 && out[n - 1] == '0')
            out[--n] = '\0';
        if (out[n - 1] == '.')
            out[n - 1] = '\0';
    }
}

static void s_list(const msgpack_object *d)
{
    static const char *const headers[] = {"JOB",  "ROLE",  "PHASE",
                                          "PEER", "PRICE", "AGE"};
    ns_table_t t;
    ns_table_init(&t, 6, headers);
    for (uint32_t i = 0; i < d->via.array.size; i++) {
        const msgpack_object *j = &d->via.array.ptr[i];
        char id[80], role[16], phase[24], peer[80], price[40], age[24];
        s_text(id, sizeof id, j, "id");
        id[NS_ID_SHORT_LEN] = '\0';
        s_text(role, sizeof role, j, "role");
        s_text(phase, sizeof phase, j, "phase");
        s_text(peer, sizeof peer, j, "peer");
        peer[NS_ID_SHORT_LEN] = '\0';
        s_price(price, sizeof price, j);
        s_age(age, sizeof age, j);
        const char *const row[] = {id, role, phase, peer, price, age};
        ns_table_row(&t, row);
    }
    printf("%u jobs\n", d->via.array.size);
    if (t.nrows)
        ns_table_print(&t, stdout);
    ns_table_release(&t);
}

/* The one job whose id starts with prefix; NULL with a message if none
 * or several. */
static const msgpack_object *s_find(const msgpack_object *d, const char *prefix)
{
    const msgpack_object *hit = NULL;
    size_t n = strlen(prefix);
    for (uint32_t i = 0; i < d->via.array.size; i++) {
        const msgpack_object *id = ns_mp_obj_get(&d->via.array.ptr[i], "id");
        if (!id || id->type != MSGPACK_OBJECT_STR || id->via.str.size < n ||
            strncasecmp(id->via.str.ptr, prefix, n) != 0)
            continue;
        if (hit) {
            ns_cli_error("jobs",
                         "'%s' names more than one job: give more "
                         "of its id",
                         prefix);
            return NULL;
        }
        hit = &d->via.array.ptr[i];
    }
    if (!hit)
        ns_cli_error("jobs", "no job of this node has an id starting '%s'",
                     prefix);
    return hit;
}

/* A hosted job's progress lines and receipt (the "job" request). */
static void s_progress(const char *datadir, const char *hex)
{
    ns_ctl_req_t *r = calloc(1, sizeof *r);
    ns_ctl_job_t *j = calloc(1, sizeof *j);
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512];
    if (!r || !j || ns_unhex(r->job_id, NS_HASH_BYTES, hex) != NS_OK)
        goto out;
    r->kind = NS_CTL_JOB;
    if (ns_ctl_call(datadir, r, &doc, &len, err, sizeof err) != NS_OK ||
        ns_ctl_job_read(doc, len, j) != NS_OK)
        goto out;
    if (j->n_lines)
        printf("progress (last lines):\n");
    for (uint32_t i = 0; i < j->n_lines; i++)
        printf("  %s\n", j->lines[i]);
    if (j->finished) {
        const ns_receipt_t *rc = &j->receipt;
        char price[NS_CREDITS_TEXT], refund[NS_CREDITS_TEXT];
        printf("receipt   %s: price %s, refund %s credits; rounds %u, units "
               "checked %u, slashed %u; match %.1f s, run %.1f s, verify "
               "%.1f s\n",
               ns_rq_phase_name(rc->phase), ns_credits_fmt(price, rc->price),
               ns_credits_fmt(refund, rc->refund), rc->rounds, rc->checked,
               rc->slashed, (double)rc->match_ms / 1000.0,
               (double)rc->run_ms / 1000.0, (double)rc->verify_ms / 1000.0);
        if (rc->error[0])
            printf("error     %s\n", rc->error);
    }
out:
    free(doc);
    free(j);
    free(r);
}

static void s_detail(const s_opts_t *o, const msgpack_object *j)
{
    static const char *const keys[] = {
        "id",     "role",     "phase",  "peer",    "price",
        "age_ms", "finished", "rounds", "checked", "error"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char v[600];
        if (!ns_mp_obj_get(j, keys[i]))
            continue;
        s_text(v, sizeof v, j, keys[i]);
        if (strcmp(keys[i], "error") == 0 && !v[0])
            continue;
        printf("%-9s %s\n", keys[i], v);
    }
    char role[16], id[80];
    s_text(role, sizeof role, j, "role");
    s_text(id, sizeof id, j, "id");
    if (strcmp(role, "requester") == 0)
        s_progress(o->datadir, id);
}

/* Once: the jobs document, listed, or one job of it. */
static int s_once(const s_opts_t *o)
{
    uint8_t *doc = NULL;
    size_t len = 0;
    char err[512], *check = NULL;
    int rc = 0;
    if (ns_ctl_query(o->datadir, "jobs", &doc, &len, err, sizeof err) !=
        NS_OK) {
        ns_cli_error("jobs", "%s", err);
        return 1;
    }
    /* the strict reader first: msgpack-c's unpacker trusts sizes */
    if (ns_mp_to_json(doc, len, &check, 1) != NS_OK) {
        ns_cli_error("jobs", "malformed document from the node");
        free(doc);
        return 1;
    }
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, (const char *)doc, len, NULL) !=
            MSGPACK_UNPACK_SUCCESS ||
        up.data.type != MSGPACK_OBJECT_ARRAY) {
        ns_cli_error("jobs", "malformed document from the node");
        rc = 1;
    } else if (o->job) {
        const msgpack_object *j = s_find(&up.data, o->job);
        if (!j) {
            rc = 1;
        } else if (o->json) {
            msgpack_sbuffer sb;
            msgpack_packer pk;
            msgpack_sbuffer_init(&sb);
            msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *j);
            rc = ns_cli_print_json(sb.data, sb.size);
            msgpack_sbuffer_destroy(&sb);
        } else {
            s_detail(o, j);
        }
    } else if (o->json) {
        printf("%s\n", check);
    } else {
        s_list(&up.data);
    }
    msgpack_unpacked_destroy(&up);
    free(check);
    free(doc);
    return rc;
}

int ns_cmd_jobs(int argc, char **argv)
{
    if (ns_cli_wants_help(argc, argv)) {
        fputs(s_usage, stdout);
        return 0;
    }
    s_opts_t o = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            o.json = 1;
        } else if (strcmp(argv[i], "--watch") == 0) {
            o.watch = 1;
        } else if (strcmp(argv[i], "--datadir") == 0 && i + 1 < argc) {
            o.datadir = argv[++i];
        } else if (argv[i][0] != '-' && !o.job) {
            o.job = argv[i];
        } else {
            ns_cli_error("jobs", "unknown argument '%s' (see --help)", argv[i]);
            return 2;
        }
    }
    int status = ns_cli_datadir("jobs", &o.datadir, 0);
    if (status)
        return status;
    for (size_t i = 0; o.job && o.job[i]; i++)
        if (!isxdigit((unsigned char)o.job[i])) {
            ns_cli_error("jobs", "'%s' is not a job id (hex)", o.job);
            return 2;
        }
    if (!o.watch)
        return s_once(&o);
    bool tty = isatty(STDOUT_FILENO);
    for (;;) { /* until interrupted, or the node goes away */
        if (tty)
            fputs("\033[H\033[2J", stdout); /* home, clear */
        int rc = s_once(&o);
        if (!tty)
            putchar('\n');
        fflush(stdout);
        if (rc)
            return rc;
        sleep(1);
    }
}
