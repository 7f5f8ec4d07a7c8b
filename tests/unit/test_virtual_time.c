/*
 * test_virtual_time.c -- the StorageManager in manual mode (virtual time):
 * TTL expiry and eviction passes at their virtual times, L2 stores and
 * prefetches completing at their modelled times (mock and fs), fault_inject
 * behaving as with threads, wait_idle advancing through pending work, and
 * no background thread at all. Every test runs in milliseconds of real
 * time, however much virtual time passes.
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
#include "core/json.h"
#include "helpers/sm_test_util.h"
#include "helpers/thread_test_util.h"
#include "lmcache/storage_manager.h"

#define US 1000ull
#define MS 1000000ull
#define S 1000000000ull
#define NKEYS 4
#define OBJ (256u * 1024u) /* 4 keys = 1 MiB */

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

static lmc_storage_manager *manual_sm(const char *l2_json, uint64_t period_ns)
{
    lmc_sm_runtime_options opt;
    lmc_sm_runtime_options_init(&opt);
    opt.executor = LMC_SM_EXEC_MANUAL;
    if (period_ns != 0)
        opt.eviction_period_ns = period_ns;
    char *argv[] = {"test", "--l1-size-gb", "0.01",          "--eviction-policy",
                    "LRU",  "--l2-adapter", (char *)l2_json, NULL};
    return sm_test_create_argv_ex(l2_json != NULL ? 7 : 5, argv, &opt);
}

/* An integer of the status by a dotted path ("store_controller.stored_keys_total",
 * "l2_adapters.0.inner.locked_keys"); fails the test when absent. */
static int64_t status_at(lmc_storage_manager *sm, const char *path)
{
    char *text = lmc_sm_report_status(sm);
    assert_non_null(text);
    lmc_json *root = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &root, NULL), LMC_OK);
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const lmc_json *v = root;
    for (char *part = strtok(buf, "."); part != NULL && v != NULL; part = strtok(NULL, ".")) {
        if (part[0] >= '0' && part[0] <= '9')
            v = lmc_json_array_at(v, (size_t)atoi(part));
        else
            v = lmc_json_object_get(v, part);
    }
    if (v == NULL)
        fail_msg("status has no %s: %s", path, text);
    int64_t out = lmc_json_get_int(v);
    lmc_json_free(root);
    free(text);
    return out;
}

static int64_t status_int(lmc_storage_manager *sm, const char *section, const char *field)
{
    char path[128];
    snprintf(path, sizeof(path), "%s.%s%s", section,
             strcmp(section, "l2_adapters") == 0 ? "0." : "", field);
    return status_at(sm, path);
}

static bool status_healthy(lmc_storage_manager *sm)
{
    char *text = lmc_sm_report_status(sm);
    lmc_json *root = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &root, NULL), LMC_OK);
    bool ok = lmc_json_get_bool(lmc_json_object_get(root, "is_healthy"));
    lmc_json_free(root);
    free(text);
    return ok;
}

static size_t controller_threads(void)
{
    return thread_test_count("store-ctl", NULL) + thread_test_count("prefetch-ctl", NULL) +
           thread_test_count("l1-evict", NULL) + thread_test_count("l2-evict", NULL) +
           thread_test_count("l2-", NULL);
}

/* Store keys (pattern bytes) at the current virtual time and hand them to the controllers. */
static void store_now(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                      const lmc_layout_desc *lay)
{
    assert_int_equal(sm_test_store(sm, keys, n, lay), n);
    assert_int_equal(lmc_sm_advance_to(sm, lmc_sm_now_ns(sm)), LMC_OK);
}

/* Prefetch keys at the current virtual time; the handle is the caller's. */
static void prefetch_now(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n,
                         const lmc_layout_desc *lay, lmc_prefetch_handle *h)
{
    lmc_error err;
    assert_int_equal(
        lmc_sm_submit_prefetch_task(sm, keys, n, lay, 0, "vt", LMC_TRIM_PREFIX, h, &err), LMC_OK);
    assert_int_equal(lmc_sm_advance_to(sm, lmc_sm_now_ns(sm)), LMC_OK);
}

