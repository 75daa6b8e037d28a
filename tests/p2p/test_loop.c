/* test_loop.c - the event loop (loop.h): timer order, one-shot and
 * repeating timers, cancelling from inside callbacks, sockets and file
 * descriptors added and removed (also from inside handlers), caps, and
 * running and stopping. Timings are only lower bounds with wide margins. */
#include "check.h"

#include "nightshift/log.h"
#include "nightshift/loop.h"
#include "nightshift/util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define S_GUARD_MS 5000 /* a test loop that runs this long has failed */

/* What the callbacks of one test see and record. */
typedef struct {
    ns_loop_t *loop;
    char order[32]; /* one letter per call, in call order */
    uint32_t n;
    uint32_t ids[8]; /* timer ids, by letter - 'a' */
    int fds[4];      /* read ends of pipes */
    int rc;          /* a return code checked after the run */
    bool timed_out;
} s_rec_t;

static void s_note(s_rec_t *r, char c)
{
    if (r->n + 1 < sizeof r->order)
        r->order[r->n++] = c;
}

static void s_on_guard(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    r->timed_out = true;
    ns_loop_stop(r->loop);
}

static void s_on_stop(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    s_note(r, '.');
    ns_loop_stop(r->loop);
}

static void s_rec_init(s_rec_t *r, uint32_t max_sockets, uint32_t max_timers)
{
    memset(r, 0, sizeof *r);
    r->loop = ns_loop_new(max_sockets, max_timers);
    CHECK(r->loop != NULL);
    for (int i = 0; i < 4; i++)
        r->fds[i] = -1;
}

/* A loop and a pipe; false when either failed. */
static bool s_rec_init_pipe(s_rec_t *r, int fds[2])
{
    s_rec_init(r, 4, 8);
    return CHECK(pipe(fds) == 0) && r->loop;
}

/* Run until something calls ns_loop_stop, with the guard timer armed. */
static void s_run(s_rec_t *r)
{
    uint32_t guard = 0;
    CHECK_RC(
        ns_loop_timer_start(r->loop, S_GUARD_MS, false, s_on_guard, r, &guard),
        NS_OK);
    CHECK_RC(ns_loop_run(r->loop, NULL), NS_OK);
    CHECK(!r->timed_out);
    (void)ns_loop_timer_cancel(r->loop, guard);
}

#define S_TIMER_FN(letter)                                                     \
    static void s_on_##letter(void *user, uint64_t now)                        \
    {                                                                          \
        (void)now;                                                             \
        s_note(user, #letter[0]);                                              \
    }
S_TIMER_FN(a)
S_TIMER_FN(b)
S_TIMER_FN(c)
S_TIMER_FN(d)

/* ---- timers ------------------------------------------------------------ */

TEST(timer_order)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t id = 0;
    /* started out of order; a and b due together: a was started first */
    CHECK_RC(ns_loop_timer_start(r.loop, 60, false, s_on_c, &r, &id), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 20, false, s_on_a, &r, &id), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 20, false, s_on_b, &r, &id), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 40, false, s_on_d, &r, &id), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 90, false, s_on_stop, &r, &id), NS_OK);
    CHECK_EQ_INT(ns_loop_timers(r.loop), 5);
    uint64_t t0 = ns_mono_ms();
    s_run(&r);
    CHECK(ns_mono_ms() - t0 >= 90);
    CHECK_STR(r.order, "abdc.");
    /* one-shots are gone once they ran; only the guard was left */
    CHECK_EQ_INT(ns_loop_timers(r.loop), 0);
    ns_loop_destroy(&r.loop);
}

/* A timer with slack runs early in a turn that runs anyway, never wakes
 * the loop before its time, and a repeating one's slack is at most half
 * its interval. */
static void s_on_at(void *user, uint64_t now)
{
    s_rec_t *r = user;
    s_note(r, 'x');
    r->rc = (int)now; /* when it ran */
}

static void s_on_count(void *user, uint64_t now)
{
    (void)now;
    ((s_rec_t *)user)->ids[2]++;
}

static void s_on_tick(void *user, uint64_t now)
{
    (void)now;
    ((s_rec_t *)user)->ids[3]++;
}

