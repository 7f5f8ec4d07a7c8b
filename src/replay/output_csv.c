/*
 * output_csv.c -- the "csv" replay output: trace_replay_ops.csv, as
 * LMCache's _stats.py writes it (spec/trace-format.md section 7).
 *
 * The header row is exactly
 * "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms", then
 * one row per qualname sorted by qualname, floats "%.6f", CRLF line
 * endings, fields quoted only when needed (Python csv's default dialect).
 *
 * Threads: none; reentrant.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/strbuf.h"
#include "replay/output.h"

/*
 * One CSV field, Python csv QUOTE_MINIMAL with the default dialect: quote
 * when the field holds the delimiter, the quote character or a character
 * of the "\r\n" line terminator; inner quotes are doubled.
 */
static void csv_field(lmc_strbuf *b, const char *field)
{
    if (strpbrk(field, ",\"\r\n") == NULL) {
        lmc_strbuf_puts(b, field);
        return;
    }
    lmc_strbuf_append(b, "\"", 1);
    for (const char *p = field; *p; p++) {
        if (*p == '"')
            lmc_strbuf_append(b, "\"\"", 2);
        else
            lmc_strbuf_append(b, p, 1);
    }
    lmc_strbuf_append(b, "\"", 1);
}

/* Python's "%.6f" % x: as C, except that a NaN never carries a sign. */
static void csv_float(lmc_strbuf *b, double x)
{
    if (isnan(x))
        lmc_strbuf_puts(b, ",nan");
    else
        lmc_strbuf_printf(b, ",%.6f", x);
}

static char *render(const lmc_replay_summary *s)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_puts(&b, "qualname,count,errors,mean_ms,p50_ms,p90_ms,p99_ms,min_ms,max_ms\r\n");
    for (size_t i = 0; i < s->n_ops; i++) {
        const lmc_op_stats *o = &s->ops[i];
        csv_field(&b, o->qualname);
        lmc_strbuf_printf(&b, ",%" PRIu64 ",%" PRIu64, o->count, o->error_count);
        csv_float(&b, o->mean_ms);
        csv_float(&b, o->p50_ms);
        csv_float(&b, o->p90_ms);
        csv_float(&b, o->p99_ms);
        csv_float(&b, o->min_ms);
        csv_float(&b, o->max_ms);
        lmc_strbuf_puts(&b, "\r\n");
    }
    return lmc_strbuf_finish(&b);
}

const lmc_replay_output_format lmc_replay_output_csv = {
    .name = "csv",
    .default_file = "trace_replay_ops.csv",
    .log_name = "CSV",
    .render = render,
};
