/*
 * redis_local.h -- private redis-server processes on loopback, for the
 * programs that start their own: the micro-benchmarks (bench/bench_sm.c)
 * and the tests of the "resp" L2 adapter (tests/unit/helpers/
 * redis_test_util). One server, or a Redis Cluster of M masters with R
 * replicas each, built with `redis-cli --cluster create`.
 *
 * Who includes it: those programs only; the adapter itself never starts a
 * server.
 *
 * Owns: the child processes it starts (killed and reaped by the _stop
 * calls; they also die with the thread that started them, through
 * PR_SET_PDEATHSIG, so none outlives a crashed test) and a cluster's
 * temporary directory (node config files and logs), removed by
 * lmc_redis_cluster_stop. Ports come from core/net.h (a node takes two: its
 * client port and its cluster bus port) and are picked again when a start
 * loses a race for one.
 *
 * Threads: a server or cluster object belongs to the thread that started it.
 */
#ifndef LMC_L2_REDIS_LOCAL_H
#define LMC_L2_REDIS_LOCAL_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lmcache/status.h"

/* One redis-server child; pid <= 0 when not running. */
typedef struct lmc_redis_server {
    pid_t pid;
    int port;
} lmc_redis_server;

/*
 * Start `redis-server --port P --bind 127.0.0.1 --save '' --appendonly no`
 * plus extra (NULL-terminated, may be NULL) on port (0: a free one) and
 * wait up to 5 s until it answers PING. stdout and stderr go to log (NULL:
 * /dev/null). LMC_ERR_NOT_FOUND when redis-server is not in PATH, LMC_ERR_IO
 * when it does not come up.
 */
lmc_status lmc_redis_server_start(int port, const char *const *extra, const char *log,
                                  lmc_redis_server *out, lmc_error *err);
/* SIGKILL and reap (a stopped server is continued first); no-op when not running. */
void lmc_redis_server_stop(lmc_redis_server *s);

/* A connection to 127.0.0.1:port with 1 s timeouts, or NULL. */
redisContext *lmc_redis_connect(int port);
/* One command (printf-style, as redisCommand) on a fresh connection: the reply (caller frees
 * with freeReplyObject) or NULL when the server does not answer. */
redisReply *lmc_redis_command(int port, const char *fmt, ...);
/* True when cmd (words separated by spaces, e.g. "CLUSTER SETSLOT 7 STABLE") gets a status
 * reply (OK, PONG). */
bool lmc_redis_command_ok(int port, const char *cmd);

/*
 * Run argv (argv[0] looked up in PATH) as a child with stdout and stderr to
 * log (NULL: /dev/null), dying with this thread. Its pid, or -1.
 */
pid_t lmc_redis_spawn(const char *const *argv, const char *log);
/* Wait up to timeout_ms for pid: its exit status, or -1 (killed) when it ran too long or died of
 * a signal. */
int lmc_redis_wait(pid_t pid, int timeout_ms);

typedef struct lmc_redis_cluster lmc_redis_cluster;

/*
 * Start masters * (1 + replicas) nodes (cluster mode, node timeout 2 s,
 * replicas synced without delay, then extra, which may override these),
 * create the cluster with redis-cli (--cluster-replicas replicas) and wait
 * up to 20 s until every node reports cluster_state:ok, and as long again
 * until every replica's link to its master is up (one that never synced
 * would not take over). redis-cli picks the masters. LMC_ERR_NOT_FOUND
 * when redis-server or redis-cli is missing, LMC_ERR_IO otherwise; the
 * message names the log to read.
 */
lmc_status lmc_redis_cluster_start(size_t masters, size_t replicas, const char *const *extra,
                                   lmc_redis_cluster **out, lmc_error *err);
/* Kill every node, remove the directory, free. NULL is a no-op. */
void lmc_redis_cluster_stop(lmc_redis_cluster *c);

size_t lmc_redis_cluster_size(const lmc_redis_cluster *c);
int lmc_redis_cluster_port(const lmc_redis_cluster *c, size_t i);
bool lmc_redis_cluster_running(const lmc_redis_cluster *c, size_t i);
/* The directory holding nodes-<port>.conf and <port>.log. */
const char *lmc_redis_cluster_dir(const lmc_redis_cluster *c);
/* "127.0.0.1:<port>" of node i into buf. */
void lmc_redis_cluster_addr(const lmc_redis_cluster *c, size_t i, char *buf, size_t len);

/* SIGKILL node i (its config file stays). */
void lmc_redis_cluster_kill(lmc_redis_cluster *c, size_t i);
/* SIGSTOP / SIGCONT node i: it keeps its sockets but answers nothing. */
void lmc_redis_cluster_pause(lmc_redis_cluster *c, size_t i, bool paused);
/* Start node i again on its ports with its config file: it rejoins with the slots it had. */
lmc_status lmc_redis_cluster_restart(lmc_redis_cluster *c, size_t i, lmc_error *err);
/* Whether node i is a master now (ROLE); false when it does not answer. */
bool lmc_redis_cluster_is_master(const lmc_redis_cluster *c, size_t i);
/* Until every running node reports cluster_state:ok (true) or timeout_ms passes (false). */
bool lmc_redis_cluster_wait_ok(const lmc_redis_cluster *c, int timeout_ms);
/* FLUSHALL on every running master; false when one does not answer OK. */
bool lmc_redis_cluster_flushall(const lmc_redis_cluster *c);

#endif
