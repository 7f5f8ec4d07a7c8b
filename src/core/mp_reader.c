/*
 * mp_reader.c -- the out-of-line half of the msgpack reader (see mp_reader.h):
 * every encoding, skipping, type names and error messages.
 *
 * Owns nothing. Threads: pure functions over caller-owned buffers.
 */
#include "core/mp_reader.h"

/* A uint of w bytes (1, 2, 4 or 8) at p. */
static uint64_t load_uint(const uint8_t *p, size_t w)
{
    switch (w) {
    case 1:
        return p[0];
    case 2:
        return lmc_get_be16(p);
    case 4:
        return lmc_get_be32(p);
    default:
        return lmc_get_be64(p);
    }
}

/* A sign-extended int of w bytes at p. */
static int64_t load_int(const uint8_t *p, size_t w)
{
    switch (w) {
    case 1:
        return (int8_t)p[0];
    case 2:
        return (int16_t)lmc_get_be16(p);
    case 4:
        return (int32_t)lmc_get_be32(p);
    default:
        return (int64_t)lmc_get_be64(p);
    }
}

lmc_mp_result lmc_mp_next_any_(lmc_mp_reader *r, lmc_mp_item *it)
{
    if (r->p >= r->end)
        return LMC_MP_TRUNCATED;
    const uint8_t b = r->p[0];
    const uint8_t *q = r->p + 1; /* after the type byte */
    const size_t left = (size_t)(r->end - q);
    size_t hdr = 0;   /* bytes after b holding a length, a count or a value */
    uint64_t len = 0; /* payload bytes of a str, bin or ext */

    if (b <= 0x7f) {
        it->type = LMC_MP_UINT;
        it->v.u = b;
        goto scalar;
    }
    if (b >= 0xe0) {
        it->type = LMC_MP_INT;
        it->v.i = (int8_t)b;
        goto scalar;
    }
    if (b <= 0x9f) {
        it->type = b <= 0x8f ? LMC_MP_MAP : LMC_MP_ARRAY;
        it->v.n = b & 0x0f;
        goto scalar;
    }
    if (b <= 0xbf) {
        it->type = LMC_MP_STR;
        len = b & 0x1f;
        goto payload;
    }
    switch (b) {
    case 0xc0:
        it->type = LMC_MP_NIL;
        goto scalar;
    case 0xc2:
    case 0xc3:
        it->type = LMC_MP_BOOL;
        it->v.b = b == 0xc3;
        goto scalar;
    case 0xc4:
    case 0xc5:
    case 0xc6:
    case 0xd9:
    case 0xda:
    case 0xdb:
        it->type = b <= 0xc6 ? LMC_MP_BIN : LMC_MP_STR;
        hdr = (size_t)1 << (b <= 0xc6 ? b - 0xc4 : b - 0xd9);
        if (left < hdr)
            return LMC_MP_TRUNCATED;
        len = load_uint(q, hdr);
        goto payload;
    case 0xc7:
    case 0xc8:
    case 0xc9: /* ext 8/16/32: a length, the type byte, the data */
        it->type = LMC_MP_EXT;
        hdr = (size_t)1 << (b - 0xc7);
        if (left < hdr + 1)
            return LMC_MP_TRUNCATED;
        len = load_uint(q, hdr);
        it->ext_type = (int8_t)q[hdr];
        hdr += 1;
        goto payload;
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: /* fixext 1..16: the type byte, the data */
        it->type = LMC_MP_EXT;
        if (left < 1)
            return LMC_MP_TRUNCATED;
        it->ext_type = (int8_t)q[0];
        hdr = 1;
        len = (uint64_t)1 << (b - 0xd4);
        goto payload;
    case 0xca:
    case 0xcb: {
        hdr = b == 0xca ? 4 : 8;
        if (left < hdr)
            return LMC_MP_TRUNCATED;
        it->type = LMC_MP_FLOAT;
        it->f32 = b == 0xca;
        if (it->f32) {
            uint32_t bits = lmc_get_be32(q);
            float f;
            memcpy(&f, &bits, sizeof(f));
            it->v.f = f;
        } else {
            uint64_t bits = lmc_get_be64(q);
            memcpy(&it->v.f, &bits, sizeof(it->v.f));
        }
        goto scalar;
    }
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
        hdr = (size_t)1 << (b - 0xcc);
        if (left < hdr)
            return LMC_MP_TRUNCATED;
        it->type = LMC_MP_UINT;
        it->v.u = load_uint(q, hdr);
        goto scalar;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        hdr = (size_t)1 << (b - 0xd0);
        if (left < hdr)
            return LMC_MP_TRUNCATED;
        int64_t v = load_int(q, hdr);
        if (v >= 0) { /* a non-negative value is a UINT whatever its encoding */
            it->type = LMC_MP_UINT;
            it->v.u = (uint64_t)v;
        } else {
            it->type = LMC_MP_INT;
            it->v.i = v;
        }
        goto scalar;
    }
    case 0xdc:
    case 0xdd:
    case 0xde:
    case 0xdf:
        hdr = (b == 0xdc || b == 0xde) ? 2 : 4;
        if (left < hdr)
            return LMC_MP_TRUNCATED;
        it->type = b <= 0xdd ? LMC_MP_ARRAY : LMC_MP_MAP;
        it->v.n = (uint32_t)load_uint(q, hdr);
        goto scalar;
    default: /* 0xc1 */
        return LMC_MP_INVALID;
    }

