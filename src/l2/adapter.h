/*
 * adapter.h -- the L2 adapter interface, its shared base and the registry.
 *
 * Owns: the base part of every adapter (spec/storage-manager.md section
 * 8.1): the three completion eventfds, per-adapter task ids, the completed
 * results waiting to be collected, usage accounting (total and per
 * cache_salt) and the listeners. An adapter type (fs.c, mock.c, resp.c) is a module
 * behind lmc_l2_adapter_ops that only does the work: it receives tasks with
 * their ids, runs them on its own thread(s), and reports each result with
 * lmc_l2_complete_store / _lookup / _load, which record it and signal the
 * matching eventfd.
 *
 * Every operation is non-blocking: submit, wait on the fd, then collect.
 * Each result is returned once. Task ids are unique per adapter only.
 *
 * Threads: all lmc_l2_adapter_* functions are thread-safe (called by the
 * store, prefetch and eviction controller threads). The base has one mutex
 * for results and one for usage; listener callbacks run outside both. Ops
 * must be thread-safe too.
 */
#ifndef LMC_L2_ADAPTER_H
#define LMC_L2_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
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

typedef struct lmc_l2_adapter_ops {
    const char *type; /* "fs", "mock", ... */
    const char *help; /* one line for --help */
    /*
     * Validate the type-specific fields of cfg (the whole adapter object;
     * the common keys type/shared/eviction/persist_enabled are checked by
     * the base and may be ignored here). An unknown field or a bad value:
     * LMC_ERR_INVALID with a message naming the field.
     */
    lmc_status (*check_config)(const lmc_json *cfg, lmc_error *err);
    /*
     * Build the adapter's state and start its threads. May call
     * lmc_l2_adapter_set_capacity. Returns the state in *impl.
     */
    lmc_status (*create)(lmc_l2_adapter *base, const lmc_json *cfg, void **impl, lmc_error *err);
    /*
     * Work submission. Arrays are borrowed for the call only (copy what is
     * kept). objs stay valid until the task completes (the caller holds L1
     * locks). Each task must eventually be completed exactly once, also at
     * close (as a failure).
     */
    lmc_status (*submit_store)(void *impl, uint64_t task_id, const lmc_object_key *keys,
                               const lmc_memory_obj *objs, size_t n);
    lmc_status (*submit_lookup)(void *impl, uint64_t task_id, const lmc_object_key *keys, size_t n);
    lmc_status (*submit_load)(void *impl, uint64_t task_id, const lmc_object_key *keys,
                              const lmc_memory_obj *objs, size_t n);
    /* Fire-and-forget; must eventually succeed. */
    void (*submit_unlock)(void *impl, const lmc_object_key *keys, size_t n);
    /* Synchronous delete (eviction thread); skips keys locked by lookups. */
    void (*delete_keys)(void *impl, const lmc_object_key *keys, size_t n);
    /* Type-specific status fields added to the base's object (may be NULL). */
    void (*report_status)(void *impl, lmc_json *status);
    bool (*is_healthy)(void *impl);
    /* Stop threads and free the state; data is kept (files stay on disk). */
    void (*destroy)(void *impl);
    /*
     * Optional (NULL = nothing is ever recovered). Tell l, through
     * l->on_stored on the calling thread and outside the adapter's locks,
     * about the keys the adapter found from a previous run at create time
     * and still holds. See lmc_l2_adapter_replay_recovered.
     */
    void (*replay_recovered)(void *impl, const lmc_l2_listener *l);
} lmc_l2_adapter_ops;

/* ------------------------------------------------------------------ */
/* Registry                                                             */
/* ------------------------------------------------------------------ */

/* The ops for a type name, or NULL. */
const lmc_l2_adapter_ops *lmc_l2_find_type(const char *type);

/* Comma-separated registered type names, for messages ("fs, mock"). */
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
/* Lifetime and the controller-facing API                               */
/* ------------------------------------------------------------------ */

/* Build and start an adapter from its JSON config (validated again here). */
lmc_status lmc_l2_adapter_create(const lmc_json *cfg, lmc_l2_adapter **out, lmc_error *err);
/* Stop it (pending tasks complete as failures), close the fds, free it. */
void lmc_l2_adapter_destroy(lmc_l2_adapter *a);

const char *lmc_l2_adapter_type(const lmc_l2_adapter *a);

