/*
 * output_jsonl.c -- the "jsonl" replay output (--jsonl-out): one JSON
 * object per record, written as the replay runs:
 *
 *   {"qualname": "<q>", "latency_ms": <float>, "failed": <bool>}
 *
 * latency_ms is 0.0 for a skipped record (which reports failed: true).
 *
 * Threads: none; reentrant.
 */
#include <stdlib.h>

#include "core/json.h"
#include "replay/output.h"

static void record(FILE *f, const lmc_replay_record_view *rec)
{
    char ms[32];
    lmc_json_format_float(rec->skipped ? 0.0 : rec->latency_s * 1000.0, ms, sizeof(ms));
    lmc_json *q = lmc_json_string(rec->qualname);
    char *qs = q ? lmc_json_dumps(q, 0, -1, NULL) : NULL;
    fprintf(f, "{\"qualname\": %s, \"latency_ms\": %s, \"failed\": %s}\n", qs ? qs : "\"?\"", ms,
            rec->failed ? "true" : "false");
    free(qs);
    lmc_json_free(q);
}

const lmc_replay_output_format lmc_replay_output_jsonl = {
    .name = "jsonl",
    .record = record,
};
