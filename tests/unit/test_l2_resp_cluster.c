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
static size_t owner_of(const lmc_object_key *key)
{
    int owner = redis_test_cluster_slot_owner(g_cl, key_slot(key));
    assert_true(owner >= 0);
    return (size_t)owner;
}

/* The bitmap a lookup of o should give with node victim gone: its keys '0', the others '1'. */
static void expect_all_but(const objects *o, size_t victim, char *expect)
{
    for (size_t i = 0; i < o->n; i++)
        expect[i] = owner_of(&o->keys[i]) == victim ? '0' : '1';
    expect[o->n] = '\0';
}

/* The adapter's status object (the caller frees it). */
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
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        l2_assert_config_invalid(cases[i].json, cases[i].msg);
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

/* ------------------------------------------------------------------ */
/* Redirects                                                            */
/* ------------------------------------------------------------------ */

/* A command on node i that must answer OK. */
static void node_ok(const lmc_redis_cluster *c, size_t i, const char *fmt, ...)
{
    char cmd[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (!lmc_redis_command_ok(lmc_redis_cluster_port(c, i), cmd))
        fail_msg("node %zu did not answer OK to %s", i, cmd);
}

static void test_resp_cluster_follows_ask_and_moved(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "\"connections\": 1");
    assert_non_null(a);
    /* A hash tag in the model name puts every key of these objects in one slot. */
    objects o = make_objects("{lmc}m", 3, 4 * KB, 70);
    unsigned slot = key_slot(&o.keys[0]);
    assert_int_equal(key_slot(&o.keys[1]), slot);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, 1), 4 * KB);
    size_t from = owner_of(&o.keys[0]), to = (from + 1) % MASTERS, third = (from + 2) % MASTERS;
    char id_from[41], id_to[41], id_third[41], rk0[600], rk1[600];
    assert_true(redis_test_cluster_id(g_cl, from, id_from));
    assert_true(redis_test_cluster_id(g_cl, to, id_to));
    assert_true(redis_test_cluster_id(g_cl, third, id_third));
    redis_key(&o.keys[0], rk0, sizeof(rk0));
    redis_key(&o.keys[1], rk1, sizeof(rk1));

    /* Migrate by hand: the slot is migrating, and keys[0] has moved already. */
    node_ok(g_cl, to, "CLUSTER SETSLOT %u IMPORTING %s", slot, id_from);
    node_ok(g_cl, from, "CLUSTER SETSLOT %u MIGRATING %s", slot, id_to);
    redisReply *r =
        lmc_redis_command(lmc_redis_cluster_port(g_cl, from), "MIGRATE 127.0.0.1 %d %s 0 5000",
                          lmc_redis_cluster_port(g_cl, to), rk0);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);

    /* The source answers ASK for what it lacks: loaded, and stored, on the target. */
    char bits[4];
    l2_load_sync(a, o.keys, o.dst, 1, bits);
    assert_string_equal(bits, "1");
    assert_memory_equal(o.dst_buf, o.src_buf, o.size);
    assert_int_equal(l2_store_sync(a, &o.keys[1], &o.src[1], 1), 4 * KB);
    assert_true(l2_status_int(a, NULL, "redirects_ask") >= 2);
    assert_int_equal(l2_status_int(a, NULL, "redirects_moved"), 0);

    /* The slot now belongs to the target: one MOVED, the map follows, no more redirects. */
    node_ok(g_cl, to, "CLUSTER SETSLOT %u NODE %s", slot, id_to);
    node_ok(g_cl, from, "CLUSTER SETSLOT %u NODE %s", slot, id_to);
    node_ok(g_cl, third, "CLUSTER SETSLOT %u NODE %s", slot, id_to);
    /* Both keys are on the target (an importing node answers only after ASKING). */
    assert_int_equal(redis_test_strlen_at(lmc_redis_cluster_port(g_cl, to), rk0), 4 * KB);
    assert_int_equal(redis_test_strlen_at(lmc_redis_cluster_port(g_cl, to), rk1), 4 * KB);
    l2_lookup_sync(a, o.keys, 2, bits);
    assert_string_equal(bits, "11");
    lmc_l2_adapter_submit_unlock(a, o.keys, 2);
    int64_t moved = l2_status_int(a, NULL, "redirects_moved");
    assert_true(moved >= 1);
    l2_lookup_sync(a, o.keys, 2, bits);
    assert_string_equal(bits, "11");
    lmc_l2_adapter_submit_unlock(a, o.keys, 2);
    assert_int_equal(l2_status_int(a, NULL, "redirects_moved"), moved);

    /* A redirect loop (an ASK to a node that does not import) ends after 5 redirects. */
    node_ok(g_cl, to, "CLUSTER SETSLOT %u MIGRATING %s", slot, id_third);
    uint64_t t0 = lmc_mono_ms();
    assert_int_equal(l2_store_sync(a, &o.keys[2], &o.src[2], 1), -1);
    assert_true(lmc_mono_ms() - t0 < 2000);
    lmc_json *st = status_of(a);
    const char *err = lmc_json_get_string(lmc_json_object_get(st, "last_error"), NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "5 redirects"));
    lmc_json_free(st);
    node_ok(g_cl, to, "CLUSTER SETSLOT %u STABLE", slot);
    assert_int_equal(l2_store_sync(a, &o.keys[2], &o.src[2], 1), 4 * KB);
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Faults                                                               */
/* ------------------------------------------------------------------ */

