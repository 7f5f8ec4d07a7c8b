/*
 * bench_trace.c -- `lmcache bench micro trace`: what capture costs the
 * caller, how fast the recorder drains, and an LTTng-UST tracepoint
 * measured side by side in the same run.
 *
 * Metrics (DESIGN.md section 5 targets in brackets):
 *   off_overhead_ns         LMC_TRACE(FINISH_WRITE) with the gate off, per call,
 *                           minus the same loop without it [<= 1 ns]
 *   on_caller_1key_ns       reserve_write capture of 1 key, gate on, midmean
 *   on_caller_16keys_ns     the same with 16 keys [<= 150 ns]
 *   clock_gettime_ns        one clock_gettime(CLOCK_MONOTONIC), timed like the calls:
 *                           the stamp's cost where the bus cannot use the TSC
 *   tsc_read_ns             one TSC read, the same way: the stamp's cost where it can
 *   copy_16keys_ns          a plain memcpy of as many bytes as the 16-key capture
 *                           writes, into a buffer that stays in L1, timed the same
 *                           way in the same trial: the control. Where it moves
 *                           between trials, the core's store speed moved, not the
 *                           capture (docs/benchmarks.md, "What moves the 16-key
 *                           figure")
 *   drain_records_per_s     16-key records decoded, encoded and written by the
 *                           final drain of a prefilled bus [>= 1 M/s]
 *   drain_ceiling_records_per_s  the same bytes written by a bare loop in writes
 *                           of the same size to the same file system, right
 *                           after each drain
 *   drain_to_ceiling        drain / ceiling, per pair [>= 0.9]; DRAIN_PAIRS
 *                           pairs per trial, since one pair is short (~0.3 s)
 *                           and the ceiling alone moves 2x between pairs
 *   drain_encoder_busy      the encoder's CPU time / the drain's elapsed time: near
 *                           1, the encoder bounds the drain; well under 1, the
 *                           writer does (it waits for the writer's write(2)s)
 *   drain_writer_cpu_to_ceiling  the writer thread's CPU time / the bare loop's,
 *                           for the same bytes in writes of the same size: what
 *                           the recorder's writes cost over the bare ones (part
 *                           of it is reading batches another core encoded;
 *                           docs/benchmarks.md says what else)
 *   drain_write_bytes_avg   file bytes / write batches of that drain [>= 64 KiB]
 *   drain_record_bytes_avg  file bytes / records (LMCache's layout)
 *   lttng_event_ns          one LTTng-UST tracepoint carrying the 16-key call's
 *                           bytes, in an active session, midmean (see time_calls)
 *   lttng_event_1key_ns     the same with 1 key
 *   lttng_ratio_16keys      on_caller_16keys_ns / lttng_event_ns (lower: we are cheaper)
 *   lttng_event_disabled_ns instead of the three above, when no session could
 *                           be set up: the tracepoint's cost with nothing enabled
 *   on_caller_16keys_other_prefetch_ns  the 16-key call on a second bus whose commits
 *                           prefetch the next slots the other way from this CPU's
 *                           default (event_bus.c, choose_prefetch), same trials
 *   prefetch_choice_ratio   on_caller_16keys_ns / the above, per trial: below 1, the
 *                           default is the right choice on this CPU
 *
 * Caller-side costs are timed one call at a time with the monotonic clock
 * (the midmean cost of a clock read is subtracted), paced GAP_NS apart
 * (100 k calls/s, the sustained rate of DESIGN.md) in bursts of BURST
 * calls with a pause after each, so the drain (ours: the bus thread and
 * the recorder; LTTng's: its consumer daemon) keeps up and the figure is
 * the caller's path, not a full ring. Both sides are called through a
 * function pointer, so both pay the same indirect call, and both copy the
 * same bytes: the LTTng event carries the key structs as the in-process
 * capture copies them (1,792 bytes for 16 keys), plus the layout's dims.
 *
 * The LTTng side runs in a forked child that dlopen()s the provider
 * (lttng_tp.h), so liblttng-ust's threads end with the child and this
 * process stays as it was. The parent starts a private lttng-sessiond
 * (LTTNG_HOME in a temporary directory) unless one is already reachable,
 * creates a session writing there, and afterwards destroys the session,
 * stops the daemon it started and removes what it created. Every external
 * command runs under timeout(1) and every wait is bounded.
 *
 * Trace files go to /dev/shm when it is writable (tmpfs, like the target
 * says), else $TMPDIR or /tmp, and are removed.
 *
 * On a guest whose kernel hands freed memory back to its host (free page
 * reporting, /sys/module/page_reporting), a page touched again after that
 * faults on the host, inside whichever write(2) or copy touches it; drains
 * and ceilings then slow down 2-10x at random. The drain trials free about
 * 700 MB each (ring, trace file, the ceiling's file), so this happens. The
 * group says on stderr how much the guest reported during its drain
 * trials (docs/benchmarks.md, "A guest with a coarse clock that hands memory back").
 *
 * Threads: the calling thread, the event bus's drain thread, the
 * recorder's writer thread, and a child process for LTTng. Not reentrant
 * (the trace gate is process-wide).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "core/clock.h"
#include "core/samples.h"
#include "lmcache/types.h"
#include "lttng_tp.h"
#include "obs/event_bus.h"
#include "trace/capture.h"
#include "trace/lifecycle.h"
#include "trace/recorder.h"

extern char **environ;

#define NKEYS 16
#define MODEL "meta-llama/Llama-3.1-8B"
#define BURST 1000        /* calls between pauses */
#define GAP_NS 10000u     /* between timed calls: 100 k calls/s, the sustained rate of DESIGN.md */
#define PAUSE_NS 2000000u /* after each burst */
#define DRAIN_WAIT_NS 1000000000u
#define CALL_VARIANTS 64 /* distinct key sets the drain benchmark cycles through */
#define DRAIN_PAIRS 3    /* drain + ceiling pairs per trial */

/* ------------------------------------------------------------------------ */
/* Calls and timing                                                          */
/* ------------------------------------------------------------------------ */

