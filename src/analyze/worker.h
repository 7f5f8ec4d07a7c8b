/*
 * worker.h -- the key accesses of an analysis, applied in batches, on a
 * thread of their own or inline.
 *
 * Owns: one thread ("analyze-keys") when threaded, and a bounded queue of
 * batches of accesses. The pass that reads and decodes a trace pushes each
 * sampled key access; the worker hands the batches, in order, to the
 * owner's apply function (the key set, the per-group tallies and the
 * curve: analyze.c), so the result is exactly that of applying them in
 * the pushing thread, while decoding and the key and stack-distance work
 * run on two cores. A batch holds 8192 accesses; at most 4 batches exist,
 * so the pusher waits when the worker falls behind (memory stays
 * bounded). Not threaded, or when the thread cannot be started, a full
 * batch is applied inline by push (same result, one core).
 *
 * Threads: push and sync from the owner's thread; apply runs on the
 * worker's thread (or the owner's), never two at once; what apply writes
 * may be read by the owner after sync and before the next push.
 */
#ifndef LMC_ANALYZE_WORKER_H
#define LMC_ANALYZE_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

/* One key access: its fingerprint, object size, group and replicate group. */
typedef struct lmc_analyze_access {
    uint64_t h1;
    uint64_t size;
    uint32_t h2;
    uint32_t group;   /* the (model, cache_salt) group's number */
    uint32_t replica; /* the sampling replicate group (analyze/mrc.h) */
} lmc_analyze_access;

/* Apply n accesses in order; false when memory ran out. */
typedef bool (*lmc_analyze_apply_fn)(void *ctx, const lmc_analyze_access *v, size_t n);

typedef struct lmc_analyze_worker lmc_analyze_worker;

/* A worker calling apply(ctx, ...); NULL when memory runs out. ctx must outlive it. */
lmc_analyze_worker *lmc_analyze_worker_create(lmc_analyze_apply_fn apply, void *ctx, bool threaded);
/* Stops the thread (pending accesses are dropped: sync first to keep them). NULL is fine. */
void lmc_analyze_worker_destroy(lmc_analyze_worker *w);

/*
 * Queue one access. LMC_ERR_NOMEM when an earlier batch failed for lack of
 * memory (the result is then incomplete and stays so).
 */
lmc_status lmc_analyze_worker_push(lmc_analyze_worker *w, const lmc_analyze_access *a);

/* Wait until every access pushed is applied; LMC_ERR_NOMEM as above. */
lmc_status lmc_analyze_worker_sync(lmc_analyze_worker *w);

#endif
