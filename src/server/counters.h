/*
 * counters.h -- the server's call counters: how many StorageManager calls
 * of each traced operation its requests made, and how many requests and
 * errors it answered (the shutdown summary and --counters-output).
 *
 * Owns: the counts and the mutex that guards them. Threads: any; adds and
 * snapshots take the mutex (a few times per request, never contended long).
 */
#ifndef LMC_SERVER_COUNTERS_H
#define LMC_SERVER_COUNTERS_H

#include <pthread.h>
#include <stdint.h>

/* A snapshot: StorageManager calls made so far, per traced operation. */
typedef struct lmc_server_counters {
    uint64_t reserve_write, finish_write, submit_prefetch_task, finish_read_prefetched;
    uint64_t read_enter, read_exit;
    uint64_t requests, errors;
} lmc_server_counters;

typedef struct lmc_counters {
    pthread_mutex_t mu;
    lmc_server_counters c;
} lmc_counters;

void lmc_counters_init(lmc_counters *k);
void lmc_counters_destroy(lmc_counters *k);
/* Add n to one count: LMC_COUNT(k, read_enter, 1). */
void lmc_counters_add(lmc_counters *k, uint64_t *field, uint64_t n);
#define LMC_COUNT(k, name, n) lmc_counters_add((k), &(k)->c.name, (n))
lmc_server_counters lmc_counters_get(lmc_counters *k);

#endif
