/*
 * compare.h -- `trace compare`: two replay results side by side.
 *
 * Owns: a loaded result file (a replay result, or a sweep result -- a
 * top-level "results" array of replay results -- and the one of them
 * chosen), and a comparison: whether the two replayed the same trace, what
 * differs in their config, mode, pace and time scale, and one row per
 * figure with both values, the delta, the relative delta, the spreads
 * (--repeat), the thresholds that apply and the verdict.
 *
 * Figures are the numbers lmc_replay_result_each_figure walks (duration_s,
 * trace.records, outcomes, ops, lateness). A figure's name is its path in
 * the result JSON, keys joined by '.': outcomes.figures.chunk_hit_rate,
 * outcomes.ops.reserve_write.out_of_memory, lateness.p99_us, and
 * ops.<qualname>.p99_ms, whose short name leaves out the qualname's
 * "lmcache.v1.distributed.storage_manager.StorageManager." (ops.
 * reserve_write.p99_ms). A threshold pattern may use either. With
 * --repeat, a figure's value is the median over the runs and its spread
 * their [min, max] (the result's "repeat.figures").
 *
 * Choosing a result in a sweep (a selector): "N", its index from 0, or
 * conditions PATH=VALUE joined by ',', all of which must hold, each PATH a
 * lmc_json_at_path path in the result ("mode", "config.json.l1_size_gb")
 * or, failing that, in its StorageManager config "config.json"
 * ("l1_size_gb=4,eviction_policy=ARC"). VALUE is compared as the leaf
 * is: a string by its text, a number numerically, true/false/null.
 *
 * compare_side.c implements the result files, compare.c the comparison.
 *
 * Threads: none; one thread at a time.
 */
#ifndef LMC_REPLAY_COMPARE_H
#define LMC_REPLAY_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"
#include "lmcache/status.h"
#include "replay/threshold.h"

/* ---- a result file ------------------------------------------------------ */

typedef struct lmc_cmp_side {
    char *path;             /* the file as given */
    lmc_json *doc;          /* all of it */
    const lmc_json *result; /* the replay result compared: doc, or one of doc's "results" */
    long long index;        /* its index in a sweep; -1 for a replay result */
    size_t n_results;       /* a sweep's results; 0 for a replay result */
} lmc_cmp_side;

/*
 * Read and check path. select (NULL: none) chooses a sweep's result; a
 * sweep of more than one result needs one. A select given for a replay
 * result is an error when strict, and ignored otherwise (--config applies
 * to whichever input is a sweep). Errors name the file: LMC_ERR_NOT_FOUND
 * / LMC_ERR_IO when it cannot be read, LMC_ERR_FORMAT when it is not JSON
 * or not a replay or sweep result, LMC_ERR_UNSUPPORTED for a newer schema
 * version, LMC_ERR_INVALID for a selector that is malformed or chooses
 * none or several; LMC_ERR_NOMEM.
 */
lmc_status lmc_cmp_side_load(const char *path, const char *select, bool strict, lmc_cmp_side *out,
                             lmc_error *err);
/* The same for a file's text already read (len bytes); path names it in messages. */
lmc_status lmc_cmp_side_parse(const char *path, const char *text, size_t len, const char *select,
                              bool strict, lmc_cmp_side *out, lmc_error *err);
void lmc_cmp_side_free(lmc_cmp_side *s);

/* A label for messages: "base.json", or "sweep.json[3]" for a sweep's result. */
void lmc_cmp_side_label(const lmc_cmp_side *s, char *buf, size_t len);

/*
 * A path the result names (outputs.jsonl, trace.path) as this process can
 * open it: as written when it is absolute or exists from here, else beside
 * the result file when it exists there, else as written. Malloc'd; NULL
 * when memory runs out.
 */
char *lmc_cmp_side_resolve(const lmc_cmp_side *s, const char *p);

/* A string field of the result at a lmc_json_at_path path, or NULL. */
const char *lmc_cmp_side_string(const lmc_cmp_side *s, const char *path);

/* ---- the comparison ---------------------------------------------------- */

typedef enum lmc_cmp_trace {
    LMC_CMP_TRACE_SAME,      /* equal trace.digest */
    LMC_CMP_TRACE_DIFFERENT, /* both have one, and they differ */
    LMC_CMP_TRACE_UNKNOWN,   /* one or both have none */
} lmc_cmp_trace;

typedef enum lmc_cmp_verdict {
    LMC_CMP_EQUAL,     /* the same value */
    LMC_CMP_CHANGED,   /* different; no threshold applies */
    LMC_CMP_OK,        /* different, within every threshold that applies */
    LMC_CMP_REGRESSED, /* a threshold is exceeded */
    LMC_CMP_ONE_SIDED, /* in one result only (an op the other never saw) */
} lmc_cmp_verdict;

/* "equal", "changed", "ok", "REGRESSED", "one-sided". */
const char *lmc_cmp_verdict_name(lmc_cmp_verdict v);

typedef struct lmc_cmp_value {
    bool present;
    bool is_int;     /* a JSON int in the result (a count): shown without decimals */
    double v;        /* the value, or the median over --repeat runs */
    bool has_spread; /* --repeat: [min, max] over the runs */
    double min, max;
} lmc_cmp_value;

typedef struct lmc_cmp_figure {
    char *name;       /* the path in the result JSON, keys joined by '.' */
    char *short_name; /* ops.<method>.<stat>; NULL when it is the name */
    lmc_cmp_value base, new_;
    double delta; /* new - base (0 when one-sided) */
    double rel;   /* lmc_relative_change(base, new) */
    /* Both sides have a spread or a value, at least one a spread, and they overlap. */
    bool within_spread;
    size_t n_thresholds;           /* thresholds whose pattern matches it */
    const lmc_threshold *exceeded; /* the first one exceeded, or NULL */
    lmc_cmp_verdict verdict;
} lmc_cmp_figure;

/* A config field that differs: its path and each side's value (NULL: absent there). */
typedef struct lmc_cmp_config_diff {
    char *path;
    lmc_json *base, *new_;
} lmc_cmp_config_diff;

typedef struct lmc_compare {
    const lmc_cmp_side *base, *new_;
    lmc_cmp_trace trace;
    lmc_cmp_config_diff *diffs;
    size_t n_diffs;
    bool digests_equal; /* outcome_digest, both present and equal */
    lmc_cmp_figure *figs;
    size_t n_figs;
    const lmc_threshold *thresholds; /* borrowed from the caller */
    size_t n_thresholds;
    size_t n_exceeded; /* figures whose verdict is REGRESSED */
    /* Set by the caller: differing outcome digests fail the comparison too. */
    bool require_same_outcomes;
} lmc_compare;

/*
 * Compare base and new (both borrowed until lmc_compare_free) under the
 * thresholds (borrowed too). LMC_ERR_INVALID when a threshold's pattern
 * matches no figure of either result (naming it: a typo must not pass a CI
 * gate); LMC_ERR_NOMEM.
 */
lmc_status lmc_compare_run(const lmc_cmp_side *base, const lmc_cmp_side *new_,
                           const lmc_threshold *thresholds, size_t n_thresholds, lmc_compare *out,
                           lmc_error *err);
void lmc_compare_free(lmc_compare *c);

/* 1 when a threshold is exceeded (or the outcomes differ and must not), else 0. */
int lmc_compare_exit_status(const lmc_compare *c);

/* Does pattern match the figure's name or short name (lmc_figure_pattern_match)? */
bool lmc_cmp_figure_matches(const lmc_cmp_figure *f, const char *pattern);

#endif