/* Three distinct eventfds, readable when a task of that kind completes. */
int lmc_l2_adapter_store_fd(const lmc_l2_adapter *a);
int lmc_l2_adapter_lookup_fd(const lmc_l2_adapter *a);
int lmc_l2_adapter_load_fd(const lmc_l2_adapter *a);
/* Read and discard an eventfd's counter (after poll says it is readable). */
void lmc_l2_drain_fd(int fd);

lmc_status lmc_l2_adapter_submit_store(lmc_l2_adapter *a, const lmc_object_key *keys,
                                       const lmc_memory_obj *objs, size_t n, uint64_t *task_id);
lmc_status lmc_l2_adapter_submit_lookup(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n,
                                        uint64_t *task_id);
lmc_status lmc_l2_adapter_submit_load(lmc_l2_adapter *a, const lmc_object_key *keys,
                                      const lmc_memory_obj *objs, size_t n, uint64_t *task_id);
void lmc_l2_adapter_submit_unlock(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n);
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

lmc_l2_usage lmc_l2_adapter_get_usage(lmc_l2_adapter *a);
bool lmc_l2_adapter_supports_global_eviction(const lmc_l2_adapter *a);

/* Bytes used per cache_salt ("" for the empty salt), positive entries only. */
uint64_t lmc_l2_adapter_salt_bytes(lmc_l2_adapter *a, const char *salt);

/* The "eviction" object of the config, or NULL when absent. */
const lmc_json *lmc_l2_adapter_eviction_config(const lmc_l2_adapter *a);

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

/* The common keys, parsed at create: "shared" (default false) and
 * "persist_enabled" (default true; recorded only: fs always keeps files). */
bool lmc_l2_adapter_is_shared(const lmc_l2_adapter *a);
bool lmc_l2_adapter_persist_enabled(const lmc_l2_adapter *a);

/* The "eviction" object with defaults filled in, as typed values. */
typedef struct lmc_l2_eviction_settings {
    const char *policy; /* "LRU", "ARC", "S3FIFO", "IsolatedLRU", "noop"; valid until destroy */
    double trigger_watermark; /* (0, 1], default 0.8 */
    double eviction_ratio;    /* (0, 1], default 0.2 */
} lmc_l2_eviction_settings;

/* False (and *out untouched) when the config has no "eviction" object. */
bool lmc_l2_adapter_eviction_settings(const lmc_l2_adapter *a, lmc_l2_eviction_settings *out);

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

/* {"type", "is_healthy", "bytes_used", "capacity_bytes", "usage_fraction", ...}. */
lmc_json *lmc_l2_adapter_report_status(lmc_l2_adapter *a);
bool lmc_l2_adapter_is_healthy(lmc_l2_adapter *a);

/* ------------------------------------------------------------------ */
/* For adapter implementations                                          */
/* ------------------------------------------------------------------ */

void lmc_l2_adapter_set_capacity(lmc_l2_adapter *a, uint64_t capacity_bytes);

/* Record a result and signal the matching eventfd. bitmap ownership moves. */
void lmc_l2_complete_store(lmc_l2_adapter *a, uint64_t task_id, int64_t result);
void lmc_l2_complete_lookup(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *bitmap);
void lmc_l2_complete_load(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *bitmap);

/* Usage accounting plus listener fan-out (underflow clamps at 0 with a warning). */
void lmc_l2_notify_stored(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                          size_t n);
void lmc_l2_notify_deleted(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                           size_t n);
void lmc_l2_notify_accessed(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n);

/* ------------------------------------------------------------------ */
/* Config helpers for adapter types (config.c)                          */
/* ------------------------------------------------------------------ */

/*
 * Each helper reads one field of an adapter object and fails with
 * LMC_ERR_INVALID and a message in the house form, e.g.
 * "--l2-adapter: field 'max_capacity_gb' of type 'fs' must be a number >= 0 (got -1)".
 */

/* The common keys every type accepts: type, shared, eviction, persist_enabled, serde. */
bool lmc_l2_config_is_common_key(const char *key);

/* Reject a key that is neither common nor in allowed (NULL-terminated). */
lmc_status lmc_l2_config_check_fields(const lmc_json *cfg, const char *type,
                                      const char *const *allowed, lmc_error *err);

/* A non-empty string; *out is NULL when absent and not required. Borrowed from cfg. */
lmc_status lmc_l2_config_string(const lmc_json *cfg, const char *type, const char *field,
                                bool required, const char **out, lmc_error *err);

/* true or false; dflt when absent. */
lmc_status lmc_l2_config_bool(const lmc_json *cfg, const char *type, const char *field, bool dflt,
                              bool *out, lmc_error *err);

