/*
 * test_trace_file_digest.c -- the trace file digest: XXH3-128 of the bytes
 * in canonical order (what xxh128sum prints), only for regular files, and
 * errors that name the path.
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
#include <sys/stat.h>

#include "helpers/trace_test_util.h"
#include "trace/file_digest.h"

static void digest_of(const void *bytes, size_t n, char *hex)
{
    char dir[64], path[128];
    tt_tmpdir(dir);
    snprintf(path, sizeof(path), "%s/t.lct", dir);
    tt_write_file(path, bytes, n);
    lmc_error err;
    assert_int_equal(lmc_trace_file_digest(path, hex, &err), LMC_OK);
    tt_rmtree(dir);
}

static void test_digest_of_an_empty_file_is_xxh128_of_nothing(void **state)
{
    (void)state;
    char hex[LMC_TRACE_DIGEST_HEX_LEN + 1];
    digest_of("", 0, hex);
    assert_string_equal(hex, "99aa06d3014798d86001c324468d497f");
}

static void test_digest_of_abc_is_its_canonical_xxh128(void **state)
{
    (void)state;
    char hex[LMC_TRACE_DIGEST_HEX_LEN + 1];
    digest_of("abc", 3, hex);
    assert_string_equal(hex, "06b05ab6733a618578af5f94892f3950");
}

static void test_digest_covers_every_byte_past_one_read(void **state)
{
    (void)state;
    /* Three reads' worth, so the stream is fed in pieces; one byte changed at the end. */
    size_t n = 3u << 20;
    uint8_t *b = calloc(n, 1);
    assert_non_null(b);
    char a[LMC_TRACE_DIGEST_HEX_LEN + 1], c[LMC_TRACE_DIGEST_HEX_LEN + 1];
    digest_of(b, n, a);
    b[n - 1] = 1;
    digest_of(b, n, c);
    assert_int_equal(strlen(a), LMC_TRACE_DIGEST_HEX_LEN);
    assert_string_not_equal(a, c);
    free(b);
}

static void test_missing_file_is_not_found_naming_it(void **state)
{
    (void)state;
    char hex[LMC_TRACE_DIGEST_HEX_LEN + 1] = "x";
    lmc_error err;
    assert_int_equal(lmc_trace_file_digest("/nonexistent/t.lct", hex, &err), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "/nonexistent/t.lct"));
    assert_string_equal(hex, "");
}

static void test_fifo_has_no_digest_and_is_not_opened(void **state)
{
    (void)state;
    char dir[64], path[128];
    tt_tmpdir(dir);
    snprintf(path, sizeof(path), "%s/pipe", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    char hex[LMC_TRACE_DIGEST_HEX_LEN + 1];
    lmc_error err;
    /* Opening a FIFO with no writer would block: the call must return at once. */
    assert_int_equal(lmc_trace_file_digest(path, hex, &err), LMC_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "not a regular file"));
    tt_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_of_an_empty_file_is_xxh128_of_nothing),
        cmocka_unit_test(test_digest_of_abc_is_its_canonical_xxh128),
        cmocka_unit_test(test_digest_covers_every_byte_past_one_read),
        cmocka_unit_test(test_missing_file_is_not_found_naming_it),
        cmocka_unit_test(test_fifo_has_no_digest_and_is_not_opened),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
