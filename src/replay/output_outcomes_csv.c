/*
 * output_outcomes_csv.c -- the "outcomes-csv" replay output:
 * trace_replay_outcomes.csv, the replay's outcomes as one long table
 * (trace_replay_ops.csv keeps LMCache's exact header, so outcomes have
 * their own file).
 *
 * Header "scope,figure,value", then one row per final counter in the order
 * of the outcome digest's totals line (scope "records", an op's short
 * name, "l1" or "l2"), then one row per derived figure (scope "figures",
 * ratios as "%.6f"). CRLF line endings, like the ops CSV.
 *
 * Threads: none; reentrant.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "core/strbuf.h"
#include "replay/output.h"

static char *render(const lmc_replay_summary *s)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, "scope,figure,value\r\n");
    lmc_replay_totals zero = {0};
    const lmc_replay_totals *t = s->totals != NULL ? s->totals : &zero;
    lmc_replay_record_counts rc = {s->replayed, s->skipped, s->failed, s->malformed};
    size_t n = lmc_replay_totals_fields(t, &rc, NULL, 0);
    lmc_totals_field *f = calloc(n, sizeof(*f));
    if (f == NULL) {
        free(lmc_strbuf_finish(&b));
        return NULL;
    }
    lmc_replay_totals_fields(t, &rc, f, n);
    for (size_t i = 0; i < n; i++)
        lmc_strbuf_printf(&b, "%s,%s,%" PRIu64 "\r\n", f[i].scope, f[i].name, f[i].value);
    free(f);
    const lmc_replay_figure_info *fi;
    for (size_t i = 0; (fi = lmc_replay_figure_get(i)) != NULL; i++) {
        double v = lmc_replay_figure_value(&s->figures, i);
        if (fi->is_ratio)
            lmc_strbuf_printf(&b, "figures,%s,%.6f\r\n", fi->name, v);
        else
            lmc_strbuf_printf(&b, "figures,%s,%" PRIu64 "\r\n", fi->name, (uint64_t)v);
    }
    return lmc_strbuf_finish(&b);
}

const lmc_replay_output_format lmc_replay_output_outcomes_csv = {
    .name = "outcomes-csv",
    .default_file = "trace_replay_outcomes.csv",
    .log_name = "Outcomes CSV",
    .render = render,
};
