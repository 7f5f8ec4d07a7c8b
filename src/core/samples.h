/*
 * samples.h -- a growable array of measured values, sorting, and the one
 * percentile definition every report uses (replay stats, `lmcache bench
 * server`, the micro-benchmarks).
 *
 * Percentiles are nearest-rank: rank = ceil(p * N / 100) (multiplying
 * before dividing so whole ranks stay exact), result = sorted[max(rank,1)-1];
 * p <= 0 gives the minimum, p >= 100 the maximum, no samples gives 0. So
 * p50 of 1..100 is 50 and p90 of 1..10 is 9.
 *
 * The midmean is the mean of the middle half: sorted[n/4 .. n - n/4), so
 * a quarter of the values (rounded down) is dropped at each end; fewer than
 * 4 values give their median. The micro-benchmarks time single calls with
 * it: as robust to outliers as the p50, but where the clock ticks coarsely
 * it averages over the tick, while a p50 is always a whole number of ticks.
 *
 * Owns: an lmc_samples owns its array. Threads: none; the caller locks.
 */
#ifndef LMC_CORE_SAMPLES_H
#define LMC_CORE_SAMPLES_H

#include <stddef.h>

#include "lmcache/status.h"

typedef struct lmc_samples {
    double *v;
    size_t n, cap;
} lmc_samples;

#define LMC_SAMPLES_INIT                                                                           \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Append x; LMC_ERR_NOMEM leaves the samples as they were. */
lmc_status lmc_samples_push(lmc_samples *s, double x);
/* A malloc'd copy of the n values, or NULL when there are none (or no memory). */
double *lmc_samples_copy(const lmc_samples *s);
/* Free the array and zero s. */
void lmc_samples_free(lmc_samples *s);

/* Sort n values ascending, in place. */
void lmc_sort_doubles(double *v, size_t n);

/* Nearest-rank percentile of n sorted values (see above). */
double lmc_percentile(const double *sorted, size_t n, double p);

/* Median of n sorted values (the mean of the middle two when n is even); 0
 * when there are none. */
double lmc_median(const double *sorted, size_t n);

/* Midmean of n sorted values (see above); 0 when there are none. */
double lmc_midmean(const double *sorted, size_t n);

#endif
