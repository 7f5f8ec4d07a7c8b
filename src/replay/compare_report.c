/*
 * compare_report.c -- trace compare's terminal report and JSON (see
 * compare_report.h).
 *
 * Owns nothing past a call. Text from the result files (paths, qualnames,
 * notes) reaches the terminal through core/escape.h, and JSON values
 * (config values, model names) as JSON text, so a hostile file cannot drive
 * the terminal.
 *
 * Threads: none; reentrant.
 */
#include "replay/compare_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/escape.h"
#include "core/json_diff.h"
#include "core/strbuf.h"

/* Always in the table: what a comparison is about. */
static const char *const g_headline[] = {"outcomes.figures.*_hit_rate",
                                         "outcomes.figures.*_agreement"};
/* Left out of the table unless --all: they follow the host more than the configuration. */
static const char *const g_detail[] = {"duration_s",          "ops.*.mean_ms",  "ops.*.min_ms",
                                       "ops.*.max_ms",        "lateness.count", "lateness.mean_us",
                                       "lateness.mean_gap_us"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool matches_any(const lmc_cmp_figure *f, const char *const *patterns, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (lmc_figure_pattern_match(patterns[i], f->name))
            return true;
    }
    return false;
}

/* Shown in the default table? */
static bool shown(const lmc_cmp_figure *f, bool all)
{
    if (all || f->n_thresholds > 0 || matches_any(f, g_headline, COUNT(g_headline)))
        return true;
    return f->verdict != LMC_CMP_EQUAL && !matches_any(f, g_detail, COUNT(g_detail));
}

/* Untrusted text (from the result files) as the terminal may show it (core/escape.h). */
static void put_safe(lmc_strbuf *b, const char *s)
{
    lmc_escape_append(b, s, strlen(s), 0);
}

/* A JSON value as text on one line (strings unquoted when plain). */
static void put_value(lmc_strbuf *b, const lmc_json *v)
{
    if (v == NULL) {
        lmc_strbuf_puts(b, "(absent)");
        return;
    }
    char *t = lmc_json_dumps(v, 0, -1, NULL);
    lmc_strbuf_puts(b, t ? t : "?");
    free(t);
}

