/*
 * adapter.c -- the base every L2 adapter shares (spec 8.1).
 *
 * Owns: the three completion eventfds, the per-adapter task-id counter,
 * the completed results waiting to be collected, the usage accounting
 * (total and per cache_salt), the listeners, and the parsed common config
 * keys. The type's own state (impl) is reached only through its ops.
 *
 * Threads: any controller thread calls the lmc_l2_adapter_* functions; the
 * type's worker threads call lmc_l2_complete_* and lmc_l2_notify_*.
 * results_lock guards the task-id counter and the result vectors;
 * usage_lock guards the byte counts, the salt table and the listener list.
 * Neither is held while calling into ops or listeners, and they are never
 * nested.
 *
 * Every submitted task gets a reserved result slot at submit time, so a
 * worker reporting a result never has to allocate (and so never fails).
 *
 * The base also keeps the adapter's runtime (its clock and executor), the
 * virtual-time model (from the common keys virtual_latency_us and
 * virtual_bandwidth_gbps, else the type's defaults), and, in manual mode,
 * the worker helper that delivers the adapter's tasks when the owner
 * advances time. All three are set before the adapter is shared.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "core/strmap.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

#define COMPONENT "l2"

typedef struct bitmap_result {
    uint64_t task_id;
    lmc_bitmap bitmap;
} bitmap_result;

/*
 * Lookup and load results, searched linearly: the prefetch controller
 * keeps only a handful of tasks in flight, so the vector stays short.
 */
typedef struct bitmap_results {
    bitmap_result *items;
    size_t len, cap;
    size_t reserved; /* submitted tasks not yet completed */
} bitmap_results;

typedef struct store_results {
    lmc_l2_store_result *items;
    size_t len, cap;
    size_t reserved;
} store_results;

/* Open addressing keyed by salt text; entries are never removed (salts are few). */
typedef struct salt_slot {
    const char *salt; /* interned (from a key); NULL = empty slot */
    uint64_t hash;
    uint64_t bytes;
} salt_slot;

struct lmc_l2_adapter {
    const lmc_l2_adapter_ops *ops;
    void *impl;
    int store_fd, lookup_fd, load_fd;

    lmc_runtime rt;
    lmc_l2_virtual_model model;
    bool bandwidth_given;    /* virtual_bandwidth_gbps was in the config */
    lmc_l2_workers *workers; /* manual mode: the helper that delivers the tasks */

    bool shared;
    bool persist_enabled;
    lmc_json *eviction; /* normalized copy with defaults, or NULL */
    lmc_l2_eviction_settings eviction_settings;

    pthread_mutex_t results_lock;
    uint64_t next_task_id;
    store_results stores;
    bitmap_results lookups;
    bitmap_results loads;

    pthread_mutex_t usage_lock;
    uint64_t bytes_used;
    uint64_t capacity_bytes;
    salt_slot *salts;
    size_t salts_cap, salts_len;
    lmc_l2_listener listeners[LMC_L2_MAX_LISTENERS];
    size_t n_listeners;
};

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

static bool grow_to(void **items, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap < 8 ? 8 : *cap;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*items, ncap * elem);
    if (p == NULL)
        return false;
    *items = p;
    *cap = ncap;
    return true;
}

static void signal_fd(int fd)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is saturated: the reader will wake anyway. */
    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

void lmc_l2_drain_fd(int fd)
{
    uint64_t value;
    while (read(fd, &value, sizeof(value)) < 0 && errno == EINTR) {
    }
}

double lmc_l2_usage_fraction(const lmc_l2_usage *u)
{
    if (u->capacity_bytes == 0)
        return -1.0;
    return (double)u->bytes_used / (double)u->capacity_bytes;
}

/*
 * The "eviction" object with its defaults written in, so every reader sees
 * the same values (the config was validated before this runs).
 */
