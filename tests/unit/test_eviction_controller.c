/*
 * test_eviction_controller.c -- the periodic L1 and L2 eviction loops
 * (spec §7.3, §7.4).
 *
 * L1 tests use a pool of 10 slots of 4 KiB, a policy fed by a bridge the
 * test registers (reserved_write / write_finished -> created, deleted ->
 * removed, accessed -> touched), and run_once with a long period so the
 * thread never races the test. L2 tests store 4 KiB objects straight into
 * a mock adapter of 64 KiB. Waits are bounded (5 s, 1 ms steps).
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
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "lmcache/bitmap.h"
#include "storage/eviction.h"
#include "storage/eviction_controller.h"
#include "storage/l1_manager.h"

#define OBJ_BYTES 4096u
#define L1_SLOTS 10u
#define WAIT_MS 5000u
#define LONG_PERIOD_MS 60000u /* the thread never fires during a test */

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct log_capture {
    pthread_mutex_t mu;
    char lines[64][320];
    size_t n;
} log_capture;

static log_capture g_log = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void capture_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    log_capture *c = ud;
    pthread_mutex_lock(&c->mu);
    if (c->n < 64)
        snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s %s %s", lmc_log_level_name(level),
                 component, msg);
    pthread_mutex_unlock(&c->mu);
}

static void capture_start(void)
{
    pthread_mutex_lock(&g_log.mu);
    g_log.n = 0;
    pthread_mutex_unlock(&g_log.mu);
    lmc_log_set_sink(capture_sink, &g_log);
}

static void capture_stop(void)
{
    lmc_log_set_sink(NULL, NULL);
}

static size_t captured(const char *a, const char *b)
{
    size_t hits = 0;
    pthread_mutex_lock(&g_log.mu);
    for (size_t i = 0; i < g_log.n; i++) {
        if (strstr(g_log.lines[i], a) && (b == NULL || strstr(g_log.lines[i], b)))
            hits++;
    }
    pthread_mutex_unlock(&g_log.mu);
    return hits;
}

static void bridge(void *ud, lmc_l1_event ev, const lmc_object_key *keys, size_t n)
{
    lmc_eviction_policy *p = ud;
    switch (ev) {
    case LMC_L1_EV_RESERVED_WRITE:
    case LMC_L1_EV_WRITE_FINISHED:
    case LMC_L1_EV_WRITE_FINISHED_AND_READ_RESERVED:
        lmc_eviction_on_created(p, keys, n);
        break;
    case LMC_L1_EV_DELETED:
        lmc_eviction_on_removed(p, keys, n);
        break;
    case LMC_L1_EV_ACCESSED:
        lmc_eviction_on_touched(p, keys, n);
        break;
    default:
        break;
    }
}

typedef struct l1_fixture {
    lmc_l1_manager *l1;
    lmc_eviction_policy *policy;
} l1_fixture;

static l1_fixture make_l1(const char *policy)
{
    l1_fixture f = {0};
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = (uint64_t)L1_SLOTS * OBJ_BYTES, .align_bytes = OBJ_BYTES},
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 300,
    };
    assert_int_equal(lmc_l1_manager_create(&cfg, &f.l1, NULL), LMC_OK);
    assert_int_equal(lmc_eviction_policy_create(policy, &f.policy, NULL), LMC_OK);
    lmc_l1_listener l = {.on_event = bridge, .ud = f.policy};
    assert_int_equal(lmc_l1_manager_add_listener(f.l1, &l), LMC_OK);
    return f;
}

static void free_l1(l1_fixture *f)
{
    char why[256] = "";
    if (!lmc_l1_memcheck(f->l1, why, sizeof(why)))
        fail_msg("L1 memcheck failed: %s", why);
    lmc_l1_manager_destroy(f->l1);
    lmc_eviction_policy_destroy(f->policy);
}

static lmc_layout_desc layout(void)
{
    lmc_layout_desc d;
    int64_t dims[1] = {OBJ_BYTES / 4};
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_FLOAT32, NULL), LMC_OK);
    return d;
}

