/*
 * reader.c -- the streaming .lct reader (see reader.h and
 * spec/trace-format.md section 1.5).
 *
 * Owns: the file descriptor, one read buffer, the decoded header, and the
 * two arenas the current record's args are decoded into (values, and the
 * codecs' scratch), both reset per record and bounded per record.
 *
 * Buffering: frames are read with read(2) into a buffer of 1 MiB that
 * holds many frames; a frame is checked and decoded in place (no copy) and
 * the buffer is compacted only when the next frame does not fit behind the
 * consumed ones. A frame larger than the buffer grows it, but only by
 * doubling once the buffer is full of bytes the file really holds, so a
 * corrupt length near 4 GiB in a small file costs no more memory than the
 * file itself; once such a frame is consumed the buffer shrinks back to
 * 1 MiB. mmap is avoided on purpose: a file truncated under a mapping
 * raises SIGBUS, and the reader must survive any input (and read pipes).
 *
 * Every record goes through lmc_trace_scan_record; the decoded args (when
 * asked for) point into the frame in the buffer, which stays put until the
 * next call.
 *
 * Threads: none; a reader belongs to one thread.
 */
#include "trace/reader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "trace/decode.h"
#include "trace/validate.h"

#define READ_BUF_SIZE (1u << 20)
#define ARENA_BLOCK (64u * 1024)

struct lmc_trace_reader {
    int fd;
    char qpath[256]; /* the path in Python repr, for messages */
    uint8_t *buf;
    size_t cap;
    size_t start;     /* first unconsumed byte */
    size_t end;       /* one past the last byte read */
    uint64_t buf_off; /* file offset of buf[0] */
    bool eof;         /* read(2) returned 0 */
    bool done;        /* the stream has ended (clean, truncated or failed) */
    lmc_trace_header header;
    lmc_arena arena;   /* the current record's qualname and args */
    lmc_arena scratch; /* the codecs' payload trees while decoding them */
    uint64_t records;
    uint64_t malformed;
    bool truncated;
    /* The record last returned (in buf; valid until the next read): its frame and args. */
    bool current;
    uint32_t cur_len;
    lmc_trace_record_scan cur;
    char args_error[LMC_ERROR_MSG_MAX];
    bool warned_dropped; /* a bad dropped_count was reported */
};

/* One frame as the buffer holds it. */
typedef struct frame {
    const uint8_t *body;
    uint32_t len;
    uint64_t offset; /* of the length prefix */
} frame;

typedef enum frame_result {
    FRAME_OK,
    FRAME_EOF,          /* no bytes where a prefix should start */
    FRAME_SHORT_PREFIX, /* 1-3 bytes */
    FRAME_SHORT_BODY,
    FRAME_IO,
} frame_result;

/* Read until want bytes are buffered from start, or EOF. errno on FRAME_IO. */
static frame_result fill(lmc_trace_reader *r, size_t want)
{
    while (r->end - r->start < want && !r->eof) {
        if (r->cap - r->start < want && r->start > 0) {
            /* Compact: slide the unconsumed bytes to the front. */
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->buf_off += r->start;
            r->end -= r->start;
            r->start = 0;
        }
        if (r->end == r->cap) {
            /* Full of real data and still short: grow, at most doubling. */
            size_t ncap = r->cap * 2 < want ? r->cap * 2 : want;
            uint8_t *nbuf = realloc(r->buf, ncap);
            if (nbuf == NULL) {
                errno = ENOMEM;
                return FRAME_IO;
            }
            r->buf = nbuf;
            r->cap = ncap;
        }
        ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return FRAME_IO;
        }
        if (n == 0)
            r->eof = true;
        r->end += (size_t)n;
    }
    return FRAME_OK;
}

/* After a frame far larger than usual: give its memory back (nothing in buf is in use). */
static void shrink(lmc_trace_reader *r)
{
    size_t left = r->end - r->start;
    if (r->cap <= READ_BUF_SIZE || left > READ_BUF_SIZE / 2)
        return;
    memmove(r->buf, r->buf + r->start, left);
    r->buf_off += r->start;
    r->start = 0;
    r->end = left;
    uint8_t *nbuf = realloc(r->buf, READ_BUF_SIZE);
    if (nbuf != NULL) {
        r->buf = nbuf;
        r->cap = READ_BUF_SIZE;
    }
}

