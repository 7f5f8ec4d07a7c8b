/*
 * outcome_queue.h -- the reorder buffer that reports records in order.
 *
 * Owns: the records reported but not yet emitted (a ring that grows by
 * doubling and is reused, so a steady replay allocates nothing per
 * record). Most outcomes are final when their handler returns; a
 * submit_prefetch_task's is not until its L2 part is collected, and the
 * records after it wait behind it, so per-record outputs, the totals and
 * the outcome digest see every record exactly once, in record order, with
 * its final outcome.
 *
 * Records are pushed in index order (1, 2, 3, ...); a record pushed with
 * outcome->pending stays open until lmc_outcome_queue_complete names its
 * index. The emit callback runs inside push, complete and close, on the
 * caller's thread; rec->outcome points into the queue (valid during the
 * call).
 *
 * Threads: one (the replay thread).
 */
#ifndef LMC_REPLAY_OUTCOME_QUEUE_H
#define LMC_REPLAY_OUTCOME_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "replay/outcome.h"

typedef void (*lmc_outcome_emit)(const lmc_replay_record_view *rec, void *ud);

typedef struct lmc_outcome_queue lmc_outcome_queue;

lmc_outcome_queue *lmc_outcome_queue_create(lmc_outcome_emit emit, void *ud); /* NULL on OOM */
void lmc_outcome_queue_destroy(lmc_outcome_queue *q);

/*
 * Append one record (copied; rec->qualname must stay valid until the record
 * is emitted: pass an interned string) with its outcome (NULL: none), then
 * emit every record at the head that is final. rec->outcome is ignored.
 * LMC_ERR_NOMEM when the ring cannot grow (the record is then emitted at
 * once, out of order, rather than lost).
 */
lmc_status lmc_outcome_queue_push(lmc_outcome_queue *q, const lmc_replay_record_view *rec,
                                  const lmc_replay_outcome *o);

/*
 * The final outcome of the open record index (its pending flag cleared),
 * then emit what became ready. An index that is not open is ignored.
 */
void lmc_outcome_queue_complete(lmc_outcome_queue *q, uint64_t index, const lmc_replay_outcome *o);

/* Emit every record left, open ones as they are (pending still set). */
void lmc_outcome_queue_close(lmc_outcome_queue *q);

/* Records held (emitted ones are gone) and, of those, how many are open. */
size_t lmc_outcome_queue_len(const lmc_outcome_queue *q);
size_t lmc_outcome_queue_open(const lmc_outcome_queue *q);

#endif
