/* blobs.c - content-addressed blobs on disk, LRU-bounded (blobs.h). */
#define _GNU_SOURCE /* fallocate, sync_file_range */
#include "nightshift/blobs.h"

#include "nightshift/job.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <sodium.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A blob ns_blobs_map hashed and found right: its file as fstat saw it
 * just before the hash began, and when that was. A later map of the same
 * file, unchanged since (device, inode, size, mtime) and settled at the
 * hash (ns_mtime_settled, util.h), takes that hash instead of hashing
 * the whole blob again: the same weights for a thousand jobs are hashed
 * once per process, not once per job. Not ctime: a job directory's hard
 * link to the blob (jobdir.h) moves it for every job.
 *
 * The records outlive the process in <dir>/.verified (written when the
 * handle closes, read when one opens; checksummed, not synced: a lost or
 * torn file only means hashing again), so that a light peer, a new
 * process for every `submit`, does not hash the same inputs each time.
 * A record older than S_VERIFIED_MAX_AGE_NS is not trusted: a blob is
 * read whole and hashed again at least once a day, which is what catches
 * a disk that changed its bytes under an unchanged mtime. */
#define S_VERIFIED 64
#define S_VERIFIED_FILE ".verified"
#define S_VERIFIED_MAGIC "nsblobv1"
#define S_VERIFIED_MAX_AGE_NS (INT64_C(24) * 3600 * 1000000000)
/* ns_blobs_map touches a blob (its LRU time) only when its mtime is this
 * old: a touch is a write to the mtime, and unsettles the record. */
#define S_TOUCH_AFTER_S 60

typedef struct {
    ns_hash_t id;
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
    int64_t hashed_ns; /* ns_now_ns before the fstat */
    bool used;
} s_verified_t;

struct ns_blobs {
    char dir[PATH_MAX];
    uint64_t cap;
    uint64_t bytes; /* sum of the blobs' sizes, as last scanned */
    s_verified_t verified[S_VERIFIED];
    uint32_t verified_next; /* the slot a new record takes (round robin) */
    bool verified_dirty;    /* records changed since they were read */
    uint64_t map_hashed;    /* bytes ns_blobs_map hashed */
};

static s_verified_t *s_verified_find(ns_blobs_t *b, const ns_hash_t id)
{
    for (uint32_t i = 0; i < S_VERIFIED; i++)
        if (b->verified[i].used &&
            memcmp(b->verified[i].id, id, NS_HASH_BYTES) == 0)
            return &b->verified[i];
    return NULL;
}

/* Whether v vouches for the file as st shows it now. */
static bool s_verified_holds(const s_verified_t *v, const struct stat *st)
{
    return v && v->dev == st->st_dev && v->ino == st->st_ino &&
           v->size == st->st_size && v->mtime_ns == ns_mtime_ns(st) &&
           ns_mtime_settled(v->mtime_ns, v->hashed_ns) &&
           v->hashed_ns > ns_now_ns() - S_VERIFIED_MAX_AGE_NS;
}

/* The records as they are kept in <dir>/.verified: magic, count (u32),
 * that many records (s_verified_rec_t, in this machine's byte order: the
 * file never leaves it), then a BLAKE2b-128 of all before it. */
typedef struct {
    ns_hash_t id;
    uint64_t dev, ino;
    int64_t size, mtime_ns, hashed_ns;
} s_verified_rec_t;

#define S_VERIFIED_HEAD (8 + 4)
#define S_VERIFIED_MAX_FILE                                                    \
    (S_VERIFIED_HEAD + S_VERIFIED * sizeof(s_verified_rec_t) + 16)

static void s_verified_path(const ns_blobs_t *b, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", b->dir, S_VERIFIED_FILE);
}