static lmc_object_key make_key(uint32_t i, const char *salt)
{
    uint8_t h[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
    lmc_object_key k;
    assert_int_equal(lmc_object_key_make(&k, h, 4, "test-model", 0, 0, salt, NULL), LMC_OK);
    return k;
}

static void make_keys(lmc_object_key *keys, size_t n, uint32_t first, const char *salt)
{
    for (size_t i = 0; i < n; i++)
        keys[i] = make_key(first + (uint32_t)i, salt);
}

static void reserve(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    lmc_layout_desc d = layout();
    lmc_l1_error errs[L1_SLOTS];
    lmc_memory_obj objs[L1_SLOTS];
    lmc_l1_reserve_write(l1, keys, n, NULL, &d, LMC_WRITE_NEW, errs, objs);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
}

static void finish(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    lmc_l1_error errs[L1_SLOTS];
    lmc_l1_finish_write(l1, keys, n, errs);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
}

/* n ready keys, written in one request. */
static void write_keys(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    reserve(l1, keys, n);
    finish(l1, keys, n);
}

static double l1_usage(lmc_l1_manager *l1)
{
    uint64_t used, total;
    lmc_l1_get_memory_usage(l1, &used, &total);
    return (double)used / (double)total;
}

typedef bool (*pred_fn)(void *ud);

static bool wait_for(pred_fn pred, void *ud, uint32_t ms)
{
    uint64_t deadline = lmc_mono_ms() + ms;
    while (!pred(ud)) {
        if (lmc_mono_ms() >= deadline)
            return pred(ud);
        lmc_sleep_ns(1000000);
    }
    return true;
}

static lmc_l2_adapter *make_adapter_json(const char *text)
{
    lmc_json *cfg = NULL;
    lmc_error err;
    assert_int_equal(lmc_json_parse(text, strlen(text), &cfg, &err), LMC_OK);
    lmc_l2_adapter *a = NULL;
    lmc_status st = lmc_l2_adapter_create(cfg, &a, &err);
    if (st != LMC_OK)
        fail_msg("adapter create failed: %s", err.msg);
    lmc_json_free(cfg);
    return a;
}

/* A 64 KiB mock (2^16 / 2^30 GiB is exact in binary), fast, with the given eviction object. */
static lmc_l2_adapter *make_mock(const char *eviction_json)
{
    char text[320];
    snprintf(text, sizeof(text),
             "{\"type\": \"mock\", \"max_size_gb\": 6.103515625e-05, "
             "\"mock_bandwidth_gb\": 10%s%s}",
             eviction_json ? ", \"eviction\": " : "", eviction_json ? eviction_json : "");
    return make_adapter_json(text);
}

/* Store n keys of 4 KiB straight into the adapter and wait for the result. */
static void l2_store(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    static uint8_t buf[OBJ_BYTES];
    lmc_memory_obj objs[32];
    assert_true(n <= 32);
    for (size_t i = 0; i < n; i++)
        objs[i] = (lmc_memory_obj){.data = buf, .size = OBJ_BYTES, .phys_size = OBJ_BYTES};
    uint64_t id = 0;
    assert_int_equal(lmc_l2_adapter_submit_store(a, keys, objs, n, &id), LMC_OK);
    uint64_t deadline = lmc_mono_ms() + WAIT_MS;
    for (;;) {
        lmc_l2_store_result *res = NULL;
        size_t nres = lmc_l2_adapter_pop_completed_stores(a, &res);
        bool done = false;
        for (size_t i = 0; i < nres; i++) {
            if (res[i].task_id == id) {
                assert_true(lmc_l2_store_ok(res[i].result));
                done = true;
            }
        }
        free(res);
        if (done)
            return;
        if (lmc_mono_ms() >= deadline)
            fail_msg("store task %llu did not complete", (unsigned long long)id);
        lmc_sleep_ns(1000000);
    }
}

/* Whether the adapter holds key (a lookup, then unlock what it locked). */
static bool l2_has(lmc_l2_adapter *a, const lmc_object_key *key)
{
    lmc_bitmap bm = l2_holds(a, key, 1);
    bool found = lmc_bitmap_test(&bm, 0);
    lmc_bitmap_free(&bm);
    return found;
}

static double l2_fraction(lmc_l2_adapter *a)
{
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    return lmc_l2_usage_fraction(&u);
}

static lmc_json *status_adapter(lmc_json *status, size_t i)
{
    lmc_json *arr = lmc_json_object_get(status, "adapters");
    assert_non_null(arr);
    return lmc_json_array_at(arr, i);
}

/* ---------------------------------------------------------------------- */
/* L1                                                                      */
/* ---------------------------------------------------------------------- */

static void test_l1_create_rejects_fractions_outside_0_1(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    lmc_error err;
    assert_int_equal(lmc_l1_eviction_controller_create(f.l1, f.policy, 1.5, 0.2, 10, &c, &err),
                     LMC_ERR_INVALID);
    assert_string_equal(err.msg, "L1 eviction: trigger_watermark 1.5 is not in (0, 1]");
    assert_int_equal(lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.0, 10, &c, &err),
                     LMC_ERR_INVALID);
    assert_string_equal(err.msg, "L1 eviction: eviction_ratio 0 is not in (0, 1]");
    assert_null(c);
    free_l1(&f);
}

