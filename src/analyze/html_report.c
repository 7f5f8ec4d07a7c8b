/*
 * html_report.c -- the HTML report of a trace analysis (output.h), built
 * with report/html.h: a header naming the trace and the command, the
 * miss-ratio curve (hit rate against L1 capacity on a log axis, with its
 * error band when sampled and the recorded hit rate for reference), the
 * workload tables, request and key rates over time, and the
 * reuse-distance histograms.
 *
 * Owns nothing. Threads: none.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/output.h"
#include "report/html.h"

#define CELL 96

/* A table of label/value rows. */
static void kv_table(lmc_report *r, const char *title, const char *id, char (*cells)[CELL],
                     size_t n_rows)
{
    lmc_report_kv rows[16];
    for (size_t i = 0; i < n_rows && i < sizeof(rows) / sizeof(rows[0]); i++)
        rows[i] = (lmc_report_kv){cells[2 * i], cells[2 * i + 1]};
    lmc_report_kv_table(r, title, id, rows, n_rows < 16 ? n_rows : 16);
}

static void workload(lmc_report *r, const lmc_analyze_result *res)
{
    char cells[2 * 12][CELL]; /* 12 rows at most */
    size_t n = 0;
    const char *est = res->estimated ? "~" : "";
    char a[40], b[40];
#define ROW(label, ...)                                                                            \
    do {                                                                                           \
        snprintf(cells[2 * n], CELL, "%s", label);                                                 \
        snprintf(cells[2 * n + 1], CELL, __VA_ARGS__);                                             \
        n++;                                                                                       \
    } while (0)
    lmc_analyze_fmt_count(res->requests, a, sizeof(a));
    ROW("requests (lookups)", "%s", a);
    lmc_analyze_fmt_count(res->keys, a, sizeof(a));
    ROW("keys looked up", "%s", a);
    lmc_analyze_fmt_count(res->unique_keys, a, sizeof(a));
    ROW("unique keys", "%s%s", est, a);
    lmc_analyze_fmt_bytes(res->footprint_bytes, a, sizeof(a));
    ROW("footprint", "%s%s", est, a);
    lmc_analyze_fmt_bytes(res->min_object_bytes, a, sizeof(a));
    lmc_analyze_fmt_bytes(res->max_object_bytes, b, sizeof(b));
    if (res->min_object_bytes == res->max_object_bytes)
        ROW("object size", "%s", a);
    else
        ROW("object size", "%s to %s", a, b);
    lmc_analyze_fmt_count(res->keys_read, a, sizeof(a));
    ROW("keys read (recorded hits)", "%s", a);
    ROW("recorded hit rate", "%.2f%%", 100 * res->recorded_hit_rate);
    ROW("LRU hit rate, unbounded L1", "%.2f%%", 100 * res->mrc.max_hit_rate);
    ROW("span", "%.3f s", res->span_s);
    ROW("mean request rate", "%.1f/s", res->span_s > 0 ? (double)res->requests / res->span_s : 0);
#undef ROW
    kv_table(r, "Workload", "workload", cells, n);
}

static void groups(lmc_report *r, const lmc_analyze_result *res)
{
    static const char *const cols[] = {
        "model",       "cache_salt", "requests",         "keys looked up",
        "unique keys", "footprint",  "recorded hit rate"};
    enum { NC = sizeof(cols) / sizeof(cols[0]) };
    size_t n = res->n_groups;
    char(*num)[CELL] = calloc(n * NC + 1, sizeof(*num));
    const char **cells = calloc(n * NC + 1, sizeof(*cells));
    if (num == NULL || cells == NULL)
        goto out;
    const char *est = res->estimated ? "~" : "";
    for (size_t i = 0; i < n; i++) {
        const lmc_analyze_group *g = &res->groups[i];
        char a[40];
        cells[i * NC] = g->model_name;
        cells[i * NC + 1] = g->cache_salt[0] ? g->cache_salt : "(none)";
        lmc_analyze_fmt_count(g->requests, num[i * NC + 2], CELL);
        lmc_analyze_fmt_count(g->keys, num[i * NC + 3], CELL);
        lmc_analyze_fmt_count(g->unique_keys, a, sizeof(a));
        snprintf(num[i * NC + 4], CELL, "%s%s", est, a);
        lmc_analyze_fmt_bytes(g->footprint_bytes, a, sizeof(a));
        snprintf(num[i * NC + 5], CELL, "%s%s", est, a);
        snprintf(num[i * NC + 6], CELL, "%.2f%%",
                 g->keys ? 100.0 * (double)g->keys_read / (double)g->keys : 0.0);
        for (size_t c = 2; c < NC; c++)
            cells[i * NC + c] = num[i * NC + c];
    }
    bool numeric[NC] = {false, false, true, true, true, true, true};
    lmc_report_table_data t = {.title = "Per model and cache_salt",
                               .id = "groups",
                               .columns = cols,
                               .n_columns = NC,
                               .cells = cells,
                               .n_rows = n,
                               .numeric = numeric};
    lmc_report_table(r, &t);
out:
    free(num);
    free(cells);
}

