/*
 * format.c -- the .lct frame layout: Header and Record encoding and
 * decoding (see format.h and spec/trace-format.md section 1).
 *
 * Owns: the byte layout of a frame. Encoding appends to the caller's
 * sbuffer: a 4-byte placeholder, the msgpack map, then the length patched
 * in. A record's fixed head (map header, "type", the two times, the
 * qualname header) is one write; the args go through msgpack-c's packer
 * and the codecs. A record that fails to encode is rolled back by
 * restoring the sbuffer's size, so a batch of frames never holds a partial
 * one.
 *
 * Decoding does not call msgpack_unpack_next. Two measured reasons:
 *  - safety: msgpack-c 4.0 allocates an array's or map's storage from the
 *    declared count before it has seen the elements, so a 5-byte hostile
 *    body (dd ff ff ff ff) asks its zone for 64 GiB;
 *  - speed: msgpack_unpack_next of a 16-key reserve_write record (2.5 KB)
 *    takes ~3.3 us on the reference machine (zone malloc/free and ~250
 *    objects), more than the whole replay budget per record (2 us).
 * Records of the recorder's own shape take a fast path first (fast_record,
 * below): keys are decoded straight from the bytes into one contiguous
 * array, and anything unusual falls back to the general path described
 * here, which gives every error its message.
 * The general path: a small bounds-checked cursor (mp_next) parses the body
 * into the same msgpack_object tree msgpack-c would build, with the arrays taken
 * from the caller's arena: every length and count is checked against the
 * bytes actually left before anything is allocated, and nesting is capped
 * at msgpack-c's own limit (32). The codecs then work on msgpack_objects
 * exactly as they would after msgpack-c. Encoding stays with msgpack-c's
 * packer.
 *
 * The same cursor is the `trace info` fast path (lmc_trace_peek_record): a
 * Record's t_mono and qualname precede its args, so peeking reads the map
 * up to those two entries and stops, building nothing (~50 ns per 16-key
 * record, against ~3.3 us for a full msgpack_unpack_next).
 *
 * Threads: none; pure functions over caller-owned buffers.
 */
#include "core/msgpack_util.h"
#include "trace/format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/codec.h"

/* ---------------------------------------------------------------------- */
/* A bounds-checked msgpack cursor                                         */
/* ---------------------------------------------------------------------- */

/* msgpack-c's unpacker refuses more nesting than this (MSGPACK_EMBED_STACK_SIZE). */
#define MP_MAX_DEPTH 32

typedef enum mp_type {
    MP_NIL,
    MP_BOOL,
    MP_UINT, /* any integer >= 0 */
    MP_INT,  /* any integer < 0 */
    MP_FLOAT,
    MP_STR,
    MP_BIN,
    MP_ARRAY,
    MP_MAP,
    MP_EXT,
} mp_type;

typedef struct mp_item {
    mp_type type;
    union {
        bool b;
        uint64_t u;
        int64_t i;
        double f;
        struct {
            const char *ptr;
            uint32_t len;
        } s;        /* STR, BIN, EXT (payload) */
        uint32_t n; /* ARRAY: elements, MAP: pairs */
    } v;
} mp_item;

typedef struct mp_cur {
    const uint8_t *p;
    const uint8_t *end;
    const uint8_t *start; /* for offsets in messages */
} mp_cur;

typedef enum mp_result { MP_OK = 0, MP_TRUNCATED, MP_INVALID, MP_TOO_DEEP } mp_result;

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)lmc_get_be32(p) << 32 | lmc_get_be32(p + 4);
}

static const char *mp_type_name(mp_type t)
{
    switch (t) {
    case MP_NIL:
        return "nil";
    case MP_BOOL:
        return "bool";
    case MP_UINT:
    case MP_INT:
        return "int";
    case MP_FLOAT:
        return "float";
    case MP_STR:
        return "str";
    case MP_BIN:
        return "bin";
    case MP_ARRAY:
        return "array";
    case MP_MAP:
        return "map";
    case MP_EXT:
        return "ext";
    }
    return "unknown";
}

/*
 * Read one item. Scalars, strings, bins and exts are consumed whole; for an
 * array or map only the header is consumed and v.n gives the count.
 */
