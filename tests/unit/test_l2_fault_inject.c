/*
 * test_l2_fault_inject.c -- the "fault_inject" L2 adapter: config checks,
 * injected store/lookup/load failures and delays over a mock adapter, no
 * L2 lock left behind by a failed lookup, shutdown, and a StorageManager
 * that stays consistent while a third of its L2 operations fail.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "helpers/sm_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "lmcache/storage_manager.h"

#define INNER "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 1000}"

/* A fault_inject over a fast mock; extra is more JSON members (may be ""). */
static lmc_l2_adapter *fi_adapter(const char *extra)
{
    lmc_error err;
    lmc_l2_adapter *a =
        l2_adapter_from(&err, "{\"type\": \"fault_inject\", \"inner\": " INNER "%s%s}",
                        extra[0] != '\0' ? ", " : "", extra);
    if (a == NULL)
        print_error("create failed: %s\n", err.msg);
    assert_non_null(a);
    return a;
}

static void expect_rejected(const char *json, const char *msg)
{
    lmc_json *cfg = l2_json(json);
    assert_non_null(cfg);
    lmc_error err;
    memset(&err, 0, sizeof(err));
    lmc_status st = lmc_l2_check_config(cfg, &err);
    lmc_json_free(cfg);
    assert_int_equal(st, LMC_ERR_INVALID);
    if (strcmp(err.msg, msg) != 0)
        fail_msg("for %s\n  got  %s\n  want %s", json, err.msg, msg);
}

static void test_config_accepts_every_key_and_rejects_bad_values(void **state)
{
    (void)state;
    lmc_json *ok = l2_json("{\"type\": \"fault_inject\", \"inner\": " INNER
                           ", \"store_fail_rate\": 0.5, \"lookup_fail_rate\": 0, "
                           "\"load_fail_rate\": 1, \"delay_rate\": 0.2, \"delay_ms\": 20, "
                           "\"seed\": -3, \"eviction\": {\"eviction_policy\": \"LRU\"}}");
    assert_non_null(ok);
    assert_int_equal(lmc_l2_check_config(ok, NULL), LMC_OK);
    lmc_json_free(ok);

    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER ", \"store_fail_rate\": 1.5}",
                    "--l2-adapter: field 'store_fail_rate' of type 'fault_inject' must be a "
                    "number in [0, 1] (got 1.5)");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER
                    ", \"lookup_fail_rate\": \"x\"}",
                    "--l2-adapter: field 'lookup_fail_rate' of type 'fault_inject' must be a "
                    "number in [0, 1] (got \"x\")");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER ", \"delay_rate\": -0.1}",
                    "--l2-adapter: field 'delay_rate' of type 'fault_inject' must be a number "
                    "in [0, 1] (got -0.1)");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER ", \"delay_ms\": -1}",
                    "--l2-adapter: field 'delay_ms' of type 'fault_inject' must be a number >= 0 "
                    "(got -1)");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER ", \"seed\": 1.5}",
                    "--l2-adapter: field 'seed' of type 'fault_inject' must be an integer "
                    "(got 1.5)");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": " INNER ", \"fail\": 1}",
                    "--l2-adapter: unknown field 'fail' for type 'fault_inject'");
    expect_rejected("{\"type\": \"fault_inject\"}",
                    "--l2-adapter: field 'inner' of type 'fault_inject' is required");
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": 3}",
                    "--l2-adapter: field 'inner' of type 'fault_inject' must be an adapter "
                    "object (got 3)");
    /* The inner object is checked as an adapter of its own. */
    expect_rejected("{\"type\": \"fault_inject\", \"inner\": {\"type\": \"mock\", "
                    "\"max_size_gb\": 1}}",
                    "--l2-adapter: field 'mock_bandwidth_gb' of type 'mock' is required");
}

