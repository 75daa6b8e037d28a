/* flood.c - ns_flood: a hostile peer for the integration tests.
 *
 * Connects one ZeroMQ DEALER with CURVE to a node address ID@tcp://HOST:PORT
 * (server key = X25519 form of ID, client keys from a fresh identity, the
 * same socket options as p2p/transport.c), waits for the handshake, then
 * sends, in this order:
 *
 *   --garbage N   frames of random bytes (1..--max-size bytes)
 *   --bad-sig N   well-formed, distinct heartbeat envelopes whose last
 *                 signature byte is flipped
 *   --replay N    one valid signed heartbeat, the same bytes N times
 *   --stale N     valid signed heartbeats stamped --stale-age-ms in the past
 *   --sybil N     valid signed heartbeats, each from a fresh identity, all
 *                 advertising a dead endpoint (tcp://127.0.0.1:1) and an
 *                 interval of --interval-ms (the eclipse attempt of
 *                 issue 13: keys cost nothing)
 *   --size N      one signed heartbeat-type envelope of exactly N bytes
 *                 (its body is filler, not a heartbeat); above NS_MAX_MSG
 *                 an envelope of NS_MAX_MSG with N - NS_MAX_MSG bytes
 *                 appended
 *   --entry HEX   one ledger entry (encoded, e.g. from ns_forge) in a
 *                 signed ENTRY envelope, as gossip carries it; with
 *                 --key FILE (sign with that identity, not a fresh one)
 *                 and --ts MS (the envelope's timestamp), two runs send
 *                 the very same envelope: one message id
 *   --held MS     a node that cannot be dialled (behind a router): a
 *                 HELLO and heartbeats with the contact "" signed by our
 *                 own key, over our own connection, one heartbeat every
 *                 --interval-ms for MS milliseconds (keys cost nothing,
 *                 connections cost an address: the per-address cap on
 *                 held peers of docs/PROTOCOL.md, "Behind a router")
 *
 * at --rate R messages per second (0 = as fast as the socket takes them),
 * then waits for the queue to drain and exits. The heartbeats carry
 * --network HEX (the target's network id from `nightshift status --json`;
 * zeros by default, which the node refuses as another network) and an
 * interval of --interval-ms (1000 by default).
 *
 * The first line on stdout names the link the node will see:
 *   link=<first 8 bytes of our CURVE key, hex> key=<64 hex> id=<node id>
 * (the node's warnings say link=<same 16 hex>); the last line is a summary:
 *   sent garbage=N bad_sig=N replay=N stale=N sybil=N size=N total=N
 *        elapsed_ms=T
 *
 * Exit status: 0 when everything was handed to the socket (the queue is
 * then flushed for up to --timeout-ms before exit; the node may still be
 * reading it), 1 when the handshake or a send failed or timed out, 2 on a
 * usage error.
 */
#include "nightshift/identity.h"
#include "nightshift/ledger_sync.h" /* NS_MSG_ENTRY */
#include "nightshift/util.h"
#include "nightshift/wire.h"

#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define S_MONITOR_EP "inproc://ns_flood.monitor"
#define S_MAX_GARBAGE 65536 /* cap on --max-size, bytes */

typedef struct {
    const char *addr;                         /* ID@tcp://HOST:PORT */
    uint64_t garbage, bad_sig, replay, stale; /* messages of each kind */
    uint64_t sybil;                           /* heartbeats from fresh keys */
    uint64_t size;         /* bytes of the one --size envelope, 0: none */
    uint64_t interval_ms;  /* put in the heartbeats */
    uint64_t rate;         /* messages per second, 0 = unlimited */
    uint32_t max_size;     /* garbage frame size cap, bytes */
    uint64_t stale_age_ms; /* how old --stale messages are */
    uint32_t timeout_ms;   /* handshake / send / flush limit */
    ns_hash_t network_id;  /* put in the heartbeats */
    const char *entry_hex; /* --entry: an encoded ledger entry, or NULL */
    const char *key_path;  /* --key: our identity, or NULL for a fresh one */
    uint64_t entry_ts;     /* --ts: the --entry envelope's time, 0: now */
    uint64_t held_ms;      /* --held: stay as an undiallable peer, ms */
} s_opts_t;

