/*
 * output_html.c -- the replay's HTML report: the "html" replay output
 * (--html PATH), built with report/html.h.
 *
 * One self-contained file: a header naming the trace (path, digest,
 * records, span) and the configuration (command line, config digest,
 * mode, pace, time scale, L1 capacity, outcome digest); the latency CDF of
 * every operation (log axis); lateness, hit rates and L1 usage over the
 * trace's recorded time, from the series the CLI collected
 * (replay/series.h; the charts say so when there is none); and the result
 * table's sections and notes (replay/report.h), the same rows `trace
 * replay` prints.
 *
 * Owns nothing. Threads: none.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/output.h"
#include "replay/series.h"
#include "report/html.h"

/* The series' x (bucket starts, then the end of the last bucket) and n + 1 y slots. */
typedef struct over_time {
    const lmc_replay_series_result *res;
    double *x;
    size_t n; /* points: buckets + 1 */
} over_time;

static bool over_time_init(over_time *o, const lmc_replay_series_result *res)
{
    o->res = res;
    o->n = res->n_buckets > 0 ? res->n_buckets + 1 : 0;
    o->x = malloc((o->n + 1) * sizeof(*o->x));
    if (o->x == NULL)
        return false;
    for (size_t i = 0; i < o->n; i++)
        o->x[i] = (double)i * res->bucket_s;
    return true;
}

/*
 * y[i] = num(bucket i) / den(bucket i), NaN (not drawn) where den is 0; the
 * last point repeats the last bucket's value, so that its step is drawn.
 */
typedef double (*bucket_fn)(const lmc_replay_series_bucket *b);

static double *ratio_series(const over_time *o, bucket_fn num, bucket_fn den)
{
    double *y = malloc((o->n + 1) * sizeof(*y));
    if (y == NULL)
        return NULL;
    for (size_t i = 0; i + 1 < o->n; i++) {
        double d = den(&o->res->buckets[i]);
        y[i] = d > 0 ? num(&o->res->buckets[i]) / d : NAN;
    }
    if (o->n > 0)
        y[o->n - 1] = o->n > 1 ? y[o->n - 2] : NAN;
    return y;
}

static double one(const lmc_replay_series_bucket *b)
{
    (void)b;
    return 1;
}
static double looked_up(const lmc_replay_series_bucket *b)
{
    return (double)b->looked_up_keys;
}
static double found(const lmc_replay_series_bucket *b)
{
    return (double)(b->l1_hit_keys + b->l2_hit_keys);
}
static double l1_hits(const lmc_replay_series_bucket *b)
{
    return (double)b->l1_hit_keys;
}
static double l2_hits(const lmc_replay_series_bucket *b)
{
    return (double)b->l2_hit_keys;
}
static double engine_hits(const lmc_replay_series_bucket *b)
{
    return (double)b->engine_hit_keys;
}
static double recorded_reads(const lmc_replay_series_bucket *b)
{
    return (double)b->recorded_read_keys;
}
static double timed(const lmc_replay_series_bucket *b)
{
    return (double)b->timed;
}
static double lateness_sum(const lmc_replay_series_bucket *b)
{
    return b->lateness_sum_s;
}
static double lateness_max(const lmc_replay_series_bucket *b)
{
    return b->timed > 0 ? b->lateness_max_s : NAN;
}
static double l1_capacity(const lmc_replay_series_bucket *b)
{
    return b->l1_samples > 0 ? (double)b->l1_capacity_bytes : 0;
}
static double l1_peak(const lmc_replay_series_bucket *b)
{
    return (double)b->l1_used_max_bytes;
}
static double l1_mean(const lmc_replay_series_bucket *b)
{
    return b->l1_samples > 0 ? b->l1_used_sum_bytes / (double)b->l1_samples : 0;
}

/* One series of a chart: the values of fn over den, per bucket. */
typedef struct series_def {
    const char *name;
    bucket_fn num, den;
    bool dashed;
} series_def;