typedef struct call_args {
    lmc_object_key keys[NKEYS];
    size_t n;
    lmc_layout_desc layout;
    int64_t dims[4];
} call_args;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* n keys with 32-byte chunk hashes, one bf16 tensor of a 256-token chunk. */
static void make_call(call_args *c, size_t n, uint64_t seed)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    for (size_t i = 0; i < n; i++) {
        uint8_t h[32];
        for (size_t w = 0; w < 4; w++) {
            uint64_t v = mix64(seed * 1000003u + i * 4 + w);
            memcpy(h + 8 * w, &v, 8);
        }
        lmc_object_key_make(&c->keys[i], h, sizeof(h), MODEL, 0, 0, "", NULL);
    }
    int64_t dims[4] = {2, 32, 256, 1024};
    memcpy(c->dims, dims, sizeof(dims));
    lmc_layout_desc_make1(&c->layout, c->dims, 4, LMC_DTYPE_BFLOAT16, NULL);
}

/* The traced call as the StorageManager makes it (gate check included). */
static void emit_ours(void *arg)
{
    const call_args *c = arg;
    LMC_TRACE(RESERVE_WRITE, .keys = c->keys, .n_keys = c->n, .layout = &c->layout,
              .mode = LMC_WRITE_NEW);
}

typedef void (*emit_fn)(void *arg);

/* The control copy's buffers (see copy_16keys_ns): both stay in L1. */
#define COPY_SRC_BYTES 4096
#define COPY_DST_BYTES 16384
typedef struct copy_args {
    _Alignas(64) unsigned char src[COPY_SRC_BYTES];
    _Alignas(64) unsigned char dst[COPY_DST_BYTES + COPY_SRC_BYTES];
    size_t len; /* <= COPY_SRC_BYTES */
    size_t at;  /* where the next copy lands: it moves on, as ring slots do */
} copy_args;

static void emit_copy(void *arg)
{
    copy_args *c = arg;
    memcpy(c->dst + c->at, c->src, c->len);
    __asm__ __volatile__("" : : "r"(c->dst) : "memory");
    c->at += (c->len + 63) & ~(size_t)63;
    if (c->at >= COPY_DST_BYTES)
        c->at = 0;
}

/* The two clocks a capture may stamp with, alone (the floor under the figures above). */
static void emit_clock_gettime(void *arg)
{
    (void)arg;
    uint64_t volatile t = lmc_mono_ns();
    (void)t;
}

static void emit_tsc_read(void *arg)
{
    (void)arg;
    uint64_t volatile t = lmc_tsc_read();
    (void)t;
}

/* The baseline of time_calls: the same indirect call and clock reads, no work. */
__attribute__((noinline)) static void emit_nothing(void *arg)
{
    __asm__ __volatile__("" : : "r"(arg) : "memory");
}

static void spin_until(uint64_t t)
{
    while (lmc_mono_ns() < t) {
    }
}

/* Between bursts: wait (bounded) for our bus to empty, then pause. */
static void burst_pause(lmc_event_bus *bus)
{
    if (bus != NULL) {
        uint64_t deadline = lmc_mono_ns() + DRAIN_WAIT_NS;
        while (lmc_event_bus_queued(bus) > 0 && lmc_mono_ns() < deadline)
            lmc_sleep_ns(20000);
    }
    lmc_sleep_ns(PAUSE_NS);
}

/*
 * A pause of 0-63 empty iterations (about 0-25 ns), different for each
 * call: after spin_until, every call would start at the same distance from
 * a clock tick, and where the clock ticks coarsely (this guest's TSC moves
 * 26 cycles, 10 ns, at a time) the same rounding would land on every call.
 */
static void dither(size_t i)
{
    for (unsigned k = (unsigned)(i * 37u) % 64u; k > 0; k--)
        __asm__ __volatile__("");
}

/*
 * One trial: the midmean (mean of the middle half) of iters calls of
 * fn(arg), each timed alone, minus the midmean of as many timed calls of
 * emit_nothing interleaved with them (one before each), clamped at 0. The
 * baseline is measured pairwise, call by call, because what a clock read
 * costs moves with the host (the other hyperthread of the physical core,
 * frequency): a baseline measured once per run was off by up to 60 ns in
 * some runs. The midmean, not the p50: on a clock with 10 ns ticks, the p50
 * of a 50 ns call is a whole number of ticks and moved by one tick (20 %)
 * from run to run; the midmean, over dithered start times, does not round.
 * ns has room for 2 * iters values. One untimed burst first.
 */
static double time_calls(emit_fn fn, void *arg, size_t iters, double *ns, lmc_event_bus *bus)
{
    emit_fn volatile call = fn; /* an indirect call on both sides */
    emit_fn volatile nothing = emit_nothing;
    for (size_t i = 0; i < BURST; i++) {
        call(arg);
        spin_until(lmc_mono_ns() + GAP_NS);
    }
    burst_pause(bus);
    double *base = ns + iters;
    for (size_t i = 0; i < iters; i++) {
        dither(i);
        uint64_t t0 = lmc_mono_ns();
        nothing(arg);
        uint64_t t1 = lmc_mono_ns();
        call(arg);
        uint64_t t2 = lmc_mono_ns();
        base[i] = (double)(t1 - t0);
        ns[i] = (double)(t2 - t1);
        if ((i + 1) % BURST == 0)
            burst_pause(bus);
        else
            spin_until(t2 + GAP_NS);
    }
    lmc_sort_doubles(ns, iters);
    lmc_sort_doubles(base, iters);
    double mid = lmc_midmean(ns, iters) - lmc_midmean(base, iters);
    return mid > 0 ? mid : 0;
}

/* Where trace files go: tmpfs when we can write there. */
static const char *scratch_dir(void)
{
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    const char *t = getenv("TMPDIR");
    return t != NULL && *t != '\0' && strchr(t, '\'') == NULL ? t : "/tmp";
}

/* ------------------------------------------------------------------------ */
/* Gate off                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * The two loops differ only in the hook; the asm keeps each iteration real.
 * Both start on a 64-byte boundary, so where the linker happens to place
 * them cannot put one loop across a 32-byte fetch boundary (a jump there
 * costs about a nanosecond per iteration on some x86 cores) and not the
 * other: the difference stays the hook's.
 */
__attribute__((noinline, aligned(64))) static uint64_t loop_plain(const lmc_object_key *keys,
                                                                  uint64_t n)
{
    uint64_t t0 = lmc_mono_ns();
    for (uint64_t i = 0; i < n; i++)
        __asm__ __volatile__("" : : "r"(keys) : "memory");
    return lmc_mono_ns() - t0;
}

