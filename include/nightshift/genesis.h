/* genesis.h - a network's genesis file and its id.
 *
 * The genesis is an INI text file:
 *
 *   [network]
 *   name = local-testnet        ; 1..64 printable characters
 *   test_network = true         ; allows fault injection flags
 *   created_ms = 1763700000000
 *   [alloc]
 *   <node id> = <credits>       ; one line per funded account: credits,
 *                               ; up to six decimals (micro-credits)
 *
 * The network id is BLAKE2b-256 of the file's exact bytes, so every node
 * must hold the identical file (nodes copy it into their datadir).
 */
#ifndef NIGHTSHIFT_GENESIS_H
#define NIGHTSHIFT_GENESIS_H

#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_GENESIS_BYTES (1024 * 1024)
#define NS_MAX_GENESIS_ALLOCS 4096
#define NS_MAX_NETWORK_NAME 64
#define NS_MAX_SUPPLY (UINT64_C(1) << 62) /* total cap, micro-credits */

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t micro; /* micro-credits */
} ns_alloc_t;

typedef struct {
    ns_hash_t network_id; /* hash of the file bytes */
    char name[NS_MAX_NETWORK_NAME + 1];
    bool test_network;
    uint64_t created_ms;
    uint32_t n_allocs;
    ns_alloc_t *allocs;   /* owned */
    uint64_t total_micro; /* micro-credits */
} ns_genesis_t;

/* Parse and validate. err gets a one-line reason on failure. */
int ns_genesis_parse(const uint8_t *text, size_t len, ns_genesis_t *g,
                     char *err, size_t errlen) NS_MUST_CHECK;
int ns_genesis_load(const char *path, ns_genesis_t *g, char *err,
                    size_t errlen) NS_MUST_CHECK;
void ns_genesis_release(ns_genesis_t *g);

/* Write a genesis file (text form above). */
int ns_genesis_write(const char *path, const char *name, bool test_network,
                     uint64_t created_ms, const ns_alloc_t *allocs,
                     uint32_t n) NS_MUST_CHECK;

#endif
