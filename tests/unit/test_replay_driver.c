/*
 * test_replay_driver.c -- the replay half (seed section 11, replay): the
 * dispatcher and its default table, FIFO pairing of read contexts, and
 * record-then-replay round trips against a real StorageManager, with
 * skipping, failure counting and pacing.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/sm_test_util.h"
#include "helpers/trace_test_util.h"
#include "l2/adapter.h"
#include "lmcache/storage_manager.h"
#include "obs/event_bus.h"
#include "replay/dispatch.h"
#include "replay/driver.h"
#include "replay/output.h"
#include "storage/config.h"
#include "trace/capture.h"
#include "trace/format.h"
#include "trace/lifecycle.h"
#include "trace/recorder.h"

#define P LMC_TRACE_QUALNAME_PREFIX

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

typedef struct log_capture {
    char lines[64][512];
    size_t n;
} log_capture;

static void capture_sink(lmc_log_level level, const char *comp, const char *msg, void *ud)
{
    (void)level;
    (void)comp;
    log_capture *c = ud;
    if (c->n < 64)
        snprintf(c->lines[c->n++], sizeof(c->lines[0]), "%s", msg);
}

static bool logged(const log_capture *c, const char *needle)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strstr(c->lines[i], needle))
            return true;
    }
    return false;
}

/* The StorageManager most tests run: a 10 MB L1 under LRU. */
#define SMALL_LRU "--l1-size-gb 0.01 --eviction-policy LRU"

/*
 * A SMALL_LRU StorageManager and the n keys sm_test_keys makes from base
 * (into k), the first `stored` of them stored with 4 KiB each.
 */
static lmc_storage_manager *sm_with_keys(lmc_object_key *k, size_t n, uint64_t base, size_t stored)
{
    lmc_storage_manager *sm = sm_test_create(SMALL_LRU);
    sm_test_keys(k, n, base);
    if (stored > 0) {
        lmc_layout_desc lay = sm_test_layout(4096);
        sm_test_store(sm, k, stored, &lay);
    }
    return sm;
}

static lmc_sm_config config_of(const char *flags)
{
    return sm_test_config(flags, NULL);
}

/* A small trace of reserve_write + finish_write of 2 keys, `gap` seconds apart. */
static void write_store_trace(const char *path, double gap, int64_t schema)
{
    lmc_object_key k[2];
    sm_test_keys(k, 2, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    tt_trace w;
    tt_trace_begin(&w, schema);
    tt_trace_keys_record(&w, 0.0, P "reserve_write", k, 2, &lay, "new");
    tt_trace_keys_record(&w, gap, P "finish_write", k, 2, NULL, NULL);
    tt_trace_end(&w, path);
}

typedef struct fixture {
    char *dir;
    char path[512];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = sm_test_mkdtemp();
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_log_set_sink(NULL, NULL);
    sm_test_rmdir(f->dir);
    free(f);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Dispatcher                                                              */
/* ---------------------------------------------------------------------- */

static lmc_status ok_handler(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_error *err)
{
    (void)ctx;
    (void)rec;
    (void)err;
    return LMC_OK;
}

static lmc_status failing_handler(lmc_replay_ctx *ctx, const lmc_trace_record *rec, lmc_error *err)
{
    (void)ctx;
    (void)rec;
    return lmc_error_set(err, LMC_ERR_INVALID, "boom");
}

static void test_dispatcher_registers_and_rejects_duplicates(void **state)
{
    (void)state;
    lmc_dispatcher *d = lmc_dispatcher_create();
    assert_false(lmc_dispatcher_has(d, "a.b"));
    assert_int_equal(lmc_dispatcher_register(d, "a.b", ok_handler, NULL), LMC_OK);
    assert_true(lmc_dispatcher_has(d, "a.b"));
    lmc_error err;
    assert_int_equal(lmc_dispatcher_register(d, "a.b", ok_handler, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "handler already registered for 'a.b'"));
    assert_int_equal(lmc_dispatcher_dispatch(d, "x.y", NULL, NULL, &err), LMC_ERR_NOT_FOUND);
    const char *names[1];
    assert_int_equal(lmc_dispatcher_qualnames(d, names, 1), 1);
    assert_string_equal(names[0], "a.b");
    lmc_dispatcher_destroy(d);
}

static void test_default_dispatcher_has_exactly_the_six_qualnames(void **state)
{
    (void)state;
    lmc_dispatcher *d = lmc_dispatcher_default();
    const char *names[6];
    size_t n = lmc_dispatcher_qualnames(d, names, 6);
    assert_int_equal(n, 6);
    static const char *const expect[] = {
        P "reserve_write",
        P "finish_write",
        P "submit_prefetch_task",
        P "finish_read_prefetched",
        P "read_prefetched_results.__enter__",
        P "read_prefetched_results.__exit__",
    };
    for (size_t i = 0; i < 6; i++)
        assert_true(lmc_dispatcher_has(d, expect[i]));
    lmc_dispatcher_destroy(d);
}

static void test_dispatcher_qualnames_tells_none_from_a_short_buffer(void **state)
{
    (void)state;
    lmc_dispatcher *d = lmc_dispatcher_create();
    const char *names[2] = {"untouched", "untouched"};
    assert_int_equal(lmc_dispatcher_qualnames(d, names, 2), 0); /* none */
    assert_string_equal(names[0], "untouched");
    assert_int_equal(lmc_dispatcher_register(d, "a.b", ok_handler, NULL), LMC_OK);
    assert_int_equal(lmc_dispatcher_register(d, "c.d", ok_handler, NULL), LMC_OK);
    assert_int_equal(lmc_dispatcher_register(d, "e.f", ok_handler, NULL), LMC_OK);
    assert_int_equal(lmc_dispatcher_qualnames(d, NULL, 0), 3); /* the count alone */
    /* A short buffer gets the first names in registration order, and the full count. */
    assert_int_equal(lmc_dispatcher_qualnames(d, names, 2), 3);
    assert_string_equal(names[0], "a.b");
    assert_string_equal(names[1], "c.d");
    lmc_dispatcher_destroy(d);
}

/* A record of q with keys and, when given, a layout and a write mode (in b, reused per call). */
typedef struct built {
    lmc_tv items[16];
    lmc_trace_arg args[4];
    lmc_trace_record rec;
} built;

static const lmc_trace_record *build(built *b, const char *q, const lmc_object_key *keys, size_t n,
                                     const lmc_layout_desc *lay, const char *mode)
{
    for (size_t i = 0; i < n; i++)
        b->items[i] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[i]};
    size_t na = 0;
    b->args[na++] = (lmc_trace_arg){"keys", 4, {.kind = LMC_TV_LIST, .u.list = {b->items, n}}};
    if (lay)
        b->args[na++] =
            (lmc_trace_arg){"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = lay}};
    if (mode)
        b->args[na++] = (lmc_trace_arg){"mode", 4, lmc_tv_str(mode, strlen(mode))};
    b->rec =
        (lmc_trace_record){.qualname = q, .qualname_len = strlen(q), .args = b->args, .nargs = na};
    return &b->rec;
}

static void test_read_contexts_pair_first_in_first_out(void **state)
{
    (void)state;
    lmc_object_key k[2];
    lmc_storage_manager *sm = sm_with_keys(k, 2, 10, 2);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    lmc_trace_record enter = *build(&b, P "read_prefetched_results.__enter__", k, 2, NULL, NULL);
    assert_int_equal(lmc_replay_read_enter(ctx, &enter, NULL), LMC_OK);
    assert_int_equal(lmc_replay_read_enter(ctx, &enter, NULL), LMC_OK);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 2);
    lmc_trace_record exit_ = *build(&b, P "read_prefetched_results.__exit__", k, 2, NULL, NULL);
    assert_int_equal(lmc_replay_read_exit(ctx, &exit_, NULL), LMC_OK);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 1);
    assert_int_equal(lmc_replay_read_exit(ctx, &exit_, NULL), LMC_OK);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

static void test_keys_scattered_in_memory_pair_like_keys_in_one_array(void **state)
{
    (void)state;
    lmc_object_key k[2];
    lmc_storage_manager *sm = sm_with_keys(k, 2, 30, 2);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    /* enter: items point into one array in order (the decoder's layout, used in place). */
    built b;
    lmc_trace_record enter = *build(&b, P "read_prefetched_results.__enter__", k, 2, NULL, NULL);
    assert_int_equal(lmc_replay_read_enter(ctx, &enter, NULL), LMC_OK);
    /* exit: the same keys, each a copy somewhere else (copied into the scratch array). */
    lmc_object_key first = k[0], second = k[1];
    lmc_tv scattered[2] = {{.kind = LMC_TV_OBJECT_KEY, .u.key = &first},
                           {.kind = LMC_TV_OBJECT_KEY, .u.key = &second}};
    lmc_trace_arg exit_arg = {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {scattered, 2}}};
    lmc_trace_record exit_ = {.qualname = P "read_prefetched_results.__exit__",
                              .qualname_len = strlen(P "read_prefetched_results.__exit__"),
                              .args = &exit_arg,
                              .nargs = 1};
    /* Reversed, the tuple differs and nothing closes. */
    scattered[0].u.key = &second;
    scattered[1].u.key = &first;
    assert_int_equal(lmc_replay_read_exit(ctx, &exit_, NULL), LMC_OK);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 1);
    scattered[0].u.key = &first;
    scattered[1].u.key = &second;
    assert_int_equal(lmc_replay_read_exit(ctx, &exit_, NULL), LMC_OK);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

