/*
 * redis_test_util.c -- private Redis servers for tests (see
 * redis_test_util.h). Single-threaded: only the test's main thread calls it.
 */
#include "helpers/redis_test_util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2/resp_cluster.h"

#define MAX_CLUSTERS 4

static lmc_redis_server g_server = {.pid = -1};
static int g_port;
static bool g_atexit;
static lmc_redis_cluster *g_clusters[MAX_CLUSTERS]; /* started and not yet stopped */

static void at_exit(void)
{
    redis_test_stop();
    for (size_t i = 0; i < MAX_CLUSTERS; i++)
        redis_test_cluster_stop(g_clusters[i]);
}

static void register_atexit(void)
{
    if (!g_atexit) {
        atexit(at_exit);
        g_atexit = true;
    }
}

bool redis_test_start(int port, char *err, size_t len)
{
    register_atexit();
    redis_test_stop();
    lmc_error e;
    if (lmc_redis_server_start(port, NULL, NULL, &g_server, &e) != LMC_OK) {
        snprintf(err, len, "%s", e.msg);
        return false;
    }
    g_port = g_server.port;
    return true;
}

void redis_test_stop(void)
{
    lmc_redis_server_stop(&g_server);
}

int redis_test_port(void)
{
    return g_port;
}

void redis_test_pause(bool paused)
{
    if (g_server.pid > 0)
        kill(g_server.pid, paused ? SIGSTOP : SIGCONT);
}

bool redis_test_flushall(void)
{
    return lmc_redis_command_ok(g_port, "FLUSHALL");
}

long long redis_test_strlen_at(int port, const char *key)
{
    redisContext *c = lmc_redis_connect(port);
    if (c == NULL)
        return -1;
    redisReply *r = redisCommand(c, "EXISTS %s", key);
    long long n = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        freeReplyObject(r);
        r = redisCommand(c, "STRLEN %s", key);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER)
            n = r->integer;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return n;
}

long long redis_test_strlen(const char *key)
{
    return redis_test_strlen_at(g_port, key);
}

/* ------------------------------------------------------------------ */
/* Clusters                                                             */
/* ------------------------------------------------------------------ */

lmc_redis_cluster *redis_test_cluster_start(size_t masters, size_t replicas, char *err, size_t len)
{
    register_atexit();
    size_t slot = 0;
    while (slot < MAX_CLUSTERS && g_clusters[slot] != NULL)
        slot++;
    if (slot == MAX_CLUSTERS) {
        snprintf(err, len, "more than %d test clusters at once", MAX_CLUSTERS);
        return NULL;
    }
    static const char *const extra[] = {"--cluster-node-timeout", "1000",
                                        "--cluster-require-full-coverage", "no", NULL};
    lmc_error e;
    lmc_redis_cluster *c = NULL;
    if (lmc_redis_cluster_start(masters, replicas, extra, &c, &e) != LMC_OK) {
        snprintf(err, len, "%s", e.msg);
        return NULL;
    }
    g_clusters[slot] = c;
    return c;
}

void redis_test_cluster_stop(lmc_redis_cluster *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < MAX_CLUSTERS; i++) {
        if (g_clusters[i] == c)
            g_clusters[i] = NULL;
    }
    lmc_redis_cluster_stop(c);
}

int redis_test_cluster_slot_owner(const lmc_redis_cluster *c, unsigned slot)
{
    for (size_t i = 0; i < lmc_redis_cluster_size(c); i++) {
        if (!lmc_redis_cluster_running(c, i))
            continue;
        redisReply *r = lmc_redis_command(lmc_redis_cluster_port(c, i), "CLUSTER SLOTS");
        if (r == NULL)
            continue;
        int port = -1;
        for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            const redisReply *range = r->element[k];
            if (range->elements >= 3 && (unsigned)range->element[0]->integer <= slot &&
                slot <= (unsigned)range->element[1]->integer)
                port = (int)range->element[2]->element[1]->integer;
        }
        freeReplyObject(r);
        for (size_t n = 0; n < lmc_redis_cluster_size(c); n++) {
            if (lmc_redis_cluster_port(c, n) == port)
                return (int)n;
        }
        return -1;
    }
    return -1;
}

bool redis_test_cluster_id(const lmc_redis_cluster *c, size_t i, char *buf)
{
    redisReply *r = lmc_redis_command(lmc_redis_cluster_port(c, i), "CLUSTER MYID");
    bool ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok)
        memcpy(buf, r->str, 41);
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

long long redis_test_cluster_dbsize(const lmc_redis_cluster *c, size_t i)
{
    redisReply *r = lmc_redis_command(lmc_redis_cluster_port(c, i), "DBSIZE");
    long long n = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
        freeReplyObject(r);
    return n;
}

long long redis_test_cluster_strlen(const lmc_redis_cluster *c, const char *key)
{
    int owner = redis_test_cluster_slot_owner(c, lmc_resp_key_slot(key, strlen(key)));
    return owner < 0 ? -1 : redis_test_strlen_at(lmc_redis_cluster_port(c, owner), key);
}
