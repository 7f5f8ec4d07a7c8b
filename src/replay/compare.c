/*
 * compare.c -- two replay results side by side (see compare.h).
 *
 * Owns: the comparison's rows and config differences (the result files
 * are compare_side.c's). The figures come from the one walk of
 * result_json.h over each result, base first, so rows keep the base's
 * document order and the new result's extra figures follow.
 *
 * Threads: none.
 */
#include "replay/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_diff.h"
#include "core/strbuf.h"
#include "replay/result_json.h"
#include "trace/format.h"

/* ---- figures ------------------------------------------------------------ */

const char *lmc_cmp_verdict_name(lmc_cmp_verdict v)
{
    switch (v) {
    case LMC_CMP_EQUAL:
        return "equal";
    case LMC_CMP_CHANGED:
        return "changed";
    case LMC_CMP_OK:
        return "ok";
    case LMC_CMP_REGRESSED:
        return "REGRESSED";
    case LMC_CMP_ONE_SIDED:
        return "one-sided";
    }
    return "?";
}

/* The value at keys under root, or NULL. */
static const lmc_json *at_keys(const lmc_json *root, const char *const *keys, size_t depth)
{
    const lmc_json *v = root;
    for (size_t i = 0; i < depth && v != NULL; i++)
        v = lmc_json_object_get(v, keys[i]);
    return v;
}

/* A figure's value in result r: the number at keys, or its --repeat median and spread. */
static lmc_cmp_value value_of(const lmc_json *r, const char *const *keys, size_t depth)
{
    lmc_cmp_value out = {0};
    const lmc_json *v = at_keys(r, keys, depth);
    lmc_json_type t = lmc_json_type_of(v);
    if (v == NULL || (t != LMC_JSON_INT && t != LMC_JSON_FLOAT))
        return out;
    out.present = true;
    out.is_int = t == LMC_JSON_INT;
    out.v = lmc_json_get_number(v);
    const lmc_json *sp =
        at_keys(lmc_json_object_get(lmc_json_object_get(r, "repeat"), "figures"), keys, depth);
    const lmc_json *med = lmc_json_object_get(sp, "median");
    const lmc_json *mn = lmc_json_object_get(sp, "min");
    const lmc_json *mx = lmc_json_object_get(sp, "max");
    if (med != NULL && mn != NULL && mx != NULL) {
        out.v = lmc_json_get_number(med);
        out.min = lmc_json_get_number(mn);
        out.max = lmc_json_get_number(mx);
        out.has_spread = true;
    }
    return out;
}

typedef struct fig_list {
    lmc_cmp_figure *v;
    size_t n, cap;
    const lmc_json *base, *new_;
    bool walking_new; /* the second walk: only the figures the base lacks */
    bool oom;
} fig_list;

static char *join_keys(const char *const *keys, size_t depth)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    for (size_t i = 0; i < depth; i++) {
        if (i > 0)
            lmc_strbuf_append(&b, ".", 1);
        lmc_strbuf_puts(&b, keys[i]);
    }
    return lmc_strbuf_finish(&b);
}

/* ops.<qualname>.<stat> with the StorageManager's qualname prefix left out; NULL otherwise. */
static char *short_name_of(const char *const *keys, size_t depth)
{
    size_t plen = strlen(LMC_TRACE_QUALNAME_PREFIX);
    if (depth < 2 || strcmp(keys[0], "ops") != 0 ||
        strncmp(keys[1], LMC_TRACE_QUALNAME_PREFIX, plen) != 0 || keys[1][plen] == '\0')
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, "ops.");
    lmc_strbuf_puts(&b, keys[1] + plen);
    for (size_t i = 2; i < depth; i++) {
        lmc_strbuf_append(&b, ".", 1);
        lmc_strbuf_puts(&b, keys[i]);
    }
    return lmc_strbuf_finish(&b);
}

/* One row per figure: both sides' values, found by the figure's keys in each result. */
static bool add_figure(const char *const *keys, size_t depth, const lmc_json *v, void *ud)
{
    (void)v;
    fig_list *l = ud;
    lmc_cmp_value b = value_of(l->base, keys, depth);
    if (l->walking_new && b.present)
        return true; /* the base's walk made its row */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 128;
        lmc_cmp_figure *nv = realloc(l->v, cap * sizeof(*nv));
        if (nv == NULL) {
            l->oom = true;
            return false;
        }
        l->v = nv;
        l->cap = cap;
    }
    lmc_cmp_figure *f = &l->v[l->n];
    memset(f, 0, sizeof(*f));
    f->name = join_keys(keys, depth);
    f->short_name = short_name_of(keys, depth);
    if (f->name == NULL) {
        free(f->short_name);
        l->oom = true;
        return false;
    }
    f->base = b;
    f->new_ = value_of(l->new_, keys, depth);
    l->n++;
    return true;
}

