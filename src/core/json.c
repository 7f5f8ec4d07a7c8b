/*
 * json.c -- the lmc_json value tree, its Python-compatible emitter and the
 * jansson-based parser (see json.h).
 *
 * Owns: every lmc_json node and, through it, its strings, array items and
 * object members. Objects keep insertion order; lookups are linear because
 * the objects this project builds (configs, summaries) hold a few dozen keys
 * at most.
 *
 * Threads: none and no locks; a value belongs to one thread at a time. The
 * emitter keeps no state between calls.
 *
 * The emitter mirrors CPython's json module with ensure_ascii=True and
 * allow_nan=True. Strings are UTF-8 byte strings here, so it decodes them
 * strictly (no overlong forms, no UTF-16 surrogates, nothing above
 * U+10FFFF); a byte that does not start a valid sequence has no Python
 * equivalent and is emitted on its own as "\u00XX" of the byte value, so
 * the output is always valid ASCII JSON (reading it back gives U+00XX, not
 * the raw byte).
 */
#include "core/json.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"

typedef struct lmc_json_member {
    char *key; /* NUL-terminated; keys never contain NUL */
    size_t key_len;
    lmc_json *value;
} lmc_json_member;

struct lmc_json {
    lmc_json_type type;
    union {
        bool b;
        int64_t i;
        double d;
        struct {
            char *s; /* always NUL-terminated, may also hold NUL inside */
            size_t len;
        } str;
        struct {
            lmc_json **items;
            size_t len, cap;
        } arr;
        struct {
            lmc_json_member *items;
            size_t len, cap;
        } obj;
    } u;
};

/* ------------------------------------------------------------------------ */
/* Construction                                                             */
/* ------------------------------------------------------------------------ */

static lmc_json *json_new(lmc_json_type type)
{
    lmc_json *v = calloc(1, sizeof(*v));
    if (v != NULL)
        v->type = type;
    return v;
}

lmc_json *lmc_json_null(void)
{
    return json_new(LMC_JSON_NULL);
}

lmc_json *lmc_json_bool(bool b)
{
    lmc_json *v = json_new(LMC_JSON_BOOL);
    if (v != NULL)
        v->u.b = b;
    return v;
}

lmc_json *lmc_json_int(int64_t i)
{
    lmc_json *v = json_new(LMC_JSON_INT);
    if (v != NULL)
        v->u.i = i;
    return v;
}

lmc_json *lmc_json_float(double d)
{
    lmc_json *v = json_new(LMC_JSON_FLOAT);
    if (v != NULL)
        v->u.d = d;
    return v;
}

/* s must not be NULL; a NULL s yields NULL like an allocation failure. */
lmc_json *lmc_json_string(const char *s)
{
    if (s == NULL)
        return NULL;
    return lmc_json_stringn(s, strlen(s));
}

lmc_json *lmc_json_stringn(const char *s, size_t n)
{
    if (s == NULL && n > 0)
        return NULL;
    if (n == SIZE_MAX)
        return NULL;
    lmc_json *v = json_new(LMC_JSON_STRING);
    if (v == NULL)
        return NULL;
    v->u.str.s = malloc(n + 1);
    if (v->u.str.s == NULL) {
        free(v);
        return NULL;
    }
    if (n > 0)
        memcpy(v->u.str.s, s, n);
    v->u.str.s[n] = '\0';
    v->u.str.len = n;
    return v;
}

lmc_json *lmc_json_array(void)
{
    return json_new(LMC_JSON_ARRAY);
}

lmc_json *lmc_json_object(void)
{
    return json_new(LMC_JSON_OBJECT);
}

void lmc_json_free(lmc_json *v)
{
    if (v == NULL)
        return;
    switch (v->type) {
    case LMC_JSON_STRING:
        free(v->u.str.s);
        break;
    case LMC_JSON_ARRAY:
        for (size_t i = 0; i < v->u.arr.len; i++)
            lmc_json_free(v->u.arr.items[i]);
        free(v->u.arr.items);
        break;
    case LMC_JSON_OBJECT:
        for (size_t i = 0; i < v->u.obj.len; i++) {
            free(v->u.obj.items[i].key);
            lmc_json_free(v->u.obj.items[i].value);
        }
        free(v->u.obj.items);
        break;
    default:
        break;
    }
    free(v);
}

