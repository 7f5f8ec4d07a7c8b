/*
 * protocol.c -- decoding, validation and encoding of `lmcache server`
 * messages (see protocol.h and docs/protocol.md).
 *
 * Owns: the operation table and every byte-level rule of a request.
 * Threads: none; pure functions over caller-owned frames. A decoded
 * request owns its strings and arrays (lmc_request_free).
 *
 * Decoding never calls msgpack_unpack. msgpack-c allocates an array's or
 * map's storage from the declared count before it has seen the elements,
 * so a 5-byte frame (dd ff ff ff ff) would ask its zone for 64 GiB.
 * Instead a small cursor reads one item header at a time and checks every
 * declared length against the bytes left in the frame before anything
 * happens: a str/bin/ext body must fit, an array of n items needs at least
 * n more bytes and a map of n pairs 2n (every msgpack value is >= 1 byte).
 * The only allocations are the fields we keep (token ids, block ids,
 * strings), each bounded by the frame size. Values we do not read (unknown
 * map keys, ignored frames) are skipped with a pending-item counter rather
 * than recursion, so deep nesting cannot exhaust the stack.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Operation table                                                         */
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

static bool op_implemented(int64_t id)
{
    switch (id) {
    case LMC_OP_REGISTER_KV_CACHE:
    case LMC_OP_UNREGISTER_KV_CACHE:
    case LMC_OP_STORE:
    case LMC_OP_RETRIEVE:
    case LMC_OP_LOOKUP:
    case LMC_OP_QUERY_PREFETCH_STATUS:
    case LMC_OP_QUERY_PREFETCH_LOOKUP_HITS:
    case LMC_OP_FREE_LOOKUP_LOCKS:
    case LMC_OP_END_SESSION:
    case LMC_OP_CLEAR:
    case LMC_OP_GET_CHUNK_SIZE:
    case LMC_OP_PING:
    case LMC_OP_NOOP:
        return true;
    default:
        return false;
    }
}

const char *lmc_op_name(lmc_op op)
{
    return op_implemented(op) ? LEGACY_NAMES[op] : NULL;
}

/* ---------------------------------------------------------------------- */
/* A bounds-checked msgpack cursor                                         */
/* ---------------------------------------------------------------------- */

typedef enum mtype {
    MT_NIL,
    MT_BOOL,
    MT_INT,    /* fits int64_t: it.i */
    MT_BIGINT, /* > INT64_MAX: it.u */
    MT_FLOAT,
    MT_STR,
    MT_BIN,
    MT_ARRAY,
    MT_MAP,
    MT_EXT,
} mtype;

typedef struct item {
    mtype t;
    bool b;
    int64_t i;
    uint64_t u;
    const uint8_t *p; /* STR, BIN, EXT body */
    uint32_t n;       /* STR/BIN/EXT bytes, ARRAY items, MAP pairs */
} item;

typedef struct cur {
    const uint8_t *p;
    const uint8_t *end;
} cur;

static uint64_t be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++)
        v = v << 8 | p[k];
    return v;
}

static const char *mtype_name(mtype t)
{
    switch (t) {
    case MT_NIL:
        return "nil";
    case MT_BOOL:
        return "bool";
    case MT_INT:
    case MT_BIGINT:
        return "int";
    case MT_FLOAT:
        return "float";
    case MT_STR:
        return "str";
    case MT_BIN:
        return "bin";
    case MT_ARRAY:
        return "list";
    case MT_MAP:
        return "map";
    case MT_EXT:
        return "ext";
    }
    return "unknown";
}

/*
 * Read one item: scalars, strs, bins and exts whole, arrays and maps their
 * header only. False if the frame ends too early, a declared length or
 * count cannot fit in what is left, or the byte is the reserved 0xc1.
 */
