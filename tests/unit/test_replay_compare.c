/*
 * test_replay_compare.c -- trace compare: the threshold grammar and its
 * delta math (replay/threshold.h), loading and choosing results
 * (replay/compare.h), the figures, verdicts and spreads of a comparison,
 * and the first-divergence search over per-record JSONL with the first key
 * read back from the trace (replay/diverge.h).
 */
/* cmocka.h needs these first, in this order. */
// clang-format off
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "helpers/trace_test_util.h"
#include "replay/compare.h"
#include "replay/compare_report.h"
#include "replay/diverge.h"
#include "replay/threshold.h"
#include "trace/format.h"
#include "trace/recorder.h"

#define SM LMC_TRACE_QUALNAME_PREFIX

/* ---- thresholds ---------------------------------------------------------- */

static lmc_threshold parse_ok(const char *spec)
{
    lmc_threshold t;
    lmc_error err;
    if (lmc_threshold_parse(spec, &t, &err) != LMC_OK)
        fail_msg("'%s': %s", spec, err.msg);
    return t;
}

static void test_threshold_relative_increase(void **state)
{
    (void)state;
    lmc_threshold t = parse_ok("p99_ms=+10%");
    assert_string_equal(t.spec, "p99_ms=+10%");
    assert_string_equal(t.pattern, "p99_ms");
    assert_true(t.increase);
    assert_true(t.relative);
    assert_true(fabs(t.limit - 0.10) < 1e-12);
    lmc_threshold_free(&t);
}

static void test_threshold_absolute_decrease(void **state)
{
    (void)state;
    lmc_threshold t = parse_ok("outcomes.figures.chunk_hit_rate=-0.01");
    assert_string_equal(t.pattern, "outcomes.figures.chunk_hit_rate");
    assert_false(t.increase);
    assert_false(t.relative);
    assert_true(t.limit == 0.01);
    lmc_threshold_free(&t);
    t = parse_ok("*.refused_keys=+0");
    assert_true(t.increase && !t.relative && t.limit == 0);
    lmc_threshold_free(&t);
    t = parse_ok("x=+.5%");
    assert_true(t.relative && fabs(t.limit - 0.005) < 1e-12);
    lmc_threshold_free(&t);
}

static void test_threshold_syntax_errors_name_the_spec_and_the_problem(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"p99_ms", "expected FIGURE=LIMIT"},
        {"=+10%", "no figure before '='"},
        {"p99_ms=10%", "needs a sign"},
        {"p99_ms=", "needs a sign"},
        {"p99_ms=+", "not a sign and a number"},
        {"p99_ms=+x", "not a sign and a number"},
        {"p99_ms=+-1", "not a sign and a number"},
        {"p99_ms=++1", "not a sign and a number"},
        {"p99_ms=+inf", "not a sign and a number"},
        {"p99_ms=+nan", "not a sign and a number"},
        {"p99_ms=+0x10", "not a sign and a number"},
        {"p99_ms=+1e999", "not a sign and a number"},
        {"p99_ms=+10%%", "not a sign and a number"},
        {"p99_ms=+10% ", "not a sign and a number"},
        {"p99_ms=+10ms", "not a sign and a number"},
        {"p 99=+1", "a space or a control character"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        lmc_threshold t;
        lmc_error err;
        assert_int_equal(lmc_threshold_parse(bad[i].spec, &t, &err), LMC_ERR_INVALID);
        if (strstr(err.msg, bad[i].says) == NULL || strstr(err.msg, bad[i].spec) == NULL)
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].spec, err.msg, bad[i].says);
        assert_null(t.spec);
    }
}

static void test_pattern_matches_whole_names_and_dotted_tails(void **state)
{
    (void)state;
    const char *hit = "outcomes.figures.chunk_hit_rate";
    assert_true(lmc_figure_pattern_match(hit, hit));
    assert_true(lmc_figure_pattern_match("chunk_hit_rate", hit));
    assert_true(lmc_figure_pattern_match("figures.chunk_hit_rate", hit));
    assert_true(lmc_figure_pattern_match("*hit_rate", hit));
    assert_true(lmc_figure_pattern_match("outcomes.*", hit));
    /* A tail starts after a dot: part of a key is not a name. */
    assert_false(lmc_figure_pattern_match("hit_rate", hit));
    assert_false(lmc_figure_pattern_match("chunk_hit", hit));
    assert_false(lmc_figure_pattern_match("", hit));
    /* '*' runs over dots, so one pattern names a stat of every op. */
    const char *p99 = "ops." SM "read_prefetched_results.__enter__.p99_ms";
    assert_true(lmc_figure_pattern_match("ops.*.p99_ms", p99));
    assert_true(lmc_figure_pattern_match("p99_ms", p99));
    assert_true(lmc_figure_pattern_match("__enter__.p99_ms", p99));
    assert_true(lmc_figure_pattern_match("*", p99));
    assert_true(lmc_figure_pattern_match("ops.*", p99));
    assert_false(lmc_figure_pattern_match("ops.*.p50_ms", p99));
    assert_false(lmc_figure_pattern_match("p99", p99));
    assert_true(lmc_figure_pattern_match("o*s.*__.p*", p99));
}

