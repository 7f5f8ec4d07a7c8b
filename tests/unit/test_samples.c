/*
 * test_samples.c -- the growable sample array and sorting (src/core/samples.h).
 * The percentile definition itself is specified in test_replay_stats.c.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>

#include "core/samples.h"

static void test_push_keeps_every_value_in_order_across_growth(void **state)
{
    (void)state;
    lmc_samples s = LMC_SAMPLES_INIT;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(lmc_samples_push(&s, (double)i), LMC_OK);
    assert_int_equal(s.n, 1000);
    for (int i = 0; i < 1000; i++)
        assert_true(s.v[i] == (double)i);
    double *c = lmc_samples_copy(&s);
    assert_non_null(c);
    assert_true(c != s.v);
    assert_true(c[999] == 999.0);
    free(c);
    lmc_samples_free(&s);
    assert_null(s.v);
    assert_int_equal(s.n, 0);
    assert_int_equal(s.cap, 0);
}

static void test_copy_of_no_samples_is_null(void **state)
{
    (void)state;
    lmc_samples s = LMC_SAMPLES_INIT;
    assert_null(lmc_samples_copy(&s));
    lmc_samples_free(&s); /* of an empty one: fine */
}

static void test_sort_orders_ascending_and_percentiles_read_the_sorted_values(void **state)
{
    (void)state;
    double v[] = {5, -1, 3, 3, 10, 0.5};
    lmc_sort_doubles(v, 6);
    static const double want[] = {-1, 0.5, 3, 3, 5, 10};
    for (size_t i = 0; i < 6; i++)
        assert_true(v[i] == want[i]);
    assert_true(lmc_percentile(v, 6, 50) == 3.0);
    assert_true(lmc_percentile(v, 6, 99) == 10.0);
    lmc_sort_doubles(NULL, 0); /* nothing to sort */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_keeps_every_value_in_order_across_growth),
        cmocka_unit_test(test_copy_of_no_samples_is_null),
        cmocka_unit_test(test_sort_orders_ascending_and_percentiles_read_the_sorted_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
