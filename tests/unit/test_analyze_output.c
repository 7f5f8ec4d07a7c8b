/*
 * test_analyze_output.c -- the renderings of an analysis: the JSON
 * document's schema (every documented field, its type, the figures it
 * carries), the terminal table's sections and figures, the CSV files, and
 * the HTML report's elements; trace strings escaped in each.
 *
 * The result comes from a real pass over a small trace written here, so
 * the renderings are checked against what the analysis computed.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/output.h"
#include "core/json.h"
#include "helpers/trace_test_util.h"
#include "trace/format.h"

#define Q(m) LMC_TRACE_QUALNAME_PREFIX m

typedef struct fixture {
    tt_trace_file file;
    const char *path;
    char *dir;
    lmc_analyze_result r;
    lmc_analyze_source src;
} fixture;

/*
 * 30 lookups of 4 keys of 4 KiB over 12 distinct keys of model "m<x>\x1b[0m" (a name to escape
 * in HTML and on a terminal).
 */
static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    tt_trace_file_init(&f->file, "");
    f->path = f->file.path;
    f->dir = f->file.dir;
    msgpack_sbuffer *sb = &f->file.sb;
    int64_t bytes = 4096;
    lmc_layout_desc l;
    assert_int_equal(lmc_layout_desc_make1(&l, &bytes, 1, LMC_DTYPE_UINT8, NULL), LMC_OK);
    for (int i = 0; i < 30; i++) {
        lmc_object_key k[4];
        lmc_tv items[4];
        for (int j = 0; j < 4; j++) {
            k[j] = tt_key("m<x>\x1b[0m", (uint32_t)((i % 3) * 4 + j), 0, 0, NULL);
            items[j] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &k[j]};
        }
        lmc_trace_arg args[2] = {{"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, 4}}},
                                 {"layout_desc", 11, {.kind = LMC_TV_LAYOUT, .u.layout = &l}}};
        const char *q = Q("submit_prefetch_task");
        assert_int_equal(lmc_trace_encode_record(sb, i * 0.5, 1e9, q, strlen(q), args, 2, NULL),
                         LMC_OK);
        q = Q("read_prefetched_results.__enter__");
        if (i >= 3)
            assert_int_equal(
                lmc_trace_encode_record(sb, i * 0.5 + 0.1, 1e9, q, strlen(q), args, 1, NULL),
                LMC_OK);
    }
    tt_trace_file_write(&f->file);
    uint64_t sizes[1] = {1ull << 30};
    lmc_analyze_options o = {.full = true, .sample_rate = 1, .sizes = sizes, .n_sizes = 1};
    lmc_error err;
    if (lmc_analyze_file(f->path, &o, &f->r, &err) != LMC_OK)
        fail_msg("%s", err.msg);
    f->src = (lmc_analyze_source){.path = f->path,
                                  .digest = "00ff",
                                  .file_bytes = 1234,
                                  .command = "lmcache trace analyze <t.lct>"};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    lmc_analyze_result_free(&f->r);
    tt_trace_file_free(&f->file);
    free(f);
    return 0;
}

static lmc_json *get(const lmc_json *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const lmc_json *v = o;
    for (char *save = NULL, *part = strtok_r(buf, ".", &save); part != NULL;
         part = strtok_r(NULL, ".", &save)) {
        v = lmc_json_object_get(v, part);
        if (v == NULL)
            fail_msg("JSON has no %s", path);
    }
    return (lmc_json *)v;
}

static void assert_type(const lmc_json *o, const char *path, lmc_json_type t)
{
    const lmc_json *v = get(o, path);
    if (lmc_json_type_of(v) != t)
        fail_msg("%s is %s, not %s", path, lmc_json_type_name(lmc_json_type_of(v)),
                 lmc_json_type_name(t));
}

