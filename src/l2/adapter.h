/*
 * adapter.h -- an L2 adapter as its users see it: the controller-facing half
 * of the L2 interface.
 *
 * Who includes it: the StorageManager and its controllers (store, prefetch,
 * eviction), the config parser, tools and tests that drive an adapter. It
 * never shows how an adapter works inside; implementations of a type
 * include l2/adapter_impl.h (the implementer-facing half) instead.
 *
 * Owns: nothing itself; it declares the base every adapter shares
 * (adapter.c, spec/storage-manager.md section 8.1): the three completion
 * eventfds, per-adapter task ids, the completed results waiting to be
 * collected, usage accounting (total and per cache_salt) and the listeners.
 *
 * Every operation is non-blocking: submit, wait on the fd, then collect.
 * Each result is returned once. Task ids are unique per adapter only.
 *
 * Threads: all lmc_l2_adapter_* functions are thread-safe (called by the
 * store, prefetch and eviction controller threads). The base has one mutex
 * for results and one for usage; listener callbacks run outside both.
 */
#ifndef LMC_L2_ADAPTER_H
#define LMC_L2_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/runtime.h"
#include "lmcache/bitmap.h"
#include "lmcache/memory_obj.h"
#include "lmcache/status.h"
#include "lmcache/types.h"

typedef struct lmc_l2_adapter lmc_l2_adapter;

/* A finished store task: result >= 0 is success with that many bytes
 * written (0 when every key was already present); -1 is failure. */
typedef struct lmc_l2_store_result {
    uint64_t task_id;
    int64_t result;
} lmc_l2_store_result;

static inline bool lmc_l2_store_ok(int64_t result)
{
    return result >= 0;
}

/* Notified outside the base's locks, on the thread that reported the change. */
typedef struct lmc_l2_listener {
    void (*on_stored)(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n);
    void (*on_accessed)(void *ud, const lmc_object_key *keys, size_t n);
    void (*on_deleted)(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n);
    void *ud;
} lmc_l2_listener;

typedef struct lmc_l2_usage {
    uint64_t bytes_used;
    uint64_t capacity_bytes; /* 0 = unknown or unbounded */
} lmc_l2_usage;

/* Usage fraction used/capacity, or -1.0 when capacity is 0. */
double lmc_l2_usage_fraction(const lmc_l2_usage *u);

/* ------------------------------------------------------------------ */
/* Configuration                                                        */
/* ------------------------------------------------------------------ */

/*
 * Comma-separated registered type names, for messages and help ("fs,
 * mock"). Derived once from the registry table (registry.c); valid until
 * exit; any thread.
 */
const char *lmc_l2_type_names(void);

/*
 * Validate one `--l2-adapter` JSON text: it must be an object with a string
 * "type" naming a registered type; the common keys must be well-formed;
 * the type checks the rest. Errors (LMC_ERR_INVALID) name the field, e.g.
 * "--l2-adapter: field 'max_capacity_gb' of type 'fs' must be a number >= 0 (got -1)".
 * A "serde" key gives LMC_ERR_UNSUPPORTED ("field 'serde' is not supported
 * by this build").
 */
lmc_status lmc_l2_check_config(const lmc_json *cfg, lmc_error *err);

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */
/* ------------------------------------------------------------------ */

/* Build and start an adapter from its JSON config (validated again here). */
lmc_status lmc_l2_adapter_create(const lmc_json *cfg, lmc_l2_adapter **out, lmc_error *err);
/*
 * The same with a runtime (core/runtime.h; NULL: threads on the monotonic
 * clock, which is what lmc_l2_adapter_create does). The runtime is copied.
 * Manual: no worker thread; each task's real work runs inline, from
 * lmc_l2_adapter_run_next, at its modelled completion time
 * (lmc_l2_virtual_model in l2/adapter_impl.h), and completes then.
 */
lmc_status lmc_l2_adapter_create_ex(const lmc_json *cfg, const lmc_runtime *rt,
                                    lmc_l2_adapter **out, lmc_error *err);
/* Stop it (pending tasks complete as failures), close the fds, free it. */
void lmc_l2_adapter_destroy(lmc_l2_adapter *a);

const char *lmc_l2_adapter_type(const lmc_l2_adapter *a);

/* ------------------------------------------------------------------ */
/* Tasks: submit, wait on the fd, collect                               */
/* ------------------------------------------------------------------ */

/* Three distinct eventfds, readable when a task of that kind completes. */
int lmc_l2_adapter_store_fd(const lmc_l2_adapter *a);
int lmc_l2_adapter_lookup_fd(const lmc_l2_adapter *a);
int lmc_l2_adapter_load_fd(const lmc_l2_adapter *a);
/* Read and discard an eventfd's counter (after poll says it is readable). */
void lmc_l2_drain_fd(int fd);

/*
 * Submit a task; *task_id names its result. Arrays are borrowed for the
 * call only; objs must stay valid until the task completes. A store or a
 * load's objs has n entries.
 */
lmc_status lmc_l2_adapter_submit_store(lmc_l2_adapter *a, const lmc_object_key *keys,
                                       const lmc_memory_obj *objs, size_t n, uint64_t *task_id);
lmc_status lmc_l2_adapter_submit_lookup(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n,
                                        uint64_t *task_id);
lmc_status lmc_l2_adapter_submit_load(lmc_l2_adapter *a, const lmc_object_key *keys,
                                      const lmc_memory_obj *objs, size_t n, uint64_t *task_id);
/* Release the locks a lookup took on keys (fire-and-forget). */
void lmc_l2_adapter_submit_unlock(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n);
/* Synchronous delete (the eviction thread); keys locked by lookups are skipped. */
void lmc_l2_adapter_delete(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n);

