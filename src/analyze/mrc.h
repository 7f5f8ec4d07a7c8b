/*
 * mrc.h -- the LRU miss-ratio curve and the reuse-distance histograms of
 * one access stream, exact or from a spatial sample.
 *
 * Owns: a stack-distance stream (analyze/stackdist.h), a grid of L1
 * capacities with a hit counter per grid point, and two log2 histograms of
 * reuse distance (in distinct keys and in distinct bytes).
 *
 * The grid is fixed before the pass, so every point is exact: 8 points per
 * doubling, round(2^(k/8)) bytes for k = 0 .. 480 (1 B to 1 EiB), merged
 * with the capacities the caller names. An access of size s at stack
 * distance d bytes is a hit at every capacity C >= d + s; it is counted
 * once, at the smallest such grid point, and the curve is the running sum.
 * A cold access (the key's first) is a miss everywhere.
 *
 * Sampling (SHARDS, Waldspurger et al., FAST'15, fixed rate): the caller
 * feeds only the accesses of keys whose hash falls in a fraction R of the
 * hash space, and every key's accesses or none. Distances among sampled
 * keys are about R times the real ones, so they are scaled by 1/R (the own
 * size is not). The hit rate at C is sampled hits over sampled accesses.
 * Its error bound, per point: 3 standard errors of that ratio from 16
 * replicate groups (the caller passes a group from hash bits independent of
 * the sampling bits; the groups are 16 independent samples of rate R/16,
 * and the spread of their hits around the ratio gives its variance), plus
 * the change of the curve over the capacity uncertainty of a scaled
 * distance: C +- s (3 sqrt(k (1-R)/R) + 6 (1-R)/R), with s the mean object
 * size and k = C / s the objects C holds (3 standard deviations of the
 * sampled count, plus the ~6/R objects a count of zero can hide). So the
 * bound is wide where C holds few sampled objects -- SHARDS cannot see
 * small caches -- and narrows as C grows. With R = 1 the curve is exact
 * and every bound is 0.
 *
 * Reuse histograms: bucket 0 holds distance 0, bucket i >= 1 holds
 * [2^(i-1), 2^i); sampled distances are scaled before bucketing.
 *
 * Threads: none.
 */
#ifndef LMC_ANALYZE_MRC_H
#define LMC_ANALYZE_MRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

#define LMC_MRC_GROUPS 16
#define LMC_MRC_REUSE_BUCKETS 65

typedef struct lmc_mrc lmc_mrc;

typedef struct lmc_mrc_options {
    double sample_rate;    /* (0, 1]; 1 (or 0) is exact */
    const uint64_t *sizes; /* capacities to evaluate besides the grid (bytes), any order */
    size_t n_sizes;
} lmc_mrc_options;

/* NULL when memory runs out or the options are bad (a rate outside (0, 1]). */
lmc_mrc *lmc_mrc_create(const lmc_mrc_options *o);
void lmc_mrc_destroy(lmc_mrc *m); /* NULL is fine */

/*
 * One (sampled) access to id, an id per distinct sampled key (see
 * stackdist.h); size is the key's object size at its first access; group
 * is the key's replicate group, 0 .. LMC_MRC_GROUPS-1 (ignored when
 * exact). LMC_ERR_NOMEM leaves the curve as it was.
 */
lmc_status lmc_mrc_access(lmc_mrc *m, uint32_t id, uint64_t size, unsigned group);

/* Prefetch hints for the next accesses (analyze/stackdist.h); no effect on results. */
void lmc_mrc_prefetch_id(const lmc_mrc *m, uint32_t id);
void lmc_mrc_prefetch_last(const lmc_mrc *m, uint32_t id);

typedef struct lmc_mrc_point {
    uint64_t capacity;  /* bytes */
    double hit_rate;    /* hits / accesses with an L1 of this many bytes */
    double error_bound; /* a bound on |hit_rate - exact| (0 when exact) */
    bool requested;     /* one of the options' sizes */
} lmc_mrc_point;

typedef struct lmc_mrc_result {
    bool exact;
    double sample_rate;
    uint64_t accesses; /* sampled accesses (all of them when exact) */
    uint64_t cold;     /* of which first accesses */
    uint64_t keys;     /* distinct sampled keys */
    uint64_t bytes;    /* their bytes (not scaled) */
    uint64_t min_size, max_size;
    double max_hit_rate; /* 1 - cold / accesses: the hit rate of an unbounded L1 */
    /*
     * Ascending capacity: the grid from its last point below the smallest
     * object to its first point at or above the (scaled) footprint, and
     * every requested size. Malloc'd; lmc_mrc_result_free.
     */
    lmc_mrc_point *points;
    size_t n_points;
    uint64_t reuse_keys[LMC_MRC_REUSE_BUCKETS];  /* distance in distinct keys */
    uint64_t reuse_bytes[LMC_MRC_REUSE_BUCKETS]; /* distance in distinct bytes */
} lmc_mrc_result;

lmc_status lmc_mrc_result_get(const lmc_mrc *m, lmc_mrc_result *out);
void lmc_mrc_result_free(lmc_mrc_result *r);

/* The hit rate at an arbitrary capacity: that of the largest point at or below it (0 below all). */
double lmc_mrc_result_hit_rate_at(const lmc_mrc_result *r, uint64_t capacity);

/* The log2 bucket of a distance (see above). */
unsigned lmc_mrc_reuse_bucket(uint64_t distance);

#endif
