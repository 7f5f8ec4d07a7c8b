/*
 * l1_manager.h -- the L1 object table.
 *
 * Owns: the table ObjectKey -> L1 object {slot in the L1 pool, write TTL
 * lock, read TTL lock, is_temporary, write_pending} and the L1 pool itself
 * (spec/storage-manager.md sections 4 and 5). Every batch operation runs
 * under one mutex, so each call is atomic; per-key outcomes come back in an
 * lmc_l1_error array.
 *
 * States: absent -> write-locked (reserve_write) -> ready (finish_write)
 * <-> read-locked(n) (reserve_read / finish_read) -> ... -> absent (delete,
 * eviction, clear, or the last finish_read of a temporary object).
 *
 * write_pending is true from reserve until finish_write: an object whose
 * write lock expired before finish_write never becomes readable; it is
 * evictable and can be re-reserved in mode "update" or "all".
 *
 * Listener callbacks run *inside* the mutex, so they must be O(1), must not
 * call back into the L1 manager, and should only enqueue and signal. The
 * exception is `accessed` (touch), which is delivered without the mutex.
 *
 * Threads: thread-safe. Lock order: L1 mutex -> (listener locks, e.g. an
 * eviction policy's mutex) and L1 mutex -> L1 memory mutex.
 */
#ifndef LMC_STORAGE_L1_MANAGER_H
#define LMC_STORAGE_L1_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/clock.h"
#include "core/json.h"
#include "lmcache/memory_obj.h"
#include "lmcache/status.h"
#include "lmcache/types.h"
#include "storage/l1_memory.h"

typedef struct lmc_l1_manager lmc_l1_manager;

/* At most this many read locks per key per call (extra_count <= 127). */
#define LMC_MAX_READ_LOCK_COUNT 128

typedef enum lmc_l1_event {
    LMC_L1_EV_RESERVED_READ,
    LMC_L1_EV_READ_FINISHED,
    LMC_L1_EV_RESERVED_WRITE,
    LMC_L1_EV_WRITE_FINISHED,
    LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED,
    LMC_L1_EV_DELETED,
    LMC_L1_EV_ACCESSED,
} lmc_l1_event;

typedef struct lmc_l1_listener {
    /* keys are the keys the event applies to (successful ones only). */
    void (*on_event)(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n);
    void *ud;
} lmc_l1_listener;

typedef struct lmc_l1_manager_config {
    lmc_l1_memory_config memory;
    uint64_t write_ttl_seconds; /* default 600 */
    uint64_t read_ttl_seconds;  /* default 300 */
    lmc_clock clock;            /* now_ns == NULL: the monotonic clock */
} lmc_l1_manager_config;

lmc_status lmc_l1_manager_create(const lmc_l1_manager_config *cfg, lmc_l1_manager **out,
                                 lmc_error *err);
/* Frees every object and the pool. */
void lmc_l1_manager_destroy(lmc_l1_manager *l1);

/* Register a listener; call before the manager is shared between threads. */
lmc_status lmc_l1_manager_add_listener(lmc_l1_manager *l1, const lmc_l1_listener *listener);

/*
 * Reserve buffers for writing. errs[i] is SUCCESS (objs[i] filled),
 * KEY_NOT_WRITABLE or OUT_OF_MEMORY. is_temporary may be NULL (all false).
 * Missing keys are allocated in one all-or-nothing batch; if that fails
 * the largest prefix that fits is allocated and the rest get OUT_OF_MEMORY.
 * A key repeated within one call is reserved once; later copies get
 * KEY_NOT_WRITABLE. Never evicts.
 */
void lmc_l1_reserve_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                          const bool *is_temporary, const lmc_layout_desc *layout,
                          lmc_write_mode mode, lmc_l1_error *errs, lmc_memory_obj *objs);

/*
 * The per-key calls from here to lmc_l1_delete report each key's outcome
 * in errs[i]; errs may be NULL when the caller does not want them.
 */

/* NOT_EXIST; IN_WRONG_STATE if not write-locked (also after the TTL) or read-locked. */
void lmc_l1_finish_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                         lmc_l1_error *errs);

/* Take 1+extra_count read locks (extra_count clamped to [0,127]): NOT_EXIST, NOT_READABLE. */
void lmc_l1_reserve_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                         uint32_t extra_count, lmc_l1_error *errs, lmc_memory_obj *objs);

/* The object only if a read lock is held now: NOT_EXIST, NOT_READABLE. No new lock. */
void lmc_l1_unsafe_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs, lmc_memory_obj *objs);

/*
 * Release 1+extra_count read locks: NOT_EXIST; IN_WRONG_STATE if write-locked
 * or not read-locked. A temporary object left unlocked is freed at once.
 */
void lmc_l1_finish_read(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        uint32_t extra_count, lmc_l1_error *errs);

/* Atomic write-unlock then read-lock 1+extra_count (prefetch). */
void lmc_l1_finish_write_and_reserve_read(lmc_l1_manager *l1, const lmc_object_key *keys,
                                          size_t n, uint32_t extra_count, lmc_l1_error *errs,
                                          lmc_memory_obj *objs);

/*
 * Give back objects a writer reserved and could not fill: each key still
 * write-pending (reserved, never finished) and not read-locked is dropped;
 * others are left alone (NOT_EXIST, KEY_IN_WRONG_STATE).
 */
void lmc_l1_abort_write(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                        lmc_l1_error *errs);

/* Free objects: NOT_EXIST; KEY_IS_LOCKED (without force) if either lock is held. */
void lmc_l1_delete(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n, bool force,
                   lmc_l1_error *errs);

/* Drop every unlocked object (every object with force). Returns how many. */
size_t lmc_l1_clear(lmc_l1_manager *l1, bool force);

/* Notify listeners `accessed` (no table lock, no other effect). */
void lmc_l1_touch(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n);

/* Pool bytes in use and pool size. */
void lmc_l1_get_memory_usage(lmc_l1_manager *l1, uint64_t *used, uint64_t *total);

size_t lmc_l1_object_count(lmc_l1_manager *l1);

/* Run fn with the table mutex held (for the eviction controller's scan). */
void lmc_l1_with_lock(lmc_l1_manager *l1, void (*fn)(lmc_l1_manager *l1, void *ud), void *ud);

/*
 * Exists and neither lock is held now. Must be called with the mutex held
 * (inside lmc_l1_with_lock); delete() checks again anyway.
 */
bool lmc_l1_is_evictable_locked(lmc_l1_manager *l1, const lmc_object_key *key);

/* Read-lock count as seen now (0 when absent or expired); for tests and status. */
uint64_t lmc_l1_read_lock_count(lmc_l1_manager *l1, const lmc_object_key *key);
/* Each key's state now (one mutex hold for the batch), for diagnostics. */
void lmc_l1_key_states(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n,
                       lmc_l1_key_state *out);
/* True when the key exists (in any state). */
bool lmc_l1_contains(lmc_l1_manager *l1, const lmc_object_key *key);

/*
 * {is_healthy, total_object_count, write_locked_count, read_locked_count,
 *  temporary_count, memory_used_bytes, memory_total_bytes,
 *  memory_usage_ratio, write_ttl_seconds, read_ttl_seconds}.
 */
lmc_json *lmc_l1_report_status(lmc_l1_manager *l1);

/*
 * Allocator consistency plus table/allocator agreement (sum of object
 * slots == bytes in use). Logs lock counts at INFO. false + reason on error.
 */
bool lmc_l1_memcheck(lmc_l1_manager *l1, char *why, size_t why_len);

lmc_l1_memory *lmc_l1_manager_memory(lmc_l1_manager *l1);

#endif
