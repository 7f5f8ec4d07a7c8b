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

#include "core/json.h"
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

/* ---- the result JSON ---------------------------------------------------- */

static const lmc_json *at(const lmc_json *v, const char *key)
{
    const lmc_json *c = lmc_json_object_get(v, key);
    if (c == NULL)
        fail_msg("missing key '%s'", key);
    return c;
}

static void assert_keys(const lmc_json *obj, const char *const *keys, size_t n)
{
    assert_int_equal(lmc_json_size(obj), n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(lmc_json_object_key_at(obj, i), keys[i]);
}

/* A summary with outcomes, as a replay of the recorded config would give. */
static void outcome_summary(lmc_replay_summary *s, lmc_op_stats *ops, lmc_replay_totals *t)
{
    two_op_summary(s, ops);
    memset(t, 0, sizeof(*t));
    t->records[LMC_TRACE_OP_SUBMIT_PREFETCH] = 10;
    t->keys[LMC_TRACE_OP_SUBMIT_PREFETCH] = 200;
    t->v[LMC_OC_SUBMIT_PREFETCH_l1_hits] = 80;
    t->v[LMC_OC_SUBMIT_PREFETCH_l2_hits] = 20;
    t->records[LMC_TRACE_OP_READ_ENTER] = 1000;
    t->keys[LMC_TRACE_OP_READ_ENTER] = 2000;
    t->v[LMC_OC_READ_ENTER_context_ok] = 731;
    t->v[LMC_OC_READ_ENTER_found] = 1500;
    t->v[LMC_OC_READ_ENTER_not_in_l1] = 450;
    t->v[LMC_OC_READ_ENTER_not_read_locked] = 50;
    t->records[LMC_TRACE_OP_RESERVE_WRITE] = 3;
    t->keys[LMC_TRACE_OP_RESERVE_WRITE] = 48;
    t->v[LMC_OC_RESERVE_WRITE_reserved] = 40;
    t->v[LMC_OC_RESERVE_WRITE_out_of_memory] = 8;
    t->l1_capacity_bytes = 100 * 1024 * 1024;
    t->l1_peak_used_bytes = 25 * 1024 * 1024;
    t->sm.l1_evicted_keys = 7;
    t->sm.l2_stored_keys = 40;
    t->sm.l2_stored_bytes = 40 * 1024 * 1024;
    s->totals = t;
    s->figures = lmc_replay_figures_of(t);
    s->outcome_digest = DIGEST_B;
    s->reported = 7;
    s->trace_path = "t.lct";
    s->trace_digest = "06b05ab6733a618578af5f94892f3950";
    s->mode = "calls";
    s->pace = "realtime";
}

static void test_json_has_every_documented_field(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    lmc_replay_totals t;
    outcome_summary(&s, ops, &t);
    s.csv_path = "./trace_replay_ops.csv";
    char *text = lmc_replay_report_json(&s);
    assert_non_null(text);
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    static const char *const top[] = {
        "schema",         "schema_version", "tool",     "started_at", "started_at_unix_s",
        "status",         "trace",          "config",   "mode",       "pace",
        "time_scale",     "duration_s",     "outcomes", "ops",        "lateness",
        "outcome_digest", "outputs"};
    assert_keys(v, top, sizeof(top) / sizeof(top[0]));
    assert_string_equal(lmc_json_get_string(at(v, "schema"), NULL), "lmcache.trace_replay_result");
    assert_int_equal(lmc_json_get_int(at(v, "schema_version")), 2);
    assert_string_equal(lmc_json_get_string(at(at(v, "tool"), "name"), NULL), "lmcache");
    assert_string_equal(lmc_json_get_string(at(v, "status"), NULL), "complete");
    static const char *const trace[] = {
        "path",          "digest", "level",  "format_version", "trace_schema_version",
        "config_digest", "config", "span_s", "records"};
    assert_keys(at(v, "trace"), trace, sizeof(trace) / sizeof(trace[0]));
    assert_string_equal(lmc_json_get_string(at(at(v, "trace"), "digest"), NULL),
                        "06b05ab6733a618578af5f94892f3950");
    static const char *const records[] = {"reported", "replayed",         "skipped",  "malformed",
                                          "failed",   "recorder_dropped", "truncated"};
    assert_keys(at(at(v, "trace"), "records"), records, sizeof(records) / sizeof(records[0]));
    static const char *const config[] = {"json", "digest", "matches_trace", "differs"};
    assert_keys(at(v, "config"), config, 4);
    assert_true(lmc_json_get_bool(at(at(v, "config"), "matches_trace")));
    static const char *const outcomes[] = {"figures", "ops", "l1", "l2", "unfinished_prefetches"};
    assert_keys(at(v, "outcomes"), outcomes, 5);
    const lmc_json *fig = at(at(v, "outcomes"), "figures");
    const lmc_replay_figure_info *fi;
    size_t nf = 0;
    for (; (fi = lmc_replay_figure_get(nf)) != NULL; nf++)
        assert_string_equal(lmc_json_object_key_at(fig, nf), fi->name);
    assert_int_equal(lmc_json_size(fig), nf);
    assert_true(lmc_json_get_number(at(fig, "chunk_hit_rate")) == 0.5);
    assert_true(lmc_json_get_number(at(fig, "read_agreement")) == 0.731);
    assert_int_equal(lmc_json_get_int(at(fig, "refused_keys")), 8);
    /* Every counter of outcome.def, under its op, with records and keys first. */
    const lmc_json *oops = at(at(v, "outcomes"), "ops");
    assert_int_equal(lmc_json_size(oops), LMC_TRACE_OP_COUNT_ - 1);
    const lmc_outcome_counter_info *ci;
    for (size_t c = 0; (ci = lmc_outcome_counter_get(c)) != NULL; c++)
        (void)at(at(oops, lmc_outcome_op_name(ci->op)), ci->name);
    assert_string_equal(lmc_json_object_key_at(at(oops, "reserve_write"), 0), "records");
    assert_int_equal(lmc_json_get_int(at(at(oops, "reserve_write"), "out_of_memory")), 8);
    static const char *const l1[] = {"capacity_bytes", "peak_used_bytes", "peak_usage_ratio",
                                     "evicted_keys"};
    assert_keys(at(at(v, "outcomes"), "l1"), l1, 4);
    static const char *const l2[] = {"stored_keys", "stored_bytes", "store_failed_tasks",
                                     "loaded_keys", "loaded_bytes", "evicted_keys"};
    assert_keys(at(at(v, "outcomes"), "l2"), l2, 6);
    static const char *const op[] = {"count",  "errors", "mean_ms", "p50_ms",
                                     "p90_ms", "p99_ms", "min_ms",  "max_ms"};
    assert_keys(at(at(v, "ops"), SM "reserve_write"), op, 8);
    static const char *const late[] = {"count",  "mean_us",     "p50_us",         "p99_us",
                                       "max_us", "mean_gap_us", "behind_schedule"};
    assert_keys(at(v, "lateness"), late, 7);
    static const char *const outputs[] = {"jsonl", "csv", "outcomes_csv", "summary_json", "output"};
    assert_keys(at(v, "outputs"), outputs, 5);
    assert_string_equal(lmc_json_get_string(at(at(v, "outputs"), "csv"), NULL),
                        "./trace_replay_ops.csv");
    assert_int_equal(lmc_json_type_of(at(at(v, "outputs"), "jsonl")), LMC_JSON_NULL);
    assert_string_equal(lmc_json_get_string(at(v, "outcome_digest"), NULL), DIGEST_B);
    lmc_json_free(v);
    free(text);
}

static void test_json_config_without_a_header_digest_matches_nothing(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.header_digest = "";
    s.replay_digest = DIGEST_B;
    s.interrupted = true;
    const char *diffs[] = {"l1_size_gb"};
    s.config_diffs = diffs;
    s.n_config_diffs = 1;
    char *text = lmc_replay_report_json(&s);
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    assert_int_equal(lmc_json_type_of(at(at(v, "config"), "matches_trace")), LMC_JSON_NULL);
    assert_string_equal(
        lmc_json_get_string(lmc_json_array_at(at(at(v, "config"), "differs"), 0), NULL),
        "l1_size_gb");
    assert_string_equal(lmc_json_get_string(at(v, "status"), NULL), "interrupted");
    /* Without outcomes (a latency-only summary) the member is null, not absent. */
    assert_int_equal(lmc_json_type_of(at(v, "outcomes")), LMC_JSON_NULL);
    lmc_json_free(v);
    free(text);
}

/* ---- outcome sections and notes of the table ------------------------------ */

/* Fail unless text has the row "label:" + value right-aligned to column 64 (one space at least). */
static void assert_row(const char *text, const char *label, const char *value)
{
    char line[512];
    int pad = 64 - (int)strlen(label) - 1 - (int)strlen(value);
    snprintf(line, sizeof(line), "\n%s:%*s%s\n", label, pad < 1 ? 1 : pad, "", value);
    if (strstr(text, line) == NULL)
        fail_msg("missing row%sin:\n%s", line, text);
}

static void test_table_says_plainly_how_many_recorded_hits_were_lost(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    lmc_replay_totals t;
    outcome_summary(&s, ops, &t);
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "\n--------------------------- Outcomes ---------------------------\n"));
    assert_row(text, "Chunk hit rate", "50.0% (100 of 200 keys)");
    assert_row(text, "L1 hit rate", "40.0% (80 keys)");
    assert_row(text, "L2 hit rate", "10.0% (20 keys)");
    assert_row(text, "Recorded hits still hit", "73.1% (26.9% lost)");
    assert_row(text, "Recorded keys still found", "75.0% (1500 of 2000)");
    assert_row(text, "Failed reads", "269");
    assert_row(text, "Reservations refused (keys)", "8 of 48");
    assert_row(text, "  refused, out_of_memory", "8");
    assert_row(text, "L1 peak usage", "25.0 of 100.0 MiB (25.0%)");
    assert_row(text, "L1 evictions (keys)", "7");
    assert_row(text, "L2 stores", "40 keys, 40.0 MiB");
    assert_row(text, "Outcome digest", DIGEST_B);
    assert_non_null(strstr(text, "\nnote: 26.9% of the reads the trace recorded (each was a hit "
                                 "when recorded) did\n      not fully hit here: 269 reads missed "
                                 "500 keys: 450 not in L1, 0 still\n      loading from L2, 0 "
                                 "write-locked, 50 not read-locked, 0 other. The\n"));
    /* The refusals for want of room, and what L1's eviction loop did about them. */
    assert_non_null(strstr(text, "\nnote: 8 key(s) were refused for lack of room in L1 (peak "
                                 "usage 25.0 of 100.0\n      MiB)."));
    assert_non_null(strstr(text, "it evicted 7 key(s) in this replay."));
    /* Every note line fits the terminal. */
    for (const char *p = strstr(text, "\nnote: ") + 1; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        assert_true(len <= 78);
        p += len + (p[len] == '\n');
    }
    free(text);
}

