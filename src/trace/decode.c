/*
 * decode.c -- args from validated msgpack bytes to lmc_tv values, through
 * the codec registry, without a msgpack_object tree (see decode.h).
 *
 * Owns nothing. The rules are codec.c's decode_value, applied to the bytes:
 * natives as themselves (an int above INT64_MAX as LMC_TV_UINT), lists item
 * by item, a map with "__t__" (its last one, as a Python dict keeps) as the
 * tagged value it names, with "v" (the last) its payload, any other map key
 * by key. Tuples and sets are lists here too. ObjectKey payloads are read
 * from the bytes; other registered codecs get their payload as the tree
 * they are written against, parsed into the scratch arena and dropped right
 * after. The messages are codec.c's.
 *
 * The recorder's shape of a key list -- {"__t__": "ObjectKey", "v": {five
 * fields in order}} per key -- is matched a run of fixed bytes at a time and
 * decoded into one contiguous lmc_object_key array (the items point into it
 * in order, so a replay hands the array to the StorageManager without
 * copying), with the key strings validated and interned once per run of
 * equal strings (lmc_object_key_make_cached). Anything unusual falls back
 * to the general rules, which give every error its message: the fast path
 * only has to be right about what it accepts.
 *
 * Threads: none.
 */
#include "trace/decode.h"

#include <inttypes.h>
#include <msgpack.h>
#include <string.h>

#include "trace/codec.h"
#include "trace/validate.h"

#define TAG_KEY "__t__"
#define TAG_VAL "v"
#define TUPLE_TAG "tuple"

/* ---------------------------------------------------------------------- */
/* msgpack_object trees (for codecs that decode from one)                  */
/* ---------------------------------------------------------------------- */

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

/*
 * One value into a tree: strings point into the buffer, arrays come from
 * the arena. Counts were checked against the bytes left before anything is
 * allocated (lmc_mp_next), and non-empty containers nest at most
 * LMC_MP_MAX_DEPTH deep. On LMC_MP_INVALID with *nomem set, the arena ran
 * out.
 */
static lmc_mp_result parse_object(lmc_mp_reader *r, lmc_arena *a, msgpack_object *o, unsigned depth,
                                  bool *nomem)
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
    uint32_t n = it.v.n;
    bool is_map = it.type == LMC_MP_MAP;
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
        msgpack_object_kv *kv = elems;
        for (uint32_t i = 0; i < n; i++)
            if ((res = parse_object(r, a, &kv[i].key, depth + 1, nomem)) != LMC_MP_OK ||
                (res = parse_object(r, a, &kv[i].val, depth + 1, nomem)) != LMC_MP_OK)
                return res;
        return LMC_MP_OK;
    }
    o->type = MSGPACK_OBJECT_ARRAY;
    o->via.array.size = n;
    o->via.array.ptr = elems;
    msgpack_object *items = elems;
    for (uint32_t i = 0; i < n; i++)
        if ((res = parse_object(r, a, &items[i], depth + 1, nomem)) != LMC_MP_OK)
            return res;
    return LMC_MP_OK;
}

lmc_status lmc_trace_parse_object(lmc_mp_reader *r, lmc_arena *a, msgpack_object *o, unsigned depth,
                                  const char *what, lmc_error *err)
{
    bool nomem = false;
    lmc_mp_result res = parse_object(r, a, o, depth, &nomem);
    if (nomem)
        return lmc_error_set(err, LMC_ERR_NOMEM, "%s: out of memory", what);
    return lmc_mp_error_set(err, what, r, res);
}

/* ---------------------------------------------------------------------- */
/* ObjectKeys from the bytes                                               */
/* ---------------------------------------------------------------------- */

/*
 * A canonical key is at least 54 bytes (the wrapper, a map header, three
 * required fields); a list is tried only when this many bytes per item are
 * left, which keeps its arrays within a small multiple of the body.
 */
#define KEY_MIN_BYTES 32

/* Any order, optional fields left out; no unknown or repeated field. */
static bool key_fields_any_order(lmc_mp_reader *r, lmc_trace_key_fields *f)
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

