/*
 * strmap.h -- a hash map from byte strings to a 64-bit value.
 *
 * Owns: copies of its keys (any bytes, NUL included, with their length),
 * in insertion order, and an open-addressing index over them (linear
 * probing, grows at 70% load). Insertion-only: what `trace info` counts per
 * qualname and what the replay warns about once per qualname, so that both
 * stay linear in the number of distinct names.
 *
 * Threads: none; the owner guards it.
 */
#ifndef LMC_CORE_STRMAP_H
#define LMC_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lmc_strmap lmc_strmap;

lmc_strmap *lmc_strmap_create(void); /* NULL when memory runs out */
void lmc_strmap_destroy(lmc_strmap *m);

/*
 * The value of key[0..len), inserted as 0 when absent (*created says which;
 * created may be NULL). NULL when memory runs out (the map is unchanged).
 * Valid until the next insertion.
 */
uint64_t *lmc_strmap_slot(lmc_strmap *m, const char *key, size_t len, bool *created);

size_t lmc_strmap_size(const lmc_strmap *m);

/* The i-th key inserted (NUL-terminated copy; *len its length) and its value. */
const char *lmc_strmap_key_at(const lmc_strmap *m, size_t i, size_t *len);
uint64_t lmc_strmap_value_at(const lmc_strmap *m, size_t i);

/*
 * The hash the map uses (XXH3-64 of the bytes), for tables that key by a
 * string themselves (the per-cache_salt tables of the eviction controller,
 * IsolatedLRU and the L2 usage accounting): one string hash for all.
 */
uint64_t lmc_str_hash(const char *s, size_t len);

#endif
