/*
 * flags.c -- command-line value helpers shared by the front ends (flags.h).
 */
#include "core/flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *lmc_flag_value(const char *flag, int argc, char **argv, int *i, bool *matched)
{
    size_t fl = strlen(flag);
    *matched = false;
    if (strncmp(argv[*i], flag, fl) != 0)
        return NULL;
    if (argv[*i][fl] == '=') {
        *matched = true;
        return argv[*i] + fl + 1;
    }
    if (argv[*i][fl] != '\0')
        return NULL;
    *matched = true;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

lmc_status lmc_flag_parse_u64(const char *flag, const char *text, uint64_t lo, uint64_t hi,
                              uint64_t *out, lmc_error *err)
{
    /* strtoull would take "-1" as UINT64_MAX: a sign is refused before it looks. */
    if (text[0] == '-' || text[0] == '\0')
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a non-negative integer", flag,
                             text);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a non-negative integer", flag,
                             text);
    if (x < lo || x > hi)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %llu is not in [%llu, %llu]", flag, x,
                             (unsigned long long)lo, (unsigned long long)hi);
    *out = x;
    return LMC_OK;
}

lmc_status lmc_flag_parse_int(const char *flag, const char *text, int64_t lo, int64_t hi,
                              int64_t *out, lmc_error *err)
{
    char *end = NULL;
    errno = 0;
    long long x = text != NULL ? strtoll(text, &end, 10) : 0;
    if (text == NULL || *text == '\0' || *end != '\0' || errno == ERANGE)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not an integer", flag,
                             text != NULL ? text : "");
    if (x < lo || x > hi)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: %lld is not in [%lld, %lld]", flag, x,
                             (long long)lo, (long long)hi);
    *out = x;
    return LMC_OK;
}

/* strtod over the whole text; false on junk, an empty text or ERANGE. */
static bool scan_double(const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return text[0] != '\0' && *end == '\0' && errno != ERANGE;
}

lmc_status lmc_flag_parse_double(const char *flag, const char *text, double *out, lmc_error *err)
{
    double d;
    if (!scan_double(text, &d))
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a number", flag, text);
    *out = d;
    return LMC_OK;
}

lmc_status lmc_flag_parse_nonneg_double(const char *flag, const char *text, double *out,
                                        lmc_error *err)
{
    double d;
    if (!scan_double(text, &d) || !isfinite(d) || d < 0)
        return lmc_error_set(err, LMC_ERR_INVALID, "%s: '%s' is not a finite number >= 0", flag,
                             text);
    *out = d;
    return LMC_OK;
}
