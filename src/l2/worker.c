/*
 * worker.c -- the worker threads of an L2 adapter type (see worker.h).
 *
 * Owns: the threads, the three FIFOs of queued tasks, the deferred list
 * (sorted by due_ns), the stop flag and each worker's link state. In
 * manual mode, instead of the FIFOs and the deferred list: one list of
 * every pending task by (due_ns, seq), queued (not run yet) and deferred
 * (run; ran is set) alike, and the time the modelled bandwidth is busy
 * until.
 *
 * Threads: `lock` guards everything above except `stopping` and `running`
 * (atomics, read without it). Up workers sleep on work_cond (a task, a
 * deferred task, stop, or another link went down); down workers sleep on
 * retry_cond until their retry time, so a queued task always wakes a
 * worker that can take it. With an idle hook, wake_fd replaces work_cond.
 * Hooks run without the lock; the helper never holds it while completing a
 * task either (completion runs listeners that may call back into the type).
 */
#include "l2/worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

typedef struct worker_slot {
    lmc_l2_workers *w;
    size_t index;
    pthread_t thread;
    bool started;
    /* Links only, under w->lock. */
    bool up;
    uint64_t retry_ns;  /* down: no link call before this */
    uint64_t active_ns; /* up: the last task or check */
    uint64_t epoch;     /* up: w->epoch when last checked */
} worker_slot;

struct lmc_l2_workers {
    lmc_l2_workers_config cfg; /* up_at_start not kept */
    bool links;
    bool manual;            /* the base's runtime is manual: no threads */
    const lmc_clock *clock; /* the base's clock: due times */

    pthread_mutex_t lock;
    pthread_cond_t work_cond;
    pthread_cond_t retry_cond;
    int wake_fd; /* with an idle hook; -1 otherwise */

    lmc_l2_task *head[LMC_L2_TASK_KINDS], *tail[LMC_L2_TASK_KINDS];
    size_t queued;
    lmc_l2_task *deferred; /* sorted by due_ns */
    size_t n_deferred;
    bool stop;
    bool joined;
    size_t live;    /* links up */
    uint64_t epoch; /* bumped whenever a link goes down */
    uint64_t failed_no_link;

    /* Manual mode, under lock. */
    lmc_l2_task *due, *due_tail; /* every pending task, by (due_ns, seq) */
    uint64_t seq;
    uint64_t busy_until_ns; /* the modelled bandwidth is taken until then */

    atomic_bool stopping;
    atomic_size_t running; /* threads inside their loop */
    worker_slot *slots;
};

/* ------------------------------------------------------------------ */
/* The queue and the deferred list (caller holds w->lock)               */
/* ------------------------------------------------------------------ */

static void queue_push(lmc_l2_workers *w, lmc_l2_task *t)
{
    int k = (int)t->kind;
    t->next = NULL;
    if (w->tail[k] != NULL)
        w->tail[k]->next = t;
    else
        w->head[k] = t;
    w->tail[k] = t;
    w->queued++;
}

/* The oldest task of the most urgent kind, or NULL when empty. */
static lmc_l2_task *queue_pop(lmc_l2_workers *w)
{
    for (int k = 0; k < LMC_L2_TASK_KINDS; k++) {
        lmc_l2_task *t = w->head[k];
        if (t == NULL)
            continue;
        w->head[k] = t->next;
        if (w->head[k] == NULL)
            w->tail[k] = NULL;
        t->next = NULL;
        w->queued--;
        return t;
    }
    return NULL;
}

/* Every queued task, as a list linked by next, in pop order. */
static lmc_l2_task *queue_take_all(lmc_l2_workers *w)
{
    lmc_l2_task *head = NULL, **tail = &head, *t;
    while ((t = queue_pop(w)) != NULL) {
        *tail = t;
        tail = &t->next;
    }
    return head;
}

static lmc_l2_task *deferred_pop(lmc_l2_workers *w)
{
    lmc_l2_task *t = w->deferred;
    if (t != NULL) {
        w->deferred = t->next;
        t->next = NULL;
        w->n_deferred--;
    }
    return t;
}

