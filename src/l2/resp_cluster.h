/*
 * resp_cluster.h -- Redis Cluster routing for the "resp" L2 adapter
 * (resp.c): the slot map, the nodes and their health, MOVED and ASK
 * redirects, and the pipelined run of a batch of one-key commands over
 * one connection per node. hiredis 0.14 (Debian 12) has no cluster
 * support; this is it, to the Redis Cluster specification.
 *
 * Who includes it: resp.c and its tests only.
 *
 * Owns: the node table (every master address seen: seeds, CLUSTER SLOTS,
 * redirects; at most LMC_RESP_MAX_NODES, never shrinking, so a node index
 * stays valid), the slot map (slot -> node index), each node's health
 * (up, or down with a retry time and its last error), the bytes this
 * process wrote per slot, the counters, and a monitor thread
 * ("l2-resp-<n>-map") with its own connections that refreshes the map and
 * probes the nodes that are down. A connset (one connection per node)
 * belongs to one thread: each worker has one, so does the delete path.
 *
 * Health. A node is marked down when a connection to it cannot be opened
 * or breaks (I/O error or timeout); from then on its commands fail at once,
 * without I/O, so a task never waits for a node that is known to be dead,
 * and a map refresh is scheduled. Only the monitor brings a node back up,
 * after its own connect + PING succeeds (backoff 50 ms doubling to 5 s);
 * connections opened before the node went down are then dropped, not
 * reused. The cluster is "usable" while some slot is served by a node that
 * is up; on_usable says when that changes.
 *
 * The map comes from CLUSTER SLOTS (Redis 3.0 and later, Valkey, KeyDB;
 * CLUSTER SHARDS exists from 7.0 only), asked of one node that is up,
 * rotating: every 5 s while every slot is served by a node that is up,
 * every 250 ms otherwise (a failover shows up in the map once a replica
 * is promoted), and at once (at most every 50 ms) after a MOVED, a lost
 * node or CLUSTERDOWN.
 *
 * Threads: every function is thread-safe except that a connset is used by
 * one thread at a time. `lock` guards the node table's growth and the
 * nodes' mutable fields; the slot map, the per-slot bytes, node health and
 * the counters are atomics. No I/O happens under the lock, and no callback
 * is made under it.
 */
#ifndef LMC_L2_RESP_CLUSTER_H
#define LMC_L2_RESP_CLUSTER_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "lmcache/status.h"

#define LMC_RESP_SLOTS 16384u
/* A command is redirected (MOVED, ASK, TRYAGAIN) at most this often, then it fails. */
#define LMC_RESP_MAX_REDIRECTS 5
#define LMC_RESP_MAX_NODES 1024

typedef struct lmc_resp_cluster lmc_resp_cluster;
typedef struct lmc_resp_connset lmc_resp_connset;

/*
 * The hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag
 * (the bytes between the first '{' and the next '}', when not empty),
 * mod 16384.
 */
unsigned lmc_resp_key_slot(const char *key, size_t len);

/*
 * Parse "host:port" (the last ':' separates, so "::1:7000" is host "::1";
 * an empty host is allowed only when allow_empty_host, as in a redirect,
 * meaning "the node that answered"). False when the port is not in
 * [1, 65535] or the host does not fit in host_len bytes.
 */
bool lmc_resp_parse_addr(const char *s, size_t len, bool allow_empty_host, char *host,
                         size_t host_len, int *port);

/* What `INFO cluster` says on c: 1 cluster mode, 0 not, -1 no answer (c's error is set). */
int lmc_resp_cluster_enabled(redisContext *c);

typedef struct lmc_resp_cluster_config {
    const char *const *seeds; /* "host:port", borrowed for create only */
    size_t n_seeds;
    /*
     * Open one connection ready for commands (socket timeouts, AUTH, PING);
     * NULL with a message in err ("connect: Connection refused"). Called on
     * any thread, never under the cluster's lock.
     */
    redisContext *(*connect)(void *ud, const char *host, int port, char *err, size_t len);
    /* A failure for the adapter's last_error ("127.0.0.1:7000: SET: connection lost"). */
    void (*on_error)(void *ud, const char *msg);
    /* The cluster became usable or unusable (on the thread that noticed). May be NULL. */
    void (*on_usable)(void *ud, bool usable);
    void *ud;
    size_t window_cmds;    /* commands per pipeline window and node ... */
    uint64_t window_bytes; /* ... or this many value bytes, whichever comes first */
    unsigned instance;     /* names the monitor thread */
} lmc_resp_cluster_config;

