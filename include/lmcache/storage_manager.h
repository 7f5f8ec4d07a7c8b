/*
 * storage_manager.h -- the StorageManager: LMCache's storage layer in C.
 *
 * One StorageManager owns an L1 tier (one host-memory pool with TTL-locked
 * objects), its eviction policy and controller, the L2 adapters and their
 * eviction, and the store (L1 -> L2) and prefetch (L2 -> L1) controllers
 * (spec/storage-manager.md section 3). It has no lock of its own: every
 * call delegates to components that are thread-safe, so every function here
 * may be called from many threads at once.
 *
 * The six traced entry points (reserve_write, finish_write,
 * submit_prefetch_task, finish_read_prefetched, and the enter and exit of
 * read_prefetched_results) each start with the trace capture hook, which
 * costs one predictable branch when tracing is off.
 *
 * Per-key failures are never errors of the call: they come back in per-key
 * arrays (lmc_l1_error), exactly like LMCache's partial result maps.
 *
 * Two ways to run it (lmc_sm_create_ex): with threads (the default, what
 * lmc_sm_create builds: each controller and each L2 adapter worker on its
 * own thread, on the monotonic clock), or manually, in virtual time: no
 * background thread at all, a clock that moves only when the owner calls
 * lmc_sm_advance_to, and every piece of background work (L2 completions,
 * eviction passes, the store and prefetch controllers' steps) run by that
 * call at its due time, in a fixed order. Both modes run the same code; a
 * manual StorageManager gives the same results for the same calls at the
 * same virtual times, whatever the host's load.
 */
#ifndef LMCACHE_STORAGE_MANAGER_H
#define LMCACHE_STORAGE_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/bitmap.h"
#include "lmcache/config.h"
#include "lmcache/memory_obj.h"
#include "lmcache/status.h"
#include "lmcache/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmc_storage_manager lmc_storage_manager;

/*
 * Build and start a StorageManager from a finished config (the config is
 * copied). Errors name the component that failed (L1 pool, adapter N, ...).
 */
lmc_status lmc_sm_create(const lmc_sm_config *cfg, lmc_storage_manager **out, lmc_error *err);

/* How a StorageManager is driven: with threads, or by its owner in virtual time. */
typedef enum lmc_sm_executor {
    LMC_SM_EXEC_THREADS = 0, /* background threads on the monotonic clock (a server) */
    LMC_SM_EXEC_MANUAL = 1,  /* no background thread; virtual time moved by lmc_sm_advance_to */
} lmc_sm_executor;

/*
 * Runtime options: how the StorageManager runs, not what it is built from
 * (they are not part of the config, its JSON or its digest).
 */
typedef struct lmc_sm_runtime_options {
    lmc_sm_executor executor;
    /* The L1 and L2 eviction controllers' period in ns (0: 1 s). With threads a period
     * below 1 ms is raised to 1 ms. */
    uint64_t eviction_period_ns;
    /* Manual: the virtual clock's reading at create (default 0). */
    uint64_t start_ns;
} lmc_sm_runtime_options;

/* The defaults: threads, a 1 s eviction period. */
void lmc_sm_runtime_options_init(lmc_sm_runtime_options *opt);

/* lmc_sm_create with runtime options (NULL: the defaults, i.e. lmc_sm_create). */
lmc_status lmc_sm_create_ex(const lmc_sm_config *cfg, const lmc_sm_runtime_options *opt,
                            lmc_storage_manager **out, lmc_error *err);

/*
 * close(): stop the prefetch, store, L1-eviction and L2-eviction
 * controllers, close every adapter (fs files are kept), free L1. Idempotent
 * through destroy, which also frees the handle.
 */
void lmc_sm_destroy(lmc_storage_manager *sm);

/* ------------------------------------------------------------------ */
/* Write path                                                           */
/* ------------------------------------------------------------------ */

/*
 * Reserve L1 buffers for keys in the given mode. errs[i] == LMC_L1_SUCCESS means objs[i] is
 * writable until finish_write; any other value means the key was not reserved (already present,
 * locked, or out of memory) and must not be written. Returns the number reserved.
 */
size_t lmc_sm_reserve_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                            const lmc_layout_desc *layout, lmc_write_mode mode, lmc_l1_error *errs,
                            lmc_memory_obj *objs);

/* Commit written keys: they become readable and are queued for L2. errs may be NULL. */
void lmc_sm_finish_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                         lmc_l1_error *errs);