static void test_resp_cluster_killed_master_fails_its_slots_only(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "\"timeout_ms\": 500");
    assert_non_null(a);
    enum { N = 30 };
    objects o = make_objects("m", N, 8 * KB, 300);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, N), N * 8 * KB);
    const size_t victim = 0;
    char expect[N + 1];
    expect_all_but(&o, victim, expect);
    assert_non_null(strchr(expect, '0'));
    assert_non_null(strchr(expect, '1'));

    lmc_redis_cluster_kill(g_cl, victim);
    uint64_t t0 = lmc_mono_ms();
    char bits[N + 1];
    l2_lookup_sync(a, o.keys, N, bits);
    assert_string_equal(bits, expect); /* its keys miss, the others are found */
    lmc_l2_adapter_submit_unlock(a, o.keys, N);
    load_all(a, &o, bits);
    assert_string_equal(bits, expect);
    for (size_t i = 0; i < N; i++) {
        if (expect[i] == '1')
            assert_memory_equal(o.dst[i].data, o.src[i].data, o.size);
    }
    /* A store touching the dead master fails; one that does not succeeds. */
    objects fresh = make_objects("m", N, 1 * KB, 900);
    lmc_object_key live[N], dead[N];
    lmc_memory_obj live_o[N], dead_o[N];
    size_t nl = 0, nd = 0;
    for (size_t i = 0; i < N; i++) {
        if (owner_of(&fresh.keys[i]) == victim) {
            dead[nd] = fresh.keys[i];
            dead_o[nd++] = fresh.src[i];
        } else {
            live[nl] = fresh.keys[i];
            live_o[nl++] = fresh.src[i];
        }
    }
    assert_true(nl > 0 && nd > 0);
    assert_int_equal(l2_store_sync(a, live, live_o, nl), (int64_t)(nl * KB));
    assert_int_equal(l2_store_sync(a, fresh.keys, fresh.src, N), -1);
    assert_true(lmc_mono_ms() - t0 < 3000); /* nothing waited for the dead node */

    /* The status names it. */
    assert_false(lmc_l2_adapter_is_healthy(a));
    lmc_json *st = status_of(a);
    const lmc_json *bad = lmc_json_object_get(st, "unhealthy_nodes");
    assert_int_equal(lmc_json_size(bad), 1);
    char addr[32];
    lmc_redis_cluster_addr(g_cl, victim, addr, sizeof(addr));
    assert_string_equal(
        lmc_json_get_string(lmc_json_object_get(lmc_json_array_at(bad, 0), "address"), NULL), addr);
    assert_non_null(
        lmc_json_get_string(lmc_json_object_get(lmc_json_array_at(bad, 0), "last_error"), NULL));
    assert_true(lmc_json_get_bool(lmc_json_object_get(st, "connected")));
    lmc_json_free(st);

    /* It comes back (empty: no persistence); the adapter finds it by itself. */
    lmc_error e;
    assert_int_equal(lmc_redis_cluster_restart(g_cl, victim, &e), LMC_OK);
    assert_true(lmc_redis_cluster_wait_ok(g_cl, 10000));
    assert_true(l2_wait_healthy(a, true, 10000));
    assert_int_equal(l2_store_sync(a, dead, dead_o, nd), (int64_t)(nd * KB));
    assert_true(l2_store_sync(a, o.keys, o.src, N) > 0); /* the dead master's share again */
    load_all(a, &o, bits);
    assert_true(all_ones(bits));
    assert_memory_equal(o.dst_buf, o.src_buf, N * o.size);
    free_objects(&fresh);
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_cluster_stalled_master_costs_one_timeout(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "\"timeout_ms\": 1000, \"connections\": 1");
    assert_non_null(a);
    enum { N = 24 };
    objects o = make_objects("m", N, 2 * KB, 1300);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, N), N * 2 * KB);
    const size_t victim = 2;
    char expect[N + 1];
    expect_all_but(&o, victim, expect);

    /* It keeps its sockets but answers nothing: the first task finds out in one timeout. */
    lmc_redis_cluster_pause(g_cl, victim, true);
    char bits[N + 1];
    uint64_t t0 = lmc_mono_ms();
    l2_lookup_sync(a, o.keys, N, bits);
    uint64_t first = lmc_mono_ms() - t0;
    assert_string_equal(bits, expect);
    lmc_l2_adapter_submit_unlock(a, o.keys, N);
    assert_true(first >= 900 && first < 4000); /* waited for the reply once */
    /* The next ones do not wait for it at all. */
    t0 = lmc_mono_ms();
    l2_lookup_sync(a, o.keys, N, bits);
    assert_string_equal(bits, expect);
    lmc_l2_adapter_submit_unlock(a, o.keys, N);
    assert_true(lmc_mono_ms() - t0 < 500);
    assert_true(l2_status_int(a, NULL, "slots_served") < 16384);

    lmc_redis_cluster_pause(g_cl, victim, false);
    assert_true(l2_wait_healthy(a, true, 10000));
    l2_lookup_sync(a, o.keys, N, bits);
    assert_true(all_ones(bits));
    lmc_l2_adapter_submit_unlock(a, o.keys, N);
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_cluster_whole_outage_fails_fast_and_recovers(void **state)
{
    (void)state;
    for (size_t i = 0; i < MASTERS; i++)
        lmc_redis_cluster_kill(g_cl, i);
    uint64_t t0 = lmc_mono_ms();
    lmc_l2_adapter *a = cluster_adapter(g_cl, "\"timeout_ms\": 500");
    assert_non_null(a); /* not an error: it keeps trying */
    assert_false(lmc_l2_adapter_is_healthy(a));
    objects o = make_objects("m", 6, 1 * KB, 40);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, o.n), -1);
    char bits[8];
    l2_lookup_sync(a, o.keys, o.n, bits);
    assert_string_equal(bits, "000000");
    assert_true(lmc_mono_ms() - t0 < 1500);
    assert_true(l2_status_int(a, NULL, "failed_tasks") >= 2);

    lmc_error e;
    for (size_t i = 0; i < MASTERS; i++)
        assert_int_equal(lmc_redis_cluster_restart(g_cl, i, &e), LMC_OK);
    assert_true(lmc_redis_cluster_wait_ok(g_cl, 10000));
    assert_true(l2_wait_healthy(a, true, 10000));
    assert_int_equal(l2_store_sync(a, o.keys, o.src, o.n), 6 * KB);
    load_all(a, &o, bits);
    assert_string_equal(bits, "111111");
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

