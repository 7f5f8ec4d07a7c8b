/*
 * event_bus.c -- the bounded, lock-free event ring and its drain thread
 * (see event_bus.h).
 *
 * Owns: the ring (nslots slots of 64 bytes, mmap'd), the commit words (a
 * side array indexed by event sequence number), the subscriber tables, the
 * drain thread "EventBus", the scratch buffer for wrapped payloads and the
 * counters.
 *
 * An event takes k = ceil((16 + len) / 64) consecutive slots: a 16-byte
 * header {type, len, timestamp}, then the payload, wrapping at the ring
 * end. Slot positions and event sequence numbers only grow (mod 2^32 and
 * 2^31); a position's slot is pos & mask.
 *
 * Threads, and what guards what:
 *  - Publishers (any thread) claim slots [p, p + k) and sequence number s
 *    with one CAS on `head`; from then until they store commit[s & qmask]
 *    they alone write those slots. That CAS is the only contended atomic
 *    on the publish path.
 *  - The consumer is the drain thread or, once that is joined (or if it
 *    never started), the thread calling stop. It alone reads committed
 *    events, clears their commit words and advances `tail`. Its fields
 *    (c_pos, c_seq, scratch, ...) need no lock: the join orders the
 *    hand-over.
 *  - `sub_mu` serialises subscribe/register_subscriber. The drain thread
 *    reads a type's callbacks without a lock: an entry is written before
 *    the release increment of that type's count and never changes after.
 *  - `life_mu` serialises start and stop.
 *
 * Why it is correct (the subtle parts):
 *  - head packs {closed:1, seq:31, pos:32}, tail packs {seq:31, pos:32}.
 *    head.seq - tail.seq is the number of events queued, so the count
 *    bound and the byte bound are checked on one snapshot by the same CAS
 *    that claims the slots: exact for one publisher, and never over the
 *    bound with many (a stale tail only makes the check stricter, and the
 *    CAS fails if head moved). Publishers read tail before head, so the
 *    snapshot never shows more consumed than claimed.
 *  - A publisher writes slots [p, p + k) only after the consumer finished
 *    with them on the previous lap: the space check uses a tail loaded
 *    with acquire, pairing with the consumer's release store of tail,
 *    which follows its reads of those slots.
 *  - The commit word of event s, {committed:1, s:31, position:32}, is
 *    stored with release after the header and payload; the consumer loads
 *    it with acquire. The words live outside the ring, so no payload byte
 *    can pass for a commit, and they are indexed by sequence number, so
 *    the words of consecutive events share a cache line that stays with
 *    the publishers (the consumer only reads them). Before event s commits,
 *    its word holds the commit of event s - (qmask + 1) or nothing: a
 *    different sequence number, so it is never taken for s.
 *  - Claim order is publication order: the consumer takes sequence numbers
 *    strictly in turn and never skips an uncommitted one.
 *  - The ring is a plain FIFO: events follow each other round the whole
 *    ring, never back to its front early. After its commit a publisher
 *    asks for the slots that follow its event (as many as it took) with a
 *    prefetch for writing (PREFETCHW on x86-64). Why: the drain thread
 *    reads every line a publisher writes, so each line's next write needs
 *    it back from the drain thread's core (or from memory, a lap later);
 *    on 2-vCPU AMD guests those fetches cost the 16-key capture ~300 ns
 *    (Zen 3) and ~120 ns (Zen 4) when the writes waited for them, and
 *    nothing once requested in advance, between calls (docs/benchmarks.md,
 *    "Lines the drain thread read"). On an Intel guest the same prefetch
 *    cost the capture 40-70 ns instead: its store buffer absorbed the
 *    misses, and the ~30 prefetches of a 16-key event were paid inside the
 *    call ("The write prefetch on an Intel guest"). So the bus decides once,
 *    at create, by CPU vendor (choose_prefetch); the config can force it
 *    either way, and `bench micro trace` measures the other choice in the
 *    same run (on_caller_16keys_other_prefetch_ns).
 *    An earlier version restarted at the ring's front whenever the queue
 *    was empty, to keep the lines in use few and warm; but those were the
 *    very lines the drain thread had just read, and the next event's
 *    position could not be predicted.
 *  - Sleeping without losing a wake-up: the consumer stores its state
 *    (DOZING or ASLEEP), then re-reads the commit word at its tail; a
 *    publisher stores its commit word, then reads the state. Each side
 *    needs its store ordered before its load (a Dekker handshake). The
 *    consumer's side is a seq_cst store, plus, before it sleeps deeply, a
 *    process-wide barrier (membarrier(2), PRIVATE_EXPEDITED): every
 *    running publisher executes a full fence, so a commit still in a
 *    publisher's store buffer becomes visible to the consumer's re-read.
 *    That lets a publisher commit with a plain release store and no fence
 *    of its own (an xchg that drains the store buffer of the whole payload
 *    cost ~30 ns a call here), the membarrier being paid at most once per
 *    idle spell. A dozing consumer gets no barrier: a publisher may then
 *    miss its state, which costs nothing, since a dozing consumer looks
 *    again within DOZE_NS by itself (publishers leave it alone unless the
 *    ring is half full anyway); an ASLEEP one is woken (futex) by the next
 *    commit. Where membarrier is unavailable, publishers commit with a
 *    seq_cst store (the fence on their side). Under steady load the
 *    consumer only dozes, and no publisher makes a syscall.
 *  - stop sets the closed bit in head with one atomic OR, so every claim
 *    either happened before it (and the final drain delivers it) or fails
 *    (and is counted as dropped): nothing is lost silently.
 */
#include "obs/event_bus.h"

#include <errno.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"

#define SLOT_BYTES 64u
#define HDR_BYTES 16u /* type, len, timestamp; the payload follows */
#define MAX_CBS_PER_TYPE 16u
#define MAX_SUBSCRIBERS 16u
#define MIN_RING_BYTES 128u               /* two slots */
#define DEFAULT_MIN_RING (64u * 1024u)    /* derived rings are at least this */
#define BYTES_PER_EVENT 2560u             /* derived ring: per queued event */
#define MAX_RING_BYTES ((size_t)1 << 32)  /* len must fit a uint32 */
#define MAX_QUEUE ((size_t)1 << 30)       /* seq differences fit 31 bits */
#define RELEASE_EVERY 16u                 /* consumer: events per tail release */
/*
 * consumer: idle nap publishers ignore. Each nap that ends by its timeout
 * costs the drain thread a wake-up, and on a guest whose idle vCPUs halt
 * at once that is tens of microseconds of CPU: at 0.2 ms the naps of a
 * traced server took 5-14 % of its CPU per request (tracing_cpu_ratio
 * 0.86-0.95), at 1 ms 0.99-1.04 (docs/benchmarks.md, "The drain thread's
 * nap"). The ring's half-full wake-up bounds what a longer nap can let
 * pile up.
 */
