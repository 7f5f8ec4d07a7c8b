/*
 * test_l2_worker.c -- the worker helper of the L2 adapter types
 * (l2/worker.h): priority order, exactly-once completion at stop, deferred
 * tasks, links (fail fast while down, fail the queue when the last link
 * goes down, idle checks), the idle hook's wake-ups and thread names; and
 * manual mode (virtual time): modelled due times, inline runs in due order,
 * deferred tasks and links without threads.
 *
 * Results go to a sink adapter's base (a mock adapter used only for its
 * result vectors), so what the helper completes or fails can be read with
 * the ordinary take/pop calls.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "helpers/thread_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

#define MS 1000000ull

static atomic_uint g_instances;

typedef struct fixture {
    lmc_l2_adapter *sink;
    lmc_virtual_clock *vclock; /* the manual sink's clock (manual fixtures only) */
    lmc_l2_workers *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* run: the task with id gate_id waits until gate_open. */
    uint64_t gate_id;
    bool gate_open;
    bool gate_reached;
    /* run: the order tasks ran in. */
    uint64_t order[64];
    size_t n_order;
    /* run: returns false (link broke) for this id. */
    uint64_t break_id;
    /* run: defer ids listed here by the matching delay. */
    uint64_t defer_id[4];
    uint64_t defer_ns[4];
    /* finish: what was finished. */
    atomic_size_t finished;
    /* link */
    atomic_bool link_ok;
    atomic_size_t checks; /* link calls on an up worker */
    /* idle */
    atomic_size_t idles;
} fixture;

/* A fixture whose results go to sink; its hooks start with no gate, break or defer. */
static fixture *fixture_new(lmc_l2_adapter *sink)
{
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_non_null(sink);
    f->sink = sink;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->gate_id = UINT64_MAX;
    f->gate_open = true;
    f->break_id = UINT64_MAX;
    return f;
}

