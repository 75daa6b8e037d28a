/* policy.h - the market's policy numbers, in one place.
 *
 * These are choices, not protocol: a node may change them without breaking
 * anyone else (docs/PROTOCOL.md, "Market", says which ones other nodes
 * rely on). Times are milliseconds of the monotonic clock unless the name
 * says otherwise.
 */
#ifndef NIGHTSHIFT_POLICY_H
#define NIGHTSHIFT_POLICY_H

/* ---- transfers (node/transfer.c) ---------------------------------------- */

/* FETCHes in flight per transfer: 32 x NS_CHUNK_BYTES (4 MiB) on the wire.
 * 8 (1 MiB) left a 16 MiB output waiting on round trips through both
 * event loops on a busy 2-core box (fetch 90 -> 70 ms, SGEMM 2048), and
 * caps a link of 50 ms round trip at 20 MB/s; 4 MiB at 80 MB/s. */
#define NS_POLICY_FETCH_WINDOW 32
/* No CHUNK for this long with FETCHes in flight: the transfer is asked
 * again from its first missing chunk (ns_fetch_rewind), not restarted. */
#define NS_POLICY_FETCH_STALL_MS 3000

/* ---- the provider (node/provider.c) ------------------------------------- */

#define NS_POLICY_PROVIDER_JOBS 64 /* jobs tracked at once */
/* Worker processes (one a slot) a provider runs at most; slots beyond
 * this share them. */
#define NS_POLICY_MAX_WORKERS 16
#define NS_POLICY_PROVIDER_TICK_MS 25        /* state machine timer */
#define NS_POLICY_CLAIM_MS 2000              /* take payments in this often */
#define NS_POLICY_BID_TTL_MS 30000           /* forget an unanswered bid */
#define NS_POLICY_RETAIN_MS (10 * 60 * 1000) /* outputs kept at most */
/* A provider keeps each output up to this size in its blob store (by
 * hash), so a job that names it as an input (a pipeline's next step)
 * finds it there: input locality, market.h. Larger ones are not copied
 * (the copy costs the node loop a hash and a write). */
#define NS_POLICY_KEEP_OUTPUT_MAX (UINT64_C(64) << 20)
/* Near-equal bids compare the input bytes their bidders hold in whole
 * units of this: holding less saves less than a round trip on a LAN, and
 * must not pull every small job to the first provider that fetched its
 * inputs (equal providers keep sharing them, ns_auction_pick). */
#define NS_POLICY_HELD_BUCKET_BYTES (UINT64_C(1) << 20)
/* Outputs kept after the requester settled or moved the job on. */
#define NS_POLICY_RETAIN_AFTER_MS 5000
/* The sandbox's wall-clock limit for one run, at most; a job's run gets
 * what is left of its deadline less RUN_MARGIN (or a tenth of what is
 * left, if less), and is refused with less than RUN_MIN left. */
#define NS_POLICY_WORKER_TIMEOUT_MS (10 * 60 * 1000)
#define NS_POLICY_RUN_MARGIN_MS 2000
#define NS_POLICY_RUN_MIN_MS 100
/* A ledger that cannot write (disk full, read-only) is tried again this
 * often; meanwhile the node takes no new work. */
#define NS_POLICY_STORAGE_RETRY_MS 1000
/* Requesters that post and never settle are refused: after GRACE_JOBS
 * posted, at least 1/SETTLE_DIV of them must have settled. */
#define NS_POLICY_REQUESTER_GRACE_JOBS 5
#define NS_POLICY_REQUESTER_SETTLE_DIV 2
/* A credit is taken in only once its source entry is this old here: a
 * fork of its author (detected everywhere within a fraction of a second)
 * is then known first (docs/PROTOCOL.md, "Forks"). */
#define NS_POLICY_CLAIM_DELAY_MS 1000
/* A provider looks for awards of its own that their requester left past
 * deadline + the genesis close window (docs/PROTOCOL.md, "Closing") this
 * often (each look reads every job of the ledger), and posts the CLOSE
 * CLOSE_MARGIN after that moment by its clock: an honest requester's
 * SETTLE or SLASH stamped inside the window has reached every node by
 * then. */
