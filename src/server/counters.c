/*
 * counters.c -- the server's call counters (see counters.h).
 */
#include "server/counters.h"

#include <string.h>

void lmc_counters_init(lmc_counters *k)
{
    memset(&k->c, 0, sizeof(k->c));
    pthread_mutex_init(&k->mu, NULL);
}

void lmc_counters_destroy(lmc_counters *k)
{
    pthread_mutex_destroy(&k->mu);
}

void lmc_counters_add(lmc_counters *k, uint64_t *field, uint64_t n)
{
    pthread_mutex_lock(&k->mu);
    *field += n;
    pthread_mutex_unlock(&k->mu);
}

lmc_server_counters lmc_counters_get(lmc_counters *k)
{
    pthread_mutex_lock(&k->mu);
    lmc_server_counters c = k->c;
    pthread_mutex_unlock(&k->mu);
    return c;
}
