/*
 * test_event_bus_concurrency.c -- the event bus with concurrent publishers
 * (runs under ThreadSanitizer in CI because of the _concurrency suffix).
 *
 * Four threads publish 10,000 events each. Every payload starts with
 * {thread id, sequence number} and is filled to its variable length
 * (8..2000 bytes) with a pattern derived from both, so the subscriber can
 * check each event whole. Two threads use publish and two use
 * reserve/write/commit in pieces, so both paths race on the same ring.
 * The checks: every accepted event is delivered exactly once, each
 * thread's events arrive in its publication order, payloads are intact,
 * and delivered + dropped equals what was published, exactly, also when
 * the queue bound is small or stop races the publishers.
 *
 * The subscriber runs on the drain thread only (and on the stopping thread
 * after the join), so its state needs no lock; the main thread reads it
 * after stop.
 */
/* cmocka.h needs these headers first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "obs/event_bus.h"

#define NTHREADS 4
#define PER_THREAD 10000u
#define MIN_LEN 8u
#define MAX_LEN 2000u

typedef struct ev_head {
    uint32_t thread;
    uint32_t seq;
} ev_head;

static size_t event_len(uint32_t thread, uint32_t seq)
{
    uint32_t x = (thread + 1) * 2654435761u ^ (seq * 40503u);
    x ^= x >> 13;
    return MIN_LEN + x % (MAX_LEN - MIN_LEN + 1);
}

static unsigned char pattern_byte(uint32_t thread, uint32_t seq, size_t i)
{
    return (unsigned char)(thread * 31u + seq * 7u + (uint32_t)i * 13u);
}

/* What the subscriber saw. */
typedef struct checker {
    uint64_t received[NTHREADS];
    int64_t last_seq[NTHREADS];
    uint64_t bad_order;
    uint64_t bad_payload;
    uint64_t bad_thread;
} checker;

static void check_cb(const lmc_event *ev, void *ud)
{
    checker *c = ud;
    ev_head h;
    if (ev->len < sizeof(h)) {
        c->bad_payload++;
        return;
    }
    memcpy(&h, ev->payload, sizeof(h));
    if (h.thread >= NTHREADS) {
        c->bad_thread++;
        return;
    }
    if ((int64_t)h.seq <= c->last_seq[h.thread])
        c->bad_order++;
    c->last_seq[h.thread] = h.seq;
    c->received[h.thread]++;
    if (ev->len != event_len(h.thread, h.seq)) {
        c->bad_payload++;
        return;
    }
    const unsigned char *p = ev->payload;
    for (size_t i = sizeof(h); i < ev->len; i++) {
        if (p[i] != pattern_byte(h.thread, h.seq, i)) {
            c->bad_payload++;
            return;
        }
    }
}

typedef struct publisher {
    lmc_event_bus *bus;
    uint32_t id;
    bool retry;       /* retry a dropped event until it is accepted */
    bool zero_copy;   /* reserve/write/commit instead of publish */
    _Atomic bool *go; /* start line */
    uint64_t accepted;
    uint64_t rejected;
    unsigned char buf[MAX_LEN];
} publisher;

static bool publish_one(publisher *p, uint32_t seq)
{
    size_t len = event_len(p->id, seq);
    ev_head h = {p->id, seq};
    memcpy(p->buf, &h, sizeof(h));
    for (size_t i = sizeof(h); i < len; i++)
        p->buf[i] = pattern_byte(p->id, seq, i);
    if (!p->zero_copy)
        return lmc_event_bus_publish(p->bus, LMC_EVENT_TRACE_CALL, p->buf, len);
    lmc_event_reservation r;
    if (!lmc_event_bus_reserve(p->bus, LMC_EVENT_TRACE_CALL, len, &r))
        return false;
    /* In three pieces, the way the capture path writes. */
    size_t a = len / 3, b = len / 2;
    lmc_event_bus_write(&r, p->buf, a);
    lmc_event_bus_write(&r, p->buf + a, b - a);
    lmc_event_bus_write(&r, p->buf + b, len - b);
    lmc_event_bus_commit(&r);
    return true;
}

static void *publisher_main(void *arg)
{
    publisher *p = arg;
    while (!atomic_load(p->go))
        sched_yield();
    for (uint32_t seq = 0; seq < PER_THREAD; seq++) {
        for (;;) {
            if (publish_one(p, seq)) {
                p->accepted++;
                break;
            }
            p->rejected++;
            if (!p->retry)
                break;
            sched_yield();
        }
    }
    return NULL;
}

typedef struct run_result {
    uint64_t accepted;
    uint64_t rejected;
    uint64_t accepted_by[NTHREADS];
} run_result;

/* Start the bus, run the publishers to the end, and optionally stop the
 * bus while they run (after stop_after_us microseconds). */
