/*
 * test_analyze_mrc.c -- the capacity grid, the curve's range, the reuse
 * histograms, and the sampled curve within its stated error bound.
 *
 * The exact curve is checked point by point against counting the stack
 * distances directly (stackdist itself is checked against a brute-force
 * LRU in test_analyze_stackdist). The sampled one is built the way the
 * analysis builds it -- keys sampled by a hash of the key, the replicate
 * group from other bits of the same hash -- over large skewed random
 * streams, and every point must be within its error bound of the exact
 * curve at the same capacity.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/mrc.h"
#include "analyze/stackdist.h"

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state = splitmix(rng_state);
    return rng_state;
}

static lmc_mrc *exact_mrc(const uint64_t *sizes, size_t n_sizes)
{
    lmc_mrc_options o = {.sample_rate = 1.0, .sizes = sizes, .n_sizes = n_sizes};
    lmc_mrc *m = lmc_mrc_create(&o);
    assert_non_null(m);
    return m;
}

static void test_bad_sample_rate_is_refused(void **state)
{
    (void)state;
    lmc_mrc_options o = {.sample_rate = 1.5};
    assert_null(lmc_mrc_create(&o));
    o.sample_rate = -0.1;
    assert_null(lmc_mrc_create(&o));
    o.sample_rate = NAN;
    assert_null(lmc_mrc_create(&o));
    o.sample_rate = 0; /* the default: exact */
    lmc_mrc *m = lmc_mrc_create(&o);
    assert_non_null(m);
    lmc_mrc_destroy(m);
}

static void test_reuse_buckets_are_log2(void **state)
{
    (void)state;
    assert_int_equal(lmc_mrc_reuse_bucket(0), 0);
    assert_int_equal(lmc_mrc_reuse_bucket(1), 1);
    assert_int_equal(lmc_mrc_reuse_bucket(2), 2);
    assert_int_equal(lmc_mrc_reuse_bucket(3), 2);
    assert_int_equal(lmc_mrc_reuse_bucket(4), 3);
    assert_int_equal(lmc_mrc_reuse_bucket(1023), 10);
    assert_int_equal(lmc_mrc_reuse_bucket(1024), 11);
    assert_int_equal(lmc_mrc_reuse_bucket(UINT64_MAX), 64);
}

static void test_cyclic_stream_has_its_known_curve(void **state)
{
    (void)state;
    /* 100 keys of 4 KiB in 5 cycles: LRU hits nothing below 400 KiB and 4/5 from there. */
    uint64_t want[] = {409600, 409599};
    lmc_mrc *m = exact_mrc(want, 2);
    for (int round = 0; round < 5; round++) {
        for (uint32_t id = 0; id < 100; id++)
            assert_int_equal(lmc_mrc_access(m, id, 4096, 0), LMC_OK);
    }
    lmc_mrc_result r;
    assert_int_equal(lmc_mrc_result_get(m, &r), LMC_OK);
    assert_true(r.exact);
    assert_int_equal(r.accesses, 500);
    assert_int_equal(r.cold, 100);
    assert_int_equal(r.keys, 100);
    assert_int_equal(r.bytes, 409600);
    assert_int_equal(r.min_size, 4096);
    assert_true(fabs(r.max_hit_rate - 0.8) < 1e-12);
    assert_true(fabs(lmc_mrc_result_hit_rate_at(&r, 409599)) < 1e-12);
    assert_true(fabs(lmc_mrc_result_hit_rate_at(&r, 409600) - 0.8) < 1e-12);
    /* Every reuse is at 99 distinct keys (bucket 7: [64, 128)) and 99 x 4 KiB. */
    assert_int_equal(r.reuse_keys[7], 400);
    assert_int_equal(r.reuse_bytes[lmc_mrc_reuse_bucket(99 * 4096)], 400);
    /* The range: the grid point below 4 KiB up to the first at or above 400 KiB, ascending. */
    assert_true(r.n_points > 10);
    assert_true(r.points[0].capacity < 4096);
    assert_true(r.points[r.n_points - 1].capacity >= 409600);
    assert_true(r.points[r.n_points - 2].capacity < 409600);
    size_t requested = 0;
    for (size_t i = 0; i < r.n_points; i++) {
        if (i > 0)
            assert_true(r.points[i].capacity > r.points[i - 1].capacity);
        assert_true(r.points[i].error_bound == 0.0);
        requested += r.points[i].requested;
    }
    assert_int_equal(requested, 2);
    lmc_mrc_result_free(&r);
    lmc_mrc_destroy(m);
}

