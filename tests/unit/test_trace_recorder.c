/*
 * test_trace_recorder.c -- capture and recording (seed section 11,
 * capture): the gate, argument capture at the StorageManager entry points,
 * the deferred header, records through the event bus to the file and back
 * through the reader, drops, write errors and the lifecycle helper.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/file_test_util.h"
#include "helpers/sm_test_util.h"
#include "lmcache/storage_manager.h"
#include "obs/event_bus.h"
#include "trace/capture.h"
#include "trace/codec.h"
#include "trace/format.h"
#include "trace/lifecycle.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define P LMC_TRACE_QUALNAME_PREFIX

typedef struct fixture {
    char *dir;
    char path[512];
    lmc_event_bus *bus;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = sm_test_mkdtemp();
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = 100000};
    assert_int_equal(lmc_event_bus_create(&cfg, &f->bus, NULL), LMC_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_trace_capture_set_bus(NULL);
    lmc_trace_set_enabled(false);
    lmc_event_bus_destroy(f->bus);
    sm_test_rmdir(f->dir);
    free(f);
    return 0;
}

/* One captured call with keys only (the gate may be off: tests call the capture directly). */
static void capture_keys(lmc_trace_op op, const lmc_object_key *keys, size_t n)
{
    lmc_trace_capture(op, &(const lmc_trace_capture_args){.keys = keys, .n_keys = n});
}

/* Open a recorder on the fixture's bus, as the lifecycle helper does. */
static lmc_trace_recorder *record_to(fixture *f)
{
    lmc_trace_recorder *r;
    assert_int_equal(
        lmc_trace_maybe_init(f->bus, "storage", f->path, "{\"a\": 1}", "abc", &r, NULL), LMC_OK);
    assert_non_null(r);
    assert_int_equal(lmc_event_bus_start(f->bus), LMC_OK);
    return r;
}

/* Stop the bus: final drain, then the recorder's shutdown closes the file. */
static void finish(fixture *f, lmc_trace_recorder *r)
{
    lmc_event_bus_stop(f->bus);
    assert_true(lmc_trace_recorder_closed(r));
    lmc_trace_recorder_destroy(r);
}

static lmc_trace_reader *open_reader(const char *path)
{
    lmc_trace_reader *rd;
    lmc_error err;
    if (lmc_trace_reader_open(path, &rd, &err) != LMC_OK)
        fail_msg("reader: %s", err.msg);
    return rd;
}

static const lmc_tv *arg(const lmc_trace_record *rec, const char *name)
{
    const lmc_trace_arg *a = lmc_trace_args_find(rec->args, rec->nargs, name);
    if (a == NULL)
        fail_msg("record %s lacks arg %s", rec->qualname, name);
    return &a->value;
}