TEST(timer_slack)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t id = 0, lazy = 0;
    uint64_t t0 = ns_mono_ms();
    /* b due at 300 with 250 of slack: it runs with a, at 100 */
    CHECK_RC(ns_loop_timer_start(r.loop, 100, false, s_on_a, &r, &id), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 300, false, s_on_b, &r, &lazy), NS_OK);
    CHECK_RC(ns_loop_timer_slack(r.loop, lazy, 250), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 400, false, s_on_stop, &r, &id),
             NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "ab.");
    CHECK_RC(ns_loop_timer_slack(r.loop, lazy, 10), NS_ERR_NOTFOUND);

    /* alone, a timer with slack is not run before it is due */
    memset(r.order, 0, sizeof r.order);
    r.n = 0;
    t0 = ns_mono_ms();
    CHECK_RC(ns_loop_timer_start(r.loop, 150, false, s_on_at, &r, &lazy),
             NS_OK);
    CHECK_RC(ns_loop_timer_slack(r.loop, lazy, 140), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 250, false, s_on_stop, &r, &id),
             NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "x.");
    CHECK((uint64_t)r.rc >= t0 + 150);

    /* repeating every 100 with 90 asked: at most 50 early, so in a loop
     * woken every 10 ms it runs about every 50-100 ms, not every turn */
    memset(r.order, 0, sizeof r.order);
    r.n = 0;
    CHECK_RC(ns_loop_timer_start(r.loop, 100, true, s_on_count, &r, &lazy),
             NS_OK);
    CHECK_RC(ns_loop_timer_slack(r.loop, lazy, 90), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 10, true, s_on_tick, &r, &id), NS_OK);
    uint32_t stop = 0;
    CHECK_RC(ns_loop_timer_start(r.loop, 305, false, s_on_stop, &r, &stop),
             NS_OK);
    r.ids[2] = r.ids[3] = 0;
    s_run(&r);
    CHECK(r.ids[3] >= 5);                  /* the loop did turn */
    CHECK(r.ids[2] >= 2 && r.ids[2] <= 6); /* 305 / 50 at most */
    (void)ns_loop_timer_cancel(r.loop, lazy);
    (void)ns_loop_timer_cancel(r.loop, id);
    ns_loop_destroy(&r.loop);
}

static void s_on_rephase(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    s_note(r, 'r');
    ns_loop_timers_rephase(r->loop);
}

/* Rephasing restarts each chore (repeating, with slack) from now: a turn
 * at 150 would run a chore due at 200 with 100 of slack; rephased in that
 * turn, it runs one interval later instead, once. */
TEST(timers_rephase)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t chore = 0, id = 0;
    uint64_t t0 = ns_mono_ms();
    CHECK_RC(ns_loop_timer_start(r.loop, 200, true, s_on_at, &r, &chore),
             NS_OK);
    CHECK_RC(ns_loop_timer_slack(r.loop, chore, 100), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 150, false, s_on_rephase, &r, &id),
             NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 420, false, s_on_stop, &r, &id),
             NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "rx.");
    CHECK((uint64_t)r.rc >= t0 + 350);
    (void)ns_loop_timer_cancel(r.loop, chore);
    ns_loop_destroy(&r.loop);
}

TEST(one_shot_runs_once)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t a = 0, stop = 0;
    CHECK_RC(ns_loop_timer_start(r.loop, 5, false, s_on_a, &r, &a), NS_OK);
    CHECK(a != 0);
    CHECK_RC(ns_loop_timer_start(r.loop, 80, false, s_on_stop, &r, &stop),
             NS_OK);
    CHECK(stop != a);
    s_run(&r);
    CHECK_STR(r.order, "a.");
    /* its id is free: cancelling it finds nothing */
    CHECK_RC(ns_loop_timer_cancel(r.loop, a), NS_ERR_NOTFOUND);
    CHECK_RC(ns_loop_timer_cancel(r.loop, 0), NS_ERR_NOTFOUND);
    ns_loop_destroy(&r.loop);
}

/* Repeats until it has run three times, then cancels itself. */
static void s_on_repeat_thrice(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    s_note(r, 'r');
    if (r->n == 3)
        r->rc = ns_loop_timer_cancel(r->loop, r->ids[0]);
}