static mp_result mp_next(mp_cur *c, mp_item *it)
{
    if (c->p >= c->end)
        return MP_TRUNCATED;
    const uint8_t b = *c->p++;
    const size_t left = (size_t)(c->end - c->p);
    const uint8_t *q = c->p;
    size_t hdr;   /* bytes after b holding a length or a value */
    uint64_t len; /* payload length for str/bin/ext */

    if (b <= 0x7f) {
        it->type = MP_UINT;
        it->v.u = b;
        return MP_OK;
    }
    if (b >= 0xe0) {
        it->type = MP_INT;
        it->v.i = (int8_t)b;
        return MP_OK;
    }
    if (b <= 0x8f) {
        it->type = MP_MAP;
        it->v.n = b & 0x0f;
        return MP_OK;
    }
    if (b <= 0x9f) {
        it->type = MP_ARRAY;
        it->v.n = b & 0x0f;
        return MP_OK;
    }
    if (b <= 0xbf) {
        it->type = MP_STR;
        hdr = 0;
        len = b & 0x1f;
        goto payload;
    }
    switch (b) {
    case 0xc0:
        it->type = MP_NIL;
        return MP_OK;
    case 0xc2:
    case 0xc3:
        it->type = MP_BOOL;
        it->v.b = b == 0xc3;
        return MP_OK;
    case 0xc4:
    case 0xc5:
    case 0xc6:
    case 0xd9:
    case 0xda:
    case 0xdb:
        it->type = b <= 0xc6 ? MP_BIN : MP_STR;
        hdr = (size_t)1 << (b <= 0xc6 ? b - 0xc4 : b - 0xd9);
        if (left < hdr)
            return MP_TRUNCATED;
        len = hdr == 1 ? q[0] : hdr == 2 ? rd16(q) : lmc_get_be32(q);
        goto payload;
    case 0xc7:
    case 0xc8:
    case 0xc9:
        /* ext 8/16/32: a length, a type byte, the data */
        it->type = MP_EXT;
        hdr = (size_t)1 << (b - 0xc7);
        if (left < hdr + 1)
            return MP_TRUNCATED;
        len = hdr == 1 ? q[0] : hdr == 2 ? rd16(q) : lmc_get_be32(q);
        hdr += 1;
        goto payload;
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        it->type = MP_EXT;
        hdr = 1;
        len = (uint64_t)1 << (b - 0xd4);
        if (left < hdr)
            return MP_TRUNCATED;
        goto payload;
    case 0xca: {
        if (left < 4)
            return MP_TRUNCATED;
        uint32_t bits = lmc_get_be32(q);
        float f;
        memcpy(&f, &bits, sizeof(f));
        it->type = MP_FLOAT;
        it->v.f = f;
        c->p += 4;
        return MP_OK;
    }
    case 0xcb: {
        if (left < 8)
            return MP_TRUNCATED;
        uint64_t bits = rd64(q);
        double d;
        memcpy(&d, &bits, sizeof(d));
        it->type = MP_FLOAT;
        it->v.f = d;
        c->p += 8;
        return MP_OK;
    }
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: {
        size_t w = (size_t)1 << (b - 0xcc);
        if (left < w)
            return MP_TRUNCATED;
        it->type = MP_UINT;
        it->v.u = w == 1 ? q[0] : w == 2 ? rd16(q) : w == 4 ? lmc_get_be32(q) : rd64(q);
        c->p += w;
        return MP_OK;
    }
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        size_t w = (size_t)1 << (b - 0xd0);
        if (left < w)
            return MP_TRUNCATED;
        int64_t v = w == 1   ? (int8_t)q[0]
                    : w == 2 ? (int16_t)rd16(q)
                    : w == 4 ? (int32_t)lmc_get_be32(q)
                             : (int64_t)rd64(q);
        if (v >= 0) {
            it->type = MP_UINT;
            it->v.u = (uint64_t)v;
        } else {
            it->type = MP_INT;
            it->v.i = v;
        }
        c->p += w;
        return MP_OK;
    }
    case 0xdc:
    case 0xdd:
    case 0xde:
    case 0xdf: {
        size_t w = (b == 0xdc || b == 0xde) ? 2 : 4;
        if (left < w)
            return MP_TRUNCATED;
        it->type = b <= 0xdd ? MP_ARRAY : MP_MAP;
        it->v.n = w == 2 ? rd16(q) : lmc_get_be32(q);
        c->p += w;
        return MP_OK;
    }
    default: /* 0xc1 is never used */
        c->p--;
        return MP_INVALID;
    }

payload:
    if (left - hdr < len)
        return MP_TRUNCATED;
    it->v.s.ptr = (const char *)q + hdr;
    it->v.s.len = (uint32_t)len;
    c->p = q + hdr + len;
    return MP_OK;
}

/*
 * Walk (and so validate) one complete value. Every container's count must
 * fit in the bytes left (each element takes at least one byte), and
 * non-empty containers nest at most MP_MAX_DEPTH deep, as msgpack-c requires.
 */
static mp_result mp_skip(mp_cur *c)
{
    uint64_t stack[MP_MAX_DEPTH];
    int depth = 0;
    uint64_t left = 1; /* values still to read at this level */
    for (;;) {
        while (left == 0) {
            if (depth == 0)
                return MP_OK;
            left = stack[--depth];
        }
        mp_item it;
        mp_result r = mp_next(c, &it);
        if (r != MP_OK)
            return r;
        left--;
        if (it.type != MP_ARRAY && it.type != MP_MAP)
            continue;
        uint64_t n = it.type == MP_MAP ? 2 * (uint64_t)it.v.n : it.v.n;
        if (n == 0)
            continue;
        if (n > (uint64_t)(c->end - c->p))
            return MP_TRUNCATED;
        if (depth >= MP_MAX_DEPTH)
            return MP_TOO_DEEP;
        stack[depth++] = left;
        left = n;
    }
}

static lmc_status mp_error(lmc_error *err, const char *what, const mp_cur *c, mp_result r)
{
    size_t at = (size_t)(c->p - c->start);
    switch (r) {
    case MP_TRUNCATED:
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: msgpack data is truncated (at byte %zu)",
                             what, at);
    case MP_INVALID:
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: invalid msgpack byte 0x%02x at byte %zu",
                             what, c->p < c->end ? *c->p : 0, at);
    case MP_TOO_DEEP:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: msgpack data nested deeper than %d levels (at byte %zu)", what,
                             MP_MAX_DEPTH, at);
    case MP_OK:
        break;
    }
    return LMC_OK;
}

/*
 * Parse one value into a msgpack_object tree whose arrays come from the
 * arena; strings point into the body. Counts are checked against the bytes
 * left before anything is allocated, so the tree is at most a small
 * multiple of the body, and nesting is bounded (recursion depth too).
 */
/*
 * What records are mostly made of -- small ints and short strs -- parsed
 * inline by the container loops: a call per scalar was most of the cost.
 */
static inline bool parse_fast(mp_cur *c, msgpack_object *o)
{
    if (c->p >= c->end)
        return false;
    const uint8_t b = *c->p;
    if (b <= 0x7f) {
        c->p++;
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = b;
        return true;
    }
    if ((b & 0xe0) == 0xa0 && (size_t)(c->end - c->p) > (size_t)(b & 0x1f)) {
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.ptr = (const char *)c->p + 1;
        o->via.str.size = b & 0x1f;
        c->p += 1 + (b & 0x1f);
        return true;
    }
    return false;
}

