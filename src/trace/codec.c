/*
 * codec.c -- the codec registry and the value <-> msgpack conversion (see
 * codec.h and spec/trace-format.md section 2).
 *
 * Owns: the process-wide registry. The built-in codecs are registered once,
 * under pthread_once, at the first lookup; lmc_codec_register may add more
 * at start-up. Lookups are an array index by kind and a scan of a small tag
 * table (a handful of entries: cheaper than hashing the tag).
 *
 * Threads: any thread may encode and decode. Registration is serialised by
 * a mutex; each entry is filled before it is published with a release
 * store (the kind slot and the entry count), and lookups read with acquire
 * loads, so a lookup never sees a half-written entry and takes no lock.
 *
 * Encoding matches msgspec byte for byte: msgpack-c already picks the
 * smallest int form (unsigned forms for non-negative values), float64 for
 * doubles, bin8 for short bytes and str8 for 32..255-byte strings, exactly
 * the rules of spec section 1.2. The hot paths (ObjectKey payloads and tag
 * wrappers) are written directly in those same forms, one packer call per
 * value instead of one per field; the tests compare them with msgpack-c.
 *
 * Decoding copies strings and bytes into the caller's arena, so a decoded
 * value never points into the msgpack buffer or msgpack-c's zone: it lives
 * exactly as long as the arena. Decoded keys are complete lmc_object_keys
 * (validated, strings interned); decoded PrefetchHandles point into the
 * arena and must not be passed to lmc_prefetch_handle_clear.
 *
 * Recursion depth is bounded by a thread-local counter that every nested
 * encode/decode (including those made by codecs) goes through, so a cyclic
 * value or a hostile payload cannot exhaust the stack.
 */
#include "trace/codec.h"
#include "core/msgpack_util.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_KEY "__t__"
#define TAG_VAL "v"
#define TUPLE_TAG "tuple"
#define MAX_DEPTH 64
/* Bound on decoded index arrays (PrefetchHandle), far above any real batch. */
#define MAX_INDICES (1u << 24)

/* ---------------------------------------------------------------------- */
/* Direct msgpack writes                                                   */
/* ---------------------------------------------------------------------- */

/*
 * The hot values (ObjectKeys, 16 or more per record, and every tag wrapper)
 * are written into a stack buffer and handed to the packer in one call:
 * going through msgpack-c piece by piece costs a callback and a memcpy per
 * field and made a 16-key record take ~4 us to encode. These writers emit
 * exactly msgspec's forms (the same ones msgpack-c picks); the caller
 * guarantees the room.
 */
static uint8_t *w_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static uint8_t *w_str(uint8_t *p, const char *s, size_t n)
{
    if (n < 32) {
        *p++ = (uint8_t)(0xa0 | n);
    } else if (n < 256) {
        *p++ = 0xd9;
        *p++ = (uint8_t)n;
    } else if (n < 65536) {
        *p++ = 0xda;
        p = w_be(p, n, 2);
    } else {
        *p++ = 0xdb;
        p = w_be(p, n, 4);
    }
    if (n > 0)
        memcpy(p, s, n);
    return p + n;
}

static uint8_t *w_bin(uint8_t *p, const void *b, size_t n)
{
    if (n < 256) {
        *p++ = 0xc4;
        *p++ = (uint8_t)n;
    } else if (n < 65536) {
        *p++ = 0xc5;
        p = w_be(p, n, 2);
    } else {
        *p++ = 0xc6;
        p = w_be(p, n, 4);
    }
    if (n > 0)
        memcpy(p, b, n);
    return p + n;
}

/* At most 9 bytes. */
static uint8_t *w_int(uint8_t *p, int64_t v)
{
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        if (u < 128) {
            *p++ = (uint8_t)u;
        } else if (u < 256) {
            *p++ = 0xcc;
            *p++ = (uint8_t)u;
        } else if (u < 65536) {
            *p++ = 0xcd;
            p = w_be(p, u, 2);
        } else if (u < (1ULL << 32)) {
            *p++ = 0xce;
            p = w_be(p, u, 4);
        } else {
            *p++ = 0xcf;
            p = w_be(p, u, 8);
        }
    } else if (v >= -32) {
        *p++ = (uint8_t)(int8_t)v;
    } else if (v >= -128) {
        *p++ = 0xd0;
        *p++ = (uint8_t)(int8_t)v;
    } else if (v >= -32768) {
        *p++ = 0xd1;
        p = w_be(p, (uint16_t)(int16_t)v, 2);
    } else if (v >= INT32_MIN) {
        *p++ = 0xd2;
        p = w_be(p, (uint32_t)(int32_t)v, 4);
    } else {
        *p++ = 0xd3;
        p = w_be(p, (uint64_t)v, 8);
    }
    return p;
}

/* Append raw, already-encoded bytes through the packer's writer. */
static int pack_raw(msgpack_packer *pk, const void *p, size_t n)
{
    return pk->callback(pk->data, (const char *)p, n);
}

/* ---------------------------------------------------------------------- */
/* Registry                                                                */
/* ---------------------------------------------------------------------- */

/* The wrapper prefix {"__t__": <tag>, "v": is the same bytes for every value of a kind. */
#define WRAP_MAX 64

static lmc_codec g_codecs[LMC_TV_KIND_MAX];
static size_t g_tag_len[LMC_TV_KIND_MAX];
static uint8_t g_wrap[LMC_TV_KIND_MAX][WRAP_MAX];
static size_t g_wrap_len[LMC_TV_KIND_MAX]; /* 0: tag too long, pack it piece by piece */
static _Atomic size_t g_ncodecs;
static _Atomic(const lmc_codec *) g_by_kind[LMC_TV_KIND_MAX];
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void register_builtins(void);

static void ensure_builtins(void)
{
    pthread_once(&g_once, register_builtins);
}

static const lmc_codec *find_tag(const char *tag, size_t len)
{
    size_t n = atomic_load_explicit(&g_ncodecs, memory_order_acquire);
    for (size_t i = 0; i < n; i++) {
        if (g_tag_len[i] == len && memcmp(g_codecs[i].tag, tag, len) == 0)
            return &g_codecs[i];
    }
    return NULL;
}

