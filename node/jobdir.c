/* jobdir.c - submitted jobs on disk, for resuming (jobdir.h). */
#include "nightshift/jobdir.h"
#include "nightshift/control.h"

#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ns_jobdir_save_terms(const char *datadir, const char *job_hex,
                         const ns_ctl_terms_t *t)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/jobs/%s/terms.msgpack", datadir,
                 job_hex) >= (int)sizeof path)
        return NS_ERR_TOOBIG;
    ns_buf_t b;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_buf_init(&b);
    ns_mp_writer_init(&w, &pk, &b);
    ns_ctl_terms_pack(&pk, t);
    int rc = w.err != NS_OK ? w.err
                            : ns_file_write_atomic(path, b.data, b.len, 0600);
    ns_buf_release(&b);
    return rc;
}

int ns_jobdir_load_terms(const char *datadir, const char *job_hex,
                         ns_ctl_terms_t *t)
{
    char path[PATH_MAX];
    uint8_t buf[1024];
    if (snprintf(path, sizeof path, "%s/jobs/%s/terms.msgpack", datadir,
                 job_hex) >= (int)sizeof path)
        return NS_ERR_TOOBIG;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
    size_t n = fread(buf, 1, sizeof buf, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    if (more)
        return NS_ERR_CORRUPT;
    ns_mpr_t rd;
    memset(t, 0, sizeof *t);
    ns_mpr_init(&rd, buf, n);
    ns_ctl_terms_read(&rd, t);
    return ns_mpr_end(&rd) == NS_OK ? NS_OK : NS_ERR_CORRUPT;
}

int ns_jobdir_save(const char *datadir, const char *job_hex,
                   const uint8_t *packed, size_t packed_len,
                   const ns_job_t *job, ns_blobs_t *blobs,
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
        if (job->args[i].kind == NS_ARG_IN && blobs) {
            snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
            if (ns_blobs_link(blobs, job->args[i].hash, path) != NS_OK)
                ns_warn(NS_MOD_NODE,
                        "event=jobdir_link_failed job=%.16s arg=%u "
                        "error=\"%s\" effect=\"a resume needs the blob "
                        "store to keep the input\"",
                        job_hex, i, strerror(errno));
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

/* Input i of a saved job, mapped from the store; taken back in from the
 * job directory's in<i>.bin when the store lost it. */
static int s_load_input(const char *dir, const ns_arg_t *a, uint32_t i,
                        ns_blobs_t *blobs, const uint8_t **data, size_t *len,
                        char *err, size_t errlen)
{
    char path[PATH_MAX + 32], hex[17];
    ns_hex(hex, a->hash, 8);
    int rc = ns_blobs_map(blobs, a->hash, data, len);
    if (rc != NS_ERR_NOTFOUND) {
        if (rc != NS_OK)
            snprintf(err, errlen, "cannot map input %u (blob %s) from %s: %s",
                     i, hex, ns_blobs_dir(blobs), ns_strerror(rc));
        return rc;
    }
    snprintf(path, sizeof path, "%s/in%u.bin", dir, i);
    ns_hash_t id;
    uint64_t size = 0;
    char why[PATH_MAX + 200];
    rc = ns_blobs_add_map(blobs, path, a->size, id, data, &size, why,
                          sizeof why);
    if (rc == NS_OK &&
        (size != a->size || memcmp(id, a->hash, NS_HASH_BYTES))) {
        snprintf(why, sizeof why, "%s does not hash to the descriptor's input",
                 path);
        ns_blobs_unmap(*data, (size_t)size);
        *data = NULL;
        rc = NS_ERR_CORRUPT;
    }
    if (rc != NS_OK) {
        snprintf(err, errlen,
                 "input %u (blob %s) is not in %s any more and cannot be "
                 "taken back from the job's directory: %s",
                 i, hex, ns_blobs_dir(blobs), why);
        return rc;
    }
    *len = (size_t)size;
    return NS_OK;
}

int ns_jobdir_load(const char *datadir, const char *job_hex, ns_job_t *job,
                   ns_blobs_t *blobs, const uint8_t **mapped,
                   ns_input_t *inputs, char (*out_paths)[PATH_MAX], char *err,
                   size_t errlen)
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
            rc = s_load_input(dir, &job->args[i], i, blobs, &mapped[i], &len,
                              err, errlen);
            if (rc != NS_OK)
                return rc;
            inputs[i].data = mapped[i];
            inputs[i].len = len;
            inputs[i].verified = true;
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

/* ---- pruning ---------------------------------------------------------------
 */

typedef struct {
    char hex[2 * NS_HASH_BYTES + 1];
    uint64_t mtime_ms;
    uint64_t bytes;
    bool closed;   /* settled or cancelled */
    bool unposted; /* not in the ledger */
} s_jobent_t;

/* A job directory is written just before its job is posted: one the
 * ledger does not know is left this long whatever the settings. */
#define S_UNPOSTED_MIN_MS (UINT64_C(24) * 3600 * 1000)

/* The files of one job directory (flat): their total size and the
 * descriptor's mtime. */
static int s_measure(const char *dir, s_jobent_t *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return NS_ERR_IO;
    struct dirent *de;
    char path[PATH_MAX + 300];
    struct stat st;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >=
            (int)sizeof path)
            continue;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            e->bytes += (uint64_t)st.st_size;
    }
    closedir(d);
    snprintf(path, sizeof path, "%s/job.msgpack", dir);
    if (stat(path, &st) != 0 && stat(dir, &st) != 0)
        return NS_ERR_IO;
    e->mtime_ms = (uint64_t)st.st_mtim.tv_sec * 1000 +
                  (uint64_t)st.st_mtim.tv_nsec / 1000000;
    return NS_OK;
}

/* Delete a job directory's files, then the directory. */
static int s_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NS_ERR_IO;
    struct dirent *de;
    char path[PATH_MAX + 300];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >=
            (int)sizeof path)
            continue;
        (void)unlink(path);
    }
    closedir(d);
    return rmdir(dir) == 0 ? NS_OK : NS_ERR_IO;
}

