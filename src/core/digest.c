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

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

lmc_status lmc_sha256_file_hex(const char *path, char out[LMC_SHA256_HEX_LEN + 1], lmc_error *err)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lmc_error_set(err, errno == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                             "cannot read '%s': %s", path, strerror(errno));
    lmc_status st = LMC_OK;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    enum { BUF = 1 << 20 };
    uint8_t *buf = malloc(BUF);
    if (ctx == NULL || buf == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "SHA-256 of '%s': out of memory", path);
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, buf, BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
            st = lmc_error_set(err, LMC_ERR_INTERNAL, "SHA-256 of '%s': OpenSSL failed", path);
            goto out;
        }
    }
    uint8_t raw[LMC_SHA256_LEN];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx, raw, &len) != 1 || len != LMC_SHA256_LEN) {
        st = lmc_error_set(err, LMC_ERR_INTERNAL, "SHA-256 of '%s': OpenSSL failed", path);
        goto out;
    }
    lmc_hex_encode(raw, sizeof(raw), out);
out:
    free(buf);
    EVP_MD_CTX_free(ctx);
    close(fd);
    return st;
}
