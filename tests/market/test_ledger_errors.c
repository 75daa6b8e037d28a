/* test_ledger_errors.c - storage errors keep their cause.
 *
 * A full LMDB map is NS_ERR_MAPFULL (not "out of memory"), changes
 * nothing, and the ledger reopens consistent with a larger map; an I/O
 * error is NS_ERR_IO with the OS's text kept for the caller and the log.
 */
#include "check.h"
#include "ledger_fixture.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#define SMALL_MAP_BYTES (256 * 1024) /* a few hundred entries */
#define MAX_APPENDS 100000           /* the map is full long before */

static uint64_t s_credits[] = {UINT64_C(1000000000), 0};

/* Append transfers 0 -> 1 until one fails; *stored: how many did not. */
static int s_fill(fx_t *fx, uint64_t *stored)
{
    ns_entry_body_t b = fx_transfer(fx->acct[1].pk, 1);
    int rc = NS_OK;
    *stored = 0;
    while (rc == NS_OK && *stored < MAX_APPENDS) {
        ns_buf_t out;
        ns_hash_t id;
        ns_buf_init(&out);
        rc = ns_ledger_append(fx->l, fx->acct[0].id, NS_ENTRY_TRANSFER, &b,
                              NULL, 0, &out, id);
        ns_buf_release(&out);
        if (rc == NS_OK)
            (*stored)++;
    }
    return rc;
}

/* The ledger holds exactly `stored` entries of account 0 and conserves
 * the genesis total. */
static void s_check_state(ns_ledger_t *l, const fx_t *fx, uint64_t stored)
{
    ns_account_t a, b;
    ns_ledger_stats_t st;
    uint64_t sum = 0;
    CHECK_RC(ns_ledger_check_conservation(l, &sum), NS_OK);
    CHECK_RC(ns_ledger_account(l, fx->acct[0].pk, &a), NS_OK);
    CHECK_RC(ns_ledger_account(l, fx->acct[1].pk, &b), NS_OK);
    CHECK_EQ_INT(a.seq, stored);
    CHECK_EQ_INT(a.free, s_credits[0] - stored);
    CHECK_EQ_INT(b.free, 0); /* transfers wait to be taken in */
    ns_ledger_stats(l, &st);
    CHECK_EQ_INT(st.entries, stored);
    CHECK_EQ_INT(st.pending_credit, stored);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (stored > 0) {
        CHECK_RC(ns_ledger_get(l, fx->acct[0].pk, stored, &buf, &len), NS_OK);
        free(buf);
    }
    CHECK_RC(ns_ledger_get(l, fx->acct[0].pk, stored + 1, &buf, &len),
             NS_ERR_NOTFOUND);
}

TEST(mapfull_text)
{
    CHECK_STR(ns_errname(NS_ERR_MAPFULL), "map_full");
    CHECK_CONTAINS(ns_strerror(NS_ERR_MAPFULL), "ledger map full");
    CHECK_CONTAINS(ns_strerror(NS_ERR_MAPFULL), "ledger.map_size");
    CHECK(ns_strerror(NS_ERR_MAPFULL) != ns_strerror(NS_ERR_NOMEM));
}

