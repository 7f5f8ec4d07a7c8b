/*
 * msgpack_util.h -- helpers for msgpack-c's decoded values (msgpack_object),
 * which the trace codecs work on, and for packing strs.
 *
 * The rules are the reader's (core/mp_reader.h): an object is seen as the
 * reader's item, so a number, and a type's name, read the same whether it
 * came from a reader or from a tree.
 *
 * Owns nothing. Threads: pure functions.
 */
#ifndef LMC_CORE_MSGPACK_UTIL_H
#define LMC_CORE_MSGPACK_UTIL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/mp_reader.h"

/* The object as a reader item (containers: their type and size); false (nil) for a type
 * msgpack-c does not define. */
bool lmc_msgpack_item_of(const msgpack_object *o, lmc_mp_item *out);

/* A short name of a decoded value's type for messages: "nil", "bool", "int",
 * "float", "str", "bin", "array", "map", "ext" (or "unknown"). */
const char *lmc_msgpack_type_name(const msgpack_object *o);

/* A str of n bytes at s (s may be NULL when n is 0): msgpack-c's return code. */
static inline int lmc_msgpack_pack_str(msgpack_packer *pk, const char *s, size_t n)
{
    int r = msgpack_pack_str(pk, n);
    if (r == 0 && n > 0)
        r = msgpack_pack_str_body(pk, s, n);
    return r;
}

/* A NUL-terminated str; NULL packs as "". */
static inline int lmc_msgpack_pack_cstr(msgpack_packer *pk, const char *s)
{
    return lmc_msgpack_pack_str(pk, s, s != NULL ? strlen(s) : 0);
}

/*
 * An array of n uint32s, the same bytes as msgpack_pack_array and one
 * msgpack_pack_uint32 per item (the shortest form of each), but written to
 * the packer's callback in batches: msgpack-c calls it once per item, and
 * for a lookup's thousands of token ids those calls were the client's
 * largest cost. msgpack-c's return code (-1 when n is over UINT32_MAX).
 */
int lmc_msgpack_pack_uint32_array(msgpack_packer *pk, const uint32_t *v, size_t n);

/* lmc_mp_get_int64 / lmc_mp_get_double of the object. */
bool lmc_msgpack_get_int64(const msgpack_object *o, int64_t *out);
bool lmc_msgpack_get_double(const msgpack_object *o, double *out);

#endif