static mp_result mp_parse(mp_cur *c, lmc_arena *a, msgpack_object *o, int depth, bool *nomem)
{
    mp_item it;
    mp_result r = mp_next(c, &it);
    if (r != MP_OK)
        return r;
    switch (it.type) {
    case MP_NIL:
        o->type = MSGPACK_OBJECT_NIL;
        return MP_OK;
    case MP_BOOL:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = it.v.b;
        return MP_OK;
    case MP_UINT:
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = it.v.u;
        return MP_OK;
    case MP_INT:
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = it.v.i;
        return MP_OK;
    case MP_FLOAT:
        o->type = MSGPACK_OBJECT_FLOAT64;
        o->via.f64 = it.v.f;
        return MP_OK;
    case MP_STR:
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.ptr = it.v.s.ptr;
        o->via.str.size = it.v.s.len;
        return MP_OK;
    case MP_BIN:
        o->type = MSGPACK_OBJECT_BIN;
        o->via.bin.ptr = it.v.s.ptr;
        o->via.bin.size = it.v.s.len;
        return MP_OK;
    case MP_EXT:
        /* ptr[-1] is the ext type byte, right before the data. */
        o->type = MSGPACK_OBJECT_EXT;
        o->via.ext.type = (int8_t)it.v.s.ptr[-1];
        o->via.ext.ptr = it.v.s.ptr;
        o->via.ext.size = it.v.s.len;
        return MP_OK;
    case MP_ARRAY:
    case MP_MAP:
        break;
    }
    uint32_t n = it.v.n;
    bool is_map = it.type == MP_MAP;
    if ((is_map ? 2 * (uint64_t)n : n) > (uint64_t)(c->end - c->p))
        return MP_TRUNCATED;
    if (n > 0 && depth >= MP_MAX_DEPTH)
        return MP_TOO_DEEP;
    if (is_map) {
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = n;
        o->via.map.ptr = NULL;
        if (n == 0)
            return MP_OK;
        msgpack_object_kv *kv = lmc_arena_alloc(a, (size_t)n * sizeof(*kv));
        if (kv == NULL) {
            *nomem = true;
            return MP_INVALID;
        }
        o->via.map.ptr = kv;
        for (uint32_t i = 0; i < n; i++) {
            if (!parse_fast(c, &kv[i].key) &&
                (r = mp_parse(c, a, &kv[i].key, depth + 1, nomem)) != MP_OK)
                return r;
            if (!parse_fast(c, &kv[i].val) &&
                (r = mp_parse(c, a, &kv[i].val, depth + 1, nomem)) != MP_OK)
                return r;
        }
    } else {
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = n;
        o->via.array.ptr = NULL;
        if (n == 0)
            return MP_OK;
        msgpack_object *items = lmc_arena_alloc(a, (size_t)n * sizeof(*items));
        if (items == NULL) {
            *nomem = true;
            return MP_INVALID;
        }
        o->via.array.ptr = items;
        for (uint32_t i = 0; i < n; i++) {
            if (!parse_fast(c, &items[i]) &&
                (r = mp_parse(c, a, &items[i], depth + 1, nomem)) != MP_OK)
                return r;
        }
    }
    return MP_OK;
}

/* Parse a body that must be exactly one msgpack map. */
static lmc_status parse_body(const void *body, size_t len, const char *what, lmc_arena *a,
                             msgpack_object *out, lmc_error *err)
{
    mp_cur c = {body, (const uint8_t *)body + len, body};
    bool nomem = false;
    mp_result r = mp_parse(&c, a, out, 0, &nomem);
    if (nomem)
        return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", what);
    if (r != MP_OK)
        return mp_error(err, what, &c, r);
    if (c.p != c.end)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: %zu trailing bytes after the msgpack value",
                             what, (size_t)(c.end - c.p));
    if (out->type != MSGPACK_OBJECT_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected a msgpack map", what);
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Field helpers                                                           */
/* ---------------------------------------------------------------------- */

static bool str_is(const char *p, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    return n == m && memcmp(p, lit, m) == 0;
}

static lmc_status wrong_type(lmc_error *err, const char *what, const char *field, const char *want,
                             const char *got)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s.%s: expected %s, got %s", what, field, want, got);
}

/* "type", if present, must be the expected tag. */
static lmc_status check_tag(const char *p, size_t n, bool is_str, const char *got_type,
                            const char *what, const char *want, lmc_error *err)
{
    if (!is_str)
        return wrong_type(err, what, "type", "str", got_type);
    if (!str_is(p, n, want))
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: invalid type tag '%.*s' (expected '%s')",
                             what, (int)(n > 64 ? 64 : n), p, want);
    return LMC_OK;
}

static lmc_status get_float(const msgpack_object *o, const char *what, const char *field,
                            double *out, lmc_error *err)
{
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *out = o->via.f64;
        return LMC_OK;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *out = (double)o->via.u64;
        return LMC_OK;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *out = (double)o->via.i64;
        return LMC_OK;
    default:
        return wrong_type(err, what, field, "float", lmc_msgpack_type_name(o));
    }
}

static lmc_status get_int(const msgpack_object *o, const char *what, const char *field,
                          int64_t *out, lmc_error *err)
{
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)o->via.u64;
        return LMC_OK;
    }
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return LMC_OK;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s.%s: %" PRIu64 " is out of range", what, field,
                             o->via.u64);
    return wrong_type(err, what, field, "int", lmc_msgpack_type_name(o));
}

static lmc_status get_str(const msgpack_object *o, const char *what, const char *field, char **out,
                          lmc_error *err)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return wrong_type(err, what, field, "str", lmc_msgpack_type_name(o));
    char *s = strndup(o->via.str.size > 0 ? o->via.str.ptr : "", o->via.str.size);
    if (s == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "%s.%s: out of memory", what, field);
    free(*out);
    *out = s;
    return LMC_OK;
}

static lmc_status missing(lmc_error *err, const char *what, const char *field)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s: missing required field '%s'", what, field);
}

/* ---------------------------------------------------------------------- */
/* Header                                                                  */
/* ---------------------------------------------------------------------- */

#define PK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            goto nomem;                                                                            \
    } while (0)

static int pack_str(msgpack_packer *pk, const char *s, size_t n)
{
    int r = msgpack_pack_str(pk, n);
    if (r == 0 && n > 0)
        r = msgpack_pack_str_body(pk, s, n);
    return r;
}

