/*
 * report.h -- the replay result as a terminal table or JSON.
 *
 * Owns: the formatting of spec/trace-format.md section 8.4: a table 64
 * columns wide, the title " Trace Replay Result " centred with '=' using
 * Python's str.center rule (when the padding is odd, the extra character
 * goes on the left only if both the padding and the width are odd),
 * sections " <label> " centred with '-', entries "label:" then the value
 * right-aligned to column 64 (at least one space), floats "%.2f", closed by
 * 64 '='. Sections: Overall (Trace level, Records replayed, Records
 * skipped, Records failed, Replay duration (s), Config digest -- "match
 * (<8 hex>)" or "MISMATCH (rec=<8>, run=<8>)", omitted when the header has
 * no digest), Per-Op Latency (ms) (for each qualname sorted: "<short>
 * count", "<short> mean", "<short> p50", "<short> p99", values rounded to 3
 * places; short = last dotted component, or "X.enter"/"X.exit" for
 * "...X.__enter__"/"...X.__exit__"), and our Pacing section (lateness
 * p50/p99/max in us, and the time scale; in virtual time a "Pace: virtual"
 * row and lateness N/A).
 *
 * JSON (--format json): {"title": "Trace Replay Result", "metrics":
 * {"overall": {...}, "ops": {"<short>_count": ...}, "pacing": {...}}} with
 * indent 2.
 *
 * The two renderings are the "table" and "json" replay outputs
 * (replay/output.h).
 *
 * Threads: none.
 */
#ifndef LMC_REPLAY_REPORT_H
#define LMC_REPLAY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "replay/outcome.h"
#include "replay/stats.h"

/*
 * The whole result of a replay, as every final output renders it (built
 * once by lmc_replay_summary_init in replay/output.h).
 */
typedef struct lmc_replay_repeat lmc_replay_repeat; /* replay/repeat.h */
typedef struct lmc_replay_series lmc_replay_series; /* replay/series.h */

typedef struct lmc_replay_summary {
    const char *level;
    uint64_t replayed, skipped, failed;
    uint64_t malformed; /* frames that are not records (a row only when > 0) */
    double duration_s;
    const char *header_digest; /* "" when the trace has none */
    const char *replay_digest;
    double time_scale;
    bool virtual_pace; /* --pace virtual: lateness does not apply */
    lmc_lateness_stats lateness;
    const lmc_op_stats *ops; /* sorted by qualname */
    size_t n_ops;

    /* What the outcome sections and the result JSON add (all optional: 0/NULL = unknown). */
    const lmc_replay_totals *totals; /* NULL: no outcome sections (a latency-only summary) */
    lmc_replay_figures figures;      /* of totals */
    const char *outcome_digest;
    uint64_t recorder_dropped, reported, unfinished_prefetches;
    bool truncated, interrupted;
    int64_t schema_version, format_version;
    double trace_span_s; /* last minus first recorded time of the records reported */
    double mean_gap_s;   /* trace_span_s / (reported - 1), times the time scale */
    double started_at_unix_s;
    const char *header_config_json, *replay_config_json;
    const char *const *config_diffs; /* paths where the two configs differ */
    size_t n_config_diffs;
    const char *trace_path, *mode, *pace;
    const char *trace_digest; /* the trace file's (trace/file_digest.h); NULL or "": none */
    /* Files this replay writes (NULL: not written), for the result's "outputs". */
    const char *jsonl_path, *csv_path, *outcomes_csv_path, *summary_json_path, *output_path;
    const lmc_replay_repeat *repeat; /* --repeat: spreads over the runs; NULL otherwise */

    /* What the HTML report adds (replay/output_html.c); NULL: left out of it. */
    lmc_replay_stats *stats;         /* the result's: the latency samples of the CDFs */
    const lmc_replay_series *series; /* --html: the figures over time (replay/series.h) */
    const char *command;             /* the command line, for the report's header */
} lmc_replay_summary;

/*
 * Did the replay fall behind its schedule? Lateness p99 over 1 ms, or over
 * 1% of the mean gap between records (when known). why gets a short
 * reason ("p99 2.31 ms > 1 ms") when it did.
 */
bool lmc_replay_behind_schedule(const lmc_replay_summary *s, char *why, size_t len);

