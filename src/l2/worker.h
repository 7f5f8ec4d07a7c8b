/*
 * worker.h -- the worker threads of an L2 adapter type, with their task
 * queue: the one copy of the thread, queue, stop and "fail what is left"
 * logic that every type (fs, mock, resp, fault_inject) runs on.
 *
 * Who includes it: adapter types in src/l2/ and their unit tests only.
 *
 * Owns: N named threads; the queue of submitted tasks, served by priority
 * (every lookup before any load, every load before any store; FIFO within a
 * kind) so that a prefetch is never stuck behind a big write; the deferred
 * tasks (already run, completing at a due time: mock's simulated bandwidth,
 * fault_inject's delays), in due order; the stop flag; and, for a type whose
 * workers each need a connection ("links": resp), each worker's link state.
 *
 * The type supplies hooks; the helper calls them on its worker threads
 * without holding its lock:
 *   run    one function per task kind (lookup, load, store): executes one
 *          task on worker `index` and ends it exactly once:
 *          lmc_l2_task_complete / lmc_l2_task_fail, or lmc_l2_workers_defer.
 *          Required when the type enqueues tasks.
 *   finish reports a deferred task once it is due (and at destroy). Optional:
 *          lmc_l2_task_complete by default.
 *   link   brings worker `index`'s connection up, or checks it. Optional.
 *   idle   waits for the type's own events (file descriptors) instead of the
 *          helper's condition variable, and handles them. Optional.
 *
 * Exactly once: every task handed to lmc_l2_workers_enqueue is completed
 * once and only once: by run (directly, or deferred and then finished); at
 * once, as a failure, when the type has links and none is up (a task never
 * waits for a server that is down); as a failure at destroy when it is still
 * queued; or finished at destroy with its own result when it was deferred
 * (work already done keeps its result; only its delay is cut short).
 *
 * Links. A worker whose link is down takes no task. The helper calls link
 * on a down worker when its retry time has come, and on an up worker when
 * it has been idle for idle_check_ns or when another worker's link went
 * down since it last checked (one broken connection hints that the server
 * is gone: the others find out at once instead of on their next task).
 * When the last link goes down, every queued task fails.
 *
 * Manual mode (the base adapter's runtime is manual, core/runtime.h): no
 * thread is started. enqueue gives each task its modelled completion time
 * (lmc_l2_virtual_model: latency plus bytes / bandwidth, the bandwidth
 * shared in order of submission) and keeps it in one list ordered by (due
 * time, submission sequence), with the deferred tasks. The owner delivers
 * them through lmc_l2_workers_run_next (the base's lmc_l2_adapter_run_next):
 * a task's run hook runs then, inline, on the first worker whose link is up
 * (a link is checked before a task when another went down, and a down one
 * retried when its retry time has come); a deferred task is finished. The
 * type's own events (what idle waits for with threads) come from the
 * next_event and run_event hooks. The same run, finish and link hooks run
 * in both modes. Link retry and idle-check times are about a real
 * connection, so they stay on the monotonic clock in both modes.
 *
 * Threads: the lmc_l2_workers_* functions are thread-safe; one mutex guards
 * the queue, the deferred list, the stop flag and the link states. Worker
 * threads block SIGPIPE for their life (a write to a socket whose peer is
 * gone must fail the task, not kill the process). In manual mode,
 * lmc_l2_workers_run_next runs on the owner's thread (one at a time).
 */
#ifndef LMC_L2_WORKER_H
#define LMC_L2_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "l2/adapter_impl.h"

typedef struct lmc_l2_workers lmc_l2_workers;

/* No deadline (for idle). */
#define LMC_L2_NO_DEADLINE UINT64_MAX

/*
 * Run t on worker index. Returns false only when the worker's link broke
 * during the task (a type without links always returns true).
 */
typedef bool (*lmc_l2_worker_run_fn)(void *ud, size_t index, lmc_l2_task *t);

typedef struct lmc_l2_worker_hooks {
    /* One per task kind, indexed by lmc_l2_task_kind. */
    lmc_l2_worker_run_fn run[LMC_L2_TASK_KINDS];
    /* A deferred task is due: report it and free it. NULL: lmc_l2_task_complete. */
    void (*finish)(void *ud, lmc_l2_task *t);
    /*
     * Worker index's link: with up false, try to bring it up; with up
     * true, check it. Returns whether it is up afterwards; when not, sets
     * *retry_ns (CLOCK_MONOTONIC) to the earliest time to call again.
     */
    bool (*link)(void *ud, size_t index, bool up, uint64_t *retry_ns);
    /*
     * Nothing to do: wait until wake_fd is readable (the helper has work or
     * is stopping), deadline_ns passes (LMC_L2_NO_DEADLINE: none) or the
     * type's own event arrives, then handle that event. The helper drains
     * wake_fd. Returning false ends the worker (a fatal error, logged).
     */
    bool (*idle)(void *ud, size_t index, int wake_fd, uint64_t deadline_ns);
    /*
     * Manual mode, for a type with events of its own (idle's counterpart):
     * next_event is the earliest time one is due (LMC_L2_NO_DEADLINE:
     * none); run_event handles the earliest one due at or before now_ns.
     * Optional.
     */
    uint64_t (*next_event)(void *ud);
    void (*run_event)(void *ud, uint64_t now_ns);
} lmc_l2_worker_hooks;

