/* forge.c - ns_forge: sign a TRANSFER entry with a datadir's key, for the
 * integration tests that inject ledger entries (a fork: two entries at one
 * seq).
 *
 *   ns_forge KEYFILE NETWORK_HEX SEQ PREV_HEX TO_ID AMOUNT
 *   ns_forge KEYFILE NETWORK_HEX SEQ PREV_HEX cancel JOB_HEX
 *
 * The second form signs a CANCEL of job JOB_HEX (no accept, no reopen):
 * a market entry, checked for form only at a seq already taken.
 * PREV_HEX is the id of the author's entry at SEQ - 1 (64 zeros for seq
 * 1); the timestamp is now. Prints the encoded entry in hex, then its id
 * on a second line. Exit 0, or 2 on a bad argument.
 */
#include "nightshift/ledger.h"
#include "nightshift/util.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    ns_identity_t *me = NULL;
    ns_hash_t network, prev, id;
    ns_entry_body_t b;
    uint64_t seq = 0;
    ns_buf_t body, out;
    int code = 2;
    ns_buf_init(&body);
    ns_buf_init(&out);
    memset(&b, 0, sizeof b);
    if (argc != 7 || sodium_init() < 0 ||
        ns_identity_load(argv[1], &me) != NS_OK ||
        ns_unhex(network, NS_HASH_BYTES, argv[2]) != NS_OK ||
        ns_parse_u64(argv[3], &seq) != NS_OK || seq == 0 ||
        ns_unhex(prev, NS_HASH_BYTES, argv[4]) != NS_OK ||
        (strcmp(argv[5], "cancel") == 0
             ? ns_unhex(b.job_id, NS_HASH_BYTES, argv[6]) != NS_OK
             : ns_id_parse(argv[5], b.to) != NS_OK ||
                   ns_parse_u64(argv[6], &b.amount) != NS_OK)) {
        fprintf(stderr, "usage: ns_forge KEYFILE NETWORK_HEX SEQ PREV_HEX "
                        "{TO_ID AMOUNT | cancel JOB_HEX}\n");
        goto out;
    }
    code = 1;
    uint8_t type =
        strcmp(argv[5], "cancel") == 0 ? NS_ENTRY_CANCEL : NS_ENTRY_TRANSFER;
    if (ns_entry_body_encode(type, &b, &body) != NS_OK ||
        ns_entry_encode(me, network, seq, prev, type, body.data, body.len, NULL,
                        0, ns_now_ms(), &out, id) != NS_OK)
        goto out;
    char *hex = malloc(2 * out.len + 1), idhex[2 * NS_HASH_BYTES + 1];
    if (!hex)
        goto out;
    ns_hex(hex, out.data, out.len);
    ns_hex(idhex, id, NS_HASH_BYTES);
    printf("%s\n%s\n", hex, idhex);
    free(hex);
    code = 0;
out:
    ns_buf_release(&body);
    ns_buf_release(&out);
    ns_identity_destroy(&me);
    return code;
}
