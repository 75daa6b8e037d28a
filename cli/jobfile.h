/* jobfile.h - a job given as a JSON file (`run --job FILE.json`, `submit
 * --job FILE.json`; keys in docs/JOBS.md), turned into the JOB-FLAGS it
 * stands for so that one parser (jobflags.h) checks every job, whichever
 * way it was written.
 *
 * Parsed with jansson, strictly: unknown keys, wrong types, a buffer that
 * no step uses or a step argument that names no buffer are errors that
 * name the key. Relative paths are relative to the job file's directory.
 * What the network cannot run yet is refused with a clear error, never
 * run differently: pipelines of several steps and "shards" above 1. */
#ifndef NIGHTSHIFT_CLI_JOBFILE_H
#define NIGHTSHIFT_CLI_JOBFILE_H

#include <stddef.h>

#define NS_JOBFILE_MAX_BYTES (1024 * 1024) /* the JSON text */

typedef struct ns_jobfile_s {
    int argc;
    char **argv; /* JOB-FLAGS, each string owned */
} ns_jobfile_t;

/* Read path into *out (free with ns_jobfile_free). NS_ERR_NOTFOUND /
 * NS_ERR_IO for the file, NS_ERR_INVAL for its content (err: one line
 * naming the file, and the line and column or the key at fault),
 * NS_ERR_NOMEM. */
int ns_jobfile_load(const char *path, ns_jobfile_t **out, char *err,
                    size_t errlen);
void ns_jobfile_free(ns_jobfile_t **jf);

#endif