static lmc_status parse_eviction(lmc_l2_adapter *a, const lmc_json *ev)
{
    const char *policy = lmc_json_get_string(lmc_json_object_get(ev, "eviction_policy"), NULL);
    const lmc_json *wm = lmc_json_object_get(ev, "trigger_watermark");
    const lmc_json *ratio = lmc_json_object_get(ev, "eviction_ratio");
    lmc_json *obj = lmc_json_object();
    if (obj == NULL)
        return LMC_ERR_NOMEM;
    lmc_status st = lmc_json_object_set(obj, "eviction_policy", lmc_json_string(policy));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "trigger_watermark",
                                 lmc_json_float(wm != NULL ? lmc_json_get_number(wm) : 0.8));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "eviction_ratio",
                                 lmc_json_float(ratio != NULL ? lmc_json_get_number(ratio) : 0.2));
    for (size_t i = 0; st == LMC_OK && i < lmc_json_size(ev); i++) {
        const char *key = lmc_json_object_key_at(ev, i);
        if (lmc_json_object_get(obj, key) == NULL)
            st = lmc_json_object_set(obj, key, lmc_json_copy(lmc_json_object_value_at(ev, i)));
    }
    if (st != LMC_OK) {
        lmc_json_free(obj);
        return st;
    }
    a->eviction = obj;
    a->eviction_settings.policy =
        lmc_json_get_string(lmc_json_object_get(obj, "eviction_policy"), NULL);
    a->eviction_settings.trigger_watermark =
        lmc_json_get_number(lmc_json_object_get(obj, "trigger_watermark"));
    a->eviction_settings.eviction_ratio =
        lmc_json_get_number(lmc_json_object_get(obj, "eviction_ratio"));
    return LMC_OK;
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */
/* ------------------------------------------------------------------ */

static void free_bitmap_results(bitmap_results *r)
{
    for (size_t i = 0; i < r->len; i++)
        lmc_bitmap_free(&r->items[i].bitmap);
    free(r->items);
    memset(r, 0, sizeof(*r));
}

static void free_base(lmc_l2_adapter *a)
{
    free(a->stores.items);
    free_bitmap_results(&a->lookups);
    free_bitmap_results(&a->loads);
    free(a->salts);
    lmc_json_free(a->eviction);
    if (a->store_fd >= 0)
        close(a->store_fd);
    if (a->lookup_fd >= 0)
        close(a->lookup_fd);
    if (a->load_fd >= 0)
        close(a->load_fd);
    pthread_mutex_destroy(&a->results_lock);
    pthread_mutex_destroy(&a->usage_lock);
    free(a);
}

/* The model from the common keys (validated already), or the type's defaults. */
static void parse_model(lmc_l2_adapter *a, const lmc_json *cfg, const char *type)
{
    double us, gbps;
    lmc_l2_config_number(cfg, type, "virtual_latency_us", false, 0.0, false,
                         a->ops->virtual_latency_us, &us, NULL);
    lmc_l2_config_number(cfg, type, "virtual_bandwidth_gbps", false, 0.0, false,
                         a->ops->virtual_bandwidth_gbps, &gbps, NULL);
    a->model.latency_ns = (uint64_t)(us * 1e3);
    a->model.bytes_per_s = gbps * 1e9;
    a->bandwidth_given = lmc_json_object_get(cfg, "virtual_bandwidth_gbps") != NULL;
}

lmc_status lmc_l2_adapter_create(const lmc_json *cfg, lmc_l2_adapter **out, lmc_error *err)
{
    return lmc_l2_adapter_create_ex(cfg, NULL, out, err);
}

