/*
 * report.c -- the replay result as LMCache's terminal table or JSON (see
 * report.h).
 *
 * Owns: nothing past a call. A report is built as a list of sections of
 * (key, label, value) entries, the shape of LMCache's Metrics/Section, and
 * the same list feeds both renderers, so the table and the JSON can never
 * disagree on which rows exist.
 *
 * Threads: none; every function is reentrant.
 *
 * Why: the values mimic Python exactly. Durations and latencies go through
 * round(x, 3) before the formatter's "%.2f", and that double rounding shows
 * (0.0449 -> 0.045 -> "0.04" while 0.04951 -> 0.05 -> "0.05"), so
 * lmc_round3 is a real correctly rounded round(), via glibc's exact "%.3f"
 * and strtod, not floor(x * 1000 + 0.5) / 1000. JSON keys stay in
 * insertion order because LMCache's json formatter does not sort.
 */
#include "replay/report.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "replay/output.h"
#include "replay/repeat.h"
#include "replay/result_json.h"

#define REPORT_TITLE "Trace Replay Result"
#define REPORT_WIDTH 64

/* ---- a growable string ------------------------------------------------ */

/* ---- Python-compatible pieces ----------------------------------------- */

/*
 * str.center: the margin is split in half; an odd margin puts its extra
 * character on the left only when the width is odd too (CPython's
 * left = marg / 2 + (marg & width & 1)).
 */
static void center_into(lmc_strbuf *b, const char *text, size_t width, char fill)
{
    size_t n = strlen(text);
    if (n >= width) {
        lmc_strbuf_append(b, text, n);
        return;
    }
    size_t marg = width - n;
    size_t left = marg / 2 + (marg & width & 1);
    lmc_strbuf_repeat(b, fill, left);
    lmc_strbuf_append(b, text, n);
    lmc_strbuf_repeat(b, fill, marg - left);
}

void lmc_center(const char *text, size_t width, char fill, char *buf)
{
    size_t n = strlen(text);
    if (n >= width) {
        memcpy(buf, text, width);
        buf[width] = '\0';
        return;
    }
    size_t marg = width - n;
    size_t left = marg / 2 + (marg & width & 1);
    memset(buf, fill, left);
    memcpy(buf + left, text, n);
    memset(buf + left + n, fill, marg - left);
    buf[width] = '\0';
}

double lmc_round3(double x)
{
    if (!isfinite(x))
        return x;
    /* DBL_MAX has 309 integer digits; "%.3f" adds 5 more and a sign. */
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%.3f", x);
    return strtod(tmp, NULL);
}

/* f"{x:.2f}": C's "%.2f" except that Python never signs a NaN. */
static void format_float2(double x, char *buf, size_t len)
{
    if (isnan(x))
        snprintf(buf, len, "nan");
    else
        snprintf(buf, len, "%.2f", x);
}

const char *lmc_replay_short_name(const char *qualname, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    const char *dot = strrchr(qualname, '.');
    const char *last = dot ? dot + 1 : qualname;
    const char *tail = NULL;
    if (strcmp(last, "__enter__") == 0)
        tail = "enter";
    else if (strcmp(last, "__exit__") == 0)
        tail = "exit";
    if (dot == NULL || tail == NULL) {
        snprintf(buf, len, "%s", last);
        return buf;
    }
    /* "<owner>.enter": the component before the dunder names the context manager. */
    const char *owner = dot;
    while (owner > qualname && owner[-1] != '.')
        owner--;
    snprintf(buf, len, "%.*s.%s", (int)(dot - owner), owner, tail);
    return buf;
}

/* ---- the generic renderers -------------------------------------------- */

const char *lmc_metric_format_value(const lmc_metric *m, char *buf, size_t len)
{
    switch (m->kind) {
    case LMC_METRIC_INT:
        snprintf(buf, len, "%" PRId64, m->i);
        return buf;
    case LMC_METRIC_FLOAT:
        format_float2(m->f, buf, len);
        return buf;
    case LMC_METRIC_STR:
        return m->s ? m->s : "N/A";
    case LMC_METRIC_NONE:
        break;
    }
    return "N/A";
}