static lmc_status register_locked(const lmc_codec *c, lmc_error *err)
{
    if (c == NULL || c->tag == NULL || c->tag[0] == '\0' || c->encode == NULL || c->decode == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: a codec needs a tag, an encoder and a decoder");
    const char *name = c->name != NULL ? c->name : c->tag;
    if (c->kind < LMC_TV_TUPLE || c->kind >= LMC_TV_KIND_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: cannot register a codec for kind %" PRIu32
                             " ('%s'): only tagged kinds %d..%d can have one",
                             c->kind, name, (int)LMC_TV_TUPLE + 1, (int)LMC_TV_KIND_MAX - 1);
    if (c->kind == LMC_TV_TUPLE || strcmp(c->tag, TUPLE_TAG) == 0)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: the 'tuple' codec is built in and cannot be replaced");
    const lmc_codec *old = atomic_load_explicit(&g_by_kind[c->kind], memory_order_acquire);
    if (old != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: a codec is already registered for type '%s'",
                             old->name != NULL ? old->name : old->tag);
    if (find_tag(c->tag, strlen(c->tag)) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: tag '%s' is already registered",
                             c->tag);
    size_t n = atomic_load_explicit(&g_ncodecs, memory_order_relaxed);
    if (n >= LMC_TV_KIND_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: the registry is full");
    g_codecs[n] = *c;
    g_codecs[n].name = name;
    g_tag_len[n] = strlen(c->tag);
    g_wrap_len[n] = 0;
    if (g_tag_len[n] + 10 <= WRAP_MAX) {
        uint8_t *p = g_wrap[n];
        *p++ = 0x82;
        p = w_str(p, TAG_KEY, strlen(TAG_KEY));
        p = w_str(p, c->tag, g_tag_len[n]);
        p = w_str(p, TAG_VAL, strlen(TAG_VAL));
        g_wrap_len[n] = (size_t)(p - g_wrap[n]);
    }
    atomic_store_explicit(&g_ncodecs, n + 1, memory_order_release);
    atomic_store_explicit(&g_by_kind[c->kind], &g_codecs[n], memory_order_release);
    return LMC_OK;
}

lmc_status lmc_codec_register(const lmc_codec *c, lmc_error *err)
{
    ensure_builtins();
    pthread_mutex_lock(&g_reg_lock);
    lmc_status st = register_locked(c, err);
    pthread_mutex_unlock(&g_reg_lock);
    return st;
}

const lmc_codec *lmc_codec_for_kind(uint32_t kind)
{
    ensure_builtins();
    if (kind >= LMC_TV_KIND_MAX)
        return NULL;
    return atomic_load_explicit(&g_by_kind[kind], memory_order_acquire);
}

const lmc_codec *lmc_codec_for_tag(const char *tag, size_t len)
{
    ensure_builtins();
    if (tag == NULL)
        return NULL;
    return find_tag(tag, len);
}

/* The Python type name of a kind, for messages. */
static const char *kind_name(uint32_t kind, char *tmp, size_t len)
{
    static const char *const names[LMC_TV_BUILTIN_COUNT_] = {
        [LMC_TV_NIL] = "NoneType",
        [LMC_TV_BOOL] = "bool",
        [LMC_TV_INT] = "int",
        [LMC_TV_UINT] = "int",
        [LMC_TV_FLOAT] = "float",
        [LMC_TV_STR] = "str",
        [LMC_TV_BIN] = "bytes",
        [LMC_TV_LIST] = "list",
        [LMC_TV_MAP] = "dict",
        [LMC_TV_TUPLE] = "tuple",
        [LMC_TV_SET] = "set",
        [LMC_TV_OBJECT_KEY] = "ObjectKey",
        [LMC_TV_LAYOUT] = "MemoryLayoutDesc",
        [LMC_TV_DTYPE] = "torch.dtype",
        [LMC_TV_SIZE] = "torch.Size",
        [LMC_TV_TRIM_POLICY] = "TrimPolicy",
        [LMC_TV_PREFETCH_HANDLE] = "PrefetchHandle",
    };
    if (kind < LMC_TV_BUILTIN_COUNT_)
        return names[kind];
    const lmc_codec *c = lmc_codec_for_kind(kind);
    if (c != NULL)
        return c->name;
    snprintf(tmp, len, "kind %" PRIu32, kind);
    return tmp;
}

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */

static _Thread_local int t_depth;

#define PK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) != 0)                                                                           \
            return pack_failed(err);                                                               \
    } while (0)

static lmc_status pack_failed(lmc_error *err)
{
    return lmc_error_set(err, LMC_ERR_NOMEM, "trace.codecs: out of memory while encoding");
}

static bool obj_str_is(const msgpack_object *o, const char *lit, size_t n)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           (n == 0 || memcmp(o->via.str.ptr, lit, n) == 0);
}

/* The value under key in a msgpack map (the last one, as a Python dict keeps), or NULL. */
static const msgpack_object *map_get_n(const msgpack_object *map, const char *key, size_t n)
{
    const msgpack_object *found = NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        if (obj_str_is(&map->via.map.ptr[i].key, key, n))
            found = &map->via.map.ptr[i].val;
    }
    return found;
}
#define map_get(map, lit) map_get_n((map), (lit), sizeof(lit) - 1)

/* One pass over a payload map filling the named slots (the last duplicate wins). */
typedef struct map_field {
    const char *name;
    size_t len;
    const msgpack_object **slot;
} map_field;
#define FIELD(lit, slot)                                                                           \
    {                                                                                              \
        (lit), sizeof(lit) - 1, (slot)                                                             \
    }

static void map_fields(const msgpack_object *map, const map_field *f, size_t nf)
{
    for (size_t j = 0; j < nf; j++)
        *f[j].slot = NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            continue;
        for (size_t j = 0; j < nf; j++) {
            if (k->via.str.size == f[j].len && memcmp(k->via.str.ptr, f[j].name, f[j].len) == 0) {
                *f[j].slot = &map->via.map.ptr[i].val;
                break;
            }
        }
    }
}

static void *arena_alloc(lmc_arena *a, size_t n, lmc_error *err)
{
    void *p = lmc_arena_alloc(a, n);
    if (p == NULL)
        lmc_error_set(err, LMC_ERR_NOMEM, "trace.codecs: out of memory while decoding");
    return p;
}

static void *arena_array(lmc_arena *a, size_t n, size_t size, lmc_error *err)
{
    if (size != 0 && n > SIZE_MAX / size) {
        lmc_error_set(err, LMC_ERR_NOMEM, "trace.codecs: out of memory while decoding");
        return NULL;
    }
    return arena_alloc(a, n * size, err);
}

