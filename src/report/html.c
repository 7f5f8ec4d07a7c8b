/*
 * html.c -- self-contained HTML reports with inline SVG charts (see
 * html.h).
 *
 * Owns the document's string builder and the chart counter (for unique
 * clip-path ids). Charts are drawn in a fixed 720 x 380 SVG user space
 * that scales to the page width (viewBox), so the geometry below is in
 * those units: a legend row band at the top, the plot area, the tick
 * labels and the axis labels around it. Axis ranges come from the data
 * unless fixed; log axes take ticks at powers of two or ten and fall back
 * to plain ticks when the range spans less than one power.
 *
 * Threads: none.
 */
#include "report/html.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/utf8.h"

#ifndef LMC_VERSION
#define LMC_VERSION "dev"
#endif

#define CHART_W 720.0
#define CHART_H 380.0
#define PLOT_LEFT 78.0
#define PLOT_RIGHT (CHART_W - 24.0)
#define PLOT_BOTTOM_GAP 58.0 /* tick labels and the x label under the plot */
#define LEGEND_ROW 18.0
#define CHAR_W 6.8 /* average advance of a 12 px sans-serif character, for layout */
#define MAX_MARKERS 300
#define MAX_TICKS 12

struct lmc_report {
    lmc_strbuf b;
    unsigned charts;
};

/* Okabe & Ito's colour-blind-safe palette (yellow left out: too pale on white). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000"};
#define N_COLOURS (sizeof(palette) / sizeof(palette[0]))

static const char style_css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif;"
    "color:#1a1a1a;background:#fff;margin:0 auto;max-width:1100px;padding:24px 32px;"
    "line-height:1.45}"
    "h1{font-size:1.7em;margin:0 0 4px}h2{font-size:1.25em;margin:32px 0 6px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".sub{color:#555;margin:0 0 12px}"
    "dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0;"
    "font-size:.92em}dl.meta dt{color:#555}dl.meta dd{margin:0;font-family:ui-monospace,"
    "'DejaVu Sans Mono',monospace;overflow-wrap:anywhere}"
    ".note{color:#444;margin:4px 0 12px}"
    "figure{margin:16px 0 24px;break-inside:avoid;page-break-inside:avoid}"
    "figure .title{font-weight:600;margin-bottom:4px}"
    "svg.chart{width:100%;height:auto;max-width:900px;display:block}"
    "svg.chart text{font-size:12px;fill:#333}svg.chart .axis{stroke:#444;stroke-width:1}"
    "svg.chart .grid{stroke:#e3e3e3;stroke-width:1}svg.chart .axis-label{font-size:13px;"
    "fill:#111}"
    ".caption{color:#555;font-size:.9em;margin-top:2px}"
    "table{border-collapse:collapse;margin:12px 0 24px;font-size:.92em;break-inside:avoid}"
    "table caption{text-align:left;font-weight:600;margin-bottom:4px}"
    "th,td{border-bottom:1px solid #e3e3e3;padding:4px 10px;text-align:left}"
    "th{background:#f4f4f4}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}"
    "footer{color:#777;font-size:.85em;margin-top:40px;border-top:1px solid #ddd;"
    "padding-top:8px}"
    "@media print{body{max-width:none;padding:0}h2{break-after:avoid}}";

/* ---------------------------------------------------------------------- */
/* Escaping and numbers                                                    */
/* ---------------------------------------------------------------------- */

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

/*
 * The length of the UTF-8 sequence at s (n bytes left) to copy as it is,
 * or 0: invalid (core/utf8.h), or a C1 control (U+0080..U+009F).
 */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len = lmc_utf8_decode(s, n, &cp);
    return len > 0 && !(cp >= 0x80 && cp <= 0x9f) ? len : 0;
}

void lmc_report_escape(lmc_strbuf *b, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t run = 0; /* bytes at s[i - run, i) to copy as they are */
    for (size_t i = 0; i < n;) {
        const char *rep = NULL;
        size_t adv = 1;
        unsigned char c = s[i];
        if (c < 0x80) {
            switch (c) {
            case '&':
                rep = "&amp;";
                break;
            case '<':
                rep = "&lt;";
                break;
            case '>':
                rep = "&gt;";
                break;
            case '"':
                rep = "&quot;";
                break;
            case '\'':
                rep = "&#39;";
                break;
            default:
                if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
                    rep = REPLACEMENT;
            }
        } else if ((adv = utf8_len(s + i, n - i)) == 0) {
            rep = REPLACEMENT;
            adv = 1;
        }
        if (rep == NULL) {
            run += adv;
            i += adv;
            continue;
        }
        lmc_strbuf_append(b, (const char *)s + i - run, run);
        lmc_strbuf_puts(b, rep);
        run = 0;
        i += adv;
    }
    lmc_strbuf_append(b, (const char *)s + n - run, run);
}

