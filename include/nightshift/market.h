/* market.h - the market's messages and pure decisions (market layer):
 * job announcements, bids, transfer of descriptors/inputs/outputs in
 * chunks, requirement matching with reasons, pricing, the reverse auction
 * and reputation. No sockets, no OpenCL: the provider and requester state
 * machines (cli/provider.c, cli/requester.c) use these.
 *
 * Message types (docs/PROTOCOL.md, "Market"):
 *   32 JOB      gossiped  a job looking for providers (no source, no data)
 *   33 BID      direct    provider -> requester: a signed ns_bid_t
 *   34 AWARDED  direct    requester -> provider: the AWARD entry
 *   35 FETCH    direct    [job_id, blob, offset, len]: send me a chunk
 *   36 CHUNK    direct    [job_id, blob, offset, total, bytes]
 *   37 FAILED   direct    provider -> requester: a signed ns_failure_t,
 *                         sent as soon as a job fails on the provider
 *   38 CHAL     direct    requester -> a provider that bid: prove the
 *                         device you claim (ns_chal_msg_t)
 *   39 CHAL_DONE direct   provider -> requester: the answer is ready
 *                         (ns_chal_done_t); the answer itself is fetched
 *                         as blob NS_BLOB_CHAL of the challenge's nonce
 * Blobs: 0 = the packed job descriptor, 1 + i = input argument i,
 * 255 = the provider's signed result statement, 256 + i = output argument
 * i (served by the provider after RESULT).
 *
 * Every message has exactly one encode and one decode function here; the
 * node layer (node/) never packs a market message by hand. Policy numbers
 * (windows, grace periods, retention) are in policy.h.
 */
#ifndef NIGHTSHIFT_MARKET_H
#define NIGHTSHIFT_MARKET_H

#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/wire.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_MSG_MKT_JOB 32
#define NS_MSG_MKT_BID 33
#define NS_MSG_MKT_AWARDED 34
#define NS_MSG_MKT_FETCH 35
#define NS_MSG_MKT_CHUNK 36
#define NS_MSG_MKT_FAILED 37
#define NS_MSG_MKT_CHAL 38
#define NS_MSG_MKT_CHAL_DONE 39

#define NS_CHUNK_BYTES (128 * 1024) /* data per CHUNK */
#define NS_BLOB_DESCRIPTOR 0
#define NS_BLOB_INPUT(i) (1 + (i))
#define NS_BLOB_STATEMENT 255 /* the provider's signed result statement */
#define NS_BLOB_CHAL 254      /* a hardware challenge's answer */
#define NS_BLOB_OUTPUT(i) (256 + (i))
/* Content by hash (content.h): the FETCH's job id field is the hash. */
#define NS_BLOB_CONTENT UINT32_C(0xFFFFFFFF)
#define NS_MAX_EXCLUDED 16   /* providers a job will not take again */
#define NS_MAX_ANN_INPUTS 32 /* distinct inputs named by an announcement */

/* Input locality. An announcement names the job's distinct inputs by
 * content hash and size; a bidder that holds some of them (a provider's
 * blob store keeps the inputs it fetched and the outputs it computed, so
 * a pipeline's next step finds its intermediate where it was made) says
 * which in its bid, with a proof of possession the requester checks
 * against its own copy:
 *   proof = BLAKE2b-256("nightshift/held/v1" || job id || provider ||
 *                       mask (u32 BE) || for each set bit i, ascending:
 *                       piece 0 || ... || piece NS_HELD_PIECES-1 of
 *                       input i)
 *   piece j of input i: n = min(NS_HELD_PIECE_BYTES, size) bytes at
 *     offset LE64(first 8 bytes of BLAKE2b-256("nightshift/held/v1" ||
 *     job id || provider || i (u32 BE) || j (u32 BE))) mod (size - n + 1)
 * The job id is fresh for every job, so a proof cannot be made before the
 * announcement without the bytes. Near-equal bids go to the bidder that
 * proved it holds more input bytes (after "free", ns_auction_pick). */
