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

/*
 * The counts, one row each: X(field, name in the log line, name in the
 * --counters-output JSON). The StorageManager calls first (per traced
 * operation), then the requests answered.
 */
#define LMC_SERVER_SM_CALLS(X)                                                                     \
    X(reserve_write, "reserve_write", "reserve_write")                                             \
    X(finish_write, "finish_write", "finish_write")                                                \
    X(submit_prefetch_task, "submit_prefetch_task", "submit_prefetch_task")                        \
    X(finish_read_prefetched, "finish_read_prefetched", "finish_read_prefetched")                  \
    X(read_enter, "read_enter", "read_prefetched_results.__enter__")                               \
    X(read_exit, "read_exit", "read_prefetched_results.__exit__")
#define LMC_SERVER_REQUEST_COUNTS(X)                                                               \
    X(requests, "requests", "requests")                                                            \
    X(errors, "errors", "errors")

/* A snapshot of the counts. */
typedef struct lmc_server_counters {
#define LMC_COUNTER_FIELD(field, log_name, json_name) uint64_t field;
    LMC_SERVER_SM_CALLS(LMC_COUNTER_FIELD)
    LMC_SERVER_REQUEST_COUNTS(LMC_COUNTER_FIELD)
#undef LMC_COUNTER_FIELD
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

/*
 * The snapshot as the shutdown log line ("StorageManager calls: a=1 ...;
 * requests=2 errors=0") and as the members of the --counters-output JSON
 * object ("\"a\": 1, ..."), each into a malloc'd string (NULL on OOM).
 */
char *lmc_counters_log_line(const lmc_server_counters *c);
char *lmc_counters_json_members(const lmc_server_counters *c);

#endif
