/*
 * event_bus.h -- a bounded, never-blocking event queue with a drain thread.
 *
 * Owns: one ring of fixed 64-byte slots holding variable-size events, the
 * subscriber table, and the drain thread ("EventBus"). It is the C form of
 * LMCache's EventBus (spec/trace-format.md section 4): publishers copy an
 * event in and return; the drain thread hands each event, in publication
 * order, to every callback subscribed to its type, in registration order.
 *
 * Publishing is lock-free: a publisher claims the slots for its event with
 * one compare-and-swap on the ring head, writes its bytes, then marks the
 * event committed. The drain thread consumes committed events in order (it
 * waits briefly for a claimed-but-uncommitted event: claim order is
 * publication order). A full ring (by event count or by bytes) drops the
 * event, counts it, and logs a warning at most once per second; publish
 * never blocks and never fails the caller.
 *
 * Under steady load the drain thread takes events in batches: it naps for
 * up to 1 ms between them, and publishers leave it be unless the ring is
 * half full, so they make no syscalls. After a longer idle spell it sleeps
 * and the next event wakes it at once. Events go round the whole ring in
 * order; a publisher asks in advance for the lines of the next event (a
 * write prefetch), which the drain thread has read since their last use,
 * on the CPUs where that was measured to pay (see the config's prefetch).
 * The whole ring is mapped and faulted in at create.
 *
 * Threads: publish/reserve/commit from any thread. subscribe and
 * register_subscriber from any thread, at any time (also while running: a
 * subscription applies to the events drained after it). start/stop/destroy
 * from the owner, never from a callback. Callbacks run on the drain thread
 * (or, in stop's final drain, on the thread calling stop); a callback's
 * failure is its own business (callbacks return nothing).
 *
 * Lifetime: stop() = stop the thread, drain what is left (even if the bus
 * was never started), then call every registered subscriber's shutdown in
 * registration order. Events published after stop are dropped and counted.
 * stop is idempotent; destroy calls stop if needed. A bus is started at most
 * once: start after stop returns LMC_ERR_CLOSED.
 *
 * A disabled bus does nothing, like LMCache's: publish and reserve return
 * false and count nothing, start starts no thread, and no ring is allocated.
 */
#ifndef LMC_OBS_EVENT_BUS_H
#define LMC_OBS_EVENT_BUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

typedef struct lmc_event_bus lmc_event_bus;

/* Event types. TRACE_CALL is LMCache's "trace.call". */
enum {
    LMC_EVENT_TRACE_CALL = 1,
    LMC_EVENT_TYPE_MAX = 64, /* types are < this */
};

/* The write prefetch of a commit (event_bus.c, prefetch_next). */
typedef enum lmc_event_bus_prefetch {
    LMC_EVENT_BUS_PREFETCH_AUTO = 0, /* by CPU: on, except on Intel x86-64 (measured) */
    LMC_EVENT_BUS_PREFETCH_ON,
    LMC_EVENT_BUS_PREFETCH_OFF,
} lmc_event_bus_prefetch;

typedef struct lmc_event_bus_config {
    bool enabled;          /* a disabled bus drops everything, starts no thread */
    size_t max_queue_size; /* events queued at most; 0: 10000; at most 2^30 */
    size_t ring_bytes;     /* 0: the next power of two >= max_queue_size * 2560, at least
                              64 KiB; else rounded up to a power of two (at least 128,
                              at most 4 GiB). An event takes 16 + len bytes, rounded
                              up to 64. */
    bool no_tsc;           /* reserve_now reads CLOCK_MONOTONIC even where the TSC would
                              do (tests and benchmarks of the fallback) */
    /* The write prefetch: 0 (AUTO) for a server; ON or OFF for benchmarks. */
    lmc_event_bus_prefetch prefetch;
} lmc_event_bus_config;

#define LMC_EVENT_BUS_DEFAULT_QUEUE 10000

/*
 * An event as the drain thread hands it to callbacks (valid for the call
 * only). payload is 16-byte aligned. Types >= LMC_EVENT_TYPE_MAX are
 * queued but reach no callback.
 */
typedef struct lmc_event {
    uint32_t type;
    double timestamp; /* wall-clock seconds at publish (derived: see reserve_mono) */
    uint64_t mono_ns; /* CLOCK_MONOTONIC ns at publish: the stamp of reserve_now, else
                         derived from timestamp (wall = W0 + (mono - M0), as reserve_mono) */
    const void *payload;
    size_t len;
} lmc_event;

typedef void (*lmc_event_cb)(const lmc_event *ev, void *ud);

/* A subscriber: several (type, callback) pairs sharing one ud, plus shutdown. */
typedef struct lmc_event_subscription {
    uint32_t type;
    lmc_event_cb cb;
} lmc_event_subscription;

typedef struct lmc_event_subscriber {
    const lmc_event_subscription *subs; /* borrowed for the call */
    size_t n_subs;
    void (*shutdown)(void *ud); /* may be NULL; called once by stop */
    void *ud;
} lmc_event_subscriber;

/* cfg NULL: enabled, 10000 events. LMC_ERR_INVALID for out-of-range sizes. */
lmc_status lmc_event_bus_create(const lmc_event_bus_config *cfg, lmc_event_bus **out,
                                lmc_error *err);
void lmc_event_bus_destroy(lmc_event_bus *bus);

/*
 * Callbacks for one type run in registration order. LMC_ERR_INVALID for a
 * NULL callback or a type >= LMC_EVENT_TYPE_MAX; LMC_ERR_BUSY beyond 16
 * callbacks per type or 16 subscribers. register_subscriber is all or
 * nothing.
 */
