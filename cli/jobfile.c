/* jobfile.c - JSON job files to JOB-FLAGS (jobfile.h, docs/JOBS.md). */
#include "jobfile.h"

#include "nightshift/err.h"
#include "nightshift/job.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    ns_jobfile_t *jf;
    ns_jobfile_step_t *cur; /* the step s_push appends to */
    int at;                 /* its index, for messages */
    char dir[PATH_MAX];     /* the job file's directory, absolute */
    const char *name;       /* the job file, for messages */
    char *err;
    size_t errlen;
} s_ctx_t;

static int s_fail(s_ctx_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int s_fail(s_ctx_t *c, const char *fmt, ...)
{
    int n = snprintf(c->err, c->errlen, "%s: ", c->name);
    if (n > 0 && (size_t)n < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return NS_ERR_INVAL;
}

/* Append one flag word (copied). */
static int s_push(s_ctx_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int s_push(s_ctx_t *c, const char *fmt, ...)
{
    ns_jobfile_step_t *st = c->cur;
    if (st->argc + 1 >= st->cap) {
        int cap = st->cap ? st->cap * 2 : 32;
        char **grown = realloc(st->argv, (size_t)cap * sizeof *grown);
        if (!grown)
            return NS_ERR_NOMEM;
        st->argv = grown;
        st->cap = cap;
    }
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    if (!s)
        return NS_ERR_NOMEM;
    st->argv[st->argc++] = s;
    st->argv[st->argc] = NULL;
    return NS_OK;
}

/* A path from the file: absolute as it is, else under the file's dir. */
static int s_path(s_ctx_t *c, char *out, size_t cap, const char *p)
{
    int n = p[0] == '/' ? snprintf(out, cap, "%s", p)
                        : snprintf(out, cap, "%s/%s", c->dir, p);
    return n > 0 && (size_t)n < cap ? NS_OK : NS_ERR_TOOBIG;
}

/* Only the keys in allowed (NULL-terminated). */
static int s_keys(s_ctx_t *c, json_t *obj, const char *where,
                  const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        (void)v;
        int ok = 0;
        for (int i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok)
            return s_fail(c, "%s: unknown key \"%s\" (see docs/JOBS.md)", where,
                          key);
    }
    return NS_OK;
}

/* [X] .. [X, Y, Z] of positive integers, as "X,Y,Z". */
static int s_dims(s_ctx_t *c, json_t *a, const char *what, char *out,
                  size_t cap)
{
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > 3)
        return s_fail(c, "steps[%d].%s: an array of 1 to 3 integers", c->at,
                      what);
    size_t used = 0;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return s_fail(c, "steps[%d].%s[%zu]: a positive integer", c->at,
                          what, i);
        used +=
            (size_t)snprintf(out + used, cap - used, "%s%" JSON_INTEGER_FORMAT,
                             i ? "," : "", json_integer_value(v));
    }
    return NS_OK;
}

/* Where an intermediate lives between steps: tmpdir, made on first use. */
static int s_tmp_path(s_ctx_t *c, char *out, size_t cap, const char *name)
{
    if (!c->jf->tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        int n = snprintf(c->jf->tmpdir, sizeof c->jf->tmpdir,
                         "%s/nightshift-pipeline.XXXXXX", t && *t ? t : "/tmp");
        if (n < 0 || (size_t)n >= sizeof c->jf->tmpdir ||
            !mkdtemp(c->jf->tmpdir)) {
            c->jf->tmpdir[0] = '\0';
            return s_fail(c, "cannot make a directory for intermediates: %s",
                          strerror(errno));
        }
    }
    int n = snprintf(out, cap, "%s/%s.bin", c->jf->tmpdir, name);
    return n > 0 && (size_t)n < cap ? NS_OK
                                    : s_fail(c, "%s: name too long", name);
}

/* One step argument: a buffer name or {"u32": V} and the like. A buffer
 * of "bytes" is written by the first step that names it (recorded in
 * written) and read by the later ones. */
