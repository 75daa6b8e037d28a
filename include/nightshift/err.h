/* err.h - one error enum for the whole project.
 *
 * Fallible functions return ns_err: NS_OK (0) on success, a negative value
 * otherwise. ns_strerror() gives a short, stable, human-readable text; the
 * names from ns_errname() ("bad_sig", "replay", ...) are the keys used in
 * counters and in `status --json`.
 */
#ifndef NIGHTSHIFT_ERR_H
#define NIGHTSHIFT_ERR_H

#define NS_MUST_CHECK __attribute__((warn_unused_result))

typedef enum {
    NS_OK = 0,
    NS_ERR_NOMEM = -1,      /* allocation failed */
    NS_ERR_INVAL = -2,      /* invalid argument or value */
    NS_ERR_IO = -3,         /* file or socket I/O failed (see errno) */
    NS_ERR_PERM = -4,       /* permissions: key file readable by others */
    NS_ERR_NOTFOUND = -5,   /* file, key or record does not exist */
    NS_ERR_EXISTS = -6,     /* refusing to overwrite */
    NS_ERR_CORRUPT = -7,    /* stored data fails its checks */
    NS_ERR_TOOBIG = -8,     /* a length is over its named cap */
    NS_ERR_TRUNCATED = -9,  /* input ended inside a value */
    NS_ERR_TYPE = -10,      /* a value of the wrong msgpack type */
    NS_ERR_VERSION = -11,   /* unknown protocol version */
    NS_ERR_MSGTYPE = -12,   /* unknown message type */
    NS_ERR_SIG = -13,       /* signature does not verify */
    NS_ERR_STALE = -14,     /* timestamp outside the accepted window */
    NS_ERR_REPLAY = -15,    /* message id already seen */
    NS_ERR_NETWORK = -16,   /* peer belongs to another network */
    NS_ERR_RATE = -17,      /* over a rate limit */
    NS_ERR_ZMQ = -18,       /* ZeroMQ call failed (see zmq_errno) */
    NS_ERR_CRYPTO = -19,    /* libsodium call failed */
    NS_ERR_ADDR = -20,      /* malformed peer address or endpoint */
    NS_ERR_ADDRINUSE = -21, /* listen address already in use */
    NS_ERR_TIMEOUT = -22,   /* no answer in time */
    NS_ERR_PROOF = -23,     /* a Merkle proof does not verify */
    NS_ERR_TRAILING = -24,  /* bytes left over after a complete value */
    NS_ERR_CONFIG = -25,    /* bad configuration value or file */
    NS_ERR_OPENCL = -26,    /* OpenCL call failed */
    NS_ERR_STATE = -27,     /* call not valid in the current state */
    NS_ERR_SELF = -28,      /* message or address is our own */
    NS_ERR_PREV = -29,      /* ledger: prev is not the author's head */
    NS_ERR_GAP = -30,       /* ledger: seq ahead of the head (buffered) */
    NS_ERR_FUNDS = -31,     /* ledger: a balance would go negative */
    NS_ERR_CLAIMED = -32,   /* ledger: credit already taken in */
    NS_ERR_NOCREDIT = -33,  /* ledger: ref carries no credit for the author */
    NS_ERR_FORK = -34,      /* ledger: same author and seq, another entry */
    NS_ERR_BANNED = -35,    /* ledger: author has forked its chain */
    NS_ERR_JOBSTATE = -36,  /* ledger: job missing or in the wrong state */
    NS_ERR_MISSING = -37,   /* ledger: depends on an entry not yet known */
    NS_ERR_DUPLICATE = -38, /* ledger: entry already stored */
    NS_ERR_MAPFULL = -39,   /* ledger: the LMDB map is full */
    NS_ERR_INTR = -40,      /* interrupted: a signal or a cancel */
} ns_err;

#define NS_ERR_COUNT 41 /* number of values, NS_OK included */

/* Human text for rc, e.g. "signature does not verify". Never NULL. */
const char *ns_strerror(int rc);

/* Short snake_case key for rc, e.g. "bad_sig". Never NULL. */
const char *ns_errname(int rc);

#endif