static void test_l1_below_watermark_evicts_nothing(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.5, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_object_key keys[7];
    make_keys(keys, 7, 0, NULL);
    write_keys(f.l1, keys, 7); /* 0.7 < 0.8 */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 0);
    assert_int_equal(lmc_l1_object_count(f.l1), 7);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static void test_l1_evicts_ratio_of_tracked_keys_suffix_first(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_object_key keys[10];
    make_keys(keys, 10, 0, NULL);
    write_keys(f.l1, keys, 10); /* full: 1.0 >= 0.8 */
    assert_int_equal(lmc_eviction_tracked(f.policy), 10);

    /* floor(10 x 0.2) = 2; a request's tail is older than its head. */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 2);
    assert_false(lmc_l1_contains(f.l1, &keys[9]));
    assert_false(lmc_l1_contains(f.l1, &keys[8]));
    for (size_t i = 0; i < 8; i++)
        assert_true(lmc_l1_contains(f.l1, &keys[i]));
    assert_int_equal(lmc_eviction_tracked(f.policy), 8);
    assert_true(l1_usage(f.l1) < 0.81);

    /* 0.8 is still at the watermark: floor(8 x 0.2) = 1 more, the next-oldest. */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 1);
    assert_false(lmc_l1_contains(f.l1, &keys[7]));
    /* 0.7: below. */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 0);

    lmc_json *j = lmc_l1_eviction_controller_report_status(c);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "evicted_keys_total")), 3);
    lmc_json_free(j);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static void test_l1_skips_read_locked_and_write_locked_keys(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    /* One request of 10; all but the last finish: LRU order k9 (write-locked), k8, k7, ... */
    lmc_object_key keys[10];
    make_keys(keys, 10, 0, NULL);
    reserve(f.l1, keys, 10);
    finish(f.l1, keys, 9);
    lmc_l1_error e;
    lmc_memory_obj o;
    lmc_l1_reserve_read(f.l1, &keys[8], 1, 0, &e, &o); /* k8 read-locked */
    assert_int_equal(e, LMC_L1_SUCCESS);

    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 2);
    assert_true(lmc_l1_contains(f.l1, &keys[9]));
    assert_true(lmc_l1_contains(f.l1, &keys[8]));
    assert_false(lmc_l1_contains(f.l1, &keys[7]));
    assert_false(lmc_l1_contains(f.l1, &keys[6]));

    lmc_l1_finish_read(f.l1, &keys[8], 1, 0, &e);
    finish(f.l1, &keys[9], 1);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static void test_l1_touched_keys_are_evicted_last(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_object_key keys[10];
    make_keys(keys, 10, 0, NULL);
    write_keys(f.l1, keys, 10);
    lmc_l1_touch(f.l1, &keys[8], 2); /* k8, k9 become the most recent */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 2);
    assert_true(lmc_l1_contains(f.l1, &keys[9]));
    assert_true(lmc_l1_contains(f.l1, &keys[8]));
    assert_false(lmc_l1_contains(f.l1, &keys[7]));
    assert_false(lmc_l1_contains(f.l1, &keys[6]));
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static void test_l1_noop_policy_never_evicts(void **state)
{
    (void)state;
    l1_fixture f = make_l1("noop");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_object_key keys[10];
    make_keys(keys, 10, 0, NULL);
    write_keys(f.l1, keys, 10);
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 0);
    assert_int_equal(lmc_l1_object_count(f.l1), 10);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static void test_l1_isolated_lru_evicts_within_each_salt(void **state)
{
    (void)state;
    /* The bridge is registered first, as in the StorageManager; the controller then learns salts.
     */
    l1_fixture f = make_l1("IsolatedLRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_object_key a[5], b[5];
    make_keys(a, 5, 0, "tenant-a");
    make_keys(b, 5, 100, "tenant-b");
    write_keys(f.l1, a, 5);
    write_keys(f.l1, b, 5);
    /* floor(5 x 0.2) = 1 per salt, each bucket's oldest (its request's tail). */
    assert_int_equal(lmc_l1_eviction_controller_run_once(c), 2);
    assert_false(lmc_l1_contains(f.l1, &a[4]));
    assert_false(lmc_l1_contains(f.l1, &b[4]));
    assert_int_equal(lmc_l1_object_count(f.l1), 8);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

static bool l1_below_watermark(void *ud)
{
    return l1_usage(ud) < 0.8;
}

static void test_l1_thread_evicts_periodically(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, 5, &c, NULL),
                     LMC_OK);
    lmc_object_key keys[10];
    make_keys(keys, 10, 0, NULL);
    write_keys(f.l1, keys, 10);
    assert_true(wait_for(l1_below_watermark, f.l1, WAIT_MS));
    lmc_l1_eviction_controller_destroy(c);
    assert_int_equal(lmc_l1_object_count(f.l1), 7); /* 10 -> 8 -> 7 (0.7 < 0.8) */
    free_l1(&f);
}

