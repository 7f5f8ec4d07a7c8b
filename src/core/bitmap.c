/*
 * bitmap.c -- fixed-size bitmap over uint64 words (see lmcache/bitmap.h).
 *
 * Owns: the words array of each lmc_bitmap (calloc'ed, freed by
 * lmc_bitmap_free). Bit i lives in word i / 64 at position i % 64.
 *
 * Invariant: bits at or past the size are always 0. Every writer keeps it
 * (setters ignore out-of-range indices, set_range clips, not masks the tail
 * word), so readers can scan whole words without masking: popcount, the
 * leading-run counts and equality all rely on it.
 *
 * Threads: none; no locks. These functions sit on the prefetch hot path, so
 * they work a word at a time with the compiler's bit builtins.
 */
#include "lmcache/bitmap.h"

#include <stdlib.h>
#include <string.h>

#define WORD_BITS 64u

static inline size_t nwords_for(size_t size)
{
    return size / WORD_BITS + (size % WORD_BITS != 0);
}

/* Mask of the valid bits in the last word (all ones when size % 64 == 0). */
static inline uint64_t tail_mask(size_t size)
{
    size_t r = size % WORD_BITS;
    return r == 0 ? ~(uint64_t)0 : (((uint64_t)1 << r) - 1);
}

/* Allocate zeroed storage for size bits; on failure bm is left zeroed. */
static lmc_status alloc_words(lmc_bitmap *bm, size_t size)
{
    bm->size = 0;
    bm->words = NULL;
    if (size == 0)
        return LMC_OK;
    uint64_t *w = calloc(nwords_for(size), sizeof(uint64_t));
    if (w == NULL)
        return LMC_ERR_NOMEM;
    bm->size = size;
    bm->words = w;
    return LMC_OK;
}

lmc_status lmc_bitmap_init(lmc_bitmap *bm, size_t size, size_t first_n)
{
    lmc_status st = alloc_words(bm, size);
    if (st != LMC_OK)
        return st;
    lmc_bitmap_set_range(bm, 0, first_n);
    return LMC_OK;
}

void lmc_bitmap_free(lmc_bitmap *bm)
{
    if (bm == NULL)
        return;
    free(bm->words);
    bm->words = NULL;
    bm->size = 0;
}

lmc_status lmc_bitmap_copy(lmc_bitmap *dst, const lmc_bitmap *src)
{
    lmc_status st = alloc_words(dst, src->size);
    if (st != LMC_OK)
        return st;
    if (src->size != 0)
        memcpy(dst->words, src->words, nwords_for(src->size) * sizeof(uint64_t));
    return LMC_OK;
}

void lmc_bitmap_set(lmc_bitmap *bm, size_t i)
{
    if (i < bm->size)
        bm->words[i / WORD_BITS] |= (uint64_t)1 << (i % WORD_BITS);
}

void lmc_bitmap_clear(lmc_bitmap *bm, size_t i)
{
    if (i < bm->size)
        bm->words[i / WORD_BITS] &= ~((uint64_t)1 << (i % WORD_BITS));
}

bool lmc_bitmap_test(const lmc_bitmap *bm, size_t i)
{
    if (i >= bm->size)
        return false;
    return (bm->words[i / WORD_BITS] >> (i % WORD_BITS)) & 1u;
}

void lmc_bitmap_set_range(lmc_bitmap *bm, size_t start, size_t end)
{
    if (end > bm->size)
        end = bm->size;
    if (start >= end)
        return;
    size_t first = start / WORD_BITS;
    size_t last = (end - 1) / WORD_BITS;
    /* lo: bits >= start within the first word; hi: bits < end within the last. */
    uint64_t lo = ~(uint64_t)0 << (start % WORD_BITS);
    uint64_t hi = tail_mask(end);
    if (first == last) {
        bm->words[first] |= lo & hi;
        return;
    }
    bm->words[first] |= lo;
    for (size_t w = first + 1; w < last; w++)
        bm->words[w] = ~(uint64_t)0;
    bm->words[last] |= hi;
}

void lmc_bitmap_batched_set(lmc_bitmap *bm, const size_t *indices, size_t n)
{
    for (size_t k = 0; k < n; k++)
        lmc_bitmap_set(bm, indices[k]);
}

size_t lmc_bitmap_popcount(const lmc_bitmap *bm)
{
    size_t n = nwords_for(bm->size);
    size_t total = 0;
    for (size_t w = 0; w < n; w++)
        total += (size_t)__builtin_popcountll(bm->words[w]);
    return total;
}

size_t lmc_bitmap_count_leading_ones(const lmc_bitmap *bm)
{
    /* The tail bits are 0, so the run stops at the size by itself. */
    size_t n = nwords_for(bm->size);
    for (size_t w = 0; w < n; w++) {
        uint64_t inv = ~bm->words[w];
        if (inv != 0)
            return w * WORD_BITS + (size_t)__builtin_ctzll(inv);
    }
    return bm->size;
}

