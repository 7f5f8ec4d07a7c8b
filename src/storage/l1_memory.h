/*
 * l1_memory.h -- the L1 pool and its allocator.
 *
 * Owns: one host-memory pool of size_bytes (anonymous mmap with
 * MAP_NORESERVE, so pages are faulted in lazily and a large L1 costs nothing
 * until used, unless lmc_l1_memory_populate faults them in ahead; or a POSIX
 * shared-memory segment when shm_name is set) and an
 * aligned first-fit free list over it, with split on allocation and merge
 * with both neighbours on free (spec/storage-manager.md section 6).
 *
 * Objects are identified by their byte offset in the pool. Every allocation
 * is rounded up to align_bytes (a power of two).
 *
 * Threads: every function is thread-safe; one internal mutex guards the free
 * list. The L1 manager calls it under its own mutex, so the lock order is
 * L1 manager -> L1 memory.
 */
#ifndef LMC_STORAGE_L1_MEMORY_H
#define LMC_STORAGE_L1_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

typedef struct lmc_l1_memory lmc_l1_memory;

typedef struct lmc_l1_memory_config {
    uint64_t size_bytes;  /* > 0; rounded up to align_bytes */
    uint64_t align_bytes; /* power of two, >= 64; 0 means the default, 4096 */
    /*
     * POSIX shared-memory backing: NULL or "" for anonymous memory. The
     * segment is named "/lmcache_l1_pool_<name>" (the prefix added if
     * missing); a stale segment of that name is unlinked first, and the
     * segment is unlinked again at destroy.
     */
    const char *shm_name;
} lmc_l1_memory_config;

lmc_status lmc_l1_memory_create(const lmc_l1_memory_config *cfg, lmc_l1_memory **out,
                                lmc_error *err);
void lmc_l1_memory_destroy(lmc_l1_memory *m);

/* Base address of the pool; offsets returned by the allocator are relative to it. */
uint8_t *lmc_l1_memory_base(const lmc_l1_memory *m);

/* The pool size (after rounding) and the alignment. */
uint64_t lmc_l1_memory_capacity(const lmc_l1_memory *m);
uint64_t lmc_l1_memory_align(const lmc_l1_memory *m);

/*
 * Fault in the pool's pages in [offset, offset + len) (clamped to the pool)
 * for writing, without changing a byte (madvise MADV_POPULATE_WRITE): what
 * the first store into each page would pay, paid now. Safe while the pool
 * is in use. LMC_ERR_UNSUPPORTED where the kernel lacks it (before 5.14),
 * LMC_ERR_NOMEM when memory runs out, LMC_ERR_INVALID for an offset past
 * the end.
 */
lmc_status lmc_l1_memory_populate(lmc_l1_memory *m, uint64_t offset, uint64_t len,
                                  lmc_error *err);

/*
 * size rounded up to the alignment (the slot an object of size bytes takes).
 * A 0-byte object still takes one alignment unit; a size too large to round
 * gives UINT64_MAX (no pool can hold it).
 */
uint64_t lmc_l1_memory_slot_size(const lmc_l1_memory *m, uint64_t size);

/* First fit. false when no free block is large enough. */
bool lmc_l1_memory_alloc(lmc_l1_memory *m, uint64_t size, uint64_t *offset);

/*
 * All-or-nothing: n slots of `size` bytes each (rounded to the alignment).
 * Walks the free list greedily, carving floor(block/slot) slots from each
 * block, until n are found; if fewer fit, nothing is allocated and false is
 * returned.
 */
bool lmc_l1_memory_batched_alloc(lmc_l1_memory *m, uint64_t size, size_t n, uint64_t *offsets);

/*
 * Largest k <= n such that lmc_l1_memory_batched_alloc(m, size, k) succeeds,
 * computed without allocating (used by the L1 manager's largest-prefix
 * fallback).
 */
size_t lmc_l1_memory_max_batch(lmc_l1_memory *m, uint64_t size, size_t n);

/*
 * Return a slot (size as passed to alloc; rounded the same way). A slot that
 * is misaligned, outside the pool or overlaps free space (a double free) is
 * logged as a warning and ignored; the free list stays intact.
 */
void lmc_l1_memory_free(lmc_l1_memory *m, uint64_t offset, uint64_t size);

/*
 * Free n slots of the same size, in any order; adjacent slots are merged
 * before freeing. Bogus slots are skipped as in lmc_l1_memory_free, and do
 * not keep the valid ones of the batch from being freed.
 */
void lmc_l1_memory_batched_free(lmc_l1_memory *m, const uint64_t *offsets, size_t n, uint64_t size);

/* Bytes allocated and pool size. */
void lmc_l1_memory_usage(const lmc_l1_memory *m, uint64_t *used, uint64_t *total);

/* Number of free blocks (for tests and status). */
size_t lmc_l1_memory_free_blocks(const lmc_l1_memory *m);

/* Size of the largest free block (the largest single allocation that fits). */
uint64_t lmc_l1_memory_largest_free(const lmc_l1_memory *m);

/* "/lmcache_l1_pool_<name>" for a shared-memory pool, NULL for anonymous. */
const char *lmc_l1_memory_shm_path(const lmc_l1_memory *m);

/*
 * Consistency check: free blocks sorted, aligned, inside the pool, no two
 * adjacent (they would have been merged), and free + used == capacity.
 * On failure writes the reason into why (if not NULL) and returns false.
 */
bool lmc_l1_memory_check(const lmc_l1_memory *m, char *why, size_t why_len);

#endif
