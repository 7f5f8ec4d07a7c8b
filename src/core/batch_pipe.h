/*
 * batch_pipe.h -- hands filled byte batches to a worker thread, in order,
 * through a fixed set of reused buffers.
 *
 * Owns: `depth` batches (msgpack sbuffers, kept and reused, so memory is
 * bounded by depth times the largest batch), the worker thread, one mutex
 * and two condition variables. It lets a producer fill batch n + 1 while
 * the worker consumes batch n (the trace recorder encodes records while
 * its writer thread writes the previous batch to the file).
 *
 * The producer fills the batch `current` returns and `submit`s it; the
 * worker calls fn on every submitted batch, one at a time, in submission
 * order, and then gives the batch back empty (size, count and flags 0).
 * submit returns once the next batch to fill is free: while all depth
 * batches are submitted and not yet consumed, it waits (backpressure, never
 * a drop). wait returns once every batch submitted before it is consumed.
 *
 * Threads: one producer at a time: the caller serialises create, current,
 * submit, wait and destroy (the trace recorder calls them under its
 * mutex). fn runs on the worker thread (named thread_name), or, when that
 * thread cannot be started, inside submit on the producer's thread (same
 * order, same effects; create logs a warning). What fn writes before it
 * returns is visible to the producer once a wait that covers the batch
 * returns (both sides hold the mutex in between), so fn may own state that
 * the producer reads only after a wait. fn must not wait for the producer
 * (it may be blocked in submit or wait).
 */
#ifndef LMC_CORE_BATCH_PIPE_H
#define LMC_CORE_BATCH_PIPE_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

typedef struct lmc_batch {
    msgpack_sbuffer buf; /* the bytes; append with msgpack_sbuffer_write or a packer */
    uint64_t count;      /* the producer's, e.g. the records buf holds */
    uint32_t flags;      /* the producer's */
} lmc_batch;

/* Consume one batch (its bytes stay the pipe's: do not keep pointers into them). */
typedef void (*lmc_batch_fn)(lmc_batch *b, void *ud);

typedef struct lmc_batch_pipe lmc_batch_pipe;

/*
 * depth >= 2 (LMC_ERR_INVALID otherwise): 2 is double buffering. Starts
 * the worker thread. fn and ud are borrowed until destroy.
 */
lmc_status lmc_batch_pipe_create(size_t depth, const char *thread_name, lmc_batch_fn fn, void *ud,
                                 lmc_batch_pipe **out, lmc_error *err);

/* The batch to fill (the producer's until it submits it). */
lmc_batch *lmc_batch_pipe_current(lmc_batch_pipe *p);

/* Hand the current batch to the worker (an empty one is left as it is),
 * waiting for a free one to fill next if need be. */
void lmc_batch_pipe_submit(lmc_batch_pipe *p);

/* Wait until every submitted batch is consumed. */
void lmc_batch_pipe_wait(lmc_batch_pipe *p);

/* Batches consumed so far. */
uint64_t lmc_batch_pipe_consumed(lmc_batch_pipe *p);

/* wait, stop and join the worker, free the buffers. The current batch's
 * bytes, if not submitted, are discarded. NULL is a no-op. */
void lmc_batch_pipe_destroy(lmc_batch_pipe *p);

#endif