static void assert_arg_names(const lmc_trace_record *rec, const char *const *names, size_t n)
{
    assert_int_equal(rec->nargs, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(rec->args[i].name, names[i]);
}

static void test_gate_is_off_by_default_and_nothing_is_published(void **state)
{
    fixture *f = *state;
    assert_false(lmc_trace_enabled());
    lmc_trace_capture_set_bus(f->bus);
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[2];
    sm_test_keys(k, 2, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    sm_test_store(sm, k, 2, &lay);
    assert_int_equal(lmc_event_bus_queued(f->bus), 0);
    assert_int_equal(lmc_event_bus_dropped(f->bus), 0);
    lmc_sm_destroy(sm);
}

static void test_open_turns_the_gate_on_and_close_turns_it_off(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    assert_true(lmc_trace_enabled());
    lmc_trace_recorder_close(r);
    assert_false(lmc_trace_enabled());
    lmc_trace_recorder_close(r); /* idempotent */
    lmc_trace_recorder_destroy(r);
}

static void test_header_with_attached_config_round_trips(void **state)
{
    fixture *f = *state;
    double before = lmc_wall_s();
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    lmc_trace_recorder_attach_config(r, "{\"x\": 1}",
                                     "0123456789abcdef0123456789abcdef"
                                     "0123456789abcdef0123456789abcdef");
    lmc_trace_recorder_attach_config(r, "{\"ignored\": 2}", "ff"); /* first call wins */
    lmc_trace_recorder_destroy(r);
    lmc_trace_reader *rd = open_reader(f->path);
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    assert_memory_equal(h->magic, "LMCT", 4);
    assert_int_equal(h->format_version, 1);
    assert_int_equal(h->trace_schema_version, 2);
    assert_string_equal(h->level, "storage");
    assert_string_equal(h->sm_config_json, "{\"x\": 1}");
    assert_int_equal(strlen(h->sm_config_digest), 64);
    assert_true(h->t_mono_start > 0);
    assert_true(h->t_wall_start >= before - 1);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(rd);
}

static void test_header_without_attach_has_empty_config(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    lmc_trace_recorder_destroy(r);
    lmc_trace_reader *rd = open_reader(f->path);
    assert_string_equal(lmc_trace_reader_header(rd)->sm_config_json, "");
    assert_string_equal(lmc_trace_reader_header(rd)->sm_config_digest, "");
    lmc_trace_reader_close(rd);
}

static void test_trace_file_is_created_with_mode_0600(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    lmc_trace_recorder_destroy(r);
}

static void test_storage_manager_calls_are_recorded_with_their_arguments(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[3];
    sm_test_keys(k, 3, 100);
    lmc_layout_desc lay = sm_test_layout(4096);
    sm_test_store(sm, k, 3, &lay); /* reserve_write + finish_write */
    lmc_prefetch_handle h;
    lmc_sm_submit_prefetch_task(sm, k, 3, &lay, 2, "req-7", LMC_TRIM_SPARSE, &h, NULL);
    lmc_prefetch_handle_clear(&h);
    lmc_sm_read_ctx ctx;
    lmc_sm_read_prefetched_enter(sm, k, 3, &ctx);
    lmc_sm_read_prefetched_exit(sm, &ctx, false);
    lmc_sm_finish_read_prefetched(sm, k, 3, 2, NULL);
    lmc_sm_destroy(sm);
    finish(f, r);

    lmc_trace_reader *rd = open_reader(f->path);
    assert_string_equal(lmc_trace_reader_header(rd)->sm_config_json, "{\"a\": 1}");
    lmc_trace_record rec;
    static const char *const rw[] = {"keys", "layout_desc", "mode"};
    static const char *const sp[] = {"keys", "layout_desc", "extra_count", "external_request_id",
                                     "policy"};
    static const char *const fr[] = {"keys", "extra_count"};
    static const char *const ko[] = {"keys"};

    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "reserve_write");
    assert_arg_names(&rec, rw, 3);
    const lmc_tv *keys = arg(&rec, "keys");
    assert_int_equal(keys->kind, LMC_TV_LIST);
    assert_int_equal(keys->u.list.n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(keys->u.list.items[i].kind, LMC_TV_OBJECT_KEY);
        assert_true(lmc_object_key_equal(keys->u.list.items[i].u.key, &k[i]));
    }
    assert_true(lmc_layout_desc_equal(arg(&rec, "layout_desc")->u.layout, &lay));
    assert_int_equal(arg(&rec, "mode")->u.s.len, 3);
    assert_memory_equal(arg(&rec, "mode")->u.s.ptr, "new", 3);
    double t0 = rec.t_mono;

    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "finish_write");
    assert_arg_names(&rec, ko, 1);
    assert_true(rec.t_mono >= t0);

    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "submit_prefetch_task");
    assert_arg_names(&rec, sp, 5);
    assert_int_equal(arg(&rec, "extra_count")->u.i, 2);
    assert_memory_equal(arg(&rec, "external_request_id")->u.s.ptr, "req-7", 5);
    assert_int_equal(arg(&rec, "policy")->kind, LMC_TV_TRIM_POLICY);
    assert_int_equal(arg(&rec, "policy")->u.trim, LMC_TRIM_SPARSE);

    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "read_prefetched_results.__enter__");
    assert_arg_names(&rec, ko, 1);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "read_prefetched_results.__exit__");
    assert_arg_names(&rec, ko, 1);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "finish_read_prefetched");
    assert_arg_names(&rec, fr, 2);
    assert_int_equal(arg(&rec, "extra_count")->u.i, 2);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    assert_int_equal(lmc_trace_reader_records(rd), 6);
    lmc_trace_reader_close(rd);
}