lmc_status lmc_event_bus_subscribe(lmc_event_bus *bus, uint32_t type, lmc_event_cb cb, void *ud);
lmc_status lmc_event_bus_register_subscriber(lmc_event_bus *bus, const lmc_event_subscriber *sub);

/* Start the drain thread (no-op if disabled or already running).
 * LMC_ERR_CLOSED after stop; LMC_ERR_IO if the thread cannot be created. */
lmc_status lmc_event_bus_start(lmc_event_bus *bus);
void lmc_event_bus_stop(lmc_event_bus *bus);

/* Copy len bytes of payload as one event. false when dropped. */
bool lmc_event_bus_publish(lmc_event_bus *bus, uint32_t type, const void *payload, size_t len);

/*
 * Zero-copy publish: reserve room for len bytes, write them, then commit.
 * reserve returns false (and counts a drop, unless the bus is disabled)
 * when the event cannot be queued; write and commit are then no-ops. The
 * bytes may wrap around the ring end, so the space comes as up to two
 * pieces: write with lmc_event_bus_write (which handles the wrap) rather
 * than through raw pointers. Bytes not written by commit are delivered as
 * zeros. Keep reserve..commit short: the drain thread waits for it (claim
 * order is publication order), and stop waits at most 2 s before giving
 * the event up as dropped. The timestamp is taken at reserve (before the
 * claim).
 */
typedef struct lmc_event_reservation { /* read written if you like; the rest is private */
    lmc_event_bus *bus;
    uint64_t pos; /* first slot */
    size_t len;
    size_t written;
    uint32_t seq; /* the event's sequence number */
    bool urgent;  /* the commit must wake the drain thread */
} lmc_event_reservation;

bool lmc_event_bus_reserve(lmc_event_bus *bus, uint32_t type, size_t len, lmc_event_reservation *r);
/*
 * reserve, with the timestamp derived from mono_ns, a CLOCK_MONOTONIC
 * reading (ns) the publisher took anyway: wall = W0 + (mono_ns - M0), where
 * (M0, W0) is a clock pair the bus sampled at create. It saves the caller a
 * second clock read (~30 ns). The result equals a wall-clock reading taken
 * at mono_ns up to adjustments of the wall clock since create (NTP slew or
 * steps); the trace recorder accepts that (its header pairs the two clocks
 * the same way).
 */
bool lmc_event_bus_reserve_mono(lmc_event_bus *bus, uint32_t type, size_t len, uint64_t mono_ns,
                                lmc_event_reservation *r);
/* The wall-clock seconds that reserve_mono stamps for mono_ns. */
double lmc_event_bus_wall_from_mono(const lmc_event_bus *bus, uint64_t mono_ns);
/*
 * reserve, stamped with the cheapest clock the bus has, for a hot path:
 * the TSC where lmc_tsc_usable() (a read ~17 ns here, against ~28 ns for
 * clock_gettime), else CLOCK_MONOTONIC. The consumer converts the reading
 * when it delivers the event: ev->mono_ns is CLOCK_MONOTONIC at the stamp
 * and ev->timestamp the wall clock derived from it, as reserve_mono
 * derives it. TSC ticks are converted with a calibration against
 * CLOCK_MONOTONIC taken at create (over 0.2 ms) and refreshed by the
 * consumer as it drains (pairs 1-100 ms apart; the rate over the span
 * since create, or over the last 50-100 ms, so it follows NTP's slewing
 * of CLOCK_MONOTONIC), so the mapping does not drift: a converted stamp
 * is within a few tens of ns of a clock_gettime at the same moment.
 */
bool lmc_event_bus_reserve_now(lmc_event_bus *bus, uint32_t type, size_t len,
                               lmc_event_reservation *r);
/* Whether reserve_now stamps with the TSC. */
bool lmc_event_bus_uses_tsc(const lmc_event_bus *bus);
/* Whether a commit prefetches the next event's slots (the config's choice, AUTO resolved). */
bool lmc_event_bus_prefetches(const lmc_event_bus *bus);
/* Append n bytes to a reservation (n must fit in what was reserved; any excess is ignored). */
void lmc_event_bus_write(lmc_event_reservation *r, const void *data, size_t n);
/*
 * The reservation's payload as one contiguous, 16-byte aligned span of
 * r->len bytes in the ring, or NULL when it wraps around the ring end (or
 * the reservation failed). A publisher that writes through it sets
 * r->written to what it wrote before commit; it saves the per-piece
 * bookkeeping of lmc_event_bus_write on the common, unwrapped path.
 */
void *lmc_event_bus_span(const lmc_event_reservation *r);
void lmc_event_bus_commit(lmc_event_reservation *r);

/*
 * A function the drain thread calls when it runs out of events (after a
 * short doze finds nothing), e.g. to write out a batch. NULL removes it.
 * Set it before start, or while running (it takes effect at the next lull).
 */
void lmc_event_bus_set_idle_hook(lmc_event_bus *bus, void (*hook)(void *ud), void *ud);

/* Events dropped so far (full queue or ring, too large, or after stop). */
uint64_t lmc_event_bus_dropped(const lmc_event_bus *bus);
/* Events queued and not yet drained (including the one in a callback, and
 * up to 16 drained ones whose space the drain thread has not handed back). */
size_t lmc_event_bus_queued(const lmc_event_bus *bus);
/* Events delivered (drained) so far; once it counts an event, that event's
 * callbacks have returned and its space is free again. */
uint64_t lmc_event_bus_delivered(const lmc_event_bus *bus);
bool lmc_event_bus_running(const lmc_event_bus *bus);
/* The ring's size in bytes, as derived from the config (a disabled bus has no ring). */
size_t lmc_event_bus_ring_bytes(const lmc_event_bus *bus);

#endif
