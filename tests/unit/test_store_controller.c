/*
 * test_store_controller.c -- the L1 -> L2 store loop (spec §5 store path, §9).
 *
 * Each test builds a small L1 (4 KiB objects) and one or two L2 adapters,
 * writes keys through L1, and waits (bounded: 5 s, 1 ms steps) for the
 * controller to store them. Waits poll observable state: busy(), L2
 * lookups, L1 lock counts and captured log lines.
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
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"
#include "lmcache/bitmap.h"
#include "storage/l1_manager.h"
#include "storage/store_controller.h"

#define OBJ_BYTES 4096u
#define L1_SLOTS 64u
#define WAIT_MS 5000u

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

typedef bool (*pred_fn)(void *ud);

/* Poll pred every 1 ms for at most ms milliseconds. */
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

static bool sc_idle(void *ud)
{
    return lmc_store_controller_busy(ud) == 0;
}

/* Log capture: the sink runs on any thread, so it locks. */
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

static void capture_start(lmc_log_level level)
{
    pthread_mutex_lock(&g_log.mu);
    g_log.n = 0;
    pthread_mutex_unlock(&g_log.mu);
    lmc_log_set_level(level);
    lmc_log_set_sink(capture_sink, &g_log);
}

static void capture_stop(void)
{
    lmc_log_set_sink(NULL, NULL);
    lmc_log_set_level(LMC_LOG_WARNING);
}

/* Lines containing every one of a and b (b may be NULL). */
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

typedef struct capture_query {
    const char *a, *b;
} capture_query;

static bool captured_pred(void *ud)
{
    capture_query *q = ud;
    return captured(q->a, q->b) > 0;
}

static lmc_l1_manager *make_l1(void)
{
    lmc_l1_manager_config cfg = {
        .memory = {.size_bytes = (uint64_t)L1_SLOTS * OBJ_BYTES, .align_bytes = OBJ_BYTES},
        .write_ttl_seconds = 600,
        .read_ttl_seconds = 300,
    };
    lmc_l1_manager *l1 = NULL;
    assert_int_equal(lmc_l1_manager_create(&cfg, &l1, NULL), LMC_OK);
    return l1;
}

static lmc_layout_desc layout(void)
{
    lmc_layout_desc d;
    int64_t dims[1] = {OBJ_BYTES / 4};
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_FLOAT32, NULL), LMC_OK);
    return d;
}

static lmc_object_key make_key(uint32_t i, const char *model, int64_t rank)
{
    uint8_t h[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
    lmc_object_key k;
    assert_int_equal(lmc_object_key_make(&k, h, 4, model, rank, 0, NULL, NULL), LMC_OK);
    return k;
}

static void make_keys(lmc_object_key *keys, size_t n, uint32_t first)
{
    for (size_t i = 0; i < n; i++)
        keys[i] = make_key(first + (uint32_t)i, "test-model", 0);
}

/* reserve_write + fill with a per-key byte pattern, optionally finish_write. */
static void reserve_and_fill(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    lmc_layout_desc d = layout();
    lmc_l1_error errs[L1_SLOTS];
    lmc_memory_obj objs[L1_SLOTS];
    assert_true(n <= L1_SLOTS);
    lmc_l1_reserve_write(l1, keys, n, NULL, &d, LMC_WRITE_NEW, errs, objs);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
        memset(objs[i].data, (int)(keys[i].chunk_hash[3] + 1), objs[i].size);
    }
}

