/*
 * pace.h -- how a replay keeps the recorded schedule: the pacers.
 *
 * Owns: the table of paces ("realtime", "virtual": the --pace choices) and
 * one pacer per replay, the seam between the driver's loop and time.
 *
 *   realtime  record i is due at origin + t_i (the monotonic clock); the
 *             pacer sleeps until 2 ms before, then spins, and measures the
 *             lateness of every dispatch (DESIGN.md 4.5). The
 *             StorageManager runs its threads.
 *   virtual   the StorageManager runs in manual mode (no threads) on a
 *             virtual clock that starts at 0; before record i the pacer
 *             advances it to t_i, event by event, collecting finished
 *             prefetches between events. Nothing sleeps or spins, and
 *             lateness does not apply.
 *
 * Both scale the eviction controllers' period with the time scale (1 s of
 * the recording's own time per pass; see lmc_replay_pace_runtime).
 *
 * The hooks a replay mode uses (the driver, and the engine mode, which
 * waits for a prefetch before it reads): lmc_replay_pacer_wait (hold
 * until a record's due time), lmc_replay_pacer_run_until (let background
 * work run until a condition holds: real time passes, or virtual time is
 * advanced through the pending events) and lmc_replay_pacer_drain (the end
 * of the replay).
 *
 * Threads: a pacer is used by the replay thread only.
 */
#ifndef LMC_REPLAY_PACE_H
#define LMC_REPLAY_PACE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/storage_manager.h"
#include "replay/dispatch.h"

typedef enum lmc_replay_pace {
    LMC_REPLAY_PACE_REALTIME = 0,
    LMC_REPLAY_PACE_VIRTUAL = 1,
} lmc_replay_pace;

/* The pace names, indexed by lmc_replay_pace: the one list (flag, help, messages). */
extern const char *const lmc_replay_pace_names[];
extern const size_t lmc_replay_pace_count;

/* "realtime" or "virtual" into *out; else LMC_ERR_INVALID "unknown pace 'x' (expected ...)". */
lmc_status lmc_replay_pace_parse(const char *name, lmc_replay_pace *out, lmc_error *err);

/*
 * The StorageManager runtime a pace needs at time_scale: the executor
 * (threads, or manual for virtual) and the eviction period, 1 s x
 * time_scale (the recorded workload saw one pass per second of its own
 * time; with threads the StorageManager raises it to at least 1 ms).
 */
void lmc_replay_pace_runtime(lmc_replay_pace pace, double time_scale, lmc_sm_runtime_options *out);

typedef struct lmc_replay_pacer_ops lmc_replay_pacer_ops;

typedef struct lmc_replay_pacer {
    const lmc_replay_pacer_ops *ops;
    lmc_replay_pace pace;
    lmc_storage_manager *sm; /* borrowed */
    lmc_replay_ctx *ctx;     /* borrowed: its pending prefetches are collected */
    uint64_t origin_ns;      /* realtime: the monotonic clock at start */
    /* Non-NULL: a realtime wait ends early once *stop is non-zero (Ctrl-C). */
    const volatile sig_atomic_t *stop;
    /*
     * A realtime wait also collects finished work while it waits (every
     * 0.5 ms while anything is pending): mode engine's requests go on
     * when their lookup answers, not at the next record. Virtual waits
     * always collect after each event.
     */
    bool poll_while_waiting;
} lmc_replay_pacer;

/* A pacer over sm (built with lmc_replay_pace_runtime for the same pace) and ctx. */
void lmc_replay_pacer_init(lmc_replay_pacer *p, lmc_replay_pace pace, lmc_storage_manager *sm,
                           lmc_replay_ctx *ctx);

/* The schedule starts now: due times are measured from here. */
void lmc_replay_pacer_start(lmc_replay_pacer *p);

/*
 * Hold until the record due at due_ns after the start may be dispatched.
 * Returns whether lateness applies (realtime), with the dispatch's lateness
 * in *late_ns; false for virtual (*late_ns is 0). A realtime wait sleeps
 * in slices of at most 100 ms while p->stop is set, and returns at once
 * (lateness 0) when *p->stop becomes non-zero.
 */
bool lmc_replay_pacer_wait(lmc_replay_pacer *p, uint64_t due_ns, uint64_t *late_ns);

/*
 * Let background work run until done(ud) holds: realtime polls it every
 * 0.5 ms for at most timeout_ms; virtual advances the StorageManager's
 * clock event by event (collecting finished prefetches after each) until
 * it holds or nothing is pending. Returns done(ud) at the end.
 */
bool lmc_replay_pacer_run_until(lmc_replay_pacer *p, bool (*done)(void *ud), void *ud,
                                uint32_t timeout_ms);

/*
 * The end of a replay: collect every pending prefetch and let the stores
 * finish (each bounded by timeout_ms of real time), with a warning for
 * what is left.
 */
void lmc_replay_pacer_drain(lmc_replay_pacer *p, uint32_t timeout_ms);

#endif
