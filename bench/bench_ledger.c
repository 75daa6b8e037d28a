/* bench_ledger.c - ledger figures on one core. Prints figures only.
 *
 * (a) verified entries ingested per second: ns_ledger_ingest of
 *     pre-signed entries from many authors (transfers, stakes, unstakes,
 *     credits taken in by refs), committed by the ledger's policy
 *     (ns_ledger_commit_due: NS_LEDGER_COMMIT_ENTRIES, _BYTES or _MS;
 *     its clock counts the time spent in this ledger only, as for a node
 *     that does nothing else while it catches up),
 *     next to the raw Ed25519 verify rate measured on the same entries in
 *     the same run, and next to the old policy (one commit per 256, into a
 *     second ledger), all interleaved in rounds of 256 so that noise from
 *     other processes hits them alike (as bench_ingest.c does);
 * (b) own-entry appends per second: ns_ledger_append, each one a synced
 *     LMDB commit; and, for comparison, the same kind of own entries
 *     signed here and fed through ns_ledger_ingest, committed by the
 *     policy (the ledger has no batched append call: this is what one
 *     would give).
 *
 *   bench_ledger [ENTRIES] [AUTHORS] [APPENDS]
 *   bench_ledger --keys DIR N
 *   bench_ledger --build DATADIR AUTHORS PER_AUTHOR [--keys DIR]
 *                [--no-claims]
 *
 * --build fills DATADIR/ledger (a fresh datadir made by `nightshift init`
 * with a genesis) with AUTHORS chains of PER_AUTHOR entries: with --keys,
 * the authors are the keys --keys wrote to DIR (author-I.key; the genesis
 * must fund them); without, the datadir's node key funds AUTHORS fresh
 * accounts first (AUTHORS grants, taken in by refs). --no-claims: credits
 * are never taken in, so no entry names another chain's entry.
 * bench/bench_catchup.py and tests/integration/test_ledger_catchup.py use
 * it.
 *
 * The ledgers of (a) and (b) live in a fresh directory under
 * $NS_BENCH_DIR (default $TMPDIR, else /tmp), removed at the end; its
 * file system decides what a synced commit costs, so it is printed.
 */
#include "nightshift/genesis.h"
#include "nightshift/identity.h"
#include "nightshift/ledger.h"
#include "nightshift/log.h"
#include "nightshift/util.h"

#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#define S_ROUND                                                                \
    256                         /* entries per round (and per commit in        \
                                   the old policy) */
#define S_APPEND_MAX_US 8000000 /* time cap on the durable appends */
#define S_CREDITS 1000000       /* genesis credits of each bench author */

/* ---- a generator of valid chains --------------------------------------- */

static const ns_hash_t s_no_network; /* until the genesis is known */

typedef struct {
    ns_identity_t *id;
    uint64_t seq;       /* head seq */
    ns_hash_t head;     /* head id (zero before seq 1) */
    uint64_t ts;        /* head timestamp, ms */
    uint32_t n_pending; /* credits to take in with the next entry */
    uint8_t pending[NS_MAX_REFS][NS_HASH_BYTES];
} s_author_t;

typedef struct {
    s_author_t *a;
    uint32_t n;
    ns_hash_t network_id;
    bool no_claims; /* credits stay pending: entries carry no refs */
    ns_buf_t body;
} s_gen_t;

/* Sign author k's next entry into out. A TRANSFER leaves a credit that
 * the recipient's next entry takes in (refs). */
