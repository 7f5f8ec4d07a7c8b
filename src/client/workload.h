/*
 * workload.h -- request workloads for `lmcache bench server`, and the KV
 * byte pattern the benchmark stores and verifies.
 *
 * Owns:
 *  - the Mooncake trace reader (JSON lines {"timestamp", "input_length",
 *    "output_length", "hash_ids"}; spec/server-protocol.md section 5) and
 *    the synthesis of a record's prompt tokens from its hash ids;
 *  - a synthetic multi-round chat workload (deterministic from a seed);
 *  - lmc_workload, the one read-only list of requests both produce;
 *  - the KV byte pattern: the bytes a client writes for a chunk, derived
 *    from the token content of the prompt up to and including that chunk.
 *
 * Token synthesis (Mooncake): token t (0-based) of a request lies in the
 * 512-token block t / 512, whose hash id is h = hash_ids[t / 512], and its
 * value is
 *     (uint32_t) splitmix64(splitmix64((uint64_t) h) ^ (t % 512)).
 * Equal hash ids at a position mean a shared prefix, so two requests share
 * exactly the tokens of their shared blocks.
 *
 * KV byte pattern: chunk c (chunk_size tokens) of a prompt has the seed
 *     s_{-1} = LMC_KV_PATTERN_SEED0
 *     s_c = F(s_{c-1}, tokens[c*chunk_size : (c+1)*chunk_size])
 *     where F(s, toks) = { h = s; for each token x: h = splitmix64(h ^ x); h }
 * so the seed names the whole prefix, as the server's chunk hash does. The
 * chunk's bytes (chunk_size * bytes_per_token, in token order) are byte
 * (k % 8) of word k / 8 of a xorshift64* stream seeded with s_c (a zero
 * seed is replaced by LMC_KV_PATTERN_SEED0); word i is the (i+1)-th output,
 * bytes in little-endian order. In a paged region the chunk's bytes are its
 * tokens laid out block after block (tokens_per_block * bytes_per_token
 * bytes per block).
 *
 * Threads: an lmc_workload is immutable once created; any number of
 * threads may read it. Everything else is pure.
 */
#ifndef LMC_CLIENT_WORKLOAD_H
#define LMC_CLIENT_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lmcache/status.h"

/* Tokens per hash id in a Mooncake trace. */
#define LMC_MOONCAKE_BLOCK_TOKENS 512

/* ---------------------------------------------------------------------- */
/* Mooncake trace                                                          */
/* ---------------------------------------------------------------------- */

typedef struct lmc_mooncake_record {
    int64_t timestamp_ms;  /* >= 0 */
    int64_t input_length;  /* >= 0 */
    int64_t output_length; /* >= 0 */
    int64_t *hash_ids;     /* owned; ceil(input_length / 512) of them */
    size_t n_hash_ids;
} lmc_mooncake_record;

void lmc_mooncake_record_free(lmc_mooncake_record *rec);

/*
 * Parse one line (without its newline; len bytes, need not be terminated).
 * line_no is only used in messages: "line 7: 'hash_ids' has 3 ids, but
 * input_length 40160 needs 79". LMC_ERR_FORMAT for any malformed line.
 */
lmc_status lmc_mooncake_parse_line(const char *line, size_t len, uint64_t line_no,
                                   lmc_mooncake_record *rec, lmc_error *err);

typedef struct lmc_mooncake_reader lmc_mooncake_reader;

/* Open a trace file ("-" is not special). */
lmc_status lmc_mooncake_reader_open(const char *path, lmc_mooncake_reader **out, lmc_error *err);
/* Read from a stream the caller keeps open and closes (name is for messages). */
lmc_status lmc_mooncake_reader_open_stream(FILE *f, const char *name, lmc_mooncake_reader **out,
                                           lmc_error *err);
/*
 * The next well-formed record (caller frees it with lmc_mooncake_record_free).
 * Malformed lines are skipped and counted; blank lines are ignored.
 * LMC_ERR_EOF at the end; LMC_ERR_IO if reading fails.
 */
lmc_status lmc_mooncake_reader_next(lmc_mooncake_reader *r, lmc_mooncake_record *rec,
                                    lmc_error *err);
uint64_t lmc_mooncake_reader_skipped(const lmc_mooncake_reader *r);
/* The first skipped line's message ("trace 'x': line 3: ..."), "" if none. */
const char *lmc_mooncake_reader_first_error(const lmc_mooncake_reader *r);
void lmc_mooncake_reader_close(lmc_mooncake_reader *r);

/* Token t of a request whose block t / 512 has hash id h. */
uint32_t lmc_mooncake_token(int64_t hash_id, size_t t);

/*
 * The prompt's first n tokens into out[0:n) (n <= input_length; the caller
 * sizes out). LMC_ERR_INVALID if n exceeds input_length.
 */
