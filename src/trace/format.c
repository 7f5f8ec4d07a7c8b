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
 * Decoding reads the bytes with the bounds-checked reader (core/mp_reader.h),
 * never msgpack_unpack_next: msgpack-c allocates from declared counts (a
 * 5-byte hostile body asks for 64 GiB) and a full unpack of a 16-key
 * reserve_write record (2.5 KB) takes ~3.3 us, more than the whole replay
 * budget per record (2 us).
 *
 * Records of the recorder's own shape take a fast path first (fast_record,
 * below): keys are decoded straight from the bytes into one contiguous
 * array, and anything unusual falls back to the general path, which gives
 * every error its message. The general path (and the Header) first walks
 * the whole body once (lmc_mp_skip: every length and count checked against
 * the bytes left, nesting capped at msgpack-c's own limit of 32, nothing
 * trailing, a map at the root), so a malformed body gets the same message
 * whatever field it would have reached; then it reads the fields in order.
 * Values the codecs decode (args, non-str level_meta values) are parsed
 * into the msgpack_object tree msgpack-c would build, with the arrays
 * taken from the caller's arena (parse_object), and the codecs work on
 * that exactly as they would after msgpack-c.
 *
 * The `trace info` fast path (lmc_trace_peek_record): a Record's t_mono and
 * qualname precede its args, so peeking reads the map up to those two
 * entries and stops, building nothing (~50 ns per 16-key record).
 *
 * Threads: none; pure functions over caller-owned buffers.
 */
#include "trace/format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mp_reader.h"
#include "core/msgpack_util.h"
#include "trace/codec.h"

/* ---------------------------------------------------------------------- */
/* Field helpers                                                           */
/* ---------------------------------------------------------------------- */

static lmc_status wrong_type(lmc_error *err, const char *what, const char *field, const char *want,
                             const char *got)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s.%s: expected %s, got %s", what, field, want, got);
}

/* "type", if present, must be the expected tag. */
static lmc_status check_tag(const lmc_mp_item *v, const char *what, const char *want,
                            lmc_error *err)
{
    if (v->type != LMC_MP_STR)
        return wrong_type(err, what, "type", "str", lmc_mp_type_name(v->type));
    if (!lmc_mp_str_is(v, want))
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: invalid type tag '%.*s' (expected '%s')",
                             what, (int)(v->v.s.len > 64 ? 64 : v->v.s.len), v->v.s.ptr, want);
    return LMC_OK;
}

static lmc_status get_float(const lmc_mp_item *v, const char *what, const char *field, double *out,
                            lmc_error *err)
{
    if (lmc_mp_get_double(v, out))
        return LMC_OK;
    return wrong_type(err, what, field, "float", lmc_mp_type_name(v->type));
}

static lmc_status get_int(const lmc_mp_item *v, const char *what, const char *field, int64_t *out,
                          lmc_error *err)
{
    if (lmc_mp_get_int64(v, out))
        return LMC_OK;
    if (v->type == LMC_MP_UINT)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s.%s: %" PRIu64 " is out of range", what, field,
                             v->v.u);
    return wrong_type(err, what, field, "int", lmc_mp_type_name(v->type));
}