static void esc(lmc_strbuf *b, const char *text)
{
    if (text != NULL)
        lmc_report_escape(b, text, strlen(text));
}

/* %.3g without a trailing exponent form for the sizes charts show. */
static void short_number(double v, char *buf, size_t len)
{
    double a = fabs(v);
    if (a != 0 && (a < 1e-3 || a >= 1e15))
        snprintf(buf, len, "%.2g", v);
    else
        snprintf(buf, len, "%.4g", v);
}

size_t lmc_report_format_value(double v, lmc_report_format f, char *buf, size_t len)
{
    char num[32];
    double a = fabs(v);
    if (!isfinite(v))
        return (size_t)snprintf(buf, len, "%s", isnan(v) ? "n/a" : v > 0 ? "inf" : "-inf");
    switch (f) {
    case LMC_REPORT_FMT_PERCENT:
        short_number(v * 100, num, sizeof(num));
        return (size_t)snprintf(buf, len, "%s%%", num);
    case LMC_REPORT_FMT_BYTES: {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        size_t u = 0;
        while (a >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
            a /= 1024;
            v /= 1024;
            u++;
        }
        short_number(v, num, sizeof(num));
        return (size_t)snprintf(buf, len, "%s %s", num, units[u]);
    }
    case LMC_REPORT_FMT_SECONDS:
        if (a != 0 && a < 1e-3) {
            short_number(v * 1e6, num, sizeof(num));
            return (size_t)snprintf(buf, len, "%s us", num);
        }
        if (a != 0 && a < 1) {
            short_number(v * 1000, num, sizeof(num));
            return (size_t)snprintf(buf, len, "%s ms", num);
        }
        if (a >= 7200) {
            short_number(v / 3600, num, sizeof(num));
            return (size_t)snprintf(buf, len, "%s h", num);
        }
        if (a >= 120) {
            short_number(v / 60, num, sizeof(num));
            return (size_t)snprintf(buf, len, "%s min", num);
        }
        short_number(v, num, sizeof(num));
        return (size_t)snprintf(buf, len, "%s s", num);
    case LMC_REPORT_FMT_NUMBER:
        break;
    }
    static const char *const si[] = {"", "k", "M", "G", "T"};
    size_t u = 0;
    while (a >= 1000 && u + 1 < sizeof(si) / sizeof(si[0])) {
        a /= 1000;
        v /= 1000;
        u++;
    }
    short_number(v, num, sizeof(num));
    return (size_t)snprintf(buf, len, "%s%s", num, si[u]);
}

/* ---------------------------------------------------------------------- */
/* Document                                                                */
/* ---------------------------------------------------------------------- */

lmc_report *lmc_report_begin(const lmc_report_header *h)
{
    lmc_report *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    lmc_strbuf *b = &r->b;
    lmc_strbuf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                       "<meta name=\"generator\" content=\"lmcache " LMC_VERSION "\">\n<title>");
    esc(b, h->title);
    lmc_strbuf_puts(b, "</title>\n<style>");
    lmc_strbuf_puts(b, style_css);
    lmc_strbuf_puts(b, "</style>\n</head>\n<body>\n<header>\n<h1>");
    esc(b, h->title);
    lmc_strbuf_puts(b, "</h1>\n");
    if (h->subtitle != NULL) {
        lmc_strbuf_puts(b, "<p class=\"sub\">");
        esc(b, h->subtitle);
        lmc_strbuf_puts(b, "</p>\n");
    }
    if (h->n_rows > 0) {
        lmc_strbuf_puts(b, "<dl class=\"meta\">\n");
        for (size_t i = 0; i < h->n_rows; i++) {
            lmc_strbuf_puts(b, "<dt>");
            esc(b, h->rows[i].label);
            lmc_strbuf_puts(b, "</dt><dd>");
            esc(b, h->rows[i].value);
            lmc_strbuf_puts(b, "</dd>\n");
        }
        lmc_strbuf_puts(b, "</dl>\n");
    }
    lmc_strbuf_puts(b, "</header>\n<main>\n");
    return r;
}

void lmc_report_section(lmc_report *r, const char *title, const char *note)
{
    lmc_strbuf_puts(&r->b, "<h2>");
    esc(&r->b, title);
    lmc_strbuf_puts(&r->b, "</h2>\n");
    if (note != NULL)
        lmc_report_text(r, note);
}

