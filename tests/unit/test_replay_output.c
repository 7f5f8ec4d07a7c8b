/*
 * test_replay_output.c -- the replay outputs (replay/output.h): the table
 * of formats, the CSV and summary JSON byte for byte, the JSONL records,
 * when each kind of output touches its file, and errors naming the path
 * (and the flag). Expected CSV and JSON texts were produced by python3
 * running the same steps as LMCache's _stats.py (csv.writer,
 * json.dumps(indent=2, sort_keys=True), statistics.fmean).
 */
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
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "helpers/file_test_util.h"
#include "replay/output.h"
#include "replay/stats.h"

/* ---- helpers ------------------------------------------------------------ */

static char tmpdir[64];

static int setup_tmpdir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/lmc_output_XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown_tmpdir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The whole file as a NUL-terminated string (caller frees). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (len + 2 > cap) {
            cap = cap ? cap * 2 : 256;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        buf[len++] = (char)c;
    }
    fclose(f);
    if (buf == NULL)
        buf = calloc(1, 1);
    buf[len] = '\0';
    return buf;
}

static lmc_replay_stats *export_example(void)
{
    lmc_replay_stats *s = lmc_replay_stats_create();
    assert_non_null(s);
    lmc_replay_stats_record(s, "b.op", 0.001, false);
    lmc_replay_stats_record(s, "b.op", 0.0025, false);
    lmc_replay_stats_record(s, "b.op", 0.0003, false);
    for (int i = 0; i < 3; i++)
        lmc_replay_stats_record(s, "a.op", 0.0001, false);
    lmc_replay_stats_record(s, "a.op", 0.5, true);
    lmc_replay_stats_record(s, "c,\"q", 0.1, true);
    lmc_replay_stats_record_lateness(s, 0.000012);
    lmc_replay_stats_record_lateness(s, 0.0000305);
    lmc_replay_stats_record_lateness(s, 0.0);
    lmc_replay_stats_mark_start(s, 1000.25);
    lmc_replay_stats_mark_end(s, 1002.0);
    return s;
}

/* Render stats through the output called name into path (flag NULL), as a replay's end does. */
static lmc_status write_format(const char *name, lmc_replay_stats *s, const char *path,
                               lmc_error *err)
{
    lmc_replay_result res = {.stats = s};
    lmc_replay_summary sum;
    assert_int_equal(lmc_replay_summary_init(&sum, &res, 1.0), LMC_OK);
    const lmc_replay_output_format *f = lmc_replay_output_find(name);
    assert_non_null(f);
    lmc_replay_output *o;
    /* A path that cannot be written fails at open, before any record is replayed. */
    lmc_status st = lmc_replay_output_open(f, path, NULL, &o, err);
    if (st != LMC_OK) {
        lmc_replay_summary_free(&sum);
        return st;
    }
    st = lmc_replay_output_finish(o, &sum, err);
    lmc_replay_output_destroy(o);
    lmc_replay_summary_free(&sum);
    return st;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- the table ---------------------------------------------------------- */

static void test_the_table_lists_every_format_once(void **state)
{
    (void)state;
    static const char *const want[] = {"table",        "json",  "csv", "outcomes-csv",
                                       "summary-json", "jsonl", "html"};
    size_t n = 0;
    while (lmc_replay_output_at(n) != NULL)
        n++;
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(lmc_replay_output_at(i)->name, want[i]);
        assert_ptr_equal(lmc_replay_output_find(want[i]), lmc_replay_output_at(i));
    }
    assert_null(lmc_replay_output_find("xml"));
}

