/* shards.c - one job cut into shards (shards.h). */
#include "shards.h"

#include "nightshift/mp.h"

#include <stdlib.h>
#include <string.h>

void ns_shardset_release(ns_shardset_t *s)
{
    for (uint32_t i = 0; s->shard && i < s->n; i++) {
        ns_shard_t *h = &s->shard[i];
        ns_job_release(&h->job);
        ns_buf_release(&h->packed);
        for (uint32_t k = 0; k < NS_MAX_ARGS; k++)
            free(h->outputs[k]);
    }
    free(s->shard);
    memset(s, 0, sizeof *s);
}

/* The shards along dim. */
static int s_cut(ns_shardset_t *s, const ns_job_t *whole, uint32_t n,
                 uint32_t dim, char *err, size_t errlen)
{
    s->dim = dim;
    s->shard = calloc(n, sizeof *s->shard);
    if (!s->shard)
        goto nomem;
    s->n = n;
    for (uint32_t i = 0; i < n; i++) {
        ns_shard_t *h = &s->shard[i];
        ns_job_init(&h->job);
        ns_buf_init(&h->packed);
        if (ns_job_make_shard(&h->job, whole, i, n, dim) != NS_OK)
            goto nomem;
        ns_mp_writer_t w;
        msgpack_packer pk;
        ns_mp_writer_init(&w, &pk, &h->packed);
        ns_job_pack(&pk, &h->job);
        if (w.err != NS_OK)
            goto nomem;
        for (uint32_t k = 0; k < whole->n_args; k++)
            if (whole->args[k].kind == NS_ARG_OUT &&
                !(h->outputs[k] = calloc(1, (size_t)whole->args[k].size)))
                goto nomem;
    }
    return NS_OK;
nomem:
    ns_shardset_release(s);
    snprintf(err, errlen, "out of memory for %u shards", n);
    return NS_ERR_NOMEM;
}

int ns_shardset_init(ns_shardset_t *s, const ns_job_t *whole, uint32_t n,
                     ns_shard_sample_fn sample, void *user, char *err,
                     size_t errlen)
{
    char why[512] = "";
    int rc = NS_ERR_INVAL;
    memset(s, 0, sizeof *s);
    for (uint32_t d = whole->dims; d-- > 0;) {
        char e[512];
        rc = ns_job_shardable(whole, n, d, e, sizeof e);
        if (rc == NS_OK)
            rc = s_cut(s, whole, n, d, e, sizeof e);
        /* sampled units of the first and last shard stay in their rows */
        for (uint32_t i = 0; rc == NS_OK && sample && i < n;
             i += n - 1 ? n - 1 : 1)
            rc = sample(user, &s->shard[i].job, e, sizeof e);
        if (rc == NS_OK)
            return NS_OK;
        ns_shardset_release(s);
        if (!why[0] || rc != NS_ERR_INVAL)
            snprintf(why, sizeof why, "%s", e);
        if (rc != NS_ERR_INVAL && rc != NS_ERR_TOOBIG)
            break; /* the runner failed: no use trying the others */
    }
    snprintf(err, errlen, "cannot cut the job into %u shards: %s", n, why);
    return rc;
}

void ns_shardset_slice(const ns_shardset_t *s, uint32_t i, uint32_t k,
                       uint64_t *off, uint64_t *len)
{
    const ns_job_t *j = &s->shard[i].job;
    uint64_t rows = ns_job_rows(j), size = j->args[k].size;
    /* shardable: size is a multiple of rows, so these are exact */
    *off = size / rows * j->shard_first;
    *len = size / rows * j->shard_rows;
}

uint32_t ns_shardset_assemble(ns_shardset_t *s, uint32_t i, uint8_t **outputs)
{
    ns_shard_t *h = &s->shard[i];
    for (uint32_t k = 0; k < h->job.n_args; k++) {
        if (h->job.args[k].kind != NS_ARG_OUT)
            continue;
        uint64_t off, len;
        ns_shardset_slice(s, i, k, &off, &len);
        memcpy(outputs[k] + off, h->outputs[k] + off, (size_t)len);
    }
    h->done = true;
    uint32_t done = 0;
    for (uint32_t x = 0; x < s->n; x++)
        done += s->shard[x].done;
    return done;
}
