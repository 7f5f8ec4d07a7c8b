/*
 * validate.c -- msgspec's acceptance rules over a frame body (see
 * validate.h).
 *
 * Owns nothing and allocates nothing: it walks the bytes once with the
 * bounds-checked reader (core/mp_reader.h), keeping an explicit stack of
 * the open containers (at most LMC_MP_MAX_DEPTH), so no input can make it
 * recurse or allocate. Strings are checked as UTF-8 eight bytes at a time
 * while they are ASCII, which trace strings nearly always are.
 *
 * Threads: none; pure functions.
 */
#include "trace/validate.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"

/* datetime's range (years 1..9999) in Unix seconds, which msgspec's timestamps must fit. */
#define TS_MIN_SECONDS (-62135596800LL)
#define TS_MAX_SECONDS 253402300799LL
#define TS_MAX_NANOS 999999999u

static lmc_status fail_at(lmc_error *err, const char *what, const lmc_mp_reader *r,
                          const char *problem)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s: %s (at byte %zu)", what, problem,
                         lmc_mp_offset(r));
}

static bool str_valid(const lmc_mp_item *s)
{
    const unsigned char *p = (const unsigned char *)s->v.s.ptr;
    size_t n = s->v.s.len;
    if (n < 8) {
        /* Short strings (field names, most values): the common all-ASCII case in one pass. */
        unsigned char any = 0;
        for (size_t i = 0; i < n; i++)
            any |= p[i];
        if (any < 0x80)
            return true;
    }
    return lmc_utf8_valid(p, n);
}

/* An ext of type -1 as msgspec turns it into a datetime. */
static bool timestamp_valid(const lmc_mp_item *it)
{
    const uint8_t *d = (const uint8_t *)it->v.s.ptr;
    switch (it->v.s.len) {
    case 4:
        return true;
    case 8:
        return (lmc_get_be64(d) >> 34) <= TS_MAX_NANOS;
    case 12: {
        int64_t s = (int64_t)lmc_get_be64(d + 4);
        return lmc_get_be32(d) <= TS_MAX_NANOS && s >= TS_MIN_SECONDS && s <= TS_MAX_SECONDS;
    }
    default:
        return false;
    }
}

lmc_status lmc_trace_check_str(const lmc_mp_item *s, const char *what, const char *field,
                               lmc_error *err)
{
    if (str_valid(s))
        return LMC_OK;
    return lmc_error_set(err, LMC_ERR_FORMAT, "%s.%s: the str is not valid UTF-8", what, field);
}

/*
 * How many of the n items at r are keys in the codec's canonical layout,
 * checked as the general walk would check them (strs as UTF-8); r is past
 * them. The general walk takes over at the first other item: a list of keys
 * is most of every record, and this reads it a run of fixed bytes at a time.
 */
static uint32_t canonical_keys(lmc_mp_reader *r, uint32_t n)
{
    /*
     * The keys of one call nearly always differ only in their hash: what
     * follows the hash (model, rank, group, salt) is then the same bytes as
     * in the key checked before, so it needs no second look.
     */
    static const char hash_name[] = "\205\252chunk_hash";
    const uint8_t *tail = NULL; /* the last key's bytes after its hash */
    size_t tail_len = 0;
    uint32_t i = 0;
    for (; i < n; i++) {
        const uint8_t *at = r->p;
        if (tail != NULL && lmc_mp_take(r, LMC_TRACE_KEY_WRAP, LMC_TRACE_KEY_WRAP_LEN) &&
            lmc_mp_take(r, hash_name, sizeof(hash_name) - 1)) {
            lmc_mp_item h;
            if (lmc_mp_next(r, &h) == LMC_MP_OK && h.type == LMC_MP_BIN &&
                lmc_mp_take(r, tail, tail_len))
                continue;
        }
        r->p = at;
        lmc_trace_key_fields f;
        if (!lmc_mp_take(r, LMC_TRACE_KEY_WRAP, LMC_TRACE_KEY_WRAP_LEN) ||
            !lmc_trace_key_fields_in_order(r, &f) || !str_valid(&f.model) || !str_valid(&f.salt)) {
            r->p = at;
            break;
        }
        tail = (const uint8_t *)f.hash.v.s.ptr + f.hash.v.s.len;
        tail_len = (size_t)(r->p - tail);
    }
    return i;
}

