/*
 * bench_sm.c -- `lmcache bench micro sm`: the cost of StorageManager calls.
 *
 * Metrics (DESIGN.md section 5 targets in brackets):
 *   reserve_finish_16keys_ns   reserve_write + finish_write of 16 new keys [<= 5 us]
 *   prefetch_l1hit_16keys_ns   submit_prefetch_task with 16 L1 hits, then
 *                              query_prefetch_status [<= 3 us]
 *   read_cycle_16keys_ns       read_prefetched_results enter + exit, then
 *                              finish_read_prefetched, 16 keys
 *   cycle_ops_per_s_2threads   full cycles per second from 2 threads, one
 *                              cycle = reserve + finish + prefetch + query +
 *                              read enter/exit + finish_read of 16 keys
 * The StorageManager has a 1 GiB L1, LRU, no L2; objects are 4 KiB.
 *
 *   resp_store_gbps / resp_load_gbps   GB/s (1e9 bytes) of "resp" L2 adapter
 *                              store and load tasks (64 objects x 256 KiB
 *                              each, 4 with --quick; 4 tasks in flight) against a private
 *                              redis-server child on a free loopback port,
 *                              started here and killed at the end (a note
 *                              instead when redis-server is not installed).
 *   resp_cluster_store_gbps / resp_cluster_load_gbps   the same tasks in
 *                              cluster mode against a Redis Cluster of 3
 *                              masters (redis-server children, created with
 *                              redis-cli), so the keys of a task are spread
 *                              over 3 nodes and pipelined per node.
 */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/clock.h"
#include "core/json.h"
#include "l2/adapter.h"
#include "l2/redis_local.h"
#include "lmcache/storage_manager.h"
#include "storage/config.h"

#define NKEYS 16

static lmc_storage_manager *make_sm(void)
{
    char *argv[] = {"sm", "--l1-size-gb", "1", "--eviction-policy", "LRU", NULL};
    lmc_sm_config cfg;
    lmc_error err;
    lmc_sm_config_init(&cfg);
    if (lmc_sm_config_parse_all(&cfg, 5, argv, &err) != LMC_OK) {
        fprintf(stderr, "bench sm: %s\n", err.msg);
        lmc_sm_config_free(&cfg);
        return NULL;
    }
    lmc_storage_manager *sm = NULL;
    if (lmc_sm_create(&cfg, &sm, &err) != LMC_OK)
        fprintf(stderr, "bench sm: %s\n", err.msg);
    lmc_sm_config_free(&cfg);
    return sm;
}

static void make_keys(lmc_object_key *keys, size_t n, uint64_t base)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t h[32] = {0};
        uint64_t v = base + i;
        memcpy(h, &v, sizeof(v));
        lmc_object_key_make(&keys[i], h, sizeof(h), "bench/model", 0x01000100, 0, "", NULL);
    }
}

static lmc_layout_desc layout_4k(void)
{
    lmc_layout_desc d;
    int64_t dims[1] = {4096};
    lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_UINT8, NULL);
    return d;
}

/* The cost of reading the clock twice, subtracted from per-call timings. */
static double clock_overhead_ns(void)
{
    uint64_t t0 = lmc_mono_ns();
    uint64_t x = 0;
    for (int i = 0; i < 100000; i++)
        x += lmc_mono_ns();
    (void)x;
    return (double)(lmc_mono_ns() - t0) / 100000.0;
}

static double bench_reserve_finish(lmc_storage_manager *sm, size_t iters)
{
    lmc_layout_desc layout = layout_4k();
    lmc_object_key *keys = malloc(iters * NKEYS * sizeof(*keys));
    if (keys == NULL)
        return -1;
    make_keys(keys, iters * NKEYS, 1000000);
    lmc_l1_error errs[NKEYS];
    lmc_memory_obj objs[NKEYS];
    uint64_t t0 = lmc_mono_ns();
    for (size_t i = 0; i < iters; i++) {
        lmc_sm_reserve_write(sm, &keys[i * NKEYS], NKEYS, &layout, LMC_WRITE_NEW, errs, objs);
        lmc_sm_finish_write(sm, &keys[i * NKEYS], NKEYS, errs);
    }
    double ns = (double)(lmc_mono_ns() - t0) / (double)iters;
    lmc_sm_clear(sm, true);
    free(keys);
    return ns;
}

static void store_keys(lmc_storage_manager *sm, const lmc_object_key *keys)
{
    lmc_layout_desc layout = layout_4k();
    lmc_l1_error errs[NKEYS];
    lmc_memory_obj objs[NKEYS];
    lmc_sm_reserve_write(sm, keys, NKEYS, &layout, LMC_WRITE_NEW, errs, objs);
    lmc_sm_finish_write(sm, keys, NKEYS, errs);
}

