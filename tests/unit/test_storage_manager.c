/*
 * test_storage_manager.c -- the StorageManager facade end to end: write
 * modes, prefetch trimming, the read context's lock rules, L2 round trips
 * through fs and mock, store policies, eviction, status and close.
 */
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

#include "core/clock.h"
#include "core/log.h"
#include "helpers/sm_test_util.h"
#include "lmcache/storage_manager.h"

#define KB 1024

/* Under ASan an impossible calloc must return NULL, as it does in libc. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

static void test_reserve_write_new_mode_rejects_existing_key(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 1);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    assert_int_equal(sm_test_store(sm, k, 1, &lay), 1);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    size_t ok = lmc_sm_reserve_write(sm, k, 2, &lay, LMC_WRITE_NEW, errs, objs);
    assert_int_equal(ok, 1);
    assert_int_equal(errs[0], LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    lmc_sm_finish_write(sm, &k[1], 1, NULL);
    assert_true(lmc_sm_memcheck(sm, NULL, 0));
    lmc_sm_destroy(sm);
}

static void test_reserve_write_update_mode_writes_in_place(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 10);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 1, &lay);
    lmc_l1_error e1;
    lmc_memory_obj o1;
    lmc_sm_unsafe_read(sm, k, 1, &e1, &o1); /* no read lock held: not readable */
    assert_int_equal(e1, LMC_L1_KEY_NOT_READABLE);

    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    assert_int_equal(lmc_sm_reserve_write(sm, k, 2, &lay, LMC_WRITE_UPDATE, errs, objs), 1);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_KEY_NOT_WRITABLE); /* update never allocates */
    memset(objs[0].data, 0xAB, objs[0].size);
    lmc_sm_finish_write(sm, k, 1, NULL);

    lmc_prefetch_handle h;
    assert_int_equal(lmc_sm_submit_prefetch_task(sm, k, 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h,
                                                 NULL),
                     LMC_OK);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 1, &ctx);
    assert_true(ctx.ok);
    assert_int_equal(ctx.objs[0].data[100], 0xAB);
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, k, 1, 0, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_reserve_write_all_mode_allocates_and_updates(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 20);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 1, &lay);
    lmc_l1_error errs[2];
    lmc_memory_obj objs[2];
    assert_int_equal(lmc_sm_reserve_write(sm, k, 2, &lay, LMC_WRITE_ALL, errs, objs), 2);
    /* A second reservation while the first is held is refused. */
    lmc_l1_error e2[2];
    lmc_memory_obj o2[2];
    assert_int_equal(lmc_sm_reserve_write(sm, k, 2, &lay, LMC_WRITE_ALL, e2, o2), 0);
    assert_int_equal(e2[0], LMC_L1_KEY_NOT_WRITABLE);
    assert_int_equal(e2[1], LMC_L1_KEY_NOT_WRITABLE);
    lmc_sm_finish_write(sm, k, 2, errs);
    assert_int_equal(errs[0], LMC_L1_SUCCESS);
    assert_int_equal(errs[1], LMC_L1_SUCCESS);
    lmc_sm_destroy(sm);
}

static void test_reserve_write_out_of_memory_keeps_largest_prefix(void **state)
{
    (void)state;
    /* 0.001 GiB = 1,073,741 bytes -> 262 slots of 4 KiB. */
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.001 --eviction-policy noop");
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    size_t slots = (size_t)(total / (4 * KB));
    size_t n = slots + 10;
    lmc_object_key *k = calloc(n, sizeof(*k));
    lmc_l1_error *errs = calloc(n, sizeof(*errs));
    lmc_memory_obj *objs = calloc(n, sizeof(*objs));
    sm_test_keys(k, n, 1000);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    assert_int_equal(lmc_sm_reserve_write(sm, k, n, &lay, LMC_WRITE_NEW, errs, objs), slots);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], i < slots ? LMC_L1_SUCCESS : LMC_L1_OUT_OF_MEMORY);
    lmc_sm_finish_write(sm, k, slots, NULL);
    assert_true(lmc_sm_memcheck(sm, NULL, 0));
    free(k);
    free(errs);
    free(objs);
    lmc_sm_destroy(sm);
}

