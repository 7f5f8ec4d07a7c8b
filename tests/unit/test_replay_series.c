/*
 * test_replay_series.c -- a replay's figures over time (src/replay/series.h):
 * lookups, hits and the recorded reads land in the bucket of their record's
 * time, lateness counts only when it was measured, L1 samples keep their
 * peak, mean and capacity, and a long trace folds into wider buckets
 * without losing a count.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <string.h>

#include "replay/series.h"

/* A view of a lookup of n keys with l1 and l2 hits (engine: hit prefix) at time t. */
static lmc_replay_record_view lookup(double t, lmc_replay_outcome *o, uint32_t n, uint32_t l1,
                                     uint32_t l2, uint32_t hit)
{
    memset(o, 0, sizeof(*o));
    o->op = LMC_TRACE_OP_SUBMIT_PREFETCH;
    o->n_keys = n;
    o->v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = l1;
    o->v[LMC_OC_SUBMIT_PREFETCH_l2_hits] = l2;
    o->v[LMC_OC_SUBMIT_PREFETCH_hit_keys] = hit;
    return (lmc_replay_record_view){
        .index = 1, .qualname = "q", .t_mono = t, .lateness_s = -1.0, .outcome = o};
}

static lmc_replay_series_result get(const lmc_replay_series *s)
{
    lmc_replay_series_result r;
    assert_int_equal(lmc_replay_series_get(s, &r), LMC_OK);
    return r;
}

static void test_lookups_count_their_keys_and_hits_in_their_bucket(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    assert_non_null(s);
    lmc_replay_outcome o;
    lmc_replay_record_view v = lookup(0.1, &o, 10, 4, 2, 5);
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    v = lookup(0.2, &o, 6, 6, 0, 6);
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    v = lookup(1.5, &o, 8, 0, 0, 0);
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    lmc_replay_series_result r = get(s);
    /* A 1.5 s span: buckets of 1/32 s (the widest power of two giving 32 or more). */
    assert_true(r.bucket_s == 1.0 / 32);
    assert_int_equal(r.n_buckets, 49);
    const lmc_replay_series_bucket *b = &r.buckets[3]; /* [3/32, 4/32): 0.1 */
    assert_int_equal(b->lookups, 1);
    assert_int_equal(b->looked_up_keys, 10);
    assert_int_equal(b->l1_hit_keys, 4);
    assert_int_equal(b->l2_hit_keys, 2);
    assert_int_equal(b->engine_hit_keys, 5);
    assert_int_equal(r.buckets[6].looked_up_keys, 6); /* 0.2 */
    assert_int_equal(r.buckets[6].l1_hit_keys, 6);
    assert_int_equal(r.buckets[48].lookups, 1); /* 1.5 */
    assert_int_equal(r.buckets[48].l1_hit_keys, 0);
    assert_int_equal(r.buckets[0].records, 0);
    lmc_replay_series_result_free(&r);
    assert_null(r.buckets);
    lmc_replay_series_destroy(s);
}

static void test_reads_count_as_recorded_and_other_ops_only_as_records(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    lmc_replay_outcome o;
    lmc_replay_record_view v = lookup(0.0, &o, 3, 0, 0, 0);
    o.op = LMC_TRACE_OP_READ_ENTER;
    o.not_reissued = true; /* mode engine: the trace's read, kept for the recorded hit rate */
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    o.op = LMC_TRACE_OP_RESERVE_WRITE;
    o.not_reissued = false;
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    v.outcome = NULL; /* a skipped record */
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    lmc_replay_series_result r = get(s);
    assert_int_equal(r.n_buckets, 1);
    assert_int_equal(r.buckets[0].records, 3);
    assert_int_equal(r.buckets[0].recorded_read_keys, 3);
    assert_int_equal(r.buckets[0].lookups, 0);
    assert_int_equal(r.buckets[0].looked_up_keys, 0);
    lmc_replay_series_result_free(&r);
    lmc_replay_series_destroy(s);
}

