/* transfer.h - blobs over FETCH/CHUNK (market.h), both directions.
 *
 * The requester serves the descriptor and inputs and fetches the
 * statement and outputs; the provider does the reverse. Both use this one
 * implementation:
 *
 *  - serving: ns_transfer_serve answers one FETCH from a blob in memory;
 *  - fetching: an ns_fetch_t pulls a list of blobs from one peer, in order,
 *    with at most `window` FETCHes in flight, every chunk checked against
 *    what was asked (offset on a chunk boundary, exact length, never twice,
 *    total as expected), so a peer cannot make us write outside a blob or
 *    count a chunk twice.
 *
 * A blob's size is either known (from our own descriptor) or learnt from
 * the first CHUNK, capped by the caller (the provider learns the
 * descriptor's size that way).
 */
#ifndef NIGHTSHIFT_TRANSFER_H
#define NIGHTSHIFT_TRANSFER_H

#include "nightshift/job.h"
#include "nightshift/market.h"
#include "nightshift/node_io.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_FETCH_MAX_BLOBS (NS_MAX_ARGS + 2) /* descriptor/statement + args */

typedef struct {
    uint32_t blob;  /* NS_BLOB_* */
    uint8_t *data;  /* destination; owned when `owned` */
    uint64_t total; /* bytes; 0 = learn it from the first CHUNK */
    uint64_t max;   /* cap on a learnt total */
    uint64_t next;  /* next offset to ask for */
    uint64_t got;   /* bytes received */
    uint8_t *seen;  /* one bit per chunk received */
    bool owned;     /* data allocated here */
    /* A file sink (ns_fetch_add_file): chunks are written at their offset
     * to fd and never held in memory; data stays NULL. */
    int fd;           /* -1: the blob is in memory */
    bool check;       /* compare the whole blob with `want` when complete */
    ns_hash_t want;   /* the blob's content hash (check) */
    uint64_t hashed;  /* the contiguous prefix fed to hs */
    uint64_t resumed; /* bytes found already in the file, not fetched */
    crypto_generichash_state *hs; /* BLAKE2b-256 of [0, hashed); owned,
                                     64-byte aligned, when checking */
    /* An output (ns_fetch_add_output): the commitment's leaves of
     * [0, hashed), one per NS_COMMIT_CHUNK, computed as the prefix grows. */
    ns_hash_t *leaves;  /* borrowed; NULL: none */
    uint32_t arg;       /* the OUT argument the blob is */
    ns_hash_t leaf_job; /* the job id the leaves are bound to (desc_id) */
} ns_fetch_blob_t;

typedef struct {
    ns_hash_t job_id;
    uint8_t peer[NS_ID_BYTES];
    ns_fetch_blob_t blobs[NS_FETCH_MAX_BLOBS];
    uint32_t n_blobs;
    uint32_t cur;       /* first blob not complete */
    uint32_t in_flight; /* FETCHes sent, not answered */
    uint32_t window;    /* at most this many in flight */
    ns_buf_t body;      /* encode buffer */
} ns_fetch_t;

void ns_fetch_init(ns_fetch_t *f, const ns_hash_t job_id,
                   const uint8_t peer[NS_ID_BYTES], uint32_t window);
/* Frees owned blobs; f may be initialised again. */
void ns_fetch_release(ns_fetch_t *f);

/* Queue a blob. data = NULL: allocated here (total known) or on the first
 * CHUNK (total 0, then at most max bytes). NS_ERR_TOOBIG past
 * NS_FETCH_MAX_BLOBS, NS_ERR_NOMEM. */
int ns_fetch_add(ns_fetch_t *f, uint32_t blob, uint8_t *data, uint64_t total,
                 uint64_t max) NS_MUST_CHECK;

/* Queue a blob of known size (total >= 1) received into the file fd
 * (opened read-write by the caller, who keeps owning it): each chunk is
 * written at its offset as it arrives and hashed incrementally (BLAKE2b
 * state kept across chunks, chunks hashed in order once the prefix before
 * them is complete, out-of-order ones read back from the file), so only
 * one chunk sits in memory. Resume: the whole chunks already in the file
 * (its size rounded down to NS_CHUNK_BYTES, at most total) are taken as
 * received, hashed from the file, and not fetched again (b->resumed).
 * When complete, the blob must hash to want: ns_fetch_on_chunk returns
 * NS_ERR_CORRUPT otherwise and empties the file (a wrong prefix is never
 * resumed). NS_ERR_IO when the file cannot be read or sized. */
