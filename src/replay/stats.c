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
 * copy the samples under the mutex and sort and sum outside it, so a long
 * summary never stalls the dispatch thread. (The CSV and summary JSON that
 * render them are replay outputs: output_csv.c, output_summary.c.)
 *
 * Why the arithmetic looks the way it does:
 *   - The mean reproduces Python's statistics.fmean, which is math.fsum
 *     (an exactly rounded sum, Shewchuk's partials as in CPython's
 *     mathmodule.c) divided by n. A naive or merely compensated sum can
 *     differ in the last bit, and the summary JSON prints float repr.
 *   - total_s reproduces the built-in sum() of CPython 3.12+ (Neumaier
 *     compensation) divided by 1000, which is what _stats.py computes.
 *   - A recording that cannot allocate drops its sample: record() has no
 *     way to fail, and losing one sample is better than losing the replay.
 */
#include "replay/stats.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/samples.h"

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

double lmc_replay_stats_start_s(lmc_replay_stats *s)
{
    pthread_mutex_lock(&s->mu);
    double t = s->has_start ? s->start_s : 0.0;
    pthread_mutex_unlock(&s->mu);
    return t;
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

double *lmc_replay_stats_samples_ms(lmc_replay_stats *s, const char *qualname, size_t *n)
{
    *n = 0;
    double *v = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n_buckets; i++) {
        if (strcmp(s->buckets[i].qualname, qualname) == 0) {
            if ((v = lmc_samples_copy(&s->buckets[i].ms)) != NULL)
                *n = s->buckets[i].ms.n;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return v;
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

lmc_status lmc_replay_stats_summarize(lmc_replay_stats *s, lmc_op_stats **out, size_t *n_out)
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
    if (lmc_replay_stats_summarize(s, out, &n) != LMC_OK)
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