TEST(repeating_cancels_itself)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t stop = 0;
    r.rc = NS_ERR_STATE;
    CHECK_RC(ns_loop_timer_start(r.loop, 10, true, s_on_repeat_thrice, &r,
                                 &r.ids[0]),
             NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 200, false, s_on_stop, &r, &stop),
             NS_OK);
    uint64_t t0 = ns_mono_ms();
    s_run(&r);
    /* three runs at least 10 ms apart, none after the cancel */
    CHECK_STR(r.order, "rrr.");
    CHECK_RC(r.rc, NS_OK);
    CHECK(ns_mono_ms() - t0 >= 30);
    CHECK_RC(ns_loop_timer_cancel(r.loop, r.ids[0]), NS_ERR_NOTFOUND);
    CHECK_RC(ns_loop_timer_start(r.loop, 0, true, s_on_a, &r, NULL),
             NS_ERR_INVAL);
    ns_loop_destroy(&r.loop);
}

/* a cancels b and c (b due in the same turn, c later) and starts d with
 * no delay, which must still run, in a later turn. */
static void s_on_cancel_others(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    s_note(r, 'a');
    r->rc = ns_loop_timer_cancel(r->loop, r->ids[1]);
    if (r->rc == NS_OK)
        r->rc = ns_loop_timer_cancel(r->loop, r->ids[2]);
    /* a one-shot that is running is no longer there to cancel */
    if (r->rc == NS_OK &&
        ns_loop_timer_cancel(r->loop, r->ids[0]) != NS_ERR_NOTFOUND)
        r->rc = NS_ERR_STATE;
    if (r->rc == NS_OK)
        r->rc = ns_loop_timer_start(r->loop, 0, false, s_on_d, r, &r->ids[3]);
}

TEST(cancel_inside_callback)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    uint32_t stop = 0;
    CHECK_RC(ns_loop_timer_start(r.loop, 10, false, s_on_cancel_others, &r,
                                 &r.ids[0]),
             NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 10, false, s_on_b, &r, &r.ids[1]),
             NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 30, true, s_on_c, &r, &r.ids[2]),
             NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 100, false, s_on_stop, &r, &stop),
             NS_OK);
    s_run(&r);
    CHECK_RC(r.rc, NS_OK);
    CHECK_STR(r.order, "ad.");
    ns_loop_destroy(&r.loop);
}

/* Restarts itself with no delay: each start must wait for the next turn,
 * or this would spin inside one turn for ever. */
static void s_on_restart(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    if (++r->ids[4] == 3 && write(r->fds[1], "1", 1) != 1)
        r->rc = NS_ERR_IO;
    if (ns_loop_timer_start(r->loop, 0, false, s_on_restart, r, NULL) != NS_OK)
        r->rc = NS_ERR_STATE;
}

static void s_on_fd_stop(void *user, int fd)
{
    (void)fd;
    s_rec_t *r = user;
    s_note(r, 'f');
    ns_loop_stop(r->loop);
}

TEST(started_in_a_turn_runs_in_the_next)
{
    s_rec_t r;
    int fds[2];
    if (!s_rec_init_pipe(&r, fds))
        return;
    CHECK_RC(ns_loop_add_fd(r.loop, fds[0], s_on_fd_stop, &r), NS_OK);
    CHECK_RC(ns_loop_timer_start(r.loop, 0, false, s_on_restart, &r, NULL),
             NS_OK);
    r.fds[1] = fds[1];
    s_run(&r);
    /* one run a turn; the third makes the fd readable, whose handler
     * stops the loop in the fourth turn before any timer */
    CHECK_STR(r.order, "f");
    CHECK_EQ_INT(r.ids[4], 3);
    CHECK_RC(r.rc, NS_OK);
    close(fds[0]);
    close(fds[1]);
    ns_loop_destroy(&r.loop);
}

/* ---- sockets and descriptors ------------------------------------------- */

static void s_on_zmq(void *user, void *socket)
{
    s_rec_t *r = user;
    char buf[8];
    while (zmq_recv(socket, buf, sizeof buf, ZMQ_DONTWAIT) >= 0)
        s_note(r, 'z');
    ns_loop_stop(r->loop);
}