static frame_result next_frame(lmc_trace_reader *r, frame *f, uint32_t *want_len)
{
    shrink(r);
    if (fill(r, 4) == FRAME_IO)
        return FRAME_IO;
    size_t avail = r->end - r->start;
    f->offset = r->buf_off + r->start;
    if (avail == 0)
        return FRAME_EOF;
    if (avail < 4)
        return FRAME_SHORT_PREFIX;
    uint32_t n = lmc_get_be32(r->buf + r->start);
    *want_len = n;
    if (fill(r, (size_t)n + 4) == FRAME_IO)
        return FRAME_IO;
    avail = r->end - r->start;
    if (avail < (size_t)n + 4)
        return FRAME_SHORT_BODY;
    f->body = r->buf + r->start + 4;
    f->len = n;
    r->start += (size_t)n + 4;
    if (r->start == r->end) {
        /* Everything consumed: restart at the front, no compaction needed. */
        r->buf_off += r->start;
        r->start = r->end = 0;
    }
    return FRAME_OK;
}

static void set_qpath(lmc_trace_reader *r, const char *path)
{
    size_t want = lmc_repr_str(path, strlen(path), r->qpath, sizeof(r->qpath));
    if (want >= sizeof(r->qpath)) /* mark the cut */
        memcpy(r->qpath + sizeof(r->qpath) - 4, "...", 4);
}

static lmc_status read_header(lmc_trace_reader *r, lmc_error *err)
{
    frame f;
    uint32_t n = 0;
    const char *q = r->qpath;
    switch (next_frame(r, &f, &n)) {
    case FRAME_OK:
        break;
    case FRAME_EOF:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace file %s: unexpected EOF reading frame length", q);
    case FRAME_SHORT_PREFIX:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace file %s: truncated frame length prefix at offset 0", q);
    case FRAME_SHORT_BODY:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace file %s: truncated frame body at offset 4 (got %zu of %" PRIu32
                             ")",
                             q, r->end - r->start - 4, n);
    case FRAME_IO:
        return lmc_error_set(err, LMC_ERR_IO, "trace file %s: cannot read: %s", q, strerror(errno));
    }

    lmc_trace_header *h = &r->header;
    lmc_status st = lmc_trace_decode_header(f.body, f.len, h, err);
    if (st != LMC_OK) {
        lmc_error_prefix(err, "trace file %s", q);
        return st;
    }
    if (h->magic_len != 4 || memcmp(h->magic, LMC_TRACE_MAGIC, 4) != 0) {
        char got[80];
        lmc_repr_bytes(h->magic, h->magic_len, got, sizeof(got));
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace file %s: bad magic (got %s, expected b'" LMC_TRACE_MAGIC "')",
                             q, got);
    }
    if (h->format_version != LMC_TRACE_FORMAT_VERSION)
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace file %s: unsupported format_version %" PRId64
                             " (this build expects %d)",
                             q, h->format_version, LMC_TRACE_FORMAT_VERSION);
    if (h->trace_schema_version != 1 && h->trace_schema_version != 2)
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace file %s: unsupported trace_schema_version %" PRId64
                             " (this build supports 1, 2)",
                             q, h->trace_schema_version);
    return LMC_OK;
}

lmc_status lmc_trace_reader_open(const char *path, lmc_trace_reader **out, lmc_error *err)
{
    *out = NULL;
    if (path == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace file: no path given");
    lmc_trace_reader *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "trace file: out of memory");
    lmc_status st;
    r->fd = -1;
    set_qpath(r, path);
    lmc_arena_init(&r->arena, ARENA_BLOCK);
    lmc_arena_init(&r->scratch, ARENA_BLOCK);

    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        int e = errno;
        st = lmc_error_set(err, e == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                           "trace file %s: cannot open: %s", r->qpath, strerror(e));
        goto fail;
    }
    /* A small file gets a buffer its size (it grows if the file does). */
    struct stat sb;
    r->cap = READ_BUF_SIZE;
    if (fstat(r->fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size < (off_t)READ_BUF_SIZE)
        r->cap = sb.st_size < 4096 ? 4096 : (size_t)sb.st_size;
    r->buf = malloc(r->cap);
    if (r->buf == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "trace file %s: out of memory", r->qpath);
        goto fail;
    }
    if ((st = read_header(r, err)) != LMC_OK)
        goto fail;
    *out = r;
    return LMC_OK;

fail:
    lmc_trace_reader_close(r);
    return st;
}

void lmc_trace_reader_close(lmc_trace_reader *r)
{
    if (r == NULL)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->buf);
    lmc_trace_header_free(&r->header);
    lmc_arena_free(&r->arena);
    lmc_arena_free(&r->scratch);
    free(r);
}

const lmc_trace_header *lmc_trace_reader_header(const lmc_trace_reader *r)
{
    return &r->header;
}

/*
 * The next frame of the record stream. At the end -- clean, truncated or
 * failed -- it warns once and returns EOF (or IO) from then on.
 */
