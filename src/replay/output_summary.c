/*
 * output_summary.c -- the "summary-json" replay output:
 * trace_replay_summary.json.
 *
 * json.dump(payload, indent=2, sort_keys=True) + "\n" of {"duration_s": f,
 * "ops": {q: {"count", "errors", "max_ms", "mean_ms", "min_ms", "p50_ms",
 * "p90_ms", "p99_ms"}}}, as LMCache's _stats.py writes it, plus
 * "lateness": {"count", "max_us", "mean_us", "p50_us", "p99_us"} (our
 * addition; null with --pace virtual).
 *
 * Threads: none; reentrant.
 */
#include <stdlib.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "replay/output.h"

/* Set key on obj; false on any failure (the setter frees v then). */
static bool jset(lmc_json *obj, const char *key, lmc_json *v)
{
    return lmc_json_object_set(obj, key, v) == LMC_OK;
}

static lmc_json *op_json(const lmc_op_stats *o)
{
    lmc_json *v = lmc_json_object();
    bool ok = jset(v, "count", lmc_json_int((int64_t)o->count));
    ok &= jset(v, "errors", lmc_json_int((int64_t)o->error_count));
    ok &= jset(v, "mean_ms", lmc_json_float(o->mean_ms));
    ok &= jset(v, "p50_ms", lmc_json_float(o->p50_ms));
    ok &= jset(v, "p90_ms", lmc_json_float(o->p90_ms));
    ok &= jset(v, "p99_ms", lmc_json_float(o->p99_ms));
    ok &= jset(v, "min_ms", lmc_json_float(o->min_ms));
    ok &= jset(v, "max_ms", lmc_json_float(o->max_ms));
    if (!ok) {
        lmc_json_free(v);
        return NULL;
    }
    return v;
}

static lmc_json *lateness_json(const lmc_lateness_stats *l)
{
    lmc_json *v = lmc_json_object();
    bool ok = jset(v, "count", lmc_json_int((int64_t)l->count));
    ok &= jset(v, "max_us", lmc_json_float(l->max_us));
    ok &= jset(v, "mean_us", lmc_json_float(l->mean_us));
    ok &= jset(v, "p50_us", lmc_json_float(l->p50_us));
    ok &= jset(v, "p99_us", lmc_json_float(l->p99_us));
    if (!ok) {
        lmc_json_free(v);
        return NULL;
    }
    return v;
}

static char *render(const lmc_replay_summary *s)
{
    lmc_json *root = lmc_json_object();
    lmc_json *jops = lmc_json_object();
    bool ok = true;
    for (size_t i = 0; i < s->n_ops && ok; i++)
        ok = jset(jops, s->ops[i].qualname, op_json(&s->ops[i]));
    if (!ok) {
        lmc_json_free(jops);
        jops = NULL;
    }
    ok &= jset(root, "duration_s", lmc_json_float(s->duration_s));
    ok &= jset(root, "ops", jops);
    /* Virtual time waits for nothing: no lateness to report (null). */
    ok &= jset(root, "lateness", s->virtual_pace ? lmc_json_null() : lateness_json(&s->lateness));
    char *text = NULL;
    size_t len = 0;
    if (ok)
        text = lmc_json_dumps(root, LMC_JSON_SORT_KEYS, 2, &len);
    lmc_json_free(root);
    if (text == NULL)
        return NULL;
    lmc_strbuf b = LMC_STRBUF_INIT;
    lmc_strbuf_append(&b, text, len);
    lmc_strbuf_append(&b, "\n", 1);
    free(text);
    return lmc_strbuf_finish(&b);
}

const lmc_replay_output_format lmc_replay_output_summary_json = {
    .name = "summary-json",
    .default_file = "trace_replay_summary.json",
    .log_name = "JSON",
    .render = render,
};
