/*
 * mrc.c -- the LRU miss-ratio curve on a fixed capacity grid (see mrc.h).
 *
 * Owns the stack-distance stream, the sorted grid (log points merged with
 * the requested sizes), one row of hit counters over the grid per
 * replicate group (one row when exact), and the reuse histograms. An
 * access costs the stack-distance query, a binary search over the grid
 * and a few counter increments; everything else happens once, in
 * lmc_mrc_result_get.
 *
 * Threads: none.
 */
#include "analyze/mrc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/stackdist.h"

#define STEPS_PER_DOUBLING 8
#define MAX_DOUBLINGS 60

struct lmc_mrc {
    lmc_stackdist *sd;
    bool exact;
    double rate, inv_rate;
    uint64_t *caps; /* ascending, distinct */
    bool *requested;
    size_t n_caps;
    size_t groups;    /* rows of counts: 1 when exact */
    uint64_t *counts; /* [groups][n_caps + 1]: hits first possible at caps[i]; the last, never */
    uint64_t accesses[LMC_MRC_GROUPS], cold[LMC_MRC_GROUPS];
    uint64_t min_size, max_size;
    uint64_t reuse_keys[LMC_MRC_REUSE_BUCKETS], reuse_bytes[LMC_MRC_REUSE_BUCKETS];
};

unsigned lmc_mrc_reuse_bucket(uint64_t distance)
{
    return distance == 0 ? 0 : 64u - (unsigned)__builtin_clzll(distance);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The sorted, distinct grid: the log points and the requested sizes. */
static bool build_grid(lmc_mrc *m, const lmc_mrc_options *o)
{
    size_t n_log = STEPS_PER_DOUBLING * MAX_DOUBLINGS + 1;
    uint64_t *all = malloc((n_log + o->n_sizes) * sizeof(*all));
    if (all == NULL)
        return false;
    size_t n = 0;
    for (size_t k = 0; k < n_log; k++)
        all[n++] = (uint64_t)llround(exp2((double)k / STEPS_PER_DOUBLING));
    for (size_t i = 0; i < o->n_sizes; i++)
        all[n++] = o->sizes[i];
    qsort(all, n, sizeof(*all), cmp_u64);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (distinct == 0 || all[distinct - 1] != all[i])
            all[distinct++] = all[i];
    }
    m->caps = all;
    m->n_caps = distinct;
    m->requested = calloc(distinct, sizeof(*m->requested));
    if (m->requested == NULL)
        return false;
    for (size_t i = 0; i < o->n_sizes; i++) {
        const uint64_t *at = bsearch(&o->sizes[i], m->caps, m->n_caps, sizeof(*m->caps), cmp_u64);
        m->requested[at - m->caps] = true;
    }
    return true;
}

lmc_mrc *lmc_mrc_create(const lmc_mrc_options *o)
{
    lmc_mrc_options none = {0};
    if (o == NULL)
        o = &none;
    double rate = o->sample_rate == 0 ? 1.0 : o->sample_rate;
    if (!(rate > 0 && rate <= 1))
        return NULL;
    lmc_mrc *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->exact = rate == 1.0;
    m->rate = rate;
    m->inv_rate = 1.0 / rate;
    m->groups = m->exact ? 1 : LMC_MRC_GROUPS;
    m->min_size = UINT64_MAX;
    m->sd = lmc_stackdist_create();
    if (m->sd == NULL || !build_grid(m, o))
        goto fail;
    m->counts = calloc(m->groups * (m->n_caps + 1), sizeof(*m->counts));
    if (m->counts == NULL)
        goto fail;
    return m;
fail:
    lmc_mrc_destroy(m);
    return NULL;
}

void lmc_mrc_destroy(lmc_mrc *m)
{
    if (m == NULL)
        return;
    lmc_stackdist_destroy(m->sd);
    free(m->caps);
    free(m->requested);
    free(m->counts);
    free(m);
}

/*
 * The first grid index whose capacity is >= x (n_caps when none is).
 * Branch-free: the comparisons of a search over random distances would
 * mispredict about half the time.
 */