static void write_keys(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    lmc_l1_error errs[L1_SLOTS];
    reserve_and_fill(l1, keys, n);
    lmc_l1_finish_write(l1, keys, n, errs);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
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

static lmc_l2_adapter *make_mock(double bandwidth_gb)
{
    char text[160];
    snprintf(text, sizeof(text),
             "{\"type\": \"mock\", \"max_size_gb\": 0.01, "
             "\"mock_bandwidth_gb\": %.9g}",
             bandwidth_gb);
    return make_adapter_json(text);
}

/* How many of keys the adapter holds (lookup, then unlock what it locked). */
static size_t l2_count(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    lmc_bitmap bm = l2_holds(a, keys, n);
    size_t found = lmc_bitmap_popcount(&bm);
    lmc_bitmap_free(&bm);
    return found;
}

typedef struct l2_has {
    lmc_l2_adapter *a;
    const lmc_object_key *keys;
    size_t n;
} l2_has;

static bool l2_has_all(void *ud)
{
    l2_has *h = ud;
    return l2_count(h->a, h->keys, h->n) == h->n;
}

static size_t total_read_locks(lmc_l1_manager *l1, const lmc_object_key *keys, size_t n)
{
    size_t locks = 0;
    for (size_t i = 0; i < n; i++)
        locks += lmc_l1_read_lock_count(l1, &keys[i]);
    return locks;
}

static int64_t status_int(lmc_store_controller *c, const char *field)
{
    lmc_json *j = lmc_store_controller_report_status(c);
    assert_non_null(j);
    lmc_json *v = lmc_json_object_get(j, field);
    assert_non_null(v);
    int64_t x = lmc_json_get_int(v);
    lmc_json_free(j);
    return x;
}

typedef struct status_query {
    lmc_store_controller *c;
    const char *field;
    int64_t at_least;
} status_query;

static bool status_reached(void *ud)
{
    status_query *q = ud;
    return status_int(q->c, q->field) >= q->at_least;
}

static void assert_memcheck(lmc_l1_manager *l1)
{
    char why[256] = "";
    if (!lmc_l1_memcheck(l1, why, sizeof(why)))
        fail_msg("L1 memcheck failed: %s", why);
}

/* ---------------------------------------------------------------------- */
/* Policy names                                                            */
/* ---------------------------------------------------------------------- */

static void test_policy_check_accepts_default_and_skip_l1(void **state)
{
    (void)state;
    assert_int_equal(lmc_store_policy_check("default", NULL), LMC_OK);
    assert_int_equal(lmc_store_policy_check("skip_l1", NULL), LMC_OK);
}

static void test_policy_check_rejects_unknown_name_with_message(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(lmc_store_policy_check("striped", &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "unknown store policy 'striped' (expected default or skip_l1)");
}

static void test_create_rejects_unknown_policy(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_store_controller *c = (lmc_store_controller *)0x1;
    lmc_error err;
    assert_int_equal(lmc_store_controller_create(l1, NULL, 0, "bogus", &c, &err), LMC_ERR_INVALID);
    assert_null(c);
    assert_non_null(strstr(err.msg, "unknown store policy 'bogus'"));
    lmc_l1_manager_destroy(l1);
}

/* ---------------------------------------------------------------------- */
/* The store path                                                          */
/* ---------------------------------------------------------------------- */

static void test_finished_writes_are_stored_and_read_locks_released(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);

    lmc_object_key keys[8];
    make_keys(keys, 8, 100);
    write_keys(l1, keys, 8);

    l2_has h = {a, keys, 8};
    assert_true(wait_for(l2_has_all, &h, WAIT_MS));
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    assert_int_equal(total_read_locks(l1, keys, 8), 0);
    assert_int_equal(status_int(c, "stored_keys_total"), 8);
    assert_int_equal(status_int(c, "failed_tasks_total"), 0);
    /* "default" never deletes from L1. */
    for (size_t i = 0; i < 8; i++)
        assert_true(lmc_l1_contains(l1, &keys[i]));

    /* The bytes in L2 are the bytes written to L1. */
    uint8_t *buf = malloc(OBJ_BYTES);
    assert_non_null(buf);
    lmc_memory_obj dst = {.data = buf, .size = OBJ_BYTES, .phys_size = OBJ_BYTES};
    uint64_t lid = 0;
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, &keys[3], 1, &lid), LMC_OK);
    lmc_bitmap bm = {0};
    uint64_t deadline = lmc_mono_ms() + WAIT_MS;
    while (!lmc_l2_adapter_take_lookup_result(a, lid, &bm) && lmc_mono_ms() < deadline)
        lmc_sleep_ns(1000000);
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l2_adapter_submit_load(a, &keys[3], &dst, 1, &lid), LMC_OK);
    deadline = lmc_mono_ms() + WAIT_MS;
    while (!lmc_l2_adapter_take_load_result(a, lid, &bm)) {
        if (lmc_mono_ms() >= deadline)
            fail_msg("load did not complete");
        lmc_sleep_ns(1000000);
    }
    assert_true(lmc_bitmap_test(&bm, 0));
    lmc_bitmap_free(&bm);
    lmc_l2_adapter_submit_unlock(a, &keys[3], 1);
    for (size_t i = 0; i < OBJ_BYTES; i++)
        assert_int_equal(buf[i], keys[3].chunk_hash[3] + 1);
    free(buf);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    assert_memcheck(l1);
    lmc_l1_manager_destroy(l1);
}