/* A NUL-terminated copy of n bytes in the arena. */
static char *arena_strdup(lmc_arena *a, const char *s, size_t n, lmc_error *err)
{
    char *p = arena_alloc(a, n + 1, err);
    if (p == NULL)
        return NULL;
    if (n > 0)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static lmc_status bad_payload(lmc_error *err, const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static lmc_status bad_payload(lmc_error *err, const char *tag, const char *fmt, ...)
{
    if (err == NULL)
        return LMC_ERR_FORMAT;
    char detail[LMC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return lmc_error_set(err, LMC_ERR_FORMAT, "trace.codecs: invalid %s payload: %s", tag, detail);
}

/* Rewrite a validation error from types.c as a format error naming the tag. */
static lmc_status as_format_error(lmc_error *err, const char *tag)
{
    if (err == NULL)
        return LMC_ERR_FORMAT;
    if (err->code == LMC_ERR_NOMEM)
        return LMC_ERR_NOMEM;
    lmc_error_prefix(err, "trace.codecs: invalid %s payload", tag);
    err->code = LMC_ERR_FORMAT;
    return LMC_ERR_FORMAT;
}

static lmc_status get_int(const msgpack_object *o, const char *tag, const char *field, int64_t *out,
                          lmc_error *err)
{
    if (lmc_msgpack_get_int64(o, out))
        return LMC_OK;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return bad_payload(err, tag, "'%s' %" PRIu64 " is out of range", field, o->via.u64);
    return bad_payload(err, tag, "'%s' must be an int, got %s", field, lmc_msgpack_type_name(o));
}

static lmc_status get_float(const msgpack_object *o, const char *tag, const char *field,
                            double *out, lmc_error *err)
{
    if (lmc_msgpack_get_double(o, out))
        return LMC_OK;
    return bad_payload(err, tag, "'%s' must be a float, got %s", field, lmc_msgpack_type_name(o));
}

static lmc_status need_field(const msgpack_object *o, const char *tag, const char *field,
                             lmc_error *err)
{
    if (o == NULL)
        return bad_payload(err, tag, "missing field '%s'", field);
    return LMC_OK;
}

static lmc_status need_type(const msgpack_object *o, msgpack_object_type type, const char *tag,
                            const char *field, const char *want, lmc_error *err)
{
    if (o->type != type)
        return bad_payload(err, tag, "'%s' must be %s, got %s", field, want,
                           lmc_msgpack_type_name(o));
    return LMC_OK;
}

/* An array of non-negative ints that fit in uint32 into the arena. */
static lmc_status get_indices(const msgpack_object *o, const char *tag, const char *field,
                              lmc_arena *a, uint32_t **out, size_t *n, lmc_error *err)
{
    lmc_status st = need_type(o, MSGPACK_OBJECT_ARRAY, tag, field, "a list", err);
    if (st != LMC_OK)
        return st;
    size_t cnt = o->via.array.size;
    if (cnt > MAX_INDICES)
        return bad_payload(err, tag, "'%s' has %zu entries; at most %u allowed", field, cnt,
                           MAX_INDICES);
    uint32_t *idx = arena_array(a, cnt, sizeof(uint32_t), err);
    if (idx == NULL)
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < cnt; i++) {
        int64_t v = 0;
        if ((st = get_int(&o->via.array.ptr[i], tag, field, &v, err)) != LMC_OK)
            return st;
        if (v < 0 || v > (int64_t)UINT32_MAX)
            return bad_payload(err, tag, "'%s' index %" PRId64 " is out of range", field, v);
        idx[i] = (uint32_t)v;
    }
    *out = idx;
    *n = cnt;
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Built-in codecs                                                         */
/* ---------------------------------------------------------------------- */

static lmc_status null_value(lmc_error *err, const char *name)
{
    return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: %s value is NULL", name);
}

/* ObjectKey: {chunk_hash, model_name, kv_rank, object_group_id, cache_salt}. */

/* A literal field name as a fixstr. */
#define W_NAME(p, lit) w_str((p), (lit), sizeof(lit) - 1)

/*
 * An ObjectKey's fields after chunk_hash, model_name to cache_salt: at most
 * model_len + salt_len + 80 bytes (four names: 46, two ints: 18, two str
 * headers: 10). The keys of one call share them, so the "keys" encoder
 * writes them once per call and copies them per key.
 */
#define KEY_TAIL_FIXED 80
static uint8_t *w_key_tail(uint8_t *p, const lmc_object_key *k, const char *model, size_t model_len,
                           const char *salt, size_t salt_len)
{
    p = W_NAME(p, "model_name");
    p = w_str(p, model, model_len);
    p = W_NAME(p, "kv_rank");
    p = w_int(p, k->kv_rank);
    p = W_NAME(p, "object_group_id");
    p = w_int(p, k->object_group_id);
    p = W_NAME(p, "cache_salt");
    return w_str(p, salt, salt_len);
}

static lmc_status enc_object_key(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    const lmc_object_key *k = v->u.key;
    if (k == NULL)
        return null_value(err, "ObjectKey");
    const char *model = k->model_name != NULL ? k->model_name : "";
    const char *salt = k->cache_salt != NULL ? k->cache_salt : "";
    const uint8_t *hash = lmc_object_key_hash_bytes(k);
    size_t hash_len = k->chunk_hash_len;
    size_t model_len = strlen(model), salt_len = strlen(salt);

    /* Fixed part: map header, five key names, two ints, three length headers. */
    uint8_t buf[512];
    if (model_len + salt_len + hash_len + 96 <= sizeof(buf)) {
        uint8_t *p = buf;
        *p++ = 0x85;
        p = W_NAME(p, "chunk_hash");
        p = w_bin(p, hash, hash_len);
        p = w_key_tail(p, k, model, model_len, salt, salt_len);
        PK(pack_raw(pk, buf, (size_t)(p - buf)));
        return LMC_OK;
    }
    /* Long strings: piece by piece. */
    PK(msgpack_pack_map(pk, 5));
    PK(lmc_msgpack_pack_cstr(pk, "chunk_hash"));
    PK(msgpack_pack_bin(pk, hash_len));
    if (hash_len > 0)
        PK(msgpack_pack_bin_body(pk, hash, hash_len));
    PK(lmc_msgpack_pack_cstr(pk, "model_name"));
    PK(lmc_msgpack_pack_cstr(pk, model));
    PK(lmc_msgpack_pack_cstr(pk, "kv_rank"));
    PK(msgpack_pack_int64(pk, k->kv_rank));
    PK(lmc_msgpack_pack_cstr(pk, "object_group_id"));
    PK(msgpack_pack_int64(pk, k->object_group_id));
    PK(lmc_msgpack_pack_cstr(pk, "cache_salt"));
    PK(lmc_msgpack_pack_cstr(pk, salt));
    return LMC_OK;
}

static lmc_status dec_object_key(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    static const char tag[] = "ObjectKey";
    lmc_status st;
    if (p->type != MSGPACK_OBJECT_MAP)
        return bad_payload(err, tag, "expected a map, got %s", lmc_msgpack_type_name(p));
    const msgpack_object *hash, *model, *rank, *group, *salt;
    const map_field fields[] = {FIELD("chunk_hash", &hash), FIELD("model_name", &model),
                                FIELD("kv_rank", &rank), FIELD("object_group_id", &group),
                                FIELD("cache_salt", &salt)};
    map_fields(p, fields, sizeof(fields) / sizeof(fields[0]));
    if ((st = need_field(hash, tag, "chunk_hash", err)) != LMC_OK ||
        (st = need_type(hash, MSGPACK_OBJECT_BIN, tag, "chunk_hash", "bytes", err)) != LMC_OK ||
        (st = need_field(model, tag, "model_name", err)) != LMC_OK ||
        (st = need_type(model, MSGPACK_OBJECT_STR, tag, "model_name", "a str", err)) != LMC_OK ||
        (st = need_field(rank, tag, "kv_rank", err)) != LMC_OK)
        return st;
    int64_t kv_rank = 0, group_id = 0;
    if ((st = get_int(rank, tag, "kv_rank", &kv_rank, err)) != LMC_OK)
        return st;
    if (group != NULL && (st = get_int(group, tag, "object_group_id", &group_id, err)) != LMC_OK)
        return st;
    const char *salt_ptr = "";
    size_t salt_len = 0;
    if (salt != NULL) {
        if ((st = need_type(salt, MSGPACK_OBJECT_STR, tag, "cache_salt", "a str", err)) != LMC_OK)
            return st;
        salt_ptr = salt->via.str.ptr;
        salt_len = salt->via.str.size;
    }
    lmc_object_key *k = arena_alloc(a, sizeof(*k), err);
    if (k == NULL)
        return LMC_ERR_NOMEM;
    /* LMCache takes a chunk hash of any length. */
    lmc_object_key_cache kc = {.long_hashes = true};
    st = lmc_object_key_make_cached(&kc, k, hash->via.bin.ptr, hash->via.bin.size,
                                    model->via.str.ptr, model->via.str.size, kv_rank, group_id,
                                    salt_ptr, salt_len, err);
    if (st != LMC_OK)
        return as_format_error(err, tag);
    out->kind = LMC_TV_OBJECT_KEY;
    out->u.key = k;
    return LMC_OK;
}

/* MemoryLayoutDesc: {"shapes": [[int...]...], "dtypes": [str...]}. */
/*
 * {"shapes": [[dims...]...], "dtypes": [names...]}, written into a stack
 * buffer and handed to the packer in one call (a reserve_write record
 * carries one; piece by piece it took a dozen packer calls). Every count
 * is at most 8, so the arrays are fixarrays, as msgpack-c writes them.
 */
#define LAYOUT_FIXED 32 /* map header, two names, two array headers */
#define LAYOUT_INT_MAX 9
#define LAYOUT_STR_HDR_MAX 5

static lmc_status enc_layout(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    _Static_assert(LMC_LAYOUT_MAX_TENSORS < 16 && LMC_SHAPE_MAX_DIMS < 16,
                   "layout arrays are fixarrays");
    const lmc_layout_desc *d = v->u.layout;
    if (d == NULL)
        return null_value(err, "MemoryLayoutDesc");
    if (d->count > LMC_LAYOUT_MAX_TENSORS)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: MemoryLayoutDesc has %" PRIu32 " tensors", d->count);
    size_t need = LAYOUT_FIXED;
    for (uint32_t i = 0; i < d->count; i++) {
        if (d->shapes[i].ndim > LMC_SHAPE_MAX_DIMS)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "trace.codecs: MemoryLayoutDesc shape %" PRIu32 " has %" PRIu32
                                 " dims",
                                 i, d->shapes[i].ndim);
        if (d->dtypes[i] <= LMC_DTYPE_INVALID || d->dtypes[i] >= LMC_DTYPE_COUNT_)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "trace.codecs: MemoryLayoutDesc dtype %" PRIu32 " is invalid", i);
        need += 1 + (size_t)d->shapes[i].ndim * LAYOUT_INT_MAX + LAYOUT_STR_HDR_MAX +
                strlen(lmc_dtype_name(d->dtypes[i]));
    }
    uint8_t stack[1024];
    uint8_t *buf = need <= sizeof(stack) ? stack : malloc(need);
    if (buf == NULL)
        return pack_failed(err);
    uint8_t *p = buf;
    *p++ = 0x82;
    p = W_NAME(p, "shapes");
    *p++ = (uint8_t)(0x90 | d->count);
    for (uint32_t i = 0; i < d->count; i++) {
        const lmc_shape *sh = &d->shapes[i];
        *p++ = (uint8_t)(0x90 | sh->ndim);
        for (uint32_t j = 0; j < sh->ndim; j++)
            p = w_int(p, sh->dims[j]);
    }
    p = W_NAME(p, "dtypes");
    *p++ = (uint8_t)(0x90 | d->count);
    for (uint32_t i = 0; i < d->count; i++) {
        const char *name = lmc_dtype_name(d->dtypes[i]);
        p = w_str(p, name, strlen(name));
    }
    int rc = pack_raw(pk, buf, (size_t)(p - buf));
    if (buf != stack)
        free(buf);
    return rc == 0 ? LMC_OK : pack_failed(err);
}

static lmc_status unknown_dtype(lmc_error *err, const msgpack_object *name)
{
    return lmc_error_set(err, LMC_ERR_FORMAT, "trace.codecs: unknown torch dtype '%.*s'",
                         (int)(name->via.str.size > 96 ? 96 : name->via.str.size),
                         name->via.str.ptr);
}

/* A list of ints into a shape (at most LMC_SHAPE_MAX_DIMS). */
static lmc_status get_shape(const msgpack_object *o, const char *tag, const char *field,
                            lmc_shape *s, lmc_error *err)
{
    lmc_status st = need_type(o, MSGPACK_OBJECT_ARRAY, tag, field, "a list of ints", err);
    if (st != LMC_OK)
        return st;
    if (o->via.array.size > LMC_SHAPE_MAX_DIMS)
        return bad_payload(err, tag, "a shape has %" PRIu32 " dims; at most %d supported",
                           o->via.array.size, LMC_SHAPE_MAX_DIMS);
    memset(s, 0, sizeof(*s));
    s->ndim = o->via.array.size;
    for (uint32_t i = 0; i < s->ndim; i++) {
        if ((st = get_int(&o->via.array.ptr[i], tag, field, &s->dims[i], err)) != LMC_OK)
            return st;
    }
    return LMC_OK;
}

static lmc_status dec_layout(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    static const char tag[] = "MemoryLayoutDesc";
    lmc_status st;
    if (p->type != MSGPACK_OBJECT_MAP)
        return bad_payload(err, tag, "expected a map, got %s", lmc_msgpack_type_name(p));
    const msgpack_object *shapes = map_get(p, "shapes");
    const msgpack_object *dtypes = map_get(p, "dtypes");
    if ((st = need_field(shapes, tag, "shapes", err)) != LMC_OK ||
        (st = need_type(shapes, MSGPACK_OBJECT_ARRAY, tag, "shapes", "a list", err)) != LMC_OK ||
        (st = need_field(dtypes, tag, "dtypes", err)) != LMC_OK ||
        (st = need_type(dtypes, MSGPACK_OBJECT_ARRAY, tag, "dtypes", "a list", err)) != LMC_OK)
        return st;
    size_t n = shapes->via.array.size;
    if (n != dtypes->via.array.size)
        return bad_payload(err, tag,
                           "shapes and dtypes must have the same length (%zu vs %" PRIu32 ")", n,
                           dtypes->via.array.size);
    if (n > LMC_LAYOUT_MAX_TENSORS)
        return bad_payload(err, tag, "%zu tensors; at most %d supported", n,
                           LMC_LAYOUT_MAX_TENSORS);
    lmc_shape sh[LMC_LAYOUT_MAX_TENSORS];
    lmc_dtype dt[LMC_LAYOUT_MAX_TENSORS];
    for (size_t i = 0; i < n; i++) {
        if ((st = get_shape(&shapes->via.array.ptr[i], tag, "shapes", &sh[i], err)) != LMC_OK)
            return st;
        const msgpack_object *name = &dtypes->via.array.ptr[i];
        if ((st = need_type(name, MSGPACK_OBJECT_STR, tag, "dtypes", "a list of str", err)) !=
            LMC_OK)
            return st;
        if (lmc_dtype_from_name(name->via.str.ptr, name->via.str.size, &dt[i], NULL) != LMC_OK)
            return unknown_dtype(err, name);
    }
    lmc_layout_desc *d = arena_alloc(a, sizeof(*d), err);
    if (d == NULL)
        return LMC_ERR_NOMEM;
    if (lmc_layout_desc_make(d, sh, n, dt, n, err) != LMC_OK)
        return as_format_error(err, tag);
    out->kind = LMC_TV_LAYOUT;
    out->u.layout = d;
    return LMC_OK;
}

/* torch.dtype: its str() name. */
static lmc_status enc_dtype(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    if (v->u.dtype <= LMC_DTYPE_INVALID || v->u.dtype >= LMC_DTYPE_COUNT_)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: invalid torch dtype value %d",
                             (int)v->u.dtype);
    PK(lmc_msgpack_pack_cstr(pk, lmc_dtype_name(v->u.dtype)));
    return LMC_OK;
}