#define NS_POLICY_CLOSE_TICK_MS 2000
/* ... once a minute while it holds no collateral (no accepted award) */
#define NS_POLICY_CLOSE_IDLE_MS 60000
#define NS_POLICY_CLOSE_MARGIN_MS 2000
/* A node takes a CLOSE only once its timestamp is at most this far ahead
 * of its own clock (ns_ledger_set_close_hold): a provider that stamps one
 * ahead to cut the requester's window short finds the requester's SLASH
 * applied first. */
#define NS_POLICY_CLOSE_HOLD_MS 2000

/* ---- the requester (node/requester.c) ----------------------------------- */

#define NS_POLICY_REQUESTER_TICK_MS 5 /* state machine timer */
/* Units the pre-flight runs alone (4 times each) before posting. */
#define NS_POLICY_PREFLIGHT_UNITS 4
/* The pre-flight's wall clock in the sandbox worker, build and sampled
 * units together: at most this, and never past the job's deadline (a
 * kernel whose sampled units alone take longer cannot finish in time). */
#define NS_POLICY_PREFLIGHT_BUDGET_MS 60000
/* A spot check's wall clock in the sandbox worker (a check re-runs k
 * units: a small share of a job that met its deadline). */
#define NS_POLICY_CHECK_LIMIT_MS 600000
/* Sandboxed workers a node keeps warm for its requesters' device work
 * (worker_pool.h): that many jobs' pre-flights or checks at once, the
 * others wait their turn a tick at a time. */
#define NS_POLICY_RQ_WORKERS 2
/* Units of every step a provider re-runs on a copy of its outputs before
 * it commits to them (ns_self_check): a job whose units do not write alone
 * what its launch wrote would fail any requester's check, and the
 * provider would be slashed for the requester's kernel; it gives such a
 * job up instead. */
#define NS_POLICY_SELF_CHECK_UNITS 4
/* The throughput a work estimate assumes for a device not measured. */
#define NS_POLICY_REF_GFLOPS 100.0
#define NS_POLICY_MAX_BIDS 64 /* bids kept per auction round */
/* Bidders a job asks for (market.h, "bids from a bounded set"): the
 * announcement draws this many of the qualified providers the requester
 * knows; a round without a usable bid widens the draw fourfold. */
#define NS_POLICY_BID_TARGET 32
/* A job no provider can take waits (requester.h no_wait): announced again
 * at most this often once a known provider qualifies, and this often
 * anyway. */
#define NS_POLICY_QUEUE_RETRY_MS 1000
#define NS_POLICY_QUEUE_POLL_MS 10000
/* Bids closer than this in arrival tie on round trip (market.h): a light
 * peer's bootstrap answers over a connection already made, the others
 * after a CURVE handshake of a few ms, which is no round trip. */
#define NS_POLICY_RTT_BUCKET_US 20000
/* A requester closes its auction before the bid window only when every
 * qualified provider it knows has bid and no peer it learned of in this
 * long is still unheard (a light peer that just joined knows its
 * bootstrap's heartbeat first: closing on that one bid gave the bootstrap
 * every job). */
#define NS_POLICY_UNHEARD_MS 5000
/* An awarded provider must accept (its ACCEPT entry) within this. */
#define NS_POLICY_ACCEPT_MS 5000
/* A provider awarded a job its ledger cannot show yet (the requester's
 * earlier entries are still on their way) waits this long for them
 * before it refuses; well inside NS_POLICY_ACCEPT_MS. */
#define NS_POLICY_AWARD_WAIT_MS 2000
/* Building on another chain's job entry waits for the stake to confirm
 * it (docs/PROTOCOL.md, "Confirmation"): a provider ACCEPTs an AWARD,
 * and a requester settles or slashes a RESULT, once more than half of
 * the stake voted for it (a few ms:
 * their votes go out at once), so that a fork of the other party
 * can never void what its own chain names. It waits at most this long
 * (the stake may be offline: then nothing confirms, and the market goes
 * on unconfirmed); one whose counterpart forked meanwhile (banned) gives
 * the job up. Well inside NS_POLICY_ACCEPT_MS. */
