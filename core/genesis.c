#include "nightshift/genesis.h"
#include "nightshift/util.h"

#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ns_genesis_t *g;
    char *err;
    size_t errlen;
    int have_name;
} s_ctx_t;

static int s_handler(void *user, const char *section, const char *key,
                     const char *value)
{
    s_ctx_t *c = user;
    ns_genesis_t *g = c->g;
    if (strcmp(section, "network") == 0) {
        if (strcmp(key, "name") == 0) {
            size_t n = strlen(value);
            if (n == 0 || n > NS_MAX_NETWORK_NAME || c->have_name) {
                snprintf(c->err, c->errlen, "bad or repeated network name");
                return 0;
            }
            for (size_t i = 0; i < n; i++)
                if (value[i] < 0x21 || value[i] > 0x7e) {
                    snprintf(c->err, c->errlen,
                             "network name must be printable, no spaces");
                    return 0;
                }
            memcpy(g->name, value, n + 1);
            c->have_name = 1;
        } else if (strcmp(key, "test_network") == 0) {
            if (strcmp(value, "true") && strcmp(value, "false")) {
                snprintf(c->err, c->errlen, "test_network: true or false");
                return 0;
            }
            g->test_network = strcmp(value, "true") == 0;
        } else if (strcmp(key, "created_ms") == 0) {
            if (ns_parse_u64(value, &g->created_ms) != NS_OK) {
                snprintf(c->err, c->errlen, "created_ms: not a number");
                return 0;
            }
        } else if (strcmp(key, "close_window_ms") == 0) {
            uint64_t v;
            if (ns_parse_u64(value, &v) != NS_OK ||
                v < NS_GENESIS_CLOSE_WINDOW_MIN_MS ||
                v > NS_GENESIS_CLOSE_WINDOW_MAX_MS || g->close_window_ms) {
                snprintf(c->err, c->errlen,
                         "close_window_ms: milliseconds from %llu to %llu, "
                         "once",
                         (unsigned long long)NS_GENESIS_CLOSE_WINDOW_MIN_MS,
                         (unsigned long long)NS_GENESIS_CLOSE_WINDOW_MAX_MS);
                return 0;
            }
            g->close_window_ms = v;
        } else {
            snprintf(c->err, c->errlen, "unknown key [network] %s", key);
            return 0;
        }
        return 1;
    }
    if (strcmp(section, "alloc") == 0) {
        ns_alloc_t a;
        if (ns_id_parse(key, a.id) != NS_OK) {
            snprintf(c->err, c->errlen, "alloc: '%.60s' is not a node id", key);
            return 0;
        }
        if (ns_credits_parse(value, &a.micro) != NS_OK ||
            a.micro > NS_MAX_SUPPLY ||
            g->total_micro > NS_MAX_SUPPLY - a.micro) {
            snprintf(c->err, c->errlen,
                     "alloc: bad credit amount '%.30s' (credits, up to six "
                     "decimals)",
                     value);
            return 0;
        }
        if (g->n_allocs >= NS_MAX_GENESIS_ALLOCS) {
            snprintf(c->err, c->errlen, "more than %d allocations",
                     NS_MAX_GENESIS_ALLOCS);
            return 0;
        }
        for (uint32_t i = 0; i < g->n_allocs; i++)
            if (memcmp(g->allocs[i].id, a.id, NS_ID_BYTES) == 0) {
                snprintf(c->err, c->errlen, "alloc: account listed twice");
                return 0;
            }
        if ((g->n_allocs & 63) == 0) {
            ns_alloc_t *na =
                realloc(g->allocs, (g->n_allocs + 64) * sizeof *na);
            if (!na) {
                snprintf(c->err, c->errlen, "out of memory");
                return 0;
            }
            g->allocs = na;
        }
        g->allocs[g->n_allocs++] = a;
        g->total_micro += a.micro;
        return 1;
    }
    snprintf(c->err, c->errlen, "unknown section [%s]", section);
    return 0;
}