/* A number as a figure reads: integral values whole, others with 6 significant digits. */
static void fmt_num(char *buf, size_t len, double v, bool sign)
{
    if (!isfinite(v))
        snprintf(buf, len, "%s", isnan(v) ? "nan" : v > 0 ? "+inf" : "-inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(buf, len, sign ? "%+.0f" : "%.0f", v);
    else
        snprintf(buf, len, sign ? "%+.6g" : "%.6g", v);
}

static void fmt_value(char *buf, size_t len, const lmc_cmp_value *v)
{
    if (!v->present)
        snprintf(buf, len, "-");
    else
        fmt_num(buf, len, v->v, false);
}

static void fmt_range(char *buf, size_t len, const lmc_cmp_value *v)
{
    char lo[24], hi[24];
    if (!v->present || !v->has_spread) {
        snprintf(buf, len, "-");
        return;
    }
    fmt_num(lo, sizeof(lo), v->min, false);
    fmt_num(hi, sizeof(hi), v->max, false);
    snprintf(buf, len, "[%s, %s]", lo, hi);
}

static void fmt_rel(char *buf, size_t len, const lmc_cmp_figure *f)
{
    if (f->verdict == LMC_CMP_ONE_SIDED || f->delta == 0)
        snprintf(buf, len, "-");
    else if (!isfinite(f->rel))
        snprintf(buf, len, "%s", f->rel > 0 ? "+inf" : "-inf");
    else
        snprintf(buf, len, "%+.1f%%", f->rel * 100.0);
}

static void fmt_verdict(char *buf, size_t len, const lmc_cmp_figure *f)
{
    const char *spread = f->within_spread ? " (within spread)" : "";
    if (f->verdict == LMC_CMP_CHANGED)
        snprintf(buf, len, "%s", f->within_spread ? "within spread" : "");
    else if (f->verdict == LMC_CMP_REGRESSED)
        snprintf(buf, len, "REGRESSED (%s)%s", f->exceeded->spec, spread);
    else if (f->verdict == LMC_CMP_ONE_SIDED)
        snprintf(buf, len, "only in %s", f->base.present ? "base" : "new");
    else if (f->verdict == LMC_CMP_EQUAL)
        snprintf(buf, len, "=");
    else
        snprintf(buf, len, "ok%s", spread);
}

static const char *display_name(const lmc_cmp_figure *f)
{
    return f->short_name != NULL ? f->short_name : f->name;
}

static bool has_spread(const lmc_compare *c)
{
    return lmc_json_object_get(c->base->result, "repeat") != NULL ||
           lmc_json_object_get(c->new_->result, "repeat") != NULL;
}

/* "N runs (digests equal)" of a side's --repeat, or "1 run". */
static void put_runs(lmc_strbuf *b, const lmc_cmp_side *s)
{
    const lmc_json *r = lmc_json_object_get(s->result, "repeat");
    if (r == NULL) {
        lmc_strbuf_puts(b, "1 run");
        return;
    }
    lmc_strbuf_printf(
        b, "%lld runs (digests %s)", (long long)lmc_json_get_int(lmc_json_object_get(r, "runs")),
        lmc_json_get_bool(lmc_json_object_get(r, "digests_equal")) ? "equal" : "differ");
}

static void put_side(lmc_strbuf *b, const char *label, const lmc_cmp_side *s)
{
    char l[512];
    lmc_cmp_side_label(s, l, sizeof(l));
    lmc_strbuf_printf(b, "  %-16s", label);
    put_safe(b, l);
    const char *status = lmc_cmp_side_string(s, "status");
    if (status != NULL && strcmp(status, "complete") != 0) {
        lmc_strbuf_puts(b, " (");
        put_safe(b, status);
        lmc_strbuf_puts(b, ": its figures cover part of the trace)");
    }
    lmc_strbuf_puts(b, "\n");
}

static void put_header(lmc_strbuf *b, const lmc_compare *c)
{
    lmc_strbuf_puts(b, "Trace compare\n");
    put_side(b, "base:", c->base);
    put_side(b, "new:", c->new_);
    const char *da = lmc_cmp_side_string(c->base, "trace.digest");
    const char *db = lmc_cmp_side_string(c->new_, "trace.digest");
    const char *tp = lmc_cmp_side_string(c->base, "trace.path");
    lmc_strbuf_printf(b, "  %-16s", "trace:");
    switch (c->trace) {
    case LMC_CMP_TRACE_SAME:
        lmc_strbuf_puts(b, "same (");
        put_safe(b, tp != NULL ? tp : "?");
        lmc_strbuf_printf(b, ", digest %s)\n", da);
        break;
    case LMC_CMP_TRACE_DIFFERENT:
        lmc_strbuf_printf(b, "DIFFERENT (base %s, new %s)\n", da, db);
        break;
    case LMC_CMP_TRACE_UNKNOWN:
        lmc_strbuf_printf(b, "unknown (%s has no trace.digest)\n",
                          da == NULL || da[0] == '\0' ? "base" : "new");
        break;
    }
    const char *mode = lmc_cmp_side_string(c->base, "mode");
    const char *pace = lmc_cmp_side_string(c->base, "pace");
    lmc_strbuf_printf(b, "  %-16s", "replayed as:");
    put_safe(b, mode != NULL ? mode : "?");
    lmc_strbuf_puts(b, ", ");
    put_safe(b, pace != NULL ? pace : "?");
    lmc_strbuf_puts(b, " pace, time scale ");
    put_value(b, lmc_json_object_get(c->base->result, "time_scale"));
    lmc_strbuf_puts(b, c->n_diffs > 0 ? " (base)\n" : "\n");
    lmc_strbuf_printf(b, "  %-16s", "differs:");
    if (c->n_diffs == 0)
        lmc_strbuf_puts(b, "nothing in config, mode, pace, time scale or status\n");
    else
        lmc_strbuf_printf(b, "%zu field%s (base -> new)\n", c->n_diffs, c->n_diffs == 1 ? "" : "s");
    size_t w = 0;
    for (size_t i = 0; i < c->n_diffs; i++) {
        size_t n = strlen(c->diffs[i].path);
        w = n > w ? n : w;
    }
    for (size_t i = 0; i < c->n_diffs; i++) {
        lmc_strbuf_puts(b, "    ");
        put_safe(b, c->diffs[i].path);
        lmc_strbuf_repeat(b, ' ', w - strlen(c->diffs[i].path) + 2);
        put_value(b, c->diffs[i].base);
        lmc_strbuf_puts(b, " -> ");
        put_value(b, c->diffs[i].new_);
        lmc_strbuf_puts(b, "\n");
    }
    const char *oa = lmc_cmp_side_string(c->base, "outcome_digest");
    const char *ob = lmc_cmp_side_string(c->new_, "outcome_digest");
    lmc_strbuf_printf(b, "  %-16s", "outcome digest:");
    if (c->digests_equal)
        lmc_strbuf_printf(b, "equal (%.16s)\n", oa);
    else
        lmc_strbuf_printf(b, "DIFFERENT (base %.16s, new %.16s)\n", oa ? oa : "none",
                          ob ? ob : "none");
    if (has_spread(c)) {
        lmc_strbuf_printf(b, "  %-16s", "repeat:");
        lmc_strbuf_puts(b, "base ");
        put_runs(b, c->base);
        lmc_strbuf_puts(b, ", new ");
        put_runs(b, c->new_);
        lmc_strbuf_puts(b, "; values are medians\n");
    }
}

/* One table row, formatted. */
typedef struct row_text {
    const char *name;
    char col[6][64]; /* base, new, delta, rel, base range, new range */
    char verdict[160];
} row_text;

enum { COL_BASE, COL_NEW, COL_DELTA, COL_REL, COL_BASE_RANGE, COL_NEW_RANGE, N_COLS };

static void format_row(const lmc_cmp_figure *f, row_text *r)
{
    r->name = display_name(f);
    fmt_value(r->col[COL_BASE], sizeof(r->col[0]), &f->base);
    fmt_value(r->col[COL_NEW], sizeof(r->col[0]), &f->new_);
    if (f->verdict == LMC_CMP_ONE_SIDED)
        snprintf(r->col[COL_DELTA], sizeof(r->col[0]), "-");
    else
        fmt_num(r->col[COL_DELTA], sizeof(r->col[0]), f->delta, f->delta != 0);
    fmt_rel(r->col[COL_REL], sizeof(r->col[0]), f);
    fmt_range(r->col[COL_BASE_RANGE], sizeof(r->col[0]), &f->base);
    fmt_range(r->col[COL_NEW_RANGE], sizeof(r->col[0]), &f->new_);
    fmt_verdict(r->verdict, sizeof(r->verdict), f);
}

static void put_table(lmc_strbuf *b, const lmc_compare *c, bool all)
{
    static const char *const heads[N_COLS] = {"base", "new",        "delta",
                                              "rel",  "base range", "new range"};
    size_t n_cols = has_spread(c) ? N_COLS : COL_BASE_RANGE;
    size_t hidden_equal = 0, hidden_detail = 0, n = 0;
    row_text *rows = calloc(c->n_figs ? c->n_figs : 1, sizeof(*rows));
    if (rows == NULL) {
        b->oom = true; /* lmc_strbuf_finish reports it */
        return;
    }
    size_t w[N_COLS + 1] = {strlen("figure")};
    for (size_t k = 0; k < n_cols; k++)
        w[k + 1] = strlen(heads[k]);
    for (size_t i = 0; i < c->n_figs; i++) {
        const lmc_cmp_figure *f = &c->figs[i];
        if (!shown(f, all)) {
            if (f->verdict == LMC_CMP_EQUAL)
                hidden_equal++;
            else
                hidden_detail++;
            continue;
        }
        row_text *r = &rows[n++];
        format_row(f, r);
        w[0] = strlen(r->name) > w[0] ? strlen(r->name) : w[0];
        for (size_t k = 0; k < n_cols; k++)
            w[k + 1] = strlen(r->col[k]) > w[k + 1] ? strlen(r->col[k]) : w[k + 1];
    }
    lmc_strbuf_printf(b, "\n%-*s", (int)w[0], "figure");
    for (size_t k = 0; k < n_cols; k++)
        lmc_strbuf_printf(b, "  %*s", (int)w[k + 1], heads[k]);
    lmc_strbuf_puts(b, "  verdict\n");
    for (size_t i = 0; i < n; i++) {
        lmc_strbuf_printf(b, "%-*s", (int)w[0], rows[i].name);
        for (size_t k = 0; k < n_cols; k++)
            lmc_strbuf_printf(b, "  %*s", (int)w[k + 1], rows[i].col[k]);
        lmc_strbuf_printf(b, "  %s\n", rows[i].verdict);
    }
    free(rows);
    if (hidden_equal + hidden_detail > 0)
        lmc_strbuf_printf(b,
                          "(not shown: %zu equal figure%s, %zu changed detail figure%s; --all "
                          "shows every figure)\n",
                          hidden_equal, hidden_equal == 1 ? "" : "s", hidden_detail,
                          hidden_detail == 1 ? "" : "s");
}

/* "name=value ..." of the counters where the two outcomes differ. */
static void put_outcome_diff(lmc_strbuf *b, const lmc_json *a, const lmc_json *n)
{
    if (lmc_json_type_of(a) != LMC_JSON_OBJECT || lmc_json_type_of(n) != LMC_JSON_OBJECT) {
        lmc_strbuf_puts(b, "  outcome: ");
        put_value(b, a);
        lmc_strbuf_puts(b, " -> ");
        put_value(b, n);
        lmc_strbuf_puts(b, "\n");
        return;
    }
    for (size_t i = 0; i < lmc_json_size(a); i++) {
        const char *k = lmc_json_object_key_at(a, i);
        const lmc_json *va = lmc_json_object_value_at(a, i);
        const lmc_json *vn = lmc_json_object_get(n, k);
        if (vn != NULL && lmc_json_diff(va, vn, NULL, NULL) == 0)
            continue;
        lmc_strbuf_puts(b, "  ");
        put_safe(b, k);
        lmc_strbuf_puts(b, ": ");
        put_value(b, va);
        lmc_strbuf_puts(b, " -> ");
        put_value(b, vn);
        lmc_strbuf_puts(b, "\n");
    }
    for (size_t i = 0; i < lmc_json_size(n); i++) {
        const char *k = lmc_json_object_key_at(n, i);
        if (lmc_json_object_get(a, k) != NULL)
            continue;
        lmc_strbuf_puts(b, "  ");
        put_safe(b, k);
        lmc_strbuf_puts(b, ": (absent) -> ");
        put_value(b, lmc_json_object_value_at(n, i));
        lmc_strbuf_puts(b, "\n");
    }
}

static void put_key(lmc_strbuf *b, const lmc_json *k)
{
    lmc_strbuf_puts(b, "chunk_hash ");
    put_safe(b, lmc_json_get_string(lmc_json_object_get(k, "chunk_hash"), NULL));
    lmc_strbuf_puts(b, ", model ");
    put_value(b, lmc_json_object_get(k, "model_name"));
    lmc_strbuf_printf(b, ", kv_rank %lld, group %lld",
                      (long long)lmc_json_get_int(lmc_json_object_get(k, "kv_rank")),
                      (long long)lmc_json_get_int(lmc_json_object_get(k, "object_group_id")));
    const char *salt = lmc_json_get_string(lmc_json_object_get(k, "cache_salt"), NULL);
    if (salt != NULL && salt[0] != '\0') {
        lmc_strbuf_puts(b, ", salt ");
        put_value(b, lmc_json_object_get(k, "cache_salt"));
    }
}

static void put_divergence(lmc_strbuf *b, const lmc_compare *c, const lmc_compare_report_opts *o)
{
    const lmc_divergence *d = o->div;
    if (d == NULL && o->div_note == NULL)
        return;
    lmc_strbuf_puts(b, "\nFirst divergent record: ");
    if (d == NULL || !d->found) {
        if (d != NULL && (d->base_ended || d->new_ended))
            lmc_strbuf_printf(b,
                              "none in the %llu records both hold; %s's outcomes go on "
                              "past them\n",
                              (unsigned long long)d->compared, d->base_ended ? "new" : "base");
        else if (d != NULL)
            lmc_strbuf_printf(b,
                              "none: all %llu records have the same outcome (the digests "
                              "differ in the final L1/L2 counters)\n",
                              (unsigned long long)d->compared);
        else
            lmc_strbuf_puts(b, "not searched\n");
        if (o->div_note != NULL) {
            lmc_strbuf_puts(b, "  ");
            put_safe(b, o->div_note);
            lmc_strbuf_puts(b, "\n");
        }
        return;
    }
    char t[32];
    snprintf(t, sizeof(t), "%.6f", d->t_mono);
    lmc_strbuf_printf(b, "#%llu at t_mono %s s\n  ", (unsigned long long)d->index, t);
    put_safe(b, d->qualname);
    lmc_strbuf_printf(b, "\n  %llu key%s", (unsigned long long)d->n_keys,
                      d->n_keys == 1 ? "" : "s");
    if (d->first_key != NULL) {
        lmc_strbuf_puts(b, ", the first: ");
        put_key(b, d->first_key);
    }
    lmc_strbuf_puts(b, "\n");
    put_outcome_diff(b, d->base_outcome, d->new_outcome);
    if (o->div_note != NULL) {
        lmc_strbuf_puts(b, "  ");
        put_safe(b, o->div_note);
        lmc_strbuf_puts(b, "\n");
    }
    /* Rounded down: dump's --from keeps t_mono >= T, and must keep this record. */
    char from[32];
    snprintf(from, sizeof(from), "%.6f", floor(d->t_mono * 1e6) / 1e6);
    const char *tp = lmc_cmp_side_string(c->base, "trace.path");
    lmc_strbuf_printf(
        b, "  %llu record%s before it agree; it and the calls after it: lmcache trace dump ",
        (unsigned long long)(d->compared - 1), d->compared == 2 ? "" : "s");
    put_safe(b, tp != NULL ? tp : "TRACE");
    lmc_strbuf_printf(b, " --from %s --limit 20\n", from);
}

/* How many figures the threshold names that both results have (so it was applied to them). */
static size_t checked_by(const lmc_compare *c, const lmc_threshold *th)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_figs; i++)
        n += c->figs[i].verdict != LMC_CMP_ONE_SIDED &&
             lmc_cmp_figure_matches(&c->figs[i], th->pattern);
    return n;
}