#define NS_POLICY_CONFIRM_WAIT_MS 2500
/* Outputs must arrive within this once the RESULT is on record. */
#define NS_POLICY_FETCH_MS 60000
/* A hardware challenge's answer (under a MiB) must arrive within this
 * once CHAL_DONE said it is ready: the requester waits on it in the
 * auction, not after a RESULT. */
#define NS_POLICY_CHAL_FETCH_MS 10000
/* After a SLASH every node re-runs the disputed unit before it reads the
 * next announcement: the next round's bid window is this much longer. */
#define NS_POLICY_SLASH_BID_EXTRA_MS 2000
/* Joining (join.h): give up without a peer after GIVEUP_MS; with a peer,
 * go on at once when our ledger has what the job needs, else when it
 * agrees with a peer's, at most MAX_MS. */
#define NS_POLICY_JOIN_GIVEUP_MS 15000
#define NS_POLICY_JOIN_MAX_MS 5000
/* A light peer that leaves gives what it queued last (the SETTLE, a
 * CANCEL) up to this long to go out while it closes; the receipt is
 * printed before. */
#define NS_POLICY_CLOSE_LINGER_MS 2000

/* Hardware challenges (challenger.h): a winner whose device claims this
 * node has not verified proves them before the award: a labelling of the
 * largest of CHAL_LABEL_BYTES, the job's min_mem / 4 and CHAL_LABEL_MS of
 * the claimed bandwidth (so a claim far above the device shows), up to
 * CHAL_LABEL_MAX_BYTES within its claimed largest allocation, and a
 * product of order CHAL_IMATMUL_N, both timed against deadlines from its
 * claimed figures (4x slack, challenge.h), plus ALLOWANCE_MS for the
 * network and the worker's dispatch (its programs are built ahead,
 * prover.h). A pass holds for CHAL_VALID_MS; a failure excludes it for
 * CHAL_RETRY_MS, then it may try again. A late answer is tried afresh
 * twice before it counts (challenger.h). Failing costs jobs, not
 * credits. */
#define NS_POLICY_CHAL_LABEL_BYTES (UINT64_C(16) << 20)
#define NS_POLICY_CHAL_LABEL_MAX_BYTES (UINT64_C(64) << 20)
#define NS_POLICY_CHAL_IMATMUL_N 256
#define NS_POLICY_CHAL_OPENINGS 16
#define NS_POLICY_CHAL_ALLOWANCE_MS 1000
#define NS_POLICY_CHAL_LABEL_MS 50
/* No CHAL_DONE after this long is late, whatever the claim says. */
#define NS_POLICY_CHAL_MAX_WAIT_MS 10000
/* One hardware challenge at a time per node (verified.h); a lease not
 * given back (a requester stopped mid-challenge) expires after this. */
#define NS_POLICY_CHAL_LEASE_MS (NS_POLICY_CHAL_MAX_WAIT_MS + 2000)
#define NS_POLICY_CHAL_VALID_MS (24 * 3600 * 1000)
#define NS_POLICY_CHAL_RETRY_MS (10 * 60 * 1000)

/* A provider that reported FAIL_EXCLUDE failures (not the job's fault)
 * within FAIL_WINDOW_MS is passed over by this requester until the window
 * ends (verified.h). */
#define NS_POLICY_FAIL_EXCLUDE 3
#define NS_POLICY_FAIL_WINDOW_MS (60 * 60 * 1000)

/* A light peer that slashed with inputs by reference waits at most this
 * long, after its job ended, for a peer to take the SLASH. */
#define NS_POLICY_SLASH_DATA_WAIT_MS 30000

/* Defaults of `submit` (flags override them). */
#define NS_POLICY_BID_WINDOW_MS 300
#define NS_POLICY_DEADLINE_S 120
/* The longest deadline and --timeout-s a job may have (a year): larger
 * values are refused (their milliseconds would overflow). */
#define NS_POLICY_MAX_DEADLINE_S (UINT64_C(365) * 24 * 3600)
#define NS_POLICY_TIMEOUT_S 600

#endif
