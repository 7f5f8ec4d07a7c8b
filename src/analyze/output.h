/*
 * output.h -- the renderings of a trace analysis (analyze/analyze.h):
 * the terminal table, the JSON document, the CSV files and the HTML
 * report.
 *
 * Owns nothing between calls. The JSON schema (docs/cli.md gives every
 * field with its unit) is self-describing: "schema" names it
 * (LMC_ANALYZE_SCHEMA), "schema_version" counts incompatible changes
 * (fields are only ever added within a version), "tool" the program and
 * version, "trace" the file (path, digest, size, header fields, records),
 * "analysis" how it was analysed (exact or the sampling rate, the
 * requested sizes, the command), then "workload", "groups", "rates",
 * "reuse" and "mrc". Hit rates are fractions in [0, 1], sizes bytes, times
 * seconds.
 *
 * CSV files (comma-separated, a header line, "\n" line ends):
 *   mrc.csv    capacity_bytes,capacity_gib,hit_rate,error_bound,requested
 *   reuse.csv  unit,lo,hi,accesses -- unit "keys" or "bytes"; a bucket
 *              holds distances in [lo, hi]; a last row "cold,,,N" counts
 *              first accesses
 *   rates.csv  t_s,requests_per_s,keys_per_s,keys_read_per_s -- t_s is
 *              the bucket's start
 *
 * Threads: none.
 */
#ifndef LMC_ANALYZE_OUTPUT_H
#define LMC_ANALYZE_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "lmcache/status.h"

#define LMC_ANALYZE_SCHEMA "lmcache.trace_analyze"
#define LMC_ANALYZE_SCHEMA_VERSION 1

/* What the renderings say about where the result came from. */
typedef struct lmc_analyze_source {
    const char *path;
    const char *digest; /* trace/file_digest.h (XXH3-128 hex); NULL or "" when not computed */
    uint64_t file_bytes;
    const char *command; /* the command line; NULL for none */
} lmc_analyze_source;

/* Each returns malloc'd text the caller frees, or NULL when memory runs out. */
char *lmc_analyze_format_terminal(const lmc_analyze_source *src, const lmc_analyze_result *r);
char *lmc_analyze_format_json(const lmc_analyze_source *src, const lmc_analyze_result *r);
char *lmc_analyze_format_html(const lmc_analyze_source *src, const lmc_analyze_result *r);

/* mrc.csv, reuse.csv and rates.csv into dir (which must exist); errors name the file. */
lmc_status lmc_analyze_write_csv(const char *dir, const lmc_analyze_result *r, lmc_error *err);

/* "1,234,567" */
void lmc_analyze_fmt_count(uint64_t v, char *buf, size_t len);
/* "319.4 MiB" (1 decimal above 1 KiB, "512 B" below) */
void lmc_analyze_fmt_bytes(uint64_t v, char *buf, size_t len);
/* The bounds of reuse bucket i (analyze/mrc.h): [*lo, *hi]. */
void lmc_analyze_reuse_range(unsigned i, uint64_t *lo, uint64_t *hi);
/*
 * A bucket's label: "0", "1", "2-3", ..., "[2^20, 2^21)"; bytes: "[4 KiB,
 * 8 KiB)". Compact (a chart's): the lower bound only, "4", "2Ki", "4 KiB".
 */
void lmc_analyze_reuse_label(unsigned i, bool bytes, bool compact, char *buf, size_t len);

#endif
