/* ledger_fixture.h - what the ledger tests share: a temp directory, a
 * genesis built in memory from generated identities, accounts that keep
 * their own chain (seq, head, clock) and sign entries for it, and
 * snapshots of the whole derived state to compare.
 *
 * Everything here returns values; the checks stay in each test's .c file
 * (check.h counters are per translation unit).
 */
#ifndef NIGHTSHIFT_TESTS_LEDGER_FIXTURE_H
#define NIGHTSHIFT_TESTS_LEDGER_FIXTURE_H

#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/util.h"

#include <dirent.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FX_MAX_ACCOUNTS 64
#define FX_MAX_SNAP_ACCOUNTS 256
#define FX_T0_MS UINT64_C(1800000000000) /* fixture clock start */

typedef struct {
    ns_identity_t *id;
    uint8_t pk[NS_ID_BYTES];
    uint64_t seq;   /* seq of the last entry the ledger took */
    ns_hash_t head; /* its id */
    uint64_t ts;    /* its timestamp_ms */
} fx_acct_t;

typedef struct {
    char dir[512]; /* ledger directory (inside root) */
    char root[512];
    ns_genesis_t genesis;
    ns_ledger_t *l;
    fx_acct_t acct[FX_MAX_ACCOUNTS];
    uint32_t n;
    uint64_t now; /* fixture clock, ms; every entry takes a later tick */
    char err[256];
} fx_t;

/* ---- random -------------------------------------------------------------- */

/* The seed of a randomised test: NS_TEST_SEED, or one from the clock and
 * the pid; printed, with the line that repeats the run. */