/*
 * A finite number (int or float) >= min (or > min when min_exclusive);
 * dflt when absent and not required.
 */
lmc_status lmc_l2_config_number(const lmc_json *cfg, const char *type, const char *field,
                                bool required, double min, bool min_exclusive, double dflt,
                                double *out, lmc_error *err);

/* Fail with "field 'F' of type 'T' must be <expectation> (got <v as JSON>)". */
lmc_status lmc_l2_config_bad_value(lmc_error *err, const char *type, const char *field,
                                   const lmc_json *v, const char *expectation);

/* An integer > 0; dflt when absent. */
lmc_status lmc_l2_config_positive_int(const lmc_json *cfg, const char *type, const char *field,
                                      int64_t dflt, int64_t *out, lmc_error *err);

/* ------------------------------------------------------------------ */
/* Tasks and their queue, shared by the one-worker adapters (task.c)    */
/* ------------------------------------------------------------------ */

typedef enum lmc_l2_task_kind {
    LMC_L2_TASK_LOOKUP = 0, /* served first: prefetch waits on it */
    LMC_L2_TASK_LOAD = 1,
    LMC_L2_TASK_STORE = 2, /* served last: big writes must not delay reads */
} lmc_l2_task_kind;

/*
 * One submitted task with its own copies of the keys and memory-object
 * handles (the bytes behind objs stay the caller's). keys may be reordered
 * by the worker once they have been used (to compact the keys to notify).
 */
typedef struct lmc_l2_task {
    struct lmc_l2_task *next;
    lmc_l2_task_kind kind;
    uint64_t id;
    size_t n;
    lmc_object_key *keys;
    lmc_memory_obj *objs; /* NULL for a lookup */
    uint64_t *sizes;      /* store: n slots of scratch for the sizes to notify */
    lmc_bitmap bitmap;    /* lookup and load: the result, all clear at creation */
    int64_t result;       /* store: bytes written, or -1 */
    size_t n_notify;      /* keys[0..n_notify) (sizes too) are to be reported to listeners */
    uint64_t due_ns;      /* free for the adapter (mock: when to complete) */
} lmc_l2_task;

/* One allocation holding the task and its arrays; NULL when memory runs out. */
lmc_l2_task *lmc_l2_task_new(lmc_l2_task_kind kind, uint64_t id, const lmc_object_key *keys,
                             const lmc_memory_obj *objs, size_t n);
void lmc_l2_task_free(lmc_l2_task *t);
/* Report t->result or t->bitmap to the base, then free t. */
void lmc_l2_task_complete(lmc_l2_adapter *a, lmc_l2_task *t);
/* Report t as failed (store -1, lookup/load all clear), then free t. */
void lmc_l2_task_fail(lmc_l2_adapter *a, lmc_l2_task *t);

/* Three FIFOs served by priority (lookup, load, store). The owner locks it. */
typedef struct lmc_l2_task_queue {
    lmc_l2_task *head[3];
    lmc_l2_task *tail[3];
    size_t count;
} lmc_l2_task_queue;

void lmc_l2_task_queue_push(lmc_l2_task_queue *q, lmc_l2_task *t);
/* The oldest task of the most urgent kind, or NULL when empty. */
lmc_l2_task *lmc_l2_task_queue_pop(lmc_l2_task_queue *q);

/* ------------------------------------------------------------------ */
/* fs on-disk names (fs.c)                                              */
/* ------------------------------------------------------------------ */

/*
 * The file name of key (spec 8.2):
 * <model, "/" as "-SEP-">@0x<kv_rank %08x>@<group %x>@<hash hex>[@<salt>].data
 * Writes at most len bytes including the NUL; returns the length it wanted.
 */
size_t lmc_l2_fs_key_name(const lmc_object_key *key, char *buf, size_t len);

/* The reverse; false for any name that is not a valid key file name. */
bool lmc_l2_fs_parse_name(const char *name, lmc_object_key *out);

/* Registered types (defined in their own files). */
extern const lmc_l2_adapter_ops lmc_l2_fs_ops;
extern const lmc_l2_adapter_ops lmc_l2_mock_ops;
/* Redis/Valkey over RESP through hiredis (resp.c). */
extern const lmc_l2_adapter_ops lmc_l2_resp_ops;
/* Wraps another adapter and injects failures and delays (fault_inject.c). */
extern const lmc_l2_adapter_ops lmc_l2_fault_inject_ops;

#endif
