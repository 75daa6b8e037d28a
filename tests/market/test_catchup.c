/* test_catchup.c - last round's catch-up livelock, reproduced on real LMDB:
 * 100 authors x 80 entries whose transfers credit each other (each credit
 * taken in by the recipient's next entry, so entries name entries of other
 * chains), delivered in orders that make nearly everything wait: the whole
 * ledger backwards, author by author (as a range pull does), and shuffled.
 * With the old 4096-entry buffer the oldest waiting entries were dropped
 * before what they waited for came, and the catch-up never finished; each
 * order must now end with exactly the state of in-order delivery. Also:
 * the open batch (its records in the store's write buffer, not yet in
 * LMDB) answers every query as the committed ledger does. */
#include "../check.h"
#include "ledger_fixture.h"

#include "nightshift/genesis.h"
#include "nightshift/ledger.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

enum { AUTHORS = 100, PER = 80, N = AUTHORS * PER };
#define S_CREDITS 1000000

typedef struct {
    ns_identity_t *id;
    uint64_t seq, ts;
    ns_hash_t head;
    uint32_t n_pending; /* credits to take in with the next entry */
    uint8_t pending[NS_MAX_REFS][NS_HASH_BYTES];
} s_author_t;

static s_author_t s_a[AUTHORS];
static ns_buf_t s_e[N];   /* entries in the order they were made */
static uint32_t s_who[N]; /* author of each */
static ns_genesis_t s_gen;
static char s_dir[512];

/* Author k's next entry: transfer, stake, transfer, unstake, taking in
 * every credit waiting for it. */
static int s_make(uint32_t k, uint32_t j, ns_buf_t *out)
{
    s_author_t *a = &s_a[k];
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    uint8_t type;
    uint32_t to = (k + 1 + (j / 4) % (AUTHORS - 1)) % AUTHORS;
    switch (j % 4) {
    case 0:
    case 2:
        type = NS_ENTRY_TRANSFER;
        b.amount = j % 4 ? 3 : 10;
        memcpy(b.to, ns_identity_pk(s_a[to].id), NS_ID_BYTES);
        break;
    case 1:
        type = NS_ENTRY_STAKE;
        b.amount = 5;
        break;
    default:
        type = NS_ENTRY_UNSTAKE;
        b.amount = 2;
        break;
    }
    ns_buf_t body;
    ns_buf_init(&body);
    ns_hash_t id;
    int rc = ns_entry_body_encode(type, &b, &body);
    if (rc == NS_OK)
        rc = ns_entry_encode(a->id, s_gen.network_id, a->seq + 1, a->head, type,
                             body.data, body.len,
                             a->n_pending ? a->pending[0] : NULL, a->n_pending,
                             a->ts + 1, out, id);
    ns_buf_release(&body);
    if (rc != NS_OK)
        return rc;
    a->seq++;
    a->ts++;
    memcpy(a->head, id, NS_HASH_BYTES);
    a->n_pending = 0;
    if (type == NS_ENTRY_TRANSFER && s_a[to].n_pending < NS_MAX_REFS)
        memcpy(s_a[to].pending[s_a[to].n_pending++], id, NS_HASH_BYTES);
    return NS_OK;
}

static bool s_setup(void)
{
    memset(&s_gen, 0, sizeof s_gen);
    s_gen.allocs = calloc(AUTHORS, sizeof *s_gen.allocs);
    if (!s_gen.allocs || fx_mkdtemp(s_dir, sizeof s_dir, "catchup") != NS_OK)
        return false;
    snprintf(s_gen.name, sizeof s_gen.name, "catchup-livelock");
    s_gen.test_network = true;
    s_gen.n_allocs = AUTHORS;
    ns_hash(s_gen.network_id, s_gen.name, strlen(s_gen.name));
    for (uint32_t k = 0; k < AUTHORS; k++) {
        if (!(s_a[k].id = ns_identity_generate()))
            return false;
        s_a[k].ts = FX_T0_MS;
        memcpy(s_gen.allocs[k].id, ns_identity_pk(s_a[k].id), NS_ID_BYTES);
        s_gen.allocs[k].micro = S_CREDITS;
        s_gen.total_micro += S_CREDITS;
    }
    /* Round-robin over the authors, as they would write concurrently:
     * author k's transfer is taken in by the recipient's next entry. */
    uint32_t i = 0;
    for (uint32_t j = 0; j < PER; j++)
        for (uint32_t k = 0; k < AUTHORS; k++, i++) {
            ns_buf_init(&s_e[i]);
            s_who[i] = k;
            if (s_make(k, j, &s_e[i]) != NS_OK)
                return false;
        }
    return true;
}

