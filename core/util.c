#define _GNU_SOURCE
#include "nightshift/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t s_clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t ns_now_us(void)
{
    return s_clock_us(CLOCK_REALTIME);
}

uint64_t ns_now_ms(void)
{
    return ns_now_us() / 1000u;
}

uint64_t ns_mono_us(void)
{
    return s_clock_us(CLOCK_MONOTONIC);
}

int64_t ns_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t ns_mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

bool ns_mtime_settled(int64_t mtime_ns, int64_t hashed_ns)
{
    return mtime_ns < hashed_ns - NS_FILE_SETTLED_NS;
}

uint64_t ns_mono_ms(void)
{
    return ns_mono_us() / 1000u;
}

void ns_hex(char *out, const uint8_t *in, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int s_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ns_unhex(uint8_t *out, size_t n, const char *hex)
{
    if (strlen(hex) != 2 * n)
        return NS_ERR_INVAL;
    for (size_t i = 0; i < n; i++) {
        int hi = s_hexval(hex[2 * i]), lo = s_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return NS_ERR_INVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return NS_OK;
}

static const char s_b32[] = "abcdefghijklmnopqrstuvwxyz234567";

size_t ns_base32_len(size_t n)
{
    return (n * 8 + 4) / 5;
}

void ns_base32(char *out, const uint8_t *in, size_t n)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 5) {
            out[o++] = s_b32[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits > 0)
        out[o++] = s_b32[(acc << (5 - bits)) & 31];
    out[o] = '\0';
}

int ns_unbase32(uint8_t *out, size_t n, const char *in)
{
    size_t want = ns_base32_len(n);
    if (strlen(in) != want)
        return NS_ERR_INVAL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < want; i++) {
        const char *p = in[i] ? strchr(s_b32, in[i]) : NULL;
        if (!p)
            return NS_ERR_INVAL;
        acc = (acc << 5) | (uint32_t)(p - s_b32);
        bits += 5;
        if (bits >= 8) {
            out[o++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    /* Leftover bits are padding and must be zero (one text per value). */
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return NS_ERR_INVAL;
    return o == n ? NS_OK : NS_ERR_INVAL;
}

int ns_file_read(const char *path, size_t max_bytes, uint8_t **out, size_t *len)
{
    return ns_file_read_stat(path, max_bytes, out, len, NULL);
}

int ns_file_read_stat(const char *path, size_t max_bytes, uint8_t **out,
                      size_t *len, struct stat *stp)
{
    int rc = NS_ERR_IO;
    uint8_t *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
    struct stat st;
    if (fstat(fd, &st) != 0)
        goto out;
    if (stp)
        *stp = st;
    if (!S_ISREG(st.st_mode)) {
        rc = NS_ERR_INVAL;
        goto out;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        rc = NS_ERR_TOOBIG;
        goto out;
    }
    size_t size = (size_t)st.st_size;
    buf = malloc(size + 1);
    if (!buf) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            goto out;
        got += (size_t)r;
    }
    buf[size] = 0; /* convenient for text files; not counted in len */
    *out = buf;
    *len = size;
    buf = NULL;
    rc = NS_OK;
out:
    free(buf);
    close(fd);
    return rc;
}

static int s_fsync_dir(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NS_ERR_IO;
    int rc = fsync(fd) == 0 ? NS_OK : NS_ERR_IO;
    close(fd);
    return rc;
}

int ns_file_commit(int fd, const char *tmp, const char *path, unsigned mode)
{
    if (fchmod(fd, mode) != 0 || fsync(fd) != 0 || rename(tmp, path) != 0)
        return NS_ERR_IO;
    return s_fsync_dir(path);
}

int ns_file_write_atomic(const char *path, const void *data, size_t len,
                         unsigned mode)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >=
        (int)sizeof tmp)
        return NS_ERR_TOOBIG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return errno == EACCES || errno == EROFS ? NS_ERR_PERM : NS_ERR_IO;
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            unlink(tmp);
            return NS_ERR_IO;
        }
        done += (size_t)w;
    }
    if (fchmod(fd, mode) != 0 || fsync(fd) != 0) {
        close(fd);
        unlink(tmp);
        return NS_ERR_IO;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        unlink(tmp);
        return NS_ERR_IO;
    }
    return s_fsync_dir(path);
}

int ns_mkdir_p(const char *path, unsigned mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return NS_ERR_TOOBIG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return errno == EACCES || errno == EROFS ? NS_ERR_PERM : NS_ERR_IO;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return errno == EACCES || errno == EROFS ? NS_ERR_PERM : NS_ERR_IO;
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return NS_ERR_IO;
    return NS_OK;
}

int ns_path_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? NS_ERR_TOOBIG : NS_OK;
}

int ns_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return NS_ERR_INVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return NS_ERR_INVAL;
    *out = (uint64_t)v;
    return NS_OK;
}

int ns_credits_parse(const char *s, uint64_t *micro)
{
    if (!s || *s < '0' || *s > '9')
        return NS_ERR_INVAL;
    uint64_t whole = 0, frac = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return NS_ERR_TOOBIG;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        int digits = 0;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
            if (digits == 6)
                return NS_ERR_INVAL; /* finer than a micro-credit */
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
        if (digits == 0)
            return NS_ERR_INVAL;
        for (; digits < 6; digits++)
            frac *= 10;
    }
    if (*p != '\0')
        return NS_ERR_INVAL;
    if (whole > (UINT64_MAX - frac) / NS_MICRO)
        return NS_ERR_TOOBIG;
    *micro = whole * NS_MICRO + frac;
    return NS_OK;
}

char *ns_credits_fmt(char out[NS_CREDITS_TEXT], uint64_t micro)
{
    uint64_t frac = micro % NS_MICRO;
    int n = snprintf(out, NS_CREDITS_TEXT, "%llu",
                     (unsigned long long)(micro / NS_MICRO));
    if (frac && n > 0 && n < NS_CREDITS_TEXT - 8) {
        snprintf(out + n, (size_t)(NS_CREDITS_TEXT - n), ".%06llu",
                 (unsigned long long)frac);
        size_t len = strlen(out);
        while (out[len - 1] == '0')
            out[--len] = '\0';
    }
    return out;
}

uint32_t ns_rand_below(uint32_t bound)
{
    return randombytes_uniform(bound);
}
