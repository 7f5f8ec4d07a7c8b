/*
 * driver.h -- replays a trace against a fresh StorageManager.
 *
 * Owns: one replay run (seed section 9; spec/trace-format.md section 6.4):
 * the reader, a StorageManager built from the caller's config (the
 * header's config is never used to build it), the dispatcher and context,
 * the statistics, and the pacing.
 *
 * Pacing is an absolute schedule (DESIGN.md 4.5): record i is due at
 * origin + t_mono_i * time_scale; the driver sleeps until shortly before it
 * is due, then spins, and measures how late every dispatch starts. It never
 * runs ahead of the schedule; when the host is slower the replay lags.
 *
 * A schema 1 trace replays with a warning that cache_salt may be missing.
 * Records with no handler, or whose args do not decode, are skipped (with a
 * warning, once per qualname); frames that are not records at all are
 * counted as malformed, apart; the recorder's dropped-records marker is
 * skipped silently and its count reported. A failing handler counts the
 * record as failed. Record times go through the time rule
 * (replay/timeline.h), so no trace can make a replay hang.
 *
 * Threads: run() on the caller's thread; the StorageManager has its own.
 */
#ifndef LMC_REPLAY_DRIVER_H
#define LMC_REPLAY_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/config.h"
#include "lmcache/status.h"
#include "replay/dispatch.h"
#include "replay/stats.h"
#include "replay/timeline.h" /* the time rule; lmc_replay_check_time_scale */

/*
 * One record as the driver reports it, after its dispatch (or its skip);
 * what per-record outputs (replay/output.h) and progress displays see.
 * The dropped-records marker is not reported.
 */
typedef struct lmc_replay_record_view {
    uint64_t index;       /* 1-based, in trace order, over the records reported */
    const char *qualname; /* valid during the callback only */
    double latency_s;     /* the handler's run time; 0.0 for a skipped record */
    bool failed;          /* the handler failed; also true for a skipped record */
    bool skipped;         /* no handler for the qualname */
} lmc_replay_record_view;

/* Called after every record reported. */
typedef void (*lmc_replay_on_record)(const lmc_replay_record_view *rec, void *ud);

typedef struct lmc_replay_options {
    double time_scale;           /* > 0 and finite; 1.0 = recorded speed */
    lmc_dispatcher *dispatcher;  /* NULL: the default six handlers */
    lmc_replay_on_record on_record;
    void *ud;
} lmc_replay_options;

typedef struct lmc_replay_result {
    uint64_t replayed;
    uint64_t skipped;   /* no handler, or args that do not decode (as LMCache skips) */
    uint64_t malformed; /* frames LMCache's reader rejects: not records, never replayed */
    uint64_t failed;
    uint64_t recorder_dropped; /* from the trace's dropped-records marker */
    bool truncated;            /* the trace's tail was cut */
    lmc_replay_stats *stats;   /* owned by the result */
    char level[32];
    char header_digest[65];
    char replay_digest[65];
    int64_t schema_version;
} lmc_replay_result;

/*
 * Replay path against a StorageManager built from cfg. Opening errors
 * (file, header, config) come back as the status with a message; per-record
 * problems are counted in the result.
 */
lmc_status lmc_replay_run(const lmc_sm_config *cfg, const char *path,
                          const lmc_replay_options *opt, lmc_replay_result *res, lmc_error *err);

void lmc_replay_result_free(lmc_replay_result *res);

#endif
