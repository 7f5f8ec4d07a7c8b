/*
 * config.h -- the configuration of `lmcache server` and its flags.
 *
 * Owns: lmc_server_config (its strings borrow argv) and the parsing and
 * help of the server's own flags; the StorageManager flags are
 * lmcache/config.h's, parsed in the same pass. Threads: none.
 */
#ifndef LMC_SERVER_CONFIG_H
#define LMC_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "lmcache/config.h"
#include "lmcache/status.h"
#include "server/limits.h"

typedef struct lmc_server_config {
    const char *host;            /* default 127.0.0.1 */
    int port;                    /* default 5555 */
    int chunk_size;              /* tokens per chunk, default 256 */
    int max_workers;             /* default 1 */
    int copy_threads;            /* --copy-threads; 0: lmc_server_copy_threads decides */
    const char *trace_level;     /* NULL or "storage" */
    const char *trace_output;    /* NULL: the default path */
    size_t event_bus_queue_size; /* default 10000 */
    const char *counters_output; /* NULL, or a file for the call counters (JSON) */
    lmc_server_limits limits;    /* limits.h, each its own flag */
    bool allow_l1_over_ram;      /* --allow-l1-over-ram: an L1 pool larger than physical memory */
    bool no_l1_prefault;         /* --no-l1-prefault: leave the pool's page faults to the stores */
    lmc_sm_config sm;
} lmc_server_config;

/* --copy-threads: its highest value, and the most its default picks. */
#define LMC_SERVER_MAX_COPY_THREADS 64
#define LMC_SERVER_DEFAULT_COPY_THREADS 4

/* Defaults for everything but sm (which the caller fills with lmc_sm_config_*). */
void lmc_server_config_init(lmc_server_config *cfg);

/*
 * Parse `lmcache server` flags (server, trace and StorageManager flags) from
 * argv[1..]. Usage errors: LMC_ERR_INVALID with a message naming the flag;
 * an --l1-size-gb above the machine's physical memory is one, unless
 * --allow-l1-over-ram.
 */
lmc_status lmc_server_config_parse(lmc_server_config *cfg, int argc, char **argv, lmc_error *err);
void lmc_server_config_free(lmc_server_config *cfg);
void lmc_server_print_help(FILE *out);
/*
 * The threads that copy one store's or retrieve's chunks, its worker
 * included: --copy-threads, or by default the CPUs this process may run
 * on, at most LMC_SERVER_DEFAULT_COPY_THREADS (a copy on more cores than
 * that is bound by memory, not by the cores).
 */
int lmc_server_copy_threads(const lmc_server_config *cfg);
/* Whether an L1 pool of l1_bytes fits in this machine's physical memory (true if unknown). */
bool lmc_server_l1_fits_in_ram(uint64_t l1_bytes);

#endif