static void test_exit_without_enter_only_warns(void **state)
{
    (void)state;
    log_capture cap = {0};
    lmc_log_set_sink(capture_sink, &cap);
    lmc_object_key k[3];
    lmc_storage_manager *sm = sm_with_keys(k, 3, 20, 0);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    lmc_trace_record exit_ = *build(&b, P "read_prefetched_results.__exit__", k, 3, NULL, NULL);
    assert_int_equal(lmc_replay_read_exit(ctx, &exit_, NULL), LMC_OK);
    assert_true(logged(&cap, "with no matching __enter__ (keys=3); ignoring"));
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
    lmc_log_set_sink(NULL, NULL);
}

static void test_dangling_contexts_are_closed_at_the_end(void **state)
{
    (void)state;
    lmc_object_key k[1];
    lmc_storage_manager *sm = sm_with_keys(k, 1, 30, 0);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    lmc_trace_record enter = *build(&b, P "read_prefetched_results.__enter__", k, 1, NULL, NULL);
    lmc_replay_read_enter(ctx, &enter, NULL);
    assert_int_equal(lmc_replay_ctx_close_dangling(ctx), 1);
    assert_int_equal(lmc_replay_ctx_open_reads(ctx), 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

/* ---------------------------------------------------------------------- */
/* Outcomes of each handler                                                */
/* ---------------------------------------------------------------------- */

/* The current outcome's counter c (after the handler ran). */
static uint32_t oc(const lmc_replay_ctx *ctx, lmc_outcome_counter c)
{
    return lmc_replay_ctx_outcome(ctx)->v[c];
}

static void test_reserve_write_outcome_names_every_reason(void **state)
{
    (void)state;
    lmc_object_key k[6];
    lmc_storage_manager *sm = sm_with_keys(k, 6, 100, 2); /* k0, k1 ready */
    lmc_layout_desc lay = sm_test_layout(4096), big = sm_test_layout(8192);
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_sm_reserve_write(sm, &k[2], 1, &lay, LMC_WRITE_NEW, &e, &obj); /* k2 being written */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, &k[1], 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h); /* k1 read-locked */
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;

    /* new: present, present and read-locked, being written, absent. */
    lmc_object_key new_keys[4] = {k[0], k[1], k[2], k[3]};
    assert_int_equal(
        lmc_replay_reserve_write(ctx, build(&b, P "reserve_write", new_keys, 4, &lay, "new"), NULL),
        LMC_OK);
    const lmc_replay_outcome *o = lmc_replay_ctx_outcome(ctx);
    assert_int_equal(o->op, LMC_TRACE_OP_RESERVE_WRITE);
    assert_int_equal(o->n_keys, 4);
    assert_false(o->pending);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_already_present), 2);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_write_locked), 1);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_reserved), 1);
    lmc_sm_finish_write(sm, &k[3], 1, NULL);

    /* all: read-locked, another size, writable in place. */
    lmc_object_key all_keys[2] = {k[1], k[0]};
    assert_int_equal(
        lmc_replay_reserve_write(ctx, build(&b, P "reserve_write", all_keys, 2, &big, "all"), NULL),
        LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_read_locked), 1);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_not_writable), 1);
    /* update: absent. */
    assert_int_equal(
        lmc_replay_reserve_write(ctx, build(&b, P "reserve_write", &k[4], 1, &lay, "update"), NULL),
        LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_absent), 1);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_reserved), 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_finish_read_prefetched(sm, &k[1], 1, 0, NULL);
    lmc_sm_destroy(sm);
}

static void test_reserve_write_outcome_counts_out_of_memory(void **state)
{
    (void)state;
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.001 --eviction-policy LRU");
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    lmc_object_key k[16];
    sm_test_keys(k, 16, 200);
    lmc_layout_desc lay = sm_test_layout(total / 10);
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    assert_int_equal(
        lmc_replay_reserve_write(ctx, build(&b, P "reserve_write", k, 16, &lay, "new"), NULL),
        LMC_OK);
    uint32_t reserved = oc(ctx, LMC_OC_RESERVE_WRITE_reserved);
    assert_true(reserved > 0 && reserved < 16);
    assert_int_equal(oc(ctx, LMC_OC_RESERVE_WRITE_out_of_memory), 16 - reserved);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

static void test_finish_write_outcome_tells_committed_from_not_reserved(void **state)
{
    (void)state;
    lmc_object_key k[3];
    lmc_storage_manager *sm = sm_with_keys(k, 3, 300, 1); /* k0 ready: not reserved */
    lmc_layout_desc lay = sm_test_layout(4096);
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_sm_reserve_write(sm, &k[1], 1, &lay, LMC_WRITE_NEW, &e, &obj); /* reserved */
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    assert_int_equal(
        lmc_replay_finish_write(ctx, build(&b, P "finish_write", k, 3, NULL, NULL), NULL), LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_WRITE_finished), 1);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_WRITE_not_reserved), 1);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_WRITE_not_in_l1), 1);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