static void s_verified_load(ns_blobs_t *b)
{
    char path[PATH_MAX + 32];
    uint8_t *buf = NULL;
    size_t len = 0;
    s_verified_path(b, path, sizeof path);
    if (ns_file_read(path, S_VERIFIED_MAX_FILE, &buf, &len) != NS_OK)
        return;
    uint8_t check[16];
    uint32_t n = 0;
    if (len >= S_VERIFIED_HEAD + 16)
        memcpy(&n, buf + 8, 4);
    if (len < S_VERIFIED_HEAD + 16 || memcmp(buf, S_VERIFIED_MAGIC, 8) ||
        n > S_VERIFIED ||
        len != S_VERIFIED_HEAD + n * sizeof(s_verified_rec_t) + 16 ||
        crypto_generichash(check, sizeof check, buf, len - 16, NULL, 0) != 0 ||
        sodium_memcmp(check, buf + len - 16, 16) != 0) {
        free(buf);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        s_verified_rec_t r;
        memcpy(&r, buf + S_VERIFIED_HEAD + i * sizeof r, sizeof r);
        s_verified_t *v = &b->verified[i];
        memcpy(v->id, r.id, NS_HASH_BYTES);
        v->dev = (dev_t)r.dev;
        v->ino = (ino_t)r.ino;
        v->size = (off_t)r.size;
        v->mtime_ns = r.mtime_ns;
        v->hashed_ns = r.hashed_ns;
        v->used = true;
    }
    b->verified_next = n % S_VERIFIED;
    free(buf);
}

static void s_verified_save(ns_blobs_t *b)
{
    uint8_t buf[S_VERIFIED_MAX_FILE];
    uint32_t n = 0;
    memcpy(buf, S_VERIFIED_MAGIC, 8);
    for (uint32_t i = 0; i < S_VERIFIED; i++) {
        const s_verified_t *v = &b->verified[i];
        if (!v->used)
            continue;
        s_verified_rec_t r;
        memset(&r, 0, sizeof r);
        memcpy(r.id, v->id, NS_HASH_BYTES);
        r.dev = (uint64_t)v->dev;
        r.ino = (uint64_t)v->ino;
        r.size = (int64_t)v->size;
        r.mtime_ns = v->mtime_ns;
        r.hashed_ns = v->hashed_ns;
        memcpy(buf + S_VERIFIED_HEAD + n * sizeof r, &r, sizeof r);
        n++;
    }
    memcpy(buf + 8, &n, 4);
    size_t len = S_VERIFIED_HEAD + n * sizeof(s_verified_rec_t);
    crypto_generichash(buf + len, 16, buf, len, NULL, 0);
    len += 16;
    char path[PATH_MAX + 32], tmp[PATH_MAX + 48];
    s_verified_path(b, path, sizeof path);
    /* named as a copy being written: one a crash leaves is swept */
    snprintf(tmp, sizeof tmp, "%s/.in-verified.%d", b->dir, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    bool ok = write(fd, buf, len) == (ssize_t)len;
    close(fd);
    if (!ok || rename(tmp, path) != 0)
        (void)unlink(tmp);
}

static void s_verified_put(ns_blobs_t *b, const ns_hash_t id,
                           const struct stat *st, int64_t hashed_ns)
{
    s_verified_t *v = s_verified_find(b, id);
    if (!v) {
        v = &b->verified[b->verified_next];
        b->verified_next = (b->verified_next + 1) % S_VERIFIED;
    }
    memcpy(v->id, id, NS_HASH_BYTES);
    v->dev = st->st_dev;
    v->ino = st->st_ino;
    v->size = st->st_size;
    v->mtime_ns = ns_mtime_ns(st);
    v->hashed_ns = hashed_ns;
    v->used = true;
    b->verified_dirty = true;
}

static void s_path(const ns_blobs_t *b, const ns_hash_t id, char *out,
                   size_t cap)
{
    char hex[2 * NS_HASH_BYTES + 1];
    ns_hex(hex, id, NS_HASH_BYTES);
    snprintf(out, cap, "%s/%s", b->dir, hex);
}

#define S_PART ".part"
#define S_NAME_MAX (2 * NS_HASH_BYTES + sizeof S_PART)

/* <64 hex> or <64 hex>.part */
static bool s_is_blob_name(const char *name)
{
    size_t n = strlen(name);
    if (n != 2 * NS_HASH_BYTES && (n != 2 * NS_HASH_BYTES + strlen(S_PART) ||
                                   strcmp(name + 2 * NS_HASH_BYTES, S_PART)))
        return false;
    return strspn(name, "0123456789abcdef") == 2 * NS_HASH_BYTES;
}

/* Sum the blob files; with need > 0, also delete the least recently used
 * until bytes + need fits the cap. */
static int s_scan(ns_blobs_t *b, uint64_t need)
{
    for (;;) {
        DIR *d = opendir(b->dir);
        if (!d)
            return NS_ERR_IO;
        uint64_t sum = 0;
        time_t oldest_t = 0;
        char oldest[S_NAME_MAX] = "";
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!s_is_blob_name(e->d_name))
                continue;
            struct stat st;
            if (fstatat(dirfd(d), e->d_name, &st, 0) != 0)
                continue;
            sum += (uint64_t)st.st_size;
            if (!oldest[0] || st.st_mtime < oldest_t) {
                oldest_t = st.st_mtime;
                /* a blob name (s_is_blob_name): it fits */
                size_t n = strnlen(e->d_name, sizeof oldest - 1);
                memcpy(oldest, e->d_name, n);
                oldest[n] = '\0';
            }
        }
        int fd = dirfd(d);
        b->bytes = sum;
        if (need == 0 || sum + need <= b->cap || !oldest[0]) {
            closedir(d);
            return NS_OK;
        }
        (void)unlinkat(fd, oldest, 0);
        closedir(d);
        ns_debug(NS_MOD_NODE, "event=blob_evicted blob=%.16s", oldest);
    }
}