int ns_genesis_parse(const uint8_t *text, size_t len, ns_genesis_t *g,
                     char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    if (len > NS_MAX_GENESIS_BYTES) {
        snprintf(err, errlen, "genesis file over %d bytes",
                 NS_MAX_GENESIS_BYTES);
        return NS_ERR_TOOBIG;
    }
    if (memchr(text, 0, len)) {
        snprintf(err, errlen, "genesis file contains NUL bytes");
        return NS_ERR_CONFIG;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NS_ERR_NOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    char why[160] = "";
    s_ctx_t c = {g, why, sizeof why, 0};
    int line = ini_parse_string(copy, s_handler, &c);
    free(copy);
    if (line != 0) {
        snprintf(err, errlen, "line %d: %s", line,
                 why[0] ? why : "syntax error");
        ns_genesis_release(g);
        return NS_ERR_CONFIG;
    }
    if (!c.have_name) {
        snprintf(err, errlen, "missing [network] name");
        ns_genesis_release(g);
        return NS_ERR_CONFIG;
    }
    ns_hash(g->network_id, text, len);
    return NS_OK;
}

int ns_genesis_load(const char *path, ns_genesis_t *g, char *err, size_t errlen)
{
    uint8_t *text = NULL;
    size_t len = 0;
    memset(g, 0, sizeof *g);
    int rc = ns_file_read(path, NS_MAX_GENESIS_BYTES, &text, &len);
    if (rc != NS_OK) {
        snprintf(err, errlen, "%s: %s", path, ns_strerror(rc));
        return rc;
    }
    rc = ns_genesis_parse(text, len, g, err, errlen);
    free(text);
    return rc;
}

void ns_genesis_release(ns_genesis_t *g)
{
    free(g->allocs);
    memset(g, 0, sizeof *g);
}

uint64_t ns_genesis_close_window_ms(const ns_genesis_t *g)
{
    return g->close_window_ms ? g->close_window_ms : NS_GENESIS_CLOSE_WINDOW_MS;
}

int ns_genesis_write(const char *path, const char *name, bool test_network,
                     uint64_t created_ms, const ns_alloc_t *allocs, uint32_t n)
{
    return ns_genesis_write_window(path, name, test_network, created_ms, 0,
                                   allocs, n);
}

int ns_genesis_write_window(const char *path, const char *name,
                            bool test_network, uint64_t created_ms,
                            uint64_t close_window_ms, const ns_alloc_t *allocs,
                            uint32_t n)
{
    size_t cap = 320 + (size_t)n * (NS_ID_TEXT_LEN + 32);
    char *text = malloc(cap);
    if (!text)
        return NS_ERR_NOMEM;
    char window[64] = "";
    if (close_window_ms)
        snprintf(window, sizeof window, "close_window_ms = %llu\n",
                 (unsigned long long)close_window_ms);
    size_t len = (size_t)snprintf(
        text, cap,
        "; nightshift genesis: every node of the network holds this exact "
        "file\n[network]\nname = %s\ntest_network = %s\ncreated_ms = "
        "%llu\n%s[alloc]\n",
        name, test_network ? "true" : "false", (unsigned long long)created_ms,
        window);
    for (uint32_t i = 0; i < n && len < cap; i++) {
        char id[NS_ID_TEXT_LEN + 1], amount[NS_CREDITS_TEXT];
        ns_id_text(id, allocs[i].id);
        len += (size_t)snprintf(text + len, cap - len, "%s = %s\n", id,
                                ns_credits_fmt(amount, allocs[i].micro));
    }
    if (len >= cap) {
        free(text);
        return NS_ERR_TOOBIG;
    }
    /* Never write what the strict parser would read differently: a name
     * with a newline could smuggle in a section, a repeated account or an
     * oversized total would not load. */
    ns_genesis_t check;
    char why[160];
    int rc =
        ns_genesis_parse((const uint8_t *)text, len, &check, why, sizeof why);
    if (rc == NS_OK) {
        if (check.n_allocs != n || strcmp(check.name, name) != 0 ||
            check.close_window_ms != close_window_ms)
            rc = NS_ERR_INVAL;
        ns_genesis_release(&check);
    } else {
        rc = NS_ERR_INVAL;
    }
    if (rc == NS_OK)
        rc = ns_file_write_atomic(path, text, len, 0644);
    free(text);
    return rc;
}

/* ---- the genesis over the wire ------------------------------------------ */

static bool s_offset_ok(uint64_t offset)
{
    return offset < NS_MAX_GENESIS_BYTES && offset % NS_GENESIS_CHUNK == 0;
}

/* The length a chunk at offset of a file of total bytes must have. */
static uint32_t s_chunk_len(uint32_t total, uint32_t offset)
{
    uint32_t left = total - offset;
    return left < NS_GENESIS_CHUNK ? left : NS_GENESIS_CHUNK;
}

static bool s_chunk_ok(uint64_t total, uint64_t offset, size_t len)
{
    return total >= 1 && total <= NS_MAX_GENESIS_BYTES && offset < total &&
           s_offset_ok(offset) &&
           len == s_chunk_len((uint32_t)total, (uint32_t)offset);
}

int ns_genesis_req_encode(uint32_t offset, ns_buf_t *out)
{
    if (!s_offset_ok(offset))
        return NS_ERR_INVAL;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, 1);
    msgpack_pack_uint32(&pk, offset);
    return w.err;
}

