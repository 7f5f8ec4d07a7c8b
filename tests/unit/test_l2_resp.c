/*
 * test_l2_resp.c -- the "resp" L2 adapter against a real redis-server:
 * config errors, store/lookup/load/unlock/delete, usage and eviction,
 * Redis going away, stalling or absent at start, and two StorageManagers
 * sharing one Redis.
 *
 * The group setup starts a private redis-server child on a free loopback
 * port (redis_test_util); each test flushes it. The group teardown and an
 * atexit handler kill it. Without redis-server installed the suite fails
 * with a message saying so. Every wait is bounded.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "helpers/l2_test_util.h"
#include "helpers/redis_test_util.h"
#include "helpers/sm_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "lmcache/storage_manager.h"

#define KB 1024u

static int group_setup(void **state)
{
    (void)state;
    char err[256];
    if (!redis_test_start(0, err, sizeof(err))) {
        fprintf(stderr, "test_l2_resp: cannot start redis-server: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    redis_test_stop();
    return 0;
}

/* A running, empty server on the suite's port (a test may have stopped it). */
static int setup(void **state)
{
    (void)state;
    if (redis_test_flushall())
        return 0;
    char err[256];
    if (!redis_test_start(redis_test_port(), err, sizeof(err))) {
        fprintf(stderr, "test_l2_resp: cannot restart redis-server: %s\n", err);
        return -1;
    }
    return redis_test_flushall() ? 0 : -1;
}

/* A resp adapter on the test server; extra is more JSON members or "". */
static lmc_l2_adapter *resp_adapter(const char *extra)
{
    lmc_error err;
    lmc_error_clear(&err);
    lmc_l2_adapter *a = l2_adapter_from(&err, "{\"type\": \"resp\", \"port\": %d%s%s}",
                                        redis_test_port(), extra[0] != '\0' ? ", " : "", extra);
    if (a == NULL)
        print_error("create failed: %s\n", err.msg);
    return a;
}

/* The Redis key of key under prefix, as the adapter names it. */
static void redis_key(const char *prefix, const lmc_object_key *key, char *buf, size_t len)
{
    char name[512];
    size_t n = lmc_l2_fs_key_name(key, name, sizeof(name));
    snprintf(buf, len, "%s%.*s", prefix, (int)(n - 5), name);
}

static bool status_bool(lmc_l2_adapter *a, const char *field)
{
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_non_null(st);
    bool v = lmc_json_get_bool(lmc_json_object_get(st, field));
    lmc_json_free(st);
    return v;
}

/* Copy of the status's last_error ("" when null). */
static void status_error(lmc_l2_adapter *a, char *buf, size_t len)
{
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_non_null(st);
    const char *s = lmc_json_get_string(lmc_json_object_get(st, "last_error"), NULL);
    snprintf(buf, len, "%s", s != NULL ? s : "");
    lmc_json_free(st);
}

/* ------------------------------------------------------------------ */
/* Config                                                               */
/* ------------------------------------------------------------------ */

