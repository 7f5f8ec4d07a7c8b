/*
 * test_event_bus.c -- the event bus, one behaviour per test
 * (spec/trace-format.md sections 4 and 9, test_event_bus.py).
 *
 * Events are recorded by a thread-safe recorder (a mutex and a condition
 * variable), and every wait is bounded by WAIT_MS. Tests that need exact
 * queue contents use an unstarted bus: nothing drains it until stop. The
 * "bad callback is isolated" tests of LMCache have no C counterpart (a C
 * callback cannot throw), so they are not reproduced.
 */
/* cmocka.h needs these headers first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "helpers/thread_test_util.h"
#include "obs/event_bus.h"

#define WAIT_MS 3000
#define MAX_RECORDS 4096
#define TYPE_A LMC_EVENT_TRACE_CALL
#define TYPE_B 2u
/* Most tests need no 32 MiB default ring (slow to map under sanitizers). */
#define SMALL_RING (64u * 1024u)

/* ---------------------------------------------------------------------- */
/* A thread-safe event recorder                                           */
/* ---------------------------------------------------------------------- */

typedef struct record {
    int tag; /* which callback saw it */
    uint32_t type;
    double timestamp;
    uint64_t mono_ns;
    size_t len;
    unsigned char *bytes;
    uintptr_t addr; /* where the payload was */
    char thread_name[16];
} record;

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t n;
    record recs[MAX_RECORDS];
} recorder;

/* One callback's identity: the recorder it writes to and its tag. */
typedef struct tap {
    recorder *rec;
    int tag;
} tap;

static recorder *recorder_new(void)
{
    recorder *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    return r;
}

static void recorder_free(recorder *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->recs[i].bytes);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static void record_cb(const lmc_event *ev, void *ud)
{
    tap *t = ud;
    recorder *r = t->rec;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_RECORDS) {
        record *x = &r->recs[r->n++];
        x->tag = t->tag;
        x->type = ev->type;
        x->timestamp = ev->timestamp;
        x->mono_ns = ev->mono_ns;
        x->len = ev->len;
        x->addr = (uintptr_t)ev->payload;
        x->bytes = malloc(ev->len ? ev->len : 1);
        if (ev->len)
            memcpy(x->bytes, ev->payload, ev->len);
        pthread_getname_np(pthread_self(), x->thread_name, sizeof(x->thread_name));
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Wait until the recorder holds at least n records; returns how many it holds. */
static size_t recorder_wait(recorder *r, size_t n)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&r->mu);
    while (r->n < n) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &deadline) != 0)
            break;
    }
    size_t got = r->n;
    pthread_mutex_unlock(&r->mu);
    return got;
}

static size_t recorder_count(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Wait until the bus counts n deliveries (its slots are then free again). */
static uint64_t wait_delivered(const lmc_event_bus *bus, uint64_t n)
{
    uint64_t deadline = lmc_mono_ns() + (uint64_t)WAIT_MS * 1000000u;
    uint64_t d;
    while ((d = lmc_event_bus_delivered(bus)) < n && lmc_mono_ns() < deadline)
        lmc_sleep_ns(100000);
    return d;
}

/* An event payload carrying one integer. */
static bool publish_int(lmc_event_bus *bus, uint32_t type, uint32_t v)
{
    return lmc_event_bus_publish(bus, type, &v, sizeof(v));
}

static uint32_t rec_int(const record *x)
{
    uint32_t v;
    assert_int_equal(x->len, sizeof(v));
    memcpy(&v, x->bytes, sizeof(v));
    return v;
}

static lmc_event_bus *bus_new_prefetch(bool enabled, size_t max_queue, size_t ring_bytes,
                                       lmc_event_bus_prefetch prefetch)
{
    lmc_event_bus_config cfg = {.enabled = enabled,
                                .max_queue_size = max_queue,
                                .ring_bytes = ring_bytes,
                                .prefetch = prefetch};
    lmc_event_bus *bus = NULL;
    lmc_error err;
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_OK);
    assert_non_null(bus);
    return bus;
}

static lmc_event_bus *bus_new(bool enabled, size_t max_queue, size_t ring_bytes)
{
    return bus_new_prefetch(enabled, max_queue, ring_bytes, LMC_EVENT_BUS_PREFETCH_AUTO);
}

/* Deterministic bytes for event i. */
static void fill_pattern(unsigned char *p, size_t len, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (unsigned char)(x >> 16);
    }
}

/* ---------------------------------------------------------------------- */
/* Log capture                                                            */
/* ---------------------------------------------------------------------- */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[16][256];
static size_t g_log_n;

static void capture_sink(lmc_log_level level, const char *component, const char *msg, void *ud)
{
    (void)ud;
    pthread_mutex_lock(&g_log_mu);
    if (g_log_n < 16)
        snprintf(g_log[g_log_n++], sizeof(g_log[0]), "%s %s %s", lmc_log_level_name(level),
                 component, msg);
    pthread_mutex_unlock(&g_log_mu);
}

static void capture_start(void)
{
    pthread_mutex_lock(&g_log_mu);
    g_log_n = 0;
    pthread_mutex_unlock(&g_log_mu);
    lmc_log_set_sink(capture_sink, NULL);
}

static void capture_stop(void)
{
    lmc_log_set_sink(NULL, NULL);
}

/* Messages captured that contain s. */
static size_t captured(const char *s)
{
    size_t n = 0;
    pthread_mutex_lock(&g_log_mu);
    for (size_t i = 0; i < g_log_n; i++)
        if (strstr(g_log[i], s) != NULL)
            n++;
    pthread_mutex_unlock(&g_log_mu);
    return n;
}