/*
 * Give back reservations of reserve_write that will not be finished (the
 * writer could not fill them, e.g. the server's copy from a client region
 * failed): the objects are dropped, nothing is committed, nothing goes to
 * L2. Keys that are not reserved-and-unfinished are left alone. Not an
 * LMCache call (LMCache leaves such a reservation to its write TTL) and not
 * traced, so a replay of the trace keeps it until that TTL.
 */
void lmc_sm_abort_write(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n);

/* ------------------------------------------------------------------ */
/* Prefetch / read path                                                 */
/* ------------------------------------------------------------------ */

/*
 * Read-lock the L1 hits (1 + extra_count locks each) and send the rest to
 * the L2 prefetch controller (PREFIX: the keys after the leading run of
 * hits; SPARSE: every miss). Fills *handle (release it with
 * lmc_prefetch_handle_clear). external_request_id may be NULL.
 */
lmc_status lmc_sm_submit_prefetch_task(lmc_storage_manager *sm, const lmc_object_key *keys,
                                       size_t n, const lmc_layout_desc *layout,
                                       uint32_t extra_count, const char *external_request_id,
                                       lmc_trim_policy policy, lmc_prefetch_handle *handle,
                                       lmc_error *err);

/*
 * The found-key bitmap (size total_requested_keys) of a prefetch into
 * *out, which the caller frees. Returns
 *   LMC_OK             the result is in *out;
 *   LMC_ERR_BUSY       the L2 part still runs: ask again later;
 *   LMC_ERR_NOT_FOUND  the L2 result was already collected: it is consumed
 *                      by the LMC_OK answer, as LMCache answers None after
 *                      it (a handle without an L2 request, id -1, may be
 *                      queried again);
 *   LMC_ERR_NOMEM      no memory for *out; the L2 result stays with the
 *                      controller, so a later query can still collect it.
 * *out is set only on LMC_OK.
 */
lmc_status lmc_sm_query_prefetch_status(lmc_storage_manager *sm, const lmc_prefetch_handle *handle,
                                        lmc_bitmap *out);

/* L1 hits plus the L2 lookup-phase prefix count; false while unknown. */
bool lmc_sm_query_prefetch_lookup_hits(lmc_storage_manager *sm, const lmc_prefetch_handle *handle,
                                       size_t *hits);

/*
 * read_prefetched_results as an enter/exit pair. enter reads the objects of
 * keys (already read-locked by a prefetch) without new locks; the context
 * holds them only if every key succeeded (ctx->ok). exit with ok objects and
 * no caller error releases nothing (the caller calls finish_read_prefetched
 * after copying); otherwise it releases one read lock per key that did
 * succeed. The context owns copies of the keys; exit frees them.
 *
 * A key that fails is reported in ctx->errs only (KEY_NOT_EXIST: not in
 * L1; KEY_NOT_READABLE: in L1 but holding no read lock, e.g. being written
 * or never locked by a prefetch), with at most one DEBUG line per call:
 * misses are the caller's to count, and a log line per key would flood.
 */
typedef struct lmc_sm_read_ctx {
    lmc_object_key *keys;
    size_t n;
    lmc_memory_obj *objs; /* n entries; valid when ok */
    lmc_l1_error *errs;   /* n entries */
    bool ok;              /* every key succeeded: the "yield objects" case */
} lmc_sm_read_ctx;

lmc_status lmc_sm_read_prefetched_enter(lmc_storage_manager *sm, const lmc_object_key *keys,
                                        size_t n, lmc_sm_read_ctx *ctx);
void lmc_sm_read_prefetched_exit(lmc_storage_manager *sm, lmc_sm_read_ctx *ctx, bool caller_failed);

/* Release 1 + extra_count read locks per key (a temporary object is freed at 0). */
void lmc_sm_finish_read_prefetched(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                                   uint32_t extra_count, lmc_l1_error *errs);

/* Objects of keys that are read-locked now; no new locks. */
void lmc_sm_unsafe_read(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs, lmc_memory_obj *objs);

/* Tell the eviction policy the keys were used (LRU recency). */
void lmc_sm_touch_l1_keys(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n);

/* ------------------------------------------------------------------ */
/* Management                                                           */
/* ------------------------------------------------------------------ */

/* Drop unlocked L1 objects (all with force). Returns how many. */
size_t lmc_sm_clear(lmc_storage_manager *sm, bool force);

