/*
 * store_controller.c -- the L1 -> L2 store loop (see store_controller.h).
 *
 * Owns: the queue of keys whose L1 write finished, the in-flight store tasks
 * (one list per adapter, ascending task id), the wake-up eventfd and the
 * "store-ctl" thread.
 *
 * Threads and locks:
 *  - on_l1_event runs on writer threads *inside the L1 mutex*; it takes only
 *    `mu`, appends, and signals the eventfd. It never calls back into L1.
 *  - `mu` guards the queue and the counters busy() and report_status read
 *    (queued, being_processed, in_flight). It is never held across a call
 *    into L1 or an adapter, so the lock order L1 -> mu cannot invert.
 *  - The task lists are touched only by the controller thread (and by
 *    destroy, after the join), so they need no lock.
 *
 * The work is one step (store_step: the queue, then the completions of
 * every adapter with tasks in flight). The thread runs it after each wake-up
 * (a finished write, a completion, or the 500 ms sweep); in manual mode
 * there is no thread and the owner calls lmc_store_controller_step, and the
 * listener does not signal the eventfd (nobody waits on it).
 *
 * Store policies ("default", "skip_l1") both send every key to every
 * adapter; skip_l1 then deletes the keys from L1 after a successful store.
 */
#include "storage/store_controller.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/keyvec.h"
#include "core/log.h"
#include "core/names.h"

#define LOG_COMP "store-ctl"
#define POLL_TIMEOUT_MS 500

typedef enum store_policy {
    STORE_POLICY_DEFAULT,
    STORE_POLICY_SKIP_L1,
} store_policy;

/* One submitted store: the keys it read-locked (once each) in L1. */
typedef struct store_task {
    uint64_t id;
    lmc_object_key *keys; /* owned */
    size_t n;
    uint64_t bytes;
    bool done;
    int64_t result;
} store_task;

/* In submission order; adapters hand out ascending ids, so it stays sorted. */
typedef struct task_list {
    store_task *v;
    size_t len;
    size_t cap;
} task_list;

struct lmc_store_controller {
    lmc_l1_manager *l1;
    lmc_l2_adapter **adapters; /* borrowed adapters, our own array */
    size_t n_adapters;
    store_policy policy;
    bool manual; /* no thread: the owner calls lmc_store_controller_step */

    int wake_fd;
    pthread_t thread;
    bool thread_started;
    atomic_bool thread_alive;
    atomic_bool stop;

    pthread_mutex_t mu;
    lmc_keyvec queue;       /* guarded by mu */
    size_t being_processed; /* keys taken from the queue, not yet submitted; mu */
    size_t in_flight;       /* tasks submitted, not yet finalized; mu */
    uint64_t dropped_keys;  /* queue appends that failed (no memory); mu */

    task_list *tasks; /* one per adapter; controller thread only */

    atomic_uint_fast64_t stored_keys_total;
    atomic_uint_fast64_t stored_bytes_total; /* what the adapters report writing */
    atomic_uint_fast64_t failed_tasks_total;
};

/* ---------------------------------------------------------------------- */
/* Policy                                                                  */
/* ---------------------------------------------------------------------- */

/* The one list of store policies, indexed by store_policy. */
const char *const lmc_store_policy_names[] = {
    [STORE_POLICY_DEFAULT] = "default",
    [STORE_POLICY_SKIP_L1] = "skip_l1",
};
const size_t lmc_store_policy_count =
    sizeof(lmc_store_policy_names) / sizeof(lmc_store_policy_names[0]);

static lmc_status parse_policy(const char *name, store_policy *out, lmc_error *err)
{
    size_t i = STORE_POLICY_DEFAULT; /* NULL means the default */
    lmc_status st = name == NULL ? LMC_OK
                                 : lmc_names_parse(lmc_store_policy_names, lmc_store_policy_count,
                                                   "store policy", name, strlen(name), &i, err);
    *out = (store_policy)i;
    return st;
}

lmc_status lmc_store_policy_check(const char *name, lmc_error *err)
{
    store_policy p = STORE_POLICY_DEFAULT;
    return parse_policy(name, &p, err);
}

/* ---------------------------------------------------------------------- */
/* The L1 listener (under the L1 mutex: append and signal only)            */
/* ---------------------------------------------------------------------- */

static void wake(int fd)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is saturated: the thread is woken anyway. */
    ssize_t r = write(fd, &one, sizeof(one));
    (void)r;
}