static void test_json_has_every_documented_field(void **state)
{
    fixture *f = *state;
    char *text = lmc_analyze_format_json(&f->src, &f->r);
    assert_non_null(text);
    lmc_json *j;
    lmc_error err;
    if (lmc_json_parse(text, strlen(text), &j, &err) != LMC_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(lmc_json_get_string(get(j, "schema"), NULL), LMC_ANALYZE_SCHEMA);
    assert_int_equal(lmc_json_get_int(get(j, "schema_version")), LMC_ANALYZE_SCHEMA_VERSION);
    assert_string_equal(lmc_json_get_string(get(j, "tool.name"), NULL), "lmcache");
    assert_type(j, "tool.version", LMC_JSON_STRING);
    assert_string_equal(lmc_json_get_string(get(j, "trace.path"), NULL), f->path);
    assert_string_equal(lmc_json_get_string(get(j, "trace.digest"), NULL), "00ff");
    assert_int_equal(lmc_json_get_int(get(j, "trace.bytes")), 1234);
    assert_string_equal(lmc_json_get_string(get(j, "trace.level"), NULL), "storage");
    assert_int_equal(lmc_json_get_int(get(j, "trace.trace_schema_version")), 2);
    assert_type(j, "trace.sm_config_digest", LMC_JSON_NULL);
    assert_int_equal(lmc_json_get_int(get(j, "trace.records")), 57);
    assert_int_equal(lmc_json_get_int(get(j, "trace.dropped_records")), 0);
    assert_int_equal(lmc_json_get_int(get(j, "trace.malformed_records")), 0);
    assert_int_equal(lmc_json_get_int(get(j, "trace.undecodable_records")), 0);
    assert_false(lmc_json_get_bool(get(j, "trace.truncated")));
    assert_true(lmc_json_get_number(get(j, "trace.span_s")) == 14.6);
    assert_true(lmc_json_get_bool(get(j, "analysis.exact")));
    assert_true(lmc_json_get_number(get(j, "analysis.sample_rate")) == 1.0);
    assert_int_equal(lmc_json_size(get(j, "analysis.requested_sizes_bytes")), 1);
    assert_string_equal(lmc_json_get_string(get(j, "analysis.command"), NULL),
                        "lmcache trace analyze <t.lct>");
    assert_int_equal(lmc_json_get_int(get(j, "workload.requests")), 30);
    assert_int_equal(lmc_json_get_int(get(j, "workload.keys_looked_up")), 120);
    assert_int_equal(lmc_json_get_int(get(j, "workload.unique_keys")), 12);
    assert_int_equal(lmc_json_get_int(get(j, "workload.footprint_bytes")), 12 * 4096);
    assert_false(lmc_json_get_bool(get(j, "workload.estimated")));
    assert_int_equal(lmc_json_get_int(get(j, "workload.object_bytes_min")), 4096);
    assert_int_equal(lmc_json_get_int(get(j, "workload.object_bytes_max")), 4096);
    assert_int_equal(lmc_json_get_int(get(j, "workload.unsized_requests")), 0);
    assert_int_equal(lmc_json_get_int(get(j, "workload.keys_read")), 108);
    assert_true(lmc_json_get_number(get(j, "workload.recorded_hit_rate")) == 0.9);

    lmc_json *groups = get(j, "groups");
    assert_int_equal(lmc_json_size(groups), 1);
    lmc_json *g = lmc_json_array_at(groups, 0);
    assert_string_equal(lmc_json_get_string(get(g, "model_name"), NULL), "m<x>\x1b[0m");
    assert_string_equal(lmc_json_get_string(get(g, "cache_salt"), NULL), "");
    assert_int_equal(lmc_json_get_int(get(g, "requests")), 30);
    assert_int_equal(lmc_json_get_int(get(g, "keys_looked_up")), 120);
    assert_int_equal(lmc_json_get_int(get(g, "unique_keys")), 12);
    assert_int_equal(lmc_json_get_int(get(g, "footprint_bytes")), 12 * 4096);
    assert_int_equal(lmc_json_get_int(get(g, "keys_read")), 108);
    assert_true(lmc_json_get_number(get(g, "recorded_hit_rate")) == 0.9);

    assert_true(lmc_json_get_number(get(j, "rates.bucket_s")) == 0.25);
    assert_type(j, "rates.mean_requests_per_s", LMC_JSON_FLOAT);
    assert_true(lmc_json_get_number(get(j, "rates.peak_requests_per_s")) == 4.0);
    assert_type(j, "rates.mean_keys_per_s", LMC_JSON_FLOAT);
    assert_true(lmc_json_get_number(get(j, "rates.peak_keys_per_s")) == 16.0);
    lmc_json *buckets = get(j, "rates.buckets");
    assert_int_equal(lmc_json_size(buckets), f->r.n_buckets);
    lmc_json *b0 = lmc_json_array_at(buckets, 0);
    assert_true(lmc_json_get_number(get(b0, "t_s")) == 0.0);
    assert_true(lmc_json_get_number(get(b0, "requests_per_s")) == 4.0);
    assert_true(lmc_json_get_number(get(b0, "keys_per_s")) == 16.0);
    assert_type(b0, "keys_read_per_s", LMC_JSON_FLOAT);

    assert_int_equal(lmc_json_get_int(get(j, "reuse.accesses")), 120);
    assert_int_equal(lmc_json_get_int(get(j, "reuse.cold")), 12);
    lmc_json *rk = get(j, "reuse.keys");
    uint64_t sum = 0;
    for (size_t i = 0; i < lmc_json_size(rk); i++) {
        lmc_json *e = lmc_json_array_at(rk, i);
        assert_true(lmc_json_get_int(get(e, "lo")) <= lmc_json_get_int(get(e, "hi")));
        sum += (uint64_t)lmc_json_get_int(get(e, "accesses"));
    }
    assert_int_equal(sum, 108);
    assert_type(j, "reuse.bytes", LMC_JSON_ARRAY);

    assert_string_equal(lmc_json_get_string(get(j, "mrc.policy"), NULL), "LRU");
    assert_true(lmc_json_get_bool(get(j, "mrc.exact")));
    assert_true(lmc_json_get_number(get(j, "mrc.sample_rate")) == 1.0);
    assert_int_equal(lmc_json_get_int(get(j, "mrc.accesses")), 120);
    assert_int_equal(lmc_json_get_int(get(j, "mrc.cold_misses")), 12);
    assert_true(lmc_json_get_number(get(j, "mrc.max_hit_rate")) == 0.9);
    lmc_json *points = get(j, "mrc.points");
    assert_int_equal(lmc_json_size(points), f->r.mrc.n_points);
    lmc_json *last = lmc_json_array_at(points, lmc_json_size(points) - 1);
    assert_int_equal(lmc_json_get_int(get(last, "capacity_bytes")), 1ll << 30);
    assert_true(lmc_json_get_number(get(last, "capacity_gib")) == 1.0);
    assert_true(lmc_json_get_number(get(last, "hit_rate")) == 0.9);
    assert_true(lmc_json_get_number(get(last, "error_bound")) == 0.0);
    assert_true(lmc_json_get_bool(get(last, "requested")));
    lmc_json_free(j);
    free(text);
}

static void assert_contains(const char *text, const char *want)
{
    if (strstr(text, want) == NULL)
        fail_msg("missing '%s' in:\n%s", want, text);
}

static void test_terminal_table_has_its_sections_and_figures(void **state)
{
    fixture *f = *state;
    char *text = lmc_analyze_format_terminal(&f->src, &f->r);
    assert_non_null(text);
    assert_contains(text, "Trace analysis: ");
    assert_contains(text, "  digest:                     00ff\n");
    assert_contains(text, "  analysis:                   exact (every key)\n");
    assert_contains(text, "\nWorkload\n");
    assert_contains(text, "  requests (lookups):         30\n");
    assert_contains(text, "  keys looked up:             120 (4.0 per request)\n");
    assert_contains(text, "  unique keys:                12\n");
    assert_contains(text, "  footprint:                  48 KiB (49,152 bytes)\n");
    assert_contains(text, "  object size:                4 KiB\n");
    assert_contains(text,
                    "\nRecorded hit rate\n  keys read / looked up:      90.00% (108 of 120)\n");
    assert_contains(text, "\nPer model / cache_salt\n");
    assert_contains(text, "m<x>\\x1b[0m");
    assert_null(strchr(text, '\x1b'));
    assert_contains(text, "\nLRU miss-ratio curve (chunk hit rate against L1 capacity; exact)\n");
    assert_contains(text, "  * 1 GiB           90.00%   (requested)\n");
    assert_contains(text, "holds the footprint");
    assert_contains(text,
                    "\nReuse distance (distinct keys since the previous access of the key)\n");
    assert_contains(text,
                    "\nReuse distance (distinct bytes since the previous access of the key)\n");
    assert_contains(text, "  cold (first access)                12   10.00%\n");
    free(text);
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return buf;
}

static void test_csv_files_have_their_headers_and_a_row_per_point(void **state)
{
    fixture *f = *state;
    lmc_error err;
    assert_int_equal(lmc_analyze_write_csv(f->dir, &f->r, &err), LMC_OK);
    char path[256];
    snprintf(path, sizeof(path), "%s/mrc.csv", f->dir);
    char *mrc = slurp(path);
    assert_true(strncmp(mrc, "capacity_bytes,capacity_gib,hit_rate,error_bound,requested\n", 59) ==
                0);
    size_t lines = 0;
    for (char *p = mrc; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, f->r.mrc.n_points + 1);
    assert_contains(mrc, "\n1073741824,1,0.900000,0.000000,1\n");
    snprintf(path, sizeof(path), "%s/reuse.csv", f->dir);
    char *reuse = slurp(path);
    assert_true(strncmp(reuse, "unit,lo,hi,accesses\nkeys,0,0,", 29) == 0);
    assert_contains(reuse, "\nbytes,");
    assert_contains(reuse, "\ncold,,,12\n");
    snprintf(path, sizeof(path), "%s/rates.csv", f->dir);
    char *rates = slurp(path);
    assert_true(strncmp(rates,
                        "t_s,requests_per_s,keys_per_s,keys_read_per_s\n"
                        "0.000000,4.000000,16.000000,0.000000\n",
                        83) == 0);
    assert_int_equal(lmc_analyze_write_csv("/nonexistent-dir", &f->r, &err), LMC_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/mrc.csv"));
}

static void test_html_report_names_the_trace_and_has_every_chart(void **state)
{
    fixture *f = *state;
    char *html = lmc_analyze_format_html(&f->src, &f->r);
    assert_non_null(html);
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    assert_contains(html, "<title>Trace analysis</title>");
    assert_contains(html, f->path);
    assert_contains(html, "<dd>00ff</dd>");
    assert_contains(html, "lmcache trace analyze &lt;t.lct&gt;");
    assert_contains(html, "<table id=\"workload\">");
    assert_contains(html, "<table id=\"groups\">");
    assert_contains(html, "<td>m&lt;x&gt;\xef\xbf\xbd[0m</td>");
    assert_null(strchr(html, '\x1b'));
    assert_contains(html, "<figure id=\"mrc\">");
    assert_contains(html, "<figure id=\"request-rate\">");
    assert_contains(html, "<figure id=\"key-rate\">");
    assert_contains(html, "<figure id=\"reuse-keys\">");
    assert_contains(html, "<figure id=\"reuse-bytes\">");
    assert_contains(html, "L1 capacity (log scale");
    assert_contains(html, "chunk hit rate");
    assert_contains(html, ">LRU, exact</text>");
    assert_contains(html, ">recorded hit rate</text>");
    assert_contains(html, ">requested sizes</text>");
    assert_contains(html, ">1 GiB</text>");
    /* Nothing fetched from anywhere, nothing run. */
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "@import"));
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "<x>"));
    free(html);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_json_has_every_documented_field),
        T(test_terminal_table_has_its_sections_and_figures),
        T(test_csv_files_have_their_headers_and_a_row_per_point),
        T(test_html_report_names_the_trace_and_has_every_chart),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
