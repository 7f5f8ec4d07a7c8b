/*
 * utf8.c -- strict UTF-8 decoding (see utf8.h).
 */
#include "core/utf8.h"

size_t lmc_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t need;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        v = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        v = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < need)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return need;
}

bool lmc_utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* the common case: a run of ASCII */
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = lmc_utf8_decode(p + i, n - i, &cp);
        if (len == 0)
            return false;
        i += len;
    }
    return true;
}
