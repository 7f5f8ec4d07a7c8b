/*
 * output.h -- the replay's outputs: one interface, one table of formats.
 *
 * Owns: the table of output formats and the outputs opened from it. A
 * format is a renderer with two optional parts: a per-record writer, which
 * sees every record as the replay runs (lmc_replay_record_view), and a
 * final renderer, which turns the whole result (lmc_replay_summary) into
 * text. An output is one format bound to one destination, a file or
 * stdout; the same format may be opened twice (the result table goes to
 * stdout and to --output).
 *
 * The formats (LMC_REPLAY_OUTPUT_FORMATS below; each in its own file):
 *
 *   name          what                                      default file
 *   table         LMCache's terminal result table, plus     (stdout)
 *                 outcomes and notes
 *   json          the result JSON (--format json)           (stdout)
 *   csv           per-qualname latency (LMCache's header)   trace_replay_ops.csv
 *   outcomes-csv  outcome counters and figures              trace_replay_outcomes.csv
 *   summary-json  the result JSON, as json                  trace_replay_summary.json
 *   jsonl         one JSON object per record, with its      (--jsonl-out PATH)
 *                 outcome
 *   html          a self-contained HTML report: latency     (--html PATH)
 *                 CDFs, figures over time (replay/series.h),
 *                 the table (output_html.c)
 *
 * When files are opened: a format with a per-record writer opens its file
 * at lmc_replay_output_open, so a bad path fails before the replay runs;
 * one with only a final renderer is checked there (its directory exists
 * and the file can be created and written; a file the check created is
 * removed again) and writes its file whole at lmc_replay_output_finish, so
 * a replay that fails leaves no file. Errors name the path, and the flag
 * that gave it when there is one: "cannot write --output 'x': No such file
 * or directory".
 *
 * Threads: an output is used by one thread at a time.
 */
#ifndef LMC_REPLAY_OUTPUT_H
#define LMC_REPLAY_OUTPUT_H

#include <stdio.h>

#include "lmcache/status.h"
#include "replay/driver.h"
#include "replay/report.h"

typedef struct lmc_replay_output_format {
    const char *name;         /* the table's key: "table", "csv", ... */
    const char *default_file; /* under --output-dir; NULL: stdout or a path given by a flag */
    const char *log_name;     /* non-NULL: log "<log_name> written to <path>" after a file */
    /* Write one record to f (NULL: the format has no per-record part). */
    void (*record)(FILE *f, const lmc_replay_record_view *rec);
    /* The final text, malloc'd, or NULL when memory runs out (NULL: no final part). */
    char *(*render)(const lmc_replay_summary *s);
} lmc_replay_output_format;

/*
 * The formats, in the order the table lists them. Each X(id) is defined
 * as `const lmc_replay_output_format lmc_replay_output_<id>` in its own
 * file; the declarations and the lookup table are derived from this list.
 */
#define LMC_REPLAY_OUTPUT_FORMATS(X)                                                               \
    X(table) X(json) X(csv) X(outcomes_csv) X(summary_json) X(jsonl) X(html)

#define LMC_REPLAY_OUTPUT_DECLARE(id) extern const lmc_replay_output_format lmc_replay_output_##id;
LMC_REPLAY_OUTPUT_FORMATS(LMC_REPLAY_OUTPUT_DECLARE)
#undef LMC_REPLAY_OUTPUT_DECLARE

/* The format called name, or NULL. */
const lmc_replay_output_format *lmc_replay_output_find(const char *name);
/* The i-th format of the table (NULL past the end), for listings. */
const lmc_replay_output_format *lmc_replay_output_at(size_t i);

typedef struct lmc_replay_output lmc_replay_output;

/*
 * An output of format f to path (NULL: stdout). flag names the option that
 * gave the path, for messages ("--jsonl-out"); NULL when it is a default
 * file. LMC_ERR_IO naming the path when its file cannot be created or
 * written; LMC_ERR_NOMEM.
 */
lmc_status lmc_replay_output_open(const lmc_replay_output_format *f, const char *path,
                                  const char *flag, lmc_replay_output **out, lmc_error *err);

/* One record, for formats with a per-record part (a no-op for the others). */
void lmc_replay_output_record(lmc_replay_output *o, const lmc_replay_record_view *rec);

/*
 * The end of the replay: render s (formats with a final part), write it,
 * close the file. LMC_ERR_IO naming the path when a write or the close
 * fails; LMC_ERR_NOMEM when rendering runs out of memory. Writes to
 * stdout are not checked (a closed pipe is the reader's choice).
 */
lmc_status lmc_replay_output_finish(lmc_replay_output *o, const lmc_replay_summary *s,
                                    lmc_error *err);

/* Close (without writing a final part if finish was not called) and free. NULL is fine. */
void lmc_replay_output_destroy(lmc_replay_output *o);

/*
 * The summary every final renderer sees, built once from a replay's
 * result: totals, duration, digests, lateness and the per-qualname stats
 * (which *s owns; free them with lmc_replay_summary_free). LMC_ERR_NOMEM
 * when the per-qualname summary cannot be built.
 */
lmc_status lmc_replay_summary_init(lmc_replay_summary *s, const lmc_replay_result *res,
                                   double time_scale);
void lmc_replay_summary_free(lmc_replay_summary *s);

#endif
