/*
 * stats.c -- per-qualname latency statistics of a replay (see stats.h).
 *
 * Owns: a small array of buckets (qualname copy, latency samples in ms, an
 * error count), the lateness samples in microseconds, and the start/end
 * marks. Qualnames are few (the dispatcher knows six), so buckets are found
 * by a linear strcmp scan that starts at the last bucket hit; the replay
 * alternates between a handful of names, so the scan is usually one step.
 *
 * Threads: any thread may record; one mutex guards everything. Summaries
 * and exports copy the samples under the mutex and sort and sum outside it,
 * so a long summary never stalls the dispatch thread.
 *
 * Why the arithmetic looks the way it does:
 *   - The mean reproduces Python's statistics.fmean, which is math.fsum
 *     (an exactly rounded sum, Shewchuk's partials as in CPython's
 *     mathmodule.c) divided by n. A naive or merely compensated sum can
 *     differ in the last bit, and the JSON export prints float repr.
 *   - total_s reproduces the built-in sum() of CPython 3.12+ (Neumaier
 *     compensation) divided by 1000, which is what _stats.py computes.
 *   - A recording that cannot allocate drops its sample: record() has no
 *     way to fail, and losing one sample is better than losing the replay.
 */
#include "replay/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/samples.h"
#include "core/strbuf.h"

typedef struct bucket {
    char *qualname;
    lmc_samples ms;
    uint64_t errors;
} bucket;

struct lmc_replay_stats {
    pthread_mutex_t mu;
    bucket *buckets;
    size_t n_buckets, cap_buckets;
    size_t last_hit; /* index of the bucket found last; a hint only */
    lmc_samples late_us;
    bool has_start, has_end;
    double start_s, end_s;
};

/*
 * math.fsum: keep non-overlapping partials whose exact sum is the exact
 * running total, then round that total once. Non-overlapping partials of
 * doubles cover disjoint ranges of the ~2100-bit exponent span, so there
 * are never more than about 40 of them; 64 slots always suffice.
 */
static double exact_sum(const double *v, size_t n)
{
    double p[64];
    size_t np = 0;
    double naive = 0.0;
    for (size_t k = 0; k < n; k++)
        naive += v[k];
    if (!isfinite(naive))
        return naive; /* inf/nan (or overflow): fsum has no finite answer either */
    for (size_t k = 0; k < n; k++) {
        double x = v[k];
        size_t i = 0;
        for (size_t j = 0; j < np; j++) {
            double y = p[j];
            if (fabs(x) < fabs(y)) {
                double t = x;
                x = y;
                y = t;
            }
            double hi = x + y;
            double lo = y - (hi - x);
            if (lo != 0.0)
                p[i++] = lo;
            x = hi;
        }
        np = i;
        if (np < sizeof(p) / sizeof(p[0]))
            p[np++] = x;
    }
    double hi = 0.0;
    if (np > 0) {
        double lo = 0.0;
        hi = p[--np];
        /* Sum from the top down while the result stays exact. */
        while (np > 0) {
            double x = hi;
            double y = p[--np];
            hi = x + y;
            double yr = hi - x;
            lo = y - yr;
            if (lo != 0.0)
                break;
        }
        /*
         * Round half to even the correct way: if the discarded lo is half
         * an ulp and the remaining partials push in the same direction, the
         * true total is past the halfway point.
         */
        if (np > 0 && ((lo < 0.0 && p[np - 1] < 0.0) || (lo > 0.0 && p[np - 1] > 0.0))) {
            double y = lo * 2.0;
            double x = hi + y;
            double yr = x - hi;
            if (y == yr)
                hi = x;
        }
    }
    return hi;
}

/* CPython 3.12+ built-in sum() of floats: Neumaier compensation. */
static double compensated_sum(const double *v, size_t n)
{
    double s = 0.0, c = 0.0;
    for (size_t k = 0; k < n; k++) {
        double x = v[k];
        double t = s + x;
        if (fabs(s) >= fabs(x))
            c += (s - t) + x;
        else
            c += (x - t) + s;
        s = t;
    }
    if (c != 0.0 && isfinite(c))
        s += c;
    return s;
}

static double fmean(const double *v, size_t n)
{
    return n == 0 ? 0.0 : exact_sum(v, n) / (double)n;
}

