/*
 * sweep_report.c -- the HTML report of a sweep (sweep_output.h), built
 * with report/html.h: a header naming the trace and the command, hit rate
 * against L1 size with one line per combination of the other varying
 * flags and the analysis's LRU curve beside them for reference, the
 * table of every configuration (the terminal table's cells), and the
 * failures with their stderr.
 *
 * Owns nothing. Threads: none.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/output.h"
#include "core/json_diff.h"
#include "core/strbuf.h"
#include "replay/sweep_output.h"
#include "report/html.h"

#define L1_FLAG "--l1-size-gb"
#define MAX_SERIES 64

typedef struct series_acc {
    char *name;
    double *x, *y;
    size_t n;
} series_acc;

static int cmp_xy(const void *a, const void *b)
{
    const double *p = a, *q = b;
    return (p[0] > q[0]) - (p[0] < q[0]);
}

/* The series' points sorted by x (x and y kept in step). */
static void sort_points(series_acc *s)
{
    double *xy = malloc(2 * s->n * sizeof(*xy) + 1);
    if (xy == NULL)
        return;
    for (size_t i = 0; i < s->n; i++) {
        xy[2 * i] = s->x[i];
        xy[2 * i + 1] = s->y[i];
    }
    qsort(xy, s->n, 2 * sizeof(*xy), cmp_xy);
    for (size_t i = 0; i < s->n; i++) {
        s->x[i] = xy[2 * i];
        s->y[i] = xy[2 * i + 1];
    }
    free(xy);
}

