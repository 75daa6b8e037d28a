#include "nightshift/identity.h"
#include "nightshift/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MAGIC "nightshift-key-v1 "
#define KEY_FILE_LEN (sizeof(KEY_MAGIC) - 1 + 64 + 1)

struct ns_identity {
    uint8_t pk[crypto_sign_PUBLICKEYBYTES];
    uint8_t *sk; /* crypto_sign_SECRETKEYBYTES in sodium_malloc'd memory */
};

static ns_identity_t *s_from_seed(const uint8_t seed[crypto_sign_SEEDBYTES])
{
    if (sodium_init() < 0) /* idempotent; sodium_malloc needs it */
        return NULL;
    ns_identity_t *id = calloc(1, sizeof *id);
    if (!id)
        return NULL;
    id->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    if (!id->sk) {
        free(id);
        return NULL;
    }
    crypto_sign_seed_keypair(id->pk, id->sk, seed);
    return id;
}

ns_identity_t *ns_identity_generate(void)
{
    uint8_t seed[crypto_sign_SEEDBYTES];
    randombytes_buf(seed, sizeof seed);
    ns_identity_t *id = s_from_seed(seed);
    sodium_memzero(seed, sizeof seed);
    return id;
}

int ns_identity_save(const ns_identity_t *id, const char *path)
{
    char text[KEY_FILE_LEN + 1];
    uint8_t seed[crypto_sign_SEEDBYTES];
    crypto_sign_ed25519_sk_to_seed(seed, id->sk);
    memcpy(text, KEY_MAGIC, sizeof(KEY_MAGIC) - 1);
    ns_hex(text + sizeof(KEY_MAGIC) - 1, seed, sizeof seed);
    text[KEY_FILE_LEN - 1] = '\n';
    sodium_memzero(seed, sizeof seed);

    int rc = NS_OK;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = errno == EEXIST                     ? NS_ERR_EXISTS
             : errno == EACCES || errno == EROFS ? NS_ERR_PERM
                                                 : NS_ERR_IO;
        goto out;
    }
    if (write(fd, text, KEY_FILE_LEN) != (ssize_t)KEY_FILE_LEN ||
        fsync(fd) != 0) {
        rc = NS_ERR_IO;
        close(fd);
        unlink(path);
        goto out;
    }
    close(fd);
out:
    sodium_memzero(text, sizeof text);
    return rc;
}

int ns_identity_load(const char *path, ns_identity_t **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT   ? NS_ERR_NOTFOUND
               : errno == EACCES ? NS_ERR_PERM
                                 : NS_ERR_IO;
    int rc = NS_ERR_CORRUPT;
    char text[KEY_FILE_LEN + 2];
    uint8_t seed[crypto_sign_SEEDBYTES];
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = NS_ERR_IO;
        goto out;
    }
    if (!S_ISREG(st.st_mode))
        goto out;
    if (st.st_mode & 077) {
        rc = NS_ERR_PERM;
        goto out;
    }
    ssize_t n = read(fd, text, sizeof text);
    if (n != (ssize_t)KEY_FILE_LEN || text[KEY_FILE_LEN - 1] != '\n' ||
        memcmp(text, KEY_MAGIC, sizeof(KEY_MAGIC) - 1) != 0)
        goto out;
    text[KEY_FILE_LEN - 1] = '\0';
    if (ns_unhex(seed, sizeof seed, text + sizeof(KEY_MAGIC) - 1) != NS_OK)
        goto out;
    *out = s_from_seed(seed);
    rc = *out ? NS_OK : NS_ERR_NOMEM;
out:
    sodium_memzero(text, sizeof text);
    sodium_memzero(seed, sizeof seed);
    close(fd);
    return rc;
}

void ns_identity_destroy(ns_identity_t **id)
{
    if (!id || !*id)
        return;
    sodium_free((*id)->sk); /* zeroes before freeing */
    free(*id);
    *id = NULL;
}

const uint8_t *ns_identity_pk(const ns_identity_t *id)
{
    return id->pk;
}

void ns_identity_sign(const ns_identity_t *id, const uint8_t *msg, size_t len,
                      uint8_t sig[NS_SIG_BYTES])
{
    crypto_sign_detached(sig, NULL, msg, len, id->sk);
}

int ns_identity_curve(const ns_identity_t *id, uint8_t pub[32], uint8_t sec[32])
{
    if (crypto_sign_ed25519_pk_to_curve25519(pub, id->pk) != 0 ||
        crypto_sign_ed25519_sk_to_curve25519(sec, id->sk) != 0)
        return NS_ERR_CRYPTO;
    return NS_OK;
}

