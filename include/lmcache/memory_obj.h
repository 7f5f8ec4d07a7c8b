/*
 * memory_obj.h -- a handle on one L1 object's bytes.
 *
 * A memory object is a view into the L1 pool: it does not own memory. It
 * stays valid while the caller holds the lock that produced it (the write
 * reservation from reserve_write, or a read lock from a prefetch) and must
 * not be used after that lock is released.
 */
#ifndef LMCACHE_MEMORY_OBJ_H
#define LMCACHE_MEMORY_OBJ_H

#include <stdint.h>

typedef struct lmc_memory_obj {
    uint8_t *data;      /* first byte of the object in the pool */
    uint64_t size;      /* logical bytes (the layout's size) */
    uint64_t phys_size; /* the aligned slot */
    uint64_t offset;    /* byte offset in the pool */
} lmc_memory_obj;

#endif
