/*
 * mock.c -- the "mock" L2 adapter: an in-memory store with a simulated
 * bandwidth, for tests and replay experiments (spec 8.3).
 *
 * Owns: a copy of every stored object (key -> bytes, size, lookup lock
 * count) and the byte count against max_size_gb.
 *
 * Threads: one worker, "l2-mock-<n>" (l2/worker.h), runs every task,
 * lookups first. A store or load does its copy at once and then waits out
 * bytes / bandwidth before completing; like LMCache's asyncio sleep, that
 * wait does not block the worker: the task is deferred (the worker's
 * deadline-ordered list) while the worker serves other tasks. Unlock and
 * delete run on the caller's thread. `lock` guards the entries and `used`;
 * copies are made under it (this is a test tool: simplicity over
 * concurrency). Listener calls are made outside it.
 *
 * In virtual time (a manual runtime) the base's model already charges
 * bytes / bandwidth (its default bandwidth is mock_bandwidth_gb, its
 * default latency 0), so a task completes as soon as it runs: the
 * simulated bandwidth is honoured once, not twice.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/keymap.h"
#include "core/log.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

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

    pthread_mutex_t lock;
    lmc_keymap *entries; /* key -> mock_entry* */
    uint64_t used;

    lmc_l2_workers *workers;
} mock_adapter;

static atomic_uint g_instances; /* numbers the worker threads: l2-mock-0, ... */

/* ------------------------------------------------------------------ */
/* The worker's tasks                                                   */
/* ------------------------------------------------------------------ */

/* Report what a finished store or load changed, then its result (also the worker's finish hook). */
static void mock_finish(void *ud, lmc_l2_task *t)
{
    mock_adapter *m = ud;
    if (t->kind == LMC_L2_TASK_STORE)
        lmc_l2_notify_stored(m->base, t->keys, t->sizes, t->n_notify);
    else if (t->kind == LMC_L2_TASK_LOAD)
        lmc_l2_notify_accessed(m->base, t->keys, t->n_notify);
    lmc_l2_task_complete(m->base, t);
}

/*
 * Complete now, or park the task until bytes / bandwidth has passed since
 * start. In virtual time the model has charged that already.
 */
static void finish_after_delay(mock_adapter *m, lmc_l2_task *t, uint64_t bytes, uint64_t start_ns)
{
    uint64_t due = start_ns + (uint64_t)((double)bytes / m->bandwidth * 1e9);
    if (lmc_l2_workers_manual(m->workers) || due <= lmc_l2_adapter_now_ns(m->base))
        mock_finish(m, t);
    else
        lmc_l2_workers_defer(m->workers, t, due);
}

static bool run_store(void *ud, size_t index, lmc_l2_task *t)
{
    mock_adapter *m = ud;
    uint64_t start = lmc_l2_adapter_now_ns(m->base);
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
    return true;
}

static bool run_lookup(void *ud, size_t index, lmc_l2_task *t)
{
    mock_adapter *m = ud;
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
    return true;
}

static bool run_load(void *ud, size_t index, lmc_l2_task *t)
{
    mock_adapter *m = ud;
    uint64_t start = lmc_l2_adapter_now_ns(m->base);
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
    return true;
}

static lmc_status mock_submit(void *impl, lmc_l2_task_kind kind, uint64_t id,
                              const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    return lmc_l2_workers_enqueue(((mock_adapter *)impl)->workers, kind, id, keys, objs, n);
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
    return lmc_l2_workers_get_stats(m->workers).alive;
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
    pthread_mutex_unlock(&m->lock);
    lmc_l2_workers_stats ws = lmc_l2_workers_get_stats(m->workers);
    lmc_json_object_set(status, "num_objects", lmc_json_int((int64_t)objects));
    lmc_json_object_set(status, "locked_keys", lmc_json_int((int64_t)locked));
    lmc_json_object_set(status, "bandwidth_gb", lmc_json_float(m->bandwidth / GIB));
    lmc_json_object_set(status, "worker_alive", lmc_json_bool(ws.alive));
    lmc_json_object_set(status, "pending_tasks", lmc_json_int((int64_t)ws.queued));
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
    if (st == LMC_OK &&
        d * GIB < 1.0) /* compared as a double: a huge value must not overflow a cast */
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
    /* Validated by the base already. */
    lmc_l2_config_number(cfg, TYPE, "max_size_gb", true, 0.0, true, 0.0, &size_gb, NULL);
    lmc_l2_config_number(cfg, TYPE, "mock_bandwidth_gb", true, 0.0, true, 0.0, &bw_gb, NULL);
    /* Clamped: converting a double beyond the range of uint64_t is undefined. */
    m->capacity = size_gb * GIB >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)(size_gb * GIB);
    m->bandwidth = bw_gb * GIB;
    m->entries = lmc_keymap_create(0);
    if (m->entries == NULL) {
        mock_free(m);
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type 'mock': out of memory");
    }
    lmc_l2_adapter_set_capacity(base, m->capacity);
    lmc_l2_adapter_set_virtual_bandwidth_default(base, m->bandwidth);
    lmc_l2_workers_config wc = {
        .name = "l2-mock",
        .instances = &g_instances,
        .threads = 1,
        .base = base,
        .hooks = {.run = {[LMC_L2_TASK_LOOKUP] = run_lookup,
                          [LMC_L2_TASK_LOAD] = run_load,
                          [LMC_L2_TASK_STORE] = run_store},
                  .finish = mock_finish},
        .ud = m,
    };
    lmc_status st = lmc_l2_workers_start(&wc, &m->workers, err);
    if (st != LMC_OK) {
        mock_free(m);
        lmc_error_prefix(err, "--l2-adapter: type 'mock'");
        return st;
    }
    *impl = m;
    return LMC_OK;
}

static void mock_destroy(void *impl)
{
    mock_adapter *m = impl;
    if (m == NULL)
        return;
    /* Work already done keeps its result (its delay is cut short); queued work fails. */
    lmc_l2_workers_destroy(m->workers);
    mock_free(m);
}

const lmc_l2_adapter_ops lmc_l2_mock_ops = {
    .type = TYPE,
    .help = "in-memory store with simulated bandwidth: {\"type\": \"mock\", \"max_size_gb\": N, "
            "\"mock_bandwidth_gb\": GB_PER_S}",
    .check_config = mock_check_config,
    .create = mock_create,
    .submit = mock_submit,
    .submit_unlock = mock_submit_unlock,
    .delete_keys = mock_delete_keys,
    .report_status = mock_report_status,
    .is_healthy = mock_is_healthy,
    .destroy = mock_destroy,
    .replay_recovered = NULL,
    .virtual_latency_us = 0.0,
    .virtual_bandwidth_gbps = 0.0, /* mock_bandwidth_gb, set at create */
};