static void on_l1_event(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    /*
     * Only write_finished: finish_write_and_reserve_read is a prefetch from
     * L2, and storing it back would be wasted work. ud is not touched for
     * other events.
     */
    if (ev != LMC_L1_EV_WRITE_FINISHED || n == 0)
        return;
    lmc_store_controller *c = ud;
    if (atomic_load(&c->stop))
        return; /* stopping: nothing will store these */
    pthread_mutex_lock(&c->mu);
    if (lmc_keyvec_append(&c->queue, keys, n) != LMC_OK)
        c->dropped_keys += n; /* logged by the thread; never log under the L1 mutex */
    pthread_mutex_unlock(&c->mu);
    if (!c->manual)
        wake(c->wake_fd);
}

/* ---------------------------------------------------------------------- */
/* Task bookkeeping (controller thread only)                               */
/* ---------------------------------------------------------------------- */

static lmc_status task_list_add(task_list *tl, const store_task *t)
{
    if (tl->len == tl->cap) {
        size_t cap = tl->cap ? tl->cap * 2 : 8;
        store_task *v = realloc(tl->v, cap * sizeof(*v));
        if (v == NULL)
            return LMC_ERR_NOMEM;
        tl->v = v;
        tl->cap = cap;
    }
    /* Ids ascend per adapter; insert in place should one ever come early. */
    size_t pos = tl->len;
    while (pos > 0 && tl->v[pos - 1].id > t->id)
        pos--;
    memmove(&tl->v[pos + 1], &tl->v[pos], (tl->len - pos) * sizeof(*tl->v));
    tl->v[pos] = *t;
    tl->len++;
    return LMC_OK;
}

static store_task *task_list_find(task_list *tl, uint64_t id)
{
    size_t lo = 0, hi = tl->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tl->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < tl->len && tl->v[lo].id == id ? &tl->v[lo] : NULL;
}

static void release_read_locks(lmc_store_controller *c, const lmc_object_key *keys, size_t n)
{
    if (n == 0)
        return;
    lmc_l1_error stack_errs[64];
    lmc_l1_error *errs = n <= 64 ? stack_errs : malloc(n * sizeof(*errs));
    if (errs == NULL) {
        /* finish_read needs an errs array: release in stack-sized pieces. */
        for (size_t i = 0; i < n; i += 64)
            release_read_locks(c, keys + i, n - i < 64 ? n - i : 64);
        return;
    }
    lmc_l1_finish_read(c->l1, keys, n, 0, errs);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += errs[i] != LMC_L1_SUCCESS;
    /* An expired read TTL (or a forced delete) shows up here; not an error of ours. */
    if (bad > 0)
        LMC_DEBUG(LOG_COMP, "finish_read after L2 store: %zu of %zu keys not released (%s)", bad, n,
                  lmc_l1_error_name(errs[0]));
    if (errs != stack_errs)
        free(errs);
}

static void delete_from_l1(lmc_store_controller *c, const lmc_object_key *keys, size_t n)
{
    lmc_l1_error *errs = malloc(n * sizeof(*errs));
    lmc_l1_delete(c->l1, keys, n, false, errs);
    if (errs == NULL)
        return;
    size_t deleted = 0;
    for (size_t i = 0; i < n; i++)
        deleted += errs[i] == LMC_L1_SUCCESS;
    /* Keys still locked (a reader, or another adapter's store) stay in L1. */
    LMC_DEBUG(LOG_COMP, "skip_l1: deleted %zu of %zu stored keys from L1", deleted, n);
    free(errs);
}

/* Release the task's locks and apply the policy. Frees the task's keys. */
static void finalize_task(lmc_store_controller *c, size_t ai, store_task *t)
{
    release_read_locks(c, t->keys, t->n);
    if (lmc_l2_store_ok(t->result)) {
        atomic_fetch_add(&c->stored_keys_total, t->n);
        atomic_fetch_add(&c->stored_bytes_total, (uint64_t)t->result);
        LMC_DEBUG(LOG_COMP, "L2 store task %llu on adapter %zu (%s): %zu keys, %lld bytes written",
                  (unsigned long long)t->id, ai, lmc_l2_adapter_type(c->adapters[ai]), t->n,
                  (long long)t->result);
        if (c->policy == STORE_POLICY_SKIP_L1)
            delete_from_l1(c, t->keys, t->n);
    } else {
        atomic_fetch_add(&c->failed_tasks_total, 1);
        LMC_WARN(LOG_COMP,
                 "L2 store task %llu on adapter %zu (%s) failed: %zu keys not stored "
                 "(no retry)",
                 (unsigned long long)t->id, ai, lmc_l2_adapter_type(c->adapters[ai]), t->n);
    }
    free(t->keys);
    t->keys = NULL;
}

