/* genesis.h - a network's genesis file and its id.
 *
 * The genesis is an INI text file:
 *
 *   [network]
 *   name = local-testnet        ; 1..64 printable characters
 *   test_network = true         ; allows fault injection flags
 *   created_ms = 1763700000000
 *   close_window_ms = 60000     ; optional: how long after a job's deadline
 *                               ; its requester may still settle, slash or
 *                               ; cancel an award before the provider may
 *                               ; close it (docs/PROTOCOL.md, "Closing");
 *                               ; NS_GENESIS_CLOSE_WINDOW_MS when left out
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
#include "nightshift/mp.h"

#include <stdbool.h>
#include <stdint.h>

#define NS_MAX_GENESIS_BYTES (1024 * 1024)
#define NS_MAX_GENESIS_ALLOCS 4096
#define NS_MAX_NETWORK_NAME 64
#define NS_MAX_SUPPLY (UINT64_C(1) << 62) /* total cap, micro-credits */
/* The close window when the genesis names none, and its bounds. */
#define NS_GENESIS_CLOSE_WINDOW_MS (UINT64_C(10) * 60 * 1000)
#define NS_GENESIS_CLOSE_WINDOW_MIN_MS UINT64_C(1000)
#define NS_GENESIS_CLOSE_WINDOW_MAX_MS (UINT64_C(7) * 24 * 3600 * 1000)

typedef struct {
    uint8_t id[NS_ID_BYTES];
    uint64_t micro; /* micro-credits */
} ns_alloc_t;

typedef struct {
    ns_hash_t network_id; /* hash of the file bytes */
    char name[NS_MAX_NETWORK_NAME + 1];
    bool test_network;
    uint64_t created_ms;
    uint64_t close_window_ms; /* as written; 0: not in the file */
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

/* The close window the network runs with: the file's, or the default. */
uint64_t ns_genesis_close_window_ms(const ns_genesis_t *g);

/* Write a genesis file (text form above); close_window_ms 0 leaves the
 * key out (the default applies). */
int ns_genesis_write(const char *path, const char *name, bool test_network,
                     uint64_t created_ms, const ns_alloc_t *allocs,
                     uint32_t n) NS_MUST_CHECK;
int ns_genesis_write_window(const char *path, const char *name,
                            bool test_network, uint64_t created_ms,
                            uint64_t close_window_ms, const ns_alloc_t *allocs,
                            uint32_t n) NS_MUST_CHECK;

/* ---- the genesis over the wire (docs/PROTOCOL.md, "Genesis transfer") --
 *
 * `init --join` asks a bootstrap peer for its genesis in chunks:
 *   GENESIS_REQ  [offset uint]                      (offset < total)
 *   GENESIS      [network_id bin(32), total uint, offset uint, bytes bin]
 * Every chunk but the last holds exactly NS_GENESIS_CHUNK bytes, the last
 * the rest: the sizes follow from total and offset, so an answer cannot
 * make the asker keep more than NS_MAX_GENESIS_BYTES. The asker checks
 * the whole file's hash against the network id it was given. */
#define NS_MSG_GENESIS_REQ 12
#define NS_MSG_GENESIS 13
#define NS_GENESIS_CHUNK (128 * 1024) /* bytes per GENESIS answer */

typedef struct {
    ns_hash_t network_id; /* the answerer's: hash of its whole file */
    uint32_t total;       /* file bytes, 1..NS_MAX_GENESIS_BYTES */
    uint32_t offset;      /* of this chunk, < total, a multiple of CHUNK */
    const uint8_t *bytes; /* borrowed from the decoded buffer */
    uint32_t len;         /* min(NS_GENESIS_CHUNK, total - offset) */
} ns_genesis_chunk_t;

/* out is emptied first. NS_ERR_INVAL for an offset at or past
 * NS_MAX_GENESIS_BYTES or not a multiple of NS_GENESIS_CHUNK. */
int ns_genesis_req_encode(uint32_t offset, ns_buf_t *out) NS_MUST_CHECK;
/* Strict: exactly [uint], offset as above (NS_ERR_INVAL otherwise). */
int ns_genesis_req_decode(const uint8_t *buf, size_t len,
                          uint32_t *offset) NS_MUST_CHECK;
/* NS_ERR_INVAL for a chunk that breaks the rules above. */
int ns_genesis_chunk_encode(const ns_genesis_chunk_t *c,
                            ns_buf_t *out) NS_MUST_CHECK;
/* Strict decode; c->bytes borrows from buf. NS_ERR_INVAL for a total,
 * offset or length that breaks the rules above. */
int ns_genesis_chunk_decode(const uint8_t *buf, size_t len,
                            ns_genesis_chunk_t *c) NS_MUST_CHECK;
/* The chunk of the file text[0..total) at offset (offset < total, a
 * multiple of NS_GENESIS_CHUNK), for the answerer. */
void ns_genesis_chunk_at(const ns_hash_t network_id, const uint8_t *text,
                         uint32_t total, uint32_t offset,
                         ns_genesis_chunk_t *c);

#endif
