/*
 * test_copy_pool_concurrency.c -- server/copy_pool.h: every item of a batch
 * runs exactly once, whoever takes it; helpers really take a share; the
 * error of the lowest failing item is the one returned and no item starts
 * after a failure is seen; small batches and a NULL pool stay on the
 * caller's thread, in order; several callers may post at once.
 */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "server/copy_pool.h"

#define MAX_ITEMS 256

typedef struct items {
    size_t n;
    atomic_int runs[MAX_ITEMS];  /* how often each item ran */
    pthread_t thread[MAX_ITEMS]; /* the thread that ran it */
    atomic_size_t order[MAX_ITEMS];
    atomic_size_t next_order;
    size_t fail_from;  /* items at or past it fail (n: none) */
    size_t fail_every; /* ... when (i - fail_from) % fail_every == 0 */
    atomic_int started;
    bool wait_for_two; /* each item waits until two items have started */
} items;

static void items_init(items *x, size_t n)
{
    memset(x, 0, sizeof(*x));
    x->n = n;
    x->fail_from = n;
    x->fail_every = 1;
}

static lmc_status run_item(void *ctx, size_t i, lmc_error *err)
{
    items *x = ctx;
    assert_true(i < x->n);
    atomic_fetch_add(&x->runs[i], 1);
    x->thread[i] = pthread_self();
    atomic_store(&x->order[i], atomic_fetch_add(&x->next_order, 1));
    atomic_fetch_add(&x->started, 1);
    if (x->wait_for_two) {
        uint64_t end = lmc_mono_ms() + 10000;
        while (atomic_load(&x->started) < 2 && lmc_mono_ms() < end)
            lmc_sleep_ns(100 * 1000);
    }
    if (i >= x->fail_from && (i - x->fail_from) % x->fail_every == 0)
        return lmc_error_set(err, LMC_ERR_IO, "item %zu failed", i);
    return LMC_OK;
}

static void assert_each_ran_once(const items *x)
{
    for (size_t i = 0; i < x->n; i++)
        assert_int_equal(atomic_load(&x->runs[i]), 1);
}

static void test_a_null_pool_runs_items_in_order_and_stops_at_the_first_failure(void **state)
{
    (void)state;
    items x;
    items_init(&x, 10);
    lmc_error err;
    assert_int_equal(lmc_copy_pool_run(NULL, x.n, 1 << 30, run_item, &x, &err), LMC_OK);
    assert_each_ran_once(&x);
    for (size_t i = 0; i < x.n; i++) {
        assert_true(pthread_equal(x.thread[i], pthread_self()));
        assert_int_equal(atomic_load(&x.order[i]), i);
    }
    items_init(&x, 10);
    x.fail_from = 4;
    assert_int_equal(lmc_copy_pool_run(NULL, x.n, 1 << 30, run_item, &x, &err), LMC_ERR_IO);
    assert_string_equal(err.msg, "item 4 failed");
    for (size_t i = 0; i < x.n; i++)
        assert_int_equal(atomic_load(&x.runs[i]), i <= 4 ? 1 : 0);
    assert_int_equal(lmc_copy_pool_helpers(NULL), 0);
}

static void test_helpers_take_a_share_of_a_batch(void **state)
{
    (void)state;
    lmc_copy_pool *p = NULL;
    lmc_error err;
    assert_int_equal(lmc_copy_pool_create(1, 0, &p, &err), LMC_OK);
    assert_int_equal(lmc_copy_pool_helpers(p), 1);
    /* Each of the two items waits until both have started: only two threads finish them. */
    items x;
    items_init(&x, 2);
    x.wait_for_two = true;
    assert_int_equal(lmc_copy_pool_run(p, x.n, 1, run_item, &x, &err), LMC_OK);
    assert_each_ran_once(&x);
    assert_int_equal(atomic_load(&x.started), 2);
    assert_false(pthread_equal(x.thread[0], x.thread[1]));
    assert_true(pthread_equal(x.thread[0], pthread_self()) ||
                pthread_equal(x.thread[1], pthread_self()));
    lmc_copy_pool_destroy(p);
}

