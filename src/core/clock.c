/*
 * clock.c -- monotonic, wall and virtual clocks (see clock.h).
 */
#include "core/clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

bool lmc_tsc_usable(void)
{
#if defined(__x86_64__) || defined(__i386__)
    /* CPUID 0x80000007, EDX bit 8: the invariant TSC (/proc/cpuinfo's
     * constant_tsc and nonstop_tsc). */
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return false;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d) || !(d & (1u << 8)))
        return false;
    /* The kernel trusts it across CPUs only if it keeps time with it. */
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    if (f == NULL)
        return false;
    char name[32] = "";
    bool tsc = fgets(name, sizeof(name), f) != NULL && strcmp(name, "tsc\n") == 0;
    fclose(f);
    return tsc;
#else
    return false;
#endif
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
