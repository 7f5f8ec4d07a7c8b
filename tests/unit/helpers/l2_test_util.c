/*
 * l2_test_util.c -- helpers for the L2 adapter tests (see l2_test_util.h).
 */
#include "helpers/l2_test_util.h"

// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <ftw.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool l2_wait_fd(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0)
        return false;
    lmc_l2_drain_fd(fd);
    return true;
}

typedef bool (*take_fn)(lmc_l2_adapter *, uint64_t, lmc_bitmap *);

static bool wait_bitmap(lmc_l2_adapter *a, int fd, take_fn take, uint64_t id, lmc_bitmap *out)
{
    long long deadline = now_ms() + L2_WAIT_MS;
    for (;;) {
        if (take(a, id, out))
            return true;
        long long left = deadline - now_ms();
        if (left <= 0)
            return false;
        l2_wait_fd(fd, (int)left);
    }
}

bool l2_wait_lookup(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out)
{
    return wait_bitmap(a, lmc_l2_adapter_lookup_fd(a), lmc_l2_adapter_take_lookup_result, task_id,
                       out);
}

bool l2_wait_load(lmc_l2_adapter *a, uint64_t task_id, lmc_bitmap *out)
{
    return wait_bitmap(a, lmc_l2_adapter_load_fd(a), lmc_l2_adapter_take_load_result, task_id, out);
}

bool l2_wait_stores(lmc_l2_adapter *a, size_t want, lmc_l2_store_result *out)
{
    long long deadline = now_ms() + L2_WAIT_MS;
    size_t got = 0;
    for (;;) {
        lmc_l2_store_result *r = NULL;
        size_t n = lmc_l2_adapter_pop_completed_stores(a, &r);
        for (size_t i = 0; i < n && got < want; i++)
            out[got++] = r[i];
        free(r);
        if (got >= want)
            return true;
        long long left = deadline - now_ms();
        if (left <= 0)
            return false;
        l2_wait_fd(lmc_l2_adapter_store_fd(a), (int)left);
    }
}

bool l2_wait_store(lmc_l2_adapter *a, uint64_t task_id, int64_t *result)
{
    lmc_l2_store_result r;
    if (!l2_wait_stores(a, 1, &r) || r.task_id != task_id)
        return false;
    *result = r.result;
    return true;
}

int64_t l2_store_sync(lmc_l2_adapter *a, const lmc_object_key *keys, const lmc_memory_obj *objs,
                      size_t n)
{
    uint64_t id;
    int64_t result = -2;
    assert_int_equal(lmc_l2_adapter_submit_store(a, keys, objs, n, &id), LMC_OK);
    assert_true(l2_wait_store(a, id, &result));
    return result;
}

void l2_lookup_sync(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n, char *bits)
{
    uint64_t id;
    lmc_bitmap bm;
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, keys, n, &id), LMC_OK);
    assert_true(l2_wait_lookup(a, id, &bm));
    lmc_bitmap_to_string(&bm, bits, n + 1);
    lmc_bitmap_free(&bm);
}

void l2_load_sync(lmc_l2_adapter *a, const lmc_object_key *keys, const lmc_memory_obj *objs,
                  size_t n, char *bits)
{
    uint64_t id;
    lmc_bitmap bm;
    assert_int_equal(lmc_l2_adapter_submit_load(a, keys, objs, n, &id), LMC_OK);
    assert_true(l2_wait_load(a, id, &bm));
    lmc_bitmap_to_string(&bm, bits, n + 1);
    lmc_bitmap_free(&bm);
}

bool l2_poll_take(lmc_l2_adapter *a, l2_take_fn take, uint64_t task_id, lmc_bitmap *out)
{
    long long deadline = now_ms() + L2_WAIT_MS;
    while (!take(a, task_id, out)) {
        if (now_ms() > deadline)
            return false;
        struct timespec ts = {0, 200000}; /* 0.2 ms */
        nanosleep(&ts, NULL);
    }
    return true;
}

lmc_bitmap l2_holds(lmc_l2_adapter *a, const lmc_object_key *keys, size_t n)
{
    uint64_t id = 0;
    assert_int_equal(lmc_l2_adapter_submit_lookup(a, keys, n, &id), LMC_OK);
    lmc_bitmap bm = {0, NULL};
    assert_true(l2_poll_take(a, lmc_l2_adapter_take_lookup_result, id, &bm));
    for (size_t i = 0; i < n; i++)
        if (lmc_bitmap_test(&bm, i))
            lmc_l2_adapter_submit_unlock(a, &keys[i], 1);
    return bm;
}

void l2_fill(uint8_t *buf, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(seed + i * 7);
}

bool l2_wait_healthy(lmc_l2_adapter *a, bool want, int ms)
{
    long long deadline = now_ms() + ms;
    while (lmc_l2_adapter_is_healthy(a) != want) {
        if (now_ms() > deadline)
            return false;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return true;
}

void l2_assert_config_invalid(const char *json, const char *msg)
{
    lmc_json *cfg = l2_json(json);
    assert_non_null(cfg);
    lmc_error err;
    lmc_error_clear(&err);
    assert_int_equal(lmc_l2_check_config(cfg, &err), LMC_ERR_INVALID);
    assert_string_equal(err.msg, msg);
    lmc_l2_adapter *a = NULL;
    assert_int_equal(lmc_l2_adapter_create(cfg, &a, &err), LMC_ERR_INVALID);
    assert_null(a);
    lmc_json_free(cfg);
}

int64_t l2_status_int(lmc_l2_adapter *a, const char *object, const char *field)
{
    lmc_json *s = lmc_l2_adapter_report_status(a);
    assert_non_null(s);
    const lmc_json *o = object != NULL ? lmc_json_object_get(s, object) : s;
    const lmc_json *v = o != NULL ? lmc_json_object_get(o, field) : NULL;
    int64_t r = v != NULL ? lmc_json_get_int(v) : -1;
    lmc_json_free(s);
    return r;
}

lmc_object_key l2_key(const char *model, uint32_t hash, int64_t kv_rank, int64_t group,
                      const char *salt)
{
    uint8_t h[4] = {(uint8_t)(hash >> 24), (uint8_t)(hash >> 16), (uint8_t)(hash >> 8),
                    (uint8_t)hash};
    lmc_object_key key;
    memset(&key, 0, sizeof(key));
    if (lmc_object_key_make(&key, h, sizeof(h), model, kv_rank, group, salt, NULL) != LMC_OK)
        abort(); /* a test bug */
    return key;
}

lmc_json *l2_json(const char *text)
{
    lmc_json *v = NULL;
    if (lmc_json_parse(text, strlen(text), &v, NULL) != LMC_OK)
        return NULL;
    return v;
}

lmc_l2_adapter *l2_adapter_from(lmc_error *err, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    lmc_json *cfg = l2_json(text);
    if (cfg == NULL)
        return NULL;
    lmc_l2_adapter *a = NULL;
    if (lmc_l2_adapter_create(cfg, &a, err) != LMC_OK)
        a = NULL;
    lmc_json_free(cfg);
    return a;
}

bool l2_tmpdir(char buf[64])
{
    snprintf(buf, 64, "/tmp/lmc-l2-test-XXXXXX");
    return mkdtemp(buf) != NULL;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void l2_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

long long l2_file_size(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    return (long long)st.st_size;
}
