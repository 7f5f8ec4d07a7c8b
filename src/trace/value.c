/*
 * value.c -- the decode arena and the Python-style rendering of lmc_tv
 * values (see value.h).
 *
 * Owns: lmc_arena, a bump allocator over a list of malloc'd blocks. A
 * decoded record's values all come from one arena that is reset for the
 * next record; reset keeps the largest block of a normal size so that
 * steady-state decoding does not touch malloc at all, and frees the rest
 * (a record that needed hundreds of MiB does not keep them). Requests
 * larger than a quarter of the block size get a block of their own, linked
 * behind the current one, so one big list does not waste the rest of the
 * block small values are bumping in. An optional limit bounds the bytes the
 * blocks hold at once: the trace reader sets it per record, so a hostile
 * record cannot make decoding take more than a small multiple of its size.
 *
 * Also the repr() helpers that error messages use to quote paths, magics
 * and values the way LMCache (Python) prints them.
 *
 * Threads: none; an arena belongs to one thread, the formatters are pure.
 */
#include "trace/value.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/escape.h"
#include "core/strbuf.h"
#include "trace/codec.h"

/* ---------------------------------------------------------------------- */
/* Arena                                                                   */
/* ---------------------------------------------------------------------- */

#define ARENA_ALIGN 16
#define ARENA_DEFAULT_BLOCK (64u * 1024)
#define ARENA_MIN_BLOCK 256u

struct lmc_arena_block {
    lmc_arena_block *next;
    size_t cap;  /* usable bytes after the header */
    size_t used; /* bytes handed out */
};

/* The data starts at the first 16-byte boundary after the header. */
#define BLOCK_HDR ((sizeof(lmc_arena_block) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

static unsigned char *block_data(lmc_arena_block *b)
{
    return (unsigned char *)b + BLOCK_HDR;
}

