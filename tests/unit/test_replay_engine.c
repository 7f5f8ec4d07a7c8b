/*
 * test_replay_engine.c -- trace replay --mode engine (replay/engine_mode.h):
 * each recorded lookup is served as a request by the server's own request
 * logic (read the whole-chunk found prefix, store the rest, end the
 * session); the recorded reads and writes are not reissued and give the
 * recording's own hit rate; keys must be the server's (chunk-major x rank);
 * requests overlap as recorded, in virtual time and in realtime.
 *
 * The traces are written frame by frame (helpers/trace_test_util.h) with
 * the server's keys: chunk c of rank r has a hash named by c and kv_rank
 * ws<<24 | r<<16 | ws<<8 | r.
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

#include "core/log.h"
#include "helpers/sm_test_util.h"
#include "helpers/trace_test_util.h"
#include "replay/driver.h"
#include "replay/engine_mode.h"
#include "trace/format.h"

#define P LMC_TRACE_QUALNAME_PREFIX
#define LOOKUP P "submit_prefetch_task"
#define MAX_RECORDS 32
#define MAX_KEYS 64

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */
/* ---------------------------------------------------------------------- */

/* The server's keys of chunks [c0, c0 + n) for world size ws, chunk-major x rank. */
static size_t chunk_keys(lmc_object_key *out, size_t c0, size_t n, size_t ws)
{
    size_t k = 0;
    for (size_t c = c0; c < c0 + n; c++) {
        for (size_t r = 0; r < ws; r++) {
            uint8_t h[32] = {0};
            uint64_t v = 7000 + c;
            memcpy(h, &v, sizeof(v));
            int64_t rank =
                lmc_compute_kv_rank((unsigned)ws, (unsigned)r, (unsigned)ws, (unsigned)r);
            assert_int_equal(
                lmc_object_key_make(&out[k++], h, sizeof(h), "test/model", rank, 0, "", NULL),
                LMC_OK);
        }
    }
    return k;
}

/* A lookup of chunks [c0, c0 + n) at t (the layout of 4 KiB chunks unless given). */
static void lookup(tt_trace *t, double at, size_t c0, size_t n, size_t ws,
                   const lmc_layout_desc *lay)
{
    lmc_object_key k[MAX_KEYS];
    size_t nk = chunk_keys(k, c0, n, ws);
    lmc_layout_desc def = sm_test_layout(4096);
    tt_trace_keys_record_extra(t, at, LOOKUP, k, nk, lay != NULL ? lay : &def, 0);
}

/* A recorded call of chunks [c0, c0 + n) (engine mode does not reissue it). */
static void recorded(tt_trace *t, double at, const char *method, size_t c0, size_t n)
{
    lmc_object_key k[MAX_KEYS];
    size_t nk = chunk_keys(k, c0, n, 1);
    lmc_layout_desc lay = sm_test_layout(4096);
    bool reserve = strcmp(method, "reserve_write") == 0;
    char q[256];
    snprintf(q, sizeof(q), P "%s", method);
    tt_trace_keys_record(t, at, q, k, nk, reserve ? &lay : NULL, reserve ? "new" : NULL);
}

/* What one replay reported, record by record. */
typedef struct run {
    lmc_replay_result res;
    size_t n;
    bool failed[MAX_RECORDS + 1];
    bool has[MAX_RECORDS + 1];
    lmc_replay_outcome o[MAX_RECORDS + 1]; /* by record index */
    bool in_order;
    uint64_t l1_used; /* at the end */
} run;

static void on_record(const lmc_replay_record_view *v, void *ud)
{
    run *r = ud;
    if (v->index != r->n + 1)
        r->in_order = false;
    r->n = v->index;
    if (v->index > MAX_RECORDS)
        return;
    r->failed[v->index] = v->failed;
    r->has[v->index] = v->outcome != NULL;
    if (v->outcome != NULL)
        r->o[v->index] = *v->outcome;
}

static void on_finish(lmc_storage_manager *sm, void *ud)
{
    run *r = ud;
    uint64_t total;
    lmc_sm_l1_usage(sm, &r->l1_used, &total);
}

static void replay(const char *path, const char *flags, const char *l2, lmc_replay_mode mode,
                   lmc_replay_pace pace, run *r)
{
    memset(r, 0, sizeof(*r));
    r->in_order = true;
    lmc_sm_config cfg = sm_test_config(flags, l2);
    lmc_replay_options opt = {.time_scale = 1.0,
                              .on_record = on_record,
                              .on_finish = on_finish,
                              .ud = r,
                              .pace = pace,
                              .mode = mode};
    lmc_error err;
    if (lmc_replay_run(&cfg, path, &opt, &r->res, &err) != LMC_OK)
        fail_msg("replay: %s", err.msg);
    lmc_sm_config_free(&cfg);
}

