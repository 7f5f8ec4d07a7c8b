/*
 * format.h -- the .lct file format: frames, Header and Record.
 *
 * Owns: the byte layout (spec/trace-format.md section 1). A file is a
 * sequence of frames, each a 4-byte big-endian length N and N bytes of one
 * msgpack value. Frame 0 is the Header, the rest are Records. Both are
 * msgpack maps whose first entry is "type" ("header" / "record"), then the
 * fields in declaration order:
 *
 *   Header: magic (bin "LMCT"), format_version (1), level (str),
 *           trace_schema_version (2 written; 1 and 2 read), t_mono_start
 *           (float64), t_wall_start (float64), sm_config_json (str),
 *           sm_config_digest (str), [level_meta (map), omitted when empty]
 *   Record: t_mono (float64, relative to t_mono_start), t_wall (float64),
 *           qualname (str), args (map of codec-encoded values)
 *
 * Decoding follows msgspec: unknown keys are skipped; "type", if present,
 * must match; a missing required field is an error; a float field accepts
 * an integer.
 *
 * Threads: none; pure functions.
 */
#ifndef LMC_TRACE_FORMAT_H
#define LMC_TRACE_FORMAT_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/byteorder.h" /* lmc_get_be32 / lmc_put_be32 for frame prefixes */
#include "lmcache/status.h"
#include "trace/value.h"

#define LMC_TRACE_MAGIC "LMCT"
#define LMC_TRACE_FORMAT_VERSION 1
#define LMC_TRACE_SCHEMA_VERSION 2 /* written */
#define LMC_TRACE_QUALNAME_PREFIX "lmcache.v1.distributed.storage_manager.StorageManager."

/* Frames larger than this are treated as corrupt by the reader. */
#define LMC_TRACE_MAX_FRAME (256u * 1024 * 1024)

typedef struct lmc_trace_header {
    uint8_t magic[16];
    size_t magic_len;
    int64_t format_version;
    char *level; /* owned */
    int64_t trace_schema_version;
    double t_mono_start;
    double t_wall_start;
    char *sm_config_json;   /* owned; "" when absent */
    char *sm_config_digest; /* owned; "" when absent */
    /* level_meta as (key, value-as-text) pairs, keys sorted; owned. */
    char **meta_keys;
    char **meta_values;
    size_t n_meta;
} lmc_trace_header;

void lmc_trace_header_free(lmc_trace_header *h);

/*
 * Append one Header frame to out. magic/format_version come from the
 * struct (so tests can write a bad magic); level_meta is written only when
 * n_meta > 0 (values as strings).
 */
lmc_status lmc_trace_encode_header(msgpack_sbuffer *out, const lmc_trace_header *h, lmc_error *err);

/*
 * Append one Record frame. On failure out is left exactly as it was (no
 * partial frame), so a caller batching frames can go on.
 */
lmc_status lmc_trace_encode_record(msgpack_sbuffer *out, double t_mono, double t_wall,
                                   const char *qualname, size_t qualname_len,
                                   const lmc_trace_arg *args, size_t nargs, lmc_error *err);

/*
 * Decode a Header body (the msgpack bytes of frame 0, without the length
 * prefix) into h. Format errors are LMC_ERR_FORMAT. Checks nothing about
 * the values (the reader checks magic and versions).
 */
lmc_status lmc_trace_decode_header(const void *body, size_t len, lmc_trace_header *h,
                                   lmc_error *err);

/* A decoded Record; the qualname and all args live in the arena (none point into the body). */
typedef struct lmc_trace_record {
    double t_mono;
    double t_wall;
    const char *qualname; /* NUL-terminated copy in the arena */
    size_t qualname_len;
    lmc_trace_arg *args;
    size_t nargs;
    uint64_t offset; /* byte offset of the frame in the file */
} lmc_trace_record;

/*
 * Decode a Record body fully (args through the codecs) into the arena. The
 * arena also receives the parse tree, so reset it between records.
 */
lmc_status lmc_trace_decode_record(const void *body, size_t len, lmc_arena *a,
                                   lmc_trace_record *rec, lmc_error *err);

/*
 * Fast path for `trace info`: read only t_mono and qualname of a Record
 * body without decoding args. The qualname points into body.
 */
lmc_status lmc_trace_peek_record(const void *body, size_t len, double *t_mono,
                                 const char **qualname, size_t *qualname_len, lmc_error *err);

#endif