#define NS_HELD_TAG "nightshift/held/v1"
#define NS_HELD_PIECES 8
#define NS_HELD_PIECE_BYTES 256

typedef struct {
    ns_hash_t hash; /* BLAKE2b-256 of the input's bytes */
    uint64_t size;
} ns_ann_input_t;

/* What a bid says besides its signed fields (the envelope's signature
 * covers it): the provider's state when it bid. */
typedef struct {
    bool present;        /* the fields were there (older bidders: not) */
    uint32_t free_slots; /* workers free now: 0 = busy, would queue */
    uint32_t mask;       /* announced inputs held: bit i = input i */
    ns_hash_t proof;     /* of possession of those (zeros for mask 0) */
} ns_bid_ext_t;

/* What a job needs from a provider. */
typedef struct {
    uint64_t min_mem_bytes;              /* global memory of the device */
    uint32_t device_type;                /* 0 any, NS_DEV_CPU, NS_DEV_GPU */
    uint32_t min_cl_major, min_cl_minor; /* OpenCL C version */
    char region[NS_MAX_REGION + 1];      /* "" = any */
    /* What the job's buffers need of a device; set by the requester from
     * the job itself, so a provider never accepts a job whose buffers it
     * cannot allocate. */
    uint64_t max_buffer_bytes; /* the largest buffer: <= max allocation */
    uint64_t buffer_bytes;     /* all buffers together: <= global memory */
} ns_reqs_t;

typedef struct {
    ns_hash_t job_id;  /* the market's (and ledger's) id of this job */
    ns_hash_t desc_id; /* ns_job_id of the descriptor it will send */
    uint8_t requester[NS_ID_BYTES];
    char endpoint[NS_ENDPOINT_MAX]; /* where the requester is reached: a
                                       contact (ns_contact_check) */
    ns_reqs_t reqs;
    uint64_t max_price;  /* micro-credits for the whole job */
    uint64_t collateral; /* micro-credits a provider locks */
    uint64_t work_flops; /* requester's estimate */
    uint64_t n_items;
    uint64_t input_bytes; /* sum of the inputs */
    uint32_t bid_window_ms;
    uint64_t deadline_ms; /* wall clock: result due */
    uint32_t round;       /* 1 for the first auction */
    uint32_t n_excluded;
    uint8_t excluded[NS_MAX_EXCLUDED][NS_ID_BYTES];
    uint32_t n_inputs; /* distinct IN contents, by hash (NS_MAX_ANN_INPUTS);
                          absent on the wire from older requesters */
    ns_ann_input_t inputs[NS_MAX_ANN_INPUTS];
    uint32_t draw; /* the bidder draw (ns_bid_drawn): the share of the
                      qualified providers asked to bid, in 2^-32 units;
                      0 (absent on the wire) or NS_DRAW_ALL: all of them */
} ns_announce_t;

/* ---- bids from a bounded set (docs/PROTOCOL.md, "Bids from a bounded
 * set") ----------------------------------------------------------------
 * A job that many providers could take asks only a drawn share of them to
 * bid, so a job gets a few tens of bids however many providers match, and
 * the requester checks that many signatures. The draw is a hash of the
 * job, the round and the provider, which nobody can steer (the job id
 * holds the requester's nonce, fixed before the round; the provider's id
 * is its key): every provider is drawn for the same share of jobs, and a
 * round without a usable bid is announced again with a wider draw. */
#define NS_DRAW_ALL UINT32_MAX

/* Whether provider is drawn to bid in round of job under draw (0 or
 * NS_DRAW_ALL: everyone). */
bool ns_bid_drawn(const ns_hash_t job_id, uint32_t round,
                  const uint8_t provider[NS_ID_BYTES], uint32_t draw);