/* Grow *items (elem bytes each) so that it holds at least len + 1 entries. */
static bool grow(void **items, size_t *cap, size_t len, size_t elem)
{
    if (len < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 4;
    if (ncap > SIZE_MAX / elem)
        return false;
    void *p = realloc(*items, ncap * elem);
    if (p == NULL)
        return false;
    *items = p;
    *cap = ncap;
    return true;
}

/*
 * A NULL child is what a nested constructor returns when memory runs out,
 * so it reports LMC_ERR_NOMEM; a NULL or mistyped container is a caller bug
 * (LMC_ERR_INVALID). Either way the child is freed: ownership was taken.
 */
lmc_status lmc_json_array_append(lmc_json *arr, lmc_json *v)
{
    if (v == NULL)
        return LMC_ERR_NOMEM;
    if (arr == v) /* would be a cycle; arr stays the caller's */
        return LMC_ERR_INVALID;
    if (arr == NULL || arr->type != LMC_JSON_ARRAY) {
        lmc_json_free(v);
        return LMC_ERR_INVALID;
    }
    if (!grow((void **)&arr->u.arr.items, &arr->u.arr.cap, arr->u.arr.len,
              sizeof(arr->u.arr.items[0]))) {
        lmc_json_free(v);
        return LMC_ERR_NOMEM;
    }
    arr->u.arr.items[arr->u.arr.len++] = v;
    return LMC_OK;
}

static lmc_json_member *object_find(const lmc_json *obj, const char *key, size_t key_len)
{
    for (size_t i = 0; i < obj->u.obj.len; i++) {
        lmc_json_member *m = &obj->u.obj.items[i];
        if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0)
            return m;
    }
    return NULL;
}

lmc_status lmc_json_object_set(lmc_json *obj, const char *key, lmc_json *v)
{
    if (v == NULL)
        return LMC_ERR_NOMEM;
    if (obj == v) /* would be a cycle; obj stays the caller's */
        return LMC_ERR_INVALID;
    if (obj == NULL || obj->type != LMC_JSON_OBJECT || key == NULL) {
        lmc_json_free(v);
        return LMC_ERR_INVALID;
    }
    size_t key_len = strlen(key);
    lmc_json_member *m = object_find(obj, key, key_len);
    if (m != NULL) {
        if (m->value != v) {
            lmc_json_free(m->value);
            m->value = v;
        }
        return LMC_OK;
    }
    char *kcopy = malloc(key_len + 1);
    if (kcopy == NULL)
        goto fail;
    memcpy(kcopy, key, key_len + 1);
    if (!grow((void **)&obj->u.obj.items, &obj->u.obj.cap, obj->u.obj.len,
              sizeof(obj->u.obj.items[0])))
        goto fail;
    obj->u.obj.items[obj->u.obj.len++] = (lmc_json_member){kcopy, key_len, v};
    return LMC_OK;

fail:
    free(kcopy);
    lmc_json_free(v);
    return LMC_ERR_NOMEM;
}

/* ------------------------------------------------------------------------ */
/* Access                                                                   */
/* ------------------------------------------------------------------------ */

lmc_json_type lmc_json_type_of(const lmc_json *v)
{
    return v != NULL ? v->type : LMC_JSON_NULL;
}

bool lmc_json_get_bool(const lmc_json *v)
{
    return v != NULL && v->type == LMC_JSON_BOOL && v->u.b;
}

int64_t lmc_json_get_int(const lmc_json *v)
{
    return v != NULL && v->type == LMC_JSON_INT ? v->u.i : 0;
}

double lmc_json_get_number(const lmc_json *v)
{
    if (v == NULL)
        return 0.0;
    if (v->type == LMC_JSON_INT)
        return (double)v->u.i;
    if (v->type == LMC_JSON_FLOAT)
        return v->u.d;
    return 0.0;
}

