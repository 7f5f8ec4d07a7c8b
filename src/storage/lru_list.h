/*
 * lru_list.h -- an ordered set of ObjectKeys, oldest first (private).
 *
 * Owns: its nodes (one heap node per key, holding a copy of the key) and a
 * keymap from key to node, so membership, move-to-newest and removal are
 * O(1). The building block of every ordered structure in the eviction
 * policies: the LRU list, each IsolatedLRU bucket, ARC's T1/T2/B1/B2 and
 * S3FIFO's small, main and ghost queues.
 *
 * Threads: none; the owning policy's mutex guards it.
 */
#ifndef LMC_STORAGE_LRU_LIST_H
#define LMC_STORAGE_LRU_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "core/keymap.h"
#include "core/pool.h"
#include "core/keyvec.h"
#include "lmcache/status.h"
#include "lmcache/types.h"
#include "storage/eviction.h"

typedef struct lmc_lru_node {
    struct lmc_lru_node *prev; /* older */
    struct lmc_lru_node *next; /* newer */
    lmc_object_key key;
} lmc_lru_node;

typedef struct lmc_lru_list {
    lmc_lru_node *head; /* oldest, NULL when empty */
    lmc_lru_node *tail; /* newest */
    lmc_keymap *index;  /* key -> lmc_lru_node* */
    lmc_pool *pool;     /* where nodes come from; NULL: malloc */
} lmc_lru_list;

/*
 * An empty list whose nodes come from pool (owned by the caller, guarded by
 * the same lock as the list, destroyed after the list; NULL: malloc). Lists
 * that move nodes between them (lmc_lru_list_transfer) must share one pool.
 * LMC_ERR_NOMEM when the index cannot be allocated.
 */
lmc_status lmc_lru_list_init_pooled(lmc_lru_list *l, lmc_pool *pool);
/* Free every node and the index; the list must be re-initialised to reuse. */
void lmc_lru_list_fini(lmc_lru_list *l);

size_t lmc_lru_list_size(const lmc_lru_list *l);
bool lmc_lru_list_contains(const lmc_lru_list *l, const lmc_object_key *key);

/*
 * Make key the newest: append it, or move it to the end if present.
 * LMC_ERR_NOMEM leaves the list unchanged.
 */
lmc_status lmc_lru_list_push_back(lmc_lru_list *l, const lmc_object_key *key);

/* Move key to the newest end if present; false when absent. */
bool lmc_lru_list_touch(lmc_lru_list *l, const lmc_object_key *key);

/* Forget key; false when absent. */
bool lmc_lru_list_remove(lmc_lru_list *l, const lmc_object_key *key);

/* Forget the oldest key (copied to *out if not NULL); false when empty. */
bool lmc_lru_list_pop_front(lmc_lru_list *l, lmc_object_key *out);

/*
 * Move key from `from` to the newest end of `to`, reusing its node.
 * LMC_ERR_NOT_FOUND when key is not in `from`; LMC_ERR_NOMEM leaves both
 * lists unchanged.
 */
lmc_status lmc_lru_list_transfer(lmc_lru_list *from, lmc_lru_list *to, const lmc_object_key *key);

/*
 * Walk from the oldest and append to out up to `want` keys that the filter
 * (if any) accepts; *taken (if not NULL) receives how many were appended.
 * The list is not changed. LMC_ERR_NOMEM when out cannot grow (keys
 * appended so far stay in out and are counted in *taken).
 */
lmc_status lmc_lru_list_collect(const lmc_lru_list *l, size_t want, lmc_evict_filter filter,
                                void *ud, lmc_keyvec *out, size_t *taken);

#endif