static void curve(lmc_report *r, const lmc_analyze_result *res)
{
    const lmc_mrc_result *m = &res->mrc;
    size_t n = m->n_points;
    double *x = malloc((n + 2) * sizeof(*x)), *y = malloc((n + 2) * sizeof(*y));
    double *e = malloc((n + 2) * sizeof(*e));
    double *rx = malloc((n + 2) * sizeof(*rx)), *ry = malloc((n + 2) * sizeof(*ry));
    if (x == NULL || y == NULL || e == NULL || rx == NULL || ry == NULL)
        goto out;
    size_t n_req = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)m->points[i].capacity;
        y[i] = m->points[i].hit_rate;
        e[i] = m->points[i].error_bound;
        if (m->points[i].requested) {
            rx[n_req] = x[i];
            ry[n_req++] = y[i];
        }
    }
    double flat_x[2] = {n > 0 ? x[0] : 1, n > 0 ? x[n - 1] : 2};
    double flat_y[2] = {res->recorded_hit_rate, res->recorded_hit_rate};
    lmc_report_series s[3];
    size_t ns = 0;
    s[ns++] =
        (lmc_report_series){.name = m->exact ? "LRU, exact" : "LRU, sampled (band: error bound)",
                            .x = x,
                            .y = y,
                            .n = n,
                            .err = m->exact ? NULL : e};
    s[ns++] = (lmc_report_series){
        .name = "recorded hit rate", .x = flat_x, .y = flat_y, .n = 2, .dashed = true};
    if (n_req > 0)
        s[ns++] = (lmc_report_series){
            .name = "requested sizes", .x = rx, .y = ry, .n = n_req, .style = LMC_REPORT_POINTS};
    char caption[512];
    snprintf(caption, sizeof(caption),
             "Chunk hit rate of an LRU L1 of each capacity fed the keys looked up, in order "
             "(%s). A key's first access is a cold miss, so the curve levels off at %.2f%% "
             "once the L1 holds the footprint. A replay's L1 evicts in passes, refuses stores "
             "while full and counts the found prefix only: measured within 0.03 of this curve.",
             m->exact ? "exact, one pass" : "sampled by key hash", 100 * m->max_hit_rate);
    lmc_report_chart c = {
        .title = "Hit rate against L1 capacity (LRU miss-ratio curve)",
        .id = "mrc",
        .caption = caption,
        .x = {.label = "L1 capacity (log scale; 1 GiB = 2^30 bytes)",
              .scale = LMC_REPORT_LOG2,
              .format = LMC_REPORT_FMT_BYTES},
        .y = {.label = "chunk hit rate",
              .format = LMC_REPORT_FMT_PERCENT,
              .fixed = true,
              .min = 0,
              .max = 1},
        .series = s,
        .n_series = ns,
    };
    lmc_report_line_chart(r, &c);
out:
    free(x);
    free(y);
    free(e);
    free(rx);
    free(ry);
}

static void rates(lmc_report *r, const lmc_analyze_result *res)
{
    size_t n = res->n_buckets;
    double *t = malloc((n + 1) * sizeof(*t)), *q = malloc((n + 1) * sizeof(*q));
    double *k = malloc((n + 1) * sizeof(*k)), *rd = malloc((n + 1) * sizeof(*rd));
    if (t == NULL || q == NULL || k == NULL || rd == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        t[i] = (double)i * res->bucket_s;
        q[i] = (double)res->buckets[i].requests / res->bucket_s;
        k[i] = (double)res->buckets[i].keys / res->bucket_s;
        rd[i] = (double)res->buckets[i].keys_read / res->bucket_s;
    }
    char caption[160];
    snprintf(caption, sizeof(caption), "Buckets of %.4g s by each record's t_mono.", res->bucket_s);
    lmc_report_series sq = {
        .name = "requests (lookups)", .x = t, .y = q, .n = n, .style = LMC_REPORT_STEP};
    lmc_report_chart cq = {
        .title = "Request rate over time",
        .id = "request-rate",
        .caption = caption,
        .x = {.label = "time since the trace started", .format = LMC_REPORT_FMT_SECONDS},
        .y = {.label = "requests per second", .include_zero = true},
        .series = &sq,
        .n_series = 1,
    };
    lmc_report_line_chart(r, &cq);
    lmc_report_series sk[2] = {
        {.name = "keys looked up", .x = t, .y = k, .n = n, .style = LMC_REPORT_STEP},
        {.name = "keys read (recorded hits)", .x = t, .y = rd, .n = n, .style = LMC_REPORT_STEP},
    };
    lmc_report_chart ck = cq;
    ck.title = "Key rate over time";
    ck.id = "key-rate";
    ck.y.label = "keys per second";
    ck.series = sk;
    ck.n_series = 2;
    lmc_report_line_chart(r, &ck);
out:
    free(t);
    free(q);
    free(k);
    free(rd);
}