/* Manual mode: insert t in the due list by (due_ns, seq). Usually at the tail. */
static void due_insert(lmc_l2_workers *w, lmc_l2_task *t)
{
    t->seq = w->seq++;
    t->next = NULL;
    if (w->due_tail == NULL || w->due_tail->due_ns <= t->due_ns) {
        if (w->due_tail != NULL)
            w->due_tail->next = t;
        else
            w->due = t;
        w->due_tail = t;
        return;
    }
    lmc_l2_task **pp = &w->due;
    while ((*pp)->due_ns <= t->due_ns)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
}

static lmc_l2_task *due_pop(lmc_l2_workers *w)
{
    lmc_l2_task *t = w->due;
    w->due = t->next;
    if (w->due == NULL)
        w->due_tail = NULL;
    t->next = NULL;
    if (t->ran)
        w->n_deferred--;
    else
        w->queued--;
    return t;
}

/* Manual mode: every task not run yet, out of the due list, in due order. */
static lmc_l2_task *due_take_queued(lmc_l2_workers *w)
{
    lmc_l2_task *head = NULL, **tail = &head;
    lmc_l2_task *keep = NULL, **ktail = &keep, *last = NULL;
    for (lmc_l2_task *t = w->due, *next; t != NULL; t = next) {
        next = t->next;
        t->next = NULL;
        if (t->ran) {
            *ktail = t;
            ktail = &t->next;
            last = t;
        } else {
            *tail = t;
            tail = &t->next;
            w->queued--;
        }
    }
    w->due = keep;
    w->due_tail = last;
    return head;
}

/*
 * Manual mode: when a task submitted now completes under the model, and
 * what it does to the bandwidth (see lmc_l2_virtual_model).
 */
static uint64_t model_due(lmc_l2_workers *w, lmc_l2_task_kind kind, const lmc_memory_obj *objs,
                          size_t n)
{
    lmc_l2_virtual_model m = lmc_l2_adapter_virtual_model(w->cfg.base);
    uint64_t now = lmc_clock_now_ns(w->clock);
    uint64_t bytes = 0;
    for (size_t i = 0; kind != LMC_L2_TASK_LOOKUP && objs != NULL && i < n; i++)
        bytes += objs[i].size;
    uint64_t end = now;
    if (bytes > 0 && m.bytes_per_s > 0) {
        uint64_t start = w->busy_until_ns > now ? w->busy_until_ns : now;
        double xfer = (double)bytes / m.bytes_per_s * 1e9;
        /* Clamped: a transfer that long ends after any replay anyway. */
        uint64_t xfer_ns = xfer >= 1.8e19 ? UINT64_MAX / 4 : (uint64_t)xfer;
        end = start + xfer_ns;
        w->busy_until_ns = end;
    }
    return end + m.latency_ns;
}

static void fail_list(lmc_l2_workers *w, lmc_l2_task *t)
{
    while (t != NULL) {
        lmc_l2_task *next = t->next;
        lmc_l2_task_fail(w->cfg.base, t);
        t = next;
    }
}

static void finish(lmc_l2_workers *w, lmc_l2_task *t)
{
    if (w->cfg.hooks.finish != NULL)
        w->cfg.hooks.finish(w->cfg.ud, t);
    else
        lmc_l2_task_complete(w->cfg.base, t);
}

/* ------------------------------------------------------------------ */
/* Waking and waiting                                                   */
/* ------------------------------------------------------------------ */

