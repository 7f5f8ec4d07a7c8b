/*
 * driver.c -- replays a trace against a fresh StorageManager (see driver.h).
 *
 * Pacing is the pacer's (replay/pace.h): the loop asks it to hold each
 * record until its due time, and at the end to drain the background work.
 */
#include "replay/driver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "lmcache/storage_manager.h"
#include "trace/marker.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define LOG_COMP "replay"
/* How long the end-of-replay drain may wait for prefetches and stores. */
#define DRAIN_TIMEOUT_MS 10000

lmc_status lmc_replay_check_time_scale(double scale, lmc_error *err)
{
    if (!isfinite(scale) || scale <= 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--time-scale: %g is not a finite number > 0", scale);
    return LMC_OK;
}

void lmc_replay_result_free(lmc_replay_result *res)
{
    lmc_replay_stats_destroy(res->stats);
    res->stats = NULL;
}

/* Warn once per unknown qualname (a long trace of a newer level would flood). */
typedef struct warned {
    char **names;
    size_t n;
} warned;

static void warn_no_handler(warned *w, const char *q)
{
    for (size_t i = 0; i < w->n; i++) {
        if (strcmp(w->names[i], q) == 0)
            return;
    }
    LMC_WARN(LOG_COMP, "trace replay: no handler for qualname '%s'; skipping", q);
    char **nn = realloc(w->names, (w->n + 1) * sizeof(*nn));
    if (nn == NULL)
        return;
    w->names = nn;
    w->names[w->n] = strdup(q);
    if (w->names[w->n])
        w->n++;
}

static void warned_free(warned *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->names[i]);
    free(w->names);
}

lmc_status lmc_replay_run(const lmc_sm_config *cfg, const char *path,
                          const lmc_replay_options *opt, lmc_replay_result *res, lmc_error *err)
{
    memset(res, 0, sizeof(*res));
    double scale = opt && opt->time_scale > 0 ? opt->time_scale : 1.0;
    lmc_status st = lmc_replay_check_time_scale(scale, err);
    if (st != LMC_OK)
        return st;

    lmc_trace_reader *rd = NULL;
    lmc_storage_manager *sm = NULL;
    lmc_dispatcher *own_dispatcher = NULL;
    lmc_replay_ctx *ctx = NULL;
    warned w = {0};

    st = lmc_trace_reader_open(path, &rd, err);
    if (st != LMC_OK)
        goto out;
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    snprintf(res->level, sizeof(res->level), "%s", h->level);
    snprintf(res->header_digest, sizeof(res->header_digest), "%s", h->sm_config_digest);
    res->schema_version = h->trace_schema_version;
    if (h->trace_schema_version < 2)
        LMC_WARN(LOG_COMP, "trace '%s' has trace_schema_version %lld: ObjectKey.cache_salt may "
                 "be missing, so keys of different tenants can collide in this replay",
                 path, (long long)h->trace_schema_version);

    lmc_replay_pace pace = opt ? opt->pace : LMC_REPLAY_PACE_REALTIME;
    res->pace = pace;
    lmc_sm_runtime_options rt;
    lmc_replay_pace_runtime(pace, scale, &rt);
    st = lmc_sm_create_ex(cfg, &rt, &sm, err);
    if (st != LMC_OK)
        goto out;
    snprintf(res->replay_digest, sizeof(res->replay_digest), "%s", lmc_sm_config_digest_hex(sm));
    const lmc_dispatcher *d = opt ? opt->dispatcher : NULL;
    if (d == NULL) {
        d = own_dispatcher = lmc_dispatcher_default();
        if (d == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
            goto out;
        }
    }
    ctx = lmc_replay_ctx_create(sm);
    res->stats = lmc_replay_stats_create();
    if (ctx == NULL || res->stats == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
        goto out;
    }

    /* The trace carries no KV bytes; without L2 nothing ever reads what replay writes. */
    lmc_replay_ctx_set_zero_fill(ctx, cfg->n_l2_adapters > 0);

    lmc_replay_pacer pacer;
    lmc_replay_pacer_init(&pacer, pace, sm, ctx);
    lmc_replay_stats_mark_start(res->stats, lmc_wall_s());
    lmc_replay_pacer_start(&pacer);
    uint64_t reported = 0;
    lmc_trace_record rec;
    while (lmc_trace_reader_next(rd, &rec) == LMC_OK) {
        double t = rec.t_mono > 0 && isfinite(rec.t_mono) ? rec.t_mono : 0.0;
        uint64_t late = 0;
        bool timed = lmc_replay_pacer_wait(&pacer, (uint64_t)(t * scale * 1e9), &late);
        if (strcmp(rec.qualname, LMC_TRACE_DROPPED_QUALNAME) == 0) {
            const lmc_trace_arg *a = lmc_trace_args_find(rec.args, rec.nargs, "dropped_count");
            if (a && a->value.kind == LMC_TV_INT && a->value.u.i > 0)
                res->recorder_dropped += (uint64_t)a->value.u.i;
            continue;
        }
        if (lmc_trace_marker_find(rec.qualname, rec.qualname_len) != NULL)
            continue; /* a tool's note about the trace (trace/marker.h), not a call */
        if (timed)
            lmc_replay_stats_record_lateness(res->stats, (double)late / 1e9);
        lmc_replay_record_view view = {.index = ++reported, .qualname = rec.qualname};
        if (!lmc_dispatcher_has(d, rec.qualname)) {
            res->skipped++;
            warn_no_handler(&w, rec.qualname);
            view.failed = view.skipped = true;
            if (opt && opt->on_record)
                opt->on_record(&view, opt->ud);
            continue;
        }
        lmc_error herr;
        uint64_t t0 = lmc_mono_ns();
        lmc_status hs = lmc_dispatcher_dispatch(d, rec.qualname, ctx, &rec, &herr);
        double lat = (double)(lmc_mono_ns() - t0) / 1e9;
        bool failed = hs != LMC_OK;
        lmc_replay_stats_record(res->stats, rec.qualname, lat, failed);
        if (failed) {
            res->failed++;
            LMC_WARN(LOG_COMP, "trace replay: handler for %s raised: %s", rec.qualname,
                     herr.msg);
        } else {
            res->replayed++;
        }
        view.latency_s = lat;
        view.failed = failed;
        if (opt && opt->on_record)
            opt->on_record(&view, opt->ud);
    }
    res->skipped += lmc_trace_reader_malformed(rd);
    res->truncated = lmc_trace_reader_truncated(rd);

    /* Final sweep: close what the trace left open, let async work finish. */
    lmc_replay_ctx_close_dangling(ctx);
    lmc_replay_pacer_drain(&pacer, DRAIN_TIMEOUT_MS);
    lmc_replay_stats_mark_end(res->stats, lmc_wall_s());
    if (opt && opt->on_finish)
        opt->on_finish(sm, opt->ud);
    st = LMC_OK;

out:
    lmc_replay_ctx_destroy(ctx);
    lmc_dispatcher_destroy(own_dispatcher);
    lmc_sm_destroy(sm);
    lmc_trace_reader_close(rd);
    warned_free(&w);
    if (st != LMC_OK)
        lmc_replay_result_free(res);
    return st;
}
