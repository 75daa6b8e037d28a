/* jobdir.c - submitted jobs on disk, for resuming (jobdir.h). */
#include "nightshift/jobdir.h"

#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ns_jobdir_save(const char *datadir, const char *job_hex,
                   const uint8_t *packed, size_t packed_len,
                   const ns_job_t *job, const ns_input_t *inputs,
                   const char *const *out_paths)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (snprintf(dir, sizeof dir, "%s/jobs/%s", datadir, job_hex) >=
        (int)sizeof dir)
        return NS_ERR_TOOBIG;
    if (ns_mkdir_p(dir, 0700) != NS_OK)
        return NS_ERR_IO;
    snprintf(path, sizeof path, "%s/job.msgpack", dir);
    int rc = ns_file_write_atomic(path, packed, packed_len, 0600);
    for (uint32_t i = 0; rc == NS_OK && i < job->n_args; i++) {
        if (job->args[i].kind == NS_ARG_IN) {
            snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
            rc =
                ns_file_write_atomic(path, inputs[i].data, inputs[i].len, 0600);
        } else if (job->args[i].kind == NS_ARG_OUT && out_paths &&
                   out_paths[i]) {
            char real[PATH_MAX];
            const char *p = realpath(out_paths[i], real) ? real : out_paths[i];
            snprintf(path, sizeof path, "%s/out%u.path", dir, i);
            rc = ns_file_write_atomic(path, p, strlen(p), 0600);
        }
    }
    return rc;
}

int ns_jobdir_load(const char *datadir, const char *job_hex, ns_job_t *job,
                   uint8_t **in_bufs, ns_input_t *inputs,
                   char (*out_paths)[PATH_MAX], char *err, size_t errlen)
{
    char dir[PATH_MAX], path[PATH_MAX + 32], why[256];
    snprintf(dir, sizeof dir, "%s/jobs/%s", datadir, job_hex);
    snprintf(path, sizeof path, "%s/job.msgpack", dir);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ns_file_read(path, NS_MAX_JOB_MSG, &buf, &len) != NS_OK) {
        snprintf(err, errlen, "no saved job %s in %s/jobs", job_hex, datadir);
        return NS_ERR_NOTFOUND;
    }
    ns_mpr_t r;
    ns_mpr_init(&r, buf, len);
    int rc = ns_job_read(&r, job, why, sizeof why);
    free(buf);
    if (rc != NS_OK) {
        snprintf(err, errlen, "saved job is unreadable: %s", why);
        return rc;
    }
    for (uint32_t i = 0; i < job->n_args; i++) {
        out_paths[i][0] = '\0';
        if (job->args[i].kind == NS_ARG_IN) {
            snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
            if ((rc = ns_file_read(path, NS_MAX_BUFFER, &in_bufs[i], &len)) !=
                NS_OK) {
                snprintf(err, errlen, "cannot read %s: %s", path,
                         ns_strerror(rc));
                return rc;
            }
            inputs[i].data = in_bufs[i];
            inputs[i].len = len;
        } else if (job->args[i].kind == NS_ARG_OUT) {
            uint8_t *p = NULL;
            snprintf(path, sizeof path, "%s/out%u.path", dir, i);
            if (ns_file_read(path, PATH_MAX - 1, &p, &len) == NS_OK) {
                snprintf(out_paths[i], PATH_MAX, "%.*s", (int)len,
                         (const char *)p);
                free(p);
            }
        }
    }
    return NS_OK;
}
