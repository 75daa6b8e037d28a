/* gen_entry_corpus.c - write seed inputs for fuzz_entry into a directory.
 *
 *   fuzz_entry_gen_corpus DIR
 *
 * Seeds, all signed with the fixed test keys of entry_fixture.h:
 *   - flows (inputs of several entries, entry_fixture.h's format) that take
 *     the ledger through every entry type: transfers and claims, a job
 *     settled, a job slashed and awarded again, a cancel after the deadline
 *     with its penalty, a cancel that reopens, a fork and a banned author,
 *     and a flow delivered backwards (buffered entries);
 *   - each valid entry of those flows alone (a bare entry is an input);
 *   - mutants: truncated, a flipped signature byte, version 2, a trailing
 *     byte, and flows with a broken signature or bid for FUZZ_RESIGN.
 * Every flow is checked against a real ledger as it is built: each entry
 * must get the result the flow expects, so the seeds stay meaningful when
 * the rules change (the generator fails loudly instead).
 * Files are named by the hex of the first 20 bytes of their BLAKE2b-256.
 */
#include "entry_fixture.h"

#include <stdarg.h>

static const char *s_out;
static int s_written;
static char s_tmp[1024];
static ns_identity_t *s_keys[FUZZ_KEYS];
static ns_genesis_t s_g;
static ns_ledger_t *s_l;

typedef struct {
    uint64_t seq;
    ns_hash_t head;
} s_chain_t;

static s_chain_t s_chain[FUZZ_KEYS];
static uint64_t s_now;
static ns_buf_t s_input;    /* the flow being built */
static uint8_t *s_bare[64]; /* its entries, for the bare seeds */
static size_t s_bare_len[64];
static int s_n_bare;

__attribute__((format(printf, 1, 2))) static void s_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "gen_entry_corpus: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void s_save(const char *what, const uint8_t *data, size_t len)
{
    ns_hash_t h;
    char hex[2 * NS_HASH_BYTES + 1], path[4096];
    ns_hash(h, data, len);
    ns_hex(hex, h, 20);
    snprintf(path, sizeof path, "%s/%s", s_out, hex);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        s_die("cannot write %s", path);
    printf("%s %6zu bytes  %s\n", hex, len, what);
    s_written++;
}

/* A new flow: a ledger with only the genesis, chains at seq 0. */
static void s_flow(uint8_t flags)
{
    char path[1200], err[256] = "";
    int rc = NS_OK;
    ns_ledger_close(&s_l);
    snprintf(path, sizeof path, "%s/ledger/data.mdb", s_tmp);
    unlink(path);
    snprintf(path, sizeof path, "%s/ledger/lock.mdb", s_tmp);
    unlink(path);
    snprintf(path, sizeof path, "%s/ledger", s_tmp);
    s_l = ns_ledger_open(path, &s_g, &rc, err, sizeof err);
    if (!s_l)
        s_die("ledger: %s", err);
    ns_ledger_set_verifier(s_l, fuzz_verifier, NULL);
    memset(s_chain, 0, sizeof s_chain);
    s_now = FUZZ_T0_MS;
    s_input.len = 0;
    if (ns_buf_append(&s_input, &flags, 1) != NS_OK)
        s_die("out of memory");
    for (int i = 0; i < s_n_bare; i++)
        free(s_bare[i]);
    s_n_bare = 0;
}

static void s_append_record(const uint8_t *p, size_t n)
{
    uint8_t len[2] = {(uint8_t)(n >> 8), (uint8_t)n};
    if (n > 0xffff || ns_buf_append(&s_input, len, 2) != NS_OK ||
        ns_buf_append(&s_input, p, n) != NS_OK)
        s_die("record too big");
}

/* Key k's next entry: signed, checked against the ledger (want), added
 * to the flow; the chain advances when it is stored. */
