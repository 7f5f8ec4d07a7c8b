/*
 * test_l2_resp_cluster.c -- the "resp" L2 adapter on a real Redis Cluster,
 * without a proxy: config errors, hash slots, objects spread over every
 * master, MOVED and ASK forced by hand, a master killed and restarted, a
 * resharding while the adapter runs, a failover to a replica, capacity
 * eviction across nodes, two StorageManagers on one cluster, and the
 * cluster found by `INFO cluster`.
 *
 * The group setup starts a 3-master cluster (redis_test_util: loopback
 * ports, node timeout 1 s, cluster-require-full-coverage no); the failover
 * test starts its own with one replica per master. Everything is killed and
 * the temporary directories removed at teardown and at exit, also when a
 * test fails. Every wait is bounded.
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
#include <sys/wait.h>

#include "core/clock.h"
#include "helpers/l2_test_util.h"
#include "helpers/redis_test_util.h"
#include "helpers/sm_test_util.h"
#include "l2/adapter.h"
#include "l2/adapter_impl.h"
#include "l2/resp_cluster.h"
#include "lmcache/storage_manager.h"

#define KB 1024u
#define MASTERS 3

static lmc_redis_cluster *g_cl;

static int group_setup(void **state)
{
    (void)state;
    char err[512];
    g_cl = redis_test_cluster_start(MASTERS, 0, err, sizeof(err));
    if (g_cl == NULL) {
        fprintf(stderr, "test_l2_resp_cluster: cannot start a Redis Cluster: %s\n", err);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    redis_test_cluster_stop(g_cl);
    return 0;
}

/* Every node running and the cluster ok, with no keys. */
static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < lmc_redis_cluster_size(g_cl); i++) {
        lmc_error e;
        if (!lmc_redis_cluster_running(g_cl, i) &&
            lmc_redis_cluster_restart(g_cl, i, &e) != LMC_OK) {
            fprintf(stderr, "test_l2_resp_cluster: cannot restart node %zu: %s\n", i, e.msg);
            return -1;
        }
    }
    return lmc_redis_cluster_wait_ok(g_cl, 10000) && lmc_redis_cluster_flushall(g_cl) ? 0 : -1;
}

/* "nodes": [...] of every node of c, for a config. */
static void nodes_json(const lmc_redis_cluster *c, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "\"nodes\": [");
    for (size_t i = 0; i < lmc_redis_cluster_size(c) && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s\"127.0.0.1:%d\"", i ? ", " : "",
                               lmc_redis_cluster_port(c, i));
    snprintf(buf + at, at < len ? len - at : 0, "]");
}

/* A cluster-mode resp adapter on c; extra is more JSON members or "". */
static lmc_l2_adapter *cluster_adapter(const lmc_redis_cluster *c, const char *extra)
{
    char nodes[512];
    nodes_json(c, nodes, sizeof(nodes));
    lmc_error err;
    lmc_error_clear(&err);
    lmc_l2_adapter *a = l2_adapter_from(&err, "{\"type\": \"resp\", \"cluster\": true, %s%s%s}",
                                        nodes, extra[0] != '\0' ? ", " : "", extra);
    if (a == NULL)
        print_error("create failed: %s\n", err.msg);
    return a;
}

/* The Redis key of key, as the adapter names it (prefix "lmcache:"). */
static void redis_key(const lmc_object_key *key, char *buf, size_t len)
{
    char name[512];
    size_t n = lmc_l2_fs_key_name(key, name, sizeof(name));
    snprintf(buf, len, "lmcache:%.*s", (int)(n - 5), name);
}

static unsigned key_slot(const lmc_object_key *key)
{
    char rk[600];
    redis_key(key, rk, sizeof(rk));
    return lmc_resp_key_slot(rk, strlen(rk));
}