static inline uint64_t fx_seed(const char *test)
{
    const char *env = getenv("NS_TEST_SEED");
    uint64_t seed = env && *env
                        ? strtoull(env, NULL, 10)
                        : ((uint64_t)time(NULL) << 16) ^ (uint64_t)getpid();
    printf("%s: seed %llu (NS_TEST_SEED=%llu repeats this run)\n", test,
           (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

/* A number below n (0 when n is 0) from the splitmix64 stream *state. */
static inline uint64_t fx_below(uint64_t *state, uint64_t n)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    return n ? z % n : 0;
}

/* A delivery order of n entries into order (room for 3 n): each entry
 * once to three times, shuffled (a network that duplicates and reorders);
 * with shuffle false, each once in order. Returns its length. */
static inline uint32_t fx_order(uint32_t *order, uint32_t n, uint64_t *rng,
                                bool shuffle)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t c = shuffle ? 1 + (uint32_t)fx_below(rng, 3) : 1; c > 0;
             c--)
            order[m++] = i;
    for (uint32_t i = m ? m - 1 : 0; shuffle && i > 0; i--) {
        uint32_t j = (uint32_t)fx_below(rng, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return m;
}

/* ---- files ------------------------------------------------------------- */

/* rm -r of a test directory (only what the tests create: files, dirs). */
static inline void fx_rmrf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char sub[1024];
            int n = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            if (n > 0 && (size_t)n < sizeof sub)
                fx_rmrf(sub);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* A fresh directory under $TMPDIR (or /tmp) into out. */
static inline int fx_mkdtemp(char *out, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/ns-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
             name);
    return mkdtemp(out) ? NS_OK : NS_ERR_IO;
}

/* ---- genesis ------------------------------------------------------------ */

/* The close window of the genesis the next fx_init writes (0: the key is
 * left out, the default applies); a test that closes jobs sets it. */
static uint64_t fx_close_window_ms;

/* Genesis text for the given ids and amounts (malloc'd, caller frees). The
 * amounts are the ledger's units, micro-credits: the file says credits. */
static inline char *fx_genesis_text(const char *name, const uint8_t *ids,
                                    const uint64_t *credits, uint32_t n)
{
    size_t cap = 320 + (size_t)n * (NS_ID_TEXT_LEN + 32);
    char *t = malloc(cap);
    if (!t)
        return NULL;
    size_t len = (size_t)snprintf(t, cap,
                                  "[network]\nname = %s\ntest_network = "
                                  "true\ncreated_ms = 1763700000000\n",
                                  name);
    if (fx_close_window_ms)
        len += (size_t)snprintf(t + len, cap - len, "close_window_ms = %llu\n",
                                (unsigned long long)fx_close_window_ms);
    len += (size_t)snprintf(t + len, cap - len, "[alloc]\n");
    for (uint32_t i = 0; i < n; i++) {
        char id[NS_ID_TEXT_LEN + 1], amount[NS_CREDITS_TEXT];
        ns_id_text(id, ids + (size_t)i * NS_ID_BYTES);
        len += (size_t)snprintf(t + len, cap - len, "%s = %s\n", id,
                                ns_credits_fmt(amount, credits[i]));
    }
    return t;
}

/* A deterministic identity: key i of seed, through a key file (the only
 * way the identity API takes a seed). */
static inline ns_identity_t *fx_identity_seeded(const char *dir, uint64_t seed,
                                                uint32_t i)
{
    uint8_t in[12], key[32];
    char hex[65], path[600], text[96];
    memcpy(in, &seed, 8);
    memcpy(in + 8, &i, 4);
    ns_hash(key, in, sizeof in);
    ns_hex(hex, key, sizeof key);
    int n = snprintf(path, sizeof path, "%s/key-%u", dir, i);
    int t = snprintf(text, sizeof text, "nightshift-key-v1 %s\n", hex);
    if (n < 0 || (size_t)n >= sizeof path || t < 0)
        return NULL;
    FILE *f = fopen(path, "wx");
    ns_identity_t *id = NULL;
    if (f) {
        bool ok = fchmod(fileno(f), 0600) == 0 &&
                  fwrite(text, 1, (size_t)t, f) == (size_t)t;
        if (fclose(f) == 0 && ok && ns_identity_load(path, &id) != NS_OK)
            id = NULL;
        unlink(path);
    }
    sodium_memzero(key, sizeof key);
    sodium_memzero(text, sizeof text);
    return id;
}

/* n identities (fresh, or derived from *seed), each funded with
 * credits[i], a genesis named name, a temp root and the ledger opened in
 * root/ledger. */
static inline int fx_init_seeded(fx_t *fx, const char *name, uint32_t n,
                                 const uint64_t *credits, const uint64_t *seed)
{
    memset(fx, 0, sizeof *fx);
    if (n > FX_MAX_ACCOUNTS ||
        fx_mkdtemp(fx->root, sizeof fx->root, name) != NS_OK)
        return NS_ERR_INVAL;
    int n_dir = snprintf(fx->dir, sizeof fx->dir, "%s/ledger", fx->root);
    if (n_dir < 0 || (size_t)n_dir >= sizeof fx->dir)
        return NS_ERR_TOOBIG;
    uint8_t ids[FX_MAX_ACCOUNTS * NS_ID_BYTES];
    for (uint32_t i = 0; i < n; i++) {
        fx->acct[i].id = seed ? fx_identity_seeded(fx->root, *seed, i)
                              : ns_identity_generate();
        if (!fx->acct[i].id)
            return NS_ERR_NOMEM;
        fx->n = i + 1;
        memcpy(fx->acct[i].pk, ns_identity_pk(fx->acct[i].id), NS_ID_BYTES);
        memcpy(ids + (size_t)i * NS_ID_BYTES, fx->acct[i].pk, NS_ID_BYTES);
    }
    fx->now = FX_T0_MS;
    char *text = fx_genesis_text(name, ids, credits, n);
    if (!text)
        return NS_ERR_NOMEM;
    int rc = ns_genesis_parse((const uint8_t *)text, strlen(text), &fx->genesis,
                              fx->err, sizeof fx->err);
    free(text);
    if (rc != NS_OK)
        return rc;
    fx->l = ns_ledger_open(fx->dir, &fx->genesis, &rc, fx->err, sizeof fx->err);
    return rc;
}

static inline int fx_init(fx_t *fx, const char *name, uint32_t n,
                          const uint64_t *credits)
{
    return fx_init_seeded(fx, name, n, credits, NULL);
}

static inline void fx_free(fx_t *fx)
{
    ns_ledger_close(&fx->l);
    for (uint32_t i = 0; i < fx->n; i++)
        ns_identity_destroy(&fx->acct[i].id);
    ns_genesis_release(&fx->genesis);
    if (fx->root[0])
        fx_rmrf(fx->root);
    fx->root[0] = '\0';
}

/* Another ledger on the same genesis, in root/<name>. */
static inline ns_ledger_t *fx_open_other(fx_t *fx, const char *name)
{
    char dir[600];
    int rc;
    snprintf(dir, sizeof dir, "%s/%s", fx->root, name);
    return ns_ledger_open(dir, &fx->genesis, &rc, fx->err, sizeof fx->err);
}

/* ---- entries ------------------------------------------------------------ */

static inline uint64_t fx_tick(fx_t *fx)
{
    fx->now += 10;
    return fx->now;
}

/* Sign an entry of account who at an explicit seq, prev (NULL: zero) and
 * time. */
static inline int fx_make_raw(fx_t *fx, uint32_t who, uint64_t seq,
                              const ns_hash_t prev, uint8_t type,
                              const ns_entry_body_t *b, const uint8_t *refs,
                              uint32_t n_refs, uint64_t ts, ns_buf_t *out,
                              ns_hash_t id)
{
    static const ns_hash_t zero;
    ns_buf_t body;
    ns_buf_init(&body);
    int rc = ns_entry_body_encode(type, b, &body);
    if (rc == NS_OK)
        rc = ns_entry_encode(fx->acct[who].id, fx->genesis.network_id, seq,
                             prev ? prev : zero, type, body.data, body.len,
                             refs, n_refs, ts, out, id);
    ns_buf_release(&body);
    return rc;
}

/* The next entry of who's chain, at the next tick (the chain is not
 * advanced: fx_advance does that once the ledger took it). */
static inline int fx_make(fx_t *fx, uint32_t who, uint8_t type,
                          const ns_entry_body_t *b, const uint8_t *refs,
                          uint32_t n_refs, ns_buf_t *out, ns_hash_t id,
                          uint64_t *ts)
{
    static const ns_hash_t zero;
    const fx_acct_t *a = &fx->acct[who];
    *ts = fx_tick(fx);
    return fx_make_raw(fx, who, a->seq + 1, a->seq ? a->head : zero, type, b,
                       refs, n_refs, *ts, out, id);
}

static inline void fx_advance(fx_t *fx, uint32_t who, const ns_hash_t id,
                              uint64_t ts)
{
    fx->acct[who].seq++;
    memcpy(fx->acct[who].head, id, NS_HASH_BYTES);
    fx->acct[who].ts = ts;
}

/* Reload who's chain position from the ledger (after ns_ledger_append). */
static inline void fx_sync(fx_t *fx, uint32_t who)
{
    ns_account_t a;
    if (ns_ledger_account(fx->l, fx->acct[who].pk, &a) != NS_OK)
        return;
    fx->acct[who].seq = a.seq;
    memcpy(fx->acct[who].head, a.head, NS_HASH_BYTES);
    fx->acct[who].ts = a.head_timestamp_ms;
    if (fx->now < a.head_timestamp_ms)
        fx->now = a.head_timestamp_ms;
}

/* Build who's next entry and ingest it into l; the chain advances when
 * it is stored. id (may be NULL) gets the entry id, raw (may be NULL) a
 * copy of the encoded bytes. */
static inline int fx_put_to(fx_t *fx, ns_ledger_t *l, uint32_t who,
                            uint8_t type, const ns_entry_body_t *b,
                            const uint8_t *refs, uint32_t n_refs, ns_hash_t id,
                            ns_buf_t *raw)
{
    ns_buf_t out;
    ns_hash_t eid;
    uint64_t ts;
    ns_buf_init(&out);
    int rc = fx_make(fx, who, type, b, refs, n_refs, &out, eid, &ts);
    if (rc == NS_OK)
        rc = ns_ledger_ingest(l, out.data, out.len, NULL, NULL);
    if (rc == NS_OK)
        fx_advance(fx, who, eid, ts);
    if (id)
        memcpy(id, eid, NS_HASH_BYTES);
    if (raw) {
        raw->len = 0;
        if (ns_buf_append(raw, out.data, out.len) != NS_OK)
            rc = NS_ERR_NOMEM;
    }
    ns_buf_release(&out);
    return rc;
}

static inline int fx_put(fx_t *fx, uint32_t who, uint8_t type,
                         const ns_entry_body_t *b, const uint8_t *refs,
                         uint32_t n_refs, ns_hash_t id)
{
    return fx_put_to(fx, fx->l, who, type, b, refs, n_refs, id, NULL);
}

/* ---- bodies -------------------------------------------------------------- */

static inline ns_entry_body_t fx_transfer(const uint8_t *to, uint64_t amount)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.to, to, NS_ID_BYTES);
    b.amount = amount;
    return b;
}