static void test_prefix_prefetch_keeps_leading_l1_hits_and_releases_the_rest(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[4];
    sm_test_keys(k, 4, 100);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, &k[0], 2, &lay); /* hits 0, 1 */
    sm_test_store(sm, &k[3], 1, &lay); /* hit 3 after a gap */
    lmc_prefetch_handle h;
    assert_int_equal(lmc_sm_submit_prefetch_task(sm, k, 4, &lay, 0, "req", LMC_TRIM_PREFIX, &h,
                                                 NULL),
                     LMC_OK);
    assert_int_equal(h.prefetch_request_id, -1); /* no L2 adapter */
    assert_int_equal(h.l1_found_count, 2);
    lmc_bitmap bm;
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_OK);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), 2);
    assert_false(lmc_bitmap_test(&bm, 3));
    lmc_bitmap_free(&bm);
    /* Key 3's lock was released at once: it can be deleted by clear. */
    lmc_sm_finish_read_prefetched(sm, k, 2, 0, NULL);
    assert_int_equal(lmc_sm_clear(sm, false), 3);
    size_t hits;
    assert_true(lmc_sm_query_prefetch_lookup_hits(sm, &h, &hits));
    assert_int_equal(hits, 2);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_sparse_prefetch_keeps_every_l1_hit(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[4];
    sm_test_keys(k, 4, 200);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, &k[0], 1, &lay);
    sm_test_store(sm, &k[2], 2, &lay);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 4, &lay, 2, "req", LMC_TRIM_SPARSE, &h, NULL);
    assert_int_equal(h.l1_found_count, 3);
    lmc_bitmap bm;
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_OK);
    char s[8];
    lmc_bitmap_to_string(&bm, s, sizeof(s));
    assert_string_equal(s, "1011");
    lmc_bitmap_free(&bm);
    /* extra_count 2 -> 3 locks per key; one finish with extra 2 releases all. */
    lmc_sm_finish_read_prefetched(sm, (lmc_object_key[]){k[0], k[2], k[3]}, 3, 2, NULL);
    assert_int_equal(lmc_sm_clear(sm, false), 3);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_read_context_releases_one_lock_per_good_key_on_failure(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 300);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 1, &lay); /* k[1] is absent */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 2, &ctx);
    assert_false(ctx.ok); /* the context yields nothing */
    assert_int_equal(ctx.errs[0], LMC_L1_SUCCESS);
    assert_int_equal(ctx.errs[1], LMC_L1_KEY_NOT_EXIST);
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    /* The lock on k[0] is gone, so a non-forced clear removes it. */
    assert_int_equal(lmc_sm_clear(sm, false), 1);
    lmc_sm_destroy(sm);
}

static void test_read_context_caller_error_releases_locks(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 400);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 2, &lay);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 2, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 2, &ctx);
    assert_true(ctx.ok);
    lmc_sm_read_prefetched_exit(sm, &ctx, true);
    assert_int_equal(lmc_sm_clear(sm, false), 2);
    lmc_sm_destroy(sm);
}

static void test_read_context_success_keeps_locks_for_finish_read(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 500);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 2, &lay);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 2, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 2, &ctx);
    assert_true(ctx.ok);
    assert_int_equal(ctx.objs[1].data[5], sm_test_pattern(&k[1], 5));
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    assert_int_equal(lmc_sm_clear(sm, false), 0); /* still read-locked */
    lmc_sm_finish_read_prefetched(sm, k, 2, 0, NULL);
    assert_int_equal(lmc_sm_clear(sm, false), 2);
    lmc_sm_destroy(sm);
}

