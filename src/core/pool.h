/*
 * pool.h -- a pool of fixed-size objects.
 *
 * Owns: chunks of objects and a free list threaded through freed objects.
 * Hot tables (the L1 object table, eviction lists) allocate and free one
 * small record per key; the pool makes that a pointer pop and push, and
 * keeps the memory mapped, so a burst of frees (clear, eviction) is not
 * followed by the allocator trimming the heap and the next burst of
 * allocations faulting it back in. Memory returns to the system only at
 * destroy.
 *
 * Threads: none; the owner guards it with its own lock.
 */
#ifndef LMC_CORE_POOL_H
#define LMC_CORE_POOL_H

#include <stddef.h>

typedef struct lmc_pool {
    size_t obj_size;
    size_t per_chunk;
    void *free_list; /* freed objects, linked through their first word */
    void *chunks;    /* allocated chunks, linked through their first word */
    char *bump;      /* next never-used object in the newest chunk */
    char *bump_end;
    size_t live;
} lmc_pool;

/* Objects of obj_size bytes (rounded up to pointer alignment), per_chunk per chunk. */
void lmc_pool_init(lmc_pool *p, size_t obj_size, size_t per_chunk);
/* Free every chunk (objects still in use are freed too). */
void lmc_pool_destroy(lmc_pool *p);
/* An uninitialised object, or NULL when memory runs out. */
void *lmc_pool_alloc(lmc_pool *p);
void lmc_pool_free(lmc_pool *p, void *obj);

#endif
