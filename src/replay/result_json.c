/*
 * result_json.c -- the replay result JSON (see result_json.h).
 *
 * Owns nothing past a call. The tree is built with the setters of
 * core/json.h, which take their child even when they fail, so a builder
 * nests constructors and checks one flag at the end. Keys keep insertion
 * order: the document reads top down, as docs/cli.md lists it.
 *
 * Threads: none.
 */
#include "replay/result_json.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/repeat.h"

#ifndef LMC_VERSION
#define LMC_VERSION "0.0.0"
#endif

typedef struct builder {
    bool ok;
} builder;

static void set(builder *b, lmc_json *obj, const char *key, lmc_json *v)
{
    if (obj == NULL) {
        lmc_json_free(v);
        b->ok = false;
        return;
    }
    if (lmc_json_object_set(obj, key, v) != LMC_OK)
        b->ok = false;
}

static lmc_json *u64(uint64_t v)
{
    return lmc_json_int(v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

static lmc_json *str_or_null(const char *s)
{
    return s != NULL ? lmc_json_string(s) : lmc_json_null();
}

/* A config JSON text as a value: the parsed object, or null when there is none. */
static lmc_json *config_value(const char *text)
{
    if (text == NULL || text[0] == '\0')
        return lmc_json_null();
    lmc_json *v = NULL;
    if (lmc_json_parse(text, strlen(text), &v, NULL) != LMC_OK)
        return lmc_json_string(text); /* kept as text rather than lost */
    return v;
}

static lmc_json *iso_time(double unix_s)
{
    if (!(unix_s > 0))
        return lmc_json_null();
    time_t t = (time_t)unix_s;
    struct tm tm;
    char buf[64];
    if (gmtime_r(&t, &tm) == NULL)
        return lmc_json_null();
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    int ms = (int)((unix_s - (double)t) * 1000.0);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", ms < 0 ? 0 : ms > 999 ? 999 : ms);
    return lmc_json_string(buf);
}

static lmc_json *trace_json(builder *b, const lmc_replay_summary *s)
{
    lmc_json *t = lmc_json_object();
    set(b, t, "path", str_or_null(s->trace_path));
    set(b, t, "digest",
        s->trace_digest != NULL && s->trace_digest[0] ? lmc_json_string(s->trace_digest)
                                                      : lmc_json_null());
    set(b, t, "level", str_or_null(s->level));
    set(b, t, "format_version", lmc_json_int(s->format_version));
    set(b, t, "trace_schema_version", lmc_json_int(s->schema_version));
    set(b, t, "config_digest", lmc_json_string(s->header_digest ? s->header_digest : ""));
    set(b, t, "config", config_value(s->header_config_json));
    set(b, t, "span_s", lmc_json_float(s->trace_span_s));
    lmc_json *r = lmc_json_object();
    set(b, r, "reported", u64(s->reported));
    set(b, r, "replayed", u64(s->replayed));
    set(b, r, "skipped", u64(s->skipped));
    set(b, r, "malformed", u64(s->malformed));
    set(b, r, "failed", u64(s->failed));
    set(b, r, "recorder_dropped", u64(s->recorder_dropped));
    set(b, r, "truncated", lmc_json_bool(s->truncated));
    set(b, t, "records", r);
    return t;
}

static lmc_json *config_json(builder *b, const lmc_replay_summary *s)
{
    lmc_json *c = lmc_json_object();
    set(b, c, "json", config_value(s->replay_config_json));
    set(b, c, "digest", lmc_json_string(s->replay_digest ? s->replay_digest : ""));
    const char *hd = s->header_digest ? s->header_digest : "";
    const char *rd = s->replay_digest ? s->replay_digest : "";
    set(b, c, "matches_trace",
        hd[0] == '\0' ? lmc_json_null() : lmc_json_bool(strcmp(hd, rd) == 0));
    lmc_json *d = lmc_json_array();
    for (size_t i = 0; i < s->n_config_diffs && d != NULL; i++)
        if (lmc_json_array_append(d, lmc_json_string(s->config_diffs[i])) != LMC_OK)
            b->ok = false;
    set(b, c, "differs", d);
    return c;
}

static lmc_json *outcomes_json(builder *b, const lmc_replay_summary *s)
{
    if (s->totals == NULL)
        return lmc_json_null();
    const lmc_replay_totals *t = s->totals;
    lmc_json *o = lmc_json_object();
    lmc_json *f = lmc_json_object();
    const lmc_replay_figure_info *fi;
    for (size_t i = 0; (fi = lmc_replay_figure_get(i)) != NULL; i++) {
        double v = lmc_replay_figure_value(&s->figures, i);
        set(b, f, fi->name, fi->is_ratio ? lmc_json_float(v) : u64((uint64_t)v));
    }
    set(b, o, "figures", f);
    lmc_json *ops = lmc_json_object();
    for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
        lmc_json *one = lmc_json_object();
        set(b, one, "records", u64(t->records[op]));
        set(b, one, "keys", u64(t->keys[op]));
        const lmc_outcome_counter_info *ci;
        for (size_t c = 0; (ci = lmc_outcome_counter_get(c)) != NULL; c++) {
            if (ci->op == (lmc_trace_op)op)
                set(b, one, ci->name, u64(t->v[c]));
        }
        set(b, ops, lmc_outcome_op_name((lmc_trace_op)op), one);
    }
    set(b, o, "ops", ops);
    lmc_json *l1 = lmc_json_object();
    set(b, l1, "capacity_bytes", u64(t->l1_capacity_bytes));
    set(b, l1, "peak_used_bytes", u64(t->l1_peak_used_bytes));
    set(b, l1, "peak_usage_ratio",
        lmc_json_float(t->l1_capacity_bytes
                           ? (double)t->l1_peak_used_bytes / (double)t->l1_capacity_bytes
                           : 0.0));
    set(b, l1, "evicted_keys", u64(t->sm.l1_evicted_keys));
    set(b, o, "l1", l1);
    lmc_json *l2 = lmc_json_object();
    set(b, l2, "stored_keys", u64(t->sm.l2_stored_keys));
    set(b, l2, "stored_bytes", u64(t->sm.l2_stored_bytes));
    set(b, l2, "store_failed_tasks", u64(t->sm.l2_store_failed_tasks));
    set(b, l2, "loaded_keys", u64(t->sm.l2_loaded_keys));
    set(b, l2, "loaded_bytes", u64(t->sm.l2_loaded_bytes));
    set(b, l2, "evicted_keys", u64(t->sm.l2_evicted_keys));
    set(b, o, "l2", l2);
    set(b, o, "unfinished_prefetches", u64(s->unfinished_prefetches));
    return o;
}

/* LMCache's "ops" of trace_replay_summary.json: per qualname, latency in ms. */
static lmc_json *ops_json(builder *b, const lmc_replay_summary *s)
{
    lmc_json *ops = lmc_json_object();
    for (size_t i = 0; i < s->n_ops; i++) {
        const lmc_op_stats *op = &s->ops[i];
        lmc_json *v = lmc_json_object();
        set(b, v, "count", u64(op->count));
        set(b, v, "errors", u64(op->error_count));
        set(b, v, "mean_ms", lmc_json_float(op->mean_ms));
        set(b, v, "p50_ms", lmc_json_float(op->p50_ms));
        set(b, v, "p90_ms", lmc_json_float(op->p90_ms));
        set(b, v, "p99_ms", lmc_json_float(op->p99_ms));
        set(b, v, "min_ms", lmc_json_float(op->min_ms));
        set(b, v, "max_ms", lmc_json_float(op->max_ms));
        set(b, ops, op->qualname, v);
    }
    return ops;
}

static lmc_json *lateness_json(builder *b, const lmc_replay_summary *s)
{
    const lmc_lateness_stats *l = &s->lateness;
    lmc_json *v = lmc_json_object();
    set(b, v, "count", u64(l->count));
    set(b, v, "mean_us", lmc_json_float(l->mean_us));
    set(b, v, "p50_us", lmc_json_float(l->p50_us));
    set(b, v, "p99_us", lmc_json_float(l->p99_us));
    set(b, v, "max_us", lmc_json_float(l->max_us));
    set(b, v, "mean_gap_us", lmc_json_float(s->mean_gap_s * 1e6));
    set(b, v, "behind_schedule", lmc_json_bool(lmc_replay_behind_schedule(s, NULL, 0)));
    return v;
}

static lmc_json *outputs_json(builder *b, const lmc_replay_summary *s)
{
    lmc_json *v = lmc_json_object();
    set(b, v, "jsonl", str_or_null(s->jsonl_path));
    set(b, v, "csv", str_or_null(s->csv_path));
    set(b, v, "outcomes_csv", str_or_null(s->outcomes_csv_path));
    set(b, v, "summary_json", str_or_null(s->summary_json_path));
    set(b, v, "output", str_or_null(s->output_path));
    return v;
}

lmc_json *lmc_replay_result_json(const lmc_replay_summary *s)
{
    builder b = {true};
    lmc_json *root = lmc_json_object();
    set(&b, root, "schema", lmc_json_string(LMC_REPLAY_RESULT_SCHEMA));
    set(&b, root, "schema_version", lmc_json_int(LMC_REPLAY_RESULT_SCHEMA_VERSION));
    lmc_json *tool = lmc_json_object();
    set(&b, tool, "name", lmc_json_string("lmcache"));
    set(&b, tool, "version", lmc_json_string(LMC_VERSION));
    set(&b, root, "tool", tool);
    set(&b, root, "started_at", iso_time(s->started_at_unix_s));
    set(&b, root, "started_at_unix_s", lmc_json_float(s->started_at_unix_s));
    set(&b, root, "status", lmc_json_string(s->interrupted ? "interrupted" : "complete"));
    set(&b, root, "trace", trace_json(&b, s));
    set(&b, root, "config", config_json(&b, s));
    set(&b, root, "mode", lmc_json_string(s->mode ? s->mode : "calls"));
    set(&b, root, "pace", lmc_json_string(s->pace ? s->pace : "realtime"));
    set(&b, root, "time_scale", lmc_json_float(s->time_scale));
    set(&b, root, "duration_s", lmc_json_float(s->duration_s));
    set(&b, root, "outcomes", outcomes_json(&b, s));
    set(&b, root, "ops", ops_json(&b, s));
    /* Virtual time waits for nothing: no lateness to report (null). */
    set(&b, root, "lateness", s->virtual_pace ? lmc_json_null() : lateness_json(&b, s));
    set(&b, root, "outcome_digest", str_or_null(s->outcome_digest));
    set(&b, root, "outputs", outputs_json(&b, s));
    if (s->repeat != NULL)
        set(&b, root, "repeat", lmc_replay_repeat_json(s->repeat));
    if (!b.ok) {
        lmc_json_free(root);
        return NULL;
    }
    return root;
}

char *lmc_replay_result_json_text(const lmc_replay_summary *s)
{
    lmc_json *root = lmc_replay_result_json(s);
    char *text = root != NULL ? lmc_json_dumps_line(root, 0, 2) : NULL;
    lmc_json_free(root);
    return text;
}

/* The subtrees of a result whose numbers are figures (a key, or a key and a child). */
static const char *const g_figure_roots[][2] = {{"duration_s", NULL},
                                                {"trace", "records"},
                                                {"outcomes", NULL},
                                                {"ops", NULL},
                                                {"lateness", NULL}};

static bool each_number(const lmc_json *v, const char **keys, size_t depth, lmc_replay_figure_cb cb,
                        void *ud)
{
    lmc_json_type t = lmc_json_type_of(v);
    if (t == LMC_JSON_INT || t == LMC_JSON_FLOAT)
        return cb(keys, depth, v, ud);
    if (t != LMC_JSON_OBJECT || depth == LMC_REPLAY_FIGURE_MAX_DEPTH)
        return true;
    for (size_t i = 0; i < lmc_json_size(v); i++) {
        keys[depth] = lmc_json_object_key_at(v, i);
        if (!each_number(lmc_json_object_value_at(v, i), keys, depth + 1, cb, ud))
            return false;
    }
    return true;
}

bool lmc_replay_result_each_figure(const lmc_json *result, lmc_replay_figure_cb cb, void *ud)
{
    const char *keys[LMC_REPLAY_FIGURE_MAX_DEPTH];
    for (size_t i = 0; i < sizeof(g_figure_roots) / sizeof(g_figure_roots[0]); i++) {
        size_t depth = 0;
        const lmc_json *sub = result;
        for (size_t k = 0; k < 2 && g_figure_roots[i][k] != NULL && sub != NULL; k++) {
            keys[depth++] = g_figure_roots[i][k];
            sub = lmc_json_object_get(sub, g_figure_roots[i][k]);
        }
        if (sub != NULL && !each_number(sub, keys, depth, cb, ud))
            return false;
    }
    return true;
}