static lmc_status dec_dtype(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    lmc_status st = need_type(p, MSGPACK_OBJECT_STR, "torch.dtype", "v", "a str", err);
    if (st != LMC_OK)
        return st;
    lmc_dtype dt;
    if (lmc_dtype_from_name(p->via.str.ptr, p->via.str.size, &dt, NULL) != LMC_OK)
        return unknown_dtype(err, p);
    out->kind = LMC_TV_DTYPE;
    out->u.dtype = dt;
    return LMC_OK;
}

/* torch.Size: a list of ints. */
static lmc_status enc_size(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    const lmc_shape *s = v->u.size;
    if (s == NULL)
        return null_value(err, "torch.Size");
    if (s->ndim > LMC_SHAPE_MAX_DIMS)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: torch.Size has %" PRIu32 " dims",
                             s->ndim);
    PK(msgpack_pack_array(pk, s->ndim));
    for (uint32_t i = 0; i < s->ndim; i++)
        PK(msgpack_pack_int64(pk, s->dims[i]));
    return LMC_OK;
}

static lmc_status dec_size(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    lmc_shape *s = arena_alloc(a, sizeof(*s), err);
    if (s == NULL)
        return LMC_ERR_NOMEM;
    lmc_status st = get_shape(p, "torch.Size", "v", s, err);
    if (st != LMC_OK)
        return st;
    out->kind = LMC_TV_SIZE;
    out->u.size = s;
    return LMC_OK;
}