static void test_skip_l1_deletes_keys_from_l1_after_store(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "skip_l1", &c, NULL), LMC_OK);

    lmc_object_key keys[6];
    make_keys(keys, 6, 200);
    write_keys(l1, keys, 6);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    l2_has h = {a, keys, 6};
    assert_true(l2_has_all(&h));
    for (size_t i = 0; i < 6; i++)
        assert_false(lmc_l1_contains(l1, &keys[i]));
    assert_int_equal(lmc_l1_object_count(l1), 0);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    assert_memcheck(l1);
    lmc_l1_manager_destroy(l1);
}

static void test_store_of_keys_already_in_l2_is_a_success(void **state)
{
    (void)state;
    /* A store that writes 0 bytes (all present) is success: skip_l1 still deletes. */
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "skip_l1", &c, NULL), LMC_OK);

    lmc_object_key keys[4];
    make_keys(keys, 4, 300);
    write_keys(l1, keys, 4);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    assert_int_equal(lmc_l1_object_count(l1), 0);

    write_keys(l1, keys, 4); /* the same keys again: the mock skips them all */
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_int_equal(status_int(c, "failed_tasks_total"), 0);
    assert_int_equal(status_int(c, "stored_keys_total"), 8);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
}

static void test_two_adapters_both_receive_the_keys(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *ads[2] = {make_mock(10.0), make_mock(10.0)};
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, ads, 2, "default", &c, NULL), LMC_OK);

    lmc_object_key keys[5];
    make_keys(keys, 5, 400);
    write_keys(l1, keys, 5);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    assert_int_equal(l2_count(ads[0], keys, 5), 5);
    assert_int_equal(l2_count(ads[1], keys, 5), 5);
    assert_int_equal(total_read_locks(l1, keys, 5), 0);
    assert_int_equal(status_int(c, "stored_keys_total"), 10);
    assert_int_equal(status_int(c, "num_l2_adapters"), 2);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(ads[0]);
    lmc_l2_adapter_destroy(ads[1]);
    lmc_l1_manager_destroy(l1);
}

static void test_skip_l1_with_two_adapters_deletes_after_both(void **state)
{
    (void)state;
    /* Each adapter read-locks the keys once; the last store to finish deletes them. */
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *ads[2] = {make_mock(10.0), make_mock(0.001)}; /* 4 KiB x4 -> ~16 ms */
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, ads, 2, "skip_l1", &c, NULL), LMC_OK);

    lmc_object_key keys[4];
    make_keys(keys, 4, 450);
    write_keys(l1, keys, 4);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    assert_int_equal(l2_count(ads[0], keys, 4), 4);
    assert_int_equal(l2_count(ads[1], keys, 4), 4);
    assert_int_equal(lmc_l1_object_count(l1), 0);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(ads[0]);
    lmc_l2_adapter_destroy(ads[1]);
    lmc_l1_manager_destroy(l1);
}

static void test_keys_are_grouped_by_model_and_rank(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);

    /* Interleaved ranks in one finish_write: one task per (model, rank). */
    lmc_object_key keys[6];
    for (uint32_t i = 0; i < 6; i++)
        keys[i] = make_key(500 + i, "test-model", i % 2);
    capture_start(LMC_LOG_DEBUG);
    write_keys(l1, keys, 6);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    capture_stop();
    assert_int_equal(captured("submitted to adapter 0", "3 keys"), 2);
    assert_int_equal(l2_count(a, keys, 6), 6);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
}