int ns_fetch_add_file(ns_fetch_t *f, uint32_t blob, int fd, uint64_t total,
                      const ns_hash_t want) NS_MUST_CHECK;

/* Queue OUT argument `arg` of a job (total = its size, >= 1) and compute
 * its commitment's leaves (verify.h) as its bytes arrive, in order:
 * leaves[c] = ns_chunk_leaf(job_id, arg, c, chunk c) for every
 * NS_COMMIT_CHUNK of the blob (a CHUNK holds whole leaves, but for the
 * blob's last), so the root needs no second pass over the bytes. fd >= 0:
 * received into that file (opened read-write by the caller, who keeps
 * owning it), each chunk written at its offset and never held; emptied
 * here, or with resume the whole chunks already in it are taken as
 * received (as ns_fetch_add_file does; the caller knows they belong to
 * this result, and fetches whole again if the root does not match);
 * fd < 0: into data (total bytes, borrowed).
 * leaves (ceil(total / NS_COMMIT_CHUNK) hashes) is borrowed and must
 * outlive f. NS_ERR_INVAL, NS_ERR_TOOBIG, NS_ERR_NOMEM, NS_ERR_IO. */
int ns_fetch_add_output(ns_fetch_t *f, uint32_t blob, int fd, uint8_t *data,
                        uint64_t total, uint32_t arg, const ns_hash_t job_id,
                        ns_hash_t *leaves, bool resume) NS_MUST_CHECK;

/* Send FETCHes up to the window. A send error is returned (nothing
 * counted in flight for it). */
int ns_fetch_pump(ns_fetch_t *f, ns_send_fn send, void *user) NS_MUST_CHECK;

/* A CHUNK from f->peer: copy it in. Returns NS_OK (taken; *done_blob is
 * the index of the blob it completed or -1), NS_ERR_NOTFOUND (not one of
 * ours: another job or blob, ignore), NS_ERR_INVAL (a chunk we never asked
 * for or of the wrong size: the peer misbehaves), NS_ERR_DUPLICATE (a
 * chunk already received: the answer to a FETCH asked again after
 * ns_fetch_rewind, or a replay; nothing written, ignore it), NS_ERR_TOOBIG
 * (learnt total over the cap), NS_ERR_NOMEM, NS_ERR_IO (a file sink could
 * not be written: disk full, unwritable; the chunk is not counted),
 * NS_ERR_CORRUPT (the completed blob does not hash to what
 * ns_fetch_add_file was told: the blob is reset and its file emptied, so
 * a pump would fetch it again from the start). */
int ns_fetch_on_chunk(ns_fetch_t *f, const ns_chunk_t *c,
                      int *done_blob) NS_MUST_CHECK;

/* Every queued blob complete. */
bool ns_fetch_done(const ns_fetch_t *f);

/* Forget progress (a new provider): blobs stay queued, data is kept
 * (it will be overwritten), file sinks are emptied, nothing in flight. */
void ns_fetch_restart(ns_fetch_t *f);

/* The peer stopped answering (a dropped connection, a restarted peer):
 * forget the FETCHes in flight, keep every chunk received, and ask again
 * from the first missing chunk on the next pump. Chunks received stay
 * received: the transfer resumes, it does not start over. */
void ns_fetch_rewind(ns_fetch_t *f);

/* The blob's bytes verified so far: its hashed prefix. */
uint64_t ns_fetch_hashed(const ns_fetch_t *f, uint32_t blob);

/* The blob's bytes (NULL until allocated) and size. */
const ns_fetch_blob_t *ns_fetch_blob(const ns_fetch_t *f, uint32_t blob);

/* Answer a FETCH from a blob we hold: the CHUNK body in out. NS_ERR_INVAL
 * when the offset is past the end. */
int ns_transfer_serve(const ns_chunk_t *fetch, const uint8_t *data,
                      uint64_t total, ns_buf_t *out) NS_MUST_CHECK;

#endif