static lmc_status get_str(const lmc_mp_item *v, const char *what, const char *field, char **out,
                          lmc_error *err)
{
    if (v->type != LMC_MP_STR)
        return wrong_type(err, what, field, "str", lmc_mp_type_name(v->type));
    char *s = strndup(v->v.s.len > 0 ? v->v.s.ptr : "", v->v.s.len);
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

/* A NUL-terminated copy of a str item in the arena; NULL when it is full. */
static char *arena_str(lmc_arena *a, const lmc_mp_item *v)
{
    char *s = lmc_arena_alloc(a, (size_t)v->v.s.len + 1);
    if (s == NULL)
        return NULL;
    if (v->v.s.len > 0)
        memcpy(s, v->v.s.ptr, v->v.s.len);
    s[v->v.s.len] = '\0';
    return s;
}

/* ---------------------------------------------------------------------- */
/* Bodies and msgpack_object trees                                         */
/* ---------------------------------------------------------------------- */

/*
 * Check that a body is exactly one well-formed msgpack value and a map,
 * before any field is looked at; on success r is at its first key and
 * *pairs is its size. Once this passed, reads of the body cannot fail.
 */
static lmc_status open_body(const void *body, size_t len, const char *what, lmc_mp_reader *r,
                            uint32_t *pairs, lmc_error *err)
{
    lmc_mp_reader_init(r, body, len);
    lmc_mp_result res = lmc_mp_skip(r, LMC_MP_MAX_DEPTH);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, r, res);
    if (lmc_mp_left(r) != 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: %zu trailing bytes after the msgpack value",
                             what, lmc_mp_left(r));
    lmc_mp_reader_init(r, body, len);
    lmc_mp_item m;
    if (lmc_mp_next(r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected a msgpack map", what);
    *pairs = m.v.n;
    return LMC_OK;
}

/* A scalar item as msgpack-c represents it (floats always as FLOAT64, as before). */
static inline void scalar_object(const lmc_mp_item *it, msgpack_object *o)
{
    switch (it->type) {
    case LMC_MP_NIL:
        o->type = MSGPACK_OBJECT_NIL;
        break;
    case LMC_MP_BOOL:
        o->type = MSGPACK_OBJECT_BOOLEAN;
        o->via.boolean = it->v.b;
        break;
    case LMC_MP_UINT:
        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
        o->via.u64 = it->v.u;
        break;
    case LMC_MP_INT:
        o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
        o->via.i64 = it->v.i;
        break;
    case LMC_MP_FLOAT:
        o->type = MSGPACK_OBJECT_FLOAT64;
        o->via.f64 = it->v.f;
        break;
    case LMC_MP_STR:
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.ptr = it->v.s.ptr;
        o->via.str.size = it->v.s.len;
        break;
    case LMC_MP_BIN:
        o->type = MSGPACK_OBJECT_BIN;
        o->via.bin.ptr = it->v.s.ptr;
        o->via.bin.size = it->v.s.len;
        break;
    case LMC_MP_EXT:
        o->type = MSGPACK_OBJECT_EXT;
        o->via.ext.type = it->ext_type;
        o->via.ext.ptr = it->v.s.ptr;
        o->via.ext.size = it->v.s.len;
        break;
    case LMC_MP_ARRAY:
    case LMC_MP_MAP:
        break;
    }
}

static lmc_mp_result parse_children(lmc_mp_reader *r, lmc_arena *a, const lmc_mp_item *it,
                                    msgpack_object *o, int depth, bool *nomem);

/*
 * Parse one value into a msgpack_object tree: strings point into the body,
 * arrays come from the arena. Counts were checked against the bytes left
 * before anything is allocated (lmc_mp_next), so the tree is at most a
 * small multiple of the body; non-empty containers nest at most
 * LMC_MP_MAX_DEPTH deep (depth is this value's). Scalars, what records are
 * mostly made of, are converted inline: a call per scalar was most of the
 * cost. On LMC_MP_INVALID with *nomem set, the arena ran out.
 */
static inline __attribute__((always_inline)) lmc_mp_result
parse_object(lmc_mp_reader *r, lmc_arena *a, msgpack_object *o, int depth, bool *nomem)
{
    lmc_mp_item it;
    const uint8_t *at = r->p;
    lmc_mp_result res = lmc_mp_next(r, &it);
    if (res != LMC_MP_OK)
        return res;
    if (it.type != LMC_MP_ARRAY && it.type != LMC_MP_MAP) {
        scalar_object(&it, o);
        return LMC_MP_OK;
    }
    if (it.v.n > 0 && depth >= LMC_MP_MAX_DEPTH) {
        r->p = at;
        return LMC_MP_TOO_DEEP;
    }
    return parse_children(r, a, &it, o, depth, nomem);
}

static lmc_mp_result parse_children(lmc_mp_reader *r, lmc_arena *a, const lmc_mp_item *it,
                                    msgpack_object *o, int depth, bool *nomem)
{
    uint32_t n = it->v.n;
    bool is_map = it->type == LMC_MP_MAP;
    void *elems = NULL; /* n msgpack_object_kv (a map) or n msgpack_object (an array) */
    if (n > 0 &&
        (elems = lmc_arena_alloc(a, (size_t)n * (is_map ? sizeof(msgpack_object_kv)
                                                        : sizeof(msgpack_object)))) == NULL) {
        *nomem = true;
        return LMC_MP_INVALID;
    }
    if (is_map) {
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = n;
        o->via.map.ptr = elems;
    } else {
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = n;
        o->via.array.ptr = elems;
    }
    lmc_mp_result res;
    if (is_map) {
        msgpack_object_kv *kv = elems;
        for (uint32_t i = 0; i < n; i++)
            if ((res = parse_object(r, a, &kv[i].key, depth + 1, nomem)) != LMC_MP_OK ||
                (res = parse_object(r, a, &kv[i].val, depth + 1, nomem)) != LMC_MP_OK)
                return res;
        return LMC_MP_OK;
    }
    msgpack_object *items = elems;
    for (uint32_t i = 0; i < n; i++)
        if ((res = parse_object(r, a, &items[i], depth + 1, nomem)) != LMC_MP_OK)
            return res;
    return LMC_MP_OK;
}

/* parse_object for a body that open_body has checked: only the arena can fail. */
static lmc_status parse_checked(lmc_mp_reader *r, lmc_arena *a, msgpack_object *o, int depth,
                                const char *what, lmc_error *err)
{
    bool nomem = false;
    lmc_mp_result res = parse_object(r, a, o, depth, &nomem);
    if (nomem)
        return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", what);
    return lmc_mp_error_set(err, what, r, res);
}

/* ---------------------------------------------------------------------- */
/* Header                                                                  */
/* ---------------------------------------------------------------------- */

#define PK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            goto nomem;                                                                            \
    } while (0)

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
    lmc_put_be64(p, bits);
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
    PK(lmc_msgpack_pack_cstr(&pk, "type"));
    PK(lmc_msgpack_pack_cstr(&pk, "header"));
    PK(lmc_msgpack_pack_cstr(&pk, "magic"));
    PK(msgpack_pack_bin(&pk, h->magic_len));
    if (h->magic_len > 0)
        PK(msgpack_pack_bin_body(&pk, h->magic, h->magic_len));
    PK(lmc_msgpack_pack_cstr(&pk, "format_version"));
    PK(msgpack_pack_int64(&pk, h->format_version));
    PK(lmc_msgpack_pack_cstr(&pk, "level"));
    PK(lmc_msgpack_pack_cstr(&pk, h->level));
    PK(lmc_msgpack_pack_cstr(&pk, "trace_schema_version"));
    PK(msgpack_pack_int64(&pk, h->trace_schema_version));
    PK(lmc_msgpack_pack_cstr(&pk, "t_mono_start"));
    PK(msgpack_pack_double(&pk, h->t_mono_start));
    PK(lmc_msgpack_pack_cstr(&pk, "t_wall_start"));
    PK(msgpack_pack_double(&pk, h->t_wall_start));
    PK(lmc_msgpack_pack_cstr(&pk, "sm_config_json"));
    PK(lmc_msgpack_pack_cstr(&pk, h->sm_config_json));
    PK(lmc_msgpack_pack_cstr(&pk, "sm_config_digest"));
    PK(lmc_msgpack_pack_cstr(&pk, h->sm_config_digest));
    if (h->n_meta > 0) {
        PK(lmc_msgpack_pack_cstr(&pk, "level_meta"));
        PK(msgpack_pack_map(&pk, h->n_meta));
        for (size_t i = 0; i < h->n_meta; i++) {
            PK(lmc_msgpack_pack_cstr(&pk, h->meta_keys[i]));
            PK(lmc_msgpack_pack_cstr(&pk, h->meta_values[i]));
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

/*
 * A level_meta value as text (malloc'd): a str as itself, anything else in
 * Python repr (parsed at depth 2: the root map, level_meta, this value).
 */
static lmc_status meta_value_text(lmc_mp_reader *r, char **out, lmc_error *err)
{
    *out = NULL;
    const uint8_t *at = r->p;
    lmc_mp_item v;
    lmc_mp_result res = lmc_mp_next(r, &v);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, "Header.level_meta", r, res);
    if (v.type == LMC_MP_STR) {
        *out = strndup(v.v.s.len > 0 ? v.v.s.ptr : "", v.v.s.len);
    } else {
        r->p = at;
        lmc_arena a;
        lmc_arena_init(&a, 4096);
        msgpack_object o;
        lmc_tv tv;
        lmc_status st = parse_checked(r, &a, &o, 2, "Header.level_meta", err);
        if (st == LMC_OK && (st = lmc_codec_decode_value(&o, &a, &tv, err)) != LMC_OK)
            lmc_error_prefix(err, "Header.level_meta");
        if (st != LMC_OK) {
            lmc_arena_free(&a);
            return st;
        }
        size_t n = lmc_tv_format(&tv, NULL, 0);
        *out = malloc(n + 1);
        if (*out != NULL)
            lmc_tv_format(&tv, *out, n + 1);
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

/* The level_meta map at r (the whole body was checked by open_body). */
static lmc_status decode_level_meta(lmc_mp_reader *r, lmc_trace_header *h, lmc_error *err)
{
    static const char what[] = "Header";
    lmc_mp_item m;
    lmc_mp_result res = lmc_mp_next(r, &m);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, r, res);
    if (m.type != LMC_MP_MAP)
        return wrong_type(err, what, "level_meta", "map", lmc_mp_type_name(m.type));
    size_t n = m.v.n;
    lmc_status st = LMC_OK;
    char **keys = NULL, **vals = NULL;
    meta_pair *pairs = calloc(n > 0 ? n : 1, sizeof(*pairs));
    if (pairs == NULL)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        lmc_mp_item k;
        if ((res = lmc_mp_next(r, &k)) != LMC_MP_OK) {
            st = lmc_mp_error_set(err, what, r, res);
            goto fail;
        }
        if (k.type != LMC_MP_STR) {
            st = wrong_type(err, what, "level_meta", "str keys", lmc_mp_type_name(k.type));
            goto fail;
        }
        pairs[i].key = strndup(k.v.s.len > 0 ? k.v.s.ptr : "", k.v.s.len);
        if (pairs[i].key == NULL)
            goto nomem;
        if ((st = meta_value_text(r, &pairs[i].value, err)) != LMC_OK)
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

/* The Header's fields (format.h): how each is read and where it goes. */
typedef enum header_kind { H_TAG, H_MAGIC, H_INT, H_FLOAT, H_STR, H_META } header_kind;
static const struct header_field {
    const char *name;
    header_kind kind;
    size_t off; /* of the lmc_trace_header member (H_INT, H_FLOAT, H_STR) */
} HEADER_FIELDS[] = {
    {"type", H_TAG, 0},
    {"magic", H_MAGIC, 0},
    {"format_version", H_INT, offsetof(lmc_trace_header, format_version)},
    {"level", H_STR, offsetof(lmc_trace_header, level)},
    {"trace_schema_version", H_INT, offsetof(lmc_trace_header, trace_schema_version)},
    {"t_mono_start", H_FLOAT, offsetof(lmc_trace_header, t_mono_start)},
    {"t_wall_start", H_FLOAT, offsetof(lmc_trace_header, t_wall_start)},
    {"sm_config_json", H_STR, offsetof(lmc_trace_header, sm_config_json)},
    {"sm_config_digest", H_STR, offsetof(lmc_trace_header, sm_config_digest)},
    {"level_meta", H_META, 0},
};
#define N_HEADER_FIELDS (sizeof(HEADER_FIELDS) / sizeof(HEADER_FIELDS[0]))

/* Read field f's value at r into h. */
static lmc_status header_field_read(lmc_mp_reader *r, const struct header_field *f,
                                    lmc_trace_header *h, lmc_error *err)
{
    static const char what[] = "Header";
    if (f->kind == H_META)
        return decode_level_meta(r, h, err);
    lmc_mp_item v;
    lmc_mp_result res = lmc_mp_next(r, &v);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, r, res);
    char *base = (char *)h;
    switch (f->kind) {
    case H_TAG:
        return check_tag(&v, what, "header", err);
    case H_MAGIC:
        if (v.type != LMC_MP_BIN)
            return wrong_type(err, what, "magic", "bytes", lmc_mp_type_name(v.type));
        /* Longer magics are cut; they cannot match anyway. */
        h->magic_len = v.v.s.len < sizeof(h->magic) ? v.v.s.len : sizeof(h->magic);
        if (h->magic_len > 0)
            memcpy(h->magic, v.v.s.ptr, h->magic_len);
        return LMC_OK;
    case H_INT:
        return get_int(&v, what, f->name, (int64_t *)(void *)(base + f->off), err);
    case H_FLOAT:
        return get_float(&v, what, f->name, (double *)(void *)(base + f->off), err);
    case H_STR:
        return get_str(&v, what, f->name, (char **)(void *)(base + f->off), err);
    case H_META:
        break;
    }
    return LMC_OK;
}

lmc_status lmc_trace_decode_header(const void *body, size_t len, lmc_trace_header *h,
                                   lmc_error *err)
{
    static const char what[] = "Header";
    memset(h, 0, sizeof(*h));
    lmc_mp_reader r;
    uint32_t pairs = 0;
    lmc_status st = open_body(body, len, what, &r, &pairs, err);
    if (st != LMC_OK)
        return st;

    unsigned seen = 0; /* bit i: HEADER_FIELDS[i] was read */
    for (uint32_t i = 0; i < pairs && st == LMC_OK; i++) {
        lmc_mp_item k;
        lmc_mp_result res = lmc_mp_next(&r, &k);
        if (res != LMC_MP_OK) {
            st = lmc_mp_error_set(err, what, &r, res);
            break;
        }
        if (k.type != LMC_MP_STR) {
            st = lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                               lmc_mp_type_name(k.type));
            break;
        }
        size_t f = 0;
        while (f < N_HEADER_FIELDS && !lmc_mp_str_is(&k, HEADER_FIELDS[f].name))
            f++;
        if (f == N_HEADER_FIELDS) { /* Unknown keys are skipped, as msgspec does. */
            if ((res = lmc_mp_skip(&r, LMC_MP_ANY_DEPTH)) != LMC_MP_OK)
                st = lmc_mp_error_set(err, what, &r, res);
            continue;
        }
        st = header_field_read(&r, &HEADER_FIELDS[f], h, err);
        seen |= 1u << f;
    }
    if (st != LMC_OK)
        goto fail;
    /* Every field but the optional type tag and level_meta is required. */
    for (size_t f = 0; f < N_HEADER_FIELDS; f++) {
        if (HEADER_FIELDS[f].kind != H_TAG && HEADER_FIELDS[f].kind != H_META &&
            !(seen & (1u << f))) {
            st = missing(err, what, HEADER_FIELDS[f].name);
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

/*
 * The fixed bytes of every Record the encoder writes (fixmap 5, fixstr keys,
 * float64 times): written by lmc_trace_encode_record, matched by
 * lmc_trace_peek_record's fast path.
 */
#define RECORD_HEAD_MONO "\x85\xa4type\xa6record\xa6t_mono"
#define RECORD_HEAD_WALL "\xa6t_wall"
#define RECORD_HEAD_QUALNAME "\xa8qualname"

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
    p = put_lit(p, RECORD_HEAD_MONO);
    p = put_f64(p, t_mono);
    p = put_lit(p, RECORD_HEAD_WALL);
    p = put_f64(p, t_wall);
    p = put_lit(p, RECORD_HEAD_QUALNAME);
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
 * (parse_object at the depth the whole-body walk gives them, then the
 * codecs).
 *
 * It declines -- returns false -- on anything else: another shape, a
 * duplicate or unknown field, any error at all. The caller then decodes the
 * body from scratch with the general path, which reports every error with
 * its usual message. So the fast path only has to be right about what it
 * accepts, and it accepts a body only when the general path would decode it
 * to the same record: every byte read and checked by the reader, nothing
 * trailing, each value converted by the same rules.
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

/* The depth the whole-body walk gives an argument value (root 0, args 1). */
#define ARG_DEPTH 2

typedef struct key_fields {
    lmc_mp_item hash, model, salt;
    int64_t rank, group;
    bool has_group, has_salt;
} key_fields;

/*
 * The payload exactly as the codec writes it: a fixmap of five fields in
 * declaration order, each name a fixstr (the octal escapes are the map and
 * str headers: 0x85, 0xaa, 0xa7, 0xaf).
 */
static inline __attribute__((always_inline)) bool key_fields_in_order(lmc_mp_reader *r,
                                                                      key_fields *f)
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

/* Any order, optional fields left out; no unknown or repeated field. */
static bool key_fields_any_order(lmc_mp_reader *r, key_fields *f)
{
    lmc_mp_item m;
    if (lmc_mp_next(r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP || m.v.n > 5)
        return false;
    enum { F_HASH = 1, F_MODEL = 2, F_RANK = 4, F_GROUP = 8, F_SALT = 16 };
    unsigned seen = 0;
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k, v;
        if (lmc_mp_next(r, &k) != LMC_MP_OK || k.type != LMC_MP_STR ||
            lmc_mp_next(r, &v) != LMC_MP_OK)
            return false;
        unsigned bit;
        bool ok;
        if (lmc_mp_str_is(&k, "chunk_hash")) {
            bit = F_HASH;
            ok = v.type == LMC_MP_BIN;
            f->hash = v;
        } else if (lmc_mp_str_is(&k, "model_name")) {
            bit = F_MODEL;
            ok = v.type == LMC_MP_STR;
            f->model = v;
        } else if (lmc_mp_str_is(&k, "kv_rank")) {
            bit = F_RANK;
            ok = lmc_mp_get_int64(&v, &f->rank);
        } else if (lmc_mp_str_is(&k, "object_group_id")) {
            bit = F_GROUP;
            ok = lmc_mp_get_int64(&v, &f->group);
        } else if (lmc_mp_str_is(&k, "cache_salt")) {
            bit = F_SALT;
            ok = v.type == LMC_MP_STR;
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
static bool fast_key(lmc_mp_reader *r, lmc_object_key *k, lmc_object_key_cache *kc)
{
    if (!lmc_mp_take(r, KEY_WRAP, sizeof(KEY_WRAP)))
        return false;
    const uint8_t *payload = r->p;
    key_fields f;
    if (!key_fields_in_order(r, &f)) {
        r->p = payload;
        memset(&f, 0, sizeof(f));
        if (!key_fields_any_order(r, &f))
            return false;
    }
    return lmc_object_key_make_cached(kc, k, f.hash.v.s.ptr, f.hash.v.s.len, f.model.v.s.ptr,
                                      f.model.v.s.len, f.rank, f.has_group ? f.group : 0,
                                      f.has_salt ? f.salt.v.s.ptr : "",
                                      f.has_salt ? f.salt.v.s.len : 0, NULL) == LMC_OK;
}

/* A list of n canonical ObjectKeys; the reader is past the array header. */
static bool fast_key_list(lmc_mp_reader *r, uint32_t n, lmc_arena *a, lmc_tv *out,
                          lmc_object_key_cache *kc)
{
    if ((uint64_t)n * KEY_MIN_BYTES > lmc_mp_left(r))
        return false;
    lmc_object_key *keys = lmc_arena_alloc(a, (size_t)n * sizeof(*keys));
    lmc_tv *items = lmc_arena_alloc(a, (size_t)n * sizeof(*items));
    if (keys == NULL || items == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (!fast_key(r, &keys[i], kc))
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
static bool fast_value(lmc_mp_reader *r, lmc_arena *a, lmc_tv *out, lmc_object_key_cache *kc)
{
    const uint8_t *at = r->p;
    lmc_mp_item it;
    if (lmc_mp_next(r, &it) == LMC_MP_OK && it.type == LMC_MP_ARRAY && it.v.n > 0 &&
        lmc_mp_left(r) >= sizeof(KEY_WRAP) && memcmp(r->p, KEY_WRAP, sizeof(KEY_WRAP)) == 0)
        return fast_key_list(r, it.v.n, a, out, kc);
    r->p = at;
    msgpack_object o;
    bool nomem = false;
    if (parse_object(r, a, &o, ARG_DEPTH, &nomem) != LMC_MP_OK)
        return false;
    return lmc_codec_decode_value(&o, a, out, NULL) == LMC_OK;
}

static bool fast_args(lmc_mp_reader *r, lmc_arena *a, lmc_trace_record *rec)
{
    lmc_mp_item m;
    if (lmc_mp_next(r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP)
        return false;
    lmc_trace_arg *args = m.v.n > 0 ? lmc_arena_alloc(a, (size_t)m.v.n * sizeof(*args)) : NULL;
    if (m.v.n > 0 && args == NULL)
        return false;
    lmc_object_key_cache kc = {0};
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k;
        if (lmc_mp_next(r, &k) != LMC_MP_OK || k.type != LMC_MP_STR)
            return false;
        char *name = arena_str(a, &k);
        if (name == NULL)
            return false;
        args[i].name = name;
        args[i].name_len = k.v.s.len;
        if (!fast_value(r, a, &args[i].value, &kc))
            return false;
    }
    rec->args = args;
    rec->nargs = m.v.n;
    return true;
}

static bool fast_record(const void *body, size_t len, lmc_arena *a, lmc_trace_record *rec)
{
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, body, len);
    lmc_mp_item m;
    if (lmc_mp_next(&r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP)
        return false;
    enum { F_TYPE = 1, F_MONO = 2, F_WALL = 4, F_QUAL = 8, F_ARGS = 16 };
    unsigned seen = 0;
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k, v;
        if (lmc_mp_next(&r, &k) != LMC_MP_OK || k.type != LMC_MP_STR)
            return false;
        unsigned bit;
        if (lmc_mp_str_is(&k, "args")) {
            bit = F_ARGS;
            if ((seen & bit) || !fast_args(&r, a, rec))
                return false;
            seen |= bit;
            continue;
        }
        if (lmc_mp_next(&r, &v) != LMC_MP_OK)
            return false;
        bool ok;
        if (lmc_mp_str_is(&k, "type")) {
            bit = F_TYPE;
            ok = lmc_mp_str_is(&v, "record");
        } else if (lmc_mp_str_is(&k, "t_mono")) {
            bit = F_MONO;
            ok = lmc_mp_get_double(&v, &rec->t_mono);
        } else if (lmc_mp_str_is(&k, "t_wall")) {
            bit = F_WALL;
            ok = lmc_mp_get_double(&v, &rec->t_wall);
        } else if (lmc_mp_str_is(&k, "qualname")) {
            bit = F_QUAL;
            ok = v.type == LMC_MP_STR;
            if (ok) {
                if ((rec->qualname = arena_str(a, &v)) == NULL)
                    return false;
                rec->qualname_len = v.v.s.len;
            }
        } else {
            return false;
        }
        if (!ok || (seen & bit))
            return false;
        seen |= bit;
    }
    return lmc_mp_left(&r) == 0 && (seen | F_TYPE) == (F_TYPE | F_MONO | F_WALL | F_QUAL | F_ARGS);
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
    lmc_mp_reader r;
    uint32_t pairs = 0;
    lmc_status st = open_body(body, len, what, &r, &pairs, err);
    if (st != LMC_OK)
        return st;

    bool have_mono = false, have_wall = false;
    lmc_mp_item qualname = {.type = LMC_MP_NIL};
    const uint8_t *args_at = NULL; /* the last "args" value, decoded after the loop */
    for (uint32_t i = 0; i < pairs && st == LMC_OK; i++) {
        lmc_mp_item k, v;
        lmc_mp_result res = lmc_mp_next(&r, &k);
        if (res != LMC_MP_OK) {
            st = lmc_mp_error_set(err, what, &r, res);
            break;
        }
        if (k.type != LMC_MP_STR) {
            st = lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                               lmc_mp_type_name(k.type));
            break;
        }
        bool is_args = lmc_mp_str_is(&k, "args");
        const uint8_t *at = r.p;
        if (!is_args && !lmc_mp_str_is(&k, "type") && !lmc_mp_str_is(&k, "t_mono") &&
            !lmc_mp_str_is(&k, "t_wall") && !lmc_mp_str_is(&k, "qualname")) {
            res = lmc_mp_skip(&r, LMC_MP_ANY_DEPTH); /* unknown keys are skipped */
        } else if ((res = lmc_mp_next(&r, &v)) == LMC_MP_OK) {
            if (lmc_mp_str_is(&k, "type")) {
                st = check_tag(&v, what, "record", err);
            } else if (lmc_mp_str_is(&k, "t_mono")) {
                st = get_float(&v, what, "t_mono", &rec->t_mono, err);
                have_mono = true;
            } else if (lmc_mp_str_is(&k, "t_wall")) {
                st = get_float(&v, what, "t_wall", &rec->t_wall, err);
                have_wall = true;
            } else if (lmc_mp_str_is(&k, "qualname")) {
                if (v.type != LMC_MP_STR)
                    st = wrong_type(err, what, "qualname", "str", lmc_mp_type_name(v.type));
                qualname = v;
            } else {
                if (v.type != LMC_MP_MAP)
                    st = wrong_type(err, what, "args", "map", lmc_mp_type_name(v.type));
                args_at = at;
                r.p = at;
                res = lmc_mp_skip(&r, LMC_MP_ANY_DEPTH);
            }
        }
        if (res != LMC_MP_OK && st == LMC_OK)
            st = lmc_mp_error_set(err, what, &r, res);
    }
    if (st != LMC_OK)
        goto out;
    if (!have_mono || !have_wall || qualname.type != LMC_MP_STR || args_at == NULL) {
        st = missing(err, what,
                     !have_mono                    ? "t_mono"
                     : !have_wall                  ? "t_wall"
                     : qualname.type != LMC_MP_STR ? "qualname"
                                                   : "args");
        goto out;
    }
    if ((rec->qualname = arena_str(a, &qualname)) == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", what);
        goto out;
    }
    rec->qualname_len = qualname.v.s.len;
    r.p = args_at;
    msgpack_object args;
    if ((st = parse_checked(&r, a, &args, 1, what, err)) == LMC_OK)
        st = lmc_codec_decode_args(&args, a, &rec->args, &rec->nargs, err);

out:
    if (st != LMC_OK)
        memset(rec, 0, sizeof(*rec));
    return st;
}

/*
 * A Record as the encoder writes it, read from its fixed head: one compare
 * per run of fixed bytes. False (the general peek decides) for anything
 * else; what it accepts, the general peek reads to the same result.
 */
static bool peek_fast(const void *body, size_t len, double *t_mono, const char **qualname,
                      size_t *qualname_len)
{
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, body, len);
    lmc_mp_item q;
    if (!lmc_mp_take(&r, RECORD_HEAD_MONO "\xcb", sizeof(RECORD_HEAD_MONO "\xcb") - 1) ||
        lmc_mp_left(&r) < 8)
        return false;
    uint64_t bits = lmc_get_be64(r.p);
    r.p += 8;
    if (!lmc_mp_take(&r, RECORD_HEAD_WALL "\xcb", sizeof(RECORD_HEAD_WALL "\xcb") - 1) ||
        lmc_mp_left(&r) < 8)
        return false;
    r.p += 8;
    if (!lmc_mp_take(&r, RECORD_HEAD_QUALNAME, sizeof(RECORD_HEAD_QUALNAME) - 1) ||
        lmc_mp_next(&r, &q) != LMC_MP_OK || q.type != LMC_MP_STR)
        return false;
    memcpy(t_mono, &bits, sizeof(*t_mono));
    *qualname = q.v.s.ptr;
    *qualname_len = q.v.s.len;
    return true;
}

lmc_status lmc_trace_peek_record(const void *body, size_t len, double *t_mono,
                                 const char **qualname, size_t *qualname_len, lmc_error *err)
{
    static const char what[] = "Record";
    if (peek_fast(body, len, t_mono, qualname, qualname_len))
        return LMC_OK;
    /*
     * Reads stop once t_mono and qualname are found, so nothing is sized by
     * a count and the rest of the map is never looked at: the unchecked
     * reads accept what a full decode might still reject later.
     */
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, body, len);
    lmc_mp_item it;
    lmc_mp_result res = lmc_mp_next_unchecked(&r, &it);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, &r, res);
    if (it.type != LMC_MP_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected a msgpack map", what);
    bool have_mono = false, have_q = false;
    for (uint32_t i = 0, n = it.v.n; i < n && !(have_mono && have_q); i++) {
        lmc_mp_item k, v;
        if ((res = lmc_mp_next_unchecked(&r, &k)) != LMC_MP_OK)
            return lmc_mp_error_set(err, what, &r, res);
        if (k.type != LMC_MP_STR)
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                                 lmc_mp_type_name(k.type));
        bool is_type = lmc_mp_str_is(&k, "type");
        bool is_mono = !is_type && lmc_mp_str_is(&k, "t_mono");
        bool is_q = !is_type && !is_mono && lmc_mp_str_is(&k, "qualname");
        if (!is_type && !is_mono && !is_q) {
            if ((res = lmc_mp_skip(&r, LMC_MP_MAX_DEPTH)) != LMC_MP_OK)
                return lmc_mp_error_set(err, what, &r, res);
            continue;
        }
        if ((res = lmc_mp_next_unchecked(&r, &v)) != LMC_MP_OK)
            return lmc_mp_error_set(err, what, &r, res);
        if (is_type) {
            lmc_status st = check_tag(&v, what, "record", err);
            if (st != LMC_OK)
                return st;
        } else if (is_mono) {
            lmc_status st = get_float(&v, what, "t_mono", t_mono, err);
            if (st != LMC_OK)
                return st;
            have_mono = true;
        } else {
            if (v.type != LMC_MP_STR)
                return wrong_type(err, what, "qualname", "str", lmc_mp_type_name(v.type));
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
