/*
 * arc.c -- the ARC (Adaptive Replacement Cache) eviction policy
 * (spec/storage-manager.md section 7.2).
 *
 * Owns: four lmc_lru_lists, oldest first -- T1 (resident, seen once), T2
 * (resident, seen again), B1 and B2 (ghosts: keys only, history of victims
 * taken from T1 and T2) -- the set of pending victims, p (the target size
 * of T1) and the capacity.
 *
 * Threads: any thread may call any op; one mutex guards all of it. The
 * filter runs with it held.
 *
 * Why it differs from textbook ARC:
 *  - There is no fixed cache size, only "evict this fraction of what you
 *    track", so the capacity is the largest resident count ever seen.
 *  - Eviction is decoupled from any incoming request, so the choice
 *    between T1 and T2 uses the request-independent rule "take from T1
 *    while its size >= int(p)" (ties go to T1).
 *  - get_actions only suggests; the key leaves the tier later. A victim is
 *    therefore remembered as pending and retires to B1/B2 only when
 *    on_removed confirms it. Any other removal (an explicit delete) is not
 *    an ARC decision and is forgotten without feeding the ghost lists.
 *  - p and the adaptation step are integers: step = max(1, |B2| / |B1|)
 *    with integer (floor) division, like Python's //. The reference keeps
 *    p as a float; an integer p only moves in whole keys, and since the
 *    rule compares against int(p) anyway, the difference is that
 *    fractional steps below 1 are rounded up to 1 instead of accumulating.
 *  - Keys of one call are processed in reverse request order, as in
 *    lru.c, so the chunks nearer the end of a request are older within
 *    each list and go first, keeping the prefix usable.
 *
 * When memory runs out a transition is dropped with a warning; a key may
 * then stay in its old list or go untracked, which costs eviction
 * quality, not safety.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/keymap.h"
#include "core/log.h"
#include "storage/eviction.h"
#include "storage/lru_list.h"

typedef struct arc {
    pthread_mutex_t mu;
    lmc_lru_list t1, t2, b1, b2;
    lmc_keymap *pending; /* victims handed out and not yet removed; values unused */
    size_t p;            /* target size of T1, 0..cap */
    size_t cap;          /* largest resident count seen */
    lmc_pool nodes;      /* every list's nodes; guarded by mu */
} arc;

static size_t resident(const arc *s)
{
    return lmc_lru_list_size(&s->t1) + lmc_lru_list_size(&s->t2);
}

static size_t total(const arc *s)
{
    return resident(s) + lmc_lru_list_size(&s->b1) + lmc_lru_list_size(&s->b2);
}

static void *arc_create(void)
{
    arc *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    /* One pool for the four lists: nodes move between them. */
    lmc_pool_init(&s->nodes, sizeof(lmc_lru_node), 1024);
    lmc_lru_list *lists[] = {&s->t1, &s->t2, &s->b1, &s->b2};
    size_t ok = 0;
    for (; ok < 4; ok++) {
        if (lmc_lru_list_init_pooled(lists[ok], &s->nodes) != LMC_OK)
            goto fail;
    }
    s->pending = lmc_keymap_create(0);
    if (s->pending == NULL)
        goto fail;
    pthread_mutex_init(&s->mu, NULL);
    return s;

fail:
    while (ok-- > 0)
        lmc_lru_list_fini(lists[ok]);
    lmc_pool_destroy(&s->nodes);
    free(s);
    return NULL;
}