/* An ObjectKey payload at r by dec_object_key's rules; false (r anywhere) to take the codec. */
static bool key_payload(lmc_mp_reader *r, lmc_object_key *k, lmc_object_key_cache *kc)
{
    const uint8_t *payload = r->p;
    lmc_trace_key_fields f;
    if (!lmc_trace_key_fields_in_order(r, &f)) {
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

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct ctx {
    const lmc_trace_decoder *d;
    lmc_object_key_cache kc; /* long hashes allowed: LMCache takes any length */
    lmc_error *err;
} ctx;

static lmc_status nomem(ctx *c)
{
    return lmc_error_set(c->err, LMC_ERR_NOMEM, "trace.codecs: out of memory while decoding");
}

static void *alloc_array(ctx *c, size_t n, size_t size)
{
    if (n == 0)
        return NULL;
    if (n > SIZE_MAX / size)
        return NULL;
    return lmc_arena_alloc(c->d->values, n * size);
}

static lmc_status value(ctx *c, lmc_mp_reader *r, unsigned depth, lmc_tv *out);

/* n items at r into a list, tuple or set. */
static lmc_status items(ctx *c, lmc_mp_reader *r, uint32_t n, unsigned depth, uint32_t kind,
                        lmc_tv *out)
{
    lmc_tv *v = alloc_array(c, n, sizeof(lmc_tv));
    if (n > 0 && v == NULL)
        return nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        lmc_status st = value(c, r, depth + 1, &v[i]);
        if (st != LMC_OK)
            return st;
    }
    *out = lmc_tv_list(kind, v, n);
    return LMC_OK;
}

/* A list of n keys in the recorder's form, r past the array header; false to decline. */
static bool key_list(ctx *c, lmc_mp_reader *r, uint32_t n, lmc_tv *out)
{
    if ((uint64_t)n * KEY_MIN_BYTES > lmc_mp_left(r))
        return false;
    lmc_object_key *keys = alloc_array(c, n, sizeof(*keys));
    lmc_tv *v = alloc_array(c, n, sizeof(*v));
    if (keys == NULL || v == NULL)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (!lmc_mp_take(r, LMC_TRACE_KEY_WRAP, LMC_TRACE_KEY_WRAP_LEN) ||
            !key_payload(r, &keys[i], &c->kc))
            return false;
        memset(&v[i], 0, sizeof(v[i]));
        v[i].kind = LMC_TV_OBJECT_KEY;
        v[i].u.key = &keys[i];
    }
    *out = lmc_tv_list(LMC_TV_LIST, v, n);
    return true;
}

static lmc_status bytes(ctx *c, const lmc_mp_item *it, lmc_tv *out)
{
    out->kind = it->type == LMC_MP_STR ? LMC_TV_STR : LMC_TV_BIN;
    out->u.s.len = it->v.s.len;
    if (!c->d->copy_bytes) {
        out->u.s.ptr = it->v.s.ptr;
        return LMC_OK;
    }
    char *copy = lmc_arena_alloc(c->d->values, (size_t)it->v.s.len + 1);
    if (copy == NULL)
        return nomem(c);
    if (it->v.s.len > 0)
        memcpy(copy, it->v.s.ptr, it->v.s.len);
    copy[it->v.s.len] = '\0';
    out->u.s.ptr = copy;
    return LMC_OK;
}

/* The payload at r of a tagged value with its own codec (not tuple or set). */
static lmc_status codec_payload(ctx *c, const lmc_codec *codec, lmc_mp_reader *r, unsigned depth,
                                lmc_tv *out)
{
    if (codec->kind == LMC_TV_OBJECT_KEY) {
        const uint8_t *at = r->p;
        lmc_object_key *k = lmc_arena_alloc(c->d->values, sizeof(*k));
        if (k == NULL)
            return nomem(c);
        if (key_payload(r, k, &c->kc)) {
            out->kind = LMC_TV_OBJECT_KEY;
            out->u.key = k;
            return LMC_OK;
        }
        r->p = at; /* the codec says what is wrong with it */
    }
    msgpack_object o;
    lmc_arena *scratch = c->d->scratch;
    lmc_status st = lmc_trace_parse_object(r, scratch, &o, depth, "trace.codecs", c->err);
    if (st == LMC_OK)
        st = codec->decode(&o, c->d->values, out, c->err);
    /* The tree only pointed into the bytes; what the codec built lives in values. */
    lmc_arena_reset(scratch);
    return st;
}

