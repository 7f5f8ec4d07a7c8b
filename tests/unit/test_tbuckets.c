/*
 * test_tbuckets.c -- values over time in buckets of an adaptive width
 * (src/core/tbuckets.h): where a time lands, how the width grows, what
 * width the result reports, and that widening folds with the caller's
 * merge (a sum and a max here).
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

#include "core/tbuckets.h"

typedef struct cell {
    uint64_t count;
    uint64_t max;
} cell;

static void merge(void *into, const void *from)
{
    cell *o = into;
    const cell *c = from;
    o->count += c->count;
    o->max = c->max > o->max ? c->max : o->max;
}

static void add(lmc_tbuckets *b, double t, uint64_t v)
{
    cell *c = lmc_tbuckets_at(b, t);
    assert_non_null(c);
    c->count++;
    c->max = v > c->max ? v : c->max;
}

static void test_times_land_in_buckets_of_the_finest_width_first(void **state)
{
    (void)state;
    lmc_tbuckets b;
    lmc_tbuckets_init(&b, sizeof(cell), merge);
    assert_true(b.width_s == LMC_TBUCKETS_FINEST_S);
    add(&b, 0.0, 1);
    add(&b, 1.0 / 64 + 1e-9, 2);
    add(&b, -5, 3);  /* negative: the first bucket */
    add(&b, NAN, 4); /* not finite: the first bucket */
    assert_int_equal(b.n, 2);
    const cell *c = (const cell *)b.v;
    assert_int_equal(c[0].count, 3);
    assert_int_equal(c[0].max, 4);
    assert_int_equal(c[1].count, 1);
    lmc_tbuckets_free(&b);
    assert_null(b.v);
}

static void test_a_late_time_doubles_the_width_and_folds_neighbours(void **state)
{
    (void)state;
    lmc_tbuckets b;
    lmc_tbuckets_init(&b, sizeof(cell), merge);
    for (int i = 0; i < LMC_TBUCKETS_MAX; i++)
        add(&b, (i + 0.5) / 64.0, (uint64_t)i);
    assert_int_equal(b.n, LMC_TBUCKETS_MAX);
    add(&b, LMC_TBUCKETS_MAX / 64.0 + 0.001, 1000); /* one past the last: width 2/64 */
    assert_true(b.width_s == 2.0 / 64);
    assert_int_equal(b.n, LMC_TBUCKETS_MAX / 2 + 1);
    const cell *c = (const cell *)b.v;
    assert_int_equal(c[0].count, 2);
    assert_int_equal(c[0].max, 1);
    assert_int_equal(c[10].max, 21);
    assert_int_equal(c[LMC_TBUCKETS_MAX / 2].count, 1);
    assert_int_equal(c[LMC_TBUCKETS_MAX / 2].max, 1000);
    /* Every bucket past the folded ones is empty again. */
    add(&b, 1000.0, 7); /* far out: many doublings at once */
    assert_true(b.width_s >= 1000.0 / LMC_TBUCKETS_MAX);
    uint64_t total = 0;
    for (size_t i = 0; i < b.n; i++)
        total += ((const cell *)b.v)[i].count;
    assert_int_equal(total, LMC_TBUCKETS_MAX + 2);
    lmc_tbuckets_free(&b);
}

static void test_the_result_reports_one_second_buckets_for_a_mid_length_span(void **state)
{
    (void)state;
    lmc_tbuckets b;
    lmc_tbuckets_init(&b, sizeof(cell), merge);
    for (int i = 0; i < 100; i++)
        add(&b, i * 0.5, 1); /* 0 .. 49.5 s: 1/64 s would give 3200 buckets; the pass widens */
    double w;
    void *out;
    size_t n;
    assert_int_equal(lmc_tbuckets_result(&b, 49.5, &w, &out, &n), LMC_OK);
    assert_true(w == 1.0);
    assert_int_equal(n, 50);
    const cell *c = out;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(c[i].count, 2);
    free(out);
    lmc_tbuckets_free(&b);
}

static void test_a_short_span_gets_at_least_32_buckets(void **state)
{
    (void)state;
    lmc_tbuckets b;
    lmc_tbuckets_init(&b, sizeof(cell), merge);
    for (int i = 0; i <= 40; i++)
        add(&b, i * 0.1, 1); /* a 4 s span: 1/8 s gives 32 buckets, 1/4 s only 16 */
    double w;
    void *out;
    size_t n;
    assert_int_equal(lmc_tbuckets_result(&b, 4.0, &w, &out, &n), LMC_OK);
    assert_true(w == 1.0 / 8);
    assert_int_equal(n, 33);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ((const cell *)out)[i].count;
    assert_int_equal(total, 41);
    free(out);
    lmc_tbuckets_free(&b);
}

static void test_no_times_give_no_buckets(void **state)
{
    (void)state;
    lmc_tbuckets b;
    lmc_tbuckets_init(&b, sizeof(cell), merge);
    double w;
    void *out = &b;
    size_t n = 9;
    assert_int_equal(lmc_tbuckets_result(&b, 0.0, &w, &out, &n), LMC_OK);
    assert_null(out);
    assert_int_equal(n, 0);
    assert_true(w == LMC_TBUCKETS_FINEST_S);
    lmc_tbuckets_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_times_land_in_buckets_of_the_finest_width_first),
        cmocka_unit_test(test_a_late_time_doubles_the_width_and_folds_neighbours),
        cmocka_unit_test(test_the_result_reports_one_second_buckets_for_a_mid_length_span),
        cmocka_unit_test(test_a_short_span_gets_at_least_32_buckets),
        cmocka_unit_test(test_no_times_give_no_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
