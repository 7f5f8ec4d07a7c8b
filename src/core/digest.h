/*
 * digest.h -- SHA-256 as lowercase hex (OpenSSL).
 *
 * Owns nothing but a stream's OpenSSL context. Used for the trace header's
 * sm_config_digest, the server's prefix-chained chunk hashes and the
 * replay's outcome digest.
 *
 * Threads: thread-safe; one stream belongs to one thread at a time.
 */
#ifndef LMC_CORE_DIGEST_H
#define LMC_CORE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define LMC_SHA256_LEN 32
#define LMC_SHA256_HEX_LEN 64

/* Raw 32-byte digest of len bytes at data. */
void lmc_sha256(const void *data, size_t len, uint8_t out[LMC_SHA256_LEN]);

/* 64 lowercase hex characters plus NUL. */
void lmc_sha256_hex(const void *data, size_t len, char out[LMC_SHA256_HEX_LEN + 1]);

/*
 * SHA-256 of a stream fed in pieces (the replay's outcome digest). create
 * returns NULL when memory runs out; final writes 64 hex + NUL and leaves
 * the stream unusable until destroy.
 */
typedef struct lmc_sha256_stream lmc_sha256_stream;
lmc_sha256_stream *lmc_sha256_stream_create(void);
void lmc_sha256_stream_update(lmc_sha256_stream *s, const void *data, size_t len);
void lmc_sha256_stream_final_hex(lmc_sha256_stream *s, char out[LMC_SHA256_HEX_LEN + 1]);
void lmc_sha256_stream_destroy(lmc_sha256_stream *s);

/* Lowercase hex of any byte string into out (2*len+1 bytes). */
void lmc_hex_encode(const void *data, size_t len, char *out);

/* The value of one hex digit (either case), or -1 when c is not one. */
int lmc_hex_digit(char c);

#endif
