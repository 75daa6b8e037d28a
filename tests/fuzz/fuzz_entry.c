/* fuzz_entry.c - libFuzzer target for ledger entries: decode an entry
 * (fixed network id), decode its body, ingest it into a real LMDB ledger,
 * and check after every entry that the genesis total is conserved and no
 * balance wrapped. Built with -fsanitize=fuzzer,address,undefined as
 * `fuzz_entry` (clang, NS_FUZZ=ON) and, with replay.c, as
 * `fuzz_entry_replay`, which ctest runs over tests/fuzz/corpus/entry.
 *
 * Input (entry_fixture.h): a flags byte, then [u16 length][entry] records,
 * all ingested in order into a ledger reset to the genesis for each input
 * (so a crash reproduces from its input alone). The whole input is tried
 * as one entry first. Entries are signed by fixed test keys; with
 * FUZZ_RESIGN an entry of such a key whose signature no longer verifies
 * (the fuzzer changed it) is signed again, and with FUZZ_RESIGN_BID so is
 * the provider's bid inside an AWARD, so mutations reach the ledger's
 * rules instead of stopping at the signature check.
 *
 * Besides "no crash, no leak": decoded pointers stay inside the input,
 * caps hold, a body decodes to the same value after encode(decode(x)), a
 * re-signed entry decodes to the same id, and ns_ledger_check_conservation
 * holds after every ingest and after the commit.
 *
 * The ledger lives in a directory created once on tmpfs (/dev/shm when it
 * is there, else $TMPDIR or /tmp) and removed at exit. FUZZ_ENTRY_VERBOSE=1
 * prints what happened to each entry (to read a crashing input).
 */
#include "entry_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_MAX_RECORDS 256 /* entries per input */

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_entry: %s:%d: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static struct {
    bool ready;
    char dir[1024];    /* created once */
    char ledger[1100]; /* dir/ledger */
    ns_identity_t *keys[FUZZ_KEYS];
    ns_genesis_t genesis;
    ns_ledger_t *l;
    bool verbose;
} S;

/* p[0..n) lies inside data[0..size). */
static bool s_inside(const uint8_t *p, size_t n, const uint8_t *data,
                     size_t size)
{
    return p >= data && (size_t)(p - data) <= size &&
           n <= size - (size_t)(p - data);
}

static void s_remove_ledger(void)
{
    char path[1200];
    static const char *const files[] = {"data.mdb", "lock.mdb"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", S.ledger, files[i]);
        unlink(path);
    }
}

static void s_cleanup(void)
{
    ns_ledger_close(&S.l);
    s_remove_ledger();
    rmdir(S.ledger);
    rmdir(S.dir);
    for (uint32_t i = 0; i < FUZZ_KEYS; i++)
        ns_identity_destroy(&S.keys[i]);
    ns_genesis_release(&S.genesis);
}

static void s_init(void)
{
    S_ASSERT(sodium_init() >= 0);
    const char *base = "/dev/shm";
    struct stat st;
    if (stat(base, &st) != 0 || !S_ISDIR(st.st_mode) ||
        access(base, W_OK) != 0) {
        base = getenv("TMPDIR");
        if (!base || !*base)
            base = "/tmp";
    }
    snprintf(S.dir, sizeof S.dir, "%s/ns-fuzz-entry-XXXXXX", base);
    S_ASSERT(mkdtemp(S.dir) != NULL);
    snprintf(S.ledger, sizeof S.ledger, "%s/ledger", S.dir);
    for (uint32_t i = 0; i < FUZZ_KEYS; i++)
        S_ASSERT((S.keys[i] = fuzz_key(S.dir, i)) != NULL);
    S_ASSERT(fuzz_genesis(S.keys, &S.genesis) == NS_OK);
    const char *v = getenv("FUZZ_ENTRY_VERBOSE");
    S.verbose = v && *v && *v != '0';
    S.ready = true;
    atexit(s_cleanup);
}

/* A ledger holding only the genesis. */
static void s_reset(void)
{
    char err[256] = "";
    int rc = NS_OK;
    ns_ledger_close(&S.l);
    s_remove_ledger();
    S.l = ns_ledger_open(S.ledger, &S.genesis, &rc, err, sizeof err);
    if (!S.l)
        fprintf(stderr, "fuzz_entry: open: %s: %s\n", ns_errname(rc), err);
    S_ASSERT(S.l != NULL);
    ns_ledger_set_verifier(S.l, fuzz_verifier, NULL);
}