size_t lmc_bitmap_count_leading_zeros(const lmc_bitmap *bm)
{
    size_t n = nwords_for(bm->size);
    for (size_t w = 0; w < n; w++) {
        if (bm->words[w] != 0)
            return w * WORD_BITS + (size_t)__builtin_ctzll(bm->words[w]);
    }
    /* All clear: the run is the whole bitmap, not the whole last word. */
    return bm->size;
}

int64_t lmc_bitmap_highest_set_bit(const lmc_bitmap *bm)
{
    for (size_t w = nwords_for(bm->size); w-- > 0;) {
        if (bm->words[w] != 0)
            return (int64_t)(w * WORD_BITS + (WORD_BITS - 1) -
                             (size_t)__builtin_clzll(bm->words[w]));
    }
    return -1;
}

size_t lmc_bitmap_indices(const lmc_bitmap *bm, size_t *out, size_t cap)
{
    size_t n = nwords_for(bm->size);
    size_t count = 0;
    for (size_t w = 0; w < n; w++) {
        uint64_t bits = bm->words[w];
        while (bits != 0) {
            if (count < cap)
                out[count] = w * WORD_BITS + (size_t)__builtin_ctzll(bits);
            count++;
            bits &= bits - 1; /* drop the lowest set bit */
        }
    }
    return count;
}

size_t lmc_bitmap_gather(const lmc_bitmap *bm, const void *src, size_t n, size_t elem_size,
                         void *dst)
{
    const unsigned char *s = src;
    unsigned char *d = dst;
    size_t limit = n < bm->size ? n : bm->size;
    size_t nw = nwords_for(limit);
    size_t copied = 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t bits = bm->words[w];
        if (w == nw - 1)
            bits &= tail_mask(limit);
        while (bits != 0) {
            size_t i = w * WORD_BITS + (size_t)__builtin_ctzll(bits);
            memcpy(d + copied * elem_size, s + i * elem_size, elem_size);
            copied++;
            bits &= bits - 1;
        }
    }
    return copied;
}

lmc_status lmc_bitmap_and(lmc_bitmap *dst, const lmc_bitmap *a, const lmc_bitmap *b)
{
    size_t size = a->size < b->size ? a->size : b->size;
    lmc_status st = alloc_words(dst, size);
    if (st != LMC_OK)
        return st;
    size_t n = nwords_for(size);
    for (size_t w = 0; w < n; w++)
        dst->words[w] = a->words[w] & b->words[w];
    /* The longer input may have bits past the shorter size in the last word. */
    if (n != 0)
        dst->words[n - 1] &= tail_mask(size);
    return LMC_OK;
}

lmc_status lmc_bitmap_or(lmc_bitmap *dst, const lmc_bitmap *a, const lmc_bitmap *b)
{
    const lmc_bitmap *lng = a->size >= b->size ? a : b;
    const lmc_bitmap *shrt = a->size >= b->size ? b : a;
    lmc_status st = alloc_words(dst, lng->size);
    if (st != LMC_OK)
        return st;
    size_t n_long = nwords_for(lng->size);
    size_t n_short = nwords_for(shrt->size);
    for (size_t w = 0; w < n_short; w++)
        dst->words[w] = lng->words[w] | shrt->words[w];
    for (size_t w = n_short; w < n_long; w++)
        dst->words[w] = lng->words[w];
    return LMC_OK;
}

lmc_status lmc_bitmap_not(lmc_bitmap *dst, const lmc_bitmap *a)
{
    lmc_status st = alloc_words(dst, a->size);
    if (st != LMC_OK)
        return st;
    size_t n = nwords_for(a->size);
    for (size_t w = 0; w < n; w++)
        dst->words[w] = ~a->words[w];
    if (n != 0)
        dst->words[n - 1] &= tail_mask(a->size);
    return LMC_OK;
}

void lmc_bitmap_or_into(lmc_bitmap *a, const lmc_bitmap *b)
{
    size_t na = nwords_for(a->size);
    size_t nb = nwords_for(b->size);
    size_t n = na < nb ? na : nb;
    for (size_t w = 0; w < n; w++)
        a->words[w] |= b->words[w];
    /* A longer b may have set bits past a's size in a's last word. */
    if (n != 0 && n == na)
        a->words[n - 1] &= tail_mask(a->size);
}

void lmc_bitmap_to_string(const lmc_bitmap *bm, char *buf, size_t len)
{
    if (len == 0)
        return;
    size_t n = bm->size < len - 1 ? bm->size : len - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = (bm->words[i / WORD_BITS] >> (i % WORD_BITS)) & 1u ? '1' : '0';
    buf[n] = '\0';
}

bool lmc_bitmap_equal(const lmc_bitmap *a, const lmc_bitmap *b)
{
    if (a->size != b->size)
        return false;
    if (a->size == 0)
        return true;
    return memcmp(a->words, b->words, nwords_for(a->size) * sizeof(uint64_t)) == 0;
}
