#include "nightshift/log.h"
#include "nightshift/err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

ns_log_level ns_log_threshold = NS_LOG_INFO;
uint32_t ns_log_debug_mask = 0;

static const char *const s_level_names[] = {"error", "warn", "info", "debug"};
static const char *const s_module_names[NS_MOD_COUNT] = {
    "core", "wire", "net",    "peers",  "gossip", "node",
    "ctl",  "exec", "ledger", "market", "cli",
};

const char *ns_log_module_name(ns_log_module mod)
{
    return (unsigned)mod < NS_MOD_COUNT ? s_module_names[mod] : "?";
}

int ns_log_parse_level(const char *s, ns_log_level *out)
{
    for (int i = 0; i <= NS_LOG_DEBUG; i++) {
        if (strcmp(s, s_level_names[i]) == 0) {
            *out = (ns_log_level)i;
            return NS_OK;
        }
    }
    return NS_ERR_INVAL;
}

int ns_log_set_debug(const char *list)
{
    uint32_t mask = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 3 && strncmp(p, "all", 3) == 0) {
            mask = (1u << NS_MOD_COUNT) - 1;
        } else if (n > 0) {
            int found = 0;
            for (int i = 0; i < NS_MOD_COUNT; i++) {
                if (strlen(s_module_names[i]) == n &&
                    strncmp(p, s_module_names[i], n) == 0) {
                    mask |= 1u << i;
                    found = 1;
                }
            }
            if (!found)
                return NS_ERR_INVAL;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    ns_log_debug_mask |= mask;
    return NS_OK;
}

/* The log file (ns_log_open_file), and what the last reopen did, for the
 * next line to tell: 0 nothing, 1 reopened, 2 failed (errno in
 * s_reopen_errno). */
static char s_file[PATH_MAX];
static volatile sig_atomic_t s_reopened;
static volatile sig_atomic_t s_reopen_errno;

/* open(path) and make it fd 2; only async-signal-safe calls. */
static int s_open_as_stderr(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    if (fd != STDERR_FILENO) {
        int rc = dup2(fd, STDERR_FILENO);
        int e = errno;
        close(fd);
        if (rc < 0) {
            errno = e;
            return -1;
        }
    }
    return 0;
}

int ns_log_open_file(const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof s_file)
        return NS_ERR_INVAL;
    if (s_open_as_stderr(path) != 0)
        return NS_ERR_IO;
    memcpy(s_file, path, n + 1);
    return NS_OK;
}

void ns_log_reopen(void)
{
    int saved = errno;
    if (s_file[0]) {
        if (s_open_as_stderr(s_file) == 0) {
            s_reopened = 1;
        } else {
            s_reopen_errno = errno;
            s_reopened = 2;
        }
    }
    errno = saved;
}

/* Control characters of a logged value (a newline in an error text, a
 * compiler log) would split one event over lines: from `from` on, write
 * them as \n, \r, \t or \xHH. */
static void s_escape(char *line, size_t cap, size_t from)
{
    char out[2048];
    size_t o = 0, i = from;
    bool any = false;
    for (size_t k = from; line[k]; k++)
        if ((unsigned char)line[k] < 0x20 || line[k] == 0x7f)
            any = true;
    if (!any)
        return;
    for (; line[i] && o + 5 < sizeof out; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c >= 0x20 && c != 0x7f) {
            out[o++] = (char)c;
            continue;
        }
        out[o++] = '\\';
        if (c == '\n')
            out[o++] = 'n';
        else if (c == '\r')
            out[o++] = 'r';
        else if (c == '\t')
            out[o++] = 't';
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "x%02x", c);
    }
    out[o] = '\0';
    snprintf(line + from, cap - from, "%s", out);
}

static void s_write_line(ns_log_level level, ns_log_module mod, const char *fmt,
                         va_list ap)
{
    char line[1024];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line,
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s mod=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000),
                     s_level_names[level], ns_log_module_name(mod));
    if (n > 0 && (size_t)n < sizeof line) {
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        s_escape(line, sizeof line - 2, (size_t)n);
    }
    /* One fputs per line: lines from several processes sharing a file do
     * not interleave mid-line (stderr is unbuffered, writes <= PIPE_BUF). */
    size_t len = strnlen(line, sizeof line - 2);
    line[len] = '\n';
    line[len + 1] = '\0';
    fputs(line, stderr);
}

static void s_write_fmt(ns_log_level level, ns_log_module mod, const char *fmt,
                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    s_write_line(level, mod, fmt, ap);
    va_end(ap);
}

void ns_log_write(ns_log_level level, ns_log_module mod, const char *fmt, ...)
{
    int reopened = s_reopened;
    if (reopened) { /* say it in the file the line goes to */
        s_reopened = 0;
        if (reopened == 1)
            s_write_fmt(NS_LOG_INFO, NS_MOD_CORE,
                        "event=log_reopened path=\"%s\"", s_file);
        else
            s_write_fmt(NS_LOG_ERROR, NS_MOD_CORE,
                        "event=log_reopen_failed path=\"%s\" error=\"%s\" "
                        "action=\"logging on to the old file\"",
                        s_file, strerror(s_reopen_errno));
    }
    va_list ap;
    va_start(ap, fmt);
    s_write_line(level, mod, fmt, ap);
    va_end(ap);
}

bool ns_ratelimit_allow(ns_ratelimit_t *rl, uint64_t now_ms, uint32_t max,
                        uint64_t window_ms)
{
    if (now_ms - rl->window_start_ms >= window_ms ||
        now_ms < rl->window_start_ms) {
        rl->window_start_ms = now_ms;
        rl->count = 0;
    }
    if (rl->count < max) {
        rl->count++;
        return true;
    }
    rl->suppressed++;
    return false;
}
