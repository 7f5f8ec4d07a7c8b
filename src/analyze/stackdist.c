/*
 * stackdist.c -- byte-weighted LRU stack distances (see stackdist.h).
 *
 * Owns the per-id state (size, last position), the timeline's owner array
 * (which id each position belongs to, for compaction), and the live
 * positions twice over: as a bitmap (a set bit per id's last position)
 * with a Fenwick tree of the count per 64-position word (1-based: node i
 * covers words (i - lowbit(i), i]), and as a Fenwick tree of bytes per
 * position.
 *
 * The distance of an access to an id last seen at position p is the total
 * over positions after p: the live total minus the prefix sum through p
 * (which includes the id's own weight). The id's weight then moves from p
 * to the next free position. When the timeline is full, the live
 * positions (one per id) are packed to the front in order and the trees
 * are rebuilt in linear time; the timeline is then at least twice the
 * live ids, so the next compaction is at least as many accesses away as
 * it costs.
 *
 * Counting ids after p is the word tree's prefix over the words before
 * p's, plus a popcount in p's word. Bitmap and word tree take 1/64 + 1/16
 * of a byte per position, so they stay in the L2 cache for millions of
 * ids where a tree of a node per position would miss it several times per
 * walk (the walks are the cost of an access). While every id has the same
 * size -- one layout per model, the usual case -- the bytes tree is not
 * kept: bytes are the count times that size. The first id of another size
 * builds the bytes tree from the live positions (once) and it is kept from
 * then on.
 *
 * Threads: none.
 */
#include "analyze/stackdist.h"

#include <stdlib.h>
#include <string.h>

#define NEVER UINT32_MAX
#define MIN_SLOTS 1024u

/* Per id, together: an access reads both, so they share a cache line. */
typedef struct id_state {
    uint64_t size;
    uint32_t last; /* position of its last access; NEVER before the first */
} id_state;

struct lmc_stackdist {
    id_state *ids;
    size_t ids_cap;
    uint64_t n_ids, total_bytes;
    uint64_t *bits;  /* [slots / 64]: live positions */
    uint32_t *words; /* [1..slots / 64]: Fenwick tree of live positions per word */
    uint64_t *bytes; /* [1..slots]: Fenwick tree of bytes; NULL while sizes are uniform */
    uint64_t unit;   /* the one size, while uniform */
    uint32_t *owner; /* [0..slots): the id whose access a position records */
    size_t slots;
    size_t now; /* the next free position */
    uint64_t live_keys, live_bytes;
};

lmc_stackdist *lmc_stackdist_create(void)
{
    lmc_stackdist *sd = calloc(1, sizeof(*sd));
    if (sd == NULL)
        return NULL;
    sd->slots = MIN_SLOTS;
    sd->bits = calloc(sd->slots / 64, sizeof(*sd->bits));
    sd->words = calloc(sd->slots / 64 + 1, sizeof(*sd->words));
    sd->owner = malloc(sd->slots * sizeof(*sd->owner));
    if (sd->bits == NULL || sd->words == NULL || sd->owner == NULL) {
        lmc_stackdist_destroy(sd);
        return NULL;
    }
    return sd;
}

void lmc_stackdist_destroy(lmc_stackdist *sd)
{
    if (sd == NULL)
        return;
    free(sd->ids);
    free(sd->bits);
    free(sd->words);
    free(sd->bytes);
    free(sd->owner);
    free(sd);
}

uint64_t lmc_stackdist_ids(const lmc_stackdist *sd)
{
    return sd->n_ids;
}

uint64_t lmc_stackdist_bytes(const lmc_stackdist *sd)
{
    return sd->total_bytes;
}

static inline size_t lowbit(size_t i)
{
    return i & (~i + 1);
}