const char *lmc_json_get_string(const lmc_json *v, size_t *len)
{
    if (v == NULL || v->type != LMC_JSON_STRING) {
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    if (len != NULL)
        *len = v->u.str.len;
    return v->u.str.s;
}

size_t lmc_json_size(const lmc_json *v)
{
    if (v == NULL)
        return 0;
    if (v->type == LMC_JSON_ARRAY)
        return v->u.arr.len;
    if (v->type == LMC_JSON_OBJECT)
        return v->u.obj.len;
    return 0;
}

lmc_json *lmc_json_array_at(const lmc_json *arr, size_t i)
{
    if (arr == NULL || arr->type != LMC_JSON_ARRAY || i >= arr->u.arr.len)
        return NULL;
    return arr->u.arr.items[i];
}

const char *lmc_json_object_key_at(const lmc_json *obj, size_t i)
{
    if (obj == NULL || obj->type != LMC_JSON_OBJECT || i >= obj->u.obj.len)
        return NULL;
    return obj->u.obj.items[i].key;
}

lmc_json *lmc_json_object_value_at(const lmc_json *obj, size_t i)
{
    if (obj == NULL || obj->type != LMC_JSON_OBJECT || i >= obj->u.obj.len)
        return NULL;
    return obj->u.obj.items[i].value;
}

lmc_json *lmc_json_object_get(const lmc_json *obj, const char *key)
{
    if (obj == NULL || obj->type != LMC_JSON_OBJECT || key == NULL)
        return NULL;
    lmc_json_member *m = object_find(obj, key, strlen(key));
    return m != NULL ? m->value : NULL;
}

lmc_json *lmc_json_copy(const lmc_json *v)
{
    switch (lmc_json_type_of(v)) {
    case LMC_JSON_NULL:
        return lmc_json_null();
    case LMC_JSON_BOOL:
        return lmc_json_bool(v->u.b);
    case LMC_JSON_INT:
        return lmc_json_int(v->u.i);
    case LMC_JSON_FLOAT:
        return lmc_json_float(v->u.d);
    case LMC_JSON_STRING:
        return lmc_json_stringn(v->u.str.s, v->u.str.len);
    case LMC_JSON_ARRAY: {
        lmc_json *arr = lmc_json_array();
        for (size_t i = 0; arr != NULL && i < v->u.arr.len; i++) {
            if (lmc_json_array_append(arr, lmc_json_copy(v->u.arr.items[i])) != LMC_OK) {
                lmc_json_free(arr);
                return NULL;
            }
        }
        return arr;
    }
    case LMC_JSON_OBJECT: {
        lmc_json *obj = lmc_json_object();
        for (size_t i = 0; obj != NULL && i < v->u.obj.len; i++) {
            const lmc_json_member *m = &v->u.obj.items[i];
            if (lmc_json_object_set(obj, m->key, lmc_json_copy(m->value)) != LMC_OK) {
                lmc_json_free(obj);
                return NULL;
            }
        }
        return obj;
    }
    }
    return NULL;
}

const char *lmc_json_type_name(lmc_json_type t)
{
    switch (t) {
    case LMC_JSON_NULL:
        return "null";
    case LMC_JSON_BOOL:
        return "bool";
    case LMC_JSON_INT:
        return "int";
    case LMC_JSON_FLOAT:
        return "float";
    case LMC_JSON_STRING:
        return "string";
    case LMC_JSON_ARRAY:
        return "array";
    case LMC_JSON_OBJECT:
        return "object";
    }
    return "unknown";
}

/* ------------------------------------------------------------------------ */
/* float.__repr__                                                           */
/* ------------------------------------------------------------------------ */

/*
 * Shortest decimal digits of a finite d > 0 that read back as d, with the
 * decimal point position: d ~= 0.<digits> * 10^decpt. Returns the digit
 * count (1..17).
 *
 * printf's %.*e gives the correctly rounded digits for each precision; the
 * first precision that round-trips is the shortest, except at a power of two
 * where the gap below d is half the gap above: there the correctly rounded
 * candidate can fall just outside the narrow lower half while its neighbour
 * on the other side of d still reads back as d. CPython's dtoa (mode 0)
 * returns that neighbour, so it is tried too before adding a digit.
 */
/* Split printf's "D.DDDe[+-]XX" (or "De[+-]XX") into digits and exponent. */
static int split_e_format(const char *tmp, char digits[18], int *exp10)
{
    int n = 0;
    const char *p = tmp;
    for (; *p != 'e' && n < 17; p++) {
        if (*p != '.')
            digits[n++] = *p;
    }
    digits[n] = '\0';
    *exp10 = atoi(p + 1);
    return n;
}

static int shortest_digits(double d, char digits[18], int *decpt)
{
    char tmp[40];
    int n = 0, exp10 = 0;
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec, d);
        n = split_e_format(tmp, digits, &exp10);
        double back = strtod(tmp, NULL);
        if (back != d) {
            /* Step the last digit one unit towards d (the other side). */
            char alt[18];
            memcpy(alt, digits, (size_t)n + 1);
            int alt_exp = exp10;
            if (back < d) {
                int k = n - 1;
                while (k >= 0 && alt[k] == '9')
                    alt[k--] = '0';
                if (k < 0) { /* 99..9 + 1 = 100..0: one more decade */
                    alt[0] = '1';
                    alt_exp++;
                } else {
                    alt[k]++;
                }
            } else {
                int k = n - 1;
                while (k >= 0 && alt[k] == '0')
                    alt[k--] = '9';
                if (k < 0) /* cannot happen: digits of d > 0 are not all zero */
                    continue;
                alt[k]--;
                if (alt[0] == '0') /* 10..0 - 1 = 09..9: a shorter form, seen already */
                    continue;
            }
            snprintf(tmp, sizeof(tmp), "%c.%se%d", alt[0], alt + 1, alt_exp);
            if (strtod(tmp, NULL) != d)
                continue;
            memcpy(digits, alt, (size_t)n + 1);
            exp10 = alt_exp;
        }
        break;
    }
    /* Reached with prec 16 at the latest: 17 significant digits always round-trip. */
    while (n > 1 && digits[n - 1] == '0')
        digits[--n] = '\0';
    *decpt = exp10 + 1;
    return n;
}