TEST(socket_add_remove)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    CHECK(zmq_bind(b, "inproc://test_loop") == 0);
    CHECK(zmq_connect(a, "inproc://test_loop") == 0);
    if (!r.loop)
        goto out;
    CHECK_RC(ns_loop_add_socket(r.loop, b, s_on_zmq, &r), NS_OK);
    CHECK_RC(ns_loop_add_socket(r.loop, b, s_on_zmq, &r), NS_ERR_EXISTS);
    CHECK_EQ_INT(ns_loop_sockets(r.loop), 1);
    CHECK(zmq_send(a, "x", 1, 0) == 1);
    s_run(&r);
    CHECK_STR(r.order, "z");

    /* removed: a message waits unread and the handler is not called */
    CHECK_RC(ns_loop_remove_socket(r.loop, b), NS_OK);
    CHECK_RC(ns_loop_remove_socket(r.loop, b), NS_ERR_NOTFOUND);
    CHECK_EQ_INT(ns_loop_sockets(r.loop), 0);
    CHECK(zmq_send(a, "y", 1, 0) == 1);
    CHECK_RC(ns_loop_timer_start(r.loop, 50, false, s_on_stop, &r, NULL),
             NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "z.");

    /* added back: the waiting message is read */
    CHECK_RC(ns_loop_add_socket(r.loop, b, s_on_zmq, &r), NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "z.z");
out:
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
    ns_loop_destroy(&r.loop);
}

/* Reads what is there; at end of file removes the fd and stops. */
static void s_on_fd(void *user, int fd)
{
    s_rec_t *r = user;
    char buf[16];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
        s_note(r, 'f');
        return;
    }
    s_note(r, 'e');
    r->rc = ns_loop_remove_fd(r->loop, fd);
    ns_loop_stop(r->loop);
}

TEST(fd_read_and_eof)
{
    s_rec_t r;
    int fds[2];
    if (!s_rec_init_pipe(&r, fds))
        return;
    CHECK_RC(ns_loop_add_fd(r.loop, -1, s_on_fd, &r), NS_ERR_INVAL);
    CHECK_RC(ns_loop_add_fd(r.loop, fds[0], s_on_fd, &r), NS_OK);
    CHECK_RC(ns_loop_add_fd(r.loop, fds[0], s_on_fd, &r), NS_ERR_EXISTS);
    CHECK(write(fds[1], "hello", 5) == 5);
    close(fds[1]);
    r.rc = NS_ERR_STATE;
    s_run(&r);
    /* the data in one turn, end of file in the next */
    CHECK_STR(r.order, "fe");
    CHECK_RC(r.rc, NS_OK);
    CHECK_EQ_INT(ns_loop_sockets(r.loop), 0);
    CHECK_RC(ns_loop_remove_fd(r.loop, fds[0]), NS_ERR_NOTFOUND);
    close(fds[0]);
    ns_loop_destroy(&r.loop);
}

/* The first readable fd removes the second, which was readable in the
 * same turn; the third, never readable, then sits where the second was. */
static void s_on_fd_remover(void *user, int fd)
{
    s_rec_t *r = user;
    char buf[16];
    if (read(fd, buf, sizeof buf) > 0)
        s_note(r, 'x');
    r->rc = ns_loop_remove_fd(r->loop, r->fds[1]);
}

static void s_on_fd_removed(void *user, int fd)
{
    (void)fd;
    s_note(user, 'y');
}

static void s_on_fd_idle(void *user, int fd)
{
    (void)fd;
    s_note(user, 'z');
}

TEST(remove_inside_handler)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    int p1[2], p2[2], p3[2];
    CHECK(pipe(p1) == 0 && pipe(p2) == 0 && pipe(p3) == 0);
    if (!r.loop)
        return;
    r.fds[1] = p2[0];
    CHECK_RC(ns_loop_add_fd(r.loop, p1[0], s_on_fd_remover, &r), NS_OK);
    CHECK_RC(ns_loop_add_fd(r.loop, p2[0], s_on_fd_removed, &r), NS_OK);
    CHECK_RC(ns_loop_add_fd(r.loop, p3[0], s_on_fd_idle, &r), NS_OK);
    /* both readable before the first poll */
    CHECK(write(p1[1], "1", 1) == 1 && write(p2[1], "2", 1) == 1);
    CHECK_RC(ns_loop_timer_start(r.loop, 50, false, s_on_stop, &r, NULL),
             NS_OK);
    s_run(&r);
    CHECK_RC(r.rc, NS_OK);
    CHECK_STR(r.order, "x.");
    CHECK_EQ_INT(ns_loop_sockets(r.loop), 2);
    for (int i = 0; i < 2; i++) {
        close(p1[i]);
        close(p2[i]);
        close(p3[i]);
    }
    ns_loop_destroy(&r.loop);
}