static void test_pass_through_keeps_data_and_forwards_usage(void **state)
{
    (void)state;
    lmc_l2_adapter *a = fi_adapter("");
    lmc_object_key keys[2] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL)};
    uint8_t src[64], dst[64] = {0};
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 3);
    lmc_memory_obj in = {src, 64, 64, 0}, out = {dst, 64, 64, 0};
    assert_int_equal(l2_store_sync(a, keys, &in, 1), 64);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 64);
    assert_true(lmc_l2_adapter_supports_global_eviction(a)); /* the inner's capacity */
    char bits[3];
    l2_lookup_sync(a, keys, 2, bits);
    assert_string_equal(bits, "10");
    assert_int_equal(l2_status_int(a, "inner", "locked_keys"), 1);
    l2_load_sync(a, keys, &out, 1, bits);
    assert_string_equal(bits, "1");
    assert_memory_equal(src, dst, sizeof(src));
    lmc_l2_adapter_submit_unlock(a, keys, 1);
    assert_int_equal(l2_status_int(a, "inner", "locked_keys"), 0);
    lmc_l2_adapter_delete(a, keys, 1);
    assert_int_equal(l2_status_int(a, "inner", "num_objects"), 0);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    assert_int_equal(l2_status_int(a, "faults_injected", "total"), 0);
    lmc_l2_adapter_destroy(a);
}

static void test_store_fail_rate_one_fails_every_store(void **state)
{
    (void)state;
    lmc_l2_adapter *a = fi_adapter("\"store_fail_rate\": 1.0, \"seed\": 7");
    uint8_t b[32] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    for (uint32_t i = 0; i < 20; i++) {
        lmc_object_key k = l2_key("m", 100 + i, 0, 0, NULL);
        assert_int_equal(l2_store_sync(a, &k, &obj, 1), -1);
    }
    assert_int_equal(l2_status_int(a, "faults_injected", "store_fail"), 20);
    assert_int_equal(l2_status_int(a, "faults_injected", "lookup_fail"), 0);
    assert_int_equal(l2_status_int(a, NULL, "pending_tasks"), 0);
    lmc_l2_adapter_destroy(a);
}

static void test_lookup_failure_reports_no_hit_and_leaves_no_inner_lock(void **state)
{
    (void)state;
    lmc_l2_adapter *a = fi_adapter("\"lookup_fail_rate\": 1");
    lmc_object_key keys[3] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL),
                              l2_key("m", 3, 0, 0, NULL)};
    uint8_t b[16] = {0};
    lmc_memory_obj objs[2] = {{b, 16, 16, 0}, {b, 16, 16, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 2), 32);
    char bits[4];
    for (int i = 0; i < 5; i++) {
        l2_lookup_sync(a, keys, 3, bits);
        assert_string_equal(bits, "000");
    }
    /* The inner found and locked keys 0 and 1 each time; every lock was given back. */
    assert_int_equal(l2_status_int(a, "inner", "locked_keys"), 0);
    assert_int_equal(l2_status_int(a, "faults_injected", "lookup_fail"), 5);
    lmc_l2_adapter_delete(a, keys, 2);
    assert_int_equal(l2_status_int(a, "inner", "num_objects"), 0);
    lmc_l2_adapter_destroy(a);
}

static void test_load_failure_reports_no_key_loaded(void **state)
{
    (void)state;
    lmc_l2_adapter *a = fi_adapter("\"load_fail_rate\": 1");
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[16] = {0};
    lmc_memory_obj obj = {b, 16, 16, 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 16);
    char bits[2];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "1");
    l2_load_sync(a, &k, &obj, 1, bits);
    assert_string_equal(bits, "0");
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    assert_int_equal(l2_status_int(a, "faults_injected", "load_fail"), 1);
    lmc_l2_adapter_destroy(a);
}

