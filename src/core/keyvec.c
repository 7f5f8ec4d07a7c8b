/*
 * keyvec.c -- a growable array of ObjectKeys (see keyvec.h).
 */
#include "core/keyvec.h"

#include <stdlib.h>
#include <string.h>

lmc_status lmc_keyvec_reserve(lmc_keyvec *v, size_t cap)
{
    if (cap <= v->cap)
        return LMC_OK;
    size_t ncap = v->cap ? v->cap : 16;
    while (ncap < cap)
        ncap *= 2;
    lmc_object_key *nk = realloc(v->keys, ncap * sizeof(*nk));
    if (nk == NULL)
        return LMC_ERR_NOMEM;
    v->keys = nk;
    v->cap = ncap;
    return LMC_OK;
}

lmc_status lmc_keyvec_push(lmc_keyvec *v, const lmc_object_key *key)
{
    return lmc_keyvec_append(v, key, 1);
}

lmc_status lmc_keyvec_append(lmc_keyvec *v, const lmc_object_key *keys, size_t n)
{
    if (n == 0)
        return LMC_OK;
    lmc_status st = lmc_keyvec_reserve(v, v->len + n);
    if (st != LMC_OK)
        return st;
    memcpy(v->keys + v->len, keys, n * sizeof(*keys));
    v->len += n;
    return LMC_OK;
}

void lmc_keyvec_reset(lmc_keyvec *v)
{
    v->len = 0;
}

void lmc_keyvec_free(lmc_keyvec *v)
{
    free(v->keys);
    v->keys = NULL;
    v->len = v->cap = 0;
}
