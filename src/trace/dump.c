/*
 * dump.c -- the text and JSONL listings of a trace (see dump.h).
 *
 * Owns: the reader it opens, one line buffer. Records stream through the
 * reader one at a time (its arena is reset per record), so a listing of
 * any size runs in constant memory; --limit stops reading early.
 *
 * Threads: none.
 */
#include "trace/dump.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/digest.h"
#include "core/escape.h"
#include "trace/codec.h"
#include "trace/marker.h"
#include "trace/ops.h"
#include "trace/reader.h"

/* Bytes of the first chunk hash a text line shows: 8 hex digits, what --key needs. */
#define HASH_PREFIX_BYTES (LMC_TRACE_KEY_PREFIX_MIN_DIGITS / 2)
/* One abbreviated value is cut here (then ".."): a line stays one screen wide per arg. */
#define VALUE_MAX 96
#define ITEMS_MAX 8 /* items of a generic list shown before "..." */
#define DEPTH_MAX 16

/* ---------------------------------------------------------------------- */
/* Text                                                                    */
/* ---------------------------------------------------------------------- */

/* Characters a string may hold and still print bare (unquoted). */
static bool bare_safe(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:/@+-", c) != NULL))
            return false;
    }
    return true;
}

/* A string bare when it is plain, else in double quotes; escaped either way, never a blank. */
static void put_str(lmc_strbuf *b, const char *s, size_t n)
{
    if (bare_safe(s, n)) {
        lmc_strbuf_append(b, s, n);
        return;
    }
    lmc_strbuf_append(b, "\"", 1);
    lmc_escape_append(b, s, n, LMC_ESCAPE_DQUOTE | LMC_ESCAPE_SPACE);
    lmc_strbuf_append(b, "\"", 1);
}

static void put_hex_prefix(lmc_strbuf *b, const uint8_t *p, size_t n, size_t show)
{
    char hex[2 * LMC_CHUNK_HASH_MAX + 1];
    size_t k = n < show ? n : show;
    lmc_hex_encode(p, k, hex);
    lmc_strbuf_append(b, hex, 2 * k);
    if (n > show)
        lmc_strbuf_append(b, "..", 2);
}

static void put_key(lmc_strbuf *b, const lmc_object_key *k)
{
    put_hex_prefix(b, k->chunk_hash, k->chunk_hash_len, HASH_PREFIX_BYTES);
}

static const char *dtype_short(lmc_dtype dt)
{
    const char *name = lmc_dtype_name(dt);
    return strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
}

static void put_shape(lmc_strbuf *b, const lmc_shape *s)
{
    lmc_strbuf_append(b, "[", 1);
    for (uint32_t i = 0; i < s->ndim && i < LMC_SHAPE_MAX_DIMS; i++)
        lmc_strbuf_printf(b, i > 0 ? ",%" PRId64 : "%" PRId64, s->dims[i]);
    lmc_strbuf_append(b, "]", 1);
}

/* "[2,16,8,256]:bfloat16", tensors joined by '+'. */
static void put_layout(lmc_strbuf *b, const lmc_layout_desc *d)
{
    uint32_t n = d->count < LMC_LAYOUT_MAX_TENSORS ? d->count : LMC_LAYOUT_MAX_TENSORS;
    if (n == 0)
        lmc_strbuf_puts(b, "[]");
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0)
            lmc_strbuf_append(b, "+", 1);
        put_shape(b, &d->shapes[i]);
        lmc_strbuf_printf(b, ":%s", dtype_short(d->dtypes[i]));
    }
}

static bool all_keys(const lmc_tv *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != LMC_TV_OBJECT_KEY || items[i].u.key == NULL)
            return false;
    }
    return n > 0;
}

static void abbrev(lmc_strbuf *b, const lmc_tv *v, int depth);

static void put_items(lmc_strbuf *b, const lmc_tv *items, size_t n, const char *open,
                      const char *close, int depth)
{
    lmc_strbuf_puts(b, open);
    for (size_t i = 0; i < n && i < ITEMS_MAX; i++) {
        if (i > 0)
            lmc_strbuf_append(b, ",", 1);
        abbrev(b, &items[i], depth + 1);
    }
    if (n > ITEMS_MAX)
        lmc_strbuf_printf(b, ",...%zu", n);
    lmc_strbuf_puts(b, close);
}

