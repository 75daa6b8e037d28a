/* worker_frame.h - the frames between the sandbox worker and its
 * supervisor (exec layer): message kinds, caps, and the one codec of each
 * message, shared by exec/worker_supervisor.c and exec/worker_child.c.
 *
 * Over an AF_UNIX stream socketpair (docs/ARCHITECTURE.md, "The sandbox
 * worker"), every message is a frame: a u32 big-endian length (1 .. the
 * cap of that message) and a msgpack head; bulk data follows the head
 * raw, with sizes both sides compute from the job descriptor, never from a
 * length the peer sends.
 *   worker -> supervisor, once, first:
 *     HELLO  [1, protocol, status, error (bin), devinfo]
 *            status != 0: the device could not be opened; the worker exits
 *   supervisor -> worker, one at a time:
 *     RUN    [2, job (ns_job_pack), [], verified, files]  then every IN
 *     ITEMS  [3, job, [unit, ...], verified, files]   buffer raw, in
 *     FRAUD  [5, proof (ns_fraud_pack), verified]     argument order (of
 *            the proof's descriptor for FRAUD); verified: the caller set
 *            ns_input_t.verified on every input, so the runner skips
 *            hashing them. files (u32, absent: 0): bit i set, IN buffer
 *            i is not in the stream but a file descriptor of a file of
 *            exactly its size, sent (SCM_RIGHTS) with the frame's first
 *            byte, those of all set bits in argument order; the worker
 *            maps it read-only (no copy through the socket, no anonymous
 *            memory for an input of GiBs). ITEMS re-runs the units
 *            (ns_runner_run_units) on zero-filled output buffers; FRAUD
 *            checks the proof (ns_fraud_check) against the inputs.
 *   the requester's device work (user code never runs in the node or
 *   the command, docs/ARCHITECTURE.md "The sandbox worker"):
 *     PREFLIGHT [8, job, [], verified, files, [what, k, name (bin)]]
 *            then the IN buffers as for RUN; what: NS_PF_* bits, run in
 *            this order: CHECK (ns_preflight_check_cached: build, the
 *            arguments against the signature), TIME (ns_preflight_time
 *            of k units), SAMPLE (ns_preflight_sample of k units); name:
 *            the source's name in messages (at most 63 bytes); CHECK
 *            alone runs no unit, and no IN buffer follows
 *     CHECK  [9, job, [], verified, files, [desc_id (bin 32), root (bin
 *            32), secret (bin 32), k, outfiles]]  then the IN buffers as
 *            for RUN, then the claimed OUT buffers in argument order:
 *            those with bit i of outfiles set as descriptors (after the
 *            inputs' ones), the others raw; the worker runs
 *            ns_spot_check_files on them
 *   worker -> supervisor, one per request:
 *     RESULT [4, status, error (bin), [build_us, upload_us, run_us,
 *            download_us, cache_hit], extra]
 *            status 0: then raw output: RUN and ITEMS every OUT buffer
 *            in argument order; FRAUD nothing (status NS_OK: fraud
 *            proven, NS_ERR_PROOF: not a valid proof); PREFLIGHT and
 *            CHECK nothing. extra (absent for RUN, ITEMS, FRAUD):
 *            PREFLIGHT [unit_ns, kernel_args, build_us]; CHECK [checked,
 *            mismatched, first_bad, bad_arg, bad_pos, changed, verify_us,
 *            commit_us, rerun_us, launch_us] (ns_check_result_t)
 *   hardware challenges (challenge.h), supervisor -> worker:
 *     CHALLENGE [6, kind, params, seed (bin 32), k]
 *            kind 1 (label): params [bytes, lanes, segments, steps], k
 *            openings; kind 2 (imatmul): params [n, p], k 0
 *   worker -> supervisor, its answer:
 *     CHAL_RESULT [7, status, error (bin), root (bin 32), device_us,
 *            answer_len]
 *            status 0: then answer_len raw bytes: the packed label answer
 *            (ns_label_answer_pack; root: the Merkle root) or C as n * n
 *            little-endian u32 (root: ns_hash of those bytes). answer_len
 *            is at most NS_CHAL_MAX_ANSWER (exactly 4 n^2 for imatmul);
 *            0 when status != 0.
 *
 * The readers check shape only (exact types and counts, caps on the error
 * text and the item list); what a value means (the protocol number, a
 * known status, plausible timings) is the receiving side's to judge.
 */
