/*
 * pace.c -- the realtime and virtual pacers (see pace.h).
 *
 * Realtime: sleeping is coarse (tens of microseconds of overshoot),
 * spinning is exact but burns a core. The pacer sleeps with
 * clock_nanosleep on an absolute deadline until SPIN_NS before a record is
 * due, then spins on the monotonic clock. Lateness is measured as (start of
 * dispatch - due time), so it includes decoding and the pacing itself.
 *
 * Virtual: the StorageManager is the clock and the executor; the pacer only
 * moves it, one event at a time, so that finished prefetches are collected
 * at the virtual time they finish, as a realtime replay collects them soon
 * after. Nothing here allocates.
 */
#include "replay/pace.h"

#include <string.h>
#include <sys/prctl.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/names.h"

#define LOG_COMP "replay"
/*
 * Sleep until this long before a record is due, then spin. A timed sleep
 * on a virtual machine overshoots by tens of microseconds even with the
 * timer slack at its minimum, and waking a sleeping thread on a busy host
 * can take a millisecond: a replay spins through gaps shorter than 2 ms.
 */
#define SPIN_NS 2000000ull
/* How often realtime run_until looks at its condition. */
#define POLL_NS 500000ull
/* The longest sleep of a realtime wait that may be stopped. */
#define STOP_SLICE_NS 100000000ull

struct lmc_replay_pacer_ops {
    void (*start)(lmc_replay_pacer *p);
    bool (*wait)(lmc_replay_pacer *p, uint64_t due_ns, uint64_t *late_ns);
    bool (*run_until)(lmc_replay_pacer *p, bool (*done)(void *ud), void *ud, uint32_t timeout_ms);
};

const char *const lmc_replay_pace_names[] = {
    [LMC_REPLAY_PACE_REALTIME] = "realtime",
    [LMC_REPLAY_PACE_VIRTUAL] = "virtual",
};
const size_t lmc_replay_pace_count =
    sizeof(lmc_replay_pace_names) / sizeof(lmc_replay_pace_names[0]);

LMC_NAMES_DEFINE_PARSE(lmc_replay_pace_parse, lmc_replay_pace, lmc_replay_pace_names,
                       lmc_replay_pace_count, "pace")

void lmc_replay_pace_runtime(lmc_replay_pace pace, double time_scale, lmc_sm_runtime_options *out)
{
    lmc_sm_runtime_options_init(out);
    out->executor = pace == LMC_REPLAY_PACE_VIRTUAL ? LMC_SM_EXEC_MANUAL : LMC_SM_EXEC_THREADS;
    double ns = 1e9 * time_scale;
    /* At least 1 ns; a scale that large would never see a pass anyway. */
    out->eviction_period_ns = ns < 1.0 ? 1 : ns >= 1.8e19 ? UINT64_MAX / 2 : (uint64_t)ns;
}

/* ---------------------------------------------------------------------- */
/* Realtime                                                                */
/* ---------------------------------------------------------------------- */

