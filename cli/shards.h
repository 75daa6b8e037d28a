/* shards.h - one job cut into shards for `submit --shards N` (job.h,
 * "Shards"): the shards' descriptors and output buffers, and the
 * assembly of their outputs into the whole job's. */
#ifndef NIGHTSHIFT_CLI_SHARDS_H
#define NIGHTSHIFT_CLI_SHARDS_H

#include "nightshift/job.h"
#include "nightshift/mp.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    ns_job_t job;                  /* shard i's descriptor */
    ns_buf_t packed;               /* its encoding */
    uint8_t *outputs[NS_MAX_ARGS]; /* its full-size OUT buffers */
    bool done;                     /* assembled into the whole */
} ns_shard_t;

typedef struct {
    uint32_t n;
    uint32_t dim; /* the dimension cut */
    ns_shard_t *shard;
} ns_shardset_t;

/* Samples units of a shard's descriptor (ns_preflight_sample, run where
 * the caller runs kernels: a sandboxed worker): NS_OK, NS_ERR_INVAL when
 * they write outside their rows' slices (err says why), or why they could
 * not run. */
typedef int (*ns_shard_sample_fn)(void *user, const ns_job_t *shard, char *err,
                                  size_t errlen);

/* Cut whole into n shards: descriptors, encodings and zeroed output
 * buffers. The dimension is the last one (dims - 1 down to 0) along which
 * the job can be cut (ns_job_shardable) and, when sample is given, along
 * which sampled units of the first and the last shard write only inside
 * their rows' slices. err says why no dimension does. NS_ERR_INVAL /
 * NS_ERR_TOOBIG / NS_ERR_NOMEM, or the sampler's error. */
int ns_shardset_init(ns_shardset_t *s, const ns_job_t *whole, uint32_t n,
                     ns_shard_sample_fn sample, void *user, char *err,
                     size_t errlen) NS_MUST_CHECK;
void ns_shardset_release(ns_shardset_t *s);

/* Copy shard i's rows' slices of every OUT buffer into outputs (the whole
 * job's buffers) and mark it done. Returns how many shards are done. */
uint32_t ns_shardset_assemble(ns_shardset_t *s, uint32_t i, uint8_t **outputs);

/* Byte range of OUT argument k that shard i owns. */
void ns_shardset_slice(const ns_shardset_t *s, uint32_t i, uint32_t k,
                       uint64_t *off, uint64_t *len);

#endif
