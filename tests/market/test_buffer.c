/* test_buffer.c - the ledger's out-of-order buffer (market/ledger_buffer.h)
 * on its own: both indexes, eviction under the byte cap, one author's
 * share, retry by awaited id, and the maps staying consistent through
 * many adds and takes. */
#include "../check.h"

#include "../../market/ledger_buffer.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define S_LEN 100 /* bytes of each fake entry */

static void s_author(uint8_t out[NS_ID_BYTES], uint32_t k)
{
    memset(out, 0, NS_ID_BYTES);
    memcpy(out, &k, sizeof k);
    out[NS_ID_BYTES - 1] = 0xa5;
}

static void s_id(ns_hash_t out, uint32_t k)
{
    memset(out, 0x11, NS_HASH_BYTES);
    memcpy(out, &k, sizeof k);
}

/* Add author k's entry seq (bytes: k, seq), waiting for id `wait` when
 * wait_k != 0, else for the gap. */
static int s_add(ns_lbuf_t *b, uint32_t k, uint64_t seq, uint32_t wait_k)
{
    ns_entry_t e;
    uint8_t bytes[S_LEN];
    memset(&e, 0, sizeof e);
    s_author(e.author, k);
    e.seq = seq;
    memset(bytes, 0, sizeof bytes);
    memcpy(bytes, &k, sizeof k);
    memcpy(bytes + 8, &seq, sizeof seq);
    ns_hash_t w;
    s_id(w, wait_k);
    return ns_lbuf_add(b, bytes, sizeof bytes, &e, wait_k ? w : NULL);
}

static bool s_has(const ns_lbuf_t *b, uint32_t k, uint64_t seq)
{
    uint8_t a[NS_ID_BYTES];
    s_author(a, k);
    const ns_lbuf_item_t *it = ns_lbuf_find(b, a, seq);
    if (!it)
        return false;
    uint32_t kk;
    uint64_t ss;
    memcpy(&kk, it->bytes, sizeof kk);
    memcpy(&ss, it->bytes + 8, sizeof ss);
    return kk == k && ss == seq && it->len == S_LEN;
}

/* Take what waits for (author k, seq, id wait_k); count and free. */
static uint32_t s_take(ns_lbuf_t *b, uint32_t k, uint64_t seq, uint32_t id_k,
                       uint64_t *seqs, uint32_t max)
{
    uint8_t a[NS_ID_BYTES];
    ns_hash_t id;
    s_author(a, k);
    s_id(id, id_k);
    uint32_t n = 0;
    for (ns_lbuf_item_t *it = ns_lbuf_take(b, a, seq, id), *next; it;
         it = next) {
        next = it->newer;
        if (n < max)
            memcpy(&seqs[n], it->bytes + 8, sizeof seqs[n]);
        n++;
        free(it);
    }
    return n;
}