static void test_relative_change_of_a_zero_base_is_infinite(void **state)
{
    (void)state;
    assert_true(lmc_relative_change(2.0, 3.0) == 0.5);
    assert_true(lmc_relative_change(-2.0, -3.0) == -0.5); /* over |base| */
    assert_true(lmc_relative_change(0.0, 0.0) == 0.0);
    assert_true(isinf(lmc_relative_change(0.0, 1.0)) && lmc_relative_change(0.0, 1.0) > 0);
    assert_true(isinf(lmc_relative_change(0.0, -1.0)) && lmc_relative_change(0.0, -1.0) < 0);
}

static void test_a_threshold_is_exceeded_only_past_its_limit_in_its_direction(void **state)
{
    (void)state;
    lmc_threshold up = parse_ok("p99_ms=+10%");
    assert_false(lmc_threshold_exceeded(&up, 1.0, 1.0));
    assert_false(lmc_threshold_exceeded(&up, 2.0, 2.2 - 1e-9));
    assert_true(lmc_threshold_exceeded(&up, 2.0, 2.3));
    assert_false(lmc_threshold_exceeded(&up, 2.0, 0.5)); /* faster is no regression */
    assert_true(lmc_threshold_exceeded(&up, 0.0, 0.001));
    lmc_threshold_free(&up);

    lmc_threshold down = parse_ok("chunk_hit_rate=-0.01");
    assert_false(lmc_threshold_exceeded(&down, 0.50, 0.495));
    assert_false(lmc_threshold_exceeded(&down, 0.50, 0.90));
    assert_true(lmc_threshold_exceeded(&down, 0.50, 0.48));
    lmc_threshold_free(&down);

    lmc_threshold any = parse_ok("refused_keys=+0");
    assert_false(lmc_threshold_exceeded(&any, 5, 5));
    assert_false(lmc_threshold_exceeded(&any, 5, 4));
    assert_true(lmc_threshold_exceeded(&any, 5, 6));
    lmc_threshold_free(&any);

    lmc_threshold rel_down = parse_ok("read_agreement=-5%");
    assert_false(lmc_threshold_exceeded(&rel_down, 1.0, 0.96));
    assert_true(lmc_threshold_exceeded(&rel_down, 1.0, 0.94));
    lmc_threshold_free(&rel_down);
}

/* ---- results ---------------------------------------------------------------- */

static char g_dir[64];

static int setup(void **state)
{
    (void)state;
    tt_tmpdir(g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tt_rmtree(g_dir);
    return 0;
}

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 256, "%s/%s", g_dir, name);
    return p;
}

static const char *write_text(const char *name, const char *text)
{
    const char *p = tmp_path(name);
    tt_write_file(p, text, strlen(text));
    return p;
}

typedef struct result_spec {
    const char *digest;  /* trace.digest; NULL writes none */
    double hit_rate;     /* outcomes.figures.chunk_hit_rate */
    long refused;        /* outcomes.figures.refused_keys */
    double p99;          /* ops.<reserve_write>.p99_ms */
    bool extra_op;       /* an ops entry for finish_write too */
    double size_gb;      /* config.json.l1_size_gb */
    const char *repeat;  /* the "repeat" member's JSON, or NULL */
    const char *outcome; /* outcome_digest */
    const char *jsonl;   /* outputs.jsonl, or NULL */
} result_spec;

static char *result_text(const result_spec *r)
{
    char digest[80] = "null", jsonl[300] = "null";
    if (r->digest)
        snprintf(digest, sizeof(digest), "\"%s\"", r->digest);
    if (r->jsonl)
        snprintf(jsonl, sizeof(jsonl), "\"%s\"", r->jsonl);
    char *t = malloc(4096);
    snprintf(t, 4096,
             "{\"schema\": \"lmcache.trace_replay_result\", \"schema_version\": 1, "
             "\"status\": \"complete\", "
             "\"trace\": {\"path\": \"t.lct\", \"digest\": %s, \"records\": {\"reported\": 4}}, "
             "\"config\": {\"json\": {\"l1_size_gb\": %g, \"eviction\": {\"policy\": \"LRU\"}}}, "
             "\"mode\": \"calls\", \"pace\": \"virtual\", \"time_scale\": 1.0, "
             "\"duration_s\": 0.5, "
             "\"outcomes\": {\"figures\": {\"chunk_hit_rate\": %.17g, \"refused_keys\": %ld}}, "
             "\"ops\": {\"" SM "reserve_write\": {\"count\": 3, \"p99_ms\": %.17g}%s}, "
             "\"lateness\": null, \"outcome_digest\": \"%s\", \"outputs\": {\"jsonl\": %s}%s%s}",
             digest, r->size_gb, r->hit_rate, r->refused, r->p99,
             r->extra_op ? ", \"" SM "finish_write\": {\"count\": 1, \"p99_ms\": 0.25}" : "",
             r->outcome ? r->outcome : "aa", jsonl, r->repeat ? ", \"repeat\": " : "",
             r->repeat ? r->repeat : "");
    return t;
}

