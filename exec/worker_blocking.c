/* worker_blocking.c - the blocking worker calls (worker.h): the
 * non-blocking API of worker_supervisor.c plus poll(2), nothing else.
 */
#include "nightshift/worker.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

/* Wait for the submitted job's result: the blocking API is the
 * non-blocking one plus poll. *stop (may be NULL) is read between polls
 * (at most every 100 ms then): once non-zero, the job is abandoned (the
 * worker killed) and NS_ERR_INTR returned. */
static int s_wait_stop(ns_worker_t *w, ns_worker_result_t *res,
                       const volatile int *stop, char *err, size_t errlen)
{
    for (;;) {
        if (ns_worker_collect(w, res) == 1)
            break;
        if (stop && *stop) {
            ns_worker_cancel(w);
            snprintf(err, errlen, "interrupted");
            return NS_ERR_INTR;
        }
        int fd = ns_worker_fd(w);
        if (fd < 0) { /* cannot happen with a job pending; be safe */
            ns_worker_cancel(w);
            snprintf(err, errlen, "the worker is gone");
            return NS_ERR_STATE;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (ns_worker_wants_write(w))
            p.events |= POLLOUT;
        int ms = ns_worker_timeout_ms(w);
        if (stop && (ms < 0 || ms > 100))
            ms = 100;
        if (poll(&p, 1, ms) < 0 && errno != EINTR) {
            ns_worker_cancel(w);
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return NS_ERR_IO;
        }
    }
    if (res->status != NS_OK) {
        snprintf(err, errlen, "%s", res->error);
        int rc = res->status;
        ns_worker_result_release(res);
        return rc;
    }
    return NS_OK;
}

static int s_run_wait(ns_worker_t *w, ns_worker_result_t *res, char *err,
                      size_t errlen)
{
    return s_wait_stop(w, res, NULL, err, errlen);
}

/* Hand the result's OUT buffers to the caller. */
static void s_take_outputs(ns_worker_result_t *res, const ns_job_t *job,
                           uint8_t **outputs, ns_timings_t *t)
{
    for (uint32_t i = 0; i < job->n_args; i++) {
        outputs[i] = res->outputs[i];
        res->outputs[i] = NULL;
    }
    if (t)
        *t = res->timings;
    ns_worker_result_release(res);
}

int ns_worker_run(ns_worker_t *w, const ns_job_t *job, const ns_input_t *inputs,
                  uint8_t **outputs, ns_timings_t *t, char *err, size_t errlen)
{
    ns_worker_result_t res;
    int rc = ns_worker_submit(w, job, inputs, NULL, 0, err, errlen);
    if (rc == NS_OK)
        rc = s_run_wait(w, &res, err, errlen);
    if (rc == NS_OK)
        s_take_outputs(&res, job, outputs, t);
    return rc;
}

int ns_worker_run_units(ns_worker_t *w, const ns_job_t *job,
                        const ns_input_t *inputs, const uint64_t *units,
                        uint32_t n, uint8_t **outputs, ns_timings_t *t,
                        char *err, size_t errlen)
{
    ns_worker_result_t res;
    if (!units) {
        snprintf(err, errlen, "no units to re-run");
        return NS_ERR_INVAL;
    }
    int rc = ns_worker_submit(w, job, inputs, units, n, err, errlen);
    if (rc == NS_OK)
        rc = s_run_wait(w, &res, err, errlen);
    if (rc == NS_OK)
        s_take_outputs(&res, job, outputs, t);
    return rc;
}

int ns_worker_check_fraud(ns_worker_t *w, const ns_fraud_proof_t *p,
                          const ns_input_t *inputs, char *err, size_t errlen)
{
    ns_worker_result_t res;
    int rc = ns_worker_submit_fraud(w, p, inputs, err, errlen);
    if (rc == NS_OK)
        rc = s_run_wait(w, &res, err, errlen);
    if (rc == NS_OK) {
        snprintf(err, errlen, "%s", res.error);
        ns_worker_result_release(&res);
    }
    return rc;
}

int ns_worker_run_challenge(ns_worker_t *w, const ns_chal_request_t *req,
                            ns_worker_result_t *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    int rc = ns_worker_submit_challenge(w, req, err, errlen);
    if (rc == NS_OK)
        rc = s_run_wait(w, res, err, errlen);
    return rc;
}

int ns_worker_preflight(ns_worker_t *w, const ns_job_t *job,
                        const ns_input_t *inputs, const int *fds, uint32_t what,
                        uint32_t k, const char *name, const volatile int *stop,
                        uint64_t *unit_ns, char *err, size_t errlen)
{
    ns_worker_result_t res;
    int rc = ns_worker_submit_preflight(w, job, inputs, fds, what, k, name, err,
                                        errlen);
    if (rc != NS_OK)
        return rc;
    rc = s_wait_stop(w, &res, stop, err, errlen);
    if (rc != NS_OK)
        return rc;
    err[0] = '\0';
    if (unit_ns)
        *unit_ns = res.unit_ns;
    ns_worker_result_release(&res);
    return NS_OK;
}