__attribute__((noinline, aligned(64))) static uint64_t loop_hooked(const lmc_object_key *keys,
                                                                   uint64_t n)
{
    uint64_t t0 = lmc_mono_ns();
    for (uint64_t i = 0; i < n; i++) {
        LMC_TRACE(FINISH_WRITE, .keys = keys, .n_keys = 1);
        __asm__ __volatile__("" : : "r"(keys) : "memory");
    }
    return lmc_mono_ns() - t0;
}

/*
 * ns per call added by the hook with the gate off. The difference is
 * within the noise of a loop iteration, so it can come out negative: it is
 * clamped at 0 (the hook cannot make a loop faster).
 */
static double bench_off_overhead(const call_args *c, uint64_t n, int rep)
{
    lmc_trace_set_enabled(false);
    uint64_t plain, hooked;
    if (rep % 2 == 0) { /* alternate the order: neither loop always runs first */
        plain = loop_plain(c->keys, n);
        hooked = loop_hooked(c->keys, n);
    } else {
        hooked = loop_hooked(c->keys, n);
        plain = loop_plain(c->keys, n);
    }
    double d = ((double)hooked - (double)plain) / (double)n;
    return d > 0 ? d : 0;
}

/* ------------------------------------------------------------------------ */
/* Gate on: a bus and the real recorder                                      */
/* ------------------------------------------------------------------------ */

typedef struct tracing {
    lmc_event_bus *bus;
    lmc_trace_recorder *rec;
    char path[PATH_MAX];
} tracing;

/* A bus and its recorder, writing lmcache-bench-trace-<pid><tag>.lct. */
static int tracing_start(tracing *t, size_t max_queue, bool start_drain,
                         lmc_event_bus_prefetch prefetch, const char *tag)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->path, sizeof(t->path), "%s/lmcache-bench-trace-%d%s.lct", scratch_dir(),
             (int)getpid(), tag);
    lmc_event_bus_config cfg = {.enabled = true, .max_queue_size = max_queue, .prefetch = prefetch};
    lmc_error err;
    if (lmc_event_bus_create(&cfg, &t->bus, &err) != LMC_OK) {
        fprintf(stderr, "bench trace: %s\n", err.msg);
        return -1;
    }
    if (lmc_trace_maybe_init(t->bus, "storage", t->path, "{}", "", &t->rec, &err) != LMC_OK) {
        fprintf(stderr, "bench trace: %s\n", err.msg);
        lmc_event_bus_destroy(t->bus);
        t->bus = NULL;
        return -1;
    }
    if (start_drain && lmc_event_bus_start(t->bus) != LMC_OK) {
        fprintf(stderr, "bench trace: cannot start the event bus\n");
        lmc_event_bus_stop(t->bus);
        lmc_trace_capture_set_bus(NULL);
        lmc_trace_recorder_destroy(t->rec);
        lmc_event_bus_destroy(t->bus);
        unlink(t->path);
        t->bus = NULL;
        return -1;
    }
    return 0;
}

/* Stop (final drain, then the recorder closes and turns the gate off). */
static void tracing_end(tracing *t)
{
    if (t->bus == NULL)
        return;
    lmc_event_bus_stop(t->bus);
    lmc_trace_capture_set_bus(NULL);
    lmc_trace_recorder_destroy(t->rec);
    lmc_event_bus_destroy(t->bus);
    unlink(t->path);
    t->bus = NULL;
    t->rec = NULL;
}

/* One trial of the 16-key call with captures sent to alt's bus, then back to t's. */
static double time_other_prefetch(tracing *t, tracing *alt, const call_args *c, size_t iters,
                                  double *ns)
{
    lmc_trace_capture_set_bus(alt->bus);
    double x = time_calls(emit_ours, (void *)c, iters, ns, alt->bus);
    lmc_trace_capture_set_bus(t->bus);
    return x;
}

typedef struct drain_result {
    double records_per_s;
    double ceiling_records_per_s;
    double encoder_busy;      /* calling thread's CPU / elapsed, during the drain */
    double writer_to_ceiling; /* writer CPU during the drain / the bare loop's CPU */
    double write_bytes_avg;
    double record_bytes_avg;
} drain_result;

/* The drain_result fields reported as they are, one metric each, in this order. */
static const struct {
    const char *metric;
    size_t offset;
    const char *unit;
} drain_fields[] = {
    {"drain_encoder_busy", offsetof(drain_result, encoder_busy), "x"},
    {"drain_writer_cpu_to_ceiling", offsetof(drain_result, writer_to_ceiling), "x"},
    {"drain_write_bytes_avg", offsetof(drain_result, write_bytes_avg), "B"},
    {"drain_record_bytes_avg", offsetof(drain_result, record_bytes_avg), "B"},
};