static void s_entry(uint32_t k, uint8_t type, const ns_entry_body_t *b,
                    const uint8_t *refs, uint32_t n_refs, int want,
                    ns_hash_t id_out)
{
    static const ns_hash_t zero;
    ns_buf_t body, out;
    ns_hash_t id;
    ns_buf_init(&body);
    ns_buf_init(&out);
    s_now += 10;
    if (ns_entry_body_encode(type, b, &body) != NS_OK ||
        ns_entry_encode(s_keys[k], s_g.network_id, s_chain[k].seq + 1,
                        s_chain[k].seq ? s_chain[k].head : zero, type,
                        body.data, body.len, refs, n_refs, s_now, &out,
                        id) != NS_OK)
        s_die("cannot encode a %s", ns_entry_type_name(type));
    int rc = ns_ledger_ingest(s_l, out.data, out.len, NULL, NULL);
    if (rc != want)
        s_die("%s by key %u: %s, the flow expects %s", ns_entry_type_name(type),
              k, ns_errname(rc), ns_errname(want));
    if (rc == NS_OK) {
        s_chain[k].seq++;
        memcpy(s_chain[k].head, id, NS_HASH_BYTES);
        if (s_n_bare < 64) {
            s_bare[s_n_bare] = malloc(out.len);
            if (!s_bare[s_n_bare])
                s_die("out of memory");
            memcpy(s_bare[s_n_bare], out.data, out.len);
            s_bare_len[s_n_bare++] = out.len;
        }
    }
    s_append_record(out.data, out.len);
    if (id_out)
        memcpy(id_out, id, NS_HASH_BYTES);
    ns_buf_release(&body);
    ns_buf_release(&out);
}

static void s_flow_done(const char *name, bool bare)
{
    uint64_t sum = 0;
    if (ns_ledger_commit(s_l) != NS_OK ||
        ns_ledger_check_conservation(s_l, &sum) != NS_OK)
        s_die("%s: the ledger does not conserve", name);
    s_save(name, s_input.data, s_input.len);
    if (!bare)
        return;
    char what[128];
    for (int i = 0; i < s_n_bare; i++) {
        snprintf(what, sizeof what, "%s entry %d", name, i + 1);
        s_save(what, s_bare[i], s_bare_len[i]);
    }
}

/* ---- bodies ------------------------------------------------------------ */

static ns_entry_body_t s_amount(uint64_t amount)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    b.amount = amount;
    return b;
}

static ns_entry_body_t s_job(uint32_t requester, uint32_t n, uint64_t escrow,
                             uint64_t max_price, uint64_t collateral,
                             uint64_t deadline_ms, ns_hash_t job_id)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    uint8_t in[8] = {'f', 'u', 'z', 'z'};
    memcpy(in + 4, &n, 4);
    ns_hash(b.desc_id, in, sizeof in);
    memcpy(b.nonce, b.desc_id, sizeof b.nonce);
    b.nonce[0] ^= 0x5a;
    ns_ledger_job_id(b.job_id, ns_identity_pk(s_keys[requester]), b.desc_id,
                     b.nonce);
    b.escrow = escrow;
    b.max_price = max_price;
    b.collateral = collateral;
    b.deadline_ms = deadline_ms;
    memcpy(job_id, b.job_id, NS_HASH_BYTES);
    return b;
}

static ns_entry_body_t s_award(const ns_hash_t job_id, uint32_t provider,
                               uint64_t price)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    memcpy(b.bid.job_id, job_id, NS_HASH_BYTES);
    b.bid.price = price;
    b.bid.est_ms = 2500;
    b.bid.timestamp_ms = s_now;
    ns_bid_sign(&b.bid, s_keys[provider], s_g.network_id);
    return b;
}

static ns_entry_body_t s_ref(const ns_hash_t job_id, const ns_hash_t ref)
{
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.job_id, job_id, NS_HASH_BYTES);
    if (ref)
        memcpy(b.ref_id, ref, NS_HASH_BYTES);
    return b;
}

static ns_entry_body_t s_result(const ns_hash_t job_id, const ns_hash_t accept,
                                uint64_t n_items)
{
    ns_entry_body_t b = s_ref(job_id, accept);
    ns_hash(b.root, accept, NS_HASH_BYTES);
    b.n_items = n_items;
    return b;
}

static const uint8_t s_proof_yes[] = {1, 'i', 't', 'e', 'm', ' ', '3'};
static const uint8_t s_proof_no[] = {0, 'n', 'o', 'p', 'e'};

/* ---- flows --------------------------------------------------------------- */

enum { A = 0, B = 1, C = 2, D = 3 };

