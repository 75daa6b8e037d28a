/* gen_ctl_corpus.c - write seed inputs for fuzz_ctl into a directory.
 *
 *   fuzz_ctl_gen_corpus DIR
 *
 * Seeds: one request of every kind packed by ns_ctl_req_pack (each read
 * back before it is saved), with mutants that reach the reader's error
 * paths (truncated, a trailing byte, the last byte flipped, an argument
 * count changed), and by hand: a query as a one-element array, an
 * unknown command, a block over an hour, a command without its arguments.
 */
#include "seeds.h"

#include "nightshift/control.h"
#include "nightshift/identity.h"

static void s_save(const ns_ctl_req_t *r, const char *name, ns_buf_t *b)
{
    ns_ctl_req_t back;
    seeds_check(ns_ctl_req_pack(r, b), name);
    seeds_check(ns_ctl_req_read(b->data, b->len, &back), name);
    if (b->len > 2) /* an array header: one argument fewer */
        seeds_save_mutants(name, b->data, b->len, 0, (uint8_t)(b->data[0] - 1));
    else
        seeds_save(name, b->data, b->len);
}

/* msgpack text written by hand */
static void s_raw(const char *name, const char *bytes, size_t len)
{
    seeds_save(name, (const uint8_t *)bytes, len);
}

int main(int argc, char **argv)
{
    ns_buf_t b;
    ns_ctl_req_t r;
    seeds_init(argc, argv);
    ns_buf_init(&b);
    ns_identity_t *id = ns_identity_generate();
    if (!id)
        seeds_die("identity", NS_ERR_NOMEM);
    char idtext[NS_ID_TEXT_LEN + 1];
    ns_id_text(idtext, ns_identity_pk(id));

    static const ns_ctl_kind_t queries[] = {NS_CTL_STATUS, NS_CTL_PEERS,
                                            NS_CTL_LATENCY};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        memset(&r, 0, sizeof r);
        r.kind = queries[i];
        s_save(&r, ns_ctl_name(r.kind), &b);
    }
    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_CONNECT;
    snprintf(r.addr, sizeof r.addr, "%s@tcp://127.0.0.1:7946", idtext);
    s_save(&r, "connect", &b);
    snprintf(r.addr, sizeof r.addr, "%s@tcp://[::1]:65535", idtext);
    s_save(&r, "connect, IPv6", &b);

    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_BLOCK;
    memcpy(r.peer, ns_identity_pk(id), NS_ID_BYTES);
    r.ms = NS_CTL_MAX_BLOCK_MS;
    s_save(&r, "block, one hour", &b);
    r.ms = NS_CTL_MAX_BLOCK_MS + 1;
    seeds_check(ns_ctl_req_pack(&r, &b), "block");
    seeds_save("block, an hour and a millisecond", b.data, b.len);

    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_TRANSFER;
    memcpy(r.peer, ns_identity_pk(id), NS_ID_BYTES);
    r.amount = UINT64_MAX;
    s_save(&r, "transfer, all the credits there are", &b);
    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_STAKE;
    r.amount = 1000;
    s_save(&r, "stake", &b);
    r.kind = NS_CTL_UNSTAKE;
    r.amount = 0;
    s_save(&r, "unstake", &b);
    memset(&r, 0, sizeof r);
    r.kind = NS_CTL_CANCEL;
    ns_hash(r.job_id, "job", 3);
    s_save(&r, "cancel", &b);

    s_raw("[\"status\"]", "\x91\xa6status", 8);
    s_raw("[]", "\x90", 1);
    s_raw("unknown command",
          "\xa5"
          "steal",
          6);
    s_raw("[\"stake\"] without its amount", "\x91\xa5stake", 7);
    s_raw("stake -1", "\x92\xa5stake\xff", 8);
    s_raw("status in a str 8", "\xd9\x06status", 8);
    s_raw("[\"status\"] in an array 16", "\xdc\x00\x01\xa6status", 10);

    ns_identity_destroy(&id);
    ns_buf_release(&b);
    seeds_done();
    return 0;
}
