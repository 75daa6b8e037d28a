/* test_blobs.c - a requester's inputs into the blob store (blobs.h,
 * ns_blobs_copy_t) and a saved job's inputs by hash (jobdir.h), on real
 * files in a temporary directory:
 *
 *  - a file of several copy pieces is copied a piece per step (nothing
 *    under a blob's name until the end), stored under the BLAKE2b-256 of
 *    its bytes, the mapping holds them, nothing but the blob is left; editing
 *    or deleting the user's file afterwards changes nothing mapped or
 *    stored;
 *  - each way a file or the store can fail is its own error with one line
 *    naming the file and the cause (missing, empty, not a regular file,
 *    over the limit, over the store's cap, a store that cannot be
 *    written), and leaves nothing in the store;
 *  - a copy that a crash left is removed by the next open, one being
 *    written (locked) is not;
 *  - jobdir: a saved job links its inputs (no copy), loads them from the
 *    store, takes them back from its link when the store evicted them,
 *    reads an earlier version's directory that holds whole copies, and
 *    names the input when neither has the right bytes.
 */
#include "../check.h"

#include "nightshift/blobs.h"
#include "nightshift/jobdir.h"
#include "nightshift/mp.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char s_root[128];

static void s_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", s_root, name);
}

static int s_write(const char *path, const uint8_t *data, size_t len)
{
    return ns_file_write_atomic(path, data, len, 0600);
}

/* len random bytes (malloc'd) written to the file src, and a store at
 * dir of cap bytes: NULL (and nothing to free) when either fails. */
static uint8_t *s_file_and_store(const char *src, size_t len, const char *dir,
                                 uint64_t cap, ns_blobs_t **b)
{
    int e = 0;
    uint8_t *data = malloc(len);
    if (data) {
        randombytes_buf(data, len);
        if (s_write(src, data, len) == NS_OK)
            *b = ns_blobs_open(dir, cap, &e);
    }
    if (!data || !*b) {
        free(data);
        return NULL;
    }
    return data;
}

/* Entries of dir other than . and ..; first one that starts with prefix
 * into found (when given). */