static void test_prefetched_objects_are_not_stored(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);

    lmc_object_key keys[3];
    make_keys(keys, 3, 600);
    reserve_and_fill(l1, keys, 3);
    lmc_l1_error errs[3];
    lmc_memory_obj objs[3];
    lmc_l1_finish_write_and_reserve_read(l1, keys, 3, 0, errs, objs);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);

    /* Nothing was queued; give a wrongly woken thread time to act anyway. */
    assert_int_equal(lmc_store_controller_busy(c), 0);
    lmc_sleep_ns(50 * 1000000ull);
    assert_int_equal(lmc_store_controller_busy(c), 0);
    assert_int_equal(l2_count(a, keys, 3), 0);
    assert_int_equal(total_read_locks(l1, keys, 3), 3); /* only the prefetch's own locks */
    assert_int_equal(status_int(c, "stored_keys_total"), 0);
    lmc_l1_finish_read(l1, keys, 3, 0, errs);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
}

static void test_zero_adapters_ignore_finished_writes(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, NULL, 0, "default", &c, NULL), LMC_OK);
    lmc_object_key keys[4];
    make_keys(keys, 4, 700);
    write_keys(l1, keys, 4);
    assert_int_equal(lmc_store_controller_busy(c), 0);
    assert_int_equal(total_read_locks(l1, keys, 4), 0);
    assert_int_equal(status_int(c, "num_l2_adapters"), 0);
    lmc_store_controller_destroy(c);
    lmc_l1_manager_destroy(l1);
}

/* ---------------------------------------------------------------------- */
/* Failures                                                                */
/* ---------------------------------------------------------------------- */

static void test_failed_fs_store_is_logged_and_read_locks_released(void **state)
{
    (void)state;
    char dir[] = "/tmp/lmc-sc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char base[sizeof(dir) + 16];
    snprintf(base, sizeof(base), "%s/l2", dir);
    char text[256];
    snprintf(text, sizeof(text), "{\"type\": \"fs\", \"base_path\": \"%s\"}", base);
    lmc_l2_adapter *a = make_adapter_json(text);
    /* Permissions do not stop root: replace the directory by a regular file instead. */
    assert_int_equal(rmdir(base), 0);
    FILE *f = fopen(base, "w");
    assert_non_null(f);
    fclose(f);

    lmc_l1_manager *l1 = make_l1();
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "skip_l1", &c, NULL), LMC_OK);
    capture_start(LMC_LOG_WARNING);
    lmc_object_key keys[3];
    make_keys(keys, 3, 800);
    write_keys(l1, keys, 3);
    assert_true(wait_for(sc_idle, c, WAIT_MS));
    capture_query q = {"failed", "no retry"};
    assert_true(wait_for(captured_pred, &q, WAIT_MS));
    capture_stop();
    assert_int_equal(status_int(c, "failed_tasks_total"), 1);
    assert_int_equal(status_int(c, "stored_keys_total"), 0);
    assert_int_equal(total_read_locks(l1, keys, 3), 0);
    /* A failed store never deletes from L1, even under skip_l1. */
    for (size_t i = 0; i < 3; i++)
        assert_true(lmc_l1_contains(l1, &keys[i]));

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
    unlink(base);
    rmdir(dir);
}

static void test_key_deleted_before_store_is_skipped_with_warning(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);
    capture_start(LMC_LOG_WARNING);
    /*
     * Deleting right after finish_write almost always beats the controller
     * thread's wake-up; retry with fresh keys on the rare lost race.
     */
    bool warned = false;
    for (uint32_t round = 0; round < 50 && !warned; round++) {
        lmc_object_key k = make_key(900 + round, "test-model", 0);
        write_keys(l1, &k, 1);
        lmc_l1_error e;
        lmc_l1_delete(l1, &k, 1, true, &e);
        assert_true(wait_for(sc_idle, c, WAIT_MS));
        warned = captured("l2_store", "KEY_NOT_EXIST") > 0;
    }
    capture_stop();
    assert_true(warned);
    assert_int_equal(lmc_l1_object_count(l1), 0);

    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    assert_memcheck(l1);
    lmc_l1_manager_destroy(l1);
}

