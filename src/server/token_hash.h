/*
 * token_hash.h -- prefix-chained SHA-256 hashes of token chunks.
 *
 * Owns: the chunk hash the server puts in every ObjectKey it builds from a
 * token sequence (spec/server-protocol.md section 3, with SHA-256 in place
 * of LMCache's default blake3):
 *
 *   h_0 = SHA256(NONE_HASH || tokens[0 : cs]           as big-endian uint32)
 *   h_i = SHA256(h_{i-1}   || tokens[i*cs : (i+1)*cs] as big-endian uint32)
 *   NONE_HASH = SHA256("lmcache:none_hash")
 *
 * Only full chunks are hashed; a partial tail is ignored. LMCache derives
 * its NONE_HASH from vLLM (kv_cache_utils.init_none_hash) and hashes with
 * blake3 by default, so these hashes are only comparable between processes
 * of this implementation, never with a Python LMCache server.
 *
 * Threads: pure functions; any thread.
 */
#ifndef LMC_SERVER_TOKEN_HASH_H
#define LMC_SERVER_TOKEN_HASH_H

#include <stddef.h>
#include <stdint.h>

#define LMC_TOKEN_HASH_LEN 32

/* SHA256("lmcache:none_hash"): the parent of the first chunk. */
extern const uint8_t LMC_TOKEN_NONE_HASH[LMC_TOKEN_HASH_LEN];

/*
 * Hash the full chunks of tokens[0:n_tokens] into out[0..]. Returns the
 * number of hashes written: n_tokens / chunk_size, capped at max_out (0 if
 * chunk_size is 0). out may be NULL only when max_out is 0.
 */
size_t lmc_token_chunk_hashes(const uint32_t *tokens, size_t n_tokens, size_t chunk_size,
                              uint8_t (*out)[LMC_TOKEN_HASH_LEN], size_t max_out);

/*
 * Same, continuing a chain: prev is the hash of the chunk just before
 * tokens[0] (NULL means NONE_HASH, i.e. tokens start the sequence). Lets a
 * session extend its cached hashes without rehashing the prefix.
 */
size_t lmc_token_chunk_hashes_from(const uint8_t *prev, const uint32_t *tokens, size_t n_tokens,
                                   size_t chunk_size, uint8_t (*out)[LMC_TOKEN_HASH_LEN],
                                   size_t max_out);

#endif