lmc_status lmc_l2_adapter_create_ex(const lmc_json *cfg, const lmc_runtime *rt,
                                    lmc_l2_adapter **out, lmc_error *err)
{
    if (out == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "--l2-adapter: no output pointer");
    *out = NULL;
    lmc_status st = lmc_l2_check_config(cfg, err);
    if (st != LMC_OK)
        return st;
    const char *type = lmc_json_get_string(lmc_json_object_get(cfg, "type"), NULL);

    lmc_l2_adapter *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type '%s': out of memory", type);
    a->ops = lmc_l2_find_type(type);
    a->rt = lmc_runtime_resolve(rt);
    parse_model(a, cfg, type);
    a->store_fd = a->lookup_fd = a->load_fd = -1;
    pthread_mutex_init(&a->results_lock, NULL);
    pthread_mutex_init(&a->usage_lock, NULL);

    a->store_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->lookup_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->load_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->store_fd < 0 || a->lookup_fd < 0 || a->load_fd < 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "--l2-adapter: type '%s': eventfd: %s", type,
                           strerror(errno));
        goto fail;
    }

    /* Validated above, so these cannot fail on their values. */
    lmc_l2_config_bool(cfg, type, "shared", false, &a->shared, NULL);
    lmc_l2_config_bool(cfg, type, "persist_enabled", true, &a->persist_enabled, NULL);
    const lmc_json *ev = lmc_json_object_get(cfg, "eviction");
    if (ev != NULL && parse_eviction(a, ev) != LMC_OK) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type '%s': out of memory", type);
        goto fail;
    }

    st = a->ops->create(a, cfg, &a->impl, err);
    if (st != LMC_OK)
        goto fail;
    *out = a;
    return LMC_OK;

fail:
    free_base(a);
    return st;
}

void lmc_l2_adapter_destroy(lmc_l2_adapter *a)
{
    if (a == NULL)
        return;
    /* The type completes its pending tasks (as failures) here; the fds are still open. */
    a->ops->destroy(a->impl);
    a->impl = NULL;
    free_base(a);
}

const char *lmc_l2_adapter_type(const lmc_l2_adapter *a)
{
    return a->ops->type;
}

const lmc_runtime *lmc_l2_adapter_runtime(const lmc_l2_adapter *a)
{
    return &a->rt;
}

uint64_t lmc_l2_adapter_now_ns(const lmc_l2_adapter *a)
{
    return lmc_runtime_now_ns(&a->rt);
}

lmc_l2_virtual_model lmc_l2_adapter_virtual_model(const lmc_l2_adapter *a)
{
    return a->model;
}

void lmc_l2_adapter_set_virtual_bandwidth_default(lmc_l2_adapter *a, double bytes_per_s)
{
    if (!a->bandwidth_given)
        a->model.bytes_per_s = bytes_per_s;
}

void lmc_l2_adapter_bind_workers(lmc_l2_adapter *a, lmc_l2_workers *w)
{
    if (a->workers == NULL)
        a->workers = w;
}

void lmc_l2_adapter_unbind_workers(lmc_l2_adapter *a, lmc_l2_workers *w)
{
    if (a->workers == w)
        a->workers = NULL;
}

uint64_t lmc_l2_adapter_next_event_ns(lmc_l2_adapter *a)
{
    return a->workers != NULL ? lmc_l2_workers_next_due(a->workers) : UINT64_MAX;
}

bool lmc_l2_adapter_run_next(lmc_l2_adapter *a, uint64_t now_ns)
{
    return a->workers != NULL && lmc_l2_workers_run_next(a->workers, now_ns);
}

int lmc_l2_adapter_store_fd(const lmc_l2_adapter *a)
{
    return a->store_fd;
}

int lmc_l2_adapter_lookup_fd(const lmc_l2_adapter *a)
{
    return a->lookup_fd;
}

int lmc_l2_adapter_load_fd(const lmc_l2_adapter *a)
{
    return a->load_fd;
}

bool lmc_l2_adapter_is_shared(const lmc_l2_adapter *a)
{
    return a->shared;
}

bool lmc_l2_adapter_persist_enabled(const lmc_l2_adapter *a)
{
    return a->persist_enabled;
}

const lmc_json *lmc_l2_adapter_eviction_config(const lmc_l2_adapter *a)
{
    return a->eviction;
}

bool lmc_l2_adapter_eviction_settings(const lmc_l2_adapter *a, lmc_l2_eviction_settings *out)
{
    if (a->eviction == NULL)
        return false;
    *out = a->eviction_settings;
    return true;
}

/* ------------------------------------------------------------------ */
/* Submission and results                                               */
/* ------------------------------------------------------------------ */