static const char *write_result(const char *name, const result_spec *r)
{
    char *t = result_text(r);
    const char *p = write_text(name, t);
    free(t);
    return p;
}

static void load_ok(const char *path, const char *select, lmc_cmp_side *s)
{
    lmc_error err;
    if (lmc_cmp_side_load(path, select, true, s, &err) != LMC_OK)
        fail_msg("%s: %s", path, err.msg);
}

/* The result r describes, written as name and loaded whole (no selection). */
static void load_result(const char *name, const result_spec *r, lmc_cmp_side *s)
{
    load_ok(write_result(name, r), NULL, s);
}

static const lmc_cmp_figure *fig(const lmc_compare *c, const char *name)
{
    for (size_t i = 0; i < c->n_figs; i++) {
        if (strcmp(c->figs[i].name, name) == 0)
            return &c->figs[i];
    }
    fail_msg("no figure %s", name);
    return NULL;
}

static const result_spec BASE = {
    .digest = "d1", .hit_rate = 0.5, .refused = 10, .p99 = 2.0, .size_gb = 4};

static void test_deltas_and_verdicts_of_each_figure(void **state)
{
    (void)state;
    result_spec n = BASE;
    n.hit_rate = 0.4;
    n.refused = 0;
    n.p99 = 2.1;
    n.extra_op = true;
    n.size_gb = 1;
    n.outcome = "bb";
    lmc_cmp_side a, b;
    load_result("a.json", &BASE, &a);
    load_result("b.json", &n, &b);
    lmc_threshold th[2] = {parse_ok("chunk_hit_rate=-0.05"), parse_ok("p99_ms=+10%")};
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &b, th, 2, &c, &err), LMC_OK);
    assert_int_equal(c.trace, LMC_CMP_TRACE_SAME);
    assert_false(c.digests_equal);

    const lmc_cmp_figure *h = fig(&c, "outcomes.figures.chunk_hit_rate");
    assert_true(fabs(h->delta - -0.1) < 1e-12);
    assert_true(fabs(h->rel - -0.2) < 1e-12);
    assert_int_equal(h->verdict, LMC_CMP_REGRESSED);
    assert_ptr_equal(h->exceeded, &th[0]);
    assert_int_equal(h->n_thresholds, 1);

    const lmc_cmp_figure *r = fig(&c, "outcomes.figures.refused_keys");
    assert_true(r->base.is_int && r->delta == -10);
    assert_int_equal(r->verdict, LMC_CMP_CHANGED); /* no threshold names it */

    /* Within +10%: ok; its short name drops the StorageManager's qualname prefix. */
    const lmc_cmp_figure *p = fig(&c, "ops." SM "reserve_write.p99_ms");
    assert_string_equal(p->short_name, "ops.reserve_write.p99_ms");
    assert_int_equal(p->verdict, LMC_CMP_OK);

    const lmc_cmp_figure *d = fig(&c, "duration_s");
    assert_int_equal(d->verdict, LMC_CMP_EQUAL);
    assert_null(d->short_name);

    /* An op only the new replay saw: one-sided, after the base's figures. */
    const lmc_cmp_figure *one = fig(&c, "ops." SM "finish_write.p99_ms");
    assert_int_equal(one->verdict, LMC_CMP_ONE_SIDED);
    assert_false(one->base.present);
    assert_true(one->new_.present);
    assert_ptr_equal(one, &c.figs[c.n_figs - 1]);
    assert_int_equal(one->n_thresholds, 1); /* p99_ms names it, but there is nothing to judge */

    assert_int_equal(c.n_exceeded, 1);
    assert_int_equal(lmc_compare_exit_status(&c), 1);

    /* The config difference comes with both values. */
    assert_int_equal(c.n_diffs, 1);
    assert_string_equal(c.diffs[0].path, "l1_size_gb");
    assert_true(lmc_json_get_number(c.diffs[0].base) == 4);
    assert_true(lmc_json_get_number(c.diffs[0].new_) == 1);
    lmc_compare_free(&c);
    lmc_threshold_free(&th[0]);
    lmc_threshold_free(&th[1]);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
}

