/*
 * test_batch_pipe_concurrency.c -- the batch pipe (core/batch_pipe.h): a
 * producer hands batches to the worker thread (runs under ThreadSanitizer
 * in CI because of the _concurrency suffix).
 *
 * The checks: every submitted batch is consumed once, in submission order,
 * with its bytes, count and flags intact; a batch comes back empty; no
 * more than depth batches are ever submitted and not consumed (submit
 * waits instead); wait returns only once everything submitted is consumed,
 * and what the worker wrote is then visible to the producer without a
 * lock of its own; destroy consumes what was submitted; an empty batch is
 * not submitted.
 *
 * The consumer state (the `seen` struct) is written by the worker only and
 * read by the test thread after a wait or destroy, which is exactly the
 * ordering the pipe promises; TSan checks it.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/batch_pipe.h"
#include "core/clock.h"

typedef struct seen {
    uint64_t batches;
    uint64_t next;      /* the sequence number expected next */
    uint64_t bad;       /* batches out of order or with damaged bytes */
    uint64_t count_sum; /* of b->count */
    uint32_t flags_or;
    uint64_t delay_ns;      /* per batch, to keep the pipe full */
    _Atomic uint64_t in_fn; /* 1 while fn runs */
} seen;

/* A batch: its sequence number, then n bytes derived from it. */
static void fill(lmc_batch *b, uint64_t seq)
{
    size_t n = 16 + (size_t)(seq * 7919 % 5000);
    msgpack_sbuffer_write(&b->buf, (const char *)&seq, sizeof(seq));
    for (size_t i = 0; i < n; i++) {
        char c = (char)(seq + i);
        msgpack_sbuffer_write(&b->buf, &c, 1);
    }
    b->count = seq + 1;
    b->flags = (uint32_t)(seq & 3);
}

static bool intact(const lmc_batch *b, uint64_t seq)
{
    size_t n = 16 + (size_t)(seq * 7919 % 5000);
    uint64_t got;
    if (b->buf.size != sizeof(got) + n)
        return false;
    memcpy(&got, b->buf.data, sizeof(got));
    if (got != seq || b->count != seq + 1 || b->flags != (uint32_t)(seq & 3))
        return false;
    for (size_t i = 0; i < n; i++)
        if (b->buf.data[sizeof(got) + i] != (char)(seq + i))
            return false;
    return true;
}

static void consume(lmc_batch *b, void *ud)
{
    seen *s = ud;
    atomic_store(&s->in_fn, 1);
    uint64_t seq = 0;
    if (b->buf.size >= sizeof(seq))
        memcpy(&seq, b->buf.data, sizeof(seq));
    if (seq != s->next || !intact(b, seq))
        s->bad++;
    s->next = seq + 1;
    s->batches++;
    s->count_sum += b->count;
    s->flags_or |= b->flags;
    if (s->delay_ns > 0)
        lmc_sleep_ns(s->delay_ns);
    atomic_store(&s->in_fn, 0);
}

static lmc_batch_pipe *make(size_t depth, seen *s)
{
    lmc_batch_pipe *p;
    assert_int_equal(lmc_batch_pipe_create(depth, "test-pipe", consume, s, &p, NULL), LMC_OK);
    return p;
}

static void test_every_batch_is_consumed_once_in_order_and_intact(void **state)
{
    (void)state;
    enum { N = 20000 };
    seen s = {0};
    lmc_batch_pipe *p = make(3, &s);
    uint64_t want_sum = 0;
    for (uint64_t i = 0; i < N; i++) {
        lmc_batch *b = lmc_batch_pipe_current(p);
        assert_int_equal(b->buf.size, 0); /* it comes back empty */
        assert_int_equal(b->count, 0);
        assert_int_equal(b->flags, 0);
        fill(b, i);
        want_sum += i + 1;
        lmc_batch_pipe_submit(p);
    }
    lmc_batch_pipe_wait(p);
    /* After wait, the worker's writes are ours to read. */
    assert_int_equal(s.batches, N);
    assert_int_equal(s.bad, 0);
    assert_int_equal(s.count_sum, want_sum);
    assert_int_equal(s.flags_or, 3);
    assert_int_equal(lmc_batch_pipe_consumed(p), N);
    lmc_batch_pipe_destroy(p);
}

