/*
 * test_replay_timeline.c -- replay/timeline.h: the time rule (non-finite and
 * negative times, implausible gaps judged by the next record), saturating
 * due times and the --time-scale bounds and messages.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <string.h>

#include "core/log.h"
#include "replay/timeline.h"

static double next(lmc_replay_timeline *tl, double t)
{
    return lmc_replay_timeline_next(tl, t, 0, "q");
}

static void test_ordinary_times_are_kept(void **state)
{
    (void)state;
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);
    assert_true(next(&tl, 0.5) == 0.5);
    assert_true(next(&tl, 59.0) == 59.0); /* within the first minute */
    assert_true(next(&tl, 58.0) == 58.0); /* earlier than its predecessor: due at once */
    assert_true(next(&tl, 100.0) == 100.0);
    assert_int_equal(tl.adjusted, 0);
}

static void test_non_finite_and_negative_times_go_with_their_predecessor(void **state)
{
    (void)state;
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);
    next(&tl, 3.0);
    assert_true(next(&tl, NAN) == 3.0);
    assert_true(next(&tl, INFINITY) == 3.0);
    assert_true(next(&tl, -1.0) == 3.0);
    assert_true(next(&tl, 3.5) == 3.5);
    assert_int_equal(tl.adjusted, 3);
}

static void test_an_outlier_is_capped_and_the_trace_goes_on_at_its_own_times(void **state)
{
    (void)state;
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);
    for (int i = 0; i <= 100; i++)
        next(&tl, i);                       /* 100 s of trace accepted */
    double moved = next(&tl, 1e9);          /* a flipped exponent bit */
    assert_true(moved == 200.0);            /* capped at the 100 s accepted so far */
    assert_true(next(&tl, 100.5) == 100.5); /* back to its own times */
    assert_true(next(&tl, 250.0) == 250.0);
    assert_int_equal(tl.adjusted, 1);
}

static void test_a_real_long_gap_is_cut_and_later_times_follow(void **state)
{
    (void)state;
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);
    /* An idle server: the first call 2 h after start, then calls 10 ms apart. */
    assert_true(next(&tl, 7200.0) == 60.0);
    assert_true(fabs(next(&tl, 7200.01) - 60.01) < 1e-9);
    assert_true(fabs(next(&tl, 7200.02) - 60.02) < 1e-9);
    assert_int_equal(tl.adjusted, 1);
}

static void test_a_replay_of_many_outliers_stays_in_proportion(void **state)
{
    (void)state;
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);
    double last = 0;
    for (int i = 0; i < 10000; i++) {
        double t = (i % 100 == 99) ? 1e300 : i * 0.01; /* 100 s of trace, 1% corrupt */
        double u = next(&tl, t);
        if (u > last)
            last = u;
    }
    /* At most (1 + k) x the real span plus k minutes, k = 100. */
    assert_true(last <= 101 * 100.0 + 100 * 60.0);
    assert_int_equal(tl.adjusted, 100);
}

static void test_due_offsets_saturate_instead_of_overflowing(void **state)
{
    (void)state;
    assert_int_equal(lmc_replay_due_offset_ns(1.5, 2.0), 3000000000ull);
    assert_int_equal(lmc_replay_due_offset_ns(1e300, 1e6), (uint64_t)INT64_MAX);
    assert_int_equal(lmc_replay_due_offset_ns(0.0, 1.0), 0);
    assert_int_equal(lmc_replay_due_offset_ns(NAN, 1.0), 0);
}

static void test_time_scale_bounds_and_messages(void **state)
{
    (void)state;
    double s = 0;
    lmc_error err;
    assert_int_equal(lmc_replay_parse_time_scale("0.5", &s, &err), LMC_OK);
    assert_true(s == 0.5);
    assert_int_equal(lmc_replay_parse_time_scale("1e-9", &s, &err), LMC_OK);
    assert_int_equal(lmc_replay_parse_time_scale("1e-320", &s, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--time-scale: '1e-320' is a number too close to 0 for this "
                                 "replay: the smallest scale is 1e-09 (as fast as possible)");
    assert_int_equal(lmc_replay_parse_time_scale("1e400", &s, &err), LMC_ERR_INVALID);
    assert_string_equal(
        err.msg, "--time-scale: '1e400' is too large to represent; the largest scale is 1e+06");
    assert_int_equal(lmc_replay_parse_time_scale("1e300", &s, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--time-scale: 1e+300 is above 1e+06 (one second of trace would "
                                 "take 1e+300 seconds)");
    assert_int_equal(lmc_replay_parse_time_scale("1e-12", &s, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "1e-12 is below 1e-09"));
    static const char *const bad[] = {"nan", "inf", "-1", "0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(lmc_replay_parse_time_scale(bad[i], &s, &err), LMC_ERR_INVALID);
        assert_non_null(strstr(err.msg, "is not a finite number > 0"));
    }
    assert_int_equal(lmc_replay_parse_time_scale("fast", &s, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--time-scale: 'fast' is not a number");
    assert_true(s == 1e-9); /* untouched by the failures */
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordinary_times_are_kept),
        cmocka_unit_test(test_non_finite_and_negative_times_go_with_their_predecessor),
        cmocka_unit_test(test_an_outlier_is_capped_and_the_trace_goes_on_at_its_own_times),
        cmocka_unit_test(test_a_real_long_gap_is_cut_and_later_times_follow),
        cmocka_unit_test(test_a_replay_of_many_outliers_stays_in_proportion),
        cmocka_unit_test(test_due_offsets_saturate_instead_of_overflowing),
        cmocka_unit_test(test_time_scale_bounds_and_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
