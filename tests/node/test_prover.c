/* test_prover.c - the provider's side of a hardware challenge (prover.h)
 * in a real sandboxed worker (this binary answers `worker`): a second
 * challenge, from another requester, does not take the first one's
 * answer away while its challenger has yet to fetch it, and each answer
 * is served to its own challenger only. */
#include "check.h"

#include "nightshift/challenge.h"
#include "nightshift/market.h"
#include "nightshift/prover.h"
#include "nightshift/util.h"
#include "nightshift/worker.h"

#include <sodium.h>
#include <string.h>
#include <unistd.h>

static uint8_t s_a[NS_ID_BYTES], s_b[NS_ID_BYTES];
static ns_chal_done_t s_done[2]; /* the CHAL_DONE sent to a, to b */
static bool s_got[2];
static uint32_t s_replies;

static int s_send(void *u, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                  const uint8_t *body, size_t len)
{
    (void)u;
    int who = memcmp(peer, s_a, NS_ID_BYTES) == 0 ? 0 : 1;
    if (type == NS_MSG_MKT_CHAL_DONE &&
        ns_chal_done_decode(body, len, &s_done[who]) == NS_OK)
        s_got[who] = true;
    return NS_OK;
}

static int s_reply(void *ctx, uint8_t type, const uint8_t *body, size_t len)
{
    (void)ctx;
    (void)body;
    (void)len;
    if (type == NS_MSG_MKT_CHUNK)
        s_replies++;
    return NS_OK;
}

static const ns_node_io_t s_io = {.send = s_send};

static void s_msg(ns_chal_msg_t *m)
{
    ns_label_params_t p;
    memset(m, 0, sizeof *m);
    randombytes_buf(m->nonce, NS_HASH_BYTES);
    randombytes_buf(m->seed, sizeof m->seed);
    if (ns_label_params_init(&p, NS_LABEL_MIN_BYTES, 2) == NS_OK) {
        m->label_bytes = p.bytes;
        m->label_segments = p.segments;
    }
    m->k = 4;
    m->imatmul_n = 64;
}

/* Tick until the CHAL_DONE for `who` is out (the first builds programs). */
static bool s_run(ns_prover_t *pv, ns_worker_t *w, int who)
{
    for (int i = 0; i < 12000 && !s_got[who]; i++) {
        ns_prover_tick(pv, w, &s_io, ns_mono_ms());
        usleep(10000);
    }
    return s_got[who];
}

/* A FETCH of the first chunk of blob NS_BLOB_CHAL of nonce, from `from`. */
static int s_fetch(ns_prover_t *pv, const uint8_t *from, const ns_hash_t nonce)
{
    ns_chunk_t c;
    memset(&c, 0, sizeof c);
    memcpy(c.job_id, nonce, NS_HASH_BYTES);
    c.blob = NS_BLOB_CHAL;
    c.len = NS_CHUNK_BYTES;
    ns_buf_t b;
    ns_buf_init(&b);
    int rc = ns_fetch_encode(&c, &b);
    if (rc == NS_OK) {
        ns_node_msg_t m = {NS_MSG_MKT_FETCH, from, b.data, b.len,
                           s_reply,          NULL};
        rc = ns_prover_serve(pv, &m);
    }
    ns_buf_release(&b);
    return rc;
}

TEST(a_second_challenge_leaves_the_first_answer_served)
{
    ns_worker_opts_t o;
    ns_worker_opts_init(&o);
    o.timeout_ms = 120000;
    int rc = NS_OK;
    ns_worker_t *w = ns_worker_new(&o, &rc);
    if (!CHECK(w != NULL))
        return;
    ns_prover_t pv;
    ns_prover_init(&pv);
    ns_chal_msg_t m1, m2;
    s_msg(&m1);
    s_msg(&m2);
    ns_prover_start(&pv, w, &s_io, &m1, s_a, UINT64_C(1) << 30, ns_mono_ms());
    CHECK(s_run(&pv, w, 0));
    CHECK_EQ_INT(s_done[0].status, NS_OK);
    CHECK(s_done[0].answer_bytes > 0);
    CHECK(!ns_prover_busy(&pv)); /* free for the next challenge */
    /* b's challenge runs before a has fetched anything */
    ns_prover_start(&pv, w, &s_io, &m2, s_b, UINT64_C(1) << 30, ns_mono_ms());
    CHECK(s_run(&pv, w, 1));
    CHECK_EQ_INT(s_done[1].status, NS_OK);
    /* each answer to its own challenger, both still there */
    CHECK_RC(s_fetch(&pv, s_a, m1.nonce), NS_OK);
    CHECK_RC(s_fetch(&pv, s_b, m2.nonce), NS_OK);
    CHECK_EQ_INT(s_replies, 2);
    CHECK_RC(s_fetch(&pv, s_b, m1.nonce), NS_ERR_NOTFOUND);
    CHECK_RC(s_fetch(&pv, s_a, m2.nonce), NS_ERR_NOTFOUND);
    /* forgotten once kept long enough */
    ns_prover_tick(&pv, w, &s_io, ns_mono_ms() + NS_PROVER_KEEP_MS + 1);
    CHECK_RC(s_fetch(&pv, s_a, m1.nonce), NS_ERR_NOTFOUND);
    ns_prover_release(&pv);
    ns_worker_destroy(&w);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "worker") == 0) {
        if (sodium_init() < 0)
            return 1;
        return ns_worker_main(argc - 1, argv + 1);
    }
    if (sodium_init() < 0)
        return 1;
    randombytes_buf(s_a, sizeof s_a);
    randombytes_buf(s_b, sizeof s_b);
    RUN(a_second_challenge_leaves_the_first_answer_served);
    return ns_test_finish("node_prover");
}
