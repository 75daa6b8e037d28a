/* hosted.h - a job submitted through a running node's control socket
 * (`submit --node`): the node copies its inputs into its blob store, runs
 * its requester, keeps its progress lines for the submitter to poll, and
 * writes its outputs once they are verified. Internal to node/. */
#ifndef NIGHTSHIFT_NODE_HOSTED_H
#define NIGHTSHIFT_NODE_HOSTED_H

#include "nightshift/control.h"
#include "nightshift/requester.h"

#define NS_HOSTED_LINES 256 /* progress lines kept per job */

typedef struct ns_hosted ns_hosted_t;

/* Read the request's descriptor, copy its input files into blobs in
 * pieces (ns_blobs_add_file: never whole in memory; sizes and hashes
 * checked against the descriptor) and map the copies, allocate the outputs
 * without a file, and fill o with the job; the hosted job owns everything
 * o points to. NULL with one line in err (a store that cannot take an
 * input names the cause). */
ns_hosted_t *ns_hosted_new(const ns_ctl_req_t *r, const uint8_t me[32],
                           ns_blobs_t *blobs, ns_requester_opts_t *o, char *err,
                           size_t errlen);
void ns_hosted_destroy(ns_hosted_t **h);

void ns_hosted_attach(ns_hosted_t *h, ns_requester_t *q, uint64_t now_ms);
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