static void put_unchecked(lmc_strbuf *b, const lmc_compare *c)
{
    for (size_t t = 0; t < c->n_thresholds; t++) {
        if (checked_by(c, &c->thresholds[t]) == 0)
            lmc_strbuf_printf(b, "  note: %s names only figures one result lacks: not checked\n",
                              c->thresholds[t].spec);
    }
}

static void put_result(lmc_strbuf *b, const lmc_compare *c)
{
    lmc_strbuf_puts(b, "\nResult: ");
    if (lmc_compare_exit_status(c) == 0) {
        if (c->n_thresholds == 0)
            lmc_strbuf_puts(b, "no thresholds given (--max-regression FIGURE=LIMIT)\n");
        else
            lmc_strbuf_printf(b, "ok: %zu threshold%s, none exceeded\n", c->n_thresholds,
                              c->n_thresholds == 1 ? "" : "s");
        put_unchecked(b, c);
        return;
    }
    lmc_strbuf_printf(b, "REGRESSION: %zu figure%s past a threshold", c->n_exceeded,
                      c->n_exceeded == 1 ? "" : "s");
    if (c->require_same_outcomes && !c->digests_equal)
        lmc_strbuf_puts(b, ", and the outcome digests differ (--require-same-outcomes)");
    lmc_strbuf_puts(b, "\n");
    for (size_t i = 0; i < c->n_figs; i++) {
        const lmc_cmp_figure *f = &c->figs[i];
        if (f->verdict != LMC_CMP_REGRESSED)
            continue;
        char vb[32], vn[32], d[32], r[32];
        fmt_value(vb, sizeof(vb), &f->base);
        fmt_value(vn, sizeof(vn), &f->new_);
        fmt_num(d, sizeof(d), f->delta, true);
        fmt_rel(r, sizeof(r), f);
        lmc_strbuf_printf(b, "  %s: %s %s -> %s (%s, %s)%s\n", f->exceeded->spec, display_name(f),
                          vb, vn, d, r, f->within_spread ? ", within the runs' spread" : "");
    }
    put_unchecked(b, c);
}

