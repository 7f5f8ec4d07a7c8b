/*
 * test_keymap.c -- unit tests for the ObjectKey -> pointer hash map.
 *
 * Removal is checked against a reference array: after removals in random
 * order every remaining key must still be found, which is what
 * backward-shift deletion has to guarantee. The small-table churn test keeps
 * the map at 16 slots so probe runs are long and wrap around the end.
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

#include "core/keymap.h"
#include "lmcache/types.h"

/* Key number i: a 32-byte chunk hash holding i, model "m", rank 0, group 0. */
static lmc_object_key key_n(uint64_t i)
{
    uint8_t hash[32] = {0};
    for (int b = 0; b < 8; b++)
        hash[b] = (uint8_t)(i >> (8 * b));
    hash[31] = 0x5a;
    lmc_object_key k;
    lmc_error err;
    if (lmc_object_key_make(&k, hash, sizeof(hash), "m", 0, 0, NULL, &err) != LMC_OK)
        fail_msg("key: %s", err.msg);
    return k;
}

/* Values are distinct non-NULL pointers derived from the key number. */
static void *val_n(uint64_t i)
{
    return (void *)(uintptr_t)(0x1000 + i * 8);
}

static void put_n(lmc_keymap *m, uint64_t i)
{
    lmc_object_key k = key_n(i);
    void *old = (void *)1;
    assert_int_equal(lmc_keymap_put(m, &k, val_n(i), &old), LMC_OK);
    assert_null(old);
}

static void assert_has(const lmc_keymap *m, uint64_t i)
{
    lmc_object_key k = key_n(i);
    void **v = lmc_keymap_get(m, &k);
    if (v == NULL)
        fail_msg("key %llu missing", (unsigned long long)i);
    assert_ptr_equal(*v, val_n(i));
}

static void assert_lacks(const lmc_keymap *m, uint64_t i)
{
    lmc_object_key k = key_n(i);
    if (lmc_keymap_get(m, &k) != NULL)
        fail_msg("key %llu still present", (unsigned long long)i);
}

static void test_empty_map_finds_nothing(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    assert_non_null(m);
    assert_int_equal(lmc_keymap_size(m), 0);
    assert_lacks(m, 1);
    lmc_object_key k = key_n(1);
    void *old = (void *)1;
    assert_false(lmc_keymap_remove(m, &k, &old));
    assert_ptr_equal(old, (void *)1); /* untouched when absent */
    lmc_keymap_destroy(m);
    lmc_keymap_destroy(NULL);
}

static void test_put_then_get(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    put_n(m, 1);
    put_n(m, 2);
    assert_int_equal(lmc_keymap_size(m), 2);
    assert_has(m, 1);
    assert_has(m, 2);
    assert_lacks(m, 3);
    lmc_keymap_destroy(m);
}

static void test_put_existing_key_replaces_and_returns_old(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    lmc_object_key k = key_n(7);
    void *old = NULL;
    assert_int_equal(lmc_keymap_put(m, &k, (void *)0x10, &old), LMC_OK);
    assert_null(old);
    assert_int_equal(lmc_keymap_put(m, &k, (void *)0x20, &old), LMC_OK);
    assert_ptr_equal(old, (void *)0x10);
    assert_int_equal(lmc_keymap_size(m), 1);
    assert_ptr_equal(*lmc_keymap_get(m, &k), (void *)0x20);
    /* old may be NULL. */
    assert_int_equal(lmc_keymap_put(m, &k, (void *)0x30, NULL), LMC_OK);
    assert_ptr_equal(*lmc_keymap_get(m, &k), (void *)0x30);
    lmc_keymap_destroy(m);
}

static void test_get_returns_writable_value_slot(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    put_n(m, 5);
    lmc_object_key k = key_n(5);
    *lmc_keymap_get(m, &k) = (void *)0x99;
    assert_ptr_equal(*lmc_keymap_get(m, &k), (void *)0x99);
    lmc_keymap_destroy(m);
}

static void test_null_value_is_stored(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    lmc_object_key k = key_n(3);
    assert_int_equal(lmc_keymap_put(m, &k, NULL, NULL), LMC_OK);
    void **v = lmc_keymap_get(m, &k);
    assert_non_null(v);
    assert_null(*v);
    lmc_keymap_destroy(m);
}

