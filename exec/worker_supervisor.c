/* worker_supervisor.c - the supervisor of the sandboxed worker process
 * (worker.h; the process itself is worker_child.c, the frames between
 * them worker_frame.c).
 *
 * A small state machine over one non-blocking socket.
 *   DEAD -(spawn)-> STARTING -(HELLO ok)-> IDLE -(dispatch)-> BUSY
 *   BUSY -(RESULT + outputs)-> IDLE
 *   BUSY -(EOF, deadline, violation)-> killed, job failed, respawned
 *   STARTING -(HELLO error, EOF, deadline)-> DEAD, pending job failed
 * Respawning right after a job failure hides the runtime's start-up from
 * the next job; a worker that never said HELLO is not respawned until the
 * next submit, so a broken device cannot make us spin.
 */
#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"
#include "nightshift/worker.h"
#include "worker_process.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_REAP_GRACE_MS 200     /* a worker that closed its socket exits */
#define S_DESTROY_GRACE_MS 2000 /* an idle worker shuts its runtime down */
#define S_MAX_TIMING_US (UINT64_C(86400) * 1000000) /* a day: sane timing */

/* Error text from the other process: printable ASCII, newline and tab;
 * anything else becomes '?'. No trailing newlines. */
static void s_sanitize(char *dst, size_t cap, const uint8_t *src, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < cap; i++) {
        uint8_t c = src[i];
        dst[j++] =
            (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? (char)c : '?';
    }
    while (j > 0 && (dst[j - 1] == '\n' || dst[j - 1] == ' '))
        j--;
    dst[j] = '\0';
}

static bool s_valid_status(int64_t status)
{
    return status <= 0 && status > -(int64_t)NS_ERR_COUNT;
}

void ns_worker_opts_init(ns_worker_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

/* ---- supervisor ----------------------------------------------------------
 */

enum { S_DEAD, S_STARTING, S_IDLE, S_BUSY };
enum { R_LEN, R_HEAD, R_DATA };

typedef struct {
    const uint8_t *p;
    uint64_t len;
} s_wseg_t;

typedef struct {
    uint8_t *p;
    uint64_t len;
} s_rseg_t;

struct ns_worker {
    ns_worker_opts_t o; /* exe and cache_dir point at the copies below */
    char *exe;
    char *cache_dir;
    pid_t pid;            /* worker process, -1 when none */
    int fd;               /* our end of the socketpair, -1 when none */
    int state;            /* S_* */
    uint64_t deadline_ms; /* STARTING: start-up; BUSY: the job (mono) */
    bool hello_ok;        /* this worker process sent a good HELLO */
    bool have_dev;        /* dev holds the last good HELLO's device */
    ns_devinfo_t dev;
    ns_worker_stats_t stats;
    ns_worker_reaper_t reaper; /* killed, not yet reaped */

    /* reader: length, head, then raw output segments */
    int rphase;
    uint8_t lenbuf[NS_WORKER_FRAME_LEN];
    size_t len_got;
    uint8_t *head;
    size_t head_len, head_got;
    s_rseg_t rseg[NS_MAX_ARGS];
    uint32_t n_rseg, rseg_i;
    uint64_t rseg_off;

    /* the job between submit and result */
    bool pending;             /* submitted, result not delivered yet */
    uint32_t job_timeout_ms;  /* the pending job's wall-clock limit */
    uint32_t next_timeout_ms; /* ns_worker_set_timeout; 0 = o.timeout_ms */
    bool dispatched;          /* its request is being (or was) written */
    bool sent_all;            /* the whole request is written */
    int mode; /* NS_WORKER_MSG_RUN, _ITEMS, _FRAUD, _CHALLENGE, _PREFLIGHT
                 or _CHECK */
    uint32_t check_k;       /* CHECK: units asked for (the reply's bound) */
    ns_chal_request_t chal; /* CHALLENGE: the request, for the answer's
                               checks */
    ns_job_t job;           /* shallow copy, source NULL: sizes for the reply */
    msgpack_sbuffer req;    /* request frame (head) */
    bool req_live;
    s_wseg_t wseg[1 + NS_MAX_ARGS];
    uint32_t n_wseg, wseg_i;
    uint64_t wseg_off;
    int send_fds[NS_MAX_ARGS]; /* inputs sent as descriptors with the
                                  request's first byte: our dups, closed
                                  once sent (or the request dropped) */
    uint32_t n_send_fds;
    uint64_t submit_us;
    ns_worker_result_t res; /* being built, then handed out */
    bool res_ready;
};

static void s_reader_reset(ns_worker_t *w)
{
    free(w->head);
    w->head = NULL;
    w->rphase = R_LEN;
    w->len_got = 0;
    w->head_len = w->head_got = 0;
    w->n_rseg = w->rseg_i = 0;
    w->rseg_off = 0;
}

static void s_request_free(ns_worker_t *w)
{
    if (w->req_live)
        msgpack_sbuffer_destroy(&w->req);
    w->req_live = false;
    for (uint32_t i = 0; i < w->n_send_fds; i++)
        close(w->send_fds[i]);
    w->n_send_fds = 0;
    w->n_wseg = w->wseg_i = 0;
    w->wseg_off = 0;
}

/* Deliver the pending job's result, res.error as it stands (ns_strerror
 * for an error without text). */
static void s_finish_keep(ns_worker_t *w, int status)
{
    if (!w->pending)
        return;
    ns_worker_result_t *res = &w->res;
    res->status = status;
    if (status != NS_OK && res->error[0] == '\0')
        snprintf(res->error, sizeof res->error, "%s", ns_strerror(status));
    if (status != NS_OK) {
        for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
            free(res->outputs[i]);
            res->outputs[i] = NULL;
        }
        memset(&res->timings, 0, sizeof res->timings);
        free(res->chal_bytes);
        res->chal_bytes = NULL;
        res->chal_len = 0;
        res->chal_device_us = 0;
        memset(res->chal_root, 0, sizeof res->chal_root);
    }
    res->wall_us = ns_mono_us() - w->submit_us;
    w->res_ready = true;
    w->pending = false;
    w->dispatched = false;
    w->sent_all = false;
    s_request_free(w);
    w->stats.jobs++;
    if (status != NS_OK) {
        w->stats.failed++;
        ns_debug(NS_MOD_EXEC, "event=worker_job_failed mode=%s rc=%s",
                 ns_worker_mode_name(w->mode), ns_errname(status));
    }
}

