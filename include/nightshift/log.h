/* log.h - logfmt lines on stderr (or a file), levels and per-module debug
 * switches.
 *
 * Every line is `ts=<RFC3339 UTC ms> level=<lvl> mod=<module> <text>` where
 * the caller's text is itself logfmt: `event=peer_dropped id=abc reason=x`.
 * One event is one line: control characters in the text (a newline in a
 * value) are written as \n, \r, \t or \xHH.
 * The macros test the level before evaluating their arguments, so a debug
 * line costs one branch when debug is off. Never log secrets or payloads.
 */
#ifndef NIGHTSHIFT_LOG_H
#define NIGHTSHIFT_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    NS_LOG_ERROR = 0,
    NS_LOG_WARN = 1,
    NS_LOG_INFO = 2,
    NS_LOG_DEBUG = 3,
} ns_log_level;

typedef enum {
    NS_MOD_CORE = 0,
    NS_MOD_WIRE,
    NS_MOD_NET,   /* transport */
    NS_MOD_PEERS, /* peer table */
    NS_MOD_GOSSIP,
    NS_MOD_NODE,
    NS_MOD_CTL, /* control socket */
    NS_MOD_EXEC,
    NS_MOD_LEDGER,
    NS_MOD_MARKET,
    NS_MOD_CLI,
    NS_MOD_COUNT,
} ns_log_module;

extern ns_log_level ns_log_threshold; /* lines above this level are skipped */
extern uint32_t ns_log_debug_mask;    /* bit per module: debug even if off */

/* Parse "error|warn|info|debug"; NS_ERR_INVAL on anything else. */
int ns_log_parse_level(const char *s, ns_log_level *out);

/* Enable debug for a comma-separated module list ("gossip,net" or "all").
 * Returns NS_ERR_INVAL naming no module it does not know. */
int ns_log_set_debug(const char *list);

const char *ns_log_module_name(ns_log_module mod);

/* Append every line, and whatever else the process writes on stderr, to
 * the file path (created 0640): it becomes fd 2. NS_ERR_IO (errno set)
 * when it cannot be opened, NS_ERR_INVAL for an empty or too long path. */
int ns_log_open_file(const char *path);

/* Open the file of ns_log_open_file again, by its path: after logrotate
 * renamed it, new lines go to a new file. Async-signal-safe, for a SIGHUP
 * handler; the next line logged says whether it worked (event=
 * log_reopened, or event=log_reopen_failed in the old file). Nothing
 * without a file. */
void ns_log_reopen(void);

void ns_log_write(ns_log_level level, ns_log_module mod, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline bool ns_log_enabled(ns_log_level level, ns_log_module mod)
{
    return level <= ns_log_threshold ||
           (level == NS_LOG_DEBUG && (ns_log_debug_mask >> mod) & 1u);
}

#define NS_LOG_(lvl, mod, ...)                                                 \
    do {                                                                       \
        if (ns_log_enabled((lvl), (mod)))                                      \
            ns_log_write((lvl), (mod), __VA_ARGS__);                           \
    } while (0)

#define ns_error(mod, ...) NS_LOG_(NS_LOG_ERROR, mod, __VA_ARGS__)
#define ns_warn(mod, ...) NS_LOG_(NS_LOG_WARN, mod, __VA_ARGS__)
#define ns_info(mod, ...) NS_LOG_(NS_LOG_INFO, mod, __VA_ARGS__)
#define ns_debug(mod, ...) NS_LOG_(NS_LOG_DEBUG, mod, __VA_ARGS__)

/* A fixed-window limiter for log lines (and anything else): at most `max`
 * events per `window_ms`. `suppressed` counts what was refused since the
 * last allowed event so the next line can say how many were skipped. */
typedef struct {
    uint64_t window_start_ms; /* start of the current window */
    uint32_t count;           /* events allowed in this window */
    uint32_t suppressed;      /* events refused since the last allowed one */
} ns_ratelimit_t;

/* True if one more event may pass now. */
bool ns_ratelimit_allow(ns_ratelimit_t *rl, uint64_t now_ms, uint32_t max,
                        uint64_t window_ms);

#endif
