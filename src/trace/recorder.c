/*
 * recorder.c -- writes captured calls to a .lct file (see recorder.h).
 *
 * Two sides, overlapping: the encoder (the bus's drain thread, or whoever
 * calls write_record, attach_config, flush or close; all under `mu`)
 * appends whole frames to the current batch of a batch pipe
 * (core/batch_pipe.h); the writer thread ("trace-writer") writes each
 * submitted batch to the file, in order, one write(2) each. A 16-key
 * record took about as long to encode as to write, one after the other on
 * the drain thread; now the drain thread encodes batch n + 1 while the
 * writer writes batch n. The pipe holds PIPE_DEPTH batches (about 512 KiB
 * each once grown), and an encoder that gets that far ahead waits in
 * submit, as it used to wait in write(2).
 *
 * Who owns what:
 *  - `mu` guards the encoder's state: the pipe's producer side, closed,
 *    header_written, bus. Everything that writes the file waits for the
 *    writer with `mu` held (flush, attach_config, close), so "flushed"
 *    still means "in the file".
 *  - The writer owns the file while the pipe runs: fd's offset, durable,
 *    last_write_warning_ms and the scratch buffer. Others read them only
 *    after a pipe wait (which orders them), and close touches the fd only
 *    then, and after joining the writer.
 *  - records, writes and dropped are atomics: the writer counts batches
 *    written or lost, the encoder the records it could not encode.
 *
 * `durable` is the file length known to end on a frame boundary. A failed
 * or short write truncates the file back to `durable`, so readers never
 * see half a frame from us (a crash mid-write can still cut the tail,
 * which readers tolerate). When that loses the header (nothing is in the
 * file yet), the next batch is written with a fallback header (empty
 * config and digest) in front of it, in the same write(2), as the encoder
 * used to put one in front of the next batch when it did the writing
 * itself: batches encoded before the failure was known are covered too.
 *
 * No preallocation: the recorder used to reserve file space 8 MiB at a
 * time with fallocate(FALLOC_FL_KEEP_SIZE), to take the page allocation
 * out of the drain thread's write(2). The writer thread now takes it, and
 * on tmpfs fallocate zeroes every page that the write then overwrites
 * (measured: the writer's CPU time was 1.13-1.15 times a bare write loop's
 * with it, 1.01-1.13 without), and the writer now makes exactly the calls
 * the drain benchmark's ceiling makes: write(2)s, then fsync and close.
 */
#include "trace/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/batch_pipe.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/log.h"
#include "trace/capture.h"
#include "trace/format.h"
#include "trace/ops.h"

#define LOG_COMP "trace"
/* Under load, write once at least this much is batched. */
#define BATCH_BYTES (256u * 1024)
/* Batches in the pipe: one being encoded, the rest queued or being written. */
#define PIPE_DEPTH 4
/* lmc_batch.flags: the batch starts with the header frame. */
#define BATCH_HAS_HEADER 1u
/* A lull hands the batch to the writer at most this often (see flush_idle). */
#define IDLE_HANDOFF_MS 20u

struct lmc_trace_recorder {
    pthread_mutex_t mu;
    char *path;
    char *level;
    int fd;
    bool captures_calls;
    /* Encoder side, under mu. */
    bool closed;
    bool header_written; /* in the file, or in a batch on its way */
    lmc_batch_pipe *pipe;
    lmc_event_bus *bus;       /* for its drop count at close; may be NULL */
    uint64_t last_handoff_ms; /* when a batch last went to the writer */
    /* Read-only after open. */
    double t_mono_start;
    double t_wall_start;
    /* The writer's (see the top of the file). */
    off_t durable;
    uint64_t last_write_warning_ms;
    msgpack_sbuffer scratch; /* a fallback header and the batch behind it */
    /* Counters. */
    _Atomic uint64_t records; /* written to the file */
    _Atomic uint64_t writes;  /* batches written whole */
    _Atomic uint64_t dropped;
};

