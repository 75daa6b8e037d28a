/* blobs.h - a content-addressed store of byte blobs on disk (node layer):
 * job inputs that a provider keeps so that a job reusing them does not
 * fetch them again, and that any node serves by hash (the inputs a SLASH
 * needs to be re-run by every node).
 *
 * <dir>/<64 hex digits of the BLAKE2b-256 of the bytes>, written
 * atomically (ns_file_write_atomic), checked against its name when read
 * (a corrupt file is deleted and reported missing). The store holds at
 * most cap bytes: a put evicts the least recently used blobs (file
 * modification time, refreshed by each get) until the new one fits.
 * Not thread-safe; one store per datadir.
 *
 * A blob being fetched is received into <dir>/<hex>.part (ns_blobs_partial)
 * and renamed to its name once its hash checks (ns_blobs_complete): the
 * bytes go to disk as they arrive, and a partial file left by a transfer
 * that was cut is resumed by the next fetch of the same blob. Partial
 * files count against the cap and are evicted like blobs.
 *
 * A requester's own inputs come in from the user's files
 * (ns_blobs_copy_t): copied in pieces into <dir>/.in-XXXXXX (locked
 * while it is written; one left by a crash is removed by the next
 * ns_blobs_open), hashed on the way, renamed to their name. Blob files are
 * never written in place: a mapping of one stays what it was whatever
 * happens to the user's file or to the store (an evicted blob's pages live
 * on while mapped).
 */
#ifndef NIGHTSHIFT_BLOBS_H
#define NIGHTSHIFT_BLOBS_H

#include "nightshift/err.h"
#include "nightshift/hash.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_BLOBS_DEFAULT_CAP (UINT64_C(1) << 30) /* 1 GiB */

typedef struct ns_blobs ns_blobs_t;

/* Create dir (0700) if needed. NULL + *err: NS_ERR_IO (cannot create or
 * read the directory), NS_ERR_NOMEM. */
ns_blobs_t *ns_blobs_open(const char *dir, uint64_t cap_bytes, int *err);
void ns_blobs_close(ns_blobs_t **b);

bool ns_blobs_has(ns_blobs_t *b, const ns_hash_t id);
/* Store data under id: NS_ERR_CORRUPT when it does not hash to id,
 * NS_ERR_TOOBIG when it is larger than the whole store, NS_ERR_IO (disk
 * full, read-only): nothing stored. Storing a blob already there touches
 * it. */
int ns_blobs_put(ns_blobs_t *b, const ns_hash_t id, const uint8_t *data,
                 size_t len) NS_MUST_CHECK;
/* The blob's bytes (malloc'd, caller frees): NS_ERR_NOTFOUND, NS_ERR_IO,
 * NS_ERR_NOMEM. */
int ns_blobs_get(ns_blobs_t *b, const ns_hash_t id, uint8_t **data,
                 size_t *len) NS_MUST_CHECK;

/* The partial file of blob id, size bytes when complete, opened read-write
 * and locked (flock) in *fd: what an earlier, cut transfer left in it stays
 * (ns_fetch_add_file resumes from it). Room is made for it (LRU). Returns
 * NS_ERR_TOOBIG (larger than the store), NS_ERR_EXISTS (another transfer
 * is filling it now), NS_ERR_IO (the directory is unwritable or gone). */
int ns_blobs_partial(ns_blobs_t *b, const ns_hash_t id, uint64_t size,
                     int *fd) NS_MUST_CHECK;
/* The partial file of id is complete and checked: make it the blob
 * (rename). fd stays open and valid. NS_ERR_IO. */
int ns_blobs_complete(ns_blobs_t *b, const ns_hash_t id,
                      uint64_t size) NS_MUST_CHECK;
/* Empty the partial file of id (its content failed the check). */
void ns_blobs_discard(ns_blobs_t *b, const ns_hash_t id);

/* The blob mapped read-only (mmap, pages from the file, not the heap),
 * checked against id: *data until ns_blobs_unmap. The check is a hash of
 * the whole blob, but for a file this handle hashed before and that has
 * not changed since (device, inode, size and mtime, the mtime at least
 * 2 s older than that hash: blobs.c, s_verified_t). Touches the
 * file's LRU time when it is a minute old. NS_ERR_NOTFOUND (absent, or
 * corrupt: then deleted), NS_ERR_IO. */
int ns_blobs_map(ns_blobs_t *b, const ns_hash_t id, const uint8_t **data,
                 size_t *len) NS_MUST_CHECK;
/* Bytes ns_blobs_map hashed on this handle so far. */
uint64_t ns_blobs_map_hashed(const ns_blobs_t *b);
/* Map len bytes of an open file read-only, unchecked (the caller checked
 * them as they arrived). NS_ERR_IO. */
int ns_blobs_map_fd(int fd, size_t len, const uint8_t **data) NS_MUST_CHECK;
void ns_blobs_unmap(const uint8_t *data, size_t len);