lmc_replay_stats *lmc_replay_stats_create(void)
{
    lmc_replay_stats *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void lmc_replay_stats_destroy(lmc_replay_stats *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n_buckets; i++) {
        free(s->buckets[i].qualname);
        lmc_samples_free(&s->buckets[i].ms);
    }
    free(s->buckets);
    lmc_samples_free(&s->late_us);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The bucket of qualname, created if missing; NULL when memory runs out. Lock held. */
static bucket *bucket_get(lmc_replay_stats *s, const char *qualname)
{
    for (size_t k = 0; k < s->n_buckets; k++) {
        size_t i = (s->last_hit + k) % s->n_buckets;
        if (strcmp(s->buckets[i].qualname, qualname) == 0) {
            s->last_hit = i;
            return &s->buckets[i];
        }
    }
    if (s->n_buckets == s->cap_buckets) {
        size_t cap = s->cap_buckets ? s->cap_buckets * 2 : 8;
        bucket *b = realloc(s->buckets, cap * sizeof(*b));
        if (b == NULL)
            return NULL;
        s->buckets = b;
        s->cap_buckets = cap;
    }
    char *name = strdup(qualname);
    if (name == NULL)
        return NULL;
    bucket *b = &s->buckets[s->n_buckets];
    memset(b, 0, sizeof(*b));
    b->qualname = name;
    s->last_hit = s->n_buckets++;
    return b;
}

void lmc_replay_stats_record(lmc_replay_stats *s, const char *qualname, double latency_s,
                             bool failed)
{
    if (s == NULL || qualname == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    bucket *b = bucket_get(s, qualname);
    if (b != NULL) {
        if (failed)
            b->errors++;
        else
            (void)lmc_samples_push(&b->ms, latency_s * 1000.0);
    }
    pthread_mutex_unlock(&s->mu);
}

void lmc_replay_stats_record_lateness(lmc_replay_stats *s, double late_s)
{
    if (s == NULL)
        return;
    if (!(late_s > 0.0)) /* early, on time, or NaN: not late */
        late_s = 0.0;
    pthread_mutex_lock(&s->mu);
    (void)lmc_samples_push(&s->late_us, late_s * 1e6);
    pthread_mutex_unlock(&s->mu);
}

void lmc_replay_stats_mark_start(lmc_replay_stats *s, double wall_s)
{
    pthread_mutex_lock(&s->mu);
    s->start_s = wall_s;
    s->has_start = true;
    pthread_mutex_unlock(&s->mu);
}

void lmc_replay_stats_mark_end(lmc_replay_stats *s, double wall_s)
{
    pthread_mutex_lock(&s->mu);
    s->end_s = wall_s;
    s->has_end = true;
    pthread_mutex_unlock(&s->mu);
}

double lmc_replay_stats_duration_s(lmc_replay_stats *s)
{
    pthread_mutex_lock(&s->mu);
    double d = 0.0;
    if (s->has_start && s->has_end) {
        d = s->end_s - s->start_s;
        if (!(d > 0.0))
            d = 0.0;
    }
    pthread_mutex_unlock(&s->mu);
    return d;
}

void lmc_replay_stats_free_summary(lmc_op_stats *ops, size_t n)
{
    (void)n; /* qualnames belong to the collector */
    free(ops);
}

static int cmp_op_qualname(const void *a, const void *b)
{
    return strcmp(((const lmc_op_stats *)a)->qualname, ((const lmc_op_stats *)b)->qualname);
}

/*
 * Snapshot under the lock: qualname pointers (stable: each is its own
 * allocation that lives until destroy), error counts and sample copies.
 */
typedef struct snapshot {
    lmc_op_stats *ops;
    double **ms;
    size_t n;
} snapshot;

static void snapshot_free(snapshot *snap)
{
    if (snap->ms != NULL)
        for (size_t i = 0; i < snap->n; i++)
            free(snap->ms[i]);
    free(snap->ms);
    snap->ms = NULL;
}

static bool snapshot_take(lmc_replay_stats *s, snapshot *snap)
{
    memset(snap, 0, sizeof(*snap));
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    size_t n = s->n_buckets;
    if (n > 0) {
        snap->ops = calloc(n, sizeof(*snap->ops));
        snap->ms = calloc(n, sizeof(*snap->ms));
        if (snap->ops == NULL || snap->ms == NULL) {
            ok = false;
        } else {
            snap->n = n;
            for (size_t i = 0; i < n && ok; i++) {
                const bucket *b = &s->buckets[i];
                snap->ops[i].qualname = b->qualname;
                snap->ops[i].count = b->ms.n;
                snap->ops[i].error_count = b->errors;
                snap->ms[i] = lmc_samples_copy(&b->ms);
                if (b->ms.n > 0 && snap->ms[i] == NULL)
                    ok = false;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        snapshot_free(snap);
        free(snap->ops);
        snap->ops = NULL;
        snap->n = 0;
    }
    return ok;
}

static void op_fill(lmc_op_stats *op, double *ms)
{
    size_t n = (size_t)op->count;
    if (n == 0)
        return; /* calloc left every latency stat at 0.0 */
    lmc_sort_doubles(ms, n);
    op->mean_ms = fmean(ms, n);
    op->total_s = compensated_sum(ms, n) / 1000.0;
    op->p50_ms = lmc_percentile(ms, n, 50);
    op->p90_ms = lmc_percentile(ms, n, 90);
    op->p99_ms = lmc_percentile(ms, n, 99);
    op->min_ms = ms[0];
    op->max_ms = ms[n - 1];
}

/* Summary into *out, or LMC_ERR_NOMEM. */
static lmc_status summary_build(lmc_replay_stats *s, lmc_op_stats **out, size_t *n_out)
{
    snapshot snap;
    *out = NULL;
    *n_out = 0;
    if (!snapshot_take(s, &snap))
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < snap.n; i++)
        op_fill(&snap.ops[i], snap.ms[i]);
    snapshot_free(&snap);
    if (snap.n > 1)
        qsort(snap.ops, snap.n, sizeof(*snap.ops), cmp_op_qualname);
    *out = snap.ops;
    *n_out = snap.n;
    return LMC_OK;
}

size_t lmc_replay_stats_summary(lmc_replay_stats *s, lmc_op_stats **out)
{
    size_t n = 0;
    if (summary_build(s, out, &n) != LMC_OK)
        return 0; /* *out is NULL: as if nothing was recorded */
    return n;
}

lmc_lateness_stats lmc_replay_stats_lateness(lmc_replay_stats *s)
{
    lmc_lateness_stats st = {0};
    pthread_mutex_lock(&s->mu);
    double *v = lmc_samples_copy(&s->late_us);
    size_t n = s->late_us.n;
    pthread_mutex_unlock(&s->mu);
    if (v == NULL)
        return st; /* no samples (or no memory for a copy) */
    lmc_sort_doubles(v, n);
    st.count = n;
    st.p50_us = lmc_percentile(v, n, 50);
    st.p99_us = lmc_percentile(v, n, 99);
    st.max_us = v[n - 1];
    st.mean_us = fmean(v, n);
    free(v);
    return st;
}

/* ---- exports ---------------------------------------------------------- */

/*
 * One CSV field, Python csv QUOTE_MINIMAL with the default dialect: quote
 * when the field holds the delimiter, the quote character or a character
 * of the "\r\n" line terminator; inner quotes are doubled.
 */
static void csv_field(lmc_strbuf *b, const char *field)
{
    if (strpbrk(field, ",\"\r\n") == NULL) {
        lmc_strbuf_puts(b, field);
        return;
    }
    lmc_strbuf_append(b, "\"", 1);
    for (const char *p = field; *p; p++) {
        if (*p == '"')
            lmc_strbuf_append(b, "\"\"", 2);
        else
            lmc_strbuf_append(b, p, 1);
    }
    lmc_strbuf_append(b, "\"", 1);
}

/* Python's "%.6f" % x: as C, except that a NaN never carries a sign. */
static void csv_float(lmc_strbuf *b, double x)
{
    if (isnan(x))
        lmc_strbuf_puts(b, ",nan");
    else
        lmc_strbuf_printf(b, ",%.6f", x);
}

static lmc_status write_file(const char *path, const char *data, size_t len, lmc_error *err)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return lmc_error_set(err, LMC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    size_t w = fwrite(data, 1, len, f);
    int saved = errno;
    if (w != len) {
        fclose(f);
        return lmc_error_set(err, LMC_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
    }
    if (fclose(f) != 0)
        return lmc_error_set(err, LMC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return LMC_OK;
}

lmc_status lmc_replay_stats_write_csv(lmc_replay_stats *s, const char *path, lmc_error *err)
{
    lmc_op_stats *ops;
    size_t n;
    if (summary_build(s, &ops, &n) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_NOMEM, "CSV summary '%s': out of memory", path);
    lmc_strbuf b = {0};
    lmc_strbuf_puts(&b, "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r\n");
    for (size_t i = 0; i < n; i++) {
        const lmc_op_stats *o = &ops[i];
        csv_field(&b, o->qualname);
        lmc_strbuf_printf(&b, ",%" PRIu64 ",%" PRIu64, o->count, o->error_count);
        csv_float(&b, o->mean_ms);
        csv_float(&b, o->p50_ms);
        csv_float(&b, o->p90_ms);
        csv_float(&b, o->p99_ms);
        csv_float(&b, o->min_ms);
        csv_float(&b, o->max_ms);
        lmc_strbuf_puts(&b, "\r\n");
    }
    lmc_replay_stats_free_summary(ops, n);
    lmc_status st;
    if (b.oom)
        st = lmc_error_set(err, LMC_ERR_NOMEM, "CSV summary '%s': out of memory", path);
    else
        st = write_file(path, b.p, b.len, err);
    free(b.p);
    return st;
}

/* Set key on obj; false on any failure (the setter frees v then). */
static bool jset(lmc_json *obj, const char *key, lmc_json *v)
{
    return lmc_json_object_set(obj, key, v) == LMC_OK;
}

static lmc_json *op_json(const lmc_op_stats *o)
{
    lmc_json *v = lmc_json_object();
    bool ok = jset(v, "count", lmc_json_int((int64_t)o->count));
    ok &= jset(v, "errors", lmc_json_int((int64_t)o->error_count));
    ok &= jset(v, "mean_ms", lmc_json_float(o->mean_ms));
    ok &= jset(v, "p50_ms", lmc_json_float(o->p50_ms));
    ok &= jset(v, "p90_ms", lmc_json_float(o->p90_ms));
    ok &= jset(v, "p99_ms", lmc_json_float(o->p99_ms));
    ok &= jset(v, "min_ms", lmc_json_float(o->min_ms));
    ok &= jset(v, "max_ms", lmc_json_float(o->max_ms));
    if (!ok) {
        lmc_json_free(v);
        return NULL;
    }
    return v;
}

static lmc_json *lateness_json(const lmc_lateness_stats *l)
{
    lmc_json *v = lmc_json_object();
    bool ok = jset(v, "count", lmc_json_int((int64_t)l->count));
    ok &= jset(v, "max_us", lmc_json_float(l->max_us));
    ok &= jset(v, "mean_us", lmc_json_float(l->mean_us));
    ok &= jset(v, "p50_us", lmc_json_float(l->p50_us));
    ok &= jset(v, "p99_us", lmc_json_float(l->p99_us));
    if (!ok) {
        lmc_json_free(v);
        return NULL;
    }
    return v;
}

lmc_status lmc_replay_stats_write_json(lmc_replay_stats *s, const char *path, lmc_error *err)
{
    lmc_op_stats *ops;
    size_t n;
    if (summary_build(s, &ops, &n) != LMC_OK)
        return lmc_error_set(err, LMC_ERR_NOMEM, "JSON summary '%s': out of memory", path);
    lmc_lateness_stats late = lmc_replay_stats_lateness(s);
    lmc_json *root = lmc_json_object();
    lmc_json *jops = lmc_json_object();
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = jset(jops, ops[i].qualname, op_json(&ops[i]));
    lmc_replay_stats_free_summary(ops, n);
    if (!ok) {
        lmc_json_free(jops);
        jops = NULL;
    }
    ok &= jset(root, "duration_s", lmc_json_float(lmc_replay_stats_duration_s(s)));
    ok &= jset(root, "ops", jops);
    ok &= jset(root, "lateness", lateness_json(&late));
    char *text = NULL;
    size_t len = 0;
    lmc_status st;
    if (ok)
        text = lmc_json_dumps(root, LMC_JSON_SORT_KEYS, 2, &len);
    lmc_json_free(root);
    lmc_strbuf b = {0};
    if (text != NULL) {
        lmc_strbuf_append(&b, text, len);
        lmc_strbuf_append(&b, "\n", 1);
        free(text);
    }
    if (text == NULL || b.oom)
        st = lmc_error_set(err, LMC_ERR_NOMEM, "JSON summary '%s': out of memory", path);
    else
        st = write_file(path, b.p, b.len, err);
    free(b.p);
    return st;
}
