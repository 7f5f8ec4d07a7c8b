/*
 * test_replay_stats_concurrency.c -- the replay statistics collector under
 * concurrent recording (spec section 7: "4 threads x 100 -> count 400").
 * The name ends in _concurrency so the TSan build runs it.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/stats.h"

#define N_THREADS 4
#define N_RECORDS 100

typedef struct worker_arg {
    lmc_replay_stats *stats;
    int id;
    bool own_qualname; /* record under "op.<id>" instead of the shared "op" */
} worker_arg;

static void *record_worker(void *p)
{
    const worker_arg *a = p;
    char q[32];
    snprintf(q, sizeof(q), a->own_qualname ? "op.%d" : "op", a->id);
    for (int i = 0; i < N_RECORDS; i++) {
        lmc_replay_stats_record(a->stats, q, 0.001 * (double)(i + 1), false);
        lmc_replay_stats_record_lateness(a->stats, 1e-6 * (double)i);
    }
    return NULL;
}

static void run_workers(lmc_replay_stats *s, bool own_qualname)
{
    pthread_t t[N_THREADS];
    worker_arg args[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        args[i] = (worker_arg){.stats = s, .id = i, .own_qualname = own_qualname};
        assert_int_equal(pthread_create(&t[i], NULL, record_worker, &args[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
}

static void test_four_threads_recording_one_qualname_count_400(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    run_workers(s, false);
    lmc_op_stats *ops = NULL;
    size_t n = lmc_replay_stats_summary(s, &ops);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0].count, N_THREADS * N_RECORDS);
    assert_true(ops[0].min_ms == 1.0);
    assert_true(ops[0].max_ms == 100.0);
    lmc_replay_stats_free_summary(ops, n);
    assert_int_equal(lmc_replay_stats_lateness(s).count, N_THREADS * N_RECORDS);
    lmc_replay_stats_destroy(s);
}

static void test_four_threads_creating_buckets_each_get_their_own(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    run_workers(s, true);
    lmc_op_stats *ops = NULL;
    size_t n = lmc_replay_stats_summary(s, &ops);
    assert_int_equal(n, N_THREADS);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "op.%zu", i);
        assert_string_equal(ops[i].qualname, want);
        assert_int_equal(ops[i].count, N_RECORDS);
    }
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_stats_destroy(s);
}

typedef struct reader_arg {
    lmc_replay_stats *stats;
    int stop;       /* atomic: set by the main thread when the writers are done */
    bool monotonic; /* checked by the main thread: cmocka asserts belong there */
} reader_arg;

static void *summary_reader(void *p)
{
    reader_arg *a = p;
    uint64_t last = 0;
    for (int rounds = 0; rounds < 1000; rounds++) {
        lmc_op_stats *ops = NULL;
        size_t n = lmc_replay_stats_summary(a->stats, &ops);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += ops[i].count;
        lmc_replay_stats_free_summary(ops, n);
        if (total < last) /* counts only grow */
            a->monotonic = false;
        last = total;
        (void)lmc_replay_stats_lateness(a->stats);
        (void)lmc_replay_stats_duration_s(a->stats);
        if (__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE))
            break;
    }
    return NULL;
}

static void test_summaries_while_recording_see_consistent_counts(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    reader_arg ra = {.stats = s, .stop = 0, .monotonic = true};
    pthread_t reader;
    assert_int_equal(pthread_create(&reader, NULL, summary_reader, &ra), 0);
    lmc_replay_stats_mark_start(s, 1.0);
    run_workers(s, true);
    lmc_replay_stats_mark_end(s, 2.0);
    __atomic_store_n(&ra.stop, 1, __ATOMIC_RELEASE);
    assert_int_equal(pthread_join(reader, NULL), 0);
    assert_true(ra.monotonic);
    lmc_op_stats *ops = NULL;
    size_t n = lmc_replay_stats_summary(s, &ops);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ops[i].count;
    assert_int_equal(total, N_THREADS * N_RECORDS);
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_stats_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_threads_recording_one_qualname_count_400),
        cmocka_unit_test(test_four_threads_creating_buckets_each_get_their_own),
        cmocka_unit_test(test_summaries_while_recording_see_consistent_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
