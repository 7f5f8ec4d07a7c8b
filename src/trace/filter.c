/*
 * filter.c -- record filters for the trace tools (see filter.h).
 */
#include "trace/filter.h"

#include <string.h>

#include "core/digest.h"
#include "trace/ops.h"

/* Deeper values are not searched for keys (the decoder's own nesting limit is lower). */
#define KEY_SEARCH_DEPTH 64

lmc_status lmc_trace_filter_set_key(lmc_trace_filter *f, const char *hex, lmc_error *err)
{
    size_t n = strlen(hex);
    for (size_t i = 0; i < n; i++) {
        if (lmc_hex_digit(hex[i]) < 0)
            return lmc_error_set(err, LMC_ERR_INVALID, "'%.80s' is not hexadecimal", hex);
    }
    if (n < LMC_TRACE_KEY_PREFIX_MIN_DIGITS)
        return lmc_error_set(err, LMC_ERR_INVALID, "'%s' is too short (at least %d hex digits)",
                             hex, LMC_TRACE_KEY_PREFIX_MIN_DIGITS);
    if (n > 2 * LMC_CHUNK_HASH_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "'%.80s...' is too long (a chunk hash has at most %d bytes)", hex,
                             LMC_CHUNK_HASH_MAX);
    memset(f->key_prefix, 0, sizeof(f->key_prefix));
    for (size_t i = 0; i < n; i++)
        f->key_prefix[i / 2] |= (uint8_t)(lmc_hex_digit(hex[i]) << (i % 2 ? 0 : 4));
    f->key_digits = n;
    return LMC_OK;
}

bool lmc_trace_filter_time(const lmc_trace_filter *f, double t_mono)
{
    return (!f->has_from || t_mono >= f->from) && (!f->has_to || t_mono < f->to);
}

bool lmc_trace_filter_qualname(const lmc_trace_filter *f, const char *q, size_t len)
{
    if (f->n_qualnames == 0)
        return true;
    size_t mlen = 0;
    const char *m = lmc_trace_qualname_method(q, len, &mlen);
    for (size_t i = 0; i < f->n_qualnames; i++) {
        size_t n = strlen(f->qualnames[i]);
        if ((n == len && memcmp(f->qualnames[i], q, len) == 0) ||
            (m != NULL && n == mlen && memcmp(f->qualnames[i], m, mlen) == 0))
            return true;
    }
    return false;
}

static bool key_matches(const lmc_trace_filter *f, const lmc_object_key *k)
{
    size_t full = f->key_digits / 2;
    if ((size_t)k->chunk_hash_len * 2 < f->key_digits ||
        memcmp(k->chunk_hash, f->key_prefix, full) != 0)
        return false;
    return f->key_digits % 2 == 0 || (k->chunk_hash[full] & 0xf0) == f->key_prefix[full];
}

/*
 * Walk v for ObjectKeys: count them, remember the first, and stop early at
 * one that matches f (when f is not NULL). True when one matched.
 */
static bool walk_keys(const lmc_tv *v, int depth, const lmc_trace_filter *f, size_t *count,
                      const lmc_object_key **first)
{
    if (depth >= KEY_SEARCH_DEPTH)
        return false;
    switch ((lmc_tv_kind)v->kind) {
    case LMC_TV_OBJECT_KEY:
        if (v->u.key == NULL)
            return false;
        if (*count == 0 && first != NULL)
            *first = v->u.key;
        (*count)++;
        return f != NULL && key_matches(f, v->u.key);
    case LMC_TV_LIST:
    case LMC_TV_TUPLE:
    case LMC_TV_SET:
        for (size_t i = 0; i < v->u.list.n; i++) {
            if (walk_keys(&v->u.list.items[i], depth + 1, f, count, first))
                return true;
        }
        return false;
    case LMC_TV_MAP:
        for (size_t i = 0; i < v->u.map.n; i++) {
            if (walk_keys(&v->u.map.keys[i], depth + 1, f, count, first) ||
                walk_keys(&v->u.map.vals[i], depth + 1, f, count, first))
                return true;
        }
        return false;
    default:
        /* Leaf kinds hold no key; a registered kind's payload is a generic value that may. */
        return v->kind >= LMC_TV_BUILTIN_COUNT_ && v->u.ext != NULL &&
               walk_keys(v->u.ext, depth + 1, f, count, first);
    }
}

bool lmc_trace_filter_key(const lmc_trace_filter *f, const lmc_trace_arg *args, size_t nargs)
{
    if (f->key_digits == 0)
        return true;
    size_t count = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (walk_keys(&args[i].value, 0, f, &count, NULL))
            return true;
    }
    return false;
}

bool lmc_trace_filter_match(const lmc_trace_filter *f, const lmc_trace_record *rec)
{
    return lmc_trace_filter_time(f, rec->t_mono) &&
           lmc_trace_filter_qualname(f, rec->qualname, rec->qualname_len) &&
           lmc_trace_filter_key(f, rec->args, rec->nargs);
}

size_t lmc_trace_args_count_keys(const lmc_trace_arg *args, size_t nargs,
                                 const lmc_object_key **first)
{
    size_t count = 0;
    if (first != NULL)
        *first = NULL;
    for (size_t i = 0; i < nargs; i++)
        walk_keys(&args[i].value, 0, NULL, &count, first);
    return count;
}