char *lmc_metrics_format_terminal(const char *title, const lmc_metric_section *sections,
                                  size_t n_sections, size_t width)
{
    lmc_strbuf b = {0};
    lmc_strbuf_puts(&b, " ");
    lmc_strbuf_puts(&b, title);
    lmc_strbuf_puts(&b, " ");
    char *title_text = lmc_strbuf_finish(&b);
    if (title_text == NULL)
        return NULL;
    b = (lmc_strbuf){0};
    center_into(&b, title_text, width, '=');
    free(title_text);
    lmc_strbuf_puts(&b, "\n");
    for (size_t s = 0; s < n_sections; s++) {
        const lmc_metric_section *sec = &sections[s];
        if (sec->label != NULL) {
            lmc_strbuf h = {0};
            lmc_strbuf_puts(&h, " ");
            lmc_strbuf_puts(&h, sec->label);
            lmc_strbuf_puts(&h, " ");
            char *header = lmc_strbuf_finish(&h);
            if (header == NULL) {
                b.oom = true;
                break;
            }
            center_into(&b, header, width, '-');
            free(header);
            lmc_strbuf_puts(&b, "\n");
        }
        for (size_t e = 0; e < sec->n_entries; e++) {
            const lmc_metric *m = &sec->entries[e];
            char vbuf[400]; /* "%.2f" of DBL_MAX is 312 bytes */
            const char *value = lmc_metric_format_value(m, vbuf, sizeof(vbuf));
            size_t label_len = strlen(m->label) + 1; /* "label:" */
            size_t value_len = strlen(value);
            size_t pad = 1;
            if (width > label_len + value_len + 1)
                pad = width - label_len - value_len;
            lmc_strbuf_puts(&b, m->label);
            lmc_strbuf_puts(&b, ":");
            lmc_strbuf_repeat(&b, ' ', pad);
            lmc_strbuf_append(&b, value, value_len);
            lmc_strbuf_puts(&b, "\n");
        }
    }
    lmc_strbuf_repeat(&b, '=', width);
    lmc_strbuf_puts(&b, "\n");
    return lmc_strbuf_finish(&b);
}

static lmc_json *metric_json(const lmc_metric *m)
{
    switch (m->kind) {
    case LMC_METRIC_INT:
        return lmc_json_int(m->i);
    case LMC_METRIC_FLOAT:
        return lmc_json_float(m->f);
    case LMC_METRIC_STR:
        return m->s ? lmc_json_string(m->s) : lmc_json_null();
    case LMC_METRIC_NONE:
        break;
    }
    return lmc_json_null();
}

char *lmc_metrics_format_json(const char *title, const lmc_metric_section *sections,
                              size_t n_sections, int indent)
{
    lmc_json *root = lmc_json_object();
    lmc_json *metrics = lmc_json_object();
    bool ok = root != NULL && metrics != NULL;
    for (size_t s = 0; s < n_sections && ok; s++) {
        const lmc_metric_section *sec = &sections[s];
        /* An unnamed section's entries go straight into "metrics". */
        lmc_json *dst = sec->key ? lmc_json_object() : metrics;
        ok = dst != NULL;
        for (size_t e = 0; e < sec->n_entries && ok; e++)
            ok = lmc_json_object_set(dst, sec->entries[e].key, metric_json(&sec->entries[e])) ==
                 LMC_OK;
        if (sec->key != NULL) {
            if (ok)
                ok = lmc_json_object_set(metrics, sec->key, dst) == LMC_OK;
            else
                lmc_json_free(dst);
        }
    }
    ok = ok && lmc_json_object_set(root, "title", lmc_json_string(title)) == LMC_OK;
    if (ok) {
        ok = lmc_json_object_set(root, "metrics", metrics) == LMC_OK;
        metrics = NULL; /* owned by root now, even on failure */
    }
    lmc_json_free(metrics);
    char *text = ok ? lmc_json_dumps_line(root, 0, indent) : NULL;
    lmc_json_free(root);
    return text;
}

/* ---- the replay report ------------------------------------------------- */

#define MIB (1024.0 * 1024.0)
/* Rows listing config paths; more are summarised in one row. */
#define MAX_DIFF_ROWS 10

/* The sections of one report, with the strings they point into. */
typedef struct report {
    lmc_metric *entries; /* every section's entries, in one array of fixed capacity */
    size_t n_entries, cap_entries;
    lmc_metric_section sections[8];
    size_t n_sections;
    size_t section_start; /* first entry of the section being built */
    char **owned;         /* keys, labels and values built for this report */
    size_t n_owned, cap_owned;
    bool oom;
} report;

