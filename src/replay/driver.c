/*
 * driver.c -- replays a trace against a fresh StorageManager (see driver.h).
 *
 * Records come from the reader unparsed (lmc_trace_reader_next_record);
 * only a record that has a handler gets its args decoded, so a trace full
 * of other levels' records (events, with their token lists) costs no
 * decoding at all. A record is due at the time the time rule gives it
 * (replay/timeline.h).
 *
 * Pacing is the pacer's (replay/pace.h): the loop asks it to hold each
 * record until its due time, and at the end to drain the background work.
 */
#include "replay/driver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/escape.h"
#include "core/log.h"
#include "core/names.h"
#include "core/strmap.h"
#include "lmcache/storage_manager.h"
#include "replay/engine_mode.h"
#include "replay/outcome_queue.h"
#include "storage/config.h"
#include "trace/marker.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define LOG_COMP "replay"
/* How long the end-of-replay drain may wait for prefetches and stores. */
#define DRAIN_TIMEOUT_MS 10000
/* After a Ctrl-C the user wants the partial result soon. */
#define INTERRUPTED_DRAIN_MS 1000

const char *const lmc_replay_mode_names[] = {
    [LMC_REPLAY_MODE_CALLS] = "calls",
    [LMC_REPLAY_MODE_ENGINE] = "engine",
};
const size_t lmc_replay_mode_count =
    sizeof(lmc_replay_mode_names) / sizeof(lmc_replay_mode_names[0]);

LMC_NAMES_DEFINE_PARSE(lmc_replay_mode_parse, lmc_replay_mode, lmc_replay_mode_names,
                       lmc_replay_mode_count, "mode")

void lmc_replay_result_free(lmc_replay_result *res)
{
    lmc_replay_stats_destroy(res->stats);
    res->stats = NULL;
    free(res->header_config_json);
    free(res->replay_config_json);
    res->header_config_json = res->replay_config_json = NULL;
}

/*
 * Why a record is skipped, as LMCache's replay skips: its args do not
 * decode, or no handler has its qualname. Warned once per qualname (a long
 * trace of a newer level would flood), in a hash set so that a trace of
 * many distinct names stays linear. NULL: dispatch it.
 */
typedef struct warned {
    lmc_strmap *names; /* NULL when it could not be made: then every skip warns */
} warned;

static const char *skip_reason(warned *w, const lmc_dispatcher *d, lmc_trace_reader *rd,
                               lmc_trace_record *rec)
{
    /* A qualname holding NUL matches no handler, whatever its first part says. */
    bool handled =
        strlen(rec->qualname) == rec->qualname_len && lmc_dispatcher_has(d, rec->qualname);
    lmc_error err;
    if (handled && lmc_trace_reader_decode_args(rd, rec, &err) == LMC_OK)
        return NULL;
    bool fresh = true;
    uint64_t *seen = w->names != NULL
                         ? lmc_strmap_slot(w->names, rec->qualname, rec->qualname_len, &fresh)
                         : NULL;
    char *q = fresh ? lmc_escape_dup(rec->qualname, rec->qualname_len, 0) : NULL;
    if (!handled && fresh)
        LMC_WARN(LOG_COMP, "trace replay: no handler for qualname '%s'; skipping", q ? q : "?");
    else if (handled && (seen == NULL || (*seen)++ < 1))
        LMC_WARN(LOG_COMP, "trace replay: failed to decode args for %s; skipping: %s", q ? q : "?",
                 rec->args_error);
    free(q);
    return handled ? "undecodable args" : "no handler";
}

static void warned_free(warned *w)
{
    lmc_strmap_destroy(w->names);
}

/* What the reorder buffer's emit and the context's completions reach. */
typedef struct run_state {
    const lmc_replay_options *opt;
    lmc_replay_result *res;
    lmc_outcome_queue *queue;
    lmc_outcome_digest *digest;
} run_state;

/* One record, final and in order: totals, digest, then the caller's hook. */
static void emit(const lmc_replay_record_view *rec, void *ud)
{
    run_state *rs = ud;
    lmc_replay_totals_add(&rs->res->totals, rec->outcome);
    if (rec->outcome != NULL && rec->outcome->v[LMC_OC_SUBMIT_PREFETCH_unfinished] &&
        rec->outcome->op == LMC_TRACE_OP_SUBMIT_PREFETCH)
        rs->res->unfinished_prefetches++;
    lmc_outcome_digest_record(rs->digest, rec);
    if (rs->opt != NULL && rs->opt->on_record != NULL)
        rs->opt->on_record(rec, rs->opt->ud);
}

static void on_complete(void *ud, uint64_t index, const lmc_replay_outcome *o)
{
    run_state *rs = ud;
    lmc_outcome_queue_complete(rs->queue, index, o);
}

/* L1 usage now, into the peak; returns the bytes used (the capacity goes to t). */
static uint64_t sample_l1(lmc_storage_manager *sm, lmc_replay_totals *t)
{
    uint64_t used, total;
    lmc_sm_l1_usage(sm, &used, &total);
    if (used > t->l1_peak_used_bytes)
        t->l1_peak_used_bytes = used;
    t->l1_capacity_bytes = total;
    return used;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s != NULL ? s : "");
}

