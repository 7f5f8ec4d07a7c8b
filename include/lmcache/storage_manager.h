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
 * Reserve L1 buffers for keys in the given mode. errs[i] == LMC_L1_SUCCESS means objs[i] is writable until
 * finish_write; any other value means the key was not reserved (already
 * present, locked, or out of memory) and must not be written. Returns the
 * number reserved.
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
void lmc_sm_read_prefetched_exit(lmc_storage_manager *sm, lmc_sm_read_ctx *ctx,
                                 bool caller_failed);

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
 * Wait until the store and prefetch controllers are idle (nothing queued
 * or in flight) or timeout_ms passes; true when idle. For replay drains and
 * tests.
 */
bool lmc_sm_wait_idle(lmc_storage_manager *sm, uint32_t timeout_ms);

/* The SHA-256 of the config JSON (the trace header digest), 64 hex + NUL. */
const char *lmc_sm_config_digest_hex(const lmc_storage_manager *sm);

#ifdef __cplusplus
}
#endif
#endif
