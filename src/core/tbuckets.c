/*
 * tbuckets.c -- values over time in buckets of an adaptive width (see
 * tbuckets.h).
 *
 * Owns the bucket array. Widening merges in place: bucket i of the new
 * width is the fold of buckets [i f, (i + 1) f) of the old, and since
 * i <= i f the fold only ever overwrites buckets already consumed.
 *
 * Threads: none.
 */
#include "core/tbuckets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void lmc_tbuckets_init(lmc_tbuckets *b, size_t elem, lmc_tbuckets_merge_fn merge)
{
    memset(b, 0, sizeof(*b));
    b->elem = elem;
    b->merge = merge;
    b->width_s = LMC_TBUCKETS_FINEST_S;
}

void lmc_tbuckets_free(lmc_tbuckets *b)
{
    free(b->v);
    b->v = NULL;
    b->n = 0;
}

/* Merge n buckets of in, factor at a time, into out (which may be in); returns the count. */
static size_t merge_by(const lmc_tbuckets *b, const unsigned char *in, size_t n, size_t factor,
                       unsigned char *out)
{
    size_t m = (n + factor - 1) / factor;
    for (size_t i = 0; i < m; i++) {
        unsigned char *o = out + i * b->elem;
        memmove(o, in + i * factor * b->elem, b->elem);
        for (size_t j = i * factor + 1; j < n && j < (i + 1) * factor; j++)
            b->merge(o, in + j * b->elem);
    }
    return m;
}

void *lmc_tbuckets_at(lmc_tbuckets *b, double t)
{
    double idx = isfinite(t) && t > 0 ? floor(t / b->width_s) : 0;
    while (idx >= LMC_TBUCKETS_MAX) {
        if (b->v != NULL) {
            size_t m = merge_by(b, b->v, b->n, 2, b->v);
            memset(b->v + m * b->elem, 0, (b->n - m) * b->elem);
            b->n = m;
        }
        b->width_s *= 2;
        idx = floor(t / b->width_s);
    }
    size_t i = (size_t)idx;
    if (b->v == NULL && (b->v = calloc(LMC_TBUCKETS_MAX, b->elem)) == NULL)
        return NULL;
    if (i >= b->n)
        b->n = i + 1; /* the buckets past the old n are still zero */
    return b->v + i * b->elem;
}

/* The width reported for a span: at least the pass's own (see tbuckets.h). */
static double reported_width(double width, double span)
{
    if (width >= 1.0)
        return width;
    if (span >= LMC_TBUCKETS_SHORT)
        return 1.0;
    double w = width;
    while (w * 2 <= 1.0 && span / (w * 2) >= LMC_TBUCKETS_SHORT)
        w *= 2;
    return w;
}

lmc_status lmc_tbuckets_result(const lmc_tbuckets *b, double span_s, double *width_s, void **out,
                               size_t *n)
{
    *out = NULL;
    *n = 0;
    *width_s = reported_width(b->width_s, span_s);
    if (b->n == 0)
        return LMC_OK;
    unsigned char *v = malloc(b->n * b->elem);
    if (v == NULL)
        return LMC_ERR_NOMEM;
    size_t factor = (size_t)llround(*width_s / b->width_s);
    *n = merge_by(b, b->v, b->n, factor, v);
    *out = v;
    return LMC_OK;
}
