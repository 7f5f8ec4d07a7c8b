/*
 * clock.h -- monotonic and wall clock helpers, the injectable clock, and the
 * virtual clock of a replay in virtual time.
 *
 * Owns nothing but the virtual clock's one counter. lmc_clock is how every
 * module that reads "now" for behaviour (TTL locks, eviction periods, L2
 * due times) is given its time: the real monotonic clock in a server or a
 * realtime replay, a fake one in a test, or a virtual clock that moves only
 * when its owner moves it (DESIGN.md 4.11).
 *
 * Threads: all functions are thread-safe; a virtual clock is an atomic
 * (set by its owner, read by anyone).
 */
#ifndef LMC_CORE_CLOCK_H
#define LMC_CORE_CLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds, milliseconds, and seconds. */
uint64_t lmc_mono_ns(void);
uint64_t lmc_mono_ms(void);
double lmc_mono_s(void);

/* CLOCK_REALTIME as Unix seconds (like Python's time.time()). */
double lmc_wall_s(void);

/*
 * The CPU's time-stamp counter, for stamping events on a hot path (a read
 * costs ~17 ns here against ~28 ns for clock_gettime). Only where
 * lmc_tsc_usable() says so: an invariant TSC (CPUID: constant rate, runs in
 * every C-state) that the kernel itself uses as its clocksource (so it has
 * checked that the CPUs' counters agree). Converting ticks to nanoseconds
 * needs a calibration against CLOCK_MONOTONIC (the event bus keeps one).
 * Not ordered against surrounding loads (no fence): a stamp, not a
 * stopwatch. lmc_tsc_read returns 0 where there is no TSC.
 */
bool lmc_tsc_usable(void);

static inline uint64_t lmc_tsc_read(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* Sleep for ns nanoseconds (restarts after signals). */
void lmc_sleep_ns(uint64_t ns);

/* Sleep until the monotonic clock reads deadline_ns (absolute). */
void lmc_sleep_until_ns(uint64_t deadline_ns);

/* An injectable nanosecond clock; it never runs backwards. */
typedef struct lmc_clock {
    uint64_t (*now_ns)(void *ud);
    void *ud;
} lmc_clock;

/* The real monotonic clock (lmc_mono_ns). */
lmc_clock lmc_clock_monotonic(void);

static inline uint64_t lmc_clock_now_ns(const lmc_clock *c)
{
    return c->now_ns(c->ud);
}

static inline uint64_t lmc_clock_now_ms(const lmc_clock *c)
{
    return c->now_ns(c->ud) / 1000000u;
}

/* A clock that reads what its owner last set: virtual time. */
typedef struct lmc_virtual_clock {
    _Atomic uint64_t now_ns;
} lmc_virtual_clock;

void lmc_virtual_clock_init(lmc_virtual_clock *v, uint64_t start_ns);
/* Move the clock to ns; a time before the current reading is ignored (time never goes back). */
void lmc_virtual_clock_set(lmc_virtual_clock *v, uint64_t ns);
uint64_t lmc_virtual_clock_get(const lmc_virtual_clock *v);
/* v as an lmc_clock (v is borrowed and must outlive every copy). */
lmc_clock lmc_clock_virtual(lmc_virtual_clock *v);

#endif