/* ---------------------------------------------------------------------- */
/* Subscribing and delivery                                               */
/* ---------------------------------------------------------------------- */

static void test_subscribe_delivers_published_event(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    assert_true(publish_int(bus, TYPE_A, 42));
    assert_int_equal(recorder_wait(rec, 1), 1);
    assert_int_equal(rec->recs[0].type, TYPE_A);
    assert_int_equal(rec_int(&rec->recs[0]), 42);

    lmc_event_bus_destroy(bus);
    assert_int_equal(recorder_count(rec), 1);
    recorder_free(rec);
}

static void test_callbacks_for_a_type_run_in_registration_order(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t[3] = {{rec, 1}, {rec, 2}, {rec, 3}};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    for (int i = 0; i < 3; i++)
        assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t[i]), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    assert_true(publish_int(bus, TYPE_A, 7));
    assert_true(publish_int(bus, TYPE_A, 8));
    assert_int_equal(recorder_wait(rec, 6), 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(rec->recs[i].tag, i % 3 + 1);
        assert_int_equal(rec_int(&rec->recs[i]), i < 3 ? 7 : 8);
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_multiple_subscribers_all_receive(void **state)
{
    (void)state;
    recorder *r1 = recorder_new();
    recorder *r2 = recorder_new();
    tap t1 = {r1, 1}, t2 = {r2, 2};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    lmc_event_subscription s1[] = {{TYPE_A, record_cb}};
    lmc_event_subscription s2[] = {{TYPE_A, record_cb}};
    lmc_event_subscriber sub1 = {.subs = s1, .n_subs = 1, .ud = &t1};
    lmc_event_subscriber sub2 = {.subs = s2, .n_subs = 1, .ud = &t2};
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &sub1), LMC_OK);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &sub2), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    for (uint32_t i = 0; i < 10; i++)
        assert_true(publish_int(bus, TYPE_A, i));
    assert_int_equal(recorder_wait(r1, 10), 10);
    assert_int_equal(recorder_wait(r2, 10), 10);
    for (uint32_t i = 0; i < 10; i++) {
        assert_int_equal(rec_int(&r1->recs[i]), i);
        assert_int_equal(rec_int(&r2->recs[i]), i);
    }
    lmc_event_bus_destroy(bus);
    recorder_free(r1);
    recorder_free(r2);
}

