/* worker_child.c - the sandboxed worker process (worker.h): `nightshift
 * worker` opens one OpenCL device, then serves RUN, ITEMS, FRAUD,
 * CHALLENGE, PREFLIGHT and CHECK requests from its supervisor
 * (worker_supervisor.c) until EOF.
 *
 * Blocking reads and writes, one request at a time. Before it opens
 * OpenCL it closes inherited descriptors, sets RLIMIT_CORE 0, asks to die
 * with its parent and raises its oom_score_adj; after opening the device
 * it caps its address space (RLIMIT_AS).
 */
#include "nightshift/challenge.h"
#include "nightshift/log.h"
#include "nightshift/preflight.h"
#include "nightshift/runner.h"
#include "nightshift/util.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"
#include "nightshift/worker_frame.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read exactly n bytes. *eof set when the peer closed before the first
 * byte (a clean end between requests). */
static int s_read_full(int fd, void *buf, size_t n, bool *eof)
{
    uint8_t *p = buf;
    size_t got = 0;
    if (eof)
        *eof = false;
    while (got < n) {
        size_t want =
            n - got < NS_WORKER_IO_CHUNK ? n - got : NS_WORKER_IO_CHUNK;
        ssize_t r = read(fd, p + got, want);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NS_ERR_IO;
        if (r == 0) {
            if (got == 0 && eof)
                *eof = true;
            return NS_ERR_TRUNCATED;
        }
        got += (size_t)r;
    }
    return NS_OK;
}

/* A frame's length prefix, and the descriptors sent with its first byte
 * (SCM_RIGHTS; at most NS_MAX_ARGS, close-on-exec) into fds[*n_fds]. */
static int s_read_len(int fd, uint8_t *lenbuf, int *fds, uint32_t *n_fds,
                      bool *eof)
{
    size_t got = 0;
    *n_fds = 0;
    if (eof)
        *eof = false;
    while (got < NS_WORKER_FRAME_LEN) {
        union {
            char buf[CMSG_SPACE(NS_MAX_ARGS * sizeof(int))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {lenbuf + got, NS_WORKER_FRAME_LEN - got};
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NS_ERR_IO;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
             c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t j = 0; j < k; j++) {
                int d;
                memcpy(&d, CMSG_DATA(c) + j * sizeof(int), sizeof d);
                if (*n_fds < NS_MAX_ARGS)
                    fds[(*n_fds)++] = d;
                else
                    close(d);
            }
        }
        if (msg.msg_flags & MSG_CTRUNC)
            return NS_ERR_CORRUPT; /* more than any request sends */
        if (r == 0) {
            if (got == 0 && eof)
                *eof = true;
            return NS_ERR_TRUNCATED;
        }
        got += (size_t)r;
    }
    return NS_OK;
}

/* Input i of job from descriptor d: mapped private and writable, *map
 * until munmap. A kernel that writes its input (undefined in OpenCL, not
 * caught by the runtime on a host-unified device) writes pages of its
 * own, never the file, as it writes its own copy of an input that came
 * through the socket: the same job does the same on every provider, and
 * does not crash one whose input was a blob. The file must be exactly
 * the buffer's size (the descriptor is read-only: MAP_PRIVATE). */
static int s_map_input(int d, const ns_job_t *job, uint32_t i, uint8_t **map,
                       char *err, size_t errlen)
{
    struct stat st;
    uint64_t size = job->args[i].size;
    if (fstat(d, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != size) {
        snprintf(err, errlen,
                 "input arg %" PRIu32 ": its file is not one of %" PRIu64
                 " bytes",
                 i, size);
        return NS_ERR_INVAL;
    }
    void *p =
        mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE, d, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "input arg %" PRIu32 ": cannot map its file: %s",
                 i, strerror(errno));
        return errno == ENOMEM ? NS_ERR_NOMEM : NS_ERR_IO;
    }
    *map = p;
    return NS_OK;
}

