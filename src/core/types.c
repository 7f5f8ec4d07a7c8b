/*
 * types.c -- the value types of the storage layer (see types.h).
 *
 * Owns: ObjectKey construction, validation, equality, hashing and
 * formatting; the torch dtype table; MemoryLayoutDesc; the TrimPolicy and
 * L1Error name tables; PrefetchHandle copies. String interning lives in
 * intern.c.
 *
 * Threads: none of its own. Everything here works on caller-owned values or
 * on constant tables, so every function is reentrant; the only shared state
 * it touches is the intern table, which does its own locking.
 *
 * Keys and layouts are built in a zeroed local and copied out only when
 * valid, so a caller never sees a half-filled value and unused bytes (hash
 * bytes past the length, dims past ndim, tensors past count) are always 0.
 */
#include "lmcache/types.h"

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/key_format.h"
#include "core/names.h"

/* How much of an offending value an error message quotes. */
#define QUOTE_MAX 96

/* printf arguments quoting at most QUOTE_MAX bytes of (s, len), with "...". */
#define QUOTE_ARGS(s, len)                                                                         \
    (int)((len) > QUOTE_MAX ? QUOTE_MAX : (len)), (s), ((len) > QUOTE_MAX ? "..." : "")

/* ---------------------------------------------------------------------- */
/* ObjectKey                                                               */
/* ---------------------------------------------------------------------- */

/* Code points in a UTF-8 string: every byte that is not a continuation byte. */
static size_t utf8_length(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static lmc_status check_model_name(const char *name, size_t len, lmc_error *err)
{
    if (name == NULL && len > 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "ObjectKey.model_name must not be NULL");
    if (len > LMC_MODEL_NAME_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "ObjectKey.model_name is %zu bytes; at most %d allowed", len,
                             LMC_MODEL_NAME_MAX);
    if (len > 0 && memchr(name, '\0', len) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "ObjectKey.model_name must not contain NUL");
    if (len > 0 && memchr(name, '@', len) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "ObjectKey.model_name must not contain '@' (got '%.*s%s')",
                             QUOTE_ARGS(name, len));
    return LMC_OK;
}

static lmc_status check_cache_salt(const char *salt, size_t len, lmc_error *err)
{
    if (len == 0)
        return LMC_OK;
    if (memchr(salt, '\0', len) != NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "ObjectKey.cache_salt must not contain NUL");
    static const char forbidden[] = {'@', '/', '\\'};
    for (size_t i = 0; i < sizeof(forbidden); i++) {
        if (memchr(salt, forbidden[i], len) != NULL)
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "ObjectKey.cache_salt must not contain '%c' (got '%.*s%s')",
                                 forbidden[i], QUOTE_ARGS(salt, len));
    }
    size_t chars = utf8_length(salt, len);
    if (chars > LMC_CACHE_SALT_MAX)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "ObjectKey.cache_salt is %zu characters; at most %d allowed", chars,
                             LMC_CACHE_SALT_MAX);
    return LMC_OK;
}

static uint64_t compute_hash(const lmc_object_key *key);

/*
 * make_n, optionally through a cache of the last model_name and cache_salt.
 * A string equal to the cached one has passed its check and been interned
 * before, so a hit skips both: the result and the first error reported are
 * exactly make_n's.
 */
