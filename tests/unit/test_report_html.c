/*
 * test_report_html.c -- the HTML report module: escaping (specials,
 * control characters, invalid UTF-8, valid UTF-8 kept), value formats,
 * and each element's markup -- header, sections, line charts (legend,
 * axes, ticks, hover titles, skipped points, error bands, empty charts),
 * CDFs, histograms, tables -- with no script or outside resource, and
 * saving.
 */
/* cmocka.h needs these headers first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/trace_test_util.h"
#include "report/html.h"

static char *escaped(const char *s, size_t n)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_report_escape(&b, s, n);
    char *out = lmc_strbuf_finish(&b);
    assert_non_null(out);
    return out;
}

static void assert_escapes(const char *in, size_t n, const char *want)
{
    char *got = escaped(in, n);
    assert_string_equal(got, want);
    free(got);
}

static void test_escape_turns_the_html_specials_into_entities(void **state)
{
    (void)state;
    assert_escapes("a<b>&\"c'", 8, "a&lt;b&gt;&amp;&quot;c&#39;");
    assert_escapes("<script>alert(1)</script>", 25, "&lt;script&gt;alert(1)&lt;/script&gt;");
    assert_escapes("plain text", 10, "plain text");
    assert_escapes("", 0, "");
}

static void test_escape_replaces_control_characters_and_keeps_tab_and_newline(void **state)
{
    (void)state;
    assert_escapes("a\x01"
                   "b\x1b[31mc\x7f",
                   10,
                   "a\xef\xbf\xbd"
                   "b\xef\xbf\xbd[31mc\xef\xbf\xbd");
    assert_escapes("a\tb\nc", 5, "a\tb\nc");
    assert_escapes("a\0b", 3,
                   "a\xef\xbf\xbd"
                   "b");
}

static void test_escape_keeps_valid_utf8_and_replaces_invalid_bytes(void **state)
{
    (void)state;
    assert_escapes("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14,
                   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* A lone continuation byte, a cut sequence, an overlong '/', a surrogate, a C1 control. */
    assert_escapes("\x80", 1, "\xef\xbf\xbd");
    assert_escapes("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd");
    assert_escapes("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");
    assert_escapes("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_escapes("\xc2\x85", 2, "\xef\xbf\xbd\xef\xbf\xbd");
    assert_escapes("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

static void assert_format(double v, lmc_report_format f, const char *want)
{
    char buf[48];
    lmc_report_format_value(v, f, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void test_values_are_written_in_their_format(void **state)
{
    (void)state;
    assert_format(0.25, LMC_REPORT_FMT_NUMBER, "0.25");
    assert_format(1500, LMC_REPORT_FMT_NUMBER, "1.5k");
    assert_format(3e6, LMC_REPORT_FMT_NUMBER, "3M");
    assert_format(0.655, LMC_REPORT_FMT_PERCENT, "65.5%");
    assert_format(1, LMC_REPORT_FMT_PERCENT, "100%");
    assert_format(512, LMC_REPORT_FMT_BYTES, "512 B");
    assert_format(4096, LMC_REPORT_FMT_BYTES, "4 KiB");
    assert_format(1.5 * 1073741824.0, LMC_REPORT_FMT_BYTES, "1.5 GiB");
    assert_format(50e-6, LMC_REPORT_FMT_SECONDS, "50 us");
    assert_format(0.001, LMC_REPORT_FMT_SECONDS, "1 ms");
    assert_format(0.25, LMC_REPORT_FMT_SECONDS, "250 ms");
    assert_format(1.5, LMC_REPORT_FMT_SECONDS, "1.5 s");
    assert_format(300, LMC_REPORT_FMT_SECONDS, "5 min");
    assert_format(NAN, LMC_REPORT_FMT_NUMBER, "n/a");
}

static void assert_contains(const char *text, const char *want)
{
    if (strstr(text, want) == NULL)
        fail_msg("missing '%s'", want);
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static lmc_report *begin(void)
{
    lmc_report_kv rows[2] = {{"trace", "/tmp/<evil>.lct"}, {"config", "--l1-size-gb 1 & more"}};
    lmc_report_header h = {
        .title = "Report <1>", .subtitle = "sub & title", .rows = rows, .n_rows = 2};
    lmc_report *r = lmc_report_begin(&h);
    assert_non_null(r);
    return r;
}

static void test_document_is_self_contained_with_an_escaped_header(void **state)
{
    (void)state;
    lmc_report *r = begin();
    lmc_report_section(r, "Section <a>", "note & more");
    lmc_report_text(r, "a paragraph <b>");
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_true(strncmp(html, "<!DOCTYPE html>\n<html lang=\"en\">", 32) == 0);
    assert_contains(html, "<meta charset=\"utf-8\">");
    assert_contains(html, "<title>Report &lt;1&gt;</title>");
    assert_contains(html, "<h1>Report &lt;1&gt;</h1>");
    assert_contains(html, "<p class=\"sub\">sub &amp; title</p>");
    assert_contains(html, "<dt>trace</dt><dd>/tmp/&lt;evil&gt;.lct</dd>");
    assert_contains(html, "<dd>--l1-size-gb 1 &amp; more</dd>");
    assert_contains(html, "<h2>Section &lt;a&gt;</h2>");
    assert_contains(html, "<p class=\"note\">note &amp; more</p>");
    assert_contains(html, "<p class=\"note\">a paragraph &lt;b&gt;</p>");
    assert_contains(html, "<style>");
    assert_true(strlen(html) > 100 && strcmp(html + strlen(html) - 8, "</html>\n") == 0);
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "url(http"));
    free(html);
}

static void test_line_chart_has_axes_ticks_legend_and_hover_values(void **state)
{
    (void)state;
    lmc_report *r = begin();
    double x[4] = {1024, 2048, 4096, 8192};
    double y[4] = {0.1, 0.2, NAN, 0.4};
    double x2[2] = {1024, 8192};
    double y2[2] = {0.5, 0.5};
    double e[4] = {0.05, 0.05, 0.05, 0.05};
    lmc_report_series s[2] = {
        {.name = "curve <1>", .x = x, .y = y, .n = 4, .err = e},
        {.name = "flat", .x = x2, .y = y2, .n = 2, .dashed = true},
    };
    lmc_report_chart c = {
        .title = "Chart & title",
        .id = "my-chart",
        .caption = "caption <c>",
        .x = {.label = "capacity (bytes)",
              .scale = LMC_REPORT_LOG2,
              .format = LMC_REPORT_FMT_BYTES},
        .y = {.label = "hit rate",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
        .series = s,
        .n_series = 2,
    };
    lmc_report_line_chart(r, &c);
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_contains(html, "<figure id=\"my-chart\">");
    assert_contains(html, "<div class=\"title\">Chart &amp; title</div>");
    assert_contains(html, "<svg class=\"chart\" viewBox=\"0 0 720 380\"");
    assert_contains(html, ">curve &lt;1&gt;</text>");
    assert_contains(html, ">flat</text>");
    assert_contains(html, ">capacity (bytes)</text>");
    assert_contains(html, ">hit rate</text>");
    /* Log2 ticks at powers of two, in bytes; percent ticks on y. */
    assert_contains(html, ">1 KiB</text>");
    assert_contains(html, ">8 KiB</text>");
    assert_contains(html, ">0%</text>");
    assert_contains(html, ">100%</text>");
    /* One marker with a hover title per drawable point: 3 of the first series, 2 of the other. */
    assert_int_equal(count(html, "<circle"), 5);
    assert_contains(html, "<title>curve &lt;1&gt;: 2 KiB, 20%</title>");
    assert_contains(html, "stroke-dasharray");
    assert_contains(html, "fill-opacity=\"0.15\""); /* the error band */
    assert_contains(html, "<p class=\"caption\">caption &lt;c&gt;</p>");
    assert_null(strstr(html, "nan"));
    free(html);
}

static void test_chart_with_nothing_to_draw_says_so(void **state)
{
    (void)state;
    lmc_report *r = begin();
    double x[2] = {-1, 0};
    double y[2] = {1, 2};
    lmc_report_series s = {.name = "s", .x = x, .y = y, .n = 2};
    lmc_report_chart c = {.title = "empty",
                          .x = {.label = "x", .scale = LMC_REPORT_LOG10},
                          .y = {.label = "y"},
                          .series = &s,
                          .n_series = 1};
    lmc_report_line_chart(r, &c);
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_contains(html, "no data to draw");
    free(html);
}

static void test_cdf_rises_from_the_smallest_value_to_one(void **state)
{
    (void)state;
    lmc_report *r = begin();
    double v[5] = {5, 1, 3, 2, 4};
    lmc_report_cdf_series s = {.name = "latency", .values = v, .n = 5};
    lmc_report_axis x = {.label = "latency (s)", .format = LMC_REPORT_FMT_SECONDS};
    lmc_report_cdf(r, "CDF", "cdf", NULL, &x, &s, 1);
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_contains(html, "<figure id=\"cdf\">");
    assert_contains(html, "<title>latency: 1 s, 20%</title>");
    assert_contains(html, "<title>latency: 5 s, 100%</title>");
    assert_contains(html, ">fraction of values at or below</text>");
    free(html);
}

static void test_histogram_draws_a_bar_per_bucket_and_series(void **state)
{
    (void)state;
    lmc_report *r = begin();
    const char *labels[3] = {"0", "1-2", "<3>"};
    double a[3] = {10, 0, 5}, b[3] = {1, 2, 3};
    lmc_report_bar_series s[2] = {{"run a", a}, {"run b", b}};
    lmc_report_bars h = {.title = "Histogram",
                         .id = "hist",
                         .x_label = "distance",
                         .labels = labels,
                         .n_buckets = 3,
                         .y = {.label = "accesses"},
                         .series = s,
                         .n_series = 2};
    lmc_report_histogram(r, &h);
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_contains(html, "<figure id=\"hist\">");
    /* Six bars (one of height 0), two legend swatches, the plot's clip rectangle. */
    assert_int_equal(count(html, "<rect x="), 6 + 2 + 1);
    assert_contains(html, "<title>run a, &lt;3&gt;: 5</title>");
    assert_contains(html, ">&lt;3&gt;</text>");
    assert_contains(html, ">distance</text>");
    free(html);
}

static void test_table_escapes_cells_and_aligns_numbers(void **state)
{
    (void)state;
    lmc_report *r = begin();
    const char *cols[2] = {"name", "count"};
    const char *cells[4] = {"<m>", "1,234", NULL, "5"};
    bool numeric[2] = {false, true};
    lmc_report_table_data t = {.title = "T & t",
                               .id = "tab",
                               .columns = cols,
                               .n_columns = 2,
                               .cells = cells,
                               .n_rows = 2,
                               .numeric = numeric};
    lmc_report_table(r, &t);
    char *html = lmc_report_end(r);
    assert_non_null(html);
    assert_contains(html, "<table id=\"tab\">\n<caption>T &amp; t</caption>");
    assert_contains(html, "<th>name</th><th class=\"num\">count</th>");
    assert_contains(html, "<tr><td>&lt;m&gt;</td><td class=\"num\">1,234</td></tr>");
    assert_contains(html, "<tr><td></td><td class=\"num\">5</td></tr>");
    free(html);
}

static void test_save_writes_the_file_and_names_a_bad_path(void **state)
{
    (void)state;
    char dir[64], path[128];
    tt_tmpdir(dir);
    snprintf(path, sizeof(path), "%s/r.html", dir);
    lmc_error err;
    assert_int_equal(lmc_report_save(path, "<html></html>\n", &err), LMC_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[64] = {0};
    assert_int_equal(fread(buf, 1, sizeof(buf) - 1, f), 14);
    fclose(f);
    assert_string_equal(buf, "<html></html>\n");
    snprintf(path, sizeof(path), "%s/missing/r.html", dir);
    assert_int_equal(lmc_report_save(path, "x", &err), LMC_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    tt_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_turns_the_html_specials_into_entities),
        cmocka_unit_test(test_escape_replaces_control_characters_and_keeps_tab_and_newline),
        cmocka_unit_test(test_escape_keeps_valid_utf8_and_replaces_invalid_bytes),
        cmocka_unit_test(test_values_are_written_in_their_format),
        cmocka_unit_test(test_document_is_self_contained_with_an_escaped_header),
        cmocka_unit_test(test_line_chart_has_axes_ticks_legend_and_hover_values),
        cmocka_unit_test(test_chart_with_nothing_to_draw_says_so),
        cmocka_unit_test(test_cdf_rises_from_the_smallest_value_to_one),
        cmocka_unit_test(test_histogram_draws_a_bar_per_bucket_and_series),
        cmocka_unit_test(test_table_escapes_cells_and_aligns_numbers),
        cmocka_unit_test(test_save_writes_the_file_and_names_a_bad_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