/* A map of n pairs at r (past its header) with "__t__" at tag_at, "v" at v_at (or NULL). */
static lmc_status tagged(ctx *c, const uint8_t *tag_at, const uint8_t *v_at, lmc_mp_reader *r,
                         unsigned depth, lmc_tv *out)
{
    lmc_mp_reader t = *r;
    t.p = tag_at;
    lmc_mp_item tag;
    (void)lmc_mp_next(&t, &tag);
    if (tag.type != LMC_MP_STR)
        return lmc_error_set(c->err, LMC_ERR_FORMAT,
                             "trace.codecs: the '__t__' tag must be a str, got %s",
                             lmc_mp_type_name(tag.type));
    int shown = (int)(tag.v.s.len > 96 ? 96 : tag.v.s.len);
    bool is_tuple = lmc_mp_str_is(&tag, TUPLE_TAG);
    const lmc_codec *codec = is_tuple ? NULL : lmc_codec_for_tag(tag.v.s.ptr, tag.v.s.len);
    if (!is_tuple && codec == NULL)
        return lmc_error_set(c->err, LMC_ERR_FORMAT, "trace.codecs: unknown tag '%.*s'", shown,
                             tag.v.s.ptr);
    if (v_at == NULL)
        return lmc_error_set(c->err, LMC_ERR_FORMAT, "trace.codecs: tagged value '%.*s' has no 'v'",
                             shown, tag.v.s.ptr);
    lmc_mp_reader p = *r;
    p.p = v_at;
    if (!is_tuple && codec->kind != LMC_TV_SET)
        return codec_payload(c, codec, &p, depth + 1, out);
    /* tuple and set: a list of encoded values (the set codec is built in and cannot be replaced) */
    lmc_mp_item list;
    (void)lmc_mp_next(&p, &list);
    if (list.type != LMC_MP_ARRAY) {
        if (is_tuple)
            return lmc_error_set(c->err, LMC_ERR_FORMAT,
                                 "trace.codecs: invalid tuple payload: expected a list, got %s",
                                 lmc_mp_type_name(list.type));
        return lmc_error_set(c->err, LMC_ERR_FORMAT,
                             "trace.codecs: invalid set payload: 'v' must be a list, got %s",
                             lmc_mp_type_name(list.type));
    }
    return items(c, &p, list.v.n, depth + 1, is_tuple ? LMC_TV_TUPLE : LMC_TV_SET, out);
}

/* A map of n pairs at r (past its header): tagged or not. */
static lmc_status map(ctx *c, lmc_mp_reader *r, uint32_t n, unsigned depth, lmc_tv *out)
{
    const uint8_t *start = r->p;
    const uint8_t *tag_at = NULL, *v_at = NULL;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *k_at = r->p;
        lmc_mp_item k;
        (void)lmc_mp_next(r, &k);
        if (k.type == LMC_MP_ARRAY || k.type == LMC_MP_MAP) {
            r->p = k_at;
            (void)lmc_mp_skip(r, LMC_MP_ANY_DEPTH);
        }
        if (lmc_mp_str_is(&k, TAG_KEY))
            tag_at = r->p;
        else if (lmc_mp_str_is(&k, TAG_VAL))
            v_at = r->p;
        (void)lmc_mp_skip(r, LMC_MP_ANY_DEPTH);
    }
    if (tag_at != NULL) {
        const uint8_t *end = r->p;
        lmc_status st = tagged(c, tag_at, v_at, r, depth, out);
        r->p = end;
        return st;
    }
    r->p = start;
    lmc_tv *keys = alloc_array(c, n, sizeof(lmc_tv));
    lmc_tv *vals = alloc_array(c, n, sizeof(lmc_tv));
    if (n > 0 && (keys == NULL || vals == NULL))
        return nomem(c);
    for (uint32_t i = 0; i < n; i++) {
        lmc_status st;
        if ((st = value(c, r, depth + 1, &keys[i])) != LMC_OK ||
            (st = value(c, r, depth + 1, &vals[i])) != LMC_OK)
            return st;
    }
    *out = lmc_tv_map(keys, vals, n);
    return LMC_OK;
}