/* TrimPolicy: the member name. */
static lmc_status enc_trim(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    const char *name = lmc_trim_policy_name(v->u.trim);
    if (name == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "trace.codecs: invalid TrimPolicy value %d",
                             (int)v->u.trim);
    PK(lmc_msgpack_pack_cstr(pk, name));
    return LMC_OK;
}

static lmc_status dec_trim(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    lmc_status st = need_type(p, MSGPACK_OBJECT_STR, "TrimPolicy", "v", "a str", err);
    if (st != LMC_OK)
        return st;
    lmc_trim_policy tp;
    if (lmc_trim_policy_from_name(p->via.str.ptr, p->via.str.size, &tp, err) != LMC_OK)
        return as_format_error(err, "TrimPolicy");
    out->kind = LMC_TV_TRIM_POLICY;
    out->u.trim = tp;
    return LMC_OK;
}

/*
 * PrefetchHandle: {prefetch_request_id, external_request_id,
 * l1_prefix_hit_count (derived), l1_found_indices, total_requested_keys,
 * submit_time, l2_orig_indices}.
 */
static lmc_status enc_handle(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    const lmc_prefetch_handle *h = v->u.handle;
    if (h == NULL)
        return null_value(err, "PrefetchHandle");
    const char *ext = h->external_request_id != NULL ? h->external_request_id : "";
    PK(msgpack_pack_map(pk, 7));
    PK(lmc_msgpack_pack_cstr(pk, "prefetch_request_id"));
    PK(msgpack_pack_int64(pk, h->prefetch_request_id));
    PK(lmc_msgpack_pack_cstr(pk, "external_request_id"));
    PK(lmc_msgpack_pack_cstr(pk, ext));
    PK(lmc_msgpack_pack_cstr(pk, "l1_prefix_hit_count"));
    PK(msgpack_pack_uint64(pk, h->l1_found_count));
    PK(lmc_msgpack_pack_cstr(pk, "l1_found_indices"));
    PK(lmc_msgpack_pack_uint32_array(pk, h->l1_found_indices, h->l1_found_count));
    PK(lmc_msgpack_pack_cstr(pk, "total_requested_keys"));
    PK(msgpack_pack_uint64(pk, h->total_requested_keys));
    PK(lmc_msgpack_pack_cstr(pk, "submit_time"));
    PK(msgpack_pack_double(pk, h->submit_time));
    PK(lmc_msgpack_pack_cstr(pk, "l2_orig_indices"));
    PK(lmc_msgpack_pack_uint32_array(pk, h->l2_orig_indices, h->l2_orig_count));
    return LMC_OK;
}

static lmc_status dec_handle(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    static const char tag[] = "PrefetchHandle";
    lmc_status st;
    if (p->type != MSGPACK_OBJECT_MAP)
        return bad_payload(err, tag, "expected a map, got %s", lmc_msgpack_type_name(p));
    const msgpack_object *req, *ext, *hits, *found, *total, *when, *l2;
    const map_field fields[] = {
        FIELD("prefetch_request_id", &req),    FIELD("external_request_id", &ext),
        FIELD("l1_prefix_hit_count", &hits),   FIELD("l1_found_indices", &found),
        FIELD("total_requested_keys", &total), FIELD("submit_time", &when),
        FIELD("l2_orig_indices", &l2),
    };
    map_fields(p, fields, sizeof(fields) / sizeof(fields[0]));

    lmc_prefetch_handle *h = arena_alloc(a, sizeof(*h), err);
    if (h == NULL)
        return LMC_ERR_NOMEM;
    memset(h, 0, sizeof(*h));
    int64_t total_keys = 0;
    if ((st = need_field(req, tag, "prefetch_request_id", err)) != LMC_OK ||
        (st = get_int(req, tag, "prefetch_request_id", &h->prefetch_request_id, err)) != LMC_OK ||
        (st = need_field(ext, tag, "external_request_id", err)) != LMC_OK ||
        (st = need_type(ext, MSGPACK_OBJECT_STR, tag, "external_request_id", "a str", err)) !=
            LMC_OK ||
        (st = need_field(total, tag, "total_requested_keys", err)) != LMC_OK ||
        (st = get_int(total, tag, "total_requested_keys", &total_keys, err)) != LMC_OK ||
        (st = need_field(when, tag, "submit_time", err)) != LMC_OK ||
        (st = get_float(when, tag, "submit_time", &h->submit_time, err)) != LMC_OK)
        return st;
    if (total_keys < 0)
        return bad_payload(err, tag, "'total_requested_keys' must be >= 0 (got %" PRId64 ")",
                           total_keys);
    h->total_requested_keys = (size_t)total_keys;
    h->external_request_id = arena_strdup(a, ext->via.str.ptr, ext->via.str.size, err);
    if (h->external_request_id == NULL)
        return LMC_ERR_NOMEM;

    if (found != NULL) {
        st = get_indices(found, tag, "l1_found_indices", a, &h->l1_found_indices,
                         &h->l1_found_count, err);
        if (st != LMC_OK)
            return st;
    } else {
        /* The older form: the hits were always a prefix of the keys. */
        int64_t n = 0;
        if ((st = need_field(hits, tag, "l1_found_indices", err)) != LMC_OK ||
            (st = get_int(hits, tag, "l1_prefix_hit_count", &n, err)) != LMC_OK)
            return st;
        if (n < 0 || n > total_keys || n > (int64_t)MAX_INDICES)
            return bad_payload(err, tag,
                               "'l1_prefix_hit_count' %" PRId64 " is out of range (0..%" PRId64 ")",
                               n, total_keys);
        h->l1_found_indices = arena_array(a, (size_t)n, sizeof(uint32_t), err);
        if (h->l1_found_indices == NULL)
            return LMC_ERR_NOMEM;
        for (int64_t i = 0; i < n; i++)
            h->l1_found_indices[i] = (uint32_t)i;
        h->l1_found_count = (size_t)n;
    }
    if (l2 != NULL) {
        st =
            get_indices(l2, tag, "l2_orig_indices", a, &h->l2_orig_indices, &h->l2_orig_count, err);
        if (st != LMC_OK)
            return st;
    }
    out->kind = LMC_TV_PREFETCH_HANDLE;
    out->u.handle = h;
    return LMC_OK;
}