static int s_arg(s_ctx_t *c, json_t *buffers, json_t *used, json_t *here,
                 json_t *written, size_t k, json_t *a)
{
    if (json_is_string(a)) {
        const char *name = json_string_value(a);
        json_t *b = json_object_get(buffers, name);
        if (!b)
            return s_fail(c, "steps[%d].args[%zu]: no buffer named \"%s\"",
                          c->at, k, name);
        if (json_object_get(here, name))
            return s_fail(c,
                          "steps[%d].args[%zu]: buffer \"%s\" is given twice "
                          "to one step",
                          c->at, k, name);
        json_object_set_new(here, name, json_true());
        json_object_set_new(used, name, json_true());
        json_t *file = json_object_get(b, "file");
        json_t *bytes = json_object_get(b, "bytes");
        json_t *out = json_object_get(b, "out");
        json_t *item = json_object_get(b, "item_bytes");
        char path[PATH_MAX];
        if (file) {
            if (s_path(c, path, sizeof path, json_string_value(file)))
                return s_fail(c, "buffers.%s.file: path too long", name);
            return s_push(c, "in:%s", path);
        }
        int rc = out ? s_path(c, path, sizeof path, json_string_value(out))
                     : s_tmp_path(c, path, sizeof path, name);
        if (rc != NS_OK)
            return out ? s_fail(c, "buffers.%s.out: path too long", name) : rc;
        if (json_object_get(written, name)) /* an earlier step wrote it */
            return s_push(c, "in:%s", path);
        json_object_set_new(written, name, json_integer(c->at));
        if (item)
            return s_push(
                c, "out:%" JSON_INTEGER_FORMAT ":%s:%" JSON_INTEGER_FORMAT,
                json_integer_value(bytes), path, json_integer_value(item));
        return s_push(c, "out:%" JSON_INTEGER_FORMAT ":%s",
                      json_integer_value(bytes), path);
    }
    static const char *const kinds[] = {"u32", "i32", "u64",  "i64",
                                        "f32", "f64", "local"};
    const char *key;
    json_t *v;
    if (!json_is_object(a) || json_object_size(a) != 1)
        return s_fail(c,
                      "steps[%d].args[%zu]: a buffer name or one of {\"u32\": "
                      "V}, {\"i32\": V}, {\"u64\": V}, {\"i64\": V}, "
                      "{\"f32\": V}, {\"f64\": V}, {\"local\": BYTES}",
                      c->at, k);
    json_object_foreach(a, key, v)
    {
        size_t i = 0;
        while (i < sizeof kinds / sizeof *kinds && strcmp(key, kinds[i]))
            i++;
        if (i == sizeof kinds / sizeof *kinds)
            return s_fail(c, "steps[%d].args[%zu]: unknown kind \"%s\"", c->at,
                          k, key);
        bool real = key[0] == 'f';
        if (json_is_integer(v))
            return s_push(c, "%s:%" JSON_INTEGER_FORMAT, key,
                          json_integer_value(v));
        if (real && json_is_real(v))
            return s_push(c, "%s:%.17g", key, json_real_value(v));
        return s_fail(c, "steps[%d].args[%zu].%s: %s", c->at, k, key,
                      real ? "a number" : "an integer");
    }
    return NS_OK;
}