/* Blob id opened read-only, its bytes NOT checked (a bid's proof of
 * possession reads a few pieces of it; ns_blobs_map checks the whole
 * before a job uses it): *fd (caller closes) and *size. NS_ERR_NOTFOUND,
 * NS_ERR_IO. */
int ns_blobs_open_ro(ns_blobs_t *b, const ns_hash_t id, int *fd,
                     uint64_t *size) NS_MUST_CHECK;
/* Keep a copy of data under its hash (into id) as a cache entry: like
 * ns_blobs_put, but written through the partial file and not synced (a
 * copy lost in a crash is only fetched again; every read checks the bytes
 * against the name). NS_ERR_EXISTS when a transfer is filling the same
 * blob now, NS_ERR_TOOBIG, NS_ERR_IO. */
int ns_blobs_keep(ns_blobs_t *b, const uint8_t *data, size_t len,
                  ns_hash_t id) NS_MUST_CHECK;

/* Up to cap bytes of blob id from offset into buf (*got of them) and the
 * blob's size (*total), read from its file without checking its hash:
 * for serving chunks to a peer, who checks the whole against id (a
 * damaged file is caught there, and the peer asks another). One chunk in
 * memory, never the blob. NS_ERR_NOTFOUND, NS_ERR_INVAL (offset at or
 * past the end), NS_ERR_IO. */
int ns_blobs_read(ns_blobs_t *b, const ns_hash_t id, uint64_t offset,
                  uint8_t *buf, size_t cap, size_t *got,
                  uint64_t *total) NS_MUST_CHECK;

/* Piece of a file copied at a time (ns_blobs_copy_t): its only heap. */
#define NS_BLOBS_COPY_PIECE (1u << 20)

/* A regular file copied into the store (a requester's input), a piece at
 * a time, hashed on the way: the blob holds the bytes as they were read,
 * and the user's later edits to the file change nothing stored. Room is
 * made first (LRU eviction, space reserved on disk); the copy's writeback
 * starts as it is written, and it is synced before it is renamed to its
 * hash. Errors come with one line in err naming the file and the cause:
 * NS_ERR_NOTFOUND (no such file), NS_ERR_INVAL (not a regular file, or
 * empty), NS_ERR_TOOBIG (over max_bytes, or over the store's cap),
 * NS_ERR_IO (the file cannot be read, or the store cannot be written:
 * disk full, read-only, permissions), NS_ERR_NOMEM; nothing is left in
 * the store after one. */
typedef struct ns_blobs_copy ns_blobs_copy_t;

/* Open path, check its size, make room and the copy's file. NULL with
 * *rc and err on an error. */
ns_blobs_copy_t *ns_blobs_copy_start(ns_blobs_t *b, const char *path,
                                     uint64_t max_bytes, int *rc, char *err,
                                     size_t errlen);
/* Copy about budget more bytes (whole pieces): *done once the whole file
 * is in the store under its hash. An error leaves the copy to be freed. */
int ns_blobs_copy_step(ns_blobs_copy_t *c, uint64_t budget, bool *done,
                       char *err, size_t errlen) NS_MUST_CHECK;
/* Bytes copied so far. */
uint64_t ns_blobs_copy_bytes(const ns_blobs_copy_t *c);
/* A finished copy: its id and size, and the blob mapped read-only (*data
 * until ns_blobs_unmap(*data, *size): file pages, not the heap; the
 * mapping outlives the copy and the blob's eviction). NS_ERR_IO. */
int ns_blobs_copy_map(const ns_blobs_copy_t *c, ns_hash_t id,
                      const uint8_t **data, uint64_t *size, char *err,
                      size_t errlen) NS_MUST_CHECK;
/* NULL-safe; an unfinished copy's file is removed. */
void ns_blobs_copy_free(ns_blobs_copy_t **c);

/* The whole copy at once: start, step to the end, map. */
int ns_blobs_add_map(ns_blobs_t *b, const char *path, uint64_t max_bytes,
                     ns_hash_t id, const uint8_t **data, uint64_t *size,
                     char *err, size_t errlen) NS_MUST_CHECK;

/* A second name for blob id at path (a hard link: no copy, and the bytes
 * stay on disk under path when the store evicts the blob). An existing
 * file at path is replaced. NS_ERR_NOTFOUND, NS_ERR_IO (another
 * filesystem, or links refused). */
int ns_blobs_link(ns_blobs_t *b, const ns_hash_t id,
                  const char *path) NS_MUST_CHECK;

/* The store's directory and cap, for messages. */
const char *ns_blobs_dir(const ns_blobs_t *b);
uint64_t ns_blobs_cap(const ns_blobs_t *b);

/* Bytes held now. */
uint64_t ns_blobs_bytes(const ns_blobs_t *b);

#endif