static void test_formats_have_a_per_record_part_a_final_part_or_both(void **state)
{
    (void)state;
    const lmc_replay_output_format *f;
    for (size_t i = 0; (f = lmc_replay_output_at(i)) != NULL; i++)
        assert_true(f->record != NULL || f->render != NULL);
    assert_string_equal(lmc_replay_output_csv.default_file, "trace_replay_ops.csv");
    assert_string_equal(lmc_replay_output_summary_json.default_file, "trace_replay_summary.json");
    assert_string_equal(lmc_replay_output_outcomes_csv.default_file, "trace_replay_outcomes.csv");
    assert_null(lmc_replay_output_jsonl.render);
}

/* ---- CSV ------------------------------------------------------------------ */

static void test_csv_of_empty_collector_is_the_header_row(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/empty.csv", tmpdir);
    lmc_replay_stats *s = lmc_replay_stats_create();
    assert_int_equal(write_format("csv", s, path, NULL), LMC_OK);
    char *text = slurp(path);
    assert_string_equal(text,
                        "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r\n");
    free(text);
    lmc_replay_stats_destroy(s);
}

static void test_csv_rows_are_sorted_crlf_terminated_and_six_place_floats(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/ops.csv", tmpdir);
    lmc_replay_stats *s = export_example();
    assert_int_equal(write_format("csv", s, path, NULL), LMC_OK);
    char *text = slurp(path);
    assert_string_equal(
        text, "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r\n"
              "a.op,3,1,0.100000,0.100000,0.100000,0.100000,0.100000,0.100000\r\n"
              "b.op,3,0,1.266667,1.000000,2.500000,2.500000,0.300000,2.500000\r\n"
              "\"c,\"\"q\",0,1,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000\r\n");
    free(text);
    lmc_replay_stats_destroy(s);
}

static void test_csv_quotes_qualnames_with_line_breaks(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/nl.csv", tmpdir);
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_replay_stats_record(s, "a\nb", 0.0, true);
    lmc_replay_stats_record(s, "c\rd", 0.0, true);
    assert_int_equal(write_format("csv", s, path, NULL), LMC_OK);
    char *text = slurp(path);
    assert_string_equal(text,
                        "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r\n"
                        "\"a\nb\",0,1,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000\r\n"
                        "\"c\rd\",0,1,0.000000,0.000000,0.000000,0.000000,0.000000,0.000000\r\n");
    free(text);
    lmc_replay_stats_destroy(s);
}

static void test_csv_into_missing_directory_is_an_io_error_naming_the_path(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/missing/ops.csv", tmpdir);
    lmc_replay_stats *s = export_example();
    lmc_error err;
    lmc_error_clear(&err);
    assert_int_equal(write_format("csv", s, path, &err), LMC_ERR_IO);
    char want[256];
    snprintf(want, sizeof(want), "cannot write '%s': No such file or directory", path);
    assert_string_equal(err.msg, want);
    lmc_replay_stats_destroy(s);
}

/* ---- JSON ----------------------------------------------------------------- */

static void test_json_has_duration_and_op_counts(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/summary.json", tmpdir);
    lmc_replay_stats *s = export_example();
    assert_int_equal(write_format("summary-json", s, path, NULL), LMC_OK);
    char *text = slurp(path);
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    assert_true(lmc_json_get_number(lmc_json_object_get(v, "duration_s")) == 1.75);
    lmc_json *ops = lmc_json_object_get(v, "ops");
    assert_non_null(ops);
    lmc_json *count = lmc_json_object_get(lmc_json_object_get(ops, "b.op"), "count");
    assert_int_equal(lmc_json_type_of(count), LMC_JSON_INT);
    assert_int_equal(lmc_json_get_int(count), 3);
    lmc_json_free(v);
    free(text);
    lmc_replay_stats_destroy(s);
}

/* The summary file's text, parsed. */
static lmc_json *summary_of(lmc_replay_stats *s, const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    assert_int_equal(write_format("summary-json", s, path, NULL), LMC_OK);
    char *text = slurp(path);
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    free(text);
    return v;
}

