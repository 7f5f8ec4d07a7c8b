/*
 * stackdist.c -- byte-weighted LRU stack distances (see stackdist.h).
 *
 * Owns the per-id arrays (last position, size), the timeline's owner array
 * (which id each position belongs to, for compaction) and the Fenwick tree
 * over the timeline (1-based: node i covers positions (i - lowbit(i), i]).
 *
 * The distance of an access to an id last seen at position p is the total
 * over positions after p, i.e. the live total minus the prefix sum through
 * p (which includes the id's own weight). The id's weight then moves from
 * p to the next free position. When the timeline is full, the live
 * positions (one per id) are packed to the front in order and the tree is
 * rebuilt in linear time; the timeline is then at least twice the live ids,
 * so the next compaction is at least as many accesses away as it costs.
 *
 * Threads: none.
 */
#include "analyze/stackdist.h"

#include <stdlib.h>
#include <string.h>

#define NEVER UINT32_MAX
#define MIN_SLOTS 1024u

typedef struct node {
    uint64_t bytes;
    uint64_t keys;
} node;

struct lmc_stackdist {
    uint32_t *last; /* per id: position of its last access, NEVER before the first */
    uint64_t *size; /* per id */
    size_t ids_cap; /* entries in last[] and size[] */
    uint64_t n_ids, total_bytes;
    node *tree;      /* [1..slots] */
    uint32_t *owner; /* [0..slots): the id whose access a position records */
    size_t slots;
    size_t now; /* the next free position */
    node live;  /* the sum over the whole tree */
};

lmc_stackdist *lmc_stackdist_create(void)
{
    lmc_stackdist *sd = calloc(1, sizeof(*sd));
    if (sd == NULL)
        return NULL;
    sd->slots = MIN_SLOTS;
    sd->tree = calloc(sd->slots + 1, sizeof(*sd->tree));
    sd->owner = malloc(sd->slots * sizeof(*sd->owner));
    if (sd->tree == NULL || sd->owner == NULL) {
        lmc_stackdist_destroy(sd);
        return NULL;
    }
    return sd;
}

void lmc_stackdist_destroy(lmc_stackdist *sd)
{
    if (sd == NULL)
        return;
    free(sd->last);
    free(sd->size);
    free(sd->tree);
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

/* Sum over positions [0, pos]. */
static inline node prefix(const lmc_stackdist *sd, size_t pos)
{
    node s = {0, 0};
    for (size_t i = pos + 1; i > 0; i -= lowbit(i)) {
        s.bytes += sd->tree[i].bytes;
        s.keys += sd->tree[i].keys;
    }
    return s;
}

/* Add (bytes, keys) at pos; both wrap modulo 2^64, so a removal is a negated add. */
static inline void add(lmc_stackdist *sd, size_t pos, uint64_t bytes, uint64_t keys)
{
    for (size_t i = pos + 1; i <= sd->slots; i += lowbit(i)) {
        sd->tree[i].bytes += bytes;
        sd->tree[i].keys += keys;
    }
}

/* Room for id in the per-id arrays. */
static lmc_status reserve_id(lmc_stackdist *sd, uint32_t id)
{
    if (id < sd->ids_cap)
        return LMC_OK;
    size_t cap = sd->ids_cap ? sd->ids_cap : 1024;
    while (cap <= id)
        cap *= 2;
    uint32_t *last = realloc(sd->last, cap * sizeof(*last));
    if (last == NULL)
        return LMC_ERR_NOMEM;
    sd->last = last;
    uint64_t *size = realloc(sd->size, cap * sizeof(*size));
    if (size == NULL)
        return LMC_ERR_NOMEM; /* last[] grew, which is harmless */
    sd->size = size;
    for (size_t i = sd->ids_cap; i < cap; i++)
        sd->last[i] = NEVER;
    sd->ids_cap = cap;
    return LMC_OK;
}

/*
 * The timeline is full: pack the live positions to the front (in order),
 * grow it to at least twice their number, and rebuild the tree.
 */
static lmc_status compact(lmc_stackdist *sd)
{
    size_t live = 0;
    for (size_t pos = 0; pos < sd->now; pos++) {
        uint32_t id = sd->owner[pos];
        if (sd->last[id] == pos) {
            sd->owner[live] = id;
            sd->last[id] = (uint32_t)live;
            live++;
        }
    }
    size_t slots = sd->slots;
    while (slots < 2 * live)
        slots *= 2;
    if (slots >= NEVER)
        return LMC_ERR_NOMEM; /* positions are 32-bit */
    if (slots != sd->slots) {
        node *tree = realloc(sd->tree, (slots + 1) * sizeof(*tree));
        if (tree == NULL)
            goto rebuild; /* keep the old size: the packed timeline still has room */
        sd->tree = tree;
        uint32_t *owner = realloc(sd->owner, slots * sizeof(*owner));
        if (owner == NULL) {
            /* tree is larger than it needs to be, which is harmless */
            goto rebuild;
        }
        sd->owner = owner;
        sd->slots = slots;
    }
rebuild:
    if (live == sd->slots)
        return LMC_ERR_NOMEM; /* no room even after packing */
    memset(sd->tree, 0, (sd->slots + 1) * sizeof(*sd->tree));
    for (size_t pos = 0; pos < live; pos++) {
        sd->tree[pos + 1].bytes = sd->size[sd->owner[pos]];
        sd->tree[pos + 1].keys = 1;
    }
    /* Linear-time construction: each node passes its total to its parent. */
    for (size_t i = 1; i <= sd->slots; i++) {
        size_t parent = i + lowbit(i);
        if (parent <= sd->slots) {
            sd->tree[parent].bytes += sd->tree[i].bytes;
            sd->tree[parent].keys += sd->tree[i].keys;
        }
    }
    sd->now = live;
    return LMC_OK;
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
    uint32_t p = sd->last[id];
    if (p == NEVER) {
        sd->size[id] = size;
        sd->n_ids++;
        sd->total_bytes += size;
        *out = (lmc_stackdist_access_result){.cold = true, .size = size};
    } else {
        uint64_t own = sd->size[id];
        node before = prefix(sd, p);
        *out = (lmc_stackdist_access_result){.cold = false,
                                             .bytes = sd->live.bytes - before.bytes,
                                             .keys = sd->live.keys - before.keys,
                                             .size = own};
        add(sd, p, (uint64_t)0 - own, (uint64_t)0 - 1);
        sd->live.bytes -= own;
        sd->live.keys -= 1;
    }
    size_t pos = sd->now++;
    add(sd, pos, out->size, 1);
    sd->live.bytes += out->size;
    sd->live.keys += 1;
    sd->owner[pos] = id;
    sd->last[id] = (uint32_t)pos;
    return LMC_OK;
}