static void test_l1_destroy_wakes_the_sleeping_thread_promptly(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, 10000, &c, NULL),
                     LMC_OK);
    lmc_sleep_ns(20 * 1000000ull); /* let it start sleeping */
    uint64_t t0 = lmc_mono_ms();
    lmc_l1_eviction_controller_destroy(c);
    assert_true(lmc_mono_ms() - t0 < 500);
    free_l1(&f);
}

static void test_l1_create_and_destroy_quickly(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    for (int i = 0; i < 20; i++) {
        lmc_l1_eviction_controller *c = NULL;
        assert_int_equal(lmc_l1_eviction_controller_create(f.l1, f.policy, 0.8, 0.2, 1, &c, NULL),
                         LMC_OK);
        lmc_l1_eviction_controller_destroy(c);
    }
    free_l1(&f);
}

static void test_l1_report_status_has_the_documented_fields(void **state)
{
    (void)state;
    l1_fixture f = make_l1("LRU");
    lmc_l1_eviction_controller *c = NULL;
    assert_int_equal(
        lmc_l1_eviction_controller_create(f.l1, f.policy, 0.75, 0.25, LONG_PERIOD_MS, &c, NULL),
        LMC_OK);
    lmc_json *j = lmc_l1_eviction_controller_report_status(c);
    char *s = lmc_json_dumps(j, 0, -1, NULL);
    assert_string_equal(s, "{\"is_healthy\": true, \"thread_alive\": true, \"eviction_policy\": "
                           "\"LRU\", \"trigger_watermark\": 0.75, \"eviction_ratio\": 0.25, "
                           "\"evicted_keys_total\": 0}");
    free(s);
    lmc_json_free(j);
    lmc_l1_eviction_controller_destroy(c);
    free_l1(&f);
}

/* ---------------------------------------------------------------------- */
/* L2                                                                      */
/* ---------------------------------------------------------------------- */

static void test_l2_evicts_above_watermark_and_usage_drops(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock("{\"eviction_policy\": \"LRU\"}");
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);

    lmc_object_key keys[14];
    make_keys(keys, 14, 0, NULL);
    l2_store(a, keys, 14); /* 56 KiB of 64: 0.875 */
    assert_true(l2_fraction(a) >= 0.8);

    /* floor(14 x 0.2) = 2, the request's tail first. */
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 2);
    assert_false(l2_has(a, &keys[13]));
    assert_false(l2_has(a, &keys[12]));
    assert_true(l2_has(a, &keys[11]));
    assert_true(l2_has(a, &keys[0]));
    assert_true(l2_fraction(a) < 0.8);
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    assert_int_equal(u.bytes_used, 12 * OBJ_BYTES);
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 0);

    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_true(lmc_json_get_bool(lmc_json_object_get(j, "is_healthy")));
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "evicted_keys_total")), 2);
    lmc_json *ad = status_adapter(j, 0);
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(ad, "mode"), NULL), "global");
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(ad, "tracked_keys")), 12);
    lmc_json_free(j);

    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
}