/* Found keys of a finished prefetch, or -1 while it still runs. */
static int prefetch_found(lmc_storage_manager *sm, const lmc_prefetch_handle *h)
{
    lmc_bitmap bm;
    lmc_status st = lmc_sm_query_prefetch_status(sm, h, &bm);
    if (st == LMC_ERR_BUSY)
        return -1;
    assert_int_equal(st, LMC_OK);
    int found = (int)lmc_bitmap_popcount(&bm);
    lmc_bitmap_free(&bm);
    return found;
}

/* Read the prefetched keys back and check their bytes, then release them. */
static void check_prefetched_bytes(lmc_storage_manager *sm, const lmc_object_key *keys, size_t n)
{
    lmc_sm_read_ctx rc;
    assert_int_equal(lmc_sm_read_prefetched_enter(sm, keys, n, &rc), LMC_OK);
    assert_true(rc.ok);
    for (size_t i = 0; i < n; i++) {
        for (uint64_t b = 0; b < rc.objs[i].size; b += 4099)
            assert_int_equal(rc.objs[i].data[b], sm_test_pattern(&keys[i], b));
    }
    lmc_sm_read_prefetched_exit(sm, &rc, false);
    lmc_sm_finish_read_prefetched(sm, keys, n, 0, NULL);
}

/* ---------------------------------------------------------------------- */
/* Executor basics                                                         */
/* ---------------------------------------------------------------------- */

static void test_manual_mode_starts_no_background_thread(void **state)
{
    (void)state;
    size_t before = controller_threads();
    lmc_storage_manager *sm =
        manual_sm("{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}", 0);
    assert_int_equal(controller_threads(), before);
    assert_true(status_healthy(sm));
    lmc_sm_destroy(sm);

    /*
     * The same config with threads does start them, which the count above
     * would see: an adapter worker is named before create returns (the
     * controllers name themselves once running, so they are not waited for).
     */
    lmc_sm_runtime_options opt;
    lmc_sm_runtime_options_init(&opt);
    char *argv[] = {"test",
                    "--l1-size-gb",
                    "0.01",
                    "--eviction-policy",
                    "LRU",
                    "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}",
                    NULL};
    lmc_storage_manager *threaded = sm_test_create_argv_ex(7, argv, &opt);
    assert_int_equal(thread_test_settle("l2-mock", NULL, 1), 1); /* it names itself once it runs */
    lmc_sm_destroy(threaded);
}

static void test_advance_to_is_refused_with_threads(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    assert_int_equal(lmc_sm_advance_to(sm, 5 * S), LMC_ERR_INVALID);
    assert_int_equal(lmc_sm_next_event_ns(sm), UINT64_MAX);
    uint64_t now = lmc_mono_ns();
    assert_true(lmc_sm_now_ns(sm) + S > now && lmc_sm_now_ns(sm) < now + S);
    lmc_sm_destroy(sm);
}

static void test_create_ex_rejects_an_unknown_executor(void **state)
{
    (void)state;
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    char *argv[] = {"test", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", NULL};
    lmc_error err;
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 5, argv, &err), LMC_OK);
    lmc_sm_runtime_options opt;
    lmc_sm_runtime_options_init(&opt);
    opt.executor = (lmc_sm_executor)7;
    lmc_storage_manager *sm = NULL;
    assert_int_equal(lmc_sm_create_ex(&cfg, &opt, &sm, &err), LMC_ERR_INVALID);
    assert_null(sm);
    assert_non_null(strstr(err.msg, "executor"));
    lmc_sm_config_free(&cfg);
}