static void test_lateness_counts_only_when_measured(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    lmc_replay_outcome o;
    lmc_replay_record_view v = lookup(0.0, &o, 1, 0, 0, 0);
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK); /* -1: virtual time */
    v.lateness_s = 0.002;
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    v.lateness_s = 0.004;
    assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
    lmc_replay_series_result r = get(s);
    assert_int_equal(r.buckets[0].records, 3);
    assert_int_equal(r.buckets[0].timed, 2);
    assert_true(fabs(r.buckets[0].lateness_sum_s - 0.006) < 1e-12);
    assert_true(r.buckets[0].lateness_max_s == 0.004);
    lmc_replay_series_result_free(&r);
    lmc_replay_series_destroy(s);
}

static void test_l1_samples_keep_peak_mean_and_capacity(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    assert_int_equal(lmc_replay_series_l1_usage(s, 0.01, 100, 1000), LMC_OK);
    assert_int_equal(lmc_replay_series_l1_usage(s, 0.011, 300, 1000), LMC_OK);
    assert_int_equal(lmc_replay_series_l1_usage(s, 0.012, 200, 1000), LMC_OK);
    lmc_replay_series_result r = get(s);
    assert_int_equal(r.n_buckets, 1);
    const lmc_replay_series_bucket *b = &r.buckets[0];
    assert_int_equal(b->l1_samples, 3);
    assert_int_equal(b->l1_used_max_bytes, 300);
    assert_true(b->l1_used_sum_bytes == 600.0);
    assert_int_equal(b->l1_capacity_bytes, 1000);
    lmc_replay_series_result_free(&r);
    lmc_replay_series_destroy(s);
}

static void test_a_long_trace_folds_into_wider_buckets_keeping_every_count(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    lmc_replay_outcome o;
    /* One lookup of 2 keys (1 L1 hit) every 0.25 s for 2000 s, an L1 sample after each. */
    for (int i = 0; i < 8000; i++) {
        double t = i * 0.25;
        lmc_replay_record_view v = lookup(t, &o, 2, 1, 0, 0);
        v.lateness_s = i == 4321 ? 0.5 : 0.001;
        assert_int_equal(lmc_replay_series_record(s, &v), LMC_OK);
        assert_int_equal(lmc_replay_series_l1_usage(s, t, (uint64_t)i, 1 << 20), LMC_OK);
    }
    lmc_replay_series_result r = get(s);
    /* 2000 s: the smallest power-of-two width giving at most 512 buckets is 4 s. */
    assert_true(r.bucket_s == 4.0);
    assert_int_equal(r.n_buckets, 500);
    uint64_t lookups = 0, keys = 0, hits = 0, samples = 0, max_used = 0;
    double late_max = 0;
    for (size_t i = 0; i < r.n_buckets; i++) {
        assert_int_equal(r.buckets[i].lookups, 16);
        lookups += r.buckets[i].lookups;
        keys += r.buckets[i].looked_up_keys;
        hits += r.buckets[i].l1_hit_keys;
        samples += r.buckets[i].l1_samples;
        if (r.buckets[i].l1_used_max_bytes > max_used)
            max_used = r.buckets[i].l1_used_max_bytes;
        late_max = fmax(late_max, r.buckets[i].lateness_max_s);
        assert_int_equal(r.buckets[i].l1_capacity_bytes, 1 << 20);
    }
    assert_int_equal(lookups, 8000);
    assert_int_equal(keys, 16000);
    assert_int_equal(hits, 8000);
    assert_int_equal(samples, 8000);
    assert_int_equal(max_used, 7999);
    assert_true(late_max == 0.5);
    assert_true(r.buckets[4321 / 16].lateness_max_s == 0.5);
    lmc_replay_series_result_free(&r);
    lmc_replay_series_destroy(s);
}

static void test_an_empty_series_has_no_buckets(void **state)
{
    (void)state;
    lmc_replay_series *s = lmc_replay_series_create();
    lmc_replay_series_result r = get(s);
    assert_int_equal(r.n_buckets, 0);
    assert_null(r.buckets);
    lmc_replay_series_destroy(s);
    lmc_replay_series_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups_count_their_keys_and_hits_in_their_bucket),
        cmocka_unit_test(test_reads_count_as_recorded_and_other_ops_only_as_records),
        cmocka_unit_test(test_lateness_counts_only_when_measured),
        cmocka_unit_test(test_l1_samples_keep_peak_mean_and_capacity),
        cmocka_unit_test(test_a_long_trace_folds_into_wider_buckets_keeping_every_count),
        cmocka_unit_test(test_an_empty_series_has_no_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
