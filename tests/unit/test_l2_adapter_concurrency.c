/*
 * test_l2_adapter_concurrency.c -- several threads drive one adapter at
 * once (as the store, prefetch and eviction controllers do): stores,
 * lookups with their unlocks, loads, deletes and status reads on
 * overlapping keys. Afterwards the accounting must still add up: deleting
 * every key brings the usage back to exactly 0 and leaves nothing behind.
 * Meant to run under TSan (the "concurrency" label).
 *
 * Results are waited for by polling the take functions, not the eventfds:
 * with several waiters one thread may drain the fd another is waiting on.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"

enum { THREADS = 4, ITERS = 300, KEYS = 24, MAX_SIZE = 2048 };

typedef struct shared {
    lmc_l2_adapter *a;
    atomic_size_t stores_submitted;
    atomic_size_t stores_collected;
    atomic_bool failed;
} shared;

typedef struct worker_arg {
    shared *s;
    unsigned seed;
    uint8_t *src; /* must outlive the thread's stores, so hammer() owns it */
} worker_arg;

static lmc_object_key key_of(unsigned i)
{
    return l2_key("conc/model", i, 0, 0, i % 3 == 0 ? "salty" : NULL);
}

static size_t size_of(unsigned i)
{
    return 100 + (i * 37) % (MAX_SIZE - 100);
}

static void collect_stores(shared *s)
{
    lmc_l2_store_result *r = NULL;
    size_t n = lmc_l2_adapter_pop_completed_stores(s->a, &r);
    for (size_t i = 0; i < n; i++) {
        if (!lmc_l2_store_ok(r[i].result))
            atomic_store(&s->failed, true);
    }
    free(r);
    atomic_fetch_add(&s->stores_collected, n);
}

static void *worker(void *p)
{
    worker_arg *w = p;
    shared *s = w->s;
    const uint8_t *src = w->src;
    uint8_t *dst = malloc(MAX_SIZE);
    for (int it = 0; it < ITERS && !atomic_load(&s->failed); it++) {
        unsigned k = (unsigned)rand_r(&w->seed) % KEYS;
        lmc_object_key key = key_of(k);
        lmc_memory_obj obj = {(uint8_t *)src, size_of(k), MAX_SIZE, 0};
        lmc_memory_obj out = {dst, size_of(k), MAX_SIZE, 0};
        uint64_t id;
        lmc_bitmap bm;
        switch (rand_r(&w->seed) % 6) {
        case 0:
        case 1:
            if (lmc_l2_adapter_submit_store(s->a, &key, &obj, 1, &id) == LMC_OK)
                atomic_fetch_add(&s->stores_submitted, 1);
            collect_stores(s);
            break;
        case 2:
            if (lmc_l2_adapter_submit_lookup(s->a, &key, 1, &id) != LMC_OK ||
                !l2_poll_take(s->a, lmc_l2_adapter_take_lookup_result, id, &bm)) {
                atomic_store(&s->failed, true);
                break;
            }
            /* a locked key must survive a concurrent delete until it is unlocked */
            if (lmc_bitmap_test(&bm, 0))
                lmc_l2_adapter_submit_unlock(s->a, &key, 1);
            lmc_bitmap_free(&bm);
            break;
        case 3:
            if (lmc_l2_adapter_submit_load(s->a, &key, &out, 1, &id) != LMC_OK ||
                !l2_poll_take(s->a, lmc_l2_adapter_take_load_result, id, &bm)) {
                atomic_store(&s->failed, true);
                break;
            }
            if (lmc_bitmap_test(&bm, 0) && memcmp(dst, src, out.size) != 0)
                atomic_store(&s->failed, true); /* a hit must carry the stored bytes */
            lmc_bitmap_free(&bm);
            break;
        case 4:
            lmc_l2_adapter_delete(s->a, &key, 1);
            break;
        case 5: {
            lmc_json *st = lmc_l2_adapter_report_status(s->a);
            lmc_json_free(st);
            lmc_l2_salt_usage *u = NULL;
            lmc_l2_adapter_salt_usages(s->a, &u);
            free(u);
            (void)lmc_l2_adapter_get_usage(s->a);
            break;
        }
        }
    }
    free(dst);
    return NULL;
}

static void hammer(lmc_l2_adapter *a)
{
    shared s = {.a = a};
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){&s, (unsigned)(i + 1) * 7919u, malloc(MAX_SIZE)};
        assert_non_null(args[i].src);
        for (size_t j = 0; j < MAX_SIZE; j++)
            args[i].src[j] = (uint8_t)(j * 13);
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    uint64_t deadline = lmc_mono_ns() + (uint64_t)L2_WAIT_MS * 1000000u;
    while (atomic_load(&s.stores_collected) < atomic_load(&s.stores_submitted) &&
           lmc_mono_ns() < deadline) {
        collect_stores(&s);
        lmc_sleep_ns(1000000);
    }
    assert_false(atomic_load(&s.failed));
    assert_int_equal(atomic_load(&s.stores_collected), atomic_load(&s.stores_submitted));
    for (int i = 0; i < THREADS; i++)
        free(args[i].src);

    lmc_object_key all[KEYS];
    for (unsigned i = 0; i < KEYS; i++)
        all[i] = key_of(i);
    lmc_l2_adapter_delete(a, all, KEYS);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    assert_int_equal(lmc_l2_adapter_salt_bytes(a, "salty"), 0);
}

static void test_fs_survives_concurrent_controllers(void **state)
{
    (void)state;
    char dir[64];
    assert_true(l2_tmpdir(dir));
    lmc_l2_adapter *a = l2_adapter_from(
        NULL, "{\"type\": \"fs\", \"base_path\": \"%s\", \"max_capacity_gb\": 1}", dir);
    assert_non_null(a);
    hammer(a);
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(st, "files_tracked")), 0);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(st, "locked_keys")), 0);
    lmc_json_free(st);
    lmc_l2_adapter_destroy(a);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    size_t left = 0;
    while ((de = readdir(d)) != NULL)
        left += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(left, 0);
    l2_rmtree(dir);
}

static void test_mock_survives_concurrent_controllers(void **state)
{
    (void)state;
    lmc_l2_adapter *a = l2_adapter_from(
        NULL, "{\"type\": \"mock\", \"max_size_gb\": 1, \"mock_bandwidth_gb\": 10}");
    assert_non_null(a);
    hammer(a);
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(st, "num_objects")), 0);
    lmc_json_free(st);
    lmc_l2_adapter_destroy(a);
}

int main(void)
{
    lmc_log_set_level(LMC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_survives_concurrent_controllers),
        cmocka_unit_test(test_mock_survives_concurrent_controllers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
