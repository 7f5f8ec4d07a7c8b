/*
 * protocol.c -- decoding, validation and encoding of `lmcache server`
 * messages (see protocol.h and docs/protocol.md).
 *
 * Owns: LMCache's legacy operation names, the payload decoders of the
 * operations in ops.def (and their frame counts, from the same rows), and
 * every byte-level rule of a request.
 * Threads: none; pure functions over caller-owned frames. A decoded
 * request owns its strings and arrays (lmc_request_free).
 *
 * Decoding never calls msgpack_unpack: msgpack-c allocates an array's or
 * map's storage from the declared count before it has seen the elements,
 * so a 5-byte frame (dd ff ff ff ff) would ask its zone for 64 GiB. The
 * frames are read with the bounds-checked reader (core/mp_reader.h), which
 * checks every declared length against the bytes left in the frame before
 * anything happens: a str/bin/ext body must fit, an array of n items needs
 * at least n more bytes and a map of n pairs 2n. The only allocations are
 * the fields we keep (token ids, block ids, strings), each bounded by the
 * frame size. Values we do not read (unknown map keys, ignored frames) are
 * skipped with a pending-item counter rather than recursion, so deep
 * nesting cannot exhaust the stack.
 *
 * Error codes: LMC_ERR_FORMAT for what is not a well-formed message of the
 * operation (bad msgpack, wrong type, wrong frame count, missing field),
 * LMC_ERR_INVALID for a well-typed value out of range, LMC_ERR_NOMEM when
 * memory runs out. Messages start with the operation name and name the
 * field: "lookup: key.start must be an int (got str)".
 */
#include "server/protocol.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mp_reader.h"
#include "core/msgpack_util.h"

/* ---------------------------------------------------------------------- */
/* Legacy operation names                                                  */
/* ---------------------------------------------------------------------- */

/* LMCache's frozen legacy ids 1..34 (server-protocol.md section 2). */
static const char *const LEGACY_NAMES[] = {
    NULL,
    "register_kv_cache",
    "unregister_kv_cache",
    "register_q_cache",
    "unregister_q_cache",
    "store_q",
    "store",
    "retrieve",
    "lookup",
    "query_prefetch_status",
    "wait_prefetch_status",
    "query_prefetch_lookup_hits",
    "free_lookup_locks",
    "end_session",
    "register_kv_cache_engine_driven_context",
    "unregister_kv_cache_engine_driven_context",
    "prepare_store",
    "commit_store",
    "prepare_retrieve",
    "commit_retrieve",
    "clear",
    "get_chunk_size",
    "ping",
    "report_block_allocation",
    "noop",
    "cb_register_rope",
    "cb_unregister_rope",
    "cb_retrieve_pre_computed",
    "cb_unified_lookup",
    "p2p_lookup_and_lock",
    "p2p_query_lookup_results",
    "p2p_unlock_objects",
    "get_experimental",
    "cb_protocol_handshake",
    "poll_kv_events",
};
#define N_LEGACY ((int64_t)(sizeof(LEGACY_NAMES) / sizeof(LEGACY_NAMES[0])))

const char *lmc_op_legacy_name(int64_t id)
{
    return id >= 1 && id < N_LEGACY ? LEGACY_NAMES[id] : NULL;
}

/* ---------------------------------------------------------------------- */
/* Reading (core/mp_reader.h)                                              */
/* ---------------------------------------------------------------------- */

typedef lmc_mp_reader cur;
typedef lmc_mp_item item;

/* Type names in messages are Python's, as a client author sees them: a list, not an array. */
static const char *type_name(lmc_mp_type t)
{
    return t == LMC_MP_ARRAY ? "list" : lmc_mp_type_name(t);
}

/* Skip one whole value: any nesting depth (no recursion). */
static bool skip(cur *c)
{
    return lmc_mp_skip(c, LMC_MP_ANY_DEPTH) == LMC_MP_OK;
}

/* ---------------------------------------------------------------------- */
/* Decoder context and error messages                                      */
/* ---------------------------------------------------------------------- */

typedef struct dec {
    const char *op; /* operation name, or "request" before it is known */
    lmc_error *err;
} dec;