static lmc_status make_key(lmc_object_key_cache *cache, lmc_object_key *key, const void *chunk_hash,
                           size_t hash_len, const char *model_name, size_t model_len,
                           int64_t kv_rank, int64_t object_group_id, const char *cache_salt,
                           size_t salt_len, lmc_error *err)
{
    lmc_object_key k;
    lmc_status st;

    bool long_hash = hash_len > LMC_CHUNK_HASH_MAX;
    if (long_hash && (cache == NULL || !cache->long_hashes)) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "ObjectKey.chunk_hash is %zu bytes; at most %d allowed", hash_len,
                           LMC_CHUNK_HASH_MAX);
        goto fail;
    }
    if (hash_len > UINT32_MAX) {
        st =
            lmc_error_set(err, LMC_ERR_INVALID,
                          "ObjectKey.chunk_hash is %zu bytes; at most 4 GiB - 1 allowed", hash_len);
        goto fail;
    }
    if (chunk_hash == NULL && hash_len > 0) {
        st = lmc_error_set(err, LMC_ERR_INVALID, "ObjectKey.chunk_hash must not be NULL");
        goto fail;
    }
    bool model_hit = cache != NULL && cache->model_name != NULL && model_len == cache->model_len &&
                     (model_len == 0 || memcmp(cache->model_name, model_name, model_len) == 0);
    if (!model_hit && (st = check_model_name(model_name, model_len, err)) != LMC_OK)
        goto fail;
    if (object_group_id < 0) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "ObjectKey.object_group_id must be >= 0 (got %" PRId64 ")",
                           object_group_id);
        goto fail;
    }
    if (cache_salt == NULL)
        salt_len = 0;
    bool salt_hit = cache != NULL && cache->cache_salt != NULL && salt_len == cache->salt_len &&
                    (salt_len == 0 || memcmp(cache->cache_salt, cache_salt, salt_len) == 0);
    if (!salt_hit && (st = check_cache_salt(cache_salt, salt_len, err)) != LMC_OK)
        goto fail;

    /*
     * Zero what no field covers -- the hash bytes past hash_len and the
     * padding after chunk_hash_len -- with fixed-size stores rather than
     * the whole key at once: decoders make keys by the thousand, and a
     * 112-byte memset compiles to a rep stos that cost more than the rest
     * of this function.
     */
    memset(k.chunk_hash, 0, sizeof(k.chunk_hash));
    if (long_hash) {
        /* Interned, so equal hashes share one address and compare and hash by it. */
        const char *kept = lmc_intern(chunk_hash, hash_len);
        if (kept == NULL) {
            st = lmc_error_set(err, LMC_ERR_NOMEM, "ObjectKey: out of memory keeping a long hash");
            goto fail;
        }
        memcpy(k.chunk_hash, &kept, sizeof(kept));
    } else if (hash_len > 0) {
        memcpy(k.chunk_hash, chunk_hash, hash_len);
    }
    memset(&k.chunk_hash_len, 0,
           offsetof(lmc_object_key, kv_rank) - offsetof(lmc_object_key, chunk_hash_len));
    k.chunk_hash_len = (uint32_t)hash_len;
    k.kv_rank = kv_rank;
    k.object_group_id = object_group_id;
    k.model_name = model_hit ? cache->model_name : lmc_intern(model_name, model_len);
    k.cache_salt = salt_hit ? cache->cache_salt : lmc_intern(cache_salt, salt_len);
    if (k.model_name == NULL || k.cache_salt == NULL) {
        st = lmc_error_set(err, LMC_ERR_NOMEM, "ObjectKey: out of memory interning a string");
        goto fail;
    }
    k.hash = compute_hash(&k);
    memcpy(key, &k, sizeof(k)); /* memcpy keeps the zeroed padding */
    if (cache != NULL) {
        cache->model_name = k.model_name;
        cache->model_len = model_len;
        cache->cache_salt = k.cache_salt;
        cache->salt_len = salt_len;
    }
    return LMC_OK;

fail:
    memset(key, 0, sizeof(*key));
    return st;
}

lmc_status lmc_object_key_make_n(lmc_object_key *key, const void *chunk_hash, size_t hash_len,
                                 const char *model_name, size_t model_len, int64_t kv_rank,
                                 int64_t object_group_id, const char *cache_salt, size_t salt_len,
                                 lmc_error *err)
{
    return make_key(NULL, key, chunk_hash, hash_len, model_name, model_len, kv_rank,
                    object_group_id, cache_salt, salt_len, err);
}

lmc_status lmc_object_key_make_cached(lmc_object_key_cache *cache, lmc_object_key *key,
                                      const void *chunk_hash, size_t hash_len,
                                      const char *model_name, size_t model_len, int64_t kv_rank,
                                      int64_t object_group_id, const char *cache_salt,
                                      size_t salt_len, lmc_error *err)
{
    return make_key(cache, key, chunk_hash, hash_len, model_name, model_len, kv_rank,
                    object_group_id, cache_salt, salt_len, err);
}

