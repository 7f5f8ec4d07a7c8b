/*
 * isolated_lru.c -- the IsolatedLRU eviction policy: one LRU per cache_salt
 * (spec/storage-manager.md section 7.2).
 *
 * Owns: a small chained hash table from salt string to bucket; each bucket
 * is an lmc_lru_list with the same reverse-order rule as lru.c (the chunks
 * nearer the end of a request become older, so a request's prefix survives
 * longest). A bucket is freed as soon as it is empty, so salts that come
 * and go leave nothing behind.
 *
 * Isolation means one tenant's pressure never evicts another tenant's keys:
 * get_actions therefore requires a salt and takes its target from that
 * bucket's size alone.
 *
 * Salts inside keys are interned, so the bucket keeps the key's pointer; the
 * salt given to get_actions may be any string, so buckets are found by
 * content (pointer equality is only the fast path). A NULL salt in a key is
 * treated as "" (no salt).
 *
 * Threads: any thread may call any op; one mutex guards the table and every
 * bucket. The filter runs with it held.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strmap.h"
#include "storage/eviction.h"
#include "storage/lru_list.h"

typedef struct bucket {
    struct bucket *next; /* hash chain */
    const char *salt;    /* interned (from a key), never freed */
    uint64_t hash;
    lmc_lru_list list;
} bucket;

typedef struct isolated {
    pthread_mutex_t mu;
    bucket **slots; /* nslots chains; nslots is a power of two */
    size_t nslots;
    size_t nbuckets;
    size_t tracked; /* sum of bucket sizes */
    lmc_pool nodes; /* every bucket's list nodes */
} isolated;

#define INITIAL_SLOTS 16

/* cache_salt strings hash as core/strmap's keys do. */
static uint64_t salt_hash(const char *s)
{
    return lmc_str_hash(s, strlen(s));
}

static const char *salt_of(const lmc_object_key *key)
{
    return key->cache_salt ? key->cache_salt : "";
}

/* The bucket of salt, or NULL. *link (if not NULL) receives the pointer to it. */
static bucket *find_bucket(const isolated *s, const char *salt, uint64_t h, bucket ***link)
{
    bucket **pp = &s->slots[h & (s->nslots - 1)];
    for (; *pp; pp = &(*pp)->next) {
        bucket *b = *pp;
        if (b->hash == h && (b->salt == salt || strcmp(b->salt, salt) == 0)) {
            if (link)
                *link = pp;
            return b;
        }
    }
    return NULL;
}

