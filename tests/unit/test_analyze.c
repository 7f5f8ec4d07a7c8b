/*
 * test_analyze.c -- the one-pass trace analysis: what it counts (requests,
 * keys, unique keys, footprint from the layouts, per model and salt, keys
 * read), the rate buckets and their width rules, the records it leaves out
 * (dropped marker, undecodable args), the curve through a real file, and
 * sampling (deterministic, estimates near the truth, exact counts exact).
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

#include "analyze/analyze.h"
#include "helpers/trace_test_util.h"
#include "trace/format.h"
#include "trace/marker.h"
#include "trace/recorder.h"

#define Q(m) LMC_TRACE_QUALNAME_PREFIX m

/* A key: model, hash number, salt. */
static lmc_object_key key(const char *model, uint32_t n, const char *salt)
{
    return tt_key(model, n, 0x01000100, 0, salt);
}

/* A layout of `bytes` uint8 elements, or of two tensors (float16 [2, n] and int32 [m]). */
static lmc_layout_desc layout1(int64_t bytes)
{
    lmc_layout_desc d;
    assert_int_equal(lmc_layout_desc_make1(&d, &bytes, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    return d;
}

/* A record of keys[0..n) and optional layout at time t. */
static void put(void **state, double t, const char *q, const lmc_object_key *keys, size_t n,
                const lmc_layout_desc *layout)
{
    tt_trace_file *f = *state;
    lmc_tv *items = calloc(n + 1, sizeof(*items));
    assert_non_null(items);
    for (size_t i = 0; i < n; i++)
        items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    lmc_trace_arg args[2] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, n}}},
                             {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = layout}}};
    assert_int_equal(lmc_trace_encode_record(&f->sb, t, 1e9 + t, q, strlen(q), args,
                                             layout != NULL ? 2 : 1, NULL),
                     LMC_OK);
    free(items);
}

static void lookup(void **state, double t, const lmc_object_key *keys, size_t n,
                   const lmc_layout_desc *layout)
{
    put(state, t, Q("submit_prefetch_task"), keys, n, layout);
}

static void read_enter(void **state, double t, const lmc_object_key *keys, size_t n)
{
    put(state, t, Q("read_prefetched_results.__enter__"), keys, n, NULL);
}

static void analyze(void **state, double rate, const uint64_t *sizes, size_t n_sizes, bool full,
                    lmc_analyze_result *r)
{
    tt_trace_file *f = *state;
    tt_trace_file_write(f);
    lmc_analyze_options o = {.full = full, .sample_rate = rate, .sizes = sizes, .n_sizes = n_sizes};
    lmc_error err;
    if (lmc_analyze_file(f->path, &o, r, &err) != LMC_OK)
        fail_msg("analyze: %s", err.msg);
}

static const lmc_analyze_group *group(const lmc_analyze_result *r, const char *model,
                                      const char *salt)
{
    for (size_t i = 0; i < r->n_groups; i++) {
        if (strcmp(r->groups[i].model_name, model) == 0 &&
            strcmp(r->groups[i].cache_salt, salt) == 0)
            return &r->groups[i];
    }
    fail_msg("no group %s / %s", model, salt);
    return NULL;
}

