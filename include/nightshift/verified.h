/* verified.h - what this node learnt from challenging providers' device
 * claims (node layer): a provider that failed a challenge wins no job of
 * ours until it passes one; one that passed is not challenged again for a
 * while. Kept in <datadir>/verified (msgpack, written atomically), so a
 * light peer that submits again remembers. Local knowledge: each
 * requester decides for itself; `peers` shows it. Also the failures a
 * provider reported lately: one that fails often is passed over.
 */
#ifndef NIGHTSHIFT_VERIFIED_H
#define NIGHTSHIFT_VERIFIED_H

#include "nightshift/err.h"
#include "nightshift/identity.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#define NS_VERIFIED_MAX 4096 /* providers remembered (oldest forgotten) */

typedef enum {
    NS_VERIFIED_NONE = 0,
    NS_VERIFIED_PASSED = 1,
    NS_VERIFIED_FAILED = 2,
} ns_verified_state;

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint8_t state;      /* ns_verified_state */
    uint64_t at_ms;     /* wall clock of the verdict */
    char why[96];       /* the verdict's reason, one line */
    uint32_t failures;  /* failures it reported (FAILED) in the window */
    uint64_t window_ms; /* wall clock the window started */
} ns_verified_entry_t;

typedef struct ns_verified ns_verified_t;

/* Load path (a missing or unreadable file starts empty: it is only a
 * cache of verdicts). NULL only when out of memory. */
ns_verified_t *ns_verified_open(const char *path);
void ns_verified_close(ns_verified_t **v);

/* NS_VERIFIED_NONE when unknown. */
uint8_t ns_verified_get(const ns_verified_t *v, const uint8_t id[NS_ID_BYTES],
                        uint64_t *at_ms);
/* Record a verdict and save the file. */
void ns_verified_put(ns_verified_t *v, const uint8_t id[NS_ID_BYTES],
                     uint8_t state, uint64_t at_ms, const char *why);
const char *ns_verified_name(uint8_t state); /* "passed", "failed", "-" */

/* A provider reported that a job of ours failed on its side (not the
 * job's fault): counted in a window of window_ms; returns the count. */
uint32_t ns_verified_note_failure(ns_verified_t *v,
                                  const uint8_t id[NS_ID_BYTES],
                                  uint64_t now_ms, uint64_t window_ms);
/* One hardware challenge at a time per node: a challenge is timed, and
 * several at once (the shards of one job, or many hosted jobs) share the
 * node's CPU and the network and come out late. A requester takes the
 * lease before it challenges (false: another challenge is in flight, try
 * again later) and gives it back with its verdict; a lease not given back
 * expires after lease_ms (a requester stopped mid-challenge). owner is
 * any pointer unique to the taker. */
bool ns_verified_chal_take(ns_verified_t *v, const void *owner, uint64_t now_ms,
                           uint64_t lease_ms);
void ns_verified_chal_give(ns_verified_t *v, const void *owner);

/* Failures in the current window (0 when it is over). */
uint32_t ns_verified_failures(const ns_verified_t *v,
                              const uint8_t id[NS_ID_BYTES], uint64_t now_ms,
                              uint64_t window_ms);

#endif
