/*
 * test_storage_manager_concurrency.c -- several threads running store,
 * prefetch and read cycles on shared keys through one StorageManager with
 * an L2 adapter, with the eviction and controller threads running too.
 * Runs under ThreadSanitizer in CI (the _concurrency suffix).
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "helpers/sm_test_util.h"
#include "lmcache/storage_manager.h"

enum { NTHREADS = 4, NKEYS = 48, BATCH = 6 };

typedef struct shared {
    lmc_storage_manager *sm;
    lmc_object_key keys[NKEYS];
    lmc_layout_desc layout;
    uint64_t deadline_ms;
    atomic_ulong corrupt;
    atomic_ulong cycles;
    atomic_ulong reads_ok;
} shared;

typedef struct worker {
    shared *s;
    unsigned seed;
} worker;

static void pick(worker *w, lmc_object_key *out)
{
    size_t start = (size_t)rand_r(&w->seed) % (NKEYS - BATCH);
    memcpy(out, &w->s->keys[start], BATCH * sizeof(*out));
}

static void do_store(worker *w)
{
    lmc_object_key k[BATCH];
    pick(w, k);
    lmc_l1_error errs[BATCH];
    lmc_memory_obj objs[BATCH];
    lmc_sm_reserve_write(w->s->sm, k, BATCH, &w->s->layout, LMC_WRITE_NEW, errs, objs);
    lmc_object_key good[BATCH];
    size_t ng = 0;
    for (size_t i = 0; i < BATCH; i++) {
        if (errs[i] != LMC_L1_SUCCESS)
            continue;
        for (uint64_t b = 0; b < objs[i].size; b++)
            objs[i].data[b] = sm_test_pattern(&k[i], b);
        good[ng++] = k[i];
    }
    lmc_sm_finish_write(w->s->sm, good, ng, NULL);
}

static void do_read(worker *w)
{
    lmc_object_key k[BATCH];
    pick(w, k);
    lmc_prefetch_handle h;
    if (lmc_sm_submit_prefetch_task(w->s->sm, k, BATCH, &w->s->layout, 0, "c", LMC_TRIM_PREFIX,
                                    &h, NULL) != LMC_OK)
        return;
    lmc_bitmap bm;
    uint64_t deadline = lmc_mono_ms() + 5000;
    bool ready;
    while (!(ready = (lmc_sm_query_prefetch_status(w->s->sm, &h, &bm) == LMC_OK)) &&
           lmc_mono_ms() < deadline)
        lmc_sleep_ns(100 * 1000);
    assert_true(ready);
    size_t hit = lmc_bitmap_count_leading_ones(&bm);
    lmc_bitmap_free(&bm);
    if (hit > 0) {
        lmc_sm_read_ctx ctx;
        assert_int_equal(lmc_sm_read_prefetched_enter(w->s->sm, k, hit, &ctx), LMC_OK);
        if (ctx.ok) {
            for (size_t i = 0; i < hit; i++) {
                for (uint64_t b = 0; b < ctx.objs[i].size; b += 509) {
                    if (ctx.objs[i].data[b] != sm_test_pattern(&k[i], b))
                        atomic_fetch_add(&w->s->corrupt, 1);
                }
            }
            atomic_fetch_add(&w->s->reads_ok, 1);
            lmc_sm_read_prefetched_exit(w->s->sm, &ctx, false);
            lmc_sm_finish_read_prefetched(w->s->sm, k, hit, 0, NULL);
        } else {
            lmc_sm_read_prefetched_exit(w->s->sm, &ctx, false);
        }
    }
    /* Keys past the prefix that L1 had were released by submit itself. */
    lmc_sm_touch_l1_keys(w->s->sm, k, BATCH);
    lmc_prefetch_handle_clear(&h);
}

static void *run(void *arg)
{
    worker *w = arg;
    while (lmc_mono_ms() < w->s->deadline_ms) {
        int op = rand_r(&w->seed) % 10;
        if (op < 4)
            do_store(w);
        else if (op < 9)
            do_read(w);
        else
            lmc_sm_clear(w->s->sm, false);
        atomic_fetch_add(&w->s->cycles, 1);
    }
    return NULL;
}

static void test_threads_store_prefetch_and_read_shared_keys(void **state)
{
    (void)state;
    /* A small L1 keeps eviction busy; the mock L2 keeps the controllers busy. */
    char *argv[] = {"t", "--l1-size-gb", "0.001", "--eviction-policy", "LRU",
                    "--eviction-trigger-watermark", "0.5", "--l2-adapter",
                    "{\"type\": \"mock\", \"max_size_gb\": 0.05, \"mock_bandwidth_gb\": 5}",
                    NULL};
    shared *s = calloc(1, sizeof(*s));
    s->sm = sm_test_create_argv(9, argv);
    sm_test_keys(s->keys, NKEYS, 123456);
    s->layout = sm_test_layout(8 * 1024);
    s->deadline_ms = lmc_mono_ms() + 2500;

    pthread_t t[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){.s = s, .seed = 1000u + (unsigned)i};
        assert_int_equal(pthread_create(&t[i], NULL, run, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);

    assert_true(lmc_sm_wait_idle(s->sm, 10000));
    assert_int_equal(atomic_load(&s->corrupt), 0);
    assert_true(atomic_load(&s->cycles) > 100);
    assert_true(atomic_load(&s->reads_ok) > 0);
    char why[256] = "";
    if (!lmc_sm_memcheck(s->sm, why, sizeof(why)))
        fail_msg("memcheck: %s", why);
    /* Every lock was released: a non-forced clear empties L1. */
    lmc_sm_clear(s->sm, false);
    uint64_t used, total;
    lmc_sm_l1_usage(s->sm, &used, &total);
    assert_int_equal(used, 0);
    lmc_sm_destroy(s->sm);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_store_prefetch_and_read_shared_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
