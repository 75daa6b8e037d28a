/* gen_config_corpus.c - write seed inputs for fuzz_config into a
 * directory.
 *
 *   fuzz_config_gen_corpus DIR
 *
 * Seeds: settings files written by ns_config_write (each loaded back
 * before it is saved): the defaults, every setting changed, the most
 * bootstrap peers; and by hand: each setting one past its range, an
 * unknown key and section, a seventeenth bootstrap peer, comments, CRLF,
 * a continuation line, a line too long for inih, a region that starts
 * with ';' (regression: written back as "region = ;x", an empty region).
 */
#include "seeds.h"

#include "nightshift/config.h"
#include "nightshift/identity.h"

#include <unistd.h>

static char s_tmp[4096];

static void s_write(const char *what, const ns_config_t *cfg)
{
    uint8_t *text = NULL;
    size_t len = 0;
    ns_config_t back;
    char err[512];
    seeds_check(ns_config_write(cfg, s_tmp), what);
    ns_config_defaults(&back);
    if (ns_config_load(&back, s_tmp, err, sizeof err) != NS_OK) {
        fprintf(stderr, "%s: %s: %s\n", seeds_g.prog, what, err);
        exit(1);
    }
    seeds_check(ns_file_read(s_tmp, 64 * 1024, &text, &len), what);
    unlink(s_tmp);
    seeds_save(what, text, len);
    free(text);
}

static void s_raw(const char *what, const char *text)
{
    seeds_save(what, (const uint8_t *)text, strlen(text));
}

int main(int argc, char **argv)
{
    static ns_config_t cfg;
    seeds_init(argc, argv);
    snprintf(s_tmp, sizeof s_tmp, "%s/.config.tmp", seeds_g.dir);
    ns_config_defaults(&cfg);
    s_write("defaults", &cfg);

    char id[NS_ID_TEXT_LEN + 1];
    ns_hash_t h;
    ns_hash(h, "peer", 4);
    ns_id_text(id, h);
    snprintf(cfg.listen, sizeof cfg.listen, "tcp://0.0.0.0:*");
    snprintf(cfg.advertise, sizeof cfg.advertise, "tcp://node.example:7946");
    snprintf(cfg.bootstrap[0], NS_ADDR_MAX, "%s@tcp://10.0.0.1:7946", id);
    snprintf(cfg.bootstrap[1], NS_ADDR_MAX, "%s@tcp://[fe80::1]:1", id);
    cfg.n_bootstrap = 2;
    cfg.heartbeat_interval_ms = 100;
    cfg.fanout = 64;
    cfg.max_peers = 1024;
    cfg.pull_interval_ms = 3600000;
    cfg.seen_ttl_ms = 1000;
    cfg.max_msg_age_ms = 3600000;
    cfg.max_msg_future_ms = 0;
    cfg.rate_msgs_per_s = 1000000;
    cfg.rate_burst = 1;
    snprintf(cfg.region, sizeof cfg.region, "eu-west-1");
    cfg.price = UINT64_MAX;
    cfg.stake = 12345;
    cfg.slots = 0;
    cfg.log_level = NS_LOG_DEBUG;
    snprintf(cfg.log_debug, sizeof cfg.log_debug, "gossip,net");
    s_write("every setting changed", &cfg);
    ns_config_defaults(&cfg);
    for (uint32_t i = 0; i < NS_MAX_BOOTSTRAP; i++)
        snprintf(cfg.bootstrap[i], NS_ADDR_MAX, "%s@tcp://h%u:%u", id, i,
                 i + 1);
    cfg.n_bootstrap = NS_MAX_BOOTSTRAP;
    s_write("16 bootstrap peers", &cfg);

    char text[4096];
    size_t n = 0;
    for (uint32_t i = 0; i <= NS_MAX_BOOTSTRAP; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "bootstrap = %s@tcp://h:%u\n", id, i + 1);
    char all[4200];
    snprintf(all, sizeof all, "[node]\n%s", text);
    s_raw("17 bootstrap peers", all);
    s_raw("fanout 0", "[node]\nfanout = 0\n");
    s_raw("max_peers 1025", "[node]\nmax_peers = 1025\n");
    s_raw("slots 1025", "[node]\nslots = 1025\n");
    s_raw("heartbeat 99 ms", "[node]\nheartbeat_interval_ms = 99\n");
    s_raw("price -1", "[node]\nprice = -1\n");
    s_raw("advertise on any port", "[node]\nadvertise = tcp://a:0\n");
    s_raw("listen on udp", "[node]\nlisten = udp://a:1\n");
    s_raw("region with a space", "[node]\nregion = eu west\n");
    s_raw("region ';x' (was written as a file that did not load)",
          "[node]\nregion=;x\n");
    s_raw("region of 33", "[node]\nregion = "
                          "abcdefghijklmnopqrstuvwxyz0123456\n");
    s_raw("log level loud", "[log]\nlevel = loud\n");
    s_raw("log debug unknown module", "[log]\ndebug = gossip,nope\n");
    s_raw("unknown key", "[node]\ncolour = blue\n");
    s_raw("unknown section", "[gpu]\nfanout = 2\n");
    s_raw("comments, CRLF, colon",
          "; settings\r\n[node]\r\n# c\r\n"
          "fanout: 3 ; three\r\n[log]\r\nlevel=warn\r\n");
    s_raw("a continuation line", "[node]\nregion = a\n  b\n");
    s_raw("no section", "fanout = 2\n");
    s_raw("no value", "[node]\nfanout\n");
    memset(text, 'x', 300);
    memcpy(text, "[node]\nregion = ", 16);
    text[300] = '\0';
    s_raw("a line too long", text);
    seeds_done();
    return 0;
}
