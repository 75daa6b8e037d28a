/* worker_pool.c - sandboxed workers lent for short device work
 * (worker_pool.h). */
#include "nightshift/worker_pool.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ns_wpool {
    ns_worker_opts_t o;
    char *exe, *cache_dir; /* our copies of o's strings */
    uint32_t max, n;
    ns_worker_t *w[NS_WPOOL_MAX];
    bool lent[NS_WPOOL_MAX];
};

static char *s_dup(const char *s, bool *bad)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *bad = true;
    return d;
}

ns_wpool_t *ns_wpool_new(const ns_worker_opts_t *o, uint32_t max, int *err)
{
    if (max == 0 || max > NS_WPOOL_MAX) {
        *err = NS_ERR_INVAL;
        return NULL;
    }
    ns_wpool_t *p = calloc(1, sizeof *p);
    bool bad = !p;
    if (p) {
        p->o = *o;
        p->max = max;
        p->exe = s_dup(o->exe, &bad);
        p->cache_dir = s_dup(o->cache_dir, &bad);
        p->o.exe = p->exe;
        p->o.cache_dir = p->cache_dir;
    }
    if (bad) {
        ns_wpool_destroy(&p);
        *err = NS_ERR_NOMEM;
        return NULL;
    }
    return p;
}

void ns_wpool_destroy(ns_wpool_t **pp)
{
    if (!pp || !*pp)
        return;
    ns_wpool_t *p = *pp;
    for (uint32_t i = 0; i < p->n; i++)
        ns_worker_destroy(&p->w[i]);
    free(p->exe);
    free(p->cache_dir);
    free(p);
    *pp = NULL;
}

/* A new worker in slot p->n; its index, or -1 with *err. */
static int s_add(ns_wpool_t *p, int *err)
{
    if (p->n >= p->max) {
        *err = NS_ERR_RATE;
        return -1;
    }
    ns_worker_t *w = ns_worker_new(&p->o, err);
    if (!w)
        return -1;
    p->w[p->n] = w;
    p->lent[p->n] = false;
    return (int)p->n++;
}

int ns_wpool_warm(ns_wpool_t *p)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (!p->lent[i])
            return NS_OK;
    int err = NS_OK;
    if (s_add(p, &err) < 0 && err != NS_ERR_RATE)
        return err;
    return NS_OK;
}

ns_worker_t *ns_wpool_take(ns_wpool_t *p, int *err)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (!p->lent[i]) {
            p->lent[i] = true;
            return p->w[i];
        }
    int i = s_add(p, err);
    if (i < 0)
        return NULL;
    p->lent[i] = true;
    return p->w[i];
}

void ns_wpool_give(ns_wpool_t *p, ns_worker_t **wp)
{
    if (!wp || !*wp)
        return;
    ns_worker_t *w = *wp;
    *wp = NULL;
    ns_worker_cancel(w); /* a no-op when idle */
    for (uint32_t i = 0; i < p->n; i++)
        if (p->w[i] == w)
            p->lent[i] = false;
}

uint32_t ns_wpool_size(const ns_wpool_t *p)
{
    return p->n;
}

uint32_t ns_wpool_lent(const ns_wpool_t *p)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->n; i++)
        k += p->lent[i];
    return k;
}
