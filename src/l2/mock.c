/*
 * mock.c -- the "mock" L2 adapter: an in-memory store with a simulated
 * bandwidth, for tests and replay experiments (spec 8.3).
 *
 * Owns: a copy of every stored object (key -> bytes, size, lookup lock
 * count) and the byte count against max_size_gb.
 *
 * Threads: one worker, "l2-mock-<n>", runs every task, lookups first. A
 * store or load does its copy at once and then waits out
 * bytes / bandwidth before completing; like LMCache's asyncio sleep, that
 * wait does not block the worker: the task sits in a deadline-ordered
 * `due` list while the worker serves other tasks. Unlock and delete run on
 * the caller's thread. `lock` guards the queue, the due list, the stop
 * flag, the entries and `used`; copies are made under it (this is a test
 * tool: simplicity over concurrency). Listener calls are made outside it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/keymap.h"
#include "core/log.h"
#include "l2/adapter.h"

#define COMPONENT "l2-mock"
#define TYPE "mock"
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct mock_entry {
    uint8_t *data;
    uint64_t size;
    uint64_t locks; /* lookup lock count */
} mock_entry;

typedef struct mock_adapter {
    lmc_l2_adapter *base;
    uint64_t capacity; /* bytes */
    double bandwidth;  /* bytes per second */
    unsigned instance;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC, for the due deadlines */
    lmc_l2_task_queue queue;
    lmc_l2_task *due; /* done, waiting out their delay; sorted by due_ns */
    bool stop;
    lmc_keymap *entries; /* key -> mock_entry* */
    uint64_t used;

    pthread_t thread;
    bool thread_started;
    atomic_bool worker_alive;
} mock_adapter;

static atomic_uint g_instances; /* numbers the worker threads: l2-mock-0, ... */

/* ------------------------------------------------------------------ */
/* The worker's tasks                                                   */
/* ------------------------------------------------------------------ */

/* Report what a finished store or load changed, then its result. */
static void finish(mock_adapter *m, lmc_l2_task *t)
{
    if (t->kind == LMC_L2_TASK_STORE)
        lmc_l2_notify_stored(m->base, t->keys, t->sizes, t->n_notify);
    else if (t->kind == LMC_L2_TASK_LOAD)
        lmc_l2_notify_accessed(m->base, t->keys, t->n_notify);
    lmc_l2_task_complete(m->base, t);
}

/* Caller holds m->lock. */
static void due_insert(mock_adapter *m, lmc_l2_task *t)
{
    lmc_l2_task **pp = &m->due;
    while (*pp != NULL && (*pp)->due_ns <= t->due_ns)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
}

/* Complete now, or park the task until bytes / bandwidth has passed since start. */
static void finish_after_delay(mock_adapter *m, lmc_l2_task *t, uint64_t bytes, uint64_t start_ns)
{
    uint64_t due = start_ns + (uint64_t)((double)bytes / m->bandwidth * 1e9);
    if (due <= lmc_mono_ns()) {
        finish(m, t);
        return;
    }
    t->due_ns = due;
    pthread_mutex_lock(&m->lock);
    due_insert(m, t);
    pthread_mutex_unlock(&m->lock);
}

