/*
 * test_replay_stats.c -- the replay statistics collector (spec section 7):
 * nearest-rank percentiles, per-qualname buckets, the exact mean, the
 * duration marks and lateness. Expected values were produced by python3
 * running the same steps as LMCache's _stats.py (statistics.fmean). The
 * CSV and JSON renderings are tested in test_replay_output.c.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/stats.h"

/* ---- helpers ------------------------------------------------------------ */

static void seq(double *v, size_t n, double first, double step)
{
    for (size_t i = 0; i < n; i++)
        v[i] = first + step * (double)i;
}

/* The summary entry of qualname (fails the test if absent). */
static const lmc_op_stats *find_op(const lmc_op_stats *ops, size_t n, const char *q)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ops[i].qualname, q) == 0)
            return &ops[i];
    fail_msg("no summary for '%s'", q);
    return NULL;
}

/* The collector of the export examples (see gen script in the file comment). */
/* ---- percentiles ---------------------------------------------------------- */

static void test_percentile_of_empty_input_is_zero(void **state)
{
    (void)state;
    assert_true(lmc_percentile(NULL, 0, 50) == 0.0);
}

static void test_percentile_p0_is_the_minimum(void **state)
{
    (void)state;
    double v[] = {3.0, 5.0, 9.0};
    assert_true(lmc_percentile(v, 3, 0) == 3.0);
    assert_true(lmc_percentile(v, 3, -5) == 3.0);
}

static void test_percentile_p100_is_the_maximum(void **state)
{
    (void)state;
    double v[] = {3.0, 5.0, 9.0};
    assert_true(lmc_percentile(v, 3, 100) == 9.0);
    assert_true(lmc_percentile(v, 3, 150) == 9.0);
}

static void test_percentile_p50_of_1_to_100_is_50(void **state)
{
    (void)state;
    double v[100];
    seq(v, 100, 1.0, 1.0);
    assert_true(lmc_percentile(v, 100, 50) == 50.0);
}

static void test_percentile_p99_of_1_to_100_is_99(void **state)
{
    (void)state;
    double v[100];
    seq(v, 100, 1.0, 1.0);
    assert_true(lmc_percentile(v, 100, 99) == 99.0);
}

static void test_percentile_p7_of_1_to_100_is_7_because_rank_multiplies_first(void **state)
{
    (void)state;
    double v[100];
    seq(v, 100, 1.0, 1.0);
    assert_true(lmc_percentile(v, 100, 7) == 7.0);
}

static void test_percentile_fractional_rank_rounds_up(void **state)
{
    (void)state;
    double v[7];
    seq(v, 7, 10.0, 10.0); /* 10..70: rank ceil(3.5) = 4 */
    assert_true(lmc_percentile(v, 7, 50) == 40.0);
}

static void test_percentile_p90_of_1_to_10_is_9(void **state)
{
    (void)state;
    double v[10];
    seq(v, 10, 1.0, 1.0);
    assert_true(lmc_percentile(v, 10, 90) == 9.0);
}

static void test_percentile_of_one_sample_is_that_sample(void **state)
{
    (void)state;
    double v[] = {4.5};
    assert_true(lmc_percentile(v, 1, 1) == 4.5);
    assert_true(lmc_percentile(v, 1, 99.9) == 4.5);
}

/* ---- record and summary -------------------------------------------------- */

static void test_summary_of_empty_collector_is_empty(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 0);
    lmc_replay_stats_free_summary(ops, 0);
    lmc_replay_stats_destroy(s);
}

static void test_record_summary_gives_count_min_max_mean_in_ms(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    double lat[] = {0.1, 0.003, 0.001, 0.004, 0.002};
    for (size_t i = 0; i < 5; i++)
        lmc_replay_stats_record(s, "q", lat[i], false);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 1);
    assert_string_equal(ops[0].qualname, "q");
    assert_int_equal(ops[0].count, 5);
    assert_int_equal(ops[0].error_count, 0);
    assert_true(ops[0].min_ms == 1.0);
    assert_true(ops[0].max_ms == 100.0);
    assert_true(ops[0].mean_ms == 22.0);
    assert_true(ops[0].p50_ms == 3.0);
    assert_true(ops[0].p90_ms == 100.0);
    assert_true(ops[0].p99_ms == 100.0);
    assert_true(ops[0].total_s == 0.11);
    lmc_replay_stats_free_summary(ops, 1);
    lmc_replay_stats_destroy(s);
}

