/* test_transfer.c - node/transfer.c: blobs over FETCH/CHUNK between a
 * fetcher and a server wired back to back, and a hostile server that
 * sends chunks nobody asked for. */
#include "../check.h"

#include "nightshift/blobs.h"
#include "nightshift/transfer.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"

#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_DUPLICATE);
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

static void s_drop(s_wire_t *w)
{
    for (uint32_t i = 0; i < w->n; i++)
        ns_buf_release(&w->sent[i]);
    w->n = 0;
}

/* Answer the FETCHes on the wire last first (out of order), with blob
 * bytes from data; corrupt = flip a byte of the chunk at that offset
 * (UINT64_MAX: none). The first error is returned. */
static int s_serve_reversed(s_wire_t *w, ns_fetch_t *f, const uint8_t *data,
                            uint64_t size, uint64_t corrupt, int *done)
{
    int rc = NS_OK;
    uint8_t *bad = malloc(NS_CHUNK_BYTES);
    for (uint32_t n = w->n; n-- > 0;) {
        ns_chunk_t req, c;
        ns_buf_t out;
        ns_buf_init(&out);
        int d = -1, r = ns_fetch_decode(w->sent[n].data, w->sent[n].len, &req);
        if (r == NS_OK)
            r = ns_transfer_serve(&req, data, size, &out);
        if (r == NS_OK)
            r = ns_chunk_decode(out.data, out.len, &c);
        if (r == NS_OK && c.offset == corrupt) {
            memcpy(bad, c.data, c.data_len);
            bad[0] ^= 1;
            c.data = bad;
        }
        if (r == NS_OK)
            r = ns_fetch_on_chunk(f, &c, &d);
        if (d >= 0)
            *done = d;
        if (rc == NS_OK)
            rc = r;
        ns_buf_release(&out);
    }
    s_drop(w);
    free(bad);
    return rc;
}

static int s_tmpfile(char *path, size_t cap)
{
    snprintf(path, cap, "%s/ns_xfer_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkstemp(path);
}

static uint64_t s_file_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
}

TEST(a_blob_is_received_into_a_file_and_hashed_as_it_arrives)
{
    ns_hash_t job, h;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    uint64_t size = 7 * NS_CHUNK_BYTES + 333;
    uint8_t *data = malloc(size), *back = malloc(size);
    randombytes_buf(data, size);
    ns_hash(h, data, size);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    CHECK(fd >= 0);
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 3);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    CHECK(ns_fetch_blob(&f, 1)->data == NULL); /* nothing in memory */
    s_wire_t w = {0};
    int done = -1, rounds = 0;
    while (!ns_fetch_done(&f) && rounds++ < 20) {
        CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
        CHECK(w.n <= 3);
        /* out of order: the hash waits for the prefix, then catches up
         * from the file */
        CHECK_RC(s_serve_reversed(&w, &f, data, size, UINT64_MAX, &done),
                 NS_OK);
    }
    CHECK(ns_fetch_done(&f));
    CHECK_EQ_INT(done, 0);
    CHECK_EQ_INT(ns_fetch_hashed(&f, 1), size);
    CHECK_EQ_INT(s_file_size(fd), size);
    CHECK(pread(fd, back, size, 0) == (ssize_t)size);
    CHECK(memcmp(back, data, size) == 0);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(data);
    free(back);
}

/* Two OUT arguments of a job, one received into a file, one into
 * memory, chunks out of order: the leaves taken on the way give the root
 * ns_commit_root computes from the whole outputs. */
