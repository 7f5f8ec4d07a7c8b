/*
 * output.c -- the terminal table, JSON and CSV of a trace analysis (see
 * output.h; the HTML report is html_report.c).
 *
 * Owns nothing. The terminal table shows the curve at the powers of two
 * (every other one when there would be more than 24 rows), the requested
 * sizes and the footprint; JSON and CSV carry every grid point of the
 * result. Strings from the trace (model names, salts, the path) go through
 * core/escape.h, so a trace cannot drive the terminal.
 *
 * Threads: none.
 */
#include "analyze/output.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/escape.h"
#include "core/file.h"
#include "core/json.h"
#include "core/strbuf.h"

#ifndef LMC_VERSION
#define LMC_VERSION "dev"
#endif

#define GIB 1073741824.0
#define MAX_CURVE_ROWS 24

/* ---------------------------------------------------------------------- */
/* Numbers and labels                                                      */
/* ---------------------------------------------------------------------- */

void lmc_analyze_fmt_count(uint64_t v, char *buf, size_t len)
{
    char digits[32];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 2 < len)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    if (len > 0)
        buf[o < len ? o : len - 1] = '\0';
}

void lmc_analyze_fmt_bytes(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", v);
        return;
    }
    double x = (double)v / 1024;
    size_t u = 0;
    while (x >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        x /= 1024;
        u++;
    }
    if (x == floor(x))
        snprintf(buf, len, "%.0f %s", x, units[u]);
    else
        snprintf(buf, len, "%.1f %s", x, units[u]);
}

void lmc_analyze_reuse_range(unsigned i, uint64_t *lo, uint64_t *hi)
{
    if (i == 0) {
        *lo = *hi = 0;
        return;
    }
    *lo = (uint64_t)1 << (i - 1);
    *hi = i >= 64 ? UINT64_MAX : ((uint64_t)1 << i) - 1;
}

void lmc_analyze_reuse_label(unsigned i, bool bytes, bool compact, char *buf, size_t len)
{
    uint64_t lo, hi;
    lmc_analyze_reuse_range(i, &lo, &hi);
    if (compact && bytes) {
        lmc_analyze_fmt_bytes(lo, buf, len);
    } else if (compact) {
        static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
        unsigned shift = i == 0 ? 0 : (i - 1) / 10;
        snprintf(buf, len, "%" PRIu64 "%s", lo >> (10 * shift), bin[shift]);
    } else if (i == 0) {
        snprintf(buf, len, "0");
    } else if (bytes) {
        char a[32], b[32];
        lmc_analyze_fmt_bytes(lo, a, sizeof(a));
        if (i >= 64)
            snprintf(b, sizeof(b), "16 EiB");
        else
            lmc_analyze_fmt_bytes(hi + 1, b, sizeof(b));
        snprintf(buf, len, "[%s, %s)", a, b);
    } else if (lo == hi) {
        snprintf(buf, len, "%" PRIu64, lo);
    } else if (hi < 100000000) { /* plain numbers up to 2^27 keys: no mixed styles in practice */
        snprintf(buf, len, "%" PRIu64 "-%" PRIu64, lo, hi);
    } else {
        snprintf(buf, len, "[2^%u, 2^%u)", i - 1, i);
    }
}

/*
 * A trace string for the terminal (core/escape.h: controls and invalid
 * bytes escaped), padded to width; cut with "..." past it (0: as it is).
 */
static void put_plain(lmc_strbuf *b, const char *s, size_t width)
{
    char buf[256];
    size_t n = lmc_escape(s, strlen(s), 0, buf, sizeof(buf));
    if (n >= sizeof(buf))
        n = sizeof(buf) - 1;
    bool cut = width > 0 && n > width;
    size_t take = cut ? width - 3 : n;
    lmc_strbuf_append(b, buf, take);
    if (cut)
        lmc_strbuf_puts(b, "...");
    for (size_t i = take + (cut ? 3 : 0); i < width; i++)
        lmc_strbuf_puts(b, " ");
}

