/*
 * test_ttl_lock.c -- unit tests for the expiring counted lock.
 *
 * Every test passes fake millisecond times; nothing sleeps.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include "core/ttl_lock.h"

#define TTL_S 10u
#define TTL_MS 10000u
#define T0 1000000u /* an arbitrary "now" well away from 0 */

static void test_ttl_lock_init_converts_seconds_to_ms(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, 7);
    assert_int_equal(l.ttl_ms, 7000);
}

static void test_ttl_lock_init_is_unlocked(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    assert_false(lmc_ttl_lock_is_locked(&l, 0));
    assert_false(lmc_ttl_lock_is_locked(&l, T0));
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 0);
}

static void test_ttl_lock_lock_counts_up(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 1, T0);
    lmc_ttl_lock_lock(&l, 1, T0 + 1);
    lmc_ttl_lock_lock(&l, 1, T0 + 2);
    assert_true(lmc_ttl_lock_is_locked(&l, T0 + 2));
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + 2), 3);
}

static void test_ttl_lock_lock_by_n_adds_n(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 4, T0);
    lmc_ttl_lock_lock(&l, 3, T0 + 5);
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + 5), 7);
}

static void test_ttl_lock_first_lock_at_time_zero_counts(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 2, 0);
    assert_true(lmc_ttl_lock_is_locked(&l, 0));
    assert_int_equal(lmc_ttl_lock_count(&l, 0), 2);
}

static void test_ttl_lock_unlock_counts_down(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 5, T0);
    lmc_ttl_lock_unlock(&l, 2);
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 3);
    lmc_ttl_lock_unlock(&l, 1);
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 2);
    assert_true(lmc_ttl_lock_is_locked(&l, T0));
}

static void test_ttl_lock_unlock_to_zero_is_unlocked(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 2, T0);
    lmc_ttl_lock_unlock(&l, 2);
    assert_false(lmc_ttl_lock_is_locked(&l, T0));
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 0);
}

static void test_ttl_lock_unlock_never_goes_below_zero(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_unlock(&l, 1); /* unlock of a fresh lock */
    assert_int_equal(l.count, 0);
    lmc_ttl_lock_lock(&l, 2, T0);
    lmc_ttl_lock_unlock(&l, 5);
    assert_int_equal(l.count, 0);
    lmc_ttl_lock_unlock(&l, UINT64_MAX);
    assert_int_equal(l.count, 0);
    /* A later lock counts from 0, not from a wrapped-around value. */
    lmc_ttl_lock_lock(&l, 1, T0 + 1);
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + 1), 1);
}

static void test_ttl_lock_expires_ttl_after_lock(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 3, T0);
    assert_true(lmc_ttl_lock_is_locked(&l, T0 + TTL_MS - 1));
    assert_false(lmc_ttl_lock_is_locked(&l, T0 + TTL_MS));
    assert_false(lmc_ttl_lock_is_locked(&l, T0 + 10 * TTL_MS));
}

static void test_ttl_lock_count_is_zero_once_expired(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 3, T0);
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + TTL_MS - 1), 3);
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + TTL_MS), 0);
}

static void test_ttl_lock_lock_after_expiry_restarts_count_at_n(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 5, T0);
    lmc_ttl_lock_lock(&l, 2, T0 + TTL_MS); /* exactly at expiry: stale */
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + TTL_MS), 2);
    assert_true(lmc_ttl_lock_is_locked(&l, T0 + TTL_MS));
}

static void test_ttl_lock_lock_refreshes_expiry(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 1, T0);
    lmc_ttl_lock_lock(&l, 1, T0 + 6000);
    assert_int_equal(l.expiry_ms, T0 + 6000 + TTL_MS);
    /* Past the first lock's expiry, but inside the second's: still held. */
    assert_true(lmc_ttl_lock_is_locked(&l, T0 + TTL_MS + 1));
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + TTL_MS + 1), 2);
    assert_false(lmc_ttl_lock_is_locked(&l, T0 + 6000 + TTL_MS));
}

static void test_ttl_lock_unlock_does_not_refresh_expiry(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 3, T0);
    lmc_ttl_lock_unlock(&l, 1);
    assert_int_equal(l.expiry_ms, T0 + TTL_MS);
    assert_false(lmc_ttl_lock_is_locked(&l, T0 + TTL_MS));
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + TTL_MS), 0);
}

static void test_ttl_lock_reset_unlocks(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 4, T0);
    lmc_ttl_lock_reset(&l);
    assert_false(lmc_ttl_lock_is_locked(&l, T0));
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 0);
    assert_int_equal(l.count, 0);
    assert_int_equal(l.expiry_ms, 0);
    assert_int_equal(l.ttl_ms, TTL_MS); /* the TTL survives a reset */
}

static void test_ttl_lock_lock_after_reset_starts_at_n(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, TTL_S);
    lmc_ttl_lock_lock(&l, 4, T0);
    lmc_ttl_lock_reset(&l);
    lmc_ttl_lock_lock(&l, 1, T0 + 1);
    assert_int_equal(lmc_ttl_lock_count(&l, T0 + 1), 1);
    assert_int_equal(l.expiry_ms, T0 + 1 + TTL_MS);
}

static void test_ttl_lock_zero_ttl_is_never_held(void **state)
{
    (void)state;
    lmc_ttl_lock l;
    lmc_ttl_lock_init(&l, 0);
    lmc_ttl_lock_lock(&l, 1, T0);
    assert_false(lmc_ttl_lock_is_locked(&l, T0));
    assert_int_equal(lmc_ttl_lock_count(&l, T0), 0);
    lmc_ttl_lock_lock(&l, 1, T0);
    assert_int_equal(l.count, 1); /* each lock sees the previous one expired */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ttl_lock_init_converts_seconds_to_ms),
        cmocka_unit_test(test_ttl_lock_init_is_unlocked),
        cmocka_unit_test(test_ttl_lock_lock_counts_up),
        cmocka_unit_test(test_ttl_lock_lock_by_n_adds_n),
        cmocka_unit_test(test_ttl_lock_first_lock_at_time_zero_counts),
        cmocka_unit_test(test_ttl_lock_unlock_counts_down),
        cmocka_unit_test(test_ttl_lock_unlock_to_zero_is_unlocked),
        cmocka_unit_test(test_ttl_lock_unlock_never_goes_below_zero),
        cmocka_unit_test(test_ttl_lock_expires_ttl_after_lock),
        cmocka_unit_test(test_ttl_lock_count_is_zero_once_expired),
        cmocka_unit_test(test_ttl_lock_lock_after_expiry_restarts_count_at_n),
        cmocka_unit_test(test_ttl_lock_lock_refreshes_expiry),
        cmocka_unit_test(test_ttl_lock_unlock_does_not_refresh_expiry),
        cmocka_unit_test(test_ttl_lock_reset_unlocks),
        cmocka_unit_test(test_ttl_lock_lock_after_reset_starts_at_n),
        cmocka_unit_test(test_ttl_lock_zero_ttl_is_never_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