static int s_gen_entry(s_gen_t *g, uint32_t k, uint8_t type, uint64_t amount,
                       uint32_t to, ns_buf_t *out)
{
    s_author_t *a = &g->a[k];
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    b.amount = amount;
    if (type == NS_ENTRY_TRANSFER)
        memcpy(b.to, ns_identity_pk(g->a[to].id), NS_ID_BYTES);
    int rc = ns_entry_body_encode(type, &b, &g->body);
    if (rc != NS_OK)
        return rc;
    ns_hash_t id;
    rc = ns_entry_encode(a->id, g->network_id, a->seq + 1, a->head, type,
                         g->body.data, g->body.len,
                         a->n_pending ? a->pending[0] : NULL, a->n_pending,
                         a->ts + 1, out, id);
    if (rc != NS_OK)
        return rc;
    a->seq++;
    a->ts++;
    memcpy(a->head, id, NS_HASH_BYTES);
    a->n_pending = 0;
    if (type == NS_ENTRY_TRANSFER && !g->no_claims) {
        s_author_t *r = &g->a[to];
        if (r->n_pending < NS_MAX_REFS) /* else it stays pending: valid */
            memcpy(r->pending[r->n_pending++], id, NS_HASH_BYTES);
    }
    return NS_OK;
}

/* The j-th entry (0-based) of author `first + k` in a group of `count`
 * authors: a cycle of transfer, stake, transfer, unstake. */
static int s_gen_step(s_gen_t *g, uint32_t first, uint32_t count, uint32_t k,
                      uint64_t j, ns_buf_t *out)
{
    uint32_t other =
        count > 1 ? first + (uint32_t)((k + 1 + (j / 4) % (count - 1)) % count)
                  : first + k;
    switch (j % 4) {
    case 0:
    case 2:
        if (other != first + k)
            return s_gen_entry(g, first + k, NS_ENTRY_TRANSFER, j % 4 ? 3 : 10,
                               other, out);
        return s_gen_entry(g, first + k, NS_ENTRY_STAKE, 1, 0, out);
    case 1:
        return s_gen_entry(g, first + k, NS_ENTRY_STAKE, 5, 0, out);
    default:
        return s_gen_entry(g, first + k, NS_ENTRY_UNSTAKE, 2, 0, out);
    }
}

static int s_gen_init(s_gen_t *g, uint32_t n, const ns_hash_t network_id)
{
    memset(g, 0, sizeof *g);
    g->a = calloc(n, sizeof *g->a);
    if (!g->a)
        return NS_ERR_NOMEM;
    g->n = n;
    memcpy(g->network_id, network_id, NS_HASH_BYTES);
    ns_buf_init(&g->body);
    uint64_t now = ns_now_ms();
    for (uint32_t i = 0; i < n; i++) {
        g->a[i].ts = now;
        if (!(g->a[i].id = ns_identity_generate()))
            return NS_ERR_NOMEM;
    }
    return NS_OK;
}

static void s_gen_release(s_gen_t *g)
{
    for (uint32_t i = 0; g->a && i < g->n; i++)
        ns_identity_destroy(&g->a[i].id);
    free(g->a);
    ns_buf_release(&g->body);
    memset(g, 0, sizeof *g);
}

/* A genesis in memory funding every author of g (network id made up). */
static int s_genesis(const s_gen_t *g, const char *name, ns_genesis_t *out)
{
    memset(out, 0, sizeof *out);
    out->allocs = calloc(g->n, sizeof *out->allocs);
    if (!out->allocs)
        return NS_ERR_NOMEM;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->test_network = true;
    out->n_allocs = g->n;
    for (uint32_t i = 0; i < g->n; i++) {
        memcpy(out->allocs[i].id, ns_identity_pk(g->a[i].id), NS_ID_BYTES);
        out->allocs[i].micro = S_CREDITS;
        out->total_micro += S_CREDITS;
    }
    ns_hash(out->network_id, name, strlen(name));
    return NS_OK;
}

/* ---- scratch directories ------------------------------------------------ */

static void s_remove_ledger(const char *dir)
{
    char path[PATH_MAX];
    if (ns_path_join(path, sizeof path, dir, "data.mdb") == NS_OK)
        unlink(path);
    if (ns_path_join(path, sizeof path, dir, "lock.mdb") == NS_OK)
        unlink(path);
    rmdir(dir);
}

static ns_ledger_t *s_open(const char *base, const char *name,
                           const ns_genesis_t *g, char *dir, size_t cap)
{
    char err[512] = "";
    int rc;
    if (ns_path_join(dir, cap, base, name) != NS_OK)
        return NULL;
    ns_ledger_t *l = ns_ledger_open(dir, g, &rc, err, sizeof err);
    if (!l)
        fprintf(stderr, "bench_ledger: %s\n", err);
    return l;
}