/* A small ring, so that captures wrap around its end and take the
 * piecewise path as well as the direct one: both record the same. */
static void test_captures_across_the_ring_end_record_their_arguments(void **state)
{
    fixture *f = *state;
    lmc_event_bus_destroy(f->bus);
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = 64, .ring_bytes = 4096};
    assert_int_equal(lmc_event_bus_create(&cfg, &f->bus, NULL), LMC_OK);
    lmc_trace_recorder *r = record_to(f);
    enum { CALLS = 12 };
    lmc_object_key k[5];
    sm_test_keys(k, 5, 300);
    lmc_layout_desc lay = sm_test_layout(4096);
    for (int i = 0; i < CALLS; i++) {
        /* 1..5 keys: events of several sizes, so they meet the ring end at several offsets. */
        size_t n = (size_t)(i % 5) + 1;
        lmc_trace_capture(LMC_TRACE_OP_SUBMIT_PREFETCH,
                          &(const lmc_trace_capture_args){.keys = k,
                                                          .n_keys = n,
                                                          .layout = &lay,
                                                          .extra_count = (uint32_t)i,
                                                          .external_request_id = "req-wrap",
                                                          .policy = LMC_TRIM_SPARSE});
        /* One event in the ring at a time: drained before the next comes. */
        uint64_t deadline = lmc_mono_ns() + 5000000000ull;
        while (lmc_event_bus_delivered(f->bus) < (uint64_t)i + 1 && lmc_mono_ns() < deadline)
            lmc_sleep_ns(100000);
    }
    assert_int_equal(lmc_event_bus_dropped(f->bus), 0);
    finish(f, r);

    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    for (int i = 0; i < CALLS; i++) {
        assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
        assert_string_equal(rec.qualname, P "submit_prefetch_task");
        const lmc_tv *keys = arg(&rec, "keys");
        size_t n = (size_t)(i % 5) + 1;
        assert_int_equal(keys->u.list.n, n);
        for (size_t j = 0; j < n; j++)
            assert_true(lmc_object_key_equal(keys->u.list.items[j].u.key, &k[j]));
        assert_true(lmc_layout_desc_equal(arg(&rec, "layout_desc")->u.layout, &lay));
        assert_int_equal(arg(&rec, "extra_count")->u.i, i);
        assert_int_equal(arg(&rec, "external_request_id")->u.s.len, 8);
        assert_memory_equal(arg(&rec, "external_request_id")->u.s.ptr, "req-wrap", 8);
        assert_int_equal(arg(&rec, "policy")->u.trim, LMC_TRIM_SPARSE);
    }
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(rd);
}

/* Payload lengths of the TRACE_CALL events delivered (see the next test). */
typedef struct seen_lens {
    size_t len[8];
    size_t n;
} seen_lens;

static void note_len(const lmc_event *ev, void *ud)
{
    seen_lens *s = ud;
    if (s->n < 8)
        s->len[s->n++] = ev->len;
}

