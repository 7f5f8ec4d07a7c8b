/*
 * output_summary.c -- the "summary-json" replay output:
 * trace_replay_summary.json, the result JSON of replay/result_json.h (the
 * same document --format json prints; its duration_s and ops keep the
 * shape of LMCache's _stats.py summary).
 *
 * Threads: none; reentrant.
 */
#include "replay/output.h"
#include "replay/result_json.h"

const lmc_replay_output_format lmc_replay_output_summary_json = {
    .name = "summary-json",
    .default_file = "trace_replay_summary.json",
    .log_name = "JSON",
    .render = lmc_replay_result_json_text,
};
