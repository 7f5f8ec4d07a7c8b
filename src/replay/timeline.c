/*
 * timeline.c -- the replay's time rule (see timeline.h).
 *
 * Owns: nothing beyond the caller's lmc_replay_timeline. The rule only
 * looks back (a record's due time is needed before the next one is read,
 * and the trace may come from a pipe), which is why an implausible gap is
 * judged by the record after it.
 *
 * Threads: none.
 */
#include "replay/timeline.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/escape.h"
#include "core/log.h"
#include "core/text.h"

#define LOG_COMP "replay"
/* Moved records reported one by one; after that only counted. */
#define REPORT_MAX 10

void lmc_replay_timeline_init(lmc_replay_timeline *tl)
{
    *tl = (lmc_replay_timeline){0};
}

static void report(lmc_replay_timeline *tl, uint64_t offset, const char *qualname, double t_mono,
                   double used, const char *why)
{
    tl->adjusted++;
    if (tl->adjusted > REPORT_MAX)
        return;
    char *q = lmc_escape_dup(qualname, qualname != NULL ? strlen(qualname) : 0, 0);
    char t[48], u[48];
    lmc_text_seconds(t_mono, t, sizeof(t));
    lmc_text_seconds(used, u, sizeof(u));
    LMC_WARN(LOG_COMP,
             "trace replay: the record at offset %" PRIu64 " (%s) has t_mono %s, %s; it is "
             "replayed at %s (the time rule in docs/trace-format.md)%s",
             offset, q != NULL ? q : "?", t, why, u,
             tl->adjusted == REPORT_MAX ? "; further moved records are only counted" : "");
    free(q);
}

double lmc_replay_timeline_next(lmc_replay_timeline *tl, double t_mono, uint64_t offset,
                                const char *qualname)
{
    if (!isfinite(t_mono) || t_mono < 0) {
        report(tl, offset, qualname, t_mono, tl->last,
               isfinite(t_mono) ? "which is negative" : "which is not a finite number");
        return tl->last;
    }
    if (tl->pending) {
        /* Not earlier than the moved record: its gap was real, so cut it from what follows. */
        if (t_mono >= tl->pending_t)
            tl->shift += tl->pending_cut;
        tl->pending = false;
    }
    double t = t_mono - tl->shift;
    double cap = tl->span > LMC_REPLAY_GAP_FLOOR_S ? tl->span : LMC_REPLAY_GAP_FLOOR_S;
    if (t - tl->last > cap) {
        double used = tl->last + cap;
        tl->pending = true;
        tl->pending_t = t_mono;
        tl->pending_cut = t - used;
        char why[160];
        char g[48], c[48];
        lmc_text_seconds(t - tl->last, g, sizeof(g));
        lmc_text_seconds(cap, c, sizeof(c));
        snprintf(why, sizeof(why), "%ss after its predecessor (more than %ss)", g, c);
        report(tl, offset, qualname, t_mono, used, why);
        tl->last = used;
        return used;
    }
    if (t > tl->last) {
        tl->span += t - tl->last;
        tl->last = t;
    }
    return t;
}

uint64_t lmc_replay_due_offset_ns(double t, double scale)
{
    double ns = t * scale * 1e9;
    if (!(ns > 0)) /* 0, or NaN from a caller that skipped the rule */
        return 0;
    if (ns >= (double)INT64_MAX)
        return (uint64_t)INT64_MAX;
    return (uint64_t)ns;
}

lmc_status lmc_replay_check_time_scale(double scale, lmc_error *err)
{
    char v[48];
    snprintf(v, sizeof(v), "%g", scale);
    if (!isfinite(scale) || scale <= 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "--time-scale: %s is not a finite number > 0",
                             v);
    if (scale < LMC_REPLAY_MIN_TIME_SCALE)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--time-scale: %s is below %g, the smallest scale at which records "
                             "are not all due within the same nanosecond; use %g to replay as "
                             "fast as possible",
                             v, LMC_REPLAY_MIN_TIME_SCALE, LMC_REPLAY_MIN_TIME_SCALE);
    if (scale > LMC_REPLAY_MAX_TIME_SCALE)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--time-scale: %s is above %g (one second of trace would take %s "
                             "seconds)",
                             v, LMC_REPLAY_MAX_TIME_SCALE, v);
    return LMC_OK;
}

lmc_status lmc_replay_parse_time_scale(const char *text, double *out, lmc_error *err)
{
    char *end;
    errno = 0;
    double d = strtod(text, &end);
    if (text[0] == '\0' || *end != '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "--time-scale: '%s' is not a number", text);
    if (errno == ERANGE && fabs(d) <= DBL_MIN)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--time-scale: '%s' is a number too close to 0 for this replay: the "
                             "smallest scale is %g (as fast as possible)",
                             text, LMC_REPLAY_MIN_TIME_SCALE);
    if (errno == ERANGE)
        return lmc_error_set(
            err, LMC_ERR_INVALID,
            "--time-scale: '%s' is too large to represent; the largest scale is %g", text,
            LMC_REPLAY_MAX_TIME_SCALE);
    lmc_status st = lmc_replay_check_time_scale(d, err);
    if (st == LMC_OK)
        *out = d;
    return st;
}