void lmc_report_text(lmc_report *r, const char *text)
{
    lmc_strbuf_puts(&r->b, "<p class=\"note\">");
    esc(&r->b, text);
    lmc_strbuf_puts(&r->b, "</p>\n");
}

char *lmc_report_end(lmc_report *r)
{
    lmc_strbuf_puts(&r->b, "</main>\n<footer>Written by lmcache " LMC_VERSION
                           ". A self-contained file: no script, no font, no network "
                           "resource.</footer>\n</body>\n</html>\n");
    char *html = lmc_strbuf_finish(&r->b);
    free(r);
    return html;
}

lmc_status lmc_report_save(const char *path, const char *html, lmc_error *err)
{
    return lmc_file_write_all(NULL, path, html, err);
}

/* ---------------------------------------------------------------------- */
/* Axes                                                                    */
/* ---------------------------------------------------------------------- */

typedef struct axis_map {
    const lmc_report_axis *a;
    double lo, hi; /* in transformed units */
    double p0, p1; /* pixel positions of lo and hi */
    double ticks[MAX_TICKS * 2];
    size_t n_ticks;
    double unit; /* seconds axes: the ticks' unit (1, 60 or 3600), one for the whole axis */
} axis_map;

static double tf(const lmc_report_axis *a, double v)
{
    switch (a->scale) {
    case LMC_REPORT_LOG2:
        return log2(v);
    case LMC_REPORT_LOG10:
        return log10(v);
    case LMC_REPORT_LINEAR:
        break;
    }
    return v;
}

static double untf(const lmc_report_axis *a, double t)
{
    switch (a->scale) {
    case LMC_REPORT_LOG2:
        return exp2(t);
    case LMC_REPORT_LOG10:
        return pow(10, t);
    case LMC_REPORT_LINEAR:
        break;
    }
    return t;
}

static bool drawable(const lmc_report_axis *a, double v)
{
    return isfinite(v) && (a->scale == LMC_REPORT_LINEAR || v > 0);
}

static double px(const axis_map *m, double v)
{
    double t = tf(m->a, v);
    return m->p0 + (t - m->lo) / (m->hi - m->lo) * (m->p1 - m->p0);
}

