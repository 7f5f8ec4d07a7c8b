/*
 * adapter_impl.h -- the implementer-facing half of the L2 interface: what
 * an adapter type (fs.c, mock.c, resp.c, fault_inject.c) is built from.
 *
 * Who includes it: the files of src/l2/ and their unit tests only. The
 * StorageManager and its controllers include l2/adapter.h and never this.
 *
 * Owns: nothing itself. It declares the ops struct a type fills in, the
 * registry of types (registry.c), the calls a type makes into the base to
 * report results and usage (adapter.c), the field helpers for its config
 * (config.c), the task record its workers run (task.c), per-key counts
 * for lookup locks and sizes (counts.c) and the fs key names (fs.c, also
 * used by resp.c). Worker threads with a task queue come
 * from l2/worker.h.
 *
 * A type only does the work: it receives tasks with their ids, runs them on
 * its own thread(s), and reports each result with lmc_l2_complete_store /
 * _lookup / _load (or lmc_l2_task_complete), which record it and signal the
 * matching eventfd.
 *
 * Threads: ops must be thread-safe (any controller thread calls them). A
 * type calls lmc_l2_complete_* and lmc_l2_notify_* from its own threads
 * without holding its own locks: listeners run on that thread and may call
 * back into the adapter.
 */
#ifndef LMC_L2_ADAPTER_IMPL_H
#define LMC_L2_ADAPTER_IMPL_H

#include "core/keymap.h"
#include "core/runtime.h"
#include "l2/adapter.h"

/* The three kinds of task, in the order they are served. */
typedef enum lmc_l2_task_kind {
    LMC_L2_TASK_LOOKUP = 0, /* served first: prefetch waits on it */
    LMC_L2_TASK_LOAD = 1,
    LMC_L2_TASK_STORE = 2, /* served last: big writes must not delay reads */
} lmc_l2_task_kind;

#define LMC_L2_TASK_KINDS 3

typedef struct lmc_l2_adapter_ops {
    const char *type; /* the registry key: "fs", "mock", ... */
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
     * Work submission, one op for the three kinds. Arrays are borrowed for
     * the call only (copy what is kept); objs is NULL for a lookup and has
     * n entries otherwise, valid until the task completes (the caller holds
     * L1 locks). Once this returns LMC_OK, the task must be completed
     * exactly once, also at close (as a failure); on an error it must not
     * be completed at all.
     */
    lmc_status (*submit)(void *impl, lmc_l2_task_kind kind, uint64_t task_id,
                         const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n);
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
    /*
     * The defaults of the virtual-time model (the common keys
     * virtual_latency_us and virtual_bandwidth_gbps; see
     * lmc_l2_adapter_virtual_model). A bandwidth of 0 means none by
     * default: no transfer time, unless the type sets one at create.
     */
    double virtual_latency_us;
    double virtual_bandwidth_gbps;
} lmc_l2_adapter_ops;

/* ------------------------------------------------------------------ */
/* Registry (registry.c): the one table of types                        */
/* ------------------------------------------------------------------ */

/* The ops for a type name (exact match), or NULL. */
const lmc_l2_adapter_ops *lmc_l2_find_type(const char *type);

/* The number of registered types, and the i-th one in table order (NULL past the end). */
size_t lmc_l2_type_count(void);
const lmc_l2_adapter_ops *lmc_l2_type_at(size_t i);

/* Registered types (defined in their own files). */
extern const lmc_l2_adapter_ops lmc_l2_fs_ops;
extern const lmc_l2_adapter_ops lmc_l2_mock_ops;
/* Redis/Valkey over RESP through hiredis (resp.c). */
extern const lmc_l2_adapter_ops lmc_l2_resp_ops;
/* Wraps another adapter and injects failures and delays (fault_inject.c). */
extern const lmc_l2_adapter_ops lmc_l2_fault_inject_ops;

/* ------------------------------------------------------------------ */
/* Calls into the base (adapter.c)                                      */
/* ------------------------------------------------------------------ */

void lmc_l2_adapter_set_capacity(lmc_l2_adapter *a, uint64_t capacity_bytes);

/*
 * The runtime the adapter was created with (its clock and executor,
 * core/runtime.h), and its clock's reading: what a type reads instead of
 * the monotonic clock for anything that decides behaviour (mock's
 * simulated bandwidth, fault_inject's delays). Valid until destroy.
 */
const lmc_runtime *lmc_l2_adapter_runtime(const lmc_l2_adapter *a);
uint64_t lmc_l2_adapter_now_ns(const lmc_l2_adapter *a);