static void test_a_batch_below_the_threshold_stays_on_its_caller(void **state)
{
    (void)state;
    lmc_copy_pool *p = NULL;
    lmc_error err;
    assert_int_equal(lmc_copy_pool_create(3, 4096, &p, &err), LMC_OK);
    for (int k = 0; k < 50; k++) {
        items x;
        items_init(&x, 8);
        assert_int_equal(lmc_copy_pool_run(p, x.n, 4095, run_item, &x, &err), LMC_OK);
        assert_each_ran_once(&x);
        for (size_t i = 0; i < x.n; i++) {
            assert_true(pthread_equal(x.thread[i], pthread_self()));
            assert_int_equal(atomic_load(&x.order[i]), i);
        }
        /* One item is never shared, whatever its size. */
        items_init(&x, 1);
        assert_int_equal(lmc_copy_pool_run(p, x.n, 1 << 30, run_item, &x, &err), LMC_OK);
        assert_true(pthread_equal(x.thread[0], pthread_self()));
    }
    lmc_copy_pool_destroy(p);
}

static void test_the_lowest_failing_item_is_the_error_and_nothing_runs_twice(void **state)
{
    (void)state;
    lmc_copy_pool *p = NULL;
    lmc_error err;
    assert_int_equal(lmc_copy_pool_create(3, 0, &p, &err), LMC_OK);
    for (int k = 0; k < 200; k++) {
        items x;
        items_init(&x, 64);
        x.fail_from = 20;
        x.fail_every = 7; /* 20, 27, 34, ... fail */
        lmc_error_clear(&err);
        assert_int_equal(lmc_copy_pool_run(p, x.n, 1 << 30, run_item, &x, &err), LMC_ERR_IO);
        /* Items are taken in order, so item 20 ran whenever 27 did: its error wins. */
        assert_int_equal(atomic_load(&x.runs[20]), 1);
        char want[64];
        snprintf(want, sizeof(want), "item %d failed", 20);
        assert_string_equal(err.msg, want);
        for (size_t i = 0; i < x.n; i++)
            assert_true(atomic_load(&x.runs[i]) <= 1);
    }
    lmc_copy_pool_destroy(p);
}

typedef struct poster {
    lmc_copy_pool *p;
    int rounds;
    bool ok;
} poster;

static void *poster_main(void *arg)
{
    poster *w = arg;
    w->ok = true;
    for (int r = 0; r < w->rounds; r++) {
        static _Thread_local items x;
        items_init(&x, 1 + (size_t)r % MAX_ITEMS);
        lmc_error err;
        if (lmc_copy_pool_run(w->p, x.n, 1 << 30, run_item, &x, &err) != LMC_OK)
            w->ok = false;
        for (size_t i = 0; i < x.n; i++)
            if (atomic_load(&x.runs[i]) != 1)
                w->ok = false;
    }
    return NULL;
}

static void test_callers_on_several_threads_share_the_helpers(void **state)
{
    (void)state;
    lmc_copy_pool *p = NULL;
    lmc_error err;
    assert_int_equal(lmc_copy_pool_create(2, 0, &p, &err), LMC_OK);
    pthread_t t[4];
    poster w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (poster){.p = p, .rounds = 300};
        assert_int_equal(pthread_create(&t[i], NULL, poster_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(w[i].ok);
    }
    lmc_copy_pool_destroy(p);
}

static void test_create_refuses_a_negative_helper_count(void **state)
{
    (void)state;
    lmc_copy_pool *p = (lmc_copy_pool *)&p;
    lmc_error err;
    assert_int_equal(lmc_copy_pool_create(-1, 0, &p, &err), LMC_ERR_INVALID);
    assert_null(p);
    assert_string_equal(err.msg, "copy pool: -1 helpers");
    assert_int_equal(lmc_copy_pool_create(0, 0, &p, &err), LMC_OK);
    assert_int_equal(lmc_copy_pool_helpers(p), 0);
    items x;
    items_init(&x, 5);
    assert_int_equal(lmc_copy_pool_run(p, x.n, 1 << 30, run_item, &x, &err), LMC_OK);
    assert_each_ran_once(&x);
    lmc_copy_pool_destroy(p);
    lmc_copy_pool_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_null_pool_runs_items_in_order_and_stops_at_the_first_failure),
        cmocka_unit_test(test_helpers_take_a_share_of_a_batch),
        cmocka_unit_test(test_a_batch_below_the_threshold_stays_on_its_caller),
        cmocka_unit_test(test_the_lowest_failing_item_is_the_error_and_nothing_runs_twice),
        cmocka_unit_test(test_callers_on_several_threads_share_the_helpers),
        cmocka_unit_test(test_create_refuses_a_negative_helper_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