/* Ids over positions [0, pos]: whole words before pos's, then pos's word up to pos. */
static inline uint32_t prefix_keys(const lmc_stackdist *sd, size_t pos)
{
    size_t w = pos / 64;
    unsigned b = (unsigned)(pos % 64);
    uint64_t mask = b == 63 ? UINT64_MAX : ((uint64_t)2 << b) - 1;
    uint32_t s = (uint32_t)__builtin_popcountll(sd->bits[w] & mask);
    for (size_t i = w; i > 0; i -= lowbit(i))
        s += sd->words[i];
    return s;
}

static inline uint64_t prefix_bytes(const lmc_stackdist *sd, size_t pos)
{
    uint64_t s = 0;
    for (size_t i = pos + 1; i > 0; i -= lowbit(i))
        s += sd->bytes[i];
    return s;
}

/* Add one id of size bytes at pos, or remove it (sign -1); counts wrap modulo 2^32 and 2^64. */
static inline void add(lmc_stackdist *sd, size_t pos, int sign, uint64_t size)
{
    uint32_t k = sign > 0 ? 1u : UINT32_MAX;
    sd->bits[pos / 64] ^= (uint64_t)1 << (pos % 64);
    for (size_t i = pos / 64 + 1; i <= sd->slots / 64; i += lowbit(i))
        sd->words[i] += k;
    if (sd->bytes == NULL)
        return;
    uint64_t b = sign > 0 ? size : (uint64_t)0 - size;
    for (size_t i = pos + 1; i <= sd->slots; i += lowbit(i))
        sd->bytes[i] += b;
}

/* Room for id in the per-id array. */
static lmc_status reserve_id(lmc_stackdist *sd, uint32_t id)
{
    if (id < sd->ids_cap)
        return LMC_OK;
    size_t cap = sd->ids_cap ? sd->ids_cap : 1024;
    while (cap <= id)
        cap *= 2;
    id_state *ids = realloc(sd->ids, cap * sizeof(*ids));
    if (ids == NULL)
        return LMC_ERR_NOMEM;
    sd->ids = ids;
    for (size_t i = sd->ids_cap; i < cap; i++)
        sd->ids[i] = (id_state){0, NEVER};
    sd->ids_cap = cap;
    return LMC_OK;
}

/* The trees from the live positions [0, live): leaves, then each node passes its sum up. */
static void rebuild(lmc_stackdist *sd, size_t live)
{
    size_t n_words = sd->slots / 64;
    memset(sd->bits, 0, n_words * sizeof(*sd->bits));
    for (size_t pos = 0; pos < live; pos++) {
        if (sd->ids[sd->owner[pos]].last == pos)
            sd->bits[pos / 64] |= (uint64_t)1 << (pos % 64);
    }
    sd->words[0] = 0;
    for (size_t w = 0; w < n_words; w++)
        sd->words[w + 1] = (uint32_t)__builtin_popcountll(sd->bits[w]);
    for (size_t i = 1; i <= n_words; i++) {
        size_t parent = i + lowbit(i);
        if (parent <= n_words)
            sd->words[parent] += sd->words[i];
    }
    if (sd->bytes == NULL)
        return;
    memset(sd->bytes, 0, (sd->slots + 1) * sizeof(*sd->bytes));
    for (size_t pos = 0; pos < live; pos++) {
        const id_state *st = &sd->ids[sd->owner[pos]];
        sd->bytes[pos + 1] = st->last == pos ? st->size : 0;
    }
    for (size_t i = 1; i <= sd->slots; i++) {
        size_t parent = i + lowbit(i);
        if (parent <= sd->slots)
            sd->bytes[parent] += sd->bytes[i];
    }
}

/* The first id of a second size: keep bytes from now on. */
static lmc_status start_bytes(lmc_stackdist *sd)
{
    sd->bytes = calloc(sd->slots + 1, sizeof(*sd->bytes));
    if (sd->bytes == NULL)
        return LMC_ERR_NOMEM;
    rebuild(sd, sd->now);
    return LMC_OK;
}

