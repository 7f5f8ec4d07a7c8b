/*
 * strmap.c -- byte string -> uint64 hash map (see strmap.h).
 *
 * A dense array of entries {key copy, length, hash, value} in insertion
 * order and an index of slots holding entry number + 1 (0: empty). Keys are
 * hashed with xxh3, so hostile names (a trace's qualnames) cannot be
 * chosen to collide cheaply.
 */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct entry {
    char *key;
    size_t len;
    uint64_t hash;
    uint64_t value;
} entry;

struct lmc_strmap {
    uint32_t *slots;
    size_t cap; /* slots, a power of two */
    entry *entries;
    size_t size, entries_cap;
};

lmc_strmap *lmc_strmap_create(void)
{
    lmc_strmap *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->cap = 64;
    m->slots = calloc(m->cap, sizeof(*m->slots));
    if (m->slots == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

void lmc_strmap_destroy(lmc_strmap *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->size; i++)
        free(m->entries[i].key);
    free(m->entries);
    free(m->slots);
    free(m);
}

/* Rebuild the index at twice the size; false (nothing changed) when memory runs out. */
static bool grow(lmc_strmap *m)
{
    if (m->cap > ((size_t)1 << 30))
        return false;
    size_t cap = m->cap * 2;
    uint32_t *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < m->size; i++) {
        size_t s = (size_t)m->entries[i].hash & (cap - 1);
        while (slots[s] != 0)
            s = (s + 1) & (cap - 1);
        slots[s] = (uint32_t)(i + 1);
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

uint64_t *lmc_strmap_slot(lmc_strmap *m, const char *key, size_t len, bool *created)
{
    uint64_t h = lmc_str_hash(key, len);
    size_t s = (size_t)h & (m->cap - 1);
    for (; m->slots[s] != 0; s = (s + 1) & (m->cap - 1)) {
        entry *e = &m->entries[m->slots[s] - 1];
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0) {
            if (created != NULL)
                *created = false;
            return &e->value;
        }
    }
    if ((m->size + 1) * 10 > m->cap * 7) {
        if (!grow(m))
            return NULL;
        return lmc_strmap_slot(m, key, len, created);
    }
    if (m->size == m->entries_cap) {
        size_t ncap = m->entries_cap ? m->entries_cap * 2 : 32;
        entry *ne = realloc(m->entries, ncap * sizeof(*ne));
        if (ne == NULL)
            return NULL;
        m->entries = ne;
        m->entries_cap = ncap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return NULL;
    if (len > 0)
        memcpy(copy, key, len);
    copy[len] = '\0';
    m->entries[m->size] = (entry){copy, len, h, 0};
    m->slots[s] = (uint32_t)(m->size + 1);
    m->size++;
    if (created != NULL)
        *created = true;
    return &m->entries[m->size - 1].value;
}

size_t lmc_strmap_size(const lmc_strmap *m)
{
    return m->size;
}

const char *lmc_strmap_key_at(const lmc_strmap *m, size_t i, size_t *len)
{
    if (len != NULL)
        *len = m->entries[i].len;
    return m->entries[i].key;
}

uint64_t lmc_strmap_value_at(const lmc_strmap *m, size_t i)
{
    return m->entries[i].value;
}

uint64_t lmc_str_hash(const char *s, size_t len)
{
    return XXH3_64bits(s, len);
}
