#include "nightshift/config.h"
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ns_config_defaults(ns_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->listen, sizeof cfg->listen, "%s", NS_DEFAULT_LISTEN);
    cfg->heartbeat_interval_ms = 5000;
    cfg->heartbeat_peers = 16;
    cfg->fanout = 4;
    cfg->max_peers = 64;
    cfg->pull_interval_ms = 2000;
    cfg->seen_ttl_ms = 120000;
    cfg->max_msg_age_ms = 60000;
    cfg->max_msg_future_ms = 10000;
    cfg->rate_msgs_per_s = 500;
    cfg->rate_burst = 1000;
    snprintf(cfg->region, sizeof cfg->region, "local");
    cfg->price = 1000;
    cfg->stake = 0;
    cfg->slots = 1;
    /* Relaying is how two nodes behind routers meet: on by default, and
     * it applies only while this node can be dialled (p2p/relay.c). */
    cfg->relay = true;
    cfg->ledger_map_bytes = NS_DEFAULT_LEDGER_MAP_BYTES;
    cfg->blob_cache_bytes = UINT64_C(1) << 30;
    cfg->log_level = NS_LOG_INFO;
    cfg->jobs_retention_days = 7;
    cfg->jobs_max_bytes = UINT64_C(2) << 30;
}

const ns_config_key_t ns_config_keys[] = {
    {"node", "listen", "bind endpoint (port 0: any free port)"},
    {"node", "advertise", "endpoint told to peers (empty: the bound one)"},
    {"node", "bootstrap", "peers to join through, ID@tcp://HOST:PORT"},
    {"node", "reachable",
     "yes|no|auto: can peers dial this node (no: behind NAT, dials out only)"},
    {"node", "relay", "on|off: relay for peers that cannot be dialled"},
    {"node", "heartbeat_interval_ms", "how often the node announces itself"},
    {"node", "heartbeat_peers",
     "peers at that interval; it doubles as they double beyond (0: fixed)"},
    {"node", "fanout", "gossip mesh degree D: eager-push peers"},
    {"node", "max_peers", "cap on the peer table"},
    {"node", "pull_interval_ms", "anti-entropy period"},
    {"node", "seen_ttl_ms", "how long message ids are remembered"},
    {"node", "max_msg_age_ms", "older message timestamps are stale"},
    {"node", "max_msg_future_ms", "clock skew allowed ahead of us"},
    {"node", "rate_msgs_per_s", "per-link message rate"},
    {"node", "rate_burst", "per-link burst"},
    {"node", "http", "HOST:PORT of /metrics and the status page (empty: off)"},
    {"node", "http_public", "serve node.http on a non-loopback host"},
    {"node", "region", "region offered to requesters"},
    {"node", "price", "micro-credits per device-second"},
    {"node", "stake", "credits kept staked"},
    {"node", "slots", "concurrent jobs offered (0: requester only)"},
    {"node", "load_price_pct", "price rises this % per busy slot"},
    {"node", "input_cache_bytes", "job inputs kept, bytes"},
    {"ledger", "map_size", "LMDB map: the most the ledger holds, bytes"},
    {"log", "level", "error|warn|info|debug"},
    {"log", "debug", "modules with debug lines (net,peers,gossip,...)"},
    {"log", "file",
     "append lines to this file, reopened on SIGHUP (empty: "
     "stderr)"},
    {"jobs", "retention_days",
     "settled/cancelled jobs' directories kept this many days"},
    {"jobs", "max_bytes", "settled/cancelled jobs kept under this, bytes"},
};
const size_t ns_config_n_keys = sizeof ns_config_keys / sizeof *ns_config_keys;

