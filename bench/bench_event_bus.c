/*
 * bench_event_bus.c -- the caller's cost of publishing one event.
 *
 * lmc_bench_event_bus_publish_ns(payload_bytes, iters) measures
 * reserve + write + commit of one payload on the calling thread, with a
 * running drain thread and a no-op subscriber, as the trace capture path
 * uses the bus (DESIGN.md section 5: <= 150 ns p50 for a 16-key call,
 * about 2.3 KB). The bus has the default configuration (10000 events, a
 * 32 MiB ring), so the publisher laps a ring larger than the caches, as it
 * does in a server.
 *
 * Each call is timed with clock_gettime and the median is returned, minus
 * the median cost of reading the clock. Between calls the caller waits
 * GAP_NS (untimed), standing in for the rest of the traced call; without
 * it the publisher would outrun the drain thread and time drops instead
 * of publishes. Dropped calls are not counted; if more than half of the
 * calls drop, the result is negative. Returns -1 on a setup failure.
 *
 * Threads: the caller and the bus's drain thread.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "core/clock.h"
#include "obs/event_bus.h"

#define GAP_NS 1000u
#define WARMUP_MIN 1000u

double lmc_bench_event_bus_publish_ns(size_t payload_bytes, size_t iters);

static void noop_cb(const lmc_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
}

/* The median cost of one clock read, measured like the calls are. */
static double timer_overhead_ns(double *scratch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = lmc_mono_ns();
        uint64_t t1 = lmc_mono_ns();
        scratch[i] = (double)(t1 - t0);
    }
    return lmc_bench_median(scratch, n);
}

static void wait_until_ns(uint64_t t)
{
    while (lmc_mono_ns() < t) {
    }
}

double lmc_bench_event_bus_publish_ns(size_t payload_bytes, size_t iters)
{
    if (iters == 0)
        return -1;
    lmc_event_bus *bus = NULL;
    lmc_error err;
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = 0, .ring_bytes = 0};
    if (lmc_event_bus_create(&cfg, &bus, &err) != LMC_OK) {
        fprintf(stderr, "bench event bus: %s\n", err.msg);
        return -1;
    }
    unsigned char *payload = malloc(payload_bytes ? payload_bytes : 1);
    double *ns = malloc(iters * sizeof(*ns));
    double result = -1;
    if (payload == NULL || ns == NULL)
        goto out;
    for (size_t i = 0; i < payload_bytes; i++)
        payload[i] = (unsigned char)(i * 131u + 7u);
    if (lmc_event_bus_subscribe(bus, LMC_EVENT_TRACE_CALL, noop_cb, NULL) != LMC_OK ||
        lmc_event_bus_start(bus) != LMC_OK)
        goto out;

    /* Warm up: page in the code paths and the first part of the ring. */
    size_t warmup = iters / 10 > WARMUP_MIN ? iters / 10 : WARMUP_MIN;
    for (size_t i = 0; i < warmup; i++) {
        lmc_event_reservation r;
        if (lmc_event_bus_reserve(bus, LMC_EVENT_TRACE_CALL, payload_bytes, &r)) {
            lmc_event_bus_write(&r, payload, payload_bytes);
            lmc_event_bus_commit(&r);
        }
        wait_until_ns(lmc_mono_ns() + GAP_NS);
    }

    size_t n = 0;
    for (size_t i = 0; i < iters; i++) {
        lmc_event_reservation r;
        uint64_t t0 = lmc_mono_ns();
        bool ok = lmc_event_bus_reserve(bus, LMC_EVENT_TRACE_CALL, payload_bytes, &r);
        if (ok) {
            lmc_event_bus_write(&r, payload, payload_bytes);
            lmc_event_bus_commit(&r);
        }
        uint64_t t1 = lmc_mono_ns();
        if (ok)
            ns[n++] = (double)(t1 - t0);
        wait_until_ns(t1 + GAP_NS);
    }
    if (n * 2 < iters) {
        fprintf(stderr, "bench event bus: %zu of %zu publishes dropped\n", iters - n, iters);
        result = -(double)(iters - n);
        goto out;
    }
    double med = lmc_bench_median(ns, n);
    double overhead = timer_overhead_ns(ns, iters < 100000 ? iters : 100000);
    result = med > overhead ? med - overhead : 0;
out:
    lmc_event_bus_destroy(bus);
    free(ns);
    free(payload);
    return result;
}