static int s_key_of(const uint8_t *pk)
{
    for (int i = 0; i < FUZZ_KEYS; i++)
        if (memcmp(ns_identity_pk(S.keys[i]), pk, NS_ID_BYTES) == 0)
            return i;
    return -1;
}

/* Conservation, and nothing wrapped below zero. */
static void s_check_ledger(void)
{
    uint64_t sum = 0, total = S.genesis.total_micro;
    int rc = ns_ledger_check_conservation(S.l, &sum);
    if (rc != NS_OK)
        fprintf(stderr, "fuzz_entry: conservation: %s, sum %llu, total %llu\n",
                ns_errname(rc), (unsigned long long)sum,
                (unsigned long long)total);
    S_ASSERT(rc == NS_OK && sum == total);
    ns_ledger_stats_t st;
    ns_ledger_stats(S.l, &st);
    S_ASSERT(st.total == total && st.burned <= total &&
             st.pending_credit <= total);
    for (uint32_t i = 0; i < FUZZ_KEYS; i++) {
        ns_account_t a;
        S_ASSERT(ns_ledger_account(S.l, ns_identity_pk(S.keys[i]), &a) ==
                 NS_OK);
        S_ASSERT(a.free <= total && a.staked <= total &&
                 a.locked_escrow <= total && a.locked_collateral <= total);
    }
}

/* decode(encode(b)) == b */
static void s_body_round_trip(const ns_entry_t *e, const ns_entry_body_t *b)
{
    ns_buf_t out;
    ns_entry_body_t again;
    ns_buf_init(&out);
    S_ASSERT(ns_entry_body_encode(e->type, b, &out) == NS_OK);
    ns_entry_t e2 = *e;
    e2.body = out.data;
    e2.body_len = out.len;
    S_ASSERT(ns_entry_body_decode(&e2, &again) == NS_OK);
    S_ASSERT(again.proof_len == b->proof_len);
    S_ASSERT(b->proof_len == 0 ||
             memcmp(again.proof, b->proof, b->proof_len) == 0);
    ns_entry_body_t x = *b;
    x.proof = NULL;
    again.proof = NULL;
    S_ASSERT(memcmp(&x, &again, sizeof x) == 0);
    ns_buf_release(&out);
}

/* The fixed key's signature over e again (and over its bid, if asked).
 * NS_OK with the new encoding in out, or an error if not ours. */
static int s_resign(const ns_entry_t *e, int sig_rc, uint8_t flags,
                    ns_buf_t *out)
{
    int k = s_key_of(e->author);
    if (k < 0)
        return NS_ERR_SIG;
    const uint8_t *body = e->body;
    size_t body_len = e->body_len;
    bool changed = sig_rc == NS_ERR_SIG && (flags & FUZZ_RESIGN);
    ns_buf_t nb;
    ns_buf_init(&nb);
    ns_entry_body_t b;
    int pk;
    if ((flags & FUZZ_RESIGN_BID) && e->type == NS_ENTRY_AWARD &&
        ns_entry_body_decode(e, &b) == NS_OK &&
        (pk = s_key_of(b.bid.provider)) >= 0 &&
        ns_bid_verify(&b.bid, S.genesis.network_id) != NS_OK) {
        ns_bid_sign(&b.bid, S.keys[pk], S.genesis.network_id);
        S_ASSERT(ns_bid_verify(&b.bid, S.genesis.network_id) == NS_OK);
        S_ASSERT(ns_entry_body_encode(e->type, &b, &nb) == NS_OK);
        body = nb.data;
        body_len = nb.len;
        changed = true;
    }
    int rc = NS_ERR_SIG;
    if (changed) {
        ns_hash_t id;
        ns_entry_t again;
        rc = ns_entry_encode(S.keys[k], S.genesis.network_id, e->seq, e->prev,
                             e->type, body, body_len, e->refs, e->n_refs,
                             e->timestamp_ms, out, id);
        if (rc == NS_OK) {
            S_ASSERT(ns_entry_decode(out->data, out->len, S.genesis.network_id,
                                     &again) == NS_OK);
            S_ASSERT(memcmp(again.id, id, NS_HASH_BYTES) == 0);
            S_ASSERT(again.seq == e->seq && again.type == e->type &&
                     again.n_refs == e->n_refs &&
                     again.timestamp_ms == e->timestamp_ms);
        }
    }
    ns_buf_release(&nb);
    return rc;
}