/* CPU seconds of the calling thread (RUSAGE_THREAD) or of the whole process (RUSAGE_SELF). */
static double cpu_s(int who)
{
    struct rusage u;
    if (getrusage(who, &u) != 0)
        return 0;
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/*
 * KiB the guest has reported to its host as free since boot (free page
 * reporting, where the kernel has it and shows the count), or -1.
 */
static double reported_kib(void)
{
    FILE *f = fopen("/sys/module/page_reporting/parameters/reported_kib", "re");
    if (f == NULL)
        return -1;
    double kib = -1;
    if (fscanf(f, "%lf", &kib) != 1)
        kib = -1;
    fclose(f);
    return kib;
}

/*
 * The file system's own ceiling for a drain: the same bytes written by a
 * bare loop, in writes of the same size, to a fresh file beside the trace,
 * then fsync'd and closed as the recorder's close does. Seconds, or < 0;
 * *cpu gets the loop's CPU seconds.
 */
static double bare_write_s(const char *beside, uint64_t bytes, size_t write_size, double *cpu)
{
    char path[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s.bare", beside);
    unsigned char *buf = malloc(write_size);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    double s = -1;
    if (buf != NULL && fd >= 0) {
        memset(buf, 0x5a, write_size); /* faulted in before the clock starts */
        double cpu0 = cpu_s(RUSAGE_THREAD);
        uint64_t t0 = lmc_mono_ns();
        uint64_t left = bytes;
        while (left > 0) {
            size_t k = left < write_size ? (size_t)left : write_size;
            ssize_t w = write(fd, buf, k);
            if (w <= 0)
                break;
            left -= (uint64_t)w;
        }
        bool good = left == 0 && fsync(fd) == 0;
        good = close(fd) == 0 && good;
        fd = -1;
        if (good) {
            s = (double)(lmc_mono_ns() - t0) / 1e9;
            *cpu = cpu_s(RUSAGE_THREAD) - cpu0;
        }
    }
    if (fd >= 0)
        close(fd);
    unlink(path);
    free(buf);
    return s;
}

/*
 * Prefill an unstarted bus with n 16-key reserve_write captures, then time
 * lmc_event_bus_stop: the final drain through the recorder to the file,
 * and its close (flush, fsync). The final drain runs on this thread, so
 * this thread's CPU time is the encoder's, and the rest of the process's
 * is the writer's (no other thread of ours runs meanwhile).
 */
static int bench_drain(const call_args *calls, size_t n, drain_result *out)
{
    tracing t;
    if (tracing_start(&t, n + 64, false, LMC_EVENT_BUS_PREFETCH_AUTO, "") != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const call_args *c = &calls[i % CALL_VARIANTS];
        LMC_TRACE(RESERVE_WRITE, .keys = c->keys, .n_keys = c->n, .layout = &c->layout,
                  .mode = LMC_WRITE_NEW);
    }
    uint64_t dropped = lmc_event_bus_dropped(t.bus);
    double enc0 = cpu_s(RUSAGE_THREAD), all0 = cpu_s(RUSAGE_SELF);
    uint64_t t0 = lmc_mono_ns();
    lmc_event_bus_stop(t.bus);
    uint64_t elapsed = lmc_mono_ns() - t0;
    double enc = cpu_s(RUSAGE_THREAD) - enc0, writer = cpu_s(RUSAGE_SELF) - all0 - enc;
    uint64_t records = lmc_trace_recorder_records(t.rec);
    uint64_t writes = lmc_trace_recorder_writes(t.rec);
    struct stat st;
    off_t size = stat(t.path, &st) == 0 ? st.st_size : 0;
    tracing_end(&t);
    if (dropped > 0 || records != n)
        fprintf(stderr, "bench trace: drain wrote %llu of %zu records (%llu dropped at publish)\n",
                (unsigned long long)records, n, (unsigned long long)dropped);
    if (records == 0 || writes == 0 || elapsed == 0)
        return -1;
    out->records_per_s = (double)records / ((double)elapsed / 1e9);
    out->write_bytes_avg = (double)size / (double)writes;
    out->record_bytes_avg = (double)size / (double)records;
    double bare_cpu = 0;
    double bare = bare_write_s(t.path, (uint64_t)size, (size_t)out->write_bytes_avg, &bare_cpu);
    if (bare <= 0)
        return -1;
    out->ceiling_records_per_s = (double)records / bare;
    out->encoder_busy = enc / ((double)elapsed / 1e9);
    /* getrusage counts in microseconds at best: a bare loop this short may read 0. */
    out->writer_to_ceiling = bare_cpu > 0 ? writer / bare_cpu : 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* LTTng-UST                                                                 */
/* ------------------------------------------------------------------------ */

#ifdef LMC_HAVE_LTTNG

#define CMD_TIMEOUT "timeout -k 2 20 "
#define SESSIOND_READY_NS 10000000000ull
#define ENABLE_WAIT_NS 5000000000ull
#define LTTNG_WHY_MAX 160

typedef struct lttng_env {
    char dir[PATH_MAX]; /* private LTTNG_HOME and session output; "" if none */
    char session[64];
    bool created;     /* our session exists */
    pid_t sessiond;   /* the daemon we started, or 0 */
    char *saved_home; /* LTTNG_HOME before us (malloc'd), or NULL */
    bool had_home;
    bool had_rundir; /* /var/run/lttng existed before */
    char **had_shm;  /* lttng-ust-wait-* in /dev/shm before */
    size_t n_had_shm;
} lttng_env;

/* What the child reports (in shared memory). */
enum { LTTNG_FAILED = 0, LTTNG_ACTIVE, LTTNG_DISABLED };
typedef struct lttng_shared {
    int state;
    char why[LTTNG_WHY_MAX];
    double v[]; /* [0, reps): 16 keys; [reps, 2 reps): 1 key (or disabled cost) */
} lttng_shared;

/* Run a shell command under timeout, output appended to our log. */
static bool sh(const lttng_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool sh(const lttng_env *e, const char *fmt, ...)
{
    char cmd[2 * PATH_MAX + 512];
    int k = snprintf(cmd, sizeof(cmd), CMD_TIMEOUT);
    va_list ap;
    va_start(ap, fmt);
    k += vsnprintf(cmd + k, sizeof(cmd) - (size_t)k, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof(cmd) - PATH_MAX - 32)
        return false;
    if (e->dir[0] != '\0')
        snprintf(cmd + k, sizeof(cmd) - (size_t)k, " >>'%s/lttng.log' 2>&1", e->dir);
    else
        snprintf(cmd + k, sizeof(cmd) - (size_t)k, " >/dev/null 2>&1");
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void snapshot_shm(lttng_env *e)
{
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "lttng-ust-wait-", 15) != 0)
            continue;
        char **grown = realloc(e->had_shm, (e->n_had_shm + 1) * sizeof(*grown));
        if (grown == NULL)
            break;
        e->had_shm = grown;
        e->had_shm[e->n_had_shm] = strdup(de->d_name);
        if (e->had_shm[e->n_had_shm] != NULL)
            e->n_had_shm++;
    }
    closedir(d);
}

/* liblttng-ust and the daemon leave their wait files; remove the ones we caused. */
static void remove_new_shm(lttng_env *e)
{
    DIR *d = opendir("/dev/shm");
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strncmp(de->d_name, "lttng-ust-wait-", 15) != 0)
                continue;
            bool had = false;
            for (size_t i = 0; i < e->n_had_shm && !had; i++)
                had = strcmp(e->had_shm[i], de->d_name) == 0;
            if (!had) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "/dev/shm/%s", de->d_name);
                unlink(p);
            }
        }
        closedir(d);
    }
    for (size_t i = 0; i < e->n_had_shm; i++)
        free(e->had_shm[i]);
    free(e->had_shm);
    e->had_shm = NULL;
    e->n_had_shm = 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static bool child_exited(pid_t pid, uint64_t timeout_ns, int *status)
{
    uint64_t deadline = lmc_mono_ns() + timeout_ns;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return true;
        if (lmc_mono_ns() >= deadline)
            return false;
        lmc_sleep_ns(10000000);
    }
}