size_t lmc_json_format_float(double d, char *buf, size_t len)
{
    char out[40];
    size_t o = 0;
    if (isnan(d)) {
        strcpy(out, "NaN");
        o = 3;
    } else if (isinf(d)) {
        strcpy(out, d < 0 ? "-Infinity" : "Infinity");
        o = strlen(out);
    } else {
        if (signbit(d)) {
            out[o++] = '-';
            d = -d;
        }
        char digits[18];
        int decpt = 1;
        int n;
        if (d == 0.0) {
            digits[0] = '0';
            digits[1] = '\0';
            n = 1;
        } else {
            n = shortest_digits(d, digits, &decpt);
        }
        if (decpt > -4 && decpt <= 16) {
            /* Fixed notation, always with a fractional part. */
            if (decpt <= 0) {
                out[o++] = '0';
                out[o++] = '.';
                for (int i = 0; i < -decpt; i++)
                    out[o++] = '0';
                memcpy(out + o, digits, (size_t)n);
                o += (size_t)n;
            } else if (decpt >= n) {
                memcpy(out + o, digits, (size_t)n);
                o += (size_t)n;
                for (int i = n; i < decpt; i++)
                    out[o++] = '0';
                out[o++] = '.';
                out[o++] = '0';
            } else {
                memcpy(out + o, digits, (size_t)decpt);
                o += (size_t)decpt;
                out[o++] = '.';
                memcpy(out + o, digits + decpt, (size_t)(n - decpt));
                o += (size_t)(n - decpt);
            }
        } else {
            /* Scientific: d[.ddd]e[+-]XX, at least two exponent digits. */
            out[o++] = digits[0];
            if (n > 1) {
                out[o++] = '.';
                memcpy(out + o, digits + 1, (size_t)(n - 1));
                o += (size_t)(n - 1);
            }
            int e = decpt - 1;
            o += (size_t)snprintf(out + o, sizeof(out) - o, "e%c%02d", e < 0 ? '-' : '+',
                                  e < 0 ? -e : e);
        }
        out[o] = '\0';
    }
    if (buf != NULL && len > 0) {
        size_t c = o < len - 1 ? o : len - 1;
        memcpy(buf, out, c);
        buf[c] = '\0';
    }
    return o;
}

/* ------------------------------------------------------------------------ */
/* Emitter                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom; /* sticky: once set, every append is a no-op */
} sbuf;

static bool sbuf_reserve(sbuf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + extra + 1; /* room for the final NUL */
    if (need <= b->cap)
        return true;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    char *np = realloc(b->p, ncap);
    if (np == NULL) {
        b->oom = true;
        return false;
    }
    b->p = np;
    b->cap = ncap;
    return true;
}

