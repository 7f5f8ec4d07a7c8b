/*
 * keymap.c -- ObjectKey -> pointer hash map (see keymap.h).
 *
 * Linear probing keeps a lookup to one or two cache lines in the common
 * case; backward-shift deletion keeps probe runs short without tombstones,
 * which matters because the L1 table sees as many removals as insertions.
 */
#include "core/keymap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    uint64_t hash; /* 0 marks an empty slot; real hashes are forced non-zero */
    lmc_object_key key;
    void *value;
} slot;

struct lmc_keymap {
    slot *slots;
    size_t cap; /* power of two */
    size_t size;
};

static uint64_t key_hash(const lmc_object_key *key)
{
    uint64_t h = lmc_object_key_hash(key);
    return h ? h : 1;
}

static lmc_status alloc_slots(lmc_keymap *m, size_t cap)
{
    slot *s = calloc(cap, sizeof(*s));
    if (s == NULL)
        return LMC_ERR_NOMEM;
    m->slots = s;
    m->cap = cap;
    return LMC_OK;
}

lmc_keymap *lmc_keymap_create(size_t hint)
{
    lmc_keymap *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    size_t cap = 16;
    while (cap * 7 / 10 < hint)
        cap *= 2;
    if (alloc_slots(m, cap) != LMC_OK) {
        free(m);
        return NULL;
    }
    return m;
}

void lmc_keymap_destroy(lmc_keymap *m)
{
    if (m == NULL)
        return;
    free(m->slots);
    free(m);
}

size_t lmc_keymap_size(const lmc_keymap *m)
{
    return m->size;
}

static size_t find_slot(const lmc_keymap *m, const lmc_object_key *key, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    for (;;) {
        const slot *s = &m->slots[i];
        if (s->hash == 0)
            return SIZE_MAX;
        if (s->hash == h && lmc_object_key_equal(&s->key, key))
            return i;
        i = (i + 1) & mask;
    }
}

void **lmc_keymap_get(const lmc_keymap *m, const lmc_object_key *key)
{
    size_t i = find_slot(m, key, key_hash(key));
    return i == SIZE_MAX ? NULL : &m->slots[i].value;
}

static void insert_new(slot *slots, size_t cap, uint64_t h, const lmc_object_key *key,
                       void *value)
{
    size_t mask = cap - 1;
    size_t i = (size_t)h & mask;
    while (slots[i].hash != 0)
        i = (i + 1) & mask;
    slots[i].hash = h;
    slots[i].key = *key;
    slots[i].value = value;
}

static lmc_status grow(lmc_keymap *m)
{
    size_t ncap = m->cap * 2;
    slot *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL)
        return LMC_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].hash != 0)
            insert_new(ns, ncap, m->slots[i].hash, &m->slots[i].key, m->slots[i].value);
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return LMC_OK;
}

lmc_status lmc_keymap_put(lmc_keymap *m, const lmc_object_key *key, void *value, void **old)
{
    uint64_t h = key_hash(key);
    size_t i = find_slot(m, key, h);
    if (i != SIZE_MAX) {
        if (old)
            *old = m->slots[i].value;
        m->slots[i].value = value;
        return LMC_OK;
    }
    if ((m->size + 1) * 10 > m->cap * 7) {
        lmc_status st = grow(m);
        if (st != LMC_OK)
            return st;
    }
    insert_new(m->slots, m->cap, h, key, value);
    m->size++;
    if (old)
        *old = NULL;
    return LMC_OK;
}

bool lmc_keymap_remove(lmc_keymap *m, const lmc_object_key *key, void **old)
{
    size_t i = find_slot(m, key, key_hash(key));
    if (i == SIZE_MAX)
        return false;
    if (old)
        *old = m->slots[i].value;
    /* Backward-shift: pull later members of the probe run into the hole. */
    size_t mask = m->cap - 1;
    size_t hole = i;
    size_t j = (i + 1) & mask;
    while (m->slots[j].hash != 0) {
        size_t home = (size_t)m->slots[j].hash & mask;
        /* Move j into the hole if its home is not in (hole, j] cyclically. */
        bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
        j = (j + 1) & mask;
    }
    memset(&m->slots[hole], 0, sizeof(slot));
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
    return (i < m->cap && m->slots[i].hash != 0) ? &m->slots[i].key : NULL;
}

void *lmc_keymap_value_at(const lmc_keymap *m, size_t i)
{
    return (i < m->cap && m->slots[i].hash != 0) ? m->slots[i].value : NULL;
}