static void test_delay_completes_late_with_the_real_result(void **state)
{
    (void)state;
    lmc_l2_adapter *a = fi_adapter("\"delay_rate\": 1, \"delay_ms\": 100");
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[16] = {0};
    lmc_memory_obj obj = {b, 16, 16, 0};
    uint64_t t0 = lmc_mono_ns();
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 16);
    assert_true(lmc_mono_ns() - t0 >= 90u * 1000 * 1000);
    uint64_t id;
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &k, 1, &id), LMC_OK);
    lmc_bitmap bm;
    assert_false(lmc_l2_adapter_take_lookup_result(a, id, &bm)); /* not yet */
    assert_true(l2_wait_lookup(a, id, &bm));
    assert_true(lmc_bitmap_test(&bm, 0));
    lmc_bitmap_free(&bm);
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    assert_int_equal(l2_status_int(a, "faults_injected", "delayed"), 2);
    lmc_l2_adapter_destroy(a);
}

static void test_destroy_completes_every_pending_task_once(void **state)
{
    (void)state;
    /* Drive the ops directly, reporting into another adapter's base, so
     * the results can be read after the fault_inject state is gone. */
    lmc_l2_adapter *sink = fi_adapter("");
    lmc_json *cfg = l2_json("{\"type\": \"fault_inject\", \"inner\": {\"type\": \"mock\", "
                            "\"max_size_gb\": 1, \"mock_bandwidth_gb\": 0.001}, "
                            "\"delay_rate\": 0.5, \"delay_ms\": 60000}");
    void *impl = NULL;
    assert_int_equal(lmc_l2_fault_inject_ops.create(sink, cfg, &impl, NULL), LMC_OK);
    lmc_json_free(cfg);
    uint8_t *b = calloc(1, 1 << 20);
    assert_non_null(b);
    enum { N = 5 };
    for (uint32_t i = 0; i < N; i++) {
        lmc_object_key k = l2_key("m", i, 0, 0, NULL);
        lmc_memory_obj obj = {b, 1 << 20, 1 << 20, 0};
        assert_int_equal(
            lmc_l2_fault_inject_ops.submit(impl, LMC_L2_TASK_STORE, 10 + i, &k, &obj, 1), LMC_OK);
        assert_int_equal(
            lmc_l2_fault_inject_ops.submit(impl, LMC_L2_TASK_LOOKUP, 20 + i, &k, NULL, 1), LMC_OK);
        assert_int_equal(
            lmc_l2_fault_inject_ops.submit(impl, LMC_L2_TASK_LOAD, 30 + i, &k, &obj, 1), LMC_OK);
    }
    uint64_t t0 = lmc_mono_ns();
    lmc_l2_fault_inject_ops.destroy(impl); /* neither transfers nor delays are waited out */
    assert_true(lmc_mono_ns() - t0 < 2000000000u);
    free(b);
    /* Each store once: failed (still in the inner at destroy) or its real size. */
    lmc_l2_store_result *r = NULL;
    assert_int_equal(lmc_l2_adapter_pop_completed_stores(sink, &r), N);
    bool stored[N] = {false};
    for (size_t k = 0; k < N; k++) {
        assert_in_range(r[k].task_id, 10, 10 + N - 1);
        assert_false(stored[r[k].task_id - 10]);
        stored[r[k].task_id - 10] = true;
        if (r[k].result != -1)
            assert_int_equal(r[k].result, 1 << 20);
    }
    free(r);
    for (uint32_t i = 0; i < N; i++) {
        lmc_bitmap bm;
        /* A result for the task's one key, whether it was held back for its
         * delay (no hit: the inner and its locks are gone), still in the
         * inner (failed, no hit) or forwarded before destroy (its real hit):
         * which one a task is depends on the worker's timing. */
        assert_true(lmc_l2_adapter_take_lookup_result(sink, 20 + i, &bm));
        assert_int_equal(bm.size, 1);
        lmc_bitmap_free(&bm);
        assert_false(lmc_l2_adapter_take_lookup_result(sink, 20 + i, &bm));
        assert_true(lmc_l2_adapter_take_load_result(sink, 30 + i, &bm));
        assert_int_equal(bm.size, 1);
        lmc_bitmap_free(&bm);
        assert_false(lmc_l2_adapter_take_load_result(sink, 30 + i, &bm));
    }
    lmc_l2_adapter_destroy(sink);
}

