/*
 * counts.c -- per-key counts kept in an lmc_keymap's value pointers, as fs
 * and resp keep their lookup locks (key -> lock count) and the sizes they
 * track (key -> bytes). See adapter_impl.h.
 *
 * Owns nothing: the maps are the adapter's, and so is the lock that guards
 * them (every function here runs under it).
 */
#include <stdint.h>

#include "l2/adapter_impl.h"

/* Counts and sizes live in the keymap's value pointers. */
_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "keymap values hold 64-bit counts");

uint64_t lmc_l2_count_get(const lmc_keymap *m, const lmc_object_key *key, bool *present)
{
    void **slot = lmc_keymap_get(m, key);
    *present = slot != NULL;
    return slot != NULL ? (uint64_t)(uintptr_t)*slot : 0;
}

lmc_status lmc_l2_count_put(lmc_keymap *m, const lmc_object_key *key, uint64_t v)
{
    return lmc_keymap_put(m, key, (void *)(uintptr_t)v, NULL);
}

void lmc_l2_lock_hits(lmc_keymap *locks, lmc_l2_task *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!lmc_bitmap_test(&t->bitmap, i))
            continue;
        bool present;
        uint64_t count = lmc_l2_count_get(locks, &t->keys[i], &present);
        if (lmc_l2_count_put(locks, &t->keys[i], count + 1) != LMC_OK)
            lmc_bitmap_clear(&t->bitmap, i); /* unlocked, so not reported as a hit */
    }
}

void lmc_l2_unlock_keys(lmc_keymap *locks, const lmc_object_key *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool present;
        uint64_t count = lmc_l2_count_get(locks, &keys[i], &present);
        if (!present)
            continue;
        if (count <= 1)
            lmc_keymap_remove(locks, &keys[i], NULL);
        else
            lmc_l2_count_put(locks, &keys[i], count - 1); /* replacing never allocates */
    }
}