static void wake_fd_signal(lmc_l2_workers *w)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is saturated: the worker will wake anyway. */
    while (w->wake_fd >= 0 && write(w->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
}

/* One up worker has something to do. Caller holds w->lock. */
static void wake_one(lmc_l2_workers *w)
{
    pthread_cond_signal(&w->work_cond);
    wake_fd_signal(w);
}

/* Sleep on cond until deadline_ns (or a signal). Caller holds w->lock. */
static void wait_until(lmc_l2_workers *w, pthread_cond_t *cond, uint64_t deadline_ns)
{
    if (deadline_ns == LMC_L2_NO_DEADLINE) {
        pthread_cond_wait(cond, &w->lock);
        return;
    }
    struct timespec ts = {(time_t)(deadline_ns / 1000000000u), (long)(deadline_ns % 1000000000u)};
    pthread_cond_timedwait(cond, &w->lock, &ts);
}

/* ------------------------------------------------------------------ */
/* Links (caller holds w->lock)                                         */
/* ------------------------------------------------------------------ */

/* s's link broke: tell the other workers to check theirs; with none left, fail the queue. */
static void link_down(lmc_l2_workers *w, worker_slot *s, uint64_t retry_ns)
{
    s->retry_ns = retry_ns;
    if (!s->up)
        return;
    s->up = false;
    w->live--;
    /* Unless the type has told the others already (lmc_l2_workers_check_links), tell them now. */
    if (s->epoch == w->epoch)
        w->epoch++;
    pthread_cond_broadcast(&w->work_cond);
    if (w->live == 0) {
        /* The invariant: tasks are queued only while some link is up. */
        lmc_l2_task *orphans = w->manual ? due_take_queued(w) : queue_take_all(w);
        pthread_mutex_unlock(&w->lock);
        fail_list(w, orphans);
        pthread_mutex_lock(&w->lock);
    }
}

static void link_up(lmc_l2_workers *w, worker_slot *s)
{
    if (!s->up)
        w->live++;
    s->up = true;
    s->active_ns = lmc_mono_ns();
    s->epoch = w->epoch;
}

/* Call the link hook for s (connect when down, check when up). Caller holds w->lock. */
static void call_link(lmc_l2_workers *w, worker_slot *s)
{
    bool was_up = s->up;
    uint64_t retry_ns = 0;
    pthread_mutex_unlock(&w->lock);
    bool up = w->cfg.hooks.link(w->cfg.ud, s->index, was_up, &retry_ns);
    pthread_mutex_lock(&w->lock);
    if (up)
        link_up(w, s);
    else
        link_down(w, s, retry_ns);
}

/*
 * Links: whether s must call its link hook now; else *deadline_ns is when
 * it must (for the wait). A down worker that must wait does so here.
 */
static bool link_due(lmc_l2_workers *w, worker_slot *s, uint64_t now, uint64_t *deadline_ns)
{
    if (!s->up)
        return now >= s->retry_ns;
    uint64_t check_at = s->active_ns + w->cfg.idle_check_ns;
    if (s->epoch != w->epoch || now >= check_at)
        return true;
    *deadline_ns = check_at;
    return false;
}

/* ------------------------------------------------------------------ */
/* The worker thread                                                    */
/* ------------------------------------------------------------------ */

/* Nothing to do until deadline_ns: sleep, or let the type wait for its own events. */
static bool idle(lmc_l2_workers *w, worker_slot *s, uint64_t deadline_ns)
{
    if (w->cfg.hooks.idle == NULL) {
        wait_until(w, &w->work_cond, deadline_ns);
        return true;
    }
    pthread_mutex_unlock(&w->lock);
    bool ok = w->cfg.hooks.idle(w->cfg.ud, s->index, w->wake_fd, deadline_ns);
    /* Drained before the state is read again: a later wake-up signals the fd anew. */
    lmc_l2_drain_fd(w->wake_fd);
    pthread_mutex_lock(&w->lock);
    return ok;
}

static void *worker_main(void *arg)
{
    worker_slot *s = arg;
    lmc_l2_workers *w = s->w;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    /* A SIGPIPE raised on this thread stays pending and is discarded when it exits. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        /* Links are about a real connection (monotonic); due times are on the base's clock. */
        uint64_t now = lmc_mono_ns();
        uint64_t deadline = LMC_L2_NO_DEADLINE;
        if (w->links && link_due(w, s, now, &deadline)) {
            call_link(w, s);
            continue;
        }
        if (w->links && !s->up) {
            wait_until(w, &w->retry_cond, s->retry_ns);
            continue;
        }
        lmc_l2_task *t = queue_pop(w);
        if (t != NULL) {
            pthread_mutex_unlock(&w->lock);
            bool ok = w->cfg.hooks.run[t->kind](w->cfg.ud, s->index, t);
            pthread_mutex_lock(&w->lock);
            if (w->links && ok)
                s->active_ns = lmc_mono_ns();
            else if (w->links)
                link_down(w, s, 0); /* the type keeps its own reconnect schedule */
            continue;
        }
        if (w->deferred != NULL && w->deferred->due_ns <= lmc_clock_now_ns(w->clock)) {
            t = deferred_pop(w);
            pthread_mutex_unlock(&w->lock);
            finish(w, t);
            pthread_mutex_lock(&w->lock);
            continue;
        }
        if (w->deferred != NULL && w->deferred->due_ns < deadline)
            deadline = w->deferred->due_ns;
        if (!idle(w, s, deadline))
            break;
    }
    pthread_mutex_unlock(&w->lock);
    atomic_fetch_sub(&w->running, 1);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */
/* ------------------------------------------------------------------ */

static void free_workers(lmc_l2_workers *w)
{
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->work_cond);
    pthread_cond_destroy(&w->retry_cond);
    free(w->slots);
    free(w);
}