lmc_status lmc_object_key_make(lmc_object_key *key, const void *chunk_hash, size_t hash_len,
                               const char *model_name, int64_t kv_rank, int64_t object_group_id,
                               const char *cache_salt, lmc_error *err)
{
    if (model_name == NULL) {
        memset(key, 0, sizeof(*key));
        return lmc_error_set(err, LMC_ERR_INVALID, "ObjectKey.model_name must not be NULL");
    }
    return lmc_object_key_make_n(key, chunk_hash, hash_len, model_name, strlen(model_name), kv_rank,
                                 object_group_id, cache_salt,
                                 cache_salt == NULL ? 0 : strlen(cache_salt), err);
}

bool lmc_object_key_equal(const lmc_object_key *a, const lmc_object_key *b)
{
    /* The cached hash rejects most unequal keys at once; interned strings
     * compare by pointer. */
    return a->hash == b->hash && a->chunk_hash_len == b->chunk_hash_len &&
           a->kv_rank == b->kv_rank && a->object_group_id == b->object_group_id &&
           a->model_name == b->model_name && a->cache_salt == b->cache_salt &&
           memcmp(a->chunk_hash, b->chunk_hash,
                  a->chunk_hash_len <= LMC_CHUNK_HASH_MAX ? a->chunk_hash_len
                                                          : LMC_CHUNK_HASH_MAX) == 0;
}

static uint64_t compute_hash(const lmc_object_key *key)
{
    /*
     * Hash exactly the fields equality looks at, laid out explicitly so
     * struct padding never leaks in. The strings are hashed by address,
     * which interning makes a function of their contents.
     */
    uint8_t buf[5 * sizeof(uint64_t) + LMC_CHUNK_HASH_MAX];
    uint64_t meta[5] = {
        (uint64_t)key->kv_rank,
        (uint64_t)key->object_group_id,
        (uint64_t)(uintptr_t)key->model_name,
        (uint64_t)(uintptr_t)key->cache_salt,
        key->chunk_hash_len,
    };
    /* A long hash is interned: its address stands for its bytes, as for the strings. */
    size_t hash_len = key->chunk_hash_len;
    if (hash_len > LMC_CHUNK_HASH_MAX)
        hash_len = LMC_CHUNK_HASH_MAX;
    memcpy(buf, meta, sizeof(meta));
    memcpy(buf + sizeof(meta), key->chunk_hash, hash_len);
    return XXH3_64bits(buf, sizeof(meta) + hash_len);
}

int64_t lmc_compute_kv_rank(unsigned world_size, unsigned global_rank, unsigned local_world_size,
                            unsigned local_rank)
{
    return (int64_t)(((uint32_t)(world_size & 0xFF) << 24) | ((global_rank & 0xFF) << 16) |
                     ((local_world_size & 0xFF) << 8) | (local_rank & 0xFF));
}

void lmc_object_key_put_fields(lmc_fixbuf *o, const lmc_object_key *key)
{
    static const char hexdigits[] = "0123456789abcdef";
    char num[32];

    /* Python's f"{kv_rank:08x}": a sign counts toward the width. */
    if (key->kv_rank < 0)
        snprintf(num, sizeof(num), "@0x-%07" PRIx64, -(uint64_t)key->kv_rank);
    else
        snprintf(num, sizeof(num), "@0x%08" PRIx64, (uint64_t)key->kv_rank);
    lmc_fixbuf_puts(o, num);
    snprintf(num, sizeof(num), "@%" PRIx64 "@", (uint64_t)key->object_group_id);
    lmc_fixbuf_puts(o, num);
    const uint8_t *hash = lmc_object_key_hash_bytes(key);
    for (size_t i = 0; i < key->chunk_hash_len; i++) {
        char pair[2] = {hexdigits[hash[i] >> 4], hexdigits[hash[i] & 0xF]};
        lmc_fixbuf_append(o, pair, 2);
    }
    if (key->cache_salt != NULL && key->cache_salt[0] != '\0') {
        lmc_fixbuf_append(o, "@", 1);
        lmc_fixbuf_puts(o, key->cache_salt);
    }
}