static void abbrev(lmc_strbuf *b, const lmc_tv *v, int depth)
{
    if (depth >= DEPTH_MAX) {
        lmc_strbuf_puts(b, "...");
        return;
    }
    switch ((lmc_tv_kind)v->kind) {
    case LMC_TV_NIL:
        lmc_strbuf_puts(b, "None");
        return;
    case LMC_TV_BOOL:
        lmc_strbuf_puts(b, v->u.b ? "True" : "False");
        return;
    case LMC_TV_INT:
        lmc_strbuf_printf(b, "%" PRId64, v->u.i);
        return;
    case LMC_TV_UINT:
        lmc_strbuf_printf(b, "%" PRIu64, v->u.u);
        return;
    case LMC_TV_FLOAT: {
        char f[40];
        lmc_repr_float(v->u.f, f, sizeof(f));
        lmc_strbuf_puts(b, f);
        return;
    }
    case LMC_TV_STR:
        put_str(b, v->u.s.ptr != NULL ? v->u.s.ptr : "", v->u.s.ptr != NULL ? v->u.s.len : 0);
        return;
    case LMC_TV_BIN:
        lmc_strbuf_puts(b, "0x");
        put_hex_prefix(b, (const uint8_t *)v->u.s.ptr, v->u.s.ptr != NULL ? v->u.s.len : 0,
                       HASH_PREFIX_BYTES * 2);
        return;
    case LMC_TV_LIST:
        if (all_keys(v->u.list.items, v->u.list.n)) {
            /* keys=16[3fa9c2d1..]: the count and the first key, enough to grep for. */
            lmc_strbuf_printf(b, "%zu[", v->u.list.n);
            put_key(b, v->u.list.items[0].u.key);
            lmc_strbuf_puts(b, "]");
            return;
        }
        put_items(b, v->u.list.items, v->u.list.n, "[", "]", depth);
        return;
    case LMC_TV_TUPLE:
        put_items(b, v->u.list.items, v->u.list.n, "(", ")", depth);
        return;
    case LMC_TV_SET:
        put_items(b, v->u.list.items, v->u.list.n, "{", "}", depth);
        return;
    case LMC_TV_MAP:
        lmc_strbuf_puts(b, "{");
        for (size_t i = 0; i < v->u.map.n && i < ITEMS_MAX; i++) {
            if (i > 0)
                lmc_strbuf_append(b, ",", 1);
            abbrev(b, &v->u.map.keys[i], depth + 1);
            lmc_strbuf_append(b, ":", 1);
            abbrev(b, &v->u.map.vals[i], depth + 1);
        }
        if (v->u.map.n > ITEMS_MAX)
            lmc_strbuf_printf(b, ",...%zu", v->u.map.n);
        lmc_strbuf_puts(b, "}");
        return;
    case LMC_TV_OBJECT_KEY:
        lmc_strbuf_puts(b, "key(");
        if (v->u.key != NULL)
            put_key(b, v->u.key);
        lmc_strbuf_puts(b, ")");
        return;
    case LMC_TV_LAYOUT:
        if (v->u.layout != NULL)
            put_layout(b, v->u.layout);
        return;
    case LMC_TV_DTYPE:
        lmc_strbuf_puts(b, dtype_short(v->u.dtype));
        return;
    case LMC_TV_SIZE:
        if (v->u.size != NULL)
            put_shape(b, v->u.size);
        return;
    case LMC_TV_TRIM_POLICY: {
        const char *name = lmc_trim_policy_name(v->u.trim);
        if (name != NULL)
            lmc_strbuf_puts(b, name);
        else
            lmc_strbuf_printf(b, "TrimPolicy(%d)", (int)v->u.trim);
        return;
    }
    case LMC_TV_PREFETCH_HANDLE:
        if (v->u.handle != NULL)
            lmc_strbuf_printf(b, "handle(%" PRId64 ")", v->u.handle->prefetch_request_id);
        return;
    case LMC_TV_BUILTIN_COUNT_:
    case LMC_TV_KIND_MAX:
        break;
    }
    const lmc_codec *c = lmc_codec_for_kind(v->kind);
    lmc_escape_append(b, c != NULL ? c->tag : "?", c != NULL ? strlen(c->tag) : 1,
                      LMC_ESCAPE_SPACE);
    lmc_strbuf_puts(b, "(");
    if (v->u.ext != NULL)
        abbrev(b, v->u.ext, depth + 1);
    lmc_strbuf_puts(b, ")");
}