static int pack_lit(msgpack_packer *pk, const char *s)
{
    return pack_str(pk, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

static uint8_t *put_lit(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static uint8_t *put_f64(uint8_t *p, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    *p++ = 0xcb;
    lmc_put_be32(p, (uint32_t)(bits >> 32));
    lmc_put_be32(p + 4, (uint32_t)bits);
    return p + 8;
}

static uint8_t *put_str_header(uint8_t *p, size_t n)
{
    if (n < 32) {
        *p++ = (uint8_t)(0xa0 | n);
    } else if (n < 256) {
        *p++ = 0xd9;
        *p++ = (uint8_t)n;
    } else if (n < 65536) {
        *p++ = 0xda;
        *p++ = (uint8_t)(n >> 8);
        *p++ = (uint8_t)n;
    } else {
        *p++ = 0xdb;
        lmc_put_be32(p, (uint32_t)n);
        p += 4;
    }
    return p;
}

/* Patch the length of the frame that starts at before, or roll it back. */
static lmc_status finish_frame(msgpack_sbuffer *out, size_t before, const char *what,
                               lmc_error *err)
{
    size_t body = out->size - before - 4;
    if (body > UINT32_MAX) {
        out->size = before;
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: frame of %zu bytes exceeds 4 GiB", what,
                             body);
    }
    lmc_put_be32((uint8_t *)out->data + before, (uint32_t)body);
    return LMC_OK;
}

lmc_status lmc_trace_encode_header(msgpack_sbuffer *out, const lmc_trace_header *h, lmc_error *err)
{
    static const char placeholder[4];
    size_t before = out->size;
    if (h->magic_len > sizeof(h->magic) ||
        (h->n_meta > 0 && (h->meta_keys == NULL || h->meta_values == NULL)))
        return lmc_error_set(err, LMC_ERR_INVALID, "Header: invalid magic or level_meta");
    if (msgpack_sbuffer_write(out, placeholder, sizeof(placeholder)) != 0)
        goto nomem;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    PK(msgpack_pack_map(&pk, h->n_meta > 0 ? 10 : 9));
    PK(pack_lit(&pk, "type"));
    PK(pack_lit(&pk, "header"));
    PK(pack_lit(&pk, "magic"));
    PK(msgpack_pack_bin(&pk, h->magic_len));
    if (h->magic_len > 0)
        PK(msgpack_pack_bin_body(&pk, h->magic, h->magic_len));
    PK(pack_lit(&pk, "format_version"));
    PK(msgpack_pack_int64(&pk, h->format_version));
    PK(pack_lit(&pk, "level"));
    PK(pack_lit(&pk, h->level));
    PK(pack_lit(&pk, "trace_schema_version"));
    PK(msgpack_pack_int64(&pk, h->trace_schema_version));
    PK(pack_lit(&pk, "t_mono_start"));
    PK(msgpack_pack_double(&pk, h->t_mono_start));
    PK(pack_lit(&pk, "t_wall_start"));
    PK(msgpack_pack_double(&pk, h->t_wall_start));
    PK(pack_lit(&pk, "sm_config_json"));
    PK(pack_lit(&pk, h->sm_config_json));
    PK(pack_lit(&pk, "sm_config_digest"));
    PK(pack_lit(&pk, h->sm_config_digest));
    if (h->n_meta > 0) {
        PK(pack_lit(&pk, "level_meta"));
        PK(msgpack_pack_map(&pk, h->n_meta));
        for (size_t i = 0; i < h->n_meta; i++) {
            PK(pack_lit(&pk, h->meta_keys[i]));
            PK(pack_lit(&pk, h->meta_values[i]));
        }
    }
    return finish_frame(out, before, "Header", err);

nomem:
    out->size = before;
    return lmc_error_set(err, LMC_ERR_NOMEM, "Header: out of memory while encoding");
}

static void free_meta(char **keys, char **values, size_t n);

void lmc_trace_header_free(lmc_trace_header *h)
{
    if (h == NULL)
        return;
    free(h->level);
    free(h->sm_config_json);
    free(h->sm_config_digest);
    free_meta(h->meta_keys, h->meta_values, h->n_meta);
    memset(h, 0, sizeof(*h));
}

/* A level_meta value as text (malloc'd): a str as itself, anything else in Python repr. */
static lmc_status meta_value_text(const msgpack_object *o, char **out, lmc_error *err)
{
    *out = NULL;
    if (o->type == MSGPACK_OBJECT_STR) {
        *out = strndup(o->via.str.size > 0 ? o->via.str.ptr : "", o->via.str.size);
    } else {
        lmc_arena a;
        lmc_arena_init(&a, 4096);
        lmc_tv v;
        lmc_status st = lmc_codec_decode_value(o, &a, &v, err);
        if (st != LMC_OK) {
            lmc_arena_free(&a);
            lmc_error_prefix(err, "Header.level_meta");
            return st;
        }
        size_t n = lmc_tv_format(&v, NULL, 0);
        *out = malloc(n + 1);
        if (*out != NULL)
            lmc_tv_format(&v, *out, n + 1);
        lmc_arena_free(&a);
    }
    if (*out == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "Header.level_meta: out of memory");
    return LMC_OK;
}

typedef struct meta_pair {
    char *key;
    char *value;
} meta_pair;

static int cmp_meta(const void *x, const void *y)
{
    return strcmp(((const meta_pair *)x)->key, ((const meta_pair *)y)->key);
}

static void free_meta(char **keys, char **values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(keys != NULL ? keys[i] : NULL);
        free(values != NULL ? values[i] : NULL);
    }
    free(keys);
    free(values);
}

static lmc_status decode_level_meta(const msgpack_object *m, lmc_trace_header *h, lmc_error *err)
{
    static const char what[] = "Header";
    if (m->type != MSGPACK_OBJECT_MAP)
        return wrong_type(err, what, "level_meta", "map", lmc_msgpack_type_name(m));
    size_t n = m->via.map.size;
    lmc_status st = LMC_OK;
    char **keys = NULL, **vals = NULL;
    meta_pair *pairs = calloc(n > 0 ? n : 1, sizeof(*pairs));
    if (pairs == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR) {
            st = wrong_type(err, what, "level_meta", "str keys", lmc_msgpack_type_name(k));
            goto fail;
        }
        pairs[i].key = strndup(k->via.str.size > 0 ? k->via.str.ptr : "", k->via.str.size);
        if (pairs[i].key == NULL)
            goto nomem;
        if ((st = meta_value_text(&m->via.map.ptr[i].val, &pairs[i].value, err)) != LMC_OK)
            goto fail;
    }
    qsort(pairs, n, sizeof(*pairs), cmp_meta);
    keys = calloc(n > 0 ? n : 1, sizeof(char *));
    vals = calloc(n > 0 ? n : 1, sizeof(char *));
    if (keys == NULL || vals == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        keys[i] = pairs[i].key;
        vals[i] = pairs[i].value;
    }
    free(pairs);
    /* A repeated level_meta key replaces the earlier map. */
    free_meta(h->meta_keys, h->meta_values, h->n_meta);
    h->meta_keys = keys;
    h->meta_values = vals;
    h->n_meta = n;
    return LMC_OK;

nomem:
    st = lmc_error_set(err, LMC_ERR_NOMEM, "Header.level_meta: out of memory");
fail:
    free(keys);
    free(vals);
    for (size_t i = 0; pairs != NULL && i < n; i++) {
        free(pairs[i].key);
        free(pairs[i].value);
    }
    free(pairs);
    return st;
}