static inline ns_entry_body_t fx_amount(uint64_t amount)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    b.amount = amount;
    return b;
}

/* JOB number n of requester: its desc_id and nonce derive from n, its
 * job_id from those as the ledger demands (ns_ledger_job_id); the id goes
 * to job_id (may be NULL). */
static inline ns_entry_body_t fx_job(const uint8_t *requester, uint32_t n,
                                     uint64_t escrow, uint64_t max_price,
                                     uint64_t collateral, uint64_t deadline_ms,
                                     ns_hash_t job_id)
{
    ns_entry_body_t b;
    uint8_t in[8] = {'d', 'e', 's', 'c'};
    ns_hash_t h;
    memset(&b, 0, sizeof b);
    memcpy(in + 4, &n, 4);
    ns_hash(b.desc_id, in, sizeof in);
    ns_hash(h, b.desc_id, NS_HASH_BYTES);
    memcpy(b.nonce, h, sizeof b.nonce);
    ns_ledger_job_id(b.job_id, requester, b.desc_id, b.nonce);
    b.escrow = escrow;
    b.max_price = max_price;
    b.collateral = collateral;
    b.deadline_ms = deadline_ms;
    if (job_id)
        memcpy(job_id, b.job_id, NS_HASH_BYTES);
    return b;
}

