/* worker_process.c - spawning, killing and reaping sandbox worker
 * processes for the supervisor (worker_process.h).
 */
#include "worker_process.h"
#include "nightshift/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void ns_worker_describe_status(char *out, size_t cap, int st)
{
    if (WIFSIGNALED(st))
        snprintf(out, cap, "signal %d", WTERMSIG(st));
    else if (WIFEXITED(st))
        snprintf(out, cap, "exit status %d", WEXITSTATUS(st));
    else
        snprintf(out, cap, "wait status %d", st);
}

static void s_sleep_ms(unsigned ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Reap killed workers that had not exited yet (a process killed inside a
 * driver call can take a while): never block the caller's loop on them. */
static void s_reap_later(ns_worker_reaper_t *rp, pid_t pid)
{
    if (rp->n < NS_WORKER_MAX_REAPING) {
        rp->pids[rp->n++] = pid;
        return;
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

void ns_worker_reaper_poll(ns_worker_reaper_t *rp, bool block)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rp->n; i++) {
        pid_t got;
        while ((got = waitpid(rp->pids[i], NULL, block ? 0 : WNOHANG)) < 0 &&
               errno == EINTR)
            ;
        if (got == 0)
            rp->pids[kept++] = rp->pids[i];
    }
    rp->n = kept;
}

bool ns_worker_process_reap(pid_t pid, unsigned grace_ms,
                            ns_worker_reaper_t *rp, int *st)
{
    pid_t got = 0;
    *st = 0;
    for (unsigned waited = 0;; waited++) {
        while ((got = waitpid(pid, st, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (got != 0 || waited >= grace_ms)
            break;
        s_sleep_ms(1);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        s_sleep_ms(1);
        while ((got = waitpid(pid, st, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (got == 0)
            s_reap_later(rp, pid);
    }
    /* got < 0: not our child any more (SIGCHLD ignored?) */
    return got > 0;
}

int ns_worker_process_spawn(const ns_worker_opts_t *o, pid_t *pid_out,
                            int *fd_out, char *err, size_t errlen)
{
    int sv[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool fa_live = false, attr_live = false;
    int rc = NS_ERR_IO;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf(err, errlen, "cannot start the worker: socketpair: %s",
                 strerror(errno));
        goto out;
    }
    /* dup2 onto itself would keep FD_CLOEXEC: pick another number then */
    int child_fd = sv[1] == 3 ? 4 : 3;
    char fd_s[16], dev_s[16], mem_s[32], src_s[32], parent_s[32];
    snprintf(fd_s, sizeof fd_s, "%d", child_fd);
    snprintf(dev_s, sizeof dev_s, "%" PRIu32, o->device_index);
    if (o->mem_limit_bytes == NS_WORKER_MEM_UNLIMITED)
        snprintf(mem_s, sizeof mem_s, "unlimited");
    else
        snprintf(mem_s, sizeof mem_s, "%" PRIu64, o->mem_limit_bytes);
    snprintf(src_s, sizeof src_s, "%zu", o->max_source_bytes);
    snprintf(parent_s, sizeof parent_s, "%ld", (long)getpid());
    char *argv[24];
    int argc = 0;
    argv[argc++] = (char *)(uintptr_t)o->exe; /* posix_spawn never writes */
    argv[argc++] = (char *)"worker";
    argv[argc++] = (char *)"--fd";
    argv[argc++] = fd_s;
    argv[argc++] = (char *)"--device";
    argv[argc++] = dev_s;
    argv[argc++] = (char *)"--mem-limit";
    argv[argc++] = mem_s;
    argv[argc++] = (char *)"--max-source";
    argv[argc++] = src_s;
    argv[argc++] = (char *)"--parent";
    argv[argc++] = parent_s;
    char check_s[16];
    if (o->self_check) {
        snprintf(check_s, sizeof check_s, "%" PRIu32, o->self_check);
        argv[argc++] = (char *)"--self-check";
        argv[argc++] = check_s;
    }
    if (o->cache_dir) {
        argv[argc++] = (char *)"--cache-dir";
        argv[argc++] = (char *)(uintptr_t)o->cache_dir;
    }
    /* the worker logs like its supervisor */
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    char level_s[8];
    snprintf(level_s, sizeof level_s, "%s",
             levels[ns_log_threshold <= NS_LOG_DEBUG ? ns_log_threshold
                                                     : NS_LOG_DEBUG]);
    argv[argc++] = (char *)"--log-level";
    argv[argc++] = level_s;
    if (ns_log_enabled(NS_LOG_DEBUG, NS_MOD_EXEC)) {
        argv[argc++] = (char *)"--debug";
        argv[argc++] = (char *)"exec";
    }
    argv[argc] = NULL;

    int e = posix_spawn_file_actions_init(&fa);
    if (e == 0) {
        fa_live = true;
        e = posix_spawn_file_actions_adddup2(&fa, sv[1], child_fd);
    }
    /* the worker never writes to stdout: it may be a JSON document */
    if (e == 0)
        e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (e == 0)
        e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (e == 0) {
        e = posix_spawnattr_init(&attr);
        attr_live = e == 0;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (e == 0)
        e = posix_spawnattr_setsigmask(&attr, &none);
    if (e == 0)
        e = posix_spawnattr_setsigdefault(&attr, &all);
    if (e == 0)
        e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                                POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    if (e == 0)
        e = posix_spawn(&pid, o->exe, &fa, &attr, argv, environ);
    if (e != 0) {
        snprintf(err, errlen, "cannot start the worker %s: %s", o->exe,
                 strerror(e));
        goto out;
    }
    int fl = fcntl(sv[0], F_GETFL);
    if (fl < 0 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "cannot start the worker: fcntl: %s",
                 strerror(errno));
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        goto out;
    }
    *pid_out = pid;
    *fd_out = sv[0];
    sv[0] = -1;
    rc = NS_OK;
out:
    if (attr_live)
        posix_spawnattr_destroy(&attr);
    if (fa_live)
        posix_spawn_file_actions_destroy(&fa);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    return rc;
}