lmc_status lmc_mooncake_tokens(const lmc_mooncake_record *rec, uint32_t *out, size_t n,
                               lmc_error *err);

/* ---------------------------------------------------------------------- */
/* Synthetic multi-round chat                                              */
/* ---------------------------------------------------------------------- */

/*
 * users users in groups groups (user u is in group u % groups); each group
 * has a system prompt of system_len tokens. Round r of user u sends
 *     system(group) + q(u,0) + a(u,0) + ... + q(u,r-1) + a(u,r-1) + q(u,r)
 * where q is prompt_len tokens and a is answer_len tokens: each round's
 * prompt extends the previous one by the answer and a new question.
 * Requests are ordered round by round, users in order within a round;
 * request i arrives at i * interval_ms.
 */
typedef struct lmc_chat_config {
    uint32_t users;      /* >= 1; default 8 */
    uint32_t rounds;     /* >= 1; default 4 */
    uint32_t groups;     /* 1..users; default 2 */
    uint32_t system_len; /* default 1024 */
    uint32_t prompt_len; /* default 256 */
    uint32_t answer_len; /* default 256 */
    uint64_t seed;       /* default 1 */
    double interval_ms;  /* >= 0; default 0 (all at once) */
} lmc_chat_config;

void lmc_chat_config_init(lmc_chat_config *cfg);
/* Checks every field; LMC_ERR_INVALID naming the field. */
lmc_status lmc_chat_config_check(const lmc_chat_config *cfg, lmc_error *err);
/* Prompt length of round r (any user). */
size_t lmc_chat_prompt_len(const lmc_chat_config *cfg, uint32_t round);
/* The first n tokens of user u's round-r prompt into out (n <= prompt length). */
void lmc_chat_tokens(const lmc_chat_config *cfg, uint32_t user, uint32_t round, uint32_t *out,
                     size_t n);

/* ---------------------------------------------------------------------- */
/* Workload: a list of requests                                           */
/* ---------------------------------------------------------------------- */

typedef struct lmc_workload lmc_workload;

/*
 * Load up to max_requests records (0 = all) of a Mooncake trace. Skipped
 * lines are counted (lmc_workload_skipped_lines); a file with no valid
 * record is an error.
 */
lmc_status lmc_workload_load_mooncake(const char *path, size_t max_requests, lmc_workload **out,
                                      lmc_error *err);
/* The chat workload (max_requests 0 = users * rounds). */
lmc_status lmc_workload_chat(const lmc_chat_config *cfg, size_t max_requests, lmc_workload **out,
                             lmc_error *err);
void lmc_workload_destroy(lmc_workload *w);

size_t lmc_workload_count(const lmc_workload *w);
/* Arrival time of request i in ms from the start (unscaled). */
double lmc_workload_arrival_ms(const lmc_workload *w, size_t i);
/* Prompt length of request i in tokens. */
size_t lmc_workload_prompt_len(const lmc_workload *w, size_t i);
/*
 * Request i's prompt rounded down to a multiple of align (align 0 or 1:
 * the whole prompt) into a malloc'd array the caller frees (*tokens is NULL
 * and *n 0 when nothing remains).
 */
lmc_status lmc_workload_tokens(const lmc_workload *w, size_t i, size_t align, uint32_t **tokens,
                               size_t *n, lmc_error *err);
uint64_t lmc_workload_skipped_lines(const lmc_workload *w);
const char *lmc_workload_first_error(const lmc_workload *w);

/* ---------------------------------------------------------------------- */
/* KV byte pattern                                                         */
/* ---------------------------------------------------------------------- */

#define LMC_KV_PATTERN_SEED0 0x4C4D43414348454BULL /* "LMCACHEK" */

uint64_t lmc_splitmix64(uint64_t x);

/* s_c from s_{c-1} (LMC_KV_PATTERN_SEED0 for chunk 0) and chunk c's tokens. */
uint64_t lmc_kv_chunk_seed(uint64_t prev_seed, const uint32_t *chunk_tokens, size_t n);

/* A stream of pattern bytes for one chunk, consumed in pieces (block by block). */
typedef struct lmc_kv_pattern {
    uint64_t state;
    uint64_t word; /* the current output word */
    unsigned used; /* bytes of word already consumed (8 = need a new word) */
} lmc_kv_pattern;

void lmc_kv_pattern_init(lmc_kv_pattern *p, uint64_t seed);
/* Write the next len bytes of the stream to dst. */
void lmc_kv_pattern_fill(lmc_kv_pattern *p, uint8_t *dst, size_t len);
/* Compare the next len bytes of the stream with src; true if all equal. */
bool lmc_kv_pattern_check(lmc_kv_pattern *p, const uint8_t *src, size_t len);

#endif