char *lmc_compare_report_table(const lmc_compare *c, const lmc_compare_report_opts *o)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    put_header(&b, c);
    put_table(&b, c, o->all);
    put_divergence(&b, c, o);
    put_result(&b, c);
    return lmc_strbuf_finish(&b);
}

/* ---- JSON ----------------------------------------------------------------- */

/* Set key (v taken even on failure, as lmc_json_object_set does); *ok false when it fails. */
static void set(bool *ok, lmc_json *obj, const char *key, lmc_json *v)
{
    if (lmc_json_object_set(obj, key, v) != LMC_OK)
        *ok = false;
}

static lmc_json *copy_of(const lmc_json *v)
{
    return v != NULL ? lmc_json_copy(v) : lmc_json_null();
}

static lmc_json *number(double v, bool is_int)
{
    if (!isfinite(v))
        return lmc_json_null(); /* JSON has no infinity; null reads as "undefined" */
    if (is_int && v == floor(v) && fabs(v) < 9e15)
        return lmc_json_int((int64_t)v);
    return lmc_json_float(v);
}

static lmc_json *side_json(bool *ok, const lmc_cmp_side *s)
{
    lmc_json *o = lmc_json_object();
    set(ok, o, "path", lmc_json_string(s->path));
    set(ok, o, "index", s->index >= 0 ? lmc_json_int(s->index) : lmc_json_null());
    static const char *const fields[][2] = {{"trace_path", "trace.path"},
                                            {"trace_digest", "trace.digest"},
                                            {"status", "status"},
                                            {"mode", "mode"},
                                            {"pace", "pace"},
                                            {"time_scale", "time_scale"},
                                            {"outcome_digest", "outcome_digest"}};
    for (size_t i = 0; i < COUNT(fields); i++)
        set(ok, o, fields[i][0], copy_of(lmc_json_at_path(s->result, fields[i][1])));
    const lmc_json *runs = lmc_json_at_path(s->result, "repeat.runs");
    set(ok, o, "repeat_runs", runs != NULL ? lmc_json_copy(runs) : lmc_json_int(1));
    return o;
}