static const char *s_fs_name(const char *dir)
{
    struct statfs st;
    if (statfs(dir, &st) != 0)
        return "?";
    switch ((unsigned long)st.f_type) {
    case 0x01021994UL:
        return "tmpfs (commits never reach a disk)";
    case 0xEF53UL:
        return "ext4";
    case 0x58465342UL:
        return "xfs";
    case 0x9123683EUL:
        return "btrfs";
    case 0x794c7630UL:
        return "overlayfs";
    default:
        return "other";
    }
}

/* ---- (a) ingest vs verify ----------------------------------------------- */

typedef struct {
    ns_buf_t *entries;
    uint8_t **preimages; /* domain || network id || signed part */
    size_t *preimage_lens;
    const uint8_t **sigs;
    const uint8_t **authors;
    uint32_t n;
} s_set_t;

/* What Ed25519 checks for an entry, cut from its encoding: the array
 * header is one byte, the signature the last 66 (bin8 header + 64). */
static int s_preimage(const ns_buf_t *e, const ns_hash_t network_id,
                      uint8_t **out, size_t *out_len)
{
    size_t dl = sizeof(NS_ENTRY_DOMAIN) - 1;
    if (e->len < 1 + 66 || e->data[0] != 0x99 || e->data[e->len - 66] != 0xc4 ||
        e->data[e->len - 65] != 64)
        return NS_ERR_TYPE;
    size_t part = e->len - 1 - 66;
    *out_len = dl + NS_HASH_BYTES + part;
    if (!(*out = malloc(*out_len)))
        return NS_ERR_NOMEM;
    memcpy(*out, NS_ENTRY_DOMAIN, dl);
    memcpy(*out + dl, network_id, NS_HASH_BYTES);
    memcpy(*out + dl + NS_HASH_BYTES, e->data + 1, part);
    return NS_OK;
}