#define DOZE_NS (1000 * 1000L)
#define SLEEP_NS (100 * 1000 * 1000L)     /* consumer: idle wait publishers end */
#define FINAL_DRAIN_WAIT_NS 2000000000ull /* stop: wait this long for a commit */
#define WARN_INTERVAL_NS 1000000000ull
#define CAL_FIRST_NS 200000ull  /* create: the first TSC calibration spans this */
#define CAL_MIN_NS 1000000ull   /* consumer: recalibrate at least this far apart... */
#define CAL_MAX_NS 100000000ull /* ...and at most this far apart */
#define CAL_CHECK_EVERY 1024u   /* consumer: events between recalibration checks */
#define CAL_BRACKET_NS 5000u    /* a pair's two clock reads at most this far apart */

#define POS_MASK 0xffffffffull
#define SEQ_MASK 0x7fffffffull
#define CLOSED_BIT (1ull << 63)
#define COMMIT_BIT (1ull << 63) /* a commit word: COMMIT_BIT | seq << 32 | pos */

static inline uint32_t word_pos(uint64_t w)
{
    return (uint32_t)(w & POS_MASK);
}

static inline uint32_t word_seq(uint64_t w)
{
    return (uint32_t)((w >> 32) & SEQ_MASK);
}

static inline uint64_t word_make(uint32_t pos, uint32_t seq)
{
    return ((uint64_t)(seq & SEQ_MASK) << 32) | pos;
}

/*
 * The header at the start of an event's first slot. ts is the event's
 * stamp: wall-clock seconds (reserve, reserve_mono), or, with one of the
 * flags in type, a raw clock reading that the consumer converts
 * (reserve_now): TSC ticks, or CLOCK_MONOTONIC ns where the TSC is not
 * used. A type >= LMC_EVENT_TYPE_MAX is stored as LMC_EVENT_TYPE_MAX (it
 * reaches no callback either way), so the flag bits never collide with it.
 */
typedef struct ev_hdr {
    uint32_t type;
    uint32_t len;
    union {
        double wall_s;
        uint64_t raw;
    } ts;
} ev_hdr;

#define STAMP_TICKS (1u << 31)
#define STAMP_MONO (1u << 30)
#define TYPE_BITS (STAMP_MONO - 1)

_Static_assert(sizeof(ev_hdr) == HDR_BYTES, "event header is 16 bytes");

/* A type's callbacks: entries [0, n) are immutable once n covers them. */
typedef struct type_subs {
    _Atomic uint32_t n;
    lmc_event_cb cb[MAX_CBS_PER_TYPE];
    void *ud[MAX_CBS_PER_TYPE];
} type_subs;

typedef struct subscriber_entry {
    void (*shutdown)(void *ud);
    void *ud;
} subscriber_entry;

struct lmc_event_bus {
    /* Read-only after create. */
    bool enabled;
    uint32_t max_queue;
    uint32_t nslots;
    uint32_t mask;
    size_t ring_bytes;
    size_t max_payload;
    unsigned char *ring;      /* nslots * 64 bytes, mmap'd */
    _Atomic uint64_t *commit; /* per sequence number (mod qmask + 1): see commit_word */
    uint32_t qmask;
    size_t map_bytes;
    /* A (CLOCK_MONOTONIC, CLOCK_REALTIME) pair sampled at create, from which
     * reserve_mono derives an event's wall-clock timestamp. */
    uint64_t base_mono_ns;
    double base_wall_s;
    /* membarrier is registered: publishers commit without a fence (see the top). */
    bool asym_fence;
    /* reserve_now stamps with the TSC (see lmc_tsc_usable), not CLOCK_MONOTONIC. */
    bool use_tsc;
    /* How a commit prefetches the next event's slots: PF_* (see prefetch_next). */
    uint8_t prefetch;

    /* Publishers: the claim word (the one contended atomic). */
    alignas(64) _Atomic uint64_t head;
    /* Consumer-written, publisher-read. */
    alignas(64) _Atomic uint64_t tail;
    _Atomic(void (*)(void *)) idle_hook; /* called by the drain thread when idle */
    _Atomic(void *) idle_ud;
    alignas(64) _Atomic uint32_t sleeping; /* the futex word: AWAKE, DOZING or ASLEEP */
    atomic_bool stop_req;
    /* Publishers, drop path only. */
    alignas(64) _Atomic uint64_t dropped;
    _Atomic uint64_t last_warn_ns;
    atomic_bool warned_oversize;
    atomic_bool warned_closed;
    /* Consumer only (see the top of the file). */
    alignas(64) _Atomic uint64_t delivered;
    uint32_t c_pos;
    uint32_t c_seq;
    uint32_t c_unreleased;       /* events consumed but not yet released */
    uint32_t c_unreleased_slots; /* and their slots */
    uint32_t c_delivered;        /* and how many of them were delivered */
    uint32_t release_events;     /* release after this many events... */
    uint32_t release_slots;      /* ...or this many slots */
    unsigned char *scratch;
    size_t scratch_cap;
    /* The TSC calibration, consumer-owned like the fields above (see
     * tsc_recalibrate): the (ticks, CLOCK_MONOTONIC ns) pair of create, the
     * latest pair, the rate between them, and when to take the next. */
    uint64_t cal_tsc0, cal_mono0;
    uint64_t cal_tsc, cal_mono;
    double cal_ns_per_tick;
    uint64_t cal_next_ns;
    uint32_t cal_countdown;

    /* Lifecycle. */
    pthread_mutex_t life_mu;
    pthread_t thread;
    atomic_bool running;
    bool stopped;

    /* Subscriptions. */
    pthread_mutex_t sub_mu;
    size_t n_subscribers;
    subscriber_entry subscribers[MAX_SUBSCRIBERS];
    type_subs subs[LMC_EVENT_TYPE_MAX];
};

