/*
 * digest.c -- SHA-256 and lowercase hex (see digest.h).
 *
 * Owns no state. Threads: any; OpenSSL's EVP one-shot digest is reentrant
 * and needs no locking of ours.
 *
 * The API cannot report failure, and a wrong digest would silently corrupt
 * chunk hashes and config digests, so if OpenSSL fails (it can only do so
 * when it cannot allocate its context) the process logs and aborts rather
 * than return a made-up value.
 */
#include "core/digest.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include "core/log.h"

void lmc_sha256(const void *data, size_t len, uint8_t out[LMC_SHA256_LEN])
{
    static const uint8_t empty = 0;
    unsigned int out_len = 0;
    if (data == NULL) /* only meaningful with len == 0 */
        data = &empty;
    if (EVP_Digest(data, len, out, &out_len, EVP_sha256(), NULL) != 1 ||
        out_len != LMC_SHA256_LEN) {
        LMC_ERROR("digest", "SHA-256 of %zu bytes: OpenSSL EVP_Digest failed", len);
        abort();
    }
}

void lmc_sha256_hex(const void *data, size_t len, char out[LMC_SHA256_HEX_LEN + 1])
{
    uint8_t raw[LMC_SHA256_LEN];
    lmc_sha256(data, len, raw);
    lmc_hex_encode(raw, sizeof(raw), out);
}

struct lmc_sha256_stream {
    EVP_MD_CTX *md;
};

/* As for the one-shot digest: a failing OpenSSL would make a wrong digest. */
static void stream_check(int ok, const char *what)
{
    if (ok != 1) {
        LMC_ERROR("digest", "SHA-256 stream: OpenSSL %s failed", what);
        abort();
    }
}

lmc_sha256_stream *lmc_sha256_stream_create(void)
{
    lmc_sha256_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->md = EVP_MD_CTX_new();
    if (s->md == NULL) {
        free(s);
        return NULL;
    }
    stream_check(EVP_DigestInit_ex(s->md, EVP_sha256(), NULL), "EVP_DigestInit_ex");
    return s;
}

void lmc_sha256_stream_update(lmc_sha256_stream *s, const void *data, size_t len)
{
    if (len > 0)
        stream_check(EVP_DigestUpdate(s->md, data, len), "EVP_DigestUpdate");
}

void lmc_sha256_stream_final_hex(lmc_sha256_stream *s, char out[LMC_SHA256_HEX_LEN + 1])
{
    uint8_t raw[LMC_SHA256_LEN];
    unsigned int n = 0;
    stream_check(EVP_DigestFinal_ex(s->md, raw, &n), "EVP_DigestFinal_ex");
    stream_check(n == LMC_SHA256_LEN, "EVP_DigestFinal_ex length");
    lmc_hex_encode(raw, sizeof(raw), out);
}

void lmc_sha256_stream_destroy(lmc_sha256_stream *s)
{
    if (s == NULL)
        return;
    EVP_MD_CTX_free(s->md);
    free(s);
}

void lmc_hex_encode(const void *data, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 0xf];
    }
    out[2 * len] = '\0';
}

int lmc_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}
