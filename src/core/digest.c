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
