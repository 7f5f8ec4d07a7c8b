/*
 * repeat.h -- the spread of a replay's figures over --repeat runs.
 *
 * Owns: every number of each run's result (the numeric leaves of its
 * result JSON under duration_s, trace.records, outcomes, ops and
 * lateness, found by path), the runs' outcome digests, and their median,
 * min and max. The median of an even number of runs is the mean of the
 * middle two. A figure missing from some run (an op that one run never
 * saw) is summarised over the runs that have it.
 *
 * In the result JSON, "repeat" is {"runs": N, "outcome_digests": [...],
 * "digests_equal": bool, "figures": <the same shape as the result, each
 * number replaced by {"median", "min", "max"}>}.
 *
 * Threads: none; one thread at a time.
 */
#ifndef LMC_REPLAY_REPEAT_H
#define LMC_REPLAY_REPEAT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "lmcache/status.h"
#include "replay/report.h"

typedef struct lmc_spread {
    double median, min, max;
    size_t n; /* runs that had the figure */
} lmc_spread;

lmc_replay_repeat *lmc_replay_repeat_create(void); /* NULL on OOM */
void lmc_replay_repeat_destroy(lmc_replay_repeat *r);

/* Add one run's figures and outcome digest (run->repeat is ignored). LMC_ERR_NOMEM. */
lmc_status lmc_replay_repeat_add(lmc_replay_repeat *r, const lmc_replay_summary *run);

size_t lmc_replay_repeat_runs(const lmc_replay_repeat *r);
/* Run i's outcome digest ("" when it had none). */
const char *lmc_replay_repeat_digest(const lmc_replay_repeat *r, size_t i);
bool lmc_replay_repeat_digests_equal(const lmc_replay_repeat *r);

/*
 * The spread of the figure at path (its keys from the root of the result
 * JSON, e.g. {"outcomes", "figures", "chunk_hit_rate"}); false when no run
 * had it.
 */
bool lmc_replay_repeat_spread(const lmc_replay_repeat *r, const char *const *path, size_t depth,
                              lmc_spread *out);

/* The "repeat" object described above; NULL on OOM. */
lmc_json *lmc_replay_repeat_json(const lmc_replay_repeat *r);

#endif