static lmc_json *value_json(bool *ok, const lmc_cmp_value *v, bool spread)
{
    if (!v->present)
        return lmc_json_null();
    if (!spread)
        return number(v->v, v->is_int && !v->has_spread);
    if (!v->has_spread)
        return lmc_json_null();
    lmc_json *a = lmc_json_array();
    if (a == NULL || lmc_json_array_append(a, lmc_json_float(v->min)) != LMC_OK ||
        lmc_json_array_append(a, lmc_json_float(v->max)) != LMC_OK)
        *ok = false;
    return a;
}

static lmc_json *figure_json(bool *ok, const lmc_cmp_figure *f)
{
    lmc_json *o = lmc_json_object();
    set(ok, o, "short_name", f->short_name ? lmc_json_string(f->short_name) : lmc_json_null());
    set(ok, o, "base", value_json(ok, &f->base, false));
    set(ok, o, "new", value_json(ok, &f->new_, false));
    bool two = f->verdict != LMC_CMP_ONE_SIDED;
    set(ok, o, "delta",
        two ? number(f->delta,
                     f->base.is_int && f->new_.is_int && !f->base.has_spread && !f->new_.has_spread)
            : lmc_json_null());
    set(ok, o, "relative", two ? number(f->rel, false) : lmc_json_null());
    set(ok, o, "base_spread", value_json(ok, &f->base, true));
    set(ok, o, "new_spread", value_json(ok, &f->new_, true));
    set(ok, o, "within_spread", lmc_json_bool(f->within_spread));
    set(ok, o, "thresholds", lmc_json_int((int64_t)f->n_thresholds));
    set(ok, o, "exceeded", f->exceeded ? lmc_json_string(f->exceeded->spec) : lmc_json_null());
    set(ok, o, "verdict", lmc_json_string(lmc_cmp_verdict_name(f->verdict)));
    return o;
}