static void count_dropped(lmc_trace_recorder *r, uint64_t n)
{
    atomic_fetch_add_explicit(&r->dropped, n, memory_order_relaxed);
}

static void warn_write(lmc_trace_recorder *r, int errnum, size_t lost)
{
    uint64_t now = lmc_mono_ms();
    if (now - r->last_write_warning_ms < 1000 && r->last_write_warning_ms != 0)
        return;
    r->last_write_warning_ms = now;
    LMC_WARN(LOG_COMP,
             "trace recorder: write failed (%s); dropping %zu record(s), %llu dropped so "
             "far",
             strerror(errnum), lost,
             (unsigned long long)atomic_load_explicit(&r->dropped, memory_order_relaxed));
}

static lmc_status encode_header(const lmc_trace_recorder *r, msgpack_sbuffer *out, const char *json,
                                const char *digest)
{
    lmc_trace_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, LMC_TRACE_MAGIC, 4);
    h.magic_len = 4;
    h.format_version = LMC_TRACE_FORMAT_VERSION;
    h.level = r->level;
    h.trace_schema_version = LMC_TRACE_SCHEMA_VERSION;
    h.t_mono_start = r->t_mono_start;
    h.t_wall_start = r->t_wall_start;
    h.sm_config_json = (char *)(json ? json : "");
    h.sm_config_digest = (char *)(digest ? digest : "");
    lmc_error err;
    lmc_status st = lmc_trace_encode_header(out, &h, &err);
    if (st != LMC_OK)
        LMC_ERROR(LOG_COMP, "trace recorder: cannot encode the header: %s", err.msg);
    return st;
}

/*
 * The writer: one batch to the file; on failure cut the file back to the
 * last whole frame and count the batch's records as dropped.
 */
