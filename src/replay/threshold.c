/*
 * threshold.c -- --max-regression thresholds (see threshold.h).
 *
 * Owns nothing past a call but a parsed threshold's two strings. The
 * pattern match is the classic '*' glob with one backtrack point (the
 * last star), linear in practice for names this short.
 *
 * Threads: none; reentrant.
 */
#include "replay/threshold.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GRAMMAR "expected FIGURE=LIMIT, e.g. p99_ms=+10%% or chunk_hit_rate=-0.01"

lmc_status lmc_threshold_parse(const char *spec, lmc_threshold *out, lmc_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *eq = strchr(spec, '=');
    if (eq == NULL)
        return lmc_error_set(err, LMC_ERR_INVALID, "--max-regression '%s': " GRAMMAR, spec);
    if (eq == spec)
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--max-regression '%s': no figure before '=' (" GRAMMAR ")", spec);
    for (const char *p = spec; p < eq; p++) {
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
            return lmc_error_set(err, LMC_ERR_INVALID,
                                 "--max-regression '%s': the figure holds a space or a control "
                                 "character (" GRAMMAR ")",
                                 spec);
    }
    const char *lim = eq + 1;
    if (*lim != '+' && *lim != '-')
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--max-regression '%s': the limit '%s' needs a sign: + when an "
                             "increase is a regression (latency), - when a decrease is (a hit "
                             "rate)",
                             spec, lim);
    const char *num = lim + 1;
    char *end = NULL;
    double v = 0;
    /* A digit or a point first: strtod would also take "inf", "nan", hex and a second sign. */
    bool digits =
        isdigit((unsigned char)num[0]) || (num[0] == '.' && isdigit((unsigned char)num[1]));
    if (digits)
        v = strtod(num, &end);
    bool relative = digits && *end == '%';
    if (!digits || !isfinite(v) || (relative ? end[1] != '\0' : *end != '\0') ||
        (num[0] == '0' && (num[1] == 'x' || num[1] == 'X')))
        return lmc_error_set(err, LMC_ERR_INVALID,
                             "--max-regression '%s': the limit '%s' is not a sign and a number "
                             "(with an optional %%)",
                             spec, lim);
    out->spec = strdup(spec);
    out->pattern = strndup(spec, (size_t)(eq - spec));
    if (out->spec == NULL || out->pattern == NULL) {
        lmc_threshold_free(out);
        return lmc_error_set(err, LMC_ERR_NOMEM, "--max-regression: out of memory");
    }
    out->increase = *lim == '+';
    out->relative = relative;
    out->limit = relative ? v / 100.0 : v;
    return LMC_OK;
}

void lmc_threshold_free(lmc_threshold *t)
{
    free(t->spec);
    free(t->pattern);
    t->spec = t->pattern = NULL;
}

static bool glob(const char *p, const char *s)
{
    const char *star = NULL, *resume = NULL;
    while (*s != '\0') {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star != NULL) {
            p = star + 1;
            s = ++resume;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

bool lmc_figure_pattern_match(const char *pattern, const char *name)
{
    if (glob(pattern, name))
        return true;
    for (const char *dot = strchr(name, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
        if (glob(pattern, dot + 1))
            return true;
    }
    return false;
}

double lmc_relative_change(double base, double new_)
{
    double d = new_ - base;
    if (base != 0)
        return d / fabs(base);
    return d == 0 ? 0.0 : (d > 0 ? INFINITY : -INFINITY);
}

bool lmc_threshold_exceeded(const lmc_threshold *t, double base, double new_)
{
    double move = t->relative ? lmc_relative_change(base, new_) : new_ - base;
    if (!t->increase)
        move = -move;
    return move > t->limit;
}
