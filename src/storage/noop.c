/*
 * noop.c -- the "noop" eviction policy: tracks nothing, never evicts.
 *
 * Meant for a buffer-only L1 together with the skip_l1 store policy, where
 * objects leave L1 as soon as their readers are done, so there is nothing
 * for a policy to choose (spec/storage-manager.md section 7.2).
 *
 * Owns: no state. create returns a static sentinel because NULL would mean
 * "out of memory". Threads: every op is trivially thread-safe.
 */
#include "storage/eviction.h"

static char noop_sentinel;

static void *noop_create(void)
{
    return &noop_sentinel;
}

static void noop_destroy(void *self)
{
    (void)self;
}

static void noop_on_keys(void *self, const lmc_object_key *keys, size_t n)
{
    (void)self;
    (void)keys;
    (void)n;
}

static lmc_status noop_get_actions(void *self, double ratio, lmc_evict_filter filter, void *ud,
                                   const char *cache_salt, lmc_keyvec *out)
{
    (void)self;
    (void)ratio;
    (void)filter;
    (void)ud;
    (void)cache_salt;
    (void)out;
    return LMC_OK;
}

static size_t noop_tracked(void *self)
{
    (void)self;
    return 0;
}

const lmc_eviction_ops lmc_eviction_noop_ops = {
    .name = "noop",
    .create = noop_create,
    .destroy = noop_destroy,
    .on_created = noop_on_keys,
    .on_touched = noop_on_keys,
    .on_removed = noop_on_keys,
    .get_actions = noop_get_actions,
    .tracked = noop_tracked,
};
