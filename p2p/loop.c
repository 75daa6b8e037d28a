/* loop.c - the event loop (loop.h): zmq_poll over registered sockets and
 * descriptors, and timers with ids.
 *
 * Readers sit in an array kept in registration order; removing one closes
 * the gap at once, so the array always holds exactly the live readers.
 * Each reader has a serial number that is never reused; a turn remembers
 * the serial behind each poll item, and dispatch calls a reader only if
 * that serial is still registered. A reader removed during the turn is
 * thereby skipped, and a new one that happens to get the same socket
 * address or fd is not mistaken for it.
 *
 * Timers sit in a small array of slots (id 0 = free) and are scanned: the
 * caps are tens, not thousands.
 */
#include "nightshift/loop.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct {
    void *socket; /* ZeroMQ socket, or NULL for a plain fd */
    int fd;       /* plain file descriptor, or -1 */
    ns_loop_socket_fn socket_fn;
    ns_loop_fd_fn fd_fn;
    void *user;
    uint64_t serial;             /* unique per registration, from 1 */
    ns_loop_want_fn wants_write; /* fd: poll for writing too when true */
} s_reader_t;

typedef struct {
    uint32_t id; /* 0 = free slot */
    bool repeat;
    uint32_t interval_ms;
    uint64_t due_ms;    /* monotonic */
    uint64_t last_turn; /* turn in which it last ran or was started */
    ns_loop_timer_fn fn;
    void *user;
    uint32_t slack_ms; /* may run this much early in a turn that runs
                          anyway (ns_loop_timer_slack) */
} s_timer_t;

struct ns_loop {
    s_reader_t *readers; /* n_readers live ones, registration order */
    uint32_t n_readers, max_readers;
    zmq_pollitem_t *items; /* this turn's poll set */
    uint64_t *polled;      /* serial behind each poll item */
    uint64_t next_serial;

    s_timer_t *timers; /* max_timers slots */
    uint32_t n_timers, max_timers;
    uint32_t next_timer_id; /* last id given out */

    uint64_t turn;    /* turns run, for "not in the turn it started" */
    bool stopping;    /* ns_loop_stop was called in this run */
    bool running;     /* inside ns_loop_run */
    uint64_t full_ms; /* last "loop full" warning, monotonic */
};

ns_loop_t *ns_loop_new(uint32_t max_sockets, uint32_t max_timers)
{
    if (max_sockets == 0 || max_sockets > NS_LOOP_MAX_SOCKETS ||
        max_timers == 0 || max_timers > NS_LOOP_MAX_TIMERS)
        return NULL;
    ns_loop_t *loop = calloc(1, sizeof *loop);
    if (!loop)
        return NULL;
    loop->readers = calloc(max_sockets, sizeof *loop->readers);
    loop->items = calloc(max_sockets, sizeof *loop->items);
    loop->polled = calloc(max_sockets, sizeof *loop->polled);
    loop->timers = calloc(max_timers, sizeof *loop->timers);
    if (!loop->readers || !loop->items || !loop->polled || !loop->timers) {
        ns_loop_destroy(&loop);
        return NULL;
    }
    loop->max_readers = max_sockets;
    loop->max_timers = max_timers;
    return loop;
}

void ns_loop_destroy(ns_loop_t **lp)
{
    if (!lp || !*lp)
        return;
    ns_loop_t *loop = *lp;
    free(loop->readers);
    free(loop->items);
    free(loop->polled);
    free(loop->timers);
    free(loop);
    *lp = NULL;
}

/* The caps are set from configuration; say which one a caller ran into,
 * at most once a second. */
static void s_warn_full(ns_loop_t *loop, const char *what, uint32_t cap)
{
    uint64_t now = ns_mono_ms();
    if (loop->full_ms && now - loop->full_ms < 1000)
        return;
    loop->full_ms = now;
    ns_warn(NS_MOD_NET, "event=loop_full what=%s cap=%u", what, cap);
}

/* ---- sockets and descriptors ------------------------------------------- */

static int s_find(const ns_loop_t *loop, const void *socket, int fd)
{
    for (uint32_t i = 0; i < loop->n_readers; i++)
        if (loop->readers[i].socket == socket && loop->readers[i].fd == fd)
            return (int)i;
    return -1;
}

static int s_add(ns_loop_t *loop, const s_reader_t *r)
{
    if (s_find(loop, r->socket, r->fd) >= 0)
        return NS_ERR_EXISTS;
    if (loop->n_readers >= loop->max_readers) {
        s_warn_full(loop, "sockets", loop->max_readers);
        return NS_ERR_TOOBIG;
    }
    s_reader_t *slot = &loop->readers[loop->n_readers++];
    *slot = *r;
    slot->serial = ++loop->next_serial;
    return NS_OK;
}

