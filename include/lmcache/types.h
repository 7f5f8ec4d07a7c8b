/*
 * types.h -- the value types of the storage layer.
 *
 * Owns: ObjectKey, MemoryLayoutDesc and its dtype table, PrefetchHandle,
 * TrimPolicy and the L1 error codes, with LMCache's semantics
 * (spec/storage-manager.md section 2).
 *
 * Strings inside keys are interned (lmc_intern): a key is a fixed-size value
 * that can be copied with memcpy, compared field by field and hashed without
 * touching the heap. Interned strings live until the process exits.
 *
 * Threads: every function is thread-safe; the intern table takes its own lock
 * on insertion only.
 */
#ifndef LMCACHE_TYPES_H
#define LMCACHE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lmcache/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/* Interned strings                                                        */
/* ---------------------------------------------------------------------- */

/*
 * Return the canonical copy of the len bytes at s (which need not be
 * NUL-terminated), NUL-terminated, valid until exit. Equal strings give the
 * same pointer. Returns NULL only when memory runs out.
 */
const char *lmc_intern(const char *s, size_t len);

/*
 * The canonical copy of s if it is interned already, else NULL; never
 * inserts. For a caller that bounds what untrusted input may add to the
 * table (entries are never removed).
 */
const char *lmc_intern_find(const char *s, size_t len);

/* ---------------------------------------------------------------------- */
/* ObjectKey                                                               */
/* ---------------------------------------------------------------------- */

#define LMC_CHUNK_HASH_MAX 64    /* bytes held in the key itself (longer: see below) */
#define LMC_CACHE_SALT_MAX 128   /* characters (code points) */
#define LMC_MODEL_NAME_MAX 1024  /* bytes */

typedef struct lmc_object_key {
    /*
     * The hash when chunk_hash_len <= LMC_CHUNK_HASH_MAX (bytes past it are
     * 0). A longer hash (only a key made through a cache with long_hashes
     * set) is interned and this holds its address, then zeros: read the
     * bytes with lmc_object_key_hash_bytes.
     */
    uint8_t chunk_hash[LMC_CHUNK_HASH_MAX];
    uint32_t chunk_hash_len;
    int64_t kv_rank;
    int64_t object_group_id; /* >= 0 */
    const char *model_name;  /* interned; no '@' */
    const char *cache_salt;  /* interned; "" when none */
    uint64_t hash;           /* cached by lmc_object_key_make; keys are immutable */
} lmc_object_key;

/*
 * Build and validate a key. model_name and cache_salt are NUL-terminated;
 * cache_salt may be NULL for "". Errors (LMC_ERR_INVALID), each naming the
 * field: chunk_hash longer than 64 bytes (allowed only through a cache
 * with long_hashes set); model_name containing '@';
 * object_group_id < 0; cache_salt containing '@', '/', '\' or NUL, or longer
 * than 128 characters.
 */
lmc_status lmc_object_key_make(lmc_object_key *key, const void *chunk_hash, size_t hash_len,
                               const char *model_name, int64_t kv_rank, int64_t object_group_id,
                               const char *cache_salt, lmc_error *err);

/* Same, with explicit string lengths (strings from a decoder may hold NUL). */
lmc_status lmc_object_key_make_n(lmc_object_key *key, const void *chunk_hash, size_t hash_len,
                                 const char *model_name, size_t model_len, int64_t kv_rank,
                                 int64_t object_group_id, const char *cache_salt,
                                 size_t salt_len, lmc_error *err);

/*
 * The model_name and cache_salt of the last key made through it, already
 * validated and interned (pointers into the intern table, valid until
 * exit; nothing to free). Zero-initialise one per run of keys: decoders
 * build many keys in a row that nearly always share both strings, and a
 * hit costs a byte compare instead of a validation and a hash lookup.
 */
typedef struct lmc_object_key_cache {
    const char *model_name;
    size_t model_len;
    const char *cache_salt;
    size_t salt_len;
    /*
     * Set by the caller: accept chunk hashes longer than LMC_CHUNK_HASH_MAX
     * (up to 4 GiB - 1), kept out of line in the intern table for the life
     * of the process. The trace decoder sets it, as LMCache takes a hash of
     * any length; the server does not, since a client could then grow the
     * intern table without bound.
     */
    bool long_hashes;
} lmc_object_key_cache;

/* lmc_object_key_make_n through a cache (NULL is fine): same key, same errors. */
lmc_status lmc_object_key_make_cached(lmc_object_key_cache *cache, lmc_object_key *key,
                                      const void *chunk_hash, size_t hash_len,
                                      const char *model_name, size_t model_len, int64_t kv_rank,
                                      int64_t object_group_id, const char *cache_salt,
                                      size_t salt_len, lmc_error *err);