static void s_flow_transfers(uint8_t flags, const char *name)
{
    ns_hash_t t1, t2;
    s_flow(flags);
    ns_entry_body_t b;
    memset(&b, 0, sizeof b);
    memcpy(b.to, ns_identity_pk(s_keys[B]), NS_ID_BYTES);
    b.amount = 500;
    s_entry(A, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_OK, t1);
    b = s_amount(100);
    s_entry(B, NS_ENTRY_STAKE, &b, t1, 1, NS_OK, NULL);
    s_entry(B, NS_ENTRY_STAKE, &b, t1, 1, NS_ERR_CLAIMED, NULL);
    b = s_amount(40);
    s_entry(B, NS_ENTRY_UNSTAKE, &b, NULL, 0, NS_OK, NULL);
    memset(&b, 0, sizeof b);
    memcpy(b.to, ns_identity_pk(s_keys[B]), NS_ID_BYTES);
    b.amount = 7;
    s_entry(C, NS_ENTRY_TRANSFER, &b, NULL, 0, NS_OK, t2);
    b = s_amount(0);
    s_entry(B, NS_ENTRY_STAKE, &b, t2, 1, NS_OK, NULL);
    b = s_amount(FUZZ_CREDITS * 2);
    s_entry(D, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_FUNDS, NULL);
    s_flow_done(name, flags == 0);
}

static void s_flow_settle(uint8_t flags, const char *name, bool bare)
{
    ns_hash_t j, award, accept, result, settle;
    s_flow(flags);
    ns_entry_body_t b = s_amount(1000);
    s_entry(B, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, NULL);
    b = s_job(A, 1, 500, 300, 200, s_now + 100000, j);
    s_entry(A, NS_ENTRY_JOB, &b, NULL, 0, NS_OK, NULL);
    b = s_award(j, B, 250);
    s_entry(A, NS_ENTRY_AWARD, &b, NULL, 0, NS_OK, award);
    b = s_ref(j, award);
    s_entry(B, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_OK, accept);
    b = s_result(j, accept, 64);
    s_entry(B, NS_ENTRY_RESULT, &b, NULL, 0, NS_OK, result);
    b = s_ref(j, result);
    s_entry(A, NS_ENTRY_SETTLE, &b, NULL, 0, NS_OK, settle);
    b = s_amount(1);
    s_entry(B, NS_ENTRY_STAKE, &b, settle, 1, NS_OK, NULL);
    s_flow_done(name, bare);
}

static void s_flow_slash(void)
{
    ns_hash_t j, award, accept, result, award2, accept2, result2;
    s_flow(0);
    ns_entry_body_t b = s_amount(1000);
    s_entry(B, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, NULL);
    s_entry(C, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, NULL);
    b = s_job(A, 2, 900, 400, 300, s_now + 100000, j);
    s_entry(A, NS_ENTRY_JOB, &b, NULL, 0, NS_OK, NULL);
    b = s_award(j, B, 350);
    s_entry(A, NS_ENTRY_AWARD, &b, NULL, 0, NS_OK, award);
    b = s_ref(j, award);
    s_entry(B, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_OK, accept);
    b = s_result(j, accept, 16);
    s_entry(B, NS_ENTRY_RESULT, &b, NULL, 0, NS_OK, result);
    b = s_ref(j, result);
    b.proof = s_proof_yes;
    b.proof_len = sizeof s_proof_yes;
    s_entry(A, NS_ENTRY_SLASH, &b, NULL, 0, NS_OK, NULL);
    b = s_award(j, C, 300);
    s_entry(A, NS_ENTRY_AWARD, &b, NULL, 0, NS_OK, award2);
    b = s_ref(j, award2);
    s_entry(C, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_OK, accept2);
    b = s_result(j, accept2, 16);
    s_entry(C, NS_ENTRY_RESULT, &b, NULL, 0, NS_OK, result2);
    b = s_ref(j, result2);
    b.proof = s_proof_no;
    b.proof_len = sizeof s_proof_no;
    s_entry(A, NS_ENTRY_SLASH, &b, NULL, 0, NS_ERR_PROOF, NULL);
    b = s_ref(j, result2);
    s_entry(A, NS_ENTRY_SETTLE, &b, NULL, 0, NS_OK, NULL);
    s_flow_done("flow slash", true);
}