typedef struct lmc_l2_workers_config {
    /*
     * Thread names: "<name>-<instance>" for one thread ("l2-fs-0"),
     * "<name>-<instance>-<index>" for several ("l2-resp-0-3"); instance is
     * taken from *instances, the type's own counter.
     */
    const char *name;
    atomic_uint *instances;
    size_t threads;       /* >= 1 */
    lmc_l2_adapter *base; /* where the helper reports the tasks it fails */
    lmc_l2_worker_hooks hooks;
    void *ud;                /* the type's state, passed to every hook */
    uint64_t idle_check_ns;  /* links: check an up link idle this long */
    const bool *up_at_start; /* links: threads entries (the type connected them); NULL = all up */
} lmc_l2_workers_config;

/*
 * Start the threads (named before this returns). Errors: LMC_ERR_INVALID,
 * _NOMEM, _IO, with a message the type prefixes ("cannot start worker: ...").
 */
lmc_status lmc_l2_workers_start(const lmc_l2_workers_config *cfg, lmc_l2_workers **out,
                                lmc_error *err);

/*
 * Copy keys and objs into a new task and queue it. LMC_ERR_CLOSED once
 * stopping (nothing is completed), LMC_ERR_NOMEM. With links and none up,
 * the task fails at once and LMC_OK is returned (the failure is its result).
 */
lmc_status lmc_l2_workers_enqueue(lmc_l2_workers *w, lmc_l2_task_kind kind, uint64_t id,
                                  const lmc_object_key *keys, const lmc_memory_obj *objs, size_t n);

/*
 * From a run or idle hook (a worker thread), or run_event: t has been done,
 * but its completion waits until due_ns (the base adapter's clock); then
 * the finish hook reports it. The helper owns t from here.
 */
void lmc_l2_workers_defer(lmc_l2_workers *w, lmc_l2_task *t, uint64_t due_ns);

/*
 * Make every up worker check its link before its next task. The helper does
 * this itself when a worker's link goes down; a type calls it as soon as it
 * sees a connection break (inside a task, before its failure is reported,
 * or on a connection of its own), so no other worker takes a task on a
 * connection that is probably dead too.
 */
void lmc_l2_workers_check_links(lmc_l2_workers *w);

/* True from the start of lmc_l2_workers_stop: a long task may give up between its keys. */
bool lmc_l2_workers_stopping(const lmc_l2_workers *w);

/* Manual mode: no threads; the owner delivers the tasks (see the top of this file). */
bool lmc_l2_workers_manual(const lmc_l2_workers *w);

/* Manual mode: the earliest due time of a task or a type event, or UINT64_MAX. */
uint64_t lmc_l2_workers_next_due(lmc_l2_workers *w);

/*
 * Manual mode: deliver the earliest task or type event due at or before
 * now_ns (a queued task before a type event due at the same time). Returns
 * whether one was delivered; false with threads.
 */
bool lmc_l2_workers_run_next(lmc_l2_workers *w, uint64_t now_ns);

typedef struct lmc_l2_workers_stats {
    size_t queued;           /* submitted, not yet taken by a worker */
    size_t deferred;         /* run, waiting for their due time */
    size_t live_links;       /* links: workers whose link is up (threads without links) */
    uint64_t failed_no_link; /* links: tasks failed at submit because no link was up */
    bool alive;              /* every worker thread is still running */
} lmc_l2_workers_stats;

lmc_l2_workers_stats lmc_l2_workers_get_stats(lmc_l2_workers *w);

/*
 * Stop taking work and join the threads; the task a worker is running
 * finishes first. No hook runs after this returns. Idempotent. Queued and
 * deferred tasks are left for lmc_l2_workers_destroy, so a type can first
 * end what they depend on (fault_inject destroys its inner adapter).
 */
void lmc_l2_workers_stop(lmc_l2_workers *w);

/* Stop, then finish every deferred task (finish hook), fail every queued one, and free. */
void lmc_l2_workers_destroy(lmc_l2_workers *w);

#endif