static uint32_t v(const run *r, uint64_t index, lmc_outcome_counter c)
{
    assert_true(index <= MAX_RECORDS && r->has[index]);
    return r->o[index].v[c];
}

/* The per-op latency summary has a row for qualname. */
static bool has_latency_row(lmc_replay_stats *stats, const char *qualname)
{
    lmc_op_stats *ops = NULL;
    size_t n = 0;
    assert_int_equal(lmc_replay_stats_summarize(stats, &ops, &n), LMC_OK);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found = found || strcmp(ops[i].qualname, qualname) == 0;
    lmc_replay_stats_free_summary(ops, n);
    return found;
}

#define SM "--l1-size-gb 0.01 --eviction-policy LRU"

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tt_tmpdir(f->dir);
    snprintf(f->path, sizeof(f->path), "%s/t.lct", f->dir);
    lmc_log_set_level(LMC_LOG_ERROR);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tt_rmtree(f->dir);
    free(f);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

static void test_a_miss_is_stored_and_the_next_lookup_reads_it(void **state)
{
    fixture *f = *state;
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.000, 0, 4, 1, NULL);
    recorded(&t, 0.001, "reserve_write", 0, 4);
    recorded(&t, 0.002, "finish_write", 0, 4);
    lookup(&t, 1.000, 0, 4, 1, NULL);
    recorded(&t, 1.001, "read_prefetched_results.__enter__", 0, 4);
    recorded(&t, 1.002, "read_prefetched_results.__exit__", 0, 4);
    recorded(&t, 1.003, "finish_read_prefetched", 0, 4);
    tt_trace_end(&t, f->path);
    run r;
    replay(f->path, SM, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, &r);
    assert_int_equal(r.res.mode, LMC_REPLAY_MODE_ENGINE);
    assert_int_equal(r.res.replayed, 2);
    assert_int_equal(r.res.not_reissued, 5);
    assert_int_equal(r.res.failed, 0);
    assert_int_equal(r.n, 7);
    assert_true(r.in_order);
    /* The first lookup finds nothing and stores its four chunks. */
    assert_int_equal(r.o[1].op, LMC_TRACE_OP_SUBMIT_PREFETCH);
    assert_false(r.o[1].pending);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_missed), 4);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_hit_keys), 0);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_read), 0);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_stored), 4);
    /* The recorded write is not reissued: only its keys are kept. */
    assert_true(r.o[2].not_reissued);
    assert_int_equal(r.o[2].op, LMC_TRACE_OP_RESERVE_WRITE);
    assert_int_equal(r.o[2].n_keys, 4);
    assert_int_equal(v(&r, 2, LMC_OC_RESERVE_WRITE_reserved), 0);
    /* The second finds them in L1 and reads them all. */
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_l1_hits), 4);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_found_prefix), 4);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_hit_keys), 4);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_read), 4);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_read_failed), 0);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_stored), 0);
    assert_int_equal(r.l1_used, 4 * 4096);

    lmc_replay_figures fig = lmc_replay_figures_of(&r.res.totals);
    assert_int_equal(fig.lookups, 2);
    assert_int_equal(fig.looked_up_keys, 8);
    assert_int_equal(fig.engine_hit_keys, 4);
    assert_true(fig.engine_hit_rate == 0.5);
    assert_true(fig.recorded_hit_rate == 0.5); /* 4 keys read of 8 looked up, as recorded */
    assert_int_equal(fig.not_reissued_records, 5);
    assert_int_equal(fig.engine_stored_keys, 4);
    assert_int_equal(fig.engine_read_keys, 4);
    assert_int_equal(fig.engine_refused_keys, 0);
    assert_int_equal(fig.recorded_reads, 0); /* mode calls' agreement has nothing to compare */
    /* Latency: the requests' own calls, and no row for calls that were not made. */
    assert_true(has_latency_row(r.res.stats, "engine.store"));
    assert_true(has_latency_row(r.res.stats, "engine.retrieve"));
    assert_true(has_latency_row(r.res.stats, "engine.end_session"));
    assert_true(has_latency_row(r.res.stats, LOOKUP));
    assert_false(has_latency_row(r.res.stats, P "reserve_write"));
    lmc_replay_result_free(&r.res);
}