TEST(mapfull_append)
{
    fx_t fx;
    int rc = fx_init(&fx, "mapfull", 2, s_credits);
    CHECK_RC(rc, NS_OK);
    if (rc != NS_OK) {
        fx_free(&fx);
        return;
    }
    ns_ledger_close(&fx.l);
    fx.l = ns_ledger_open_mapsize(fx.dir, &fx.genesis, SMALL_MAP_BYTES, &rc,
                                  fx.err, sizeof fx.err);
    CHECK_RC(rc, NS_OK);
    if (!fx.l) {
        fx_free(&fx);
        return;
    }
    CHECK_STR(ns_ledger_last_error(fx.l), "");

    uint64_t stored = 0;
    CHECK_RC(s_fill(&fx, &stored), NS_ERR_MAPFULL);
    CHECK(stored > 10 && stored < MAX_APPENDS);
    CHECK_CONTAINS(ns_ledger_last_error(fx.l), "MDB_MAP_FULL");
    s_check_state(fx.l, &fx, stored);

    /* Appending on fills the map again (LMDB may first reuse pages the
     * failed transaction freed): what was reported stored is, nothing
     * else; an invalid entry from the network is still refused and not
     * buffered. */
    uint64_t more = 0;
    CHECK_RC(s_fill(&fx, &more), NS_ERR_MAPFULL);
    stored += more;
    s_check_state(fx.l, &fx, stored);
    ns_entry_body_t unstake = fx_amount(0); /* never valid: rejected */
    ns_hash_t id;
    CHECK(fx_put(&fx, 1, NS_ENTRY_UNSTAKE, &unstake, NULL, 0, id) != NS_OK);
    CHECK_RC(ns_ledger_commit(fx.l), NS_OK);
    ns_ledger_stats_t st;
    ns_ledger_stats(fx.l, &st);
    CHECK_EQ_INT(st.buffered, 0);
    s_check_state(fx.l, &fx, stored);
    ns_ledger_close(&fx.l);

    /* Reopened with the default map: the same state, and room again. */
    fx.l = ns_ledger_open(fx.dir, &fx.genesis, &rc, fx.err, sizeof fx.err);
    CHECK_RC(rc, NS_OK);
    if (fx.l) {
        s_check_state(fx.l, &fx, stored);
        ns_ledger_t *l = fx.l;
        ns_buf_t out;
        ns_buf_init(&out);
        ns_entry_body_t t = fx_transfer(fx.acct[1].pk, 1);
        CHECK_RC(ns_ledger_append(l, fx.acct[0].id, NS_ENTRY_TRANSFER, &t, NULL,
                                  0, &out, id),
                 NS_OK);
        ns_buf_release(&out);
        s_check_state(l, &fx, stored + 1);
        CHECK_STR(ns_ledger_last_error(l), "");
    }
    fx_free(&fx);
}

/* The data file may not grow (RLIMIT_FSIZE): writing is an I/O error
 * whose text (EFBIG's) the ledger keeps, and nothing changes. */
TEST(io_error_keeps_errno_text)
{
    fx_t fx;
    int rc = fx_init(&fx, "ioerr", 2, s_credits);
    CHECK_RC(rc, NS_OK);
    if (rc != NS_OK) {
        fx_free(&fx);
        return;
    }
    char data[700];
    struct stat sb;
    snprintf(data, sizeof data, "%s/data.mdb", fx.dir);
    CHECK(stat(data, &sb) == 0);
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);

    uint64_t stored = 0;
    rc = s_fill(&fx, &stored);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_sig);
    CHECK_RC(rc, NS_ERR_IO);
    CHECK_CONTAINS(ns_ledger_last_error(fx.l), strerror(EFBIG));
    s_check_state(fx.l, &fx, stored);
    ns_ledger_close(&fx.l);

    fx.l = ns_ledger_open(fx.dir, &fx.genesis, &rc, fx.err, sizeof fx.err);
    CHECK_RC(rc, NS_OK);
    if (fx.l)
        s_check_state(fx.l, &fx, stored);
    fx_free(&fx);
}

/* An I/O error at open says why in err. */
TEST(io_error_at_open)
{
    fx_t fx;
    int rc = fx_init(&fx, "ioopen", 2, s_credits);
    CHECK_RC(rc, NS_OK);
    ns_ledger_close(&fx.l);
    char dir[700], data[760];
    snprintf(dir, sizeof dir, "%s/broken", fx.root);
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    CHECK(mkdir(dir, 0700) == 0 && mkdir(data, 0700) == 0);
    char err[256] = "";
    ns_ledger_t *l = ns_ledger_open(dir, &fx.genesis, &rc, err, sizeof err);
    CHECK(l == NULL);
    CHECK_RC(rc, NS_ERR_IO);
    CHECK_CONTAINS(err, strerror(EISDIR));
    ns_ledger_close(&l);
    fx_free(&fx);
}

int main(void)
{
    RUN(mapfull_text);
    RUN(mapfull_append);
    RUN(io_error_keeps_errno_text);
    RUN(io_error_at_open);
    return ns_test_finish("market_ledger_errors");
}