lmc_status lmc_l2_workers_start(const lmc_l2_workers_config *cfg, lmc_l2_workers **out,
                                lmc_error *err)
{
    *out = NULL;
    if (cfg->threads == 0 || cfg->name == NULL || cfg->instances == NULL || cfg->base == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "incomplete worker configuration");
    const char *name = cfg->name;
    lmc_l2_workers *w = calloc(1, sizeof(*w));
    worker_slot *slots = calloc(cfg->threads, sizeof(*slots));
    if (w == NULL || slots == NULL) {
        free(w);
        free(slots);
        return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    }
    w->cfg = *cfg;
    w->cfg.up_at_start = NULL;
    w->links = cfg->hooks.link != NULL;
    const lmc_runtime *rt = lmc_l2_adapter_runtime(cfg->base);
    w->manual = rt->manual;
    w->clock = &rt->clock;
    w->slots = slots;
    w->wake_fd = -1;
    pthread_mutex_init(&w->lock, NULL);
    /* Deadlines are CLOCK_MONOTONIC (lmc_mono_ns), so the waits must be too. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->work_cond, &ca);
    pthread_cond_init(&w->retry_cond, &ca);
    pthread_condattr_destroy(&ca);
    if (cfg->hooks.idle != NULL && !w->manual) {
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->wake_fd < 0) {
            lmc_status st = lmc_error_set(err, LMC_ERR_IO, "eventfd: %s", strerror(errno));
            free_workers(w);
            return st;
        }
    }

    uint64_t now = lmc_mono_ns();
    for (size_t i = 0; i < cfg->threads; i++) {
        worker_slot *s = &slots[i];
        s->w = w;
        s->index = i;
        s->up = cfg->up_at_start == NULL || cfg->up_at_start[i];
        s->active_ns = now;
        w->live += s->up;
    }
    unsigned instance = atomic_fetch_add(cfg->instances, 1);
    /* Published before the threads exist, so a hook may reach the helper through the type. */
    *out = w;
    if (w->manual) {
        /* The owner runs the tasks through the base (lmc_l2_adapter_run_next). */
        lmc_l2_adapter_bind_workers(cfg->base, w);
        return LMC_OK;
    }
    for (size_t i = 0; i < cfg->threads; i++) {
        atomic_fetch_add(&w->running, 1);
        int e = pthread_create(&slots[i].thread, NULL, worker_main, &slots[i]);
        if (e != 0) {
            atomic_fetch_sub(&w->running, 1);
            lmc_status st = lmc_error_set(err, LMC_ERR_IO, "cannot start worker: %s", strerror(e));
            lmc_l2_workers_stop(w);
            free_workers(w);
            *out = NULL;
            return st;
        }
        slots[i].started = true;
        /* Named from here rather than by the thread itself, so the name is set when start returns.
         */
        char tname[16];
        if (cfg->threads == 1)
            snprintf(tname, sizeof(tname), "%s-%u", name, instance % 10000u);
        else
            snprintf(tname, sizeof(tname), "%s-%u-%u", name, instance % 100u, (unsigned)(i % 100u));
        pthread_setname_np(slots[i].thread, tname);
    }
    return LMC_OK;
}