#ifndef NIGHTSHIFT_WORKER_FRAME_H
#define NIGHTSHIFT_WORKER_FRAME_H

#include "nightshift/challenge.h"
#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/job.h"
#include "nightshift/runner.h"
#include "nightshift/verify.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_WORKER_PROTOCOL 1 /* second element of HELLO */

#define NS_WORKER_MSG_HELLO 1
#define NS_WORKER_MSG_RUN 2
#define NS_WORKER_MSG_ITEMS 3
#define NS_WORKER_MSG_RESULT 4
#define NS_WORKER_MSG_FRAUD 5
#define NS_WORKER_MSG_CHALLENGE 6
#define NS_WORKER_MSG_CHAL_RESULT 7
#define NS_WORKER_MSG_PREFLIGHT 8
#define NS_WORKER_MSG_CHECK 9

/* PREFLIGHT's what (preflight.h) */
#define NS_PF_CHECK 1u  /* build, the arguments against the signature */
#define NS_PF_TIME 2u   /* time k units: the work estimate */
#define NS_PF_SAMPLE 4u /* run k units over four fills: verifiable? */

#define NS_WORKER_MAX_EXTRA 12 /* values in a RESULT's extra */

#define NS_WORKER_FRAME_LEN 4 /* bytes of the big-endian length prefix */
#define NS_WORKER_IO_CHUNK (1u << 30) /* bytes per read/write system call */
#define NS_WORKER_MAX_ERROR 2048 /* error text in HELLO and RESULT, bytes */
#define NS_WORKER_MAX_ITEMS NS_MAX_CHECKS /* items in one ITEMS request */
/* Request head: the descriptor and up to 4096 units of 9 bytes, or a
 * fraud proof (smaller), and framing. */
#define NS_WORKER_MAX_REQUEST (NS_MAX_JOB_MSG + 9 * NS_WORKER_MAX_ITEMS + 64)
_Static_assert(NS_MAX_FRAUD_MSG + 64 <= NS_WORKER_MAX_REQUEST,
               "a FRAUD request fits the request cap");
/* HELLO and RESULT heads: error text, a devinfo or timings, framing. */
#define NS_WORKER_MAX_REPLY (NS_WORKER_MAX_ERROR + 1024)

/* The head length in a frame's 4-byte prefix (not checked against a cap:
 * the reader knows which message, and so which cap, it expects). */
uint32_t ns_worker_frame_len(const uint8_t prefix[NS_WORKER_FRAME_LEN]);

/* ---- HELLO -------------------------------------------------------------- */

typedef struct {
    uint32_t type;        /* NS_WORKER_MSG_HELLO in a well-formed one */
    uint32_t protocol;    /* NS_WORKER_PROTOCOL */
    int64_t status;       /* NS_OK, or why the device did not open */
    const uint8_t *error; /* error text, borrowed from the head; not
                             NUL-terminated, at most NS_WORKER_MAX_ERROR */
    size_t error_len;
    ns_devinfo_t dev; /* the device (zero when status != NS_OK) */
} ns_worker_hello_t;

/* The whole HELLO frame (prefix and head) into sb, which this initialises
 * and the caller destroys. error is cut at NS_WORKER_MAX_ERROR bytes. */
void ns_worker_hello_pack(msgpack_sbuffer *sb, int status, const char *error,
                          const ns_devinfo_t *dev);

/* Read a head of len bytes (the prefix stripped) into *h, which borrows
 * from head. Errors of ns_mpr_end (NS_ERR_TYPE, NS_ERR_TRUNCATED,
 * NS_ERR_TOOBIG, NS_ERR_TRAILING...); h->type is filled when the head
 * starts right even if the rest fails. */