static bool next(cur *c, item *it)
{
    if (c->p >= c->end)
        return false;
    size_t left = (size_t)(c->end - c->p) - 1;
    const uint8_t *q = c->p + 1;
    uint8_t b = c->p[0];
    size_t hdr = 0;  /* bytes of length/value after the type byte */
    size_t body = 0; /* str/bin/ext body bytes */
    memset(it, 0, sizeof(*it));

    if (b <= 0x7f) {
        it->t = MT_INT;
        it->i = b;
    } else if (b <= 0x8f) {
        it->t = MT_MAP;
        it->n = b & 0x0f;
    } else if (b <= 0x9f) {
        it->t = MT_ARRAY;
        it->n = b & 0x0f;
    } else if (b <= 0xbf) {
        it->t = MT_STR;
        body = b & 0x1f;
    } else if (b >= 0xe0) {
        it->t = MT_INT;
        it->i = (int8_t)b;
    } else {
        switch (b) {
        case 0xc0:
            it->t = MT_NIL;
            break;
        case 0xc2:
        case 0xc3:
            it->t = MT_BOOL;
            it->b = b == 0xc3;
            break;
        case 0xc4:
        case 0xc5:
        case 0xc6:
        case 0xd9:
        case 0xda:
        case 0xdb:
            it->t = b <= 0xc6 ? MT_BIN : MT_STR;
            hdr = (size_t)1 << (b <= 0xc6 ? b - 0xc4 : b - 0xd9);
            if (left < hdr)
                return false;
            body = (size_t)be(q, hdr);
            break;
        case 0xc7:
        case 0xc8:
        case 0xc9:
            it->t = MT_EXT;
            hdr = (size_t)1 << (b - 0xc7);
            if (left < hdr)
                return false;
            body = (size_t)be(q, hdr);
            hdr += 1; /* the ext type byte */
            break;
        case 0xd4:
        case 0xd5:
        case 0xd6:
        case 0xd7:
        case 0xd8:
            it->t = MT_EXT;
            hdr = 1;
            body = (size_t)1 << (b - 0xd4);
            break;
        case 0xca:
        case 0xcb:
            it->t = MT_FLOAT;
            hdr = b == 0xca ? 4 : 8;
            break;
        case 0xcc:
        case 0xcd:
        case 0xce:
        case 0xcf:
            hdr = (size_t)1 << (b - 0xcc);
            if (left < hdr)
                return false;
            it->u = be(q, hdr);
            if (it->u > INT64_MAX) {
                it->t = MT_BIGINT;
            } else {
                it->t = MT_INT;
                it->i = (int64_t)it->u;
            }
            break;
        case 0xd0:
        case 0xd1:
        case 0xd2:
        case 0xd3: {
            hdr = (size_t)1 << (b - 0xd0);
            if (left < hdr)
                return false;
            uint64_t v = be(q, hdr);
            unsigned bits = 8 * (unsigned)hdr;
            if (bits < 64 && (v >> (bits - 1)) != 0) /* sign-extend */
                v |= ~(uint64_t)0 << bits;
            it->t = MT_INT;
            it->i = (int64_t)v;
            break;
        }
        case 0xdc:
        case 0xdd:
        case 0xde:
        case 0xdf:
            it->t = b <= 0xdd ? MT_ARRAY : MT_MAP;
            hdr = (b == 0xdc || b == 0xde) ? 2 : 4;
            if (left < hdr)
                return false;
            it->n = (uint32_t)be(q, hdr);
            break;
        default: /* 0xc1, never used */
            return false;
        }
    }
    if (left < hdr || left - hdr < body)
        return false;
    /* Every array item or map key/value takes at least one more byte. */
    uint64_t min_rest = it->t == MT_ARRAY ? it->n : it->t == MT_MAP ? 2 * (uint64_t)it->n : 0;
    if (min_rest > left - hdr - body)
        return false;
    if (it->t == MT_STR || it->t == MT_BIN || it->t == MT_EXT) {
        it->p = q + hdr;
        it->n = (uint32_t)body;
    }
    c->p = q + hdr + body;
    return true;
}

/*
 * The common case of a long int list, inline: a positive fixint or a
 * uint8/16/32 that fits the frame. Returns the bytes it takes, or 0 when
 * the general path (next) must decide, which also produces the errors.
 * Decoding 8k tokens this way takes ~1/5 of the time of calling next().
 */
static inline size_t uint_fast(const cur *c, uint32_t *out)
{
    const uint8_t *p = c->p;
    size_t left = (size_t)(c->end - p);
    if (left == 0)
        return 0;
    uint8_t b = p[0];
    if (b <= 0x7f) {
        *out = b;
        return 1;
    }
    if (b == 0xcc && left >= 2) {
        *out = p[1];
        return 2;
    }
    if (b == 0xcd && left >= 3) {
        *out = (uint32_t)p[1] << 8 | p[2];
        return 3;
    }
    if (b == 0xce && left >= 5) {
        *out = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
        return 5;
    }
    return 0;
}