static int s_remove(ns_loop_t *loop, const void *socket, int fd)
{
    int i = s_find(loop, socket, fd);
    if (i < 0)
        return NS_ERR_NOTFOUND;
    memmove(&loop->readers[i], &loop->readers[i + 1],
            (loop->n_readers - (uint32_t)i - 1) * sizeof *loop->readers);
    loop->n_readers--;
    return NS_OK;
}

int ns_loop_add_socket(ns_loop_t *loop, void *socket, ns_loop_socket_fn fn,
                       void *user)
{
    if (!socket || !fn)
        return NS_ERR_INVAL;
    return s_add(loop, &(s_reader_t){socket, -1, fn, NULL, user, 0, NULL});
}

int ns_loop_remove_socket(ns_loop_t *loop, void *socket)
{
    return socket ? s_remove(loop, socket, -1) : NS_ERR_NOTFOUND;
}

int ns_loop_add_fd(ns_loop_t *loop, int fd, ns_loop_fd_fn fn, void *user)
{
    if (fd < 0 || !fn)
        return NS_ERR_INVAL;
    return s_add(loop, &(s_reader_t){NULL, fd, NULL, fn, user, 0, NULL});
}

int ns_loop_add_fd_io(ns_loop_t *loop, int fd, ns_loop_fd_fn fn,
                      ns_loop_want_fn wants_write, void *user)
{
    if (fd < 0 || !fn)
        return NS_ERR_INVAL;
    return s_add(loop, &(s_reader_t){NULL, fd, NULL, fn, user, 0, wants_write});
}

int ns_loop_remove_fd(ns_loop_t *loop, int fd)
{
    return fd >= 0 ? s_remove(loop, NULL, fd) : NS_ERR_NOTFOUND;
}

uint32_t ns_loop_sockets(const ns_loop_t *loop)
{
    return loop->n_readers;
}

/* ---- timers ------------------------------------------------------------- */

static s_timer_t *s_timer_find(ns_loop_t *loop, uint32_t id)
{
    for (uint32_t i = 0; id && i < loop->max_timers; i++)
        if (loop->timers[i].id == id)
            return &loop->timers[i];
    return NULL;
}

int ns_loop_timer_start(ns_loop_t *loop, uint32_t interval_ms, bool repeat,
                        ns_loop_timer_fn fn, void *user, uint32_t *id)
{
    if (!fn || (repeat && interval_ms == 0))
        return NS_ERR_INVAL;
    if (loop->n_timers >= loop->max_timers) {
        s_warn_full(loop, "timers", loop->max_timers);
        return NS_ERR_TOOBIG;
    }
    s_timer_t *t = NULL;
    for (uint32_t i = 0; !t && i < loop->max_timers; i++)
        if (loop->timers[i].id == 0)
            t = &loop->timers[i];
    /* Ids wrap after 2^32 - 1 starts; skip 0 and any still running. */
    do
        loop->next_timer_id++;
    while (loop->next_timer_id == 0 || s_timer_find(loop, loop->next_timer_id));
    *t = (s_timer_t){
        loop->next_timer_id, repeat, interval_ms, ns_mono_ms() + interval_ms,
        loop->turn,          fn,     user,        0};
    loop->n_timers++;
    if (id)
        *id = t->id;
    return NS_OK;
}

int ns_loop_timer_cancel(ns_loop_t *loop, uint32_t id)
{
    s_timer_t *t = s_timer_find(loop, id);
    if (!t)
        return NS_ERR_NOTFOUND;
    memset(t, 0, sizeof *t);
    loop->n_timers--;
    return NS_OK;
}

int ns_loop_timer_slack(ns_loop_t *loop, uint32_t id, uint32_t slack_ms)
{
    s_timer_t *t = s_timer_find(loop, id);
    if (!t)
        return NS_ERR_NOTFOUND;
    /* at most half a period early: a repeating timer still runs about
     * once a period in a busy loop */
    if (t->repeat && slack_ms > t->interval_ms / 2)
        slack_ms = t->interval_ms / 2;
    t->slack_ms = slack_ms;
    return NS_OK;
}

void ns_loop_timers_rephase(ns_loop_t *loop)
{
    uint64_t now = ns_mono_ms();
    for (uint32_t i = 0; i < loop->max_timers; i++) {
        s_timer_t *t = &loop->timers[i];
        if (t->id && t->repeat && t->slack_ms)
            t->due_ms = now + t->interval_ms;
    }
}

