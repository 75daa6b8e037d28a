/* wire.h - the signed message envelope and the p2p message bodies.
 *
 * Envelope (docs/PROTOCOL.md, "Envelope"): a msgpack array of six
 *   [version u8, type u8, sender bin(32), timestamp_ms u64, body bin,
 *    signature bin(64)]
 * The message id is BLAKE2b-256 of NS_WIRE_DOMAIN followed by the exact
 * bytes of elements 1..5 as they appear on the wire (no re-encoding); the
 * signature is Ed25519 over NS_WIRE_SIG_DOMAIN || id (version 2: signing
 * the id rather than the bytes makes a 128 KiB CHUNK cost one hash, not
 * two SHA-512 passes to sign and one to verify).
 *
 * Bodies are msgpack arrays with a fixed field order per type, carried as
 * the envelope's bin so that the envelope decodes without knowing them.
 * Every length has a named cap below; decoders reject extra or missing
 * fields, wrong types and trailing bytes.
 */
#ifndef NIGHTSHIFT_WIRE_H
#define NIGHTSHIFT_WIRE_H

#include "nightshift/devinfo.h"
#include "nightshift/err.h"
#include "nightshift/hash.h"
#include "nightshift/identity.h"
#include "nightshift/mp.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_WIRE_VERSION 2
#define NS_WIRE_DOMAIN "nightshift/msg/v2"        /* the id's */
#define NS_WIRE_SIG_DOMAIN "nightshift/msgsig/v2" /* the signature's */
#define NS_MAX_MSG (256 * 1024) /* whole envelope, bytes */
/* The most an envelope adds to its body as ns_envelope_encode writes it:
 * array 1, version 1, type 1, sender 2 + 32, timestamp 9, body header 5,
 * signature 2 + 64. So the largest body makes an envelope of exactly
 * NS_MAX_MSG bytes. */
#define NS_ENVELOPE_OVERHEAD 117
#define NS_MAX_BODY (NS_MAX_MSG - NS_ENVELOPE_OVERHEAD) /* body bin, bytes */
#define NS_MAX_VERSION_STR 32 /* software version text */
#define NS_MAX_REGION 32      /* region text */
#define NS_MAX_PEERS_MSG 64   /* addresses in one PEERS */
#define NS_MAX_PULL_IDS 2048  /* ids in one PULL */
#define NS_MAX_IHAVE_IDS 512  /* ids in one IHAVE */
#define NS_MAX_IWANT_IDS 512  /* ids in one IWANT */
/* A heartbeat's interval_ms must lie in this range: a peer is expired
 * after three of its intervals, so an unbounded one would keep a silent
 * key in every table for hours (docs/PROTOCOL.md, "Peer admission"). */
#define NS_MIN_HB_INTERVAL_MS 100
#define NS_MAX_HB_INTERVAL_MS 60000

typedef enum {
    NS_MSG_HELLO = 1,     /* direct: introduce a new link */
    NS_MSG_HEARTBEAT = 2, /* gossiped: liveness and offer */
    NS_MSG_PEERS = 3,     /* direct: peer exchange */
    NS_MSG_PULL = 4,      /* direct: ids I have; send me what I lack */
    NS_MSG_RELAY = 5,     /* direct: an envelope for a peer the sender
                             cannot reach, through one that can */
    NS_MSG_IHAVE = 6,     /* direct: ids of gossip I hold (lazy push) */
    NS_MSG_IWANT = 7,     /* direct: send me these, told by your IHAVE */
    NS_MSG_MESH = 8,      /* direct: true: you are in my gossip mesh (graft);
                             false: you are not (prune) */
} ns_msg_type;

/* The envelope inside a RELAY: its body is [to bin(32), envelope bin],
 * so the inner envelope is a little smaller than NS_MAX_BODY. */
#define NS_MAX_RELAYED (NS_MAX_BODY - 64)

/* Heartbeat flags (its optional 13th element; absent = 0). */
#define NS_HB_RELAY                                                            \
    1u /* the sender relays for peers that cannot be                           \
          dialled (node.relay = on) */
#define NS_HB_DIRECT                                                           \
    2u /* the sender sends each heartbeat straight to                          \
          every peer: one whose content did not change                         \
          is not passed on (docs/PROTOCOL.md, "Gossip") */
