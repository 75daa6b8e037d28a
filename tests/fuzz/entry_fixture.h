/* entry_fixture.h - what fuzz_entry.c and gen_entry_corpus.c share: the
 * fixed test keys, the genesis that funds them, and the input format.
 *
 * Keys: FUZZ_KEYS identities from fixed, public seeds (test keys only), so
 * the stored corpus stays valid: entries signed by them verify in every
 * run, and the harness can re-sign what the fuzzer changed.
 *
 * Input: one flags byte, then records of [u16 big-endian length][entry];
 * a last record shorter than its length takes what is left. The whole
 * input is also tried as one entry first, so a bare entry is an input too.
 */
#ifndef NIGHTSHIFT_TESTS_ENTRY_FIXTURE_H
#define NIGHTSHIFT_TESTS_ENTRY_FIXTURE_H

#include "nightshift/genesis.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_KEYS 4
#define FUZZ_CREDITS 100000 /* genesis allocation of each key */
#define FUZZ_T0_MS UINT64_C(1800000000000)

/* flags (the input's first byte) */
#define FUZZ_RESIGN 0x01 /* re-sign entries of a fixed key whose sig fails */
#define FUZZ_RESIGN_BID 0x02 /* re-sign AWARD bids of a fixed key */

/* Identity i from its fixed seed, through a key file written in dir. */
static inline ns_identity_t *fuzz_key(const char *dir, uint32_t i)
{
    static const char tag[] = "nightshift-fuzz-entry-key";
    uint8_t in[sizeof tag + 4], seed[NS_HASH_BYTES];
    char hex[2 * NS_HASH_BYTES + 1], path[4096], text[96];
    memcpy(in, tag, sizeof tag);
    memcpy(in + sizeof tag, &i, 4);
    ns_hash(seed, in, sizeof in);
    ns_hex(hex, seed, sizeof seed);
    int n = snprintf(path, sizeof path, "%s/fuzz-key-%u", dir, i);
    int t = snprintf(text, sizeof text, "nightshift-key-v1 %s\n", hex);
    if (n < 0 || (size_t)n >= sizeof path || t < 0 || (size_t)t >= sizeof text)
        return NULL;
    unlink(path);
    FILE *f = fopen(path, "wx");
    ns_identity_t *id = NULL;
    if (f) {
        bool ok = fchmod(fileno(f), 0600) == 0 &&
                  fwrite(text, 1, (size_t)t, f) == (size_t)t;
        if (fclose(f) == 0 && ok && ns_identity_load(path, &id) != NS_OK)
            id = NULL;
        unlink(path);
    }
    return id;
}

/* The genesis funding the fixed keys (parsed into g). */
static inline int fuzz_genesis(ns_identity_t *const *keys, ns_genesis_t *g)
{
    char text[1024], err[256];
    size_t len = (size_t)snprintf(text, sizeof text,
                                  "[network]\nname = fuzz-entry\n"
                                  "test_network = true\n"
                                  "created_ms = 1763700000000\n[alloc]\n");
    for (uint32_t i = 0; i < FUZZ_KEYS; i++) {
        char id[NS_ID_TEXT_LEN + 1];
        ns_id_text(id, ns_identity_pk(keys[i]));
        char amount[NS_CREDITS_TEXT]; /* FUZZ_CREDITS micro-credits */
        len += (size_t)snprintf(text + len, sizeof text - len, "%s = %s\n", id,
                                ns_credits_fmt(amount, FUZZ_CREDITS));
    }
    return ns_genesis_parse((const uint8_t *)text, len, g, err, sizeof err);
}

/* The verifier the harness installs: a proof that starts with 1 shows
 * fraud, anything else does not. */
static inline int fuzz_verifier(void *user, const ns_ledger_job_t *job,
                                const uint8_t *provider, const ns_hash_t root,
                                uint64_t n_items, const uint8_t *proof,
                                size_t len, uint8_t missing[NS_HASH_BYTES])
{
    (void)missing;
    (void)user;
    (void)job;
    (void)provider;
    (void)root;
    (void)n_items;
    return len > 0 && proof[0] == 1 ? NS_OK : NS_ERR_PROOF;
}

#endif