/*
 * {is_healthy, l1_manager, store_controller, prefetch_controller,
 *  l1_eviction_controller, l2_eviction_controller, l2_adapters: [...],
 *  num_l2_adapters} as compact JSON text; the caller frees it.
 */
char *lmc_sm_report_status(lmc_storage_manager *sm);

/* L1 allocator and table consistency; reason in why when false. */
bool lmc_sm_memcheck(lmc_storage_manager *sm, char *why, size_t why_len);

/* L1 bytes in use and pool size. */
void lmc_sm_l1_usage(lmc_storage_manager *sm, uint64_t *used, uint64_t *total);

/*
 * Fault in the L1 pool's pages in [offset, offset + len) of the pool
 * (clamped to its size) for writing, changing no byte: the page faults the
 * first store into each page would take, taken now (the pool is mapped
 * lazily). Safe from any thread while the StorageManager runs; a server
 * calls it in steps from a thread of its own. LMC_ERR_UNSUPPORTED where
 * the kernel cannot (before Linux 5.14), LMC_ERR_NOMEM when memory runs
 * out, LMC_ERR_INVALID for an offset past the pool.
 */
lmc_status lmc_sm_l1_populate(lmc_storage_manager *sm, uint64_t offset, uint64_t len,
                              lmc_error *err);

/* The read locks held on key now (0 when absent or expired); for tests and audits. */
uint64_t lmc_sm_l1_read_lock_count(lmc_storage_manager *sm, const lmc_object_key *key);

/*
 * Wait until the store and prefetch controllers are idle (nothing queued
 * or in flight) or timeout_ms passes; true when idle. For replay drains and
 * tests. Manual mode: advance virtual time through the pending work until
 * nothing is queued, in flight in a controller or pending in an L2 adapter
 * (eviction passes are delivered on the way but not waited for once idle);
 * false when the work cannot finish or takes longer than timeout_ms of
 * real time (with 0: whether it is idle now, once the controllers have
 * run). The clock stays where the last piece of work completed.
 */
bool lmc_sm_wait_idle(lmc_storage_manager *sm, uint32_t timeout_ms);

/*
 * Totals since create, for replay outcomes and reports. L2 figures are
 * summed over adapters: keys in store tasks that succeeded (keys an
 * adapter already held count too) and the bytes the adapters report
 * writing; keys (and their logical bytes) that L2 loads filled into L1.
 */
typedef struct lmc_sm_counters {
    uint64_t l1_evicted_keys;
    uint64_t l2_stored_keys, l2_stored_bytes, l2_store_failed_tasks;
    uint64_t l2_loaded_keys, l2_loaded_bytes;
    uint64_t l2_evicted_keys;
} lmc_sm_counters;

void lmc_sm_get_counters(lmc_storage_manager *sm, lmc_sm_counters *out);

/*
 * Each key's L1 state now (one L1 lock for the batch), to tell apart what
 * one per-key error code covers. A diagnostic: background work may change
 * a state right after the answer.
 */
void lmc_sm_l1_key_states(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                          lmc_l1_key_state *out);

/* ------------------------------------------------------------------ */
/* Virtual time (manual executor)                                       */
/* ------------------------------------------------------------------ */

/* The StorageManager's clock in ns: virtual (manual) or CLOCK_MONOTONIC (threads). */
uint64_t lmc_sm_now_ns(const lmc_storage_manager *sm);

/*
 * Manual: the earliest virtual time at which background work is due (an L2
 * task completes, an eviction pass), now when calls since the last advance
 * left work for the controllers (finished writes to store, prefetches to
 * start), or UINT64_MAX when nothing is pending. UINT64_MAX with threads.
 */
uint64_t lmc_sm_next_event_ns(lmc_storage_manager *sm);

/*
 * Manual: run the controllers' steps until they have nothing to do, then
 * deliver every event due at or before t_ns in order of time (at equal
 * times: the L2 adapters in flag order, each in submission order, then the
 * L1 and the L2 eviction pass), each at its own time and each followed by
 * the controllers' steps; then set the clock to t_ns. A t_ns before the
 * clock delivers what is due now and leaves the clock where it is. Call it
 * from one thread at a time. LMC_ERR_INVALID with threads.
 */
lmc_status lmc_sm_advance_to(lmc_storage_manager *sm, uint64_t t_ns);

/* The SHA-256 of the config JSON (the trace header digest), 64 hex + NUL. */
const char *lmc_sm_config_digest_hex(const lmc_storage_manager *sm);

#ifdef __cplusplus
}
#endif
#endif
