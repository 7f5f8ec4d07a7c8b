/*
 * runtime.h -- the clock and executor seams of a time-dependent component
 * (DESIGN.md 4.11: virtual time is a clock and an executor, not a simulator).
 *
 * Every component that reads time for behaviour or does background work
 * (the L1 manager's TTL locks, the eviction and store/prefetch controllers,
 * the L2 adapters and their workers) is given an lmc_runtime by its owner:
 *   - clock: where "now" comes from. Threaded components wait on
 *     CLOCK_MONOTONIC, so with threads the clock is the monotonic one.
 *   - manual: false (the default): the component starts its threads, which
 *     wait on their fds or periods and then run the component's step; true:
 *     no thread is started and the owner runs the steps (the StorageManager's
 *     lmc_sm_advance_to), in virtual time.
 * The work itself is one step function per component, called by its thread
 * or by the owner, so the two modes run the same code.
 *
 * Owns nothing. Threads: a value type; copy it freely.
 */
#ifndef LMC_CORE_RUNTIME_H
#define LMC_CORE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include "core/clock.h"

typedef struct lmc_runtime {
    lmc_clock clock; /* now_ns NULL: the monotonic clock */
    bool manual;     /* no threads: the owner steps the component */
} lmc_runtime;

/* rt with its defaults filled in (NULL: threads on the monotonic clock). */
static inline lmc_runtime lmc_runtime_resolve(const lmc_runtime *rt)
{
    lmc_runtime r = {.clock = {NULL, NULL}, .manual = false};
    if (rt != NULL)
        r = *rt;
    if (r.clock.now_ns == NULL)
        r.clock = lmc_clock_monotonic();
    return r;
}

static inline uint64_t lmc_runtime_now_ns(const lmc_runtime *rt)
{
    return lmc_clock_now_ns(&rt->clock);
}

#endif