scalar:
    r->p = q + hdr;
    return LMC_MP_OK;

payload:
    if (left - hdr < len)
        return LMC_MP_TRUNCATED;
    it->v.s.ptr = (const char *)q + hdr;
    it->v.s.len = (uint32_t)len;
    r->p = q + hdr + len;
    return LMC_MP_OK;
}

/* Without a depth limit only the number of values still to read matters. */
static lmc_mp_result skip_any_depth(lmc_mp_reader *r)
{
    uint64_t pending = 1;
    while (pending > 0) {
        lmc_mp_item it;
        lmc_mp_result res = lmc_mp_next(r, &it);
        if (res != LMC_MP_OK)
            return res;
        pending--;
        if (it.type == LMC_MP_ARRAY || it.type == LMC_MP_MAP)
            pending += (uint64_t)it.v.n << (it.type == LMC_MP_MAP);
    }
    return LMC_MP_OK;
}

/* Non-empty containers at most max_depth (<= LMC_MP_MAX_DEPTH) deep. */
static lmc_mp_result skip_bounded(lmc_mp_reader *r, unsigned max_depth)
{
    uint64_t stack[LMC_MP_MAX_DEPTH]; /* values left at each enclosing level */
    unsigned depth = 0;
    uint64_t left = 1; /* values still to read at this level */
    for (;;) {
        while (left == 0) {
            if (depth == 0)
                return LMC_MP_OK;
            left = stack[--depth];
        }
        const uint8_t *at = r->p;
        lmc_mp_item it;
        lmc_mp_result res = lmc_mp_next(r, &it);
        if (res != LMC_MP_OK)
            return res;
        left--;
        if ((it.type != LMC_MP_ARRAY && it.type != LMC_MP_MAP) || it.v.n == 0)
            continue;
        if (depth >= max_depth) {
            r->p = at;
            return LMC_MP_TOO_DEEP;
        }
        stack[depth++] = left;
        left = (uint64_t)it.v.n << (it.type == LMC_MP_MAP);
    }
}

lmc_mp_result lmc_mp_skip(lmc_mp_reader *r, unsigned max_depth)
{
    /* Most values skipped are scalars: no walk for them. */
    const uint8_t *at = r->p;
    lmc_mp_item it;
    lmc_mp_result res = lmc_mp_next(r, &it);
    if (res != LMC_MP_OK || (it.type != LMC_MP_ARRAY && it.type != LMC_MP_MAP) || it.v.n == 0)
        return res;
    r->p = at;
    if (max_depth == LMC_MP_ANY_DEPTH)
        return skip_any_depth(r);
    return skip_bounded(r, max_depth < LMC_MP_MAX_DEPTH ? max_depth : LMC_MP_MAX_DEPTH);
}

const char *lmc_mp_type_name(lmc_mp_type t)
{
    switch (t) {
    case LMC_MP_NIL:
        return "nil";
    case LMC_MP_BOOL:
        return "bool";
    case LMC_MP_UINT:
    case LMC_MP_INT:
        return "int";
    case LMC_MP_FLOAT:
        return "float";
    case LMC_MP_STR:
        return "str";
    case LMC_MP_BIN:
        return "bin";
    case LMC_MP_ARRAY:
        return "array";
    case LMC_MP_MAP:
        return "map";
    case LMC_MP_EXT:
        return "ext";
    }
    return "unknown";
}

lmc_status lmc_mp_error_set(lmc_error *err, const char *what, const lmc_mp_reader *r,
                            lmc_mp_result res)
{
    size_t at = lmc_mp_offset(r);
    switch (res) {
    case LMC_MP_OK:
        break;
    case LMC_MP_TRUNCATED:
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: msgpack data is truncated (at byte %zu)",
                             what, at);
    case LMC_MP_INVALID:
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: invalid msgpack byte 0x%02x at byte %zu",
                             what, r->p < r->end ? *r->p : 0, at);
    case LMC_MP_TOO_DEEP:
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "%s: msgpack data nested deeper than %d levels (at byte %zu)", what,
                             LMC_MP_MAX_DEPTH, at);
    }
    return LMC_OK;
}

size_t lmc_mp_take_uint32s(lmc_mp_reader *r, uint32_t *out, size_t n)
{
    const uint8_t *p = r->p, *end = r->end;
    size_t k = 0;
    for (; k < n && p < end; k++) {
        uint8_t b = *p;
        size_t left = (size_t)(end - p);
        if (b <= 0x7f) {
            out[k] = b;
            p += 1;
        } else if (b == 0xcd && left >= 3) {
            out[k] = lmc_get_be16(p + 1);
            p += 3;
        } else if (b == 0xce && left >= 5) {
            out[k] = lmc_get_be32(p + 1);
            p += 5;
        } else if (b == 0xcc && left >= 2) {
            out[k] = p[1];
            p += 2;
        } else {
            break;
        }
    }
    r->p = p;
    return k;
}
