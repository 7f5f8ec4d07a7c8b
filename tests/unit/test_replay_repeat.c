/*
 * test_replay_repeat.c -- the spread of figures over --repeat runs
 * (replay/repeat.h): median (the mean of the middle two for an even count),
 * min and max by path, a figure some runs lack, the digests, and the
 * "repeat" JSON that mirrors the result's shape.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <string.h>

#include "replay/repeat.h"

#define Q "lmcache.v1.distributed.storage_manager.StorageManager.reserve_write"

/* One run: a hit rate of hits/10, reserve_write p99 of p99 ms, and a digest. */
static void add_run(lmc_replay_repeat *r, uint64_t hits, double p99, const char *digest,
                    bool with_op)
{
    lmc_replay_totals t = {0};
    t.records[LMC_TRACE_OP_SUBMIT_PREFETCH] = 1;
    t.keys[LMC_TRACE_OP_SUBMIT_PREFETCH] = 10;
    t.v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = hits;
    lmc_op_stats op = {.qualname = Q, .count = 3, .p99_ms = p99};
    lmc_replay_summary s = {.level = "storage",
                            .time_scale = 1.0,
                            .totals = &t,
                            .figures = lmc_replay_figures_of(&t),
                            .outcome_digest = digest,
                            .ops = with_op ? &op : NULL,
                            .n_ops = with_op ? 1 : 0,
                            .duration_s = (double)hits};
    assert_int_equal(lmc_replay_repeat_add(r, &s), LMC_OK);
}

static const char *const HIT[] = {"outcomes", "figures", "chunk_hit_rate"};
static const char *const P99[] = {"ops", Q, "p99_ms"};

static void test_median_min_and_max_of_an_odd_number_of_runs(void **state)
{
    (void)state;
    lmc_replay_repeat *r = lmc_replay_repeat_create();
    add_run(r, 5, 0.3, "aa", true);
    add_run(r, 7, 4.6, "aa", true);
    add_run(r, 6, 0.2, "aa", true);
    assert_int_equal(lmc_replay_repeat_runs(r), 3);
    lmc_spread sp;
    assert_true(lmc_replay_repeat_spread(r, HIT, 3, &sp));
    assert_true(sp.median == 0.6 && sp.min == 0.5 && sp.max == 0.7);
    assert_int_equal(sp.n, 3);
    /* A qualname with dots is one key of the path. */
    assert_true(lmc_replay_repeat_spread(r, P99, 3, &sp));
    assert_true(sp.median == 0.3 && sp.min == 0.2 && sp.max == 4.6);
    assert_true(lmc_replay_repeat_digests_equal(r));
    assert_string_equal(lmc_replay_repeat_digest(r, 2), "aa");
    const char *const none[] = {"outcomes", "figures", "no_such_figure"};
    assert_false(lmc_replay_repeat_spread(r, none, 3, &sp));
    lmc_replay_repeat_destroy(r);
}

static void
test_even_runs_take_the_mean_of_the_middle_two_and_missing_figures_are_skipped(void **state)
{
    (void)state;
    lmc_replay_repeat *r = lmc_replay_repeat_create();
    add_run(r, 2, 1.0, "aa", true);
    add_run(r, 4, 0.0, "bb", false); /* this run never saw the op */
    add_run(r, 8, 3.0, "aa", true);
    add_run(r, 6, 2.0, "aa", true);
    lmc_spread sp;
    assert_true(lmc_replay_repeat_spread(r, HIT, 3, &sp));
    assert_true(sp.median == 0.5); /* (0.4 + 0.6) / 2 */
    assert_true(lmc_replay_repeat_spread(r, P99, 3, &sp));
    assert_int_equal(sp.n, 3);
    assert_true(sp.median == 2.0 && sp.min == 1.0 && sp.max == 3.0);
    assert_false(lmc_replay_repeat_digests_equal(r));
    lmc_replay_repeat_destroy(r);
}

static void test_repeat_json_mirrors_the_result_shape(void **state)
{
    (void)state;
    lmc_replay_repeat *r = lmc_replay_repeat_create();
    add_run(r, 5, 0.3, "aa", true);
    add_run(r, 7, 0.5, "bb", true);
    lmc_json *j = lmc_replay_repeat_json(r);
    assert_non_null(j);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(j, "runs")), 2);
    const lmc_json *d = lmc_json_object_get(j, "outcome_digests");
    assert_int_equal(lmc_json_size(d), 2);
    assert_string_equal(lmc_json_get_string(lmc_json_array_at(d, 1), NULL), "bb");
    assert_false(lmc_json_get_bool(lmc_json_object_get(j, "digests_equal")));
    const lmc_json *fig = lmc_json_object_get(j, "figures");
    const lmc_json *hit = lmc_json_object_get(
        lmc_json_object_get(lmc_json_object_get(fig, "outcomes"), "figures"), "chunk_hit_rate");
    assert_true(lmc_json_get_number(lmc_json_object_get(hit, "median")) == 0.6);
    assert_true(lmc_json_get_number(lmc_json_object_get(hit, "min")) == 0.5);
    assert_true(lmc_json_get_number(lmc_json_object_get(hit, "max")) == 0.7);
    const lmc_json *p99 =
        lmc_json_object_get(lmc_json_object_get(lmc_json_object_get(fig, "ops"), Q), "p99_ms");
    assert_true(lmc_json_get_number(lmc_json_object_get(p99, "max")) == 0.5);
    assert_non_null(lmc_json_object_get(fig, "duration_s"));
    assert_non_null(lmc_json_object_get(lmc_json_object_get(fig, "trace"), "records"));
    assert_null(lmc_json_object_get(fig, "time_scale")); /* settings are not figures */
    lmc_json_free(j);
    lmc_replay_repeat_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_min_and_max_of_an_odd_number_of_runs),
        cmocka_unit_test(
            test_even_runs_take_the_mean_of_the_middle_two_and_missing_figures_are_skipped),
        cmocka_unit_test(test_repeat_json_mirrors_the_result_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
