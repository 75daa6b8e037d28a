/* util.h - clocks, text encodings and small file helpers used everywhere. */
#ifndef NIGHTSHIFT_UTIL_H
#define NIGHTSHIFT_UTIL_H

#include "nightshift/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wall clock (UNIX epoch) in milliseconds / microseconds. */
uint64_t ns_now_ms(void);
uint64_t ns_now_us(void);
/* Monotonic clock in milliseconds / microseconds, for timers and durations. */
uint64_t ns_mono_ms(void);
uint64_t ns_mono_us(void);

/* A hash of a file is vouched for by the file's (device, inode, size,
 * mtime) while they stay the same, but only when that mtime is
 * NS_FILE_SETTLED_NS older than the moment the hash began (taken before
 * the stat): the file clock is coarse (a kernel tick; a second or two on
 * some file systems), so a write in the tick of the hash can leave the
 * mtime as it was (git's "racy clean" entries). A write after a settled
 * hash stamps a later mtime. Nothing catches an mtime set back on purpose
 * after a write. */
#define NS_FILE_SETTLED_NS (INT64_C(2) * 1000000000)
struct stat;
/* The wall clock in nanoseconds, as file times are kept. */
int64_t ns_now_ns(void);
/* st's mtime in nanoseconds since the epoch. */
int64_t ns_mtime_ns(const struct stat *st);
/* Whether a hash that began at hashed_ns (ns_now_ns) can vouch for a file
 * whose mtime is mtime_ns. */
bool ns_mtime_settled(int64_t mtime_ns, int64_t hashed_ns);

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void ns_hex(char *out, const uint8_t *in, size_t n);
/* Exactly 2n hex digits into n bytes; NS_ERR_INVAL otherwise. */
int ns_unhex(uint8_t *out, size_t n, const char *hex) NS_MUST_CHECK;

/* RFC 4648 base32, lower case, no padding. out needs
 * ns_base32_len(n) + 1 bytes. */
size_t ns_base32_len(size_t n);
void ns_base32(char *out, const uint8_t *in, size_t n);
/* Strict decode of exactly ns_base32_len(n) characters into n bytes: wrong
 * length, characters outside the alphabet or non-zero padding bits are
 * NS_ERR_INVAL, so every value has exactly one text form. */
int ns_unbase32(uint8_t *out, size_t n, const char *in) NS_MUST_CHECK;

/* Read a whole file of at most max_bytes into a malloc'd buffer (caller
 * frees). NS_ERR_NOTFOUND, NS_ERR_IO, NS_ERR_TOOBIG. */
int ns_file_read(const char *path, size_t max_bytes, uint8_t **out,
                 size_t *len) NS_MUST_CHECK;
/* The same, and *st from the fstat of the descriptor the bytes were read
 * from (not a second lookup of path, which a rename can move meanwhile). */
int ns_file_read_stat(const char *path, size_t max_bytes, uint8_t **out,
                      size_t *len, struct stat *st) NS_MUST_CHECK;

/* Write a file atomically and durably: temp file, fsync, rename, fsync of
 * the directory. mode is the new file's permission bits. */
int ns_file_write_atomic(const char *path, const void *data, size_t len,
                         unsigned mode) NS_MUST_CHECK;

/* The end of ns_file_write_atomic for a temp file written by the caller:
 * fd (open on tmp) gets mode and is fsynced, tmp is renamed to path and
 * the directory fsynced. fd stays open (the caller closes it); on an
 * error tmp is left for the caller to remove. NS_ERR_IO. */
int ns_file_commit(int fd, const char *tmp, const char *path,
                   unsigned mode) NS_MUST_CHECK;

/* mkdir -p with the given mode for created components. */
int ns_mkdir_p(const char *path, unsigned mode) NS_MUST_CHECK;

/* snprintf into a fixed buffer; NS_ERR_TOOBIG if it did not fit. */
int ns_path_join(char *out, size_t cap, const char *dir,
                 const char *name) NS_MUST_CHECK;

/* Parse a non-negative decimal u64 with no sign, spaces or junk. */
int ns_parse_u64(const char *s, uint64_t *out) NS_MUST_CHECK;

/* Amounts. The ledger counts micro-credits (a millionth of a credit) so
 * that a 2 ms job and a 20 s job cost different amounts; people read and
 * write credits with up to six decimals ("12", "0.25", "0.000001"). */
#define NS_MICRO UINT64_C(1000000) /* micro-credits in a credit */
#define NS_CREDITS_TEXT 32         /* ns_credits_fmt's buffer, bytes */
/* Credits ("12.5") to micro-credits. NS_ERR_INVAL for anything else (a
 * sign, a seventh decimal, spaces, an empty string), NS_ERR_TOOBIG past
 * UINT64_MAX micro-credits. */
int ns_credits_parse(const char *s, uint64_t *micro) NS_MUST_CHECK;
/* Micro-credits as credits, trailing zeros dropped: "12", "12.5",
 * "0.000001". Returns out. */
char *ns_credits_fmt(char out[NS_CREDITS_TEXT], uint64_t micro);

/* Pseudo-random u32 below bound (libsodium's CSPRNG; bound > 0). */
uint32_t ns_rand_below(uint32_t bound);

#endif
