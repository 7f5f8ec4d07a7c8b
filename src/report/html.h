/*
 * html.h -- self-contained HTML reports with inline SVG charts.
 *
 * Owns: the document being built (a string builder) and its chart
 * numbering. A report is one HTML file with its CSS inline and its charts
 * as inline SVG: no script, no font, no network resource of any kind, so
 * it reads the same offline, in a mail attachment or printed. Each data
 * point of a chart carries an SVG <title> with its values, which browsers
 * show on hover without any script.
 *
 * Building one (every call appends; none fails -- running out of memory is
 * remembered and reported once, by lmc_report_end):
 *
 *   lmc_report_kv rows[] = {{"trace", path}, {"sha256", digest}, ...};
 *   lmc_report_header h = {.title = "Trace analysis", .rows = rows, .n_rows = 4};
 *   lmc_report *r = lmc_report_begin(&h);
 *   lmc_report_section(r, "Miss-ratio curve", "Exact LRU, one pass ...");
 *   lmc_report_series s[] = {{.name = "LRU (analyze)", .x = gib, .y = hit, .n = n}};
 *   lmc_report_chart c = {.title = "Hit rate against L1 size", .id = "mrc",
 *                         .x = {.label = "L1 capacity (GiB)", .scale = LMC_REPORT_LOG2,
 *                               .format = LMC_REPORT_FMT_NUMBER},
 *                         .y = {.label = "chunk hit rate", .format = LMC_REPORT_FMT_PERCENT,
 *                               .fixed = true, .min = 0, .max = 1},
 *                         .series = s, .n_series = 1};
 *   lmc_report_line_chart(r, &c);
 *   lmc_report_table(r, &table);
 *   char *html = lmc_report_end(r);   // then lmc_report_save(path, html, &err)
 *
 * Elements:
 *   header        title, optional subtitle, and label/value rows (name the
 *                 trace -- path, digest, records, span -- and the command
 *                 or configuration), at the top;
 *   section       an <h2> with an optional note paragraph;
 *   text          a paragraph;
 *   line chart    several series (legend entries) of (x, y) points over
 *                 linear or log axes, each a line, a step line or points,
 *                 optionally dashed and with an error band (y +- err);
 *                 a time series is a line chart with LMC_REPORT_FMT_SECONDS
 *                 on x;
 *   cdf           empirical CDFs of several samples (values unsorted; a
 *                 step line per sample, y from 0 to 1);
 *   histogram     bars over labelled buckets, several series side by side;
 *   table         columns with headers, cells as text, numeric columns
 *                 right-aligned; a key/value table is one of label/value
 *                 rows.
 * Every chart has axis labels (the caller puts the unit in the label:
 * "L1 capacity (GiB)"), tick labels in the axis's format and a legend
 * when it has more than one series or a named one. Points that cannot be
 * drawn (NaN, infinite, or <= 0 on a log axis) are skipped; a chart with
 * nothing to draw says so. Series take the colours of a fixed
 * colour-blind-safe palette in order.
 *
 * Every string given -- titles, labels, names, cells, from a trace or not
 * -- is escaped (lmc_report_escape): the five HTML specials become
 * entities, control characters become U+FFFD, and bytes that are not
 * valid UTF-8 become U+FFFD, so no input can inject markup or break the
 * document.
 *
 * Element ids: a chart, histogram or table with an id gets it (escaped)
 * on its <figure> or <table>, and its SVG the class "chart", so tests and
 * links can find them.
 *
 * Threads: none; a report belongs to one thread.
 */
#ifndef LMC_REPORT_HTML_H
#define LMC_REPORT_HTML_H

#include <stdbool.h>
#include <stddef.h>

#include "core/strbuf.h"
#include "lmcache/status.h"

typedef struct lmc_report lmc_report;

typedef struct lmc_report_kv {
    const char *label;
    const char *value;
} lmc_report_kv;

typedef struct lmc_report_header {
    const char *title;    /* the <title> and <h1> */
    const char *subtitle; /* NULL for none */
    const lmc_report_kv *rows;
    size_t n_rows;
} lmc_report_header;

typedef enum lmc_report_scale {
    LMC_REPORT_LINEAR = 0,
    LMC_REPORT_LOG2,  /* ticks at powers of two */
    LMC_REPORT_LOG10, /* ticks at powers of ten */
} lmc_report_scale;

