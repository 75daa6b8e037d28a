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
 * Reply: one frame, a msgpack array [ok bool, document]; on error the
 * document is a str with the reason.
 */
#ifndef NIGHTSHIFT_CONTROL_H
#define NIGHTSHIFT_CONTROL_H

#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"

#include <stddef.h>
#include <stdint.h>

#define NS_CTL_SOCK "control.sock"
#define NS_CTL_MAX_REQUEST 512 /* bytes of one request */
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
} ns_ctl_kind_t;

typedef struct {
    ns_ctl_kind_t kind;
    char addr[NS_ADDR_MAX];    /* CONNECT */
    uint8_t peer[NS_ID_BYTES]; /* BLOCK: the peer; TRANSFER: the payee */
    uint64_t ms;               /* BLOCK */
    uint64_t amount;           /* TRANSFER, STAKE, UNSTAKE: credits */
    ns_hash_t job_id;          /* CANCEL */
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
