/*
 * tbuckets.h -- values over time in buckets of an adaptive width.
 *
 * Owns: up to LMC_TBUCKETS_MAX buckets of the caller's element type (a
 * struct of counters), for times in seconds from a trace's start. The
 * width starts at LMC_TBUCKETS_FINEST_S and doubles -- merging neighbours
 * pairwise with the caller's merge function -- whenever a time lies past
 * the last bucket, so any span fits in a fixed array and one pass needs no
 * idea of the span beforehand. A non-finite or negative time counts in the
 * first bucket.
 *
 * The reported width (lmc_tbuckets_result) is 1 s for a span of 32 s to
 * 512 s; a shorter span gets the largest power-of-two fraction of a second
 * that still gives 32 buckets (at least the finest), a longer one the
 * pass's own width, the smallest power-of-two multiple of a second that
 * gives at most 512 buckets.
 *
 * Users: the rate buckets of `trace analyze` (analyze/analyze.h) and the
 * replay's time series (replay/series.h).
 *
 * Threads: none; a bucket set belongs to one thread.
 */
#ifndef LMC_CORE_TBUCKETS_H
#define LMC_CORE_TBUCKETS_H

#include <stddef.h>

#include "lmcache/status.h"

#define LMC_TBUCKETS_MAX 512
#define LMC_TBUCKETS_SHORT 32
#define LMC_TBUCKETS_FINEST_S (1.0 / 64)

/* Fold the bucket from into into (both elements of the caller's type). */
typedef void (*lmc_tbuckets_merge_fn)(void *into, const void *from);

typedef struct lmc_tbuckets {
    size_t elem; /* bytes per bucket */
    lmc_tbuckets_merge_fn merge;
    unsigned char *v; /* LMC_TBUCKETS_MAX buckets, zeroed, allocated at the first use */
    size_t n;         /* buckets in use: [0, n) x width_s covers every time seen */
    double width_s;
} lmc_tbuckets;

/* An empty set of buckets of elem bytes each (all-zero bytes is an empty bucket). */
void lmc_tbuckets_init(lmc_tbuckets *b, size_t elem, lmc_tbuckets_merge_fn merge);
void lmc_tbuckets_free(lmc_tbuckets *b);

/* The bucket of time t (widening the buckets when needed); NULL when memory runs out. */
void *lmc_tbuckets_at(lmc_tbuckets *b, double t);

/*
 * The buckets at the width reported for a span of span_s (see above):
 * *out a malloc'd array of *n elements the caller frees (NULL when there
 * are none), bucket i covering [i, i + 1) x *width_s. LMC_ERR_NOMEM.
 */
lmc_status lmc_tbuckets_result(const lmc_tbuckets *b, double span_s, double *width_s, void **out,
                               size_t *n);

#endif