typedef struct completions {
    uint64_t index[8];
    lmc_replay_outcome o[8];
    size_t n;
} completions;

static void on_complete(void *ud, uint64_t index, const lmc_replay_outcome *o)
{
    completions *c = ud;
    c->index[c->n] = index;
    c->o[c->n++] = *o;
}

/* A replay context over sm at record index, whose completed outcomes land in c. */
static lmc_replay_ctx *ctx_collecting(lmc_storage_manager *sm, completions *c, uint64_t index)
{
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    lmc_replay_ctx_set_on_complete(ctx, on_complete, c);
    lmc_replay_ctx_begin(ctx, index);
    return ctx;
}

/* A StorageManager over a mock L2 of bandwidth_gb GB/s holding keys in L2 only (L1 cleared). */
static lmc_storage_manager *sm_with_keys_in_l2(const char *bandwidth_gb, const lmc_object_key *k,
                                               size_t n, const lmc_layout_desc *lay)
{
    char json[128];
    snprintf(json, sizeof(json),
             "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": %s}", bandwidth_gb);
    char *argv[] = {"t",   "--l1-size-gb", "0.01", "--eviction-policy",
                    "LRU", "--l2-adapter", json,   NULL};
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    assert_int_equal(sm_test_store(sm, k, n, lay), n);
    assert_true(lmc_sm_wait_idle(sm, 20000));
    assert_int_equal(lmc_sm_clear(sm, false), n);
    return sm;
}

static void test_prefetch_outcome_without_l2_is_final_at_submit(void **state)
{
    (void)state;
    lmc_object_key k[4];
    lmc_storage_manager *sm = sm_with_keys(k, 4, 400, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    sm_test_store(sm, &k[2], 1, &lay); /* hit, miss, hit (after the gap), miss */
    completions c = {0};
    lmc_replay_ctx *ctx = ctx_collecting(sm, &c, 5);
    built b;
    assert_int_equal(lmc_replay_submit_prefetch(
                         ctx, build(&b, P "submit_prefetch_task", k, 4, &lay, NULL), NULL),
                     LMC_OK);
    const lmc_replay_outcome *o = lmc_replay_ctx_outcome(ctx);
    assert_false(o->pending);
    assert_int_equal(o->n_keys, 4);
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_l1_hits), 1); /* PREFIX keeps the leading run */
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_l2_sent), 0);
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_missed), 3);
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_found_prefix), 1);
    assert_int_equal(c.n, 0); /* nothing was pending */
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_finish_read_prefetched(sm, &k[0], 1, 0, NULL);
    lmc_sm_destroy(sm);
}

static void test_prefetch_outcome_with_l2_completes_when_the_result_is_collected(void **state)
{
    (void)state;
    lmc_object_key k[4];
    sm_test_keys(k, 4, 500);
    lmc_layout_desc lay = sm_test_layout(4096);
    lmc_storage_manager *sm = sm_with_keys_in_l2("10", k, 3, &lay);
    sm_test_store(sm, k, 1, &lay); /* k0 in L1 again; k1, k2 only in L2; k3 nowhere */
    completions c = {0};
    lmc_replay_ctx *ctx = ctx_collecting(sm, &c, 9);
    built b;
    assert_int_equal(lmc_replay_submit_prefetch(
                         ctx, build(&b, P "submit_prefetch_task", k, 4, &lay, NULL), NULL),
                     LMC_OK);
    const lmc_replay_outcome *o = lmc_replay_ctx_outcome(ctx);
    assert_true(o->pending);
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_l1_hits), 1);
    assert_int_equal(oc(ctx, LMC_OC_SUBMIT_PREFETCH_l2_sent), 3);
    assert_int_equal(lmc_replay_ctx_drain_prefetches(ctx, 5000), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.index[0], 9);
    assert_false(c.o[0].pending);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_l1_hits], 1);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_l2_hits], 2);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_missed], 1);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_found_prefix], 3);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_unfinished], 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_finish_read_prefetched(sm, k, 3, 0, NULL);
    lmc_sm_destroy(sm);
}

static void test_abandoned_prefetch_outcome_is_unfinished(void **state)
{
    (void)state;
    /* A slow mock (1 MB/s): the load cannot finish before the replay gives up on it. */
    lmc_object_key k[2];
    sm_test_keys(k, 2, 600);
    lmc_layout_desc lay = sm_test_layout(256 * 1024);
    lmc_storage_manager *sm = sm_with_keys_in_l2("0.001", k, 2, &lay);
    completions c = {0};
    lmc_replay_ctx *ctx = ctx_collecting(sm, &c, 3);
    built b;
    lmc_replay_submit_prefetch(ctx, build(&b, P "submit_prefetch_task", k, 2, &lay, NULL), NULL);
    assert_int_equal(lmc_replay_ctx_abandon_prefetches(ctx), 1);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_unfinished], 1);
    assert_int_equal(c.o[0].v[LMC_OC_SUBMIT_PREFETCH_missed], 2);
    assert_int_equal(lmc_replay_ctx_abandon_prefetches(ctx), 0);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

static void test_a_read_before_its_l2_load_finished_counts_as_l2_pending(void **state)
{
    (void)state;
    lmc_object_key k[3];
    sm_test_keys(k, 3, 650);
    lmc_layout_desc lay = sm_test_layout(256 * 1024);
    lmc_storage_manager *sm = sm_with_keys_in_l2("0.001", k, 2, &lay); /* 1 MB/s */
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    lmc_replay_submit_prefetch(ctx, build(&b, P "submit_prefetch_task", k, 3, &lay, NULL), NULL);
    assert_true(lmc_replay_ctx_outcome(ctx)->pending);
    /* The recording's server waited for the load; this read comes at once. */
    const char *enter_q = P "read_prefetched_results.__enter__";
    assert_int_equal(lmc_replay_read_enter(ctx, build(&b, enter_q, k, 3, NULL, NULL), NULL),
                     LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_l2_pending), 3); /* all three went to L2 */
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_found), 0);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_not_in_l1), 0);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_context_ok), 0);
    /* Once the prefetch is given up on, a miss of the same keys is an ordinary one. */
    lmc_replay_ctx_abandon_prefetches(ctx);
    const char *exit_q = P "read_prefetched_results.__exit__";
    lmc_replay_read_exit(ctx, build(&b, exit_q, k, 3, NULL, NULL), NULL);
    assert_int_equal(lmc_replay_read_enter(ctx, build(&b, enter_q, &k[2], 1, NULL, NULL), NULL),
                     LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_not_in_l1), 1);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_destroy(sm);
}

