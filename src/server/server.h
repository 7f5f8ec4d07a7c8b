/*
 * server.h -- `lmcache server`: one StorageManager behind a ZMQ ROUTER.
 *
 * Owns: the ROUTER socket and its loop (the calling thread of
 * lmc_server_run), the worker threads that execute requests, the registered
 * KV regions (client shared memory), the layouts per (model, world size),
 * the sessions keyed by request id, the StorageManager, and -- when tracing
 * is on -- the event bus and the trace recorder.
 *
 * Threads: the loop thread receives requests and sends replies (ZMQ sockets
 * stay on one thread); workers pull requests from a queue (one mutex) and
 * push replies back through an inproc socket each. Sessions and regions
 * each have one mutex. lmc_server_stop may be called from a signal handler.
 *
 * Shutdown (lmc_server_stop, SIGINT, SIGTERM): stop reading requests, let
 * the workers finish what is queued and in flight, send those replies,
 * stop the event bus (final drain, then the recorder closes the file),
 * close the StorageManager.
 */
#ifndef LMC_SERVER_SERVER_H
#define LMC_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lmcache/status.h"
#include "storage/config.h"

typedef struct lmc_server lmc_server;

typedef struct lmc_server_config {
    const char *host;   /* default 127.0.0.1 */
    int port;           /* default 5555 */
    int chunk_size;     /* tokens per chunk, default 256 */
    int max_workers;    /* default 1 */
    const char *trace_level;  /* NULL or "storage" */
    const char *trace_output; /* NULL: the default path */
    size_t event_bus_queue_size; /* default 10000 */
    const char *counters_output; /* NULL, or a file for the call counters (JSON) */
    lmc_sm_config sm;
} lmc_server_config;

/* Defaults for everything but sm (which the caller fills with lmc_sm_config_*). */
void lmc_server_config_init(lmc_server_config *cfg);

/*
 * Parse `lmcache server` flags (server, trace and StorageManager flags) from
 * argv[1..]. Usage errors: LMC_ERR_INVALID with a message naming the flag.
 */
lmc_status lmc_server_config_parse(lmc_server_config *cfg, int argc, char **argv, lmc_error *err);
void lmc_server_config_free(lmc_server_config *cfg);
void lmc_server_print_help(FILE *out);

lmc_status lmc_server_create(const lmc_server_config *cfg, lmc_server **out, lmc_error *err);
/* Serve until stopped; then run the shutdown chain. */
lmc_status lmc_server_run(lmc_server *s);
/* Ask the loop to stop (async-signal-safe). */
void lmc_server_stop(lmc_server *s);
void lmc_server_destroy(lmc_server *s);

/* StorageManager calls made so far, per traced operation. */
typedef struct lmc_server_counters {
    uint64_t reserve_write, finish_write, submit_prefetch_task, finish_read_prefetched;
    uint64_t read_enter, read_exit;
    uint64_t requests, errors;
} lmc_server_counters;

lmc_server_counters lmc_server_get_counters(lmc_server *s);

#endif