/* Store to L2, drop L1, prefetch back from L2 and check every byte. */
static void round_trip_through_l2(const char *adapter_json, bool expect_temporary)
{
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", "--l2-adapter",
                    (char *)adapter_json, NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    enum { N = 8 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 600);
    lmc_layout_desc lay = sm_test_layout(16 * KB);
    assert_int_equal(sm_test_store(sm, k, N, &lay), N);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_clear(sm, false), N);

    lmc_prefetch_handle h;
    assert_int_equal(lmc_sm_submit_prefetch_task(sm, k, N, &lay, 0, "rt", LMC_TRIM_PREFIX, &h,
                                                 NULL),
                     LMC_OK);
    assert_true(h.prefetch_request_id >= 0);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), N);
    lmc_bitmap_free(&bm);
    /* The L2 result is consumed: a second query sees nothing. */
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_ERR_NOT_FOUND);

    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, N, &ctx);
    assert_true(ctx.ok);
    for (size_t i = 0; i < N; i++) {
        for (uint64_t b = 0; b < ctx.objs[i].size; b += 997)
            assert_int_equal(ctx.objs[i].data[b], sm_test_pattern(&k[i], b));
    }
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, k, N, 0, NULL);
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    if (expect_temporary)
        assert_int_equal(used, 0); /* temporary objects left with their last reader */
    else
        assert_true(used > 0);
    assert_true(lmc_sm_memcheck(sm, NULL, 0));
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_prefetch_round_trip_through_fs_adapter(void **state)
{
    (void)state;
    char *dir = sm_test_mkdtemp();
    char json[512];
    snprintf(json, sizeof(json), "{\"type\": \"fs\", \"base_path\": \"%s\"}", dir);
    round_trip_through_l2(json, true);
    sm_test_rmdir(dir);
}

static void test_prefetch_round_trip_through_mock_adapter(void **state)
{
    (void)state;
    round_trip_through_l2("{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 10}",
                          true);
}

/*
 * A StorageManager over one mock L2 adapter (bandwidth_gb GB/s), with n
 * keys stored to L2, dropped from L1, and a prefetch of them submitted.
 */
static lmc_storage_manager *prefetch_from_l2(const char *bandwidth_gb, lmc_object_key *k, size_t n,
                                             const lmc_layout_desc *lay, lmc_prefetch_handle *h)
{
    char json[128];
    snprintf(json, sizeof(json),
             "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": %s}", bandwidth_gb);
    char *argv[] = {"t",   "--l1-size-gb", "0.01", "--eviction-policy",
                    "LRU", "--l2-adapter", json,   NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    assert_int_equal(sm_test_store(sm, k, n, lay), n);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_clear(sm, false), n);
    assert_int_equal(lmc_sm_submit_prefetch_task(sm, k, n, lay, 0, "r", LMC_TRIM_PREFIX, h, NULL),
                     LMC_OK);
    assert_true(h->prefetch_request_id >= 0);
    return sm;
}

static void test_prefetch_status_out_of_memory_keeps_the_l2_result(void **state)
{
    (void)state;
    enum { N = 4 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 650);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    lmc_prefetch_handle h;
    lmc_storage_manager *sm = prefetch_from_l2("10", k, N, &lay, &h);
    assert_true(lmc_sm_wait_idle(sm, 5000)); /* the L2 result is in */

    /* The same request, but its answer's bitmap (SIZE_MAX bits) cannot be allocated. */
    lmc_prefetch_handle huge = h;
    huge.total_requested_keys = SIZE_MAX;
    lmc_bitmap bm;
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &huge, &bm), LMC_ERR_NOMEM);
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &huge, &bm), LMC_ERR_NOMEM);
    /* Nothing was lost: the next query with memory collects every L2 hit. */
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_OK);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), N);
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_ERR_NOT_FOUND);
    lmc_sm_finish_read_prefetched(sm, k, N, 0, NULL);
    assert_true(lmc_sm_memcheck(sm, NULL, 0));
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_prefetch_status_is_busy_while_the_l2_part_runs(void **state)
{
    (void)state;
    lmc_object_key k[1];
    sm_test_keys(k, 1, 660);
    lmc_layout_desc lay = sm_test_layout(64 * KB);
    lmc_prefetch_handle h;
    /* 1 MB/s: loading 64 KiB takes about 60 ms, long after the first query. */
    lmc_storage_manager *sm = prefetch_from_l2("0.001", k, 1, &lay, &h);
    lmc_bitmap bm;
    assert_int_equal(lmc_sm_query_prefetch_status(sm, &h, &bm), LMC_ERR_BUSY);
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_popcount(&bm), 1);
    lmc_bitmap_free(&bm);
    lmc_sm_finish_read_prefetched(sm, k, 1, 0, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_prefetch_retain_policy_keeps_objects_in_l1(void **state)
{
    (void)state;
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU",
                    "--l2-prefetch-policy", "retain", "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 10}",
                    NULL};
    lmc_storage_manager *sm = sm_test_create_argv(9, argv);
    lmc_object_key k[2];
    sm_test_keys(k, 2, 700);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 2, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    lmc_sm_clear(sm, false);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 2, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_popcount(&bm), 2);
    lmc_bitmap_free(&bm);
    lmc_sm_finish_read_prefetched(sm, k, 2, 0, NULL);
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    assert_int_equal(used, 2 * 4 * KB);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_skip_l1_store_policy_deletes_from_l1_after_store(void **state)
{
    (void)state;
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "noop",
                    "--l2-store-policy", "skip_l1", "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 10}",
                    NULL};
    lmc_storage_manager *sm = sm_test_create_argv(9, argv);
    lmc_object_key k[4];
    sm_test_keys(k, 4, 800);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 4, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    uint64_t used = 1, total;
    for (int i = 0; i < 500 && used != 0; i++) {
        lmc_sm_l1_usage(sm, &used, &total);
        lmc_sleep_ns(1000 * 1000);
    }
    assert_int_equal(used, 0);
    /* ... and the data is still reachable through L2. */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 4, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), 4);
    lmc_bitmap_free(&bm);
    lmc_sm_finish_read_prefetched(sm, k, 4, 0, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
}