static void test_capture_bytes_is_the_length_of_the_event_a_capture_publishes(void **state)
{
    fixture *f = *state;
    seen_lens seen = {0};
    assert_int_equal(lmc_event_bus_subscribe(f->bus, LMC_EVENT_TRACE_CALL, note_len, &seen),
                     LMC_OK);
    lmc_trace_capture_set_bus(f->bus);
    lmc_object_key k[16];
    sm_test_keys(k, 16, 400);
    lmc_layout_desc one = sm_test_layout(4096);
    const lmc_shape shapes[2] = {{.ndim = 2, .dims = {2, 8}}, {.ndim = 1, .dims = {16}}};
    const lmc_dtype dtypes[2] = {LMC_DTYPE_BFLOAT16, LMC_DTYPE_FLOAT32};
    lmc_layout_desc two;
    assert_int_equal(lmc_layout_desc_make(&two, shapes, 2, dtypes, 2, NULL), LMC_OK);
    /* Keys only, none, a layout, two tensors, an id of each padding. */
    const lmc_trace_capture_args cases[] = {
        {.keys = k, .n_keys = 16},
        {.n_keys = 0},
        {.keys = k, .n_keys = 1, .layout = &one, .mode = 1},
        {.keys = k, .n_keys = 3, .layout = &two},
        {.keys = k, .n_keys = 2, .external_request_id = "r"},
        {.keys = k, .n_keys = 2, .external_request_id = "req-0008"},
        {.keys = k, .n_keys = 16, .layout = &one, .external_request_id = "a-longer-request-id"},
    };
    size_t n = sizeof(cases) / sizeof(cases[0]);
    for (size_t i = 0; i < n; i++)
        lmc_trace_capture(LMC_TRACE_OP_SUBMIT_PREFETCH, &cases[i]);
    lmc_event_bus_stop(f->bus); /* the final drain delivers them all */
    assert_int_equal(seen.n, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seen.len[i], lmc_trace_capture_bytes(&cases[i]));
    /* 16 keys: the keys, behind a header that is a multiple of 8 bytes. */
    assert_true(seen.len[0] > 16 * sizeof(lmc_object_key));
    assert_int_equal((seen.len[0] - 16 * sizeof(lmc_object_key)) % 8, 0);
}

static void test_a_failing_call_is_still_recorded_on_entry(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_storage_manager *sm = sm_test_create("--l1-size-gb 0.01 --eviction-policy LRU");
    lmc_object_key k[1];
    sm_test_keys(k, 1, 200);
    lmc_l1_error e;
    lmc_sm_finish_write(sm, k, 1, &e); /* nothing reserved: fails */
    assert_int_equal(e, LMC_L1_KEY_NOT_EXIST);
    lmc_sm_destroy(sm);
    finish(f, r);
    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, P "finish_write");
    lmc_trace_reader_close(rd);
}

static void test_truncated_tail_reads_the_complete_records(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_object_key k[2];
    sm_test_keys(k, 2, 300);
    capture_keys(LMC_TRACE_OP_FINISH_WRITE, k, 2);
    capture_keys(LMC_TRACE_OP_FINISH_WRITE, k, 2);
    finish(f, r);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(truncate(f->path, st.st_size - 3), 0);
    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    assert_true(lmc_trace_reader_truncated(rd));
    lmc_trace_reader_close(rd);
}

static void test_unencodable_argument_is_dropped_and_counted(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    lmc_tv odd = {.kind = LMC_TV_KIND_MAX - 1}; /* no codec registered */
    lmc_trace_arg bad = {"x", 1, odd};
    lmc_trace_arg good = {"x", 1, lmc_tv_int(1)};
    lmc_log_set_level(LMC_LOG_ERROR);
    lmc_trace_recorder_write_record(r, "a.b", &bad, 1, lmc_wall_s(), lmc_mono_s());
    lmc_log_set_level(LMC_LOG_INFO);
    lmc_trace_recorder_write_record(r, "a.c", &good, 1, lmc_wall_s(), lmc_mono_s());
    assert_int_equal(lmc_trace_recorder_dropped(r), 1);
    lmc_trace_recorder_destroy(r);

    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, "a.c");
    /* The drop is stored in the file as a final record of its own. */
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, LMC_TRACE_DROPPED_QUALNAME);
    assert_int_equal(arg(&rec, "dropped_count")->u.i, 1);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(rd);
}

static void test_bus_stop_alone_flushes_and_closes_the_file(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_object_key k[1];
    sm_test_keys(k, 1, 400);
    capture_keys(LMC_TRACE_OP_READ_ENTER, k, 1);
    lmc_event_bus_stop(f->bus);
    assert_true(lmc_trace_recorder_closed(r));
    assert_false(lmc_trace_enabled());
    assert_int_equal(lmc_trace_recorder_records(r), 1);
    lmc_trace_recorder_destroy(r);
    uint64_t n;
    assert_int_equal(lmc_trace_count_records(f->path, &n, NULL), LMC_OK);
    assert_int_equal(n, 1);
}