static void hit_chart(lmc_report *r, const lmc_sweep *s, const lmc_analyze_result *lru)
{
    series_acc acc[MAX_SERIES];
    size_t n_acc = 0;
    double xmin = INFINITY, xmax = 0;
    memset(acc, 0, sizeof(acc));
    for (size_t i = 0; i < s->n; i++) {
        const lmc_sweep_job *j = &s->jobs[i];
        if (j->state != LMC_SWEEP_JOB_DONE)
            continue;
        double x = lmc_json_get_number(lmc_json_at_path(
            j->result, "config.json.l1_manager_config.memory_config.size_in_bytes"));
        lmc_sweep_figures f;
        lmc_sweep_figures_of(j->result, &f);
        char *name = lmc_sweep_grid_label(s->grid, i, L1_FLAG, "replay");
        if (name == NULL)
            continue;
        size_t k = 0;
        while (k < n_acc && strcmp(acc[k].name, name) != 0)
            k++;
        if (k == n_acc) {
            if (n_acc == MAX_SERIES) {
                free(name);
                continue; /* the table still lists it */
            }
            acc[n_acc].name = name;
            acc[n_acc].x = calloc(s->n, sizeof(double));
            acc[n_acc].y = calloc(s->n, sizeof(double));
            n_acc++;
        } else {
            free(name);
        }
        if (acc[k].x == NULL || acc[k].y == NULL)
            continue;
        acc[k].x[acc[k].n] = x;
        acc[k].y[acc[k].n++] = f.hit_rate;
        xmin = x < xmin ? x : xmin;
        xmax = x > xmax ? x : xmax;
    }
    lmc_report_series series[MAX_SERIES + 1];
    size_t ns = 0;
    for (size_t k = 0; k < n_acc; k++) {
        sort_points(&acc[k]);
        series[ns++] =
            (lmc_report_series){.name = acc[k].name, .x = acc[k].x, .y = acc[k].y, .n = acc[k].n};
    }
    /* The curve over the swept range (a factor of 4 beyond it each way), and at the sizes. */
    double *cx = NULL, *cy = NULL;
    size_t nc = 0;
    if (lru != NULL && lru->mrc.n_points > 0 && n_acc > 0) {
        cx = calloc(lru->mrc.n_points, sizeof(*cx));
        cy = calloc(lru->mrc.n_points, sizeof(*cy));
        for (size_t i = 0; cx != NULL && cy != NULL && i < lru->mrc.n_points; i++) {
            const lmc_mrc_point *p = &lru->mrc.points[i];
            double c = (double)p->capacity;
            if (p->requested || (c >= xmin / 4 && c <= xmax * 4)) {
                cx[nc] = c;
                cy[nc++] = p->hit_rate;
            }
        }
        if (nc > 0)
            series[ns++] = (lmc_report_series){.name = "LRU curve (trace analyze, exact)",
                                               .x = cx,
                                               .y = cy,
                                               .n = nc,
                                               .dashed = true};
    }
    bool engine = strcmp(s->mode, "engine") == 0;
    char caption[700];
    snprintf(caption, sizeof(caption),
             "Each point is one configuration's replay (mode %s, pace %s): %s. The dashed line "
             "is the exact LRU miss-ratio curve of the keys looked up (trace analyze), the "
             "bound an LRU L1 of each size gives; a replay's L1 evicts in passes, refuses "
             "stores while full and counts the found prefix, so an LRU replay lies near it "
             "(within 0.03 on Mooncake recordings), and other policies above or below it.",
             s->mode, s->pace,
             engine ? "engine_hit_rate, the found prefixes the requests read over the keys "
                      "looked up"
                    : "chunk_hit_rate, the keys found over the keys looked up");
    lmc_report_chart c = {
        .title = "Hit rate against L1 size",
        .id = "sweep-hit-rate",
        .caption = caption,
        .x = {.label = "L1 size (--l1-size-gb; log scale, 1 GiB = 2^30 bytes)",
              .scale = LMC_REPORT_LOG2,
              .format = LMC_REPORT_FMT_BYTES},
        .y = {.label = engine ? "hit rate (engine_hit_rate)" : "hit rate (chunk_hit_rate)",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
        .series = series,
        .n_series = ns,
    };
    lmc_report_line_chart(r, &c);
    for (size_t k = 0; k < n_acc; k++) {
        free(acc[k].name);
        free(acc[k].x);
        free(acc[k].y);
    }
    free(cx);
    free(cy);
}

static void configs_table(lmc_report *r, const lmc_sweep *s)
{
    lmc_sweep_table t;
    if (lmc_sweep_table_build(s, false, &t) != LMC_OK)
        return;
    lmc_report_table_data d = {.title = "Configurations, by hit rate",
                               .id = "sweep-table",
                               .caption = "L1, L2: keys found in L1 at the lookup, loaded from "
                                          "L2; refused: stores refused (no room, being "
                                          "written); p50: median latency of the op in the "
                                          "replay; wall: the configuration's replay process.",
                               .columns = (const char *const *)t.columns,
                               .n_columns = t.n_cols,
                               .cells = (const char *const *)t.cells,
                               .n_rows = t.n_rows,
                               .numeric = t.numeric};
    lmc_report_table(r, &d);
    lmc_sweep_table_free(&t);
}

static void failures(lmc_report *r, const lmc_sweep *s)
{
    size_t nf = 0;
    for (size_t i = 0; i < s->n; i++)
        nf += s->jobs[i].state == LMC_SWEEP_JOB_FAILED;
    if (nf == 0)
        return;
    static const char *const cols[] = {"configuration", "why", "stderr (last lines)"};
    const char **cells = calloc(3 * nf + 1, sizeof(*cells));
    char **labels = calloc(nf + 1, sizeof(*labels));
    if (cells == NULL || labels == NULL)
        goto out;
    size_t row = 0;
    for (size_t i = 0; i < s->n; i++) {
        const lmc_sweep_job *j = &s->jobs[i];
        if (j->state != LMC_SWEEP_JOB_FAILED)
            continue;
        labels[row] = lmc_sweep_grid_label(s->grid, i, NULL, LMC_SWEEP_ONLY_CONFIG);
        cells[3 * row] = labels[row];
        cells[3 * row + 1] = j->error;
        cells[3 * row + 2] = j->stderr_tail;
        row++;
    }
    lmc_report_section(r, "Failed configurations", NULL);
    lmc_report_table_data d = {.title = NULL,
                               .id = "sweep-failed",
                               .columns = cols,
                               .n_columns = 3,
                               .cells = cells,
                               .n_rows = row};
    lmc_report_table(r, &d);
out:
    for (size_t k = 0; labels != NULL && k < nf; k++)
        free(labels[k]);
    free(labels);
    free(cells);
}

char *lmc_sweep_format_html(const lmc_sweep *s, const lmc_analyze_result *lru)
{
    const lmc_json *first = NULL;
    size_t ok = 0, failed = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->jobs[i].state == LMC_SWEEP_JOB_DONE && first == NULL)
            first = s->jobs[i].result;
        ok += s->jobs[i].state == LMC_SWEEP_JOB_DONE;
        failed += s->jobs[i].state == LMC_SWEEP_JOB_FAILED;
    }
    const char *digest = lmc_json_get_string(lmc_json_at_path(first, "trace.digest"), NULL);
    char records[96] = "?", span[48] = "?", run[160], configs[160], count[32];
    if (first != NULL) {
        lmc_analyze_fmt_count(
            (uint64_t)lmc_json_get_number(lmc_json_at_path(first, "trace.records.reported")), count,
            sizeof(count));
        snprintf(records, sizeof(records), "%s", count);
        snprintf(span, sizeof(span), "%.3f s",
                 lmc_json_get_number(lmc_json_at_path(first, "trace.span_s")));
    }
    snprintf(run, sizeof(run), "mode %s, pace %s, time scale %g", s->mode, s->pace, s->time_scale);
    snprintf(configs, sizeof(configs), "%zu (%zu done, %zu failed%s), %.2f s with --jobs %zu", s->n,
             ok, failed, s->interrupted ? "; interrupted" : "", s->wall_s, s->parallel);
    lmc_report_kv rows[8];
    size_t n = 0;
    rows[n++] = (lmc_report_kv){"trace", s->trace_path};
    if (digest != NULL)
        rows[n++] = (lmc_report_kv){"digest", digest};
    rows[n++] = (lmc_report_kv){"records", records};
    rows[n++] = (lmc_report_kv){"span", span};
    rows[n++] = (lmc_report_kv){"replays", run};
    rows[n++] = (lmc_report_kv){"configurations", configs};
    if (s->command != NULL)
        rows[n++] = (lmc_report_kv){"command", s->command};
    lmc_report_header h = {.title = "Trace sweep",
                           .subtitle = "One trace replayed under every configuration of a grid",
                           .rows = rows,
                           .n_rows = n};
    lmc_report *r = lmc_report_begin(&h);
    if (r == NULL)
        return NULL;
    lmc_report_section(r, "Hit rate", NULL);
    hit_chart(r, s, lru);
    lmc_report_section(r, "Configurations", NULL);
    configs_table(r, s);
    failures(r, s);
    return lmc_report_end(r);
}