static void test_clock_starts_at_start_ns_and_never_goes_back(void **state)
{
    (void)state;
    lmc_sm_runtime_options opt;
    lmc_sm_runtime_options_init(&opt);
    opt.executor = LMC_SM_EXEC_MANUAL;
    opt.start_ns = 7 * S;
    char *argv[] = {"test", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", NULL};
    lmc_storage_manager *sm = sm_test_create_argv_ex(5, argv, &opt);
    assert_int_equal(lmc_sm_now_ns(sm), 7 * S);
    assert_int_equal(lmc_sm_next_event_ns(sm), 8 * S); /* the first eviction pass */
    assert_int_equal(lmc_sm_advance_to(sm, 9 * S), LMC_OK);
    assert_int_equal(lmc_sm_now_ns(sm), 9 * S);
    assert_int_equal(lmc_sm_advance_to(sm, 3 * S), LMC_OK);
    assert_int_equal(lmc_sm_now_ns(sm), 9 * S);
    lmc_sm_destroy(sm);
}

/* ---------------------------------------------------------------------- */
/* TTL locks and eviction periods                                          */
/* ---------------------------------------------------------------------- */

static void test_read_ttl_of_300_s_expires_at_300_s_of_virtual_time(void **state)
{
    (void)state;
    uint64_t wall0 = lmc_mono_ns();
    lmc_storage_manager *sm = manual_sm(NULL, 0);
    lmc_object_key k[1];
    sm_test_keys(k, 1, 300);
    lmc_layout_desc lay = sm_test_layout(4096);
    store_now(sm, k, 1, &lay);
    lmc_prefetch_handle h;
    prefetch_now(sm, k, 1, &lay, &h); /* an L1 hit: read-locked at t = 0 */
    assert_int_equal(prefetch_found(sm, &h), 1);
    lmc_prefetch_handle_clear(&h);

    assert_int_equal(lmc_sm_advance_to(sm, 300 * S - 1 * MS), LMC_OK); /* 299.999 s */
    assert_int_equal(lmc_sm_clear(sm, false), 0);                      /* still locked */
    assert_int_equal(lmc_sm_advance_to(sm, 300 * S), LMC_OK);
    assert_int_equal(lmc_sm_clear(sm, false), 1); /* free: the lock expired */
    lmc_sm_destroy(sm);
    /* Five minutes of virtual time took (much) less than two seconds. */
    assert_true(lmc_mono_ns() - wall0 < 2 * S);
}

static void test_l1_eviction_passes_run_at_period_boundaries_only(void **state)
{
    (void)state;
    lmc_sm_runtime_options opt;
    lmc_sm_runtime_options_init(&opt);
    opt.executor = LMC_SM_EXEC_MANUAL;
    opt.eviction_period_ns = 1 * S;
    char *argv[] = {"test", "--l1-size-gb",
                    "0.01", "--eviction-policy",
                    "LRU",  "--eviction-trigger-watermark",
                    "0.5",  "--eviction-ratio",
                    "0.5",  NULL};
    lmc_storage_manager *sm = sm_test_create_argv_ex(9, argv, &opt);
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    size_t n = (size_t)(total * 3 / 4 / 4096);
    lmc_object_key *k = calloc(n, sizeof(*k));
    sm_test_keys(k, n, 1000);
    lmc_layout_desc lay = sm_test_layout(4096);
    store_now(sm, k, n, &lay);
    uint64_t full;
    lmc_sm_l1_usage(sm, &full, &total);
    assert_true(full * 2 >= total); /* over the watermark */

    assert_int_equal(lmc_sm_next_event_ns(sm), 1 * S);
    assert_int_equal(lmc_sm_advance_to(sm, 1 * S - 1), LMC_OK);
    lmc_sm_l1_usage(sm, &used, &total);
    assert_int_equal(used, full);
    assert_int_equal(status_int(sm, "l1_eviction_controller", "evicted_keys_total"), 0);

    assert_int_equal(lmc_sm_advance_to(sm, 1 * S), LMC_OK);
    lmc_sm_l1_usage(sm, &used, &total);
    assert_true(used < full);
    int64_t evicted = status_int(sm, "l1_eviction_controller", "evicted_keys_total");
    assert_int_equal(evicted, (int64_t)(n / 2));
    assert_int_equal(lmc_sm_next_event_ns(sm), 2 * S);

    /* Under the watermark now: the next passes find nothing to do. */
    assert_int_equal(lmc_sm_advance_to(sm, 5 * S + 1), LMC_OK);
    assert_int_equal(status_int(sm, "l1_eviction_controller", "evicted_keys_total"), evicted);
    assert_int_equal(lmc_sm_next_event_ns(sm), 6 * S);
    free(k);
    lmc_sm_destroy(sm);
}

/* ---------------------------------------------------------------------- */
/* L2 in virtual time                                                      */
/* ---------------------------------------------------------------------- */

/* 1 MiB at 2e9 bytes/s is 524288 ns, plus 100 us of latency. */
#define MOCK_MODEL                                                                                 \
    "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "                          \
    "\"virtual_latency_us\": 100, \"virtual_bandwidth_gbps\": 2}"
#define XFER_NS 524288ull
#define LAT_NS (100 * US)

static void test_l2_store_completes_at_its_modelled_time_and_releases_the_read_locks(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(MOCK_MODEL, 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 10);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay); /* submitted to L2 at t = 0 */
    uint64_t due = XFER_NS + LAT_NS;
    assert_int_equal(lmc_sm_next_event_ns(sm), due);

    assert_int_equal(lmc_sm_advance_to(sm, due - 1), LMC_OK);
    assert_int_equal(status_int(sm, "l1_manager", "read_locked_count"), NKEYS);
    assert_int_equal(status_int(sm, "store_controller", "in_flight_task_count"), 1);
    assert_int_equal(status_int(sm, "l2_adapters", "bytes_used"), 0);

    assert_int_equal(lmc_sm_advance_to(sm, due), LMC_OK);
    assert_int_equal(status_int(sm, "l1_manager", "read_locked_count"), 0);
    assert_int_equal(status_int(sm, "store_controller", "in_flight_task_count"), 0);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), NKEYS);
    assert_int_equal(status_int(sm, "l2_adapters", "bytes_used"), NKEYS * OBJ);
    assert_int_equal(lmc_sm_next_event_ns(sm), 1 * S); /* only the eviction pass is left */
    lmc_sm_destroy(sm);
}