/* 1, 2 or 5 times a power of ten, near range / target. */
static double nice_step(double range, double target)
{
    double raw = range / target;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/*
 * Plain ticks in value space between untf(lo) and untf(hi), at round
 * numbers of the unit the labels are written in (minutes and hours for
 * long spans of seconds).
 */
static void linear_ticks(axis_map *m)
{
    double vlo = untf(m->a, m->lo), vhi = untf(m->a, m->hi);
    double unit = 1;
    if (m->a->format == LMC_REPORT_FMT_SECONDS && vhi - vlo >= 4 * 3600)
        unit = 3600;
    else if (m->a->format == LMC_REPORT_FMT_SECONDS && vhi - vlo >= 240)
        unit = 60;
    m->unit = unit;
    double step = nice_step((vhi - vlo) / unit, 5) * unit;
    m->n_ticks = 0;
    for (double v = ceil(vlo / step - 1e-9) * step; v <= vhi + step * 1e-9; v += step) {
        if (m->n_ticks == MAX_TICKS * 2)
            break;
        double t = fabs(v) < step * 1e-9 ? 0 : v;
        if (drawable(m->a, t))
            m->ticks[m->n_ticks++] = t;
    }
}

static void make_ticks(axis_map *m)
{
    if (m->a->scale == LMC_REPORT_LINEAR) {
        linear_ticks(m);
        return;
    }
    double base = m->a->scale == LMC_REPORT_LOG2 ? 2 : 10;
    double first = ceil(m->lo - 1e-9), last = floor(m->hi + 1e-9);
    double count = last - first + 1;
    if (count < 2) {
        linear_ticks(m);
        return;
    }
    double every = ceil(count / MAX_TICKS);
    m->n_ticks = 0;
    for (double k = first; k <= last && m->n_ticks < MAX_TICKS * 2; k += every)
        m->ticks[m->n_ticks++] = pow(base, k);
}

/* The axis over the values (any that are drawable), mapped onto pixels [p0, p1]. */
static bool map_axis(axis_map *m, const lmc_report_axis *a, const double *const *vals,
                     const size_t *counts, size_t n_sets, double p0, double p1)
{
    memset(m, 0, sizeof(*m));
    m->a = a;
    m->p0 = p0;
    m->p1 = p1;
    double lo = INFINITY, hi = -INFINITY;
    if (a->fixed && drawable(a, a->min) && drawable(a, a->max) && a->max > a->min) {
        lo = tf(a, a->min);
        hi = tf(a, a->max);
    } else {
        for (size_t s = 0; s < n_sets; s++) {
            for (size_t i = 0; i < counts[s]; i++) {
                if (!drawable(a, vals[s][i]))
                    continue;
                double t = tf(a, vals[s][i]);
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
        }
        if (lo > hi)
            return false; /* nothing to draw */
        if (a->scale == LMC_REPORT_LINEAR && a->include_zero) {
            lo = lo > 0 ? 0 : lo;
            hi = hi < 0 ? 0 : hi;
        }
        if (hi - lo < 1e-12) {
            double pad = a->scale == LMC_REPORT_LINEAR ? (fabs(lo) > 0 ? fabs(lo) * 0.1 : 1) : 0.5;
            lo -= pad;
            hi += pad;
        }
    }
    m->lo = lo;
    m->hi = hi;
    make_ticks(m);
    return true;
}

/* ---------------------------------------------------------------------- */
/* Chart frame                                                             */
/* ---------------------------------------------------------------------- */

typedef struct frame {
    double top, bottom; /* the plot area's y extent */
    double height;      /* the SVG's: the plot, then the tick labels and the x label */
    unsigned id;        /* the chart's number, for its clip path */
} frame;

/* Legend entries in rows from the left; returns the rows used. */
/*
 * Legend entries in rows from the left; returns the rows used. An entry's
 * sample is a swatch for bars, else its series' look (a dot for points, a
 * dashed or solid line).
 */
static size_t legend(lmc_strbuf *b, const char *const *names, size_t n, bool bars,
                     const lmc_report_series *series)
{
    double x = PLOT_LEFT, y = 16;
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL || names[i][0] == '\0')
            continue;
        double w = 28 + CHAR_W * (double)strlen(names[i]) + 18;
        if (rows == 0)
            rows = 1;
        else if (x + w > PLOT_RIGHT && x > PLOT_LEFT) {
            x = PLOT_LEFT;
            y += LEGEND_ROW;
            rows++;
        }
        const char *c = palette[i % N_COLOURS];
        if (bars)
            lmc_strbuf_printf(b,
                              "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" "
                              "fill=\"%s\"/>",
                              x + 4, y - 9, c);
        else if (series != NULL && series[i].style == LMC_REPORT_POINTS)
            lmc_strbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>", x + 11,
                              y - 4, c);
        else
            lmc_strbuf_printf(b,
                              "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                              "stroke=\"%s\" stroke-width=\"2.5\"%s/>",
                              x, y - 4, x + 22, y - 4, c,
                              series != NULL && series[i].dashed ? " stroke-dasharray=\"5 3\""
                                                                 : "");
        lmc_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" class=\"legend\">", x + 28, y);
        esc(b, names[i]);
        lmc_strbuf_puts(b, "</text>\n");
        x += w;
    }
    return rows;
}

static void figure_open(lmc_report *r, const char *id, const char *title)
{
    lmc_strbuf_puts(&r->b, "<figure");
    if (id != NULL) {
        lmc_strbuf_puts(&r->b, " id=\"");
        esc(&r->b, id);
        lmc_strbuf_puts(&r->b, "\"");
    }
    lmc_strbuf_puts(&r->b, ">\n<div class=\"title\">");
    esc(&r->b, title);
    lmc_strbuf_puts(&r->b, "</div>\n");
}

static void figure_close(lmc_report *r, const char *caption)
{
    if (caption != NULL) {
        lmc_strbuf_puts(&r->b, "<p class=\"caption\">");
        esc(&r->b, caption);
        lmc_strbuf_puts(&r->b, "</p>\n");
    }
    lmc_strbuf_puts(&r->b, "</figure>\n");
}

/*
 * The SVG element, the legend and the plot area's extent; below_extra is
 * room for x tick labels taller than one line (turned ones).
 */