static const char s_usage[] =
    "usage: ns_flood ID@tcp://HOST:PORT [--garbage N] [--bad-sig N]\n"
    "                [--replay N] [--stale N] [--sybil N] [--size BYTES]\n"
    "                [--interval-ms MS] [--rate MSGS_PER_S]\n"
    "                [--network HEX] [--max-size BYTES] [--stale-age-ms MS]\n"
    "                [--timeout-ms MS] [--entry HEX [--key FILE] [--ts MS]]\n"
    "                [--held MS]\n"
    "\n"
    "Send hostile traffic to one nightshift node over a CURVE link (see the\n"
    "comment at the top of tests/tools/flood.c). Exit 0 when all was sent.\n";

static int s_u64_arg(const char *flag, const char *v, uint64_t *out)
{
    if (!v || ns_parse_u64(v, out) != NS_OK) {
        fprintf(stderr, "ns_flood: %s needs a number\n", flag);
        return -1;
    }
    return 0;
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->max_size = 512;
    o->stale_age_ms = 10 * 60 * 1000;
    o->timeout_ms = 10000;
    o->interval_ms = 1000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        int rc = 0;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(s_usage, stdout);
            exit(0);
        } else if (strcmp(a, "--garbage") == 0) {
            rc = s_u64_arg(a, v, &o->garbage);
            i++;
        } else if (strcmp(a, "--bad-sig") == 0) {
            rc = s_u64_arg(a, v, &o->bad_sig);
            i++;
        } else if (strcmp(a, "--replay") == 0) {
            rc = s_u64_arg(a, v, &o->replay);
            i++;
        } else if (strcmp(a, "--stale") == 0) {
            rc = s_u64_arg(a, v, &o->stale);
            i++;
        } else if (strcmp(a, "--held") == 0) {
            rc = s_u64_arg(a, v, &o->held_ms);
            i++;
        } else if (strcmp(a, "--sybil") == 0) {
            rc = s_u64_arg(a, v, &o->sybil);
            i++;
        } else if (strcmp(a, "--size") == 0) {
            rc = s_u64_arg(a, v, &o->size);
            if (rc == 0 && (o->size < 65536 + NS_ENVELOPE_OVERHEAD ||
                            o->size > 4 * NS_MAX_MSG)) {
                fprintf(stderr, "ns_flood: --size must be %d..%d\n",
                        65536 + NS_ENVELOPE_OVERHEAD, 4 * NS_MAX_MSG);
                rc = -1;
            }
            i++;
        } else if (strcmp(a, "--interval-ms") == 0) {
            rc = s_u64_arg(a, v, &o->interval_ms);
            if (rc == 0 && o->interval_ms > UINT32_MAX) {
                fprintf(stderr, "ns_flood: --interval-ms is a u32\n");
                rc = -1;
            }
            i++;
        } else if (strcmp(a, "--rate") == 0) {
            rc = s_u64_arg(a, v, &o->rate);
            i++;
        } else if (strcmp(a, "--stale-age-ms") == 0) {
            rc = s_u64_arg(a, v, &o->stale_age_ms);
            i++;
        } else if (strcmp(a, "--max-size") == 0) {
            rc = s_u64_arg(a, v, &x);
            if (rc == 0 && (x < 1 || x > S_MAX_GARBAGE)) {
                fprintf(stderr, "ns_flood: --max-size must be 1..%d\n",
                        S_MAX_GARBAGE);
                rc = -1;
            }
            o->max_size = (uint32_t)x;
            i++;
        } else if (strcmp(a, "--timeout-ms") == 0) {
            rc = s_u64_arg(a, v, &x);
            if (rc == 0 && (x < 1 || x > 3600000)) {
                fprintf(stderr, "ns_flood: --timeout-ms must be 1..3600000\n");
                rc = -1;
            }
            o->timeout_ms = (uint32_t)x;
            i++;
        } else if (strcmp(a, "--entry") == 0) {
            if (!v || !*v || strlen(v) % 2 || strlen(v) > 2 * 70000) {
                fprintf(stderr, "ns_flood: --entry needs hex bytes\n");
                rc = -1;
            }
            o->entry_hex = v;
            i++;
        } else if (strcmp(a, "--key") == 0) {
            if (!v || !*v) {
                fprintf(stderr, "ns_flood: --key needs a key file\n");
                rc = -1;
            }
            o->key_path = v;
            i++;
        } else if (strcmp(a, "--ts") == 0) {
            rc = s_u64_arg(a, v, &o->entry_ts);
            i++;
        } else if (strcmp(a, "--network") == 0) {
            if (!v || strlen(v) != 2 * NS_HASH_BYTES ||
                ns_unhex(o->network_id, NS_HASH_BYTES, v) != NS_OK) {
                fprintf(stderr, "ns_flood: --network needs %d hex digits\n",
                        2 * NS_HASH_BYTES);
                rc = -1;
            }
            i++;
        } else if (a[0] != '-' && !o->addr) {
            o->addr = a;
        } else {
            fprintf(stderr, "ns_flood: unknown argument '%s' (see --help)\n",
                    a);
            rc = -1;
        }
        if (rc != 0)
            return -1;
    }
    if (!o->addr) {
        fprintf(stderr, "ns_flood: a node address ID@tcp://HOST:PORT is "
                        "required (see --help)\n");
        return -1;
    }
    return 0;
}

