/*
 * bench_replay.c -- `lmcache bench micro replay`: reading and replaying traces.
 *
 * Metrics (DESIGN.md section 5 targets in brackets):
 *   info_records_per_s   the `trace info` pass (t_mono + qualname of every
 *                        record, and the lookups' keys for the unique keys and
 *                        footprint) over 1,000,000 16-key records [>= 2 M/s]
 *   loop_overhead_ns     per record, replay at a time scale so small that
 *                        nothing waits, minus the StorageManager's own time
 *                        (read, decode, dispatch, stats) [<= 2 us]
 *   lateness_p50_us,     how late dispatches start at time scale 1 with
 *   lateness_p99_us      records 100 us apart [p50 <= 5 us, p99 <= 100 us]
 *   virtual_records_per_s  --pace virtual over 1,000,000 16-key records, no
 *                        L2, whole replay (create to destroy) [>= 300 k/s]
 *   virtual_speedup      trace span / wall time of a --pace virtual replay
 *                        of the Mooncake-derived fixture (the Mooncake trace's
 *                        requests as server calls, replay/synth.h) with a
 *                        small L1 and a mock L2 [a 20 s recording in < 0.5 s:
 *                        >= 40]
 *   analyze_keys_per_s   key accesses per second of a whole `trace analyze` pass
 *                        (read, decode, key set, exact LRU curve, buckets) over
 *                        200,000 lookups of 16 keys (3.2 M accesses, skewed over
 *                        40,000 documents: replay/synth.h) [>= 5 M/s]
 *   engine_virtual_speedup the same in mode engine (each lookup served as a
 *                        request by the server's request logic)
 * Trace files are written to /dev/shm when it exists (else $TMPDIR or /tmp)
 * and removed afterwards. The Mooncake trace is ../shared/traces/ beside the
 * source tree; without it the fixture comes from the synthetic chat
 * workload (a note says so).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "bench.h"
#include "client/workload.h"
#include "core/clock.h"
#include "core/log.h"
#include "lmcache/config.h"
#include "replay/driver.h"
#include "replay/synth.h"
#include "trace/reader.h"

#define NKEYS 16

static void scratch_path(char *buf, size_t len, const char *name)
{
    struct stat st;
    const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : NULL;
    if (dir == NULL)
        dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, len, "%s/lmcache-bench-%d-%s.lct", dir, (int)getpid(), name);
}

/* reserve_write(new) / finish_write pairs of 16 keys (replay/synth.h). */
static int write_trace(const char *path, size_t n, double gap, size_t distinct)
{
    return lmc_replay_synth_store_pairs(path, n, NKEYS, gap, distinct, NULL) == LMC_OK ? 0 : -1;
}

/* What `trace info` reads: every record's head, the lookups' keys (analyze/analyze.h's summary). */
static double info_pass(const char *path)
{
    uint64_t t0 = lmc_mono_ns();
    lmc_trace_reader *rd;
    if (lmc_trace_reader_open(path, &rd, NULL) != LMC_OK)
        return 0;
    lmc_analyze_options o = {0};
    lmc_analyze *a;
    if (lmc_analyze_create(&o, &a, NULL) != LMC_OK) {
        lmc_trace_reader_close(rd);
        return 0;
    }
    lmc_trace_record rec;
    uint64_t n = 0;
    while (lmc_trace_reader_next_record(rd, &rec) == LMC_OK &&
           lmc_analyze_record(a, rd, &rec, NULL) == LMC_OK)
        n++;
    lmc_analyze_result r;
    if (lmc_analyze_result_get(a, &r, NULL) == LMC_OK)
        lmc_analyze_result_free(&r);
    lmc_analyze_destroy(a);
    lmc_trace_reader_close(rd);
    return (double)n / ((double)(lmc_mono_ns() - t0) / 1e9);
}

/* Key accesses per second of a whole exact analysis of path; < 0 on error. */
static double analyze_pass(const char *path)
{
    uint64_t t0 = lmc_mono_ns();
    lmc_analyze_options o = {.full = true, .sample_rate = 1.0};
    lmc_analyze_result r;
    lmc_error err;
    if (lmc_analyze_file(path, &o, &r, &err) != LMC_OK) {
        fprintf(stderr, "bench replay: %s\n", err.msg);
        return -1;
    }
    double s = (double)(lmc_mono_ns() - t0) / 1e9;
    uint64_t keys = r.keys;
    lmc_analyze_result_free(&r);
    return (double)keys / s;
}

/* Replay path with flags argv[0..argc) (after the program name) at scale, pace and mode. */
static int replay_with(const char *path, int argc, char **argv, double scale, lmc_replay_pace pace,
                       lmc_replay_mode mode, lmc_replay_result *res)
{
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    lmc_error err;
    int rc = -1;
    if (lmc_sm_config_parse_all(&cfg, argc, argv, &err) == LMC_OK) {
        lmc_replay_options opt = {.time_scale = scale, .pace = pace, .mode = mode};
        if (lmc_replay_run(&cfg, path, &opt, res, &err) == LMC_OK)
            rc = 0;
        else
            fprintf(stderr, "bench replay: %s\n", err.msg);
    }
    lmc_sm_config_free(&cfg);
    return rc;
}

