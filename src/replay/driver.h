/*
 * driver.h -- replays a trace against a fresh StorageManager.
 *
 * Owns: one replay run (seed section 9; spec/trace-format.md section 6.4):
 * the reader, a StorageManager built from the caller's config (the
 * header's config is never used to build it), the dispatcher and context,
 * the statistics, and the pacing.
 *
 * Pacing is an absolute schedule (DESIGN.md 4.5): record i is due at
 * origin + t_mono_i * time_scale. With --pace realtime the driver sleeps
 * until shortly before it is due, then spins, and measures how late every
 * dispatch starts; it never runs ahead of the schedule, and when the host
 * is slower the replay lags. With --pace virtual the StorageManager runs in
 * virtual time and the schedule is kept exactly, with no waiting
 * (replay/pace.h). Either way the eviction period is 1 s x time_scale.
 *
 * A schema 1 trace replays with a warning that cache_salt may be missing.
 * Records with no handler are skipped (with a warning, once per qualname);
 * the recorder's dropped-records marker is skipped silently and its count
 * reported. A failing handler counts the record as failed.
 *
 * Outcomes: every record goes through a reorder buffer
 * (replay/outcome_queue.h), so on_record, the totals and the outcome
 * digest see records in order with their final outcome; L1 usage is
 * sampled after every record for its peak; the StorageManager's own
 * counters are read once the replay has drained.
 *
 * Threads: run() on the caller's thread; the StorageManager has its own.
 */
#ifndef LMC_REPLAY_DRIVER_H
#define LMC_REPLAY_DRIVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/config.h"
#include "lmcache/status.h"
#include "replay/dispatch.h"
#include "replay/outcome.h"
#include "replay/pace.h"
#include "replay/stats.h"

/* Called for every record reported, in record order, once its outcome is final. */
typedef void (*lmc_replay_on_record)(const lmc_replay_record_view *rec, void *ud);

/* Called once at the end of a replay, after the drain, with the StorageManager still alive. */
typedef void (*lmc_replay_on_finish)(lmc_storage_manager *sm, void *ud);

typedef struct lmc_replay_options {
    double time_scale;           /* > 0 and finite; 1.0 = recorded speed */
    lmc_dispatcher *dispatcher;  /* NULL: the default six handlers */
    lmc_replay_on_record on_record;
    void *ud;
    /*
     * Non-NULL: the replay stops before the next record once *stop is
     * non-zero (a SIGINT handler sets it), and its result covers what was
     * replayed (interrupted set).
     */
    const volatile sig_atomic_t *stop;
    /* LMC_REPLAY_PACE_REALTIME (0, the default) or LMC_REPLAY_PACE_VIRTUAL. */
    lmc_replay_pace pace;
    /* NULL: none. Gets ud too. */
    lmc_replay_on_finish on_finish;
} lmc_replay_options;

typedef struct lmc_replay_result {
    uint64_t replayed;
    uint64_t skipped;   /* records with no handler */
    uint64_t malformed; /* records the reader could not decode (skipped too) */
    uint64_t failed;
    uint64_t recorder_dropped; /* from the trace's dropped-records marker */
    bool truncated;            /* the trace's tail was cut */
    bool interrupted;          /* options.stop ended the replay early */
    lmc_replay_stats *stats;   /* owned by the result */
    char level[32];
    char header_digest[65];
    char replay_digest[65];
    int64_t schema_version;
    int64_t format_version;
    char *header_config_json; /* the trace header's sm_config_json ("" when none); owned */
    char *replay_config_json; /* the replay StorageManager's config JSON; owned */
    /* The recorded times of the first and last record reported, and how many. */
    double first_t_mono, last_t_mono;
    uint64_t reported;
    uint64_t unfinished_prefetches; /* L2 results that never arrived */
    lmc_replay_totals totals;       /* outcomes of every record, plus the final counters */
    char outcome_digest[LMC_SHA256_HEX_LEN + 1];
    lmc_replay_pace pace; /* virtual: no lateness was measured */
} lmc_replay_result;

/* Check a --time-scale value: finite and > 0, else LMC_ERR_INVALID naming it. */
lmc_status lmc_replay_check_time_scale(double scale, lmc_error *err);

/*
 * Replay path against a StorageManager built from cfg. Opening errors
 * (file, header, config) come back as the status with a message; per-record
 * problems are counted in the result.
 */
lmc_status lmc_replay_run(const lmc_sm_config *cfg, const char *path,
                          const lmc_replay_options *opt, lmc_replay_result *res, lmc_error *err);

void lmc_replay_result_free(lmc_replay_result *res);

#endif
