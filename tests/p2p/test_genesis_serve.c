/* test_genesis_serve.c - GENESIS_REQ answered by a real node (bound
 * ROUTER on loopback, its loop in a thread) and fetched by the probe
 * (p2p/probe.c) over CURVE: a 2.5-chunk file arrives whole; a wrong
 * network id, a wrong key and a closed port each get their cause; the
 * byte budget of the answers holds. */
#include "check.h"

#include "nightshift/genesis.h"
#include "nightshift/genesis_serve.h"
#include "nightshift/p2p.h"
#include "nightshift/probe.h"
#include "nightshift/util.h"

#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ns_config_t cfg;
    ns_identity_t *me;
    ns_p2p_t *p;
    ns_genesis_serve_t *serve;
    uint8_t *text;
    uint32_t total;
    ns_hash_t net;
    volatile sig_atomic_t stop;
    pthread_t thread;
} s_fix_t;

static void s_setup(s_fix_t *f, uint32_t total)
{
    memset(f, 0, sizeof *f);
    ns_config_defaults(&f->cfg);
    snprintf(f->cfg.listen, sizeof f->cfg.listen, "tcp://127.0.0.1:0");
    f->cfg.rate_burst = 1000;
    f->me = ns_identity_generate();
    f->total = total;
    f->text = malloc(total);
    CHECK(f->me && f->text);
    for (uint32_t i = 0; i < total; i++)
        f->text[i] = (uint8_t)(i * 13 + 5);
    ns_hash(f->net, f->text, total);
    ns_p2p_opts_t o = {&f->cfg, f->me, {0}, "test", NULL, 0, false};
    memcpy(o.network_id, f->net, NS_HASH_BYTES);
    int err = 0;
    f->p = ns_p2p_new(&o, &err);
    CHECK(f->p != NULL);
    f->serve = ns_genesis_serve_new(f->p, f->text, total, &err);
    CHECK(f->serve != NULL);
}

static void s_teardown(s_fix_t *f)
{
    ns_genesis_serve_destroy(&f->serve);
    CHECK(f->serve == NULL);
    ns_genesis_serve_destroy(&f->serve); /* idempotent */
    ns_p2p_destroy(&f->p);
    ns_identity_destroy(&f->me);
    free(f->text);
}

static void *s_run(void *u)
{
    s_fix_t *f = u;
    if (ns_p2p_run(f->p, &f->stop) != NS_OK)
        abort();
    return NULL;
}

TEST(fetch_and_causes)
{
    s_fix_t f;
    s_setup(&f, NS_GENESIS_CHUNK * 2 + NS_GENESIS_CHUNK / 2);
    if (!f.p || !f.serve)
        goto out;
    CHECK(pthread_create(&f.thread, NULL, s_run, &f) == 0);

    /* The whole file, from the one good address of three. */
    ns_probe_t pr[3];
    memset(pr, 0, sizeof pr);
    snprintf(pr[0].addr, sizeof pr[0].addr, "%s", ns_p2p_address(f.p));
    const char *ep = strchr(ns_p2p_address(f.p), '@') + 1;
    ns_identity_t *stranger = ns_identity_generate();
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, ns_identity_pk(stranger));
    snprintf(pr[1].addr, sizeof pr[1].addr, "%s@%s", idtext, ep);
    /* Port 1 on loopback: nothing listens there. */
    ns_id_text(idtext, ns_identity_pk(f.me));
    snprintf(pr[2].addr, sizeof pr[2].addr, "%s@tcp://127.0.0.1:1", idtext);
    uint8_t *text = NULL;
    size_t len = 0;
    uint32_t winner = 9;
    CHECK_RC(ns_probe_run(pr, 3, f.net, 10000, &text, &len, &winner), NS_OK);
    CHECK_EQ_INT(winner, 0);
    CHECK_EQ_INT(len, f.total);
    CHECK(text && memcmp(text, f.text, f.total) == 0);
    CHECK_EQ_INT(pr[0].cause, NS_PROBE_OK);
    free(text);

    /* Diagnose: each address its own cause. */
    CHECK_RC(ns_probe_run(pr, 3, f.net, 5000, NULL, NULL, NULL), NS_OK);
    CHECK_EQ_INT(pr[0].cause, NS_PROBE_OK);
    CHECK_EQ_INT(pr[1].cause, NS_PROBE_KEY);
    CHECK_CONTAINS(pr[1].why, "key mismatch");
    CHECK_EQ_INT(pr[2].cause, NS_PROBE_REFUSED);
    CHECK_CONTAINS(pr[2].why, "refused");

    /* Asked for another network: refused on the first chunk. */
    ns_hash_t other;
    ns_hash(other, "another genesis", 15);
    text = NULL;
    CHECK_RC(ns_probe_run(pr, 1, other, 5000, &text, &len, &winner),
             NS_ERR_NOTFOUND);
    CHECK(text == NULL);
    CHECK_EQ_INT(pr[0].cause, NS_PROBE_NETWORK);
    CHECK_MEM(pr[0].network_id, f.net, NS_HASH_BYTES);
    CHECK_CONTAINS(pr[0].why, "other network");

    /* Malformed address: refused before any dialling. */
    snprintf(pr[0].addr, sizeof pr[0].addr, "not-an-address");
    CHECK_RC(ns_probe_run(pr, 1, f.net, 1000, NULL, NULL, NULL), NS_ERR_INVAL);
    CHECK_RC(ns_probe_run(pr, 0, f.net, 1000, NULL, NULL, NULL), NS_ERR_INVAL);
    ns_identity_destroy(&stranger);
    f.stop = 1;
    CHECK(pthread_join(f.thread, NULL) == 0);
out:
    s_teardown(&f);
}

/* A stranger asking in a loop gets 4 MiB, then rate_limited. */
TEST(answer_budget)
{
    s_fix_t f;
    s_setup(&f, NS_MAX_GENESIS_BYTES);
    ns_identity_t *asker = ns_identity_generate();
    uint8_t link[32];
    ns_buf_t body, env;
    ns_buf_init(&body);
    ns_buf_init(&env);
    if (!f.p || !f.serve || !asker)
        goto out;
    CHECK(ns_id_curve_pk(ns_identity_pk(asker), link) == NS_OK);
    uint32_t ok = 0, limited = 0;
    uint64_t ts = ns_now_ms();
    for (int i = 0; i < 40; i++) {
        uint32_t offset = (uint32_t)(i % 8) * NS_GENESIS_CHUNK;
        CHECK_RC(ns_genesis_req_encode(offset, &body), NS_OK);
        CHECK_RC(ns_envelope_encode(asker, NS_MSG_GENESIS_REQ, ts + (uint64_t)i,
                                    body.data, body.len, &env, NULL),
                 NS_OK);
        int rc = ns_p2p_ingest(f.p, link, env.data, env.len);
        ok += rc == NS_OK;
        limited += rc == NS_ERR_RATE;
    }
    /* 4 MiB of 128 KiB chunks; the refill over the loop's few ms adds at
     * most one more. */
    CHECK(ok >= 32 && ok <= 33);
    CHECK_EQ_INT(ok + limited, 40);
out:
    ns_buf_release(&body);
    ns_buf_release(&env);
    ns_identity_destroy(&asker);
    s_teardown(&f);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(fetch_and_causes);
    RUN(answer_budget);
    return ns_test_finish("p2p_genesis_serve");
}