/* ------------------------------------------------------------------ */
/* A StorageManager under faults                                        */
/* ------------------------------------------------------------------ */

#define BATCH 4
#define CYCLES 150
#define CHUNK (4 * 1024)

typedef struct worker_arg {
    lmc_storage_manager *sm;
    uint64_t base;
    size_t l2_hits;     /* keys that came back from a prefetch */
    const char *failed; /* what went wrong (cmocka asserts only on the main thread) */
} worker_arg;

/* Poll a prefetch to completion (max 5 s). */
static bool wait_prefetch(lmc_storage_manager *sm, const lmc_prefetch_handle *h, lmc_bitmap *out)
{
    uint64_t deadline = lmc_mono_ms() + 5000;
    while (lmc_sm_query_prefetch_status(sm, h, out) != LMC_OK) {
        if (lmc_mono_ms() > deadline)
            return false;
        lmc_sleep_ns(200 * 1000);
    }
    return true;
}

/* Store a batch, now and then drop L1, prefetch an older batch and check what came back. */
static void *sm_worker(void *p)
{
    worker_arg *w = p;
    lmc_layout_desc lay = sm_test_layout(CHUNK);
    for (uint64_t i = 0; i < CYCLES && w->failed == NULL; i++) {
        lmc_object_key k[BATCH];
        sm_test_keys(k, BATCH, w->base + i * BATCH);
        sm_test_store(w->sm, k, BATCH, &lay);
        if (i % 3 == 0)
            lmc_sm_clear(w->sm, false);
        sm_test_keys(k, BATCH, w->base + (i / 2) * BATCH);
        lmc_prefetch_handle h;
        if (lmc_sm_submit_prefetch_task(w->sm, k, BATCH, &lay, 0, "fi", LMC_TRIM_PREFIX, &h,
                                        NULL) != LMC_OK) {
            w->failed = "submit_prefetch_task failed";
            break;
        }
        lmc_bitmap bm;
        bool done = wait_prefetch(w->sm, &h, &bm);
        lmc_prefetch_handle_clear(&h);
        if (!done) {
            w->failed = "a prefetch did not complete within 5 s";
            break;
        }
        lmc_object_key got[BATCH];
        size_t n = 0;
        for (size_t j = 0; j < BATCH; j++) {
            if (lmc_bitmap_test(&bm, j))
                got[n++] = k[j];
        }
        lmc_bitmap_free(&bm);
        if (n == 0)
            continue;
        lmc_sm_read_ctx ctx;
        lmc_sm_read_prefetched_enter(w->sm, got, n, &ctx);
        if (!ctx.ok)
            w->failed = "a key reported found could not be read";
        for (size_t j = 0; ctx.ok && j < n; j++) {
            for (uint64_t b = 0; b < ctx.objs[j].size; b += 509) {
                if (ctx.objs[j].data[b] != sm_test_pattern(&got[j], b))
                    w->failed = "a key came back with the wrong bytes";
            }
        }
        bool ok = ctx.ok;
        lmc_sm_read_prefetched_exit(w->sm, &ctx, false);
        if (ok)
            lmc_sm_finish_read_prefetched(w->sm, got, n, 0, NULL);
        w->l2_hits += n;
    }
    return NULL;
}

static const lmc_json *path(const lmc_json *v, const char *a, const char *b)
{
    v = v != NULL ? lmc_json_object_get(v, a) : NULL;
    return v != NULL && b != NULL ? lmc_json_object_get(v, b) : v;
}