static lmc_json *thresholds_json(bool *ok, const lmc_compare *c)
{
    lmc_json *a = lmc_json_array();
    for (size_t t = 0; t < c->n_thresholds; t++) {
        const lmc_threshold *th = &c->thresholds[t];
        lmc_json *o = lmc_json_object();
        set(ok, o, "spec", lmc_json_string(th->spec));
        set(ok, o, "pattern", lmc_json_string(th->pattern));
        set(ok, o, "direction", lmc_json_string(th->increase ? "increase" : "decrease"));
        set(ok, o, "relative", lmc_json_bool(th->relative));
        set(ok, o, "limit", lmc_json_float(th->relative ? th->limit * 100.0 : th->limit));
        int64_t matched = 0;
        lmc_json *ex = lmc_json_array();
        for (size_t i = 0; i < c->n_figs; i++) {
            const lmc_cmp_figure *f = &c->figs[i];
            if (!lmc_cmp_figure_matches(f, th->pattern))
                continue;
            matched++;
            if (f->exceeded == th && ex != NULL &&
                lmc_json_array_append(ex, lmc_json_string(f->name)) != LMC_OK)
                *ok = false;
        }
        set(ok, o, "figures", lmc_json_int(matched));
        set(ok, o, "checked", lmc_json_int((int64_t)checked_by(c, th)));
        set(ok, o, "exceeded", ex);
        if (a == NULL || lmc_json_array_append(a, o) != LMC_OK)
            *ok = false;
    }
    return a;
}

