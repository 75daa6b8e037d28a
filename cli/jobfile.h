/* jobfile.h - a job given as a JSON file (`run --job FILE.json`, `submit
 * --job FILE.json`; keys in docs/JOBS.md), turned into the JOB-FLAGS it
 * stands for so that one parser (jobflags.h) checks every job, whichever
 * way it was written.
 *
 * Parsed with jansson, strictly: unknown keys, wrong types, a buffer that
 * no step uses or a step argument that names no buffer are errors that
 * name the key. Relative paths are relative to the job file's directory.
 * Several steps are a pipeline (below): every step is a job of its own,
 * run in order, its flags in step[i]. */
#ifndef NIGHTSHIFT_CLI_JOBFILE_H
#define NIGHTSHIFT_CLI_JOBFILE_H

#include <stddef.h>

#define NS_JOBFILE_MAX_BYTES (1024 * 1024) /* the JSON text */

#define NS_JOBFILE_MAX_STEPS 16 /* steps of a pipeline */

typedef struct {
    int argc;
    char **argv; /* JOB-FLAGS, each string owned */
    int cap;
} ns_jobfile_step_t;

/* A pipeline's steps run in order, each as a job of its own: a buffer
 * {"bytes": N} is written by the first step that names it and read by
 * the later ones; one without "out" (an intermediate) lives in tmpdir
 * between the steps (created here, removed by ns_jobfile_free). */
typedef struct ns_jobfile_s {
    int n_steps;
    ns_jobfile_step_t step[NS_JOBFILE_MAX_STEPS];
    char tmpdir[4096]; /* "" when the job has no intermediate */
} ns_jobfile_t;

/* Read path into *out (free with ns_jobfile_free). NS_ERR_NOTFOUND /
 * NS_ERR_IO for the file, NS_ERR_INVAL for its content (err: one line
 * naming the file, and the line and column or the key at fault),
 * NS_ERR_NOMEM. */
int ns_jobfile_load(const char *path, ns_jobfile_t **out, char *err,
                    size_t errlen);
void ns_jobfile_free(ns_jobfile_t **jf);

#endif