static int setup(void **state)
{
    *state = fixture_new(l2_adapter_from(
        NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}"));
    return 0;
}

/*
 * A manual sink on a virtual clock at 0: its model is 10 us of latency and
 * 1 GB/s, one byte per ns (the tasks here move one byte each). The clock
 * lives in the fixture, which the sink's runtime points to.
 */
static int setup_manual(void **state)
{
    lmc_virtual_clock *clock = malloc(sizeof(*clock));
    assert_non_null(clock);
    lmc_virtual_clock_init(clock, 0);
    lmc_runtime rt = {.clock = lmc_clock_virtual(clock), .manual = true};
    lmc_json *cfg = l2_json("{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
                            "\"virtual_latency_us\": 10, \"virtual_bandwidth_gbps\": 1}");
    lmc_l2_adapter *sink = NULL;
    lmc_error err;
    assert_int_equal(lmc_l2_adapter_create_ex(cfg, &rt, &sink, &err), LMC_OK);
    lmc_json_free(cfg);
    fixture *f = fixture_new(sink);
    f->vclock = clock;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_destroy(f->w);
    lmc_l2_adapter_destroy(f->sink);
    free(f->vclock); /* after the sink, whose clock it is */
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Hooks                                                                   */
/* ---------------------------------------------------------------------- */

/* Stores succeed with their id as the byte count, so each result names its task. */
static bool run_hook(void *ud, size_t index, lmc_l2_task *t)
{
    fixture *f = ud;
    pthread_mutex_lock(&f->mu);
    if (t->id == f->gate_id) {
        f->gate_reached = true;
        pthread_cond_broadcast(&f->cv);
        /* A stop also opens the gate: the helper waits for the running task. */
        while (!f->gate_open && !lmc_l2_workers_stopping(f->w)) {
            pthread_mutex_unlock(&f->mu);
            lmc_sleep_ns(MS);
            pthread_mutex_lock(&f->mu);
        }
    }
    if (f->n_order < 64)
        f->order[f->n_order++] = t->id;
    uint64_t delay = 0;
    for (size_t i = 0; i < 4; i++) {
        if (f->defer_ns[i] != 0 && f->defer_id[i] == t->id)
            delay = f->defer_ns[i];
    }
    bool ok = t->id != f->break_id;
    pthread_mutex_unlock(&f->mu);
    t->result = (int64_t)t->id;
    if (t->kind != LMC_L2_TASK_STORE && t->n > 0)
        lmc_bitmap_set(&t->bitmap, 0);
    if (delay != 0)
        lmc_l2_workers_defer(f->w, t, lmc_l2_adapter_now_ns(f->sink) + delay);
    else
        lmc_l2_task_complete(f->sink, t);
    return ok;
}

static void finish_hook(void *ud, lmc_l2_task *t)
{
    fixture *f = ud;
    atomic_fetch_add(&f->finished, 1);
    lmc_l2_task_complete(f->sink, t);
}

static bool link_hook(void *ud, size_t index, bool up, uint64_t *retry_ns)
{
    fixture *f = ud;
    if (up)
        atomic_fetch_add(&f->checks, 1);
    *retry_ns = lmc_mono_ns() + 1 * MS;
    return atomic_load(&f->link_ok);
}

static bool idle_hook(void *ud, size_t index, int wake_fd, uint64_t deadline_ns)
{
    fixture *f = ud;
    atomic_fetch_add(&f->idles, 1);
    struct pollfd p = {wake_fd, POLLIN, 0};
    poll(&p, 1, deadline_ns == LMC_L2_NO_DEADLINE ? -1 : 10);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

static lmc_l2_workers_config config(fixture *f, size_t threads)
{
    return (lmc_l2_workers_config){
        .name = "l2-tw",
        .instances = &g_instances,
        .threads = threads,
        .base = f->sink,
        .hooks = {.run = {run_hook, run_hook, run_hook}, .finish = finish_hook},
        .ud = f,
    };
}

static void start(fixture *f, const lmc_l2_workers_config *cfg)
{
    lmc_error err;
    assert_int_equal(lmc_l2_workers_start(cfg, &f->w, &err), LMC_OK);
    assert_non_null(f->w);
}

/* One worker with a link (up at start when up is true), checked after idle_check_ns. */
static void start_linked(fixture *f, bool up, uint64_t idle_check_ns)
{
    lmc_l2_workers_config cfg = config(f, 1);
    bool up_at_start[1] = {up};
    cfg.hooks.link = link_hook;
    cfg.idle_check_ns = idle_check_ns;
    cfg.up_at_start = up_at_start;
    start(f, &cfg);
}

static lmc_status submit(fixture *f, lmc_l2_task_kind kind, uint64_t id)
{
    lmc_object_key k = l2_key("worker", (uint32_t)id, 0, 0, NULL);
    static uint8_t byte;
    lmc_memory_obj obj = {&byte, 1, 1, 0};
    return lmc_l2_workers_enqueue(f->w, kind, id, &k, kind == LMC_L2_TASK_LOOKUP ? NULL : &obj, 1);
}

/* Hold the worker inside task `id` (submitted here) until open_gate. */
static void close_gate_on(fixture *f, uint64_t id)
{
    pthread_mutex_lock(&f->mu);
    f->gate_id = id;
    f->gate_open = false;
    f->gate_reached = false;
    pthread_mutex_unlock(&f->mu);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, id), LMC_OK);
    pthread_mutex_lock(&f->mu);
    while (!f->gate_reached)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void open_gate(fixture *f)
{
    pthread_mutex_lock(&f->mu);
    f->gate_open = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* The result of store task id (waiting for it), or -2 when none came. */
static int64_t store_result(fixture *f, uint64_t id)
{
    int64_t r = -2;
    return l2_wait_store(f->sink, id, &r) ? r : -2;
}

/* Wait (bounded) until pred(f) holds. */
static bool eventually(bool (*pred)(fixture *), fixture *f)
{
    uint64_t deadline = lmc_mono_ns() + (uint64_t)L2_WAIT_MS * MS;
    while (!pred(f)) {
        if (lmc_mono_ns() > deadline)
            return false;
        lmc_sleep_ns(MS / 2);
    }
    return true;
}

static bool one_link_up(fixture *f)
{
    return lmc_l2_workers_get_stats(f->w).live_links == 1;
}

static bool no_link_up(fixture *f)
{
    return lmc_l2_workers_get_stats(f->w).live_links == 0;
}

static bool one_deferred(fixture *f)
{
    return lmc_l2_workers_get_stats(f->w).deferred == 1;
}

static bool idled(fixture *f)
{
    return atomic_load(&f->idles) >= 1;
}

static bool link_checked(fixture *f)
{
    return atomic_load(&f->checks) >= 2;
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

static void test_lookups_run_before_loads_and_loads_before_stores(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    close_gate_on(f, 0);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_LOAD, 2), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_LOOKUP, 3), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 4), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_LOOKUP, 5), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_LOAD, 6), LMC_OK);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).queued, 6);
    open_gate(f);

    lmc_l2_store_result r[3];
    assert_true(l2_wait_stores(f->sink, 3, r));
    lmc_bitmap bm;
    for (uint64_t id = 3; id <= 5; id += 2) {
        assert_true(l2_wait_lookup(f->sink, id, &bm));
        lmc_bitmap_free(&bm);
    }
    for (uint64_t id = 2; id <= 6; id += 4) {
        assert_true(l2_wait_load(f->sink, id, &bm));
        lmc_bitmap_free(&bm);
    }
    static const uint64_t want[] = {0, 3, 5, 2, 6, 1, 4};
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->n_order, 7);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(f->order[i], want[i]);
    pthread_mutex_unlock(&f->mu);
}