static void s_entry(const uint8_t *p, size_t n, uint8_t flags)
{
    ns_entry_t e;
    ns_entry_body_t b;
    ns_buf_t resigned;
    ns_buf_init(&resigned);
    const uint8_t *in = p;
    size_t in_len = n;
    int rc = ns_entry_decode(p, n, S.genesis.network_id, &e);
    if (rc == NS_OK || rc == NS_ERR_SIG) {
        /* every field was read: what decode promises holds */
        S_ASSERT(n <= NS_MAX_ENTRY_BYTES);
        S_ASSERT(e.type >= 1 && e.type <= NS_ENTRY_TYPE_MAX);
        S_ASSERT(e.seq >= 1);
        S_ASSERT(e.body_len <= NS_MAX_ENTRY_BODY);
        S_ASSERT(e.body_len == 0 || s_inside(e.body, e.body_len, p, n));
        S_ASSERT(e.n_refs <= NS_MAX_REFS);
        S_ASSERT(e.n_refs == 0 ||
                 s_inside(e.refs, (size_t)e.n_refs * NS_HASH_BYTES, p, n));
        if (ns_entry_body_decode(&e, &b) == NS_OK) {
            S_ASSERT(b.proof_len == 0 ||
                     s_inside(b.proof, b.proof_len, e.body, e.body_len));
            s_body_round_trip(&e, &b);
        }
        if (flags & (FUZZ_RESIGN | FUZZ_RESIGN_BID) &&
            s_resign(&e, rc, flags, &resigned) == NS_OK) {
            in = resigned.data;
            in_len = resigned.len;
        }
    }
    uint8_t author[NS_ID_BYTES];
    uint64_t missing_seq = 0;
    rc = ns_ledger_ingest(S.l, in, in_len, author, &missing_seq);
    S_ASSERT(rc <= 0 && rc > -NS_ERR_COUNT);
    if (S.verbose) {
        ns_ledger_stats_t st;
        ns_ledger_stats(S.l, &st);
        fprintf(stderr,
                "fuzz_entry: %zu bytes%s: %s (entries %llu, buffered %u, "
                "burned %llu)\n",
                n, in == p ? "" : " re-signed", ns_errname(rc),
                (unsigned long long)st.entries, st.buffered,
                (unsigned long long)st.burned);
    }
    if (rc == NS_ERR_GAP)
        S_ASSERT(missing_seq >= 1);
    s_check_ledger();
    ns_buf_release(&resigned);
}

/* Each record in a buffer of its exact size, so ASan sees any read past
 * its end. */
static void s_record(const uint8_t *p, size_t n, uint8_t flags)
{
    uint8_t *copy = malloc(n ? n : 1);
    S_ASSERT(copy != NULL);
    if (n)
        memcpy(copy, p, n);
    s_entry(copy, n, flags);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!S.ready)
        s_init();
    s_reset();
    s_entry(data, size, 0);
    if (size > 0) {
        uint8_t flags = data[0];
        size_t o = 1;
        for (int records = 0; o < size && records < S_MAX_RECORDS; records++) {
            size_t n = size - o; /* under 2 bytes left: one record */
            if (n >= 2) {
                n = (size_t)data[o] << 8 | data[o + 1];
                o += 2;
                if (n > size - o)
                    n = size - o;
            }
            s_record(data + o, n, flags);
            o += n;
        }
    }
    S_ASSERT(ns_ledger_commit(S.l) == NS_OK);
    s_check_ledger();
    /* what was committed opens again and still conserves */
    if (size > 0 && (data[0] & 0x04)) {
        ns_ledger_close(&S.l);
        char err[256] = "";
        int rc = NS_OK;
        S.l = ns_ledger_open(S.ledger, &S.genesis, &rc, err, sizeof err);
        S_ASSERT(S.l != NULL);
        s_check_ledger();
    }
    return 0;
}