static void arc_destroy(void *self)
{
    arc *s = self;
    if (s == NULL)
        return;
    lmc_lru_list_fini(&s->t1);
    lmc_lru_list_fini(&s->t2);
    lmc_lru_list_fini(&s->b1);
    lmc_lru_list_fini(&s->b2);
    lmc_keymap_destroy(s->pending);
    lmc_pool_destroy(&s->nodes);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Keep |T1|+|B1| <= cap and everything tracked <= 2*cap (B2 goes first). */
static void trim_ghosts(arc *s)
{
    if (s->cap == 0)
        return;
    while (lmc_lru_list_size(&s->t1) + lmc_lru_list_size(&s->b1) > s->cap &&
           lmc_lru_list_pop_front(&s->b1, NULL))
        ;
    while (total(s) > 2 * s->cap) {
        if (!lmc_lru_list_pop_front(&s->b2, NULL) && !lmc_lru_list_pop_front(&s->b1, NULL))
            break;
    }
}

static void forget(arc *s, const lmc_object_key *key)
{
    /* A key is in at most one list. */
    if (lmc_lru_list_remove(&s->t1, key) || lmc_lru_list_remove(&s->t2, key))
        return;
    if (!lmc_lru_list_remove(&s->b1, key))
        lmc_lru_list_remove(&s->b2, key);
}

/* One created key; false when memory ran out. */
static bool created_one(arc *s, const lmc_object_key *key)
{
    lmc_keymap_remove(s->pending, key, NULL);
    if (lmc_lru_list_contains(&s->t1, key))
        return lmc_lru_list_transfer(&s->t1, &s->t2, key) == LMC_OK;
    if (lmc_lru_list_touch(&s->t2, key))
        return true;
    if (lmc_lru_list_contains(&s->b1, key)) {
        /* A recent victim came back: T1 was too small. Grow its target. */
        size_t b1 = lmc_lru_list_size(&s->b1), b2 = lmc_lru_list_size(&s->b2);
        size_t step = b2 / b1 > 1 ? b2 / b1 : 1;
        s->p = s->p + step < s->cap ? s->p + step : s->cap;
        return lmc_lru_list_transfer(&s->b1, &s->t2, key) == LMC_OK;
    }
    if (lmc_lru_list_contains(&s->b2, key)) {
        /* A frequent victim came back: T2 was too small. Shrink T1's target. */
        size_t b1 = lmc_lru_list_size(&s->b1), b2 = lmc_lru_list_size(&s->b2);
        size_t step = b1 / b2 > 1 ? b1 / b2 : 1;
        s->p = s->p > step ? s->p - step : 0;
        return lmc_lru_list_transfer(&s->b2, &s->t2, key) == LMC_OK;
    }
    return lmc_lru_list_push_back(&s->t1, key) == LMC_OK;
}

static void arc_on_created(void *self, const lmc_object_key *keys, size_t n)
{
    arc *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        if (!created_one(s, &keys[i]))
            dropped++;
        size_t r = resident(s);
        if (r > s->cap)
            s->cap = r;
        trim_ghosts(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "ARC: out of memory, %zu of %zu created keys not updated", dropped, n);
}

static void arc_on_touched(void *self, const lmc_object_key *keys, size_t n)
{
    arc *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        if (lmc_lru_list_contains(&s->t1, &keys[i])) {
            if (lmc_lru_list_transfer(&s->t1, &s->t2, &keys[i]) != LMC_OK)
                dropped++;
        } else {
            lmc_lru_list_touch(&s->t2, &keys[i]);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "ARC: out of memory, %zu of %zu touched keys not promoted", dropped,
                 n);
}

static void arc_on_removed(void *self, const lmc_object_key *keys, size_t n)
{
    arc *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        const lmc_object_key *key = &keys[i];
        if (lmc_keymap_remove(s->pending, key, NULL)) {
            /* Our own victim left: remember it in the matching ghost list. */
            lmc_status st = LMC_ERR_NOT_FOUND;
            if (lmc_lru_list_contains(&s->t1, key))
                st = lmc_lru_list_transfer(&s->t1, &s->b1, key);
            else if (lmc_lru_list_contains(&s->t2, key))
                st = lmc_lru_list_transfer(&s->t2, &s->b2, key);
            if (st == LMC_ERR_NOMEM)
                forget(s, key); /* no room for the ghost; it must not stay resident */
        } else {
            forget(s, key);
        }
    }
    trim_ghosts(s);
    pthread_mutex_unlock(&s->mu);
}

/* Advance *cursor past keys the filter rejects; the first accepted key or NULL. */
static const lmc_lru_node *next_eligible(const lmc_lru_node **cursor, lmc_evict_filter filter,
                                         void *ud)
{
    while (*cursor) {
        const lmc_lru_node *n = *cursor;
        *cursor = n->next;
        if (filter == NULL || filter(&n->key, ud))
            return n;
    }
    return NULL;
}

static lmc_status arc_get_actions(void *self, double ratio, lmc_evict_filter filter, void *ud,
                                  const char *cache_salt, lmc_keyvec *out)
{
    (void)cache_salt; /* a global policy */
    arc *s = self;
    lmc_status st = LMC_OK;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    size_t r = resident(s);
    size_t target = lmc_eviction_target(r, ratio);
    if (target == 0)
        goto out;
    if (r > s->cap)
        s->cap = r;
    if (s->p > s->cap)
        s->p = s->cap;
    trim_ghosts(s);

    /*
     * T1's virtual size counts down as T1 victims are chosen, so one batch
     * splits between T1 and T2 the way a run of single evictions would.
     * Each list is walked once, so no key can be chosen twice.
     */
    size_t virtual_t1 = lmc_lru_list_size(&s->t1);
    const lmc_lru_node *c1 = s->t1.head, *c2 = s->t2.head;
    for (size_t got = 0; got < target; got++) {
        const lmc_lru_node *victim = NULL;
        bool from_t1 = false;
        if (virtual_t1 >= s->p)
            from_t1 = (victim = next_eligible(&c1, filter, ud)) != NULL;
        if (victim == NULL)
            victim = next_eligible(&c2, filter, ud);
        if (victim == NULL)
            from_t1 = (victim = next_eligible(&c1, filter, ud)) != NULL;
        if (victim == NULL)
            break;
        if (from_t1)
            virtual_t1--;
        st = lmc_keyvec_push(out, &victim->key);
        if (st != LMC_OK)
            break;
        if (lmc_keymap_put(s->pending, &victim->key, NULL, NULL) != LMC_OK)
            dropped++;
    }
out:
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "ARC: out of memory, %zu victims will be forgotten instead of ghosted",
                 dropped);
    return st;
}

static size_t arc_tracked(void *self)
{
    arc *s = self;
    pthread_mutex_lock(&s->mu);
    size_t n = resident(s);
    pthread_mutex_unlock(&s->mu);
    return n;
}

const lmc_eviction_ops lmc_eviction_arc_ops = {
    .name = "ARC",
    .create = arc_create,
    .destroy = arc_destroy,
    .on_created = arc_on_created,
    .on_touched = arc_on_touched,
    .on_removed = arc_on_removed,
    .get_actions = arc_get_actions,
    .tracked = arc_tracked,
};
