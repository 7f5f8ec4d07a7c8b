/*
 * keyvec.h -- a growable array of ObjectKeys.
 *
 * Owns: its array. Used wherever a module returns a list of keys whose
 * length it cannot know in advance (eviction actions, drained queues).
 *
 * Threads: none.
 */
#ifndef LMC_CORE_KEYVEC_H
#define LMC_CORE_KEYVEC_H

#include <stddef.h>

#include "lmcache/status.h"
#include "lmcache/types.h"

typedef struct lmc_keyvec {
    lmc_object_key *keys;
    size_t len;
    size_t cap;
} lmc_keyvec;

#define LMC_KEYVEC_INIT {NULL, 0, 0}

lmc_status lmc_keyvec_push(lmc_keyvec *v, const lmc_object_key *key);
lmc_status lmc_keyvec_append(lmc_keyvec *v, const lmc_object_key *keys, size_t n);
lmc_status lmc_keyvec_reserve(lmc_keyvec *v, size_t cap);
void lmc_keyvec_reset(lmc_keyvec *v); /* len = 0, keeps the array */
void lmc_keyvec_free(lmc_keyvec *v);  /* frees and zeroes */

#endif
