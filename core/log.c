#include "nightshift/log.h"
#include "nightshift/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

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

void ns_log_write(ns_log_level level, ns_log_module mod, const char *fmt, ...)
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
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line: lines from several processes sharing a file do
     * not interleave mid-line (stderr is unbuffered, writes <= PIPE_BUF). */
    size_t len = strnlen(line, sizeof line - 2);
    line[len] = '\n';
    line[len + 1] = '\0';
    fputs(line, stderr);
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
