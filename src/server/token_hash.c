/*
 * token_hash.c -- prefix-chained SHA-256 chunk hashes (see token_hash.h).
 *
 * Owns no state (NONE_HASH is a constant, checked against
 * SHA256("lmcache:none_hash") by the unit test). Threads: any.
 *
 * Speed: one EVP_MD_CTX serves every chunk of a call, and after the first
 * chunk it is re-initialised with a NULL digest type, which keeps the
 * already-fetched SHA-256 implementation (OpenSSL 3 would otherwise look
 * the algorithm up again for every chunk). Tokens are converted to
 * big-endian in a stack buffer of TOKEN_BATCH tokens and fed in pieces, so
 * a chunk of any size needs no heap memory.
 *
 * The API cannot report failure and a wrong hash would silently alias
 * cache entries, so an OpenSSL failure (only possible when it cannot
 * allocate) logs and aborts, as core/digest.c does.
 */
#include "server/token_hash.h"

#include <openssl/evp.h>
#include <stdlib.h>

#include "core/byteorder.h"
#include "core/log.h"

const uint8_t LMC_TOKEN_NONE_HASH[LMC_TOKEN_HASH_LEN] = {
    0x06, 0x41, 0x91, 0x71, 0x02, 0x99, 0x7d, 0x7e, 0x5d, 0xe3, 0x8f, 0xe2, 0x15, 0x90, 0x7e, 0x6f,
    0x1d, 0x3e, 0xa4, 0x52, 0x44, 0xc1, 0x81, 0x22, 0x2c, 0x40, 0x82, 0x55, 0x7f, 0xd3, 0xea, 0x25,
};

/* Tokens converted per EVP update (4 KiB of stack). */
#define TOKEN_BATCH 1024

static void fail(const char *what)
{
    LMC_ERROR("token_hash", "SHA-256 of token chunks: OpenSSL %s failed", what);
    abort();
}

size_t lmc_token_chunk_hashes_from(const uint8_t *prev, const uint32_t *tokens, size_t n_tokens,
                                   size_t chunk_size, uint8_t (*out)[LMC_TOKEN_HASH_LEN],
                                   size_t max_out)
{
    if (chunk_size == 0 || max_out == 0)
        return 0;
    size_t n = n_tokens / chunk_size;
    if (n > max_out)
        n = max_out;
    if (n == 0)
        return 0;

    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
        fail("EVP_MD_CTX_new");
    uint8_t be[TOKEN_BATCH * 4];
    const uint8_t *parent = prev != NULL ? prev : LMC_TOKEN_NONE_HASH;
    for (size_t i = 0; i < n; i++) {
        if (EVP_DigestInit_ex(ctx, i == 0 ? EVP_sha256() : NULL, NULL) != 1)
            fail("EVP_DigestInit_ex");
        if (EVP_DigestUpdate(ctx, parent, LMC_TOKEN_HASH_LEN) != 1)
            fail("EVP_DigestUpdate");
        const uint32_t *t = tokens + i * chunk_size;
        for (size_t done = 0; done < chunk_size;) {
            size_t k = chunk_size - done < TOKEN_BATCH ? chunk_size - done : TOKEN_BATCH;
            for (size_t j = 0; j < k; j++) {
                lmc_put_be32(be + 4 * j, t[done + j]);
            }
            if (EVP_DigestUpdate(ctx, be, 4 * k) != 1)
                fail("EVP_DigestUpdate");
            done += k;
        }
        unsigned int len = 0;
        if (EVP_DigestFinal_ex(ctx, out[i], &len) != 1 || len != LMC_TOKEN_HASH_LEN)
            fail("EVP_DigestFinal_ex");
        parent = out[i];
    }
    EVP_MD_CTX_free(ctx);
    return n;
}

size_t lmc_token_chunk_hashes(const uint32_t *tokens, size_t n_tokens, size_t chunk_size,
                              uint8_t (*out)[LMC_TOKEN_HASH_LEN], size_t max_out)
{
    return lmc_token_chunk_hashes_from(NULL, tokens, n_tokens, chunk_size, out, max_out);
}