static inline size_t grid_index(const lmc_mrc *m, uint64_t x)
{
    const uint64_t *base = m->caps;
    size_t n = m->n_caps;
    while (n > 1) {
        size_t half = n / 2;
        base = base[half - 1] < x ? base + half : base;
        n -= half;
    }
    return (size_t)(base - m->caps) + (*base < x);
}

static inline uint64_t scaled(const lmc_mrc *m, uint64_t v)
{
    if (m->exact)
        return v;
    double s = (double)v * m->inv_rate + 0.5;
    return s >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)s;
}

lmc_status lmc_mrc_access(lmc_mrc *m, uint32_t id, uint64_t size, unsigned group)
{
    lmc_stackdist_access_result r;
    if (lmc_stackdist_access(m->sd, id, size, &r) != LMC_OK)
        return LMC_ERR_NOMEM;
    size_t g = m->exact ? 0 : group % LMC_MRC_GROUPS;
    m->accesses[g]++;
    if (r.size < m->min_size)
        m->min_size = r.size;
    if (r.size > m->max_size)
        m->max_size = r.size;
    if (r.cold) {
        m->cold[g]++;
        return LMC_OK;
    }
    uint64_t bytes = scaled(m, r.bytes);
    m->reuse_keys[lmc_mrc_reuse_bucket(scaled(m, r.keys))]++;
    m->reuse_bytes[lmc_mrc_reuse_bucket(bytes)]++;
    uint64_t need = bytes > UINT64_MAX - r.size ? UINT64_MAX : bytes + r.size;
    m->counts[g * (m->n_caps + 1) + grid_index(m, need)]++;
    return LMC_OK;
}

void lmc_mrc_prefetch_id(const lmc_mrc *m, uint32_t id)
{
    lmc_stackdist_prefetch_id(m->sd, id);
}

void lmc_mrc_prefetch_last(const lmc_mrc *m, uint32_t id)
{
    lmc_stackdist_prefetch_last(m->sd, id);
}