static double bench_prefetch_hit(lmc_storage_manager *sm, size_t iters, double overhead)
{
    lmc_layout_desc layout = layout_4k();
    lmc_object_key keys[NKEYS];
    make_keys(keys, NKEYS, 42);
    store_keys(sm, keys);
    uint64_t total = 0;
    for (size_t i = 0; i < iters; i++) {
        lmc_prefetch_handle h;
        lmc_bitmap bm;
        uint64_t t0 = lmc_mono_ns();
        lmc_sm_submit_prefetch_task(sm, keys, NKEYS, &layout, 0, "bench", LMC_TRIM_PREFIX, &h,
                                    NULL);
        lmc_status st = lmc_sm_query_prefetch_status(sm, &h, &bm);
        total += lmc_mono_ns() - t0;
        if (st == LMC_OK)
            lmc_bitmap_free(&bm);
        lmc_prefetch_handle_clear(&h);
        lmc_sm_finish_read_prefetched(sm, keys, NKEYS, 0, NULL);
    }
    lmc_sm_clear(sm, true);
    return (double)total / (double)iters - overhead;
}

static double bench_read_cycle(lmc_storage_manager *sm, size_t iters, double overhead)
{
    lmc_layout_desc layout = layout_4k();
    lmc_object_key keys[NKEYS];
    make_keys(keys, NKEYS, 77);
    store_keys(sm, keys);
    uint64_t total = 0;
    for (size_t i = 0; i < iters; i++) {
        lmc_prefetch_handle h;
        lmc_sm_submit_prefetch_task(sm, keys, NKEYS, &layout, 0, "bench", LMC_TRIM_PREFIX, &h,
                                    NULL);
        lmc_prefetch_handle_clear(&h);
        uint64_t t0 = lmc_mono_ns();
        lmc_sm_read_ctx ctx;
        lmc_sm_read_prefetched_enter(sm, keys, NKEYS, &ctx);
        lmc_sm_read_prefetched_exit(sm, &ctx, false);
        lmc_sm_finish_read_prefetched(sm, keys, NKEYS, 0, NULL);
        total += lmc_mono_ns() - t0;
    }
    lmc_sm_clear(sm, true);
    return (double)total / (double)iters - overhead;
}

typedef struct worker {
    lmc_storage_manager *sm;
    uint64_t base;
    uint64_t deadline_ns;
    uint64_t cycles;
} worker;

static void *cycle_worker(void *arg)
{
    worker *w = arg;
    lmc_layout_desc layout = layout_4k();
    lmc_object_key keys[NKEYS];
    lmc_l1_error errs[NKEYS];
    lmc_memory_obj objs[NKEYS];
    uint64_t n = 0;
    while (lmc_mono_ns() < w->deadline_ns) {
        make_keys(keys, NKEYS, w->base + (n % 4096) * NKEYS);
        lmc_sm_reserve_write(w->sm, keys, NKEYS, &layout, LMC_WRITE_ALL, errs, objs);
        lmc_sm_finish_write(w->sm, keys, NKEYS, errs);
        lmc_prefetch_handle h;
        lmc_bitmap bm;
        lmc_sm_submit_prefetch_task(w->sm, keys, NKEYS, &layout, 0, "bench", LMC_TRIM_PREFIX,
                                    &h, NULL);
        if (lmc_sm_query_prefetch_status(w->sm, &h, &bm) == LMC_OK)
            lmc_bitmap_free(&bm);
        lmc_prefetch_handle_clear(&h);
        lmc_sm_read_ctx ctx;
        lmc_sm_read_prefetched_enter(w->sm, keys, NKEYS, &ctx);
        lmc_sm_read_prefetched_exit(w->sm, &ctx, false);
        lmc_sm_finish_read_prefetched(w->sm, keys, NKEYS, 0, NULL);
        n++;
    }
    w->cycles = n;
    return NULL;
}