static frame svg_open(lmc_report *r, const char *title, const char *const *names, size_t n,
                      bool bars, const lmc_report_series *series, double below_extra)
{
    frame f;
    f.id = ++r->charts;
    f.height = CHART_H + below_extra;
    lmc_strbuf_printf(&r->b,
                      "<svg class=\"chart\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
                      "xmlns=\"http://www.w3.org/2000/svg\" aria-label=\"",
                      CHART_W, f.height);
    esc(&r->b, title);
    lmc_strbuf_puts(&r->b, "\">\n");
    size_t rows = legend(&r->b, names, n, bars, series);
    f.top = 12 + (double)rows * LEGEND_ROW;
    f.bottom = CHART_H - PLOT_BOTTOM_GAP;
    lmc_strbuf_printf(&r->b,
                      "<defs><clipPath id=\"lmc-clip-%u\"><rect x=\"%.1f\" y=\"%.1f\" "
                      "width=\"%.1f\" height=\"%.1f\"/></clipPath></defs>\n",
                      f.id, PLOT_LEFT - 4, f.top - 4, PLOT_RIGHT - PLOT_LEFT + 8,
                      f.bottom - f.top + 8);
    return f;
}

/* A tick's label: the axis's format, seconds in the axis's one unit. */
static void tick_label(const axis_map *m, double v, char *buf, size_t len)
{
    if (m->a->format != LMC_REPORT_FMT_SECONDS || m->unit <= 1) {
        lmc_report_format_value(v, m->a->format, buf, len);
        if (m->a->format == LMC_REPORT_FMT_SECONDS && v != 0 && fabs(v) >= 60)
            snprintf(buf, len, "%g s", v); /* whole seconds, even past a minute */
        return;
    }
    snprintf(buf, len, "%g %s", v / m->unit, m->unit == 60 ? "min" : "h");
}

/* An axis's grid lines and tick labels: across the plot at each tick, labels left (y) or under (x).
 */
static void ticks(lmc_strbuf *b, const axis_map *m, const frame *f, bool vertical)
{
    char t[48];
    for (size_t i = 0; i < m->n_ticks; i++) {
        double p = px(m, m->ticks[i]);
        tick_label(m, m->ticks[i], t, sizeof(t));
        if (vertical)
            lmc_strbuf_printf(b,
                              "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                              "y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
                              "text-anchor=\"end\">%s</text>\n",
                              PLOT_LEFT, p, PLOT_RIGHT, p, PLOT_LEFT - 6, p + 4, t);
        else
            lmc_strbuf_printf(b,
                              "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                              "y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
                              "text-anchor=\"middle\">%s</text>\n",
                              p, f->top, p, f->bottom, p, f->bottom + 18, t);
    }
}

/* The y axis: ticks, its line, its label (turned). */
static void y_axis(lmc_strbuf *b, const axis_map *y, const frame *f)
{
    ticks(b, y, f, true);
    lmc_strbuf_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      PLOT_LEFT, f->top, PLOT_LEFT, f->bottom);
    double mid = (f->top + f->bottom) / 2;
    lmc_strbuf_printf(b,
                      "<text class=\"axis-label\" x=\"16\" y=\"%.1f\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 16 %.1f)\">",
                      mid, mid);
    esc(b, y->a->label);
    lmc_strbuf_puts(b, "</text>\n");
}

static void x_label(lmc_strbuf *b, const char *label, const frame *f)
{
    lmc_strbuf_printf(b, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                      (PLOT_LEFT + PLOT_RIGHT) / 2, f->height - 10);
    esc(b, label);
    lmc_strbuf_puts(b, "</text>\n");
}

/* The x axis line under the plot, from the left edge to the right. */
static void x_line(lmc_strbuf *b, const frame *f)
{
    lmc_strbuf_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      PLOT_LEFT, f->bottom, PLOT_RIGHT, f->bottom);
}

/* The x axis: ticks, its line, its label. */
static void x_axis(lmc_strbuf *b, const axis_map *x, const frame *f)
{
    ticks(b, x, f, false);
    x_line(b, f);
    x_label(b, x->a->label, f);
}

static void empty_chart(lmc_strbuf *b, const frame *f)
{
    lmc_strbuf_printf(b,
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no data to draw</text>\n",
                      (PLOT_LEFT + PLOT_RIGHT) / 2, (f->top + f->bottom) / 2);
}

/* ---------------------------------------------------------------------- */
/* Line charts and CDFs                                                    */
/* ---------------------------------------------------------------------- */

/* A point's hover text: "name: x, y". */
static void hover(lmc_strbuf *b, const char *name, const lmc_report_axis *xa, double x,
                  const lmc_report_axis *ya, double y)
{
    char xs[48], ys[48];
    lmc_report_format_value(x, xa->format, xs, sizeof(xs));
    lmc_report_format_value(y, ya->format, ys, sizeof(ys));
    lmc_strbuf_puts(b, "<title>");
    if (name != NULL && name[0] != '\0') {
        esc(b, name);
        lmc_strbuf_puts(b, ": ");
    }
    lmc_strbuf_printf(b, "%s, %s</title>", xs, ys);
}

