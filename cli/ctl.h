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

#include "nightshift/control.h"

#include <stddef.h>
#include <stdint.h>

/* Ask the node in datadir. On success *doc and *len hold the reply document
 * (msgpack, malloc'd; caller frees). On failure err says why in one line. */
int ns_ctl_query(const char *datadir, const char *query, uint8_t **doc,
                 size_t *len, char *err, size_t errlen);

/* Send a typed request (encoded with ns_ctl_req_pack). */
int ns_ctl_call(const char *datadir, const ns_ctl_req_t *req, uint8_t **doc,
                size_t *len, char *err, size_t errlen);

/* Same with a request already encoded as msgpack. */
int ns_ctl_request(const char *datadir, const void *req, size_t req_len,
                   uint8_t **doc, size_t *len, char *err, size_t errlen);

#endif