static void test_read_outcomes_name_why_keys_were_not_found(void **state)
{
    (void)state;
    lmc_object_key k[4];
    /* k0 read-locked below, k1 ready without a lock */
    lmc_storage_manager *sm = sm_with_keys(k, 4, 700, 2);
    lmc_layout_desc lay = sm_test_layout(4096);
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_l1_error e;
    lmc_memory_obj obj;
    lmc_sm_reserve_write(sm, &k[2], 1, &lay, LMC_WRITE_NEW, &e, &obj); /* k2 being written */
    lmc_replay_ctx *ctx = lmc_replay_ctx_create(sm);
    built b;
    const char *enter_q = P "read_prefetched_results.__enter__";
    assert_int_equal(lmc_replay_read_enter(ctx, build(&b, enter_q, k, 4, NULL, NULL), NULL),
                     LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_found), 1);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_not_read_locked), 1);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_write_locked), 1);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_not_in_l1), 1);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_context_ok), 0);
    /* Its exit matches, and gives back the one lock the failed read found. */
    const char *exit_q = P "read_prefetched_results.__exit__";
    assert_int_equal(lmc_replay_read_exit(ctx, build(&b, exit_q, k, 4, NULL, NULL), NULL), LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_EXIT_matched), 1);
    assert_int_equal(oc(ctx, LMC_OC_READ_EXIT_released), 1);
    /* Another exit has no enter left. */
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(lmc_replay_read_exit(ctx, build(&b, exit_q, k, 4, NULL, NULL), NULL), LMC_OK);
    lmc_log_set_level(LMC_LOG_INFO);
    assert_int_equal(oc(ctx, LMC_OC_READ_EXIT_matched), 0);
    assert_int_equal(lmc_replay_ctx_outcome(ctx)->op, LMC_TRACE_OP_READ_EXIT);
    /* A read of k0 alone succeeds. */
    lmc_sm_submit_prefetch_task(sm, k, 1, &lay, 0, "r", LMC_TRIM_PREFIX, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    assert_int_equal(lmc_replay_read_enter(ctx, build(&b, enter_q, k, 1, NULL, NULL), NULL),
                     LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_ENTER_context_ok), 1);
    assert_int_equal(lmc_replay_read_exit(ctx, build(&b, exit_q, k, 1, NULL, NULL), NULL), LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_READ_EXIT_released), 0); /* finish_read releases them */
    /* finish_read: k0 released (twice locked), k1 holds no lock, k3 absent. */
    lmc_object_key fr[3] = {k[0], k[1], k[3]};
    assert_int_equal(
        lmc_replay_finish_read(ctx, build(&b, P "finish_read_prefetched", fr, 3, NULL, NULL), NULL),
        LMC_OK);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_READ_released), 1);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_READ_not_read_locked), 1);
    assert_int_equal(oc(ctx, LMC_OC_FINISH_READ_not_in_l1), 1);
    lmc_replay_ctx_destroy(ctx);
    lmc_sm_finish_write(sm, &k[2], 1, NULL);
    lmc_sm_destroy(sm);
}

/* ---------------------------------------------------------------------- */
/* Record, then replay                                                     */
/* ---------------------------------------------------------------------- */

static void record_with_sm(const char *path, const char *flags, void (*body)(lmc_storage_manager *))
{
    lmc_sm_config cfg = config_of(flags);
    lmc_storage_manager *sm;
    assert_int_equal(lmc_sm_create(&cfg, &sm, NULL), LMC_OK);
    char *json;
    char digest[65];
    lmc_sm_config_digest(&cfg, &json, digest);
    lmc_event_bus *bus;
    lmc_event_bus_config bc = {.enabled = true, .max_queue_size = 10000};
    assert_int_equal(lmc_event_bus_create(&bc, &bus, NULL), LMC_OK);
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_maybe_init(bus, "storage", path, json, digest, &r, NULL), LMC_OK);
    lmc_event_bus_start(bus);
    body(sm);
    lmc_event_bus_stop(bus);
    lmc_trace_recorder_destroy(r);
    lmc_trace_capture_set_bus(NULL);
    lmc_event_bus_destroy(bus);
    lmc_sm_destroy(sm);
    free(json);
    lmc_sm_config_free(&cfg);
}

static void store_two(lmc_storage_manager *sm)
{
    lmc_object_key k[2];
    sm_test_keys(k, 2, 40);
    lmc_layout_desc lay = sm_test_layout(4096);
    sm_test_store(sm, k, 2, &lay);
}

typedef struct counts {
    size_t calls, failed, skipped;
} counts;

static void count_records(const lmc_replay_record_view *rec, void *ud)
{
    counts *c = ud;
    c->calls++;
    c->failed += rec->failed;
    c->skipped += rec->skipped;
    assert_int_equal(rec->index, c->calls); /* 1-based, one per report */
}

static void test_reserve_and_finish_write_replay_with_matching_digest(void **state)
{
    fixture *f = *state;
    const char *flags = SMALL_LRU;
    record_with_sm(f->path, flags, store_two);
    lmc_sm_config cfg = config_of(flags);
    counts c = {0};
    lmc_replay_options opt = {.time_scale = 1.0, .on_record = count_records, .ud = &c};
    lmc_replay_result res;
    lmc_error err;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, &err), LMC_OK);
    assert_int_equal(res.failed, 0);
    assert_true(res.replayed >= 2);
    assert_string_equal(res.level, "storage");
    assert_string_equal(res.header_digest, res.replay_digest);
    assert_int_equal(c.calls, res.replayed); /* on_record once per record */
    assert_int_equal(c.failed, 0);
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
}

static void test_the_result_names_the_trace_by_its_file_digest(void **state)
{
    fixture *f = *state;
    const char *flags = SMALL_LRU;
    record_with_sm(f->path, flags, store_two);
    lmc_sm_config cfg = config_of(flags);
    lmc_replay_options opt = {.time_scale = 1.0};
    lmc_replay_result res;
    lmc_error err;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, &err), LMC_OK);
    char want[LMC_TRACE_DIGEST_HEX_LEN + 1];
    assert_int_equal(lmc_trace_file_digest(f->path, want, &err), LMC_OK);
    assert_string_equal(res.trace_digest, want);
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
}

static char *g_fs_dir;

static void full_prefetch_cycle(lmc_storage_manager *sm)
{
    lmc_object_key k[4];
    sm_test_keys(k, 4, 50);
    lmc_layout_desc lay = sm_test_layout(8192);
    sm_test_store(sm, k, 4, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    lmc_sm_clear(sm, false); /* not traced: replay keeps them in L1 */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 4, &lay, 0, "req", LMC_TRIM_PREFIX, &h, NULL);
    lmc_bitmap bm;
    sm_test_wait_prefetch(sm, &h, &bm);
    lmc_bitmap_free(&bm);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 4, &ctx);
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, k, 4, 0, NULL);
    lmc_prefetch_handle_clear(&h);
}