static void write_batch(lmc_batch *b, void *ud)
{
    lmc_trace_recorder *r = ud;
    if (b->buf.size == 0)
        return;
    const char *data = b->buf.data;
    size_t size = b->buf.size;
    if (r->durable == 0 && !(b->flags & BATCH_HAS_HEADER)) {
        /* A failed write took the header with it: put one back in front. */
        r->scratch.size = 0;
        if (encode_header(r, &r->scratch, "", "") != LMC_OK ||
            msgpack_sbuffer_write(&r->scratch, data, size) != 0) {
            count_dropped(r, b->count);
            return;
        }
        data = r->scratch.data;
        size = r->scratch.size;
    }
    const char *p = data;
    size_t left = size;
    int errnum = 0;
    while (left > 0) {
        ssize_t w = write(r->fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            errnum = errno;
            break;
        }
        if (w == 0) {
            errnum = ENOSPC;
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (errnum == 0) {
        r->durable += (off_t)size;
        atomic_fetch_add_explicit(&r->records, b->count, memory_order_relaxed);
        atomic_fetch_add_explicit(&r->writes, 1, memory_order_relaxed);
    } else {
        /* Undo a partial write; a header in this batch is lost with it. */
        if (ftruncate(r->fd, r->durable) != 0 || lseek(r->fd, r->durable, SEEK_SET) < 0) {
            /* Not a regular file (a pipe, /dev/full): nothing to undo. */
        }
        count_dropped(r, b->count);
        warn_write(r, errnum, b->count);
    }
}

/* The encoder's batch. */
static msgpack_sbuffer *batch_locked(lmc_trace_recorder *r)
{
    return &lmc_batch_pipe_current(r->pipe)->buf;
}

/* Hand the current batch (if any) to the writer. */
static void handoff_locked(lmc_trace_recorder *r)
{
    lmc_batch_pipe_submit(r->pipe);
    r->last_handoff_ms = lmc_mono_ms();
}

/* Everything encoded so far to the file, and wait until it is there. */
static void flush_locked(lmc_trace_recorder *r)
{
    handoff_locked(r);
    lmc_batch_pipe_wait(r->pipe);
}

/* The header at the front of the (empty) current batch. */
static lmc_status append_header_locked(lmc_trace_recorder *r, const char *json, const char *digest)
{
    lmc_status st = encode_header(r, batch_locked(r), json, digest);
    if (st == LMC_OK) {
        lmc_batch_pipe_current(r->pipe)->flags |= BATCH_HAS_HEADER;
        r->header_written = true;
    }
    return st;
}

lmc_status lmc_trace_recorder_open(const char *path, const char *level, bool captures_calls,
                                   lmc_trace_recorder **out, lmc_error *err)
{
    return lmc_trace_recorder_create(path, level, captures_calls, false, out, err);
}

lmc_status lmc_trace_recorder_create(const char *path, const char *level, bool captures_calls,
                                     bool exclusive, lmc_trace_recorder **out, lmc_error *err)
{
    lmc_trace_recorder *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "trace recorder: out of memory");
    r->path = strdup(path);
    r->level = strdup(level ? level : "storage");
    if (r->path == NULL || r->level == NULL) {
        free(r->path);
        free(r->level);
        free(r);
        return lmc_error_set(err, LMC_ERR_NOMEM, "trace recorder: out of memory");
    }
    lmc_status st = lmc_file_create("trace file", path, exclusive, &r->fd, err);
    if (st != LMC_OK) {
        free(r->path);
        free(r->level);
        free(r);
        return st;
    }
    st = lmc_batch_pipe_create(PIPE_DEPTH, "trace-writer", write_batch, r, &r->pipe, err);
    if (st != LMC_OK) {
        close(r->fd);
        free(r->path);
        free(r->level);
        free(r);
        return st;
    }
    pthread_mutex_init(&r->mu, NULL);
    msgpack_sbuffer_init(&r->scratch);
    r->t_mono_start = lmc_mono_s();
    r->t_wall_start = lmc_wall_s();
    r->captures_calls = captures_calls;
    /* The gate goes on only once the file is open. */
    if (captures_calls)
        lmc_trace_set_enabled(true);
    LMC_INFO(LOG_COMP, "trace recorder writing to %s (level=%s)", path, r->level);
    *out = r;
    return LMC_OK;
}

void lmc_trace_recorder_attach_config(lmc_trace_recorder *r, const char *config_json,
                                      const char *digest_hex)
{
    pthread_mutex_lock(&r->mu);
    if (!r->closed && !r->header_written &&
        append_header_locked(r, config_json, digest_hex) == LMC_OK)
        flush_locked(r);
    pthread_mutex_unlock(&r->mu);
}

static void append_record_locked(lmc_trace_recorder *r, const char *qualname,
                                 const lmc_trace_arg *args, size_t nargs, double t_wall,
                                 double t_mono_abs_s)
{
    if (r->closed) {
        count_dropped(r, 1);
        return;
    }
    if (!r->header_written && append_header_locked(r, "", "") != LMC_OK) {
        count_dropped(r, 1);
        return;
    }
    double t_mono = t_mono_abs_s - r->t_mono_start;
    if (t_mono < 0)
        t_mono = 0;
    lmc_error err;
    lmc_batch *b = lmc_batch_pipe_current(r->pipe);
    if (lmc_trace_encode_record(&b->buf, t_mono, t_wall, qualname, strlen(qualname), args, nargs,
                                &err) != LMC_OK) {
        count_dropped(r, 1);
        LMC_WARN(LOG_COMP, "trace recorder: failed to encode record (qualname=%s); dropping: %s",
                 qualname, err.msg);
        return;
    }
    b->count++;
    if (b->buf.size >= BATCH_BYTES)
        handoff_locked(r); /* the writer takes it from here */
}

void lmc_trace_recorder_write_record(lmc_trace_recorder *r, const char *qualname,
                                     const lmc_trace_arg *args, size_t nargs, double t_wall,
                                     double t_mono_abs_s)
{
    pthread_mutex_lock(&r->mu);
    append_record_locked(r, qualname, args, nargs, t_wall, t_mono_abs_s);
    pthread_mutex_unlock(&r->mu);
}

/*
 * The argument list LMCache's signature binding gives for the call: its
 * op's row of trace/ops.def, in order. key_items holds c->n_keys values.
 */
static size_t call_args(const lmc_trace_call *c, lmc_tv *key_items, lmc_trace_arg *args)
{
    const lmc_trace_op_info *op = lmc_trace_op_get(c->op);
    for (size_t i = 0; i < op->nargs; i++) {
        const lmc_trace_arg_spec *spec = &op->args[i];
        lmc_tv v = {.kind = LMC_TV_NIL};
        switch (spec->kind) { /* no default: -Wswitch names a kind added but not written */
        case LMC_TRACE_ARG_KEYS:
            for (size_t k = 0; k < c->n_keys; k++)
                key_items[k] = (lmc_tv){.kind = LMC_TV_OBJECT_KEY, .u.key = &c->keys[k]};
            v = (lmc_tv){.kind = LMC_TV_LIST, .u.list = {key_items, c->n_keys}};
            break;
        case LMC_TRACE_ARG_LAYOUT:
            v = (lmc_tv){.kind = LMC_TV_LAYOUT, .u.layout = &c->layout};
            break;
        case LMC_TRACE_ARG_MODE: {
            const char *mode = lmc_write_mode_name((lmc_write_mode)c->mode);
            v = lmc_tv_str(mode, strlen(mode));
            break;
        }
        case LMC_TRACE_ARG_EXTRA_COUNT:
            v = lmc_tv_int(c->extra_count);
            break;
        case LMC_TRACE_ARG_EXTERNAL_REQUEST_ID:
            v = lmc_tv_str(c->external_request_id, c->external_request_id_len);
            break;
        case LMC_TRACE_ARG_POLICY:
            v = (lmc_tv){.kind = LMC_TV_TRIM_POLICY, .u.trim = (lmc_trim_policy)c->policy};
            break;
        }
        args[i] = (lmc_trace_arg){spec->name, spec->name_len, v};
    }
    return op->nargs;
}

#define STACK_KEYS 64

static void on_trace_call(const lmc_event *ev, void *ud)
{
    lmc_trace_recorder *r = ud;
    lmc_trace_call c;
    if (!lmc_trace_call_decode(ev->payload, ev->len, &c)) {
        count_dropped(r, 1);
        LMC_WARN(LOG_COMP, "trace recorder: TRACE_CALL event malformed (%zu bytes); dropping",
                 ev->len);
        return;
    }
    lmc_tv stack_items[STACK_KEYS];
    lmc_tv *items = c.n_keys <= STACK_KEYS ? stack_items : malloc(c.n_keys * sizeof(lmc_tv));
    if (items == NULL) {
        count_dropped(r, 1);
        return;
    }
    lmc_trace_arg args[LMC_TRACE_MAX_ARGS];
    size_t nargs = call_args(&c, items, args);
    pthread_mutex_lock(&r->mu);
    append_record_locked(r, lmc_trace_op_qualname(c.op), args, nargs, ev->timestamp,
                         (double)ev->mono_ns / 1e9);
    pthread_mutex_unlock(&r->mu);
    if (items != stack_items)
        free(items);
}

static void on_shutdown(void *ud)
{
    lmc_trace_recorder_close(ud);
}

static const lmc_event_subscription subscriptions[] = {
    {LMC_EVENT_TRACE_CALL, on_trace_call},
};

lmc_event_subscriber lmc_trace_recorder_subscriber(lmc_trace_recorder *r)
{
    lmc_event_subscriber s = {.subs = subscriptions, .n_subs = 1, .shutdown = on_shutdown, .ud = r};
    return s;
}

void lmc_trace_recorder_set_bus(lmc_trace_recorder *r, lmc_event_bus *bus)
{
    pthread_mutex_lock(&r->mu);
    r->bus = bus;
    pthread_mutex_unlock(&r->mu);
}

void lmc_trace_recorder_flush(lmc_trace_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    if (!r->closed)
        flush_locked(r);
    pthread_mutex_unlock(&r->mu);
}

void lmc_trace_recorder_flush_idle(lmc_trace_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    if (!r->closed && lmc_batch_pipe_current(r->pipe)->count > 0 &&
        lmc_mono_ms() - r->last_handoff_ms >= IDLE_HANDOFF_MS)
        handoff_locked(r);
    pthread_mutex_unlock(&r->mu);
}

void lmc_trace_recorder_close(lmc_trace_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->closed) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    /* Events racing the shutdown after the final drain become no-ops. */
    if (r->captures_calls)
        lmc_trace_set_enabled(false);
    if (!r->header_written)
        append_header_locked(r, "", "");
    bool pending = batch_locked(r)->size > 0;
    flush_locked(r);
    /* The writer is idle: its state is ours to read. A header lost to a
     * failed write, with no batch after it to carry it, goes out now. */
    if (!pending && r->durable == 0 && append_header_locked(r, "", "") == LMC_OK)
        flush_locked(r);
    bool header_in_file = r->durable > 0;
    /* Events the bus could not queue never reached us: they count too. */
    uint64_t total_dropped =
        atomic_load(&r->dropped) + (r->bus ? lmc_event_bus_dropped(r->bus) : 0);
    if (total_dropped > 0 && header_in_file) {
        lmc_tv n = lmc_tv_int((int64_t)total_dropped);
        lmc_trace_arg arg = {"dropped_count", 13, n};
        lmc_error err;
        if (lmc_trace_encode_record(batch_locked(r), lmc_mono_s() - r->t_mono_start, lmc_wall_s(),
                                    LMC_TRACE_DROPPED_QUALNAME, strlen(LMC_TRACE_DROPPED_QUALNAME),
                                    &arg, 1, &err) == LMC_OK) {
            /* Not a traced call: the batch's count stays 0, so it is not counted. */
            flush_locked(r);
        }
    }
    r->closed = true;
    /* Joins the writer: the file is ours alone from here. */
    lmc_batch_pipe_destroy(r->pipe);
    r->pipe = NULL;
    if (fsync(r->fd) != 0 && errno != EINVAL && errno != EROFS)
        LMC_ERROR(LOG_COMP, "trace recorder: fsync failed: %s", strerror(errno));
    close(r->fd);
    r->fd = -1;
    uint64_t records = atomic_load(&r->records);
    if (total_dropped > 0)
        LMC_WARN(LOG_COMP, "trace recorder closed; %llu record(s) dropped (%s, %llu written)",
                 (unsigned long long)total_dropped, r->path, (unsigned long long)records);
    else
        LMC_INFO(LOG_COMP, "trace recorder closed cleanly: %s (%llu records)", r->path,
                 (unsigned long long)records);
    atomic_store(&r->dropped, total_dropped);
    pthread_mutex_unlock(&r->mu);
}

void lmc_trace_recorder_destroy(lmc_trace_recorder *r)
{
    if (r == NULL)
        return;
    lmc_trace_recorder_close(r);
    msgpack_sbuffer_destroy(&r->scratch);
    pthread_mutex_destroy(&r->mu);
    free(r->path);
    free(r->level);
    free(r);
}

uint64_t lmc_trace_recorder_dropped(lmc_trace_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t d = atomic_load(&r->dropped);
    if (!r->closed && r->bus)
        d += lmc_event_bus_dropped(r->bus);
    pthread_mutex_unlock(&r->mu);
    return d;
}

uint64_t lmc_trace_recorder_records(lmc_trace_recorder *r)
{
    return atomic_load(&r->records);
}

uint64_t lmc_trace_recorder_writes(lmc_trace_recorder *r)
{
    return atomic_load(&r->writes);
}

const char *lmc_trace_recorder_path(const lmc_trace_recorder *r)
{
    return r->path;
}

bool lmc_trace_recorder_closed(lmc_trace_recorder *r)
{
    pthread_mutex_lock(&r->mu);
    bool c = r->closed;
    pthread_mutex_unlock(&r->mu);
    return c;
}