/* The draw that asks about target of qualified providers (NS_DRAW_ALL
 * when qualified <= target, or target is 0). */
uint32_t ns_bid_draw_for(uint32_t qualified, uint32_t target);

/* Read n bytes of announced input i at off into buf: NS_OK, or an error
 * (the proof then fails). */
typedef int (*ns_held_read_fn)(void *user, uint32_t i, uint64_t off,
                               uint8_t *buf, size_t n);
/* The proof of possession of the inputs in mask (above). NS_ERR_INVAL for
 * a mask naming an input beyond the announcement's; a reader's error. */
int ns_held_proof(const ns_announce_t *a, const uint8_t provider[NS_ID_BYTES],
                  uint32_t mask, ns_held_read_fn read, void *user,
                  ns_hash_t proof) NS_MUST_CHECK;
/* Bytes of the inputs in mask (0 for bits beyond the announcement). */
uint64_t ns_held_bytes(const ns_announce_t *a, uint32_t mask);

int ns_announce_encode(const ns_announce_t *a, ns_buf_t *out) NS_MUST_CHECK;
int ns_announce_decode(const uint8_t *buf, size_t len,
                       ns_announce_t *a) NS_MUST_CHECK;
/* MKT_BID: the signed bid's six fields, then, when ext is given and
 * present, free_slots (uint), mask (uint) and proof (bin 32). ext (may be
 * NULL) gets them (all zero, present false, when the bid has only six). */
int ns_bid_encode(const ns_bid_t *b, const ns_bid_ext_t *ext,
                  ns_buf_t *out) NS_MUST_CHECK;
int ns_bid_decode(const uint8_t *buf, size_t len, ns_bid_t *b,
                  ns_bid_ext_t *ext) NS_MUST_CHECK;

typedef struct {
    ns_hash_t job_id;
    uint32_t blob;
    uint64_t offset;
    uint64_t total;      /* CHUNK: size of the whole blob */
    uint32_t len;        /* FETCH: bytes wanted */
    const uint8_t *data; /* CHUNK: borrowed */
    size_t data_len;
} ns_chunk_t;

int ns_fetch_encode(const ns_chunk_t *c, ns_buf_t *out) NS_MUST_CHECK;
int ns_fetch_decode(const uint8_t *buf, size_t len,
                    ns_chunk_t *c) NS_MUST_CHECK;
int ns_chunk_encode(const ns_chunk_t *c, ns_buf_t *out) NS_MUST_CHECK;
int ns_chunk_decode(const uint8_t *buf, size_t len,
                    ns_chunk_t *c) NS_MUST_CHECK;

/* AWARDED: [job_id, JOB entry, AWARD entry], the requester's two ledger
 * entries (encoded as in the ledger) handed to the winner so it can accept
 * before gossip brings them. Entries are borrowed from the buffer. The
 * entries' contents are checked by the ledger when the provider ingests
 * them, not here. */
typedef struct {
    ns_hash_t job_id;
    const uint8_t *job_entry; /* borrowed */
    size_t job_entry_len;
    const uint8_t *award_entry; /* borrowed */
    size_t award_entry_len;
} ns_awarded_t;

int ns_awarded_encode(const ns_awarded_t *a, ns_buf_t *out) NS_MUST_CHECK;
int ns_awarded_decode(const uint8_t *buf, size_t len,
                      ns_awarded_t *a) NS_MUST_CHECK;

/* FAILED: why a job failed on the provider, signed by it so that the
 * requester (and, inside a CANCEL entry, every node) can hold it to it.
 * Signature over "nightshift/failed/v1" || network_id || job_id ||
 * award_id || kind (u32 BE) || timestamp_ms (u64 BE) || reason. */