static void draw_series(lmc_strbuf *b, const lmc_report_series *s, const char *colour,
                        const axis_map *x, const axis_map *y, unsigned clip)
{
    lmc_strbuf_printf(b, "<g clip-path=\"url(#lmc-clip-%u)\">\n", clip);
    if (s->err != NULL) {
        /* The band: upper edge forwards, lower edge back. */
        lmc_strbuf_printf(b, "<polygon fill=\"%s\" fill-opacity=\"0.15\" stroke=\"none\" points=\"",
                          colour);
        for (size_t i = 0; i < s->n; i++) {
            if (drawable(x->a, s->x[i]) && drawable(y->a, s->y[i] + s->err[i]))
                lmc_strbuf_printf(b, "%.1f,%.1f ", px(x, s->x[i]), px(y, s->y[i] + s->err[i]));
        }
        for (size_t i = s->n; i-- > 0;) {
            if (drawable(x->a, s->x[i]) && drawable(y->a, s->y[i] - s->err[i]))
                lmc_strbuf_printf(b, "%.1f,%.1f ", px(x, s->x[i]), px(y, s->y[i] - s->err[i]));
        }
        lmc_strbuf_puts(b, "\"/>\n");
    }
    if (s->style != LMC_REPORT_POINTS) {
        lmc_strbuf_printf(b, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s d=\"", colour,
                          s->dashed ? " stroke-dasharray=\"6 4\"" : "");
        bool started = false;
        for (size_t i = 0; i < s->n; i++) {
            if (!drawable(x->a, s->x[i]) || !drawable(y->a, s->y[i]))
                continue;
            double px_ = px(x, s->x[i]), py = px(y, s->y[i]);
            if (!started)
                lmc_strbuf_printf(b, "M%.1f %.1f", px_, py);
            else if (s->style == LMC_REPORT_STEP)
                lmc_strbuf_printf(b, "H%.1fV%.1f", px_, py);
            else
                lmc_strbuf_printf(b, "L%.1f %.1f", px_, py);
            started = true;
        }
        lmc_strbuf_puts(b, "\"/>\n");
    }
    bool markers = s->style == LMC_REPORT_POINTS || s->n <= MAX_MARKERS;
    for (size_t i = 0; markers && i < s->n; i++) {
        if (!drawable(x->a, s->x[i]) || !drawable(y->a, s->y[i]))
            continue;
        lmc_strbuf_printf(
            b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"%s>", px(x, s->x[i]),
            px(y, s->y[i]), s->style == LMC_REPORT_POINTS ? "4.5" : "2.2", colour,
            s->style == LMC_REPORT_POINTS ? " stroke=\"#fff\" stroke-width=\"1.5\"" : "");
        hover(b, s->name, x->a, s->x[i], y->a, s->y[i]);
        lmc_strbuf_puts(b, "</circle>\n");
    }
    lmc_strbuf_puts(b, "</g>\n");
}

void lmc_report_line_chart(lmc_report *r, const lmc_report_chart *c)
{
    lmc_strbuf *b = &r->b;
    size_t n = c->n_series;
    const double **xs = calloc(n + 1, sizeof(*xs)), **ys = calloc(2 * n + 1, sizeof(*ys));
    size_t *counts = calloc(2 * n + 1, sizeof(*counts));
    const char **names = calloc(n + 1, sizeof(*names));
    double *band = NULL;
    if (xs == NULL || ys == NULL || counts == NULL || names == NULL) {
        b->oom = true;
        goto out;
    }
    size_t n_band = 0;
    for (size_t i = 0; i < n; i++) {
        xs[i] = c->series[i].x;
        ys[i] = c->series[i].y;
        counts[i] = c->series[i].n;
        names[i] = c->series[i].name;
        if (c->series[i].err != NULL)
            n_band += 2 * c->series[i].n;
    }
    /* The y range covers the bands too. */
    size_t n_y = n;
    if (n_band > 0 && (band = malloc(n_band * sizeof(*band))) != NULL) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; c->series[i].err != NULL && j < c->series[i].n; j++) {
                band[k++] = c->series[i].y[j] + c->series[i].err[j];
                band[k++] = c->series[i].y[j] - c->series[i].err[j];
            }
        }
        ys[n_y] = band;
        counts[n_y++] = k;
    }
    figure_open(r, c->id, c->title);
    frame f = svg_open(r, c->title, names, n, false, c->series, 0);
    axis_map x, y;
    bool ok = map_axis(&x, &c->x, xs, counts, n, PLOT_LEFT, PLOT_RIGHT) &&
              map_axis(&y, &c->y, ys, counts, n_y, f.bottom, f.top);
    if (!ok) {
        empty_chart(b, &f);
        x_label(b, c->x.label, &f);
    } else {
        y_axis(b, &y, &f);
        x_axis(b, &x, &f);
        for (size_t i = 0; i < n; i++)
            draw_series(b, &c->series[i], palette[i % N_COLOURS], &x, &y, f.id);
    }
    lmc_strbuf_puts(b, "</svg>\n");
    figure_close(r, c->caption);