TEST(indexes_and_retry_by_awaited_id)
{
    ns_lbuf_t b;
    ns_lbuf_init(&b, 1u << 20, 1u << 20);
    uint64_t got[8];
    /* author 1: seq 5, 3, 4 (gaps); author 2 seq 7 and author 3 seq 1
     * wait for entry 99; author 1 seq 9 waits for entry 98 */
    CHECK_RC(s_add(&b, 1, 5, 0), NS_OK);
    CHECK_RC(s_add(&b, 1, 3, 0), NS_OK);
    CHECK_RC(s_add(&b, 1, 4, 0), NS_OK);
    CHECK_RC(s_add(&b, 2, 7, 99), NS_OK);
    CHECK_RC(s_add(&b, 3, 1, 99), NS_OK);
    CHECK_RC(s_add(&b, 1, 9, 98), NS_OK);
    CHECK_RC(s_add(&b, 1, 4, 0), NS_ERR_DUPLICATE);
    CHECK_EQ_INT(b.n, 6);
    CHECK_EQ_INT(b.bytes, 6 * ns_lbuf_cost(S_LEN));
    CHECK(s_has(&b, 1, 3) && s_has(&b, 1, 4) && s_has(&b, 1, 5));
    CHECK(s_has(&b, 2, 7) && s_has(&b, 3, 1) && s_has(&b, 1, 9));
    CHECK(!s_has(&b, 1, 6) && !s_has(&b, 2, 3));
    /* author 1's seq 2 stored (its id 50): seq 3 only */
    CHECK_EQ_INT(s_take(&b, 1, 2, 50, got, 8), 1);
    CHECK_EQ_INT(got[0], 3);
    CHECK(!s_has(&b, 1, 3));
    /* entry 99 stored: both that name it, whoever wrote them */
    CHECK_EQ_INT(s_take(&b, 7, 1, 99, got, 8), 2);
    CHECK(!s_has(&b, 2, 7) && !s_has(&b, 3, 1));
    /* author 1's seq 8 stored: seq 9 waits for entry 98, not for 8 */
    CHECK_EQ_INT(s_take(&b, 1, 8, 51, got, 8), 0);
    CHECK(s_has(&b, 1, 9));
    CHECK_EQ_INT(s_take(&b, 5, 5, 98, got, 8), 1);
    CHECK_EQ_INT(got[0], 9);
    /* seq 3 then 4 stored: 4, then 5 */
    CHECK_EQ_INT(s_take(&b, 1, 3, 52, got, 8), 1);
    CHECK_EQ_INT(got[0], 4);
    CHECK_EQ_INT(s_take(&b, 1, 4, 53, got, 8), 1);
    CHECK_EQ_INT(got[0], 5);
    CHECK_EQ_INT(b.n, 0);
    CHECK_EQ_INT(b.bytes, 0);
    CHECK_EQ_INT(b.authors.n, 0);
    CHECK_EQ_INT(b.evicted, 0);
    ns_lbuf_release(&b);
}

TEST(byte_cap_evicts_oldest_arrival)
{
    ns_lbuf_t b;
    uint64_t cost = ns_lbuf_cost(S_LEN);
    ns_lbuf_init(&b, 10 * cost, 10 * cost);
    for (uint32_t k = 1; k <= 10; k++)
        CHECK_RC(s_add(&b, k, 2, k % 2 ? 77 : 0), NS_OK);
    CHECK_EQ_INT(b.bytes, 10 * cost);
    CHECK_EQ_INT(b.evicted, 0);
    /* full: each new one pushes out the oldest arrival */
    CHECK_RC(s_add(&b, 11, 2, 0), NS_OK);
    CHECK_RC(s_add(&b, 12, 2, 0), NS_OK);
    CHECK_EQ_INT(b.n, 10);
    CHECK_EQ_INT(b.bytes, 10 * cost);
    CHECK_EQ_INT(b.evicted, 2);
    CHECK(!s_has(&b, 1, 2) && !s_has(&b, 2, 2));
    CHECK(s_has(&b, 3, 2) && s_has(&b, 12, 2));
    /* the evicted one (author 1, waiting for 77) is out of both indexes */
    uint64_t got[8];
    CHECK_EQ_INT(s_take(&b, 40, 1, 77, got, 8), 4); /* authors 3 5 7 9 */
    CHECK_EQ_INT(b.n, 6);
    ns_lbuf_release(&b);
}

