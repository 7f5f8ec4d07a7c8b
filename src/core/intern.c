/*
 * intern.c -- the process-wide string intern table (lmc_intern in types.h).
 *
 * Owns: one open-addressing hash table of immutable entries (hash, length,
 * bytes, NUL). Entries are never removed and live until exit.
 *
 * Threads and locking: any thread may call lmc_intern. Lookups take no lock:
 * they load the current table and its slots with acquire loads, and an entry
 * is fully written before the release store that publishes it. Insertions
 * and growth happen under g_lock, and a lookup that misses re-probes under
 * the lock before inserting, so a reader racing with an insert or a resize
 * only ever takes the slow path, never returns a second copy.
 *
 * Growth publishes a new table and keeps the old one on its `older` chain,
 * because a lock-free reader may still be probing it. Every table and entry
 * stays reachable from g_table, so LeakSanitizer does not report them at
 * exit; the retired tables cost at most as much as the live one.
 */
#include "lmcache/types.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct intern_entry {
    uint64_t hash;
    size_t len;
    char data[]; /* len bytes, then NUL */
} intern_entry;

typedef struct intern_table {
    size_t mask;                /* capacity - 1; capacity is a power of two */
    size_t count;               /* entries in use; guarded by g_lock */
    struct intern_table *older; /* the table this one replaced */
    _Atomic(intern_entry *) slots[];
} intern_table;

#define INTERN_INITIAL_CAPACITY 256

static _Atomic(intern_table *) g_table;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* One canonical empty string without touching the table. */
static const char g_empty[1] = "";

static const char *probe(intern_table *t, uint64_t hash, const char *s, size_t len,
                         size_t *free_slot)
{
    size_t i = (size_t)hash & t->mask;
    for (;;) {
        intern_entry *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (e == NULL) {
            if (free_slot != NULL)
                *free_slot = i;
            return NULL;
        }
        if (e->hash == hash && e->len == len && memcmp(e->data, s, len) == 0)
            return e->data;
        i = (i + 1) & t->mask;
    }
}

static intern_table *table_new(size_t capacity)
{
    intern_table *t = calloc(1, sizeof(*t) + capacity * sizeof(t->slots[0]));
    if (t == NULL)
        return NULL;
    t->mask = capacity - 1;
    for (size_t i = 0; i < capacity; i++)
        atomic_init(&t->slots[i], NULL);
    return t;
}

/* Called under g_lock. Returns the table to insert into, or NULL (no memory). */
static intern_table *table_ensure_room(intern_table *t)
{
    /* Keep the load at or below one half so probe sequences stay short. */
    if (t != NULL && (t->count + 1) * 2 <= t->mask + 1)
        return t;
    size_t capacity = t == NULL ? INTERN_INITIAL_CAPACITY : (t->mask + 1) * 2;
    intern_table *bigger = table_new(capacity);
    if (bigger == NULL)
        return NULL;
    if (t != NULL) {
        for (size_t i = 0; i <= t->mask; i++) {
            intern_entry *e = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
            if (e == NULL)
                continue;
            size_t j = (size_t)e->hash & bigger->mask;
            while (atomic_load_explicit(&bigger->slots[j], memory_order_relaxed) != NULL)
                j = (j + 1) & bigger->mask;
            atomic_store_explicit(&bigger->slots[j], e, memory_order_relaxed);
        }
        bigger->count = t->count;
    }
    bigger->older = t;
    atomic_store_explicit(&g_table, bigger, memory_order_release);
    return bigger;
}

/* Called under g_lock after a miss there: the new entry's copy of s, or NULL (no memory). */
static const char *insert_locked(intern_table *t, uint64_t hash, const char *s, size_t len)
{
    t = table_ensure_room(t);
    if (t == NULL)
        return NULL;
    if (len > SIZE_MAX - sizeof(intern_entry) - 1)
        return NULL;
    intern_entry *e = malloc(sizeof(*e) + len + 1);
    if (e == NULL)
        return NULL;
    e->hash = hash;
    e->len = len;
    memcpy(e->data, s, len);
    e->data[len] = '\0';
    size_t slot = 0;
    probe(t, hash, s, len, &slot);
    atomic_store_explicit(&t->slots[slot], e, memory_order_release);
    t->count++;
    return e->data;
}

/*
 * The one lookup behind lmc_intern_find and lmc_intern, so both keep the
 * same race rule: a lock-free probe first, and a miss re-probes under g_lock
 * (it may race with an insert) before it is an answer or, with insert, an
 * insertion.
 */
static const char *lookup(const char *s, size_t len, bool insert)
{
    if (len == 0)
        return g_empty;
    uint64_t hash = XXH3_64bits(s, len);
    intern_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    const char *hit = t != NULL ? probe(t, hash, s, len, NULL) : NULL;
    if (hit != NULL)
        return hit;
    pthread_mutex_lock(&g_lock);
    t = atomic_load_explicit(&g_table, memory_order_relaxed);
    hit = t != NULL ? probe(t, hash, s, len, NULL) : NULL;
    if (hit == NULL && insert)
        hit = insert_locked(t, hash, s, len);
    pthread_mutex_unlock(&g_lock);
    return hit;
}

const char *lmc_intern_find(const char *s, size_t len)
{
    return lookup(s, len, false);
}

const char *lmc_intern(const char *s, size_t len)
{
    return lookup(s, len, true);
}
