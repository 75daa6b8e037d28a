/* gen_heads_corpus.c - write seed inputs for fuzz_heads into a directory.
 *
 *   fuzz_heads_gen_corpus DIR
 *
 * Seeds (first byte = the reader), each with its mutants (cut in half,
 * a trailing byte, the last byte flipped, a count or a type changed):
 * HEADS_REQ in the old form and in the incremental form; HEADS in the old
 * form (a page with a next author, the last page), an incremental page
 * with more to come, an empty incremental answer and a full listing in
 * the new form.
 */
#include "seeds.h"

#include "nightshift/ledger_heads.h"

static void s_seed(const char *what, uint8_t kind, const ns_buf_t *b, size_t at,
                   uint8_t value)
{
    uint8_t *buf = malloc(b->len + 1);
    if (!buf)
        seeds_die(what, NS_ERR_NOMEM);
    buf[0] = kind;
    memcpy(buf + 1, b->data, b->len);
    seeds_save_mutants(what, buf, b->len + 1, at + 1, value);
    free(buf);
}

int main(int argc, char **argv)
{
    seeds_init(argc, argv);
    ns_buf_t b;
    ns_buf_init(&b);
    ns_heads_req_t q;
    memset(&q, 0, sizeof q);
    seeds_check(ns_heads_req_encode(&b, &q), "req old");
    s_seed("HEADS_REQ, old form", 0, &b, 0, 0x93);
    randombytes_buf(q.start, NS_ID_BYTES);
    q.since_form = true;
    q.epoch = UINT64_C(0x3fedcba987654321);
    q.since = 70000;
    seeds_check(ns_heads_req_encode(&b, &q), "req since");
    s_seed("HEADS_REQ, changes since", 0, &b, 0, 0x91);

    ns_head_item_t items[40];
    for (uint32_t i = 0; i < 40; i++) {
        randombytes_buf(items[i].id, NS_ID_BYTES);
        items[i].seq = 1 + i * 977;
        items[i].ctr = 0;
    }
    ns_heads_t h;
    memset(&h, 0, sizeof h);
    h.legacy = h.full = true;
    h.n = 3;
    h.items = items;
    h.has_next = true;
    memcpy(h.next, items[3].id, NS_ID_BYTES);
    seeds_check(ns_heads_encode(&b, &h), "heads old page");
    s_seed("HEADS, old form, a page with next", 1, &b, 1, 0xdc);
    h.has_next = false;
    h.n = 40;
    seeds_check(ns_heads_encode(&b, &h), "heads old last");
    s_seed("HEADS, old form, last page", 1, &b, 0, 0x96);

    h.legacy = false;
    h.full = false;
    h.epoch = q.epoch;
    h.upto = 70040;
    for (uint32_t i = 0; i < 40; i++)
        items[i].ctr = 70001 + i;
    randombytes_buf(h.digest, NS_HASH_BYTES);
    h.has_next = true;
    memcpy(h.next, items[39].id, NS_ID_BYTES);
    seeds_check(ns_heads_encode(&b, &h), "heads since page");
    s_seed("HEADS, changes since, more to come", 1, &b, 0, 0x92);
    h.n = 0;
    h.has_next = false;
    seeds_check(ns_heads_encode(&b, &h), "heads since empty");
    s_seed("HEADS, changes since, none", 1, &b, 19, 0xc3);
    h.full = true;
    h.n = 5;
    items[2].ctr = 0;
    seeds_check(ns_heads_encode(&b, &h), "heads full");
    s_seed("HEADS, full listing, new form", 1, &b, 0, 0x97);
    ns_buf_release(&b);
    seeds_done();
    return 0;
}