#define S_COPY_PREFIX ".in-" /* copies being written (ns_blobs_copy_t) */

/* Remove the copies a crash left (nobody holds their lock). */
static void s_sweep_copies(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, S_COPY_PREFIX, strlen(S_COPY_PREFIX)))
            continue;
        int f = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (f < 0)
            continue;
        if (flock(f, LOCK_EX | LOCK_NB) == 0)
            (void)unlinkat(dirfd(d), e->d_name, 0);
        close(f);
    }
    closedir(d);
}

ns_blobs_t *ns_blobs_open(const char *dir, uint64_t cap_bytes, int *err)
{
    ns_blobs_t *b = calloc(1, sizeof *b);
    if (!b) {
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    if (snprintf(b->dir, sizeof b->dir, "%s", dir) >= (int)sizeof b->dir ||
        ns_mkdir_p(dir, 0700) != NS_OK || s_scan(b, 0) != NS_OK) {
        *err = NS_ERR_IO;
        free(b);
        return NULL;
    }
    b->cap = cap_bytes ? cap_bytes : NS_BLOBS_DEFAULT_CAP;
    s_sweep_copies(dir);
    s_verified_load(b);
    return b;
}

void ns_blobs_close(ns_blobs_t **bp)
{
    if (!bp || !*bp)
        return;
    if ((*bp)->verified_dirty)
        s_verified_save(*bp);
    free(*bp);
    *bp = NULL;
}

bool ns_blobs_has(ns_blobs_t *b, const ns_hash_t id)
{
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    return access(path, R_OK) == 0;
}

int ns_blobs_put(ns_blobs_t *b, const ns_hash_t id, const uint8_t *data,
                 size_t len)
{
    ns_hash_t h;
    ns_hash(h, data, len);
    if (memcmp(h, id, NS_HASH_BYTES))
        return NS_ERR_CORRUPT;
    if (len > b->cap)
        return NS_ERR_TOOBIG;
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    if (access(path, R_OK) == 0) {
        (void)utimensat(AT_FDCWD, path, NULL, 0);
        return NS_OK;
    }
    int rc = s_scan(b, len);
    if (rc == NS_OK)
        rc = ns_file_write_atomic(path, data, len, 0600);
    if (rc == NS_OK)
        b->bytes += len;
    return rc;
}

int ns_blobs_get(ns_blobs_t *b, const ns_hash_t id, uint8_t **data, size_t *len)
{
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    *data = NULL;
    *len = 0;
    int rc = ns_file_read(path, NS_MAX_BUFFER, data, len);
    if (rc != NS_OK)
        return rc == NS_ERR_NOTFOUND ? NS_ERR_NOTFOUND : rc;
    ns_hash_t h;
    ns_hash(h, *data, *len);
    if (memcmp(h, id, NS_HASH_BYTES)) {
        /* a damaged file is no blob: drop it, fetch it again */
        ns_warn(NS_MOD_NODE, "event=blob_corrupt path=\"%s\" action=deleted",
                path);
        free(*data);
        *data = NULL;
        *len = 0;
        unlink(path);
        return NS_ERR_NOTFOUND;
    }
    (void)utimensat(AT_FDCWD, path, NULL, 0);
    return NS_OK;
}

int ns_blobs_partial(ns_blobs_t *b, const ns_hash_t id, uint64_t size, int *fd)
{
    char path[PATH_MAX + 80];
    *fd = -1;
    if (size > b->cap)
        return NS_ERR_TOOBIG;
    s_path(b, id, path, sizeof path);
    strcat(path, S_PART);
    struct stat st;
    uint64_t have = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (s_scan(b, size > have ? size - have : 0) != NS_OK)
        return NS_ERR_IO;
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (f < 0)
        return NS_ERR_IO;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        close(f);
        return NS_ERR_EXISTS;
    }
    /* a partial file may not be longer than its blob */
    if (fstat(f, &st) != 0 ||
        ((uint64_t)st.st_size > size && ftruncate(f, (off_t)size) != 0)) {
        close(f);
        return NS_ERR_IO;
    }
    /* the room on disk now, not a disk full half-way (the size stays:
     * it is what a resume reads) */
    if (fallocate(f, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) != 0 &&
        errno != EOPNOTSUPP && errno != ENOSYS) {
        int e = errno;
        if (st.st_size == 0)
            (void)unlink(path); /* made here: leave nothing behind */
        close(f);
        errno = e;
        return NS_ERR_IO;
    }
    (void)futimens(f, NULL);
    *fd = f;
    return NS_OK;
}

