/*
 * bitmap.h -- a fixed-size bitmap (LMCache's native Bitmap).
 *
 * Owns: the bit array of one lmc_bitmap. Bit 0 is the first position (the
 * leftmost character of the string form). Indices at or beyond the size are
 * ignored by setters and read as 0 by getters; bits beyond the size are
 * always kept at 0.
 *
 * Threads: none; a bitmap is a plain value owned by one thread at a time.
 */
#ifndef LMCACHE_BITMAP_H
#define LMCACHE_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lmcache/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lmc_bitmap {
    size_t size;     /* number of bits */
    uint64_t *words; /* owned; ceil(size/64) words; NULL when size == 0 */
} lmc_bitmap;

/*
 * Functions that produce a bitmap (init, copy, and, or, not) treat the
 * output as uninitialised: it is overwritten, never freed first, so pass a
 * fresh or already-freed bitmap. They return LMC_ERR_NOMEM when the words
 * cannot be allocated, leaving the output zeroed (safe to free). The caller
 * frees every successful output with lmc_bitmap_free.
 */

/* A bitmap of size bits with the first first_n set (first_n is clamped). */
lmc_status lmc_bitmap_init(lmc_bitmap *bm, size_t size, size_t first_n);

/* Free the words and zero the struct. Safe on a zeroed bitmap. */
void lmc_bitmap_free(lmc_bitmap *bm);

lmc_status lmc_bitmap_copy(lmc_bitmap *dst, const lmc_bitmap *src);

void lmc_bitmap_set(lmc_bitmap *bm, size_t i);
void lmc_bitmap_clear(lmc_bitmap *bm, size_t i);
bool lmc_bitmap_test(const lmc_bitmap *bm, size_t i);

/* Set [start, end), clipped to the size. */
void lmc_bitmap_set_range(lmc_bitmap *bm, size_t start, size_t end);

/* Set every listed index; indices >= size are dropped. */
void lmc_bitmap_batched_set(lmc_bitmap *bm, const size_t *indices, size_t n);

size_t lmc_bitmap_popcount(const lmc_bitmap *bm);

/* Run of set (or clear) bits starting at bit 0. */
size_t lmc_bitmap_count_leading_ones(const lmc_bitmap *bm);
size_t lmc_bitmap_count_leading_zeros(const lmc_bitmap *bm);

/* Index of the highest set bit, or -1 when no bit is set. */
int64_t lmc_bitmap_highest_set_bit(const lmc_bitmap *bm);

/*
 * Write the indices of the set bits, ascending, into out (room for cap
 * entries). Returns the number of set bits (which may exceed cap).
 */
size_t lmc_bitmap_indices(const lmc_bitmap *bm, size_t *out, size_t cap);

/*
 * gather: for each set bit i < n, copy element i of src (elem_size bytes)
 * to the next slot of dst. Returns the number of elements copied. dst must
 * hold min(popcount, n) elements.
 */
size_t lmc_bitmap_gather(const lmc_bitmap *bm, const void *src, size_t n, size_t elem_size,
                         void *dst);

/* dst = a & b, over the shorter length. dst must not alias a or b. */
lmc_status lmc_bitmap_and(lmc_bitmap *dst, const lmc_bitmap *a, const lmc_bitmap *b);
/* dst = a | b, over the longer length. dst must not alias a or b. */
lmc_status lmc_bitmap_or(lmc_bitmap *dst, const lmc_bitmap *a, const lmc_bitmap *b);
/* dst = ~a, same length (bits past the size stay 0). dst must not alias a. */
lmc_status lmc_bitmap_not(lmc_bitmap *dst, const lmc_bitmap *a);

/* In place: a |= b over a's length. */
void lmc_bitmap_or_into(lmc_bitmap *a, const lmc_bitmap *b);

/* "0101..." of length size, NUL-terminated, into buf of len bytes (truncated). */
void lmc_bitmap_to_string(const lmc_bitmap *bm, char *buf, size_t len);

bool lmc_bitmap_equal(const lmc_bitmap *a, const lmc_bitmap *b);

#ifdef __cplusplus
}
#endif
#endif