static void test_a_threshold_on_one_sided_figures_only_is_said_to_be_unchecked(void **state)
{
    (void)state;
    result_spec n = BASE;
    n.extra_op = true;
    lmc_cmp_side a, b;
    load_result("a.json", &BASE, &a);
    load_result("b.json", &n, &b);
    lmc_threshold th = parse_ok("finish_write.p99_ms=+0");
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &b, &th, 1, &c, &err), LMC_OK);
    assert_int_equal(lmc_compare_exit_status(&c), 0);
    lmc_compare_report_opts o = {0};
    char *table = lmc_compare_report_table(&c, &o);
    assert_non_null(strstr(table, "note: finish_write.p99_ms=+0 names only figures one result "
                                  "lacks: not checked"));
    assert_non_null(strstr(table, "only in new"));
    free(table);
    char *text = lmc_compare_report_json(&c, &o);
    assert_non_null(strstr(text, "\"figures\": 1,\n      \"checked\": 0,"));
    free(text);
    lmc_compare_free(&c);
    lmc_threshold_free(&th);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
}

static void test_equal_results_pass_and_outcomes_can_be_required_equal(void **state)
{
    (void)state;
    lmc_cmp_side a, b;
    load_result("a.json", &BASE, &a);
    result_spec n = BASE;
    n.outcome = "cc";
    load_result("b.json", &n, &b);
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &a, NULL, 0, &c, &err), LMC_OK);
    assert_true(c.digests_equal);
    assert_int_equal(c.n_diffs, 0);
    for (size_t i = 0; i < c.n_figs; i++)
        assert_int_equal(c.figs[i].verdict, LMC_CMP_EQUAL);
    assert_int_equal(lmc_compare_exit_status(&c), 0);
    lmc_compare_free(&c);
    assert_int_equal(lmc_compare_run(&a, &b, NULL, 0, &c, &err), LMC_OK);
    assert_int_equal(lmc_compare_exit_status(&c), 0);
    c.require_same_outcomes = true;
    assert_int_equal(lmc_compare_exit_status(&c), 1);
    lmc_compare_free(&c);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
}

static void test_a_threshold_naming_no_figure_is_a_usage_error(void **state)
{
    (void)state;
    lmc_cmp_side a;
    load_result("a.json", &BASE, &a);
    lmc_threshold th = parse_ok("hit_rate=-0.01");
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &a, &th, 1, &c, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'hit_rate' names no figure"));
    assert_non_null(strstr(err.msg, "did you mean chunk_hit_rate?"));
    lmc_threshold_free(&th);
    /* The short name of an op figure is a name too. */
    th = parse_ok("ops.reserve_write.p99_ms=+1");
    assert_int_equal(lmc_compare_run(&a, &a, &th, 1, &c, &err), LMC_OK);
    lmc_compare_free(&c);
    lmc_threshold_free(&th);
    lmc_cmp_side_free(&a);
}

static void test_trace_digests_tell_same_different_and_unknown(void **state)
{
    (void)state;
    result_spec other = BASE, none = BASE;
    other.digest = "d2";
    none.digest = NULL;
    lmc_cmp_side a, b, n;
    load_result("a.json", &BASE, &a);
    load_result("b.json", &other, &b);
    load_result("n.json", &none, &n);
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &b, NULL, 0, &c, &err), LMC_OK);
    assert_int_equal(c.trace, LMC_CMP_TRACE_DIFFERENT);
    lmc_compare_free(&c);
    assert_int_equal(lmc_compare_run(&n, &a, NULL, 0, &c, &err), LMC_OK);
    assert_int_equal(c.trace, LMC_CMP_TRACE_UNKNOWN);
    lmc_compare_free(&c);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
    lmc_cmp_side_free(&n);
}

static void test_repeat_medians_are_compared_and_overlapping_spreads_said(void **state)
{
    (void)state;
    /* The base's last run says 9.0, its median 2.0 over [1.5, 3.0]. */
    result_spec r = BASE;
    r.p99 = 9.0;
    r.repeat = "{\"runs\": 3, \"digests_equal\": true, \"figures\": {\"ops\": {\"" SM
               "reserve_write\": {\"p99_ms\": {\"median\": 2.0, \"min\": 1.5, \"max\": 3.0}}}}}";
    result_spec inside = BASE, outside = BASE;
    inside.p99 = 2.9;
    outside.p99 = 3.5;
    lmc_cmp_side a, b, o;
    load_result("a.json", &r, &a);
    load_result("b.json", &inside, &b);
    load_result("o.json", &outside, &o);
    lmc_threshold th = parse_ok("p99_ms=+20%");
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &b, &th, 1, &c, &err), LMC_OK);
    const lmc_cmp_figure *p = fig(&c, "ops." SM "reserve_write.p99_ms");
    assert_true(p->base.v == 2.0 && p->base.has_spread);
    assert_true(p->base.min == 1.5 && p->base.max == 3.0);
    assert_false(p->new_.has_spread);
    assert_true(fabs(p->delta - 0.9) < 1e-12);
    assert_true(p->within_spread);
    /* Exceeded all the same: the threshold judges medians; the spread is said beside it. */
    assert_int_equal(p->verdict, LMC_CMP_REGRESSED);
    char *table = lmc_compare_report_table(&c, &(lmc_compare_report_opts){0});
    assert_non_null(strstr(table, "REGRESSED (p99_ms=+20%) (within spread)"));
    assert_non_null(strstr(table, "[1.5, 3]"));
    free(table);
    lmc_compare_free(&c);
    assert_int_equal(lmc_compare_run(&a, &o, &th, 1, &c, &err), LMC_OK);
    assert_false(fig(&c, "ops." SM "reserve_write.p99_ms")->within_spread);
    lmc_compare_free(&c);
    lmc_threshold_free(&th);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
    lmc_cmp_side_free(&o);
}