int ns_config_get(const ns_config_t *cfg, const char *section, const char *key,
                  char *out, size_t cap)
{
    static const char *const lv[] = {"error", "warn", "info", "debug"};
    char credits[NS_CREDITS_TEXT];
    unsigned long long u = 0;
    const char *s = NULL;
    bool is_num = true;
#define KEY(sec, k) (strcmp(section, sec) == 0 && strcmp(key, k) == 0)
#define NUM(sec, k, field) else if (KEY(sec, k)) u = cfg->field
    if (KEY("node", "listen"))
        s = cfg->listen;
    else if (KEY("node", "advertise"))
        s = cfg->advertise;
    else if (KEY("node", "region"))
        s = cfg->region;
    else if (KEY("node", "stake"))
        s = ns_credits_fmt(credits, cfg->stake);
    else if (KEY("log", "level"))
        s = cfg->log_level <= NS_LOG_DEBUG ? lv[cfg->log_level] : "?";
    else if (KEY("log", "debug"))
        s = cfg->log_debug;
    else if (KEY("log", "file"))
        s = cfg->log_file;
    else if (KEY("node", "http"))
        s = cfg->http;
    else if (KEY("node", "http_public"))
        s = cfg->http_public ? "true" : "false";
    else if (KEY("node", "reachable"))
        s = cfg->reachable == NS_REACH_NO     ? "no"
            : cfg->reachable == NS_REACH_AUTO ? "auto"
                                              : "yes";
    else if (KEY("node", "relay"))
        s = cfg->relay ? "on" : "off";
    else if (KEY("node", "bootstrap")) {
        size_t n = 0;
        if (cap)
            out[0] = '\0';
        for (uint32_t i = 0; i < cfg->n_bootstrap; i++) {
            int w = snprintf(out + n, cap - n, "%s%s", i ? " " : "",
                             cfg->bootstrap[i]);
            if (w < 0 || (size_t)w >= cap - n)
                return NS_ERR_TOOBIG;
            n += (size_t)w;
        }
        return NS_OK;
    }
    NUM("node", "heartbeat_interval_ms", heartbeat_interval_ms);
    NUM("node", "heartbeat_peers", heartbeat_peers);
    NUM("node", "fanout", fanout);
    NUM("node", "max_peers", max_peers);
    NUM("node", "pull_interval_ms", pull_interval_ms);
    NUM("node", "seen_ttl_ms", seen_ttl_ms);
    NUM("node", "max_msg_age_ms", max_msg_age_ms);
    NUM("node", "max_msg_future_ms", max_msg_future_ms);
    NUM("node", "rate_msgs_per_s", rate_msgs_per_s);
    NUM("node", "rate_burst", rate_burst);
    NUM("node", "price", price);
    NUM("node", "slots", slots);
    NUM("node", "load_price_pct", load_price_pct);
    NUM("node", "input_cache_bytes", blob_cache_bytes);
    NUM("ledger", "map_size", ledger_map_bytes);
    NUM("jobs", "retention_days", jobs_retention_days);
    NUM("jobs", "max_bytes", jobs_max_bytes);
    else return NS_ERR_NOTFOUND;
#undef NUM
#undef KEY
    if (s)
        is_num = false;
    int w =
        is_num ? snprintf(out, cap, "%llu", u) : snprintf(out, cap, "%s", s);
    return w >= 0 && (size_t)w < cap ? NS_OK : NS_ERR_TOOBIG;
}

static int s_u32(const char *v, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t x;
    if (ns_parse_u64(v, &x) != NS_OK || x < lo || x > hi)
        return NS_ERR_CONFIG;
    *out = (uint32_t)x;
    return NS_OK;
}

