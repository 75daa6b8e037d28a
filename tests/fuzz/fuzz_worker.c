/* fuzz_worker.c - libFuzzer target for the frames between the sandbox
 * worker and its supervisor (exec/worker_frame.c). The supervisor reads
 * HELLO and RESULT heads from a child that runs untrusted kernels; the
 * child reads RUN and ITEMS heads. Built as `fuzz_worker` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_worker_replay`, which ctest
 * runs over tests/fuzz/corpus/worker; seeds from fuzz_worker_gen_corpus.
 *
 * The input is a head (the 4-byte length prefix stripped, as the readers
 * take it); ns_worker_hello_read, ns_worker_request_read and
 * ns_worker_result_read each run on all of it. Besides "no crash, no
 * leak": what reads keeps the caps (error text, item count), borrowed
 * error text stays inside the input, a request's job validates and its
 * items are allocated exactly when there are some; and where the packer
 * can say the same thing (the HELLO type and protocol, a status that fits
 * an int, error text without NUL, a RUN without items or ITEMS with some)
 * packing what was read gives a frame whose length prefix is right, that
 * reads back to the same message and packs to the same bytes.
 */
#include "nightshift/mp.h"
#include "nightshift/worker_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_worker: %s:%d: %s\n", __FILE__, __LINE__,    \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* p[0..n) lies inside data[0..size). */
static bool s_inside(const uint8_t *p, size_t n, const uint8_t *data,
                     size_t size)
{
    return p >= data && (size_t)(p - data) <= size &&
           n <= size - (size_t)(p - data);
}

/* The head of a frame the packer wrote: the prefix says its length. */
static void s_head(const msgpack_sbuffer *sb, const uint8_t **head, size_t *len)
{
    S_ASSERT(sb->data != NULL && sb->size >= NS_WORKER_FRAME_LEN);
    *head = (const uint8_t *)sb->data + NS_WORKER_FRAME_LEN;
    *len = sb->size - NS_WORKER_FRAME_LEN;
    S_ASSERT(ns_worker_frame_len((const uint8_t *)sb->data) == *len);
}

static void s_same_frames(const msgpack_sbuffer *a, const msgpack_sbuffer *b)
{
    S_ASSERT(a->size == b->size && memcmp(a->data, b->data, a->size) == 0);
}

/* Error text the packers can carry: no NUL inside, so a copy with one at
 * the end says the same; NULL when it cannot. */
static char *s_error_text(const uint8_t *error, size_t len)
{
    if (len > 0 && memchr(error, 0, len))
        return NULL;
    char *text = malloc(len + 1);
    S_ASSERT(text != NULL);
    if (len)
        memcpy(text, error, len);
    text[len] = '\0';
    return text;
}