static void test_the_json_report_holds_every_figure_and_the_exit_status(void **state)
{
    (void)state;
    result_spec n = BASE;
    n.hit_rate = 0.1;
    lmc_cmp_side a, b;
    load_result("a.json", &BASE, &a);
    load_result("b.json", &n, &b);
    lmc_threshold th = parse_ok("chunk_hit_rate=-0.01");
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &b, &th, 1, &c, &err), LMC_OK);
    char *text = lmc_compare_report_json(&c, &(lmc_compare_report_opts){0});
    lmc_json *v = NULL;
    assert_int_equal(lmc_json_parse(text, strlen(text), &v, NULL), LMC_OK);
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(v, "schema"), NULL),
                        LMC_COMPARE_RESULT_SCHEMA);
    assert_int_equal(lmc_json_size(lmc_json_object_get(v, "figures")), c.n_figs);
    const lmc_json *h =
        lmc_json_object_get(lmc_json_object_get(v, "figures"), "outcomes.figures.chunk_hit_rate");
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(h, "verdict"), NULL), "REGRESSED");
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(h, "exceeded"), NULL),
                        "chunk_hit_rate=-0.01");
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(v, "exit_status")), 1);
    assert_string_equal(lmc_json_get_string(lmc_json_object_get(v, "trace"), NULL), "same");
    assert_int_equal(lmc_json_type_of(lmc_json_object_get(v, "first_divergence")), LMC_JSON_NULL);
    lmc_json_free(v);
    free(text);
    lmc_compare_free(&c);
    lmc_threshold_free(&th);
    lmc_cmp_side_free(&a);
    lmc_cmp_side_free(&b);
}

static void test_text_from_a_result_reaches_the_terminal_escaped(void **state)
{
    (void)state;
    char *t = result_text(&BASE);
    char *at = strstr(t, "\"path\": \"t.lct\"");
    assert_non_null(at);
    size_t n = strlen(t) + 64;
    char *evil = malloc(n);
    snprintf(evil, n, "%.*s\"path\": \"t\\u001b[2J\\nx.lct\"%s", (int)(at - t), t,
             at + strlen("\"path\": \"t.lct\""));
    lmc_cmp_side a;
    load_ok(write_text("evil.json", evil), NULL, &a);
    lmc_compare c;
    lmc_error err;
    assert_int_equal(lmc_compare_run(&a, &a, NULL, 0, &c, &err), LMC_OK);
    char *table = lmc_compare_report_table(&c, &(lmc_compare_report_opts){0});
    assert_non_null(strstr(table, "same (t\\x1b[2J\\nx.lct, digest d1)"));
    assert_null(strchr(table, '\x1b'));
    free(table);
    lmc_compare_free(&c);
    lmc_cmp_side_free(&a);
    free(evil);
    free(t);
}

/* ---- loading and choosing ----------------------------------------------- */

static void test_files_that_are_not_results_are_refused_naming_them(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        lmc_status st;
        const char *says;
    } bad[] = {
        {"{\"schema\": \"lmcache", LMC_ERR_FORMAT, "not valid JSON"},
        {"[1, 2]", LMC_ERR_FORMAT, "not a replay result"},
        {"{\"requests\": 3}", LMC_ERR_FORMAT, "not a replay result"},
        {"{\"schema\": \"lmcache.trace_replay_result\"}", LMC_ERR_FORMAT, "schema_version"},
        {"{\"schema\": \"lmcache.trace_replay_result\", \"schema_version\": 9}",
         LMC_ERR_UNSUPPORTED, "newer than this build reads"},
        {"{\"results\": []}", LMC_ERR_FORMAT, "no results"},
        {"{\"results\": [{\"x\": 1}]}", LMC_ERR_FORMAT, "[0]: not a replay result"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *p = write_text("bad.json", bad[i].text);
        lmc_cmp_side s;
        lmc_error err;
        assert_int_equal(lmc_cmp_side_load(p, NULL, true, &s, &err), bad[i].st);
        if (strstr(err.msg, bad[i].says) == NULL || strstr(err.msg, "bad.json") == NULL)
            fail_msg("%s: '%s' lacks '%s'", bad[i].text, err.msg, bad[i].says);
    }
    lmc_cmp_side s;
    lmc_error err;
    assert_int_equal(lmc_cmp_side_load(tmp_path("missing.json"), NULL, true, &s, &err),
                     LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "missing.json"));
}

