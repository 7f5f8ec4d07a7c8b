/*
 * keymap.h -- a hash map from ObjectKey to a pointer.
 *
 * Owns: a dense array of entries (copies of the keys -- ObjectKeys are
 * plain values, so a copy is a memcpy -- with their values and hashes) and
 * a compact open-addressing index over it (linear probing, backward-shift
 * deletion, grows at 70% load). Values are the caller's; the map never
 * frees them.
 *
 * Pointers returned by lmc_keymap_get and lmc_keymap_key_at stay valid until
 * the next insertion or removal.
 *
 * Threads: none; the owner guards it.
 */
#ifndef LMC_CORE_KEYMAP_H
#define LMC_CORE_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>

#include "lmcache/status.h"
#include "lmcache/types.h"

typedef struct lmc_keymap lmc_keymap;

/* A map with room for about `hint` keys before it first grows (0 is fine). */
lmc_keymap *lmc_keymap_create(size_t hint);
void lmc_keymap_destroy(lmc_keymap *m);

size_t lmc_keymap_size(const lmc_keymap *m);

/* The value slot for key, or NULL when absent. */
void **lmc_keymap_get(const lmc_keymap *m, const lmc_object_key *key);

/*
 * Insert or replace. *old (if not NULL) receives the previous value, or
 * NULL when the key was new. LMC_ERR_NOMEM when growing fails (the map is
 * unchanged).
 */
lmc_status lmc_keymap_put(lmc_keymap *m, const lmc_object_key *key, void *value, void **old);

/*
 * Insert key -> value only if key is absent, with one probe. Returns LMC_OK
 * and sets *existing to NULL when inserted; when the key is present, leaves
 * the map unchanged and sets *existing to its value slot (still LMC_OK).
 * LMC_ERR_NOMEM when growing fails.
 */
lmc_status lmc_keymap_insert(lmc_keymap *m, const lmc_object_key *key, void *value,
                             void ***existing);

/* Remove key; true if it was present (its value into *old if not NULL). */
bool lmc_keymap_remove(lmc_keymap *m, const lmc_object_key *key, void **old);

/* Remove every entry (keeps the capacity). */
void lmc_keymap_clear(lmc_keymap *m);

/*
 * Iteration: for (size_t i = 0; i < lmc_keymap_size(m); i++)
 *   ... lmc_keymap_key_at(m, i) ... lmc_keymap_value_at(m, i) ...
 * (key_at returns NULL past the size, so a loop up to the capacity that
 * skips NULLs also works). The map must not change during the loop.
 */
size_t lmc_keymap_capacity(const lmc_keymap *m);
const lmc_object_key *lmc_keymap_key_at(const lmc_keymap *m, size_t slot);
void *lmc_keymap_value_at(const lmc_keymap *m, size_t slot);

#endif