static void test_requested_size_outside_the_range_is_reported(void **state)
{
    (void)state;
    uint64_t want[] = {1ull << 40};
    lmc_mrc *m = exact_mrc(want, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(lmc_mrc_access(m, (uint32_t)(i % 2), 100, 0), LMC_OK);
    lmc_mrc_result r;
    assert_int_equal(lmc_mrc_result_get(m, &r), LMC_OK);
    lmc_mrc_point last = r.points[r.n_points - 1];
    assert_int_equal(last.capacity, 1ull << 40);
    assert_true(last.requested);
    assert_true(fabs(last.hit_rate - 0.8) < 1e-12);
    assert_true(r.points[r.n_points - 2].capacity < 1000);
    lmc_mrc_result_free(&r);
    lmc_mrc_destroy(m);
}

static void test_empty_stream_has_only_requested_points(void **state)
{
    (void)state;
    uint64_t want[] = {1ull << 30};
    lmc_mrc *m = exact_mrc(want, 1);
    lmc_mrc_result r;
    assert_int_equal(lmc_mrc_result_get(m, &r), LMC_OK);
    assert_int_equal(r.accesses, 0);
    assert_int_equal(r.n_points, 1);
    assert_true(r.points[0].hit_rate == 0.0);
    lmc_mrc_result_free(&r);
    lmc_mrc_destroy(m);
}

/* A skewed random stream of n accesses over n_keys keys of 1 .. max_size bytes each. */
typedef struct stream {
    uint32_t *id;
    uint64_t *size; /* per key */
    size_t n;
    uint32_t n_keys;
} stream;

static stream make_stream(size_t n, uint32_t n_keys, uint64_t max_size, double skew)
{
    stream s = {malloc(n * sizeof(uint32_t)), malloc(n_keys * sizeof(uint64_t)), n, n_keys};
    assert_non_null(s.id);
    assert_non_null(s.size);
    for (uint32_t k = 0; k < n_keys; k++)
        s.size[k] = max_size > 1 ? 1 + rnd() % max_size : 1;
    for (size_t i = 0; i < n; i++) {
        /* u^skew of a uniform u in [0, 1): a heavy head, a long tail. */
        double u = (double)(rnd() >> 11) / 9007199254740992.0;
        s.id[i] = (uint32_t)(pow(u, skew) * n_keys);
    }
    return s;
}

static void free_stream(stream *s)
{
    free(s->id);
    free(s->size);
}

static void test_exact_curve_counts_every_distance_at_every_point(void **state)
{
    (void)state;
    rng_state = 99;
    stream s = make_stream(50000, 3000, 5000, 2.0);
    uint64_t want[] = {12345, 777777};
    lmc_mrc *m = exact_mrc(want, 2);
    lmc_stackdist *sd = lmc_stackdist_create();
    assert_non_null(sd);
    lmc_stackdist_access_result *d = malloc(s.n * sizeof(*d));
    assert_non_null(d);
    for (size_t i = 0; i < s.n; i++) {
        assert_int_equal(lmc_mrc_access(m, s.id[i], s.size[s.id[i]], 0), LMC_OK);
        assert_int_equal(lmc_stackdist_access(sd, s.id[i], s.size[s.id[i]], &d[i]), LMC_OK);
    }
    lmc_mrc_result r;
    assert_int_equal(lmc_mrc_result_get(m, &r), LMC_OK);
    assert_int_equal(r.keys, lmc_stackdist_ids(sd));
    assert_int_equal(r.bytes, lmc_stackdist_bytes(sd));
    uint64_t reuse_keys[LMC_MRC_REUSE_BUCKETS] = {0}, cold = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (d[i].cold)
            cold++;
        else
            reuse_keys[lmc_mrc_reuse_bucket(d[i].keys)]++;
    }
    assert_int_equal(r.cold, cold);
    assert_memory_equal(r.reuse_keys, reuse_keys, sizeof(reuse_keys));
    for (size_t p = 0; p < r.n_points; p++) {
        uint64_t hits = 0;
        for (size_t i = 0; i < s.n; i++)
            hits += !d[i].cold && d[i].bytes + d[i].size <= r.points[p].capacity;
        assert_int_equal(llround(r.points[p].hit_rate * (double)s.n), hits);
    }
    free(d);
    lmc_stackdist_destroy(sd);
    lmc_mrc_result_free(&r);
    lmc_mrc_destroy(m);
    free_stream(&s);
}

