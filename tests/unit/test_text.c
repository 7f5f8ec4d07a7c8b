/*
 * test_text.c -- Python's strict UTF-8 rules (core/utf8.h), the terminal
 * escaping every printed trace string goes through (core/escape.h) with
 * its default flags, durations at a sane width (core/text.h).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/escape.h"
#include "core/text.h"
#include "core/utf8.h"

static void test_utf8_accepts_what_python_decodes(void **state)
{
    (void)state;
    static const char *const ok[] = {"",
                                     "plain ascii, longer than eight bytes",
                                     "caf\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\xf4\x8f\xbf\xbf",
                                     "\xed\x9f\xbf",
                                     "a\0b"};
    static const size_t ok_len[] = {0, 37, 5, 3, 4, 4, 3, 3};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_true(lmc_utf8_valid(ok[i], ok_len[i]));
}

static void test_utf8_refuses_overlongs_surrogates_and_cut_sequences(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\x80",             /* a lone continuation byte */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xf5\x80\x80\x80", /* no such lead byte */
        "\xe2\x82",         /* cut */
        "abcdefgh\xc3",     /* cut after an ASCII word */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(lmc_utf8_valid(bad[i], strlen(bad[i])));
}

static void expect_escape(const char *in, size_t n, const char *want)
{
    char *got = lmc_escape_dup(in, n, 0);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(lmc_escape(in, n, 0, NULL, 0), strlen(want));
    free(got);
}

static void test_escape_leaves_plain_text_and_utf8_alone(void **state)
{
    (void)state;
    expect_escape("lmcache.v1.x.reserve_write", 26, "lmcache.v1.x.reserve_write");
    expect_escape("caf\xc3\xa9 \xe2\x82\xac", 9, "caf\xc3\xa9 \xe2\x82\xac");
}

static void test_escape_neutralises_controls_and_forged_lines(void **state)
{
    (void)state;
    /* clear screen, a forged row, a NUL, DEL, a backslash that must not read as an escape */
    expect_escape("\x1b[2J", 4, "\\x1b[2J");
    expect_escape("a\n    x: 1", 10, "a\\n    x: 1");
    expect_escape("a\0b", 3, "a\\x00b");
    expect_escape("\x7f\r\t", 3, "\\x7f\\r\\t");
    expect_escape("a\\x00b", 6, "a\\\\x00b");
    /* C1 CSI (as Python's repr writes it), a right-to-left override, a line separator,
     * bytes that are not UTF-8 */
    expect_escape("\xc2\x9b", 2, "\\x9b");
    expect_escape("\xe2\x80\xae", 3, "\\u202e");
    expect_escape("\xe2\x80\xa8", 3, "\\u2028");
    expect_escape("\xff\xc3", 2, "\\xff\\xc3");
}

static void test_escape_truncates_like_snprintf(void **state)
{
    (void)state;
    char buf[5];
    assert_int_equal(lmc_escape("\x01\x02", 2, 0, buf, sizeof(buf)), 8);
    assert_string_equal(buf, "\\x01");
}

static void test_seconds_keep_a_sane_width(void **state)
{
    (void)state;
    char buf[64];
    lmc_text_seconds(0.13, buf, sizeof(buf));
    assert_string_equal(buf, "0.130");
    lmc_text_seconds(226.6914, buf, sizeof(buf));
    assert_string_equal(buf, "226.691");
    lmc_text_seconds(1e300, buf, sizeof(buf));
    assert_string_equal(buf, "1.000e+300");
    lmc_text_seconds(-2e9, buf, sizeof(buf));
    assert_string_equal(buf, "-2.000e+09");
    lmc_text_seconds(NAN, buf, sizeof(buf));
    assert_string_equal(buf, "nan");
    lmc_text_seconds(-INFINITY, buf, sizeof(buf));
    assert_string_equal(buf, "-inf");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_accepts_what_python_decodes),
        cmocka_unit_test(test_utf8_refuses_overlongs_surrogates_and_cut_sequences),
        cmocka_unit_test(test_escape_leaves_plain_text_and_utf8_alone),
        cmocka_unit_test(test_escape_neutralises_controls_and_forged_lines),
        cmocka_unit_test(test_escape_truncates_like_snprintf),
        cmocka_unit_test(test_seconds_keep_a_sane_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
