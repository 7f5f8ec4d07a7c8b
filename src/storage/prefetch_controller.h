/*
 * prefetch_controller.h -- L2 -> L1 prefetch (spec/storage-manager.md §10).
 *
 * Owns: the submission queue, the pending FIFO, the in-flight requests and
 * their completed results, and one thread ("prefetch-ctl") that moves each
 * request through LOOKUP (lookup_and_lock on every adapter), PLAN_AND_LOAD
 * (plan, trim, reserve L1 buffers, unlock phase 1, load) and FINALIZE
 * (unlock phase 2, finish_write_and_reserve_read, drop what did not load,
 * trim again). At most max_in_flight requests run at once.
 *
 * Every L2 lock taken by a lookup is released exactly once: in phase 1, in
 * phase 2, when nothing was loadable, or at shutdown.
 *
 * Manual mode (core/runtime.h, lmc_prefetch_controller_create_ex): no
 * thread; the owner calls lmc_prefetch_controller_step, which does what one
 * wake-up of the thread does, and destroy does not wait for answers.
 *
 * Threads: submit/query/take are thread-safe (one mutex guards the queues
 * and result maps); everything else runs on the controller thread (manual
 * mode: on the owner's thread, one step at a time).
 */
#ifndef LMC_STORAGE_PREFETCH_CONTROLLER_H
#define LMC_STORAGE_PREFETCH_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/runtime.h"
#include "l2/adapter.h"
#include "lmcache/bitmap.h"
#include "lmcache/status.h"
#include "lmcache/types.h"
#include "storage/l1_manager.h"

typedef struct lmc_prefetch_controller lmc_prefetch_controller;

/* The prefetch policy names ("default", "retain"): the one list of them, for flags and help. */
extern const char *const lmc_prefetch_policy_names[];
extern const size_t lmc_prefetch_policy_count;

/* Prefetch policies: "default" (loaded keys are temporary in L1) and
 * "retain" (loaded keys stay in L1). Both load each key from the
 * lowest-index adapter that has it. */
lmc_status lmc_prefetch_policy_check(const char *name, lmc_error *err);

lmc_status lmc_prefetch_controller_create(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                          size_t n_adapters, const char *policy,
                                          uint32_t max_in_flight, lmc_prefetch_controller **out,
                                          lmc_error *err);
/* The same with a runtime (NULL: a thread, as lmc_prefetch_controller_create). */
lmc_status lmc_prefetch_controller_create_ex(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                             size_t n_adapters, const char *policy,
                                             uint32_t max_in_flight, const lmc_runtime *rt,
                                             lmc_prefetch_controller **out, lmc_error *err);

/*
 * Manual mode: take the submissions, advance every request whose L2 tasks
 * have answered, start pending ones. Returns whether any request moved;
 * always false with a thread.
 */
bool lmc_prefetch_controller_step(lmc_prefetch_controller *c);

/* Submissions are waiting: a step would do something now, without any new event. */
bool lmc_prefetch_controller_has_work(lmc_prefetch_controller *c);

/*
 * Stop the thread. Call it before the adapters are destroyed: it waits (up
 * to 5 s in all) for the outstanding lookups and loads of in-flight
 * requests to answer. Then requests in the load phase drop their L1
 * reservations (a forced delete of the still write-locked objects, which
 * never became readable) and unlock their plan keys; requests in the lookup
 * phase unlock everything they found. A lookup that never answers leaves
 * its locks to the adapter's close; a load that never answers leaves its
 * reservations write-locked (the adapter may still write into them) until
 * the write TTL expires. Requests not yet started are dropped. Frees
 * everything.
 */
void lmc_prefetch_controller_destroy(lmc_prefetch_controller *c);

/*
 * Queue a request for keys (copied; layout is copied too). Ids increase
 * from 0. With no adapters (or no keys) the request completes at once with
 * an all-zero bitmap. LMC_ERR_NOMEM when the request cannot be allocated;
 * the controller thread never allocates on a request's behalf afterwards.
 */
lmc_status lmc_prefetch_controller_submit(lmc_prefetch_controller *c, const lmc_object_key *keys,
                                          size_t n, const lmc_layout_desc *layout,
                                          uint32_t extra_count, lmc_trim_policy policy,
                                          int64_t *request_id);

/* The lookup-phase prefix count, not consumed; false while unknown or after take. */
bool lmc_prefetch_controller_query_lookup(lmc_prefetch_controller *c, int64_t request_id,
                                          size_t *prefix_hits);

/*
 * Pop the retained-key bitmap (indexed over the submitted keys) into *out:
 * LMC_OK once the request has completed (also drops the lookup result);
 * LMC_ERR_BUSY while it runs; LMC_ERR_NOT_FOUND for an id never submitted
 * or already taken. *out is set only on LMC_OK.
 */
lmc_status lmc_prefetch_controller_take_result(lmc_prefetch_controller *c, int64_t request_id,
                                               lmc_bitmap *out);

/*
 * {is_healthy, thread_alive, max_in_flight, submission_queue_size,
 *  pending_queue_size, in_flight_request_count, lookup_phase_count,
 *  load_phase_count, completed_results_count, num_l2_adapters}
 */
lmc_json *lmc_prefetch_controller_report_status(lmc_prefetch_controller *c);

/* Keys and bytes L2 loads have filled into L1 since create. Any thread. */
void lmc_prefetch_controller_loaded(lmc_prefetch_controller *c, uint64_t *keys, uint64_t *bytes);

/* Requests submitted but not yet completed (for tests and drains). */
size_t lmc_prefetch_controller_busy(lmc_prefetch_controller *c);

/*
 * How long destroy waits for outstanding lookups and loads to answer
 * before giving up on them (default 5000 ms). For tests; call it from the
 * thread that will call destroy.
 */
void lmc_prefetch_controller_set_shutdown_wait_ms(lmc_prefetch_controller *c, uint32_t ms);

#endif
