/*
 * slice.c -- writing a window of a trace as a trace (see slice.h).
 *
 * Owns: the output (a file beside OUT until it is complete; core/file.h)
 * and the frame batch. Two passes over the
 * source: one that hashes its bytes for the note, one through the reader
 * that decodes every record (its t_mono decides, and a record in the
 * window is re-encoded). Records are not assumed to be in t_mono order
 * (callers on several threads sample their clocks before publishing), so
 * the whole file is read whatever the window.
 *
 * Threads: none.
 */
#include "trace/slice.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "trace/format.h"
#include "trace/marker.h"
#include "trace/reader.h"
#include "trace/recorder.h"

/* Frames are sent to the file in batches of about this size. */
#define BATCH_BYTES (1u << 20)
#define SLICE_NOTE_ARGS 10

lmc_status lmc_trace_slice_encode_marker(msgpack_sbuffer *buf, double t_mono, double t_wall,
                                         const lmc_trace_slice_note *n, lmc_error *err)
{
    lmc_tv *names = NULL;
    if (n->n_qualnames > 0) {
        names = calloc(n->n_qualnames, sizeof(*names));
        if (names == NULL)
            return lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n->n_qualnames; i++)
        names[i] = lmc_tv_str(n->qualnames[i], strlen(n->qualnames[i]));
    lmc_tv none = lmc_tv_nil();
    const lmc_trace_arg args[SLICE_NOTE_ARGS] = {
        {"source", 6, lmc_tv_str(n->source, strlen(n->source))},
        {"source_sha256", 13, lmc_tv_str(n->source_sha256, strlen(n->source_sha256))},
        {"from", 4, lmc_tv_float(n->from)},
        {"to", 2, n->has_to ? lmc_tv_float(n->to) : none},
        {"qualnames", 9, {.kind = LMC_TV_LIST, .u.list = {names, n->n_qualnames}}},
        {"max_records", 11, n->max_records > 0 ? lmc_tv_int((int64_t)n->max_records) : none},
        {"records", 7, lmc_tv_int((int64_t)n->records)},
        {"source_records", 14, lmc_tv_int((int64_t)n->source_records)},
        {"source_malformed", 16, lmc_tv_int((int64_t)n->source_malformed)},
        {"source_dropped", 14, lmc_tv_int((int64_t)n->source_dropped)},
    };
    lmc_status st =
        lmc_trace_encode_record(buf, t_mono, t_wall, LMC_TRACE_SLICE_QUALNAME,
                                strlen(LMC_TRACE_SLICE_QUALNAME), args, SLICE_NOTE_ARGS, err);
    free(names);
    return st;
}

