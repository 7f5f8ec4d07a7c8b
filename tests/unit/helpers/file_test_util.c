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