static void test_the_found_prefix_is_read_and_what_follows_is_stored_or_refused(void **state)
{
    fixture *f = *state;
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.0, 1, 1, 1, NULL); /* chunk 1 alone: stored */
    lookup(&t, 1.0, 0, 3, 1, NULL); /* chunks 0-2: 1 is found past an empty prefix */
    lookup(&t, 2.0, 0, 4, 1, NULL); /* chunks 0-3: 0-2 found, 3 stored */
    tt_trace_end(&t, f->path);
    run r;
    replay(f->path, SM, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, &r);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_stored), 1);
    /* A PREFIX lookup stops at the first miss: chunk 1 is not a hit. */
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_l1_hits), 0);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_found_prefix), 0);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_hit_keys), 0);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_read), 0);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_stored), 2);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_store_present), 1);
    assert_int_equal(v(&r, 3, LMC_OC_SUBMIT_PREFETCH_hit_keys), 3);
    assert_int_equal(v(&r, 3, LMC_OC_SUBMIT_PREFETCH_read), 3);
    assert_int_equal(v(&r, 3, LMC_OC_SUBMIT_PREFETCH_stored), 1);
    lmc_replay_figures fig = lmc_replay_figures_of(&r.res.totals);
    assert_int_equal(fig.engine_refused_keys, 1);
    assert_int_equal(fig.engine_hit_keys, 3);
    assert_true(fig.engine_hit_rate == 3.0 / 8.0);
    assert_true(fig.recorded_hit_rate == 0.0); /* the trace recorded no reads */
    lmc_replay_result_free(&r.res);
}

static void test_world_size_two_reads_and_stores_each_rank(void **state)
{
    fixture *f = *state;
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.0, 0, 3, 2, NULL);
    lookup(&t, 1.0, 0, 4, 2, NULL);
    lookup(&t, 2.0, 0, 4, 2, NULL);
    tt_trace_end(&t, f->path);
    run r;
    replay(f->path, SM, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, &r);
    assert_int_equal(r.res.failed, 0);
    assert_int_equal(r.o[1].n_keys, 6);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_stored), 6);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_hit_keys), 6);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_read), 6);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_stored), 2);
    assert_int_equal(v(&r, 3, LMC_OC_SUBMIT_PREFETCH_hit_keys), 8);
    assert_int_equal(r.l1_used, 8 * 4096);
    lmc_replay_result_free(&r.res);
}

static void test_a_lookup_whose_keys_are_not_the_servers_fails_with_a_message(void **state)
{
    fixture *f = *state;
    lmc_object_key k[8];
    lmc_layout_desc lay = sm_test_layout(4096);
    tt_trace t;
    tt_trace_begin(&t, 2);
    /* Three keys of world size 2. */
    chunk_keys(k, 0, 2, 2);
    tt_trace_keys_record_extra(&t, 0.0, LOOKUP, k, 3, &lay, 0);
    /* Rank-major instead of chunk-major: keys[1] is rank 0 again. */
    lmc_object_key swapped[4];
    chunk_keys(k, 0, 2, 2);
    swapped[0] = k[0], swapped[1] = k[2], swapped[2] = k[1], swapped[3] = k[3];
    tt_trace_keys_record_extra(&t, 0.1, LOOKUP, swapped, 4, &lay, 0);
    /* The two ranks of "one chunk" name different chunks. */
    chunk_keys(k, 0, 2, 2);
    lmc_object_key mixed[2] = {k[0], k[3]};
    tt_trace_keys_record_extra(&t, 0.2, LOOKUP, mixed, 2, &lay, 0);
    /* A good one after them is still served. */
    lookup(&t, 0.3, 0, 2, 2, NULL);
    tt_trace_end(&t, f->path);
    lmc_log_set_level(LMC_LOG_WARNING);
    tt_log_capture_start();
    run r;
    replay(f->path, SM, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, &r);
    tt_log_capture_stop();
    lmc_log_set_level(LMC_LOG_ERROR);
    assert_int_equal(r.res.failed, 3);
    assert_int_equal(r.res.replayed, 1);
    assert_true(r.failed[1] && r.failed[2] && r.failed[3] && !r.failed[4]);
    assert_int_equal(tt_log_count_containing("3 keys do not fit world size 2"), 1);
    assert_int_equal(tt_log_count_containing("keys[1] has kv_rank 0x2000200, not 0x2010201"), 1);
    assert_int_equal(tt_log_count_containing("keys[1] (rank 1) is not the chunk of keys[0]"), 1);
    assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_stored), 4);
    lmc_replay_result_free(&r.res);
}

static void test_stores_without_room_are_refused_as_out_of_memory(void **state)
{
    fixture *f = *state;
    lmc_layout_desc big = sm_test_layout(4u << 20); /* 4 MiB: two fit in 10 MiB */
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.0, 0, 4, 1, &big);
    tt_trace_end(&t, f->path);
    run r;
    replay(f->path, SM, NULL, LMC_REPLAY_MODE_ENGINE, LMC_REPLAY_PACE_VIRTUAL, &r);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_stored), 2);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_store_out_of_memory), 2);
    lmc_replay_result_free(&r.res);
}

