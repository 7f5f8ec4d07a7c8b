/*
 * test_prefetch_controller.c -- unit tests for the L2 -> L1 prefetch
 * controller (spec/storage-manager.md §10).
 *
 * Every test builds a real L1 manager with a small pool and real adapters
 * ("mock" and "fs"), preloads L2 by storing plain heap buffers straight
 * into the adapter, and then drives the controller through its public API.
 * Results are polled with a bounded wait (1 ms steps, at most 5 s), so a
 * bug shows up as a failure, never as a hang.
 *
 * Whether an L2 lookup lock is still held is observed two ways: both
 * adapters report "locked_keys" in their status, and the fs adapter's
 * delete skips locked keys, so a key whose lock was released can be
 * deleted and is then no longer found by a lookup.
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
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "core/log.h"
#include "helpers/l2_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "storage/l1_manager.h"
#include "storage/prefetch_controller.h"

#define SLOT 4096u      /* one object: 1024 float32 */
#define POOL (4u << 20) /* 4 MiB L1 pool */
#define WAIT_MS 5000u   /* bound on every wait */
#define MOCK_FAST "{\"type\": \"mock\", \"max_size_gb\": 0.01, \"mock_bandwidth_gb\": 10}"

/* ------------------------------------------------------------------------ */
/* Fixture helpers                                                          */
/* ------------------------------------------------------------------------ */

static lmc_object_key key_of(uint32_t i)
{
    uint8_t h[4] = {(uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
    lmc_object_key k;
    assert_int_equal(lmc_object_key_make(&k, h, 4, "pf-model", 0, 0, NULL, NULL), LMC_OK);
    return k;
}

static void keys_of(const uint32_t *ids, size_t n, lmc_object_key *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = key_of(ids[i]);
}

static lmc_layout_desc layout_one_slot(void)
{
    lmc_layout_desc d;
    int64_t dims[1] = {SLOT / 4};
    assert_int_equal(lmc_layout_desc_make1(&d, dims, 1, LMC_DTYPE_FLOAT32, NULL), LMC_OK);
    return d;
}

/* The byte an object of key id holds at offset j, written by the adapter tagged tag. */
static uint8_t pattern(uint32_t id, uint8_t tag, size_t j)
{
    return (uint8_t)(id * 31u + tag * 7u + j);
}

static lmc_l1_manager *make_l1(uint64_t pool_bytes)
{
    lmc_l1_manager_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.memory.size_bytes = pool_bytes;
    cfg.memory.align_bytes = 4096;
    cfg.write_ttl_seconds = 600;
    cfg.read_ttl_seconds = 300;
    lmc_l1_manager *l1 = NULL;
    lmc_error err;
    if (lmc_l1_manager_create(&cfg, &l1, &err) != LMC_OK)
        fail_msg("l1 create: %s", err.msg);
    return l1;
}

static lmc_l2_adapter *make_adapter(const char *json)
{
    lmc_json *cfg = NULL;
    lmc_error err;
    if (lmc_json_parse(json, strlen(json), &cfg, &err) != LMC_OK)
        fail_msg("json '%s': %s", json, err.msg);
    lmc_l2_adapter *a = NULL;
    if (lmc_l2_adapter_create(cfg, &a, &err) != LMC_OK)
        fail_msg("adapter '%s': %s", json, err.msg);
    lmc_json_free(cfg);
    return a;
}

/* A mock whose loads take about ms milliseconds for n_keys one-slot objects. */
static lmc_l2_adapter *make_slow_mock(unsigned ms, unsigned n_keys)
{
    double gb = (double)n_keys * SLOT / (ms / 1000.0) / (1024.0 * 1024.0 * 1024.0);
    char json[160];
    snprintf(json, sizeof(json),
             "{\"type\": \"mock\", \"max_size_gb\": 0.01, \"mock_bandwidth_gb\": %.12f}", gb);
    return make_adapter(json);
}

/* An fs adapter in a fresh temporary directory (dir receives its path). */
static lmc_l2_adapter *make_fs(char dir[64])
{
    strcpy(dir, "/tmp/lmc-pf-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char json[200];
    /* A capacity turns on lock tracking, so delete skips locked keys. */
    snprintf(json, sizeof(json),
             "{\"type\": \"fs\", \"base_path\": \"%s\", \"max_capacity_gb\": 0.01}", dir);
    return make_adapter(json);
}

static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            rm_rf(path);
    }
    closedir(d);
    rmdir(dir);
}

/* Store keys ids into adapter a (bytes by pattern(id, tag)) and wait for the store. */
static void l2_put(lmc_l2_adapter *a, const uint32_t *ids, size_t n, uint8_t tag)
{
    lmc_object_key keys[16];
    lmc_memory_obj objs[16];
    assert_true(n <= 16);
    uint8_t *buf = malloc(n * SLOT);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        keys[i] = key_of(ids[i]);
        for (size_t j = 0; j < SLOT; j++)
            buf[i * SLOT + j] = pattern(ids[i], tag, j);
        objs[i] = (lmc_memory_obj){
            .data = buf + i * SLOT, .size = SLOT, .phys_size = SLOT, .offset = i * SLOT};
    }
    uint64_t task = 0;
    assert_int_equal(lmc_l2_adapter_submit_store(a, keys, objs, n, &task), LMC_OK);
    bool done = false;
    for (unsigned t = 0; t < WAIT_MS && !done; t++) {
        struct pollfd p = {.fd = lmc_l2_adapter_store_fd(a), .events = POLLIN};
        if (poll(&p, 1, 1) > 0)
            lmc_l2_drain_fd(p.fd);
        lmc_l2_store_result *res = NULL;
        size_t k = lmc_l2_adapter_pop_completed_stores(a, &res);
        for (size_t i = 0; i < k; i++) {
            if (res[i].task_id == task) {
                assert_true(lmc_l2_store_ok(res[i].result));
                done = true;
            }
        }
        free(res);
    }
    assert_true(done);
    free(buf);
}