static void test_json_ops_keep_lmcache_shape_and_python_floats(void **state)
{
    (void)state;
    lmc_replay_stats *s = export_example();
    lmc_json *v = summary_of(s, "exact.json");
    /* "ops" as LMCache's _stats.py writes it (json.dumps(indent=2, sort_keys=True)). */
    char *ops = lmc_json_dumps(lmc_json_object_get(v, "ops"), LMC_JSON_SORT_KEYS, 2, NULL);
    assert_string_equal(ops, "{\n"
                             "  \"a.op\": {\n"
                             "    \"count\": 3,\n"
                             "    \"errors\": 1,\n"
                             "    \"max_ms\": 0.1,\n"
                             "    \"mean_ms\": 0.10000000000000002,\n"
                             "    \"min_ms\": 0.1,\n"
                             "    \"p50_ms\": 0.1,\n"
                             "    \"p90_ms\": 0.1,\n"
                             "    \"p99_ms\": 0.1\n"
                             "  },\n"
                             "  \"b.op\": {\n"
                             "    \"count\": 3,\n"
                             "    \"errors\": 0,\n"
                             "    \"max_ms\": 2.5,\n"
                             "    \"mean_ms\": 1.2666666666666666,\n"
                             "    \"min_ms\": 0.3,\n"
                             "    \"p50_ms\": 1.0,\n"
                             "    \"p90_ms\": 2.5,\n"
                             "    \"p99_ms\": 2.5\n"
                             "  },\n"
                             "  \"c,\\\"q\": {\n"
                             "    \"count\": 0,\n"
                             "    \"errors\": 1,\n"
                             "    \"max_ms\": 0.0,\n"
                             "    \"mean_ms\": 0.0,\n"
                             "    \"min_ms\": 0.0,\n"
                             "    \"p50_ms\": 0.0,\n"
                             "    \"p90_ms\": 0.0,\n"
                             "    \"p99_ms\": 0.0\n"
                             "  }\n"
                             "}");
    free(ops);
    char *late = lmc_json_dumps(lmc_json_object_get(v, "lateness"), 0, -1, NULL);
    assert_string_equal(late, "{\"count\": 3, \"mean_us\": 14.166666666666666, \"p50_us\": 12.0, "
                              "\"p99_us\": 30.5, \"max_us\": 30.5, \"mean_gap_us\": 0.0, "
                              "\"behind_schedule\": false}");
    free(late);
    lmc_json_free(v);
    lmc_replay_stats_destroy(s);
}

static void test_json_of_empty_collector_has_empty_ops(void **state)
{
    (void)state;
    lmc_replay_stats *s = lmc_replay_stats_create();
    lmc_json *v = summary_of(s, "empty.json");
    assert_true(lmc_json_get_number(lmc_json_object_get(v, "duration_s")) == 0.0);
    assert_int_equal(lmc_json_size(lmc_json_object_get(v, "ops")), 0);
    assert_int_equal(
        lmc_json_get_int(lmc_json_object_get(lmc_json_object_get(v, "lateness"), "count")), 0);
    lmc_json_free(v);
    lmc_replay_stats_destroy(s);
}

static void test_summary_json_and_format_json_are_one_text(void **state)
{
    (void)state;
    char a[128], b[128];
    snprintf(a, sizeof(a), "%s/summary.json", tmpdir);
    snprintf(b, sizeof(b), "%s/result.json", tmpdir);
    lmc_replay_stats *s = export_example();
    assert_int_equal(write_format("summary-json", s, a, NULL), LMC_OK);
    assert_int_equal(write_format("json", s, b, NULL), LMC_OK);
    char *ta = slurp(a), *tb = slurp(b);
    /* Only started_at could differ, and both summaries have the same start mark. */
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    lmc_replay_stats_destroy(s);
}