static void test_counts_keys_unique_keys_and_footprint_from_the_layouts(void **state)
{
    lmc_layout_desc small = layout1(4096);
    /* Two tensors: float16 [2, 3, 4] (48 bytes) + int32 [10] (40 bytes) = 88 bytes. */
    lmc_shape shapes[2] = {{3, {2, 3, 4}}, {1, {10}}};
    lmc_dtype dtypes[2] = {LMC_DTYPE_FLOAT16, LMC_DTYPE_INT32};
    lmc_layout_desc two;
    assert_int_equal(lmc_layout_desc_make(&two, shapes, 2, dtypes, 2, NULL), LMC_OK);
    assert_int_equal(lmc_layout_desc_nbytes(&two), 88);

    lmc_object_key a[3] = {key("m1", 1, NULL), key("m1", 2, NULL), key("m1", 3, NULL)};
    lmc_object_key b[2] = {key("m1", 1, NULL), key("m1", 4, NULL)};
    lmc_object_key c[2] = {key("m2", 1, "user-a"), key("m2", 1, NULL)};
    lookup(state, 0.0, a, 3, &small);
    lookup(state, 0.5, b, 2, &small); /* key 1 again: not unique */
    lookup(state, 1.0, c, 2, &two);   /* same hash as m1's key 1, other model/salt: new keys */
    read_enter(state, 1.2, a, 2);
    read_enter(state, 1.3, c, 1);
    put(state, 1.4, Q("reserve_write"), b, 2, &small); /* not a lookup */

    lmc_analyze_result r;
    uint64_t at[2] = {3 * 4096, 3 * 4096 - 1};
    analyze(state, 1.0, at, 2, true, &r);
    assert_int_equal(r.records, 6);
    assert_int_equal(r.requests, 3);
    assert_int_equal(r.keys, 7);
    assert_int_equal(r.unique_keys, 6);
    assert_int_equal(r.footprint_bytes, 4 * 4096 + 2 * 88);
    assert_int_equal(r.min_object_bytes, 88);
    assert_int_equal(r.max_object_bytes, 4096);
    assert_int_equal(r.keys_read, 3);
    assert_true(fabs(r.recorded_hit_rate - 3.0 / 7.0) < 1e-12);
    assert_false(r.estimated);
    assert_true(r.sample_rate == 1.0);
    assert_string_equal(r.level, "storage");
    assert_string_equal(r.sm_config_digest, "abc");
    assert_int_equal(r.trace_schema_version, 2);
    assert_true(fabs(r.span_s - 1.4) < 1e-12);

    /* Groups sorted by model, then salt. */
    assert_int_equal(r.n_groups, 3);
    assert_string_equal(r.groups[0].model_name, "m1");
    assert_string_equal(r.groups[1].model_name, "m2");
    assert_string_equal(r.groups[1].cache_salt, "");
    assert_string_equal(r.groups[2].cache_salt, "user-a");
    const lmc_analyze_group *g = group(&r, "m1", "");
    assert_int_equal(g->requests, 2);
    assert_int_equal(g->keys, 5);
    assert_int_equal(g->unique_keys, 4);
    assert_int_equal(g->footprint_bytes, 4 * 4096);
    assert_int_equal(g->keys_read, 2);
    g = group(&r, "m2", "user-a");
    assert_int_equal(g->requests, 1); /* a request counts for its first key's group */
    assert_int_equal(g->keys, 1);
    assert_int_equal(g->keys_read, 1);
    g = group(&r, "m2", "");
    assert_int_equal(g->requests, 0);
    assert_int_equal(g->footprint_bytes, 88);

    /* The curve: the one reuse (key 1 after 2 others of 4 KiB) hits from 12 KiB. */
    assert_int_equal(r.mrc.accesses, 7);
    assert_int_equal(r.mrc.cold, 6);
    assert_true(lmc_mrc_result_hit_rate_at(&r.mrc, 3 * 4096 - 1) == 0.0);
    assert_true(fabs(lmc_mrc_result_hit_rate_at(&r.mrc, 3 * 4096) - 1.0 / 7.0) < 1e-12);
    lmc_analyze_result_free(&r);
}

static void test_summary_counts_keys_but_reads_no_reads_and_has_no_curve(void **state)
{
    lmc_layout_desc l = layout1(100);
    lmc_object_key a[2] = {key("m", 1, NULL), key("m", 2, NULL)};
    lookup(state, 0.0, a, 2, &l);
    read_enter(state, 0.1, a, 2);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, false, &r);
    assert_int_equal(r.requests, 1);
    assert_int_equal(r.unique_keys, 2);
    assert_int_equal(r.footprint_bytes, 200);
    assert_int_equal(r.keys_read, 0);
    assert_null(r.mrc.points);
    assert_null(r.buckets);
    lmc_analyze_result_free(&r);
}

static void test_lookup_without_a_layout_counts_its_keys_at_size_zero(void **state)
{
    lmc_object_key a[2] = {key("m", 1, NULL), key("m", 2, NULL)};
    lookup(state, 0.0, a, 2, NULL);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_int_equal(r.unsized_requests, 1);
    assert_int_equal(r.unique_keys, 2);
    assert_int_equal(r.footprint_bytes, 0);
    lmc_analyze_result_free(&r);
}

static void test_rate_buckets_count_per_second(void **state)
{
    lmc_layout_desc l = layout1(64);
    lmc_object_key k[4] = {key("m", 1, NULL), key("m", 2, NULL), key("m", 3, NULL),
                           key("m", 4, NULL)};
    /* 40 s of trace: 1 s buckets. Second 0: 2 requests (3 keys); second 7: 1 (4 keys). */
    lookup(state, 0.1, k, 1, &l);
    lookup(state, 0.9, k, 2, &l);
    lookup(state, 7.5, k, 4, &l);
    read_enter(state, 7.6, k, 3);
    lookup(state, 40.0, k, 1, &l);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_true(r.bucket_s == 1.0);
    assert_int_equal(r.n_buckets, 41);
    assert_int_equal(r.buckets[0].requests, 2);
    assert_int_equal(r.buckets[0].keys, 3);
    assert_int_equal(r.buckets[7].requests, 1);
    assert_int_equal(r.buckets[7].keys, 4);
    assert_int_equal(r.buckets[7].keys_read, 3);
    assert_int_equal(r.buckets[3].keys, 0);
    assert_int_equal(r.buckets[40].requests, 1);
    lmc_analyze_result_free(&r);
}

