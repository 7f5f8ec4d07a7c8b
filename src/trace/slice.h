/*
 * slice.h -- `lmcache trace slice`: a window of a trace as a trace of its
 * own.
 *
 * Owns: the output file while it is written, and the slice marker's
 * layout (docs/trace-format.md, "Slices"). The result is a valid .lct
 * that LMCache's reader accepts:
 *
 *   header   the source's, byte for byte except t_mono_start and
 *            t_wall_start, which move forward by the window start, so that
 *            t_mono_start + t_mono still gives every record's original
 *            monotonic time and t_wall_start + t_mono its wall time
 *   records  those in the window (from <= t_mono < to) whose qualname
 *            passes the filter, at most max_records of them, in file
 *            order, with t_mono rebased to the window start (t_mono -
 *            from) and everything else as recorded: each is decoded and
 *            re-encoded through the project's encoder, which writes
 *            LMCache's bytes, so a body differs from the source's only in
 *            its t_mono
 *   marker   last, a record with qualname LMC_TRACE_SLICE_QUALNAME
 *            (trace/marker.h), t_mono of the last record written, and the
 *            args of lmc_trace_slice_note, in that order
 *
 * Markers of the source (its dropped-records count, an earlier slice's
 * note) are not copied; the count goes into the note.
 *
 * The output is written to a temporary file beside it (created with
 * O_EXCL, mode 0600 like the recorder's traces, so no symlink is
 * followed), synced and renamed over OUT; a failure leaves OUT as it was.
 * The input itself (by device and inode, so also through a link) is
 * refused.
 *
 * Threads: none.
 */
#ifndef LMC_TRACE_SLICE_H
#define LMC_TRACE_SLICE_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/digest.h"
#include "lmcache/status.h"
#include "trace/filter.h"

typedef struct lmc_trace_slice_options {
    lmc_trace_filter filter; /* the window and qualnames (a key prefix, if set, too) */
    uint64_t max_records;    /* 0: no limit */
} lmc_trace_slice_options;

/*
 * The slice marker's args, in the order they are written:
 *   source            str    the source file's name (its last path component)
 *   source_sha256     str    SHA-256 of the source file's bytes, lowercase hex
 *   from              float  the window start (0.0 when --from was not given)
 *   to                float  the window end, or None when it had none
 *   qualnames         [str]  the qualname filter as given; [] for all
 *   max_records       int    or None
 *   records           int    records written (the marker not counted)
 *   source_records    int    records in the source (markers not counted)
 *   source_malformed  int    records the reader skipped in the source
 *   source_dropped    int    the source's dropped_count
 */
typedef struct lmc_trace_slice_note {
    const char *source;
    const char *source_sha256;
    double from;
    bool has_to;
    double to;
    const char *const *qualnames;
    size_t n_qualnames;
    uint64_t max_records; /* 0: None */
    uint64_t records;
    uint64_t source_records;
    uint64_t source_malformed;
    uint64_t source_dropped;
} lmc_trace_slice_note;

typedef struct lmc_trace_slice_result {
    uint64_t records;        /* written */
    uint64_t source_records; /* markers not counted */
    uint64_t source_malformed;
    uint64_t source_dropped;
    bool source_truncated;
    char source_sha256[LMC_SHA256_HEX_LEN + 1];
} lmc_trace_slice_result;

/*
 * Write the slice of in to out. Errors: the reader's for in; LMC_ERR_INVALID
 * when out is in or a directory; LMC_ERR_UNSUPPORTED for a trace that is
 * not storage-level; LMC_ERR_IO naming the file for a read, write, sync or
 * rename failure. res may be NULL.
 */
lmc_status lmc_trace_slice(const char *in, const char *out, const lmc_trace_slice_options *opt,
                           lmc_trace_slice_result *res, lmc_error *err);

/* Append the marker record frame for note to buf (on failure buf is unchanged). */
lmc_status lmc_trace_slice_encode_marker(msgpack_sbuffer *buf, double t_mono, double t_wall,
                                         const lmc_trace_slice_note *note, lmc_error *err);

#endif
