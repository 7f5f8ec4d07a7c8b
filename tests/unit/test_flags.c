/*
 * test_flags.c -- the shared command-line value helpers (src/core/flags.h):
 * "--flag value" / "--flag=value" and the number parsers' values and
 * messages, which the commands print unchanged.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/flags.h"

static void test_flag_value_takes_the_next_argument_or_the_text_after_equals(void **state)
{
    (void)state;
    char *argv[] = {"cmd", "--port", "80", "--port=81", NULL};
    int i = 1;
    bool m = false;
    assert_string_equal(lmc_flag_value("--port", 4, argv, &i, &m), "80");
    assert_true(m);
    assert_int_equal(i, 2); /* advanced past the value */
    i = 3;
    assert_string_equal(lmc_flag_value("--port", 4, argv, &i, &m), "81");
    assert_true(m);
    assert_int_equal(i, 3);
}

static void test_flag_value_at_the_end_matches_without_a_value(void **state)
{
    (void)state;
    char *argv[] = {"cmd", "--port", NULL};
    int i = 1;
    bool m = false;
    assert_null(lmc_flag_value("--port", 2, argv, &i, &m));
    assert_true(m);
    assert_int_equal(i, 1);
}

static void test_flag_value_does_not_match_a_longer_name(void **state)
{
    (void)state;
    char *argv[] = {"cmd", "--output-dir", "x", NULL};
    int i = 1;
    bool m = true;
    assert_null(lmc_flag_value("--output", 3, argv, &i, &m));
    assert_false(m);
    assert_int_equal(i, 1);
    assert_null(lmc_flag_value("--port", 3, argv, &i, &m));
    assert_false(m);
}

static void test_parse_u64_accepts_the_range_and_names_what_is_wrong(void **state)
{
    (void)state;
    uint64_t v = 0;
    lmc_error err;
    assert_int_equal(lmc_flag_parse_u64("--n", "65535", 1, 65535, &v, &err), LMC_OK);
    assert_int_equal(v, 65535);
    assert_int_equal(lmc_flag_parse_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v, &err),
                     LMC_OK);
    assert_true(v == UINT64_MAX);
    static const char *const junk[] = {"-1", "", "12x", "18446744073709551616"};
    for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++) {
        v = 7;
        assert_int_equal(lmc_flag_parse_u64("--n", junk[k], 0, UINT64_MAX, &v, &err),
                         LMC_ERR_INVALID);
        char want[128];
        snprintf(want, sizeof(want), "--n: '%s' is not a non-negative integer", junk[k]);
        assert_string_equal(err.msg, want);
        assert_int_equal(v, 7); /* untouched on failure */
    }
    assert_int_equal(lmc_flag_parse_u64("--port", "0", 1, 65535, &v, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--port: 0 is not in [1, 65535]");
}

static void test_parse_int_reads_like_strtoll_and_names_what_is_wrong(void **state)
{
    (void)state;
    int64_t v = 0;
    lmc_error err;
    assert_int_equal(lmc_flag_parse_int("--n", "-5", -10, 10, &v, &err), LMC_OK);
    assert_int_equal(v, -5);
    assert_int_equal(lmc_flag_parse_int("--n", " +7", -10, 10, &v, &err), LMC_OK);
    assert_int_equal(v, 7);
    assert_int_equal(lmc_flag_parse_int("--port", "x", 1, 65535, &v, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--port: 'x' is not an integer");
    assert_int_equal(lmc_flag_parse_int("--port", NULL, 1, 65535, &v, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--port: '' is not an integer");
    assert_int_equal(lmc_flag_parse_int("--port", "99999999999999999999", 1, 65535, &v, &err),
                     LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--port: '99999999999999999999' is not an integer");
    assert_int_equal(lmc_flag_parse_int("--port", "70000", 1, 65535, &v, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "--port: 70000 is not in [1, 65535]");
}

static void test_parse_double_takes_any_whole_number_text(void **state)
{
    (void)state;
    double d = 0;
    lmc_error err;
    assert_int_equal(lmc_flag_parse_double("--f", "-0.5", &d, &err), LMC_OK);
    assert_true(d == -0.5);
    assert_int_equal(lmc_flag_parse_double("--f", "inf", &d, &err), LMC_OK);
    assert_true(isinf(d));
    static const char *const junk[] = {"", "1.5x", "1e999"};
    for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++) {
        assert_int_equal(lmc_flag_parse_double("--f", junk[k], &d, &err), LMC_ERR_INVALID);
        char want[64];
        snprintf(want, sizeof(want), "--f: '%s' is not a number", junk[k]);
        assert_string_equal(err.msg, want);
    }
}

static void test_parse_nonneg_double_refuses_negative_and_non_finite(void **state)
{
    (void)state;
    double d = -1;
    lmc_error err;
    assert_int_equal(lmc_flag_parse_nonneg_double("--f", "0", &d, &err), LMC_OK);
    assert_true(d == 0.0);
    assert_int_equal(lmc_flag_parse_nonneg_double("--f", "2.5", &d, &err), LMC_OK);
    assert_true(d == 2.5);
    static const char *const bad[] = {"-0.1", "inf", "nan", "", "x"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        d = 9;
        assert_int_equal(lmc_flag_parse_nonneg_double("--f", bad[k], &d, &err), LMC_ERR_INVALID);
        char want[64];
        snprintf(want, sizeof(want), "--f: '%s' is not a finite number >= 0", bad[k]);
        assert_string_equal(err.msg, want);
        assert_true(d == 9);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_value_takes_the_next_argument_or_the_text_after_equals),
        cmocka_unit_test(test_flag_value_at_the_end_matches_without_a_value),
        cmocka_unit_test(test_flag_value_does_not_match_a_longer_name),
        cmocka_unit_test(test_parse_u64_accepts_the_range_and_names_what_is_wrong),
        cmocka_unit_test(test_parse_int_reads_like_strtoll_and_names_what_is_wrong),
        cmocka_unit_test(test_parse_double_takes_any_whole_number_text),
        cmocka_unit_test(test_parse_nonneg_double_refuses_negative_and_non_finite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
