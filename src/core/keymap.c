/*
 * keymap.c -- ObjectKey -> pointer hash map (see keymap.h).
 *
 * Two arrays: a dense array of entries {key, value, hash} in insertion
 * order (with swap-removal), and an open-addressing index of 8-byte slots
 * {entry number + 1, upper 32 bits of the hash}. A probe touches only the
 * small index (eight slots per cache line) and reads an entry -- 120
 * bytes, usually a cache miss -- only when the stored hash bits match. That
 * matters because the L1 table is large and most reserve_write lookups are
 * misses: with keys stored in the slots themselves, every probe step was a
 * cache miss.
 *
 * Linear probing with backward-shift deletion keeps probe runs short
 * without tombstones; the index grows at 70% load.
 */
#include "core/keymap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    lmc_object_key key;
    void *value;
    uint64_t hash;
} entry;

typedef struct slot {
    uint32_t idx1; /* entry index + 1; 0 marks an empty slot */
    uint32_t tag;  /* upper 32 bits of the hash */
} slot;

struct lmc_keymap {
    slot *slots;
    size_t cap; /* slots, a power of two */
    entry *entries;
    size_t size;
    size_t entries_cap;
};

static uint32_t tag_of(uint64_t h)
{
    return (uint32_t)(h >> 32);
}

lmc_keymap *lmc_keymap_create(size_t hint)
{
    lmc_keymap *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    size_t cap = 16;
    while (cap * 7 / 10 < hint && cap < ((size_t)1 << 31))
        cap *= 2;
    m->slots = calloc(cap, sizeof(*m->slots));
    m->entries_cap = cap * 7 / 10;
    m->entries = malloc(m->entries_cap * sizeof(*m->entries));
    if (m->slots == NULL || m->entries == NULL) {
        free(m->slots);
        free(m->entries);
        free(m);
        return NULL;
    }
    m->cap = cap;
    return m;
}

void lmc_keymap_destroy(lmc_keymap *m)
{
    if (m == NULL)
        return;
    free(m->slots);
    free(m->entries);
    free(m);
}

size_t lmc_keymap_size(const lmc_keymap *m)
{
    return m->size;
}

/* The slot holding key, or SIZE_MAX. */
static size_t find_slot(const lmc_keymap *m, const lmc_object_key *key, uint64_t h)
{
    size_t mask = m->cap - 1;
    uint32_t tag = tag_of(h);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        const slot *s = &m->slots[i];
        if (s->idx1 == 0)
            return SIZE_MAX;
        if (s->tag == tag) {
            const entry *e = &m->entries[s->idx1 - 1];
            if (e->hash == h && lmc_object_key_equal(&e->key, key))
                return i;
        }
    }
}

/* The slot that points at entry idx (which must be present). */
static size_t slot_of_entry(const lmc_keymap *m, size_t idx)
{
    size_t mask = m->cap - 1;
    uint64_t h = m->entries[idx].hash;
    size_t i = (size_t)h & mask;
    while (m->slots[i].idx1 != idx + 1)
        i = (i + 1) & mask;
    return i;
}

void **lmc_keymap_get(const lmc_keymap *m, const lmc_object_key *key)
{
    size_t i = find_slot(m, key, lmc_object_key_hash(key));
    return i == SIZE_MAX ? NULL : &m->entries[m->slots[i].idx1 - 1].value;
}

static void index_insert(slot *slots, size_t cap, uint64_t h, uint32_t idx1)
{
    size_t mask = cap - 1;
    size_t i = (size_t)h & mask;
    while (slots[i].idx1 != 0)
        i = (i + 1) & mask;
    slots[i].idx1 = idx1;
    slots[i].tag = tag_of(h);
}

static lmc_status grow(lmc_keymap *m)
{
    if (m->cap >= ((size_t)1 << 31))
        return LMC_ERR_NOMEM; /* entry numbers are 32-bit */
    size_t ncap = m->cap * 2;
    size_t nentries = ncap * 7 / 10;
    slot *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL)
        return LMC_ERR_NOMEM;
    entry *ne = realloc(m->entries, nentries * sizeof(*ne));
    if (ne == NULL) {
        free(ns);
        return LMC_ERR_NOMEM;
    }
    m->entries = ne;
    m->entries_cap = nentries;
    for (size_t j = 0; j < m->size; j++)
        index_insert(ns, ncap, ne[j].hash, (uint32_t)(j + 1));
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return LMC_OK;
}