/* Lookup ids on a (taking and then releasing locks); bit i set when ids[i] is found. */
static lmc_bitmap l2_lookup(lmc_l2_adapter *a, const uint32_t *ids, size_t n)
{
    lmc_object_key keys[16];
    assert_true(n <= 16);
    keys_of(ids, n, keys);
    return l2_holds(a, keys, n);
}

/*
 * True when key id is in adapter a and not locked: delete removes it (a
 * locked key survives delete). Unlocks are asynchronous, so retry until
 * the key is gone or the bound passes. Destroys the key.
 */
static bool l2_delete_succeeds(lmc_l2_adapter *a, uint32_t id)
{
    lmc_object_key k = key_of(id);
    for (unsigned t = 0; t < WAIT_MS; t++) {
        lmc_l2_adapter_delete(a, &k, 1);
        lmc_bitmap bm = l2_lookup(a, &id, 1);
        bool present = lmc_bitmap_test(&bm, 0);
        lmc_bitmap_free(&bm);
        if (!present)
            return true;
        lmc_sleep_ns(1000 * 1000);
    }
    return false;
}

/* delete must NOT remove a locked key: check for a short while that it stays. */
static bool l2_delete_blocked(lmc_l2_adapter *a, uint32_t id)
{
    lmc_object_key k = key_of(id);
    lmc_l2_adapter_delete(a, &k, 1);
    lmc_bitmap bm = l2_lookup(a, &id, 1);
    bool present = lmc_bitmap_test(&bm, 0);
    lmc_bitmap_free(&bm);
    return present;
}

static int64_t status_int(lmc_json *st, const char *field);

/* Every lookup lock on a has been released (unlocks are synchronous in fs and mock). */
static void assert_no_l2_locks(lmc_l2_adapter *a)
{
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_non_null(st);
    int64_t locked = status_int(st, "locked_keys");
    lmc_json_free(st);
    if (locked != 0)
        fail_msg("L2 adapter '%s' still holds %lld lookup locks", lmc_l2_adapter_type(a),
                 (long long)locked);
}

static int64_t submit(lmc_prefetch_controller *pc, const uint32_t *ids, size_t n,
                      uint32_t extra_count, lmc_trim_policy policy)
{
    lmc_object_key keys[64];
    assert_true(n <= 64);
    keys_of(ids, n, keys);
    lmc_layout_desc layout = layout_one_slot();
    int64_t id = -1;
    assert_int_equal(lmc_prefetch_controller_submit(pc, keys, n, &layout, extra_count, policy, &id),
                     LMC_OK);
    return id;
}

static lmc_bitmap wait_result(lmc_prefetch_controller *pc, int64_t id)
{
    lmc_bitmap bm = {0, NULL};
    for (unsigned t = 0; t < WAIT_MS; t++) {
        if (lmc_prefetch_controller_take_result(pc, id, &bm) == LMC_OK)
            return bm;
        lmc_sleep_ns(1000 * 1000);
    }
    fail_msg("request %lld did not complete within %u ms", (long long)id, WAIT_MS);
    return bm;
}

/* Wait until the request has completed, without taking the result. */
static void wait_done(lmc_prefetch_controller *pc)
{
    for (unsigned t = 0; t < WAIT_MS; t++) {
        if (lmc_prefetch_controller_busy(pc) == 0)
            return;
        lmc_sleep_ns(1000 * 1000);
    }
    fail_msg("prefetch controller still busy after %u ms", WAIT_MS);
}

static void assert_bits(const lmc_bitmap *bm, const char *expected)
{
    char buf[128];
    lmc_bitmap_to_string(bm, buf, sizeof(buf));
    assert_string_equal(buf, expected);
}

static void assert_l1_holds(lmc_l1_manager *l1, uint32_t id, uint8_t tag)
{
    lmc_object_key k = key_of(id);
    lmc_l1_error e;
    lmc_memory_obj o;
    lmc_l1_unsafe_read(l1, &k, 1, &e, &o);
    assert_int_equal(e, LMC_L1_SUCCESS);
    assert_int_equal(o.size, SLOT);
    for (size_t j = 0; j < SLOT; j++) {
        if (o.data[j] != pattern(id, tag, j))
            fail_msg("key %u byte %zu: got %u, want %u", id, j, o.data[j], pattern(id, tag, j));
    }
}

static void assert_memcheck(lmc_l1_manager *l1)
{
    char why[256] = "";
    if (!lmc_l1_memcheck(l1, why, sizeof(why)))
        fail_msg("L1 memcheck: %s", why);
}

static int64_t status_int(lmc_json *st, const char *field)
{
    lmc_json *v = lmc_json_object_get(st, field);
    if (v == NULL)
        fail_msg("status has no field '%s'", field);
    return lmc_json_get_int(v);
}

static void finish_read(lmc_l1_manager *l1, const uint32_t *ids, size_t n, uint32_t extra)
{
    lmc_object_key keys[64];
    lmc_l1_error errs[64];
    assert_true(n <= 64);
    memset(keys, 0, sizeof(keys)); /* GCC cannot see that keys_of fills it */
    keys_of(ids, n, keys);
    lmc_l1_finish_read(l1, keys, n, extra, errs);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], LMC_L1_SUCCESS);
}

static lmc_prefetch_controller *make_pc(lmc_l1_manager *l1, lmc_l2_adapter **ad, size_t n,
                                        const char *policy, uint32_t max_in_flight)
{
    lmc_prefetch_controller *pc = NULL;
    lmc_error err;
    if (lmc_prefetch_controller_create(l1, ad, n, policy, max_in_flight, &pc, &err) != LMC_OK)
        fail_msg("prefetch controller create: %s", err.msg);
    return pc;
}

/* Captures WARNING messages from any thread. */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[4096];

static void capture_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)ud;
    (void)component;
    if (level < LMC_LOG_WARNING)
        return;
    pthread_mutex_lock(&g_log_mu);
    size_t len = strlen(g_log);
    snprintf(g_log + len, sizeof(g_log) - len, "%s\n", msg);
    pthread_mutex_unlock(&g_log_mu);
}

