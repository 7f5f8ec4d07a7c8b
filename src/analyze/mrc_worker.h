/*
 * mrc_worker.h -- feed a miss-ratio curve (analyze/mrc.h) from another
 * thread.
 *
 * Owns: one thread ("analyze-mrc") and a bounded queue of batches of
 * accesses. The pass that reads and decodes a trace pushes each sampled
 * access; the worker applies them to the curve in the same order, so the
 * result is exactly that of calling lmc_mrc_access in the pushing thread,
 * while reading/decoding and the stack-distance walks run on two cores.
 * A batch holds 8192 accesses; at most 4 batches exist, so the pusher
 * waits when the worker falls behind (memory stays bounded).
 *
 * When the thread cannot be started, pushes apply the accesses inline
 * (same result, one core).
 *
 * Threads: push and sync from one thread (the owner); the curve may be
 * read (lmc_mrc_result_get) only after sync and before the next push.
 */
#ifndef LMC_ANALYZE_MRC_WORKER_H
#define LMC_ANALYZE_MRC_WORKER_H

#include <stdint.h>

#include "analyze/mrc.h"
#include "lmcache/status.h"

typedef struct lmc_mrc_worker lmc_mrc_worker;

/* A worker feeding m (borrowed: m must outlive the worker); NULL when memory runs out. */
lmc_mrc_worker *lmc_mrc_worker_create(lmc_mrc *m);
/* Stops the thread (pending accesses are dropped: sync first to keep them). NULL is fine. */
void lmc_mrc_worker_destroy(lmc_mrc_worker *w);

/*
 * Queue one access (lmc_mrc_access's arguments). LMC_ERR_NOMEM when an
 * earlier access failed for lack of memory (the curve is then incomplete
 * and stays so).
 */
lmc_status lmc_mrc_worker_push(lmc_mrc_worker *w, uint32_t id, uint64_t size, unsigned group);

/* Wait until every access pushed is in the curve; LMC_ERR_NOMEM as above. */
lmc_status lmc_mrc_worker_sync(lmc_mrc_worker *w);

#endif
