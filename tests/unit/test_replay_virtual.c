/*
 * test_replay_virtual.c -- trace replay with --pace virtual: the same trace
 * replayed five times (once with the second core kept busy) gives the same
 * per-record results and the same final counters; the record schedule is
 * kept exactly in virtual time; lateness does not apply; the eviction
 * period follows the time scale.
 *
 * The trace is the Mooncake-derived fixture (replay/synth.h) of the first
 * requests of ../shared/traces (the synthetic chat workload when that is
 * missing), replayed with a small L1 and a mock L2 with eviction, so that
 * L1 eviction, L2 stores, L2 eviction and prefetches from L2 all happen.
 * Per record the test keeps the StorageManager's whole status (L1 usage and
 * lock counts, controller counters, L2 usage) and the virtual time; the
 * handler's latency, a timing field, is left out.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/workload.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "lmcache/storage_manager.h"
#include "replay/driver.h"
#include "replay/synth.h"
#include "trace/ops.h"

#define RUNS 5

/* ---------------------------------------------------------------------- */
/* What one replay produced                                                */
/* ---------------------------------------------------------------------- */

typedef struct outcome {
    lmc_strbuf per_record; /* one line per record: index, qualname, failed, time, status */
    char *final_status;
    uint64_t records;
} outcome;

/* The replay being observed (the handlers have no user data of their own). */
static outcome *g_run;

static void observe(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_status st)
{
    lmc_storage_manager *sm = lmc_replay_ctx_sm(ctx);
    char *status = lmc_sm_report_status(sm);
    lmc_strbuf_printf(&g_run->per_record, "%s %d t=%llu %s\n", rec->qualname, (int)st,
                      (unsigned long long)lmc_sm_now_ns(sm), status);
    free(status);
}

/* Every default handler, followed by a look at the StorageManager. */
#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    static lmc_status observed_##name(lmc_replay_ctx *ctx, const lmc_trace_record *rec,            \
                                      lmc_error *err)                                              \
    {                                                                                              \
        lmc_status st = lmc_replay_##name(ctx, rec, err);                                          \
        observe(ctx, rec, st);                                                                     \
        return st;                                                                                 \
    }
#include "trace/ops.def"
#undef LMC_TRACE_OP

static lmc_dispatcher *observing_dispatcher(void)
{
    lmc_dispatcher *d = lmc_dispatcher_create();
    assert_non_null(d);
#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    assert_int_equal(lmc_dispatcher_register(d, lmc_trace_op_qualname(LMC_TRACE_OP_##ID),          \
                                             observed_##name, NULL),                               \
                     LMC_OK);
#include "trace/ops.def"
#undef LMC_TRACE_OP
    return d;
}

static void on_record(const lmc_replay_record_view *v, void *ud)
{
    outcome *o = ud;
    o->records++;
    lmc_strbuf_printf(&o->per_record, "#%llu %s failed=%d skipped=%d\n",
                      (unsigned long long)v->index, v->qualname, v->failed, v->skipped);
}

static void on_finish(lmc_storage_manager *sm, void *ud)
{
    outcome *o = ud;
    o->final_status = lmc_sm_report_status(sm);
}

/* ---------------------------------------------------------------------- */
/* The fixture                                                             */
/* ---------------------------------------------------------------------- */

static char g_trace[64];

static int setup(void **state)
{
    (void)state;
    lmc_log_set_level(LMC_LOG_ERROR);
    snprintf(g_trace, sizeof(g_trace), "/tmp/test_replay_virtual_%d.lct", (int)getpid());
    char path[1024];
    lmc_workload *w = NULL;
    lmc_error err;
    if (lmc_replay_synth_mooncake_path(path, sizeof(path))) {
        if (lmc_workload_load_mooncake(path, 120, &w, &err) != LMC_OK)
            return -1;
    } else {
        lmc_chat_config chat;
        lmc_chat_config_init(&chat);
        chat.users = 16;
        chat.interval_ms = 200;
        if (lmc_workload_chat(&chat, 0, &w, &err) != LMC_OK)
            return -1;
    }
    lmc_replay_synth_options o = {.object_bytes = 4096};
    lmc_status st = lmc_replay_synth_workload(w, g_trace, &o, NULL, &err);
    lmc_workload_destroy(w);
    return st == LMC_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_trace);
    return 0;
}