static lmc_status value(ctx *c, lmc_mp_reader *r, unsigned depth, lmc_tv *out)
{
    memset(out, 0, sizeof(*out));
    lmc_mp_item it;
    lmc_mp_result res = lmc_mp_next(r, &it);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(c->err, "trace.codecs", r, res);
    switch (it.type) {
    case LMC_MP_NIL:
        out->kind = LMC_TV_NIL;
        return LMC_OK;
    case LMC_MP_BOOL:
        out->kind = LMC_TV_BOOL;
        out->u.b = it.v.b;
        return LMC_OK;
    case LMC_MP_UINT:
        *out = lmc_tv_uint(it.v.u);
        return LMC_OK;
    case LMC_MP_INT:
        out->kind = LMC_TV_INT;
        out->u.i = it.v.i;
        return LMC_OK;
    case LMC_MP_FLOAT:
        out->kind = LMC_TV_FLOAT;
        out->u.f = it.v.f;
        return LMC_OK;
    case LMC_MP_STR:
    case LMC_MP_BIN:
        return bytes(c, &it, out);
    case LMC_MP_ARRAY:
        if (it.v.n > 0 && lmc_mp_left(r) >= LMC_TRACE_KEY_WRAP_LEN &&
            memcmp(r->p, LMC_TRACE_KEY_WRAP, LMC_TRACE_KEY_WRAP_LEN) == 0) {
            const uint8_t *at = r->p;
            if (key_list(c, r, it.v.n, out))
                return LMC_OK;
            if (c->d->values->over_limit)
                return nomem(c);
            r->p = at;
            memset(out, 0, sizeof(*out));
        }
        return items(c, r, it.v.n, depth, LMC_TV_LIST, out);
    case LMC_MP_MAP:
        return map(c, r, it.v.n, depth, out);
    case LMC_MP_EXT:
        break;
    }
    return lmc_error_set(c->err, LMC_ERR_FORMAT, "trace.codecs: unsupported msgpack type %s",
                         lmc_mp_type_name(it.type));
}

lmc_status lmc_trace_decode_value(const lmc_trace_decoder *d, lmc_mp_reader *r, unsigned depth,
                                  lmc_tv *out, lmc_error *err)
{
    ctx c = {.d = d, .kc = {.long_hashes = true}, .err = err};
    return value(&c, r, depth, out);
}

lmc_status lmc_trace_decode_args(const lmc_trace_decoder *d, const uint8_t *p, size_t len,
                                 lmc_trace_arg **args, size_t *n, lmc_error *err)
{
    *args = NULL;
    *n = 0;
    ctx c = {.d = d, .kc = {.long_hashes = true}, .err = err};
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, p, len);
    lmc_mp_item m;
    if (lmc_mp_next(&r, &m) != LMC_MP_OK || m.type != LMC_MP_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "args must be a map, got %s",
                             lmc_mp_type_name(m.type));
    lmc_trace_arg *out = alloc_array(&c, m.v.n, sizeof(lmc_trace_arg));
    if (m.v.n > 0 && out == NULL)
        return nomem(&c);
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k;
        (void)lmc_mp_next(&r, &k);
        if (k.type != LMC_MP_STR)
            return lmc_error_set(err, LMC_ERR_FORMAT, "args keys must be str, got %s",
                                 lmc_mp_type_name(k.type));
        char *name = lmc_arena_alloc(d->values, (size_t)k.v.s.len + 1);
        if (name == NULL)
            return nomem(&c);
        if (k.v.s.len > 0)
            memcpy(name, k.v.s.ptr, k.v.s.len);
        name[k.v.s.len] = '\0';
        out[i].name = name;
        out[i].name_len = k.v.s.len;
        /* The record's root map and args enclose the value. */
        lmc_status st = value(&c, &r, 2, &out[i].value);
        if (st != LMC_OK) {
            int shown = (int)(k.v.s.len > 96 ? 96 : k.v.s.len);
            lmc_error_prefix(err, "argument '%.*s'", shown, name);
            return st;
        }
    }
    *args = out;
    *n = m.v.n;
    return LMC_OK;
}
