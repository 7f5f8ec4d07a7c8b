/*
 * counters.c -- the server's call counters (see counters.h).
 */
#include "server/counters.h"

#include <string.h>

#include "core/strbuf.h"

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

char *lmc_counters_log_line(const lmc_server_counters *c)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    const char *sep = "StorageManager calls: ";
#define LOG_ITEM(field, log_name, json_name)                                                       \
    lmc_strbuf_printf(&b, "%s%s=%llu", sep, log_name, (unsigned long long)c->field);               \
    sep = " ";
    LMC_SERVER_SM_CALLS(LOG_ITEM)
    sep = "; ";
    LMC_SERVER_REQUEST_COUNTS(LOG_ITEM)
#undef LOG_ITEM
    return lmc_strbuf_finish(&b);
}

char *lmc_counters_json_members(const lmc_server_counters *c)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    const char *sep = "";
#define JSON_ITEM(field, log_name, json_name)                                                      \
    lmc_strbuf_printf(&b, "%s\"%s\": %llu", sep, json_name, (unsigned long long)c->field);         \
    sep = ", ";
    LMC_SERVER_SM_CALLS(JSON_ITEM)
    LMC_SERVER_REQUEST_COUNTS(JSON_ITEM)
#undef JSON_ITEM
    return lmc_strbuf_finish(&b);
}