static void row(lmc_strbuf *b, const char *label, const char *value)
{
    char l[64];
    snprintf(l, sizeof(l), "%s:", label);
    lmc_strbuf_printf(b, "  %-28s%s\n", l, value);
}

static double per_s(uint64_t n, double s)
{
    return s > 0 ? (double)n / s : 0.0;
}

/* "72.8/s", "5,737/s" */
static void fmt_rate(double v, char *buf, size_t len)
{
    if (v < 100) {
        snprintf(buf, len, "%.1f/s", v);
        return;
    }
    char c[28]; /* the longest count is 26 characters */
    lmc_analyze_fmt_count((uint64_t)llround(v), c, sizeof(c));
    snprintf(buf, len, "%s/s", c);
}

static void peaks(const lmc_analyze_result *r, double *req, double *keys)
{
    *req = *keys = 0;
    for (size_t i = 0; i < r->n_buckets; i++) {
        double q = (double)r->buckets[i].requests / r->bucket_s;
        double k = (double)r->buckets[i].keys / r->bucket_s;
        *req = q > *req ? q : *req;
        *keys = k > *keys ? k : *keys;
    }
}

/* The last reuse bucket holding anything, + 1 (0 when all are empty). */
static unsigned reuse_used(const uint64_t *h)
{
    unsigned n = 0;
    for (unsigned i = 0; i < LMC_MRC_REUSE_BUCKETS; i++) {
        if (h[i] > 0)
            n = i + 1;
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* Terminal                                                                */
/* ---------------------------------------------------------------------- */

static void term_header(lmc_strbuf *b, const lmc_analyze_source *src, const lmc_analyze_result *r)
{
    char v[256], c[32];
    lmc_strbuf_puts(b, "Trace analysis: ");
    put_plain(b, src->path, 0);
    lmc_strbuf_puts(b, "\n");
    if (src->digest != NULL && src->digest[0] != '\0')
        row(b, "digest", src->digest);
    lmc_analyze_fmt_count(r->records, c, sizeof(c));
    snprintf(v, sizeof(v), "%s (level %s, trace schema %" PRId64 "), over %.3f s", c,
             r->level[0] ? r->level : "?", r->trace_schema_version, r->span_s);
    row(b, "records", v);
    if (r->dropped > 0) {
        lmc_analyze_fmt_count(r->dropped, c, sizeof(c));
        snprintf(v, sizeof(v), "%s (the recorder dropped them: the figures miss them)", c);
        row(b, "dropped records", v);
    }
    if (r->undecodable > 0 || r->malformed > 0) {
        snprintf(v, sizeof(v), "%" PRIu64 " malformed, %" PRIu64 " whose args do not decode",
                 r->malformed, r->undecodable);
        row(b, "left out", v);
    }
    if (r->estimated)
        snprintf(v, sizeof(v), "sampled: SHARDS at rate %.4g of the keys; ~ marks estimates",
                 r->sample_rate);
    else
        snprintf(v, sizeof(v), "exact (every key)");
    row(b, "analysis", v);
}

static void term_workload(lmc_strbuf *b, const lmc_analyze_result *r)
{
    char v[256], c[32], d[32];
    const char *est = r->estimated ? "~" : "";
    lmc_strbuf_puts(b, "\nWorkload\n");
    lmc_analyze_fmt_count(r->requests, c, sizeof(c));
    row(b, "requests (lookups)", c);
    if (r->requests == 0)
        lmc_strbuf_puts(b, "  (no submit_prefetch_task record: nothing was looked up, so there is\n"
                           "  no key, reuse or curve to show)\n");
    lmc_analyze_fmt_count(r->keys, c, sizeof(c));
    snprintf(v, sizeof(v), "%s (%.1f per request)", c,
             r->requests ? (double)r->keys / (double)r->requests : 0.0);
    row(b, "keys looked up", v);
    lmc_analyze_fmt_count(r->unique_keys, c, sizeof(c));
    snprintf(v, sizeof(v), "%s%s", est, c);
    row(b, "unique keys", v);
    lmc_analyze_fmt_bytes(r->footprint_bytes, c, sizeof(c));
    lmc_analyze_fmt_count(r->footprint_bytes, d, sizeof(d));
    snprintf(v, sizeof(v), "%s%s (%s bytes)", est, c, d);
    row(b, "footprint", v);
    lmc_analyze_fmt_bytes(r->min_object_bytes, c, sizeof(c));
    lmc_analyze_fmt_bytes(r->max_object_bytes, d, sizeof(d));
    if (r->min_object_bytes == r->max_object_bytes)
        snprintf(v, sizeof(v), "%s", c);
    else
        snprintf(v, sizeof(v), "%s to %s", c, d);
    row(b, "object size", v);
    if (r->unsized_requests > 0) {
        snprintf(v, sizeof(v), "%" PRIu64 " lookups without a layout_desc (size 0)",
                 r->unsized_requests);
        row(b, "no object size", v);
    }
    if (r->n_buckets > 0) {
        double pq, pk;
        peaks(r, &pq, &pk);
        char m[40], p[40];
        fmt_rate(per_s(r->requests, r->span_s), m, sizeof(m));
        fmt_rate(pq, p, sizeof(p));
        snprintf(v, sizeof(v), "%s mean, %s peak (%.4g s buckets)", m, p, r->bucket_s);
        row(b, "request rate", v);
        fmt_rate(per_s(r->keys, r->span_s), m, sizeof(m));
        fmt_rate(pk, p, sizeof(p));
        snprintf(v, sizeof(v), "%s mean, %s peak", m, p);
        row(b, "key rate", v);
    }
}

static void term_hit_rate(lmc_strbuf *b, const lmc_analyze_result *r)
{
    char v[160], c[32], d[32];
    lmc_strbuf_puts(b, "\nRecorded hit rate\n");
    lmc_analyze_fmt_count(r->keys_read, c, sizeof(c));
    lmc_analyze_fmt_count(r->keys, d, sizeof(d));
    snprintf(v, sizeof(v), "%.2f%% (%s of %s)", 100 * r->recorded_hit_rate, c, d);
    row(b, "keys read / looked up", v);
}

static void term_groups(lmc_strbuf *b, const lmc_analyze_result *r, bool full)
{
    const char *est = r->estimated ? "~" : "";
    size_t mw = 5;
    for (size_t i = 0; i < r->n_groups; i++) {
        const char *m = r->groups[i].model_name;
        size_t l = lmc_escape(m, strlen(m), 0, NULL, 0); /* as printed */
        mw = l > mw ? l : mw;
    }
    mw = mw > 32 ? 32 : mw;
    lmc_strbuf_puts(b, "\nPer model / cache_salt\n  ");
    put_plain(b, "model", mw);
    lmc_strbuf_printf(b, "  %-12s %10s %12s %12s %11s%s\n", "cache_salt", "requests", "keys",
                      "unique", "footprint", full ? "   hit rate" : "");
    for (size_t i = 0; i < r->n_groups; i++) {
        const lmc_analyze_group *g = &r->groups[i];
        char q[32], k[32], u[40], f[40], t[32];
        lmc_analyze_fmt_count(g->requests, q, sizeof(q));
        lmc_analyze_fmt_count(g->keys, k, sizeof(k));
        lmc_analyze_fmt_count(g->unique_keys, t, sizeof(t));
        snprintf(u, sizeof(u), "%s%s", est, t);
        lmc_analyze_fmt_bytes(g->footprint_bytes, t, sizeof(t));
        snprintf(f, sizeof(f), "%s%s", est, t);
        lmc_strbuf_puts(b, "  ");
        put_plain(b, g->model_name, mw);
        lmc_strbuf_puts(b, "  ");
        put_plain(b, g->cache_salt[0] ? g->cache_salt : "(none)", 12);
        lmc_strbuf_printf(b, " %10s %12s %12s %11s", q, k, u, f);
        if (full)
            lmc_strbuf_printf(b, "   %7.2f%%",
                              g->keys ? 100.0 * (double)g->keys_read / (double)g->keys : 0.0);
        lmc_strbuf_puts(b, "\n");
    }
}

static bool power_of_two(uint64_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

static void term_curve(lmc_strbuf *b, const lmc_analyze_result *r)
{
    const lmc_mrc_result *m = &r->mrc;
    lmc_strbuf_printf(b, "\nLRU miss-ratio curve (chunk hit rate against L1 capacity; %s)\n",
                      m->exact ? "exact" : "sampled, with 3-sigma error bounds");
    if (m->accesses == 0) {
        lmc_strbuf_puts(b, "  (no key was looked up)\n");
        return;
    }
    size_t pow2 = 0;
    for (size_t i = 0; i < m->n_points; i++)
        pow2 += power_of_two(m->points[i].capacity);
    size_t every = pow2 > MAX_CURVE_ROWS ? (pow2 + MAX_CURVE_ROWS - 1) / MAX_CURVE_ROWS : 1;
    lmc_strbuf_printf(b, "  %-14s %9s%s\n", "L1 capacity", "hit rate",
                      m->exact ? "" : "     bound");
    size_t seen = 0;
    bool footprint_shown = false;
    for (size_t i = 0; i < m->n_points; i++) {
        const lmc_mrc_point *p = &m->points[i];
        /* The first point that holds the whole footprint: the curve is flat from there. */
        bool holds = !footprint_shown && p->capacity >= r->footprint_bytes;
        bool shown = p->requested || holds || i == 0;
        if (power_of_two(p->capacity) && p->capacity < r->footprint_bytes)
            shown = seen++ % every == 0 || shown;
        if (!shown)
            continue;
        footprint_shown = footprint_shown || holds;
        char c[32];
        lmc_analyze_fmt_bytes(p->capacity, c, sizeof(c));
        lmc_strbuf_printf(b, "  %c %-12s %8.2f%%", p->requested ? '*' : ' ', c, 100 * p->hit_rate);
        if (!m->exact)
            lmc_strbuf_printf(b, "  +- %5.2f%%", 100 * p->error_bound);
        if (p->requested)
            lmc_strbuf_puts(b, "   (requested)");
        if (holds)
            lmc_strbuf_puts(b, "   holds the footprint: the most LRU can hit");
        lmc_strbuf_puts(b, "\n");
    }
    char n[32];
    lmc_analyze_fmt_count(m->accesses, n, sizeof(n));
    lmc_strbuf_printf(b, "  cold misses (first accesses): %.2f%% of %s%s accesses.\n",
                      100 * (1 - m->max_hit_rate), n, m->exact ? "" : " sampled");
    lmc_strbuf_puts(b,
                    "  This is an ideal LRU. A replay's L1 evicts in passes (from the eviction\n"
                    "  watermark, a ratio of its keys), refuses stores while full and counts hits\n"
                    "  on the found prefix only; engine-mode replays with LRU measured within 0.03\n"
                    "  of this curve (docs/cli.md, trace analyze).\n");
}

static void term_reuse(lmc_strbuf *b, const lmc_analyze_result *r, bool bytes)
{
    const lmc_mrc_result *m = &r->mrc;
    const uint64_t *h = bytes ? m->reuse_bytes : m->reuse_keys;
    unsigned n = reuse_used(h);
    lmc_strbuf_printf(b, "\nReuse distance (%s since the previous access of the key)\n",
                      bytes ? "distinct bytes" : "distinct keys");
    lmc_strbuf_printf(b, "  %-24s %12s %8s\n", bytes ? "distance (bytes)" : "distance (keys)",
                      "accesses", "share");
    double all = m->accesses ? (double)m->accesses : 1;
    for (unsigned i = 0; i < n; i++) {
        if (h[i] == 0)
            continue;
        char l[48], c[32];
        lmc_analyze_reuse_label(i, bytes, false, l, sizeof(l));
        lmc_analyze_fmt_count(h[i], c, sizeof(c));
        lmc_strbuf_printf(b, "  %-24s %12s %7.2f%%\n", l, c, 100 * (double)h[i] / all);
    }
    char c[32];
    lmc_analyze_fmt_count(m->cold, c, sizeof(c));
    lmc_strbuf_printf(b, "  %-24s %12s %7.2f%%\n", "cold (first access)", c,
                      100 * (double)m->cold / all);
}

char *lmc_analyze_format_terminal(const lmc_analyze_source *src, const lmc_analyze_result *r)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    bool full = r->mrc.points != NULL;
    term_header(&b, src, r);
    term_workload(&b, r);
    if (full)
        term_hit_rate(&b, r);
    term_groups(&b, r, full);
    if (full) {
        term_curve(&b, r);
        term_reuse(&b, r, false);
        term_reuse(&b, r, true);
    }
    return lmc_strbuf_finish(&b);
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                    */
/* ---------------------------------------------------------------------- */

/* Each setter takes ownership of its value even on failure; one check at the end. */
typedef struct jb {
    lmc_json *o;
    bool ok;
} jb;

static void set(jb *j, lmc_json *obj, const char *k, lmc_json *v)
{
    if (lmc_json_object_set(obj, k, v) != LMC_OK)
        j->ok = false;
}

static void push(jb *j, lmc_json *arr, lmc_json *v)
{
    if (lmc_json_array_append(arr, v) != LMC_OK)
        j->ok = false;
}

static lmc_json *ju(uint64_t v)
{
    return lmc_json_int(v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

static lmc_json *reuse_json(jb *j, const uint64_t *h)
{
    lmc_json *arr = lmc_json_array();
    unsigned n = reuse_used(h);
    for (unsigned i = 0; i < n && arr != NULL; i++) {
        uint64_t lo, hi;
        lmc_analyze_reuse_range(i, &lo, &hi);
        lmc_json *o = lmc_json_object();
        set(j, o, "lo", ju(lo));
        set(j, o, "hi", ju(hi));
        set(j, o, "accesses", ju(h[i]));
        push(j, arr, o);
    }
    return arr;
}

char *lmc_analyze_format_json(const lmc_analyze_source *src, const lmc_analyze_result *r)
{
    jb j = {lmc_json_object(), true};
    if (j.o == NULL)
        return NULL;
    set(&j, j.o, "schema", lmc_json_string(LMC_ANALYZE_SCHEMA));
    set(&j, j.o, "schema_version", lmc_json_int(LMC_ANALYZE_SCHEMA_VERSION));
    lmc_json *tool = lmc_json_object();
    set(&j, tool, "name", lmc_json_string("lmcache"));
    set(&j, tool, "version", lmc_json_string(LMC_VERSION));
    set(&j, j.o, "tool", tool);

    lmc_json *t = lmc_json_object();
    set(&j, t, "path", lmc_json_string(src->path));
    set(&j, t, "digest",
        src->digest && src->digest[0] ? lmc_json_string(src->digest) : lmc_json_null());
    set(&j, t, "bytes", ju(src->file_bytes));
    set(&j, t, "level", lmc_json_string(r->level));
    set(&j, t, "trace_schema_version", lmc_json_int(r->trace_schema_version));
    set(&j, t, "sm_config_digest",
        r->sm_config_digest[0] ? lmc_json_string(r->sm_config_digest) : lmc_json_null());
    set(&j, t, "records", ju(r->records));
    set(&j, t, "dropped_records", ju(r->dropped));
    set(&j, t, "malformed_records", ju(r->malformed));
    set(&j, t, "undecodable_records", ju(r->undecodable));
    set(&j, t, "truncated", lmc_json_bool(r->truncated));
    set(&j, t, "span_s", lmc_json_float(r->span_s));
    set(&j, j.o, "trace", t);

    lmc_json *an = lmc_json_object();
    set(&j, an, "exact", lmc_json_bool(!r->estimated));
    set(&j, an, "sample_rate", lmc_json_float(r->sample_rate));
    lmc_json *sizes = lmc_json_array();
    for (size_t i = 0; i < r->mrc.n_points; i++) {
        if (r->mrc.points[i].requested)
            push(&j, sizes, ju(r->mrc.points[i].capacity));
    }
    set(&j, an, "requested_sizes_bytes", sizes);
    set(&j, an, "command", src->command ? lmc_json_string(src->command) : lmc_json_null());
    set(&j, j.o, "analysis", an);

    lmc_json *w = lmc_json_object();
    set(&j, w, "requests", ju(r->requests));
    set(&j, w, "keys_looked_up", ju(r->keys));
    set(&j, w, "unique_keys", ju(r->unique_keys));
    set(&j, w, "footprint_bytes", ju(r->footprint_bytes));
    set(&j, w, "estimated", lmc_json_bool(r->estimated));
    set(&j, w, "object_bytes_min", ju(r->min_object_bytes));
    set(&j, w, "object_bytes_max", ju(r->max_object_bytes));
    set(&j, w, "unsized_requests", ju(r->unsized_requests));
    set(&j, w, "keys_read", ju(r->keys_read));
    set(&j, w, "recorded_hit_rate", lmc_json_float(r->recorded_hit_rate));
    set(&j, j.o, "workload", w);

    lmc_json *groups = lmc_json_array();
    for (size_t i = 0; i < r->n_groups; i++) {
        const lmc_analyze_group *g = &r->groups[i];
        lmc_json *o = lmc_json_object();
        set(&j, o, "model_name", lmc_json_string(g->model_name));
        set(&j, o, "cache_salt", lmc_json_string(g->cache_salt));
        set(&j, o, "requests", ju(g->requests));
        set(&j, o, "keys_looked_up", ju(g->keys));
        set(&j, o, "unique_keys", ju(g->unique_keys));
        set(&j, o, "footprint_bytes", ju(g->footprint_bytes));
        set(&j, o, "keys_read", ju(g->keys_read));
        set(&j, o, "recorded_hit_rate",
            lmc_json_float(g->keys ? (double)g->keys_read / (double)g->keys : 0.0));
        push(&j, groups, o);
    }
    set(&j, j.o, "groups", groups);

    lmc_json *rates = lmc_json_object();
    double pq, pk;
    peaks(r, &pq, &pk);
    set(&j, rates, "bucket_s", lmc_json_float(r->bucket_s));
    set(&j, rates, "mean_requests_per_s", lmc_json_float(per_s(r->requests, r->span_s)));
    set(&j, rates, "peak_requests_per_s", lmc_json_float(pq));
    set(&j, rates, "mean_keys_per_s", lmc_json_float(per_s(r->keys, r->span_s)));
    set(&j, rates, "peak_keys_per_s", lmc_json_float(pk));
    lmc_json *buckets = lmc_json_array();
    for (size_t i = 0; i < r->n_buckets; i++) {
        lmc_json *o = lmc_json_object();
        set(&j, o, "t_s", lmc_json_float((double)i * r->bucket_s));
        set(&j, o, "requests_per_s", lmc_json_float((double)r->buckets[i].requests / r->bucket_s));
        set(&j, o, "keys_per_s", lmc_json_float((double)r->buckets[i].keys / r->bucket_s));
        set(&j, o, "keys_read_per_s",
            lmc_json_float((double)r->buckets[i].keys_read / r->bucket_s));
        push(&j, buckets, o);
    }
    set(&j, rates, "buckets", buckets);
    set(&j, j.o, "rates", rates);

    const lmc_mrc_result *m = &r->mrc;
    lmc_json *reuse = lmc_json_object();
    set(&j, reuse, "accesses", ju(m->accesses));
    set(&j, reuse, "cold", ju(m->cold));
    set(&j, reuse, "keys", reuse_json(&j, m->reuse_keys));
    set(&j, reuse, "bytes", reuse_json(&j, m->reuse_bytes));
    set(&j, j.o, "reuse", reuse);

    lmc_json *mrc = lmc_json_object();
    set(&j, mrc, "policy", lmc_json_string("LRU"));
    set(&j, mrc, "exact", lmc_json_bool(m->exact));
    set(&j, mrc, "sample_rate", lmc_json_float(m->sample_rate));
    set(&j, mrc, "accesses", ju(m->accesses));
    set(&j, mrc, "cold_misses", ju(m->cold));
    set(&j, mrc, "max_hit_rate", lmc_json_float(m->max_hit_rate));
    lmc_json *points = lmc_json_array();
    for (size_t i = 0; i < m->n_points; i++) {
        const lmc_mrc_point *p = &m->points[i];
        lmc_json *o = lmc_json_object();
        set(&j, o, "capacity_bytes", ju(p->capacity));
        set(&j, o, "capacity_gib", lmc_json_float((double)p->capacity / GIB));
        set(&j, o, "hit_rate", lmc_json_float(p->hit_rate));
        set(&j, o, "error_bound", lmc_json_float(p->error_bound));
        set(&j, o, "requested", lmc_json_bool(p->requested));
        push(&j, points, o);
    }
    set(&j, mrc, "points", points);
    set(&j, j.o, "mrc", mrc);

    char *text = NULL;
    if (j.ok) {
        size_t len;
        char *dumped = lmc_json_dumps(j.o, 0, 2, &len);
        if (dumped != NULL && (text = realloc(dumped, len + 2)) != NULL) {
            text[len] = '\n';
            text[len + 1] = '\0';
        } else {
            free(dumped);
        }
    }
    lmc_json_free(j.o);
    return text;
}

/* ---------------------------------------------------------------------- */
/* CSV                                                                     */
/* ---------------------------------------------------------------------- */

static lmc_status write_text(const char *dir, const char *name, const char *text, lmc_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lmc_file_write_all(NULL, path, text, err);
}

static void csv_reuse(lmc_strbuf *b, const char *unit, const uint64_t *h)
{
    unsigned n = reuse_used(h);
    for (unsigned i = 0; i < n; i++) {
        uint64_t lo, hi;
        lmc_analyze_reuse_range(i, &lo, &hi);
        lmc_strbuf_printf(b, "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", unit, lo, hi, h[i]);
    }
}

lmc_status lmc_analyze_write_csv(const char *dir, const lmc_analyze_result *r, lmc_error *err)
{
    const lmc_mrc_result *m = &r->mrc;
    lmc_strbuf mrc = LMC_STRBUF_INIT, reuse = LMC_STRBUF_INIT, rates = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&mrc, "capacity_bytes,capacity_gib,hit_rate,error_bound,requested\n");
    for (size_t i = 0; i < m->n_points; i++) {
        const lmc_mrc_point *p = &m->points[i];
        lmc_strbuf_printf(&mrc, "%" PRIu64 ",%.9g,%.6f,%.6f,%d\n", p->capacity,
                          (double)p->capacity / GIB, p->hit_rate, p->error_bound,
                          p->requested ? 1 : 0);
    }
    lmc_strbuf_puts(&reuse, "unit,lo,hi,accesses\n");
    csv_reuse(&reuse, "keys", m->reuse_keys);
    csv_reuse(&reuse, "bytes", m->reuse_bytes);
    lmc_strbuf_printf(&reuse, "cold,,,%" PRIu64 "\n", m->cold);
    lmc_strbuf_puts(&rates, "t_s,requests_per_s,keys_per_s,keys_read_per_s\n");
    for (size_t i = 0; i < r->n_buckets; i++) {
        const lmc_analyze_bucket *k = &r->buckets[i];
        lmc_strbuf_printf(&rates, "%.6f,%.6f,%.6f,%.6f\n", (double)i * r->bucket_s,
                          (double)k->requests / r->bucket_s, (double)k->keys / r->bucket_s,
                          (double)k->keys_read / r->bucket_s);
    }
    char *texts[3] = {lmc_strbuf_finish(&mrc), lmc_strbuf_finish(&reuse),
                      lmc_strbuf_finish(&rates)};
    static const char *const names[3] = {"mrc.csv", "reuse.csv", "rates.csv"};
    lmc_status st = LMC_OK;
    for (int i = 0; i < 3 && st == LMC_OK; i++)
        st = texts[i] == NULL ? lmc_error_set(err, LMC_ERR_NOMEM, "CSV: out of memory")
                              : write_text(dir, names[i], texts[i], err);
    for (int i = 0; i < 3; i++)
        free(texts[i]);
    return st;
}
