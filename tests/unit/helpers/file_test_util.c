/*
 * file_test_util.c -- files a test plants (file_test_util.h).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "file_test_util.h"

#include <stdio.h>
#include <sys/stat.h>

void file_test_plant_victim(const char *path)
{
    FILE *v = fopen(path, "w");
    assert_non_null(v);
    fputs("precious", v);
    fclose(v);
}

void file_test_assert_victim(const char *path)
{
    char buf[32] = "";
    FILE *v = fopen(path, "r");
    assert_non_null(v);
    size_t n = fread(buf, 1, sizeof(buf) - 1, v);
    fclose(v);
    buf[n] = '\0';
    assert_string_equal(buf, "precious");
}

void file_test_need_dev_full(void)
{
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        skip();
}

void file_test_assert_dev_full_kept(void)
{
    struct stat st;
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
}
