/* invite.c - the one-line invitation to a network (invite.h). */
#include "nightshift/invite.h"

#include "nightshift/util.h"

#include <stdio.h>
#include <string.h>

bool ns_endpoint_wildcard(const char *ep)
{
    static const char *const wild[] = {
        "tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:", "tcp://:::"};
    for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++)
        if (strncmp(ep, wild[i], strlen(wild[i])) == 0)
            return true;
    return false;
}

/* A short, printable piece of hostile input for an error line. */
static void s_quote(char *out, size_t cap, const char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap && i < 120; i++)
        out[k++] = (p[i] > ' ' && p[i] <= '~') ? p[i] : '?';
    if (n > 120 && k + 4 < cap) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

int ns_invite_parse(const char *text, ns_invite_t *inv, char *err,
                    size_t errlen)
{
    static const char prefix[] = "nightshift:";
    memset(inv, 0, sizeof *inv);
    size_t len = strnlen(text, NS_INVITE_MAX_LEN + 1);
    char piece[128];
#define FAIL(...)                                                              \
    do {                                                                       \
        snprintf(err, errlen, "malformed invitation: " __VA_ARGS__);           \
        memset(inv, 0, sizeof *inv);                                           \
        return NS_ERR_INVAL;                                                   \
    } while (0)
    if (len > NS_INVITE_MAX_LEN)
        FAIL("longer than %d characters", NS_INVITE_MAX_LEN);
    for (size_t i = 0; i < len; i++)
        if (text[i] <= ' ' || text[i] > '~')
            FAIL("character %zu is a space or not printable ASCII", i + 1);
    if (strncmp(text, prefix, sizeof prefix - 1) != 0)
        FAIL("it does not start with '%s1:' (ask for the output of "
             "`nightshift invite`)",
             prefix);
    const char *p = text + sizeof prefix - 1;
    if (strncmp(p, "1:", 2) != 0) {
        s_quote(piece, sizeof piece, p, strcspn(p, ":"));
        FAIL("format version '%s' is not 1 (a newer nightshift wrote it?)",
             piece);
    }
    p += 2;
    const char *at = strchr(p, '@');
    if (!at || at - p != NS_ID_TEXT_LEN) {
        s_quote(piece, sizeof piece, p, at ? (size_t)(at - p) : strlen(p));
        FAIL("network id '%s' is not 52 base32 characters followed by '@'",
             piece);
    }
    char idtext[NS_ID_TEXT_LEN + 1];
    memcpy(idtext, p, NS_ID_TEXT_LEN);
    idtext[NS_ID_TEXT_LEN] = '\0';
    if (ns_unbase32(inv->network_id, NS_HASH_BYTES, idtext) != NS_OK) {
        s_quote(piece, sizeof piece, p, NS_ID_TEXT_LEN);
        FAIL("network id '%s' is not base32 (a-z, 2-7)", piece);
    }
    p = at + 1;
    if (!*p)
        FAIL("no bootstrap address after the network id");
    while (1) {
        size_t n = strcspn(p, ",");
        s_quote(piece, sizeof piece, p, n);
        if (n == 0)
            FAIL("an empty address (two commas, or one at an end)");
        if (inv->n_addrs == NS_INVITE_MAX_ADDRS)
            FAIL("more than %d addresses", NS_INVITE_MAX_ADDRS);
        if (n >= NS_ADDR_MAX)
            FAIL("address '%s' is too long", piece);
        char *a = inv->addrs[inv->n_addrs];
        memcpy(a, p, n);
        a[n] = '\0';
        uint8_t pk[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        if (ns_addr_parse(a, pk, ep) != NS_OK)
            FAIL("'%s' is not an address ID@tcp://HOST:PORT", piece);
        if (ns_endpoint_wildcard(ep))
            FAIL("'%s' has a wildcard host nobody can dial", piece);
        for (uint32_t i = 0; i < inv->n_addrs; i++)
            if (strcmp(inv->addrs[i], a) == 0)
                FAIL("address '%s' is repeated", piece);
        inv->n_addrs++;
        if (!p[n])
            break;
        p += n + 1;
        if (!*p)
            FAIL("an empty address (two commas, or one at an end)");
    }
#undef FAIL
    return NS_OK;
}

int ns_invite_format(const ns_invite_t *inv, char *out, size_t cap)
{
    if (inv->n_addrs == 0 || inv->n_addrs > NS_INVITE_MAX_ADDRS)
        return NS_ERR_INVAL;
    char net[NS_ID_TEXT_LEN + 1];
    ns_base32(net, inv->network_id, NS_HASH_BYTES);
    size_t k = (size_t)snprintf(out, cap, "%s%s@", NS_INVITE_PREFIX, net);
    for (uint32_t i = 0; i < inv->n_addrs && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? "," : "",
                              inv->addrs[i]);
    if (k >= cap)
        return NS_ERR_TOOBIG;
    /* What we write must read back as the same invitation. */
    ns_invite_t back;
    char why[160];
    if (ns_invite_parse(out, &back, why, sizeof why) != NS_OK ||
        back.n_addrs != inv->n_addrs) {
        out[0] = '\0';
        return NS_ERR_INVAL;
    }
    return NS_OK;
}