/* How tick labels (and hover values) are written. */
typedef enum lmc_report_format {
    LMC_REPORT_FMT_NUMBER = 0, /* 0.25, 12, 1.5k, 3M */
    LMC_REPORT_FMT_PERCENT,    /* a fraction 0..1 written as 0% .. 100% */
    LMC_REPORT_FMT_BYTES,      /* IEC: 512 B, 4 KiB, 1.5 GiB */
    LMC_REPORT_FMT_SECONDS,    /* 50 us, 250 ms, 1.5 s, 2 min */
} lmc_report_format;

typedef struct lmc_report_axis {
    const char *label; /* with the unit: "L1 capacity (GiB)" */
    lmc_report_scale scale;
    lmc_report_format format;
    bool fixed;        /* use [min, max]; otherwise the data's range */
    double min, max;   /* with fixed */
    bool include_zero; /* a linear axis from the data starts (or ends) at 0 */
} lmc_report_axis;

typedef enum lmc_report_style {
    LMC_REPORT_LINE = 0, /* straight segments, a marker per point (up to 300 points) */
    LMC_REPORT_STEP,     /* horizontal then vertical: counts per bucket, CDFs */
    LMC_REPORT_POINTS,   /* markers only */
} lmc_report_style;

typedef struct lmc_report_series {
    const char *name; /* the legend entry; NULL or "" for none */
    const double *x;
    const double *y;
    size_t n;
    lmc_report_style style;
    bool dashed;
    const double *err; /* NULL, or a band y +- err[i] */
} lmc_report_series;

typedef struct lmc_report_chart {
    const char *title;   /* above the chart */
    const char *id;      /* NULL for none */
    const char *caption; /* below it; NULL for none */
    lmc_report_axis x, y;
    const lmc_report_series *series;
    size_t n_series;
} lmc_report_chart;

typedef struct lmc_report_cdf_series {
    const char *name;
    const double *values; /* any order */
    size_t n;
} lmc_report_cdf_series;

typedef struct lmc_report_bar_series {
    const char *name;
    const double *values; /* one per bucket */
} lmc_report_bar_series;

typedef struct lmc_report_bars {
    const char *title;
    const char *id;
    const char *caption;
    const char *x_label;       /* what the buckets are, with the unit */
    const char *const *labels; /* one per bucket */
    size_t n_buckets;
    lmc_report_axis y; /* linear or log10 */
    const lmc_report_bar_series *series;
    size_t n_series;
} lmc_report_bars;

typedef struct lmc_report_table_data {
    const char *title;
    const char *id;
    const char *caption;
    const char *const *columns;
    size_t n_columns;
    const char *const *cells; /* row-major, n_rows x n_columns; NULL cells are empty */
    size_t n_rows;
    const bool *numeric; /* per column: right-aligned (NULL: none) */
} lmc_report_table_data;

/* A new document with its header; NULL when memory runs out. */
lmc_report *lmc_report_begin(const lmc_report_header *h);

void lmc_report_section(lmc_report *r, const char *title, const char *note);
void lmc_report_text(lmc_report *r, const char *text);
void lmc_report_line_chart(lmc_report *r, const lmc_report_chart *c);
/* x is the values' axis; y is the fraction of values <= x, 0 to 1. */
void lmc_report_cdf(lmc_report *r, const char *title, const char *id, const char *caption,
                    const lmc_report_axis *x, const lmc_report_cdf_series *s, size_t n);
void lmc_report_histogram(lmc_report *r, const lmc_report_bars *b);
void lmc_report_table(lmc_report *r, const lmc_report_table_data *t);
/* A two-column table of label/value rows (values right-aligned), headed "figure" and "value". */
void lmc_report_kv_table(lmc_report *r, const char *title, const char *id,
                         const lmc_report_kv *rows, size_t n_rows);

/*
 * Close the document and free r: the HTML (caller frees), or NULL when
 * memory ran out at any point.
 */
char *lmc_report_end(lmc_report *r);

/* Write html to path by core/file.h's rule for outputs (a file beside it, then a
 * rename; never through a symlink; a device or FIFO in place). Errors name the path. */
lmc_status lmc_report_save(const char *path, const char *html, lmc_error *err);

/* Append text (n bytes) escaped for HTML text and attribute values (see above). */
void lmc_report_escape(lmc_strbuf *b, const char *text, size_t n);

/* A tick or hover value in a format ("1.5 GiB", "42%"), snprintf-style. */
size_t lmc_report_format_value(double v, lmc_report_format f, char *buf, size_t len);

#endif
