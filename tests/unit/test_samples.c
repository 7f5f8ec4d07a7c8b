/*
 * test_samples.c -- the growable sample array, sorting and the midmean
 * (src/core/samples.h).
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

static void test_median_is_the_middle_value_or_the_mean_of_the_middle_two(void **state)
{
    (void)state;
    assert_true(lmc_median(NULL, 0) == 0.0);
    double odd[] = {1, 2, 9};
    assert_true(lmc_median(odd, 3) == 2.0);
    double even[] = {1, 2, 4, 9};
    assert_true(lmc_median(even, 4) == 3.0);
}

static void test_midmean_averages_the_middle_half_and_ignores_the_tails(void **state)
{
    (void)state;
    /* 8 values: drops 2 at each end, averages 3, 4, 5, 6. */
    double v[] = {1, 2, 3, 4, 5, 6, 1000, 1e9};
    assert_true(lmc_midmean(v, 8) == 4.5);
    /* 9 values: drops 2 at each end (n/4 rounds down), averages the middle 5. */
    double w[] = {-1e9, 0, 10, 10, 20, 30, 30, 40, 1e9};
    assert_true(lmc_midmean(w, 9) == 20.0);
    /* Values a whole tick apart average to what lies between them, as a p50 cannot. */
    double ticks[] = {30, 30, 30, 30, 40, 40, 40, 40};
    assert_true(lmc_midmean(ticks, 8) == 35.0);
    assert_true(lmc_percentile(ticks, 8, 50) == 30.0);
}

static void test_midmean_of_few_values_is_their_median(void **state)
{
    (void)state;
    assert_true(lmc_midmean(NULL, 0) == 0.0);
    double one[] = {7};
    assert_true(lmc_midmean(one, 1) == 7.0);
    double two[] = {2, 4};
    assert_true(lmc_midmean(two, 2) == 3.0);
    double three[] = {1, 5, 100};
    assert_true(lmc_midmean(three, 3) == 5.0);
    /* 4 values: drops one at each end. */
    double four[] = {0, 2, 4, 1000};
    assert_true(lmc_midmean(four, 4) == 3.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_keeps_every_value_in_order_across_growth),
        cmocka_unit_test(test_copy_of_no_samples_is_null),
        cmocka_unit_test(test_sort_orders_ascending_and_percentiles_read_the_sorted_values),
        cmocka_unit_test(test_median_is_the_middle_value_or_the_mean_of_the_middle_two),
        cmocka_unit_test(test_midmean_averages_the_middle_half_and_ignores_the_tails),
        cmocka_unit_test(test_midmean_of_few_values_is_their_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
