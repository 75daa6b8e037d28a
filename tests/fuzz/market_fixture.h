/* market_fixture.h - what fuzz_market.c and gen_market_corpus.c share: the
 * network id bids are signed for, so the stored bids verify in every run.
 */
#ifndef NIGHTSHIFT_TESTS_MARKET_FIXTURE_H
#define NIGHTSHIFT_TESTS_MARKET_FIXTURE_H

#include "nightshift/hash.h"

static inline void fuzz_market_network(ns_hash_t id)
{
    static const char tag[] = "nightshift-fuzz-market-network";
    ns_hash(id, tag, sizeof tag - 1);
}

#endif