static int s_buffers(s_ctx_t *c, json_t *buffers)
{
    static const char *const keys[] = {"file", "bytes", "out", "item_bytes",
                                       NULL};
    const char *name;
    json_t *b;
    json_object_foreach(buffers, name, b)
    {
        char where[96];
        snprintf(where, sizeof where, "buffers.%.60s", name);
        if (!json_is_object(b))
            return s_fail(c, "%s: an object", where);
        int rc = s_keys(c, b, where, keys);
        if (rc != NS_OK)
            return rc;
        json_t *file = json_object_get(b, "file");
        json_t *bytes = json_object_get(b, "bytes");
        json_t *out = json_object_get(b, "out");
        json_t *item = json_object_get(b, "item_bytes");
        if (!!file == !!bytes)
            return s_fail(c,
                          "%s: either \"file\" (an input) or \"bytes\" (an "
                          "output or intermediate)",
                          where);
        if (file && (!json_is_string(file) || !json_string_value(file)[0]))
            return s_fail(c, "%s.file: a path", where);
        if (file && (out || item))
            return s_fail(c, "%s: an input has no \"out\" or \"item_bytes\"",
                          where);
        if (bytes && (!json_is_integer(bytes) || json_integer_value(bytes) < 1))
            return s_fail(c, "%s.bytes: a positive integer", where);
        if (out && (!json_is_string(out) || !json_string_value(out)[0]))
            return s_fail(c, "%s.out: a path", where);
        if (item && (!json_is_integer(item) || json_integer_value(item) < 1))
            return s_fail(c, "%s.item_bytes: a positive integer", where);
    }
    return NS_OK;
}

/* Whether a step after `after` reads the intermediate name (its path
 * appears as an in: argument). */
static bool s_read_after(const ns_jobfile_t *jf, const char *name, int after)
{
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "in:%s/%s.bin", jf->tmpdir, name);
    for (int i = after + 1; i < jf->n_steps; i++)
        for (int k = 0; k < jf->step[i].argc; k++)
            if (strcmp(jf->step[i].argv[k], want) == 0)
                return true;
    return false;
}

/* The flags every step shares: the kernel first. */
static int s_kernel_flags(s_ctx_t *c, json_t *root)
{
    json_t *source = json_object_get(root, "source");
    json_t *builtin = json_object_get(root, "builtin");
    char path[PATH_MAX];
    int rc;
    if (!!source == !!builtin)
        return s_fail(c, "give either \"source\" (a .cl file) or \"builtin\"");
    if (source) {
        if (!json_is_string(source) ||
            s_path(c, path, sizeof path, json_string_value(source)))
            return s_fail(c, "source: a path");
        if ((rc = s_push(c, "--kernel")) || (rc = s_push(c, "%s", path)))
            return rc;
        return NS_OK;
    }
    if (!json_is_string(builtin))
        return s_fail(c, "builtin: a name");
    if ((rc = s_push(c, "--builtin")) ||
        (rc = s_push(c, "%s", json_string_value(builtin))))
        return rc;
    return NS_OK;
}

/* ... and after the step's own: tolerance, options, checks, work, shards. */
static int s_common_flags(s_ctx_t *c, json_t *root)
{
    json_t *v;
    int rc;
    static const char *const strs[][2] = {{"tolerance", "--tolerance"},
                                          {"options", "--options"},
                                          {"item_kind", "--item-kind"}};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        if (!(v = json_object_get(root, strs[i][0])))
            continue;
        if (!json_is_string(v))
            return s_fail(c, "%s: a string", strs[i][0]);
        if ((rc = s_push(c, "%s", strs[i][1])) ||
            (rc = s_push(c, "%s", json_string_value(v))))
            return rc;
    }
    static const char *const ints[][2] = {{"checks", "--checks"},
                                          {"work", "--work"}};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        if (!(v = json_object_get(root, ints[i][0])))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return s_fail(c, "%s: a whole number", ints[i][0]);
        if ((rc = s_push(c, "%s", ints[i][1])) ||
            (rc = s_push(c, "%" JSON_INTEGER_FORMAT, json_integer_value(v))))
            return rc;
    }
    if ((v = json_object_get(root, "shards")) &&
        (!json_is_integer(v) || json_integer_value(v) < 1))
        return s_fail(c, "shards: a positive integer");
    if (v && json_integer_value(v) > NS_MAX_SHARDS)
        return s_fail(c, "shards: %" JSON_INTEGER_FORMAT ": at most %d",
                      json_integer_value(v), NS_MAX_SHARDS);
    if (v && ((rc = s_push(c, "--shards")) ||
              (rc = s_push(c, "%" JSON_INTEGER_FORMAT, json_integer_value(v)))))
        return rc;
    return NS_OK;
}