/* ---------------------------------------------------------------------- */
/* New keys -> store tasks                                                 */
/* ---------------------------------------------------------------------- */

static void log_lock_failures(size_t ai, const lmc_l2_adapter *a, const lmc_object_key *keys,
                              const lmc_l1_error *errs, size_t n, size_t failed)
{
    size_t first = 0;
    while (first < n && errs[first] == LMC_L1_SUCCESS)
        first++;
    char kbuf[256];
    lmc_object_key_format(&keys[first], kbuf, sizeof(kbuf));
    /* One line per batch, not per key: a burst of deletes must not flood the log. */
    LMC_WARN(LOG_COMP,
             "l2_store: %zu of %zu keys could not be read-locked in L1 for adapter %zu "
             "(%s) and are not stored (first: %s: %s)",
             failed, n, ai, lmc_l2_adapter_type(a), kbuf, lmc_l1_error_name(errs[first]));
}

/*
 * Read-lock a group's keys and submit one store task to adapter ai. Returns
 * 1 when a task is now in flight, 0 otherwise.
 */
static size_t store_group_on(lmc_store_controller *c, size_t ai, const lmc_object_key *keys,
                             size_t n)
{
    lmc_l2_adapter *a = c->adapters[ai];
    lmc_l1_error *errs = malloc(n * sizeof(*errs));
    lmc_memory_obj *objs = malloc(n * sizeof(*objs));
    lmc_object_key *good = malloc(n * sizeof(*good));
    size_t submitted = 0;
    if (errs == NULL || objs == NULL || good == NULL) {
        LMC_WARN(LOG_COMP, "l2_store: out of memory; %zu keys not stored to adapter %zu (%s)", n,
                 ai, lmc_l2_adapter_type(a));
        goto out;
    }

    lmc_l1_reserve_read(c->l1, keys, n, 0, errs, objs);
    size_t m = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue;
        good[m] = keys[i];
        objs[m] = objs[i];
        bytes += objs[i].size;
        m++;
    }
    if (m < n)
        log_lock_failures(ai, a, keys, errs, n, n - m);
    if (m == 0)
        goto out;

    uint64_t id = 0;
    lmc_error err;
    lmc_error_clear(&err);
    lmc_status st = lmc_l2_adapter_submit_store(a, good, objs, m, &id);
    if (st != LMC_OK) {
        atomic_fetch_add(&c->failed_tasks_total, 1);
        LMC_WARN(LOG_COMP, "l2_store: submitting %zu keys to adapter %zu (%s) failed: %s", m, ai,
                 lmc_l2_adapter_type(a), lmc_status_str(st));
        release_read_locks(c, good, m);
        goto out;
    }
    store_task t = {.id = id, .keys = good, .n = m, .bytes = bytes};
    if (task_list_add(&c->tasks[ai], &t) != LMC_OK) {
        /*
         * We cannot track it, so we can never release its locks when it
         * completes: release them now. The adapter still has the objects
         * for a moment; the pool outlives it, so at worst a torn copy is
         * stored, never a crash.
         */
        LMC_WARN(LOG_COMP,
                 "l2_store: out of memory tracking task %llu on adapter %zu; its read "
                 "locks are released early",
                 (unsigned long long)id, ai);
        release_read_locks(c, good, m);
        goto out;
    }
    LMC_DEBUG(LOG_COMP, "L2 store task %llu submitted to adapter %zu (%s): %zu keys, %llu bytes",
              (unsigned long long)id, ai, lmc_l2_adapter_type(a), m, (unsigned long long)bytes);
    good = NULL; /* owned by the task now */
    submitted = 1;
out:
    free(errs);
    free(objs);
    free(good);
    return submitted;
}

static bool same_shape_group(const lmc_object_key *a, const lmc_object_key *b)
{
    /* model_name is interned: equal names are the same pointer. */
    return a->model_name == b->model_name && a->kv_rank == b->kv_rank;
}

/*
 * Group keys by (model_name, kv_rank) -- one layout per group -- keeping
 * request order inside a group, and store every group on every adapter
 * (both policies target all adapters). Returns tasks submitted.
 */