typedef enum {
    NS_FAIL_OTHER = 0,
    NS_FAIL_BUILD = 1,   /* the kernel does not build */
    NS_FAIL_ARGS = 2,    /* arguments do not fit the kernel or the job */
    NS_FAIL_CRASH = 3,   /* the kernel crashed the runtime */
    NS_FAIL_TIMEOUT = 4, /* ran past its limit */
    NS_FAIL_MEMORY = 5,  /* out of device or host memory */
    NS_FAIL_INPUT = 6,   /* inputs could not be fetched or did not match */
} ns_fail_kind;
#define NS_FAIL_KIND_MAX 6
#define NS_MAX_FAIL_REASON 240 /* bytes of reason text */

typedef struct {
    ns_hash_t job_id;
    ns_hash_t award_id; /* the award the provider failed under */
    uint8_t provider[NS_ID_BYTES];
    uint32_t kind; /* ns_fail_kind */
    uint64_t timestamp_ms;
    char reason[NS_MAX_FAIL_REASON + 1]; /* one line, NUL-terminated */
    uint8_t sig[NS_SIG_BYTES];
} ns_failure_t;

const char *ns_fail_kind_name(uint32_t kind);
/* Whether a failure of this kind can be the job's own fault (and so be
 * reproduced on the requester's device). */
bool ns_fail_kind_is_jobs(uint32_t kind);
void ns_failure_sign(ns_failure_t *f, const ns_identity_t *provider,
                     const ns_hash_t network_id);
int ns_failure_verify(const ns_failure_t *f,
                      const ns_hash_t network_id) NS_MUST_CHECK;
int ns_failure_encode(const ns_failure_t *f, ns_buf_t *out) NS_MUST_CHECK;
/* Strict; the reason must be printable text without newlines. */
int ns_failure_decode(const uint8_t *buf, size_t len,
                      ns_failure_t *f) NS_MUST_CHECK;

/* CHAL / CHAL_DONE: a hardware challenge of the device a provider claims
 * (challenge.h): a memory labelling of label_bytes (Merkle root, then k
 * openings at positions drawn from H(root || seed)) and an integer
 * product of order imatmul_n (C, hashed). The time from CHAL to
 * CHAL_DONE is held against deadlines from the claimed figures. */
typedef struct {
    ns_hash_t nonce;      /* names it; the answer's blob is fetched by it */
    uint32_t device;      /* the claimed device (heartbeat index) */
    uint64_t label_bytes; /* 0 = no labelling */
    uint32_t label_segments;
    uint32_t k;         /* label openings */
    uint32_t imatmul_n; /* 0 = no product */
    uint8_t seed[32];
} ns_chal_msg_t;

typedef struct {
    ns_hash_t nonce;
    int32_t status;        /* NS_OK, or why it could not answer */
    ns_hash_t label_root;  /* the labelling's Merkle root */
    ns_hash_t c_hash;      /* BLAKE2b of C's bytes */
    uint64_t answer_bytes; /* size of the blob: label answer then C */
    uint64_t label_answer_bytes;
} ns_chal_done_t;

#define NS_CHAL_MAX_LABEL_BYTES (UINT64_C(1) << 32) /* 4 GiB per test */
#define NS_CHAL_MAX_IMATMUL_N 2048

int ns_chal_msg_encode(const ns_chal_msg_t *c, ns_buf_t *out) NS_MUST_CHECK;
int ns_chal_msg_decode(const uint8_t *buf, size_t len,
                       ns_chal_msg_t *c) NS_MUST_CHECK;
int ns_chal_done_encode(const ns_chal_done_t *d, ns_buf_t *out) NS_MUST_CHECK;
int ns_chal_done_decode(const uint8_t *buf, size_t len,
                        ns_chal_done_t *d) NS_MUST_CHECK;

/* ---- offers ----------------------------------------------------------- */

/* What a provider offers: its devices, price, stake, region and free job
 * slots. Heartbeats carry it (ns_offer_from_heartbeat); the provider
 * builds its own from its settings; the requirement check reads it. */
