/*
 * client.h -- a client of `lmcache server` (the engine side of the protocol).
 *
 * Owns: one ZMQ DEALER socket connected to a server, the request-uid
 * counter, and the client's KV region: a POSIX shared-memory object of
 * num_blocks paged blocks (tokens_per_block tokens of bytes_per_token bytes
 * each) that it registers with the server, standing in for a GPU's paged KV
 * cache. store copies blocks into the server's L1; retrieve copies L1 into
 * blocks. The protocol is in docs/protocol.md.
 *
 * Calls are synchronous (send, then wait for the matching reply, with a
 * timeout). A failed call returns a status and a message: LMC_ERR_TIMEOUT
 * when the server does not answer, LMC_ERR_INVALID with the server's
 * message for an error reply.
 *
 * Threads: one client per thread (a ZMQ socket is not thread-safe).
 */
#ifndef LMCACHE_CLIENT_H
#define LMCACHE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmc_client lmc_client;

typedef struct lmc_client_config {
    const char *host; /* default "127.0.0.1" */
    int port;         /* default 5555 */
    int timeout_ms;   /* per call; default 30000 */
    /* The KV region this client registers. */
    const char *model_name;   /* default "test-model" */
    int world_size;           /* default 1 */
    int worker_id;            /* default 0 */
    int64_t instance_id;      /* default: the process id */
    int64_t num_blocks;       /* default 4096 */
    int64_t tokens_per_block; /* default 16 */
    int64_t bytes_per_token;  /* default 64 */
    lmc_dtype dtype;          /* default bfloat16 */
    /* How long create waits for the TCP connection; default 5000. */
    int connect_timeout_ms;
} lmc_client_config;

/* Fill a config with the defaults above. */
void lmc_client_config_init(lmc_client_config *cfg);

/*
 * Connect, create the shm region (named "/lmcache-client-<pid>-<n>",
 * unlinked once registered: the server keeps its mapping), register it
 * (register_kv_cache) and read the server's chunk size (get_chunk_size).
 */
lmc_status lmc_client_create(const lmc_client_config *cfg, lmc_client **out, lmc_error *err);
/* unregister_kv_cache (best effort), close, unmap the region (unlink it if never registered). */
void lmc_client_destroy(lmc_client *c);

int64_t lmc_client_chunk_size(const lmc_client *c);
/* The region's bytes: block b starts at lmc_client_block(c, b). */
uint8_t *lmc_client_block(lmc_client *c, int64_t block);
int64_t lmc_client_num_blocks(const lmc_client *c);
int64_t lmc_client_block_bytes(const lmc_client *c);

lmc_status lmc_client_ping(lmc_client *c, lmc_error *err);

/* The instance id the region is registered under. */
int64_t lmc_client_instance_id(const lmc_client *c);

/*
 * lookup over tokens[0:end) (end chunk-aligned) under request_id, then
 * poll query_prefetch_status until it answers; *hit_chunks = the leading
 * run of chunks found.
 */
lmc_status lmc_client_lookup(lmc_client *c, const char *request_id, const uint32_t *tokens,
                             size_t n_tokens, size_t end, const char *cache_salt,
                             size_t *hit_chunks, lmc_error *err);

/*
 * The lookup request alone, without polling: send it and wait for the
 * server's reply (sent once the prefetch is submitted). The prefetch then
 * completes asynchronously; to release its L1 locks, follow with
 * lmc_client_free_lookup_locks (which waits for it), or poll it as
 * lmc_client_lookup does. Measures the lookup round trip (bench/bench_server.c).
 */
lmc_status lmc_client_lookup_submit(lmc_client *c, const char *request_id, const uint32_t *tokens,
                                    size_t n_tokens, size_t end, const char *cache_salt,
                                    lmc_error *err);

/*
 * retrieve [start, end) of the request's tokens into blocks (one block id
 * per tokens_per_block tokens of the range); *ok is the server's verdict.
 */
lmc_status lmc_client_retrieve(lmc_client *c, const char *request_id, const uint32_t *tokens,
                               size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                               const int64_t *block_ids, size_t n_block_ids, bool *ok,
                               lmc_error *err);

/* store [start, end) from blocks. */
lmc_status lmc_client_store(lmc_client *c, const char *request_id, const uint32_t *tokens,
                            size_t n_tokens, size_t start, size_t end, const char *cache_salt,
                            const int64_t *block_ids, size_t n_block_ids, bool *ok, lmc_error *err);

lmc_status lmc_client_free_lookup_locks(lmc_client *c, const char *request_id,
                                        const uint32_t *tokens, size_t n_tokens, size_t end,
                                        const char *cache_salt, lmc_error *err);
lmc_status lmc_client_end_session(lmc_client *c, const char *request_id, lmc_error *err);
lmc_status lmc_client_clear(lmc_client *c, bool force, lmc_error *err);

/*
 * Send raw frames and wait for the reply (for protocol tests): frames are
 * msgpack values, frames[0] the uid; the reply is the one whose first frame
 * echoes frames[0] byte for byte. Its response frame is copied to *resp
 * (malloc'd, caller frees) when not NULL, also for an error reply (which
 * returns LMC_ERR_INVALID).
 */
lmc_status lmc_client_call_raw(lmc_client *c, const void *const *frames, const size_t *lens,
                               size_t n, void **resp, size_t *resp_len, lmc_error *err);

#ifdef __cplusplus
}
#endif
#endif
