#include "nightshift/mp.h"
#include "nightshift/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ns_mpr_init(ns_mpr_t *r, const void *buf, size_t len)
{
    r->p = buf;
    r->left = len;
    r->err = NS_OK;
}

static int s_fail(ns_mpr_t *r, int err)
{
    if (r->err == NS_OK)
        r->err = err;
    return r->err;
}

/* Take n bytes; NULL (and a sticky error) if fewer remain. */
static const uint8_t *s_take(ns_mpr_t *r, size_t n)
{
    if (r->err != NS_OK)
        return NULL;
    if (n > r->left) {
        s_fail(r, NS_ERR_TRUNCATED);
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t s_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Read a tag byte and, for the families with a length field, its length. */
static int s_peek_tag(ns_mpr_t *r, uint8_t *tag)
{
    if (r->err != NS_OK)
        return r->err;
    if (r->left == 0)
        return s_fail(r, NS_ERR_TRUNCATED);
    *tag = r->p[0];
    return NS_OK;
}

static int s_len_field(ns_mpr_t *r, size_t bytes, uint64_t *len)
{
    const uint8_t *p = s_take(r, bytes);
    if (!p)
        return r->err;
    *len = s_be(p, bytes);
    return NS_OK;
}

int ns_mpr_array(ns_mpr_t *r, uint32_t *n, uint32_t max)
{
    uint8_t tag;
    uint64_t len = 0;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if ((tag & 0xf0) == 0x90) {
        s_take(r, 1);
        len = tag & 0x0f;
    } else if (tag == 0xdc) {
        s_take(r, 1);
        s_len_field(r, 2, &len);
    } else if (tag == 0xdd) {
        s_take(r, 1);
        s_len_field(r, 4, &len);
    } else {
        return s_fail(r, NS_ERR_TYPE);
    }
    if (r->err != NS_OK)
        return r->err;
    if (len > max)
        return s_fail(r, NS_ERR_TOOBIG);
    if (len > r->left) /* every element takes at least one byte */
        return s_fail(r, NS_ERR_TRUNCATED);
    *n = (uint32_t)len;
    return NS_OK;
}

int ns_mpr_array_exact(ns_mpr_t *r, uint32_t n)
{
    uint32_t got = 0;
    if (ns_mpr_array(r, &got, UINT32_MAX) != NS_OK)
        return r->err;
    return got == n ? NS_OK : s_fail(r, NS_ERR_TYPE);
}

int ns_mpr_int(ns_mpr_t *r, int64_t *v)
{
    uint8_t tag;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if (tag <= 0x7f || tag >= 0xe0) {
        s_take(r, 1);
        *v = (int8_t)tag;
        if (tag <= 0x7f)
            *v = tag;
        return NS_OK;
    }
    size_t size;
    int is_signed;
    switch (tag) {
    case 0xcc:
        size = 1;
        is_signed = 0;
        break;
    case 0xcd:
        size = 2;
        is_signed = 0;
        break;
    case 0xce:
        size = 4;
        is_signed = 0;
        break;
    case 0xcf:
        size = 8;
        is_signed = 0;
        break;
    case 0xd0:
        size = 1;
        is_signed = 1;
        break;
    case 0xd1:
        size = 2;
        is_signed = 1;
        break;
    case 0xd2:
        size = 4;
        is_signed = 1;
        break;
    case 0xd3:
        size = 8;
        is_signed = 1;
        break;
    default:
        return s_fail(r, NS_ERR_TYPE);
    }
    s_take(r, 1);
    const uint8_t *p = s_take(r, size);
    if (!p)
        return r->err;
    uint64_t raw = s_be(p, size);
    if (!is_signed) {
        if (raw > INT64_MAX)
            return s_fail(r, NS_ERR_INVAL);
        *v = (int64_t)raw;
    } else {
        /* sign-extend from size bytes */
        unsigned shift = (unsigned)(64 - 8 * size);
        *v = (int64_t)(raw << shift) >> shift;
    }
    return NS_OK;
}

int ns_mpr_uint(ns_mpr_t *r, uint64_t *v)
{
    uint8_t tag;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if (tag <= 0x7f) {
        s_take(r, 1);
        *v = tag;
        return NS_OK;
    }
    size_t size;
    switch (tag) {
    case 0xcc:
        size = 1;
        break;
    case 0xcd:
        size = 2;
        break;
    case 0xce:
        size = 4;
        break;
    case 0xcf:
        size = 8;
        break;
    default:
        return s_fail(r, NS_ERR_TYPE);
    }
    s_take(r, 1);
    const uint8_t *p = s_take(r, size);
    if (!p)
        return r->err;
    *v = s_be(p, size);
    return NS_OK;
}

int ns_mpr_u32(ns_mpr_t *r, uint32_t *v)
{
    uint64_t x = 0;
    if (ns_mpr_uint(r, &x) != NS_OK)
        return r->err;
    if (x > UINT32_MAX)
        return s_fail(r, NS_ERR_TOOBIG);
    *v = (uint32_t)x;
    return NS_OK;
}

int ns_mpr_bool(ns_mpr_t *r, bool *v)
{
    uint8_t tag;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if (tag != 0xc2 && tag != 0xc3)
        return s_fail(r, NS_ERR_TYPE);
    s_take(r, 1);
    *v = tag == 0xc3;
    return NS_OK;
}

int ns_mpr_f64(ns_mpr_t *r, double *v)
{
    uint8_t tag;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if (tag == 0xca) {
        s_take(r, 1);
        const uint8_t *p = s_take(r, 4);
        if (!p)
            return r->err;
        uint32_t bits = (uint32_t)s_be(p, 4);
        float f;
        memcpy(&f, &bits, 4);
        *v = f;
        return NS_OK;
    }
    if (tag == 0xcb) {
        s_take(r, 1);
        const uint8_t *p = s_take(r, 8);
        if (!p)
            return r->err;
        uint64_t bits = s_be(p, 8);
        memcpy(v, &bits, 8);
        return NS_OK;
    }
    return s_fail(r, NS_ERR_TYPE);
}

int ns_mpr_bin(ns_mpr_t *r, const uint8_t **p, size_t *n, size_t max)
{
    uint8_t tag;
    uint64_t len = 0;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if (tag < 0xc4 || tag > 0xc6)
        return s_fail(r, NS_ERR_TYPE);
    s_take(r, 1);
    if (s_len_field(r, (size_t)1 << (tag - 0xc4), &len) != NS_OK)
        return r->err;
    if (len > max)
        return s_fail(r, NS_ERR_TOOBIG);
    const uint8_t *data = s_take(r, (size_t)len);
    if (!data)
        return r->err;
    *p = data;
    *n = (size_t)len;
    return NS_OK;
}

int ns_mpr_bin_exact(ns_mpr_t *r, void *out, size_t n)
{
    const uint8_t *p = NULL;
    size_t got = 0;
    if (ns_mpr_bin(r, &p, &got, n) != NS_OK)
        return r->err;
    if (got != n)
        return s_fail(r, NS_ERR_TYPE);
    memcpy(out, p, n);
    return NS_OK;
}

int ns_mpr_str(ns_mpr_t *r, char *out, size_t max)
{
    uint8_t tag;
    uint64_t len = 0;
    if (s_peek_tag(r, &tag) != NS_OK)
        return r->err;
    if ((tag & 0xe0) == 0xa0) {
        s_take(r, 1);
        len = tag & 0x1f;
    } else if (tag >= 0xd9 && tag <= 0xdb) {
        s_take(r, 1);
        s_len_field(r, (size_t)1 << (tag - 0xd9), &len);
    } else {
        return s_fail(r, NS_ERR_TYPE);
    }
    if (r->err != NS_OK)
        return r->err;
    if (len > max)
        return s_fail(r, NS_ERR_TOOBIG);
    const uint8_t *data = s_take(r, (size_t)len);
    if (!data)
        return r->err;
    for (size_t i = 0; i < len; i++)
        if (data[i] < 0x20 || data[i] == 0x7f)
            return s_fail(r, NS_ERR_INVAL);
    memcpy(out, data, (size_t)len);
    out[len] = '\0';
    return NS_OK;
}

int ns_mpr_end(ns_mpr_t *r)
{
    if (r->err == NS_OK && r->left != 0)
        s_fail(r, NS_ERR_TRAILING);
    return r->err;
}

/* ---- buffers and the writer -------------------------------------------- */

void ns_buf_init(ns_buf_t *b)
{
    memset(b, 0, sizeof *b);
}

void ns_buf_release(ns_buf_t *b)
{
    free(b->data);
    ns_buf_init(b);
}

int ns_buf_append(ns_buf_t *b, const void *data, size_t len)
{
    if (len > SIZE_MAX / 2 - b->len)
        return NS_ERR_TOOBIG;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len)
            cap *= 2;
        uint8_t *nd = realloc(b->data, cap);
        if (!nd)
            return NS_ERR_NOMEM;
        b->data = nd;
        b->cap = cap;
    }
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    return NS_OK;
}