static const char *write_sweep(void)
{
    result_spec r[3] = {BASE, BASE, BASE};
    r[1].size_gb = 8;
    r[2].size_gb = 8;
    r[2].hit_rate = 0.7;
    char *t[3] = {result_text(&r[0]), result_text(&r[1]), result_text(&r[2])};
    size_t n = strlen(t[0]) + strlen(t[1]) + strlen(t[2]) + 128;
    char *doc = malloc(n);
    snprintf(doc, n, "{\"schema\": \"lmcache.trace_sweep_result\", \"results\": [%s, %s, %s]}",
             t[0], t[1], t[2]);
    const char *p = write_text("sweep.json", doc);
    for (int i = 0; i < 3; i++)
        free(t[i]);
    free(doc);
    return p;
}

static long long chosen(const char *path, const char *select, lmc_status want, const char *says)
{
    lmc_cmp_side s;
    lmc_error err;
    lmc_status st = lmc_cmp_side_load(path, select, true, &s, &err);
    if (st != want)
        fail_msg("'%s': status %d, want %d (%s)", select ? select : "(none)", st, want,
                 st ? err.msg : "");
    if (st != LMC_OK) {
        if (says != NULL && strstr(err.msg, says) == NULL)
            fail_msg("'%s': '%s' lacks '%s'", select ? select : "(none)", err.msg, says);
        return -2;
    }
    long long i = s.index;
    assert_int_equal(s.n_results, 3);
    lmc_cmp_side_free(&s);
    return i;
}

static void test_a_sweep_result_is_chosen_by_index_or_config_fields(void **state)
{
    (void)state;
    const char *p = write_sweep();
    assert_int_equal(chosen(p, "0", LMC_OK, NULL), 0);
    assert_int_equal(chosen(p, "2", LMC_OK, NULL), 2);
    assert_int_equal(chosen(p, "l1_size_gb=4", LMC_OK, NULL), 0);
    /* Paths in the result, in its config.json, and a config leaf by its last parts. */
    assert_int_equal(chosen(p, "outcomes.figures.chunk_hit_rate=0.7", LMC_OK, NULL), 2);
    assert_int_equal(
        chosen(p, "config.json.l1_size_gb=8,chunk_hit_rate=0.5", LMC_ERR_INVALID, "matches none"),
        -2);
    assert_int_equal(chosen(p, "l1_size_gb=8,outcomes.figures.chunk_hit_rate=0.5", LMC_OK, NULL),
                     1);
    assert_int_equal(chosen(p, "policy=LRU,l1_size_gb=4.0", LMC_OK, NULL), 0);
    assert_int_equal(chosen(p, "eviction.policy=LRU,l1_size_gb=4", LMC_OK, NULL), 0);
    /* A condition tested on every result, not only the first. */
    assert_int_equal(chosen(p, "l1_size_gb=8,outcomes.figures.chunk_hit_rate=0.7", LMC_OK, NULL),
                     2);
    assert_int_equal(chosen(p, NULL, LMC_ERR_INVALID, "sweep result of 3 configurations"), -2);
    assert_int_equal(chosen(p, "3", LMC_ERR_INVALID, "holds 3 results (0..2)"), -2);
    assert_int_equal(chosen(p, "l1_size_gb=8", LMC_ERR_INVALID, "matches 2 of its results (1, 2)"),
                     -2);
    assert_int_equal(chosen(p, "policy=ARC", LMC_ERR_INVALID, "matches none"), -2);
    assert_int_equal(chosen(p, "l1_size_gb", LMC_ERR_INVALID, "expected an index N"), -2);
    assert_int_equal(chosen(p, "=4", LMC_ERR_INVALID, "expected an index N"), -2);
    assert_int_equal(chosen(p, "l1_size_gb=4,", LMC_ERR_INVALID, "expected an index N"), -2);
}

static void test_a_selector_on_a_replay_result_is_an_error_only_when_strict(void **state)
{
    (void)state;
    const char *p = write_result("a.json", &BASE);
    lmc_cmp_side s;
    lmc_error err;
    assert_int_equal(lmc_cmp_side_load(p, "0", true, &s, &err), LMC_ERR_INVALID);
    assert_non_null(strstr(err.msg, "not a sweep"));
    assert_int_equal(lmc_cmp_side_load(p, "0", false, &s, &err), LMC_OK);
    assert_int_equal(s.index, -1);
    lmc_cmp_side_free(&s);
}

/* ---- the first divergence -------------------------------------------------- */

#define LINE(i, q, late, outcome)                                                                  \
    "{\"index\": " #i ", \"t_mono\": 0." #i ", \"lateness_us\": " late ", \"qualname\": \"" SM q   \
    "\", \"n_keys\": 2, \"latency_ms\": 0.01, \"failed\": false, \"skipped\": false, "             \
    "\"outcome\": " outcome "}\n"
