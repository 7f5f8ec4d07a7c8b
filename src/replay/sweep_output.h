/*
 * sweep_output.h -- what a sweep reports: the figures of each
 * configuration's replay result, the table (terminal and CSV, from one
 * column list), the progress line, the sweep result JSON and the HTML
 * report (sweep_report.c).
 *
 * Owns nothing past a call: renderers return malloc'd text (NULL when
 * memory runs out).
 *
 * The hit rate of a configuration is its mode's: engine_hit_rate (the
 * whole-chunk found prefixes the requests read) in mode engine,
 * chunk_hit_rate in mode calls; L1 and L2 are l1_hit_rate and l2_hit_rate
 * (keys found in L1 at the lookup, loaded from L2), whose sum is the share
 * of keys found, at or above the engine hit rate (a key found after a
 * missing one is not read). Refused stores are engine_refused_keys or
 * refused_keys. The table lists the successful configurations by hit rate,
 * highest first (ties in grid order), then the failed ones.
 *
 * Threads: none.
 */
#ifndef LMC_REPLAY_SWEEP_OUTPUT_H
#define LMC_REPLAY_SWEEP_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "core/json.h"
#include "replay/sweep.h"
#include "replay/sweep_run.h"

#define LMC_SWEEP_RESULT_SCHEMA "lmcache.sweep_result"
#define LMC_SWEEP_RESULT_SCHEMA_VERSION 1

/* A finished sweep: configuration i is jobs[i] (grid order). Everything borrowed. */
typedef struct lmc_sweep {
    const char *trace_path;
    const char *command; /* the command line as given */
    const lmc_sweep_grid *grid;
    const lmc_sweep_job *jobs;
    size_t n;
    const char *mode, *pace;
    double time_scale;
    size_t parallel; /* --jobs */
    bool interrupted;
    double wall_s; /* the whole sweep */
} lmc_sweep;

/* The figures of one replay result the table shows (NaN where the result has none). */
typedef struct lmc_sweep_figures {
    double hit_rate, l1_hit_rate, l2_hit_rate;
    uint64_t evicted_keys, l2_stored_bytes, l2_loaded_bytes, refused_keys;
    double lookup_p50_ms, store_p50_ms, read_p50_ms;
    const char *digest; /* outcome_digest, borrowed from the result ("" when none) */
} lmc_sweep_figures;

void lmc_sweep_figures_of(const lmc_json *result, lmc_sweep_figures *out);

/*
 * The line printed as configuration index finishes: "[3/12] --l1-size-gb
 * 0.5 --eviction-policy ARC: hit 41.2% (L1 38.0%, L2 3.2%), 1.21 s, digest
 * 1a2b3c4d5e6f7a8b", or "...: FAILED: killed by signal 11 (...)" with the
 * stderr tail on the lines after it.
 */
char *lmc_sweep_progress_line(const lmc_sweep *s, size_t index, size_t done);

/* The terminal table (sorted; see above), with a header line per axis that does not vary. */
char *lmc_sweep_format_table(const lmc_sweep *s);
/* The CSV: a header line, one row per configuration in the table's order; "\n" line ends. */
char *lmc_sweep_format_csv(const lmc_sweep *s);
/* The sweep result tree (docs/cli.md); NULL when memory runs out. */
lmc_json *lmc_sweep_result_json(const lmc_sweep *s);
/* Its text, indent 2, with a final "\n". */
char *lmc_sweep_format_json(const lmc_sweep *s);

/*
 * The HTML report (report/html.h): hit rate against L1 size, one line per
 * combination of the other varying flags, beside lru's curve (the
 * analysis of the trace with the swept sizes requested; NULL: none), and
 * the table; the header names the trace and the command.
 */
char *lmc_sweep_format_html(const lmc_sweep *s, const lmc_analyze_result *lru);

/*
 * The table as cells, for the renderers: a column per varying axis (its
 * flag without "--"), then the figures; a row per configuration in the
 * table's order (order[r] is its index). csv: plain numbers, the full
 * digest, every axis and an index and status column.
 */
typedef struct lmc_sweep_table {
    char **columns; /* n_cols */
    char **cells;   /* n_rows x n_cols, row-major */
    bool *numeric;  /* per column */
    size_t *order;  /* n_rows */
    size_t n_rows, n_cols;
} lmc_sweep_table;

lmc_status lmc_sweep_table_build(const lmc_sweep *s, bool csv, lmc_sweep_table *t);
void lmc_sweep_table_free(lmc_sweep_table *t);

#endif