int ns_genesis_req_decode(const uint8_t *buf, size_t len, uint32_t *offset)
{
    ns_mpr_t r;
    uint64_t v = 0;
    *offset = 0;
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 1);
    ns_mpr_uint(&r, &v);
    int rc = ns_mpr_end(&r);
    if (rc != NS_OK)
        return rc;
    if (!s_offset_ok(v))
        return NS_ERR_INVAL;
    *offset = (uint32_t)v;
    return NS_OK;
}

int ns_genesis_chunk_encode(const ns_genesis_chunk_t *c, ns_buf_t *out)
{
    if (!s_chunk_ok(c->total, c->offset, c->len))
        return NS_ERR_INVAL;
    ns_mp_writer_t w;
    msgpack_packer pk;
    ns_mp_writer_init(&w, &pk, out);
    msgpack_pack_array(&pk, 4);
    ns_mp_bin(&pk, c->network_id, NS_HASH_BYTES);
    msgpack_pack_uint32(&pk, c->total);
    msgpack_pack_uint32(&pk, c->offset);
    ns_mp_bin(&pk, c->bytes, c->len);
    return w.err;
}

int ns_genesis_chunk_decode(const uint8_t *buf, size_t len,
                            ns_genesis_chunk_t *c)
{
    ns_mpr_t r;
    uint64_t total = 0, offset = 0;
    size_t n = 0;
    memset(c, 0, sizeof *c);
    ns_mpr_init(&r, buf, len);
    ns_mpr_array_exact(&r, 4);
    ns_mpr_bin_exact(&r, c->network_id, NS_HASH_BYTES);
    ns_mpr_uint(&r, &total);
    ns_mpr_uint(&r, &offset);
    ns_mpr_bin(&r, &c->bytes, &n, NS_GENESIS_CHUNK);
    int rc = ns_mpr_end(&r);
    if (rc == NS_OK && !s_chunk_ok(total, offset, n))
        rc = NS_ERR_INVAL;
    if (rc != NS_OK) {
        memset(c, 0, sizeof *c);
        return rc;
    }
    c->total = (uint32_t)total;
    c->offset = (uint32_t)offset;
    c->len = (uint32_t)n;
    return NS_OK;
}

void ns_genesis_chunk_at(const ns_hash_t network_id, const uint8_t *text,
                         uint32_t total, uint32_t offset, ns_genesis_chunk_t *c)
{
    memcpy(c->network_id, network_id, NS_HASH_BYTES);
    c->total = total;
    c->offset = offset;
    c->bytes = text + offset;
    c->len = s_chunk_len(total, offset);
}
