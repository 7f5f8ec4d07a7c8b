/*
 * text.c -- numbers at a sane width (see text.h).
 */
#include "core/text.h"

#include <math.h>
#include <stdio.h>

size_t lmc_text_seconds(double s, char *buf, size_t cap)
{
    int n;
    if (isnan(s))
        n = snprintf(buf, cap, "nan");
    else if (isinf(s))
        n = snprintf(buf, cap, s < 0 ? "-inf" : "inf");
    else if (fabs(s) < 1e9)
        n = snprintf(buf, cap, "%.3f", s);
    else
        n = snprintf(buf, cap, "%.3e", s);
    return n > 0 ? (size_t)n : 0;
}