static void test_short_trace_gets_fractions_of_a_second_long_trace_multiples(void **state)
{
    lmc_layout_desc l = layout1(64);
    lmc_object_key k = key("m", 1, NULL);
    /* A 4 s trace: the largest power-of-two width that still gives 32 buckets is 1/8 s. */
    lookup(state, 0.0, &k, 1, &l);
    lookup(state, 0.2, &k, 1, &l);
    lookup(state, 4.0, &k, 1, &l);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_true(r.bucket_s == 0.125);
    assert_int_equal(r.n_buckets, 33);
    assert_int_equal(r.buckets[0].requests, 1);
    assert_int_equal(r.buckets[1].requests, 1);
    assert_int_equal(r.buckets[32].requests, 1);
    lmc_analyze_result_free(&r);

    /* 2000 s: the smallest power-of-two width that gives at most 512 buckets is 4 s. */
    lookup(state, 1999.0, &k, 1, &l);
    lookup(state, 2000.0, &k, 1, &l);
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_true(r.bucket_s == 4.0);
    assert_int_equal(r.n_buckets, 501);
    assert_int_equal(r.buckets[0].requests, 2);
    assert_int_equal(r.buckets[1].requests, 1); /* t = 4.0 */
    assert_int_equal(r.buckets[499].requests, 1);
    assert_int_equal(r.buckets[500].requests, 1);
    uint64_t total = 0;
    for (size_t i = 0; i < r.n_buckets; i++)
        total += r.buckets[i].requests;
    assert_int_equal(total, 5);
    lmc_analyze_result_free(&r);
}

static void test_bad_times_count_in_the_first_bucket(void **state)
{
    lmc_layout_desc l = layout1(64);
    lmc_object_key k = key("m", 1, NULL);
    lookup(state, -5.0, &k, 1, &l);
    lookup(state, NAN, &k, 1, &l);
    lookup(state, 33.0, &k, 1, &l);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_true(r.span_s == 33.0);
    assert_int_equal(r.buckets[0].requests, 2);
    lmc_analyze_result_free(&r);
}

static void test_markers_and_malformed_records_are_counted_apart(void **state)
{
    tt_trace_file *f = *state;
    lmc_layout_desc l = layout1(64);
    lmc_object_key k[2] = {key("m", 1, NULL), key("m", 2, NULL)};
    lookup(state, 0.0, k, 2, &l);
    size_t start = f->sb.size;
    lookup(state, 0.1, k, 2, &l);
    /* Its first key's kv_rank becomes nil: LMCache's reader rejects the frame (malformed). */
    static const char rank[] = "\xa7kv_rank";
    char *at = memmem(f->sb.data + start, f->sb.size - start, rank, sizeof(rank) - 1);
    assert_non_null(at);
    at[sizeof(rank) - 1] = (char)0xc0;
    lmc_trace_arg drop = {"dropped_count", 13, lmc_tv_int(17)};
    assert_int_equal(lmc_trace_encode_record(&f->sb, 0.2, 1e9, LMC_TRACE_DROPPED_QUALNAME,
                                             strlen(LMC_TRACE_DROPPED_QUALNAME), &drop, 1, NULL),
                     LMC_OK);
    lmc_trace_arg note = {"from", 4, lmc_tv_str("x.lct", 5)};
    assert_int_equal(lmc_trace_encode_record(&f->sb, 0.3, 1e9, LMC_TRACE_SLICE_QUALNAME,
                                             strlen(LMC_TRACE_SLICE_QUALNAME), &note, 1, NULL),
                     LMC_OK);
    lmc_analyze_result r;
    analyze(state, 1.0, NULL, 0, true, &r);
    assert_int_equal(r.records, 1); /* markers are notes, not operations */
    assert_int_equal(r.dropped, 17);
    assert_int_equal(r.malformed, 1);
    assert_int_equal(r.undecodable, 0);
    assert_int_equal(r.requests, 1);
    assert_int_equal(r.keys, 2);
    lmc_analyze_result_free(&r);
}

