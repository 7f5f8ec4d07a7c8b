/*
 * timeline.h -- the replay's time rule: when each record is due.
 *
 * Owns: the rule that turns a record's recorded t_mono into the trace time
 * it is replayed at, and that time into a due offset at a --time-scale, so
 * that no trace can make a replay hang or the conversion overflow
 * (docs/trace-format.md, "Replay time rule"). A trace's own times are kept
 * exactly except when they are impossible or implausible:
 *
 *   1. t_mono not finite (NaN, inf) or negative: the record is due with its
 *      predecessor (at the latest time replayed so far).
 *   2. t_mono more than cap = max(LMC_REPLAY_GAP_FLOOR_S, the trace time
 *      accepted so far) after the latest time replayed so far: the record
 *      is due cap after it. What the next record says decides what the gap
 *      was. If the next t_mono is earlier than the moved one, the moved one
 *      was an outlier (a flipped exponent bit: 1e9 in a trace of minutes)
 *      and the trace goes on at its own times; if it is not earlier, the
 *      gap was real (an idle server) and every later time is moved earlier
 *      by what was cut, so the trace goes on at its own pace after a gap of
 *      cap. The time accepted so far counts only gaps the rule did not cut,
 *      so a replay takes at most (1 + k) times the trace's real span plus k
 *      minutes, k being the records moved by this rule.
 *   3. anything else, including a t_mono earlier than its predecessor's
 *      (due at once, as the schedule never runs backwards): as recorded
 *      (less what rule 2 cut before it).
 * A record moved by rule 1 or 2 is reported (the first ones each, with
 * offset, t_mono and the time used; then only counted).
 *
 * The due offset is trace time x scale in nanoseconds, saturating at
 * INT64_MAX ns (292 years): a float-to-integer conversion never overflows.
 * The scale itself must be in [LMC_REPLAY_MIN_TIME_SCALE,
 * LMC_REPLAY_MAX_TIME_SCALE]: below, records would be due within a
 * nanosecond of each other (so the replay is as fast as it can be at the
 * minimum already); above, a second of trace would take over eleven days.
 *
 * Threads: none; a timeline belongs to one replay.
 */
#ifndef LMC_REPLAY_TIMELINE_H
#define LMC_REPLAY_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "lmcache/status.h"

#define LMC_REPLAY_GAP_FLOOR_S 60.0
#define LMC_REPLAY_MIN_TIME_SCALE 1e-9
#define LMC_REPLAY_MAX_TIME_SCALE 1e6

typedef struct lmc_replay_timeline {
    double last;        /* the latest trace time replayed so far */
    double span;        /* the trace time the rule accepted (the sum of accepted forward gaps) */
    double shift;       /* what rule 2 cut from real gaps, taken off every later time */
    bool pending;       /* the last record was moved by rule 2; the next one tells why */
    double pending_t;   /* its t_mono */
    double pending_cut; /* what would be cut if its gap was real */
    uint64_t adjusted;  /* records the rule moved */
} lmc_replay_timeline;

void lmc_replay_timeline_init(lmc_replay_timeline *tl);

/*
 * The trace time (seconds) a record recorded at t_mono is replayed at, by
 * the rule above; offset (the frame's, for the message) and qualname only
 * serve the report of a moved record.
 */
double lmc_replay_timeline_next(lmc_replay_timeline *tl, double t_mono, uint64_t offset,
                                const char *qualname);

/* Nanoseconds after the replay's origin that trace time t is due at scale (saturating). */
uint64_t lmc_replay_due_offset_ns(double t, double scale);

/* A --time-scale value: finite and in [MIN, MAX], else LMC_ERR_INVALID naming the bound. */
lmc_status lmc_replay_check_time_scale(double scale, lmc_error *err);

/* Parse a --time-scale text with a clear message for every way it can be wrong. */
lmc_status lmc_replay_parse_time_scale(const char *text, double *out, lmc_error *err);

#endif
