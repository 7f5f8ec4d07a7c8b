/*
 * server.h -- `lmcache server`: one StorageManager behind a ZMQ ROUTER.
 *
 * Owns: the server as a whole (server.c: the ROUTER socket and its loop --
 * the calling thread of lmc_server_run --, the worker threads, shutdown)
 * and, through its parts, the StorageManager, the request logic and its
 * sessions (engine.h, sessions.h), the registered KV regions and layouts
 * (regions.h), and -- when tracing is on -- the event bus and the trace
 * recorder. Its configuration and flags are config.h's; the operations
 * and their handlers are ops.def's and ops.h's.
 *
 * Threads: the loop thread receives requests and sends replies (ZMQ sockets
 * stay on one thread) and answers the quick operations itself; workers pull
 * the others from a queue (one mutex) and push replies back through an
 * inproc socket each. lmc_server_stop may be called from a signal handler.
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
#include "server/config.h"
#include "server/counters.h"

typedef struct lmc_server lmc_server;

lmc_status lmc_server_create(const lmc_server_config *cfg, lmc_server **out, lmc_error *err);
/* Serve until stopped; then run the shutdown chain. LMC_ERR_IO when --counters-output
 * (opened at create) could not be written at the end (logged). */
lmc_status lmc_server_run(lmc_server *s);
/* Ask the loop to stop (async-signal-safe). */
void lmc_server_stop(lmc_server *s);
void lmc_server_destroy(lmc_server *s);

/* StorageManager calls made so far, per traced operation (counters.h). */
lmc_server_counters lmc_server_get_counters(lmc_server *s);

#endif