/* Read and throw away n bytes (an input we could not hold). */
static int s_drain(int fd, uint64_t n)
{
    uint8_t scratch[65536];
    while (n > 0) {
        size_t want = n < sizeof scratch ? (size_t)n : sizeof scratch;
        int rc = s_read_full(fd, scratch, want, NULL);
        if (rc != NS_OK)
            return rc;
        n -= want;
    }
    return NS_OK;
}

static int s_write_full(int fd, const void *buf, uint64_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        size_t want = n < NS_WORKER_IO_CHUNK ? (size_t)n : NS_WORKER_IO_CHUNK;
        ssize_t r = send(fd, p, want, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return NS_ERR_IO;
        p += r;
        n -= (uint64_t)r;
    }
    return NS_OK;
}

static int s_send_hello(int fd, int status, const char *error,
                        const ns_devinfo_t *dev)
{
    msgpack_sbuffer sb;
    ns_worker_hello_pack(&sb, status, error, dev);
    int rc = s_write_full(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int s_send_result(int fd, int status, const char *error,
                         const ns_timings_t *t, const uint64_t *extra,
                         uint32_t n_extra)
{
    msgpack_sbuffer sb;
    ns_worker_result_pack_extra(&sb, status, error, t, extra, n_extra);
    int rc = s_write_full(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

/* Buffers the device may wrap in place (CL_MEM_USE_HOST_PTR) want more
 * than malloc's alignment: PoCL copies a misaligned host pointer. */
#define S_BUF_ALIGN 4096

static uint64_t s_round_up(uint64_t n)
{
    return (n + S_BUF_ALIGN - 1) / S_BUF_ALIGN * S_BUF_ALIGN;
}

typedef struct {
    int fd;
    uint32_t device_index;
    const char *cache_dir;
    uint64_t mem_limit_bytes; /* 0 = physical memory */
    size_t max_source_bytes;
    uint32_t self_check; /* units of each step re-run after a RUN */
    long parent;         /* 0 = not given */
} s_worker_args_t;

/* Every descriptor but 0-2 and the socket goes: the node's LMDB, sockets
 * and key files have no business in a process that runs strangers' code. */
static void s_close_inherited(int keep)
{
    /* a pass closes at most 256; repeat until one finds nothing */
    for (int pass = 0; pass < 1024; pass++) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
            return;
        int dfd = dirfd(d);
        int fds[256];
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < sizeof fds / sizeof fds[0]) {
            char *end;
            long v = strtol(e->d_name, &end, 10);
            if (*end == '\0' && end != e->d_name && v > 2 && v != keep &&
                v != dfd)
                fds[n++] = (int)v;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        if (n == 0)
            return;
    }
}

/* Address space now (VmSize), bytes. 0 if unknown. */
static uint64_t s_vm_bytes(void)
{
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%llu", &pages) != 1)
        pages = 0;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* RLIMIT_AS = what the runtime took at start-up + headroom. Relative,
 * because GPU runtimes reserve huge virtual ranges at init (and so does
 * ASan): an absolute cap would break them, while growth after start-up
 * is exactly what a job's buffers and the compiler use. */
static void s_limit_memory(uint64_t headroom)
{
    if (headroom == NS_WORKER_MEM_UNLIMITED)
        return;
    if (headroom == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0)
            return;
        headroom = (uint64_t)pages * (uint64_t)page;
    }
    uint64_t vm = s_vm_bytes();
    if (vm == 0)
        return;
    uint64_t limit = vm + headroom < vm ? RLIM_INFINITY : vm + headroom;
    struct rlimit rl = {(rlim_t)limit, (rlim_t)limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        ns_warn(NS_MOD_EXEC, "event=worker_rlimit_failed what=as error=\"%s\"",
                strerror(errno));
    else
        ns_debug(NS_MOD_EXEC,
                 "event=worker_rlimit as_bytes=%" PRIu64 " vm_bytes=%" PRIu64,
                 limit, vm);
}

#if defined(__SANITIZE_ADDRESS__)
#define S_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define S_ASAN 1
#endif
#endif

/* OpenCL runtimes and their compilers write to descriptor 2 ("3 errors
 * generated.", driver chatter): the build log already reaches the
 * requester, and the supervisor's stderr is a log stream (or the CLI's one
 * error line). Our own log lines go to a copy of the real stderr; fd 2
 * becomes /dev/null, unless exec debugging is on (then the runtime's own
 * words may help) or this is an ASan build (its reports go to fd 2). */
static void s_quiet_stderr(void)
{
#ifndef S_ASAN
    if (ns_log_enabled(NS_LOG_DEBUG, NS_MOD_EXEC))
        return;
    int logfd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (logfd < 0)
        return;
    FILE *f = fdopen(logfd, "w");
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (!f || nul < 0 || dup2(nul, 2) < 0) {
        if (f)
            fclose(f);
        else
            close(logfd);
        if (nul >= 0)
            close(nul);
        return;
    }
    close(nul);
    setvbuf(f, NULL, _IOLBF, 0);
    stderr = f; /* glibc: stderr is an assignable FILE * */
#endif
}

static void s_harden(const s_worker_args_t *a)
{
    struct rlimit core = {0, 0};
    if (setrlimit(RLIMIT_CORE, &core) != 0)
        ns_warn(NS_MOD_EXEC, "event=worker_rlimit_failed what=core");
    /* Die with the supervisor, also while a kernel loops. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (a->parent > 0 && getppid() != (pid_t)a->parent)
        _exit(0); /* the supervisor is already gone */
    /* Under memory pressure the OOM killer takes us, not the node. */
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "1000", 4) != 4)
            ns_debug(NS_MOD_EXEC, "event=worker_oom_adj_failed");
        close(fd);
    }
    signal(SIGPIPE, SIG_IGN);
}

/* Little-endian u32 words of C as the answer bytes, in place. */
static void s_words_le(uint32_t *c, size_t n)
{
    uint8_t *b = (uint8_t *)c;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = c[i];
        b[4 * i] = (uint8_t)v;
        b[4 * i + 1] = (uint8_t)(v >> 8);
        b[4 * i + 2] = (uint8_t)(v >> 16);
        b[4 * i + 3] = (uint8_t)(v >> 24);
    }
}

