/* test_transfer.c - node/transfer.c: blobs over FETCH/CHUNK between a
 * fetcher and a server wired back to back, and a hostile server that
 * sends chunks nobody asked for. */
#include "../check.h"

#include "nightshift/transfer.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* The wire: FETCHes the fetcher sent, answered by the test. */
typedef struct {
    ns_buf_t sent[64];
    uint32_t n;
    uint32_t refused; /* sends to fail from now on */
} s_wire_t;

static int s_send(void *u, const uint8_t peer[NS_ID_BYTES], uint8_t type,
                  const uint8_t *body, size_t len)
{
    (void)peer;
    s_wire_t *w = u;
    if (type != NS_MSG_MKT_FETCH || w->n == 64)
        return NS_ERR_INVAL;
    if (w->refused)
        return NS_ERR_NOTFOUND;
    ns_buf_init(&w->sent[w->n]);
    int rc = ns_buf_append(&w->sent[w->n], body, len);
    w->n++;
    return rc;
}

/* Answer every FETCH on the wire from blobs[blob]. */
static int s_serve_all(s_wire_t *w, ns_fetch_t *f, uint8_t *const *blobs,
                       const uint64_t *sizes, uint32_t *completed)
{
    uint32_t n = w->n;
    w->n = 0;
    int rc = NS_OK;
    for (uint32_t i = 0; i < n; i++) {
        ns_chunk_t req, c;
        ns_buf_t out;
        ns_buf_init(&out);
        int done = -1;
        if (rc == NS_OK)
            rc = ns_fetch_decode(w->sent[i].data, w->sent[i].len, &req);
        if (rc == NS_OK)
            rc =
                ns_transfer_serve(&req, blobs[req.blob], sizes[req.blob], &out);
        if (rc == NS_OK)
            rc = ns_chunk_decode(out.data, out.len, &c);
        if (rc == NS_OK)
            rc = ns_fetch_on_chunk(f, &c, &done);
        if (done >= 0)
            (*completed)++;
        ns_buf_release(&out);
        ns_buf_release(&w->sent[i]);
    }
    return rc;
}

TEST(blobs_of_known_and_learnt_size_arrive_whole)
{
    ns_hash_t job;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    uint64_t sizes[3] = {3 * NS_CHUNK_BYTES + 17, 5, 2 * NS_CHUNK_BYTES};
    uint8_t *blobs[3];
    for (int i = 0; i < 3; i++) {
        blobs[i] = malloc(sizes[i]);
        randombytes_buf(blobs[i], sizes[i]);
    }
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 4);
    uint8_t *dst1 = calloc(1, sizes[1]);
    CHECK_RC(ns_fetch_add(&f, 0, NULL, 0, 4 * NS_CHUNK_BYTES), NS_OK);
    CHECK_RC(ns_fetch_add(&f, 1, dst1, sizes[1], 0), NS_OK);
    CHECK_RC(ns_fetch_add(&f, 2, NULL, sizes[2], 0), NS_OK);
    s_wire_t w = {0};
    uint32_t completed = 0, rounds = 0;
    while (!ns_fetch_done(&f) && rounds++ < 100) {
        CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
        CHECK(w.n <= 4); /* never more than the window in flight */
        CHECK_RC(s_serve_all(&w, &f, blobs, sizes, &completed), NS_OK);
    }
    CHECK(ns_fetch_done(&f));
    CHECK_EQ_INT(completed, 3);
    for (uint32_t b = 0; b < 3; b++) {
        const ns_fetch_blob_t *fb = ns_fetch_blob(&f, b);
        CHECK(fb && fb->total == sizes[b] &&
              memcmp(fb->data, blobs[b], sizes[b]) == 0);
    }
    CHECK(memcmp(dst1, blobs[1], sizes[1]) == 0);
    /* a restart (another provider) fetches everything again */
    ns_fetch_restart(&f);
    CHECK(!ns_fetch_done(&f));
    completed = rounds = 0;
    while (!ns_fetch_done(&f) && rounds++ < 100) {
        CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
        CHECK_RC(s_serve_all(&w, &f, blobs, sizes, &completed), NS_OK);
    }
    CHECK_EQ_INT(completed, 3);
    ns_fetch_release(&f);
    free(dst1);
    for (int i = 0; i < 3; i++)
        free(blobs[i]);
}