static void stop_process(pid_t pid)
{
    int status;
    kill(pid, SIGTERM);
    if (!child_exited(pid, 5000000000ull, &status)) {
        kill(pid, SIGKILL);
        child_exited(pid, 2000000000ull, &status);
    }
}

/*
 * Make a session with lmcache_bench:call enabled, started; on failure,
 * write why and leave e ready for lttng_session_end.
 */
static bool lttng_session_begin(lttng_env *e, char *why, size_t whylen)
{
    memset(e, 0, sizeof(*e));
    const char *home = getenv("LTTNG_HOME");
    e->had_home = home != NULL;
    e->saved_home = home ? strdup(home) : NULL;
    struct stat st;
    e->had_rundir = stat("/var/run/lttng", &st) == 0;
    snapshot_shm(e);

    snprintf(e->dir, sizeof(e->dir), "%s/lmcache-bench-lttng-XXXXXX", scratch_dir());
    if (mkdtemp(e->dir) == NULL) {
        e->dir[0] = '\0';
        snprintf(why, whylen, "cannot create a temporary directory");
        return false;
    }
    /* Our lttng client, daemon and (later) the child's liblttng-ust meet here. */
    setenv("LTTNG_HOME", e->dir, 1);
    if (!sh(e, "sh -c 'command -v lttng && command -v lttng-sessiond'")) {
        snprintf(why, whylen,
                 "lttng or lttng-sessiond not installed (apt-get install "
                 "lttng-tools); disabled tracepoint measured instead");
        return false;
    }
    if (!sh(e, "lttng list")) {
        char log[PATH_MAX + 32];
        snprintf(log, sizeof(log), "%s/sessiond.log", e->dir);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        char *argv[] = {"lttng-sessiond", "--no-kernel", NULL};
        pid_t pid;
        int rc = posix_spawnp(&pid, "lttng-sessiond", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) {
            snprintf(why, whylen, "cannot start lttng-sessiond: %s", strerror(rc));
            return false;
        }
        e->sessiond = pid;
        uint64_t deadline = lmc_mono_ns() + SESSIOND_READY_NS;
        bool ready = false;
        while (!ready && lmc_mono_ns() < deadline) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                e->sessiond = 0;
                snprintf(why, whylen,
                         "lttng-sessiond exited at start (another root session "
                         "daemon, or no permission?)");
                return false;
            }
            ready = sh(e, "lttng list");
            if (!ready)
                lmc_sleep_ns(100000000);
        }
        if (!ready) {
            snprintf(why, whylen, "lttng-sessiond did not become ready within 10 s");
            return false;
        }
    }
    snprintf(e->session, sizeof(e->session), "lmcache-bench-%d", (int)getpid());
    if (!sh(e, "lttng create %s --output='%s/trace'", e->session, e->dir)) {
        snprintf(why, whylen, "lttng create failed");
        return false;
    }
    e->created = true;
    /* Room for several bursts per CPU, so the consumer never makes us discard. */
    if (!sh(e, "lttng enable-channel -u -s %s --subbuf-size=4M --num-subbuf=4 lmcbench",
            e->session) ||
        !sh(e, "lttng enable-event -u -s %s -c lmcbench 'lmcache_bench:call'", e->session) ||
        !sh(e, "lttng start %s", e->session)) {
        snprintf(why, whylen, "lttng enable-channel, enable-event or start failed");
        return false;
    }
    return true;
}

/* Events the session discarded (from `lttng list`), or 0 if unknown. */
static uint64_t lttng_discarded(const lttng_env *e)
{
    if (!sh(e, "sh -c \"lttng list %s > '%s/list.txt'\"", e->session, e->dir))
        return 0;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof(p), "%s/list.txt", e->dir);
    FILE *f = fopen(p, "r");
    if (f == NULL)
        return 0;
    char line[512];
    uint64_t total = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *s = strstr(line, "Discarded events:");
        if (s != NULL)
            total += strtoull(s + 17, NULL, 10);
    }
    fclose(f);
    return total;
}

/* Bytes in the files under dir (the recorded trace). */
static uint64_t dir_bytes(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (d == NULL || depth > 8) {
        if (d != NULL)
            closedir(d);
        return 0;
    }
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= sizeof(p) ||
            lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            total += dir_bytes(p, depth + 1);
        else if (S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* Stop and destroy the session (its discarded count and trace size first),
 * stop our daemon, remove what we created, restore LTTNG_HOME. */
static void lttng_session_end(lttng_env *e, uint64_t *discarded, uint64_t *trace_bytes)
{
    if (e->created) {
        sh(e, "lttng stop %s", e->session);
        *discarded = lttng_discarded(e);
        char p[PATH_MAX + 16];
        snprintf(p, sizeof(p), "%s/trace", e->dir);
        *trace_bytes = dir_bytes(p, 0);
        sh(e, "lttng destroy %s", e->session);
    }
    if (e->sessiond > 0)
        stop_process(e->sessiond);
    if (e->dir[0] != '\0')
        nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (e->sessiond > 0 && !e->had_rundir)
        rmdir("/var/run/lttng"); /* only if the daemon left it empty */
    remove_new_shm(e);
    if (e->had_home)
        setenv("LTTNG_HOME", e->saved_home, 1);
    else
        unsetenv("LTTNG_HOME");
    free(e->saved_home);
    e->saved_home = NULL;
}

static void *open_provider(char *why, size_t whylen)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n > 0) {
        path[n] = '\0';
        char *slash = strrchr(path, '/');
        if (slash != NULL &&
            (size_t)(slash - path) + sizeof(LMC_BENCH_LTTNG_SO) + 1 < sizeof(path)) {
            strcpy(slash + 1, LMC_BENCH_LTTNG_SO);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h != NULL)
                return h;
        }
    }
