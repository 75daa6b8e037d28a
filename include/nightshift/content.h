/* content.h - blobs fetched from peers by their content hash (node layer).
 *
 * A FETCH whose blob is NS_BLOB_CONTENT names the content hash in its job
 * id field; any node that holds those bytes (in its blob store) answers
 * with CHUNKs like any transfer (transfer.h). A node wants a blob when a
 * SLASH it must check names inputs that were too large to travel inside
 * the entry: the fetcher asks the hinted peer (the SLASH's author) first,
 * then other live peers, checks the bytes against the hash, stores them
 * and reports them done, and the ledger retries the entries that waited.
 */
#ifndef NIGHTSHIFT_CONTENT_H
#define NIGHTSHIFT_CONTENT_H

#include "nightshift/blobs.h"
#include "nightshift/node_io.h"

#define NS_CONTENT_MAX_WANTED 16    /* blobs fetched at once */
#define NS_CONTENT_STALL_MS 3000    /* no progress: ask another peer */
#define NS_CONTENT_GIVEUP_MS 600000 /* then forget it (asked again later) */

typedef struct ns_content ns_content_t;
typedef void (*ns_content_done_fn)(void *user, const ns_hash_t id);

ns_content_t *ns_content_new(const ns_node_io_t *io, ns_blobs_t *blobs,
                             ns_content_done_fn done, void *user, int *err);
void ns_content_destroy(ns_content_t **c);

/* Fetch id (size bytes, from the descriptor that names it) unless it is
 * in the store or already wanted. The bytes go to the store's part file
 * as they arrive, hashed on the way (transfer.h, ns_fetch_add_file: a
 * CHUNK with another total is refused, a cut transfer resumes from the
 * verified prefix, a whole that does not hash to id is emptied and asked
 * of another peer), and the file is renamed into the store once it
 * checks; never whole in memory unless the store cannot take it (full,
 * unwritable, the blob larger than its cap: logged). hint: a peer to ask
 * first, or NULL. NS_ERR_INVAL for a size of 0 or over NS_MAX_BUFFER,
 * NS_ERR_TOOBIG when NS_CONTENT_MAX_WANTED are in flight (ask again
 * later). */
int ns_content_want(ns_content_t *c, const ns_hash_t id, uint64_t size,
                    const uint8_t *hint) NS_MUST_CHECK;
/* Whether a FETCH or CHUNK is about content (blob NS_BLOB_CONTENT). */
bool ns_content_is_ours(const ns_node_msg_t *m);
/* A FETCH: answer from the store, one chunk read from the blob's file
 * (no answer when we do not hold it: the asker tries another peer). A
 * CHUNK: take it. */
int ns_content_on_msg(ns_content_t *c, const ns_node_msg_t *m);
/* Ask for more, move stalled fetches to other peers. now = mono ms. */
void ns_content_tick(ns_content_t *c, uint64_t now);
uint32_t ns_content_wanted(const ns_content_t *c);

#endif
