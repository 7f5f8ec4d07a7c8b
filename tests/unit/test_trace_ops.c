/*
 * test_trace_ops.c -- the table of traced operations (trace/ops.def): the
 * qualnames are LMCache's, each op's arguments are LMCache's parameter
 * names in its signature order, and lookups outside the table answer NULL.
 */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <string.h>

#include "trace/format.h"
#include "trace/ops.h"

#define P LMC_TRACE_QUALNAME_PREFIX

/* LMCache's traced methods and their parameters (storage_manager.py), written out by hand. */
static const struct {
    lmc_trace_op op;
    const char *qualname;
    const char *args[LMC_TRACE_MAX_ARGS + 1]; /* NULL-terminated */
} EXPECT[] = {
    {LMC_TRACE_OP_RESERVE_WRITE, P "reserve_write", {"keys", "layout_desc", "mode"}},
    {LMC_TRACE_OP_FINISH_WRITE, P "finish_write", {"keys"}},
    {LMC_TRACE_OP_SUBMIT_PREFETCH,
     P "submit_prefetch_task",
     {"keys", "layout_desc", "extra_count", "external_request_id", "policy"}},
    {LMC_TRACE_OP_FINISH_READ, P "finish_read_prefetched", {"keys", "extra_count"}},
    {LMC_TRACE_OP_READ_ENTER, P "read_prefetched_results.__enter__", {"keys"}},
    {LMC_TRACE_OP_READ_EXIT, P "read_prefetched_results.__exit__", {"keys"}},
};
#define N_EXPECT (sizeof(EXPECT) / sizeof(EXPECT[0]))

static void test_every_op_has_lmcaches_qualname(void **state)
{
    (void)state;
    assert_int_equal(LMC_TRACE_OP_COUNT_ - 1, N_EXPECT);
    for (size_t i = 0; i < N_EXPECT; i++)
        assert_string_equal(lmc_trace_op_qualname(EXPECT[i].op), EXPECT[i].qualname);
}

static void test_every_op_lists_lmcaches_parameters_in_signature_order(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_EXPECT; i++) {
        const lmc_trace_op_info *info = lmc_trace_op_get(EXPECT[i].op);
        assert_non_null(info);
        size_t n = 0;
        while (EXPECT[i].args[n] != NULL)
            n++;
        assert_int_equal(info->nargs, n);
        for (size_t a = 0; a < n; a++) {
            assert_string_equal(info->args[a].name, EXPECT[i].args[a]);
            assert_int_equal(info->args[a].name_len, strlen(EXPECT[i].args[a]));
        }
    }
}

static void test_argument_kinds_match_their_parameters(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        lmc_trace_arg_kind kind;
    } kinds[] = {
        {"keys", LMC_TRACE_ARG_KEYS},
        {"layout_desc", LMC_TRACE_ARG_LAYOUT},
        {"mode", LMC_TRACE_ARG_MODE},
        {"extra_count", LMC_TRACE_ARG_EXTRA_COUNT},
        {"external_request_id", LMC_TRACE_ARG_EXTERNAL_REQUEST_ID},
        {"policy", LMC_TRACE_ARG_POLICY},
    };
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
        const lmc_trace_op_info *info = lmc_trace_op_get((lmc_trace_op)op);
        for (size_t a = 0; a < info->nargs; a++) {
            size_t k = 0;
            while (k < sizeof(kinds) / sizeof(kinds[0]) &&
                   strcmp(kinds[k].name, info->args[a].name) != 0)
                k++;
            assert_true(k < sizeof(kinds) / sizeof(kinds[0]));
            assert_int_equal(info->args[a].kind, kinds[k].kind);
        }
    }
}

static void test_short_names_are_the_replay_handler_suffixes(void **state)
{
    (void)state;
    assert_string_equal(lmc_trace_op_get(LMC_TRACE_OP_RESERVE_WRITE)->name, "reserve_write");
    assert_string_equal(lmc_trace_op_get(LMC_TRACE_OP_SUBMIT_PREFETCH)->name, "submit_prefetch");
    assert_string_equal(lmc_trace_op_get(LMC_TRACE_OP_READ_EXIT)->name, "read_exit");
}

static void test_values_outside_the_table_are_not_ops(void **state)
{
    (void)state;
    assert_null(lmc_trace_op_get(LMC_TRACE_OP_NONE));
    assert_null(lmc_trace_op_get(LMC_TRACE_OP_COUNT_));
    assert_null(lmc_trace_op_get((lmc_trace_op)-1));
    assert_null(lmc_trace_op_qualname(LMC_TRACE_OP_NONE));
    assert_null(lmc_trace_op_qualname(LMC_TRACE_OP_COUNT_));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_has_lmcaches_qualname),
        cmocka_unit_test(test_every_op_lists_lmcaches_parameters_in_signature_order),
        cmocka_unit_test(test_argument_kinds_match_their_parameters),
        cmocka_unit_test(test_short_names_are_the_replay_handler_suffixes),
        cmocka_unit_test(test_values_outside_the_table_are_not_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