static double bench_cycles_2threads(lmc_storage_manager *sm, double seconds)
{
    worker w[2];
    pthread_t t[2];
    uint64_t start = lmc_mono_ns();
    uint64_t deadline = start + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < 2; i++) {
        w[i] = (worker){.sm = sm, .base = (uint64_t)(i + 1) << 40, .deadline_ns = deadline};
        pthread_create(&t[i], NULL, cycle_worker, &w[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    double elapsed = (double)(lmc_mono_ns() - start) / 1e9;
    lmc_sm_clear(sm, true);
    return (double)(w[0].cycles + w[1].cycles) / elapsed;
}

/* ------------------------------------------------------------------ */
/* resp adapter throughput against a private redis-server               */
/* ------------------------------------------------------------------ */

#define RESP_OBJ (256u * 1024u)
#define RESP_KEYS 64u
#define RESP_TASKS 4u

/* Submit RESP_TASKS store (or load) tasks of nk keys each and wait for all; GB/s, or -1. */
static double resp_round(lmc_l2_adapter *a, bool load, const lmc_object_key *keys,
                         lmc_memory_obj *objs, size_t nk)
{
    uint64_t ids[RESP_TASKS];
    size_t done = 0;
    bool ok = true;
    uint64_t t0 = lmc_mono_ns();
    for (size_t t = 0; t < RESP_TASKS; t++) {
        lmc_status st =
            load ? lmc_l2_adapter_submit_load(a, &keys[t * nk], &objs[t * nk], nk, &ids[t])
                 : lmc_l2_adapter_submit_store(a, &keys[t * nk], &objs[t * nk], nk, &ids[t]);
        if (st != LMC_OK)
            return -1;
    }
    uint64_t deadline = lmc_mono_ms() + 60000;
    bool taken[RESP_TASKS] = {false};
    while (done < RESP_TASKS && lmc_mono_ms() < deadline) {
        struct pollfd p = {load ? lmc_l2_adapter_load_fd(a) : lmc_l2_adapter_store_fd(a), POLLIN,
                           0};
        if (poll(&p, 1, 1000) > 0)
            lmc_l2_drain_fd(p.fd);
        if (!load) {
            lmc_l2_store_result *r = NULL;
            size_t n = lmc_l2_adapter_pop_completed_stores(a, &r);
            for (size_t i = 0; i < n; i++)
                ok = ok && lmc_l2_store_ok(r[i].result);
            done += n;
            free(r);
            continue;
        }
        for (size_t t = 0; t < RESP_TASKS; t++) {
            lmc_bitmap bm;
            if (taken[t] || !lmc_l2_adapter_take_load_result(a, ids[t], &bm))
                continue;
            taken[t] = true;
            ok = ok && lmc_bitmap_count_leading_ones(&bm) == nk;
            lmc_bitmap_free(&bm);
            done++;
        }
    }
    double secs = (double)(lmc_mono_ns() - t0) / 1e9;
    if (!ok || done < RESP_TASKS)
        return -1;
    return (double)RESP_TASKS * (double)nk * RESP_OBJ / secs / 1e9;
}

/* What one resp measurement runs against: its adapter config and how to empty it. */
typedef struct resp_target {
    const char *store_metric, *load_metric;
    const char *json;
    bool (*flush)(void *ud); /* between rounds: SET NX of a present key would write nothing */
    void *ud;
} resp_target;

static bool flush_server(void *ud)
{
    return lmc_redis_command_ok(((const lmc_redis_server *)ud)->port, "FLUSHALL");
}

static bool flush_cluster(void *ud)
{
    return lmc_redis_cluster_flushall(ud);
}

static void bench_resp_on(const lmc_bench_ctx *ctx, const resp_target *tg, double *store_v,
                          double *load_v)
{
    /* RESP_KEYS per task; fewer in a quick run (the shape stays, the volume shrinks). */
    size_t nk = (size_t)(RESP_KEYS * ctx->scale);
    nk = nk < 4 ? 4 : nk > RESP_KEYS ? RESP_KEYS : nk;
    size_t nobj = RESP_TASKS * nk;
    lmc_object_key *keys = calloc(nobj, sizeof(*keys));
    lmc_memory_obj *src = calloc(nobj, sizeof(*src));
    lmc_memory_obj *dst = calloc(nobj, sizeof(*dst));
    uint8_t *src_buf = malloc(RESP_OBJ * nk); /* shared by the tasks: only keys differ */
    uint8_t *dst_buf = malloc((size_t)RESP_OBJ * nobj);
    lmc_json *cfg = NULL;
    lmc_l2_adapter *a = NULL;
    lmc_error err;
    if (keys == NULL || src == NULL || dst == NULL || src_buf == NULL || dst_buf == NULL ||
        lmc_json_parse(tg->json, strlen(tg->json), &cfg, NULL) != LMC_OK ||
        lmc_l2_adapter_create(cfg, &a, &err) != LMC_OK) {
        lmc_bench_note(ctx, tg->store_metric, "could not set up the resp adapter");
        lmc_bench_note(ctx, tg->load_metric, "could not set up the resp adapter");
        goto out;
    }
    for (size_t i = 0; i < RESP_OBJ * nk; i++)
        src_buf[i] = (uint8_t)(i * 131u);
    make_keys(keys, nobj, 5000000);
    for (size_t i = 0; i < nobj; i++) {
        src[i] = (lmc_memory_obj){src_buf + (i % nk) * RESP_OBJ, RESP_OBJ, RESP_OBJ, 0};
        dst[i] = (lmc_memory_obj){dst_buf + i * RESP_OBJ, RESP_OBJ, RESP_OBJ, 0};
    }
    /* One untimed round first (connections warm, Redis's allocator grown). */
    for (int r = -1; r < ctx->repeats; r++) {
        tg->flush(tg->ud);
        double s = resp_round(a, false, keys, src, nk);
        double l = resp_round(a, true, keys, dst, nk);
        if (r >= 0) {
            store_v[r] = s;
            load_v[r] = l;
        }
    }
    lmc_bench_report_trials(ctx, tg->store_metric, store_v, (size_t)ctx->repeats, "GB/s");
    lmc_bench_report_trials(ctx, tg->load_metric, load_v, (size_t)ctx->repeats, "GB/s");
out:
    lmc_l2_adapter_destroy(a);
    lmc_json_free(cfg);
    free(keys);
    free(src);
    free(dst);
    free(src_buf);
    free(dst_buf);
}

/* The same shape against one redis-server, then against a 3-master Redis Cluster. */
static void bench_resp(const lmc_bench_ctx *ctx, double *store_v, double *load_v)
{
    char json[512];
    lmc_error err;
    lmc_redis_server srv;
    resp_target one = {"resp_store_gbps", "resp_load_gbps", json, flush_server, &srv};
    if (lmc_redis_server_start(0, NULL, NULL, &srv, &err) == LMC_OK) {
        snprintf(json, sizeof(json), "{\"type\": \"resp\", \"port\": %d, \"connections\": %u}",
                 srv.port, RESP_TASKS);
        bench_resp_on(ctx, &one, store_v, load_v);
        lmc_redis_server_stop(&srv);
    } else {
        lmc_bench_note(ctx, one.store_metric, err.msg);
        lmc_bench_note(ctx, one.load_metric, err.msg);
    }

    lmc_redis_cluster *cl = NULL;
    resp_target three = {"resp_cluster_store_gbps", "resp_cluster_load_gbps", json, flush_cluster,
                         NULL};
    if (lmc_redis_cluster_start(3, 0, NULL, &cl, &err) == LMC_OK) {
        int at = snprintf(json, sizeof(json),
                          "{\"type\": \"resp\", \"cluster\": true, \"connections\": %u, "
                          "\"nodes\": [",
                          RESP_TASKS);
        for (size_t i = 0; i < lmc_redis_cluster_size(cl); i++)
            at += snprintf(json + at, sizeof(json) - (size_t)at, "%s\"127.0.0.1:%d\"",
                           i ? ", " : "", lmc_redis_cluster_port(cl, i));
        snprintf(json + at, sizeof(json) - (size_t)at, "]}");
        three.ud = cl;
        bench_resp_on(ctx, &three, store_v, load_v);
        lmc_redis_cluster_stop(cl);
    } else {
        lmc_bench_note(ctx, three.store_metric, err.msg);
        lmc_bench_note(ctx, three.load_metric, err.msg);
    }
}

int lmc_bench_group_sm(const lmc_bench_ctx *ctx)
{
    lmc_storage_manager *sm = make_sm();
    if (sm == NULL)
        return 1;
    double overhead = clock_overhead_ns();
    size_t iters = (size_t)(2000 * ctx->scale) + 100;
    int reps = ctx->repeats;
    double *v = calloc((size_t)reps, sizeof(double));
    if (v == NULL) {
        lmc_sm_destroy(sm);
        return 1;
    }

    /* One untimed pass first: the measured runs should see a warm heap and
     * tables already grown, as a server in steady state does. */
    bench_reserve_finish(sm, iters);
    for (int r = 0; r < reps; r++)
        v[r] = bench_reserve_finish(sm, iters);
    lmc_bench_report_trials(ctx, "reserve_finish_16keys_ns", v, (size_t)reps, "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_prefetch_hit(sm, iters, overhead);
    lmc_bench_report_trials(ctx, "prefetch_l1hit_16keys_ns", v, (size_t)reps, "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_read_cycle(sm, iters, overhead);
    lmc_bench_report_trials(ctx, "read_cycle_16keys_ns", v, (size_t)reps, "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_cycles_2threads(sm, 0.5 * ctx->scale + 0.05);
    lmc_bench_report_trials(ctx, "cycle_ops_per_s_2threads", v, (size_t)reps, "cycles/s");

    double *v2 = calloc((size_t)reps, sizeof(double));
    if (v2 != NULL)
        bench_resp(ctx, v, v2);
    free(v2);

    free(v);
    lmc_sm_destroy(sm);
    return 0;
}