/* SMALL_LRU over an fs L2 adapter in dir. */
static void fs_flags(char *buf, size_t len, const char *dir)
{
    snprintf(buf, len, SMALL_LRU " --l2-adapter {\"type\":\"fs\",\"base_path\":\"%s\"}", dir);
}

static void test_full_prefetch_cycle_with_an_fs_adapter_replays(void **state)
{
    fixture *f = *state;
    g_fs_dir = sm_test_mkdtemp();
    char flags[512];
    fs_flags(flags, sizeof(flags), g_fs_dir);
    record_with_sm(f->path, flags, full_prefetch_cycle);
    char *replay_dir = sm_test_mkdtemp();
    fs_flags(flags, sizeof(flags), replay_dir);
    lmc_sm_config cfg = config_of(flags);
    lmc_replay_options opt = {.time_scale = 1.0};
    lmc_replay_result res;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    assert_int_equal(res.failed, 0);
    assert_int_equal(res.skipped, 0);
    lmc_op_stats *ops;
    size_t n = lmc_replay_stats_summary(res.stats, &ops);
    assert_int_equal(n, 6); /* every op is in the stats */
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
    sm_test_rmdir(replay_dir);
    sm_test_rmdir(g_fs_dir);
}

static void test_unknown_qualnames_are_skipped(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 0.0, 2);
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_dispatcher *empty = lmc_dispatcher_create();
    counts c = {0};
    lmc_replay_options opt = {
        .time_scale = 1.0, .dispatcher = empty, .on_record = count_records, .ud = &c};
    lmc_replay_result res;
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    lmc_log_set_level(LMC_LOG_INFO);
    assert_int_equal(res.replayed, 0);
    assert_int_equal(res.skipped, 2);
    assert_int_equal(c.skipped, 2);
    lmc_replay_result_free(&res);
    lmc_dispatcher_destroy(empty);
    lmc_sm_config_free(&cfg);
}

static void test_a_failing_handler_is_counted_as_failed(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 0.0, 2);
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_dispatcher *d = lmc_dispatcher_create();
    lmc_dispatcher_register(d, P "reserve_write", failing_handler, NULL);
    lmc_dispatcher_register(d, P "finish_write", ok_handler, NULL);
    lmc_replay_options opt = {.time_scale = 1.0, .dispatcher = d};
    lmc_replay_result res;
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    lmc_log_set_level(LMC_LOG_INFO);
    assert_int_equal(res.failed, 1);
    assert_int_equal(res.replayed, 1);
    lmc_op_stats *ops;
    size_t n = lmc_replay_stats_summary(res.stats, &ops);
    bool seen = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ops[i].qualname, P "reserve_write") == 0) {
            assert_int_equal(ops[i].error_count, 1);
            assert_int_equal(ops[i].count, 0);
            seen = true;
        }
    }
    assert_true(seen);
    lmc_replay_stats_free_summary(ops, n);
    lmc_replay_result_free(&res);
    lmc_dispatcher_destroy(d);
    lmc_sm_config_free(&cfg);
}

static double timed_replay(const char *path, double scale)
{
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_replay_options opt = {.time_scale = scale};
    lmc_replay_result res;
    uint64_t t0 = lmc_mono_ns();
    assert_int_equal(lmc_replay_run(&cfg, path, &opt, &res, NULL), LMC_OK);
    double elapsed = (double)(lmc_mono_ns() - t0) / 1e9;
    assert_int_equal(res.failed, 0);
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
    return elapsed;
}

static void test_pacing_honours_the_recorded_gap(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 0.05, 2);
    assert_true(timed_replay(f->path, 1.0) >= 0.04);
}

static void test_time_scale_half_halves_the_gap(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 0.2, 2);
    double full = timed_replay(f->path, 1.0);
    double half = timed_replay(f->path, 0.5);
    assert_true(full >= 0.19);
    assert_true(half >= 0.095);
    assert_true(half < full * 0.8);
}

static void test_time_scale_must_be_finite_and_positive(void **state)
{
    (void)state;
    const double bad[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t i = 0; i < 4; i++) {
        lmc_error err;
        assert_int_equal(lmc_replay_check_time_scale(bad[i], &err), LMC_ERR_INVALID);
        assert_non_null(strstr(err.msg, "--time-scale"));
    }
    assert_int_equal(lmc_replay_check_time_scale(2.0, NULL), LMC_OK);
}

static void test_schema_1_traces_replay_with_a_cache_salt_warning(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 0.0, 1);
    log_capture cap = {0};
    lmc_log_set_sink(capture_sink, &cap);
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_replay_options opt = {.time_scale = 1.0};
    lmc_replay_result res;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    lmc_log_set_sink(NULL, NULL);
    assert_int_equal(res.failed, 0);
    assert_int_equal(res.replayed, 2);
    assert_true(logged(&cap, "cache_salt may be missing"));
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
}

static void test_a_missing_trace_file_is_an_error_naming_it(void **state)
{
    fixture *f = *state;
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_replay_result res;
    lmc_error err;
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/nope.lct", f->dir);
    assert_int_not_equal(lmc_replay_run(&cfg, missing, NULL, &res, &err), LMC_OK);
    assert_non_null(strstr(err.msg, "nope.lct"));
    lmc_sm_config_free(&cfg);
}

/* ---------------------------------------------------------------------- */
/* Outcomes of a whole replay                                              */
/* ---------------------------------------------------------------------- */

/*
 * A full cycle over two keys: store, prefetch, read, finish; flip, when
 * >= 0, toggles one bit of that byte of the second key's chunk hash.
 */
static void write_cycle_trace(const char *path, int flip)
{
    lmc_object_key k[2];
    sm_test_keys(k, 2, 77);
    if (flip >= 0)
        k[1].chunk_hash[flip] ^= 1;
    lmc_layout_desc lay = sm_test_layout(4096);
    tt_trace w;
    tt_trace_begin(&w, 2);
    tt_trace_keys_record(&w, 0.000, P "reserve_write", k, 2, &lay, "new");
    tt_trace_keys_record(&w, 0.001, P "finish_write", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.002, P "submit_prefetch_task", k, 2, &lay, NULL);
    tt_trace_keys_record(&w, 0.003, P "read_prefetched_results.__enter__", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.004, P "read_prefetched_results.__exit__", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.005, P "finish_read_prefetched", k, 2, NULL, NULL);
    tt_trace_end(&w, path);
}

typedef struct views {
    uint64_t index[32];
    lmc_trace_op op[32];
    size_t n;
    const volatile sig_atomic_t *stop_flag;
    size_t stop_after;
    volatile sig_atomic_t *set_stop;
} views;