lmc_status lmc_trace_decode_header(const void *body, size_t len, lmc_trace_header *h,
                                   lmc_error *err)
{
    static const char what[] = "Header";
    memset(h, 0, sizeof(*h));
    lmc_arena a;
    lmc_arena_init(&a, 4096);
    msgpack_object root;
    lmc_status st = parse_body(body, len, what, &a, &root, err);
    if (st != LMC_OK) {
        lmc_arena_free(&a);
        return st;
    }

    enum {
        F_MAGIC = 1 << 0,
        F_FORMAT = 1 << 1,
        F_LEVEL = 1 << 2,
        F_SCHEMA = 1 << 3,
        F_MONO = 1 << 4,
        F_WALL = 1 << 5,
        F_JSON = 1 << 6,
        F_DIGEST = 1 << 7,
    };
    unsigned seen = 0;
    const msgpack_object *map = &root;
    for (uint32_t i = 0; i < map->via.map.size && st == LMC_OK; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR) {
            st = lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                               lmc_msgpack_type_name(k));
            break;
        }
        const char *kp = k->via.str.ptr;
        size_t kn = k->via.str.size;
        if (str_is(kp, kn, "type")) {
            st = check_tag(v->via.str.ptr, v->via.str.size, v->type == MSGPACK_OBJECT_STR,
                           lmc_msgpack_type_name(v), what, "header", err);
        } else if (str_is(kp, kn, "magic")) {
            if (v->type != MSGPACK_OBJECT_BIN) {
                st = wrong_type(err, what, "magic", "bytes", lmc_msgpack_type_name(v));
            } else {
                /* Longer magics are cut; they cannot match anyway. */
                h->magic_len =
                    v->via.bin.size < sizeof(h->magic) ? v->via.bin.size : sizeof(h->magic);
                if (h->magic_len > 0)
                    memcpy(h->magic, v->via.bin.ptr, h->magic_len);
                seen |= F_MAGIC;
            }
        } else if (str_is(kp, kn, "format_version")) {
            st = get_int(v, what, "format_version", &h->format_version, err);
            seen |= F_FORMAT;
        } else if (str_is(kp, kn, "level")) {
            st = get_str(v, what, "level", &h->level, err);
            seen |= F_LEVEL;
        } else if (str_is(kp, kn, "trace_schema_version")) {
            st = get_int(v, what, "trace_schema_version", &h->trace_schema_version, err);
            seen |= F_SCHEMA;
        } else if (str_is(kp, kn, "t_mono_start")) {
            st = get_float(v, what, "t_mono_start", &h->t_mono_start, err);
            seen |= F_MONO;
        } else if (str_is(kp, kn, "t_wall_start")) {
            st = get_float(v, what, "t_wall_start", &h->t_wall_start, err);
            seen |= F_WALL;
        } else if (str_is(kp, kn, "sm_config_json")) {
            st = get_str(v, what, "sm_config_json", &h->sm_config_json, err);
            seen |= F_JSON;
        } else if (str_is(kp, kn, "sm_config_digest")) {
            st = get_str(v, what, "sm_config_digest", &h->sm_config_digest, err);
            seen |= F_DIGEST;
        } else if (str_is(kp, kn, "level_meta")) {
            st = decode_level_meta(v, h, err);
        }
        /* Unknown keys are skipped, as msgspec does. */
    }
    lmc_arena_free(&a);
    if (st != LMC_OK)
        goto fail;

    static const struct {
        unsigned bit;
        const char *name;
    } required[] = {
        {F_MAGIC, "magic"},         {F_FORMAT, "format_version"},
        {F_LEVEL, "level"},         {F_SCHEMA, "trace_schema_version"},
        {F_MONO, "t_mono_start"},   {F_WALL, "t_wall_start"},
        {F_JSON, "sm_config_json"}, {F_DIGEST, "sm_config_digest"},
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!(seen & required[i].bit)) {
            st = missing(err, what, required[i].name);
            goto fail;
        }
    }
    return LMC_OK;

fail:
    lmc_trace_header_free(h);
    return st;
}

/* ---------------------------------------------------------------------- */
/* Record                                                                  */
/* ---------------------------------------------------------------------- */

lmc_status lmc_trace_encode_record(msgpack_sbuffer *out, double t_mono, double t_wall,
                                   const char *qualname, size_t qualname_len,
                                   const lmc_trace_arg *args, size_t nargs, lmc_error *err)
{
    size_t before = out->size;
    if (qualname == NULL)
        qualname = "";
    if (qualname_len == 0)
        qualname_len = strlen(qualname);
    if (qualname_len > UINT32_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID, "Record: qualname too long");

    /*
     * Everything before args is fixed apart from two doubles and a string:
     * one write instead of a dozen packer calls. The bytes are msgpack-c's
     * (and msgspec's): fixmap 5, fixstr keys, float64, the smallest str form.
     */
    uint8_t head[4 + 64];
    uint8_t *p = head;
    memset(p, 0, 4); /* the length, patched at the end */
    p += 4;
    *p++ = 0x85;
    p = put_lit(p, "\xa4type\xa6record\xa6t_mono");
    p = put_f64(p, t_mono);
    p = put_lit(p, "\xa6t_wall");
    p = put_f64(p, t_wall);
    p = put_lit(p, "\xa8qualname");
    p = put_str_header(p, qualname_len);
    if (msgpack_sbuffer_write(out, (const char *)head, (size_t)(p - head)) != 0 ||
        msgpack_sbuffer_write(out, qualname, qualname_len) != 0 ||
        msgpack_sbuffer_write(out,
                              "\xa4"
                              "args",
                              5) != 0)
        goto nomem;
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    lmc_status st = lmc_codec_encode_args(&pk, args, nargs, err);
    if (st != LMC_OK) {
        out->size = before;
        return st;
    }
    return finish_frame(out, before, "Record", err);

nomem:
    out->size = before;
    return lmc_error_set(err, LMC_ERR_NOMEM, "Record: out of memory while encoding");
}