/*
 * Add the seeds as nodes and fetch the map from the first that answers
 * (each bounded by the connect callback's timeouts). No seed answering is
 * not an error: the cluster is unusable and the monitor keeps trying once
 * started. LMC_ERR_NOMEM.
 */
lmc_status lmc_resp_cluster_create(const lmc_resp_cluster_config *cfg, lmc_resp_cluster **out,
                                   lmc_error *err);
/* Start the monitor thread (after whatever on_usable reaches exists). LMC_ERR_IO. */
lmc_status lmc_resp_cluster_start(lmc_resp_cluster *cl, lmc_error *err);
/* Stop and join the monitor (idempotent); runs still work, nothing comes back up. */
void lmc_resp_cluster_stop(lmc_resp_cluster *cl);
/* Stop, close the monitor's connections, free. Every connset must be destroyed first. */
void lmc_resp_cluster_destroy(lmc_resp_cluster *cl);

lmc_resp_connset *lmc_resp_connset_create(void);
void lmc_resp_connset_destroy(lmc_resp_cluster *cl, lmc_resp_connset *cs);

/* One command per index 0..n-1, each on one key. */
typedef struct lmc_resp_batch {
    size_t n;
    unsigned (*slot)(void *ud, size_t i); /* the slot of command i's key */
    /* Append command i to c; false when out of memory (nothing appended). */
    bool (*append)(void *ud, redisContext *c, size_t i);
    /* Command i's final reply (never a redirect; may be an error reply). */
    void (*reply)(void *ud, size_t i, redisReply *rep);
    uint64_t (*bytes)(void *ud, size_t i); /* command i's value bytes, for the windows */
    void *ud;
    const char *what; /* the command, for messages */
} lmc_resp_batch;

/*
 * Run b over cs: commands grouped by the node serving their slot, each
 * group pipelined on that node's connection in windows, every node's
 * window sent before any reply is read (so the nodes work in parallel);
 * MOVED (the slot is remapped, a refresh scheduled) and ASK (ASKING, then
 * the command, on the target) are followed up to LMC_RESP_MAX_REDIRECTS
 * times per command. Returns how many commands got no reply: no node for
 * the slot, the node down or lost, too many redirects, out of memory.
 * b->reply was called exactly once for each of the others.
 */
size_t lmc_resp_cluster_run(lmc_resp_cluster *cl, lmc_resp_connset *cs, const lmc_resp_batch *b);

/*
 * A worker's link check: PING cs's connections idle for idle_ns or more
 * (a broken one marks its node down). Whether the cluster is usable.
 */
bool lmc_resp_cluster_check(lmc_resp_cluster *cl, lmc_resp_connset *cs, uint64_t idle_ns);

/* Some slot is served by a node that is up. */
bool lmc_resp_cluster_usable(const lmc_resp_cluster *cl);
/* Every slot is served by a node that is up. */
bool lmc_resp_cluster_healthy(const lmc_resp_cluster *cl);

/* Bytes this process wrote (delta > 0) or deleted (< 0) under slot, for the per-node usage. */
void lmc_resp_cluster_count_bytes(lmc_resp_cluster *cl, unsigned slot, int64_t delta);

typedef struct lmc_resp_cluster_stats {
    uint64_t open_connections; /* every connset's and the monitor's */
    uint64_t connects;         /* connections opened so far */
} lmc_resp_cluster_stats;

lmc_resp_cluster_stats lmc_resp_cluster_get_stats(const lmc_resp_cluster *cl);

/*
 * Add the cluster's status fields: "slots_served", "map_refreshes",
 * "map_refresh_failures", "redirects_moved", "redirects_ask",
 * "failed_commands", "nodes" (one object per node: "address", "id",
 * "slots", "healthy", "last_error", "bytes_used") and "unhealthy_nodes"
 * ({"address", "last_error"} per node that is down).
 */
void lmc_resp_cluster_report_status(lmc_resp_cluster *cl, lmc_json *status);

#endif
