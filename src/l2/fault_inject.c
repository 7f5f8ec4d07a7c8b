/*
 * fault_inject.c -- the "fault_inject" L2 adapter: wraps another adapter
 * and makes a configurable fraction of its stores, lookups and loads fail
 * or complete late, for reliability tests (as LMCache's fault_inject).
 *
 * Owns: the inner adapter (built from the "inner" config), the forwarded
 * tasks still running in it (`pending`; each task's tag is its id on the
 * inner), the seeded PRNG and the fault counters. The finished tasks held
 * back by an injected delay are deferred in its worker (l2/worker.h).
 *
 * Threads: submissions are forwarded to the inner adapter on the caller's
 * thread, the fault decisions drawn from the PRNG at the same time. One
 * worker, "l2-fi-<n>", waits in its idle hook on the inner adapter's three
 * eventfds, collects its results, applies the decided faults and completes
 * each task on this adapter's base (a delayed one when it is due). `lock`
 * guards the PRNG and `pending`; it is held across the inner submit so the
 * worker never sees an inner result before the task that maps it back.
 * Inner listener notifications are forwarded to this base (usage and
 * listeners) on the inner's thread.
 *
 * In virtual time (a manual runtime) the inner adapter is manual too and
 * there is no thread: the worker's next_event and run_event hooks stand in
 * for idle. The next event is the inner's (or now, when an inner result
 * already waits on its fds); running it delivers the inner's event and
 * collects what it completed. Delays are on the base's clock, so they are
 * virtual there.
 *
 * A failed lookup still ran in the inner adapter and locked what it found:
 * those locks are released here (the caller sees no hit, so never
 * unlocks). A failed store may have reached the inner adapter (a lost
 * acknowledgement); a failed load may have written the caller's buffers.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

#define COMPONENT "l2-fault-inject"
#define TYPE "fault_inject"

enum { FAULT_STORE_FAIL, FAULT_LOOKUP_FAIL, FAULT_LOAD_FAIL, FAULT_DELAYED, N_FAULTS };
static const char *const g_fault_names[N_FAULTS] = {"store_fail", "lookup_fail", "load_fail",
                                                    "delayed"};

/* lmc_l2_task.flags: the faults decided at submission. */
#define FI_FAIL 1u  /* reported as failed */
#define FI_DELAY 2u /* completed delay_ns after the inner finished */

typedef struct fi_adapter {
    lmc_l2_adapter *base;
    lmc_l2_adapter *inner; /* NULL once destroy has closed it */
    double rate[3];        /* fail rate per lmc_l2_task_kind */
    double delay_rate;
    uint64_t delay_ns;

    pthread_mutex_t lock;
    uint64_t rng;
    lmc_l2_task *pending; /* forwarded, not yet collected from the inner adapter */

    atomic_uint_fast64_t faults[N_FAULTS];
    atomic_uint_fast64_t forwarded;
    lmc_l2_workers *workers;
} fi_adapter;

static atomic_uint g_instances;

/* splitmix64: tiny, seedable, and good enough to pick which tasks fail. Caller holds lock. */
static double next_uniform(fi_adapter *f)
{
    uint64_t z = (f->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53; /* [0, 1) */
}

/* ------------------------------------------------------------------ */
/* Inner listener: the inner's usage changes are this adapter's         */
/* ------------------------------------------------------------------ */

static void fwd_stored(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    lmc_l2_notify_stored(((fi_adapter *)ud)->base, keys, sizes, n);
}

static void fwd_accessed(void *ud, const lmc_object_key *keys, size_t n)
{
    lmc_l2_notify_accessed(((fi_adapter *)ud)->base, keys, n);
}

static void fwd_deleted(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    lmc_l2_notify_deleted(((fi_adapter *)ud)->base, keys, sizes, n);
}

/* ------------------------------------------------------------------ */
/* The worker                                                           */
/* ------------------------------------------------------------------ */

/* Release the inner locks a lookup took, when it is reported as failed. */
static void release_lookup_locks(fi_adapter *f, lmc_l2_task *t)
{
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (lmc_bitmap_test(&t->bitmap, i))
            t->keys[m++] = t->keys[i]; /* m <= i: compacts in place */
    }
    if (m > 0)
        lmc_l2_adapter_submit_unlock(f->inner, t->keys, m);
}

/*
 * Report t on this adapter's base (as a failure when so decided) and free
 * it; also the worker's finish hook for the delayed ones.
 */