void lmc_l2_workers_stop(lmc_l2_workers *w)
{
    if (w == NULL || w->joined)
        return;
    atomic_store(&w->stopping, true);
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->work_cond);
    pthread_cond_broadcast(&w->retry_cond);
    wake_fd_signal(w);
    pthread_mutex_unlock(&w->lock);
    for (size_t i = 0; i < w->cfg.threads; i++) {
        if (w->slots[i].started)
            pthread_join(w->slots[i].thread, NULL);
    }
    w->joined = true;
}

void lmc_l2_workers_destroy(lmc_l2_workers *w)
{
    if (w == NULL)
        return;
    lmc_l2_workers_stop(w);
    if (w->manual)
        lmc_l2_adapter_unbind_workers(w->cfg.base, w);
    /* The threads are gone, so nothing else touches the lists. */
    lmc_l2_task *t;
    while ((t = deferred_pop(w)) != NULL)
        finish(w, t);
    fail_list(w, queue_take_all(w));
    /* Manual mode: what ran keeps its result (its delay is cut short); what did not fails. */
    fail_list(w, due_take_queued(w));
    while (w->due != NULL)
        finish(w, due_pop(w));
    free_workers(w);
}

/* ------------------------------------------------------------------ */
/* Submission and state                                                 */
/* ------------------------------------------------------------------ */

lmc_status lmc_l2_workers_enqueue(lmc_l2_workers *w, lmc_l2_task_kind kind, uint64_t id,
                                  const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n)
{
    if ((unsigned)kind >= LMC_L2_TASK_KINDS || w->cfg.hooks.run[kind] == NULL)
        return LMC_ERR_INTERNAL;
    lmc_l2_task *t = lmc_l2_task_new(kind, id, keys, objs, n);
    if (t == NULL)
        return LMC_ERR_NOMEM;
    pthread_mutex_lock(&w->lock);
    bool stopped = w->stop;
    bool down = !stopped && w->links && w->live == 0;
    if (!stopped && !down && w->manual) {
        t->due_ns = model_due(w, kind, objs, n);
        due_insert(w, t);
        w->queued++;
    } else if (!stopped && !down) {
        queue_push(w, t);
        wake_one(w);
    } else if (down) {
        w->failed_no_link++;
    }
    pthread_mutex_unlock(&w->lock);
    if (stopped) {
        lmc_l2_task_free(t);
        return LMC_ERR_CLOSED;
    }
    if (down)
        lmc_l2_task_fail(w->cfg.base, t); /* no connection: fail fast rather than wait for one */
    return LMC_OK;
}

void lmc_l2_workers_defer(lmc_l2_workers *w, lmc_l2_task *t, uint64_t due_ns)
{
    t->due_ns = due_ns;
    pthread_mutex_lock(&w->lock);
    if (w->manual) {
        t->ran = true;
        due_insert(w, t);
        w->n_deferred++;
        pthread_mutex_unlock(&w->lock);
        return;
    }
    lmc_l2_task **pp = &w->deferred;
    while (*pp != NULL && (*pp)->due_ns <= due_ns)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    w->n_deferred++;
    wake_one(w);
    pthread_mutex_unlock(&w->lock);
}

void lmc_l2_workers_check_links(lmc_l2_workers *w)
{
    pthread_mutex_lock(&w->lock);
    w->epoch++;
    pthread_cond_broadcast(&w->work_cond);
    pthread_mutex_unlock(&w->lock);
}

