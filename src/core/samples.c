/*
 * samples.c -- growable sample arrays and nearest-rank percentiles (samples.h).
 */
#include "core/samples.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

lmc_status lmc_samples_push(lmc_samples *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        double *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL)
            return LMC_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return LMC_OK;
}

double *lmc_samples_copy(const lmc_samples *s)
{
    if (s->n == 0)
        return NULL;
    double *v = malloc(s->n * sizeof(*v));
    if (v != NULL)
        memcpy(v, s->v, s->n * sizeof(*v));
    return v;
}

void lmc_samples_free(lmc_samples *s)
{
    free(s->v);
    *s = (lmc_samples)LMC_SAMPLES_INIT;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lmc_sort_doubles(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_double);
}

double lmc_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    if (p <= 0.0)
        return sorted[0];
    if (p >= 100.0)
        return sorted[n - 1];
    /* p * n first: 7/100.0 rounds up, and ceil((7/100.0)*100) would be 8. */
    double rank = ceil(p * (double)n / 100.0);
    if (rank < 1.0)
        rank = 1.0;
    if (rank > (double)n)
        rank = (double)n;
    return sorted[(size_t)rank - 1];
}

double lmc_median(const double *sorted, size_t n)
{
    if (n == 0)
        return 0.0;
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

double lmc_midmean(const double *sorted, size_t n)
{
    if (n < 4)
        return lmc_median(sorted, n);
    double sum = 0.0;
    for (size_t i = n / 4; i < n - n / 4; i++)
        sum += sorted[i];
    return sum / (double)(n - 2 * (n / 4));
}
