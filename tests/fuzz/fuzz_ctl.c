/* fuzz_ctl.c - libFuzzer target for the control socket's requests
 * (node/control.c), the bytes any local process that can open
 * DATADIR/control.sock sends the node. Built as `fuzz_ctl` (clang,
 * NS_FUZZ=ON) and, with replay.c, as `fuzz_ctl_replay`, which ctest runs
 * over tests/fuzz/corpus/ctl; seeds from fuzz_ctl_gen_corpus.
 *
 * ns_ctl_req_read over the input: the verdict is OK, NOTFOUND or INVAL
 * and nothing else; what reads keeps the request's caps (a known kind, an
 * address that is a NUL-terminated string, a block of at most an hour),
 * and ns_ctl_req_pack of it reads back to the same request, whose packing
 * is the same bytes.
 */
#include "nightshift/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define S_ASSERT(cond)                                                         \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_ctl: %s:%d: %s\n", __FILE__, __LINE__,       \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ns_ctl_req_t r, again;
    ns_ctl_kind_t kind;
    int rc = ns_ctl_req_read(data, size, &r);
    S_ASSERT(rc == NS_OK || rc == NS_ERR_NOTFOUND || rc == NS_ERR_INVAL);
    if (rc != NS_OK)
        return 0;
    S_ASSERT(size <= NS_CTL_MAX_REQUEST);
    S_ASSERT(strcmp(ns_ctl_name(r.kind), "?") != 0);
    S_ASSERT(ns_ctl_kind(ns_ctl_name(r.kind), &kind) == NS_OK &&
             kind == r.kind);
    S_ASSERT(memchr(r.addr, 0, sizeof r.addr) != NULL);
    S_ASSERT(r.kind == NS_CTL_CONNECT || r.addr[0] == '\0');
    S_ASSERT(r.kind != NS_CTL_BLOCK || r.ms <= NS_CTL_MAX_BLOCK_MS);

    ns_buf_t b1, b2;
    ns_buf_init(&b1);
    ns_buf_init(&b2);
    S_ASSERT(ns_ctl_req_pack(&r, &b1) == NS_OK);
    S_ASSERT(b1.len <= size); /* the canonical form is never longer */
    S_ASSERT(ns_ctl_req_read(b1.data, b1.len, &again) == NS_OK);
    S_ASSERT(memcmp(&r, &again, sizeof r) == 0); /* both zeroed first */
    S_ASSERT(ns_ctl_req_pack(&again, &b2) == NS_OK);
    S_ASSERT(b1.len == b2.len && memcmp(b1.data, b2.data, b1.len) == 0);
    ns_buf_release(&b1);
    ns_buf_release(&b2);
    return 0;
}