static void
test_stop_waits_for_the_running_task_and_destroy_fails_the_queued_ones_once(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    close_gate_on(f, 0);
    for (uint64_t id = 1; id <= 5; id++)
        assert_int_equal(submit(f, LMC_L2_TASK_STORE, id), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_LOOKUP, 6), LMC_OK);
    assert_false(lmc_l2_workers_stopping(f->w));
    lmc_l2_workers_stop(f->w); /* task 0 sees the stop and finishes; nothing else runs */
    assert_true(lmc_l2_workers_stopping(f->w));
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 7), LMC_ERR_CLOSED);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).queued, 6);
    lmc_l2_workers_destroy(f->w);
    f->w = NULL;

    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->n_order, 1);
    pthread_mutex_unlock(&f->mu);
    lmc_l2_store_result *r = NULL;
    size_t n = lmc_l2_adapter_pop_completed_stores(f->sink, &r);
    assert_int_equal(n, 6); /* 0..5: task 7 was refused, so it has no result */
    unsigned seen[6] = {0};
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].task_id <= 5);
        seen[r[i].task_id]++;
        assert_int_equal(r[i].result, r[i].task_id == 0 ? 0 : -1);
    }
    free(r);
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(seen[i], 1);
    lmc_bitmap bm;
    assert_true(lmc_l2_adapter_take_lookup_result(f->sink, 6, &bm));
    assert_int_equal(lmc_bitmap_popcount(&bm), 0);
    lmc_bitmap_free(&bm);
    assert_false(lmc_l2_adapter_take_lookup_result(f->sink, 6, &bm));
}

static void test_deferred_task_completes_when_due_and_at_destroy_keeps_its_result(void **state)
{
    fixture *f = *state;
    pthread_mutex_lock(&f->mu);
    f->defer_id[0] = 1;
    f->defer_ns[0] = 30 * MS;
    f->defer_id[1] = 2;
    f->defer_ns[1] = 600000 * MS; /* ten minutes: only destroy ends it */
    pthread_mutex_unlock(&f->mu);
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    uint64_t t0 = lmc_mono_ns();
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 2), LMC_OK);
    assert_int_equal(store_result(f, 1), 1);
    assert_true(lmc_mono_ns() - t0 >= 30 * MS);
    assert_int_equal(atomic_load(&f->finished), 1);
    assert_true(eventually(one_deferred, f)); /* task 2, waiting for its ten minutes */
    lmc_l2_workers_destroy(f->w);
    f->w = NULL;
    assert_int_equal(atomic_load(&f->finished), 2);
    lmc_l2_store_result *r = NULL;
    assert_int_equal(lmc_l2_adapter_pop_completed_stores(f->sink, &r), 1);
    assert_int_equal(r[0].task_id, 2);
    assert_int_equal(r[0].result, 2); /* finished, not failed: the work was done */
    free(r);
}

static void test_links_down_fail_tasks_at_once_and_up_runs_them(void **state)
{
    fixture *f = *state;
    start_linked(f, false, 60000 * MS);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).live_links, 0);

    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    lmc_l2_store_result *r = NULL; /* failed at once: the result is there already */
    assert_int_equal(lmc_l2_adapter_pop_completed_stores(f->sink, &r), 1);
    assert_int_equal(r[0].task_id, 1);
    assert_int_equal(r[0].result, -1);
    free(r);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).failed_no_link, 1);

    atomic_store(&f->link_ok, true);
    assert_true(eventually(one_link_up, f));
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 2), LMC_OK);
    assert_int_equal(store_result(f, 2), 2);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).failed_no_link, 1);
}