size_t lmc_object_key_format(const lmc_object_key *key, char *buf, size_t len)
{
    lmc_fixbuf o = LMC_FIXBUF(buf, len);
    lmc_fixbuf_puts(&o, key->model_name != NULL ? key->model_name : "");
    lmc_object_key_put_fields(&o, key);
    return lmc_fixbuf_finish(&o);
}

/* ---------------------------------------------------------------------- */
/* dtypes                                                                  */
/* ---------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t itemsize;
} g_dtypes[LMC_DTYPE_COUNT_] = {
    [LMC_DTYPE_INVALID] = {"invalid", 0},
    [LMC_DTYPE_FLOAT16] = {"torch.float16", 2},
    [LMC_DTYPE_BFLOAT16] = {"torch.bfloat16", 2},
    [LMC_DTYPE_FLOAT32] = {"torch.float32", 4},
    [LMC_DTYPE_FLOAT64] = {"torch.float64", 8},
    [LMC_DTYPE_INT8] = {"torch.int8", 1},
    [LMC_DTYPE_UINT8] = {"torch.uint8", 1},
    [LMC_DTYPE_INT16] = {"torch.int16", 2},
    [LMC_DTYPE_UINT16] = {"torch.uint16", 2},
    [LMC_DTYPE_INT32] = {"torch.int32", 4},
    [LMC_DTYPE_UINT32] = {"torch.uint32", 4},
    [LMC_DTYPE_INT64] = {"torch.int64", 8},
    [LMC_DTYPE_UINT64] = {"torch.uint64", 8},
    [LMC_DTYPE_BOOL] = {"torch.bool", 1},
    [LMC_DTYPE_COMPLEX32] = {"torch.complex32", 4},
    [LMC_DTYPE_COMPLEX64] = {"torch.complex64", 8},
    [LMC_DTYPE_COMPLEX128] = {"torch.complex128", 16},
    [LMC_DTYPE_FLOAT8_E4M3FN] = {"torch.float8_e4m3fn", 1},
    [LMC_DTYPE_FLOAT8_E5M2] = {"torch.float8_e5m2", 1},
    [LMC_DTYPE_FLOAT8_E4M3FNUZ] = {"torch.float8_e4m3fnuz", 1},
    [LMC_DTYPE_FLOAT8_E5M2FNUZ] = {"torch.float8_e5m2fnuz", 1},
    [LMC_DTYPE_QINT8] = {"torch.qint8", 1},
    [LMC_DTYPE_QUINT8] = {"torch.quint8", 1},
    [LMC_DTYPE_QINT32] = {"torch.qint32", 4},
};

/* torch's other attribute names for the same dtypes. */
static const struct {
    const char *name;
    lmc_dtype dtype;
} g_dtype_aliases[] = {
    {"torch.half", LMC_DTYPE_FLOAT16},     {"torch.float", LMC_DTYPE_FLOAT32},
    {"torch.double", LMC_DTYPE_FLOAT64},   {"torch.short", LMC_DTYPE_INT16},
    {"torch.int", LMC_DTYPE_INT32},        {"torch.long", LMC_DTYPE_INT64},
    {"torch.cfloat", LMC_DTYPE_COMPLEX64}, {"torch.cdouble", LMC_DTYPE_COMPLEX128},
    {"torch.chalf", LMC_DTYPE_COMPLEX32},
};

static bool dtype_valid(lmc_dtype dt)
{
    return dt > LMC_DTYPE_INVALID && dt < LMC_DTYPE_COUNT_;
}

const char *lmc_dtype_name(lmc_dtype dt)
{
    return dtype_valid(dt) ? g_dtypes[dt].name : "invalid";
}

size_t lmc_dtype_itemsize(lmc_dtype dt)
{
    return dtype_valid(dt) ? g_dtypes[dt].itemsize : 0;
}