static void test_engine_table_shows_its_hit_rate_beside_the_recordings(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    lmc_replay_totals t;
    outcome_summary(&s, ops, &t);
    /* Mode engine: 10 lookups served, the recorded reads not reissued. */
    t.records[LMC_TRACE_OP_READ_ENTER] = 0;
    t.keys[LMC_TRACE_OP_READ_ENTER] = 0;
    t.not_reissued[LMC_TRACE_OP_READ_ENTER] = 12;
    t.not_reissued_keys[LMC_TRACE_OP_READ_ENTER] = 60;
    t.not_reissued[LMC_TRACE_OP_RESERVE_WRITE] = 3;
    t.v[LMC_OC_SUBMIT_PREFETCH_hit_keys] = 90;
    t.v[LMC_OC_SUBMIT_PREFETCH_read] = 90;
    t.v[LMC_OC_SUBMIT_PREFETCH_stored] = 70;
    t.v[LMC_OC_SUBMIT_PREFETCH_store_present] = 10;
    t.v[LMC_OC_SUBMIT_PREFETCH_store_out_of_memory] = 30;
    s.figures = lmc_replay_figures_of(&t);
    s.mode = "engine";
    char *text = lmc_replay_report_table(&s);
    assert_non_null(text);
    assert_row(text, "Mode", "engine (lookups served as requests)");
    assert_row(text, "Records not reissued", "15");
    assert_row(text, "Engine hit rate", "45.0% (90 of 200 keys)");
    assert_row(text, "Recorded hit rate", "30.0% (the recording's own)");
    assert_row(text, "Requests", "10");
    assert_row(text, "Keys read", "90");
    assert_row(text, "Keys stored", "70");
    assert_row(text, "Stores refused (keys)", "40 of 110");
    assert_row(text, "  refused, present", "10");
    assert_row(text, "  refused, out_of_memory", "30");
    assert_row(text, "Chunk hit rate", "50.0% (100 of 200 keys)");
    /* Mode calls' comparison with the recorded reads does not apply. */
    assert_null(strstr(text, "Recorded hits still hit"));
    assert_null(strstr(text, "Reservations refused"));
    /* One note: the engine's 30 stores refused for want of room (none on recorded reads). */
    const char *n = strstr(text, "\nnote: ");
    assert_non_null(n);
    assert_true(strncmp(n, "\nnote: 30 key(s) were refused for lack of room in L1", 52) == 0);
    assert_null(strstr(n + 1, "\nnote: "));
    free(text);
    /* The result JSON says which mode it is, with the same figures. */
    text = lmc_replay_report_json(&s);
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    assert_string_equal(lmc_json_get_string(at(v, "mode"), NULL), "engine");
    const lmc_json *fig = at(at(v, "outcomes"), "figures");
    assert_true(lmc_json_get_number(at(fig, "engine_hit_rate")) == 0.45);
    assert_true(lmc_json_get_number(at(fig, "recorded_hit_rate")) == 0.3);
    assert_int_equal(lmc_json_get_int(at(fig, "not_reissued_records")), 15);
    lmc_json_free(v);
    free(text);
}