/*
 * The fast path. Every record the recorder writes has one shape: a map of
 * "type", "t_mono", "t_wall", "qualname" and "args", whose "keys" argument
 * is a list of ObjectKeys, each {"__t__": "ObjectKey", "v": {chunk_hash,
 * model_name, kv_rank, object_group_id, cache_salt}}. fast_record decodes
 * that shape straight from the bytes: no msgpack_object tree for the keys,
 * all of a list's keys in one contiguous lmc_object_key array (the items
 * point into it in order, so a replay hands the array to the
 * StorageManager without copying), and the key strings validated and
 * interned once per run of equal strings (lmc_object_key_make_cached).
 * Other argument values go through the general path one at a time
 * (mp_parse at the depth the whole-body parse would use, then the codecs).
 *
 * It declines -- returns false -- on anything else: another shape, a
 * duplicate or unknown field, any error at all. The caller then decodes the
 * body from scratch with the general path, which reports every error with
 * its usual message. So the fast path only has to be right about what it
 * accepts, and it accepts a body only when the general path would decode it
 * to the same record: every byte walked and checked by mp_next/mp_parse,
 * nothing trailing, each value converted by the same rules.
 */

/* {"__t__": "ObjectKey", "v": -- the codec's canonical wrapper of every key. */
static const uint8_t KEY_WRAP[] = {0x82, 0xa5, '_', '_', 't', '_', '_', 0xa9, 'O', 'b',
                                   'j',  'e',  'c', 't', 'K', 'e', 'y', 0xa1, 'v'};
/*
 * A canonical key is at least 54 bytes (the wrapper, a map header, three
 * required fields); a list is tried only when this many bytes per item are
 * left, which keeps its arrays within a small multiple of the body.
 */
#define KEY_MIN_BYTES 32

/* The depth the whole-body parse gives an argument value (root 0, args 1). */
#define ARG_DEPTH 2

static bool mp_int64(const mp_item *it, int64_t *out)
{
    if (it->type == MP_UINT && it->v.u <= (uint64_t)INT64_MAX) {
        *out = (int64_t)it->v.u;
        return true;
    }
    if (it->type == MP_INT) {
        *out = it->v.i;
        return true;
    }
    return false;
}

static bool mp_double(const mp_item *it, double *out)
{
    switch (it->type) {
    case MP_FLOAT:
        *out = it->v.f;
        return true;
    case MP_UINT:
        *out = (double)it->v.u;
        return true;
    case MP_INT:
        *out = (double)it->v.i;
        return true;
    default:
        return false;
    }
}

/* mp_next, with the short forms keys are made of read inline. */
static inline __attribute__((always_inline)) mp_result mp_next_inline(mp_cur *c, mp_item *it)
{
    if (c->p < c->end) {
        const uint8_t b = *c->p;
        if (b <= 0x7f) {
            c->p++;
            it->type = MP_UINT;
            it->v.u = b;
            return MP_OK;
        }
        if ((b & 0xe0) == 0xa0 && (size_t)(c->end - c->p) > (size_t)(b & 0x1f)) {
            it->type = MP_STR;
            it->v.s.ptr = (const char *)c->p + 1;
            it->v.s.len = b & 0x1f;
            c->p += 1 + (b & 0x1f);
            return MP_OK;
        }
        if (b == 0xc4 && (size_t)(c->end - c->p) >= 2 &&
            (size_t)(c->end - c->p) - 2 >= (size_t)c->p[1]) {
            it->type = MP_BIN;
            it->v.s.ptr = (const char *)c->p + 2;
            it->v.s.len = c->p[1];
            c->p += 2 + (size_t)c->p[1];
            return MP_OK;
        }
        if (b == 0xce && (size_t)(c->end - c->p) >= 5) {
            it->type = MP_UINT;
            it->v.u = lmc_get_be32(c->p + 1);
            c->p += 5;
            return MP_OK;
        }
    }
    return mp_next(c, it);
}

static inline bool same8(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x == y;
}

/*
 * Consume the n bytes (n >= 8) at lit if they come next. Compared a word at
 * a time (the last word overlapping): with n a constant this is a few
 * loads, where memcmp was a library call per field name.
 */
static inline bool take(mp_cur *c, const void *lit, size_t n)
{
    const uint8_t *l = lit;
    if ((size_t)(c->end - c->p) < n)
        return false;
    for (size_t i = 0; i + 8 < n; i += 8) {
        if (!same8(c->p + i, l + i))
            return false;
    }
    if (!same8(c->p + n - 8, l + n - 8))
        return false;
    c->p += n;
    return true;
}

typedef struct key_fields {
    mp_item hash, model, salt;
    int64_t rank, group;
    bool has_group, has_salt;
} key_fields;

/*
 * The payload exactly as the codec writes it: a fixmap of five fields in
 * declaration order, each name a fixstr (the octal escapes are the map and
 * str headers: 0x85, 0xaa, 0xa7, 0xaf).
 */
static bool key_fields_in_order(mp_cur *c, key_fields *f)
{
    mp_item r, g;
    if (!take(c, "\205\252chunk_hash", 12) || mp_next_inline(c, &f->hash) != MP_OK ||
        f->hash.type != MP_BIN || !take(c, "\252model_name", 11) ||
        mp_next_inline(c, &f->model) != MP_OK || f->model.type != MP_STR ||
        !take(c, "\247kv_rank", 8) || mp_next_inline(c, &r) != MP_OK || !mp_int64(&r, &f->rank) ||
        !take(c, "\257object_group_id", 16) || mp_next_inline(c, &g) != MP_OK ||
        !mp_int64(&g, &f->group) || !take(c, "\252cache_salt", 11) ||
        mp_next_inline(c, &f->salt) != MP_OK || f->salt.type != MP_STR)
        return false;
    f->has_group = f->has_salt = true;
    return true;
}

