/*
 * test_strbuf.c -- the string builder's word wrap (core/strbuf.h), which
 * every note under a table goes through.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

static char *wrapped(const char *prefix, const char *indent, size_t width, const char *text)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_wrap(&b, prefix, indent, width, text);
    char *s = lmc_strbuf_finish(&b);
    assert_non_null(s);
    return s;
}

static void test_wrap_breaks_at_the_last_space_that_fits(void **state)
{
    (void)state;
    char *s = wrapped("note: ", "      ", 20, "one two three four five six");
    /* "note: one two three" is 19 columns; " four" would make 24. */
    assert_string_equal(s, "note: one two three\n      four five six\n");
    free(s);
}

static void test_wrap_fills_a_line_to_exactly_the_width(void **state)
{
    (void)state;
    char *s = wrapped("> ", "  ", 10, "abc defg hij");
    assert_string_equal(s, "> abc defg\n  hij\n");
    free(s);
}

static void test_wrap_collapses_runs_of_spaces_and_drops_the_ends(void **state)
{
    (void)state;
    char *s = wrapped("note: ", "      ", 78, "  a   b  c  ");
    assert_string_equal(s, "note: a b c\n");
    free(s);
}

static void test_a_word_wider_than_the_line_gets_a_line_of_its_own(void **state)
{
    (void)state;
    char *s = wrapped("n: ", "   ", 8, "ab abcdefghijkl cd");
    assert_string_equal(s, "n: ab\n   abcdefghijkl\n   cd\n");
    free(s);
}

static void test_empty_text_is_the_prefix_alone(void **state)
{
    (void)state;
    char *s = wrapped("note: ", "      ", 78, "");
    assert_string_equal(s, "note: \n");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_breaks_at_the_last_space_that_fits),
        cmocka_unit_test(test_wrap_fills_a_line_to_exactly_the_width),
        cmocka_unit_test(test_wrap_collapses_runs_of_spaces_and_drops_the_ends),
        cmocka_unit_test(test_a_word_wider_than_the_line_gets_a_line_of_its_own),
        cmocka_unit_test(test_empty_text_is_the_prefix_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