int ns_worker_hello_read(const uint8_t *head, size_t len,
                         ns_worker_hello_t *h) NS_MUST_CHECK;

/* ---- RUN and ITEMS ------------------------------------------------------ */

/* The whole request frame for job into sb (initialised here; the caller
 * destroys it on NS_OK): RUN when items is NULL, else ITEMS with items[0..n)
 * (the caller has checked n and each item); files: the IN buffers that
 * travel as file descriptors (bit i: argument i), 0 for none. On
 * NS_ERR_TOOBIG (a head over NS_WORKER_MAX_REQUEST, or no memory for it)
 * sb is already destroyed. */
int ns_worker_request_pack(msgpack_sbuffer *sb, const ns_job_t *job,
                           const uint64_t *items, uint32_t n, bool verified,
                           uint32_t files) NS_MUST_CHECK;

/* The whole FRAUD request frame for proof p into sb, as
 * ns_worker_request_pack. */
int ns_worker_fraud_pack(msgpack_sbuffer *sb, const ns_fraud_proof_t *p,
                         bool verified) NS_MUST_CHECK;

/* What PREFLIGHT and CHECK carry besides the job. */
typedef struct {
    uint32_t what;      /* PREFLIGHT: NS_PF_* bits */
    uint32_t k;         /* units to time, sample or re-run */
    char name[64];      /* PREFLIGHT: the source's name in messages ("" none) */
    ns_hash_t desc_id;  /* CHECK: ns_job_id of the job */
    ns_hash_t root;     /* CHECK: the committed root */
    uint8_t secret[32]; /* CHECK: the draw's secret */
    uint32_t outfiles;  /* CHECK: claimed OUT buffers sent as descriptors */
} ns_worker_extra_t;

/* The whole PREFLIGHT (type NS_WORKER_MSG_PREFLIGHT) or CHECK request
 * frame into sb, as ns_worker_request_pack (no items). */
int ns_worker_request_pack_extra(msgpack_sbuffer *sb, uint32_t type,
                                 const ns_job_t *job, bool verified,
                                 uint32_t files,
                                 const ns_worker_extra_t *x) NS_MUST_CHECK;

typedef struct {
    uint32_t type;       /* NS_WORKER_MSG_RUN, _ITEMS, _FRAUD, _PREFLIGHT or
                            _CHECK */
    ns_worker_extra_t x; /* PREFLIGHT, CHECK */
    ns_job_t job;  /* RUN, ITEMS: validated (ns_job_read); ns_job_init'ed
                      first */
    ns_fraud_proof_t proof; /* FRAUD: read strictly (ns_fraud_read) */
    uint64_t *items;        /* malloc'd, n_items entries; NULL when none */
    uint32_t n_items;       /* at most NS_WORKER_MAX_ITEMS */
    bool verified;          /* the inputs are known to match their hashes */
    uint32_t files;         /* RUN, ITEMS, PREFLIGHT, CHECK: IN buffers sent as
                               descriptors (bit i); only IN arguments, checked
                               here (CHECK's outfiles: only OUT arguments) */
} ns_worker_request_t;

/* Read a request head of len bytes into *q. The caller has ns_job_init'ed
 * q->job and zeroed q->proof, and releases both and frees q->items
 * whatever this returns. NS_ERR_MSGTYPE for another kind, NS_ERR_INVAL for
 * a job or proof that fails ns_job_read / ns_fraud_read (err says why),
 * NS_ERR_NOMEM, the errors of ns_mpr_end. */
int ns_worker_request_read(const uint8_t *head, size_t len,
                           ns_worker_request_t *q, char *err,
                           size_t errlen) NS_MUST_CHECK;

/* ---- RESULT ------------------------------------------------------------- */