#ifdef LMC_BENCH_LTTNG_SO_PATH
    void *h = dlopen(LMC_BENCH_LTTNG_SO_PATH, RTLD_NOW | RTLD_LOCAL);
    if (h != NULL)
        return h;
#endif
    snprintf(why, whylen, "cannot load %s next to the executable", LMC_BENCH_LTTNG_SO);
    return NULL;
}

/*
 * The child and the parent take turns, one trial each at a time, so that
 * both sides of lttng_ratio_16keys see the same machine: the parent
 * writes a trial number (-1: the warm-up) to `go`, the child measures
 * that trial and answers with one byte on `done`. A closed `go` ends it.
 */
typedef struct lttng_run {
    lttng_shared *out;
    size_t shm_len;
    int reps;
    pid_t pid; /* the child, or -1 */
    int go, done;
    bool ready; /* the child answered its first byte: it is measuring */
    lttng_env env;
    call_args c16, c1;
} lttng_run;

/* Wait (bounded) for the child's byte on fd; false on timeout or EOF. */
static bool child_byte(int fd, uint64_t timeout_ns)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t deadline = lmc_mono_ns() + timeout_ns;
    for (;;) {
        uint64_t now = lmc_mono_ns();
        if (now >= deadline)
            return false;
        int rc = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return false;
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        return n == 1;
    }
}

