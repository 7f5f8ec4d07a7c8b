/*
 * test_replay_report.c -- the replay result table and JSON (spec section
 * 8.4): Python's str.center, the 64-column layout, the digest row, short op
 * names, round(x, 3) before "%.2f", and the --format json shape. Expected
 * texts were produced by python3 running LMCache's TerminalFormatter and
 * JsonFormatter logic (plus our Pacing section) on the same inputs.
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/report.h"

#define DIGEST_A "0f685d8a9c1e2b3f4a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3"
#define DIGEST_B "deadbeef00112233445566778899aabbccddeeff00112233445566778899aabb"
#define SM "lmcache.v1.distributed.storage_manager.StorageManager."

/* Compare text with lines, one assertion per line, each ended by "\n". */
static void assert_lines(const char *text, const char *const *lines, size_t n)
{
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        char got[256];
        size_t len = (size_t)(nl - p);
        assert_true(len < sizeof(got));
        memcpy(got, p, len);
        got[len] = '\0';
        assert_string_equal(got, lines[i]);
        p = nl + 1;
    }
    assert_string_equal(p, ""); /* nothing after the last line */
}

static lmc_replay_summary base_summary(void)
{
    return (lmc_replay_summary){.level = "storage",
                                .replayed = 2,
                                .skipped = 0,
                                .failed = 0,
                                .duration_s = 0.05,
                                .header_digest = DIGEST_A,
                                .replay_digest = DIGEST_A,
                                .time_scale = 1.0};
}

/* ---- str.center ------------------------------------------------------------ */

static void test_center_matches_python_str_center(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t width;
        const char *want;
    } cases[] = {
        {"", 0, ""},
        {"", 1, "="},
        {"", 2, "=="},
        {"", 3, "==="},
        {"", 4, "===="},
        {"", 5, "====="},
        {"", 6, "======"},
        {"", 7, "======="},
        {"", 8, "========"},
        {"", 11, "==========="},
        {"", 12, "============"},
        {"a", 1, "a"},
        {"a", 2, "a="},
        {"a", 3, "=a="},
        {"a", 4, "=a=="},
        {"a", 5, "==a=="},
        {"a", 6, "==a==="},
        {"a", 7, "===a==="},
        {"a", 8, "===a===="},
        {"a", 11, "=====a====="},
        {"a", 12, "=====a======"},
        {"ab", 2, "ab"},
        {"ab", 3, "=ab"},
        {"ab", 4, "=ab="},
        {"ab", 5, "==ab="},
        {"ab", 6, "==ab=="},
        {"ab", 7, "===ab=="},
        {"ab", 8, "===ab==="},
        {"ab", 11, "=====ab===="},
        {"ab", 12, "=====ab====="},
        {"abc", 3, "abc"},
        {"abc", 4, "abc="},
        {"abc", 5, "=abc="},
        {"abc", 6, "=abc=="},
        {"abc", 7, "==abc=="},
        {"abc", 8, "==abc==="},
        {"abc", 11, "====abc===="},
        {"abc", 12, "====abc====="},
        {"abcd", 4, "abcd"},
        {"abcd", 5, "=abcd"},
        {"abcd", 6, "=abcd="},
        {"abcd", 7, "==abcd="},
        {"abcd", 8, "==abcd=="},
        {"abcd", 11, "====abcd==="},
        {"abcd", 12, "====abcd===="},
        {" Overall ", 11, "= Overall ="},
        {" Overall ", 12, "= Overall =="},
        {" Trace Replay Result ", 63,
         "===================== Trace Replay Result ====================="},
        {" Trace Replay Result ", 64,
         "===================== Trace Replay Result ======================"},
        {" Per-Op Latency (ms) ", 64,
         "===================== Per-Op Latency (ms) ======================"},
        {" Pacing ", 64, "============================ Pacing ============================"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[80];
        lmc_center(cases[i].text, cases[i].width, '=', buf);
        assert_string_equal(buf, cases[i].want);
    }
}

static void test_center_of_text_wider_than_width_is_cut_to_width(void **state)
{
    (void)state;
    char buf[4];
    lmc_center("abcdef", 3, '-', buf);
    assert_string_equal(buf, "abc");
}

static void test_center_uses_the_fill_character(void **state)
{
    (void)state;
    char buf[16];
    lmc_center(" x ", 8, '-', buf);
    assert_string_equal(buf, "-- x ---");
}

