/*
 * test_strmap.c -- core/strmap.h: byte-string keys (NUL included), one
 * slot per distinct key, insertion order, growth.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <string.h>

#include "core/strmap.h"

static void test_keys_holding_nul_are_distinct_by_their_bytes(void **state)
{
    (void)state;
    lmc_strmap *m = lmc_strmap_create();
    assert_non_null(m);
    bool created;
    (*lmc_strmap_slot(m, "a\0b", 3, &created))++;
    assert_true(created);
    (*lmc_strmap_slot(m, "a\0c", 3, &created))++;
    assert_true(created);
    (*lmc_strmap_slot(m, "a", 1, &created))++;
    assert_true(created);
    (*lmc_strmap_slot(m, "a\0b", 3, &created))++;
    assert_false(created);
    assert_int_equal(lmc_strmap_size(m), 3);
    size_t len;
    const char *k = lmc_strmap_key_at(m, 0, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(k, "a\0b", 3);
    assert_int_equal(lmc_strmap_value_at(m, 0), 2);
    assert_int_equal(lmc_strmap_value_at(m, 2), 1);
    lmc_strmap_destroy(m);
}

static void test_many_keys_grow_the_map_and_keep_their_counts(void **state)
{
    (void)state;
    lmc_strmap *m = lmc_strmap_create();
    char key[32];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100000; i++) {
            int n = snprintf(key, sizeof(key), "q.%d", i);
            uint64_t *v = lmc_strmap_slot(m, key, (size_t)n, NULL);
            assert_non_null(v);
            (*v)++;
        }
    }
    assert_int_equal(lmc_strmap_size(m), 100000);
    for (size_t i = 0; i < lmc_strmap_size(m); i += 9973) {
        size_t len;
        const char *k = lmc_strmap_key_at(m, i, &len);
        snprintf(key, sizeof(key), "q.%zu", i);
        assert_string_equal(k, key); /* insertion order */
        assert_int_equal(lmc_strmap_value_at(m, i), 3);
    }
    lmc_strmap_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_holding_nul_are_distinct_by_their_bytes),
        cmocka_unit_test(test_many_keys_grow_the_map_and_keep_their_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