static void test_remove_returns_value_and_forgets_key(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    put_n(m, 1);
    put_n(m, 2);
    lmc_object_key k = key_n(1);
    void *old = NULL;
    assert_true(lmc_keymap_remove(m, &k, &old));
    assert_ptr_equal(old, val_n(1));
    assert_int_equal(lmc_keymap_size(m), 1);
    assert_lacks(m, 1);
    assert_has(m, 2);
    assert_false(lmc_keymap_remove(m, &k, NULL));
    /* Re-insert after removal. */
    put_n(m, 1);
    assert_has(m, 1);
    assert_int_equal(lmc_keymap_size(m), 2);
    lmc_keymap_destroy(m);
}

static void test_keys_differing_in_any_field_are_distinct(void **state)
{
    (void)state;
    const uint8_t h[4] = {1, 2, 3, 4};
    lmc_object_key keys[7];
    lmc_error err;
    assert_int_equal(lmc_object_key_make(&keys[0], h, 4, "m", 0, 0, NULL, &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[1], h, 3, "m", 0, 0, NULL, &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[2], h, 4, "n", 0, 0, NULL, &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[3], h, 4, "m", 1, 0, NULL, &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[4], h, 4, "m", 0, 1, NULL, &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[5], h, 4, "m", 0, 0, "salt", &err), LMC_OK);
    assert_int_equal(lmc_object_key_make(&keys[6], h, 0, "m", 0, 0, NULL, &err), LMC_OK);
    lmc_keymap *m = lmc_keymap_create(0);
    for (uintptr_t i = 0; i < 7; i++)
        assert_int_equal(lmc_keymap_put(m, &keys[i], (void *)(i + 1), NULL), LMC_OK);
    assert_int_equal(lmc_keymap_size(m), 7);
    for (uintptr_t i = 0; i < 7; i++)
        assert_ptr_equal(*lmc_keymap_get(m, &keys[i]), (void *)(i + 1));

    /* An equal key built separately finds the same entry. */
    lmc_object_key again;
    assert_int_equal(lmc_object_key_make(&again, h, 4, "m", 0, 0, "salt", &err), LMC_OK);
    assert_ptr_equal(*lmc_keymap_get(m, &again), (void *)6);
    lmc_keymap_destroy(m);
}

static void test_create_hint_presizes(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(1000);
    size_t cap = lmc_keymap_capacity(m);
    assert_true(cap * 7 / 10 >= 1000);
    assert_int_equal(cap & (cap - 1), 0);
    for (uint64_t i = 0; i < 1000; i++)
        put_n(m, i);
    assert_int_equal(lmc_keymap_capacity(m), cap); /* no growth */
    lmc_keymap_destroy(m);
}

static void test_grows_past_many_keys(void **state)
{
    (void)state;
    enum { N = 100000 };
    lmc_keymap *m = lmc_keymap_create(0);
    assert_int_equal(lmc_keymap_capacity(m), 16);
    for (uint64_t i = 0; i < N; i++)
        put_n(m, i);
    assert_int_equal(lmc_keymap_size(m), N);
    size_t cap = lmc_keymap_capacity(m);
    assert_int_equal(cap & (cap - 1), 0);
    assert_true(N * 10 <= cap * 7); /* grows at 70% load */
    for (uint64_t i = 0; i < N; i++)
        assert_has(m, i);
    assert_lacks(m, N);
    assert_lacks(m, N + 1);
    lmc_keymap_destroy(m);
}

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void shuffle(uint64_t *v, size_t n)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rnd() % (i + 1));
        uint64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

static void test_random_removal_keeps_remaining_keys_findable(void **state)
{
    (void)state;
    enum { N = 20000 };
    static uint64_t order[N];
    static bool present[N];
    lmc_keymap *m = lmc_keymap_create(0);
    for (uint64_t i = 0; i < N; i++) {
        put_n(m, i);
        order[i] = i;
        present[i] = true;
    }
    shuffle(order, N);
    for (size_t r = 0; r < N; r++) {
        lmc_object_key k = key_n(order[r]);
        void *old = NULL;
        assert_true(lmc_keymap_remove(m, &k, &old));
        assert_ptr_equal(old, val_n(order[r]));
        present[order[r]] = false;
        assert_lacks(m, order[r]);
        assert_int_equal(lmc_keymap_size(m), N - r - 1);
        /* Full sweep now and then, and often near the end. */
        if (r % 1000 == 0 || r > N - 50) {
            for (uint64_t i = 0; i < N; i++) {
                if (present[i])
                    assert_has(m, i);
                else
                    assert_lacks(m, i);
            }
        }
    }
    assert_int_equal(lmc_keymap_size(m), 0);
    for (size_t i = 0; i < lmc_keymap_capacity(m); i++)
        assert_null(lmc_keymap_key_at(m, i));
    lmc_keymap_destroy(m);
}