static void fi_finish(void *ud, lmc_l2_task *t)
{
    fi_adapter *f = ud;
    /* Once destroy has closed the inner, its locks are gone: no hit can be read any more. */
    if (f->inner == NULL && t->kind == LMC_L2_TASK_LOOKUP)
        t->flags |= FI_FAIL;
    if ((t->flags & FI_FAIL) == 0) {
        lmc_l2_task_complete(f->base, t);
        return;
    }
    if (t->kind == LMC_L2_TASK_LOOKUP && f->inner != NULL)
        release_lookup_locks(f, t);
    lmc_l2_task_fail(f->base, t);
}

/* The inner result of t is in: complete it now or hold it back. Caller does not hold f->lock. */
static void collected(fi_adapter *f, lmc_l2_task *t)
{
    if ((t->flags & FI_DELAY) != 0)
        lmc_l2_workers_defer(f->workers, t, lmc_l2_adapter_now_ns(f->base) + f->delay_ns);
    else
        fi_finish(f, t);
}

/* Take every inner result that has arrived, with its task out of `pending`. */
static lmc_l2_task *collect(fi_adapter *f)
{
    lmc_l2_task *done = NULL;
    lmc_l2_store_result *r = NULL;
    size_t nr = lmc_l2_adapter_pop_completed_stores(f->inner, &r);
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < nr; i++) {
        lmc_l2_task **pp = &f->pending;
        while (*pp != NULL && !((*pp)->kind == LMC_L2_TASK_STORE && (*pp)->tag == r[i].task_id))
            pp = &(*pp)->next;
        if (*pp == NULL) {
            LMC_ERROR(COMPONENT, "inner store task %" PRIu64 ": no matching task", r[i].task_id);
            continue;
        }
        lmc_l2_task *t = *pp;
        *pp = t->next;
        t->result = r[i].result;
        t->next = done;
        done = t;
    }
    for (lmc_l2_task **pp = &f->pending; *pp != NULL;) {
        lmc_l2_task *t = *pp;
        lmc_bitmap bm;
        bool got =
            t->kind == LMC_L2_TASK_LOOKUP ? lmc_l2_adapter_take_lookup_result(f->inner, t->tag, &bm)
            : t->kind == LMC_L2_TASK_LOAD ? lmc_l2_adapter_take_load_result(f->inner, t->tag, &bm)
                                          : false;
        if (!got) {
            pp = &t->next;
            continue;
        }
        *pp = t->next;
        lmc_bitmap_free(&t->bitmap); /* the all-clear one from creation */
        t->bitmap = bm;
        t->next = done;
        done = t;
    }
    pthread_mutex_unlock(&f->lock);
    free(r);
    return done;
}

/* Complete or hold back every inner result that has arrived. */
static void collect_and_complete(fi_adapter *f)
{
    /* Called after the fds were drained: a result arriving later signals them again. */
    lmc_l2_task *done = collect(f);
    while (done != NULL) {
        lmc_l2_task *t = done;
        done = t->next;
        collected(f, t);
    }
}

/*
 * The worker's idle hook: wait for an inner result (or the worker's wake-up,
 * or the next delayed task's due time) and handle what arrived.
 */
static bool fi_idle(void *ud, size_t index, int wake_fd, uint64_t deadline_ns)
{
    fi_adapter *f = ud;
    struct pollfd fds[4] = {
        {wake_fd, POLLIN, 0},
        {lmc_l2_adapter_store_fd(f->inner), POLLIN, 0},
        {lmc_l2_adapter_lookup_fd(f->inner), POLLIN, 0},
        {lmc_l2_adapter_load_fd(f->inner), POLLIN, 0},
    };
    int timeout_ms = -1;
    if (deadline_ns != LMC_L2_NO_DEADLINE) {
        uint64_t now = lmc_l2_adapter_now_ns(f->base);
        uint64_t ms = deadline_ns > now ? (deadline_ns - now + 999999) / 1000000 : 0;
        timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
    }
    if (poll(fds, 4, timeout_ms) < 0 && errno != EINTR) {
        LMC_ERROR(COMPONENT, "poll: %s", strerror(errno));
        return false;
    }
    for (size_t i = 1; i < 4; i++) {
        if (fds[i].revents & POLLIN)
            lmc_l2_drain_fd(fds[i].fd);
    }
    collect_and_complete(f);
    return true;
}

/* Manual mode: whether an inner result is waiting (an inner fd is readable). */
static bool inner_signalled(fi_adapter *f)
{
    struct pollfd fds[3] = {
        {lmc_l2_adapter_store_fd(f->inner), POLLIN, 0},
        {lmc_l2_adapter_lookup_fd(f->inner), POLLIN, 0},
        {lmc_l2_adapter_load_fd(f->inner), POLLIN, 0},
    };
    return poll(fds, 3, 0) > 0;
}

