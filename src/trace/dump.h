/*
 * dump.h -- `lmcache trace dump`: a trace as a readable event listing.
 *
 * Owns: the two listing formats of a trace (docs/cli.md has them in full).
 *
 *   text   '#' header lines (file, versions, start times, config digest,
 *          level_meta), then one line per record, blkparse-style:
 *            INDEX T_MONO OP KEYS ARGS...
 *          INDEX counts records from 1, markers excluded (the index
 *          `trace replay` gives the same record); T_MONO is seconds with
 *          six decimals; OP the short qualname (the method after the
 *          StorageManager prefix; a foreign qualname in full); KEYS the
 *          number of ObjectKeys in the args; ARGS name=value, abbreviated
 *          (keys as "16[3fa9c2d1..]": the count and the first key's
 *          chunk-hash prefix). Markers and the reader's notes take the
 *          index "-" and a bracketed OP: [dropped_records], [slice],
 *          [malformed] (records the reader skipped), [truncated].
 *   jsonl  one JSON object per line: the header, then every record fully
 *          decoded ("type": "header" / "record" / "marker" / "malformed" /
 *          "truncated").
 *
 * Every string from the trace goes through core/escape.h (text) or the
 * JSON emitter (jsonl), so neither format can carry a raw control
 * character to the terminal.
 *
 * Threads: none.
 */
#ifndef LMC_TRACE_DUMP_H
#define LMC_TRACE_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/json.h"
#include "core/strbuf.h"
#include "lmcache/status.h"
#include "trace/filter.h"
#include "trace/value.h"

typedef enum lmc_trace_dump_format {
    LMC_TRACE_DUMP_TEXT,
    LMC_TRACE_DUMP_JSONL,
} lmc_trace_dump_format;

typedef struct lmc_trace_dump_options {
    lmc_trace_dump_format format;
    lmc_trace_filter filter;
    uint64_t limit; /* at most this many record and marker lines; 0: no limit */
    bool header;    /* print the header first */
} lmc_trace_dump_options;

typedef struct lmc_trace_dump_counts {
    uint64_t shown;     /* record and marker lines printed */
    uint64_t records;   /* records read (markers excluded) */
    uint64_t malformed; /* records the reader skipped */
    bool truncated;     /* the file ends in a cut record */
} lmc_trace_dump_counts;

/*
 * List the trace at path to out. Errors: the reader's (cannot open, bad
 * header: LMC_ERR_NOT_FOUND / LMC_ERR_FORMAT / ...), LMC_ERR_IO when the
 * file cannot be read or out cannot be written, LMC_ERR_NOMEM. counts may
 * be NULL.
 */
lmc_status lmc_trace_dump_file(const char *path, const lmc_trace_dump_options *opt, FILE *out,
                               lmc_trace_dump_counts *counts, lmc_error *err);

/* The ARGS column of a text line: " name=value" per argument, abbreviated. */
void lmc_trace_dump_args_text(lmc_strbuf *b, const lmc_trace_arg *args, size_t nargs);

/*
 * The full decode of one value as JSON (the caller frees it; NULL when
 * memory runs out): natives as themselves, bytes as lowercase hex, an
 * ObjectKey as {"chunk_hash": hex, "model_name", "kv_rank",
 * "object_group_id", "cache_salt"}, a layout as {"shapes", "dtypes"},
 * dtypes and trim policies by name, a PrefetchHandle by its fields, lists,
 * tuples and sets as arrays.
 */
lmc_json *lmc_trace_dump_value_json(const lmc_tv *v);

#endif