/* Linear interpolation of y over log(x) at c, on points (x ascending); clamped at the ends. */
static double interp_log(const uint64_t *x, const double *y, size_t n, double c)
{
    if (n == 0)
        return 0;
    if (c <= (double)x[0])
        return y[0];
    if (c >= (double)x[n - 1])
        return y[n - 1];
    size_t lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((double)x[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    double a = log((double)x[lo]), b = log((double)x[hi]);
    double t = b > a ? (log(c) - a) / (b - a) : 0;
    return y[lo] + t * (y[hi] - y[lo]);
}

/*
 * The curve over the whole grid (hit rate and error bound per point) into
 * the caller's arrays of n_caps.
 */
static void whole_curve(const lmc_mrc *m, double *rate, double *bound)
{
    uint64_t a_tot = 0, a[LMC_MRC_GROUPS];
    for (size_t g = 0; g < m->groups; g++) {
        a[g] = m->accesses[g];
        a_tot += a[g];
    }
    uint64_t h[LMC_MRC_GROUPS] = {0};
    for (size_t i = 0; i < m->n_caps; i++) {
        uint64_t h_tot = 0;
        for (size_t g = 0; g < m->groups; g++) {
            h[g] += m->counts[g * (m->n_caps + 1) + i];
            h_tot += h[g];
        }
        rate[i] = a_tot ? (double)h_tot / (double)a_tot : 0.0;
        bound[i] = 0.0;
        if (m->exact || a_tot == 0)
            continue;
        /* Random groups: var(h/a) ~ G/(G-1) sum_g (h_g - r a_g)^2 / A^2. */
        double ss = 0;
        for (size_t g = 0; g < m->groups; g++) {
            double z = (double)h[g] - rate[i] * (double)a[g];
            ss += z * z;
        }
        double G = (double)m->groups;
        bound[i] = 3.0 * sqrt(G / (G - 1) * ss) / (double)a_tot;
    }
    if (m->exact || a_tot == 0)
        return;
    /* The capacity uncertainty of a scaled distance, and what the curve does over it. */
    uint64_t keys = lmc_stackdist_ids(m->sd);
    double mean = keys ? (double)lmc_stackdist_bytes(m->sd) / (double)keys : 1.0;
    double q = (1.0 - m->rate) / m->rate;
    for (size_t i = 0; i < m->n_caps; i++) {
        double c = (double)m->caps[i];
        double k = c / mean > 1 ? c / mean : 1;
        /*
         * A distance over k objects has about k R sampled ones: its scaled
         * value is off by 3 sqrt(k (1-R)/R) objects at 3 sigma, and one of
         * 0 sampled objects may stand for up to ~6/R real ones ((1-R)^k
         * >= 0.3% for k <= 6/R), which dominates at small capacities.
         */
        double delta = mean * (3.0 * sqrt(k * q) + 6.0 * q);
        double lo = interp_log(m->caps, rate, m->n_caps, c > delta ? c - delta : 0);
        double hi = interp_log(m->caps, rate, m->n_caps, c + delta);
        double drift = hi - rate[i] > rate[i] - lo ? hi - rate[i] : rate[i] - lo;
        bound[i] += drift;
        if (bound[i] > 1)
            bound[i] = 1;
    }
}

lmc_status lmc_mrc_result_get(const lmc_mrc *m, lmc_mrc_result *out)
{
    memset(out, 0, sizeof(*out));
    out->exact = m->exact;
    out->sample_rate = m->rate;
    for (size_t g = 0; g < m->groups; g++) {
        out->accesses += m->accesses[g];
        out->cold += m->cold[g];
    }
    out->keys = lmc_stackdist_ids(m->sd);
    out->bytes = lmc_stackdist_bytes(m->sd);
    out->min_size = out->accesses ? m->min_size : 0;
    out->max_size = m->max_size;
    out->max_hit_rate =
        out->accesses ? (double)(out->accesses - out->cold) / (double)out->accesses : 0.0;
    memcpy(out->reuse_keys, m->reuse_keys, sizeof(out->reuse_keys));
    memcpy(out->reuse_bytes, m->reuse_bytes, sizeof(out->reuse_bytes));

    double *rate = malloc(m->n_caps * sizeof(*rate));
    double *bound = malloc(m->n_caps * sizeof(*bound));
    out->points = malloc(m->n_caps * sizeof(*out->points));
    if (rate == NULL || bound == NULL || out->points == NULL) {
        free(rate);
        free(bound);
        lmc_mrc_result_free(out);
        return LMC_ERR_NOMEM;
    }
    whole_curve(m, rate, bound);
    /* The range that says something: from below the smallest object to the footprint. */
    uint64_t footprint = scaled(m, out->bytes);
    size_t first = 0, last = 0;
    if (out->accesses > 0) {
        size_t at_min = grid_index(m, out->min_size);
        first = at_min > 0 ? at_min - 1 : 0;
        last = grid_index(m, footprint);
        if (last >= m->n_caps)
            last = m->n_caps - 1;
    }
    for (size_t i = 0; i < m->n_caps; i++) {
        bool in_range = out->accesses > 0 && i >= first && i <= last;
        if (!in_range && !m->requested[i])
            continue;
        out->points[out->n_points++] = (lmc_mrc_point){
            .capacity = m->caps[i],
            .hit_rate = rate[i],
            .error_bound = bound[i],
            .requested = m->requested[i],
        };
    }
    free(rate);
    free(bound);
    return LMC_OK;
}

void lmc_mrc_result_free(lmc_mrc_result *r)
{
    if (r == NULL)
        return;
    free(r->points);
    r->points = NULL;
    r->n_points = 0;
}

double lmc_mrc_result_hit_rate_at(const lmc_mrc_result *r, uint64_t capacity)
{
    double h = 0;
    for (size_t i = 0; i < r->n_points && r->points[i].capacity <= capacity; i++)
        h = r->points[i].hit_rate;
    return h;
}