/* Take the next id and reserve the task's result slot. */
static lmc_status begin_task(lmc_l2_adapter *a, lmc_l2_task_kind kind, uint64_t *id)
{
    bool ok;
    pthread_mutex_lock(&a->results_lock);
    if (kind == LMC_L2_TASK_STORE) {
        store_results *r = &a->stores;
        ok = grow_to((void **)&r->items, &r->cap, r->len + r->reserved + 1, sizeof(*r->items));
        if (ok)
            r->reserved++;
    } else {
        bitmap_results *r = kind == LMC_L2_TASK_LOOKUP ? &a->lookups : &a->loads;
        ok = grow_to((void **)&r->items, &r->cap, r->len + r->reserved + 1, sizeof(*r->items));
        if (ok)
            r->reserved++;
    }
    if (ok)
        *id = a->next_task_id++;
    pthread_mutex_unlock(&a->results_lock);
    return ok ? LMC_OK : LMC_ERR_NOMEM;
}

/* The type refused the task: give its slot back (its id stays used). */
static void abort_task(lmc_l2_adapter *a, lmc_l2_task_kind kind)
{
    pthread_mutex_lock(&a->results_lock);
    if (kind == LMC_L2_TASK_STORE)
        a->stores.reserved--;
    else if (kind == LMC_L2_TASK_LOOKUP)
        a->lookups.reserved--;
    else
        a->loads.reserved--;
    pthread_mutex_unlock(&a->results_lock);
}

/* Reserve the result slot, hand the task to the type, and give the slot back if it refuses. */
static lmc_status submit(lmc_l2_adapter *a, lmc_l2_task_kind kind, const lmc_object_key *keys,
                         const lmc_memory_obj *objs, size_t n, uint64_t *task_id)
{
    bool need_objs = kind != LMC_L2_TASK_LOOKUP;
    if (task_id == NULL || (n > 0 && keys == NULL) || (need_objs && n > 0 && objs == NULL))
        return LMC_ERR_INVALID;
    lmc_status st = begin_task(a, kind, task_id);
    if (st != LMC_OK)
        return st;
    st = a->ops->submit(a->impl, kind, *task_id, keys, need_objs ? objs : NULL, n);
    if (st != LMC_OK)
        abort_task(a, kind);
    return st;
}

lmc_status lmc_l2_adapter_submit_store(lmc_l2_adapter *a, const lmc_object_key *keys,
                                       const lmc_memory_obj *objs, size_t n, uint64_t *task_id)
{
    return submit(a, LMC_L2_TASK_STORE, keys, objs, n, task_id);
}

lmc_status lmc_l2_adapter_submit_lookup(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n,
                                        uint64_t *task_id)
{
    return submit(a, LMC_L2_TASK_LOOKUP, keys, NULL, n, task_id);
}

lmc_status lmc_l2_adapter_submit_load(lmc_l2_adapter *a, const lmc_object_key *keys,
                                      const lmc_memory_obj *objs, size_t n, uint64_t *task_id)
{
    return submit(a, LMC_L2_TASK_LOAD, keys, objs, n, task_id);
}

void lmc_l2_adapter_submit_unlock(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    if (n > 0 && keys != NULL)
        a->ops->submit_unlock(a->impl, keys, n);
}

void lmc_l2_adapter_delete(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    if (n > 0 && keys != NULL)
        a->ops->delete_keys(a->impl, keys, n);
}

void lmc_l2_complete_store(lmc_l2_adapter *a, uint64_t task_id, int64_t result)
{
    pthread_mutex_lock(&a->results_lock);
    store_results *r = &a->stores;
    if (r->reserved > 0)
        r->reserved--;
    /* Only fails for a task the base never reserved (a bug in the type). */
    bool ok = grow_to((void **)&r->items, &r->cap, r->len + 1, sizeof(*r->items));
    if (ok)
        r->items[r->len++] = (lmc_l2_store_result){task_id, result < 0 ? -1 : result};
    pthread_mutex_unlock(&a->results_lock);
    if (!ok)
        LMC_ERROR(COMPONENT, "%s: store task %llu: result dropped (out of memory)", a->ops->type,
                  (unsigned long long)task_id);
    signal_fd(a->store_fd);
}

