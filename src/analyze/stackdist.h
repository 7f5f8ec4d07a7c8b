/*
 * stackdist.h -- byte-weighted LRU stack distances in one pass.
 *
 * Owns: the state of one access stream over objects named by dense integer
 * ids: each id's size (fixed at its first access) and the position of its
 * last access on a timeline, and over that timeline which positions are
 * some id's last access (and with what size), in structures that sum them
 * over any prefix in O(log T).
 *
 * The stack distance of an access to id is what lies above id in an LRU
 * stack of every object ever accessed: the distinct objects accessed since
 * id's previous access, as a count (keys) and as the sum of their sizes
 * (bytes). Those objects are exactly the ones whose last access is after
 * id's, so both are one prefix-sum query of the tree. A byte-capacity LRU
 * cache of C bytes -- a miss inserts the object at the MRU end, then
 * objects are evicted from the LRU end until the total is at most C (the
 * new object itself when it alone exceeds C) -- hits exactly the accesses
 * with distance bytes + own size <= C, for every C at once: its content is
 * always a prefix of that stack. test_analyze_stackdist checks this against
 * a brute-force simulation of that cache.
 *
 * Cost: O(log T) per access, T the timeline length. The timeline is
 * compacted (positions of superseded accesses dropped, order kept) when it
 * fills, and sized to twice the live ids, so T stays below about 2 x the
 * distinct ids and compaction is O(1) amortised per access. Memory: 16
 * bytes per id plus 4.2 bytes per timeline slot while every id has one
 * size, 12.2 once sizes differ.
 *
 * Threads: none; one stream belongs to one thread.
 */
#ifndef LMC_ANALYZE_STACKDIST_H
#define LMC_ANALYZE_STACKDIST_H

#include <stdbool.h>
#include <stdint.h>

#include "lmcache/status.h"

typedef struct lmc_stackdist lmc_stackdist;

/* What one access found. */
typedef struct lmc_stackdist_access_result {
    bool cold;      /* the id's first access: no distance */
    uint64_t bytes; /* distinct bytes accessed since the previous access (0 when cold) */
    uint64_t keys;  /* distinct ids accessed since the previous access (0 when cold) */
    uint64_t size;  /* the id's size: the size given at its first access */
} lmc_stackdist_access_result;

/* An empty stream; NULL when memory runs out. */
lmc_stackdist *lmc_stackdist_create(void);
void lmc_stackdist_destroy(lmc_stackdist *sd); /* NULL is fine */

/*
 * One access to id (any value below UINT32_MAX; ids need not be dense, but
 * memory grows with the largest). size is used at the id's first access
 * only. LMC_ERR_NOMEM leaves the stream as it was.
 */
lmc_status lmc_stackdist_access(lmc_stackdist *sd, uint32_t id, uint64_t size,
                                lmc_stackdist_access_result *out);

/*
 * Hints for a caller that knows its next accesses (no effect on results):
 * start loading id's state, and (once that has arrived) the tree nodes its
 * next access reads first. An access is a chain of dependent cache misses
 * -- the id's state, then the tree around its last position -- so issuing
 * both for a batch of ids before accessing them in order overlaps the
 * misses of the batch.
 */
void lmc_stackdist_prefetch_id(const lmc_stackdist *sd, uint32_t id);
void lmc_stackdist_prefetch_last(const lmc_stackdist *sd, uint32_t id);

/* Distinct ids seen, and the sum of their sizes. */
uint64_t lmc_stackdist_ids(const lmc_stackdist *sd);
uint64_t lmc_stackdist_bytes(const lmc_stackdist *sd);

#endif