static void test_resp_config_errors_name_the_field(void **state)
{
    (void)state;
    unsetenv("LMC_TEST_RESP_NO_SUCH_VAR");
    static const struct {
        const char *json;
        const char *msg;
    } cases[] = {
        {"{\"type\": \"resp\", \"hots\": \"x\"}",
         "--l2-adapter: unknown field 'hots' for type 'resp'"},
        {"{\"type\": \"resp\", \"port\": 0}",
         "--l2-adapter: field 'port' of type 'resp' must be an integer in [1, 65535] (got 0)"},
        {"{\"type\": \"resp\", \"port\": \"6379\"}",
         "--l2-adapter: field 'port' of type 'resp' must be an integer in [1, 65535] (got "
         "\"6379\")"},
        {"{\"type\": \"resp\", \"host\": \"\"}",
         "--l2-adapter: field 'host' of type 'resp' must be a non-empty string (got \"\")"},
        {"{\"type\": \"resp\", \"db\": -1}",
         "--l2-adapter: field 'db' of type 'resp' must be an integer >= 0 (got -1)"},
        {"{\"type\": \"resp\", \"connections\": 0}",
         "--l2-adapter: field 'connections' of type 'resp' must be an integer in [1, 64] (got 0)"},
        {"{\"type\": \"resp\", \"connections\": 65}",
         "--l2-adapter: field 'connections' of type 'resp' must be an integer in [1, 64] (got 65)"},
        {"{\"type\": \"resp\", \"timeout_ms\": 0}",
         "--l2-adapter: field 'timeout_ms' of type 'resp' must be an integer in [1, 600000] (got "
         "0)"},
        {"{\"type\": \"resp\", \"max_capacity_gb\": -1}",
         "--l2-adapter: field 'max_capacity_gb' of type 'resp' must be a number >= 0 (got -1)"},
        {"{\"type\": \"resp\", \"key_prefix\": 5}",
         "--l2-adapter: field 'key_prefix' of type 'resp' must be a string without NUL characters "
         "(got 5)"},
        {"{\"type\": \"resp\", \"password_env\": \"LMC_TEST_RESP_NO_SUCH_VAR\"}",
         "--l2-adapter: field 'password_env' of type 'resp': environment variable "
         "'LMC_TEST_RESP_NO_SUCH_VAR' is not set"},
        {"{\"type\": \"resp\", \"username_env\": \"HOME\"}",
         "--l2-adapter: field 'username_env' of type 'resp' needs 'password_env' too (AUTH takes "
         "a username and a password)"},
        {"{\"type\": \"resp\", \"unix_socket\": \"/tmp/r.sock\", \"port\": 1}",
         "--l2-adapter: field 'unix_socket' of type 'resp' cannot be combined with 'host' or "
         "'port'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        l2_assert_config_invalid(cases[i].json, cases[i].msg);
    lmc_json *ok =
        l2_json("{\"type\": \"resp\", \"host\": \"localhost\", \"port\": 7000, \"db\": 3, "
                "\"key_prefix\": \"\", \"max_capacity_gb\": 0.5, \"connections\": 64, "
                "\"timeout_ms\": 100, \"eviction\": {\"eviction_policy\": \"LRU\"}}");
    lmc_error err;
    assert_int_equal(lmc_l2_check_config(ok, &err), LMC_OK);
    lmc_json_free(ok);
}

/* ------------------------------------------------------------------ */
/* Data path                                                            */
/* ------------------------------------------------------------------ */

static void test_resp_store_lookup_load_round_trip(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("");
    assert_non_null(a);
    assert_true(lmc_l2_adapter_is_healthy(a));
    lmc_object_key keys[3] = {l2_key("org/model", 0xdeadbeef, 0x02010201, 3, "u1"),
                              l2_key("org/model", 2, 0, 0, NULL), l2_key("plain", 3, 0, 0, NULL)};
    static uint8_t b0[100 * KB], b1[3], b2[4 * KB];
    l2_fill(b0, sizeof(b0), 1);
    l2_fill(b1, sizeof(b1), 9);
    l2_fill(b2, sizeof(b2), 33);
    lmc_memory_obj objs[3] = {{b0, sizeof(b0), sizeof(b0), 0},
                              {b1, sizeof(b1), 4096, 0},
                              {b2, sizeof(b2), sizeof(b2), 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 3), sizeof(b0) + sizeof(b1) + sizeof(b2));

    /* The value is the raw bytes under key_prefix + the fs name without ".data". */
    char rk[512];
    redis_key("lmcache:", &keys[0], rk, sizeof(rk));
    assert_string_equal(rk, "lmcache:org-SEP-model@0x02010201@3@deadbeef@u1");
    assert_int_equal(redis_test_strlen(rk), sizeof(b0));
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, sizeof(b0) + sizeof(b1) + sizeof(b2));

    lmc_object_key probe[3] = {keys[0], l2_key("absent", 1, 0, 0, NULL), keys[2]};
    char bits[8];
    l2_lookup_sync(a, probe, 3, bits);
    assert_string_equal(bits, "101");
    assert_int_equal(l2_status_int(a, NULL, "locked_keys"), 2);

    static uint8_t d0[sizeof(b0)], d1[sizeof(b1)], d2[sizeof(b2)], wrong[10];
    lmc_memory_obj dst[4] = {{d0, sizeof(d0), sizeof(d0), 0},
                             {d1, sizeof(d1), 4096, 0},
                             {d2, sizeof(d2), sizeof(d2), 0},
                             {wrong, sizeof(wrong), sizeof(wrong), 0}};
    lmc_object_key lk[4] = {keys[0], keys[1], keys[2], keys[1]};
    l2_load_sync(a, lk, dst, 4, bits);
    assert_string_equal(bits, "1110"); /* the last: a buffer of another size is a miss */
    assert_memory_equal(d0, b0, sizeof(b0));
    assert_memory_equal(d1, b1, sizeof(b1));
    assert_memory_equal(d2, b2, sizeof(b2));

    lmc_l2_adapter_submit_unlock(a, probe, 3);
    assert_int_equal(l2_status_int(a, NULL, "locked_keys"), 0);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_store_of_an_existing_key_writes_nothing(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 7, 0, 0, NULL);
    uint8_t b[1000], other[1000];
    l2_fill(b, sizeof(b), 1);
    l2_fill(other, sizeof(other), 99);
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 1000);
    obj.data = other;
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 0); /* SET NX: kept, success, 0 bytes */
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 1000);
    uint8_t d[1000];
    lmc_memory_obj dst = {d, sizeof(d), sizeof(d), 0};
    char bits[4];
    l2_load_sync(a, &k, &dst, 1, bits);
    assert_string_equal(bits, "1");
    assert_memory_equal(d, b, sizeof(b)); /* the first value stays */
    lmc_l2_adapter_destroy(a);
}

