/*
 * output.c -- the table of replay output formats and the outputs opened
 * from it (see output.h).
 *
 * Owns: each open output's FILE (per-record formats) and the one place
 * where a rendered result is written to a file, so every format reports a
 * failed write the same way.
 *
 * Threads: none of its own; an output belongs to the thread using it.
 */
#include "replay/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/json.h"
#include "core/json_diff.h"
#include "core/log.h"

#define LOG_COMP "replay"

#define LMC_REPLAY_OUTPUT_ENTRY(id) &lmc_replay_output_##id,
static const lmc_replay_output_format *const formats[] = {
    LMC_REPLAY_OUTPUT_FORMATS(LMC_REPLAY_OUTPUT_ENTRY)};
#undef LMC_REPLAY_OUTPUT_ENTRY

const lmc_replay_output_format *lmc_replay_output_at(size_t i)
{
    return i < sizeof(formats) / sizeof(formats[0]) ? formats[i] : NULL;
}

const lmc_replay_output_format *lmc_replay_output_find(const char *name)
{
    const lmc_replay_output_format *f;
    for (size_t i = 0; (f = lmc_replay_output_at(i)) != NULL; i++) {
        if (strcmp(f->name, name) == 0)
            return f;
    }
    return NULL;
}

struct lmc_replay_output {
    const lmc_replay_output_format *format;
    char *path; /* NULL: stdout */
    char *flag; /* NULL: a default file; names the file in messages */
    FILE *file; /* open while records stream in (per-record formats) */
};

void lmc_replay_output_destroy(lmc_replay_output *o)
{
    if (o == NULL)
        return;
    if (o->file != NULL && o->file != stdout)
        fclose(o->file);
    free(o->path);
    free(o->flag);
    free(o);
}

lmc_status lmc_replay_output_open(const lmc_replay_output_format *f, const char *path,
                                  const char *flag, lmc_replay_output **out, lmc_error *err)
{
    *out = NULL;
    lmc_replay_output *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "replay output: out of memory");
    lmc_status st = LMC_OK;
    o->format = f;
    o->path = path ? strdup(path) : NULL;
    o->flag = flag ? strdup(flag) : NULL;
    if ((path && o->path == NULL) || (flag && o->flag == NULL)) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "replay output: out of memory");
        goto fail;
    }
    /* A file for records is written as they come; one written at the end is
     * checked now, so that a bad path fails before the replay, not after it. */
    if (f->record != NULL) {
        if (path == NULL)
            o->file = stdout;
        else if ((st = lmc_file_fopen(o->flag, path, &o->file, err)) != LMC_OK)
            goto fail;
    } else if (path != NULL && (st = lmc_file_out_check(o->flag, path, err)) != LMC_OK) {
        goto fail;
    }
    *out = o;
    return LMC_OK;

fail:
    lmc_replay_output_destroy(o);
    return st;
}

void lmc_replay_output_record(lmc_replay_output *o, const lmc_replay_record_view *rec)
{
    if (o->format->record != NULL && o->file != NULL)
        o->format->record(o->file, rec);
}

lmc_status lmc_replay_output_finish(lmc_replay_output *o, const lmc_replay_summary *s,
                                    lmc_error *err)
{
    lmc_status st = LMC_OK;
    if (o->file != NULL) {
        FILE *f = o->file;
        o->file = NULL;
        if (f != stdout && fclose(f) != 0)
            st = lmc_file_write_error(o->flag, o->path, errno, err);
    }
    char *text = NULL;
    if (st == LMC_OK && o->format->render != NULL) {
        text = o->format->render(s);
        if (text == NULL)
            st = lmc_error_set(err, LMC_ERR_NOMEM, "%s output: out of memory", o->format->name);
        else if (o->path == NULL)
            fputs(text, stdout);
        else
            st = lmc_file_write_all(o->flag, o->path, text, err);
    }
    if (st == LMC_OK && o->path != NULL && o->format->log_name != NULL)
        LMC_INFO(LOG_COMP, "%s written to %s", o->format->log_name, o->path);
    free(text);
    return st;
}

/* The config diff: each path where the recorded and the replay configs differ, strdup'd. */
typedef struct diff_list {
    char **v;
    size_t n, cap;
    bool oom;
} diff_list;

static void add_diff(const char *path, void *ud)
{
    diff_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        char **nv = realloc(l->v, cap * sizeof(*nv));
        if (nv == NULL) {
            l->oom = true;
            return;
        }
        l->v = nv;
        l->cap = cap;
    }
    char *p = strdup(path[0] != '\0' ? path : "(the whole config)");
    if (p == NULL)
        l->oom = true;
    else
        l->v[l->n++] = p;
}

