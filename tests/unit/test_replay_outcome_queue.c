/*
 * test_replay_outcome_queue.c -- the reorder buffer (replay/outcome_queue.h):
 * records come out in order, a pending prefetch holds back the records after
 * it until its outcome completes, completion out of order, growth past the
 * first ring, and close emitting what is still open.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdlib.h>

#include "replay/outcome_queue.h"

typedef struct seen {
    uint64_t index[512];
    uint32_t l2_hits[512];
    bool pending[512];
    size_t n;
} seen;

static void collect(const lmc_replay_record_view *rec, void *ud)
{
    seen *s = ud;
    assert_true(s->n < 512);
    s->index[s->n] = rec->index;
    s->l2_hits[s->n] = rec->outcome ? rec->outcome->v[LMC_OC_SUBMIT_PREFETCH_l2_hits] : 0;
    s->pending[s->n] = rec->outcome ? rec->outcome->pending : false;
    s->n++;
}

static void push(lmc_outcome_queue *q, uint64_t index, bool pending)
{
    lmc_replay_record_view v = {.index = index, .qualname = "q"};
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_SUBMIT_PREFETCH, NULL, 1);
    o.pending = pending;
    assert_int_equal(lmc_outcome_queue_push(q, &v, &o), LMC_OK);
}

static void complete(lmc_outcome_queue *q, uint64_t index, uint32_t l2_hits)
{
    lmc_replay_outcome o;
    lmc_replay_outcome_begin(&o, LMC_TRACE_OP_SUBMIT_PREFETCH, NULL, 1);
    o.pending = true; /* the queue clears it */
    o.v[LMC_OC_SUBMIT_PREFETCH_l2_hits] = l2_hits;
    lmc_outcome_queue_complete(q, index, &o);
}

static void test_final_records_are_emitted_at_once_in_order(void **state)
{
    (void)state;
    seen s = {0};
    lmc_outcome_queue *q = lmc_outcome_queue_create(collect, &s);
    for (uint64_t i = 1; i <= 3; i++)
        push(q, i, false);
    lmc_replay_record_view none = {.index = 4, .qualname = "x"};
    assert_int_equal(lmc_outcome_queue_push(q, &none, NULL), LMC_OK); /* no outcome */
    assert_int_equal(s.n, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(s.index[i], i + 1);
    assert_int_equal(lmc_outcome_queue_len(q), 0);
    lmc_outcome_queue_destroy(q);
}

static void test_a_pending_record_holds_back_the_ones_after_it(void **state)
{
    (void)state;
    seen s = {0};
    lmc_outcome_queue *q = lmc_outcome_queue_create(collect, &s);
    push(q, 1, false);
    push(q, 2, true);
    push(q, 3, false);
    push(q, 4, true);
    push(q, 5, false);
    assert_int_equal(s.n, 1);
    assert_int_equal(lmc_outcome_queue_open(q), 2);
    complete(q, 4, 7); /* the later one first: nothing can go yet */
    assert_int_equal(s.n, 1);
    complete(q, 2, 3);
    assert_int_equal(s.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(s.index[i], i + 1);
    assert_int_equal(s.l2_hits[1], 3);
    assert_int_equal(s.l2_hits[3], 7);
    assert_false(s.pending[1]);
    complete(q, 2, 9); /* gone already: ignored */
    complete(q, 99, 9);
    assert_int_equal(s.n, 5);
    lmc_outcome_queue_destroy(q);
}

static void test_the_ring_grows_behind_a_long_wait(void **state)
{
    (void)state;
    seen s = {0};
    lmc_outcome_queue *q = lmc_outcome_queue_create(collect, &s);
    push(q, 1, false);
    push(q, 2, true);
    for (uint64_t i = 3; i <= 300; i++)
        push(q, i, i == 150);
    assert_int_equal(lmc_outcome_queue_len(q), 299);
    complete(q, 2, 1);
    assert_int_equal(s.n, 149); /* up to the next pending record */
    complete(q, 150, 1);
    assert_int_equal(s.n, 300);
    for (size_t i = 0; i < 300; i++)
        assert_int_equal(s.index[i], i + 1);
    lmc_outcome_queue_destroy(q);
}

static void test_close_emits_open_records_as_they_are(void **state)
{
    (void)state;
    seen s = {0};
    lmc_outcome_queue *q = lmc_outcome_queue_create(collect, &s);
    push(q, 10, true);
    push(q, 11, false);
    assert_int_equal(s.n, 0);
    lmc_outcome_queue_close(q);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.index[0], 10);
    assert_true(s.pending[0]);
    assert_int_equal(lmc_outcome_queue_open(q), 0);
    assert_int_equal(lmc_outcome_queue_len(q), 0);
    lmc_outcome_queue_destroy(q);
    lmc_outcome_queue_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_final_records_are_emitted_at_once_in_order),
        cmocka_unit_test(test_a_pending_record_holds_back_the_ones_after_it),
        cmocka_unit_test(test_the_ring_grows_behind_a_long_wait),
        cmocka_unit_test(test_close_emits_open_records_as_they_are),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