/* 8 MiB of L1 (2,048 objects) in front of a 16 MiB mock with LRU eviction. */
static void replay_once(outcome *o)
{
    char *argv[] = {
        "t",
        "--l1-size-gb",
        "0.0078125",
        "--eviction-policy",
        "LRU",
        "--l2-adapter",
        "{\"type\": \"mock\", \"max_size_gb\": 0.015625, \"mock_bandwidth_gb\": 1, "
        "\"virtual_latency_us\": 40, \"eviction\": {\"eviction_policy\": \"LRU\", "
        "\"trigger_watermark\": 0.7, \"eviction_ratio\": 0.3}}",
        NULL,
    };
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    lmc_error err;
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 7, argv, &err), LMC_OK);
    lmc_dispatcher *d = observing_dispatcher();
    memset(o, 0, sizeof(*o));
    g_run = o;
    lmc_replay_options opt = {.time_scale = 1.0,
                              .dispatcher = d,
                              .on_record = on_record,
                              .ud = o,
                              .pace = LMC_REPLAY_PACE_VIRTUAL,
                              .on_finish = on_finish};
    lmc_replay_result res;
    assert_int_equal(lmc_replay_run(&cfg, g_trace, &opt, &res, &err), LMC_OK);
    assert_int_equal(res.failed, 0);
    assert_int_equal(res.pace, LMC_REPLAY_PACE_VIRTUAL);
    assert_int_equal(lmc_replay_stats_lateness(res.stats).count, 0); /* nothing waited */
    lmc_replay_result_free(&res);
    lmc_dispatcher_destroy(d);
    lmc_sm_config_free(&cfg);
    g_run = NULL;
}

static void outcome_free(outcome *o)
{
    free(lmc_strbuf_finish(&o->per_record));
    free(o->final_status);
}

/* A status field by a dotted path, from the final status. */
static int64_t final_int(const outcome *o, const char *path)
{
    lmc_json *root = NULL;
    assert_int_equal(lmc_json_parse(o->final_status, strlen(o->final_status), &root, NULL), LMC_OK);
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const lmc_json *v = root;
    for (char *part = strtok(buf, "."); part != NULL && v != NULL; part = strtok(NULL, "."))
        v = part[0] >= '0' && part[0] <= '9' ? lmc_json_array_at(v, (size_t)atoi(part))
                                             : lmc_json_object_get(v, part);
    assert_non_null(v);
    int64_t out = lmc_json_get_int(v);
    lmc_json_free(root);
    return out;
}

