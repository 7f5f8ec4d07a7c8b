/*
 * marker.h -- the reserved qualnames that tools write into a trace to say
 * something about the trace itself, not about a StorageManager call.
 *
 * Owns: the one table of them. Each is an ordinary Record (LMCache's reader
 * accepts it; its replay skips the unknown qualname), so a marker never
 * breaks compatibility:
 *
 *   lmcache.trace.recorder.dropped_records   the recorder's drop count at
 *       close (trace/recorder.h), args {"dropped_count": N}
 *   lmcache.trace.slice                      `trace slice` wrote this file
 *       from a window of another one (trace/slice.h has its args)
 *
 * `trace info` does not count markers as operations, `trace replay` skips
 * them without counting them as skipped, `trace dump` shows them by label.
 *
 * Threads: none; constant data.
 */
#ifndef LMC_TRACE_MARKER_H
#define LMC_TRACE_MARKER_H

#include <stddef.h>

#define LMC_TRACE_SLICE_QUALNAME "lmcache.trace.slice"

typedef struct lmc_trace_marker {
    const char *qualname;
    const char *label; /* short, for listings: "dropped_records", "slice" */
} lmc_trace_marker;

/* The marker whose qualname is q (len bytes), or NULL for any other record. */
const lmc_trace_marker *lmc_trace_marker_find(const char *q, size_t len);

#endif