/* set: a list of encoded elements. */
static lmc_status encode_items(msgpack_packer *pk, const lmc_tv *v, lmc_error *err);

static lmc_status enc_set(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    return encode_items(pk, v, err);
}

static lmc_status decode_items(const msgpack_object *arr, lmc_arena *a, lmc_tv *out, uint32_t kind,
                               lmc_error *err)
{
    size_t n = arr->via.array.size;
    lmc_tv *items = arena_array(a, n, sizeof(lmc_tv), err);
    if (items == NULL)
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        lmc_status st = lmc_codec_decode_value(&arr->via.array.ptr[i], a, &items[i], err);
        if (st != LMC_OK)
            return st;
    }
    *out = lmc_tv_list(kind, items, n);
    return LMC_OK;
}

static lmc_status dec_set(const msgpack_object *p, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    lmc_status st = need_type(p, MSGPACK_OBJECT_ARRAY, "set", "v", "a list", err);
    if (st != LMC_OK)
        return st;
    return decode_items(p, a, out, LMC_TV_SET, err);
}

static void register_builtins(void)
{
    static const lmc_codec builtins[] = {
        {LMC_TV_OBJECT_KEY, "ObjectKey", "ObjectKey", enc_object_key, dec_object_key},
        {LMC_TV_LAYOUT, "MemoryLayoutDesc", "MemoryLayoutDesc", enc_layout, dec_layout},
        {LMC_TV_PREFETCH_HANDLE, "PrefetchHandle", "PrefetchHandle", enc_handle, dec_handle},
        {LMC_TV_SIZE, "torch.Size", "torch.Size", enc_size, dec_size},
        {LMC_TV_DTYPE, "torch.dtype", "torch.dtype", enc_dtype, dec_dtype},
        {LMC_TV_TRIM_POLICY, "TrimPolicy", "TrimPolicy", enc_trim, dec_trim},
        {LMC_TV_SET, "set", "set", enc_set, dec_set},
    };
    pthread_mutex_lock(&g_reg_lock);
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
        register_locked(&builtins[i], NULL);
    pthread_mutex_unlock(&g_reg_lock);
}

/* ---------------------------------------------------------------------- */
/* Encoding                                                                */
/* ---------------------------------------------------------------------- */

static lmc_status check_len(size_t n, const char *what, lmc_error *err)
{
    if (n > UINT32_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: %s of %zu entries/bytes is too long for msgpack", what,
                             n);
    return LMC_OK;
}

static lmc_status wrap_tag(msgpack_packer *pk, const char *tag, lmc_error *err)
{
    PK(msgpack_pack_map(pk, 2));
    PK(lmc_msgpack_pack_cstr(pk, TAG_KEY));
    PK(lmc_msgpack_pack_cstr(pk, tag));
    PK(lmc_msgpack_pack_cstr(pk, TAG_VAL));
    return LMC_OK;
}

/* The wrapper of a registered codec, precomputed when the tag is short. */
static lmc_status wrap_codec(msgpack_packer *pk, const lmc_codec *c, lmc_error *err)
{
    size_t i = (size_t)(c - g_codecs);
    if (g_wrap_len[i] > 0) {
        PK(pack_raw(pk, g_wrap[i], g_wrap_len[i]));
        return LMC_OK;
    }
    return wrap_tag(pk, c->tag, err);
}

/* {"__t__": "tuple", "v": */
static const uint8_t TUPLE_WRAP[] = {0x82, 0xa5, '_', '_', 't', '_',  '_', 0xa5,
                                     't',  'u',  'p', 'l', 'e', 0xa1, 'v'};

/* Dict keys go out as they are (LMCache does not encode them): natives only. */
static lmc_status encode_key(msgpack_packer *pk, const lmc_tv *k, lmc_error *err)
{
    switch (k->kind) {
    case LMC_TV_NIL:
    case LMC_TV_BOOL:
    case LMC_TV_INT:
    case LMC_TV_UINT:
    case LMC_TV_FLOAT:
    case LMC_TV_STR:
    case LMC_TV_BIN:
        return lmc_codec_encode_value(pk, k, err);
    default: {
        char tmp[32];
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace.codecs: dict keys of type '%s' are not supported",
                             kind_name(k->kind, tmp, sizeof(tmp)));
    }
    }
}

/*
 * The keys of a record's "keys" list, the hottest value there is: the
 * same bytes as wrap_codec + enc_object_key per key (one encode_value
 * each), but written through an lmc_mp_window: straight into the record's
 * sbuffer, or staged and handed to the packer a few KiB at a time for any
 * other packer. A key is its image and its hash: the image (the constant
 * run up to chunk_hash's bin8 header, the hash's length and place, and the
 * tail, model_name to cache_salt) is built once and reused while the keys
 * share model, salt, rank, group and hash length (the keys of one call
 * do): writing the tail field by field for every key was most of a 16-key
 * record's encoding time. Returns false, having
 * written nothing, when the items are not all non-NULL ObjectKeys or the
 * depth limit is near: the caller then takes the general path, which
 * reports any error.
 */
#define KEY_TAIL_MAX 512
#define COPY_BLOCK 32
/* A key's bytes but its hash: the wrapper's run (up to WRAP_MAX + 16), the
 * bin8 length, the hash's place, the tail; plus a block of slack. */
#define KEY_IMAGE_MAX (WRAP_MAX + 16 + 1 + 255 + KEY_TAIL_MAX + COPY_BLOCK)

/* n bytes as whole COPY_BLOCK-byte blocks, fixed-size copies the compiler
 * inlines (a libc memcpy call per small piece was a fifth of a record's
 * encoding): writes and reads up to COPY_BLOCK - 1 bytes past n. */
static inline void copy_blocks(uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t o = 0; o < n; o += COPY_BLOCK)
        memcpy(dst + o, src + o, COPY_BLOCK);
}