out:
    free(xs);
    free(ys);
    free(counts);
    free(names);
    free(band);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void lmc_report_cdf(lmc_report *r, const char *title, const char *id, const char *caption,
                    const lmc_report_axis *x, const lmc_report_cdf_series *s, size_t n)
{
    lmc_report_series *series = calloc(n + 1, sizeof(*series));
    double **bufs = calloc(n + 1, sizeof(*bufs));
    if (series == NULL || bufs == NULL) {
        r->b.oom = true;
        free(series);
        free(bufs);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* Sorted values and their cumulative fractions, at most ~2000 steps drawn. */
        size_t stride = s[i].n > 2000 ? s[i].n / 2000 : 1;
        size_t m = s[i].n / stride + 1;
        double *v = malloc(s[i].n * sizeof(*v) + 1);
        bufs[i] = malloc(2 * m * sizeof(double) + 1);
        if (v == NULL || bufs[i] == NULL) {
            free(v);
            r->b.oom = true;
            continue;
        }
        memcpy(v, s[i].values, s[i].n * sizeof(*v));
        qsort(v, s[i].n, sizeof(*v), cmp_double);
        double *px_ = bufs[i], *py = bufs[i] + m;
        size_t k = 0;
        for (size_t j = 0; j < s[i].n; j += stride) {
            px_[k] = v[j];
            py[k++] = (double)(j + 1) / (double)s[i].n;
        }
        if (s[i].n > 0 && px_[k - 1] != v[s[i].n - 1]) {
            px_[k] = v[s[i].n - 1];
            py[k++] = 1.0;
        }
        free(v);
        series[i] = (lmc_report_series){
            .name = s[i].name, .x = px_, .y = py, .n = k, .style = LMC_REPORT_STEP};
    }
    lmc_report_chart c = {
        .title = title,
        .id = id,
        .caption = caption,
        .x = *x,
        .y = {.label = "fraction of values at or below",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
        .series = series,
        .n_series = n,
    };
    lmc_report_line_chart(r, &c);
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(series);
}

/* ---------------------------------------------------------------------- */
/* Histograms                                                              */
/* ---------------------------------------------------------------------- */

void lmc_report_histogram(lmc_report *r, const lmc_report_bars *h)
{
    lmc_strbuf *b = &r->b;
    size_t n = h->n_series, nb = h->n_buckets;
    const double **vals = calloc(n + 1, sizeof(*vals));
    size_t *counts = calloc(n + 1, sizeof(*counts));
    const char **names = calloc(n + 1, sizeof(*names));
    if (vals == NULL || counts == NULL || names == NULL) {
        b->oom = true;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        vals[i] = h->series[i].values;
        counts[i] = nb;
        names[i] = h->series[i].name;
    }
    /* Labels that do not fit under their bar are turned by 40 degrees: make room for them. */
    double slot = (PLOT_RIGHT - PLOT_LEFT) / (double)(nb > 0 ? nb : 1);
    size_t longest = 0;
    for (size_t k = 0; k < nb; k++) {
        size_t l = h->labels[k] ? strlen(h->labels[k]) : 0;
        longest = l > longest ? l : longest;
    }
    bool turned = (double)longest * CHAR_W > slot - 4;
    double extra = turned ? (double)longest * CHAR_W * 0.65 : 0;
    figure_open(r, h->id, h->title);
    frame f = svg_open(r, h->title, names, n, true, NULL, extra);
    lmc_report_axis ya = h->y;
    if (ya.scale == LMC_REPORT_LINEAR)
        ya.include_zero = true;
    axis_map y;
    if (nb == 0 || !map_axis(&y, &ya, vals, counts, n, f.bottom, f.top)) {
        empty_chart(b, &f);
        x_label(b, h->x_label, &f);
        goto close;
    }
    y_axis(b, &y, &f);
    double bar = slot * 0.8 / (double)(n > 0 ? n : 1);
    double base = ya.scale == LMC_REPORT_LINEAR ? px(&y, y.lo < 0 ? 0 : y.lo) : f.bottom;
    for (size_t k = 0; k < nb; k++) {
        double cx = PLOT_LEFT + slot * ((double)k + 0.5);
        if (turned)
            lmc_strbuf_printf(b,
                              "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" "
                              "transform=\"rotate(-40 %.1f %.1f)\">",
                              cx + 4, f.bottom + 14, cx + 4, f.bottom + 14);
        else
            lmc_strbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", cx,
                              f.bottom + 18);
        esc(b, h->labels[k]);
        lmc_strbuf_puts(b, "</text>\n");
        for (size_t i = 0; i < n; i++) {
            double v = h->series[i].values[k];
            if (!drawable(&ya, v))
                continue;
            double top = px(&y, v);
            double x0 = PLOT_LEFT + slot * (double)k + slot * 0.1 + bar * (double)i;
            double y0 = top < base ? top : base, hgt = fabs(base - top);
            char vs[48];
            lmc_report_format_value(v, ya.format, vs, sizeof(vs));
            lmc_strbuf_printf(b,
                              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                              "fill=\"%s\"><title>",
                              x0, y0, bar, hgt, palette[i % N_COLOURS]);
            if (names[i] != NULL && names[i][0] != '\0') {
                esc(b, names[i]);
                lmc_strbuf_puts(b, ", ");
            }
            esc(b, h->labels[k]);
            lmc_strbuf_printf(b, ": %s</title></rect>\n", vs);
        }
    }
    x_line(b, &f);
    x_label(b, h->x_label, &f);
close:
    lmc_strbuf_puts(b, "</svg>\n");
    figure_close(r, h->caption);
out:
    free(vals);
    free(counts);
    free(names);
}