/* ---------------------------------------------------------------------- */
/* Small helpers                                                          */
/* ---------------------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static size_t next_pow2(size_t v)
{
    size_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static inline uint32_t slots_for(size_t len)
{
    return (uint32_t)((HDR_BYTES + len + SLOT_BYTES - 1) / SLOT_BYTES);
}

/* What commit[s & qmask] holds once event s (at pos) is committed. */
static inline uint64_t commit_word(uint32_t seq, uint32_t pos)
{
    return COMMIT_BIT | (uint64_t)(seq & SEQ_MASK) << 32 | pos;
}

static inline unsigned char *slot_ptr(const lmc_event_bus *bus, uint32_t pos)
{
    return bus->ring + (size_t)(pos & bus->mask) * SLOT_BYTES;
}

/* The bus's prefetch field. */
enum { PF_NONE, PF_PREFETCHW, PF_GENERIC };

/*
 * AUTO: none on Intel x86-64 (measured to cost there, see the top), else
 * PREFETCHW where the CPU has it (CPUID 0x80000001 ECX bit 8: AMD's
 * 3DNowPrefetch, Intel's PRFCHW), else the compiler's write prefetch.
 */
static uint8_t choose_prefetch(lmc_event_bus_prefetch want)
{
    if (want == LMC_EVENT_BUS_PREFETCH_OFF)
        return PF_NONE;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (want == LMC_EVENT_BUS_PREFETCH_AUTO && __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u &&
        d == 0x49656e69u && c == 0x6c65746eu) /* "Genu" "ineI" "ntel" */
        return PF_NONE;
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)))
        return PF_PREFETCHW;
#endif
    return PF_GENERIC;
}

/*
 * After the commit of k slots at pos: ask for the k slots that follow,
 * for writing, so that the next event (most likely as long, most likely
 * this thread's) finds its lines here rather than in the drain thread's
 * cache (see the top of the file). A hint: it changes no byte, and a
 * wrong guess costs a line fetched early.
 */
static inline void prefetch_next(const lmc_event_bus *bus, uint32_t pos, uint32_t k)
{
    if (bus->prefetch == PF_NONE)
        return;
    for (uint32_t i = 0; i < k; i++) {
        const unsigned char *p = slot_ptr(bus, pos + k + i);
#if defined(__x86_64__)
        if (bus->prefetch == PF_PREFETCHW) {
            __asm__ __volatile__("prefetchw %0" : : "m"(*p));
            continue;
        }
#endif
        __builtin_prefetch(p, 1, 3);
    }
}