static void test_resp_cluster_resharding_while_in_use(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "");
    assert_non_null(a);
    enum { BATCH = 16, ROUNDS = 64 };
    objects o = make_objects("m", BATCH * ROUNDS, 16 * KB, 5000);
    bool stored[ROUNDS] = {false};
    /* Some keys first, so that the resharding has keys to migrate. */
    for (size_t b = 0; b < 8; b++)
        stored[b] = l2_store_sync(a, &o.keys[b * BATCH], &o.src[b * BATCH], BATCH) >= 0;

    char id_from[41], id_to[41], from_addr[32], slots[16], log[128];
    assert_true(redis_test_cluster_id(g_cl, 0, id_from));
    assert_true(redis_test_cluster_id(g_cl, 1, id_to));
    lmc_redis_cluster_addr(g_cl, 0, from_addr, sizeof(from_addr));
    snprintf(slots, sizeof(slots), "%d", 1500);
    snprintf(log, sizeof(log), "%s/reshard.log", lmc_redis_cluster_dir(g_cl));
    const char *argv[] = {"redis-cli",
                          "--cluster",
                          "reshard",
                          from_addr,
                          "--cluster-from",
                          id_from,
                          "--cluster-to",
                          id_to,
                          "--cluster-slots",
                          slots,
                          "--cluster-yes",
                          "--cluster-pipeline",
                          "4",
                          NULL};
    pid_t pid = lmc_redis_spawn(argv, log);
    assert_true(pid > 0);
    int rc = -2;
    size_t failed = 0, rounds = 8;
    char bits[BATCH + 1];
    uint64_t deadline = lmc_mono_ms() + 30000;
    while (rounds < ROUNDS && lmc_mono_ms() < deadline) {
        size_t b = rounds++;
        stored[b] = l2_store_sync(a, &o.keys[b * BATCH], &o.src[b * BATCH], BATCH) >= 0;
        failed += !stored[b];
        size_t back = b / 2; /* read an earlier batch while the slots move */
        l2_load_sync(a, &o.keys[back * BATCH], &o.dst[back * BATCH], BATCH, bits);
        int status;
        if (rc == -2 && waitpid(pid, &status, WNOHANG) == pid) {
            rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            if (rounds >= 24)
                break;
        }
    }
    if (rc == -2)
        rc = lmc_redis_wait(pid, 20000);
    assert_int_equal(rc, 0);
    assert_true(lmc_redis_cluster_wait_ok(g_cl, 10000));

    /* Every key stored ends up readable, wherever its slot went. */
    for (size_t b = 0; b < rounds; b++) {
        if (!stored[b])
            continue;
        memset(o.dst_buf + b * BATCH * o.size, 0, BATCH * o.size);
        l2_load_sync(a, &o.keys[b * BATCH], &o.dst[b * BATCH], BATCH, bits);
        assert_true(all_ones(bits));
        assert_memory_equal(o.dst_buf + b * BATCH * o.size, o.src_buf + b * BATCH * o.size,
                            BATCH * o.size);
    }
    assert_true(failed < rounds / 2);
    assert_true(redis_test_cluster_slot_owner(g_cl, 0) == 1); /* the first slots moved */
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
}