void lmc_arena_init(lmc_arena *a, size_t block_size)
{
    a->head = NULL;
    a->limit = 0;
    a->held = 0;
    a->over_limit = false;
    if (block_size == 0)
        block_size = ARENA_DEFAULT_BLOCK;
    if (block_size < ARENA_MIN_BLOCK)
        block_size = ARENA_MIN_BLOCK;
    a->block_size = (block_size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

static lmc_arena_block *block_new(lmc_arena *a, size_t cap)
{
    if (cap > SIZE_MAX - BLOCK_HDR)
        return NULL;
    if (a->limit != 0 && (cap > a->limit || a->held > a->limit - cap)) {
        a->over_limit = true;
        return NULL;
    }
    lmc_arena_block *b = malloc(BLOCK_HDR + cap);
    if (b == NULL)
        return NULL;
    b->next = NULL;
    b->cap = cap;
    b->used = 0;
    a->held += cap;
    return b;
}

void lmc_arena_set_limit(lmc_arena *a, size_t limit)
{
    a->limit = limit;
}

void *lmc_arena_alloc(lmc_arena *a, size_t n)
{
    if (n > SIZE_MAX - (ARENA_ALIGN - 1) - BLOCK_HDR)
        return NULL;
    n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);

    lmc_arena_block *h = a->head;
    if (h != NULL && h->cap - h->used >= n) {
        void *p = block_data(h) + h->used;
        h->used += n;
        return p;
    }
    if (h != NULL && n > a->block_size / 4) {
        /* A big request: its own block, behind the head, which keeps serving. */
        lmc_arena_block *b = block_new(a, n);
        if (b == NULL)
            return NULL;
        b->used = n;
        b->next = h->next;
        h->next = b;
        return block_data(b);
    }
    lmc_arena_block *b = block_new(a, n > a->block_size ? n : a->block_size);
    if (b == NULL)
        return NULL;
    b->used = n;
    b->next = h;
    a->head = b;
    return block_data(b);
}

void lmc_arena_reset(lmc_arena *a)
{
    lmc_arena_block *keep = NULL;
    for (lmc_arena_block *b = a->head; b != NULL; b = b->next) {
        if (b->cap <= 4 * a->block_size && (keep == NULL || b->cap > keep->cap))
            keep = b;
    }
    lmc_arena_block *b = a->head;
    while (b != NULL) {
        lmc_arena_block *next = b->next;
        if (b != keep)
            free(b);
        b = next;
    }
    if (keep != NULL) {
        keep->used = 0;
        keep->next = NULL;
    }
    a->head = keep;
    a->held = keep != NULL ? keep->cap : 0;
    a->over_limit = false;
}

void lmc_arena_free(lmc_arena *a)
{
    lmc_arena_block *b = a->head;
    while (b != NULL) {
        lmc_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->held = 0;
}

/* ---------------------------------------------------------------------- */
/* Formatting                                                              */
/* ---------------------------------------------------------------------- */

/* A bounded writer that keeps counting past the end, like snprintf (core/strbuf.h). */
typedef lmc_fixbuf out;

static void put(out *o, const char *s, size_t n)
{
    lmc_fixbuf_append(o, s, n);
}

static void puts_(out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void putf(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        put(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static size_t finish(out *o)
{
    return lmc_fixbuf_finish(o);
}

/*
 * Python picks single quotes unless the text holds a single quote and no
 * double quote. The escapes are core/escape.h's (Python's); bytes also
 * escape everything >= 0x80.
 */
static void put_quoted(out *o, const unsigned char *s, size_t n, bool is_bytes)
{
    bool has_single = memchr(s, '\'', n) != NULL;
    bool has_double = memchr(s, '"', n) != NULL;
    char q = (has_single && !has_double) ? '"' : '\'';
    unsigned flags =
        (q == '"' ? LMC_ESCAPE_DQUOTE : LMC_ESCAPE_SQUOTE) | (is_bytes ? LMC_ESCAPE_BYTES : 0u);
    if (is_bytes)
        put(o, "b", 1);
    put(o, &q, 1);
    for (size_t i = 0; i < n;) {
        char unit[LMC_ESCAPE_UNIT_MAX];
        size_t used;
        size_t w = lmc_escape_unit((const char *)s + i, n - i, flags, unit, &used);
        put(o, unit, w);
        i += used;
    }
    put(o, &q, 1);
}

size_t lmc_repr_str(const char *s, size_t n, char *buf, size_t len)
{
    out o = {buf, len, 0};
    put_quoted(&o, (const unsigned char *)(s != NULL ? s : ""), s != NULL ? n : 0, false);
    return finish(&o);
}

size_t lmc_repr_bytes(const void *p, size_t n, char *buf, size_t len)
{
    out o = {buf, len, 0};
    put_quoted(&o, (const unsigned char *)(p != NULL ? p : ""), p != NULL ? n : 0, true);
    return finish(&o);
}

/*
 * Python's float repr: the shortest digit string that reads back as the
 * same double, positional when the decimal exponent is in [-4, 16) (always
 * with a fractional part, "100.0"), scientific otherwise ("1e+16", "1e-05").
 */
static void put_float(out *o, double f)
{
    if (isnan(f)) {
        puts_(o, "nan");
        return;
    }
    if (isinf(f)) {
        puts_(o, f < 0 ? "-inf" : "inf");
        return;
    }
    char sci[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof(sci), "%.*e", prec - 1, f);
        if (strtod(sci, NULL) == f)
            break;
    }
    /* sci is "[-]d[.ddd]e[+-]XX": split into sign, digits and exponent. */
    const char *p = sci;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p != 'e' && *p != '\0'; p++) {
        if (*p >= '0' && *p <= '9' && nd < sizeof(digits) - 1)
            digits[nd++] = *p;
    }
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';

    if (neg)
        put(o, "-", 1);
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            put(o, "0.", 2);
            for (int i = 0; i < -exp - 1; i++)
                put(o, "0", 1);
            put(o, digits, nd);
        } else if ((size_t)exp + 1 >= nd) {
            put(o, digits, nd);
            for (size_t i = nd; i < (size_t)exp + 1; i++)
                put(o, "0", 1);
            put(o, ".0", 2);
        } else {
            put(o, digits, (size_t)exp + 1);
            put(o, ".", 1);
            put(o, digits + exp + 1, nd - (size_t)exp - 1);
        }
    } else {
        put(o, digits, 1);
        if (nd > 1) {
            put(o, ".", 1);
            put(o, digits + 1, nd - 1);
        }
        putf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

size_t lmc_repr_float(double f, char *buf, size_t len)
{
    out o = {buf, len, 0};
    put_float(&o, f);
    return finish(&o);
}

#define FORMAT_MAX_DEPTH 64

static void put_tv(out *o, const lmc_tv *v, int depth);

static void put_items(out *o, const lmc_tv *items, size_t n, int depth)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            put(o, ", ", 2);
        put_tv(o, &items[i], depth);
    }
}

static void put_shape_list(out *o, const lmc_shape *s)
{
    put(o, "[", 1);
    for (uint32_t i = 0; i < s->ndim && i < LMC_SHAPE_MAX_DIMS; i++)
        putf(o, i > 0 ? ", %" PRId64 : "%" PRId64, s->dims[i]);
    put(o, "]", 1);
}

static void put_u32_list(out *o, const uint32_t *p, size_t n)
{
    put(o, "[", 1);
    for (size_t i = 0; i < n; i++)
        putf(o, i > 0 ? ", %" PRIu32 : "%" PRIu32, p[i]);
    put(o, "]", 1);
}

static void put_key(out *o, const lmc_object_key *k)
{
    char tmp[256];
    size_t want = lmc_object_key_format(k, tmp, sizeof(tmp));
    if (want < sizeof(tmp)) {
        put(o, tmp, want);
        return;
    }
    char *big = malloc(want + 1);
    if (big == NULL) {
        put(o, tmp, sizeof(tmp) - 1);
        return;
    }
    lmc_object_key_format(k, big, want + 1);
    put(o, big, want);
    free(big);
}

static void put_layout(out *o, const lmc_layout_desc *d)
{
    uint32_t n = d->count < LMC_LAYOUT_MAX_TENSORS ? d->count : LMC_LAYOUT_MAX_TENSORS;
    puts_(o, "MemoryLayoutDesc(shapes=[");
    for (uint32_t i = 0; i < n; i++) {
        puts_(o, i > 0 ? ", torch.Size(" : "torch.Size(");
        put_shape_list(o, &d->shapes[i]);
        put(o, ")", 1);
    }
    puts_(o, "], dtypes=[");
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0)
            put(o, ", ", 2);
        puts_(o, lmc_dtype_name(d->dtypes[i]));
    }
    puts_(o, "])");
}