static void futex_wake_one(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void futex_wait_timeout(_Atomic uint32_t *word, uint32_t expected, long ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

/* The drain thread's state, in `sleeping`. */
enum { AWAKE = 0, DOZING = 1, ASLEEP = 2 };

/*
 * Called by a publisher after its commit: wake the drain thread if it is
 * asleep, or if it dozes while the ring is at least half full (urgent).
 * A dozing consumer looks again within DOZE_NS anyway, so under steady
 * load no publisher makes a syscall.
 */
static inline void wake_consumer(lmc_event_bus *bus, bool urgent)
{
    uint32_t s = atomic_load(&bus->sleeping);
    if ((s == ASLEEP || (s == DOZING && urgent)) && atomic_exchange(&bus->sleeping, AWAKE) != AWAKE)
        futex_wake_one(&bus->sleeping);
}

/* ---------------------------------------------------------------------- */
/* The TSC calibration                                                    */
/* ---------------------------------------------------------------------- */

/*
 * One (ticks, CLOCK_MONOTONIC ns) pair: the TSC read between two clock
 * reads, paired with their midpoint; the tightest bracket of three tries,
 * or of up to 64 while none is under CAL_BRACKET_NS (a try that a
 * preemption splits is then left out). Returns the bracket.
 */
static uint64_t tsc_pair(uint64_t *ticks, uint64_t *mono)
{
    uint64_t best = UINT64_MAX;
    *ticks = 0;
    *mono = 0;
    for (int i = 0; i < 64 && (i < 3 || best > CAL_BRACKET_NS); i++) {
        uint64_t m0 = lmc_mono_ns();
        atomic_thread_fence(memory_order_seq_cst); /* the TSC read stays between the two */
        uint64_t t = lmc_tsc_read();
        atomic_thread_fence(memory_order_seq_cst);
        uint64_t m1 = lmc_mono_ns();
        if (m1 - m0 < best) {
            best = m1 - m0;
            *ticks = t;
            *mono = m0 + (m1 - m0) / 2;
        }
    }
    return best;
}

/*
 * Consumer: a new pair, and the rate over everything since create, or
 * over the last interval once that is 50 ms or more (the longer the span,
 * the smaller the error of the rate: a pair is good to about half its
 * ~30 ns bracket). Conversions then run from the new pair,
 * so a converted stamp is off by that bracket plus the rate's error times
 * its distance from the pair, a few ns to tens of ns. Pairs are taken
 * CAL_MIN_NS..CAL_MAX_NS apart, at a quarter of the span so far: where
 * the rate is still rough (just after create), the pairs come often.
 */
static void tsc_recalibrate(lmc_event_bus *bus)
{
    uint64_t t, m;
    if (tsc_pair(&t, &m) > CAL_BRACKET_NS && bus->cal_tsc != 0) {
        bus->cal_next_ns = m + CAL_MIN_NS; /* a poor pair: keep the mapping, try again soon */
        return;
    }
    /* Once the pairs are far enough apart, the rate of the last interval
     * (good to ~1e-7 over 50 ms): it follows NTP's slewing of the clock. */
    uint64_t t0 = bus->cal_tsc0, m0 = bus->cal_mono0;
    if (bus->cal_tsc != 0 && m - bus->cal_mono >= CAL_MAX_NS / 2) {
        t0 = bus->cal_tsc;
        m0 = bus->cal_mono;
    }
    if (t > t0 && m > m0) {
        bus->cal_ns_per_tick = (double)(m - m0) / (double)(t - t0);
        bus->cal_tsc = t;
        bus->cal_mono = m;
    }
    uint64_t gap = (m - bus->cal_mono0) / 4;
    gap = gap < CAL_MIN_NS ? CAL_MIN_NS : gap > CAL_MAX_NS ? CAL_MAX_NS : gap;
    bus->cal_next_ns = m + gap;
}

/* Consumer: recalibrate if it is time (one clock read). */
static void tsc_maybe_recalibrate(lmc_event_bus *bus)
{
    bus->cal_countdown = CAL_CHECK_EVERY;
    if (bus->use_tsc && lmc_mono_ns() >= bus->cal_next_ns)
        tsc_recalibrate(bus);
}

/* Consumer: CLOCK_MONOTONIC ns of a TSC stamp (signed: a stamp may precede the pair). */
static uint64_t tsc_to_mono(const lmc_event_bus *bus, uint64_t ticks)
{
    double d = (double)(int64_t)(ticks - bus->cal_tsc) * bus->cal_ns_per_tick;
    return bus->cal_mono + (uint64_t)(int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

/* ---------------------------------------------------------------------- */
/* Drops                                                                  */
/* ---------------------------------------------------------------------- */

enum drop_reason { DROP_QUEUE_FULL, DROP_RING_FULL, DROP_OVERSIZE, DROP_CLOSED };

static bool drop_event(lmc_event_bus *bus, enum drop_reason why, size_t len)
{
    uint64_t n = atomic_fetch_add_explicit(&bus->dropped, 1, memory_order_relaxed) + 1;
    switch (why) {
    case DROP_OVERSIZE:
        if (!atomic_exchange_explicit(&bus->warned_oversize, true, memory_order_relaxed))
            LMC_WARN("event-bus",
                     "EventBus event of %zu bytes does not fit the ring (%zu bytes), "
                     "%llu event(s) discarded so far",
                     len, bus->ring_bytes, (unsigned long long)n);
        return false;
    case DROP_CLOSED:
        if (!atomic_exchange_explicit(&bus->warned_closed, true, memory_order_relaxed))
            LMC_WARN("event-bus", "EventBus is stopped, events published after stop are "
                                  "discarded");
        return false;
    case DROP_QUEUE_FULL:
    case DROP_RING_FULL:
        break;
    }
    /* At most one warning per second: the publisher that advances the
     * timestamp logs, the others see the CAS fail. */
    uint64_t now = lmc_mono_ns();
    uint64_t last = atomic_load_explicit(&bus->last_warn_ns, memory_order_relaxed);
    if ((last == 0 || now - last >= WARN_INTERVAL_NS) &&
        atomic_compare_exchange_strong_explicit(&bus->last_warn_ns, &last, now,
                                                memory_order_relaxed, memory_order_relaxed)) {
        if (why == DROP_QUEUE_FULL)
            LMC_WARN("event-bus",
                     "EventBus queue full (max_queue_size=%d), %llu event(s) discarded so far",
                     (int)bus->max_queue, (unsigned long long)n);
        else
            LMC_WARN("event-bus", "EventBus ring full (%zu bytes), %llu event(s) discarded so far",
                     bus->ring_bytes, (unsigned long long)n);
    }
    return false;
}

/* ---------------------------------------------------------------------- */
/* Create / destroy                                                       */
/* ---------------------------------------------------------------------- */

lmc_status lmc_event_bus_create(const lmc_event_bus_config *cfg, lmc_event_bus **out,
                                lmc_error *err)
{
    lmc_event_bus_config def = {.enabled = true, .max_queue_size = 0, .ring_bytes = 0};
    if (cfg == NULL)
        cfg = &def;
    if (out == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "event bus: out is NULL");
    *out = NULL;

    if ((unsigned)cfg->prefetch > LMC_EVENT_BUS_PREFETCH_OFF)
        return lmc_error_set(err, LMC_ERR_INVALID, "event bus: prefetch %d is not AUTO, ON or OFF",
                             (int)cfg->prefetch);
    size_t max_queue = cfg->max_queue_size ? cfg->max_queue_size : LMC_EVENT_BUS_DEFAULT_QUEUE;
    if (max_queue > MAX_QUEUE)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "event bus: max_queue_size %zu is not in [1, %zu]", max_queue,
                             MAX_QUEUE);
    size_t ring_bytes;
    if (cfg->ring_bytes == 0) {
        if (max_queue > MAX_RING_BYTES / BYTES_PER_EVENT)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "event bus: max_queue_size %zu needs a ring over %zu bytes; "
                                 "set ring_bytes",
                                 max_queue, MAX_RING_BYTES);
        ring_bytes = next_pow2(max_queue * BYTES_PER_EVENT);
        if (ring_bytes < DEFAULT_MIN_RING)
            ring_bytes = DEFAULT_MIN_RING;
    } else {
        if (cfg->ring_bytes > MAX_RING_BYTES)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "event bus: ring_bytes %zu is over the limit of %zu",
                                 cfg->ring_bytes, MAX_RING_BYTES);
        ring_bytes = next_pow2(cfg->ring_bytes);
        if (ring_bytes < MIN_RING_BYTES)
            ring_bytes = MIN_RING_BYTES;
    }

    size_t bus_bytes = (sizeof(lmc_event_bus) + 63) & ~(size_t)63;
    lmc_event_bus *bus = aligned_alloc(64, bus_bytes);
    if (bus == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "event bus: out of memory");
    memset(bus, 0, bus_bytes);
    bus->enabled = cfg->enabled;
    bus->max_queue = (uint32_t)max_queue;
    bus->ring_bytes = ring_bytes;
    bus->nslots = (uint32_t)(ring_bytes / SLOT_BYTES);
    bus->mask = bus->nslots - 1;
    bus->max_payload = ring_bytes - HDR_BYTES;
    /* Release consumed space in batches (fewer writes to the line every
     * publisher reads), but often enough that a small queue or ring never
     * looks full to publishers while the consumer holds space back. */
    bus->release_events = RELEASE_EVERY;
    if (bus->release_events > bus->max_queue / 4)
        bus->release_events = bus->max_queue / 4 ? (uint32_t)(bus->max_queue / 4) : 1;
    bus->release_slots = bus->nslots / 4 ? bus->nslots / 4 : 1;
    bus->prefetch = choose_prefetch(cfg->prefetch);
    /* The wall clock read between two monotonic ones: pairing it with their
     * midpoint halves the error of the derived timestamps. */
    uint64_t m0 = lmc_mono_ns();
    bus->base_wall_s = lmc_wall_s();
    uint64_t m1 = lmc_mono_ns();
    bus->base_mono_ns = m0 + (m1 - m0) / 2;
    /* The TSC's first rate, over CAL_FIRST_NS of spinning (a rate to
     * ~1e-4; the consumer refines it from then on, see tsc_recalibrate). */
    bus->use_tsc = cfg->enabled && !cfg->no_tsc && lmc_tsc_usable();
    if (bus->use_tsc) {
        tsc_pair(&bus->cal_tsc0, &bus->cal_mono0);
        while (lmc_mono_ns() < bus->cal_mono0 + CAL_FIRST_NS)
            cpu_relax();
        tsc_recalibrate(bus);
        if (bus->cal_ns_per_tick <= 0)
            bus->use_tsc = false; /* the counter did not move: not a clock */
    }
    bus->cal_countdown = CAL_CHECK_EVERY;
    atomic_init(&bus->head, 0);
    atomic_init(&bus->tail, 0);
    atomic_init(&bus->sleeping, 0);
    atomic_init(&bus->stop_req, false);
    atomic_init(&bus->dropped, 0);
    atomic_init(&bus->last_warn_ns, 0);
    atomic_init(&bus->warned_oversize, false);
    atomic_init(&bus->warned_closed, false);
    atomic_init(&bus->delivered, 0);
    atomic_init(&bus->running, false);
    for (size_t i = 0; i < LMC_EVENT_TYPE_MAX; i++)
        atomic_init(&bus->subs[i].n, 0);
    pthread_mutex_init(&bus->life_mu, NULL);
    pthread_mutex_init(&bus->sub_mu, NULL);

    lmc_status st = LMC_OK;
    /* A disabled bus never queues anything: it needs no ring. */
    if (bus->enabled) {
        bus->qmask = (uint32_t)next_pow2(max_queue) - 1;
        size_t commit_bytes = ((size_t)bus->qmask + 1) * sizeof(_Atomic uint64_t);
        bus->map_bytes = ring_bytes + commit_bytes;
        /* MAP_POPULATE: no publisher ever takes a page fault, even in a
         * burst that reaches deep into the ring for the first time (one
         * per 4 KiB, ~2 us each, measured). The memory is zero: no commit
         * word is set. */
        void *m = mmap(NULL, bus->map_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (m == MAP_FAILED) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "event bus: cannot map a %zu-byte ring: %s",
                               bus->map_bytes, strerror(errno));
            goto fail;
        }
        bus->ring = m;
        bus->commit = (_Atomic uint64_t *)(void *)((unsigned char *)m + ring_bytes);
        /* Registration is per process and idempotent. */
        bus->asym_fence =
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }
    *out = bus;
    return LMC_OK;

fail:
    pthread_mutex_destroy(&bus->life_mu);
    pthread_mutex_destroy(&bus->sub_mu);
    free(bus);
    return st;
}