void lmc_trace_dump_args_text(lmc_strbuf *b, const lmc_trace_arg *args, size_t nargs)
{
    for (size_t i = 0; i < nargs; i++) {
        lmc_strbuf_append(b, " ", 1);
        lmc_escape_append(b, args[i].name, args[i].name_len, LMC_ESCAPE_SPACE);
        lmc_strbuf_append(b, "=", 1);
        lmc_strbuf v = LMC_STRBUF_INIT;
        abbrev(&v, &args[i].value, 0);
        if (v.oom) {
            b->oom = true;
        } else if (v.len > VALUE_MAX) {
            /* Cut on a character boundary: what abbrev wrote is ASCII or valid UTF-8. */
            size_t cut = VALUE_MAX - 2;
            while (cut > 0 && ((unsigned char)v.p[cut] & 0xc0) == 0x80)
                cut--;
            lmc_strbuf_append(b, v.p, cut);
            lmc_strbuf_append(b, "..", 2);
        } else {
            lmc_strbuf_append(b, v.p != NULL ? v.p : "", v.len);
        }
        free(v.p);
    }
}

/* The width of the OP column: the longest method of the op table. */
static int op_width(void)
{
    static int width;
    if (width == 0) {
        size_t plen = strlen(LMC_TRACE_QUALNAME_PREFIX), w = 1;
        for (int op = LMC_TRACE_OP_NONE + 1; op < LMC_TRACE_OP_COUNT_; op++) {
            size_t n = strlen(lmc_trace_op_qualname((lmc_trace_op)op)) - plen;
            w = n > w ? n : w;
        }
        width = (int)w;
    }
    return width;
}

/* Pad what was appended since start to the OP column's width. */
static void pad_op(lmc_strbuf *b, size_t start)
{
    size_t w = b->len - start, want = (size_t)op_width();
    lmc_strbuf_repeat(b, ' ', w < want ? want - w : 0);
}

/* The OP column: the short form, a foreign qualname in full, escaped; a marker by label. */
static void put_op(lmc_strbuf *b, const char *q, size_t len, const lmc_trace_marker *marker)
{
    size_t start = b->len;
    size_t mlen = 0;
    const char *m = lmc_trace_qualname_method(q, len, &mlen);
    if (marker != NULL)
        lmc_strbuf_printf(b, "[%s]", marker->label);
    else if (m != NULL)
        lmc_escape_append(b, m, mlen, LMC_ESCAPE_SPACE);
    else
        lmc_escape_append(b, q, len, LMC_ESCAPE_SPACE);
    pad_op(b, start);
}

static void text_record(lmc_strbuf *b, uint64_t index, const lmc_trace_record *rec,
                        const lmc_trace_marker *marker)
{
    char idx[24];
    snprintf(idx, sizeof(idx), "%" PRIu64, index);
    lmc_strbuf_printf(b, "%8s %13.6f ", marker != NULL ? "-" : idx, rec->t_mono);
    put_op(b, rec->qualname, rec->qualname_len, marker);
    lmc_strbuf_printf(b, " %5zu", lmc_trace_args_count_keys(rec->args, rec->nargs, NULL));
    lmc_trace_dump_args_text(b, rec->args, rec->nargs);
    lmc_strbuf_append(b, "\n", 1);
}

static void text_note(lmc_strbuf *b, const char *label, const char *what)
{
    lmc_strbuf_printf(b, "%8s %13s ", "-", "-");
    size_t start = b->len;
    lmc_strbuf_printf(b, "[%s]", label);
    pad_op(b, start);
    lmc_strbuf_printf(b, " %5s %s\n", "-", what);
}

/* "2026-01-01T00:00:00.250000Z", or "" when the time does not convert. */
static void iso_utc(double t, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!isfinite(t) || t < 0 || t > 253402300799.0)
        return;
    time_t s = (time_t)t;
    struct tm tm;
    if (gmtime_r(&s, &tm) == NULL)
        return;
    char day[32];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    int us = (int)lround((t - (double)s) * 1e6);
    if (us > 999999)
        us = 999999;
    snprintf(buf, len, "%s.%06dZ", day, us);
}