/* Any order, optional fields left out; no unknown or repeated field. */
static bool key_fields_any_order(mp_cur *c, key_fields *f)
{
    mp_item m;
    if (mp_next(c, &m) != MP_OK || m.type != MP_MAP || m.v.n > 5)
        return false;
    enum { F_HASH = 1, F_MODEL = 2, F_RANK = 4, F_GROUP = 8, F_SALT = 16 };
    unsigned seen = 0;
    for (uint32_t i = 0; i < m.v.n; i++) {
        mp_item k, v;
        if (mp_next_inline(c, &k) != MP_OK || k.type != MP_STR || mp_next_inline(c, &v) != MP_OK)
            return false;
        unsigned bit;
        bool ok;
        if (str_is(k.v.s.ptr, k.v.s.len, "chunk_hash")) {
            bit = F_HASH;
            ok = v.type == MP_BIN;
            f->hash = v;
        } else if (str_is(k.v.s.ptr, k.v.s.len, "model_name")) {
            bit = F_MODEL;
            ok = v.type == MP_STR;
            f->model = v;
        } else if (str_is(k.v.s.ptr, k.v.s.len, "kv_rank")) {
            bit = F_RANK;
            ok = mp_int64(&v, &f->rank);
        } else if (str_is(k.v.s.ptr, k.v.s.len, "object_group_id")) {
            bit = F_GROUP;
            ok = mp_int64(&v, &f->group);
        } else if (str_is(k.v.s.ptr, k.v.s.len, "cache_salt")) {
            bit = F_SALT;
            ok = v.type == MP_STR;
            f->salt = v;
        } else {
            return false;
        }
        if (!ok || (seen & bit))
            return false;
        seen |= bit;
    }
    f->has_group = seen & F_GROUP;
    f->has_salt = seen & F_SALT;
    return (seen & (F_HASH | F_MODEL | F_RANK)) == (F_HASH | F_MODEL | F_RANK);
}

/* One ObjectKey under the canonical wrapper, by dec_object_key's rules. */
static bool fast_key(mp_cur *c, lmc_object_key *k, lmc_object_key_cache *kc)
{
    if (!take(c, KEY_WRAP, sizeof(KEY_WRAP)))
        return false;
    const uint8_t *payload = c->p;
    key_fields f;
    if (!key_fields_in_order(c, &f)) {
        c->p = payload;
        memset(&f, 0, sizeof(f));
        if (!key_fields_any_order(c, &f))
            return false;
    }
    return lmc_object_key_make_cached(kc, k, f.hash.v.s.ptr, f.hash.v.s.len, f.model.v.s.ptr,
                                      f.model.v.s.len, f.rank, f.has_group ? f.group : 0,
                                      f.has_salt ? f.salt.v.s.ptr : "",
                                      f.has_salt ? f.salt.v.s.len : 0, NULL) == LMC_OK;
}

/* A list of n canonical ObjectKeys; the cursor is past the array header. */
static bool fast_key_list(mp_cur *c, uint32_t n, lmc_arena *a, lmc_tv *out,
                          lmc_object_key_cache *kc)
{
    if ((uint64_t)n * KEY_MIN_BYTES > (uint64_t)(c->end - c->p))
        return false;
    lmc_object_key *keys = lmc_arena_alloc(a, (size_t)n * sizeof(*keys));
    lmc_tv *items = lmc_arena_alloc(a, (size_t)n * sizeof(*items));
    if (keys == NULL || items == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (!fast_key(c, &keys[i], kc))
            return false;
        memset(&items[i], 0, sizeof(items[i]));
        items[i].kind = LMC_TV_OBJECT_KEY;
        items[i].u.key = &keys[i];
    }
    memset(out, 0, sizeof(*out));
    out->kind = LMC_TV_LIST;
    out->u.list.items = items;
    out->u.list.n = n;
    return true;
}

/* One argument value: a list of keys directly, anything else through the codecs. */
static bool fast_value(mp_cur *c, lmc_arena *a, lmc_tv *out, lmc_object_key_cache *kc)
{
    const uint8_t *at = c->p;
    mp_item it;
    if (c->p < c->end && ((*c->p & 0xf0) == 0x90 || *c->p == 0xdc || *c->p == 0xdd) &&
        mp_next(c, &it) == MP_OK && it.v.n > 0 && (size_t)(c->end - c->p) >= sizeof(KEY_WRAP) &&
        memcmp(c->p, KEY_WRAP, sizeof(KEY_WRAP)) == 0)
        return fast_key_list(c, it.v.n, a, out, kc);
    c->p = at;
    msgpack_object o;
    bool nomem = false;
    if (mp_parse(c, a, &o, ARG_DEPTH, &nomem) != MP_OK)
        return false;
    return lmc_codec_decode_value(&o, a, out, NULL) == LMC_OK;
}

static bool fast_args(mp_cur *c, lmc_arena *a, lmc_trace_record *rec)
{
    mp_item m;
    if (mp_next(c, &m) != MP_OK || m.type != MP_MAP ||
        2 * (uint64_t)m.v.n > (uint64_t)(c->end - c->p))
        return false;
    lmc_trace_arg *args = m.v.n > 0 ? lmc_arena_alloc(a, (size_t)m.v.n * sizeof(*args)) : NULL;
    if (m.v.n > 0 && args == NULL)
        return false;
    lmc_object_key_cache kc = {0};
    for (uint32_t i = 0; i < m.v.n; i++) {
        mp_item k;
        if (mp_next(c, &k) != MP_OK || k.type != MP_STR)
            return false;
        char *name = lmc_arena_alloc(a, (size_t)k.v.s.len + 1);
        if (name == NULL)
            return false;
        if (k.v.s.len > 0)
            memcpy(name, k.v.s.ptr, k.v.s.len);
        name[k.v.s.len] = '\0';
        args[i].name = name;
        args[i].name_len = k.v.s.len;
        if (!fast_value(c, a, &args[i].value, &kc))
            return false;
    }
    rec->args = args;
    rec->nargs = m.v.n;
    return true;
}

static bool fast_record(const void *body, size_t len, lmc_arena *a, lmc_trace_record *rec)
{
    mp_cur c = {body, (const uint8_t *)body + len, body};
    mp_item m;
    if (mp_next(&c, &m) != MP_OK || m.type != MP_MAP)
        return false;
    enum { F_TYPE = 1, F_MONO = 2, F_WALL = 4, F_QUAL = 8, F_ARGS = 16 };
    unsigned seen = 0;
    for (uint32_t i = 0; i < m.v.n; i++) {
        mp_item k, v;
        if (mp_next(&c, &k) != MP_OK || k.type != MP_STR)
            return false;
        const char *kp = k.v.s.ptr;
        size_t kn = k.v.s.len;
        unsigned bit;
        if (str_is(kp, kn, "args")) {
            bit = F_ARGS;
            if ((seen & bit) || !fast_args(&c, a, rec))
                return false;
            seen |= bit;
            continue;
        }
        if (mp_next(&c, &v) != MP_OK)
            return false;
        bool ok;
        if (str_is(kp, kn, "type")) {
            bit = F_TYPE;
            ok = v.type == MP_STR && str_is(v.v.s.ptr, v.v.s.len, "record");
        } else if (str_is(kp, kn, "t_mono")) {
            bit = F_MONO;
            ok = mp_double(&v, &rec->t_mono);
        } else if (str_is(kp, kn, "t_wall")) {
            bit = F_WALL;
            ok = mp_double(&v, &rec->t_wall);
        } else if (str_is(kp, kn, "qualname")) {
            bit = F_QUAL;
            ok = v.type == MP_STR;
            if (ok) {
                char *q = lmc_arena_alloc(a, (size_t)v.v.s.len + 1);
                if (q == NULL)
                    return false;
                if (v.v.s.len > 0)
                    memcpy(q, v.v.s.ptr, v.v.s.len);
                q[v.v.s.len] = '\0';
                rec->qualname = q;
                rec->qualname_len = v.v.s.len;
            }
        } else {
            return false;
        }
        if (!ok || (seen & bit))
            return false;
        seen |= bit;
    }
    return c.p == c.end && (seen | F_TYPE) == (F_TYPE | F_MONO | F_WALL | F_QUAL | F_ARGS);
}