/* The worker's next_event hook (manual mode): the inner's next event, or now. */
static uint64_t fi_next_event(void *ud)
{
    fi_adapter *f = ud;
    if (f->inner == NULL)
        return LMC_L2_NO_DEADLINE;
    if (inner_signalled(f))
        return lmc_l2_adapter_now_ns(f->base);
    return lmc_l2_adapter_next_event_ns(f->inner);
}

/* The worker's run_event hook (manual mode): deliver the inner's event, then collect. */
static void fi_run_event(void *ud, uint64_t now_ns)
{
    fi_adapter *f = ud;
    if (f->inner == NULL)
        return;
    lmc_l2_adapter_run_next(f->inner, now_ns);
    lmc_l2_drain_fd(lmc_l2_adapter_store_fd(f->inner));
    lmc_l2_drain_fd(lmc_l2_adapter_lookup_fd(f->inner));
    lmc_l2_drain_fd(lmc_l2_adapter_load_fd(f->inner));
    collect_and_complete(f);
}

/* ------------------------------------------------------------------ */
/* Submission                                                           */
/* ------------------------------------------------------------------ */

static lmc_status fi_submit(void *impl, lmc_l2_task_kind kind, uint64_t id,
                            const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    fi_adapter *f = impl;
    /* Only a lookup keeps its keys: to release the inner locks when it is reported as failed. */
    lmc_l2_task *t = lmc_l2_task_new(kind, id, kind == LMC_L2_TASK_LOOKUP ? keys : NULL, NULL, n);
    if (t == NULL)
        return LMC_ERR_NOMEM;
    pthread_mutex_lock(&f->lock);
    lmc_status st = lmc_l2_workers_stopping(f->workers) ? LMC_ERR_CLOSED : LMC_OK;
    if (st == LMC_OK) {
        if (next_uniform(f) < f->rate[kind])
            t->flags |= FI_FAIL;
        if (next_uniform(f) < f->delay_rate)
            t->flags |= FI_DELAY;
        switch (kind) {
        case LMC_L2_TASK_STORE:
            st = lmc_l2_adapter_submit_store(f->inner, keys, objs, n, &t->tag);
            break;
        case LMC_L2_TASK_LOOKUP:
            st = lmc_l2_adapter_submit_lookup(f->inner, keys, n, &t->tag);
            break;
        case LMC_L2_TASK_LOAD:
            st = lmc_l2_adapter_submit_load(f->inner, keys, objs, n, &t->tag);
            break;
        }
    }
    if (st == LMC_OK) {
        t->next = f->pending;
        f->pending = t;
        /* Counted before unlocking: from then on the worker may complete and free t. */
        static const int fault_of_kind[3] = {FAULT_LOOKUP_FAIL, FAULT_LOAD_FAIL, FAULT_STORE_FAIL};
        atomic_fetch_add(&f->forwarded, 1);
        if (t->flags & FI_FAIL)
            atomic_fetch_add(&f->faults[fault_of_kind[kind]], 1);
        if (t->flags & FI_DELAY)
            atomic_fetch_add(&f->faults[FAULT_DELAYED], 1);
    }
    pthread_mutex_unlock(&f->lock);
    if (st != LMC_OK)
        lmc_l2_task_free(t);
    return st;
}

static void fi_submit_unlock(void *impl, const lmc_object_key *keys, size_t n)
{
    lmc_l2_adapter_submit_unlock(((fi_adapter *)impl)->inner, keys, n);
}

static void fi_delete_keys(void *impl, const lmc_object_key *keys, size_t n)
{
    lmc_l2_adapter_delete(((fi_adapter *)impl)->inner, keys, n);
}

static void fi_replay_recovered(void *impl, const lmc_l2_listener *l)
{
    lmc_l2_adapter_replay_recovered(((fi_adapter *)impl)->inner, l);
}

/* ------------------------------------------------------------------ */
/* Status                                                               */
/* ------------------------------------------------------------------ */

static bool fi_is_healthy(void *impl)
{
    fi_adapter *f = impl;
    return lmc_l2_workers_get_stats(f->workers).alive && lmc_l2_adapter_is_healthy(f->inner);
}