/* ---- round(x, 3) ----------------------------------------------------------- */

static void test_round3_matches_python_round(void **state)
{
    (void)state;
    /* python3: round(x, 3) */
    assert_true(lmc_round3(0.0625) == 0.062); /* an exact tie goes to even */
    assert_true(lmc_round3(0.0449) == 0.045);
    assert_true(lmc_round3(0.0455) == 0.045); /* 0.0455 is just below the tie */
    assert_true(lmc_round3(1.0005) == 1.0);
    assert_true(lmc_round3(2.6745) == 2.675);
    assert_true(lmc_round3(0.0005) == 0.001);
    assert_true(lmc_round3(123.4565) == 123.457);
    assert_true(lmc_round3(0.1235) == 0.123);
    assert_true(lmc_round3(0.00049999) == 0.0);
}

/* ---- short names ----------------------------------------------------------- */

static void test_short_name_is_the_last_component(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(lmc_replay_short_name(SM "reserve_write", buf, sizeof(buf)),
                        "reserve_write");
}

static void test_short_name_of_enter_names_the_context_manager(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(
        lmc_replay_short_name(SM "read_prefetched_results.__enter__", buf, sizeof(buf)),
        "read_prefetched_results.enter");
}

static void test_short_name_of_exit_names_the_context_manager(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(
        lmc_replay_short_name(SM "read_prefetched_results.__exit__", buf, sizeof(buf)),
        "read_prefetched_results.exit");
}

static void test_short_name_without_dots_is_the_whole_name(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(lmc_replay_short_name("finish_write", buf, sizeof(buf)), "finish_write");
    assert_string_equal(lmc_replay_short_name("__enter__", buf, sizeof(buf)), "__enter__");
}

static void test_short_name_of_a_two_part_dunder_uses_the_first_part(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(lmc_replay_short_name("ctx.__exit__", buf, sizeof(buf)), "ctx.exit");
    assert_string_equal(lmc_replay_short_name(".__enter__", buf, sizeof(buf)), ".enter");
}

/* ---- the generic renderer ------------------------------------------------- */

static void test_spec_example_table_is_reproduced_exactly(void **state)
{
    (void)state;
    const lmc_metric overall[] = {
        {.key = "level", .label = "Trace level", .kind = LMC_METRIC_STR, .s = "storage"},
        {.key = "replayed", .label = "Records replayed", .kind = LMC_METRIC_INT, .i = 2},
        {.key = "duration",
         .label = "Replay duration (s)",
         .kind = LMC_METRIC_FLOAT,
         .f = lmc_round3(0.0504)},
        {.key = "digest",
         .label = "Config digest",
         .kind = LMC_METRIC_STR,
         .s = "match (0f685d8a)"},
    };
    const lmc_metric ops[] = {
        {.key = "finish_write_p50",
         .label = "finish_write p50",
         .kind = LMC_METRIC_FLOAT,
         .f = lmc_round3(0.0312)},
    };
    const lmc_metric_section sections[] = {
        {"overall", "Overall", overall, 4},
        {"ops", "Per-Op Latency (ms)", ops, 1},
    };
    char *text = lmc_metrics_format_terminal("Trace Replay Result", sections, 2, 64);
    assert_non_null(text);
    assert_string_equal(text, "===================== Trace Replay Result ======================\n"
                              "--------------------------- Overall ----------------------------\n"
                              "Trace level:                                             storage\n"
                              "Records replayed:                                              2\n"
                              "Replay duration (s):                                        0.05\n"
                              "Config digest:                                  match (0f685d8a)\n"
                              "--------------------- Per-Op Latency (ms) ----------------------\n"
                              "finish_write p50:                                           0.03\n"
                              "================================================================\n");
    free(text);
}

static void test_entry_too_long_for_the_width_gets_one_space_and_none_is_na(void **state)
{
    (void)state;
    char label[71];
    memset(label, 'y', 70);
    label[70] = '\0';
    const lmc_metric entries[] = {
        {.key = "x", .label = label, .kind = LMC_METRIC_FLOAT, .f = 1.5},
        {.key = "n", .label = "None value", .kind = LMC_METRIC_NONE},
        {.key = "s", .label = "Str", .kind = LMC_METRIC_STR, .s = "abc"},
    };
    const lmc_metric_section sections[] = {{"k", "S", entries, 3}};
    char *text = lmc_metrics_format_terminal("T", sections, 1, 20);
    assert_non_null(text);
    assert_string_equal(
        text, "======== T =========\n"
              "-------- S ---------\n"
              "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy: 1.50\n"
              "None value:      N/A\n"
              "Str:             abc\n"
              "====================\n");
    free(text);
}