/* Grow one array to n elements (contents rebuilt after); false when memory runs out. */
static bool grow_array(void **a, size_t elem, size_t n)
{
    void *t = realloc(*a, n * elem);
    if (t == NULL)
        return false;
    *a = t;
    return true;
}

/*
 * The timeline is full: pack the live positions to the front (in order),
 * grow it to at least twice their number, and rebuild the trees.
 */
static lmc_status compact(lmc_stackdist *sd)
{
    size_t live = 0;
    for (size_t pos = 0; pos < sd->now; pos++) {
        uint32_t id = sd->owner[pos];
        if (sd->ids[id].last == pos) {
            sd->owner[live] = id;
            sd->ids[id].last = (uint32_t)live;
            live++;
        }
    }
    size_t slots = sd->slots;
    while (slots < 2 * live)
        slots *= 2;
    /* Grow what can grow; on failure keep the old size while the packed timeline has room. */
    if (slots != sd->slots && slots < NEVER &&
        grow_array((void **)&sd->bits, sizeof(*sd->bits), slots / 64) &&
        grow_array((void **)&sd->words, sizeof(*sd->words), slots / 64 + 1) &&
        (sd->bytes == NULL || grow_array((void **)&sd->bytes, sizeof(*sd->bytes), slots + 1))) {
        uint32_t *owner = realloc(sd->owner, slots * sizeof(*owner));
        if (owner != NULL) {
            sd->owner = owner;
            sd->slots = slots;
        }
    }
    rebuild(sd, live);
    sd->now = live;
    return live < sd->slots ? LMC_OK : LMC_ERR_NOMEM;
}

lmc_status lmc_stackdist_access(lmc_stackdist *sd, uint32_t id, uint64_t size,
                                lmc_stackdist_access_result *out)
{
    if (id == NEVER)
        return LMC_ERR_INVALID;
    if (reserve_id(sd, id) != LMC_OK)
        return LMC_ERR_NOMEM;
    if (sd->now == sd->slots && compact(sd) != LMC_OK)
        return LMC_ERR_NOMEM;
    id_state *st = &sd->ids[id];
    uint32_t p = st->last;
    if (p == NEVER) {
        if (sd->n_ids == 0)
            sd->unit = size;
        else if (sd->bytes == NULL && size != sd->unit && start_bytes(sd) != LMC_OK)
            return LMC_ERR_NOMEM;
        st->size = size;
        sd->n_ids++;
        sd->total_bytes += size;
        *out = (lmc_stackdist_access_result){.cold = true, .size = size};
    } else {
        uint64_t own = st->size;
        uint32_t keys = prefix_keys(sd, p);
        uint64_t bytes = sd->bytes != NULL ? prefix_bytes(sd, p) : (uint64_t)keys * sd->unit;
        *out = (lmc_stackdist_access_result){.cold = false,
                                             .bytes = sd->live_bytes - bytes,
                                             .keys = sd->live_keys - keys,
                                             .size = own};
        add(sd, p, -1, own);
        sd->live_bytes -= own;
        sd->live_keys -= 1;
    }
    size_t pos = sd->now++;
    add(sd, pos, 1, out->size);
    sd->live_bytes += out->size;
    sd->live_keys += 1;
    sd->owner[pos] = id;
    st->last = (uint32_t)pos;
    return LMC_OK;
}

void lmc_stackdist_prefetch_id(const lmc_stackdist *sd, uint32_t id)
{
    if (id < sd->ids_cap)
        __builtin_prefetch(&sd->ids[id]);
}

void lmc_stackdist_prefetch_last(const lmc_stackdist *sd, uint32_t id)
{
    if (id < sd->ids_cap && sd->ids[id].last != NEVER) {
        __builtin_prefetch(&sd->bits[sd->ids[id].last / 64]);
        if (sd->bytes != NULL)
            __builtin_prefetch(&sd->bytes[sd->ids[id].last + 1]);
    }
}