static void test_l2_below_watermark_evicts_nothing(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock("{\"eviction_policy\": \"LRU\", \"trigger_watermark\": 0.9}");
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    lmc_object_key keys[14];
    make_keys(keys, 14, 0, NULL);
    l2_store(a, keys, 14); /* 0.875 < 0.9 */
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 0);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 14 * OBJ_BYTES);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
}

static void test_l2_accessed_keys_are_evicted_last(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock("{\"eviction_policy\": \"LRU\"}");
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    lmc_object_key keys[14];
    make_keys(keys, 14, 0, NULL);
    l2_store(a, keys, 14);
    lmc_l2_notify_accessed(a, &keys[12], 2); /* as a load would */
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 2);
    /* k13, k12 were touched: k11 and k10 go instead. */
    assert_true(l2_has(a, &keys[13]));
    assert_true(l2_has(a, &keys[12]));
    assert_false(l2_has(a, &keys[11]));
    assert_false(l2_has(a, &keys[10]));
    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(status_adapter(j, 0), "tracked_keys")),
                     12);
    lmc_json_free(j);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
}

static void test_l2_adapter_without_capacity_is_skipped_with_warning(void **state)
{
    (void)state;
    char dir[] = "/tmp/lmc-ec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char text[256];
    snprintf(text, sizeof(text),
             "{\"type\": \"fs\", \"base_path\": \"%s\", \"eviction\": "
             "{\"eviction_policy\": \"LRU\"}}",
             dir);
    lmc_l2_adapter *a = make_adapter_json(text);
    capture_start();
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    capture_stop();
    assert_int_equal(
        captured("L2 adapter 0 (fs): eviction configured but no capacity; skipped", NULL), 1);
    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_int_equal(lmc_json_size(lmc_json_object_get(j, "adapters")), 0);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "num_l2_adapters")), 1);
    lmc_json_free(j);
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 0);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
    rmdir(dir);
}

static void test_l2_adapter_without_eviction_config_is_ignored(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock(NULL);
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    lmc_object_key keys[15];
    make_keys(keys, 15, 0, NULL);
    l2_store(a, keys, 15);
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 0);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 15 * OBJ_BYTES);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
}

static void test_l2_isolated_lru_without_quotas_evicts_every_salt(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock("{\"eviction_policy\": \"IsolatedLRU\"}");
    capture_start();
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    capture_stop();
    assert_int_equal(captured("WARNING", "without quotas"), 1);

    lmc_object_key x[3], y[2];
    make_keys(x, 3, 0, "tenant-x");
    make_keys(y, 2, 100, "tenant-y");
    l2_store(a, x, 3);
    l2_store(a, y, 2);
    /* Far below any watermark: quotas, not capacity, drive isolated eviction. */
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 5);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "tenant-x"), 0);
    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_string_equal(
        lmc_json_get_string(lmc_json_object_get(status_adapter(j, 0), "mode"), NULL), "isolated");
    lmc_json_free(j);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
}

static void test_l2_recovered_files_become_evictable(void **state)
{
    (void)state;
    char dir[] = "/tmp/lmc-ec-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char text[320];
    snprintf(text, sizeof(text),
             "{\"type\": \"fs\", \"base_path\": \"%s\", "
             "\"max_capacity_gb\": 6.103515625e-05, \"eviction\": {\"eviction_policy\": "
             "\"LRU\", \"eviction_ratio\": 0.5}}",
             dir);
    lmc_object_key keys[14];
    make_keys(keys, 14, 0, NULL);
    lmc_l2_adapter *a = make_adapter_json(text);
    l2_store(a, keys, 14);
    lmc_l2_adapter_destroy(a);

    /* A new adapter over the same directory recovers the files before the controller exists. */
    a = make_adapter_json(text);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 14 * OBJ_BYTES);
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(status_adapter(j, 0), "tracked_keys")),
                     14);
    lmc_json_free(j);
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 7);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 7 * OBJ_BYTES);

    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

typedef struct l2_probe {
    lmc_l2_adapter *a;
} l2_probe;

static bool l2_below_watermark(void *ud)
{
    return l2_fraction(((l2_probe *)ud)->a) < 0.8;
}