static void test_unnamed_section_has_no_header_and_flat_json_keys(void **state)
{
    (void)state;
    const lmc_metric entries[] = {{.key = "a", .label = "A", .kind = LMC_METRIC_INT, .i = -3}};
    const lmc_metric_section sections[] = {{NULL, NULL, entries, 1}};
    char *text = lmc_metrics_format_terminal("T", sections, 1, 10);
    assert_non_null(text);
    assert_string_equal(text, "=== T ====\nA:      -3\n==========\n");
    free(text);
    text = lmc_metrics_format_json("T", sections, 1, 2);
    assert_non_null(text);
    assert_string_equal(text, "{\n  \"title\": \"T\",\n  \"metrics\": {\n    \"a\": -3\n  }\n}\n");
    free(text);
}

/* ---- the replay report ------------------------------------------------------ */

static void two_op_summary(lmc_replay_summary *s, lmc_op_stats ops[2])
{
    /* sorted by qualname: "...read_prefetched_results.__enter__" < "...reserve_write" */
    ops[0] = (lmc_op_stats){.qualname = SM "read_prefetched_results.__enter__",
                            .count = 2,
                            .mean_ms = 1.0455,
                            .p50_ms = 0.0455,
                            .p99_ms = 2.6745};
    ops[1] = (lmc_op_stats){.qualname = SM "reserve_write",
                            .count = 3,
                            .mean_ms = 0.25133333333333335,
                            .p50_ms = 0.2515,
                            .p99_ms = 0.4449};
    *s = base_summary();
    s->replayed = 6;
    s->skipped = 1;
    s->duration_s = 1.23456;
    s->lateness = (lmc_lateness_stats){
        .count = 5, .p50_us = 12.3456, .p99_us = 250.5, .max_us = 1234.5678, .mean_us = 99.0};
    s->ops = ops;
    s->n_ops = 2;
}

static void test_full_table_for_two_ops_line_by_line(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    two_op_summary(&s, ops);
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    static const char *const want[] = {
        "===================== Trace Replay Result ======================",
        "--------------------------- Overall ----------------------------",
        "Trace level:                                             storage",
        "Records replayed:                                              6",
        "Records skipped:                                               1",
        "Records failed:                                                0",
        "Replay duration (s):                                        1.24",
        "Config digest:                                  match (0f685d8a)",
        "--------------------- Per-Op Latency (ms) ----------------------",
        "read_prefetched_results.enter count:                           2",
        "read_prefetched_results.enter mean:                         1.05",
        "read_prefetched_results.enter p50:                          0.04",
        "read_prefetched_results.enter p99:                          2.67",
        "reserve_write count:                                           3",
        "reserve_write mean:                                         0.25",
        "reserve_write p50:                                          0.25",
        "reserve_write p99:                                          0.45",
        "---------------------------- Pacing ----------------------------",
        "Time scale:                                                 1.00",
        "Lateness p50 (us):                                         12.35",
        "Lateness p99 (us):                                        250.50",
        "Lateness max (us):                                       1234.57",
        "================================================================"};
    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

static void test_digest_row_shows_mismatch_with_both_prefixes(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.replay_digest = DIGEST_B;
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "\nConfig digest:             MISMATCH (rec=0f685d8a, run=deadbeef)\n"));
    free(text);
}

static void test_digest_row_is_match_when_the_run_has_no_digest(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.replay_digest = "";
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "\nConfig digest:                                  match (0f685d8a)\n"));
    free(text);
}

static void test_digest_row_is_omitted_without_a_header_digest(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.header_digest = "";
    s.replay_digest = DIGEST_B;
    s.time_scale = 2.0;
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    static const char *const want[] = {
        "===================== Trace Replay Result ======================",
        "--------------------------- Overall ----------------------------",
        "Trace level:                                             storage",
        "Records replayed:                                              2",
        "Records skipped:                                               0",
        "Records failed:                                                0",
        "Replay duration (s):                                        0.05",
        "---------------------------- Pacing ----------------------------",
        "Time scale:                                                 2.00",
        "Lateness p50 (us):                                          0.00",
        "Lateness p99 (us):                                          0.00",
        "Lateness max (us):                                          0.00",
        "================================================================"};
    assert_lines(text, want, sizeof(want) / sizeof(want[0]));
    free(text);
}