TEST(outputs_arrive_with_the_leaves_of_their_commitment)
{
    ns_job_t job;
    ns_job_init(&job);
    job.dims = 1;
    job.global[0] = 1024;
    job.n_args = 3;
    job.args[0].kind = NS_ARG_U32;
    job.args[1].kind = NS_ARG_OUT;
    job.args[1].size = 5 * NS_CHUNK_BYTES + 16 * 1024 + 77; /* a short leaf */
    job.args[2].kind = NS_ARG_OUT;
    job.args[2].size = 3 * NS_CHUNK_BYTES; /* whole chunks */
    uint64_t n_leaves = ns_commit_leaves(&job), first2 = 0;
    CHECK(n_leaves > 0);
    CHECK_RC(ns_commit_leaf_index(&job, 2, 0, &first2), NS_OK);
    uint8_t *data[3] = {NULL, malloc(job.args[1].size),
                        malloc(job.args[2].size)};
    uint8_t *mem = calloc(1, job.args[2].size);
    randombytes_buf(data[1], job.args[1].size);
    randombytes_buf(data[2], job.args[2].size);
    ns_hash_t id, want, got;
    randombytes_buf(id, sizeof id);
    CHECK_RC(ns_commit_root(&job, id, data, want), NS_OK);
    ns_hash_t *leaves = calloc(n_leaves, sizeof *leaves);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    CHECK(fd >= 0);
    CHECK(write(fd, "stale", 5) == 5); /* emptied, not resumed */
    uint8_t peer[NS_ID_BYTES] = {7};
    ns_fetch_t f;
    ns_fetch_init(&f, id, peer, 4);
    CHECK_RC(ns_fetch_add_output(&f, NS_BLOB_OUTPUT(1), fd, NULL,
                                 job.args[1].size, 1, id, leaves, false),
             NS_OK);
    CHECK_RC(ns_fetch_add_output(&f, NS_BLOB_OUTPUT(2), -1, mem,
                                 job.args[2].size, 2, id, leaves + first2,
                                 false),
             NS_OK);
    CHECK_RC(ns_fetch_add_output(&f, 9, -1, NULL, 10, 2, id, leaves, false),
             NS_ERR_INVAL); /* no sink */
    CHECK(ns_fetch_blob(&f, NS_BLOB_OUTPUT(1))->data == NULL);
    s_wire_t w = {0};
    int done = -1, rounds = 0;
    while (!ns_fetch_done(&f) && rounds++ < 40) {
        CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
        /* every FETCH on the wire is for one blob: the one being pumped */
        ns_chunk_t req;
        CHECK_RC(ns_fetch_decode(w.sent[0].data, w.sent[0].len, &req), NS_OK);
        CHECK_RC(s_serve_reversed(&w, &f, data[req.blob - NS_BLOB_OUTPUT(0)],
                                  job.args[req.blob - NS_BLOB_OUTPUT(0)].size,
                                  UINT64_MAX, &done),
                 NS_OK);
    }
    CHECK(ns_fetch_done(&f));
    CHECK_EQ_INT(ns_fetch_hashed(&f, NS_BLOB_OUTPUT(1)), job.args[1].size);
    CHECK_RC(ns_merkle_root_of(got, (const ns_hash_t *)leaves, n_leaves),
             NS_OK);
    CHECK(memcmp(got, want, NS_HASH_BYTES) == 0);
    CHECK(memcmp(mem, data[2], job.args[2].size) == 0);
    CHECK_EQ_INT(s_file_size(fd), job.args[1].size);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(leaves);
    free(mem);
    free(data[1]);
    free(data[2]);
    ns_job_release(&job);
}

/* An output whose part file holds 3 chunks and a half from a fetch that
 * was cut (submit --resume): with resume, only the rest is asked for, the
 * leaves of the prefix come from the file, the root is the whole's. */
TEST(an_output_resumes_from_its_part_file)
{
    ns_job_t job;
    ns_job_init(&job);
    job.dims = 1;
    job.global[0] = 64;
    job.n_args = 1;
    job.args[0].kind = NS_ARG_OUT;
    job.args[0].size = 7 * NS_CHUNK_BYTES + 999;
    uint64_t size = job.args[0].size, n_leaves = ns_commit_leaves(&job);
    uint8_t *data = malloc(size);
    ns_hash_t *leaves = calloc(n_leaves, sizeof *leaves);
    randombytes_buf(data, size);
    ns_hash_t id, want, got;
    randombytes_buf(id, sizeof id);
    CHECK_RC(ns_commit_root(&job, id, (uint8_t *const[]){data}, want), NS_OK);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, data, 3 * NS_CHUNK_BYTES + 500, 0) ==
          (ssize_t)(3 * NS_CHUNK_BYTES + 500));
    uint8_t peer[NS_ID_BYTES] = {7};
    ns_fetch_t f;
    ns_fetch_init(&f, id, peer, 16);
    CHECK_RC(ns_fetch_add_output(&f, NS_BLOB_OUTPUT(0), fd, NULL, size, 0, id,
                                 leaves, true),
             NS_OK);
    s_wire_t w = {0};
    int done = -1;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 5); /* chunks 3..7 */
    CHECK_RC(s_serve_reversed(&w, &f, data, size, UINT64_MAX, &done), NS_OK);
    CHECK(ns_fetch_done(&f));
    CHECK_RC(ns_merkle_root_of(got, (const ns_hash_t *)leaves, n_leaves),
             NS_OK);
    CHECK(memcmp(got, want, NS_HASH_BYTES) == 0);
    CHECK_EQ_INT(s_file_size(fd), size);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(leaves);
    free(data);
    ns_job_release(&job);
}