static void put_handle(out *o, const lmc_prefetch_handle *h)
{
    putf(o, "PrefetchHandle(prefetch_request_id=%" PRId64 ", external_request_id=",
         h->prefetch_request_id);
    const char *ext = h->external_request_id != NULL ? h->external_request_id : "";
    put_quoted(o, (const unsigned char *)ext, strlen(ext), false);
    puts_(o, ", l1_found_indices=");
    put_u32_list(o, h->l1_found_indices, h->l1_found_count);
    putf(o, ", total_requested_keys=%zu, submit_time=", h->total_requested_keys);
    put_float(o, h->submit_time);
    puts_(o, ", l2_orig_indices=");
    put_u32_list(o, h->l2_orig_indices, h->l2_orig_count);
    put(o, ")", 1);
}

static void put_tv(out *o, const lmc_tv *v, int depth)
{
    if (depth >= FORMAT_MAX_DEPTH) {
        put(o, "...", 3);
        return;
    }
    depth++;
    switch ((lmc_tv_kind)v->kind) {
    case LMC_TV_NIL:
        puts_(o, "None");
        return;
    case LMC_TV_BOOL:
        puts_(o, v->u.b ? "True" : "False");
        return;
    case LMC_TV_INT:
        putf(o, "%" PRId64, v->u.i);
        return;
    case LMC_TV_UINT:
        putf(o, "%" PRIu64, v->u.u);
        return;
    case LMC_TV_FLOAT:
        put_float(o, v->u.f);
        return;
    case LMC_TV_STR:
        put_quoted(o, (const unsigned char *)(v->u.s.ptr ? v->u.s.ptr : ""),
                   v->u.s.ptr ? v->u.s.len : 0, false);
        return;
    case LMC_TV_BIN:
        put_quoted(o, (const unsigned char *)(v->u.s.ptr ? v->u.s.ptr : ""),
                   v->u.s.ptr ? v->u.s.len : 0, true);
        return;
    case LMC_TV_LIST:
        put(o, "[", 1);
        put_items(o, v->u.list.items, v->u.list.n, depth);
        put(o, "]", 1);
        return;
    case LMC_TV_TUPLE:
        put(o, "(", 1);
        put_items(o, v->u.list.items, v->u.list.n, depth);
        put(o, v->u.list.n == 1 ? ",)" : ")", v->u.list.n == 1 ? 2 : 1);
        return;
    case LMC_TV_SET:
        if (v->u.list.n == 0) {
            puts_(o, "set()");
            return;
        }
        put(o, "{", 1);
        put_items(o, v->u.list.items, v->u.list.n, depth);
        put(o, "}", 1);
        return;
    case LMC_TV_MAP:
        put(o, "{", 1);
        for (size_t i = 0; i < v->u.map.n; i++) {
            if (i > 0)
                put(o, ", ", 2);
            put_tv(o, &v->u.map.keys[i], depth);
            put(o, ": ", 2);
            put_tv(o, &v->u.map.vals[i], depth);
        }
        put(o, "}", 1);
        return;
    case LMC_TV_OBJECT_KEY:
        puts_(o, "ObjectKey(");
        if (v->u.key != NULL)
            put_key(o, v->u.key);
        put(o, ")", 1);
        return;
    case LMC_TV_LAYOUT:
        if (v->u.layout != NULL)
            put_layout(o, v->u.layout);
        else
            puts_(o, "MemoryLayoutDesc()");
        return;
    case LMC_TV_DTYPE:
        puts_(o, lmc_dtype_name(v->u.dtype));
        return;
    case LMC_TV_SIZE:
        puts_(o, "torch.Size(");
        if (v->u.size != NULL)
            put_shape_list(o, v->u.size);
        else
            puts_(o, "[]");
        put(o, ")", 1);
        return;
    case LMC_TV_TRIM_POLICY: {
        const char *name = lmc_trim_policy_name(v->u.trim);
        if (name != NULL)
            putf(o, "TrimPolicy.%s", name);
        else
            putf(o, "TrimPolicy(%d)", (int)v->u.trim);
        return;
    }
    case LMC_TV_PREFETCH_HANDLE:
        if (v->u.handle != NULL)
            put_handle(o, v->u.handle);
        else
            puts_(o, "PrefetchHandle()");
        return;
    case LMC_TV_BUILTIN_COUNT_:
    case LMC_TV_KIND_MAX:
        break;
    }
    /* A registered extra kind: "<Name>(<payload>)". */
    const lmc_codec *c = lmc_codec_for_kind(v->kind);
    if (c != NULL)
        puts_(o, c->name != NULL ? c->name : c->tag);
    else
        putf(o, "<kind %" PRIu32 ">", v->kind);
    put(o, "(", 1);
    if (v->u.ext != NULL)
        put_tv(o, v->u.ext, depth);
    put(o, ")", 1);
}

size_t lmc_tv_format(const lmc_tv *v, char *buf, size_t len)
{
    out o = {buf, len, 0};
    put_tv(&o, v, 0);
    return finish(&o);
}