static void test_json_shape_for_two_ops(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    two_op_summary(&s, ops);
    char *text = lmc_replay_report_json(&s);
    assert_non_null(text);
    assert_string_equal(text, "{\n"
                              "  \"title\": \"Trace Replay Result\",\n"
                              "  \"metrics\": {\n"
                              "    \"overall\": {\n"
                              "      \"level\": \"storage\",\n"
                              "      \"replayed\": 6,\n"
                              "      \"skipped\": 1,\n"
                              "      \"failed\": 0,\n"
                              "      \"duration\": 1.235,\n"
                              "      \"digest\": \"match (0f685d8a)\"\n"
                              "    },\n"
                              "    \"ops\": {\n"
                              "      \"read_prefetched_results.enter_count\": 2,\n"
                              "      \"read_prefetched_results.enter_mean\": 1.046,\n"
                              "      \"read_prefetched_results.enter_p50\": 0.045,\n"
                              "      \"read_prefetched_results.enter_p99\": 2.675,\n"
                              "      \"reserve_write_count\": 3,\n"
                              "      \"reserve_write_mean\": 0.251,\n"
                              "      \"reserve_write_p50\": 0.252,\n"
                              "      \"reserve_write_p99\": 0.445\n"
                              "    },\n"
                              "    \"pacing\": {\n"
                              "      \"time_scale\": 1.0,\n"
                              "      \"lateness_p50_us\": 12.3456,\n"
                              "      \"lateness_p99_us\": 250.5,\n"
                              "      \"lateness_max_us\": 1234.5678\n"
                              "    }\n"
                              "  }\n"
                              "}\n");
    free(text);
}

static void test_json_leaves_out_digest_without_a_header_digest(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.header_digest = "";
    s.replay_digest = DIGEST_B;
    s.time_scale = 2.0;
    char *text = lmc_replay_report_json(&s);
    assert_non_null(text);
    assert_string_equal(text, "{\n"
                              "  \"title\": \"Trace Replay Result\",\n"
                              "  \"metrics\": {\n"
                              "    \"overall\": {\n"
                              "      \"level\": \"storage\",\n"
                              "      \"replayed\": 2,\n"
                              "      \"skipped\": 0,\n"
                              "      \"failed\": 0,\n"
                              "      \"duration\": 0.05\n"
                              "    },\n"
                              "    \"pacing\": {\n"
                              "      \"time_scale\": 2.0,\n"
                              "      \"lateness_p50_us\": 0.0,\n"
                              "      \"lateness_p99_us\": 0.0,\n"
                              "      \"lateness_max_us\": 0.0\n"
                              "    }\n"
                              "  }\n"
                              "}\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_center_matches_python_str_center),
        cmocka_unit_test(test_center_of_text_wider_than_width_is_cut_to_width),
        cmocka_unit_test(test_center_uses_the_fill_character),
        cmocka_unit_test(test_round3_matches_python_round),
        cmocka_unit_test(test_short_name_is_the_last_component),
        cmocka_unit_test(test_short_name_of_enter_names_the_context_manager),
        cmocka_unit_test(test_short_name_of_exit_names_the_context_manager),
        cmocka_unit_test(test_short_name_without_dots_is_the_whole_name),
        cmocka_unit_test(test_short_name_of_a_two_part_dunder_uses_the_first_part),
        cmocka_unit_test(test_spec_example_table_is_reproduced_exactly),
        cmocka_unit_test(test_entry_too_long_for_the_width_gets_one_space_and_none_is_na),
        cmocka_unit_test(test_unnamed_section_has_no_header_and_flat_json_keys),
        cmocka_unit_test(test_full_table_for_two_ops_line_by_line),
        cmocka_unit_test(test_digest_row_shows_mismatch_with_both_prefixes),
        cmocka_unit_test(test_digest_row_is_match_when_the_run_has_no_digest),
        cmocka_unit_test(test_digest_row_is_omitted_without_a_header_digest),
        cmocka_unit_test(test_json_shape_for_two_ops),
        cmocka_unit_test(test_json_leaves_out_digest_without_a_header_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
