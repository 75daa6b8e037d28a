/* requester.h - the requester's side of the market: one job from escrow to
 * settlement.
 *
 * JOIN -> ANNOUNCE -> BIDDING -> [CHALLENGE] -> ACCEPT -> RUNNING -> FETCH
 * -> VERIFY -> DONE, or FAILED with a reason. CHALLENGE: a winner whose
 * device claims this node has not verified yet proves them first
 * (hardware challenges, challenge.h); one that fails is excluded and the
 * next bid wins. It locks the escrow (JOB entry), runs
 * the reverse auction over the bids that arrive in the window, awards the
 * winner (AWARD entry, AWARDED message), serves the descriptor and inputs,
 * waits for the RESULT entry, fetches the statement and outputs, re-runs k
 * random units on its own device (challenge-response) and settles
 * (SETTLE), or slashes the cheater with a fraud proof (SLASH), cancels a
 * provider that does not accept, deliver or meet the deadline (CANCEL),
 * and starts a new round without it.
 *
 * A state machine driven by messages (ns_requester_on_msg) and time
 * (ns_requester_tick); it talks to the world only through an ns_node_io_t
 * and reports progress through a callback, never by printing. Several
 * requesters can live in one node beside its provider.
 */
#ifndef NIGHTSHIFT_REQUESTER_H
#define NIGHTSHIFT_REQUESTER_H

#include "nightshift/blobs.h"
#include "nightshift/job.h"
#include "nightshift/ledger.h"
#include "nightshift/market.h"
#include "nightshift/node_io.h"
#include "nightshift/runner.h"
#include "nightshift/worker_pool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ns_requester ns_requester_t;

typedef enum {
    NS_RQ_JOIN,
    NS_RQ_ANNOUNCE,
    NS_RQ_BIDDING,
    NS_RQ_WAITING,   /* no provider qualifies yet: announced again when one
                        does, up to the deadline (unless no_wait) */
    NS_RQ_CHALLENGE, /* the winner proves the device it claims */
    NS_RQ_ACCEPT,
    NS_RQ_RUNNING,
    NS_RQ_FETCH,
    NS_RQ_VERIFY,
    NS_RQ_DONE,
    NS_RQ_FAILED,
} ns_rq_phase_t;

const char *ns_rq_phase_name(ns_rq_phase_t phase);