/*
 * Move every completed store result into out (a malloc'd array the caller
 * frees; NULL when none) and return how many. Each is returned once.
 */
size_t lmc_l2_adapter_pop_completed_stores(lmc_l2_adapter *a, lmc_l2_store_result **out);

/*
 * The lookup (or load) bitmap of a task, once: true and *out filled (the
 * caller frees it) when the task has completed; false while it runs, or
 * when the result was already taken.
 */
bool lmc_l2_adapter_take_lookup_result(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out);
bool lmc_l2_adapter_take_load_result(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out);

/* ------------------------------------------------------------------ */
/* Manual mode (virtual time): the owner delivers the adapter's events  */
/* ------------------------------------------------------------------ */

/*
 * The earliest time (the runtime's clock, ns) at which one of the
 * adapter's tasks completes, or UINT64_MAX when none is pending. Always
 * UINT64_MAX with threads.
 */
uint64_t lmc_l2_adapter_next_event_ns(lmc_l2_adapter *a);

/*
 * Deliver the adapter's earliest event if it is due at or before now_ns
 * (the owner has set the clock): run that task's work inline and complete
 * it, or report a task whose completion was deferred. Events due at the
 * same time go in submission order. Returns whether one was delivered.
 * Call from one thread at a time; a no-op with threads.
 */
bool lmc_l2_adapter_run_next(lmc_l2_adapter *a, uint64_t now_ns);

/* ------------------------------------------------------------------ */
/* Usage and listeners                                                  */
/* ------------------------------------------------------------------ */

lmc_l2_usage lmc_l2_adapter_get_usage(lmc_l2_adapter *a);
bool lmc_l2_adapter_supports_global_eviction(const lmc_l2_adapter *a);

/* Bytes used per cache_salt ("" for the empty salt), positive entries only. */
uint64_t lmc_l2_adapter_salt_bytes(lmc_l2_adapter *a, const char *salt);

/* One cache_salt's usage; salt is interned (valid until exit). */
typedef struct lmc_l2_salt_usage {
    const char *salt;
    uint64_t bytes;
} lmc_l2_salt_usage;

/*
 * Every salt with bytes > 0, for the isolated eviction loop: a malloc'd
 * array in *out (caller frees; NULL when none) and its length.
 */
size_t lmc_l2_adapter_salt_usages(lmc_l2_adapter *a, lmc_l2_salt_usage **out);

/* Register a listener (kept until destroy; at most LMC_L2_MAX_LISTENERS). */
#define LMC_L2_MAX_LISTENERS 8
lmc_status lmc_l2_adapter_add_listener(lmc_l2_adapter *a, const lmc_l2_listener *l);

/*
 * Recovery replay. An adapter that finds data from a previous run at
 * create time (fs with max_capacity_gb > 0 and recover_on_start) accounts
 * it in the usage at once, but no listener exists yet. A listener that
 * must track every resident key (the L2 eviction bridge; the spec replays
 * recovered keys only to eviction policies, never to the coordinator)
 * calls this right AFTER lmc_l2_adapter_add_listener: l->on_stored is then
 * called, on the calling thread, with every recovered key the adapter still
 * holds and its size. Registering first means no key can fall between the
 * two calls; a key stored in that window may be reported twice, which a
 * policy treats as a touch. A no-op for adapters that recover nothing.
 */
void lmc_l2_adapter_replay_recovered(lmc_l2_adapter *a, const lmc_l2_listener *l);

/* ------------------------------------------------------------------ */
/* The common config keys, parsed at create                             */
/* ------------------------------------------------------------------ */

/* "shared" (default false) and "persist_enabled" (default true; recorded
 * only: fs always keeps files). */
bool lmc_l2_adapter_is_shared(const lmc_l2_adapter *a);
bool lmc_l2_adapter_persist_enabled(const lmc_l2_adapter *a);

/* The "eviction" object of the config, or NULL when absent. */
const lmc_json *lmc_l2_adapter_eviction_config(const lmc_l2_adapter *a);

/* The "eviction" object with defaults filled in, as typed values. */
typedef struct lmc_l2_eviction_settings {
    const char *policy; /* an eviction registry name (storage/eviction.h); valid until destroy */
    double trigger_watermark; /* (0, 1], default 0.8 */
    double eviction_ratio;    /* (0, 1], default 0.2 */
} lmc_l2_eviction_settings;

/* False (and *out untouched) when the config has no "eviction" object. */
bool lmc_l2_adapter_eviction_settings(const lmc_l2_adapter *a, lmc_l2_eviction_settings *out);

/* ------------------------------------------------------------------ */
/* fs: what a base_path already holds                                   */
/* ------------------------------------------------------------------ */

typedef struct lmc_l2_fs_objects {
    uint64_t files, bytes; /* found */
    uint64_t removed;      /* of those, removed */
} lmc_l2_fs_objects;

/*
 * The objects an "fs" adapter config's base_path (and relative_tmp_dir)
 * holds: regular files named as the adapter names them (a key's canonical
 * name, or its temporary name), never anything else and never through a
 * symlink. With remove they are deleted. A config of another type, or a
 * base_path that does not exist, holds none. LMC_ERR_IO naming the path
 * when a directory cannot be read or a file removed. Any thread; no
 * adapter needs to exist.
 */
lmc_status lmc_l2_fs_scan(const lmc_json *cfg, bool remove, lmc_l2_fs_objects *out, lmc_error *err);

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

/* {"type", "is_healthy", "bytes_used", "capacity_bytes", "usage_fraction", ...}. */
lmc_json *lmc_l2_adapter_report_status(lmc_l2_adapter *a);
bool lmc_l2_adapter_is_healthy(lmc_l2_adapter *a);

#endif