/* SHA-256 of the file's bytes as lowercase hex. */
static lmc_status hash_file(const char *path, char hex[LMC_SHA256_HEX_LEN + 1], lmc_error *err)
{
    lmc_status st = LMC_OK;
    uint8_t *chunk = malloc(BATCH_BYTES);
    lmc_sha256_stream *s = lmc_sha256_stream_create();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (chunk == NULL || s == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (fd < 0) {
        st = lmc_error_set(err, errno == ENOENT ? LMC_ERR_NOT_FOUND : LMC_ERR_IO,
                           "cannot open '%s': %s", path, strerror(errno));
        goto out;
    }
    for (;;) {
        ssize_t got = read(fd, chunk, BATCH_BYTES);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = lmc_error_set(err, LMC_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        lmc_sha256_stream_update(s, chunk, (size_t)got);
    }
    lmc_sha256_stream_final_hex(s, hex);
out:
    if (fd >= 0)
        close(fd);
    lmc_sha256_stream_destroy(s);
    free(chunk);
    return st;
}

/* The output side: the file beside OUT (core/file.h) and the batch going into it. */
typedef struct slice_out {
    lmc_file_out file;
    msgpack_sbuffer buf;
} slice_out;

static lmc_status out_flush(slice_out *o, lmc_error *err)
{
    if (o->buf.size > 0) {
        lmc_status st = lmc_file_out_write(&o->file, o->buf.data, o->buf.size, err);
        if (st != LMC_OK)
            return st;
    }
    o->buf.size = 0;
    return LMC_OK;
}

/* The check on OUT that the file rule cannot make: not the input itself. */
static lmc_status check_paths(const char *in, const char *out, lmc_error *err)
{
    struct stat si, so;
    if (stat(in, &si) != 0)
        return LMC_OK; /* the reader names the problem */
    if (stat(out, &so) != 0)
        return LMC_OK; /* a new file */
    if (si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "'%s' is the input file; refusing to overwrite it", out);
    return LMC_OK;
}

static lmc_status out_commit(slice_out *o, lmc_error *err)
{
    lmc_status st = out_flush(o, err);
    return st != LMC_OK ? st : lmc_file_out_commit(&o->file, err);
}

/* Nothing to remove once committed (or never opened): abort is then a no-op. */
static void out_close(slice_out *o)
{
    lmc_file_out_abort(&o->file);
    msgpack_sbuffer_destroy(&o->buf);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

lmc_status lmc_trace_slice(const char *in, const char *out, const lmc_trace_slice_options *opt,
                           lmc_trace_slice_result *res, lmc_error *err)
{
    lmc_trace_slice_result local;
    if (res == NULL)
        res = &local;
    memset(res, 0, sizeof(*res));
    lmc_trace_reader *rd = NULL;
    slice_out o = {.file = LMC_FILE_OUT_INIT};
    msgpack_sbuffer_init(&o.buf);
    lmc_status st = check_paths(in, out, err);
    if (st != LMC_OK)
        goto out;
    if ((st = hash_file(in, res->source_sha256, err)) != LMC_OK)
        goto out;
    if ((st = lmc_trace_reader_open(in, &rd, err)) != LMC_OK)
        goto out;
    const lmc_trace_header *src = lmc_trace_reader_header(rd);
    if (strcmp(src->level, "storage") != 0 || src->n_meta > 0) {
        st = lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                           "'%s' is a '%.32s'-level trace; only storage-level traces "
                           "(no level_meta) are sliced",
                           in, src->level);
        goto out;
    }
    if ((st = lmc_file_out_open(&o.file, NULL, out, err)) != LMC_OK)
        goto out;

    const lmc_trace_filter *f = &opt->filter;
    double origin = f->has_from ? f->from : 0.0;
    lmc_trace_header h = *src; /* borrowed strings; only the start times change */
    h.t_mono_start = src->t_mono_start + origin;
    h.t_wall_start = src->t_wall_start + origin;
    if ((st = lmc_trace_encode_header(&o.buf, &h, err)) != LMC_OK)
        goto out;

    double last_t = 0.0;
    lmc_trace_record rec;
    lmc_status rs;
    while ((rs = lmc_trace_reader_next(rd, &rec)) == LMC_OK) {
        if (strcmp(rec.qualname, LMC_TRACE_DROPPED_QUALNAME) == 0) {
            const lmc_trace_arg *a = lmc_trace_args_find(rec.args, rec.nargs, "dropped_count");
            if (a != NULL && a->value.kind == LMC_TV_INT && a->value.u.i > 0)
                res->source_dropped += (uint64_t)a->value.u.i;
            continue;
        }
        if (lmc_trace_marker_find(rec.qualname, rec.qualname_len) != NULL)
            continue;
        res->source_records++;
        if ((opt->max_records > 0 && res->records >= opt->max_records) ||
            !lmc_trace_filter_match(f, &rec))
            continue;
        double t = rec.t_mono - origin;
        if ((st = lmc_trace_encode_record(&o.buf, t, rec.t_wall, rec.qualname, rec.qualname_len,
                                          rec.args, rec.nargs, err)) != LMC_OK) {
            lmc_error_prefix(err, "record at offset %llu of '%s'", (unsigned long long)rec.offset,
                             in);
            goto out;
        }
        res->records++;
        if (isfinite(t) && t > last_t)
            last_t = t;
        if (o.buf.size >= BATCH_BYTES && (st = out_flush(&o, err)) != LMC_OK)
            goto out;
    }
    if (rs == LMC_ERR_IO) {
        st = lmc_error_set(err, LMC_ERR_IO, "cannot read '%s'", in);
        goto out;
    }
    res->source_malformed = lmc_trace_reader_malformed(rd);
    res->source_truncated = lmc_trace_reader_truncated(rd);

    lmc_trace_slice_note note = {
        .source = base_name(in),
        .source_sha256 = res->source_sha256,
        .from = origin,
        .has_to = f->has_to,
        .to = f->to,
        .qualnames = f->qualnames,
        .n_qualnames = f->n_qualnames,
        .max_records = opt->max_records,
        .records = res->records,
        .source_records = res->source_records,
        .source_malformed = res->source_malformed,
        .source_dropped = res->source_dropped,
    };
    if ((st = lmc_trace_slice_encode_marker(&o.buf, last_t, h.t_wall_start + last_t, &note, err)) !=
        LMC_OK)
        goto out;
    st = out_commit(&o, err);

out:
    out_close(&o);
    lmc_trace_reader_close(rd);
    return st;
}