/*
 * Chunks 0-3 go to a slow mock L2 and leave L1 (skip_l1). A later lookup
 * of them waits for its L2 load (about 0.26 s at 1 MB/s for 256 KiB)
 * while the next records run: a lookup of chunks 10-11 10 ms later is
 * served (stored) before it, which a lookup of 10-11 20 ms later finds
 * (in virtual time exactly; in realtime a loaded host may dispatch it late,
 * after the store to L2 took 10-11 out of L1 again, so only virtual time
 * checks that one).
 */
static void overlapping_requests(const char *path, lmc_replay_pace pace)
{
    lmc_layout_desc lay = sm_test_layout(64 * 1024);
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.00, 0, 4, 1, &lay);
    lookup(&t, 1.00, 0, 4, 1, &lay);
    lookup(&t, 1.01, 10, 2, 1, &lay);
    lookup(&t, 1.02, 10, 2, 1, &lay);
    tt_trace_end(&t, path);
    run r;
    replay(path, SM " --l2-store-policy skip_l1",
           "{\"type\": \"mock\", \"max_size_gb\": 0.1, \"mock_bandwidth_gb\": 0.001}",
           LMC_REPLAY_MODE_ENGINE, pace, &r);
    assert_true(r.in_order);
    assert_int_equal(r.n, 4);
    assert_int_equal(v(&r, 1, LMC_OC_SUBMIT_PREFETCH_stored), 4);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_l1_hits), 0);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_l2_sent), 4);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_l2_hits), 4);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_hit_keys), 4);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_read), 4);
    assert_int_equal(v(&r, 2, LMC_OC_SUBMIT_PREFETCH_unfinished), 0);
    assert_int_equal(v(&r, 3, LMC_OC_SUBMIT_PREFETCH_stored), 2);
    /* Served while request 2 still waited for L2 (its chunks leave L1 after their store). */
    if (pace == LMC_REPLAY_PACE_VIRTUAL)
        assert_int_equal(v(&r, 4, LMC_OC_SUBMIT_PREFETCH_l1_hits), 2);
    assert_int_equal(r.res.unfinished_prefetches, 0);
    lmc_replay_figures fig = lmc_replay_figures_of(&r.res.totals);
    assert_int_equal(fig.l2_hit_keys, 4);
    lmc_replay_result_free(&r.res);
}

static void test_requests_overlap_while_one_waits_for_l2_in_virtual_time(void **state)
{
    fixture *f = *state;
    overlapping_requests(f->path, LMC_REPLAY_PACE_VIRTUAL);
}

static void test_requests_overlap_while_one_waits_for_l2_in_realtime(void **state)
{
    fixture *f = *state;
    overlapping_requests(f->path, LMC_REPLAY_PACE_REALTIME);
}

static void test_mode_engine_rejects_a_custom_dispatcher(void **state)
{
    fixture *f = *state;
    tt_trace t;
    tt_trace_begin(&t, 2);
    lookup(&t, 0.0, 0, 1, 1, NULL);
    tt_trace_end(&t, f->path);
    lmc_sm_config cfg = sm_test_config(SM, NULL);
    lmc_dispatcher *d = lmc_dispatcher_default();
    lmc_replay_options opt = {.time_scale = 1.0, .dispatcher = d, .mode = LMC_REPLAY_MODE_ENGINE};
    lmc_replay_result res;
    lmc_error err;
    assert_int_equal(lmc_replay_run(&cfg, f->path, &opt, &res, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "mode engine brings its own dispatcher"));
    lmc_dispatcher_destroy(d);
    lmc_sm_config_free(&cfg);
}

static void test_mode_names_parse_and_reject(void **state)
{
    (void)state;
    lmc_replay_mode m = LMC_REPLAY_MODE_CALLS;
    assert_int_equal(lmc_replay_mode_parse("engine", &m, NULL), LMC_OK);
    assert_int_equal(m, LMC_REPLAY_MODE_ENGINE);
    assert_int_equal(lmc_replay_mode_parse("calls", &m, NULL), LMC_OK);
    assert_int_equal(m, LMC_REPLAY_MODE_CALLS);
    lmc_error err;
    assert_int_equal(lmc_replay_mode_parse("server", &m, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "unknown mode 'server' (expected calls or engine)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_miss_is_stored_and_the_next_lookup_reads_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_the_found_prefix_is_read_and_what_follows_is_stored_or_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_world_size_two_reads_and_stores_each_rank, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_lookup_whose_keys_are_not_the_servers_fails_with_a_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stores_without_room_are_refused_as_out_of_memory,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_requests_overlap_while_one_waits_for_l2_in_virtual_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_requests_overlap_while_one_waits_for_l2_in_realtime,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_mode_engine_rejects_a_custom_dispatcher, setup,
                                        teardown),
        cmocka_unit_test(test_mode_names_parse_and_reject),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