/* The child: load the provider (registers with the daemon), then measure on request. */
static void lttng_child(lttng_run *run, size_t iters, uint64_t loop_n, bool session_ok)
{
    lttng_shared *sh_out = run->out;
    int reps = run->reps;
    void *so = open_provider(sh_out->why, sizeof(sh_out->why));
    if (so == NULL)
        _exit(1);
    lmc_bench_lttng_emit_fn emit = (lmc_bench_lttng_emit_fn)dlsym(so, LMC_BENCH_LTTNG_EMIT);
    lmc_bench_lttng_loop_fn loop = (lmc_bench_lttng_loop_fn)dlsym(so, LMC_BENCH_LTTNG_LOOP);
    lmc_bench_lttng_enabled_fn enabled =
        (lmc_bench_lttng_enabled_fn)dlsym(so, LMC_BENCH_LTTNG_ENABLED);
    if (emit == NULL || loop == NULL || enabled == NULL) {
        snprintf(sh_out->why, sizeof(sh_out->why), "%s lacks its entry points", LMC_BENCH_LTTNG_SO);
        _exit(1);
    }
    const call_args *c16 = &run->c16, *c1 = &run->c1;
    lmc_bench_lttng_call l16 = {.op = LMC_TRACE_OP_RESERVE_WRITE,
                                .mode = LMC_WRITE_NEW,
                                .dtype = LMC_DTYPE_BFLOAT16,
                                .ndim = 4,
                                .dims = c16->dims,
                                .keys = c16->keys,
                                .keys_len = (uint32_t)(c16->n * sizeof(lmc_object_key))};
    lmc_bench_lttng_call l1 = l16;
    l1.dims = c1->dims;
    l1.keys = c1->keys;
    l1.keys_len = (uint32_t)(c1->n * sizeof(lmc_object_key));

    if (session_ok) {
        uint64_t deadline = lmc_mono_ns() + ENABLE_WAIT_NS;
        while (!enabled() && lmc_mono_ns() < deadline)
            lmc_sleep_ns(10000000);
    }
    bool active = session_ok && enabled();
    if (session_ok && !active)
        snprintf(sh_out->why, sizeof(sh_out->why),
                 "the session did not enable the tracepoint within 5 s; disabled "
                 "tracepoint measured instead");
    double *ns = malloc(2 * iters * sizeof(*ns));
    if (ns == NULL)
        _exit(1);
    sh_out->state = active ? LTTNG_ACTIVE : LTTNG_DISABLED;
    char c = 'r';
    if (write(run->done, &c, 1) != 1)
        _exit(1);
    int r;
    while (read(run->go, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
        double a, b;
        if (active) {
            a = time_calls(emit, &l16, iters, ns, NULL);
            b = time_calls(emit, &l1, iters, ns, NULL);
        } else {
            double fired = (double)loop(loop_n, 1, &l16);
            double plain = (double)loop(loop_n, 0, &l16);
            a = 0;
            b = (fired - plain) / (double)loop_n;
            b = b > 0 ? b : 0;
        }
        if (r >= 0 && r < reps) {
            sh_out->v[r] = a;
            sh_out->v[reps + r] = b;
        }
        if (write(run->done, &c, 1) != 1)
            _exit(1);
    }
    free(ns);
    _exit(0);
}

/* Set up the session and start the measuring child; false (with a note) when it cannot run. */
static bool lttng_begin(const lmc_bench_ctx *ctx, lttng_run *run, size_t iters, uint64_t loop_n)
{
    memset(run, 0, sizeof(*run));
    run->pid = -1;
    run->go = run->done = -1;
    run->reps = ctx->repeats;
    run->shm_len = sizeof(lttng_shared) + 2 * (size_t)run->reps * sizeof(double);
    run->out = mmap(NULL, run->shm_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (run->out == MAP_FAILED) {
        run->out = NULL;
        lmc_bench_note(ctx, "lttng_event_ns", "cannot map memory for the measuring child");
        return false;
    }
    memset(run->out, 0, run->shm_len);
    make_call(&run->c16, NKEYS, 7);
    make_call(&run->c1, 1, 8);

    char why[LTTNG_WHY_MAX] = "";
    bool session_ok = lttng_session_begin(&run->env, why, sizeof(why));
    if (!session_ok && strstr(why, "instead") == NULL)
        strncat(why, "; disabled tracepoint measured instead", sizeof(why) - strlen(why) - 1);
    snprintf(run->out->why, sizeof(run->out->why), "%s", why);

    int go[2], done[2];
    if (pipe(go) != 0) {
        lmc_bench_note(ctx, "lttng_event_ns", "cannot make a pipe for the measuring child");
        return false;
    }
    if (pipe(done) != 0) {
        close(go[0]);
        close(go[1]);
        lmc_bench_note(ctx, "lttng_event_ns", "cannot make a pipe for the measuring child");
        return false;
    }
    fflush(NULL); /* nothing buffered may be written twice */
    run->pid = fork();
    if (run->pid == 0) {
        close(go[1]);
        close(done[0]);
        run->go = go[0];
        run->done = done[1];
        lttng_child(run, iters, loop_n, session_ok);
    }
    close(go[0]);
    close(done[1]);
    run->go = go[1];
    run->done = done[0];
    if (run->pid < 0) {
        lmc_bench_note(ctx, "lttng_event_ns", "cannot fork the measuring child");
        return false;
    }
    /* Generous: registration (3 s) and enabling (5 s). */
    run->ready = child_byte(run->done, 30000000000ull);
    return run->ready;
}

/* One trial of the child's (r = -1: the warm-up); false if it did not answer. */
static bool lttng_trial(lttng_run *run, int r)
{
    if (!run->ready)
        return false;
    run->ready = write(run->go, &r, sizeof(r)) == (ssize_t)sizeof(r) &&
                 child_byte(run->done, 20000000000ull);
    return run->ready;
}

/*
 * End the child and the session, then report the LTTng metrics; ours16[r]
 * is our 16-key figure of trial r (the other side of the ratio), n the
 * trials both sides completed.
 */
static void lttng_end(const lmc_bench_ctx *ctx, lttng_run *run, const double *ours16, size_t n,
                      size_t iters)
{
    bool measured = run->ready;
    int status = 0;
    bool exited = run->pid <= 0;
    if (run->go >= 0)
        close(run->go); /* the child's read sees EOF and it exits */
    if (run->pid > 0) {
        exited = child_exited(run->pid, 5000000000ull, &status);
        if (!exited) {
            kill(run->pid, SIGKILL);
            child_exited(run->pid, 2000000000ull, &status);
        }
    }
    if (run->done >= 0)
        close(run->done);
    uint64_t discarded = 0, trace_bytes = 0;
    lttng_session_end(&run->env, &discarded, &trace_bytes);
    lttng_shared *out = run->out;
    if (out == NULL)
        return;

    if (run->pid < 0) {
        /* noted by lttng_begin */
    } else if (!measured || !exited || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
               out->state == LTTNG_FAILED) {
        lmc_bench_note(ctx, "lttng_event_ns",
                       out->why[0] ? out->why : "the measuring child failed or timed out");
    } else if (out->state == LTTNG_ACTIVE) {
        int reps = run->reps;
        lmc_bench_report_trials(ctx, "lttng_event_ns", out->v, n, "ns");
        lmc_bench_report_trials(ctx, "lttng_event_1key_ns", out->v + reps, n, "ns");
        lmc_bench_report_ratio(ctx, "lttng_ratio_16keys", ours16, out->v, n, "x");
        /* The events must really have been recorded: about 1.9 KB per 16-key call. */
        uint64_t expect =
            (uint64_t)(reps + 1) * (iters + BURST) * run->c16.n * sizeof(lmc_object_key);
        if (discarded > 0 || trace_bytes < expect / 2)
            fprintf(stderr,
                    "bench trace: the LTTng session discarded %llu events and holds "
                    "%llu bytes (expected about %llu); lttng_event_ns may be "
                    "optimistic\n",
                    (unsigned long long)discarded, (unsigned long long)trace_bytes,
                    (unsigned long long)expect);
    } else {
        lmc_bench_report_trials(ctx, "lttng_event_disabled_ns", out->v + run->reps, n, "ns");
        lmc_bench_note(ctx, "lttng_event_ns", out->why);
    }
    munmap(out, run->shm_len);
}

#endif /* LMC_HAVE_LTTNG */

/* ------------------------------------------------------------------------ */
/* The group                                                                 */
/* ------------------------------------------------------------------------ */

int lmc_bench_group_trace(const lmc_bench_ctx *ctx)
{
    int reps = ctx->repeats;
    size_t iters = (size_t)(10000 * ctx->scale) + 1000;
    uint64_t loop_n = (uint64_t)(1e8 * ctx->scale) + 1000000;
    size_t drain_n = (size_t)(100000 * ctx->scale) + 5000;
    double *v = calloc((size_t)reps, sizeof(double));
    double *v1 = calloc((size_t)reps, sizeof(double));
    double *vclk = calloc((size_t)reps, sizeof(double));
    double *vtsc = calloc((size_t)reps, sizeof(double));
    double *vcopy = calloc((size_t)reps, sizeof(double));
    double *valt = calloc((size_t)reps, sizeof(double));
    copy_args *cp = aligned_alloc(64, sizeof(copy_args));
    double *ns = malloc(2 * iters * sizeof(double));
    call_args *calls = malloc(CALL_VARIANTS * sizeof(call_args));
    call_args *c1 = malloc(sizeof(call_args));
    drain_result *d = calloc((size_t)(DRAIN_PAIRS * reps), sizeof(*d));
    double *dfig = calloc((size_t)(2 * DRAIN_PAIRS * reps), sizeof(double));
    int rc = 1;
    if (v == NULL || v1 == NULL || vclk == NULL || vtsc == NULL || vcopy == NULL || valt == NULL ||
        cp == NULL || ns == NULL || calls == NULL || c1 == NULL || d == NULL || dfig == NULL)
        goto out;
    for (size_t i = 0; i < CALL_VARIANTS; i++)
        make_call(&calls[i], NKEYS, i + 1);
    make_call(c1, 1, 1000);
    memset(cp, 0x5a, sizeof(*cp));
    cp->at = 0;
    cp->len = lmc_trace_capture_bytes(&(const lmc_trace_capture_args){
        .keys = calls[0].keys, .n_keys = calls[0].n, .layout = &calls[0].layout});
    if (cp->len > COPY_SRC_BYTES)
        cp->len = COPY_SRC_BYTES;

    for (int r = 0; r < reps; r++)
        v[r] = bench_off_overhead(&calls[0], loop_n, r);
    lmc_bench_report_trials(ctx, "off_overhead_ns", v, (size_t)reps, "ns");

#ifdef LMC_HAVE_LTTNG
    /* The child first: forked before our bus exists, it shares none of our pages. */
    lttng_run lt;
    bool lttng = lttng_begin(ctx, &lt, iters, loop_n);
#endif
    /* A server's bus (default size), drained by its thread into the recorder,
     * and one like it with the write prefetch the other way (see
     * on_caller_16keys_other_prefetch_ns), which captures go to only while
     * its series is timed. */
    tracing t, alt;
    size_t n = 0; /* trials both sides completed */
    if (tracing_start(&t, 0, true, LMC_EVENT_BUS_PREFETCH_AUTO, "") == 0 &&
        tracing_start(&alt, 0, true,
                      lmc_event_bus_prefetches(t.bus) ? LMC_EVENT_BUS_PREFETCH_OFF
                                                      : LMC_EVENT_BUS_PREFETCH_ON,
                      "-alt") != 0) {
        tracing_end(&t);
    } else if (t.bus != NULL) {
        lmc_trace_capture_set_bus(t.bus);
        uint64_t dropped0 = lmc_event_bus_dropped(t.bus) + lmc_event_bus_dropped(alt.bus);
        /* Trial by trial: ours, then LTTng's (the other way round in odd trials),
         * after one warm-up trial of each (r = -1); the other prefetch's
         * series after ours, before it in odd trials. */
        for (int r = -1; r < reps; r++) {
#ifdef LMC_HAVE_LTTNG
            if (lttng && r % 2 != 0)
                lttng = lttng_trial(&lt, r);
#endif
            double other = 0;
            if (r % 2 != 0)
                other = time_other_prefetch(&t, &alt, &calls[0], iters, ns);
            double one = time_calls(emit_ours, c1, iters, ns, t.bus);
            double sixteen = time_calls(emit_ours, &calls[0], iters, ns, t.bus);
            if (r % 2 == 0)
                other = time_other_prefetch(&t, &alt, &calls[0], iters, ns);
            double copy = time_calls(emit_copy, cp, iters, ns, NULL);
            double clk = time_calls(emit_clock_gettime, NULL, iters, ns, NULL);
            double tsc = time_calls(emit_tsc_read, NULL, iters, ns, NULL);
#ifdef LMC_HAVE_LTTNG
            if (lttng && r % 2 == 0)
                lttng = lttng_trial(&lt, r);
#endif
            if (r >= 0) {
                v1[r] = one;
                v[r] = sixteen;
                vclk[r] = clk;
                vtsc[r] = tsc;
                vcopy[r] = copy;
                valt[r] = other;
                n += 1;
            }
        }
        uint64_t dropped = lmc_event_bus_dropped(t.bus) + lmc_event_bus_dropped(alt.bus) - dropped0;
        if (!lmc_event_bus_uses_tsc(t.bus))
            fprintf(stderr, "bench trace: no usable TSC here; captures stamp with "
                            "clock_gettime\n");
        fprintf(stderr,
                "bench trace: on this CPU a commit %s the next event's slots (the default); "
                "on_caller_16keys_other_prefetch_ns is the same call %s\n",
                lmc_event_bus_prefetches(t.bus) ? "prefetches" : "does not prefetch",
                lmc_event_bus_prefetches(t.bus) ? "without" : "with the prefetch");
        tracing_end(&alt);
        tracing_end(&t);
        lmc_bench_report_trials(ctx, "on_caller_1key_ns", v1, n, "ns");
        lmc_bench_report_trials(ctx, "on_caller_16keys_ns", v, n, "ns");
        lmc_bench_report_trials(ctx, "on_caller_16keys_other_prefetch_ns", valt, n, "ns");
        lmc_bench_report_ratio(ctx, "prefetch_choice_ratio", v, valt, n, "x");
        lmc_bench_report_trials(ctx, "clock_gettime_ns", vclk, n, "ns");
        lmc_bench_report_trials(ctx, "tsc_read_ns", vtsc, n, "ns");
        lmc_bench_report_trials(ctx, "copy_16keys_ns", vcopy, n, "ns");
        if (dropped > 0)
            fprintf(stderr, "bench trace: %llu captures dropped while timing the caller\n",
                    (unsigned long long)dropped);
    }
#ifdef LMC_HAVE_LTTNG
    lttng_end(ctx, &lt, v, n, iters);
#else
    lmc_bench_note(ctx, "lttng_event_ns",
                   "LTTng-UST not available at build time (liblttng-ust-dev missing, or "
                   "LMC_WITH_LTTNG=OFF)");
#endif
    if (n == 0)
        goto out;

    /* The drain and its ceiling, pairwise: one untimed round, then DRAIN_PAIRS per trial. */
    int ok = 0;
    double kib0 = reported_kib();
    for (int r = -1; r < DRAIN_PAIRS * reps; r++) {
        drain_result x;
        if (bench_drain(calls, drain_n, &x) == 0 && r >= 0)
            d[ok++] = x;
    }
    double kib1 = reported_kib();
    if (kib0 >= 0 && kib1 > kib0)
        fprintf(stderr,
                "bench trace: during the drain trials this guest handed %.0f MiB of freed memory "
                "back to its host (free page reporting): pages touched again fault on the host, "
                "so drain and ceiling figures spread widely (docs/benchmarks.md, trace group)\n",
                (kib1 - kib0) / 1024);
    if (ok > 0) {
        double *dv = dfig, *c = dfig + ok;
        for (int r = 0; r < ok; r++) {
            dv[r] = d[r].records_per_s;
            c[r] = d[r].ceiling_records_per_s;
        }
        lmc_bench_report_trials(ctx, "drain_records_per_s", dv, (size_t)ok, "records/s");
        lmc_bench_report_trials(ctx, "drain_ceiling_records_per_s", c, (size_t)ok, "records/s");
        lmc_bench_report_ratio(ctx, "drain_to_ceiling", dv, c, (size_t)ok, "x");
        for (size_t f = 0; f < sizeof(drain_fields) / sizeof(drain_fields[0]); f++) {
            for (int r = 0; r < ok; r++)
                dv[r] = *(const double *)((const char *)&d[r] + drain_fields[f].offset);
            lmc_bench_report_trials(ctx, drain_fields[f].metric, dv, (size_t)ok,
                                    drain_fields[f].unit);
        }
    } else {
        lmc_bench_note(ctx, "drain_records_per_s", "the drain benchmark failed (see stderr)");
    }
    rc = 0;
out:
    free(v);
    free(v1);
    free(vclk);
    free(vtsc);
    free(vcopy);
    free(valt);
    free(cp);
    free(ns);
    free(calls);
    free(c1);
    free(d);
    free(dfig);
    return rc;
}
