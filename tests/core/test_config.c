/* test_config.c - defaults, the INI file, flag overrides and writing the
 * file back. Files go to a fresh mkdtemp directory. */
#include "check.h"

#include "nightshift/config.h"
#include "nightshift/identity.h"
#include "nightshift/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_dir[256];
static char s_ini[512]; /* the file each test writes and loads */

static char s_id_a[NS_ID_TEXT_LEN + 1];
static char s_id_b[NS_ID_TEXT_LEN + 1];

static int s_put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Load `text` on top of the defaults. */
static int s_load_text(ns_config_t *cfg, const char *text, char *err,
                       size_t errlen)
{
    ns_config_defaults(cfg);
    if (s_put_file(s_ini, text) != 0) {
        ns_test_fail(__FILE__, __LINE__, "cannot write %s", s_ini);
        return NS_ERR_IO;
    }
    err[0] = '\0';
    return ns_config_load(cfg, s_ini, err, errlen);
}

TEST(defaults)
{
    ns_config_t c;
    memset(&c, 0x5a, sizeof c);
    ns_config_defaults(&c);
    CHECK_STR(c.listen, NS_DEFAULT_LISTEN);
    CHECK_STR(c.advertise, "");
    CHECK_EQ_INT(c.n_bootstrap, 0);
    CHECK_EQ_INT(c.heartbeat_interval_ms, 5000);
    CHECK_EQ_INT(c.heartbeat_peers, 16);
    CHECK(c.fanout >= 1);
    CHECK(c.max_peers >= 1);
    CHECK(c.rate_msgs_per_s >= 1 && c.rate_burst >= 1);
    CHECK(c.region[0] != '\0');
    CHECK_EQ_INT(c.log_level, NS_LOG_INFO);
    CHECK_STR(c.log_debug, "");
    CHECK_RC(ns_endpoint_check(c.listen, 1), NS_OK);
}

TEST(every_key)
{
    ns_config_t c;
    char err[512], text[2048];
    snprintf(text, sizeof text,
             "; a comment\n"
             "# another\n"
             "[node]\n"
             "listen = tcp://0.0.0.0:9000\n"
             "advertise = tcp://203.0.113.7:9000\n"
             "bootstrap = %s@tcp://127.0.0.1:7001\n"
             "bootstrap = %s@tcp://[::1]:7002\n"
             "heartbeat_interval_ms = 1000\n"
             "fanout = 3\n"
             "max_peers = 32\n"
             "pull_interval_ms = 500\n"
             "seen_ttl_ms = 60000\n"
             "max_msg_age_ms = 30000\n"
             "max_msg_future_ms = 0\n"
             "rate_msgs_per_s = 100\n"
             "rate_burst = 200\n"
             "region = eu-west-1\n"
             "price = 18446744073709551615\n"
             "stake = 99\n"
             "slots = 0\n"
             "\n"
             "[log]\n"
             "level = debug\n"
             "debug = gossip,net\n",
             s_id_a, s_id_b);
    if (!CHECK_RC(s_load_text(&c, text, err, sizeof err), NS_OK)) {
        fprintf(stderr, "  err: %s\n", err);
        return;
    }
    CHECK_STR(c.listen, "tcp://0.0.0.0:9000");
    CHECK_STR(c.advertise, "tcp://203.0.113.7:9000");
    if (CHECK_EQ_INT(c.n_bootstrap, 2)) {
        char want[NS_ADDR_MAX];
        snprintf(want, sizeof want, "%s@tcp://127.0.0.1:7001", s_id_a);
        CHECK_STR(c.bootstrap[0], want);
        snprintf(want, sizeof want, "%s@tcp://[::1]:7002", s_id_b);
        CHECK_STR(c.bootstrap[1], want);
    }
    CHECK_EQ_INT(c.heartbeat_interval_ms, 1000);
    CHECK_EQ_INT(c.fanout, 3);
    CHECK_EQ_INT(c.max_peers, 32);
    CHECK_EQ_INT(c.pull_interval_ms, 500);
    CHECK_EQ_INT(c.seen_ttl_ms, 60000);
    CHECK_EQ_INT(c.max_msg_age_ms, 30000);
    CHECK_EQ_INT(c.max_msg_future_ms, 0);
    CHECK_EQ_INT(c.rate_msgs_per_s, 100);
    CHECK_EQ_INT(c.rate_burst, 200);
    CHECK_STR(c.region, "eu-west-1");
    CHECK(c.price == UINT64_MAX);
    CHECK(c.stake == 99 * NS_MICRO); /* credits */
    CHECK_EQ_INT(c.slots, 0);
    CHECK_EQ_INT(c.log_level, NS_LOG_DEBUG);
    CHECK_STR(c.log_debug, "gossip,net");
}