static void test_l2_thread_evicts_periodically_and_stops_promptly(void **state)
{
    (void)state;
    lmc_l2_adapter *a = make_mock("{\"eviction_policy\": \"LRU\"}");
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(&a, 1, 5, &c, NULL), LMC_OK);
    lmc_object_key keys[15];
    make_keys(keys, 15, 0, NULL);
    l2_store(a, keys, 15);
    l2_probe p = {a};
    assert_true(wait_for(l2_below_watermark, &p, WAIT_MS));
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(a);
    lmc_l2_eviction_controller_destroy(c);

    /* A sleeping thread is woken, not waited out. */
    assert_int_equal(lmc_l2_eviction_controller_create(NULL, 0, 10000, &c, NULL), LMC_OK);
    lmc_sleep_ns(20 * 1000000ull);
    uint64_t t0 = lmc_mono_ms();
    lmc_l2_eviction_controller_destroy(c);
    assert_true(lmc_mono_ms() - t0 < 500);
}

static void test_l2_two_adapters_get_their_own_policies(void **state)
{
    (void)state;
    lmc_l2_adapter *ads[2] = {make_mock("{\"eviction_policy\": \"LRU\"}"),
                              make_mock("{\"eviction_policy\": \"ARC\"}")};
    lmc_l2_eviction_controller *c = NULL;
    assert_int_equal(lmc_l2_eviction_controller_create(ads, 2, LONG_PERIOD_MS, &c, NULL), LMC_OK);
    lmc_object_key keys[14];
    make_keys(keys, 14, 0, NULL);
    l2_store(ads[0], keys, 14);
    l2_store(ads[1], keys, 10); /* 0.625: below */
    assert_int_equal(lmc_l2_eviction_controller_run_once(c), 2);
    assert_int_equal(lmc_l2_adapter_get_usage(ads[0]).bytes_used, 12 * OBJ_BYTES);
    assert_int_equal(lmc_l2_adapter_get_usage(ads[1]).bytes_used, 10 * OBJ_BYTES);
    lmc_json *j = lmc_l2_eviction_controller_report_status(c);
    assert_string_equal(
        lmc_json_get_string(lmc_json_object_get(status_adapter(j, 1), "eviction_policy"), NULL),
        "ARC");
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(status_adapter(j, 1), "tracked_keys")),
                     10);
    lmc_json_free(j);
    lmc_l2_eviction_controller_stop(c);
    lmc_l2_adapter_destroy(ads[0]);
    lmc_l2_adapter_destroy(ads[1]);
    lmc_l2_eviction_controller_destroy(c);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_l1_create_rejects_fractions_outside_0_1),
        cmocka_unit_test(test_l1_below_watermark_evicts_nothing),
        cmocka_unit_test(test_l1_evicts_ratio_of_tracked_keys_suffix_first),
        cmocka_unit_test(test_l1_skips_read_locked_and_write_locked_keys),
        cmocka_unit_test(test_l1_touched_keys_are_evicted_last),
        cmocka_unit_test(test_l1_noop_policy_never_evicts),
        cmocka_unit_test(test_l1_isolated_lru_evicts_within_each_salt),
        cmocka_unit_test(test_l1_thread_evicts_periodically),
        cmocka_unit_test(test_l1_destroy_wakes_the_sleeping_thread_promptly),
        cmocka_unit_test(test_l1_create_and_destroy_quickly),
        cmocka_unit_test(test_l1_report_status_has_the_documented_fields),
        cmocka_unit_test(test_l2_evicts_above_watermark_and_usage_drops),
        cmocka_unit_test(test_l2_below_watermark_evicts_nothing),
        cmocka_unit_test(test_l2_accessed_keys_are_evicted_last),
        cmocka_unit_test(test_l2_adapter_without_capacity_is_skipped_with_warning),
        cmocka_unit_test(test_l2_adapter_without_eviction_config_is_ignored),
        cmocka_unit_test(test_l2_isolated_lru_without_quotas_evicts_every_salt),
        cmocka_unit_test(test_l2_recovered_files_become_evictable),
        cmocka_unit_test(test_l2_thread_evicts_periodically_and_stops_promptly),
        cmocka_unit_test(test_l2_two_adapters_get_their_own_policies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