static ns_ledger_t *s_open(const char *name)
{
    char path[600], err[256] = "";
    int rc;
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    ns_ledger_t *l = ns_ledger_open(path, &s_gen, &rc, err, sizeof err);
    if (!l)
        ns_test_fail(__FILE__, __LINE__, "open %s: %s", path, err);
    return l;
}

/* Ingest in the order given, committing by the ledger's policy. */
static bool s_deliver(ns_ledger_t *l, const uint32_t *order, uint32_t *stored)
{
    *stored = 0;
    for (uint32_t i = 0; i < N; i++) {
        const ns_buf_t *e = &s_e[order[i]];
        int rc = ns_ledger_ingest(l, e->data, e->len, NULL, NULL);
        if (rc == NS_OK)
            (*stored)++;
        else if (rc != NS_ERR_GAP && rc != NS_ERR_MISSING)
            return CHECK_RC(rc, NS_OK);
        if (ns_ledger_commit_due(l, ns_mono_ms()) &&
            !CHECK_RC(ns_ledger_commit(l), NS_OK))
            return false;
    }
    return CHECK_RC(ns_ledger_commit(l), NS_OK);
}

static fx_snap_t s_want, s_got;

static void s_check_order(const char *name, const uint32_t *order,
                          bool all_wait)
{
    ns_ledger_t *l = s_open(name);
    if (!l)
        return;
    uint32_t direct = 0;
    uint64_t t0 = ns_mono_us();
    if (s_deliver(l, order, &direct)) {
        ns_ledger_stats_t st;
        ns_ledger_stats(l, &st);
        CHECK_EQ_INT(st.entries, N);
        CHECK_EQ_INT(st.buffered, 0);
        CHECK_EQ_INT(st.buffer_evicted, 0);
        if (all_wait) /* only the very first entry applied on arrival */
            CHECK(direct < N / 10);
        fx_snap_of(l, &s_got);
        char why[512];
        if (!CHECK(fx_snap_same(&s_want, &s_got, why, sizeof why)))
            ns_test_fail(__FILE__, __LINE__, "%s order: %s", name, why);
        printf("  %-16s %u entries, %u applied on arrival, the rest from "
               "the buffer: %.2f s\n",
               name, N, direct, (double)(ns_mono_us() - t0) / 1e6);
    }
    ns_ledger_close(&l);
}