TEST(a_cut_transfer_resumes_from_the_chunks_in_its_file)
{
    ns_hash_t job, h;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    uint64_t size = 6 * NS_CHUNK_BYTES + 5;
    uint8_t *data = malloc(size);
    randombytes_buf(data, size);
    ns_hash(h, data, size);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    CHECK(fd >= 0);
    /* a first transfer got 3 chunks and a half, then the peer was gone */
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    s_wire_t w = {0};
    int done = -1;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 7);
    s_drop(&w);
    for (uint64_t k = 0; k < 3; k++) {
        ns_chunk_t c = {{0},           1, k * NS_CHUNK_BYTES,
                        size,          0, data + k * NS_CHUNK_BYTES,
                        NS_CHUNK_BYTES};
        memcpy(c.job_id, job, NS_HASH_BYTES);
        CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_OK);
    }
    CHECK(pwrite(fd, data + 3 * NS_CHUNK_BYTES, 100, 3 * NS_CHUNK_BYTES) ==
          100); /* a torn write of the 4th */
    ns_fetch_release(&f);
    /* the peer is back: in the same process, a rewind asks only what is
     * missing ... */
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    const ns_fetch_blob_t *b = ns_fetch_blob(&f, 1);
    CHECK_EQ_INT(b->resumed, 3 * NS_CHUNK_BYTES);
    CHECK_EQ_INT(ns_fetch_hashed(&f, 1), 3 * NS_CHUNK_BYTES);
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 4); /* chunks 3..6, not 0..6 */
    /* answer two, lose two (a dropped connection), rewind */
    ns_chunk_t req;
    CHECK_RC(ns_fetch_decode(w.sent[0].data, w.sent[0].len, &req), NS_OK);
    CHECK_EQ_INT(req.offset, 3 * NS_CHUNK_BYTES);
    for (uint64_t k = 3; k < 5; k++) {
        ns_chunk_t c = {{0},           1, k * NS_CHUNK_BYTES,
                        size,          0, data + k * NS_CHUNK_BYTES,
                        NS_CHUNK_BYTES};
        memcpy(c.job_id, job, NS_HASH_BYTES);
        CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_OK);
    }
    s_drop(&w);
    ns_fetch_rewind(&f);
    CHECK_EQ_INT(f.in_flight, 0);
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 2); /* chunks 5 and 6 only */
    {
        /* a late answer to a FETCH from before the rewind */
        ns_chunk_t late = {{0},           1, 4 * NS_CHUNK_BYTES,
                           size,          0, data + 4 * NS_CHUNK_BYTES,
                           NS_CHUNK_BYTES};
        memcpy(late.job_id, job, NS_HASH_BYTES);
        CHECK_RC(ns_fetch_on_chunk(&f, &late, &done), NS_ERR_DUPLICATE);
    }
    CHECK_RC(s_serve_reversed(&w, &f, data, size, UINT64_MAX, &done), NS_OK);
    CHECK(ns_fetch_done(&f));
    CHECK_EQ_INT(done, 0);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(data);
}

TEST(a_wrong_blob_is_refused_its_file_emptied_and_fetched_again)
{
    ns_hash_t job, h;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    uint64_t size = 3 * NS_CHUNK_BYTES;
    uint8_t *data = malloc(size);
    randombytes_buf(data, size);
    ns_hash(h, data, size);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    s_wire_t w = {0};
    int done = -1;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    /* one chunk with a flipped byte: each chunk looks right, the whole
     * does not hash to the descriptor's hash */
    CHECK_RC(s_serve_reversed(&w, &f, data, size, NS_CHUNK_BYTES, &done),
             NS_ERR_CORRUPT);
    CHECK_EQ_INT(done, -1);
    CHECK(!ns_fetch_done(&f));
    CHECK_EQ_INT(s_file_size(fd), 0); /* never resumed from */
    /* a retry fetches it whole again */
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_EQ_INT(w.n, 3);
    CHECK_RC(s_serve_reversed(&w, &f, data, size, UINT64_MAX, &done), NS_OK);
    CHECK(ns_fetch_done(&f));
    /* a file holding a wrong prefix is caught the same way */
    ns_fetch_release(&f);
    uint8_t junk[NS_CHUNK_BYTES] = {1};
    CHECK(pwrite(fd, junk, sizeof junk, 0) == (ssize_t)sizeof junk);
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    CHECK_RC(s_serve_reversed(&w, &f, data, size, UINT64_MAX, &done),
             NS_ERR_CORRUPT);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(data);
}

