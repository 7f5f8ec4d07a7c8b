/*
 * clock.h -- monotonic and wall clock helpers, and the injectable clock.
 *
 * Owns nothing. lmc_clock is how a module that needs "now" (the L1 manager's
 * TTL locks) lets a test substitute a fake clock.
 *
 * Threads: all functions are thread-safe.
 */
#ifndef LMC_CORE_CLOCK_H
#define LMC_CORE_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds, milliseconds, and seconds. */
uint64_t lmc_mono_ns(void);
uint64_t lmc_mono_ms(void);
double lmc_mono_s(void);

/* CLOCK_REALTIME as Unix seconds (like Python's time.time()). */
double lmc_wall_s(void);

/* Sleep for ns nanoseconds (restarts after signals). */
void lmc_sleep_ns(uint64_t ns);

/* Sleep until the monotonic clock reads deadline_ns (absolute). */
void lmc_sleep_until_ns(uint64_t deadline_ns);

/* An injectable millisecond clock. */
typedef struct lmc_clock {
    uint64_t (*now_ms)(void *ud);
    void *ud;
} lmc_clock;

/* The real monotonic clock. */
lmc_clock lmc_clock_monotonic(void);

static inline uint64_t lmc_clock_now_ms(const lmc_clock *c)
{
    return c->now_ms(c->ud);
}

#endif