static int replay(const char *path, double scale, lmc_replay_result *res)
{
    char *argv[] = {"bench", "--l1-size-gb", "1", "--eviction-policy", "LRU", NULL};
    return replay_with(path, 5, argv, scale, LMC_REPLAY_PACE_REALTIME, LMC_REPLAY_MODE_CALLS, res);
}

/* Wall seconds of a whole --pace virtual replay (StorageManager create to destroy); < 0 on error.
 */
static double virtual_replay_s(const char *path, int argc, char **argv, lmc_replay_mode mode)
{
    lmc_replay_result res;
    /* Reads that miss are logged one by one; that is not what is measured here. */
    lmc_log_level level = lmc_log_get_level();
    lmc_log_set_level(LMC_LOG_ERROR);
    uint64_t t0 = lmc_mono_ns();
    int rc = replay_with(path, argc, argv, 1.0, LMC_REPLAY_PACE_VIRTUAL, mode, &res);
    double s = (double)(lmc_mono_ns() - t0) / 1e9;
    lmc_log_set_level(level);
    if (rc != 0)
        return -1;
    lmc_replay_result_free(&res);
    return s;
}

/*
 * Replay path in virtual time (in mode) once untimed, then ctx->repeats
 * times, and report the trials of amount / wall seconds as metric; 1 when a replay fails. v has
 * a slot per repeat.
 */
static int report_virtual(const lmc_bench_ctx *ctx, const char *metric, const char *unit,
                          const char *path, int argc, char **argv, lmc_replay_mode mode,
                          double amount, double *v)
{
    for (int r = -1; r < ctx->repeats; r++) { /* r = -1: the untimed warm-up */
        double s = virtual_replay_s(path, argc, argv, mode);
        if (s <= 0)
            return 1;
        if (r >= 0)
            v[r] = amount / s;
    }
    lmc_bench_report_trials(ctx, metric, v, (size_t)ctx->repeats, unit);
    return 0;
}

/*
 * The Mooncake-derived fixture (max_requests of the trace; 0 = all), or the
 * chat workload's when the trace is missing. Returns the span in seconds,
 * or < 0 on error.
 */
static double write_workload_fixture(const lmc_bench_ctx *ctx, const char *path,
                                     size_t max_requests)
{
    char mooncake[1024];
    lmc_workload *w = NULL;
    lmc_error err;
    lmc_status st;
    if (lmc_replay_synth_mooncake_path(mooncake, sizeof(mooncake))) {
        st = lmc_workload_load_mooncake(mooncake, max_requests, &w, &err);
    } else {
        lmc_bench_note(ctx, "virtual_speedup", "Mooncake trace not found: synthetic chat instead");
        lmc_chat_config chat;
        lmc_chat_config_init(&chat);
        chat.users = 64;
        chat.rounds = 8;
        chat.interval_ms = 250;
        st = lmc_workload_chat(&chat, max_requests, &w, &err);
    }
    if (st != LMC_OK) {
        fprintf(stderr, "bench replay: %s\n", err.msg);
        return -1;
    }
    lmc_replay_synth_options o = {.object_bytes = 4096};
    lmc_replay_synth_info info;
    st = lmc_replay_synth_workload(w, path, &o, &info, &err);
    lmc_workload_destroy(w);
    if (st != LMC_OK) {
        fprintf(stderr, "bench replay: %s\n", err.msg);
        return -1;
    }
    return info.span_s;
}

/* Per-record time not spent inside StorageManager calls, in ns. */
static double loop_overhead(const char *path, size_t n)
{
    lmc_replay_result res;
    uint64_t t0 = lmc_mono_ns();
    if (replay(path, 1e-9, &res) != 0)
        return -1;
    double total_s = (double)(lmc_mono_ns() - t0) / 1e9;
    /* The StorageManager's own setup and teardown are not per record. */
    lmc_op_stats *ops;
    size_t n_ops = lmc_replay_stats_summary(res.stats, &ops);
    double sm_s = 0;
    for (size_t i = 0; i < n_ops; i++)
        sm_s += ops[i].total_s;
    lmc_replay_stats_free_summary(ops, n_ops);
    double run_s = lmc_replay_stats_duration_s(res.stats);
    lmc_replay_result_free(&res);
    (void)total_s;
    return (run_s - sm_s) / (double)n * 1e9;
}