static int s_write_cb(void *data, const char *buf, size_t len)
{
    ns_mp_writer_t *w = data;
    if (w->err == NS_OK)
        w->err = ns_buf_append(w->buf, buf, len);
    return w->err == NS_OK ? 0 : -1;
}

void ns_mp_writer_init(ns_mp_writer_t *w, msgpack_packer *pk, ns_buf_t *buf)
{
    buf->len = 0;
    w->buf = buf;
    w->err = NS_OK;
    msgpack_packer_init(pk, w, s_write_cb);
}

void ns_mp_bin(msgpack_packer *pk, const void *data, size_t len)
{
    msgpack_pack_bin(pk, len);
    msgpack_pack_bin_body(pk, data, len);
}

const msgpack_object *ns_mp_obj_get(const msgpack_object *o, const char *path)
{
    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t len = dot ? (size_t)(dot - path) : strlen(path);
        const msgpack_object *next = NULL;
        if (o->type == MSGPACK_OBJECT_MAP)
            for (uint32_t i = 0; i < o->via.map.size && !next; i++) {
                const msgpack_object *k = &o->via.map.ptr[i].key;
                if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
                    memcmp(k->via.str.ptr, path, len) == 0)
                    next = &o->via.map.ptr[i].val;
            }
        o = next;
        path += len + (dot != NULL);
    }
    return o;
}