static void test_resp_key_prefix_is_used(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("\"key_prefix\": \"t1/\", \"connections\": 1");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 8, 0, 0, NULL);
    uint8_t b[10] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), 10);
    char rk[512];
    redis_key("t1/", &k, rk, sizeof(rk));
    assert_int_equal(redis_test_strlen(rk), 10);
    redis_key("lmcache:", &k, rk, sizeof(rk));
    assert_int_equal(redis_test_strlen(rk), -1);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_delete_skips_locked_keys(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("");
    assert_non_null(a);
    lmc_object_key keys[2] = {l2_key("m", 1, 0, 0, NULL), l2_key("m", 2, 0, 0, NULL)};
    uint8_t b[2][500];
    l2_fill(b[0], 500, 1);
    l2_fill(b[1], 500, 2);
    lmc_memory_obj objs[2] = {{b[0], 500, 500, 0}, {b[1], 500, 500, 0}};
    assert_int_equal(l2_store_sync(a, keys, objs, 2), 1000);
    char bits[4];
    l2_lookup_sync(a, keys, 1, bits); /* locks keys[0] */
    assert_string_equal(bits, "1");

    lmc_l2_adapter_delete(a, keys, 2);
    char rk0[512], rk1[512];
    redis_key("lmcache:", &keys[0], rk0, sizeof(rk0));
    redis_key("lmcache:", &keys[1], rk1, sizeof(rk1));
    assert_int_equal(redis_test_strlen(rk0), 500); /* locked: kept */
    assert_int_equal(redis_test_strlen(rk1), -1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 500);

    lmc_l2_adapter_submit_unlock(a, keys, 1);
    lmc_l2_adapter_delete(a, keys, 1);
    assert_int_equal(redis_test_strlen(rk0), -1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, 0);
    l2_lookup_sync(a, keys, 2, bits);
    assert_string_equal(bits, "00");
    lmc_l2_adapter_destroy(a);
}