/*
 * The generic renderer underneath (LMCache's Metrics/Section with the
 * "terminal" and "json" formatters), public so that any set of rows -- the
 * spec's abbreviated example, say -- renders exactly as the real table.
 */
typedef enum lmc_metric_kind {
    LMC_METRIC_NONE,  /* Python None: "N/A" in the table, null in JSON */
    LMC_METRIC_INT,   /* str(int) / JSON int */
    LMC_METRIC_FLOAT, /* "%.2f" in the table / float repr in JSON */
    LMC_METRIC_STR,   /* as is / JSON string */
} lmc_metric_kind;

typedef struct lmc_metric {
    const char *key;   /* machine key, used in JSON */
    const char *label; /* human label, used in the table */
    lmc_metric_kind kind;
    int64_t i;
    double f;
    const char *s;
} lmc_metric;

typedef struct lmc_metric_section {
    const char *key;   /* JSON key; NULL puts the entries at the top of "metrics" */
    const char *label; /* header line text; NULL for no header line */
    const lmc_metric *entries;
    size_t n_entries;
} lmc_metric_section;

/*
 * The terminal formatter's output followed by "\n" (what StreamHandler
 * writes): title centred with '=', each labelled section's " <label> "
 * centred with '-', one line per entry, then width '='. Malloc'd (caller
 * frees); NULL when memory runs out. Lengths are bytes, which equal
 * Python's character counts for ASCII text.
 */
char *lmc_metrics_format_terminal(const char *title, const lmc_metric_section *sections,
                                  size_t n_sections, size_t width);

/*
 * json.dumps({"title": title, "metrics": {...}}, indent=indent) + "\n",
 * keys in insertion order (the json formatter does not sort); a repeated
 * key keeps its first position and takes the last value, like a dict.
 * Malloc'd (caller frees); NULL when memory runs out.
 */
char *lmc_metrics_format_json(const char *title, const lmc_metric_section *sections,
                              size_t n_sections, int indent);

/* A value as the table writes it (Python's _format_value: "N/A", "%.2f", ...), in buf or m's. */
const char *lmc_metric_format_value(const lmc_metric *m, char *buf, size_t len);

/* Python's round(x, 3) (correctly rounded, ties to even on the exact value). */
double lmc_round3(double x);

/* The short op name of a qualname into buf ("reserve_write", "read_prefetched_results.enter"). */
const char *lmc_replay_short_name(const char *qualname, char *buf, size_t len);

/*
 * Python's str.center(width, fill) of text into buf (width+1 bytes). Text
 * of width bytes or more comes back unchanged, cut to width bytes (Python
 * would return it whole; the buffer cannot hold that).
 */
void lmc_center(const char *text, size_t width, char fill, char *buf);

/*
 * The terminal table as a malloc'd string ending in "\n" (caller frees);
 * NULL when memory runs out.
 */
char *lmc_replay_report_table(const lmc_replay_summary *s);

/*
 * The table's sections, as lmc_replay_report_table prints them, one call
 * of fn each, in order (for other renderings: the HTML report); the
 * sections are valid during the call. false when memory runs out.
 */
typedef void (*lmc_replay_section_fn)(const lmc_metric_section *section, void *ud);
bool lmc_replay_report_sections(const lmc_replay_summary *s, lmc_replay_section_fn fn, void *ud);

/*
 * The notes the table ends with, each "note: ..." wrapped at 78 columns,
 * as a malloc'd string ("" when there are none); NULL when memory runs out.
 */
char *lmc_replay_report_notes(const lmc_replay_summary *s);

/* Append one note in that form: "note: " + text wrapped at 78 columns, continuation
 * lines indented under the text, ending in "\n" (the sweep's notes use it too). */
void lmc_replay_note_append(lmc_strbuf *b, const char *text);

/*
 * The result JSON (replay/result_json.h: the one schema that --format json
 * and trace_replay_summary.json share) as a malloc'd string ending in "\n".
 */
char *lmc_replay_report_json(const lmc_replay_summary *s);

/*
 * The one summary line of the reads that missed ("N reads missed M keys: K
 * not in L1, P still loading from L2, W write-locked, R not read-locked, O
 * other") into buf;
 * returns snprintf's length.
 */
size_t lmc_replay_missed_summary(const lmc_replay_summary *s, char *buf, size_t len);

#endif