static void time_chart(lmc_report *r, const over_time *o, const lmc_report_chart *proto,
                       const series_def *defs, size_t n_defs)
{
    lmc_report_series s[8];
    double *ys[8] = {0};
    size_t n = 0;
    for (size_t i = 0; i < n_defs && i < 8; i++) {
        if ((ys[i] = ratio_series(o, defs[i].num, defs[i].den)) == NULL)
            continue;
        s[n++] = (lmc_report_series){.name = defs[i].name,
                                     .x = o->x,
                                     .y = ys[i],
                                     .n = o->n,
                                     .style = LMC_REPORT_STEP,
                                     .dashed = defs[i].dashed};
    }
    lmc_report_chart c = *proto;
    c.series = s;
    c.n_series = n;
    lmc_report_line_chart(r, &c);
    for (size_t i = 0; i < n_defs && i < 8; i++)
        free(ys[i]);
}

#define X_TIME_LABEL "recorded time since the trace started (t_mono)"

static void latency_cdfs(lmc_report *r, const lmc_replay_summary *s)
{
    lmc_report_cdf_series *cs = calloc(s->n_ops + 1, sizeof(*cs));
    double **vals = calloc(s->n_ops + 1, sizeof(*vals));
    char(*names)[96] = calloc(s->n_ops + 1, sizeof(*names));
    size_t n = 0;
    if (cs == NULL || vals == NULL || names == NULL)
        goto out;
    for (size_t i = 0; s->stats != NULL && i < s->n_ops; i++) {
        size_t k = 0;
        double *v = lmc_replay_stats_samples_ms(s->stats, s->ops[i].qualname, &k);
        if (v == NULL)
            continue;
        for (size_t j = 0; j < k; j++)
            v[j] /= 1000.0; /* the axis is in seconds, written in us and ms */
        char shortname[64];
        lmc_replay_short_name(s->ops[i].qualname, shortname, sizeof(shortname));
        snprintf(names[n], sizeof(names[n]), "%s (%" PRIu64 " calls)", shortname, s->ops[i].count);
        vals[n] = v;
        cs[n] = (lmc_report_cdf_series){.name = names[n], .values = v, .n = k};
        n++;
    }
    lmc_report_axis x = {.label = "latency per call (log scale)",
                         .scale = LMC_REPORT_LOG10,
                         .format = LMC_REPORT_FMT_SECONDS};
    lmc_report_cdf(r, "Latency per operation (CDF)", "latency-cdf",
                   "One line per operation: the share of its calls that took at most the "
                   "latency on the x axis (the handler's run time on this host; failed calls "
                   "have none). Count, mean, p50 and p99 are in the Per-Op Latency table below.",
                   &x, cs, n);
out:
    for (size_t i = 0; i < n; i++)
        free(vals[i]);
    free(cs);
    free(vals);
    free(names);
}

static void lateness(lmc_report *r, const lmc_replay_summary *s, const over_time *o)
{
    if (s->virtual_pace) {
        lmc_report_text(r, "Virtual time (--pace virtual): every record was dispatched at its "
                           "recorded time exactly, so there is no lateness to show.");
        return;
    }
    char caption[256];
    snprintf(caption, sizeof(caption),
             "How late each record's call started against its schedule (recorded time x time "
             "scale %g), per bucket of %.4g s of recorded time: the mean and the largest.",
             s->time_scale, o->res->bucket_s);
    lmc_report_chart c = {
        .title = "Lateness over time",
        .id = "lateness",
        .caption = caption,
        .x = {.label = X_TIME_LABEL, .format = LMC_REPORT_FMT_SECONDS},
        .y = {.label = "lateness", .format = LMC_REPORT_FMT_SECONDS, .include_zero = true},
    };
    series_def defs[] = {{"mean lateness", lateness_sum, timed, false},
                         {"max lateness", lateness_max, one, true}};
    time_chart(r, o, &c, defs, 2);
}

