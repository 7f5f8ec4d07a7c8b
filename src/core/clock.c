/*
 * clock.c -- monotonic, wall and virtual clocks (see clock.h).
 */
#include "core/clock.h"

#include <errno.h>
#include <time.h>

static uint64_t ts_to_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

uint64_t lmc_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts_to_ns(&ts);
}

uint64_t lmc_mono_ms(void)
{
    return lmc_mono_ns() / 1000000ull;
}

double lmc_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double lmc_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void lmc_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void lmc_sleep_until_ns(uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                          .tv_nsec = (long)(deadline_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static uint64_t mono_now_ns(void *ud)
{
    (void)ud;
    return lmc_mono_ns();
}

lmc_clock lmc_clock_monotonic(void)
{
    lmc_clock c = {.now_ns = mono_now_ns, .ud = NULL};
    return c;
}

void lmc_virtual_clock_init(lmc_virtual_clock *v, uint64_t start_ns)
{
    atomic_init(&v->now_ns, start_ns);
}

void lmc_virtual_clock_set(lmc_virtual_clock *v, uint64_t ns)
{
    /* One owner moves the clock, so a plain compare is enough; readers see a whole value. */
    if (ns > atomic_load_explicit(&v->now_ns, memory_order_relaxed))
        atomic_store_explicit(&v->now_ns, ns, memory_order_release);
}

uint64_t lmc_virtual_clock_get(const lmc_virtual_clock *v)
{
    return atomic_load_explicit(&((lmc_virtual_clock *)v)->now_ns, memory_order_acquire);
}

static uint64_t virtual_now_ns(void *ud)
{
    return lmc_virtual_clock_get(ud);
}

lmc_clock lmc_clock_virtual(lmc_virtual_clock *v)
{
    lmc_clock c = {.now_ns = virtual_now_ns, .ud = v};
    return c;
}