static void judge(lmc_cmp_figure *f, const lmc_threshold *th, size_t n_th)
{
    if (!f->base.present || !f->new_.present) {
        f->verdict = LMC_CMP_ONE_SIDED;
        for (size_t i = 0; i < n_th; i++)
            f->n_thresholds += lmc_cmp_figure_matches(f, th[i].pattern);
        return;
    }
    f->delta = f->new_.v - f->base.v;
    f->rel = lmc_relative_change(f->base.v, f->new_.v);
    double blo = f->base.has_spread ? f->base.min : f->base.v;
    double bhi = f->base.has_spread ? f->base.max : f->base.v;
    double nlo = f->new_.has_spread ? f->new_.min : f->new_.v;
    double nhi = f->new_.has_spread ? f->new_.max : f->new_.v;
    f->within_spread =
        f->delta != 0 && (f->base.has_spread || f->new_.has_spread) && blo <= nhi && nlo <= bhi;
    for (size_t i = 0; i < n_th; i++) {
        if (!lmc_cmp_figure_matches(f, th[i].pattern))
            continue;
        f->n_thresholds++;
        if (f->exceeded == NULL && lmc_threshold_exceeded(&th[i], f->base.v, f->new_.v))
            f->exceeded = &th[i];
    }
    if (f->exceeded != NULL)
        f->verdict = LMC_CMP_REGRESSED;
    else if (f->delta == 0)
        f->verdict = LMC_CMP_EQUAL;
    else
        f->verdict = f->n_thresholds > 0 ? LMC_CMP_OK : LMC_CMP_CHANGED;
}

bool lmc_cmp_figure_matches(const lmc_cmp_figure *f, const char *pattern)
{
    return lmc_figure_pattern_match(pattern, f->name) ||
           (f->short_name != NULL && lmc_figure_pattern_match(pattern, f->short_name));
}

/* ---- config ------------------------------------------------------------- */

typedef struct diff_list {
    lmc_cmp_config_diff *v;
    size_t n, cap;
    bool oom;
} diff_list;

static lmc_json *copy_or_null(const lmc_json *v)
{
    return v != NULL ? lmc_json_copy(v) : NULL;
}

static void add_diff(const char *path, const lmc_json *a, const lmc_json *b, void *ud)
{
    diff_list *l = ud;
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        lmc_cmp_config_diff *nv = realloc(l->v, cap * sizeof(*nv));
        if (nv == NULL) {
            l->oom = true;
            return;
        }
        l->v = nv;
        l->cap = cap;
    }
    lmc_cmp_config_diff *d = &l->v[l->n++];
    d->path = strdup(path[0] != '\0' ? path : "(the whole config)");
    d->base = copy_or_null(a);
    d->new_ = copy_or_null(b);
    if (d->path == NULL || (a != NULL && d->base == NULL) || (b != NULL && d->new_ == NULL))
        l->oom = true;
}

/* The fields compared beside the StorageManager config: how each replay ran. */
static const char *const g_run_fields[] = {"mode", "pace", "time_scale", "status"};

static lmc_status config_diffs(lmc_compare *c)
{
    diff_list l = {0};
    const lmc_json *a = lmc_json_at_path(c->base->result, "config.json");
    const lmc_json *b = lmc_json_at_path(c->new_->result, "config.json");
    if (a != NULL || b != NULL) {
        if (a != NULL && b != NULL)
            lmc_json_diff_values(a, b, add_diff, &l);
        else
            add_diff("", a, b, &l);
    }
    /* How the replays ran, as one more path each (a result lacking one differs by absence). */
    for (size_t i = 0; i < sizeof(g_run_fields) / sizeof(g_run_fields[0]); i++) {
        const lmc_json *va = lmc_json_object_get(c->base->result, g_run_fields[i]);
        const lmc_json *vb = lmc_json_object_get(c->new_->result, g_run_fields[i]);
        if ((va != NULL || vb != NULL) &&
            (va == NULL || vb == NULL || lmc_json_diff(va, vb, NULL, NULL) > 0))
            add_diff(g_run_fields[i], va, vb, &l);
    }
    c->diffs = l.v;
    c->n_diffs = l.n;
    return l.oom ? LMC_ERR_NOMEM : LMC_OK;
}

/* ---- the comparison ----------------------------------------------------- */

/*
 * For a pattern that names nothing: the last parts of the figure names
 * holding its longest run without '*' ("p99" -> "p99_ms, p99_us"), or
 * where the names are listed.
 */