static void realtime_start(lmc_replay_pacer *p)
{
    /* The default 50 us timer slack would make every sleep that much late. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    p->origin_ns = lmc_mono_ns();
}

static bool realtime_wait(lmc_replay_pacer *p, uint64_t due_ns, uint64_t *late_ns)
{
    uint64_t due = p->origin_ns + due_ns;
    /* Waiting work (mode engine's requests) is collected every POLL_NS until none is left. */
    bool polling = p->poll_while_waiting && lmc_replay_ctx_poll_prefetches(p->ctx) > 0;
    uint64_t now = lmc_mono_ns();
    if (now < due) {
        /* A long wait sleeps in slices when it may be stopped (Ctrl-C ends it promptly). */
        while (due - now > SPIN_NS) {
            if (p->stop != NULL && *p->stop) {
                *late_ns = 0;
                return true;
            }
            uint64_t until = due - SPIN_NS;
            if (p->stop != NULL && until - now > STOP_SLICE_NS)
                until = now + STOP_SLICE_NS;
            if (polling && until - now > POLL_NS)
                until = now + POLL_NS;
            lmc_sleep_until_ns(until);
            if (polling)
                polling = lmc_replay_ctx_poll_prefetches(p->ctx) > 0;
            if ((now = lmc_mono_ns()) >= due)
                break;
        }
        uint64_t next_poll = now + POLL_NS;
        while ((now = lmc_mono_ns()) < due) {
            if (polling && now >= next_poll) {
                polling = lmc_replay_ctx_poll_prefetches(p->ctx) > 0;
                next_poll = lmc_mono_ns() + POLL_NS;
            }
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
    *late_ns = now - due;
    return true;
}

static bool realtime_run_until(lmc_replay_pacer *p, bool (*done)(void *ud), void *ud,
                               uint32_t timeout_ms)
{
    (void)p;
    uint64_t deadline = lmc_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    while (!done(ud)) {
        if (lmc_mono_ns() >= deadline)
            return false;
        lmc_sleep_ns(POLL_NS);
    }
    return true;
}

static const lmc_replay_pacer_ops g_realtime = {realtime_start, realtime_wait, realtime_run_until};

/* ---------------------------------------------------------------------- */
/* Virtual                                                                 */
/* ---------------------------------------------------------------------- */

static void virtual_start(lmc_replay_pacer *p)
{
    p->origin_ns = lmc_sm_now_ns(p->sm);
}

/* Advance to the next pending event; false when there is none. */
static bool virtual_step(lmc_replay_pacer *p, uint64_t limit_ns)
{
    uint64_t e = lmc_sm_next_event_ns(p->sm);
    if (e > limit_ns)
        return false;
    lmc_sm_advance_to(p->sm, e);
    lmc_replay_ctx_poll_prefetches(p->ctx);
    return true;
}

static bool virtual_wait(lmc_replay_pacer *p, uint64_t due_ns, uint64_t *late_ns)
{
    uint64_t due = p->origin_ns + due_ns;
    while (virtual_step(p, due)) {
    }
    lmc_sm_advance_to(p->sm, due);
    *late_ns = 0;
    return false;
}

static bool virtual_run_until(lmc_replay_pacer *p, bool (*done)(void *ud), void *ud,
                              uint32_t timeout_ms)
{
    /* Time is virtual; timeout_ms bounds the host's work, as in lmc_sm_wait_idle. */
    uint64_t deadline = lmc_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    while (!done(ud)) {
        /*
         * With nothing pending in the StorageManager only eviction passes
         * are left, and they finish no prefetch: stop rather than run them
         * for ever.
         */
        if (lmc_sm_wait_idle(p->sm, 0) || !virtual_step(p, UINT64_MAX) ||
            lmc_mono_ns() >= deadline)
            return done(ud);
    }
    return true;
}

static const lmc_replay_pacer_ops g_virtual = {virtual_start, virtual_wait, virtual_run_until};

/* ---------------------------------------------------------------------- */
/* The interface                                                           */
/* ---------------------------------------------------------------------- */

void lmc_replay_pacer_init(lmc_replay_pacer *p, lmc_replay_pace pace, lmc_storage_manager *sm,
                           lmc_replay_ctx *ctx)
{
    memset(p, 0, sizeof(*p));
    p->ops = pace == LMC_REPLAY_PACE_VIRTUAL ? &g_virtual : &g_realtime;
    p->pace = pace;
    p->sm = sm;
    p->ctx = ctx;
}

void lmc_replay_pacer_start(lmc_replay_pacer *p)
{
    p->ops->start(p);
}

bool lmc_replay_pacer_wait(lmc_replay_pacer *p, uint64_t due_ns, uint64_t *late_ns)
{
    return p->ops->wait(p, due_ns, late_ns);
}

bool lmc_replay_pacer_run_until(lmc_replay_pacer *p, bool (*done)(void *ud), void *ud,
                                uint32_t timeout_ms)
{
    return p->ops->run_until(p, done, ud, timeout_ms);
}

static bool no_prefetch_pending(void *ud)
{
    return lmc_replay_ctx_poll_prefetches(ud) == 0;
}

void lmc_replay_pacer_drain(lmc_replay_pacer *p, uint32_t timeout_ms)
{
    if (!lmc_replay_pacer_run_until(p, no_prefetch_pending, p->ctx, timeout_ms))
        LMC_WARN(LOG_COMP, "trace replay: %zu prefetch(es) still running after %u ms",
                 lmc_replay_ctx_poll_prefetches(p->ctx), timeout_ms);
    if (!lmc_sm_wait_idle(p->sm, timeout_ms))
        LMC_WARN(LOG_COMP, "trace replay: the StorageManager was still busy after %u ms",
                 timeout_ms);
}
