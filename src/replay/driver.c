/*
 * driver.c -- replays a trace against a fresh StorageManager (see driver.h).
 *
 * Records come from the reader unparsed (lmc_trace_reader_next_record);
 * only a record that has a handler gets its args decoded, so a trace full
 * of other levels' records (events, with their token lists) costs no
 * decoding at all. A record is due at the time the time rule gives it
 * (replay/timeline.h).
 *
 * Pacing: sleeping is coarse (tens of microseconds of overshoot), spinning
 * is exact but burns a core. The driver sleeps with clock_nanosleep on an
 * absolute deadline until SPIN_NS before a record is due, then spins on the
 * monotonic clock. Lateness is measured as (start of dispatch - due time),
 * so it includes decoding and the pacing itself.
 */
#include "replay/driver.h"

#include <math.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/strmap.h"
#include "core/text.h"
#include "lmcache/storage_manager.h"
#include "trace/reader.h"
#include "trace/recorder.h"

#define LOG_COMP "replay"
/*
 * Sleep until this long before a record is due, then spin. A timed sleep
 * on a virtual machine overshoots by tens of microseconds even with the
 * timer slack at its minimum, and waking a sleeping thread on a busy host
 * can take a millisecond: a replay spins through gaps shorter than 2 ms.
 */
#define SPIN_NS 2000000ull
/* How long the end-of-replay drain may wait for prefetches and stores. */
#define DRAIN_TIMEOUT_MS 10000

void lmc_replay_result_free(lmc_replay_result *res)
{
    lmc_replay_stats_destroy(res->stats);
    res->stats = NULL;
}

/* Wait until due_ns (absolute monotonic); return the lateness in ns. */
static uint64_t pace(uint64_t due_ns)
{
    uint64_t now = lmc_mono_ns();
    if (now >= due_ns)
        return now - due_ns;
    if (due_ns - now > SPIN_NS)
        lmc_sleep_until_ns(due_ns - SPIN_NS);
    while ((now = lmc_mono_ns()) < due_ns) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    return now - due_ns;
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
    char *q = fresh ? lmc_text_escape_dup(rec->qualname, rec->qualname_len) : NULL;
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
    warned w = {lmc_strmap_create()};
    lmc_replay_timeline tl;
    lmc_replay_timeline_init(&tl);

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

    st = lmc_sm_create(cfg, &sm, err);
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

    /* The default 50 us timer slack would make every sleep that much late. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    lmc_replay_stats_mark_start(res->stats, lmc_wall_s());
    uint64_t origin = lmc_mono_ns();
    uint64_t reported = 0;
    lmc_trace_record rec;
    while (lmc_trace_reader_next_record(rd, &rec) == LMC_OK) {
        double t = lmc_replay_timeline_next(&tl, rec.t_mono, rec.offset, rec.qualname);
        uint64_t due = origin + lmc_replay_due_offset_ns(t, scale);
        uint64_t late = pace(due);
        if (strcmp(rec.qualname, LMC_TRACE_DROPPED_QUALNAME) == 0) {
            lmc_trace_reader_add_dropped_count(rd, &res->recorder_dropped);
            continue;
        }
        lmc_replay_stats_record_lateness(res->stats, (double)late / 1e9);
        lmc_replay_record_view view = {.index = ++reported, .qualname = rec.qualname};
        if (skip_reason(&w, d, rd, &rec) != NULL) {
            res->skipped++;
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
    res->malformed = lmc_trace_reader_malformed(rd);
    res->truncated = lmc_trace_reader_truncated(rd);
    if (tl.adjusted > 0)
        LMC_WARN(LOG_COMP,
                 "trace replay: the time rule moved %llu record(s) (docs/trace-format.md)",
                 (unsigned long long)tl.adjusted);

    /* Final sweep: close what the trace left open, let async work finish. */
    lmc_replay_ctx_close_dangling(ctx);
    size_t left = lmc_replay_ctx_drain_prefetches(ctx, DRAIN_TIMEOUT_MS);
    if (left > 0)
        LMC_WARN(LOG_COMP, "trace replay: %zu prefetch(es) still running after %d ms", left,
                 DRAIN_TIMEOUT_MS);
    if (!lmc_sm_wait_idle(sm, DRAIN_TIMEOUT_MS))
        LMC_WARN(LOG_COMP, "trace replay: the StorageManager was still busy after %d ms",
                 DRAIN_TIMEOUT_MS);
    lmc_replay_stats_mark_end(res->stats, lmc_wall_s());
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