TEST(author_share_keeps_what_is_nearest_its_head)
{
    ns_lbuf_t b;
    uint64_t cost = ns_lbuf_cost(S_LEN);
    ns_lbuf_init(&b, 100 * cost, 3 * cost);
    CHECK_RC(s_add(&b, 1, 10, 0), NS_OK);
    CHECK_RC(s_add(&b, 1, 12, 0), NS_OK);
    CHECK_RC(s_add(&b, 1, 11, 0), NS_OK);
    CHECK_RC(s_add(&b, 2, 10, 0), NS_OK);
    /* author 1 is at its share: one farther ahead is refused */
    CHECK_RC(s_add(&b, 1, 13, 0), NS_ERR_TOOBIG);
    CHECK(!s_has(&b, 1, 13));
    /* one nearer its head pushes out its farthest (12) */
    CHECK_RC(s_add(&b, 1, 5, 0), NS_OK);
    CHECK(!s_has(&b, 1, 12));
    CHECK(s_has(&b, 1, 5) && s_has(&b, 1, 10) && s_has(&b, 1, 11));
    CHECK_RC(s_add(&b, 1, 7, 0), NS_OK);
    CHECK(!s_has(&b, 1, 11) && s_has(&b, 1, 7));
    /* the other author is untouched and may fill its own share */
    CHECK(s_has(&b, 2, 10));
    CHECK_RC(s_add(&b, 2, 11, 0), NS_OK);
    CHECK_RC(s_add(&b, 2, 12, 0), NS_OK);
    CHECK_EQ_INT(b.n, 6);
    CHECK_EQ_INT(b.evicted, 3);
    /* an entry bigger than a whole share is refused */
    ns_entry_t e;
    memset(&e, 0, sizeof e);
    s_author(e.author, 3);
    e.seq = 1;
    uint8_t *big = calloc(1, 3 * cost);
    if (CHECK(big != NULL))
        CHECK_RC(ns_lbuf_add(&b, big, 3 * cost, &e, NULL), NS_ERR_TOOBIG);
    free(big);
    ns_lbuf_release(&b);
}

/* Many authors, random seqs and waits, random takes: every index agrees
 * with a plain table of what should be there (the backward-shift
 * deletion of the maps is what this exercises). */
TEST(maps_stay_consistent)
{
    enum { AUTHORS = 64, SEQS = 64, OPS = 40000 };
    static uint8_t in[AUTHORS][SEQS]; /* 1: waiting, 2: waits for an id */
    memset(in, 0, sizeof in);
    ns_lbuf_t b;
    ns_lbuf_init(&b, 1u << 30, 1u << 30);
    uint32_t want = 0;
    uint64_t got[SEQS * AUTHORS];
    uint32_t rng = 12345;
    for (int op = 0; op < OPS; op++) {
        rng = rng * 1103515245u + 12345u;
        uint32_t k = (rng >> 8) % AUTHORS, s = (rng >> 16) % (SEQS - 1) + 1;
        if ((rng >> 28) < 11) {
            uint32_t wait = (rng >> 4) % 3 == 0 ? 1000 + s % 7 : 0;
            int rc = s_add(&b, k + 1, s, wait);
            if (in[k][s]) {
                CHECK_RC(rc, NS_ERR_DUPLICATE);
            } else if (CHECK_RC(rc, NS_OK)) {
                in[k][s] = wait ? 2 : 1;
                want++;
            }
        } else if ((rng >> 28) < 15) {
            /* author k's seq s - 1 stored */
            uint32_t n = s_take(&b, k + 1, s - 1, 5000, got, SEQS);
            CHECK_EQ_INT(n, in[k][s] == 1);
            if (in[k][s] == 1) {
                in[k][s] = 0;
                want--;
            }
        } else {
            /* entry 1000 + s % 7 stored */
            uint32_t n = s_take(&b, 9999, 1, 1000 + s % 7, got, SEQS * AUTHORS);
            uint32_t expect = 0;
            for (uint32_t a = 0; a < AUTHORS; a++)
                for (uint32_t q = 1; q < SEQS; q++)
                    if (in[a][q] == 2 && q % 7 == s % 7) {
                        in[a][q] = 0;
                        expect++;
                    }
            CHECK_EQ_INT(n, expect);
            want -= expect;
        }
        if (b.n != want) {
            CHECK_EQ_INT(b.n, want);
            break;
        }
    }
    bool all = true;
    for (uint32_t a = 0; a < AUTHORS; a++)
        for (uint32_t q = 1; q < SEQS; q++)
            all &= s_has(&b, a + 1, q) == (in[a][q] != 0);
    CHECK(all);
    CHECK_EQ_INT(b.bytes, (uint64_t)want * ns_lbuf_cost(S_LEN));
    ns_lbuf_release(&b);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(indexes_and_retry_by_awaited_id);
    RUN(byte_cap_evicts_oldest_arrival);
    RUN(author_share_keeps_what_is_nearest_its_head);
    RUN(maps_stay_consistent);
    return ns_test_finish("market_buffer");
}