lmc_status lmc_trace_decode_record(const void *body, size_t len, lmc_arena *a,
                                   lmc_trace_record *rec, lmc_error *err)
{
    static const char what[] = "Record";
    memset(rec, 0, sizeof(*rec));
    if (fast_record(body, len, a, rec))
        return LMC_OK;
    /* Declined: start over (what the fast path took from the arena stays until the reset). */
    memset(rec, 0, sizeof(*rec));
    msgpack_object root;
    lmc_status st = parse_body(body, len, what, a, &root, err);
    if (st != LMC_OK)
        return st;

    bool have_mono = false, have_wall = false;
    const msgpack_object *qualname = NULL, *args = NULL;
    const msgpack_object *map = &root;
    for (uint32_t i = 0; i < map->via.map.size && st == LMC_OK; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        const msgpack_object *v = &map->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR) {
            st = lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                               lmc_msgpack_type_name(k));
            break;
        }
        const char *kp = k->via.str.ptr;
        size_t kn = k->via.str.size;
        if (str_is(kp, kn, "type")) {
            st = check_tag(v->via.str.ptr, v->via.str.size, v->type == MSGPACK_OBJECT_STR,
                           lmc_msgpack_type_name(v), what, "record", err);
        } else if (str_is(kp, kn, "t_mono")) {
            st = get_float(v, what, "t_mono", &rec->t_mono, err);
            have_mono = true;
        } else if (str_is(kp, kn, "t_wall")) {
            st = get_float(v, what, "t_wall", &rec->t_wall, err);
            have_wall = true;
        } else if (str_is(kp, kn, "qualname")) {
            if (v->type != MSGPACK_OBJECT_STR)
                st = wrong_type(err, what, "qualname", "str", lmc_msgpack_type_name(v));
            qualname = v;
        } else if (str_is(kp, kn, "args")) {
            if (v->type != MSGPACK_OBJECT_MAP)
                st = wrong_type(err, what, "args", "map", lmc_msgpack_type_name(v));
            args = v;
        }
    }
    if (st != LMC_OK)
        goto out;
    if (!have_mono || !have_wall || qualname == NULL || args == NULL) {
        st = missing(err, what,
                     !have_mono         ? "t_mono"
                     : !have_wall       ? "t_wall"
                     : qualname == NULL ? "qualname"
                                        : "args");
        goto out;
    }
    char *q = lmc_arena_alloc(a, (size_t)qualname->via.str.size + 1);
    if (q == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", what);
        goto out;
    }
    if (qualname->via.str.size > 0)
        memcpy(q, qualname->via.str.ptr, qualname->via.str.size);
    q[qualname->via.str.size] = '\0';
    rec->qualname = q;
    rec->qualname_len = qualname->via.str.size;
    st = lmc_codec_decode_args(args, a, &rec->args, &rec->nargs, err);

out:
    if (st != LMC_OK)
        memset(rec, 0, sizeof(*rec));
    return st;
}

lmc_status lmc_trace_peek_record(const void *body, size_t len, double *t_mono,
                                 const char **qualname, size_t *qualname_len, lmc_error *err)
{
    static const char what[] = "Record";
    mp_cur c = {body, (const uint8_t *)body + len, body};
    mp_item it;
    mp_result r = mp_next(&c, &it);
    if (r != MP_OK)
        return mp_error(err, what, &c, r);
    if (it.type != MP_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected a msgpack map", what);
    bool have_mono = false, have_q = false;
    for (uint32_t i = 0, n = it.v.n; i < n && !(have_mono && have_q); i++) {
        mp_item k, v;
        if ((r = mp_next(&c, &k)) != MP_OK)
            return mp_error(err, what, &c, r);
        if (k.type != MP_STR)
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                                 mp_type_name(k.type));
        const char *kp = k.v.s.ptr;
        size_t kn = k.v.s.len;
        bool is_type = str_is(kp, kn, "type");
        bool is_mono = !is_type && str_is(kp, kn, "t_mono");
        bool is_q = !is_type && !is_mono && str_is(kp, kn, "qualname");
        if (!is_type && !is_mono && !is_q) {
            if ((r = mp_skip(&c)) != MP_OK)
                return mp_error(err, what, &c, r);
            continue;
        }
        if ((r = mp_next(&c, &v)) != MP_OK)
            return mp_error(err, what, &c, r);
        if (is_type) {
            lmc_status st = check_tag(v.v.s.ptr, v.v.s.len, v.type == MP_STR, mp_type_name(v.type),
                                      what, "record", err);
            if (st != LMC_OK)
                return st;
        } else if (is_mono) {
            if (v.type == MP_FLOAT)
                *t_mono = v.v.f;
            else if (v.type == MP_UINT)
                *t_mono = (double)v.v.u;
            else if (v.type == MP_INT)
                *t_mono = (double)v.v.i;
            else
                return wrong_type(err, what, "t_mono", "float", mp_type_name(v.type));
            have_mono = true;
        } else {
            if (v.type != MP_STR)
                return wrong_type(err, what, "qualname", "str", mp_type_name(v.type));
            *qualname = v.v.s.ptr;
            *qualname_len = v.v.s.len;
            have_q = true;
        }
    }
    if (!have_mono)
        return missing(err, what, "t_mono");
    if (!have_q)
        return missing(err, what, "qualname");
    return LMC_OK;
}