static int s_bench_ingest(const char *base, uint32_t n_entries,
                          uint32_t n_authors)
{
    s_gen_t g;
    ns_genesis_t gen;
    s_set_t s;
    ns_ledger_t *l = NULL, *old = NULL;
    char dir[PATH_MAX] = "", odir[PATH_MAX] = "";
    memset(&s, 0, sizeof s);
    memset(&gen, 0, sizeof gen);
    int rc = s_gen_init(&g, n_authors, s_no_network);
    if (rc == NS_OK)
        rc = s_genesis(&g, "bench-ledger-ingest", &gen);
    if (rc != NS_OK)
        goto out;
    memcpy(g.network_id, gen.network_id, NS_HASH_BYTES);
    s.n = n_entries;
    s.entries = calloc(n_entries, sizeof *s.entries);
    s.preimages = calloc(n_entries, sizeof *s.preimages);
    s.preimage_lens = calloc(n_entries, sizeof *s.preimage_lens);
    s.sigs = calloc(n_entries, sizeof *s.sigs);
    s.authors = calloc(n_entries, sizeof *s.authors);
    if (!s.entries || !s.preimages || !s.preimage_lens || !s.sigs ||
        !s.authors) {
        rc = NS_ERR_NOMEM;
        goto out;
    }
    size_t bytes = 0, refs = 0;
    for (uint32_t i = 0; i < n_entries && rc == NS_OK; i++) {
        uint32_t k = i % n_authors;
        ns_buf_init(&s.entries[i]);
        refs += g.a[k].n_pending;
        rc = s_gen_step(&g, 0, n_authors, k, i / n_authors, &s.entries[i]);
        if (rc == NS_OK)
            rc = s_preimage(&s.entries[i], gen.network_id, &s.preimages[i],
                            &s.preimage_lens[i]);
        s.sigs[i] = s.entries[i].data + s.entries[i].len - 64;
        s.authors[i] = ns_identity_pk(g.a[k].id);
        bytes += s.entries[i].len;
    }
    if (rc != NS_OK)
        goto out;
    if (!(l = s_open(base, "ingest", &gen, dir, sizeof dir)) ||
        !(old = s_open(base, "ingest-256", &gen, odir, sizeof odir))) {
        rc = NS_ERR_IO;
        goto out;
    }

    uint32_t ok = 0, decoded = 0, stored = 0, other = 0, commits = 0;
    uint64_t verify_us = 0, decode_us = 0, ingest_us = 0, commit_us = 0;
    uint64_t old_us = 0, old_commit_us = 0;
    uint64_t batch_wall_us = 0, batch_own_us = 0;
    for (uint32_t start = 0; start < n_entries; start += S_ROUND) {
        uint32_t end =
            start + S_ROUND < n_entries ? start + S_ROUND : n_entries;
        uint64_t v0 = ns_mono_us();
        for (uint32_t i = start; i < end; i++)
            ok += crypto_sign_verify_detached(s.sigs[i], s.preimages[i],
                                              s.preimage_lens[i],
                                              s.authors[i]) == 0;
        uint64_t v1 = ns_mono_us();
        /* The part of ingest before the rules: strict decode, id hash,
         * signature (for the breakdown only). */
        for (uint32_t i = start; i < end; i++) {
            ns_entry_t e;
            decoded += ns_entry_decode(s.entries[i].data, s.entries[i].len,
                                       gen.network_id, &e) == NS_OK;
        }
        uint64_t d1 = ns_mono_us();
        for (uint32_t i = start; i < end; i++) {
            int r = ns_ledger_ingest(l, s.entries[i].data, s.entries[i].len,
                                     NULL, NULL);
            if (r == NS_OK)
                stored++;
            else if (other++ == 0)
                fprintf(stderr, "bench_ledger: entry %u: %s\n", i,
                        ns_strerror(r));
        }
        uint64_t c0 = ns_mono_us();
        /* The policy's clock counts only this ledger's own time: the
         * rounds interleave three other measurements, which a node
         * catching up does not do, and on the wall clock the 1 s rule
         * would cut batches 4x short of what such a node commits. */
        if (!batch_wall_us)
            batch_wall_us = d1; /* the batch's first entry, on the wall */
        batch_own_us += c0 - d1;
        if (end == n_entries ||
            ns_ledger_commit_due(l, (batch_wall_us + batch_own_us) / 1000)) {
            batch_wall_us = batch_own_us = 0;
            if ((rc = ns_ledger_commit(l)) != NS_OK) {
                fprintf(stderr, "bench_ledger: commit: %s\n", ns_strerror(rc));
                goto out;
            }
            commits++;
        }
        uint64_t c1 = ns_mono_us();
        /* The old policy, same entries: one synced commit per round. */
        for (uint32_t i = start; i < end; i++)
            (void)ns_ledger_ingest(old, s.entries[i].data, s.entries[i].len,
                                   NULL, NULL);
        uint64_t o0 = ns_mono_us();
        if ((rc = ns_ledger_commit(old)) != NS_OK)
            goto out;
        uint64_t o1 = ns_mono_us();
        verify_us += v1 - v0;
        decode_us += d1 - v1;
        ingest_us += c1 - d1;
        commit_us += c1 - c0;
        old_us += o1 - c1;
        old_commit_us += o1 - o0;
    }
    uint64_t sum = 0;
    int conserved = ns_ledger_check_conservation(l, &sum) == NS_OK;

    double verify_rate = n_entries / ((double)verify_us / 1e6);
    double ingest_rate = n_entries / ((double)ingest_us / 1e6);
    double old_rate = n_entries / ((double)old_us / 1e6);
    printf("(a) ledger ingest: %u entries from %u authors, %.0f bytes and "
           "%.2f refs each, one core\n",
           n_entries, n_authors, (double)bytes / n_entries,
           (double)refs / n_entries);
    printf("    LMDB in %s: %s\n", dir, s_fs_name(dir));
    printf("    commit policy           %d entries or %u KiB or %d ms after "
           "the first, whichever first\n",
           NS_LEDGER_COMMIT_ENTRIES, NS_LEDGER_COMMIT_BYTES / 1024,
           NS_LEDGER_COMMIT_MS);
    printf("    raw Ed25519 verify      %9.0f entries/s  (%u/%u valid)\n",
           verify_rate, ok, n_entries);
    printf("    verified ingest         %9.0f entries/s  (%u/%u stored, "
           "%u synced commits)\n",
           ingest_rate, stored, n_entries, commits);
    printf("    ingest / verify         %9.1f %%         (goal >= 85 %%)\n",
           100.0 * ingest_rate / verify_rate);
    printf("    old: commit per %d     %9.0f entries/s  = %.1f %% of verify "
           "(%.2f us an entry in commits)\n",
           S_ROUND, old_rate, 100.0 * old_rate / verify_rate,
           (double)old_commit_us / n_entries);
    printf("    same, commits left out  %9.1f %%\n",
           100.0 * (double)verify_us / (double)(ingest_us - commit_us));
    printf("    per entry               %9.2f us ingest = %.2f decode and "
           "verify (%u/%u)\n"
           "                                    + %.2f rules and LMDB + %.2f "
           "commits; raw verify %.2f us\n",
           (double)ingest_us / n_entries, (double)decode_us / n_entries,
           decoded, n_entries,
           ((double)ingest_us - (double)commit_us - (double)decode_us) /
               n_entries,
           (double)commit_us / n_entries, (double)verify_us / n_entries);
    printf("    conservation            %s (sum %llu)\n",
           conserved ? "holds" : "BROKEN", (unsigned long long)sum);
    rc = stored == n_entries && conserved ? NS_OK : NS_ERR_STATE;
out:
    ns_ledger_close(&l);
    ns_ledger_close(&old);
    if (dir[0])
        s_remove_ledger(dir);
    if (odir[0])
        s_remove_ledger(odir);
    for (uint32_t i = 0; s.entries && i < n_entries; i++) {
        ns_buf_release(&s.entries[i]);
        free(s.preimages[i]);
    }
    free(s.entries);
    free(s.preimages);
    free(s.preimage_lens);
    free(s.sigs);
    free(s.authors);
    ns_genesis_release(&gen);
    s_gen_release(&g);
    return rc;
}