/* One step's flags into c->cur. */
static int s_step(s_ctx_t *c, json_t *root, json_t *buffers, json_t *used,
                  json_t *written, json_t *step)
{
    static const char *const step_keys[] = {"entry", "global", "local", "args",
                                            NULL};
    char where[32], dims[96];
    json_t *v;
    int rc;
    snprintf(where, sizeof where, "steps[%d]", c->at);
    if (!json_is_object(step))
        return s_fail(c, "%s: an object", where);
    if ((rc = s_keys(c, step, where, step_keys)) != NS_OK ||
        (rc = s_kernel_flags(c, root)) != NS_OK)
        return rc;
    if ((v = json_object_get(step, "entry"))) {
        if (!json_is_string(v))
            return s_fail(c, "%s.entry: a kernel name", where);
        if ((rc = s_push(c, "--entry")) ||
            (rc = s_push(c, "%s", json_string_value(v))))
            return rc;
    }
    if ((rc = s_dims(c, json_object_get(step, "global"), "global", dims,
                     sizeof dims)) != NS_OK ||
        (rc = s_push(c, "--global")) || (rc = s_push(c, "%s", dims)))
        return rc;
    if ((v = json_object_get(step, "local")) &&
        ((rc = s_dims(c, v, "local", dims, sizeof dims)) != NS_OK ||
         (rc = s_push(c, "--local")) || (rc = s_push(c, "%s", dims))))
        return rc;
    json_t *args = json_object_get(step, "args");
    if (!json_is_array(args) || json_array_size(args) > NS_MAX_ARGS)
        return s_fail(c, "%s.args: an array of at most %d arguments", where,
                      NS_MAX_ARGS);
    json_t *here = json_object();
    if (!here)
        return NS_ERR_NOMEM;
    for (size_t k = 0; k < json_array_size(args) && rc == NS_OK; k++)
        if ((rc = s_push(c, "--arg")) == NS_OK)
            rc = s_arg(c, buffers, used, here, written, k,
                       json_array_get(args, k));
    json_decref(here);
    return rc != NS_OK ? rc : s_common_flags(c, root);
}

static int s_convert(s_ctx_t *c, json_t *root)
{
    static const char *const top[] = {
        "source", "builtin", "options", "buffers",   "steps", "tolerance",
        "checks", "work",    "shards",  "item_kind", NULL};
    if (!json_is_object(root))
        return s_fail(c, "a job file is a JSON object (see docs/JOBS.md)");
    int rc = s_keys(c, root, "the job", top);
    if (rc != NS_OK)
        return rc;
    json_t *buffers = json_object_get(root, "buffers");
    json_t *steps = json_object_get(root, "steps");
    json_t *v;
    if (!buffers)
        buffers = json_object(); /* a job of scalars only */
    else
        json_incref(buffers);
    json_t *used = json_object(), *written = json_object();
    if (!buffers || !used || !written) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    rc = json_is_object(buffers) ? s_buffers(c, buffers)
                                 : s_fail(c, "buffers: an object");
    if (rc != NS_OK)
        goto out;
    if (!json_is_array(steps) || json_array_size(steps) == 0 ||
        json_array_size(steps) > NS_JOBFILE_MAX_STEPS) {
        rc =
            s_fail(c, "steps: an array of 1 to %d steps", NS_JOBFILE_MAX_STEPS);
        goto out;
    }
    c->jf->n_steps = (int)json_array_size(steps);
    for (int i = 0; i < c->jf->n_steps && rc == NS_OK; i++) {
        c->at = i;
        c->cur = &c->jf->step[i];
        rc = s_step(c, root, buffers, used, written,
                    json_array_get(steps, (size_t)i));
    }
    if (rc != NS_OK)
        goto out;
    const char *name;
    json_object_foreach(buffers, name, v)
    {
        if (!json_object_get(used, name)) {
            rc = s_fail(c, "buffers.%s: no step uses it", name);
            goto out;
        }
        /* an intermediate that no later step reads is lost work */
        json_t *w = json_object_get(written, name);
        if (json_object_get(v, "bytes") && !json_object_get(v, "out") && w &&
            !s_read_after(c->jf, name, (int)json_integer_value(w))) {
            rc = s_fail(c,
                        "buffers.%s: an intermediate buffer (\"bytes\" "
                        "without \"out\") that no later step reads; give it "
                        "\"out\" to keep it",
                        name);
            goto out;
        }
    }
out:
    json_decref(buffers);
    json_decref(used);
    json_decref(written);
    return rc;
}

