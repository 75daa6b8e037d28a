/* metrics.h - Prometheus text exposition (format 0.0.4) of a node's
 * status.
 *
 * The figures are not counted twice: they are read from the documents
 * the control socket answers `status` with (ns_node_pack_status) and the
 * ledger summary (ns_node_pack_ledger_summary), so /metrics and
 * `status --json` always agree. Names follow the Prometheus conventions:
 * nightshift_ prefix, _total for counters, base units (_seconds, _bytes;
 * amounts in _credits), HELP and TYPE lines for each family. The list is
 * in docs/ARCHITECTURE.md ("Metrics").
 */
#ifndef NIGHTSHIFT_METRICS_H
#define NIGHTSHIFT_METRICS_H

#include "nightshift/err.h"
#include "nightshift/mp.h"

#include <stddef.h>
#include <stdint.h>

/* Render the exposition into out (appended). status and summary are the
 * msgpack documents; a figure missing from them (a light node has no
 * provider section) is left out. NS_ERR_INVAL when a document does not
 * read, NS_ERR_NOMEM. */
int ns_metrics_render(const uint8_t *status, size_t status_len,
                      const uint8_t *summary, size_t summary_len,
                      ns_buf_t *out) NS_MUST_CHECK;

#endif