/* A heartbeat envelope from `id` stamped ts_ms; `seq` makes each distinct. */
static int s_heartbeat(const ns_identity_t *id, const s_opts_t *o,
                       uint64_t ts_ms, uint64_t seq, ns_buf_t *body,
                       ns_buf_t *out)
{
    ns_heartbeat_t hb;
    memset(&hb, 0, sizeof hb);
    memcpy(hb.network_id, o->network_id, NS_HASH_BYTES);
    /* Port 1 on loopback: nothing listens there, so a node that accepts
     * this heartbeat dials nowhere and forgets us after 3 intervals. */
    snprintf(hb.endpoint, sizeof hb.endpoint, "%s",
             o->held_ms ? "" : "tcp://127.0.0.1:1");
    snprintf(hb.version, sizeof hb.version, "flood");
    hb.interval_ms = (uint32_t)o->interval_ms;
    hb.sent_us = ts_ms * 1000 + seq % 1000;
    snprintf(hb.region, sizeof hb.region, "flood");
    hb.ledger_entries = seq;
    int rc = ns_heartbeat_encode(&hb, body);
    if (rc != NS_OK)
        return rc;
    return ns_envelope_encode(id, NS_MSG_HEARTBEAT, ts_ms, body->data,
                              body->len, out, NULL);
}

/* A heartbeat-type envelope of exactly `size` bytes (filler body): the
 * timestamp of today takes 9 bytes and a body of 64 KiB or more a 5-byte
 * header, so the envelope adds NS_ENVELOPE_OVERHEAD. Above NS_MAX_MSG,
 * the largest envelope with the rest appended. */
static int s_sized(const ns_identity_t *id, uint64_t size, ns_buf_t *out)
{
    uint64_t whole = size > NS_MAX_MSG ? NS_MAX_MSG : size;
    size_t body_len = (size_t)(whole - NS_ENVELOPE_OVERHEAD);
    uint8_t *filler = calloc(1, body_len);
    if (!filler)
        return NS_ERR_NOMEM;
    int rc = ns_envelope_encode(id, NS_MSG_HEARTBEAT, ns_now_ms(), filler,
                                body_len, out, NULL);
    free(filler);
    if (rc == NS_OK && out->len != whole)
        rc = NS_ERR_INVAL;
    for (uint64_t i = whole; rc == NS_OK && i < size; i++)
        rc = ns_buf_append(out, "", 1);
    return rc;
}

/* Wait for the CURVE handshake on the monitored socket: 0 on success. */
static int s_wait_handshake(void *monitor, uint32_t timeout_ms)
{
    uint64_t deadline = ns_mono_ms() + timeout_ms;
    for (;;) {
        uint64_t now = ns_mono_ms();
        if (now >= deadline) {
            fprintf(stderr,
                    "ns_flood: no CURVE handshake within %u ms (is "
                    "the node running at that address?)\n",
                    timeout_ms);
            return -1;
        }
        int left = (int)(deadline - now);
        zmq_setsockopt(monitor, ZMQ_RCVTIMEO, &left, sizeof left);
        zmq_msg_t ev, ep;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, monitor, 0) < 0) {
            zmq_msg_close(&ev);
            continue; /* timeout: the loop reports it */
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2)
            memcpy(&event, zmq_msg_data(&ev), 2);
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) { /* second frame: the endpoint */
            zmq_msg_init(&ep);
            if (zmq_msg_recv(&ep, monitor, 0) >= 0)
                zmq_msg_close(&ep);
        }
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            return 0;
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
            event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
            event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            fprintf(stderr,
                    "ns_flood: CURVE handshake failed (event 0x%x): "
                    "wrong id for that endpoint, or we are banned\n",
                    event);
            return -1;
        }
    }
}