/* A CHALLENGE head: check it, run it on the prover (created at the first
 * challenge, kept until the worker exits), answer. A bad head ends the
 * worker (the stream may be out of step); a refused or failed challenge
 * is an answer with its error. */
static int s_serve_challenge(int fd, const uint8_t *head, size_t len,
                             ns_runner_t *runner, const s_worker_args_t *a,
                             ns_chal_prover_t **prover)
{
    ns_chal_request_t q;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    ns_hash_t root;
    uint64_t device_us = 0;
    const uint8_t *answer = NULL;
    uint64_t answer_len = 0;
    uint32_t *c = NULL;
    ns_buf_t buf;
    msgpack_sbuffer sb;
    int status = NS_OK;

    ns_buf_init(&buf);
    memset(root, 0, sizeof root);
    int rc = ns_worker_chal_read(head, len, &q);
    if (rc != NS_OK) {
        ns_error(NS_MOD_EXEC, "event=worker_bad_challenge rc=%s",
                 ns_errname(rc));
        return rc;
    }
    /* refused before anything runs: the caps, the device's largest
     * allocation */
    status = ns_chal_request_check(
        &q, ns_runner_device(runner)->info.max_alloc_bytes, err, sizeof err);
    if (status == NS_OK && !*prover) {
        *prover = ns_chal_prover_new(a->device_index, &status, err, sizeof err);
        if (!*prover && status == NS_OK)
            status = NS_ERR_OPENCL;
    }
    if (status == NS_OK && q.kind == NS_CHAL_KIND_LABEL) {
        status = ns_label_prove_answer(*prover, &q.label, q.seed, q.k, root,
                                       &device_us, &buf, err, sizeof err);
        answer = buf.data;
        answer_len = buf.len;
    } else if (status == NS_OK) {
        ns_imatmul_params_t ip = {.n = q.imatmul.n, .p = q.imatmul.p};
        memcpy(ip.seed, q.seed, sizeof ip.seed);
        size_t words = (size_t)ip.n * ip.n;
        c = malloc(words * sizeof *c);
        if (!c) {
            snprintf(err, sizeof err,
                     "the worker ran out of memory holding the product");
            status = NS_ERR_NOMEM;
        }
        if (status == NS_OK)
            status =
                ns_imatmul_prove(*prover, &ip, c, &device_us, err, sizeof err);
        if (status == NS_OK) {
            s_words_le(c, words);
            answer = (const uint8_t *)c;
            answer_len = words * sizeof *c;
            ns_hash(root, answer, (size_t)answer_len);
        }
    }
    if (status != NS_OK) {
        if (err[0] == '\0' || strcmp(err, "ok") == 0)
            snprintf(err, sizeof err, "%s", ns_strerror(status));
        memset(root, 0, sizeof root);
        device_us = 0;
        answer_len = 0;
    } else {
        err[0] = '\0';
    }
    ns_worker_chal_result_pack(&sb, status, err, root, device_us, answer_len);
    rc = s_write_full(fd, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    if (rc == NS_OK && answer_len > 0)
        rc = s_write_full(fd, answer, answer_len);
    free(c);
    ns_buf_release(&buf);
    return rc;
}

/* After a RUN: would the outputs pass a requester's check? A kernel that
 * reads its outputs, races or depends on the launch fails any check, and
 * a provider that signed its outputs would be slashed for a requester's
 * kernel: such a RUN fails instead (NS_ERR_PROOF, err says why), and the
 * provider gives the job up. */
static int s_self_check(ns_runner_t *runner, const ns_job_t *job,
                        const ns_input_t *inputs, uint8_t **outputs, uint32_t k,
                        char *err, size_t errlen)
{
    ns_check_result_t res;
    char why[512];
    int rc =
        ns_self_check(runner, job, inputs, outputs, k, &res, why, sizeof why);
    if (rc == NS_ERR_NOMEM) {
        ns_warn(NS_MOD_EXEC, "event=self_check_skipped reason=\"no memory "
                             "for a copy of the outputs\"");
        return NS_OK;
    }
    if (rc != NS_OK) {
        snprintf(err, errlen, "the self-check could not run: %s", why);
        return rc;
    }
    if (res.mismatched == 0 && res.changed == 0)
        return NS_OK;
    snprintf(err, errlen,
             "the job cannot be verified: re-run alone, its units do not "
             "write what the whole launch wrote (%s); any check would fail "
             "these outputs",
             why);
    ns_warn(NS_MOD_EXEC,
            "event=self_check_failed checked=%u wrong=%u "
            "changed=%llu",
            res.checked, res.mismatched, (unsigned long long)res.changed);
    return NS_ERR_PROOF;
}

/* PREFLIGHT: the requester's checks of its own job, in the order of
 * x->what's bits; extra gets [unit_ns, kernel_args, build_us]. */
static int s_preflight(ns_runner_t *runner, const s_worker_args_t *a,
                       const ns_job_t *job, const ns_input_t *inputs,
                       const ns_worker_extra_t *x, uint64_t extra[3], char *err,
                       size_t errlen)
{
    int rc = NS_OK;
    extra[0] = extra[1] = extra[2] = 0;
    if (x->what & NS_PF_CHECK) {
        ns_preflight_t pf;
        memset(&pf, 0, sizeof pf);
        rc = ns_preflight_check_cached(a->cache_dir, a->device_index, job,
                                       x->name[0] ? x->name : NULL, &pf, err,
                                       errlen);
        extra[1] = pf.kernel_args;
        extra[2] = pf.build_us;
    }
    if (rc == NS_OK && (x->what & NS_PF_TIME))
        rc = ns_preflight_time(runner, job, inputs, x->k, &extra[0], err,
                               errlen);
    if (rc == NS_OK && (x->what & NS_PF_SAMPLE))
        rc = ns_preflight_sample(runner, job, inputs, x->k,
                                 (x->what & NS_PF_TIME) ? NULL : &extra[0], err,
                                 errlen);
    return rc;
}

/* CHECK: the requester's spot check of a provider's claimed outputs
 * (claims[i], mapped from claim_fd[i] when that is not -1); extra gets
 * ns_check_result_t's fields in their order. */
static int s_check(ns_runner_t *runner, const ns_job_t *job,
                   const ns_input_t *inputs, uint8_t *const *claims,
                   const int *claim_fd, const ns_worker_extra_t *x,
                   uint64_t extra[10], char *err, size_t errlen)
{
    ns_check_result_t res;
    ns_input_t ins[NS_MAX_ARGS];
    memset(&res, 0, sizeof res);
    memset(ins, 0, sizeof ins);
    for (uint32_t i = 0; i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_IN)
            ins[i] = inputs[i];
    int rc = ns_spot_check_files(runner, job, x->desc_id, ins, claims, claim_fd,
                                 x->root, x->secret, x->k, &res, err, errlen);
    extra[0] = res.checked;
    extra[1] = res.mismatched;
    extra[2] = res.first_bad;
    extra[3] = res.bad_arg;
    extra[4] = res.bad_pos;
    extra[5] = res.changed;
    extra[6] = res.verify_us;
    extra[7] = res.commit_us;
    extra[8] = res.rerun_us;
    extra[9] = res.launch_us;
    return rc;
}

/* One request: read it whole (inputs included, even the ones we cannot
 * hold, so the stream stays in step), run it, reply. NS_OK to go on;
 * anything else ends the worker. */
static int s_serve_one(int fd, ns_runner_t *runner, const s_worker_args_t *a,
                       ns_chal_prover_t **prover, bool *eof)
{
    uint8_t lenbuf[NS_WORKER_FRAME_LEN];
    uint8_t *head = NULL;
    uint8_t *inbuf[NS_MAX_ARGS] = {NULL};
    uint64_t inlen[NS_MAX_ARGS] = {0};    /* ns_buf_get's size of inbuf[i] */
    uint8_t *inmap[NS_MAX_ARGS] = {NULL}; /* inputs mapped from a file */
    uint64_t inmap_len[NS_MAX_ARGS] = {0};
    int fds[NS_MAX_ARGS];
    uint32_t n_fds = 0, fd_used = 0;
    ns_input_t inputs[NS_MAX_ARGS];
    uint8_t *outputs[NS_MAX_ARGS] = {NULL};
    uint8_t *claims[NS_MAX_ARGS] = {NULL}; /* CHECK: the provider's */
    int claim_fd[NS_MAX_ARGS];
    uint64_t extra[NS_WORKER_MAX_EXTRA] = {0};
    uint32_t n_extra = 0;
    ns_worker_request_t q;
    uint8_t *region = NULL;
    uint64_t region_len = 0;
    char err[NS_WORKER_MAX_ERROR + 1] = "";
    char sa[32], sb[32];
    ns_timings_t t;
    int status = NS_OK;
    int rc;

    memset(inputs, 0, sizeof inputs);
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++)
        claim_fd[i] = -1;
    memset(&t, 0, sizeof t);
    memset(&q, 0, sizeof q);
    ns_job_init(&q.job);
    ns_job_init(&q.proof.job);
    rc = s_read_len(fd, lenbuf, fds, &n_fds, eof);
    if (rc != NS_OK)
        goto out;
    uint32_t len = ns_worker_frame_len(lenbuf);
    rc = NS_ERR_TOOBIG;
    if (len == 0 || len > NS_WORKER_MAX_REQUEST) {
        ns_error(NS_MOD_EXEC, "event=worker_bad_frame bytes=%" PRIu32, len);
        goto out;
    }
    rc = NS_ERR_NOMEM;
    if (!(head = malloc(len)))
        goto out;
    rc = s_read_full(fd, head, len, NULL);
    if (rc != NS_OK)
        goto out;

    uint32_t head_type = 0;
    if (ns_worker_frame_type(head, len, &head_type) == NS_OK &&
        head_type == NS_WORKER_MSG_CHALLENGE) {
        rc = s_serve_challenge(fd, head, len, runner, a, prover);
        goto out;
    }
    rc = ns_worker_request_read(head, len, &q, err, sizeof err);
    if (rc != NS_OK) {
        /* Without a valid job we cannot know how many bytes follow. */
        ns_error(NS_MOD_EXEC, "event=worker_bad_request rc=%s error=\"%s\"",
                 ns_errname(rc), err);
        goto out;
    }
    const ns_job_t *job = q.type == NS_WORKER_MSG_FRAUD ? &q.proof.job : &q.job;
    const uint64_t *items = q.items;
    uint32_t type = q.type, n_items = q.n_items;

    bool pf = type == NS_WORKER_MSG_PREFLIGHT,
         chk = type == NS_WORKER_MSG_CHECK;
    /* the inputs, then (a pipeline's proof with outs, a CHECK) the claimed
     * OUT buffers, each in argument order */
    bool outs = (q.type == NS_WORKER_MSG_FRAUD && q.proof.n_outs) || chk;
    /* a pre-flight that only builds runs no unit: no inputs came */
    bool no_inputs = pf && !(q.x.what & (NS_PF_TIME | NS_PF_SAMPLE));
    for (uint32_t k = no_inputs ? job->n_args : 0; k < 2 * job->n_args; k++) {
        uint32_t i = k % job->n_args;
        if (k < job->n_args ? job->args[i].kind != NS_ARG_IN
                            : !outs || job->args[i].kind != NS_ARG_OUT)
            continue;
        uint64_t size = job->args[i].size;
        if (k < job->n_args ? (q.files >> i & 1) : (q.x.outfiles >> i & 1)) {
            /* not in the stream: its file came with the frame */
            int d = fd_used < n_fds ? fds[fd_used++] : -1;
            if (status == NS_OK && d < 0) {
                snprintf(err, sizeof err,
                         "input arg %" PRIu32 ": no file came for it", i);
                status = NS_ERR_INVAL;
            }
            if (status == NS_OK)
                status = s_map_input(d, job, i, &inmap[i], err, sizeof err);
            if (status == NS_OK) {
                inmap_len[i] = size;
                inputs[i].data = inmap[i];
                inputs[i].len = size;
                inputs[i].verified = q.verified;
                if (k >= job->n_args)
                    claim_fd[i] = d;
            }
            continue;
        }
        inbuf[i] = status == NS_OK ? ns_buf_get(size) : NULL;
        inlen[i] = inbuf[i] ? size : 0;
        if (!inbuf[i]) {
            if (status == NS_OK) {
                ns_worker_fmt_bytes(sa, sizeof sa, size);
                snprintf(err, sizeof err,
                         "the worker ran out of memory holding input arg "
                         "%" PRIu32 " (%s)",
                         i, sa);
                status = NS_ERR_NOMEM;
            }
            rc = s_drain(fd, size);
        } else {
            rc = s_read_full(fd, inbuf[i], size, NULL);
        }
        if (rc != NS_OK)
            goto out;
        inputs[i].data = inbuf[i];
        inputs[i].len = size;
        inputs[i].verified = q.verified;
    }

    if (status == NS_OK && fd_used != n_fds) {
        snprintf(err, sizeof err,
                 "%" PRIu32 " files came for %" PRIu32 " inputs", n_fds,
                 fd_used);
        status = NS_ERR_INVAL;
    }
    uint64_t n_job_units = ns_job_units(job);
    if (status == NS_OK && job->source_len > a->max_source_bytes) {
        ns_worker_fmt_bytes(sa, sizeof sa, job->source_len);
        ns_worker_fmt_bytes(sb, sizeof sb, a->max_source_bytes);
        snprintf(err, sizeof err, "kernel source of %s is over the %s limit",
                 sa, sb);
        status = NS_ERR_TOOBIG;
    }
    if (status == NS_OK && (type == NS_WORKER_MSG_ITEMS) != (n_items > 0)) {
        snprintf(err, sizeof err, "%s request with %" PRIu32 " items",
                 ns_worker_mode_name((int)type), n_items);
        status = NS_ERR_INVAL;
    }
    for (uint32_t i = 0; i < n_items && status == NS_OK; i++) {
        if (items[i] >= n_job_units) {
            snprintf(err, sizeof err, "unit %" PRIu64 " is out of range",
                     items[i]);
            status = NS_ERR_INVAL;
        }
    }
    for (uint32_t i = 0; chk && i < job->n_args; i++)
        if (job->args[i].kind == NS_ARG_OUT)
            claims[i] = inmap[i] ? inmap[i] : inbuf[i];
    bool runs = type == NS_WORKER_MSG_RUN || type == NS_WORKER_MSG_ITEMS;
    if (status == NS_OK && runs) {
        for (uint32_t i = 0; i < job->n_args; i++)
            if (job->args[i].kind == NS_ARG_OUT)
                region_len += s_round_up(job->args[i].size);
        region = ns_buf_get(region_len);
        if (!region) {
            ns_worker_fmt_bytes(sa, sizeof sa, region_len);
            snprintf(err, sizeof err,
                     "the worker ran out of memory allocating %s of output",
                     sa);
            status = NS_ERR_NOMEM;
        }
    }
    if (pf || chk)
        n_extra = pf ? 3 : 10;
    if (status == NS_OK && type == NS_WORKER_MSG_FRAUD) {
        status = ns_fraud_check(runner, &q.proof, inputs, err, sizeof err);
    } else if (status == NS_OK && pf) {
        status =
            s_preflight(runner, a, job, inputs, &q.x, extra, err, sizeof err);
    } else if (status == NS_OK && chk) {
        status = s_check(runner, job, inputs, claims, claim_fd, &q.x, extra,
                         err, sizeof err);
    } else if (status == NS_OK) {
        uint64_t off = 0;
        for (uint32_t i = 0; i < job->n_args; i++) {
            if (job->args[i].kind != NS_ARG_OUT)
                continue;
            outputs[i] = region + off;
            off += s_round_up(job->args[i].size);
        }
        /* zeros where the kernel writes nothing, as in a fresh buffer
         * (the region may be one kept from an earlier request) */
        memset(region, 0, (size_t)region_len);
        if (type == NS_WORKER_MSG_RUN) {
            status = ns_runner_run(runner, job, inputs, outputs, &t, err,
                                   sizeof err);
            if (status == NS_OK && a->self_check)
                status = s_self_check(runner, job, inputs, outputs,
                                      a->self_check, err, sizeof err);
        } else {
            status = ns_runner_run_units(runner, job, inputs, items, n_items,
                                         outputs, &t, err, sizeof err);
        }
    }
    if (status != NS_OK && ns_runner_lost(runner)) {
        /* No reply: the supervisor sees this worker end mid-job, as a
         * crash, and the next job gets a new worker and context. */
        rc = NS_ERR_OPENCL;
        goto out;
    }
    if (status != NS_OK && err[0] == '\0')
        snprintf(err, sizeof err, "%s", ns_strerror(status));
    rc = s_send_result(fd, status, err, &t, n_extra ? extra : NULL, n_extra);
    if (rc == NS_OK && status == NS_OK && runs) {
        /* raw outputs, in argument order, without the alignment gaps */
        for (uint32_t i = 0; i < job->n_args && rc == NS_OK; i++)
            if (job->args[i].kind == NS_ARG_OUT)
                rc = s_write_full(fd, outputs[i], job->args[i].size);
    }
out:
    for (uint32_t i = 0; i < NS_MAX_ARGS; i++) {
        ns_buf_put(inbuf[i], inlen[i]);
        if (inmap[i])
            munmap(inmap[i], (size_t)inmap_len[i]);
    }
    for (uint32_t i = 0; i < n_fds; i++)
        close(fds[i]);
    ns_buf_put(region, region_len);
    free(q.items);
    free(head);
    ns_job_release(&q.job);
    ns_fraud_release(&q.proof);
    return rc;
}