void lmc_event_bus_destroy(lmc_event_bus *bus)
{
    if (bus == NULL)
        return;
    lmc_event_bus_stop(bus);
    if (bus->ring != NULL)
        munmap(bus->ring, bus->map_bytes);
    free(bus->scratch);
    pthread_mutex_destroy(&bus->life_mu);
    pthread_mutex_destroy(&bus->sub_mu);
    free(bus);
}

/* ---------------------------------------------------------------------- */
/* Subscriptions                                                          */
/* ---------------------------------------------------------------------- */

/* Append under sub_mu: write the entry, then publish it with the count. */
static void add_cb_locked(lmc_event_bus *bus, uint32_t type, lmc_event_cb cb, void *ud)
{
    type_subs *t = &bus->subs[type];
    uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
    t->cb[n] = cb;
    t->ud[n] = ud;
    atomic_store_explicit(&t->n, n + 1, memory_order_release);
}

lmc_status lmc_event_bus_subscribe(lmc_event_bus *bus, uint32_t type, lmc_event_cb cb, void *ud)
{
    if (bus == NULL || cb == NULL || type >= LMC_EVENT_TYPE_MAX)
        return LMC_ERR_INVALID;
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&bus->sub_mu);
    if (atomic_load_explicit(&bus->subs[type].n, memory_order_relaxed) >= MAX_CBS_PER_TYPE)
        st = LMC_ERR_BUSY;
    else
        add_cb_locked(bus, type, cb, ud);
    pthread_mutex_unlock(&bus->sub_mu);
    return st;
}

lmc_status lmc_event_bus_register_subscriber(lmc_event_bus *bus, const lmc_event_subscriber *sub)
{
    if (bus == NULL || sub == NULL || (sub->n_subs > 0 && sub->subs == NULL))
        return LMC_ERR_INVALID;
    for (size_t i = 0; i < sub->n_subs; i++)
        if (sub->subs[i].cb == NULL || sub->subs[i].type >= LMC_EVENT_TYPE_MAX)
            return LMC_ERR_INVALID;

    /* All or nothing: check every table has room before adding anything. */
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&bus->sub_mu);
    if (bus->n_subscribers >= MAX_SUBSCRIBERS) {
        st = LMC_ERR_BUSY;
        goto out;
    }
    uint32_t need[LMC_EVENT_TYPE_MAX] = {0};
    for (size_t i = 0; i < sub->n_subs; i++) {
        uint32_t type = sub->subs[i].type;
        if (atomic_load_explicit(&bus->subs[type].n, memory_order_relaxed) + ++need[type] >
            MAX_CBS_PER_TYPE) {
            st = LMC_ERR_BUSY;
            goto out;
        }
    }
    for (size_t i = 0; i < sub->n_subs; i++)
        add_cb_locked(bus, sub->subs[i].type, sub->subs[i].cb, sub->ud);
    bus->subscribers[bus->n_subscribers].shutdown = sub->shutdown;
    bus->subscribers[bus->n_subscribers].ud = sub->ud;
    bus->n_subscribers++;
out:
    pthread_mutex_unlock(&bus->sub_mu);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Publishing                                                             */
/* ---------------------------------------------------------------------- */

/* reserve, reserve_mono and reserve_now: claim the slots, then write the
 * header with the stamp ts (its kind in the type's flag bits). */