static void complete_bitmap(lmc_l2_adapter *a, bitmap_results *r, int fd, const char *what,
                            uint64_t task_id, lmc_bitmap *bitmap)
{
    pthread_mutex_lock(&a->results_lock);
    if (r->reserved > 0)
        r->reserved--;
    bool ok = grow_to((void **)&r->items, &r->cap, r->len + 1, sizeof(*r->items));
    if (ok) {
        r->items[r->len].task_id = task_id;
        r->items[r->len].bitmap = *bitmap;
        r->len++;
        memset(bitmap, 0, sizeof(*bitmap));
    }
    pthread_mutex_unlock(&a->results_lock);
    if (!ok) {
        LMC_ERROR(COMPONENT, "%s: %s task %llu: result dropped (out of memory)", a->ops->type, what,
                  (unsigned long long)task_id);
        lmc_bitmap_free(bitmap);
    }
    signal_fd(fd);
}

void lmc_l2_complete_lookup(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *bitmap)
{
    complete_bitmap(a, &a->lookups, a->lookup_fd, "lookup", task_id, bitmap);
}

void lmc_l2_complete_load(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *bitmap)
{
    complete_bitmap(a, &a->loads, a->load_fd, "load", task_id, bitmap);
}

size_t lmc_l2_adapter_pop_completed_stores(lmc_l2_adapter *a, lmc_l2_store_result **out)
{
    *out = NULL;
    pthread_mutex_lock(&a->results_lock);
    size_t n = a->stores.len;
    /* Copied out rather than handed over: the array also holds the in-flight reservations. */
    lmc_l2_store_result *copy = n > 0 ? malloc(n * sizeof(*copy)) : NULL;
    if (copy != NULL) {
        memcpy(copy, a->stores.items, n * sizeof(*copy));
        a->stores.len = 0;
    } else {
        n = 0; /* out of memory: the results stay for the next call */
    }
    pthread_mutex_unlock(&a->results_lock);
    *out = copy;
    return n;
}

static bool take_bitmap(lmc_l2_adapter *a, bitmap_results *r, uint64_t task_id, lmc_bitmap *out)
{
    bool found = false;
    pthread_mutex_lock(&a->results_lock);
    for (size_t i = 0; i < r->len; i++) {
        if (r->items[i].task_id != task_id)
            continue;
        *out = r->items[i].bitmap;
        r->items[i] = r->items[r->len - 1];
        r->len--;
        found = true;
        break;
    }
    pthread_mutex_unlock(&a->results_lock);
    return found;
}

bool lmc_l2_adapter_take_lookup_result(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out)
{
    return take_bitmap(a, &a->lookups, task_id, out);
}

bool lmc_l2_adapter_take_load_result(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out)
{
    return take_bitmap(a, &a->loads, task_id, out);
}

/* ------------------------------------------------------------------ */
/* Usage and listeners                                                  */
/* ------------------------------------------------------------------ */

/* cache_salt strings hash as core/strmap's keys do. */
static uint64_t salt_hash(const char *s)
{
    return lmc_str_hash(s, strlen(s));
}

/* The slot of salt, or the empty slot where it would go. Caller holds usage_lock. */
static salt_slot *salt_find(salt_slot *slots, size_t cap, const char *salt, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        salt_slot *s = &slots[i];
        if (s->salt == NULL || (s->hash == h && (s->salt == salt || strcmp(s->salt, salt) == 0)))
            return s;
        i = (i + 1) & (cap - 1);
    }
}