static bool encode_key_items(msgpack_packer *pk, const lmc_tv *items, size_t n, lmc_status *st,
                             lmc_error *err)
{
    const lmc_codec *c = lmc_codec_for_kind(LMC_TV_OBJECT_KEY);
    if (c == NULL || c->encode != enc_object_key || t_depth + 1 >= MAX_DEPTH)
        return false;
    size_t ci = (size_t)(c - g_codecs);
    if (g_wrap_len[ci] == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (items[i].kind != LMC_TV_OBJECT_KEY || items[i].u.key == NULL)
            return false;

    /* The image starts with the wrapper, {"chunk_hash": bin8 header (the
     * length follows): the same for every key. */
    uint8_t image[KEY_IMAGE_MAX];
    memcpy(image, g_wrap[ci], g_wrap_len[ci]);
    uint8_t *q = image + g_wrap_len[ci];
    *q++ = 0x85;
    q = W_NAME(q, "chunk_hash");
    *q++ = 0xc4;
    const size_t pre_len = (size_t)(q - image);

    lmc_mp_window w;
    if (lmc_mp_window_open(&w, pk) != 0)
        goto nomem;
    uint8_t *p = w.start;
    /* The image's length (0: none yet, or too long for it: the general
     * path) and the fields it was built from. */
    size_t image_len = 0, hash_len = 0;
    const char *model = NULL, *salt = NULL;
    int64_t rank = 0, group = 0;
    for (size_t i = 0; i < n; i++) {
        const lmc_object_key *k = items[i].u.key;
        const char *m = k->model_name != NULL ? k->model_name : "";
        const char *sa = k->cache_salt != NULL ? k->cache_salt : "";
        /* Strings are interned: the same pointers mean the same bytes. */
        if (m != model || sa != salt || k->kv_rank != rank || k->object_group_id != group ||
            k->chunk_hash_len != hash_len) {
            model = m;
            salt = sa;
            rank = k->kv_rank;
            group = k->object_group_id;
            hash_len = k->chunk_hash_len;
            size_t model_len = strlen(m), salt_len = strlen(sa);
            image_len = 0;
            if (hash_len <= 255 && model_len + salt_len + KEY_TAIL_FIXED <= KEY_TAIL_MAX) {
                q = image + pre_len;
                *q++ = (uint8_t)hash_len;
                memset(q, 0, hash_len); /* the hash's place */
                q = w_key_tail(q + hash_len, k, m, model_len, sa, salt_len);
                image_len = (size_t)(q - image);
            }
        }
        size_t need = image_len > 0 ? image_len + COPY_BLOCK : SIZE_MAX;
        if (need > (size_t)(w.end - p)) {
            if (lmc_mp_window_flush(&w, p) != 0)
                goto nomem;
            p = w.start;
        }
        if (need > (size_t)(w.end - p)) {
            /* The window is empty: the general path may pack through pk. */
            if ((*st = lmc_codec_encode_value(pk, &items[i], err)) != LMC_OK)
                return true;
            if (lmc_mp_window_flush(&w, p) != 0)
                goto nomem;
            p = w.start;
            continue;
        }
        copy_blocks(p, image, image_len);
        if (hash_len == 32) /* a SHA-256: the usual key, one inlined copy */
            memcpy(p + pre_len + 1, lmc_object_key_hash_bytes(k), 32);
        else
            memcpy(p + pre_len + 1, lmc_object_key_hash_bytes(k), hash_len);
        p += image_len;
    }
    if (lmc_mp_window_close(&w, p) != 0)
        goto nomem;
    *st = LMC_OK;
    return true;
nomem:
    *st = pack_failed(err);
    return true;
}

/* The items of a list, tuple or set as a msgpack array. */
static lmc_status encode_items(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    lmc_status st;
    if (v->u.list.n > 0 && v->u.list.items == NULL)
        return null_value(err, "list");
    if ((st = check_len(v->u.list.n, "a list", err)) != LMC_OK)
        return st;
    PK(msgpack_pack_array(pk, v->u.list.n));
    if (v->u.list.n > 0 && v->u.list.items[0].kind == LMC_TV_OBJECT_KEY &&
        encode_key_items(pk, v->u.list.items, v->u.list.n, &st, err))
        return st;
    for (size_t i = 0; i < v->u.list.n; i++) {
        if ((st = lmc_codec_encode_value(pk, &v->u.list.items[i], err)) != LMC_OK)
            return st;
    }
    return LMC_OK;
}

static lmc_status encode_inner(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    lmc_status st;
    switch (v->kind) {
    case LMC_TV_NIL:
        PK(msgpack_pack_nil(pk));
        return LMC_OK;
    case LMC_TV_BOOL:
        PK(v->u.b ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
        return LMC_OK;
    case LMC_TV_INT:
        PK(msgpack_pack_int64(pk, v->u.i));
        return LMC_OK;
    case LMC_TV_UINT:
        PK(msgpack_pack_uint64(pk, v->u.u));
        return LMC_OK;
    case LMC_TV_FLOAT:
        PK(msgpack_pack_double(pk, v->u.f));
        return LMC_OK;
    case LMC_TV_STR:
    case LMC_TV_BIN:
        if (v->u.s.ptr == NULL && v->u.s.len > 0)
            return null_value(err, v->kind == LMC_TV_STR ? "str" : "bytes");
        if ((st = check_len(v->u.s.len, v->kind == LMC_TV_STR ? "a str" : "bytes", err)) != LMC_OK)
            return st;
        if (v->kind == LMC_TV_STR) {
            PK(lmc_msgpack_pack_str(pk, v->u.s.ptr, v->u.s.len));
        } else {
            PK(msgpack_pack_bin(pk, v->u.s.len));
            if (v->u.s.len > 0)
                PK(msgpack_pack_bin_body(pk, v->u.s.ptr, v->u.s.len));
        }
        return LMC_OK;
    case LMC_TV_TUPLE:
        PK(pack_raw(pk, TUPLE_WRAP, sizeof(TUPLE_WRAP)));
        return encode_items(pk, v, err);
    case LMC_TV_LIST:
        return encode_items(pk, v, err);
    case LMC_TV_MAP:
        if (v->u.map.n > 0 && (v->u.map.keys == NULL || v->u.map.vals == NULL))
            return null_value(err, "dict");
        if ((st = check_len(v->u.map.n, "a dict", err)) != LMC_OK)
            return st;
        PK(msgpack_pack_map(pk, v->u.map.n));
        for (size_t i = 0; i < v->u.map.n; i++) {
            if ((st = encode_key(pk, &v->u.map.keys[i], err)) != LMC_OK ||
                (st = lmc_codec_encode_value(pk, &v->u.map.vals[i], err)) != LMC_OK)
                return st;
        }
        return LMC_OK;
    default:
        break;
    }
    const lmc_codec *c = lmc_codec_for_kind(v->kind);
    if (c == NULL) {
        char tmp[32];
        return lmc_error_set(err, LMC_ERR_UNSUPPORTED,
                             "trace.codecs: no codec registered for type '%s'. Register one via "
                             "lmc_codec_register() or extend the default registry.",
                             kind_name(v->kind, tmp, sizeof(tmp)));
    }
    if ((st = wrap_codec(pk, c, err)) != LMC_OK)
        return st;
    return c->encode(pk, v, err);
}

lmc_status lmc_codec_encode_value(msgpack_packer *pk, const lmc_tv *v, lmc_error *err)
{
    if (t_depth >= MAX_DEPTH)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "trace.codecs: value nested deeper than %d levels", MAX_DEPTH);
    t_depth++;
    lmc_status st = encode_inner(pk, v, err);
    t_depth--;
    return st;
}

lmc_status lmc_codec_encode_args(msgpack_packer *pk, const lmc_trace_arg *args, size_t n,
                                 lmc_error *err)
{
    lmc_status st;
    if (n > 0 && args == NULL)
        return null_value(err, "args");
    if ((st = check_len(n, "an args map", err)) != LMC_OK)
        return st;
    PK(msgpack_pack_map(pk, n));
    for (size_t i = 0; i < n; i++) {
        const char *name = args[i].name != NULL ? args[i].name : "";
        size_t len = args[i].name_len > 0 ? args[i].name_len : strlen(name);
        PK(lmc_msgpack_pack_str(pk, name, len));
        if ((st = lmc_codec_encode_value(pk, &args[i].value, err)) != LMC_OK) {
            lmc_error_prefix(err, "argument '%.*s'", (int)(len > 96 ? 96 : len), name);
            return st;
        }
    }
    return LMC_OK;
}

/* ---------------------------------------------------------------------- */
/* Decoding                                                                */
/* ---------------------------------------------------------------------- */

static lmc_status decode_tagged(const msgpack_object *o, const msgpack_object *tag, lmc_arena *a,
                                lmc_tv *out, lmc_error *err)
{
    if (tag->type != MSGPACK_OBJECT_STR)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace.codecs: the '__t__' tag must be a str, "
                             "got %s",
                             lmc_msgpack_type_name(tag));
    const char *t = tag->via.str.ptr;
    size_t tlen = tag->via.str.size;
    int shown = (int)(tlen > 96 ? 96 : tlen);
    bool is_tuple = tlen == strlen(TUPLE_TAG) && memcmp(t, TUPLE_TAG, tlen) == 0;
    const lmc_codec *c = is_tuple ? NULL : lmc_codec_for_tag(t, tlen);
    if (!is_tuple && c == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "trace.codecs: unknown tag '%.*s'", shown, t);
    const msgpack_object *payload = map_get(o, TAG_VAL);
    if (payload == NULL)
        return lmc_error_set(err, LMC_ERR_FORMAT, "trace.codecs: tagged value '%.*s' has no 'v'",
                             shown, t);
    if (is_tuple) {
        if (payload->type != MSGPACK_OBJECT_ARRAY)
            return bad_payload(err, TUPLE_TAG, "expected a list, got %s",
                               lmc_msgpack_type_name(payload));
        return decode_items(payload, a, out, LMC_TV_TUPLE, err);
    }
    return c->decode(payload, a, out, err);
}