static lmc_status stream_frame(lmc_trace_reader *r, frame *f)
{
    if (r->done)
        return LMC_ERR_EOF;
    uint32_t n = 0;
    frame_result fr = next_frame(r, f, &n);
    if (fr == FRAME_OK)
        return LMC_OK;
    r->done = true;
    switch (fr) {
    case FRAME_OK:
    case FRAME_EOF:
        return LMC_ERR_EOF;
    case FRAME_SHORT_PREFIX:
        LMC_WARN("trace", "TraceReader: truncated frame length prefix at offset %" PRIu64,
                 f->offset);
        break;
    case FRAME_SHORT_BODY:
        LMC_WARN("trace",
                 "TraceReader: truncated frame body at offset %" PRIu64 " (got %zu of %" PRIu32 ")",
                 f->offset + 4, r->end - r->start - 4, n);
        break;
    case FRAME_IO:
        LMC_ERROR("trace", "TraceReader: cannot read %s at offset %" PRIu64 ": %s", r->qpath,
                  f->offset, strerror(errno));
        return LMC_ERR_IO;
    }
    r->truncated = true;
    return LMC_ERR_EOF;
}

static void warn_malformed(lmc_trace_reader *r, const frame *f, const lmc_error *e)
{
    r->malformed++;
    LMC_WARN("trace", "TraceReader: skipping malformed record at offset %" PRIu64 ": %s",
             f->offset + 4 + f->len, e->msg);
}

/* The next frame that is a record, checked; r->cur describes it. */
static lmc_status next_checked(lmc_trace_reader *r, frame *f)
{
    r->current = false;
    for (;;) {
        lmc_status st = stream_frame(r, f);
        if (st != LMC_OK)
            return st;
        lmc_error e;
        lmc_error_clear(&e);
        if (lmc_trace_scan_record(f->body, f->len, &r->cur, &e) == LMC_OK) {
            r->records++;
            r->current = true;
            r->cur_len = f->len;
            return LMC_OK;
        }
        warn_malformed(r, f, &e);
    }
}

lmc_status lmc_trace_reader_next_record(lmc_trace_reader *r, lmc_trace_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    frame f;
    lmc_status st = next_checked(r, &f);
    if (st != LMC_OK)
        return st;
    lmc_arena_reset(&r->arena);
    lmc_arena_set_limit(&r->arena, 0);
    char *q = lmc_arena_alloc(&r->arena, r->cur.qualname_len + 1);
    if (q == NULL) {
        LMC_ERROR("trace", "TraceReader: out of memory for a qualname of %zu bytes",
                  r->cur.qualname_len);
        r->done = true;
        r->current = false;
        return LMC_ERR_IO;
    }
    if (r->cur.qualname_len > 0)
        memcpy(q, r->cur.qualname, r->cur.qualname_len);
    q[r->cur.qualname_len] = '\0';
    rec->t_mono = r->cur.t_mono;
    rec->t_wall = r->cur.t_wall;
    rec->qualname = q;
    rec->qualname_len = r->cur.qualname_len;
    rec->offset = f.offset;
    rec->args_raw = r->cur.args;
    rec->args_raw_len = r->cur.args_len;
    return LMC_OK;
}