typedef struct {
    uint32_t type;        /* NS_WORKER_MSG_RESULT in a well-formed one */
    int64_t status;       /* NS_OK or the job's error */
    const uint8_t *error; /* borrowed from the head, not NUL-terminated */
    size_t error_len;     /* at most NS_WORKER_MAX_ERROR */
    ns_timings_t timings;
    uint64_t extra[NS_WORKER_MAX_EXTRA]; /* PREFLIGHT, CHECK: see above */
    uint32_t n_extra;                    /* 0: none came */
} ns_worker_reply_t;

/* The whole RESULT frame into sb (initialised here, the caller destroys
 * it). error is cut at NS_WORKER_MAX_ERROR bytes. */
void ns_worker_result_pack(msgpack_sbuffer *sb, int status, const char *error,
                           const ns_timings_t *t);
/* The same with extra values (n at most NS_WORKER_MAX_EXTRA). */
void ns_worker_result_pack_extra(msgpack_sbuffer *sb, int status,
                                 const char *error, const ns_timings_t *t,
                                 const uint64_t *extra, uint32_t n);

/* Read a RESULT head into *r (borrows from head), as ns_worker_hello_read
 * does. */
int ns_worker_result_read(const uint8_t *head, size_t len,
                          ns_worker_reply_t *r) NS_MUST_CHECK;

/* The message type of a head (the first element of its array) without
 * reading the rest, so a reader can pick the codec. Errors of ns_mpr_*. */
int ns_worker_frame_type(const uint8_t *head, size_t len,
                         uint32_t *type) NS_MUST_CHECK;

/* ---- CHALLENGE and CHAL_RESULT ------------------------------------------ */

/* The whole CHALLENGE frame for r into sb (initialised here, the caller
 * destroys it). Unknown kinds are packed as kind with empty params (the
 * caller has checked r with ns_chal_request_check). */
void ns_worker_chal_pack(msgpack_sbuffer *sb, const ns_chal_request_t *r);

/* Read a CHALLENGE head into *r (zeroed first). Shape only: the type,
 * a known kind with its params' count, a 32-byte seed, k 0 for imatmul;
 * ns_chal_request_check judges the values. NS_ERR_MSGTYPE for another
 * type, NS_ERR_INVAL for an unknown kind or imatmul k != 0, errors of
 * ns_mpr_end. */
int ns_worker_chal_read(const uint8_t *head, size_t len,
                        ns_chal_request_t *r) NS_MUST_CHECK;

typedef struct {
    uint32_t type;        /* NS_WORKER_MSG_CHAL_RESULT in a well-formed one */
    int64_t status;       /* NS_OK or the challenge's error */
    const uint8_t *error; /* borrowed from the head, not NUL-terminated */
    size_t error_len;     /* at most NS_WORKER_MAX_ERROR */
    ns_hash_t root;       /* label: Merkle root; imatmul: hash of C */
    uint64_t device_us;   /* the prover's own wall time */
    uint64_t answer_len;  /* raw bytes after the head */
} ns_worker_chal_reply_t;

/* The whole CHAL_RESULT frame into sb (initialised here, the caller
 * destroys it); root may be NULL (zeros). error is cut at
 * NS_WORKER_MAX_ERROR bytes. */
void ns_worker_chal_result_pack(msgpack_sbuffer *sb, int status,
                                const char *error, const ns_hash_t root,
                                uint64_t device_us, uint64_t answer_len);

/* Read a CHAL_RESULT head into *r (borrows from head), as
 * ns_worker_result_read does (answer_len is not judged here). */
int ns_worker_chal_result_read(const uint8_t *head, size_t len,
                               ns_worker_chal_reply_t *r) NS_MUST_CHECK;

/* ---- text both ends put in error lines ---------------------------------- */

/* "8.0 GiB", "512.0 MiB", "12 bytes" into out[cap]. */
void ns_worker_fmt_bytes(char *out, size_t cap, uint64_t bytes);

/* "run", "items", "fraud", "challenge", "preflight" or "check" for a
 * request kind. Static
 * text. */
const char *ns_worker_mode_name(int type);

#endif