static void test_storage_manager_stays_consistent_under_faults(void **state)
{
    (void)state;
    char *argv[] = {"t",
                    "--l1-size-gb",
                    "0.02",
                    "--eviction-policy",
                    "LRU",
                    "--l2-adapter",
                    "{\"type\": \"fault_inject\", \"inner\": {\"type\": \"mock\", "
                    "\"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 10}, "
                    "\"store_fail_rate\": 0.3, \"lookup_fail_rate\": 0.3, "
                    "\"load_fail_rate\": 0.3, \"delay_rate\": 0.2, \"delay_ms\": 20, \"seed\": 1}",
                    NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    worker_arg w[2] = {{sm, 1000000, 0, NULL}, {sm, 2000000, 0, NULL}};
    pthread_t th[2];
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, sm_worker, &w[i]), 0);
    for (size_t i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (size_t i = 0; i < 2; i++) {
        if (w[i].failed != NULL)
            fail_msg("worker %zu: %s", i, w[i].failed);
    }

    assert_true(lmc_sm_wait_idle(sm, 10000));
    char why[256] = "";
    if (!lmc_sm_memcheck(sm, why, sizeof(why)))
        fail_msg("memcheck: %s", why);
    lmc_sm_clear(sm, false); /* no read or write lock may be left behind */
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    assert_int_equal(used, 0);

    /* The prefetch controller gives its L2 locks back just after it goes idle. */
    int64_t locked = -1, faults = 0, store_fail = 0, failed_stores = 0;
    char kinds[160] = "";
    uint64_t deadline = lmc_mono_ms() + 5000;
    do {
        char *text = lmc_sm_report_status(sm);
        assert_non_null(text);
        lmc_json *st = l2_json(text);
        free(text);
        assert_non_null(st);
        const lmc_json *ad = lmc_json_array_at(lmc_json_object_get(st, "l2_adapters"), 0);
        assert_non_null(ad);
        locked = lmc_json_get_int(path(ad, "inner", "locked_keys"));
        faults = lmc_json_get_int(path(ad, "faults_injected", "total"));
        store_fail = lmc_json_get_int(path(ad, "faults_injected", "store_fail"));
        failed_stores = lmc_json_get_int(path(st, "store_controller", "failed_tasks_total"));
        snprintf(kinds, sizeof(kinds),
                 "store_fail %lld, lookup_fail %lld, load_fail %lld, delayed %lld",
                 (long long)store_fail,
                 (long long)lmc_json_get_int(path(ad, "faults_injected", "lookup_fail")),
                 (long long)lmc_json_get_int(path(ad, "faults_injected", "load_fail")),
                 (long long)lmc_json_get_int(path(ad, "faults_injected", "delayed")));
        lmc_json_free(st);
        if (locked != 0)
            lmc_sleep_ns(10 * 1000 * 1000);
    } while (locked != 0 && lmc_mono_ms() < deadline);
    print_message("fault_inject: %lld faults injected (%s); %zu keys read back\n",
                  (long long)faults, kinds, w[0].l2_hits + w[1].l2_hits);
    assert_int_equal(locked, 0);
    assert_true(faults > 0);
    assert_true(store_fail > 0);
    /* Every injected store failure reached the store controller. */
    assert_int_equal(failed_stores, store_fail);
    lmc_sm_destroy(sm);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_accepts_every_key_and_rejects_bad_values),
        cmocka_unit_test(test_pass_through_keeps_data_and_forwards_usage),
        cmocka_unit_test(test_store_fail_rate_one_fails_every_store),
        cmocka_unit_test(test_lookup_failure_reports_no_hit_and_leaves_no_inner_lock),
        cmocka_unit_test(test_load_failure_reports_no_key_loaded),
        cmocka_unit_test(test_delay_completes_late_with_the_real_result),
        cmocka_unit_test(test_destroy_completes_every_pending_task_once),
        cmocka_unit_test(test_storage_manager_stays_consistent_under_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