/* ---- (b) own appends ---------------------------------------------------- */

static int s_cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static int s_bench_append(const char *base, uint32_t n_appends)
{
    s_gen_t g;
    ns_genesis_t gen;
    ns_ledger_t *l = NULL;
    char dir[PATH_MAX] = "", bdir[PATH_MAX] = "";
    uint64_t *lat = calloc(n_appends, sizeof *lat);
    ns_buf_t out;
    ns_buf_init(&out);
    memset(&g, 0, sizeof g);
    memset(&gen, 0, sizeof gen);
    int rc = lat ? s_gen_init(&g, 1, s_no_network) : NS_ERR_NOMEM;
    if (rc == NS_OK)
        rc = s_genesis(&g, "bench-ledger-append", &gen);
    if (rc != NS_OK)
        goto out;
    memcpy(g.network_id, gen.network_id, NS_HASH_BYTES);
    if (!(l = s_open(base, "append", &gen, dir, sizeof dir))) {
        rc = NS_ERR_IO;
        goto out;
    }
    /* Durable appends, one synced commit each, for at most
     * S_APPEND_MAX_US. */
    uint32_t done = 0;
    uint64_t t0 = ns_mono_us();
    for (; done < n_appends; done++) {
        ns_entry_body_t b;
        memset(&b, 0, sizeof b);
        b.amount = 1;
        ns_hash_t id;
        uint64_t a0 = ns_mono_us();
        rc = ns_ledger_append(l, g.a[0].id,
                              done % 2 ? NS_ENTRY_UNSTAKE : NS_ENTRY_STAKE, &b,
                              NULL, 0, &out, id);
        uint64_t a1 = ns_mono_us();
        if (rc != NS_OK) {
            fprintf(stderr, "bench_ledger: append %u: %s\n", done,
                    ns_strerror(rc));
            goto out;
        }
        lat[done] = a1 - a0;
        if (a1 - t0 > S_APPEND_MAX_US) {
            done++;
            break;
        }
    }
    uint64_t append_us = ns_mono_us() - t0;
    ns_ledger_close(&l);
    qsort(lat, done, sizeof *lat, s_cmp_u64);

    /* The same kind of entries, signed here and ingested in batches. */
    if (!(l = s_open(base, "batch", &gen, bdir, sizeof bdir))) {
        rc = NS_ERR_IO;
        goto out;
    }
    uint32_t n_batch = n_appends < 4 * S_ROUND ? 4 * S_ROUND : n_appends;
    uint32_t stored = 0;
    uint64_t b0 = ns_mono_us();
    for (uint32_t i = 0; i < n_batch; i++) {
        rc = s_gen_entry(&g, 0, i % 2 ? NS_ENTRY_UNSTAKE : NS_ENTRY_STAKE, 1, 0,
                         &out);
        if (rc != NS_OK)
            goto out;
        stored += ns_ledger_ingest(l, out.data, out.len, NULL, NULL) == NS_OK;
        if (i + 1 == n_batch || ns_ledger_commit_due(l, ns_mono_ms())) {
            if ((rc = ns_ledger_commit(l)) != NS_OK)
                goto out;
        }
    }
    uint64_t batch_us = ns_mono_us() - b0;

    printf("(b) own-entry appends, one author, LMDB in %s: %s\n", dir,
           s_fs_name(dir));
    printf("    durable appends         %9.0f appends/s  (%u appends; "
           "latency p50 %.2f ms, p99 %.2f ms, max %.2f ms)\n",
           done / ((double)append_us / 1e6), done,
           (double)lat[done / 2] / 1000.0,
           (double)lat[(size_t)(done * 0.99)] / 1000.0,
           (double)lat[done - 1] / 1000.0);
    printf("    batched (sign + ingest, %9.0f appends/s  (%u/%u stored; "
           "no batched append call exists:\n"
           "    commit policy)                               this is what "
           "one would give)\n",
           n_batch / ((double)batch_us / 1e6), stored, n_batch);
    rc = stored == n_batch ? NS_OK : NS_ERR_STATE;
out:
    ns_ledger_close(&l);
    ns_buf_release(&out);
    ns_genesis_release(&gen);
    s_gen_release(&g);
    free(lat);
    if (dir[0])
        s_remove_ledger(dir);
    if (bdir[0])
        s_remove_ledger(bdir);
    return rc;
}