static void test_table_says_why_l1_refused_stores_only_when_it_did(void **state)
{
    (void)state;
    lmc_replay_summary s;
    lmc_op_stats ops[2];
    lmc_replay_totals t;
    outcome_summary(&s, ops, &t);
    t.v[LMC_OC_RESERVE_WRITE_out_of_memory] = 7736;
    t.l1_peak_used_bytes = t.l1_capacity_bytes;
    t.sm.l1_evicted_keys = 0;
    s.figures = lmc_replay_figures_of(&t);
    char *text = lmc_replay_report_table(&s);
    assert_non_null(strstr(text, "\nnote: 7736 key(s) were refused for lack of room in L1 (peak "
                                 "usage 100.0 of\n      100.0 MiB). L1 makes room only in its "
                                 "eviction loop, which looks once a\n      second"));
    assert_non_null(strstr(text, "it evicted nothing in this replay."));
    assert_non_null(strstr(text, "--l1-size-gb"));
    free(text);
    /* Nothing refused for want of room: no such note. */
    t.v[LMC_OC_RESERVE_WRITE_out_of_memory] = 0;
    s.figures = lmc_replay_figures_of(&t);
    text = lmc_replay_report_table(&s);
    assert_null(strstr(text, "lack of room"));
    free(text);
}