static void fi_report_status(void *impl, lmc_json *status)
{
    fi_adapter *f = impl;
    size_t pending = 0;
    pthread_mutex_lock(&f->lock);
    for (const lmc_l2_task *t = f->pending; t != NULL; t = t->next)
        pending++;
    pthread_mutex_unlock(&f->lock);
    lmc_l2_workers_stats ws = lmc_l2_workers_get_stats(f->workers);
    lmc_json *faults = lmc_json_object();
    uint64_t total = 0;
    for (size_t i = 0; i < N_FAULTS; i++) {
        uint64_t v = atomic_load(&f->faults[i]);
        total += v;
        if (faults != NULL)
            lmc_json_object_set(faults, g_fault_names[i], lmc_json_int((int64_t)v));
    }
    if (faults != NULL)
        lmc_json_object_set(faults, "total", lmc_json_int((int64_t)total));
    lmc_json_object_set(status, "faults_injected", faults);
    lmc_json_object_set(status, "tasks_forwarded",
                        lmc_json_int((int64_t)atomic_load(&f->forwarded)));
    lmc_json_object_set(status, "pending_tasks", lmc_json_int((int64_t)pending));
    lmc_json_object_set(status, "delayed_tasks", lmc_json_int((int64_t)ws.deferred));
    lmc_json_object_set(status, "worker_alive", lmc_json_bool(ws.alive));
    lmc_json_object_set(status, "inner", lmc_l2_adapter_report_status(f->inner));
}

/* ------------------------------------------------------------------ */
/* Config, create, destroy                                              */
/* ------------------------------------------------------------------ */

static const char *const g_fields[] = {"inner",
                                       "store_fail_rate",
                                       "lookup_fail_rate",
                                       "load_fail_rate",
                                       "delay_rate",
                                       "delay_ms",
                                       "seed",
                                       NULL};
static const char *const g_rate_fields[] = {"lookup_fail_rate", "load_fail_rate", "store_fail_rate",
                                            "delay_rate"};

/* A number in [0, 1]; 0 when absent. */
static lmc_status rate(const lmc_json *cfg, const char *field, double *out, lmc_error *err)
{
    const lmc_json *v = lmc_json_object_get(cfg, field);
    *out = 0.0;
    if (v == NULL)
        return LMC_OK;
    lmc_json_type ty = lmc_json_type_of(v);
    double d = lmc_json_get_number(v);
    if ((ty != LMC_JSON_INT && ty != LMC_JSON_FLOAT) || !(d >= 0.0 && d <= 1.0))
        return lmc_l2_config_bad_value(err, TYPE, field, v, "a number in [0, 1]");
    *out = d;
    return LMC_OK;
}

