/*
 * mp_reader.h -- a bounds-checked msgpack reader: a cursor over one buffer.
 *
 * Owns nothing and never allocates: it reads the caller's bytes, one item
 * at a time, and hands back scalars by value and strs, bins and exts as
 * pointers into the buffer. Used by everything that decodes msgpack from
 * outside the process: the trace format (src/trace/format.c), the server's
 * request decoder (src/server/protocol.c) and the client's reply decoder
 * (src/client/client.c). Encoding stays with msgpack-c's packer.
 *
 * Why not msgpack_unpack_next: msgpack-c allocates an array's or map's
 * storage from the declared count before it has seen the elements, so a
 * 5-byte hostile value (dd ff ff ff ff) asks its zone for 64 GiB; and it
 * builds a whole object tree (zone malloc/free, ~250 objects for a 16-key
 * trace record, ~3.3 us) where a reader that walks the bytes once needs
 * none. Here every declared length and count is checked against the bytes
 * actually left before anything is consumed: a str/bin/ext body must fit,
 * an array of n items needs at least n more bytes and a map of n pairs 2n
 * (every msgpack value is at least one byte). So a caller that sizes an
 * allocation by a count read here allocates at most a small multiple of
 * its input.
 *
 * Integers: LMC_MP_UINT is any integer >= 0 whatever its encoding (so
 * 2^64-1 is representable and never confused with a negative int64),
 * LMC_MP_INT any integer < 0 -- the split msgpack-c makes. lmc_mp_get_int64
 * and lmc_mp_get_double read a number of any int or float encoding.
 *
 * Errors: a read returns LMC_MP_OK or why it failed, and the reader stays
 * at the start of the item that failed (for lmc_mp_skip the innermost), so
 * lmc_mp_offset names the byte; lmc_mp_error_set turns that into a message.
 *
 * The common short forms (positive fixints, fixstrs, bin8, uint8-32,
 * fixmaps and fixarrays) are decoded inline by lmc_mp_next; everything
 * else goes through one out-of-line function, which also produces every
 * error.
 *
 * Threads: none; a reader belongs to one thread at a time.
 */
#ifndef LMC_CORE_MP_READER_H
#define LMC_CORE_MP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/byteorder.h"
#include "lmcache/status.h"

typedef enum lmc_mp_type {
    LMC_MP_NIL,
    LMC_MP_BOOL,  /* v.b */
    LMC_MP_UINT,  /* an integer >= 0, any encoding, up to 2^64-1: v.u */
    LMC_MP_INT,   /* an integer < 0: v.i */
    LMC_MP_FLOAT, /* float 32 or 64 (f32 says which): v.f */
    LMC_MP_STR,   /* v.s: the bytes (not NUL-terminated, not checked as UTF-8) */
    LMC_MP_BIN,   /* v.s */
    LMC_MP_ARRAY, /* header only: v.n items follow */
    LMC_MP_MAP,   /* header only: v.n key/value pairs follow */
    LMC_MP_EXT,   /* v.s: the data; ext_type: its type byte */
} lmc_mp_type;

typedef struct lmc_mp_item {
    lmc_mp_type type;
    int8_t ext_type; /* LMC_MP_EXT only */
    bool f32;        /* LMC_MP_FLOAT only: encoded as float 32 */
    union {
        bool b;
        uint64_t u;
        int64_t i;
        double f;
        struct {
            const char *ptr; /* into the reader's buffer */
            uint32_t len;
        } s;
        uint32_t n;
    } v;
} lmc_mp_item;

typedef enum lmc_mp_result {
    LMC_MP_OK = 0,
    LMC_MP_TRUNCATED, /* the buffer ends inside the item, or a count cannot fit in it */
    LMC_MP_INVALID,   /* the byte 0xc1, which msgpack never uses */
    LMC_MP_TOO_DEEP,  /* lmc_mp_skip: containers nested beyond its limit */
} lmc_mp_result;

typedef struct lmc_mp_reader {
    const uint8_t *p;     /* the next byte */
    const uint8_t *end;   /* one past the last byte */
    const uint8_t *start; /* the buffer's first byte (for offsets) */
} lmc_mp_reader;

/* msgpack-c's unpacker refuses more nesting than this (MSGPACK_EMBED_STACK_SIZE). */
#define LMC_MP_MAX_DEPTH 32
/* lmc_mp_skip without a depth limit (a counter, no stack: any depth is fine). */
#define LMC_MP_ANY_DEPTH 0u

/* A reader over len bytes at data (data may be NULL when len is 0). */
static inline void lmc_mp_reader_init(lmc_mp_reader *r, const void *data, size_t len)
{
    r->start = r->p = data != NULL ? (const uint8_t *)data : (const uint8_t *)"";
    r->end = r->p + (data != NULL ? len : 0);
}