static lmc_status decode_inner(const msgpack_object *o, lmc_arena *a, lmc_tv *out, lmc_error *err)
{
    lmc_status st;
    memset(out, 0, sizeof(*out));
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        out->kind = LMC_TV_NIL;
        return LMC_OK;
    case MSGPACK_OBJECT_BOOLEAN:
        out->kind = LMC_TV_BOOL;
        out->u.b = o->via.boolean;
        return LMC_OK;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *out = lmc_tv_uint(o->via.u64);
        return LMC_OK;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        out->kind = LMC_TV_INT;
        out->u.i = o->via.i64;
        return LMC_OK;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        out->kind = LMC_TV_FLOAT;
        out->u.f = o->via.f64;
        return LMC_OK;
    case MSGPACK_OBJECT_STR:
    case MSGPACK_OBJECT_BIN: {
        const char *p = o->type == MSGPACK_OBJECT_STR ? o->via.str.ptr : o->via.bin.ptr;
        size_t n = o->type == MSGPACK_OBJECT_STR ? o->via.str.size : o->via.bin.size;
        char *copy = arena_strdup(a, p, n, err);
        if (copy == NULL)
            return LMC_ERR_NOMEM;
        out->kind = o->type == MSGPACK_OBJECT_STR ? LMC_TV_STR : LMC_TV_BIN;
        out->u.s.ptr = copy;
        out->u.s.len = n;
        return LMC_OK;
    }
    case MSGPACK_OBJECT_ARRAY:
        return decode_items(o, a, out, LMC_TV_LIST, err);
    case MSGPACK_OBJECT_MAP: {
        const msgpack_object *tag = map_get(o, TAG_KEY);
        if (tag != NULL)
            return decode_tagged(o, tag, a, out, err);
        size_t n = o->via.map.size;
        lmc_tv *keys = arena_array(a, n, sizeof(lmc_tv), err);
        lmc_tv *vals = keys != NULL ? arena_array(a, n, sizeof(lmc_tv), err) : NULL;
        if (vals == NULL)
            return LMC_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            if ((st = lmc_codec_decode_value(&o->via.map.ptr[i].key, a, &keys[i], err)) != LMC_OK ||
                (st = lmc_codec_decode_value(&o->via.map.ptr[i].val, a, &vals[i], err)) != LMC_OK)
                return st;
        }
        *out = lmc_tv_map(keys, vals, n);
        return LMC_OK;
    }
    case MSGPACK_OBJECT_EXT:
        break;
    }
    return lmc_error_set(err, LMC_ERR_FORMAT, "trace.codecs: unsupported msgpack type %s",
                         lmc_msgpack_type_name(o));
}

lmc_status lmc_codec_decode_value(const msgpack_object *o, lmc_arena *a, lmc_tv *out,
                                  lmc_error *err)
{
    if (t_depth >= MAX_DEPTH)
        return lmc_error_set(err, LMC_ERR_FORMAT,
                             "trace.codecs: value nested deeper than %d levels", MAX_DEPTH);
    t_depth++;
    lmc_status st = decode_inner(o, a, out, err);
    t_depth--;
    return st;
}

lmc_status lmc_codec_decode_args(const msgpack_object *map, lmc_arena *a, lmc_trace_arg **args,
                                 size_t *n, lmc_error *err)
{
    *args = NULL;
    *n = 0;
    if (map->type != MSGPACK_OBJECT_MAP)
        return lmc_error_set(err, LMC_ERR_FORMAT, "args must be a map, got %s",
                             lmc_msgpack_type_name(map));
    size_t cnt = map->via.map.size;
    lmc_trace_arg *out = arena_array(a, cnt, sizeof(lmc_trace_arg), err);
    if (out == NULL)
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < cnt; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR)
            return lmc_error_set(err, LMC_ERR_FORMAT, "args keys must be str, got %s",
                                 lmc_msgpack_type_name(k));
        char *name = arena_strdup(a, k->via.str.ptr, k->via.str.size, err);
        if (name == NULL)
            return LMC_ERR_NOMEM;
        out[i].name = name;
        out[i].name_len = k->via.str.size;
        lmc_status st = lmc_codec_decode_value(&map->via.map.ptr[i].val, a, &out[i].value, err);
        if (st != LMC_OK) {
            lmc_error_prefix(err, "argument '%.*s'",
                             (int)(k->via.str.size > 96 ? 96 : k->via.str.size), name);
            return st;
        }
    }
    *args = out;
    *n = cnt;
    return LMC_OK;
}

const lmc_trace_arg *lmc_trace_args_find(const lmc_trace_arg *args, size_t n, const char *name)
{
    /* From the end: a repeated name means the last value, as in a Python dict. */
    for (size_t i = n; i-- > 0;) {
        if (args[i].name != NULL && strcmp(args[i].name, name) == 0)
            return &args[i];
    }
    return NULL;
}
