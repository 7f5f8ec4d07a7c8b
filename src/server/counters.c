/*
 * counters.c -- the server's call counters (see counters.h).
 */
#include "server/counters.h"

#include <stdbool.h>
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

/*
 * The log line and the JSON members walk the same rows in the same order
 * and differ only in punctuation and which of a row's names they print, so
 * one walk renders both: json quotes the name and follows it with ": ",
 * the log line follows it with "=". first goes before the first count, sep
 * between counts, group_sep between the calls and the request counts.
 */
static char *render(const lmc_server_counters *c, bool json, const char *first, const char *sep,
                    const char *group_sep)
{
    lmc_strbuf b = LMC_STRBUF_INIT;
    const char *before = first;
    const char *quote = json ? "\"" : "";
    const char *assign = json ? "\": " : "=";
#define ITEM(field, log_name, json_name)                                                           \
    lmc_strbuf_printf(&b, "%s%s%s%s%llu", before, quote, json ? json_name : log_name, assign,      \
                      (unsigned long long)c->field);                                               \
    before = sep;
    LMC_SERVER_SM_CALLS(ITEM)
    before = group_sep;
    LMC_SERVER_REQUEST_COUNTS(ITEM)
#undef ITEM
    return lmc_strbuf_finish(&b);
}

char *lmc_counters_log_line(const lmc_server_counters *c)
{
    return render(c, false, "StorageManager calls: ", " ", "; ");
}

char *lmc_counters_json_members(const lmc_server_counters *c)
{
    return render(c, true, "", ", ", ", ");
}
