/*
 * eviction_controller.h -- the periodic L1 and L2 eviction loops (§7.3, §7.4).
 *
 * Owns: one thread each ("l1-evict", "l2-evict"). The L1 loop wakes every
 * period (1 s), and when used/total >= trigger_watermark asks the policy
 * for ratio of its tracked keys, skipping keys that are locked now, and
 * deletes them (non-forced, so keys locked meanwhile are skipped). The L1
 * scan runs with the L1 mutex held (lock order L1 -> policy), so the
 * eligibility filter can read object state directly.
 *
 * The L2 loop does the same per adapter that has an "eviction" config and a
 * capacity (global eviction): usage fraction >= watermark -> delete the
 * policy's victims (the adapter skips keys locked by lookups). Each adapter
 * gets its own policy, fed by an adapter listener (stored -> created,
 * accessed -> touched, deleted -> removed). Keys an adapter recovered from
 * a previous run are replayed to that policy at create.
 *
 * Isolating policies (IsolatedLRU) evict per cache_salt. At L1 the ratio
 * applies to each salt's bucket in turn (the controller learns salts from
 * L1 events). At L2 the spec evicts a salt whose bytes reach
 * watermark x quota, whole when its quota is 0; this build has no quota
 * API, so every salt has quota 0 and IsolatedLRU at L2 behaves as an empty
 * allowlist: everything stored is evicted on the next pass (warned at
 * create). Such an adapter needs no capacity.
 *
 * Manual mode (core/runtime.h, the _ex creators): no thread. The first
 * pass is due one period after create on the runtime's clock, and each one
 * after that a period later; the owner runs them with _tick (one pass per
 * call) when its clock reaches _next_event_ns. A thread keeps a period of
 * at least 1 ms; manual mode keeps any period.
 *
 * Threads: create/destroy from the owner; the loops on their own threads
 * (manual mode: _tick on the owner's thread).
 */
#ifndef LMC_STORAGE_EVICTION_CONTROLLER_H
#define LMC_STORAGE_EVICTION_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/runtime.h"
#include "l2/adapter.h"
#include "lmcache/status.h"
#include "storage/eviction.h"
#include "storage/l1_manager.h"

typedef struct lmc_l1_eviction_controller lmc_l1_eviction_controller;
typedef struct lmc_l2_eviction_controller lmc_l2_eviction_controller;

/*
 * The policy must already receive L1 events (the StorageManager's bridge).
 * period_ms is 1000 in production; tests pass something small. Watermark
 * and ratio must be in (0, 1]. For an isolating policy the controller
 * registers an L1 listener to learn salts; L1 keeps it, so no L1 write may
 * happen after destroy (destroy it before the L1 manager).
 */
lmc_status lmc_l1_eviction_controller_create(lmc_l1_manager *l1, lmc_eviction_policy *policy,
                                             double trigger_watermark, double eviction_ratio,
                                             uint32_t period_ms, lmc_l1_eviction_controller **out,
                                             lmc_error *err);
/* The same with a period in ns and a runtime (NULL: threads, monotonic clock). */
lmc_status lmc_l1_eviction_controller_create_ex(lmc_l1_manager *l1, lmc_eviction_policy *policy,
                                                double trigger_watermark, double eviction_ratio,
                                                uint64_t period_ns, const lmc_runtime *rt,
                                                lmc_l1_eviction_controller **out, lmc_error *err);
void lmc_l1_eviction_controller_destroy(lmc_l1_eviction_controller *c);
/* Manual mode: when the next pass is due (UINT64_MAX with a thread, or after destroy began). */
uint64_t lmc_l1_eviction_controller_next_event_ns(const lmc_l1_eviction_controller *c);
/* Manual mode: run the pass due at or before now_ns, if any; true when one ran. */
bool lmc_l1_eviction_controller_tick(lmc_l1_eviction_controller *c, uint64_t now_ns);
/* One pass now, on the caller's thread (for tests): returns keys deleted. */
size_t lmc_l1_eviction_controller_run_once(lmc_l1_eviction_controller *c);
/*
 * {is_healthy, thread_alive, eviction_policy, trigger_watermark, eviction_ratio,
 *  evicted_keys_total}
 */
lmc_json *lmc_l1_eviction_controller_report_status(lmc_l1_eviction_controller *c);
/* Keys evicted since create (evicted_keys_total). Any thread. */
uint64_t lmc_l1_eviction_controller_evicted(lmc_l1_eviction_controller *c);

/*
 * One state per adapter whose config has "eviction": its own policy, fed by
 * an adapter listener (recovered keys replayed). An adapter with no
 * capacity and a non-isolating policy is skipped with a warning; adapters
 * without "eviction" are ignored. The adapters are borrowed.
 */
lmc_status lmc_l2_eviction_controller_create(lmc_l2_adapter *const *adapters, size_t n_adapters,
                                             uint32_t period_ms, lmc_l2_eviction_controller **out,
                                             lmc_error *err);
/* The same with a period in ns and a runtime (NULL: threads, monotonic clock). */
lmc_status lmc_l2_eviction_controller_create_ex(lmc_l2_adapter *const *adapters, size_t n_adapters,
                                                uint64_t period_ns, const lmc_runtime *rt,
                                                lmc_l2_eviction_controller **out, lmc_error *err);
/* Manual mode: when the next pass is due; UINT64_MAX with a thread or no adapter to evict. */
uint64_t lmc_l2_eviction_controller_next_event_ns(const lmc_l2_eviction_controller *c);
/* Manual mode: run the pass due at or before now_ns, if any; true when one ran. */
bool lmc_l2_eviction_controller_tick(lmc_l2_eviction_controller *c, uint64_t now_ns);
/*
 * Stop the thread (idempotent). The adapters keep the controller's
 * listeners until they are destroyed and may call them from their worker
 * threads until then, so the safe shutdown order is: stop, destroy the
 * adapters, then destroy the controller. Destroying the controller first
 * is safe only when no adapter task can still complete.
 */
void lmc_l2_eviction_controller_stop(lmc_l2_eviction_controller *c);
void lmc_l2_eviction_controller_destroy(lmc_l2_eviction_controller *c);
/* One pass now, on the caller's thread (for tests): keys the adapters reported deleted. */
size_t lmc_l2_eviction_controller_run_once(lmc_l2_eviction_controller *c);
/*
 * {is_healthy, thread_alive, num_l2_adapters, evicted_keys_total,
 *  adapters: [{adapter_index, type, eviction_policy, mode ("global" or
 *  "isolated"), trigger_watermark, eviction_ratio, tracked_keys,
 *  evicted_keys_total}]} -- one entry per adapter with eviction on.
 */
lmc_json *lmc_l2_eviction_controller_report_status(lmc_l2_eviction_controller *c);
/* Keys evicted from every adapter since create (evicted_keys_total). Any thread. */
uint64_t lmc_l2_eviction_controller_evicted(lmc_l2_eviction_controller *c);

#endif