static void test_mean_is_exactly_rounded_like_fmean(void **state)
{
    (void)state;
    /* Ten 0.1 ms samples: a naive sum gives 0.09999999999999999. */
    lmc_replay_stats *s = lmc_replay_stats_create();
    for (int i = 0; i < 10; i++)
        lmc_replay_stats_record(s, "q", 0.0001, false);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 1);
    assert_true(ops[0].mean_ms == 0.1);
    lmc_replay_stats_free_summary(ops, 1);
    lmc_replay_stats_destroy(s);
}

static void test_mean_survives_cancellation_like_fsum(void **state)
{
    (void)state;
    /* 1 ms, 1e16 ms, -1e16 ms: fsum gives 1, a naive sum 0. */
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "q", 0.001, false);
    lmc_replay_stats_record(s, "q", 1e13, false);
    lmc_replay_stats_record(s, "q", -1e13, false);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 1);
    assert_true(ops[0].mean_ms == 1.0 / 3.0);
    lmc_replay_stats_free_summary(ops, 1);
    lmc_replay_stats_destroy(s);
}

static void test_failed_calls_count_as_errors_without_samples(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "q", 0.002, false);
    lmc_replay_stats_record(s, "q", 9.0, true);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 1);
    assert_int_equal(ops[0].count, 1);
    assert_int_equal(ops[0].error_count, 1);
    assert_true(ops[0].max_ms == 2.0); /* the failed 9 s left no sample */
    lmc_replay_stats_free_summary(ops, 1);
    lmc_replay_stats_destroy(s);
}

static void test_failed_calls_of_other_qualnames_are_bucketed_separately(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "ok", 0.001, false);
    lmc_replay_stats_record(s, "bad", 0.001, true);
    lmc_op_stats *ops = NULL;
    size_t n = lmc_replay_stats_summary(s, &ops);
    assert_int_equal(n, 2);
    assert_int_equal(find_op(ops, n, "ok")->count, 1);
    assert_int_equal(find_op(ops, n, "ok")->error_count, 0);
    assert_int_equal(find_op(ops, n, "bad")->count, 0);
    assert_int_equal(find_op(ops, n, "bad")->error_count, 1);
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_stats_destroy(s);
}

static void test_error_only_bucket_appears_with_zeros(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "q", 0.25, true);
    lmc_replay_stats_record(s, "q", 0.5, true);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 1);
    assert_int_equal(ops[0].count, 0);
    assert_int_equal(ops[0].error_count, 2);
    assert_true(ops[0].total_s == 0.0);
    assert_true(ops[0].mean_ms == 0.0);
    assert_true(ops[0].p50_ms == 0.0);
    assert_true(ops[0].p90_ms == 0.0);
    assert_true(ops[0].p99_ms == 0.0);
    assert_true(ops[0].min_ms == 0.0);
    assert_true(ops[0].max_ms == 0.0);
    lmc_replay_stats_free_summary(ops, 1);
    lmc_replay_stats_destroy(s);
}

static void test_summary_is_sorted_by_qualname(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    const char *names[] = {"m.z", "m.a", "M.b", "m.a.__enter__", "m.b"};
    for (size_t i = 0; i < 5; i++)
        lmc_replay_stats_record(s, names[i], 0.001, false);
    lmc_op_stats *ops = NULL;
    assert_int_equal(lmc_replay_stats_summary(s, &ops), 5);
    assert_string_equal(ops[0].qualname, "M.b");
    assert_string_equal(ops[1].qualname, "m.a");
    assert_string_equal(ops[2].qualname, "m.a.__enter__");
    assert_string_equal(ops[3].qualname, "m.b");
    assert_string_equal(ops[4].qualname, "m.z");
    lmc_replay_stats_free_summary(ops, 5);
    lmc_replay_stats_destroy(s);
}

static void test_summary_does_not_disturb_later_recording(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "q", 0.003, false);
    lmc_replay_stats_record(s, "q", 0.001, false);
    lmc_op_stats *ops = NULL;
    size_t n = lmc_replay_stats_summary(s, &ops);
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_stats_record(s, "q", 0.002, false);
    n = lmc_replay_stats_summary(s, &ops);
    assert_int_equal(n, 1);
    assert_int_equal(ops[0].count, 3);
    assert_true(ops[0].p50_ms == 2.0);
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_stats_destroy(s);
}