static lmc_log_level g_saved_level;

/* Capture warnings whatever LMCACHE_LOG_LEVEL says; capture_stop restores it. */
static void capture_start(void)
{
    pthread_mutex_lock(&g_log_mu);
    g_log[0] = '\0';
    pthread_mutex_unlock(&g_log_mu);
    g_saved_level = lmc_log_get_level();
    lmc_log_set_level(LMC_LOG_WARNING);
    lmc_log_set_sink(capture_sink, NULL);
}

static void capture_stop(void)
{
    lmc_log_set_sink(NULL, NULL);
    lmc_log_set_level(g_saved_level);
}

static bool captured(const char *needle)
{
    pthread_mutex_lock(&g_log_mu);
    bool found = strstr(g_log, needle) != NULL;
    pthread_mutex_unlock(&g_log_mu);
    return found;
}

/* ------------------------------------------------------------------------ */
/* Stalling an adapter or the controller, to catch requests mid-flight      */
/* ------------------------------------------------------------------------ */

/*
 * A plug stalls the fs adapter's single worker: a store whose tmp file is a
 * FIFO blocks in open() until someone opens the FIFO for reading. Every
 * lookup and load submitted meanwhile waits in the queue. unplug() reads
 * the FIFO, the store finishes and the worker moves on.
 */
typedef struct plug {
    char fifo[640];
    uint8_t buf[SLOT];
} plug;

static void plug_fs(plug *p, lmc_l2_adapter *fs, const char *dir, uint32_t id)
{
    lmc_object_key k = key_of(id);
    char name[512];
    size_t len = lmc_l2_fs_key_name(&k, name, sizeof(name));
    assert_true(len > 5 && len < sizeof(name));
    snprintf(p->fifo, sizeof(p->fifo), "%s/%.*s.tmp", dir, (int)(len - 5), name);
    assert_int_equal(mkfifo(p->fifo, 0600), 0);
    memset(p->buf, 0x5A, sizeof(p->buf));
    lmc_memory_obj o = {.data = p->buf, .size = SLOT, .phys_size = SLOT, .offset = 0};
    uint64_t task;
    assert_int_equal(lmc_l2_adapter_submit_store(fs, &k, &o, 1, &task), LMC_OK);
    /* The idle worker picks the store up at once; give it time to block in open(). */
    lmc_sleep_ns(50 * 1000 * 1000);
}

