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
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/clock.h"
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
        lmc_sm_query_prefetch_status(sm, &h, &bm);
        total += lmc_mono_ns() - t0;
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
        if (lmc_sm_query_prefetch_status(w->sm, &h, &bm))
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
    lmc_bench_report(ctx, "reserve_finish_16keys_ns", lmc_bench_median(v, (size_t)reps), "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_prefetch_hit(sm, iters, overhead);
    lmc_bench_report(ctx, "prefetch_l1hit_16keys_ns", lmc_bench_median(v, (size_t)reps), "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_read_cycle(sm, iters, overhead);
    lmc_bench_report(ctx, "read_cycle_16keys_ns", lmc_bench_median(v, (size_t)reps), "ns");
    for (int r = 0; r < reps; r++)
        v[r] = bench_cycles_2threads(sm, 0.5 * ctx->scale + 0.05);
    lmc_bench_report(ctx, "cycle_ops_per_s_2threads", lmc_bench_median(v, (size_t)reps),
                     "cycles/s");

    free(v);
    lmc_sm_destroy(sm);
    return 0;
}