/*
 * Where the configs differ, when both are known and their digests differ.
 * A config that does not parse (a hand-made trace) is one difference.
 */
static lmc_status config_diffs(const lmc_replay_result *res, diff_list *l)
{
    const char *hj = res->header_config_json, *rj = res->replay_config_json;
    if (hj == NULL || rj == NULL || hj[0] == '\0' || res->header_digest[0] == '\0' ||
        strcmp(res->header_digest, res->replay_digest) == 0)
        return LMC_OK;
    lmc_json *a = NULL, *b = NULL;
    if (lmc_json_parse(hj, strlen(hj), &a, NULL) == LMC_OK &&
        lmc_json_parse(rj, strlen(rj), &b, NULL) == LMC_OK) {
        /* Same values in another key order or spelling: the digests differ, nothing else does. */
        if (lmc_json_diff(a, b, add_diff, l) == 0)
            add_diff("(the JSON text; every value is equal)", l);
    } else {
        add_diff("(the recorded config is not valid JSON)", l);
    }
    lmc_json_free(a);
    lmc_json_free(b);
    return l->oom ? LMC_ERR_NOMEM : LMC_OK;
}

lmc_status lmc_replay_summary_init(lmc_replay_summary *s, const lmc_replay_result *res,
                                   double time_scale)
{
    memset(s, 0, sizeof(*s));
    lmc_op_stats *ops = NULL;
    size_t n_ops = 0;
    if (lmc_replay_stats_summarize(res->stats, &ops, &n_ops) != LMC_OK)
        return LMC_ERR_NOMEM;
    diff_list diffs = {0};
    if (config_diffs(res, &diffs) != LMC_OK) {
        lmc_replay_stats_free_summary(ops, n_ops);
        for (size_t i = 0; i < diffs.n; i++)
            free(diffs.v[i]);
        free(diffs.v);
        return LMC_ERR_NOMEM;
    }
    double span = res->reported > 1 ? res->last_t_mono - res->first_t_mono : 0.0;
    *s = (lmc_replay_summary){
        .level = res->level,
        .replayed = res->replayed,
        .skipped = res->skipped,
        .malformed = res->malformed,
        .failed = res->failed,
        .duration_s = lmc_replay_stats_duration_s(res->stats),
        .trace_digest = res->trace_digest,
        .header_digest = res->header_digest,
        .replay_digest = res->replay_digest,
        .time_scale = time_scale,
        .virtual_pace = res->pace == LMC_REPLAY_PACE_VIRTUAL,
        .lateness = lmc_replay_stats_lateness(res->stats),
        .ops = ops,
        .n_ops = n_ops,
        .totals = &res->totals,
        .figures = lmc_replay_figures_of(&res->totals),
        .outcome_digest = res->outcome_digest,
        .recorder_dropped = res->recorder_dropped,
        .reported = res->reported,
        .unfinished_prefetches = res->unfinished_prefetches,
        .truncated = res->truncated,
        .interrupted = res->interrupted,
        .schema_version = res->schema_version,
        .format_version = res->format_version,
        .trace_span_s = span,
        .mean_gap_s = res->reported > 1 ? span / (double)(res->reported - 1) * time_scale : 0.0,
        .started_at_unix_s = lmc_replay_stats_start_s(res->stats),
        .stats = res->stats,
        .header_config_json = res->header_config_json,
        .replay_config_json = res->replay_config_json,
        .config_diffs = (const char *const *)diffs.v,
        .n_config_diffs = diffs.n,
        .mode = lmc_replay_mode_names[res->mode == LMC_REPLAY_MODE_ENGINE ? LMC_REPLAY_MODE_ENGINE
                                                                          : LMC_REPLAY_MODE_CALLS],
        .pace =
            lmc_replay_pace_names[res->pace == LMC_REPLAY_PACE_VIRTUAL ? LMC_REPLAY_PACE_VIRTUAL
                                                                       : LMC_REPLAY_PACE_REALTIME],
    };
    return LMC_OK;
}

void lmc_replay_summary_free(lmc_replay_summary *s)
{
    /* The ops and diffs are ours (lmc_replay_summary_init); renderers see them const. */
    lmc_replay_stats_free_summary((lmc_op_stats *)s->ops, s->n_ops);
    for (size_t i = 0; i < s->n_config_diffs; i++)
        free((char *)s->config_diffs[i]);
    free((char **)s->config_diffs);
    s->ops = NULL;
    s->n_ops = 0;
    s->config_diffs = NULL;
    s->n_config_diffs = 0;
}