/* One open container of the walk. */
typedef struct level {
    uint64_t left; /* values still to read in it (a map counts keys and values) */
    bool map;
    bool key; /* it is, or is inside, a map key */
} level;

lmc_status lmc_trace_check_any(lmc_mp_reader *r, unsigned depth, const char *what, lmc_error *err)
{
    level stack[LMC_MP_MAX_DEPTH];
    unsigned top = 0;
    level cur = {1, false, false}; /* the value itself */
    for (;;) {
        while (cur.left == 0) {
            if (top == 0)
                return LMC_OK;
            cur = stack[--top];
        }
        /* A map's values alternate key, value: the key comes when an even number is left. */
        bool in_key = cur.key || (cur.map && (cur.left & 1) == 0);
        cur.left--;
        const uint8_t *at = r->p;
        lmc_mp_item it;
        lmc_mp_result res = lmc_mp_next(r, &it);
        if (res != LMC_MP_OK)
            return lmc_mp_error_set(err, what, r, res);
        switch (it.type) {
        case LMC_MP_STR:
            if (!str_valid(&it)) {
                r->p = at;
                return fail_at(err, what, r, "a str is not valid UTF-8");
            }
            break;
        case LMC_MP_EXT:
            if (it.ext_type == -1 && !timestamp_valid(&it)) {
                r->p = at;
                return fail_at(err, what, r, "invalid msgpack timestamp");
            }
            if (it.ext_type != -1 && in_key) {
                r->p = at;
                return fail_at(err, what, r, "an ext cannot be a dict key (unhashable)");
            }
            break;
        case LMC_MP_MAP:
            if (in_key) {
                r->p = at;
                return fail_at(err, what, r, "a map cannot be a dict key (unhashable)");
            }
            /* fall through */
        case LMC_MP_ARRAY:
            if (it.v.n == 0)
                break;
            if (depth + top >= LMC_MP_MAX_DEPTH) {
                r->p = at;
                return lmc_mp_error_set(err, what, r, LMC_MP_TOO_DEEP);
            }
            uint32_t keys = 0;
            /* A key nests two maps inside the list. */
            if (it.type == LMC_MP_ARRAY && !in_key && depth + top + 2 < LMC_MP_MAX_DEPTH &&
                (keys = canonical_keys(r, it.v.n)) == it.v.n)
                break;
            stack[top++] = cur;
            cur.left = (uint64_t)(it.v.n - keys) << (it.type == LMC_MP_MAP);
            cur.map = it.type == LMC_MP_MAP;
            cur.key = in_key;
            break;
        default:
            break;
        }
    }
}

static lmc_status wrong_type(lmc_error *err, const char *field, const char *want,
                             const lmc_mp_item *got)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "Record.%s: expected %s, got %s", field, want,
                         lmc_mp_type_name(got->type));
}

/* The args map at r: str keys (UTF-8), Any values. */
static lmc_status scan_args(lmc_mp_reader *r, lmc_trace_record_scan *out, lmc_error *err)
{
    static const char what[] = "Record";
    const uint8_t *start = r->p;
    lmc_mp_item m;
    lmc_mp_result res = lmc_mp_next(r, &m);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, r, res);
    if (m.type != LMC_MP_MAP)
        return wrong_type(err, "args", "map", &m);
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k;
        const uint8_t *at = r->p;
        if ((res = lmc_mp_next(r, &k)) != LMC_MP_OK)
            return lmc_mp_error_set(err, what, r, res);
        if (k.type != LMC_MP_STR) {
            r->p = at;
            return lmc_error_set(err, LMC_ERR_FORMAT,
                                 "%s.args: keys must be str, got %s (at byte %zu)", what,
                                 lmc_mp_type_name(k.type), lmc_mp_offset(r));
        }
        if (!str_valid(&k)) {
            r->p = at;
            return fail_at(err, what, r, "an args key is not valid UTF-8");
        }
        /* The root map and args enclose the value. */
        lmc_status st = lmc_trace_check_any(r, 2, what, err);
        if (st != LMC_OK)
            return st;
    }
    out->args = start;
    out->args_len = (size_t)(r->p - start);
    out->nargs = m.v.n;
    return LMC_OK;
}

