/*
 * eviction.h -- the eviction policy interface and its registry.
 *
 * Owns: nothing but the registry table. Each policy (lru.c, arc.c,
 * s3fifo.c, isolated_lru.c, noop.c) is a module behind lmc_eviction_ops
 * that tracks keys and, when asked, names victims
 * (spec/storage-manager.md section 7). The table in eviction.c is the one
 * list of policies: their names (for --eviction-policy, the L2 "eviction"
 * object, help texts and messages) are read from it, never written again.
 *
 * Policies only *suggest*: get_actions never removes a key from tracking;
 * removal is confirmed later through on_removed (the key really left L1 or
 * L2). Ratios are fractions of the number of tracked keys, not bytes:
 * target = floor(tracked * ratio), at least 1 when ratio > 0, ratio clamped
 * to [0, 1].
 *
 * Threads: each policy instance has one internal mutex; every op is
 * thread-safe. Lock order: L1 manager mutex -> policy mutex (L1 listener
 * callbacks call on_created etc. under the L1 mutex). The filter passed to
 * get_actions runs while the policy mutex is held, so it must not take the
 * policy's mutex again.
 */
#ifndef LMC_STORAGE_EVICTION_H
#define LMC_STORAGE_EVICTION_H

#include <stdbool.h>
#include <stddef.h>

#include "core/keyvec.h"
#include "lmcache/status.h"
#include "lmcache/types.h"

typedef struct lmc_eviction_policy lmc_eviction_policy;

/* Return false to skip a key (it stays tracked and is not returned). */
typedef bool (*lmc_evict_filter)(const lmc_object_key *key, void *ud);

typedef struct lmc_eviction_ops {
    const char *name; /* the registry key, e.g. "LRU" */
    /* Build a policy's private state; NULL when memory runs out. */
    void *(*create)(void);
    void (*destroy)(void *self);
    /* Keys were created (written, or loaded from L2), in request order. */
    void (*on_created)(void *self, const lmc_object_key *keys, size_t n);
    /* Keys were accessed. */
    void (*on_touched)(void *self, const lmc_object_key *keys, size_t n);
    /* Keys left the tier. Unknown keys are ignored. */
    void (*on_removed)(void *self, const lmc_object_key *keys, size_t n);
    /*
     * Append up to target victims to out, oldest first, skipping keys the
     * filter (if any) rejects. cache_salt is NULL for a global request; an
     * isolating policy (salt_buckets set) requires it (LMC_ERR_INVALID
     * otherwise) and takes the target from that salt's bucket.
     */
    lmc_status (*get_actions)(void *self, double ratio, lmc_evict_filter filter, void *ud,
                              const char *cache_salt, lmc_keyvec *out);
    /* Number of keys tracked (resident, not ghosts). */
    size_t (*tracked)(void *self);
    /*
     * Optional, and what makes a policy isolating: a policy that evicts per
     * cache_salt sets it to report its number of salt buckets (empty ones
     * are dropped at once). NULL for every policy that does not isolate.
     */
    size_t (*salt_buckets)(void *self);
} lmc_eviction_ops;

/* Whether ops evict per cache_salt (they have salt buckets). */
static inline bool lmc_eviction_ops_isolating(const lmc_eviction_ops *ops)
{
    return ops->salt_buckets != NULL;
}

/* The number of registered policies (the length of eviction.c's table). */
extern const size_t lmc_eviction_policy_count;

/* The i-th registered policy, in the order `--eviction-policy` lists them; NULL past the end. */
const lmc_eviction_ops *lmc_eviction_policy_at(size_t i);

/*
 * The registered names, lmc_eviction_policy_count of them in table order,
 * and the same joined for messages ("LRU, ARC, ..."). Derived from the
 * table once (thread-safe); valid until exit.
 */
const char *const *lmc_eviction_policy_names(void);
const char *lmc_eviction_policy_list(void);

/* The ops registered under name (exact match), or NULL. */
const lmc_eviction_ops *lmc_eviction_find(const char *name);

/*
 * A policy instance: ops plus state. Created by name; unknown name gives
 * LMC_ERR_INVALID "unknown eviction policy 'X' (expected one of <the
 * list>)".
 */
lmc_status lmc_eviction_policy_create(const char *name, lmc_eviction_policy **out, lmc_error *err);
void lmc_eviction_policy_destroy(lmc_eviction_policy *p);
const char *lmc_eviction_policy_name(const lmc_eviction_policy *p);
bool lmc_eviction_policy_supports_isolation(const lmc_eviction_policy *p);
void lmc_eviction_on_created(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n);
void lmc_eviction_on_touched(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n);
void lmc_eviction_on_removed(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n);
lmc_status lmc_eviction_get_actions(lmc_eviction_policy *p, double ratio, lmc_evict_filter filter,
                                    void *ud, const char *cache_salt, lmc_keyvec *out);
size_t lmc_eviction_tracked(lmc_eviction_policy *p);

/* The ops of each policy (defined in their own files). */
extern const lmc_eviction_ops lmc_eviction_lru_ops;
extern const lmc_eviction_ops lmc_eviction_arc_ops;
extern const lmc_eviction_ops lmc_eviction_s3fifo_ops;
extern const lmc_eviction_ops lmc_eviction_isolated_lru_ops;
extern const lmc_eviction_ops lmc_eviction_noop_ops;

/* target = floor(tracked * ratio), at least 1 if ratio > 0; ratio clamped to [0,1]. */
size_t lmc_eviction_target(size_t tracked, double ratio);

/*
 * An isolating policy's number of salt buckets (its salt_buckets op); 0 for
 * a policy that does not isolate. For tests and status reports.
 */
size_t lmc_eviction_bucket_count(lmc_eviction_policy *p);

#endif
