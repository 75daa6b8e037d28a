/* hosted.h - a job submitted through a running node's control socket
 * (`submit --node`): the node copies its inputs into its blob store (a
 * budget per turn of its loop), then runs its requester, keeps its
 * progress lines for the submitter to poll, and writes its outputs once
 * they are verified. Internal to node/. */
#ifndef NIGHTSHIFT_NODE_HOSTED_H
#define NIGHTSHIFT_NODE_HOSTED_H

#include "nightshift/blobs.h"
#include "nightshift/control.h"
#include "nightshift/requester.h"

#include <stdbool.h>

#define NS_HOSTED_LINES 256 /* progress lines kept per job */

typedef struct ns_hosted ns_hosted_t;

/* Read the request's descriptor, allocate the outputs without a file,
 * start a copy of each input file into blobs (ns_blobs_copy_t: never
 * whole in memory) and fill the job's requester options
 * (ns_hosted_opts); the hosted job owns everything they point to. NULL
 * with one line in err: a descriptor that does not read, an input file
 * missing, unreadable or larger than the store (the cause named). */
ns_hosted_t *ns_hosted_new(const ns_ctl_req_t *r, const uint8_t me[32],
                           ns_blobs_t *blobs, uint64_t now_ms, char *err,
                           size_t errlen);
void ns_hosted_destroy(ns_hosted_t **h);

/* Copy about budget more bytes of the inputs (the node's loop calls it
 * until they are in: a large input never holds the loop for long).
 * *ready once every input is in the store, checked against the
 * descriptor and mapped: the job can start its requester. An error fails
 * the job (its receipt says why, the submitter reads it) and is
 * returned. */
int ns_hosted_copy(ns_hosted_t *h, uint64_t budget, bool *ready);
/* Inputs still being copied (and the job not failed). */
bool ns_hosted_copying(const ns_hosted_t *h);
/* The job fails before it has a requester (printf format). */
__attribute__((format(printf, 2, 3))) void ns_hosted_fail(ns_hosted_t *h,
                                                          const char *fmt, ...);

ns_requester_opts_t *ns_hosted_opts(ns_hosted_t *h);
void ns_hosted_attach(ns_hosted_t *h, ns_requester_t *q);
/* NULL until the inputs are copied. */
ns_requester_t *ns_hosted_requester(const ns_hosted_t *h);
const uint8_t *ns_hosted_job_id(const ns_hosted_t *h);
/* Finished at (mono ms), 0 while running. */
uint64_t ns_hosted_finished_ms(ns_hosted_t *h, uint64_t now_ms);
/* One entry of the `jobs` control request: a map {id, role "requester",
 * phase, peer (the provider or nil), price (credits: settled, else the
 * ceiling), age_ms, finished, rounds, checked, error}. */
void ns_hosted_pack(ns_hosted_t *h, uint64_t now_ms, msgpack_packer *pk);
void ns_hosted_progress(const ns_hosted_t *h, uint32_t from, ns_ctl_job_t *j);

#endif