TEST(chunks_nobody_asked_for_are_refused)
{
    ns_hash_t job, other;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    randombytes_buf(other, sizeof other);
    uint64_t size = 2 * NS_CHUNK_BYTES + 10;
    uint8_t *data = malloc(size);
    randombytes_buf(data, size);
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add(&f, 5, NULL, size, 0), NS_OK);
    CHECK_RC(ns_fetch_add(&f, 6, NULL, 0, 1000), NS_OK);
    int done = -1;
    ns_chunk_t c = {{0}, 5, 0, size, 0, data, NS_CHUNK_BYTES};
    memcpy(c.job_id, job, NS_HASH_BYTES);
    /* before any FETCH went out */
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    s_wire_t w = {0};
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 3); /* blob 5's three chunks; blob 6 waits */
    /* another job, another blob */
    memcpy(c.job_id, other, NS_HASH_BYTES);
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_NOTFOUND);
    memcpy(c.job_id, job, NS_HASH_BYTES);
    c.blob = 9;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_NOTFOUND);
    c.blob = 5;
    /* off a chunk boundary, short, a wrong total */
    c.offset = 1;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    c.offset = 0;
    c.data_len = NS_CHUNK_BYTES - 1;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    c.data_len = NS_CHUNK_BYTES;
    c.total = size + 1;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    c.total = size;
    /* the right chunk once, then the same chunk again */
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_OK);
    CHECK_EQ_INT(done, -1);
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    CHECK_EQ_INT(ns_fetch_blob(&f, 5)->got, NS_CHUNK_BYTES);
    /* a learnt size over its cap */
    ns_chunk_t l = {{0}, 6, 0, 1001, 0, data, 1001};
    memcpy(l.job_id, job, NS_HASH_BYTES);
    c.offset = NS_CHUNK_BYTES;
    c.data = data + c.offset;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_OK);
    c.offset = 2 * NS_CHUNK_BYTES;
    c.data = data + c.offset;
    c.data_len = 10;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_OK);
    CHECK_EQ_INT(done, 0);
    CHECK(memcmp(ns_fetch_blob(&f, 5)->data, data, size) == 0);
    for (uint32_t i = 0; i < w.n; i++)
        ns_buf_release(&w.sent[i]);
    w.n = 0;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 1); /* blob 6: one chunk until its size is known */
    CHECK_RC(ns_fetch_on_chunk(&f, &l, &done), NS_ERR_TOOBIG);
    /* a send that fails is not counted in flight */
    for (uint32_t i = 0; i < w.n; i++)
        ns_buf_release(&w.sent[i]);
    ns_fetch_restart(&f);
    w.n = 0;
    w.refused = 1;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_ERR_NOTFOUND);
    CHECK_EQ_INT(f.in_flight, 0);
    ns_fetch_release(&f);
    free(data);
}

TEST(serve_refuses_offsets_past_the_end)
{
    uint8_t data[10] = {1, 2, 3};
    ns_chunk_t req = {{0}, 0, 10, 0, 4, NULL, 0}, c;
    ns_buf_t out;
    ns_buf_init(&out);
    CHECK_RC(ns_transfer_serve(&req, data, sizeof data, &out), NS_ERR_INVAL);
    CHECK_RC(ns_transfer_serve(&req, NULL, 0, &out), NS_ERR_INVAL);
    req.offset = 8;
    CHECK_RC(ns_transfer_serve(&req, data, sizeof data, &out), NS_OK);
    CHECK_RC(ns_chunk_decode(out.data, out.len, &c), NS_OK);
    CHECK_EQ_INT(c.data_len, 2); /* what is left, not what was asked */
    CHECK_EQ_INT(c.total, 10);
    ns_buf_release(&out);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(blobs_of_known_and_learnt_size_arrive_whole);
    RUN(chunks_nobody_asked_for_are_refused);
    RUN(serve_refuses_offsets_past_the_end);
    return ns_test_finish("node_transfer");
}
