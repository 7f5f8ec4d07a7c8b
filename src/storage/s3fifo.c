/*
 * s3fifo.c -- the S3FIFO eviction policy (spec/storage-manager.md section
 * 7.2; not offered by the reference CLI, kept for experiments).
 *
 * Owns: three lmc_lru_lists used as FIFOs, oldest first -- small (keys
 * seen once, on probation), main (keys seen again) and ghost (keys only,
 * recently removed from small or main) -- and the ghost bound.
 *
 * Threads: any thread may call any op; one mutex guards all of it. The
 * filter runs with it held.
 *
 * Rules and why:
 *  - A new key enters small; a key found in the ghost set was evicted and
 *    then wanted again, so it skips probation and enters main.
 *  - A touch promotes small -> main, or refreshes a key inside main.
 *  - Creating a key that is already resident changes nothing: creation is
 *    not an access, and S3FIFO's point is that one-hit keys stay in small.
 *  - Victims come from small first, then main, skipping keys the filter
 *    rejects. get_actions only suggests; a resident key moves to the ghost
 *    set when on_removed confirms it left the tier.
 *  - Small has no size cap (the reference's optional cap is off by
 *    default); pressure is applied only through get_actions.
 *  - The ghost set is bounded by the largest resident count seen (the
 *    oldest ghosts go first), so it cannot grow without limit while keys
 *    churn.
 *  - Keys of one call are applied in reverse request order, as in lru.c,
 *    so within each FIFO the chunks nearer the end of a request are older
 *    and go first, keeping the prefix usable.
 *
 * When memory runs out an update is dropped with a warning; a key may then
 * go untracked or stay in its queue, which costs eviction quality, not
 * safety.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "storage/eviction.h"
#include "storage/lru_list.h"

typedef struct s3fifo {
    pthread_mutex_t mu;
    lmc_lru_list small, main, ghost;
    size_t ghost_cap; /* largest resident count seen */
    lmc_pool nodes;   /* every list's nodes; guarded by mu */
} s3fifo;

static size_t resident(const s3fifo *s)
{
    return lmc_lru_list_size(&s->small) + lmc_lru_list_size(&s->main);
}

static void *s3fifo_create(void)
{
    s3fifo *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    /* One pool for the three lists: nodes move between them. */
    lmc_pool_init(&s->nodes, sizeof(lmc_lru_node), 1024);
    if (lmc_lru_list_init_pooled(&s->small, &s->nodes) != LMC_OK)
        goto fail;
    if (lmc_lru_list_init_pooled(&s->main, &s->nodes) != LMC_OK)
        goto fail_small;
    if (lmc_lru_list_init_pooled(&s->ghost, &s->nodes) != LMC_OK)
        goto fail_main;
    pthread_mutex_init(&s->mu, NULL);
    return s;

fail_main:
    lmc_lru_list_fini(&s->main);
fail_small:
    lmc_lru_list_fini(&s->small);
fail:
    lmc_pool_destroy(&s->nodes);
    free(s);
    return NULL;
}

static void s3fifo_destroy(void *self)
{
    s3fifo *s = self;
    if (s == NULL)
        return;
    lmc_lru_list_fini(&s->small);
    lmc_lru_list_fini(&s->main);
    lmc_lru_list_fini(&s->ghost);
    lmc_pool_destroy(&s->nodes);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void trim_ghost(s3fifo *s)
{
    while (lmc_lru_list_size(&s->ghost) > s->ghost_cap && lmc_lru_list_pop_front(&s->ghost, NULL))
        ;
}

static void s3fifo_on_created(void *self, const lmc_object_key *keys, size_t n)
{
    s3fifo *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        const lmc_object_key *key = &keys[i];
        if (lmc_lru_list_contains(&s->small, key) || lmc_lru_list_contains(&s->main, key))
            continue;
        lmc_status st = lmc_lru_list_transfer(&s->ghost, &s->main, key);
        if (st == LMC_ERR_NOT_FOUND)
            st = lmc_lru_list_push_back(&s->small, key);
        if (st != LMC_OK)
            dropped++;
    }
    size_t r = resident(s);
    if (r > s->ghost_cap)
        s->ghost_cap = r;
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "S3FIFO: out of memory, %zu of %zu created keys not tracked", dropped,
                 n);
}

static void s3fifo_on_touched(void *self, const lmc_object_key *keys, size_t n)
{
    s3fifo *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        lmc_status st = lmc_lru_list_transfer(&s->small, &s->main, &keys[i]);
        if (st == LMC_ERR_NOT_FOUND)
            lmc_lru_list_touch(&s->main, &keys[i]);
        else if (st != LMC_OK)
            dropped++;
    }
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "S3FIFO: out of memory, %zu of %zu touched keys not promoted", dropped,
                 n);
}

static void s3fifo_on_removed(void *self, const lmc_object_key *keys, size_t n)
{
    s3fifo *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        const lmc_object_key *key = &keys[i];
        lmc_status st = lmc_lru_list_transfer(&s->small, &s->ghost, key);
        if (st == LMC_ERR_NOT_FOUND)
            st = lmc_lru_list_transfer(&s->main, &s->ghost, key);
        if (st == LMC_ERR_NOMEM) {
            /* No room for the ghost entry; the key must not stay resident. */
            if (!lmc_lru_list_remove(&s->small, key))
                lmc_lru_list_remove(&s->main, key);
        }
    }
    trim_ghost(s);
    pthread_mutex_unlock(&s->mu);
}

static lmc_status s3fifo_get_actions(void *self, double ratio, lmc_evict_filter filter, void *ud,
                                     const char *cache_salt, lmc_keyvec *out)
{
    (void)cache_salt; /* a global policy */
    s3fifo *s = self;
    pthread_mutex_lock(&s->mu);
    size_t target = lmc_eviction_target(resident(s), ratio);
    size_t taken = 0;
    lmc_status st = lmc_lru_list_collect(&s->small, target, filter, ud, out, &taken);
    if (st == LMC_OK && taken < target)
        st = lmc_lru_list_collect(&s->main, target - taken, filter, ud, out, NULL);
    pthread_mutex_unlock(&s->mu);
    return st;
}

static size_t s3fifo_tracked(void *self)
{
    s3fifo *s = self;
    pthread_mutex_lock(&s->mu);
    size_t n = resident(s);
    pthread_mutex_unlock(&s->mu);
    return n;
}

const lmc_eviction_ops lmc_eviction_s3fifo_ops = {
    .name = "S3FIFO",
    .create = s3fifo_create,
    .destroy = s3fifo_destroy,
    .on_created = s3fifo_on_created,
    .on_touched = s3fifo_on_touched,
    .on_removed = s3fifo_on_removed,
    .get_actions = s3fifo_get_actions,
    .tracked = s3fifo_tracked,
};