bool lmc_l2_workers_stopping(const lmc_l2_workers *w)
{
    return atomic_load(&w->stopping);
}

lmc_l2_workers_stats lmc_l2_workers_get_stats(lmc_l2_workers *w)
{
    pthread_mutex_lock(&w->lock);
    lmc_l2_workers_stats st = {
        .queued = w->queued,
        .deferred = w->n_deferred,
        .live_links = w->links ? w->live : w->cfg.threads,
        .failed_no_link = w->failed_no_link,
    };
    pthread_mutex_unlock(&w->lock);
    /* Manual mode has no thread that could have died. */
    st.alive = w->manual || atomic_load(&w->running) == w->cfg.threads;
    return st;
}

/* ------------------------------------------------------------------ */
/* Manual mode: the owner delivers the tasks                            */
/* ------------------------------------------------------------------ */

bool lmc_l2_workers_manual(const lmc_l2_workers *w)
{
    return w->manual;
}

uint64_t lmc_l2_workers_next_due(lmc_l2_workers *w)
{
    if (!w->manual)
        return UINT64_MAX;
    uint64_t due = UINT64_MAX;
    if (w->cfg.hooks.next_event != NULL)
        due = w->cfg.hooks.next_event(w->cfg.ud);
    pthread_mutex_lock(&w->lock);
    if (w->due != NULL && w->due->due_ns < due)
        due = w->due->due_ns;
    pthread_mutex_unlock(&w->lock);
    return due;
}

/*
 * The worker to run a task on: the first whose link is up, after checking
 * the ones told to (another link went down) and retrying the down ones
 * whose time has come. NULL when none is up. Caller holds w->lock.
 */
static worker_slot *manual_slot(lmc_l2_workers *w)
{
    if (!w->links)
        return &w->slots[0];
    for (size_t i = 0; i < w->cfg.threads; i++) {
        worker_slot *s = &w->slots[i];
        if ((s->up && s->epoch != w->epoch) || (!s->up && lmc_mono_ns() >= s->retry_ns))
            call_link(w, s);
        if (s->up)
            return s;
    }
    return NULL;
}

/* Run one queued task inline, as a worker thread would. Caller holds w->lock; it is released. */
static void manual_run(lmc_l2_workers *w, lmc_l2_task *t)
{
    worker_slot *s = manual_slot(w);
    if (s == NULL) {
        /* No connection: the task fails, as it would at submit with every link down. */
        w->failed_no_link++;
        pthread_mutex_unlock(&w->lock);
        lmc_l2_task_fail(w->cfg.base, t);
        return;
    }
    pthread_mutex_unlock(&w->lock);
    bool ok = w->cfg.hooks.run[t->kind](w->cfg.ud, s->index, t);
    if (!w->links)
        return;
    pthread_mutex_lock(&w->lock);
    if (ok)
        s->active_ns = lmc_mono_ns();
    else
        link_down(w, s, 0); /* the type keeps its own reconnect schedule */
    pthread_mutex_unlock(&w->lock);
}

bool lmc_l2_workers_run_next(lmc_l2_workers *w, uint64_t now_ns)
{
    if (!w->manual || atomic_load(&w->stopping))
        return false;
    uint64_t type_due =
        w->cfg.hooks.next_event != NULL ? w->cfg.hooks.next_event(w->cfg.ud) : UINT64_MAX;
    pthread_mutex_lock(&w->lock);
    lmc_l2_task *t = NULL;
    if (w->due != NULL && w->due->due_ns <= now_ns && w->due->due_ns <= type_due)
        t = due_pop(w);
    if (t == NULL) {
        pthread_mutex_unlock(&w->lock);
        if (type_due > now_ns || w->cfg.hooks.run_event == NULL)
            return false;
        w->cfg.hooks.run_event(w->cfg.ud, now_ns);
        return true;
    }
    if (!t->ran) {
        manual_run(w, t);
        return true;
    }
    pthread_mutex_unlock(&w->lock);
    finish(w, t);
    return true;
}