static void test_resp_capacity_eviction_deletes_only_own_keys(void **state)
{
    (void)state;
    /* ~10.7 KB of capacity: 4 objects of 2 KiB put usage at 0.76. */
    lmc_l2_adapter *a = resp_adapter("\"max_capacity_gb\": 0.00001, "
                                     "\"eviction\": {\"eviction_policy\": \"LRU\"}");
    lmc_l2_adapter *other = resp_adapter("");
    assert_non_null(a);
    assert_non_null(other);
    assert_true(lmc_l2_adapter_supports_global_eviction(a));
    lmc_object_key keys[5];
    static uint8_t b[5][2 * KB];
    lmc_memory_obj objs[5];
    for (uint32_t i = 0; i < 5; i++) {
        keys[i] = l2_key("m", 100 + i, 0, 0, NULL);
        l2_fill(b[i], sizeof(b[i]), (uint8_t)i);
        objs[i] = (lmc_memory_obj){b[i], sizeof(b[i]), sizeof(b[i]), 0};
    }
    assert_int_equal(l2_store_sync(a, keys, objs, 4), 4 * 2 * KB);
    assert_int_equal(l2_store_sync(other, &keys[4], &objs[4], 1),
                     2 * KB); /* another writer's key */
    lmc_l2_usage u = lmc_l2_adapter_get_usage(a);
    assert_int_equal(u.bytes_used, 4 * 2 * KB);
    assert_int_equal(u.capacity_bytes, (uint64_t)(0.00001 * 1024.0 * 1024.0 * 1024.0));
    assert_true(lmc_l2_usage_fraction(&u) > 0.7 && lmc_l2_usage_fraction(&u) < 0.8);
    assert_int_equal(l2_status_int(a, NULL, "tracked_keys"), 4);

    /* What the eviction controller does: delete its victims. keys[4] is not ours. */
    lmc_object_key victims[3] = {keys[0], keys[1], keys[4]};
    lmc_l2_adapter_delete(a, victims, 3);
    u = lmc_l2_adapter_get_usage(a);
    assert_int_equal(u.bytes_used, 2 * 2 * KB);
    char bits[8];
    l2_lookup_sync(a, keys, 5, bits);
    assert_string_equal(bits, "00111");
    lmc_l2_adapter_submit_unlock(a, keys, 5);
    lmc_l2_adapter_destroy(other);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Faults                                                               */
/* ------------------------------------------------------------------ */

static void test_resp_redis_restart_fails_tasks_then_reconnects(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("\"timeout_ms\": 500");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[4 * KB];
    l2_fill(b, sizeof(b), 5);
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), sizeof(b));
    assert_true(status_bool(a, "connected"));

    redis_test_stop();
    uint64_t t0 = lmc_mono_ms();
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), -1);
    char bits[4];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "0");
    uint8_t d[sizeof(b)];
    lmc_memory_obj dst = {d, sizeof(d), sizeof(d), 0};
    l2_load_sync(a, &k, &dst, 1, bits);
    assert_string_equal(bits, "0");
    assert_true(lmc_mono_ms() - t0 < 3000); /* failures do not wait out long timeouts */
    assert_true(l2_wait_healthy(a, false, 3000));
    assert_false(status_bool(a, "connected"));
    char err[256];
    status_error(a, err, sizeof(err));
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%d", redis_test_port());
    assert_non_null(strstr(err, endpoint));

    char msg[256];
    assert_true(redis_test_start(redis_test_port(), msg, sizeof(msg)));
    assert_true(l2_wait_healthy(a, true, 10000)); /* backoff stays <= 5 s */
    assert_true(status_bool(a, "connected"));
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), sizeof(b)); /* the restarted server is empty */
    l2_load_sync(a, &k, &dst, 1, bits);
    assert_string_equal(bits, "1");
    assert_memory_equal(d, b, sizeof(b));
    lmc_l2_adapter_destroy(a);
}

