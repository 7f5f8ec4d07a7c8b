/*
 * reader.c -- the streaming .lct reader (see reader.h and
 * spec/trace-format.md section 1.5).
 *
 * Owns: the file descriptor, one read buffer, the decoded header and the
 * arena the current record is decoded into (reset per record).
 *
 * Buffering: frames are read with read(2) into a buffer of 1 MiB that
 * holds many frames; a frame is decoded in place (no copy) and the buffer
 * is compacted only when the next frame does not fit behind the consumed
 * ones. A frame larger than the buffer grows it, but only by doubling once
 * the buffer is full of bytes the file really holds, so a corrupt length
 * near LMC_TRACE_MAX_FRAME in a small file costs no more memory than the
 * file itself. mmap is avoided on purpose: a file truncated under a mapping
 * raises SIGBUS, and the reader must survive any input.
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
#include <unistd.h>

#include "core/log.h"

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
    lmc_arena arena;
    uint64_t records;
    uint64_t malformed;
    bool truncated;
    /* The frame last returned by next_peek (in buf; valid until the next read). */
    const uint8_t *peek_body;
    uint32_t peek_len;
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
    FRAME_TOO_BIG,      /* length above LMC_TRACE_MAX_FRAME */
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

static frame_result next_frame(lmc_trace_reader *r, frame *f, uint32_t *want_len)
{
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
    if (n > LMC_TRACE_MAX_FRAME)
        return FRAME_TOO_BIG;
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
    case FRAME_TOO_BIG:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace file %s: frame length %" PRIu32
                             " at offset 0 exceeds the limit of %u bytes",
                             q, n, LMC_TRACE_MAX_FRAME);
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

    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        int e = errno;
        st = lmc_error_set(err, e == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                           "trace file %s: cannot open: %s", r->qpath, strerror(e));
        goto fail;
    }
    r->cap = READ_BUF_SIZE;
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
    case FRAME_TOO_BIG:
        LMC_WARN("trace",
                 "TraceReader: truncated frame body at offset %" PRIu64 " (frame length %" PRIu32
                 " exceeds the limit of %u bytes; treating the rest of the file as corrupt)",
                 f->offset + 4, n, LMC_TRACE_MAX_FRAME);
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

static void forget_peek(lmc_trace_reader *r)
{
    r->peek_body = NULL;
    r->peek_len = 0;
}

static void warn_malformed(lmc_trace_reader *r, const frame *f, const lmc_error *e)
{
    r->malformed++;
    LMC_WARN("trace", "TraceReader: skipping malformed record at offset %" PRIu64 ": %s",
             f->offset + 4 + f->len, e->msg);
}

lmc_status lmc_trace_reader_next(lmc_trace_reader *r, lmc_trace_record *rec)
{
    forget_peek(r);
    for (;;) {
        frame f;
        lmc_status st = stream_frame(r, &f);
        if (st != LMC_OK)
            return st;
        lmc_arena_reset(&r->arena);
        lmc_error e;
        lmc_error_clear(&e);
        if (lmc_trace_decode_record(f.body, f.len, &r->arena, rec, &e) == LMC_OK) {
            rec->offset = f.offset;
            r->records++;
            return LMC_OK;
        }
        warn_malformed(r, &f, &e);
    }
}

lmc_status lmc_trace_reader_next_peek(lmc_trace_reader *r, double *t_mono, const char **qualname,
                                      size_t *qualname_len)
{
    forget_peek(r);
    for (;;) {
        frame f;
        lmc_status st = stream_frame(r, &f);
        if (st != LMC_OK)
            return st;
        lmc_error e;
        lmc_error_clear(&e);
        if (lmc_trace_peek_record(f.body, f.len, t_mono, qualname, qualname_len, &e) == LMC_OK) {
            r->records++;
            r->peek_body = f.body;
            r->peek_len = f.len;
            return LMC_OK;
        }
        warn_malformed(r, &f, &e);
    }
}

/* The current record's qualname, NUL-terminated in the arena; NULL when memory runs out. */
static const char *copy_qualname(lmc_trace_reader *r, const char *q, size_t qlen)
{
    char *copy = lmc_arena_alloc(&r->arena, qlen + 1);
    if (copy != NULL) {
        memcpy(copy, q, qlen);
        copy[qlen] = '\0';
    }
    return copy;
}

lmc_status lmc_trace_reader_next_record(lmc_trace_reader *r, lmc_trace_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    const char *q;
    size_t qlen;
    lmc_status st = lmc_trace_reader_next_peek(r, &rec->t_mono, &q, &qlen);
    if (st != LMC_OK)
        return st;
    lmc_arena_reset(&r->arena);
    if ((rec->qualname = copy_qualname(r, q, qlen)) == NULL) {
        LMC_ERROR("trace", "TraceReader: out of memory for a qualname of %zu bytes", qlen);
        r->done = true;
        forget_peek(r);
        return LMC_ERR_IO;
    }
    rec->qualname_len = qlen;
    return LMC_OK;
}

lmc_status lmc_trace_reader_decode_args(lmc_trace_reader *r, lmc_trace_record *rec, lmc_error *err)
{
    if (r->peek_body == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "TraceReader: no record is current");
    /* Decoding resets the arena, and the qualname copy with it: the decode makes its own. */
    lmc_trace_record full;
    double t_mono = rec->t_mono;
    size_t qlen = rec->qualname_len;
    lmc_arena_reset(&r->arena);
    lmc_status st = lmc_trace_decode_record(r->peek_body, r->peek_len, &r->arena, &full, err);
    if (st == LMC_OK) {
        *rec = full;
        return LMC_OK;
    }
    /* The frame's own qualname bytes are still there: peek them again for the copy. */
    const char *q = NULL;
    lmc_trace_peek_record(r->peek_body, r->peek_len, &t_mono, &q, &qlen, NULL);
    memset(rec, 0, sizeof(*rec));
    rec->t_mono = t_mono;
    rec->qualname = q != NULL ? copy_qualname(r, q, qlen) : NULL;
    rec->qualname_len = rec->qualname != NULL ? qlen : 0;
    return st;
}

lmc_status lmc_trace_reader_peek_int_arg(lmc_trace_reader *r, const char *name, int64_t *value)
{
    if (r->peek_body == NULL || name == NULL)
        return LMC_ERR_INVALID;
    lmc_arena_reset(&r->arena);
    lmc_trace_record rec;
    if (lmc_trace_decode_record(r->peek_body, r->peek_len, &r->arena, &rec, NULL) != LMC_OK)
        return LMC_ERR_FORMAT;
    const lmc_trace_arg *arg = lmc_trace_args_find(rec.args, rec.nargs, name);
    if (arg == NULL || arg->value.kind != LMC_TV_INT)
        return LMC_ERR_NOT_FOUND;
    *value = arg->value.u.i;
    return LMC_OK;
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