/* 4 threads x 10,000 calls: every record once, each thread's order kept. */
typedef struct thread_arg {
    uint32_t id;
} thread_arg;

#define CALLS_PER_THREAD 10000

static void *traced_calls(void *p)
{
    thread_arg *a = p;
    for (uint32_t i = 0; i < CALLS_PER_THREAD; i++) {
        uint8_t h[8];
        memcpy(h, &a->id, 4);
        memcpy(h + 4, &i, 4);
        lmc_object_key k;
        lmc_object_key_make(&k, h, sizeof(h), "m", 0, 0, "", NULL);
        capture_keys(LMC_TRACE_OP_FINISH_WRITE, &k, 1);
    }
    return NULL;
}

static void test_four_threads_every_record_once_in_thread_order(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    pthread_t t[4];
    thread_arg a[4];
    for (uint32_t i = 0; i < 4; i++) {
        a[i].id = i;
        pthread_create(&t[i], NULL, traced_calls, &a[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    finish(f, r);

    lmc_trace_reader *rd = open_reader(f->path);
    uint32_t next[4] = {0};
    lmc_trace_record rec;
    size_t total = 0;
    while (lmc_trace_reader_next(rd, &rec) == LMC_OK) {
        const lmc_tv *keys = arg(&rec, "keys");
        const lmc_object_key *k = keys->u.list.items[0].u.key;
        uint32_t id, seq;
        memcpy(&id, k->chunk_hash, 4);
        memcpy(&seq, k->chunk_hash + 4, 4);
        assert_true(id < 4);
        assert_int_equal(seq, next[id]);
        next[id]++;
        total++;
    }
    assert_int_equal(total, 4 * CALLS_PER_THREAD);
    lmc_trace_reader_close(rd);
}

static void test_queue_overflow_is_counted_exactly(void **state)
{
    fixture *f = *state;
    lmc_event_bus *small;
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = 5};
    assert_int_equal(lmc_event_bus_create(&cfg, &small, NULL), LMC_OK);
    lmc_trace_recorder *r;
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(lmc_trace_maybe_init(small, "storage", f->path, "", "", &r, NULL), LMC_OK);
    lmc_object_key k[1];
    sm_test_keys(k, 1, 500);
    for (int i = 0; i < 10; i++) /* the bus is not started: nothing drains */
        capture_keys(LMC_TRACE_OP_FINISH_WRITE, k, 1);
    assert_int_equal(lmc_event_bus_dropped(small), 5);
    lmc_event_bus_stop(small); /* final drain: 5 records */
    lmc_log_set_level(LMC_LOG_INFO);
    assert_int_equal(lmc_trace_recorder_records(r), 5);
    assert_int_equal(lmc_trace_recorder_dropped(r), 5);
    lmc_trace_recorder_destroy(r);
    lmc_trace_capture_set_bus(NULL);
    lmc_event_bus_destroy(small);

    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    for (int i = 0; i < 5; i++)
        assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, LMC_TRACE_DROPPED_QUALNAME);
    assert_int_equal(arg(&rec, "dropped_count")->u.i, 5);
    lmc_trace_reader_close(rd);
}

static void test_write_errors_are_counted_and_the_process_goes_on(void **state)
{
    (void)state;
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open("/dev/full", "storage", true, &r, NULL), LMC_OK);
    lmc_log_set_level(LMC_LOG_OFF);
    lmc_trace_arg a = {"x", 1, lmc_tv_int(7)};
    for (int i = 0; i < 3; i++)
        lmc_trace_recorder_write_record(r, "a.b", &a, 1, lmc_wall_s(), lmc_mono_s());
    lmc_trace_recorder_flush(r);
    assert_int_equal(lmc_trace_recorder_dropped(r), 3);
    assert_int_equal(lmc_trace_recorder_records(r), 0);
    lmc_trace_recorder_destroy(r);
    lmc_log_set_level(LMC_LOG_INFO);
}

