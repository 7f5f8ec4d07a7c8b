/*
 * bench_replay.c -- `lmcache bench micro replay`: reading and replaying traces.
 *
 * Metrics (DESIGN.md section 5 targets in brackets):
 *   info_records_per_s   the `trace info` pass (t_mono + qualname of every
 *                        record) over 1,000,000 16-key records [>= 2 M/s]
 *   loop_overhead_ns     per record, replay at a time scale so small that
 *                        nothing waits, minus the StorageManager's own time
 *                        (read, decode, dispatch, stats) [<= 2 us]
 *   lateness_p50_us,     how late dispatches start at time scale 1 with
 *   lateness_p99_us      records 100 us apart [p50 <= 5 us, p99 <= 100 us]
 * Trace files are written to /dev/shm when it exists (else $TMPDIR or /tmp)
 * and removed afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "core/clock.h"
#include "core/log.h"
#include "lmcache/config.h"
#include "replay/driver.h"
#include "trace/format.h"
#include "trace/reader.h"

#define P LMC_TRACE_QUALNAME_PREFIX
#define NKEYS 16

static void scratch_path(char *buf, size_t len, const char *name)
{
    struct stat st;
    const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : NULL;
    if (dir == NULL)
        dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, len, "%s/lmcache-bench-%d-%s.lct", dir, (int)getpid(), name);
}

/*
 * A trace of n records alternating reserve_write(new) and finish_write of
 * 16 keys, `gap` seconds apart. Keys repeat every `distinct` pairs so a
 * replay's L1 stays small.
 */
static int write_trace(const char *path, size_t n, double gap, size_t distinct)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, "LMCT", 4);
    h.magic_len = 4;
    h.format_version = 1;
    h.level = "storage";
    h.trace_schema_version = 2;
    h.t_mono_start = 1.0;
    h.t_wall_start = 1767225600.0;
    h.sm_config_json = "";
    h.sm_config_digest = "";
    int rc = lmc_trace_encode_header(&buf, &h, NULL) == LMC_OK ? 0 : -1;

    lmc_layout_desc layout;
    int64_t dims[1] = {4096};
    lmc_layout_desc_make1(&layout, dims, 1, LMC_DTYPE_UINT8, NULL);
    lmc_object_key keys[NKEYS];
    lmc_tv items[NKEYS];
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t pair = (i / 2) % distinct;
        for (size_t k = 0; k < NKEYS; k++) {
            uint8_t hash[32] = {0};
            uint64_t v = pair * NKEYS + k;
            memcpy(hash, &v, sizeof(v));
            lmc_object_key_make(&keys[k], hash, sizeof(hash), "meta-llama/Llama-3.1-8B", 0x01000100,
                                0, "", NULL);
            items[k] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &keys[k]};
        }
        lmc_trace_arg args[3] = {
            {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, NKEYS}}},
            {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &layout}},
            {"mode", 4, lmc_tv_str("new", 3)},
        };
        bool reserve = i % 2 == 0;
        const char *q = reserve ? P "reserve_write" : P "finish_write";
        double t = (double)i * gap;
        if (lmc_trace_encode_record(&buf, t, 1767225600.0 + t, q, strlen(q), args, reserve ? 3 : 1,
                                    NULL) != LMC_OK)
            rc = -1;
        if (buf.size >= (1u << 20)) {
            if (fwrite(buf.data, 1, buf.size, f) != buf.size)
                rc = -1;
            buf.size = 0;
        }
    }
    if (rc == 0 && buf.size > 0 && fwrite(buf.data, 1, buf.size, f) != buf.size)
        rc = -1;
    msgpack_sbuffer_destroy(&buf);
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

static double info_pass(const char *path)
{
    uint64_t t0 = lmc_mono_ns();
    lmc_trace_reader *rd;
    if (lmc_trace_reader_open(path, &rd, NULL) != LMC_OK)
        return 0;
    double t;
    const char *q;
    size_t qlen;
    uint64_t n = 0;
    while (lmc_trace_reader_next_peek(rd, &t, &q, &qlen) == LMC_OK)
        n++;
    lmc_trace_reader_close(rd);
    return (double)n / ((double)(lmc_mono_ns() - t0) / 1e9);
}

static int replay(const char *path, double scale, lmc_replay_result *res)
{
    char *argv[] = {"bench", "--l1-size-gb", "1", "--eviction-policy", "LRU", NULL};
    lmc_sm_config cfg;
    lmc_sm_config_init(&cfg);
    lmc_error err;
    int rc = -1;
    if (lmc_sm_config_parse_all(&cfg, 5, argv, &err) == LMC_OK) {
        lmc_replay_options opt = {.time_scale = scale};
        if (lmc_replay_run(&cfg, path, &opt, res, &err) == LMC_OK)
            rc = 0;
        else
            fprintf(stderr, "bench replay: %s\n", err.msg);
    }
    lmc_sm_config_free(&cfg);
    return rc;
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
        for (int r = 0; r < reps; r++)
            v[r] = info_pass(path);
        lmc_bench_report(ctx, "info_records_per_s", lmc_bench_median(v, (size_t)reps), "records/s");
    }
    unlink(path);

    /* 2. Loop overhead at a time scale where nothing waits. */
    size_t n_loop = (size_t)(100000 * ctx->scale) + 1000;
    scratch_path(path, sizeof(path), "loop");
    if (write_trace(path, n_loop, 1e-6, 512) == 0) {
        for (int r = 0; r < reps; r++)
            v[r] = loop_overhead(path, n_loop);
        lmc_bench_report(ctx, "loop_overhead_ns", lmc_bench_median(v, (size_t)reps), "ns");
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
        lmc_bench_report(ctx, "lateness_p50_us", lmc_bench_median(v, (size_t)reps), "us");
        if (p99)
            lmc_bench_report(ctx, "lateness_p99_us", lmc_bench_median(p99, (size_t)reps), "us");
        free(p99);
    } else {
        lmc_bench_note(ctx, "lateness_p50_us", "cannot write the scratch trace");
        rc = 1;
    }
    unlink(path);
    free(v);
    return rc;
}