TEST(a_file_sink_takes_no_more_than_the_descriptor_allows)
{
    ns_hash_t job, h;
    uint8_t peer[NS_ID_BYTES] = {7};
    randombytes_buf(job, sizeof job);
    uint64_t size = NS_CHUNK_BYTES + 10;
    uint8_t *data = calloc(1, 2 * NS_CHUNK_BYTES);
    ns_hash(h, data, size);
    char path[256];
    int fd = s_tmpfile(path, sizeof path);
    ns_fetch_t f;
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, 0, h), NS_ERR_INVAL);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    s_wire_t w = {0};
    int done = -1;
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    s_drop(&w);
    /* the last chunk longer than what is left, a larger total, a chunk
     * past the end */
    ns_chunk_t c = {{0}, 1, NS_CHUNK_BYTES, size, 0, data, NS_CHUNK_BYTES};
    memcpy(c.job_id, job, NS_HASH_BYTES);
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    c.total = 2 * NS_CHUNK_BYTES;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    c.offset = 2 * NS_CHUNK_BYTES;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_INVAL);
    CHECK_EQ_INT(s_file_size(fd), 0); /* nothing written */
    ns_fetch_release(&f);
    close(fd);
    /* an unwritable sink: the chunk is not taken, the error is I/O */
    fd = open(path, O_RDONLY);
    ns_fetch_init(&f, job, peer, 8);
    CHECK_RC(ns_fetch_add_file(&f, 1, fd, size, h), NS_OK);
    CHECK_RC(ns_fetch_pump(&f, s_send, &w), NS_OK);
    s_drop(&w);
    c.offset = 0;
    c.total = size;
    CHECK_RC(ns_fetch_on_chunk(&f, &c, &done), NS_ERR_IO);
    CHECK_EQ_INT(ns_fetch_blob(&f, 1)->got, 0);
    ns_fetch_release(&f);
    close(fd);
    unlink(path);
    free(data);
}

/* A blob store of 4 chunks in a new temporary directory (dir). */
static ns_blobs_t *s_blobs_tmp(char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/ns_blobs_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    int err = 0;
    ns_blobs_t *b = ns_blobs_open(dir, 4 * NS_CHUNK_BYTES, &err);
    CHECK(b != NULL);
    return b;
}

TEST(blob_store_partial_files_complete_map_and_lock)
{
    char dir[256];
    ns_blobs_t *b = s_blobs_tmp(dir, sizeof dir);
    uint64_t size = 2 * NS_CHUNK_BYTES;
    uint8_t *data = malloc(size);
    randombytes_buf(data, size);
    ns_hash_t h;
    ns_hash(h, data, size);
    int fd = -1, fd2 = -1;
    CHECK_RC(ns_blobs_partial(b, h, 5 * NS_CHUNK_BYTES, &fd), NS_ERR_TOOBIG);
    CHECK_RC(ns_blobs_partial(b, h, size, &fd), NS_OK);
    /* a second transfer of the same blob does not share the file */
    CHECK_RC(ns_blobs_partial(b, h, size, &fd2), NS_ERR_EXISTS);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    CHECK(!ns_blobs_has(b, h));
    CHECK_RC(ns_blobs_complete(b, h, size), NS_OK);
    CHECK(ns_blobs_has(b, h));
    close(fd);
    const uint8_t *m = NULL;
    size_t len = 0;
    CHECK_RC(ns_blobs_map(b, h, &m, &len), NS_OK);
    CHECK_EQ_INT(len, size);
    CHECK(memcmp(m, data, size) == 0);
    ns_blobs_unmap(m, len);
    /* a damaged blob is not mapped, and goes */
    char path[600], hex[65];
    ns_hex(hex, h, NS_HASH_BYTES);
    snprintf(path, sizeof path, "%s/%s", dir, hex);
    fd = open(path, O_WRONLY);
    CHECK(pwrite(fd, "x", 1, 7) == 1);
    close(fd);
    CHECK_RC(ns_blobs_map(b, h, &m, &len), NS_ERR_NOTFOUND);
    CHECK(!ns_blobs_has(b, h));
    /* an unwritable store says so */
    if (geteuid() != 0) {
        CHECK(chmod(dir, 0500) == 0);
        CHECK_RC(ns_blobs_partial(b, h, size, &fd), NS_ERR_IO);
        CHECK(chmod(dir, 0700) == 0);
    }
    /* partial files count against the cap and are evicted */
    CHECK_RC(ns_blobs_partial(b, h, size, &fd), NS_OK);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    close(fd);
    ns_hash_t h2;
    randombytes_buf(h2, sizeof h2);
    CHECK_RC(ns_blobs_partial(b, h2, 3 * NS_CHUNK_BYTES, &fd), NS_OK);
    close(fd);
    snprintf(path, sizeof path, "%s/%s.part", dir, hex);
    CHECK(access(path, F_OK) != 0); /* the older partial made room */
    ns_blobs_discard(b, h2);
    ns_blobs_close(&b);
    rmdir(dir);
    free(data);
}

