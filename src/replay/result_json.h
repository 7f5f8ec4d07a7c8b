/*
 * result_json.h -- the replay result as one JSON document: what
 * `--format json` prints and trace_replay_summary.json holds (the same
 * text), documented field by field in docs/cli.md.
 *
 * Owns nothing past a call. Top-level keys, in this order: schema,
 * schema_version, tool, started_at, started_at_unix_s, status, trace,
 * config, mode, pace, time_scale, duration_s, outcomes, ops, lateness,
 * outcome_digest, outputs, and repeat (with --repeat only). duration_s and
 * ops keep the shape of LMCache's trace_replay_summary.json, so a reader
 * of that file still finds what it reads.
 *
 * Threads: none; reentrant.
 */
#ifndef LMC_REPLAY_RESULT_JSON_H
#define LMC_REPLAY_RESULT_JSON_H

#include "core/json.h"
#include "replay/report.h"

/* The result tree (the caller frees it); NULL when memory runs out. */
lmc_json *lmc_replay_result_json(const lmc_replay_summary *s);

/* Its text with indent 2 and a final "\n" (malloc'd); NULL when memory runs out. */
char *lmc_replay_result_json_text(const lmc_replay_summary *s);

/*
 * The figures of a result tree: every number under duration_s,
 * trace.records, outcomes, ops and lateness, in document order. They are
 * what --repeat summarises (replay/repeat.h) and what trace compare
 * compares (replay/compare.h). cb gets the keys from the root (depth of
 * them, at most LMC_REPLAY_FIGURE_MAX_DEPTH; deeper numbers are none of
 * ours and are passed over) and the number; when it returns false the walk
 * stops and returns false.
 */
#define LMC_REPLAY_FIGURE_MAX_DEPTH 8
typedef bool (*lmc_replay_figure_cb)(const char *const *keys, size_t depth, const lmc_json *v,
                                     void *ud);
bool lmc_replay_result_each_figure(const lmc_json *result, lmc_replay_figure_cb cb, void *ud);

#endif