static inline bool reserve_at(lmc_event_bus *bus, uint32_t type, size_t len, uint64_t ts,
                              uint32_t stamp_kind, lmc_event_reservation *r)
{
    r->bus = NULL;
    r->pos = 0;
    r->len = 0;
    r->written = 0;
    r->seq = 0;
    r->urgent = false;
    if (!bus->enabled)
        return false; /* like LMCache: a disabled bus does nothing, counts nothing */
    if (len > bus->max_payload)
        return drop_event(bus, DROP_OVERSIZE, len);

    uint32_t k = slots_for(len);
    uint32_t pos;
    uint64_t h;
    int retries = 0;
    for (;;) {
        /* Tail first, then head: tail never passes head, so the snapshot
         * never shows more consumed than claimed. Acquire: our writes to
         * the claimed slots must follow the consumer's reads of them on
         * the previous lap. */
        uint64_t t = atomic_load_explicit(&bus->tail, memory_order_acquire);
        h = atomic_load_explicit(&bus->head, memory_order_relaxed);
        if (h & CLOSED_BIT)
            return drop_event(bus, DROP_CLOSED, len);
        uint32_t queued = (word_seq(h) - word_seq(t)) & (uint32_t)SEQ_MASK;
        pos = word_pos(h);
        bool queue_full = queued >= bus->max_queue;
        if (queue_full || (uint32_t)(pos + k - word_pos(t)) > bus->nslots) {
            /* Full on this snapshot. If tail has moved meanwhile (the
             * consumer freed space), look again, at most twice, so that a
             * stale view rarely costs an event; a drop never waits. */
            if (retries++ < 2 && atomic_load_explicit(&bus->tail, memory_order_relaxed) != t)
                continue;
            return drop_event(bus, queue_full ? DROP_QUEUE_FULL : DROP_RING_FULL, len);
        }
        uint64_t nh = word_make(pos + k, word_seq(h) + 1);
        if (!atomic_compare_exchange_weak_explicit(&bus->head, &h, nh, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue;
        /* Half full or more: the commit wakes even a dozing consumer. */
        r->urgent = 2 * (queued + 1) >= bus->max_queue ||
                    2 * (uint64_t)(uint32_t)(pos + k - word_pos(t)) >= bus->nslots;
        break;
    }

    r->seq = word_seq(h);
    ev_hdr hdr = {.type = (type < LMC_EVENT_TYPE_MAX ? type : LMC_EVENT_TYPE_MAX) | stamp_kind,
                  .len = (uint32_t)len,
                  .ts.raw = ts};
    memcpy(slot_ptr(bus, pos), &hdr, sizeof(hdr));
    r->bus = bus;
    r->pos = pos;
    r->len = len;
    return true;
}

static inline uint64_t wall_bits(double wall_s)
{
    uint64_t u;
    memcpy(&u, &wall_s, sizeof(u));
    return u;
}

bool lmc_event_bus_reserve(lmc_event_bus *bus, uint32_t type, size_t len, lmc_event_reservation *r)
{
    /* The wall clock is read before the claim, so a disabled bus or a drop
     * costs it too; it keeps the claim-to-commit window short. */
    return reserve_at(bus, type, len, wall_bits(bus->enabled ? lmc_wall_s() : 0.0), 0, r);
}

double lmc_event_bus_wall_from_mono(const lmc_event_bus *bus, uint64_t mono_ns)
{
    /* Signed: a sample taken just before create lies before the base. */
    return bus->base_wall_s + (double)(int64_t)(mono_ns - bus->base_mono_ns) * 1e-9;
}

bool lmc_event_bus_reserve_mono(lmc_event_bus *bus, uint32_t type, size_t len, uint64_t mono_ns,
                                lmc_event_reservation *r)
{
    return reserve_at(bus, type, len, wall_bits(lmc_event_bus_wall_from_mono(bus, mono_ns)), 0, r);
}

bool lmc_event_bus_reserve_now(lmc_event_bus *bus, uint32_t type, size_t len,
                               lmc_event_reservation *r)
{
    /* Before the claim, like reserve; the consumer converts the reading. */
    if (bus->use_tsc)
        return reserve_at(bus, type, len, lmc_tsc_read(), STAMP_TICKS, r);
    return reserve_at(bus, type, len, bus->enabled ? lmc_mono_ns() : 0, STAMP_MONO, r);
}

bool lmc_event_bus_uses_tsc(const lmc_event_bus *bus)
{
    return bus->use_tsc;
}

bool lmc_event_bus_prefetches(const lmc_event_bus *bus)
{
    return bus->prefetch != PF_NONE;
}

/* Copy n bytes to payload offset `off` of the event at pos, wrapping at the ring end. */
static inline void ring_copy_in(lmc_event_bus *bus, uint32_t pos, size_t off, const void *data,
                                size_t n)
{
    size_t at = ((size_t)(pos & bus->mask) * SLOT_BYTES + HDR_BYTES + off) & (bus->ring_bytes - 1);
    size_t first = bus->ring_bytes - at;
    if (first >= n) {
        memcpy(bus->ring + at, data, n);
    } else {
        memcpy(bus->ring + at, data, first);
        memcpy(bus->ring, (const unsigned char *)data + first, n - first);
    }
}

static inline void ring_zero(lmc_event_bus *bus, uint32_t pos, size_t off, size_t n)
{
    size_t at = ((size_t)(pos & bus->mask) * SLOT_BYTES + HDR_BYTES + off) & (bus->ring_bytes - 1);
    size_t first = bus->ring_bytes - at;
    if (first >= n) {
        memset(bus->ring + at, 0, n);
    } else {
        memset(bus->ring + at, 0, first);
        memset(bus->ring, 0, n - first);
    }
}

void lmc_event_bus_write(lmc_event_reservation *r, const void *data, size_t n)
{
    if (r->bus == NULL || n == 0)
        return;
    /* Never write past the reservation, whatever the caller asks. */
    if (n > r->len - r->written)
        n = r->len - r->written;
    ring_copy_in(r->bus, (uint32_t)r->pos, r->written, data, n);
    r->written += n;
}

void *lmc_event_bus_span(const lmc_event_reservation *r)
{
    const lmc_event_bus *bus = r->bus;
    if (bus == NULL)
        return NULL;
    size_t at = (size_t)((uint32_t)r->pos & bus->mask) * SLOT_BYTES + HDR_BYTES;
    return at + r->len <= bus->ring_bytes ? bus->ring + at : NULL;
}

void lmc_event_bus_commit(lmc_event_reservation *r)
{
    lmc_event_bus *bus = r->bus;
    if (bus == NULL)
        return;
    if (r->written < r->len) /* deliver zeros, never an earlier event's bytes */
        ring_zero(bus, (uint32_t)r->pos, r->written, r->len - r->written);
    /* A release for the header and payload, and the publisher's half of
     * the sleep/wake handshake (see the top of the file): with the
     * consumer's membarrier, no fence here; without it, seq_cst. */
    _Atomic uint64_t *cw = &bus->commit[r->seq & bus->qmask];
    uint64_t w = commit_word(r->seq, (uint32_t)r->pos);
    if (bus->asym_fence) {
        atomic_store_explicit(cw, w, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst); /* the load of the state stays after it */
    } else {
        atomic_store(cw, w);
    }
    wake_consumer(bus, r->urgent);
    prefetch_next(bus, (uint32_t)r->pos, slots_for(r->len));
    r->bus = NULL;
}

bool lmc_event_bus_publish(lmc_event_bus *bus, uint32_t type, const void *payload, size_t len)
{
    lmc_event_reservation r;
    if (!lmc_event_bus_reserve(bus, type, len, &r))
        return false;
    if (len > 0)
        ring_copy_in(bus, (uint32_t)r.pos, 0, payload, len);
    r.written = len;
    lmc_event_bus_commit(&r);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Consuming                                                              */
/* ---------------------------------------------------------------------- */

/* Make consumed slots available to publishers, and count deliveries. */
static void consumer_release(lmc_event_bus *bus)
{
    if (bus->c_unreleased == 0)
        return;
    atomic_store_explicit(&bus->tail, word_make(bus->c_pos, bus->c_seq), memory_order_release);
    /* Release: whoever sees the new count also sees the slots freed. */
    uint64_t d = atomic_load_explicit(&bus->delivered, memory_order_relaxed);
    atomic_store_explicit(&bus->delivered, d + bus->c_delivered, memory_order_release);
    bus->c_unreleased = 0;
    bus->c_unreleased_slots = 0;
    bus->c_delivered = 0;
}

/* The commit word of the next event in turn, or 0 while it is not
 * committed (the word then holds an earlier lap's event, or nothing).
 * seq_cst, for the sleep handshake (a plain load on x86 anyway). */
static inline uint64_t commit_at_tail(const lmc_event_bus *bus)
{
    uint64_t w = atomic_load(&bus->commit[bus->c_seq & bus->qmask]);
    return (w >> 32) == (commit_word(bus->c_seq, 0) >> 32) ? w : 0;
}

/* Deliver the next event in turn, committed with word w, and consume it. */
static void consume_one(lmc_event_bus *bus, uint64_t w)
{
    if (--bus->cal_countdown == 0)
        tsc_maybe_recalibrate(bus); /* every CAL_CHECK_EVERY events: one clock read */
    /* The position its publisher claimed: c_pos, the ring being a FIFO. */
    uint32_t pos = (uint32_t)(w & POS_MASK);
    ev_hdr hdr;
    memcpy(&hdr, slot_ptr(bus, pos), sizeof(hdr));
    size_t at = (size_t)(pos & bus->mask) * SLOT_BYTES + HDR_BYTES;
    const void *payload = bus->ring + at;
    bool ok = true;
    if (at + hdr.len > bus->ring_bytes) {
        /* The payload wraps: hand callbacks one contiguous copy. */
        if (bus->scratch_cap < hdr.len) {
            /* Grow by replacement: the old bytes are not needed, and
             * aligned_alloc keeps the payload's 16-byte alignment. */
            size_t cap = next_pow2(hdr.len < 64 ? 64 : hdr.len);
            free(bus->scratch);
            bus->scratch = aligned_alloc(16, cap);
            bus->scratch_cap = bus->scratch ? cap : 0;
            ok = bus->scratch != NULL;
        }
        if (ok) {
            size_t first = bus->ring_bytes - at;
            memcpy(bus->scratch, bus->ring + at, first);
            memcpy(bus->scratch + first, bus->ring, hdr.len - first);
            payload = bus->scratch;
        }
    }
    uint32_t type = hdr.type & TYPE_BITS;
    if (ok && type < LMC_EVENT_TYPE_MAX) {
        const type_subs *t = &bus->subs[type];
        uint32_t n = atomic_load_explicit(&t->n, memory_order_acquire);
        lmc_event ev = {.type = type, .payload = payload, .len = hdr.len};
        if (hdr.type & (STAMP_TICKS | STAMP_MONO)) {
            ev.mono_ns = hdr.type & STAMP_TICKS ? tsc_to_mono(bus, hdr.ts.raw) : hdr.ts.raw;
            ev.timestamp = lmc_event_bus_wall_from_mono(bus, ev.mono_ns);
        } else {
            ev.timestamp = hdr.ts.wall_s;
            double d = (ev.timestamp - bus->base_wall_s) * 1e9;
            ev.mono_ns = bus->base_mono_ns + (uint64_t)(int64_t)d;
        }
        for (uint32_t i = 0; i < n; i++)
            t->cb[i](&ev, t->ud[i]);
    }
    if (!ok) {
        LMC_ERROR("event-bus", "EventBus: out of memory copying a %u-byte event; discarded",
                  hdr.len);
        atomic_fetch_add_explicit(&bus->dropped, 1, memory_order_relaxed);
    }

    uint32_t end = pos + slots_for(hdr.len);
    uint32_t freed = end - bus->c_pos;
    bus->c_pos = end;
    bus->c_seq = (bus->c_seq + 1) & (uint32_t)SEQ_MASK;
    bus->c_unreleased++;
    bus->c_unreleased_slots += freed;
    bus->c_delivered += ok;
    if (bus->c_unreleased >= bus->release_events || bus->c_unreleased_slots >= bus->release_slots)
        consumer_release(bus);
}

/* Consume the committed events at the tail, in order, until the next one
 * is not committed. Returns the number consumed. (Drain-thread use: a
 * claimed but uncommitted event is left for later; its commit wakes us.) */
static size_t drain_ready(lmc_event_bus *bus)
{
    size_t n = 0;
    uint64_t w;
    tsc_maybe_recalibrate(bus);
    while ((w = commit_at_tail(bus)) != 0) {
        consume_one(bus, w);
        n++;
    }
    consumer_release(bus);
    return n;
}

/*
 * The final drain (stop, after the drain thread is joined): consume every
 * event claimed before the bus closed, in order, waiting for any claimed
 * but uncommitted one (spin, then yield, then short sleeps). A commit that
 * does not come within FINAL_DRAIN_WAIT_NS is given up: what is left is
 * counted as dropped.
 */
static void drain_final(lmc_event_bus *bus)
{
    uint64_t h = atomic_load_explicit(&bus->head, memory_order_relaxed); /* closed: fixed */
    uint64_t deadline = lmc_mono_ns() + FINAL_DRAIN_WAIT_NS;
    unsigned spins = 0;
    tsc_maybe_recalibrate(bus);
    while (bus->c_seq != word_seq(h)) {
        uint64_t w = commit_at_tail(bus);
        if (w != 0) {
            consume_one(bus, w);
            spins = 0;
            continue;
        }
        consumer_release(bus);
        if (lmc_mono_ns() > deadline) {
            uint32_t lost = (word_seq(h) - bus->c_seq) & (uint32_t)SEQ_MASK;
            LMC_ERROR("event-bus",
                      "EventBus stop: an event was reserved but not committed within %llu ms; "
                      "%u event(s) discarded",
                      (unsigned long long)(FINAL_DRAIN_WAIT_NS / 1000000ull), lost);
            atomic_fetch_add_explicit(&bus->dropped, lost, memory_order_relaxed);
            bus->c_pos = word_pos(h);
            bus->c_seq = word_seq(h);
            atomic_store_explicit(&bus->tail, word_make(bus->c_pos, bus->c_seq),
                                  memory_order_release);
            return;
        }
        if (spins < 64)
            cpu_relax();
        else if (spins < 1024)
            sched_yield();
        else
            lmc_sleep_ns(50000);
        spins++;
    }
    consumer_release(bus);
}

/* Wait on the futex word while it holds `state`, unless an event is ready
 * or stop was asked. Returns whether an event is ready. */
static bool nap(lmc_event_bus *bus, uint32_t state, long ns)
{
    /* Announce the state, then look once more (see the top of the file):
     * a publisher that commits after our look sees the state and, if it
     * must, wakes us. Before a deep sleep, the barrier makes every commit
     * that a publisher made before reading our old state visible to the
     * look. */
    atomic_store(&bus->sleeping, state);
    if (state == ASLEEP && bus->asym_fence)
        (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    bool ready = commit_at_tail(bus) != 0;
    if (!ready && !atomic_load(&bus->stop_req)) {
        futex_wait_timeout(&bus->sleeping, state, ns);
        ready = commit_at_tail(bus) != 0;
    }
    return ready;
}

static void *drain_main(void *arg)
{
    lmc_event_bus *bus = arg;
    while (!atomic_load(&bus->stop_req)) {
        if (drain_ready(bus) > 0)
            continue;
        /* Idle. Doze first: publishers let us be (unless the ring fills),
         * so under steady load events are drained in batches every
         * DOZE_NS and no publisher pays for a wake-up. Only after a doze
         * with nothing to do do we sleep deeply and let the next
         * publisher wake us. */
        if (!nap(bus, DOZING, DOZE_NS)) {
            /* A lull: let subscribers finish what they batched (the trace
             * recorder hands its buffer to its writer, at most every
             * 20 ms), so little is lost to a kill. */
            void (*idle)(void *) = atomic_load(&bus->idle_hook);
            if (idle != NULL)
                idle(atomic_load(&bus->idle_ud));
            (void)nap(bus, ASLEEP, SLEEP_NS);
        }
        atomic_store(&bus->sleeping, AWAKE);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Lifecycle                                                              */
/* ---------------------------------------------------------------------- */

lmc_status lmc_event_bus_start(lmc_event_bus *bus)
{
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&bus->life_mu);
    if (bus->stopped) {
        st = LMC_ERR_CLOSED;
        goto out;
    }
    if (!bus->enabled || atomic_load(&bus->running))
        goto out;
    int rc = pthread_create(&bus->thread, NULL, drain_main, bus);
    if (rc != 0) {
        LMC_ERROR("event-bus", "EventBus: cannot start the drain thread: %s", strerror(rc));
        st = LMC_ERR_IO;
        goto out;
    }
    pthread_setname_np(bus->thread, "EventBus");
    atomic_store(&bus->running, true);
out:
    pthread_mutex_unlock(&bus->life_mu);
    return st;
}

void lmc_event_bus_stop(lmc_event_bus *bus)
{
    pthread_mutex_lock(&bus->life_mu);
    if (bus->stopped) {
        pthread_mutex_unlock(&bus->life_mu);
        return;
    }
    bus->stopped = true;
    if (bus->enabled) {
        /* From here on every claim fails and is counted. */
        atomic_fetch_or(&bus->head, CLOSED_BIT);
    }
    if (atomic_load(&bus->running)) {
        /* Same handshake as a publisher: store, then read sleeping. */
        atomic_store(&bus->stop_req, true);
        if (atomic_exchange(&bus->sleeping, AWAKE) != AWAKE)
            futex_wake_one(&bus->sleeping);
        pthread_join(bus->thread, NULL);
        atomic_store(&bus->running, false);
    }
    if (bus->enabled)
        drain_final(bus); /* even if the bus was never started */
    pthread_mutex_unlock(&bus->life_mu);

    /* Subscribers' shutdown, once, in registration order, outside the
     * locks so that a shutdown may call back into the bus. */
    pthread_mutex_lock(&bus->sub_mu);
    size_t n = bus->n_subscribers;
    subscriber_entry subs[MAX_SUBSCRIBERS];
    memcpy(subs, bus->subscribers, n * sizeof(subs[0]));
    pthread_mutex_unlock(&bus->sub_mu);
    for (size_t i = 0; i < n; i++)
        if (subs[i].shutdown != NULL)
            subs[i].shutdown(subs[i].ud);
}

/* ---------------------------------------------------------------------- */
/* Counters                                                               */
/* ---------------------------------------------------------------------- */

uint64_t lmc_event_bus_dropped(const lmc_event_bus *bus)
{
    return atomic_load_explicit(&bus->dropped, memory_order_relaxed);
}

size_t lmc_event_bus_queued(const lmc_event_bus *bus)
{
    if (!bus->enabled)
        return 0;
    /* Tail first (acquire): the head read after it is then at least as new
     * as every claim the tail covers, so the difference is never negative. */
    uint64_t t = atomic_load_explicit(&bus->tail, memory_order_acquire);
    uint64_t h = atomic_load_explicit(&bus->head, memory_order_relaxed);
    return (size_t)((word_seq(h) - word_seq(t)) & SEQ_MASK);
}

uint64_t lmc_event_bus_delivered(const lmc_event_bus *bus)
{
    return atomic_load_explicit(&bus->delivered, memory_order_acquire);
}

bool lmc_event_bus_running(const lmc_event_bus *bus)
{
    return atomic_load(&bus->running);
}

size_t lmc_event_bus_ring_bytes(const lmc_event_bus *bus)
{
    return bus->ring_bytes;
}

void lmc_event_bus_set_idle_hook(lmc_event_bus *bus, void (*hook)(void *ud), void *ud)
{
    atomic_store(&bus->idle_ud, ud);
    atomic_store(&bus->idle_hook, hook);
}