int lmc_bench_group_replay(const lmc_bench_ctx *ctx)
{
    int reps = ctx->repeats;
    double *v = calloc((size_t)reps, sizeof(double));
    if (v == NULL)
        return 1;
    char path[512];
    int rc = 0;

    /* 1. trace info over 1,000,000 records (fewer, at least 10,000, in a quick run). */
    size_t n_info = (size_t)(1000000 * ctx->scale);
    if (n_info < 10000)
        n_info = 10000;
    scratch_path(path, sizeof(path), "info");
    if (write_trace(path, n_info, 1e-6, 4096) != 0) {
        lmc_bench_note(ctx, "info_records_per_s", "cannot write the scratch trace");
        rc = 1;
    } else {
        for (int r = -1; r < reps; r++) { /* r = -1: the untimed warm-up */
            double x = info_pass(path);
            if (r >= 0)
                v[r] = x;
        }
        lmc_bench_report_trials(ctx, "info_records_per_s", v, (size_t)reps, "records/s");
    }
    unlink(path);

    /* 2. Loop overhead at a time scale where nothing waits. */
    size_t n_loop = (size_t)(100000 * ctx->scale) + 1000;
    scratch_path(path, sizeof(path), "loop");
    if (write_trace(path, n_loop, 1e-6, 512) == 0) {
        for (int r = -1; r < reps; r++) { /* r = -1: the untimed warm-up */
            double x = loop_overhead(path, n_loop);
            if (r >= 0)
                v[r] = x;
        }
        lmc_bench_report_trials(ctx, "loop_overhead_ns", v, (size_t)reps, "ns");
    } else {
        lmc_bench_note(ctx, "loop_overhead_ns", "cannot write the scratch trace");
        rc = 1;
    }
    unlink(path);

    /* 3. Lateness at scale 1, records 100 us apart. */
    size_t n_late = (size_t)(10000 * ctx->scale) + 1000;
    scratch_path(path, sizeof(path), "late");
    if (write_trace(path, n_late, 100e-6, 512) == 0) {
        double *p99 = calloc((size_t)reps, sizeof(double));
        for (int r = 0; r < reps && p99; r++) {
            lmc_replay_result res;
            if (replay(path, 1.0, &res) != 0)
                break;
            lmc_lateness_stats l = lmc_replay_stats_lateness(res.stats);
            v[r] = l.p50_us;
            p99[r] = l.p99_us;
            lmc_replay_result_free(&res);
        }
        lmc_bench_report_trials(ctx, "lateness_p50_us", v, (size_t)reps, "us");
        if (p99)
            lmc_bench_report_trials(ctx, "lateness_p99_us", p99, (size_t)reps, "us");
        free(p99);
    } else {
        lmc_bench_note(ctx, "lateness_p50_us", "cannot write the scratch trace");
        rc = 1;
    }
    unlink(path);

    /* 4. Virtual time: 1,000,000 16-key records (fewer in a quick run), no L2. */
    size_t n_virt = (size_t)(1000000 * ctx->scale);
    if (n_virt < 10000)
        n_virt = 10000;
    scratch_path(path, sizeof(path), "virtual");
    if (write_trace(path, n_virt, 1e-6, 4096) == 0) {
        char *argv[] = {"bench", "--l1-size-gb", "1", "--eviction-policy", "LRU", NULL};
        rc |= report_virtual(ctx, "virtual_records_per_s", "records/s", path, 5, argv,
                             LMC_REPLAY_MODE_CALLS, (double)n_virt, v);
    } else {
        lmc_bench_note(ctx, "virtual_records_per_s", "cannot write the scratch trace");
        rc = 1;
    }
    unlink(path);

    /* 5. Virtual time over the Mooncake-derived fixture: 128 MiB L1, mock L2. */
    scratch_path(path, sizeof(path), "mooncake");
    size_t n_req = ctx->scale >= 1.0 ? 0 : (size_t)(4000 * ctx->scale) + 100;
    double span = write_workload_fixture(ctx, path, n_req);
    if (span > 0) {
        char *argv[] = {"bench",
                        "--l1-size-gb",
                        "0.125",
                        "--eviction-policy",
                        "LRU",
                        "--l2-adapter",
                        "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 10}",
                        NULL};
        rc |= report_virtual(ctx, "virtual_speedup", "x", path, 7, argv, LMC_REPLAY_MODE_CALLS,
                             span, v);
        rc |= report_virtual(ctx, "engine_virtual_speedup", "x", path, 7, argv,
                             LMC_REPLAY_MODE_ENGINE, span, v);
    } else {
        lmc_bench_note(ctx, "virtual_speedup", "cannot write the fixture trace");
        rc = 1;
    }
    unlink(path);

    /* 6. The analysis pass: 200,000 lookups of 16 keys (fewer, at least 2,000, in a quick run). */
    size_t n_look = (size_t)(200000 * ctx->scale);
    if (n_look < 2000)
        n_look = 2000;
    scratch_path(path, sizeof(path), "analyze");
    if (lmc_replay_synth_lookups(path, n_look, NKEYS, 1e-4, n_look / 5, NULL) == LMC_OK) {
        int r = 0;
        for (; r < reps && (v[r] = analyze_pass(path)) > 0; r++) {
        }
        if (r == reps) {
            lmc_bench_report_trials(ctx, "analyze_keys_per_s", v, (size_t)reps, "keys/s");
        } else {
            lmc_bench_note(ctx, "analyze_keys_per_s", "the analysis failed");
            rc = 1;
        }
    } else {
        lmc_bench_note(ctx, "analyze_keys_per_s", "cannot write the scratch trace");
        rc = 1;
    }
    unlink(path);
    free(v);
    return rc;
}