static bool s_fits_int(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

static void s_hello(const uint8_t *data, size_t size)
{
    ns_worker_hello_t h, again;
    if (ns_worker_hello_read(data, size, &h) != NS_OK)
        return;
    S_ASSERT(h.error_len <= NS_WORKER_MAX_ERROR);
    S_ASSERT(h.error_len == 0 || s_inside(h.error, h.error_len, data, size));
    if (h.type != NS_WORKER_MSG_HELLO || h.protocol != NS_WORKER_PROTOCOL ||
        !s_fits_int(h.status))
        return;
    char *error = s_error_text(h.error, h.error_len);
    if (!error)
        return;
    msgpack_sbuffer sb1, sb2;
    const uint8_t *head;
    size_t len;
    ns_worker_hello_pack(&sb1, (int)h.status, error, &h.dev);
    s_head(&sb1, &head, &len);
    S_ASSERT(ns_worker_hello_read(head, len, &again) == NS_OK);
    S_ASSERT(again.type == h.type && again.protocol == h.protocol &&
             again.status == h.status && again.error_len == h.error_len);
    S_ASSERT(h.error_len == 0 ||
             memcmp(again.error, h.error, h.error_len) == 0);
    S_ASSERT(memcmp(&again.dev, &h.dev, sizeof h.dev) == 0);
    ns_worker_hello_pack(&sb2, (int)again.status, error, &again.dev);
    s_same_frames(&sb1, &sb2);
    msgpack_sbuffer_destroy(&sb1);
    msgpack_sbuffer_destroy(&sb2);
    free(error);
}

/* Large structs live here, not on the stack; one input at a time. */
static ns_worker_request_t s_req[2];

static void s_request_release(ns_worker_request_t *q)
{
    ns_job_release(&q->job);
    free(q->items);
    q->items = NULL;
}

static int s_request_read(const uint8_t *head, size_t len,
                          ns_worker_request_t *q)
{
    char err[256] = "";
    ns_job_init(&q->job);
    int rc = ns_worker_request_read(head, len, q, err, sizeof err);
    S_ASSERT(rc != NS_ERR_INVAL || err[0] != '\0');
    return rc;
}

static void s_request(const uint8_t *data, size_t size)
{
    ns_worker_request_t *q = &s_req[0], *again = &s_req[1];
    char err[256];
    if (s_request_read(data, size, q) != NS_OK)
        goto out;
    bool extra =
        q->type == NS_WORKER_MSG_PREFLIGHT || q->type == NS_WORKER_MSG_CHECK;
    S_ASSERT(q->type == NS_WORKER_MSG_RUN || q->type == NS_WORKER_MSG_ITEMS ||
             extra);
    S_ASSERT(q->n_items <= NS_WORKER_MAX_ITEMS);
    S_ASSERT((q->items != NULL) == (q->n_items > 0));
    S_ASSERT(ns_job_validate(&q->job, err, sizeof err) == NS_OK);
    msgpack_sbuffer sb1, sb2;
    const uint8_t *head;
    size_t len;
    if (extra) {
        /* PREFLIGHT and CHECK: no items, their values within the caps,
         * descriptors only where the job has IN (and CHECK's OUT) */
        S_ASSERT(q->n_items == 0 && q->x.k <= NS_MAX_CHECKS);
        S_ASSERT(q->x.name[sizeof q->x.name - 1] == '\0');
        for (uint32_t i = 0; i < 32; i++) {
            S_ASSERT(!(q->files >> i & 1) ||
                     (i < q->job.n_args && q->job.args[i].kind == NS_ARG_IN));
            S_ASSERT(!(q->x.outfiles >> i & 1) ||
                     (i < q->job.n_args && q->job.args[i].kind == NS_ARG_OUT));
        }
        S_ASSERT(ns_worker_request_pack_extra(&sb1, q->type, &q->job,
                                              q->verified, q->files,
                                              &q->x) == NS_OK);
        s_head(&sb1, &head, &len);
        S_ASSERT(s_request_read(head, len, again) == NS_OK);
        S_ASSERT(again->type == q->type && again->files == q->files &&
                 again->verified == q->verified &&
                 memcmp(&again->x, &q->x, sizeof q->x) == 0);
        S_ASSERT(ns_worker_request_pack_extra(&sb2, again->type, &again->job,
                                              again->verified, again->files,
                                              &again->x) == NS_OK);
        s_same_frames(&sb1, &sb2);
        msgpack_sbuffer_destroy(&sb1);
        msgpack_sbuffer_destroy(&sb2);
        goto out;
    }
    bool items = q->type == NS_WORKER_MSG_ITEMS;
    if (items != (q->n_items > 0))
        goto out; /* the packer says "items" by giving some */
    S_ASSERT(ns_worker_request_pack(&sb1, &q->job, q->items, q->n_items,
                                    q->verified, q->files) == NS_OK);
    s_head(&sb1, &head, &len);
    S_ASSERT(len <= size); /* ns_job_read takes canonical form only */
    S_ASSERT(s_request_read(head, len, again) == NS_OK);
    S_ASSERT(again->type == q->type && again->n_items == q->n_items &&
             again->verified == q->verified && again->files == q->files);
    S_ASSERT(q->n_items == 0 || memcmp(again->items, q->items,
                                       q->n_items * sizeof *q->items) == 0);
    S_ASSERT(ns_worker_request_pack(&sb2, &again->job, again->items,
                                    again->n_items, again->verified,
                                    again->files) == NS_OK);
    s_same_frames(&sb1, &sb2);
    msgpack_sbuffer_destroy(&sb1);
    msgpack_sbuffer_destroy(&sb2);
out:
    s_request_release(q);
    s_request_release(again);
}

static void s_result(const uint8_t *data, size_t size)
{
    ns_worker_reply_t r, again;
    if (ns_worker_result_read(data, size, &r) != NS_OK)
        return;
    S_ASSERT(r.error_len <= NS_WORKER_MAX_ERROR);
    S_ASSERT(r.error_len == 0 || s_inside(r.error, r.error_len, data, size));
    if (r.type != NS_WORKER_MSG_RESULT || !s_fits_int(r.status))
        return;
    char *error = s_error_text(r.error, r.error_len);
    if (!error)
        return;
    msgpack_sbuffer sb1, sb2;
    const uint8_t *head;
    size_t len;
    /* extra values: absent, or at most NS_WORKER_MAX_EXTRA of them */
    S_ASSERT(r.n_extra <= NS_WORKER_MAX_EXTRA);
    /* a RESULT of 5 elements carries its extra, even an empty one */
    ns_mpr_t top;
    uint32_t n_top = 0;
    ns_mpr_init(&top, data, size);
    bool extra = ns_mpr_array(&top, &n_top, 5) == NS_OK && n_top == 5;
    ns_worker_result_pack_extra(&sb1, (int)r.status, error, &r.timings,
                                extra ? r.extra : NULL, r.n_extra);
    s_head(&sb1, &head, &len);
    S_ASSERT(len <= size);
    S_ASSERT(ns_worker_result_read(head, len, &again) == NS_OK);
    S_ASSERT(again.type == r.type && again.status == r.status &&
             again.error_len == r.error_len && again.n_extra == r.n_extra);
    S_ASSERT(r.error_len == 0 ||
             memcmp(again.error, r.error, r.error_len) == 0);
    S_ASSERT(memcmp(&again.timings, &r.timings, sizeof r.timings) == 0);
    S_ASSERT(memcmp(again.extra, r.extra, sizeof r.extra) == 0);
    ns_worker_result_pack_extra(&sb2, (int)again.status, error, &again.timings,
                                extra ? again.extra : NULL, again.n_extra);
    s_same_frames(&sb1, &sb2);
    msgpack_sbuffer_destroy(&sb1);
    msgpack_sbuffer_destroy(&sb2);
    free(error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    s_hello(data, size);
    s_request(data, size);
    s_result(data, size);
    return 0;
}
