/*
 * store_controller.h -- L1 -> L2 store (spec/storage-manager.md §9).
 *
 * Owns: the queue of keys whose L1 write finished (filled by an L1 listener
 * that only appends and signals an eventfd), the in-flight store tasks, and
 * one thread ("store-ctl") that polls the listener fd and every adapter's
 * store fd (500 ms timeout). For new keys it asks the store policy which
 * adapters get them, read-locks them in L1 (1 lock; failures skipped and
 * logged), and submits one store task per adapter; when a task completes it
 * releases the read locks and, on success, deletes from L1 the keys the
 * policy names (none for "default", all for "skip_l1"). No retry.
 *
 * Prefetched objects (finish_write_and_reserve_read) are never stored back.
 * The controller collects every store completion of its adapters, so it
 * must be the only one submitting store tasks to them.
 *
 * Manual mode (core/runtime.h, lmc_store_controller_create_ex): no thread;
 * the owner calls lmc_store_controller_step, which does what one wake-up of
 * the thread does.
 *
 * Threads: the listener callback runs on caller threads under the L1 mutex
 * and takes only the queue mutex; the rest runs on the controller thread
 * (manual mode: on the owner's thread, one step at a time).
 */
#ifndef LMC_STORAGE_STORE_CONTROLLER_H
#define LMC_STORAGE_STORE_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/runtime.h"
#include "l2/adapter.h"
#include "lmcache/status.h"
#include "storage/l1_manager.h"

typedef struct lmc_store_controller lmc_store_controller;

/* The store policy names ("default", "skip_l1"): the one list of them, for flags and help. */
extern const char *const lmc_store_policy_names[];
extern const size_t lmc_store_policy_count;

/*
 * Store policies: "default" and "skip_l1" (NULL means "default"); anything
 * else: LMC_ERR_INVALID "unknown store policy 'x' (expected default or
 * skip_l1)".
 */
lmc_status lmc_store_policy_check(const char *name, lmc_error *err);

/*
 * Registers its L1 listener (none when n_adapters is 0: nothing to store)
 * and starts the thread. The adapters array is copied; the adapters and l1
 * are borrowed and must outlive the controller.
 */
lmc_status lmc_store_controller_create(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                       size_t n_adapters, const char *policy,
                                       lmc_store_controller **out, lmc_error *err);
/* The same with a runtime (NULL: a thread, as lmc_store_controller_create). */
lmc_status lmc_store_controller_create_ex(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                          size_t n_adapters, const char *policy,
                                          const lmc_runtime *rt, lmc_store_controller **out,
                                          lmc_error *err);

/*
 * Manual mode: store the queued keys and finalize completed tasks (release
 * their read locks, apply the policy). Returns whether anything was done;
 * always false with a thread.
 */
bool lmc_store_controller_step(lmc_store_controller *c);

/* Keys are queued: a step would do something now, without any new event. */
bool lmc_store_controller_has_work(lmc_store_controller *c);

/*
 * Stop the thread, release the read locks of every in-flight task, free
 * everything. Keys still queued are dropped (logged). The L1 manager keeps
 * the controller's listener (L1 has no removal call), so no L1 write may
 * finish after this: destroy it just before the L1 manager, as the
 * StorageManager does.
 */
void lmc_store_controller_destroy(lmc_store_controller *c);

/* {is_healthy, thread_alive, pending_keys_count, in_flight_task_count, num_l2_adapters,
 *  stored_keys_total, failed_tasks_total} */
lmc_json *lmc_store_controller_report_status(lmc_store_controller *c);

/*
 * Totals since create, summed over adapters: keys of store tasks that
 * succeeded (keys an adapter already held count too), the bytes the
 * adapters report writing, and failed tasks. Any thread.
 */
typedef struct lmc_store_counters {
    uint64_t stored_keys, stored_bytes, failed_tasks;
} lmc_store_counters;
lmc_store_counters lmc_store_controller_counters(lmc_store_controller *c);

/* Keys queued plus tasks in flight (0 when idle; for tests and drains). */
size_t lmc_store_controller_busy(lmc_store_controller *c);

#endif
