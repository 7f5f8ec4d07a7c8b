/*
 * series.h -- a replay's figures over time, for the HTML report.
 *
 * Owns: time buckets (core/tbuckets.h, the adaptive width of `trace
 * analyze`'s rate buckets) keyed by each record's recorded time (t_mono,
 * seconds from the trace's start, after the time rule), holding per
 * bucket:
 *   - the lookups (submit_prefetch_task outcomes) and their looked-up,
 *     L1-hit, L2-hit and (mode engine) whole-chunk-prefix keys, and the
 *     keys the trace's own reads read (reissued or not): the chunk, L1, L2,
 *     engine and recorded hit rates of that stretch of the trace;
 *   - the lateness of the records whose dispatch was timed (realtime
 *     pace): count, sum and maximum;
 *   - the L1 usage sampled after each record (the driver's sample, the one
 *     the peak comes from): count, sum and maximum of the bytes used, and
 *     the capacity.
 * The figures are the ones of replay/outcome.h, per bucket.
 *
 * Collection is opt-in: the CLI creates a series only for --html, feeds it
 * from the driver's record and L1 callbacks, and the report renders the
 * result (lmc_replay_series_get).
 *
 * Threads: none; a series belongs to the replay thread.
 */
#ifndef LMC_REPLAY_SERIES_H
#define LMC_REPLAY_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "replay/outcome.h"

typedef struct lmc_replay_series lmc_replay_series;

typedef struct lmc_replay_series_bucket {
    uint64_t records;                                   /* reported in the bucket */
    uint64_t lookups, looked_up_keys;                   /* submit_prefetch_task outcomes */
    uint64_t l1_hit_keys, l2_hit_keys, engine_hit_keys; /* of those keys */
    uint64_t recorded_read_keys; /* keys of the trace's read_prefetched_results.__enter__ */
    uint64_t timed;              /* records with a measured lateness */
    double lateness_sum_s, lateness_max_s;
    uint64_t l1_samples;
    double l1_used_sum_bytes;
    uint64_t l1_used_max_bytes, l1_capacity_bytes;
} lmc_replay_series_bucket;

typedef struct lmc_replay_series_result {
    double bucket_s;                   /* bucket i covers [i, i + 1) x bucket_s of t_mono */
    lmc_replay_series_bucket *buckets; /* malloc'd; NULL when n_buckets is 0 */
    size_t n_buckets;
} lmc_replay_series_result;

/* An empty series; NULL when memory runs out. */
lmc_replay_series *lmc_replay_series_create(void);
void lmc_replay_series_destroy(lmc_replay_series *s); /* NULL is fine */

/* One record as the driver reports it (replay/driver.h's on_record). LMC_ERR_NOMEM. */
lmc_status lmc_replay_series_record(lmc_replay_series *s, const lmc_replay_record_view *rec);

/* One L1 usage sample, taken after the record of time t_mono (driver.h's on_l1_usage). */
lmc_status lmc_replay_series_l1_usage(lmc_replay_series *s, double t_mono, uint64_t used,
                                      uint64_t capacity);

/*
 * The buckets at the width reported for the span of the times seen
 * (core/tbuckets.h); free with lmc_replay_series_result_free. LMC_ERR_NOMEM.
 */
lmc_status lmc_replay_series_get(const lmc_replay_series *s, lmc_replay_series_result *out);
void lmc_replay_series_result_free(lmc_replay_series_result *r);

#endif