static void test_stores_share_the_bandwidth_in_order_and_latencies_overlap(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(MOCK_MODEL, 0);
    lmc_object_key k[2 * NKEYS];
    sm_test_keys(k, 2 * NKEYS, 20);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    assert_int_equal(lmc_sm_advance_to(sm, 10 * US), LMC_OK);
    store_now(sm, k + NKEYS, NKEYS, &lay); /* waits for the first transfer to end */
    assert_int_equal(lmc_sm_advance_to(sm, XFER_NS + LAT_NS), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), NKEYS);
    assert_int_equal(lmc_sm_next_event_ns(sm), 2 * XFER_NS + LAT_NS);
    assert_int_equal(lmc_sm_advance_to(sm, 2 * XFER_NS + LAT_NS), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), 2 * NKEYS);
    lmc_sm_destroy(sm);
}

static void test_mock_bandwidth_is_the_default_model_and_is_not_charged_twice(void **state)
{
    (void)state;
    /* 1 MiB at 1 GiB/s: 976562 ns, no latency; the mock's own delay is not added on top. */
    lmc_storage_manager *sm =
        manual_sm("{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1}", 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 30);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    uint64_t due = (uint64_t)((double)(NKEYS * OBJ) / (1024.0 * 1024.0 * 1024.0) * 1e9);
    assert_int_equal(lmc_sm_next_event_ns(sm), due);
    assert_int_equal(lmc_sm_advance_to(sm, due), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), NKEYS);
    assert_int_equal(status_int(sm, "store_controller", "in_flight_task_count"), 0);
    lmc_sm_destroy(sm);
}