/* Poll is_healthy until it equals want, up to ms. */
__attribute__((unused)) static bool wait_healthy(lmc_l2_adapter *a, bool want, uint64_t ms)
{
    uint64_t deadline = lmc_mono_ms() + ms;
    while (lmc_l2_adapter_is_healthy(a) != want) {
        if (lmc_mono_ms() > deadline)
            return false;
        lmc_sleep_ns(20 * 1000 * 1000);
    }
    return true;
}

/* n keys of model and their objects over one shared buffer of size bytes each. */
typedef struct objects {
    size_t n;
    lmc_object_key *keys;
    lmc_memory_obj *src, *dst;
    uint8_t *src_buf, *dst_buf;
    uint64_t size;
} objects;

static objects make_objects(const char *model, size_t n, uint64_t size, uint32_t base)
{
    objects o = {.n = n, .size = size};
    o.keys = calloc(n, sizeof(*o.keys));
    o.src = calloc(n, sizeof(*o.src));
    o.dst = calloc(n, sizeof(*o.dst));
    o.src_buf = malloc(n * size);
    o.dst_buf = calloc(n, size);
    assert_non_null(o.keys);
    assert_non_null(o.src);
    assert_non_null(o.dst);
    assert_non_null(o.src_buf);
    assert_non_null(o.dst_buf);
    for (size_t i = 0; i < n; i++) {
        o.keys[i] = l2_key(model, base + (uint32_t)i, 0, 0, NULL);
        l2_fill(o.src_buf + i * size, size, (uint8_t)(base + i));
        o.src[i] = (lmc_memory_obj){o.src_buf + i * size, size, size, 0};
        o.dst[i] = (lmc_memory_obj){o.dst_buf + i * size, size, size, 0};
    }
    return o;
}

static void free_objects(objects *o)
{
    free(o->keys);
    free(o->src);
    free(o->dst);
    free(o->src_buf);
    free(o->dst_buf);
}

/* Load every object into dst; the bitmap as a string in bits (n + 1 bytes). */
static void load_all(lmc_l2_adapter *a, objects *o, char *bits)
{
    memset(o->dst_buf, 0, o->n * o->size);
    l2_load_sync(a, o->keys, o->dst, o->n, bits);
}

static bool all_ones(const char *bits)
{
    return strspn(bits, "1") == strlen(bits);
}

/* The index of the node serving key's slot now. */
__attribute__((unused)) static size_t owner_of(const lmc_object_key *key)
{
    int owner = redis_test_cluster_slot_owner(g_cl, key_slot(key));
    assert_true(owner >= 0);
    return (size_t)owner;
}

/* A JSON member object of the status, parsed from its dump (the caller frees). */
static lmc_json *status_of(lmc_l2_adapter *a)
{
    lmc_json *st = lmc_l2_adapter_report_status(a);
    assert_non_null(st);
    return st;
}

/* ------------------------------------------------------------------ */
/* Config and slots                                                     */
/* ------------------------------------------------------------------ */