/*
 * A write that fails before anything is in the file takes the header with
 * it; the next batch goes out with a header (empty config) in front, and
 * the file reads. The first write is made to fail with a file-size limit
 * (EFBIG after a short write, SIGXFSZ ignored).
 */
static void test_a_header_lost_to_a_failed_write_is_written_again(void **state)
{
    fixture *f = *state;
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    lmc_trace_recorder *r;
    assert_int_equal(lmc_trace_recorder_open(f->path, "storage", true, &r, NULL), LMC_OK);
    lmc_trace_arg a = {"x", 1, lmc_tv_int(7)};
    lmc_log_set_level(LMC_LOG_OFF);
    struct rlimit small = {.rlim_cur = 100, .rlim_max = old.rlim_max}; /* less than a header */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    for (int i = 0; i < 2; i++)
        lmc_trace_recorder_write_record(r, "a.lost", &a, 1, lmc_wall_s(), lmc_mono_s());
    lmc_trace_recorder_flush(r);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(lmc_trace_recorder_dropped(r), 2);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_size, 0); /* cut back: no half frame */
    for (int i = 0; i < 3; i++)
        lmc_trace_recorder_write_record(r, "a.kept", &a, 1, lmc_wall_s(), lmc_mono_s());
    lmc_trace_recorder_flush(r);
    lmc_log_set_level(LMC_LOG_INFO);
    assert_int_equal(lmc_trace_recorder_records(r), 3);
    lmc_trace_recorder_destroy(r);

    lmc_trace_reader *rd = open_reader(f->path);
    assert_string_equal(lmc_trace_reader_header(rd)->sm_config_json, "");
    lmc_trace_record rec;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
        assert_string_equal(rec.qualname, "a.kept");
    }
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
    assert_string_equal(rec.qualname, LMC_TRACE_DROPPED_QUALNAME);
    assert_int_equal(arg(&rec, "dropped_count")->u.i, 2);
    assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_ERR_EOF);
    lmc_trace_reader_close(rd);
}

/* The length of the file and the bytes its frames take, walking the length prefixes. */
static void file_and_frames(const char *path, off_t *size, off_t *frames, blkcnt_t *blocks)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    struct stat st;
    assert_int_equal(fstat(fileno(fp), &st), 0);
    *size = st.st_size;
    *blocks = st.st_blocks;
    *frames = 0;
    uint8_t len[4];
    while (fread(len, 1, 4, fp) == 4) {
        uint32_t n = lmc_get_be32(len);
        if (fseeko(fp, (off_t)n, SEEK_CUR) != 0 || *frames + 4 + (off_t)n > st.st_size)
            break;
        *frames += 4 + (off_t)n;
    }
    fclose(fp);
}

static void test_file_ends_at_its_last_frame_and_preallocation_is_given_back(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_object_key k[16];
    sm_test_keys(k, 16, 7);
    lmc_layout_desc lay = sm_test_layout(4096);
    /* Over 1 MiB of records: several batches, and space reserved ahead. */
    for (int i = 0; i < 600; i++)
        LMC_TRACE(RESERVE_WRITE, .keys = k, .n_keys = 16, .layout = &lay, .mode = LMC_WRITE_NEW);
    uint64_t deadline = lmc_mono_ns() + 5000000000ull;
    while (lmc_event_bus_delivered(f->bus) < 600 && lmc_mono_ns() < deadline)
        lmc_sleep_ns(1000000);
    lmc_trace_recorder_flush(r);

    /* While open: the length is the frames written, never the reserve. */
    off_t size, frames;
    blkcnt_t blocks;
    file_and_frames(f->path, &size, &frames, &blocks);
    assert_true(size > 1024 * 1024);
    assert_int_equal(size, frames);

    finish(f, r);
    file_and_frames(f->path, &size, &frames, &blocks);
    assert_int_equal(size, frames);
    /* Closed: no space held past the end (a little slack for the filesystem). */
    assert_true((off_t)blocks * 512 <= size + 256 * 1024);

    lmc_trace_reader *rd = open_reader(f->path);
    lmc_trace_record rec;
    size_t n = 0;
    while (lmc_trace_reader_next(rd, &rec) == LMC_OK)
        n++;
    assert_int_equal(n, 600);
    lmc_trace_reader_close(rd);
}

