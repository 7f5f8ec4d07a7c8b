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
#include <stdlib.h>
#include <string.h>

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
    char *flag; /* NULL: a default file */
    FILE *file; /* open while records stream in (per-record formats) */
};

/* "cannot write --flag 'path': why" (or without the flag), returning LMC_ERR_IO. */
static lmc_status write_error(const lmc_replay_output *o, int errnum, lmc_error *err)
{
    return lmc_error_set(err, LMC_ERR_IO, "cannot write %s%s'%s': %s", o->flag ? o->flag : "",
                         o->flag ? " " : "", o->path, strerror(errnum));
}

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
    if (f->record != NULL) {
        o->file = path ? fopen(path, "w") : stdout;
        if (o->file == NULL) {
            st = write_error(o, errno, err);
            goto fail;
        }
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

/* The whole of text to path, replacing it. */
static lmc_status write_text(const lmc_replay_output *o, const char *text, lmc_error *err)
{
    size_t len = strlen(text);
    FILE *f = fopen(o->path, "w");
    if (f == NULL)
        return write_error(o, errno, err);
    size_t w = fwrite(text, 1, len, f);
    int saved = errno;
    if (w != len) {
        fclose(f);
        return write_error(o, saved, err);
    }
    if (fclose(f) != 0)
        return write_error(o, errno, err);
    return LMC_OK;
}

lmc_status lmc_replay_output_finish(lmc_replay_output *o, const lmc_replay_summary *s,
                                    lmc_error *err)
{
    lmc_status st = LMC_OK;
    if (o->file != NULL) {
        FILE *f = o->file;
        o->file = NULL;
        if (f != stdout && fclose(f) != 0)
            st = write_error(o, errno, err);
    }
    char *text = NULL;
    if (st == LMC_OK && o->format->render != NULL) {
        text = o->format->render(s);
        if (text == NULL)
            st = lmc_error_set(err, LMC_ERR_NOMEM, "%s output: out of memory", o->format->name);
        else if (o->path == NULL)
            fputs(text, stdout);
        else
            st = write_text(o, text, err);
    }
    if (st == LMC_OK && o->path != NULL && o->format->log_name != NULL)
        LMC_INFO(LOG_COMP, "%s written to %s", o->format->log_name, o->path);
    free(text);
    return st;
}

lmc_status lmc_replay_summary_init(lmc_replay_summary *s, const lmc_replay_result *res,
                                   double time_scale)
{
    memset(s, 0, sizeof(*s));
    lmc_op_stats *ops = NULL;
    size_t n_ops = 0;
    if (lmc_replay_stats_summarize(res->stats, &ops, &n_ops) != LMC_OK)
        return LMC_ERR_NOMEM;
    *s = (lmc_replay_summary){
        .level = res->level,
        .replayed = res->replayed,
        .skipped = res->skipped,
        .malformed = res->malformed,
        .failed = res->failed,
        .duration_s = lmc_replay_stats_duration_s(res->stats),
        .header_digest = res->header_digest,
        .replay_digest = res->replay_digest,
        .time_scale = time_scale,
        .lateness = lmc_replay_stats_lateness(res->stats),
        .ops = ops,
        .n_ops = n_ops,
    };
    return LMC_OK;
}

void lmc_replay_summary_free(lmc_replay_summary *s)
{
    /* The ops are ours (lmc_replay_summary_init); the struct shows them const to renderers. */
    lmc_replay_stats_free_summary((lmc_op_stats *)s->ops, s->n_ops);
    s->ops = NULL;
    s->n_ops = 0;
}