/* AWARD of job_id to provider's bid at price, signed by the provider. */
static inline ns_entry_body_t fx_award(fx_t *fx, const ns_hash_t job_id,
                                       uint32_t provider, uint64_t price)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    memcpy(b.bid.job_id, job_id, NS_HASH_BYTES);
    b.bid.price = price;
    b.bid.est_ms = 1500;
    b.bid.timestamp_ms = fx->now;
    ns_bid_sign(&b.bid, fx->acct[provider].id, fx->genesis.network_id);
    return b;
}

/* ACCEPT, SETTLE (and, with root/n_items, RESULT; with a proof, SLASH). */
static inline ns_entry_body_t fx_ref(const ns_hash_t job_id,
                                     const ns_hash_t ref_id)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    if (ref_id)
        memcpy(b.ref_id, ref_id, NS_HASH_BYTES);
    return b;
}

static inline ns_entry_body_t
fx_result(const ns_hash_t job_id, const ns_hash_t accept_id, uint64_t n_items)
{
    ns_entry_body_t b = fx_ref(job_id, accept_id);
    ns_hash(b.root, accept_id, NS_HASH_BYTES); /* any root will do */
    b.n_items = n_items;
    return b;
}

static inline ns_entry_body_t fx_cancel(const ns_hash_t job_id,
                                        const ns_hash_t accept_or_null,
                                        bool reopen, uint64_t deadline_ms)
{
    ns_entry_body_t b = fx_ref(job_id, accept_or_null);
    b.reopen = reopen;
    b.new_deadline_ms = deadline_ms;
    return b;
}

/* An id no JOB has (for entries naming a job that does not exist). */
static inline void fx_job_id(ns_hash_t out, uint32_t n)
{
    uint8_t buf[12] = {'t', 'e', 's', 't', '-', 'j', 'o', 'b'};
    memcpy(buf + 8, &n, 4);
    ns_hash(out, buf, sizeof buf);
}

/* A SLASH verifier for ledger tests: a proof that starts with byte 1
 * checks, any other does not (the real check, a re-run in the worker, is
 * node/slash.c's and tested there). */
static inline int fx_slash_verifier(void *user, const ns_ledger_job_t *job,
                                    const uint8_t *provider,
                                    const ns_hash_t root, uint64_t n_items,
                                    const uint8_t *proof, size_t len,
                                    uint8_t missing[NS_HASH_BYTES])
{
    (void)user, (void)job, (void)provider, (void)root, (void)n_items;
    (void)missing;
    return len > 0 && proof[0] == 1 ? NS_OK : NS_ERR_PROOF;
}

/* ---- snapshots ----------------------------------------------------------- */

typedef struct {
    ns_account_t a[FX_MAX_SNAP_ACCOUNTS];
    uint32_t n;
    uint64_t entries, total, burned, pending, forks, accounts;
    ns_hash_t digest;
    uint64_t sum; /* conservation sum */
    int cons_rc;  /* ns_ledger_check_conservation's result */
} fx_snap_t;

static inline bool fx_snap_cb(void *u, const ns_account_t *a)
{
    fx_snap_t *s = u;
    if (s->n == FX_MAX_SNAP_ACCOUNTS)
        return false;
    s->a[s->n++] = *a;
    return true;
}

