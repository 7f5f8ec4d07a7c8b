/*
 * test_l2_worker_concurrency.c -- several threads submit to one worker
 * helper (l2/worker.h) with several worker threads, some tasks deferred,
 * and a stop arriving while submissions go on. Every accepted task must be
 * completed exactly once, and no refused one at all. Meant to run under
 * TSan (the "concurrency" label).
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "l2/worker.h"

enum { SUBMITTERS = 4, PER_SUBMITTER = 400, WORKERS = 3, TOTAL = SUBMITTERS * PER_SUBMITTER };

static atomic_uint g_instances;

typedef struct shared {
    lmc_l2_adapter *sink;
    lmc_l2_workers *w;
    atomic_bool accepted[TOTAL];
    atomic_size_t n_accepted;
    atomic_uint ran[TOTAL];
} shared;

typedef struct submitter {
    shared *s;
    size_t first;
} submitter;

/* Ids encode the kind (id % 3), so a result can be looked for in the right place. */
static lmc_l2_task_kind kind_of(uint64_t id)
{
    return (lmc_l2_task_kind)(id % 3);
}

static bool run(void *ud, size_t index, lmc_l2_task *t)
{
    shared *s = ud;
    atomic_fetch_add(&s->ran[t->id], 1);
    t->result = 1;
    if (t->kind != LMC_L2_TASK_STORE)
        lmc_bitmap_set(&t->bitmap, 0);
    if (t->id % 7 == 0)
        lmc_l2_workers_defer(s->w, t, lmc_mono_ns() + 200000u);
    else
        lmc_l2_task_complete(s->sink, t);
    return true;
}

static void *submit_main(void *arg)
{
    submitter *sub = arg;
    shared *s = sub->s;
    static uint8_t byte;
    lmc_memory_obj obj = {&byte, 1, 1, 0};
    for (size_t i = 0; i < PER_SUBMITTER; i++) {
        uint64_t id = sub->first + i;
        lmc_object_key k = l2_key("conc", (uint32_t)id, 0, 0, NULL);
        lmc_l2_task_kind kind = kind_of(id);
        lmc_status st =
            lmc_l2_workers_enqueue(s->w, kind, id, &k, kind == LMC_L2_TASK_LOOKUP ? NULL : &obj, 1);
        if (st == LMC_OK) {
            atomic_store(&s->accepted[id], true);
            atomic_fetch_add(&s->n_accepted, 1);
        } else if (st != LMC_ERR_CLOSED)
            return (void *)1;
    }
    return NULL;
}

/* Count each task's results in the sink: stores by popping, lookups and loads by taking. */
static void count_results(shared *s, unsigned *results)
{
    lmc_l2_store_result *r = NULL;
    size_t n = lmc_l2_adapter_pop_completed_stores(s->sink, &r);
    for (size_t i = 0; i < n; i++) {
        assert_true(r[i].task_id < TOTAL);
        results[r[i].task_id]++;
    }
    free(r);
    for (uint64_t id = 0; id < TOTAL; id++) {
        lmc_bitmap bm;
        bool got =
            kind_of(id) == LMC_L2_TASK_LOOKUP ? lmc_l2_adapter_take_lookup_result(s->sink, id, &bm)
            : kind_of(id) == LMC_L2_TASK_LOAD ? lmc_l2_adapter_take_load_result(s->sink, id, &bm)
                                              : false;
        if (got) {
            results[id]++;
            lmc_bitmap_free(&bm);
        }
    }
}

static void run_round(bool stop_midway)
{
    shared *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->sink =
        l2_adapter_from(NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}");
    assert_non_null(s->sink);
    lmc_l2_workers_config cfg = {
        .name = "l2-twc",
        .instances = &g_instances,
        .threads = WORKERS,
        .base = s->sink,
        .hooks = {.run = {run, run, run}},
        .ud = s,
    };
    assert_int_equal(lmc_l2_workers_start(&cfg, &s->w, NULL), LMC_OK);

    pthread_t th[SUBMITTERS];
    submitter subs[SUBMITTERS];
    for (size_t i = 0; i < SUBMITTERS; i++) {
        subs[i] = (submitter){s, i * PER_SUBMITTER};
        assert_int_equal(pthread_create(&th[i], NULL, submit_main, &subs[i]), 0);
    }
    if (stop_midway) {
        while (atomic_load(&s->n_accepted) < TOTAL / 8)
            lmc_sleep_ns(20000u);
        lmc_l2_workers_stop(s->w); /* submissions still going on: later ones are refused */
    }
    for (size_t i = 0; i < SUBMITTERS; i++) {
        void *rv = NULL;
        pthread_join(th[i], &rv);
        assert_null(rv);
    }
    if (!stop_midway) {
        /* Let every task run before the stop, so none is failed by destroy. */
        uint64_t deadline = lmc_mono_ns() + (uint64_t)L2_WAIT_MS * 1000000u;
        for (;;) {
            lmc_l2_workers_stats st = lmc_l2_workers_get_stats(s->w);
            if ((st.queued == 0 && st.deferred == 0) || lmc_mono_ns() > deadline)
                break;
            lmc_sleep_ns(1000000u);
        }
    }
    lmc_l2_workers_destroy(s->w);

    unsigned *results = calloc(TOTAL, sizeof(*results));
    assert_non_null(results);
    count_results(s, results);
    size_t accepted = 0;
    for (size_t id = 0; id < TOTAL; id++) {
        bool acc = atomic_load(&s->accepted[id]);
        accepted += acc;
        assert_int_equal(results[id], acc ? 1 : 0);
        assert_true(atomic_load(&s->ran[id]) <= 1);
        if (!stop_midway)
            assert_int_equal(atomic_load(&s->ran[id]), 1);
    }
    if (!stop_midway)
        assert_int_equal(accepted, TOTAL);
    else
        assert_true(accepted >= TOTAL / 8);
    free(results);
    lmc_l2_adapter_destroy(s->sink);
    free(s);
}

static void test_every_task_of_many_submitters_completes_once(void **state)
{
    (void)state;
    run_round(false);
}

static void test_a_stop_during_submissions_completes_each_accepted_task_once(void **state)
{
    (void)state;
    run_round(true);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_task_of_many_submitters_completes_once),
        cmocka_unit_test(test_a_stop_during_submissions_completes_each_accepted_task_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