/* The node that replicates master m, or -1. */
static int replica_of(const lmc_redis_cluster *c, size_t m)
{
    for (size_t i = 0; i < lmc_redis_cluster_size(c); i++) {
        redisReply *r = lmc_redis_command(lmc_redis_cluster_port(c, i), "ROLE");
        bool match = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                     strcmp(r->element[0]->str, "slave") == 0 &&
                     r->element[2]->integer == lmc_redis_cluster_port(c, m);
        if (r != NULL)
            freeReplyObject(r);
        if (match)
            return (int)i;
    }
    return -1;
}

static void test_resp_cluster_failover_to_a_replica(void **state)
{
    (void)state;
    char err[512];
    lmc_redis_cluster *c = redis_test_cluster_start(MASTERS, 1, err, sizeof(err));
    if (c == NULL)
        fail_msg("cannot start a cluster with replicas: %s", err);
    lmc_l2_adapter *a = cluster_adapter(c, "\"timeout_ms\": 500");
    assert_non_null(a);
    enum { N = 24 };
    objects o = make_objects("m", N, 4 * KB, 7000);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, N), N * 4 * KB);

    /* The master of keys[0], and its replica once it holds every key the master has. */
    int m = -1;
    char rk[600];
    redis_key(&o.keys[0], rk, sizeof(rk));
    for (size_t i = 0; i < lmc_redis_cluster_size(c) && m < 0; i++) {
        if (lmc_redis_cluster_is_master(c, i) &&
            redis_test_strlen_at(lmc_redis_cluster_port(c, i), rk) == 4 * KB)
            m = (int)i;
    }
    assert_true(m >= 0);
    int rep = replica_of(c, (size_t)m);
    assert_true(rep >= 0);
    uint64_t deadline = lmc_mono_ms() + 5000;
    while (redis_test_cluster_dbsize(c, (size_t)rep) != redis_test_cluster_dbsize(c, (size_t)m) &&
           lmc_mono_ms() < deadline)
        lmc_sleep_ns(10 * 1000 * 1000);
    assert_int_equal(redis_test_cluster_dbsize(c, (size_t)rep),
                     redis_test_cluster_dbsize(c, (size_t)m));

    lmc_redis_cluster_kill(c, (size_t)m);
    char bits[N + 1];
    l2_lookup_sync(a, o.keys, 1, bits);
    assert_string_equal(bits, "0"); /* its master is gone: a miss, at once */

    /* The replica takes over (node timeout 1 s); the adapter's map follows. */
    deadline = lmc_mono_ms() + 20000;
    while (!lmc_redis_cluster_is_master(c, (size_t)rep) && lmc_mono_ms() < deadline)
        lmc_sleep_ns(50 * 1000 * 1000);
    assert_true(lmc_redis_cluster_is_master(c, (size_t)rep));
    assert_true(l2_wait_healthy(a, true, 10000));
    load_all(a, &o, bits);
    assert_true(all_ones(bits)); /* the replica had them all */
    assert_memory_equal(o.dst_buf, o.src_buf, N * o.size);
    objects fresh = make_objects("m", N, 2 * KB, 8000);
    assert_int_equal(l2_store_sync(a, fresh.keys, fresh.src, N), N * 2 * KB);
    load_all(a, &fresh, bits);
    assert_true(all_ones(bits));
    free_objects(&fresh);
    free_objects(&o);
    lmc_l2_adapter_destroy(a);
    redis_test_cluster_stop(c);
}