static void hit_rates(lmc_report *r, const lmc_replay_summary *s, const over_time *o)
{
    bool engine = s->mode != NULL && strcmp(s->mode, "engine") == 0;
    char caption[400];
    snprintf(caption, sizeof(caption),
             "Keys found of the keys looked up (submit_prefetch_task), per bucket of %.4g s of "
             "recorded time: in L1 at submit, loaded from L2, both (chunk hit rate)%s; the "
             "recorded hit rate is the keys the trace's own reads read over them (a read can "
             "fall in a later bucket than its lookup).",
             o->res->bucket_s,
             engine ? ", and the engine hit rate (the whole-chunk found prefix a request reads)"
                    : "");
    lmc_report_chart c = {
        .title = "Hit rate over time",
        .id = "hit-rate",
        .caption = caption,
        .x = {.label = X_TIME_LABEL, .format = LMC_REPORT_FMT_SECONDS},
        .y = {.label = "share of looked-up keys",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
    };
    series_def defs[5];
    size_t n = 0;
    defs[n++] = (series_def){"chunk hit rate (L1 + L2)", found, looked_up, false};
    defs[n++] = (series_def){"L1 hit rate", l1_hits, looked_up, false};
    defs[n++] = (series_def){"L2 hit rate", l2_hits, looked_up, false};
    defs[n++] = (series_def){"recorded hit rate", recorded_reads, looked_up, true};
    /* Last, so that it is drawn on top: without L2 it equals the L1 line at every hit. */
    if (engine)
        defs[n++] = (series_def){"engine hit rate", engine_hits, looked_up, false};
    time_chart(r, o, &c, defs, n);
}

static void l1_usage(lmc_report *r, const lmc_replay_summary *s, const over_time *o)
{
    char cap[48], caption[320];
    lmc_report_format_value(s->totals != NULL ? (double)s->totals->l1_capacity_bytes : 0,
                            LMC_REPORT_FMT_BYTES, cap, sizeof(cap));
    snprintf(caption, sizeof(caption),
             "L1 bytes used over its capacity (%s), sampled after every record, per bucket of "
             "%.4g s of recorded time: the largest sample and the mean. The table's L1 peak "
             "usage is the largest of all.",
             cap, o->res->bucket_s);
    lmc_report_chart c = {
        .title = "L1 usage over time",
        .id = "l1-usage",
        .caption = caption,
        .x = {.label = X_TIME_LABEL, .format = LMC_REPORT_FMT_SECONDS},
        .y = {.label = "L1 used / capacity",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
    };
    series_def defs[] = {{"peak in bucket", l1_peak, l1_capacity, false},
                         {"mean in bucket", l1_mean, l1_capacity, true}};
    time_chart(r, o, &c, defs, 2);
}

/* One section of the result table as a key/value table. */
static void table_section(const lmc_metric_section *sec, void *ud)
{
    lmc_report *r = ud;
    lmc_report_kv *rows = calloc(sec->n_entries + 1, sizeof(*rows));
    char(*vals)[64] = calloc(sec->n_entries + 1, sizeof(*vals));
    if (rows != NULL && vals != NULL) {
        for (size_t i = 0; i < sec->n_entries; i++)
            rows[i] = (lmc_report_kv){
                sec->entries[i].label,
                lmc_metric_format_value(&sec->entries[i], vals[i], sizeof(vals[i]))};
        char id[80];
        snprintf(id, sizeof(id), "result-%s", sec->key != NULL ? sec->key : "top");
        lmc_report_kv_table(r, sec->label != NULL ? sec->label : "Result", id, rows,
                            sec->n_entries);
    }
    free(rows);
    free(vals);
}

/* The table's notes, one paragraph each (their wrapping is the terminal's). */
static void notes(lmc_report *r, const lmc_replay_summary *s)
{
    char *text = lmc_replay_report_notes(s);
    if (text == NULL)
        return;
    const char *mark = "note: ";
    for (char *p = strstr(text, mark); p != NULL;) {
        char *next = strstr(p + strlen(mark), "\nnote: ");
        if (next != NULL)
            *next = '\0';
        lmc_report_text(r, p);
        p = next != NULL ? next + 1 : NULL;
    }
    free(text);
}

static void header_rows(const lmc_replay_summary *s, lmc_report_kv *rows, size_t *n,
                        char (*buf)[320])
{
    size_t k = 0, b = 0;
    rows[k++] = (lmc_report_kv){"trace", s->trace_path != NULL ? s->trace_path : "?"};
    if (s->trace_digest != NULL && s->trace_digest[0] != '\0')
        rows[k++] = (lmc_report_kv){"digest", s->trace_digest};
    snprintf(buf[b], 320,
             "%" PRIu64 " (replayed %" PRIu64 ", not reissued %" PRIu64 ", skipped %" PRIu64
             ", failed %" PRIu64 "); level %s, trace schema %" PRId64 "%s",
             s->reported, s->replayed, s->figures.not_reissued_records, s->skipped, s->failed,
             s->level != NULL ? s->level : "?", s->schema_version,
             s->interrupted ? "; interrupted (Ctrl-C): the figures cover these only" : "");
    rows[k++] = (lmc_report_kv){"records", buf[b++]};
    snprintf(buf[b], 320, "%.3f s of recorded time; the replay took %.3f s", s->trace_span_s,
             s->duration_s);
    rows[k++] = (lmc_report_kv){"span", buf[b++]};
    snprintf(buf[b], 320, "mode %s, pace %s, time scale %g", s->mode != NULL ? s->mode : "?",
             s->pace != NULL ? s->pace : "?", s->time_scale);
    rows[k++] = (lmc_report_kv){"replay", buf[b++]};
    const char *hd = s->header_digest != NULL ? s->header_digest : "";
    const char *rd = s->replay_digest != NULL ? s->replay_digest : "";
    if (hd[0] == '\0')
        snprintf(buf[b], 320, "%s (the trace records none)", rd);
    else if (strcmp(hd, rd) == 0)
        snprintf(buf[b], 320, "%s (the recording's)", rd);
    else
        snprintf(buf[b], 320, "%s (the recording's: %s)", rd, hd);
    rows[k++] = (lmc_report_kv){"config digest", buf[b++]};
    if (s->totals != NULL) {
        char cap[48];
        lmc_report_format_value((double)s->totals->l1_capacity_bytes, LMC_REPORT_FMT_BYTES, cap,
                                sizeof(cap));
        snprintf(buf[b], 320, "%s", cap);
        rows[k++] = (lmc_report_kv){"L1 capacity", buf[b++]};
    }
    if (s->command != NULL)
        rows[k++] = (lmc_report_kv){"command", s->command};
    if (s->outcome_digest != NULL && s->outcome_digest[0] != '\0')
        rows[k++] = (lmc_report_kv){"outcome digest", s->outcome_digest};
    *n = k;
}

static char *format_html(const lmc_replay_summary *s)
{
    lmc_report_kv rows[12];
    char buf[6][320];
    size_t n_rows;
    header_rows(s, rows, &n_rows, buf);
    lmc_report_header h = {.title = "Trace replay",
                           .subtitle = "What every call did against this configuration, and "
                                       "how fast, over the trace's time",
                           .rows = rows,
                           .n_rows = n_rows};
    lmc_replay_series_result res = {0};
    over_time o = {0};
    lmc_report *r = lmc_report_begin(&h);
    if (r == NULL)
        return NULL;
    bool have_series = s->series != NULL && lmc_replay_series_get(s->series, &res) == LMC_OK;
    bool ok = over_time_init(&o, &res);
    lmc_report_section(r, "Latency", NULL);
    latency_cdfs(r, s);
    lmc_report_section(r, "Over time",
                       have_series ? NULL : "No figures over time were collected for this replay.");
    if (ok) {
        lateness(r, s, &o);
        hit_rates(r, s, &o);
        l1_usage(r, s, &o);
    }
    lmc_report_section(r, "Result", "The table `lmcache trace replay` prints, section by section.");
    if (!lmc_replay_report_sections(s, table_section, r) || !ok) {
        free(lmc_report_end(r));
        r = NULL;
    } else {
        notes(r, s);
    }
    free(o.x);
    lmc_replay_series_result_free(&res);
    return r != NULL ? lmc_report_end(r) : NULL;
}

/* --html PATH (replay/output.h): written whole at the end, checked before the replay. */
const lmc_replay_output_format lmc_replay_output_html = {
    .name = "html",
    .log_name = "HTML report",
    .render = format_html,
};