static void report_free(report *r)
{
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->entries);
}

/*
 * vasprintf that records running out of memory in *oom: the report's own
 * strings and the notes under the table are both formatted this way, and a
 * failure of either marks its builder out of memory and nothing else.
 */
static char *format_or_oom(bool *oom, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static char *format_or_oom(bool *oom, const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        *oom = true;
        return NULL;
    }
    return s;
}

static char *own_printf(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *own_printf(report *r, const char *fmt, ...)
{
    if (r->n_owned == r->cap_owned) {
        size_t cap = r->cap_owned ? r->cap_owned * 2 : 64;
        char **no = realloc(r->owned, cap * sizeof(*no));
        if (no == NULL) {
            r->oom = true;
            return NULL;
        }
        r->owned = no;
        r->cap_owned = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = format_or_oom(&r->oom, fmt, ap);
    va_end(ap);
    if (s == NULL)
        return NULL;
    r->owned[r->n_owned++] = s;
    return s;
}

static void add(report *r, lmc_metric m)
{
    if (r->n_entries == r->cap_entries || (m.kind == LMC_METRIC_STR && m.s == NULL) ||
        m.label == NULL || m.key == NULL) {
        r->oom = true;
        return;
    }
    r->entries[r->n_entries++] = m;
}

static void section_begin(report *r)
{
    r->section_start = r->n_entries;
}

static void section_end(report *r, const char *key, const char *label)
{
    size_t n = r->n_entries - r->section_start;
    if (n == 0 || r->n_sections == sizeof(r->sections) / sizeof(r->sections[0]))
        return;
    r->sections[r->n_sections++] =
        (lmc_metric_section){key, label, r->entries + r->section_start, n};
}

static lmc_metric metric_int(const char *key, const char *label, uint64_t v)
{
    return (lmc_metric){.key = key, .label = label, .kind = LMC_METRIC_INT, .i = (int64_t)v};
}

static lmc_metric metric_float(const char *key, const char *label, double v)
{
    return (lmc_metric){.key = key, .label = label, .kind = LMC_METRIC_FLOAT, .f = v};
}

static lmc_metric metric_str(const char *key, const char *label, const char *v)
{
    return (lmc_metric){
        .key = key, .label = label, .kind = v ? LMC_METRIC_STR : LMC_METRIC_NONE, .s = v};
}

bool lmc_replay_behind_schedule(const lmc_replay_summary *s, char *why, size_t len)
{
    const lmc_lateness_stats *l = &s->lateness;
    if (l->count == 0)
        return false;
    double p99_ms = l->p99_us / 1000.0;
    double gap_us = s->mean_gap_s * 1e6;
    bool over_abs = p99_ms > 1.0;
    bool over_gap = gap_us > 0 && l->p99_us > 0.01 * gap_us;
    if (why != NULL && len > 0) {
        if (over_abs)
            snprintf(why, len, "p99 %.2f ms > 1 ms", p99_ms);
        else if (over_gap)
            snprintf(why, len, "p99 %.0f us > 1%% of the mean gap, %.0f us", l->p99_us, gap_us);
        else
            why[0] = '\0';
    }
    return over_abs || over_gap;
}

/* A result of mode engine (the one list of mode names is replay/driver.h's). */
static bool engine_mode(const lmc_replay_summary *s)
{
    return s->mode != NULL && strcmp(s->mode, lmc_replay_mode_names[LMC_REPLAY_MODE_ENGINE]) == 0;
}

static const char *percent(report *r, double ratio)
{
    return own_printf(r, "%.1f%%", ratio * 100.0);
}

static void overall_section(report *r, const lmc_replay_summary *s)
{
    section_begin(r);
    add(r, metric_str("level", "Trace level", s->level));
    if (engine_mode(s))
        add(r, metric_str("mode", "Mode", "engine (lookups served as requests)"));
    add(r, metric_int("replayed", "Records replayed", s->replayed));
    if (engine_mode(s))
        add(r, metric_int("not_reissued", "Records not reissued", s->figures.not_reissued_records));
    add(r, metric_int("skipped", "Records skipped", s->skipped));
    add(r, metric_int("failed", "Records failed", s->failed));
    /* Not records at all (LMCache's reader skips them before its replay sees them). */
    if (s->malformed > 0)
        add(r, metric_int("malformed", "Records malformed", s->malformed));
    add(r, metric_float("duration", "Replay duration (s)", lmc_round3(s->duration_s)));
    if (s->interrupted)
        add(r, metric_str("status", "Status",
                          own_printf(r, "interrupted after %" PRIu64 " records", s->reported)));
    const char *hd = s->header_digest ? s->header_digest : "";
    const char *rd = s->replay_digest ? s->replay_digest : "";
    if (hd[0] != '\0') {
        const char *digest = rd[0] != '\0' && strcmp(hd, rd) != 0
                                 ? own_printf(r, "MISMATCH (rec=%.8s, run=%.8s)", hd, rd)
                                 : own_printf(r, "match (%.8s)", hd);
        add(r, metric_str("digest", "Config digest", digest));
        size_t shown = s->n_config_diffs <= MAX_DIFF_ROWS ? s->n_config_diffs : MAX_DIFF_ROWS - 1;
        for (size_t i = 0; i < shown; i++)
            add(r, metric_str("config_differs", "Config differs", s->config_diffs[i]));
        if (shown < s->n_config_diffs)
            add(r, metric_str("config_differs", "Config differs",
                              own_printf(r, "... and %zu more", s->n_config_diffs - shown)));
    }
    if (s->outcome_digest != NULL && s->outcome_digest[0] != '\0')
        add(r, metric_str("outcome_digest", "Outcome digest", s->outcome_digest));
    section_end(r, "overall", "Overall");
}

/* Mode calls' rows: how the recorded reads fared, and the reservations. */
static void agreement_rows(report *r, const lmc_replay_summary *s)
{
    const lmc_replay_figures *f = &s->figures;
    const lmc_replay_totals *t = s->totals;
    add(r, metric_str("read_agreement", "Recorded hits still hit",
                      f->read_agreement < 1.0
                          ? own_printf(r, "%.1f%% (%.1f%% lost)", f->read_agreement * 100.0,
                                       (1.0 - f->read_agreement) * 100.0)
                          : percent(r, f->read_agreement)));
    add(r, metric_str("key_agreement", "Recorded keys still found",
                      own_printf(r, "%.1f%% (%" PRIu64 " of %" PRIu64 ")", f->key_agreement * 100.0,
                                 f->read_keys_found, f->recorded_read_keys)));
    add(r, metric_int("failed_reads", "Failed reads", f->failed_reads));
    add(r, metric_str("refused_keys", "Reservations refused (keys)",
                      own_printf(r, "%" PRIu64 " of %" PRIu64, f->refused_keys,
                                 t->keys[LMC_TRACE_OP_RESERVE_WRITE])));
    const lmc_outcome_counter_info *ci;
    for (size_t c = 0; (ci = lmc_outcome_counter_get(c)) != NULL; c++) {
        if (ci->op == LMC_TRACE_OP_RESERVE_WRITE && c != LMC_OC_RESERVE_WRITE_reserved &&
            t->v[c] > 0)
            add(r, metric_int(ci->name, own_printf(r, "  refused, %s", ci->name), t->v[c]));
    }
}

/* Mode engine's outcome rows: the requests' hit rate beside the recording's, reads, stores. */
static void engine_rows(report *r, const lmc_replay_summary *s)
{
    const lmc_replay_figures *f = &s->figures;
    const lmc_replay_totals *t = s->totals;
    add(r,
        metric_str("engine_hit_rate", "Engine hit rate",
                   own_printf(r, "%.1f%% (%" PRIu64 " of %" PRIu64 " keys)",
                              f->engine_hit_rate * 100.0, f->engine_hit_keys, f->looked_up_keys)));
    add(r, metric_str("recorded_hit_rate", "Recorded hit rate",
                      own_printf(r, "%.1f%% (the recording's own)", f->recorded_hit_rate * 100.0)));
    add(r, metric_int("requests", "Requests", f->lookups));
    add(r, metric_int("engine_read_keys", "Keys read", f->engine_read_keys));
    if (t->v[LMC_OC_SUBMIT_PREFETCH_read_failed] > 0)
        add(r, metric_int("read_failed", "Keys whose read was refused",
                          t->v[LMC_OC_SUBMIT_PREFETCH_read_failed]));
    add(r, metric_int("engine_stored_keys", "Keys stored", f->engine_stored_keys));
    add(r, metric_str("engine_refused_keys", "Stores refused (keys)",
                      own_printf(r, "%" PRIu64 " of %" PRIu64, f->engine_refused_keys,
                                 f->engine_refused_keys + f->engine_stored_keys)));
    const lmc_outcome_counter_info *ci;
    for (size_t c = LMC_OC_SUBMIT_PREFETCH_store_present;
         c <= LMC_OC_SUBMIT_PREFETCH_store_other && (ci = lmc_outcome_counter_get(c)) != NULL;
         c++) {
        if (t->v[c] > 0)
            add(r, metric_int(ci->name, own_printf(r, "  refused, %s", ci->name + strlen("store_")),
                              t->v[c]));
    }
}

static void outcome_sections(report *r, const lmc_replay_summary *s)
{
    const lmc_replay_figures *f = &s->figures;
    const lmc_replay_totals *t = s->totals;
    section_begin(r);
    if (engine_mode(s))
        engine_rows(r, s);
    add(r, metric_str("chunk_hit_rate", "Chunk hit rate",
                      own_printf(r, "%.1f%% (%" PRIu64 " of %" PRIu64 " keys)",
                                 f->chunk_hit_rate * 100.0, f->found_keys, f->looked_up_keys)));
    add(r, metric_str(
               "l1_hit_rate", "L1 hit rate",
               own_printf(r, "%.1f%% (%" PRIu64 " keys)", f->l1_hit_rate * 100.0, f->l1_hit_keys)));
    add(r, metric_str(
               "l2_hit_rate", "L2 hit rate",
               own_printf(r, "%.1f%% (%" PRIu64 " keys)", f->l2_hit_rate * 100.0, f->l2_hit_keys)));
    if (!engine_mode(s))
        agreement_rows(r, s);
    if (s->unfinished_prefetches > 0)
        add(r,
            metric_int("unfinished_prefetches", "Unfinished prefetches", s->unfinished_prefetches));
    section_end(r, "outcomes", "Outcomes");

    section_begin(r);
    add(r, metric_str("l1_peak", "L1 peak usage",
                      own_printf(r, "%.1f of %.1f MiB (%.1f%%)", t->l1_peak_used_bytes / MIB,
                                 t->l1_capacity_bytes / MIB,
                                 t->l1_capacity_bytes ? 100.0 * (double)t->l1_peak_used_bytes /
                                                            (double)t->l1_capacity_bytes
                                                      : 0.0)));
    add(r, metric_int("l1_evicted_keys", "L1 evictions (keys)", t->sm.l1_evicted_keys));
    add(r, metric_str("l2_stores", "L2 stores",
                      own_printf(r, "%" PRIu64 " keys, %.1f MiB", t->sm.l2_stored_keys,
                                 t->sm.l2_stored_bytes / MIB)));
    add(r, metric_str("l2_loads", "L2 loads",
                      own_printf(r, "%" PRIu64 " keys, %.1f MiB", t->sm.l2_loaded_keys,
                                 t->sm.l2_loaded_bytes / MIB)));
    add(r, metric_int("l2_evicted_keys", "L2 evictions (keys)", t->sm.l2_evicted_keys));
    if (t->sm.l2_store_failed_tasks > 0)
        add(r, metric_int("l2_store_failed_tasks", "L2 store tasks failed",
                          t->sm.l2_store_failed_tasks));
    section_end(r, "memory", "Memory and L2");
}

static void ops_section(report *r, const lmc_replay_summary *s)
{
    section_begin(r);
    for (size_t i = 0; i < s->n_ops; i++) {
        const lmc_op_stats *o = &s->ops[i];
        char short_name[256];
        lmc_replay_short_name(o->qualname, short_name, sizeof(short_name));
        static const char *const what[4] = {"count", "mean", "p50", "p99"};
        const char *k[4], *l[4];
        for (size_t j = 0; j < 4; j++) {
            k[j] = own_printf(r, "%s_%s", short_name, what[j]);
            l[j] = own_printf(r, "%s %s", short_name, what[j]);
        }
        add(r, metric_int(k[0], l[0], o->count));
        add(r, metric_float(k[1], l[1], lmc_round3(o->mean_ms)));
        add(r, metric_float(k[2], l[2], lmc_round3(o->p50_ms)));
        add(r, metric_float(k[3], l[3], lmc_round3(o->p99_ms)));
    }
    section_end(r, "ops", "Per-Op Latency (ms)");
}

static void pacing_section(report *r, const lmc_replay_summary *s)
{
    section_begin(r);
    add(r, metric_float("time_scale", "Time scale", s->time_scale));
    if (s->virtual_pace) {
        /* Nothing waits in virtual time, so lateness does not apply: N/A (null in JSON). */
        add(r, metric_str("pace", "Pace", "virtual"));
        add(r, metric_str("lateness_p50_us", "Lateness p50 (us)", NULL));
        add(r, metric_str("lateness_p99_us", "Lateness p99 (us)", NULL));
        add(r, metric_str("lateness_max_us", "Lateness max (us)", NULL));
        section_end(r, "pacing", "Pacing");
        return;
    }
    add(r, metric_float("lateness_p50_us", "Lateness p50 (us)", s->lateness.p50_us));
    add(r, metric_float("lateness_p99_us", "Lateness p99 (us)", s->lateness.p99_us));
    add(r, metric_float("lateness_max_us", "Lateness max (us)", s->lateness.max_us));
    char why[128];
    if (lmc_replay_behind_schedule(s, why, sizeof(why)))
        add(r, metric_str("behind_schedule", "Behind schedule", own_printf(r, "yes (%s)", why)));
    section_end(r, "pacing", "Pacing");
}

/* "median [min, max]" of one figure, in the figure's own unit (scale multiplies). */
static const char *spread_text(report *r, const lmc_spread *sp, double scale, const char *fmt)
{
    char a[64], b[64], c[64];
    snprintf(a, sizeof(a), fmt, sp->median * scale);
    snprintf(b, sizeof(b), fmt, sp->min * scale);
    snprintf(c, sizeof(c), fmt, sp->max * scale);
    return own_printf(r, "%s [%s, %s]", a, b, c);
}

static void repeat_row(report *r, const lmc_replay_summary *s, const char *label,
                       const char *const *path, size_t depth, double scale, const char *fmt)
{
    lmc_spread sp;
    if (lmc_replay_repeat_spread(s->repeat, path, depth, &sp))
        add(r, metric_str(label, label, spread_text(r, &sp, scale, fmt)));
}

static void repeat_section(report *r, const lmc_replay_summary *s)
{
    const lmc_replay_repeat *rep = s->repeat;
    size_t runs = lmc_replay_repeat_runs(rep);
    section_begin(r);
#define FIG(name) (const char *const[]){"outcomes", "figures", name}, 3
    if (engine_mode(s))
        repeat_row(r, s, "Engine hit rate (%)", FIG("engine_hit_rate"), 100.0, "%.1f");
    repeat_row(r, s, "Chunk hit rate (%)", FIG("chunk_hit_rate"), 100.0, "%.1f");
    repeat_row(r, s, "L1 hit rate (%)", FIG("l1_hit_rate"), 100.0, "%.1f");
    repeat_row(r, s, "L2 hit rate (%)", FIG("l2_hit_rate"), 100.0, "%.1f");
    if (engine_mode(s)) {
        repeat_row(r, s, "Keys stored", FIG("engine_stored_keys"), 1.0, "%.0f");
        repeat_row(r, s, "Stores refused (keys)", FIG("engine_refused_keys"), 1.0, "%.0f");
    } else {
        repeat_row(r, s, "Recorded hits still hit (%)", FIG("read_agreement"), 100.0, "%.1f");
        repeat_row(r, s, "Reservations refused (keys)", FIG("refused_keys"), 1.0, "%.0f");
        repeat_row(r, s, "Failed reads", FIG("failed_reads"), 1.0, "%.0f");
    }
#undef FIG
    repeat_row(r, s, "L1 evictions (keys)", (const char *const[]){"outcomes", "l1", "evicted_keys"},
               3, 1.0, "%.0f");
    repeat_row(r, s, "L2 stored (MiB)", (const char *const[]){"outcomes", "l2", "stored_bytes"}, 3,
               1.0 / MIB, "%.1f");
    repeat_row(r, s, "L2 loaded (MiB)", (const char *const[]){"outcomes", "l2", "loaded_bytes"}, 3,
               1.0 / MIB, "%.1f");
    for (size_t i = 0; i < s->n_ops; i++) {
        char short_name[256];
        lmc_replay_short_name(s->ops[i].qualname, short_name, sizeof(short_name));
        static const char *const what[2] = {"p50_ms", "p99_ms"};
        for (size_t j = 0; j < 2; j++) {
            const char *path[] = {"ops", s->ops[i].qualname, what[j]};
            repeat_row(r, s, own_printf(r, "%s %.3s (ms)", short_name, what[j]), path, 3, 1.0,
                       "%.3f");
        }
    }
    repeat_row(r, s, "Lateness p99 (us)", (const char *const[]){"lateness", "p99_us"}, 2, 1.0,
               "%.1f");
    repeat_row(r, s, "Replay duration (s)", (const char *const[]){"duration_s"}, 1, 1.0, "%.2f");
    for (size_t i = 0; i < runs; i++)
        add(r, metric_str("digest", own_printf(r, "Run %zu outcome digest", i + 1),
                          own_printf(r, "%.16s", lmc_replay_repeat_digest(rep, i))));
    add(r, metric_str("digests_equal", "Outcome digests",
                      lmc_replay_repeat_digests_equal(rep) ? "all equal" : "differ"));
    section_end(r, "repeat", own_printf(r, "Repeat: median [min, max] of %zu runs", runs));
}

static bool report_build(const lmc_replay_summary *s, report *r)
{
    memset(r, 0, sizeof(*r));
    r->cap_entries = 64 + 8 * s->n_ops + s->n_config_diffs + LMC_OC_COUNT_;
    r->entries = calloc(r->cap_entries, sizeof(*r->entries));
    if (r->entries == NULL)
        return false;
    overall_section(r, s);
    if (s->totals != NULL)
        outcome_sections(r, s);
    ops_section(r, s);
    pacing_section(r, s);
    if (s->repeat != NULL)
        repeat_section(r, s);
    return !r->oom;
}

/* Notes wrap at this column, continuation lines indented under the text. */
#define NOTE_WIDTH 78
#define NOTE_INDENT "      "

void lmc_replay_note_append(lmc_strbuf *b, const char *text)
{
    lmc_strbuf_wrap(b, "note: ", NOTE_INDENT, NOTE_WIDTH, text);
}

/* A note from a format (see lmc_replay_note_append). */
static void note(lmc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(lmc_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = format_or_oom(&b->oom, fmt, ap);
    va_end(ap);
    if (text == NULL)
        return;
    lmc_replay_note_append(b, text);
    free(text);
}

/*
 * Stores refused for lack of room: L1 makes room only in its eviction loop
 * (once a second, and only at the watermark; spec/storage-manager.md), so
 * a workload that fills L1 between two passes is refused whatever its
 * size. A reader sizing L1 from the refusals must know that.
 */
static void l1_full_note(lmc_strbuf *b, const lmc_replay_summary *s)
{
    const lmc_replay_totals *t = s->totals;
    if (t == NULL)
        return;
    /* The figure of the refusal rows above: the engine's stores, or the recorded reserve_writes. */
    uint64_t refused = engine_mode(s) ? t->v[LMC_OC_SUBMIT_PREFETCH_store_out_of_memory]
                                      : t->v[LMC_OC_RESERVE_WRITE_out_of_memory];
    if (refused == 0)
        return;
    char evicted[64];
    if (t->sm.l1_evicted_keys == 0)
        snprintf(evicted, sizeof(evicted), "it evicted nothing in this replay");
    else
        snprintf(evicted, sizeof(evicted), "it evicted %" PRIu64 " key(s) in this replay",
                 t->sm.l1_evicted_keys);
    note(b,
         "%" PRIu64 " key(s) were refused for lack of room in L1 (peak usage %.1f of %.1f "
         "MiB). L1 makes room only in its eviction loop, which looks once a second (scaled by "
         "--time-scale) and evicts only when usage has reached --eviction-trigger-watermark; "
         "%s. So the refusals also depend on how fast the workload fills L1 between two "
         "passes, not only on its size: try a larger --l1-size-gb, a lower watermark or a "
         "larger --eviction-ratio.",
         refused, (double)t->l1_peak_used_bytes / MIB, (double)t->l1_capacity_bytes / MIB, evicted);
}

/* The lines after the table: what a reader must not miss, in plain words. */
static void notes(lmc_strbuf *b, const lmc_replay_summary *s)
{
    if (s->interrupted)
        note(b,
             "interrupted (Ctrl-C) after %" PRIu64 " records; every figure above covers "
             "those records only.",
             s->reported);
    if (s->totals != NULL && s->figures.recorded_reads > 0 && s->figures.read_agreement < 1.0) {
        char missed[256];
        lmc_replay_missed_summary(s, missed, sizeof(missed));
        note(b,
             "%.1f%% of the reads the trace recorded (each was a hit when recorded) did not "
             "fully hit here: %s. The replay's StorageManager did not hold what the "
             "recording's did; --jsonl-out shows each record.",
             (1.0 - s->figures.read_agreement) * 100.0, missed);
    }
    char why[128];
    if (lmc_replay_behind_schedule(s, why, sizeof(why)))
        note(b,
             "the replay fell behind its schedule (%s). Lateness is how late each call "
             "started against its recorded time (scaled by --time-scale); behind schedule, "
             "calls bunch up and the background work the recording raced (L2 loads, "
             "eviction) gets relatively more time, so outcomes can differ from the "
             "recording.",
             why);
    if (s->n_config_diffs > 0)
        note(b, "the replay's StorageManager config differs from the recorded one (the 'Config "
                "differs' rows above); `lmcache trace info --config FILE` prints the recorded "
                "config.");
    if (s->unfinished_prefetches > 0)
        note(b,
             "%" PRIu64 " prefetch(es) had not finished their L2 part when the replay ended; "
             "their L2 keys count as missed.",
             s->unfinished_prefetches);
    l1_full_note(b, s);
}

size_t lmc_replay_missed_summary(const lmc_replay_summary *s, char *buf, size_t len)
{
    const lmc_replay_figures *f = &s->figures;
    const lmc_replay_totals *t = s->totals;
    if (t == NULL)
        return (size_t)snprintf(buf, len, "no outcomes");
    return (size_t)snprintf(buf, len,
                            "%" PRIu64 " reads missed %" PRIu64 " keys: %" PRIu64
                            " not in L1, %" PRIu64 " still loading from L2, %" PRIu64
                            " write-locked, %" PRIu64 " not read-locked, %" PRIu64 " other",
                            f->failed_reads, f->read_keys_missed, t->v[LMC_OC_READ_ENTER_not_in_l1],
                            t->v[LMC_OC_READ_ENTER_l2_pending],
                            t->v[LMC_OC_READ_ENTER_write_locked],
                            t->v[LMC_OC_READ_ENTER_not_read_locked], t->v[LMC_OC_READ_ENTER_other]);
}

bool lmc_replay_report_sections(const lmc_replay_summary *s, lmc_replay_section_fn fn, void *ud)
{
    report r;
    bool ok = report_build(s, &r);
    for (size_t i = 0; ok && i < r.n_sections; i++)
        fn(&r.sections[i], ud);
    report_free(&r);
    return ok;
}

char *lmc_replay_report_notes(const lmc_replay_summary *s)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    notes(&b, s);
    return lmc_strbuf_finish(&b);
}

char *lmc_replay_report_table(const lmc_replay_summary *s)
{
    report r;
    char *out = NULL;
    if (report_build(s, &r))
        out = lmc_metrics_format_terminal(REPORT_TITLE, r.sections, r.n_sections, REPORT_WIDTH);
    report_free(&r);
    if (out == NULL)
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, out);
    free(out);
    notes(&b, s);
    return lmc_strbuf_finish(&b);
}

char *lmc_replay_report_json(const lmc_replay_summary *s)
{
    return lmc_replay_result_json_text(s);
}

/* The result on stdout or in --output, by --format (replay/output.h). */
const lmc_replay_output_format lmc_replay_output_table = {
    .name = "table",
    .render = lmc_replay_report_table,
};

const lmc_replay_output_format lmc_replay_output_json = {
    .name = "json",
    .render = lmc_replay_report_json,
};