static size_t process_new_keys(lmc_store_controller *c, const lmc_object_key *keys, size_t n)
{
    bool *taken = calloc(n, sizeof(*taken));
    lmc_object_key *group = malloc(n * sizeof(*group));
    size_t submitted = 0;
    if (taken == NULL || group == NULL) {
        LMC_WARN(LOG_COMP, "l2_store: out of memory; %zu keys not stored", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (taken[i])
            continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++) {
            if (!taken[j] && same_shape_group(&keys[i], &keys[j])) {
                taken[j] = true;
                group[m++] = keys[j];
            }
        }
        for (size_t ai = 0; ai < c->n_adapters; ai++)
            submitted += store_group_on(c, ai, group, m);
    }
out:
    free(taken);
    free(group);
    return submitted;
}

/* Store what the queue holds; false when it was empty (nothing done). */
static bool handle_queue(lmc_store_controller *c)
{
    lmc_keyvec batch = LMC_KEYVEC_INIT;
    pthread_mutex_lock(&c->mu);
    if (c->queue.len == 0 && c->dropped_keys == 0) {
        pthread_mutex_unlock(&c->mu);
        return false;
    }
    batch = c->queue;
    c->queue = (lmc_keyvec)LMC_KEYVEC_INIT;
    c->being_processed = batch.len;
    uint64_t dropped = c->dropped_keys;
    c->dropped_keys = 0;
    pthread_mutex_unlock(&c->mu);

    if (dropped > 0)
        LMC_WARN(LOG_COMP,
                 "l2_store: %llu finished writes were not queued (out of memory) and "
                 "will not be stored",
                 (unsigned long long)dropped);
    size_t submitted = batch.len > 0 ? process_new_keys(c, batch.keys, batch.len) : 0;
    lmc_keyvec_free(&batch);

    /* One update, so busy() never reads 0 between "taken" and "in flight". */
    pthread_mutex_lock(&c->mu);
    c->being_processed = 0;
    c->in_flight += submitted;
    pthread_mutex_unlock(&c->mu);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Completions                                                             */
/* ---------------------------------------------------------------------- */

/* Finalize adapter ai's completed tasks; returns how many were. */
static size_t handle_completions(lmc_store_controller *c, size_t ai)
{
    lmc_l2_adapter *a = c->adapters[ai];
    task_list *tl = &c->tasks[ai];
    lmc_l2_store_result *res = NULL;
    size_t nres = lmc_l2_adapter_pop_completed_stores(a, &res);
    if (nres == 0) {
        free(res);
        return 0;
    }
    for (size_t i = 0; i < nres; i++) {
        store_task *t = task_list_find(tl, res[i].task_id);
        if (t == NULL) {
            LMC_WARN(LOG_COMP, "adapter %zu (%s) reported unknown store task %llu; ignored", ai,
                     lmc_l2_adapter_type(a), (unsigned long long)res[i].task_id);
            continue;
        }
        t->done = true;
        t->result = res[i].result;
    }
    free(res);

    /* Finalize finished tasks and compact the list in one pass. */
    size_t kept = 0, finalized = 0;
    for (size_t i = 0; i < tl->len; i++) {
        if (tl->v[i].done) {
            finalize_task(c, ai, &tl->v[i]);
            finalized++;
        } else {
            tl->v[kept++] = tl->v[i];
        }
    }
    tl->len = kept;

    pthread_mutex_lock(&c->mu);
    c->in_flight -= finalized;
    pthread_mutex_unlock(&c->mu);
    return finalized;
}

/*
 * The controller's work, whoever runs it: store the queued keys, then
 * finalize the completed tasks of every adapter with tasks in flight (an
 * adapter without a result costs one locked pop). Returns whether anything
 * was done.
 */
static bool store_step(lmc_store_controller *c)
{
    bool progress = handle_queue(c);
    for (size_t i = 0; i < c->n_adapters; i++) {
        if (c->tasks[i].len > 0)
            progress |= handle_completions(c, i) > 0;
    }
    return progress;
}

/* ---------------------------------------------------------------------- */
/* The thread                                                              */
/* ---------------------------------------------------------------------- */

static void drain_wake_fd(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

static void *store_thread(void *arg)
{
    lmc_store_controller *c = arg;
    pthread_setname_np(pthread_self(), "store-ctl");
    size_t nfds = 1 + c->n_adapters;
    struct pollfd *fds = calloc(nfds, sizeof(*fds));
    if (fds == NULL) {
        LMC_ERROR(LOG_COMP, "store controller: out of memory; thread exits");
        atomic_store(&c->thread_alive, false);
        return NULL;
    }
    fds[0].fd = c->wake_fd;
    for (size_t i = 0; i < c->n_adapters; i++)
        fds[1 + i].fd = lmc_l2_adapter_store_fd(c->adapters[i]);

    while (!atomic_load(&c->stop)) {
        for (size_t i = 0; i < nfds; i++) {
            fds[i].events = POLLIN;
            fds[i].revents = 0;
        }
        int r = poll(fds, nfds, POLL_TIMEOUT_MS);
        if (r < 0) {
            if (errno != EINTR) {
                LMC_WARN(LOG_COMP, "poll failed: %s", strerror(errno));
                usleep(10 * 1000); /* do not spin on a persistent error */
            }
            continue;
        }
        if (atomic_load(&c->stop))
            break;
        /*
         * Drain before the step, so a completion signalled meanwhile is not
         * lost. After a timeout the step is the idle sweep, in case a result
         * stayed behind after its signal was consumed (a pop that could not
         * allocate).
         */
        for (size_t i = 0; r > 0 && i < nfds; i++) {
            if (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) {
                if (i == 0)
                    drain_wake_fd(c->wake_fd);
                else
                    lmc_l2_drain_fd(fds[i].fd);
            }
        }
        store_step(c);
    }
    free(fds);
    atomic_store(&c->thread_alive, false);
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifetime                                                                */
/* ---------------------------------------------------------------------- */

lmc_status lmc_store_controller_create(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                       size_t n_adapters, const char *policy,
                                       lmc_store_controller **out, lmc_error *err)
{
    return lmc_store_controller_create_ex(l1, adapters, n_adapters, policy, NULL, out, err);
}

lmc_status lmc_store_controller_create_ex(lmc_l1_manager *l1, lmc_l2_adapter *const *adapters,
                                          size_t n_adapters, const char *policy,
                                          const lmc_runtime *rt, lmc_store_controller **out,
                                          lmc_error *err)
{
    *out = NULL;
    store_policy p = STORE_POLICY_DEFAULT;
    lmc_status st = parse_policy(policy, &p, err);
    if (st != LMC_OK)
        return st;
    lmc_store_controller *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "store controller: out of memory");
    c->l1 = l1;
    c->policy = p;
    c->manual = lmc_runtime_resolve(rt).manual;
    c->wake_fd = -1;
    c->queue = (lmc_keyvec)LMC_KEYVEC_INIT;
    pthread_mutex_init(&c->mu, NULL);
    atomic_init(&c->thread_alive, false);
    atomic_init(&c->stop, false);
    atomic_init(&c->stored_keys_total, 0);
    atomic_init(&c->stored_bytes_total, 0);
    atomic_init(&c->failed_tasks_total, 0);
    if (n_adapters > 0) {
        c->adapters = malloc(n_adapters * sizeof(*c->adapters));
        c->tasks = calloc(n_adapters, sizeof(*c->tasks));
        if (c->adapters == NULL || c->tasks == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "store controller: out of memory");
            goto fail;
        }
        memcpy(c->adapters, adapters, n_adapters * sizeof(*c->adapters));
        c->n_adapters = n_adapters;
    }
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->wake_fd < 0) {
        st = lmc_error_set(err, LMC_ERR_IO, "store controller: eventfd: %s", strerror(errno));
        goto fail;
    }
    /*
     * With no adapter there is nothing to store: no listener, so finished
     * writes cost L1 nothing. The thread still runs (it only waits) so the
     * status reads the same whatever the configuration.
     */
    bool listening = false;
    if (n_adapters > 0) {
        lmc_l1_listener l = {.on_event = on_l1_event, .ud = c};
        st = lmc_l1_manager_add_listener(l1, &l);
        if (st != LMC_OK) {
            lmc_error_set(err, st,
                          "store controller: cannot register the L1 listener (too "
                          "many listeners)");
            goto fail;
        }
        listening = true;
    }
    if (c->manual) {
        LMC_INFO(LOG_COMP, "store controller ready (virtual time): policy %s, %zu L2 adapter(s)",
                 lmc_store_policy_names[p], n_adapters);
        *out = c;
        return LMC_OK;
    }
    atomic_store(&c->thread_alive, true);
    int rc = pthread_create(&c->thread, NULL, store_thread, c);
    if (rc != 0) {
        atomic_store(&c->thread_alive, false);
        st = lmc_error_set(err, LMC_ERR_INTERNAL, "store controller: cannot start thread: %s",
                           strerror(rc));
        if (listening) {
            /*
             * The L1 manager keeps its listeners (there is no removal
             * call), so this controller must stay allocated rather than
             * leave L1 a dangling pointer: it is leaked, and only queues.
             */
            atomic_store(&c->stop, true);
            return st;
        }
        goto fail;
    }
    c->thread_started = true;
    LMC_INFO(LOG_COMP, "store controller started: policy %s, %zu L2 adapter(s)",
             lmc_store_policy_names[p], n_adapters);
    *out = c;
    return LMC_OK;

fail:
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    free(c->adapters);
    free(c->tasks);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return st;
}

