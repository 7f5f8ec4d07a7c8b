/*
 * loadgen.h -- the load generator behind `lmcache bench server`: drives a
 * running `lmcache server` the way an inference engine does, from any
 * lmc_workload (a Mooncake trace or a synthetic chat, client/workload.h),
 * and checks every retrieved byte.
 *
 * Per request with n full chunks: lookup (polling query_prefetch_status)
 * gives h hit chunks; retrieve [0, h) into blocks and verify every byte
 * against the KV pattern; fill [h, n) with the pattern and store it;
 * end_session. Blocks come round-robin from the client's region, one
 * window (at most `blocks` blocks) per retrieve or store call, so a prompt
 * longer than the region is moved in several calls and no call uses a
 * block twice. Retrieve targets are zeroed first, so a retrieve that copies
 * nothing cannot pass on stale bytes of an earlier request.
 *
 * Owns, during lmc_loadgen_run only: one client (socket and KV region) per
 * worker and the workers' counters and latency samples. Nothing outlives
 * the call; the result is a plain value.
 *
 * Threads: the calling thread creates the clients, starts `concurrency`
 * workers named "bench-<i>" and joins them. Worker i takes requests i,
 * i+C, i+2C, ... and waits for each one's arrival time (arrival x
 * time_scale after the start). Each worker owns its client and counters;
 * nothing is shared while running except the stop flag (atomic), set when
 * a call times out (the server is gone: waiting out every other request's
 * timeout helps nobody) or when the caller's cancel flag is set.
 *
 * Set-up errors name the options by their `lmcache bench server` flags
 * (--tokens-per-block, --blocks), which is where a user meets them.
 */
#ifndef LMC_CLIENT_LOADGEN_H
#define LMC_CLIENT_LOADGEN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/workload.h"
#include "lmcache/status.h"

/* The calls the load generator times, in report order. */
typedef enum lmc_loadgen_op {
    LMC_LOADGEN_LOOKUP,
    LMC_LOADGEN_RETRIEVE,
    LMC_LOADGEN_STORE,
    LMC_LOADGEN_END_SESSION,
    LMC_LOADGEN_N_OPS
} lmc_loadgen_op;

/* "lookup", "retrieve", "store", "end_session". */
const char *lmc_loadgen_op_name(lmc_loadgen_op op);

typedef struct lmc_loadgen_options {
    const char *host;         /* default "127.0.0.1" */
    int port;                 /* default 5555 */
    double time_scale;        /* arrival-time multiplier; 0 ignores arrivals; default 1.0 */
    int concurrency;          /* workers, one client each; default 1 */
    int64_t blocks;           /* KV region size per client, in blocks; default 16384 */
    int64_t bytes_per_token;  /* default 64 */
    int64_t tokens_per_block; /* must divide the server's chunk size; default 16 */
    const char *model_name;   /* model name in keys; default "bench-model" */
    int timeout_ms;           /* per call; default 30000 */
    /* Optional: the run stops soon after *cancel becomes true (a signal
     * handler may set it: a lock-free atomic store is async-signal-safe). */
    atomic_bool *cancel;
} lmc_loadgen_options;

/* Fill o with the defaults above. */
void lmc_loadgen_options_init(lmc_loadgen_options *o);

/* Latency of one kind of call (or of request lateness), in milliseconds. */
typedef struct lmc_loadgen_latency {
    size_t n; /* samples; the percentiles are 0 when n == 0 */
    double p50_ms, p99_ms, max_ms;
} lmc_loadgen_latency;

typedef struct lmc_loadgen_counts {
    uint64_t requests, skipped; /* skipped: no full chunk to look up */
    uint64_t chunks, hit_chunks;
    uint64_t bytes_retrieved, bytes_stored;
    uint64_t corrupt, errors;
    uint64_t retrieve_failed, store_failed;
} lmc_loadgen_counts;

typedef struct lmc_loadgen_result {
    int64_t chunk_size; /* the server's */
    lmc_loadgen_counts total;
    double duration_s;
    lmc_loadgen_latency op[LMC_LOADGEN_N_OPS];
    /* How late requests started against their scaled arrival (none with time_scale 0). */
    lmc_loadgen_latency lateness;
    bool samples_truncated; /* out of memory for some latency samples */
    bool cancelled;         /* *cancel was set during the run */
    /* The first failed call of the lowest-numbered worker that had one ("" if none). */
    char first_error[LMC_ERROR_MSG_MAX + 64];
} lmc_loadgen_result;

/*
 * Run every request of wl against the server and fill *out. Returns LMC_OK
 * when the run took place, even if calls failed or chunks were corrupt
 * (see out->total.errors and .corrupt); an error when it could not start
 * (a client could not connect, the block geometry does not fit the
 * server's chunk size, out of memory, a worker thread would not start).
 */
lmc_status lmc_loadgen_run(const lmc_loadgen_options *o, const lmc_workload *wl,
                           lmc_loadgen_result *out, lmc_error *err);

#endif