static void text_header(lmc_strbuf *b, const char *path, const lmc_trace_header *h)
{
    char wall[64];
    lmc_strbuf_puts(b, "# trace ");
    lmc_escape_append(b, path, strlen(path), 0);
    lmc_strbuf_printf(b, "\n# format_version %" PRId64 "  level ", h->format_version);
    lmc_escape_append(b, h->level, strlen(h->level), 0);
    lmc_strbuf_printf(b, "  trace_schema_version %" PRId64 "\n", h->trace_schema_version);
    iso_utc(h->t_wall_start, wall, sizeof(wall));
    lmc_strbuf_printf(b, "# t_mono_start %.6f  t_wall_start %.6f (%s)\n", h->t_mono_start,
                      h->t_wall_start, wall[0] ? wall : "?");
    lmc_strbuf_puts(b, "# sm_config_digest ");
    if (h->sm_config_digest[0] != '\0')
        lmc_escape_append(b, h->sm_config_digest, strlen(h->sm_config_digest), 0);
    else
        lmc_strbuf_puts(b, "(none)");
    lmc_strbuf_puts(b, "\n");
    for (size_t i = 0; i < h->n_meta; i++) {
        lmc_strbuf_puts(b, "# level_meta ");
        lmc_escape_append(b, h->meta_keys[i], strlen(h->meta_keys[i]), LMC_ESCAPE_SPACE);
        lmc_strbuf_puts(b, " ");
        lmc_escape_append(b, h->meta_values[i], strlen(h->meta_values[i]), 0);
        lmc_strbuf_puts(b, "\n");
    }
    lmc_strbuf_printf(b, "# %6s %13s %-*s %5s %s\n", "index", "t_mono", op_width(), "op", "keys",
                      "args");
}

/* ---------------------------------------------------------------------- */
/* JSON                                                                    */
/* ---------------------------------------------------------------------- */

static lmc_json *hex_json(const void *p, size_t n)
{
    char *hex = malloc(2 * n + 1);
    if (hex == NULL)
        return NULL;
    lmc_hex_encode(p, n, hex);
    lmc_json *j = lmc_json_stringn(hex, 2 * n);
    free(hex);
    return j;
}

/* Collects the first failure of a run of setters, so a builder checks once. */
static void set(lmc_json *obj, const char *key, lmc_json *v, bool *ok)
{
    if (lmc_json_object_set(obj, key, v) != LMC_OK)
        *ok = false;
}

static void append(lmc_json *arr, lmc_json *v, bool *ok)
{
    if (lmc_json_array_append(arr, v) != LMC_OK)
        *ok = false;
}

static lmc_json *done(lmc_json *j, bool ok)
{
    if (!ok) {
        lmc_json_free(j);
        return NULL;
    }
    return j;
}

static lmc_json *shape_json(const lmc_shape *s)
{
    lmc_json *a = lmc_json_array();
    bool ok = a != NULL;
    for (uint32_t i = 0; ok && i < s->ndim && i < LMC_SHAPE_MAX_DIMS; i++)
        append(a, lmc_json_int(s->dims[i]), &ok);
    return done(a, ok);
}

static lmc_json *u32_list_json(const uint32_t *p, size_t n)
{
    lmc_json *a = lmc_json_array();
    bool ok = a != NULL;
    for (size_t i = 0; ok && i < n; i++)
        append(a, lmc_json_int(p[i]), &ok);
    return done(a, ok);
}

static lmc_json *value_json(const lmc_tv *v, int depth);

static lmc_json *items_json(const lmc_tv *items, size_t n, int depth)
{
    lmc_json *a = lmc_json_array();
    bool ok = a != NULL;
    for (size_t i = 0; ok && i < n; i++)
        append(a, value_json(&items[i], depth + 1), &ok);
    return done(a, ok);
}

static lmc_json *key_json(const lmc_object_key *k)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    if (ok) {
        set(o, "chunk_hash", hex_json(k->chunk_hash, k->chunk_hash_len), &ok);
        set(o, "model_name", lmc_json_string(k->model_name ? k->model_name : ""), &ok);
        set(o, "kv_rank", lmc_json_int(k->kv_rank), &ok);
        set(o, "object_group_id", lmc_json_int(k->object_group_id), &ok);
        set(o, "cache_salt", lmc_json_string(k->cache_salt ? k->cache_salt : ""), &ok);
    }
    return done(o, ok);
}

