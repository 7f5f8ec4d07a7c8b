/*
 * test_escape.c -- escaping untrusted text for printing (core/escape.h)
 * and the strict UTF-8 decoder under it (core/utf8.h).
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

#include "core/escape.h"
#include "core/utf8.h"

/* The escaped form of a NUL-terminated string, through lmc_escape. */
static const char *esc(const char *s, unsigned flags)
{
    static char buf[256];
    lmc_escape(s, strlen(s), flags, buf, sizeof(buf));
    return buf;
}

static void test_printable_ascii_passes_unchanged(void **state)
{
    (void)state;
    assert_string_equal(esc("lmcache.v1.StorageManager.reserve_write", 0),
                        "lmcache.v1.StorageManager.reserve_write");
    assert_string_equal(esc("a b'c\"d", 0), "a b'c\"d");
}

static void test_control_characters_get_python_escapes(void **state)
{
    (void)state;
    assert_string_equal(esc("a\nb\rc\td", 0), "a\\nb\\rc\\td");
    assert_string_equal(esc("\x1b[31mred", 0), "\\x1b[31mred");
    assert_string_equal(esc("\x01\x7f", 0), "\\x01\\x7f");
    assert_string_equal(esc("back\\slash", 0), "back\\\\slash");
}

static void test_nul_inside_the_text_is_escaped(void **state)
{
    (void)state;
    char buf[32];
    assert_int_equal(lmc_escape("a\0b", 3, 0, buf, sizeof(buf)), 6);
    assert_string_equal(buf, "a\\x00b");
}

static void test_quotes_and_spaces_are_escaped_only_when_asked(void **state)
{
    (void)state;
    assert_string_equal(esc("it's \"x\"", LMC_ESCAPE_SQUOTE), "it\\'s \"x\"");
    assert_string_equal(esc("it's \"x\"", LMC_ESCAPE_DQUOTE), "it's \\\"x\\\"");
    assert_string_equal(esc("a b", LMC_ESCAPE_SPACE), "a\\x20b");
}

static void test_valid_utf8_passes_and_c1_controls_do_not(void **state)
{
    (void)state;
    assert_string_equal(esc("caf\xc3\xa9 \xe6\x97\xa5", 0), "caf\xc3\xa9 \xe6\x97\xa5");
    /* U+009B is CSI on a terminal, like ESC [ */
    assert_string_equal(esc("\xc2\x9b"
                            "2J",
                            0),
                        "\\x9b2J");
    assert_string_equal(esc("\xf0\x9f\x98\x80", 0), "\xf0\x9f\x98\x80");
}

static void test_invisible_and_bidi_characters_are_escaped(void **state)
{
    (void)state;
    assert_string_equal(esc("a\xe2\x80\xae"
                            "b",
                            0),
                        "a\\u202eb");                       /* RIGHT-TO-LEFT OVERRIDE */
    assert_string_equal(esc("\xe2\x80\x8b", 0), "\\u200b"); /* ZERO WIDTH SPACE */
    assert_string_equal(esc("\xe2\x80\xa8", 0), "\\u2028"); /* LINE SEPARATOR */
    assert_string_equal(esc("\xc2\xa0", 0), "\\xa0");       /* NO-BREAK SPACE */
    assert_string_equal(esc("\xef\xbb\xbf", 0), "\\ufeff"); /* BOM */
}

static void test_invalid_utf8_bytes_are_escaped_one_by_one(void **state)
{
    (void)state;
    assert_string_equal(esc("\xff\xfe", 0), "\\xff\\xfe");
    assert_string_equal(esc("\xc0\xaf", 0), "\\xc0\\xaf");          /* overlong '/' */
    assert_string_equal(esc("\xed\xa0\x80", 0), "\\xed\\xa0\\x80"); /* a surrogate */
    assert_string_equal(esc("ab\xe6\x97", 0), "ab\\xe6\\x97");      /* cut at the end */
}

static void test_bytes_mode_escapes_everything_non_ascii(void **state)
{
    (void)state;
    assert_string_equal(esc("\xc3\xa9", LMC_ESCAPE_BYTES), "\\xc3\\xa9");
}

static void test_escape_is_snprintf_like(void **state)
{
    (void)state;
    char buf[5];
    assert_int_equal(lmc_escape("\x1b\x1b", 2, 0, buf, sizeof(buf)), 8);
    assert_string_equal(buf, "\\x1b");
    assert_int_equal(lmc_escape("\n", 1, 0, NULL, 0), 2);
    assert_int_equal(lmc_escape(NULL, 0, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
}

static void test_append_matches_escape(void **state)
{
    (void)state;
    const char *s = "q\x1b[0m\nname \xc2\x85 ok\\";
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, ">");
    lmc_escape_append(&b, s, strlen(s), LMC_ESCAPE_SPACE);
    char *got = lmc_strbuf_finish(&b);
    assert_non_null(got);
    char want[128] = ">";
    lmc_escape(s, strlen(s), LMC_ESCAPE_SPACE, want + 1, sizeof(want) - 1);
    assert_string_equal(got, want);
    assert_string_equal(got, ">q\\x1b[0m\\nname\\x20\\x85\\x20ok\\\\");
    free(got);
}

static void test_utf8_decode_reports_length_and_code_point(void **state)
{
    (void)state;
    uint32_t cp = 0;
    assert_int_equal(lmc_utf8_decode((const unsigned char *)"A", 1, &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(lmc_utf8_decode((const unsigned char *)"\xe6\x97\xa5", 3, &cp), 3);
    assert_int_equal(cp, 0x65e5);
    assert_int_equal(lmc_utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp), 0);
    assert_int_equal(lmc_utf8_decode((const unsigned char *)"\xe6\x97\xa5", 2, &cp), 0);
    assert_int_equal(lmc_utf8_decode((const unsigned char *)"\x80", 1, &cp), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_printable_ascii_passes_unchanged),
        cmocka_unit_test(test_control_characters_get_python_escapes),
        cmocka_unit_test(test_nul_inside_the_text_is_escaped),
        cmocka_unit_test(test_quotes_and_spaces_are_escaped_only_when_asked),
        cmocka_unit_test(test_valid_utf8_passes_and_c1_controls_do_not),
        cmocka_unit_test(test_invisible_and_bidi_characters_are_escaped),
        cmocka_unit_test(test_invalid_utf8_bytes_are_escaped_one_by_one),
        cmocka_unit_test(test_bytes_mode_escapes_everything_non_ascii),
        cmocka_unit_test(test_escape_is_snprintf_like),
        cmocka_unit_test(test_append_matches_escape),
        cmocka_unit_test(test_utf8_decode_reports_length_and_code_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
