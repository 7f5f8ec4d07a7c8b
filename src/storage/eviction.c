/*
 * eviction.c -- the eviction policy registry and the policy wrapper (see
 * eviction.h).
 *
 * Owns: the constant table of policies (the one list of them: names, the
 * count and the "one of ..." text are derived from it) and
 * lmc_eviction_policy, a pair of (ops, state) so that callers hold one
 * pointer whatever the policy.
 *
 * Threads: the registry is read-only (its derived names are built once,
 * under pthread_once); the wrapper adds no locking of its own because every
 * policy guards its state with its own mutex.
 */
#include "storage/eviction.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"

/* Adding a policy: its own file, and one line here. */
static const lmc_eviction_ops *const registry[] = {
    &lmc_eviction_lru_ops,          &lmc_eviction_arc_ops,  &lmc_eviction_s3fifo_ops,
    &lmc_eviction_isolated_lru_ops, &lmc_eviction_noop_ops,
};

#define NPOLICIES (sizeof(registry) / sizeof(registry[0]))

const size_t lmc_eviction_policy_count = NPOLICIES;

/* Derived from registry[] at first use. */
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;
static const char *g_names[NPOLICIES];
static char g_list[256];

static void build_names(void)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        g_names[i] = registry[i]->name;
    lmc_names_join(g_names, NPOLICIES, ", ", NULL, g_list, sizeof(g_list));
}

const char *const *lmc_eviction_policy_names(void)
{
    pthread_once(&g_names_once, build_names);
    return g_names;
}

const char *lmc_eviction_policy_list(void)
{
    pthread_once(&g_names_once, build_names);
    return g_list;
}

const lmc_eviction_ops *lmc_eviction_policy_at(size_t i)
{
    return i < NPOLICIES ? registry[i] : NULL;
}

struct lmc_eviction_policy {
    const lmc_eviction_ops *ops;
    void *self;
};

const lmc_eviction_ops *lmc_eviction_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NPOLICIES; i++) {
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    }
    return NULL;
}

lmc_status lmc_eviction_policy_create(const char *name, lmc_eviction_policy **out, lmc_error *err)
{
    *out = NULL;
    const lmc_eviction_ops *ops = lmc_eviction_find(name);
    if (ops == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "unknown eviction policy '%s' (expected one of %s)", name ? name : "",
                             lmc_eviction_policy_list());
    lmc_eviction_policy *p = malloc(sizeof(*p));
    if (p == NULL)
        goto nomem;
    p->ops = ops;
    p->self = ops->create();
    if (p->self == NULL)
        goto nomem;
    *out = p;
    return LMC_OK;

nomem:
    free(p);
    return lmc_error_set(err, LMC_ERR_NOMEM, "eviction policy '%s': out of memory", name);
}

void lmc_eviction_policy_destroy(lmc_eviction_policy *p)
{
    if (p == NULL)
        return;
    p->ops->destroy(p->self);
    free(p);
}

const char *lmc_eviction_policy_name(const lmc_eviction_policy *p)
{
    return p->ops->name;
}

bool lmc_eviction_policy_supports_isolation(const lmc_eviction_policy *p)
{
    return lmc_eviction_ops_isolating(p->ops);
}

void lmc_eviction_on_created(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n)
{
    if (n > 0)
        p->ops->on_created(p->self, keys, n);
}

void lmc_eviction_on_touched(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n)
{
    if (n > 0)
        p->ops->on_touched(p->self, keys, n);
}

void lmc_eviction_on_removed(lmc_eviction_policy *p, const lmc_object_key *keys, size_t n)
{
    if (n > 0)
        p->ops->on_removed(p->self, keys, n);
}

lmc_status lmc_eviction_get_actions(lmc_eviction_policy *p, double ratio, lmc_evict_filter filter,
                                    void *ud, const char *cache_salt, lmc_keyvec *out)
{
    return p->ops->get_actions(p->self, ratio, filter, ud, cache_salt, out);
}

size_t lmc_eviction_tracked(lmc_eviction_policy *p)
{
    return p->ops->tracked(p->self);
}

size_t lmc_eviction_target(size_t tracked, double ratio)
{
    if (tracked == 0 || !(ratio > 0.0)) /* also catches NaN */
        return 0;
    if (ratio >= 1.0)
        return tracked;
    double t = floor((double)tracked * ratio);
    /* (double)tracked may round up past SIZE_MAX; never convert that back. */
    size_t target = t >= (double)tracked ? tracked : (size_t)t;
    return target ? target : 1;
}

size_t lmc_eviction_bucket_count(lmc_eviction_policy *p)
{
    return p->ops->salt_buckets != NULL ? p->ops->salt_buckets(p->self) : 0;
}