uint32_t ns_loop_timers(const ns_loop_t *loop)
{
    return loop->n_timers;
}

/* The due timer to run next in this turn: earliest due, then lowest id
 * (started first, ids wrapping aside). NULL when none is left. */
static s_timer_t *s_next_due(ns_loop_t *loop, uint64_t now)
{
    s_timer_t *best = NULL;
    for (uint32_t i = 0; i < loop->max_timers; i++) {
        s_timer_t *t = &loop->timers[i];
        if (!t->id || t->due_ms > now + t->slack_ms ||
            t->last_turn == loop->turn)
            continue;
        if (!best || t->due_ms < best->due_ms ||
            (t->due_ms == best->due_ms && t->id < best->id))
            best = t;
    }
    return best;
}

static void s_run_timers(ns_loop_t *loop)
{
    uint64_t now = ns_mono_ms();
    s_timer_t *t;
    while (!loop->stopping && (t = s_next_due(loop, now)) != NULL) {
        /* Settle the slot before the call: the callback may cancel this
         * timer or others and start new ones in freed slots, so t is not
         * touched after it. */
        ns_loop_timer_fn fn = t->fn;
        void *user = t->user;
        if (t->repeat) {
            t->due_ms = now + t->interval_ms;
            t->last_turn = loop->turn;
        } else {
            memset(t, 0, sizeof *t);
            loop->n_timers--;
        }
        fn(user, now);
    }
}

/* Milliseconds until the earliest timer, capped at NS_LOOP_MAX_WAIT_MS. */
static long s_timeout(const ns_loop_t *loop)
{
    uint64_t now = ns_mono_ms();
    uint64_t wait = NS_LOOP_MAX_WAIT_MS;
    for (uint32_t i = 0; i < loop->max_timers; i++) {
        const s_timer_t *t = &loop->timers[i];
        if (!t->id)
            continue;
        uint64_t w = t->due_ms > now ? t->due_ms - now : 0;
        if (w < wait)
            wait = w;
    }
    return (long)wait;
}

/* ---- running ------------------------------------------------------------ */

static const s_reader_t *s_polled_reader(const ns_loop_t *loop, uint32_t i)
{
    /* Usually nothing moved and it is still at its index. */
    if (i < loop->n_readers && loop->readers[i].serial == loop->polled[i])
        return &loop->readers[i];
    for (uint32_t k = 0; k < loop->n_readers; k++)
        if (loop->readers[k].serial == loop->polled[i])
            return &loop->readers[k];
    return NULL;
}

static int s_turn(ns_loop_t *loop)
{
    uint32_t n = loop->n_readers;
    for (uint32_t i = 0; i < n; i++) {
        const s_reader_t *r = &loop->readers[i];
        short events = ZMQ_POLLIN;
        if (!r->socket && r->wants_write && r->wants_write(r->user))
            events |= ZMQ_POLLOUT;
        loop->items[i] = (zmq_pollitem_t){r->socket, r->fd, events, 0};
        loop->polled[i] = r->serial;
    }
    if (zmq_poll(loop->items, (int)n, s_timeout(loop)) < 0) {
        if (zmq_errno() == EINTR)
            return NS_OK;
        return NS_ERR_ZMQ;
    }
    loop->turn++;
    for (uint32_t i = 0; i < n && !loop->stopping; i++) {
        short ev = loop->items[i].revents;
        if (!(ev & (ZMQ_POLLIN | ZMQ_POLLOUT | ZMQ_POLLERR)))
            continue;
        const s_reader_t *r = s_polled_reader(loop, i);
        if (!r)
            continue; /* removed by an earlier handler of this turn */
        if (r->socket && (ev & ZMQ_POLLIN))
            r->socket_fn(r->user, r->socket);
        else if (!r->socket)
            r->fd_fn(r->user, r->fd);
    }
    s_run_timers(loop);
    return NS_OK;
}

int ns_loop_run(ns_loop_t *loop, volatile sig_atomic_t *stop)
{
    if (loop->running)
        return NS_ERR_STATE;
    loop->running = true;
    loop->stopping = false;
    int rc = NS_OK;
    while (rc == NS_OK && !loop->stopping && !(stop && *stop))
        rc = s_turn(loop);
    loop->running = false;
    loop->stopping = false;
    return rc;
}

void ns_loop_stop(ns_loop_t *loop)
{
    if (loop->running)
        loop->stopping = true;
}
