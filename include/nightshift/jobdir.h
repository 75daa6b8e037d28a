/* jobdir.h - a submitted job kept on disk so that it can be resumed after
 * a crash: <datadir>/jobs/<job id>/ holds job.msgpack (the descriptor),
 * in<i>.bin (input i) and out<i>.path (where output i goes). Every file is
 * written atomically (ns_file_write_atomic). */
#ifndef NIGHTSHIFT_JOBDIR_H
#define NIGHTSHIFT_JOBDIR_H

#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* out_paths: by argument, NULL where none (or NULL: none at all). */
int ns_jobdir_save(const char *datadir, const char *job_hex,
                   const uint8_t *packed, size_t packed_len,
                   const ns_job_t *job, const ns_input_t *inputs,
                   const char *const *out_paths) NS_MUST_CHECK;

/* Read a saved job back: the descriptor into job (ns_job_release it), each
 * input into in_bufs[i] (malloc'd, caller frees) with inputs[i] viewing
 * it, and out_paths[i] ("" where none). NS_ERR_NOTFOUND when no job is
 * saved under that id; otherwise the error and one line in err. */
int ns_jobdir_load(const char *datadir, const char *job_hex, ns_job_t *job,
                   uint8_t **in_bufs, ns_input_t *inputs,
                   char (*out_paths)[PATH_MAX], char *err,
                   size_t errlen) NS_MUST_CHECK;

#endif