/* The first line where two per-record logs differ, for the failure message. */
static void report_divergence(const char *a, const char *b)
{
    size_t line = 1;
    for (size_t i = 0; a[i] == b[i] && a[i] != '\0'; i++)
        line += a[i] == '\n';
    print_error("per-record results differ from line %zu on\n", line);
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

static void test_five_virtual_replays_one_on_a_busy_host_give_the_same_results(void **state)
{
    (void)state;
    outcome runs[RUNS];
    for (int r = 0; r < RUNS; r++) {
        pid_t busy = -1;
        if (r == 2) {
            /* Keep the second core busy for this run, as another replay would. */
            busy = fork();
            assert_true(busy >= 0);
            if (busy == 0) {
                freopen("/dev/null", "w", stdout);
                execlp("yes", "yes", (char *)NULL);
                _exit(127);
            }
        }
        replay_once(&runs[r]);
        if (busy > 0) {
            kill(busy, SIGKILL);
            waitpid(busy, NULL, 0);
        }
    }
    const outcome *first = &runs[0];
    assert_true(first->records > 100);
    /* The workload did what the test is about: L1 and L2 evictions, stores, loads. */
    assert_true(final_int(first, "l1_eviction_controller.evicted_keys_total") > 0);
    assert_true(final_int(first, "l2_eviction_controller.evicted_keys_total") > 0);
    assert_true(final_int(first, "store_controller.stored_keys_total") > 0);
    assert_int_equal(final_int(first, "store_controller.in_flight_task_count"), 0);
    for (int r = 1; r < RUNS; r++) {
        char *a = (char *)runs[0].per_record.p;
        char *b = (char *)runs[r].per_record.p;
        assert_non_null(a);
        assert_non_null(b);
        if (strcmp(a, b) != 0)
            report_divergence(a, b);
        assert_string_equal(a, b);
        assert_string_equal(runs[0].final_status, runs[r].final_status);
    }
    for (int r = 0; r < RUNS; r++)
        outcome_free(&runs[r]);
}

/* A record is dispatched at its own virtual time, t_mono x time_scale. */
static uint64_t g_last_t, g_first_t;
static bool g_in_order;

static lmc_status timed_handler(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_error *err)
{
    (void)err;
    uint64_t now = lmc_sm_now_ns(lmc_replay_ctx_sm(ctx));
    uint64_t want = (uint64_t)(rec->t_mono * 0.5 * 1e9);
    if ((now != want || now < g_last_t) && g_in_order) {
        print_error("%s at t_mono %.9f: virtual time %llu, want %llu (last %llu)\n", rec->qualname,
                    rec->t_mono, (unsigned long long)now, (unsigned long long)want,
                    (unsigned long long)g_last_t);
        g_in_order = false;
    }
    if (g_first_t == UINT64_MAX)
        g_first_t = now;
    g_last_t = now;
    return LMC_OK;
}

static void test_each_record_is_dispatched_at_its_scaled_virtual_time(void **state)
{
    (void)state;
    lmc_dispatcher *d = lmc_dispatcher_create();
#define LMC_TRACE_OP(ID, name, method, ...)                                                        \
    lmc_dispatcher_register(d, lmc_trace_op_qualname(LMC_TRACE_OP_##ID), timed_handler, NULL);
#include "trace/ops.def"
#undef LMC_TRACE_OP
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", NULL};
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 5, argv, NULL), LMC_OK);
    g_last_t = 0;
    g_first_t = UINT64_MAX;
    g_in_order = true;
    uint64_t wall0 = lmc_mono_ns();
    lmc_replay_options opt = {.time_scale = 0.5, .dispatcher = d, .pace = LMC_REPLAY_PACE_VIRTUAL};
    lmc_replay_result res;
    assert_int_equal(lmc_replay_run(&cfg, g_trace, &opt, &res, NULL), LMC_OK);
    assert_true(g_in_order);
    assert_int_equal(g_first_t, 0);
    assert_true(g_last_t > 10ull * 1000000000ull); /* tens of seconds of recording ... */
    assert_true(lmc_mono_ns() - wall0 < 10ull * 1000000000ull); /* ... in much less */
    lmc_replay_result_free(&res);
    lmc_dispatcher_destroy(d);
    lmc_sm_config_free(&cfg);
}

static void test_eviction_period_follows_the_time_scale_in_both_paces(void **state)
{
    (void)state;
    lmc_sm_runtime_options rt;
    lmc_replay_pace_runtime(LMC_REPLAY_PACE_REALTIME, 0.02, &rt);
    assert_int_equal(rt.executor, LMC_SM_EXEC_THREADS);
    assert_int_equal(rt.eviction_period_ns, 20000000);
    lmc_replay_pace_runtime(LMC_REPLAY_PACE_VIRTUAL, 2.0, &rt);
    assert_int_equal(rt.executor, LMC_SM_EXEC_MANUAL);
    assert_int_equal(rt.eviction_period_ns, 2000000000);
    lmc_replay_pace_runtime(LMC_REPLAY_PACE_VIRTUAL, 1e-12, &rt);
    assert_int_equal(rt.eviction_period_ns, 1);

    /* A virtual StorageManager at time scale 0.5 runs its first pass at 0.5 s. */
    lmc_replay_pace_runtime(LMC_REPLAY_PACE_VIRTUAL, 0.5, &rt);
    char *argv[] = {"t", "--l1-size-gb", "0.01", "--eviction-policy", "LRU", NULL};
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 5, argv, NULL), LMC_OK);
    lmc_storage_manager *sm = NULL;
    assert_int_equal(lmc_sm_create_ex(&cfg, &rt, &sm, NULL), LMC_OK);
    assert_int_equal(lmc_sm_next_event_ns(sm), 500000000);
    lmc_sm_destroy(sm);
    lmc_sm_config_free(&cfg);
}

/* run_until's conditions: a prefetch is done, or never. */
typedef struct wait_prefetch {
    lmc_storage_manager *sm;
    lmc_prefetch_handle *h;
    int found;
} wait_prefetch;