/* ---- --keys, --build: a big ledger in a datadir ------------------------ */

/* N fresh author keys in dir (author-I.key), their ids on stdout. */
static int s_keys(const char *dir, uint32_t n)
{
    int rc = ns_mkdir_p(dir, 0700);
    for (uint32_t i = 0; i < n && rc == NS_OK; i++) {
        char name[32], path[PATH_MAX], text[NS_ID_TEXT_LEN + 1];
        ns_identity_t *id = ns_identity_generate();
        snprintf(name, sizeof name, "author-%u.key", i);
        if (!id)
            rc = NS_ERR_NOMEM;
        else if ((rc = ns_path_join(path, sizeof path, dir, name)) == NS_OK &&
                 (rc = ns_identity_save(id, path)) == NS_OK) {
            ns_id_text(text, ns_identity_pk(id));
            printf("%s\n", text);
        }
        ns_identity_destroy(&id);
    }
    if (rc != NS_OK)
        fprintf(stderr, "bench_ledger: keys in %s: %s\n", dir, ns_strerror(rc));
    return rc;
}

typedef struct {
    const char *datadir;
    uint32_t n_authors, per; /* authors, entries per author */
    const char *keys;        /* funded authors' keys, or NULL: the node's
                                key funds fresh authors (grants) */
    bool claims;             /* entries take credits in (refs) */
} s_build_opts_t;