#define RESERVE(r, oom)                                                                            \
    "{\"op\": \"reserve_write\", \"reserved\": " #r ", \"out_of_memory\": " #oom "}"

static void find_ok(const char *a, const char *b, lmc_divergence *d)
{
    lmc_error err;
    const char *pa = write_text("a.jsonl", a);
    const char *pb = write_text("b.jsonl", b);
    if (lmc_divergence_find(pa, pb, d, &err) != LMC_OK)
        fail_msg("%s", err.msg);
}

static void test_the_first_record_whose_outcome_differs_is_found(void **state)
{
    (void)state;
    /* Lateness differs on every line: timing is not an outcome. */
    const char *a = LINE(1, "reserve_write", "1.0", RESERVE(2, 0))
        LINE(2, "reserve_write", "2.0", RESERVE(2, 0))
            LINE(3, "reserve_write", "3.0", RESERVE(2, 0))
                LINE(4, "reserve_write", "4.0", RESERVE(2, 0));
    const char *b = LINE(1, "reserve_write", "9.0", RESERVE(2, 0))
        LINE(2, "reserve_write", "9.0", RESERVE(2, 0))
            LINE(3, "reserve_write", "9.0", RESERVE(1, 1))
                LINE(4, "reserve_write", "9.0", RESERVE(0, 2));
    lmc_divergence d;
    find_ok(a, b, &d);
    assert_true(d.found);
    assert_int_equal(d.index, 3);
    assert_int_equal(d.compared, 3);
    assert_true(d.t_mono == 0.3);
    assert_string_equal(d.qualname, SM "reserve_write");
    assert_int_equal(d.n_keys, 2);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(d.base_outcome, "reserved")), 2);
    assert_int_equal(lmc_json_get_int(lmc_json_object_get(d.new_outcome, "out_of_memory")), 1);
    lmc_divergence_free(&d);
}

static void test_equal_outcomes_agree_however_they_are_spaced(void **state)
{
    (void)state;
    const char *a =
        LINE(1, "reserve_write", "1.0", RESERVE(2, 0)) LINE(2, "finish_write", "1.0", "null");
    /* The same values written by another tool: other spacing and key order. */
    const char *b = "{\"index\":1,\"qualname\":\"" SM "reserve_write\",\"outcome\":{\"op\":"
                    "\"reserve_write\",\"out_of_memory\":0,\"reserved\":2}}\n\n"
                    "{\"qualname\":\"" SM "finish_write\",\"index\":2,\"outcome\":null}\n";
    lmc_divergence d;
    find_ok(a, b, &d);
    assert_false(d.found);
    assert_int_equal(d.compared, 2);
    assert_false(d.base_ended || d.new_ended);
    lmc_divergence_free(&d);
}

static void test_a_shorter_file_ends_the_search_and_says_which(void **state)
{
    (void)state;
    const char *one = LINE(1, "reserve_write", "1.0", RESERVE(2, 0));
    const char *two = LINE(1, "reserve_write", "1.0", RESERVE(2, 0))
        LINE(2, "reserve_write", "1.0", RESERVE(2, 0));
    lmc_divergence d;
    find_ok(one, two, &d);
    assert_false(d.found);
    assert_true(d.base_ended && !d.new_ended);
    assert_int_equal(d.compared, 1);
    lmc_divergence_free(&d);
    find_ok(two, one, &d);
    assert_true(d.new_ended && !d.base_ended);
    lmc_divergence_free(&d);
}

static void test_a_record_missing_its_outcome_differs(void **state)
{
    (void)state;
    const char *a = LINE(1, "reserve_write", "1.0", RESERVE(2, 0));
    const char *b = LINE(1, "reserve_write", "1.0", "null");
    lmc_divergence d;
    find_ok(a, b, &d);
    assert_true(d.found);
    assert_int_equal(lmc_json_type_of(d.new_outcome), LMC_JSON_NULL);
    lmc_divergence_free(&d);
}

static void test_jsonl_without_outcomes_or_records_is_an_error_naming_the_line(void **state)
{
    (void)state;
    lmc_divergence d;
    lmc_error err;
    const char *lat = "{\"index\": 1, \"qualname\": \"q\", \"latency_ms\": 1.0}\n";
    const char *pa = write_text("a.jsonl", lat);
    assert_int_equal(lmc_divergence_find(pa, pa, &d, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "no record has an \"outcome\""));
    const char *pb = write_text("b.jsonl", "{\"index\": 1, \"outcome\": null}\nnot json\n");
    const char *pc = write_text("c.jsonl", "{\"index\": 1, \"outcome\": null}\n{\"index\": 2}\n");
    assert_int_equal(lmc_divergence_find(pc, pb, &d, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "b.jsonl' line 2"));
    const char *pd = write_text("d.jsonl", "[1]\n");
    assert_int_equal(lmc_divergence_find(pd, pd, &d, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "d.jsonl' line 1: not a record"));
    assert_int_equal(lmc_divergence_find(tmp_path("none.jsonl"), pd, &d, &err), LMC_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "none.jsonl"));
}