/* The same with a new error text. */
__attribute__((format(printf, 3, 4))) static void
s_finish(ns_worker_t *w, int status, const char *fmt, ...)
{
    if (!w->pending)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->res.error, sizeof w->res.error, fmt, ap);
    va_end(ap);
    s_finish_keep(w, status);
}

/* Close the socket and collect the worker (ns_worker_process_reap). State
 * DEAD. True with *st filled when its wait status is known. */
static bool s_reap(ns_worker_t *w, unsigned grace_ms, int *st)
{
    bool known = false;
    *st = 0;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->pid > 0)
        known = ns_worker_process_reap(w->pid, grace_ms, &w->reaper, st);
    w->pid = -1;
    w->state = S_DEAD;
    s_reader_reset(w);
    return known;
}

static void s_kill(ns_worker_t *w)
{
    int st;
    if (w->pid > 0)
        kill(w->pid, SIGKILL);
    s_reap(w, 0, &st);
}

/* A new worker process, STARTING. */
static int s_spawn(ns_worker_t *w, char *err, size_t errlen)
{
    pid_t pid = -1;
    int fd = -1;
    int rc = ns_worker_process_spawn(&w->o, &pid, &fd, err, errlen);
    if (rc != NS_OK)
        return rc;
    w->pid = pid;
    w->fd = fd;
    w->state = S_STARTING;
    w->hello_ok = false;
    w->deadline_ms = ns_mono_ms() + w->o.start_timeout_ms;
    s_reader_reset(w);
    w->stats.starts++;
    ns_debug(NS_MOD_EXEC, "event=worker_spawned pid=%ld device=%" PRIu32,
             (long)pid, w->o.device_index);
    return NS_OK;
}

/* After a job failure: a fresh worker, if the old one had started. */
static void s_respawn(ns_worker_t *w, bool had_started)
{
    char err[256];
    if (!had_started || w->state != S_DEAD)
        return;
    if (s_spawn(w, err, sizeof err) != NS_OK)
        ns_warn(NS_MOD_EXEC, "event=worker_respawn_failed error=\"%s\"", err);
}

/* The worker broke the protocol: kill it, fail the job, start afresh. */
__attribute__((format(printf, 2, 3))) static void
s_violation(ns_worker_t *w, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    bool had_started = w->hello_ok;
    ns_warn(NS_MOD_EXEC, "event=worker_protocol_violation pid=%ld what=\"%s\"",
            (long)w->pid, what);
    s_kill(w);
    w->stats.protocol++;
    s_finish(w, NS_ERR_CORRUPT, "the worker broke the protocol (%s)", what);
    s_respawn(w, had_started);
}

/* "SIGSEGV, signal 11: an out-of-bounds access?": what a signal that
 * ended a worker running a kernel most likely means. Static text. */
static const char *s_signal_text(int sig)
{
    static char other[32];
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV, signal 11: an out-of-bounds access?";
    case SIGBUS:
        return "SIGBUS, signal 7: an out-of-bounds or misaligned access?";
    case SIGFPE:
        return "SIGFPE, signal 8: an integer division by zero?";
    case SIGILL:
        return "SIGILL, signal 4: an instruction this CPU does not have?";
    case SIGABRT:
        return "SIGABRT, signal 6: the OpenCL runtime aborted";
    default:
        snprintf(other, sizeof other, "signal %d", sig);
        return other;
    }
}