/* Every field parsed into f (when not NULL); the inner config is checked too. */
static lmc_status parse(const lmc_json *cfg, fi_adapter *f, lmc_error *err)
{
    lmc_status st = lmc_l2_config_check_fields(cfg, TYPE, g_fields, err);
    if (st != LMC_OK)
        return st;
    const lmc_json *inner = lmc_json_object_get(cfg, "inner");
    if (inner == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--l2-adapter: field 'inner' of type '" TYPE "' is required");
    if (lmc_json_type_of(inner) != LMC_JSON_OBJECT)
        return lmc_l2_config_bad_value(err, TYPE, "inner", inner, "an adapter object");
    if ((st = lmc_l2_check_config(inner, err)) != LMC_OK)
        return st;
    double rates[4], delay_ms;
    for (size_t i = 0; i < 4; i++) {
        if ((st = rate(cfg, g_rate_fields[i], &rates[i], err)) != LMC_OK)
            return st;
    }
    st = lmc_l2_config_number(cfg, TYPE, "delay_ms", false, 0.0, false, 0.0, &delay_ms, err);
    if (st == LMC_OK && delay_ms > 3600e3)
        st = lmc_l2_config_bad_value(err, TYPE, "delay_ms", lmc_json_object_get(cfg, "delay_ms"),
                                     "a number in [0, 3600000]");
    if (st != LMC_OK)
        return st;
    const lmc_json *seed = lmc_json_object_get(cfg, "seed");
    if (seed != NULL && lmc_json_type_of(seed) != LMC_JSON_INT)
        return lmc_l2_config_bad_value(err, TYPE, "seed", seed, "an integer");
    if (f != NULL) {
        memcpy(f->rate, rates, sizeof(f->rate)); /* indexed by lmc_l2_task_kind */
        f->delay_rate = rates[3];
        f->delay_ns = (uint64_t)(delay_ms * 1e6);
        f->rng = seed != NULL ? (uint64_t)lmc_json_get_int(seed) : 0;
    }
    return LMC_OK;
}

static lmc_status fi_check_config(const lmc_json *cfg, lmc_error *err)
{
    return parse(cfg, NULL, err);
}

static void fi_free(fi_adapter *f)
{
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* Usage the inner accounted before this adapter listened (recovered data). */
static void count_recovered(void *ud, const lmc_object_key *keys, const uint64_t *sizes, size_t n)
{
    lmc_l2_notify_stored(((fi_adapter *)ud)->base, keys, sizes, n);
}

static lmc_status fi_create(lmc_l2_adapter *base, const lmc_json *cfg, void **impl, lmc_error *err)
{
    fi_adapter *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "--l2-adapter: type '" TYPE "': out of memory");
    f->base = base;
    pthread_mutex_init(&f->lock, NULL);
    lmc_status st = parse(cfg, f, err);
    if (st != LMC_OK)
        goto fail;
    /* The inner runs on this adapter's clock and executor. */
    st = lmc_l2_adapter_create_ex(lmc_json_object_get(cfg, "inner"), lmc_l2_adapter_runtime(base),
                                  &f->inner, err);
    if (st != LMC_OK)
        goto fail;
    /* Registered before any task exists, so every inner change reaches this base. */
    lmc_l2_listener fwd = {fwd_stored, fwd_accessed, fwd_deleted, f};
    lmc_l2_listener rec = {count_recovered, NULL, NULL, f};
    lmc_l2_adapter_add_listener(f->inner, &fwd);
    lmc_l2_adapter_replay_recovered(f->inner, &rec);
    lmc_l2_adapter_set_capacity(base, lmc_l2_adapter_get_usage(f->inner).capacity_bytes);
    /* No run hook: tasks are forwarded, never queued; the worker waits on the inner's fds. */
    lmc_l2_workers_config wc = {
        .name = "l2-fi",
        .instances = &g_instances,
        .threads = 1,
        .base = base,
        .hooks = {.finish = fi_finish,
                  .idle = fi_idle,
                  .next_event = fi_next_event,
                  .run_event = fi_run_event},
        .ud = f,
    };
    if ((st = lmc_l2_workers_start(&wc, &f->workers, err)) != LMC_OK) {
        lmc_error_prefix(err, "--l2-adapter: type '" TYPE "'");
        goto fail;
    }
    *impl = f;
    return LMC_OK;

fail:
    lmc_l2_adapter_destroy(f->inner);
    fi_free(f);
    return st;
}

static void fi_destroy(void *impl)
{
    fi_adapter *f = impl;
    if (f == NULL)
        return;
    lmc_l2_workers_stop(f->workers);
    /*
     * A submission that found the worker running holds f->lock until its
     * task is in `pending`: taking the lock once waits for the last one, and
     * every later one sees the worker stopping.
     */
    pthread_mutex_lock(&f->lock);
    lmc_l2_task *pending = f->pending;
    f->pending = NULL;
    pthread_mutex_unlock(&f->lock);
    /*
     * The inner goes first: its destroy ends every access to the callers'
     * buffers (and may still notify this base through the listener, so f
     * stays alive). Only then are the tasks reported here, so no caller
     * frees a buffer the inner still uses. Results held back by a delay
     * keep their value (lookups excepted: their locks went with the inner);
     * tasks still in the inner fail.
     */
    lmc_l2_adapter_destroy(f->inner);
    f->inner = NULL;
    lmc_l2_workers_destroy(f->workers);
    while (pending != NULL) {
        lmc_l2_task *t = pending;
        pending = t->next;
        lmc_l2_task_fail(f->base, t);
    }
    fi_free(f);
}

const lmc_l2_adapter_ops lmc_l2_fault_inject_ops = {
    .type = TYPE,
    .help = "wraps another adapter and injects failures and delays: {\"type\": \"fault_inject\", "
            "\"inner\": {...}, \"store_fail_rate\": P, \"lookup_fail_rate\": P, "
            "\"load_fail_rate\": P, \"delay_rate\": P, \"delay_ms\": MS, \"seed\": N}",
    .check_config = fi_check_config,
    .create = fi_create,
    .submit = fi_submit,
    .submit_unlock = fi_submit_unlock,
    .delete_keys = fi_delete_keys,
    .report_status = fi_report_status,
    .is_healthy = fi_is_healthy,
    .destroy = fi_destroy,
    .replay_recovered = fi_replay_recovered,
    /* Unused: tasks are forwarded, and the inner's model times them. */
    .virtual_latency_us = 0.0,
    .virtual_bandwidth_gbps = 0.0,
};