/* ---------------------------------------------------------------------- */
/* Lifetime and status                                                     */
/* ---------------------------------------------------------------------- */

static void test_destroy_with_tasks_in_flight_releases_read_locks(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    /* 8 x 4 KiB at ~10 KiB/s: the store stays in flight for seconds. */
    lmc_l2_adapter *a = make_mock(0.00001);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);

    lmc_object_key keys[8];
    make_keys(keys, 8, 1000);
    write_keys(l1, keys, 8);
    status_query q = {c, "in_flight_task_count", 1};
    assert_true(wait_for(status_reached, &q, WAIT_MS));
    assert_int_equal(total_read_locks(l1, keys, 8), 8);

    uint64_t t0 = lmc_mono_ms();
    lmc_store_controller_destroy(c);
    assert_true(lmc_mono_ms() - t0 < 1000); /* destroy does not wait for the adapter */
    assert_int_equal(total_read_locks(l1, keys, 8), 0);
    lmc_l2_adapter_destroy(a);
    assert_memcheck(l1);
    lmc_l1_manager_destroy(l1);
}

static void test_create_and_destroy_quickly(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    for (int i = 0; i < 5; i++) {
        lmc_store_controller *c = NULL;
        assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);
        uint64_t t0 = lmc_mono_ms();
        lmc_store_controller_destroy(c);
        assert_true(lmc_mono_ms() - t0 < 400); /* woken, not waiting out the 500 ms poll */
    }
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
}

static void test_report_status_has_the_documented_fields(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1();
    lmc_l2_adapter *a = make_mock(10.0);
    lmc_store_controller *c = NULL;
    assert_int_equal(lmc_store_controller_create(l1, &a, 1, "default", &c, NULL), LMC_OK);
    lmc_json *j = lmc_store_controller_report_status(c);
    assert_non_null(j);
    static const char *const fields[] = {
        "is_healthy",      "thread_alive",      "pending_keys_count", "in_flight_task_count",
        "num_l2_adapters", "stored_keys_total", "failed_tasks_total"};
    assert_int_equal(lmc_json_size(j), 7);
    for (size_t i = 0; i < 7; i++)
        assert_string_equal(lmc_json_object_key_at(j, i), fields[i]);
    assert_true(lmc_json_get_bool(lmc_json_object_get(j, "is_healthy")));
    assert_true(lmc_json_get_bool(lmc_json_object_get(j, "thread_alive")));
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "pending_keys_count")), 0);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "num_l2_adapters")), 1);
    lmc_json_free(j);
    lmc_store_controller_destroy(c);
    lmc_l2_adapter_destroy(a);
    lmc_l1_manager_destroy(l1);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_check_accepts_default_and_skip_l1),
        cmocka_unit_test(test_policy_check_rejects_unknown_name_with_message),
        cmocka_unit_test(test_create_rejects_unknown_policy),
        cmocka_unit_test(test_finished_writes_are_stored_and_read_locks_released),
        cmocka_unit_test(test_skip_l1_deletes_keys_from_l1_after_store),
        cmocka_unit_test(test_store_of_keys_already_in_l2_is_a_success),
        cmocka_unit_test(test_two_adapters_both_receive_the_keys),
        cmocka_unit_test(test_skip_l1_with_two_adapters_deletes_after_both),
        cmocka_unit_test(test_keys_are_grouped_by_model_and_rank),
        cmocka_unit_test(test_prefetched_objects_are_not_stored),
        cmocka_unit_test(test_zero_adapters_ignore_finished_writes),
        cmocka_unit_test(test_failed_fs_store_is_logged_and_read_locks_released),
        cmocka_unit_test(test_key_deleted_before_store_is_skipped_with_warning),
        cmocka_unit_test(test_destroy_with_tasks_in_flight_releases_read_locks),
        cmocka_unit_test(test_create_and_destroy_quickly),
        cmocka_unit_test(test_report_status_has_the_documented_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
