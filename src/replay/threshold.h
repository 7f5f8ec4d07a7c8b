/*
 * threshold.h -- trace compare's regression thresholds
 * (--max-regression PATTERN=LIMIT): how far a figure may move in the
 * direction that makes it worse.
 *
 * Owns: a parsed threshold (its spec, pattern and limit), the pattern
 * match over figure names, and the delta math every comparison uses.
 *
 *   PATTERN  a figure name (replay/compare.h: the figure's path in the
 *            result JSON) where '*' matches any run of characters, dots
 *            included. It matches a name when it matches the whole name
 *            or the part after any '.', so "chunk_hit_rate" is
 *            outcomes.figures.chunk_hit_rate, "p99_ms" the p99 of every op
 *            and "*hit_rate" all three hit rates.
 *   LIMIT    SIGN NUMBER ['%']. The sign says which way is worse: '+' an
 *            increase (latency, refusals), '-' a decrease (hit rates,
 *            agreement). NUMBER is finite and >= 0, in the figure's unit,
 *            or with '%' a percentage of |base|.
 *
 * A threshold is exceeded when the figure moved in its bad direction by
 * strictly more than the limit: "p99_ms=+10%" by more than a tenth of the
 * base value, "chunk_hit_rate=-0.01" down by more than 0.01, "+0" at all.
 * Relative to a base of 0, any move is infinitely large.
 *
 * Threads: none; a threshold is immutable once parsed.
 */
#ifndef LMC_REPLAY_THRESHOLD_H
#define LMC_REPLAY_THRESHOLD_H

#include <stdbool.h>

#include "lmcache/status.h"

typedef struct lmc_threshold {
    char *spec;    /* as given, for messages */
    char *pattern; /* the part before '=' */
    bool increase; /* '+': an increase is a regression; '-': a decrease is */
    bool relative; /* '%' */
    double limit;  /* >= 0; a fraction of |base| when relative (10% is 0.1) */
} lmc_threshold;

/*
 * Parse PATTERN=LIMIT into *out (freed with lmc_threshold_free).
 * LMC_ERR_INVALID with a message naming the spec and what is wrong with
 * it; LMC_ERR_NOMEM.
 */
lmc_status lmc_threshold_parse(const char *spec, lmc_threshold *out, lmc_error *err);
void lmc_threshold_free(lmc_threshold *t);

/* Does pattern match name (whole, or from just after any '.')? */
bool lmc_figure_pattern_match(const char *pattern, const char *name);

/* new - base over |base|: 0 when both are 0, +-INFINITY when only base is. */
double lmc_relative_change(double base, double new_);

/* Did the move from base to new exceed t? */
bool lmc_threshold_exceeded(const lmc_threshold *t, double base, double new_);

#endif