typedef struct {
    /* The job; borrowed, must outlive the requester. */
    const ns_job_t *job;
    const uint8_t *packed; /* the descriptor as providers fetch it */
    size_t packed_len;
    const ns_input_t *inputs; /* by argument (IN arguments) */
    /* The kernel source's name in the pre-flight's messages ("mlp.cl";
     * NULL: the built-in's name). */
    const char *source_name;
    uint8_t **outputs;        /* by argument: buffers of the OUT sizes,
                                 for the OUT arguments without a path
                                 (NULL entries: see scratch_dir) */
    /* By argument, NULL or where an OUT argument goes: its bytes are
     * received into PATH.<job>.part beside it as they arrive (never whole
     * in memory), checked from that file, and renamed to PATH once the job
     * is settled (before deliver). NULL: every output in outputs. */
    const char *const *out_paths;
    /* An output with neither a path nor a buffer in outputs (a pipeline's
     * intermediate, which only the check reads) is received into an
     * unnamed temporary file in scratch_dir (NULL: $TMPDIR, else /tmp),
     * gone once the job ends, and written nowhere. */
    const char *scratch_dir;
    ns_hash_t desc_id; /* ns_job_id(job) */
    ns_hash_t job_id;  /* ns_ledger_job_id(us, desc_id, nonce) */
    uint8_t nonce[16];
    bool resume; /* the job may be on record already: continue it */
    /* Skip the unit sampling before posting (preflight.h). Only for tests
     * that need a job to fail on the provider and nowhere else. */
    bool no_preflight;
    /* Test networks only (`submit --fault fork-award`): a second entry at
     * the AWARD's seq, a TRANSFER, and each of the two sent straight to
     * half of the other peers, the AWARD to the winner: a requester
     * forking its chain at its award, for the tests of fork resolution
     * (docs/PROTOCOL.md, "Forks"). */
    bool fault_fork_award;
    /* Fail at once when no provider can take the job, instead of waiting
     * for one (a provider joining, a busy one becoming free) up to the
     * deadline. */
    bool no_wait;
    /* Where a SLASH's inputs wait for peers to fetch them when they do
     * not fit in the entry (set by the node; NULL: none). */
    ns_blobs_t *blobs;
    /* Verdicts of hardware challenges (verified.h), shared by the node's
     * requesters; NULL: providers are not challenged. */
    struct ns_verified *verified;
    uint32_t chal_allowance_ms; /* 0: NS_POLICY_CHAL_ALLOWANCE_MS */
    /* Shards of one job run side by side (job.h): whether a provider
     * holds another shard of it now. Such a provider counts as busy in
     * the auction, so shards spread over providers. NULL: no siblings. */
    bool (*sibling_holds)(void *user, const uint8_t provider[NS_ID_BYTES]);
    void *sibling_user;
    /* Terms. */
    uint64_t max_price;  /* credits of escrow */
    uint64_t collateral; /* credits the provider locks */
    uint32_t bid_window_ms;
    uint32_t bid_target; /* bidders asked for (0: NS_POLICY_BID_TARGET) */
    uint64_t deadline_s; /* result due within, from the announcement */
    uint64_t timeout_s;  /* give up after (0 = never) */
    ns_reqs_t reqs;
    const char *endpoint; /* where providers reach us ("tcp://...") */
    /* Wait for peers and a current ledger first (a light peer that just
     * started); a running node is joined already. */
    bool join;
    /* After the outputs are verified and settled: write them where the
     * user wants them. A failure fails the job (already paid for). */
    int (*deliver)(void *user, char *err, size_t errlen);
    void *deliver_user;
    /* Progress, one line at a time (no newline). */
    void (*progress)(void *user, const char *line);
    void *progress_user;
    bool progress_ticks; /* a "running... N s" line every second */
} ns_requester_opts_t;

/* What happened, for the receipt. */
typedef struct {
    ns_rq_phase_t phase;
    uint8_t provider[NS_ID_BYTES]; /* the last winner, zero if none */
    uint64_t price, refund;        /* credits */
    uint32_t checked;              /* units re-run */
    uint32_t rounds, slashed, cancelled;
    uint32_t failures; /* FAILED reports from providers */
    uint64_t match_ms, run_ms, verify_ms;
    char error[1024]; /* FAILED: why, one line */
} ns_receipt_t;

/* ledger, pool and me are borrowed. The job's kernel runs only in
 * workers of pool (worker_pool.h: the pre-flight, the spot check, the
 * check of a provider's failure report), never in this process. */
ns_requester_t *ns_requester_new(const ns_requester_opts_t *o,
                                 const ns_node_io_t *io, ns_ledger_t *ledger,
                                 ns_wpool_t *pool, const ns_identity_t *me,
                                 const ns_hash_t network_id, int *err);
void ns_requester_destroy(ns_requester_t **q);

/* Whether a message is about this requester's job (BID, FETCH, CHUNK). */
bool ns_requester_owns(const ns_requester_t *q, const ns_node_msg_t *m);
/* A market message for this job: NS_OK when taken or ignored, an error
 * when it is malformed or forged (the caller counts a drop). */
int ns_requester_on_msg(ns_requester_t *q, const ns_node_msg_t *m);

/* Advance: join, announce, close the auction, time out providers, verify.
 * now = io->mono_ms. Call every NS_POLICY_REQUESTER_TICK_MS. */
void ns_requester_tick(ns_requester_t *q, uint64_t now);

/* Device work (the pre-flight's sample, the spot check) runs on the
 * requester's own thread and is not finished yet. */
bool ns_requester_busy(const ns_requester_t *q);

/* DONE or FAILED, and nothing left to wait for (the settle linger). */
bool ns_requester_finished(const ns_requester_t *q);

/* Stop now (interrupted): FAILED with why unless already DONE. */
void ns_requester_stop(ns_requester_t *q, const char *why);

const ns_receipt_t *ns_requester_receipt(const ns_requester_t *q);

#endif
