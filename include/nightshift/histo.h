/* histo.h - a duration histogram with fixed buckets, for status and
 * metrics (Prometheus histograms: cumulative counts by upper bound).
 *
 * Caller-owned, zero-initialised ({0} is an empty histogram); no
 * allocation. Not thread-safe (a node's loop owns its histograms).
 */
#ifndef NIGHTSHIFT_HISTO_H
#define NIGHTSHIFT_HISTO_H

#include <msgpack.h>
#include <stdint.h>

/* Upper bounds in seconds: 5 ms .. 10 min, then +Inf (the count). */
#define NS_HISTO_BUCKETS 14
extern const double ns_histo_bounds_s[NS_HISTO_BUCKETS];

typedef struct {
    uint64_t counts[NS_HISTO_BUCKETS]; /* observations <= bound, not
                                          cumulative */
    uint64_t count;                    /* all observations */
    uint64_t sum_us;                   /* their sum, microseconds */
} ns_histo_t;

/* Record one duration, in microseconds. */
void ns_histo_add_us(ns_histo_t *h, uint64_t us);

/* As a msgpack map {"le": [bounds, s], "counts": [cumulative], "count",
 * "sum_s"}: the shape of every *_seconds section of `status --json`. */
void ns_histo_pack(const ns_histo_t *h, msgpack_packer *pk);

#endif
