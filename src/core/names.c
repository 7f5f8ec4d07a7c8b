/*
 * names.c -- joining and searching tables of names (see names.h).
 */
#include "core/names.h"

#include <string.h>

/* How much of an unknown name a message quotes. */
#define QUOTE_MAX 64

/* Append s to buf, keeping what fits; *len counts everything asked for. */
static void put(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (*len + 1 < cap) {
        size_t room = cap - 1 - *len;
        memcpy(buf + *len, s, n < room ? n : room);
    }
    *len += n;
}

size_t lmc_names_join(const char *const *names, size_t n, const char *sep, const char *last_sep,
                      char *buf, size_t cap)
{
    size_t present = 0;
    for (size_t i = 0; i < n; i++)
        present += names[i] != NULL;
    size_t len = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL)
            continue;
        if (k > 0)
            put(buf, cap, &len, k + 1 == present && last_sep != NULL ? last_sep : sep);
        put(buf, cap, &len, names[i]);
        k++;
    }
    if (cap > 0)
        buf[len < cap ? len : cap - 1] = '\0';
    return len;
}

bool lmc_names_find(const char *const *names, size_t n, const char *s, size_t len, size_t *index)
{
    if (s == NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (names[i] != NULL && strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
            *index = i;
            return true;
        }
    }
    return false;
}

lmc_status lmc_names_parse(const char *const *names, size_t n, const char *what, const char *s,
                           size_t len, size_t *index, lmc_error *err)
{
    if (lmc_names_find(names, n, s, len, index))
        return LMC_OK;
    char expected[256];
    lmc_names_join(names, n, ", ", " or ", expected, sizeof(expected));
    if (s == NULL) {
        s = "(null)";
        len = 6;
    }
    return lmc_error_set(err, LMC_ERR_INVALID, "unknown %s '%.*s%s' (expected %s)", what,
                         (int)(len > QUOTE_MAX ? QUOTE_MAX : len), s, len > QUOTE_MAX ? "..." : "",
                         expected);
}