static void suggest(const lmc_compare *c, const char *pattern, char *buf, size_t len)
{
    char word[128] = "";
    for (const char *p = pattern; *p != '\0';) {
        size_t n = strcspn(p, "*");
        if (n > strlen(word) && n < sizeof(word))
            snprintf(word, sizeof(word), "%.*s", (int)n, p);
        p += n + (p[n] == '*');
    }
    lmc_fixbuf b = LMC_FIXBUF(buf, len);
    const char *seen[4];
    size_t found = 0;
    for (size_t i = 0; word[0] != '\0' && i < c->n_figs && found < 4; i++) {
        const char *name = c->figs[i].name;
        const char *last = strrchr(name, '.');
        last = last != NULL ? last + 1 : name;
        bool dup = false;
        for (size_t k = 0; k < found && !dup; k++)
            dup = strcmp(seen[k], last) == 0;
        if (dup || strstr(name, word) == NULL)
            continue;
        lmc_fixbuf_puts(&b, found == 0 ? "did you mean " : ", ");
        lmc_fixbuf_puts(&b, last);
        seen[found++] = last;
    }
    lmc_fixbuf_puts(&b, found > 0 ? "?" : "docs/cli.md lists them; --all shows every one");
    lmc_fixbuf_finish(&b);
}

static lmc_cmp_trace same_trace(const lmc_cmp_side *a, const lmc_cmp_side *b)
{
    const char *da = lmc_cmp_side_string(a, "trace.digest");
    const char *db = lmc_cmp_side_string(b, "trace.digest");
    if (da == NULL || db == NULL || da[0] == '\0' || db[0] == '\0')
        return LMC_CMP_TRACE_UNKNOWN;
    return strcmp(da, db) == 0 ? LMC_CMP_TRACE_SAME : LMC_CMP_TRACE_DIFFERENT;
}

lmc_status lmc_compare_run(const lmc_cmp_side *base, const lmc_cmp_side *new_,
                           const lmc_threshold *thresholds, size_t n_thresholds, lmc_compare *out,
                           lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    out->base = base;
    out->new_ = new_;
    out->thresholds = thresholds;
    out->n_thresholds = n_thresholds;
    out->trace = same_trace(base, new_);
    const char *oa = lmc_cmp_side_string(base, "outcome_digest");
    const char *ob = lmc_cmp_side_string(new_, "outcome_digest");
    out->digests_equal = oa != NULL && ob != NULL && oa[0] != '\0' && strcmp(oa, ob) == 0;
    lmc_status st = config_diffs(out);
    if (st != LMC_OK)
        goto oom;

    /* Rows: the base's figures in its order, then those only the new result has. */
    fig_list l = {.base = base->result, .new_ = new_->result};
    lmc_replay_result_each_figure(base->result, add_figure, &l);
    l.walking_new = true;
    if (!l.oom)
        lmc_replay_result_each_figure(new_->result, add_figure, &l);
    out->figs = l.v;
    out->n_figs = l.n;
    if (l.oom)
        goto oom;
    for (size_t i = 0; i < out->n_figs; i++) {
        judge(&out->figs[i], thresholds, n_thresholds);
        out->n_exceeded += out->figs[i].verdict == LMC_CMP_REGRESSED;
    }
    for (size_t t = 0; t < n_thresholds; t++) {
        bool any = false;
        for (size_t i = 0; i < out->n_figs && !any; i++)
            any = lmc_cmp_figure_matches(&out->figs[i], thresholds[t].pattern);
        if (!any) {
            char hint[200];
            suggest(out, thresholds[t].pattern, hint, sizeof(hint));
            st = lmc_error_set(err, LMC_ERR_INVALID,
                               "--max-regression '%s': '%s' names no figure of these results "
                               "(%s)",
                               thresholds[t].spec, thresholds[t].pattern, hint);
            lmc_compare_free(out);
            return st;
        }
    }
    return LMC_OK;

oom:
    lmc_compare_free(out);
    return lmc_error_set(err, LMC_ERR_NOMEM, "trace compare: out of memory");
}

void lmc_compare_free(lmc_compare *c)
{
    for (size_t i = 0; i < c->n_figs; i++) {
        free(c->figs[i].name);
        free(c->figs[i].short_name);
    }
    free(c->figs);
    for (size_t i = 0; i < c->n_diffs; i++) {
        free(c->diffs[i].path);
        lmc_json_free(c->diffs[i].base);
        lmc_json_free(c->diffs[i].new_);
    }
    free(c->diffs);
    memset(c, 0, sizeof(*c));
}

int lmc_compare_exit_status(const lmc_compare *c)
{
    return c->n_exceeded > 0 || (c->require_same_outcomes && !c->digests_equal) ? 1 : 0;
}