static void sbuf_put(sbuf *b, const char *s, size_t n)
{
    if (!sbuf_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sbuf_putc(sbuf *b, char c)
{
    if (!sbuf_reserve(b, 1))
        return;
    b->p[b->len++] = c;
}

static void sbuf_put_u16_escape(sbuf *b, unsigned u)
{
    static const char hex[] = "0123456789abcdef";
    char e[6] = {'\\',        'u', hex[(u >> 12) & 0xf], hex[(u >> 8) & 0xf], hex[(u >> 4) & 0xf],
                 hex[u & 0xf]};
    sbuf_put(b, e, sizeof(e));
}

/* The two-character escapes json.dumps uses; 0 when c has none. */
static char short_escape(unsigned char c)
{
    switch (c) {
    case '"':
        return '"';
    case '\\':
        return '\\';
    case '\n':
        return 'n';
    case '\r':
        return 'r';
    case '\t':
        return 't';
    case '\b':
        return 'b';
    case '\f':
        return 'f';
    default:
        return 0;
    }
}

static void emit_string(sbuf *b, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    sbuf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        /* Copy the longest run that needs no escaping in one go. */
        size_t run = i;
        while (run < n && u[run] >= 0x20 && u[run] <= 0x7e && u[run] != '"' && u[run] != '\\')
            run++;
        if (run > i) {
            sbuf_put(b, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = u[i];
        char esc = short_escape(c);
        if (esc != 0) {
            char two[2] = {'\\', esc};
            sbuf_put(b, two, 2);
            i++;
            continue;
        }
        uint32_t cp;
        size_t used = lmc_utf8_decode(u + i, n - i, &cp);
        if (used == 0) {
            /* Invalid UTF-8: keep the byte as U+00XX (see the file comment). */
            sbuf_put_u16_escape(b, c);
            i++;
        } else if (cp >= 0x10000) {
            cp -= 0x10000;
            sbuf_put_u16_escape(b, 0xd800 | (cp >> 10));
            sbuf_put_u16_escape(b, 0xdc00 | (cp & 0x3ff));
            i += used;
        } else {
            sbuf_put_u16_escape(b, cp);
            i += used;
        }
    }
    sbuf_putc(b, '"');
}

typedef struct emitter {
    sbuf out;
    bool sort_keys;
    int indent; /* < 0: None */
} emitter;

static void emit_newline_indent(emitter *e, int level)
{
    sbuf_putc(&e->out, '\n');
    size_t spaces = (size_t)e->indent * (size_t)level;
    if (!sbuf_reserve(&e->out, spaces))
        return;
    memset(e->out.p + e->out.len, ' ', spaces);
    e->out.len += spaces;
}

/* After each item but the last: ", " without an indent, "," + newline with one. */
static void emit_item_separator(emitter *e, int level)
{
    if (e->indent < 0) {
        sbuf_put(&e->out, ", ", 2);
    } else {
        sbuf_putc(&e->out, ',');
        emit_newline_indent(e, level);
    }
}

static int member_cmp(const void *a, const void *b)
{
    const lmc_json_member *x = *(const lmc_json_member *const *)a;
    const lmc_json_member *y = *(const lmc_json_member *const *)b;
    /* Bytewise order of valid UTF-8 is code-point order, Python's str order. */
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static void emit_value(emitter *e, const lmc_json *v, int level);

static void emit_array(emitter *e, const lmc_json *v, int level)
{
    size_t n = v->u.arr.len;
    if (n == 0) {
        sbuf_put(&e->out, "[]", 2);
        return;
    }
    sbuf_putc(&e->out, '[');
    if (e->indent >= 0)
        emit_newline_indent(e, level + 1);
    for (size_t i = 0; i < n && !e->out.oom; i++) {
        if (i > 0)
            emit_item_separator(e, level + 1);
        emit_value(e, v->u.arr.items[i], level + 1);
    }
    if (e->indent >= 0)
        emit_newline_indent(e, level);
    sbuf_putc(&e->out, ']');
}

static void emit_object(emitter *e, const lmc_json *v, int level)
{
    size_t n = v->u.obj.len;
    if (n == 0) {
        sbuf_put(&e->out, "{}", 2);
        return;
    }
    const lmc_json_member **order = malloc(n * sizeof(*order));
    if (order == NULL) {
        e->out.oom = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &v->u.obj.items[i];
    if (e->sort_keys)
        qsort(order, n, sizeof(*order), member_cmp);

    sbuf_putc(&e->out, '{');
    if (e->indent >= 0)
        emit_newline_indent(e, level + 1);
    for (size_t i = 0; i < n && !e->out.oom; i++) {
        if (i > 0)
            emit_item_separator(e, level + 1);
        emit_string(&e->out, order[i]->key, order[i]->key_len);
        sbuf_put(&e->out, ": ", 2);
        emit_value(e, order[i]->value, level + 1);
    }
    if (e->indent >= 0)
        emit_newline_indent(e, level);
    sbuf_putc(&e->out, '}');
    free(order);
}

static void emit_value(emitter *e, const lmc_json *v, int level)
{
    char num[40];
    size_t n;
    switch (v->type) {
    case LMC_JSON_NULL:
        sbuf_put(&e->out, "null", 4);
        break;
    case LMC_JSON_BOOL:
        if (v->u.b)
            sbuf_put(&e->out, "true", 4);
        else
            sbuf_put(&e->out, "false", 5);
        break;
    case LMC_JSON_INT:
        n = (size_t)snprintf(num, sizeof(num), "%lld", (long long)v->u.i);
        sbuf_put(&e->out, num, n);
        break;
    case LMC_JSON_FLOAT:
        n = lmc_json_format_float(v->u.d, num, sizeof(num));
        sbuf_put(&e->out, num, n);
        break;
    case LMC_JSON_STRING:
        emit_string(&e->out, v->u.str.s, v->u.str.len);
        break;
    case LMC_JSON_ARRAY:
        emit_array(e, v, level);
        break;
    case LMC_JSON_OBJECT:
        emit_object(e, v, level);
        break;
    }
}

char *lmc_json_dumps(const lmc_json *v, unsigned flags, int indent, size_t *len_out)
{
    if (len_out != NULL)
        *len_out = 0;
    if (v == NULL)
        return NULL;
    emitter e = {.sort_keys = (flags & LMC_JSON_SORT_KEYS) != 0, .indent = indent};
    emit_value(&e, v, 0);
    if (!sbuf_reserve(&e.out, 0)) {
        free(e.out.p);
        return NULL;
    }
    e.out.p[e.out.len] = '\0';
    if (len_out != NULL)
        *len_out = e.out.len;
    return e.out.p;
}

char *lmc_json_dumps_line(const lmc_json *v, unsigned flags, int indent)
{
    size_t len = 0;
    char *text = lmc_json_dumps(v, flags, indent, &len);
    if (text == NULL)
        return NULL;
    char *out = realloc(text, len + 2);
    if (out == NULL) {
        free(text);
        return NULL;
    }
    out[len] = '\n';
    out[len + 1] = '\0';
    return out;
}

/* ------------------------------------------------------------------------ */
/* Parser (jansson)                                                         */
/* ------------------------------------------------------------------------ */

/* Convert a jansson tree; NULL when memory runs out. */
static lmc_json *from_jansson(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_NULL:
        return lmc_json_null();
    case JSON_TRUE:
        return lmc_json_bool(true);
    case JSON_FALSE:
        return lmc_json_bool(false);
    case JSON_INTEGER:
        return lmc_json_int((int64_t)json_integer_value(j));
    case JSON_REAL:
        return lmc_json_float(json_real_value(j));
    case JSON_STRING:
        return lmc_json_stringn(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        lmc_json *arr = lmc_json_array();
        if (arr == NULL)
            return NULL;
        for (size_t i = 0; i < json_array_size(j); i++) {
            if (lmc_json_array_append(arr, from_jansson(json_array_get(j, i))) != LMC_OK) {
                lmc_json_free(arr);
                return NULL;
            }
        }
        return arr;
    }
    case JSON_OBJECT: {
        lmc_json *obj = lmc_json_object();
        if (obj == NULL)
            return NULL;
        const char *key;
        json_t *val;
        /* jansson (>= 2.8) iterates objects in insertion order. */
        json_object_foreach((json_t *)j, key, val)
        {
            if (lmc_json_object_set(obj, key, from_jansson(val)) != LMC_OK) {
                lmc_json_free(obj);
                return NULL;
            }
        }
        return obj;
    }
    }
    return NULL;
}

/*
 * Besides the flags json.h names, JSON_ALLOW_NUL lets "\u0000" through in
 * string values (Python accepts it, and lmc_json strings carry a length).
 * jansson still refuses NUL in object keys, NaN/Infinity literals and
 * integers beyond int64; those are reported as LMC_ERR_FORMAT.
 */
lmc_status lmc_json_parse(const char *text, size_t len, lmc_json **out, lmc_error *err)
{
    if (out == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "JSON parse: no output pointer");
    *out = NULL;
    if (text == NULL && len > 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "JSON parse: no input text");
    json_error_t jerr;
    json_t *root = json_loadb(text != NULL ? text : "", len,
                              JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return lmc_error_set(err, LMC_ERR_NOMEM, "invalid JSON: out of memory");
        return lmc_error_set(err, LMC_ERR_FORMAT, "invalid JSON at line %d column %d: %s",
                             jerr.line, jerr.column, jerr.text);
    }
    lmc_json *v = from_jansson(root);
    json_decref(root);
    if (v == NULL)
        return lmc_error_set(err, LMC_ERR_NOMEM, "JSON parse: out of memory");
    *out = v;
    return LMC_OK;
}