/* The curve of s at rate R, keys sampled by hash as the analysis samples them. */
static void curve(const stream *s, double rate, lmc_mrc_result *out)
{
    lmc_mrc_options o = {.sample_rate = rate};
    lmc_mrc *m = lmc_mrc_create(&o);
    assert_non_null(m);
    uint32_t *dense = malloc(s->n_keys * sizeof(*dense));
    assert_non_null(dense);
    memset(dense, 0xff, s->n_keys * sizeof(*dense));
    uint32_t next = 0;
    uint64_t threshold = (uint64_t)(rate * 16777216.0);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t k = s->id[i];
        uint64_t h = splitmix(k ^ 0x5bd1e995ull);
        if (rate < 1 && (h >> 40) >= threshold)
            continue;
        if (dense[k] == UINT32_MAX)
            dense[k] = next++;
        assert_int_equal(lmc_mrc_access(m, dense[k], s->size[k], (unsigned)(h & 15)), LMC_OK);
    }
    free(dense);
    assert_int_equal(lmc_mrc_result_get(m, out), LMC_OK);
    lmc_mrc_destroy(m);
}

/*
 * The sampled curve of s stays within its bounds of the exact one, and (when
 * max_widest > 0) no bound is as wide as max_widest.
 */
static void check_sampled(const stream *s, double rate, double max_widest)
{
    lmc_mrc_result exact, sampled;
    curve(s, 1.0, &exact);
    curve(s, rate, &sampled);
    assert_false(sampled.exact);
    assert_true(sampled.accesses < exact.accesses);
    double worst = 0, widest = 0;
    size_t checked = 0;
    for (size_t i = 0; i < sampled.n_points; i++) {
        const lmc_mrc_point *p = &sampled.points[i];
        double truth = lmc_mrc_result_hit_rate_at(&exact, p->capacity);
        double err = fabs(p->hit_rate - truth);
        if (err > p->error_bound)
            fail_msg("rate %g, capacity %llu: sampled %.4f, exact %.4f, error %.4f > bound %.4f",
                     rate, (unsigned long long)p->capacity, p->hit_rate, truth, err,
                     p->error_bound);
        worst = err > worst ? err : worst;
        widest = p->error_bound > widest ? p->error_bound : widest;
        checked++;
    }
    assert_true(checked > 20);
    /* A bound that says nothing would pass anything: it must stay useful. */
    if (max_widest > 0)
        assert_true(widest < max_widest);
    printf("  rate %.3f: %zu points, worst error %.4f, widest bound %.4f\n", rate, checked, worst,
           widest);
    lmc_mrc_result_free(&exact);
    lmc_mrc_result_free(&sampled);
}

static void test_sampled_curve_is_within_its_error_bound(void **state)
{
    (void)state;
    rng_state = 42;
    stream s = make_stream(2000000, 200000, 1, 2.0);
    check_sampled(&s, 0.1, 0.05);
    check_sampled(&s, 0.02, 0.1);
    free_stream(&s);
}

static void test_sampled_curve_with_heavy_hitters_widens_its_bound_but_holds(void **state)
{
    (void)state;
    /* The hottest key alone takes ~2% of the accesses: whether it is sampled moves the curve. */
    rng_state = 4242;
    stream s = make_stream(2000000, 200000, 1, 3.0);
    check_sampled(&s, 0.1, 0);
    free_stream(&s);
}

static void test_sampled_curve_with_byte_weights_is_within_its_error_bound(void **state)
{
    (void)state;
    rng_state = 7;
    stream s = make_stream(1500000, 100000, 64 * 1024, 2.0);
    check_sampled(&s, 0.05, 0.1);
    free_stream(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_sample_rate_is_refused),
        cmocka_unit_test(test_reuse_buckets_are_log2),
        cmocka_unit_test(test_cyclic_stream_has_its_known_curve),
        cmocka_unit_test(test_requested_size_outside_the_range_is_reported),
        cmocka_unit_test(test_empty_stream_has_only_requested_points),
        cmocka_unit_test(test_exact_curve_counts_every_distance_at_every_point),
        cmocka_unit_test(test_sampled_curve_is_within_its_error_bound),
        cmocka_unit_test(test_sampled_curve_with_heavy_hitters_widens_its_bound_but_holds),
        cmocka_unit_test(test_sampled_curve_with_byte_weights_is_within_its_error_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