static void collect_views(const lmc_replay_record_view *rec, void *ud)
{
    views *v = ud;
    if (v->n < 32) {
        v->index[v->n] = rec->index;
        v->op[v->n] = rec->outcome ? rec->outcome->op : LMC_TRACE_OP_NONE;
    }
    v->n++;
    if (v->set_stop != NULL && v->n == v->stop_after)
        *v->set_stop = 1;
}

static void replay_of(const char *path, const char *flags, lmc_replay_options *opt,
                      lmc_replay_result *res)
{
    lmc_sm_config cfg = config_of(flags);
    lmc_error err;
    if (lmc_replay_run(&cfg, path, opt, res, &err) != LMC_OK)
        fail_msg("replay: %s", err.msg);
    lmc_sm_config_free(&cfg);
}

static void test_a_replay_totals_every_outcome_and_reports_records_in_order(void **state)
{
    fixture *f = *state;
    write_cycle_trace(f->path, -1);
    views v = {0};
    lmc_replay_options opt = {.time_scale = 1.0, .on_record = collect_views, .ud = &v};
    lmc_replay_result res;
    replay_of(f->path, SMALL_LRU, &opt, &res);
    assert_int_equal(res.reported, 6);
    assert_int_equal(v.n, 6);
    static const lmc_trace_op ops[6] = {LMC_TRACE_OP_RESERVE_WRITE,   LMC_TRACE_OP_FINISH_WRITE,
                                        LMC_TRACE_OP_SUBMIT_PREFETCH, LMC_TRACE_OP_READ_ENTER,
                                        LMC_TRACE_OP_READ_EXIT,       LMC_TRACE_OP_FINISH_READ};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(v.index[i], i + 1);
        assert_int_equal(v.op[i], ops[i]);
    }
    const lmc_replay_totals *t = &res.totals;
    assert_int_equal(t->v[LMC_OC_RESERVE_WRITE_reserved], 2);
    assert_int_equal(t->v[LMC_OC_FINISH_WRITE_finished], 2);
    assert_int_equal(t->v[LMC_OC_SUBMIT_PREFETCH_l1_hits], 2);
    assert_int_equal(t->v[LMC_OC_READ_ENTER_context_ok], 1);
    assert_int_equal(t->v[LMC_OC_FINISH_READ_released], 2);
    assert_int_equal(t->l1_peak_used_bytes, 2 * 4096);
    assert_true(t->l1_capacity_bytes >= 10000000);
    lmc_replay_figures fig = lmc_replay_figures_of(t);
    assert_true(fig.chunk_hit_rate == 1.0 && fig.read_agreement == 1.0);
    assert_int_equal(strlen(res.outcome_digest), 64);
    assert_false(res.interrupted);
    assert_true(res.last_t_mono - res.first_t_mono > 0.004);
    lmc_replay_result_free(&res);
}

static void test_the_same_trace_gives_one_digest_and_one_changed_key_byte_another(void **state)
{
    fixture *f = *state;
    const char *flags = SMALL_LRU;
    char digest[3][65];
    for (int run = 0; run < 3; run++) {
        write_cycle_trace(f->path, run == 2 ? 5 : -1);
        lmc_replay_options opt = {.time_scale = 1.0};
        lmc_replay_result res;
        replay_of(f->path, flags, &opt, &res);
        assert_int_equal(res.failed, 0);
        memcpy(digest[run], res.outcome_digest, 65);
        lmc_replay_result_free(&res);
    }
    assert_string_equal(digest[0], digest[1]);
    assert_string_not_equal(digest[0], digest[2]);
}

static void test_stop_ends_the_replay_at_the_next_record_with_a_partial_result(void **state)
{
    fixture *f = *state;
    write_cycle_trace(f->path, -1);
    volatile sig_atomic_t stop = 0;
    views v = {.stop_after = 2, .set_stop = &stop};
    lmc_replay_options opt = {
        .time_scale = 1.0, .on_record = collect_views, .ud = &v, .stop = &stop};
    lmc_replay_result res;
    replay_of(f->path, SMALL_LRU, &opt, &res);
    assert_true(res.interrupted);
    assert_int_equal(res.reported, 2);
    assert_int_equal(res.replayed, 2);
    assert_int_equal(v.n, 2);
    assert_int_equal(res.totals.records[LMC_TRACE_OP_SUBMIT_PREFETCH], 0);
    assert_int_equal(strlen(res.outcome_digest), 64); /* the digest of what was replayed */
    lmc_replay_result_free(&res);
}

static void test_a_stop_during_a_long_wait_ends_it_promptly(void **state)
{
    fixture *f = *state;
    write_store_trace(f->path, 30.0, 2); /* the second record is due in 30 s */
    volatile sig_atomic_t stop = 0;
    views v = {.stop_after = 1, .set_stop = &stop};
    lmc_replay_options opt = {
        .time_scale = 1.0, .on_record = collect_views, .ud = &v, .stop = &stop};
    lmc_replay_result res;
    uint64_t t0 = lmc_mono_ns();
    replay_of(f->path, SMALL_LRU, &opt, &res);
    assert_true(lmc_mono_ns() - t0 < 5000000000ull);
    assert_true(res.interrupted);
    assert_int_equal(res.reported, 1);
    lmc_replay_result_free(&res);
}

static void test_a_reused_fs_base_path_turns_recorded_misses_into_l2_hits(void **state)
{
    fixture *f = *state;
    char *dir = sm_test_mkdtemp();
    char json[512];
    snprintf(json, sizeof(json), "{\"type\":\"fs\",\"base_path\":\"%s\"}", dir);
    char *argv[] = {"t",   "--l1-size-gb", "0.01", "--eviction-policy",
                    "LRU", "--l2-adapter", json,   NULL};
    /* An earlier run left the two keys in the base_path. */
    lmc_storage_manager *sm = sm_test_create_argv(7, argv);
    lmc_object_key k[2];
    sm_test_keys(k, 2, 77);
    lmc_layout_desc lay = sm_test_layout(4096);
    sm_test_store(sm, k, 2, &lay);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    lmc_sm_destroy(sm);
    /* A trace that only reads them. */
    tt_trace w;
    tt_trace_begin(&w, 2);
    tt_trace_keys_record(&w, 0.000, P "submit_prefetch_task", k, 2, &lay, NULL);
    tt_trace_keys_record(&w, 0.050, P "read_prefetched_results.__enter__", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.051, P "read_prefetched_results.__exit__", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.052, P "finish_read_prefetched", k, 2, NULL, NULL);
    tt_trace_end(&w, f->path);
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    assert_int_equal(lmc_sm_config_parse_all(&cfg, 7, argv, NULL), LMC_OK);
    lmc_replay_options opt = {.time_scale = 1.0};
    lmc_replay_result res;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    assert_int_equal(res.totals.v[LMC_OC_SUBMIT_PREFETCH_l2_sent], 2);
    assert_int_equal(res.totals.v[LMC_OC_SUBMIT_PREFETCH_l2_hits], 2);
    assert_int_equal(res.totals.v[LMC_OC_READ_ENTER_context_ok], 1);
    assert_int_equal(res.totals.sm.l2_loaded_keys, 2);
    assert_int_equal(res.totals.sm.l2_loaded_bytes, 2 * 4096);
    lmc_replay_result_free(&res);
    /* --clear-l2's scan removes them: the same replay now misses. */
    lmc_l2_fs_objects o;
    assert_int_equal(lmc_l2_fs_scan(cfg.l2_adapters[0], true, &o, NULL), LMC_OK);
    assert_int_equal(o.removed, 2);
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, NULL), LMC_OK);
    assert_int_equal(res.totals.v[LMC_OC_SUBMIT_PREFETCH_l2_hits], 0);
    assert_int_equal(res.totals.v[LMC_OC_SUBMIT_PREFETCH_missed], 2);
    assert_int_equal(res.totals.v[LMC_OC_READ_ENTER_not_in_l1], 2);
    lmc_replay_figures fig = lmc_replay_figures_of(&res.totals);
    assert_true(fig.read_agreement == 0.0);
    lmc_replay_result_free(&res);
    lmc_sm_config_free(&cfg);
    sm_test_rmdir(dir);
}

