/*
 * test_names.c -- joining and searching tables of names (core/names.h),
 * the helpers every registry derives its lists with.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "core/names.h"

static const char *const ABC[] = {"a", "bb", "ccc"};

static void test_join_with_one_separator(void **state)
{
    (void)state;
    char buf[64];
    assert_int_equal(lmc_names_join(ABC, 3, ", ", NULL, buf, sizeof(buf)), 10);
    assert_string_equal(buf, "a, bb, ccc");
}

static void test_join_with_a_last_separator(void **state)
{
    (void)state;
    char buf[64];
    lmc_names_join(ABC, 3, ", ", " or ", buf, sizeof(buf));
    assert_string_equal(buf, "a, bb or ccc");
    lmc_names_join(ABC, 2, ", ", " or ", buf, sizeof(buf));
    assert_string_equal(buf, "a or bb");
    lmc_names_join(ABC, 1, ", ", " or ", buf, sizeof(buf));
    assert_string_equal(buf, "a");
    lmc_names_join(ABC, 0, ", ", " or ", buf, sizeof(buf));
    assert_string_equal(buf, "");
}

static void test_join_skips_null_entries(void **state)
{
    (void)state;
    static const char *const holes[] = {NULL, "x", NULL, "y", NULL};
    char buf[64];
    lmc_names_join(holes, 5, ", ", " or ", buf, sizeof(buf));
    assert_string_equal(buf, "x or y");
}

static void test_join_truncates_and_reports_the_full_length(void **state)
{
    (void)state;
    char buf[6];
    assert_int_equal(lmc_names_join(ABC, 3, ", ", NULL, buf, sizeof(buf)), 10);
    assert_string_equal(buf, "a, bb");
    assert_int_equal(lmc_names_join(ABC, 3, ", ", NULL, NULL, 0), 10);
}

static void test_find_is_exact_and_length_bounded(void **state)
{
    (void)state;
    size_t i = 99;
    assert_true(lmc_names_find(ABC, 3, "bb", 2, &i));
    assert_int_equal(i, 1);
    assert_true(lmc_names_find(ABC, 3, "cccx", 3, &i)); /* only the first len bytes count */
    assert_int_equal(i, 2);
    assert_false(lmc_names_find(ABC, 3, "b", 1, &i));
    assert_false(lmc_names_find(ABC, 3, "BB", 2, &i));
    assert_false(lmc_names_find(ABC, 3, NULL, 0, &i));
    assert_int_equal(i, 2); /* untouched on a miss */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_with_one_separator),
        cmocka_unit_test(test_join_with_a_last_separator),
        cmocka_unit_test(test_join_skips_null_entries),
        cmocka_unit_test(test_join_truncates_and_reports_the_full_length),
        cmocka_unit_test(test_find_is_exact_and_length_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
