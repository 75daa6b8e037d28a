/* slash.h - the SLASH verifier the ledger calls (ns_slash_verifier_fn),
 * built from exec's fraud-proof checks, and the proof's wire form.
 *
 * A SLASH proof is msgpack [fraud proof (ns_fraud_pack), inputs] where
 * inputs is an array with one bin per IN argument when they fit in
 * NS_MAX_PROOF, else nil: then the inputs travel by content address (the
 * descriptor names each input's hash). Every node re-runs the disputed
 * unit before it applies the entry (its sandboxed worker, or the
 * requester's runner). A node that lacks an input asks peers for it
 * (content.h) and the entry waits in the ledger's out-of-order buffer
 * until the bytes are here (NS_ERR_MISSING with the input's hash), so
 * every node applies the same SLASHes, each after its own re-run
 * (docs/PROTOCOL.md, "Market").
 */
#ifndef NIGHTSHIFT_SLASH_H
#define NIGHTSHIFT_SLASH_H

#include "nightshift/blobs.h"
#include "nightshift/content.h"
#include "nightshift/ledger.h"
#include "nightshift/verify.h"
#include "nightshift/worker.h"

typedef struct {
    ns_worker_t **worker;  /* lazily started worker (node), or NULL */
    ns_runner_t *runner;   /* in-process runner (requester), or NULL */
    bool *reran;           /* set when the unit was re-run */
    ns_blobs_t *blobs;     /* inputs by hash, or NULL */
    ns_content_t *content; /* fetches missing inputs, or NULL */
} ns_slash_ctx_t;

/* Pack a proof and, when they fit, the inputs (*inline_inputs says
 * which; NULL allowed). */
int ns_slash_proof_pack(const ns_fraud_proof_t *p, const ns_input_t *inputs,
                        ns_buf_t *out, bool *inline_inputs) NS_MUST_CHECK;

/* Read a SLASH body strictly: the proof (ns_fraud_read) and either nil or
 * exactly one bin per IN argument of the descriptor's size (borrowed from
 * buf into inputs, NS_MAX_ARGS entries; *inline_inputs true). On error p
 * is released and err says why. */
int ns_slash_proof_read(const uint8_t *buf, size_t len, ns_fraud_proof_t *p,
                        ns_input_t *inputs, bool *inline_inputs, char *err,
                        size_t errlen) NS_MUST_CHECK;

/* ns_slash_verifier_fn: user is an ns_slash_ctx_t. NS_OK: the re-run
 * proves the claim wrong; NS_ERR_PROOF: it does not (or the proof is
 * malformed); NS_ERR_MISSING: an input is not here yet, its hash in
 * missing (asked from peers; the ledger retries the entry when it
 * arrives). */
int ns_slash_verify(void *user, const ns_ledger_job_t *job,
                    const uint8_t *provider, const ns_hash_t root,
                    uint64_t n_items, const uint8_t *proof, size_t len,
                    uint8_t missing[NS_HASH_BYTES]);

/* Put the job's inputs in the blob store, so that peers checking a SLASH
 * with inputs by reference can fetch them from us. */
int ns_slash_keep_inputs(ns_blobs_t *blobs, const ns_job_t *job,
                         const ns_input_t *inputs) NS_MUST_CHECK;
/* The same for a pipeline proof's outs: the claimed buffers (outputs, by
 * argument) that every checker fetches by hash. No-op without outs. */
int ns_slash_keep_outputs(ns_blobs_t *blobs, const ns_fraud_proof_t *p,
                          uint8_t *const *outputs) NS_MUST_CHECK;

#endif