void lmc_store_controller_destroy(lmc_store_controller *c)
{
    if (c == NULL)
        return;
    atomic_store(&c->stop, true);
    if (c->thread_started) {
        wake(c->wake_fd);
        pthread_join(c->thread, NULL);
    }

    /* Tasks still in flight: release their read locks (the adapter finishes or cancels them). */
    size_t released_tasks = 0, released_keys = 0;
    for (size_t ai = 0; ai < c->n_adapters; ai++) {
        task_list *tl = &c->tasks[ai];
        for (size_t i = 0; i < tl->len; i++) {
            release_read_locks(c, tl->v[i].keys, tl->v[i].n);
            released_tasks++;
            released_keys += tl->v[i].n;
            free(tl->v[i].keys);
        }
        free(tl->v);
    }
    if (released_tasks > 0)
        LMC_INFO(LOG_COMP,
                 "store controller stopped with %zu task(s) in flight; released the "
                 "read locks of %zu keys",
                 released_tasks, released_keys);
    pthread_mutex_lock(&c->mu);
    size_t dropped = c->queue.len;
    lmc_keyvec_free(&c->queue);
    pthread_mutex_unlock(&c->mu);
    if (dropped > 0)
        LMC_INFO(LOG_COMP, "store controller stopped with %zu queued keys; they are not stored",
                 dropped);
    close(c->wake_fd);
    free(c->tasks);
    free(c->adapters);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---------------------------------------------------------------------- */
/* Status                                                                  */
/* ---------------------------------------------------------------------- */

lmc_json *lmc_store_controller_report_status(lmc_store_controller *c)
{
    pthread_mutex_lock(&c->mu);
    size_t pending = c->queue.len + c->being_processed;
    size_t in_flight = c->in_flight;
    pthread_mutex_unlock(&c->mu);
    bool alive = atomic_load(&c->thread_alive);

    lmc_json *j = lmc_json_object();
    if (j == NULL)
        return NULL;
    lmc_status st = LMC_OK;
    /* Manual mode has no thread to lose. */
    st |= lmc_json_object_set(j, "is_healthy", lmc_json_bool(alive || c->manual));
    st |= lmc_json_object_set(j, "thread_alive", lmc_json_bool(alive));
    st |= lmc_json_object_set(j, "pending_keys_count", lmc_json_int((int64_t)pending));
    st |= lmc_json_object_set(j, "in_flight_task_count", lmc_json_int((int64_t)in_flight));
    st |= lmc_json_object_set(j, "num_l2_adapters", lmc_json_int((int64_t)c->n_adapters));
    st |= lmc_json_object_set(j, "stored_keys_total",
                              lmc_json_int((int64_t)atomic_load(&c->stored_keys_total)));
    st |= lmc_json_object_set(j, "failed_tasks_total",
                              lmc_json_int((int64_t)atomic_load(&c->failed_tasks_total)));
    if (st != LMC_OK) {
        lmc_json_free(j);
        return NULL;
    }
    return j;
}

size_t lmc_store_controller_busy(lmc_store_controller *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->queue.len + c->being_processed + c->in_flight;
    pthread_mutex_unlock(&c->mu);
    return n;
}

lmc_store_counters lmc_store_controller_counters(lmc_store_controller *c)
{
    return (lmc_store_counters){
        .stored_keys = atomic_load(&c->stored_keys_total),
        .stored_bytes = atomic_load(&c->stored_bytes_total),
        .failed_tasks = atomic_load(&c->failed_tasks_total),
    };
}

bool lmc_store_controller_step(lmc_store_controller *c)
{
    return c->manual && store_step(c);
}

bool lmc_store_controller_has_work(lmc_store_controller *c)
{
    pthread_mutex_lock(&c->mu);
    bool work = c->queue.len > 0 || c->dropped_keys > 0;
    pthread_mutex_unlock(&c->mu);
    return work;
}