#define NS_HB_LIGHT                                                            \
    4u /* the sender is a light peer (`submit` without a                       \
          node): its endpoint lives as long as one command,                    \
          so peer exchange does not pass it on */
#define NS_HB_HEADS_SINCE                                                      \
    8u /* the sender answers HEADS_REQ with changes since                      \
          a counter (ledger_heads.h): ask it in that form */

/* The message types a decoder accepts, one bit per type (0..255). Owned
 * by the caller (the p2p keeps one and adds the types of the layers above
 * as they register handlers); a plain value, no allocation. */
typedef struct {
    uint64_t bits[4]; /* bit t % 64 of bits[t / 64]: type t is known */
} ns_wire_types_t;

/* The last built-in p2p type: NS_MSG_HELLO .. NS_MSG_LAST_BUILTIN. */
#define NS_MSG_LAST_BUILTIN NS_MSG_MESH

/* Exactly the built-in p2p types, NS_MSG_HELLO .. NS_MSG_LAST_BUILTIN. */
void ns_wire_types_init(ns_wire_types_t *types);
void ns_wire_types_add(ns_wire_types_t *types, uint8_t type);
void ns_wire_types_remove(ns_wire_types_t *types, uint8_t type);
/* False for any type above 255. */
bool ns_wire_types_has(const ns_wire_types_t *types, uint32_t type);
/* "hello", "heartbeat", "peers", "pull", "relay", "ihave", "iwant", "mesh";
 * "other" for any other type. */
const char *ns_wire_type_name(uint32_t type);

typedef struct {
    uint8_t version;
    uint8_t type;
    uint8_t sender[NS_ID_BYTES];
    uint64_t timestamp_ms;
    const uint8_t *body; /* borrowed from the decoded buffer */
    size_t body_len;
    uint8_t sig[NS_SIG_BYTES];
    const uint8_t *signed_part; /* elements 1..5, borrowed */
    size_t signed_len;
    ns_hash_t id; /* filled by ns_envelope_decode */
} ns_envelope_t;

/* Sign and encode. out is reset first. id_out may be NULL. */
int ns_envelope_encode(const ns_identity_t *id, uint8_t type,
                       uint64_t timestamp_ms, const uint8_t *body,
                       size_t body_len, ns_buf_t *out,
                       ns_hash_t id_out) NS_MUST_CHECK;

/* Strict structural decode and message id; does NOT check the signature.
 * A type that is not in types (borrowed, not NULL) is NS_ERR_MSGTYPE.
 * Errors: NS_ERR_TOOBIG, NS_ERR_TRUNCATED, NS_ERR_TYPE, NS_ERR_VERSION,
 * NS_ERR_MSGTYPE, NS_ERR_TRAILING. env borrows from buf. */
int ns_envelope_decode(const uint8_t *buf, size_t len,
                       const ns_wire_types_t *types,
                       ns_envelope_t *env) NS_MUST_CHECK;

/* NS_OK or NS_ERR_SIG. */
int ns_envelope_verify(const ns_envelope_t *env) NS_MUST_CHECK;

/* ---- bodies ---------------------------------------------------------- */

typedef struct {
    ns_hash_t network_id;           /* hash of the genesis file */
    char endpoint[NS_ENDPOINT_MAX]; /* where the sender listens: a contact
                                       (ns_contact_check): "" when it
                                       cannot be dialled */
    char version[NS_MAX_VERSION_STR + 1];
} ns_hello_t;

typedef struct {
    ns_hash_t network_id;
    char endpoint[NS_ENDPOINT_MAX];
    char version[NS_MAX_VERSION_STR + 1];
    uint32_t interval_ms; /* sender's heartbeat interval */
    uint64_t sent_us;     /* sender's wall clock at sending, microseconds */
    uint64_t price;       /* credits per device-second, in micro-credits */
    uint64_t stake;       /* credits staked */
    char region[NS_MAX_REGION + 1];
    uint32_t free_slots;     /* jobs it can take now */
    uint64_t ledger_entries; /* ledger head summary: entry count */
    ns_hash_t ledger_digest; /* and digest of all heads (zero if none) */
    uint32_t n_devices;
    ns_devinfo_t devices[NS_MAX_DEVICES];
    uint32_t flags; /* NS_HB_*; sent as a 13th element only when not 0,
                       so nodes that know 12 still read the others */
} ns_heartbeat_t;