static int s_older_first(const void *a, const void *b)
{
    const s_jobent_t *x = a, *y = b;
    return x->mtime_ms < y->mtime_ms ? -1 : x->mtime_ms > y->mtime_ms;
}

void ns_jobdir_prune(const char *datadir, ns_ledger_t *ledger, uint64_t now_ms,
                     uint64_t retention_ms, uint64_t max_bytes,
                     ns_jobdir_prune_t *out)
{
    char jobs[PATH_MAX], dir[PATH_MAX + 80];
    s_jobent_t *ents = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    memset(out, 0, sizeof *out);
    if (snprintf(jobs, sizeof jobs, "%s/jobs", datadir) >= (int)sizeof jobs)
        return;
    DIR *d = opendir(jobs);
    if (!d)
        return; /* no job ever submitted from here */
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        ns_hash_t id;
        if (strlen(de->d_name) != 2 * NS_HASH_BYTES ||
            ns_unhex(id, NS_HASH_BYTES, de->d_name) != NS_OK)
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            s_jobent_t *ne = realloc(ents, nc * sizeof *ne);
            if (!ne)
                break;
            ents = ne;
            cap = nc;
        }
        s_jobent_t *e = &ents[n];
        memset(e, 0, sizeof *e);
        memcpy(e->hex, de->d_name, sizeof e->hex);
        snprintf(dir, sizeof dir, "%s/%s", jobs, e->hex);
        if (s_measure(dir, e) != NS_OK)
            continue;
        ns_ledger_job_t lj;
        int rc = ns_ledger_job(ledger, id, &lj);
        e->unposted = rc == NS_ERR_NOTFOUND;
        e->closed = rc == NS_OK && (lj.state == NS_JOB_SETTLED ||
                                    lj.state == NS_JOB_CANCELLED);
        total += e->bytes;
        n++;
    }
    closedir(d);
    if (n)
        qsort(ents, n, sizeof *ents, s_older_first);
    for (size_t i = 0; i < n; i++) {
        s_jobent_t *e = &ents[i];
        uint64_t age_ms = now_ms > e->mtime_ms ? now_ms - e->mtime_ms : 0;
        bool too_much = max_bytes && total > max_bytes;
        bool go = (e->closed && (age_ms >= retention_ms || too_much)) ||
                  (e->unposted && age_ms >= retention_ms &&
                   age_ms >= S_UNPOSTED_MIN_MS);
        snprintf(dir, sizeof dir, "%s/%s", jobs, e->hex);
        if (go && s_remove(dir) == NS_OK) {
            out->removed++;
            out->removed_bytes += e->bytes;
            total -= e->bytes;
        } else {
            out->kept++;
            out->kept_bytes += e->bytes;
        }
    }
    free(ents);
}