static void reuse(lmc_report *r, const lmc_analyze_result *res, bool bytes)
{
    const lmc_mrc_result *m = &res->mrc;
    const uint64_t *h = bytes ? m->reuse_bytes : m->reuse_keys;
    /* The buckets from the first to the last that hold anything, then the cold accesses. */
    unsigned first = LMC_MRC_REUSE_BUCKETS, end = 0;
    for (unsigned i = 0; i < LMC_MRC_REUSE_BUCKETS; i++) {
        if (h[i] > 0) {
            first = i < first ? i : first;
            end = i + 1;
        }
    }
    unsigned used = end > first ? end - first : 0;
    char(*labels)[48] = calloc(used + 1, sizeof(*labels));
    const char **lp = calloc(used + 1, sizeof(*lp));
    double *v = calloc(used + 1, sizeof(*v));
    if (labels == NULL || lp == NULL || v == NULL)
        goto out;
    for (unsigned i = 0; i < used; i++) {
        lmc_analyze_reuse_label(first + i, bytes, true, labels[i], sizeof(labels[i]));
        lp[i] = labels[i];
        v[i] = (double)h[first + i];
    }
    snprintf(labels[used], sizeof(labels[used]), "cold");
    lp[used] = labels[used];
    v[used] = (double)m->cold;
    lmc_report_bar_series s = {.name = NULL, .values = v};
    lmc_report_bars b = {
        .title = bytes ? "Reuse distance in bytes" : "Reuse distance in keys",
        .id = bytes ? "reuse-bytes" : "reuse-keys",
        .caption = bytes ? "Accesses by the bytes of the distinct keys accessed since the "
                           "previous access of the same key. A bar labelled X holds "
                           "distances from X up to 2X; an LRU L1 of C bytes hits an access "
                           "whose distance plus its own size fits in C. cold: first accesses."
                         : "Accesses by the number of distinct keys accessed since the "
                           "previous access of the same key. A bar labelled X holds "
                           "distances from X up to 2X (Ki = 1024); cold: first accesses.",
        .x_label = bytes ? "distance (bytes)" : "distance (distinct keys)",
        .labels = lp,
        .n_buckets = used + 1,
        .y = {.label = "accesses"},
        .series = &s,
        .n_series = 1,
    };
    lmc_report_histogram(r, &b);
out:
    free(labels);
    free(lp);
    free(v);
}

char *lmc_analyze_format_html(const lmc_analyze_source *src, const lmc_analyze_result *res)
{
    char records[160], size[48], span[48], analysis[160], c[32];
    lmc_analyze_fmt_count(res->records, c, sizeof(c));
    snprintf(records, sizeof(records), "%s (level %s, trace schema %" PRId64 ")%s", c,
             res->level[0] ? res->level : "?", res->trace_schema_version,
             res->truncated ? "; the file ends in a cut record" : "");
    lmc_analyze_fmt_bytes(src->file_bytes, size, sizeof(size));
    snprintf(span, sizeof(span), "%.3f s", res->span_s);
    if (res->estimated)
        snprintf(analysis, sizeof(analysis),
                 "sampled (SHARDS, rate %.4g of the keys): ~ marks estimates", res->sample_rate);
    else
        snprintf(analysis, sizeof(analysis), "exact (every key)");
    lmc_report_kv rows[8];
    size_t n = 0;
    rows[n++] = (lmc_report_kv){"trace", src->path};
    if (src->digest != NULL && src->digest[0] != '\0')
        rows[n++] = (lmc_report_kv){"digest", src->digest};
    rows[n++] = (lmc_report_kv){"file size", size};
    rows[n++] = (lmc_report_kv){"records", records};
    rows[n++] = (lmc_report_kv){"span", span};
    if (res->sm_config_digest[0] != '\0')
        rows[n++] = (lmc_report_kv){"recorded config digest", res->sm_config_digest};
    rows[n++] = (lmc_report_kv){"analysis", analysis};
    if (src->command != NULL)
        rows[n++] = (lmc_report_kv){"command", src->command};
    lmc_report_header h = {.title = "Trace analysis",
                           .subtitle = "What the workload is, and how much L1 it needs under LRU",
                           .rows = rows,
                           .n_rows = n};
    lmc_report *r = lmc_report_begin(&h);
    if (r == NULL)
        return NULL;
    /* The answer first: how much L1 the workload needs. */
    lmc_report_section(r, "Miss-ratio curve", NULL);
    curve(r, res);
    lmc_report_section(r, "Workload",
                       "A request is one submit_prefetch_task (a lookup); its keys are the "
                       "accesses. The recorded hit rate is keys read "
                       "(read_prefetched_results) over keys looked up.");
    workload(r, res);
    groups(r, res);
    lmc_report_section(r, "Rates over time", NULL);
    rates(r, res);
    lmc_report_section(r, "Reuse distance", NULL);
    reuse(r, res, false);
    reuse(r, res, true);
    return lmc_report_end(r);
}