static void test_requested_sizes_are_points_of_the_curve(void **state)
{
    lmc_layout_desc l = layout1(1000);
    lmc_object_key k[10];
    for (uint32_t i = 0; i < 10; i++)
        k[i] = key("m", i, NULL);
    for (int round = 0; round < 4; round++)
        lookup(state, round, k, 10, &l);
    uint64_t sizes[2] = {10000, 9999};
    lmc_analyze_result r;
    analyze(state, 1.0, sizes, 2, true, &r);
    size_t requested = 0;
    for (size_t i = 0; i < r.mrc.n_points; i++) {
        if (!r.mrc.points[i].requested)
            continue;
        requested++;
        double want = r.mrc.points[i].capacity == 10000 ? 0.75 : 0.0;
        assert_true(fabs(r.mrc.points[i].hit_rate - want) < 1e-12);
    }
    assert_int_equal(requested, 2);
    lmc_analyze_result_free(&r);
}

static void test_sampling_is_deterministic_and_keeps_exact_counts_exact(void **state)
{
    lmc_layout_desc l = layout1(4096);
    enum { N = 20000 };
    lmc_object_key *k = malloc(16 * sizeof(*k));
    assert_non_null(k);
    uint64_t rng = 5;
    for (int i = 0; i < N / 16; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t doc = (uint32_t)((rng >> 33) % 400);
        for (uint32_t j = 0; j < 16; j++)
            k[j] = key("m", doc * 16 + j, NULL);
        lookup(state, i * 0.01, k, 16, &l);
    }
    free(k);
    lmc_analyze_result exact, s1, s2;
    analyze(state, 1.0, NULL, 0, true, &exact);
    analyze(state, 0.25, NULL, 0, true, &s1);
    analyze(state, 0.25, NULL, 0, true, &s2);
    assert_true(s1.estimated);
    assert_true(s1.sample_rate == 0.25);
    assert_int_equal(s1.keys, exact.keys);
    assert_int_equal(s1.requests, exact.requests);
    /* The same sample every run: the hash is of the key's contents. */
    assert_int_equal(s1.unique_keys, s2.unique_keys);
    assert_int_equal(s1.mrc.accesses, s2.mrc.accesses);
    assert_int_equal(s1.mrc.n_points, s2.mrc.n_points);
    for (size_t i = 0; i < s1.mrc.n_points; i++)
        assert_true(s1.mrc.points[i].hit_rate == s2.mrc.points[i].hit_rate);
    /* About a quarter of the keys, scaled back: within 15% of the truth for 6,400 keys. */
    assert_true(s1.mrc.accesses > exact.keys / 5 && s1.mrc.accesses < exact.keys / 3);
    double ratio = (double)s1.unique_keys / (double)exact.unique_keys;
    assert_true(ratio > 0.85 && ratio < 1.15);
    ratio = (double)s1.footprint_bytes / (double)exact.footprint_bytes;
    assert_true(ratio > 0.85 && ratio < 1.15);
    lmc_analyze_result_free(&exact);
    lmc_analyze_result_free(&s1);
    lmc_analyze_result_free(&s2);
}

static void test_automatic_rate_is_exact_up_to_the_limit(void **state)
{
    (void)state;
    assert_true(lmc_analyze_auto_rate(0) == 1.0);
    assert_true(lmc_analyze_auto_rate(LMC_ANALYZE_EXACT_MAX_BYTES) == 1.0);
    assert_true(fabs(lmc_analyze_auto_rate(4 * LMC_ANALYZE_EXACT_MAX_BYTES) - 0.25) < 1e-12);
    assert_true(lmc_analyze_auto_rate(UINT64_MAX) == LMC_ANALYZE_MIN_RATE);
    lmc_analyze *a;
    lmc_analyze_options o = {.sample_rate = 1.5};
    lmc_error err;
    assert_int_equal(lmc_analyze_create(&o, &a, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "1.5"));
}

static void test_missing_file_is_an_error_naming_it(void **state)
{
    (void)state;
    lmc_analyze_options o = {.full = true};
    lmc_analyze_result r;
    lmc_error err;
    assert_int_equal(lmc_analyze_file("/nonexistent/t.lct", &o, &r, &err), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "/nonexistent/t.lct"));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, tt_trace_file_setup, tt_trace_file_teardown)
    const struct CMUnitTest tests[] = {
        T(test_counts_keys_unique_keys_and_footprint_from_the_layouts),
        T(test_summary_counts_keys_but_reads_no_reads_and_has_no_curve),
        T(test_lookup_without_a_layout_counts_its_keys_at_size_zero),
        T(test_rate_buckets_count_per_second),
        T(test_short_trace_gets_fractions_of_a_second_long_trace_multiples),
        T(test_bad_times_count_in_the_first_bucket),
        T(test_markers_and_malformed_records_are_counted_apart),
        T(test_requested_sizes_are_points_of_the_curve),
        T(test_sampling_is_deterministic_and_keeps_exact_counts_exact),
        T(test_automatic_rate_is_exact_up_to_the_limit),
        T(test_missing_file_is_an_error_naming_it),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
