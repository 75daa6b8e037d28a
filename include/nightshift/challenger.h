/* challenger.h - the requester's side of a hardware challenge (node
 * layer): size it, send CHAL, time the answer against the deadline the
 * provider's own claims imply, fetch the answer and check it
 * (challenge.h: the memory labelling's openings, the integer product by
 * Freivalds with a secret the provider never sees).
 *
 * Flow (market.h): CHAL -> the provider runs both challenges in its
 * sandboxed worker -> CHAL_DONE (roots fixed; the clock stops) -> FETCH
 * blob NS_BLOB_CHAL of the nonce -> verdict. No CHAL_DONE by the deadline
 * plus NS_POLICY_CHAL_ALLOWANCE_MS is LATE.
 */
#ifndef NIGHTSHIFT_CHALLENGER_H
#define NIGHTSHIFT_CHALLENGER_H

#include "nightshift/challenge.h"
#include "nightshift/devinfo.h"
#include "nightshift/market.h"
#include "nightshift/node_io.h"
#include "nightshift/transfer.h"

typedef struct {
    bool active;
    ns_chal_msg_t msg;
    uint8_t provider[NS_ID_BYTES];
    ns_label_params_t label;
    ns_imatmul_params_t imatmul;
    uint8_t secret[32];   /* Freivalds' vectors: never sent */
    uint64_t sent_ms;     /* mono */
    uint64_t deadline_us; /* from the claim, both challenges */
    bool done;            /* CHAL_DONE arrived */
    uint64_t elapsed_us;  /* CHAL to CHAL_DONE */
    ns_chal_done_t answer;
    ns_fetch_t fetch; /* the answer's blob */
    bool fetching;
    ns_buf_t body;
    uint32_t busy_retries; /* "busy" answers so far */
    uint64_t busy_ms;      /* when the last one came */
    uint32_t allowance_ms; /* network and dispatch on top of deadlines */
    uint32_t late_retries; /* late verdicts turned into a new try */
    /* to start a new try with */
    uint32_t device;
    ns_devinfo_t claim;
    uint64_t want_label_bytes;
} ns_challenger_t;

/* A provider whose worker is busy (warming its programs, a job, another
 * requester's challenge) answers NS_ERR_STATE: asked again every
 * BUSY_RETRY_MS, at most BUSY_RETRIES times; then the tick returns
 * NS_CHALLENGER_BUSY, no verdict: being busy is not a false claim. */
#define NS_CHALLENGER_BUSY_RETRY_MS 250
#define NS_CHALLENGER_BUSY_RETRIES 20
/* A late answer is tried again this many times with a fresh challenge: a
 * device that is slower than it claims stays late, an honest one on a
 * momentarily loaded machine does not. */
#define NS_CHALLENGER_LATE_RETRIES 2

#define NS_CHALLENGER_PENDING (-1)
#define NS_CHALLENGER_BUSY (-2) /* it never ran: the prover stayed busy */

void ns_challenger_init(ns_challenger_t *c);
void ns_challenger_release(ns_challenger_t *c);

/* Challenge provider's device `device` as claimed (claim: its heartbeat's
 * figures): a labelling of about label_bytes (at least 1 MiB, within the
 * claimed largest allocation) and a product of order imatmul_n. */
int ns_challenger_start(ns_challenger_t *c, const ns_node_io_t *io,
                        const uint8_t provider[NS_ID_BYTES], uint32_t device,
                        const ns_devinfo_t *claim, uint64_t label_bytes,
                        uint32_t imatmul_n, uint32_t allowance_ms,
                        uint64_t now_ms) NS_MUST_CHECK;

/* Whether a message (CHAL_DONE, CHUNK of the answer) is this challenge's. */
bool ns_challenger_owns(const ns_challenger_t *c, const ns_node_msg_t *m);
int ns_challenger_on_msg(ns_challenger_t *c, const ns_node_io_t *io,
                         const ns_node_msg_t *m, uint64_t now_ms);

/* NS_CHALLENGER_PENDING, NS_CHALLENGER_BUSY, or the verdict
 * (ns_chal_verdict: PASSED, WRONG, LATE) with why; the challenge is over
 * then (active false). */
int ns_challenger_tick(ns_challenger_t *c, const ns_node_io_t *io,
                       uint64_t now_ms, char *why, size_t whylen);

#endif
