/* jobdir.h - a submitted job kept on disk so that it can be resumed after
 * a crash: <datadir>/jobs/<job id>/ holds job.msgpack (the descriptor,
 * which names each input by its hash and size), in<i>.bin (input i: a
 * hard link to its blob in the blob store, no copy of the bytes) and
 * out<i>.path (where output i goes). job.msgpack and out<i>.path are
 * written atomically (ns_file_write_atomic); the blobs are synced by the
 * store (ns_blobs_copy_t). */
#ifndef NIGHTSHIFT_JOBDIR_H
#define NIGHTSHIFT_JOBDIR_H

#include "nightshift/blobs.h"
#include "nightshift/job.h"
#include "nightshift/ledger.h"
#include "nightshift/runner.h"

struct ns_ctl_terms; /* control.h */

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The job's inputs are in blobs already (the requester copied them there):
 * each gets its link in<i>.bin, which keeps its bytes for a resume when
 * the store evicts it (where links cannot be made, another filesystem,
 * the resume needs the store to keep it; logged). blobs NULL: no links.
 * out_paths: by argument, NULL where none (or NULL: none at all). */
int ns_jobdir_save(const char *datadir, const char *job_hex,
                   const uint8_t *packed, size_t packed_len,
                   const ns_job_t *job, ns_blobs_t *blobs,
                   const char *const *out_paths) NS_MUST_CHECK;

/* The job's terms (its price, collateral, requirements, windows) saved
 * as terms.msgpack (ns_ctl_terms_pack, written atomically) beside it, so
 * that `submit --resume` announces it again with the same requirements
 * (a GPU job resumed must not go to a CPU). */
int ns_jobdir_save_terms(const char *datadir, const char *job_hex,
                         const struct ns_ctl_terms *t) NS_MUST_CHECK;
/* Read them back: NS_ERR_NOTFOUND when none were saved (a job directory
 * of an earlier version), NS_ERR_CORRUPT when the file does not read. */
int ns_jobdir_load_terms(const char *datadir, const char *job_hex,
                         struct ns_ctl_terms *t) NS_MUST_CHECK;

/* Read a saved job back: the descriptor into job (ns_job_release it),
 * each input mapped read-only from blobs (checked against the
 * descriptor's hash) into mapped[i] (ns_blobs_unmap(mapped[i],
 * inputs[i].len)) with inputs[i] viewing it, and out_paths[i] ("" where
 * none). An input the store no longer holds is copied back into it from
 * in<i>.bin (its link, or the whole copy that job directories of earlier
 * versions hold) and checked. NS_ERR_NOTFOUND when no job is saved under
 * that id; otherwise the error and one line in err. */
int ns_jobdir_load(const char *datadir, const char *job_hex, ns_job_t *job,
                   ns_blobs_t *blobs, const uint8_t **mapped,
                   ns_input_t *inputs, char (*out_paths)[PATH_MAX], char *err,
                   size_t errlen) NS_MUST_CHECK;

/* How often a running node prunes (it also does at start). */
#define NS_JOBDIR_PRUNE_MS (3600 * 1000)

/* What one ns_jobdir_prune pass found and did. */
typedef struct {
    uint32_t removed;       /* job directories deleted */
    uint64_t removed_bytes; /* their size */
    uint32_t kept;          /* job directories left */
    uint64_t kept_bytes;    /* their size */
} ns_jobdir_prune_t;

/* Delete <datadir>/jobs/<id>/ of jobs that are over: settled or cancelled
 * in ledger, once older (job.msgpack's mtime) than retention_ms, and then,
 * oldest first, while all job directories together exceed max_bytes (0:
 * no cap). A job the ledger does not know was never posted (the ledger
 * holds every entry of our own key): it goes once older than
 * retention_ms and at least a day, never for the size cap (its directory
 * is written just before it is posted). A job open or awarded in the
 * ledger is never deleted, whatever its age or size: it is running or can
 * be resumed. Directories not named by a job id are left alone. Never
 * fails: what cannot be read or deleted is kept. */
void ns_jobdir_prune(const char *datadir, ns_ledger_t *ledger, uint64_t now_ms,
                     uint64_t retention_ms, uint64_t max_bytes,
                     ns_jobdir_prune_t *out);

#endif
