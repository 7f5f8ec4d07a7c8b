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
 * Records with no handler, or whose args do not decode, are skipped (with a
 * warning, once per qualname); frames that are not records at all are
 * counted as malformed, apart; the recorder's dropped-records marker is
 * skipped silently and its count reported. A failing handler counts the
 * record as failed. Record times go through the time rule
 * (replay/timeline.h), so no trace can make a replay hang.
 *
 * Mode engine (replay/engine_mode.h) swaps the dispatcher for the engine
 * mode's and hooks its waiting requests into the context's polls, so the
 * same loop, pacers, reorder buffer, digest and outputs serve both modes;
 * in realtime the pacer then also polls while it waits for a record.
 *
 * Outcomes: every record goes through a reorder buffer
 * (replay/outcome_queue.h), so on_record, the totals and the outcome
 * digest see records in order with their final outcome; L1 usage is
 * sampled after every record for its peak (and handed to on_l1_usage when
 * set, for a report over time); the StorageManager's own
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
#include "replay/timeline.h" /* the time rule; lmc_replay_check_time_scale */
#include "trace/file_digest.h"

/*
 * What a replay does with the records (DESIGN.md 2):
 *   calls   reissue every recorded call (the seed's replay; the default)
 *   engine  each recorded lookup is a request that the server's own request
 *           logic serves (replay/engine_mode.h); the recorded reads and
 *           writes are not reissued
 */
typedef enum lmc_replay_mode {
    LMC_REPLAY_MODE_CALLS = 0,
    LMC_REPLAY_MODE_ENGINE = 1,
} lmc_replay_mode;

/* The mode names, indexed by lmc_replay_mode: the one list (flag, help, messages, results). */
extern const char *const lmc_replay_mode_names[];
extern const size_t lmc_replay_mode_count;

/* "calls" or "engine" into *out; else LMC_ERR_INVALID "unknown mode 'x' (expected ...)". */
lmc_status lmc_replay_mode_parse(const char *name, lmc_replay_mode *out, lmc_error *err);

/* Called for every record reported, in record order, once its outcome is final. */
typedef void (*lmc_replay_on_record)(const lmc_replay_record_view *rec, void *ud);

/* Called once at the end of a replay, after the drain, with the StorageManager still alive. */
typedef void (*lmc_replay_on_finish)(lmc_storage_manager *sm, void *ud);

/*
 * Called after every record with the L1 usage sampled then (the sample the
 * peak usage comes from: lmc_sm_l1_usage) and the record's time, in
 * dispatch order (which may run ahead of on_record's, which waits for
 * final outcomes).
 */
typedef void (*lmc_replay_on_l1_usage)(double t_mono, uint64_t used_bytes, uint64_t capacity_bytes,
                                       void *ud);

typedef struct lmc_replay_options {
    double time_scale;          /* > 0 and finite; 1.0 = recorded speed */
    lmc_dispatcher *dispatcher; /* NULL: the default six handlers */
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
    /* LMC_REPLAY_MODE_CALLS (0, the default) or LMC_REPLAY_MODE_ENGINE (dispatcher must be NULL).
     */
    lmc_replay_mode mode;
    /* NULL: none (the sample is taken for the peak either way). Gets ud too. */
    lmc_replay_on_l1_usage on_l1_usage;
} lmc_replay_options;

typedef struct lmc_replay_result {
    uint64_t replayed;     /* records the mode reissued (engine: the lookups it served) */
    uint64_t not_reissued; /* engine: the recorded reads and writes, kept for comparison */
    uint64_t skipped;      /* no handler, or args that do not decode (as LMCache skips) */
    uint64_t malformed;    /* frames LMCache's reader rejects: not records, never replayed */
    uint64_t failed;
    uint64_t recorder_dropped; /* from the trace's dropped-records marker */
    bool truncated;            /* the trace's tail was cut */
    bool interrupted;          /* options.stop ended the replay early */
    lmc_replay_stats *stats;   /* owned by the result */
    char level[32];
    /* The trace file's digest (trace/file_digest.h); "" when it has none (not a regular file). */
    char trace_digest[LMC_TRACE_DIGEST_HEX_LEN + 1];
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
    lmc_replay_mode mode;
} lmc_replay_result;

/*
 * Replay path against a StorageManager built from cfg. Opening errors
 * (file, header, config) come back as the status with a message; per-record
 * problems are counted in the result.
 */
lmc_status lmc_replay_run(const lmc_sm_config *cfg, const char *path, const lmc_replay_options *opt,
                          lmc_replay_result *res, lmc_error *err);

void lmc_replay_result_free(lmc_replay_result *res);

#endif