static void run_store(mock_adapter *m, lmc_l2_task *t)
{
    uint64_t start = lmc_mono_ns();
    uint64_t stored = 0;
    size_t nn = 0, over = 0, oom = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < t->n; i++) {
        lmc_object_key key = t->keys[i];
        uint64_t size = t->objs[i].size;
        if (size > m->capacity || lmc_keymap_get(m->entries, &key) != NULL)
            continue;
        if (size > m->capacity - m->used) {
            over++;
            continue;
        }
        mock_entry *e = malloc(sizeof(*e));
        uint8_t *data = malloc(size > 0 ? size : 1);
        if (e == NULL || data == NULL || lmc_keymap_put(m->entries, &key, e, NULL) != LMC_OK) {
            free(e);
            free(data);
            oom++;
            continue;
        }
        if (size > 0)
            memcpy(data, t->objs[i].data, size);
        *e = (mock_entry){data, size, 0};
        m->used += size;
        stored += size;
        t->keys[nn] = key; /* nn <= i: only keys already handled are overwritten */
        t->sizes[nn] = size;
        nn++;
    }
    pthread_mutex_unlock(&m->lock);
    if (over > 0)
        LMC_WARN(COMPONENT,
                 "store task %" PRIu64 ": %zu keys skipped: capacity of %" PRIu64
                 " bytes would be exceeded",
                 t->id, over, m->capacity);
    if (oom > 0)
        LMC_ERROR(COMPONENT, "store task %" PRIu64 ": %zu keys skipped (out of memory)", t->id,
                  oom);
    t->n_notify = nn;
    t->result = (int64_t)stored;
    finish_after_delay(m, t, stored, start);
}

static void run_lookup(mock_adapter *m, lmc_l2_task *t)
{
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < t->n; i++) {
        void **slot = lmc_keymap_get(m->entries, &t->keys[i]);
        if (slot == NULL)
            continue;
        ((mock_entry *)*slot)->locks++;
        lmc_bitmap_set(&t->bitmap, i);
    }
    pthread_mutex_unlock(&m->lock);
    lmc_l2_task_complete(m->base, t); /* lookups are not delayed */
}

static void run_load(mock_adapter *m, lmc_l2_task *t)
{
    uint64_t start = lmc_mono_ns();
    uint64_t bytes = 0;
    size_t nn = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < t->n; i++) {
        void **slot = lmc_keymap_get(m->entries, &t->keys[i]);
        const mock_entry *e = slot != NULL ? *slot : NULL;
        /* A buffer of another size means another layout: a miss, not a partial copy. */
        if (e == NULL || e->size != t->objs[i].size)
            continue;
        if (e->size > 0)
            memcpy(t->objs[i].data, e->data, e->size);
        bytes += e->size;
        lmc_bitmap_set(&t->bitmap, i);
        t->keys[nn++] = t->keys[i];
    }
    pthread_mutex_unlock(&m->lock);
    t->n_notify = nn;
    finish_after_delay(m, t, bytes, start);
}

static void *worker_main(void *arg)
{
    mock_adapter *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        lmc_l2_task *t = lmc_l2_task_queue_pop(&m->queue);
        if (t != NULL) {
            pthread_mutex_unlock(&m->lock);
            switch (t->kind) {
            case LMC_L2_TASK_STORE:
                run_store(m, t);
                break;
            case LMC_L2_TASK_LOOKUP:
                run_lookup(m, t);
                break;
            case LMC_L2_TASK_LOAD:
                run_load(m, t);
                break;
            }
            pthread_mutex_lock(&m->lock);
            continue;
        }
        if (m->due != NULL && m->due->due_ns <= lmc_mono_ns()) {
            t = m->due;
            m->due = t->next;
            pthread_mutex_unlock(&m->lock);
            finish(m, t);
            pthread_mutex_lock(&m->lock);
            continue;
        }
        if (m->due != NULL) {
            struct timespec ts = {(time_t)(m->due->due_ns / 1000000000u),
                                  (long)(m->due->due_ns % 1000000000u)};
            pthread_cond_timedwait(&m->cond, &m->lock, &ts);
        } else {
            pthread_cond_wait(&m->cond, &m->lock);
        }
    }
    pthread_mutex_unlock(&m->lock);
    atomic_store(&m->worker_alive, false);
    return NULL;
}

