/*
 * output_jsonl.c -- the "jsonl" replay output (--jsonl-out): one JSON
 * object per record, in record order, written as the replay runs (a
 * record waits behind an earlier prefetch whose L2 part is not in yet):
 *
 *   {"index": <n>, "t_mono": <s>, "lateness_us": <us> | null, "qualname": "<q>",
 *    "n_keys": <n>, "latency_ms": <ms>, "failed": <bool>, "skipped": <bool>,
 *    "outcome": {"op": "<op>", "<counter>": <n>, ...} | null}
 *
 * The outcome lists every counter of the record's op (replay/outcome.def)
 * in table order; it is null for a skipped or failed record, and
 * {"op": "<op>", "not_reissued": true} for a record the mode did not
 * reissue (mode engine's recorded reads and writes). latency_ms is
 * 0.0 for a skipped record (which reports failed: true), as in LMCache,
 * whose three keys qualname, latency_ms and failed keep their meaning.
 *
 * Threads: none; reentrant.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "replay/output.h"

static void record(FILE *f, const lmc_replay_record_view *rec)
{
    char ms[32], t[32], late[32];
    lmc_json_format_float(rec->skipped ? 0.0 : rec->latency_s * 1000.0, ms, sizeof(ms));
    lmc_json_format_float(rec->t_mono, t, sizeof(t));
    /* Whole nanoseconds, as measured: no binary noise after the third decimal.
     * Negative: the record was not timed (--pace virtual), so null. */
    if (rec->lateness_s < 0)
        snprintf(late, sizeof(late), "null");
    else
        lmc_json_format_float(round(rec->lateness_s * 1e9) / 1000.0, late, sizeof(late));
    lmc_json *q = lmc_json_string(rec->qualname);
    char *qs = q ? lmc_json_dumps(q, 0, -1, NULL) : NULL;
    const lmc_replay_outcome *o = rec->outcome;
    fprintf(f,
            "{\"index\": %" PRIu64 ", \"t_mono\": %s, \"lateness_us\": %s, \"qualname\": %s, "
            "\"n_keys\": %" PRIu32 ", \"latency_ms\": %s, \"failed\": %s, \"skipped\": %s, "
            "\"outcome\": ",
            rec->index, t, late, qs ? qs : "\"?\"", o != NULL ? o->n_keys : 0, ms,
            rec->failed ? "true" : "false", rec->skipped ? "true" : "false");
    if (o == NULL) {
        fputs("null}\n", f);
    } else {
        fprintf(f, "{\"op\": \"%s\"", lmc_outcome_op_name(o->op));
        const lmc_outcome_counter_info *ci;
        if (o->not_reissued)
            fputs(", \"not_reissued\": true", f);
        for (size_t c = 0; (ci = lmc_outcome_counter_get(c)) != NULL && !o->not_reissued; c++) {
            if (ci->op == o->op)
                fprintf(f, ", \"%s\": %" PRIu32, ci->name, o->v[c]);
        }
        fputs("}}\n", f);
    }
    free(qs);
    lmc_json_free(q);
}

const lmc_replay_output_format lmc_replay_output_jsonl = {
    .name = "jsonl",
    .record = record,
};