static bool prefetch_done(void *ud)
{
    wait_prefetch *w = ud;
    lmc_bitmap bm;
    if (lmc_sm_query_prefetch_status(w->sm, w->h, &bm) != LMC_OK)
        return false;
    w->found = (int)lmc_bitmap_popcount(&bm);
    lmc_bitmap_free(&bm);
    return true;
}

static bool never(void *ud)
{
    (void)ud;
    return false;
}

static void test_virtual_run_until_advances_to_a_prefetch_and_gives_up_when_idle(void **state)
{
    (void)state;
    lmc_sm_runtime_options rt;
    lmc_replay_pace_runtime(LMC_REPLAY_PACE_VIRTUAL, 1.0, &rt);
    char *argv[] = {"t",
                    "--l1-size-gb",
                    "0.01",
                    "--eviction-policy",
                    "LRU",
                    "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 1, "
                    "\"virtual_latency_us\": 500}",
                    NULL};
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 7, argv, NULL), LMC_OK);
    lmc_storage_manager *sm = NULL;
    assert_int_equal(lmc_sm_create_ex(&cfg, &rt, &sm, NULL), LMC_OK);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    lmc_replay_pacer pacer;
    lmc_replay_pacer_init(&pacer, LMC_REPLAY_PACE_VIRTUAL, sm, ctx);
    lmc_replay_pacer_start(&pacer);

    /* One key in L2 only: store it, let the store finish, drop it from L1. */
    lmc_object_key k;
    uint8_t hash[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(lmc_object_key_make(&k, hash, 8, "m", 0, 0, "", NULL), LMC_OK);
    lmc_layout_desc lay;
    int64_t dims[1] = {4096};
    assert_int_equal(lmc_layout_desc_make1(&lay, dims, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    lmc_l1_error e;
    lmc_memory_obj obj;
    assert_int_equal(lmc_sm_reserve_write(sm, &k, 1, &lay, LMC_WRITE_NEW, &e, &obj), 1);
    lmc_sm_finish_write(sm, &k, 1, NULL);
    lmc_replay_pacer_drain(&pacer, 5000);
    assert_int_equal(lmc_sm_clear(sm, true), 1);

    uint64_t t0 = lmc_sm_now_ns(sm);
    lmc_prefetch_handle h;
    assert_int_equal(lmc_sm_submit_prefetch_task(sm, &k, 1, &lay, 0, "", LMC_TRIM_PREFIX, &h, NULL),
                     LMC_OK);
    wait_prefetch w = {sm, &h, -1};
    assert_true(lmc_replay_pacer_run_until(&pacer, prefetch_done, &w, 5000));
    assert_int_equal(w.found, 1);
    /* A lookup (500 us), then a load of 4 KiB at 1 GiB/s (3814 ns) and its 500 us. */
    assert_int_equal(lmc_sm_now_ns(sm) - t0, 500000 + 3814 + 500000);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_finish_read_prefetched(sm, &k, 1, 0, NULL);

    /* Nothing pending: only eviction passes are left, and run_until does not run them for ever. */
    uint64_t wall0 = lmc_mono_ns();
    assert_false(lmc_replay_pacer_run_until(&pacer, never, NULL, 5000));
    assert_true(lmc_mono_ns() - wall0 < 1000000000ull);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
    lmc_sm_config_free(&cfg);
}

static void test_pace_names_parse_and_reject(void **state)
{
    (void)state;
    lmc_replay_pace p = LMC_REPLAY_PACE_REALTIME;
    assert_int_equal(lmc_replay_pace_parse("virtual", &p, NULL), LMC_OK);
    assert_int_equal(p, LMC_REPLAY_PACE_VIRTUAL);
    assert_int_equal(lmc_replay_pace_parse("realtime", &p, NULL), LMC_OK);
    assert_int_equal(p, LMC_REPLAY_PACE_REALTIME);
    lmc_error err;
    assert_int_equal(lmc_replay_pace_parse("fast", &p, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "unknown pace 'fast' (expected realtime or virtual)");
    assert_int_equal(lmc_replay_pace_count, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_five_virtual_replays_one_on_a_busy_host_give_the_same_results),
        cmocka_unit_test(test_each_record_is_dispatched_at_its_scaled_virtual_time),
        cmocka_unit_test(test_eviction_period_follows_the_time_scale_in_both_paces),
        cmocka_unit_test(test_virtual_run_until_advances_to_a_prefetch_and_gives_up_when_idle),
        cmocka_unit_test(test_pace_names_parse_and_reject),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