static lmc_json *layout_json(const lmc_layout_desc *d)
{
    uint32_t n = d->count < LMC_LAYOUT_MAX_TENSORS ? d->count : LMC_LAYOUT_MAX_TENSORS;
    lmc_json *o = lmc_json_object(), *shapes = lmc_json_array(), *dtypes = lmc_json_array();
    bool ok = o != NULL && shapes != NULL && dtypes != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        append(shapes, shape_json(&d->shapes[i]), &ok);
        append(dtypes, lmc_json_string(lmc_dtype_name(d->dtypes[i])), &ok);
    }
    if (o == NULL) {
        lmc_json_free(shapes);
        lmc_json_free(dtypes);
        return NULL;
    }
    set(o, "shapes", shapes, &ok);
    set(o, "dtypes", dtypes, &ok);
    return done(o, ok);
}

static lmc_json *handle_json(const lmc_prefetch_handle *h)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    if (ok) {
        set(o, "prefetch_request_id", lmc_json_int(h->prefetch_request_id), &ok);
        set(o, "external_request_id",
            lmc_json_string(h->external_request_id ? h->external_request_id : ""), &ok);
        set(o, "l1_found_indices", u32_list_json(h->l1_found_indices, h->l1_found_count), &ok);
        set(o, "total_requested_keys", lmc_json_int((int64_t)h->total_requested_keys), &ok);
        set(o, "submit_time", lmc_json_float(h->submit_time), &ok);
        set(o, "l2_orig_indices", u32_list_json(h->l2_orig_indices, h->l2_orig_count), &ok);
    }
    return done(o, ok);
}

/* A map key as an object member name: a string as it is, anything else in its repr. */
static char *member_name(const lmc_tv *k)
{
    if (k->kind == LMC_TV_STR)
        return strndup(k->u.s.ptr != NULL ? k->u.s.ptr : "", k->u.s.ptr != NULL ? k->u.s.len : 0);
    size_t n = lmc_tv_format(k, NULL, 0);
    char *s = malloc(n + 1);
    if (s != NULL)
        lmc_tv_format(k, s, n + 1);
    return s;
}

static lmc_json *map_json(const lmc_tv *v, int depth)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < v->u.map.n; i++) {
        char *name = member_name(&v->u.map.keys[i]);
        if (name == NULL) {
            ok = false;
            break;
        }
        set(o, name, value_json(&v->u.map.vals[i], depth + 1), &ok);
        free(name);
    }
    return done(o, ok);
}

static lmc_json *value_json(const lmc_tv *v, int depth)
{
    if (depth >= 64)
        return lmc_json_null();
    switch ((lmc_tv_kind)v->kind) {
    case LMC_TV_NIL:
        return lmc_json_null();
    case LMC_TV_BOOL:
        return lmc_json_bool(v->u.b);
    case LMC_TV_INT:
        return lmc_json_int(v->u.i);
    case LMC_TV_UINT: {
        /* Above INT64_MAX: JSON numbers that large lose digits in most readers, so a string. */
        char d[24];
        snprintf(d, sizeof(d), "%" PRIu64, v->u.u);
        return lmc_json_string(d);
    }
    case LMC_TV_FLOAT:
        return lmc_json_float(v->u.f);
    case LMC_TV_STR:
        return lmc_json_stringn(v->u.s.ptr != NULL ? v->u.s.ptr : "",
                                v->u.s.ptr != NULL ? v->u.s.len : 0);
    case LMC_TV_BIN:
        return hex_json(v->u.s.ptr, v->u.s.ptr != NULL ? v->u.s.len : 0);
    case LMC_TV_LIST:
    case LMC_TV_TUPLE:
    case LMC_TV_SET:
        return items_json(v->u.list.items, v->u.list.n, depth);
    case LMC_TV_MAP:
        return map_json(v, depth);
    case LMC_TV_OBJECT_KEY:
        return v->u.key != NULL ? key_json(v->u.key) : lmc_json_null();
    case LMC_TV_LAYOUT:
        return v->u.layout != NULL ? layout_json(v->u.layout) : lmc_json_null();
    case LMC_TV_DTYPE:
        return lmc_json_string(lmc_dtype_name(v->u.dtype));
    case LMC_TV_SIZE:
        return v->u.size != NULL ? shape_json(v->u.size) : lmc_json_array();
    case LMC_TV_TRIM_POLICY: {
        const char *name = lmc_trim_policy_name(v->u.trim);
        return name != NULL ? lmc_json_string(name) : lmc_json_int((int64_t)v->u.trim);
    }
    case LMC_TV_PREFETCH_HANDLE:
        return v->u.handle != NULL ? handle_json(v->u.handle) : lmc_json_null();
    case LMC_TV_BUILTIN_COUNT_:
    case LMC_TV_KIND_MAX:
        break;
    }
    /* A registered kind: its payload. */
    return v->u.ext != NULL ? value_json(v->u.ext, depth + 1) : lmc_json_null();
}

