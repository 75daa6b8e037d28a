/* config.h - node settings: defaults, an INI file (libinih), then flags.
 *
 * <datadir>/config.ini is written by `nightshift init`; `node --config F`
 * reads another file; command-line flags override both. Unknown sections
 * or keys and malformed values are errors naming the line, never ignored.
 */
#ifndef NIGHTSHIFT_CONFIG_H
#define NIGHTSHIFT_CONFIG_H

#include "nightshift/err.h"
#include "nightshift/identity.h"
#include "nightshift/log.h"
#include "nightshift/wire.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_BOOTSTRAP 16
#define NS_DEFAULT_LISTEN "tcp://127.0.0.1:7946"

/* The ledger's LMDB map: the most the ledger can hold (sparse on disk). */
#define NS_DEFAULT_LEDGER_MAP_BYTES (UINT64_C(8) << 30)

/* node.reachable: can peers dial this node (docs/PROTOCOL.md, "Behind a
 * router")? */
typedef enum {
    NS_REACH_YES = 0,  /* yes: advertise the endpoint (the default) */
    NS_REACH_NO = 1,   /* no: dial out only (behind NAT) */
    NS_REACH_AUTO = 2, /* find out: dial out only once no peer dials back */
} ns_reachable_mode;

typedef struct {
    char listen[NS_ENDPOINT_MAX];    /* bind endpoint; port 0 or * = any */
    char advertise[NS_ENDPOINT_MAX]; /* endpoint told to peers; "" = the
                                        bound one */
    char bootstrap[NS_MAX_BOOTSTRAP][NS_ADDR_MAX]; /* id@endpoint */
    uint32_t n_bootstrap;
    uint32_t heartbeat_interval_ms; /* how often we announce ourselves */
    uint32_t heartbeat_peers;       /* reachable peers heartbeated at that
                                       interval; each time they double beyond,
                                       the interval doubles (0: never) */
    uint32_t fanout;                /* gossip mesh degree D (eager push) */
    uint32_t max_peers;             /* cap on the peer table */
    uint32_t pull_interval_ms;      /* anti-entropy period */
    uint32_t seen_ttl_ms;           /* how long message ids are remembered */
    uint32_t max_msg_age_ms;        /* older timestamps are stale */
    uint32_t max_msg_future_ms;     /* clock skew allowed ahead of us */
    uint32_t rate_msgs_per_s;       /* per-link token refill rate */
    uint32_t rate_burst;            /* per-link bucket size */
    char region[NS_MAX_REGION + 1];
    char http[64];    /* node.http: HOST:PORT of /metrics and the status
                         page; "" = off (the default) */
    bool http_public; /* node.http_public: serve a non-loopback host */
    ns_reachable_mode reachable; /* node.reachable: yes|no|auto */
    bool relay;     /* node.relay: relay for peers that cannot be dialled */
    uint64_t price; /* micro-credits per device-second */
    uint64_t stake; /* kept staked, micro-credits (the
                       setting is in credits) */
    uint32_t slots; /* concurrent jobs offered */
    uint32_t load_price_pct;   /* price rises this % per busy slot */
    uint64_t ledger_map_bytes; /* [ledger] map_size: LMDB map, bytes */
    uint64_t blob_cache_bytes; /* input_cache_bytes: kept inputs, bytes */
    ns_log_level log_level;
    char log_debug[128];          /* modules with debug lines: "gossip,net" */
    char log_file[512];           /* [log] file: lines appended here, "" =
                                     stderr; relative to the datadir */
    uint32_t jobs_retention_days; /* [jobs] retention_days: finished jobs'
                                     directories kept this long */
    uint64_t jobs_max_bytes;      /* [jobs] max_bytes: finished jobs kept
                                     under this total, bytes */
} ns_config_t;

void ns_config_defaults(ns_config_t *cfg);

/* Every setting, in the order `nightshift config` lists them. */
typedef struct {
    const char *section;
    const char *key;
    const char *about; /* one line: meaning and unit */
} ns_config_key_t;
extern const ns_config_key_t ns_config_keys[];
extern const size_t ns_config_n_keys;

/* One setting's value as config.ini spells it ("" for an unset
 * advertise; bootstrap peers joined by spaces). NS_ERR_NOTFOUND for an
 * unknown setting, NS_ERR_TOOBIG when out is too small. */
int ns_config_get(const ns_config_t *cfg, const char *section, const char *key,
                  char *out, size_t cap) NS_MUST_CHECK;

/* Apply one setting; section is "node", "ledger", "log" or "jobs".
 * NS_ERR_CONFIG with a message in err (may be NULL) for unknown keys or bad
 * values. */
int ns_config_set(ns_config_t *cfg, const char *section, const char *key,
                  const char *value, char *err, size_t errlen) NS_MUST_CHECK;

/* Load an INI file on top of cfg. NS_ERR_NOTFOUND if missing,
 * NS_ERR_CONFIG with "path:line: why" in err. */
int ns_config_load(ns_config_t *cfg, const char *path, char *err,
                   size_t errlen) NS_MUST_CHECK;

/* Write the settings that differ from the defaults (and listen,
 * bootstrap) as an INI file, atomically. */
int ns_config_write(const ns_config_t *cfg, const char *path) NS_MUST_CHECK;

#endif