static lmc_json *divergence_json(bool *ok, const lmc_divergence *d)
{
    if (d == NULL || !d->found)
        return lmc_json_null();
    lmc_json *o = lmc_json_object();
    set(ok, o, "index", lmc_json_int((int64_t)d->index));
    set(ok, o, "t_mono", lmc_json_float(d->t_mono));
    set(ok, o, "qualname", lmc_json_string(d->qualname));
    set(ok, o, "n_keys", lmc_json_int((int64_t)d->n_keys));
    set(ok, o, "first_key", copy_of(d->first_key));
    set(ok, o, "base_outcome", copy_of(d->base_outcome));
    set(ok, o, "new_outcome", copy_of(d->new_outcome));
    set(ok, o, "records_agreeing_before", lmc_json_int((int64_t)(d->compared - 1)));
    return o;
}

char *lmc_compare_report_json(const lmc_compare *c, const lmc_compare_report_opts *o)
{
    static const char *const traces[] = {"same", "different", "unknown"};
    bool ok = true;
    lmc_json *root = lmc_json_object();
    set(&ok, root, "schema", lmc_json_string(LMC_COMPARE_RESULT_SCHEMA));
    set(&ok, root, "schema_version", lmc_json_int(LMC_COMPARE_RESULT_SCHEMA_VERSION));
    set(&ok, root, "base", side_json(&ok, c->base));
    set(&ok, root, "new", side_json(&ok, c->new_));
    set(&ok, root, "trace", lmc_json_string(traces[c->trace]));
    lmc_json *diffs = lmc_json_array();
    for (size_t i = 0; i < c->n_diffs; i++) {
        lmc_json *d = lmc_json_object();
        set(&ok, d, "path", lmc_json_string(c->diffs[i].path));
        set(&ok, d, "base", copy_of(c->diffs[i].base));
        set(&ok, d, "new", copy_of(c->diffs[i].new_));
        set(&ok, d, "absent_in",
            c->diffs[i].base == NULL   ? lmc_json_string("base")
            : c->diffs[i].new_ == NULL ? lmc_json_string("new")
                                       : lmc_json_null());
        if (diffs == NULL || lmc_json_array_append(diffs, d) != LMC_OK)
            ok = false;
    }
    set(&ok, root, "differs", diffs);
    set(&ok, root, "outcome_digests_equal", lmc_json_bool(c->digests_equal));
    lmc_json *figs = lmc_json_object();
    for (size_t i = 0; i < c->n_figs; i++)
        set(&ok, figs, c->figs[i].name, figure_json(&ok, &c->figs[i]));
    set(&ok, root, "figures", figs);
    set(&ok, root, "thresholds", thresholds_json(&ok, c));
    set(&ok, root, "first_divergence", divergence_json(&ok, o->div));
    set(&ok, root, "first_divergence_note",
        o->div_note != NULL ? lmc_json_string(o->div_note) : lmc_json_null());
    set(&ok, root, "regression", lmc_json_bool(lmc_compare_exit_status(c) != 0));
    set(&ok, root, "exit_status", lmc_json_int(lmc_compare_exit_status(c)));
    char *text = ok ? lmc_json_dumps_line(root, 0, 2) : NULL;
    lmc_json_free(root);
    return text;
}