/* EOF or a reset on the socket: the worker is gone or going. */
static void s_on_death(ns_worker_t *w)
{
    int prev = w->state;
    bool had_started = w->hello_ok;
    pid_t pid = w->pid;
    int st = 0;
    char how[48] = "it closed its socket and was killed";
    if (s_reap(w, S_REAP_GRACE_MS, &st))
        ns_worker_describe_status(how, sizeof how, st);
    else
        st = -1; /* neither exited nor signalled: no W* macro matches */

    if (prev == S_BUSY) {
        w->stats.crashes++;
        ns_warn(NS_MOD_EXEC, "event=worker_crashed pid=%ld how=\"%s\"",
                (long)pid, how);
        if (st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
            s_finish(w, NS_ERR_NOMEM,
                     "the worker was killed (signal 9) while running the "
                     "job, most likely out of memory");
        else if (st != -1 && WIFEXITED(st) &&
                 WEXITSTATUS(st) == NS_WORKER_EXIT_LOST)
            s_finish(w, NS_ERR_OPENCL,
                     "the kernel crashed the OpenCL runtime (the device "
                     "failed after the launch; a new worker takes the next "
                     "job)");
        else if (st != -1 && WIFSIGNALED(st))
            s_finish(w, NS_ERR_OPENCL,
                     "the kernel crashed the OpenCL runtime (%s)",
                     s_signal_text(WTERMSIG(st)));
        else
            s_finish(w, NS_ERR_OPENCL,
                     "the kernel crashed the OpenCL runtime (the worker "
                     "ended with %s)",
                     how);
        s_respawn(w, had_started);
    } else if (prev == S_STARTING) {
        ns_warn(NS_MOD_EXEC, "event=worker_start_failed pid=%ld how=\"%s\"",
                (long)pid, how);
        s_finish(w, NS_ERR_OPENCL,
                 "the worker died while opening OpenCL device %" PRIu32 " (%s)",
                 w->o.device_index, how);
    } else {
        ns_warn(NS_MOD_EXEC, "event=worker_died_idle pid=%ld how=\"%s\"",
                (long)pid, how);
        s_respawn(w, had_started);
    }
}

/* Buffers over the device's limits fail before anything is sent. */
static int s_check_device(const ns_worker_t *w, const ns_job_t *job, char *err,
                          size_t errlen)
{
    if (!w->have_dev)
        return NS_OK;
    uint64_t total = 0;
    char a[32], b[32];
    for (uint32_t i = 0; i < job->n_args; i++) {
        const ns_arg_t *arg = &job->args[i];
        if (arg->kind != NS_ARG_IN && arg->kind != NS_ARG_OUT)
            continue;
        total += arg->size;
        if (w->dev.max_alloc_bytes && arg->size > w->dev.max_alloc_bytes) {
            ns_worker_fmt_bytes(a, sizeof a, arg->size);
            ns_worker_fmt_bytes(b, sizeof b, w->dev.max_alloc_bytes);
            snprintf(err, errlen,
                     "arg %" PRIu32 " (%s): a buffer of %s (%" PRIu64
                     " bytes) is over the device's largest allocation, %s "
                     "(%" PRIu64 " bytes)",
                     i, arg->kind == NS_ARG_IN ? "in" : "out", a, arg->size, b,
                     w->dev.max_alloc_bytes);
            return NS_ERR_TOOBIG;
        }
    }
    if (w->dev.global_mem_bytes && total > w->dev.global_mem_bytes) {
        ns_worker_fmt_bytes(a, sizeof a, total);
        ns_worker_fmt_bytes(b, sizeof b, w->dev.global_mem_bytes);
        snprintf(err, errlen,
                 "the job's buffers (%s) are over the device's global "
                 "memory (%s)",
                 a, b);
        return NS_ERR_TOOBIG;
    }
    return NS_OK;
}

static void s_pump_write(ns_worker_t *w, uint64_t *budget);

/* IDLE with a job waiting: check it against the device, start writing. */
static void s_dispatch(ns_worker_t *w)
{
    char err[NS_WORKER_MAX_ERROR + 1];
    int rc = s_check_device(w, &w->job, err, sizeof err);
    if (rc == NS_OK && w->mode == NS_WORKER_MSG_CHALLENGE)
        rc = ns_chal_request_check(&w->chal, w->dev.max_alloc_bytes, err,
                                   sizeof err);
    if (rc != NS_OK) {
        s_finish(w, rc, "%s", err);
        return;
    }
    w->state = S_BUSY;
    w->dispatched = true;
    w->sent_all = false;
    w->deadline_ms = ns_mono_ms() + w->job_timeout_ms;
    uint64_t budget = NS_WORKER_IO_SLICE;
    s_pump_write(w, &budget);
}

static void s_on_hello(ns_worker_t *w)
{
    ns_worker_hello_t h;
    int rc = ns_worker_hello_read(w->head, w->head_len, &h);
    int64_t status = h.status;
    if (rc == NS_OK && h.type != NS_WORKER_MSG_HELLO) {
        s_violation(w, "message type %" PRIu32 " before HELLO", h.type);
        return;
    }
    if (rc != NS_OK) {
        s_violation(w, "malformed HELLO: %s", ns_strerror(rc));
        return;
    }
    if (h.protocol != NS_WORKER_PROTOCOL) {
        s_violation(w, "protocol %" PRIu32 ", expected %d", h.protocol,
                    NS_WORKER_PROTOCOL);
        return;
    }
    if (!s_valid_status(status)) {
        s_violation(w, "unknown status %" PRId64, status);
        return;
    }
    if (status != NS_OK) {
        char text[NS_WORKER_MAX_ERROR + 1];
        s_sanitize(text, sizeof text, h.error, h.error_len);
        ns_warn(NS_MOD_EXEC,
                "event=worker_no_device device=%" PRIu32 " error=\"%s\"",
                w->o.device_index, text);
        int st;
        s_reap(w, S_REAP_GRACE_MS, &st);
        s_finish(w, (int)status, "%s",
                 text[0] ? text : ns_strerror((int)status));
        return;
    }
    w->dev = h.dev;
    w->have_dev = true;
    w->hello_ok = true;
    w->state = S_IDLE;
    ns_debug(NS_MOD_EXEC, "event=worker_ready pid=%ld device=\"%s\"",
             (long)w->pid, h.dev.name);
    if (w->pending && !w->dispatched)
        s_dispatch(w);
}

static void s_on_result(ns_worker_t *w)
{
    bool had_started;
    ns_worker_reply_t reply;
    int rc = ns_worker_result_read(w->head, w->head_len, &reply);
    int64_t status = reply.status;
    const ns_timings_t t = reply.timings;
    if (rc == NS_OK && reply.type != NS_WORKER_MSG_RESULT) {
        s_violation(w, "message type %" PRIu32 " instead of RESULT",
                    reply.type);
        return;
    }
    if (rc != NS_OK) {
        s_violation(w, "malformed RESULT: %s", ns_strerror(rc));
        return;
    }
    if (!s_valid_status(status)) {
        s_violation(w, "unknown status %" PRId64, status);
        return;
    }
    if (t.build_us > S_MAX_TIMING_US || t.upload_us > S_MAX_TIMING_US ||
        t.run_us > S_MAX_TIMING_US || t.download_us > S_MAX_TIMING_US) {
        s_violation(w, "implausible timings");
        return;
    }

    bool pf = w->mode == NS_WORKER_MSG_PREFLIGHT,
         chk = w->mode == NS_WORKER_MSG_CHECK;
    if (reply.n_extra != (pf ? 3u : chk ? 10u : 0u)) {
        s_violation(w, "%" PRIu32 " extra values in a %s reply", reply.n_extra,
                    ns_worker_mode_name(w->mode));
        return;
    }
    if (status == NS_OK && pf &&
        (reply.extra[0] > S_MAX_TIMING_US * 1000 ||
         reply.extra[1] > NS_MAX_ARGS || reply.extra[2] > S_MAX_TIMING_US)) {
        s_violation(w, "implausible pre-flight figures");
        return;
    }
    if (status == NS_OK && chk &&
        /* k units of each of a pipeline's steps */
        (reply.extra[0] >
             (uint64_t)w->check_k * (w->job.n_steps ? w->job.n_steps : 1) ||
         reply.extra[1] > reply.extra[0] || reply.extra[3] >= NS_MAX_ARGS ||
         reply.extra[6] > S_MAX_TIMING_US || reply.extra[7] > S_MAX_TIMING_US ||
         reply.extra[8] > S_MAX_TIMING_US ||
         reply.extra[9] > S_MAX_TIMING_US)) {
        s_violation(w, "implausible check figures");
        return;
    }
    ns_worker_result_t *res = &w->res;
    s_sanitize(res->error, sizeof res->error, reply.error, reply.error_len);
    free(w->head);
    w->head = NULL;
    if (pf) {
        res->unit_ns = reply.extra[0];
        res->kernel_args = (uint32_t)reply.extra[1];
        res->pf_build_us = reply.extra[2];
    } else if (chk) {
        ns_check_result_t *c = &res->check;
        c->checked = (uint32_t)reply.extra[0];
        c->mismatched = (uint32_t)reply.extra[1];
        c->first_bad = reply.extra[2];
        c->bad_arg = (uint32_t)reply.extra[3];
        c->bad_pos = reply.extra[4];
        c->changed = reply.extra[5];
        c->verify_us = reply.extra[6];
        c->commit_us = reply.extra[7];
        c->rerun_us = reply.extra[8];
        c->launch_us = reply.extra[9];
    }
    if (status != NS_OK || w->mode == NS_WORKER_MSG_FRAUD || pf || chk) {
        /* a FRAUD verdict, a pre-flight and a check have no data after
         * them */
        w->state = S_IDLE;
        w->rphase = R_LEN;
        res->timings = t;
        s_finish_keep(w, (int)status);
        return;
    }
    res->timings = t;
    /* Output sizes come from our copy of the job, never from the worker. */
    w->n_rseg = w->rseg_i = 0;
    w->rseg_off = 0;
    for (uint32_t i = 0; i < w->job.n_args; i++) {
        if (w->job.args[i].kind != NS_ARG_OUT)
            continue;
        uint64_t size = w->job.args[i].size;
        res->outputs[i] = ns_buf_alloc(size); /* huge pages: fewer faults */
        if (!res->outputs[i])
            goto nomem;
        w->rseg[w->n_rseg].p = res->outputs[i];
        w->rseg[w->n_rseg].len = size;
        w->n_rseg++;
    }
    w->rphase = R_DATA;
    return;
nomem:
    had_started = w->hello_ok;
    s_kill(w);
    s_finish(w, NS_ERR_NOMEM, "out of memory receiving the job's outputs");
    s_respawn(w, had_started);
}

/* The answer to a CHALLENGE: its length is judged against what the
 * request allows (exactly C's size for imatmul), then read raw. */
static void s_on_chal_result(ns_worker_t *w)
{
    bool had_started;
    ns_worker_chal_reply_t reply;
    int rc = ns_worker_chal_result_read(w->head, w->head_len, &reply);
    int64_t status = reply.status;
    if (rc == NS_OK && reply.type != NS_WORKER_MSG_CHAL_RESULT) {
        s_violation(w, "message type %" PRIu32 " instead of CHAL_RESULT",
                    reply.type);
        return;
    }
    if (rc != NS_OK) {
        s_violation(w, "malformed CHAL_RESULT: %s", ns_strerror(rc));
        return;
    }
    if (!s_valid_status(status)) {
        s_violation(w, "unknown status %" PRId64, status);
        return;
    }
    if (reply.device_us > S_MAX_TIMING_US) {
        s_violation(w, "implausible timings");
        return;
    }
    uint64_t want_min = 0, want_max = 0;
    if (status == NS_OK && w->chal.kind == NS_CHAL_KIND_IMATMUL)
        want_min = want_max = ns_chal_imatmul_answer_bytes(w->chal.imatmul.n);
    else if (status == NS_OK)
        want_min = NS_HASH_BYTES + 4, want_max = NS_LABEL_ANSWER_MAX;
    if (reply.answer_len < want_min || reply.answer_len > want_max) {
        s_violation(w, "an answer of %" PRIu64 " bytes", reply.answer_len);
        return;
    }

    ns_worker_result_t *res = &w->res;
    s_sanitize(res->error, sizeof res->error, reply.error, reply.error_len);
    free(w->head);
    w->head = NULL;
    if (status != NS_OK) {
        w->state = S_IDLE;
        w->rphase = R_LEN;
        s_finish_keep(w, (int)status);
        return;
    }
    memcpy(res->chal_root, reply.root, sizeof res->chal_root);
    res->chal_device_us = reply.device_us;
    res->chal_bytes = malloc((size_t)reply.answer_len);
    if (!res->chal_bytes)
        goto nomem;
    res->chal_len = (size_t)reply.answer_len;
    w->rseg[0].p = res->chal_bytes;
    w->rseg[0].len = reply.answer_len;
    w->n_rseg = 1;
    w->rseg_i = 0;
    w->rseg_off = 0;
    w->rphase = R_DATA;
    return;
nomem:
    had_started = w->hello_ok;
    s_kill(w);
    s_finish(w, NS_ERR_NOMEM, "out of memory receiving the challenge answer");
    s_respawn(w, had_started);
}

/* A whole answer says what its head said: the label answer starts with
 * the root, C hashes to it. */
static bool s_chal_consistent(const ns_worker_t *w)
{
    const ns_worker_result_t *res = &w->res;
    if (w->chal.kind == NS_CHAL_KIND_LABEL)
        return res->chal_len >= NS_HASH_BYTES &&
               memcmp(res->chal_bytes, res->chal_root, NS_HASH_BYTES) == 0;
    ns_hash_t h;
    ns_hash(h, res->chal_bytes, res->chal_len);
    return memcmp(h, res->chal_root, NS_HASH_BYTES) == 0;
}

static void s_on_head(ns_worker_t *w)
{
    if (w->state == S_STARTING)
        s_on_hello(w);
    else if (w->mode == NS_WORKER_MSG_CHALLENGE)
        s_on_chal_result(w);
    else
        s_on_result(w);
    if (w->state != S_DEAD && w->rphase != R_DATA) {
        free(w->head);
        w->head = NULL;
        w->rphase = R_LEN;
        w->len_got = 0;
    }
}

/* Bytes are welcome only while starting (HELLO) or once the request is
 * fully written (RESULT). */
static bool s_expecting(const ns_worker_t *w)
{
    return w->state == S_STARTING ||
           (w->state == S_BUSY && w->pending && w->sent_all);
}

/* Step past filled output segments; true (and the job finished) when the
 * last one is full. */
static bool s_data_advance(ns_worker_t *w)
{
    while (w->rseg_i < w->n_rseg && w->rseg_off == w->rseg[w->rseg_i].len) {
        w->rseg_i++;
        w->rseg_off = 0;
    }
    if (w->rseg_i < w->n_rseg)
        return false;
    if (w->mode == NS_WORKER_MSG_CHALLENGE && !s_chal_consistent(w)) {
        s_violation(w, "the answer does not match its root");
        return true;
    }
    w->state = S_IDLE;
    s_reader_reset(w);
    s_finish_keep(w, NS_OK);
    return true;
}

static void s_pump_read(ns_worker_t *w, uint64_t *budget)
{
    while (w->fd >= 0 && *budget > 0 && !w->res_ready) {
        uint8_t *dst;
        size_t want;
        if (w->rphase == R_LEN) {
            dst = w->lenbuf + w->len_got;
            want = NS_WORKER_FRAME_LEN - w->len_got;
        } else if (w->rphase == R_HEAD) {
            dst = w->head + w->head_got;
            want = w->head_len - w->head_got;
        } else {
            if (s_data_advance(w))
                return;
            s_rseg_t *s = &w->rseg[w->rseg_i];
            dst = s->p + w->rseg_off;
            uint64_t left = s->len - w->rseg_off;
            want = (size_t)(left < *budget ? left : *budget);
            if (want > NS_WORKER_IO_CHUNK)
                want = NS_WORKER_IO_CHUNK;
        }
        ssize_t n = recv(w->fd, dst, want, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            s_on_death(w); /* ECONNRESET and friends */
            return;
        }
        if (n == 0) {
            s_on_death(w);
            return;
        }
        if (!s_expecting(w)) {
            s_violation(w, "%zd unsolicited bytes", n);
            return;
        }
        *budget -= (uint64_t)n < *budget ? (uint64_t)n : *budget;
        if (w->rphase == R_LEN) {
            w->len_got += (size_t)n;
            if (w->len_got < NS_WORKER_FRAME_LEN)
                continue;
            uint32_t len = ns_worker_frame_len(w->lenbuf);
            if (len == 0 || len > NS_WORKER_MAX_REPLY) {
                s_violation(w, "a frame of %" PRIu32 " bytes", len);
                return;
            }
            w->head = malloc(len);
            if (!w->head) {
                s_violation(w, "no memory for a frame");
                return;
            }
            w->head_len = len;
            w->head_got = 0;
            w->rphase = R_HEAD;
        } else if (w->rphase == R_HEAD) {
            w->head_got += (size_t)n;
            if (w->head_got == w->head_len)
                s_on_head(w);
        } else {
            w->rseg_off += (uint64_t)n;
            if (s_data_advance(w))
                return;
        }
    }
}

/* The request's first bytes, with the input descriptors (SCM_RIGHTS:
 * they travel with the first byte sent); once any byte is sent they are
 * the worker's and our dups are closed. */
static ssize_t s_send_fds(ns_worker_t *w, const uint8_t *p, size_t len)
{
    union {
        char buf[CMSG_SPACE(NS_MAX_ARGS * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {(void *)(uintptr_t)p, len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(&ctl, 0, sizeof ctl);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = CMSG_SPACE(w->n_send_fds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(w->n_send_fds * sizeof(int));
    memcpy(CMSG_DATA(c), w->send_fds, w->n_send_fds * sizeof(int));
    ssize_t n = sendmsg(w->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
        for (uint32_t i = 0; i < w->n_send_fds; i++)
            close(w->send_fds[i]);
        w->n_send_fds = 0;
    }
    return n;
}

static void s_pump_write(ns_worker_t *w, uint64_t *budget)
{
    while (w->fd >= 0 && w->state == S_BUSY && !w->sent_all && *budget > 0) {
        if (w->wseg_i == w->n_wseg) {
            w->sent_all = true;
            s_request_free(w);
            return;
        }
        const s_wseg_t *s = &w->wseg[w->wseg_i];
        uint64_t left = s->len - w->wseg_off;
        size_t want = (size_t)(left < *budget ? left : *budget);
        if (want > NS_WORKER_IO_CHUNK)
            want = NS_WORKER_IO_CHUNK;
        if (want == 0) {
            w->wseg_i++;
            w->wseg_off = 0;
            continue;
        }
        ssize_t n = w->n_send_fds ? s_send_fds(w, s->p + w->wseg_off, want)
                                  : send(w->fd, s->p + w->wseg_off, want,
                                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            {
                s_on_death(w); /* EPIPE: it died under us */
                return;
            }
        }
        *budget -= (uint64_t)n < *budget ? (uint64_t)n : *budget;
        w->wseg_off += (uint64_t)n;
        if (w->wseg_off == s->len) {
            w->wseg_i++;
            w->wseg_off = 0;
        }
    }
}

static void s_check_deadline(ns_worker_t *w)
{
    if (w->state != S_BUSY && w->state != S_STARTING)
        return;
    if (ns_mono_ms() < w->deadline_ms)
        return;
    if (w->state == S_BUSY) {
        bool had_started = w->hello_ok;
        ns_warn(NS_MOD_EXEC, "event=worker_timeout pid=%ld limit_ms=%" PRIu32,
                (long)w->pid, w->job_timeout_ms);
        s_kill(w);
        w->stats.timeouts++;
        s_finish(w, NS_ERR_TIMEOUT, "the job ran past its %" PRIu32 " ms limit",
                 w->job_timeout_ms);
        s_respawn(w, had_started);
    } else {
        ns_warn(NS_MOD_EXEC,
                "event=worker_start_timeout pid=%ld limit_ms=%" PRIu32,
                (long)w->pid, w->o.start_timeout_ms);
        s_kill(w);
        s_finish(w, NS_ERR_TIMEOUT,
                 "the worker did not open OpenCL device %" PRIu32
                 " within %" PRIu32 " ms",
                 w->o.device_index, w->o.start_timeout_ms);
    }
}

ns_worker_t *ns_worker_new(const ns_worker_opts_t *o, int *err)
{
    char msg[256];
    ns_worker_t *w = calloc(1, sizeof *w);
    int rc = NS_ERR_NOMEM;
    if (!w)
        goto fail;
    w->pid = -1;
    w->fd = -1;
    w->state = S_DEAD;
    w->o = *o;
    if (w->o.timeout_ms == 0)
        w->o.timeout_ms = NS_WORKER_DEFAULT_TIMEOUT_MS;
    if (w->o.start_timeout_ms == 0)
        w->o.start_timeout_ms = NS_WORKER_DEFAULT_START_MS;
    if (w->o.max_source_bytes == 0)
        w->o.max_source_bytes = NS_MAX_SOURCE;
    rc = NS_ERR_INVAL;
    if (w->o.max_source_bytes > NS_MAX_SOURCE)
        goto fail;
    rc = NS_ERR_NOMEM;
    w->exe = strdup(o->exe ? o->exe : "/proc/self/exe");
    if (!w->exe)
        goto fail;
    if (o->cache_dir && !(w->cache_dir = strdup(o->cache_dir)))
        goto fail;
    w->o.exe = w->exe;
    w->o.cache_dir = w->cache_dir;
    rc = s_spawn(w, msg, sizeof msg);
    if (rc != NS_OK) {
        ns_error(NS_MOD_EXEC, "event=worker_spawn_failed error=\"%s\"", msg);
        goto fail;
    }
    return w;
fail:
    if (w) {
        free(w->exe);
        free(w->cache_dir);
        free(w);
    }
    if (err)
        *err = rc;
    return NULL;
}

void ns_worker_result_release(ns_worker_result_t *res)
{
    if (!res)
        return;
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        free(res->outputs[i]);
    free(res->chal_bytes);
    memset(res, 0, sizeof *res);
}

void ns_worker_destroy(ns_worker_t **wp)
{
    if (!wp || !*wp)
        return;
    ns_worker_t *w = *wp;
    int st;
    if (w->state == S_IDLE)
        s_reap(w, S_DESTROY_GRACE_MS, &st); /* EOF: it shuts down */
    else
        s_kill(w);
    ns_worker_reaper_poll(&w->reaper, true);
    s_request_free(w);
    s_reader_reset(w);
    ns_worker_result_release(&w->res);
    free(w->exe);
    free(w->cache_dir);
    free(w);
    *wp = NULL;
}

const ns_devinfo_t *ns_worker_device(const ns_worker_t *w)
{
    return w->have_dev ? &w->dev : NULL;
}

int ns_worker_fd(const ns_worker_t *w)
{
    return w->fd;
}

bool ns_worker_wants_write(const ns_worker_t *w)
{
    return w->fd >= 0 && w->state == S_BUSY && !w->sent_all;
}

int ns_worker_timeout_ms(const ns_worker_t *w)
{
    if (w->res_ready)
        return 0;
    if (w->state != S_BUSY && w->state != S_STARTING)
        return -1;
    uint64_t now = ns_mono_ms();
    if (now >= w->deadline_ms)
        return 0;
    uint64_t left = w->deadline_ms - now;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

bool ns_worker_busy(const ns_worker_t *w)
{
    return w->pending || w->res_ready;
}

void ns_worker_stats(const ns_worker_t *w, ns_worker_stats_t *out)
{
    *out = w->stats;
}

/* The request frame is in w->req and w->wseg: start a worker if there is
 * none, mark the job pending, dispatch it if the worker is ready. */
static int s_queue(ns_worker_t *w, int mode, char *err, size_t errlen)
{
    if (w->state == S_DEAD) {
        int rc = s_spawn(w, err, errlen);
        if (rc != NS_OK) {
            s_request_free(w);
            return rc;
        }
    }
    w->mode = mode;
    memset(&w->res, 0, sizeof w->res);
    w->job_timeout_ms =
        w->next_timeout_ms ? w->next_timeout_ms : w->o.timeout_ms;
    w->next_timeout_ms = 0;
    w->pending = true;
    w->dispatched = false;
    w->sent_all = false;
    w->submit_us = ns_mono_us();
    if (w->state == S_IDLE)
        s_dispatch(w);
    return NS_OK;
}

/* Whether d may go to the worker as an input's file: open read-only (the
 * worker is handed this open file description itself; a writable one
 * would let it write the caller's file, a blob of the store). */
static bool s_read_only(int d)
{
    int fl = fcntl(d, F_GETFL);
    return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY
#ifdef O_PATH
           && !(fl & O_PATH)
#endif
        ;
}

/* What a PREFLIGHT or CHECK submission adds (s_submit). */
typedef struct {
    uint32_t type; /* NS_WORKER_MSG_PREFLIGHT or _CHECK */
    const ns_worker_extra_t *x;
    uint8_t *const *claims; /* CHECK: the claimed OUT buffers, by argument */
    const int *claim_fds;   /* CHECK: -1 or a file of claims[i] (may be
                               NULL) */
} s_extra_sub_t;

/* Every kind of submission: a job (whole, or units), a fraud proof (job
 * is then the proof's descriptor), a pre-flight or a check (xs). */
static int s_submit(ns_worker_t *w, const ns_job_t *job,
                    const ns_input_t *inputs, const int *fds,
                    const uint64_t *items, uint32_t n,
                    const ns_fraud_proof_t *proof, const s_extra_sub_t *xs,
                    char *err, size_t errlen)
{
    char a[32], b[32];
    int rc;

    if (ns_worker_busy(w)) {
        snprintf(err, errlen, "a job is already running in this worker");
        return NS_ERR_STATE;
    }
    /* Size first: a huge source is refused before anything else looks at
     * it, and before any process is started for it. */
    if (job->source_len > w->o.max_source_bytes) {
        ns_worker_fmt_bytes(a, sizeof a, job->source_len);
        ns_worker_fmt_bytes(b, sizeof b, w->o.max_source_bytes);
        snprintf(err, errlen, "kernel source of %s is over the %s limit", a, b);
        return NS_ERR_TOOBIG;
    }
    rc = ns_job_validate(job, err, errlen);
    if (rc != NS_OK)
        return rc;
    /* a pipeline's proof with outs: the claimed OUT buffers travel too,
     * after the inputs (ns_fraud_check) */
    bool outs = proof && proof->n_outs;
    bool chk = xs && xs->type == NS_WORKER_MSG_CHECK;
    /* a pre-flight that only builds and checks the arguments runs no
     * unit: no inputs travel */
    bool no_inputs = xs && xs->type == NS_WORKER_MSG_PREFLIGHT &&
                     !(xs->x->what & (NS_PF_TIME | NS_PF_SAMPLE));
    for (uint32_t i = 0; i < job->n_args && !no_inputs; i++) {
        if (chk && job->args[i].kind == NS_ARG_OUT) {
            if (!xs->claims || !xs->claims[i]) {
                snprintf(err, errlen,
                         "arg %" PRIu32 " (out): no claimed output to check",
                         i);
                return NS_ERR_INVAL;
            }
            continue;
        }
        if (job->args[i].kind != NS_ARG_IN &&
            !(outs && job->args[i].kind == NS_ARG_OUT))
            continue;
        if (!inputs || !inputs[i].data || inputs[i].len != job->args[i].size) {
            snprintf(err, errlen,
                     "arg %" PRIu32 " (in): %zu bytes of input data for a "
                     "buffer of %" PRIu64 " bytes",
                     i, inputs && inputs[i].data ? inputs[i].len : 0,
                     job->args[i].size);
            return NS_ERR_INVAL;
        }
    }
    uint64_t n_units = ns_job_units(job);
    if (items) {
        if (n == 0 || n > NS_WORKER_MAX_ITEMS) {
            snprintf(err, errlen, "%" PRIu32 " units to re-run: must be 1..%d",
                     n, NS_WORKER_MAX_ITEMS);
            return NS_ERR_INVAL;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (items[i] >= n_units) {
                snprintf(err, errlen,
                         "unit %" PRIu64
                         " is out of range (the job has %" PRIu64 " units)",
                         items[i], n_units);
                return NS_ERR_INVAL;
            }
        }
    } else if (n != 0) {
        snprintf(err, errlen, "%" PRIu32 " units given without a list", n);
        return NS_ERR_INVAL;
    }
    rc = s_check_device(w, job, err, errlen);
    if (rc != NS_OK)
        return rc;

    /* The request frame: head, then the IN buffers raw, but those that go
     * as descriptors (our dups, sent with the frame's first byte) */
    bool verified = true; /* all inputs already hashed by the caller */
    uint32_t files = 0;
    for (uint32_t i = 0; i < job->n_args && !no_inputs; i++) {
        if (job->args[i].kind != NS_ARG_IN)
            continue;
        if (!inputs[i].verified)
            verified = false;
        /* a descriptor not open read-only: the bytes go through the
         * socket, as without one */
        if (!proof && fds && fds[i] >= 0 && s_read_only(fds[i])) {
            int d = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
            if (d < 0) {
                s_request_free(w);
                snprintf(err, errlen,
                         "arg %" PRIu32 ": cannot pass its file "
                         "to the worker: %s",
                         i, strerror(errno));
                return NS_ERR_IO;
            }
            w->send_fds[w->n_send_fds++] = d;
            files |= UINT32_C(1) << i;
        }
    }
    /* a CHECK's claims that are files go as descriptors too, after the
     * inputs' ones */
    ns_worker_extra_t x;
    memset(&x, 0, sizeof x);
    if (xs)
        x = *xs->x;
    if (chk)
        x.outfiles = 0;
    for (uint32_t i = 0; chk && xs->claim_fds && i < job->n_args; i++) {
        if (job->args[i].kind != NS_ARG_OUT || xs->claim_fds[i] < 0 ||
            !s_read_only(xs->claim_fds[i]))
            continue;
        int d = fcntl(xs->claim_fds[i], F_DUPFD_CLOEXEC, 0);
        if (d < 0) {
            s_request_free(w);
            snprintf(err, errlen,
                     "arg %" PRIu32 ": cannot pass its file to the worker: %s",
                     i, strerror(errno));
            return NS_ERR_IO;
        }
        w->send_fds[w->n_send_fds++] = d;
        x.outfiles |= UINT32_C(1) << i;
    }
    if ((proof ? ns_worker_fraud_pack(&w->req, proof, verified)
         : xs  ? ns_worker_request_pack_extra(&w->req, xs->type, job, verified,
                                              files, &x)
               : ns_worker_request_pack(&w->req, job, items, n, verified,
                                        files)) != NS_OK) {
        s_request_free(w);
        snprintf(err, errlen, "the job descriptor is over %d bytes",
                 NS_WORKER_MAX_REQUEST);
        return NS_ERR_TOOBIG;
    }
    w->req_live = true;
    w->n_wseg = 0;
    w->wseg[w->n_wseg].p = (const uint8_t *)w->req.data;
    w->wseg[w->n_wseg++].len = w->req.size;
    for (uint32_t i = 0; i < job->n_args && !no_inputs; i++) {
        if (job->args[i].kind != NS_ARG_IN || (files >> i & 1))
            continue;
        w->wseg[w->n_wseg].p = inputs[i].data;
        w->wseg[w->n_wseg++].len = job->args[i].size;
    }
    for (uint32_t i = 0; (outs || chk) && i < job->n_args; i++) {
        if (job->args[i].kind != NS_ARG_OUT || (x.outfiles >> i & 1 && chk))
            continue;
        w->wseg[w->n_wseg].p = chk ? xs->claims[i] : inputs[i].data;
        w->wseg[w->n_wseg++].len = job->args[i].size;
    }
    w->wseg_i = 0;
    w->wseg_off = 0;

    w->job = *job;
    w->job.source = NULL; /* a shallow copy: never freed, never read */
    w->job.steps = NULL;
    w->check_k = chk ? x.k : 0;
    return s_queue(w,
                   proof   ? NS_WORKER_MSG_FRAUD
                   : xs    ? (int)xs->type
                   : items ? NS_WORKER_MSG_ITEMS
                           : NS_WORKER_MSG_RUN,
                   err, errlen);
}

int ns_worker_submit(ns_worker_t *w, const ns_job_t *job,
                     const ns_input_t *inputs, const uint64_t *items,
                     uint32_t n, char *err, size_t errlen)
{
    return s_submit(w, job, inputs, NULL, items, n, NULL, NULL, err, errlen);
}

int ns_worker_submit_files(ns_worker_t *w, const ns_job_t *job,
                           const ns_input_t *inputs, const int *fds, char *err,
                           size_t errlen)
{
    return s_submit(w, job, inputs, fds, NULL, 0, NULL, NULL, err, errlen);
}

int ns_worker_submit_preflight(ns_worker_t *w, const ns_job_t *job,
                               const ns_input_t *inputs, const int *fds,
                               uint32_t what, uint32_t k, const char *name,
                               char *err, size_t errlen)
{
    ns_worker_extra_t x;
    memset(&x, 0, sizeof x);
    if (!what || (what & ~(NS_PF_CHECK | NS_PF_TIME | NS_PF_SAMPLE)) ||
        k > NS_MAX_CHECKS) {
        snprintf(err, errlen, "a pre-flight of what %#x over %" PRIu32 " units",
                 what, k);
        return NS_ERR_INVAL;
    }
    x.what = what;
    x.k = k;
    if (name)
        snprintf(x.name, sizeof x.name, "%s", name);
    s_extra_sub_t xs = {NS_WORKER_MSG_PREFLIGHT, &x, NULL, NULL};
    return s_submit(w, job, inputs, fds, NULL, 0, NULL, &xs, err, errlen);
}

int ns_worker_submit_check(ns_worker_t *w, const ns_job_t *job,
                           const ns_hash_t desc_id, const ns_input_t *inputs,
                           const int *fds, uint8_t *const *claims,
                           const int *claim_fds, const ns_hash_t root,
                           const uint8_t secret[32], uint32_t k, char *err,
                           size_t errlen)
{
    ns_worker_extra_t x;
    memset(&x, 0, sizeof x);
    if (k > NS_MAX_CHECKS) {
        snprintf(err, errlen, "%" PRIu32 " units to check: at most %d", k,
                 NS_MAX_CHECKS);
        return NS_ERR_TOOBIG;
    }
    memcpy(x.desc_id, desc_id, NS_HASH_BYTES);
    memcpy(x.root, root, NS_HASH_BYTES);
    memcpy(x.secret, secret, sizeof x.secret);
    x.k = k;
    s_extra_sub_t xs = {NS_WORKER_MSG_CHECK, &x, claims, claim_fds};
    return s_submit(w, job, inputs, fds, NULL, 0, NULL, &xs, err, errlen);
}

int ns_worker_submit_fraud(ns_worker_t *w, const ns_fraud_proof_t *p,
                           const ns_input_t *inputs, char *err, size_t errlen)
{
    return s_submit(w, &p->job, inputs, NULL, NULL, 0, p, NULL, err, errlen);
}

int ns_worker_submit_challenge(ns_worker_t *w, const ns_chal_request_t *req,
                               char *err, size_t errlen)
{
    if (ns_worker_busy(w)) {
        snprintf(err, errlen, "a job is already running in this worker");
        return NS_ERR_STATE;
    }
    /* refused before anything runs; again at dispatch once the device is
     * known, and in the worker */
    int rc = ns_chal_request_check(
        req, w->have_dev ? w->dev.max_alloc_bytes : 0, err, errlen);
    if (rc != NS_OK)
        return rc;
    ns_worker_chal_pack(&w->req, req);
    if (!w->req.data) {
        snprintf(err, errlen, "no memory for the challenge request");
        return NS_ERR_NOMEM;
    }
    w->req_live = true;
    w->n_wseg = 1;
    w->wseg[0].p = (const uint8_t *)w->req.data;
    w->wseg[0].len = w->req.size;
    w->wseg_i = 0;
    w->wseg_off = 0;
    memset(&w->job, 0, sizeof w->job); /* no buffers: s_check_device passes */
    w->chal = *req;
    if (w->chal.kind != NS_CHAL_KIND_LABEL)
        w->chal.k = 0;
    return s_queue(w, NS_WORKER_MSG_CHALLENGE, err, errlen);
}

int ns_worker_collect(ns_worker_t *w, ns_worker_result_t *res)
{
    uint64_t budget = NS_WORKER_IO_SLICE;
    if (w->reaper.n)
        ns_worker_reaper_poll(&w->reaper, false);
    if (w->fd >= 0 && !w->res_ready) {
        s_pump_write(w, &budget);
        s_pump_read(w, &budget);
    }
    if (!w->res_ready)
        s_check_deadline(w);
    if (!w->res_ready)
        return 0;
    *res = w->res;
    memset(&w->res, 0, sizeof w->res);
    w->res_ready = false;
    return 1;
}

void ns_worker_set_timeout(ns_worker_t *w, uint32_t timeout_ms)
{
    w->next_timeout_ms = timeout_ms;
}

void ns_worker_cancel(ns_worker_t *w)
{
    if (w->pending && w->dispatched) {
        bool had_started = w->hello_ok;
        s_kill(w);
        s_respawn(w, had_started);
    }
    w->pending = false;
    w->dispatched = false;
    w->sent_all = false;
    s_request_free(w);
    ns_worker_result_release(&w->res);
    w->res_ready = false;
}