static void test_fs_adapter_data_survives_a_restart(void **state)
{
    (void)state;
    char *dir = sm_test_mkdtemp();
    char json[512];
    snprintf(json, sizeof(json), "{\"type\": \"fs\", \"base_path\": \"%s\"}", dir);
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", "--l2-adapter",
                    json, NULL};
    lmc_object_key k[3];
    sm_test_keys(k, 3, 900);
    lmc_layout_desc lay = sm_test_layout(8 * KB);

    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    sm_test_store(sm, k, 3, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    lmc_sm_destroy(sm);

    sm = sm_test_create_argv(7, argv);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 3, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    assert_int_equal(lmc_bitmap_count_leading_ones(&bm), 3);
    lmc_bitmap_free(&bm);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 3, &ctx);
    assert_true(ctx.ok);
    assert_int_equal(ctx.objs[2].data[4000], sm_test_pattern(&k[2], 4000));
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, k, 3, 0, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);
    sm_test_rmdir(dir);
}

static void test_l1_eviction_at_watermark_under_every_policy(void **state)
{
    (void)state;
    static const char *const policies[] = {"LRU", "ARC", "S3FIFO", "IsolatedLRU"};
    for (size_t p = 0; p < 4; p++) {
        char flags[256];
        snprintf(flags, sizeof(flags),
                 "--l1-size-gb 0.001 --eviction-policy %s --eviction-trigger-watermark 0.5 "
                 "--eviction-ratio 0.5",
                 policies[p]);
        lmc_storage_manager *sm = sm_test_create(flags);
        uint64_t used, total;
        lmc_sm_l1_usage(sm, &used, &total);
        size_t n = (size_t)(total / (4 * KB)) * 9 / 10;
        lmc_object_key *k = calloc(n, sizeof(*k));
        sm_test_keys(k, n, 10000 * (p + 1));
        lmc_layout_desc lay = sm_test_layout(4 * KB);
        assert_int_equal(sm_test_store(sm, k, n, &lay), n);
        /* The eviction loop runs every second; allow a few periods. */
        uint64_t deadline = lmc_mono_ms() + 5000;
        do {
            lmc_sleep_ns(50 * 1000 * 1000);
            lmc_sm_l1_usage(sm, &used, &total);
        } while ((double)used / (double)total >= 0.5 && lmc_mono_ms() < deadline);
        if ((double)used / (double)total >= 0.5)
            fail_msg("policy %s did not evict below the watermark", policies[p]);
        assert_true(lmc_sm_memcheck(sm, NULL, 0));
        free(k);
        lmc_sm_destroy(sm);
    }
}

static void test_noop_policy_never_evicts(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create(
        "--l1-size-gb 0.001 --eviction-policy noop --eviction-trigger-watermark 0.1");
    lmc_object_key k[64];
    sm_test_keys(k, 64, 50000);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 64, &lay);
    lmc_sleep_ns(1200ull * 1000 * 1000);
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    assert_int_equal(used, 64 * 4 * KB);
    lmc_sm_destroy(sm);
}