/*
 * Store keys to L2, drop them from L1, then prefetch them at t0: the lookup
 * answers latency later, the load latency + bytes / bandwidth after that.
 */
static void prefetch_round_trip(lmc_storage_manager *sm, uint64_t lat_ns, uint64_t xfer_ns)
{
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 40);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_clear(sm, true), NKEYS);

    uint64_t t0 = 10 * MS;
    assert_int_equal(lmc_sm_advance_to(sm, t0), LMC_OK);
    lmc_prefetch_handle h;
    prefetch_now(sm, k, NKEYS, &lay, &h);
    uint64_t looked_up = t0 + lat_ns;
    assert_int_equal(lmc_sm_next_event_ns(sm), looked_up);
    assert_int_equal(lmc_sm_advance_to(sm, looked_up), LMC_OK);
    assert_int_equal(prefetch_found(sm, &h), -1); /* loading */
    uint64_t loaded = looked_up + xfer_ns + lat_ns;
    assert_int_equal(lmc_sm_next_event_ns(sm), loaded);
    assert_int_equal(lmc_sm_advance_to(sm, loaded - 1), LMC_OK);
    assert_int_equal(prefetch_found(sm, &h), -1);
    assert_int_equal(lmc_sm_advance_to(sm, loaded), LMC_OK);
    assert_int_equal(prefetch_found(sm, &h), NKEYS);
    lmc_prefetch_handle_clear(&h);
    check_prefetched_bytes(sm, k, NKEYS);
}

static void test_prefetch_from_mock_completes_at_its_modelled_time(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(MOCK_MODEL, 0);
    prefetch_round_trip(sm, LAT_NS, XFER_NS);
    lmc_sm_destroy(sm);
}

static void test_prefetch_from_fs_completes_at_its_modelled_time_with_fs_defaults(void **state)
{
    (void)state;
    char *dir = sm_test_mkdtemp();
    char json[256];
    snprintf(json, sizeof(json), "{\"type\": \"fs\", \"base_path\": \"%s\"}", dir);
    lmc_storage_manager *sm = manual_sm(json, 0);
    /* fs defaults: 50 us, 2 GB/s. */
    prefetch_round_trip(sm, 50 * US, XFER_NS);
    lmc_sm_destroy(sm);
    sm_test_rmdir(dir);
}

static void test_wait_idle_advances_to_the_last_completion_and_not_beyond(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(MOCK_MODEL, 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 50);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    assert_int_equal(sm_test_store(sm, k, NKEYS, &lay), NKEYS);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_now_ns(sm), XFER_NS + LAT_NS);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), NKEYS);
    /* Idle: nothing to wait for, the clock stays (eviction passes are not awaited). */
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_now_ns(sm), XFER_NS + LAT_NS);
    lmc_sm_destroy(sm);
}

static void test_next_event_is_now_while_calls_left_work_for_the_controllers(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(MOCK_MODEL, 0);
    assert_int_equal(lmc_sm_advance_to(sm, 3 * MS), LMC_OK);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 60);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    assert_int_equal(sm_test_store(sm, k, NKEYS, &lay), NKEYS);
    assert_int_equal(lmc_sm_next_event_ns(sm), 3 * MS); /* the finished writes wait */
    assert_int_equal(lmc_sm_advance_to(sm, 3 * MS), LMC_OK);
    assert_int_equal(lmc_sm_next_event_ns(sm), 3 * MS + XFER_NS + LAT_NS);
    lmc_sm_destroy(sm);
}

/* ---------------------------------------------------------------------- */
/* fault_inject                                                            */
/* ---------------------------------------------------------------------- */

#define FI(fields)                                                                                 \
    "{\"type\": \"fault_inject\", \"inner\": {\"type\": \"mock\", \"max_size_gb\": 1, "            \
    "\"mock_bandwidth_gb\": 1, \"virtual_latency_us\": 100, \"virtual_bandwidth_gbps\": "          \
    "2}, " fields "}"

