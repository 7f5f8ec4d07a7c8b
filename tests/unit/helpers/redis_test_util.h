/*
 * redis_test_util.h -- private Redis servers for the tests of the "resp"
 * L2 adapter: one redis-server, or a Redis Cluster, started through
 * l2/redis_local.h.
 *
 * The single server is one per test process, a child started with
 *   redis-server --port P --bind 127.0.0.1 --save '' --appendonly no --daemonize no
 * on a free loopback port. It is killed and reaped by redis_test_stop, by
 * an atexit handler, and (PR_SET_PDEATHSIG) by the kernel if the test
 * process dies, so no server outlives its test. The same holds for every
 * cluster node, and an atexit handler also removes the clusters' temporary
 * directories.
 */
#ifndef LMC_TEST_REDIS_TEST_UTIL_H
#define LMC_TEST_REDIS_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "l2/redis_local.h"

/*
 * Start the server on port (0: pick a free one) and wait up to 5 s until it
 * answers PING. False with a message in err (e.g. redis-server missing).
 */
bool redis_test_start(int port, char *err, size_t len);
/* SIGKILL the server and reap it (no-op when none runs). */
void redis_test_stop(void);
/* The port of the running (or last) server. */
int redis_test_port(void);
/* SIGSTOP / SIGCONT the server: it keeps its sockets but answers nothing. */
void redis_test_pause(bool paused);
/* FLUSHALL through a fresh connection; false when the server does not answer. */
bool redis_test_flushall(void);
/* The length of key's value (-1 when absent or the server does not answer). */
long long redis_test_strlen(const char *key);
/* The same on the server at 127.0.0.1:port (a cluster node: only the keys it holds). */
long long redis_test_strlen_at(int port, const char *key);

/*
 * A cluster of masters * (1 + replicas) nodes for the test (node timeout
 * 1 s, and cluster-require-full-coverage no, so the masters that are up keep
 * serving their slots while one is down), registered for removal at exit.
 * NULL with a message in err.
 */
lmc_redis_cluster *redis_test_cluster_start(size_t masters, size_t replicas, char *err, size_t len);
/* Stop it now (also unregisters it). NULL is a no-op. */
void redis_test_cluster_stop(lmc_redis_cluster *c);
/* The index of the node that serves slot now, by CLUSTER SLOTS asked of a running node; -1. */
int redis_test_cluster_slot_owner(const lmc_redis_cluster *c, unsigned slot);
/* Node i's CLUSTER MYID into buf (41 bytes); false when it does not answer. */
bool redis_test_cluster_id(const lmc_redis_cluster *c, size_t i, char *buf);
/* The number of keys node i holds (DBSIZE), -1 when it does not answer. */
long long redis_test_cluster_dbsize(const lmc_redis_cluster *c, size_t i);
/* key's value length on the node serving its slot (-1 when absent there or unanswered). */
long long redis_test_cluster_strlen(const lmc_redis_cluster *c, const char *key);

#endif