/* Pace to o->rate messages per second from t0_us, counting n sent. */
static void s_pace(const s_opts_t *o, uint64_t t0_us, uint64_t n)
{
    if (o->rate == 0)
        return;
    uint64_t due_us = t0_us + n * 1000000ull / o->rate;
    uint64_t now = ns_mono_us();
    if (due_us > now) {
        uint64_t wait = due_us - now;
        struct timespec ts = {(time_t)(wait / 1000000),
                              (long)(wait % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
}

static int s_send(void *s, const uint8_t *buf, size_t len)
{
    if (zmq_send(s, buf, len, 0) != (int)len) {
        fprintf(stderr, "ns_flood: send failed: %s\n",
                zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    s_opts_t o;
    if (s_parse(argc, argv, &o) != 0)
        return 2;
    if (sodium_init() < 0) {
        fprintf(stderr, "ns_flood: libsodium failed to initialise\n");
        return 1;
    }
    uint8_t server_id[NS_ID_BYTES], server_curve[32], pub[32], sec[32];
    char endpoint[NS_ENDPOINT_MAX];
    if (ns_addr_parse(o.addr, server_id, endpoint) != NS_OK ||
        ns_id_curve_pk(server_id, server_curve) != NS_OK) {
        fprintf(stderr,
                "ns_flood: bad address '%s': expected "
                "ID@tcp://HOST:PORT\n",
                o.addr);
        return 2;
    }

    int exit_code = 1;
    void *ctx = NULL, *s = NULL, *monitor = NULL;
    uint8_t *garbage = NULL;
    ns_buf_t body, msg;
    ns_buf_init(&body);
    ns_buf_init(&msg);
    ns_identity_t *id = NULL;
    if (o.key_path && ns_identity_load(o.key_path, &id) != NS_OK) {
        fprintf(stderr, "ns_flood: cannot load --key %s\n", o.key_path);
        goto out;
    }
    if (!id)
        id = ns_identity_generate();
    if (!id || ns_identity_curve(id, pub, sec) != NS_OK) {
        fprintf(stderr, "ns_flood: cannot make an identity\n");
        goto out;
    }
    char keyhex[65], idtext[NS_ID_TEXT_LEN + 1];
    ns_hex(keyhex, pub, 32);
    ns_id_text(idtext, ns_identity_pk(id));
    printf("link=%.16s key=%s id=%s\n", keyhex, keyhex, idtext);
    fflush(stdout);

    ctx = zmq_ctx_new();
    s = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    if (!s) {
        fprintf(stderr, "ns_flood: zmq: %s\n", zmq_strerror(zmq_errno()));
        goto out;
    }
    /* As p2p/transport.c's DEALER, but a deep queue: we want to push. */
    int linger = (int)o.timeout_ms, hwm = 100000, sndtimeo = (int)o.timeout_ms;
    int hb_ivl = 2000, hb_timeout = 6000, handshake = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo);
    zmq_setsockopt(s, ZMQ_HEARTBEAT_IVL, &hb_ivl, sizeof hb_ivl);
    zmq_setsockopt(s, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof hb_timeout);
    zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &handshake, sizeof handshake);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_curve, 32);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 32);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 32);
    sodium_memzero(sec, sizeof sec);
    if (zmq_socket_monitor(s, S_MONITOR_EP,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
        !(monitor = zmq_socket(ctx, ZMQ_PAIR)) ||
        zmq_connect(monitor, S_MONITOR_EP) != 0) {
        fprintf(stderr, "ns_flood: socket monitor: %s\n",
                zmq_strerror(zmq_errno()));
        goto out;
    }
    if (zmq_connect(s, endpoint) != 0) {
        fprintf(stderr, "ns_flood: cannot connect to %s: %s\n", endpoint,
                zmq_strerror(zmq_errno()));
        goto out;
    }
    if (s_wait_handshake(monitor, o.timeout_ms) != 0)
        goto out;

    garbage = malloc(o.max_size);
    if (!garbage)
        goto out;
    uint64_t t0_us = ns_mono_us(), n = 0;
    for (uint64_t i = 0; i < o.garbage; i++, n++) {
        size_t len = 1 + ns_rand_below(o.max_size);
        randombytes_buf(garbage, len);
        s_pace(&o, t0_us, n);
        if (s_send(s, garbage, len) != 0)
            goto out;
    }
    for (uint64_t i = 0; i < o.bad_sig; i++, n++) {
        if (s_heartbeat(id, &o, ns_now_ms(), i, &body, &msg) != NS_OK)
            goto out;
        msg.data[msg.len - 1] ^= 0x01; /* the signature ends the envelope */
        s_pace(&o, t0_us, n);
        if (s_send(s, msg.data, msg.len) != 0)
            goto out;
    }
    if (o.replay) {
        if (s_heartbeat(id, &o, ns_now_ms(), 0, &body, &msg) != NS_OK)
            goto out;
        for (uint64_t i = 0; i < o.replay; i++, n++) {
            s_pace(&o, t0_us, n);
            if (s_send(s, msg.data, msg.len) != 0)
                goto out;
        }
    }
    for (uint64_t i = 0; i < o.stale; i++, n++) {
        uint64_t now = ns_now_ms();
        uint64_t ts = now > o.stale_age_ms ? now - o.stale_age_ms : 0;
        if (s_heartbeat(id, &o, ts, i, &body, &msg) != NS_OK)
            goto out;
        s_pace(&o, t0_us, n);
        if (s_send(s, msg.data, msg.len) != 0)
            goto out;
    }
    for (uint64_t i = 0; i < o.sybil; i++, n++) {
        ns_identity_t *fresh = ns_identity_generate();
        int rc = fresh ? s_heartbeat(fresh, &o, ns_now_ms(), i, &body, &msg)
                       : NS_ERR_NOMEM;
        ns_identity_destroy(&fresh);
        if (rc != NS_OK)
            goto out;
        s_pace(&o, t0_us, n);
        if (s_send(s, msg.data, msg.len) != 0)
            goto out;
    }
    if (o.size) {
        if (s_sized(id, o.size, &msg) != NS_OK)
            goto out;
        s_pace(&o, t0_us, n++);
        if (s_send(s, msg.data, msg.len) != 0)
            goto out;
    }
    if (o.entry_hex) {
        size_t elen = strlen(o.entry_hex) / 2;
        uint8_t *entry = malloc(elen);
        int erc = entry ? ns_unhex(entry, elen, o.entry_hex) : NS_ERR_NOMEM;
        if (erc == NS_OK)
            erc = ns_envelope_encode(id, NS_MSG_ENTRY,
                                     o.entry_ts ? o.entry_ts : ns_now_ms(),
                                     entry, elen, &msg, NULL);
        free(entry);
        if (erc != NS_OK || s_send(s, msg.data, msg.len) != 0) {
            fprintf(stderr, "ns_flood: --entry: %s\n", ns_strerror(erc));
            goto out;
        }
        n++;
    }
    if (o.held_ms) {
        ns_hello_t hello;
        memset(&hello, 0, sizeof hello);
        memcpy(hello.network_id, o.network_id, NS_HASH_BYTES);
        snprintf(hello.version, sizeof hello.version, "flood");
        if (ns_hello_encode(&hello, &body) != NS_OK ||
            ns_envelope_encode(id, NS_MSG_HELLO, ns_now_ms(), body.data,
                               body.len, &msg, NULL) != NS_OK ||
            s_send(s, msg.data, msg.len) != 0)
            goto out;
        n++;
        uint64_t until = ns_mono_ms() + o.held_ms;
        for (uint64_t i = 0; ns_mono_ms() < until; i++, n++) {
            body.len = 0;
            if (s_heartbeat(id, &o, ns_now_ms(), i, &body, &msg) != NS_OK ||
                s_send(s, msg.data, msg.len) != 0)
                goto out;
            /* drain what the node sends back (PEERS, its heartbeats) */
            zmq_msg_t m;
            zmq_msg_init(&m);
            while (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) >= 0)
                ;
            zmq_msg_close(&m);
            struct timespec ts = {(time_t)(o.interval_ms / 1000),
                                  (long)(o.interval_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    uint64_t elapsed_ms = (ns_mono_us() - t0_us) / 1000;
    printf("sent garbage=%llu bad_sig=%llu replay=%llu stale=%llu sybil=%llu "
           "size=%llu total=%llu elapsed_ms=%llu\n",
           (unsigned long long)o.garbage, (unsigned long long)o.bad_sig,
           (unsigned long long)o.replay, (unsigned long long)o.stale,
           (unsigned long long)o.sybil, (unsigned long long)o.size,
           (unsigned long long)n, (unsigned long long)elapsed_ms);
    fflush(stdout);
    exit_code = 0;
out:
    /* Closing with linger > 0 makes zmq_ctx_term wait (up to --timeout-ms)
     * until the queue has reached the node. */
    if (monitor)
        zmq_close(monitor);
    if (s) {
        zmq_socket_monitor(s, NULL, 0);
        zmq_close(s);
    }
    if (ctx)
        zmq_ctx_term(ctx);
    free(garbage);
    ns_buf_release(&body);
    ns_buf_release(&msg);
    ns_identity_destroy(&id);
    return exit_code;
}