TEST(interdependent_authors_any_order)
{
    static uint32_t order[N];
    uint32_t direct;
    ns_ledger_t *l = s_open("in-order");
    if (!l)
        return;
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    bool ok = s_deliver(l, order, &direct);
    CHECK_EQ_INT(direct, N);
    fx_snap_of(l, &s_want);
    ns_ledger_close(&l);
    if (!ok)
        return;
    CHECK_EQ_INT(s_want.entries, N);
    CHECK_RC(s_want.cons_rc, NS_OK);
    CHECK(s_want.pending > 0 || s_want.n == AUTHORS); /* credits flowed */

    /* The whole ledger backwards: all but the first entry wait. */
    for (uint32_t i = 0; i < N; i++)
        order[i] = N - 1 - i;
    s_check_order("backwards", order, true);

    /* Author by author from the last, each chain forwards (a catch-up
     * pulling one author's range after another): each chain stops at
     * its first credit from an author not yet pulled. */
    uint32_t n = 0;
    for (uint32_t k = AUTHORS; k-- > 0;)
        for (uint32_t i = 0; i < N; i++)
            if (s_who[i] == k)
                order[n++] = i;
    s_check_order("author-by-author", order, false);

    /* Shuffled (fixed seed). */
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    uint32_t rng = 2024;
    for (uint32_t i = N - 1; i > 0; i--) {
        rng = rng * 1103515245u + 12345u;
        uint32_t j = (rng >> 8) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    s_check_order("shuffled", order, false);
}

static bool s_count_entry(void *u, const ns_entry_t *e)
{
    (void)e;
    (*(uint32_t *)u)++;
    return true;
}

/* Over every entry: transfers, their credits found, those taken in, and
 * the open credits ns_ledger_unclaimed lists. */
static void s_credits(ns_ledger_t *l, uint32_t *transfers, uint32_t *credits,
                      uint32_t *claimed, uint32_t *open)
{
    for (uint32_t i = 0; i < N; i++) {
        ns_entry_t e;
        ns_entry_body_t b;
        uint64_t amount = 0;
        bool taken = false;
        if (ns_entry_parse(s_e[i].data, s_e[i].len, s_gen.network_id, &e) !=
                NS_OK ||
            ns_entry_body_decode(&e, &b) != NS_OK ||
            e.type != NS_ENTRY_TRANSFER)
            continue;
        (*transfers)++;
        if (ns_ledger_credit(l, e.id, b.to, &amount, &taken) == NS_OK) {
            (*credits)++;
            *claimed += taken;
        }
    }
    for (uint32_t k = 0; k < AUTHORS; k++) {
        uint8_t ids[NS_MAX_REFS * NS_HASH_BYTES];
        *open +=
            ns_ledger_unclaimed(l, ns_identity_pk(s_a[k].id), ids, NS_MAX_REFS);
    }
}

/* The records of the open batch wait in the store's write buffer until
 * the commit: every query must answer from them as it does once they
 * are in LMDB (the in-order ledger, committed, is s_want). */
TEST(open_batch_answers_as_committed)
{
    ns_ledger_t *l = s_open("open-batch");
    if (!l)
        return;
    CHECK(N < NS_LEDGER_COMMIT_ENTRIES); /* all in one batch */
    uint32_t stored = 0;
    for (uint32_t i = 0; i < N; i++)
        stored +=
            ns_ledger_ingest(l, s_e[i].data, s_e[i].len, NULL, NULL) == NS_OK;
    CHECK_EQ_INT(stored, N);
    uint32_t entries;
    uint64_t bytes;
    ns_ledger_uncommitted(l, &entries, &bytes);
    CHECK_EQ_INT(entries, N); /* nothing committed yet */
    /* Each entry by (author, seq), from the buffer: entry i is author
     * i % AUTHORS's (i / AUTHORS + 1)-th. */
    uint32_t same = 0;
    for (uint32_t i = 0; i < N; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (ns_ledger_get(l, ns_identity_pk(s_a[s_who[i]].id), i / AUTHORS + 1,
                          &buf, &len) == NS_OK &&
            len == s_e[i].len && memcmp(buf, s_e[i].data, len) == 0)
            same++;
        free(buf);
    }
    CHECK_EQ_INT(same, N);
    /* Accounts, stats, digest and conservation before the commit. */
    fx_snap_of(l, &s_got);
    char why[512];
    if (!CHECK(fx_snap_same(&s_want, &s_got, why, sizeof why)))
        ns_test_fail(__FILE__, __LINE__, "open batch: %s", why);
    /* Every transfer's credit, and whether it was taken in. */
    uint32_t transfers = 0, credits = 0, claimed_n = 0, open = 0;
    s_credits(l, &transfers, &credits, &claimed_n, &open);
    CHECK(transfers > 0);
    CHECK_EQ_INT(credits, transfers);
    /* A walk over every chain (a cursor: the buffer goes in first). */
    uint32_t walked = 0;
    ns_ledger_each_entry(l, NULL, s_count_entry, &walked);
    CHECK_EQ_INT(walked, N);
    /* Committed and opened again: the same. */
    CHECK_RC(ns_ledger_commit(l), NS_OK);
    ns_ledger_close(&l);
    if (!(l = s_open("open-batch")))
        return;
    fx_snap_of(l, &s_got);
    if (!CHECK(fx_snap_same(&s_want, &s_got, why, sizeof why)))
        ns_test_fail(__FILE__, __LINE__, "reopened: %s", why);
    uint32_t transfers2 = 0, credits2 = 0, claimed2 = 0, open2 = 0;
    s_credits(l, &transfers2, &credits2, &claimed2, &open2);
    CHECK_EQ_INT(credits2, credits);
    CHECK_EQ_INT(claimed2, claimed_n);
    CHECK_EQ_INT(open2, open);
    walked = 0;
    ns_ledger_each_entry(l, NULL, s_count_entry, &walked);
    CHECK_EQ_INT(walked, N);
    ns_ledger_close(&l);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    bool ok = s_setup();
    if (ok)
        RUN(interdependent_authors_any_order);
    if (ok)
        RUN(open_batch_answers_as_committed);
    else
        ns_test_fail(__FILE__, __LINE__, "setup failed");
    for (uint32_t i = 0; i < N; i++)
        ns_buf_release(&s_e[i]);
    for (uint32_t k = 0; k < AUTHORS; k++)
        ns_identity_destroy(&s_a[k].id);
    ns_genesis_release(&s_gen);
    if (s_dir[0])
        fx_rmrf(s_dir);
    return ns_test_finish("market_catchup");
}