static lmc_status enqueue(mock_adapter *m, lmc_l2_task_kind kind, uint64_t id,
                          const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    lmc_l2_task *t = lmc_l2_task_new(kind, id, keys, objs, n);
    if (t == NULL)
        return LMC_ERR_NOMEM;
    pthread_mutex_lock(&m->lock);
    bool stopped = m->stop;
    if (!stopped) {
        lmc_l2_task_queue_push(&m->queue, t);
        pthread_cond_signal(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
    if (stopped) {
        lmc_l2_task_free(t);
        return LMC_ERR_CLOSED;
    }
    return LMC_OK;
}

static lmc_status mock_submit_store(void *impl, uint64_t id, const lmc_object_key *keys,
                                    const lmc_memory_obj *objs, size_t n)
{
    return enqueue(impl, LMC_L2_TASK_STORE, id, keys, objs, n);
}

static lmc_status mock_submit_lookup(void *impl, uint64_t id, const lmc_object_key *keys, size_t n)
{
    return enqueue(impl, LMC_L2_TASK_LOOKUP, id, keys, NULL, n);
}

static lmc_status mock_submit_load(void *impl, uint64_t id, const lmc_object_key *keys,
                                   const lmc_memory_obj *objs, size_t n)
{
    return enqueue(impl, LMC_L2_TASK_LOAD, id, keys, objs, n);
}

static void mock_submit_unlock(void *impl, const lmc_object_key *keys, size_t n)
{
    mock_adapter *m = impl;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        void **slot = lmc_keymap_get(m->entries, &keys[i]);
        if (slot != NULL && ((mock_entry *)*slot)->locks > 0)
            ((mock_entry *)*slot)->locks--;
    }
    pthread_mutex_unlock(&m->lock);
}

/* As in LMCache, locks are not checked: a locked key that is deleted simply misses on load. */
static void mock_delete_keys(void *impl, const lmc_object_key *keys, size_t n)
{
    mock_adapter *m = impl;
    lmc_object_key *gone = malloc(n * sizeof(*gone));
    uint64_t *sizes = malloc(n * sizeof(*sizes));
    if (gone == NULL || sizes == NULL) {
        LMC_ERROR(COMPONENT, "delete of %zu keys skipped (out of memory)", n);
        free(gone);
        free(sizes);
        return;
    }
    size_t d = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        void *v;
        if (!lmc_keymap_remove(m->entries, &keys[i], &v))
            continue;
        mock_entry *e = v;
        m->used -= e->size;
        gone[d] = keys[i];
        sizes[d] = e->size;
        d++;
        free(e->data);
        free(e);
    }
    pthread_mutex_unlock(&m->lock);
    lmc_l2_notify_deleted(m->base, gone, sizes, d);
    free(gone);
    free(sizes);
}

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

static bool mock_is_healthy(void *impl)
{
    mock_adapter *m = impl;
    return atomic_load(&m->worker_alive);
}

static void mock_report_status(void *impl, lmc_json *status)
{
    mock_adapter *m = impl;
    pthread_mutex_lock(&m->lock);
    size_t objects = lmc_keymap_size(m->entries);
    size_t locked = 0;
    for (size_t i = 0; i < lmc_keymap_capacity(m->entries); i++) {
        if (lmc_keymap_key_at(m->entries, i) != NULL &&
            ((mock_entry *)lmc_keymap_value_at(m->entries, i))->locks > 0)
            locked++;
    }
    size_t pending = m->queue.count;
    pthread_mutex_unlock(&m->lock);
    lmc_json_object_set(status, "num_objects", lmc_json_int((int64_t)objects));
    lmc_json_object_set(status, "locked_keys", lmc_json_int((int64_t)locked));
    lmc_json_object_set(status, "bandwidth_gb", lmc_json_float(m->bandwidth / GIB));
    lmc_json_object_set(status, "worker_alive", lmc_json_bool(atomic_load(&m->worker_alive)));
    lmc_json_object_set(status, "pending_tasks", lmc_json_int((int64_t)pending));
}

/* ------------------------------------------------------------------ */
/* Config, create, destroy                                              */
/* ------------------------------------------------------------------ */

static const char *const g_fields[] = {"max_size_gb", "mock_bandwidth_gb", NULL};