static int s_build(const s_build_opts_t *o)
{
    char path[PATH_MAX], err[512] = "";
    ns_genesis_t gen;
    ns_ledger_t *l = NULL;
    s_gen_t g;
    ns_buf_t out;
    ns_buf_init(&out);
    memset(&g, 0, sizeof g);
    memset(&gen, 0, sizeof gen);
    uint32_t first = o->keys ? 0 : 1; /* author 0 funds the others */
    int rc = ns_path_join(path, sizeof path, o->datadir, "genesis.ini");
    if (rc == NS_OK && (rc = ns_genesis_load(path, &gen, err, sizeof err)))
        fprintf(stderr, "bench_ledger: %s\n", err);
    if (rc == NS_OK)
        rc = s_gen_init(&g, o->n_authors + first, gen.network_id);
    if (rc != NS_OK)
        goto out;
    g.no_claims = !o->claims;
    for (uint32_t k = 0; k < g.n && rc == NS_OK; k++) {
        char name[32];
        if (o->keys)
            snprintf(name, sizeof name, "author-%u.key", k);
        else if (k > 0)
            break;
        ns_identity_destroy(&g.a[k].id);
        rc = ns_path_join(path, sizeof path, o->keys ? o->keys : o->datadir,
                          o->keys ? name : "node.key");
        if (rc == NS_OK && (rc = ns_identity_load(path, &g.a[k].id)))
            fprintf(stderr, "bench_ledger: %s: %s\n", path, ns_strerror(rc));
    }
    if (rc != NS_OK)
        goto out;
    if ((rc = ns_path_join(path, sizeof path, o->datadir, "ledger")) != NS_OK ||
        !(l = ns_ledger_open(path, &gen, &rc, err, sizeof err))) {
        fprintf(stderr, "bench_ledger: %s\n", err);
        goto out;
    }
    uint64_t need = o->keys ? S_CREDITS / 2 : (uint64_t)S_CREDITS * g.n;
    for (uint32_t k = 0; k < (o->keys ? g.n : 1) && rc == NS_OK; k++) {
        ns_account_t a;
        if ((rc = ns_ledger_account(l, ns_identity_pk(g.a[k].id), &a)))
            goto out;
        if (a.seq != 0 || a.free < need) {
            fprintf(stderr,
                    "bench_ledger: %s must be a fresh datadir whose genesis "
                    "gives %s at least %llu credits\n",
                    o->datadir, o->keys ? "each author" : "its node",
                    (unsigned long long)need);
            rc = NS_ERR_STATE;
            goto out;
        }
    }
    uint64_t grants = first ? o->n_authors : 0;
    uint64_t total = grants + (uint64_t)o->n_authors * o->per, stored = 0;
    uint64_t t0 = ns_mono_us(), i = 0;
    for (uint32_t k = 1; k <= grants && rc == NS_OK; k++, i++) {
        rc = s_gen_entry(&g, 0, NS_ENTRY_TRANSFER, S_CREDITS, k, &out);
        if (rc == NS_OK)
            stored +=
                ns_ledger_ingest(l, out.data, out.len, NULL, NULL) == NS_OK;
        if (rc == NS_OK && ns_ledger_commit_due(l, ns_mono_ms()))
            rc = ns_ledger_commit(l);
    }
    for (uint64_t j = 0; j < o->per && rc == NS_OK; j++)
        for (uint32_t k = 0; k < o->n_authors && rc == NS_OK; k++, i++) {
            rc = s_gen_step(&g, first, o->n_authors, k, j, &out);
            if (rc == NS_OK)
                stored +=
                    ns_ledger_ingest(l, out.data, out.len, NULL, NULL) == NS_OK;
            if (rc == NS_OK && ns_ledger_commit_due(l, ns_mono_ms()))
                rc = ns_ledger_commit(l);
        }
    if (rc == NS_OK)
        rc = ns_ledger_commit(l);
    double secs = (double)(ns_mono_us() - t0) / 1e6;
    ns_ledger_stats_t st;
    ns_ledger_stats(l, &st);
    char digest[2 * NS_HASH_BYTES + 1];
    ns_hex(digest, st.digest, NS_HASH_BYTES);
    printf("built %llu/%llu entries (%u authors x %u + %llu grants, %s) in "
           "%.1f s (%.0f entries/s): entries=%llu digest=%s\n",
           (unsigned long long)stored, (unsigned long long)total, o->n_authors,
           o->per, (unsigned long long)grants,
           o->claims ? "credits taken in by refs" : "no refs", secs,
           (double)stored / secs, (unsigned long long)st.entries, digest);
    if (rc == NS_OK && stored != total)
        rc = NS_ERR_STATE;
out:
    ns_ledger_close(&l);
    s_gen_release(&g);
    ns_genesis_release(&gen);
    ns_buf_release(&out);
    return rc;
}