TEST(blob_store_keeps_outputs_by_hash_and_opens_unchecked)
{
    char dir[256];
    ns_blobs_t *b = s_blobs_tmp(dir, sizeof dir);
    size_t size = NS_CHUNK_BYTES + 123;
    uint8_t *data = malloc(size);
    randombytes_buf(data, size);
    ns_hash_t h, want;
    ns_hash(want, data, size);
    CHECK_RC(ns_blobs_keep(b, data, size, h), NS_OK);
    CHECK(memcmp(h, want, NS_HASH_BYTES) == 0); /* named by its hash */
    CHECK(ns_blobs_has(b, h));
    CHECK_RC(ns_blobs_keep(b, data, size, h), NS_OK); /* again: a touch */
    const uint8_t *m = NULL;
    size_t len = 0;
    CHECK_RC(ns_blobs_map(b, h, &m, &len), NS_OK);
    CHECK(len == size && memcmp(m, data, size) == 0);
    ns_blobs_unmap(m, len);
    int fd = -1;
    uint64_t got = 0;
    CHECK_RC(ns_blobs_open_ro(b, h, &fd, &got), NS_OK);
    CHECK(got == size);
    uint8_t piece[16];
    CHECK(pread(fd, piece, sizeof piece, 1000) == (ssize_t)sizeof piece);
    CHECK(memcmp(piece, data + 1000, sizeof piece) == 0);
    close(fd);
    ns_hash_t absent;
    randombytes_buf(absent, sizeof absent);
    CHECK_RC(ns_blobs_open_ro(b, absent, &fd, &got), NS_ERR_NOTFOUND);
    CHECK(fd == -1);
    /* larger than the whole store: not kept */
    uint8_t *big = calloc(1, 5 * NS_CHUNK_BYTES);
    CHECK_RC(ns_blobs_keep(b, big, 5 * NS_CHUNK_BYTES, h), NS_ERR_TOOBIG);
    CHECK(!ns_blobs_has(b, h));
    free(big);
    /* a transfer filling the same blob now: left to it */
    randombytes_buf(data, size);
    ns_hash(want, data, size);
    CHECK_RC(ns_blobs_partial(b, want, size, &fd), NS_OK);
    CHECK_RC(ns_blobs_keep(b, data, size, h), NS_ERR_EXISTS);
    ns_blobs_discard(b, want);
    close(fd);
    ns_blobs_close(&b);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(data);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(blobs_of_known_and_learnt_size_arrive_whole);
    RUN(chunks_nobody_asked_for_are_refused);
    RUN(serve_refuses_offsets_past_the_end);
    RUN(a_blob_is_received_into_a_file_and_hashed_as_it_arrives);
    RUN(outputs_arrive_with_the_leaves_of_their_commitment);
    RUN(a_cut_transfer_resumes_from_the_chunks_in_its_file);
    RUN(an_output_resumes_from_its_part_file);
    RUN(a_wrong_blob_is_refused_its_file_emptied_and_fetched_again);
    RUN(a_file_sink_takes_no_more_than_the_descriptor_allows);
    RUN(blob_store_partial_files_complete_map_and_lock);
    RUN(blob_store_keeps_outputs_by_hash_and_opens_unchecked);
    return ns_test_finish("node_transfer");
}