/* The slot for salt, inserted if new; NULL when the table cannot grow. */
static salt_slot *salt_get(lmc_l2_adapter *a, const char *salt, bool insert)
{
    uint64_t h = salt_hash(salt);
    if (a->salts_cap > 0) {
        salt_slot *s = salt_find(a->salts, a->salts_cap, salt, h);
        if (s->salt != NULL || !insert)
            return s->salt != NULL ? s : NULL;
    } else if (!insert) {
        return NULL;
    }
    if ((a->salts_len + 1) * 10 > a->salts_cap * 7) {
        size_t ncap = a->salts_cap == 0 ? 16 : a->salts_cap * 2;
        salt_slot *ns = calloc(ncap, sizeof(*ns));
        if (ns == NULL)
            return NULL;
        for (size_t i = 0; i < a->salts_cap; i++) {
            if (a->salts[i].salt != NULL)
                *salt_find(ns, ncap, a->salts[i].salt, a->salts[i].hash) = a->salts[i];
        }
        free(a->salts);
        a->salts = ns;
        a->salts_cap = ncap;
    }
    salt_slot *s = salt_find(a->salts, a->salts_cap, salt, h);
    s->salt = salt;
    s->hash = h;
    s->bytes = 0;
    a->salts_len++;
    return s;
}

static const char *key_salt(const lmc_object_key *key)
{
    return key->cache_salt != NULL ? key->cache_salt : "";
}

/* What a notification reports; each kind changes the usage its own way. */
typedef enum l2_change { L2_STORED, L2_ACCESSED, L2_DELETED } l2_change;

/* Under usage_lock: add the stored bytes; false when a salt's share went unrecorded (no memory). */
static bool account_stored(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                           size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        a->bytes_used += sizes[i];
        salt_slot *s = salt_get(a, key_salt(&keys[i]), true);
        if (s != NULL)
            s->bytes += sizes[i];
        else
            ok = false;
    }
    return ok;
}

/* Under usage_lock: take the deleted bytes off, clamped at 0; how many keys would go below. */
static size_t account_deleted(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                              size_t n)
{
    size_t underflows = 0;
    for (size_t i = 0; i < n; i++) {
        salt_slot *s = salt_get(a, key_salt(&keys[i]), false);
        uint64_t have = s != NULL ? s->bytes : 0;
        if (a->bytes_used < sizes[i] || have < sizes[i])
            underflows++;
        a->bytes_used = a->bytes_used < sizes[i] ? 0 : a->bytes_used - sizes[i];
        if (s != NULL)
            s->bytes = have < sizes[i] ? 0 : have - sizes[i];
    }
    return underflows;
}

/*
 * The one path of the three notifications: the usage changes and the
 * listeners are copied under usage_lock, and the listeners are called from
 * the copy after it is released.
 */
static void notify(lmc_l2_adapter *a, l2_change what, const lmc_object_key *keys,
                   const uint64_t *sizes, size_t n)
{
    if (n == 0)
        return;
    lmc_l2_listener ls[LMC_L2_MAX_LISTENERS];
    bool salt_oom = false;
    size_t underflows = 0;
    pthread_mutex_lock(&a->usage_lock);
    if (what == L2_STORED)
        salt_oom = !account_stored(a, keys, sizes, n);
    else if (what == L2_DELETED)
        underflows = account_deleted(a, keys, sizes, n);
    size_t nl = a->n_listeners;
    memcpy(ls, a->listeners, nl * sizeof(ls[0]));
    pthread_mutex_unlock(&a->usage_lock);
    if (salt_oom)
        LMC_ERROR(COMPONENT, "%s: per-salt usage not recorded (out of memory)", a->ops->type);
    /* One line per call: a burst of bad deletes must not flood the log. */
    if (underflows > 0)
        LMC_WARN(COMPONENT, "%s: usage would go below 0 for %zu of %zu deleted keys; clamped at 0",
                 a->ops->type, underflows, n);
    for (size_t i = 0; i < nl; i++) {
        if (what == L2_STORED && ls[i].on_stored != NULL)
            ls[i].on_stored(ls[i].ud, keys, sizes, n);
        else if (what == L2_ACCESSED && ls[i].on_accessed != NULL)
            ls[i].on_accessed(ls[i].ud, keys, n);
        else if (what == L2_DELETED && ls[i].on_deleted != NULL)
            ls[i].on_deleted(ls[i].ud, keys, sizes, n);
    }
}

void lmc_l2_notify_stored(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                          size_t n)
{
    notify(a, L2_STORED, keys, sizes, n);
}

void lmc_l2_notify_deleted(lmc_l2_adapter *a, const lmc_object_key *keys, const uint64_t *sizes,
                           size_t n)
{
    notify(a, L2_DELETED, keys, sizes, n);
}