static void test_json_into_missing_directory_is_an_io_error_naming_the_path(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/missing/summary.json", tmpdir);
    lmc_replay_stats *s = export_example();
    lmc_error err;
    lmc_error_clear(&err);
    assert_int_equal(write_format("summary-json", s, path, &err), LMC_ERR_IO);
    char want[256];
    snprintf(want, sizeof(want), "cannot write '%s': No such file or directory", path);
    assert_string_equal(err.msg, want);
    lmc_replay_stats_destroy(s);
}

/* ---- JSONL --------------------------------------------------------------- */

static void test_jsonl_writes_one_object_per_record_as_the_replay_runs(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/rec.jsonl", tmpdir);
    lmc_replay_output *o;
    assert_int_equal(
        lmc_replay_output_open(&lmc_replay_output_jsonl, path, "--jsonl-out", &o, NULL), LMC_OK);
    assert_true(exists(path)); /* created at open: a bad path fails before the replay */
    lmc_replay_outcome out;
    lmc_replay_outcome_begin(&out, LMC_TRACE_OP_FINISH_WRITE, NULL, 3);
    out.v[LMC_OC_FINISH_WRITE_finished] = 2;
    out.v[LMC_OC_FINISH_WRITE_not_in_l1] = 1;
    lmc_replay_record_view ok = {.index = 1,
                                 .qualname = "a.finish_write",
                                 .latency_s = 0.00125,
                                 .t_mono = 0.5,
                                 .lateness_s = 0.0000025,
                                 .outcome = &out};
    lmc_replay_record_view bad = {
        .index = 2, .qualname = "a.finish_write", .latency_s = 0.5, .failed = true, .t_mono = 1.0};
    lmc_replay_record_view skipped = {
        .index = 3, .qualname = "x.\"odd\"", .failed = true, .skipped = true, .t_mono = 2.0};
    /* Not timed (--pace virtual): the lateness is null, not a number. */
    lmc_replay_record_view untimed = {.index = 4,
                                      .qualname = "a.finish_write",
                                      .latency_s = 0.001,
                                      .t_mono = 3.0,
                                      .lateness_s = -1.0,
                                      .outcome = &out};
    lmc_replay_output_record(o, &ok);
    lmc_replay_output_record(o, &bad);
    lmc_replay_output_record(o, &skipped);
    lmc_replay_output_record(o, &untimed);
    assert_int_equal(lmc_replay_output_finish(o, NULL, NULL), LMC_OK);
    lmc_replay_output_destroy(o);
    char *text = slurp(path);
    assert_string_equal(text,
                        "{\"index\": 1, \"t_mono\": 0.5, \"lateness_us\": 2.5, \"qualname\": "
                        "\"a.finish_write\", \"n_keys\": 3, \"latency_ms\": 1.25, \"failed\": "
                        "false, \"skipped\": false, \"outcome\": {\"op\": \"finish_write\", "
                        "\"finished\": 2, \"not_in_l1\": 1, \"not_reserved\": 0, \"other\": 0}}\n"
                        "{\"index\": 2, \"t_mono\": 1.0, \"lateness_us\": 0.0, \"qualname\": "
                        "\"a.finish_write\", \"n_keys\": 0, \"latency_ms\": 500.0, \"failed\": "
                        "true, \"skipped\": false, \"outcome\": null}\n"
                        "{\"index\": 3, \"t_mono\": 2.0, \"lateness_us\": 0.0, \"qualname\": "
                        "\"x.\\\"odd\\\"\", \"n_keys\": 0, \"latency_ms\": 0.0, \"failed\": true, "
                        "\"skipped\": true, \"outcome\": null}\n"
                        "{\"index\": 4, \"t_mono\": 3.0, \"lateness_us\": null, \"qualname\": "
                        "\"a.finish_write\", \"n_keys\": 3, \"latency_ms\": 1.0, \"failed\": "
                        "false, \"skipped\": false, \"outcome\": {\"op\": \"finish_write\", "
                        "\"finished\": 2, \"not_in_l1\": 1, \"not_reserved\": 0, \"other\": 0}}\n");
    free(text);
}

