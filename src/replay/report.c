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

/* The table text of a value (Python's _format_value) into buf. */
static const char *format_value(const lmc_metric *m, char *buf, size_t len)
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
            const char *value = format_value(m, vbuf, sizeof(vbuf));
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
    char *text = NULL;
    size_t len = 0;
    if (ok)
        text = lmc_json_dumps(root, 0, indent, &len);
    lmc_json_free(root);
    if (text == NULL)
        return NULL;
    char *out = realloc(text, len + 2);
    if (out == NULL) {
        free(text);
        return NULL;
    }
    out[len] = '\n';
    out[len + 1] = '\0';
    return out;
}

/* ---- the replay report ------------------------------------------------- */

/* The sections of one report, with the strings they point into. */
typedef struct report {
    lmc_metric overall[7];
    lmc_metric *ops;
    lmc_metric pacing[4];
    lmc_metric_section sections[3];
    size_t n_sections;
    char digest[96];
    char **owned; /* the ops' keys and labels */
    size_t n_owned;
} report;

static void report_free(report *r)
{
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->ops);
}

static char *own_printf(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *own_printf(report *r, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    r->owned[r->n_owned++] = s;
    return s;
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

static bool report_build(const lmc_replay_summary *s, report *r)
{
    memset(r, 0, sizeof(*r));
    size_t n = 0;
    r->overall[n++] = metric_str("level", "Trace level", s->level);
    r->overall[n++] = metric_int("replayed", "Records replayed", s->replayed);
    r->overall[n++] = metric_int("skipped", "Records skipped", s->skipped);
    r->overall[n++] = metric_int("failed", "Records failed", s->failed);
    /* Not records at all (LMCache's reader skips them before its replay sees them). */
    if (s->malformed > 0)
        r->overall[n++] = metric_int("malformed", "Records malformed", s->malformed);
    r->overall[n++] = metric_float("duration", "Replay duration (s)", lmc_round3(s->duration_s));
    const char *hd = s->header_digest ? s->header_digest : "";
    const char *rd = s->replay_digest ? s->replay_digest : "";
    if (hd[0] != '\0') {
        if (rd[0] != '\0' && strcmp(hd, rd) != 0)
            snprintf(r->digest, sizeof(r->digest), "MISMATCH (rec=%.8s, run=%.8s)", hd, rd);
        else
            snprintf(r->digest, sizeof(r->digest), "match (%.8s)", hd);
        r->overall[n++] = metric_str("digest", "Config digest", r->digest);
    }
    r->sections[r->n_sections++] = (lmc_metric_section){"overall", "Overall", r->overall, n};

    if (s->n_ops > 0) {
        r->ops = calloc(4 * s->n_ops, sizeof(*r->ops));
        r->owned = calloc(8 * s->n_ops, sizeof(*r->owned));
        if (r->ops == NULL || r->owned == NULL)
            return false;
        for (size_t i = 0; i < s->n_ops; i++) {
            const lmc_op_stats *o = &s->ops[i];
            char short_name[256];
            lmc_replay_short_name(o->qualname, short_name, sizeof(short_name));
            const char *k[4], *l[4];
            static const char *const what[4] = {"count", "mean", "p50", "p99"};
            for (size_t j = 0; j < 4; j++) {
                k[j] = own_printf(r, "%s_%s", short_name, what[j]);
                l[j] = own_printf(r, "%s %s", short_name, what[j]);
                if (k[j] == NULL || l[j] == NULL)
                    return false;
            }
            lmc_metric *m = &r->ops[4 * i];
            m[0] = metric_int(k[0], l[0], o->count);
            m[1] = metric_float(k[1], l[1], lmc_round3(o->mean_ms));
            m[2] = metric_float(k[2], l[2], lmc_round3(o->p50_ms));
            m[3] = metric_float(k[3], l[3], lmc_round3(o->p99_ms));
        }
        r->sections[r->n_sections++] =
            (lmc_metric_section){"ops", "Per-Op Latency (ms)", r->ops, 4 * s->n_ops};
    }

    r->pacing[0] = metric_float("time_scale", "Time scale", s->time_scale);
    r->pacing[1] = metric_float("lateness_p50_us", "Lateness p50 (us)", s->lateness.p50_us);
    r->pacing[2] = metric_float("lateness_p99_us", "Lateness p99 (us)", s->lateness.p99_us);
    r->pacing[3] = metric_float("lateness_max_us", "Lateness max (us)", s->lateness.max_us);
    r->sections[r->n_sections++] = (lmc_metric_section){"pacing", "Pacing", r->pacing, 4};
    return true;
}

char *lmc_replay_report_table(const lmc_replay_summary *s)
{
    report r;
    char *out = NULL;
    if (report_build(s, &r))
        out = lmc_metrics_format_terminal(REPORT_TITLE, r.sections, r.n_sections, REPORT_WIDTH);
    report_free(&r);
    return out;
}

char *lmc_replay_report_json(const lmc_replay_summary *s)
{
    report r;
    char *out = NULL;
    if (report_build(s, &r))
        out = lmc_metrics_format_json(REPORT_TITLE, r.sections, r.n_sections, 2);
    report_free(&r);
    return out;
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