/* ---- duration ---------------------------------------------------------- */

static void test_duration_is_end_minus_start(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_mark_start(s, 100.0);
    lmc_replay_stats_mark_end(s, 105.5);
    assert_true(lmc_replay_stats_duration_s(s) == 5.5);
    lmc_replay_stats_destroy(s);
}

static void test_duration_is_zero_when_unmarked(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    assert_true(lmc_replay_stats_duration_s(s) == 0.0);
    lmc_replay_stats_mark_start(s, 100.0);
    assert_true(lmc_replay_stats_duration_s(s) == 0.0);
    lmc_replay_stats_destroy(s);
}

static void test_duration_is_never_negative(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_mark_start(s, 105.0);
    lmc_replay_stats_mark_end(s, 100.0);
    assert_true(lmc_replay_stats_duration_s(s) == 0.0);
    lmc_replay_stats_destroy(s);
}

/* ---- lateness ------------------------------------------------------------ */

static void test_lateness_percentiles_are_in_microseconds(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    for (int i = 100; i >= 1; i--)
        lmc_replay_stats_record_lateness(s, (double)i / 1024.0); /* exact in binary */
    lmc_lateness_stats l = lmc_replay_stats_lateness(s);
    assert_int_equal(l.count, 100);
    assert_true(l.p50_us == 50.0 / 1024.0 * 1e6);
    assert_true(l.p99_us == 99.0 / 1024.0 * 1e6);
    assert_true(l.max_us == 100.0 / 1024.0 * 1e6);
    assert_true(l.mean_us == 50.5 / 1024.0 * 1e6);
    lmc_replay_stats_destroy(s);
}

static void test_lateness_without_samples_is_zero(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_lateness_stats l = lmc_replay_stats_lateness(s);
    assert_int_equal(l.count, 0);
    assert_true(l.p50_us == 0.0 && l.p99_us == 0.0 && l.max_us == 0.0 && l.mean_us == 0.0);
    lmc_replay_stats_destroy(s);
}

static void test_lateness_of_an_early_dispatch_counts_as_zero(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record_lateness(s, -0.5);
    lmc_lateness_stats l = lmc_replay_stats_lateness(s);
    assert_int_equal(l.count, 1);
    assert_true(l.max_us == 0.0);
    lmc_replay_stats_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_of_empty_input_is_zero),
        cmocka_unit_test(test_percentile_p0_is_the_minimum),
        cmocka_unit_test(test_percentile_p100_is_the_maximum),
        cmocka_unit_test(test_percentile_p50_of_1_to_100_is_50),
        cmocka_unit_test(test_percentile_p99_of_1_to_100_is_99),
        cmocka_unit_test(test_percentile_p7_of_1_to_100_is_7_because_rank_multiplies_first),
        cmocka_unit_test(test_percentile_fractional_rank_rounds_up),
        cmocka_unit_test(test_percentile_p90_of_1_to_10_is_9),
        cmocka_unit_test(test_percentile_of_one_sample_is_that_sample),
        cmocka_unit_test(test_summary_of_empty_collector_is_empty),
        cmocka_unit_test(test_record_summary_gives_count_min_max_mean_in_ms),
        cmocka_unit_test(test_mean_is_exactly_rounded_like_fmean),
        cmocka_unit_test(test_mean_survives_cancellation_like_fsum),
        cmocka_unit_test(test_failed_calls_count_as_errors_without_samples),
        cmocka_unit_test(test_failed_calls_of_other_qualnames_are_bucketed_separately),
        cmocka_unit_test(test_error_only_bucket_appears_with_zeros),
        cmocka_unit_test(test_summary_is_sorted_by_qualname),
        cmocka_unit_test(test_summary_does_not_disturb_later_recording),
        cmocka_unit_test(test_duration_is_end_minus_start),
        cmocka_unit_test(test_duration_is_zero_when_unmarked),
        cmocka_unit_test(test_duration_is_never_negative),
        cmocka_unit_test(test_lateness_percentiles_are_in_microseconds),
        cmocka_unit_test(test_lateness_without_samples_is_zero),
        cmocka_unit_test(test_lateness_of_an_early_dispatch_counts_as_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