static void count_warnings(lmc_log_level level, const char *comp, const char *msg, void *ud)
{
    (void)comp;
    (void)msg;
    if (level >= LMC_LOG_WARNING)
        (*(size_t *)ud)++;
}

static void test_read_context_reports_missing_keys_in_errs_without_warnings(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    enum { N = 40 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 700);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, k, 1, &lay); /* k[0] in L1 (no read lock), the rest absent */
    size_t warnings = 0;
    lmc_log_set_sink(count_warnings, &warnings);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, N, &ctx);
    lmc_log_set_sink(NULL, NULL);
    assert_false(ctx.ok);
    assert_int_equal(ctx.errs[0], LMC_L1_KEY_NOT_READABLE);
    for (size_t i = 1; i < N; i++)
        assert_int_equal(ctx.errs[i], LMC_L1_KEY_NOT_EXIST);
    assert_int_equal(warnings, 0); /* the reasons are the caller's to count */
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_destroy(sm);
}

static void test_l1_key_states_tell_absent_writing_read_locked_and_ready(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[4];
    sm_test_keys(k, 4, 800);
    lmc_layout_desc lay = sm_test_layout(4 * KB);
    sm_test_store(sm, &k[2], 2, &lay); /* k[2], k[3] ready */
    lmc_l1_error errs[1];
    lmc_memory_obj objs[1];
    lmc_sm_reserve_write(sm, &k[1], 1, &lay, LMC_WRITE_NEW, errs, objs); /* k[1] writing */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, &k[2], 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h); /* k[2] read-locked */
    lmc_l1_key_state st[4];
    lmc_sm_l1_key_states(sm, k, 4, st);
    assert_int_equal(st[0], LMC_L1_STATE_ABSENT);
    assert_int_equal(st[1], LMC_L1_STATE_WRITING);
    assert_int_equal(st[2], LMC_L1_STATE_READ_LOCKED);
    assert_int_equal(st[3], LMC_L1_STATE_READY);
    lmc_sm_finish_write(sm, &k[1], 1, NULL);
    lmc_sm_finish_read_prefetched(sm, &k[2], 1, 0, NULL);
    lmc_sm_destroy(sm);
}

static void test_counters_count_l2_stores_loads_and_l1_evictions(void **state)
{
    (void)state;
    enum { N = 4 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 900);
    lmc_layout_desc lay = sm_test_layout(16 * KB);
    lmc_prefetch_handle h;
    lmc_storage_manager *sm = prefetch_from_l2("10", k, N, &lay, &h);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    lmc_bitmap_free(&bm);
    lmc_sm_counters c;
    lmc_sm_get_counters(sm, &c);
    assert_int_equal(c.l2_stored_keys, N);
    assert_int_equal(c.l2_stored_bytes, N * 16 * KB);
    assert_int_equal(c.l2_store_failed_tasks, 0);
    assert_int_equal(c.l2_loaded_keys, N);
    assert_int_equal(c.l2_loaded_bytes, N * 16 * KB);
    assert_int_equal(c.l1_evicted_keys, 0); /* lmc_sm_clear is not eviction */
    assert_int_equal(c.l2_evicted_keys, 0);
    lmc_sm_finish_read_prefetched(sm, k, N, 0, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_destroy(sm);

    /* The eviction loop's deletions are counted. */
    sm = sm_test_create("--l1-size-gb 0.001 --eviction-policy LRU --eviction-trigger-watermark "
                        "0.5 --eviction-ratio 0.5");
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    size_t n = (size_t)(total / (4 * KB)) * 9 / 10;
    lmc_object_key *many = calloc(n, sizeof(*many));
    sm_test_keys(many, n, 20000);
    lmc_layout_desc small = sm_test_layout(4 * KB);
    assert_int_equal(sm_test_store(sm, many, n, &small), n);
    uint64_t deadline = lmc_mono_ms() + 5000;
    do {
        lmc_sleep_ns(50 * 1000 * 1000);
        lmc_sm_get_counters(sm, &c);
    } while (c.l1_evicted_keys == 0 && lmc_mono_ms() < deadline);
    lmc_sm_l1_usage(sm, &used, &total);
    assert_true(c.l1_evicted_keys > 0);
    assert_int_equal(c.l1_evicted_keys, n - used / (4 * KB));
    free(many);
    lmc_sm_destroy(sm);
}

static void test_report_status_is_json_with_every_component(void **state)
{
    (void)state;
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 10}",
                    NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    char *status = lmc_sm_report_status(sm);
    assert_non_null(status);
    static const char *const fields[] = {"\"is_healthy\": true", "\"l1_manager\"",
                                         "\"store_controller\"", "\"prefetch_controller\"",
                                         "\"l1_eviction_controller\"", "\"l2_eviction_controller\"",
                                         "\"l2_adapters\"", "\"num_l2_adapters\": 1"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (strstr(status, fields[i]) == NULL)
            fail_msg("status lacks %s: %s", fields[i], status);
    }
    free(status);
    assert_int_equal(strlen(lmc_sm_config_digest_hex(sm)), 64);
    lmc_sm_destroy(sm);
}