static int s_parse_worker_args(int argc, char **argv, s_worker_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
    a->max_source_bytes = NS_MAX_SOURCE;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "nightshift worker: %s needs a value\n", f);
            return NS_ERR_INVAL;
        }
        const char *v = argv[++i];
        uint64_t u = 0;
        if (strcmp(f, "--cache-dir") == 0) {
            a->cache_dir = v;
            continue;
        }
        if (strcmp(f, "--log-level") == 0) {
            if (ns_log_parse_level(v, &ns_log_threshold) != NS_OK) {
                fprintf(stderr, "nightshift worker: bad --log-level '%s'\n", v);
                return NS_ERR_INVAL;
            }
            continue;
        }
        if (strcmp(f, "--debug") == 0) {
            if (ns_log_set_debug(v) != NS_OK) {
                fprintf(stderr, "nightshift worker: bad --debug '%s'\n", v);
                return NS_ERR_INVAL;
            }
            continue;
        }
        if (strcmp(f, "--mem-limit") == 0 && strcmp(v, "unlimited") == 0) {
            a->mem_limit_bytes = NS_WORKER_MEM_UNLIMITED;
            continue;
        }
        if (ns_parse_u64(v, &u) != NS_OK) {
            fprintf(stderr, "nightshift worker: bad value for %s: '%s'\n", f,
                    v);
            return NS_ERR_INVAL;
        }
        if (strcmp(f, "--fd") == 0 && u <= INT32_MAX)
            a->fd = (int)u;
        else if (strcmp(f, "--device") == 0 && u <= UINT32_MAX)
            a->device_index = (uint32_t)u;
        else if (strcmp(f, "--mem-limit") == 0 && u != UINT64_MAX)
            a->mem_limit_bytes = u;
        else if (strcmp(f, "--max-source") == 0 && u >= 1 && u <= NS_MAX_SOURCE)
            a->max_source_bytes = (size_t)u;
        else if (strcmp(f, "--self-check") == 0 && u <= NS_MAX_CHECKS)
            a->self_check = (uint32_t)u;
        else if (strcmp(f, "--parent") == 0 && u >= 1 && u <= INT32_MAX)
            a->parent = (long)u;
        else {
            fprintf(stderr, "nightshift worker: bad flag or value: %s %s\n", f,
                    v);
            return NS_ERR_INVAL;
        }
    }
    if (a->fd < 3) {
        fprintf(stderr, "nightshift worker: --fd N (N >= 3) is required\n");
        return NS_ERR_INVAL;
    }
    return NS_OK;
}