lmc_json *lmc_trace_dump_value_json(const lmc_tv *v)
{
    return value_json(v, 0);
}

static lmc_json *args_json(const lmc_trace_arg *args, size_t nargs)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < nargs; i++)
        set(o, args[i].name, value_json(&args[i].value, 1), &ok);
    return done(o, ok);
}

static lmc_json *json_record(uint64_t index, const lmc_trace_record *rec,
                             const lmc_trace_marker *marker)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    size_t mlen = 0;
    const char *m = lmc_trace_qualname_method(rec->qualname, rec->qualname_len, &mlen);
    set(o, "type", lmc_json_string(marker != NULL ? "marker" : "record"), &ok);
    if (marker != NULL)
        set(o, "marker", lmc_json_string(marker->label), &ok);
    else
        set(o, "index", lmc_json_int((int64_t)index), &ok);
    set(o, "offset", lmc_json_int((int64_t)rec->offset), &ok);
    set(o, "t_mono", lmc_json_float(rec->t_mono), &ok);
    set(o, "t_wall", lmc_json_float(rec->t_wall), &ok);
    set(o, "qualname", lmc_json_stringn(rec->qualname, rec->qualname_len), &ok);
    set(o, "op", m != NULL ? lmc_json_stringn(m, mlen) : lmc_json_null(), &ok);
    set(o, "n_keys", lmc_json_int((int64_t)lmc_trace_args_count_keys(rec->args, rec->nargs, NULL)),
        &ok);
    set(o, "args", args_json(rec->args, rec->nargs), &ok);
    return done(o, ok);
}

static lmc_json *json_header(const char *path, const lmc_trace_header *h)
{
    lmc_json *o = lmc_json_object(), *meta = lmc_json_object();
    bool ok = o != NULL && meta != NULL;
    if (o == NULL) {
        lmc_json_free(meta);
        return NULL;
    }
    for (size_t i = 0; ok && i < h->n_meta; i++)
        set(meta, h->meta_keys[i], lmc_json_string(h->meta_values[i]), &ok);
    set(o, "type", lmc_json_string("header"), &ok);
    set(o, "file", lmc_json_string(path), &ok);
    set(o, "format_version", lmc_json_int(h->format_version), &ok);
    set(o, "level", lmc_json_string(h->level), &ok);
    set(o, "trace_schema_version", lmc_json_int(h->trace_schema_version), &ok);
    set(o, "t_mono_start", lmc_json_float(h->t_mono_start), &ok);
    set(o, "t_wall_start", lmc_json_float(h->t_wall_start), &ok);
    set(o, "sm_config_json", lmc_json_string(h->sm_config_json), &ok);
    set(o, "sm_config_digest", lmc_json_string(h->sm_config_digest), &ok);
    set(o, "level_meta", meta, &ok);
    return done(o, ok);
}

/* {"type": "malformed", "count": N, "before_offset": P or null} */
static lmc_json *json_note(const char *type, uint64_t count, int64_t before)
{
    lmc_json *o = lmc_json_object();
    bool ok = o != NULL;
    if (!ok)
        return NULL;
    set(o, "type", lmc_json_string(type), &ok);
    if (count > 0) {
        set(o, "count", lmc_json_int((int64_t)count), &ok);
        set(o, "before_offset", before >= 0 ? lmc_json_int(before) : lmc_json_null(), &ok);
    }
    return done(o, ok);
}