int ns_config_set(ns_config_t *cfg, const char *section, const char *key,
                  const char *value, char *err, size_t errlen)
{
    int rc = NS_OK;
    char scratch[1];
    if (!err) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
#define KEY(s, k) (strcmp(section, s) == 0 && strcmp(key, k) == 0)
    if (KEY("node", "listen")) {
        if (ns_endpoint_check(value, 1) != NS_OK)
            rc = NS_ERR_CONFIG;
        else
            snprintf(cfg->listen, sizeof cfg->listen, "%s", value);
    } else if (KEY("node", "advertise")) {
        if (ns_endpoint_check(value, 0) != NS_OK)
            rc = NS_ERR_CONFIG;
        else
            snprintf(cfg->advertise, sizeof cfg->advertise, "%s", value);
    } else if (KEY("node", "bootstrap")) {
        uint8_t pk[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        if (ns_addr_parse(value, pk, ep) != NS_OK) {
            rc = NS_ERR_CONFIG;
        } else if (cfg->n_bootstrap >= NS_MAX_BOOTSTRAP) {
            snprintf(err, errlen, "more than %d bootstrap peers",
                     NS_MAX_BOOTSTRAP);
            return NS_ERR_CONFIG;
        } else {
            snprintf(cfg->bootstrap[cfg->n_bootstrap++], NS_ADDR_MAX, "%s",
                     value);
        }
    } else if (KEY("node", "heartbeat_interval_ms")) {
        rc = s_u32(value, NS_MIN_HB_INTERVAL_MS, NS_MAX_HB_INTERVAL_MS,
                   &cfg->heartbeat_interval_ms);
    } else if (KEY("node", "heartbeat_peers")) {
        rc = s_u32(value, 0, 1024, &cfg->heartbeat_peers);
    } else if (KEY("node", "fanout")) {
        rc = s_u32(value, 1, 64, &cfg->fanout);
    } else if (KEY("node", "max_peers")) {
        rc = s_u32(value, 1, 1024, &cfg->max_peers);
    } else if (KEY("node", "pull_interval_ms")) {
        rc = s_u32(value, 100, 3600000, &cfg->pull_interval_ms);
    } else if (KEY("node", "seen_ttl_ms")) {
        rc = s_u32(value, 1000, 3600000, &cfg->seen_ttl_ms);
    } else if (KEY("node", "max_msg_age_ms")) {
        rc = s_u32(value, 1000, 3600000, &cfg->max_msg_age_ms);
    } else if (KEY("node", "max_msg_future_ms")) {
        rc = s_u32(value, 0, 3600000, &cfg->max_msg_future_ms);
    } else if (KEY("node", "rate_msgs_per_s")) {
        rc = s_u32(value, 1, 1000000, &cfg->rate_msgs_per_s);
    } else if (KEY("node", "rate_burst")) {
        rc = s_u32(value, 1, 1000000, &cfg->rate_burst);
    } else if (KEY("node", "http")) {
        /* HOST:PORT (IPv4) for /metrics and the status page, "" = off;
         * the node refuses a non-loopback host without http_public */
        const char *colon = strrchr(value, ':');
        size_t n = strlen(value);
        uint64_t port = 65536;
        if (n &&
            (n >= sizeof cfg->http || !colon || colon == value ||
             strspn(value, "0123456789.:abcdefghijklmnopqrstuvwxyz") != n ||
             ns_parse_u64(colon + 1, &port) != NS_OK || port > 65535))
            rc = NS_ERR_CONFIG;
        else
            snprintf(cfg->http, sizeof cfg->http, "%s", value);
    } else if (KEY("node", "http_public")) {
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
            cfg->http_public = true;
        else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
            cfg->http_public = false;
        else
            rc = NS_ERR_CONFIG;
    } else if (KEY("node", "reachable")) {
        if (strcmp(value, "yes") == 0)
            cfg->reachable = NS_REACH_YES;
        else if (strcmp(value, "no") == 0)
            cfg->reachable = NS_REACH_NO;
        else if (strcmp(value, "auto") == 0)
            cfg->reachable = NS_REACH_AUTO;
        else
            rc = NS_ERR_CONFIG;
    } else if (KEY("node", "relay")) {
        if (strcmp(value, "on") == 0 || strcmp(value, "true") == 0)
            cfg->relay = true;
        else if (strcmp(value, "off") == 0 || strcmp(value, "false") == 0)
            cfg->relay = false;
        else
            rc = NS_ERR_CONFIG;
    } else if (KEY("node", "region")) {
        size_t n = strlen(value);
        /* No ';' either: ns_config_write puts "region = " before it, and
         * inih reads a ';' after a space as a comment, so a region ";x"
         * (from "region=;x" or `init --set node.region=;x`) would be
         * written as a config.ini that fails to load. */
        if (n == 0 || n > NS_MAX_REGION || strpbrk(value, " \t\"=;"))
            rc = NS_ERR_CONFIG;
        else
            snprintf(cfg->region, sizeof cfg->region, "%s", value);
    } else if (KEY("node", "price")) {
        rc = ns_parse_u64(value, &cfg->price) == NS_OK ? NS_OK : NS_ERR_CONFIG;
    } else if (KEY("node", "stake")) {
        rc = ns_credits_parse(value, &cfg->stake) == NS_OK ? NS_OK
                                                           : NS_ERR_CONFIG;
    } else if (KEY("node", "slots")) {
        rc = s_u32(value, 0, 1024, &cfg->slots);
    } else if (KEY("node", "load_price_pct")) {
        rc = s_u32(value, 0, 10000, &cfg->load_price_pct);
    } else if (KEY("node", "input_cache_bytes")) {
        uint64_t v = 0;
        rc = ns_parse_u64(value, &v) == NS_OK && v >= (UINT64_C(1) << 20)
                 ? NS_OK
                 : NS_ERR_CONFIG;
        if (rc == NS_OK)
            cfg->blob_cache_bytes = v;
    } else if (KEY("ledger", "map_size")) {
        uint64_t v = 0;
        rc = ns_parse_u64(value, &v) == NS_OK && v >= (UINT64_C(1) << 20) &&
                     v <= (UINT64_C(1) << 40)
                 ? NS_OK
                 : NS_ERR_CONFIG;
        if (rc == NS_OK)
            cfg->ledger_map_bytes = v;
    } else if (KEY("jobs", "retention_days")) {
        rc = s_u32(value, 0, 36500, &cfg->jobs_retention_days);
    } else if (KEY("jobs", "max_bytes")) {
        rc = ns_parse_u64(value, &cfg->jobs_max_bytes) == NS_OK ? NS_OK
                                                                : NS_ERR_CONFIG;
    } else if (KEY("log", "level")) {
        rc = ns_log_parse_level(value, &cfg->log_level) == NS_OK
                 ? NS_OK
                 : NS_ERR_CONFIG;
    } else if (KEY("log", "file")) {
        /* a path; no control characters (one line in config.ini) and no
         * ';' (a comment there) */
        size_t n = strlen(value);
        bool ok = n < sizeof cfg->log_file && !strchr(value, ';');
        for (size_t i = 0; ok && i < n; i++)
            ok = (unsigned char)value[i] >= 0x20 && value[i] != 0x7f;
        if (!ok)
            rc = NS_ERR_CONFIG;
        else
            snprintf(cfg->log_file, sizeof cfg->log_file, "%s", value);
    } else if (KEY("log", "debug")) {
        uint32_t saved = ns_log_debug_mask;
        if (strlen(value) >= sizeof cfg->log_debug ||
            ns_log_set_debug(value) != NS_OK)
            rc = NS_ERR_CONFIG;
        ns_log_debug_mask = saved; /* only validated here; applied later */
        if (rc == NS_OK)
            snprintf(cfg->log_debug, sizeof cfg->log_debug, "%s", value);
    } else {
        snprintf(err, errlen, "unknown setting [%s] %s", section, key);
        return NS_ERR_CONFIG;
    }
#undef KEY
    if (rc != NS_OK)
        snprintf(err, errlen, "bad value for [%s] %s: '%s'", section, key,
                 value);
    return rc;
}

typedef struct {
    ns_config_t *cfg;
    char *err;
    size_t errlen;
} s_ini_ctx_t;

static int s_ini_handler(void *user, const char *section, const char *name,
                         const char *value)
{
    s_ini_ctx_t *ctx = user;
    /* inih goes on after an error and reports the first line: keep the
     * first reason too. */
    bool first = ctx->err[0] == '\0';
    return ns_config_set(ctx->cfg, section, name, value,
                         first ? ctx->err : NULL,
                         first ? ctx->errlen : 0) == NS_OK;
}

int ns_config_load(ns_config_t *cfg, const char *path, char *err, size_t errlen)
{
    uint8_t *text = NULL;
    size_t len = 0;
    char why[256] = "";
    int rc = ns_file_read(path, 64 * 1024, &text, &len);
    if (rc != NS_OK) {
        snprintf(err, errlen, "%s: %s", path, ns_strerror(rc));
        return rc;
    }
    s_ini_ctx_t ctx = {cfg, why, sizeof why};
    int line = ini_parse_string((const char *)text, s_ini_handler, &ctx);
    free(text);
    if (line != 0) {
        snprintf(err, errlen, "%s:%d: %s", path, line,
                 why[0] ? why : "syntax error");
        return NS_ERR_CONFIG;
    }
    return NS_OK;
}

int ns_config_write(const ns_config_t *cfg, const char *path)
{
    ns_config_t def;
    ns_config_defaults(&def);
    char text[8192];
    size_t n = 0;
#define PUT(...)                                                               \
    do {                                                                       \
        int w_ = snprintf(text + n, sizeof text - n, __VA_ARGS__);             \
        if (w_ < 0 || (size_t)w_ >= sizeof text - n)                           \
            return NS_ERR_TOOBIG;                                              \
        n += (size_t)w_;                                                       \
    } while (0)
#define PUT_U(field)                                                           \
    do {                                                                       \
        if (cfg->field != def.field)                                           \
            PUT(#field " = %llu\n", (unsigned long long)cfg->field);           \
    } while (0)
    PUT("; nightshift node settings; flags given to `nightshift node` win.\n");
    PUT("[node]\nlisten = %s\n", cfg->listen);
    if (cfg->advertise[0])
        PUT("advertise = %s\n", cfg->advertise);
    for (uint32_t i = 0; i < cfg->n_bootstrap; i++)
        PUT("bootstrap = %s\n", cfg->bootstrap[i]);
    PUT_U(heartbeat_interval_ms);
    PUT_U(heartbeat_peers);
    PUT_U(fanout);
    PUT_U(max_peers);
    PUT_U(pull_interval_ms);
    PUT_U(seen_ttl_ms);
    PUT_U(max_msg_age_ms);
    PUT_U(max_msg_future_ms);
    PUT_U(rate_msgs_per_s);
    PUT_U(rate_burst);
    PUT_U(price);
    if (cfg->stake != def.stake) {
        char stake[NS_CREDITS_TEXT];
        PUT("stake = %s\n", ns_credits_fmt(stake, cfg->stake));
    }
    PUT_U(slots);
    PUT_U(load_price_pct);
    if (cfg->blob_cache_bytes != def.blob_cache_bytes)
        PUT("input_cache_bytes = %llu\n",
            (unsigned long long)cfg->blob_cache_bytes);
    PUT("region = %s\n", cfg->region);
    if (cfg->http[0])
        PUT("http = %s\n", cfg->http);
    if (cfg->http_public)
        PUT("http_public = true\n");
    if (cfg->reachable == NS_REACH_NO)
        PUT("reachable = no\n");
    else if (cfg->reachable == NS_REACH_AUTO)
        PUT("reachable = auto\n");
    if (!cfg->relay)
        PUT("relay = off\n");
    if (cfg->ledger_map_bytes != def.ledger_map_bytes)
        PUT("[ledger]\nmap_size = %llu\n",
            (unsigned long long)cfg->ledger_map_bytes);
    if (cfg->log_level != def.log_level || cfg->log_debug[0] ||
        cfg->log_file[0]) {
        static const char *const lv[] = {"error", "warn", "info", "debug"};
        PUT("[log]\nlevel = %s\n", lv[cfg->log_level]);
        if (cfg->log_debug[0])
            PUT("debug = %s\n", cfg->log_debug);
        if (cfg->log_file[0])
            PUT("file = %s\n", cfg->log_file);
    }
    if (cfg->jobs_retention_days != def.jobs_retention_days ||
        cfg->jobs_max_bytes != def.jobs_max_bytes) {
        PUT("[jobs]\nretention_days = %u\nmax_bytes = %llu\n",
            cfg->jobs_retention_days, (unsigned long long)cfg->jobs_max_bytes);
    }
#undef PUT_U
#undef PUT
    return ns_file_write_atomic(path, text, n, 0644);
}