static void unplug(plug *p)
{
    int fd = open(p->fifo, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    uint8_t tmp[SLOT];
    while (read(fd, tmp, sizeof(tmp)) > 0) {
    }
    close(fd);
}

static void *unplug_later(void *arg)
{
    lmc_sleep_ns(150 * 1000 * 1000);
    unplug(arg);
    return NULL;
}

/*
 * Hold the L1 table mutex on a helper thread, so the controller thread
 * stalls at its next L1 call (the reservation of a request's plan).
 */
typedef struct l1_hold {
    lmc_l1_manager *l1;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool held, release;
} l1_hold;

static void hold_cb(lmc_l1_manager *l1, void *ud)
{
    (void)l1;
    l1_hold *h = ud;
    pthread_mutex_lock(&h->mu);
    h->held = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void *hold_main(void *arg)
{
    l1_hold *h = arg;
    lmc_l1_with_lock(h->l1, hold_cb, h);
    return NULL;
}

static void hold_start(l1_hold *h, lmc_l1_manager *l1)
{
    memset(h, 0, sizeof(*h));
    h->l1 = l1;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    assert_int_equal(pthread_create(&h->th, NULL, hold_main, h), 0);
    pthread_mutex_lock(&h->mu);
    while (!h->held)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void hold_release(l1_hold *h)
{
    pthread_mutex_lock(&h->mu);
    h->release = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
}

static int64_t l2_locked(lmc_l2_adapter *a)
{
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_non_null(st);
    int64_t locked = status_int(st, "locked_keys");
    lmc_json_free(st);
    return locked;
}

static void wait_l2_locked(lmc_l2_adapter *a, int64_t want)
{
    for (unsigned t = 0; t < WAIT_MS && l2_locked(a) != want; t++)
        lmc_sleep_ns(1000 * 1000);
    assert_int_equal(l2_locked(a), want);
}

/* ------------------------------------------------------------------------ */
/* Policies and creation                                                    */
/* ------------------------------------------------------------------------ */

static void test_policy_check_accepts_default_and_retain(void **state)
{
    (void)state;
    assert_int_equal(lmc_prefetch_policy_check("default", NULL), LMC_OK);
    assert_int_equal(lmc_prefetch_policy_check("retain", NULL), LMC_OK);
}

static void test_policy_check_rejects_unknown_name(void **state)
{
    (void)state;
    lmc_error err;
    assert_int_equal(lmc_prefetch_policy_check("striped", &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, "unknown prefetch policy 'striped' (expected default or retain)");
}

static void test_create_rejects_unknown_policy_and_zero_max_in_flight(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_prefetch_controller *pc = NULL;
    lmc_error err;
    assert_int_equal(lmc_prefetch_controller_create(l1, NULL, 0, "bogus", 8, &pc, &err),
                     LMC_ERR_INVALID);
    assert_null(pc);
    assert_non_null(strstr(err.msg, "'bogus'"));
    assert_int_equal(lmc_prefetch_controller_create(l1, NULL, 0, "default", 0, &pc, &err),
                     LMC_ERR_INVALID);
    assert_null(pc);
    assert_non_null(strstr(err.msg, "max_in_flight"));
    lmc_l1_manager_destroy(l1);
}

/* ------------------------------------------------------------------------ */
/* Results and ids                                                          */
/* ------------------------------------------------------------------------ */

static void test_no_adapters_completes_at_once_with_zeros(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_prefetch_controller *pc = make_pc(l1, NULL, 0, "default", 8);
    uint32_t ids[] = {0, 1, 2};
    int64_t id = submit(pc, ids, 3, 0, LMC_TRIM_PREFIX);
    assert_int_equal(id, 0);
    assert_int_equal(lmc_prefetch_controller_busy(pc), 0);
    size_t hits = 99;
    assert_true(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    assert_int_equal(hits, 0);
    lmc_bitmap bm;
    assert_int_equal(lmc_prefetch_controller_take_result(pc, id, &bm), LMC_OK);
    assert_bits(&bm, "000");
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    lmc_prefetch_controller_destroy(pc);
    lmc_l1_manager_destroy(l1);
}

static void test_ids_increase_from_zero(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);
    uint32_t ids[] = {7};
    for (int64_t want = 0; want < 5; want++)
        assert_int_equal(submit(pc, ids + 0, want == 2 ? 0 : 1, 0, LMC_TRIM_PREFIX), want);
    for (int64_t id = 0; id < 5; id++) {
        lmc_bitmap bm = wait_result(pc, id);
        assert_int_equal(lmc_bitmap_popcount(&bm), 0);
        lmc_bitmap_free(&bm);
    }
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_take_returns_result_once_and_query_lookup_until_taken(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    uint32_t stored[] = {0, 1};
    l2_put(mock, stored, 2, 1);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);

    uint32_t ids[] = {0, 1, 2};
    int64_t id = submit(pc, ids, 3, 0, LMC_TRIM_PREFIX);
    wait_done(pc);
    size_t hits = 0;
    assert_true(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    assert_int_equal(hits, 2);
    /* Not consumed by the query. */
    assert_true(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    assert_int_equal(hits, 2);

    lmc_bitmap bm;
    assert_int_equal(lmc_prefetch_controller_take_result(pc, id, &bm), LMC_OK);
    assert_bits(&bm, "110");
    lmc_bitmap_free(&bm);
    /* Popped: neither the result nor the lookup count is there any more. */
    assert_int_equal(lmc_prefetch_controller_take_result(pc, id, &bm), LMC_ERR_NOT_FOUND);
    assert_false(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    /* Never-submitted ids are simply unknown. */
    assert_int_equal(lmc_prefetch_controller_take_result(pc, 12345, &bm), LMC_ERR_NOT_FOUND);
    assert_false(lmc_prefetch_controller_query_lookup(pc, -1, &hits));

    finish_read(l1, ids, 2, 0);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

static void test_full_hit_loads_every_key_read_locked_and_temporary(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    uint32_t ids[] = {10, 11, 12, 13};
    l2_put(mock, ids, 4, 3);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);

    int64_t id = submit(pc, ids, 4, 2, LMC_TRIM_PREFIX);
    lmc_bitmap bm = wait_result(pc, id);
    assert_bits(&bm, "1111");
    lmc_bitmap_free(&bm);

    for (size_t i = 0; i < 4; i++) {
        lmc_object_key k = key_of(ids[i]);
        assert_int_equal(lmc_l1_read_lock_count(l1, &k), 3); /* 1 + extra_count */
        assert_l1_holds(l1, ids[i], 3);
    }
    lmc_json *st = lmc_l1_report_status(l1);
    assert_int_equal(status_int(st, "temporary_count"), 4);
    assert_int_equal(status_int(st, "write_locked_count"), 0);
    lmc_json_free(st);

    /* Temporary: the last reader's release frees them. */
    finish_read(l1, ids, 4, 2);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_retain_policy_keeps_objects_after_finish_read(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    uint32_t ids[] = {20, 21, 22};
    l2_put(mock, ids, 3, 4);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "retain", 8);

    lmc_bitmap bm = wait_result(pc, submit(pc, ids, 3, 0, LMC_TRIM_PREFIX));
    assert_bits(&bm, "111");
    lmc_bitmap_free(&bm);
    lmc_json *st = lmc_l1_report_status(l1);
    assert_int_equal(status_int(st, "temporary_count"), 0);
    lmc_json_free(st);

    finish_read(l1, ids, 3, 0);
    assert_int_equal(lmc_l1_object_count(l1), 3);
    for (size_t i = 0; i < 3; i++) {
        lmc_object_key k = key_of(ids[i]);
        assert_true(lmc_l1_contains(l1, &k));
        assert_int_equal(lmc_l1_read_lock_count(l1, &k), 0);
    }
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_nothing_found_completes_with_zeros(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);
    uint32_t ids[] = {30, 31};
    int64_t id = submit(pc, ids, 2, 0, LMC_TRIM_SPARSE);
    lmc_bitmap bm = wait_result(pc, id);
    assert_bits(&bm, "00");
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

/* Keys 0,1 and 3 in L2 (fs), 2 missing. */
static void run_partial_hit(lmc_trim_policy policy, const char *want_bits, size_t want_lookup)
{
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t stored[] = {100, 101, 103};
    l2_put(fs, stored, 3, 5);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 8);

    uint32_t ids[] = {100, 101, 102, 103};
    int64_t id = submit(pc, ids, 4, 0, policy);
    wait_done(pc);
    size_t hits = 0;
    assert_true(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    assert_int_equal(hits, want_lookup);
    lmc_bitmap bm = wait_result(pc, id);
    assert_bits(&bm, want_bits);

    for (size_t i = 0; i < 4; i++) {
        lmc_object_key k = key_of(ids[i]);
        assert_int_equal(lmc_l1_contains(l1, &k), lmc_bitmap_test(&bm, i));
        if (lmc_bitmap_test(&bm, i))
            assert_l1_holds(l1, ids[i], 5);
    }
    /* Key 103 was found by the lookup; either way its L2 lock is gone now. */
    assert_true(l2_delete_succeeds(fs, 103));

    size_t cnt = lmc_bitmap_popcount(&bm);
    uint32_t kept[4];
    size_t k = lmc_bitmap_gather(&bm, ids, 4, sizeof(ids[0]), kept);
    assert_int_equal(k, cnt);
    finish_read(l1, kept, k, 0);
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    assert_true(l2_delete_succeeds(fs, 100));
    assert_true(l2_delete_succeeds(fs, 101));

    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_partial_hit_prefix_keeps_leading_run_and_unlocks_the_rest(void **state)
{
    (void)state;
    run_partial_hit(LMC_TRIM_PREFIX, "1100", 2);
}

static void test_partial_hit_sparse_keeps_every_found_key(void **state)
{
    (void)state;
    run_partial_hit(LMC_TRIM_SPARSE, "1101", 2);
}

static void test_partial_hit_segmented_prefix_keeps_every_found_key(void **state)
{
    (void)state;
    run_partial_hit(LMC_TRIM_SEGMENTED_PREFIX, "1101", 2);
}

static void test_l2_locks_are_held_until_the_load_finishes(void **state)
{
    (void)state;
    /* While a slow load runs, the planned key cannot be deleted from L2. */
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *slow = make_slow_mock(400, 1);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t a_ids[] = {150};
    uint32_t b_ids[] = {151};
    l2_put(slow, a_ids, 1, 1);
    l2_put(fs, b_ids, 1, 2);
    lmc_l2_adapter *ad[2] = {slow, fs};
    lmc_prefetch_controller *pc = make_pc(l1, ad, 2, "default", 8);
    uint32_t ids[] = {150, 151};
    int64_t id = submit(pc, ids, 2, 0, LMC_TRIM_PREFIX);
    /* Wait until the request is in its load phase (the lookup count is known). */
    size_t hits = 0;
    for (unsigned t = 0; t < WAIT_MS && !lmc_prefetch_controller_query_lookup(pc, id, &hits); t++)
        lmc_sleep_ns(1000 * 1000);
    assert_int_equal(hits, 2);
    assert_true(lmc_prefetch_controller_busy(pc) == 1);
    assert_true(l2_delete_blocked(fs, 151));

    lmc_bitmap bm = wait_result(pc, id);
    assert_bits(&bm, "11");
    lmc_bitmap_free(&bm);
    assert_true(l2_delete_succeeds(fs, 151));
    finish_read(l1, ids, 2, 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    assert_no_l2_locks(slow);
    lmc_l2_adapter_destroy(slow);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_two_adapters_load_each_key_from_the_lowest_index_adapter_that_has_it(void **state)
{
    (void)state;
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t in_mock[] = {200, 202};
    uint32_t in_fs[] = {201, 202, 203};
    l2_put(mock, in_mock, 2, 1); /* tag 1: came from the mock */
    l2_put(fs, in_fs, 3, 2);     /* tag 2: came from fs */
    lmc_l2_adapter *ad[2] = {mock, fs};
    lmc_prefetch_controller *pc = make_pc(l1, ad, 2, "default", 8);

    uint32_t ids[] = {200, 201, 202, 203};
    lmc_bitmap bm = wait_result(pc, submit(pc, ids, 4, 0, LMC_TRIM_PREFIX));
    assert_bits(&bm, "1111");
    lmc_bitmap_free(&bm);
    assert_l1_holds(l1, 200, 1);
    assert_l1_holds(l1, 201, 2);
    assert_l1_holds(l1, 202, 1); /* both have it: the mock (index 0) wins */
    assert_l1_holds(l1, 203, 2);

    /* fs found 202 too; that lock was released in phase 1, the others in phase 2. */
    assert_true(l2_delete_succeeds(fs, 201));
    assert_true(l2_delete_succeeds(fs, 202));
    assert_true(l2_delete_succeeds(fs, 203));

    finish_read(l1, ids, 4, 0);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* L1 reservation failures                                                   */
/* ------------------------------------------------------------------------ */

static void test_l1_out_of_memory_cuts_the_prefix_at_the_first_unreserved_key(void **state)
{
    (void)state;
    char dir[64];
    lmc_l1_manager *l1 = make_l1(2 * SLOT); /* room for two objects */
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t ids[] = {300, 301, 302, 303};
    l2_put(fs, ids, 4, 6);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 8);

    capture_start();
    int64_t id = submit(pc, ids, 4, 0, LMC_TRIM_PREFIX);
    lmc_bitmap bm = wait_result(pc, id);
    capture_stop();
    assert_bits(&bm, "1100");
    lmc_bitmap_free(&bm);
    assert_true(captured("l1_oom"));
    assert_l1_holds(l1, 300, 6);
    assert_l1_holds(l1, 301, 6);
    assert_int_equal(lmc_l1_object_count(l1), 2);
    assert_memcheck(l1);
    /* Keys that did not fit were unlocked in L2. */
    assert_true(l2_delete_succeeds(fs, 302));
    assert_true(l2_delete_succeeds(fs, 303));

    finish_read(l1, ids, 2, 0);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_l1_out_of_memory_sparse_keeps_what_fit(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(3 * SLOT);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    uint32_t ids[] = {310, 311, 312, 313};
    l2_put(mock, ids, 4, 6);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);
    lmc_bitmap bm = wait_result(pc, submit(pc, ids, 4, 0, LMC_TRIM_SPARSE));
    assert_bits(&bm, "1110");
    lmc_bitmap_free(&bm);
    finish_read(l1, ids, 3, 0);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

/* Put key id into L1 as an ordinary, finished, unlocked object. */
static void l1_put(lmc_l1_manager *l1, uint32_t id)
{
    lmc_object_key k = key_of(id);
    lmc_layout_desc layout = layout_one_slot();
    lmc_l1_error e;
    lmc_memory_obj o;
    lmc_l1_reserve_write(l1, &k, 1, NULL, &layout, LMC_WRITE_NEW, &e, &o);
    assert_int_equal(e, LMC_L1_SUCCESS);
    memset(o.data, 0xEE, o.size);
    lmc_l1_finish_write(l1, &k, 1, &e);
    assert_int_equal(e, LMC_L1_SUCCESS);
}

static void run_key_already_in_l1(lmc_trim_policy policy, const char *want_bits)
{
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t ids[] = {400, 401, 402, 403};
    l2_put(fs, ids, 4, 7);
    l1_put(l1, 402);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 8);

    capture_start();
    lmc_bitmap bm = wait_result(pc, submit(pc, ids, 4, 0, policy));
    capture_stop();
    assert_bits(&bm, want_bits);
    /* A reservation cut off by the prefix is released at once, not as a load miss. */
    assert_false(captured("not_found"));

    /* The resident object is untouched: same bytes, no lock, not temporary. */
    lmc_object_key k = key_of(402);
    assert_int_equal(lmc_l1_read_lock_count(l1, &k), 0);
    lmc_l1_error e;
    lmc_memory_obj o;
    lmc_l1_reserve_read(l1, &k, 1, 0, &e, &o);
    assert_int_equal(e, LMC_L1_SUCCESS);
    assert_int_equal(o.data[0], 0xEE);
    lmc_l1_finish_read(l1, &k, 1, 0, &e);

    /* 402 and (under PREFIX) 403 were never loaded; their L2 locks are gone. */
    assert_true(l2_delete_succeeds(fs, 402));
    assert_true(l2_delete_succeeds(fs, 403));

    uint32_t kept[4];
    size_t n = lmc_bitmap_gather(&bm, ids, 4, sizeof(ids[0]), kept);
    finish_read(l1, kept, n, 0);
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l1_object_count(l1), 1); /* only the resident 402 */
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_key_already_in_l1_cuts_the_prefix_there(void **state)
{
    (void)state;
    run_key_already_in_l1(LMC_TRIM_PREFIX, "1100");
}

static void test_key_already_in_l1_is_skipped_under_sparse(void **state)
{
    (void)state;
    run_key_already_in_l1(LMC_TRIM_SPARSE, "1101");
}

/* ------------------------------------------------------------------------ */
/* Load misses                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A truncated fs file: the lookup (a file-existence test) finds it, the
 * load (a short read) misses it. That is the "found, then not loaded" path.
 */
static void truncate_in_fs(const char *dir, uint32_t id)
{
    lmc_object_key k = key_of(id);
    char name[512], path[640];
    lmc_l2_fs_key_name(&k, name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(truncate(path, SLOT / 2), 0);
}

static void run_load_miss(lmc_trim_policy policy, const char *want_bits)
{
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t ids[] = {500, 501, 502};
    l2_put(fs, ids, 3, 8);
    truncate_in_fs(dir, 501);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 8);

    capture_start();
    int64_t id = submit(pc, ids, 3, 1, policy);
    wait_done(pc);
    capture_stop();
    size_t hits = 0;
    assert_true(lmc_prefetch_controller_query_lookup(pc, id, &hits));
    assert_int_equal(hits, 3); /* the lookup found all three */
    lmc_bitmap bm = wait_result(pc, id);
    assert_bits(&bm, want_bits);
    assert_true(captured("not_found"));

    /* 501's reservation is gone; 502 stays only if the result keeps it. */
    lmc_object_key k501 = key_of(501), k502 = key_of(502);
    assert_false(lmc_l1_contains(l1, &k501));
    assert_int_equal(lmc_l1_contains(l1, &k502), lmc_bitmap_test(&bm, 2));
    if (lmc_bitmap_test(&bm, 2))
        assert_int_equal(lmc_l1_read_lock_count(l1, &k502), 2);
    assert_true(l2_delete_succeeds(fs, 501));
    assert_true(l2_delete_succeeds(fs, 502));

    uint32_t kept[3];
    size_t n = lmc_bitmap_gather(&bm, ids, 3, sizeof(ids[0]), kept);
    finish_read(l1, kept, n, 1);
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_load_miss_under_prefix_drops_the_gap_and_everything_after(void **state)
{
    (void)state;
    run_load_miss(LMC_TRIM_PREFIX, "100");
}

static void test_load_miss_under_sparse_keeps_the_other_keys(void **state)
{
    (void)state;
    run_load_miss(LMC_TRIM_SPARSE, "101");
}

/* ------------------------------------------------------------------------ */
/* Concurrency limit, status, shutdown                                      */
/* ------------------------------------------------------------------------ */

static void test_max_in_flight_is_respected(void **state)
{
    (void)state;
    enum { REQS = 8, PER = 2 };
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_slow_mock(20, PER);
    uint32_t all[REQS * PER];
    for (uint32_t i = 0; i < REQS * PER; i++)
        all[i] = 600 + i;
    l2_put(mock, all, 16, 9);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 2);

    int64_t ids[REQS];
    for (size_t r = 0; r < REQS; r++)
        ids[r] = submit(pc, all + r * PER, PER, 0, LMC_TRIM_PREFIX);
    int64_t max_seen = 0, max_pending = 0;
    for (unsigned t = 0; t < WAIT_MS && lmc_prefetch_controller_busy(pc) > 0; t++) {
        lmc_json *st = lmc_prefetch_controller_report_status(pc);
        assert_non_null(st);
        int64_t in_flight = status_int(st, "in_flight_request_count");
        assert_true(in_flight <= 2);
        assert_int_equal(status_int(st, "lookup_phase_count") + status_int(st, "load_phase_count"),
                         in_flight);
        if (in_flight > max_seen)
            max_seen = in_flight;
        if (status_int(st, "pending_queue_size") > max_pending)
            max_pending = status_int(st, "pending_queue_size");
        lmc_json_free(st);
        lmc_sleep_ns(1000 * 1000);
    }
    assert_int_equal(lmc_prefetch_controller_busy(pc), 0);
    assert_true(max_seen >= 1);
    assert_true(max_pending >= 1); /* requests waited for a slot */
    for (size_t r = 0; r < REQS; r++) {
        lmc_bitmap bm = wait_result(pc, ids[r]);
        assert_bits(&bm, "11");
        lmc_bitmap_free(&bm);
    }
    finish_read(l1, all, REQS * PER, 0);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_report_status_has_every_field(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 5);
    uint32_t ids[] = {700};
    int64_t id = submit(pc, ids, 1, 0, LMC_TRIM_PREFIX);
    wait_done(pc);

    lmc_json *st = lmc_prefetch_controller_report_status(pc);
    assert_non_null(st);
    static const char *const fields[] = {"is_healthy",
                                         "thread_alive",
                                         "max_in_flight",
                                         "submission_queue_size",
                                         "pending_queue_size",
                                         "in_flight_request_count",
                                         "lookup_phase_count",
                                         "load_phase_count",
                                         "completed_results_count",
                                         "num_l2_adapters"};
    assert_int_equal(lmc_json_size(st), 10);
    for (size_t i = 0; i < 10; i++)
        assert_string_equal(lmc_json_object_key_at(st, i), fields[i]);
    assert_true(lmc_json_get_bool(lmc_json_object_get(st, "is_healthy")));
    assert_true(lmc_json_get_bool(lmc_json_object_get(st, "thread_alive")));
    assert_int_equal(status_int(st, "max_in_flight"), 5);
    assert_int_equal(status_int(st, "completed_results_count"), 1);
    assert_int_equal(status_int(st, "num_l2_adapters"), 1);
    lmc_json_free(st);

    lmc_bitmap bm = wait_result(pc, id);
    lmc_bitmap_free(&bm);
    st = lmc_prefetch_controller_report_status(pc);
    assert_int_equal(status_int(st, "completed_results_count"), 0);
    lmc_json_free(st);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_busy_counts_requests_until_they_complete(void **state)
{
    (void)state;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_slow_mock(100, 1);
    uint32_t ids[] = {750};
    l2_put(mock, ids, 1, 1);
    lmc_prefetch_controller *pc = make_pc(l1, &mock, 1, "default", 8);
    int64_t id = submit(pc, ids, 1, 0, LMC_TRIM_PREFIX);
    assert_int_equal(lmc_prefetch_controller_busy(pc), 1);
    lmc_bitmap bm;
    assert_int_equal(lmc_prefetch_controller_take_result(pc, id, &bm), LMC_ERR_BUSY);
    bm = wait_result(pc, id);
    assert_bits(&bm, "1");
    lmc_bitmap_free(&bm);
    assert_int_equal(lmc_prefetch_controller_busy(pc), 0);
    finish_read(l1, ids, 1, 0);
    lmc_prefetch_controller_destroy(pc);
    assert_no_l2_locks(mock);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
}

static void test_destroy_with_requests_in_flight_releases_everything(void **state)
{
    (void)state;
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *slow = make_slow_mock(300, 2);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t in_slow[] = {800, 801, 810, 811};
    uint32_t in_fs[] = {802, 803, 812, 813, 820, 821};
    l2_put(slow, in_slow, 4, 1);
    l2_put(fs, in_fs, 6, 2);
    lmc_l2_adapter *ad[2] = {slow, fs};
    /* Two requests run (slowly loading), one waits for a slot. */
    lmc_prefetch_controller *pc = make_pc(l1, ad, 2, "default", 2);
    uint32_t r0[] = {800, 801, 802, 803};
    uint32_t r1[] = {810, 811, 812, 813};
    uint32_t r2[] = {820, 821};
    int64_t id0 = submit(pc, r0, 4, 0, LMC_TRIM_PREFIX);
    submit(pc, r1, 4, 1, LMC_TRIM_SPARSE);
    submit(pc, r2, 2, 0, LMC_TRIM_PREFIX);
    size_t hits = 0;
    for (unsigned t = 0; t < WAIT_MS && !lmc_prefetch_controller_query_lookup(pc, id0, &hits); t++)
        lmc_sleep_ns(1000 * 1000);
    assert_int_equal(hits, 4);
    assert_int_equal(lmc_prefetch_controller_busy(pc), 3);

    lmc_prefetch_controller_destroy(pc);

    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    for (size_t i = 0; i < 6; i++)
        assert_true(l2_delete_succeeds(fs, in_fs[i]));
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    assert_no_l2_locks(slow);
    lmc_l2_adapter_destroy(slow);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_destroy_right_after_submit_leaks_nothing(void **state)
{
    (void)state;
    char dir[64];
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t ids[] = {900, 901, 902};
    l2_put(fs, ids, 3, 1);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 1);
    for (int i = 0; i < 4; i++)
        submit(pc, ids, 3, 0, LMC_TRIM_PREFIX);
    lmc_prefetch_controller_destroy(pc);
    /* Whatever completed before the stop holds read locks the caller owns. */
    size_t left = lmc_l1_object_count(l1);
    if (left > 0) {
        finish_read(l1, ids, 3, 0);
    }
    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    for (size_t i = 0; i < 3; i++)
        assert_true(l2_delete_succeeds(fs, ids[i]));
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

/* A request still waiting for one adapter's lookup when destroy is called. */
static void setup_lookup_phase(lmc_l1_manager *l1, lmc_l2_adapter *mock, lmc_l2_adapter *fs,
                               const char *dir, plug *p, lmc_prefetch_controller **pc_out)
{
    uint32_t in_mock[] = {1000};
    uint32_t in_fs[] = {1000, 1001};
    l2_put(mock, in_mock, 1, 1);
    l2_put(fs, in_fs, 2, 2);
    plug_fs(p, fs, dir, 1099);
    lmc_l2_adapter *ad[2] = {mock, fs};
    lmc_prefetch_controller *pc = make_pc(l1, ad, 2, "default", 8);
    uint32_t ids[] = {1000, 1001};
    int64_t id = submit(pc, ids, 2, 0, LMC_TRIM_PREFIX);
    wait_l2_locked(mock, 1); /* the mock answered and holds its lock */
    size_t hits;
    assert_false(lmc_prefetch_controller_query_lookup(pc, id, &hits)); /* fs has not */
    assert_int_equal(lmc_prefetch_controller_busy(pc), 1);
    *pc_out = pc;
}

static void test_destroy_unlocks_what_lookup_phase_requests_found(void **state)
{
    (void)state;
    char dir[64];
    plug p;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_l2_adapter *fs = make_fs(dir);
    lmc_prefetch_controller *pc;
    setup_lookup_phase(l1, mock, fs, dir, &p, &pc);

    /* The fs lookup answers while destroy waits; both adapters' locks are released. */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, unplug_later, &p), 0);
    lmc_prefetch_controller_destroy(pc);
    pthread_join(th, NULL);

    assert_int_equal(lmc_l1_object_count(l1), 0);
    assert_memcheck(l1);
    assert_no_l2_locks(mock);
    assert_no_l2_locks(fs);
    lmc_l2_adapter_destroy(fs);
    lmc_l2_adapter_destroy(mock);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_destroy_gives_up_on_a_lookup_that_never_answers(void **state)
{
    (void)state;
    char dir[64];
    plug p;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *mock = make_adapter(MOCK_FAST);
    lmc_l2_adapter *fs = make_fs(dir);
    lmc_prefetch_controller *pc;
    setup_lookup_phase(l1, mock, fs, dir, &p, &pc);

    lmc_prefetch_controller_set_shutdown_wait_ms(pc, 100);
    capture_start();
    lmc_prefetch_controller_destroy(pc);
    capture_stop();
    assert_true(captured("never answered"));
    /* What answered is released; the fs lookup runs after the controller is gone. */
    assert_no_l2_locks(mock);
    assert_int_equal(lmc_l1_object_count(l1), 0);
    unplug(&p);
    lmc_l2_adapter_destroy(fs); /* its orphaned lookup locks go with it */
    lmc_l2_adapter_destroy(mock);
    assert_memcheck(l1);
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

static void test_destroy_leaves_reservations_of_unanswered_loads_write_locked(void **state)
{
    (void)state;
    char dir[64];
    plug p;
    lmc_l1_manager *l1 = make_l1(POOL);
    lmc_l2_adapter *fs = make_fs(dir);
    uint32_t ids[] = {1100, 1101};
    l2_put(fs, ids, 2, 3);
    lmc_prefetch_controller *pc = make_pc(l1, &fs, 1, "default", 8);

    /* Stall the controller at its reservation, plug fs, then let the load queue up. */
    l1_hold h;
    hold_start(&h, l1);
    int64_t id = submit(pc, ids, 2, 0, LMC_TRIM_PREFIX);
    wait_l2_locked(fs, 2); /* the lookup ran */
    plug_fs(&p, fs, dir, 1199);
    hold_release(&h);
    size_t hits = 0;
    for (unsigned t = 0; t < WAIT_MS && !lmc_prefetch_controller_query_lookup(pc, id, &hits); t++)
        lmc_sleep_ns(1000 * 1000);
    assert_int_equal(hits, 2); /* load phase, the load stuck behind the plug */

    lmc_prefetch_controller_set_shutdown_wait_ms(pc, 100);
    capture_start();
    lmc_prefetch_controller_destroy(pc);
    capture_stop();
    assert_true(captured("never answered"));
    /* The adapter may still write into those buffers: they stay reserved. */
    lmc_json *st = lmc_l1_report_status(l1);
    assert_int_equal(status_int(st, "write_locked_count"), 2);
    lmc_json_free(st);
    assert_memcheck(l1);
    /* The plan keys' L2 locks were released all the same. */
    assert_no_l2_locks(fs);

    unplug(&p);
    lmc_l2_adapter_destroy(fs); /* joins the worker: no more writes into L1 */
    lmc_l1_manager_destroy(l1);
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_check_accepts_default_and_retain),
        cmocka_unit_test(test_policy_check_rejects_unknown_name),
        cmocka_unit_test(test_create_rejects_unknown_policy_and_zero_max_in_flight),
        cmocka_unit_test(test_no_adapters_completes_at_once_with_zeros),
        cmocka_unit_test(test_ids_increase_from_zero),
        cmocka_unit_test(test_take_returns_result_once_and_query_lookup_until_taken),
        cmocka_unit_test(test_full_hit_loads_every_key_read_locked_and_temporary),
        cmocka_unit_test(test_retain_policy_keeps_objects_after_finish_read),
        cmocka_unit_test(test_nothing_found_completes_with_zeros),
        cmocka_unit_test(test_partial_hit_prefix_keeps_leading_run_and_unlocks_the_rest),
        cmocka_unit_test(test_partial_hit_sparse_keeps_every_found_key),
        cmocka_unit_test(test_partial_hit_segmented_prefix_keeps_every_found_key),
        cmocka_unit_test(test_l2_locks_are_held_until_the_load_finishes),
        cmocka_unit_test(test_two_adapters_load_each_key_from_the_lowest_index_adapter_that_has_it),
        cmocka_unit_test(test_l1_out_of_memory_cuts_the_prefix_at_the_first_unreserved_key),
        cmocka_unit_test(test_l1_out_of_memory_sparse_keeps_what_fit),
        cmocka_unit_test(test_key_already_in_l1_cuts_the_prefix_there),
        cmocka_unit_test(test_key_already_in_l1_is_skipped_under_sparse),
        cmocka_unit_test(test_load_miss_under_prefix_drops_the_gap_and_everything_after),
        cmocka_unit_test(test_load_miss_under_sparse_keeps_the_other_keys),
        cmocka_unit_test(test_max_in_flight_is_respected),
        cmocka_unit_test(test_report_status_has_every_field),
        cmocka_unit_test(test_busy_counts_requests_until_they_complete),
        cmocka_unit_test(test_destroy_with_requests_in_flight_releases_everything),
        cmocka_unit_test(test_destroy_right_after_submit_leaks_nothing),
        cmocka_unit_test(test_destroy_unlocks_what_lookup_phase_requests_found),
        cmocka_unit_test(test_destroy_gives_up_on_a_lookup_that_never_answers),
        cmocka_unit_test(test_destroy_leaves_reservations_of_unanswered_loads_write_locked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
