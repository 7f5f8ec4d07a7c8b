/*
 * pool.c -- a pool of fixed-size objects (see pool.h).
 */
#include "core/pool.h"

#include <stdint.h>
#include <stdlib.h>

#define ALIGN (sizeof(void *) > 16 ? sizeof(void *) : 16)

void lmc_pool_init(lmc_pool *p, size_t obj_size, size_t per_chunk)
{
    if (obj_size < sizeof(void *))
        obj_size = sizeof(void *);
    p->obj_size = (obj_size + ALIGN - 1) / ALIGN * ALIGN;
    p->per_chunk = per_chunk ? per_chunk : 256;
    p->free_list = NULL;
    p->chunks = NULL;
    p->bump = p->bump_end = NULL;
    p->live = 0;
}

void lmc_pool_destroy(lmc_pool *p)
{
    void *c = p->chunks;
    while (c != NULL) {
        void *next = *(void **)c;
        free(c);
        c = next;
    }
    p->chunks = p->free_list = NULL;
    p->bump = p->bump_end = NULL;
    p->live = 0;
}

void *lmc_pool_alloc(lmc_pool *p)
{
    void *obj = p->free_list;
    if (obj != NULL) {
        p->free_list = *(void **)obj;
    } else {
        if (p->bump == p->bump_end) {
            /* The chunk header (the link) takes one aligned object's room. */
            char *c = malloc(ALIGN + p->obj_size * p->per_chunk);
            if (c == NULL)
                return NULL;
            *(void **)c = p->chunks;
            p->chunks = c;
            p->bump = c + ALIGN;
            p->bump_end = p->bump + p->obj_size * p->per_chunk;
        }
        obj = p->bump;
        p->bump += p->obj_size;
    }
    p->live++;
    return obj;
}

void lmc_pool_free(lmc_pool *p, void *obj)
{
    if (obj == NULL)
        return;
    *(void **)obj = p->free_list;
    p->free_list = obj;
    p->live--;
}
