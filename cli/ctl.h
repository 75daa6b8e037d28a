/* ctl.h - the local control socket between `nightshift node` and the
 * query commands (peers, status, ...).
 *
 * Endpoint: ipc://DATADIR/control.sock (mode 0600: only the owner of the
 * datadir may ask). Request: one frame, a msgpack str naming the query
 * ("status", "peers", "latency"). Reply: one frame, a msgpack array
 * [ok bool, document]; on error the document is a str with the reason.
 */
#ifndef NIGHTSHIFT_CTL_H
#define NIGHTSHIFT_CTL_H

#include <stddef.h>
#include <stdint.h>

#define NS_CTL_SOCK "control.sock"
#define NS_CTL_MAX_REPLY (16 * 1024 * 1024)
#define NS_CTL_TIMEOUT_MS 5000

int ns_ctl_endpoint(const char *datadir, char *out, size_t cap);

/* Ask the node in datadir. On success *doc and *len hold the reply document
 * (msgpack, malloc'd; caller frees). On failure err says why in one line. */
int ns_ctl_query(const char *datadir, const char *query, uint8_t **doc,
                 size_t *len, char *err, size_t errlen);

/* Same with a request already encoded as msgpack (an array [command,
 * args...] for commands that take arguments). */
int ns_ctl_request(const char *datadir, const void *req, size_t req_len,
                   uint8_t **doc, size_t *len, char *err, size_t errlen);

#endif