static void test_resp_stalled_redis_times_out_tasks(void **state)
{
    (void)state;
    lmc_l2_adapter *a = resp_adapter("\"timeout_ms\": 300, \"connections\": 2");
    assert_non_null(a);
    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[100];
    l2_fill(b, sizeof(b), 5);
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), sizeof(b));

    redis_test_pause(true); /* accepts bytes, answers nothing */
    uint64_t t0 = lmc_mono_ms();
    char bits[4];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "0");
    assert_true(lmc_mono_ms() - t0 < 2000);
    assert_true(l2_wait_healthy(a, false, 3000));
    redis_test_pause(false);
    assert_true(l2_wait_healthy(a, true, 10000));
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "1");
    lmc_l2_adapter_submit_unlock(a, &k, 1);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_redis_down_at_start_fails_fast(void **state)
{
    (void)state;
    redis_test_stop();
    uint64_t t0 = lmc_mono_ms();
    lmc_l2_adapter *a = resp_adapter("\"timeout_ms\": 500");
    assert_non_null(a); /* not an error: it keeps trying */
    assert_false(lmc_l2_adapter_is_healthy(a));
    assert_false(status_bool(a, "connected"));
    char err[256];
    status_error(a, err, sizeof(err));
    assert_non_null(strstr(err, "connect"));

    lmc_object_key k = l2_key("m", 1, 0, 0, NULL);
    uint8_t b[100] = {0};
    lmc_memory_obj obj = {b, sizeof(b), sizeof(b), 0};
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), -1);
    char bits[4];
    l2_lookup_sync(a, &k, 1, bits);
    assert_string_equal(bits, "0");
    l2_load_sync(a, &k, &obj, 1, bits);
    assert_string_equal(bits, "0");
    assert_true(lmc_mono_ms() - t0 < 1500);
    assert_true(l2_status_int(a, NULL, "failed_tasks") >= 3);

    /* Once Redis appears, the adapter finds it by itself. */
    char msg[256];
    assert_true(redis_test_start(redis_test_port(), msg, sizeof(msg)));
    assert_true(l2_wait_healthy(a, true, 10000));
    assert_int_equal(l2_store_sync(a, &k, &obj, 1), sizeof(b));
    lmc_l2_adapter_destroy(a);
}

static void test_resp_auth_failure_is_reported_without_the_secret(void **state)
{
    (void)state;
    setenv("LMC_TEST_RESP_PASSWORD", "s3cret-value", 1);
    lmc_l2_adapter *a = resp_adapter("\"password_env\": \"LMC_TEST_RESP_PASSWORD\", "
                                     "\"connections\": 1");
    assert_non_null(a);
    assert_false(lmc_l2_adapter_is_healthy(a)); /* this server has no password */
    char err[256];
    status_error(a, err, sizeof(err));
    assert_non_null(strstr(err, "AUTH"));
    assert_null(strstr(err, "s3cret"));
    lmc_l2_adapter_destroy(a);
    unsetenv("LMC_TEST_RESP_PASSWORD");
}

/* ------------------------------------------------------------------ */
/* Two StorageManagers, one Redis                                       */
/* ------------------------------------------------------------------ */

static void test_resp_two_storage_managers_share_one_redis(void **state)
{
    (void)state;
    char json[128];
    snprintf(json, sizeof(json), "{\"type\":\"resp\",\"port\":%d}", redis_test_port());
    lmc_storage_manager *writer = sm_test_create_l2(json);
    lmc_storage_manager *reader = sm_test_create_l2(json);
    enum { N = 8 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 900);
    lmc_layout_desc lay = sm_test_layout(16 * KB);
    assert_int_equal(sm_test_store(writer, k, N, &lay), N);
    assert_true(lmc_sm_wait_idle(writer, 5000));

    sm_test_prefetch_and_check(reader, k, N, &lay); /* what the writer stored, read back */
    lmc_sm_destroy(reader);
    lmc_sm_destroy(writer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_config_errors_name_the_field),
        cmocka_unit_test_setup(test_resp_store_lookup_load_round_trip, setup),
        cmocka_unit_test_setup(test_resp_store_of_an_existing_key_writes_nothing, setup),
        cmocka_unit_test_setup(test_resp_key_prefix_is_used, setup),
        cmocka_unit_test_setup(test_resp_delete_skips_locked_keys, setup),
        cmocka_unit_test_setup(test_resp_capacity_eviction_deletes_only_own_keys, setup),
        cmocka_unit_test_setup(test_resp_redis_restart_fails_tasks_then_reconnects, setup),
        cmocka_unit_test_setup(test_resp_stalled_redis_times_out_tasks, setup),
        cmocka_unit_test_setup(test_resp_redis_down_at_start_fails_fast, setup),
        cmocka_unit_test_setup(test_resp_auth_failure_is_reported_without_the_secret, setup),
        cmocka_unit_test_setup(test_resp_two_storage_managers_share_one_redis, setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
