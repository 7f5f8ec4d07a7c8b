/*
 * lttng_tp.c -- the LTTng-UST provider lmcache_bench and the functions the
 * trace benchmark calls through dlsym (see lttng_tp.h).
 *
 * Built only into liblmcache_bench_lttng.so (with LMC_LTTNG_PROVIDER). The
 * lmcache executable also compiles every .c file in bench/; there this file
 * is empty, so a build without liblttng-ust-dev still works.
 *
 * Threads: any; nothing here keeps state.
 */
#ifdef LMC_LTTNG_PROVIDER

#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((visibility("default"))) void lmc_bench_lttng_emit(void *arg)
{
    const lmc_bench_lttng_call *c = arg;
    tracepoint(lmcache_bench, call, c->op, c->mode, c->dtype, c->dims, c->ndim,
               (const uint8_t *)c->keys, c->keys_len);
}

__attribute__((visibility("default"))) uint64_t lmc_bench_lttng_loop(uint64_t n, int fire,
                                                                     const lmc_bench_lttng_call *c)
{
    uint64_t t0 = mono_ns();
    if (fire) {
        for (uint64_t i = 0; i < n; i++) {
            tracepoint(lmcache_bench, call, c->op, c->mode, c->dtype, c->dims, c->ndim,
                       (const uint8_t *)c->keys, c->keys_len);
            __asm__ __volatile__("" ::: "memory");
        }
    } else {
        for (uint64_t i = 0; i < n; i++)
            __asm__ __volatile__("" ::: "memory");
    }
    return mono_ns() - t0;
}

__attribute__((visibility("default"))) int lmc_bench_lttng_enabled(void)
{
    return tracepoint_enabled(lmcache_bench, call) ? 1 : 0;
}

#else

/* Not the provider build: nothing to compile (ISO C wants one declaration). */
typedef int lmc_bench_lttng_tp_unused;

#endif
