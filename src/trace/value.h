/*
 * value.h -- decoded trace argument values, and the arena they live in.
 *
 * Owns: lmc_tv, a tagged value that can hold what a trace record's args
 * carry: msgpack natives (nil, bool, int, float, str, bin, list, map) and
 * the codec-tagged types (tuple, set, ObjectKey, MemoryLayoutDesc,
 * torch.dtype, torch.Size, TrimPolicy, PrefetchHandle). lmc_arena is a bump
 * allocator: a decoded record's values all live in one arena that is reset
 * for the next record, so decoding allocates nothing per value.
 *
 * Encoding uses the same type: the recorder builds lmc_tv values that point
 * at the captured arguments (no copies) and hands them to the codecs.
 *
 * Threads: none; an arena and its values belong to one thread.
 */
#ifndef LMC_TRACE_VALUE_H
#define LMC_TRACE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"
#include "lmcache/types.h"

typedef enum lmc_tv_kind {
    LMC_TV_NIL = 0,
    LMC_TV_BOOL,
    LMC_TV_INT,  /* an integer that fits int64: u.i */
    LMC_TV_UINT, /* an integer above INT64_MAX (msgpack goes up to 2^64-1): u.u */
    LMC_TV_FLOAT,
    LMC_TV_STR,
    LMC_TV_BIN,
    LMC_TV_LIST,
    LMC_TV_MAP,
    /* Codec-tagged kinds: encoded as {"__t__": tag, "v": payload}. */
    LMC_TV_TUPLE,
    LMC_TV_SET,
    LMC_TV_OBJECT_KEY,
    LMC_TV_LAYOUT,
    LMC_TV_DTYPE,
    LMC_TV_SIZE,
    LMC_TV_TRIM_POLICY,
    LMC_TV_PREFETCH_HANDLE,
    LMC_TV_BUILTIN_COUNT_,
    /* Kinds from here up to LMC_TV_KIND_MAX may be registered at run time
     * (tests do; a new traced argument type would). Their payload is a
     * generic value in u.ext. */
    LMC_TV_KIND_MAX = 64,
} lmc_tv_kind;

typedef struct lmc_tv lmc_tv;

struct lmc_tv {
    uint32_t kind; /* an lmc_tv_kind */
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double f;
        struct {
            const char *ptr; /* not NUL-terminated in general */
            size_t len;
        } s; /* STR, BIN */
        struct {
            lmc_tv *items;
            size_t n;
        } list; /* LIST, TUPLE, SET */
        struct {
            lmc_tv *keys;
            lmc_tv *vals;
            size_t n;
        } map; /* MAP (insertion order) */
        const lmc_object_key *key;
        const lmc_layout_desc *layout;
        lmc_dtype dtype;
        const lmc_shape *size;
        lmc_trim_policy trim;
        const lmc_prefetch_handle *handle;
        const lmc_tv *ext; /* registered extra kinds */
    } u;
};

/* One named argument of a record, in signature order. */
typedef struct lmc_trace_arg {
    const char *name; /* NUL-terminated */
    size_t name_len;
    lmc_tv value;
} lmc_trace_arg;

/*
 * The arg named name, or NULL (the last one if a name repeats, as in a
 * Python dict). Implemented in codec.c.
 */
const lmc_trace_arg *lmc_trace_args_find(const lmc_trace_arg *args, size_t n, const char *name);

/* Constructors for encoding (no allocation; pointers are borrowed). */
static inline lmc_tv lmc_tv_nil(void)
{
    lmc_tv v = {.kind = LMC_TV_NIL};
    return v;
}
static inline lmc_tv lmc_tv_int(int64_t i)
{
    lmc_tv v = {.kind = LMC_TV_INT, .u.i = i};
    return v;
}
/* An integer >= 0 of any size: INT when it fits, else UINT (the decoder's rule). */
static inline lmc_tv lmc_tv_uint(uint64_t u)
{
    lmc_tv v = {.kind = LMC_TV_INT, .u.i = (int64_t)u};
    if (u > (uint64_t)INT64_MAX) {
        v.kind = LMC_TV_UINT;
        v.u.u = u;
    }
    return v;
}
static inline lmc_tv lmc_tv_float(double f)
{
    lmc_tv v = {.kind = LMC_TV_FLOAT, .u.f = f};
    return v;
}
static inline lmc_tv lmc_tv_bool(bool b)
{
    lmc_tv v = {.kind = LMC_TV_BOOL, .u.b = b};
    return v;
}
static inline lmc_tv lmc_tv_str(const char *s, size_t len)
{
    lmc_tv v = {.kind = LMC_TV_STR, .u.s = {s, len}};
    return v;
}
/*
 * A LIST, TUPLE or SET (kind) of n items: both decoders (codec.c's over a
 * msgpack_object tree, decode.c's over the bytes) end every sequence here.
 */
static inline lmc_tv lmc_tv_list(uint32_t kind, lmc_tv *items, size_t n)
{
    lmc_tv v = {.kind = kind, .u.list = {items, n}};
    return v;
}
/* A MAP of n keys and values, in insertion order (both decoders end a map here). */
static inline lmc_tv lmc_tv_map(lmc_tv *keys, lmc_tv *vals, size_t n)
{
    lmc_tv v = {.kind = LMC_TV_MAP, .u.map = {keys, vals, n}};
    return v;
}

/* ---------------------------------------------------------------------- */
/* Arena                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct lmc_arena_block lmc_arena_block;

typedef struct lmc_arena {
    lmc_arena_block *head; /* newest block */
    size_t block_size;
    size_t limit;    /* 0: none; else the most bytes its blocks may hold at once */
    size_t held;     /* bytes its blocks hold now */
    bool over_limit; /* an allocation was refused by the limit since the last reset */
} lmc_arena;

void lmc_arena_init(lmc_arena *a, size_t block_size);
/*
 * 16-byte aligned memory valid until reset/free; NULL when out of memory or
 * when it would take the blocks past the limit (over_limit then says so).
 */
void *lmc_arena_alloc(lmc_arena *a, size_t n);
/*
 * Forget everything allocated. Keeps one block of at most 4 times the block
 * size for reuse, so one huge record does not pin its memory afterwards.
 */
void lmc_arena_reset(lmc_arena *a);
/* Bound what the arena holds at once (0: no bound); takes effect from the next allocation. */
void lmc_arena_set_limit(lmc_arena *a, size_t limit);
void lmc_arena_free(lmc_arena *a);

/*
 * Python-ish rendering for messages and tests: "ObjectKey(m@0x01000100@0@0a0b)".
 * Like snprintf: writes at most len bytes including the NUL and returns the
 * length it wanted.
 */
size_t lmc_tv_format(const lmc_tv *v, char *buf, size_t len);

/*
 * Python's repr() of a str ('x.lct'), of bytes (b'WRNG') and of a float
 * (0.1, 1e+16, 100.0), snprintf-style as above.
 */
size_t lmc_repr_str(const char *s, size_t n, char *buf, size_t len);
size_t lmc_repr_bytes(const void *p, size_t n, char *buf, size_t len);
size_t lmc_repr_float(double f, char *buf, size_t len);

#endif