/* The message of a rejection, prefixed with the operation name. */
static lmc_error *__attribute__((format(printf, 2, 3))) reject_msg(dec *d, const char *fmt, ...)
{
    char msg[LMC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return lmc_error_format(d->err, "%s: %s", d->op, msg);
}

/*
 * reject(d, code, fmt, ...): fill d->err and evaluate to code. A macro over
 * lmc_error_code, like lmc_error_set, so callers see the non-zero result.
 */
#define reject(d, code, ...) lmc_error_code(reject_msg((d), __VA_ARGS__), (code))

/* A printable, bounded copy of client bytes for a message. */
static const char *quote(const uint8_t *p, size_t n, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++)
        buf[k++] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    if (k < n && k + 4 <= cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

static lmc_status malformed(dec *d, const char *field)
{
    return reject(d, LMC_ERR_FORMAT,
                  "%s: malformed msgpack (truncated, or a length longer than the frame)", field);
}

static lmc_status wrong_type(dec *d, const char *field, const char *want, const item *it)
{
    return reject(d, LMC_ERR_FORMAT, "%s must be %s (got %s)", field, want, type_name(it->type));
}

static lmc_status rd(dec *d, cur *c, const char *field, item *it)
{
    return lmc_mp_next(c, it) == LMC_MP_OK ? LMC_OK : malformed(d, field);
}

/* Read one value that must be of type t; want names it in the message ("a str"). */
static lmc_status rd_as(dec *d, cur *c, const char *field, lmc_mp_type t, const char *want,
                        item *it)
{
    lmc_status st = rd(d, c, field, it);
    if (st != LMC_OK)
        return st;
    return it->type == t ? LMC_OK : wrong_type(d, field, want, it);
}

static lmc_status want_int(dec *d, const char *field, const item *it, int64_t lo, int64_t hi,
                           int64_t *out)
{
    int64_t v;
    if (!lmc_mp_get_int64(it, &v)) {
        if (it->type == LMC_MP_UINT) /* above INT64_MAX */
            return reject(d, LMC_ERR_INVALID,
                          "%s must be in [%" PRId64 ", %" PRId64 "] (got %" PRIu64 ")", field, lo,
                          hi, it->v.u);
        return wrong_type(d, field, "an int", it);
    }
    if (v < lo || v > hi)
        return reject(d, LMC_ERR_INVALID,
                      "%s must be in [%" PRId64 ", %" PRId64 "] (got %" PRId64 ")", field, lo, hi,
                      v);
    *out = v;
    return LMC_OK;
}

static lmc_status rd_int(dec *d, cur *c, const char *field, int64_t lo, int64_t hi, int64_t *out)
{
    item it;
    lmc_status st = rd(d, c, field, &it);
    return st != LMC_OK ? st : want_int(d, field, &it, lo, hi, out);
}

static lmc_status rd_str(dec *d, cur *c, const char *field, const uint8_t **p, size_t *n)
{
    item it;
    lmc_status st = rd_as(d, c, field, LMC_MP_STR, "a str", &it);
    if (st != LMC_OK)
        return st;
    *p = (const uint8_t *)it.v.s.ptr;
    *n = it.v.s.len;
    return LMC_OK;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const uint8_t *s, size_t n, size_t *chars)
{
    size_t count = 0;
    for (size_t i = 0; i < n; count++) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    if (chars != NULL)
        *chars = count;
    return true;
}

/* Copy a validated string; rejects NUL and invalid UTF-8. */
static lmc_status own_str(dec *d, const char *field, const uint8_t *p, size_t n, char **out)
{
    if (memchr(p, '\0', n) != NULL)
        return reject(d, LMC_ERR_INVALID, "%s must not contain NUL", field);
    if (!utf8_valid(p, n, NULL))
        return reject(d, LMC_ERR_INVALID, "%s is not valid UTF-8", field);
    char *s = malloc(n + 1);
    if (s == NULL)
        return reject(d, LMC_ERR_NOMEM, "%s: out of memory (%zu bytes)", field, n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    free(*out); /* never set twice in practice; keeps a repeat leak-free */
    *out = s;
    return LMC_OK;
}

/* 1..max bytes (0..max when may_be_empty). */
static lmc_status check_length(dec *d, const char *field, size_t n, bool may_be_empty, int max)
{
    if (n == 0 && !may_be_empty)
        return reject(d, LMC_ERR_INVALID, "%s must not be empty", field);
    if (n > (size_t)max)
        return reject(d, LMC_ERR_INVALID, "%s is %zu bytes; at most %d allowed", field, n, max);
    return LMC_OK;
}

static lmc_status check_model_name(dec *d, const char *field, const uint8_t *p, size_t n)
{
    lmc_status st = check_length(d, field, n, false, LMC_MODEL_NAME_MAX);
    if (st != LMC_OK)
        return st;
    if (memchr(p, '@', n) != NULL) {
        char q[80];
        return reject(d, LMC_ERR_INVALID, "%s must not contain '@' (got '%s')", field,
                      quote(p, n, q, sizeof(q)));
    }
    return LMC_OK;
}

static lmc_status check_request_id(dec *d, const char *field, const uint8_t *p, size_t n)
{
    (void)p;
    return check_length(d, field, n, false, LMC_PROTO_MAX_REQUEST_ID);
}

/* ObjectKey's rules (core/types.c): none of '@' '/' '\' NUL; <= 128 characters. */
static lmc_status check_cache_salt(dec *d, const char *field, const uint8_t *p, size_t n)
{
    static const char forbidden[] = {'@', '/', '\\'};
    for (size_t k = 0; k < sizeof(forbidden); k++)
        if (memchr(p, forbidden[k], n) != NULL) {
            char q[80];
            return reject(d, LMC_ERR_INVALID, "%s must not contain '%c' (got '%s')", field,
                          forbidden[k], quote(p, n, q, sizeof(q)));
        }
    size_t chars = 0;
    if (utf8_valid(p, n, &chars) && chars > LMC_CACHE_SALT_MAX)
        return reject(d, LMC_ERR_INVALID, "%s is %zu characters; at most %d allowed", field, chars,
                      LMC_CACHE_SALT_MAX);
    return LMC_OK; /* NUL and UTF-8 are checked by own_str */
}

/* A POSIX shm name: "/name" or "name", no other '/', not "." or "..". */
static lmc_status check_shm_name(dec *d, const char *field, const uint8_t *p, size_t n)
{
    lmc_status st = check_length(d, field, n, true, LMC_PROTO_MAX_SHM_NAME);
    if (st != LMC_OK)
        return st;
    const uint8_t *base = p;
    size_t bn = n;
    if (bn > 0 && base[0] == '/') {
        base++;
        bn--;
    }
    char q[80];
    if (bn == 0 || (bn == 1 && base[0] == '.') || (bn == 2 && base[0] == '.' && base[1] == '.'))
        return reject(d, LMC_ERR_INVALID, "%s '%s' is not a POSIX shared-memory object name", field,
                      quote(p, n, q, sizeof(q)));
    if (memchr(base, '/', bn) != NULL)
        return reject(d, LMC_ERR_INVALID,
                      "%s must be '/name' or 'name' with no other '/' (got '%s')", field,
                      quote(p, n, q, sizeof(q)));
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Payload readers                                                         */
/* ---------------------------------------------------------------------- */

typedef enum key_mode {
    KEY_LOOKUP, /* worker_id must be nil */
    KEY_WORKER, /* worker_id must be set */
    KEY_ANY,    /* either (free_lookup_locks) */
} key_mode;

/*
 * Item k of a list of uints at most max (token ids, block ids). The common
 * case is a plain uint taken in one step; anything else is read again to
 * say what it is. Both lists word their errors the same way, "<field> must
 * be <want> (item k is ...)", so the two loops share this one reader,
 * inlined into each so the common case stays a few instructions per item.
 */
static inline __attribute__((always_inline)) lmc_status rd_uint_item(dec *d, cur *c,
                                                                     const char *field,
                                                                     const char *want, uint32_t k,
                                                                     uint64_t max, uint64_t *out)
{
    uint64_t u;
    if (!lmc_mp_take_uint(c, &u)) {
        item v;
        if (lmc_mp_next(c, &v) != LMC_MP_OK)
            return malformed(d, field);
        if (v.type == LMC_MP_INT)
            return reject(d, LMC_ERR_INVALID, "%s must be %s (item %" PRIu32 " is %" PRId64 ")",
                          field, want, k, v.v.i);
        if (v.type != LMC_MP_UINT)
            return reject(d, LMC_ERR_FORMAT, "%s must be %s (item %" PRIu32 " is a %s)", field,
                          want, k, type_name(v.type));
        u = v.v.u;
    }
    if (u > max)
        return reject(d, LMC_ERR_INVALID, "%s must be %s (item %" PRIu32 " is %" PRIu64 ")", field,
                      want, k, u);
    *out = u;
    return LMC_OK;
}

static lmc_status rd_token_ids(dec *d, cur *c, lmc_ipc_key *key)
{
    const char *field = "key.token_ids";
    item it;
    lmc_status st = rd_as(d, c, field, LMC_MP_ARRAY, "a list of unsigned 32-bit ints", &it);
    if (st != LMC_OK)
        return st;
    uint32_t count = it.v.n;
    if (count > LMC_PROTO_MAX_TOKENS)
        return reject(d, LMC_ERR_INVALID, "%s has %" PRIu32 " tokens; at most %u allowed", field,
                      count, LMC_PROTO_MAX_TOKENS);
    free(key->token_ids);
    key->token_ids = NULL;
    key->n_tokens = 0;
    if (count == 0)
        return LMC_OK;
    /* count <= bytes left in the frame (checked by the reader), so this is bounded. */
    uint32_t *t = malloc((size_t)count * sizeof(*t));
    if (t == NULL)
        return reject(d, LMC_ERR_NOMEM, "%s: out of memory (%" PRIu32 " tokens)", field, count);
    key->token_ids = t;
    /* The run of plain uints at once; an item it stops at is read (and
     * reported, unless it is a uint in another encoding) one by one. */
    for (uint32_t k = 0; k < count;) {
        k += (uint32_t)lmc_mp_take_uint32s(c, t + k, count - k);
        if (k == count)
            break;
        uint64_t u;
        if ((st = rd_uint_item(d, c, field, "a list of unsigned 32-bit ints", k, UINT32_MAX, &u)) !=
            LMC_OK)
            return st;
        t[k++] = (uint32_t)u;
    }
    key->n_tokens = count;
    return LMC_OK;
}

/*
 * The fields of a map payload (a key, a kv_cache), one row each: how its
 * value is read and where it goes in the struct being filled. A field may
 * appear once; a required one must; unknown ones are skipped (forward
 * compatibility). The required fields are checked in row order. A
 * FIELD_NILABLE one may also be nil (Python's None), which leaves the
 * struct's default as an absent field does. The encoders write the same
 * table back (put_fields), so a map's field names and order live here once.
 */
typedef enum field_kind {
    FIELD_INT,    /* rd_int in [lo, hi] into an int64_t */
    FIELD_STR,    /* a str, passed to check (if any), copied into a char * */
    FIELD_CUSTOM, /* read and written by custom */
} field_kind;

typedef enum field_presence {
    FIELD_REQUIRED,
    FIELD_OPTIONAL,
    FIELD_NILABLE, /* optional, and nil is the same as absent */
} field_presence;

typedef lmc_status (*str_check)(dec *d, const char *field, const uint8_t *p, size_t n);

/* A FIELD_CUSTOM field's reader and writer; both get the whole struct. */
typedef struct field_codec {
    lmc_status (*read)(dec *d, cur *c, const char *field, void *dst);
    void (*put)(msgpack_packer *pk, const void *src);
} field_codec;

typedef struct field_spec {
    const char *name;
    const char *path; /* "<map>.<name>", for messages */
    field_kind kind;
    field_presence presence;
    size_t off; /* of the destination in the struct (FIELD_INT, FIELD_STR) */
    int64_t lo, hi;
    str_check check;
    const field_codec *custom;
} field_spec;

static lmc_status rd_field(dec *d, cur *c, const field_spec *f, const char *field, void *dst)
{
    char *base = dst;
    const uint8_t *p;
    size_t n;
    lmc_status st;
    static const uint8_t nil = 0xc0;
    if (f->presence == FIELD_NILABLE && lmc_mp_take(c, &nil, 1))
        return LMC_OK;
    switch (f->kind) {
    case FIELD_INT:
        return rd_int(d, c, field, f->lo, f->hi, (int64_t *)(void *)(base + f->off));
    case FIELD_STR:
        if ((st = rd_str(d, c, field, &p, &n)) != LMC_OK ||
            (f->check != NULL && (st = f->check(d, field, p, n)) != LMC_OK))
            return st;
        return own_str(d, field, p, n, (char **)(void *)(base + f->off));
    case FIELD_CUSTOM:
        break;
    }
    return f->custom->read(d, c, field, dst);
}

/* Read the map named map (a top-level payload name) into dst by its field table. */
static lmc_status rd_fields(dec *d, cur *c, const char *map, const field_spec *fields, size_t nf,
                            void *dst)
{
    item m;
    lmc_status st = rd_as(d, c, map, LMC_MP_MAP, "a map", &m);
    if (st != LMC_OK)
        return st;
    uint32_t seen = 0; /* bit k: fields[k] was read */
    for (uint32_t k = 0; k < m.v.n; k++) {
        item f;
        if ((st = rd(d, c, map, &f)) != LMC_OK)
            return st;
        if (f.type != LMC_MP_STR)
            return reject(d, LMC_ERR_FORMAT, "%s field names must be strs (got %s)", map,
                          type_name(f.type));
        size_t i = 0;
        while (i < nf && !lmc_mp_str_is(&f, fields[i].name))
            i++;
        if (i == nf) { /* unknown field: forward compatibility */
            if (skip(c))
                continue;
            char q[80], field[96];
            snprintf(field, sizeof(field), "%s.%s", map,
                     quote((const uint8_t *)f.v.s.ptr, f.v.s.len, q, sizeof(q)));
            return malformed(d, field);
        }
        if (seen & (1u << i))
            return reject(d, LMC_ERR_FORMAT, "%s has field '%s' twice", map, fields[i].name);
        seen |= 1u << i;
        if ((st = rd_field(d, c, &fields[i], fields[i].path, dst)) != LMC_OK)
            return st;
    }
    for (size_t i = 0; i < nf; i++)
        if (fields[i].presence == FIELD_REQUIRED && !(seen & (1u << i)))
            return reject(d, LMC_ERR_FORMAT, "%s is missing field '%s'", map, fields[i].name);
    return LMC_OK;
}

static lmc_status rd_token_list(dec *d, cur *c, const char *field, void *dst)
{
    (void)field;
    return rd_token_ids(d, c, dst);
}

static void put_token_ids(msgpack_packer *pk, const void *src)
{
    const lmc_ipc_key *key = src;
    lmc_msgpack_pack_uint32_array(pk, key->token_ids, key->n_tokens);
}

static const field_codec TOKEN_IDS = {rd_token_list, put_token_ids};

/* A field_spec row of the map named map: its path for messages is "<map>.<name>". */
#define FIELD_ROW(map, name, ...)                                                                  \
    {                                                                                              \
        name, map "." name, __VA_ARGS__                                                            \
    }

#define KEY_AT(member) offsetof(lmc_ipc_key, member)
#define KEY_FIELD(...) FIELD_ROW("key", __VA_ARGS__)
/* worker_id: nil (a lookup: every rank) leaves -1, else a rank. cache_salt: nil is no salt. */
static const field_spec KEY_FIELDS[] = {
    KEY_FIELD("model_name", FIELD_STR, FIELD_REQUIRED, KEY_AT(model_name), 0, 0, check_model_name,
              NULL),
    KEY_FIELD("world_size", FIELD_INT, FIELD_REQUIRED, KEY_AT(world_size), 1, 255, NULL, NULL),
    KEY_FIELD("worker_id", FIELD_INT, FIELD_NILABLE, KEY_AT(worker_id), 0, 254, NULL, NULL),
    KEY_FIELD("token_ids", FIELD_CUSTOM, FIELD_REQUIRED, 0, 0, 0, NULL, &TOKEN_IDS),
    KEY_FIELD("start", FIELD_INT, FIELD_REQUIRED, KEY_AT(start), 0, INT64_MAX, NULL, NULL),
    KEY_FIELD("end", FIELD_INT, FIELD_REQUIRED, KEY_AT(end), 0, INT64_MAX, NULL, NULL),
    KEY_FIELD("request_id", FIELD_STR, FIELD_REQUIRED, KEY_AT(request_id), 0, 0, check_request_id,
              NULL),
    KEY_FIELD("cache_salt", FIELD_STR, FIELD_NILABLE, KEY_AT(cache_salt), 0, 0, check_cache_salt,
              NULL),
    KEY_FIELD("num_kv_readers", FIELD_INT, FIELD_OPTIONAL, KEY_AT(num_kv_readers), 1, 128, NULL,
              NULL),
};

static lmc_status rd_key(dec *d, cur *c, key_mode mode, lmc_ipc_key *key)
{
    key->worker_id = -1;
    key->num_kv_readers = 1;
    lmc_status st =
        rd_fields(d, c, "key", KEY_FIELDS, sizeof(KEY_FIELDS) / sizeof(KEY_FIELDS[0]), key);
    if (st != LMC_OK)
        return st;
    bool worker_nil = key->worker_id < 0;
    if (mode == KEY_LOOKUP && !worker_nil)
        return reject(d, LMC_ERR_INVALID,
                      "key.worker_id must be nil for a lookup (got %" PRId64
                      "; a lookup covers every rank)",
                      key->worker_id);
    if (mode == KEY_WORKER && worker_nil)
        return reject(d, LMC_ERR_INVALID, "key.worker_id must be set (the worker's rank), not nil");
    if (!worker_nil && key->worker_id >= key->world_size)
        return reject(d, LMC_ERR_INVALID,
                      "key.worker_id must be in [0, world_size-1] = [0, %" PRId64 "] (got %" PRId64
                      ")",
                      key->world_size - 1, key->worker_id);
    if (key->start > key->end)
        return reject(d, LMC_ERR_INVALID,
                      "key.start (%" PRId64 ") must not be greater than key.end (%" PRId64 ")",
                      key->start, key->end);
    if ((uint64_t)key->end > key->n_tokens)
        return reject(d, LMC_ERR_INVALID,
                      "key.end (%" PRId64 ") is past the end of key.token_ids (%zu tokens)",
                      key->end, key->n_tokens);
    if (key->cache_salt == NULL && (key->cache_salt = calloc(1, 1)) == NULL)
        return reject(d, LMC_ERR_NOMEM, "key.cache_salt: out of memory");
    return LMC_OK;
}

/* kv_cache.dtype: a torch dtype name. */
static lmc_status rd_dtype(dec *d, cur *c, const char *field, void *dst)
{
    lmc_kv_region_desc *r = dst;
    const uint8_t *p;
    size_t n;
    lmc_status st = rd_str(d, c, field, &p, &n);
    if (st != LMC_OK)
        return st;
    lmc_error e;
    if (lmc_dtype_from_name((const char *)p, n, &r->dtype, &e) != LMC_OK) {
        char q[80];
        return reject(d, LMC_ERR_INVALID, "%s: unknown torch dtype '%s'", field,
                      quote(p, n, q, sizeof(q)));
    }
    return LMC_OK;
}

static void put_dtype(msgpack_packer *pk, const void *src)
{
    const lmc_kv_region_desc *r = src;
    lmc_msgpack_pack_cstr(pk, lmc_dtype_name(r->dtype));
}

static const field_codec DTYPE = {rd_dtype, put_dtype};

#define REGION_AT(member) offsetof(lmc_kv_region_desc, member)
#define REGION_FIELD(...) FIELD_ROW("kv_cache", __VA_ARGS__)
static const field_spec REGION_FIELDS[] = {
    REGION_FIELD("shm_name", FIELD_STR, FIELD_REQUIRED, REGION_AT(shm_name), 0, 0, check_shm_name,
                 NULL),
    REGION_FIELD("num_blocks", FIELD_INT, FIELD_REQUIRED, REGION_AT(num_blocks), 1,
                 LMC_PROTO_MAX_BLOCKS, NULL, NULL),
    REGION_FIELD("tokens_per_block", FIELD_INT, FIELD_REQUIRED, REGION_AT(tokens_per_block), 1,
                 INT64_MAX, NULL, NULL),
    REGION_FIELD("bytes_per_token", FIELD_INT, FIELD_REQUIRED, REGION_AT(bytes_per_token), 1,
                 INT64_MAX, NULL, NULL),
    REGION_FIELD("dtype", FIELD_CUSTOM, FIELD_REQUIRED, 0, 0, 0, NULL, &DTYPE),
};

static lmc_status rd_region(dec *d, cur *c, lmc_kv_region_desc *r)
{
    lmc_status st = rd_fields(d, c, "kv_cache", REGION_FIELDS,
                              sizeof(REGION_FIELDS) / sizeof(REGION_FIELDS[0]), r);
    if (st != LMC_OK)
        return st;
    int64_t per_block, total;
    if (__builtin_mul_overflow(r->tokens_per_block, r->bytes_per_token, &per_block) ||
        __builtin_mul_overflow(per_block, r->num_blocks, &total) || (uint64_t)total > SIZE_MAX)
        return reject(d, LMC_ERR_INVALID,
                      "kv_cache: num_blocks * tokens_per_block * bytes_per_token (%" PRId64
                      " * %" PRId64 " * %" PRId64 ") overflows",
                      r->num_blocks, r->tokens_per_block, r->bytes_per_token);
    size_t item_size = lmc_dtype_itemsize(r->dtype);
    if (item_size > 0 && r->bytes_per_token % (int64_t)item_size != 0)
        return reject(d, LMC_ERR_INVALID,
                      "kv_cache.bytes_per_token (%" PRId64
                      ") is not a multiple of the size of %s (%zu)",
                      r->bytes_per_token, lmc_dtype_name(r->dtype), item_size);
    return LMC_OK;
}

static lmc_status rd_block_ids(dec *d, cur *c, lmc_request *req)
{
    item outer;
    lmc_status st =
        rd_as(d, c, "block_ids", LMC_MP_ARRAY, "a list of one list of block ids", &outer);
    if (st != LMC_OK)
        return st;
    if (outer.v.n != 1)
        return reject(d, LMC_ERR_INVALID,
                      "block_ids has %" PRIu32
                      " KV groups; this server supports exactly one (a list of one list)",
                      outer.v.n);
    item inner;
    if ((st = rd_as(d, c, "block_ids[0]", LMC_MP_ARRAY, "a list of block ids", &inner)) != LMC_OK)
        return st;
    uint32_t count = inner.v.n;
    if (count > LMC_PROTO_MAX_BLOCKS)
        return reject(d, LMC_ERR_INVALID, "block_ids[0] has %" PRIu32 " ids; at most %u allowed",
                      count, LMC_PROTO_MAX_BLOCKS);
    if (count == 0)
        return LMC_OK;
    int64_t *ids = malloc((size_t)count * sizeof(*ids));
    if (ids == NULL)
        return reject(d, LMC_ERR_NOMEM, "block_ids: out of memory (%" PRIu32 " ids)", count);
    req->block_ids = ids;
    for (uint32_t k = 0; k < count; k++) {
        uint64_t u;
        if ((st = rd_uint_item(d, c, "block_ids[0]", "a list of non-negative ints", k,
                               (uint64_t)INT64_MAX, &u)) != LMC_OK)
            return st;
        ids[k] = (int64_t)u;
    }
    req->n_block_ids = count;
    return LMC_OK;
}

static lmc_status rd_bin_ignored(dec *d, cur *c, const char *field)
{
    item it;
    return rd_as(d, c, field, LMC_MP_BIN, "bytes (bin)", &it);
}

static lmc_status rd_request_id(dec *d, cur *c, const char *field, char **out)
{
    const uint8_t *p;
    size_t n;
    lmc_status st;
    if ((st = rd_str(d, c, field, &p, &n)) != LMC_OK ||
        (st = check_request_id(d, field, p, n)) != LMC_OK)
        return st;
    return own_str(d, field, p, n, out);
}

static lmc_status skip_ignored(dec *d, cur *c, const char *field)
{
    return skip(c) ? LMC_OK : malformed(d, field);
}

/* ---------------------------------------------------------------------- */
/* Per-operation payloads                                                  */
/* ---------------------------------------------------------------------- */

/* f[k] is payload frame k (after uid and op); n is how many there are. */
typedef lmc_status (*payload_fn)(dec *d, cur *f, size_t n, lmc_request *req);

static lmc_status p_register(dec *d, cur *f, size_t n, lmc_request *req)
{
    (void)n;
    lmc_status st;
    const uint8_t *p;
    size_t len;
    if ((st = rd_int(d, &f[0], "instance_id", INT64_MIN, INT64_MAX, &req->instance_id)) != LMC_OK ||
        (st = rd_region(d, &f[1], &req->region)) != LMC_OK ||
        (st = rd_str(d, &f[2], "model_name", &p, &len)) != LMC_OK ||
        (st = check_model_name(d, "model_name", p, len)) != LMC_OK ||
        (st = own_str(d, "model_name", p, len, &req->model_name)) != LMC_OK ||
        (st = rd_int(d, &f[3], "world_size", 1, 255, &req->world_size)) != LMC_OK)
        return st;
    req->has_instance_id = true;
    return rd_int(d, &f[4], "worker_id", 0, req->world_size - 1, &req->worker_id);
}

static lmc_status p_instance(dec *d, cur *f, size_t n, lmc_request *req)
{
    (void)n;
    req->has_instance_id = true;
    return rd_int(d, &f[0], "instance_id", INT64_MIN, INT64_MAX, &req->instance_id);
}

static lmc_status p_none(dec *d, cur *f, size_t n, lmc_request *req)
{
    (void)d, (void)f, (void)n, (void)req;
    return LMC_OK;
}

static lmc_status p_ping(dec *d, cur *f, size_t n, lmc_request *req)
{
    if (n == 0)
        return LMC_OK;
    item it;
    lmc_status st = rd(d, &f[0], "instance_id", &it);
    if (st != LMC_OK || it.type == LMC_MP_NIL)
        return st;
    if (it.type != LMC_MP_UINT && it.type != LMC_MP_INT)
        return wrong_type(d, "instance_id", "an int or nil", &it);
    if ((st = want_int(d, "instance_id", &it, INT64_MIN, INT64_MAX, &req->instance_id)) != LMC_OK)
        return st;
    req->has_instance_id = true;
    return LMC_OK;
}

/* lookup and free_lookup_locks: a key, then an optional tp_size (legacy, ignored). */
static lmc_status rd_key_tp(dec *d, cur *f, size_t n, key_mode mode, lmc_request *req)
{
    lmc_status st = rd_key(d, &f[0], mode, &req->key);
    if (st == LMC_OK && n > 1) {
        int64_t tp;
        st = rd_int(d, &f[1], "tp_size", INT64_MIN, INT64_MAX, &tp);
    }
    return st;
}

static lmc_status p_lookup(dec *d, cur *f, size_t n, lmc_request *req)
{
    return rd_key_tp(d, f, n, KEY_LOOKUP, req);
}

static lmc_status p_free_locks(dec *d, cur *f, size_t n, lmc_request *req)
{
    return rd_key_tp(d, f, n, KEY_ANY, req);
}

static lmc_status p_request_id(dec *d, cur *f, size_t n, lmc_request *req)
{
    lmc_status st = rd_request_id(d, &f[0], "request_id", &req->request_id);
    if (st == LMC_OK && n > 1) /* end_session's newer end_info: ignored */
        st = skip_ignored(d, &f[1], "end_info");
    return st;
}

static lmc_status p_transfer(dec *d, cur *f, size_t n, lmc_request *req)
{
    lmc_status st;
    if ((st = rd_key(d, &f[0], KEY_WORKER, &req->key)) != LMC_OK ||
        (st = rd_int(d, &f[1], "instance_id", INT64_MIN, INT64_MAX, &req->instance_id)) != LMC_OK ||
        (st = rd_block_ids(d, &f[2], req)) != LMC_OK ||
        (st = rd_bin_ignored(d, &f[3], "event_ipc_handle")) != LMC_OK)
        return st;
    req->has_instance_id = true;
    if (n > 4)
        return rd_int(d, &f[4], "skip_first_n_tokens", 0, req->key.end, &req->skip_first_n_tokens);
    return LMC_OK;
}

static lmc_status p_clear(dec *d, cur *f, size_t n, lmc_request *req)
{
    if (n == 0)
        return LMC_OK;
    item it;
    lmc_status st = rd_as(d, &f[0], "force", LMC_MP_BOOL, "a bool", &it);
    if (st != LMC_OK)
        return st;
    req->force = it.v.b;
    return LMC_OK;
}

typedef struct op_entry {
    const char *name;
    uint8_t min, max; /* payload frames */
    const char *usage;
    payload_fn fn; /* NULL: not implemented */
} op_entry;

/* Indexed by legacy id: one entry per row of ops.def. */
static const op_entry OPS[] = {
#define LMC_SERVER_OP(name, id, wire, min, max, usage, decode, handle)                             \
    [id] = {wire, min, max, usage, decode},
#include "server/ops.def"
};
#define N_OPS ((int64_t)(sizeof(OPS) / sizeof(OPS[0])))

static const op_entry *op_entry_of(int64_t id)
{
    return id > 0 && id < N_OPS && OPS[id].fn != NULL ? &OPS[id] : NULL;
}

const char *lmc_op_name(lmc_op op)
{
    const op_entry *e = op_entry_of(op);
    return e != NULL ? e->name : NULL;
}

/* ---------------------------------------------------------------------- */
/* Requests                                                                */
/* ---------------------------------------------------------------------- */

static cur frame_cur(const void *const *frames, const size_t *lens, size_t k)
{
    cur c;
    lmc_mp_reader_init(&c, frames[k], frames[k] != NULL ? lens[k] : 0);
    return c;
}

static lmc_status decode_op(dec *d, cur *c, lmc_op *op)
{
    item it;
    lmc_status st = rd(d, c, "operation", &it);
    if (st != LMC_OK)
        return st;
    if (lmc_mp_left(c) != 0)
        return reject(d, LMC_ERR_FORMAT, "operation: %zu trailing bytes after the value",
                      lmc_mp_left(c));
    int64_t id;
    if (lmc_mp_get_int64(&it, &id)) {
        if (op_entry_of(id) != NULL) {
            *op = (lmc_op)id;
            return LMC_OK;
        }
        const char *legacy = lmc_op_legacy_name(id);
        if (legacy != NULL)
            return reject(d, LMC_ERR_INVALID,
                          "operation id %" PRId64 " (%s) is not implemented by this server", id,
                          legacy);
        return reject(d, LMC_ERR_INVALID, "unknown operation id %" PRId64, id);
    }
    if (it.type == LMC_MP_UINT) /* above INT64_MAX */
        return reject(d, LMC_ERR_INVALID, "unknown operation id %" PRIu64, it.v.u);
    if (it.type == LMC_MP_STR) {
        for (int64_t k = 1; k < N_OPS; k++) {
            if (OPS[k].fn != NULL && lmc_mp_str_is(&it, OPS[k].name)) {
                *op = (lmc_op)k;
                return LMC_OK;
            }
        }
        for (int64_t k = 1; k < N_LEGACY; k++) {
            if (lmc_mp_str_is(&it, LEGACY_NAMES[k]))
                return reject(d, LMC_ERR_INVALID,
                              "operation '%s' is not implemented by this server", LEGACY_NAMES[k]);
        }
        char q[80];
        return reject(d, LMC_ERR_INVALID, "unknown operation '%s'",
                      quote((const uint8_t *)it.v.s.ptr, it.v.s.len, q, sizeof(q)));
    }
    return wrong_type(d, "operation", "an int id or a str name", &it);
}

lmc_op lmc_op_from_frame(const void *data, size_t len)
{
    const void *frames[1] = {data};
    cur c = frame_cur(frames, &len, 0);
    dec d = {"request", NULL};
    lmc_op op = LMC_OP_INVALID;
    return decode_op(&d, &c, &op) == LMC_OK ? op : LMC_OP_INVALID;
}

lmc_status lmc_request_decode(const void *const *frames, const size_t *lens, size_t n_frames,
                              lmc_request *req, lmc_error *err)
{
    memset(req, 0, sizeof(*req));
    lmc_error_clear(err);
    dec d = {"request", err};
    lmc_status st;
    cur c[LMC_PROTO_MAX_FRAMES];

    if (n_frames == 0)
        return reject(&d, LMC_ERR_FORMAT,
                      "no frames; expected [request_uid, operation, payload...]");
    for (size_t k = 0; k < n_frames && k < 2; k++)
        if (lens[k] > LMC_PROTO_MAX_FRAME)
            return reject(&d, LMC_ERR_FORMAT, "frame %zu is %zu bytes; at most %u allowed", k,
                          lens[k], LMC_PROTO_MAX_FRAME);

    /* uid and operation first, so that even a bad request gets an addressed reply. */
    cur u = frame_cur(frames, lens, 0);
    if ((st = rd_int(&d, &u, "request_uid", INT64_MIN, INT64_MAX, &req->uid)) != LMC_OK)
        return st;
    if (lmc_mp_left(&u) != 0)
        return reject(&d, LMC_ERR_FORMAT, "request_uid: %zu trailing bytes after the value",
                      lmc_mp_left(&u));
    if (n_frames < 2)
        return reject(&d, LMC_ERR_FORMAT, "1 frame; expected [request_uid, operation, payload...]");
    cur o = frame_cur(frames, lens, 1);
    lmc_op op = LMC_OP_INVALID;
    if ((st = decode_op(&d, &o, &op)) != LMC_OK)
        return st;
    req->op = op;

    const op_entry *e = op_entry_of(op);
    d.op = lmc_op_name(op);
    size_t n = n_frames - 2;
    if (n_frames > LMC_PROTO_MAX_FRAMES)
        return reject(&d, LMC_ERR_FORMAT, "%zu frames; at most %d allowed", n_frames,
                      LMC_PROTO_MAX_FRAMES);
    if (n < e->min || n > e->max) {
        if (e->min == e->max)
            return reject(&d, LMC_ERR_FORMAT, "expected %u payload frames (%s), got %zu", e->min,
                          e->usage, n);
        return reject(&d, LMC_ERR_FORMAT, "expected %u to %u payload frames (%s), got %zu", e->min,
                      e->max, e->usage, n);
    }
    for (size_t k = 0; k < n; k++) {
        if (lens[k + 2] > LMC_PROTO_MAX_FRAME)
            return reject(&d, LMC_ERR_FORMAT, "payload frame %zu is %zu bytes; at most %u allowed",
                          k + 1, lens[k + 2], LMC_PROTO_MAX_FRAME);
        c[k] = frame_cur(frames, lens, k + 2);
    }

    if ((st = e->fn(&d, c, n, req)) != LMC_OK)
        goto fail;
    for (size_t k = 0; k < n; k++)
        if (lmc_mp_left(&c[k]) != 0) {
            st = reject(&d, LMC_ERR_FORMAT,
                        "payload frame %zu has %zu trailing bytes after the value", k + 1,
                        lmc_mp_left(&c[k]));
            goto fail;
        }
    return LMC_OK;

fail : {
    int64_t uid = req->uid;
    lmc_request_free(req);
    req->uid = uid;
    req->op = op;
    return st;
}
}

static void key_free(lmc_ipc_key *k)
{
    free(k->model_name);
    free(k->token_ids);
    free(k->request_id);
    free(k->cache_salt);
}

void lmc_request_free(lmc_request *req)
{
    if (req == NULL)
        return;
    free(req->region.shm_name);
    free(req->model_name);
    key_free(&req->key);
    free(req->block_ids);
    free(req->request_id);
    memset(req, 0, sizeof(*req));
}

/* ---------------------------------------------------------------------- */
/* Encoding                                                                */
/* ---------------------------------------------------------------------- */

static msgpack_packer packer_of(msgpack_sbuffer *out)
{
    msgpack_packer pk;
    lmc_msgpack_sbuffer_packer_init(&pk, out);
    return pk;
}

void lmc_response_nil(msgpack_sbuffer *out)
{
    msgpack_packer pk = packer_of(out);
    msgpack_pack_nil(&pk);
}

void lmc_response_bool(msgpack_sbuffer *out, bool b)
{
    msgpack_packer pk = packer_of(out);
    if (b)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
}

void lmc_response_int(msgpack_sbuffer *out, int64_t v)
{
    msgpack_packer pk = packer_of(out);
    msgpack_pack_int64(&pk, v);
}

void lmc_response_str(msgpack_sbuffer *out, const char *s)
{
    msgpack_packer pk = packer_of(out);
    lmc_msgpack_pack_cstr(&pk, s);
}

void lmc_response_transfer(msgpack_sbuffer *out, bool ok)
{
    msgpack_packer pk = packer_of(out);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_bin(&pk, 0); /* no CUDA event on the CPU path */
    msgpack_pack_bin_body(&pk, "", 0);
    if (ok)
        msgpack_pack_true(&pk);
    else
        msgpack_pack_false(&pk);
}

void lmc_response_error(msgpack_sbuffer *out, const char *message)
{
    msgpack_packer pk = packer_of(out);
    msgpack_pack_map(&pk, 1);
    lmc_msgpack_pack_cstr(&pk, "error");
    lmc_msgpack_pack_cstr(&pk, message);
}

void lmc_request_encode_uid_op(msgpack_sbuffer *uid, msgpack_sbuffer *op, int64_t request_uid,
                               lmc_op operation)
{
    msgpack_packer pu = packer_of(uid);
    msgpack_pack_int64(&pu, request_uid);
    msgpack_packer po = packer_of(op);
    msgpack_pack_int(&po, (int)operation);
}

/* Write src as the map its field table reads; a nilable int below its range (worker_id -1) is nil.
 */
static void put_fields(msgpack_packer *pk, const field_spec *fields, size_t nf, const void *src)
{
    const char *base = src;
    msgpack_pack_map(pk, nf);
    for (size_t i = 0; i < nf; i++) {
        const field_spec *f = &fields[i];
        lmc_msgpack_pack_cstr(pk, f->name);
        switch (f->kind) {
        case FIELD_INT: {
            int64_t v;
            memcpy(&v, base + f->off, sizeof(v));
            if (f->presence == FIELD_NILABLE && v < f->lo)
                msgpack_pack_nil(pk);
            else
                msgpack_pack_int64(pk, v);
            break;
        }
        case FIELD_STR: {
            const char *v;
            memcpy(&v, base + f->off, sizeof(v));
            lmc_msgpack_pack_cstr(pk, v);
            break;
        }
        case FIELD_CUSTOM:
            f->custom->put(pk, src);
            break;
        }
    }
}

void lmc_ipc_key_encode(msgpack_packer *pk, const lmc_ipc_key *key)
{
    put_fields(pk, KEY_FIELDS, sizeof(KEY_FIELDS) / sizeof(KEY_FIELDS[0]), key);
}

void lmc_kv_region_encode(msgpack_packer *pk, const lmc_kv_region_desc *r)
{
    put_fields(pk, REGION_FIELDS, sizeof(REGION_FIELDS) / sizeof(REGION_FIELDS[0]), r);
}

void lmc_block_ids_encode(msgpack_packer *pk, const int64_t *ids, size_t n)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, n);
    for (size_t k = 0; k < n; k++)
        msgpack_pack_int64(pk, ids[k]);
}