/* The Record's fields; each bit says one was seen. */
enum { F_MONO = 1, F_WALL = 2, F_QUAL = 4, F_ARGS = 8 };

lmc_status lmc_trace_scan_record(const void *body, size_t len, lmc_trace_record_scan *out,
                                 lmc_error *err)
{
    static const char what[] = "Record";
    memset(out, 0, sizeof(*out));
    lmc_mp_reader r;
    lmc_mp_reader_init(&r, body, len);
    lmc_mp_item m;
    lmc_mp_result res = lmc_mp_next(&r, &m);
    if (res != LMC_MP_OK)
        return lmc_mp_error_set(err, what, &r, res);
    if (m.type != LMC_MP_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: expected a msgpack map, got %s", what,
                             lmc_mp_type_name(m.type));
    unsigned seen = 0;
    lmc_status st = LMC_OK;
    for (uint32_t i = 0; i < m.v.n; i++) {
        lmc_mp_item k, v;
        if ((res = lmc_mp_next(&r, &k)) != LMC_MP_OK)
            return lmc_mp_error_set(err, what, &r, res);
        if (k.type != LMC_MP_STR)
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: keys must be str, got %s", what,
                                 lmc_mp_type_name(k.type));
        if (lmc_mp_str_is(&k, "args")) {
            if ((st = scan_args(&r, out, err)) != LMC_OK)
                return st;
            seen |= F_ARGS;
            continue;
        }
        bool is_type = lmc_mp_str_is(&k, "type");
        bool is_mono = !is_type && lmc_mp_str_is(&k, "t_mono");
        bool is_wall = !is_type && !is_mono && lmc_mp_str_is(&k, "t_wall");
        bool is_qual = !is_type && !is_mono && !is_wall && lmc_mp_str_is(&k, "qualname");
        if (!is_type && !is_mono && !is_wall && !is_qual) {
            /* Unknown keys are skipped, not decoded: only their structure is read. */
            if ((res = lmc_mp_skip(&r, LMC_MP_MAX_DEPTH - 1)) != LMC_MP_OK)
                return lmc_mp_error_set(err, what, &r, res);
            continue;
        }
        if ((res = lmc_mp_next(&r, &v)) != LMC_MP_OK)
            return lmc_mp_error_set(err, what, &r, res);
        if (is_type) {
            if (v.type != LMC_MP_STR)
                return wrong_type(err, "type", "str", &v);
            if (!lmc_mp_str_is(&v, "record"))
                return lmc_error_set(err, LMC_ERR_FORMAT,
                                     "%s: invalid type tag '%.*s' (expected 'record')", what,
                                     (int)(v.v.s.len > 64 ? 64 : v.v.s.len), v.v.s.ptr);
        } else if (is_mono || is_wall) {
            double *slot = is_mono ? &out->t_mono : &out->t_wall;
            if (!lmc_mp_get_double(&v, slot))
                return wrong_type(err, is_mono ? "t_mono" : "t_wall", "float", &v);
            seen |= is_mono ? F_MONO : F_WALL;
        } else {
            if (v.type != LMC_MP_STR)
                return wrong_type(err, "qualname", "str", &v);
            if ((st = lmc_trace_check_str(&v, what, "qualname", err)) != LMC_OK)
                return st;
            out->qualname = v.v.s.ptr;
            out->qualname_len = v.v.s.len;
            seen |= F_QUAL;
        }
    }
    if (lmc_mp_left(&r) != 0)
        return lmc_error_set(err, LMC_ERR_FORMAT, "%s: %zu trailing bytes after the msgpack value",
                             what, lmc_mp_left(&r));
    static const struct {
        unsigned bit;
        const char *name;
    } required[] = {{F_MONO, "t_mono"}, {F_WALL, "t_wall"}, {F_QUAL, "qualname"}, {F_ARGS, "args"}};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!(seen & required[i].bit))
            return lmc_error_set(err, LMC_ERR_FORMAT, "%s: missing required field '%s'", what,
                                 required[i].name);
    }
    return LMC_OK;
}