static void test_register_subscriber_subscribes_each_entry(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 5};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    lmc_event_subscription subs[] = {{TYPE_A, record_cb}, {TYPE_B, record_cb}};
    lmc_event_subscriber sub = {.subs = subs, .n_subs = 2, .ud = &t};
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &sub), LMC_OK);

    assert_true(publish_int(bus, TYPE_B, 2));
    assert_true(publish_int(bus, TYPE_A, 1));
    assert_true(publish_int(bus, 3, 3)); /* nobody listens to type 3 */
    lmc_event_bus_stop(bus);

    assert_int_equal(recorder_count(rec), 2);
    assert_int_equal(rec->recs[0].type, TYPE_B);
    assert_int_equal(rec->recs[0].tag, 5);
    assert_int_equal(rec->recs[1].type, TYPE_A);
    assert_int_equal(lmc_event_bus_delivered(bus), 3);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_register_subscriber_is_all_or_nothing(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    for (int i = 0; i < 15; i++)
        assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_B, record_cb, &t), LMC_OK);
    /* Type A has room, type B has room for one more, not two. */
    lmc_event_subscription subs[] = {{TYPE_A, record_cb}, {TYPE_B, record_cb}, {TYPE_B, record_cb}};
    lmc_event_subscriber sub = {.subs = subs, .n_subs = 3, .ud = &t};
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &sub), LMC_ERR_BUSY);

    assert_true(publish_int(bus, TYPE_A, 1));
    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 0); /* the type A entry was not added */
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_subscribe_rejects_bad_arguments_and_a_full_table(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, NULL, NULL), LMC_ERR_INVALID);
    assert_int_equal(lmc_event_bus_subscribe(bus, LMC_EVENT_TYPE_MAX, record_cb, &t),
                     LMC_ERR_INVALID);
    for (int i = 0; i < 16; i++)
        assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_ERR_BUSY);

    lmc_event_subscription bad[] = {{TYPE_B, NULL}};
    lmc_event_subscriber sub = {.subs = bad, .n_subs = 1};
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &sub), LMC_ERR_INVALID);
    lmc_event_subscriber none = {.subs = NULL, .n_subs = 1};
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &none), LMC_ERR_INVALID);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_late_subscriber_receives_later_events(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap early = {rec, 1}, late = {rec, 2};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &early), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_true(publish_int(bus, TYPE_A, 1));
    assert_int_equal(recorder_wait(rec, 1), 1);

    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &late), LMC_OK);
    assert_true(publish_int(bus, TYPE_A, 2));
    assert_int_equal(recorder_wait(rec, 3), 3);
    assert_int_equal(rec->recs[1].tag, 1);
    assert_int_equal(rec->recs[2].tag, 2);
    assert_int_equal(rec_int(&rec->recs[2]), 2);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_dispatch_is_in_publication_order_and_by_type(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap ta = {rec, 'A'}, tb = {rec, 'B'};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &ta), LMC_OK);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_B, record_cb, &tb), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    const uint32_t types[] = {TYPE_A, TYPE_B, TYPE_A, TYPE_B, TYPE_B, TYPE_A, TYPE_A};
    const size_t n = sizeof(types) / sizeof(types[0]);
    for (uint32_t i = 0; i < n; i++)
        assert_true(publish_int(bus, types[i], i));
    assert_int_equal(recorder_wait(rec, n), n);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(rec_int(&rec->recs[i]), i);
        assert_int_equal(rec->recs[i].type, types[i]);
        assert_int_equal(rec->recs[i].tag, types[i] == TYPE_A ? 'A' : 'B');
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_timestamp_lies_between_wall_clock_before_and_after(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    double before = lmc_wall_s();
    assert_true(publish_int(bus, TYPE_A, 1));
    double after = lmc_wall_s();
    assert_int_equal(recorder_wait(rec, 1), 1);
    assert_true(rec->recs[0].timestamp >= before);
    assert_true(rec->recs[0].timestamp <= after);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_reserve_mono_derives_the_timestamp_from_the_monotonic_sample(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    double before = lmc_wall_s();
    uint64_t now = lmc_mono_ns();
    lmc_event_reservation r;
    int v = 1;
    assert_true(lmc_event_bus_reserve_mono(bus, TYPE_A, sizeof(v), now, &r));
    lmc_event_bus_write(&r, &v, sizeof(v));
    lmc_event_bus_commit(&r);
    /* A sample 1.5 s later (as if taken then) is stamped 1.5 s later. */
    assert_true(lmc_event_bus_reserve_mono(bus, TYPE_A, sizeof(v), now + 1500000000ull, &r));
    lmc_event_bus_write(&r, &v, sizeof(v));
    lmc_event_bus_commit(&r);
    double after = lmc_wall_s();
    assert_int_equal(recorder_wait(rec, 2), 2);
    /* Equal to a wall-clock read at `now` up to the skew of the bus's clock
     * pair (microseconds) and any clock adjustment since create. */
    assert_true(rec->recs[0].timestamp >= before - 0.005);
    assert_true(rec->recs[0].timestamp <= after + 0.005);
    assert_true(fabs(rec->recs[1].timestamp - rec->recs[0].timestamp - 1.5) < 1e-6);
    assert_true(fabs(lmc_event_bus_wall_from_mono(bus, now) - rec->recs[0].timestamp) < 1e-9);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

/*
 * reserve_now on a bus with and without the TSC: each stamp, as delivered,
 * lies between CLOCK_MONOTONIC reads taken before and after the reserve
 * (up to the TSC calibration's error, microseconds at the very worst),
 * the wall-clock timestamp is derived from it as reserve_mono derives it,
 * and the stamps of one thread keep their order, over ~0.3 s in which the
 * drain thread recalibrates several times.
 */
static void check_reserve_now_stamps(bool no_tsc)
{
    enum { N = 60 };
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus_config cfg = {.enabled = true, .ring_bytes = SMALL_RING, .no_tsc = no_tsc};
    lmc_event_bus *bus = NULL;
    lmc_error err;
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_OK);
    if (no_tsc)
        assert_false(lmc_event_bus_uses_tsc(bus));
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    uint64_t before[N], after[N];
    for (int i = 0; i < N; i++) {
        lmc_event_reservation r;
        before[i] = lmc_mono_ns();
        assert_true(lmc_event_bus_reserve_now(bus, TYPE_A, sizeof(i), &r));
        after[i] = lmc_mono_ns();
        lmc_event_bus_write(&r, &i, sizeof(i));
        lmc_event_bus_commit(&r);
        lmc_sleep_ns(5000000);
    }
    assert_int_equal(recorder_wait(rec, N), N);
    uint64_t slack = lmc_event_bus_uses_tsc(bus) ? 20000 : 0;
    for (int i = 0; i < N; i++) {
        const record *x = &rec->recs[i];
        assert_true(x->mono_ns + slack >= before[i]);
        assert_true(x->mono_ns <= after[i] + slack);
        assert_true(fabs(x->timestamp - lmc_event_bus_wall_from_mono(bus, x->mono_ns)) < 1e-9);
        if (i > 0)
            assert_true(x->mono_ns > rec->recs[i - 1].mono_ns);
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_reserve_now_stamps_with_the_tsc_where_usable(void **state)
{
    (void)state;
    check_reserve_now_stamps(false);
}

static void test_reserve_now_stamps_with_the_monotonic_clock_without_the_tsc(void **state)
{
    (void)state;
    check_reserve_now_stamps(true);
}

static void test_empty_payload_is_delivered(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_true(lmc_event_bus_publish(bus, TYPE_A, NULL, 0));
    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 1);
    assert_int_equal(rec->recs[0].len, 0);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

/* ---------------------------------------------------------------------- */
/* Payloads                                                               */
/* ---------------------------------------------------------------------- */

/* Publish events of the given sizes one at a time, waiting for each, and
 * check every payload byte for byte (and its 16-byte alignment). */
static void check_round_trip(const size_t *sizes, size_t n, size_t ring_bytes,
                             lmc_event_bus_prefetch prefetch)
{
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new_prefetch(true, 64, ring_bytes, prefetch);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = malloc(sizes[i] + 1);
        fill_pattern(p, sizes[i], (uint32_t)i);
        assert_true(lmc_event_bus_publish(bus, TYPE_A, p, sizes[i]));
        assert_int_equal(wait_delivered(bus, i + 1), i + 1);
        assert_int_equal(recorder_count(rec), i + 1);
        const record *x = &rec->recs[i];
        assert_int_equal(x->len, sizes[i]);
        assert_memory_equal(x->bytes, p, sizes[i]);
        assert_int_equal(x->addr % 16, 0);
        free(p);
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_payload_preserved_byte_for_byte(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 7, 48, 49, 63, 64, 65, 333, 2300, 4095, 10001};
    check_round_trip(sizes, sizeof(sizes) / sizeof(sizes[0]), 0, LMC_EVENT_BUS_PREFETCH_AUTO);
}

static void test_payload_that_wraps_around_the_ring_end_is_preserved(void **state)
{
    (void)state;
    /* A 4096-byte ring has 64 slots. 4016 bytes fill slots 0..62 exactly,
     * so the next event's header is the last slot and all but 48 bytes of
     * its payload wrap to the start; the odd sizes after that wrap at
     * every kind of offset. */
    size_t sizes[64] = {4016, 1000, 3000, 2000};
    for (size_t i = 4; i < 64; i++)
        sizes[i] = 1 + (i * 977) % 4079;
    check_round_trip(sizes, 64, 4096, LMC_EVENT_BUS_PREFETCH_AUTO);
}

/* The prefetch is a hint: forced on or off, the same events arrive with the
 * same bytes, wrapping included (the prefetch past the ring end wraps too). */
static void test_payload_is_the_same_with_the_prefetch_forced_on_or_off(void **state)
{
    (void)state;
    size_t sizes[64];
    for (size_t i = 0; i < 64; i++)
        sizes[i] = 1 + (i * 977) % 4079;
    check_round_trip(sizes, 64, 4096, LMC_EVENT_BUS_PREFETCH_ON);
    check_round_trip(sizes, 64, 4096, LMC_EVENT_BUS_PREFETCH_OFF);
}

/* Whether /proc/cpuinfo names Intel as the vendor (x86 only; -1: unknown). */
static int cpuinfo_says_intel(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return -1;
    char line[256];
    int intel = -1;
    while (intel < 0 && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "vendor_id", 9) == 0)
            intel = strstr(line, "GenuineIntel") != NULL;
    fclose(f);
    return intel;
}

/* ON and OFF are what they say; AUTO is on except on Intel x86-64, where
 * the prefetch was measured to cost the caller (event_bus.c, the top). */
static void test_prefetch_choice_follows_the_config_and_the_cpu(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new_prefetch(true, 16, 4096, LMC_EVENT_BUS_PREFETCH_ON);
    assert_true(lmc_event_bus_prefetches(bus));
    lmc_event_bus_destroy(bus);
    bus = bus_new_prefetch(true, 16, 4096, LMC_EVENT_BUS_PREFETCH_OFF);
    assert_false(lmc_event_bus_prefetches(bus));
    lmc_event_bus_destroy(bus);
    bus = bus_new(true, 16, 4096);
#if defined(__x86_64__)
    int intel = cpuinfo_says_intel();
    if (intel >= 0)
        assert_int_equal(lmc_event_bus_prefetches(bus), !intel);
#else
    assert_true(lmc_event_bus_prefetches(bus));
#endif
    lmc_event_bus_destroy(bus);
}

static void test_event_filling_the_whole_ring_is_delivered(void **state)
{
    (void)state;
    const size_t sizes[] = {100, 4096 - 16, 5, 4096 - 16};
    check_round_trip(sizes, 4, 4096, LMC_EVENT_BUS_PREFETCH_AUTO);
}

static void test_reserve_write_commit_round_trip(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_B, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    unsigned char whole[3001];
    fill_pattern(whole, sizeof(whole), 99);
    /* Three rounds so that one reservation crosses the ring end. */
    for (int round = 0; round < 3; round++) {
        lmc_event_reservation r;
        assert_true(lmc_event_bus_reserve(bus, TYPE_B, sizeof(whole), &r));
        lmc_event_bus_write(&r, whole, 10);
        lmc_event_bus_write(&r, whole + 10, 0);
        lmc_event_bus_write(&r, whole + 10, 1991);
        lmc_event_bus_write(&r, whole + 2001, 1000);
        assert_int_equal(r.written, sizeof(whole));
        lmc_event_bus_commit(&r);
        assert_int_equal(wait_delivered(bus, (uint64_t)round + 1), (uint64_t)round + 1);
        assert_int_equal(recorder_count(rec), (size_t)round + 1);
        assert_int_equal(rec->recs[round].type, TYPE_B);
        assert_int_equal(rec->recs[round].len, sizeof(whole));
        assert_memory_equal(rec->recs[round].bytes, whole, sizeof(whole));
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_span_is_the_payload_unless_it_wraps(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_B, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    unsigned char whole[3001];
    fill_pattern(whole, sizeof(whole), 7);
    /* 48 slots each in a ring of 64: the first fits, the next two wrap. */
    int wrapped = 0;
    for (int round = 0; round < 3; round++) {
        lmc_event_reservation r;
        assert_true(lmc_event_bus_reserve(bus, TYPE_B, sizeof(whole), &r));
        unsigned char *p = lmc_event_bus_span(&r);
        if (p != NULL) {
            assert_int_equal((uintptr_t)p % 16, 0);
            memcpy(p, whole, sizeof(whole));
            r.written = sizeof(whole);
        } else {
            wrapped++;
            lmc_event_bus_write(&r, whole, sizeof(whole));
        }
        lmc_event_bus_commit(&r);
        assert_int_equal(wait_delivered(bus, (uint64_t)round + 1), (uint64_t)round + 1);
        assert_memory_equal(rec->recs[round].bytes, whole, sizeof(whole));
    }
    assert_int_equal(wrapped, 2);
    lmc_event_reservation failed;
    assert_false(lmc_event_bus_reserve(bus, TYPE_B, 5000, &failed)); /* larger than the ring */
    assert_null(lmc_event_bus_span(&failed));
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_commit_delivers_unwritten_bytes_as_zeros(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);

    /* Dirty the ring first, then reuse it after a drain. */
    unsigned char junk[1000];
    memset(junk, 0xAB, sizeof(junk));
    assert_true(lmc_event_bus_publish(bus, TYPE_A, junk, sizeof(junk)));
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_int_equal(recorder_wait(rec, 1), 1);

    for (int i = 0; i < 4; i++) { /* go round the ring so slot 0 comes back */
        lmc_event_reservation r;
        assert_true(lmc_event_bus_reserve(bus, TYPE_A, 1000, &r));
        lmc_event_bus_write(&r, "abc", 3);
        lmc_event_bus_commit(&r);
        assert_int_equal(wait_delivered(bus, (uint64_t)i + 2), (uint64_t)i + 2);
        assert_int_equal(recorder_count(rec), (size_t)i + 2);
        const record *x = &rec->recs[i + 1];
        assert_int_equal(x->len, 1000);
        assert_memory_equal(x->bytes, "abc", 3);
        for (size_t j = 3; j < 1000; j++)
            assert_int_equal(x->bytes[j], 0);
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_write_beyond_the_reservation_is_ignored(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    lmc_event_reservation r1, r2;
    assert_true(lmc_event_bus_reserve(bus, TYPE_A, 4, &r1));
    assert_true(lmc_event_bus_reserve(bus, TYPE_A, 4, &r2));
    lmc_event_bus_write(&r2, "wxyz", 4);
    lmc_event_bus_write(&r1, "abcdefgh", 8); /* only "abcd" fits */
    lmc_event_bus_commit(&r1);
    lmc_event_bus_commit(&r2);
    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 2);
    assert_memory_equal(rec->recs[0].bytes, "abcd", 4);
    assert_memory_equal(rec->recs[1].bytes, "wxyz", 4);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_commit_order_does_not_change_publication_order(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 0);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    uint32_t one = 1, two = 2;
    lmc_event_reservation r1, r2;
    assert_true(lmc_event_bus_reserve(bus, TYPE_A, sizeof(one), &r1));
    assert_true(lmc_event_bus_reserve(bus, TYPE_A, sizeof(two), &r2));
    lmc_event_bus_write(&r2, &two, sizeof(two));
    lmc_event_bus_commit(&r2);
    lmc_sleep_ns(20 * 1000 * 1000); /* the drain thread must wait for r1 */
    assert_int_equal(recorder_count(rec), 0);
    lmc_event_bus_write(&r1, &one, sizeof(one));
    lmc_event_bus_commit(&r1);
    assert_int_equal(recorder_wait(rec, 2), 2);
    assert_int_equal(rec_int(&rec->recs[0]), 1);
    assert_int_equal(rec_int(&rec->recs[1]), 2);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

/* Publish n events of len bytes one at a time, waiting for each; return
 * how many distinct payload addresses the subscriber saw. */
static size_t distinct_addresses(size_t n, size_t len)
{
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 64, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    unsigned char *p = calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        assert_true(lmc_event_bus_publish(bus, TYPE_A, p, len));
        assert_int_equal(wait_delivered(bus, i + 1), i + 1);
    }
    free(p);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = rec->recs[j].addr == rec->recs[i].addr;
        distinct += !seen;
    }
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
    return distinct;
}

static void test_events_go_round_the_whole_ring(void **state)
{
    (void)state;
    /* 1000 bytes take 16 slots: even with the queue empty before each
     * event, the events walk all four 16-slot places of the 64-slot ring
     * in turn (an earlier version restarted at the front each time). */
    assert_int_equal(distinct_addresses(8, 1000), 4);
}

/* ---------------------------------------------------------------------- */
/* Lifecycle and threads                                                  */
/* ---------------------------------------------------------------------- */

static void test_start_runs_callbacks_on_a_thread_named_EventBus(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(thread_test_settle("EventBus", NULL, 0), 0);
    assert_false(lmc_event_bus_running(bus));

    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_true(lmc_event_bus_running(bus));
    assert_int_equal(thread_test_settle("EventBus", NULL, 1), 1);
    assert_true(publish_int(bus, TYPE_A, 1));
    assert_int_equal(recorder_wait(rec, 1), 1);
    assert_string_equal(rec->recs[0].thread_name, "EventBus");

    lmc_event_bus_stop(bus);
    assert_false(lmc_event_bus_running(bus));
    assert_int_equal(thread_test_settle("EventBus", NULL, 0), 0);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_double_start_is_idempotent(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_true(lmc_event_bus_running(bus));
    assert_int_equal(thread_test_settle("EventBus", NULL, 1), 1);
    lmc_event_bus_destroy(bus);
    assert_int_equal(thread_test_settle("EventBus", NULL, 0), 0);
}

static void test_double_stop_and_stop_without_start_are_safe(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    lmc_event_bus_stop(bus); /* never started */
    lmc_event_bus_stop(bus);
    assert_false(lmc_event_bus_running(bus));
    lmc_event_bus_destroy(bus);

    bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    lmc_event_bus_stop(bus);
    lmc_event_bus_stop(bus);
    assert_false(lmc_event_bus_running(bus));
    lmc_event_bus_destroy(bus); /* calls stop a third time */
}

static void test_sleeping_drain_thread_is_woken_by_the_next_event(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    /* After an idle spell the thread sleeps for up to 100 ms at a time; a
     * publisher must wake it. Were the wake-up lost, each delivery would
     * wait for the timeout, about 50 ms on average. */
    uint64_t total_ns = 0;
    for (uint32_t i = 0; i < 5; i++) {
        lmc_sleep_ns(150u * 1000 * 1000);
        uint64_t t0 = lmc_mono_ns();
        assert_true(publish_int(bus, TYPE_A, i));
        assert_int_equal(recorder_wait(rec, i + 1), i + 1);
        total_ns += lmc_mono_ns() - t0;
    }
    assert_true(total_ns < 100u * 1000 * 1000);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_stop_gives_up_on_a_reservation_never_committed(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    capture_start();
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_true(publish_int(bus, TYPE_A, 1));
    lmc_event_reservation r;
    assert_true(lmc_event_bus_reserve(bus, TYPE_A, 4, &r)); /* never committed */
    assert_true(publish_int(bus, TYPE_A, 3));

    uint64_t t0 = lmc_mono_ns();
    lmc_event_bus_stop(bus); /* waits 2 s for the commit, then gives up */
    uint64_t waited_ms = (lmc_mono_ns() - t0) / 1000000u;
    assert_true(waited_ms >= 1900 && waited_ms < 4000);
    assert_int_equal(recorder_count(rec), 1);
    assert_int_equal(rec_int(&rec->recs[0]), 1);
    assert_int_equal(lmc_event_bus_delivered(bus), 1);
    assert_int_equal(lmc_event_bus_dropped(bus), 2); /* the reservation and what followed */
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    assert_int_equal(captured("2 event(s) discarded"), 1);
    capture_stop();
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_start_after_stop_returns_closed(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    lmc_event_bus_stop(bus);
    assert_int_equal(lmc_event_bus_start(bus), LMC_ERR_CLOSED);
    assert_false(lmc_event_bus_running(bus));
    assert_int_equal(thread_test_settle("EventBus", NULL, 0), 0);
    lmc_event_bus_destroy(bus);
}

static void test_disabled_bus_starts_no_thread_and_drops_without_counting(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(false, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_false(lmc_event_bus_running(bus));
    assert_int_equal(thread_test_settle("EventBus", NULL, 0), 0);

    assert_false(publish_int(bus, TYPE_A, 1));
    lmc_event_reservation r;
    assert_false(lmc_event_bus_reserve(bus, TYPE_A, 8, &r));
    lmc_event_bus_write(&r, "12345678", 8); /* no-ops on a failed reservation */
    lmc_event_bus_commit(&r);
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    /* LMCache's disabled publish does nothing at all: no discard count. */
    assert_int_equal(lmc_event_bus_dropped(bus), 0);
    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 0);
    assert_int_equal(lmc_event_bus_delivered(bus), 0);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_events_published_before_start_are_delivered_after_start(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    for (uint32_t i = 0; i < 3; i++)
        assert_true(publish_int(bus, TYPE_A, i));
    assert_int_equal(lmc_event_bus_queued(bus), 3);
    assert_int_equal(recorder_count(rec), 0);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_int_equal(recorder_wait(rec, 3), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(rec_int(&rec->recs[i]), i);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_stop_drains_an_unstarted_queue(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    for (uint32_t i = 0; i < 100; i++)
        assert_true(publish_int(bus, TYPE_A, i));
    assert_int_equal(lmc_event_bus_queued(bus), 100);

    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 100);
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(rec_int(&rec->recs[i]), i);
        /* The final drain runs on the caller's thread. */
        assert_string_not_equal(rec->recs[i].thread_name, "EventBus");
    }
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    assert_int_equal(lmc_event_bus_delivered(bus), 100);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

/* Shutdown callbacks append their id here. */
typedef struct shutdown_log {
    int ids[8];
    int n;
} shutdown_log;

typedef struct shutdown_ud {
    shutdown_log *log;
    int id;
} shutdown_ud;

static void on_shutdown(void *ud)
{
    shutdown_ud *s = ud;
    s->log->ids[s->log->n++] = s->id;
}

static void ignore_cb(const lmc_event *ev, void *ud)
{
    (void)ev;
    (void)ud;
}

static void test_subscriber_shutdown_called_once_in_order_on_stop(void **state)
{
    (void)state;
    shutdown_log log = {{0}, 0};
    shutdown_ud u1 = {&log, 1}, u2 = {&log, 2}, u3 = {&log, 3};
    lmc_event_subscription subs[] = {{TYPE_A, ignore_cb}};
    lmc_event_subscriber s1 = {.subs = subs, .n_subs = 1, .shutdown = on_shutdown, .ud = &u1};
    lmc_event_subscriber s2 = {.subs = subs, .n_subs = 1, .shutdown = NULL, .ud = &u2};
    lmc_event_subscriber s3 = {.subs = NULL, .n_subs = 0, .shutdown = on_shutdown, .ud = &u3};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s1), LMC_OK);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s2), LMC_OK);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s3), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);

    lmc_event_bus_stop(bus);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.ids[0], 1);
    assert_int_equal(log.ids[1], 3);
    lmc_event_bus_stop(bus);
    lmc_event_bus_destroy(bus);
    assert_int_equal(log.n, 2);
}

static void test_destroy_without_stop_shuts_subscribers_down(void **state)
{
    (void)state;
    shutdown_log log = {{0}, 0};
    shutdown_ud u = {&log, 7};
    lmc_event_subscriber s = {.subs = NULL, .n_subs = 0, .shutdown = on_shutdown, .ud = &u};
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    lmc_event_bus_destroy(bus);
    assert_int_equal(log.n, 1);
    assert_int_equal(log.ids[0], 7);
}

static void test_disabled_bus_stop_still_shuts_subscribers_down(void **state)
{
    (void)state;
    shutdown_log log = {{0}, 0};
    shutdown_ud u = {&log, 4};
    lmc_event_subscriber s = {.subs = NULL, .n_subs = 0, .shutdown = on_shutdown, .ud = &u};
    lmc_event_bus *bus = bus_new(false, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s), LMC_OK);
    lmc_event_bus_stop(bus);
    assert_int_equal(log.n, 1);
    lmc_event_bus_destroy(bus);
    assert_int_equal(log.n, 1);
}

static void test_register_subscriber_beyond_sixteen_is_busy(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    lmc_event_subscriber s = {.subs = NULL, .n_subs = 0};
    for (int i = 0; i < 16; i++)
        assert_int_equal(lmc_event_bus_register_subscriber(bus, &s), LMC_OK);
    assert_int_equal(lmc_event_bus_register_subscriber(bus, &s), LMC_ERR_BUSY);
    lmc_event_bus_destroy(bus);
}

/* ---------------------------------------------------------------------- */
/* Bounds and drops                                                       */
/* ---------------------------------------------------------------------- */

static void test_full_queue_drops_beyond_max_queue_size(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    capture_start();
    lmc_event_bus *bus = bus_new(true, 5, 0);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    int accepted = 0;
    for (uint32_t i = 0; i < 10; i++)
        accepted += publish_int(bus, TYPE_A, i);
    assert_int_equal(accepted, 5);
    assert_int_equal(lmc_event_bus_queued(bus), 5);
    assert_int_equal(lmc_event_bus_dropped(bus), 5);
    /* One warning for the burst (at most one a second). */
    assert_int_equal(captured("EventBus queue full (max_queue_size=5), 1 event(s) discarded "
                              "so far"),
                     1);
    assert_int_equal(captured("EventBus queue full"), 1);
    capture_stop();

    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 5);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(rec_int(&rec->recs[i]), i); /* the first five were kept */
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_full_ring_drops_by_bytes(void **state)
{
    (void)state;
    capture_start();
    lmc_event_bus *bus = bus_new(true, 100, 4096);
    assert_int_equal(lmc_event_bus_ring_bytes(bus), 4096);
    unsigned char big[2000] = {0};
    /* Each event takes 32 of the 64 slots. */
    assert_true(lmc_event_bus_publish(bus, TYPE_A, big, sizeof(big)));
    assert_true(lmc_event_bus_publish(bus, TYPE_A, big, sizeof(big)));
    assert_false(lmc_event_bus_publish(bus, TYPE_A, big, sizeof(big)));
    assert_false(lmc_event_bus_publish(bus, TYPE_A, NULL, 0)); /* not even one slot */
    assert_int_equal(lmc_event_bus_queued(bus), 2);
    assert_int_equal(lmc_event_bus_dropped(bus), 2);
    assert_int_equal(captured("EventBus ring full (4096 bytes), 1 event(s) discarded so far"), 1);
    capture_stop();
    lmc_event_bus_stop(bus);
    assert_int_equal(lmc_event_bus_delivered(bus), 2);
    lmc_event_bus_destroy(bus);
}

static void test_space_is_reused_once_drained(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    lmc_event_bus *bus = bus_new(true, 2, 4096);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    unsigned char big[3000] = {0};
    for (size_t i = 0; i < 50; i++) {
        assert_true(lmc_event_bus_publish(bus, TYPE_A, big, sizeof(big)));
        assert_int_equal(wait_delivered(bus, i + 1), i + 1);
    }
    assert_int_equal(recorder_count(rec), 50);
    assert_int_equal(lmc_event_bus_dropped(bus), 0);
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

static void test_event_larger_than_the_ring_is_dropped(void **state)
{
    (void)state;
    capture_start();
    lmc_event_bus *bus = bus_new(true, 10, 4096);
    unsigned char *p = calloc(1, 8192);
    assert_false(lmc_event_bus_publish(bus, TYPE_A, p, 4096 - 15));
    lmc_event_reservation r;
    assert_false(lmc_event_bus_reserve(bus, TYPE_A, 8192, &r));
    assert_int_equal(lmc_event_bus_dropped(bus), 2);
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    assert_int_equal(captured("does not fit the ring (4096 bytes)"), 1); /* logged once */
    capture_stop();
    /* The largest event that fits still goes through. */
    assert_true(lmc_event_bus_publish(bus, TYPE_A, p, 4096 - 16));
    assert_int_equal(lmc_event_bus_queued(bus), 1);
    free(p);
    lmc_event_bus_destroy(bus);
}

static void test_events_after_stop_are_dropped_and_counted(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    tap t = {rec, 1};
    capture_start();
    lmc_event_bus *bus = bus_new(true, 0, SMALL_RING);
    assert_int_equal(lmc_event_bus_subscribe(bus, TYPE_A, record_cb, &t), LMC_OK);
    assert_int_equal(lmc_event_bus_start(bus), LMC_OK);
    assert_true(publish_int(bus, TYPE_A, 1));
    lmc_event_bus_stop(bus);
    assert_int_equal(recorder_count(rec), 1);

    assert_false(publish_int(bus, TYPE_A, 2));
    lmc_event_reservation r;
    assert_false(lmc_event_bus_reserve(bus, TYPE_A, 4, &r));
    assert_int_equal(lmc_event_bus_dropped(bus), 2);
    assert_int_equal(lmc_event_bus_queued(bus), 0);
    assert_int_equal(recorder_count(rec), 1);
    assert_int_equal(captured("events published after stop are discarded"), 1);
    capture_stop();
    lmc_event_bus_destroy(bus);
    recorder_free(rec);
}

/* ---------------------------------------------------------------------- */
/* Configuration                                                          */
/* ---------------------------------------------------------------------- */

static void test_default_ring_is_sized_from_max_queue_size(void **state)
{
    (void)state;
    lmc_event_bus *bus = bus_new(true, 0, 0); /* 10000 events * 2560 -> 32 MiB */
    assert_int_equal(lmc_event_bus_ring_bytes(bus), (size_t)32 << 20);
    lmc_event_bus_destroy(bus);
    bus = bus_new(true, 5, 0); /* at least 64 KiB */
    assert_int_equal(lmc_event_bus_ring_bytes(bus), (size_t)64 << 10);
    lmc_event_bus_destroy(bus);
    bus = bus_new(true, 5, 5000); /* rounded up to a power of two */
    assert_int_equal(lmc_event_bus_ring_bytes(bus), 8192);
    lmc_event_bus_destroy(bus);

    lmc_event_bus *dflt = NULL;
    assert_int_equal(lmc_event_bus_create(NULL, &dflt, NULL), LMC_OK); /* NULL: enabled */
    assert_true(publish_int(dflt, TYPE_A, 1));
    assert_int_equal(lmc_event_bus_queued(dflt), 1);
    lmc_event_bus_destroy(dflt);
}

static void test_create_rejects_out_of_range_sizes(void **state)
{
    (void)state;
    lmc_event_bus *bus = NULL;
    lmc_error err;
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = ((size_t)1 << 30) + 1};
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_ERR_INVALID);
    assert_null(bus);
    assert_non_null(strstr(err.msg, "max_queue_size 1073741825"));

    cfg.max_queue_size = (size_t)1 << 21; /* a derived ring over 4 GiB */
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "set ring_bytes"));

    cfg.max_queue_size = 10;
    cfg.ring_bytes = ((size_t)1 << 32) + 1;
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "ring_bytes 4294967297"));

    cfg.ring_bytes = 4096;
    cfg.prefetch = (lmc_event_bus_prefetch)3;
    assert_int_equal(lmc_event_bus_create(&cfg, &bus, &err), LMC_ERR_INVALID);
    assert_null(bus);
    assert_non_null(strstr(err.msg, "prefetch 3 is not AUTO, ON or OFF"));
    cfg.prefetch = LMC_EVENT_BUS_PREFETCH_AUTO;

    assert_int_equal(lmc_event_bus_create(&cfg, NULL, &err), LMC_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subscribe_delivers_published_event),
        cmocka_unit_test(test_callbacks_for_a_type_run_in_registration_order),
        cmocka_unit_test(test_multiple_subscribers_all_receive),
        cmocka_unit_test(test_register_subscriber_subscribes_each_entry),
        cmocka_unit_test(test_register_subscriber_is_all_or_nothing),
        cmocka_unit_test(test_subscribe_rejects_bad_arguments_and_a_full_table),
        cmocka_unit_test(test_late_subscriber_receives_later_events),
        cmocka_unit_test(test_dispatch_is_in_publication_order_and_by_type),
        cmocka_unit_test(test_timestamp_lies_between_wall_clock_before_and_after),
        cmocka_unit_test(test_reserve_mono_derives_the_timestamp_from_the_monotonic_sample),
        cmocka_unit_test(test_reserve_now_stamps_with_the_tsc_where_usable),
        cmocka_unit_test(test_reserve_now_stamps_with_the_monotonic_clock_without_the_tsc),
        cmocka_unit_test(test_empty_payload_is_delivered),
        cmocka_unit_test(test_payload_preserved_byte_for_byte),
        cmocka_unit_test(test_payload_that_wraps_around_the_ring_end_is_preserved),
        cmocka_unit_test(test_event_filling_the_whole_ring_is_delivered),
        cmocka_unit_test(test_payload_is_the_same_with_the_prefetch_forced_on_or_off),
        cmocka_unit_test(test_prefetch_choice_follows_the_config_and_the_cpu),
        cmocka_unit_test(test_reserve_write_commit_round_trip),
        cmocka_unit_test(test_span_is_the_payload_unless_it_wraps),
        cmocka_unit_test(test_commit_delivers_unwritten_bytes_as_zeros),
        cmocka_unit_test(test_write_beyond_the_reservation_is_ignored),
        cmocka_unit_test(test_commit_order_does_not_change_publication_order),
        cmocka_unit_test(test_events_go_round_the_whole_ring),
        cmocka_unit_test(test_start_runs_callbacks_on_a_thread_named_EventBus),
        cmocka_unit_test(test_double_start_is_idempotent),
        cmocka_unit_test(test_double_stop_and_stop_without_start_are_safe),
        cmocka_unit_test(test_sleeping_drain_thread_is_woken_by_the_next_event),
        cmocka_unit_test(test_stop_gives_up_on_a_reservation_never_committed),
        cmocka_unit_test(test_start_after_stop_returns_closed),
        cmocka_unit_test(test_disabled_bus_starts_no_thread_and_drops_without_counting),
        cmocka_unit_test(test_events_published_before_start_are_delivered_after_start),
        cmocka_unit_test(test_stop_drains_an_unstarted_queue),
        cmocka_unit_test(test_subscriber_shutdown_called_once_in_order_on_stop),
        cmocka_unit_test(test_destroy_without_stop_shuts_subscribers_down),
        cmocka_unit_test(test_disabled_bus_stop_still_shuts_subscribers_down),
        cmocka_unit_test(test_register_subscriber_beyond_sixteen_is_busy),
        cmocka_unit_test(test_full_queue_drops_beyond_max_queue_size),
        cmocka_unit_test(test_full_ring_drops_by_bytes),
        cmocka_unit_test(test_space_is_reused_once_drained),
        cmocka_unit_test(test_event_larger_than_the_ring_is_dropped),
        cmocka_unit_test(test_events_after_stop_are_dropped_and_counted),
        cmocka_unit_test(test_default_ring_is_sized_from_max_queue_size),
        cmocka_unit_test(test_create_rejects_out_of_range_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