lmc_status lmc_keymap_put(lmc_keymap *m, const lmc_object_key *key, void *value, void **old)
{
    uint64_t h = lmc_object_key_hash(key);
    size_t i = find_slot(m, key, h);
    if (i != SIZE_MAX) {
        entry *e = &m->entries[m->slots[i].idx1 - 1];
        if (old)
            *old = e->value;
        e->value = value;
        return LMC_OK;
    }
    if ((m->size + 1) * 10 > m->cap * 7 || m->size + 1 > m->entries_cap) {
        lmc_status st = grow(m);
        if (st != LMC_OK)
            return st;
    }
    entry *e = &m->entries[m->size];
    e->key = *key;
    e->value = value;
    e->hash = h;
    m->size++;
    index_insert(m->slots, m->cap, h, (uint32_t)m->size);
    if (old)
        *old = NULL;
    return LMC_OK;
}

lmc_status lmc_keymap_insert(lmc_keymap *m, const lmc_object_key *key, void *value,
                             void ***existing)
{
    uint64_t h = lmc_object_key_hash(key);
    if ((m->size + 1) * 10 > m->cap * 7 || m->size + 1 > m->entries_cap) {
        lmc_status st = grow(m);
        if (st != LMC_OK)
            return st;
    }
    /* One walk of the probe run: either the key or the first empty slot. */
    size_t mask = m->cap - 1;
    uint32_t tag = tag_of(h);
    size_t i = (size_t)h & mask;
    for (; m->slots[i].idx1 != 0; i = (i + 1) & mask) {
        if (m->slots[i].tag != tag)
            continue;
        entry *e = &m->entries[m->slots[i].idx1 - 1];
        if (e->hash == h && lmc_object_key_equal(&e->key, key)) {
            *existing = &e->value;
            return LMC_OK;
        }
    }
    entry *e = &m->entries[m->size];
    e->key = *key;
    e->value = value;
    e->hash = h;
    m->size++;
    m->slots[i].idx1 = (uint32_t)m->size;
    m->slots[i].tag = tag;
    *existing = NULL;
    return LMC_OK;
}

bool lmc_keymap_remove(lmc_keymap *m, const lmc_object_key *key, void **old)
{
    size_t i = find_slot(m, key, lmc_object_key_hash(key));
    if (i == SIZE_MAX)
        return false;
    size_t idx = m->slots[i].idx1 - 1;
    if (old)
        *old = m->entries[idx].value;

    /* Backward-shift: pull later members of the probe run into the hole. */
    size_t mask = m->cap - 1;
    size_t hole = i;
    size_t j = (i + 1) & mask;
    while (m->slots[j].idx1 != 0) {
        size_t home = (size_t)m->entries[m->slots[j].idx1 - 1].hash & mask;
        /* Move j into the hole unless its home lies in (hole, j] cyclically. */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
        j = (j + 1) & mask;
    }
    m->slots[hole].idx1 = 0;
    m->slots[hole].tag = 0;

    /* Keep the entries dense: move the last one into the freed place. */
    size_t last = m->size - 1;
    if (idx != last) {
        size_t s = slot_of_entry(m, last);
        m->entries[idx] = m->entries[last];
        m->slots[s].idx1 = (uint32_t)(idx + 1);
    }
    m->size--;
    return true;
}

void lmc_keymap_clear(lmc_keymap *m)
{
    memset(m->slots, 0, m->cap * sizeof(slot));
    m->size = 0;
}

size_t lmc_keymap_capacity(const lmc_keymap *m)
{
    return m->cap;
}

const lmc_object_key *lmc_keymap_key_at(const lmc_keymap *m, size_t i)
{
    return i < m->size ? &m->entries[i].key : NULL;
}

void *lmc_keymap_value_at(const lmc_keymap *m, size_t i)
{
    return i < m->size ? m->entries[i].value : NULL;
}