/* Skip one whole value (any nesting depth, no recursion). */
static bool skip(cur *c)
{
    uint64_t pending = 1;
    while (pending > 0) {
        item it;
        if (!next(c, &it))
            return false;
        pending--;
        if (it.t == MT_ARRAY)
            pending += it.n;
        else if (it.t == MT_MAP)
            pending += 2 * (uint64_t)it.n;
    }
    return true;
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
    return reject(d, LMC_ERR_FORMAT, "%s must be %s (got %s)", field, want, mtype_name(it->t));
}

static lmc_status rd(dec *d, cur *c, const char *field, item *it)
{
    return next(c, it) ? LMC_OK : malformed(d, field);
}

static lmc_status want_int(dec *d, const char *field, const item *it, int64_t lo, int64_t hi,
                           int64_t *out)
{
    if (it->t == MT_BIGINT)
        return reject(d, LMC_ERR_INVALID,
                      "%s must be in [%" PRId64 ", %" PRId64 "] (got %" PRIu64 ")", field, lo, hi,
                      it->u);
    if (it->t != MT_INT)
        return wrong_type(d, field, "an int", it);
    if (it->i < lo || it->i > hi)
        return reject(d, LMC_ERR_INVALID,
                      "%s must be in [%" PRId64 ", %" PRId64 "] (got %" PRId64 ")", field, lo, hi,
                      it->i);
    *out = it->i;
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
    lmc_status st = rd(d, c, field, &it);
    if (st != LMC_OK)
        return st;
    if (it.t != MT_STR)
        return wrong_type(d, field, "a str", &it);
    *p = it.p;
    *n = it.n;
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

static lmc_status check_model_name(dec *d, const char *field, const uint8_t *p, size_t n)
{
    if (n == 0)
        return reject(d, LMC_ERR_INVALID, "%s must not be empty", field);
    if (n > LMC_MODEL_NAME_MAX)
        return reject(d, LMC_ERR_INVALID, "%s is %zu bytes; at most %d allowed", field, n,
                      LMC_MODEL_NAME_MAX);
    if (memchr(p, '@', n) != NULL) {
        char q[80];
        return reject(d, LMC_ERR_INVALID, "%s must not contain '@' (got '%s')", field,
                      quote(p, n, q, sizeof(q)));
    }
    return LMC_OK;
}

static lmc_status check_request_id(dec *d, const char *field, const uint8_t *p, size_t n)
{
    if (n == 0)
        return reject(d, LMC_ERR_INVALID, "%s must not be empty", field);
    if (n > LMC_PROTO_MAX_REQUEST_ID)
        return reject(d, LMC_ERR_INVALID, "%s is %zu bytes; at most %d allowed", field, n,
                      LMC_PROTO_MAX_REQUEST_ID);
    return LMC_OK;
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
    if (n > LMC_PROTO_MAX_SHM_NAME)
        return reject(d, LMC_ERR_INVALID, "%s is %zu bytes; at most %d allowed", field, n,
                      LMC_PROTO_MAX_SHM_NAME);
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

/* Fields of a map payload: one bit each, to catch repeats and omissions. */
static lmc_status seen_once(dec *d, const char *map, const char *name, uint32_t *seen, uint32_t bit)
{
    if (*seen & bit)
        return reject(d, LMC_ERR_FORMAT, "%s has field '%s' twice", map, name);
    *seen |= bit;
    return LMC_OK;
}

static bool name_is(const item *k, const char *lit)
{
    size_t n = strlen(lit);
    return k->n == n && memcmp(k->p, lit, n) == 0;
}

/* ---------------------------------------------------------------------- */
/* Payload readers                                                         */
/* ---------------------------------------------------------------------- */

typedef enum key_mode {
    KEY_LOOKUP, /* worker_id must be nil */
    KEY_WORKER, /* worker_id must be set */
    KEY_ANY,    /* either (free_lookup_locks) */
} key_mode;

enum {
    K_MODEL = 1u << 0,
    K_WORLD = 1u << 1,
    K_WORKER = 1u << 2,
    K_TOKENS = 1u << 3,
    K_START = 1u << 4,
    K_END = 1u << 5,
    K_REQID = 1u << 6,
    K_SALT = 1u << 7,
    K_READERS = 1u << 8,
};

static lmc_status rd_token_ids(dec *d, cur *c, lmc_ipc_key *key)
{
    const char *field = "key.token_ids";
    item it;
    lmc_status st = rd(d, c, field, &it);
    if (st != LMC_OK)
        return st;
    if (it.t != MT_ARRAY)
        return wrong_type(d, field, "a list of unsigned 32-bit ints", &it);
    if (it.n > LMC_PROTO_MAX_TOKENS)
        return reject(d, LMC_ERR_INVALID, "%s has %" PRIu32 " tokens; at most %u allowed", field,
                      it.n, LMC_PROTO_MAX_TOKENS);
    free(key->token_ids);
    key->token_ids = NULL;
    key->n_tokens = 0;
    if (it.n == 0)
        return LMC_OK;
    /* it.n <= bytes left in the frame (checked by next), so this is bounded. */
    uint32_t *t = malloc((size_t)it.n * sizeof(*t));
    if (t == NULL)
        return reject(d, LMC_ERR_NOMEM, "%s: out of memory (%" PRIu32 " tokens)", field, it.n);
    key->token_ids = t;
    for (uint32_t k = 0; k < it.n; k++) {
        /* Fast path: the unsigned encodings a packer uses for 0..2^32-1. */
        uint32_t u;
        size_t used = uint_fast(c, &u);
        if (used > 0) {
            t[k] = u;
            c->p += used;
            continue;
        }
        item v;
        if ((st = rd(d, c, field, &v)) != LMC_OK)
            return st;
        if (v.t == MT_BIGINT)
            return reject(d, LMC_ERR_INVALID,
                          "%s must be a list of unsigned 32-bit ints (item %" PRIu32 " is %" PRIu64
                          ")",
                          field, k, v.u);
        if (v.t != MT_INT)
            return reject(d, LMC_ERR_FORMAT,
                          "%s must be a list of unsigned 32-bit ints (item %" PRIu32 " is a %s)",
                          field, k, mtype_name(v.t));
        if (v.i < 0 || v.i > (int64_t)UINT32_MAX)
            return reject(d, LMC_ERR_INVALID,
                          "%s must be a list of unsigned 32-bit ints (item %" PRIu32 " is %" PRId64
                          ")",
                          field, k, v.i);
        t[k] = (uint32_t)v.i;
    }
    key->n_tokens = it.n;
    return LMC_OK;
}

static lmc_status rd_key(dec *d, cur *c, key_mode mode, lmc_ipc_key *key)
{
    item m;
    lmc_status st = rd(d, c, "key", &m);
    if (st != LMC_OK)
        return st;
    if (m.t != MT_MAP)
        return wrong_type(d, "key", "a map", &m);
    uint32_t seen = 0;
    bool worker_nil = true;
    key->worker_id = -1;
    key->num_kv_readers = 1;
    for (uint32_t k = 0; k < m.n; k++) {
        item f;
        if ((st = rd(d, c, "key", &f)) != LMC_OK)
            return st;
        if (f.t != MT_STR)
            return reject(d, LMC_ERR_FORMAT, "key field names must be strs (got %s)",
                          mtype_name(f.t));
        const uint8_t *p;
        size_t n;
        if (name_is(&f, "model_name")) {
            if ((st = seen_once(d, "key", "model_name", &seen, K_MODEL)) != LMC_OK ||
                (st = rd_str(d, c, "key.model_name", &p, &n)) != LMC_OK ||
                (st = check_model_name(d, "key.model_name", p, n)) != LMC_OK ||
                (st = own_str(d, "key.model_name", p, n, &key->model_name)) != LMC_OK)
                return st;
        } else if (name_is(&f, "world_size")) {
            if ((st = seen_once(d, "key", "world_size", &seen, K_WORLD)) != LMC_OK ||
                (st = rd_int(d, c, "key.world_size", 1, 255, &key->world_size)) != LMC_OK)
                return st;
        } else if (name_is(&f, "worker_id")) {
            item v;
            if ((st = seen_once(d, "key", "worker_id", &seen, K_WORKER)) != LMC_OK ||
                (st = rd(d, c, "key.worker_id", &v)) != LMC_OK)
                return st;
            if (v.t != MT_NIL) {
                if ((st = want_int(d, "key.worker_id", &v, 0, 254, &key->worker_id)) != LMC_OK)
                    return st;
                worker_nil = false;
            }
        } else if (name_is(&f, "token_ids")) {
            if ((st = seen_once(d, "key", "token_ids", &seen, K_TOKENS)) != LMC_OK ||
                (st = rd_token_ids(d, c, key)) != LMC_OK)
                return st;
        } else if (name_is(&f, "start")) {
            if ((st = seen_once(d, "key", "start", &seen, K_START)) != LMC_OK ||
                (st = rd_int(d, c, "key.start", 0, INT64_MAX, &key->start)) != LMC_OK)
                return st;
        } else if (name_is(&f, "end")) {
            if ((st = seen_once(d, "key", "end", &seen, K_END)) != LMC_OK ||
                (st = rd_int(d, c, "key.end", 0, INT64_MAX, &key->end)) != LMC_OK)
                return st;
        } else if (name_is(&f, "request_id")) {
            if ((st = seen_once(d, "key", "request_id", &seen, K_REQID)) != LMC_OK ||
                (st = rd_str(d, c, "key.request_id", &p, &n)) != LMC_OK ||
                (st = check_request_id(d, "key.request_id", p, n)) != LMC_OK ||
                (st = own_str(d, "key.request_id", p, n, &key->request_id)) != LMC_OK)
                return st;
        } else if (name_is(&f, "cache_salt")) {
            item v;
            if ((st = seen_once(d, "key", "cache_salt", &seen, K_SALT)) != LMC_OK ||
                (st = rd(d, c, "key.cache_salt", &v)) != LMC_OK)
                return st;
            if (v.t == MT_NIL) /* None: no salt */
                continue;
            if (v.t != MT_STR)
                return wrong_type(d, "key.cache_salt", "a str", &v);
            if ((st = check_cache_salt(d, "key.cache_salt", v.p, v.n)) != LMC_OK ||
                (st = own_str(d, "key.cache_salt", v.p, v.n, &key->cache_salt)) != LMC_OK)
                return st;
        } else if (name_is(&f, "num_kv_readers")) {
            if ((st = seen_once(d, "key", "num_kv_readers", &seen, K_READERS)) != LMC_OK ||
                (st = rd_int(d, c, "key.num_kv_readers", 1, 128, &key->num_kv_readers)) != LMC_OK)
                return st;
        } else if (!skip(c)) { /* unknown field: forward compatibility */
            char q[80], fld[96];
            snprintf(fld, sizeof(fld), "key.%s", quote(f.p, f.n, q, sizeof(q)));
            return malformed(d, fld);
        }
    }

    static const struct {
        uint32_t bit;
        const char *name;
    } required[] = {
        {K_MODEL, "model_name"}, {K_WORLD, "world_size"}, {K_TOKENS, "token_ids"},
        {K_START, "start"},      {K_END, "end"},          {K_REQID, "request_id"},
    };
    for (size_t k = 0; k < sizeof(required) / sizeof(required[0]); k++)
        if (!(seen & required[k].bit))
            return reject(d, LMC_ERR_FORMAT, "key is missing field '%s'", required[k].name);

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

enum {
    R_SHM = 1u << 0,
    R_BLOCKS = 1u << 1,
    R_TPB = 1u << 2,
    R_BPT = 1u << 3,
    R_DTYPE = 1u << 4,
};

static lmc_status rd_region(dec *d, cur *c, lmc_kv_region_desc *r)
{
    item m;
    lmc_status st = rd(d, c, "kv_cache", &m);
    if (st != LMC_OK)
        return st;
    if (m.t != MT_MAP)
        return wrong_type(d, "kv_cache", "a map", &m);
    uint32_t seen = 0;
    for (uint32_t k = 0; k < m.n; k++) {
        item f;
        if ((st = rd(d, c, "kv_cache", &f)) != LMC_OK)
            return st;
        if (f.t != MT_STR)
            return reject(d, LMC_ERR_FORMAT, "kv_cache field names must be strs (got %s)",
                          mtype_name(f.t));
        const uint8_t *p;
        size_t n;
        if (name_is(&f, "shm_name")) {
            if ((st = seen_once(d, "kv_cache", "shm_name", &seen, R_SHM)) != LMC_OK ||
                (st = rd_str(d, c, "kv_cache.shm_name", &p, &n)) != LMC_OK ||
                (st = check_shm_name(d, "kv_cache.shm_name", p, n)) != LMC_OK ||
                (st = own_str(d, "kv_cache.shm_name", p, n, &r->shm_name)) != LMC_OK)
                return st;
        } else if (name_is(&f, "num_blocks")) {
            if ((st = seen_once(d, "kv_cache", "num_blocks", &seen, R_BLOCKS)) != LMC_OK ||
                (st = rd_int(d, c, "kv_cache.num_blocks", 1, LMC_PROTO_MAX_BLOCKS,
                             &r->num_blocks)) != LMC_OK)
                return st;
        } else if (name_is(&f, "tokens_per_block")) {
            if ((st = seen_once(d, "kv_cache", "tokens_per_block", &seen, R_TPB)) != LMC_OK ||
                (st = rd_int(d, c, "kv_cache.tokens_per_block", 1, INT64_MAX,
                             &r->tokens_per_block)) != LMC_OK)
                return st;
        } else if (name_is(&f, "bytes_per_token")) {
            if ((st = seen_once(d, "kv_cache", "bytes_per_token", &seen, R_BPT)) != LMC_OK ||
                (st = rd_int(d, c, "kv_cache.bytes_per_token", 1, INT64_MAX,
                             &r->bytes_per_token)) != LMC_OK)
                return st;
        } else if (name_is(&f, "dtype")) {
            if ((st = seen_once(d, "kv_cache", "dtype", &seen, R_DTYPE)) != LMC_OK ||
                (st = rd_str(d, c, "kv_cache.dtype", &p, &n)) != LMC_OK)
                return st;
            lmc_error e;
            if (lmc_dtype_from_name((const char *)p, n, &r->dtype, &e) != LMC_OK) {
                char q[80];
                return reject(d, LMC_ERR_INVALID, "kv_cache.dtype: unknown torch dtype '%s'",
                              quote(p, n, q, sizeof(q)));
            }
        } else if (!skip(c)) {
            char q[80], fld[96];
            snprintf(fld, sizeof(fld), "kv_cache.%s", quote(f.p, f.n, q, sizeof(q)));
            return malformed(d, fld);
        }
    }
    static const struct {
        uint32_t bit;
        const char *name;
    } required[] = {
        {R_SHM, "shm_name"},        {R_BLOCKS, "num_blocks"}, {R_TPB, "tokens_per_block"},
        {R_BPT, "bytes_per_token"}, {R_DTYPE, "dtype"},
    };
    for (size_t k = 0; k < sizeof(required) / sizeof(required[0]); k++)
        if (!(seen & required[k].bit))
            return reject(d, LMC_ERR_FORMAT, "kv_cache is missing field '%s'", required[k].name);

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
    lmc_status st = rd(d, c, "block_ids", &outer);
    if (st != LMC_OK)
        return st;
    if (outer.t != MT_ARRAY)
        return wrong_type(d, "block_ids", "a list of one list of block ids", &outer);
    if (outer.n != 1)
        return reject(d, LMC_ERR_INVALID,
                      "block_ids has %" PRIu32
                      " KV groups; this server supports exactly one (a list of one list)",
                      outer.n);
    item inner;
    if ((st = rd(d, c, "block_ids[0]", &inner)) != LMC_OK)
        return st;
    if (inner.t != MT_ARRAY)
        return wrong_type(d, "block_ids[0]", "a list of block ids", &inner);
    if (inner.n > LMC_PROTO_MAX_BLOCKS)
        return reject(d, LMC_ERR_INVALID, "block_ids[0] has %" PRIu32 " ids; at most %u allowed",
                      inner.n, LMC_PROTO_MAX_BLOCKS);
    if (inner.n == 0)
        return LMC_OK;
    int64_t *ids = malloc((size_t)inner.n * sizeof(*ids));
    if (ids == NULL)
        return reject(d, LMC_ERR_NOMEM, "block_ids: out of memory (%" PRIu32 " ids)", inner.n);
    req->block_ids = ids;
    for (uint32_t k = 0; k < inner.n; k++) {
        uint32_t u;
        size_t used = uint_fast(c, &u);
        if (used > 0) {
            ids[k] = u;
            c->p += used;
            continue;
        }
        item v;
        if ((st = rd(d, c, "block_ids[0]", &v)) != LMC_OK)
            return st;
        if (v.t != MT_INT && v.t != MT_BIGINT)
            return reject(d, LMC_ERR_FORMAT,
                          "block_ids[0] must be a list of non-negative ints (item %" PRIu32
                          " is a %s)",
                          k, mtype_name(v.t));
        if (v.t == MT_BIGINT)
            return reject(d, LMC_ERR_INVALID,
                          "block_ids[0] must be a list of non-negative ints (item %" PRIu32
                          " is %" PRIu64 ")",
                          k, v.u);
        if (v.i < 0)
            return reject(d, LMC_ERR_INVALID,
                          "block_ids[0] must be a list of non-negative ints (item %" PRIu32
                          " is %" PRId64 ")",
                          k, v.i);
        ids[k] = v.i;
    }
    req->n_block_ids = inner.n;
    return LMC_OK;
}

static lmc_status rd_bin_ignored(dec *d, cur *c, const char *field)
{
    item it;
    lmc_status st = rd(d, c, field, &it);
    if (st != LMC_OK)
        return st;
    return it.t == MT_BIN ? LMC_OK : wrong_type(d, field, "bytes (bin)", &it);
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
    if (st != LMC_OK || it.t == MT_NIL)
        return st;
    if (it.t != MT_INT && it.t != MT_BIGINT)
        return wrong_type(d, "instance_id", "an int or nil", &it);
    if ((st = want_int(d, "instance_id", &it, INT64_MIN, INT64_MAX, &req->instance_id)) != LMC_OK)
        return st;
    req->has_instance_id = true;
    return LMC_OK;
}

static lmc_status p_lookup(dec *d, cur *f, size_t n, lmc_request *req)
{
    lmc_status st = rd_key(d, &f[0], KEY_LOOKUP, &req->key);
    if (st == LMC_OK && n > 1) {
        int64_t tp; /* legacy, ignored */
        st = rd_int(d, &f[1], "tp_size", INT64_MIN, INT64_MAX, &tp);
    }
    return st;
}

static lmc_status p_free_locks(dec *d, cur *f, size_t n, lmc_request *req)
{
    lmc_status st = rd_key(d, &f[0], KEY_ANY, &req->key);
    if (st == LMC_OK && n > 1) {
        int64_t tp;
        st = rd_int(d, &f[1], "tp_size", INT64_MIN, INT64_MAX, &tp);
    }
    return st;
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
    lmc_status st = rd(d, &f[0], "force", &it);
    if (st != LMC_OK)
        return st;
    if (it.t != MT_BOOL)
        return wrong_type(d, "force", "a bool", &it);
    req->force = it.b;
    return LMC_OK;
}

typedef struct op_entry {
    lmc_op op;
    uint8_t min, max; /* payload frames */
    const char *usage;
    payload_fn fn;
} op_entry;

static const op_entry OPS[] = {
    {LMC_OP_REGISTER_KV_CACHE, 5, 5, "instance_id, kv_cache, model_name, world_size, worker_id",
     p_register},
    {LMC_OP_UNREGISTER_KV_CACHE, 1, 1, "instance_id", p_instance},
    {LMC_OP_STORE, 4, 4, "key, instance_id, block_ids, event_ipc_handle", p_transfer},
    {LMC_OP_RETRIEVE, 4, 5, "key, instance_id, block_ids, event_ipc_handle, [skip_first_n_tokens]",
     p_transfer},
    {LMC_OP_LOOKUP, 1, 2, "key, [tp_size]", p_lookup},
    {LMC_OP_QUERY_PREFETCH_STATUS, 1, 1, "request_id", p_request_id},
    {LMC_OP_QUERY_PREFETCH_LOOKUP_HITS, 1, 1, "request_id", p_request_id},
    {LMC_OP_FREE_LOOKUP_LOCKS, 1, 2, "key, [tp_size]", p_free_locks},
    {LMC_OP_END_SESSION, 1, 2, "request_id, [end_info]", p_request_id},
    {LMC_OP_CLEAR, 0, 1, "[force]", p_clear},
    {LMC_OP_GET_CHUNK_SIZE, 0, 0, "none", p_none},
    {LMC_OP_PING, 0, 1, "[instance_id]", p_ping},
    {LMC_OP_NOOP, 0, 0, "none", p_none},
};

static const op_entry *op_entry_of(lmc_op op)
{
    for (size_t k = 0; k < sizeof(OPS) / sizeof(OPS[0]); k++)
        if (OPS[k].op == op)
            return &OPS[k];
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Requests                                                                */
/* ---------------------------------------------------------------------- */

static cur frame_cur(const void *const *frames, const size_t *lens, size_t k)
{
    const uint8_t *p = frames[k] != NULL ? frames[k] : (const uint8_t *)"";
    cur c = {p, p + (frames[k] != NULL ? lens[k] : 0)};
    return c;
}

static lmc_status decode_op(dec *d, cur *c, lmc_op *op)
{
    item it;
    lmc_status st = rd(d, c, "operation", &it);
    if (st != LMC_OK)
        return st;
    if (c->p != c->end)
        return reject(d, LMC_ERR_FORMAT, "operation: %zu trailing bytes after the value",
                      (size_t)(c->end - c->p));
    if (it.t == MT_INT || it.t == MT_BIGINT) {
        if (it.t == MT_INT && op_implemented(it.i)) {
            *op = (lmc_op)it.i;
            return LMC_OK;
        }
        const char *legacy = it.t == MT_INT ? lmc_op_legacy_name(it.i) : NULL;
        if (legacy != NULL)
            return reject(d, LMC_ERR_INVALID,
                          "operation id %" PRId64 " (%s) is not implemented by this server", it.i,
                          legacy);
        if (it.t == MT_BIGINT)
            return reject(d, LMC_ERR_INVALID, "unknown operation id %" PRIu64, it.u);
        return reject(d, LMC_ERR_INVALID, "unknown operation id %" PRId64, it.i);
    }
    if (it.t == MT_STR) {
        for (int64_t id = 1; id < N_LEGACY; id++) {
            if (strlen(LEGACY_NAMES[id]) != it.n || memcmp(LEGACY_NAMES[id], it.p, it.n) != 0)
                continue;
            if (op_implemented(id)) {
                *op = (lmc_op)id;
                return LMC_OK;
            }
            return reject(d, LMC_ERR_INVALID, "operation '%s' is not implemented by this server",
                          LEGACY_NAMES[id]);
        }
        char q[80];
        return reject(d, LMC_ERR_INVALID, "unknown operation '%s'",
                      quote(it.p, it.n, q, sizeof(q)));
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
    if (u.p != u.end)
        return reject(&d, LMC_ERR_FORMAT, "request_uid: %zu trailing bytes after the value",
                      (size_t)(u.end - u.p));
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
        if (c[k].p != c[k].end) {
            st = reject(&d, LMC_ERR_FORMAT,
                        "payload frame %zu has %zu trailing bytes after the value", k + 1,
                        (size_t)(c[k].end - c[k].p));
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
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    return pk;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s != NULL ? s : "", n);
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
    pack_str(&pk, s);
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
    pack_str(&pk, "error");
    pack_str(&pk, message);
}

void lmc_request_encode_uid_op(msgpack_sbuffer *uid, msgpack_sbuffer *op, int64_t request_uid,
                               lmc_op operation)
{
    msgpack_packer pu = packer_of(uid);
    msgpack_pack_int64(&pu, request_uid);
    msgpack_packer po = packer_of(op);
    msgpack_pack_int(&po, (int)operation);
}

void lmc_ipc_key_encode(msgpack_packer *pk, const lmc_ipc_key *key)
{
    msgpack_pack_map(pk, 9);
    pack_str(pk, "model_name");
    pack_str(pk, key->model_name);
    pack_str(pk, "world_size");
    msgpack_pack_int64(pk, key->world_size);
    pack_str(pk, "worker_id");
    if (key->worker_id < 0)
        msgpack_pack_nil(pk);
    else
        msgpack_pack_int64(pk, key->worker_id);
    pack_str(pk, "token_ids");
    msgpack_pack_array(pk, key->n_tokens);
    for (size_t k = 0; k < key->n_tokens; k++)
        msgpack_pack_uint32(pk, key->token_ids[k]);
    pack_str(pk, "start");
    msgpack_pack_int64(pk, key->start);
    pack_str(pk, "end");
    msgpack_pack_int64(pk, key->end);
    pack_str(pk, "request_id");
    pack_str(pk, key->request_id);
    pack_str(pk, "cache_salt");
    pack_str(pk, key->cache_salt);
    pack_str(pk, "num_kv_readers");
    msgpack_pack_int64(pk, key->num_kv_readers);
}

void lmc_kv_region_encode(msgpack_packer *pk, const lmc_kv_region_desc *r)
{
    msgpack_pack_map(pk, 5);
    pack_str(pk, "shm_name");
    pack_str(pk, r->shm_name);
    pack_str(pk, "num_blocks");
    msgpack_pack_int64(pk, r->num_blocks);
    pack_str(pk, "tokens_per_block");
    msgpack_pack_int64(pk, r->tokens_per_block);
    pack_str(pk, "bytes_per_token");
    msgpack_pack_int64(pk, r->bytes_per_token);
    pack_str(pk, "dtype");
    pack_str(pk, lmc_dtype_name(r->dtype));
}

void lmc_block_ids_encode(msgpack_packer *pk, const int64_t *ids, size_t n)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, n);
    for (size_t k = 0; k < n; k++)
        msgpack_pack_int64(pk, ids[k]);
}