static bool name_is(const char *name, size_t len, const char *candidate)
{
    return strlen(candidate) == len && memcmp(name, candidate, len) == 0;
}

lmc_status lmc_dtype_from_name(const char *name, size_t len, lmc_dtype *out, lmc_error *err)
{
    if (name == NULL) {
        name = "";
        len = 0;
    }
    for (int dt = LMC_DTYPE_INVALID + 1; dt < LMC_DTYPE_COUNT_; dt++) {
        if (name_is(name, len, g_dtypes[dt].name)) {
            *out = (lmc_dtype)dt;
            return LMC_OK;
        }
    }
    for (size_t i = 0; i < sizeof(g_dtype_aliases) / sizeof(g_dtype_aliases[0]); i++) {
        if (name_is(name, len, g_dtype_aliases[i].name)) {
            *out = g_dtype_aliases[i].dtype;
            return LMC_OK;
        }
    }
    *out = LMC_DTYPE_INVALID;
    return lmc_error_set(err, LMC_ERR_INVALID, "unknown torch dtype '%.*s%s'",
                         QUOTE_ARGS(name, len));
}

/* ---------------------------------------------------------------------- */
/* MemoryLayoutDesc                                                        */
/* ---------------------------------------------------------------------- */

uint64_t lmc_shape_numel(const lmc_shape *shape)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < shape->ndim && i < LMC_SHAPE_MAX_DIMS; i++)
        n *= (uint64_t)shape->dims[i];
    return n;
}

lmc_status lmc_layout_desc_make(lmc_layout_desc *desc, const lmc_shape *shapes, size_t nshapes,
                                const lmc_dtype *dtypes, size_t ndtypes, lmc_error *err)
{
    lmc_layout_desc d;
    memset(&d, 0, sizeof(d));
    lmc_status st;
    uint64_t total = 0;

    if (nshapes != ndtypes) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "MemoryLayoutDesc: shapes and dtypes must have the same length "
                           "(%zu vs %zu)",
                           nshapes, ndtypes);
        goto fail;
    }
    if (nshapes > LMC_LAYOUT_MAX_TENSORS) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "MemoryLayoutDesc: %zu tensors; at most %d supported", nshapes,
                           LMC_LAYOUT_MAX_TENSORS);
        goto fail;
    }
    if (nshapes > 0 && (shapes == NULL || dtypes == NULL)) {
        st = lmc_error_set(err, LMC_ERR_INVALID,
                           "MemoryLayoutDesc: shapes and dtypes must not be NULL");
        goto fail;
    }
    for (size_t i = 0; i < nshapes; i++) {
        const lmc_shape *s = &shapes[i];
        if (s->ndim > LMC_SHAPE_MAX_DIMS) {
            st = lmc_error_set(err, LMC_ERR_INVALID,
                               "MemoryLayoutDesc: shapes[%zu] has %" PRIu32
                               " dims; at most %d supported",
                               i, s->ndim, LMC_SHAPE_MAX_DIMS);
            goto fail;
        }
        if (!dtype_valid(dtypes[i])) {
            st = lmc_error_set(err, LMC_ERR_INVALID,
                               "MemoryLayoutDesc: dtypes[%zu] is not a valid dtype (%d)", i,
                               (int)dtypes[i]);
            goto fail;
        }
        bool has_zero = false;
        for (uint32_t j = 0; j < s->ndim; j++) {
            if (s->dims[j] < 0) {
                st = lmc_error_set(err, LMC_ERR_INVALID,
                                   "MemoryLayoutDesc: shapes[%zu] dim %" PRIu32 " is %" PRId64
                                   "; dims must be >= 0",
                                   i, j, s->dims[j]);
                goto fail;
            }
            has_zero |= s->dims[j] == 0;
            d.shapes[i].dims[j] = s->dims[j];
        }
        d.shapes[i].ndim = s->ndim;
        /* Reject sizes that overflow so lmc_layout_desc_nbytes never wraps. */
        uint64_t bytes = lmc_dtype_itemsize(dtypes[i]);
        for (uint32_t j = 0; j < s->ndim && !has_zero; j++) {
            if (__builtin_mul_overflow(bytes, (uint64_t)s->dims[j], &bytes)) {
                st = lmc_error_set(err, LMC_ERR_INVALID,
                                   "MemoryLayoutDesc: shapes[%zu] is too large (byte size "
                                   "overflows 64 bits)",
                                   i);
                goto fail;
            }
        }
        if (has_zero)
            bytes = 0;
        d.dtypes[i] = dtypes[i];
        if (__builtin_add_overflow(total, bytes, &total)) {
            st = lmc_error_set(err, LMC_ERR_INVALID,
                               "MemoryLayoutDesc: total byte size overflows 64 bits");
            goto fail;
        }
    }
    d.count = (uint32_t)nshapes;
    memcpy(desc, &d, sizeof(d)); /* memcpy keeps the zeroed padding */
    return LMC_OK;