int ns_worker_main(int argc, char **argv)
{
    s_worker_args_t a;
    ns_runner_t *runner = NULL;
    ns_chal_prover_t *prover = NULL; /* at the first challenge */
    ns_devinfo_t none;
    char msg[NS_WORKER_MAX_ERROR + 1];
    int status = 2;

    if (s_parse_worker_args(argc, argv, &a) != NS_OK)
        return 2;
    s_close_inherited(a.fd);
    s_harden(&a);
    s_quiet_stderr();
    if (sodium_init() < 0) {
        fprintf(stderr, "nightshift worker: libsodium failed to initialise\n");
        return 1;
    }
    memset(&none, 0, sizeof none);
    int rc = NS_OK;
    runner = ns_runner_new(a.device_index, a.cache_dir, &rc);
    if (!runner) {
        if (rc == NS_OK)
            rc = NS_ERR_OPENCL;
        snprintf(msg, sizeof msg, "cannot open OpenCL device %" PRIu32 ": %s",
                 a.device_index, ns_strerror(rc));
        if (s_send_hello(a.fd, rc, msg, &none) != NS_OK)
            ns_debug(NS_MOD_EXEC, "event=worker_hello_failed");
        status = 1;
        goto out;
    }
    s_limit_memory(a.mem_limit_bytes);
    if (s_send_hello(a.fd, NS_OK, "", &ns_runner_device(runner)->info) !=
        NS_OK) {
        status = 0; /* the supervisor went away: nothing to do */
        goto out;
    }
    for (;;) {
        bool eof = false;
        rc = s_serve_one(a.fd, runner, &a, &prover, &eof);
        if (rc == NS_OK)
            continue;
        status = eof ? 0 : ns_runner_lost(runner) ? NS_WORKER_EXIT_LOST : 3;
        break;
    }
out:
    ns_chal_prover_destroy(&prover);
    ns_runner_destroy(&runner);
    close(a.fd);
    return status;
}