/* The chunk hash's chunk_hash_len bytes, wherever they are kept. */
static inline const uint8_t *lmc_object_key_hash_bytes(const lmc_object_key *key)
{
    if (key->chunk_hash_len <= LMC_CHUNK_HASH_MAX)
        return key->chunk_hash;
    const uint8_t *p;
    memcpy(&p, key->chunk_hash, sizeof(p));
    return p;
}

/* Equality over all five fields. */
bool lmc_object_key_equal(const lmc_object_key *a, const lmc_object_key *b);

/*
 * A 64-bit hash (xxhash) consistent with lmc_object_key_equal, computed once
 * by lmc_object_key_make and cached in the key: a key must not be modified
 * after it is made (copying it is fine). The value depends on the interned
 * string addresses, so it is only meaningful inside one process.
 */
uint64_t lmc_object_key_hash(const lmc_object_key *key);

/*
 * Pack a parallel layout into a kv_rank: four 8-bit fields,
 * world_size<<24 | global_rank<<16 | local_world_size<<8 | local_rank.
 * Each argument must be in 0..255 (values are masked to 8 bits).
 */
int64_t lmc_compute_kv_rank(unsigned world_size, unsigned global_rank, unsigned local_world_size,
                            unsigned local_rank);

/*
 * A readable form for logs: "<model>@0x<rank>@<group>@<hash hex>[@<salt>]".
 * Writes at most len bytes including the NUL; returns the length it wanted.
 */
size_t lmc_object_key_format(const lmc_object_key *key, char *buf, size_t len);

/* ---------------------------------------------------------------------- */
/* dtypes                                                                  */
/* ---------------------------------------------------------------------- */

typedef enum lmc_dtype {
    LMC_DTYPE_INVALID = 0,
    LMC_DTYPE_FLOAT16,
    LMC_DTYPE_BFLOAT16,
    LMC_DTYPE_FLOAT32,
    LMC_DTYPE_FLOAT64,
    LMC_DTYPE_INT8,
    LMC_DTYPE_UINT8,
    LMC_DTYPE_INT16,
    LMC_DTYPE_UINT16,
    LMC_DTYPE_INT32,
    LMC_DTYPE_UINT32,
    LMC_DTYPE_INT64,
    LMC_DTYPE_UINT64,
    LMC_DTYPE_BOOL,
    LMC_DTYPE_COMPLEX32,
    LMC_DTYPE_COMPLEX64,
    LMC_DTYPE_COMPLEX128,
    LMC_DTYPE_FLOAT8_E4M3FN,
    LMC_DTYPE_FLOAT8_E5M2,
    LMC_DTYPE_FLOAT8_E4M3FNUZ,
    LMC_DTYPE_FLOAT8_E5M2FNUZ,
    LMC_DTYPE_QINT8,
    LMC_DTYPE_QUINT8,
    LMC_DTYPE_QINT32,
    LMC_DTYPE_COUNT_
} lmc_dtype;

/* torch's str() of the dtype, e.g. "torch.float16"; "invalid" otherwise. */
const char *lmc_dtype_name(lmc_dtype dt);

/* Bytes per element; 0 for LMC_DTYPE_INVALID. */
size_t lmc_dtype_itemsize(lmc_dtype dt);

/*
 * Look a dtype up by name: the canonical names and torch's aliases
 * ("torch.half", "torch.float", "torch.double", "torch.long", "torch.int",
 * "torch.short", "torch.cfloat", "torch.cdouble", "torch.chalf").
 * Unknown name: LMC_ERR_INVALID, "unknown torch dtype '<name>'".
 */
lmc_status lmc_dtype_from_name(const char *name, size_t len, lmc_dtype *out, lmc_error *err);

/* ---------------------------------------------------------------------- */
/* MemoryLayoutDesc                                                        */
/* ---------------------------------------------------------------------- */

#define LMC_LAYOUT_MAX_TENSORS 8
#define LMC_SHAPE_MAX_DIMS 8

typedef struct lmc_shape {
    uint32_t ndim;
    int64_t dims[LMC_SHAPE_MAX_DIMS]; /* each >= 0 */
} lmc_shape;

typedef struct lmc_layout_desc {
    uint32_t count; /* number of (shape, dtype) tensors */
    lmc_shape shapes[LMC_LAYOUT_MAX_TENSORS];
    lmc_dtype dtypes[LMC_LAYOUT_MAX_TENSORS];
} lmc_layout_desc;

/*
 * Build a layout. nshapes must equal ndtypes ("shapes and dtypes must have
 * the same length"); at most LMC_LAYOUT_MAX_TENSORS tensors of at most
 * LMC_SHAPE_MAX_DIMS dims each; dims >= 0; dtypes valid.
 */
lmc_status lmc_layout_desc_make(lmc_layout_desc *desc, const lmc_shape *shapes, size_t nshapes,
                                const lmc_dtype *dtypes, size_t ndtypes, lmc_error *err);

