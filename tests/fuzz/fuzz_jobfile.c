/* fuzz_jobfile.c - libFuzzer target for JSON job files (cli/jobfile.c,
 * docs/JOBS.md). ns_jobfile_load takes a path, so the harness writes the
 * input to a file of its own first. Built as `fuzz_jobfile` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_jobfile_replay`, which ctest
 * runs over tests/fuzz/corpus/jobfile (hand-written seeds: the examples
 * of docs/JOBS.md and tests/integration/test_jobfile.py).
 *
 * On failure the verdict is NS_ERR_INVAL (or NS_ERR_IO / NOMEM) with one
 * line in err naming the file; on success the file became JOB-FLAGS that
 * the JOB-FLAGS parser takes or refuses with a reason, never crashes on.
 */
#include "jobfile.h"
#include "jobflags.h"

#include "nightshift/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_jobfile: %s:%d: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[256];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_jobfile.%ld.json",
                 dir && dir[0] ? dir : "/tmp", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    S_ASSERT(f != NULL);
    S_ASSERT(fwrite(data, 1, size, f) == size);
    S_ASSERT(fclose(f) == 0);
    char err[768] = "";
    ns_jobfile_t *jf = NULL;
    int rc = ns_jobfile_load(path, &jf, err, sizeof err);
    unlink(path);
    if (rc != NS_OK) {
        S_ASSERT(jf == NULL);
        S_ASSERT(rc == NS_ERR_INVAL || rc == NS_ERR_IO || rc == NS_ERR_NOMEM ||
                 rc == NS_ERR_NOTFOUND);
        S_ASSERT(err[0] && strchr(err, '\n') == NULL);
        return 0;
    }
    S_ASSERT(jf && jf->n_steps >= 1 && jf->n_steps <= NS_JOBFILE_MAX_STEPS);
    for (int s = 0; s < jf->n_steps; s++) {
        const ns_jobfile_step_t *st = &jf->step[s];
        S_ASSERT(st->argc > 0 && st->argv[st->argc] == NULL);
        ns_job_t job;
        ns_job_init(&job);
        const char *in[NS_MAX_ARGS] = {0}, *out[NS_MAX_ARGS] = {0};
        for (int k = 0; k < st->argc;) {
            if (strcmp(st->argv[k], "--shards") == 0) { /* jobspec's */
                S_ASSERT(k + 1 < st->argc);
                k += 2;
                continue;
            }
            int prc = ns_job_parse_flag(&job, st->argc, st->argv, &k, in, out,
                                        err, sizeof err);
            S_ASSERT(prc != 0); /* every word the file makes is a job flag */
            if (prc < 0)
                break;
        }
        ns_job_release(&job);
    }
    ns_jobfile_free(&jf);
    S_ASSERT(jf == NULL);
    return 0;
}