static void test_churn_in_small_table_matches_model(void **state)
{
    (void)state;
    /* Up to 11 keys in 16 slots (the table never grows): long, wrapping runs. */
    enum { KEYS = 64, LIVE_MAX = 11 };
    bool present[KEYS] = {false};
    size_t live = 0;
    lmc_keymap *m = lmc_keymap_create(0);
    for (int op = 0; op < 50000; op++) {
        uint64_t i = rnd() % KEYS;
        lmc_object_key k = key_n(i);
        if (present[i]) {
            assert_true(lmc_keymap_remove(m, &k, NULL));
            present[i] = false;
            live--;
        } else if (live < LIVE_MAX) {
            put_n(m, i);
            present[i] = true;
            live++;
        }
        assert_int_equal(lmc_keymap_capacity(m), 16);
        assert_int_equal(lmc_keymap_size(m), live);
        for (uint64_t j = 0; j < KEYS; j++) {
            if (present[j])
                assert_has(m, j);
            else
                assert_lacks(m, j);
        }
    }
    lmc_keymap_destroy(m);
}

static void test_clear_removes_everything_and_keeps_capacity(void **state)
{
    (void)state;
    lmc_keymap *m = lmc_keymap_create(0);
    for (uint64_t i = 0; i < 100; i++)
        put_n(m, i);
    size_t cap = lmc_keymap_capacity(m);
    lmc_keymap_clear(m);
    assert_int_equal(lmc_keymap_size(m), 0);
    assert_int_equal(lmc_keymap_capacity(m), cap);
    for (uint64_t i = 0; i < 100; i++)
        assert_lacks(m, i);
    for (size_t s = 0; s < cap; s++)
        assert_null(lmc_keymap_key_at(m, s));
    /* Usable again. */
    put_n(m, 42);
    assert_has(m, 42);
    assert_int_equal(lmc_keymap_size(m), 1);
    lmc_keymap_destroy(m);
}

static void test_iteration_visits_every_entry_once(void **state)
{
    (void)state;
    enum { N = 1000 };
    static int seen[N];
    memset(seen, 0, sizeof(seen));
    lmc_keymap *m = lmc_keymap_create(0);
    for (uint64_t i = 0; i < N; i++)
        put_n(m, i);
    /* Remove a third so the walk crosses holes left by deletion. */
    for (uint64_t i = 0; i < N; i += 3) {
        lmc_object_key k = key_n(i);
        assert_true(lmc_keymap_remove(m, &k, NULL));
    }
    size_t count = 0;
    for (size_t s = 0; s < lmc_keymap_capacity(m); s++) {
        const lmc_object_key *k = lmc_keymap_key_at(m, s);
        if (k == NULL) {
            assert_null(lmc_keymap_value_at(m, s));
            continue;
        }
        uint64_t i = (uint64_t)((uintptr_t)lmc_keymap_value_at(m, s) - 0x1000) / 8;
        assert_true(i < N);
        lmc_object_key want = key_n(i);
        assert_true(lmc_object_key_equal(k, &want));
        seen[i]++;
        count++;
    }
    assert_int_equal(count, lmc_keymap_size(m));
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(seen[i], i % 3 == 0 ? 0 : 1);
    /* Out-of-range slots read as empty. */
    assert_null(lmc_keymap_key_at(m, lmc_keymap_capacity(m)));
    assert_null(lmc_keymap_value_at(m, lmc_keymap_capacity(m) + 5));
    lmc_keymap_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_map_finds_nothing),
        cmocka_unit_test(test_put_then_get),
        cmocka_unit_test(test_put_existing_key_replaces_and_returns_old),
        cmocka_unit_test(test_get_returns_writable_value_slot),
        cmocka_unit_test(test_null_value_is_stored),
        cmocka_unit_test(test_remove_returns_value_and_forgets_key),
        cmocka_unit_test(test_keys_differing_in_any_field_are_distinct),
        cmocka_unit_test(test_create_hint_presizes),
        cmocka_unit_test(test_grows_past_many_keys),
        cmocka_unit_test(test_random_removal_keeps_remaining_keys_findable),
        cmocka_unit_test(test_churn_in_small_table_matches_model),
        cmocka_unit_test(test_clear_removes_everything_and_keeps_capacity),
        cmocka_unit_test(test_iteration_visits_every_entry_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