int ns_id_curve_pk(const uint8_t pk[NS_ID_BYTES], uint8_t out[32])
{
    return crypto_sign_ed25519_pk_to_curve25519(out, pk) == 0 ? NS_OK
                                                              : NS_ERR_CRYPTO;
}

static _Atomic uint64_t s_sig_verifies;

uint64_t ns_sig_verifies(void)
{
    return atomic_load_explicit(&s_sig_verifies, memory_order_relaxed);
}

int ns_sig_verify(const uint8_t pk[NS_ID_BYTES], const uint8_t *msg, size_t len,
                  const uint8_t sig[NS_SIG_BYTES])
{
    atomic_fetch_add_explicit(&s_sig_verifies, 1, memory_order_relaxed);
    return crypto_sign_verify_detached(sig, msg, len, pk) == 0 ? NS_OK
                                                               : NS_ERR_SIG;
}

void ns_id_text(char out[NS_ID_TEXT_LEN + 1], const uint8_t pk[NS_ID_BYTES])
{
    ns_base32(out, pk, NS_ID_BYTES);
}

int ns_id_parse(const char *text, uint8_t pk[NS_ID_BYTES])
{
    return ns_unbase32(pk, NS_ID_BYTES, text) == NS_OK ? NS_OK : NS_ERR_ADDR;
}

void ns_id_short(char out[NS_ID_SHORT_LEN + 1], const uint8_t pk[NS_ID_BYTES])
{
    char full[NS_ID_TEXT_LEN + 1];
    ns_id_text(full, pk);
    memcpy(out, full, NS_ID_SHORT_LEN);
    out[NS_ID_SHORT_LEN] = '\0';
}

int ns_endpoint_check(const char *ep, int allow_any_port)
{
    static const char prefix[] = "tcp://";
    size_t len = strnlen(ep, NS_ENDPOINT_MAX);
    if (len >= NS_ENDPOINT_MAX || strncmp(ep, prefix, sizeof prefix - 1))
        return NS_ERR_ADDR;
    const char *host = ep + sizeof prefix - 1;
    const char *colon = strrchr(host, ':');
    if (!colon || colon == host)
        return NS_ERR_ADDR;
    for (const char *c = host; c < colon; c++) {
        /* host names, IPv4, bracketed IPv6: no spaces or control bytes */
        if (*c <= ' ' || *c == '/' || *c == '@' || *c > '~')
            return NS_ERR_ADDR;
    }
    const char *port = colon + 1;
    if (allow_any_port && strcmp(port, "*") == 0)
        return NS_OK;
    uint64_t p;
    if (ns_parse_u64(port, &p) != NS_OK || p > 65535 ||
        (p == 0 && !allow_any_port) || strlen(port) > 5)
        return NS_ERR_ADDR;
    return NS_OK;
}

int ns_contact_check(const char *contact)
{
    if (contact[0] == '\0')
        return NS_OK;
    const char *relay = ns_contact_relay(contact);
    if (relay) {
        uint8_t pk[NS_ID_BYTES];
        char ep[NS_ENDPOINT_MAX];
        return ns_addr_parse(relay, pk, ep);
    }
    return ns_endpoint_check(contact, 0);
}

const char *ns_contact_relay(const char *contact)
{
    size_t n = sizeof NS_RELAY_PREFIX - 1;
    return strncmp(contact, NS_RELAY_PREFIX, n) == 0 ? contact + n : NULL;
}

int ns_addr_parse(const char *addr, uint8_t pk[NS_ID_BYTES],
                  char endpoint[NS_ENDPOINT_MAX])
{
    const char *at = strchr(addr, '@');
    if (!at || at - addr != NS_ID_TEXT_LEN)
        return NS_ERR_ADDR;
    char idtext[NS_ID_TEXT_LEN + 1];
    memcpy(idtext, addr, NS_ID_TEXT_LEN);
    idtext[NS_ID_TEXT_LEN] = '\0';
    if (ns_id_parse(idtext, pk) != NS_OK)
        return NS_ERR_ADDR;
    if (ns_endpoint_check(at + 1, 0) != NS_OK)
        return NS_ERR_ADDR;
    snprintf(endpoint, NS_ENDPOINT_MAX, "%s", at + 1);
    return NS_OK;
}