/* ---- caps, run and stop ------------------------------------------------ */

TEST(caps)
{
    CHECK(ns_loop_new(0, 1) == NULL);
    CHECK(ns_loop_new(1, 0) == NULL);
    CHECK(ns_loop_new(NS_LOOP_MAX_SOCKETS + 1, 1) == NULL);
    CHECK(ns_loop_new(1, NS_LOOP_MAX_TIMERS + 1) == NULL);
    ns_loop_t *loop = ns_loop_new(2, 2);
    CHECK(loop != NULL);
    if (!loop)
        return;
    int fds[2];
    CHECK(pipe(fds) == 0);
    int extra = dup(fds[0]);
    CHECK_RC(ns_loop_add_fd(loop, fds[0], s_on_fd, NULL), NS_OK);
    CHECK_RC(ns_loop_add_fd(loop, fds[1], s_on_fd, NULL), NS_OK);
    CHECK_RC(ns_loop_add_fd(loop, extra, s_on_fd, NULL), NS_ERR_TOOBIG);
    /* removing one makes room */
    CHECK_RC(ns_loop_remove_fd(loop, fds[1]), NS_OK);
    CHECK_RC(ns_loop_add_fd(loop, extra, s_on_fd, NULL), NS_OK);

    uint32_t t1 = 0, t2 = 0, t3 = 0;
    CHECK_RC(ns_loop_timer_start(loop, 1000, false, s_on_a, NULL, &t1), NS_OK);
    CHECK_RC(ns_loop_timer_start(loop, 1000, true, s_on_b, NULL, &t2), NS_OK);
    CHECK_RC(ns_loop_timer_start(loop, 1000, false, s_on_c, NULL, &t3),
             NS_ERR_TOOBIG);
    CHECK_RC(ns_loop_timer_cancel(loop, t1), NS_OK);
    CHECK_RC(ns_loop_timer_start(loop, 1000, false, s_on_c, NULL, &t3), NS_OK);
    CHECK(t3 != t1 && t3 != t2); /* ids are not reused */
    CHECK_EQ_INT(ns_loop_timers(loop), 2);
    ns_loop_destroy(&loop);
    CHECK(loop == NULL);
    ns_loop_destroy(&loop); /* idempotent */
    ns_loop_destroy(NULL);
    close(fds[0]);
    close(fds[1]);
    close(extra);
}

static void s_on_reenter(void *user, uint64_t now)
{
    (void)now;
    s_rec_t *r = user;
    r->rc = ns_loop_run(r->loop, NULL);
    ns_loop_stop(r->loop);
}

TEST(run_and_stop)
{
    s_rec_t r;
    s_rec_init(&r, 4, 8);
    if (!r.loop)
        return;
    /* a stop flag already set: returns at once, nothing runs */
    volatile sig_atomic_t stop = 1;
    CHECK_RC(ns_loop_timer_start(r.loop, 0, false, s_on_a, &r, NULL), NS_OK);
    CHECK_RC(ns_loop_run(r.loop, &stop), NS_OK);
    CHECK_STR(r.order, "");
    /* not reentrant */
    CHECK_RC(ns_loop_timer_start(r.loop, 1, false, s_on_reenter, &r, NULL),
             NS_OK);
    s_run(&r);
    CHECK_RC(r.rc, NS_ERR_STATE);
    CHECK_STR(r.order, "a");
    /* stopping outside a run does nothing: the next run goes on */
    ns_loop_stop(r.loop);
    CHECK_RC(ns_loop_timer_start(r.loop, 10, false, s_on_stop, &r, NULL),
             NS_OK);
    s_run(&r);
    CHECK_STR(r.order, "a.");
    ns_loop_destroy(&r.loop);
}

int main(void)
{
    ns_log_threshold = NS_LOG_ERROR; /* the cap warnings are expected */
    RUN(timer_order);
    RUN(timer_slack);
    RUN(timers_rephase);
    RUN(one_shot_runs_once);
    RUN(repeating_cancels_itself);
    RUN(cancel_inside_callback);
    RUN(started_in_a_turn_runs_in_the_next);
    RUN(socket_add_remove);
    RUN(fd_read_and_eof);
    RUN(remove_inside_handler);
    RUN(caps);
    RUN(run_and_stop);
    return ns_test_finish("p2p_loop");
}