static lmc_status mock_check_config(const lmc_json *cfg, lmc_error *err)
{
    double d;
    lmc_status st = lmc_l2_config_check_fields(cfg, TYPE, g_fields, err);
    if (st == LMC_OK)
        st = lmc_l2_config_number(cfg, TYPE, "max_size_gb", true, 0.0, true, 0.0, &d, err);
    if (st == LMC_OK)
        st = lmc_l2_config_number(cfg, TYPE, "mock_bandwidth_gb", true, 0.0, true, 0.0, &d, err);
    if (st == LMC_OK && d * GIB < 1.0) /* compared as a double: a huge value must not overflow a cast */
        st = lmc_l2_config_bad_value(err, TYPE, "mock_bandwidth_gb",
                                     lmc_json_object_get(cfg, "mock_bandwidth_gb"),
                                     "at least one byte per second");
    return st;
}

static void mock_free(mock_adapter *m)
{
    if (m->entries != NULL) {
        for (size_t i = 0; i < lmc_keymap_capacity(m->entries); i++) {
            if (lmc_keymap_key_at(m->entries, i) == NULL)
                continue;
            mock_entry *e = lmc_keymap_value_at(m->entries, i);
            free(e->data);
            free(e);
        }
        lmc_keymap_destroy(m->entries);
    }
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free(m);
}

static lmc_status mock_create(lmc_l2_adapter *base, const lmc_json *cfg, void **impl,
                              lmc_error *err)
{
    double size_gb, bw_gb;
    mock_adapter *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type 'mock': out of memory");
    m->base = base;
    pthread_mutex_init(&m->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    /* Validated by the base already. */
    lmc_l2_config_number(cfg, TYPE, "max_size_gb", true, 0.0, true, 0.0, &size_gb, NULL);
    lmc_l2_config_number(cfg, TYPE, "mock_bandwidth_gb", true, 0.0, true, 0.0, &bw_gb, NULL);
    /* Clamped: converting a double beyond the range of uint64_t is undefined. */
    m->capacity = size_gb * GIB >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(size_gb * GIB);
    m->bandwidth = bw_gb * GIB;
    m->instance = atomic_fetch_add(&g_instances, 1);
    m->entries = lmc_keymap_create(0);
    if (m->entries == NULL) {
        mock_free(m);
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type 'mock': out of memory");
    }
    lmc_l2_adapter_set_capacity(base, m->capacity);
    atomic_store(&m->worker_alive, true);
    int e = pthread_create(&m->thread, NULL, worker_main, m);
    if (e != 0) {
        mock_free(m);
        return lmc_error_set(err, LMC_ERR_IO, "--l2-adapter: type 'mock': cannot start worker: %s",
                             strerror(e));
    }
    m->thread_started = true;
    /* Named from here rather than by the thread itself, so the name is set when create returns. */
    char name[16];
    snprintf(name, sizeof(name), "l2-mock-%u", m->instance % 10000u);
    pthread_setname_np(m->thread, name);
    *impl = m;
    return LMC_OK;
}

static void mock_destroy(void *impl)
{
    mock_adapter *m = impl;
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->thread_started)
        pthread_join(m->thread, NULL);
    /* Work already done keeps its result (its delay is cut short); queued work fails. */
    while (m->due != NULL) {
        lmc_l2_task *t = m->due;
        m->due = t->next;
        finish(m, t);
    }
    lmc_l2_task *t;
    while ((t = lmc_l2_task_queue_pop(&m->queue)) != NULL)
        lmc_l2_task_fail(m->base, t);
    mock_free(m);
}

const lmc_l2_adapter_ops lmc_l2_mock_ops = {
    .type = TYPE,
    .help = "in-memory store with simulated bandwidth: {\"type\": \"mock\", \"max_size_gb\": N, "
            "\"mock_bandwidth_gb\": GB_PER_S}",
    .check_config = mock_check_config,
    .create = mock_create,
    .submit_store = mock_submit_store,
    .submit_lookup = mock_submit_lookup,
    .submit_load = mock_submit_load,
    .submit_unlock = mock_submit_unlock,
    .delete_keys = mock_delete_keys,
    .report_status = mock_report_status,
    .is_healthy = mock_is_healthy,
    .destroy = mock_destroy,
    .replay_recovered = NULL,
};
