/*
 * lttng_tp.h -- the LTTng-UST tracepoint that `bench micro trace` measures
 * our capture against, and the small C API of the shared object holding it.
 *
 * Owns: provider lmcache_bench, event `call` (the integer arguments of a
 * traced call, the layout's dims, and the call's keys as one byte
 * sequence), defined and probed in liblmcache_bench_lttng.so, which the
 * trace group dlopen()s only while it measures. Keeping LTTng in its own
 * shared object means the lmcache binary neither links liblttng-ust nor
 * starts its listener threads in every process (server, trace tools);
 * loading it after the bench's session daemon is up also makes the
 * registration wait in liblttng-ust's constructor cover enabling the event.
 *
 * Two parts: the API below (plain C, included by bench_trace.c, no LTTng
 * headers) and, only when LMC_LTTNG_PROVIDER is defined (the shared
 * object's build), the provider definition, which LTTng re-includes
 * several times through TRACEPOINT_INCLUDE.
 *
 * Threads: emit from any thread.
 */
#ifndef LMC_BENCH_LTTNG_TP_API_H
#define LMC_BENCH_LTTNG_TP_API_H

#include <stdint.h>

/* The file name of the shared object, looked up next to the executable. */
#define LMC_BENCH_LTTNG_SO "liblmcache_bench_lttng.so"

/* One call's arguments (borrowed for the emit call). */
typedef struct lmc_bench_lttng_call {
    int32_t op;
    int32_t mode;
    int32_t dtype;
    uint32_t ndim;
    const int64_t *dims;
    const void *keys;  /* the keys' bytes, as the in-process capture copies them */
    uint32_t keys_len; /* bytes */
} lmc_bench_lttng_call;

/* Exported by the shared object (look up with dlsym by these names). */
#define LMC_BENCH_LTTNG_EMIT "lmc_bench_lttng_emit"
#define LMC_BENCH_LTTNG_LOOP "lmc_bench_lttng_loop"
#define LMC_BENCH_LTTNG_ENABLED "lmc_bench_lttng_enabled"

/* Fire lmcache_bench:call once; call is a const lmc_bench_lttng_call *. */
typedef void (*lmc_bench_lttng_emit_fn)(void *call);
/* n iterations of a loop whose body fires the tracepoint (fire != 0) or
 * not; returns the elapsed CLOCK_MONOTONIC nanoseconds. */
typedef uint64_t (*lmc_bench_lttng_loop_fn)(uint64_t n, int fire, const lmc_bench_lttng_call *c);
/* Whether a session has the event enabled right now. */
typedef int (*lmc_bench_lttng_enabled_fn)(void);

#endif

#ifdef LMC_LTTNG_PROVIDER

#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER lmcache_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(LMC_BENCH_LTTNG_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define LMC_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

/* clang-format off */
TRACEPOINT_EVENT(
    lmcache_bench, call,
    TP_ARGS(int, op, int, mode, int, dtype,
            const int64_t *, dims, unsigned int, ndim,
            const uint8_t *, keys, unsigned int, keys_len),
    TP_FIELDS(
        ctf_integer(int, op, op)
        ctf_integer(int, mode, mode)
        ctf_integer(int, dtype, dtype)
        ctf_sequence(int64_t, dims, dims, unsigned int, ndim)
        ctf_sequence(uint8_t, keys, keys, unsigned int, keys_len)
    )
)
/* clang-format on */

#endif

#include <lttng/tracepoint-event.h>

#endif