/* err holds text from the file (keys, jansson's "near '...'"): one line
 * of printable text whatever the file holds. */
static void s_one_line(char *err)
{
    for (unsigned char *p = (unsigned char *)err; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = ' ';
}

static int s_load(const char *path, ns_jobfile_t **out, char *err,
                  size_t errlen);

int ns_jobfile_load(const char *path, ns_jobfile_t **out, char *err,
                    size_t errlen)
{
    int rc = s_load(path, out, err, errlen);
    if (rc != NS_OK && errlen)
        s_one_line(err);
    return rc;
}

static int s_load(const char *path, ns_jobfile_t **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        snprintf(err, errlen, "job file %s: %s", path, strerror(e));
        return e == ENOENT ? NS_ERR_NOTFOUND : NS_ERR_IO;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > NS_JOBFILE_MAX_BYTES) {
        snprintf(err, errlen,
                 "job file %s: not a regular file of at most %d "
                 "bytes",
                 path, NS_JOBFILE_MAX_BYTES);
        return NS_ERR_INVAL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "job file %s:%d:%d: %s", path, je.line, je.column,
                 je.text);
        return NS_ERR_INVAL;
    }
    s_ctx_t c = {0};
    c.name = path;
    c.err = err;
    c.errlen = errlen;
    int rc = NS_ERR_NOMEM;
    char *copy = strdup(path), *slash;
    c.jf = calloc(1, sizeof *c.jf);
    if (!copy || !c.jf)
        goto out;
    /* the directory: of the file as given, made absolute */
    slash = strrchr(copy, '/');
    if (slash)
        *(slash == copy ? slash + 1 : slash) = '\0';
    if (!realpath(slash ? copy : ".", c.dir)) {
        snprintf(err, errlen, "job file %s: %s", path, strerror(errno));
        rc = NS_ERR_IO;
        goto out;
    }
    rc = s_convert(&c, root);
out:
    free(copy);
    json_decref(root);
    if (rc != NS_OK) {
        ns_jobfile_free(&c.jf);
        if (rc == NS_ERR_NOMEM)
            snprintf(err, errlen, "job file %s: out of memory", path);
        return rc;
    }
    *out = c.jf;
    return NS_OK;
}

void ns_jobfile_free(ns_jobfile_t **pjf)
{
    if (!pjf || !*pjf)
        return;
    ns_jobfile_t *jf = *pjf;
    for (int s = 0; s < NS_JOBFILE_MAX_STEPS; s++) {
        for (int i = 0; i < jf->step[s].argc; i++)
            free(jf->step[s].argv[i]);
        free(jf->step[s].argv);
    }
    if (jf->tmpdir[0]) { /* the intermediates, then their directory */
        DIR *d = opendir(jf->tmpdir);
        struct dirent *e;
        char path[PATH_MAX + 256];
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') {
                snprintf(path, sizeof path, "%s/%s", jf->tmpdir, e->d_name);
                unlink(path);
            }
        if (d)
            closedir(d);
        rmdir(jf->tmpdir);
    }
    free(jf);
    *pjf = NULL;
}
