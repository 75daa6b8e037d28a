/* jobspec.h - a job given by JOB-FLAGS on the command line (`run`,
 * `submit`): the descriptor, its input and output files, the buffers. */
#ifndef NIGHTSHIFT_CLI_JOBSPEC_H
#define NIGHTSHIFT_CLI_JOBSPEC_H

#include "nightshift/job.h"
#include "nightshift/runner.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_JOBSPEC_MAX_CLI 32 /* JOB-FLAGS beside --job, remembered */

typedef struct {
    ns_job_t job;
    const char *in_paths[NS_MAX_ARGS];  /* in:FILE, by argument */
    const char *out_paths[NS_MAX_ARGS]; /* out:BYTES:FILE, by argument */
    const char *kernel_path;            /* --kernel FILE, for summaries */
    ns_input_t inputs[NS_MAX_ARGS];     /* views of in_bufs or mapped */
    uint8_t *in_bufs[NS_MAX_ARGS];      /* input contents, owned (run) */
    /* Inputs mapped read-only (unmapped by release): the blob store's
     * copies (store set), or the user's files (map_inputs) */
    const uint8_t *mapped[NS_MAX_ARGS];
    size_t mapped_len[NS_MAX_ARGS];
    /* Where the inputs come from, set before ns_jobspec_prepare: with
     * store (borrowed; `submit` as a light peer), each input file is
     * copied into the blob store in pieces and the stored copy mapped, so
     * that no input is ever whole in the heap and the user editing a file
     * changes nothing the job serves or checks; with map_inputs (`submit
     * --node`: the node copies the files into its own store and checks
     * them against the descriptor), each file is mapped only to be hashed;
     * otherwise (`run`) each file is read into in_bufs. */
    struct ns_blobs *store;
    bool map_inputs;
    uint8_t *outputs[NS_MAX_ARGS]; /* output contents, owned */
    struct ns_jobfile_s *jobfile;  /* --job FILE.json, owned */
    uint32_t shards; /* --shards N ("shards" in a job file); 0: not given */
    /* A job file of several steps becomes one pipeline job (job.h) in
     * ns_jobspec_prepare when this is set and it is not sharded (submit:
     * one award for all the steps); otherwise its steps are jobs of their
     * own, one after the other (ns_jobspec_next_step). */
    bool as_pipeline;
    int step;        /* the job file's step now in the spec */
    /* JOB-FLAGS from the command line beside --job, applied again to each
     * later step: flag and value, borrowed from argv */
    char *cli[2 * NS_JOBSPEC_MAX_CLI];
    int n_cli;
} ns_jobspec_t;

void ns_jobspec_init(ns_jobspec_t *spec);
void ns_jobspec_release(ns_jobspec_t *spec);
/* Free or unmap what the inputs hold (by the next step, and release). */
void ns_jobspec_drop_inputs(ns_jobspec_t *spec);

/* One JOB-FLAG at argv[*i]: 1 consumed (and *i advanced), 0 not a job
 * flag, -1 / -2 an error already printed (exit status 1 / 2). `--job
 * FILE.json` (jobfile.h) stands for the JOB-FLAGS the file describes;
 * `--shards N` (1..NS_MAX_SHARDS) is one too, checked against the job by
 * ns_jobspec_prepare. */
int ns_jobspec_flag(ns_jobspec_t *spec, const char *cmd, int argc, char **argv,
                    int *i);

/* After the flags: built-in source and entry, input files read (or stored,
 * or mapped: store, map_inputs) and hashed, descriptor finalised and
 * validated. Returns an exit status (0 ok), the error printed. */
int ns_jobspec_prepare(ns_jobspec_t *spec, const char *cmd);

/* A job file of several steps (a pipeline, jobfile.h) is run one step
 * at a time: the spec holds step 0 after the flags; once a step's outputs
 * are written, this loads and prepares the next one (the command line's
 * other JOB-FLAGS applied again). Returns -1 when there is none, else an
 * exit status (0 ok, the error printed). */
int ns_jobspec_next_step(ns_jobspec_t *spec, const char *cmd);
/* Steps run one after the other as jobs of their own: 1 unless a job
 * file gives more and they were not made one pipeline job. */
int ns_jobspec_steps(const ns_jobspec_t *spec);

/* Whether OUT argument k is a pipeline's intermediate (its file in the
 * job file's temporary directory), which no one asked to keep. */
bool ns_jobspec_intermediate(const ns_jobspec_t *spec, uint32_t k);

/* Write every out:...:FILE output held in outputs[] atomically (one that
 * `submit` received straight into its file has none and is skipped, and
 * so is a one-job pipeline's intermediate). */
int ns_jobspec_write_outputs(ns_jobspec_t *spec, char *error, size_t errlen);

/* The program binary cache directory ($NIGHTSHIFT_CACHE,
 * $XDG_CACHE_HOME/nightshift/programs, ~/.cache/nightshift/programs),
 * created; "" when none works. */
void ns_cache_dir(char *dir, size_t cap);

#endif