static inline void fx_snap_of(ns_ledger_t *l, fx_snap_t *s)
{
    ns_ledger_stats_t st;
    memset(s, 0, sizeof *s);
    ns_ledger_each_account(l, fx_snap_cb, s);
    ns_ledger_stats(l, &st);
    s->entries = st.entries;
    s->total = st.total;
    s->burned = st.burned;
    s->pending = st.pending_credit;
    s->forks = st.forks;
    s->accounts = st.accounts;
    memcpy(s->digest, st.digest, NS_HASH_BYTES);
    s->cons_rc = ns_ledger_check_conservation(l, &s->sum);
}

static inline bool fx_account_same(const ns_account_t *x, const ns_account_t *y)
{
    return memcmp(x->id, y->id, NS_ID_BYTES) == 0 && x->free == y->free &&
           x->staked == y->staked && x->locked_escrow == y->locked_escrow &&
           x->locked_collateral == y->locked_collateral && x->seq == y->seq &&
           memcmp(x->head, y->head, NS_HASH_BYTES) == 0 &&
           x->head_timestamp_ms == y->head_timestamp_ms &&
           x->banned == y->banned && x->jobs_posted == y->jobs_posted &&
           x->jobs_settled_as_requester == y->jobs_settled_as_requester &&
           x->jobs_settled == y->jobs_settled &&
           x->jobs_slashed == y->jobs_slashed &&
           x->jobs_cancelled == y->jobs_cancelled;
}

/* Same derived state; what differs is written to why (may be NULL). */
static inline bool fx_snap_same(const fx_snap_t *x, const fx_snap_t *y,
                                char *why, size_t cap)
{
    char dummy[8];
    if (!why) {
        why = dummy;
        cap = sizeof dummy;
    }
    why[0] = '\0';
    if (x->n != y->n) {
        snprintf(why, cap, "account count %u != %u", x->n, y->n);
        return false;
    }
    for (uint32_t i = 0; i < x->n; i++)
        if (!fx_account_same(&x->a[i], &y->a[i])) {
            char id[NS_ID_SHORT_LEN + 1];
            ns_id_short(id, x->a[i].id);
            snprintf(why, cap,
                     "account %s: free %llu/%llu staked %llu/%llu escrow "
                     "%llu/%llu collateral %llu/%llu seq %llu/%llu banned "
                     "%d/%d",
                     id, (unsigned long long)x->a[i].free,
                     (unsigned long long)y->a[i].free,
                     (unsigned long long)x->a[i].staked,
                     (unsigned long long)y->a[i].staked,
                     (unsigned long long)x->a[i].locked_escrow,
                     (unsigned long long)y->a[i].locked_escrow,
                     (unsigned long long)x->a[i].locked_collateral,
                     (unsigned long long)y->a[i].locked_collateral,
                     (unsigned long long)x->a[i].seq,
                     (unsigned long long)y->a[i].seq, x->a[i].banned,
                     y->a[i].banned);
            return false;
        }
    if (x->entries != y->entries || x->total != y->total ||
        x->burned != y->burned || x->pending != y->pending ||
        x->forks != y->forks || x->accounts != y->accounts) {
        snprintf(why, cap,
                 "stats: entries %llu/%llu burned %llu/%llu pending "
                 "%llu/%llu forks %llu/%llu accounts %llu/%llu",
                 (unsigned long long)x->entries, (unsigned long long)y->entries,
                 (unsigned long long)x->burned, (unsigned long long)y->burned,
                 (unsigned long long)x->pending, (unsigned long long)y->pending,
                 (unsigned long long)x->forks, (unsigned long long)y->forks,
                 (unsigned long long)x->accounts,
                 (unsigned long long)y->accounts);
        return false;
    }
    if (memcmp(x->digest, y->digest, NS_HASH_BYTES) != 0) {
        snprintf(why, cap, "digests differ");
        return false;
    }
    if (x->sum != y->sum || x->cons_rc != y->cons_rc) {
        snprintf(why, cap, "conservation %llu (%s) / %llu (%s)",
                 (unsigned long long)x->sum, ns_errname(x->cons_rc),
                 (unsigned long long)y->sum, ns_errname(y->cons_rc));
        return false;
    }
    return true;
}

/* The account of fixture account who, as the ledger l sees it. */
static inline ns_account_t fx_acct_in(ns_ledger_t *l, const fx_t *fx,
                                      uint32_t who)
{
    ns_account_t a;
    if (ns_ledger_account(l, fx->acct[who].pk, &a) != NS_OK)
        memset(&a, 0xff, sizeof a);
    return a;
}

#endif