static void test_fault_inject_store_failure_keeps_the_keys_in_l1_as_with_threads(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(FI("\"store_fail_rate\": 1"), 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 70);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    assert_int_equal(lmc_sm_next_event_ns(sm), XFER_NS + LAT_NS); /* the inner's model */
    assert_int_equal(lmc_sm_advance_to(sm, XFER_NS + LAT_NS), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "failed_tasks_total"), 1);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), 0);
    assert_int_equal(status_int(sm, "l1_manager", "read_locked_count"), 0);
    assert_int_equal(status_int(sm, "l1_manager", "total_object_count"), NKEYS);
    lmc_sm_destroy(sm);
}

static void test_fault_inject_delay_is_virtual_time_added_after_the_inner(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(FI("\"delay_rate\": 1, \"delay_ms\": 5"), 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 80);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    uint64_t inner_done = XFER_NS + LAT_NS;
    assert_int_equal(lmc_sm_advance_to(sm, inner_done + 5 * MS - 1), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "in_flight_task_count"), 1);
    assert_int_equal(lmc_sm_next_event_ns(sm), inner_done + 5 * MS);
    assert_int_equal(lmc_sm_advance_to(sm, inner_done + 5 * MS), LMC_OK);
    assert_int_equal(status_int(sm, "store_controller", "stored_keys_total"), NKEYS);
    lmc_sm_destroy(sm);
}

static void test_fault_inject_lookup_failure_finds_nothing_and_releases_the_locks(void **state)
{
    (void)state;
    lmc_storage_manager *sm = manual_sm(FI("\"lookup_fail_rate\": 1"), 0);
    lmc_object_key k[NKEYS];
    sm_test_keys(k, NKEYS, 90);
    lmc_layout_desc lay = sm_test_layout(OBJ);
    store_now(sm, k, NKEYS, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(lmc_sm_clear(sm, true), NKEYS);
    lmc_prefetch_handle h;
    prefetch_now(sm, k, NKEYS, &lay, &h);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    assert_int_equal(prefetch_found(sm, &h), 0);
    lmc_prefetch_handle_clear(&h);
    /* The inner found (and locked) every key; the failure released those locks. */
    assert_int_equal(status_at(sm, "l2_adapters.0.faults_injected.lookup_fail"), 1);
    assert_int_equal(status_at(sm, "l2_adapters.0.inner.locked_keys"), 0);
    lmc_sm_destroy(sm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manual_mode_starts_no_background_thread),
        cmocka_unit_test(test_advance_to_is_refused_with_threads),
        cmocka_unit_test(test_create_ex_rejects_an_unknown_executor),
        cmocka_unit_test(test_clock_starts_at_start_ns_and_never_goes_back),
        cmocka_unit_test(test_read_ttl_of_300_s_expires_at_300_s_of_virtual_time),
        cmocka_unit_test(test_l1_eviction_passes_run_at_period_boundaries_only),
        cmocka_unit_test(test_l2_store_completes_at_its_modelled_time_and_releases_the_read_locks),
        cmocka_unit_test(test_stores_share_the_bandwidth_in_order_and_latencies_overlap),
        cmocka_unit_test(test_mock_bandwidth_is_the_default_model_and_is_not_charged_twice),
        cmocka_unit_test(test_prefetch_from_mock_completes_at_its_modelled_time),
        cmocka_unit_test(test_prefetch_from_fs_completes_at_its_modelled_time_with_fs_defaults),
        cmocka_unit_test(test_wait_idle_advances_to_the_last_completion_and_not_beyond),
        cmocka_unit_test(test_next_event_is_now_while_calls_left_work_for_the_controllers),
        cmocka_unit_test(test_fault_inject_store_failure_keeps_the_keys_in_l1_as_with_threads),
        cmocka_unit_test(test_fault_inject_delay_is_virtual_time_added_after_the_inner),
        cmocka_unit_test(test_fault_inject_lookup_failure_finds_nothing_and_releases_the_locks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
