/*
 * lru_list.c -- an ordered set of ObjectKeys, oldest first (see lru_list.h).
 *
 * A doubly linked list gives O(1) move-to-end; the keymap gives O(1)
 * lookup. Every mutation that needs memory does its allocation first, so a
 * failure leaves the list exactly as it was and the caller can simply drop
 * the update.
 *
 * Threads: none; the owning policy's mutex guards every call.
 */
#include "storage/lru_list.h"

#include <stdlib.h>

lmc_status lmc_lru_list_init_pooled(lmc_lru_list *l, lmc_pool *pool)
{
    l->head = NULL;
    l->tail = NULL;
    l->pool = pool;
    l->index = lmc_keymap_create(0);
    return l->index ? LMC_OK : LMC_ERR_NOMEM;
}

static lmc_lru_node *node_alloc(lmc_lru_list *l)
{
    return l->pool ? lmc_pool_alloc(l->pool) : malloc(sizeof(lmc_lru_node));
}

static void node_free(lmc_lru_list *l, lmc_lru_node *n)
{
    if (l->pool)
        lmc_pool_free(l->pool, n);
    else
        free(n);
}

void lmc_lru_list_fini(lmc_lru_list *l)
{
    lmc_lru_node *n = l->head;
    while (n) {
        lmc_lru_node *next = n->next;
        node_free(l, n);
        n = next;
    }
    lmc_keymap_destroy(l->index);
    l->head = l->tail = NULL;
    l->index = NULL;
}

size_t lmc_lru_list_size(const lmc_lru_list *l)
{
    return lmc_keymap_size(l->index);
}

static lmc_lru_node *find(const lmc_lru_list *l, const lmc_object_key *key)
{
    void **slot = lmc_keymap_get(l->index, key);
    return slot ? *slot : NULL;
}

bool lmc_lru_list_contains(const lmc_lru_list *l, const lmc_object_key *key)
{
    return find(l, key) != NULL;
}

static void unlink_node(lmc_lru_list *l, lmc_lru_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

static void link_tail(lmc_lru_list *l, lmc_lru_node *n)
{
    n->prev = l->tail;
    n->next = NULL;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
}

bool lmc_lru_list_touch(lmc_lru_list *l, const lmc_object_key *key)
{
    lmc_lru_node *n = find(l, key);
    if (n == NULL)
        return false;
    if (n != l->tail) {
        unlink_node(l, n);
        link_tail(l, n);
    }
    return true;
}

lmc_status lmc_lru_list_push_back(lmc_lru_list *l, const lmc_object_key *key)
{
    lmc_lru_node *n = node_alloc(l);
    if (n == NULL)
        return lmc_lru_list_touch(l, key) ? LMC_OK : LMC_ERR_NOMEM;
    void **existing;
    if (lmc_keymap_insert(l->index, key, n, &existing) != LMC_OK) {
        node_free(l, n);
        return lmc_lru_list_touch(l, key) ? LMC_OK : LMC_ERR_NOMEM;
    }
    if (existing != NULL) { /* already tracked: move it to the end */
        node_free(l, n);
        n = *existing;
        if (n != l->tail) {
            unlink_node(l, n);
            link_tail(l, n);
        }
        return LMC_OK;
    }
    n->key = *key;
    link_tail(l, n);
    return LMC_OK;
}

bool lmc_lru_list_remove(lmc_lru_list *l, const lmc_object_key *key)
{
    void *old = NULL;
    if (!lmc_keymap_remove(l->index, key, &old))
        return false;
    unlink_node(l, old);
    node_free(l, old);
    return true;
}

bool lmc_lru_list_pop_front(lmc_lru_list *l, lmc_object_key *out)
{
    lmc_lru_node *n = l->head;
    if (n == NULL)
        return false;
    lmc_keymap_remove(l->index, &n->key, NULL);
    unlink_node(l, n);
    if (out)
        *out = n->key;
    node_free(l, n);
    return true;
}

lmc_status lmc_lru_list_transfer(lmc_lru_list *from, lmc_lru_list *to, const lmc_object_key *key)
{
    lmc_lru_node *n = find(from, key);
    if (n == NULL)
        return LMC_ERR_NOT_FOUND;
    if (from == to) {
        lmc_lru_list_touch(from, key);
        return LMC_OK;
    }
    /* Insert into the destination index first: it is the only step that can fail. */
    if (lmc_keymap_put(to->index, key, n, NULL) != LMC_OK)
        return LMC_ERR_NOMEM;
    lmc_keymap_remove(from->index, key, NULL);
    unlink_node(from, n);
    link_tail(to, n);
    return LMC_OK;
}

lmc_status lmc_lru_list_collect(const lmc_lru_list *l, size_t want, lmc_evict_filter filter,
                                void *ud, lmc_keyvec *out, size_t *taken)
{
    size_t got = 0;
    lmc_status st = LMC_OK;
    for (const lmc_lru_node *n = l->head; n && got < want; n = n->next) {
        if (filter && !filter(&n->key, ud))
            continue;
        st = lmc_keyvec_push(out, &n->key);
        if (st != LMC_OK)
            break;
        got++;
    }
    if (taken)
        *taken = got;
    return st;
}