typedef struct {
    const ns_devinfo_t *devices; /* borrowed */
    uint32_t n_devices;
    uint64_t price;      /* micro-credits per device-second */
    uint64_t stake;      /* micro-credits staked in the ledger */
    uint32_t free_slots; /* jobs it can start now */
    const char *region;  /* borrowed, "" = none */
} ns_offer_t;

/* A view of a heartbeat's offer (borrows from hb). */
void ns_offer_from_heartbeat(ns_offer_t *o, const ns_heartbeat_t *hb);

/* ---- decisions -------------------------------------------------------- */

/* Requirement checks, one bit per failing requirement. */
enum {
    NS_REQ_MEMORY = 1 << 0,
    NS_REQ_DEVICE_TYPE = 1 << 1,
    NS_REQ_CL_VERSION = 1 << 2,
    NS_REQ_REGION = 1 << 3,
    NS_REQ_STAKE = 1 << 4,
    NS_REQ_PRICE = 1 << 5,
    NS_REQ_SLOTS = 1 << 6,
    NS_REQ_BUFFERS = 1 << 7, /* a buffer exceeds the largest allocation,
                                or all of them the device's memory */
};
#define NS_REQ_COUNT 8

/* Which requirements a provider's offer fails (0 = qualifies), with its
 * best device in *device (index) when it qualifies. */
uint32_t ns_reqs_check(const ns_reqs_t *r, const ns_offer_t *o,
                       uint64_t collateral, uint64_t max_price,
                       uint64_t work_flops, uint32_t *device);
/* "memory >= 16.0 GiB" etc., for the requester's explanation. */
void ns_reqs_describe(const ns_reqs_t *r, uint32_t bit, uint64_t collateral,
                      uint64_t max_price, char *out, size_t cap);

/* A provider's price for a job, in micro-credits: its price per
 * device-second (micro-credits) times the estimated seconds on its
 * device, rounded up to the micro-credit, at least 1. */
uint64_t ns_price_quote(uint64_t price_micro_per_s, uint64_t work_flops,
                        double device_gflops, uint64_t *est_ms);

/* Reputation from the ledger: settled jobs count for, slashes and
 * cancellations against. Higher is better. */
int64_t ns_reputation(const ns_account_t *a);

/* Whether a provider takes jobs from this requester (policy.h: requesters
 * that post and never settle are refused). */
bool ns_requester_acceptable(const ns_account_t *requester);

/* Standing from the ledger, for ranking near-equal bids: slashes and
 * cancellations against, banned last. Settled jobs do not count, or the
 * provider that won first would win every tie after. Higher is better. */
int64_t ns_standing(const ns_account_t *a);

/* What the requester knows of each bid besides the bid itself. */
typedef struct {
    int64_t standing;    /* ns_standing of the provider */
    bool free;           /* no heartbeat of it said "no free slot" */
    uint64_t arrival_us; /* when the bid arrived (mono): the round trip */
    bool linked;         /* a live peer of ours when the job was announced:
                            only then is the arrival a round trip (a new
                            link's bid also waited for its handshake) */
    uint64_t held_bytes; /* input bytes it proved it holds (ns_bid_ext_t) */
} ns_bid_rank_t;

/* The reverse auction: index of the winning bid among n, or -1. Cheapest
 * price; near-ties (within 1%) go to a provider not known to be busy, then
 * to the one holding more of the job's input bytes (in whole
 * NS_POLICY_HELD_BUCKET_BYTES), then to the better standing, then to the
 * earlier bid (arrival in NS_POLICY_RTT_BUCKET_US buckets: a round trip, not
 * noise; only between two bidders both linked to us before the
 * announcement), then to the lowest H(job id || provider), which spreads equal
 * providers evenly over jobs. Excluded providers and bids over max_price never
 * win. */
int ns_auction_pick(const ns_bid_t *bids, const ns_bid_rank_t *rank, uint32_t n,
                    uint64_t max_price, const ns_announce_t *a);

#endif