lmc_status lmc_trace_reader_decode_args(lmc_trace_reader *r, lmc_trace_record *rec, lmc_error *err)
{
    if (rec->args_decoded)
        return LMC_OK;
    if (rec->args_error != NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s", rec->args_error);
    if (!r->current || rec->args_raw != r->cur.args)
        return lmc_error_set(err, LMC_ERR_INVALID, "TraceReader: that record is no longer current");
    /* A small multiple of the record: no record can make decoding take much more. */
    size_t limit = (size_t)LMC_TRACE_DECODE_FACTOR * r->cur_len + LMC_TRACE_DECODE_SLACK;
    lmc_arena_set_limit(&r->arena, r->arena.held + limit);
    lmc_arena_reset(&r->scratch);
    lmc_arena_set_limit(&r->scratch, limit);
    lmc_trace_decoder d = {.values = &r->arena, .scratch = &r->scratch, .copy_bytes = false};
    lmc_error e;
    lmc_error_clear(&e);
    lmc_status st =
        lmc_trace_decode_args(&d, rec->args_raw, rec->args_raw_len, &rec->args, &rec->nargs, &e);
    bool limited = r->arena.over_limit || r->scratch.over_limit;
    lmc_arena_reset(&r->scratch);
    lmc_arena_set_limit(&r->arena, 0);
    if (st == LMC_OK) {
        rec->args_decoded = true;
        return LMC_OK;
    }
    if (limited)
        snprintf(r->args_error, sizeof(r->args_error),
                 "its args would take more than %zu bytes to decode (%u times its %" PRIu32
                 " bytes, plus %u KiB)",
                 limit, LMC_TRACE_DECODE_FACTOR, r->cur_len, LMC_TRACE_DECODE_SLACK / 1024);
    else
        snprintf(r->args_error, sizeof(r->args_error), "%s", e.msg);
    rec->args = NULL;
    rec->nargs = 0;
    rec->args_error = r->args_error;
    return lmc_error_set(err, limited ? LMC_ERR_NOMEM : st, "%s", r->args_error);
}

lmc_status lmc_trace_reader_next(lmc_trace_reader *r, lmc_trace_record *rec)
{
    lmc_status st = lmc_trace_reader_next_record(r, rec);
    if (st == LMC_OK)
        (void)lmc_trace_reader_decode_args(r, rec, NULL);
    return st;
}

lmc_status lmc_trace_reader_next_peek(lmc_trace_reader *r, double *t_mono, const char **qualname,
                                      size_t *qualname_len)
{
    frame f;
    lmc_status st = next_checked(r, &f);
    if (st != LMC_OK)
        return st;
    *t_mono = r->cur.t_mono;
    *qualname = r->cur.qualname;
    *qualname_len = r->cur.qualname_len;
    return LMC_OK;
}

/* The (last) integer argument `name` of the current record, from its checked bytes. */
static lmc_status find_int_arg(const lmc_trace_reader *r, const char *name, lmc_mp_item *out)
{
    if (!r->current || name == NULL)
        return LMC_ERR_INVALID;
    lmc_mp_reader m;
    lmc_mp_reader_init(&m, r->cur.args, r->cur.args_len);
    lmc_mp_item it;
    (void)lmc_mp_next(&m, &it); /* the map header */
    bool found = false;
    for (uint32_t i = 0; i < r->cur.nargs; i++) {
        lmc_mp_item k, v;
        (void)lmc_mp_next(&m, &k);
        const uint8_t *at = m.p;
        (void)lmc_mp_next(&m, &v);
        if (v.type == LMC_MP_ARRAY || v.type == LMC_MP_MAP) {
            m.p = at;
            (void)lmc_mp_skip(&m, LMC_MP_ANY_DEPTH);
        }
        if (lmc_mp_str_is(&k, name)) {
            /* A repeated name means its last value, as in a Python dict. */
            found = v.type == LMC_MP_UINT || v.type == LMC_MP_INT;
            *out = v;
        }
    }
    return found ? LMC_OK : LMC_ERR_NOT_FOUND;
}

lmc_status lmc_trace_reader_peek_u64_arg(lmc_trace_reader *r, const char *name, uint64_t *value)
{
    lmc_mp_item v;
    lmc_status st = find_int_arg(r, name, &v);
    if (st != LMC_OK)
        return st;
    if (v.type != LMC_MP_UINT)
        return LMC_ERR_FORMAT;
    *value = v.v.u;
    return LMC_OK;
}

lmc_status lmc_trace_reader_peek_int_arg(lmc_trace_reader *r, const char *name, int64_t *value)
{
    lmc_mp_item v;
    lmc_status st = find_int_arg(r, name, &v);
    if (st != LMC_OK)
        return st;
    if (!lmc_mp_get_int64(&v, value))
        return LMC_ERR_NOT_FOUND;
    return LMC_OK;
}

void lmc_trace_reader_add_dropped_count(lmc_trace_reader *r, uint64_t *total)
{
    uint64_t n = 0;
    lmc_status st = lmc_trace_reader_peek_u64_arg(r, "dropped_count", &n);
    if (st == LMC_OK) {
        *total = n > UINT64_MAX - *total ? UINT64_MAX : *total + n;
        return;
    }
    if (!r->warned_dropped)
        LMC_WARN("trace",
                 "TraceReader: the dropped-records marker has %s dropped_count; it is not "
                 "counted",
                 st == LMC_ERR_FORMAT ? "a negative" : "no integer");
    r->warned_dropped = true;
}

uint64_t lmc_trace_reader_records(const lmc_trace_reader *r)
{
    return r->records;
}

uint64_t lmc_trace_reader_malformed(const lmc_trace_reader *r)
{
    return r->malformed;
}

bool lmc_trace_reader_truncated(const lmc_trace_reader *r)
{
    return r->truncated;
}

lmc_status lmc_trace_count_records(const char *path, uint64_t *count, lmc_error *err)
{
    *count = 0;
    struct stat sb;
    if (path != NULL && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace file '%s' is not a regular file, which cannot be read twice: "
                             "its records are not counted ahead",
                             path);
    lmc_trace_reader *r;
    lmc_status st = lmc_trace_reader_open(path, &r, err);
    if (st != LMC_OK)
        return st;
    double t;
    const char *q;
    size_t qn;
    while ((st = lmc_trace_reader_next_peek(r, &t, &q, &qn)) == LMC_OK) {
    }
    *count = r->records;
    if (st == LMC_ERR_IO)
        lmc_error_set(err, LMC_ERR_IO, "trace file %s: read error while counting records",
                      r->qpath);
    else
        st = LMC_OK;
    lmc_trace_reader_close(r);
    return st;
}