/* ------------------------------------------------------------------ */
/* Usage and eviction across nodes                                      */
/* ------------------------------------------------------------------ */

static void test_resp_cluster_capacity_eviction_across_nodes(void **state)
{
    (void)state;
    lmc_l2_adapter *a = cluster_adapter(g_cl, "\"max_capacity_gb\": 0.0001, "
                                              "\"eviction\": {\"eviction_policy\": \"LRU\"}");
    lmc_l2_adapter *other = cluster_adapter(g_cl, "");
    assert_non_null(a);
    assert_non_null(other);
    enum { N = 12 };
    objects o = make_objects("m", N + 1, 2 * KB, 600);
    assert_int_equal(l2_store_sync(a, o.keys, o.src, N), N * 2 * KB);
    assert_int_equal(l2_store_sync(other, &o.keys[N], &o.src[N], 1), 2 * KB); /* not ours */
    assert_int_equal(l2_status_int(a, NULL, "tracked_keys"), N);

    /* Victims on every master, and one key another writer owns. */
    lmc_object_key victims[N / 2 + 1];
    bool on[MASTERS] = {false};
    for (size_t i = 0; i < N / 2; i++) {
        victims[i] = o.keys[i];
        on[owner_of(&o.keys[i])] = true;
    }
    victims[N / 2] = o.keys[N];
    assert_true(on[0] && on[1] && on[2]);
    lmc_l2_adapter_delete(a, victims, N / 2 + 1);
    assert_int_equal(lmc_l2_adapter_get_usage(a).bytes_used, (N - N / 2) * 2 * KB);
    for (size_t i = 0; i <= N; i++) {
        char rk[600];
        redis_key(&o.keys[i], rk, sizeof(rk));
        assert_int_equal(redis_test_cluster_strlen(g_cl, rk), i < N / 2 ? -1 : (long long)(2 * KB));
    }
    /* Per-node usage still sums to the adapter's. */
    lmc_json *st = status_of(a);
    const lmc_json *nodes = lmc_json_object_get(st, "nodes");
    int64_t bytes = 0;
    for (size_t i = 0; i < lmc_json_size(nodes); i++)
        bytes += lmc_json_get_int(lmc_json_object_get(lmc_json_array_at(nodes, i), "bytes_used"));
    assert_int_equal(bytes, (N - N / 2) * 2 * KB);
    lmc_json_free(st);
    free_objects(&o);
    lmc_l2_adapter_destroy(other);
    lmc_l2_adapter_destroy(a);
}