/*
 * The virtual-time model of the adapter (manual mode only; ignored with
 * threads): a task submitted at s that moves b bytes (a store's or a
 * load's objects; a lookup moves none) starts at max(s, busy_until), holds
 * the adapter's bandwidth for b / bandwidth, and completes latency after
 * its transfer ends; busy_until moves to the end of the transfer. So
 * transfers share the bandwidth in order of submission, latencies overlap,
 * and a lookup costs the latency alone. From the common keys
 * virtual_latency_us and virtual_bandwidth_gbps (1e9 bytes/s), else the
 * type's defaults (lmc_l2_adapter_ops); bytes_per_s 0 = no transfer time.
 */
typedef struct lmc_l2_virtual_model {
    uint64_t latency_ns;
    double bytes_per_s;
} lmc_l2_virtual_model;

lmc_l2_virtual_model lmc_l2_adapter_virtual_model(const lmc_l2_adapter *a);

/*
 * The type's own default bandwidth, for a type whose speed is in its own
 * config (mock: mock_bandwidth_gb); virtual_bandwidth_gbps, when given,
 * still wins. Call from create.
 */
void lmc_l2_adapter_set_virtual_bandwidth_default(lmc_l2_adapter *a, double bytes_per_s);

/*
 * Manual mode: the worker helper (l2/worker.h) serving this adapter's
 * lmc_l2_adapter_next_event_ns and lmc_l2_adapter_run_next. The helper
 * registers itself at start (the first one to do so keeps it) and removes
 * itself at destroy. NULL: unbind if w is the bound one.
 */
struct lmc_l2_workers;
void lmc_l2_adapter_bind_workers(lmc_l2_adapter *a, struct lmc_l2_workers *w);
void lmc_l2_adapter_unbind_workers(lmc_l2_adapter *a, struct lmc_l2_workers *w);

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
/* The task record (task.c)                                             */
/* ------------------------------------------------------------------ */

/*
 * One submitted task with its own copies of the keys and memory-object
 * handles (the bytes behind objs stay the caller's). keys may be reordered
 * by the worker once they have been used (to compact the keys to notify).
 */
typedef struct lmc_l2_task {
    struct lmc_l2_task *next; /* the list the task is on (a queue, a due list, ...) */
    lmc_l2_task_kind kind;
    uint64_t id;
    size_t n;
    lmc_object_key *keys; /* NULL when created without keys */
    lmc_memory_obj *objs; /* NULL for a lookup */
    uint64_t *sizes;      /* store: n slots of scratch for the sizes to notify */
    lmc_bitmap bitmap;    /* lookup and load: the result, all clear at creation */
    int64_t result;       /* store: bytes written, or -1 */
    size_t n_notify;      /* keys[0..n_notify) (sizes too) are to be reported to listeners */
    uint64_t due_ns;      /* when a deferred task completes (l2/worker.h) */
    uint64_t seq;         /* manual mode: order among tasks due at the same time */
    bool ran;             /* manual mode: run already, deferred (finish when due) */
    uint64_t tag;         /* free for the adapter (fault_inject: the inner task id) */
    unsigned flags;       /* free for the adapter */
} lmc_l2_task;

/*
 * One allocation holding the task and its arrays; NULL when memory runs
 * out. keys and objs may be NULL (then no copy is kept; n still sizes the
 * result bitmap).
 */
lmc_l2_task *lmc_l2_task_new(lmc_l2_task_kind kind, uint64_t id, const lmc_object_key *keys,
                             const lmc_memory_obj *objs, size_t n);
void lmc_l2_task_free(lmc_l2_task *t);
/* Report t->result or t->bitmap to the base, then free t. */
void lmc_l2_task_complete(lmc_l2_adapter *a, lmc_l2_task *t);
/* Report t as failed (store -1, lookup/load all clear), then free t. */
void lmc_l2_task_fail(lmc_l2_adapter *a, lmc_l2_task *t);

/* ------------------------------------------------------------------ */
/* Per-key counts in an lmc_keymap (counts.c): lookup locks and sizes   */
/* ------------------------------------------------------------------ */

/* The caller holds the lock that guards the map (the adapter's own). */

/* key's count, 0 when absent (*present says which). */
uint64_t lmc_l2_count_get(const lmc_keymap *m, const lmc_object_key *key, bool *present);
/* Set key's count; replacing the count of a present key never allocates, so never fails. */
lmc_status lmc_l2_count_put(lmc_keymap *m, const lmc_object_key *key, uint64_t v);

/*
 * Every hit of lookup t (a set bit of t->bitmap) takes one more lock; a hit
 * that cannot be locked (out of memory) is cleared, so it is not reported.
 * Done before the result is published, so eviction cannot delete a hit the
 * caller is about to load.
 */
void lmc_l2_lock_hits(lmc_keymap *locks, lmc_l2_task *t);
/* Release one lock of each key (keys not locked are ignored); never fails. */
void lmc_l2_unlock_keys(lmc_keymap *locks, const lmc_object_key *keys, size_t n);

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

#endif