static run_result run_publishers(lmc_event_bus *bus, bool retry, long stop_after_us)
{
    static publisher pubs[NTHREADS];
    pthread_t th[NTHREADS];
    _Atomic bool go = false;
    for (uint32_t i = 0; i < NTHREADS; i++) {
        pubs[i] =
            (publisher){.bus = bus, .id = i, .retry = retry, .zero_copy = (i % 2) == 1, .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, publisher_main, &pubs[i]), 0);
    }
    atomic_store(&go, true);
    if (stop_after_us >= 0) {
        lmc_sleep_ns((uint64_t)stop_after_us * 1000u);
        lmc_event_bus_stop(bus);
    }
    run_result r = {0};
    for (uint32_t i = 0; i < NTHREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        r.accepted += pubs[i].accepted;
        r.rejected += pubs[i].rejected;
        r.accepted_by[i] = pubs[i].accepted;
    }
    lmc_event_bus_stop(bus);
    return r;
}

static lmc_event_bus *bus_with_checker(size_t max_queue, size_t ring_bytes, checker *c)
{
    memset(c, 0, sizeof(*c));
    for (int i = 0; i < NTHREADS; i++)
        c->last_seq[i] = -1;
    lmc_event_bus_config cfg = {
        .enabled = true, .max_queue_size = max_queue, .ring_bytes = ring_bytes};
    lmc_event_bus *bus = NULL;
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, NULL), LMC_OK);
    assert_int_equal(lmc_event_bus_subscribe(bus, LMC_EVENT_TRACE_CALL, check_cb, c), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    return bus;
}

static void assert_checker_clean(const checker *c)
{
    assert_int_equal(c->bad_order, 0);
    assert_int_equal(c->bad_payload, 0);
    assert_int_equal(c->bad_thread, 0);
}

/* Run the publishers with retries and check that every event came through
 * once, in order and intact. */
static void check_all_delivered(size_t max_queue, size_t ring_bytes)
{
    checker c;
    lmc_log_level saved = lmc_log_get_level();
    lmc_log_set_level(LMC_LOG_ERROR); /* ring-full warnings are expected */
    lmc_event_bus *bus = bus_with_checker(max_queue, ring_bytes, &c);
    run_result r = run_publishers(bus, true, -1);
    lmc_log_set_level(saved);

    assert_int_equal(r.accepted, NTHREADS * PER_THREAD);
    assert_checker_clean(&c);
    for (int i = 0; i < NTHREADS; i++) {
        assert_int_equal(c.received[i], PER_THREAD);
        assert_int_equal(c.last_seq[i], PER_THREAD - 1);
    }
    assert_int_equal(lmc_event_bus_delivered(bus), NTHREADS * PER_THREAD);
    assert_int_equal(lmc_event_bus_dropped(bus), r.rejected);
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    lmc_event_bus_destroy(bus);
}

static void test_every_event_is_delivered_once_in_order_and_intact(void **state)
{
    (void)state;
    /* A 1 MiB ring holds about a thousand events: publishers lap it many
     * times and retry whenever it is full. */
    check_all_delivered(1024, 1u << 20);
}

static void test_a_small_ring_lapped_by_racing_claims_loses_nothing(void **state)
{
    (void)state;
    /* A 16 KiB ring holds a handful of events: claims race for the little
     * room there is, every event's slots wrap round soon, and each
     * publisher's prefetch of the slots after its event lands on slots
     * other publishers are claiming or writing. */
    check_all_delivered(64, 16u << 10);
}

static void test_small_queue_accounts_for_every_event_exactly(void **state)
{
    (void)state;
    checker c;
    lmc_log_level saved = lmc_log_get_level();
    lmc_log_set_level(LMC_LOG_ERROR); /* the queue-full warnings are expected */
    lmc_event_bus *bus = bus_with_checker(16, 0, &c);
    run_result r = run_publishers(bus, false, -1);
    lmc_log_set_level(saved);

    assert_int_equal(r.accepted + r.rejected, NTHREADS * PER_THREAD);
    assert_int_equal(lmc_event_bus_delivered(bus), r.accepted);
    assert_int_equal(lmc_event_bus_dropped(bus), r.rejected);
    assert_int_equal(lmc_event_bus_delivered(bus) + lmc_event_bus_dropped(bus),
                     NTHREADS * PER_THREAD);
    assert_checker_clean(&c);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(c.received[i], r.accepted_by[i]);
    lmc_event_bus_destroy(bus);
}

static void test_stop_racing_publishers_loses_no_event_silently(void **state)
{
    (void)state;
    checker c;
    lmc_log_level saved = lmc_log_get_level();
    lmc_log_set_level(LMC_LOG_ERROR);
    lmc_event_bus *bus = bus_with_checker(256, 1u << 20, &c);
    run_result r = run_publishers(bus, false, 2000);
    lmc_log_set_level(saved);

    assert_int_equal(r.accepted + r.rejected, NTHREADS * PER_THREAD);
    assert_int_equal(lmc_event_bus_delivered(bus), r.accepted);
    assert_int_equal(lmc_event_bus_dropped(bus), r.rejected);
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    assert_checker_clean(&c);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(c.received[i], r.accepted_by[i]);
    lmc_event_bus_destroy(bus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_is_delivered_once_in_order_and_intact),
        cmocka_unit_test(test_a_small_ring_lapped_by_racing_claims_loses_nothing),
        cmocka_unit_test(test_small_queue_accounts_for_every_event_exactly),
        cmocka_unit_test(test_stop_racing_publishers_loses_no_event_silently),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