static void s_flow_cancels(void)
{
    ns_hash_t j, j2, award, accept, cancel, award2, cancel2;
    s_flow(0);
    ns_entry_body_t b = s_amount(1000);
    s_entry(B, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, NULL);
    uint64_t deadline = s_now + 100;
    b = s_job(A, 3, 500, 300, 200, deadline, j);
    s_entry(A, NS_ENTRY_JOB, &b, NULL, 0, NS_OK, NULL);
    b = s_award(j, B, 250);
    s_entry(A, NS_ENTRY_AWARD, &b, NULL, 0, NS_OK, award);
    b = s_ref(j, award);
    s_entry(B, NS_ENTRY_ACCEPT, &b, NULL, 0, NS_OK, accept);
    b = s_ref(j, accept);
    s_entry(A, NS_ENTRY_CANCEL, &b, NULL, 0, NS_ERR_JOBSTATE, NULL);
    s_now = deadline;
    s_entry(A, NS_ENTRY_CANCEL, &b, NULL, 0, NS_OK, cancel);
    b = s_amount(1);
    s_entry(B, NS_ENTRY_STAKE, &b, cancel, 1, NS_OK, NULL);
    /* a job cancelled and reopened, awarded, cancelled for good */
    b = s_job(A, 4, 400, 100, 50, s_now + 100000, j2);
    s_entry(A, NS_ENTRY_JOB, &b, NULL, 0, NS_OK, NULL);
    b = s_ref(j2, NULL);
    b.reopen = true;
    b.new_deadline_ms = s_now + 200000;
    s_entry(A, NS_ENTRY_CANCEL, &b, NULL, 0, NS_OK, NULL);
    b = s_award(j2, D, 90);
    s_entry(A, NS_ENTRY_AWARD, &b, NULL, 0, NS_OK, award2);
    b = s_ref(j2, NULL);
    s_entry(A, NS_ENTRY_CANCEL, &b, NULL, 0, NS_OK, cancel2);
    b = s_amount(0);
    s_entry(D, NS_ENTRY_STAKE, &b, cancel2, 1, NS_OK, NULL);
    s_flow_done("flow cancels", true);
}

static void s_flow_fork(void)
{
    ns_hash_t first;
    s_flow(0);
    ns_entry_body_t b = s_amount(10);
    s_entry(C, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, first);
    b = s_amount(20);
    s_entry(C, NS_ENTRY_STAKE, &b, NULL, 0, NS_OK, NULL);
    /* another seq 2 */
    ns_buf_t body, out;
    ns_hash_t id;
    ns_buf_init(&body);
    ns_buf_init(&out);
    b = s_amount(30);
    if (ns_entry_body_encode(NS_ENTRY_STAKE, &b, &body) != NS_OK ||
        ns_entry_encode(s_keys[C], s_g.network_id, 2, first, NS_ENTRY_STAKE,
                        body.data, body.len, NULL, 0, s_now + 1, &out,
                        id) != NS_OK)
        s_die("cannot encode the fork");
    if (ns_ledger_ingest(s_l, out.data, out.len, NULL, NULL) != NS_ERR_FORK)
        s_die("the fork is not a fork");
    s_append_record(out.data, out.len);
    s_save("fork twin entry", out.data, out.len);
    b = s_amount(1);
    s_entry(C, NS_ENTRY_STAKE, &b, NULL, 0, NS_ERR_BANNED, NULL);
    ns_buf_release(&body);
    ns_buf_release(&out);
    s_flow_done("flow fork", false);
}

/* The settle flow's records in reverse: everything waits, then applies. */
static void s_flow_backwards(void)
{
    s_flow_settle(0, "flow settle (for backwards)", false);
    size_t o = 1, n_rec = 0, off[64], len[64];
    while (o + 2 <= s_input.len && n_rec < 64) {
        size_t n = (size_t)s_input.data[o] << 8 | s_input.data[o + 1];
        off[n_rec] = o + 2;
        len[n_rec++] = n;
        o += 2 + n;
    }
    ns_buf_t rev;
    ns_buf_init(&rev);
    uint8_t flags = 0;
    if (ns_buf_append(&rev, &flags, 1) != NS_OK)
        s_die("out of memory");
    for (size_t i = n_rec; i-- > 0;) {
        uint8_t l2[2] = {(uint8_t)(len[i] >> 8), (uint8_t)len[i]};
        if (ns_buf_append(&rev, l2, 2) != NS_OK ||
            ns_buf_append(&rev, s_input.data + off[i], len[i]) != NS_OK)
            s_die("out of memory");
    }
    s_save("flow settle backwards", rev.data, rev.len);
    ns_buf_release(&rev);
}

