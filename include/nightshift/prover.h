/* prover.h - the provider's side of a hardware challenge (node layer): run
 * the labelling and the product in the sandboxed worker, one after the
 * other, then send CHAL_DONE with the roots and serve the answer (blob
 * NS_BLOB_CHAL of the challenge's nonce) to the challenger only, for
 * NS_PROVER_KEEP_MS.
 *
 * The worker's challenge programs are built at its first challenge, which
 * a challenger's clock must not pay for: ns_prover_warm runs a tiny one
 * as soon as the worker is idle after start.
 */
#ifndef NIGHTSHIFT_PROVER_H
#define NIGHTSHIFT_PROVER_H

#include "nightshift/market.h"
#include "nightshift/node_io.h"
#include "nightshift/worker.h"

#define NS_PROVER_KEEP_MS 60000
/* Answers served at once: a new challenge may start (from another
 * requester) while the last one's challenger still fetches its answer. */
#define NS_PROVER_SERVED 4

typedef enum {
    NS_PROVER_IDLE,
    NS_PROVER_WARMING,
    NS_PROVER_LABEL,
    NS_PROVER_IMATMUL,
    NS_PROVER_SERVE,
} ns_prover_state;

/* An answer being served: to its challenger only, until KEEP_MS. */
typedef struct {
    bool used;
    ns_hash_t nonce;
    uint8_t requester[NS_ID_BYTES];
    ns_buf_t answer;
    uint64_t since_ms;
} ns_prover_served_t;

typedef struct {
    ns_prover_state state; /* SERVE is not used: answers wait in served[] */
    bool warm;
    ns_chal_msg_t msg;
    uint8_t requester[NS_ID_BYTES];
    ns_chal_done_t done;
    ns_buf_t answer; /* label answer, then C (while it is computed) */
    uint64_t since_ms;
    ns_buf_t body;
    ns_prover_served_t served[NS_PROVER_SERVED];
} ns_prover_t;

void ns_prover_init(ns_prover_t *pv);
void ns_prover_release(ns_prover_t *pv);

/* The worker is the prover's now (a challenge or the warm-up is in it). */
bool ns_prover_busy(const ns_prover_t *pv);

/* Warm the worker's challenge programs when it is idle (once). */
void ns_prover_warm(ns_prover_t *pv, ns_worker_t *w);

/* A CHAL from requester: start it in the worker (idle: checked by the
 * caller), or answer CHAL_DONE with the reason it cannot. */
void ns_prover_start(ns_prover_t *pv, ns_worker_t *w, const ns_node_io_t *io,
                     const ns_chal_msg_t *m, const uint8_t requester[32],
                     uint64_t max_alloc_bytes, uint64_t now);

/* Collect from the worker, go on to the next part, send CHAL_DONE; forget
 * a served answer after NS_PROVER_KEEP_MS (or when NS_PROVER_SERVED newer
 * ones are served). */
void ns_prover_tick(ns_prover_t *pv, ns_worker_t *w, const ns_node_io_t *io,
                    uint64_t now);

/* A FETCH of the answer: NS_ERR_NOTFOUND when not ours (another nonce, or
 * not from the challenger). */
int ns_prover_serve(ns_prover_t *pv, const ns_node_msg_t *m) NS_MUST_CHECK;

#endif