/* ---------------------------------------------------------------------- */
/* The listing                                                             */
/* ---------------------------------------------------------------------- */

typedef struct dumper {
    const lmc_trace_dump_options *opt;
    FILE *out;
    lmc_strbuf line;
    bool failed; /* out of memory or a write error; the listing stops */
} dumper;

/* Append j's text (and free j) as one line; a NULL j means memory ran out. */
static void put_json(dumper *d, lmc_json *j)
{
    char *text = j != NULL ? lmc_json_dumps_line(j, 0, -1) : NULL;
    lmc_json_free(j);
    if (text == NULL) {
        d->line.oom = true;
        return;
    }
    lmc_strbuf_puts(&d->line, text);
    free(text);
}

/* Write the line buffer out. */
static void flush_line(dumper *d)
{
    if (d->line.oom ||
        (d->line.len > 0 && fwrite(d->line.p, 1, d->line.len, d->out) != d->line.len))
        d->failed = true;
    d->line.len = 0;
}

static void note_malformed(dumper *d, uint64_t n, int64_t before)
{
    if (d->opt->format == LMC_TRACE_DUMP_JSONL) {
        put_json(d, json_note("malformed", n, before));
    } else {
        char what[96];
        if (before >= 0)
            snprintf(what, sizeof(what), "%" PRIu64 " record(s) skipped before offset %" PRId64, n,
                     before);
        else
            snprintf(what, sizeof(what), "%" PRIu64 " record(s) skipped at the end", n);
        text_note(&d->line, "malformed", what);
    }
    flush_line(d);
}

lmc_status lmc_trace_dump_file(const char *path, const lmc_trace_dump_options *opt, FILE *out,
                               lmc_trace_dump_counts *counts, lmc_error *err)
{
    lmc_trace_dump_counts local;
    if (counts == NULL)
        counts = &local;
    memset(counts, 0, sizeof(*counts));
    lmc_trace_reader *rd = NULL;
    lmc_status st = lmc_trace_reader_open(path, &rd, err);
    if (st != LMC_OK)
        return st;
    dumper d = {.opt = opt, .out = out, .line = LMC_STRBUF_INIT};
    bool jsonl = opt->format == LMC_TRACE_DUMP_JSONL;
    if (opt->header) {
        const lmc_trace_header *h = lmc_trace_reader_header(rd);
        if (jsonl)
            put_json(&d, json_header(path, h));
        else
            text_header(&d.line, path, h);
        flush_line(&d);
    }
    uint64_t index = 0, malformed_seen = 0;
    lmc_trace_record rec;
    while (!d.failed && (opt->limit == 0 || counts->shown < opt->limit)) {
        st = lmc_trace_reader_next(rd, &rec);
        uint64_t malformed = lmc_trace_reader_malformed(rd);
        if (malformed > malformed_seen) {
            note_malformed(&d, malformed - malformed_seen, st == LMC_OK ? (int64_t)rec.offset : -1);
            malformed_seen = malformed;
        }
        if (st != LMC_OK)
            break;
        const lmc_trace_marker *marker = lmc_trace_marker_find(rec.qualname, rec.qualname_len);
        if (marker == NULL) {
            index++;
            counts->records++;
        }
        if (!lmc_trace_filter_match(&opt->filter, &rec))
            continue;
        if (jsonl)
            put_json(&d, json_record(index, &rec, marker));
        else
            text_record(&d.line, index, &rec, marker);
        flush_line(&d);
        counts->shown++;
    }
    counts->malformed = lmc_trace_reader_malformed(rd);
    counts->truncated = lmc_trace_reader_truncated(rd);
    if (counts->truncated && !d.failed) {
        if (jsonl)
            put_json(&d, json_note("truncated", 0, -1));
        else
            text_note(&d.line, "truncated", "the file ends in a cut record");
        flush_line(&d);
    }
    if (d.line.oom)
        st = lmc_error_set(err, LMC_ERR_NOMEM, "out of memory");
    else if (d.failed)
        st = lmc_error_set(err, LMC_ERR_IO, "cannot write the listing: %s", strerror(errno));
    else if (st == LMC_ERR_IO)
        st = lmc_error_set(err, LMC_ERR_IO, "cannot read '%s'", path);
    else
        st = LMC_OK;
    free(d.line.p);
    lmc_trace_reader_close(rd);
    return st;
}