/* ---------------------------------------------------------------------- */
/* Tables                                                                  */
/* ---------------------------------------------------------------------- */

void lmc_report_table(lmc_report *r, const lmc_report_table_data *t)
{
    lmc_strbuf *b = &r->b;
    lmc_strbuf_puts(b, "<table");
    if (t->id != NULL) {
        lmc_strbuf_puts(b, " id=\"");
        esc(b, t->id);
        lmc_strbuf_puts(b, "\"");
    }
    lmc_strbuf_puts(b, ">\n");
    if (t->title != NULL) {
        lmc_strbuf_puts(b, "<caption>");
        esc(b, t->title);
        lmc_strbuf_puts(b, "</caption>\n");
    }
    lmc_strbuf_puts(b, "<thead><tr>");
    for (size_t c = 0; c < t->n_columns; c++) {
        lmc_strbuf_puts(b, t->numeric && t->numeric[c] ? "<th class=\"num\">" : "<th>");
        esc(b, t->columns[c]);
        lmc_strbuf_puts(b, "</th>");
    }
    lmc_strbuf_puts(b, "</tr></thead>\n<tbody>\n");
    for (size_t row = 0; row < t->n_rows; row++) {
        lmc_strbuf_puts(b, "<tr>");
        for (size_t c = 0; c < t->n_columns; c++) {
            lmc_strbuf_puts(b, t->numeric && t->numeric[c] ? "<td class=\"num\">" : "<td>");
            esc(b, t->cells[row * t->n_columns + c]);
            lmc_strbuf_puts(b, "</td>");
        }
        lmc_strbuf_puts(b, "</tr>\n");
    }
    lmc_strbuf_puts(b, "</tbody>\n</table>\n");
    if (t->caption != NULL) {
        lmc_strbuf_puts(b, "<p class=\"caption\">");
        esc(b, t->caption);
        lmc_strbuf_puts(b, "</p>\n");
    }
}

void lmc_report_kv_table(lmc_report *r, const char *title, const char *id,
                         const lmc_report_kv *rows, size_t n_rows)
{
    static const char *const cols[2] = {"figure", "value"};
    static const bool numeric[2] = {false, true};
    const char **cells = malloc(2 * n_rows * sizeof(*cells) + 1);
    if (cells == NULL) {
        r->b.oom = true;
        return;
    }
    for (size_t i = 0; i < n_rows; i++) {
        cells[2 * i] = rows[i].label;
        cells[2 * i + 1] = rows[i].value;
    }
    lmc_report_table_data t = {.title = title,
                               .id = id,
                               .columns = cols,
                               .n_columns = 2,
                               .cells = cells,
                               .n_rows = n_rows,
                               .numeric = numeric};
    lmc_report_table(r, &t);
    free(cells);
}
