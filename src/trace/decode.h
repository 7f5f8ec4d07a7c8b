/*
 * decode.h -- a record's args straight from their msgpack bytes into
 * lmc_tv values, through the codec registry, with no msgpack_object tree.
 *
 * Owns nothing; it fills the caller's arenas. The input must have passed
 * lmc_trace_check_any (trace/validate.h): every length fits, strs are
 * UTF-8 and nesting is bounded, so only the codecs (and memory) can fail.
 * The result is what lmc_codec_decode_value gives for the same bytes, the
 * same values and the same error messages, but built without the tree
 * msgpack-c (or format.c's parser) would make first: a tree costs 24 bytes
 * per msgpack value and 48 per map entry, so a list of small ints decoded
 * through one took ~56 times its size (the tree plus the values). Here a
 * native value costs its lmc_tv (32 bytes) and nothing else; a key list
 * the recorder's way (the hot case) costs one lmc_object_key and one
 * lmc_tv per key, about 2.5 times its bytes. Only the payload of a tagged
 * value with a codec of its own (MemoryLayoutDesc, PrefetchHandle, ...,
 * and keys written in an unusual form) is parsed into a small tree, in the
 * scratch arena, which is reset as soon as the codec has built the value.
 *
 * Threads: none.
 */
#ifndef LMC_TRACE_DECODE_H
#define LMC_TRACE_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mp_reader.h"
#include "lmcache/status.h"
#include "trace/value.h"

typedef struct lmc_trace_decoder {
    lmc_arena *values;  /* the result */
    lmc_arena *scratch; /* codec payload trees; reset after each tagged value */
    /*
     * Copy str and bin bytes into values (the result outlives the input);
     * false: point into the input, which then must live as long as the
     * result (the reader's frame buffer does).
     */
    bool copy_bytes;
} lmc_trace_decoder;

/* The args map at [p, p + len) into an array of *n args (in values). */
lmc_status lmc_trace_decode_args(const lmc_trace_decoder *d, const uint8_t *p, size_t len,
                                 lmc_trace_arg **args, size_t *n, lmc_error *err);

/* One value at r (depth: containers around it, as lmc_trace_check_any counts). */
lmc_status lmc_trace_decode_value(const lmc_trace_decoder *d, lmc_mp_reader *r, unsigned depth,
                                  lmc_tv *out, lmc_error *err);

/*
 * Parse one value at r into the msgpack_object tree msgpack-c would build,
 * containers from a (strings point into r's buffer). For codecs and other
 * code that works on msgpack_object. depth as above.
 */
struct msgpack_object;
lmc_status lmc_trace_parse_object(lmc_mp_reader *r, lmc_arena *a, struct msgpack_object *o,
                                  unsigned depth, const char *what, lmc_error *err);

#endif