static void test_resp_cluster_config_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *msg;
    } cases[] = {
        {"{\"type\": \"resp\", \"cluster\": 1}",
         "--l2-adapter: field 'cluster' of type 'resp' must be true or false (got 1)"},
        {"{\"type\": \"resp\", \"nodes\": []}",
         "--l2-adapter: field 'nodes' of type 'resp' must be a non-empty array of at most 64 "
         "\"host:port\" strings (got [])"},
        {"{\"type\": \"resp\", \"nodes\": \"127.0.0.1:7000\"}",
         "--l2-adapter: field 'nodes' of type 'resp' must be a non-empty array of at most 64 "
         "\"host:port\" strings (got \"127.0.0.1:7000\")"},
        {"{\"type\": \"resp\", \"nodes\": [\"127.0.0.1:7000\", \"127.0.0.1\"]}",
         "--l2-adapter: field 'nodes[1]' of type 'resp' must be a \"host:port\" string with a "
         "port in [1, 65535] (got \"127.0.0.1\")"},
        {"{\"type\": \"resp\", \"nodes\": [\"h:0\"]}",
         "--l2-adapter: field 'nodes[0]' of type 'resp' must be a \"host:port\" string with a "
         "port in [1, 65535] (got \"h:0\")"},
        {"{\"type\": \"resp\", \"nodes\": [\":7000\"]}",
         "--l2-adapter: field 'nodes[0]' of type 'resp' must be a \"host:port\" string with a "
         "port in [1, 65535] (got \":7000\")"},
        {"{\"type\": \"resp\", \"nodes\": [7000]}",
         "--l2-adapter: field 'nodes[0]' of type 'resp' must be a \"host:port\" string with a "
         "port in [1, 65535] (got 7000)"},
        {"{\"type\": \"resp\", \"nodes\": [\"h:7000\"], \"port\": 7000}",
         "--l2-adapter: field 'nodes' of type 'resp' cannot be combined with 'host', 'port' or "
         "'unix_socket'"},
        {"{\"type\": \"resp\", \"cluster\": true, \"unix_socket\": \"/tmp/r.sock\"}",
         "--l2-adapter: field 'cluster' of type 'resp' cannot be combined with 'unix_socket' "
         "(cluster nodes are reached over TCP)"},
        {"{\"type\": \"resp\", \"cluster\": true, \"db\": 2}",
         "--l2-adapter: field 'db' of type 'resp' must be 0 with \"cluster\": true (a Redis "
         "Cluster has database 0 only) (got 2)"},
        {"{\"type\": \"resp\", \"cluster\": false, \"nodes\": [\"a:1\", \"b:2\"]}",
         "--l2-adapter: field 'nodes' of type 'resp' lists 2 nodes; several nodes need "
         "\"cluster\": true"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        lmc_json *cfg = l2_json(cases[i].json);
        assert_non_null(cfg);
        lmc_error err;
        lmc_error_clear(&err);
        assert_int_equal(lmc_l2_check_config(cfg, &err), LMC_ERR_INVALID);
        assert_string_equal(err.msg, cases[i].msg);
        lmc_json_free(cfg);
    }
    lmc_json *ok = l2_json("{\"type\": \"resp\", \"cluster\": true, \"nodes\": [\"h1:7000\", "
                           "\"[::1]:7001\", \"::1:7002\"], \"db\": 0}");
    lmc_error err;
    assert_int_equal(lmc_l2_check_config(ok, &err), LMC_OK);
    lmc_json_free(ok);
}

static void test_resp_cluster_key_slots_match_the_server(void **state)
{
    (void)state;
    static const char *const names[] = {"foo",
                                        "{user1000}.following",
                                        "{user1000}.followers",
                                        "foo{}{bar}",
                                        "foo{{bar}}zap",
                                        "foo{bar}{zap}",
                                        "{}",
                                        "a{",
                                        "lmcache:org-SEP-model@0x00000000@0@0000002a",
                                        "lmcache:{lmc}m@0x00000000@0@00000001"};
    int port = lmc_redis_cluster_port(g_cl, 0);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        redisReply *r = lmc_redis_command(port, "CLUSTER KEYSLOT %s", names[i]);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        assert_int_equal(lmc_resp_key_slot(names[i], strlen(names[i])), r->integer);
        freeReplyObject(r);
    }
    /* The spec's examples: a tag hashes alone; an empty one does not count. */
    assert_int_equal(lmc_resp_key_slot("{user1000}.following", 20),
                     lmc_resp_key_slot("user1000", 8));
    assert_int_equal(lmc_resp_key_slot("foo{}{bar}", 10), lmc_resp_key_slot("foo{}{bar}", 10));
    assert_int_equal(lmc_resp_key_slot("foo{bar}{zap}", 13), lmc_resp_key_slot("bar", 3));
}

/* ------------------------------------------------------------------ */
/* Data path                                                            */
/* ------------------------------------------------------------------ */