lmc_status lmc_replay_run(const lmc_sm_config *cfg, const char *path,
                          const lmc_replay_options *opt, lmc_replay_result *res, lmc_error *err)
{
    memset(res, 0, sizeof(*res));
    double scale = opt && opt->time_scale > 0 ? opt->time_scale : 1.0;
    lmc_status st = lmc_replay_check_time_scale(scale, err);
    if (st != LMC_OK)
        return st;
    const volatile sig_atomic_t *stop = opt ? opt->stop : NULL;

    lmc_trace_reader *rd = NULL;
    lmc_storage_manager *sm = NULL;
    lmc_dispatcher *own_dispatcher = NULL;
    lmc_replay_ctx *ctx = NULL;
    lmc_replay_engine *engine = NULL;
    warned w = {lmc_strmap_create()};
    run_state rs = {.opt = opt, .res = res};
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);

    st = lmc_trace_reader_open(path, &rd, err);
    if (st != LMC_OK)
        goto out;
    /* Names the trace in the result, so that trace compare can tell two traces apart. */
    lmc_error derr;
    lmc_status ds = lmc_trace_file_digest(path, res->trace_digest, &derr);
    if (ds != LMC_OK && ds != LMC_ERR_UNSUPPORTED)
        LMC_WARN(LOG_COMP, "trace replay: no trace digest in the result: %s", derr.msg);
    const lmc_trace_header *h = lmc_trace_reader_header(rd);
    snprintf(res->level, sizeof(res->level), "%s", h->level);
    snprintf(res->header_digest, sizeof(res->header_digest), "%s", h->sm_config_digest);
    res->schema_version = h->trace_schema_version;
    res->format_version = h->format_version;
    if (h->trace_schema_version < 2)
        LMC_WARN(LOG_COMP, "trace '%s' has trace_schema_version %lld: ObjectKey.cache_salt may "
                 "be missing, so keys of different tenants can collide in this replay",
                 path, (long long)h->trace_schema_version);

    char replay_digest[65];
    res->header_config_json = dup_or_empty(h->sm_config_json);
    if (res->header_config_json == NULL ||
        lmc_sm_config_digest(cfg, &res->replay_config_json, replay_digest) != LMC_OK) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
        goto out;
    }
    lmc_replay_pace pace = opt ? opt->pace : LMC_REPLAY_PACE_REALTIME;
    res->pace = pace;
    lmc_sm_runtime_options rt;
    lmc_replay_pace_runtime(pace, scale, &rt);
    st = lmc_sm_create_ex(cfg, &rt, &sm, err);
    if (st != LMC_OK)
        goto out;
    snprintf(res->replay_digest, sizeof(res->replay_digest), "%s", lmc_sm_config_digest_hex(sm));
    lmc_replay_mode mode = opt ? opt->mode : LMC_REPLAY_MODE_CALLS;
    res->mode = mode;
    const lmc_dispatcher *d = opt ? opt->dispatcher : NULL;
    if (mode == LMC_REPLAY_MODE_ENGINE && d != NULL) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "replay: mode engine brings its own dispatcher (a custom one "
                           "replays calls)");
        goto out;
    }
    if (d == NULL) {
        d = own_dispatcher = mode == LMC_REPLAY_MODE_ENGINE ? lmc_replay_engine_dispatcher()
                                                            : lmc_dispatcher_default();
        if (d == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
            goto out;
        }
    }
    ctx = lmc_replay_ctx_create(sm);
    res->stats = lmc_replay_stats_create();
    rs.queue = lmc_outcome_queue_create(emit, &rs);
    rs.digest = lmc_outcome_digest_create();
    if (ctx == NULL || res->stats == NULL || rs.queue == NULL || rs.digest == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "replay: out of memory");
        goto out;
    }
    lmc_replay_ctx_set_on_complete(ctx, on_complete, &rs);
    sample_l1(sm, &res->totals);

    /* The trace carries no KV bytes; without L2 nothing ever reads what replay writes. */
    bool zero_fill = cfg->n_l2_adapters > 0;
    lmc_replay_ctx_set_zero_fill(ctx, zero_fill);
    if (mode == LMC_REPLAY_MODE_ENGINE) {
        st = lmc_replay_engine_create(ctx, res->stats, zero_fill, cfg->read_ttl_seconds * 1000,
                                      &engine, err);
        if (st != LMC_OK)
            goto out;
    }

    lmc_replay_pacer pacer;
    lmc_replay_pacer_init(&pacer, pace, sm, ctx);
    pacer.stop = stop;
    /* A request waits for its lookup's answer while later records are due. */
    pacer.poll_while_waiting = mode == LMC_REPLAY_MODE_ENGINE;
    lmc_replay_stats_mark_start(res->stats, lmc_wall_s());
    lmc_replay_pacer_start(&pacer);
    lmc_trace_record rec;
    while (!(stop != NULL && *stop) && lmc_trace_reader_next_record(rd, &rec) == LMC_OK) {
        double t = lmc_replay_timeline_next(&tl, rec.t_mono, rec.offset, rec.qualname);
        uint64_t late = 0;
        bool timed = lmc_replay_pacer_wait(&pacer, lmc_replay_due_offset_ns(t, scale), &late);
        if (stop != NULL && *stop)
            break; /* woken from a long wait: this record was not replayed */
        if (strcmp(rec.qualname, LMC_TRACE_DROPPED_QUALNAME) == 0) {
            lmc_trace_reader_add_dropped_count(rd, &res->recorder_dropped);
            continue;
        }
        if (lmc_trace_marker_find(rec.qualname, rec.qualname_len) != NULL)
            continue; /* a tool's note about the trace (trace/marker.h), not a call */
        if (timed)
            lmc_replay_stats_record_lateness(res->stats, (double)late / 1e9);
        /* Interned: the view waits in the reorder buffer past this record's buffer. */
        const char *q = lmc_intern(rec.qualname, rec.qualname_len);
        lmc_replay_record_view view = {.index = ++res->reported,
                                       .qualname = q != NULL ? q : "?",
                                       .t_mono = t,
                                       .lateness_s = timed ? (double)late / 1e9 : -1.0};
        if (res->reported == 1)
            res->first_t_mono = t;
        res->last_t_mono = t;
        lmc_replay_ctx_begin(ctx, view.index);
        const lmc_replay_outcome *o = NULL;
        if (skip_reason(&w, d, rd, &rec) != NULL) {
            res->skipped++;
            view.failed = view.skipped = true;
        } else {
            lmc_error herr;
            uint64_t t0 = lmc_mono_ns();
            lmc_status hs = lmc_dispatcher_dispatch(d, rec.qualname, ctx, &rec, &herr);
            double lat = (double)(lmc_mono_ns() - t0) / 1e9;
            bool failed = hs != LMC_OK;
            if (!failed) {
                o = lmc_replay_ctx_outcome(ctx);
                if (o->op == LMC_TRACE_OP_NONE)
                    o = NULL; /* a custom handler that reports none */
            }
            /* A record not reissued made no StorageManager call: no latency to report. */
            if (o != NULL && o->not_reissued)
                res->not_reissued++;
            else
                lmc_replay_stats_record(res->stats, rec.qualname, lat, failed);
            if (failed) {
                res->failed++;
                LMC_WARN(LOG_COMP, "trace replay: handler for %s raised: %s", rec.qualname,
                         herr.msg);
            } else if (o == NULL || !o->not_reissued) {
                res->replayed++;
            }
            view.latency_s = lat;
            view.failed = failed;
        }
        lmc_outcome_queue_push(rs.queue, &view, o);
        /* Collect finished L2 parts now, so outcomes (and outputs) do not wait long. */
        if (lmc_outcome_queue_open(rs.queue) > 0)
            lmc_replay_ctx_poll_prefetches(ctx);
        uint64_t used = sample_l1(sm, &res->totals);
        if (opt != NULL && opt->on_l1_usage != NULL)
            opt->on_l1_usage(t, used, res->totals.l1_capacity_bytes, opt->ud);
    }
    res->interrupted = stop != NULL && *stop;
    res->malformed = lmc_trace_reader_malformed(rd);
    res->truncated = lmc_trace_reader_truncated(rd);
    if (tl.adjusted > 0)
        LMC_WARN(LOG_COMP,
                 "trace replay: the time rule moved %llu record(s) (docs/trace-format.md)",
                 (unsigned long long)tl.adjusted);

    /* Final sweep: close what the trace left open, let async work finish. */
    lmc_replay_ctx_close_dangling(ctx);
    lmc_replay_pacer_drain(&pacer, res->interrupted ? INTERRUPTED_DRAIN_MS : DRAIN_TIMEOUT_MS);
    /* What never finished counts as unfinished (its L2 part as missed). */
    lmc_replay_ctx_abandon_prefetches(ctx);
    lmc_outcome_queue_close(rs.queue);
    lmc_replay_stats_mark_end(res->stats, lmc_wall_s());
    sample_l1(sm, &res->totals);
    lmc_sm_get_counters(sm, &res->totals.sm);
    lmc_replay_record_counts rc = {res->replayed, res->skipped, res->failed, res->malformed};
    lmc_outcome_digest_finish(rs.digest, &res->totals, &rc, res->outcome_digest);
    if (opt && opt->on_finish)
        opt->on_finish(sm, opt->ud);
    st = LMC_OK;

out:
    lmc_replay_ctx_destroy(ctx);
    lmc_replay_engine_destroy(engine); /* after the context, which gives up on what waits */
    lmc_outcome_queue_destroy(rs.queue);
    lmc_outcome_digest_destroy(rs.digest);
    lmc_dispatcher_destroy(own_dispatcher);
    lmc_sm_destroy(sm);
    lmc_trace_reader_close(rd);
    warned_free(&w);
    if (st != LMC_OK)
        lmc_replay_result_free(res);
    return st;
}