static void test_jsonl_into_missing_directory_fails_at_open_naming_flag_and_path(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/missing/rec.jsonl", tmpdir);
    lmc_replay_output *o = (lmc_replay_output *)1;
    lmc_error err;
    assert_int_equal(
        lmc_replay_output_open(&lmc_replay_output_jsonl, path, "--jsonl-out", &o, &err),
        LMC_ERR_IO);
    assert_null(o);
    char want[256];
    snprintf(want, sizeof(want), "cannot write --jsonl-out '%s': No such file or directory", path);
    assert_string_equal(err.msg, want);
}

/* A full device takes the records into stdio's buffer; the close that
 * flushes them fails, and finish says so in the outputs' words. */
static void test_jsonl_into_a_full_device_fails_at_finish_naming_flag_and_path(void **state)
{
    (void)state;
    file_test_need_dev_full();
    lmc_replay_output *o;
    assert_int_equal(
        lmc_replay_output_open(&lmc_replay_output_jsonl, "/dev/full", "--jsonl-out", &o, NULL),
        LMC_OK);
    lmc_replay_record_view rec = {.index = 1, .qualname = "a.op", .latency_s = 0.001};
    lmc_replay_output_record(o, &rec);
    lmc_error err;
    assert_int_equal(lmc_replay_output_finish(o, NULL, &err), LMC_ERR_IO);
    assert_string_equal(err.msg, "cannot write --jsonl-out '/dev/full': No space left on device");
    lmc_replay_output_destroy(o);
    file_test_assert_dev_full_kept();
}

/* ---- final outputs ------------------------------------------------------- */

static void test_a_final_output_touches_its_file_only_when_finished(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/never.csv", tmpdir);
    lmc_replay_output *o;
    assert_int_equal(lmc_replay_output_open(&lmc_replay_output_csv, path, NULL, &o, NULL), LMC_OK);
    lmc_replay_record_view rec = {.index = 1, .qualname = "a.op", .latency_s = 0.001};
    lmc_replay_output_record(o, &rec); /* no per-record part: ignored */
    lmc_replay_output_destroy(o);      /* a replay that failed: nothing written */
    assert_false(exists(path));
}

static void test_a_final_output_checks_its_path_at_open_and_keeps_an_existing_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/kept.json", tmpdir);
    FILE *f = fopen(path, "w");
    fputs("old", f);
    fclose(f);
    lmc_replay_output *o;
    assert_int_equal(lmc_replay_output_open(&lmc_replay_output_summary_json, path, NULL, &o, NULL),
                     LMC_OK);
    lmc_replay_output_destroy(o);
    char *text = slurp(path);
    assert_string_equal(text, "old"); /* checked, not truncated */
    free(text);
    /* A directory where the file should go: refused at open. */
    lmc_error err;
    assert_int_equal(lmc_replay_output_open(&lmc_replay_output_csv, tmpdir, "--output", &o, &err),
                     LMC_ERR_IO);
    char want[256];
    snprintf(want, sizeof(want), "cannot write --output '%s': Is a directory", tmpdir);
    assert_string_equal(err.msg, want);
}

static void test_the_result_table_in_a_file_is_the_report_text(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/result.txt", tmpdir);
    lmc_replay_stats *s = export_example();
    lmc_replay_result res = {.stats = s, .replayed = 6, .failed = 2};
    snprintf(res.level, sizeof(res.level), "storage");
    lmc_replay_summary sum;
    assert_int_equal(lmc_replay_summary_init(&sum, &res, 2.0), LMC_OK);
    assert_int_equal(sum.n_ops, 3);
    assert_true(sum.duration_s == 1.75);
    assert_true(sum.time_scale == 2.0);
    lmc_replay_output *o;
    assert_int_equal(lmc_replay_output_open(&lmc_replay_output_table, path, "--output", &o, NULL),
                     LMC_OK);
    assert_int_equal(lmc_replay_output_finish(o, &sum, NULL), LMC_OK);
    lmc_replay_output_destroy(o);
    char *want = lmc_replay_report_table(&sum);
    char *text = slurp(path);
    assert_string_equal(text, want);
    free(text);
    free(want);
    lmc_replay_summary_free(&sum);
    lmc_replay_stats_destroy(s);
}

