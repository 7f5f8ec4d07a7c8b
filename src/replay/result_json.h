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

#endif