static void test_losing_the_last_link_fails_every_queued_task(void **state)
{
    fixture *f = *state;
    atomic_store(&f->link_ok, true);
    start_linked(f, true, 60000 * MS);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).live_links, 1);
    pthread_mutex_lock(&f->mu);
    f->break_id = 0;
    pthread_mutex_unlock(&f->mu);
    close_gate_on(f, 0);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 2), LMC_OK);
    atomic_store(&f->link_ok, false); /* and it stays down */
    open_gate(f);

    lmc_l2_store_result r[3];
    assert_true(l2_wait_stores(f->sink, 3, r));
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(r[i].result, r[i].task_id == 0 ? 0 : -1);
    assert_true(eventually(no_link_up, f));
    pthread_mutex_lock(&f->mu);
    assert_int_equal(f->n_order, 1); /* 1 and 2 never ran */
    pthread_mutex_unlock(&f->mu);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 3), LMC_OK);
    assert_int_equal(store_result(f, 3), -1);
}

static void test_an_idle_up_link_is_checked(void **state)
{
    fixture *f = *state;
    atomic_store(&f->link_ok, true);
    start_linked(f, true, 5 * MS);
    assert_true(eventually(link_checked, f));
    assert_int_equal(lmc_l2_workers_get_stats(f->w).live_links, 1);
}

static void test_idle_hook_is_woken_by_a_task_and_by_stop(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 1);
    cfg.hooks.idle = idle_hook;
    start(f, &cfg);
    assert_true(eventually(idled, f)); /* waiting without a deadline: only a wake-up ends it */
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    assert_int_equal(store_result(f, 1), 1);
    uint64_t t0 = lmc_mono_ns();
    lmc_l2_workers_destroy(f->w); /* the idle hook waits without a deadline: stop must wake it */
    f->w = NULL;
    assert_true(lmc_mono_ns() - t0 < 2000 * MS);
}

static void test_threads_are_named_after_the_type_and_index(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 2);
    start(f, &cfg);
    assert_true(lmc_l2_workers_get_stats(f->w).alive);
    /* Settled: a worker names itself once it runs, and the previous test's
     * joined workers can linger in /proc/self/task for a moment. */
    assert_int_equal(thread_test_settle("l2-tw-", NULL, 2), 2);
    assert_int_equal(thread_test_count("l2-tw-", "-0"), 1);
    assert_int_equal(thread_test_count("l2-tw-", "-1"), 1);
}

static void test_start_rejects_an_incomplete_config(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 0);
    lmc_error err;
    lmc_l2_workers *w = (lmc_l2_workers *)&err; /* must be reset to NULL */
    assert_int_equal(lmc_l2_workers_start(&cfg, &w, &err), LMC_ERR_INVALID);
    assert_null(w);
}

/* ---------------------------------------------------------------------- */
/* Manual mode                                                             */
/* ---------------------------------------------------------------------- */

/* Deliver everything due at or before t (the owner's loop), with the clock following. */
static void run_until(fixture *f, uint64_t t)
{
    uint64_t due;
    while ((due = lmc_l2_workers_next_due(f->w)) <= t) {
        lmc_virtual_clock_set(f->vclock, due);
        assert_true(lmc_l2_workers_run_next(f->w, due));
    }
    lmc_virtual_clock_set(f->vclock, t);
}

static void test_manual_tasks_run_inline_in_due_order_at_their_modelled_times(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    assert_true(lmc_l2_workers_manual(f->w));
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);  /* 1 ns of transfer, then 10 us */
    assert_int_equal(submit(f, LMC_L2_TASK_LOOKUP, 2), LMC_OK); /* no bytes: 10 us */
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 3), LMC_OK);  /* after store 1's byte */
    assert_int_equal(f->n_order, 0);                            /* nothing ran at submit */
    assert_int_equal(lmc_l2_workers_get_stats(f->w).queued, 3);
    assert_true(lmc_l2_workers_get_stats(f->w).alive);

    assert_int_equal(lmc_l2_workers_next_due(f->w), 10000);
    assert_false(lmc_l2_workers_run_next(f->w, 9999));
    run_until(f, 10000);
    assert_int_equal(f->n_order, 1);
    assert_int_equal(f->order[0], 2);
    assert_int_equal(lmc_l2_workers_next_due(f->w), 10001);
    run_until(f, 10002);
    assert_int_equal(f->n_order, 3);
    assert_int_equal(f->order[1], 1);
    assert_int_equal(f->order[2], 3);
    assert_int_equal(lmc_l2_workers_next_due(f->w), UINT64_MAX);
    lmc_l2_store_result r[2];
    assert_true(l2_wait_stores(f->sink, 2, r));
    assert_int_equal(r[0].task_id, 1);
    assert_int_equal(r[0].result, 1);
    assert_int_equal(r[1].task_id, 3);
    assert_int_equal(r[1].result, 3);
}