static void test_submit_waits_rather_than_exceed_depth(void **state)
{
    (void)state;
    enum { DEPTH = 2, N = 40 };
    seen s = {.delay_ns = 1000000}; /* a slow worker: the producer runs ahead */
    lmc_batch_pipe *p = make(DEPTH, &s);
    uint64_t max_inflight = 0;
    for (uint64_t i = 0; i < N; i++) {
        fill(lmc_batch_pipe_current(p), i);
        lmc_batch_pipe_submit(p);
        uint64_t inflight = i + 1 - lmc_batch_pipe_consumed(p);
        if (inflight > max_inflight)
            max_inflight = inflight;
    }
    /* Submitted and not consumed: at most depth - 1 once submit returns
     * (the producer holds the depth-th, empty, to fill). */
    assert_true(max_inflight <= DEPTH - 1);
    assert_true(max_inflight >= 1); /* and it did run ahead of the worker */
    lmc_batch_pipe_wait(p);
    assert_int_equal(s.batches, N);
    assert_int_equal(s.bad, 0);
    lmc_batch_pipe_destroy(p);
}

static void test_wait_returns_only_when_everything_is_consumed(void **state)
{
    (void)state;
    seen s = {.delay_ns = 2000000};
    lmc_batch_pipe *p = make(4, &s);
    for (uint64_t i = 0; i < 3; i++) {
        fill(lmc_batch_pipe_current(p), i);
        lmc_batch_pipe_submit(p);
    }
    lmc_batch_pipe_wait(p);
    assert_int_equal(atomic_load(&s.in_fn), 0);
    assert_int_equal(s.batches, 3);
    assert_int_equal(lmc_batch_pipe_consumed(p), 3);
    lmc_batch_pipe_wait(p); /* nothing pending: returns at once */
    lmc_batch_pipe_destroy(p);
}

static void test_an_empty_batch_is_not_submitted(void **state)
{
    (void)state;
    seen s = {0};
    lmc_batch_pipe *p = make(2, &s);
    lmc_batch *b = lmc_batch_pipe_current(p);
    lmc_batch_pipe_submit(p);
    lmc_batch_pipe_wait(p);
    assert_int_equal(s.batches, 0);
    assert_ptr_equal(lmc_batch_pipe_current(p), b); /* still the one to fill */
    lmc_batch_pipe_destroy(p);
}

static void test_destroy_consumes_what_was_submitted_and_drops_the_rest(void **state)
{
    (void)state;
    seen s = {.delay_ns = 1000000};
    lmc_batch_pipe *p = make(4, &s);
    for (uint64_t i = 0; i < 3; i++) {
        fill(lmc_batch_pipe_current(p), i);
        lmc_batch_pipe_submit(p);
    }
    fill(lmc_batch_pipe_current(p), 3); /* filled, never submitted */
    lmc_batch_pipe_destroy(p);
    assert_int_equal(s.batches, 3);
    assert_int_equal(s.bad, 0);
}

static void test_depth_below_two_is_refused(void **state)
{
    (void)state;
    seen s = {0};
    lmc_batch_pipe *p = (lmc_batch_pipe *)1;
    lmc_error err;
    assert_int_equal(lmc_batch_pipe_create(1, "test-pipe", consume, &s, &p, &err), LMC_ERR_INVALID);
    assert_null(p);
    assert_non_null(strstr(err.msg, "depth"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_batch_is_consumed_once_in_order_and_intact),
        cmocka_unit_test(test_submit_waits_rather_than_exceed_depth),
        cmocka_unit_test(test_wait_returns_only_when_everything_is_consumed),
        cmocka_unit_test(test_an_empty_batch_is_not_submitted),
        cmocka_unit_test(test_destroy_consumes_what_was_submitted_and_drops_the_rest),
        cmocka_unit_test(test_depth_below_two_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