static void test_the_html_report_has_a_cdf_per_op_and_the_result_table(void **state)
{
    (void)state;
    lmc_replay_stats *s = export_example();
    char path[128];
    snprintf(path, sizeof(path), "%s/report.html", tmpdir);
    lmc_error err;
    assert_int_equal(write_format("html", s, path, &err), LMC_OK);
    char *html = slurp(path);
    assert_non_null(strstr(html, "<title>Trace replay</title>"));
    assert_non_null(strstr(html, "<figure id=\"latency-cdf\">"));
    /* One CDF line per op with latency samples (a.op, b.op: 3 calls each; short names), in us. */
    const char *first = strstr(html, ">op (3 calls)</text>");
    assert_non_null(first);
    assert_non_null(strstr(first + 1, ">op (3 calls)</text>"));
    assert_non_null(strstr(html, " us</text>"));
    /* No series was collected: the report says so instead of drawing empty charts. */
    assert_non_null(strstr(html, "No figures over time were collected"));
    assert_non_null(strstr(html, "<caption>Per-Op Latency (ms)</caption>"));
    assert_null(strstr(html, "<script"));
    free(html);
    lmc_replay_stats_destroy(s);
}

static void test_a_path_that_cannot_be_written_names_the_flag_and_the_path(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/missing/result.json", tmpdir);
    lmc_replay_output *o = (lmc_replay_output *)1;
    lmc_error err;
    /* Checked at open, so the replay never runs with an output it cannot write. */
    assert_int_equal(lmc_replay_output_open(&lmc_replay_output_json, path, "--output", &o, &err),
                     LMC_ERR_IO);
    assert_null(o);
    char want[256];
    snprintf(want, sizeof(want), "cannot write --output '%s': No such file or directory", path);
    assert_string_equal(err.msg, want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_table_lists_every_format_once),
        cmocka_unit_test(test_formats_have_a_per_record_part_a_final_part_or_both),
        cmocka_unit_test(test_csv_of_empty_collector_is_the_header_row),
        cmocka_unit_test(test_csv_rows_are_sorted_crlf_terminated_and_six_place_floats),
        cmocka_unit_test(test_csv_quotes_qualnames_with_line_breaks),
        cmocka_unit_test(test_csv_into_missing_directory_is_an_io_error_naming_the_path),
        cmocka_unit_test(test_json_has_duration_and_op_counts),
        cmocka_unit_test(test_json_ops_keep_lmcache_shape_and_python_floats),
        cmocka_unit_test(test_json_of_empty_collector_has_empty_ops),
        cmocka_unit_test(test_summary_json_and_format_json_are_one_text),
        cmocka_unit_test(test_json_into_missing_directory_is_an_io_error_naming_the_path),
        cmocka_unit_test(test_jsonl_writes_one_object_per_record_as_the_replay_runs),
        cmocka_unit_test(test_jsonl_into_missing_directory_fails_at_open_naming_flag_and_path),
        cmocka_unit_test(test_jsonl_into_a_full_device_fails_at_finish_naming_flag_and_path),
        cmocka_unit_test(test_a_final_output_touches_its_file_only_when_finished),
        cmocka_unit_test(test_a_final_output_checks_its_path_at_open_and_keeps_an_existing_file),
        cmocka_unit_test(test_the_result_table_in_a_file_is_the_report_text),
        cmocka_unit_test(test_the_html_report_has_a_cdf_per_op_and_the_result_table),
        cmocka_unit_test(test_a_path_that_cannot_be_written_names_the_flag_and_the_path),
    };
    return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