/* Convenience for the common one-tensor layout. */
lmc_status lmc_layout_desc_make1(lmc_layout_desc *desc, const int64_t *dims, size_t ndim,
                                 lmc_dtype dtype, lmc_error *err);

/* Elements in a shape (product of dims; 1 for a 0-dim shape). */
uint64_t lmc_shape_numel(const lmc_shape *shape);

/* Logical byte size: sum of numel(shape_i) * itemsize(dtype_i). */
uint64_t lmc_layout_desc_nbytes(const lmc_layout_desc *desc);

bool lmc_layout_desc_equal(const lmc_layout_desc *a, const lmc_layout_desc *b);

/* ---------------------------------------------------------------------- */
/* TrimPolicy, L1 errors                                                   */
/* ---------------------------------------------------------------------- */

typedef enum lmc_trim_policy {
    LMC_TRIM_PREFIX = 1,
    LMC_TRIM_SEGMENTED_PREFIX = 2,
    LMC_TRIM_SPARSE = 3,
} lmc_trim_policy;

/* "PREFIX", "SEGMENTED_PREFIX", "SPARSE"; NULL for anything else. */
const char *lmc_trim_policy_name(lmc_trim_policy p);

/* Parse a member name; LMC_ERR_INVALID naming the value otherwise. */
lmc_status lmc_trim_policy_from_name(const char *name, size_t len, lmc_trim_policy *out,
                                     lmc_error *err);

typedef enum lmc_l1_error {
    LMC_L1_SUCCESS = 0,
    LMC_L1_KEY_NOT_EXIST,
    LMC_L1_KEY_NOT_READABLE,
    LMC_L1_KEY_NOT_WRITABLE,
    LMC_L1_KEY_IN_WRONG_STATE,
    LMC_L1_KEY_IS_LOCKED,
    LMC_L1_OUT_OF_MEMORY,
} lmc_l1_error;

/* LMCache's enum member name, e.g. "KEY_NOT_EXIST"; "UNKNOWN" otherwise. */
const char *lmc_l1_error_name(lmc_l1_error e);

/* A one-line English message; "Unknown error." for anything unknown. */
const char *lmc_l1_strerror(lmc_l1_error e);

/*
 * A key's state in L1 at one moment (lmc_sm_l1_key_states). One L1 error
 * code covers several states (KEY_NOT_WRITABLE: present, being written,
 * read-locked or temporary; KEY_NOT_READABLE: being written or merely not
 * read-locked), so a caller that must say why a key failed asks for this.
 */
typedef enum lmc_l1_key_state {
    LMC_L1_STATE_ABSENT = 0,  /* not in L1 */
    LMC_L1_STATE_WRITING,     /* reserved for writing, write not finished (not readable) */
    LMC_L1_STATE_READ_LOCKED, /* readable and held by at least one read lock */
    LMC_L1_STATE_READY,       /* readable, no lock held */
} lmc_l1_key_state;

/* reserve_write modes. */
typedef enum lmc_write_mode {
    LMC_WRITE_NEW = 0, /* only keys that do not exist yet */
    LMC_WRITE_UPDATE,  /* only existing, writable keys, in place */
    LMC_WRITE_ALL,     /* both */
} lmc_write_mode;

/* "new", "update", "all" (implemented in src/storage/l1_manager.c). */
const char *lmc_write_mode_name(lmc_write_mode m);
lmc_status lmc_write_mode_from_name(const char *s, size_t len, lmc_write_mode *out,
                                    lmc_error *err);

/* ---------------------------------------------------------------------- */
/* PrefetchHandle                                                          */
/* ---------------------------------------------------------------------- */

/*
 * What submit_prefetch_task returns. Owns its arrays and string; release
 * with lmc_prefetch_handle_clear (the struct itself is the caller's).
 */
typedef struct lmc_prefetch_handle {
    int64_t prefetch_request_id; /* -1 when nothing was sent to L2 */
    char *external_request_id;   /* owned, NUL-terminated, never NULL once set */
    uint32_t *l1_found_indices;  /* owned; keys already in L1 and read-locked */
    size_t l1_found_count;
    size_t total_requested_keys;
    double submit_time; /* monotonic seconds */
    uint32_t *l2_orig_indices; /* owned; original index of each key sent to L2 */
    size_t l2_orig_count;
} lmc_prefetch_handle;

/*
 * Fill a handle, copying the arrays and the string. On failure the handle
 * is left empty (safe to clear).
 */
lmc_status lmc_prefetch_handle_make(lmc_prefetch_handle *h, int64_t prefetch_request_id,
                                    const char *external_request_id,
                                    const uint32_t *l1_found_indices, size_t l1_found_count,
                                    size_t total_requested_keys, double submit_time,
                                    const uint32_t *l2_orig_indices, size_t l2_orig_count);

/* Free what the handle owns and zero it. Safe on a zeroed handle. */
void lmc_prefetch_handle_clear(lmc_prefetch_handle *h);

#ifdef __cplusplus
}
#endif
#endif
