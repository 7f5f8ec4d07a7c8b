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
 * A Record is accepted or refused by lmc_trace_scan_record
 * (trace/validate.h), msgspec's rules, the one definition every command
 * shares; its args then go through the codecs straight from the bytes
 * (trace/decode.h). Peeking (`trace info`) is the scan alone: it reads
 * every byte, since a record whose args LMCache would reject is not a
 * record, but builds nothing.
 *
 * The Header first walks the whole body once (lmc_mp_skip: every length
 * and count checked against the bytes left, nesting capped at 32, nothing
 * trailing, a map at the root), so a malformed one gets the same message
 * whatever field it would have reached; then it reads the fields in order,
 * strs checked as UTF-8 and level_meta values as msgspec's Any, as msgspec
 * does.
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
#include "trace/decode.h"
#include "trace/validate.h"

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
    lmc_status st = lmc_trace_check_str(v, what, field, err);
    if (st != LMC_OK)
        return st;
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
    lmc_msgpack_sbuffer_packer_init(&pk, out);
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
    static const char what[] = "Header.level_meta";
    *out = NULL;
    const uint8_t *at = r->p;
    lmc_status st = lmc_trace_check_any(r, 2, what, err);
    if (st != LMC_OK)
        return st;
    lmc_mp_reader v_r = *r;
    v_r.p = at;
    lmc_mp_item v;
    (void)lmc_mp_next(&v_r, &v);
    if (v.type == LMC_MP_STR) {
        *out = strndup(v.v.s.len > 0 ? v.v.s.ptr : "", v.v.s.len);
    } else {
        v_r.p = at;
        lmc_arena a, scratch;
        lmc_arena_init(&a, 4096);
        lmc_arena_init(&scratch, 4096);
        lmc_trace_decoder d = {.values = &a, .scratch = &scratch, .copy_bytes = true};
        lmc_tv tv;
        /* msgspec takes any value here; one our codecs cannot render is shown, not refused. */
        if (lmc_trace_decode_value(&d, &v_r, 2, &tv, NULL) == LMC_OK) {
            size_t n = lmc_tv_format(&tv, NULL, 0);
            *out = malloc(n + 1);
            if (*out != NULL)
                lmc_tv_format(&tv, *out, n + 1);
        } else {
            *out = strdup("(a value the codecs cannot decode)");
        }
        lmc_arena_free(&scratch);
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
        if ((st = lmc_trace_check_str(&k, what, "level_meta", err)) != LMC_OK)
            goto fail;
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
    lmc_msgpack_sbuffer_packer_init(&pk, out);
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
 * Records are read in two steps. lmc_trace_scan_record (trace/validate.h)
 * decides whether the body is a record at all, by msgspec's rules, and
 * where its fields are; every path that counts records uses it. Then the
 * args, if anyone wants them, go through the codecs straight from the bytes
 * (trace/decode.h), so no msgpack_object tree is ever built for them.
 */
lmc_status lmc_trace_decode_record(const void *body, size_t len, lmc_arena *a,
                                   lmc_trace_record *rec, lmc_error *err)
{
    memset(rec, 0, sizeof(*rec));
    lmc_trace_record_scan sc;
    lmc_status st = lmc_trace_scan_record(body, len, &sc, err);
    if (st != LMC_OK)
        return st;
    lmc_arena scratch;
    lmc_arena_init(&scratch, 0);
    lmc_trace_decoder d = {.values = a, .scratch = &scratch, .copy_bytes = true};
    char *q = lmc_arena_alloc(a, sc.qualname_len + 1);
    if (q == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "Record: out of memory");
        goto out;
    }
    if (sc.qualname_len > 0)
        memcpy(q, sc.qualname, sc.qualname_len);
    q[sc.qualname_len] = '\0';
    rec->t_mono = sc.t_mono;
    rec->t_wall = sc.t_wall;
    rec->qualname = q;
    rec->qualname_len = sc.qualname_len;
    st = lmc_trace_decode_args(&d, sc.args, sc.args_len, &rec->args, &rec->nargs, err);

out:
    lmc_arena_free(&scratch);
    if (st != LMC_OK)
        memset(rec, 0, sizeof(*rec));
    return st;
}

lmc_status lmc_trace_peek_record(const void *body, size_t len, double *t_mono,
                                 const char **qualname, size_t *qualname_len, lmc_error *err)
{
    lmc_trace_record_scan sc;
    lmc_status st = lmc_trace_scan_record(body, len, &sc, err);
    if (st != LMC_OK)
        return st;
    *t_mono = sc.t_mono;
    *qualname = sc.qualname;
    *qualname_len = sc.qualname_len;
    return LMC_OK;
}