void ns_mp_credits(msgpack_packer *pk, uint64_t micro)
{
    msgpack_pack_double(pk, (double)micro / (double)NS_MICRO);
}

void ns_mp_str(msgpack_packer *pk, const char *s)
{
    size_t len = strlen(s);
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, s, len);
}

/* ---- msgpack -> JSON ------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
    int err;
} s_out_t;

static void s_put(s_out_t *o, const char *s, size_t n)
{
    if (o->err)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (o->len + n + 1 > cap)
            cap *= 2;
        char *nb = realloc(o->buf, cap);
        if (!nb) {
            o->err = NS_ERR_NOMEM;
            return;
        }
        o->buf = nb;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void s_puts(s_out_t *o, const char *s)
{
    s_put(o, s, strlen(s));
}

static void s_json_str(s_out_t *o, const uint8_t *s, size_t n)
{
    s_put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        uint8_t c = s[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            s_put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            s_put(o, esc, 6);
        } else {
            s_put(o, (const char *)&c, 1);
        }
    }
    s_put(o, "\"", 1);
}

static void s_indent(s_out_t *o, int pretty, int depth)
{
    if (!pretty)
        return;
    s_put(o, "\n", 1);
    for (int i = 0; i < depth; i++)
        s_put(o, "  ", 2);
}

static void s_json_value(ns_mpr_t *r, s_out_t *o, int depth, int pretty)
{
    uint8_t tag;
    char num[64];
    if (depth > 32) {
        s_fail(r, NS_ERR_TOOBIG);
        return;
    }
    if (s_peek_tag(r, &tag) != NS_OK)
        return;
    if (tag == 0xc0) {
        s_take(r, 1);
        s_puts(o, "null");
    } else if (tag == 0xc2 || tag == 0xc3) {
        bool b;
        ns_mpr_bool(r, &b);
        s_puts(o, b ? "true" : "false");
    } else if (tag <= 0x7f || (tag >= 0xcc && tag <= 0xcf)) {
        uint64_t v = 0;
        ns_mpr_uint(r, &v);
        snprintf(num, sizeof num, "%llu", (unsigned long long)v);
        s_puts(o, num);
    } else if (tag >= 0xe0 || (tag >= 0xd0 && tag <= 0xd3)) {
        int64_t v = 0;
        ns_mpr_int(r, &v);
        snprintf(num, sizeof num, "%lld", (long long)v);
        s_puts(o, num);
    } else if (tag == 0xca || tag == 0xcb) {
        double v = 0;
        ns_mpr_f64(r, &v);
        double mag = v < 0 ? -v : v;
        if (v != v || v > 1e308 || v < -1e308) {
            s_puts(o, "null");
        } else if (mag == 0 || (mag >= 1e-6 && mag < 1e15)) {
            /* a plain decimal, six places at most (amounts in credits
             * are exact to the micro-credit): "12.5", "1000000" */
            snprintf(num, sizeof num, "%.6f", v);
            size_t n = strlen(num);
            while (num[n - 1] == '0')
                num[--n] = '\0';
            if (num[n - 1] == '.')
                num[--n] = '\0';
            s_puts(o, strcmp(num, "-0") == 0 ? "0" : num);
        } else {
            snprintf(num, sizeof num, "%.6g", v);
            s_puts(o, num);
        }
    } else if ((tag & 0xe0) == 0xa0 || (tag >= 0xd9 && tag <= 0xdb)) {
        /* read raw so that any byte can be escaped */
        uint64_t len = 0;
        if ((tag & 0xe0) == 0xa0) {
            s_take(r, 1);
            len = tag & 0x1f;
        } else {
            s_take(r, 1);
            s_len_field(r, (size_t)1 << (tag - 0xd9), &len);
        }
        const uint8_t *p = r->err ? NULL : s_take(r, (size_t)len);
        if (p)
            s_json_str(o, p, (size_t)len);
    } else if (tag >= 0xc4 && tag <= 0xc6) {
        const uint8_t *p = NULL;
        size_t n = 0;
        if (ns_mpr_bin(r, &p, &n, SIZE_MAX) == NS_OK) {
            char *hex = malloc(2 * n + 1);
            if (!hex) {
                s_fail(r, NS_ERR_NOMEM);
                return;
            }
            ns_hex(hex, p, n);
            s_json_str(o, (const uint8_t *)hex, 2 * n);
            free(hex);
        }
    } else if ((tag & 0xf0) == 0x90 || tag == 0xdc || tag == 0xdd) {
        uint32_t n = 0;
        if (ns_mpr_array(r, &n, UINT32_MAX) != NS_OK)
            return;
        s_puts(o, "[");
        for (uint32_t i = 0; i < n && !r->err; i++) {
            if (i)
                s_puts(o, ",");
            s_indent(o, pretty, depth + 1);
            s_json_value(r, o, depth + 1, pretty);
        }
        if (n)
            s_indent(o, pretty, depth);
        s_puts(o, "]");
    } else if ((tag & 0xf0) == 0x80 || tag == 0xde || tag == 0xdf) {
        uint64_t n = 0;
        s_take(r, 1);
        if ((tag & 0xf0) == 0x80)
            n = tag & 0x0f;
        else
            s_len_field(r, tag == 0xde ? 2 : 4, &n);
        if (r->err)
            return;
        if (n > r->left / 2) {
            s_fail(r, NS_ERR_TRUNCATED);
            return;
        }
        s_puts(o, "{");
        for (uint64_t i = 0; i < n && !r->err; i++) {
            if (i)
                s_puts(o, ",");
            s_indent(o, pretty, depth + 1);
            uint8_t kt;
            if (s_peek_tag(r, &kt) != NS_OK)
                return;
            if (!((kt & 0xe0) == 0xa0 || (kt >= 0xd9 && kt <= 0xdb))) {
                s_fail(r, NS_ERR_TYPE); /* JSON keys must be strings */
                return;
            }
            s_json_value(r, o, depth + 1, pretty);
            s_puts(o, pretty ? ": " : ":");
            s_json_value(r, o, depth + 1, pretty);
        }
        if (n)
            s_indent(o, pretty, depth);
        s_puts(o, "}");
    } else {
        s_fail(r, NS_ERR_TYPE); /* ext and reserved types */
    }
}

int ns_mp_to_json(const void *buf, size_t len, char **json, int pretty)
{
    ns_mpr_t r;
    s_out_t o = {0};
    ns_mpr_init(&r, buf, len);
    s_json_value(&r, &o, 0, pretty);
    ns_mpr_end(&r);
    if (r.err == NS_OK && o.err)
        r.err = o.err;
    if (r.err != NS_OK) {
        free(o.buf);
        return r.err;
    }
    if (!o.buf)
        s_puts(&o, "");
    *json = o.buf;
    return NS_OK;
}
