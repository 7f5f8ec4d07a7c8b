/*
 * copy_pool.h -- helper threads that share one request's chunk copies.
 *
 * Owns: a few "copy-helper" threads (none when the server copies on one
 * thread) and the batches posted to them. A store or retrieve of many
 * chunks copies each chunk independently of the others, so the thread
 * that runs the request (a worker) posts the batch, takes chunks itself
 * and returns when every chunk is done; idle helpers take chunks of the
 * same batch meanwhile. One memcpy on one core does not reach the
 * machine's memory bandwidth, so a large transfer gets faster with each
 * core that is free to copy.
 *
 * The caller never waits for a helper to become free: if every helper is
 * busy (or there is none), the caller copies every chunk itself, so a
 * batch always finishes and several workers may post at once.
 *
 * Threads: lmc_copy_pool_run from any number of threads at once; one
 * mutex guards the list of posted batches and each batch's helper count,
 * and a batch's next chunk is taken with an atomic counter.
 */
#ifndef LMC_SERVER_COPY_POOL_H
#define LMC_SERVER_COPY_POOL_H

#include <stddef.h>

#include "lmcache/status.h"

typedef struct lmc_copy_pool lmc_copy_pool;

/*
 * Copy item i of a batch (a chunk); on failure set err and return its
 * status. Items of one batch run on different threads at once.
 */
typedef lmc_status (*lmc_copy_item_fn)(void *ctx, size_t i, lmc_error *err);

/*
 * A pool of helper threads (0: none, every batch runs on its caller's
 * thread). A batch of fewer than min_bytes in all is not worth waking a
 * helper for and runs on its caller's thread too.
 */
lmc_status lmc_copy_pool_create(int helpers, size_t min_bytes, lmc_copy_pool **out, lmc_error *err);
/* Joins the helpers; no batch may be running. NULL is a no-op. */
void lmc_copy_pool_destroy(lmc_copy_pool *p);

/* The number of helper threads (0 for NULL). */
int lmc_copy_pool_helpers(const lmc_copy_pool *p);

/*
 * Run fn(ctx, i, ...) once for each i in [0, n) of a batch of bytes in all,
 * and return when every item that was started has finished. After an item
 * fails no further item starts, and the error returned (in err) is that of
 * the lowest-numbered item that failed; LMC_OK when none did. p NULL: the
 * items run in order on this thread, stopping at the first failure.
 */
lmc_status lmc_copy_pool_run(lmc_copy_pool *p, size_t n, size_t bytes, lmc_copy_item_fn fn,
                             void *ctx, lmc_error *err);

#endif