static void test_manual_tasks_due_together_run_in_submission_order(void **state)
{
    fixture *f = *state;
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    for (uint64_t id = 1; id <= 5; id++)
        assert_int_equal(submit(f, LMC_L2_TASK_LOOKUP, id), LMC_OK);
    run_until(f, 10000);
    assert_int_equal(f->n_order, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(f->order[i], i + 1);
}

static void
test_manual_deferred_task_finishes_when_due_and_destroy_fails_what_never_ran(void **state)
{
    fixture *f = *state;
    f->defer_id[0] = 1;
    f->defer_ns[0] = 30;
    lmc_l2_workers_config cfg = config(f, 1);
    start(f, &cfg);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    run_until(f, 10001); /* ran, deferred to 10031 */
    assert_int_equal(lmc_l2_workers_get_stats(f->w).deferred, 1);
    assert_int_equal(lmc_l2_workers_next_due(f->w), 10031);
    run_until(f, 10031);
    assert_int_equal(atomic_load(&f->finished), 1);
    assert_int_equal(store_result(f, 1), 1);

    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 7), LMC_OK);
    lmc_l2_workers_destroy(f->w);
    f->w = NULL;
    assert_int_equal(f->n_order, 1); /* task 7 never ran */
    assert_int_equal(store_result(f, 7), -1);
}

static void test_manual_link_loss_fails_the_queue_and_later_tasks_at_once(void **state)
{
    fixture *f = *state;
    atomic_store(&f->link_ok, true);
    f->break_id = 1;
    start_linked(f, true, 1000 * MS);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 1), LMC_OK);
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 2), LMC_OK);
    run_until(f, 10001); /* task 1 breaks the only link: task 2 fails with it */
    assert_int_equal(lmc_l2_workers_get_stats(f->w).live_links, 0);
    lmc_l2_store_result r[2];
    assert_true(l2_wait_stores(f->sink, 2, r));
    assert_int_equal(r[0].task_id, 1); /* completed by its run, which then reported the break */
    assert_int_equal(r[0].result, 1);
    assert_int_equal(r[1].task_id, 2); /* failed when the link went down */
    assert_int_equal(r[1].result, -1);
    assert_int_equal(lmc_l2_workers_next_due(f->w), UINT64_MAX);

    /* While every link is down a task fails at submit. */
    assert_int_equal(submit(f, LMC_L2_TASK_STORE, 3), LMC_OK);
    assert_int_equal(store_result(f, 3), -1);
    assert_int_equal(lmc_l2_workers_get_stats(f->w).failed_no_link, 1);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookups_run_before_loads_and_loads_before_stores,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_stop_waits_for_the_running_task_and_destroy_fails_the_queued_ones_once, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_deferred_task_completes_when_due_and_at_destroy_keeps_its_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_links_down_fail_tasks_at_once_and_up_runs_them, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_losing_the_last_link_fails_every_queued_task, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_an_idle_up_link_is_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_hook_is_woken_by_a_task_and_by_stop, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_threads_are_named_after_the_type_and_index, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_start_rejects_an_incomplete_config, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_manual_tasks_run_inline_in_due_order_at_their_modelled_times, setup_manual,
            teardown),
        cmocka_unit_test_setup_teardown(test_manual_tasks_due_together_run_in_submission_order,
                                        setup_manual, teardown),
        cmocka_unit_test_setup_teardown(
            test_manual_deferred_task_finishes_when_due_and_destroy_fails_what_never_ran,
            setup_manual, teardown),
        cmocka_unit_test_setup_teardown(
            test_manual_link_loss_fails_the_queue_and_later_tasks_at_once, setup_manual, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