/* Bytes read so far (the offset of the next item). */
static inline size_t lmc_mp_offset(const lmc_mp_reader *r)
{
    return (size_t)(r->p - r->start);
}

/* Bytes not read yet. */
static inline size_t lmc_mp_left(const lmc_mp_reader *r)
{
    return (size_t)(r->end - r->p);
}

/*
 * Read one item: scalars, strs, bins and exts whole; of an array or map
 * only the header (then read its v.n items, or 2 * v.n for a map, or skip
 * them). lmc_mp_next_unchecked is the same without the check that the
 * count fits in the bytes left: for a reader that stops part-way through a
 * container and allocates nothing by its count.
 */
static inline lmc_mp_result lmc_mp_next(lmc_mp_reader *r, lmc_mp_item *it);
static inline lmc_mp_result lmc_mp_next_unchecked(lmc_mp_reader *r, lmc_mp_item *it);

/*
 * Skip one whole value. max_depth bounds how deeply non-empty containers
 * nest (the value itself is depth 0; at most LMC_MP_MAX_DEPTH), or is
 * LMC_MP_ANY_DEPTH for no bound; either way nothing recurses. (msgpack-c
 * counts empty containers too: it refuses an empty one at depth 32, which
 * this accepts, as the trace reader always has.)
 */
lmc_mp_result lmc_mp_skip(lmc_mp_reader *r, unsigned max_depth);

/* An int of any encoding that fits int64_t. False for anything else (a UINT above INT64_MAX,
 * a float, another type): it->type tells which. */
static inline bool lmc_mp_get_int64(const lmc_mp_item *it, int64_t *out)
{
    if (it->type == LMC_MP_UINT && it->v.u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)it->v.u;
        return true;
    }
    if (it->type == LMC_MP_INT) {
        *out = it->v.i;
        return true;
    }
    return false;
}

/* A number of any int or float encoding, as a double. False for any other type. */
static inline bool lmc_mp_get_double(const lmc_mp_item *it, double *out)
{
    switch (it->type) {
    case LMC_MP_FLOAT:
        *out = it->v.f;
        return true;
    case LMC_MP_UINT:
        *out = (double)it->v.u;
        return true;
    case LMC_MP_INT:
        *out = (double)it->v.i;
        return true;
    default:
        return false;
    }
}

/* Whether it is a str holding exactly the NUL-terminated lit. */
static inline bool lmc_mp_str_is(const lmc_mp_item *it, const char *lit)
{
    size_t n = strlen(lit);
    return it->type == LMC_MP_STR && it->v.s.len == n && memcmp(it->v.s.ptr, lit, n) == 0;
}

/*
 * Consume the n bytes at lit if they come next (false, nothing consumed,
 * otherwise): a fast match of an encoded field name or header the caller
 * expects. With n a constant of 8 or more this is a few word loads.
 */
static inline bool lmc_mp_take(lmc_mp_reader *r, const void *lit, size_t n)
{
    const uint8_t *l = lit;
    if (lmc_mp_left(r) < n)
        return false;
    if (n < 8) {
        if (memcmp(r->p, l, n) != 0)
            return false;
    } else {
        uint64_t x, y;
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, r->p + i, 8);
            memcpy(&y, l + i, 8);
            if (x != y)
                return false;
        }
        memcpy(&x, r->p + n - 8, 8); /* the last word, overlapping */
        memcpy(&y, l + n - 8, 8);
        if (x != y)
            return false;
    }
    r->p += n;
    return true;
}

/*
 * Consume an int in one of the unsigned encodings (positive fixint, uint 8
 * to 64) if one comes next, into *out; false, nothing consumed, for
 * anything else (read it with lmc_mp_next to see what it is: a signed
 * encoding may still hold a value >= 0). The inner loop of long int lists.
 */
/* uint 32, 16 and 8 (the order token ids use them), given the first byte and the bytes left. */
static inline __attribute__((always_inline)) bool lmc_mp_uint_tail_(lmc_mp_reader *r, uint8_t b,
                                                                    size_t left, uint64_t *out)
{
    const uint8_t *p = r->p;
    if (b == 0xce && left >= 5) {
        *out = lmc_get_be32(p + 1);
        r->p += 5;
        return true;
    }
    if (b == 0xcd && left >= 3) {
        *out = lmc_get_be16(p + 1);
        r->p += 3;
        return true;
    }
    if (b == 0xcc && left >= 2) {
        *out = p[1];
        r->p += 2;
        return true;
    }
    return false;
}