static void test_the_summary_names_the_config_fields_that_differ(void **state)
{
    fixture *f = *state;
    record_with_sm(f->path, SMALL_LRU, store_two);
    lmc_replay_options opt = {.time_scale = 1.0};
    lmc_replay_result res;
    replay_of(f->path, "--l1-size-gb 0.02 --eviction-policy ARC", &opt, &res);
    assert_string_not_equal(res.header_digest, res.replay_digest);
    lmc_replay_summary sum;
    assert_int_equal(lmc_replay_summary_init(&sum, &res, 1.0), LMC_OK);
    bool policy = false, size = false;
    for (size_t i = 0; i < sum.n_config_diffs; i++) {
        policy |= strcmp(sum.config_diffs[i], "eviction_config.eviction_policy") == 0;
        size |= strcmp(sum.config_diffs[i], "l1_manager_config.memory_config.size_in_bytes") == 0;
    }
    assert_true(policy);
    assert_true(size);
    lmc_replay_summary_free(&sum);
    lmc_replay_result_free(&res);
    /* The recorded config: no differences. */
    replay_of(f->path, SMALL_LRU, &opt, &res);
    assert_int_equal(lmc_replay_summary_init(&sum, &res, 1.0), LMC_OK);
    assert_int_equal(sum.n_config_diffs, 0);
    lmc_replay_summary_free(&sum);
    lmc_replay_result_free(&res);
}

/* ---------------------------------------------------------------------- */
/* Issue 13: counts as LMCache's, strict handler arguments, the time rule  */
/* ---------------------------------------------------------------------- */

/* A raw frame around hex body bytes. */
static void writer_raw(tt_trace *w, const char *hex)
{
    size_t n = strlen(hex) / 2, j = 0;
    uint8_t *body = malloc(n + 4);
    for (const char *p = hex; p[0] && p[1]; p += 2) {
        if (*p == ' ') {
            p--;
            continue;
        }
        unsigned v;
        sscanf(p, "%2x", &v);
        body[4 + j++] = (uint8_t)v;
    }
    body[0] = (uint8_t)(j >> 24);
    body[1] = (uint8_t)(j >> 16);
    body[2] = (uint8_t)(j >> 8);
    body[3] = (uint8_t)j;
    msgpack_sbuffer_write(&w->buf, (const char *)body, j + 4);
    free(body);
}

/* A record of qualname with the given args, at t_mono. */
static void writer_args(tt_trace *w, double t_mono, const char *qualname, size_t qlen,
                        const lmc_trace_arg *args, size_t n)
{
    assert_int_equal(lmc_trace_encode_record(&w->buf, t_mono, 1700000000.0 + t_mono, qualname, qlen,
                                             args, n, NULL),
                     LMC_OK);
}

static lmc_replay_result replay_quietly(const char *path, double scale, log_capture *logs)
{
    lmc_sm_config cfg = config_of(SMALL_LRU);
    lmc_replay_options opt = {.time_scale = scale};
    lmc_replay_result res;
    if (logs != NULL)
        lmc_log_set_sink(capture_sink, logs);
    assert_int_equal(lmc_replay_run(&cfg, path, &opt, &res, NULL), LMC_OK);
    lmc_log_set_sink(NULL, NULL);
    lmc_sm_config_free(&cfg);
    return res;
}

static void test_malformed_frames_are_counted_apart_from_skipped_records(void **state)
{
    fixture *f = *state;
    lmc_object_key k[2];
    sm_test_keys(k, 2, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    tt_trace w;
    tt_trace_begin(&w, 2);
    tt_trace_keys_record(&w, 0.0, P "reserve_write", k, 2, &lay, "new");
    /* malformed: t_mono is a str, then trailing bytes after a whole record */
    writer_raw(&w,
               "84 a6745f6d6f6e6f a178 a6745f77616c6c 01 a87175616c6e616d65 a171 a461726773 80");
    writer_raw(&w,
               "84 a6745f6d6f6e6f 01 a6745f77616c6c 01 a87175616c6e616d65 a171 a461726773 80 c0");
    /* a record whose args do not decode (an unknown codec tag): skipped, as LMCache skips it */
    writer_raw(&w, "84 a6745f6d6f6e6f 01 a6745f77616c6c 01 a87175616c6e616d65 d942"
                   "6c6d63616368652e76312e64697374726962757465642e73746f726167655f6d616e616765722e5"
                   "3746f726167654d616e616765722e66696e6973685f7772697465"
                   " a461726773 81 a46b657973 82 a55f5f745f5f a44e6f7065 a176 01");
    /* no handler */
    tt_trace_keys_record(&w, 0.0, "lmcache.v1.some.future.Op.call", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, 0.0, P "finish_write", k, 2, NULL, NULL);
    tt_trace_end(&w, f->path);
    log_capture logs = {0};
    lmc_replay_result res = replay_quietly(f->path, 1.0, &logs);
    assert_int_equal(res.replayed, 2);
    assert_int_equal(res.skipped, 2);
    assert_int_equal(res.malformed, 2);
    assert_int_equal(res.failed, 0);
    assert_true(logged(&logs, "failed to decode args for " P "finish_write; skipping"));
    assert_true(logged(&logs, "unknown tag 'Nope'"));
    assert_true(logged(&logs, "no handler for qualname 'lmcache.v1.some.future.Op.call'"));
    lmc_replay_result_free(&res);
}

static void test_a_qualname_holding_nul_matches_no_handler(void **state)
{
    fixture *f = *state;
    lmc_object_key k[1];
    sm_test_keys(k, 1, 1);
    lmc_tv item = {.kind = LMC_TV_OBJECT_KEY, .u.key = &k[0]};
    lmc_trace_arg args[1] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {&item, 1}}}};
    static const char q[] = P "finish_write\0evil";
    tt_trace w;
    tt_trace_begin(&w, 2);
    writer_args(&w, 0.0, q, sizeof(q) - 1, args, 1);
    tt_trace_end(&w, f->path);
    log_capture logs = {0};
    lmc_replay_result res = replay_quietly(f->path, 1.0, &logs);
    assert_int_equal(res.replayed, 0);
    assert_int_equal(res.skipped, 1);
    assert_true(logged(&logs, "no handler for qualname '" P "finish_write\\x00evil'"));
    lmc_replay_result_free(&res);
}

