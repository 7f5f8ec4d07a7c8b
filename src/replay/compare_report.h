/*
 * compare_report.h -- trace compare's output: a terminal report, or one
 * JSON document (--format json), documented in docs/cli.md.
 *
 * Owns nothing past a call. The terminal report has a header (the two
 * files, the trace check, what differs in config and how each replay ran,
 * the outcome digests, the --repeat runs), the table of figures (figure,
 * base, new, delta, relative delta, verdict; with --repeat a range column
 * per side), the first divergent record, and the result: which thresholds
 * were exceeded. By default the table leaves out figures that are equal
 * and those that follow the host more than the configuration (mean, min
 * and max latency, the replay's duration, lateness count, mean and mean
 * gap), except the hit rates and agreements, which are always shown, and
 * any figure a threshold names; `all` shows every figure.
 *
 * The JSON (schema "lmcache.trace_compare_result", version 1) holds every
 * figure whatever `all` says.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_REPLAY_COMPARE_REPORT_H
#define LMC_REPLAY_COMPARE_REPORT_H

#include <stdbool.h>

#include "replay/compare.h"
#include "replay/diverge.h"

#define LMC_COMPARE_RESULT_SCHEMA "lmcache.trace_compare_result"
#define LMC_COMPARE_RESULT_SCHEMA_VERSION 1

typedef struct lmc_compare_report_opts {
    bool all;                  /* the table lists every figure */
    const lmc_divergence *div; /* the first-divergence search's result; NULL: not searched */
    const char *div_note;      /* why it was not searched, or what stopped it; NULL: none */
} lmc_compare_report_opts;

/* The terminal report, malloc'd, ending in "\n"; NULL when memory runs out. */
char *lmc_compare_report_table(const lmc_compare *c, const lmc_compare_report_opts *o);

/* The JSON document with indent 2 and a final "\n", malloc'd; NULL when memory runs out. */
char *lmc_compare_report_json(const lmc_compare *c, const lmc_compare_report_opts *o);

#endif