int ns_blobs_complete(ns_blobs_t *b, const ns_hash_t id, uint64_t size)
{
    char path[PATH_MAX + 80], part[PATH_MAX + 90];
    s_path(b, id, path, sizeof path);
    snprintf(part, sizeof part, "%s%s", path, S_PART);
    if (rename(part, path) != 0)
        return NS_ERR_IO;
    b->bytes += size;
    return NS_OK;
}

void ns_blobs_discard(ns_blobs_t *b, const ns_hash_t id)
{
    char path[PATH_MAX + 90];
    s_path(b, id, path, sizeof path);
    strcat(path, S_PART);
    (void)unlink(path);
}

int ns_blobs_map_fd(int fd, size_t len, const uint8_t **data)
{
    void *p = mmap(NULL, len ? len : 1, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return NS_ERR_IO;
    *data = p;
    return NS_OK;
}

void ns_blobs_unmap(const uint8_t *data, size_t len)
{
    if (data)
        munmap((void *)(uintptr_t)data, len ? len : 1);
}

int ns_blobs_open_ro(ns_blobs_t *b, const ns_hash_t id, int *fd, uint64_t *size)
{
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    *fd = -1;
    *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0)
        return errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
    struct stat st;
    if (fstat(f, &st) != 0) {
        close(f);
        return NS_ERR_IO;
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return NS_OK;
}

int ns_blobs_map(ns_blobs_t *b, const ns_hash_t id, const uint8_t **data,
                 size_t *len)
{
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    *data = NULL;
    *len = 0;
    int fd = -1;
    uint64_t size = 0;
    int64_t hashed_ns = ns_now_ns(); /* before the fstat: see s_verified_t */
    int rc = ns_blobs_open_ro(b, id, &fd, &size);
    if (rc != NS_OK)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return NS_ERR_IO;
    }
    bool known = s_verified_holds(s_verified_find(b, id), &st);
    rc = size > 0 && size <= NS_MAX_BUFFER
             ? ns_blobs_map_fd(fd, (size_t)size, data)
             : NS_ERR_CORRUPT;
    close(fd);
    if (rc == NS_OK && !known) {
        ns_hash_t h;
        ns_hash(h, *data, (size_t)size);
        b->map_hashed += size;
        if (memcmp(h, id, NS_HASH_BYTES)) {
            ns_blobs_unmap(*data, (size_t)size);
            *data = NULL;
            rc = NS_ERR_CORRUPT;
        } else {
            s_verified_put(b, id, &st, hashed_ns);
        }
    }
    if (rc == NS_ERR_CORRUPT) {
        s_verified_t *v = s_verified_find(b, id);
        if (v)
            v->used = false;
        b->verified_dirty = true;
        ns_warn(NS_MOD_NODE, "event=blob_corrupt path=\"%s\" action=deleted",
                path);
        unlink(path);
        return NS_ERR_NOTFOUND;
    }
    if (rc != NS_OK)
        return rc;
    *len = (size_t)size;
    if (st.st_mtime < hashed_ns / 1000000000 - S_TOUCH_AFTER_S)
        (void)utimensat(AT_FDCWD, path, NULL, 0); /* its LRU time */
    return NS_OK;
}