static void test_destroy_with_prefetches_and_stores_in_flight_leaks_nothing(void **state)
{
    (void)state;
    char *argv[] = {"t", "--l1-size-gb", "0.05", "--eviction-policy", "LRU", "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 0.5, \"mock_bandwidth_gb\": 0.05}",
                    NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    enum { N = 32 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 70000);
    lmc_layout_desc lay = sm_test_layout(64 * KB);
    assert_int_equal(sm_test_store(sm, k, N, &lay), N); /* slow stores now in flight */
    lmc_object_key other[N];
    sm_test_keys(other, N, 80000);
    lmc_prefetch_handle h;
    assert_int_equal(
        lmc_sm_submit_prefetch_task(sm, other, N, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL), LMC_OK);
    assert_int_equal(h.l1_found_count, 0);
    assert_true(h.prefetch_request_id >= 0); /* the keys went to L2: a prefetch in flight */
    lmc_prefetch_handle_clear(&h);
    assert_true(lmc_sm_memcheck(sm, NULL, 0));
    lmc_sm_destroy(sm); /* ASan reports any leak or use after free */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_write_new_mode_rejects_existing_key),
        cmocka_unit_test(test_reserve_write_update_mode_writes_in_place),
        cmocka_unit_test(test_reserve_write_all_mode_allocates_and_updates),
        cmocka_unit_test(test_reserve_write_out_of_memory_keeps_largest_prefix),
        cmocka_unit_test(test_prefix_prefetch_keeps_leading_l1_hits_and_releases_the_rest),
        cmocka_unit_test(test_sparse_prefetch_keeps_every_l1_hit),
        cmocka_unit_test(test_read_context_releases_one_lock_per_good_key_on_failure),
        cmocka_unit_test(test_read_context_caller_error_releases_locks),
        cmocka_unit_test(test_read_context_success_keeps_locks_for_finish_read),
        cmocka_unit_test(test_prefetch_round_trip_through_fs_adapter),
        cmocka_unit_test(test_prefetch_round_trip_through_mock_adapter),
        cmocka_unit_test(test_prefetch_status_out_of_memory_keeps_the_l2_result),
        cmocka_unit_test(test_prefetch_status_is_busy_while_the_l2_part_runs),
        cmocka_unit_test(test_prefetch_retain_policy_keeps_objects_in_l1),
        cmocka_unit_test(test_skip_l1_store_policy_deletes_from_l1_after_store),
        cmocka_unit_test(test_fs_adapter_data_survives_a_restart),
        cmocka_unit_test(test_l1_eviction_at_watermark_under_every_policy),
        cmocka_unit_test(test_noop_policy_never_evicts),
        cmocka_unit_test(test_read_context_reports_missing_keys_in_errs_without_warnings),
        cmocka_unit_test(test_l1_key_states_tell_absent_writing_read_locked_and_ready),
        cmocka_unit_test(test_counters_count_l2_stores_loads_and_l1_evictions),
        cmocka_unit_test(test_report_status_is_json_with_every_component),
        cmocka_unit_test(test_destroy_with_prefetches_and_stores_in_flight_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