static void test_table_names_the_config_fields_that_differ(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.replay_digest = DIGEST_B;
    const char *diffs[] = {"l1_size_gb", "l2_adapter_config.adapters[0].base_path"};
    s.config_diffs = diffs;
    s.n_config_diffs = 2;
    char *text = lmc_replay_report_table(&s);
    assert_row(text, "Config digest", "MISMATCH (rec=0f685d8a, run=deadbeef)");
    assert_row(text, "Config differs", "l1_size_gb");
    assert_row(text, "Config differs", "l2_adapter_config.adapters[0].base_path");
    assert_non_null(strstr(text, "note: the replay's StorageManager config differs"));
    free(text);
}

static void test_table_says_when_the_replay_fell_behind_and_what_lateness_is(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.lateness = (lmc_lateness_stats){.count = 10, .p50_us = 100, .p99_us = 2310, .max_us = 5000};
    char why[128];
    assert_true(lmc_replay_behind_schedule(&s, why, sizeof(why)));
    assert_string_equal(why, "p99 2.31 ms > 1 ms");
    char *text = lmc_replay_report_table(&s);
    assert_row(text, "Behind schedule", "yes (p99 2.31 ms > 1 ms)");
    assert_non_null(strstr(text, "\nnote: the replay fell behind its schedule (p99 2.31 ms > 1 "
                                 "ms). Lateness is\n      how late each call started against its "
                                 "recorded time"));
    free(text);
    /* 1% of the mean gap: 150 us late when records are 10 ms apart is behind. */
    s.lateness.p99_us = 150;
    s.mean_gap_s = 0.010;
    assert_true(lmc_replay_behind_schedule(&s, why, sizeof(why)));
    assert_string_equal(why, "p99 150 us > 1% of the mean gap, 10000 us");
    s.mean_gap_s = 0.1;
    assert_false(lmc_replay_behind_schedule(&s, why, sizeof(why)));
}

static void test_table_of_an_interrupted_replay_says_it_is_partial(void **state)
{
    (void)state;
    lmc_replay_summary s = base_summary();
    s.interrupted = true;
    s.reported = 42;
    char *text = lmc_replay_report_table(&s);
    assert_row(text, "Status", "interrupted after 42 records");
    assert_non_null(strstr(text, "note: interrupted (Ctrl-C) after 42 records"));
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
        cmocka_unit_test(test_json_has_every_documented_field),
        cmocka_unit_test(test_json_config_without_a_header_digest_matches_nothing),
        cmocka_unit_test(test_table_says_plainly_how_many_recorded_hits_were_lost),
        cmocka_unit_test(test_table_says_why_l1_refused_stores_only_when_it_did),
        cmocka_unit_test(test_engine_table_shows_its_hit_rate_beside_the_recordings),
        cmocka_unit_test(test_table_names_the_config_fields_that_differ),
        cmocka_unit_test(test_table_says_when_the_replay_fell_behind_and_what_lateness_is),
        cmocka_unit_test(test_table_of_an_interrupted_replay_says_it_is_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