uint64_t ns_blobs_map_hashed(const ns_blobs_t *b)
{
    return b->map_hashed;
}

int ns_blobs_keep(ns_blobs_t *b, const uint8_t *data, size_t len, ns_hash_t id)
{
    ns_hash(id, data, len);
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    if (access(path, R_OK) == 0) {
        (void)utimensat(AT_FDCWD, path, NULL, 0);
        return NS_OK;
    }
    int fd = -1;
    int rc = ns_blobs_partial(b, id, len, &fd);
    if (rc != NS_OK)
        return rc;
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, data + done, len - done, (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (done == len && ftruncate(fd, (off_t)len) == 0)
        rc = ns_blobs_complete(b, id, len);
    else {
        rc = NS_ERR_IO;
        ns_blobs_discard(b, id);
    }
    close(fd);
    return rc;
}

int ns_blobs_read(ns_blobs_t *b, const ns_hash_t id, uint64_t offset,
                  uint8_t *buf, size_t cap, size_t *got, uint64_t *total)
{
    char path[PATH_MAX + 80];
    s_path(b, id, path, sizeof path);
    *got = 0;
    *total = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? NS_OK : NS_ERR_IO;
    if (rc == NS_OK && offset >= (uint64_t)st.st_size)
        rc = NS_ERR_INVAL;
    size_t want = 0;
    if (rc == NS_OK) {
        uint64_t left = (uint64_t)st.st_size - offset;
        want = left < cap ? (size_t)left : cap;
    }
    while (rc == NS_OK && *got < want) {
        ssize_t n = pread(fd, buf + *got, want - *got, (off_t)(offset + *got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = NS_ERR_IO; /* shrunk under us, or the disk */
        else
            *got += (size_t)n;
    }
    close(fd);
    if (rc == NS_OK)
        *total = (uint64_t)st.st_size;
    return rc;
}

/* Write all of buf at the end of what fd holds (done bytes so far). */
static int s_write_all(int fd, const uint8_t *buf, size_t len, uint64_t done)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = pwrite(fd, buf + off, len - off, (off_t)(done + off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return NS_ERR_IO;
        }
        off += (size_t)w;
    }
    return NS_OK;
}

struct ns_blobs_copy {
    ns_blobs_t *b;
    char path[PATH_MAX];     /* the user's file, for messages */
    char tmp[PATH_MAX + 16]; /* the copy being written; "" once renamed */
    int in, out;             /* the user's file, the copy */
    uint64_t limit;          /* bytes at most: max_bytes, the store's cap */
    uint64_t done;           /* bytes copied and hashed so far */
    crypto_generichash_state hs;
    uint8_t *piece; /* NS_BLOBS_COPY_PIECE bytes */
    bool finished;  /* renamed into place: id is its name */
    ns_hash_t id;
};

void ns_blobs_copy_free(ns_blobs_copy_t **cp)
{
    if (!cp || !*cp)
        return;
    ns_blobs_copy_t *c = *cp;
    if (c->tmp[0])
        (void)unlink(c->tmp);
    if (c->out >= 0)
        close(c->out);
    if (c->in >= 0)
        close(c->in);
    free(c->piece);
    free(c);
    *cp = NULL;
}

/* A failure of the store's side: err names the file, the store, errno. */
static int s_copy_fail(const ns_blobs_copy_t *c, char *err, size_t errlen)
{
    snprintf(err, errlen, "cannot copy '%s' into the blob store %s: %s",
             c->path, c->b->dir, strerror(errno));
    return NS_ERR_IO;
}

ns_blobs_copy_t *ns_blobs_copy_start(ns_blobs_t *b, const char *path,
                                     uint64_t max_bytes, int *rc, char *err,
                                     size_t errlen)
{
    /* the hash state wants 64-byte alignment (libsodium's CRYPTO_ALIGN) */
    size_t bytes = (sizeof(ns_blobs_copy_t) + 63) / 64 * 64;
    ns_blobs_copy_t *c = aligned_alloc(64, bytes);
    if (c)
        memset(c, 0, bytes);
    if (!c || !(c->piece = malloc(NS_BLOBS_COPY_PIECE))) {
        free(c);
        snprintf(err, errlen, "out of memory to copy '%s'", path);
        *rc = NS_ERR_NOMEM;
        return NULL;
    }
    c->b = b;
    c->out = -1;
    snprintf(c->path, sizeof c->path, "%s", path);
    crypto_generichash_init(&c->hs, NULL, 0, NS_HASH_BYTES);
    struct stat st;
    uint64_t want = 0;
    c->limit = max_bytes < b->cap ? max_bytes : b->cap;
    *rc = NS_OK;
    if ((c->in = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        *rc = errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
        if (*rc == NS_ERR_NOTFOUND)
            snprintf(err, errlen, "input file '%s' not found", path);
        else
            snprintf(err, errlen, "cannot read '%s': %s", path,
                     strerror(errno));
    } else if (fstat(c->in, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "input file '%s' is not a regular file", path);
        *rc = NS_ERR_INVAL;
    } else if ((want = (uint64_t)st.st_size) > max_bytes) {
        snprintf(err, errlen,
                 "input file '%s' is over the %" PRIu64 "-byte limit", path,
                 max_bytes);
        *rc = NS_ERR_TOOBIG;
    } else if (want > b->cap) {
        snprintf(err, errlen,
                 "input file '%s' (%" PRIu64 " bytes) does not fit the blob "
                 "store %s (%" PRIu64 " bytes, node.input_cache_bytes)",
                 path, want, b->dir, b->cap);
        *rc = NS_ERR_TOOBIG;
    } else if (snprintf(c->tmp, sizeof c->tmp, "%s/" S_COPY_PREFIX "XXXXXX",
                        b->dir) >= (int)sizeof c->tmp ||
               s_scan(b, want) != NS_OK ||
               (c->out = mkostemp(c->tmp, O_CLOEXEC)) < 0) {
        /* room first: the LRU blobs go, then the space is reserved */
        *rc = s_copy_fail(c, err, errlen);
        c->tmp[0] = '\0'; /* no file made */
    } else if (flock(c->out, LOCK_EX | LOCK_NB) != 0 ||
               (want &&
                fallocate(c->out, FALLOC_FL_KEEP_SIZE, 0, (off_t)want) != 0 &&
                errno != EOPNOTSUPP && errno != ENOSYS)) {
        *rc = s_copy_fail(c, err, errlen);
    }
    if (*rc != NS_OK)
        ns_blobs_copy_free(&c);
    return c;
}

/* The whole file is copied: hash, sync, rename to the hash. */
static int s_copy_finish(ns_blobs_copy_t *c, char *err, size_t errlen)
{
    char name[PATH_MAX + 80];
    if (c->done == 0) {
        snprintf(err, errlen, "input file '%s' is empty", c->path);
        return NS_ERR_INVAL;
    }
    crypto_generichash_final(&c->hs, c->id, NS_HASH_BYTES);
    s_path(c->b, c->id, name, sizeof name);
    /* the room past a file that shrank while read goes back */
    if (ftruncate(c->out, (off_t)c->done) != 0 ||
        ns_file_commit(c->out, c->tmp, name, 0600) != NS_OK)
        return s_copy_fail(c, err, errlen);
    c->tmp[0] = '\0';
    c->b->bytes += c->done;
    c->finished = true;
    return NS_OK;
}

int ns_blobs_copy_step(ns_blobs_copy_t *c, uint64_t budget, bool *done,
                       char *err, size_t errlen)
{
    *done = c->finished;
    for (uint64_t moved = 0; !c->finished && moved < budget;) {
        ssize_t r = read(c->in, c->piece, NS_BLOBS_COPY_PIECE);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read '%s': %s", c->path,
                     strerror(errno));
            return NS_ERR_IO;
        }
        if (r == 0) {
            int rc = s_copy_finish(c, err, errlen);
            *done = rc == NS_OK;
            return rc;
        }
        if ((uint64_t)r > c->limit - c->done) {
            snprintf(err, errlen,
                     "'%s' grew past %" PRIu64 " bytes while it was read",
                     c->path, c->limit);
            return NS_ERR_TOOBIG;
        }
        crypto_generichash_update(&c->hs, c->piece, (size_t)r);
        if (s_write_all(c->out, c->piece, (size_t)r, c->done) != NS_OK)
            return s_copy_fail(c, err, errlen);
        /* its writeback starts now, so the sync at the end has little
         * left to wait for */
        (void)sync_file_range(c->out, (off_t)c->done, r, SYNC_FILE_RANGE_WRITE);
        c->done += (uint64_t)r;
        moved += (uint64_t)r;
    }
    return NS_OK;
}

uint64_t ns_blobs_copy_bytes(const ns_blobs_copy_t *c)
{
    return c->done;
}

int ns_blobs_copy_map(const ns_blobs_copy_t *c, ns_hash_t id,
                      const uint8_t **data, uint64_t *size, char *err,
                      size_t errlen)
{
    assert(c->finished);
    memcpy(id, c->id, NS_HASH_BYTES);
    *size = c->done;
    int rc = ns_blobs_map_fd(c->out, (size_t)c->done, data);
    if (rc != NS_OK) {
        snprintf(err, errlen, "cannot map the stored copy of '%s': %s", c->path,
                 strerror(errno));
        *size = 0;
    }
    return rc;
}

int ns_blobs_add_map(ns_blobs_t *b, const char *path, uint64_t max_bytes,
                     ns_hash_t id, const uint8_t **data, uint64_t *size,
                     char *err, size_t errlen)
{
    int rc = NS_OK;
    bool done = false;
    *data = NULL;
    *size = 0;
    ns_blobs_copy_t *c =
        ns_blobs_copy_start(b, path, max_bytes, &rc, err, errlen);
    if (c)
        rc = ns_blobs_copy_step(c, UINT64_MAX, &done, err, errlen);
    if (c && rc == NS_OK)
        rc = ns_blobs_copy_map(c, id, data, size, err, errlen);
    ns_blobs_copy_free(&c);
    return rc;
}

int ns_blobs_link(ns_blobs_t *b, const ns_hash_t id, const char *path)
{
    char name[PATH_MAX + 80];
    s_path(b, id, name, sizeof name);
    if (link(name, path) == 0)
        return NS_OK;
    if (errno == EEXIST && unlink(path) == 0 && link(name, path) == 0)
        return NS_OK;
    return errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
}

const char *ns_blobs_dir(const ns_blobs_t *b)
{
    return b->dir;
}

uint64_t ns_blobs_cap(const ns_blobs_t *b)
{
    return b->cap;
}

uint64_t ns_blobs_bytes(const ns_blobs_t *b)
{
    return b->bytes;
}