fail:
    memset(desc, 0, sizeof(*desc));
    return st;
}

lmc_status lmc_layout_desc_make1(lmc_layout_desc *desc, const int64_t *dims, size_t ndim,
                                 lmc_dtype dtype, lmc_error *err)
{
    if (ndim > LMC_SHAPE_MAX_DIMS) {
        memset(desc, 0, sizeof(*desc));
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "MemoryLayoutDesc: shapes[0] has %zu dims; at most %d supported", ndim,
                             LMC_SHAPE_MAX_DIMS);
    }
    if (dims == NULL && ndim > 0) {
        memset(desc, 0, sizeof(*desc));
        return lmc_error_set(err, LMC_ERR_INVALID, "MemoryLayoutDesc: dims must not be NULL");
    }
    lmc_shape shape;
    memset(&shape, 0, sizeof(shape));
    shape.ndim = (uint32_t)ndim;
    if (ndim > 0)
        memcpy(shape.dims, dims, ndim * sizeof(dims[0]));
    return lmc_layout_desc_make(desc, &shape, 1, &dtype, 1, err);
}

uint64_t lmc_layout_desc_nbytes(const lmc_layout_desc *desc)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < desc->count && i < LMC_LAYOUT_MAX_TENSORS; i++)
        total += lmc_shape_numel(&desc->shapes[i]) * lmc_dtype_itemsize(desc->dtypes[i]);
    return total;
}