static long long cluster_keys(const lmc_redis_cluster *c, long long *per_node)
{
    long long total = 0;
    for (size_t i = 0; i < MASTERS; i++) {
        per_node[i] = redis_test_cluster_dbsize(c, i);
        total += per_node[i];
    }
    return total;
}

static void test_resp_cluster_l2_eviction_controller_evicts_over_all_nodes(void **state)
{
    (void)state;
    char nodes[512], json[1024];
    nodes_json(g_cl, nodes, sizeof(nodes));
    /* 16 objects of 16 KiB against ~160 KiB: the watermark (0.5) is crossed. */
    snprintf(json, sizeof(json),
             "{\"type\": \"resp\", \"cluster\": true, %s, \"max_capacity_gb\": 0.00015, "
             "\"eviction\": {\"eviction_policy\": \"LRU\", \"trigger_watermark\": 0.5, "
             "\"eviction_ratio\": 0.5}}",
             nodes);
    lmc_storage_manager *sm = sm_test_create_l2(json);
    enum { N = 16 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 4200);
    lmc_layout_desc lay = sm_test_layout(16 * KB);
    assert_int_equal(sm_test_store(sm, k, N, &lay), N);
    assert_true(lmc_sm_wait_idle(sm, 5000));
    long long before[MASTERS], after[MASTERS];
    long long total = cluster_keys(g_cl, before);
    assert_true(total > 0);
    /* The eviction loop runs every second: wait a few periods for its victims. */
    uint64_t deadline = lmc_mono_ms() + 8000;
    while (cluster_keys(g_cl, after) >= total && lmc_mono_ms() < deadline)
        lmc_sleep_ns(100 * 1000 * 1000);
    assert_true(cluster_keys(g_cl, after) < total);
    size_t shrunk = 0;
    for (size_t i = 0; i < MASTERS; i++)
        shrunk += after[i] < before[i];
    assert_true(shrunk >= 2); /* one policy over every node's keys, not per node */
    lmc_sm_destroy(sm);
}

static void test_resp_cluster_two_storage_managers_share_it(void **state)
{
    (void)state;
    char nodes[512], json[600];
    nodes_json(g_cl, nodes, sizeof(nodes));
    snprintf(json, sizeof(json), "{\"type\":\"resp\",\"cluster\":true,%s}", nodes);
    lmc_storage_manager *writer = sm_test_create_l2(json);
    lmc_storage_manager *reader = sm_test_create_l2(json);
    enum { N = 12 };
    lmc_object_key k[N];
    sm_test_keys(k, N, 900);
    lmc_layout_desc lay = sm_test_layout(16 * KB);
    assert_int_equal(sm_test_store(writer, k, N, &lay), N);
    assert_true(lmc_sm_wait_idle(writer, 5000));
    long long per_node[MASTERS];
    assert_int_equal(cluster_keys(g_cl, per_node), N);

    sm_test_prefetch_and_check(reader, k, N, &lay); /* what the writer stored, read back */
    lmc_sm_destroy(reader);
    lmc_sm_destroy(writer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resp_cluster_config_errors_name_the_field),
        cmocka_unit_test_setup(test_resp_cluster_key_slots_match_the_server, setup),
        cmocka_unit_test_setup(test_resp_cluster_objects_spread_over_every_master, setup),
        cmocka_unit_test_setup(test_resp_cluster_is_found_by_info_cluster, setup),
        cmocka_unit_test_setup(test_resp_cluster_follows_ask_and_moved, setup),
        cmocka_unit_test_setup(test_resp_cluster_killed_master_fails_its_slots_only, setup),
        cmocka_unit_test_setup(test_resp_cluster_stalled_master_costs_one_timeout, setup),
        cmocka_unit_test_setup(test_resp_cluster_whole_outage_fails_fast_and_recovers, setup),
        cmocka_unit_test_setup(test_resp_cluster_capacity_eviction_across_nodes, setup),
        cmocka_unit_test_setup(test_resp_cluster_l2_eviction_controller_evicts_over_all_nodes,
                               setup),
        cmocka_unit_test_setup(test_resp_cluster_two_storage_managers_share_it, setup),
        cmocka_unit_test_setup(test_resp_cluster_resharding_while_in_use, setup),
        cmocka_unit_test(test_resp_cluster_failover_to_a_replica),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