void lmc_l2_notify_accessed(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    notify(a, L2_ACCESSED, keys, NULL, n);
}

lmc_status lmc_l2_adapter_add_listener(lmc_l2_adapter *a, const lmc_l2_listener *l)
{
    if (l == NULL)
        return LMC_ERR_INVALID;
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&a->usage_lock);
    if (a->n_listeners < LMC_L2_MAX_LISTENERS)
        a->listeners[a->n_listeners++] = *l;
    else
        st = LMC_ERR_BUSY;
    pthread_mutex_unlock(&a->usage_lock);
    return st;
}

void lmc_l2_adapter_replay_recovered(lmc_l2_adapter *a, const lmc_l2_listener *l)
{
    if (l != NULL && l->on_stored != NULL && a->ops->replay_recovered != NULL)
        a->ops->replay_recovered(a->impl, l);
}

void lmc_l2_adapter_set_capacity(lmc_l2_adapter *a, uint64_t capacity_bytes)
{
    pthread_mutex_lock(&a->usage_lock);
    a->capacity_bytes = capacity_bytes;
    pthread_mutex_unlock(&a->usage_lock);
}

lmc_l2_usage lmc_l2_adapter_get_usage(lmc_l2_adapter *a)
{
    pthread_mutex_lock(&a->usage_lock);
    lmc_l2_usage u = {a->bytes_used, a->capacity_bytes};
    pthread_mutex_unlock(&a->usage_lock);
    return u;
}

bool lmc_l2_adapter_supports_global_eviction(const lmc_l2_adapter *a)
{
    /* Set once by the type's create, before the adapter is shared. */
    return a->capacity_bytes > 0;
}

uint64_t lmc_l2_adapter_salt_bytes(lmc_l2_adapter *a, const char *salt)
{
    pthread_mutex_lock(&a->usage_lock);
    salt_slot *s = salt_get(a, salt != NULL ? salt : "", false);
    uint64_t bytes = s != NULL ? s->bytes : 0;
    pthread_mutex_unlock(&a->usage_lock);
    return bytes;
}

size_t lmc_l2_adapter_salt_usages(lmc_l2_adapter *a, lmc_l2_salt_usage **out)
{
    *out = NULL;
    size_t n = 0;
    pthread_mutex_lock(&a->usage_lock);
    lmc_l2_salt_usage *arr = a->salts_len > 0 ? malloc(a->salts_len * sizeof(*arr)) : NULL;
    for (size_t i = 0; arr != NULL && i < a->salts_cap; i++) {
        if (a->salts[i].salt != NULL && a->salts[i].bytes > 0)
            arr[n++] = (lmc_l2_salt_usage){a->salts[i].salt, a->salts[i].bytes};
    }
    pthread_mutex_unlock(&a->usage_lock);
    if (n == 0) {
        free(arr);
        return 0;
    }
    *out = arr;
    return n;
}

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

bool lmc_l2_adapter_is_healthy(lmc_l2_adapter *a)
{
    return a->ops->is_healthy == NULL || a->ops->is_healthy(a->impl);
}

lmc_json *lmc_l2_adapter_report_status(lmc_l2_adapter *a)
{
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    lmc_json *obj = lmc_json_object();
    if (obj == NULL)
        return NULL;
    /* Setters take the child even when they fail, so one check at the end suffices. */
    lmc_status st = lmc_json_object_set(obj, "type", lmc_json_string(a->ops->type));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "is_healthy", lmc_json_bool(lmc_l2_adapter_is_healthy(a)));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "bytes_used", lmc_json_int((int64_t)u.bytes_used));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "capacity_bytes", lmc_json_int((int64_t)u.capacity_bytes));
    if (st == LMC_OK)
        st = lmc_json_object_set(obj, "usage_fraction", lmc_json_float(lmc_l2_usage_fraction(&u)));
    if (st != LMC_OK) {
        lmc_json_free(obj);
        return NULL;
    }
    if (a->ops->report_status != NULL)
        a->ops->report_status(a->impl, obj);
    return obj;
}
