/*
 * codec.h -- the codec registry: trace argument values <-> msgpack.
 *
 * Owns: the process-wide registry (built once, at first use, with the
 * built-in codecs; more may be registered at start-up) mapping a value
 * kind to {tag, encode, decode} and a tag back to its codec. The wire forms
 * are LMCache's (spec/trace-format.md section 2): a non-native value is a
 * two-entry map {"__t__": <tag>, "v": <payload>} with the keys in that
 * order; tuples use the built-in tag "tuple", sets "set".
 *
 * The writer (recorder) and the reader (replay, info) both go through this
 * registry, so the two halves cannot drift apart.
 *
 * Errors: encoding a kind with no codec -> LMC_ERR_UNSUPPORTED, "trace.codecs:
 * no codec registered for type '<Name>'"; decoding an unknown tag ->
 * LMC_ERR_FORMAT, "trace.codecs: unknown tag '<tag>'"; a malformed payload
 * -> LMC_ERR_FORMAT naming the tag and the problem; an unknown torch dtype ->
 * "trace.codecs: unknown torch dtype '<name>'".
 *
 * Threads: lookups are thread-safe after start-up; lmc_codec_register is
 * for start-up (and tests) only.
 */
#ifndef LMC_TRACE_CODEC_H
#define LMC_TRACE_CODEC_H

#include <msgpack.h>
#include <stddef.h>

#include "lmcache/status.h"
#include "trace/value.h"

typedef struct lmc_codec {
    uint32_t kind;    /* the lmc_tv_kind it encodes */
    const char *name; /* the type's name in messages, e.g. "ObjectKey" */
    const char *tag;  /* the wire tag, e.g. "ObjectKey", "torch.dtype" */
    /* Write the payload (the "v" part) of v. */
    lmc_status (*encode)(msgpack_packer *pk, const lmc_tv *v, lmc_error *err);
    /* Build a value from a payload; allocate from the arena. */
    lmc_status (*decode)(const msgpack_object *payload, lmc_arena *a, lmc_tv *out, lmc_error *err);
} lmc_codec;

/* Add a codec; LMC_ERR_INVALID if its kind or tag is already registered. */
lmc_status lmc_codec_register(const lmc_codec *c, lmc_error *err);

const lmc_codec *lmc_codec_for_kind(uint32_t kind);
const lmc_codec *lmc_codec_for_tag(const char *tag, size_t len);

/*
 * One value: natives as themselves (ints smallest form, floats always
 * float64, bytes as bin8+), lists element-wise, maps with keys as given and
 * values encoded, tagged kinds wrapped.
 */
lmc_status lmc_codec_encode_value(msgpack_packer *pk, const lmc_tv *v, lmc_error *err);

/* An args map: {name: encoded value, ...} in the order given. */
lmc_status lmc_codec_encode_args(msgpack_packer *pk, const lmc_trace_arg *args, size_t n,
                                 lmc_error *err);

/*
 * Decode one msgpack value: lists element-wise; a map with "__t__" is a
 * tagged value (tuple, set or a registered tag); a map without it decodes
 * its values; everything else as is.
 *
 * Everything the result points to (strings and bytes are copied, keys,
 * layouts, handles, lists) lives in the arena, not in o. A decoded
 * PrefetchHandle's arrays are arena memory: never lmc_prefetch_handle_clear
 * it (copy it with lmc_prefetch_handle_make to keep it).
 */
lmc_status lmc_codec_decode_value(const msgpack_object *o, lmc_arena *a, lmc_tv *out,
                                  lmc_error *err);

/* An args map (string keys) into an arena-allocated array of args. */
lmc_status lmc_codec_decode_args(const msgpack_object *map, lmc_arena *a, lmc_trace_arg **args,
                                 size_t *n, lmc_error *err);

/* lmc_trace_args_find (the arg named name) is declared in value.h, next to lmc_trace_arg. */

#endif