/* Double the table when it is full; on failure keep the longer chains. */
static void maybe_grow(isolated *s)
{
    if (s->nbuckets < s->nslots)
        return;
    size_t nslots = s->nslots * 2;
    bucket **slots = calloc(nslots, sizeof(*slots));
    if (slots == NULL)
        return;
    for (size_t i = 0; i < s->nslots; i++) {
        bucket *b = s->slots[i];
        while (b) {
            bucket *next = b->next;
            b->next = slots[b->hash & (nslots - 1)];
            slots[b->hash & (nslots - 1)] = b;
            b = next;
        }
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
}

static bucket *get_or_add_bucket(isolated *s, const char *salt)
{
    uint64_t h = salt_hash(salt);
    bucket *b = find_bucket(s, salt, h, NULL);
    if (b)
        return b;
    b = malloc(sizeof(*b));
    if (b == NULL)
        return NULL;
    if (lmc_lru_list_init_pooled(&b->list, &s->nodes) != LMC_OK) {
        free(b);
        return NULL;
    }
    b->salt = salt;
    b->hash = h;
    maybe_grow(s);
    bucket **head = &s->slots[h & (s->nslots - 1)];
    b->next = *head;
    *head = b;
    s->nbuckets++;
    return b;
}

static void drop_bucket_if_empty(isolated *s, bucket *b)
{
    if (lmc_lru_list_size(&b->list) > 0)
        return;
    bucket **link = NULL;
    find_bucket(s, b->salt, b->hash, &link);
    *link = b->next;
    s->nbuckets--;
    lmc_lru_list_fini(&b->list);
    free(b);
}

static void *isolated_create(void)
{
    isolated *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->slots = calloc(INITIAL_SLOTS, sizeof(*s->slots));
    if (s->slots == NULL) {
        free(s);
        return NULL;
    }
    s->nslots = INITIAL_SLOTS;
    lmc_pool_init(&s->nodes, sizeof(lmc_lru_node), 1024);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void isolated_destroy(void *self)
{
    isolated *s = self;
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nslots; i++) {
        bucket *b = s->slots[i];
        while (b) {
            bucket *next = b->next;
            lmc_lru_list_fini(&b->list);
            free(b);
            b = next;
        }
    }
    free(s->slots);
    lmc_pool_destroy(&s->nodes);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void isolated_on_created(void *self, const lmc_object_key *keys, size_t n)
{
    isolated *s = self;
    size_t dropped = 0;
    pthread_mutex_lock(&s->mu);
    /* Reverse order, as in lru.c: the request's prefix stays newest. */
    for (size_t i = n; i-- > 0;) {
        bucket *b = get_or_add_bucket(s, salt_of(&keys[i]));
        if (b == NULL) {
            dropped++;
            continue;
        }
        size_t before = lmc_lru_list_size(&b->list);
        if (lmc_lru_list_push_back(&b->list, &keys[i]) != LMC_OK) {
            dropped++;
            drop_bucket_if_empty(s, b);
            continue;
        }
        s->tracked += lmc_lru_list_size(&b->list) - before;
    }
    pthread_mutex_unlock(&s->mu);
    if (dropped)
        LMC_WARN("eviction", "IsolatedLRU: out of memory, %zu of %zu created keys not tracked",
                 dropped, n);
}

static void isolated_on_touched(void *self, const lmc_object_key *keys, size_t n)
{
    isolated *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = n; i-- > 0;) {
        const char *salt = salt_of(&keys[i]);
        bucket *b = find_bucket(s, salt, salt_hash(salt), NULL);
        if (b)
            lmc_lru_list_touch(&b->list, &keys[i]);
    }
    pthread_mutex_unlock(&s->mu);
}

static void isolated_on_removed(void *self, const lmc_object_key *keys, size_t n)
{
    isolated *s = self;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        const char *salt = salt_of(&keys[i]);
        bucket *b = find_bucket(s, salt, salt_hash(salt), NULL);
        if (b && lmc_lru_list_remove(&b->list, &keys[i])) {
            s->tracked--;
            drop_bucket_if_empty(s, b);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static lmc_status isolated_get_actions(void *self, double ratio, lmc_evict_filter filter, void *ud,
                                       const char *cache_salt, lmc_keyvec *out)
{
    isolated *s = self;
    if (cache_salt == NULL)
        return LMC_ERR_INVALID; /* an isolated policy never evicts across salts */
    lmc_status st = LMC_OK;
    pthread_mutex_lock(&s->mu);
    bucket *b = find_bucket(s, cache_salt, salt_hash(cache_salt), NULL);
    if (b) {
        size_t target = lmc_eviction_target(lmc_lru_list_size(&b->list), ratio);
        st = lmc_lru_list_collect(&b->list, target, filter, ud, out, NULL);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static size_t isolated_tracked(void *self)
{
    isolated *s = self;
    pthread_mutex_lock(&s->mu);
    size_t n = s->tracked;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static size_t isolated_salt_buckets(void *self)
{
    isolated *s = self;
    pthread_mutex_lock(&s->mu);
    size_t n = s->nbuckets;
    pthread_mutex_unlock(&s->mu);
    return n;
}

const lmc_eviction_ops lmc_eviction_isolated_lru_ops = {
    .name = "IsolatedLRU",
    .create = isolated_create,
    .destroy = isolated_destroy,
    .on_created = isolated_on_created,
    .on_touched = isolated_on_touched,
    .on_removed = isolated_on_removed,
    .get_actions = isolated_get_actions,
    .tracked = isolated_tracked,
    .salt_buckets = isolated_salt_buckets,
};
