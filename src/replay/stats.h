/*
 * stats.h -- per-operation latency statistics of a replay.
 *
 * Owns: one bucket per qualname (latency samples in milliseconds plus an
 * error count), the start and end marks, and the lateness samples of the
 * paced dispatch (spec/trace-format.md section 7, plus lateness).
 *
 * Percentiles are nearest-rank (lmc_percentile, core/samples.h, declared
 * there and reached through this header too). Failed calls add to the error
 * count but contribute no latency sample; a bucket with only errors still
 * appears with zeros. The mean is an exactly rounded sum (like Python's
 * statistics.fmean).
 *
 * Threads: lmc_replay_stats_record is thread-safe (one mutex); summaries
 * take the same mutex.
 */
#ifndef LMC_REPLAY_STATS_H
#define LMC_REPLAY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/samples.h" /* lmc_percentile */
#include "lmcache/status.h"

typedef struct lmc_replay_stats lmc_replay_stats;

typedef struct lmc_op_stats {
    const char *qualname; /* owned by the collector */
    uint64_t count;       /* successful samples */
    uint64_t error_count;
    double total_s; /* sum of successful latencies, seconds */
    double mean_ms, p50_ms, p90_ms, p99_ms, min_ms, max_ms;
} lmc_op_stats;

typedef struct lmc_lateness_stats {
    uint64_t count;
    double p50_us, p99_us, max_us, mean_us;
} lmc_lateness_stats;

lmc_replay_stats *lmc_replay_stats_create(void);
void lmc_replay_stats_destroy(lmc_replay_stats *s);

/* One call: latency in seconds; failed adds to the error count only. */
void lmc_replay_stats_record(lmc_replay_stats *s, const char *qualname, double latency_s,
                             bool failed);
/* How late one dispatch started against its schedule, in seconds (>= 0). */
void lmc_replay_stats_record_lateness(lmc_replay_stats *s, double late_s);

void lmc_replay_stats_mark_start(lmc_replay_stats *s, double wall_s);
void lmc_replay_stats_mark_end(lmc_replay_stats *s, double wall_s);
/* The start mark (wall-clock seconds), or 0.0 when it is missing. */
double lmc_replay_stats_start_s(lmc_replay_stats *s);
/* max(0, end - start), or 0.0 when a mark is missing. */
double lmc_replay_stats_duration_s(lmc_replay_stats *s);

/*
 * A summary per qualname, sorted by qualname: *out is a malloc'd array the
 * caller frees with lmc_replay_stats_free_summary (NULL when *n is 0), *n
 * its length; LMC_ERR_NOMEM (*out NULL, *n 0) when memory runs out.
 */
lmc_status lmc_replay_stats_summarize(lmc_replay_stats *s, lmc_op_stats **out, size_t *n);

/* The same, returning the count; out of memory looks like no samples (0). */
size_t lmc_replay_stats_summary(lmc_replay_stats *s, lmc_op_stats **out);
void lmc_replay_stats_free_summary(lmc_op_stats *ops, size_t n);

lmc_lateness_stats lmc_replay_stats_lateness(lmc_replay_stats *s);

/*
 * A copy of qualname's latency samples in milliseconds, in recording order
 * (the caller frees it), *n their count; NULL (*n 0) when it has none or
 * memory runs out. For the report's latency CDFs.
 */
double *lmc_replay_stats_samples_ms(lmc_replay_stats *s, const char *qualname, size_t *n);

#endif
