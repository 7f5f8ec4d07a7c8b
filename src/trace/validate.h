/*
 * validate.h -- what LMCache's reader accepts: msgspec's decoding rules
 * applied to a frame body, without building anything.
 *
 * Owns: the one definition of "a frame LMCache's TraceReader yields as a
 * Record" (spec/trace-format.md sections 1.2 and 1.5). Every command that
 * counts or reads records goes through lmc_trace_scan_record: `trace info`,
 * the replay's record count and the replay itself, so they cannot disagree.
 * A body it rejects is "malformed" (the reader skips it with a warning); a
 * body it accepts is a record, even when its args later fail to decode
 * through the codecs (LMCache's replay skips such a record; it still is
 * one).
 *
 * msgspec decodes a Record (a tagged Struct, not array_like) from a msgpack
 * map as follows, and so does this:
 *   - the root must be a map, and nothing may follow it in the frame;
 *   - every key must be a str (its bytes are compared, never decoded);
 *   - "type" may appear anywhere, any number of times, or not at all; each
 *     occurrence must be the str "record";
 *   - t_mono and t_wall take an int (of any width, up to 2^64-1) or a float
 *     (32 or 64 bit), not a bool; qualname a str; args a map whose keys are
 *     strs and whose values are anything msgspec decodes as Any;
 *   - a field given twice is decoded (and validated) both times and the
 *     last value kept; unknown keys are skipped without being decoded;
 *   - a missing t_mono, t_wall, qualname or args is an error (in that order).
 * "Anything msgspec decodes as Any" means: every str is UTF-8 (Python's
 * strict decoder); an ext of type -1 is a valid msgpack timestamp (4, 8 or
 * 12 bytes, nanoseconds below 10^9, a date in years 1..9999); a map key is
 * hashable once decoded (not a map, not an ext other than a timestamp, and
 * not an array that holds one).
 *
 * The one rule that differs, deliberately: containers may nest at most 32
 * levels (LMC_MP_MAX_DEPTH, counting the record map), where msgspec goes as
 * deep as Python's recursion limit. docs/trace-format.md lists it.
 *
 * Threads: none; pure functions over caller-owned buffers.
 */
#ifndef LMC_TRACE_VALIDATE_H
#define LMC_TRACE_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mp_reader.h"
#include "lmcache/status.h"

/*
 * The layout of an ObjectKey as the codec writes it, shared by the checker
 * and the decoder so that both recognise the hot case the same way:
 * {"__t__": "ObjectKey", "v": then a fixmap of the five fields in
 * declaration order, each name a fixstr.
 */
#define LMC_TRACE_KEY_WRAP "\x82\xa5__t__\xa9ObjectKey\xa1v"
#define LMC_TRACE_KEY_WRAP_LEN 19

typedef struct lmc_trace_key_fields {
    lmc_mp_item hash, model, salt;
    int64_t rank, group;
    bool has_group, has_salt;
} lmc_trace_key_fields;

/*
 * The payload at r in that exact layout (the octal escapes are the map and
 * str headers: 0x85, 0xaa, 0xa7, 0xaf), its fields into *f; false, with r
 * anywhere inside it, for any other layout or a field of another type.
 * Strs are not checked as UTF-8 here.
 */
static inline __attribute__((always_inline)) bool
lmc_trace_key_fields_in_order(lmc_mp_reader *r, lmc_trace_key_fields *f)
{
    lmc_mp_item k, g;
    if (!lmc_mp_take(r, "\205\252chunk_hash", 12) || lmc_mp_next(r, &f->hash) != LMC_MP_OK ||
        f->hash.type != LMC_MP_BIN || !lmc_mp_take(r, "\252model_name", 11) ||
        lmc_mp_next(r, &f->model) != LMC_MP_OK || f->model.type != LMC_MP_STR ||
        !lmc_mp_take(r, "\247kv_rank", 8) || lmc_mp_next(r, &k) != LMC_MP_OK ||
        !lmc_mp_get_int64(&k, &f->rank) || !lmc_mp_take(r, "\257object_group_id", 16) ||
        lmc_mp_next(r, &g) != LMC_MP_OK || !lmc_mp_get_int64(&g, &f->group) ||
        !lmc_mp_take(r, "\252cache_salt", 11) || lmc_mp_next(r, &f->salt) != LMC_MP_OK ||
        f->salt.type != LMC_MP_STR)
        return false;
    f->has_group = f->has_salt = true;
    return true;
}

/* A Record body that passed: its fields, pointing into the body. */
typedef struct lmc_trace_record_scan {
    double t_mono;
    double t_wall;
    const char *qualname; /* not NUL-terminated; UTF-8; may hold NUL */
    size_t qualname_len;
    const uint8_t *args; /* the encoded "args" map (the last one when repeated) */
    size_t args_len;
    uint32_t nargs; /* its pairs */
} lmc_trace_record_scan;

/*
 * Whether body[0..len) is a Record LMCache's reader yields. LMC_OK with
 * *out filled, or LMC_ERR_FORMAT with err naming the problem ("Record:
 * ...", "Record.args: ...").
 */
lmc_status lmc_trace_scan_record(const void *body, size_t len, lmc_trace_record_scan *out,
                                 lmc_error *err);

/*
 * Check one value at r the way msgspec decodes a value typed Any, and move
 * r past it. depth is the number of containers around it (the limit counts
 * from the frame's root). LMC_ERR_FORMAT with err "<what>: ..." otherwise;
 * r then rests where the problem is.
 */
lmc_status lmc_trace_check_any(lmc_mp_reader *r, unsigned depth, const char *what, lmc_error *err);

/* A str field's bytes: UTF-8 as msgspec requires, else LMC_ERR_FORMAT "<what>.<field>: ...". */
lmc_status lmc_trace_check_str(const lmc_mp_item *s, const char *what, const char *field,
                               lmc_error *err);

#endif