static void test_record_t_wall_is_the_header_wall_start_plus_t_mono(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_object_key k[1];
    sm_test_keys(k, 1, 3);
    double before = lmc_wall_s();
    LMC_TRACE(FINISH_WRITE, .keys = k, .n_keys = 1);
    lmc_sleep_ns(20000000);
    LMC_TRACE(FINISH_WRITE, .keys = k, .n_keys = 1);
    double after = lmc_wall_s();
    finish(f, r);

    lmc_trace_reader *rd = open_reader(f->path);
    double wall0 = lmc_trace_reader_header(rd)->t_wall_start;
    lmc_trace_record rec;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lmc_trace_reader_next(rd, &rec), LMC_OK);
        /* t_wall is derived from the call's monotonic sample (one clock
         * read on the caller): it agrees with the header's clock pair to
         * within the skew of two samplings of it. */
        assert_true(fabs(rec.t_wall - (wall0 + rec.t_mono)) < 0.002);
        assert_true(rec.t_wall >= before - 0.005 && rec.t_wall <= after + 0.005);
    }
    lmc_trace_reader_close(rd);
}

static void test_lifecycle_without_a_level_records_nothing(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = (lmc_trace_recorder *)1;
    assert_int_equal(lmc_trace_maybe_init(f->bus, NULL, NULL, "", "", &r, NULL), LMC_OK);
    assert_null(r);
    assert_false(lmc_trace_enabled());
}

