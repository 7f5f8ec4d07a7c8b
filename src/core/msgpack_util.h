/*
 * msgpack_util.h -- small msgpack helpers shared by the trace codecs, the
 * trace format and the client.
 *
 * Owns nothing. Threads: pure functions.
 */
#ifndef LMC_CORE_MSGPACK_UTIL_H
#define LMC_CORE_MSGPACK_UTIL_H

#include <msgpack.h>

/* A short name of a decoded value's type for messages: "nil", "bool", "int",
 * "float", "str", "bin", "array", "map", "ext" (or "unknown"). */
const char *lmc_msgpack_type_name(const msgpack_object *o);

#endif