/* The settle flow with a signature and a bid broken: only FUZZ_RESIGN
 * and FUZZ_RESIGN_BID make it whole again. */
static void s_flow_resign(void)
{
    s_flow_settle(FUZZ_RESIGN | FUZZ_RESIGN_BID | 0x04, "flow settle resign",
                  false);
    size_t o = 1, rec = 0;
    ns_buf_t m;
    ns_buf_init(&m);
    if (ns_buf_append(&m, s_input.data, s_input.len) != NS_OK)
        s_die("out of memory");
    while (o + 2 <= m.len) {
        size_t n = (size_t)m.data[o] << 8 | m.data[o + 1];
        uint8_t *e = m.data + o + 2;
        if (rec == 1) /* the JOB's signature */
            e[n - 1] ^= 0x40;
        if (rec == 2) { /* the AWARD's bid: its signature ends the body */
            ns_entry_t de;
            if (ns_entry_decode(e, n, s_g.network_id, &de) != NS_OK ||
                de.type != NS_ENTRY_AWARD)
                s_die("record 3 is not the award");
            e[(size_t)(de.body - e) + de.body_len - 1] ^= 0x01;
        }
        o += 2 + n;
        rec++;
    }
    s_save("flow settle, broken sig and bid, resign flags", m.data, m.len);
    ns_buf_release(&m);
}

/* Bare-entry mutants of the first entry of the last flow. */
static void s_mutants(const uint8_t *e, size_t len, const char *name)
{
    char what[128];
    uint8_t *m = malloc(len + 1);
    if (!m)
        s_die("out of memory");
    snprintf(what, sizeof what, "%s truncated", name);
    s_save(what, e, len / 2);
    memcpy(m, e, len);
    m[1] = 2;
    snprintf(what, sizeof what, "%s version 2", name);
    s_save(what, m, len);
    memcpy(m, e, len);
    m[len] = 0xc0;
    snprintf(what, sizeof what, "%s trailing byte", name);
    s_save(what, m, len + 1);
    memcpy(m, e, len);
    m[len - 1] ^= 0x01;
    snprintf(what, sizeof what, "%s flipped signature", name);
    s_save(what, m, len);
    free(m);
}

static void s_cleanup(void)
{
    char path[1200];
    ns_ledger_close(&s_l);
    snprintf(path, sizeof path, "%s/ledger/data.mdb", s_tmp);
    unlink(path);
    snprintf(path, sizeof path, "%s/ledger/lock.mdb", s_tmp);
    unlink(path);
    snprintf(path, sizeof path, "%s/ledger", s_tmp);
    rmdir(path);
    rmdir(s_tmp);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    s_out = argv[1];
    if (sodium_init() < 0 || ns_mkdir_p(s_out, 0755) != NS_OK)
        s_die("cannot initialise or create %s", s_out);
    const char *tmp = getenv("TMPDIR");
    snprintf(s_tmp, sizeof s_tmp, "%s/ns-gen-entry-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s_tmp))
        s_die("mkdtemp");
    atexit(s_cleanup);
    for (uint32_t i = 0; i < FUZZ_KEYS; i++)
        if (!(s_keys[i] = fuzz_key(s_tmp, i)))
            s_die("key %u", i);
    if (fuzz_genesis(s_keys, &s_g) != NS_OK)
        s_die("genesis");
    ns_buf_init(&s_input);

    s_flow_transfers(0, "flow transfers");
    s_flow_transfers(0x04, "flow transfers, reopen");
    if (s_n_bare > 0)
        s_mutants(s_bare[0], s_bare_len[0], "transfer");
    s_flow_settle(0, "flow settle", true);
    s_flow_slash();
    if (s_n_bare > 6)
        s_mutants(s_bare[6], s_bare_len[6], "slash");
    s_flow_cancels();
    s_flow_fork();
    s_flow_backwards();
    s_flow_resign();
    printf("gen_entry_corpus: %d files in %s\n", s_written, s_out);

    for (int i = 0; i < s_n_bare; i++)
        free(s_bare[i]);
    ns_buf_release(&s_input);
    ns_genesis_release(&s_g);
    for (uint32_t i = 0; i < FUZZ_KEYS; i++)
        ns_identity_destroy(&s_keys[i]);
    return 0;
}