static inline __attribute__((always_inline)) bool lmc_mp_take_uint(lmc_mp_reader *r, uint64_t *out)
{
    size_t left = lmc_mp_left(r);
    if (left == 0)
        return false;
    const uint8_t b = r->p[0];
    if (b <= 0x7f) {
        *out = b;
        r->p++;
        return true;
    }
    if (lmc_mp_uint_tail_(r, b, left, out))
        return true;
    if (b == 0xcf && left >= 9) {
        *out = lmc_get_be64(r->p + 1);
        r->p += 9;
        return true;
    }
    return false;
}

/*
 * Up to n consecutive uints of at most 32 bits (positive fixint, uint 8,
 * 16, 32) into out[0..): the count taken, stopping before the first item
 * that is not one (or is truncated), so the caller reads that one with
 * the general reader and reports it. A token list's fast path: the cursor
 * stays in a register for the whole run.
 */
size_t lmc_mp_take_uint32s(lmc_mp_reader *r, uint32_t *out, size_t n);

/* "nil", "bool", "int", "float", "str", "bin", "array", "map", "ext". */
const char *lmc_mp_type_name(lmc_mp_type t);

/*
 * Set err (LMC_ERR_FORMAT) for a failed read at the reader's position:
 * "<what>: msgpack data is truncated (at byte N)", "<what>: invalid msgpack
 * byte 0xc1 at byte N", "<what>: msgpack data nested deeper than 32 levels
 * (at byte N)". Returns the status (LMC_OK for LMC_MP_OK).
 */
lmc_status lmc_mp_error_set(lmc_error *err, const char *what, const lmc_mp_reader *r,
                            lmc_mp_result res);

/* ---------------------------------------------------------------------- */
/* The inline fast paths of lmc_mp_next and lmc_mp_next_unchecked        */
/* ---------------------------------------------------------------------- */

/* The short forms, inline; false (nothing consumed) for anything else. */
static inline __attribute__((always_inline)) bool lmc_mp_next_short_(lmc_mp_reader *r,
                                                                     lmc_mp_item *it)
{
    size_t left = lmc_mp_left(r);
    if (left == 0)
        return false;
    const uint8_t *p = r->p;
    const uint8_t b = p[0];
    if (b <= 0x7f) {
        it->type = LMC_MP_UINT;
        it->v.u = b;
        r->p++;
        return true;
    }
    if ((b & 0xe0) == 0xa0 && left > (size_t)(b & 0x1f)) {
        it->type = LMC_MP_STR;
        it->v.s.ptr = (const char *)p + 1;
        it->v.s.len = b & 0x1f;
        r->p += 1 + (b & 0x1f);
        return true;
    }
    if (b == 0xc4 && left >= 2 && left - 2 >= p[1]) {
        it->type = LMC_MP_BIN;
        it->v.s.ptr = (const char *)p + 2;
        it->v.s.len = p[1];
        r->p += 2 + (size_t)p[1];
        return true;
    }
    if (lmc_mp_uint_tail_(r, b, left, &it->v.u)) {
        it->type = LMC_MP_UINT;
        return true;
    }
    if ((b & 0xe0) == 0x80 && (uint64_t)(b & 0x0f) << (b < 0x90) < left) {
        it->type = b < 0x90 ? LMC_MP_MAP : LMC_MP_ARRAY;
        it->v.n = b & 0x0f;
        r->p++;
        return true;
    }
    return false;
}

/* Every encoding, out of line (mp_reader.c); counts not checked. */
lmc_mp_result lmc_mp_next_any_(lmc_mp_reader *r, lmc_mp_item *it);

/*
 * Both are always inlined: the callers are decoders' inner loops, and a
 * call per scalar was most of their cost. The short forms are tried in
 * order of frequency in records and requests: field names and small ints,
 * chunk hashes, token ids.
 */
static inline __attribute__((always_inline)) lmc_mp_result lmc_mp_next(lmc_mp_reader *r,
                                                                       lmc_mp_item *it)
{
    if (lmc_mp_next_short_(r, it))
        return LMC_MP_OK;
    const uint8_t *at = r->p;
    lmc_mp_result res = lmc_mp_next_any_(r, it);
    if (res == LMC_MP_OK && (it->type == LMC_MP_ARRAY || it->type == LMC_MP_MAP) &&
        (uint64_t)it->v.n << (it->type == LMC_MP_MAP) > lmc_mp_left(r)) {
        r->p = at;
        return LMC_MP_TRUNCATED;
    }
    return res;
}

static inline __attribute__((always_inline)) lmc_mp_result lmc_mp_next_unchecked(lmc_mp_reader *r,
                                                                                 lmc_mp_item *it)
{
    return lmc_mp_next_short_(r, it) ? LMC_MP_OK : lmc_mp_next_any_(r, it);
}

#endif