/* ---- main --------------------------------------------------------------- */

static uint32_t s_arg(int argc, char **argv, int i, uint32_t dflt)
{
    uint64_t v;
    if (argc <= i)
        return dflt;
    if (ns_parse_u64(argv[i], &v) != NS_OK || v == 0 || v > UINT32_MAX) {
        fprintf(stderr, "bench_ledger: bad number '%s'\n", argv[i]);
        exit(2);
    }
    return (uint32_t)v;
}

static int s_usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: bench_ledger [ENTRIES] [AUTHORS] [APPENDS]\n"
            "       bench_ledger --keys DIR N\n"
            "       bench_ledger --build DATADIR AUTHORS PER_AUTHOR [--keys "
            "DIR] [--no-claims]\n");
    return rc;
}

int main(int argc, char **argv)
{
    if (sodium_init() < 0)
        return 1;
    ns_log_threshold = NS_LOG_ERROR;
    if (argc == 4 && strcmp(argv[1], "--keys") == 0)
        return s_keys(argv[2], s_arg(argc, argv, 3, 0)) == NS_OK ? 0 : 1;
    if (argc >= 5 && strcmp(argv[1], "--build") == 0) {
        s_build_opts_t o = {argv[2], s_arg(argc, argv, 3, 0),
                            s_arg(argc, argv, 4, 0), NULL, true};
        for (int i = 5; i < argc; i++) {
            if (strcmp(argv[i], "--keys") == 0 && i + 1 < argc)
                o.keys = argv[++i];
            else if (strcmp(argv[i], "--no-claims") == 0)
                o.claims = false;
            else
                return s_usage(2);
        }
        return s_build(&o) == NS_OK ? 0 : 1;
    }
    if (argc > 1 && argv[1][0] == '-')
        return s_usage(strcmp(argv[1], "--help") == 0 ? 0 : 2);
    uint32_t n_entries = s_arg(argc, argv, 1, 50000);
    uint32_t n_authors = s_arg(argc, argv, 2, 500);
    uint32_t n_appends = s_arg(argc, argv, 3, 2000);
    if (n_authors > NS_MAX_GENESIS_ALLOCS || n_authors > n_entries) {
        fprintf(stderr,
                "bench_ledger: AUTHORS must be 1..%d and at most "
                "ENTRIES\n",
                NS_MAX_GENESIS_ALLOCS);
        return 2;
    }
    const char *root = getenv("NS_BENCH_DIR");
    if (!root || !root[0])
        root = getenv("TMPDIR");
    if (!root || !root[0])
        root = "/tmp";
    char base[PATH_MAX];
    if (ns_path_join(base, sizeof base, root, "bench_ledger.XXXXXX") != NS_OK ||
        !mkdtemp(base)) {
        fprintf(stderr, "bench_ledger: cannot make a directory in %s\n", root);
        return 1;
    }
    int rc = s_bench_ingest(base, n_entries, n_authors);
    if (rc == NS_OK)
        rc = s_bench_append(base, n_appends);
    rmdir(base);
    if (rc != NS_OK)
        fprintf(stderr, "bench_ledger: %s\n", ns_strerror(rc));
    return rc == NS_OK ? 0 : 1;
}
