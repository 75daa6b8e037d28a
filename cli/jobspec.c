/* jobspec.c - a job from the command line's JOB-FLAGS, shared by `run`
 * and `submit`: built-in resolution, input files, output files. */
#include "jobspec.h"
#include "cli.h"
#include "jobfile.h"
#include "jobflags.h"

#include "nightshift/blobs.h"
#include "nightshift/util.h"

#include <sodium.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- input hashes remembered -------------------------------------------
 *
 * Hashing an input file costs about 1 ms a MiB, on every `run` and
 * `submit` of it: seconds for weights of a few GiB submitted again and
 * again. What an earlier command hashed is kept, per user, in one file of
 * S_HC_SLOTS fixed records beside the program cache
 * (<cache>/../input-hashes; $NIGHTSHIFT_CACHE/input-hashes), the slot
 * chosen by the file's device and inode (a record of another file in it
 * is overwritten). A record vouches for the file while its device, inode,
 * size and mtime are the same and the hash was settled (ns_mtime_settled,
 * util.h, as ns_blobs_map's). A file changed without moving its mtime
 * (set back on purpose, or written through a shared mapping whose pages
 * stayed dirty) is not caught: the job then names the earlier bytes, and
 * a node that copies the file finds the difference and says so. Records
 * carry a checksum; one that does not check is no record. Nothing here is
 * durable or required: any failure only means hashing again. */
#define S_HC_SLOTS 1024
#define S_HC_RECORD 128
static const char s_hc_magic[8] = "nsihash1";

typedef struct {
    char magic[8];
    uint64_t dev, ino, size;
    int64_t mtime_ns, hashed_ns;
    uint8_t hash[NS_HASH_BYTES];
    uint8_t pad[S_HC_RECORD - 8 - 5 * 8 - NS_HASH_BYTES - 16];
    uint8_t check[16]; /* BLAKE2b-128 of everything before it */
} s_hc_record_t;
_Static_assert(sizeof(s_hc_record_t) == S_HC_RECORD, "hash cache record");

/* The records' file, opened read-write (created); -1 when there is none
 * to be had. */
static int s_hc_open(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    ns_cache_dir(dir, sizeof dir);
    if (!dir[0])
        return -1;
    /* beside the programs (.../nightshift/programs), or inside
     * $NIGHTSHIFT_CACHE, which is the programs' directory itself */
    const char *env = getenv("NIGHTSHIFT_CACHE");
    char *slash = strrchr(dir, '/');
    if (!(env && env[0]) && slash && strcmp(slash, "/programs") == 0)
        *slash = '\0';
    if (snprintf(path, sizeof path, "%s/input-hashes", dir) >= (int)sizeof path)
        return -1;
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

static off_t s_hc_slot(const struct stat *st)
{
    uint64_t k = (uint64_t)st->st_dev * UINT64_C(0x9E3779B97F4A7C15) ^
                 (uint64_t)st->st_ino;
    k ^= k >> 29;
    return (off_t)(k % S_HC_SLOTS) * S_HC_RECORD;
}

static void s_hc_check(const s_hc_record_t *r, uint8_t out[16])
{
    crypto_generichash(out, 16, (const uint8_t *)r,
                       offsetof(s_hc_record_t, check), NULL, 0);
}

/* The remembered hash of the file st describes, into id: true when a
 * record vouches for it. */
static bool s_hc_get(const struct stat *st, ns_hash_t id)
{
    int fd = s_hc_open();
    if (fd < 0)
        return false;
    s_hc_record_t r;
    uint8_t check[16];
    bool ok = pread(fd, &r, sizeof r, s_hc_slot(st)) == (ssize_t)sizeof r;
    close(fd);
    if (!ok)
        return false;
    s_hc_check(&r, check);
    if (memcmp(r.magic, s_hc_magic, sizeof r.magic) ||
        sodium_memcmp(check, r.check, sizeof check) ||
        r.dev != (uint64_t)st->st_dev || r.ino != (uint64_t)st->st_ino ||
        r.size != (uint64_t)st->st_size || r.mtime_ns != ns_mtime_ns(st) ||
        !ns_mtime_settled(r.mtime_ns, r.hashed_ns))
        return false;
    memcpy(id, r.hash, NS_HASH_BYTES);
    return true;
}

/* Remember id for the file st describes, hashed from hashed_ns on (taken
 * before st). Only a record that can vouch later is worth writing. */
static void s_hc_put(const struct stat *st, int64_t hashed_ns,
                     const ns_hash_t id)
{
    if (!ns_mtime_settled(ns_mtime_ns(st), hashed_ns))
        return; /* it could not vouch: a later hash, once the file has
                   been still, writes one */
    int fd = s_hc_open();
    if (fd < 0)
        return;
    s_hc_record_t r;
    memset(&r, 0, sizeof r);
    memcpy(r.magic, s_hc_magic, sizeof r.magic);
    r.dev = (uint64_t)st->st_dev;
    r.ino = (uint64_t)st->st_ino;
    r.size = (uint64_t)st->st_size;
    r.mtime_ns = ns_mtime_ns(st);
    r.hashed_ns = hashed_ns;
    memcpy(r.hash, id, NS_HASH_BYTES);
    s_hc_check(&r, r.check);
    (void)!pwrite(fd, &r, sizeof r, s_hc_slot(st));
    close(fd);
}

/* len bytes at data, the content of the file st describes (stat taken at
 * hashed_ns or later): its hash into id, remembered or computed. */
static void s_hash_input(const struct stat *st, int64_t hashed_ns,
                         const uint8_t *data, size_t len, ns_hash_t id)
{
    if ((uint64_t)st->st_size == len && s_hc_get(st, id))
        return;
    ns_hash(id, data, len);
    if ((uint64_t)st->st_size == len)
        s_hc_put(st, hashed_ns, id);
}

void ns_jobspec_init(ns_jobspec_t *spec)
{
    memset(spec, 0, sizeof *spec);
    ns_job_init(&spec->job);
}

void ns_jobspec_drop_inputs(ns_jobspec_t *spec)
{
    for (uint32_t k = 0; k < NS_MAX_ARGS; k++) {
        free(spec->in_bufs[k]);
        ns_blobs_unmap(spec->mapped[k], spec->mapped_len[k]);
        spec->in_bufs[k] = NULL;
        spec->mapped[k] = NULL;
        spec->mapped_len[k] = 0;
        memset(&spec->inputs[k], 0, sizeof spec->inputs[k]);
    }
}

void ns_jobspec_release(ns_jobspec_t *spec)
{
    ns_jobspec_drop_inputs(spec);
    for (uint32_t k = 0; k < NS_MAX_ARGS; k++)
        free(spec->outputs[k]);
    ns_job_release(&spec->job);
    ns_jobfile_free(&spec->jobfile);
    memset(spec, 0, sizeof *spec);
}

/* --shards N: 1 consumed, -2 a bad value (err says why). */
static int s_shards(ns_jobspec_t *spec, int argc, char **argv, int *i,
                    char *err, size_t errlen)
{
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    char *end = NULL;
    unsigned long long n =
        v && *v >= '1' && *v <= '9' ? strtoull(v, &end, 10) : 0;
    if (!v || !end || *end || n < 1 || n > NS_MAX_SHARDS) {
        snprintf(err, errlen, "--shards '%s': a number of shards, 1..%d",
                 v ? v : "", NS_MAX_SHARDS);
        return -2;
    }
    if (spec->shards) {
        snprintf(err, errlen, "--shards given twice");
        return -2;
    }
    spec->shards = (uint32_t)n;
    *i += 2;
    return 1;
}

/* Step i's flags from the job file into spec: 0, or -1 / -2 with the
 * error printed. */
static int s_apply_step(ns_jobspec_t *spec, const char *cmd, int i,
                        const char *path)
{
    char err[768];
    ns_jobfile_step_t *st = &spec->jobfile->step[i];
    for (int k = 0; k < st->argc;) {
        int rc;
        if (strcmp(st->argv[k], "--kernel") == 0 && k + 1 < st->argc)
            spec->kernel_path = st->argv[k + 1];
        if (strcmp(st->argv[k], "--shards") == 0)
            rc = s_shards(spec, st->argc, st->argv, &k, err, sizeof err);
        else
            rc = ns_job_parse_flag(&spec->job, st->argc, st->argv, &k,
                                   spec->in_paths, spec->out_paths, err,
                                   sizeof err);
        if (rc <= 0) {
            ns_cli_error(cmd, "job file %s: %s", path,
                         rc ? err : "unexpected flag");
            return rc == NS_ERR_NOTFOUND || rc == NS_ERR_IO ? -1 : -2;
        }
    }
    spec->step = i;
    return 0;
}

/* --job FILE.json: the flags the file stands for (its first step). */
static int s_jobfile(ns_jobspec_t *spec, const char *cmd, int argc, char **argv,
                     int *i)
{
    char err[768];
    if (*i + 1 >= argc) {
        ns_cli_error(cmd, "--job needs a FILE.json");
        return -2;
    }
    if (spec->jobfile) {
        ns_cli_error(cmd, "--job may be given once");
        return -2;
    }
    const char *path = argv[*i + 1];
    int rc = ns_jobfile_load(path, &spec->jobfile, err, sizeof err);
    if (rc != NS_OK) {
        ns_cli_error(cmd, "%s", err);
        return rc == NS_ERR_INVAL ? -2 : -1;
    }
    rc = s_apply_step(spec, cmd, 0, path);
    if (rc < 0)
        return rc;
    *i += 2;
    return 1;
}

static int s_flag_error(const char *cmd, const char *err, int rc);

int ns_jobspec_flag(ns_jobspec_t *spec, const char *cmd, int argc, char **argv,
                    int *i)
{
    char err[512];
    if (strcmp(argv[*i], "--job") == 0)
        return s_jobfile(spec, cmd, argc, argv, i);
    int at = *i;
    if (strcmp(argv[*i], "--shards") == 0) {
        if (s_shards(spec, argc, argv, i, err, sizeof err) <= 0) {
            ns_cli_error(cmd, "%s", err);
            return -2;
        }
    } else {
        if (strcmp(argv[*i], "--kernel") == 0 && *i + 1 < argc)
            spec->kernel_path = argv[*i + 1];
        int rc = ns_job_parse_flag(&spec->job, argc, argv, i, spec->in_paths,
                                   spec->out_paths, err, sizeof err);
        if (rc < 0)
            return s_flag_error(cmd, err, rc);
        if (rc == 0)
            return 0;
    }
    /* every job flag takes one value: remember both for later steps */
    if (spec->n_cli < NS_JOBSPEC_MAX_CLI && *i == at + 2) {
        spec->cli[2 * spec->n_cli] = argv[at];
        spec->cli[2 * spec->n_cli + 1] = argv[at + 1];
        spec->n_cli++;
    }
    return 1;
}

static int s_flag_error(const char *cmd, const char *err, int rc)
{
    ns_cli_error(cmd, "%s", err);
    /* a kernel file that is missing or unreadable is not a usage error:
     * the same command may work tomorrow */
    return rc == NS_ERR_NOTFOUND || rc == NS_ERR_IO ? -1 : -2;
}

static int s_resolve_builtin(ns_jobspec_t *spec, const char *cmd)
{
    if (!spec->job.builtin[0])
        return 0;
    const ns_builtin_t *b = ns_builtin_find(spec->job.builtin);
    if (!b) {
        size_t n = 0;
        const ns_builtin_t *all = ns_builtin_list(&n);
        char names[512] = "";
        size_t used = 0;
        for (size_t k = 0; k < n && used < sizeof names; k++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
                                     k ? ", " : "", all[k].name);
        ns_cli_error(cmd, "unknown built-in '%s' (available: %s)",
                     spec->job.builtin, n ? names : "none");
        return 2;
    }
    ns_hash(spec->job.source_hash, b->source, b->source_len);
    if (!spec->job.entry[0] && !spec->job.n_steps)
        snprintf(spec->job.entry, sizeof spec->job.entry, "%s", b->entry);
    return 0;
}

/* Input k copied into the blob store (store) and the copy mapped: its
 * bytes, hash and size are the copy's; or, when the remembered hash of
 * the file names a blob the store holds already (an earlier submit of
 * the same file), that blob, checked as the store maps it, and no copy.
 * err says why not. */
static int s_store_input(ns_jobspec_t *spec, uint32_t k, ns_hash_t id,
                         char *err, size_t errlen)
{
    struct stat st;
    size_t len = 0;
    int64_t t0 = ns_now_ns(); /* before the stat: s_hc_put */
    bool known = stat(spec->in_paths[k], &st) == 0 && S_ISREG(st.st_mode);
    /* (one larger than the store is refused by ns_blobs_add_map) */
    if (known && (uint64_t)st.st_size <= ns_blobs_cap(spec->store) &&
        s_hc_get(&st, id) && ns_blobs_has(spec->store, id) &&
        ns_blobs_map(spec->store, id, &spec->mapped[k], &len) == NS_OK) {
        if (len == (uint64_t)st.st_size) {
            spec->mapped_len[k] = len;
            return NS_OK;
        }
        ns_blobs_unmap(spec->mapped[k], len);
        spec->mapped[k] = NULL;
    }
    uint64_t size = 0;
    int rc = ns_blobs_add_map(spec->store, spec->in_paths[k], NS_MAX_BUFFER, id,
                              &spec->mapped[k], &size, err, errlen);
    spec->mapped_len[k] = (size_t)size;
    /* remembered only when the path still names the file stat saw: one
     * renamed over it meanwhile was what the copy read */
    struct stat after;
    if (rc == NS_OK && known && size == (uint64_t)st.st_size &&
        stat(spec->in_paths[k], &after) == 0 && after.st_dev == st.st_dev &&
        after.st_ino == st.st_ino && after.st_size == st.st_size &&
        ns_mtime_ns(&after) == ns_mtime_ns(&st))
        s_hc_put(&st, t0, id);
    return rc;
}

/* Input k mapped from the user's file (map_inputs) and hashed. */
static int s_map_input(ns_jobspec_t *spec, uint32_t k, ns_hash_t id, char *err,
                       size_t errlen)
{
    const char *path = spec->in_paths[k];
    struct stat st;
    int64_t t0 = ns_now_ns(); /* before the fstat: s_hc_put */
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = NS_OK;
    if (fd < 0) {
        rc = errno == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
        if (rc == NS_ERR_NOTFOUND)
            snprintf(err, errlen, "input file '%s' not found", path);
        else
            snprintf(err, errlen, "cannot read '%s': %s", path,
                     strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        rc = NS_ERR_IO;
    } else if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        snprintf(err, errlen, "input file '%s' is %s", path,
                 st.st_size == 0 ? "empty" : "not a regular file");
        rc = NS_ERR_INVAL;
    } else if ((uint64_t)st.st_size > NS_MAX_BUFFER) {
        snprintf(err, errlen,
                 "input file '%s' is over the %" PRIu64 "-byte buffer limit",
                 path, (uint64_t)NS_MAX_BUFFER);
        rc = NS_ERR_TOOBIG;
    } else if ((rc = ns_blobs_map_fd(fd, (size_t)st.st_size,
                                     &spec->mapped[k])) != NS_OK) {
        snprintf(err, errlen, "cannot map '%s': %s", path, strerror(errno));
    } else {
        spec->mapped_len[k] = (size_t)st.st_size;
        s_hash_input(&st, t0, spec->mapped[k], spec->mapped_len[k], id);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Input k read whole into in_bufs (run). */
static int s_read_input(ns_jobspec_t *spec, uint32_t k, ns_hash_t id, char *err,
                        size_t errlen)
{
    const char *path = spec->in_paths[k];
    size_t len = 0;
    struct stat st;
    int64_t t0 = ns_now_ns(); /* before the fstat: s_hc_put */
    /* st of the very file read: a stat of the path before it could be of
     * another file (one renamed over it), whose record then would name
     * these bytes, or these bytes its hash */
    int rc = ns_file_read_stat(path, (size_t)NS_MAX_BUFFER, &spec->in_bufs[k],
                               &len, &st);
    if (rc == NS_OK && len == 0) {
        snprintf(err, errlen, "input file '%s' is empty", path);
        return NS_ERR_INVAL;
    }
    if (rc == NS_ERR_NOTFOUND)
        snprintf(err, errlen, "input file '%s' not found", path);
    else if (rc == NS_ERR_TOOBIG)
        snprintf(err, errlen,
                 "input file '%s' is over the %" PRIu64 "-byte buffer limit",
                 path, (uint64_t)NS_MAX_BUFFER);
    else if (rc != NS_OK)
        snprintf(err, errlen, "cannot read '%s': %s", path, ns_strerror(rc));
    if (rc == NS_OK) {
        s_hash_input(&st, t0, spec->in_bufs[k], len, id);
        spec->inputs[k].data = spec->in_bufs[k];
        spec->inputs[k].len = len;
    }
    return rc;
}

/* The store must hold all the job's inputs at once (one would evict
 * another): their files' sizes together, each file once, within its cap.
 * A file that cannot be looked at is left to s_store_input to name. */
static int s_inputs_fit(const ns_jobspec_t *spec, const char *cmd)
{
    struct stat seen[NS_MAX_ARGS];
    uint32_t n = 0;
    uint64_t total = 0;
    for (uint32_t k = 0; k < spec->job.n_args; k++) {
        struct stat st;
        if (spec->job.args[k].kind != NS_ARG_IN || !spec->in_paths[k] ||
            stat(spec->in_paths[k], &st) != 0)
            continue;
        bool again = false;
        for (uint32_t i = 0; i < n && !again; i++)
            again = seen[i].st_dev == st.st_dev && seen[i].st_ino == st.st_ino;
        if (again)
            continue;
        seen[n++] = st;
        total += (uint64_t)st.st_size;
    }
    if (n < 2 || total <= ns_blobs_cap(spec->store))
        return 0;
    ns_cli_error(
        cmd,
        "the %u input files (%" PRIu64 " bytes together) do not fit "
        "the blob store %s (%" PRIu64 " bytes, node.input_cache_bytes)",
        n, total, ns_blobs_dir(spec->store), ns_blobs_cap(spec->store));
    return 1;
}

static int s_read_inputs(ns_jobspec_t *spec, const char *cmd)
{
    char err[PATH_MAX + 256];
    if (spec->store && s_inputs_fit(spec, cmd))
        return 1;
    for (uint32_t k = 0; k < spec->job.n_args; k++) {
        if (spec->job.args[k].kind != NS_ARG_IN || !spec->in_paths[k])
            continue;
        ns_arg_t *a = &spec->job.args[k];
        int rc = spec->store ? s_store_input(spec, k, a->hash, err, sizeof err)
                 : spec->map_inputs
                     ? s_map_input(spec, k, a->hash, err, sizeof err)
                     : s_read_input(spec, k, a->hash, err, sizeof err);
        if (rc != NS_OK) {
            ns_cli_error(cmd, "arg %" PRIu32 ": %s", k, err);
            /* an empty file or a FIFO is the command's fault */
            return rc == NS_ERR_INVAL ? 2 : 1;
        }
        if (spec->mapped[k]) {
            spec->inputs[k].data = spec->mapped[k];
            spec->inputs[k].len = spec->mapped_len[k];
        }
        a->size = spec->inputs[k].len;
    }
    return 0;
}

/* Buffer of the pipeline with this path (as an input or an output),
 * or n when none. */
static uint32_t s_buffer_at(const char **in_p, const char **out_p, uint32_t n,
                            const char *path)
{
    for (uint32_t b = 0; b < n; b++)
        if ((in_p[b] && strcmp(in_p[b], path) == 0) ||
            (out_p[b] && strcmp(out_p[b], path) == 0))
            return b;
    return n;
}

/* Step s of the job file (and the command line's job flags) as a job of
 * its own, its input files not read: 0, or an exit status (printed). */
static int s_parse_step(ns_jobspec_t *spec, const char *cmd, int s, ns_job_t *t,
                        const char **tin, const char **tout)
{
    char err[768];
    ns_jobfile_step_t *st = &spec->jobfile->step[s];
    for (int k = 0; k < st->argc;) {
        int rc = 1;
        if (strcmp(st->argv[k], "--shards") == 0)
            k += 2; /* checked when the file was read */
        else
            rc = ns_job_parse_flag(t, st->argc, st->argv, &k, tin, tout, err,
                                   sizeof err);
        if (rc <= 0) {
            ns_cli_error(cmd, "job file: step %d: %s", s + 1,
                         rc ? err : "unexpected flag");
            return rc == NS_ERR_NOTFOUND || rc == NS_ERR_IO ? 1 : 2;
        }
    }
    for (int c = 0; c < spec->n_cli; c++) {
        char *av[3] = {spec->cli[2 * c], spec->cli[2 * c + 1], NULL};
        int k = 0;
        if (strcmp(av[0], "--shards") == 0)
            continue;
        int rc = ns_job_parse_flag(t, 2, av, &k, tin, tout, err, sizeof err);
        if (rc <= 0) {
            ns_cli_error(cmd, "step %d: %s", s + 1, err);
            return 2;
        }
    }
    if (t->builtin[0]) {
        const ns_builtin_t *b = ns_builtin_find(t->builtin);
        if (!b)
            return 0; /* s_resolve_builtin names it */
        ns_hash(t->source_hash, b->source, b->source_len);
        if (!t->entry[0])
            snprintf(t->entry, sizeof t->entry, "%s", b->entry);
    }
    return 0;
}

/* The job file's steps as one pipeline job in spec (job.h): a path an
 * earlier step wrote is that step's buffer, the other in: files are the
 * pipeline's inputs (one buffer per file). 0, or an exit status. */
static int s_make_pipeline(ns_jobspec_t *spec, const char *cmd)
{
    ns_jobfile_t *jf = spec->jobfile;
    const char *in_p[NS_MAX_ARGS] = {0}, *out_p[NS_MAX_ARGS] = {0};
    ns_job_t pipe, t;
    uint32_t nb = 0;
    int status = 0;
    ns_job_init(&pipe);
    ns_job_init(&t);
    pipe.steps = calloc((size_t)jf->n_steps, sizeof *pipe.steps);
    if (!pipe.steps) {
        ns_cli_error(cmd, "out of memory");
        return 1;
    }
    pipe.n_steps = (uint32_t)jf->n_steps;
    for (int s = 0; s < jf->n_steps && status == 0; s++) {
        const char *tin[NS_MAX_ARGS] = {0}, *tout[NS_MAX_ARGS] = {0};
        ns_job_release(&t);
        status = s_parse_step(spec, cmd, s, &t, tin, tout);
        if (status)
            break;
        if (s == 0) { /* the job's own keys: the same in every step */
            memcpy(pipe.builtin, t.builtin, sizeof pipe.builtin);
            if (t.source_len &&
                ns_job_set_source(&pipe, t.source, t.source_len) != NS_OK) {
                ns_cli_error(cmd, "out of memory");
                status = 1;
                break;
            }
            memcpy(pipe.source_hash, t.source_hash, NS_HASH_BYTES);
            memcpy(pipe.options, t.options, sizeof pipe.options);
            pipe.det = t.det;
            pipe.tol = t.tol;
            pipe.checks = t.checks;
            pipe.work_estimate = t.work_estimate;
        }
        ns_step_t *ps = &pipe.steps[s];
        memcpy(ps->entry, t.entry, sizeof ps->entry);
        ps->dims = t.dims;
        memcpy(ps->global, t.global, sizeof ps->global);
        memcpy(ps->local, t.local, sizeof ps->local);
        ps->n_args = t.n_args;
        uint32_t here = 0; /* buffers this step names so far */
        for (uint32_t i = 0; i < t.n_args; i++) {
            const ns_arg_t *a = &t.args[i];
            if (a->kind != NS_ARG_IN && a->kind != NS_ARG_OUT) {
                ps->args[i] = *a;
                continue;
            }
            const char *path = a->kind == NS_ARG_IN ? tin[i] : tout[i];
            uint32_t b = path ? s_buffer_at(in_p, out_p, nb, path) : nb;
            if (b < nb && (here & (UINT32_C(1) << b)) &&
                pipe.args[b].kind == NS_ARG_IN)
                b = nb; /* one file as two inputs of a step: two buffers */
            if (b == nb) {
                if (nb == NS_MAX_ARGS) {
                    ns_cli_error(cmd,
                                 "job file: more than %d buffers in the "
                                 "pipeline",
                                 NS_MAX_ARGS);
                    status = 2;
                    break;
                }
                pipe.args[nb].kind = a->kind;
                pipe.args[nb].size = a->kind == NS_ARG_OUT ? a->size : 0;
                (a->kind == NS_ARG_IN ? in_p : out_p)[nb] = path;
                nb++;
            } else if (a->kind == NS_ARG_OUT) {
                ns_cli_error(cmd,
                             "job file: step %d writes '%s', which an "
                             "earlier step already uses",
                             s + 1, path);
                status = 2;
                break;
            }
            ps->args[i].kind = NS_ARG_BUF;
            ps->args[i].v.u32 = b;
            here |= UINT32_C(1) << b;
        }
    }
    ns_job_release(&t);
    if (status) {
        ns_job_release(&pipe);
        return status;
    }
    pipe.n_args = nb;
    ns_job_release(&spec->job);
    spec->job = pipe;
    for (uint32_t k = 0; k < NS_MAX_ARGS; k++) {
        spec->in_paths[k] = in_p[k];
        spec->out_paths[k] = out_p[k];
    }
    return 0;
}

int ns_jobspec_prepare(ns_jobspec_t *spec, const char *cmd)
{
    char err[512];
    if (spec->as_pipeline && spec->jobfile && spec->jobfile->n_steps > 1 &&
        spec->shards <= 1 && !spec->job.n_steps) {
        int status = s_make_pipeline(spec, cmd);
        if (status)
            return status;
    }
    if (!spec->job.builtin[0] && !spec->job.source) {
        ns_cli_error(cmd, "no kernel: give --kernel FILE.cl or --builtin "
                          "NAME");
        return 2;
    }
    int status = s_resolve_builtin(spec, cmd);
    if (status == 0)
        status = s_read_inputs(spec, cmd);
    if (status != 0)
        return status;
    if (ns_job_finalize(&spec->job, err, sizeof err) != NS_OK) {
        ns_cli_error(cmd, "invalid job: %s", err);
        return 2;
    }
    if (spec->shards > 1) {
        /* some dimension must do; which one, shards.c finds out */
        bool any = false;
        char first[512] = "";
        for (uint32_t d = spec->job.dims; d-- > 0 && !any;) {
            any = ns_job_shardable(&spec->job, spec->shards, d, err,
                                   sizeof err) == NS_OK;
            if (!any && !first[0])
                memcpy(first, err, sizeof first);
        }
        /* a later step of a pipeline (a final reduction of one row)
         * runs whole when it cannot be cut */
        if (!any && spec->step > 0) {
            fprintf(stderr,
                    "nightshift %s: step %d runs as one job, not %u shards: "
                    "%s\n",
                    cmd, spec->step + 1, spec->shards, first);
            spec->shards = 1;
        } else if (!any) {
            ns_cli_error(cmd, "%s", first);
            return 2;
        }
    }
    for (uint32_t k = 0; k < spec->job.n_args; k++)
        spec->inputs[k].verified = spec->inputs[k].data != NULL;
    return 0;
}

bool ns_jobspec_intermediate(const ns_jobspec_t *spec, uint32_t k)
{
    const char *dir = spec->jobfile ? spec->jobfile->tmpdir : "";
    size_t n = strlen(dir);
    const char *path = k < NS_MAX_ARGS ? spec->out_paths[k] : NULL;
    return n && path && strncmp(path, dir, n) == 0 && path[n] == '/';
}

int ns_jobspec_write_outputs(ns_jobspec_t *spec, char *error, size_t errlen)
{
    for (uint32_t k = 0; k < spec->job.n_args; k++) {
        const ns_arg_t *a = &spec->job.args[k];
        if (a->kind != NS_ARG_OUT || !spec->out_paths[k] || !spec->outputs[k])
            continue; /* no file, or written as it arrived (submit) */
        if (spec->job.n_steps && ns_jobspec_intermediate(spec, k))
            continue; /* the next step is in this very job */
        int rc = ns_file_write_atomic(spec->out_paths[k], spec->outputs[k],
                                      (size_t)a->size, 0644);
        if (rc != NS_OK) {
            snprintf(error, errlen, "arg %" PRIu32 ": cannot write '%s': %s", k,
                     spec->out_paths[k], ns_strerror(rc));
            return rc;
        }
    }
    return NS_OK;
}

void ns_cache_dir(char *dir, size_t cap)
{
    const char *env = getenv("NIGHTSHIFT_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (env && env[0])
        n = snprintf(dir, cap, "%s", env);
    else if (xdg && xdg[0] == '/')
        n = snprintf(dir, cap, "%s/nightshift/programs", xdg);
    else if (home && home[0])
        n = snprintf(dir, cap, "%s/.cache/nightshift/programs", home);
    if (n < 0 || (size_t)n >= cap || ns_mkdir_p(dir, 0700) != NS_OK)
        dir[0] = '\0';
}

int ns_jobspec_steps(const ns_jobspec_t *spec)
{
    return spec->jobfile && !spec->job.n_steps ? spec->jobfile->n_steps : 1;
}

int ns_jobspec_next_step(ns_jobspec_t *spec, const char *cmd)
{
    ns_jobfile_t *jf = spec->jobfile;
    if (!jf || spec->job.n_steps || spec->step + 1 >= jf->n_steps)
        return -1;
    /* a fresh spec but for the job file and the command line's flags */
    ns_jobspec_drop_inputs(spec);
    for (uint32_t k = 0; k < NS_MAX_ARGS; k++) {
        free(spec->outputs[k]);
        spec->outputs[k] = NULL;
        spec->in_paths[k] = spec->out_paths[k] = NULL;
    }
    ns_job_release(&spec->job);
    spec->kernel_path = NULL;
    spec->shards = 0;
    int rc = s_apply_step(spec, cmd, spec->step + 1, "(job file)");
    if (rc < 0)
        return -rc;
    char err[512];
    for (int c = 0; c < spec->n_cli; c++) {
        char *av[3] = {spec->cli[2 * c], spec->cli[2 * c + 1], NULL};
        int k = 0;
        rc = strcmp(av[0], "--shards") == 0
                 ? s_shards(spec, 2, av, &k, err, sizeof err)
                 : ns_job_parse_flag(&spec->job, 2, av, &k, spec->in_paths,
                                     spec->out_paths, err, sizeof err);
        if (rc <= 0) {
            ns_cli_error(cmd, "step %d: %s", spec->step + 1, err);
            return 2;
        }
    }
    return ns_jobspec_prepare(spec, cmd);
}
