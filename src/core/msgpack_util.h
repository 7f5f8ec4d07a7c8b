/*
 * msgpack_util.h -- helpers for msgpack-c's decoded values (msgpack_object),
 * which the trace codecs work on, for packing strs and uint32 arrays, and
 * a window for writing packed bytes in place.
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
 * msgpack_sbuffer_write, but out of line, so that a packer made with it can
 * be told from any other (msgpack-c's is static inline: each file that takes
 * its address gets a copy of its own). Pack into an sbuffer with
 * lmc_msgpack_sbuffer_packer_init, and lmc_mp_window writes in place.
 */
int lmc_msgpack_sbuffer_write(void *sbuf, const char *buf, size_t len);

static inline void lmc_msgpack_sbuffer_packer_init(msgpack_packer *pk, msgpack_sbuffer *sb)
{
    msgpack_packer_init(pk, sb, lmc_msgpack_sbuffer_write);
}

/*
 * A window for bytes a caller encodes itself and then hands to a packer.
 * msgpack-c hands every packed piece to the packer's callback; a caller
 * that builds many bytes by hand would stage them and hand them over in
 * one call, which copies them once more. When the packer writes to an
 * sbuffer (lmc_msgpack_sbuffer_packer_init) the window is instead the
 * sbuffer's free end, grown as msgpack_sbuffer_write grows it, and handing
 * over is adding to its size: no second copy.
 *
 *   lmc_mp_window w;
 *   if (lmc_mp_window_open(&w, pk) != 0) ...       room at w.start .. w.end
 *   uint8_t *p = w.start;  write up to w.end ...
 *   if (lmc_mp_window_flush(&w, p) != 0) ...       hand over; room again
 *   p = w.start;
 *   if (lmc_mp_window_close(&w, p) != 0) ...       hand over the last bytes
 *
 * The room is LMC_MP_WINDOW_BYTES at least. Something may be packed
 * through pk meanwhile only while the window holds nothing (p == w.start);
 * a flush with that p then opens the room after what was packed. Each
 * returns 0 or msgpack-c's error code (-1: out of memory, or the
 * callback's). A window needs no cleanup.
 */
#define LMC_MP_WINDOW_BYTES 8192

typedef struct lmc_mp_window {
    msgpack_packer *pk;
    msgpack_sbuffer *sb; /* NULL: staged in buf, handed to the callback */
    uint8_t *start, *end;
    uint8_t buf[LMC_MP_WINDOW_BYTES];
} lmc_mp_window;

int lmc_mp_window_open(lmc_mp_window *w, msgpack_packer *pk);
int lmc_mp_window_flush(lmc_mp_window *w, uint8_t *p);
int lmc_mp_window_close(lmc_mp_window *w, uint8_t *p);

/*
 * An array of n uint32s, the same bytes as msgpack_pack_array and one
 * msgpack_pack_uint32 per item (the shortest form of each), but written
 * through an lmc_mp_window: msgpack-c calls the callback once per item, and
 * for a lookup's thousands of token ids those calls were the client's
 * largest cost. msgpack-c's return code (-1 when n is over UINT32_MAX).
 */
int lmc_msgpack_pack_uint32_array(msgpack_packer *pk, const uint32_t *v, size_t n);

/* lmc_mp_get_int64 / lmc_mp_get_double of the object. */
bool lmc_msgpack_get_int64(const msgpack_object *o, int64_t *out);
bool lmc_msgpack_get_double(const msgpack_object *o, double *out);

#endif
