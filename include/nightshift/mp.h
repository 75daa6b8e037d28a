/* mp.h - a strict, allocation-free msgpack reader for hostile input, and
 * small helpers around msgpack-c's packer for writing.
 *
 * Why not msgpack-c's unpacker for input: it allocates storage for a
 * container from the count in its header before any element is read, so a
 * 5-byte header can ask for gigabytes. This reader checks every declared
 * length against the bytes that remain, demands exact types, and has a
 * sticky error: after the first failure every call returns that error, so
 * a decoder can read a whole structure and test the error once.
 *
 * Writing uses msgpack-c (msgpack_packer over a msgpack_sbuffer).
 */
#ifndef NIGHTSHIFT_MP_H
#define NIGHTSHIFT_MP_H

#include "nightshift/err.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p; /* next unread byte */
    size_t left;      /* bytes remaining */
    int err;          /* first error, sticky; NS_OK while all is well */
} ns_mpr_t;

void ns_mpr_init(ns_mpr_t *r, const void *buf, size_t len);

/* Containers: *n is the declared count; NS_ERR_TOOBIG if over max. */
int ns_mpr_array(ns_mpr_t *r, uint32_t *n, uint32_t max);
/* An array of exactly n elements (fixed layouts). */
int ns_mpr_array_exact(ns_mpr_t *r, uint32_t n);
int ns_mpr_uint(ns_mpr_t *r, uint64_t *v); /* non-negative integers */
int ns_mpr_int(ns_mpr_t *r, int64_t *v);   /* any msgpack integer */
int ns_mpr_u32(ns_mpr_t *r, uint32_t *v);  /* uint that fits 32 bits */
int ns_mpr_bool(ns_mpr_t *r, bool *v);
int ns_mpr_f64(ns_mpr_t *r, double *v); /* float 32 or 64 */
/* bin of at most max bytes; *p borrows from the input buffer. */
int ns_mpr_bin(ns_mpr_t *r, const uint8_t **p, size_t *n, size_t max);
/* bin of exactly n bytes, copied to out. */
int ns_mpr_bin_exact(ns_mpr_t *r, void *out, size_t n);
/* str of at most max bytes copied to out[max + 1] with a NUL; rejects
 * embedded NULs and control characters (these strings reach logs). */
int ns_mpr_str(ns_mpr_t *r, char *out, size_t max);
/* After the last value: NS_ERR_TRAILING if bytes remain. */
int ns_mpr_end(ns_mpr_t *r);

/* A growable byte buffer (git's strbuf idea); init/release, no hidden
 * global state. */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} ns_buf_t;

void ns_buf_init(ns_buf_t *b);
void ns_buf_release(ns_buf_t *b);
int ns_buf_append(ns_buf_t *b, const void *data, size_t len) NS_MUST_CHECK;

/* A msgpack-c packer that writes into an ns_buf_t: ns_mp_writer_init
 * empties buf and points pk at it; the first allocation failure stays in
 * w->err (check it once, after packing). */
typedef struct {
    ns_buf_t *buf;
    int err;
} ns_mp_writer_t;

void ns_mp_writer_init(ns_mp_writer_t *w, msgpack_packer *pk, ns_buf_t *buf);

/* Writing (msgpack-c). */
void ns_mp_bin(msgpack_packer *pk, const void *data, size_t len);
void ns_mp_str(msgpack_packer *pk, const char *s);
/* An amount for people and scripts: micro-credits packed as credits, a
 * float64 (exact to the micro-credit below 2^53 micro-credits); the JSON
 * of a document shows it as a plain decimal ("12.5", "1000000"). */
void ns_mp_credits(msgpack_packer *pk, uint64_t micro);

/* Reading a document unpacked with msgpack-c's object API: the value at a
 * key, or at a dotted path of maps ("ledger.rejected"); NULL when a step
 * is missing or not a map. */
const msgpack_object *ns_mp_obj_get(const msgpack_object *o, const char *path);

/* Render any msgpack value as JSON (for --json output of control replies).
 * Input is checked with the strict reader rules (caps, depth <= 32);
 * bin values become lowercase hex strings. Returns malloc'd text. */
int ns_mp_to_json(const void *buf, size_t len, char **json,
                  int pretty) NS_MUST_CHECK;

#endif