static void test_resp_cluster_objects_spread_over_every_master(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "");
    assert_non_null(a);
    assert_true(lmc_l2_adapter_is_healthy(a));
    enum { N = 48 };
    objects o = make_objects("org/model", N, 20 * KB, 1000);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, N), N * 20 * KB);

    /* Every master got some of them, and each key sits on the master of its slot. */
    long long total = 0;
    for (size_t i = 0; i < MASTERS; i++) {
        long long n = redis_test_cluster_dbsize(g_cl, i);
        assert_true(n > 0);
        total += n;
    }
    assert_int_equal(total, N);
    char rk[600];
    redis_key(&o.keys[7], rk, sizeof(rk));
    assert_int_equal(redis_test_cluster_strlen(g_cl, rk), 20 * KB);

    char bits[N + 1];
    l2_lookup_sync(a, o.keys, N, bits);
    assert_true(all_ones(bits));
    lmc_l2_adapter_submit_unlock(a, o.keys, N);
    load_all(a, &o, bits);
    assert_true(all_ones(bits));
    assert_memory_equal(o.dst_buf, o.src_buf, N * o.size);

    /* The status: three masters owning all slots; their usage sums to the adapter's. */
    lmc_json *st = status_of(a);
    assert_true(lmc_json_get_bool(lmc_json_object_get(st, "cluster")));
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(st, "slots_served")), 16384);
    const lmc_json *nodes = lmc_json_object_get(st, "nodes");
    int64_t slots = 0, bytes = 0;
    size_t masters = 0;
    for (size_t i = 0; i < lmc_json_size(nodes); i++) {
        const lmc_json *nd = lmc_json_array_at(nodes, i);
        int64_t s = lmc_json_get_int(lmc_json_object_get(nd, "slots"));
        slots += s;
        masters += s > 0;
        bytes += lmc_json_get_int(lmc_json_object_get(nd, "bytes_used"));
        assert_true(lmc_json_get_bool(lmc_json_object_get(nd, "healthy")));
    }
    assert_int_equal(slots, 16384);
    assert_int_equal(masters, MASTERS);
    assert_int_equal(bytes, N * 20 * KB);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, N * 20 * KB);
    assert_int_equal(lmc_json_size(lmc_json_object_get(st, "unhealthy_nodes")), 0);
    lmc_json_free(st);
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_cluster_is_found_by_info_cluster(void **state)
{
    (void)state;
    /* No "cluster": the one seed says cluster_enabled:1. */
    lmc_error err;
    lmc_error_clear(&err);
    lmc_l2_adapter *a = l2_adapter_from(&err, "{\"type\": \"resp\", \"port\": %d}",
                                        lmc_redis_cluster_port(g_cl, 1));
    assert_non_null(a);
    objects o = make_objects("m", 12, 1 * KB, 1);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, o.n), 12 * KB);
    char bits[16];
    load_all(a, &o, bits);
    assert_string_equal(bits, "111111111111");
    lmc_json *st = status_of(a);
    assert_true(lmc_json_get_bool(lmc_json_object_get(st, "cluster")));
    lmc_json_free(st);
    lmc_l2_adapter_destroy(a);

    /* A db other than 0 cannot be: the error names it. */
    a = l2_adapter_from(&err, "{\"type\": \"resp\", \"port\": %d, \"db\": 1}",
                        lmc_redis_cluster_port(g_cl, 1));
    assert_null(a);
    assert_non_null(strstr(err.msg, "field 'db' of type 'resp' must be 0"));
    free_objects(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_cluster_config_errors_name_the_field),
        cmocka_unit_test_setup(test_resp_cluster_key_slots_match_the_server, setup),
        cmocka_unit_test_setup(test_resp_cluster_objects_spread_over_every_master, setup),
        cmocka_unit_test_setup(test_resp_cluster_is_found_by_info_cluster, setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