static void test_lifecycle_rejects_an_unsupported_level(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r;
    lmc_error err;
    assert_int_equal(lmc_trace_maybe_init(f->bus, "gpu", NULL, "", "", &r, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unsupported trace level"));
    assert_false(lmc_trace_enabled());
}

static void test_default_output_path_is_under_tmpdir_with_pid_and_utc_time(void **state)
{
    fixture *f = *state;
    setenv("TMPDIR", f->dir, 1);
    char path[512];
    lmc_trace_default_path(path, sizeof(path));
    unsetenv("TMPDIR");
    char prefix[600];
    snprintf(prefix, sizeof(prefix), "%s/lmcache-trace-%d-", f->dir, (int)getpid());
    assert_memory_equal(path, prefix, strlen(prefix));
    /* <YYYYmmdd-HHMMSS>.lct */
    assert_int_equal(strlen(path), strlen(prefix) + 15 + 4);
    assert_string_equal(path + strlen(path) - 4, ".lct");
}

static void test_the_default_path_never_writes_through_a_planted_link(void **state)
{
    fixture *f = *state;
    char victim[600];
    snprintf(victim, sizeof(victim), "%s/victim", f->dir);
    file_test_plant_victim(victim);
    setenv("TMPDIR", f->dir, 1);
    /* The name is predictable: plant links for this second and the next few. */
    time_t now = time(NULL);
    char planted[5][600];
    for (int i = 0; i < 5; i++) {
        struct tm tm;
        time_t t = now + i;
        gmtime_r(&t, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        snprintf(planted[i], sizeof(planted[i]), "%s/lmcache-trace-%d-%s.lct", f->dir,
                 (int)getpid(), stamp);
        assert_int_equal(symlink(victim, planted[i]), 0);
    }
    lmc_trace_recorder *r;
    lmc_error err;
    assert_int_equal(lmc_trace_maybe_init(f->bus, "storage", NULL, "", "", &r, &err), LMC_OK);
    unsetenv("TMPDIR");
    assert_int_equal(lmc_event_bus_start(f->bus), LMC_OK);
    const char *path = lmc_trace_recorder_path(r);
    for (int i = 0; i < 5; i++)
        assert_string_not_equal(path, planted[i]);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    finish(f, r);
    file_test_assert_victim(victim);
}

static void test_an_explicit_output_refuses_a_symlink(void **state)
{
    fixture *f = *state;
    char victim[600];
    snprintf(victim, sizeof(victim), "%s/victim", f->dir);
    file_test_plant_victim(victim);
    assert_int_equal(symlink(victim, f->path), 0);
    lmc_trace_recorder *r = NULL;
    lmc_error err;
    assert_int_equal(lmc_trace_maybe_init(f->bus, "storage", f->path, "", "", &r, &err),
                     LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "is a symbolic link: refusing to write through it"));
    assert_null(r);
    assert_false(lmc_trace_enabled());
    file_test_assert_victim(victim);
}

static void test_an_explicit_output_that_exists_is_overwritten_with_mode_0600(void **state)
{
    fixture *f = *state;
    file_test_plant_victim(f->path);
    assert_int_equal(chmod(f->path, 0644), 0);
    lmc_trace_recorder *r = record_to(f);
    finish(f, r);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    lmc_trace_reader *rd = open_reader(f->path); /* a trace now, not "precious" */
    lmc_trace_reader_close(rd);
}

/*
 * A lull on a running bus hands the records to the writer without a stop:
 * they are in the file within a bounded time. And bursts separated by short
 * pauses do not each cause a write: the writer gets a batch at most every
 * 20 ms (the idle hand-off's interval), so the writes stay within the time
 * taken divided by 20 ms, plus the first and the one at close.
 */
static void test_a_lull_hands_records_to_the_writer_at_most_every_20_ms(void **state)
{
    fixture *f = *state;
    lmc_trace_recorder *r = record_to(f);
    lmc_object_key k[2];
    sm_test_keys(k, 2, 7);
    capture_keys(LMC_TRACE_OP_FINISH_WRITE, k, 2);
    uint64_t t0 = lmc_mono_ms();
    while (lmc_trace_recorder_records(r) < 1 && lmc_mono_ms() - t0 < 5000)
        lmc_sleep_ns(1000000);
    assert_int_equal(lmc_trace_recorder_records(r), 1); /* in the file, the bus still running */

    uint64_t writes0 = lmc_trace_recorder_writes(r);
    uint64_t start = lmc_mono_ms();
    for (int burst = 0; burst < 100; burst++) {
        capture_keys(LMC_TRACE_OP_FINISH_WRITE, k, 2);
        lmc_sleep_ns(1000000); /* a pause: the drain thread runs dry and calls the hook */
    }
    uint64_t elapsed = lmc_mono_ms() - start;
    lmc_event_bus_stop(f->bus); /* the final drain and close: the last write */
    uint64_t writes = lmc_trace_recorder_writes(r) - writes0;
    uint64_t records = lmc_trace_recorder_records(r);
    lmc_trace_recorder_destroy(r);
    assert_true(writes >= 1);
    assert_true(writes <= elapsed / 20 + 3);
    assert_int_equal(records, 101);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gate_is_off_by_default_and_nothing_is_published, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_open_turns_the_gate_on_and_close_turns_it_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_header_with_attached_config_round_trips, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_header_without_attach_has_empty_config, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_trace_file_is_created_with_mode_0600, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_default_path_never_writes_through_a_planted_link,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_explicit_output_refuses_a_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_an_explicit_output_that_exists_is_overwritten_with_mode_0600, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_storage_manager_calls_are_recorded_with_their_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_captures_across_the_ring_end_record_their_arguments,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_capture_bytes_is_the_length_of_the_event_a_capture_publishes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_call_is_still_recorded_on_entry, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_truncated_tail_reads_the_complete_records, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unencodable_argument_is_dropped_and_counted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bus_stop_alone_flushes_and_closes_the_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_four_threads_every_record_once_in_thread_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_queue_overflow_is_counted_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_errors_are_counted_and_the_process_goes_on,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_header_lost_to_a_failed_write_is_written_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_file_ends_at_its_last_frame_and_preallocation_is_given_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_record_t_wall_is_the_header_wall_start_plus_t_mono,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_lifecycle_without_a_level_records_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_lifecycle_rejects_an_unsupported_level, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_default_output_path_is_under_tmpdir_with_pid_and_utc_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_lull_hands_records_to_the_writer_at_most_every_20_ms,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