static int s_count(const char *dir, const char *prefix, char *found, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        if (found && n == 0)
            snprintf(found, cap, "%s", e->d_name);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

TEST(a_file_is_copied_by_pieces_and_stays_as_stored)
{
    char dir[192], src[192], blob[300], hex[2 * NS_HASH_BYTES + 1];
    s_path(dir, sizeof dir, "store1");
    s_path(src, sizeof src, "in1.bin");
    size_t len = 3 * NS_BLOBS_COPY_PIECE + 12345; /* pieces and a rest */
    ns_blobs_t *b = NULL;
    uint8_t *data = s_file_and_store(src, len, dir, 64u << 20, &b);
    if (!CHECK(data != NULL))
        return;
    ns_hash_t id, want;
    ns_hash(want, data, len);
    uint64_t size = 0;
    char err[512] = "";
    int rc = NS_OK;
    /* a piece at a time: nothing under a blob's name until the end */
    ns_blobs_copy_t *c =
        ns_blobs_copy_start(b, src, UINT64_MAX, &rc, err, sizeof err);
    if (!CHECK(c != NULL)) {
        fprintf(stderr, "  err: %s\n", err);
        return;
    }
    bool done = false;
    int steps = 0;
    while (!done &&
           CHECK_RC(ns_blobs_copy_step(c, 1, &done, err, sizeof err), NS_OK)) {
        steps++;
        if (!done) {
            uint64_t whole = (uint64_t)steps * NS_BLOBS_COPY_PIECE;
            CHECK_EQ_INT(ns_blobs_copy_bytes(c), whole < len ? whole : len);
            CHECK_EQ_INT(s_count(dir, ".in-", NULL, 0), 1);
            CHECK_EQ_INT(s_count(dir, NULL, NULL, 0), 1);
        }
    }
    CHECK_EQ_INT(steps, 5); /* 3 whole pieces, the rest, the end */
    const uint8_t *map = NULL;
    CHECK_RC(ns_blobs_copy_map(c, id, &map, &size, err, sizeof err), NS_OK);
    ns_blobs_copy_free(&c);
    CHECK_MEM(id, want, NS_HASH_BYTES);
    CHECK_EQ_INT(size, len);
    CHECK(ns_blobs_has(b, id));
    CHECK_EQ_INT(ns_blobs_bytes(b), len);
    ns_hex(hex, id, NS_HASH_BYTES);
    snprintf(blob, sizeof blob, "%s/%s", dir, hex);
    struct stat st;
    CHECK(stat(blob, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_EQ_INT(s_count(dir, NULL, NULL, 0), 1); /* the blob alone */
    /* the user overwrites and then deletes the file: the copy is the
     * bytes as they were read */
    uint8_t *other = malloc(len);
    if (other) {
        memset(other, 0x5A, len);
        int f = open(src, O_WRONLY);
        CHECK(f >= 0 && pwrite(f, other, len, 0) == (ssize_t)len);
        if (f >= 0)
            close(f);
    }
    CHECK(unlink(src) == 0);
    if (map)
        CHECK_MEM(map, data, len);
    const uint8_t *again = NULL;
    size_t again_len = 0;
    CHECK_RC(ns_blobs_map(b, id, &again, &again_len), NS_OK); /* checked */
    CHECK_EQ_INT(again_len, len);
    ns_blobs_unmap(again, again_len);
    /* the same bytes again: the same blob, still one file */
    CHECK_RC(s_write(src, data, len), NS_OK);
    const uint8_t *second = NULL;
    CHECK_RC(ns_blobs_add_map(b, src, UINT64_MAX, id, &second, &size, err,
                              sizeof err),
             NS_OK);
    ns_blobs_unmap(second, size);
    CHECK_EQ_INT(s_count(dir, NULL, NULL, 0), 1);
    /* an evicted blob: a mapping keeps its pages */
    CHECK(unlink(blob) == 0);
    if (map)
        CHECK_MEM(map, data, len);
    ns_blobs_unmap(map, len);
    ns_blobs_close(&b);
    free(other);
    free(data);
}

/* Each failure is an error with one line naming the file and the cause,
 * and leaves the store empty. */
static void s_fails(ns_blobs_t *b, const char *dir, const char *path,
                    uint64_t max, int want_rc, const char *want_text)
{
    ns_hash_t id;
    uint64_t size = 1;
    const uint8_t *data = (const uint8_t *)"x";
    char err[512] = "";
    CHECK_RC(ns_blobs_add_map(b, path, max, id, &data, &size, err, sizeof err),
             want_rc);
    CHECK(data == NULL);
    CHECK_EQ_INT(size, 0);
    if (!CHECK(strstr(err, path) != NULL && strstr(err, want_text) != NULL &&
               !strchr(err, '\n')))
        fprintf(stderr, "  err: %s\n", err);
    CHECK_EQ_INT(s_count(dir, NULL, NULL, 0), 0);
}

TEST(each_failure_names_the_file_and_its_cause)
{
    char dir[192], src[192], empty[192], gone[192];
    s_path(dir, sizeof dir, "store2");
    s_path(src, sizeof src, "in2.bin");
    s_path(empty, sizeof empty, "empty.bin");
    s_path(gone, sizeof gone, "gone.bin");
    uint8_t data[4096];
    randombytes_buf(data, sizeof data);
    CHECK_RC(s_write(src, data, sizeof data), NS_OK);
    CHECK_RC(s_write(empty, data, 0), NS_OK);
    int e = 0;
    ns_blobs_t *b = ns_blobs_open(dir, 2048, &e); /* smaller than the file */
    if (!CHECK(b != NULL))
        return;
    s_fails(b, dir, gone, UINT64_MAX, NS_ERR_NOTFOUND, "not found");
    s_fails(b, dir, empty, UINT64_MAX, NS_ERR_INVAL, "empty");
    s_fails(b, dir, s_root, UINT64_MAX, NS_ERR_INVAL, "not a regular file");
    s_fails(b, dir, src, 100, NS_ERR_TOOBIG, "100-byte limit");
    s_fails(b, dir, src, UINT64_MAX, NS_ERR_TOOBIG, "node.input_cache_bytes");
    ns_blobs_close(&b);

    /* a store that cannot be written (a file size limit: the disk full
     * for this process): the cause is named, nothing is left */
    b = ns_blobs_open(dir, 64u << 20, &e);
    if (!CHECK(b != NULL))
        return;
    uint8_t *big = calloc(1, 3u << 20);
    char bigpath[192];
    s_path(bigpath, sizeof bigpath, "big.bin");
    CHECK(big && s_write(bigpath, big, 3u << 20) == NS_OK);
    struct rlimit old, lim = {1u << 20, 1u << 20};
    getrlimit(RLIMIT_FSIZE, &old);
    lim.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    s_fails(b, dir, bigpath, UINT64_MAX, NS_ERR_IO, "File too large");
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_DFL);
    free(big);
    ns_blobs_close(&b);
}

TEST(a_copy_left_by_a_crash_goes_one_being_written_stays)
{
    char dir[192], left[300], busy[300];
    s_path(dir, sizeof dir, "store3");
    CHECK_RC(ns_mkdir_p(dir, 0700), NS_OK);
    snprintf(left, sizeof left, "%s/.in-AAAAAA", dir);
    snprintf(busy, sizeof busy, "%s/.in-BBBBBB", dir);
    CHECK_RC(s_write(left, (const uint8_t *)"x", 1), NS_OK);
    CHECK_RC(s_write(busy, (const uint8_t *)"y", 1), NS_OK);
    int held = open(busy, O_RDONLY);
    CHECK(held >= 0 && flock(held, LOCK_EX) == 0);
    int e = 0;
    ns_blobs_t *b = ns_blobs_open(dir, 0, &e);
    CHECK(b != NULL);
    CHECK(access(left, F_OK) != 0);
    CHECK(access(busy, F_OK) == 0);
    CHECK_EQ_INT(ns_blobs_bytes(b), 0); /* copies are not blobs */
    ns_blobs_close(&b);
    if (held >= 0)
        close(held);
}

/* A job descriptor whose one input is data, packed. */
static void s_job(ns_job_t *job, ns_buf_t *packed, const uint8_t *data,
                  size_t len)
{
    char err[256];
    const ns_builtin_t *k = ns_builtin_find("vector_add");
    ns_job_init(job);
    snprintf(job->builtin, sizeof job->builtin, "vector_add");
    ns_hash(job->source_hash, k->source, k->source_len);
    snprintf(job->entry, sizeof job->entry, "%s", k->entry);
    job->dims = 1;
    job->global[0] = 4;
    job->n_args = 2;
    job->args[0].kind = NS_ARG_IN;
    job->args[0].size = len;
    ns_hash(job->args[0].hash, data, len);
    job->args[1].kind = NS_ARG_OUT;
    job->args[1].size = 16;
    CHECK_RC(ns_job_finalize(job, err, sizeof err), NS_OK);
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_buf_init(packed);
    ns_mp_writer_init(&w, &pk, packed);
    ns_job_pack(&pk, job);
    CHECK_RC(w.err, NS_OK);
}

/* Load the saved job hex; its input must be data. */
static int s_load(const char *dd, const char *hex, ns_blobs_t *b,
                  const uint8_t *data, size_t len, char *err, size_t errlen)
{
    ns_job_t job;
    ns_job_init(&job);
    const uint8_t *mapped[NS_MAX_ARGS] = {0};
    ns_input_t inputs[NS_MAX_ARGS];
    char(*outs)[PATH_MAX] = calloc(NS_MAX_ARGS, PATH_MAX);
    memset(inputs, 0, sizeof inputs);
    int rc =
        ns_jobdir_load(dd, hex, &job, b, mapped, inputs, outs, err, errlen);
    if (rc == NS_OK) {
        CHECK_EQ_INT(inputs[0].len, len);
        CHECK(inputs[0].verified);
        if (inputs[0].len == len)
            CHECK_MEM(inputs[0].data, data, len);
        CHECK_STR(outs[1], "/tmp/out.bin");
    }
    ns_blobs_unmap(mapped[0], inputs[0].len);
    ns_job_release(&job);
    free(outs);
    return rc;
}

TEST(a_saved_job_finds_its_inputs_by_hash)
{
    char dd[192], store[300], src[192], link[400], blob[400];
    char hex[2 * NS_HASH_BYTES + 1], id_hex[2 * NS_HASH_BYTES + 1];
    char err[1024] = "";
    s_path(dd, sizeof dd, "dd");
    snprintf(store, sizeof store, "%s/blobs", dd);
    s_path(src, sizeof src, "in4.bin");
    size_t len = NS_BLOBS_COPY_PIECE + 77;
    ns_blobs_t *b = NULL;
    uint8_t *data = s_file_and_store(src, len, store, 0, &b);
    if (!CHECK(data != NULL))
        return;
    ns_hash_t id;
    uint64_t size = 0;
    const uint8_t *map = NULL;
    CHECK_RC(
        ns_blobs_add_map(b, src, UINT64_MAX, id, &map, &size, err, sizeof err),
        NS_OK);
    ns_blobs_unmap(map, size);
    ns_job_t job;
    ns_buf_t packed;
    s_job(&job, &packed, data, len);
    memset(hex, 'a', 64);
    hex[64] = '\0';
    const char *outs[NS_MAX_ARGS] = {NULL, "/tmp/out.bin"};
    CHECK_RC(ns_jobdir_save(dd, hex, packed.data, packed.len, &job, b, outs),
             NS_OK);
    /* the input is a link to the blob, not a copy */
    snprintf(link, sizeof link, "%s/jobs/%s/in0.bin", dd, hex);
    ns_hex(id_hex, id, NS_HASH_BYTES);
    snprintf(blob, sizeof blob, "%s/%s", store, id_hex);
    struct stat a, c;
    CHECK(stat(link, &a) == 0 && stat(blob, &c) == 0 && a.st_ino == c.st_ino);
    CHECK_RC(s_load(dd, hex, b, data, len, err, sizeof err), NS_OK);
    /* evicted from the store: taken back from the link, into the store */
    CHECK(unlink(blob) == 0);
    CHECK_RC(s_load(dd, hex, b, data, len, err, sizeof err), NS_OK);
    CHECK(access(blob, F_OK) == 0);
    /* an earlier version's directory: a whole copy, no blob */
    CHECK(unlink(blob) == 0 && unlink(link) == 0);
    CHECK_RC(s_write(link, data, len), NS_OK);
    CHECK_RC(s_load(dd, hex, b, data, len, err, sizeof err), NS_OK);
    CHECK(access(blob, F_OK) == 0);
    /* neither has the bytes: the input is named */
    CHECK(unlink(blob) == 0);
    uint8_t *bad = malloc(len);
    if (bad) {
        memcpy(bad, data, len);
        bad[len / 2] ^= 1;
        CHECK_RC(s_write(link, bad, len), NS_OK);
    }
    CHECK_RC(s_load(dd, hex, b, data, len, err, sizeof err), NS_ERR_CORRUPT);
    if (!CHECK(strstr(err, "input 0") && strstr(err, "does not hash")))
        fprintf(stderr, "  err: %s\n", err);
    CHECK(unlink(link) == 0);
    CHECK_RC(s_load(dd, hex, b, data, len, err, sizeof err), NS_ERR_NOTFOUND);
    if (!CHECK(strstr(err, "input 0") && strstr(err, "not found")))
        fprintf(stderr, "  err: %s\n", err);
    free(bad);
    ns_buf_release(&packed);
    ns_job_release(&job);
    ns_blobs_close(&b);
    free(data);
}

/* Every map checks the blob against its name: a file changed in place
 * since an earlier map is found corrupt and deleted. */
TEST(a_blob_changed_in_place_is_caught_on_its_next_map)
{
    char src[200], dir[200], blob[400], hex[2 * NS_HASH_BYTES + 1];
    ns_blobs_t *b = NULL;
    ns_hash_t id;
    s_path(src, sizeof src, "inplace.bin");
    s_path(dir, sizeof dir, "inplace-store");
    size_t len = 3 << 20;
    uint8_t *data = s_file_and_store(src, len, dir, 0, &b);
    if (!CHECK(data != NULL))
        return;
    const uint8_t *map = NULL;
    uint64_t size = 0;
    char err[256];
    CHECK_RC(
        ns_blobs_add_map(b, src, UINT64_MAX, id, &map, &size, err, sizeof err),
        NS_OK);
    ns_blobs_unmap(map, size);
    for (int k = 0; k < 3; k++) {
        size_t got = 0;
        CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
        CHECK(got == len && map && memcmp(map, data, len) == 0);
        ns_blobs_unmap(map, got);
    }
    ns_hex(hex, id, NS_HASH_BYTES);
    snprintf(blob, sizeof blob, "%s/%s", dir, hex);
    int f = open(blob, O_WRONLY);
    uint8_t x = (uint8_t)(data[len / 2] ^ 0x01);
    CHECK(f >= 0 && pwrite(f, &x, 1, (off_t)(len / 2)) == 1);
    if (f >= 0)
        close(f);
    size_t got = 0;
    CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_ERR_NOTFOUND);
    CHECK(access(blob, F_OK) != 0); /* deleted */
    ns_blobs_close(&b);
    free(data);
}

/* A map trusts its earlier hash of a file unchanged since, but only once
 * the file has been still for 2 s before that hash (a change within the
 * file clock's tick would leave its times as they were); a change after
 * a trusted map is caught all the same. */
TEST(a_still_blob_is_hashed_once_a_changed_one_again)
{
    char src[200], dir[200], blob[400], hex[2 * NS_HASH_BYTES + 1];
    ns_blobs_t *b = NULL;
    ns_hash_t id;
    s_path(src, sizeof src, "still.bin");
    s_path(dir, sizeof dir, "still-store");
    size_t len = 1 << 20;
    uint8_t *data = s_file_and_store(src, len, dir, 0, &b);
    if (!CHECK(data != NULL))
        return;
    const uint8_t *map = NULL;
    uint64_t size = 0;
    size_t got = 0;
    char err[256];
    CHECK_RC(
        ns_blobs_add_map(b, src, UINT64_MAX, id, &map, &size, err, sizeof err),
        NS_OK);
    ns_blobs_unmap(map, size);
    /* just written: every map hashes it */
    for (int k = 1; k <= 2; k++) {
        CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
        ns_blobs_unmap(map, got);
        CHECK(ns_blobs_map_hashed(b) == (uint64_t)k * len);
    }
    /* still for over 2 s: hashed once more, then trusted */
    struct timespec nap = {2, 200 * 1000000};
    nanosleep(&nap, NULL);
    for (int k = 0; k < 3; k++) {
        CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
        CHECK(got == len && memcmp(map, data, len) == 0);
        ns_blobs_unmap(map, got);
        CHECK(ns_blobs_map_hashed(b) == 3 * (uint64_t)len);
    }
    /* the records outlive the handle (<dir>/.verified): another process
     * takes them, unless they do not check or are a day old */
    char vpath[400];
    snprintf(vpath, sizeof vpath, "%s/.verified", dir);
    ns_blobs_close(&b);
    int e = 0;
    if (!CHECK((b = ns_blobs_open(dir, 0, &e)) != NULL))
        return;
    CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
    ns_blobs_unmap(map, got);
    CHECK(ns_blobs_map_hashed(b) == 0);
    ns_blobs_close(&b);
    uint8_t *vf = NULL;
    size_t vlen = 0;
    CHECK_RC(ns_file_read(vpath, 1 << 16, &vf, &vlen), NS_OK);
    /* one record: magic(8) count(4), id(32) dev ino size mtime hashed, check */
    if (CHECK(vf && vlen == 12 + 72 + 16)) {
        int64_t old = 0;
        memcpy(&old, vf + 12 + 64, 8);
        old -= INT64_C(25) * 3600 * 1000000000; /* a day and an hour ago */
        memcpy(vf + 12 + 64, &old, 8);
        crypto_generichash(vf + vlen - 16, 16, vf, vlen - 16, NULL, 0);
        CHECK_RC(ns_file_write_atomic(vpath, vf, vlen, 0600), NS_OK);
        CHECK((b = ns_blobs_open(dir, 0, &e)) != NULL);
        CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
        ns_blobs_unmap(map, got);
        CHECK(ns_blobs_map_hashed(b) == len); /* too old: hashed */
        ns_blobs_close(&b);
        vf[20] ^= 1; /* a torn file is no record */
        CHECK_RC(ns_file_write_atomic(vpath, vf, vlen, 0600), NS_OK);
        CHECK((b = ns_blobs_open(dir, 0, &e)) != NULL);
        CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_OK);
        ns_blobs_unmap(map, got);
        CHECK(ns_blobs_map_hashed(b) == len);
    }
    free(vf);
    if (!b && !CHECK((b = ns_blobs_open(dir, 0, &e)) != NULL))
        return;
    /* changed in place right after a trusted map, same size */
    ns_hex(hex, id, NS_HASH_BYTES);
    snprintf(blob, sizeof blob, "%s/%s", dir, hex);
    int f = open(blob, O_WRONLY);
    uint8_t x = (uint8_t)(data[7] ^ 0x80);
    CHECK(f >= 0 && pwrite(f, &x, 1, 7) == 1);
    if (f >= 0)
        close(f);
    CHECK_RC(ns_blobs_map(b, id, &map, &got), NS_ERR_NOTFOUND);
    CHECK(access(blob, F_OK) != 0); /* deleted */
    ns_blobs_close(&b);
    free(data);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    snprintf(s_root, sizeof s_root, "/tmp/ns-test-blobs-%d", (int)getpid());
    if (ns_mkdir_p(s_root, 0700) != NS_OK)
        return 1;
    RUN(a_file_is_copied_by_pieces_and_stays_as_stored);
    RUN(each_failure_names_the_file_and_its_cause);
    RUN(a_copy_left_by_a_crash_goes_one_being_written_stays);
    RUN(a_saved_job_finds_its_inputs_by_hash);
    RUN(a_blob_changed_in_place_is_caught_on_its_next_map);
    RUN(a_still_blob_is_hashed_once_a_changed_one_again);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_root);
    return ns_test_finish("node_blobs");
}