static void test_handler_arguments_are_as_strict_as_python_keywords(void **state)
{
    fixture *f = *state;
    lmc_object_key k[1];
    sm_test_keys(k, 1, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    lmc_tv item = {.kind = LMC_TV_OBJECT_KEY, .u.key = &k[0]};
    lmc_tv keys = {.kind = LMC_TV_LIST, .u.list = {&item, 1}};
    lmc_tv layout = {.kind = LMC_TV_LAYOUT, .u.layout = &lay};
    char long_id[1001];
    memset(long_id, 'r', 1000);
    long_id[1000] = '\0';
    tt_trace w;
    tt_trace_begin(&w, 2);
    lmc_trace_arg no_mode[2] = {{"keys", 4, keys}, {"layout_desc", 11, layout}};
    writer_args(&w, 0.0, P "reserve_write", strlen(P "reserve_write"), no_mode, 2);
    lmc_trace_arg extra[2] = {{"keys", 4, keys}, {"bogus", 5, lmc_tv_int(1)}};
    writer_args(&w, 0.0, P "finish_write", strlen(P "finish_write"), extra, 2);
    lmc_trace_arg nul_id[3] = {{"keys", 4, keys},
                               {"layout_desc", 11, layout},
                               {"external_request_id", 19, lmc_tv_str("a\0b", 3)}};
    writer_args(&w, 0.0, P "submit_prefetch_task", strlen(P "submit_prefetch_task"), nul_id, 3);
    lmc_trace_arg long_ok[3] = {{"keys", 4, keys},
                                {"layout_desc", 11, layout},
                                {"external_request_id", 19, lmc_tv_str(long_id, 1000)}};
    writer_args(&w, 0.0, P "submit_prefetch_task", strlen(P "submit_prefetch_task"), long_ok, 3);
    tt_trace_end(&w, f->path);
    log_capture logs = {0};
    lmc_replay_result res = replay_quietly(f->path, 1.0, &logs);
    assert_int_equal(res.failed, 3);
    assert_int_equal(res.replayed, 1); /* the 1000-character request id is kept whole */
    assert_true(logged(&logs, "reserve_write: missing required argument 'mode'"));
    assert_true(logged(&logs, "finish_write: unexpected argument 'bogus'"));
    assert_true(logged(&logs, "argument 'external_request_id' holds a NUL byte"));
    lmc_replay_result_free(&res);
}

static void test_impossible_times_never_stall_the_replay(void **state)
{
    fixture *f = *state;
    lmc_object_key k[2];
    sm_test_keys(k, 2, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    tt_trace w;
    tt_trace_begin(&w, 2);
    tt_trace_keys_record(&w, 0.0, P "reserve_write", k, 2, &lay, "new");
    tt_trace_keys_record(&w, 1e9, P "finish_write", k, 2, NULL, NULL); /* a flipped exponent bit */
    tt_trace_keys_record(&w, 0.01, P "reserve_write", k, 2, &lay, "all");
    tt_trace_keys_record(&w, 1e300, P "finish_write", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, INFINITY, P "finish_write", k, 2, NULL, NULL);
    tt_trace_keys_record(&w, -5.0, P "finish_write", k, 2, NULL, NULL);
    tt_trace_end(&w, f->path);
    log_capture logs = {0};
    uint64_t t0 = lmc_mono_ns();
    /* At scale 1e-3 each capped gap (a minute) is 60 ms. */
    lmc_replay_result res = replay_quietly(f->path, 1e-3, &logs);
    double elapsed = (double)(lmc_mono_ns() - t0) / 1e9;
    assert_true(elapsed < 10.0);
    assert_int_equal(res.replayed, 6);
    assert_true(logged(&logs, "has t_mono 1.000e+09"));
    assert_true(logged(&logs, "which is not a finite number"));
    assert_true(logged(&logs, "the time rule moved 4 record(s)"));
    lmc_replay_result_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatcher_registers_and_rejects_duplicates),
        cmocka_unit_test(test_default_dispatcher_has_exactly_the_six_qualnames),
        cmocka_unit_test(test_dispatcher_qualnames_tells_none_from_a_short_buffer),
        cmocka_unit_test(test_read_contexts_pair_first_in_first_out),
        cmocka_unit_test(test_keys_scattered_in_memory_pair_like_keys_in_one_array),
        cmocka_unit_test(test_exit_without_enter_only_warns),
        cmocka_unit_test(test_dangling_contexts_are_closed_at_the_end),
        cmocka_unit_test(test_reserve_write_outcome_names_every_reason),
        cmocka_unit_test(test_reserve_write_outcome_counts_out_of_memory),
        cmocka_unit_test(test_finish_write_outcome_tells_committed_from_not_reserved),
        cmocka_unit_test(test_prefetch_outcome_without_l2_is_final_at_submit),
        cmocka_unit_test(test_prefetch_outcome_with_l2_completes_when_the_result_is_collected),
        cmocka_unit_test(test_abandoned_prefetch_outcome_is_unfinished),
        cmocka_unit_test(test_a_read_before_its_l2_load_finished_counts_as_l2_pending),
        cmocka_unit_test(test_read_outcomes_name_why_keys_were_not_found),
        cmocka_unit_test_setup_teardown(test_reserve_and_finish_write_replay_with_matching_digest,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_result_names_the_trace_by_its_file_digest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_full_prefetch_cycle_with_an_fs_adapter_replays, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_qualnames_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_handler_is_counted_as_failed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pacing_honours_the_recorded_gap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_scale_half_halves_the_gap, setup, teardown),
        cmocka_unit_test(test_time_scale_must_be_finite_and_positive),
        cmocka_unit_test_setup_teardown(
            test_malformed_frames_are_counted_apart_from_skipped_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_qualname_holding_nul_matches_no_handler, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_handler_arguments_are_as_strict_as_python_keywords,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_impossible_times_never_stall_the_replay, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_schema_1_traces_replay_with_a_cache_salt_warning,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_missing_trace_file_is_an_error_naming_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_replay_totals_every_outcome_and_reports_records_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_the_same_trace_gives_one_digest_and_one_changed_key_byte_another, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_stop_ends_the_replay_at_the_next_record_with_a_partial_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stop_during_a_long_wait_ends_it_promptly, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_reused_fs_base_path_turns_recorded_misses_into_l2_hits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_summary_names_the_config_fields_that_differ, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