bool lmc_layout_desc_equal(const lmc_layout_desc *a, const lmc_layout_desc *b)
{
    if (a->count != b->count)
        return false;
    for (uint32_t i = 0; i < a->count && i < LMC_LAYOUT_MAX_TENSORS; i++) {
        const lmc_shape *sa = &a->shapes[i];
        const lmc_shape *sb = &b->shapes[i];
        if (a->dtypes[i] != b->dtypes[i] || sa->ndim != sb->ndim)
            return false;
        for (uint32_t j = 0; j < sa->ndim && j < LMC_SHAPE_MAX_DIMS; j++) {
            if (sa->dims[j] != sb->dims[j])
                return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------- */
/* TrimPolicy, L1 errors                                                   */
/* ---------------------------------------------------------------------- */

/* The one list of TrimPolicy names, indexed by lmc_trim_policy (0 is no policy). */
static const char *const g_trim_policies[] = {
    [LMC_TRIM_PREFIX] = "PREFIX",
    [LMC_TRIM_SEGMENTED_PREFIX] = "SEGMENTED_PREFIX",
    [LMC_TRIM_SPARSE] = "SPARSE",
};
#define N_TRIM_POLICIES (sizeof(g_trim_policies) / sizeof(g_trim_policies[0]))

const char *lmc_trim_policy_name(lmc_trim_policy p)
{
    return (size_t)p < N_TRIM_POLICIES ? g_trim_policies[p] : NULL;
}

lmc_status lmc_trim_policy_from_name(const char *name, size_t len, lmc_trim_policy *out,
                                     lmc_error *err)
{
    if (name == NULL) {
        name = "";
        len = 0;
    }
    size_t i;
    lmc_status st =
        lmc_names_parse(g_trim_policies, N_TRIM_POLICIES, "TrimPolicy", name, len, &i, err);
    if (st == LMC_OK)
        *out = (lmc_trim_policy)i;
    return st;
}

const char *lmc_l1_error_name(lmc_l1_error e)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return "SUCCESS";
    case LMC_L1_KEY_NOT_EXIST:
        return "KEY_NOT_EXIST";
    case LMC_L1_KEY_NOT_READABLE:
        return "KEY_NOT_READABLE";
    case LMC_L1_KEY_NOT_WRITABLE:
        return "KEY_NOT_WRITABLE";
    case LMC_L1_KEY_IN_WRONG_STATE:
        return "KEY_IN_WRONG_STATE";
    case LMC_L1_KEY_IS_LOCKED:
        return "KEY_IS_LOCKED";
    case LMC_L1_OUT_OF_MEMORY:
        return "OUT_OF_MEMORY";
    }
    return "UNKNOWN";
}

const char *lmc_l1_strerror(lmc_l1_error e)
{
    switch (e) {
    case LMC_L1_SUCCESS:
        return "Success.";
    case LMC_L1_KEY_NOT_EXIST:
        return "The key does not exist.";
    case LMC_L1_KEY_NOT_READABLE:
        return "The key is not readable (write in progress).";
    case LMC_L1_KEY_NOT_WRITABLE:
        return "The key is not writable (exists, locked or temporary).";
    case LMC_L1_KEY_IN_WRONG_STATE:
        return "The key is in the wrong state for this operation.";
    case LMC_L1_KEY_IS_LOCKED:
        return "The key is locked.";
    case LMC_L1_OUT_OF_MEMORY:
        return "Out of memory.";
    }
    return "Unknown error.";
}

/* ---------------------------------------------------------------------- */
/* PrefetchHandle                                                          */
/* ---------------------------------------------------------------------- */

/* Copy n indices into a new array; NULL for n == 0. False when out of memory. */
static bool copy_indices(uint32_t **dst, const uint32_t *src, size_t n)
{
    *dst = NULL;
    if (n == 0)
        return true;
    if (src == NULL || n > SIZE_MAX / sizeof(uint32_t))
        return false;
    *dst = malloc(n * sizeof(uint32_t));
    if (*dst == NULL)
        return false;
    memcpy(*dst, src, n * sizeof(uint32_t));
    return true;
}

lmc_status lmc_prefetch_handle_make(lmc_prefetch_handle *h, int64_t prefetch_request_id,
                                    const char *external_request_id,
                                    const uint32_t *l1_found_indices, size_t l1_found_count,
                                    size_t total_requested_keys, double submit_time,
                                    const uint32_t *l2_orig_indices, size_t l2_orig_count)
{
    memset(h, 0, sizeof(*h));
    lmc_status st = LMC_ERR_NOMEM;
    if ((l1_found_count > 0 && l1_found_indices == NULL) ||
        (l2_orig_count > 0 && l2_orig_indices == NULL)) {
        st = LMC_ERR_INVALID;
        goto fail;
    }
    h->external_request_id = strdup(external_request_id != NULL ? external_request_id : "");
    if (h->external_request_id == NULL)
        goto fail;
    if (!copy_indices(&h->l1_found_indices, l1_found_indices, l1_found_count))
        goto fail;
    if (!copy_indices(&h->l2_orig_indices, l2_orig_indices, l2_orig_count))
        goto fail;
    h->prefetch_request_id = prefetch_request_id;
    h->l1_found_count = l1_found_count;
    h->total_requested_keys = total_requested_keys;
    h->submit_time = submit_time;
    h->l2_orig_count = l2_orig_count;
    return LMC_OK;

fail:
    lmc_prefetch_handle_clear(h);
    return st;
}

void lmc_prefetch_handle_clear(lmc_prefetch_handle *h)
{
    if (h == NULL)
        return;
    free(h->external_request_id);
    free(h->l1_found_indices);
    free(h->l2_orig_indices);
    memset(h, 0, sizeof(*h));
}

uint64_t lmc_object_key_hash(const lmc_object_key *key)
{
    return key->hash;
}