/* A trace: a record, the recorder's dropped-records marker, then a 2-key record. */
static const char *write_trace(void)
{
    tt_trace t;
    tt_trace_begin(&t, 2);
    lmc_object_key k[2] = {tt_key("m", 0xabcd, 3, 1, "salt"), tt_key("m", 0xef, 0, 0, NULL)};
    lmc_tv items[2] = {{.kind = LMC_TV_OBJECT_KEY, .u.key = &k[1]},
                       {.kind = LMC_TV_OBJECT_KEY, .u.key = &k[0]}};
    lmc_trace_arg one = {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {items, 1}}};
    const char *q1 = SM "finish_write";
    assert_int_equal(lmc_trace_encode_record(&t.buf, 0.1, 0.1, q1, strlen(q1), &one, 1, NULL),
                     LMC_OK);
    lmc_trace_arg dropped = {"dropped_count", 13, lmc_tv_int(5)};
    const char *qd = LMC_TRACE_DROPPED_QUALNAME;
    assert_int_equal(lmc_trace_encode_record(&t.buf, 0.2, 0.2, qd, strlen(qd), &dropped, 1, NULL),
                     LMC_OK);
    lmc_tv rev[2] = {items[1], items[0]};
    lmc_trace_arg two = {"keys", 4, {.kind = LMC_TV_LIST, .u.list = {rev, 2}}};
    const char *q2 = SM "reserve_write";
    assert_int_equal(lmc_trace_encode_record(&t.buf, 0.3, 0.3, q2, strlen(q2), &two, 1, NULL),
                     LMC_OK);
    const char *p = tmp_path("t.lct");
    tt_trace_end(&t, p);
    return p;
}

static void test_the_first_key_is_read_back_from_the_trace_past_markers(void **state)
{
    (void)state;
    const char *trace = write_trace();
    lmc_divergence d = {.found = true, .index = 2};
    d.qualname = strdup(SM "reserve_write");
    lmc_error err;
    assert_int_equal(lmc_divergence_read_key(&d, trace, &err), LMC_OK);
    assert_non_null(d.first_key);
    char *text = lmc_json_dumps(d.first_key, 0, -1, NULL);
    assert_string_equal(text,
                        "{\"chunk_hash\": \"0000abcd\", \"model_name\": \"m\", \"kv_rank\": 3, "
                        "\"object_group_id\": 1, \"cache_salt\": \"salt\"}");
    free(text);
    lmc_divergence_free(&d);
}

static void test_a_trace_that_does_not_hold_the_record_says_so(void **state)
{
    (void)state;
    const char *trace = write_trace();
    lmc_divergence d = {.found = true, .index = 3};
    d.qualname = strdup(SM "reserve_write");
    lmc_error err;
    assert_int_equal(lmc_divergence_read_key(&d, trace, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "holds 2 records, not 3"));
    d.index = 1; /* finish_write there, not reserve_write: another trace */
    assert_int_equal(lmc_divergence_read_key(&d, trace, &err), LMC_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "record 1 is"));
    assert_null(d.first_key);
    lmc_divergence_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_relative_increase),
        cmocka_unit_test(test_threshold_absolute_decrease),
        cmocka_unit_test(test_threshold_syntax_errors_name_the_spec_and_the_problem),
        cmocka_unit_test(test_pattern_matches_whole_names_and_dotted_tails),
        cmocka_unit_test(test_relative_change_of_a_zero_base_is_infinite),
        cmocka_unit_test(test_a_threshold_is_exceeded_only_past_its_limit_in_its_direction),
        cmocka_unit_test_setup_teardown(test_deltas_and_verdicts_of_each_figure, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_threshold_on_one_sided_figures_only_is_said_to_be_unchecked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_equal_results_pass_and_outcomes_can_be_required_equal,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_threshold_naming_no_figure_is_a_usage_error, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_trace_digests_tell_same_different_and_unknown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_repeat_medians_are_compared_and_overlapping_spreads_said, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_json_report_holds_every_figure_and_the_exit_status,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_from_a_result_reaches_the_terminal_escaped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_files_that_are_not_results_are_refused_naming_them,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_sweep_result_is_chosen_by_index_or_config_fields,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_selector_on_a_replay_result_is_an_error_only_when_strict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_first_record_whose_outcome_differs_is_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_equal_outcomes_agree_however_they_are_spaced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_shorter_file_ends_the_search_and_says_which, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_record_missing_its_outcome_differs, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_jsonl_without_outcomes_or_records_is_an_error_naming_the_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_first_key_is_read_back_from_the_trace_past_markers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_trace_that_does_not_hold_the_record_says_so, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
