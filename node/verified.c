/* verified.c - providers' challenge verdicts, kept on disk (verified.h). */
#include "nightshift/verified.h"

#include "nightshift/log.h"
#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ns_verified {
    char path[PATH_MAX];
    ns_verified_entry_t *e;
    uint32_t n;
    const void *chal_owner; /* the challenge lease, NULL: free */
    uint64_t chal_until_ms;
};

bool ns_verified_chal_take(ns_verified_t *v, const void *owner, uint64_t now_ms,
                           uint64_t lease_ms)
{
    if (v->chal_owner && v->chal_owner != owner && now_ms < v->chal_until_ms)
        return false;
    v->chal_owner = owner;
    v->chal_until_ms = now_ms + lease_ms;
    return true;
}

void ns_verified_chal_give(ns_verified_t *v, const void *owner)
{
    if (v->chal_owner == owner)
        v->chal_owner = NULL;
}

static void s_load(ns_verified_t *v)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ns_file_read(v->path, 4u << 20, &buf, &len) != NS_OK)
        return;
    ns_mpr_t r;
    uint32_t n = 0;
    ns_mpr_init(&r, buf, len);
    ns_mpr_array(&r, &n, NS_VERIFIED_MAX);
    for (uint32_t i = 0; i < n && r.err == NS_OK; i++) {
        ns_verified_entry_t *e = &v->e[v->n];
        uint32_t st = 0;
        ns_mpr_array_exact(&r, 6);
        ns_mpr_bin_exact(&r, e->id, NS_ID_BYTES);
        ns_mpr_u32(&r, &st);
        ns_mpr_uint(&r, &e->at_ms);
        ns_mpr_str(&r, e->why, sizeof e->why - 1);
        ns_mpr_u32(&r, &e->failures);
        ns_mpr_uint(&r, &e->window_ms);
        if (r.err == NS_OK && st <= NS_VERIFIED_FAILED) {
            e->state = (uint8_t)st;
            v->n++;
        }
    }
    if (r.err != NS_OK)
        ns_warn(NS_MOD_NODE,
                "event=verified_file_unreadable path=\"%s\" "
                "kept=%u",
                v->path, v->n);
    free(buf);
}

static void s_save(const ns_verified_t *v)
{
    ns_buf_t b;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_buf_init(&b);
    ns_mp_writer_init(&w, &pk, &b);
    msgpack_pack_array(&pk, v->n);
    for (uint32_t i = 0; i < v->n; i++) {
        msgpack_pack_array(&pk, 6);
        ns_mp_bin(&pk, v->e[i].id, NS_ID_BYTES);
        msgpack_pack_uint32(&pk, v->e[i].state);
        msgpack_pack_uint64(&pk, v->e[i].at_ms);
        ns_mp_str(&pk, v->e[i].why);
        msgpack_pack_uint32(&pk, v->e[i].failures);
        msgpack_pack_uint64(&pk, v->e[i].window_ms);
    }
    if (w.err != NS_OK ||
        ns_file_write_atomic(v->path, b.data, b.len, 0600) != NS_OK)
        ns_warn(NS_MOD_NODE, "event=verified_not_saved path=\"%s\"", v->path);
    ns_buf_release(&b);
}

ns_verified_t *ns_verified_open(const char *path)
{
    ns_verified_t *v = calloc(1, sizeof *v);
    if (!v || !(v->e = calloc(NS_VERIFIED_MAX, sizeof *v->e))) {
        free(v);
        return NULL;
    }
    snprintf(v->path, sizeof v->path, "%s", path);
    s_load(v);
    return v;
}

void ns_verified_close(ns_verified_t **vp)
{
    if (!vp || !*vp)
        return;
    free((*vp)->e);
    free(*vp);
    *vp = NULL;
}

uint8_t ns_verified_get(const ns_verified_t *v, const uint8_t id[NS_ID_BYTES],
                        uint64_t *at_ms)
{
    for (uint32_t i = 0; v && i < v->n; i++)
        if (memcmp(v->e[i].id, id, NS_ID_BYTES) == 0) {
            if (at_ms)
                *at_ms = v->e[i].at_ms;
            return v->e[i].state;
        }
    return NS_VERIFIED_NONE;
}

/* id's entry, made (zeroed) when new; the oldest is forgotten when the
 * table is full. */
static ns_verified_entry_t *s_entry(ns_verified_t *v,
                                    const uint8_t id[NS_ID_BYTES])
{
    uint32_t i = 0;
    while (i < v->n && memcmp(v->e[i].id, id, NS_ID_BYTES))
        i++;
    if (i == v->n) {
        if (v->n == NS_VERIFIED_MAX) {
            uint32_t old = 0;
            for (uint32_t k = 1; k < v->n; k++)
                if (v->e[k].at_ms < v->e[old].at_ms)
                    old = k;
            v->e[old] = v->e[--v->n];
        }
        i = v->n++;
        memset(&v->e[i], 0, sizeof v->e[i]);
        memcpy(v->e[i].id, id, NS_ID_BYTES);
    }
    return &v->e[i];
}

uint32_t ns_verified_note_failure(ns_verified_t *v,
                                  const uint8_t id[NS_ID_BYTES],
                                  uint64_t now_ms, uint64_t window_ms)
{
    if (!v)
        return 0;
    ns_verified_entry_t *e = s_entry(v, id);
    if (now_ms - e->window_ms > window_ms) {
        e->window_ms = now_ms;
        e->failures = 0;
    }
    e->failures++;
    if (!e->at_ms)
        e->at_ms = now_ms;
    s_save(v);
    return e->failures;
}

uint32_t ns_verified_failures(const ns_verified_t *v,
                              const uint8_t id[NS_ID_BYTES], uint64_t now_ms,
                              uint64_t window_ms)
{
    for (uint32_t i = 0; v && i < v->n; i++)
        if (memcmp(v->e[i].id, id, NS_ID_BYTES) == 0)
            return now_ms - v->e[i].window_ms > window_ms ? 0
                                                          : v->e[i].failures;
    return 0;
}

void ns_verified_put(ns_verified_t *v, const uint8_t id[NS_ID_BYTES],
                     uint8_t state, uint64_t at_ms, const char *why)
{
    if (!v)
        return;
    ns_verified_entry_t *e = s_entry(v, id);
    uint32_t i = (uint32_t)(e - v->e);
    v->e[i].state = state;
    v->e[i].at_ms = at_ms;
    size_t n = 0;
    for (; why && why[n] && n + 1 < sizeof v->e[i].why; n++)
        v->e[i].why[n] =
            (unsigned char)why[n] < 0x20 || why[n] == 0x7f ? ' ' : why[n];
    v->e[i].why[n] = '\0';
    s_save(v);
}

const char *ns_verified_name(uint8_t state)
{
    return state == NS_VERIFIED_PASSED   ? "passed"
           : state == NS_VERIFIED_FAILED ? "failed"
                                         : "-";
}