/* RELAY body. */
typedef struct {
    uint8_t to[NS_ID_BYTES]; /* the final recipient */
    const uint8_t *env;      /* its envelope, signed by the RELAY's sender;
                                borrowed */
    size_t env_len;          /* 1 .. NS_MAX_RELAYED */
} ns_relay_t;

typedef struct {
    uint8_t id[NS_ID_BYTES];
    char endpoint[NS_ENDPOINT_MAX];
} ns_peer_addr_t;

typedef struct {
    uint32_t n;
    ns_peer_addr_t peers[NS_MAX_PEERS_MSG];
} ns_peers_t;

typedef struct {
    uint32_t n;
    const uint8_t *ids; /* n * 32 bytes, borrowed */
    /* Signer timestamp (ms) from which the list is complete: the asker
     * holds no stored message of the window signed at or after since_ms
     * that it does not list, so the answerer sends only messages signed
     * at or after it (docs/PROTOCOL.md, "Gossip"). 0: the old form, a
     * bare bin, or a list that is complete over the whole window. */
    uint64_t since_ms;
} ns_pull_t;

/* IHAVE and IWANT bodies: one bin of n ids, 1 <= n <= the type's cap. */
typedef struct {
    uint32_t n;
    const uint8_t *ids; /* n * 32 bytes, borrowed */
} ns_ids_t;

int ns_hello_encode(const ns_hello_t *m, ns_buf_t *out) NS_MUST_CHECK;
int ns_hello_decode(const uint8_t *buf, size_t len,
                    ns_hello_t *m) NS_MUST_CHECK;
int ns_heartbeat_encode(const ns_heartbeat_t *m, ns_buf_t *out) NS_MUST_CHECK;
int ns_heartbeat_decode(const uint8_t *buf, size_t len,
                        ns_heartbeat_t *m) NS_MUST_CHECK;
int ns_peers_encode(const ns_peers_t *m, ns_buf_t *out) NS_MUST_CHECK;
int ns_peers_decode(const uint8_t *buf, size_t len,
                    ns_peers_t *m) NS_MUST_CHECK;
int ns_pull_encode(const uint8_t *ids, uint32_t n, ns_buf_t *out) NS_MUST_CHECK;
int ns_pull_decode(const uint8_t *buf, size_t len, ns_pull_t *m) NS_MUST_CHECK;
/* A PULL complete from since_ms: [since_ms uint, ids bin]. since_ms 0
 * writes the old form (the bare bin), which every version reads. */
int ns_pull_encode_since(const uint8_t *ids, uint32_t n, uint64_t since_ms,
                         ns_buf_t *out) NS_MUST_CHECK;
/* IHAVE (cap NS_MAX_IHAVE_IDS) and IWANT (cap NS_MAX_IWANT_IDS): an
 * empty list or one over the cap is refused both ways. */
int ns_ihave_encode(const uint8_t *ids, uint32_t n,
                    ns_buf_t *out) NS_MUST_CHECK;
int ns_ihave_decode(const uint8_t *buf, size_t len, ns_ids_t *m) NS_MUST_CHECK;
int ns_iwant_encode(const uint8_t *ids, uint32_t n,
                    ns_buf_t *out) NS_MUST_CHECK;
int ns_iwant_decode(const uint8_t *buf, size_t len, ns_ids_t *m) NS_MUST_CHECK;
/* MESH: one msgpack bool (graft true, prune false), nothing else. */
int ns_mesh_encode(bool graft, ns_buf_t *out) NS_MUST_CHECK;
int ns_mesh_decode(const uint8_t *buf, size_t len, bool *graft) NS_MUST_CHECK;
int ns_relay_encode(const ns_relay_t *m, ns_buf_t *out) NS_MUST_CHECK;
int ns_relay_decode(const uint8_t *buf, size_t len,
                    ns_relay_t *m) NS_MUST_CHECK;

#endif
