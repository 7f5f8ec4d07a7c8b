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
 * Decoding follows msgspec (trace/validate.h has every rule): unknown keys
 * are skipped; "type", if present, must match; a repeated field keeps its
 * last value; a missing required field is an error; a float field accepts
 * an integer; every str is UTF-8; nothing may follow the map.
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

/*
 * A frame is any length its u32 prefix can say (up to 4 GiB - 1), as in
 * LMCache: the reader reads frames of any size, the encoders refuse
 * nothing smaller.
 */
#define LMC_TRACE_MAX_FRAME UINT32_MAX

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

/*
 * A Record. From lmc_trace_decode_record, the qualname and all args live in
 * the arena (none point into the body). From the reader (trace/reader.h),
 * they are valid until its next call, and the args may not be decoded yet.
 */
typedef struct lmc_trace_record {
    double t_mono;
    double t_wall;
    const char *qualname; /* NUL-terminated copy (it may hold NUL itself: see qualname_len) */
    size_t qualname_len;
    lmc_trace_arg *args;
    size_t nargs;
    uint64_t offset; /* byte offset of the frame in the file */
    /*
     * The reader's: NULL, or why the args do not decode through the codecs
     * (the record is still one -- LMCache's reader yields it and its replay
     * skips it). Valid as long as the record.
     */
    const char *args_error;
    /* The reader's: the encoded args map, and whether args holds it decoded. */
    const uint8_t *args_raw;
    size_t args_raw_len;
    bool args_decoded;
} lmc_trace_record;

/*
 * Decode a Record body fully (args through the codecs) into the arena: the
 * rules of lmc_trace_scan_record (trace/validate.h), then the codecs, whose
 * errors are this function's errors.
 */
lmc_status lmc_trace_decode_record(const void *body, size_t len, lmc_arena *a,
                                   lmc_trace_record *rec, lmc_error *err);

/*
 * For `trace info`: check a Record body by the same rules and return only
 * its t_mono and qualname (pointing into body); nothing is decoded or
 * built.
 */
lmc_status lmc_trace_peek_record(const void *body, size_t len, double *t_mono,
                                 const char **qualname, size_t *qualname_len, lmc_error *err);

#endif