TEST(empty_file_keeps_defaults)
{
    ns_config_t c, d;
    char err[256];
    CHECK_RC(s_load_text(&c, "", err, sizeof err), NS_OK);
    ns_config_defaults(&d);
    CHECK_STR(c.listen, d.listen);
    CHECK_EQ_INT(c.fanout, d.fanout);
    CHECK_STR(c.region, d.region);
}

TEST(missing_file)
{
    ns_config_t c;
    char err[512], path[600];
    ns_config_defaults(&c);
    snprintf(path, sizeof path, "%s/no-such.ini", s_dir);
    CHECK_RC(ns_config_load(&c, path, err, sizeof err), NS_ERR_NOTFOUND);
    CHECK_CONTAINS(err, "no-such.ini");
}

TEST(unknown_key_names_the_line)
{
    ns_config_t c;
    char err[512], want[600];
    CHECK_RC(s_load_text(&c,
                         "[node]\n"
                         "fanout = 3\n"
                         "fan_out = 4\n",
                         err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:3:", s_ini);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "fan_out");

    /* an unknown section, and a key outside any section */
    CHECK_RC(s_load_text(&c, "[node]\nfanout = 3\n[nodes]\nfanout = 4\n", err,
                         sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:4:", s_ini);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "nodes");
    CHECK_RC(s_load_text(&c, "fanout = 3\n", err, sizeof err), NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:1:", s_ini);
    CHECK_CONTAINS(err, want);
    /* a key of the other section */
    CHECK_RC(s_load_text(&c, "[log]\nfanout = 3\n", err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2:", s_ini);
    CHECK_CONTAINS(err, want);
    /* not INI at all */
    CHECK_RC(
        s_load_text(&c, "[node]\nthis is not a setting\n", err, sizeof err),
        NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2:", s_ini);
    CHECK_CONTAINS(err, want);
    CHECK_RC(s_load_text(&c, "[node\nfanout = 3\n", err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:1:", s_ini);
    CHECK_CONTAINS(err, want);
}

/* The first bad line is the one reported, with its reason, whatever comes
 * after it.
 * CORE BUG while this fails: libinih (Debian's build) goes on parsing
 * after a handler error (INI_STOP_ON_FIRST_ERROR is 0), and
 * ns_config_set() clears err on entry (core/config.c, `err[0] = '\0'`),
 * so any valid line after the bad one erases the reason and the message
 * falls back to "syntax error"; a second bad line overwrites the reason
 * of the first while the line number stays the first's. */
TEST(first_error_keeps_its_reason)
{
    ns_config_t c;
    char err[512], want[600];
    CHECK_RC(s_load_text(&c,
                         "[node]\n"
                         "fan_out = 4\n"
                         "fanout = 3\n",
                         err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2:", s_ini);
    CHECK_CONTAINS(err, want);
    if (!CHECK_CONTAINS(err, "fan_out"))
        fprintf(stderr, "  CORE BUG: reason erased by a later valid line "
                        "(core/config.c ns_config_set clears err)\n");

    CHECK_RC(s_load_text(&c,
                         "[node]\n"
                         "fanout = 0\n"
                         "max_peers = 0\n",
                         err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:2:", s_ini);
    CHECK_CONTAINS(err, want);
    if (!CHECK_CONTAINS(err, "fanout"))
        fprintf(stderr, "  CORE BUG: reason of line 2 replaced by line 3's "
                        "(inih goes on after an error)\n");
}

TEST(bad_values)
{
    static const struct {
        const char *section, *key, *value;
    } bad[] = {
        {"node", "listen", "udp://0.0.0.0:9000"},
        {"node", "listen", "tcp://0.0.0.0"},
        {"node", "listen", "tcp://0.0.0.0:65536"},
        {"node", "listen", "0.0.0.0:9000"},
        {"node", "advertise", "tcp://203.0.113.7:0"},
        {"node", "advertise", "tcp://203.0.113.7:*"},
        {"node", "bootstrap", "tcp://127.0.0.1:7001"},
        {"node", "bootstrap", "nobody@tcp://127.0.0.1:7001"},
        {"node", "heartbeat_interval_ms", "99"},
        {"node", "heartbeat_interval_ms", "60001"},
        {"node", "heartbeat_interval_ms", "5s"},
        {"node", "heartbeat_peers", "1025"},
        {"node", "heartbeat_peers", "-1"},
        {"node", "fanout", "0"},
        {"node", "fanout", "65"},
        {"node", "fanout", "-1"},
        {"node", "fanout", "three"},
        {"node", "fanout", "0x10"},
        {"node", "fanout", ""},
        {"node", "max_peers", "0"},
        {"node", "max_peers", "4294967297"},
        {"node", "pull_interval_ms", "1"},
        {"node", "seen_ttl_ms", "999"},
        {"node", "max_msg_age_ms", "100"},
        {"node", "max_msg_future_ms", "3600001"},
        {"node", "rate_msgs_per_s", "0"},
        {"node", "rate_burst", "1000001"},
        {"node", "region", ""},
        {"node", "region", "eu west"},
        {"node", "region", "a=b"},
        {"node", "region", "\"eu\""},
        {"node", "region", "123456789012345678901234567890123"},
        {"node", "price", "18446744073709551616"},
        {"node", "price", "-5"},
        {"node", "price", "1.5"},
        {"node", "stake", "lots"},
        {"node", "slots", "1025"},
        {"ledger", "map_size", "1048575"},
        {"ledger", "map_size", "1099511627777"},
        {"ledger", "map_size", "8G"},
        {"node", "http", "9464"},
        {"node", "http", ":9464"},
        {"node", "http", "127.0.0.1:"},
        {"node", "http", "127.0.0.1:65536"},
        {"node", "http", "127.0.0.1:-1"},
        {"node", "http", "a b:1"},
        {"node", "http_public", "yes"},
        {"node", "reachable", "maybe"},
        {"node", "reachable", ""},
        {"node", "relay", "yes"},
        {"log", "level", "verbose"},
        {"log", "level", "INFO"},
        {"log", "level", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ns_config_t c, d;
        char err[256] = "";
        ns_config_defaults(&c);
        ns_config_defaults(&d);
        int rc = ns_config_set(&c, bad[i].section, bad[i].key, bad[i].value,
                               err, sizeof err);
        if (rc != NS_ERR_CONFIG) {
            ns_test_fail(__FILE__, __LINE__, "[%s] %s = '%s' gave %s",
                         bad[i].section, bad[i].key, bad[i].value,
                         ns_errname(rc));
            continue;
        }
        ns_test_pass();
        CHECK_CONTAINS(err, bad[i].key);
        /* a refused value leaves the setting as it was */
        if (memcmp(&c, &d, sizeof c) != 0)
            ns_test_fail(__FILE__, __LINE__, "[%s] %s = '%s' changed cfg",
                         bad[i].section, bad[i].key, bad[i].value);
    }
    /* the longest region fits */
    ns_config_t c;
    ns_config_defaults(&c);
    CHECK_RC(ns_config_set(&c, "node", "region",
                           "12345678901234567890123456789012", NULL, 0),
             NS_OK);
    CHECK_EQ_INT(strlen(c.region), NS_MAX_REGION);

    /* a bad value in a file names its line too */
    char err[512], want[600];
    CHECK_RC(s_load_text(&c, "[node]\n\nfanout = 65\n", err, sizeof err),
             NS_ERR_CONFIG);
    snprintf(want, sizeof want, "%s:3:", s_ini);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "fanout");
}

TEST(bootstrap_cap)
{
    ns_config_t c;
    char err[256], addr[NS_ADDR_MAX];
    ns_config_defaults(&c);
    for (int i = 0; i < NS_MAX_BOOTSTRAP; i++) {
        snprintf(addr, sizeof addr, "%s@tcp://10.0.0.%d:7000", s_id_a, i + 1);
        CHECK_RC(ns_config_set(&c, "node", "bootstrap", addr, err, sizeof err),
                 NS_OK);
    }
    CHECK_EQ_INT(c.n_bootstrap, NS_MAX_BOOTSTRAP);
    CHECK_RC(ns_config_set(&c, "node", "bootstrap", addr, err, sizeof err),
             NS_ERR_CONFIG);
    CHECK(err[0] != '\0');
    CHECK_EQ_INT(c.n_bootstrap, NS_MAX_BOOTSTRAP);
}

TEST(flags_override_file)
{
    ns_config_t c;
    char err[256];
    CHECK_RC(s_load_text(&c,
                         "[node]\nfanout = 3\nregion = file\n"
                         "[log]\nlevel = warn\n",
                         err, sizeof err),
             NS_OK);
    CHECK_EQ_INT(c.fanout, 3);
    /* flags are applied after the file, through the same function */
    CHECK_RC(ns_config_set(&c, "node", "fanout", "9", err, sizeof err), NS_OK);
    CHECK_RC(ns_config_set(&c, "node", "region", "flag", err, sizeof err),
             NS_OK);
    CHECK_RC(ns_config_set(&c, "log", "level", "error", err, sizeof err),
             NS_OK);
    CHECK_RC(ns_config_set(&c, "node", "listen", "tcp://127.0.0.1:0", err,
                           sizeof err),
             NS_OK);
    CHECK_RC(ns_config_set(&c, "node", "listen", "tcp://127.0.0.1:*", err,
                           sizeof err),
             NS_OK);
    CHECK_EQ_INT(c.fanout, 9);
    CHECK_STR(c.region, "flag");
    CHECK_EQ_INT(c.log_level, NS_LOG_ERROR);
    CHECK_STR(c.listen, "tcp://127.0.0.1:*");
    /* unknown flags are errors that name themselves; err may be NULL */
    CHECK_RC(ns_config_set(&c, "node", "fanuot", "1", err, sizeof err),
             NS_ERR_CONFIG);
    CHECK_CONTAINS(err, "fanuot");
    CHECK_RC(ns_config_set(&c, "nodes", "fanout", "1", err, sizeof err),
             NS_ERR_CONFIG);
    CHECK_CONTAINS(err, "nodes");
    CHECK_RC(ns_config_set(&c, "node", "fanuot", "1", NULL, 0), NS_ERR_CONFIG);
    CHECK_RC(ns_config_set(&c, "node", "fanout", "0", NULL, 0), NS_ERR_CONFIG);
    /* a small err buffer is truncated, not overrun */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    CHECK_RC(ns_config_set(&c, "node", "fanuot", "1", tiny, sizeof tiny),
             NS_ERR_CONFIG);
    CHECK_EQ_INT(strlen(tiny), sizeof tiny - 1);
    CHECK_EQ_INT(c.fanout, 9);
}

static void s_config_equal(const ns_config_t *a, const ns_config_t *b)
{
    CHECK_STR(a->listen, b->listen);
    CHECK_STR(a->advertise, b->advertise);
    if (CHECK_EQ_INT(a->n_bootstrap, b->n_bootstrap))
        for (uint32_t i = 0; i < a->n_bootstrap; i++)
            CHECK_STR(a->bootstrap[i], b->bootstrap[i]);
    CHECK_EQ_INT(a->heartbeat_interval_ms, b->heartbeat_interval_ms);
    CHECK_EQ_INT(a->heartbeat_peers, b->heartbeat_peers);
    CHECK_EQ_INT(a->fanout, b->fanout);
    CHECK_EQ_INT(a->max_peers, b->max_peers);
    CHECK_EQ_INT(a->pull_interval_ms, b->pull_interval_ms);
    CHECK_EQ_INT(a->seen_ttl_ms, b->seen_ttl_ms);
    CHECK_EQ_INT(a->max_msg_age_ms, b->max_msg_age_ms);
    CHECK_EQ_INT(a->max_msg_future_ms, b->max_msg_future_ms);
    CHECK_EQ_INT(a->rate_msgs_per_s, b->rate_msgs_per_s);
    CHECK_EQ_INT(a->rate_burst, b->rate_burst);
    CHECK_STR(a->region, b->region);
    CHECK(a->price == b->price);
    CHECK(a->stake == b->stake);
    CHECK_EQ_INT(a->slots, b->slots);
    CHECK_STR(a->http, b->http);
    CHECK_EQ_INT(a->http_public, b->http_public);
    CHECK_EQ_INT(a->reachable, b->reachable);
    CHECK_EQ_INT(a->relay, b->relay);
    CHECK_EQ_INT(a->log_level, b->log_level);
    CHECK_STR(a->log_debug, b->log_debug);
    CHECK_STR(a->log_file, b->log_file);
    CHECK_EQ_INT(a->load_price_pct, b->load_price_pct);
    CHECK(a->blob_cache_bytes == b->blob_cache_bytes);
    CHECK_EQ_INT(a->jobs_retention_days, b->jobs_retention_days);
    CHECK(a->jobs_max_bytes == b->jobs_max_bytes);
}

TEST(write_then_load)
{
    ns_config_t a, b;
    char err[512], path[600], addr[NS_ADDR_MAX];
    snprintf(path, sizeof path, "%s/written.ini", s_dir);

    /* the defaults alone */
    ns_config_defaults(&a);
    CHECK_RC(ns_config_write(&a, path), NS_OK);
    ns_config_defaults(&b);
    CHECK_RC(ns_config_load(&b, path, err, sizeof err), NS_OK);
    s_config_equal(&a, &b);

    /* every setting away from its default */
    ns_config_defaults(&a);
    static const struct {
        const char *section, *key, *value;
    } set[] = {
        {"node", "listen", "tcp://0.0.0.0:0"},
        {"node", "advertise", "tcp://node.example.org:7946"},
        {"node", "heartbeat_interval_ms", "100"},
        {"node", "heartbeat_peers", "0"},
        {"node", "fanout", "64"},
        {"node", "max_peers", "1024"},
        {"node", "pull_interval_ms", "3600000"},
        {"node", "seen_ttl_ms", "1000"},
        {"node", "max_msg_age_ms", "3600000"},
        {"node", "max_msg_future_ms", "0"},
        {"node", "rate_msgs_per_s", "1"},
        {"node", "rate_burst", "1000000"},
        {"node", "region", "ap-southeast-2"},
        {"node", "price", "0"},
        {"node", "stake", "18446744073709.551615"},
        {"node", "slots", "1024"},
        {"node", "load_price_pct", "50"},
        {"node", "input_cache_bytes", "1048576"},
        {"node", "http", "127.0.0.1:9464"},
        {"node", "http_public", "true"},
        {"node", "reachable", "no"},
        {"node", "relay", "on"},
        {"ledger", "map_size", "1048576"},
        {"log", "level", "debug"},
        {"log", "debug", "all"},
        {"log", "file", "/var/log/nightshift/node log.txt"},
        {"jobs", "retention_days", "0"},
        {"jobs", "max_bytes", "1"},
    };
    for (size_t i = 0; i < sizeof set / sizeof *set; i++)
        if (!CHECK_RC(ns_config_set(&a, set[i].section, set[i].key,
                                    set[i].value, err, sizeof err),
                      NS_OK))
            fprintf(stderr, "  %s\n", err);
    /* `nightshift config` reads each setting back as it was given, and
     * lists every one of them (bootstrap is its own test). */
    for (size_t i = 0; i < sizeof set / sizeof *set; i++) {
        char got[256];
        if (CHECK_RC(
                ns_config_get(&a, set[i].section, set[i].key, got, sizeof got),
                NS_OK))
            CHECK_STR(got, set[i].value);
    }
    for (size_t k = 0; k < ns_config_n_keys; k++) {
        const ns_config_key_t *key = &ns_config_keys[k];
        bool covered = strcmp(key->key, "bootstrap") == 0;
        for (size_t i = 0; !covered && i < sizeof set / sizeof *set; i++)
            covered = strcmp(key->section, set[i].section) == 0 &&
                      strcmp(key->key, set[i].key) == 0;
        if (!CHECK(covered))
            fprintf(stderr, "  [%s] %s is not in this test's list\n",
                    key->section, key->key);
        CHECK(key->about && key->about[0]);
    }
    for (size_t i = 0; i < sizeof set / sizeof *set; i++) {
        bool listed = false;
        for (size_t k = 0; !listed && k < ns_config_n_keys; k++)
            listed = strcmp(ns_config_keys[k].section, set[i].section) == 0 &&
                     strcmp(ns_config_keys[k].key, set[i].key) == 0;
        if (!CHECK(listed))
            fprintf(stderr, "  [%s] %s is missing from ns_config_keys\n",
                    set[i].section, set[i].key);
    }
    char got[8];
    CHECK_RC(ns_config_get(&a, "node", "nonesuch", got, sizeof got),
             NS_ERR_NOTFOUND);
    CHECK_RC(ns_config_get(&a, "node", "region", got, 4), NS_ERR_TOOBIG);
    for (int i = 0; i < NS_MAX_BOOTSTRAP; i++) {
        snprintf(addr, sizeof addr, "%s@tcp://10.1.2.%d:%d",
                 i % 2 ? s_id_a : s_id_b, i, 7000 + i);
        CHECK_RC(ns_config_set(&a, "node", "bootstrap", addr, err, sizeof err),
                 NS_OK);
    }
    /* the longest endpoint, in the longest bootstrap line */
    char longep[NS_ENDPOINT_MAX];
    memset(longep, 'h', sizeof longep);
    memcpy(longep, "tcp://", 6);
    memcpy(longep + NS_ENDPOINT_MAX - 1 - 5, ":7946", 6);
    snprintf(addr, sizeof addr, "%s@%s", s_id_a, longep);
    a.n_bootstrap--;
    CHECK_RC(ns_config_set(&a, "node", "bootstrap", addr, err, sizeof err),
             NS_OK);
    CHECK_RC(ns_config_set(&a, "node", "advertise", longep, err, sizeof err),
             NS_OK);
    CHECK_RC(ns_config_write(&a, path), NS_OK);
    ns_config_defaults(&b);
    if (!CHECK_RC(ns_config_load(&b, path, err, sizeof err), NS_OK))
        fprintf(stderr, "  %s\n", err);
    s_config_equal(&a, &b);

    /* each log setting on its own */
    ns_config_defaults(&a);
    CHECK_RC(ns_config_set(&a, "log", "level", "warn", NULL, 0), NS_OK);
    CHECK_RC(ns_config_write(&a, path), NS_OK);
    ns_config_defaults(&b);
    CHECK_RC(ns_config_load(&b, path, err, sizeof err), NS_OK);
    s_config_equal(&a, &b);
    ns_config_defaults(&a);
    CHECK_RC(ns_config_set(&a, "log", "debug", "gossip", NULL, 0), NS_OK);
    CHECK_RC(ns_config_write(&a, path), NS_OK);
    ns_config_defaults(&b);
    CHECK_RC(ns_config_load(&b, path, err, sizeof err), NS_OK);
    s_config_equal(&a, &b);

    /* writing replaces the file */
    CHECK_RC(ns_config_write(&a, path), NS_OK);
    unlink(path);
}

int main(void)
{
    uint8_t pk[NS_ID_BYTES];
    memset(pk, 0x11, sizeof pk);
    ns_id_text(s_id_a, pk);
    memset(pk, 0x22, sizeof pk);
    ns_id_text(s_id_b, pk);
    const char *tmp = getenv("TMPDIR");
    snprintf(s_dir, sizeof s_dir, "%s/ns-test-config-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(s_ini, sizeof s_ini, "%s/config.ini", s_dir);
    RUN(defaults);
    RUN(every_key);
    RUN(empty_file_keeps_defaults);
    RUN(missing_file);
    RUN(unknown_key_names_the_line);
    RUN(first_error_keeps_its_reason);
    RUN(bad_values);
    RUN(bootstrap_cap);
    RUN(flags_override_file);
    RUN(write_then_load);
    unlink(s_ini);
    if (rmdir(s_dir) != 0)
        fprintf(stderr, "warning: could not remove %s\n", s_dir);
    return ns_test_finish("core_config");
}
