/* control.h - the local control socket of a running node: typed requests,
 * their one codec, and the server side.
 *
 * Endpoint: ipc://DATADIR/control.sock (mode 0600: only the owner of the
 * datadir may ask). Request: one frame, a msgpack str naming a query
 * without arguments ("status", "peers", "latency"), or an array
 * [command, args...]:
 *   ["connect", "ID@tcp://HOST:PORT"]
 *   ["block", id (bin 32), ms]           test networks only, ms <= 1 h
 *   ["transfer", to (bin 32), credits]
 *   ["stake", credits] / ["unstake", credits]
 *   ["cancel", job_id (bin 32)]          one of the node's own jobs
 *   ["submit", terms, descriptor (bin), in paths, out paths, source name]
 *       post a job through the node (submit --node): terms =
 *       [max_price, collateral, bid_window_ms, deadline_s, timeout_s,
 *        min_mem, device_type, min_cl_major, min_cl_minor, region];
 *       paths: one str (or nil) per argument, absolute, read and written
 *       by the node (same machine, same user: the socket is 0600).
 *       Reply: the job id (bin 32).
 *   ["job", job_id (bin 32), from_line]
 *       a submitted job's progress: {phase, lines (from from_line on),
 *       next_line, finished, receipt (when finished)}
 *   "jobs"
 *       the node's jobs, an array of maps {id (hex), role ("requester":
 *       a submit --node job; "provider": one it bid on or runs), phase,
 *       peer (the provider, or the requester; nil before a winner), price
 *       (credits), age_ms, finished, ...} (ns_node_pack_jobs)
 * Reply: one frame, a msgpack array [ok bool, document]; on error the
 * document is a str with the reason.
 */
#ifndef NIGHTSHIFT_CONTROL_H
#define NIGHTSHIFT_CONTROL_H

#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/job.h"
#include "nightshift/market.h"
#include "nightshift/mp.h"
#include "nightshift/requester.h"

#include <stddef.h>
#include <stdint.h>

#define NS_CTL_SOCK "control.sock"
#define NS_CTL_MAX_PATH 512 /* bytes of a path in a request */
/* Bytes of one request: a submit carries the descriptor and its paths. */
#define NS_CTL_MAX_REQUEST (NS_MAX_JOB_MSG + NS_MAX_ARGS * 2 * NS_CTL_MAX_PATH)
#define NS_CTL_MAX_REPLY (16 * 1024 * 1024)
#define NS_CTL_TIMEOUT_MS 5000
#define NS_CTL_MAX_BLOCK_MS 3600000

typedef enum {
    NS_CTL_STATUS,
    NS_CTL_PEERS,
    NS_CTL_LATENCY,
    NS_CTL_CONNECT,
    NS_CTL_BLOCK,
    NS_CTL_TRANSFER,
    NS_CTL_STAKE,
    NS_CTL_UNSTAKE,
    NS_CTL_CANCEL,
    NS_CTL_SUBMIT,
    NS_CTL_JOB,
    NS_CTL_JOBS,
} ns_ctl_kind_t;

/* A job's terms, as `submit` takes them. */
typedef struct ns_ctl_terms {
    uint64_t max_price, collateral; /* credits */
    uint32_t bid_window_ms;
    uint64_t deadline_s, timeout_s;
    ns_reqs_t reqs;
    bool no_wait; /* fail at once when no provider can take the job */
} ns_ctl_terms_t;

/* The terms' one codec (the SUBMIT request's and a saved job's, jobdir.h):
 * [max_price, collateral, bid_window_ms, deadline_s, timeout_s, min
 * memory, device type, OpenCL C major, minor, region, no_wait]. The
 * reader is strict (exact count and types, the region capped); its error
 * is left in rd. */
void ns_ctl_terms_pack(msgpack_packer *pk, const ns_ctl_terms_t *t);
void ns_ctl_terms_read(ns_mpr_t *rd, ns_ctl_terms_t *t);

typedef struct ns_ctl_req {
    ns_ctl_kind_t kind;
    char addr[NS_ADDR_MAX];    /* CONNECT */
    uint8_t peer[NS_ID_BYTES]; /* BLOCK: the peer; TRANSFER: the payee */
    uint64_t ms;               /* BLOCK */
    uint64_t amount;           /* TRANSFER, STAKE, UNSTAKE: credits */
    ns_hash_t job_id;          /* CANCEL, JOB */
    uint32_t from_line;        /* JOB: first progress line wanted */
    ns_ctl_terms_t terms;      /* SUBMIT */
    const uint8_t *desc;       /* SUBMIT: packed descriptor, borrowed */
    size_t desc_len;
    uint32_t n_args; /* SUBMIT: paths by argument, "" = none */
    char in_path[NS_MAX_ARGS][NS_CTL_MAX_PATH];
    char out_path[NS_MAX_ARGS][NS_CTL_MAX_PATH];
    char source_name[128]; /* SUBMIT: the kernel file, for messages */
} ns_ctl_req_t;

/* The command's name ("status", "transfer", ...). */
const char *ns_ctl_name(ns_ctl_kind_t kind);
/* NS_ERR_NOTFOUND for an unknown name. */
int ns_ctl_kind(const char *name, ns_ctl_kind_t *kind) NS_MUST_CHECK;

int ns_ctl_req_pack(const ns_ctl_req_t *r, ns_buf_t *out) NS_MUST_CHECK;
/* Strict: NS_ERR_NOTFOUND for an unknown command, NS_ERR_INVAL for a
 * malformed request (wrong shape, types, argument count, block > 1 h). */
int ns_ctl_req_read(const uint8_t *buf, size_t len,
                    ns_ctl_req_t *r) NS_MUST_CHECK;

/* ipc://DATADIR/control.sock */
int ns_ctl_endpoint(const char *datadir, char *out, size_t cap) NS_MUST_CHECK;

/* The answer to "job": progress lines from from_line on, and the receipt
 * once the job is finished. Lines and the error are one line of
 * printable text each. */
#define NS_CTL_JOB_LINES 32 /* lines per answer at most */
#define NS_CTL_LINE_MAX 255 /* bytes of one line */
typedef struct ns_ctl_job {
    uint32_t phase; /* ns_rq_phase_t */
    bool finished;
    uint32_t next_line; /* ask from here next time */
    uint32_t n_lines;
    char lines[NS_CTL_JOB_LINES][NS_CTL_LINE_MAX + 1];
    ns_receipt_t receipt; /* when finished */
} ns_ctl_job_t;

void ns_ctl_job_pack(msgpack_packer *pk, const ns_ctl_job_t *j);
int ns_ctl_job_read(const uint8_t *buf, size_t len,
                    ns_ctl_job_t *j) NS_MUST_CHECK;

/* ---- server (node/control.c) -------------------------------------------- */

struct ns_node;
typedef struct ns_control ns_control_t;

/* Bind the socket (a stale one of a crashed node is replaced: the datadir
 * lock says no live node owns it) and serve it on the node's loop. NULL
 * with one line in err on failure. */
ns_control_t *ns_control_open(struct ns_node *n, char *err, size_t errlen);
/* NULL-safe; removes the socket file. */
void ns_control_close(ns_control_t **c);

/* Answer one request (encoded) into reply: [ok, document]. */
void ns_control_handle(struct ns_node *n, const uint8_t *req, size_t len,
                       ns_buf_t *reply);

#endif
