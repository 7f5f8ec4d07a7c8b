/*
 * lru.c -- the LRU eviction policy (spec/storage-manager.md section 7.2).
 *
 * Owns: one lmc_lru_list of every tracked key, oldest first.
 *
 * Threads: any thread may call any op; one mutex guards the list. The
 * filter runs with that mutex held (see eviction.h for the lock order).
 *
 * Keys of one call are applied in REVERSE request order: for a request
 * [c0, c1, ..., cn] the last chunk cn is made newest first and c0 last, so
 * c0 ends up the newest and cn the oldest. Eviction then takes the chunks
 * nearer the end of a request first, which keeps the request's prefix
 * usable -- a prefix lookup stops at the first missing chunk, so losing c0
 * would make every later chunk useless.
 *
 * When memory runs out a tracking update is dropped with a warning: the
 * key is simply not (re)ordered, which costs eviction quality, not safety.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "storage/eviction.h"
#include "storage/lru_list.h"

typedef struct lru {
    pthread_mutex_t mu;
    lmc_lru_list list; /* guarded by mu */
    lmc_pool nodes;    /* the list's nodes; guarded by mu */
} lru;

static void *lru_create(void)
{
    lru *s = malloc(sizeof(*s));
    if (s == NULL)
        return NULL;
    lmc_pool_init(&s->nodes, sizeof(lmc_lru_node), 1024);
    if (lmc_lru_list_init_pooled(&s->list, &s->nodes) != LMC_OK) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void lru_destroy(void *self)
{
    lru *s = self;
    if (s == NULL)
        return;
    lmc_lru_list_fini(&s->list);
    lmc_pool_destroy(&s->nodes);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void lru_on_created(void *self, const lmc_object_key *keys, size_t n)
{
    lru *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        if (lmc_lru_list_push_back(&s->list, &keys[i]) != LMC_OK)
            dropped++;
    }
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "LRU: out of memory, %zu of %zu created keys not tracked", dropped, n);
}

static void lru_on_touched(void *self, const lmc_object_key *keys, size_t n)
{
    lru *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;)
        lmc_lru_list_touch(&s->list, &keys[i]);
    pthread_mutex_unlock(&s->mu);
}

static void lru_on_removed(void *self, const lmc_object_key *keys, size_t n)
{
    lru *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++)
        lmc_lru_list_remove(&s->list, &keys[i]);
    pthread_mutex_unlock(&s->mu);
}

static lmc_status lru_get_actions(void *self, double ratio, lmc_evict_filter filter, void *ud,
                                  const char *cache_salt, lmc_keyvec *out)
{
    (void)cache_salt; /* a global policy */
    lru *s = self;
    pthread_mutex_lock(&s->mu);
    size_t target = lmc_eviction_target(lmc_lru_list_size(&s->list), ratio);
    lmc_status st = lmc_lru_list_collect(&s->list, target, filter, ud, out, NULL);
    pthread_mutex_unlock(&s->mu);
    return st;
}

static size_t lru_tracked(void *self)
{
    lru *s = self;
    pthread_mutex_lock(&s->mu);
    size_t n = lmc_lru_list_size(&s->list);
    pthread_mutex_unlock(&s->mu);
    return n;
}

const lmc_eviction_ops lmc_eviction_lru_ops = {
    .name = "LRU",
    .create = lru_create,
    .destroy = lru_destroy,
    .on_created = lru_on_created,
    .on_touched = lru_on_touched,
    .on_removed = lru_on_removed,
    .get_actions = lru_get_actions,
    .tracked = lru_tracked,
};
